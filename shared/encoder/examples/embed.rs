//! Sentence vectors of many texts, for offline work (the word-vector refit study,
//! `bench/peers/routing/refit_table.py`, and the encoder-blocks probe,
//! `bench/peers/routing/probe_blocks.py`): reads one text per line on standard input, writes
//! each text's vector as little-endian `f32`s, in input order, to the file named second. With a
//! third argument N, each vector is `Encoder::embed_layers(text, N)`: the last N blocks' unit
//! means side by side.
//!
//! ```text
//! cargo run --release -p switchyard-encoder --example embed -- MODEL_DIR OUT.f32 [BLOCKS] < texts.txt
//! ```
//!
//! Every core works on its own share of the lines; progress goes to standard error.

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (model, out, blocks) = match args.as_slice() {
        [_, model, out] => (model, out, 1),
        [_, model, out, blocks] => {
            (model, out, blocks.parse().map_err(|_| format!("BLOCKS: not a number: {blocks:?}"))?)
        }
        _ => return Err("usage: embed MODEL_DIR OUT.f32 [BLOCKS] < texts.txt".into()),
    };
    let encoder = switchyard_encoder::Encoder::load(std::path::Path::new(model))?;
    let lines: Vec<String> = std::io::stdin().lock().lines().collect::<Result<_, _>>()?;
    let (n, dims) = (lines.len(), encoder.dims() * encoder.layers_read(blocks));
    let threads = std::thread::available_parallelism().map(|t| t.get()).unwrap_or(1);
    let vectors = Mutex::new(vec![0f32; n * dims]);
    let done = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for first in 0..threads {
            let (encoder, lines, vectors, done) = (&encoder, &lines, &vectors, &done);
            scope.spawn(move || {
                for i in (first..n).step_by(threads) {
                    let v = encoder.embed_layers(&lines[i], blocks);
                    vectors.lock().unwrap_or_else(|e| e.into_inner())[i * dims..(i + 1) * dims].copy_from_slice(&v);
                    let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                    if d % 10_000 == 0 || d == n {
                        eprintln!("embed: {d}/{n}");
                    }
                }
            });
        }
    });
    let vectors = vectors.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut file = std::io::BufWriter::new(std::fs::File::create(out)?);
    for v in vectors {
        file.write_all(&v.to_le_bytes())?;
    }
    file.flush()?;
    Ok(())
}
