//! The AWS limits Switchyard works within, each defined once.
//!
//! The in-memory adapters enforce the same numbers as the DynamoDB and SQS adapters, so the
//! embedded default rejects exactly what AWS would reject; the manifest validator, the engine
//! and the template renderer read them from here too.

/// DynamoDB's item size limit (400 KB, counted as 1024-byte KB).
pub const DYNAMODB_MAX_ITEM_BYTES: usize = 400 * 1024;
/// DynamoDB's limit on actions in one transaction.
pub const DYNAMODB_MAX_TRANSACT_ITEMS: usize = 100;
/// The largest SQS message (body and attributes) Switchyard's queues accept: 256 KiB, SQS's
/// default `MaximumMessageSize`, which `switchyard setup` and the template keep.
pub const SQS_MAX_MESSAGE_BYTES: usize = 256 * 1024;
/// SQS's largest delivery delay; longer deadlines are chained.
pub const SQS_MAX_DELAY_S: u64 = 900;
/// SQS's longest long-poll wait.
pub const SQS_MAX_WAIT_S: u64 = 20;
/// Most messages one SQS receive (or one batch send) carries.
pub const SQS_MAX_BATCH: usize = 10;
/// Lambda's maximum function timeout.
pub const LAMBDA_MAX_TIMEOUT_S: u64 = 900;
/// Time a worker keeps for itself after an agent's attempt times out (record, re-enqueue).
pub const WORKER_MARGIN_S: u64 = 30;
/// The longest per-attempt timeout an agent may have: what fits in one worker invocation.
pub const MAX_ATTEMPT_TIMEOUT_MS: u64 = (LAMBDA_MAX_TIMEOUT_S - WORKER_MARGIN_S) * 1_000;
/// Receives before a message moves to its dead-letter queue (the redrive policy of every queue).
pub const MAX_RECEIVE_COUNT: u32 = 5;

/// Most training signals one `Store::list_signals` call (and one `GET /v1/signals` page) returns.
pub const MAX_SIGNAL_PAGE: usize = 500;

/// Counts the bytes written to it.
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The size of `value` serialized as JSON, in bytes, counted without building the JSON: what
/// the item and message limits above are checked against (0 if it does not serialize).
pub fn json_size<T: serde::Serialize + ?Sized>(value: &T) -> usize {
    let mut count = ByteCount(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => 0,
    }
}

/// Whether `value` serialized as JSON fits in `max` bytes: `Ok(())`, or `Err(size)` with its
/// exact size. The common case (a record far under its limit) is decided by an upper bound of
/// the size, which costs neither number formatting nor string escaping; only a value whose
/// bound is over `max` is counted exactly.
pub fn json_fits<T: serde::Serialize + ?Sized>(value: &T, max: usize) -> Result<(), usize> {
    let mut bound = bound::SizeBound(0);
    if value.serialize(&mut bound).is_ok() && bound.0 <= max {
        return Ok(());
    }
    match json_size(value) {
        size if size <= max => Ok(()),
        size => Err(size),
    }
}

/// An upper bound of a value's JSON size (as `serde_json` writes it, compact): a string counts
/// 6 bytes per byte (`\u00XX`, the longest escape) and its quotes, a number its longest
/// form, a separator one byte per element.
mod bound {
    use serde::ser::{self, Serialize};
    use std::fmt;

    /// Longest integer (`-9223372036854775808`, `18446744073709551615`).
    const INT: usize = 20;
    /// Longest 128-bit integer.
    const INT128: usize = 40;
    /// Longest float as `serde_json` writes it (ryu), or `null`.
    const FLOAT: usize = 24;

    pub(super) struct SizeBound(pub(super) usize);

    /// Longest RFC 3339 time chrono writes for a `DateTime<Utc>`: a six-digit signed year,
    /// `-MM-DDTHH:MM:SS`, nine digits of fraction and `Z` (33 bytes), with room to spare.
    pub(super) const UTC_TIME: usize = 40;

    /// Whether `T` is the `Display` type chrono serializes a `DateTime<Utc>` through.
    pub(super) fn is_utc_time<T: ?Sized>() -> bool {
        // `chrono::datetime::serde::<impl …>::serialize::FormatIso8601<'_, chrono::offset::utc::Utc>`
        // (checked from the end: any other type fails on its first bytes compared).
        let name = std::any::type_name::<T>();
        name.ends_with("::FormatIso8601<'_, chrono::offset::utc::Utc>") && name.starts_with("chrono::")
    }

    #[derive(Debug)]
    pub(super) struct Unsupported;

    impl fmt::Display for Unsupported {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("value does not serialize")
        }
    }

    impl std::error::Error for Unsupported {}

    impl ser::Error for Unsupported {
        fn custom<T: fmt::Display>(_: T) -> Self {
            Unsupported
        }
    }

    /// Bytes a `Display` writes, without keeping them.
    struct Written(usize);

    impl fmt::Write for Written {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            self.0 += s.len();
            Ok(())
        }
    }

    fn string(len: usize) -> usize {
        2 + 6 * len
    }

    type Done = Result<(), Unsupported>;

    impl ser::Serializer for &mut SizeBound {
        type Ok = ();
        type Error = Unsupported;
        type SerializeSeq = Self;
        type SerializeTuple = Self;
        type SerializeTupleStruct = Self;
        type SerializeTupleVariant = Self;
        type SerializeMap = Self;
        type SerializeStruct = Self;
        type SerializeStructVariant = Self;

        fn serialize_bool(self, _: bool) -> Done {
            self.0 += 5;
            Ok(())
        }
        fn serialize_i8(self, _: i8) -> Done {
            self.0 += INT;
            Ok(())
        }
        fn serialize_i16(self, _: i16) -> Done {
            self.0 += INT;
            Ok(())
        }
        fn serialize_i32(self, _: i32) -> Done {
            self.0 += INT;
            Ok(())
        }
        fn serialize_i64(self, _: i64) -> Done {
            self.0 += INT;
            Ok(())
        }
        fn serialize_i128(self, _: i128) -> Done {
            self.0 += INT128;
            Ok(())
        }
        fn serialize_u8(self, _: u8) -> Done {
            self.0 += INT;
            Ok(())
        }
        fn serialize_u16(self, _: u16) -> Done {
            self.0 += INT;
            Ok(())
        }
        fn serialize_u32(self, _: u32) -> Done {
            self.0 += INT;
            Ok(())
        }
        fn serialize_u64(self, _: u64) -> Done {
            self.0 += INT;
            Ok(())
        }
        fn serialize_u128(self, _: u128) -> Done {
            self.0 += INT128;
            Ok(())
        }
        fn serialize_f32(self, _: f32) -> Done {
            self.0 += FLOAT;
            Ok(())
        }
        fn serialize_f64(self, _: f64) -> Done {
            self.0 += FLOAT;
            Ok(())
        }
        fn serialize_char(self, c: char) -> Done {
            self.0 += string(c.len_utf8());
            Ok(())
        }
        fn serialize_str(self, v: &str) -> Done {
            self.0 += string(v.len());
            Ok(())
        }
        fn serialize_bytes(self, v: &[u8]) -> Done {
            // An array of numbers of at most three digits, with separators.
            self.0 += 2 + 4 * v.len();
            Ok(())
        }
        fn serialize_none(self) -> Done {
            self.0 += 4;
            Ok(())
        }
        fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Done {
            value.serialize(self)
        }
        fn serialize_unit(self) -> Done {
            self.0 += 4;
            Ok(())
        }
        fn serialize_unit_struct(self, _: &'static str) -> Done {
            self.0 += 4;
            Ok(())
        }
        fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Done {
            self.0 += string(variant.len());
            Ok(())
        }
        fn serialize_newtype_struct<T: ?Sized + Serialize>(self, _: &'static str, value: &T) -> Done {
            value.serialize(self)
        }
        fn serialize_newtype_variant<T: ?Sized + Serialize>(
            self,
            _: &'static str,
            _: u32,
            variant: &'static str,
            value: &T,
        ) -> Done {
            self.0 += 3 + string(variant.len());
            value.serialize(self)
        }
        fn serialize_seq(self, _: Option<usize>) -> Result<Self, Unsupported> {
            self.0 += 2;
            Ok(self)
        }
        fn serialize_tuple(self, _: usize) -> Result<Self, Unsupported> {
            self.0 += 2;
            Ok(self)
        }
        fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self, Unsupported> {
            self.0 += 2;
            Ok(self)
        }
        fn serialize_tuple_variant(
            self,
            _: &'static str,
            _: u32,
            variant: &'static str,
            _: usize,
        ) -> Result<Self, Unsupported> {
            self.0 += 5 + string(variant.len());
            Ok(self)
        }
        fn serialize_map(self, _: Option<usize>) -> Result<Self, Unsupported> {
            self.0 += 2;
            Ok(self)
        }
        fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, Unsupported> {
            self.0 += 2;
            Ok(self)
        }
        fn serialize_struct_variant(
            self,
            _: &'static str,
            _: u32,
            variant: &'static str,
            _: usize,
        ) -> Result<Self, Unsupported> {
            self.0 += 5 + string(variant.len());
            Ok(self)
        }
        fn collect_str<T: ?Sized + fmt::Display>(self, value: &T) -> Done {
            // A `DateTime<Utc>` (every record has several) is written by chrono through
            // `collect_str` with its own `Display` type; its length is bounded, so it is not
            // formatted (about 900 instructions each). Any other type, or a chrono whose type
            // is named differently, is formatted and counted as below.
            if is_utc_time::<T>() {
                self.0 += string(UTC_TIME);
                return Ok(());
            }
            let mut written = Written(0);
            fmt::write(&mut written, format_args!("{value}")).map_err(|_| Unsupported)?;
            self.0 += string(written.0);
            Ok(())
        }
    }

    /// The compound serializers that write one element or field after another: each adds its
    /// separator (and, for a named field, the quoted key and colon) before the value.
    macro_rules! elements {
        ($($trait:ident::$method:ident),*) => {$(
            impl ser::$trait for &mut SizeBound {
                type Ok = ();
                type Error = Unsupported;
                fn $method<T: ?Sized + Serialize>(&mut self, value: &T) -> Done {
                    self.0 += 1;
                    value.serialize(&mut **self)
                }
                fn end(self) -> Done {
                    Ok(())
                }
            }
        )*};
    }
    elements!(
        SerializeSeq::serialize_element,
        SerializeTuple::serialize_element,
        SerializeTupleStruct::serialize_field,
        SerializeTupleVariant::serialize_field
    );

    macro_rules! fields {
        ($($trait:ident),*) => {$(
            impl ser::$trait for &mut SizeBound {
                type Ok = ();
                type Error = Unsupported;
                fn serialize_field<T: ?Sized + Serialize>(&mut self, key: &'static str, value: &T) -> Done {
                    self.0 += 2 + string(key.len());
                    value.serialize(&mut **self)
                }
                fn end(self) -> Done {
                    Ok(())
                }
            }
        )*};
    }
    fields!(SerializeStruct, SerializeStructVariant);

    impl ser::SerializeMap for &mut SizeBound {
        type Ok = ();
        type Error = Unsupported;
        fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Done {
            // A key that is not a string is written quoted: two more bytes.
            self.0 += 4;
            key.serialize(&mut **self)
        }
        fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Done {
            value.serialize(&mut **self)
        }
        fn end(self) -> Done {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_value_fits_exactly_when_its_json_does_and_a_refusal_names_the_exact_size() {
        let value = json!({
        "text": "quote \" backslash \\ control \u{1} é 漢",
        "n": [1, -2, 3.5, 1e300, u64::MAX, i64::MIN],
        "nested": { "flag": true, "none": null, "list": [[], {}] },
                });
        let size = json_size(&value);
        assert_eq!(size, serde_json::to_vec(&value).map(|v| v.len()).unwrap_or(0));
        assert_eq!(json_fits(&value, size), Ok(()));
        assert_eq!(json_fits(&value, size - 1), Err(size));
        let mut bound = bound::SizeBound(0);
        assert!(serde::Serialize::serialize(&value, &mut bound).is_ok());
        assert!(bound.0 >= size, "the bound {} is under the size {size}", bound.0);
        // A time is written through `Display` (collect_str).
        let at = chrono::DateTime::<chrono::Utc>::from_timestamp(1_790_000_000, 123_456_789);
        let size = json_size(&at);
        assert!(size > 20);
        assert_eq!((json_fits(&at, size), json_fits(&at, size - 1)), (Ok(()), Err(size)));
    }

    #[test]
    fn a_utc_time_is_bounded_without_being_formatted_and_the_bound_holds_at_the_extremes() {
        use chrono::{DateTime, NaiveDate, Utc};
        let mut times = vec![DateTime::<Utc>::MIN_UTC, DateTime::<Utc>::MAX_UTC, DateTime::<Utc>::UNIX_EPOCH];
        // A leap second with a full fraction: `23:59:60.999999999Z`.
        let leap = NaiveDate::from_ymd_opt(2016, 12, 31).and_then(|d| d.and_hms_nano_opt(23, 59, 59, 1_999_999_999));
        times.extend(leap.map(|t| t.and_utc()));
        for at in times {
            let size = json_size(&at);
            let mut bound = bound::SizeBound(0);
            assert!(serde::Serialize::serialize(&at, &mut bound).is_ok());
            assert!(bound.0 >= size, "{at}: the bound {} is under the size {size}", bound.0);
            assert!(size - 2 <= bound::UTC_TIME, "{at} is {size} bytes");
        }
        // The fast path is taken for chrono's time (a renamed type would only be slower).
        let mut bound = bound::SizeBound(0);
        assert!(serde::Serialize::serialize(&DateTime::<Utc>::UNIX_EPOCH, &mut bound).is_ok());
        assert_eq!(bound.0, 2 + 6 * bound::UTC_TIME);
    }
}
