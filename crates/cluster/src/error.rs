//! The one error type of the crate.
//!
//! The variants a broker acts on are separate: the database being out of
//! reach (retry, stop serving what needs ownership), a lost lease or epoch
//! (`Fenced`: stop acting as owner), a refused start (schema too new, node id
//! taken), and the conflicts an admin request reports to its client.

use krabka_ids::{BrokerId, ProducerEpoch, ProducerId};

/// Errors of the cluster stores.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The settings cannot make a database connection (bad URL, unreadable
    /// CA file, pool that cannot be built).
    #[error("invalid cluster database settings: {0}")]
    Config(String),
    /// No connection could be had in time (the database is down, slow or
    /// unreachable).
    #[error("cannot reach the cluster database: {0}")]
    Unavailable(String),
    /// A statement failed.
    #[error("cluster database error during {op}: {source}")]
    Database {
        /// What the store was doing.
        op: &'static str,
        /// The driver's error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The database's schema was written by a newer Krabka.
    #[error(
        "the cluster database schema is at version {found}, newer than the {supported} this \
         krabka knows; upgrade krabka before it joins this cluster"
    )]
    SchemaTooNew {
        /// The database's schema version.
        found: i32,
        /// The newest version this binary applies.
        supported: i32,
    },
    /// Another live broker holds the node id.
    #[error(
        "node.id {node} is held by a live broker (registered from {listeners}); its lease ends \
         in {remaining_ms} ms unless renewed — give each broker its own node.id"
    )]
    NodeIdTaken {
        /// The contested node id.
        node: BrokerId,
        /// The holder's advertised listeners.
        listeners: String,
        /// How long the holder's lease has left by the database's clock.
        remaining_ms: i64,
    },
    /// The writer's lease or epoch is no longer current: someone else owns
    /// what it tried to write, or its lease lapsed.
    #[error("fenced: {0}")]
    Fenced(String),
    /// A transactional write or marker carried an older epoch of its
    /// producer than the shard has seen (a zombie producer).
    #[error("producer {} is at epoch {}; epoch {} is fenced", producer.0, current.0, found.0)]
    ProducerFenced {
        /// The producer.
        producer: ProducerId,
        /// The latest epoch the shard has seen.
        current: ProducerEpoch,
        /// The epoch presented.
        found: ProducerEpoch,
    },
    /// A transaction marker came from an older transaction coordinator than
    /// the last one that wrote a marker for the producer.
    #[error("transaction coordinator epoch {found} for producer {} is older than {current}", producer.0)]
    CoordinatorFenced {
        /// The producer.
        producer: ProducerId,
        /// The latest coordinator epoch seen.
        current: i32,
        /// The epoch presented.
        found: i32,
    },
    /// A topic of that name exists already.
    #[error("topic {0} already exists")]
    TopicExists(String),
    /// No topic of that name exists.
    #[error("unknown topic {0}")]
    UnknownTopic(String),
    /// A request the store refuses as malformed (e.g. fewer partitions).
    #[error("invalid request: {0}")]
    Invalid(String),
}

impl ClusterError {
    /// Whether the error means the database could not be used at all (as
    /// opposed to a refusal it answered), so the caller may retry later.
    #[must_use]
    pub fn is_unavailable(&self) -> bool {
        match self {
            Self::Unavailable(_) => true,
            Self::Database { source, .. } => source.is_closed() || source.code().is_none(),
            _ => false,
        }
    }
}
