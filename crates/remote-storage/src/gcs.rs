//! Google Cloud Storage specifics of [`S3RemoteStorage`](crate::S3RemoteStorage).
//!
//! The same storage type serves GCS through `object_store`'s GCS client; the
//! one place the backends differ is what archive mode demands of the bucket.
//! On GCS that is a *locked* retention policy (Bucket Lock): while an object
//! is under retention it can be neither deleted nor replaced, and a locked
//! policy cannot be removed or shortened. Object Versioning is not required —
//! GCS does not allow it together with a retention policy, and it is not
//! needed because nothing can be overwritten. For the same reason a
//! multipart object needs no key reservation on GCS.

use krabka_object_store::BucketProtection;

use crate::error::RemoteStorageError;

/// Refuses unless `protection` shows a locked retention policy.
///
/// # Errors
///
/// [`RemoteStorageError::WriteRefused`] naming what the bucket lacks.
pub(crate) fn require_locked_retention(
    bucket: &str,
    protection: &BucketProtection,
) -> Result<(), RemoteStorageError> {
    if protection.has_locked_retention() {
        return Ok(());
    }
    Err(crate::worm::WormError::BucketNotProtected {
        bucket: bucket.to_owned(),
        reason: format!(
            "no locked retention policy (found {:?} for {:?}); lock one with `gcloud storage \
             buckets update --lock-retention-period`",
            protection.retention_mode, protection.retention_period
        ),
    }
    .into())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use assert2::check;
    use krabka_object_store::RetentionMode;

    use super::*;

    #[test]
    fn only_a_locked_policy_passes() {
        let mut p = BucketProtection {
            versioning: false,
            retention_mode: Some(RetentionMode::GcsUnlocked),
            retention_period: Some(Duration::from_secs(86_400)),
        };
        check!(require_locked_retention("b", &p).is_err());
        p.retention_mode = Some(RetentionMode::GcsLocked);
        check!(require_locked_retention("b", &p).is_ok());
    }
}
