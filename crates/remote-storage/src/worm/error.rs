//! [`WormError`], the archive layer's error, and its mapping into
//! [`RemoteStorageError`].

use crate::error::RemoteStorageError;

/// Why an archive operation failed (as opposed to an archive *finding*, which
/// is a [`VerifyBreak`](crate::VerifyBreak) in a report).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WormError {
    /// The bucket lacks versioning or locked default retention.
    #[error("bucket {bucket:?} is not a write-once bucket: {reason}")]
    BucketNotProtected {
        /// The bucket.
        bucket: String,
        /// What is missing.
        reason: String,
    },
    /// A conditional create found the key already taken.
    #[error("object {key} already exists; the archive never overwrites")]
    AlreadyExists {
        /// The key.
        key: String,
    },
    /// A multipart object read back differently from what was uploaded.
    #[error("read-back of {key} failed verification: {reason}")]
    ReadBackMismatch {
        /// The key.
        key: String,
        /// What differed.
        reason: String,
    },
    /// The partition's existing chain does not authenticate, so it is not
    /// extended.
    #[error("archive chain of {partition} is broken; refusing to extend it: {reason}")]
    ChainBroken {
        /// The partition directory.
        partition: String,
        /// The first break.
        reason: String,
    },
    /// A key, signature, manifest or record that does not decode.
    #[error("malformed archive data: {0}")]
    Malformed(String),
    /// The object store failed.
    #[error("object store: {0}")]
    Store(String),
    /// A local file could not be read.
    #[error("read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl WormError {
    pub(crate) fn store(e: impl std::fmt::Display) -> Self {
        Self::Store(e.to_string())
    }
}

impl From<WormError> for RemoteStorageError {
    fn from(e: WormError) -> Self {
        match e {
            WormError::BucketNotProtected { .. }
            | WormError::AlreadyExists { .. }
            | WormError::ReadBackMismatch { .. }
            | WormError::ChainBroken { .. } => Self::WriteRefused {
                reason: e.to_string(),
            },
            WormError::Io { path, source } => Self::Io {
                action: "read",
                path: path.into(),
                source,
            },
            WormError::Malformed(_) | WormError::Store(_) => Self::Backend {
                message: e.to_string(),
            },
        }
    }
}
