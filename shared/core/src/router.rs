//! A manifest's trained router: what it learns from, where its artifact lives, and whether the
//! artifact is current.
//!
//! The router ([`switchyard_intents::Router`]) learns, with one method for every manifest:
//! - per intent, its id (as words), description, each keyword and each utterance;
//! - the labelled example files `classifier.examples` names (JSON Lines: `query` or `text`,
//!   and `intent`; in an export of the signals loop, only lines whose `correct_intent` a
//!   caller gave, with that intent);
//! - as "none of the intents", the general background of everyday off-domain questions that
//!   ships with the trainer, text that is no question (keyboard mashes, digits, symbols: made
//!   up by the trainer) and the manifest's `classifier.scope.negative_examples`.
//!
//! With the router, the same artifact holds the manifest's own continuation model when
//! `classifier.dialogues` names labelled conversations (`crate::classify::continuation`): it
//! is trained after the router, on the classifier the router makes, and weighs follow-ups in
//! place of the rules' priors.
//!
//! `switchyard train` writes it beside the manifest (`routing.yaml` → `routing.router`), and
//! the build compiles the shipped manifest's artifact into the binaries ([`EMBEDDED`]), as it
//! does the manifest. The artifact's header holds two hashes: of what the manifest itself
//! teaches (checked at every start: a function never starts on a router of another manifest)
//! and of the example files' contents (checked by `switchyard validate` and `train`, where the
//! files are at hand), and the example and dialogue files' names (the manifest's hash).
//!
//! The artifact also holds the manifest itself as JSON, with a hash of the YAML text it was
//! read from ([`load_manifest`]): a function whose manifest file is unchanged since `train`
//! deserializes that instead of parsing the YAML, several times faster. At start a function
//! reads only the artifact's head (header and sections, [`startup_problem`]); the router after
//! it is read on the first question, with the classifier.

use crate::classify::cascade::{self, Cascade, TrainingBlock};
use crate::classify::{Classifier, ContinuationModel, ContinuationTrainer};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use switchyard_intents::artifact::{self, Header, Section};
use switchyard_intents::{Embedder, FeatureSpec, Router, TrainError, TrainSpec, TrainingSet};
use switchyard_model::manifest::Manifest;
use switchyard_model::topology::ENV_ENCODER;

/// The shipped manifest's router, compiled in by the build from `routing.router` beside
/// `routing.yaml` (empty when that file was missing at build time).
pub static EMBEDDED: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/routing.router"));

/// The file extension of a router artifact.
pub const EXTENSION: &str = "router";

/// Longest line of an example file, in bytes.
const MAX_EXAMPLE_LINE: usize = 8 * 1024;
/// Longest line (one conversation) of a dialogue file, in bytes.
const MAX_DIALOGUE_LINE: usize = 64 * 1024;
/// The artifact section holding the manifest's own continuation model (its table's text).
pub const CONTINUATION_SECTION: &str = "continuation";
/// The artifact section holding the cascade's second router (`classifier.encoder`): the
/// encoder's [`cascade::identity`] (`u64`, little-endian), then the router as an artifact of its own.
pub const CASCADE_SECTION: &str = "cascade";
/// The artifact section holding the manifest as JSON: the [`text_hash`] of the YAML text it
/// was read from (`u64`, little-endian), then the JSON.
pub const MANIFEST_SECTION: &str = "manifest";

/// What a manifest's artifact gives its classifier.
#[derive(Debug, Clone)]
pub struct Trained {
    /// The router.
    pub router: Arc<Router>,
    /// The manifest's own continuation model, when it names labelled conversations.
    pub continuation: Option<Arc<ContinuationModel>>,
    /// The cascade for doubt, when the manifest names a sentence encoder.
    pub cascade: Option<Arc<Cascade>>,
}

/// What a router learns from, with the hashes its artifact records.
#[derive(Debug, Clone)]
pub struct Training {
    /// The examples.
    pub set: TrainingSet,
    /// Hash of what the manifest itself teaches ([`manifest_hash`]).
    pub manifest_hash: u64,
    /// Hash of the example and dialogue files' contents, in the order the manifest names them.
    pub examples_hash: u64,
    /// The labelled conversations of the files `classifier.dialogues` names: per conversation
    /// its `(text, intent)` turns in order.
    pub conversations: Vec<Vec<(String, String)>>,
}

/// Why a router could not be trained.
#[derive(Debug, thiserror::Error)]
pub enum RouterError {
    /// An example or dialogue file could not be read.
    #[error("{key}: {path}: {reason}")]
    ExampleFile {
        /// The manifest key that names it (`classifier.examples`, `classifier.dialogues`).
        key: &'static str,
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// A line of an example or dialogue file is unusable.
    #[error("{key}: {path}:{line}: {reason}")]
    ExampleLine {
        /// The manifest key that names the file.
        key: &'static str,
        /// The file.
        path: String,
        /// 1-based line.
        line: usize,
        /// The rule it broke.
        reason: String,
    },
    /// The trainer refused the examples.
    #[error("the router cannot be trained: {0}")]
    Train(#[from] TrainError),
    /// The cascade's sentence encoder could not be read.
    #[error("classifier.encoder.model: {0}")]
    Encoder(String),
    /// The continuation model's table did not read back (a trainer defect).
    #[error("the continuation model cannot be trained: {0}")]
    Continuation(String),
}

/// Whether a manifest's artifact can be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArtifactState {
    /// Trained from this manifest by this trainer.
    Current,
    /// No artifact where it belongs.
    Missing,
    /// Trained from another manifest, other example files or by another trainer.
    Stale(String),
    /// Not a router artifact, or damaged.
    Unreadable(String),
}

impl ArtifactState {
    /// One line for `validate` and start-up errors.
    pub fn describe(&self) -> String {
        match self {
            ArtifactState::Current => "current".into(),
            ArtifactState::Missing => "missing".into(),
            ArtifactState::Stale(why) => format!("stale: {why}"),
            ArtifactState::Unreadable(why) => format!("unreadable: {why}"),
        }
    }
}

/// The hash of a sequence of texts ([`text_hash`] of each, mixed in order): stable across builds
/// and platforms, and a few times faster than a byte-wise hash (it is computed at every start
/// over every text of the manifest).
struct TextsHash(u64);

impl TextsHash {
    fn new() -> TextsHash {
        TextsHash(0xcbf2_9ce4_8422_2325)
    }
    fn text(&mut self, s: &str) {
        self.0 = (self.0.rotate_left(5) ^ text_hash(s.as_bytes())).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// The texts the manifest itself gives each intent, in manifest order.
fn manifest_documents(manifest: &Manifest) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, intent) in manifest.intents.iter().enumerate() {
        out.push((i, intent.id.replace(['_', '-'], " ")));
        if !intent.description.trim().is_empty() {
            out.push((i, intent.description.clone()));
        }
        out.extend(intent.keywords.iter().map(|k| (i, k.clone())));
        out.extend(intent.utterances.iter().map(|u| (i, u.clone())));
    }
    out
}

/// Hash of what the manifest itself teaches its router (intents with their texts, negative
/// examples, the names of the example files) and of the trainer's background: a change to
/// any of them makes an artifact stale; a change elsewhere in the manifest does not.
pub fn manifest_hash(manifest: &Manifest) -> u64 {
    let mut h = TextsHash::new();
    for intent in &manifest.intents {
        h.text(&intent.id);
    }
    h.text("");
    for (i, text) in manifest_documents(manifest) {
        h.text(&i.to_string());
        h.text(&text);
    }
    h.text("");
    for n in &manifest.classifier.scope.negative_examples {
        h.text(n);
    }
    h.text("");
    for file in &manifest.classifier.examples {
        h.text(file);
    }
    h.text("");
    for file in &manifest.classifier.dialogues {
        h.text(file);
    }
    if let Some(encoder) = &manifest.classifier.encoder {
        h.text(CASCADE_SECTION);
        h.text(&encoder.model);
    }
    h.text(switchyard_intents::BACKGROUND);
    h.text(&switchyard_intents::NOISE_LINES.to_string());
    h.0
}

/// What every router learns as "none of the intents" before the manifest's own negative
/// examples: the shipped background ([`switchyard_intents::background`]) and the generated
/// [`switchyard_intents::noise`].
pub fn background() -> Vec<String> {
    switchyard_intents::background().map(str::to_string).chain(switchyard_intents::noise()).collect()
}

/// Everything the router of `manifest` learns from, with the hashes its artifact records.
pub fn training(manifest: &Manifest) -> Result<Training, RouterError> {
    let intents: Vec<String> = manifest.intents.iter().map(|i| i.id.clone()).collect();
    let mut examples = manifest_documents(manifest);
    let files = read_files(manifest, EXAMPLES, &manifest.classifier.examples)?;
    for (shown, text) in &files {
        examples.extend(example_lines(text, shown, &intents)?);
    }
    let dialogue_files = read_files(manifest, DIALOGUES, &manifest.classifier.dialogues)?;
    let mut conversations = Vec::new();
    for (shown, text) in &dialogue_files {
        conversations.extend(dialogue_lines(text, shown, &intents)?);
    }
    let mut background = background();
    background.extend(manifest.classifier.scope.negative_examples.iter().cloned());
    Ok(Training {
        set: TrainingSet { intents, examples: examples.into_iter().map(|(i, t)| (t, i)).collect(), background },
        manifest_hash: manifest_hash(manifest),
        examples_hash: files_hash(files.iter().chain(&dialogue_files)),
        conversations,
    })
}

/// A fast hash of a text, eight bytes at a time (what the prepared manifest is keyed by: it is
/// computed at every start over the whole manifest file).
pub fn text_hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        h = (h.rotate_left(5) ^ w).wrapping_mul(K);
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    h = (h.rotate_left(5) ^ u64::from_le_bytes(tail)).wrapping_mul(K);
    h ^ (h >> 29)
}

/// `manifest` as JSON, with the hash of the text of the file it was loaded from, when that file
/// still reads as `manifest`.
fn prepared(manifest: &Manifest) -> Option<(u64, String)> {
    let path = manifest.source.as_ref()?;
    let text = std::fs::read_to_string(path).ok()?;
    let mut again = Manifest::from_yaml(&text, &path.display().to_string()).ok()?;
    (again.source, again.base_dir, again.encoder_dir) =
        (manifest.source.clone(), manifest.base_dir.clone(), manifest.encoder_dir.clone());
    if again != *manifest {
        return None;
    }
    Some((text_hash(text.as_bytes()), serde_json::to_string(manifest).ok()?))
}

/// The manifest file at `path`, read from the JSON form its artifact holds when the file is
/// unchanged since `switchyard train` (else parsed from the YAML): what a function loads at
/// start. Either way it is validated, and the result is [`Manifest::load`]'s.
pub fn load_manifest(path: &Path) -> Result<Manifest, switchyard_model::manifest::ManifestError> {
    let yaml = Manifest::read_text(path)?;
    let json = prepared_json(&path.with_extension(EXTENSION), &yaml);
    Manifest::from_file_text(path, &yaml, json.as_deref())
}

/// Whether `manifest`'s artifact holds the JSON form of its file as it is now (`None` for a
/// manifest without a file): when not, a function parses the YAML at start (slower, same
/// result) until `switchyard train` runs again.
pub fn prepared_manifest_current(manifest: &Manifest) -> Option<bool> {
    let path = manifest.source.as_ref()?;
    let yaml = std::fs::read_to_string(path).ok()?;
    Some(prepared_json(&path.with_extension(EXTENSION), &yaml).is_some())
}

/// The artifact's JSON form of the manifest whose text is `yaml`, if it holds one made from
/// that text.
fn prepared_json(artifact_path: &Path, yaml: &str) -> Option<String> {
    let mut file = std::io::BufReader::new(std::fs::File::open(artifact_path).ok()?);
    let head = artifact::read_head(&mut file, |name| name == MANIFEST_SECTION).ok()?;
    let section = head.sections.into_iter().find(|s| s.name == MANIFEST_SECTION)?;
    let (hash, json) = section.bytes.split_at_checked(8)?;
    let hash = u64::from_le_bytes(hash.try_into().ok()?);
    (hash == text_hash(yaml.as_bytes())).then(|| String::from_utf8(json.to_vec()).ok()).flatten()
}

/// The manifest key naming the example files.
const EXAMPLES: &str = "classifier.examples";
/// The manifest key naming the dialogue files.
const DIALOGUES: &str = "classifier.dialogues";

/// The files `key` names (`names`), as `(path shown, text)`, in that order.
fn read_files(manifest: &Manifest, key: &'static str, names: &[String]) -> Result<Vec<(String, String)>, RouterError> {
    names
        .iter()
        .map(|name| {
            let shown = manifest.resolve(name).display().to_string();
            match std::fs::read_to_string(&shown) {
                Ok(text) => Ok((shown, text)),
                Err(e) => Err(RouterError::ExampleFile { key, path: shown, reason: e.to_string() }),
            }
        })
        .collect()
}

/// The hash of the example and dialogue files' contents (what an artifact records).
fn files_hash<'a>(files: impl Iterator<Item = &'a (String, String)>) -> u64 {
    let mut h = TextsHash::new();
    for (_, text) in files {
        h.text(text);
    }
    h.0
}

/// The hash of `manifest`'s example and dialogue files, `None` when one cannot be read.
fn manifest_files_hash(manifest: &Manifest) -> Option<u64> {
    let examples = read_files(manifest, EXAMPLES, &manifest.classifier.examples).ok()?;
    let dialogues = read_files(manifest, DIALOGUES, &manifest.classifier.dialogues).ok()?;
    Some(files_hash(examples.iter().chain(&dialogues)))
}

/// The non-empty lines of a JSON Lines file `key` names, each with its 1-based number and parsed
/// (a line longer than `max` bytes, or not JSON, is an error naming the file and the line).
fn json_lines<'a>(
    text: &'a str,
    key: &'static str,
    path: &'a str,
    max: usize,
) -> impl Iterator<Item = Result<(usize, serde_json::Value), RouterError>> + 'a {
    text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()).map(move |(n, line)| {
        let bad = |reason: String| RouterError::ExampleLine { key, path: path.to_string(), line: n + 1, reason };
        let line = line.trim();
        if line.len() > max {
            return Err(bad(format!("longer than {max} bytes")));
        }
        serde_json::from_str(line).map(|value| (n + 1, value)).map_err(|e| bad(format!("not a JSON object: {e}")))
    })
}

/// The conversations of one dialogue file: one JSON object a line, `{"turns": [{"text":
/// "...", "intent": "<intent id>"}, ...]}`, at least two turns.
fn dialogue_lines(text: &str, path: &str, intents: &[String]) -> Result<Vec<Vec<(String, String)>>, RouterError> {
    let mut out = Vec::new();
    for line in json_lines(text, DIALOGUES, path, MAX_DIALOGUE_LINE) {
        let (n, value) = line?;
        let bad = |reason: String| RouterError::ExampleLine { key: DIALOGUES, path: path.to_string(), line: n, reason };
        let turns = value.get("turns").and_then(|t| t.as_array());
        let Some(turns) = turns.filter(|t| t.len() >= 2) else {
            return Err(bad("`turns` must be an array of at least two turns".into()));
        };
        let mut conversation = Vec::with_capacity(turns.len());
        for (t, turn) in turns.iter().enumerate() {
            let text = turn.get("text").and_then(|v| v.as_str()).filter(|q| !q.trim().is_empty());
            let Some(text) = text else {
                return Err(bad(format!("turn {}: `text` must be a non-empty string", t + 1)));
            };
            let Some(intent) = turn.get("intent").and_then(|v| v.as_str()) else {
                return Err(bad(format!("turn {}: `intent` must be a string", t + 1)));
            };
            if !intents.iter().any(|i| i == intent) {
                return Err(bad(format!("turn {}: `intent` {intent:?} is not an intent of the manifest", t + 1)));
            }
            conversation.push((text.to_string(), intent.to_string()));
        }
        out.push(conversation);
    }
    Ok(out)
}

/// The labelled lines of one example file.
fn example_lines(text: &str, path: &str, intents: &[String]) -> Result<Vec<(usize, String)>, RouterError> {
    let mut out = Vec::new();
    for line in json_lines(text, EXAMPLES, path, MAX_EXAMPLE_LINE) {
        let (n, value) = line?;
        let bad = |reason: String| RouterError::ExampleLine { key: EXAMPLES, path: path.to_string(), line: n, reason };
        let Some(object) = value.as_object() else { return Err(bad("not a JSON object".into())) };
        let query = object.get("query").or_else(|| object.get("text")).and_then(|v| v.as_str());
        let Some(query) = query.filter(|q| !q.trim().is_empty()) else {
            return Err(bad("`query` (or `text`) must be a non-empty string".into()));
        };
        // An export of the signals loop: only the corrections a caller gave are labels.
        let intent = if object.contains_key("correct_intent") {
            match object.get("correct_intent").and_then(|v| v.as_str()) {
                Some(intent) => intent,
                None => continue,
            }
        } else {
            object.get("intent").and_then(|v| v.as_str()).ok_or_else(|| bad("`intent` must be a string".into()))?
        };
        let Some(index) = intents.iter().position(|i| i == intent) else {
            return Err(bad(format!("`intent` {intent:?} is not an intent of the manifest")));
        };
        out.push((index, query.to_string()));
    }
    Ok(out)
}

/// The static word vectors the classifier ships (64 dimensions distilled from
/// all-MiniLM-L6-v2, docs/scope.md#word-vectors) as the router's dense block: the mean vector
/// of a text's content words, unit length.
#[derive(Debug, Clone, Copy, Default)]
pub struct WordVectors;

/// [`WordVectors`]' name in an artifact.
pub const WORD_VECTORS: &str = "minilm-word-vectors-64";

impl Embedder for WordVectors {
    fn name(&self) -> &str {
        WORD_VECTORS
    }
    fn dims(&self) -> usize {
        crate::classify::EMBEDDING_DIMS
    }
    fn embed(&self, text: &str) -> Option<Vec<f32>> {
        crate::classify::text_embedding(text).map(|v| v.to_vec())
    }
}

/// Length of the dense block next to the two unit-length n-gram blocks; chosen among 0 – 2 on
/// CLINC150's validation split with 5 and 10 examples per intent (docs/performance.md).
pub const DENSE_WEIGHT: f32 = 1.0;

/// How the router is trained: the general method, with the threads this machine has.
pub fn train_spec() -> TrainSpec {
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(8);
    let features = FeatureSpec { dense_weight: DENSE_WEIGHT, ..FeatureSpec::default() };
    TrainSpec { threads, features, ..TrainSpec::default() }
}

/// Route `text` with `router`, its dense block read from [`WordVectors`] when it has one (what
/// the classifier does inside a classification, without the vocabulary's blend).
pub fn route(router: &Router, text: &str) -> switchyard_intents::Routed {
    let vector = (router.features.dense_dims > 0).then(|| WordVectors.embed(text)).flatten();
    router.route_with(text, vector.as_deref())
}

/// Train a router on `set` the general way (n-grams and [`WordVectors`]).
pub fn train_set(set: &TrainingSet) -> Result<Router, TrainError> {
    let spec = train_spec();
    if spec.features.dense_weight > 0.0 {
        Router::train_with(set, &spec, Some(&WordVectors))
    } else {
        Router::train(set, &spec)
    }
}

/// Train the router of `manifest` (and its continuation model); the artifact's bytes with it.
pub fn train(manifest: &Manifest) -> Result<(Trained, Vec<u8>), RouterError> {
    train_from(manifest, &training(manifest)?)
}

/// Train `manifest`'s router on what [`training`] read, then, when it names conversations, its
/// continuation model on the classifier that router makes; the artifact's bytes with them.
pub fn train_from(manifest: &Manifest, t: &Training) -> Result<(Trained, Vec<u8>), RouterError> {
    let router = Arc::new(train_set(&t.set)?);
    let mut sections = Vec::new();
    if let Some((hash, json)) = prepared(manifest) {
        let mut bytes = hash.to_le_bytes().to_vec();
        bytes.extend_from_slice(json.as_bytes());
        sections.push(Section { name: MANIFEST_SECTION.into(), bytes });
    }
    let continuation = if t.conversations.is_empty() {
        None
    } else {
        let classifier = Classifier::with_router(manifest, Some(router.clone()));
        let mut trainer = ContinuationTrainer::default();
        classifier.train_continuation(&t.conversations, &mut trainer);
        let table = trainer.to_table();
        sections.push(Section { name: CONTINUATION_SECTION.into(), bytes: table.clone().into_bytes() });
        Some(Arc::new(ContinuationModel::parse(&table).map_err(RouterError::Continuation)?))
    };
    let cascade = match manifest.encoder_folder() {
        Some(folder) => {
            let (cascade, bytes) = train_cascade(&t.set, &folder)?;
            sections.push(Section { name: CASCADE_SECTION.into(), bytes });
            Some(Arc::new(cascade))
        }
        None => None,
    };
    let bytes = artifact::encode(&router, &Header::new(t.manifest_hash, t.examples_hash), &sections);
    Ok((Trained { router, continuation, cascade }, bytes))
}

/// The cascade's second router, trained on `set` the general way with the sentence vectors of
/// the encoder in `folder` added to the dense block; with its artifact section's bytes.
pub fn train_cascade(set: &TrainingSet, folder: &Path) -> Result<(Cascade, Vec<u8>), RouterError> {
    let identity = cascade::identity(folder).map_err(RouterError::Encoder)?;
    let encoder = cascade::shared_encoder(folder).map_err(RouterError::Encoder)?;
    let spec = TrainSpec { svm: cascade::MODEL, refusal_cost: cascade::REFUSAL_COST, ..train_spec() };
    let texts: Vec<&str> =
        set.examples.iter().map(|(t, _)| t.as_str()).chain(set.background.iter().map(String::as_str)).collect();
    let block = TrainingBlock::new(&encoder, &texts, spec.threads);
    let router = Router::train_with(set, &spec, Some(&block))?;
    let mut bytes = identity.to_le_bytes().to_vec();
    bytes.extend(artifact::encode(&router, &Header::new(0, 0), &[]));
    Ok((Cascade::new(router, folder.to_path_buf(), identity), bytes))
}

/// The cascade an artifact's sections hold for `manifest`, if it names an encoder.
fn cascade_section(manifest: &Manifest, sections: &[Section]) -> Result<Option<Arc<Cascade>>, ArtifactState> {
    let Some(folder) = manifest.encoder_folder() else { return Ok(None) };
    let Some(section) = sections.iter().find(|s| s.name == CASCADE_SECTION) else {
        return Err(ArtifactState::Stale("it has no cascade router for classifier.encoder".into()));
    };
    let unreadable = |why: String| ArtifactState::Unreadable(format!("its cascade router: {why}"));
    let (identity, router) = section.bytes.split_at_checked(8).ok_or_else(|| unreadable("cut short".into()))?;
    let identity = u64::from_le_bytes(identity.try_into().map_err(|_| unreadable("cut short".into()))?);
    let (_, router, _) = artifact::decode(router).map_err(|e| unreadable(e.to_string()))?;
    if router.embedding != cascade::CASCADE_BLOCK || router.intents.len() != manifest.intents.len() {
        return Err(ArtifactState::Stale("its cascade router is not this build's or not the manifest's".into()));
    }
    Ok(Some(Arc::new(Cascade::new(router, folder, identity))))
}

/// Where the artifact of a manifest loaded from a file belongs: beside it, `.router` for its
/// extension. `None` for the embedded manifest, whose artifact is compiled in.
pub fn artifact_path(manifest: &Manifest) -> Option<PathBuf> {
    manifest.source.as_ref().map(|p| p.with_extension(EXTENSION))
}

/// The artifact's bytes: the file beside the manifest, or the compiled-in one (not copied).
fn artifact_bytes(manifest: &Manifest) -> Result<std::borrow::Cow<'static, [u8]>, ArtifactState> {
    match artifact_path(manifest) {
        Some(path) => match std::fs::read(&path) {
            Ok(bytes) => Ok(bytes.into()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(ArtifactState::Missing),
            Err(e) => Err(ArtifactState::Unreadable(format!("{}: {e}", path.display()))),
        },
        None if EMBEDDED.is_empty() => Err(ArtifactState::Missing),
        None => Ok(EMBEDDED.into()),
    }
}

/// The head of `manifest`'s artifact (header and section names), read without the router or the
/// sections' contents, once the artifact's length is the one its head gives (a file cut short
/// is damaged).
fn artifact_head(manifest: &Manifest) -> Result<artifact::Head, ArtifactState> {
    let unreadable = |e: artifact::ArtifactError| ArtifactState::Unreadable(e.to_string());
    let (head, len) = match artifact_path(manifest) {
        Some(path) => {
            let file = match std::fs::File::open(&path) {
                Ok(file) => file,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(ArtifactState::Missing),
                Err(e) => return Err(ArtifactState::Unreadable(format!("{}: {e}", path.display()))),
            };
            let len = file.metadata().map(|m| m.len()).unwrap_or(0);
            (artifact::read_head(&mut std::io::BufReader::new(file), |_| false).map_err(unreadable)?, len)
        }
        None if EMBEDDED.is_empty() => return Err(ArtifactState::Missing),
        None => (
            artifact::read_head(&mut std::io::Cursor::new(EMBEDDED), |_| false).map_err(unreadable)?,
            EMBEDDED.len() as u64,
        ),
    };
    if head.len.checked_add(head.router_len) != Some(len) {
        return Err(ArtifactState::Unreadable(format!(
            "{len} bytes where its head says {}",
            head.len.saturating_add(head.router_len)
        )));
    }
    Ok(head)
}

/// Whether `header` fits `manifest` (and, when `examples_hash` is given, its example files).
fn check(header: &Header, manifest: &Manifest, examples_hash: Option<u64>) -> ArtifactState {
    if header.trainer != artifact::TRAINER {
        return ArtifactState::Stale(format!("trained by {}, this is {}", header.trainer, artifact::TRAINER));
    }
    if header.manifest_hash != manifest_hash(manifest) {
        return ArtifactState::Stale(
            "the manifest's intents, examples, negative examples or encoder, or the trainer's background, changed"
                .into(),
        );
    }
    if examples_hash.is_some_and(|h| h != header.examples_hash) {
        return ArtifactState::Stale("a file named in classifier.examples or classifier.dialogues changed".into());
    }
    ArtifactState::Current
}

/// The router of `manifest` (with its continuation model) from its artifact, checked against
/// the manifest (not the example files: a deployed function has only the artifact).
pub fn load(manifest: &Manifest) -> Result<Trained, ArtifactState> {
    from_bytes(manifest, &artifact_bytes(manifest)?)
}

/// The router (with its continuation model) the artifact `bytes` holds, checked against
/// `manifest` (not its example files).
fn from_bytes(manifest: &Manifest, bytes: &[u8]) -> Result<Trained, ArtifactState> {
    let (header, router, sections) = artifact::decode(bytes).map_err(|e| ArtifactState::Unreadable(e.to_string()))?;
    match check(&header, manifest, None) {
        ArtifactState::Current if !router.embedding.is_empty() && router.embedding != WORD_VECTORS => {
            Err(ArtifactState::Stale(format!("its dense block is {}, this build has {WORD_VECTORS}", router.embedding)))
        }
        ArtifactState::Current if router.intents.len() != manifest.intents.len() => {
            Err(ArtifactState::Stale("its intents are not the manifest's".into()))
        }
        ArtifactState::Current => {
            let continuation = continuation_section(&sections).map_err(ArtifactState::Unreadable)?;
            if continuation.is_none() && !manifest.classifier.dialogues.is_empty() {
                return Err(ArtifactState::Stale("it has no continuation model for classifier.dialogues".into()));
            }
            let cascade = cascade_section(manifest, &sections)?;
            Ok(Trained { router: Arc::new(router), continuation, cascade })
        }
        other => Err(other),
    }
}

/// The continuation model an artifact's sections hold, if any.
fn continuation_section(sections: &[Section]) -> Result<Option<Arc<ContinuationModel>>, String> {
    let Some(section) = sections.iter().find(|s| s.name == CONTINUATION_SECTION) else { return Ok(None) };
    let table = std::str::from_utf8(&section.bytes).map_err(|_| "its continuation model is not UTF-8".to_string())?;
    Ok(Some(Arc::new(ContinuationModel::parse(table)?)))
}

/// The state of `manifest`'s artifact, the example files included when they can be read
/// (what `switchyard validate` reports).
pub fn state(manifest: &Manifest) -> ArtifactState {
    let bytes = match artifact_bytes(manifest) {
        Ok(bytes) => bytes,
        Err(state) => return state,
    };
    let header = match artifact::header(&bytes) {
        Ok(header) => header,
        Err(e) => return ArtifactState::Unreadable(e.to_string()),
    };
    match check(&header, manifest, manifest_files_hash(manifest)) {
        ArtifactState::Current => match from_bytes(manifest, &bytes) {
            Ok(Trained { cascade: Some(c), .. }) if cascade::identity(&c.folder).is_ok_and(|id| id != c.identity) => {
                ArtifactState::Stale(
                    "the encoder classifier.encoder.model names is not the one it was trained with".into(),
                )
            }
            Ok(_) => ArtifactState::Current,
            Err(state) => state,
        },
        other => other,
    }
}

/// The command that trains `manifest`'s router.
pub fn train_command(manifest: &Manifest) -> String {
    match &manifest.source {
        Some(path) => format!("switchyard train --manifest {}", path.display()),
        None => "switchyard train".into(),
    }
}

impl Classifier {
    /// The classifier of `manifest` with its trained router: the artifact when current, else
    /// trained in-process ([`load_or_train`]); by the vocabulary alone when the trainer
    /// refuses the manifest.
    pub fn new(manifest: &Manifest) -> Classifier {
        match load_or_train(manifest) {
            Some(trained) => {
                let mut classifier = Classifier::with_router(manifest, Some(trained.router));
                classifier.continuation = trained.continuation;
                classifier.cascade = trained.cascade;
                classifier
            }
            None => Classifier::lexical(manifest),
        }
    }
}

/// Routers loaded or trained in this process, by manifest hash: a function loads its router at
/// init and builds the classifier on the first question; tests and `serve` build many
/// classifiers of one manifest.
fn trained() -> &'static Mutex<Vec<(u64, Trained)>> {
    static TRAINED: OnceLock<Mutex<Vec<(u64, Trained)>>> = OnceLock::new();
    TRAINED.get_or_init(|| Mutex::new(Vec::new()))
}

/// The router of `manifest`: its artifact when current; otherwise trained here, once per
/// process and manifest, with a one-line notice naming the command that compiles it ahead
/// (the embedded default and `serve`). `None` for a manifest the trainer refuses (fewer than
/// two intents, or an unreadable example file, reported in the notice): such a manifest is
/// classified by its vocabulary alone. A deployed function ([`never_train`]) never trains:
/// should its router not load after all (damaged past its head), it logs why and classifies by
/// the vocabulary alone.
pub fn load_or_train(manifest: &Manifest) -> Option<Trained> {
    let hash = manifest_hash(manifest);
    let mut cache = trained().lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, trained)) = cache.iter().find(|(h, _)| *h == hash) {
        return Some(trained.clone());
    }
    let state = match load(manifest) {
        Ok(trained) => {
            cache.push((hash, trained.clone()));
            return Some(trained);
        }
        Err(state) => state,
    };
    if DEPLOYED.load(std::sync::atomic::Ordering::Relaxed) {
        tracing::error!(
            manifest = %manifest.name,
            "the router artifact is {}; classifying by the manifest's vocabulary (run `{}` and build again)",
            state.describe(),
            train_command(manifest)
        );
        return None;
    }
    let started = std::time::Instant::now();
    // Without its encoder a manifest still gets its router, without the cascade.
    let trained = match train(manifest) {
        Err(RouterError::Encoder(why)) => {
            tracing::warn!(manifest = %manifest.name, error = %why, "the cascade's encoder cannot be read; routing without the cascade");
            let mut without = manifest.clone();
            without.classifier.encoder = None;
            train(&without)
        }
        other => other,
    };
    match trained {
        Ok((trained, _)) => {
            tracing::warn!(
                manifest = %manifest.name,
                train_ms = started.elapsed().as_millis() as u64,
                "the router artifact is {}; trained in-process (run `{}` to compile it ahead)",
                state.describe(),
                train_command(manifest)
            );
            cache.push((hash, trained.clone()));
            Some(trained)
        }
        Err(e) => {
            tracing::warn!(manifest = %manifest.name, error = %e, "no trained router; classifying by the manifest's vocabulary");
            None
        }
    }
}

/// Set by [`never_train`].
static DEPLOYED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// From now on this process never trains a router (a deployed function, once its artifact
/// passed [`startup_problem`]): [`load_or_train`] answers `None` when the artifact does not load.
pub fn never_train() {
    DEPLOYED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Why a deployed function must not start on `manifest`'s artifact: missing, damaged, trained
/// by another trainer or from another manifest, without the continuation model its
/// conversations ask for or the cascade router its encoder asks for, or the encoder's folder
/// missing. Only the artifact's head is read (the router is read with the
/// classifier, on the first question), so a start costs the same whatever the router's size.
pub fn startup_problem(manifest: &Manifest) -> Option<String> {
    let state = match artifact_head(manifest) {
        Ok(head) => match check(&head.header, manifest, None) {
            ArtifactState::Current
                if !manifest.classifier.dialogues.is_empty()
                    && !head.names.iter().any(|name| name == CONTINUATION_SECTION) =>
            {
                ArtifactState::Stale("it has no continuation model for classifier.dialogues".into())
            }
            ArtifactState::Current
                if manifest.classifier.encoder.is_some() && !head.names.iter().any(|name| name == CASCADE_SECTION) =>
            {
                ArtifactState::Stale("it has no cascade router for classifier.encoder".into())
            }
            state => state,
        },
        Err(state) => state,
    };
    if state != ArtifactState::Current {
        return Some(format!(
            "the router artifact of manifest `{}` is {}: run `{}` and build again",
            manifest.name,
            state.describe(),
            train_command(manifest)
        ));
    }
    // The encoder is read on the first question in doubt; that it is there is checked now.
    let folder = manifest.encoder_folder()?;
    (!folder.join("model.safetensors").is_file()).then(|| {
        let from = if manifest.encoder_dir.is_some() { ENV_ENCODER } else { "classifier.encoder.model" };
        format!(
            "{from}: {} has no model.safetensors: ship the encoder's folder with the function (the template's encoder layer)",
            folder.display()
        )
    })
}

/// `path`'s artifact written atomically (a temporary file renamed over it).
pub fn write_artifact(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("{EXTENSION}.tmp"));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}
