//! The diskless cleaner: deletes objects none of whose batches is live any
//! more, once they have been dead for a grace period.
//!
//! An object dies when retention, DeleteRecords or a topic deletion
//! removes its last live batch (or when none of its batches was
//! accepted). A fetch that found the object just before may still be
//! reading it, hence the grace period. Deleting is idempotent, so several
//! brokers may clean at once.

use {
    super::{coordinator::BatchCoordinator, store::DisklessStore, types::ObjectKey},
    crate::RemoteStorageError,
    futures_util::{StreamExt as _, stream},
    krabka_ids::BrokerId,
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

/// Objects asked about in one coordinator call by the orphan sweep.
const SWEEP_CHUNK: usize = 1000;

/// What one orphan sweep did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SweepPass {
    /// Objects old enough to be looked at.
    pub examined: usize,
    /// Orphans recorded as dead now (the cleaner deletes them after the
    /// grace period).
    pub abandoned: usize,
}

/// Finds orphans — objects in the store's directory last modified before
/// `modified_before_ms` that the coordinator has no record of, left by an
/// uploader that died between its upload and its commit — and records each
/// as dead through [`BatchCoordinator::abandon_object`] with `sweeper` as
/// its uploader. Abandoning is atomic against a late commit of the object,
/// so a commit that was merely slow fails whole rather than losing data;
/// the age limit keeps that rare. The store is listed as a stream and the
/// coordinator asked about [`SWEEP_CHUNK`] objects at a time, so memory
/// stays bounded whatever the bucket holds.
///
/// # Errors
///
/// [`RemoteStorageError`] when listing the store or the coordinator fails;
/// what was recorded until then stays recorded.
pub async fn sweep_orphans(
    coordinator: &dyn BatchCoordinator,
    store: &DisklessStore,
    sweeper: BrokerId,
    modified_before_ms: i64,
) -> Result<SweepPass, RemoteStorageError> {
    let mut pass = SweepPass::default();
    let listed = store
        .list_older_than(modified_before_ms)
        .chunks(SWEEP_CHUNK);
    let mut listed = std::pin::pin!(listed);
    while let Some(chunk) = listed.next().await {
        let chunk = chunk.into_iter().collect::<Result<Vec<_>, _>>()?;
        pass.examined += chunk.len();
        let keys: Vec<ObjectKey> = chunk.iter().map(|o| o.key.clone()).collect();
        let unknown: std::collections::HashSet<ObjectKey> = coordinator
            .unknown_objects(&keys)
            .await?
            .into_iter()
            .collect();
        for orphan in chunk.iter().filter(|o| unknown.contains(&o.key)) {
            if coordinator
                .abandon_object(&orphan.key, sweeper, orphan.size)
                .await?
            {
                tracing::info!(object = %orphan.key, size = orphan.size, "diskless orphan recorded as dead");
                pass.abandoned += 1;
            }
        }
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

    /// Commits the 6-byte object `key` as one batch of `p`.
    async fn commit_one(c: &InMemoryBatchCoordinator, key: &ObjectKey, p: DisklessPartition) {
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
    }

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
            commit_one(&c, &key, p).await;
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

    #[tokio::test]
    async fn the_sweep_records_only_old_unknown_objects_of_its_own_cluster() {
        let dir = tempfile::tempdir().unwrap();
        let fs: Arc<dyn object_store::ObjectStore> =
            Arc::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap());
        let store_of = |cluster: &str| {
            DisklessStore::new(Arc::clone(&fs), "pre", Arc::new(ObjectCache::new(0, 0)))
                .for_cluster(cluster)
        };
        let (ours, theirs) = (store_of("cluster-a"), store_of("cluster-b"));
        let c = InMemoryBatchCoordinator::new();
        let p = DisklessPartition::new(uuid::Uuid::from_u128(9), 0);
        c.create_partitions(&[p]).await.unwrap();
        let put = |store: &DisklessStore| {
            let key = store.new_key();
            let store = store.clone();
            async move {
                store
                    .put(&key, Bytes::from_static(b"object"))
                    .await
                    .unwrap();
                key
            }
        };
        let committed = put(&ours).await;
        check!(committed.0.starts_with("pre/diskless/cluster-a/"));
        commit_one(&c, &committed, p).await;
        let orphans = [put(&ours).await, put(&ours).await];
        let foreign = put(&theirs).await;

        // Nothing is old enough yet.
        let pass = sweep_orphans(&c, &ours, BrokerId(2), 0).await.unwrap();
        check!(pass == SweepPass::default());

        let pass = sweep_orphans(&c, &ours, BrokerId(2), i64::MAX)
            .await
            .unwrap();
        check!(
            pass == SweepPass {
                examined: 3,
                abandoned: 2
            }
        );
        let again = sweep_orphans(&c, &ours, BrokerId(2), i64::MAX)
            .await
            .unwrap();
        check!(again.abandoned == 0, "recorded once");
        // A late commit of an orphan fails whole.
        let late = ObjectCommit {
            key: orphans[0].clone(),
            uploader: BrokerId(1),
            size: 6,
            batches: Vec::new(),
        };
        check!(c.commit_object(&late).await.is_err());

        let pass = clean_once(&c, &ours, Duration::ZERO, i64::MAX)
            .await
            .unwrap();
        check!(pass.deleted == 2);
        check!(ours.list().await.unwrap() == std::slice::from_ref(&committed));
        check!(theirs.list().await.unwrap() == std::slice::from_ref(&foreign));
    }
}
