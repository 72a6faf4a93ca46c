//! The one error type of this crate.
//!
//! Every failure that a caller has to react to differently has its own
//! variant: a missing segment is retried elsewhere or reported as
//! `OFFSET_OUT_OF_RANGE`, an illegal lifecycle transition is a bug in the
//! caller, a refused write on a WORM archive must never be retried as a
//! delete-and-rewrite, and so on. Backends that wrap a foreign error type keep
//! its text in [`RemoteStorageError::Backend`] rather than leaking the type.

use {
    crate::{
        metadata::{
            RemoteLogSegmentId, RemoteLogSegmentState, RemotePartitionDeleteState, TopicIdPartition,
        },
        storage_manager::IndexType,
    },
    krabka_ids::IdError,
    std::{io, path::PathBuf},
};

/// Why a remote-storage operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteStorageError {
    /// The remote tier holds no data for this segment (never copied, or
    /// already deleted). Kafka: `RemoteResourceNotFoundException`.
    #[error("remote log segment {segment_id} not found in the remote tier")]
    SegmentNotFound {
        /// The segment that was asked for.
        segment_id: RemoteLogSegmentId,
    },

    /// The segment exists but the requested index was never copied (a
    /// transaction index or producer snapshot is optional).
    #[error("{index_type} index of remote log segment {segment_id} not found")]
    IndexNotFound {
        /// The segment that was asked for.
        segment_id: RemoteLogSegmentId,
        /// The index that is missing.
        index_type: IndexType,
    },

    /// A metadata update named a segment id the metadata manager has never
    /// seen (or has already forgotten after `DELETE_SEGMENT_FINISHED`).
    #[error("unknown remote log segment id {segment_id}")]
    UnknownSegment {
        /// The id that was not found.
        segment_id: RemoteLogSegmentId,
    },

    /// `add_remote_log_segment_metadata` for a segment id that is already
    /// known. A segment is added once; later changes are updates.
    #[error("remote log segment {segment_id} was already added")]
    DuplicateSegment {
        /// The id that was added twice.
        segment_id: RemoteLogSegmentId,
    },

    /// A segment lifecycle transition that the state machine does not allow.
    /// `from` is `None` when the segment did not exist yet (only
    /// `COPY_SEGMENT_STARTED` may create one).
    #[error(
        "illegal state transition for remote log segment {segment_id}: {} -> {to}",
        display_from(from.as_ref())
    )]
    IllegalStateTransition {
        /// The segment whose state was to change.
        segment_id: RemoteLogSegmentId,
        /// Its current state (`None`: not yet known).
        from: Option<RemoteLogSegmentState>,
        /// The state that was refused.
        to: RemoteLogSegmentState,
    },

    /// A partition-delete lifecycle transition that is not allowed.
    /// `from` is `None` when no delete was recorded yet (only
    /// `DELETE_PARTITION_MARKED` may start one).
    #[error(
        "illegal partition delete transition for {partition}: {} -> {to}",
        display_from(from.as_ref())
    )]
    IllegalPartitionDeleteTransition {
        /// The partition whose delete state was to change.
        partition: TopicIdPartition,
        /// Its current delete state (`None`: not marked).
        from: Option<RemotePartitionDeleteState>,
        /// The state that was refused.
        to: RemotePartitionDeleteState,
    },

    /// The partition is marked for deletion (or deleted); new segments are
    /// refused.
    #[error("partition {partition} is being deleted ({state}); no new remote segments accepted")]
    PartitionDeleted {
        /// The partition.
        partition: TopicIdPartition,
        /// How far its deletion has gone.
        state: RemotePartitionDeleteState,
    },

    /// A data-model value broke an invariant (see
    /// [`RemoteLogSegmentMetadata::new`](crate::RemoteLogSegmentMetadata::new)).
    #[error("invalid remote log metadata: {reason}")]
    InvalidMetadata {
        /// What was wrong.
        reason: String,
    },

    /// A directory, file or object name that is not in the archive key
    /// format (or a Kafka UUID text that does not decode).
    #[error("invalid remote storage name {name:?}: {reason}")]
    InvalidName {
        /// The name that was refused.
        name: String,
        /// What was wrong with it.
        reason: String,
    },

    /// A byte range outside the segment, or with its end before its start.
    #[error("invalid byte range {start}..={end:?} for a segment of {size} bytes")]
    InvalidRange {
        /// First byte asked for.
        start: u64,
        /// Last byte asked for (inclusive), `None` for "to the end".
        end: Option<u64>,
        /// The size of the segment.
        size: u64,
    },

    /// An index file (or a cached copy of one) that does not decode.
    #[error("corrupt {index_type} index: {reason}")]
    CorruptIndex {
        /// Which index.
        index_type: IndexType,
        /// What was wrong.
        reason: String,
    },

    /// A log segment whose record batches do not check out (bad CRC-32C,
    /// truncated batch, bad magic).
    #[error("corrupt log segment at byte {position}: {reason}")]
    CorruptLog {
        /// Byte position of the damaged batch.
        position: u64,
        /// What was wrong.
        reason: String,
    },

    /// A filesystem operation failed.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done ("read", "rename", ...).
        action: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// The backend refused to write (a WORM archive refuses to overwrite an
    /// existing object, or its bucket policy is not in place).
    #[error("write refused: {reason}")]
    WriteRefused {
        /// Why.
        reason: String,
    },

    /// The backend refused to serve a fetch (a write-only WORM archive).
    #[error("fetch refused: {reason}")]
    FetchRefused {
        /// Why.
        reason: String,
    },

    /// The backend refused to delete (a WORM archive refuses every delete).
    #[error("delete refused: {reason}")]
    DeleteRefused {
        /// Why.
        reason: String,
    },

    /// The storage backend (object store, network) failed.
    #[error("remote storage backend error: {message}")]
    Backend {
        /// The backend's own description.
        message: String,
    },

    /// The manager was closed; no further calls are served.
    #[error("remote storage component is closed")]
    Closed,
}

fn display_from<T: std::fmt::Display>(from: Option<&T>) -> String {
    from.map_or_else(|| "(none)".to_owned(), ToString::to_string)
}

impl RemoteStorageError {
    /// Shorthand for an [`RemoteStorageError::Io`] error.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Self::Io {
            action,
            path: path.into(),
            source,
        }
    }

    /// Shorthand for an [`RemoteStorageError::InvalidMetadata`] error.
    pub fn invalid_metadata(reason: impl Into<String>) -> Self {
        Self::InvalidMetadata {
            reason: reason.into(),
        }
    }

    /// Whether this error says the thing asked for does not exist (Kafka's
    /// `RemoteResourceNotFoundException`), as opposed to a real failure.
    #[must_use]
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            Self::SegmentNotFound { .. } | Self::IndexNotFound { .. } | Self::UnknownSegment { .. }
        )
    }
}

impl From<IdError> for RemoteStorageError {
    fn from(error: IdError) -> Self {
        match error {
            IdError::InvalidUuid { text, reason } => Self::InvalidName {
                name: text,
                reason: reason.to_owned(),
            },
        }
    }
}
