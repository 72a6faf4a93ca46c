//! The one error type of `krabka-client-coordination`.
//!
//! The succession rules act on one distinction above all: was the member
//! fenced ([`CoordinationError::Fenced`], see [`CoordinationError::is_fenced`])
//! or did something else fail. A fence is final for the epoch; every other
//! failure may be retried. The remaining variants say where a failure came
//! from — the producer, the connection, the admin path, a record — so a log
//! line points at the right place.
//!
//! The transport-level variants hold their cause as a boxed error rather than
//! a concrete client type: the [`CoordinationTransport`] seam is not tied to
//! one client, and a test transport can report its own failures.
//!
//! [`CoordinationTransport`]: crate::transport::CoordinationTransport

use crate::record::{FencingToken, Role};

/// The cause of a transport failure, as the underlying client reported it.
pub type TransportFailure = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything that can go wrong in the coordination client.
#[derive(Debug, thiserror::Error)]
pub enum CoordinationError {
    /// The broker refused a write under the member's epoch: a later member
    /// has taken the role.
    #[error("fenced: another member holds role {role}")]
    Fenced {
        /// The role that was lost.
        role: Role,
    },
    /// The transport was asked to write under a token it never minted.
    #[error("not held: this member holds no epoch {token} for role {role}")]
    NotHeld {
        /// The role of the write.
        role: Role,
        /// The token the caller presented.
        token: FencingToken,
    },
    /// The member asked for the authority of a role it does not hold.
    #[error("not the leader of role {role}")]
    NotLeader {
        /// The role.
        role: Role,
    },
    /// The producer or the transaction coordinator refused a call.
    #[error("producer for role {role}: {source}")]
    Producer {
        /// The role the producer writes for.
        role: Role,
        /// What the producer reported.
        #[source]
        source: TransportFailure,
    },
    /// The connection to the cluster failed.
    #[error("client: {0}")]
    Client(#[source] TransportFailure),
    /// An admin call (coordinator lookup, describe, topic creation) failed.
    #[error("admin: {0}")]
    Admin(#[source] TransportFailure),
    /// A record of coordination state does not decode.
    #[error("undecodable coordination record: {reason}")]
    Record {
        /// What is wrong with the bytes.
        reason: String,
    },
    /// A value handed to a constructor is not valid.
    #[error("invalid {what} {value:?}: {reason}")]
    Invalid {
        /// What the value was meant to be (`role`, `member id`, ...).
        what: &'static str,
        /// The value that was refused.
        value: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// The campaign's background task has stopped (resigned or dropped).
    #[error("the campaign for role {role} has stopped")]
    Stopped {
        /// The role of the campaign.
        role: Role,
    },
}

impl CoordinationError {
    /// True when the error means a later member holds the role, so the epoch
    /// of this member is dead and it must step down.
    #[must_use]
    pub fn is_fenced(&self) -> bool {
        matches!(self, Self::Fenced { .. })
    }
}

#[cfg(test)]
mod tests {
    use assert2::check;

    use super::*;

    #[test]
    fn texts_name_the_role() {
        let role = Role::new("controller").unwrap();
        let fenced = CoordinationError::Fenced { role: role.clone() };
        check!(fenced.is_fenced());
        check!(fenced.to_string() == "fenced: another member holds role controller");
        let not_held = CoordinationError::NotHeld {
            role: role.clone(),
            token: FencingToken::new(4242, 7).unwrap(),
        };
        check!(!not_held.is_fenced());
        check!(
            not_held.to_string()
                == "not held: this member holds no epoch 4242/7 for role controller"
        );
        let producer = CoordinationError::Producer {
            role,
            source: "coordinator not available".into(),
        };
        check!(producer.to_string() == "producer for role controller: coordinator not available");
        check!(!producer.is_fenced());
    }
}
