use super::*;

#[test]
fn the_embedded_manifest_read_from_its_prepared_json_is_the_yaml_one() {
    assert!(!EMBEDDED_ROUTING_JSON.is_empty(), "build.rs prepares the JSON form of routing.yaml");
    let from_json: Manifest = serde_json::from_str(EMBEDDED_ROUTING_JSON).expect("the JSON form deserializes");
    let from_yaml = Manifest::from_yaml(EMBEDDED_ROUTING_YAML, EMBEDDED_FILE).expect("the shipped manifest loads");
    assert_eq!(from_json, from_yaml);
    let embedded = Manifest::embedded().expect("the embedded manifest loads");
    assert_eq!(embedded.fingerprint(), from_yaml.fingerprint());
}

#[test]
fn a_prepared_form_that_does_not_deserialize_gives_the_yaml_result_and_errors() {
    let from_yaml = Manifest::from_yaml(EMBEDDED_ROUTING_YAML, EMBEDDED_FILE).expect("the shipped manifest loads");
    for json in ["", "{", "{\"version\": \"one\"}"] {
        let manifest = Manifest::from_prepared(json, EMBEDDED_ROUTING_YAML, EMBEDDED_FILE).expect("falls back");
        assert_eq!(manifest, from_yaml, "json {json:?}");
    }
    let broken = EMBEDDED_ROUTING_YAML.replacen("version: 1", "version: [1", 1);
    let err = Manifest::from_prepared("", &broken, EMBEDDED_FILE).expect_err("broken YAML");
    assert!(err.problems.iter().all(|p| p.line.is_some()), "the YAML error keeps its line: {err}");
}

#[test]
fn a_prepared_form_is_validated_like_the_yaml() {
    let yaml = EMBEDDED_ROUTING_YAML.replacen("version: 1", "version: 7", 1);
    let json = serde_json::to_string(&serde_yaml::from_str::<serde_json::Value>(&yaml).expect("yaml")).expect("json");
    let from_json = Manifest::from_prepared(&json, &yaml, EMBEDDED_FILE).expect_err("version 7 is refused");
    let from_yaml = Manifest::from_yaml(&yaml, EMBEDDED_FILE).expect_err("version 7 is refused");
    assert_eq!(from_json.to_string(), from_yaml.to_string());
}

#[test]
fn the_fingerprint_is_fnv1a_of_the_canonical_json() {
    let manifest = Manifest::embedded().expect("the embedded manifest loads");
    let text = serde_json::to_string(&manifest).expect("serializes");
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    assert_eq!(manifest.fingerprint(), format!("{hash:016x}"));
}
