//! # switchyard-encoder
//!
//! A sentence encoder run in process, for the questions the trained router is in doubt about:
//! a BERT-family transformer (the shape of all-MiniLM-L6-v2: post-layer-norm blocks, GELU,
//! learnt absolute positions) read from a sentence-transformers folder (`config.json`,
//! `vocab.txt`, `model.safetensors`), mean-pooled over its tokens and scaled to unit length.
//!
//! It is slow next to the router (milliseconds, not microseconds) and heavy (the weights are
//! tens of megabytes), so a function loads it on the first question that needs it, never at
//! start.
//!
//! # Layout
//!
//! - [`wordpiece`]: the uncased WordPiece tokenizer.
//! - [`tensors`]: the safetensors file.
#![warn(missing_docs)]

pub mod tensors;
pub mod wordpiece;

use ndarray::linalg::general_mat_mul;
use ndarray::{Array2, ArrayView2};
use std::path::Path;
use tensors::Tensors;
use wordpiece::WordPiece;

/// Why an encoder cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum EncoderError {
    /// A file of the folder could not be read.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The folder holds a model of another shape.
    #[error("{path}: {reason}")]
    Shape {
        /// The file.
        path: String,
        /// The rule it broke.
        reason: String,
    },
}

/// The model's shape, from `config.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Width of a token's vector.
    pub hidden: usize,
    /// Transformer blocks.
    pub layers: usize,
    /// Attention heads per block.
    pub heads: usize,
    /// Width of the feed-forward layer.
    pub intermediate: usize,
    /// Longest input, in tokens, `[CLS]` and `[SEP]` included.
    pub max_tokens: usize,
}

/// One linear layer: `y = x Wᵀ + b`, `W` stored `out × in`.
struct Linear {
    weight: Array2<f32>,
    bias: Vec<f32>,
}

impl Linear {
    /// `x` (`rows × in`) → `rows × out`, row-major.
    fn apply(&self, x: &[f32], rows: usize) -> Vec<f32> {
        let (out, inp) = self.weight.dim();
        let x = ArrayView2::from_shape((rows, inp), x).expect("rows × in values");
        let mut y = Array2::from_shape_fn((rows, out), |(_, o)| self.bias[o]);
        general_mat_mul(1.0, &x, &self.weight.t(), 1.0, &mut y);
        y.into_raw_vec_and_offset().0
    }
}

/// Layer normalization's gain and bias.
struct Norm {
    gain: Vec<f32>,
    bias: Vec<f32>,
}

/// BERT's layer-norm epsilon.
const NORM_EPS: f32 = 1e-12;

impl Norm {
    /// Normalise each row of `x` in place.
    fn apply(&self, x: &mut [f32]) {
        let width = self.gain.len();
        for row in x.chunks_mut(width) {
            let mean = row.iter().sum::<f32>() / width as f32;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / width as f32;
            let scale = 1.0 / (var + NORM_EPS).sqrt();
            for ((v, g), b) in row.iter_mut().zip(&self.gain).zip(&self.bias) {
                *v = (*v - mean) * scale * g + b;
            }
        }
    }
}

/// One transformer block.
struct Block {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: Norm,
    up: Linear,
    down: Linear,
    out_norm: Norm,
}

/// A loaded sentence encoder.
pub struct Encoder {
    shape: Shape,
    vocab: WordPiece,
    words: Vec<f32>,
    positions: Vec<f32>,
    token_type: Vec<f32>,
    embedding_norm: Norm,
    blocks: Vec<Block>,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder").field("shape", &self.shape).field("vocabulary", &self.vocab.len()).finish()
    }
}

fn read(path: &Path) -> Result<Vec<u8>, EncoderError> {
    std::fs::read(path).map_err(|e| EncoderError::File { path: path.display().to_string(), reason: e.to_string() })
}

fn shape_error(path: &Path, reason: impl Into<String>) -> EncoderError {
    EncoderError::Shape { path: path.display().to_string(), reason: reason.into() }
}

impl Encoder {
    /// Load the encoder of a sentence-transformers folder.
    pub fn load(dir: &Path) -> Result<Encoder, EncoderError> {
        let config_path = dir.join("config.json");
        let config: serde_json::Value = serde_json::from_slice(&read(&config_path)?)
            .map_err(|e| shape_error(&config_path, format!("not JSON: {e}")))?;
        let field = |name: &str| {
            config[name]
                .as_u64()
                .map(|v| v as usize)
                .ok_or_else(|| shape_error(&config_path, format!("`{name}` is missing or not a whole number")))
        };
        let shape = Shape {
            hidden: field("hidden_size")?,
            layers: field("num_hidden_layers")?,
            heads: field("num_attention_heads")?,
            intermediate: field("intermediate_size")?,
            max_tokens: field("max_position_embeddings")?.min(MAX_TOKENS),
        };
        if shape.heads == 0 || shape.hidden % shape.heads != 0 {
            return Err(shape_error(&config_path, "`hidden_size` is not a multiple of `num_attention_heads`"));
        }
        if let Some(act) = config["hidden_act"].as_str().filter(|a| *a != "gelu") {
            return Err(shape_error(&config_path, format!("`hidden_act` is {act:?}; only \"gelu\" is supported")));
        }
        let vocab_path = dir.join("vocab.txt");
        let vocab_text = String::from_utf8(read(&vocab_path)?).map_err(|e| shape_error(&vocab_path, e.to_string()))?;
        let vocab = WordPiece::from_vocab(&vocab_text)
            .ok_or_else(|| shape_error(&vocab_path, "no [UNK], [CLS] or [SEP] piece"))?;
        let weights_path = dir.join("model.safetensors");
        let file = std::fs::File::open(&weights_path)
            .map_err(|e| EncoderError::File { path: weights_path.display().to_string(), reason: e.to_string() })?;
        let tensors =
            Tensors::parse(std::io::BufReader::new(file)).map_err(|reason| shape_error(&weights_path, reason))?;
        let (h, i) = (shape.hidden, shape.intermediate);
        let get =
            |name: &str, dims: &[usize]| tensors.f32(name, dims).map_err(|reason| shape_error(&weights_path, reason));
        let linear = |name: &str, out: usize, inp: usize| -> Result<Linear, EncoderError> {
            let weight = Array2::from_shape_vec((out, inp), get(&format!("{name}.weight"), &[out, inp])?)
                .map_err(|e| shape_error(&weights_path, e.to_string()))?;
            Ok(Linear { weight, bias: get(&format!("{name}.bias"), &[out])? })
        };
        let norm = |name: &str| -> Result<Norm, EncoderError> {
            Ok(Norm { gain: get(&format!("{name}.weight"), &[h])?, bias: get(&format!("{name}.bias"), &[h])? })
        };
        let words = get("embeddings.word_embeddings.weight", &[vocab.len(), h])?;
        let positions_all =
            tensors.f32_rows("embeddings.position_embeddings.weight", h).map_err(|r| shape_error(&weights_path, r))?;
        let shape = Shape { max_tokens: shape.max_tokens.min(positions_all.len() / h), ..shape };
        let positions = positions_all[..shape.max_tokens * h].to_vec();
        let token_type = tensors
            .f32_rows("embeddings.token_type_embeddings.weight", h)
            .map_err(|r| shape_error(&weights_path, r))?;
        let token_type = token_type[..h].to_vec();
        let mut blocks = Vec::with_capacity(shape.layers);
        for layer in 0..shape.layers {
            let p = format!("encoder.layer.{layer}");
            blocks.push(Block {
                query: linear(&format!("{p}.attention.self.query"), h, h)?,
                key: linear(&format!("{p}.attention.self.key"), h, h)?,
                value: linear(&format!("{p}.attention.self.value"), h, h)?,
                attention_out: linear(&format!("{p}.attention.output.dense"), h, h)?,
                attention_norm: norm(&format!("{p}.attention.output.LayerNorm"))?,
                up: linear(&format!("{p}.intermediate.dense"), i, h)?,
                down: linear(&format!("{p}.output.dense"), h, i)?,
                out_norm: norm(&format!("{p}.output.LayerNorm"))?,
            });
        }
        Ok(Encoder {
            embedding_norm: norm("embeddings.LayerNorm")?,
            shape,
            vocab,
            words,
            positions,
            token_type,
            blocks,
        })
    }

    /// The model's shape.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// Width of a sentence's vector.
    pub fn dims(&self) -> usize {
        self.shape.hidden
    }

    /// The token ids the model reads for `text`: `[CLS]`, its pieces (cut to fit), `[SEP]`.
    pub fn tokens(&self, text: &str) -> Vec<u32> {
        let mut ids = vec![self.vocab.cls];
        ids.extend(self.vocab.encode(text, self.shape.max_tokens - 2));
        ids.push(self.vocab.sep);
        ids
    }

    /// How many blocks [`Encoder::embed_layers`] reads when asked for `layers`: at least one, at
    /// most every block. Its vector is this times [`Encoder::dims`] long.
    pub fn layers_read(&self, layers: usize) -> usize {
        layers.clamp(1, self.blocks.len().max(1))
    }

    /// `text`'s sentence vector: the mean of its tokens' last hidden states, unit length.
    pub fn embed(&self, text: &str) -> Vec<f32> {
        self.embed_layers(text, 1)
    }

    /// `text`'s vector from its last `layers` blocks ([`Encoder::layers_read`] of them): for
    /// each block, the mean of its tokens' hidden states at unit length, the deepest first, side
    /// by side and scaled by `1/√layers`, so that the whole is unit length too. It is
    /// `layers_read(layers) × dims()` long, and `embed_layers(text, 1)` is [`Encoder::embed`].
    /// A linear model reading the last two blocks tells intents apart better than one reading
    /// the last alone (docs/performance.md).
    pub fn embed_layers(&self, text: &str, layers: usize) -> Vec<f32> {
        let layers = self.layers_read(layers);
        let ids = self.tokens(text);
        let (t, h) = (ids.len(), self.shape.hidden);
        let mut x = Vec::with_capacity(t * h);
        for (pos, &id) in ids.iter().enumerate() {
            let word = &self.words[id as usize * h..(id as usize + 1) * h];
            let place = &self.positions[pos * h..(pos + 1) * h];
            x.extend(word.iter().zip(place).zip(&self.token_type).map(|((w, p), k)| w + p + k));
        }
        self.embedding_norm.apply(&mut x);
        let mut pooled = vec![0.0f32; layers * h];
        let first_kept = self.blocks.len().saturating_sub(layers);
        for (i, block) in self.blocks.iter().enumerate() {
            self.block(block, &mut x, t);
            if i >= first_kept {
                // Deepest first: the last block fills the first `h` places.
                let slot = self.blocks.len() - 1 - i;
                pool_unit(&x, &mut pooled[slot * h..(slot + 1) * h]);
            }
        }
        if self.blocks.is_empty() {
            pool_unit(&x, &mut pooled);
        }
        if layers > 1 {
            let scale = 1.0 / (layers as f32).sqrt();
            pooled.iter_mut().for_each(|v| *v *= scale);
        }
        pooled
    }

    /// One transformer block over `x` (`t × hidden`), in place.
    fn block(&self, b: &Block, x: &mut Vec<f32>, t: usize) {
        let h = self.shape.hidden;
        let heads = self.shape.heads;
        let d = h / heads;
        let (q, k, v) = (b.query.apply(x, t), b.key.apply(x, t), b.value.apply(x, t));
        let scale = 1.0 / (d as f32).sqrt();
        let mut context = vec![0.0f32; t * h];
        let mut weights = vec![0.0f32; t];
        for head in 0..heads {
            let off = head * d;
            for i in 0..t {
                let qi = &q[i * h + off..i * h + off + d];
                for (j, w) in weights.iter_mut().enumerate() {
                    let kj = &k[j * h + off..j * h + off + d];
                    *w = qi.iter().zip(kj).map(|(a, b)| a * b).sum::<f32>() * scale;
                }
                let max = weights.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let mut sum = 0.0;
                for w in weights.iter_mut() {
                    *w = (*w - max).exp();
                    sum += *w;
                }
                let out = &mut context[i * h + off..i * h + off + d];
                for (j, w) in weights.iter().enumerate() {
                    let vj = &v[j * h + off..j * h + off + d];
                    for (o, val) in out.iter_mut().zip(vj) {
                        *o += w / sum * val;
                    }
                }
            }
        }
        let mut attended = b.attention_out.apply(&context, t);
        for (a, r) in attended.iter_mut().zip(x.iter()) {
            *a += r;
        }
        b.attention_norm.apply(&mut attended);
        let mut up = b.up.apply(&attended, t);
        up.iter_mut().for_each(|u| *u = gelu(*u));
        let mut down = b.down.apply(&up, t);
        for (o, r) in down.iter_mut().zip(&attended) {
            *o += r;
        }
        b.out_norm.apply(&mut down);
        *x = down;
    }
}

/// The mean of `x`'s rows (`out.len()` wide) into `out`, at unit length.
fn pool_unit(x: &[f32], out: &mut [f32]) {
    for row in x.chunks(out.len()) {
        for (p, v) in out.iter_mut().zip(row) {
            *p += v;
        }
    }
    let norm = out.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
    out.iter_mut().for_each(|v| *v /= norm);
}

/// What identifies the encoder of a sentence-transformers folder without reading its weights:
/// a hash (FNV-1a, the same on every platform) of its configuration, its vocabulary and the
/// header of its weights file (names, shapes and offsets of every tensor).
pub fn identity(dir: &Path) -> Result<u64, EncoderError> {
    let mut h = fnv(&read(&dir.join("config.json"))?);
    h = h.rotate_left(7) ^ fnv(&read(&dir.join("vocab.txt"))?);
    let weights = dir.join("model.safetensors");
    let file_error = |e: String| EncoderError::File { path: weights.display().to_string(), reason: e };
    let mut file = std::fs::File::open(&weights).map_err(|e| file_error(e.to_string()))?;
    let len = file.metadata().map_err(|e| file_error(e.to_string()))?.len();
    let header = tensors::header(&mut file, len).map_err(|reason| shape_error(&weights, reason))?;
    Ok(h.rotate_left(7) ^ fnv(&header))
}

/// FNV-1a, 64 bits.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// The longest input read, in tokens; longer texts are cut (sentence-transformers' default for
/// this family).
pub const MAX_TOKENS: usize = 256;

/// GELU, the exact (error-function) form BERT uses.
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x / std::f32::consts::SQRT_2))
}

/// The error function (Abramowitz and Stegun 7.1.26, absolute error below 1.5e-7).
fn erf(x: f32) -> f32 {
    let sign = x.signum();
    let x = f64::from(x.abs());
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly =
        t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    sign * (1.0 - poly * (-x * x).exp()) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        for (x, want) in
            [(0.0f32, 0.0f32), (0.5, 0.520_499_9), (1.0, 0.842_700_8), (-1.0, -0.842_700_8), (2.5, 0.999_593_1)]
        {
            assert!((erf(x) - want).abs() < 2e-7, "erf({x}) = {}", erf(x));
        }
        assert!((gelu(1.0) - 0.841_344_7).abs() < 1e-6);
    }

    #[test]
    fn a_folder_without_a_model_is_refused_by_file() {
        let err = Encoder::load(Path::new("/nonexistent-encoder")).expect_err("no folder");
        assert!(err.to_string().starts_with("/nonexistent-encoder/config.json: "), "{err}");
    }
}
