//! [`PgBatchCoordinator`]: the batch coordinator of diskless topics in the
//! cluster database, so that every broker of a cluster accepts produce and
//! serves fetch for every diskless partition.
//!
//! Every call that changes state is one transaction, and the only arbiter
//! between brokers is PostgreSQL's row locks:
//!
//! - a change first locks the `diskless_partitions` rows it touches with
//!   one `SELECT … ORDER BY topic_id, partition FOR UPDATE`, so two brokers
//!   always lock in the same order and cannot deadlock; the rows it then
//!   reads and writes (batches, producers) belong to partitions it holds;
//! - objects whose batches it removes are locked next, in `object_id`
//!   order, before their live-batch counts go down;
//! - offsets come from the locked `high_watermark`, so they are dense and
//!   in commit order whichever broker commits;
//! - idempotent producers are checked in Rust ([`producers`]) against the
//!   state read under those locks and written back before the commit.
//!
//! Reads (fetch, ListOffsets, log sizes) take no lock: each call reads one
//! `REPEATABLE READ` snapshot, so a partition's offsets and batches agree.
//! Serialization failures and deadlocks (which the lock order should rule
//! out) roll back and are retried a few times. Times stored here — the
//! LogAppendTime of a batch, when an object died — are the database's
//! clock, the one clock all brokers share.

use {
    crate::{
        Cluster,
        db::{Database, OpError},
        error::ClusterError,
    },
    async_trait::async_trait,
    deadpool_postgres::{Object, Transaction},
    krabka_ids::BrokerId,
    krabka_remote_storage::{
        RemoteStorageError,
        diskless::{
            BatchCoordinator, BatchError, Committed, Consolidate, Consolidated, DeleteRecords,
            DisklessPartition, FindBatches, FoundBatch, FoundBatches, ListOffsetsQuery, LogInfo,
            ObjectCommit, ObjectKey, OffsetAnswer, OffsetQuery, PartitionError, ProducerCheck,
            ProducerInfo, RetentionOutcome, RetentionPolicy,
        },
    },
    std::{
        collections::{BTreeMap, BTreeSet},
        time::Duration,
    },
    tokio_postgres::{IsolationLevel, Row, error::SqlState},
    uuid::Uuid,
};

mod producers;

/// Attempts of one call that keeps hitting serialization failures.
const MAX_ATTEMPTS: u32 = 5;
/// Most batches one [`FindBatches`] answers (the fetch asks again from
/// where it got to).
const MAX_FOUND_BATCHES: i64 = 1000;
/// Rows a fetch lookup reads per partition in its first round.
const FIRST_FOUND_BATCHES: i64 = 16;
/// The smallest a v2 record batch can be (its header, Kafka's
/// `RECORD_BATCH_OVERHEAD`): a budget of `b` bytes holds at most `b / 61`
/// batches after the first, so no more rows than that are read.
const MIN_BATCH_BYTES: i64 = 61;
/// Most batches one retention pass removes from a partition (the next pass
/// goes on), so a pass reads a bounded part of the partition.
const MAX_RETENTION_BATCHES: i64 = 10_000;
/// Most dead objects one `objects_to_delete` names (the cleaner comes back).
const MAX_DEAD_OBJECTS: i64 = 10_000;
/// Most expiry transactions one `expire_producers` runs.
const MAX_EXPIRY_ROUNDS: u32 = 100;

/// The batch coordinator of a cluster: diskless batches in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgBatchCoordinator {
    db: Database,
}

impl Cluster {
    /// The batch coordinator of this cluster's diskless topics.
    #[must_use]
    pub fn batch_coordinator(&self) -> PgBatchCoordinator {
        PgBatchCoordinator::new(self.db.clone())
    }
}

/// A partition's row, as locked or read.
#[derive(Debug, Clone, Copy)]
struct PartitionRow {
    log_start: i64,
    high_watermark: i64,
    bytes: i64,
    consolidated_to: i64,
}

impl PartitionRow {
    /// Decodes `log_start_offset, high_watermark, byte_size,
    /// consolidated_to` starting at column `at`.
    fn from_row(row: &Row, at: usize) -> Option<Self> {
        Some(Self {
            log_start: row.get::<_, Option<i64>>(at)?,
            high_watermark: row.get(at + 1),
            bytes: row.get(at + 2),
            consolidated_to: row.get(at + 3),
        })
    }

    /// The first offset held as batches.
    fn batch_start(&self) -> i64 {
        self.consolidated_to.max(self.log_start)
    }

    fn info(&self) -> LogInfo {
        LogInfo {
            log_start_offset: self.log_start,
            high_watermark: self.high_watermark,
            byte_size: u64::try_from(self.bytes).unwrap_or(0),
            batch_start_offset: self.batch_start(),
        }
    }

    fn out_of_range(&self, offset: i64) -> PartitionError {
        PartitionError::OffsetOutOfRange {
            offset,
            log_start_offset: self.log_start,
            high_watermark: self.high_watermark,
        }
    }
}

/// Batches removed from the start of partitions, per object.
#[derive(Debug, Default)]
struct Released {
    per_object: BTreeMap<i64, i64>,
}

/// What one removal took from a partition.
#[derive(Debug, Default)]
struct Removed {
    batches: i64,
    bytes: i64,
    last_offset: Option<i64>,
}

fn split(partitions: &[DisklessPartition]) -> (Vec<Uuid>, Vec<i32>) {
    partitions.iter().map(|p| (p.topic_id, p.partition)).unzip()
}

/// A value the database column cannot hold.
fn too_large(what: &str, value: u64) -> OpError {
    OpError::Store(ClusterError::Invalid(format!(
        "diskless {what} {value} does not fit the batch table"
    )))
}

fn storage_error(e: ClusterError) -> RemoteStorageError {
    match e {
        ClusterError::Invalid(reason) => RemoteStorageError::invalid_metadata(reason),
        other => RemoteStorageError::Backend {
            message: other.to_string(),
        },
    }
}

fn retriable(e: &ClusterError) -> bool {
    matches!(e, ClusterError::Database { source, .. }
        if source.code() == Some(&SqlState::T_R_SERIALIZATION_FAILURE)
            || source.code() == Some(&SqlState::T_R_DEADLOCK_DETECTED))
}

/// Runs `$body` (an `async` block making one transaction on `$conn`) as
/// [`Database::run`] runs a store operation — timed, failures counted — and
/// again when the database asks for a retry (serialization failure,
/// deadlock), at most [`MAX_ATTEMPTS`] times. A macro rather than a
/// function taking a closure: async closures borrowing the call's
/// arguments are not `Send` for every lifetime, which `async_trait` needs.
macro_rules! transact {
    ($self:expr, $op:literal, |$conn:ident| $body:expr) => {{
        let mut attempt = 1u32;
        loop {
            let started = std::time::Instant::now();
            let result = match $self.db.connection().await {
                Ok(mut connection) => {
                    let $conn: &mut Object = &mut connection;
                    let result: Result<_, OpError> = $body.await;
                    result.map_err(|e| op_failed($op, e))
                }
                Err(e) => Err(e),
            };
            metrics::histogram!("krabka_cluster_db_round_trip_seconds", "op" => $op)
                .record(started.elapsed().as_secs_f64());
            match result {
                Err(e) if attempt < MAX_ATTEMPTS && retriable(&e) => {
                    tracing::debug!(op = $op, attempt, error = %e, "diskless coordinator retries");
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(5 * u64::from(attempt))).await;
                }
                other => break other.map_err(storage_error),
            }
        }
    }};
}

/// An operation's failure as [`Database::run`] reports it.
fn op_failed(op: &'static str, e: OpError) -> ClusterError {
    match e {
        OpError::Db(source) => {
            metrics::counter!("krabka_cluster_db_errors_total", "op" => op).increment(1);
            ClusterError::Database { op, source }
        }
        OpError::Store(e) => e,
    }
}

/// Locks the rows of `partitions` in key order (the one order every broker
/// locks in); answers the ones that exist.
async fn lock_partitions(
    tx: &Transaction<'_>,
    partitions: &[DisklessPartition],
) -> Result<BTreeMap<DisklessPartition, PartitionRow>, tokio_postgres::Error> {
    let (topics, indexes) = split(partitions);
    let statement = tx
        .prepare_cached(
            "SELECT topic_id, partition, log_start_offset, high_watermark, byte_size,
                    consolidated_to
             FROM diskless_partitions
             WHERE (topic_id, partition) IN (SELECT * FROM unnest($1::uuid[], $2::int4[]))
             ORDER BY topic_id, partition
             FOR UPDATE",
        )
        .await?;
    let rows = tx.query(&statement, &[&topics, &indexes]).await?;
    Ok(rows
        .iter()
        .filter_map(|row| {
            let p = DisklessPartition::new(row.get(0), row.get(1));
            PartitionRow::from_row(row, 2).map(|r| (p, r))
        })
        .collect())
}

/// Locks every partition of `topic_ids`, in key order.
async fn lock_topics(
    tx: &Transaction<'_>,
    topic_ids: &[Uuid],
) -> Result<(), tokio_postgres::Error> {
    let statement = tx
        .prepare_cached(
            "SELECT 1 FROM diskless_partitions WHERE topic_id = ANY($1::uuid[])
             ORDER BY topic_id, partition FOR UPDATE",
        )
        .await?;
    tx.query(&statement, &[&topic_ids]).await.map(drop)
}

/// Writes the offsets and sizes of locked partitions back.
async fn store_partitions(
    tx: &Transaction<'_>,
    partitions: &BTreeMap<DisklessPartition, PartitionRow>,
) -> Result<(), tokio_postgres::Error> {
    if partitions.is_empty() {
        return Ok(());
    }
    let keys: Vec<_> = partitions.keys().copied().collect();
    let (topics, indexes) = split(&keys);
    let log_starts: Vec<i64> = partitions.values().map(|r| r.log_start).collect();
    let watermarks: Vec<i64> = partitions.values().map(|r| r.high_watermark).collect();
    let bytes: Vec<i64> = partitions.values().map(|r| r.bytes).collect();
    let consolidated: Vec<i64> = partitions.values().map(|r| r.consolidated_to).collect();
    let statement = tx
        .prepare_cached(
            "UPDATE diskless_partitions p
             SET log_start_offset = u.log_start, high_watermark = u.high_watermark,
                 byte_size = u.bytes, consolidated_to = u.consolidated_to
             FROM unnest($1::uuid[], $2::int4[], $3::int8[], $4::int8[], $5::int8[], $6::int8[])
                  AS u(topic_id, partition, log_start, high_watermark, bytes, consolidated_to)
             WHERE p.topic_id = u.topic_id AND p.partition = u.partition",
        )
        .await?;
    tx.execute(
        &statement,
        &[
            &topics,
            &indexes,
            &log_starts,
            &watermarks,
            &bytes,
            &consolidated,
        ],
    )
    .await
    .map(drop)
}

/// Removes the batches of `partition` whose last offset is below `below`,
/// counting what each object lost.
async fn remove_batches(
    tx: &Transaction<'_>,
    partition: DisklessPartition,
    below: i64,
    released: &mut Released,
) -> Result<Removed, tokio_postgres::Error> {
    let statement = tx
        .prepare_cached(
            "WITH gone AS (
                 DELETE FROM diskless_batches
                 WHERE topic_id = $1 AND partition = $2 AND last_offset < $3
                 RETURNING object_id, size, last_offset)
             SELECT object_id, count(*), sum(size)::int8, max(last_offset)
             FROM gone GROUP BY object_id",
        )
        .await?;
    let rows = tx
        .query(
            &statement,
            &[&partition.topic_id, &partition.partition, &below],
        )
        .await?;
    Ok(count_removed(&rows, released))
}

fn count_removed(rows: &[Row], released: &mut Released) -> Removed {
    let mut removed = Removed::default();
    for row in rows {
        let (object, n, bytes, last): (i64, i64, i64, i64) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        *released.per_object.entry(object).or_default() += n;
        removed.batches += n;
        removed.bytes += bytes;
        removed.last_offset = removed.last_offset.max(Some(last));
    }
    removed
}

/// Takes the released batches off their objects' live counts (locking the
/// objects in id order); an object left with none is dead from now.
async fn release(tx: &Transaction<'_>, released: &Released) -> Result<(), tokio_postgres::Error> {
    if released.per_object.is_empty() {
        return Ok(());
    }
    let ids: Vec<i64> = released.per_object.keys().copied().collect();
    let counts: Vec<i64> = released.per_object.values().copied().collect();
    let lock = tx
        .prepare_cached(
            "SELECT 1 FROM diskless_objects WHERE object_id = ANY($1::int8[])
             ORDER BY object_id FOR UPDATE",
        )
        .await?;
    tx.query(&lock, &[&ids]).await?;
    let update = tx
        .prepare_cached(
            "UPDATE diskless_objects o
             SET live_batches = o.live_batches - r.n,
                 dead_since_ms = CASE WHEN o.live_batches - r.n <= 0
                                      THEN coalesce(o.dead_since_ms, krabka_now_ms())
                                      ELSE o.dead_since_ms END
             FROM unnest($1::int8[], $2::int8[]) AS r(object_id, n)
             WHERE o.object_id = r.object_id",
        )
        .await?;
    tx.execute(&update, &[&ids, &counts]).await.map(drop)
}

/// Reads the offsets and sizes of `partitions` (in order; `None` for an
/// unknown one).
async fn read_partitions(
    tx: &Transaction<'_>,
    partitions: &[DisklessPartition],
) -> Result<Vec<Option<PartitionRow>>, tokio_postgres::Error> {
    let (topics, indexes) = split(partitions);
    let statement = tx
        .prepare_cached(
            "SELECT r.i, p.log_start_offset, p.high_watermark, p.byte_size, p.consolidated_to
             FROM unnest($1::uuid[], $2::int4[]) WITH ORDINALITY AS r(topic_id, partition, i)
             LEFT JOIN diskless_partitions p
                    ON p.topic_id = r.topic_id AND p.partition = r.partition
             ORDER BY r.i",
        )
        .await?;
    let rows = tx.query(&statement, &[&topics, &indexes]).await?;
    Ok(rows
        .iter()
        .map(|row| PartitionRow::from_row(row, 1))
        .collect())
}

/// Decodes `object_key, position, size, base_offset, last_offset,
/// max_timestamp` starting at column `at`.
fn found_batch(row: &Row, at: usize) -> FoundBatch {
    FoundBatch {
        object: ObjectKey(row.get(at)),
        position: u64::try_from(row.get::<_, i64>(at + 1)).unwrap_or(0),
        size: u32::try_from(row.get::<_, i64>(at + 2)).unwrap_or(u32::MAX),
        base_offset: row.get(at + 3),
        last_offset: row.get(at + 4),
        max_timestamp: row.get(at + 5),
    }
}

/// A batch of a commit, placed.
struct NewBatch {
    partition: DisklessPartition,
    base_offset: i64,
    last_offset: i64,
    position: i64,
    size: i64,
    max_timestamp: i64,
}

/// The body of [`BatchCoordinator::commit_object`], in one transaction.
async fn commit_object(
    conn: &mut Object,
    commit: &ObjectCommit,
) -> Result<Vec<Result<Committed, BatchError>>, OpError> {
    let tx = conn.transaction().await?;
    let touched: Vec<DisklessPartition> = commit
        .batches
        .iter()
        .map(|b| b.partition)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut partitions = lock_partitions(&tx, &touched).await?;
    let mut producers = producers::load(&tx, commit, &partitions).await?;
    let mut changed_producers = BTreeSet::new();
    let mut answers = Vec::with_capacity(commit.batches.len());
    let mut placed = Vec::with_capacity(commit.batches.len());
    for batch in &commit.batches {
        let Some(p) = partitions.get_mut(&batch.partition) else {
            answers.push(Err(BatchError::UnknownTopicOrPartition));
            continue;
        };
        if let Some(producer) = &batch.producer {
            let key = (batch.partition, producer.producer_id);
            match producers.entry(key).or_default().check(producer) {
                ProducerCheck::Duplicate(base_offset) => {
                    answers.push(Ok(Committed {
                        base_offset,
                        log_start_offset: p.log_start,
                        duplicate: true,
                    }));
                    continue;
                }
                ProducerCheck::Refused(e) => {
                    answers.push(Err(e));
                    continue;
                }
                ProducerCheck::Accept => {}
            }
        }
        let offset_count = i64::from(batch.offset_count.max(1));
        let base_offset = p.high_watermark;
        p.high_watermark += offset_count;
        p.bytes += i64::from(batch.size);
        placed.push(NewBatch {
            partition: batch.partition,
            base_offset,
            last_offset: base_offset + offset_count - 1,
            position: i64::try_from(batch.position)
                .map_err(|_| too_large("batch position", batch.position))?,
            size: i64::from(batch.size),
            max_timestamp: batch.max_timestamp,
        });
        if let Some(producer) = &batch.producer {
            let key = (batch.partition, producer.producer_id);
            producers
                .entry(key)
                .or_default()
                .record(producer, base_offset, batch.max_timestamp);
            changed_producers.insert(key);
        }
        answers.push(Ok(Committed {
            base_offset,
            log_start_offset: p.log_start,
            duplicate: false,
        }));
    }

    let size = i64::try_from(commit.size).map_err(|_| too_large("object size", commit.size))?;
    let live = i64::try_from(placed.len()).unwrap_or(i64::MAX);
    let insert_object = tx
        .prepare_cached(
            "INSERT INTO diskless_objects
                 (object_key, uploader, size, committed_ms, live_batches, dead_since_ms)
             SELECT $1, $2, $3, now.ms, $4::int8, CASE WHEN $4::int8 = 0 THEN now.ms END
             FROM (SELECT krabka_now_ms() AS ms) now
             ON CONFLICT (object_key) DO NOTHING
             RETURNING object_id, committed_ms",
        )
        .await?;
    let Some(object) = tx
        .query_opt(
            &insert_object,
            &[&commit.key.0, &commit.uploader.0, &size, &live],
        )
        .await?
    else {
        // Dropping the transaction rolls it back: nothing of it happened.
        return Err(OpError::Store(ClusterError::Invalid(format!(
            "diskless object {} was already committed or abandoned",
            commit.key
        ))));
    };
    let (object_id, committed_ms): (i64, i64) = (object.get(0), object.get(1));
    if !placed.is_empty() {
        let insert_batches = tx
            .prepare_cached(
                "INSERT INTO diskless_batches (topic_id, partition, base_offset, last_offset,
                     object_id, position, size, max_timestamp, append_time_ms)
                 SELECT u.topic_id, u.partition, u.base_offset, u.last_offset, $1, u.position,
                        u.size, u.max_timestamp, $2
                 FROM unnest($3::uuid[], $4::int4[], $5::int8[], $6::int8[], $7::int8[],
                             $8::int8[], $9::int8[])
                      AS u(topic_id, partition, base_offset, last_offset, position, size,
                           max_timestamp)",
            )
            .await?;
        let topics: Vec<Uuid> = placed.iter().map(|b| b.partition.topic_id).collect();
        let indexes: Vec<i32> = placed.iter().map(|b| b.partition.partition).collect();
        let bases: Vec<i64> = placed.iter().map(|b| b.base_offset).collect();
        let lasts: Vec<i64> = placed.iter().map(|b| b.last_offset).collect();
        let positions: Vec<i64> = placed.iter().map(|b| b.position).collect();
        let sizes: Vec<i64> = placed.iter().map(|b| b.size).collect();
        let timestamps: Vec<i64> = placed.iter().map(|b| b.max_timestamp).collect();
        tx.execute(
            &insert_batches,
            &[
                &object_id,
                &committed_ms,
                &topics,
                &indexes,
                &bases,
                &lasts,
                &positions,
                &sizes,
                &timestamps,
            ],
        )
        .await?;
        let appended: BTreeSet<DisklessPartition> = placed.iter().map(|b| b.partition).collect();
        partitions.retain(|p, _| appended.contains(p));
        store_partitions(&tx, &partitions).await?;
        producers::store(&tx, &producers, &changed_producers).await?;
        // Delivered to the listening brokers only if this commits.
        let notify = tx.prepare_cached("SELECT pg_notify($1, $2)").await?;
        let touched: Vec<DisklessPartition> = appended.into_iter().collect();
        tx.execute(
            &notify,
            &[
                &crate::notify::DISKLESS_COMMITS,
                &crate::notify::payload(&touched),
            ],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(answers)
}

impl PgBatchCoordinator {
    /// A coordinator on `db`, whose schema must be migrated (as
    /// [`Cluster::connect`] does; [`Cluster::batch_coordinator`] is the
    /// usual way to get one).
    #[must_use]
    pub fn new(db: Database) -> Self {
        Self { db }
    }
}

/// Starts a read-only snapshot.
async fn snapshot(conn: &mut Object) -> Result<Transaction<'_>, tokio_postgres::Error> {
    conn.build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
}

#[async_trait]
impl BatchCoordinator for PgBatchCoordinator {
    async fn create_partitions(
        &self,
        partitions: &[DisklessPartition],
    ) -> Result<(), RemoteStorageError> {
        // Sorted, so two brokers creating the same partitions insert them
        // in the same order.
        let sorted: Vec<_> = partitions
            .iter()
            .copied()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let (topics, indexes) = split(&sorted);
        transact!(self, "diskless_create_partitions", |conn| async {
            conn.execute(
                "INSERT INTO diskless_partitions (topic_id, partition)
                 SELECT * FROM unnest($1::uuid[], $2::int4[])
                 ON CONFLICT DO NOTHING",
                &[&topics, &indexes],
            )
            .await?;
            Ok(())
        })
    }

    async fn commit_object(
        &self,
        commit: &ObjectCommit,
    ) -> Result<Vec<Result<Committed, BatchError>>, RemoteStorageError> {
        transact!(self, "diskless_commit", |conn| commit_object(conn, commit))
    }

    async fn find_batches(
        &self,
        requests: &[FindBatches],
    ) -> Result<Vec<Result<FoundBatches, PartitionError>>, RemoteStorageError> {
        let partitions: Vec<_> = requests.iter().map(|r| r.partition).collect();
        transact!(self, "diskless_find_batches", |conn| async {
            let tx = snapshot(conn).await?;
            let rows = read_partitions(&tx, &partitions).await?;
            let mut answers: Vec<Result<FoundBatches, PartitionError>> = Vec::new();
            let mut wanted: Vec<usize> = Vec::new();
            for (i, (request, row)) in requests.iter().zip(&rows).enumerate() {
                answers.push(match row {
                    None => Err(PartitionError::UnknownTopicOrPartition),
                    Some(p)
                        if request.offset < p.log_start || request.offset > p.high_watermark =>
                    {
                        Err(p.out_of_range(request.offset))
                    }
                    Some(p) => {
                        // Below the batch start the tiered segments hold it.
                        if request.offset < p.high_watermark && request.offset >= p.batch_start() {
                            wanted.push(i);
                        }
                        Ok(FoundBatches {
                            batches: Vec::new(),
                            info: p.info(),
                        })
                    }
                });
            }
            if !wanted.is_empty() {
                let statement = tx
                    .prepare_cached(
                        "SELECT r.i, o.object_key, b.position, b.size, b.base_offset,
                                b.last_offset, b.max_timestamp
                         FROM unnest($1::int8[], $2::uuid[], $3::int4[], $4::int8[], $5::int8[],
                                     $6::int8[])
                              AS r(i, topic_id, partition, fetch_offset, max_bytes, max_rows)
                         CROSS JOIN LATERAL (
                             SELECT x.*, sum(x.size) OVER w AS running, row_number() OVER w AS n
                             FROM (SELECT d.* FROM diskless_batches d
                                   WHERE d.topic_id = r.topic_id AND d.partition = r.partition
                                     AND d.last_offset >= r.fetch_offset
                                   ORDER BY d.last_offset LIMIT r.max_rows) x
                             WINDOW w AS (ORDER BY x.last_offset ROWS UNBOUNDED PRECEDING)
                         ) b
                         JOIN diskless_objects o ON o.object_id = b.object_id
                         WHERE b.n = 1 OR b.running <= r.max_bytes
                         ORDER BY r.i, b.last_offset",
                    )
                    .await?;
                // Rows each request may need: its budget holds at most
                // this many batches. Most batches are far larger than the
                // smallest, so a first round reads a few rows per partition,
                // and only a partition that filled them all is read again
                // with its whole allowance.
                let allowance = |i: usize| {
                    (i64::from(requests[i].max_bytes) / MIN_BATCH_BYTES + 1).min(MAX_FOUND_BATCHES)
                };
                let mut round: Vec<(usize, i64)> = wanted
                    .iter()
                    .map(|&i| (i, allowance(i).min(FIRST_FOUND_BATCHES)))
                    .collect();
                while !round.is_empty() {
                    let index: Vec<i64> = round
                        .iter()
                        .map(|&(i, _)| i64::try_from(i).unwrap_or(i64::MAX))
                        .collect();
                    let topics: Vec<Uuid> = round
                        .iter()
                        .map(|&(i, _)| requests[i].partition.topic_id)
                        .collect();
                    let parts: Vec<i32> = round
                        .iter()
                        .map(|&(i, _)| requests[i].partition.partition)
                        .collect();
                    let offsets: Vec<i64> =
                        round.iter().map(|&(i, _)| requests[i].offset).collect();
                    let budgets: Vec<i64> = round
                        .iter()
                        .map(|&(i, _)| i64::from(requests[i].max_bytes))
                        .collect();
                    let max_rows: Vec<i64> = round.iter().map(|&(_, rows)| rows).collect();
                    let rows = tx
                        .query(
                            &statement,
                            &[&index, &topics, &parts, &offsets, &budgets, &max_rows],
                        )
                        .await?;
                    let mut read = vec![0i64; requests.len()];
                    for row in rows {
                        let i = usize::try_from(row.get::<_, i64>(0)).unwrap_or(usize::MAX);
                        if let Some(Ok(found)) = answers.get_mut(i) {
                            found.batches.push(found_batch(&row, 1));
                            read[i] += 1;
                        }
                    }
                    // Every row read and within budget: more may fit.
                    round.retain(|&(i, rows)| read[i] == rows && allowance(i) > rows);
                    for (i, rows) in &mut round {
                        *rows = allowance(*i);
                        if let Some(Ok(found)) = answers.get_mut(*i) {
                            found.batches.clear();
                        }
                    }
                }
            }
            tx.commit().await?;
            Ok(answers)
        })
    }

    async fn list_offsets(
        &self,
        requests: &[ListOffsetsQuery],
    ) -> Result<Vec<Result<OffsetAnswer, PartitionError>>, RemoteStorageError> {
        let partitions: Vec<_> = requests.iter().map(|r| r.partition).collect();
        transact!(self, "diskless_list_offsets", |conn| async {
            let tx = snapshot(conn).await?;
            let rows = read_partitions(&tx, &partitions).await?;
            let max_timestamp = tx
                .prepare_cached(
                    "SELECT o.object_key, b.position, b.size, b.base_offset, b.last_offset,
                            b.max_timestamp
                     FROM diskless_batches b JOIN diskless_objects o USING (object_id)
                     WHERE b.topic_id = $1 AND b.partition = $2 AND b.last_offset >= $3
                     ORDER BY b.max_timestamp DESC, b.last_offset
                     LIMIT 1",
                )
                .await?;
            let by_timestamp = tx
                .prepare_cached(
                    "SELECT o.object_key, b.position, b.size, b.base_offset, b.last_offset,
                            b.max_timestamp
                     FROM diskless_batches b JOIN diskless_objects o USING (object_id)
                     WHERE b.topic_id = $1 AND b.partition = $2 AND b.last_offset >= $3
                       AND b.max_timestamp >= $4
                     ORDER BY b.last_offset
                     LIMIT 1",
                )
                .await?;
            let mut answers = Vec::with_capacity(requests.len());
            for (request, row) in requests.iter().zip(rows) {
                let Some(p) = row else {
                    answers.push(Err(PartitionError::UnknownTopicOrPartition));
                    continue;
                };
                let (topic, index) = (request.partition.topic_id, request.partition.partition);
                let batch = match request.query {
                    OffsetQuery::Earliest => {
                        answers.push(Ok(OffsetAnswer::Offset(p.log_start)));
                        continue;
                    }
                    OffsetQuery::Latest => {
                        answers.push(Ok(OffsetAnswer::Offset(p.high_watermark)));
                        continue;
                    }
                    OffsetQuery::MaxTimestamp => {
                        tx.query_opt(&max_timestamp, &[&topic, &index, &p.log_start])
                            .await?
                    }
                    OffsetQuery::Timestamp(ts) => {
                        tx.query_opt(&by_timestamp, &[&topic, &index, &p.log_start, &ts])
                            .await?
                    }
                };
                answers.push(Ok(batch.map_or(OffsetAnswer::NotFound, |row| {
                    OffsetAnswer::Batch(found_batch(&row, 0))
                })));
            }
            tx.commit().await?;
            Ok(answers)
        })
    }

    async fn log_info(
        &self,
        partitions: &[DisklessPartition],
    ) -> Result<Vec<Result<LogInfo, PartitionError>>, RemoteStorageError> {
        transact!(self, "diskless_log_info", |conn| async {
            let tx = snapshot(conn).await?;
            let rows = read_partitions(&tx, partitions).await?;
            tx.commit().await?;
            Ok(rows
                .into_iter()
                .map(|row| {
                    row.map(|p| p.info())
                        .ok_or(PartitionError::UnknownTopicOrPartition)
                })
                .collect())
        })
    }

    async fn delete_records(
        &self,
        requests: &[DeleteRecords],
    ) -> Result<Vec<Result<i64, PartitionError>>, RemoteStorageError> {
        let touched: Vec<DisklessPartition> = requests
            .iter()
            .map(|r| r.partition)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        transact!(self, "diskless_delete_records", |conn| async {
            let tx = conn.transaction().await?;
            let mut partitions = lock_partitions(&tx, &touched).await?;
            let mut released = Released::default();
            let mut answers = Vec::with_capacity(requests.len());
            for request in requests {
                let Some(p) = partitions.get_mut(&request.partition) else {
                    answers.push(Err(PartitionError::UnknownTopicOrPartition));
                    continue;
                };
                let target = if request.offset == -1 {
                    p.high_watermark
                } else {
                    request.offset
                };
                if target < 0 || target > p.high_watermark {
                    answers.push(Err(p.out_of_range(request.offset)));
                    continue;
                }
                if target > p.log_start {
                    let removed =
                        remove_batches(&tx, request.partition, target, &mut released).await?;
                    p.bytes -= removed.bytes;
                    p.log_start = target;
                }
                answers.push(Ok(p.log_start));
            }
            release(&tx, &released).await?;
            store_partitions(&tx, &partitions).await?;
            tx.commit().await?;
            Ok(answers)
        })
    }

    async fn consolidate(
        &self,
        requests: &[Consolidate],
    ) -> Result<Vec<Result<Consolidated, PartitionError>>, RemoteStorageError> {
        let touched: Vec<DisklessPartition> = requests
            .iter()
            .map(|r| r.partition)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        transact!(self, "diskless_consolidate", |conn| async {
            let tx = conn.transaction().await?;
            let mut partitions = lock_partitions(&tx, &touched).await?;
            let starts_a_batch = tx
                .prepare_cached(
                    "SELECT base_offset FROM diskless_batches
                     WHERE topic_id = $1 AND partition = $2 AND last_offset >= $3
                     ORDER BY last_offset LIMIT 1",
                )
                .await?;
            let mut released = Released::default();
            let mut answers = Vec::with_capacity(requests.len());
            for request in requests {
                let Some(p) = partitions.get_mut(&request.partition) else {
                    answers.push(Err(PartitionError::UnknownTopicOrPartition));
                    continue;
                };
                let start = p.batch_start();
                let boundary = request.to == p.high_watermark
                    || (request.to < p.high_watermark
                        && tx
                            .query_opt(
                                &starts_a_batch,
                                &[
                                    &request.partition.topic_id,
                                    &request.partition.partition,
                                    &request.to,
                                ],
                            )
                            .await?
                            .is_some_and(|row| row.get::<_, i64>(0) == request.to));
                if start != request.from || request.to <= start || !boundary {
                    answers.push(Ok(Consolidated::Refused {
                        batch_start_offset: start,
                    }));
                    continue;
                }
                let removed =
                    remove_batches(&tx, request.partition, request.to, &mut released).await?;
                p.bytes -= removed.bytes;
                p.consolidated_to = request.to;
                answers.push(Ok(Consolidated::Applied));
            }
            release(&tx, &released).await?;
            store_partitions(&tx, &partitions).await?;
            tx.commit().await?;
            Ok(answers)
        })
    }

    async fn enforce_retention(
        &self,
        policies: &[RetentionPolicy],
        now_ms: i64,
    ) -> Result<Vec<Result<RetentionOutcome, PartitionError>>, RemoteStorageError> {
        let touched: Vec<DisklessPartition> = policies
            .iter()
            .map(|r| r.partition)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        transact!(self, "diskless_retention", |conn| async {
            let tx = conn.transaction().await?;
            let mut partitions = lock_partitions(&tx, &touched).await?;
            // The batches from the start of the partition that are too old
            // or that the size limit does without, up to the first that is
            // neither (as Kafka deletes whole segments from the start).
            let statement = tx
                .prepare_cached(
                    "WITH front AS (
                         SELECT last_offset, max_timestamp,
                                sum(size) OVER (ORDER BY last_offset ROWS UNBOUNDED PRECEDING)
                                    AS running
                         FROM (SELECT last_offset, max_timestamp, size FROM diskless_batches
                               WHERE topic_id = $1 AND partition = $2
                               ORDER BY last_offset LIMIT $7) f),
                     keep AS (
                         SELECT coalesce(
                                    min(last_offset) FILTER (WHERE NOT (
                                        ($3 AND max_timestamp < $4)
                                        OR ($5::bool AND $6::int8 - running >= $8::int8))),
                                    max(last_offset) + 1) AS from_offset
                         FROM front),
                     gone AS (
                         DELETE FROM diskless_batches d USING keep
                         WHERE d.topic_id = $1 AND d.partition = $2
                           AND d.last_offset < keep.from_offset
                         RETURNING d.object_id, d.size, d.last_offset)
                     SELECT object_id, count(*), sum(size)::int8, max(last_offset)
                     FROM gone GROUP BY object_id",
                )
                .await?;
            let mut released = Released::default();
            let mut answers = Vec::with_capacity(policies.len());
            for policy in policies {
                let Some(p) = partitions.get_mut(&policy.partition) else {
                    answers.push(Err(PartitionError::UnknownTopicOrPartition));
                    continue;
                };
                let by_time = policy.retention_ms >= 0;
                let too_old_before = now_ms.saturating_sub(policy.retention_ms.max(0));
                let by_size = policy.retention_bytes >= 0;
                let rows = tx
                    .query(
                        &statement,
                        &[
                            &policy.partition.topic_id,
                            &policy.partition.partition,
                            &by_time,
                            &too_old_before,
                            &by_size,
                            &p.bytes,
                            &MAX_RETENTION_BATCHES,
                            &policy.retention_bytes,
                        ],
                    )
                    .await?;
                let removed = count_removed(&rows, &mut released);
                p.bytes -= removed.bytes;
                if let Some(last) = removed.last_offset {
                    p.log_start = p.log_start.max(last + 1);
                }
                answers.push(Ok(RetentionOutcome {
                    batches_deleted: u64::try_from(removed.batches).unwrap_or(0),
                    bytes_deleted: u64::try_from(removed.bytes).unwrap_or(0),
                    log_start_offset: p.log_start,
                }));
            }
            release(&tx, &released).await?;
            store_partitions(&tx, &partitions).await?;
            tx.commit().await?;
            Ok(answers)
        })
    }

    async fn delete_topics(&self, topic_ids: &[Uuid]) -> Result<(), RemoteStorageError> {
        transact!(self, "diskless_delete_topics", |conn| async {
            let tx = conn.transaction().await?;
            lock_topics(&tx, topic_ids).await?;
            let rows = tx
                .query(
                    "WITH gone AS (
                         DELETE FROM diskless_batches WHERE topic_id = ANY($1::uuid[])
                         RETURNING object_id, size, last_offset)
                     SELECT object_id, count(*), sum(size)::int8, max(last_offset)
                     FROM gone GROUP BY object_id",
                    &[&topic_ids],
                )
                .await?;
            let mut released = Released::default();
            count_removed(&rows, &mut released);
            release(&tx, &released).await?;
            tx.execute(
                "DELETE FROM diskless_producer_batches WHERE topic_id = ANY($1::uuid[])",
                &[&topic_ids],
            )
            .await?;
            tx.execute(
                "DELETE FROM diskless_partitions WHERE topic_id = ANY($1::uuid[])",
                &[&topic_ids],
            )
            .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    async fn abandon_object(
        &self,
        key: &ObjectKey,
        uploader: BrokerId,
        size: u64,
    ) -> Result<bool, RemoteStorageError> {
        // The key is unique: a commit of the object that went through (or
        // is still in flight: the insert waits for it) keeps its row, and
        // once this row is in, that commit's insert finds it and rolls back.
        transact!(self, "diskless_abandon_object", |conn| async {
            let size = i64::try_from(size).map_err(|_| too_large("object size", size))?;
            let recorded = conn
                .query_opt(
                    "INSERT INTO diskless_objects
                         (object_key, uploader, size, committed_ms, live_batches, dead_since_ms)
                     SELECT $1, $2, $3, now.ms, 0, now.ms
                     FROM (SELECT krabka_now_ms() AS ms) now
                     ON CONFLICT (object_key) DO NOTHING
                     RETURNING object_id",
                    &[&key.0, &uploader.0, &size],
                )
                .await?;
            Ok(recorded.is_some())
        })
    }

    async fn objects_to_delete(
        &self,
        dead_before_ms: i64,
    ) -> Result<Vec<ObjectKey>, RemoteStorageError> {
        transact!(self, "diskless_objects_to_delete", |conn| async {
            let rows = conn
                .query(
                    "SELECT object_key FROM diskless_objects
                     WHERE dead_since_ms <= $1
                     ORDER BY dead_since_ms, object_id
                     LIMIT $2",
                    &[&dead_before_ms, &MAX_DEAD_OBJECTS],
                )
                .await?;
            Ok(rows.iter().map(|row| ObjectKey(row.get(0))).collect())
        })
    }

    async fn delete_objects(&self, keys: &[ObjectKey]) -> Result<(), RemoteStorageError> {
        let keys: Vec<&str> = keys.iter().map(|k| k.0.as_str()).collect();
        transact!(self, "diskless_delete_objects", |conn| async {
            conn.execute(
                "DELETE FROM diskless_objects
                 WHERE object_key = ANY($1::text[]) AND dead_since_ms IS NOT NULL",
                &[&keys],
            )
            .await?;
            Ok(())
        })
    }

    async fn unknown_objects(
        &self,
        keys: &[ObjectKey],
    ) -> Result<Vec<ObjectKey>, RemoteStorageError> {
        let wanted: Vec<&str> = keys.iter().map(|k| k.0.as_str()).collect();
        // A commit still in flight is not visible here: the sweep's
        // abandon then waits for it on the unique key.
        let known: std::collections::HashSet<String> = transact!(
            self,
            "diskless_unknown_objects",
            |conn| async {
                let rows = conn
                    .query(
                        "SELECT object_key FROM diskless_objects WHERE object_key = ANY($1::text[])",
                        &[&wanted],
                    )
                    .await?;
                Ok(rows.iter().map(|row| row.get(0)).collect())
            }
        )?;
        Ok(keys
            .iter()
            .filter(|k| !known.contains(&k.0))
            .cloned()
            .collect())
    }

    async fn describe_producers(
        &self,
        partitions: &[DisklessPartition],
    ) -> Result<Vec<Result<Vec<ProducerInfo>, PartitionError>>, RemoteStorageError> {
        transact!(self, "diskless_describe_producers", |conn| async {
            let tx = snapshot(conn).await?;
            let rows = read_partitions(&tx, partitions).await?;
            let described = producers::describe(&tx, partitions).await?;
            tx.commit().await?;
            Ok(rows
                .into_iter()
                .zip(described)
                .map(|(row, producers)| {
                    row.map(|_| producers)
                        .ok_or(PartitionError::UnknownTopicOrPartition)
                })
                .collect())
        })
    }

    async fn expire_producers(&self, idle_before_ms: i64) -> Result<u64, RemoteStorageError> {
        let mut forgotten = 0;
        // Each transaction locks a bounded set of partitions; a call goes
        // on until one finds nothing more (bounded, should producers keep
        // turning idle faster than it forgets them).
        for _ in 0..MAX_EXPIRY_ROUNDS {
            let (n, more) = transact!(self, "diskless_expire_producers", |conn| async {
                let tx = conn.transaction().await?;
                let done = producers::expire_some(&tx, idle_before_ms).await?;
                tx.commit().await?;
                Ok(done)
            })?;
            forgotten += n;
            if !more {
                break;
            }
        }
        Ok(forgotten)
    }
}
