//! SASL authentication of a new connection (`security.protocol`
//! SASL_PLAINTEXT and SASL_SSL), as Kafka's clients run it since KIP-152:
//! after `ApiVersions`, a `SaslHandshake` v1 names the mechanism and the
//! tokens travel in `SaslAuthenticate` requests, so a failure comes back as
//! `SASL_AUTHENTICATION_FAILED` (58) with the broker's message instead of a
//! silently closed socket.
//!
//! PLAIN and SCRAM-SHA-256/512 are spoken; a session lifetime the broker
//! announces (KIP-368) is not renewed: the broker closes the connection
//! when it ends and the [`crate::Client`] opens a new one on demand.

use {
    crate::{
        ClientError,
        connection::Connection,
        scram::{ScramClient, ScramMechanism},
    },
    bytes::Bytes,
    kafka_protocol::{
        messages::{ApiKey, SaslAuthenticateRequest, SaslHandshakeRequest},
        protocol::StrBytes,
    },
};

/// A SASL mechanism the client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    /// PLAIN (RFC 4616): the password in the clear, for TLS listeners.
    Plain,
    /// SCRAM-SHA-256 or SCRAM-SHA-512.
    Scram(ScramMechanism),
}

impl SaslMechanism {
    /// The mechanism of a `sasl.mechanism` value.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "PLAIN" => Some(Self::Plain),
            other => ScramMechanism::parse(other).map(Self::Scram),
        }
    }

    /// The SASL name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::Scram(m) => m.name(),
        }
    }
}

/// The mechanism and credentials a connection authenticates with.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslConfig {
    /// The mechanism.
    pub mechanism: SaslMechanism,
    /// The user name.
    pub username: String,
    /// The password.
    pub password: String,
}

impl std::fmt::Debug for SaslConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslConfig")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// `SASL_AUTHENTICATION_FAILED`.
const AUTHENTICATION_FAILED: i16 = 58;

/// Authenticates `connection` (whose versions are negotiated) with `sasl`.
///
/// # Errors
///
/// [`ClientError::Broker`] with `UNSUPPORTED_SASL_MECHANISM` (33) when the
/// listener does not enable the mechanism, and `SASL_AUTHENTICATION_FAILED`
/// (58) with the broker's message for wrong credentials;
/// [`ClientError::UnsupportedApi`] for a broker without `SaslHandshake` v1.
pub(crate) async fn authenticate(
    connection: &Connection,
    sasl: &SaslConfig,
) -> Result<(), ClientError> {
    let handshake_version = connection.version(ApiKey::SaslHandshake)?;
    if handshake_version < 1 {
        return Err(ClientError::UnsupportedApi {
            api: "SaslHandshake".into(),
            client_min: 1,
            client_max: 1,
        });
    }
    let mut handshake = SaslHandshakeRequest::default();
    handshake.mechanism = StrBytes::from_static_str(sasl.mechanism.name());
    let response = connection.send(&handshake).await?;
    if response.error_code != 0 {
        let enabled: Vec<String> = response
            .mechanisms
            .iter()
            .map(ToString::to_string)
            .collect();
        return Err(ClientError::broker(
            response.error_code,
            Some(&format!(
                "the listener enables {} only",
                if enabled.is_empty() {
                    "no mechanism".to_owned()
                } else {
                    enabled.join(", ")
                }
            )),
            format!("SaslHandshake {}", sasl.mechanism.name()),
        ));
    }
    match sasl.mechanism {
        SaslMechanism::Plain => {
            let token = format!("\0{}\0{}", sasl.username, sasl.password);
            exchange(connection, token.into_bytes(), sasl).await?;
        }
        SaslMechanism::Scram(mechanism) => {
            let (mut scram, first) = ScramClient::first(mechanism, &sasl.username, &sasl.password)?;
            let server_first = exchange(connection, first, sasl).await?;
            let last = scram.respond(&server_first)?;
            let server_final = exchange(connection, last, sasl).await?;
            scram.finish(&server_final)?;
        }
    }
    Ok(())
}

/// Sends one token and returns the broker's.
async fn exchange(
    connection: &Connection,
    token: Vec<u8>,
    sasl: &SaslConfig,
) -> Result<Bytes, ClientError> {
    let mut request = SaslAuthenticateRequest::default();
    request.auth_bytes = Bytes::from(token);
    let response = connection.send(&request).await?;
    if response.error_code != 0 {
        let message = response.error_message.as_ref().map(ToString::to_string);
        let message = match (response.error_code, message) {
            (AUTHENTICATION_FAILED, None) => Some("invalid credentials".to_owned()),
            (_, message) => message,
        };
        return Err(ClientError::broker(
            response.error_code,
            message.as_deref(),
            format!(
                "SASL {} authentication of {}",
                sasl.mechanism.name(),
                sasl.username
            ),
        ));
    }
    Ok(response.auth_bytes)
}
