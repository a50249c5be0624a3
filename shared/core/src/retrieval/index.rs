//! The embedded index: chunks with their term frequencies (for BM25) and hashed vectors (for
//! the dense list), built from a folder or loaded from the JSON file `switchyard index build`
//! writes.
//!
//! The file holds the documents' metadata, the chunking settings and each chunk's text and
//! term frequencies; document frequencies, lengths and vectors are derived when it is loaded
//! (a few milliseconds for the shipped corpus), so the file cannot disagree with itself.

use super::corpus::{chunk, read_folder, Chunking, Document};
use super::terms::{content_words, terms};
use super::IndexError;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// Version of the index file format.
pub const FORMAT: u32 = 1;
/// Dimensions of the hashed vectors.
pub const DIMENSIONS: usize = 1024;
/// BM25 term-frequency saturation.
const K1: f64 = 1.2;
/// BM25 length normalization.
const B: f64 = 0.75;

/// A document as the index keeps it (without its text: the chunks hold that).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DocumentMeta {
    /// File name without extension.
    pub doc_id: String,
    /// Title.
    pub title: String,
    /// Date as written.
    pub date: Option<String>,
    /// Year of the date.
    pub year: Option<i32>,
    /// Where it came from.
    pub source: String,
}

/// One chunk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Chunk {
    /// `<doc_id>#c<n>`, unique in the index; what citations point to.
    pub chunk_id: String,
    /// Position of its document in [`IndexFile::documents`].
    pub doc: usize,
    /// The text.
    pub text: String,
    /// Term → count.
    pub terms: BTreeMap<String, u32>,
}

/// What the index file holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexFile {
    /// [`FORMAT`].
    pub format: u32,
    /// How the documents were cut.
    pub chunking: Chunking,
    /// The documents.
    pub documents: Vec<DocumentMeta>,
    /// The chunks.
    pub chunks: Vec<Chunk>,
    /// Model embeddings of the chunks, when built with `index build --embeddings`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embeddings: Option<StoredEmbeddings>,
}

/// Largest embedding accepted (Titan v2: 1024, OpenAI's largest: 3072).
pub const MAX_EMBEDDING_DIMENSIONS: usize = 8_192;

/// One model embedding per chunk, in chunk order, as an embedding provider returned them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredEmbeddings {
    /// `openai` or `bedrock`.
    pub provider: String,
    /// The embedding model; queries must be embedded with the same one.
    pub model: String,
    /// Length of every vector.
    pub dimensions: usize,
    /// One vector per chunk.
    pub vectors: Vec<Vec<f32>>,
}

/// Why a vector cannot be used: wrong length, not finite, or all zeros.
pub fn vector_problem(v: &[f32], dimensions: usize) -> Option<String> {
    if v.len() != dimensions {
        return Some(format!("has {} dimensions, not {dimensions}", v.len()));
    }
    if v.iter().any(|x| !x.is_finite()) {
        return Some("holds a value that is not a finite number".into());
    }
    if v.iter().all(|x| *x == 0.0) {
        return Some("is all zeros".into());
    }
    None
}

fn unit(v: &[f32]) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / norm.max(f32::MIN_POSITIVE)).collect()
}

/// A loaded index, ready to search.
#[derive(Debug, Clone)]
pub struct Index {
    file: IndexFile,
    df: HashMap<String, u32>,
    lengths: Vec<u32>,
    avg_len: f64,
    vectors: Vec<[f32; DIMENSIONS]>,
    /// Inverse document frequency of each vector bucket: a feature most chunks share (a
    /// common trigram) says little.
    weights: [f32; DIMENSIONS],
    /// The stored model embeddings, normalized to unit length.
    model_vectors: Option<Vec<Vec<f32>>>,
}

/// A chunk and a score from one ranked list.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// Position in [`Index::chunks`].
    pub chunk: usize,
    /// BM25 score or cosine similarity.
    pub score: f64,
}

impl IndexFile {
    /// Chunk `documents`.
    pub fn from_documents(documents: Vec<Document>, chunking: Chunking) -> IndexFile {
        let mut chunks = Vec::new();
        let mut metas = Vec::with_capacity(documents.len());
        for (n, d) in documents.into_iter().enumerate() {
            for (i, text) in chunk(&d.body, chunking).into_iter().enumerate() {
                let mut tf: BTreeMap<String, u32> = BTreeMap::new();
                for t in terms(&text) {
                    *tf.entry(t).or_default() += 1;
                }
                chunks.push(Chunk { chunk_id: format!("{}#c{}", d.doc_id, i + 1), doc: n, text, terms: tf });
            }
            metas.push(DocumentMeta { doc_id: d.doc_id, title: d.title, date: d.date, year: d.year, source: d.source });
        }
        IndexFile { format: FORMAT, chunking, documents: metas, chunks, embeddings: None }
    }

    /// Read and chunk every document under `dir`.
    pub fn build(dir: &Path, chunking: Chunking) -> Result<IndexFile, IndexError> {
        if let Some(p) = chunking.problem() {
            return Err(IndexError::Document { file: dir.to_path_buf(), message: p });
        }
        Ok(IndexFile::from_documents(read_folder(dir)?, chunking))
    }

    /// Write to `out` through a temporary file in the same folder renamed into place, so a
    /// reader never sees half an index and a failed build leaves the old one.
    pub fn write(&self, out: &Path) -> Result<u64, IndexError> {
        let io = |e: std::io::Error| IndexError::Write { file: out.to_path_buf(), message: e.to_string() };
        let text = serde_json::to_vec(self)
            .map_err(|e| IndexError::Write { file: out.to_path_buf(), message: e.to_string() })?;
        let name = out.file_name().and_then(|n| n.to_str()).unwrap_or("index.json");
        let tmp = out.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
        if let Err(e) = std::fs::write(&tmp, &text) {
            let _ = std::fs::remove_file(&tmp);
            return Err(io(e));
        }
        std::fs::rename(&tmp, out).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            io(e)
        })?;
        Ok(text.len() as u64)
    }
}

impl Index {
    /// Prepare `file` for search; checks it is consistent.
    pub fn new(file: IndexFile) -> Result<Index, String> {
        if file.format != FORMAT {
            return Err(format!("index format {} is not the supported {FORMAT}", file.format));
        }
        if file.chunks.is_empty() {
            return Err("the index has no chunks".into());
        }
        let mut ids = std::collections::HashSet::new();
        let mut df: HashMap<String, u32> = HashMap::new();
        let mut lengths = Vec::with_capacity(file.chunks.len());
        let mut vectors = Vec::with_capacity(file.chunks.len());
        for c in &file.chunks {
            if c.doc >= file.documents.len() {
                return Err(format!("chunk `{}` points to document {} of {}", c.chunk_id, c.doc, file.documents.len()));
            }
            if !ids.insert(c.chunk_id.as_str()) {
                return Err(format!("chunk id `{}` appears twice", c.chunk_id));
            }
            for t in c.terms.keys() {
                *df.entry(t.clone()).or_default() += 1;
            }
            lengths.push(c.terms.values().sum());
            vectors.push(embed(&c.text));
        }
        let avg_len = lengths.iter().map(|&l| f64::from(l)).sum::<f64>() / lengths.len() as f64;
        let n = vectors.len() as f32;
        let mut weights = [0f32; DIMENSIONS];
        for (b, w) in weights.iter_mut().enumerate() {
            let df = vectors.iter().filter(|v| v[b] > 0.0).count() as f32;
            *w = (1.0 + n / (df + 1.0)).ln();
        }
        let vectors = vectors.into_iter().map(|v| weigh(v, &weights)).collect();
        let model_vectors = match &file.embeddings {
            None => None,
            Some(e) => {
                if e.dimensions == 0 || e.dimensions > MAX_EMBEDDING_DIMENSIONS {
                    return Err(format!("embeddings of {} dimensions; 1 – {MAX_EMBEDDING_DIMENSIONS}", e.dimensions));
                }
                if e.vectors.len() != file.chunks.len() {
                    return Err(format!("{} embeddings for {} chunks", e.vectors.len(), file.chunks.len()));
                }
                for (v, c) in e.vectors.iter().zip(&file.chunks) {
                    if let Some(p) = vector_problem(v, e.dimensions) {
                        return Err(format!("the embedding of chunk `{}` {p}", c.chunk_id));
                    }
                }
                Some(e.vectors.iter().map(|v| unit(v)).collect())
            }
        };
        Ok(Index { file, df, lengths, avg_len: avg_len.max(1.0), vectors, weights, model_vectors })
    }

    /// Build from a folder of documents.
    pub fn from_folder(dir: &Path, chunking: Chunking) -> Result<Index, IndexError> {
        Index::new(IndexFile::build(dir, chunking)?)
            .map_err(|message| IndexError::Document { file: dir.to_path_buf(), message })
    }

    /// Load an index file; a missing, unreadable or corrupt file is an error naming it.
    pub fn load(path: &Path) -> Result<Index, IndexError> {
        let corrupt = |message: String| IndexError::Load { file: path.to_path_buf(), message };
        let bytes = std::fs::read(path).map_err(|e| corrupt(format!("cannot read it: {e}")))?;
        let file: IndexFile =
            serde_json::from_slice(&bytes).map_err(|e| corrupt(format!("not a Switchyard index: {e}")))?;
        Index::new(file).map_err(corrupt)
    }

    /// The chunks.
    pub fn chunks(&self) -> &[Chunk] {
        &self.file.chunks
    }

    /// The document of chunk `n`.
    pub fn document(&self, chunk: usize) -> &DocumentMeta {
        &self.file.documents[self.file.chunks[chunk].doc]
    }

    /// The documents.
    pub fn documents(&self) -> &[DocumentMeta] {
        &self.file.documents
    }

    /// The file behind the index.
    pub fn file(&self) -> &IndexFile {
        &self.file
    }

    /// Chunks scored by BM25 against `query` terms, best first; chunks sharing no term are left
    /// out. `keep` filters chunks before ranking.
    pub fn bm25(&self, query: &[String], keep: &dyn Fn(usize) -> bool) -> Vec<Hit> {
        let n = self.file.chunks.len() as f64;
        let mut q: Vec<&String> = query.iter().collect();
        q.sort();
        q.dedup();
        let mut hits: Vec<Hit> = Vec::new();
        for (i, c) in self.file.chunks.iter().enumerate() {
            if !keep(i) {
                continue;
            }
            let len = f64::from(self.lengths[i]);
            let mut score = 0.0;
            for t in &q {
                let Some(&tf) = c.terms.get(*t) else { continue };
                let df = f64::from(self.df.get(*t).copied().unwrap_or(0));
                let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                let tf = f64::from(tf);
                score += idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / self.avg_len));
            }
            if score > 0.0 {
                hits.push(Hit { chunk: i, score });
            }
        }
        sort_hits(&mut hits);
        hits
    }

    /// The stored embeddings' provider and model, when the index has them.
    pub fn embedding_model(&self) -> Option<(&str, &str, usize)> {
        self.file.embeddings.as_ref().map(|e| (e.provider.as_str(), e.model.as_str(), e.dimensions))
    }

    /// Chunks by cosine similarity of their stored model embeddings to a query embedding,
    /// best first (chunks with no similarity are left out); `None` when the index has no
    /// embeddings or the query's dimensions differ.
    pub fn dense_embedded(&self, query: &[f32], keep: &dyn Fn(usize) -> bool) -> Option<Vec<Hit>> {
        let vectors = self.model_vectors.as_ref()?;
        if vectors.first().is_some_and(|v| v.len() != query.len()) {
            return None;
        }
        let q = unit(query);
        let mut hits: Vec<Hit> = vectors
            .iter()
            .enumerate()
            .filter(|(i, _)| keep(*i))
            .map(|(i, v)| Hit { chunk: i, score: f64::from(v.iter().zip(&q).map(|(a, b)| a * b).sum::<f32>()) })
            .filter(|h| h.score > 0.0)
            .collect();
        sort_hits(&mut hits);
        Some(hits)
    }

    /// Cosine similarity of chunk `n`'s stored embedding to a query embedding (0 without one).
    pub fn similarity_embedded(&self, chunk: usize, query: &[f32]) -> f64 {
        let Some(v) = self.model_vectors.as_ref().and_then(|m| m.get(chunk)).filter(|v| v.len() == query.len()) else {
            return 0.0;
        };
        let q = unit(query);
        f64::from(v.iter().zip(&q).map(|(a, b)| a * b).sum::<f32>())
    }

    /// Chunks by cosine similarity of hashed vectors to `query` text, best first; chunks with
    /// no similarity are left out.
    pub fn dense(&self, query: &str, keep: &dyn Fn(usize) -> bool) -> Vec<Hit> {
        let q = weigh(embed(query), &self.weights);
        let mut hits: Vec<Hit> = self
            .vectors
            .iter()
            .enumerate()
            .filter(|(i, _)| keep(*i))
            .map(|(i, v)| Hit { chunk: i, score: f64::from(v.iter().zip(q.iter()).map(|(a, b)| a * b).sum::<f32>()) })
            .filter(|h| h.score > 0.0)
            .collect();
        sort_hits(&mut hits);
        hits
    }

    /// Share of the distinct `query` terms that chunk `n` contains (0 – 1).
    pub fn coverage(&self, chunk: usize, query: &[String]) -> f64 {
        let mut q: Vec<&String> = query.iter().collect();
        q.sort();
        q.dedup();
        if q.is_empty() {
            return 0.0;
        }
        let terms = &self.file.chunks[chunk].terms;
        q.iter().filter(|t| terms.contains_key(**t)).count() as f64 / q.len() as f64
    }

    /// Cosine similarity of chunk `n` to `query` text.
    pub fn similarity(&self, chunk: usize, query: &str) -> f64 {
        let q = weigh(embed(query), &self.weights);
        f64::from(self.vectors[chunk].iter().zip(q.iter()).map(|(a, b)| a * b).sum::<f32>())
    }
}

fn sort_hits(hits: &mut [Hit]) {
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.chunk.cmp(&b.chunk)));
}

/// Hashed features of `text` (not normalized): each stemmed term adds 2 to one of
/// [`DIMENSIONS`] buckets (FNV-1a hash), each character trigram of each word that is not a
/// stop word (padded, so "#re" marks a word start) adds 1. It is lexical, not semantic: it
/// matches misspellings and partial words the stemmer misses ("reveneu" shares "#re", "rev",
/// "eve" with "revenue"), which is what the dense list adds offline. With an embedding
/// provider the same list would come from model vectors.
pub fn embed(text: &str) -> [f32; DIMENSIONS] {
    let mut v = [0f32; DIMENSIONS];
    for t in terms(text) {
        v[bucket(t.as_bytes())] += 2.0;
    }
    for word in content_words(text) {
        let padded: Vec<char> = std::iter::once('#').chain(word.chars()).chain(std::iter::once('#')).collect();
        for w in padded.windows(3) {
            let s: String = w.iter().collect();
            v[bucket(s.as_bytes())] += 1.0;
        }
    }
    v
}

/// Scale `v` by the bucket weights and make it a unit vector.
fn weigh(mut v: [f32; DIMENSIONS], weights: &[f32; DIMENSIONS]) -> [f32; DIMENSIONS] {
    v.iter_mut().zip(weights.iter()).for_each(|(x, w)| *x *= w);
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

fn bucket(bytes: &[u8]) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    (hash % DIMENSIONS as u64) as usize
}
