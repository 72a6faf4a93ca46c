//! Coordinator state: the tables that stand in for the compacted topics
//! `__consumer_offsets` and `__transaction_state`.
//!
//! A row per (shard, key) holds the latest value, as compaction would leave
//! the topic; a tombstone deletes the row. `seq` orders the rows as the log
//! would, so a load replays them in write order. Records written inside an
//! open transaction (transactional offset commits) wait in a pending table
//! until the transaction's marker applies them (commit) or drops them
//! (abort). Every write is conditional on the writer's shard lease
//! ([`Fence::Shard`]), so a deposed owner cannot write.

use {
    crate::{
        Cluster,
        db::OpError,
        error::ClusterError,
        shards::{Fence, ShardId, ShardLease},
    },
    deadpool_postgres::GenericClient,
    krabka_ids::{ProducerEpoch, ProducerId},
    std::collections::HashMap,
};

/// Most records one write may carry (the sequence numbers of a batch are
/// `batch number × 2^20 + index`).
pub const MAX_BATCH: usize = 1 << 20;

/// One keyed record: a value, or a tombstone (`None`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StateRecord {
    /// The encoded key, as the compacted topic keys it.
    pub key: Vec<u8>,
    /// The encoded value, or `None` for a tombstone.
    pub value: Option<Vec<u8>>,
}

/// What a load reads back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredEntry {
    /// The latest committed value of a key.
    Committed {
        /// Its place in the write order (see [`Cluster::write_state`]).
        seq: i64,
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
    },
    /// A record of a transaction still open.
    Pending {
        /// Its place in the write order.
        seq: i64,
        /// The transaction's producer.
        producer: ProducerId,
        /// Its epoch when it wrote the record.
        epoch: ProducerEpoch,
        /// The key.
        key: Vec<u8>,
        /// The value, or `None` for a tombstone.
        value: Option<Vec<u8>>,
    },
}

/// A transaction marker for a coordinator state shard: ends a producer's
/// pending records there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingMarker {
    /// The transaction's producer.
    pub producer: ProducerId,
    /// The producer epoch the marker carries; pending records of a later
    /// epoch are not its to end.
    pub epoch: ProducerEpoch,
    /// The transaction coordinator's epoch; a marker from an older
    /// coordinator than the last one seen for the producer is refused.
    pub coordinator_epoch: i32,
    /// Commit (apply the records) or abort (drop them).
    pub commit: bool,
}

/// The last record of each key with its index in the batch, in the order of
/// those last records (what compaction would keep of the batch).
fn compact(records: &[StateRecord]) -> Vec<(i64, &StateRecord)> {
    let mut last: HashMap<&[u8], usize> = HashMap::new();
    for (i, r) in records.iter().enumerate() {
        last.insert(&r.key, i);
    }
    records
        .iter()
        .enumerate()
        .filter(|(i, r)| last.get(r.key.as_slice()) == Some(i))
        .map(|(i, r)| (i64::try_from(i).unwrap_or(i64::MAX), r))
        .collect()
}

fn check_size(records: &[StateRecord]) -> Result<(), ClusterError> {
    if records.len() > MAX_BATCH {
        return Err(ClusterError::Invalid(format!(
            "{} records in one write (at most {MAX_BATCH})",
            records.len()
        )));
    }
    Ok(())
}

/// Inside a transactional write: refuses `producer` at `epoch` when the
/// shard has seen a later epoch of it, else records the epoch.
async fn fence_producer<C: GenericClient + Sync>(
    tx: &C,
    shard: crate::shards::ShardId,
    producer: (ProducerId, ProducerEpoch),
) -> Result<(), OpError> {
    let current: Option<i16> = tx
        .query_opt(
            "SELECT producer_epoch FROM coordinator_producers
             WHERE kind = $1 AND shard = $2 AND producer_id = $3 FOR UPDATE",
            &[&shard.kind.as_str(), &shard.partition, &producer.0.0],
        )
        .await?
        .map(|row| row.get(0));
    if let Some(current) = current
        && current > producer.1.0
    {
        return Err(ClusterError::ProducerFenced {
            producer: producer.0,
            current: ProducerEpoch(current),
            found: producer.1,
        }
        .into());
    }
    tx.execute(
        "INSERT INTO coordinator_producers (kind, shard, producer_id, producer_epoch)
         VALUES ($1, $2, $3, $4)
         ON CONFLICT (kind, shard, producer_id) DO UPDATE
         SET producer_epoch = excluded.producer_epoch",
        &[
            &shard.kind.as_str(),
            &shard.partition,
            &producer.0.0,
            &producer.1.0,
        ],
    )
    .await?;
    Ok(())
}

impl Cluster {
    /// Writes `records` to the shard `lease` holds, as one atomic step, and
    /// returns the write-order number of the first: record `i` of the slice
    /// is at that number plus `i` (the numbers of one write are consecutive
    /// and later than any earlier write's, as offsets in a log would be).
    ///
    /// # Errors
    ///
    /// [`ClusterError::Fenced`] when `lease` is no longer current (nothing
    /// was written), [`ClusterError::Invalid`] for more than [`MAX_BATCH`]
    /// records, [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn write_state(
        &self,
        lease: &ShardLease,
        records: &[StateRecord],
    ) -> Result<i64, ClusterError> {
        check_size(records)?;
        let kept = compact(records);
        let (puts, deletes): (Vec<_>, Vec<_>) =
            kept.into_iter().partition(|(_, r)| r.value.is_some());
        let put_index: Vec<i64> = puts.iter().map(|(i, _)| *i).collect();
        let put_keys: Vec<&[u8]> = puts.iter().map(|(_, r)| r.key.as_slice()).collect();
        let put_values: Vec<&[u8]> = puts
            .iter()
            .map(|(_, r)| r.value.as_deref().unwrap_or_default())
            .collect();
        let delete_keys: Vec<&[u8]> = deletes.iter().map(|(_, r)| r.key.as_slice()).collect();
        let shard = lease.shard;
        self.db
            .run("write_state", async |conn| {
                let tx = conn.transaction().await?;
                Fence::Shard(*lease).check(&tx).await?;
                let base: i64 = tx
                    .query_one("SELECT nextval('coordinator_seq') * 1048576", &[])
                    .await?
                    .get(0);
                if !put_keys.is_empty() {
                    tx.execute(
                        "INSERT INTO coordinator_state (kind, shard, key, value, seq, epoch)
                         SELECT $1, $2, k, v, $6 + i, $5
                         FROM unnest($3::bytea[], $4::bytea[], $7::bigint[]) AS r(k, v, i)
                         ON CONFLICT (kind, shard, key) DO UPDATE
                         SET value = excluded.value, seq = excluded.seq, epoch = excluded.epoch",
                        &[
                            &shard.kind.as_str(),
                            &shard.partition,
                            &put_keys,
                            &put_values,
                            &lease.epoch.0,
                            &base,
                            &put_index,
                        ],
                    )
                    .await?;
                }
                if !delete_keys.is_empty() {
                    tx.execute(
                        "DELETE FROM coordinator_state
                         WHERE kind = $1 AND shard = $2 AND key = ANY($3::bytea[])",
                        &[&shard.kind.as_str(), &shard.partition, &delete_keys],
                    )
                    .await?;
                }
                tx.commit().await?;
                Ok::<_, OpError>(base)
            })
            .await
    }

    /// Writes `records` of `producer`'s open transaction to the shard
    /// `lease` holds; they take effect when
    /// [`complete_pending`](Self::complete_pending) commits them. Returns
    /// the write-order number of the first, as
    /// [`write_state`](Self::write_state) does.
    ///
    /// # Errors
    ///
    /// [`ClusterError::ProducerFenced`] when the shard has seen a later
    /// epoch of the producer (a zombie), otherwise as
    /// [`write_state`](Self::write_state).
    pub async fn write_pending(
        &self,
        lease: &ShardLease,
        producer: (ProducerId, ProducerEpoch),
        records: &[StateRecord],
    ) -> Result<i64, ClusterError> {
        check_size(records)?;
        let kept = compact(records);
        let index: Vec<i64> = kept.iter().map(|(i, _)| *i).collect();
        let keys: Vec<&[u8]> = kept.iter().map(|(_, r)| r.key.as_slice()).collect();
        let values: Vec<Option<&[u8]>> = kept.iter().map(|(_, r)| r.value.as_deref()).collect();
        let shard = lease.shard;
        self.db
            .run("write_pending", async |conn| {
                let tx = conn.transaction().await?;
                Fence::Shard(*lease).check(&tx).await?;
                fence_producer(&tx, shard, producer).await?;
                let base: i64 = tx
                    .query_one("SELECT nextval('coordinator_seq') * 1048576", &[])
                    .await?
                    .get(0);
                tx.execute(
                    "INSERT INTO coordinator_pending
                         (kind, shard, producer_id, producer_epoch, key, value, seq, epoch)
                     SELECT $1, $2, $3, $4, k, v, $8 + i, $7
                     FROM unnest($5::bytea[], $6::bytea[], $9::bigint[]) AS r(k, v, i)
                     ON CONFLICT (kind, shard, producer_id, key) DO UPDATE
                     SET value = excluded.value, seq = excluded.seq,
                         producer_epoch = excluded.producer_epoch, epoch = excluded.epoch",
                    &[
                        &shard.kind.as_str(),
                        &shard.partition,
                        &producer.0.0,
                        &producer.1.0,
                        &keys,
                        &values,
                        &lease.epoch.0,
                        &base,
                        &index,
                    ],
                )
                .await?;
                tx.commit().await?;
                Ok::<_, OpError>(base)
            })
            .await
    }

    /// Ends a producer's open transaction on the shard `lease` holds, as a
    /// transaction marker in the compacted topic would: a commit applies its
    /// pending records where no later write of the same key superseded them
    /// (each keeps its write-order number), an abort drops them. Returns how
    /// many pending records there were.
    ///
    /// # Errors
    ///
    /// [`ClusterError::ProducerFenced`] when the shard has seen a later
    /// epoch of the producer, [`ClusterError::CoordinatorFenced`] when it
    /// has seen a marker of a later transaction coordinator (nothing changes
    /// either way), otherwise as [`write_state`](Self::write_state).
    pub async fn complete_pending(
        &self,
        lease: &ShardLease,
        marker: &PendingMarker,
    ) -> Result<u64, ClusterError> {
        let shard = lease.shard;
        let producer = marker.producer;
        self.db
            .run("complete_pending", async |conn| {
                let tx = conn.transaction().await?;
                Fence::Shard(*lease).check(&tx).await?;
                let kind = shard.kind.as_str();
                let seen: Option<(i16, i32)> = tx
                    .query_opt(
                        "SELECT producer_epoch, coordinator_epoch FROM coordinator_producers
                         WHERE kind = $1 AND shard = $2 AND producer_id = $3 FOR UPDATE",
                        &[&kind, &shard.partition, &producer.0],
                    )
                    .await?
                    .map(|row| (row.get(0), row.get(1)));
                if let Some((epoch, coordinator_epoch)) = seen {
                    if epoch > marker.epoch.0 {
                        return Err(ClusterError::ProducerFenced {
                            producer,
                            current: ProducerEpoch(epoch),
                            found: marker.epoch,
                        }
                        .into());
                    }
                    if coordinator_epoch > marker.coordinator_epoch {
                        return Err(ClusterError::CoordinatorFenced {
                            producer,
                            current: coordinator_epoch,
                            found: marker.coordinator_epoch,
                        }
                        .into());
                    }
                }
                tx.execute(
                    "INSERT INTO coordinator_producers
                         (kind, shard, producer_id, producer_epoch, coordinator_epoch)
                     VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (kind, shard, producer_id) DO UPDATE
                     SET producer_epoch = excluded.producer_epoch,
                         coordinator_epoch = excluded.coordinator_epoch",
                    &[
                        &kind,
                        &shard.partition,
                        &producer.0,
                        &marker.epoch.0,
                        &marker.coordinator_epoch,
                    ],
                )
                .await?;
                if marker.commit {
                    tx.execute(
                        "INSERT INTO coordinator_state (kind, shard, key, value, seq, epoch)
                         SELECT p.kind, p.shard, p.key, p.value, p.seq, $4
                         FROM coordinator_pending p
                         WHERE p.kind = $1 AND p.shard = $2 AND p.producer_id = $3
                           AND p.value IS NOT NULL
                         ON CONFLICT (kind, shard, key) DO UPDATE
                         SET value = excluded.value, seq = excluded.seq, epoch = excluded.epoch
                         WHERE coordinator_state.seq < excluded.seq",
                        &[&kind, &shard.partition, &producer.0, &lease.epoch.0],
                    )
                    .await?;
                    tx.execute(
                        "DELETE FROM coordinator_state s USING coordinator_pending p
                         WHERE p.kind = $1 AND p.shard = $2 AND p.producer_id = $3
                           AND p.value IS NULL
                           AND s.kind = p.kind AND s.shard = p.shard AND s.key = p.key
                           AND s.seq < p.seq",
                        &[&kind, &shard.partition, &producer.0],
                    )
                    .await?;
                }
                let n = tx
                    .execute(
                        "DELETE FROM coordinator_pending
                         WHERE kind = $1 AND shard = $2 AND producer_id = $3",
                        &[&kind, &shard.partition, &producer.0],
                    )
                    .await?;
                tx.commit().await?;
                Ok::<_, OpError>(n)
            })
            .await
    }

    /// Everything stored for `shard`: the committed values in write order,
    /// then the pending records of open transactions in write order.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn read_state(&self, shard: ShardId) -> Result<Vec<StoredEntry>, ClusterError> {
        self.db
            .run("read_state", async |conn| {
                let tx = conn
                    .build_transaction()
                    .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
                    .read_only(true)
                    .start()
                    .await?;
                let kind = shard.kind.as_str();
                let mut entries: Vec<StoredEntry> = tx
                    .query(
                        "SELECT seq, key, value FROM coordinator_state
                         WHERE kind = $1 AND shard = $2 ORDER BY seq",
                        &[&kind, &shard.partition],
                    )
                    .await?
                    .into_iter()
                    .map(|row| StoredEntry::Committed {
                        seq: row.get(0),
                        key: row.get(1),
                        value: row.get(2),
                    })
                    .collect();
                entries.extend(
                    tx.query(
                        "SELECT seq, producer_id, producer_epoch, key, value
                         FROM coordinator_pending
                         WHERE kind = $1 AND shard = $2 ORDER BY seq",
                        &[&kind, &shard.partition],
                    )
                    .await?
                    .into_iter()
                    .map(|row| StoredEntry::Pending {
                        seq: row.get(0),
                        producer: ProducerId(row.get(1)),
                        epoch: ProducerEpoch(row.get(2)),
                        key: row.get(3),
                        value: row.get(4),
                    }),
                );
                tx.commit().await?;
                Ok::<_, OpError>(entries)
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(key: &str, value: Option<&str>) -> StateRecord {
        StateRecord {
            key: key.as_bytes().to_vec(),
            value: value.map(|v| v.as_bytes().to_vec()),
        }
    }

    #[test]
    fn a_batch_keeps_the_last_record_of_each_key_in_its_order() {
        let batch = [
            rec("a", Some("1")),
            rec("b", Some("2")),
            rec("a", None),
            rec("c", Some("3")),
        ];
        let kept: Vec<_> = compact(&batch)
            .into_iter()
            .map(|(i, r)| (i, r.clone()))
            .collect();
        assert_eq!(
            kept,
            [
                (1, rec("b", Some("2"))),
                (2, rec("a", None)),
                (3, rec("c", Some("3")))
            ]
        );
    }
}
