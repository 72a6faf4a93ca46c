//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), the server side,
//! as Kafka's `ScramSaslServer` runs it: no channel binding (`n,,`), an
//! authorization id must equal the user name, and at least 4096 iterations.
//!
//! A credential holds only the salt, the iteration count, `StoredKey` and
//! `ServerKey`; the password (or salted password) is never kept. HMAC,
//! PBKDF2 and the hashes come from aws-lc-rs, which the TLS stack already
//! uses.

use {
    super::{Failure, Step},
    crate::security::principal::KafkaPrincipal,
    aws_lc_rs::{digest, hmac, pbkdf2},
    base64::{Engine, engine::general_purpose::STANDARD as B64},
    serde::{Deserialize, Serialize},
    std::num::NonZeroU32,
};

/// The fewest iterations Kafka accepts for a SCRAM credential.
pub const MIN_ITERATIONS: u32 = 4096;
/// The most iterations AlterUserScramCredentials accepts (Kafka's limit).
pub const MAX_ITERATIONS: u32 = 16384;

/// A SCRAM mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ScramMechanism {
    /// SCRAM-SHA-256.
    #[serde(rename = "SCRAM-SHA-256")]
    Sha256,
    /// SCRAM-SHA-512.
    #[serde(rename = "SCRAM-SHA-512")]
    Sha512,
    /// SCRAM-SHA-1, only for RFC 5802's test vector.
    #[cfg(test)]
    #[serde(skip)]
    Sha1,
}

impl ScramMechanism {
    /// The SASL mechanism name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Sha256 => "SCRAM-SHA-256",
            Self::Sha512 => "SCRAM-SHA-512",
            #[cfg(test)]
            Self::Sha1 => "SCRAM-SHA-1",
        }
    }

    /// The mechanism of a SASL name.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "SCRAM-SHA-256" => Some(Self::Sha256),
            "SCRAM-SHA-512" => Some(Self::Sha512),
            _ => None,
        }
    }

    /// Kafka's `ScramMechanism` code in the user-credential APIs.
    #[must_use]
    pub fn code(self) -> i8 {
        match self {
            Self::Sha256 => 1,
            Self::Sha512 => 2,
            #[cfg(test)]
            Self::Sha1 => 0,
        }
    }

    /// The mechanism of a credential-API code.
    #[must_use]
    pub fn from_code(code: i8) -> Option<Self> {
        match code {
            1 => Some(Self::Sha256),
            2 => Some(Self::Sha512),
            _ => None,
        }
    }

    fn hmac(self) -> hmac::Algorithm {
        match self {
            Self::Sha256 => hmac::HMAC_SHA256,
            Self::Sha512 => hmac::HMAC_SHA512,
            #[cfg(test)]
            Self::Sha1 => hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
        }
    }

    fn digest(self) -> &'static digest::Algorithm {
        match self {
            Self::Sha256 => &digest::SHA256,
            Self::Sha512 => &digest::SHA512,
            #[cfg(test)]
            Self::Sha1 => &digest::SHA1_FOR_LEGACY_USE_ONLY,
        }
    }

    fn pbkdf2(self) -> pbkdf2::Algorithm {
        match self {
            Self::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            Self::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
            #[cfg(test)]
            Self::Sha1 => pbkdf2::PBKDF2_HMAC_SHA1,
        }
    }

    fn output_len(self) -> usize {
        self.digest().output_len()
    }

    fn mac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        hmac::sign(&hmac::Key::new(self.hmac(), key), data)
            .as_ref()
            .to_vec()
    }

    /// `Hi(password, salt, i)`: the salted password.
    #[must_use]
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: NonZeroU32) -> Vec<u8> {
        let mut out = vec![0; self.output_len()];
        pbkdf2::derive(self.pbkdf2(), iterations, salt, password, &mut out);
        out
    }
}

/// What the broker keeps of a user's SCRAM password.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredential {
    /// The salt.
    #[serde(with = "b64")]
    pub salt: Vec<u8>,
    /// `H(ClientKey)`.
    #[serde(with = "b64")]
    pub stored_key: Vec<u8>,
    /// `HMAC(SaltedPassword, "Server Key")`.
    #[serde(with = "b64")]
    pub server_key: Vec<u8>,
    /// The PBKDF2 iteration count.
    pub iterations: u32,
}

impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramCredential")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

mod b64 {
    use {
        base64::{Engine, engine::general_purpose::STANDARD},
        serde::{Deserialize, Deserializer, Serializer},
    };

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

impl ScramCredential {
    /// The credential of a salted password (what AlterUserScramCredentials
    /// carries: clients salt the password themselves).
    #[must_use]
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salted_password: &[u8],
        salt: Vec<u8>,
        iterations: u32,
    ) -> Self {
        let client_key = mechanism.mac(salted_password, b"Client Key");
        Self {
            salt,
            stored_key: digest::digest(mechanism.digest(), &client_key)
                .as_ref()
                .to_vec(),
            server_key: mechanism.mac(salted_password, b"Server Key"),
            iterations,
        }
    }

    /// The credential of a password, with a fresh random salt.
    #[must_use]
    pub fn from_password(
        mechanism: ScramMechanism,
        password: &str,
        iterations: NonZeroU32,
    ) -> Self {
        let mut salt = vec![0; 16];
        if aws_lc_rs::rand::fill(&mut salt).is_err() {
            // The system RNG does not fail on Linux; a fixed salt would
            // still be a valid (if weaker) credential.
            tracing::error!("the system random generator failed; salting with zeros");
        }
        let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations);
        Self::from_salted_password(mechanism, &salted, salt, iterations.get())
    }
}

/// The exchange's state.
#[derive(Debug)]
enum State {
    ClientFirst,
    ClientFinal {
        user: String,
        credential: ScramCredential,
        gs2_header: String,
        client_first_bare: String,
        server_first: String,
        nonce: String,
    },
    Done,
}

/// One SCRAM exchange, server side.
#[derive(Debug)]
pub struct ScramServer {
    mechanism: ScramMechanism,
    state: State,
    server_nonce: Option<String>,
}

/// The failure Kafka reports for a SaslException: no detail to the client.
fn invalid(reason: impl Into<String>) -> Step {
    Step::Failed(Failure::generic(reason))
}

impl ScramServer {
    /// A new exchange of `mechanism`.
    #[must_use]
    pub fn new(mechanism: ScramMechanism) -> Self {
        Self {
            mechanism,
            state: State::ClientFirst,
            server_nonce: None,
        }
    }

    #[cfg(test)]
    fn with_nonce(mechanism: ScramMechanism, nonce: &str) -> Self {
        Self {
            server_nonce: Some(nonce.to_owned()),
            ..Self::new(mechanism)
        }
    }

    /// Handles one client message; `lookup` finds a user's credential.
    pub fn step(
        &mut self,
        message: &[u8],
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Step {
        let Ok(text) = std::str::from_utf8(message) else {
            self.state = State::Done;
            return invalid("SCRAM message is not UTF-8");
        };
        match std::mem::replace(&mut self.state, State::Done) {
            State::ClientFirst => self.client_first(text, lookup),
            State::ClientFinal {
                user,
                credential,
                gs2_header,
                client_first_bare,
                server_first,
                nonce,
            } => self.client_final(
                text,
                &user,
                &credential,
                &gs2_header,
                &client_first_bare,
                &server_first,
                &nonce,
            ),
            State::Done => invalid("unexpected SCRAM message after the exchange ended"),
        }
    }

    fn client_first(
        &mut self,
        text: &str,
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Step {
        // gs2-header = "n," [ "a=" saslname ] ","
        let Some(rest) = text.strip_prefix("n,") else {
            return invalid(format!(
                "Invalid SCRAM client first message: channel binding is not supported ({})",
                text.chars().take(2).collect::<String>()
            ));
        };
        let Some((authzid, bare)) = rest.split_once(',') else {
            return invalid("Invalid SCRAM client first message");
        };
        let authzid = match authzid.strip_prefix("a=") {
            Some(a) => match sasl_name(a) {
                Some(a) => a,
                None => return invalid("Invalid SCRAM authorization id"),
            },
            None if authzid.is_empty() => String::new(),
            None => return invalid("Invalid SCRAM client first message"),
        };
        let mut fields = bare.split(',');
        let (Some(n), Some(r)) = (fields.next(), fields.next()) else {
            return invalid("Invalid SCRAM client first message");
        };
        let (Some(user), Some(client_nonce)) = (
            n.strip_prefix("n=").and_then(sasl_name),
            r.strip_prefix("r="),
        ) else {
            return invalid("Invalid SCRAM client first message");
        };
        if client_nonce.is_empty()
            || !client_nonce
                .bytes()
                .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
        {
            return invalid("Invalid SCRAM client nonce");
        }
        // Extensions (Kafka's `tokenauth`): delegation tokens are not supported.
        for extension in fields {
            if extension.starts_with("tokenauth=") && extension != "tokenauth=false" {
                return invalid("SCRAM delegation token authentication is not supported");
            }
        }
        let Some(credential) = lookup(&user) else {
            return invalid(format!(
                "no {} credential for user {user:?}",
                self.mechanism.name()
            ));
        };
        if !authzid.is_empty() && authzid != user {
            return Step::Failed(Failure::told(
                "Authentication failed: Client requested an authorization id that is different from username",
            ));
        }
        if credential.iterations < MIN_ITERATIONS {
            return invalid(format!(
                "Iterations {} is less than the minimum {MIN_ITERATIONS} for {}",
                credential.iterations,
                self.mechanism.name()
            ));
        }
        let server_nonce = self.server_nonce.take().unwrap_or_else(random_nonce);
        let nonce = format!("{client_nonce}{server_nonce}");
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&credential.salt),
            credential.iterations
        );
        let gs2_header = format!("n,{},", rest.split_once(',').map_or("", |(a, _)| a));
        self.state = State::ClientFinal {
            user,
            credential,
            gs2_header,
            client_first_bare: bare.to_owned(),
            server_first: server_first.clone(),
            nonce,
        };
        Step::Continue(server_first.into_bytes())
    }

    #[allow(clippy::too_many_arguments)]
    fn client_final(
        &mut self,
        text: &str,
        user: &str,
        credential: &ScramCredential,
        gs2_header: &str,
        client_first_bare: &str,
        server_first: &str,
        nonce: &str,
    ) -> Step {
        let Some((without_proof, proof)) = text.rsplit_once(",p=") else {
            return invalid("Invalid SCRAM client final message: no proof");
        };
        let mut fields = without_proof.split(',');
        let (Some(c), Some(r)) = (fields.next(), fields.next()) else {
            return invalid("Invalid SCRAM client final message");
        };
        if c.strip_prefix("c=")
            .and_then(|c| B64.decode(c).ok())
            .as_deref()
            != Some(gs2_header.as_bytes())
        {
            return invalid("Invalid SCRAM channel binding");
        }
        // librdkafka before 2.6.1 sends the client nonce a second time in
        // front of the server's (librdkafka#4895; Kafka 3.8.1-3.9 accept it
        // with `endsWith`). Exactly that form is accepted too, so clients
        // such as Debian's kcat authenticate; the server's fresh nonce is in
        // both, so replays stay impossible.
        let client_nonce = client_first_bare
            .split(',')
            .find_map(|f| f.strip_prefix("r="))
            .unwrap_or_default();
        let echoed = r.strip_prefix("r=");
        let librdkafka_form = echoed
            .and_then(|e| e.strip_prefix(client_nonce))
            .is_some_and(|rest| rest == nonce);
        if echoed != Some(nonce) && !librdkafka_form {
            return invalid("Invalid client nonce in the final client message.");
        }
        let Ok(proof) = B64.decode(proof) else {
            return invalid("Invalid SCRAM client proof");
        };
        let m = self.mechanism;
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let client_signature = m.mac(&credential.stored_key, auth_message.as_bytes());
        if proof.len() != client_signature.len() {
            return invalid("Invalid client credentials");
        }
        let client_key: Vec<u8> = proof
            .iter()
            .zip(&client_signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let stored_key = digest::digest(m.digest(), &client_key);
        if aws_lc_rs::constant_time::verify_slices_are_equal(
            stored_key.as_ref(),
            &credential.stored_key,
        )
        .is_err()
        {
            return invalid(format!("Invalid client credentials of user {user:?}"));
        }
        let server_signature = m.mac(&credential.server_key, auth_message.as_bytes());
        Step::Done {
            response: format!("v={}", B64.encode(server_signature)).into_bytes(),
            principal: KafkaPrincipal::user(user),
            expires_at_ms: None,
        }
    }
}

/// A `saslname` with `=2C` and `=3D` decoded; `None` for any other `=`.
fn sasl_name(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i..i + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return None,
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    (!out.is_empty()).then_some(out)
}

fn random_nonce() -> String {
    let mut bytes = [0u8; 24];
    if aws_lc_rs::rand::fill(&mut bytes).is_err() {
        tracing::error!("the system random generator failed");
    }
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
pub(crate) mod tests {
    use {super::*, assert2::check};

    fn run(
        mechanism: ScramMechanism,
        password: &str,
        salt_b64: &str,
        messages: [&str; 4],
        server_nonce: &str,
    ) {
        let salt = B64.decode(salt_b64).unwrap();
        let salted =
            mechanism.salted_password(password.as_bytes(), &salt, NonZeroU32::new(4096).unwrap());
        let credential = ScramCredential::from_salted_password(mechanism, &salted, salt, 4096);
        let mut server = ScramServer::with_nonce(mechanism, server_nonce);
        let Step::Continue(first) = server.step(messages[0].as_bytes(), |u| {
            (u == "user").then(|| credential.clone())
        }) else {
            panic!("client-first refused");
        };
        check!(String::from_utf8(first).unwrap() == messages[1]);
        let Step::Done {
            response,
            principal,
            ..
        } = server.step(messages[2].as_bytes(), |_| None)
        else {
            panic!("client-final refused");
        };
        check!(String::from_utf8(response).unwrap() == messages[3]);
        check!(principal == KafkaPrincipal::user("user"));
    }

    /// RFC 5802 section 5 (SCRAM-SHA-1).
    #[test]
    fn rfc_5802_example() {
        run(
            ScramMechanism::Sha1,
            "pencil",
            "QSXCR+Q6sek8bf92",
            [
                "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
                "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
                "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
                "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
            ],
            "3rfcNHYJY1ZVvWVs7j",
        );
    }

    /// RFC 7677 section 3 (SCRAM-SHA-256).
    #[test]
    fn rfc_7677_example() {
        run(
            ScramMechanism::Sha256,
            "pencil",
            "W22ZaJ0SNY7soEsUEjb6gQ==",
            [
                "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
                "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
                "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
            ],
            "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        );
    }

    /// A client side for tests: the final message for `password`.
    pub(crate) fn client_final(
        mechanism: ScramMechanism,
        password: &str,
        client_first_bare: &str,
        server_first: &str,
    ) -> String {
        client_final_echoing(mechanism, password, client_first_bare, server_first, "")
    }

    /// The final message with `prefix` before the nonce it echoes.
    pub(crate) fn client_final_echoing(
        mechanism: ScramMechanism,
        password: &str,
        client_first_bare: &str,
        server_first: &str,
        prefix: &str,
    ) -> String {
        let mut salt = None;
        let mut iterations = 0;
        let mut nonce = "";
        for field in server_first.split(',') {
            if let Some(s) = field.strip_prefix("s=") {
                salt = Some(B64.decode(s).unwrap());
            } else if let Some(i) = field.strip_prefix("i=") {
                iterations = i.parse().unwrap();
            } else if let Some(r) = field.strip_prefix("r=") {
                nonce = r;
            }
        }
        let salted = mechanism.salted_password(
            password.as_bytes(),
            &salt.unwrap(),
            NonZeroU32::new(iterations).unwrap(),
        );
        let client_key = mechanism.mac(&salted, b"Client Key");
        let stored_key = digest::digest(mechanism.digest(), &client_key);
        let without_proof = format!("c=biws,r={prefix}{nonce}");
        let auth = format!("{client_first_bare},{server_first},{without_proof}");
        let signature = mechanism.mac(stored_key.as_ref(), auth.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        format!("{without_proof},p={}", B64.encode(proof))
    }

    #[test]
    fn sha512_round_trip_and_wrong_password() {
        let credential = ScramCredential::from_password(
            ScramMechanism::Sha512,
            "secret",
            NonZeroU32::new(4096).unwrap(),
        );
        for (password, ok) in [("secret", true), ("guess", false)] {
            let mut server = ScramServer::new(ScramMechanism::Sha512);
            let Step::Continue(first) =
                server.step(b"n,,n=alice,r=abc", |_| Some(credential.clone()))
            else {
                panic!("refused");
            };
            let first = String::from_utf8(first).unwrap();
            let last = client_final(ScramMechanism::Sha512, password, "n=alice,r=abc", &first);
            let step = server.step(last.as_bytes(), |_| None);
            check!(matches!(step, Step::Done { .. }) == ok, "{password}");
        }
    }

    #[test]
    fn malformed_and_unknown_are_refused() {
        let credential = ScramCredential::from_password(
            ScramMechanism::Sha256,
            "pw",
            NonZeroU32::new(4096).unwrap(),
        );
        for message in [
            &b"y,,n=alice,r=abc"[..],
            b"p=tls-unique,,n=alice,r=abc",
            b"n,,n=alice",
            b"n,,r=abc,n=alice",
            b"n,,n=al=ice,r=abc",
            b"\xff\xfe",
            b"n,,n=alice,r=abc,tokenauth=true",
        ] {
            let mut server = ScramServer::new(ScramMechanism::Sha256);
            let step = server.step(message, |_| Some(credential.clone()));
            check!(matches!(step, Step::Failed(_)), "{message:?}");
        }
        let mut server = ScramServer::new(ScramMechanism::Sha256);
        check!(matches!(
            server.step(b"n,,n=bob,r=abc", |_| None),
            Step::Failed(_)
        ));
        let mut server = ScramServer::new(ScramMechanism::Sha256);
        let Step::Failed(f) = server.step(b"n,a=bob,n=alice,r=abc", |_| Some(credential.clone()))
        else {
            panic!("accepted another authorization id");
        };
        check!(f.client_message.unwrap().contains("authorization id"));
        let weak = ScramCredential {
            iterations: 1,
            ..credential
        };
        let mut server = ScramServer::new(ScramMechanism::Sha256);
        check!(matches!(
            server.step(b"n,,n=alice,r=abc", |_| Some(weak)),
            Step::Failed(_)
        ));
    }

    /// librdkafka before 2.6.1 repeats the client nonce (librdkafka#4895).
    #[test]
    fn the_librdkafka_nonce_form_is_accepted_and_others_are_not() {
        let credential = ScramCredential::from_password(
            ScramMechanism::Sha256,
            "pw",
            NonZeroU32::new(4096).unwrap(),
        );
        for (prefix, ok) in [("", true), ("abc", true), ("xyz", false), ("abcabc", false)] {
            let mut server = ScramServer::new(ScramMechanism::Sha256);
            let Step::Continue(first) =
                server.step(b"n,,n=alice,r=abc", |_| Some(credential.clone()))
            else {
                panic!("refused");
            };
            let first = String::from_utf8(first).unwrap();
            let last = client_final_echoing(
                ScramMechanism::Sha256,
                "pw",
                "n=alice,r=abc",
                &first,
                prefix,
            );
            let step = server.step(last.as_bytes(), |_| None);
            check!(matches!(step, Step::Done { .. }) == ok, "{prefix:?}");
        }
    }

    #[test]
    fn sasl_names_decode() {
        check!(sasl_name("a=2Cb=3D").as_deref() == Some("a,b="));
        check!(sasl_name("a=").is_none());
        check!(sasl_name("").is_none());
    }
}
