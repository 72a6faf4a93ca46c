//! Log compaction for `cleanup.policy=compact` (and `compact,delete`).
//!
//! Kafka's scheme, in small: a key → latest-offset map is built over the
//! dirty part of the log (from the cleaner checkpoint to the active segment,
//! never past the last stable offset nor into records younger than
//! `min.compaction.lag.ms`), bounded by `log.cleaner.dedupe.buffer.size`
//! (24 bytes per key as Kafka accounts: a 16-byte key hash and an 8-byte
//! offset; if the map fills, the pass stops at that batch and the rest waits
//! for the next pass). Then every closed segment below that end is rewritten
//! keeping a record unless a later offset of its key is in the map.
//! A log whose oldest dirty batch is older than `max.compaction.lag.ms` is
//! cleaned whatever its dirty ratio (KIP-354).
//! Tombstones older than `delete.retention.ms` are dropped, records of
//! aborted transactions are dropped, control batches are kept, offsets are
//! never renumbered. Batches that keep all their records are copied byte for
//! byte; others are re-encoded with the same codec by kafka-protocol's
//! encoder.
//!
//! A cleaned segment is written beside the original as `<base>.log.cleaned`
//! and swapped in under the append lock: the old indexes are removed first,
//! then the file renamed over the old `.log` and the indexes rebuilt from it.
//! A crash at any point leaves either the old or the new log with missing
//! indexes, which loading rebuilds; stray `.cleaned` files are removed.

use {
    crate::{
        CleanerConfig, LogError,
        batch::{self, BatchHeader},
        checkpoint::{self, CLEANER_OFFSET_FILE},
        log::Log,
        segment::{self, Segment},
    },
    bytes::{Bytes, BytesMut},
    kafka_protocol::records::{RecordBatchEncoder, RecordEncodeOptions},
    std::{
        collections::HashMap,
        hash::{DefaultHasher, Hash, Hasher},
        sync::{Arc, Condvar, Mutex, Weak},
        thread::JoinHandle,
        time::Duration,
    },
};

/// What one cleaning pass did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CleanStats {
    /// Segments rewritten.
    pub segments_cleaned: usize,
    /// Their bytes before.
    pub bytes_before: u64,
    /// Their bytes after.
    pub bytes_after: u64,
    /// Records dropped.
    pub records_removed: u64,
    /// The new first dirty offset (cleaner checkpoint).
    pub clean_end_offset: i64,
}

/// Bytes Kafka accounts per offset-map entry (MD5 hash + offset).
const MAP_ENTRY_BYTES: u64 = 24;

fn key_hash(key: &[u8]) -> u128 {
    let mut a = DefaultHasher::new();
    0u8.hash(&mut a);
    key.hash(&mut a);
    let mut b = DefaultHasher::new();
    1u8.hash(&mut b);
    key.hash(&mut b);
    (u128::from(a.finish()) << 64) | u128::from(b.finish())
}

struct AbortedRange {
    producer_id: i64,
    first: i64,
    last: i64,
}

fn is_aborted(ranges: &[AbortedRange], h: &BatchHeader) -> bool {
    h.is_transactional()
        && !h.is_control()
        && ranges.iter().any(|r| {
            r.producer_id == h.producer_id && r.first <= h.base_offset && h.base_offset <= r.last
        })
}

impl Log {
    /// The cleaner's first dirty offset (persisted checkpoint, at least the log start).
    #[must_use]
    pub fn first_dirty_offset(&self) -> i64 {
        let stored = checkpoint::read_offset(&self.dir.join(CLEANER_OFFSET_FILE))
            .ok()
            .flatten()
            .unwrap_or(0);
        stored.max(self.log_start_offset())
    }

    /// Share of the cleanable bytes that is dirty (0.0 when nothing is cleanable).
    #[must_use]
    pub fn dirty_ratio(&self) -> f64 {
        let (clean, dirty, _) = self.cleanable_bytes();
        if clean + dirty == 0 {
            0.0
        } else {
            dirty as f64 / (clean + dirty) as f64
        }
    }

    /// Clean bytes, dirty bytes and the upper bound offset of the cleanable range.
    fn cleanable_bytes(&self) -> (u64, u64, i64) {
        let config = self.config();
        let now = self.clock.now_ms();
        let first_dirty = self.first_dirty_offset();
        let segs = self.segment_list();
        let mut upper = segs
            .last()
            .map_or(0, |s| s.base_offset())
            .min(self.last_stable_offset());
        let lag = i64::try_from(config.min_compaction_lag_ms).unwrap_or(i64::MAX);
        if lag > 0 {
            if let Some(young) = segs
                .iter()
                .find(|s| s.max_timestamp() > now.saturating_sub(lag))
            {
                upper = upper.min(young.base_offset());
            }
        }
        let (mut clean, mut dirty) = (0, 0);
        for s in segs.iter().filter(|s| s.base_offset() < upper) {
            if s.next_offset() <= first_dirty {
                clean += s.size();
            } else {
                dirty += s.size();
            }
        }
        (clean, dirty, upper)
    }

    /// Whether a dirty closed segment below `upper` holds a batch older than
    /// `max.compaction.lag.ms`: the log is then cleaned whatever its dirty
    /// ratio (KIP-354, Kafka's `LogCleanerManager.maxCompactionDelay`).
    fn compaction_overdue(&self, config: &crate::LogConfig, upper: i64) -> bool {
        let Some(lag) = config
            .max_compaction_lag_ms
            .and_then(|l| i64::try_from(l).ok())
        else {
            return false;
        };
        let clean_until = self.clock.now_ms().saturating_sub(lag);
        let first_dirty = self.first_dirty_offset();
        self.segment_list()
            .iter()
            .filter(|s| s.base_offset() < upper && s.next_offset() > first_dirty)
            .filter_map(|s| s.stats().first_batch_timestamp)
            .any(|t| t >= 0 && t < clean_until)
    }

    /// One compaction pass if the log compacts and its dirty ratio reaches
    /// `min.cleanable.dirty.ratio` (or always with `force`). `None` if there
    /// was nothing to do.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error, [`LogError::CorruptRecord`] if a
    /// stored batch cannot be decoded.
    pub fn clean(
        &self,
        config: &CleanerConfig,
        force: bool,
    ) -> Result<Option<CleanStats>, LogError> {
        let log_config = self.config();
        if !log_config.cleanup_policy.compacts()
            || self.closed.load(std::sync::atomic::Ordering::Acquire)
        {
            return Ok(None);
        }
        let (clean, dirty, upper) = self.cleanable_bytes();
        if dirty == 0 && (!force || clean == 0) {
            return Ok(None);
        }
        let ratio = dirty as f64 / (clean + dirty) as f64;
        if !force
            && ratio < log_config.min_cleanable_dirty_ratio
            && !(dirty > 0 && self.compaction_overdue(&log_config, upper))
        {
            return Ok(None);
        }
        let first_dirty = self.first_dirty_offset();
        let segs: Vec<Arc<Segment>> = self
            .segment_list()
            .into_iter()
            .filter(|s| s.base_offset() < upper)
            .collect();
        let aborted: Vec<AbortedRange> = self
            .segment_list()
            .iter()
            .flat_map(|s| s.txn_index.entries())
            .map(|e| AbortedRange {
                producer_id: e.producer_id,
                first: e.first_offset,
                last: e.last_offset,
            })
            .collect();

        // 1. Offset map over the dirty range.
        let capacity = ((config.dedupe_buffer_size / MAP_ENTRY_BYTES) as f64
            * config.dedupe_buffer_load_factor)
            .max(1.0) as usize;
        let mut map: HashMap<u128, i64> = HashMap::new();
        let mut end = upper;
        'build: for seg in segs.iter().filter(|s| s.next_offset() > first_dirty) {
            for item in SegmentBatches::new(seg) {
                let (h, bytes) = item?;
                if h.next_offset() <= first_dirty || h.is_control() || is_aborted(&aborted, &h) {
                    continue;
                }
                if h.base_offset >= upper {
                    break 'build;
                }
                let records = batch::decode_records(&bytes)?;
                let new_keys = records
                    .iter()
                    .filter_map(|r| r.key.as_deref())
                    .filter(|k| !map.contains_key(&key_hash(k)))
                    .count();
                if map.len() + new_keys > capacity {
                    end = h.base_offset;
                    break 'build;
                }
                for r in &records {
                    if let Some(k) = r.key.as_deref() {
                        map.insert(key_hash(k), r.offset);
                    }
                }
            }
        }
        if end <= first_dirty && end < upper {
            tracing::warn!(dir = %self.dir.display(), "dedupe buffer too small for one batch of keys; skipping");
            return Ok(None);
        }

        // 2. Rewrite every closed segment below `end`.
        let delete_horizon = self
            .clock
            .now_ms()
            .saturating_sub(i64::try_from(log_config.delete_retention_ms).unwrap_or(i64::MAX));
        let mut stats = CleanStats {
            clean_end_offset: end,
            ..CleanStats::default()
        };
        for seg in segs.iter().filter(|s| s.base_offset() < end) {
            let cleaned_path = segment::segment_paths(&self.dir, seg.base_offset())[0]
                .with_extension("log.cleaned");
            let mut out = CleanedFile::create(&cleaned_path)?;
            let mut removed = 0u64;
            for item in SegmentBatches::new(seg) {
                let (h, bytes) = item?;
                if h.is_control() || h.base_offset >= end {
                    out.write(&bytes)?;
                    continue;
                }
                if is_aborted(&aborted, &h) {
                    removed += u64::try_from(h.record_count).unwrap_or(0);
                    continue;
                }
                let records = batch::decode_records(&bytes)?;
                let total = records.len();
                let kept: Vec<_> = records
                    .into_iter()
                    .filter(|r| {
                        if r.offset >= end {
                            return true;
                        }
                        let Some(k) = r.key.as_deref() else {
                            return true;
                        };
                        if map
                            .get(&key_hash(k))
                            .is_some_and(|latest| *latest > r.offset)
                        {
                            return false;
                        }
                        !(r.value.is_none() && r.timestamp < delete_horizon)
                    })
                    .collect();
                removed += (total - kept.len()) as u64;
                if kept.len() == total {
                    out.write(&bytes)?;
                } else if !kept.is_empty() {
                    let mut kept = kept;
                    let first = kept.first().map_or(h.base_offset, |r| r.offset);
                    for r in &mut kept {
                        // Keep the encoder on one batch: offset - sequence constant,
                        // base sequence as the original's at the first kept record.
                        let delta = (r.offset - first) as i32;
                        r.sequence = if h.base_sequence >= 0 {
                            h.base_sequence
                                .wrapping_add((first - h.base_offset) as i32)
                                .wrapping_add(delta)
                        } else {
                            delta - 1
                        };
                        r.partition_leader_epoch = h.partition_leader_epoch;
                    }
                    let mut buf = BytesMut::with_capacity(bytes.len());
                    RecordBatchEncoder::encode(
                        &mut buf,
                        kept.iter(),
                        &RecordEncodeOptions {
                            version: 2,
                            compression: h
                                .compression()
                                .unwrap_or(kafka_protocol::records::Compression::None),
                        },
                    )
                    .map_err(|e| LogError::corrupt(format!("re-encoding a cleaned batch: {e}")))?;
                    let mut buf = buf.to_vec();
                    if h.is_log_append_time() {
                        batch::set_log_append_time(&mut buf, h.max_timestamp);
                    }
                    out.write(&buf)?;
                }
            }
            if removed == 0 {
                drop(out);
                let _ = std::fs::remove_file(&cleaned_path);
                continue;
            }
            stats.segments_cleaned += 1;
            stats.bytes_before += seg.size();
            stats.bytes_after += out.finish()?;
            stats.records_removed += removed;
            self.swap_segment(seg, &cleaned_path)?;
        }
        checkpoint::write_offset(&self.dir.join(CLEANER_OFFSET_FILE), end)?;
        tracing::debug!(dir = %self.dir.display(), ?stats, "cleaned log");
        Ok(Some(stats))
    }

    /// Replaces `old` by the segment written (and fsynced) at `cleaned`.
    fn swap_segment(&self, old: &Arc<Segment>, cleaned: &std::path::Path) -> Result<(), LogError> {
        let config = self.config();
        let base = old.base_offset();
        let [log_path, index_path, time_path, _] = segment::segment_paths(&self.dir, base);
        let _inner = self.lock_inner()?;
        let still_there = self.segment_list().iter().any(|s| Arc::ptr_eq(s, old));
        if !still_there {
            let _ = std::fs::remove_file(cleaned);
            return Ok(());
        }
        // Readers still holding `old` keep reading its bytes, not the copy.
        old.retire()?;
        for path in [&index_path, &time_path] {
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(LogError::Io {
                        path: path.clone(),
                        source: e,
                    });
                }
            }
        }
        std::fs::rename(cleaned, &log_path).map_err(LogError::io(&log_path))?;
        let new = Segment::open(
            &self.dir,
            base,
            config.segment_index_bytes,
            self.clock.now_ms(),
        )?;
        new.recover(config.index_interval_bytes, false, |_, _| Ok(()))?;
        new.trim_indexes()?;
        new.flush()?;
        let mut list = self
            .segments
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(slot) = list.iter_mut().find(|s| Arc::ptr_eq(s, old)) {
            *slot = Arc::new(new);
        }
        Ok(())
    }
}

/// Bytes read at a time while cleaning (Kafka's `log.cleaner.io.buffer.size`).
const IO_CHUNK: usize = 512 * 1024;

/// Streams a segment's batches in `IO_CHUNK` reads, so cleaning a segment
/// never holds more than a chunk (or one larger batch) in memory.
struct SegmentBatches<'a> {
    seg: &'a Segment,
    pos: u64,
    end: u64,
    chunk: Bytes,
    chunk_start: u64,
}

impl<'a> SegmentBatches<'a> {
    fn new(seg: &'a Segment) -> Self {
        Self {
            seg,
            pos: 0,
            end: seg.size(),
            chunk: Bytes::new(),
            chunk_start: 0,
        }
    }

    fn ensure(&mut self, len: usize) -> Result<(), LogError> {
        let rel = (self.pos - self.chunk_start) as usize;
        if rel + len > self.chunk.len() {
            self.chunk = self.seg.read_bytes(self.pos, IO_CHUNK.max(len))?;
            self.chunk_start = self.pos;
        }
        Ok(())
    }
}

impl Iterator for SegmentBatches<'_> {
    type Item = Result<(BatchHeader, Bytes), LogError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos + batch::HEADER_SIZE as u64 > self.end {
            return None;
        }
        if let Err(e) = self.ensure(batch::HEADER_SIZE) {
            return Some(Err(e));
        }
        let rel = (self.pos - self.chunk_start) as usize;
        let header = self.chunk.get(rel..).and_then(BatchHeader::parse)?;
        if header.magic != 2 || self.pos + header.size() > self.end {
            return None;
        }
        let size = header.size() as usize;
        if let Err(e) = self.ensure(size) {
            return Some(Err(e));
        }
        let rel = (self.pos - self.chunk_start) as usize;
        if rel + size > self.chunk.len() {
            return None;
        }
        let bytes = self.chunk.slice(rel..rel + size);
        self.pos += size as u64;
        Some(Ok((header, bytes)))
    }
}

/// The `.log.cleaned` output, written through a buffer and fsynced at the end.
struct CleanedFile {
    path: std::path::PathBuf,
    writer: std::io::BufWriter<std::fs::File>,
    written: u64,
}

impl CleanedFile {
    fn create(path: &std::path::Path) -> Result<Self, LogError> {
        let file = std::fs::File::create(path).map_err(LogError::io(path))?;
        Ok(Self {
            path: path.to_path_buf(),
            writer: std::io::BufWriter::with_capacity(IO_CHUNK, file),
            written: 0,
        })
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), LogError> {
        use std::io::Write as _;
        self.writer
            .write_all(bytes)
            .map_err(LogError::io(&self.path))?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    fn finish(self) -> Result<u64, LogError> {
        let file = self.writer.into_inner().map_err(|e| LogError::Io {
            path: self.path.clone(),
            source: e.into_error(),
        })?;
        file.sync_all().map_err(LogError::io(&self.path))?;
        Ok(self.written)
    }
}

struct Shared {
    config: CleanerConfig,
    logs: Mutex<Vec<Weak<Log>>>,
    stop: Mutex<bool>,
    wake: Condvar,
}

/// Background compaction over registered logs, one pass every
/// `log.cleaner.backoff.ms` (or on [`LogCleaner::wake`]).
pub struct LogCleaner {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for LogCleaner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogCleaner")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

impl LogCleaner {
    /// A cleaner without a thread; passes run through [`LogCleaner::clean_once`].
    #[must_use]
    pub fn new(config: CleanerConfig) -> Self {
        Self {
            shared: Arc::new(Shared {
                config,
                logs: Mutex::new(Vec::new()),
                stop: Mutex::new(false),
                wake: Condvar::new(),
            }),
            thread: Mutex::new(None),
        }
    }

    /// A cleaner with its background thread started.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] if the thread cannot be spawned.
    pub fn start(config: CleanerConfig) -> Result<Self, LogError> {
        let cleaner = Self::new(config);
        let shared = Arc::clone(&cleaner.shared);
        let handle = std::thread::Builder::new()
            .name("krabka-log-cleaner".into())
            .spawn(move || run(&shared))
            .map_err(LogError::io("krabka-log-cleaner thread"))?;
        *cleaner
            .thread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(handle);
        Ok(cleaner)
    }

    /// Registers a log (kept by weak reference; dropped logs disappear).
    pub fn register(&self, log: &Arc<Log>) {
        self.shared
            .logs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Arc::downgrade(log));
    }

    /// Unregisters a log.
    pub fn unregister(&self, log: &Arc<Log>) {
        self.shared
            .logs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|w| w.upgrade().is_some_and(|l| !Arc::ptr_eq(&l, log)));
    }

    /// Wakes the thread for a pass now.
    pub fn wake(&self) {
        self.shared.wake.notify_all();
    }

    /// One pass over all registered logs; returns how many were cleaned.
    pub fn clean_once(&self) -> usize {
        pass(&self.shared)
    }

    /// Stops the thread and waits for it.
    pub fn shutdown(&self) {
        *self
            .shared
            .stop
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = true;
        self.shared.wake.notify_all();
        let handle = self
            .thread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }
}

impl Drop for LogCleaner {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn pass(shared: &Shared) -> usize {
    let logs: Vec<Arc<Log>> = {
        let mut list = shared
            .logs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        list.retain(|w| w.strong_count() > 0);
        list.iter().filter_map(Weak::upgrade).collect()
    };
    let mut cleaned = 0;
    for log in logs {
        match log.clean(&shared.config, false) {
            Ok(Some(_)) => cleaned += 1,
            Ok(None) => {}
            Err(e) => tracing::warn!(dir = %log.dir().display(), error = %e, "log cleaning failed"),
        }
    }
    cleaned
}

fn run(shared: &Shared) {
    loop {
        pass(shared);
        let stop = shared
            .stop
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *stop {
            return;
        }
        let (stop, _) = shared
            .wake
            .wait_timeout(stop, Duration::from_millis(shared.config.backoff_ms))
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *stop {
            return;
        }
    }
}
