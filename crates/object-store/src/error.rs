//! The crate's error enum.

/// Why an object-store config could not be built or used.
#[derive(Debug, thiserror::Error)]
pub enum ObjectStoreError {
    /// The config names no bucket.
    #[error("object store config has no bucket name")]
    MissingBucket,
    /// A config value is unusable; the message says which and why.
    #[error("invalid object store config: {0}")]
    InvalidConfig(String),
    /// The credentials in the config are incomplete or unreadable.
    #[error("object store credentials: {0}")]
    Credentials(String),
    /// `object_store` refused to build a client from the config.
    #[error("cannot build object store client: {0}")]
    Build(#[source] object_store::Error),
    /// The bucket does not exist.
    #[error("bucket {bucket:?} does not exist")]
    BucketNotFound {
        /// The bucket.
        bucket: String,
    },
    /// The server rejected the credentials or denied access.
    #[error("access to bucket {bucket:?} denied (check the credentials): {reason}")]
    AccessDenied {
        /// The bucket.
        bucket: String,
        /// The server's reason.
        reason: String,
    },
    /// Any other failed request, e.g. an unreachable endpoint.
    #[error("request to bucket {bucket:?} failed: {reason}")]
    Request {
        /// The bucket.
        bucket: String,
        /// What failed.
        reason: String,
    },
}

impl ObjectStoreError {
    /// Classifies an `object_store` error raised by a request on `bucket`.
    pub fn from_store(bucket: &str, error: object_store::Error) -> Self {
        let bucket = bucket.to_owned();
        match error {
            object_store::Error::NotFound { .. } => Self::BucketNotFound { bucket },
            object_store::Error::PermissionDenied { source, .. }
            | object_store::Error::Unauthenticated { source, .. } => Self::AccessDenied {
                bucket,
                reason: source.to_string(),
            },
            other => {
                // Stores report a missing bucket or refused credentials as a
                // generic HTTP error; tell them apart by the service's own
                // error codes so the operator sees what to fix.
                let reason = other.to_string();
                let missing = ["NoSuchBucket", "no bucket named", "bucket does not exist"];
                let denied = [
                    "AccessDenied",
                    "InvalidAccessKeyId",
                    "SignatureDoesNotMatch",
                    "401 Unauthorized",
                    "403 Forbidden",
                ];
                if missing.iter().any(|m| reason.contains(m)) {
                    Self::BucketNotFound { bucket }
                } else if denied.iter().any(|m| reason.contains(m)) {
                    Self::AccessDenied { bucket, reason }
                } else {
                    Self::Request { bucket, reason }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use assert2::assert;

    use super::*;

    fn generic(message: &str) -> object_store::Error {
        object_store::Error::Generic {
            store: "S3",
            source: message.to_owned().into(),
        }
    }

    #[test]
    fn classifies_store_errors() {
        assert!(let ObjectStoreError::BucketNotFound { .. } =
            ObjectStoreError::from_store("b", generic("404 Not Found: <Code>NoSuchBucket</Code>")));
        assert!(let ObjectStoreError::AccessDenied { .. } =
            ObjectStoreError::from_store("b", generic("403 Forbidden: <Code>InvalidAccessKeyId</Code>")));
        assert!(let ObjectStoreError::Request { .. } =
            ObjectStoreError::from_store("b", generic("connection refused")));
        assert!(let ObjectStoreError::BucketNotFound { .. } = ObjectStoreError::from_store(
            "b",
            object_store::Error::NotFound { path: "x".into(), source: "gone".into() }
        ));
    }
}
