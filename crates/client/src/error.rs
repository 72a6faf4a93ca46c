//! The one error type of `krabka-client`.
//!
//! Callers need to tell three kinds of failure apart: the broker answered with
//! one of Kafka's error codes (and the caller may react to the exact code —
//! fencing, a leader change, an unknown topic), the connection or the wire
//! format failed, or the client was asked for something it cannot do. A broker
//! error keeps Kafka's numeric code and its upper-snake name
//! (`PRODUCER_FENCED`, 90) so nothing is lost on the way up.

use kafka_protocol::error::ResponseError;

/// Everything that can go wrong in `krabka-client`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    /// The broker answered with a Kafka error code.
    #[error("broker error {name} ({code}){}", context_suffix(.context, .message))]
    Broker {
        /// Kafka's numeric error code.
        code: i16,
        /// Kafka's name for the code, e.g. `PRODUCER_FENCED`.
        name: String,
        /// The broker's error message, when it sent one.
        message: Option<String>,
        /// What the client was doing (request and resource), for the log.
        context: String,
    },
    /// A TCP connection could not be opened or broke.
    #[error("connection to {broker}: {reason}")]
    Connection {
        /// The `host:port` of the broker.
        broker: String,
        /// What went wrong.
        reason: String,
    },
    /// A frame or message from the broker did not decode, or a request did not encode.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The broker does not support any version of an API this client can speak.
    #[error(
        "the broker does not support {api} in any version this client speaks ({client_min}..={client_max})"
    )]
    UnsupportedApi {
        /// The API's name.
        api: String,
        /// The lowest version the client speaks.
        client_min: i16,
        /// The highest version the client speaks.
        client_max: i16,
    },
    /// A request was not answered in time.
    #[error("timed out: {0}")]
    Timeout(String),
    /// The caller asked for something that cannot be done (bad argument, unknown partition, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The producer or consumer was closed.
    #[error("closed: {0}")]
    Closed(String),
}

fn context_suffix(context: &str, message: &Option<String>) -> String {
    let mut out = String::new();
    if !context.is_empty() {
        out.push_str(" in ");
        out.push_str(context);
    }
    if let Some(message) = message.as_deref().filter(|m| !m.is_empty()) {
        out.push_str(": ");
        out.push_str(message);
    }
    out
}

/// Kafka's error code for `INVALID_PRODUCER_EPOCH`.
pub const INVALID_PRODUCER_EPOCH: i16 = 47;
/// Kafka's error code for `PRODUCER_FENCED`.
pub const PRODUCER_FENCED: i16 = 90;
/// Kafka's error code for `TRANSACTION_COORDINATOR_FENCED`.
pub const TRANSACTION_COORDINATOR_FENCED: i16 = 52;

impl ClientError {
    /// Turns a non-zero Kafka error code into a [`ClientError::Broker`];
    /// `Ok(())` for code 0.
    ///
    /// # Errors
    ///
    /// Returns the broker error when `code` is not 0.
    pub fn check(
        code: i16,
        message: Option<&str>,
        context: impl FnOnce() -> String,
    ) -> Result<(), Self> {
        if code == 0 {
            Ok(())
        } else {
            Err(Self::broker(code, message, context()))
        }
    }

    /// Builds a [`ClientError::Broker`] from a Kafka error code.
    #[must_use]
    pub fn broker(code: i16, message: Option<&str>, context: String) -> Self {
        Self::Broker {
            code,
            name: error_name(code),
            message: message.map(str::to_owned),
            context,
        }
    }

    /// Kafka's error code, when the broker sent one.
    #[must_use]
    pub fn code(&self) -> Option<i16> {
        match self {
            Self::Broker { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// True for the errors that mean a newer producer epoch exists for the
    /// same producer: `PRODUCER_FENCED` (90), `INVALID_PRODUCER_EPOCH` (47) and
    /// `TRANSACTION_COORDINATOR_FENCED` (52).
    #[must_use]
    pub fn is_fenced(&self) -> bool {
        matches!(
            self.code(),
            Some(PRODUCER_FENCED | INVALID_PRODUCER_EPOCH | TRANSACTION_COORDINATOR_FENCED)
        )
    }

    /// True when retrying the same request later may succeed: a retriable
    /// Kafka code (leader change, coordinator loading, timeouts), a broken
    /// connection or a timeout.
    #[must_use]
    pub fn is_retriable(&self) -> bool {
        match self {
            Self::Broker { code, .. } => {
                ResponseError::try_from_code(*code).is_some_and(|e| e.is_retriable())
            }
            Self::Connection { .. } | Self::Timeout(_) => true,
            _ => false,
        }
    }

    /// True when the error suggests the client's metadata (leaders,
    /// coordinators) is stale and should be refreshed before a retry.
    #[must_use]
    pub fn needs_metadata_refresh(&self) -> bool {
        matches!(
            self.code(),
            // LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
            // NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, FENCED_LEADER_EPOCH,
            // UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_ID
            Some(3 | 5 | 6 | 15 | 16 | 74 | 75 | 100)
        ) || matches!(self, Self::Connection { .. })
    }

    pub(crate) fn protocol(what: impl std::fmt::Display) -> Self {
        Self::Protocol(what.to_string())
    }
}

/// Kafka's upper-snake name for an error code (`PRODUCER_FENCED` for 90,
/// `UNKNOWN_SERVER_ERROR` for -1); `UNKNOWN_ERROR_CODE_<n>` for codes this
/// build of `kafka-protocol` does not know.
#[must_use]
pub fn error_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        None => "NONE".to_owned(),
        Some(ResponseError::Unknown(code)) => format!("UNKNOWN_ERROR_CODE_{code}"),
        // `Display` prints the variant's CamelCase name; Kafka's names are the
        // same words in upper snake case.
        Some(error) => camel_to_upper_snake(&error.to_string()),
    }
}

fn camel_to_upper_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn names_match_kafka() {
        check!(error_name(90) == "PRODUCER_FENCED");
        check!(error_name(47) == "INVALID_PRODUCER_EPOCH");
        check!(error_name(6) == "NOT_LEADER_OR_FOLLOWER");
        check!(error_name(-1) == "UNKNOWN_SERVER_ERROR");
        check!(error_name(17) == "INVALID_TOPIC_EXCEPTION");
        check!(error_name(0) == "NONE");
        check!(error_name(9999) == "UNKNOWN_ERROR_CODE_9999");
    }

    #[test]
    fn fencing_is_recognised() {
        let fenced = ClientError::broker(PRODUCER_FENCED, None, "produce".into());
        check!(fenced.is_fenced());
        check!(ClientError::broker(INVALID_PRODUCER_EPOCH, None, String::new()).is_fenced());
        check!(!ClientError::broker(6, None, String::new()).is_fenced());
        check!(ClientError::broker(6, None, String::new()).is_retriable());
        check!(fenced.to_string() == "broker error PRODUCER_FENCED (90) in produce");
    }

    #[test]
    fn check_passes_zero() {
        check!(ClientError::check(0, None, String::new).is_ok());
        let err = ClientError::check(3, Some("no such topic"), || "metadata t".into()).unwrap_err();
        check!(err.code() == Some(3));
        check!(
            err.to_string()
                == "broker error UNKNOWN_TOPIC_OR_PARTITION (3) in metadata t: no such topic"
        );
    }
}
