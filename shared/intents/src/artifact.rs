//! The trained router as bytes: what `switchyard train` writes beside the manifest and a
//! function loads at init. The header names the format, the trainer's version and the hash of
//! the manifest it was trained from, so a stale artifact is told apart from a current one.
//!
//! Little-endian: `SYRT`, format `u32`, trainer version (`u16` length + UTF-8), manifest hash
//! and examples hash (`u64` each); then named sections the trainer's caller adds beside the
//! router (`u32` count, then per section its name, `u16` length + UTF-8, and its bytes, `u32`
//! length + bytes) and the router's length in bytes (`u64`): the head, which [`read_head`]
//! reads without the router; then the router: hash bits,
//! shortest and longest character n-gram (`u32` each), character weight,
//! threshold and temperature (`f32`), whether the last class is the background (`u32`, 0 or 1),
//! the dense block's dimensions (`u32`), weight (`f32`) and embedding name (`u16` length +
//! UTF-8), intents (`u32` count, then `u16` length + UTF-8 each), rows (`u32`
//! count, then the bucket ids), per-row scales (`f32`), the `i8` matrix, the biases (`f32`).

use crate::features::FeatureSpec;
use crate::svm::Compact;
use crate::Router;
use std::io::{Cursor, Read, Seek, SeekFrom};

const MAGIC: &[u8; 4] = b"SYRT";
/// The byte format's version.
pub const FORMAT: u32 = 3;
/// The trainer's version: a router trained by another is stale.
pub const TRAINER: &str = concat!("linear-ngrams/", env!("CARGO_PKG_VERSION"));

/// What the header of an artifact says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The trainer that wrote it.
    pub trainer: String,
    /// The hash of what the manifest itself teaches the router.
    pub manifest_hash: u64,
    /// The hash of the labelled example files it learnt from.
    pub examples_hash: u64,
}

impl Header {
    /// The header this trainer writes.
    pub fn new(manifest_hash: u64, examples_hash: u64) -> Header {
        Header { trainer: TRAINER.to_string(), manifest_hash, examples_hash }
    }
}

/// Why bytes are not a router.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArtifactError {
    /// Not an artifact, or another format version.
    #[error("not a Switchyard router artifact (format {FORMAT}): {0}")]
    Format(String),
    /// Cut short or inconsistent.
    #[error("the router artifact is corrupt: {0}")]
    Corrupt(String),
}

/// A named block of bytes stored beside the router (what else was trained from the same
/// manifest; the router does not read it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// Its name, unique in an artifact.
    pub name: String,
    /// Its content.
    pub bytes: Vec<u8>,
}

/// Most sections an artifact may hold.
const MAX_SECTIONS: u32 = 64;
/// Largest section, in bytes (a damaged length is refused before anything is allocated).
const MAX_SECTION_BYTES: usize = 256 << 20;

/// `router` as bytes, with `header`'s hashes (the trainer is always this one) and `sections`.
pub fn encode(router: &Router, header: &Header, sections: &[Section]) -> Vec<u8> {
    let w = &router.weights;
    let mut out = Vec::with_capacity(64 + w.rows.len() * (8 + w.classes));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT.to_le_bytes());
    text(&mut out, TRAINER);
    out.extend_from_slice(&header.manifest_hash.to_le_bytes());
    out.extend_from_slice(&header.examples_hash.to_le_bytes());
    out.extend_from_slice(&(sections.len() as u32).to_le_bytes());
    for section in sections {
        text(&mut out, &section.name);
        out.extend_from_slice(&(section.bytes.len() as u32).to_le_bytes());
        out.extend_from_slice(&section.bytes);
    }
    let body_at = out.len();
    out.extend_from_slice(&0u64.to_le_bytes());
    let f = &router.features;
    for v in [f.hash_bits, f.char_range.0 as u32, f.char_range.1 as u32] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&f.char_weight.to_le_bytes());
    out.extend_from_slice(&router.threshold.to_le_bytes());
    out.extend_from_slice(&router.temperature.to_le_bytes());
    out.extend_from_slice(&u32::from(router.background).to_le_bytes());
    out.extend_from_slice(&f.dense_dims.to_le_bytes());
    out.extend_from_slice(&f.dense_weight.to_le_bytes());
    text(&mut out, &router.embedding);
    out.extend_from_slice(&(router.intents.len() as u32).to_le_bytes());
    for intent in &router.intents {
        text(&mut out, intent);
    }
    out.extend_from_slice(&(w.rows.len() as u32).to_le_bytes());
    for r in &w.rows {
        out.extend_from_slice(&r.to_le_bytes());
    }
    for s in &w.scale {
        out.extend_from_slice(&s.to_le_bytes());
    }
    out.extend(w.matrix.iter().map(|&v| v as u8));
    for b in &w.bias {
        out.extend_from_slice(&b.to_le_bytes());
    }
    let body_len = (out.len() - body_at - 8) as u64;
    out[body_at..body_at + 8].copy_from_slice(&body_len.to_le_bytes());
    out
}

fn text(out: &mut Vec<u8>, s: &str) {
    let bytes = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
    out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
    out.extend_from_slice(bytes);
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], ArtifactError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| ArtifactError::Corrupt(format!("cut short in {what}")))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn u16(&mut self, what: &str) -> Result<u16, ArtifactError> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self, what: &str) -> Result<u32, ArtifactError> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn f32(&mut self, what: &str) -> Result<f32, ArtifactError> {
        self.u32(what).map(f32::from_bits)
    }
    fn text(&mut self, what: &str) -> Result<String, ArtifactError> {
        let n = self.u16(what)? as usize;
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec()).map_err(|_| ArtifactError::Corrupt(format!("{what} is not UTF-8")))
    }
    fn f32s(&mut self, n: usize, what: &str) -> Result<Vec<f32>, ArtifactError> {
        let b = self.take(n.checked_mul(4).ok_or_else(|| ArtifactError::Corrupt(what.into()))?, what)?;
        Ok(b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }
}

/// The header of `bytes`, without reading the rest.
pub fn header(bytes: &[u8]) -> Result<Header, ArtifactError> {
    let mut r = bytes;
    let n = magic_and_format(&take_exact(&mut r, 4 + 4 + 2, "the header").unwrap_or_default())?;
    let trainer = String::from_utf8(take_exact(&mut r, n, "the trainer")?)
        .map_err(|_| ArtifactError::Corrupt("the trainer is not UTF-8".into()))?;
    let manifest_hash = u64::from_le_bytes(le(&take_exact(&mut r, 8, "the manifest hash")?));
    let examples_hash = u64::from_le_bytes(le(&take_exact(&mut r, 8, "the examples hash")?));
    Ok(Header { trainer, manifest_hash, examples_hash })
}

/// What precedes the router in an artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The header.
    pub header: Header,
    /// Every section's name, in order.
    pub names: Vec<String>,
    /// The sections asked for ([`read_head`]'s `keep`).
    pub sections: Vec<Section>,
    /// The head's length in bytes (where the router begins).
    pub len: u64,
    /// The router's length in bytes: a whole artifact is `len + router_len` long.
    pub router_len: u64,
}

/// The head of the artifact `r` reads (header and sections), without the router after it: what
/// a function checks at start (a file is read only this far). Only the sections whose name
/// `keep` accepts are read; the reader seeks past the others (a cascade's second router is
/// megabytes that a start never needs).
pub fn read_head<R: Read + Seek>(r: &mut R, keep: impl Fn(&str) -> bool) -> Result<Head, ArtifactError> {
    let io = |e: std::io::Error| ArtifactError::Corrupt(format!("reading the head: {e}"));
    let start = r.stream_position().map_err(io)?;
    let end = r.seek(SeekFrom::End(0)).map_err(io)?;
    r.seek(SeekFrom::Start(start)).map_err(io)?;
    // The header's fields have a bounded size: read them, then parse them as bytes.
    let mut head = take_exact(r, 4 + 4 + 2, "the header").unwrap_or_default();
    let trainer_len = magic_and_format(&head)?;
    head.extend(take_exact(r, trainer_len + 16, "the header")?);
    let header = header(&head)?;
    let count = u32::from_le_bytes(le(&take_exact(r, 4, "the section count")?));
    if count > MAX_SECTIONS {
        return Err(ArtifactError::Corrupt(format!("{count} sections (at most {MAX_SECTIONS})")));
    }
    let (mut names, mut sections, mut len) = (Vec::new(), Vec::new(), head.len() + 4 + 8);
    for _ in 0..count {
        let n = u16::from_le_bytes(le(&take_exact(r, 2, "a section's name")?)) as usize;
        let name = String::from_utf8(take_exact(r, n, "a section's name")?)
            .map_err(|_| ArtifactError::Corrupt("a section's name is not UTF-8".into()))?;
        if names.contains(&name) {
            return Err(ArtifactError::Corrupt(format!("section {name:?} twice")));
        }
        let size = u32::from_le_bytes(le(&take_exact(r, 4, "a section's length")?)) as usize;
        if size > MAX_SECTION_BYTES {
            return Err(ArtifactError::Corrupt(format!("section {name:?} of {size} bytes")));
        }
        len += 2 + n + 4 + size;
        if keep(&name) {
            sections.push(Section { name: name.clone(), bytes: take_exact(r, size, "a section")? });
        } else if r.seek(SeekFrom::Current(size as i64)).map_err(io)? > end {
            return Err(ArtifactError::Corrupt("cut short in a section".into()));
        }
        names.push(name);
    }
    let router_len = u64::from_le_bytes(le(&take_exact(r, 8, "the router's length")?));
    Ok(Head { header, names, sections, len: len as u64, router_len })
}

/// The trainer's length after the magic and the format (the first ten bytes), when they are this
/// format's.
fn magic_and_format(first: &[u8]) -> Result<usize, ArtifactError> {
    if first.len() < 10 || first[..4] != MAGIC[..] {
        return Err(ArtifactError::Format("no SYRT magic".into()));
    }
    let format = u32::from_le_bytes(le(&first[4..]));
    if format != FORMAT {
        return Err(ArtifactError::Format(format!("format {format}")));
    }
    Ok(u16::from_le_bytes([first[8], first[9]]) as usize)
}

/// Exactly `n` bytes from `r` (without allocating more than what arrives).
fn take_exact(r: &mut impl Read, n: usize, what: &str) -> Result<Vec<u8>, ArtifactError> {
    let mut out = Vec::new();
    r.take(n as u64).read_to_end(&mut out).map_err(|e| ArtifactError::Corrupt(format!("{what}: {e}")))?;
    if out.len() < n {
        return Err(ArtifactError::Corrupt(format!("cut short in {what}")));
    }
    Ok(out)
}

/// The first `N` bytes of `b` as an array (`b` holds at least that many).
fn le<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&b[..N]);
    out
}

/// The router in `bytes`, with its header and sections.
pub fn decode(bytes: &[u8]) -> Result<(Header, Router, Vec<Section>), ArtifactError> {
    let mut rest = Cursor::new(bytes);
    let Head { header: head, sections, len, router_len, .. } = read_head(&mut rest, |_| true)?;
    if Some(len) != (bytes.len() as u64).checked_sub(router_len) {
        return Err(ArtifactError::Corrupt(format!(
            "{} bytes where the head says {}",
            bytes.len(),
            len.saturating_add(router_len)
        )));
    }
    let mut r = Reader { bytes, at: rest.position() as usize };
    let hash_bits = r.u32("the hash bits")?;
    if !(8..=24).contains(&hash_bits) {
        return Err(ArtifactError::Corrupt(format!("hash bits {hash_bits} outside 8 – 24")));
    }
    let lo = r.u32("the n-gram range")? as usize;
    let hi = r.u32("the n-gram range")? as usize;
    if lo == 0 || lo > hi || hi > 16 {
        return Err(ArtifactError::Corrupt(format!("character n-grams {lo} – {hi}")));
    }
    let char_weight = r.f32("the character weight")?;
    let threshold = r.f32("the threshold")?;
    let temperature = r.f32("the temperature")?;
    if !(temperature > 0.0 && temperature.is_finite()) {
        return Err(ArtifactError::Corrupt(format!("temperature {temperature}")));
    }
    let background = match r.u32("the background flag")? {
        0 => false,
        1 => true,
        other => return Err(ArtifactError::Corrupt(format!("background flag {other}"))),
    };
    let dense_dims = r.u32("the dense dimensions")?;
    if dense_dims > 4096 {
        return Err(ArtifactError::Corrupt(format!("{dense_dims} dense dimensions")));
    }
    let dense_weight = r.f32("the dense weight")?;
    let embedding = r.text("the embedding")?;
    if (dense_dims == 0) != embedding.is_empty() {
        return Err(ArtifactError::Corrupt("a dense block without its embedding, or the reverse".into()));
    }
    let k = r.u32("the intent count")? as usize;
    if k == 0 || (k == 1 && !background) || k > 100_000 {
        return Err(ArtifactError::Corrupt(format!("{k} intents")));
    }
    let intents = (0..k).map(|_| r.text("an intent")).collect::<Result<Vec<_>, _>>()?;
    let n = r.u32("the row count")? as usize;
    let rows_bytes = r.take(n.checked_mul(4).ok_or_else(|| ArtifactError::Corrupt("rows".into()))?, "the rows")?;
    let rows: Vec<u32> = rows_bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    if rows.windows(2).any(|w| w[0] >= w[1]) || rows.last().is_some_and(|&r| r >= (1u32 << hash_bits) + dense_dims) {
        return Err(ArtifactError::Corrupt("rows out of order or out of range".into()));
    }
    let scale = r.f32s(n, "the scales")?;
    let classes = k + usize::from(background);
    let cells = n.checked_mul(classes).ok_or_else(|| ArtifactError::Corrupt("matrix size".into()))?;
    let matrix: Vec<i8> = r.take(cells, "the matrix")?.iter().map(|&b| b as i8).collect();
    let bias = r.f32s(classes, "the biases")?;
    if r.at != bytes.len() {
        return Err(ArtifactError::Corrupt(format!("{} bytes after the end", bytes.len() - r.at)));
    }
    let features = FeatureSpec { hash_bits, char_range: (lo, hi), char_weight, dense_dims, dense_weight };
    let weights = Compact { classes, rows, scale, matrix, bias };
    Ok((head, Router { intents, features, weights, threshold, background, temperature, embedding }, sections))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{TrainSpec, TrainingSet};

    fn router() -> Router {
        let set = TrainingSet {
            intents: vec!["a".into(), "b".into()],
            examples: vec![
                ("hello there".into(), 0),
                ("good morning".into(), 0),
                ("pay my bill".into(), 1),
                ("billing question".into(), 1),
            ],
            background: vec!["why is the sky blue".into(), "tell me a joke".into()],
        };
        Router::train(&set, &TrainSpec { folds: 2, ..TrainSpec::default() }).expect("trains")
    }

    #[test]
    fn a_router_reads_back_as_it_was_written() {
        let r = router();
        let sections = vec![
            Section { name: "notes".into(), bytes: b"kept as written".to_vec() },
            Section { name: "empty".into(), bytes: Vec::new() },
        ];
        let bytes = encode(&r, &Header::new(42, 43), &sections);
        let (head, back, back_sections) = decode(&bytes).expect("decodes");
        assert_eq!(head, Header { trainer: TRAINER.into(), manifest_hash: 42, examples_hash: 43 });
        assert_eq!(back, r);
        assert_eq!(back_sections, sections);
        // The head alone, from a reader that stops where the router begins.
        let h = read_head(&mut Cursor::new(&bytes[..]), |_| true).expect("reads the head");
        assert_eq!((&h.header, &h.sections), (&head, &sections));
        assert_eq!(h.names, ["notes", "empty"]);
        let names_only = read_head(&mut Cursor::new(&bytes[..]), |name| name == "empty").expect("reads the head");
        assert_eq!((names_only.names, names_only.sections.len(), names_only.len), (h.names.clone(), 1, h.len));
        // A section read past (sought over) that the reader cuts short is still found cut.
        let in_notes = 4 + 4 + 2 + TRAINER.len() + 16 + 4 + (2 + 5 + 4) + 5;
        assert_eq!(
            read_head(&mut Cursor::new(&bytes[..in_notes]), |name| name == "empty").map(|h| h.len),
            Err(ArtifactError::Corrupt("cut short in a section".into()))
        );
        let at = 4 + 4 + 2 + TRAINER.len() + 16 + 4 + (2 + 5 + 4 + 15) + (2 + 5 + 4) + 8;
        assert_eq!(h.len, at as u64);
        assert_eq!(h.len + h.router_len, bytes.len() as u64);
        assert_eq!(
            read_head(&mut Cursor::new(&bytes[..at]), |_| true).map(|h| h.sections.len()),
            Ok(2),
            "the head ends before the router"
        );
        assert_eq!(back.route("my bill").intent, r.route("my bill").intent);
    }

    #[test]
    fn every_cut_or_foreign_byte_string_is_refused_with_a_reason() {
        let section = Section { name: "notes".into(), bytes: b"twelve bytes".to_vec() };
        let bytes = encode(&router(), &Header::new(7, 8), std::slice::from_ref(&section));
        let twice = encode(&router(), &Header::new(7, 8), &[section.clone(), section]);
        assert!(matches!(decode(&twice), Err(ArtifactError::Corrupt(e)) if e.contains("twice")));
        for cut in [0, 3, 4, 9, 20, bytes.len() / 2, bytes.len() - 1] {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(decode(&longer), Err(ArtifactError::Corrupt(_))));
        assert!(matches!(decode(b"PK\x03\x04 not a router"), Err(ArtifactError::Format(_))));
        let mut other = bytes;
        other[4] = 9;
        assert_eq!(header(&other), Err(ArtifactError::Format("format 9".into())));
    }
}
