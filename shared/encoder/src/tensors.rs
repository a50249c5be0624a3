//! The safetensors format: an 8-byte little-endian header length, a JSON header naming each
//! tensor's dtype, shape and byte range, then the data.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};

/// A safetensors file's header, its tensors read on demand from `source` (so that loading never
/// holds the whole file and its tensors at once).
#[derive(Debug)]
pub struct Tensors<R> {
    source: RefCell<R>,
    data_start: u64,
    entries: HashMap<String, Entry>,
}

#[derive(Debug)]
struct Entry {
    dtype: String,
    shape: Vec<usize>,
    start: u64,
    end: u64,
}

/// Largest header accepted, in bytes.
const MAX_HEADER: u64 = 100 << 20;

/// The JSON header of a safetensors file of `file_len` bytes, read from its start.
pub fn header(source: &mut impl Read, file_len: u64) -> Result<Vec<u8>, String> {
    let mut len = [0u8; 8];
    source.read_exact(&mut len).map_err(|_| "shorter than a safetensors header".to_string())?;
    let header_len = u64::from_le_bytes(len);
    if header_len > MAX_HEADER || 8 + header_len > file_len {
        return Err(format!("header length {header_len} does not fit the file ({file_len} bytes)"));
    }
    let mut header = vec![0u8; header_len as usize];
    source.read_exact(&mut header).map_err(|e| e.to_string())?;
    Ok(header)
}

impl<R: Read + Seek> Tensors<R> {
    /// Read the header of `source`; the reason when it is not a safetensors file.
    pub fn parse(mut source: R) -> Result<Tensors<R>, String> {
        let file_len = source.seek(SeekFrom::End(0)).map_err(|e| e.to_string())?;
        source.seek(SeekFrom::Start(0)).map_err(|e| e.to_string())?;
        let header = header(&mut source, file_len)?;
        let data_start = 8 + header.len() as u64;
        let header: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(&header).map_err(|e| format!("header is not a JSON object: {e}"))?;
        let mut entries = HashMap::new();
        for (name, v) in header {
            if name == "__metadata__" {
                continue;
            }
            let dtype = v["dtype"].as_str().ok_or(format!("`{name}`: no dtype"))?.to_string();
            let shape = v["shape"]
                .as_array()
                .and_then(|s| s.iter().map(|d| d.as_u64().map(|d| d as usize)).collect::<Option<Vec<_>>>())
                .ok_or(format!("`{name}`: no shape"))?;
            let offsets = v["data_offsets"]
                .as_array()
                .and_then(|o| Some((o.first()?.as_u64()?, o.get(1)?.as_u64()?)))
                .ok_or(format!("`{name}`: no data_offsets"))?;
            if offsets.0 > offsets.1 || data_start + offsets.1 > file_len {
                return Err(format!("`{name}`: data_offsets {offsets:?} lie outside the file"));
            }
            entries.insert(name, Entry { dtype, shape, start: offsets.0, end: offsets.1 });
        }
        Ok(Tensors { source: RefCell::new(source), data_start, entries })
    }

    fn entry(&self, name: &str) -> Result<&Entry, String> {
        let e = self.entries.get(name).ok_or(format!("no tensor `{name}`"))?;
        if e.dtype != "F32" {
            return Err(format!("`{name}` is {}, not F32", e.dtype));
        }
        let count: usize = e.shape.iter().product();
        if (count as u64) * 4 != e.end - e.start {
            return Err(format!("`{name}`: shape {:?} does not match its {} bytes", e.shape, e.end - e.start));
        }
        Ok(e)
    }

    /// The values of `e`, read a block at a time.
    fn values(&self, e: &Entry) -> Result<Vec<f32>, String> {
        let mut source = self.source.borrow_mut();
        source.seek(SeekFrom::Start(self.data_start + e.start)).map_err(|err| err.to_string())?;
        let mut left = (e.end - e.start) as usize;
        let mut out = Vec::with_capacity(left / 4);
        let mut block = vec![0u8; (64 << 10).min(left)];
        while left > 0 {
            let n = block.len().min(left);
            source.read_exact(&mut block[..n]).map_err(|err| err.to_string())?;
            out.extend(block[..n].chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])));
            left -= n;
        }
        Ok(out)
    }

    /// The F32 tensor `name`, which must have exactly `dims`.
    pub fn f32(&self, name: &str, dims: &[usize]) -> Result<Vec<f32>, String> {
        let e = self.entry(name)?;
        if e.shape != dims {
            return Err(format!("`{name}` has shape {:?}, expected {dims:?}", e.shape));
        }
        self.values(e)
    }

    /// The F32 matrix `name` whose rows are `width` wide, however many rows it has.
    pub fn f32_rows(&self, name: &str, width: usize) -> Result<Vec<f32>, String> {
        let e = self.entry(name)?;
        if e.shape.len() != 2 || e.shape[1] != width || e.shape[0] == 0 {
            return Err(format!("`{name}` has shape {:?}, expected [n, {width}]", e.shape));
        }
        self.values(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(header: &str, data: &[u8]) -> std::io::Cursor<Vec<u8>> {
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        std::io::Cursor::new(out)
    }

    #[test]
    fn a_tensor_reads_back_and_wrong_shapes_are_named() {
        let data: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let t = Tensors::parse(file(
            r#"{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"__metadata__":{}}"#,
            &data,
        ))
        .expect("parses");
        assert_eq!(t.f32("w", &[2, 2]).expect("reads"), [1.0, 2.0, 3.0, 4.0]);
        assert_eq!(t.f32("w", &[4]).expect_err("shape"), "`w` has shape [2, 2], expected [4]");
        assert_eq!(t.f32("x", &[1]).expect_err("missing"), "no tensor `x`");
        assert_eq!(t.f32_rows("w", 2).expect("rows").len(), 4);
    }

    #[test]
    fn damaged_files_are_refused() {
        assert!(Tensors::parse(std::io::Cursor::new(vec![1u8, 2])).is_err());
        assert!(Tensors::parse(file("{", &[])).is_err());
        let out_of_file = file(r#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#, &[0; 4]);
        assert!(Tensors::parse(out_of_file).expect_err("outside").contains("outside the file"));
        let wrong = file(r#"{"w":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}"#, &[0; 4]);
        assert_eq!(Tensors::parse(wrong).expect("parses").f32("w", &[2]).expect_err("dtype"), "`w` is F16, not F32");
    }
}
