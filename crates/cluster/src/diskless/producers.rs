//! The idempotent producers of diskless partitions in the cluster database:
//! `diskless_producer_batches` keeps the last batches (at most five) of
//! each producer on each partition, each with its sequences, offset and
//! largest timestamp.
//!
//! A commit reads the state of the producers it names under its partition
//! locks, checks its batches with Kafka's rules
//! ([`ProducerState`]) in Rust, and writes the changed producers back in
//! the same transaction. DescribeProducers reads one snapshot; expiry
//! (`producer.id.expiration.ms`) takes the partition locks in key order,
//! as every change does, so it never forgets a producer a commit is
//! updating, and never deadlocks with one.

use {
    super::{DisklessPartition, PartitionRow, lock_partitions, split},
    deadpool_postgres::Transaction,
    krabka_remote_storage::diskless::{ObjectCommit, ProducerInfo, ProducerState, RecentBatch},
    std::collections::{BTreeMap, BTreeSet},
    uuid::Uuid,
};

/// Most partitions one expiry transaction locks (the next transaction of
/// the same call goes on), so a pass never holds every partition at once.
pub(super) const MAX_EXPIRY_PARTITIONS: i64 = 1000;

/// A producer on a partition.
pub(super) type ProducerKey = (DisklessPartition, i64);

/// Reads the state of the producers `commit` names on partitions it holds.
pub(super) async fn load(
    tx: &Transaction<'_>,
    commit: &ObjectCommit,
    partitions: &BTreeMap<DisklessPartition, PartitionRow>,
) -> Result<BTreeMap<ProducerKey, ProducerState>, tokio_postgres::Error> {
    let keys: BTreeSet<ProducerKey> = commit
        .batches
        .iter()
        .filter(|b| partitions.contains_key(&b.partition))
        .filter_map(|b| b.producer.map(|p| (b.partition, p.producer_id)))
        .collect();
    let mut producers = BTreeMap::new();
    if keys.is_empty() {
        return Ok(producers);
    }
    let topics: Vec<Uuid> = keys.iter().map(|(p, _)| p.topic_id).collect();
    let indexes: Vec<i32> = keys.iter().map(|(p, _)| p.partition).collect();
    let ids: Vec<i64> = keys.iter().map(|(_, id)| *id).collect();
    let statement = tx
        .prepare_cached(
            "SELECT d.topic_id, d.partition, d.producer_id, d.producer_epoch, d.base_sequence,
                    d.last_sequence, d.base_offset, d.max_timestamp
             FROM diskless_producer_batches d
             JOIN unnest($1::uuid[], $2::int4[], $3::int8[]) AS k(topic_id, partition, producer_id)
               ON d.topic_id = k.topic_id AND d.partition = k.partition
              AND d.producer_id = k.producer_id
             ORDER BY d.base_offset",
        )
        .await?;
    for row in tx.query(&statement, &[&topics, &indexes, &ids]).await? {
        let key = (DisklessPartition::new(row.get(0), row.get(1)), row.get(2));
        let producer: &mut ProducerState = producers.entry(key).or_default();
        producer.epoch = row.get(3);
        producer.recent.push_back(RecentBatch {
            base_sequence: row.get(4),
            last_sequence: row.get(5),
            base_offset: row.get(6),
            max_timestamp: row.get(7),
        });
    }
    Ok(producers)
}

/// Replaces the stored state of the `changed` producers.
pub(super) async fn store(
    tx: &Transaction<'_>,
    producers: &BTreeMap<ProducerKey, ProducerState>,
    changed: &BTreeSet<ProducerKey>,
) -> Result<(), tokio_postgres::Error> {
    if changed.is_empty() {
        return Ok(());
    }
    let topics: Vec<Uuid> = changed.iter().map(|(p, _)| p.topic_id).collect();
    let indexes: Vec<i32> = changed.iter().map(|(p, _)| p.partition).collect();
    let ids: Vec<i64> = changed.iter().map(|(_, id)| *id).collect();
    let delete = tx
        .prepare_cached(
            "DELETE FROM diskless_producer_batches d
             USING unnest($1::uuid[], $2::int4[], $3::int8[]) AS k(topic_id, partition, producer_id)
             WHERE d.topic_id = k.topic_id AND d.partition = k.partition
               AND d.producer_id = k.producer_id",
        )
        .await?;
    tx.execute(&delete, &[&topics, &indexes, &ids]).await?;
    let rows: Vec<(&ProducerKey, i16, &RecentBatch)> = changed
        .iter()
        .filter_map(|key| producers.get(key).map(|p| (key, p)))
        .flat_map(|(key, p)| p.recent.iter().map(move |r| (key, p.epoch, r)))
        .collect();
    let insert = tx
        .prepare_cached(
            "INSERT INTO diskless_producer_batches (topic_id, partition, producer_id,
                 producer_epoch, base_sequence, last_sequence, base_offset, max_timestamp)
             SELECT * FROM unnest($1::uuid[], $2::int4[], $3::int8[], $4::int2[], $5::int4[],
                                  $6::int4[], $7::int8[], $8::int8[])",
        )
        .await?;
    let topics: Vec<Uuid> = rows.iter().map(|(k, _, _)| k.0.topic_id).collect();
    let indexes: Vec<i32> = rows.iter().map(|(k, _, _)| k.0.partition).collect();
    let ids: Vec<i64> = rows.iter().map(|(k, _, _)| k.1).collect();
    let epochs: Vec<i16> = rows.iter().map(|(_, e, _)| *e).collect();
    let bases: Vec<i32> = rows.iter().map(|(_, _, r)| r.base_sequence).collect();
    let lasts: Vec<i32> = rows.iter().map(|(_, _, r)| r.last_sequence).collect();
    let offsets: Vec<i64> = rows.iter().map(|(_, _, r)| r.base_offset).collect();
    let timestamps: Vec<i64> = rows.iter().map(|(_, _, r)| r.max_timestamp).collect();
    tx.execute(
        &insert,
        &[
            &topics,
            &indexes,
            &ids,
            &epochs,
            &bases,
            &lasts,
            &offsets,
            &timestamps,
        ],
    )
    .await
    .map(drop)
}

/// The producers of each of `partitions` (in order), each described by its
/// last batch, by producer id. The caller answers unknown partitions.
pub(super) async fn describe(
    tx: &Transaction<'_>,
    partitions: &[DisklessPartition],
) -> Result<Vec<Vec<ProducerInfo>>, tokio_postgres::Error> {
    let (topics, indexes) = split(partitions);
    let statement = tx
        .prepare_cached(
            "SELECT r.i, l.producer_id, l.producer_epoch, l.last_sequence, l.max_timestamp
             FROM unnest($1::uuid[], $2::int4[]) WITH ORDINALITY AS r(topic_id, partition, i)
             CROSS JOIN LATERAL (
                 SELECT DISTINCT ON (d.producer_id) d.producer_id, d.producer_epoch,
                        d.last_sequence, d.max_timestamp
                 FROM diskless_producer_batches d
                 WHERE d.topic_id = r.topic_id AND d.partition = r.partition
                 ORDER BY d.producer_id, d.base_offset DESC) l
             ORDER BY r.i, l.producer_id",
        )
        .await?;
    let mut answers = vec![Vec::new(); partitions.len()];
    for row in tx.query(&statement, &[&topics, &indexes]).await? {
        // WITH ORDINALITY counts from 1.
        let at = usize::try_from(row.get::<_, i64>(0) - 1).unwrap_or(usize::MAX);
        if let Some(answer) = answers.get_mut(at) {
            answer.push(ProducerInfo {
                producer_id: krabka_ids::ProducerId(row.get(1)),
                producer_epoch: krabka_ids::ProducerEpoch(row.get(2)),
                last_sequence: row.get(3),
                last_timestamp: row.get(4),
            });
        }
    }
    Ok(answers)
}

/// One expiry transaction: finds up to [`MAX_EXPIRY_PARTITIONS`]
/// partitions with a producer idle since before `idle_before_ms`, locks
/// them in key order, and forgets the producers still idle under the
/// lock. Answers how many producers it forgot and whether it may have left
/// partitions for another transaction.
pub(super) async fn expire_some(
    tx: &Transaction<'_>,
    idle_before_ms: i64,
) -> Result<(u64, bool), tokio_postgres::Error> {
    let candidates = tx
        .prepare_cached(
            "SELECT topic_id, partition FROM (
                 SELECT DISTINCT ON (topic_id, partition, producer_id)
                        topic_id, partition, max_timestamp
                 FROM diskless_producer_batches
                 ORDER BY topic_id, partition, producer_id, base_offset DESC) last
             WHERE max_timestamp < $1
             GROUP BY topic_id, partition
             ORDER BY topic_id, partition
             LIMIT $2",
        )
        .await?;
    let found: Vec<DisklessPartition> = tx
        .query(&candidates, &[&idle_before_ms, &MAX_EXPIRY_PARTITIONS])
        .await?
        .iter()
        .map(|row| DisklessPartition::new(row.get(0), row.get(1)))
        .collect();
    if found.is_empty() {
        return Ok((0, false));
    }
    let more = i64::try_from(found.len()).unwrap_or(i64::MAX) >= MAX_EXPIRY_PARTITIONS;
    // Locking waits for commits in flight on these partitions; the
    // statement below then sees what they wrote (READ COMMITTED takes a
    // snapshot per statement), so a producer one of them just refreshed
    // stays.
    // A partition without its row (never the case: deleting a topic
    // deletes its producers too) has no commit to wait for.
    lock_partitions(tx, &found).await?;
    let (topics, indexes) = split(&found);
    let forget = tx
        .prepare_cached(
            "WITH last AS (
                 SELECT DISTINCT ON (d.topic_id, d.partition, d.producer_id)
                        d.topic_id, d.partition, d.producer_id, d.max_timestamp
                 FROM diskless_producer_batches d
                 JOIN unnest($1::uuid[], $2::int4[]) AS p(topic_id, partition)
                   ON d.topic_id = p.topic_id AND d.partition = p.partition
                 ORDER BY d.topic_id, d.partition, d.producer_id, d.base_offset DESC),
             gone AS (
                 DELETE FROM diskless_producer_batches d USING last
                 WHERE d.topic_id = last.topic_id AND d.partition = last.partition
                   AND d.producer_id = last.producer_id AND last.max_timestamp < $3
                 RETURNING d.topic_id, d.partition, d.producer_id)
             SELECT count(DISTINCT (topic_id, partition, producer_id)) FROM gone",
        )
        .await?;
    let forgotten: i64 = tx
        .query_one(&forget, &[&topics, &indexes, &idle_before_ms])
        .await?
        .get(0);
    Ok((u64::try_from(forgotten).unwrap_or(0), more))
}
