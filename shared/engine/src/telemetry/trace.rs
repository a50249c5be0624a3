//! W3C trace context for a query: one trace per query, its id read from the query id, so
//! every message and log line of one query share a trace.

/// A W3C `traceparent` whose trace id is the query id's 32 hex digits, so every message and
/// log line of one query share a trace; `span_id` names the sending step.
pub fn traceparent(query_id: &str, span_id: u64) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    // `00-{trace:32}-{span:016x}-01`, 55 bytes, written into an array (one header per message
    // sent): no intermediate strings, no formatting machinery.
    let mut header = [0u8; 55];
    header[..3].copy_from_slice(b"00-");
    // The usual id, a canonical UUID: its five groups of digits copied as they are, checked
    // and lowercased in place.
    let id = query_id.as_bytes();
    let canonical = id.len() == 36 && [8, 13, 18, 23].iter().all(|&i| id[i] == b'-');
    if canonical {
        for (to, from) in [(3..11, 0..8), (11..15, 9..13), (15..19, 14..18), (19..23, 19..23), (23..35, 24..36)] {
            header[to].copy_from_slice(&id[from]);
        }
    }
    if canonical && header[3..35].iter().all(u8::is_ascii_hexdigit) {
        header[3..35].make_ascii_lowercase();
    } else if query_id.bytes().filter(u8::is_ascii_hexdigit).count() == 32 {
        for (slot, b) in header[3..35].iter_mut().zip(query_id.bytes().filter(u8::is_ascii_hexdigit)) {
            *slot = b.to_ascii_lowercase();
        }
    } else {
        // `{:0>32}` of the 16-digit hash: zeros, then the hash.
        header[3..19].fill(b'0');
        header[19..35].copy_from_slice(fnv_hex(query_id.as_bytes()).as_bytes());
    }
    header[35] = b'-';
    for (i, slot) in header[36..52].iter_mut().enumerate() {
        *slot = DIGITS[((span_id >> (4 * (15 - i))) & 0xf) as usize];
    }
    header[52..].copy_from_slice(b"-01");
    // Every byte written is ASCII.
    std::str::from_utf8(&header).map(str::to_string).unwrap_or_default()
}

/// Whether `s` is `len` hex digits.
fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The parent span id of a `traceparent`, if it is well formed.
pub fn parent_span_id(traceparent: &str) -> Option<&str> {
    trace_id(traceparent)?;
    // `00-` and the 32 digits of the trace id (checked above), then `-` and 16 hex digits up to
    // the next `-` or the end: read by position, as the trace id is (hex digits are never `-`).
    let span = traceparent.get(36..52)?;
    (is_hex(span, 16) && matches!(traceparent.as_bytes().get(52), None | Some(b'-'))).then_some(span)
}

/// The trace id of a `traceparent`, if it is well formed.
pub fn trace_id(traceparent: &str) -> Option<&str> {
    // `00-`, then 32 hex digits up to the next `-` or the end: read by position (hex digits
    // are never `-`), not by splitting (two of these per message received).
    let rest = traceparent.strip_prefix("00-")?;
    let trace = rest.get(..32)?;
    (is_hex(trace, 32) && matches!(rest.as_bytes().get(32), None | Some(b'-'))).then_some(trace)
}

/// FNV-1a hash of bytes, hex: request fingerprints for idempotency keys.
pub(crate) fn fnv_hex(bytes: &[u8]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}
