//! Verifying a caller's JWT inside a function, for the routes no API Gateway authorizer
//! guards (the `events-stream` function behind a Lambda Function URL).
//!
//! The checks are those of the HTTP API's JWT authorizer, so a token works the same on both
//! doors (docs/operations.md#streaming-on-aws):
//! - the token is three base64url parts, at most [`MAX_TOKEN_LEN`] bytes;
//! - the header's `alg` is `RS256` or `ES256` (never `none`, never a shared-secret `HS*`), and
//!   its `kid` names a key of the configured JWKS (a JWKS of one key may omit `kid`s);
//! - the signature verifies with that key (the `jsonwebtoken` crate on aws-lc-rs, the TLS
//!   stack's own crypto);
//! - `iss` equals the configured issuer; `aud` (or Cognito access tokens' `client_id`) is one
//!   of the configured audiences;
//! - `exp` is in the future and `nbf` (when present) in the past, both with
//!   [`CLOCK_LEEWAY_S`] of leeway; `sub` is present and not empty.
//!
//! In a function the keys come from configuration (`SWITCHYARD_JWT_JWKS`, the issuer's JWKS
//! document), not from the network: the function's init stays a parse of a few hundred bytes.
//! `switchyard serve --auth jwt` may instead fetch them from the issuer's JWKS URL
//! (`SWITCHYARD_JWT_JWKS_URL`, [`JwtVerifier::from_jwks_url`]); then a token whose `kid` the
//! cached keys do not hold makes the verifier fetch the document once more (at most once per
//! [`JWKS_REFRESH_MIN_INTERVAL`]) before it refuses: a key rotation is picked up on the first
//! token signed with the new key, and a flood of made-up `kid`s costs one fetch a minute.

use crate::http_client::HttpClient;
use base64::Engine as _;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::Value;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::time::Instant;

/// Longest token accepted (Cognito's ID tokens are about 1 KB; 8 KB leaves room for claims).
pub const MAX_TOKEN_LEN: usize = 8 * 1024;

/// Seconds of clock skew allowed on `exp` and `nbf`.
pub const CLOCK_LEEWAY_S: i64 = 30;

/// The issuer (`iss`) tokens must carry.
pub const ENV_JWT_ISSUER: &str = "SWITCHYARD_JWT_ISSUER";
/// Accepted audiences (`aud` or `client_id`), comma separated.
pub const ENV_JWT_AUDIENCE: &str = "SWITCHYARD_JWT_AUDIENCE";
/// The issuer's JWKS document (JSON: `{"keys":[…]}`).
pub const ENV_JWT_JWKS: &str = "SWITCHYARD_JWT_JWKS";
/// Where the issuer publishes its JWKS document (`switchyard serve --auth jwt`), in place of
/// [`ENV_JWT_JWKS`].
pub const ENV_JWT_JWKS_URL: &str = "SWITCHYARD_JWT_JWKS_URL";

/// Shortest time between two fetches of the JWKS caused by unknown `kid`s: issuers rotate
/// keys in days and publish the new key before signing with it, so one fetch a minute
/// picks a rotation up at once and bounds what forged `kid`s can make the server fetch.
pub const JWKS_REFRESH_MIN_INTERVAL: Duration = Duration::from_secs(60);

/// Time allowed for one fetch of the JWKS document.
pub const JWKS_FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// Largest JWKS document read (an issuer's is a few KB).
pub const MAX_JWKS_BYTES: usize = 256 * 1024;

/// Why the verifier could not be built from its configuration (an init failure).
#[derive(Debug, thiserror::Error)]
pub enum JwtConfigError {
    /// A setting is missing or empty.
    #[error("{0} is not set: verifying callers' JWTs needs the issuer, the audiences and the issuer's JWKS (document or URL)")]
    Missing(&'static str),
    /// The JWKS document does not parse or holds no usable key.
    #[error("{ENV_JWT_JWKS}: {0}")]
    Jwks(String),
    /// The JWKS document could not be fetched from its URL, or what came back is unusable.
    #[error("{ENV_JWT_JWKS_URL}: {0}")]
    JwksUrl(String),
}

/// Why a token was refused. The message names the claim or part and the rule; it never
/// repeats the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    /// No `Authorization: Bearer …` header.
    #[error("a Bearer token is required (Authorization: Bearer <JWT>)")]
    Missing,
    /// The token is larger than [`MAX_TOKEN_LEN`].
    #[error("the token is longer than {MAX_TOKEN_LEN} bytes")]
    TooLong,
    /// Not three base64url parts of JSON.
    #[error("the token is malformed: {0}")]
    Malformed(&'static str),
    /// `alg` is not one this verifier accepts.
    #[error("the token's alg must be RS256 or ES256")]
    UnsupportedAlgorithm,
    /// No configured key matches the header's `kid` and `alg`.
    #[error("the token's kid names no key of the issuer")]
    UnknownKey,
    /// The signature does not verify.
    #[error("the token's signature does not verify")]
    BadSignature,
    /// `iss` is not the configured issuer.
    #[error("the token's iss is not the accepted issuer")]
    WrongIssuer,
    /// Neither `aud` nor `client_id` is an accepted audience.
    #[error("the token's aud is not an accepted audience")]
    WrongAudience,
    /// `exp` has passed (or is missing).
    #[error("the token has expired (exp), or has no exp")]
    Expired,
    /// `nbf` is in the future.
    #[error("the token is not valid yet (nbf)")]
    NotYetValid,
    /// `sub` is missing or empty.
    #[error("the token has no sub")]
    NoSubject,
}

/// The identity a verified token carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedToken {
    /// `sub`.
    pub subject: String,
    /// `roles`, or else `cognito:groups` (an array, or a string of names).
    pub roles: Vec<String>,
}

/// One signing key of the issuer's JWKS.
#[derive(Debug)]
struct Key {
    kid: Option<String>,
    /// `RS256` or `ES256`: the only algorithm this key verifies.
    algorithm: Algorithm,
    key: DecodingKey,
}

/// Verifies tokens against one issuer's keys.
#[derive(Debug)]
pub struct JwtVerifier {
    issuer: String,
    audiences: Vec<String>,
    /// The keys in use; replaced whole when the JWKS is fetched again.
    keys: RwLock<Arc<Vec<Key>>>,
    /// Where the keys come from when they are fetched, not configured.
    source: Option<JwksSource>,
}

/// A JWKS URL and when it was last fetched for an unknown `kid`.
#[derive(Debug)]
struct JwksSource {
    url: String,
    client: HttpClient,
    /// Held while fetching, so concurrent unknown `kid`s cause one fetch.
    last_refresh: tokio::sync::Mutex<Option<Instant>>,
}

/// The signing keys of a JWKS document, or why there are none.
fn parse_keys(jwks: &str) -> Result<Vec<Key>, String> {
    let document: Jwks = serde_json::from_str(jwks).map_err(|e| format!("not a JWKS document ({e})"))?;
    let mut keys = Vec::new();
    for (i, jwk) in document.keys.into_iter().enumerate() {
        if let Some(key) = jwk.into_key(i)? {
            keys.push(key);
        }
    }
    if keys.is_empty() {
        return Err("no RS256 (RSA, 2048 bits or more) or ES256 (P-256) signing key".into());
    }
    Ok(keys)
}

/// Fetch and parse the JWKS document at `url`.
async fn fetch_keys(client: &HttpClient, url: &str) -> Result<Vec<Key>, String> {
    let reply = client.get(url, JWKS_FETCH_TIMEOUT, MAX_JWKS_BYTES).await.map_err(|e| e.to_string())?;
    if reply.status != 200 {
        return Err(format!("GET {url} answered {}", reply.status));
    }
    let text = std::str::from_utf8(&reply.body).map_err(|_| format!("GET {url}: the document is not UTF-8"))?;
    parse_keys(text).map_err(|e| format!("GET {url}: {e}"))
}

#[derive(Deserialize)]
struct Jwks {
    keys: Vec<Jwk>,
}

#[derive(Deserialize)]
struct Jwk {
    kty: String,
    #[serde(default)]
    kid: Option<String>,
    #[serde(default)]
    alg: Option<String>,
    #[serde(default, rename = "use")]
    usage: Option<String>,
    #[serde(default)]
    n: Option<String>,
    #[serde(default)]
    e: Option<String>,
    #[serde(default)]
    crv: Option<String>,
    #[serde(default)]
    x: Option<String>,
    #[serde(default)]
    y: Option<String>,
}

fn b64(text: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')).ok()
}

impl Jwk {
    /// The key, or why it cannot be used for signatures.
    fn into_key(self, index: usize) -> Result<Option<Key>, String> {
        if self.usage.as_deref().is_some_and(|u| u != "sig") {
            return Ok(None);
        }
        let field = |name: &str, value: Option<String>| {
            value
                .as_deref()
                .and_then(b64)
                .filter(|v| !v.is_empty())
                .ok_or(format!("keys[{index}].{name}: must be base64url"))
        };
        let (algorithm, key) = match self.kty.as_str() {
            "RSA" => {
                if self.alg.as_deref().is_some_and(|a| a != "RS256") {
                    return Ok(None);
                }
                let n = field("n", self.n)?;
                if n.len() < 256 {
                    return Err(format!("keys[{index}].n: RSA keys must be at least 2048 bits"));
                }
                (Algorithm::RS256, DecodingKey::from_rsa_raw_components(&n, &field("e", self.e)?))
            }
            "EC" => {
                if self.crv.as_deref() != Some("P-256") || self.alg.as_deref().is_some_and(|a| a != "ES256") {
                    return Ok(None);
                }
                let (x, y) = (field("x", self.x)?, field("y", self.y)?);
                if x.len() != 32 || y.len() != 32 {
                    return Err(format!("keys[{index}]: P-256 x and y must be 32 bytes each"));
                }
                let mut point = vec![4u8];
                point.extend(x);
                point.extend(y);
                // The uncompressed point is the key `DecodingKey::from_ec_components` builds.
                (Algorithm::ES256, DecodingKey::from_ec_der(&point))
            }
            _ => return Ok(None),
        };
        Ok(Some(Key { kid: self.kid, algorithm, key }))
    }
}

/// The issuer and the audiences, trimmed; each must be there.
fn check_settings(issuer: &str, audiences: &[String]) -> Result<(String, Vec<String>), JwtConfigError> {
    if issuer.trim().is_empty() {
        return Err(JwtConfigError::Missing(ENV_JWT_ISSUER));
    }
    let audiences: Vec<String> = audiences.iter().map(|a| a.trim().to_string()).filter(|a| !a.is_empty()).collect();
    if audiences.is_empty() {
        return Err(JwtConfigError::Missing(ENV_JWT_AUDIENCE));
    }
    Ok((issuer.trim().to_string(), audiences))
}

fn claim_strings(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::String(s)) => s
            .trim_matches(|c| c == '[' || c == ']')
            .split(|c: char| c == ',' || c.is_whitespace())
            .map(|r| r.trim_matches('"').trim())
            .filter(|r| !r.is_empty())
            .map(str::to_string)
            .collect(),
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        _ => Vec::new(),
    }
}

impl JwtVerifier {
    /// A verifier for tokens of `issuer` meant for one of `audiences`, signed by a key of the
    /// JWKS document `jwks`. Keys of other types or uses are ignored; none left is an error.
    pub fn new(issuer: &str, audiences: &[String], jwks: &str) -> Result<JwtVerifier, JwtConfigError> {
        let (issuer, audiences) = check_settings(issuer, audiences)?;
        let keys = parse_keys(jwks).map_err(JwtConfigError::Jwks)?;
        Ok(JwtVerifier { issuer, audiences, keys: RwLock::new(Arc::new(keys)), source: None })
    }

    /// A verifier whose keys are fetched from the JWKS document at `url` now, and again when a
    /// token names a `kid` they do not hold (at most once per [`JWKS_REFRESH_MIN_INTERVAL`]).
    pub async fn from_jwks_url(
        issuer: &str,
        audiences: &[String],
        url: &str,
        client: HttpClient,
    ) -> Result<JwtVerifier, JwtConfigError> {
        let (issuer, audiences) = check_settings(issuer, audiences)?;
        let url = url.trim();
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            return Err(JwtConfigError::JwksUrl(format!("`{url}` must be an http:// or https:// URL")));
        }
        let keys = fetch_keys(&client, url).await.map_err(JwtConfigError::JwksUrl)?;
        let source = JwksSource { url: url.to_string(), client, last_refresh: tokio::sync::Mutex::new(None) };
        Ok(JwtVerifier { issuer, audiences, keys: RwLock::new(Arc::new(keys)), source: Some(source) })
    }

    /// The keys in use now.
    fn current_keys(&self) -> Arc<Vec<Key>> {
        self.keys.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// Fetch the JWKS again for a `kid` the cached keys do not hold, unless it was fetched for
    /// that reason less than [`JWKS_REFRESH_MIN_INTERVAL`] ago. Whether the keys were replaced.
    async fn refresh_for_unknown_kid(&self) -> bool {
        let Some(source) = &self.source else {
            return false;
        };
        let mut last = source.last_refresh.lock().await;
        if last.is_some_and(|at| at.elapsed() < JWKS_REFRESH_MIN_INTERVAL) {
            return false;
        }
        *last = Some(Instant::now());
        match fetch_keys(&source.client, &source.url).await {
            Ok(keys) => {
                tracing::info!(keys = keys.len(), "JWKS fetched again for an unknown kid");
                *self.keys.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(keys);
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "fetching the JWKS again failed; the cached keys stay");
                false
            }
        }
    }

    /// The verifier configured by [`ENV_JWT_ISSUER`], [`ENV_JWT_AUDIENCE`] and [`ENV_JWT_JWKS`].
    pub fn from_env() -> Result<JwtVerifier, JwtConfigError> {
        let var = |name: &'static str| {
            std::env::var(name).ok().filter(|v| !v.trim().is_empty()).ok_or(JwtConfigError::Missing(name))
        };
        let audiences: Vec<String> = var(ENV_JWT_AUDIENCE)?.split(',').map(str::to_string).collect();
        JwtVerifier::new(&var(ENV_JWT_ISSUER)?, &audiences, &var(ENV_JWT_JWKS)?)
    }

    /// Verify the token of an `Authorization` header value (`Bearer <JWT>`) at `now` (epoch
    /// seconds).
    pub fn verify_authorization(&self, header: Option<&str>, now: i64) -> Result<VerifiedToken, JwtError> {
        let header = header.map(str::trim).filter(|h| !h.is_empty()).ok_or(JwtError::Missing)?;
        let token = match header.split_once(' ') {
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => token.trim(),
            _ => return Err(JwtError::Missing),
        };
        self.verify(token, now)
    }

    /// [`JwtVerifier::verify_authorization`], and for a token whose `kid` the cached keys do
    /// not hold, once more after fetching the JWKS again (a verifier built from a URL; at most
    /// once per [`JWKS_REFRESH_MIN_INTERVAL`]). What every door that verifies tokens calls.
    pub async fn verify_authorization_fresh(&self, header: Option<&str>, now: i64) -> Result<VerifiedToken, JwtError> {
        match self.verify_authorization(header, now) {
            Err(JwtError::UnknownKey) if self.refresh_for_unknown_kid().await => self.verify_authorization(header, now),
            other => other,
        }
    }

    /// Verify `token` at `now` (epoch seconds) with the cached keys.
    ///
    /// `jsonwebtoken` reads the header (refusing unknown `crit` extensions), checks the
    /// algorithm, verifies the signature and the issuer. The times are checked here against
    /// `now`, not the system clock, and so are the audiences, because Cognito's access tokens
    /// carry theirs in `client_id`.
    pub fn verify(&self, token: &str, now: i64) -> Result<VerifiedToken, JwtError> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(JwtError::TooLong);
        }
        if token.split('.').count() != 3 {
            return Err(JwtError::Malformed("must be three base64url parts joined by dots"));
        }
        let header = jsonwebtoken::decode_header(token).map_err(|e| match e.kind() {
            // JSON of the wrong shape: in practice an `alg` outside the registry (`none`).
            ErrorKind::Json(e) if e.classify() == serde_json::error::Category::Data => JwtError::UnsupportedAlgorithm,
            _ => JwtError::Malformed("the header is not base64url JSON"),
        })?;
        let algorithm = match header.alg {
            Algorithm::RS256 | Algorithm::ES256 => header.alg,
            _ => return Err(JwtError::UnsupportedAlgorithm),
        };
        let kid = header.kid.as_deref();
        let keys = self.current_keys();
        let candidates: Vec<&Key> = keys
            .iter()
            .filter(|k| k.algorithm == algorithm)
            .filter(|k| match (kid, &k.kid) {
                (Some(wanted), Some(have)) => wanted == have,
                (None, _) | (Some(_), None) => keys.len() == 1,
            })
            .collect();
        if candidates.is_empty() {
            return Err(JwtError::UnknownKey);
        }
        let mut validation = Validation::new(algorithm);
        validation.required_spec_claims = ["iss".to_string()].into();
        validation.set_issuer(&[&self.issuer]);
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        let mut refused = JwtError::BadSignature;
        let claims = candidates
            .iter()
            .find_map(|k| match jsonwebtoken::decode::<Value>(token, &k.key, &validation) {
                Ok(data) => Some(data.claims),
                Err(e) => {
                    refused = match e.kind() {
                        ErrorKind::InvalidIssuer | ErrorKind::MissingRequiredClaim(_) => JwtError::WrongIssuer,
                        ErrorKind::Json(_) | ErrorKind::Utf8(_) | ErrorKind::InvalidClaimFormat(_) => {
                            JwtError::Malformed("the payload is not a base64url JSON object")
                        }
                        ErrorKind::Base64(_) => JwtError::Malformed("the signature is not base64url"),
                        _ => JwtError::BadSignature,
                    };
                    None
                }
            })
            .ok_or(refused)?;
        if !claims.is_object() {
            return Err(JwtError::Malformed("the payload is not a base64url JSON object"));
        }
        let mut audiences = claim_strings(claims.get("aud"));
        audiences.extend(claims.get("client_id").and_then(Value::as_str).map(str::to_string));
        if !audiences.iter().any(|a| self.audiences.contains(a)) {
            return Err(JwtError::WrongAudience);
        }
        match claims.get("exp").and_then(Value::as_f64) {
            Some(exp) if (exp as i64) + CLOCK_LEEWAY_S > now => {}
            _ => return Err(JwtError::Expired),
        }
        if let Some(nbf) = claims.get("nbf").and_then(Value::as_f64) {
            if nbf as i64 > now + CLOCK_LEEWAY_S {
                return Err(JwtError::NotYetValid);
            }
        }
        let subject = claims
            .get("sub")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty() && s.len() <= 128)
            .ok_or(JwtError::NoSubject)?
            .to_string();
        let roles = match claims.get("roles") {
            Some(roles) => claim_strings(Some(roles)),
            None => claim_strings(claims.get("cognito:groups")),
        };
        Ok(VerifiedToken { subject, roles })
    }
}
