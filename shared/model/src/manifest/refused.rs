//! Refused topics (`classifier.scope.refuse`), matched in one pass.

use aho_corasick::AhoCorasick;

/// `text` ready for an ASCII-case-insensitive match against lower-case phrases: on ASCII text
/// that match is the same as a substring test on its lower case, so it is borrowed as it is;
/// other text is lower-cased first.
pub fn for_lower_case_phrases(text: &str) -> std::borrow::Cow<'_, str> {
    if text.is_ascii() {
        std::borrow::Cow::Borrowed(text)
    } else {
        std::borrow::Cow::Owned(text.to_lowercase())
    }
}

/// The manifest's own refused topics (`classifier.scope.refuse`): phrases whose questions it
/// does not answer whatever else they say ("side effect", "dosage", "payroll"). A phrase
/// matches in any case at the start of a word and may run on into a longer one ("side effect"
/// matches "side effects", "payroll" matches "payrolls"; "pay" would match "payer" too).
#[derive(Debug, Clone, Default)]
pub struct RefusedPhrases {
    matcher: Option<AhoCorasick>,
    /// Per pattern, its index in the manifest's list.
    indices: Vec<usize>,
}

impl RefusedPhrases {
    /// Compiles `phrases` (blank ones are skipped; validation reports them).
    pub fn new(phrases: &[String]) -> RefusedPhrases {
        let (indices, phrases): (Vec<usize>, Vec<String>) =
            phrases.iter().map(|p| p.trim().to_lowercase()).enumerate().filter(|(_, p)| !p.is_empty()).unzip();
        if phrases.is_empty() {
            return RefusedPhrases::default();
        }
        let matcher = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(&phrases)
            .expect("refused phrases are plain literals");
        RefusedPhrases { matcher: Some(matcher), indices }
    }

    /// Index (in the manifest's list) of the first phrase `text` uses at the start of a word.
    pub fn find(&self, text: &str) -> Option<usize> {
        let matcher = self.matcher.as_ref()?;
        let text = for_lower_case_phrases(text);
        let text = &*text;
        matcher
            .find_overlapping_iter(text)
            .find(|m| !text[..m.start()].chars().next_back().is_some_and(char::is_alphanumeric))
            .map(|m| self.indices[m.pattern().as_usize()])
    }
}
