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
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
    },
    /// A record of a transaction still open.
    Pending {
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

/// The last record of each key, in the order of those last records (what
/// compaction would keep of the batch).
fn compact(records: &[StateRecord]) -> Vec<&StateRecord> {
    let mut last: HashMap<&[u8], usize> = HashMap::new();
    for (i, r) in records.iter().enumerate() {
        last.insert(&r.key, i);
    }
    records
        .iter()
        .enumerate()
        .filter(|(i, r)| last.get(r.key.as_slice()) == Some(i))
        .map(|(_, r)| r)
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

impl Cluster {
    /// Writes `records` to the shard `lease` holds, as one atomic step.
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
    ) -> Result<(), ClusterError> {
        check_size(records)?;
        let kept = compact(records);
        let (puts, deletes): (Vec<_>, Vec<_>) = kept.into_iter().partition(|r| r.value.is_some());
        let put_keys: Vec<&[u8]> = puts.iter().map(|r| r.key.as_slice()).collect();
        let put_values: Vec<&[u8]> = puts
            .iter()
            .map(|r| r.value.as_deref().unwrap_or_default())
            .collect();
        let delete_keys: Vec<&[u8]> = deletes.iter().map(|r| r.key.as_slice()).collect();
        let shard = lease.shard;
        self.db
            .run("write_state", async |conn| {
                let tx = conn.transaction().await?;
                Fence::Shard(*lease).check(&tx).await?;
                if !put_keys.is_empty() {
                    tx.execute(
                        "WITH b AS (SELECT nextval('coordinator_seq') AS n)
                         INSERT INTO coordinator_state (kind, shard, key, value, seq, epoch)
                         SELECT $1, $2, k, v, b.n * 1048576 + i, $5
                         FROM b, unnest($3::bytea[], $4::bytea[]) WITH ORDINALITY AS r(k, v, i)
                         ON CONFLICT (kind, shard, key) DO UPDATE
                         SET value = excluded.value, seq = excluded.seq, epoch = excluded.epoch",
                        &[
                            &shard.kind.as_str(),
                            &shard.partition,
                            &put_keys,
                            &put_values,
                            &lease.epoch.0,
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
                Ok::<_, OpError>(())
            })
            .await
    }

    /// Writes `records` of `producer`'s open transaction to the shard
    /// `lease` holds; they take effect when
    /// [`complete_pending`](Self::complete_pending) commits them.
    ///
    /// # Errors
    ///
    /// As [`write_state`](Self::write_state).
    pub async fn write_pending(
        &self,
        lease: &ShardLease,
        producer: (ProducerId, ProducerEpoch),
        records: &[StateRecord],
    ) -> Result<(), ClusterError> {
        check_size(records)?;
        let kept = compact(records);
        let keys: Vec<&[u8]> = kept.iter().map(|r| r.key.as_slice()).collect();
        let values: Vec<Option<&[u8]>> = kept.iter().map(|r| r.value.as_deref()).collect();
        let shard = lease.shard;
        self.db
            .run("write_pending", async |conn| {
                let tx = conn.transaction().await?;
                Fence::Shard(*lease).check(&tx).await?;
                tx.execute(
                    "WITH b AS (SELECT nextval('coordinator_seq') AS n)
                     INSERT INTO coordinator_pending
                         (kind, shard, producer_id, producer_epoch, key, value, seq, epoch)
                     SELECT $1, $2, $3, $4, k, v, b.n * 1048576 + i, $7
                     FROM b, unnest($5::bytea[], $6::bytea[]) WITH ORDINALITY AS r(k, v, i)
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
                    ],
                )
                .await?;
                tx.commit().await?;
                Ok::<_, OpError>(())
            })
            .await
    }

    /// Ends `producer`'s open transaction on the shard `lease` holds:
    /// `commit` applies its pending records (in their write order, after
    /// everything committed before), an abort drops them. Returns how many
    /// pending records there were.
    ///
    /// # Errors
    ///
    /// As [`write_state`](Self::write_state).
    pub async fn complete_pending(
        &self,
        lease: &ShardLease,
        producer: ProducerId,
        commit: bool,
    ) -> Result<u64, ClusterError> {
        let shard = lease.shard;
        self.db
            .run("complete_pending", async |conn| {
                let tx = conn.transaction().await?;
                Fence::Shard(*lease).check(&tx).await?;
                let kind = shard.kind.as_str();
                if commit {
                    tx.execute(
                        "WITH b AS (SELECT nextval('coordinator_seq') AS n)
                         INSERT INTO coordinator_state (kind, shard, key, value, seq, epoch)
                         SELECT p.kind, p.shard, p.key, p.value,
                                b.n * 1048576 + row_number() OVER (ORDER BY p.seq), $4
                         FROM b, coordinator_pending p
                         WHERE p.kind = $1 AND p.shard = $2 AND p.producer_id = $3
                           AND p.value IS NOT NULL
                         ON CONFLICT (kind, shard, key) DO UPDATE
                         SET value = excluded.value, seq = excluded.seq, epoch = excluded.epoch",
                        &[&kind, &shard.partition, &producer.0, &lease.epoch.0],
                    )
                    .await?;
                    tx.execute(
                        "DELETE FROM coordinator_state s USING coordinator_pending p
                         WHERE p.kind = $1 AND p.shard = $2 AND p.producer_id = $3
                           AND p.value IS NULL
                           AND s.kind = p.kind AND s.shard = p.shard AND s.key = p.key",
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
                        "SELECT key, value FROM coordinator_state
                         WHERE kind = $1 AND shard = $2 ORDER BY seq",
                        &[&kind, &shard.partition],
                    )
                    .await?
                    .into_iter()
                    .map(|row| StoredEntry::Committed {
                        key: row.get(0),
                        value: row.get(1),
                    })
                    .collect();
                entries.extend(
                    tx.query(
                        "SELECT producer_id, producer_epoch, key, value FROM coordinator_pending
                         WHERE kind = $1 AND shard = $2 ORDER BY seq",
                        &[&kind, &shard.partition],
                    )
                    .await?
                    .into_iter()
                    .map(|row| StoredEntry::Pending {
                        producer: ProducerId(row.get(0)),
                        epoch: ProducerEpoch(row.get(1)),
                        key: row.get(2),
                        value: row.get(3),
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
        let kept: Vec<_> = compact(&batch).into_iter().cloned().collect();
        assert_eq!(
            kept,
            [rec("b", Some("2")), rec("a", None), rec("c", Some("3"))]
        );
    }
}
