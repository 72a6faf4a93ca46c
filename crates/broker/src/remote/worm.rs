//! Publication of WORM chain heads outside the bucket (issue #7, item 4).
//!
//! A write-once archive hash-chains each partition's manifests, so any
//! change, insertion or reordering breaks the chain — but a chain whose last
//! manifests were cut off is still internally consistent. The broker
//! therefore records every new chain head somewhere the bucket's owner
//! cannot rewrite alone: as a keyed record in `__remote_log_metadata`, on the
//! metadata partition of the user partition (the same one that holds its
//! segment events). An auditor reads the newest record per key back
//! ([`latest_chain_heads`], `krabka remote-metadata worm-heads`) and hands it
//! to the verifier as the expected head (`krabka-worm-verify --expect-head`).
//!
//! The record is keyed so that compaction would keep the newest tip per
//! partition; the remote log metadata manager ignores keyed records (Kafka's
//! own metadata events never carry a key).
//!
//! Publication follows the copy: the copy task calls [`ChainHeadPublisher::sync`]
//! after every finished copy and at each pass, and it publishes whenever the
//! archive holds a newer tip than the one last published. A failed
//! publication therefore fails the pass (the copy task backs off) and is
//! retried, so the published tip never stays behind for long.

use {
    bytes::Bytes,
    krabka_remote_storage::{
        RemoteStorageError, S3RemoteStorage, TopicIdPartition, WormChainRecord,
    },
    krabka_remote_storage_topic::{
        MetadataEventLog, MetadataLogError, RemoteLogMetadataTopicPartitioner,
    },
    std::{
        collections::{BTreeMap, HashMap},
        sync::{Arc, Mutex, PoisonError},
        time::Duration,
    },
    tokio::runtime::Handle,
};

/// The key prefix of chain-head records ([`WormChainRecord::key`]).
pub const CHAIN_KEY_PREFIX: &[u8] = b"worm-chain/";

/// Longest wait for one publication to be acknowledged.
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(30);

/// Publishes each partition's newest chain head into the metadata topic.
pub struct ChainHeadPublisher {
    storage: Arc<S3RemoteStorage>,
    log: Arc<dyn MetadataEventLog>,
    partitioner: RemoteLogMetadataTopicPartitioner,
    runtime: Handle,
    /// Sequence number last published per partition.
    published: Mutex<HashMap<TopicIdPartition, u64>>,
}

impl std::fmt::Debug for ChainHeadPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainHeadPublisher")
            .field("storage", &self.storage)
            .field("partitions", &self.partitioner.partitions())
            .finish_non_exhaustive()
    }
}

impl ChainHeadPublisher {
    /// A publisher of `storage`'s chain heads into `log`; `runtime` runs the
    /// log's async calls.
    #[must_use]
    pub fn new(
        storage: Arc<S3RemoteStorage>,
        log: Arc<dyn MetadataEventLog>,
        runtime: Handle,
    ) -> Self {
        let partitioner = RemoteLogMetadataTopicPartitioner::new(log.partition_count());
        Self {
            storage,
            log,
            partitioner,
            runtime,
            published: Mutex::new(HashMap::new()),
        }
    }

    /// Publishes `partition`'s chain head if the archive sealed a newer one
    /// than was last published; returns the record published, if any.
    /// Blocking: call it from a blocking thread (the copy task's).
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::Backend`] if the metadata topic refused the
    /// record or did not acknowledge it in time.
    pub fn sync(
        &self,
        partition: &TopicIdPartition,
    ) -> Result<Option<WormChainRecord>, RemoteStorageError> {
        let Some(record) = self.storage.chain_record(partition) else {
            return Ok(None);
        };
        let done = self
            .published
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(partition)
            .copied();
        if done.is_some_and(|seq| seq >= record.seq.0) {
            return Ok(None);
        }
        let metadata_partition = self
            .partitioner
            .metadata_partition(partition.topic_id(), partition.partition());
        let key = Bytes::from(record.key());
        let value = Bytes::from(record.to_bytes());
        let log = Arc::clone(&self.log);
        let offset = self
            .runtime
            .block_on(async move {
                tokio::time::timeout(
                    PUBLISH_TIMEOUT,
                    log.publish_keyed(metadata_partition, key, Some(value)),
                )
                .await
            })
            .map_err(|_| {
                backend(format!(
                    "publishing the chain head of {partition} timed out"
                ))
            })?
            .map_err(|e| backend(format!("publishing the chain head of {partition}: {e}")))?;
        self.published
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(partition.clone(), record.seq.0);
        tracing::info!(
            %partition,
            seq = record.seq.0,
            head = %record.head,
            metadata_partition,
            offset,
            "published the WORM chain head"
        );
        Ok(Some(record))
    }
}

fn backend(message: String) -> RemoteStorageError {
    RemoteStorageError::Backend { message }
}

/// The newest chain head of each partition found in the metadata topic
/// (of `topic` only, when given), in partition-directory order. Records that
/// do not decode are skipped, so a foreign keyed record cannot stop an audit.
///
/// # Errors
///
/// [`MetadataLogError`] if the water marks or a range cannot be read.
pub async fn latest_chain_heads(
    log: &dyn MetadataEventLog,
    topic: Option<&str>,
) -> Result<Vec<WormChainRecord>, MetadataLogError> {
    let lows = log.low_water_marks().await?;
    let highs = log.high_water_marks().await?;
    let mut newest: BTreeMap<Vec<u8>, WormChainRecord> = BTreeMap::new();
    for (partition, (&low, &high)) in (0..).zip(lows.iter().zip(highs.iter())) {
        if high <= low {
            continue;
        }
        log.visit_range(partition, low, high, &mut |record| {
            let Some(key) = record.key.as_ref().filter(|k| k.starts_with(CHAIN_KEY_PREFIX))
            else {
                return Ok(());
            };
            if record.tombstone {
                newest.remove(key.as_ref());
                return Ok(());
            }
            match WormChainRecord::from_bytes(&record.payload) {
                Ok(head) if topic.is_none_or(|t| t == head.topic) => {
                    // Offset order within a partition: a later record is newer.
                    newest.insert(key.to_vec(), head);
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(partition, offset = record.offset, error = %e, "skipping an undecodable chain head");
                }
            }
            Ok(())
        })
        .await?;
    }
    Ok(newest.into_values().collect())
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        assert2::check,
        krabka_remote_storage::{ChainHead, ManifestSeq, Sha256Digest, WORM_CHAIN_RECORD_VERSION},
        krabka_remote_storage_topic::InProcessMetadataEventLog,
        uuid::Uuid,
    };

    fn record(topic: &str, partition: i32, seq: u64) -> WormChainRecord {
        WormChainRecord {
            version: WORM_CHAIN_RECORD_VERSION,
            topic: topic.into(),
            partition,
            topic_id: Uuid::from_u128(42),
            seq: ManifestSeq(seq),
            head: ChainHead(Sha256Digest::of(&seq.to_be_bytes())),
            segment_id: Uuid::from_u128(u128::from(seq)),
            end_offset: i64::try_from(seq).unwrap_or(0) * 100 + 99,
        }
    }

    #[tokio::test]
    async fn the_newest_head_per_partition_is_read_back() {
        let log = InProcessMetadataEventLog::new(3);
        let partitioner = RemoteLogMetadataTopicPartitioner::new(3);
        for r in [
            record("a", 0, 0),
            record("a", 1, 0),
            record("a", 0, 1),
            record("b", 0, 0),
            record("a", 0, 2),
        ] {
            let p = partitioner.metadata_partition(r.topic_id, r.partition);
            log.publish_keyed(p, Bytes::from(r.key()), Some(Bytes::from(r.to_bytes())))
                .await
                .unwrap();
        }
        // Unkeyed segment events and foreign keys in the same topic are skipped.
        log.publish(0, Bytes::from_static(b"\x01\x00event"))
            .await
            .unwrap();
        log.publish_keyed(
            1,
            Bytes::from_static(b"other/key"),
            Some(Bytes::from_static(b"{}")),
        )
        .await
        .unwrap();
        let heads = latest_chain_heads(&log, None).await.unwrap();
        let got: Vec<_> = heads
            .iter()
            .map(|h| (h.topic.as_str(), h.partition, h.seq.0))
            .collect();
        check!(got == vec![("a", 0, 2), ("a", 1, 0), ("b", 0, 0)]);
        let only_b = latest_chain_heads(&log, Some("b")).await.unwrap();
        check!(only_b == vec![record("b", 0, 0)]);
    }
}
