//! The diskless cleaner: deletes objects none of whose batches is live any
//! more, once they have been dead for a grace period.
//!
//! An object dies when retention, DeleteRecords or a topic deletion
//! removes its last live batch (or when none of its batches was
//! accepted). A fetch that found the object just before may still be
//! reading it, hence the grace period. Deleting is idempotent, so several
//! brokers may clean at once.

use {
    super::{coordinator::BatchCoordinator, store::DisklessStore},
    crate::RemoteStorageError,
    futures_util::{StreamExt as _, stream},
    std::time::Duration,
};

/// Object deletes in flight at once.
const PARALLEL_DELETES: usize = 16;

/// What one cleaning pass did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CleanerPass {
    /// Objects deleted from the store and forgotten.
    pub deleted: usize,
    /// Objects whose delete failed (tried again next pass).
    pub failed: usize,
}

/// Deletes every object dead for at least `grace` at `now_ms`, then tells
/// the coordinator which are gone.
///
/// # Errors
///
/// [`RemoteStorageError`] when the coordinator fails; failed object
/// deletes are counted in [`CleanerPass::failed`] instead.
pub async fn clean_once(
    coordinator: &dyn BatchCoordinator,
    store: &DisklessStore,
    grace: Duration,
    now_ms: i64,
) -> Result<CleanerPass, RemoteStorageError> {
    let grace_ms = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
    let dead = coordinator
        .objects_to_delete(now_ms.saturating_sub(grace_ms))
        .await?;
    let results: Vec<_> = stream::iter(dead)
        .map(|key| async move {
            let result = store.delete(&key).await;
            (key, result)
        })
        .buffer_unordered(PARALLEL_DELETES)
        .collect()
        .await;
    let mut pass = CleanerPass::default();
    let mut deleted = Vec::with_capacity(results.len());
    for (key, result) in results {
        match result {
            Ok(()) => deleted.push(key),
            Err(e) => {
                pass.failed += 1;
                tracing::warn!(object = %key, error = %e, "deleting a dead diskless object failed");
            }
        }
    }
    pass.deleted = deleted.len();
    if !deleted.is_empty() {
        coordinator.delete_objects(&deleted).await?;
    }
    Ok(pass)
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        crate::diskless::{
            CommitBatch, DeleteRecords, DisklessPartition, InMemoryBatchCoordinator, ObjectCache,
            ObjectCommit,
        },
        assert2::check,
        bytes::Bytes,
        krabka_ids::BrokerId,
        object_store::local::LocalFileSystem,
        std::sync::Arc,
    };

    #[tokio::test]
    async fn dead_objects_go_after_the_grace_period_and_live_ones_stay() {
        let dir = tempfile::tempdir().unwrap();
        let store = DisklessStore::new(
            Arc::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap()),
            "",
            Arc::new(ObjectCache::new(0, 0)),
        );
        let c = InMemoryBatchCoordinator::new();
        let p = DisklessPartition::new(uuid::Uuid::from_u128(9), 0);
        c.create_partitions(&[p]).await.unwrap();
        let mut keys = Vec::new();
        for _ in 0..3 {
            let key = store.new_key();
            store
                .put(&key, Bytes::from_static(b"object"))
                .await
                .unwrap();
            c.commit_object(&ObjectCommit {
                key: key.clone(),
                uploader: BrokerId(1),
                size: 6,
                batches: vec![CommitBatch {
                    partition: p,
                    position: 0,
                    size: 6,
                    offset_count: 1,
                    max_timestamp: 0,
                    producer: None,
                }],
            })
            .await
            .unwrap();
            keys.push(key);
        }
        c.delete_records(&[DeleteRecords {
            partition: p,
            offset: 2,
        }])
        .await
        .unwrap();
        // Died just now: within a minute's grace nothing goes.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let pass = clean_once(&c, &store, Duration::from_secs(60), now)
            .await
            .unwrap();
        check!(pass == CleanerPass::default());
        check!(store.list().await.unwrap().len() == 3);
        let pass = clean_once(&c, &store, Duration::from_secs(60), now + 61_000)
            .await
            .unwrap();
        check!(pass.deleted == 2);
        check!(store.list().await.unwrap() == std::slice::from_ref(&keys[2]));
        check!(c.objects_to_delete(i64::MAX).await.unwrap().is_empty());
    }
}
