//! Retrieval as pure code: the embedded index, reciprocal rank fusion, the year filter and
//! recency rerank, the fallback order of retrieval settings, the extractive answer, and the
//! reflection step. The `retriever` agent kind (`switchyard_agents`) and the synthesizer call
//! it; nothing here touches a port. `docs/retrieval.md` explains the choices.
//!
//! # Layout
//!
//! - [`terms`]: words → stemmed search terms; sentences.
//! - [`corpus`]: a folder of documents → documents → overlapping chunks, with errors naming
//!   the file.
//! - [`index`]: BM25 and hashed-vector search over the chunks; the index file.
//! - [`rrf`]: reciprocal rank fusion (the merge and the dedupe by `chunk_id`).
//! - [`merge`]: a route's fan-in merge of several retrievers' lists (`merge: rrf`), the
//!   reranker's scores, the recency boost, summary-only references for lazy hydration.
//! - [`search`]: one retrieval — lists, fusion, thresholds, fallback, rerank, answer.
//! - [`reflect`]: the RAG manager design's reflection notes.

pub mod corpus;
pub mod index;
pub mod merge;
pub mod reflect;
pub mod rrf;
pub mod search;
pub mod terms;

pub use corpus::Chunking;
pub use index::{Index, IndexFile};

use std::path::PathBuf;

/// Why an index could not be built, written or loaded; always names the file.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// A document (or the folder) is unusable.
    #[error("{}: {message}", file.display())]
    Document {
        /// The file or folder.
        file: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The index file could not be written (nothing was replaced).
    #[error("{}: cannot write the index: {message}", file.display())]
    Write {
        /// The index file.
        file: PathBuf,
        /// What failed.
        message: String,
    },
    /// The index file is missing or corrupt.
    #[error("{}: cannot load the index: {message}", file.display())]
    Load {
        /// The index file.
        file: PathBuf,
        /// What is wrong.
        message: String,
    },
}

#[cfg(test)]
mod tests;
