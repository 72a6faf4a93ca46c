//! SASL/OAUTHBEARER (RFC 7628), server side, with Kafka's two validators:
//!
//! - **unsecured** (Kafka's `OAuthBearerUnsecuredValidatorCallbackHandler`,
//!   for tests): an unsigned JWT (`alg: none`) whose principal claim and
//!   `exp` are checked; only on when configured explicitly;
//! - **JWKS** (Kafka's `OAuthBearerValidatorCallbackHandler`, KIP-768): a
//!   JWT signed with a key of the JSON Web Key Set that
//!   `sasl.oauthbearer.jwks.endpoint.url` names as a `file:` URL (RS256/384/512,
//!   PS256/384/512, ES256/384, EdDSA), with `exp`, the subject claim and the
//!   configured issuer and audience checked.
//!
//! A token that fails validation is answered, as RFC 7628 and Kafka do,
//! with a JSON error challenge (`{"status":"invalid_token"}`); the client
//! acknowledges it with `0x01` and the exchange fails with that text.

use {
    super::{Failure, Step},
    crate::security::principal::KafkaPrincipal,
    base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD},
    serde_json::Value,
    std::{
        path::PathBuf,
        sync::{Mutex, PoisonError, RwLock},
        time::{Duration, Instant},
    },
};

/// The exchange's state: whether an error challenge was sent.
#[derive(Debug, Default)]
pub struct OAuthServer {
    error_sent: Option<String>,
}

impl OAuthServer {
    /// Handles one client message at `now_ms` (Unix ms).
    pub fn step(&mut self, message: &[u8], validator: &Validator, now_ms: i64) -> Step {
        if let Some(error) = self.error_sent.take() {
            return if message == [0x01] {
                Step::Failed(Failure::told(error))
            } else {
                Step::Failed(Failure::generic(
                    "OAUTHBEARER client did not acknowledge the error challenge",
                ))
            };
        }
        let Some((authzid, token)) = client_first(message) else {
            return Step::Failed(Failure::generic("Invalid OAUTHBEARER client first message"));
        };
        match validator.validate(&token, now_ms) {
            Ok((principal, expires_at_ms)) => {
                if !authzid.is_empty() && authzid != principal {
                    return Step::Failed(Failure::told(format!(
                        "Authentication failed: Client requested an authorization id ({authzid}) that is different from the token's principal name ({principal})"
                    )));
                }
                Step::Done {
                    response: Vec::new(),
                    principal: KafkaPrincipal::user(principal),
                    expires_at_ms: Some(expires_at_ms),
                }
            }
            Err(reason) => {
                tracing::info!(%reason, "OAUTHBEARER token refused");
                let error = r#"{"status":"invalid_token"}"#.to_owned();
                self.error_sent = Some(error.clone());
                Step::Continue(error.into_bytes())
            }
        }
    }
}

/// The authorization id and bearer token of a client's first message
/// (`n,[a=authzid],` kvsep `auth=Bearer <token>` kvsep ... kvsep kvsep).
fn client_first(message: &[u8]) -> Option<(String, String)> {
    let text = std::str::from_utf8(message).ok()?;
    let rest = text.strip_prefix("n,")?;
    let (authzid, rest) = rest.split_once(',')?;
    let authzid = match authzid.strip_prefix("a=") {
        Some(a) => a.replace("=2C", ",").replace("=3D", "="),
        None if authzid.is_empty() => String::new(),
        None => return None,
    };
    let pairs = rest.strip_prefix('\u{1}')?.strip_suffix("\u{1}\u{1}")?;
    let mut token = None;
    for pair in pairs.split('\u{1}') {
        let (key, value) = pair.split_once('=')?;
        if key == "auth" {
            let (scheme, value) = value.split_once(' ')?;
            if !scheme.eq_ignore_ascii_case("bearer") {
                return None;
            }
            token = Some(value.trim_start().to_owned());
        } else if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphabetic()) {
            return None;
        }
    }
    let token = token?;
    token
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        .then_some((authzid, token))
}

/// How tokens are validated.
#[derive(Debug)]
pub enum Validator {
    /// Unsigned tokens (Kafka's test mode).
    Unsecured(UnsecuredOptions),
    /// Tokens signed with a key of a JWKS file.
    Jwks(JwksValidator),
}

/// The `unsecuredValidator*` options of Kafka's unsecured validator.
#[derive(Debug, Clone)]
pub struct UnsecuredOptions {
    /// `unsecuredValidatorPrincipalClaimName` (default `sub`).
    pub principal_claim: String,
    /// `unsecuredValidatorScopeClaimName` (default `scope`).
    pub scope_claim: String,
    /// `unsecuredValidatorRequiredScope` (space-separated; default none).
    pub required_scope: Vec<String>,
    /// `unsecuredValidatorAllowableClockSkewMs` (default 0).
    pub clock_skew_ms: i64,
}

impl UnsecuredOptions {
    /// The options from a JAAS login module's options.
    ///
    /// # Errors
    ///
    /// A reason when the clock skew is not a non-negative number.
    pub fn from_jaas(options: &std::collections::BTreeMap<String, String>) -> Result<Self, String> {
        let get = |k: &str| options.get(k).map(String::as_str);
        Ok(Self {
            principal_claim: get("unsecuredValidatorPrincipalClaimName")
                .unwrap_or("sub")
                .to_owned(),
            scope_claim: get("unsecuredValidatorScopeClaimName")
                .unwrap_or("scope")
                .to_owned(),
            required_scope: get("unsecuredValidatorRequiredScope")
                .unwrap_or("")
                .split_whitespace()
                .map(str::to_owned)
                .collect(),
            clock_skew_ms: match get("unsecuredValidatorAllowableClockSkewMs") {
                None => 0,
                Some(v) => v.parse().ok().filter(|v: &i64| *v >= 0).ok_or(
                    "unsecuredValidatorAllowableClockSkewMs must be a non-negative number",
                )?,
            },
        })
    }
}

/// The settings of the JWKS validator (Kafka's `sasl.oauthbearer.*`).
#[derive(Debug, Clone)]
pub struct JwksSettings {
    /// The JWKS file (from a `file:` `sasl.oauthbearer.jwks.endpoint.url`).
    pub path: PathBuf,
    /// `sasl.oauthbearer.sub.claim.name`.
    pub sub_claim: String,
    /// `sasl.oauthbearer.expected.audience`.
    pub expected_audience: Vec<String>,
    /// `sasl.oauthbearer.expected.issuer`.
    pub expected_issuer: Option<String>,
    /// `sasl.oauthbearer.clock.skew.seconds`.
    pub clock_skew_seconds: i64,
    /// `sasl.oauthbearer.jwks.endpoint.refresh.ms`: the file is read again
    /// this often, and sooner when a token names a key it does not hold.
    pub refresh: Duration,
}

/// Tokens signed with a key of a JWKS file.
#[derive(Debug)]
pub struct JwksValidator {
    settings: JwksSettings,
    keys: RwLock<Vec<Jwk>>,
    loaded: Mutex<Instant>,
}

/// The path of a `file:` JWKS URL.
///
/// # Errors
///
/// A reason for any other URL scheme.
pub fn jwks_path(url: &str) -> Result<PathBuf, String> {
    let path = url
        .strip_prefix("file://")
        .or_else(|| url.strip_prefix("file:"))
        .ok_or_else(|| {
            format!("sasl.oauthbearer.jwks.endpoint.url {url:?}: only file: URLs are supported")
        })?;
    Ok(PathBuf::from(path))
}

impl JwksValidator {
    /// Reads the key set.
    ///
    /// # Errors
    ///
    /// A reason when the file cannot be read or holds no usable key.
    pub fn new(settings: JwksSettings) -> Result<Self, String> {
        let keys = read_jwks(&settings.path)?;
        Ok(Self {
            settings,
            keys: RwLock::new(keys),
            loaded: Mutex::new(Instant::now()),
        })
    }

    fn reload(&self, force: bool) {
        let mut loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        // At most once a second, however many unknown keys clients name.
        let due = if force {
            loaded.elapsed() >= Duration::from_secs(1)
        } else {
            loaded.elapsed() >= self.settings.refresh
        };
        if !due {
            return;
        }
        *loaded = Instant::now();
        match read_jwks(&self.settings.path) {
            Ok(keys) => *self.keys.write().unwrap_or_else(PoisonError::into_inner) = keys,
            Err(e) => tracing::warn!(error = %e, "keeping the previous JWKS"),
        }
    }

    fn verify(&self, header: &Value, signed: &[u8], signature: &[u8]) -> Result<(), String> {
        let alg = header["alg"]
            .as_str()
            .ok_or("the token header has no alg")?;
        let kid = header["kid"].as_str();
        self.reload(false);
        for attempt in 0..2 {
            {
                let keys = self.keys.read().unwrap_or_else(PoisonError::into_inner);
                let mut candidates = keys
                    .iter()
                    .filter(|k| kid.is_none_or(|kid| k.kid.as_deref() == Some(kid)))
                    .filter(|k| k.alg.as_deref().is_none_or(|a| a == alg))
                    .peekable();
                if candidates.peek().is_some() {
                    for key in candidates {
                        if key.verify(alg, signed, signature)? {
                            return Ok(());
                        }
                    }
                    return Err("the token's signature does not verify".into());
                }
            }
            if attempt == 0 {
                self.reload(true);
            }
        }
        Err(format!(
            "no key of the JWKS matches kid {kid:?} and alg {alg}"
        ))
    }
}

/// One key of a JSON Web Key Set.
#[derive(Debug, Clone)]
struct Jwk {
    kid: Option<String>,
    alg: Option<String>,
    key: JwkKey,
}

#[derive(Debug, Clone)]
enum JwkKey {
    Rsa { n: Vec<u8>, e: Vec<u8> },
    Ec { curve: String, point: Vec<u8> },
    Ed25519(Vec<u8>),
}

fn read_jwks(path: &std::path::Path) -> Result<Vec<Jwk>, String> {
    let text = std::fs::read(path).map_err(|e| format!("JWKS {}: {e}", path.display()))?;
    let set: Value =
        serde_json::from_slice(&text).map_err(|e| format!("JWKS {}: {e}", path.display()))?;
    let b64 = |v: &Value| {
        v.as_str()
            .and_then(|s| URL_SAFE_NO_PAD.decode(s.trim_end_matches('=')).ok())
    };
    let keys: Vec<Jwk> = set["keys"]
        .as_array()
        .ok_or_else(|| format!("JWKS {}: no \"keys\" array", path.display()))?
        .iter()
        .filter(|k| k["use"].as_str().is_none_or(|u| u == "sig"))
        .filter_map(|k| {
            let key = match k["kty"].as_str()? {
                "RSA" => JwkKey::Rsa {
                    n: b64(&k["n"])?,
                    e: b64(&k["e"])?,
                },
                "EC" => {
                    let (x, y) = (b64(&k["x"])?, b64(&k["y"])?);
                    let mut point = vec![4];
                    point.extend(x);
                    point.extend(y);
                    JwkKey::Ec {
                        curve: k["crv"].as_str()?.to_owned(),
                        point,
                    }
                }
                "OKP" if k["crv"].as_str() == Some("Ed25519") => JwkKey::Ed25519(b64(&k["x"])?),
                _ => return None,
            };
            Some(Jwk {
                kid: k["kid"].as_str().map(str::to_owned),
                alg: k["alg"].as_str().map(str::to_owned),
                key,
            })
        })
        .collect();
    if keys.is_empty() {
        return Err(format!("JWKS {}: no usable signing key", path.display()));
    }
    Ok(keys)
}

impl Jwk {
    fn verify(&self, alg: &str, signed: &[u8], signature: &[u8]) -> Result<bool, String> {
        use aws_lc_rs::signature::{self as sig, RsaPublicKeyComponents, UnparsedPublicKey};
        Ok(match (&self.key, alg) {
            (JwkKey::Rsa { n, e }, _) => {
                let params = match alg {
                    "RS256" => &sig::RSA_PKCS1_2048_8192_SHA256,
                    "RS384" => &sig::RSA_PKCS1_2048_8192_SHA384,
                    "RS512" => &sig::RSA_PKCS1_2048_8192_SHA512,
                    "PS256" => &sig::RSA_PSS_2048_8192_SHA256,
                    "PS384" => &sig::RSA_PSS_2048_8192_SHA384,
                    "PS512" => &sig::RSA_PSS_2048_8192_SHA512,
                    other => return Err(format!("algorithm {other} does not fit an RSA key")),
                };
                RsaPublicKeyComponents { n, e }
                    .verify(params, signed, signature)
                    .is_ok()
            }
            (JwkKey::Ec { curve, point }, _) => {
                let params = match (curve.as_str(), alg) {
                    ("P-256", "ES256") => &sig::ECDSA_P256_SHA256_FIXED,
                    ("P-384", "ES384") => &sig::ECDSA_P384_SHA384_FIXED,
                    ("P-521", "ES512") => &sig::ECDSA_P521_SHA512_FIXED,
                    _ => return Err(format!("algorithm {alg} does not fit an EC {curve} key")),
                };
                UnparsedPublicKey::new(params, point)
                    .verify(signed, signature)
                    .is_ok()
            }
            (JwkKey::Ed25519(x), "EdDSA") => UnparsedPublicKey::new(&sig::ED25519, x)
                .verify(signed, signature)
                .is_ok(),
            (JwkKey::Ed25519(_), other) => {
                return Err(format!("algorithm {other} does not fit an Ed25519 key"));
            }
        })
    }
}

fn decode_part(part: &str) -> Result<Value, String> {
    let bytes = URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| "a token part is not base64url".to_owned())?;
    serde_json::from_slice(&bytes).map_err(|_| "a token part is not JSON".to_owned())
}

/// A numeric date claim in Unix ms.
fn date_ms(claims: &Value, name: &str) -> Result<Option<i64>, String> {
    match &claims[name] {
        Value::Null => Ok(None),
        v => v
            .as_f64()
            .filter(|s| s.is_finite())
            .map(|s| Some((s * 1000.0) as i64))
            .ok_or_else(|| format!("the {name} claim is not a number")),
    }
}

impl Validator {
    /// Validates `token` at `now_ms`: the principal name and the token's
    /// expiry (Unix ms).
    ///
    /// # Errors
    ///
    /// Why the token is refused (logged, never sent).
    pub fn validate(&self, token: &str, now_ms: i64) -> Result<(String, i64), String> {
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("the token is not a JWS in compact form".into());
        };
        let header_json = decode_part(header)?;
        let claims = decode_part(payload)?;
        let (principal_claim, skew_ms) = match self {
            Self::Unsecured(options) => {
                if header_json["alg"].as_str() != Some("none") || !signature.is_empty() {
                    return Err("the unsecured validator accepts only alg none tokens".into());
                }
                if !options.required_scope.is_empty() {
                    let scope: Vec<&str> = match &claims[options.scope_claim.as_str()] {
                        Value::String(s) => s.split_whitespace().collect(),
                        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                        _ => Vec::new(),
                    };
                    if let Some(missing) = options
                        .required_scope
                        .iter()
                        .find(|s| !scope.contains(&s.as_str()))
                    {
                        return Err(format!("the token lacks the required scope {missing}"));
                    }
                }
                (options.principal_claim.as_str(), options.clock_skew_ms)
            }
            Self::Jwks(jwks) => {
                let signature = URL_SAFE_NO_PAD
                    .decode(signature)
                    .map_err(|_| "the signature is not base64url".to_owned())?;
                let signed_len = header.len() + 1 + payload.len();
                jwks.verify(&header_json, &token.as_bytes()[..signed_len], &signature)?;
                let s = &jwks.settings;
                if let Some(issuer) = &s.expected_issuer
                    && claims["iss"].as_str() != Some(issuer)
                {
                    return Err(format!("the token's issuer is not {issuer}"));
                }
                if !s.expected_audience.is_empty() {
                    let audience: Vec<&str> = match &claims["aud"] {
                        Value::String(a) => vec![a.as_str()],
                        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                        _ => Vec::new(),
                    };
                    if !s
                        .expected_audience
                        .iter()
                        .any(|a| audience.contains(&a.as_str()))
                    {
                        return Err("the token's audience is not an expected one".into());
                    }
                }
                (
                    s.sub_claim.as_str(),
                    s.clock_skew_seconds.saturating_mul(1000),
                )
            }
        };
        let expires = date_ms(&claims, "exp")?.ok_or("the token has no exp claim")?;
        if expires.saturating_add(skew_ms) <= now_ms {
            return Err(format!("the token expired at {expires} (now {now_ms})"));
        }
        if let Some(issued) = date_ms(&claims, "iat")?
            && issued.saturating_sub(skew_ms) > now_ms
        {
            return Err("the token is issued in the future".into());
        }
        let principal = claims[principal_claim]
            .as_str()
            .filter(|p| !p.trim().is_empty())
            .ok_or_else(|| format!("the token has no {principal_claim} claim"))?;
        Ok((principal.to_owned(), expires))
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check, serde_json::json};

    fn unsigned(claims: &Value) -> String {
        format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        )
    }

    fn first(token: &str) -> Vec<u8> {
        format!("n,,\u{1}auth=Bearer {token}\u{1}\u{1}").into_bytes()
    }

    fn unsecured() -> Validator {
        Validator::Unsecured(UnsecuredOptions::from_jaas(&Default::default()).unwrap())
    }

    #[test]
    fn unsecured_tokens_are_checked_for_subject_and_expiry() {
        let now = 1_700_000_000_000;
        let good = unsigned(&json!({"sub": "alice", "exp": 1_700_000_100, "iat": 1_700_000_000}));
        let mut server = OAuthServer::default();
        let Step::Done {
            principal,
            expires_at_ms,
            ..
        } = server.step(&first(&good), &unsecured(), now)
        else {
            panic!("refused");
        };
        check!(principal.to_string() == "User:alice");
        check!(expires_at_ms == Some(1_700_000_100_000));
        for bad in [
            unsigned(&json!({"sub": "alice", "exp": 1_600_000_000})),
            unsigned(&json!({"sub": "alice"})),
            unsigned(&json!({"exp": 1_700_000_100})),
            "not-a-token".to_owned(),
        ] {
            let mut server = OAuthServer::default();
            let Step::Continue(challenge) = server.step(&first(&bad), &unsecured(), now) else {
                panic!("no error challenge for {bad}");
            };
            check!(challenge == br#"{"status":"invalid_token"}"#);
            let Step::Failed(failure) = server.step(&[1], &unsecured(), now) else {
                panic!("the acknowledgement did not end the exchange");
            };
            check!(failure.client_message.unwrap().contains("invalid_token"));
        }
        let mut server = OAuthServer::default();
        check!(matches!(
            server.step(b"n,,auth=Bearer x", &unsecured(), now),
            Step::Failed(_)
        ));
        let mut server = OAuthServer::default();
        let other = format!("n,a=bob,\u{1}auth=Bearer {good}\u{1}\u{1}");
        check!(matches!(
            server.step(other.as_bytes(), &unsecured(), now),
            Step::Failed(_)
        ));
    }

    #[test]
    fn signed_tokens_are_verified_against_the_key_set() {
        use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let key =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
        let point = key.public_key().as_ref();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jwks.json");
        let jwks = json!({"keys": [{
            "kty": "EC", "crv": "P-256", "kid": "k1", "use": "sig",
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
        }]});
        std::fs::write(&path, jwks.to_string()).unwrap();
        let validator = Validator::Jwks(
            JwksValidator::new(JwksSettings {
                path: jwks_path(&format!("file://{}", path.display())).unwrap(),
                sub_claim: "sub".into(),
                expected_audience: vec!["krabka".into()],
                expected_issuer: Some("https://issuer".into()),
                clock_skew_seconds: 30,
                refresh: Duration::from_secs(3600),
            })
            .unwrap(),
        );
        let sign = |kid: &str, claims: &Value| {
            let header = URL_SAFE_NO_PAD.encode(json!({"alg": "ES256", "kid": kid}).to_string());
            let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
            let signed = format!("{header}.{payload}");
            let signature = key.sign(&rng, signed.as_bytes()).unwrap();
            format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()))
        };
        let now = 1_700_000_000_000;
        let claims =
            json!({"sub": "svc", "exp": 1_700_000_600, "iss": "https://issuer", "aud": ["krabka"]});
        check!(
            validator.validate(&sign("k1", &claims), now) == Ok(("svc".into(), 1_700_000_600_000))
        );
        check!(validator.validate(&sign("k2", &claims), now).is_err());
        let mut tampered = sign("k1", &claims);
        tampered.insert(tampered.len() - 3, 'A');
        tampered.truncate(tampered.len() - 1);
        check!(validator.validate(&tampered, now).is_err());
        check!(validator.validate(&unsigned(&claims), now).is_err());
        let wrong_aud =
            json!({"sub": "svc", "exp": 1_700_000_600, "iss": "https://issuer", "aud": "other"});
        check!(validator.validate(&sign("k1", &wrong_aud), now).is_err());
        let expired =
            json!({"sub": "svc", "exp": 1_699_999_000, "iss": "https://issuer", "aud": "krabka"});
        check!(validator.validate(&sign("k1", &expired), now).is_err());
        check!(jwks_path("https://idp/jwks").is_err());
    }
}
