//! One log segment: `<base>.log` with its `.index`, `.timeindex` and
//! `.txnindex`.
//!
//! Appends are positional writes at the end of the file followed by an
//! occasional index entry; the committed size is published (atomically)
//! after the bytes are written, so readers use `read_at` up to that size
//! without any lock shared with the writer.
//!
//! Only the active segment holds a descriptor (of its `.log`, see
//! [`SegmentFile`]); the indexes live in memory and their files are opened
//! when written, so a partition costs one descriptor however many segments
//! it has.

use {
    crate::{
        LogError,
        batch::{self, BatchHeader, HEADER_SIZE},
        checkpoint::file_stem,
        file_slice::FileSlice,
        index::{OffsetEntry, SparseIndex, TimeEntry},
        segment_file::{SegmentFile, read_exact_at_uninit},
        txn_index::TxnIndex,
    },
    bytes::{Bytes, BytesMut},
    std::{
        fs::{File, OpenOptions},
        os::unix::fs::FileExt,
        path::{Path, PathBuf},
        sync::{
            Mutex, MutexGuard,
            atomic::{AtomicU64, Ordering},
        },
    },
};

/// File suffixes of a segment.
pub const LOG_SUFFIX: &str = ".log";
/// Offset index suffix.
pub const INDEX_SUFFIX: &str = ".index";
/// Time index suffix.
pub const TIME_INDEX_SUFFIX: &str = ".timeindex";
/// Aborted-transaction index suffix.
pub const TXN_INDEX_SUFFIX: &str = ".txnindex";

const SCAN_CHUNK: usize = 64 * 1024;
/// First chunk of a read; later chunks double.
const READ_CHUNK: usize = 64 * 1024;
const FIRST_SCAN_CHUNK: usize = 8 * 1024;
const SPARSE_SCAN_BATCH: u64 = 8 * 1024;
const RECOVERY_CHUNK: usize = 8 * 1024 * 1024;

/// Append-side statistics of a segment.
#[derive(Debug, Clone, Copy)]
pub struct SegmentStats {
    /// Offset after the last batch (the base offset if empty).
    pub next_offset: i64,
    /// Largest batch max timestamp (-1 if none).
    pub max_timestamp: i64,
    /// Last offset of the first batch holding `max_timestamp` (-1 if none).
    pub offset_of_max_timestamp: i64,
    /// Bytes appended since the last offset-index entry.
    pub bytes_since_last_index: u64,
    /// Max timestamp of the first batch (Kafka's rolling-based timestamp).
    pub first_batch_timestamp: Option<i64>,
    /// Creation time of the segment (clock ms).
    pub created_ms: i64,
}

/// One segment of a partition log.
#[derive(Debug)]
pub struct Segment {
    base_offset: i64,
    log_path: PathBuf,
    file: SegmentFile,
    size: AtomicU64,
    pub(crate) offset_index: SparseIndex<OffsetEntry>,
    pub(crate) time_index: SparseIndex<TimeEntry>,
    pub(crate) txn_index: TxnIndex,
    stats: Mutex<SegmentStats>,
}

/// Paths of the four files of a segment.
#[must_use]
pub fn segment_paths(dir: &Path, base: i64) -> [PathBuf; 4] {
    let stem = file_stem(base);
    [
        LOG_SUFFIX,
        INDEX_SUFFIX,
        TIME_INDEX_SUFFIX,
        TXN_INDEX_SUFFIX,
    ]
    .map(|s| dir.join(format!("{stem}{s}")))
}

impl Segment {
    /// Creates an empty segment at `base` (replacing any files there) with
    /// preallocated indexes. It is active: its `.log` stays open until
    /// [`Segment::deactivate`].
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error.
    pub fn create(dir: &Path, base: i64, index_bytes: u64, now_ms: i64) -> Result<Self, LogError> {
        let [log, index, time, txn] = segment_paths(dir, base);
        for path in [&index, &time, &txn] {
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
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&log)
            .map_err(LogError::io(&log))?;
        let segment = Self::with_files(
            base,
            log,
            Some(file),
            &index,
            &time,
            &txn,
            index_bytes,
            now_ms,
        )?;
        segment.offset_index.preallocate()?;
        segment.time_index.preallocate()?;
        Ok(segment)
    }

    /// Opens an existing segment. Indexes are loaded as they are on disk;
    /// call [`Segment::load`] or [`Segment::recover`] next. It holds no
    /// descriptor until [`Segment::activate`].
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error.
    pub fn open(dir: &Path, base: i64, index_bytes: u64, now_ms: i64) -> Result<Self, LogError> {
        let [log, index, time, txn] = segment_paths(dir, base);
        Self::with_files(base, log, None, &index, &time, &txn, index_bytes, now_ms)
    }

    #[allow(clippy::too_many_arguments)]
    fn with_files(
        base: i64,
        log_path: PathBuf,
        file: Option<File>,
        index: &Path,
        time: &Path,
        txn: &Path,
        index_bytes: u64,
        now_ms: i64,
    ) -> Result<Self, LogError> {
        let size = match &file {
            Some(file) => file.metadata(),
            None => std::fs::metadata(&log_path),
        }
        .map_err(LogError::io(&log_path))?
        .len();
        Ok(Self {
            base_offset: base,
            file: SegmentFile::new(log_path.clone(), file),
            size: AtomicU64::new(size),
            offset_index: SparseIndex::open(index, index_bytes)?,
            time_index: SparseIndex::open(time, index_bytes)?,
            txn_index: TxnIndex::open(txn)?,
            stats: Mutex::new(SegmentStats {
                next_offset: base,
                max_timestamp: -1,
                offset_of_max_timestamp: -1,
                bytes_since_last_index: 0,
                first_batch_timestamp: None,
                created_ms: now_ms,
            }),
            log_path,
        })
    }

    /// The base offset.
    #[must_use]
    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    /// Path of the `.log` file.
    #[must_use]
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The segment became the active one: its `.log` stays open for appends.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] if the file cannot be opened.
    pub fn activate(&self) -> Result<(), LogError> {
        self.file.hold()
    }

    /// The segment is closed (rolled): its `.log` is opened per read from now on.
    pub fn deactivate(&self) {
        self.file.release();
    }

    /// The segment leaves the log (its files are about to be deleted or
    /// replaced): its `.log` is held so that readers still holding the
    /// segment read what it indexed.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] if the file exists but cannot be opened.
    pub fn retire(&self) -> Result<(), LogError> {
        self.file.retire()
    }

    /// Committed size in bytes.
    #[must_use]
    pub fn size(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }

    /// Append-side statistics.
    #[must_use]
    pub fn stats(&self) -> SegmentStats {
        *self.lock_stats()
    }

    fn lock_stats(&self) -> MutexGuard<'_, SegmentStats> {
        self.stats
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Offset after the last batch.
    #[must_use]
    pub fn next_offset(&self) -> i64 {
        self.lock_stats().next_offset
    }

    fn relative(&self, offset: i64) -> u32 {
        u32::try_from((offset - self.base_offset).max(0)).unwrap_or(u32::MAX)
    }

    /// Whether `offset` fits a relative offset of this segment's indexes.
    #[must_use]
    pub fn can_hold_offset(&self, offset: i64) -> bool {
        offset >= self.base_offset && offset - self.base_offset <= i64::from(i32::MAX)
    }

    /// Whether an index is full (Kafka rolls then).
    #[must_use]
    pub fn indexes_full(&self) -> bool {
        self.offset_index.is_full() || self.time_index.is_full()
    }

    /// Appends whole, already validated batches (`buf`, with `batches` the
    /// position inside `buf` and header of each) and indexes them.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a write error.
    pub fn append(
        &self,
        buf: &[u8],
        batches: &[(usize, BatchHeader)],
        index_interval: u64,
    ) -> Result<(), LogError> {
        self.append_parts(&[buf], batches, index_interval)
    }

    /// Appends the bytes of `parts`, one after the other, as one append
    /// (see [`Segment::append`]); batch positions in `batches` are relative
    /// to the start of the first part.
    ///
    /// # Errors
    ///
    /// As [`Segment::append`].
    pub fn append_parts(
        &self,
        parts: &[&[u8]],
        batches: &[(usize, BatchHeader)],
        index_interval: u64,
    ) -> Result<(), LogError> {
        let start = self.size();
        let len: u64 = parts.iter().map(|p| p.len() as u64).sum();
        let file = self.file.get()?;
        if let Err(source) = crate::segment_file::write_all_vectored_at(&file, parts, start) {
            // Nothing is committed; give back the blocks a partial write
            // took (on a full disk), which what frees space may need.
            let _ = file.set_len(start);
            return Err(LogError::Io {
                path: self.log_path.clone(),
                source,
            });
        }
        let mut stats = self.lock_stats();
        let before = (*stats, self.offset_index.len(), self.time_index.len());
        for (at, header) in batches {
            if let Err(e) = self.index_batch(&mut stats, start + *at as u64, header, index_interval)
            {
                // Undo the whole append: the caller reports it as failed,
                // so its bytes must not stay behind to be read or to collide
                // with the offsets of the next append.
                *stats = before.0;
                self.offset_index.forget_from(before.1);
                self.time_index.forget_from(before.2);
                let _ = file.set_len(start);
                return Err(e);
            }
        }
        self.size.store(start + len, Ordering::Release);
        Ok(())
    }

    fn index_batch(
        &self,
        stats: &mut SegmentStats,
        position: u64,
        header: &BatchHeader,
        index_interval: u64,
    ) -> Result<(), LogError> {
        if header.max_timestamp > stats.max_timestamp {
            stats.max_timestamp = header.max_timestamp;
            stats.offset_of_max_timestamp = header.last_offset();
        }
        if stats.first_batch_timestamp.is_none() {
            stats.first_batch_timestamp = Some(header.max_timestamp);
        }
        if stats.bytes_since_last_index > index_interval {
            let position = u32::try_from(position).unwrap_or(u32::MAX);
            self.offset_index.append(OffsetEntry {
                relative_offset: self.relative(header.last_offset()),
                position,
            })?;
            self.maybe_append_time_entry(stats)?;
            stats.bytes_since_last_index = 0;
        }
        stats.bytes_since_last_index += header.size();
        stats.next_offset = header.next_offset();
        Ok(())
    }

    fn maybe_append_time_entry(&self, stats: &SegmentStats) -> Result<(), LogError> {
        if stats.max_timestamp < 0 {
            return Ok(());
        }
        if self
            .time_index
            .last()
            .is_none_or(|last| stats.max_timestamp > last.timestamp)
        {
            self.time_index.append(TimeEntry {
                timestamp: stats.max_timestamp,
                relative_offset: self.relative(stats.offset_of_max_timestamp),
            })?;
        }
        Ok(())
    }

    /// The segment stops being active: final time-index entry, then trim
    /// both indexes to their entries (Kafka's `onBecomeInactiveSegment`).
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error.
    pub fn seal(&self) -> Result<(), LogError> {
        let stats = self.stats();
        self.maybe_append_time_entry(&stats)?;
        self.offset_index.trim()?;
        self.time_index.trim()
    }

    /// Trims the indexes without sealing (clean shutdown of the active segment).
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error.
    pub fn trim_indexes(&self) -> Result<(), LogError> {
        self.offset_index.trim()?;
        self.time_index.trim()
    }

    /// `fsync`s the log and index files.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error.
    pub fn flush(&self) -> Result<(), LogError> {
        // A descriptor opened now syncs what any earlier one wrote: fsync
        // is of the file, not of the descriptor.
        self.file
            .get()?
            .sync_data()
            .map_err(LogError::io(&self.log_path))?;
        self.offset_index.flush()?;
        self.time_index.flush()?;
        self.txn_index.flush()
    }

    /// `fsync`s only the `.log` file. Enough for the active segment: after a
    /// crash recovery rebuilds its indexes from the data anyway.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error.
    pub fn flush_data(&self) -> Result<(), LogError> {
        self.file
            .get()?
            .sync_data()
            .map_err(LogError::io(&self.log_path))
    }

    /// Reads `len` bytes at `pos` (clamped to the committed size).
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a read error.
    pub fn read_bytes(&self, pos: u64, len: usize) -> Result<Bytes, LogError> {
        let size = self.size();
        let len = (len as u64).min(size.saturating_sub(pos)) as usize;
        let mut buf = BytesMut::zeroed(len);
        self.file
            .get()?
            .read_exact_at(&mut buf, pos)
            .map_err(LogError::io(&self.log_path))?;
        Ok(buf.freeze())
    }

    /// Walks batch headers from `pos` to the committed end, calling `f`
    /// with each position and header until it returns `false`. Reads in
    /// chunks; stops quietly at a torn or invalid header.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a read error.
    pub fn scan_headers(
        &self,
        mut pos: u64,
        mut f: impl FnMut(u64, &BatchHeader) -> bool,
    ) -> Result<(), LogError> {
        let end = self.size();
        if pos + HEADER_SIZE as u64 > end {
            return Ok(());
        }
        let file = self.file.get()?;
        // Lookups usually stop within one index interval: the first read
        // is small (a fetch on a plain connection copies nothing else: a
        // 64 KiB first read was 13% of the bytes it sent from 1 MiB
        // batches), later ones larger.
        let mut chunk = Vec::new();
        let mut first = true;
        // With large batches, reading only each header (one small pread per
        // batch) beats reading the bodies along.
        let mut sparse = false;
        while pos + HEADER_SIZE as u64 <= end {
            let want = match (sparse, first) {
                (true, _) => HEADER_SIZE,
                (false, true) => FIRST_SCAN_CHUNK,
                (false, false) => SCAN_CHUNK,
            };
            first = false;
            let n = ((end - pos) as usize).min(want);
            if chunk.len() < n {
                chunk.resize(n, 0);
            }
            let buf = chunk.get_mut(..n).unwrap_or_default();
            file.read_exact_at(buf, pos)
                .map_err(LogError::io(&self.log_path))?;
            let mut at = 0usize;
            while let Some(header) = buf.get(at..).and_then(BatchHeader::parse) {
                if header.magic != 2
                    || header.batch_length < (HEADER_SIZE - batch::LOG_OVERHEAD) as i32
                {
                    return Ok(());
                }
                let batch_pos = pos + at as u64;
                if batch_pos + header.size() > end {
                    return Ok(());
                }
                if !f(batch_pos, &header) {
                    return Ok(());
                }
                at += header.size() as usize;
                sparse = header.size() >= SPARSE_SCAN_BATCH;
            }
            if at == 0 {
                // Header straddles nothing we can parse (should not happen: n >= HEADER_SIZE).
                return Ok(());
            }
            pos += at as u64;
        }
        Ok(())
    }

    /// Position and header of the first batch whose last offset is `>= offset`.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a read error.
    pub fn find_batch(&self, offset: i64) -> Result<Option<(u64, BatchHeader)>, LogError> {
        let rel = self.relative(offset);
        let start = self
            .offset_index
            .floor_by(&rel, |e| e.relative_offset)
            .map_or(0, |e| u64::from(e.position));
        let mut found = None;
        self.scan_headers(start, |pos, h| {
            if h.last_offset() >= offset {
                found = Some((pos, *h));
                false
            } else {
                true
            }
        })?;
        Ok(found)
    }

    /// Whole batches from the one holding `offset`, at most `max_bytes`
    /// (at least one batch if `min_one_batch`), only batches whose last
    /// offset is below `max_offset`. Empty if nothing qualifies.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a read error.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<Bytes, LogError> {
        let Some((pos, first)) = self.find_batch(offset)? else {
            return Ok(Bytes::new());
        };
        if first.last_offset() >= max_offset {
            return Ok(Bytes::new());
        }
        let first_size = first.size() as usize;
        if first_size > max_bytes && !min_one_batch {
            return Ok(Bytes::new());
        }
        // What may come back: `max_bytes` (or the one first batch), never
        // past the published end. It is read in growing chunks that stop at
        // the first batch that does not qualify, so the buffer is sized by
        // what is returned, not by what the client asked for.
        let limit = max_bytes
            .max(first_size)
            .min(usize::try_from(self.size().saturating_sub(pos)).unwrap_or(usize::MAX));
        // Room for all of it at once (never grown by doubling, which would
        // leave the discarded halves in the allocator's arenas), but only
        // what is read is written (never zero-filled first), so untouched
        // room stays unbacked.
        let mut buf = BytesMut::with_capacity(limit);
        let file = self.file.get()?;
        let mut end = 0usize;
        let mut chunk = first_size.max(READ_CHUNK);
        loop {
            let have = buf.len();
            let want = chunk.min(limit - have);
            if want == 0 {
                break;
            }
            read_exact_at_uninit(&file, &mut buf, want, pos + have as u64)
                .map_err(LogError::io(&self.log_path))?;
            let mut done = false;
            while let Some(h) = buf.get(end..).and_then(BatchHeader::parse) {
                let size = h.size() as usize;
                if h.last_offset() >= max_offset || (end > 0 && end + size > max_bytes) {
                    done = true;
                    break;
                }
                if end + size > buf.len() {
                    // The next chunk must reach past this batch.
                    chunk = chunk.max(end + size - buf.len());
                    break;
                }
                end += size;
            }
            if done || buf.len() >= limit {
                break;
            }
            chunk = chunk.saturating_mul(2);
        }
        if buf.capacity() - end > end / 2 + READ_CHUNK {
            // Mostly slack (a read cut short by `max_offset`): keep only the batches.
            return Ok(Bytes::copy_from_slice(buf.get(..end).unwrap_or_default()));
        }
        buf.truncate(end);
        Ok(buf.freeze())
    }

    /// The batches [`Segment::read`] would return, as a slice of the open
    /// file instead of bytes: `None` if nothing qualifies. Only batch
    /// headers are read: the offset index leads past the batches that
    /// surely qualify (all those before an entry that is within `max_bytes`
    /// and below `max_offset`), and the headers after it decide the end.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a read error.
    pub fn read_slice(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<Option<FileSlice>, LogError> {
        let Some((pos, first)) = self.find_batch(offset)? else {
            return Ok(None);
        };
        if first.last_offset() >= max_offset {
            return Ok(None);
        }
        let first_size = first.size();
        let max_bytes = u64::try_from(max_bytes).unwrap_or(u64::MAX);
        if first_size > max_bytes && !min_one_batch {
            return Ok(None);
        }
        // Every batch from `pos` to an index entry qualifies if that entry
        // starts within `max_bytes` of `pos` and its batch (whose last
        // offset the entry holds) ends below `max_offset`.
        let within = pos.saturating_add(max_bytes).min(self.size());
        let by_bytes = self
            .offset_index
            .floor_by(&u32::try_from(within).unwrap_or(u32::MAX), |e| e.position);
        let by_offset = (max_offset > self.base_offset).then(|| {
            self.offset_index
                .floor_by(&self.relative(max_offset - 1), |e| e.relative_offset)
        });
        let jump = match (by_bytes, by_offset.flatten()) {
            (Some(a), Some(b)) => u64::from(a.position.min(b.position)),
            _ => pos,
        }
        .max(pos);
        let mut end = jump - pos;
        self.scan_headers(jump, |at, h| {
            let size = h.size();
            if at != pos + end
                || h.last_offset() >= max_offset
                || (end > 0 && end + size > max_bytes)
            {
                return false;
            }
            end += size;
            true
        })?;
        if end == 0 {
            return Ok(None);
        }
        Ok(Some(FileSlice::new(self.file.get()?, pos, end)))
    }

    /// Rebuilds indexes and stats from the file, from position 0, checking
    /// every batch (CRC included) when `verify`, and truncates the file after
    /// the last valid batch. `on_batch` sees each valid batch's header and
    /// bytes. Returns the number of bytes truncated.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error.
    pub fn recover(
        &self,
        index_interval: u64,
        verify: bool,
        on_batch: impl FnMut(&BatchHeader, &[u8]) -> Result<(), LogError>,
    ) -> Result<u64, LogError> {
        let (valid_end, file_size) = self.rebuild(index_interval, verify, on_batch)?;
        self.cut_to(valid_end)?;
        Ok(file_size - valid_end)
    }

    /// Size of the `.log` file on disk (which may exceed [`Segment::size`]
    /// while a rebuild found invalid bytes at its end).
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error.
    pub fn file_len(&self) -> Result<u64, LogError> {
        Ok(self
            .file
            .get()?
            .metadata()
            .map_err(LogError::io(&self.log_path))?
            .len())
    }

    /// Up to `len` bytes of the file at `pos`, whatever the committed size
    /// (recovery looks past it); `None` when the file ends first.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a read error.
    pub(crate) fn read_raw(&self, pos: u64, len: usize) -> Result<Option<Vec<u8>>, LogError> {
        let mut buf = vec![0u8; len];
        match self.file.get()?.read_exact_at(&mut buf, pos) {
            Ok(()) => Ok(Some(buf)),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
            Err(e) => Err(LogError::Io {
                path: self.log_path.clone(),
                source: e,
            }),
        }
    }

    /// Cuts the file at `valid_end` (found by [`Segment::rebuild`]).
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error.
    pub(crate) fn cut_to(&self, valid_end: u64) -> Result<(), LogError> {
        let file = self.file.get()?;
        let len = file.metadata().map_err(LogError::io(&self.log_path))?.len();
        if len > valid_end {
            file.set_len(valid_end)
                .map_err(LogError::io(&self.log_path))?;
        }
        Ok(())
    }

    /// Rebuilds indexes and stats as [`Segment::recover`] does, but leaves
    /// the file as it is: the committed size becomes the end of the last
    /// valid batch. Returns that end and the file's size.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error.
    pub(crate) fn rebuild(
        &self,
        index_interval: u64,
        verify: bool,
        mut on_batch: impl FnMut(&BatchHeader, &[u8]) -> Result<(), LogError>,
    ) -> Result<(u64, u64), LogError> {
        let file = self.file.get()?;
        let file_size = file.metadata().map_err(LogError::io(&self.log_path))?.len();
        self.offset_index.reset(Vec::new(), false)?;
        self.time_index.reset(Vec::new(), false)?;
        let mut stats = self.lock_stats();
        stats.next_offset = self.base_offset;
        stats.max_timestamp = -1;
        stats.offset_of_max_timestamp = -1;
        stats.bytes_since_last_index = 0;
        stats.first_batch_timestamp = None;
        let mut pos = 0u64;
        let mut valid_end = 0u64;
        let mut buf: Vec<u8> = Vec::new();
        'outer: while pos < file_size {
            let n = ((file_size - pos) as usize).min(RECOVERY_CHUNK);
            buf.resize(n, 0);
            file.read_exact_at(&mut buf, pos)
                .map_err(LogError::io(&self.log_path))?;
            let mut at = 0usize;
            loop {
                let rest = buf.get(at..).unwrap_or_default();
                if rest.is_empty() {
                    break;
                }
                let header = match BatchHeader::parse(rest) {
                    Some(h)
                        if h.magic == 2
                            && h.batch_length >= (HEADER_SIZE - batch::LOG_OVERHEAD) as i32 =>
                    {
                        h
                    }
                    Some(_) => break 'outer,
                    None if pos + (at as u64) + (HEADER_SIZE as u64) <= file_size && at > 0 => {
                        break;
                    }
                    None => break 'outer,
                };
                let size = header.size();
                if pos + at as u64 + size > file_size {
                    break 'outer;
                }
                if at as u64 + size > buf.len() as u64 {
                    if at == 0 {
                        // A batch larger than the chunk: read it whole.
                        buf.resize(size as usize, 0);
                        file.read_exact_at(&mut buf, pos)
                            .map_err(LogError::io(&self.log_path))?;
                        continue;
                    }
                    break;
                }
                let bytes = buf.get(at..at + size as usize).unwrap_or_default();
                if verify && batch::check_batch(bytes).is_err() {
                    break 'outer;
                }
                if header.base_offset < stats.next_offset
                    || !self.can_hold_offset(header.last_offset())
                {
                    break 'outer;
                }
                on_batch(&header, bytes)?;
                self.index_batch(&mut stats, pos + at as u64, &header, index_interval)?;
                at += size as usize;
                valid_end = pos + at as u64;
            }
            if at == 0 {
                break;
            }
            pos += at as u64;
        }
        drop(stats);
        self.size.store(valid_end, Ordering::Release);
        let next = self.next_offset();
        self.txn_index.truncate_to(next)?;
        // Rebuilt indexes go to disk now, not entry group by group.
        self.offset_index.sync()?;
        self.time_index.sync()?;
        Ok((valid_end, file_size))
    }

    /// Loads stats after a clean open without reading the data: indexes
    /// must pass their sanity checks, and the tail after the last index
    /// entry is scanned for the next offset and max timestamp. Returns
    /// `true` when that is not possible — an index fails its checks, its
    /// last entry names the wrong batch, or the tail does not end on a batch
    /// boundary — and the segment must be rebuilt from its data instead
    /// (which the caller does, reporting what a rebuild cuts).
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error.
    pub fn load(&self, _index_interval: u64) -> Result<bool, LogError> {
        let size = self.size();
        let sane = self.offset_index.sanity_check(size) && self.time_index.sanity_check();
        if !sane {
            return Ok(true);
        }
        let start = self
            .offset_index
            .last()
            .map_or(0, |e| u64::from(e.position));
        let mut stats = self.lock_stats();
        if let Some(t) = self.time_index.last() {
            stats.max_timestamp = t.timestamp;
            stats.offset_of_max_timestamp = self.base_offset + i64::from(t.relative_offset);
        }
        let mut next = self.base_offset;
        let mut end = start;
        let mut tail_bytes = 0;
        let mut first = None;
        let (mut max_ts, mut max_off) = (stats.max_timestamp, stats.offset_of_max_timestamp);
        drop(stats);
        let last_entry = self.offset_index.last();
        let mut entry_matches = last_entry.is_none();
        self.scan_headers(start, |pos, h| {
            if first.is_none() {
                first = Some(h.max_timestamp);
                entry_matches |= last_entry.is_some_and(|e| {
                    h.last_offset() == self.base_offset + i64::from(e.relative_offset)
                });
            }
            if h.max_timestamp > max_ts {
                max_ts = h.max_timestamp;
                max_off = h.last_offset();
            }
            next = h.next_offset();
            end = pos + h.size();
            tail_bytes += h.size();
            true
        })?;
        if !entry_matches || end != size {
            // The last index entry does not point at the batch it names, or
            // the tail does not end on a batch boundary.
            return Ok(true);
        }
        let mut stats = self.lock_stats();
        stats.next_offset = next;
        stats.max_timestamp = max_ts;
        stats.offset_of_max_timestamp = max_off;
        stats.bytes_since_last_index = tail_bytes;
        if start == 0 {
            stats.first_batch_timestamp = first;
        } else {
            // The first batch is far behind: read just its header.
            let head = self.read_bytes(0, HEADER_SIZE)?;
            stats.first_batch_timestamp = BatchHeader::parse(&head).map(|h| h.max_timestamp);
        }
        Ok(false)
    }

    /// Truncates the segment so it ends before `offset` (which must start a
    /// batch or lie past the end).
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error.
    pub fn truncate_to(&self, offset: i64, index_interval: u64) -> Result<(), LogError> {
        let Some((pos, _)) = self.find_batch(offset)? else {
            return Ok(());
        };
        self.file
            .get()?
            .set_len(pos)
            .map_err(LogError::io(&self.log_path))?;
        self.size.store(pos, Ordering::Release);
        self.recover(index_interval, false, |_, _| Ok(()))?;
        Ok(())
    }

    /// Largest timestamp in the segment, or -1.
    #[must_use]
    pub fn max_timestamp(&self) -> i64 {
        self.lock_stats().max_timestamp
    }

    /// Position and header of the first batch whose max timestamp is `>= ts`.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a read error.
    pub fn find_timestamp(&self, ts: i64) -> Result<Option<(u64, BatchHeader)>, LogError> {
        let start = match self.time_index.floor_by(&ts, |e| e.timestamp) {
            Some(t) => self
                .offset_index
                .floor_by(&t.relative_offset, |e| e.relative_offset)
                .map_or(0, |e| u64::from(e.position)),
            None => 0,
        };
        let mut found = None;
        self.scan_headers(start, |pos, h| {
            if h.max_timestamp >= ts {
                found = Some((pos, *h));
                false
            } else {
                true
            }
        })?;
        Ok(found)
    }

    /// Removes the segment's files.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error other than "not found".
    pub fn delete_files(&self, dir: &Path) -> Result<(), LogError> {
        self.retire()?;
        for path in segment_paths(dir, self.base_offset) {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(LogError::Io { path, source: e }),
            }
        }
        Ok(())
    }

    /// Sets the index entry limit (config change).
    pub fn set_index_bytes(&self, bytes: u64) {
        self.offset_index.set_max_bytes(bytes);
        self.time_index.set_max_bytes(bytes);
    }

    /// Preallocates the indexes (the segment is active again after a load).
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error.
    pub fn preallocate_indexes(&self) -> Result<(), LogError> {
        self.offset_index.preallocate()?;
        self.time_index.preallocate()
    }
}
