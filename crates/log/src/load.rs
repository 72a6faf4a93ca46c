//! Opening a partition directory: clean start without scanning, or crash
//! recovery from the recovery point.
//!
//! * Clean start (the `.kafka_cleanshutdown` marker is present): indexes are
//!   taken as they are (only rebuilt if they fail Kafka's sanity checks),
//!   each segment's end is found from its last index entry, producer state
//!   comes from the snapshot written at the log end. Nothing is scanned but
//!   the few batches after each segment's last index entry.
//! * Unclean start: segments before the one holding the persisted recovery
//!   point are trusted (they were flushed); from there every batch is checked
//!   (framing, CRC-32C, offsets), indexes and `.txnindex` are rebuilt, the
//!   log is truncated after the last valid batch and any later segment is
//!   deleted. Producer state is rebuilt from the latest snapshot at or below
//!   the first recovered segment plus a replay of the batches after it.

use {
    crate::{
        Clock, LogConfig, LogError,
        batch::{self, BatchHeader, ControlRecord},
        checkpoint::{
            self, CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_FILE, PARTITION_METADATA_FILE,
            RECOVERY_POINT_FILE,
        },
        leader_epoch::LeaderEpochCache,
        log::{Inner, Log},
        producer_state::{self, ProducerStateManager},
        recovery::{self, CorruptionPolicy, LossCause, OpenOptions, RecoveryReport, Removal},
        segment::{INDEX_SUFFIX, LOG_SUFFIX, Segment, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX},
        txn_index::AbortedTxnEntry,
    },
    std::{
        path::Path,
        sync::{
            Arc, Mutex, RwLock,
            atomic::{AtomicBool, AtomicI64, Ordering},
        },
    },
    uuid::Uuid,
};

fn remove_if_exists(path: &Path) -> Result<(), LogError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LogError::Io {
            path: path.to_path_buf(),
            source: e,
        }),
    }
}

/// Lists segment base offsets and removes leftovers of interrupted work
/// (temp files, cleaner output, index files without a log).
fn scan_dir(dir: &Path) -> Result<Vec<i64>, LogError> {
    let mut logs = Vec::new();
    let mut indexes = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(LogError::io(dir))? {
        let entry = entry.map_err(LogError::io(dir))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let path = entry.path();
        if name.ends_with(".tmp") || name.ends_with(".cleaned") || name.ends_with(".deleted") {
            remove_if_exists(&path)?;
        } else if let Some(base) = checkpoint::offset_from_file_name(name, LOG_SUFFIX) {
            logs.push(base);
        } else if let Some(base) = [INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX]
            .iter()
            .find_map(|s| checkpoint::offset_from_file_name(name, s))
        {
            indexes.push((base, path));
        }
    }
    logs.sort_unstable();
    for (base, path) in indexes {
        if logs.binary_search(&base).is_err() {
            remove_if_exists(&path)?;
        }
    }
    Ok(logs)
}

impl Log {
    /// Opens (recovering if needed) or creates the partition directory `dir`
    /// (named `<topic>-<partition>`) and writes `partition.metadata` with
    /// `topic_id`.
    ///
    /// # Errors
    ///
    /// [`LogError::TopicIdMismatch`] if the directory belongs to another
    /// topic id, [`LogError::CorruptFile`] for unreadable metadata files,
    /// [`LogError::Io`] on file errors.
    pub fn open(
        dir: &Path,
        topic_id: Uuid,
        config: LogConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Log, LogError> {
        Self::open_with(dir, topic_id, config, clock, OpenOptions::default())
    }

    /// [`Log::open`] with a choice of what recovery does with corruption
    /// (see [`crate::recovery`]); what it removed is in
    /// [`Log::recovery_report`].
    ///
    /// # Errors
    ///
    /// As [`Log::open`]; also [`LogError::CorruptLog`] when `options` refuse
    /// corruption and recovery met some (nothing is then removed).
    pub fn open_with(
        dir: &Path,
        topic_id: Uuid,
        config: LogConfig,
        clock: Arc<dyn Clock>,
        options: OpenOptions,
    ) -> Result<Log, LogError> {
        std::fs::create_dir_all(dir).map_err(LogError::io(dir))?;
        let meta_path = dir.join(PARTITION_METADATA_FILE);
        match checkpoint::read_optional(&meta_path)? {
            Some(text) => {
                let found = checkpoint::parse_partition_metadata(&meta_path, &text)?;
                if found != topic_id {
                    return Err(LogError::TopicIdMismatch {
                        dir: dir.to_path_buf(),
                        expected: topic_id,
                        found,
                    });
                }
            }
            None => checkpoint::write_atomic(
                &meta_path,
                checkpoint::partition_metadata_text(topic_id).as_bytes(),
            )?,
        }
        let clean_marker = dir.join(CLEAN_SHUTDOWN_FILE);
        let clean = clean_marker.exists();
        let now = clock.now_ms();
        let mut bases = scan_dir(dir)?;
        let stored_start = checkpoint::read_offset(&dir.join(LOG_START_OFFSET_FILE))?;
        let log_start_floor = crate::log::tiering::load_log_start_floor(dir)?;
        let stored_recovery_point = checkpoint::read_offset(&dir.join(RECOVERY_POINT_FILE))?;
        let recovery_point = stored_recovery_point.unwrap_or(0);
        let interval = config.index_interval_bytes;

        if bases.is_empty() {
            let base = stored_start.unwrap_or(0).max(0);
            Segment::create(dir, base, config.segment_index_bytes, now)?;
            bases.push(base);
        }
        let mut segments = Vec::with_capacity(bases.len());
        for base in &bases {
            segments.push(Segment::open(dir, *base, config.segment_index_bytes, now)?);
        }

        // Index of the first segment that must be recovered (unclean only;
        // every segment when asked to verify all).
        let first_recovered = if options.verify_all {
            0
        } else if clean {
            segments.len()
        } else {
            segments
                .partition_point(|s| s.base_offset() <= recovery_point)
                .saturating_sub(1)
        };
        let mut report = RecoveryReport {
            clean_start: clean,
            ..RecoveryReport::default()
        };
        let mut i = 0;
        while i < segments.len() {
            let Some(seg) = segments.get(i) else { break };
            let unflushed = i >= first_recovered;
            if !unflushed && !seg.load(interval)? {
                i += 1;
                continue;
            }
            if unflushed {
                seg.txn_index.reset(Vec::new())?;
            }
            // Kafka's LogSegment.recover checks every batch, CRC included.
            let (valid_end, file_size) = seg.rebuild(interval, true, |_, _| Ok(()))?;
            if valid_end == file_size {
                if !unflushed {
                    tracing::warn!(dir = %dir.display(), base = seg.base_offset(), "rebuilt inconsistent indexes (no data removed)");
                    report.rebuilt_indexes.push(seg.base_offset());
                }
                i += 1;
                continue;
            }
            let from_offset = seg.next_offset();
            let tail = recovery::analyse_tail(seg, valid_end, from_offset)?;
            // After an unclean shutdown the later segments were never
            // flushed past the recovery point: Kafka deletes them. A clean
            // start only cuts the segment that failed its checks.
            let later = segments.get(i + 1..).unwrap_or_default();
            let later_data = later.iter().any(|l| l.size() > 0);
            let reason = invalid_reason(seg, valid_end)?;
            let corrupt = tail.valid_after || later_data;
            if corrupt && options.corruption == CorruptionPolicy::Refuse {
                let mut records_after = tail.records;
                let mut bytes_after = file_size - valid_end;
                if unflushed {
                    for l in later {
                        let (records, bytes, _) = recovery::summarise(l)?;
                        records_after += records;
                        bytes_after += bytes;
                    }
                }
                return Err(LogError::CorruptLog {
                    dir: dir.to_path_buf(),
                    segment: seg.base_offset(),
                    position: valid_end,
                    offset: from_offset,
                    reason,
                    records_after,
                    bytes_after,
                });
            }
            seg.cut_to(valid_end)?;
            let removal = Removal {
                segment: seg.base_offset(),
                from_offset,
                to_offset: tail.end_offset,
                records: tail.records,
                bytes: file_size - valid_end,
                cause: if corrupt {
                    LossCause::Corruption { reason }
                } else {
                    LossCause::TornTail
                },
            };
            warn_removal(dir, &removal);
            report.removals.push(removal);
            if unflushed {
                for l in segments.drain(i + 1..) {
                    let (records, bytes, end) = recovery::summarise(&l)?;
                    l.delete_files(dir)?;
                    let removal = Removal {
                        segment: l.base_offset(),
                        from_offset: l.base_offset(),
                        to_offset: end,
                        records,
                        bytes,
                        cause: LossCause::AfterCorruption,
                    };
                    warn_removal(dir, &removal);
                    report.removals.push(removal);
                }
            }
            i += 1;
        }
        let first_base = segments.first().map_or(0, Segment::base_offset);
        let log_end = segments.last().map_or(first_base, Segment::next_offset);
        let log_start = stored_start
            .unwrap_or(first_base)
            .max(first_base)
            .min(log_end);

        // Producer state.
        let limit = if clean {
            log_end
        } else {
            segments
                .get(first_recovered)
                .map_or(log_end, Segment::base_offset)
        };
        let snapshots = producer_state::list_snapshots(dir)?;
        for offset in snapshots.iter().filter(|o| **o > log_end) {
            remove_if_exists(&producer_state::snapshot_path(dir, *offset))?;
        }
        let mut producers = ProducerStateManager::default();
        let mut replay_from = first_base;
        for offset in snapshots
            .iter()
            .rev()
            .filter(|o| **o <= limit && **o >= first_base)
        {
            let path = producer_state::snapshot_path(dir, *offset);
            let raw = std::fs::read(&path).map_err(LogError::io(&path))?;
            match ProducerStateManager::decode_snapshot(&path, &raw) {
                Ok(state) => {
                    producers = state;
                    replay_from = *offset;
                    break;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "dropping corrupt producer snapshot");
                    remove_if_exists(&path)?;
                }
            }
        }
        let segments: Vec<Arc<Segment>> = segments.into_iter().map(Arc::new).collect();
        let rebuilt_txn_from = segments
            .get(first_recovered)
            .map_or(i64::MAX, |s| s.base_offset());
        replay(&segments, replay_from, rebuilt_txn_from, &mut producers)?;

        let mut epochs = LeaderEpochCache::load(dir)?;
        epochs.truncate_from_end(log_end)?;
        epochs.truncate_from_start(log_start)?;
        if let Some(active) = segments.last() {
            active.activate()?;
            active.preallocate_indexes()?;
        }
        let recovered = !clean;
        let log = Log {
            dir: dir.to_path_buf(),
            topic_id,
            clock: Arc::clone(&clock),
            config: RwLock::new(config),
            segments: RwLock::new(segments),
            inner: Mutex::new(Inner::new(producers, recovery_point.min(log_end), now)),
            epochs: Mutex::new(epochs),
            log_start_offset: AtomicI64::new(log_start),
            log_start_floor: AtomicI64::new(log_start_floor),
            log_end_offset: AtomicI64::new(log_end),
            last_stable_offset: AtomicI64::new(log_end),
            closed: AtomicBool::new(false),
            roll_flush_due: AtomicBool::new(false),
            recovery: report,
        };
        {
            let inner = log
                .inner
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            log.update_lso(&inner);
        }
        if recovered {
            // What recovery validated is made durable, so the next crash
            // starts from here.
            log.flush()?;
        }
        // Unchanged files are not rewritten: a start on a full disk must
        // not need a free block.
        if stored_recovery_point != Some(log_end) {
            checkpoint::write_offset(&dir.join(RECOVERY_POINT_FILE), log_end)?;
        }
        if stored_start != Some(log_start) {
            checkpoint::write_offset(&dir.join(LOG_START_OFFSET_FILE), log_start)?;
        }
        remove_if_exists(&clean_marker)?;
        log.closed.store(false, Ordering::Release);
        Ok(log)
    }
}

/// Why the batch at `position` of `seg` is invalid, as the batch checks say.
fn invalid_reason(seg: &Segment, position: u64) -> Result<String, LogError> {
    let head = seg
        .read_raw(position, batch::HEADER_SIZE)?
        .unwrap_or_default();
    let Some(header) = BatchHeader::parse(&head) else {
        return Ok("an incomplete batch header".to_owned());
    };
    if header.magic != 2 {
        return Ok(format!("magic byte {} instead of 2", header.magic));
    }
    let end = position.saturating_add(header.size());
    if end > seg.file_len()? {
        return Ok(format!(
            "a batch of {} bytes runs past the end of the file",
            header.size()
        ));
    }
    let whole = seg
        .read_raw(position, header.size() as usize)?
        .unwrap_or_default();
    Ok(match batch::check_batch(&whole) {
        Err(e) => e.to_string(),
        Ok(_) => format!(
            "batch offsets {}..={} do not follow the previous batch",
            header.base_offset,
            header.last_offset()
        ),
    })
}

/// The WARN line of one recovery cut.
fn warn_removal(dir: &Path, r: &Removal) {
    let to = r
        .to_offset
        .map_or_else(|| "unknown".to_owned(), |t| t.to_string());
    tracing::warn!(
        partition = %dir.file_name().unwrap_or_default().to_string_lossy(),
        segment = r.segment,
        from_offset = r.from_offset,
        to_offset = %to,
        records = r.records,
        bytes = r.bytes,
        cause = %r.cause,
        "recovery removed data from the log"
    );
}

/// Replays batches from `from` to the end into producer state; aborted
/// transactions whose marker is at or after `rebuild_txn_from` are written
/// to the `.txnindex` of their segment (those indexes were reset).
fn replay(
    segments: &[Arc<Segment>],
    from: i64,
    rebuild_txn_from: i64,
    producers: &mut ProducerStateManager,
) -> Result<(), LogError> {
    let start_idx = segments
        .partition_point(|s| s.base_offset() <= from)
        .saturating_sub(1);
    for seg in segments.get(start_idx..).unwrap_or_default() {
        if seg.next_offset() <= from {
            continue;
        }
        let mut headers: Vec<(u64, BatchHeader)> = Vec::new();
        seg.scan_headers(0, |pos, h| {
            if h.base_offset >= from && h.has_producer_id() {
                headers.push((pos, *h));
            }
            true
        })?;
        for (pos, h) in headers {
            if !h.is_control() {
                producers.replay_data(&h);
                continue;
            }
            let bytes = seg.read_bytes(pos, h.size() as usize)?;
            let Ok(records) = batch::decode_records(&bytes) else {
                continue;
            };
            let Some(marker) = records.first().and_then(|r| {
                ControlRecord::parse(
                    r.key.as_deref().unwrap_or_default(),
                    r.value.as_deref().unwrap_or_default(),
                )
            }) else {
                continue;
            };
            let done = producers.complete_txn(
                h.producer_id,
                h.producer_epoch,
                marker.coordinator_epoch,
                marker.commit,
                h.base_offset,
                h.max_timestamp,
            );
            if done.aborted && h.base_offset >= rebuild_txn_from {
                let lso = producers
                    .first_unstable_offset()
                    .unwrap_or(h.base_offset + 1);
                seg.txn_index.append(AbortedTxnEntry {
                    producer_id: done.producer_id,
                    first_offset: done.first_offset,
                    last_offset: done.last_offset,
                    last_stable_offset: lso,
                })?;
            }
        }
    }
    Ok(())
}
