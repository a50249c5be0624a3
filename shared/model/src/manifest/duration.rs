//! Durations as people write them in `routing.yaml`: `500ms`, `2s`, `1.5m`, `1h`, `7d`.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A duration written with a unit (`ms`, `s`, `m`, `h`, `d`); stored in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Dur(u64);

impl Dur {
    /// From milliseconds.
    pub const fn from_millis(ms: u64) -> Dur {
        Dur(ms)
    }

    /// In milliseconds.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// As a std duration.
    pub const fn as_std(self) -> Duration {
        Duration::from_millis(self.0)
    }
}

/// Why a duration could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a duration: {reason} (write a number and a unit: 500ms, 2s, 1.5m, 1h, 7d)")]
pub struct DurError {
    text: String,
    reason: &'static str,
}

impl FromStr for Dur {
    type Err = DurError;

    fn from_str(s: &str) -> Result<Dur, DurError> {
        let err = |reason| DurError { text: s.to_string(), reason };
        let t = s.trim();
        let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(|| err("no unit"))?;
        let (num, unit) = t.split_at(split);
        if num.is_empty() {
            return Err(err("no number"));
        }
        let value: f64 = num.parse().map_err(|_| err("bad number"))?;
        let scale = match unit.trim() {
            "ms" => 1.0,
            "s" => 1_000.0,
            "m" | "min" => 60_000.0,
            "h" => 3_600_000.0,
            "d" => 86_400_000.0,
            _ => return Err(err("unknown unit")),
        };
        let ms = value * scale;
        if !ms.is_finite() || ms > 1e15 {
            return Err(err("too large"));
        }
        if ms > 0.0 && ms < 1.0 {
            return Err(err("shorter than a millisecond"));
        }
        Ok(Dur(ms.round() as u64))
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0;
        if ms == 0 {
            write!(f, "0s")
        } else if ms % 86_400_000 == 0 {
            write!(f, "{}d", ms / 86_400_000)
        } else if ms % 3_600_000 == 0 {
            write!(f, "{}h", ms / 3_600_000)
        } else if ms % 60_000 == 0 {
            write!(f, "{}m", ms / 60_000)
        } else if ms % 1_000 == 0 {
            write!(f, "{}s", ms / 1_000)
        } else {
            write!(f, "{ms}ms")
        }
    }
}

impl Serialize for Dur {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Dur, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_read_as_people_write_them() {
        assert_eq!("500ms".parse::<Dur>(), Ok(Dur(500)));
        assert_eq!("2s".parse::<Dur>(), Ok(Dur(2_000)));
        assert_eq!("1.5m".parse::<Dur>(), Ok(Dur(90_000)));
        assert_eq!("7d".parse::<Dur>(), Ok(Dur(604_800_000)));
    }

    #[test]
    fn a_duration_without_unit_or_with_a_strange_one_is_refused() {
        assert!("120".parse::<Dur>().is_err());
        assert!("2 fortnights".parse::<Dur>().is_err());
        assert!("-3s".parse::<Dur>().is_err());
        assert!("s".parse::<Dur>().is_err());
    }

    #[test]
    fn display_round_trips() {
        for text in ["500ms", "2s", "2m", "3h", "7d", "1500ms"] {
            let d: Dur = text.parse().expect("valid");
            assert_eq!(d.to_string().parse::<Dur>(), Ok(d));
        }
    }
}
