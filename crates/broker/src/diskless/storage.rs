//! [`DisklessStorage`]: a diskless partition behind the partition storage
//! seam.
//!
//! Nothing of a diskless partition is on this broker's disk. Produce
//! validates each batch as a classic log does (framing, CRC, codec,
//! `max.message.bytes`, timestamps, `compression.type`), stamps
//! LogAppendTime, and hands it to the broker's shared object writer; the
//! producer is answered once the object is uploaded and the batch
//! coordinator has committed it, with the offsets the coordinator assigned
//! (or, for an idempotent producer's retry, the original ones). A
//! partition's appends pass through one queue and one task, so the batches
//! of pipelined requests enter the shared object in the order they were
//! sent — which is what keeps an idempotent producer's sequences in order.
//!
//! Reads always ask the coordinator (a [`Read::Later`]), so the high
//! watermark a fetch sees is the coordinator's; a commit wakes the fetches
//! parked on the partitions it touched. Offsets below the batch start were
//! consolidated into tiered segments (`super::consolidate`): those reads,
//! and timestamp lookups reaching them, go to the remote log manager. The offsets kept here are only a
//! cache for the callers of [`PartitionStorage::offsets`] (error answers,
//! sizes), refreshed by every read, append and retention pass.
//!
//! Transactions are not carried to diskless topics: a transactional batch
//! is refused with `INVALID_TXN_STATE`, as the issue asks.

use {
    super::DisklessRuntime,
    crate::partition::{
        Appended, Isolation, LEADER_EPOCH, OffsetQuery, Offsets, PartitionStorage, Read,
        ReadRequest, ReadResult, StorageError,
    },
    crate::remote::read::TimestampQuery,
    bytes::Bytes,
    krabka_ids::{ProducerEpoch, ProducerId},
    krabka_log::{
        AppendInfo, LogConfig, LogError, ProducerSummary, TimestampOffset, TimestampType, batch,
    },
    krabka_remote_storage::diskless::{
        BatchError, CommitBatch, DeleteRecords, DisklessPartition, FindBatches, FoundBatch,
        ListOffsetsQuery, LogInfo, OffsetAnswer, OffsetQuery as CoordinatorQuery, PartitionError,
        ProducerBatch, ProducerInfo, RetentionPolicy, WriteError, read_batches,
    },
    std::sync::{
        Arc, Mutex, PoisonError, RwLock, Weak,
        atomic::{AtomicU64, Ordering},
    },
    tokio::sync::{Notify, mpsc, oneshot},
    uuid::Uuid,
};

/// One queued produce.
struct Job {
    records: Bytes,
    done: oneshot::Sender<Result<AppendInfo, LogError>>,
    /// Dropped once the writer holds the batches in order.
    accepted: Option<oneshot::Sender<()>>,
}

/// One partition of a diskless topic.
pub struct DisklessStorage {
    /// Topic name.
    pub topic: String,
    /// Topic id.
    pub topic_id: Uuid,
    /// Partition index.
    pub index: i32,
    id: DisklessPartition,
    runtime: Arc<DisklessRuntime>,
    config: RwLock<LogConfig>,
    offsets: Mutex<Offsets>,
    size: AtomicU64,
    changed: Arc<Notify>,
    queue: mpsc::UnboundedSender<Job>,
    /// This partition, for the futures of its reads.
    me: Weak<DisklessStorage>,
}

impl std::fmt::Debug for DisklessStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{} (diskless)", self.topic, self.index)
    }
}

fn offsets_of(info: &LogInfo) -> Offsets {
    Offsets {
        log_start: info.log_start_offset,
        // Nothing is local: KIP-405's "earliest local" is the first offset
        // not consolidated into the remote tier.
        local_log_start: info.batch_start_offset,
        high_watermark: info.high_watermark,
        last_stable: info.high_watermark,
        log_end: info.high_watermark,
    }
}

fn unavailable(e: impl std::fmt::Display) -> StorageError {
    StorageError::Unavailable(e.to_string())
}

fn partition_error(e: &PartitionError) -> StorageError {
    match e {
        PartitionError::OffsetOutOfRange {
            offset,
            log_start_offset,
            high_watermark,
        } => StorageError::OffsetOutOfRange {
            offset: *offset,
            log_start: *log_start_offset,
            log_end: *high_watermark,
        },
        PartitionError::UnknownTopicOrPartition => {
            unavailable("the diskless partition is not known to the batch coordinator")
        }
    }
}

/// The first answer of a one-question coordinator call.
fn single<T, E: std::fmt::Display>(answers: Result<Vec<T>, E>) -> Result<T, StorageError> {
    answers
        .map_err(unavailable)?
        .into_iter()
        .next()
        .ok_or_else(|| unavailable("the batch coordinator gave no answer"))
}

impl DisklessStorage {
    /// A diskless partition already created in the coordinator, whose
    /// offsets are `info`. Must be called within a tokio runtime (its
    /// append task starts here).
    #[must_use]
    pub fn new(
        topic: &str,
        topic_id: Uuid,
        index: i32,
        config: LogConfig,
        info: LogInfo,
        runtime: &Arc<DisklessRuntime>,
    ) -> Arc<Self> {
        let (queue, jobs) = mpsc::unbounded_channel();
        let changed = Arc::new(Notify::new());
        let id = DisklessPartition::new(topic_id, index);
        runtime.watch(id, &changed);
        let storage = Arc::new_cyclic(|me| Self {
            topic: topic.to_owned(),
            topic_id,
            index,
            id,
            runtime: Arc::clone(runtime),
            config: RwLock::new(config),
            offsets: Mutex::new(offsets_of(&info)),
            size: AtomicU64::new(info.byte_size),
            changed,
            queue,
            me: me.clone(),
        });
        tokio::spawn(run_queue(Arc::downgrade(&storage), jobs));
        storage
    }

    /// The partition's id at the coordinator.
    #[must_use]
    pub fn id(&self) -> DisklessPartition {
        self.id
    }

    /// The partition's id in the remote tier, which holds its
    /// consolidated segments.
    #[must_use]
    pub fn tier_id(&self) -> krabka_remote_storage::TopicIdPartition {
        krabka_remote_storage::TopicIdPartition::new(self.topic_id, self.topic.clone(), self.index)
    }

    /// The topic's configuration, as the partition applies it.
    pub(crate) fn config(&self) -> LogConfig {
        self.config
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Applies a topic configuration change.
    pub fn update_config(&self, config: LogConfig) {
        *self.config.write().unwrap_or_else(PoisonError::into_inner) = config;
    }

    /// The retention the topic configures, for the coordinator.
    #[must_use]
    pub fn retention_policy(&self) -> RetentionPolicy {
        let config = self.config();
        let limit = |v: Option<u64>| v.and_then(|v| i64::try_from(v).ok()).unwrap_or(-1);
        RetentionPolicy {
            partition: self.id,
            retention_ms: limit(config.retention_ms),
            retention_bytes: limit(config.retention_bytes),
        }
    }

    /// Takes in what the coordinator said of the partition's offsets: they
    /// only move forward (answers may arrive out of order).
    fn learn(&self, info: &LogInfo) {
        let mut offsets = self.offsets.lock().unwrap_or_else(PoisonError::into_inner);
        let fresh = offsets_of(info);
        offsets.log_start = offsets.log_start.max(fresh.log_start);
        offsets.local_log_start = offsets.local_log_start.max(fresh.local_log_start);
        offsets.high_watermark = offsets.high_watermark.max(fresh.high_watermark);
        offsets.last_stable = offsets.high_watermark;
        offsets.log_end = offsets.high_watermark;
        self.size.store(info.byte_size, Ordering::Relaxed);
    }

    /// Asks the coordinator for the partition's offsets now.
    pub async fn refresh(&self) {
        match single(self.runtime.coordinator.log_info(&[self.id]).await) {
            Ok(Ok(info)) => self.learn(&info),
            Ok(Err(e)) => {
                tracing::debug!(partition = ?self, error = %e, "diskless offsets unknown")
            }
            Err(e) => {
                tracing::debug!(partition = ?self, error = %e, "diskless offsets not refreshed")
            }
        }
    }

    /// Asks the coordinator, in one call, for the offsets and sizes of
    /// `partitions` (all on one broker's runtime) and takes them in: what
    /// DescribeLogDirs and the metrics report is then the coordinator's
    /// word of the moment, commits made through other brokers included.
    /// A coordinator that cannot answer leaves the last known values.
    pub async fn refresh_all(partitions: &[Arc<Self>]) {
        let Some(first) = partitions.first() else {
            return;
        };
        let ids: Vec<DisklessPartition> = partitions.iter().map(|p| p.id).collect();
        match first.runtime.coordinator.log_info(&ids).await {
            Ok(infos) => {
                for (p, info) in partitions.iter().zip(infos) {
                    match info {
                        Ok(info) => p.learn(&info),
                        Err(e) => {
                            tracing::debug!(partition = ?p, error = %e, "diskless offsets unknown");
                        }
                    }
                }
            }
            Err(e) => {
                tracing::warn!(partitions = ids.len(), error = %e, "diskless sizes not refreshed");
            }
        }
    }

    /// [`PartitionStorage::append`], and a second receiver that resolves
    /// (with an error: its sender is dropped) as soon as the batches are in
    /// the object writer, long before their commit: from then on they are
    /// bounded by the writer's upload queue, not by the connection that
    /// sent them.
    pub fn append_accepting(&self, records: Bytes) -> (Appended, oneshot::Receiver<()>) {
        let (done, answer) = oneshot::channel();
        let (accepted, taken) = oneshot::channel();
        let job = Job {
            records,
            done,
            accepted: Some(accepted),
        };
        if let Err(mpsc::error::SendError(job)) = self.queue.send(job) {
            let _ = job.done.send(Err(LogError::Closed {
                dir: format!("diskless partition {}", self.id).into(),
            }));
        }
        (answer, taken)
    }

    /// Validates a client's batches and hands them to the writer in order;
    /// the answer is sent once every one of them is committed.
    async fn append_now(self: Arc<Self>, mut job: Job) {
        let name = format!("{}-{}", self.topic, self.index);
        let prepared = match prepare(
            &job.records,
            &self.config(),
            &name,
            super::now_ms(),
            self.id,
        ) {
            Ok(p) => p,
            Err(e) => {
                let _ = job.done.send(Err(e));
                return;
            }
        };
        let Some(writer) = self.runtime.writer() else {
            let _ = job.done.send(Err(LogError::Closed { dir: name.into() }));
            return;
        };
        let mut answers = Vec::with_capacity(prepared.batches.len());
        let log_append_time = prepared.log_append_time;
        for (commit, bytes) in prepared.batches {
            let producer = commit.producer;
            let count = commit.offset_count;
            let appended = writer
                .append_patched(commit, &bytes, |b| patch(b, log_append_time))
                .await;
            answers.push((appended, producer, count));
        }
        drop(writer);
        // The writer holds them now (its own bound applies): the request
        // no longer needs its connection's read-ahead.
        drop(job.accepted.take());
        tokio::spawn(async move {
            let answer = self
                .collect(answers, prepared.log_append_time, prepared.record_count)
                .await;
            let _ = job.done.send(answer);
        });
    }

    /// Waits for the commits of one request's batches and builds its answer.
    async fn collect(
        &self,
        answers: Vec<(
            krabka_remote_storage::diskless::Appended,
            Option<ProducerBatch>,
            u32,
        )>,
        log_append_time: Option<i64>,
        record_count: u32,
    ) -> Result<AppendInfo, LogError> {
        let mut first = None;
        let mut last = -1;
        let mut log_start = 0;
        let mut duplicate = true;
        for (answer, producer, count) in answers {
            let committed = match answer.await {
                Ok(Ok(c)) => c,
                Ok(Err(WriteError::Refused(e))) => return Err(refusal(&e, producer, &self.id)),
                Ok(Err(e)) => {
                    return Err(LogError::Io {
                        path: format!("diskless object store ({})", self.id).into(),
                        source: std::io::Error::other(e.to_string()),
                    });
                }
                Err(_) => {
                    return Err(LogError::Io {
                        path: format!("diskless object store ({})", self.id).into(),
                        source: std::io::Error::other("the diskless writer stopped"),
                    });
                }
            };
            first.get_or_insert(committed.base_offset);
            last = committed.base_offset + i64::from(count) - 1;
            log_start = committed.log_start_offset;
            duplicate &= committed.duplicate;
        }
        let first_offset = first.unwrap_or(-1);
        {
            let mut offsets = self.offsets.lock().unwrap_or_else(PoisonError::into_inner);
            offsets.log_start = offsets.log_start.max(log_start);
            offsets.local_log_start = offsets.local_log_start.max(offsets.log_start);
            offsets.high_watermark = offsets.high_watermark.max(last + 1);
            offsets.last_stable = offsets.high_watermark;
            offsets.log_end = offsets.high_watermark;
        }
        self.changed.notify_waiters();
        Ok(AppendInfo {
            first_offset,
            last_offset: last,
            log_append_time: log_append_time.filter(|_| !duplicate),
            log_start_offset: log_start,
            duplicate,
            record_count,
        })
    }

    /// The record of `found` that answers a timestamp question: the first
    /// with the largest timestamp, or the first at or after `at`.
    async fn record_in(
        &self,
        found: &FoundBatch,
        at: Option<i64>,
    ) -> Result<Option<TimestampOffset>, StorageError> {
        let bytes = read_batches(&self.runtime.store, std::slice::from_ref(found))
            .await
            .map_err(unavailable)?;
        let records = batch::decode_records(&bytes)?;
        let mut best: Option<TimestampOffset> = None;
        for r in records {
            let better = match (at, &best) {
                (Some(ts), None) => r.timestamp >= ts,
                (Some(_), Some(_)) => false,
                (None, None) => true,
                (None, Some(b)) => r.timestamp > b.timestamp,
            };
            if better {
                best = Some(TimestampOffset {
                    timestamp: r.timestamp,
                    offset: r.offset,
                    leader_epoch: LEADER_EPOCH,
                });
            }
        }
        Ok(best.or(Some(TimestampOffset {
            timestamp: found.max_timestamp,
            offset: found.base_offset,
            leader_epoch: LEADER_EPOCH,
        })))
    }
}

impl DisklessStorage {
    /// The partition's offsets from the coordinator now.
    async fn info_now(&self) -> Result<LogInfo, StorageError> {
        let info = single(self.runtime.coordinator.log_info(&[self.id]).await)?
            .map_err(|e| partition_error(&e))?;
        self.learn(&info);
        Ok(info)
    }

    /// ListOffsets -4 (the first offset held as batches) and -5 (the last
    /// consolidated offset; none while nothing is consolidated).
    async fn tier_offset(
        &self,
        query: OffsetQuery,
    ) -> Result<Option<TimestampOffset>, StorageError> {
        let info = self.info_now().await?;
        let offset = match query {
            // What is still in batches is what consolidation has not copied
            // into tiered segments yet.
            OffsetQuery::EarliestLocal | OffsetQuery::EarliestPendingUpload => {
                Some(info.batch_start_offset)
            }
            _ => (info.batch_start_offset > info.log_start_offset)
                .then(|| info.batch_start_offset - 1),
        };
        Ok(offset.map(|offset| TimestampOffset {
            timestamp: -1,
            offset,
            leader_epoch: LEADER_EPOCH,
        }))
    }

    /// A timestamp lookup over the consolidated segments, when there are
    /// any above the log start.
    async fn tiered_lookup(
        &self,
        query: TimestampQuery,
    ) -> Result<Option<TimestampOffset>, StorageError> {
        let info = self.info_now().await?;
        if info.batch_start_offset <= info.log_start_offset {
            return Ok(None);
        }
        let rlm = self.runtime.remote().ok_or_else(|| {
            unavailable("consolidated diskless data needs the remote tier (remote.log.storage.system.enable=true)")
        })?;
        let found = rlm
            .find_diskless_offset(self.tier_id(), query, info.log_start_offset)
            .await
            .map_err(unavailable)?;
        // A segment left over from a lost race may reach past the batch start.
        Ok(found.filter(|f| f.offset < info.batch_start_offset))
    }
}

/// Works through a partition's queued appends, in order, for as long as the
/// partition exists.
async fn run_queue(me: Weak<DisklessStorage>, mut jobs: mpsc::UnboundedReceiver<Job>) {
    while let Some(job) = jobs.recv().await {
        let Some(storage) = me.upgrade() else {
            return;
        };
        storage.append_now(job).await;
    }
}

/// The rewrites of a batch's header the classic log makes too: the
/// partition leader epoch, and with `LogAppendTime` the timestamp type, max
/// timestamp and CRC. Made on the batch's copy in the object.
fn patch(batch: &mut [u8], log_append_time: Option<i64>) {
    batch::set_partition_leader_epoch(batch, LEADER_EPOCH.0);
    if let Some(ts) = log_append_time {
        batch::set_log_append_time(batch, ts);
    }
}

/// A request's batches, checked and ready for the writer.
struct Prepared {
    batches: Vec<(CommitBatch, Bytes)>,
    log_append_time: Option<i64>,
    record_count: u32,
}

/// Kafka's checks of a client's batches, as the classic log makes them, and
/// validation's rewrites (recompression); each batch is the request's own
/// bytes otherwise. The header rewrites come later, on the object's copy
/// ([`patch`]).
fn prepare(
    records: &Bytes,
    config: &LogConfig,
    name: &str,
    now: i64,
    partition: DisklessPartition,
) -> Result<Prepared, LogError> {
    let log_append_time =
        (config.message_timestamp_type == TimestampType::LogAppendTime).then_some(now);
    let mut batches = Vec::with_capacity(1);
    let mut record_count = 0u32;
    let mut at = 0usize;
    while at < records.len() {
        let rest = records.get(at..).unwrap_or_default();
        let header = batch::check_batch(rest)?;
        batch::check_client_batch(&header)?;
        if header.size() > u64::from(config.max_message_bytes) {
            return Err(LogError::RecordTooLarge {
                size: header.size(),
                max: u64::from(config.max_message_bytes),
            });
        }
        if header.is_transactional() {
            return Err(LogError::InvalidTxnState {
                producer_id: ProducerId(header.producer_id),
                reason: "transactions are not supported on diskless topics (diskless.enable=true)"
                    .into(),
            });
        }
        let size = usize::try_from(header.size()).unwrap_or(usize::MAX);
        let this = rest.get(..size).ok_or_else(|| LogError::CorruptRecord {
            reason: "batch outside the request".into(),
        })?;
        // As the client sent it unless validation rewrote it; the header
        // rewrites are made on the object's copy (see `patch`).
        let bytes = match krabka_log::validate::validate_batch(this, &header, config, name, now)? {
            Some(rewritten) => Bytes::from(rewritten),
            None => records.slice(at..at + size),
        };
        let max_timestamp = log_append_time.unwrap_or(header.max_timestamp);
        let producer = header.has_producer_id().then(|| ProducerBatch {
            producer_id: header.producer_id,
            producer_epoch: header.producer_epoch,
            base_sequence: header.base_sequence,
            last_sequence: header.last_sequence(),
        });
        let offset_count = u32::try_from(header.last_offset_delta)
            .unwrap_or(0)
            .saturating_add(1);
        record_count = record_count.saturating_add(offset_count);
        batches.push((
            CommitBatch {
                partition,
                position: 0,
                size: 0,
                offset_count,
                max_timestamp,
                producer,
            },
            bytes,
        ));
        at += size;
    }
    if batches.is_empty() {
        return Err(LogError::InvalidRecord {
            reason: "no record batches".into(),
        });
    }
    Ok(Prepared {
        batches,
        log_append_time,
        record_count,
    })
}

/// DescribeProducers' view of a producer the coordinator knows: diskless
/// topics carry no transactions, so no coordinator epoch (-1) and no open
/// transaction.
fn producer_summary(p: ProducerInfo) -> ProducerSummary {
    ProducerSummary {
        producer_id: p.producer_id,
        producer_epoch: p.producer_epoch,
        last_sequence: p.last_sequence,
        last_timestamp: p.last_timestamp,
        coordinator_epoch: -1,
        current_txn_start_offset: None,
    }
}

/// The classic log's error for a batch the coordinator refused.
fn refusal(
    e: &BatchError,
    producer: Option<ProducerBatch>,
    partition: &DisklessPartition,
) -> LogError {
    let producer_id = ProducerId(producer.map_or(-1, |p| p.producer_id));
    match e {
        BatchError::InvalidProducerEpoch { epoch, current } => LogError::InvalidProducerEpoch {
            producer_id,
            current: ProducerEpoch(*current),
            found: ProducerEpoch(*epoch),
        },
        BatchError::OutOfOrderSequence { sequence, expected } => LogError::OutOfOrderSequence {
            producer_id,
            expected_sequence: *expected,
            found_sequence: *sequence,
        },
        BatchError::UnknownTopicOrPartition => LogError::Closed {
            dir: format!("diskless partition {partition}").into(),
        },
    }
}

#[async_trait::async_trait]
impl PartitionStorage for DisklessStorage {
    fn offsets(&self) -> Offsets {
        *self.offsets.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn read(&self, request: &ReadRequest) -> Result<Read, StorageError> {
        let runtime = Arc::clone(&self.runtime);
        let request = *request;
        let id = self.id;
        // The cache learns from what the read finds (a weak handle: the
        // read may outlive a deleted partition).
        let me = self.me.clone();
        let tier = self.tier_id();
        Ok(Read::Later(Box::pin(async move {
            let find = FindBatches {
                partition: id,
                offset: request.offset,
                max_bytes: u32::try_from(request.max_bytes).unwrap_or(u32::MAX),
            };
            let found = single(runtime.coordinator.find_batches(&[find]).await)?
                .map_err(|e| partition_error(&e))?;
            if let Some(me) = me.upgrade() {
                me.learn(&found.info);
            }
            if request.offset < found.info.batch_start_offset {
                // Consolidated: a tiered segment holds it.
                let rlm = runtime.remote().ok_or_else(|| {
                    unavailable("consolidated diskless data needs the remote tier (remote.log.storage.system.enable=true)")
                })?;
                let records = rlm
                    .read_diskless(
                        tier,
                        request.offset,
                        request.max_bytes,
                        request.min_one_batch,
                        found.info.high_watermark,
                    )
                    .await
                    .map_err(|e| {
                        tracing::warn!(partition = %id, offset = request.offset, error = %e, "reading consolidated diskless data failed");
                        unavailable(e)
                    })?;
                return Ok(ReadResult {
                    records: records.into(),
                    aborted: (request.isolation == Isolation::ReadCommitted).then(Vec::new),
                    offsets: offsets_of(&found.info),
                });
            }
            let mut batches = found.batches;
            // The coordinator always gives the first batch (KIP-74); only
            // the first partition of a fetch may take one over its budget.
            if !request.min_one_batch
                && batches
                    .first()
                    .is_some_and(|b| b.size as usize > request.max_bytes)
            {
                batches.clear();
            }
            let records = read_batches(&runtime.store, &batches).await.map_err(|e| {
                tracing::warn!(partition = %id, offset = request.offset, error = %e, "diskless read failed");
                unavailable(e)
            })?;
            Ok(ReadResult {
                records: records.into(),
                aborted: (request.isolation == Isolation::ReadCommitted).then(Vec::new),
                offsets: offsets_of(&found.info),
            })
        })))
    }

    fn append(&self, records: Bytes) -> Appended {
        self.append_accepting(records).0
    }

    async fn list_offset(
        &self,
        query: OffsetQuery,
        _isolation: Isolation,
    ) -> Result<Option<TimestampOffset>, StorageError> {
        let at_offset = |offset| {
            Some(TimestampOffset {
                timestamp: -1,
                offset,
                leader_epoch: LEADER_EPOCH,
            })
        };
        let (question, at) = match query {
            OffsetQuery::Latest => (CoordinatorQuery::Latest, None),
            OffsetQuery::Earliest => (CoordinatorQuery::Earliest, None),
            OffsetQuery::EarliestLocal
            | OffsetQuery::LatestTiered
            | OffsetQuery::EarliestPendingUpload => {
                return self.tier_offset(query).await;
            }
            OffsetQuery::MaxTimestamp => (CoordinatorQuery::MaxTimestamp, None),
            OffsetQuery::AtOrAfter(ts) => (CoordinatorQuery::Timestamp(ts), Some(ts)),
        };
        // Consolidated offsets come first: a timestamp found there wins,
        // and the largest timestamp is compared with the batches'.
        let tiered = match query {
            OffsetQuery::AtOrAfter(ts) => {
                let found = self.tiered_lookup(TimestampQuery::AtOrAfter(ts)).await?;
                if found.is_some() {
                    return Ok(found);
                }
                None
            }
            OffsetQuery::MaxTimestamp => self.tiered_lookup(TimestampQuery::Max).await?,
            _ => None,
        };
        let answer = single(
            self.runtime
                .coordinator
                .list_offsets(&[ListOffsetsQuery {
                    partition: self.id,
                    query: question,
                }])
                .await,
        )?
        .map_err(|e| partition_error(&e))?;
        let batches = match answer {
            OffsetAnswer::Offset(offset) => return Ok(at_offset(offset)),
            OffsetAnswer::NotFound => None,
            OffsetAnswer::Batch(found) => self.record_in(&found, at).await?,
        };
        // -3: the tier's record wins a tie (it is the earlier).
        Ok(match (tiered, batches) {
            (Some(t), Some(b)) if b.timestamp > t.timestamp => Some(b),
            (Some(t), _) => Some(t),
            (None, b) => b,
        })
    }

    async fn delete_records(&self, offset: i64) -> Result<i64, StorageError> {
        let start = single(
            self.runtime
                .coordinator
                .delete_records(&[DeleteRecords {
                    partition: self.id,
                    offset,
                }])
                .await,
        )?
        .map_err(|e| partition_error(&e))?;
        self.refresh().await;
        self.changed.notify_waiters();
        Ok(start)
    }

    fn size_bytes(&self) -> u64 {
        self.size.load(Ordering::Relaxed)
    }

    async fn producers(&self) -> Result<Vec<ProducerSummary>, StorageError> {
        let known = single(
            self.runtime
                .coordinator
                .describe_producers(&[self.id])
                .await,
        )?
        .map_err(|e| partition_error(&e))?;
        Ok(known.into_iter().map(producer_summary).collect())
    }

    fn changed(&self) -> &Notify {
        &self.changed
    }
}
