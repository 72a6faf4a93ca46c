//! Typed object-store configuration for Krabka's remote tiers.
//!
//! The broker and the WORM verifier both need an [`object_store`] handle for
//! S3 or Google Cloud Storage. Rather than passing loose `key=value` maps around,
//! this crate holds typed configs ([`S3Config`], [`GcsConfig`], joined in
//! [`ObjectStoreConfig`]) that validate up front and turn into an
//! `Arc<dyn ObjectStore>` with retry and exponential backoff on transient errors
//! ([`RetrySettings`]). It also reads the bucket-level protection that a
//! write-once archive depends on ([`BucketProtection`]), because `object_store`
//! has no API for bucket configuration.
//!
//! Errors are one enum, [`ObjectStoreError`], whose messages name the bucket
//! and say what to fix (a missing bucket name, a missing secret, a bucket that
//! does not exist, credentials the server rejected).

mod error;
mod gcs;
mod protection;
mod retry;
mod s3;

use std::sync::Arc;

use object_store::{ObjectStore, path::Path};

pub use {
    error::ObjectStoreError,
    gcs::{GcsConfig, GcsCredentials},
    protection::{BucketProtection, RetentionMode},
    retry::RetrySettings,
    s3::{S3Config, S3Credentials},
};

/// Objects at or above this size (64 MiB) are uploaded with multipart upload;
/// smaller objects use one PUT.
///
/// 64 MiB keeps the common case (index files, small and mid-sized segments)
/// to a single request while a default 1 GiB Kafka segment still streams in
/// bounded memory.
pub const DEFAULT_MULTIPART_THRESHOLD: u64 = 64 * 1024 * 1024;

/// Part size (8 MiB) used by multipart uploads.
///
/// S3 requires every part but the last to be at least 5 MiB and allows at most
/// 10 000 parts, so 8 MiB parts cover objects up to about 78 GiB, far above
/// any Kafka segment.
pub const DEFAULT_MULTIPART_CHUNK_SIZE: usize = 8 * 1024 * 1024;

/// The smallest part S3 accepts for any but the last part of a multipart
/// upload.
pub const MIN_MULTIPART_CHUNK_SIZE: usize = 5 * 1024 * 1024;

/// Either object-store backend that a Krabka remote tier can use.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ObjectStoreConfig {
    /// Amazon S3 or an S3-compatible server.
    S3(S3Config),
    /// Google Cloud Storage (or `fake-gcs-server`).
    Gcs(GcsConfig),
}

impl ObjectStoreConfig {
    /// The bucket name.
    pub fn bucket(&self) -> &str {
        match self {
            Self::S3(c) => &c.bucket,
            Self::Gcs(c) => &c.bucket,
        }
    }

    /// The key prefix every object goes under (empty for the bucket root),
    /// without leading or trailing `/`.
    pub fn prefix(&self) -> &str {
        let prefix = match self {
            Self::S3(c) => &c.prefix,
            Self::Gcs(c) => &c.prefix,
        };
        prefix.trim_matches('/')
    }

    /// The object size at or above which uploads use multipart.
    pub fn multipart_threshold(&self) -> u64 {
        match self {
            Self::S3(c) => c.multipart_threshold,
            Self::Gcs(c) => c.multipart_threshold,
        }
    }

    /// The part size of multipart uploads.
    pub fn multipart_chunk_size(&self) -> usize {
        match self {
            Self::S3(c) => c.multipart_chunk_size,
            Self::Gcs(c) => c.multipart_chunk_size,
        }
    }

    /// A short human name of the backend and bucket, e.g. `s3://archive`.
    pub fn describe(&self) -> String {
        match self {
            Self::S3(c) => format!("s3://{}", c.bucket),
            Self::Gcs(c) => format!("gs://{}", c.bucket),
        }
    }

    /// Validates the config and builds the object-store handle.
    ///
    /// Building makes no network call; use [`check_bucket`] to confirm the
    /// bucket exists and the credentials work.
    ///
    /// # Errors
    ///
    /// [`ObjectStoreError::MissingBucket`], [`ObjectStoreError::InvalidConfig`]
    /// or [`ObjectStoreError::Credentials`] when the config cannot work, and
    /// [`ObjectStoreError::Build`] when `object_store` rejects it.
    pub fn build(&self) -> Result<Arc<dyn ObjectStore>, ObjectStoreError> {
        match self {
            Self::S3(c) => Ok(Arc::new(c.build()?)),
            Self::Gcs(c) => Ok(Arc::new(c.build()?)),
        }
    }

    /// Reads the bucket's versioning and default-retention configuration.
    ///
    /// # Errors
    ///
    /// [`ObjectStoreError::BucketNotFound`], [`ObjectStoreError::AccessDenied`]
    /// or [`ObjectStoreError::Request`] when the bucket configuration cannot be
    /// read.
    pub async fn bucket_protection(&self) -> Result<BucketProtection, ObjectStoreError> {
        match self {
            Self::S3(c) => protection::s3_bucket_protection(c).await,
            Self::Gcs(c) => protection::gcs_bucket_protection(c).await,
        }
    }
}

/// Confirms that the bucket exists and the credentials are accepted, by
/// listing (at most one page of) the configured prefix.
///
/// # Errors
///
/// [`ObjectStoreError::BucketNotFound`] when the bucket does not exist,
/// [`ObjectStoreError::AccessDenied`] when the server rejects the
/// credentials, and [`ObjectStoreError::Request`] for any other failure
/// (for example, the endpoint is unreachable).
pub async fn check_bucket(
    store: &dyn ObjectStore,
    config: &ObjectStoreConfig,
) -> Result<(), ObjectStoreError> {
    let prefix = config.prefix();
    let prefix = (!prefix.is_empty()).then(|| Path::from(prefix));
    store
        .list_with_delimiter(prefix.as_ref())
        .await
        .map(|_| ())
        .map_err(|e| ObjectStoreError::from_store(config.bucket(), e))
}
