//! The group coordinator's error type.
//!
//! Client-visible failures are answered with Kafka error codes inside the
//! response structs, never as `Err`; this enum covers what can go wrong below
//! the protocol: decoding a `__consumer_offsets` record, and the persistence
//! seam failing.

/// What can fail inside the group coordinator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    /// A `__consumer_offsets` key or value did not decode.
    #[error("malformed __consumer_offsets record: {0}")]
    Malformed(String),
    /// A record carried a key or value version this coordinator does not know.
    #[error("unsupported __consumer_offsets {what} version {version}")]
    UnsupportedVersion {
        /// `"key"` or a value schema name.
        what: &'static str,
        /// The version found in the record.
        version: i16,
    },
    /// The persistence layer failed to append or read records.
    #[error("__consumer_offsets partition {partition}: {reason}")]
    Log {
        /// The `__consumer_offsets` partition.
        partition: i32,
        /// What the log reported.
        reason: String,
    },
    /// The log refused a producer's write (a fenced epoch, a transaction in
    /// the wrong state); clients see `code`, Kafka's error for it.
    #[error("__consumer_offsets partition {partition}: {reason}")]
    Refused {
        /// The `__consumer_offsets` partition.
        partition: i32,
        /// The Kafka error code the log answered.
        code: i16,
        /// What the log reported.
        reason: String,
    },
    /// The persistence layer refused because this broker does not lead the
    /// partition (clients are told `NOT_COORDINATOR`).
    #[error("__consumer_offsets partition {partition} is not led by this broker")]
    NotCoordinator {
        /// The `__consumer_offsets` partition.
        partition: i32,
    },
}
