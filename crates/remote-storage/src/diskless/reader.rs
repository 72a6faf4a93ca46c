//! The fetch side of diskless topics: the bytes of the batches the
//! coordinator found, with their assigned offsets written in.
//!
//! Batches that lie back to back in one object are read as one range, so
//! a consumer reading a partition that one broker wrote in bulk costs one
//! read per object, not one per batch (and, for the objects this broker
//! wrote, no read at all: see [`ObjectCache`](super::ObjectCache)).

use {
    super::{object::rewrite_base_offset, store::DisklessStore, types::FoundBatch},
    crate::RemoteStorageError,
    bytes::{Bytes, BytesMut},
};

/// Reads `batches` (in the order given, normally offset order) and returns
/// them concatenated, each with its assigned base offset, as a fetch
/// response carries them.
///
/// # Errors
///
/// [`RemoteStorageError`] when an object cannot be read or a batch is
/// shorter than a batch header.
pub async fn read_batches(
    store: &DisklessStore,
    batches: &[FoundBatch],
) -> Result<Bytes, RemoteStorageError> {
    let total: u64 = batches.iter().map(|b| u64::from(b.size)).sum();
    let mut out = BytesMut::with_capacity(usize::try_from(total).unwrap_or(0));
    let mut i = 0;
    while i < batches.len() {
        // The run of batches that continue each other in one object.
        let first = &batches[i];
        let mut end = first.position + u64::from(first.size);
        let mut j = i + 1;
        while let Some(next) = batches.get(j) {
            if next.object != first.object || next.position != end {
                break;
            }
            end += u64::from(next.size);
            j += 1;
        }
        let bytes = store.read(&first.object, first.position..end).await?;
        let mut at = 0usize;
        for batch in &batches[i..j] {
            let size = batch.size as usize;
            let start = out.len();
            out.extend_from_slice(&bytes[at..at + size]);
            rewrite_base_offset(&mut out[start..], batch.base_offset)?;
            at += size;
        }
        i = j;
    }
    Ok(out.freeze())
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        crate::diskless::{
            BatchCoordinator, CommitBatch, DisklessPartition, FindBatches,
            InMemoryBatchCoordinator, ObjectBuilder, ObjectCache, ObjectCommit,
        },
        assert2::check,
        krabka_ids::BrokerId,
        object_store::local::LocalFileSystem,
        std::sync::Arc,
    };

    /// A fake "batch": 8 bytes of base offset, then a tag.
    fn fake(tag: u8) -> Vec<u8> {
        let mut b = vec![0xff; 8];
        b.extend_from_slice(&[tag; 12]);
        b
    }

    #[tokio::test]
    async fn batches_come_back_with_their_assigned_offsets_across_objects() {
        let dir = tempfile::tempdir().unwrap();
        let store = DisklessStore::new(
            Arc::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap()),
            "",
            Arc::new(ObjectCache::new(0, 0)),
        );
        let c = InMemoryBatchCoordinator::new();
        let p = DisklessPartition::new(uuid::Uuid::from_u128(1), 0);
        let other = DisklessPartition::new(uuid::Uuid::from_u128(2), 0);
        c.create_partitions(&[p, other]).await.unwrap();
        let mut tag = 0;
        for _ in 0..2 {
            let mut builder = ObjectBuilder::new();
            let mut batches = Vec::new();
            for partition in [p, p, other, p] {
                tag += 1;
                let placed = builder.push(partition, &fake(tag)).unwrap();
                batches.push(CommitBatch {
                    partition,
                    position: placed.position,
                    size: placed.size,
                    offset_count: 3,
                    max_timestamp: 0,
                    producer: None,
                });
            }
            let key = store.new_key();
            store.put(&key, builder.finish()).await.unwrap();
            c.commit_object(&ObjectCommit {
                key,
                uploader: BrokerId(1),
                size: 0,
                batches,
            })
            .await
            .unwrap();
        }
        let found = c
            .find_batches(&[FindBatches {
                partition: p,
                offset: 4,
                max_bytes: u32::MAX,
            }])
            .await
            .unwrap();
        let found = &found[0].as_ref().unwrap().batches;
        check!(found.len() == 5, "from the batch holding offset 4 on");
        let bytes = read_batches(&store, found).await.unwrap();
        let read: Vec<(i64, u8)> = bytes
            .chunks(20)
            .map(|b| (i64::from_be_bytes(b[..8].try_into().unwrap()), b[8]))
            .collect();
        check!(read == [(3, 2), (6, 4), (9, 5), (12, 6), (15, 8)]);
    }
}
