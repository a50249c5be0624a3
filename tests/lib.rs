//! Test harness shared by Switchyard's cross-crate tests.
//!
//! Events are built from the canonical AWS sample events under `fixtures/events/` (an API
//! Gateway HTTP API request with a JWT authorizer, an SQS event), changed only where a test
//! needs its own path, body, caller or message bodies — so the handlers are exercised with the
//! shapes Lambda really delivers.

pub mod endpoint;

use aws_lambda_events::apigw::{ApiGatewayV2httpRequest, ApiGatewayV2httpResponse};
use aws_lambda_events::sqs::SqsEvent;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use switchyard_engine::handlers::handle_http;
use switchyard_engine::{pollers::PollerConfig, pollers::Pollers, Embedded};
use switchyard_model::contracts::OrchestratorOutput;
use switchyard_model::manifest::Manifest;

/// Every field of the E2I design's `RoutingTrainingSignal`, and the reward: what an exported
/// training signal carries (`GET /v1/signals`, `switchyard signals export`).
pub const SIGNAL_FIELDS: [&str; 16] = [
    "signal_id",
    "session_id",
    "query",
    "query_pattern",
    "intent",
    "entities_extracted",
    "agents_selected",
    "routing_confidence",
    "routing_rationale",
    "agents_succeeded",
    "agents_failed",
    "total_latency_ms",
    "user_satisfaction",
    "answer_quality",
    "was_rerouted",
    "reward",
];

/// `tests/fixtures/<rel>`.
pub fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(rel)
}

/// Read a fixture as text.
pub fn fixture_text(rel: &str) -> String {
    std::fs::read_to_string(fixture(rel)).unwrap_or_else(|e| panic!("fixture {rel}: {e}"))
}

/// The shipped `routing.yaml`.
pub fn shipped_manifest() -> Manifest {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../routing.yaml");
    Manifest::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// A manifest fixture.
pub fn manifest_fixture(rel: &str) -> Manifest {
    Manifest::load(&fixture(rel)).unwrap_or_else(|e| panic!("{e}"))
}

/// The canonical API Gateway v2 request (JWT authorizer), re-aimed at `method path?query` with
/// `body` from caller `user` with `roles`.
pub fn api_request(
    method: &str,
    path: &str,
    query: &str,
    body: Option<&str>,
    user: &str,
    roles: &str,
) -> ApiGatewayV2httpRequest {
    let mut event: Value =
        serde_json::from_str(&fixture_text("events/apigw-v2-request-jwt-authorizer.json")).expect("fixture parses");
    event["rawPath"] = json!(path);
    event["rawQueryString"] = json!(query);
    let params: serde_json::Map<String, Value> =
        query.split('&').filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.to_string(), json!(v))).collect();
    event["queryStringParameters"] = Value::Object(params);
    event["requestContext"]["http"]["method"] = json!(method);
    event["requestContext"]["http"]["path"] = json!(path);
    event["requestContext"]["authorizer"]["jwt"]["claims"] = json!({ "sub": user, "roles": roles });
    event["headers"]["content-type"] = json!("application/json");
    event["body"] = body.map_or(Value::Null, |b| json!(b));
    serde_json::from_value(event).expect("event deserializes")
}

/// The canonical SQS event with one record per body (message ids `MessageID_1`, …).
pub fn sqs_event(bodies: &[&str]) -> SqsEvent {
    let sample: Value = serde_json::from_str(&fixture_text("events/sqs-event.json")).expect("fixture parses");
    let template = sample["Records"][0].clone();
    let records: Vec<Value> = bodies
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let mut r = template.clone();
            r["messageId"] = json!(format!("MessageID_{}", i + 1));
            r["body"] = json!(b);
            r["attributes"]["ApproximateReceiveCount"] = json!("1");
            r
        })
        .collect();
    serde_json::from_value(json!({ "Records": records })).expect("event deserializes")
}

/// The body of a handler response as JSON.
pub fn json_body(response: &ApiGatewayV2httpResponse) -> Value {
    match &response.body {
        Some(aws_lambda_events::encodings::Body::Text(t)) => {
            serde_json::from_str(t).unwrap_or(Value::String(t.clone()))
        }
        _ => Value::Null,
    }
}

/// The body of a handler response as text.
pub fn text_body(response: &ApiGatewayV2httpResponse) -> String {
    match &response.body {
        Some(aws_lambda_events::encodings::Body::Text(t)) => t.clone(),
        _ => String::new(),
    }
}

/// An embedded system with its pollers running.
pub struct Harness {
    /// The system.
    pub system: Embedded,
    _pollers: Pollers,
}

impl Harness {
    /// Start `manifest` on the in-memory adapters.
    pub fn start(manifest: Manifest) -> Harness {
        Harness::from_system(switchyard_agents::embedded(Arc::new(manifest), Default::default()))
    }

    /// Start an already built system.
    pub fn from_system(system: Embedded) -> Harness {
        let pollers = system.start(PollerConfig { wait: Duration::from_secs(20), default_concurrency: 16 });
        Harness { system, _pollers: pollers }
    }

    /// POST a raw question through the intake handler; returns the response.
    pub async fn post(&self, question: &str, user: &str, roles: &str) -> ApiGatewayV2httpResponse {
        let body = json!({ "query": question }).to_string();
        handle_http(&self.system.deps, api_request("POST", "/v1/queries", "", Some(&body), user, roles)).await
    }

    /// Ask and wait for the output (virtual time advances while waiting).
    pub async fn ask(&self, question: &str) -> OrchestratorOutput {
        let response = self.post(question, "analyst-1", "").await;
        assert_eq!(response.status_code, 202, "intake answered {}", text_body(&response));
        let id = json_body(&response)["query_id"].as_str().expect("query id").to_string();
        self.output(&id).await
    }

    /// Wait (up to an hour of virtual time) for a query's output.
    pub async fn output(&self, query_id: &str) -> OrchestratorOutput {
        for _ in 0..360_000 {
            if let Some(o) = self.system.deps.store.get_output(query_id).await.expect("store") {
                return std::sync::Arc::unwrap_or_clone(o);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("query {query_id} never finished");
    }

    /// Messages left on every queue (dead-letter queues included), by queue name.
    pub async fn leftover_messages(&self) -> Vec<(String, u64)> {
        use switchyard_engine::ports::Queue as _;
        let mut left = Vec::new();
        for q in self.system.queue.queue_ids() {
            let d = self.system.queue.depth(q).await.expect("depth");
            if d.total() > 0 {
                left.push((q.name(), d.total()));
            }
        }
        left
    }
}

/// A store that counts what the steps did to it, to check effects happen once whatever the
/// deliveries: synthesis claims, outputs written, handoffs recorded.
pub type ObservedStore = switchyard_testkit::hooked::HookedStore<StoreCounts>;

/// An [`ObservedStore`] around `inner`.
pub fn observed_store(inner: Arc<dyn switchyard_engine::ports::Store>) -> ObservedStore {
    switchyard_testkit::hooked::HookedStore::new(inner, StoreCounts::default())
}

/// What an [`ObservedStore`] counts.
#[derive(Debug, Default)]
pub struct StoreCounts {
    /// Successful claims (`routed`/`synthesizing` → `synthesizing`).
    pub synth_claims: std::sync::atomic::AtomicU64,
    /// Successful `finish_query` calls.
    pub outputs_written: std::sync::atomic::AtomicU64,
    /// Handoffs recorded (not duplicates).
    pub handoffs_recorded: std::sync::atomic::AtomicU64,
}

impl switchyard_testkit::hooked::StoreHooks for StoreCounts {
    fn after(
        &self,
        op: switchyard_testkit::hooked::StoreOp<'_>,
        outcome: Result<switchyard_testkit::hooked::Applied<'_>, &switchyard_engine::ports::StoreError>,
    ) -> Result<(), switchyard_engine::ports::StoreError> {
        use std::sync::atomic::Ordering::SeqCst;
        use switchyard_testkit::hooked::{Applied, StoreOp};
        match (op, outcome) {
            (StoreOp::UpdateQuery(q), Ok(_)) if q.status == switchyard_engine::ports::QueryStatus::Synthesizing => {
                self.synth_claims.fetch_add(1, SeqCst);
            }
            (
                StoreOp::RecordHandoff(_),
                Ok(Applied::Handoff(switchyard_engine::ports::HandoffWrite::Recorded { .. })),
            ) => {
                self.handoffs_recorded.fetch_add(1, SeqCst);
            }
            (StoreOp::FinishQuery(..), Ok(_)) => {
                self.outputs_written.fetch_add(1, SeqCst);
            }
            _ => {}
        }
        Ok(())
    }
}

/// Signing keys and tokens for the tests of in-function JWT verification
/// (`switchyard_engine::jwt`, the events-stream function).
pub mod tokens {
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::rsa::KeySize;
    use aws_lc_rs::signature::{self, EcdsaKeyPair, KeyPair, RsaKeyPair};
    use base64::Engine as _;
    use serde_json::{json, Value};

    /// The issuer the test verifiers accept.
    pub const ISSUER: &str = "https://issuer.test/pool-1";
    /// The audience the test verifiers accept.
    pub const AUDIENCE: &str = "switchyard-test-client";

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    }

    /// An issuer's signing keys: one P-256 (ES256) and one RSA-2048 (RS256).
    pub struct Issuer {
        ec: EcdsaKeyPair,
        rsa: RsaKeyPair,
    }

    impl Default for Issuer {
        fn default() -> Self {
            Issuer::new()
        }
    }

    /// `(n, e)` of a PKCS#1 RSAPublicKey DER document.
    fn rsa_components(der: &[u8]) -> (Vec<u8>, Vec<u8>) {
        fn read(der: &[u8], at: usize) -> (usize, usize) {
            // (start of the contents, length) of the TLV at `at`.
            let len = der[at + 1] as usize;
            if len < 0x80 {
                return (at + 2, len);
            }
            let n = len & 0x7f;
            let len = der[at + 2..at + 2 + n].iter().fold(0usize, |acc, b| (acc << 8) | *b as usize);
            (at + 2 + n, len)
        }
        let (seq, _) = read(der, 0);
        let (n_at, n_len) = read(der, seq);
        let (e_at, e_len) = read(der, n_at + n_len);
        let strip = |v: &[u8]| v.iter().skip_while(|b| **b == 0).copied().collect::<Vec<u8>>();
        (strip(&der[n_at..n_at + n_len]), strip(&der[e_at..e_at + e_len]))
    }

    impl Issuer {
        /// Fresh keys.
        pub fn new() -> Issuer {
            Issuer {
                ec: EcdsaKeyPair::generate(&signature::ECDSA_P256_SHA256_FIXED_SIGNING).expect("P-256 key"),
                rsa: RsaKeyPair::generate(KeySize::Rsa2048).expect("RSA key"),
            }
        }

        /// The public JWKS document (`kid`s `ec-1` and `rsa-1`).
        pub fn jwks(&self) -> String {
            let point = self.ec.public_key().as_ref();
            let (n, e) = rsa_components(self.rsa.public_key().as_ref());
            json!({ "keys": [
                { "kty": "EC", "crv": "P-256", "kid": "ec-1", "alg": "ES256", "use": "sig",
                  "x": b64(&point[1..33]), "y": b64(&point[33..65]) },
                { "kty": "RSA", "kid": "rsa-1", "alg": "RS256", "use": "sig", "n": b64(&n), "e": b64(&e) },
            ]})
            .to_string()
        }

        /// A verifier for [`ISSUER`] and [`AUDIENCE`] with these keys.
        pub fn verifier(&self) -> switchyard_engine::jwt::JwtVerifier {
            switchyard_engine::jwt::JwtVerifier::new(ISSUER, &[AUDIENCE.to_string()], &self.jwks()).expect("verifier")
        }

        /// A token with `header` and `claims`, signed with the key its `alg` names.
        pub fn sign(&self, header: &Value, claims: &Value) -> String {
            let signed = format!("{}.{}", b64(header.to_string().as_bytes()), b64(claims.to_string().as_bytes()));
            let rng = SystemRandom::new();
            let signature = match header["alg"].as_str() {
                Some("RS256") => {
                    let mut sig = vec![0u8; self.rsa.public_modulus_len()];
                    self.rsa.sign(&signature::RSA_PKCS1_SHA256, &rng, signed.as_bytes(), &mut sig).expect("sign");
                    sig
                }
                _ => self.ec.sign(&rng, signed.as_bytes()).expect("sign").as_ref().to_vec(),
            };
            format!("{signed}.{}", b64(&signature))
        }

        /// A valid ES256 token for `sub` with `roles`, expiring in an hour from `now`.
        pub fn token(&self, sub: &str, roles: &[&str], now: i64) -> String {
            self.sign(&json!({ "alg": "ES256", "kid": "ec-1", "typ": "JWT" }), &claims(sub, roles, now))
        }
    }

    /// The public JWKS of `issuer` with its keys' `kid`s renamed `ec-<suffix>` and
    /// `rsa-<suffix>`: another issuer key pair posing as a rotation of the first.
    pub fn jwks_with_kids(issuer: &Issuer, suffix: &str) -> Value {
        let mut jwks: Value = serde_json::from_str(&issuer.jwks()).expect("jwks");
        for key in jwks["keys"].as_array_mut().expect("keys") {
            let kid = key["kid"].as_str().expect("kid").split('-').next().expect("prefix").to_string();
            key["kid"] = json!(format!("{kid}-{suffix}"));
        }
        jwks
    }

    /// Tokens every door that verifies JWTs refuses, each with the words its 401 says: no
    /// token, malformed ones, `alg: none`, HS256 (also signed with the RSA key's public bytes
    /// as the HMAC secret, the key-confusion attack), an unknown `kid`, a forged payload,
    /// another issuer's signature, wrong `iss`, wrong `aud`, expired, not yet valid, no `exp`,
    /// no `sub`. `issuer` is the trusted one; `now` the verifier's clock.
    pub fn refused(issuer: &Issuer, now: i64) -> Vec<(Option<String>, &'static str)> {
        let es = json!({ "alg": "ES256", "kid": "ec-1" });
        let valid = issuer.token("owner", &[], now);
        let claims = claims("owner", &[], now);
        let with = |key: &str, value: Value| {
            let mut c = claims.clone();
            c[key] = value;
            c
        };
        let forged_payload = {
            // The owner's valid token with the subject swapped after signing.
            let parts: Vec<&str> = valid.split('.').collect();
            let evil = b64(self::claims("intruder", &["admin"], now).to_string().as_bytes());
            format!("{}.{evil}.{}", parts[0], parts[2])
        };
        let other_issuer = Issuer::new().token("owner", &[], now);
        let none_alg = format!("{}.{}.", b64(br#"{"alg":"none"}"#), b64(claims.to_string().as_bytes()));
        let hs256 =
            format!("{}.{}.c2lnbmF0dXJl", b64(br#"{"alg":"HS256","kid":"ec-1"}"#), b64(claims.to_string().as_bytes()));
        let confusion = {
            // HS256 with the RSA key's public modulus as the shared secret.
            let signed = format!("{}.{}", b64(br#"{"alg":"HS256","kid":"rsa-1"}"#), b64(claims.to_string().as_bytes()));
            let (n, _) = rsa_components(issuer.rsa.public_key().as_ref());
            let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, &n);
            format!("{signed}.{}", b64(aws_lc_rs::hmac::sign(&key, signed.as_bytes()).as_ref()))
        };
        vec![
            (None, "a Bearer token is required"),
            (Some("Basic dXNlcjpwYXNz".into()), "a Bearer token is required"),
            (Some("Bearer".into()), "a Bearer token is required"),
            (Some("Bearer not-a-jwt".into()), "must be three base64url parts"),
            (Some("Bearer a.b.c.d".into()), "must be three base64url parts"),
            (Some("Bearer !!!.e30.e30".into()), "the header is not base64url JSON"),
            (Some(format!("Bearer {}", "a".repeat(9000))), "longer than 8192 bytes"),
            (Some(format!("Bearer {none_alg}")), "alg must be RS256 or ES256"),
            (Some(format!("Bearer {hs256}")), "alg must be RS256 or ES256"),
            (Some(format!("Bearer {confusion}")), "alg must be RS256 or ES256"),
            (
                Some(format!("Bearer {}", issuer.sign(&json!({"alg":"ES256","kid":"other"}), &claims))),
                "kid names no key",
            ),
            (Some(format!("Bearer {forged_payload}")), "signature does not verify"),
            (Some(format!("Bearer {other_issuer}")), "signature does not verify"),
            (
                Some(format!("Bearer {}", issuer.sign(&es, &with("iss", json!("https://evil.test"))))),
                "iss is not the accepted issuer",
            ),
            (
                Some(format!("Bearer {}", issuer.sign(&es, &with("aud", json!("another-client"))))),
                "aud is not an accepted audience",
            ),
            (Some(format!("Bearer {}", issuer.sign(&es, &with("exp", json!(now - 120))))), "expired"),
            (Some(format!("Bearer {}", issuer.sign(&es, &with("nbf", json!(now + 600))))), "not valid yet"),
            (Some(format!("Bearer {}", issuer.sign(&es, &with("exp", Value::Null)))), "has no exp"),
            (Some(format!("Bearer {}", issuer.sign(&es, &with("aud", json!([]))))), "aud is not an accepted audience"),
            (Some(format!("Bearer {}", issuer.sign(&es, &with("sub", json!(""))))), "has no sub"),
        ]
    }

    /// Valid claims for `sub` at `now`.
    pub fn claims(sub: &str, roles: &[&str], now: i64) -> Value {
        json!({ "iss": ISSUER, "aud": AUDIENCE, "sub": sub, "roles": roles, "iat": now, "exp": now + 3600 })
    }
}

/// Read one HTTP/1.1 request from a loopback test server's socket: its head (request line and
/// headers, as sent) and its body (`content-length` bytes). `None` when the client went away
/// before the head was complete.
pub async fn read_http_request(socket: &mut tokio::net::TcpStream) -> Option<(String, Vec<u8>)> {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let (head_end, length) = loop {
        let read = socket.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..read]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            break (end + 4, length);
        }
    };
    while buf.len() < head_end + length {
        match socket.read(&mut chunk).await {
            Ok(read) if read > 0 => buf.extend_from_slice(&chunk[..read]),
            _ => break,
        }
    }
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    Some((head, buf.split_off(head_end)))
}

/// The scope fixture sets of `scope_accuracy.rs` and `out_of_scope.rs`: the in-scope and
/// out-of-scope sets tuned on (every earlier blind pair joins them once it has been scored and
/// read), and the latest blind pair, scored once (see `scope_accuracy.rs`'s module docs).
pub mod scope_sets {
    pub const TUNED_IN: [&str; 12] = [
        "labelled_questions.jsonl",
        "holdout_questions.jsonl",
        "blind_questions.jsonl",
        "blind2_questions.jsonl",
        "blind3_questions.jsonl",
        "blind4_questions.jsonl",
        "blind5_questions.jsonl",
        "blind6_questions.jsonl",
        "blind7_questions.jsonl",
        "blind8_questions.jsonl",
        "blind9_questions.jsonl",
        "blind10_questions.jsonl",
    ];
    pub const BLIND_IN: [&str; 1] = ["blind11_questions.jsonl"];
    pub const TUNED_OUT: [&str; 9] = [
        "out_of_scope_tuning.jsonl",
        "out_of_scope_blind.jsonl",
        "out_of_scope_blind2.jsonl",
        "out_of_scope_blind3.jsonl",
        "out_of_scope_blind4.jsonl",
        "out_of_scope_blind5.jsonl",
        "out_of_scope_blind6.jsonl",
        "out_of_scope_blind7.jsonl",
        "out_of_scope_blind8.jsonl",
    ];
    pub const BLIND_OUT: [&str; 1] = ["out_of_scope_blind9.jsonl"];
}

/// A dispatch of `intent` to `agent` with `context` as its fields, `timeout_ms` its budget
/// (the ids are fixed: tests that run one agent directly need no unique ones).
pub fn agent_dispatch(
    agent: &str,
    intent: &str,
    context: Value,
    timeout_ms: u64,
) -> switchyard_model::contracts::AgentDispatch {
    use switchyard_model::contracts::{
        AgentDispatch, DispatchConstraints, DispatchMetadata, DispatchPayload, DispatchRouting,
    };
    AgentDispatch {
        dispatch_id: "6f1c2a7e-0000-4000-8000-000000000001".into(),
        query_id: "6f1c2a7e-0000-4000-8000-000000000002".into(),
        target_agent: agent.into(),
        target_tier: 2,
        payload: DispatchPayload {
            intent: intent.into(),
            entities: vec![],
            context,
            constraints: DispatchConstraints { max_latency_ms: timeout_ms, required_confidence: 0.5 },
        },
        routing: DispatchRouting { priority: 1, timeout_ms, retry_count: 1, fallback_agent: None },
        metadata: DispatchMetadata { dispatched_at: chrono::Utc::now(), correlation_id: "c".into() },
    }
}
