//! Compressed documents: deflate (RFC 1951) primed with a fixed dictionary.
//!
//! The documents of one query are small (a few hundred bytes to a few KB of JSON) and deflate
//! compresses small inputs poorly: every field name appears once in the clear and each stream
//! carries its own code tables. A preset dictionary — a sample of the records' JSON, with every
//! field name and common value, [`DICTIONARY`] — lets the first occurrence of each name be a
//! back-reference too: a query record with its plan takes about half the bytes of plain
//! deflate, and DynamoDB bills every write by the bytes of the whole item.
//!
//! # Format
//!
//! A packed document is one tag byte, then raw deflate data whose back-references may reach
//! into the dictionary (as if the dictionary had been decompressed just before it). The tag's
//! bits 1–2 are `11`, the block type deflate reserves, so a tagged document can never be taken
//! for the untagged raw deflate written before: bytes whose first block type is not `11` are
//! plain deflate, read as before. The tag's upper bits name the dictionary (version 1 = tag
//! `0x0E`). A dictionary, once used, never changes: a new one gets a new version and the old
//! stays readable.
//!
//! miniz_oxide has no preset-dictionary call, so packing compresses the dictionary first, ends
//! that part with a sync flush (an empty stored block, so the rest starts on a byte boundary
//! with a new block) and keeps only what follows; unpacking decodes into a buffer that already
//! holds the dictionary.

use miniz_oxide::deflate::core::TDEFLStatus;
use miniz_oxide::deflate::core::{compress_to_output, create_comp_flags_from_zip_params, CompressorOxide, TDEFLFlush};
use miniz_oxide::inflate::core::{decompress, inflate_flags, DecompressorOxide};
use miniz_oxide::inflate::TINFLStatus;

/// Dictionary version 1: field names and common values of the stored records (query record
/// with its plan, events, output, handoff, session, signal), placeholder ids and times.
pub(super) const DICTIONARY: &[u8] = include_bytes!("dictionary.txt");

/// Tag of a document packed with [`DICTIONARY`]: block-type bits `11`, version 1 above them.
const TAG_V1: u8 = 0b0000_1110;
/// The block-type bits of a raw deflate stream's first byte.
const BLOCK_TYPE_BITS: u8 = 0b0000_0110;

/// Deflate level (miniz: 6 is the default balance).
const LEVEL: i32 = 6;

/// `json` deflated against the dictionary, tagged.
pub(super) fn pack(json: &[u8]) -> Vec<u8> {
    let flags = create_comp_flags_from_zip_params(LEVEL, -15, 0);
    let mut compressor = CompressorOxide::new(flags);
    let mut out = Vec::with_capacity(json.len() / 2 + 64);
    let mut sink = |chunk: &[u8]| {
        out.extend_from_slice(chunk);
        true
    };
    let (status, _) = compress_to_output(&mut compressor, DICTIONARY, TDEFLFlush::Sync, &mut sink);
    debug_assert_eq!(status, TDEFLStatus::Okay);
    let primed = out.len();
    let (status, _) = compress_to_output(&mut compressor, json, TDEFLFlush::Finish, |chunk: &[u8]| {
        out.extend_from_slice(chunk);
        true
    });
    debug_assert_eq!(status, TDEFLStatus::Done);
    let mut packed = Vec::with_capacity(out.len() - primed + 1);
    packed.push(TAG_V1);
    packed.extend_from_slice(&out[primed..]);
    packed
}

/// Whether `blob` is a tagged document (else plain raw deflate).
pub(super) fn is_tagged(blob: &[u8]) -> bool {
    blob.first().is_some_and(|b| b & BLOCK_TYPE_BITS == BLOCK_TYPE_BITS)
}

/// The JSON of a tagged document, at most `limit` bytes.
pub(super) fn unpack(blob: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    let (&tag, data) = blob.split_first().ok_or("empty document")?;
    if tag != TAG_V1 {
        return Err(format!("unknown dictionary tag {tag:#04x}"));
    }
    let flags = inflate_flags::TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF;
    let mut room = (data.len() * 8).max(1024).min(limit.max(1));
    loop {
        let mut buffer = vec![0u8; DICTIONARY.len() + room];
        buffer[..DICTIONARY.len()].copy_from_slice(DICTIONARY);
        let mut decompressor = DecompressorOxide::new();
        let (status, _, written) = decompress(&mut decompressor, data, &mut buffer, DICTIONARY.len(), flags);
        match status {
            TINFLStatus::Done => {
                buffer.truncate(DICTIONARY.len() + written);
                return Ok(buffer.split_off(DICTIONARY.len()));
            }
            TINFLStatus::HasMoreOutput if room < limit => room = (room * 4).min(limit),
            TINFLStatus::HasMoreOutput => return Err(format!("inflates to more than {limit} bytes")),
            other => return Err(format!("{other:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packed_document_unpacks_to_its_json_and_is_tagged() {
        for json in [&b""[..], b"{}", br#"{"query_id":"q-1","status":"done","plan":null}"#, DICTIONARY] {
            let packed = pack(json);
            assert!(is_tagged(&packed));
            assert_eq!(unpack(&packed, 1 << 20).expect("unpacks"), json);
        }
        let big: Vec<u8> = (0..200_000u32).flat_map(|i| format!("{{\"n\":{i}}}").into_bytes()).collect();
        assert_eq!(unpack(&pack(&big), 4 << 20).expect("unpacks"), big);
        assert!(unpack(&pack(&big), 1000).is_err(), "the limit holds");
    }

    #[test]
    fn plain_deflate_is_never_taken_for_a_tagged_document() {
        for json in [&b"{}"[..], br#"{"a":[1,2,3]}"#, DICTIONARY] {
            for level in [1, 6, 10] {
                let plain = miniz_oxide::deflate::compress_to_vec(json, level);
                assert!(!is_tagged(&plain), "level {level}");
            }
        }
    }

    #[test]
    fn the_dictionary_shrinks_a_record_against_plain_deflate() {
        let json = br#"{"accepted_at":"2026-11-23T01:12:31.349050092Z","parsed":{"ambiguity_flag":false,"confidence":0.93,"entities":[],"intent":"causal_analysis","raw_query":"Why did TRx drop?"},"plan":{"current_stage":0,"stages":[]}}"#;
        let plain = miniz_oxide::deflate::compress_to_vec(json, 6).len();
        assert!(pack(json).len() * 10 < plain * 8, "{} vs {plain}", pack(json).len());
    }

    #[test]
    fn corrupt_or_unknown_documents_are_errors() {
        assert!(unpack(&[], 100).is_err());
        assert!(unpack(&[0x16, 1, 2, 3], 100).is_err(), "version 2 is unknown");
        assert!(unpack(&[TAG_V1, 0xff, 0xff, 0xff], 100).is_err());
    }
}
