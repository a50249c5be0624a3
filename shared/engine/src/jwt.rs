//! Verifying a caller's JWT inside a function, for the routes no API Gateway authorizer
//! guards (the `events-stream` function behind a Lambda Function URL).
//!
//! The checks are those of the HTTP API's JWT authorizer, so a token works the same on both
//! doors (docs/operations.md#streaming-on-aws):
//! - the token is three base64url parts, at most [`MAX_TOKEN_LEN`] bytes;
//! - the header's `alg` is `RS256` or `ES256` (never `none`, never a shared-secret `HS*`), and
//!   its `kid` names a key of the configured JWKS (a JWKS of one key may omit `kid`s);
//! - the signature verifies with that key (aws-lc-rs, the TLS stack's own crypto);
//! - `iss` equals the configured issuer; `aud` (or Cognito access tokens' `client_id`) is one
//!   of the configured audiences;
//! - `exp` is in the future and `nbf` (when present) in the past, both with
//!   [`CLOCK_LEEWAY_S`] of leeway; `sub` is present and not empty.
//!
//! The keys come from configuration (`SWITCHYARD_JWT_JWKS`, the issuer's JWKS document), not
//! from the network: the function's init stays a parse of a few hundred bytes.

use base64::Engine as _;
use serde::Deserialize;
use serde_json::Value;

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

/// Why the verifier could not be built from its configuration (an init failure).
#[derive(Debug, thiserror::Error)]
pub enum JwtConfigError {
    /// A setting is missing or empty.
    #[error("{0} is not set: the events-stream function verifies callers' JWTs itself and needs the issuer, the audiences and the issuer's JWKS")]
    Missing(&'static str),
    /// The JWKS document does not parse or holds no usable key.
    #[error("{ENV_JWT_JWKS}: {0}")]
    Jwks(String),
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Algorithm {
    Rs256,
    Es256,
}

#[derive(Debug)]
enum PublicKey {
    /// Modulus and exponent, big-endian.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// The uncompressed P-256 point `04 || x || y`.
    P256 { point: Vec<u8> },
}

#[derive(Debug)]
struct Key {
    kid: Option<String>,
    algorithm: Algorithm,
    key: PublicKey,
}

/// Verifies tokens against one issuer's keys.
#[derive(Debug)]
pub struct JwtVerifier {
    issuer: String,
    audiences: Vec<String>,
    keys: Vec<Key>,
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
                (Algorithm::Rs256, PublicKey::Rsa { n, e: field("e", self.e)? })
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
                (Algorithm::Es256, PublicKey::P256 { point })
            }
            _ => return Ok(None),
        };
        Ok(Some(Key { kid: self.kid, algorithm, key }))
    }
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
        if issuer.trim().is_empty() {
            return Err(JwtConfigError::Missing(ENV_JWT_ISSUER));
        }
        let audiences: Vec<String> = audiences.iter().map(|a| a.trim().to_string()).filter(|a| !a.is_empty()).collect();
        if audiences.is_empty() {
            return Err(JwtConfigError::Missing(ENV_JWT_AUDIENCE));
        }
        let document: Jwks =
            serde_json::from_str(jwks).map_err(|e| JwtConfigError::Jwks(format!("not a JWKS document ({e})")))?;
        let mut keys = Vec::new();
        for (i, jwk) in document.keys.into_iter().enumerate() {
            if let Some(key) = jwk.into_key(i).map_err(JwtConfigError::Jwks)? {
                keys.push(key);
            }
        }
        if keys.is_empty() {
            return Err(JwtConfigError::Jwks("no RS256 (RSA, 2048 bits or more) or ES256 (P-256) signing key".into()));
        }
        Ok(JwtVerifier { issuer: issuer.trim().to_string(), audiences, keys })
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

    /// Verify `token` at `now` (epoch seconds).
    pub fn verify(&self, token: &str, now: i64) -> Result<VerifiedToken, JwtError> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(JwtError::TooLong);
        }
        let mut parts = token.split('.');
        let (Some(header_b64), Some(payload_b64), Some(signature_b64), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(JwtError::Malformed("must be three base64url parts joined by dots"));
        };
        let header: Value = b64(header_b64)
            .and_then(|h| serde_json::from_slice(&h).ok())
            .ok_or(JwtError::Malformed("the header is not base64url JSON"))?;
        let algorithm = match header.get("alg").and_then(Value::as_str) {
            Some("RS256") => Algorithm::Rs256,
            Some("ES256") => Algorithm::Es256,
            _ => return Err(JwtError::UnsupportedAlgorithm),
        };
        let kid = header.get("kid").and_then(Value::as_str);
        let candidates: Vec<&Key> = self
            .keys
            .iter()
            .filter(|k| k.algorithm == algorithm)
            .filter(|k| match (kid, &k.kid) {
                (Some(wanted), Some(have)) => wanted == have,
                (None, _) => self.keys.len() == 1,
                (Some(_), None) => self.keys.len() == 1,
            })
            .collect();
        if candidates.is_empty() {
            return Err(JwtError::UnknownKey);
        }
        let signature = b64(signature_b64).ok_or(JwtError::Malformed("the signature is not base64url"))?;
        let signed = &token.as_bytes()[..header_b64.len() + 1 + payload_b64.len()];
        if !candidates.iter().any(|k| verify_signature(&k.key, signed, &signature)) {
            return Err(JwtError::BadSignature);
        }
        let claims: Value = b64(payload_b64)
            .and_then(|p| serde_json::from_slice(&p).ok())
            .filter(Value::is_object)
            .ok_or(JwtError::Malformed("the payload is not a base64url JSON object"))?;
        if claims.get("iss").and_then(Value::as_str) != Some(self.issuer.as_str()) {
            return Err(JwtError::WrongIssuer);
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

fn verify_signature(key: &PublicKey, message: &[u8], signature: &[u8]) -> bool {
    use aws_lc_rs::signature;
    match key {
        PublicKey::Rsa { n, e } => signature::RsaPublicKeyComponents { n: n.as_slice(), e: e.as_slice() }
            .verify(&signature::RSA_PKCS1_2048_8192_SHA256, message, signature)
            .is_ok(),
        PublicKey::P256 { point } => signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point)
            .verify(message, signature)
            .is_ok(),
    }
}
