//! [`Log`]: one partition's log — append, read, roll, retention, flush and
//! clean shutdown. Loading and crash recovery live in `crate::load`; what a
//! remote tier needs (segments to copy, local retention, the log start
//! floor) in `tiering`.
//!
//! Concurrency: every mutation (append, marker, roll, retention, flush,
//! close, cleaner swap) runs under one append mutex. Readers only take the
//! segment-list `RwLock` for a moment to clone an `Arc<Segment>`, then read
//! with positional reads bounded by the segment's published size, so a read
//! never waits for an append (or an fsync) in progress.

pub(crate) mod tiering;

use {
    crate::{
        Clock, LogConfig, LogError, TimestampType,
        batch::{self, BatchHeader, ControlRecord},
        checkpoint::{self, LOG_START_OFFSET_FILE, RECOVERY_POINT_FILE},
        leader_epoch::{EpochEntry, LeaderEpochCache},
        producer_state::{
            self, AppendOrigin, PendingUpdate, ProducerStateManager, ProducerSummary, SequenceCheck,
        },
        segment::{self, Segment},
        txn_index::AbortedTxnEntry,
        types::{
            AbortedTxn, AppendInfo, ControlMarker, ReadInfo, SegmentInfo, SliceInfo,
            TimestampOffset,
        },
    },
    bytes::Bytes,
    krabka_ids::LeaderEpoch,
    std::{
        path::{Path, PathBuf},
        sync::{
            Arc, Mutex, MutexGuard, RwLock,
            atomic::{AtomicBool, AtomicI64, Ordering},
        },
    },
    uuid::Uuid,
};

/// Mutable state guarded by the append lock.
pub(crate) struct Inner {
    pub(crate) producers: ProducerStateManager,
    scratch: Vec<u8>,
    unflushed_messages: u64,
    last_flush_ms: i64,
    pub(crate) recovery_point: i64,
}

impl Inner {
    pub(crate) fn new(producers: ProducerStateManager, recovery_point: i64, now_ms: i64) -> Self {
        Self {
            producers,
            scratch: Vec::new(),
            unflushed_messages: 0,
            last_flush_ms: now_ms,
            recovery_point,
        }
    }
}

/// One partition's log in a directory `<topic>-<partition>`. `Send + Sync`;
/// every method takes `&self`.
pub struct Log {
    pub(crate) dir: PathBuf,
    pub(crate) topic_id: Uuid,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) config: RwLock<LogConfig>,
    pub(crate) segments: RwLock<Vec<Arc<Segment>>>,
    pub(crate) inner: Mutex<Inner>,
    pub(crate) epochs: Mutex<LeaderEpochCache>,
    pub(crate) log_start_offset: AtomicI64,
    /// The partition's log start below the local one (see `tiering`).
    pub(crate) log_start_floor: AtomicI64,
    pub(crate) log_end_offset: AtomicI64,
    pub(crate) last_stable_offset: AtomicI64,
    pub(crate) closed: AtomicBool,
    /// A roll closed segments that [`Log::flush_rolled`] has not flushed.
    pub(crate) roll_flush_due: AtomicBool,
    /// What opening the log removed or rebuilt.
    pub(crate) recovery: crate::RecoveryReport,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("dir", &self.dir)
            .field("log_start_offset", &self.log_start_offset())
            .field("log_end_offset", &self.log_end_offset())
            .finish_non_exhaustive()
    }
}

impl Log {
    /// What opening the log did: data removed by recovery (with offsets,
    /// records and bytes) and indexes rebuilt.
    #[must_use]
    pub fn recovery_report(&self) -> &crate::RecoveryReport {
        &self.recovery
    }

    /// The partition directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The topic id in `partition.metadata`.
    #[must_use]
    pub fn topic_id(&self) -> Uuid {
        self.topic_id
    }

    /// The current configuration.
    #[must_use]
    pub fn config(&self) -> LogConfig {
        self.config
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Replaces the configuration (takes effect for the next append / roll /
    /// retention pass).
    pub fn update_config(&self, config: LogConfig) {
        for seg in self.segment_list() {
            seg.set_index_bytes(config.segment_index_bytes);
        }
        *self
            .config
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = config;
    }

    /// [`Log::lock_inner`], or `None` at once if another thread holds it.
    fn try_lock_inner(&self) -> Result<Option<MutexGuard<'_, Inner>>, LogError> {
        match self.inner.try_lock() {
            Ok(guard) => self.unless_closed(guard).map(Some),
            Err(std::sync::TryLockError::Poisoned(poisoned)) => {
                self.unless_closed(poisoned.into_inner()).map(Some)
            }
            Err(std::sync::TryLockError::WouldBlock) => Ok(None),
        }
    }

    pub(crate) fn lock_inner(&self) -> Result<MutexGuard<'_, Inner>, LogError> {
        let guard = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.unless_closed(guard)
    }

    /// The held lock, unless the log was closed.
    fn unless_closed<'a>(
        &self,
        guard: MutexGuard<'a, Inner>,
    ) -> Result<MutexGuard<'a, Inner>, LogError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(LogError::Closed {
                dir: self.dir.clone(),
            });
        }
        Ok(guard)
    }

    pub(crate) fn lock_epochs(&self) -> MutexGuard<'_, LeaderEpochCache> {
        self.epochs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn segment_list(&self) -> Vec<Arc<Segment>> {
        self.segments
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn active_segment(&self) -> Arc<Segment> {
        let segs = self
            .segments
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // The list is never empty: open() and every deletion keep the active segment.
        Arc::clone(segs.last().unwrap_or_else(|| unreachable_empty()))
    }

    /// Segment holding `offset` (the last with base <= offset) and the ones
    /// after it, cloned one at a time so a read does not copy the whole list.
    pub(crate) fn segments_from(&self, offset: i64) -> SegmentCursor<'_> {
        SegmentCursor {
            log: self,
            offset,
            last_base: None,
        }
    }

    /// Log start offset.
    #[must_use]
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset.load(Ordering::Acquire)
    }

    /// Log end offset: the next offset to assign.
    #[must_use]
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset.load(Ordering::Acquire)
    }

    /// First offset of the earliest open transaction, else the log end offset.
    #[must_use]
    pub fn last_stable_offset(&self) -> i64 {
        self.last_stable_offset.load(Ordering::Acquire)
    }

    /// Sum of the segment sizes.
    #[must_use]
    pub fn size_bytes(&self) -> u64 {
        self.segments
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|s| s.size())
            .sum()
    }

    /// The segments, oldest first.
    #[must_use]
    pub fn segments(&self) -> Vec<SegmentInfo> {
        let segs = self.segment_list();
        let n = segs.len();
        segs.iter()
            .enumerate()
            .map(|(i, s)| {
                let [log_path, offset_index_path, time_index_path, txn_index_path] =
                    segment::segment_paths(&self.dir, s.base_offset());
                let stats = s.stats();
                SegmentInfo {
                    base_offset: s.base_offset(),
                    end_offset: stats.next_offset,
                    size_bytes: s.size(),
                    max_timestamp: stats.max_timestamp,
                    active: i + 1 == n,
                    log_path,
                    offset_index_path,
                    time_index_path,
                    txn_index_path,
                }
            })
            .collect()
    }

    /// Leader-epoch entries (`leader-epoch-checkpoint` contents).
    #[must_use]
    pub fn leader_epochs(&self) -> Vec<EpochEntry> {
        self.lock_epochs().entries().to_vec()
    }

    /// The latest leader epoch written to the log.
    #[must_use]
    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.lock_epochs().latest_epoch()
    }

    /// OffsetsForLeaderEpoch: the largest epoch `<= epoch` and its end offset.
    #[must_use]
    pub fn end_offset_for_epoch(&self, epoch: LeaderEpoch) -> Option<(LeaderEpoch, i64)> {
        self.lock_epochs()
            .end_offset_for(epoch, self.log_end_offset())
    }

    /// Producer state for DescribeProducers / InitProducerId.
    #[must_use]
    pub fn producers(&self) -> Vec<ProducerSummary> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .producers
            .summaries()
    }

    /// Forgets producers idle for `expiration_ms` (Kafka's
    /// `producer.id.expiration.ms`, default one day) that have no open
    /// transaction; returns how many. The broker calls this periodically.
    ///
    /// # Errors
    ///
    /// [`LogError::Closed`] if the log is closed.
    pub fn remove_expired_producers(&self, expiration_ms: u64) -> Result<usize, LogError> {
        let mut inner = self.lock_inner()?;
        let horizon = self
            .clock
            .now_ms()
            .saturating_sub(i64::try_from(expiration_ms).unwrap_or(i64::MAX));
        Ok(inner.producers.remove_expired(horizon))
    }

    /// Appends v2 record batches exactly as a client sent them (raw
    /// ProduceRequest records), as the partition leader.
    ///
    /// Each batch is checked (length, magic 2, CRC-32C, record count against
    /// last offset delta, `max.message.bytes`), then against producer state
    /// (epoch fencing, sequence order; a retry of one of the last five
    /// batches answers `Ok` with the original offsets and `duplicate`).
    /// Offsets are assigned, the partition leader epoch stamped and, with
    /// LogAppendTime, the max timestamp set (CRC recomputed). All batches of
    /// one call are appended or none.
    ///
    /// # Errors
    ///
    /// [`LogError::CorruptRecord`], [`LogError::InvalidRecord`],
    /// [`LogError::RecordTooLarge`], [`LogError::RecordListTooLarge`],
    /// [`LogError::InvalidProducerEpoch`], [`LogError::OutOfOrderSequence`],
    /// [`LogError::InvalidTxnState`], [`LogError::Closed`], [`LogError::Io`].
    pub fn append_as_leader(
        &self,
        records: Bytes,
        leader_epoch: LeaderEpoch,
    ) -> Result<AppendInfo, LogError> {
        unrestricted(self.append_with_origin(
            records,
            leader_epoch,
            AppendOrigin::Client,
            Reach::Any,
        ))
    }

    /// [`Log::append_as_leader`], if that is a write to the active segment
    /// and nothing more; otherwise `Ok(None)`, with nothing changed: when
    /// another thread holds the log, or the append would roll the segment,
    /// flush (`flush.messages` / `flush.ms`) or record a new leader epoch,
    /// each of which waits on the disk. For a caller that must not wait on
    /// the disk (an async worker), which hands a `None` to a thread that may.
    /// The write itself can still wait when the kernel throttles a writer
    /// whose dirty pages are over its limit.
    ///
    /// # Errors
    ///
    /// As [`Log::append_as_leader`].
    pub fn try_append_as_leader(
        &self,
        records: Bytes,
        leader_epoch: LeaderEpoch,
    ) -> Result<Option<AppendInfo>, LogError> {
        self.append_with_origin(
            records,
            leader_epoch,
            AppendOrigin::Client,
            Reach::WriteOnly,
        )
    }

    /// Appends batches the broker's own coordinator encoded (Kafka's
    /// `AppendOrigin.COORDINATOR`): checked as [`Log::append_as_leader`]
    /// checks a client's, except that a producer's batches are not
    /// sequence-checked nor deduplicated — the group coordinator writes
    /// transactional offset commits under the producer's id and epoch
    /// without numbering them. Epoch fencing and transaction state still apply.
    ///
    /// # Errors
    ///
    /// As [`Log::append_as_leader`], less [`LogError::OutOfOrderSequence`].
    pub fn append_as_coordinator(
        &self,
        records: Bytes,
        leader_epoch: LeaderEpoch,
    ) -> Result<AppendInfo, LogError> {
        unrestricted(self.append_with_origin(
            records,
            leader_epoch,
            AppendOrigin::Coordinator,
            Reach::Any,
        ))
    }

    /// `Ok(None)` only when `reach` is [`Reach::WriteOnly`] and the append
    /// would do more than write (see [`Log::try_append_as_leader`]).
    fn append_with_origin(
        &self,
        records: Bytes,
        leader_epoch: LeaderEpoch,
        origin: AppendOrigin,
        reach: Reach,
    ) -> Result<Option<AppendInfo>, LogError> {
        let config = self.config();
        let records = self.validate_client_batches(records, &config)?;
        let mut headers: Vec<(usize, BatchHeader)> = Vec::with_capacity(1);
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
            headers.push((at, header));
            at += header.size() as usize;
        }
        if headers.is_empty() {
            return Err(LogError::invalid("no record batches"));
        }
        if records.len() as u64 > config.segment_bytes {
            return Err(LogError::RecordListTooLarge {
                size: records.len() as u64,
                max: config.segment_bytes,
            });
        }

        let mut inner = match reach {
            Reach::Any => self.lock_inner()?,
            Reach::WriteOnly => match self.try_lock_inner()? {
                Some(inner) => inner,
                None => return Ok(None),
            },
        };
        let now = self.clock.now_ms();
        let first_offset = self.log_end_offset();
        let mut next = first_offset;
        let mut pending = PendingUpdate::default();
        let mut record_count = 0u32;
        for (_, h) in &mut headers {
            if h.has_producer_id() {
                if let SequenceCheck::Duplicate(orig) =
                    inner
                        .producers
                        .check_and_stage(&mut pending, h, next, origin)?
                {
                    return Ok(Some(AppendInfo {
                        first_offset: orig.first_offset,
                        last_offset: orig.last_offset,
                        log_append_time: None,
                        log_start_offset: self.log_start_offset(),
                        duplicate: true,
                        record_count: u32::try_from(orig.last_offset - orig.first_offset + 1)
                            .unwrap_or(0),
                    }));
                }
            } else if h.is_transactional() {
                return Err(LogError::invalid(
                    "transactional batch without a producer id",
                ));
            }
            h.base_offset = next;
            h.partition_leader_epoch = leader_epoch.0;
            next = h.next_offset();
            record_count = record_count.saturating_add(u32::try_from(h.record_count).unwrap_or(0));
        }
        let last_offset = next - 1;

        let inner = &mut *inner;
        let log_append_time =
            (config.message_timestamp_type == TimestampType::LogAppendTime).then_some(now);
        // With LogAppendTime every batch's max timestamp becomes `now` below.
        let max_ts = log_append_time.unwrap_or_else(|| {
            headers
                .iter()
                .map(|(_, h)| h.max_timestamp)
                .max()
                .unwrap_or(-1)
        });
        if reach == Reach::WriteOnly {
            let more_than_a_write =
                self.needs_roll(&config, records.len() as u64, max_ts, last_offset, now)
                    || would_flush(inner, &config, record_count, now)
                    || !self.lock_epochs().has_epoch(leader_epoch);
            if more_than_a_write {
                return Ok(None);
            }
        }
        if let Some(ts) = log_append_time {
            // The CRC covers the rewritten timestamp: the batches are copied
            // and patched whole.
            inner.scratch.clear();
            inner.scratch.extend_from_slice(&records);
            for (pos, h) in &mut headers {
                let Some(buf) = inner.scratch.get_mut(*pos..*pos + h.size() as usize) else {
                    return Err(LogError::corrupt("batch outside the request"));
                };
                batch::set_base_offset(buf, h.base_offset);
                batch::set_partition_leader_epoch(buf, leader_epoch.0);
                batch::set_log_append_time(buf, ts);
                h.max_timestamp = ts;
            }
        }
        self.maybe_roll_for_append(
            inner,
            &config,
            records.len() as u64,
            max_ts,
            first_offset,
            last_offset,
            now,
        )?;
        let active = self.active_segment();
        if log_append_time.is_some() {
            active.append(&inner.scratch, &headers, config.index_interval_bytes)?;
        } else {
            // Only the head of each batch changes (outside its CRC): write
            // the new heads and the client's bytes around them, uncopied.
            let heads = headers
                .iter()
                .map(|(pos, h)| {
                    batch::patched_prefix(
                        records.get(*pos..).unwrap_or_default(),
                        h.base_offset,
                        leader_epoch.0,
                    )
                    .ok_or_else(|| LogError::corrupt("batch outside the request"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let mut parts: Vec<&[u8]> = Vec::with_capacity(headers.len() * 2);
            for ((pos, h), head) in headers.iter().zip(&heads) {
                let body = records
                    .get(*pos + batch::PATCHED_PREFIX..*pos + h.size() as usize)
                    .ok_or_else(|| LogError::corrupt("batch outside the request"))?;
                parts.push(head);
                parts.push(body);
            }
            active.append_parts(&parts, &headers, config.index_interval_bytes)?;
        }
        inner.producers.commit(pending);
        self.log_end_offset.store(next, Ordering::Release);
        self.lock_epochs().assign(leader_epoch, first_offset)?;
        self.update_lso(inner);
        inner.unflushed_messages += u64::from(record_count);
        self.maybe_flush(inner, &config, now)?;
        Ok(Some(AppendInfo {
            first_offset,
            last_offset,
            log_append_time,
            log_start_offset: self.log_start_offset(),
            duplicate: false,
            record_count,
        }))
    }

    /// Runs [`crate::validate::validate_batch`] over every batch of an
    /// append (before the append lock: opening a batch is CPU work), and
    /// returns the bytes to store — the same bytes unless a batch was
    /// recompressed.
    fn validate_client_batches(
        &self,
        records: Bytes,
        config: &LogConfig,
    ) -> Result<Bytes, LogError> {
        let name = self
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let now = self.clock.now_ms();
        let mut rewritten: Option<Vec<u8>> = None;
        let mut at = 0usize;
        while at < records.len() {
            let rest = records.get(at..).unwrap_or_default();
            let header = batch::check_batch(rest)?;
            batch::check_client_batch(&header)?;
            let size = header.size() as usize;
            let this = rest.get(..size).unwrap_or_default();
            match crate::validate::validate_batch(this, &header, config, &name, now)? {
                Some(new) => rewritten
                    .get_or_insert_with(|| records.get(..at).unwrap_or_default().to_vec())
                    .extend_from_slice(&new),
                None => {
                    if let Some(out) = rewritten.as_mut() {
                        out.extend_from_slice(this);
                    }
                }
            }
            at += size;
        }
        Ok(rewritten.map_or(records, Bytes::from))
    }

    /// Writes a COMMIT or ABORT marker for a producer's transaction; an
    /// ABORT is recorded in the active segment's `.txnindex`.
    ///
    /// # Errors
    ///
    /// [`LogError::InvalidProducerEpoch`] for a fenced epoch,
    /// [`LogError::InvalidTxnState`] for an older coordinator epoch,
    /// [`LogError::Closed`], [`LogError::Io`].
    pub fn append_control_marker(
        &self,
        marker: ControlMarker,
        leader_epoch: LeaderEpoch,
    ) -> Result<AppendInfo, LogError> {
        let config = self.config();
        let mut guard = self.lock_inner()?;
        let inner = &mut *guard;
        let now = self.clock.now_ms();
        let pid = marker.producer_id.0;
        let epoch = marker.producer_epoch.0;
        inner.producers.check_marker(
            pid,
            epoch,
            marker.coordinator_epoch,
            marker.transaction_version,
        )?;
        let offset = self.log_end_offset();
        let bytes = batch::encode_control_batch(
            offset,
            pid,
            epoch,
            ControlRecord {
                commit: marker.commit,
                coordinator_epoch: marker.coordinator_epoch,
            },
            leader_epoch.0,
            now,
        )?;
        let header = batch::check_batch(&bytes)?;
        self.maybe_roll_for_append(
            inner,
            &config,
            bytes.len() as u64,
            header.max_timestamp,
            offset,
            offset,
            now,
        )?;
        let active = self.active_segment();
        active.append(&bytes, &[(0, header)], config.index_interval_bytes)?;
        let completed = inner.producers.complete_txn(
            pid,
            epoch,
            marker.coordinator_epoch,
            marker.commit,
            offset,
            now,
        );
        // The aborted range is indexed before the marker becomes visible
        // (LEO / LSO), so a read_committed fetch that sees the marker also
        // sees the aborted transaction.
        if completed.aborted {
            let lso_after = inner
                .producers
                .first_unstable_offset()
                .unwrap_or(offset + 1);
            active.txn_index.append(AbortedTxnEntry {
                producer_id: pid,
                first_offset: completed.first_offset,
                last_offset: offset,
                last_stable_offset: lso_after,
            })?;
        }
        self.log_end_offset.store(offset + 1, Ordering::Release);
        self.update_lso(inner);
        self.lock_epochs().assign(leader_epoch, offset)?;
        inner.unflushed_messages += 1;
        self.maybe_flush(inner, &config, now)?;
        Ok(AppendInfo {
            first_offset: offset,
            last_offset: offset,
            log_append_time: None,
            log_start_offset: self.log_start_offset(),
            duplicate: false,
            record_count: 1,
        })
    }

    pub(crate) fn update_lso(&self, inner: &Inner) {
        let lso = inner
            .producers
            .first_unstable_offset()
            .unwrap_or_else(|| self.log_end_offset());
        self.last_stable_offset.store(lso, Ordering::Release);
    }

    #[allow(clippy::too_many_arguments)]
    fn maybe_roll_for_append(
        &self,
        inner: &mut Inner,
        config: &LogConfig,
        append_bytes: u64,
        max_timestamp: i64,
        first_offset: i64,
        last_offset: i64,
        now: i64,
    ) -> Result<(), LogError> {
        if self.needs_roll(config, append_bytes, max_timestamp, last_offset, now) {
            self.roll(inner, config, first_offset)?;
        }
        Ok(())
    }

    /// Whether an append of `append_bytes` up to `last_offset` must first
    /// start a new segment: the active one would outgrow `segment.bytes`,
    /// is older than `segment.ms`, has full indexes or cannot hold the
    /// offset.
    fn needs_roll(
        &self,
        config: &LogConfig,
        append_bytes: u64,
        max_timestamp: i64,
        last_offset: i64,
        now: i64,
    ) -> bool {
        let active = self.active_segment();
        let size = active.size();
        if size == 0 {
            return false;
        }
        let stats = active.stats();
        let waited = match stats.first_batch_timestamp {
            Some(t) if t >= 0 && max_timestamp >= 0 => max_timestamp - t,
            _ => now - stats.created_ms,
        };
        // Positions are u32 in the index and Kafka caps segments at Int.MaxValue.
        let max_segment = config.segment_bytes.min(i32::MAX as u64);
        size > max_segment.saturating_sub(append_bytes)
            || waited > i64::try_from(config.max_segment_ms()).unwrap_or(i64::MAX)
            || active.indexes_full()
            || !active.can_hold_offset(last_offset)
    }

    /// Closes the active segment and starts a new one at `new_base`: seal and
    /// trim the old indexes, flush it, snapshot producer state.
    pub(crate) fn roll(
        &self,
        inner: &mut Inner,
        config: &LogConfig,
        new_base: i64,
    ) -> Result<(), LogError> {
        let old = self.active_segment();
        if old.size() == 0 {
            return Ok(());
        }
        old.seal()?;
        // As Kafka, the closed segments are flushed after the roll, outside
        // the log's lock (`flush_rolled`), and only then does the recovery
        // point move: appends do not wait for the disk to take a segment.
        // Closed segments hold no descriptor (see `segment_file`).
        old.deactivate();
        self.roll_flush_due.store(true, Ordering::Release);
        let new = Segment::create(
            &self.dir,
            new_base,
            config.segment_index_bytes,
            self.clock.now_ms(),
        )?;
        inner.producers.write_snapshot(&self.dir, new_base)?;
        self.segments
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Arc::new(new));
        tracing::debug!(dir = %self.dir.display(), new_base, "rolled segment");
        Ok(())
    }

    fn maybe_flush(&self, inner: &mut Inner, config: &LogConfig, now: i64) -> Result<(), LogError> {
        if would_flush(inner, config, 0, now) {
            self.flush_locked(inner, now)?;
        }
        Ok(())
    }

    /// fsyncs everything after the recovery point and moves it to the log end.
    /// The recovery point is persisted on roll and close (like Kafka's
    /// periodic checkpoint), not on every flush: a stale recovery point only
    /// makes recovery validate more.
    fn flush_locked(&self, inner: &mut Inner, now: i64) -> Result<(), LogError> {
        let started = std::time::Instant::now();
        let segs: Vec<_> = self.segments_from(inner.recovery_point).collect();
        let n = segs.len();
        for (i, seg) in segs.iter().enumerate() {
            // The active segment (which holds the recovery point) is always
            // rebuilt from its data after a crash, so only its data needs
            // fsync; closed segments get their indexes flushed too.
            if i + 1 == n {
                seg.flush_data()?;
            } else {
                seg.flush()?;
            }
        }
        inner.recovery_point = self.log_end_offset();
        inner.unflushed_messages = 0;
        inner.last_flush_ms = now;
        // Kafka's LogFlushRateAndTimeMs; a no-op unless the broker installed a recorder.
        metrics::histogram!("krabka_log_flush_duration_seconds")
            .record(started.elapsed().as_secs_f64());
        Ok(())
    }

    /// Reads whole batches starting with the batch that holds `start_offset`,
    /// up to `max_bytes` (at least one whole batch if `min_one_batch`), only
    /// batches that end below `max_offset` (the caller passes HW or LSO).
    /// Reads come from one segment at a time, as in Kafka.
    ///
    /// # Errors
    ///
    /// [`LogError::OffsetOutOfRange`] if `start_offset` is below the log start
    /// or above the log end; [`LogError::Io`] on a read error.
    pub fn read(
        &self,
        start_offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<ReadInfo, LogError> {
        let (records, log_start_offset, log_end_offset) =
            self.read_with(start_offset, max_offset, |seg, from| {
                let records = seg.read(from, max_bytes, max_offset, min_one_batch)?;
                Ok((!records.is_empty()).then_some(records))
            })?;
        Ok(ReadInfo {
            records: records.unwrap_or_default(),
            log_start_offset,
            log_end_offset,
        })
    }

    /// [`Log::read`] answered as a slice of the segment's open file instead
    /// of bytes: the same batches, for a caller that sends them with
    /// `sendfile`. Only batch headers are read.
    ///
    /// # Errors
    ///
    /// As [`Log::read`].
    pub fn read_slice(
        &self,
        start_offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<SliceInfo, LogError> {
        let (records, log_start_offset, log_end_offset) =
            self.read_with(start_offset, max_offset, |seg, from| {
                seg.read_slice(from, max_bytes, max_offset, min_one_batch)
            })?;
        Ok(SliceInfo {
            records,
            log_start_offset,
            log_end_offset,
        })
    }

    /// The segment walk of [`Log::read`]: `read_segment` from the segment
    /// holding `start_offset` on, until one returns batches, or has a
    /// batch that did not qualify; with the log start and end offsets.
    fn read_with<T>(
        &self,
        start_offset: i64,
        max_offset: i64,
        mut read_segment: impl FnMut(&Segment, i64) -> Result<Option<T>, LogError>,
    ) -> Result<(Option<T>, i64, i64), LogError> {
        let log_start_offset = self.log_start_offset();
        let log_end_offset = self.log_end_offset();
        if start_offset < log_start_offset || start_offset > log_end_offset {
            return Err(LogError::OffsetOutOfRange {
                offset: start_offset,
                log_start_offset,
                log_end_offset,
            });
        }
        if start_offset < log_end_offset && start_offset < max_offset {
            let mut from = start_offset;
            for seg in self.segments_from(start_offset) {
                from = from.max(seg.base_offset());
                if from >= max_offset {
                    break;
                }
                if let Some(records) = read_segment(&seg, from)? {
                    return Ok((Some(records), log_start_offset, log_end_offset));
                }
                // Nothing qualifying here; if the next batch exists but did
                // not fit (or is past max_offset), stop, else try the next segment.
                if seg.find_batch(from)?.is_some() {
                    break;
                }
            }
        }
        Ok((None, log_start_offset, log_end_offset))
    }

    /// ListOffsets by timestamp: the first record at or after the log start
    /// whose timestamp is `>= ts`.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a read error.
    pub fn offset_for_timestamp(&self, ts: i64) -> Result<Option<TimestampOffset>, LogError> {
        let start = self.log_start_offset();
        for seg in self.segments_from(start) {
            if seg.max_timestamp() < ts {
                continue;
            }
            let Some((pos, header)) = seg.find_timestamp(ts)? else {
                continue;
            };
            let bytes = seg.read_bytes(pos, header.size() as usize)?;
            let epoch = LeaderEpoch(header.partition_leader_epoch);
            if let Ok(records) = batch::decode_records(&bytes) {
                if let Some(r) = records
                    .iter()
                    .find(|r| r.timestamp >= ts && r.offset >= start)
                {
                    return Ok(Some(TimestampOffset {
                        timestamp: r.timestamp,
                        offset: r.offset,
                        leader_epoch: epoch,
                    }));
                }
            } else {
                return Ok(Some(TimestampOffset {
                    timestamp: header.max_timestamp,
                    offset: header.base_offset.max(start),
                    leader_epoch: epoch,
                }));
            }
        }
        Ok(None)
    }

    /// ListOffsets -3: the record with the largest timestamp (the first such
    /// record if several share it).
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a read error.
    pub fn max_timestamp_offset(&self) -> Result<Option<TimestampOffset>, LogError> {
        let mut best: Option<Arc<Segment>> = None;
        for seg in self.segments_from(self.log_start_offset()) {
            if seg.max_timestamp() >= 0
                && best
                    .as_ref()
                    .is_none_or(|b| seg.max_timestamp() > b.max_timestamp())
            {
                best = Some(seg);
            }
        }
        let Some(seg) = best else {
            return Ok(None);
        };
        let stats = seg.stats();
        let Some((pos, header)) = seg.find_batch(stats.offset_of_max_timestamp)? else {
            return Ok(None);
        };
        let epoch = LeaderEpoch(header.partition_leader_epoch);
        let bytes = seg.read_bytes(pos, header.size() as usize)?;
        let offset = batch::decode_records(&bytes)
            .ok()
            .and_then(|rs| {
                rs.iter()
                    .find(|r| r.timestamp == header.max_timestamp)
                    .map(|r| r.offset)
            })
            .unwrap_or(header.last_offset());
        Ok(Some(TimestampOffset {
            timestamp: header.max_timestamp,
            offset,
            leader_epoch: epoch,
        }))
    }

    /// Aborted transactions overlapping `[start, upper)`, for read_committed
    /// fetches.
    ///
    /// # Errors
    ///
    /// Never fails today; `Result` keeps room for on-disk lookups.
    pub fn aborted_transactions(
        &self,
        start: i64,
        upper: i64,
    ) -> Result<Vec<AbortedTxn>, LogError> {
        let mut out = Vec::new();
        for seg in self.segments_from(start) {
            for e in seg.txn_index.entries() {
                if e.last_offset >= start && e.first_offset < upper {
                    out.push(AbortedTxn {
                        producer_id: krabka_ids::ProducerId(e.producer_id),
                        first_offset: e.first_offset,
                    });
                }
            }
            if seg.base_offset() >= upper {
                break;
            }
        }
        Ok(out)
    }

    /// DeleteRecords: moves the log start offset forward (persisted, never
    /// back) and deletes the closed segments now wholly below it.
    ///
    /// # Errors
    ///
    /// [`LogError::OffsetOutOfRange`] if `new_start` is past the log end;
    /// [`LogError::Io`] on a file error.
    pub fn advance_log_start_offset(&self, new_start: i64) -> Result<i64, LogError> {
        let mut inner = self.lock_inner()?;
        self.advance_locked(&mut inner, new_start)
    }

    /// [`Log::advance_log_start_offset`] under the append lock.
    pub(crate) fn advance_locked(
        &self,
        inner: &mut Inner,
        new_start: i64,
    ) -> Result<i64, LogError> {
        let leo = self.log_end_offset();
        let current = self.log_start_offset();
        if new_start > leo || new_start < 0 {
            return Err(LogError::OffsetOutOfRange {
                offset: new_start,
                log_start_offset: current,
                log_end_offset: leo,
            });
        }
        if new_start <= current {
            return Ok(current);
        }
        self.set_log_start_offset(new_start)?;
        self.delete_prefix(inner, |_, next_base| next_base <= new_start)?;
        Ok(new_start)
    }

    pub(crate) fn set_log_start_offset(&self, offset: i64) -> Result<(), LogError> {
        checkpoint::write_offset(&self.dir.join(LOG_START_OFFSET_FILE), offset)?;
        self.log_start_offset.store(offset, Ordering::Release);
        self.lock_epochs().truncate_from_start(offset)
    }

    /// Deletes the longest prefix of closed segments for which
    /// `deletable(segment, next segment's base)` holds; returns how many.
    fn delete_prefix(
        &self,
        _inner: &mut Inner,
        mut deletable: impl FnMut(&Segment, i64) -> bool,
    ) -> Result<usize, LogError> {
        let segs = self.segment_list();
        let mut count = 0;
        for pair in segs.windows(2) {
            if let [seg, next] = pair {
                if deletable(seg, next.base_offset()) {
                    count += 1;
                    continue;
                }
            }
            break;
        }
        if count == 0 {
            // A pass whose checkpoint write failed (full disk) deleted its
            // segments already: the log start still follows them.
            let first = self.active_or_first_base();
            if first > self.log_start_offset() {
                self.set_log_start_offset(first)?;
            }
            return Ok(0);
        }
        let removed: Vec<Arc<Segment>> = {
            let mut list = self
                .segments
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            list.drain(..count).collect()
        };
        // The files go first: that frees space, so retention works on a full
        // disk, and the checkpoint written after them is only advisory (a
        // start takes the first segment's base when it is higher).
        for seg in &removed {
            seg.delete_files(&self.dir)?;
        }
        let new_first = self.active_or_first_base();
        if new_first > self.log_start_offset() {
            self.set_log_start_offset(new_first)?;
        }
        // Producer snapshots below the new first segment are of no use any more,
        // but the latest one is kept whatever its offset.
        let snapshots = producer_state::list_snapshots(&self.dir)?;
        let latest = snapshots.last().copied();
        for offset in snapshots {
            if offset < new_first && Some(offset) != latest {
                let _ = std::fs::remove_file(producer_state::snapshot_path(&self.dir, offset));
            }
        }
        tracing::debug!(dir = %self.dir.display(), count, "deleted segments");
        Ok(count)
    }

    fn active_or_first_base(&self) -> i64 {
        self.segments
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .first()
            .map_or(0, |s| s.base_offset())
    }

    /// Retention over closed segments: `retention.ms` (a segment whose
    /// largest timestamp is older), `retention.bytes` (oldest first while the
    /// log stays at or above the limit without it) — both only for a
    /// `delete` policy — and segments wholly below the log start offset.
    /// The active segment is never deleted. Returns segments deleted.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error.
    pub fn apply_retention(&self) -> Result<usize, LogError> {
        let config = self.config();
        let mut inner = self.lock_inner()?;
        let now = self.clock.now_ms();
        let log_start = self.log_start_offset();
        let deletes = config.cleanup_policy.deletes();
        let mut excess = config
            .retention_bytes
            .filter(|_| deletes)
            .map(|limit| i128::from(self.size_bytes()) - i128::from(limit));
        let retention_ms = config
            .retention_ms
            .filter(|_| deletes)
            .map(|ms| i64::try_from(ms).unwrap_or(i64::MAX));
        self.delete_prefix(&mut inner, |seg, next_base| {
            let mut delete = next_base <= log_start;
            if let Some(ms) = retention_ms {
                let ts = match seg.max_timestamp() {
                    t if t >= 0 => t,
                    _ => file_mtime_ms(seg.log_path()).unwrap_or(now),
                };
                delete |= now - ts > ms;
            }
            if let Some(diff) = excess.as_mut() {
                let size = i128::from(seg.size());
                if *diff - size >= 0 {
                    delete = true;
                }
            }
            if delete {
                if let Some(diff) = excess.as_mut() {
                    *diff -= i128::from(seg.size());
                }
            }
            delete
        })
    }

    /// Rolls the active segment if `segment.ms` (or a compacted log's
    /// `max.compaction.lag.ms`) elapsed, and flushes if
    /// `flush.ms` elapsed (the broker calls this periodically).
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error.
    pub fn maybe_roll(&self) -> Result<(), LogError> {
        let config = self.config();
        let mut guard = self.lock_inner()?;
        let inner = &mut *guard;
        let now = self.clock.now_ms();
        let active = self.active_segment();
        if active.size() > 0 {
            let stats = active.stats();
            let since = stats
                .first_batch_timestamp
                .filter(|t| *t >= 0)
                .unwrap_or(stats.created_ms);
            if now - since > i64::try_from(config.max_segment_ms()).unwrap_or(i64::MAX) {
                self.roll(inner, &config, self.log_end_offset())?;
            }
        }
        self.maybe_flush(inner, &config, now)
    }

    /// Whether a roll closed segments that [`Log::flush_rolled`] has not
    /// flushed yet: the caller should have it run where it may wait.
    #[must_use]
    pub fn roll_flush_due(&self) -> bool {
        self.roll_flush_due.load(Ordering::Acquire)
    }

    /// fsyncs the segments that rolls closed below the active one, then
    /// moves the recovery point to (at least) the active segment's base and
    /// persists it (Kafka's flush scheduled after a roll): what it covered
    /// no longer counts toward `flush.messages`, and `flush.ms` counts from
    /// now. The log's lock is held only to find them and to move the point,
    /// so appends go on while the disk takes them. Returns whether there
    /// was anything to flush.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error: the recovery point stays, and the
    /// flush is still due.
    pub fn flush_rolled(&self) -> Result<bool, LogError> {
        if !self.roll_flush_due.swap(false, Ordering::AcqRel) {
            return Ok(false);
        }
        let (from, below) = {
            let inner = self.lock_inner()?;
            (inner.recovery_point, self.active_segment().base_offset())
        };
        let closed: Vec<_> = self
            .segments_from(from)
            .take_while(|seg| seg.base_offset() < below)
            .collect();
        let moved = closed
            .iter()
            .try_for_each(|seg| seg.flush())
            .and_then(|()| {
                // A flush meanwhile may have moved the point further: it is
                // persisted as it stands.
                let mut inner = self.lock_inner()?;
                let point = inner.recovery_point.max(below);
                checkpoint::write_offset(&self.dir.join(RECOVERY_POINT_FILE), point)?;
                // One message per offset since the last flush (see `append`).
                let covered = u64::try_from(point - inner.recovery_point).unwrap_or(0);
                inner.unflushed_messages = inner.unflushed_messages.saturating_sub(covered);
                inner.recovery_point = point;
                inner.last_flush_ms = self.clock.now_ms();
                Ok(())
            });
        if let Err(e) = moved {
            self.roll_flush_due.store(true, Ordering::Release);
            return Err(e);
        }
        Ok(true)
    }

    /// fsyncs all unflushed data and moves the recovery point to the log end.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error.
    pub fn flush(&self) -> Result<(), LogError> {
        let mut inner = self.lock_inner()?;
        let now = self.clock.now_ms();
        self.flush_locked(&mut inner, now)
    }

    /// Clean shutdown: flush, trim the active indexes, snapshot producer
    /// state at the log end, persist the recovery point and write the clean
    /// shutdown marker. Later calls fail with [`LogError::Closed`].
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error.
    pub fn close(&self) -> Result<(), LogError> {
        let mut inner = self.lock_inner()?;
        let now = self.clock.now_ms();
        self.flush_locked(&mut inner, now)?;
        let active = self.active_segment();
        // Kafka appends the final time-index entry on close too.
        active.seal()?;
        // A clean start trusts the active segment's indexes: make them durable.
        active.flush()?;
        let leo = self.log_end_offset();
        inner.producers.write_snapshot(&self.dir, leo)?;
        checkpoint::write_offset(&self.dir.join(RECOVERY_POINT_FILE), leo)?;
        checkpoint::write_atomic(&self.dir.join(checkpoint::CLEAN_SHUTDOWN_FILE), b"")?;
        self.closed.store(true, Ordering::Release);
        Ok(())
    }

    /// Removes the partition directory and all its files.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] if the directory cannot be removed.
    pub fn delete(self) -> Result<(), LogError> {
        let _inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.closed.store(true, Ordering::Release);
        std::fs::remove_dir_all(&self.dir).map_err(LogError::io(&self.dir))
    }
}

/// Iterator behind [`Log::segments_from`].
pub(crate) struct SegmentCursor<'a> {
    log: &'a Log,
    offset: i64,
    last_base: Option<i64>,
}

impl Iterator for SegmentCursor<'_> {
    type Item = Arc<Segment>;

    fn next(&mut self) -> Option<Arc<Segment>> {
        let segs = self
            .log
            .segments
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let idx = match self.last_base {
            None => segs
                .partition_point(|s| s.base_offset() <= self.offset)
                .saturating_sub(1),
            Some(base) => segs.partition_point(|s| s.base_offset() <= base),
        };
        let seg = segs.get(idx).map(Arc::clone)?;
        self.last_base = Some(seg.base_offset());
        Some(seg)
    }
}

fn file_mtime_ms(path: &Path) -> Option<i64> {
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    let since = modified.duration_since(std::time::UNIX_EPOCH).ok()?;
    i64::try_from(since.as_millis()).ok()
}

#[cold]
fn unreachable_empty() -> &'static Arc<Segment> {
    // Every code path keeps at least the active segment in the list; reaching
    // this would be a bug in this crate, not bad input.
    panic!("krabka-log: segment list is empty")
}

/// How far an append may go.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// Whatever it needs: a roll, a flush, a new epoch's checkpoint.
    Any,
    /// A write to the active segment, nothing more (see
    /// [`Log::try_append_as_leader`]).
    WriteOnly,
}

/// The answer of an append with [`Reach::Any`], which always has one.
fn unrestricted(appended: Result<Option<AppendInfo>, LogError>) -> Result<AppendInfo, LogError> {
    appended?.ok_or_else(|| LogError::invalid("an unrestricted append was deferred"))
}

/// Whether `flush.messages` or `flush.ms` call for a flush once `adding`
/// more messages are appended.
fn would_flush(inner: &Inner, config: &LogConfig, adding: u32, now: i64) -> bool {
    let unflushed = inner.unflushed_messages + u64::from(adding);
    let by_count = config.flush_messages.is_some_and(|n| unflushed >= n);
    let by_time = config.flush_ms.is_some_and(|ms| {
        unflushed > 0 && now - inner.last_flush_ms >= i64::try_from(ms).unwrap_or(i64::MAX)
    });
    by_count || by_time
}
