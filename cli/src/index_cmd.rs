//! `switchyard index build DIR --out PATH`: chunk a folder of documents and write the index a
//! `retriever` agent loads with `index: PATH`. The file is written to a temporary name beside
//! `PATH` and renamed into place, so a failed build leaves any previous index untouched.

use clap::{Args, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;
use switchyard_agents::embeddings::{embed_index, Embedder};
use switchyard_core::retrieval::{Chunking, Index, IndexFile};
use switchyard_engine::http_client::HttpClient;

/// `switchyard index …`.
#[derive(Debug, Subcommand)]
pub enum IndexCommand {
    /// Build an index from a folder of `.md` / `.txt` documents.
    Build(BuildArgs),
}

/// Arguments of `switchyard index build`.
#[derive(Debug, Args)]
pub struct BuildArgs {
    /// Folder of documents (read recursively).
    pub dir: PathBuf,
    /// Index file to write.
    #[arg(long)]
    pub out: PathBuf,
    /// Most words in a chunk.
    #[arg(long, default_value_t = Chunking::default().max_words)]
    pub max_words: usize,
    /// Words repeated from one chunk at the start of the next.
    #[arg(long, default_value_t = Chunking::default().overlap_words)]
    pub overlap_words: usize,
    /// Store model embeddings of every chunk, made by this provider of `--manifest` (an
    /// `openai` `/embeddings` endpoint or `bedrock` Titan); a retriever with
    /// `embeddings: {provider: …}` and this `index` ranks them.
    #[arg(long)]
    pub embeddings: Option<String>,
    /// The manifest declaring the `--embeddings` provider.
    #[arg(long, default_value = "routing.yaml")]
    pub manifest: PathBuf,
    /// The embedding model (default: the provider's `model`).
    #[arg(long)]
    pub embedding_model: Option<String>,
}

/// Run an `index` command; prints what was written.
pub async fn run(command: IndexCommand, out: &mut dyn Write) -> anyhow::Result<u8> {
    match command {
        IndexCommand::Build(args) => {
            let started = Instant::now();
            let chunking = Chunking { max_words: args.max_words, overlap_words: args.overlap_words };
            let mut file = IndexFile::build(&args.dir, chunking)?;
            if let Some(provider) = &args.embeddings {
                let manifest = switchyard_model::manifest::Manifest::load(&args.manifest)?;
                let p = manifest.providers.iter().find(|p| &p.id == provider).ok_or_else(|| {
                    anyhow::anyhow!(
                        "--embeddings: provider `{provider}` is not declared in {}",
                        args.manifest.display()
                    )
                })?;
                let embedder = Embedder::from_provider(p, args.embedding_model.as_deref(), &HttpClient::new())
                    .map_err(|e| anyhow::anyhow!("--embeddings: {e}"))?;
                file = embed_index(file, &embedder).await.map_err(|e| anyhow::anyhow!("--embeddings: {e}"))?;
            }
            // Check what will be loaded before replacing anything.
            Index::new(file.clone()).map_err(|e| anyhow::anyhow!("{}: {e}", args.dir.display()))?;
            let bytes = file.write(&args.out)?;
            writeln!(
                out,
                "indexed {} documents into {} chunks{}: {} ({} bytes) in {:.1} ms",
                file.documents.len(),
                file.chunks.len(),
                file.embeddings
                    .as_ref()
                    .map(|e| format!(" with {}-dimension `{}` embeddings", e.dimensions, e.model))
                    .unwrap_or_default(),
                args.out.display(),
                bytes,
                started.elapsed().as_secs_f64() * 1000.0
            )?;
            Ok(0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("switchyard-index-cmd-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("dir");
        d
    }

    #[tokio::test]
    async fn a_failed_build_leaves_the_previous_index_in_place() {
        let docs = dir("docs");
        std::fs::write(docs.join("a.md"), "date: 2024\n\nRevenue grew 12%.").expect("write");
        let out = dir("out").join("index.json");
        let mut printed = Vec::new();
        let args = |d: &PathBuf| BuildArgs {
            dir: d.clone(),
            out: out.clone(),
            max_words: 80,
            overlap_words: 20,
            embeddings: None,
            manifest: PathBuf::from("routing.yaml"),
            embedding_model: None,
        };
        run(IndexCommand::Build(args(&docs)), &mut printed).await.expect("first build");
        assert!(String::from_utf8_lossy(&printed).starts_with("indexed 1 documents into 1 chunks"));
        let before = std::fs::read(&out).expect("index");
        std::fs::write(docs.join("b.md"), [0xffu8, 0xfe]).expect("write");
        let e = run(IndexCommand::Build(args(&docs)), &mut printed).await.expect_err("non-utf8");
        assert!(e.to_string().contains("b.md: not UTF-8"), "{e}");
        assert_eq!(std::fs::read(&out).expect("index"), before, "untouched");
        let empty = dir("empty");
        let e = run(IndexCommand::Build(args(&empty)), &mut printed).await.expect_err("empty");
        assert!(e.to_string().contains("holds no .md or .txt documents"), "{e}");
        assert_eq!(std::fs::read(&out).expect("index"), before, "untouched");
    }
}
