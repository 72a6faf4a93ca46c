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
