//! The pieces a streamed model answer goes through before it reaches the event log:
//!
//! - [`SseDecoder`]: server-sent events (`data:` lines, blank-line separated) from the bytes
//!   of an OpenAI-compatible `stream: true` response, in whatever chunks the socket gives;
//! - [`FieldStream`]: the text of one top-level string field of a JSON object that is still
//!   being written (`{"answer": "Employees may …`), decoded escape by escape, so the tokens a
//!   reader sees are exactly the characters of the field the final answer will hold;
//! - [`word_pieces`]: how the scripted model splits its reply into tokens.
//!
//! None of them allocates more than the answer itself, and none of them fails: a stream that
//! breaks simply stops yielding, and the caller decides from the provider's end-of-stream
//! marker whether the answer was complete.

/// Server-sent events decoder: feed bytes, get the `data` of each complete event.
#[derive(Debug, Default)]
pub struct SseDecoder {
    pending: Vec<u8>,
    data: Vec<String>,
}

impl SseDecoder {
    /// Feed the next bytes; returns the data of every event they completed, in order.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.pending.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if !self.data.is_empty() {
                    events.push(std::mem::take(&mut self.data).join("\n"));
                }
            } else if let Some(value) = line.strip_prefix("data:") {
                self.data.push(value.strip_prefix(' ').unwrap_or(value).to_string());
            }
            // Comments (`:`), `event:`, `id:` and `retry:` lines carry nothing a model
            // answer needs.
        }
        events
    }

    /// The data of an event the stream ended in without its blank line, if any.
    pub fn finish(&mut self) -> Option<String> {
        let rest = String::from_utf8_lossy(&std::mem::take(&mut self.pending)).to_string();
        if let Some(value) = rest.trim_end_matches(['\n', '\r']).strip_prefix("data:") {
            self.data.push(value.strip_prefix(' ').unwrap_or(value).to_string());
        }
        (!self.data.is_empty()).then(|| std::mem::take(&mut self.data).join("\n"))
    }
}

/// The decoded text of the top-level string field `field` of a JSON object that arrives in
/// pieces. Each [`FieldStream::push`] returns the characters of the field that became
/// certain with that piece (an escape sequence cut in two waits for its second half).
#[derive(Debug)]
pub struct FieldStream {
    field: String,
    raw: String,
    /// Byte offset in `raw` of the field's value (after its opening quote), once seen.
    value_start: Option<usize>,
    /// Bytes of decoded text already returned.
    emitted: usize,
    /// The closing quote was seen.
    closed: bool,
}

impl FieldStream {
    /// Follow `field` of the object being written.
    pub fn new(field: &str) -> FieldStream {
        FieldStream { field: field.to_string(), raw: String::new(), value_start: None, emitted: 0, closed: false }
    }

    /// Feed the next piece of the model's text; the field's new characters.
    pub fn push(&mut self, piece: &str) -> String {
        self.raw.push_str(piece);
        if self.closed {
            return String::new();
        }
        if self.value_start.is_none() {
            self.value_start = find_string_value(&self.raw, &self.field);
        }
        let Some(start) = self.value_start else { return String::new() };
        let (decoded, closed) = decode_prefix(&self.raw[start..]);
        self.closed = closed;
        let fresh = decoded.get(self.emitted..).unwrap_or_default().to_string();
        self.emitted = decoded.len();
        fresh
    }

    /// Everything returned so far was the whole field (its closing quote arrived).
    pub fn is_complete(&self) -> bool {
        self.closed
    }
}

/// Byte offset just after the opening quote of the string value of `field` in the outermost
/// object of `raw` (which may be cut anywhere), once the key, the colon and the quote have
/// all arrived.
fn find_string_value(raw: &str, field: &str) -> Option<usize> {
    let bytes = raw.as_bytes();
    let mut depth = 0usize;
    let mut i = 0usize;
    while i < bytes.len() {
        match bytes[i] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' if depth > 0 => {
                let end = string_end(bytes, i + 1)?;
                if depth == 1 && &raw[i + 1..end] == field {
                    let mut j = end + 1;
                    while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                        j += 1;
                    }
                    if j >= bytes.len() {
                        return None;
                    }
                    if bytes[j] == b':' {
                        j += 1;
                        while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                            j += 1;
                        }
                        if j >= bytes.len() {
                            return None;
                        }
                        // A value that is not a string is not streamed.
                        return (bytes[j] == b'"').then_some(j + 1);
                    }
                }
                i = end;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Index of the closing quote of the string whose text starts at `from`; `None` while it is
/// still open.
fn string_end(bytes: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// Decode the JSON string text at the start of `s` up to its closing quote or to the last
/// complete character; whether the closing quote was reached.
fn decode_prefix(s: &str) -> (String, bool) {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '"' => return (out, true),
            '\\' => {
                let Some((_, e)) = chars.next() else { return (out, false) };
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'u' => {
                        let Some(high) = hex4(s, at + 2) else { return (out, false) };
                        for _ in 0..4 {
                            chars.next();
                        }
                        if (0xD800..0xDC00).contains(&high) {
                            // A surrogate pair: the low half must follow as `\uXXXX`.
                            let low_at = at + 6;
                            if s.len() < low_at + 6 {
                                return (out, false);
                            }
                            let low = if &s[low_at..low_at + 2] == "\\u" { hex4(s, low_at + 2) } else { None };
                            match low {
                                Some(low) if (0xDC00..0xE000).contains(&low) => {
                                    let code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                                    out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                                    for _ in 0..6 {
                                        chars.next();
                                    }
                                }
                                _ => out.push('\u{fffd}'),
                            }
                        } else {
                            out.push(char::from_u32(high).unwrap_or('\u{fffd}'));
                        }
                    }
                    other => out.push(other), // `\"`, `\\`, `\/`
                }
            }
            other => out.push(other),
        }
    }
    (out, false)
}

fn hex4(s: &str, at: usize) -> Option<u32> {
    let digits = s.get(at..at + 4)?;
    u32::from_str_radix(digits, 16).ok()
}

/// Split `text` into word pieces (each word with the spaces after it), the scripted model's
/// tokens: their concatenation is `text`.
pub fn word_pieces(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut in_space = false;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            in_space = true;
        } else if in_space {
            pieces.push(&text[start..i]);
            start = i;
            in_space = false;
        }
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream_in_pieces(raw: &str, size: usize, field: &str) -> (Vec<String>, bool) {
        let mut f = FieldStream::new(field);
        let chars: Vec<char> = raw.chars().collect();
        let pieces: Vec<String> =
            chars.chunks(size).map(|c| f.push(&c.iter().collect::<String>())).filter(|p| !p.is_empty()).collect();
        (pieces, f.is_complete())
    }

    #[test]
    fn a_field_streamed_in_any_cut_decodes_to_exactly_what_serde_reads() {
        let value = serde_json::json!({
            "confidence": 0.8,
            "nested": { "answer": "not this one" },
            "answer": "Line one\nsays \"hi\" — café \u{1F600} \\ done",
            "after": "x"
        });
        let raw = value.to_string();
        for size in 1..=9 {
            let (pieces, complete) = stream_in_pieces(&raw, size, "answer");
            assert_eq!(pieces.concat(), value["answer"].as_str().unwrap_or_default(), "pieces of {size}");
            assert!(complete);
        }
        // Escaped non-ASCII, as some models write it.
        let raw = r#"{"answer": "caf\u00e9 \ud83d\ude00!"}"#;
        for size in 1..=7 {
            assert_eq!(stream_in_pieces(raw, size, "answer").0.concat(), "café 😀!");
        }
    }

    #[test]
    fn a_field_that_is_not_a_string_or_absent_streams_nothing() {
        assert!(stream_in_pieces(r#"{"answer": {"text": "x"}}"#, 3, "answer").0.is_empty());
        assert!(stream_in_pieces(r#"{"verdict": "accept"}"#, 3, "answer").0.is_empty());
        let (pieces, complete) = stream_in_pieces(r#"```json {"answer": "cut off he"#, 4, "answer");
        assert_eq!(pieces.concat(), "cut off he");
        assert!(!complete);
    }

    #[test]
    fn server_sent_events_split_anywhere_come_out_whole() {
        let body = "data: {\"a\":1}\r\n\r\n: keep-alive\n\ndata: {\"b\":\n\ndata: [DONE]\n\n";
        for size in 1..=body.len() {
            let mut d = SseDecoder::default();
            let mut events = Vec::new();
            for chunk in body.as_bytes().chunks(size) {
                events.extend(d.push(chunk));
            }
            assert_eq!(events, vec!["{\"a\":1}", "{\"b\":", "[DONE]"], "chunks of {size}");
            assert_eq!(d.finish(), None);
        }
        let mut d = SseDecoder::default();
        assert!(d.push(b"data: tail").is_empty());
        assert_eq!(d.finish().as_deref(), Some("tail"));
    }

    #[test]
    fn word_pieces_concatenate_to_the_text() {
        let text = "{\"answer\":\"Up to  five days\nexpire\"} ";
        let pieces = word_pieces(text);
        assert_eq!(pieces.concat(), text);
        assert_eq!(pieces[1], "to  ");
        assert!(word_pieces("").is_empty());
    }
}
