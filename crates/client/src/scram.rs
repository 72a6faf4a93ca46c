//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), the client side,
//! as Kafka's `ScramSaslClient` runs it: no channel binding (`n,,`), no
//! authorization id, and a server that must offer at least 4096 iterations.
//!
//! The same primitives salt a password for AlterUserScramCredentials
//! (KIP-554), where the client, not the broker, derives the salted password
//! so the password itself never crosses the wire. HMAC, PBKDF2 and the
//! hashes come from aws-lc-rs, which the TLS stack already uses.

use {
    crate::ClientError,
    aws_lc_rs::{digest, hmac, pbkdf2},
    base64::{Engine, engine::general_purpose::STANDARD as B64},
    std::num::NonZeroU32,
};

/// The fewest iterations Kafka accepts for a SCRAM credential.
pub const MIN_ITERATIONS: u32 = 4096;
/// The most iterations Kafka accepts for a SCRAM credential.
pub const MAX_ITERATIONS: u32 = 16384;

/// A SCRAM mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScramMechanism {
    /// SCRAM-SHA-256.
    Sha256,
    /// SCRAM-SHA-512.
    Sha512,
}

impl ScramMechanism {
    /// The SASL mechanism name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Sha256 => "SCRAM-SHA-256",
            Self::Sha512 => "SCRAM-SHA-512",
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
        }
    }

    fn digest(self) -> &'static digest::Algorithm {
        match self {
            Self::Sha256 => &digest::SHA256,
            Self::Sha512 => &digest::SHA512,
        }
    }

    fn pbkdf2(self) -> pbkdf2::Algorithm {
        match self {
            Self::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            Self::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }

    fn mac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        hmac::sign(&hmac::Key::new(self.hmac(), key), data)
            .as_ref()
            .to_vec()
    }

    /// `Hi(password, salt, i)`: the salted password.
    #[must_use]
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: NonZeroU32) -> Vec<u8> {
        let mut out = vec![0; self.digest().output_len()];
        pbkdf2::derive(self.pbkdf2(), iterations, salt, password, &mut out);
        out
    }
}

/// A fresh random salt or nonce of `len` bytes from the system generator.
///
/// # Errors
///
/// [`ClientError::Protocol`] when the system random generator fails.
pub fn random_bytes(len: usize) -> Result<Vec<u8>, ClientError> {
    let mut out = vec![0; len];
    aws_lc_rs::rand::fill(&mut out)
        .map_err(|_| ClientError::Protocol("the system random generator failed".into()))?;
    Ok(out)
}

/// `saslname` of RFC 5802: `=` and `,` escaped.
fn sasl_name(user: &str) -> String {
    user.replace('=', "=3D").replace(',', "=2C")
}

/// Where a client exchange stands.
#[derive(Debug)]
enum State {
    /// The client-first message is out.
    First {
        client_first_bare: String,
    },
    /// The client-final message is out; the server's signature is expected.
    Final {
        server_signature: Vec<u8>,
    },
    Done,
}

/// One SCRAM exchange, client side: [`ScramClient::first`], then
/// [`ScramClient::respond`] to the server-first message, then
/// [`ScramClient::finish`] with the server-final message.
pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    nonce: String,
    state: State,
}

impl std::fmt::Debug for ScramClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramClient")
            .field("mechanism", &self.mechanism)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

fn failed(reason: impl Into<String>) -> ClientError {
    ClientError::Protocol(format!("SCRAM: {}", reason.into()))
}

impl ScramClient {
    /// Starts an exchange for `user` and returns it with the client-first message.
    ///
    /// # Errors
    ///
    /// As [`random_bytes`].
    pub fn first(
        mechanism: ScramMechanism,
        user: &str,
        password: &str,
    ) -> Result<(Self, Vec<u8>), ClientError> {
        let nonce = B64.encode(random_bytes(24)?);
        Ok(Self::with_nonce(mechanism, user, password, nonce))
    }

    fn with_nonce(
        mechanism: ScramMechanism,
        user: &str,
        password: &str,
        nonce: String,
    ) -> (Self, Vec<u8>) {
        let client_first_bare = format!("n={},r={nonce}", sasl_name(user));
        let message = format!("n,,{client_first_bare}").into_bytes();
        let client = Self {
            mechanism,
            password: password.to_owned(),
            nonce,
            state: State::First { client_first_bare },
        };
        (client, message)
    }

    /// Answers the server-first message with the client-final message.
    ///
    /// # Errors
    ///
    /// [`ClientError::Protocol`] for a server message that is malformed, does
    /// not extend the client's nonce, or asks for too few or too many
    /// iterations.
    pub fn respond(&mut self, server_first: &[u8]) -> Result<Vec<u8>, ClientError> {
        let State::First { client_first_bare } = &self.state else {
            return Err(failed("server-first message out of order"));
        };
        let server_first =
            std::str::from_utf8(server_first).map_err(|_| failed("server-first is not UTF-8"))?;
        let mut nonce = None;
        let mut salt = None;
        let mut iterations = None;
        for attribute in server_first.split(',') {
            match attribute.split_once('=') {
                Some(("r", v)) => nonce = Some(v),
                Some(("s", v)) => salt = Some(B64.decode(v).map_err(|_| failed("bad salt"))?),
                Some(("i", v)) => {
                    iterations = Some(v.parse::<u32>().map_err(|_| failed("bad iterations"))?);
                }
                Some(("e", v)) => return Err(failed(format!("the server refused: {v}"))),
                _ => {}
            }
        }
        let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
            return Err(failed("server-first lacks r, s or i"));
        };
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(failed("the server nonce does not extend the client's"));
        }
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return Err(failed(format!(
                "{iterations} iterations is outside {MIN_ITERATIONS}..={MAX_ITERATIONS}"
            )));
        }
        let iterations = NonZeroU32::new(iterations).ok_or_else(|| failed("zero iterations"))?;
        let m = self.mechanism;
        let salted = m.salted_password(self.password.as_bytes(), &salt, iterations);
        let client_key = m.mac(&salted, b"Client Key");
        let stored_key = digest::digest(m.digest(), &client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let client_signature = m.mac(stored_key.as_ref(), auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&client_signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let server_key = m.mac(&salted, b"Server Key");
        self.state = State::Final {
            server_signature: m.mac(&server_key, auth_message.as_bytes()),
        };
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    /// Checks the server-final message: the server proves it knows the credential.
    ///
    /// # Errors
    ///
    /// [`ClientError::Protocol`] when the server reports an error or its signature is wrong.
    pub fn finish(&mut self, server_final: &[u8]) -> Result<(), ClientError> {
        let State::Final { server_signature } = &self.state else {
            return Err(failed("server-final message out of order"));
        };
        let text =
            std::str::from_utf8(server_final).map_err(|_| failed("server-final is not UTF-8"))?;
        let verifier = text.split(',').find_map(|a| a.strip_prefix("v="));
        if let Some(error) = text.split(',').find_map(|a| a.strip_prefix("e=")) {
            return Err(failed(format!("the server refused: {error}")));
        }
        let verifier = verifier
            .and_then(|v| B64.decode(v).ok())
            .ok_or_else(|| failed("server-final lacks a signature"))?;
        if verifier != *server_signature {
            return Err(failed("the server's signature is wrong"));
        }
        self.state = State::Done;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    /// RFC 7677's SCRAM-SHA-256 example exchange.
    #[test]
    fn rfc_7677_example() {
        let (mut client, first) = ScramClient::with_nonce(
            ScramMechanism::Sha256,
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO".into(),
        );
        check!(first == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first =
            b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let last = client.respond(server_first).unwrap();
        check!(
            last == b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        check!(
            client
                .finish(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
                .is_ok()
        );
    }

    #[test]
    fn a_wrong_server_signature_or_few_iterations_fail() {
        let (mut client, _) =
            ScramClient::with_nonce(ScramMechanism::Sha256, "user", "pencil", "abc".into());
        check!(client.respond(b"r=abcdef,s=c2FsdA==,i=1000").is_err());
        let (mut client, _) =
            ScramClient::with_nonce(ScramMechanism::Sha256, "user", "pencil", "abc".into());
        check!(client.respond(b"r=xyzdef,s=c2FsdA==,i=4096").is_err());
        let (mut client, _) =
            ScramClient::with_nonce(ScramMechanism::Sha256, "user", "pencil", "abc".into());
        client.respond(b"r=abcdef,s=c2FsdA==,i=4096").unwrap();
        check!(client.finish(b"v=AAAA").is_err());
        check!(sasl_name("a=b,c") == "a=3Db=2Cc");
    }
}
