//! SASL mechanisms, server side: PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER.
//!
//! Each mechanism is a small state machine fed the client's tokens
//! ([`SaslServer::step`]); the connection's [`Authenticator`]
//! (`crate::security::session`) frames them in SaslHandshake and
//! SaslAuthenticate. A failure carries two texts, as in Kafka: what the
//! client is told (Kafka's fixed message unless the mechanism chose a safe
//! one) and what the broker logs.
//!
//! [`Authenticator`]: crate::security::session::Authenticator

pub mod jaas;
pub mod oauthbearer;
pub mod plain;
pub mod scram;

use crate::security::principal::KafkaPrincipal;

/// A SASL mechanism Krabka serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mechanism {
    /// PLAIN (RFC 4616), users from the JAAS config.
    Plain,
    /// SCRAM-SHA-256 or SCRAM-SHA-512.
    Scram(scram::ScramMechanism),
    /// OAUTHBEARER (RFC 7628).
    OAuthBearer,
}

/// Every mechanism name `sasl.enabled.mechanisms` accepts.
pub const MECHANISM_NAMES: &[&str] = &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"];

impl Mechanism {
    /// The SASL name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::Scram(s) => s.name(),
            Self::OAuthBearer => "OAUTHBEARER",
        }
    }

    /// The mechanism of a SASL name (case-sensitive, as Kafka).
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "PLAIN" => Some(Self::Plain),
            "OAUTHBEARER" => Some(Self::OAuthBearer),
            other => scram::ScramMechanism::parse(other).map(Self::Scram),
        }
    }
}

/// A failed exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// What the client is told; `None` means Kafka's fixed text ("... due to
    /// invalid credentials with SASL mechanism ..."), which reveals nothing.
    pub client_message: Option<String>,
    /// What the broker logs.
    pub reason: String,
}

impl Failure {
    /// A failure the client learns nothing about (Kafka's `SaslException`).
    #[must_use]
    pub fn generic(reason: impl Into<String>) -> Self {
        Self {
            client_message: None,
            reason: reason.into(),
        }
    }

    /// A failure whose message is safe to send (Kafka's
    /// `SaslAuthenticationException`).
    #[must_use]
    pub fn told(message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            client_message: Some(message.clone()),
            reason: message,
        }
    }
}

/// What one client token led to.
#[derive(Debug)]
pub enum Step {
    /// Send this challenge and wait for the next token.
    Continue(Vec<u8>),
    /// Authenticated: send this last server message.
    Done {
        /// The server's last message (may be empty).
        response: Vec<u8>,
        /// Who the client is.
        principal: KafkaPrincipal,
        /// When the credential expires (an OAuth token's `exp`), in Unix ms.
        expires_at_ms: Option<i64>,
    },
    /// Refused.
    Failed(Failure),
}
