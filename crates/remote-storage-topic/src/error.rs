//! [`MetadataLogError`]: the one error type of this crate.
//!
//! The seed fixes `MetadataLogError` as the error of the [`MetadataEventLog`]
//! seam, and its visitor callback returns it too. The codec and the snapshot
//! cache fail on the same paths (a record read from the log does not decode, a
//! cache file read at assignment is corrupt), so they share the enum instead
//! of wrapping each other. At the [`RemoteLogMetadataManager`] boundary the
//! manager turns it into `krabka_remote_storage::RemoteStorageError`, the
//! error that SPI speaks.
//!
//! [`MetadataEventLog`]: crate::MetadataEventLog
//! [`RemoteLogMetadataManager`]: krabka_remote_storage::RemoteLogMetadataManager

/// Why a metadata-log, codec or snapshot-cache operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MetadataLogError {
    /// A failure without a more specific variant (the seed's default methods
    /// use it for unsupported operations).
    #[error("metadata log error: {0}")]
    Other(String),

    /// The partition lies outside `[0, partition_count)`.
    #[error(
        "metadata partition {partition} is out of range: the log has {partition_count} partitions"
    )]
    PartitionOutOfRange {
        /// The partition that was asked for.
        partition: i32,
        /// How many partitions the log holds.
        partition_count: i32,
    },

    /// The log was closed; nothing more is written or delivered.
    #[error("metadata log is closed")]
    Closed,

    /// A range read could not reach its end offset.
    #[error(
        "metadata partition {partition}: range read stopped at offset {reached}, short of end offset {end}"
    )]
    RangeShort {
        /// The partition that was read.
        partition: i32,
        /// The offset the read got to (one past the last offset it could see).
        reached: i64,
        /// The end offset that was asked for.
        end: i64,
    },

    /// Bytes that do not decode as a remote-log metadata record.
    #[error("undecodable remote log metadata record: {0}")]
    Decode(String),

    /// A decoded record whose values the data model refuses (for example an
    /// unknown state id, or an end offset below the start offset).
    #[error("invalid remote log metadata record: {0}")]
    Invalid(String),

    /// The transport (a Kafka cluster) refused or failed a request.
    #[error("metadata log transport error: {0}")]
    Transport(String),

    /// The user partition is not assigned to this manager (the broker is
    /// neither its leader nor a follower), so its metadata is not consumed.
    #[error("remote log metadata of {partition} is not served here: the partition is not assigned")]
    NotAssigned {
        /// The user partition, in Kafka's `<topic id>:<topic>-<partition>` form.
        partition: String,
    },

    /// The user partition's metadata partition has not been consumed up to
    /// the end it had when it was assigned, so answers would be stale
    /// (Kafka answers `ReplicaNotAvailableException` then).
    #[error(
        "remote log metadata of {partition} is not ready: metadata partition {metadata_partition} \
         is consumed to offset {position}, catching up to {target}"
    )]
    NotReady {
        /// The user partition, in Kafka's `<topic id>:<topic>-<partition>` form.
        partition: String,
        /// Its metadata partition.
        metadata_partition: i32,
        /// The next offset the consumer will apply.
        position: i64,
        /// The offset it must reach to be ready.
        target: i64,
    },

    /// A published event was not consumed back in time
    /// (`remote.log.metadata.consume.wait.ms`).
    #[error("timed out after {waited_ms} ms waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long, in milliseconds.
        waited_ms: u128,
    },

    /// A local snapshot-cache file could not be read or written.
    #[error("snapshot cache {path}: {source}")]
    Io {
        /// The file or directory involved.
        path: std::path::PathBuf,
        /// The underlying failure.
        #[source]
        source: std::io::Error,
    },

    /// A local snapshot-cache file exists but its contents are not a valid
    /// snapshot (bad magic, checksum mismatch, truncated).
    #[error("corrupt snapshot cache {path}: {reason}")]
    CorruptSnapshot {
        /// The file involved.
        path: std::path::PathBuf,
        /// What was wrong with it.
        reason: String,
    },
}

impl From<MetadataLogError> for krabka_remote_storage::RemoteStorageError {
    /// The SPI's error for a failure of this crate: `Closed` stays `Closed`,
    /// a file error stays an I/O error, and the rest is a backend error that
    /// keeps this crate's message (the SPI has no variant for "not ready").
    fn from(error: MetadataLogError) -> Self {
        match error {
            MetadataLogError::Closed => Self::Closed,
            MetadataLogError::Io { path, source } => {
                Self::io("access snapshot cache", path, source)
            }
            other => Self::Backend {
                message: other.to_string(),
            },
        }
    }
}
