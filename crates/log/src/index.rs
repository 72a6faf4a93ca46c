//! Kafka's sparse `.index` and `.timeindex` files.
//!
//! Entries live in memory (a sorted `Vec`) for lookups and are mirrored to the
//! file with positional writes, so a lookup never touches the disk. Like
//! Kafka, the file of the active segment is preallocated to
//! `segment.index.bytes` and trimmed to its entries when the segment is
//! rolled or the log closed; an index opened from a preallocated file is seen
//! as "full of zero entries", which fails [`SparseIndex::sanity_check`] and is
//! rebuilt from the segment.
//!
//! No descriptor is held: the file is opened for each write (entries reach
//! it in groups of [`WRITE_BATCH`]), trim and fsync, so a broker's open files
//! do not grow with its segments.

use {
    crate::LogError,
    std::{
        fs::{File, OpenOptions},
        io::Read,
        os::unix::fs::FileExt,
        path::{Path, PathBuf},
        sync::RwLock,
    },
};

/// One fixed-size entry of an index file.
pub trait IndexEntry: Copy + std::fmt::Debug + PartialEq {
    /// Bytes per entry on disk.
    const SIZE: usize;
    /// Big-endian encoding.
    fn encode(&self, out: &mut [u8]);
    /// Big-endian decoding of exactly [`Self::SIZE`] bytes.
    fn decode(buf: &[u8]) -> Self;
}

/// `.index` entry: relative offset and byte position of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetEntry {
    /// Offset relative to the segment's base offset (the batch's last offset).
    pub relative_offset: u32,
    /// Byte position of the batch in the `.log` file.
    pub position: u32,
}

impl IndexEntry for OffsetEntry {
    const SIZE: usize = 8;
    fn encode(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&self.relative_offset.to_be_bytes());
        out[4..8].copy_from_slice(&self.position.to_be_bytes());
    }
    fn decode(buf: &[u8]) -> Self {
        let mut a = [0u8; 4];
        let mut b = [0u8; 4];
        a.copy_from_slice(&buf[0..4]);
        b.copy_from_slice(&buf[4..8]);
        Self {
            relative_offset: u32::from_be_bytes(a),
            position: u32::from_be_bytes(b),
        }
    }
}

/// `.timeindex` entry: a max timestamp so far and the offset it was seen at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeEntry {
    /// The largest timestamp in the segment up to `relative_offset`.
    pub timestamp: i64,
    /// Offset (relative to the segment base) of the batch holding it.
    pub relative_offset: u32,
}

impl IndexEntry for TimeEntry {
    const SIZE: usize = 12;
    fn encode(&self, out: &mut [u8]) {
        out[0..8].copy_from_slice(&self.timestamp.to_be_bytes());
        out[8..12].copy_from_slice(&self.relative_offset.to_be_bytes());
    }
    fn decode(buf: &[u8]) -> Self {
        let mut a = [0u8; 8];
        let mut b = [0u8; 4];
        a.copy_from_slice(&buf[0..8]);
        b.copy_from_slice(&buf[8..12]);
        Self {
            timestamp: i64::from_be_bytes(a),
            relative_offset: u32::from_be_bytes(b),
        }
    }
}

/// A sparse index file with its entries cached in memory.
#[derive(Debug)]
pub struct SparseIndex<E: IndexEntry> {
    path: PathBuf,
    entries: RwLock<Vec<E>>,
    max_entries: RwLock<usize>,
    /// The file held a partial trailing entry when opened.
    torn: std::sync::atomic::AtomicBool,
    /// Entries already in the file.
    written: std::sync::atomic::AtomicUsize,
}

/// Bytes read at a time when opening an index: a multiple of both entry sizes.
const OPEN_CHUNK: usize = 24 * 4096;

/// The file's entry bytes, without the zeroed space preallocation left
/// after them. An all-zero entry after the first can be no real entry
/// (relative offsets only grow), so reading stops there: the active segment's
/// indexes are preallocated to `segment.index.bytes` (10 MiB by default) and
/// after a crash still have that size, and reading and decoding all of it
/// for every partition made a start after `kill -9` take seconds.
fn read_entries<E: IndexEntry>(file: &mut File) -> std::io::Result<Vec<u8>> {
    let mut raw = Vec::new();
    let mut chunk = vec![0u8; OPEN_CHUNK];
    loop {
        let mut filled = 0;
        while filled < chunk.len() {
            match file.read(&mut chunk[filled..])? {
                0 => break,
                n => filled += n,
            }
        }
        let scanned_from = (raw.len() / E::SIZE).max(1);
        raw.extend_from_slice(&chunk[..filled]);
        let zero = raw
            .chunks_exact(E::SIZE)
            .enumerate()
            .skip(scanned_from)
            .find(|(_, e)| e.iter().all(|b| *b == 0))
            .map(|(i, _)| i);
        if let Some(i) = zero {
            raw.truncate(i * E::SIZE);
            return Ok(raw);
        }
        if filled < chunk.len() {
            return Ok(raw);
        }
    }
}

impl<E: IndexEntry> SparseIndex<E> {
    /// Opens (or creates) the index at `path`, reading every whole entry the
    /// file holds, and allows up to `max_bytes / SIZE` entries.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error.
    pub fn open(path: &Path, max_bytes: u64) -> Result<Self, LogError> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(LogError::io(path))?;
        let raw = read_entries::<E>(&mut file).map_err(LogError::io(path))?;
        let entries: Vec<E> = raw.chunks_exact(E::SIZE).map(E::decode).collect();
        let max_entries = (max_bytes as usize / E::SIZE).max(1);
        Ok(Self {
            path: path.to_path_buf(),
            entries: RwLock::new(entries),
            max_entries: RwLock::new(max_entries),
            torn: std::sync::atomic::AtomicBool::new(raw.len() % E::SIZE != 0),
            written: std::sync::atomic::AtomicUsize::new(raw.len() / E::SIZE),
        })
    }

    /// Opens the file for one operation (it exists since [`Self::open`]).
    fn file(&self) -> Result<File, LogError> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.path)
            .map_err(LogError::io(&self.path))
    }

    fn file_len(&self, file: &File) -> Result<u64, LogError> {
        Ok(file.metadata().map_err(LogError::io(&self.path))?.len())
    }

    /// Path of the index file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<E>> {
        self.entries
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Vec<E>> {
        self.entries
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn max(&self) -> usize {
        *self
            .max_entries
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Number of entries.
    #[must_use]
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether there are no entries.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether no further entry fits in `segment.index.bytes`.
    #[must_use]
    pub fn is_full(&self) -> bool {
        self.len() >= self.max()
    }

    /// The last entry.
    #[must_use]
    pub fn last(&self) -> Option<E> {
        self.read().last().copied()
    }

    /// A copy of all entries.
    #[must_use]
    pub fn entries(&self) -> Vec<E> {
        self.read().clone()
    }

    /// The last entry whose `key` is `<= target` (entries are sorted by key).
    pub fn floor_by<K: Ord>(&self, target: &K, key: impl Fn(&E) -> K) -> Option<E> {
        let entries = self.read();
        let idx = entries.partition_point(|e| key(e) <= *target);
        idx.checked_sub(1).and_then(|i| entries.get(i)).copied()
    }

    /// Appends an entry. Entries reach the file in groups of
    /// [`WRITE_BATCH`] (and on [`Self::trim`], [`Self::flush`],
    /// [`Self::sync`]); lookups are served from memory, and a crash loses at
    /// most entries that recovery rebuilds anyway (the active segment is
    /// always recovered from its data).
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a write error.
    pub fn append(&self, entry: E) -> Result<(), LogError> {
        let mut entries = self.write();
        entries.push(entry);
        let written = self.written();
        if entries.len() - written >= WRITE_BATCH {
            self.write_pending(&self.file()?, &entries)?;
        }
        Ok(())
    }

    fn written(&self) -> usize {
        self.written.load(std::sync::atomic::Ordering::Acquire)
    }

    fn write_pending(&self, file: &File, entries: &[E]) -> Result<(), LogError> {
        let written = self.written().min(entries.len());
        let pending = entries.get(written..).unwrap_or_default();
        if pending.is_empty() {
            return Ok(());
        }
        let mut raw = vec![0u8; pending.len() * E::SIZE];
        for (chunk, e) in raw.chunks_exact_mut(E::SIZE).zip(pending) {
            e.encode(chunk);
        }
        file.write_all_at(&raw, (written * E::SIZE) as u64)
            .map_err(LogError::io(&self.path))?;
        self.written
            .store(entries.len(), std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// Writes entries not yet in the file.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a write error.
    pub fn sync(&self) -> Result<(), LogError> {
        let entries = self.write();
        if entries.len() <= self.written() {
            return Ok(());
        }
        self.write_pending(&self.file()?, &entries)
    }

    /// Replaces all entries (used when rebuilding) and rewrites the file.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a write error.
    pub fn reset(&self, new: Vec<E>, preallocate: bool) -> Result<(), LogError> {
        let mut entries = self.write();
        let mut raw = vec![0u8; new.len() * E::SIZE];
        for (chunk, e) in raw.chunks_exact_mut(E::SIZE).zip(&new) {
            e.encode(chunk);
        }
        let file = self.file()?;
        file.set_len(0).map_err(LogError::io(&self.path))?;
        file.write_all_at(&raw, 0)
            .map_err(LogError::io(&self.path))?;
        self.written
            .store(new.len(), std::sync::atomic::Ordering::Release);
        *entries = new;
        self.torn.store(false, std::sync::atomic::Ordering::Relaxed);
        drop(entries);
        if preallocate {
            self.preallocate()?;
        }
        Ok(())
    }

    /// Forgets the entries from the `len`-th on, in memory only (an append
    /// that failed half way); entries already in the file past `len` are
    /// overwritten by the next writes.
    pub fn forget_from(&self, len: usize) {
        let mut entries = self.write();
        entries.truncate(len);
        if self.written() > len {
            self.written
                .store(len, std::sync::atomic::Ordering::Release);
        }
    }

    /// Drops entries for which `keep` is false from the end (truncation).
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a write error.
    pub fn truncate_while(&self, remove: impl Fn(&E) -> bool) -> Result<(), LogError> {
        let mut entries = self.write();
        while entries.last().is_some_and(&remove) {
            entries.pop();
        }
        let file = self.file()?;
        self.write_pending(&file, &entries)?;
        if self.written() > entries.len() {
            self.written
                .store(entries.len(), std::sync::atomic::Ordering::Release);
        }
        let len = (entries.len() * E::SIZE) as u64;
        let file_len = self.file_len(&file)?;
        if file_len > len {
            // Zero the dropped tail (the file may be preallocated) by cutting
            // it off and growing the file back: the regrown range reads as
            // zeros without writing them. Writing them cost 20 MiB per
            // partition of preallocated indexes on every start after a crash.
            file.set_len(len).map_err(LogError::io(&self.path))?;
            file.set_len(file_len).map_err(LogError::io(&self.path))?;
        }
        Ok(())
    }

    /// Grows the file to `segment.index.bytes` (Kafka preallocates the index
    /// of the active segment).
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error.
    pub fn preallocate(&self) -> Result<(), LogError> {
        let len = (self.max() * E::SIZE) as u64;
        let file = self.file()?;
        if self.file_len(&file)? < len {
            file.set_len(len).map_err(LogError::io(&self.path))?;
        }
        Ok(())
    }

    /// Sets a new entry limit (on config change).
    pub fn set_max_bytes(&self, max_bytes: u64) {
        *self
            .max_entries
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            (max_bytes as usize / E::SIZE).max(1);
    }

    /// Shrinks the file to exactly its entries (on roll and close).
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error.
    pub fn trim(&self) -> Result<(), LogError> {
        let entries = self.write();
        let file = self.file()?;
        self.write_pending(&file, &entries)?;
        let len = (entries.len() * E::SIZE) as u64;
        file.set_len(len).map_err(LogError::io(&self.path))
    }

    /// `fsync`s the file.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error.
    pub fn flush(&self) -> Result<(), LogError> {
        let entries = self.write();
        let file = self.file()?;
        self.write_pending(&file, &entries)?;
        // fsync is of the file: it covers writes through earlier descriptors.
        file.sync_data().map_err(LogError::io(&self.path))
    }
}

/// Entries buffered in memory before they are written to the index file.
pub const WRITE_BATCH: usize = 64;

impl SparseIndex<OffsetEntry> {
    /// Kafka's sanity rules: relative offsets and positions strictly
    /// increasing, positions inside the log file. (The zeroed tail of a
    /// preallocated file that was not trimmed is not read as entries, see
    /// `read_entries`.)
    #[must_use]
    pub fn sanity_check(&self, log_size: u64) -> bool {
        if self.torn.load(std::sync::atomic::Ordering::Relaxed) {
            return false;
        }
        let entries = self.read();
        entries
            .windows(2)
            .all(|w| w[0].relative_offset < w[1].relative_offset && w[0].position < w[1].position)
            && entries
                .first()
                .is_none_or(|e| e.position > 0 || entries.len() == 1 && e.relative_offset > 0)
            && entries
                .last()
                .is_none_or(|e| u64::from(e.position) < log_size)
    }
}

impl SparseIndex<TimeEntry> {
    /// Timestamps strictly increasing and relative offsets non-decreasing.
    #[must_use]
    pub fn sanity_check(&self) -> bool {
        if self.torn.load(std::sync::atomic::Ordering::Relaxed) {
            return false;
        }
        let entries = self.read();
        entries.windows(2).all(|w| {
            w[0].timestamp < w[1].timestamp && w[0].relative_offset <= w[1].relative_offset
        }) && !(entries.len() > 1
            && entries
                .first()
                .is_some_and(|e| e.timestamp == 0 && e.relative_offset == 0))
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn a_first_entry_of_zeros_is_kept_and_zeros_after_it_are_not_entries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.index");
        // Entry (0, 0), then the zeroed rest of a preallocated file larger
        // than one read.
        std::fs::write(&path, vec![0u8; 3 * OPEN_CHUNK + 8]).unwrap();
        check!(
            SparseIndex::<OffsetEntry>::open(&path, 1 << 20)
                .unwrap()
                .len()
                == 1
        );
        // Entries spanning several reads are all read.
        let mut bytes = Vec::new();
        for i in 0..(OPEN_CHUNK as u32 / 4) {
            bytes.extend_from_slice(&(i + 1).to_be_bytes());
            bytes.extend_from_slice(&((i + 1) * 10).to_be_bytes());
        }
        let n = bytes.len() / 8;
        bytes.resize(bytes.len() + 4096, 0);
        std::fs::write(&path, &bytes).unwrap();
        let idx = SparseIndex::<OffsetEntry>::open(&path, 1 << 24).unwrap();
        check!(idx.len() == n);
        check!(idx.sanity_check(u64::MAX));
        // Time index entries (12 bytes) too.
        let tpath = dir.path().join("0.timeindex");
        let mut t = Vec::new();
        for i in 0..5u32 {
            t.extend_from_slice(&(1_000 + i64::from(i)).to_be_bytes());
            t.extend_from_slice(&i.to_be_bytes());
        }
        t.resize(t.len() + 10 * 12, 0);
        std::fs::write(&tpath, &t).unwrap();
        check!(
            SparseIndex::<TimeEntry>::open(&tpath, 1 << 20)
                .unwrap()
                .len()
                == 5
        );
    }

    #[test]
    fn preallocated_file_reopens_with_its_entries_only_and_trimmed_reopens_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.index");
        let idx = SparseIndex::<OffsetEntry>::open(&path, 800).unwrap();
        idx.preallocate().unwrap();
        idx.append(OffsetEntry {
            relative_offset: 3,
            position: 100,
        })
        .unwrap();
        idx.append(OffsetEntry {
            relative_offset: 9,
            position: 300,
        })
        .unwrap();
        check!(std::fs::metadata(&path).unwrap().len() == 800);
        // Entries are buffered until a group is full or sync/trim/flush.
        check!(std::fs::read(&path).unwrap()[..16] == [0u8; 16]);
        idx.sync().unwrap();
        drop(idx);
        // The zeroed preallocated space after the entries is not read as
        // entries (it was 10 MiB of them per active segment after a crash).
        let reopened = SparseIndex::<OffsetEntry>::open(&path, 800).unwrap();
        check!(reopened.len() == 2);
        check!(reopened.sanity_check(1000));
        check!(std::fs::metadata(&path).unwrap().len() == 800);
        reopened.truncate_while(|e| e.position == 0).unwrap();
        check!(reopened.len() == 2);
        reopened.trim().unwrap();
        drop(reopened);
        let trimmed = SparseIndex::<OffsetEntry>::open(&path, 800).unwrap();
        check!(trimmed.len() == 2);
        check!(trimmed.sanity_check(1000));
        check!(
            trimmed.floor_by(&5u32, |e| e.relative_offset)
                == Some(OffsetEntry {
                    relative_offset: 3,
                    position: 100
                })
        );
        check!(trimmed.floor_by(&2u32, |e| e.relative_offset).is_none());
        check!(
            std::fs::read(&path).unwrap() == [0, 0, 0, 3, 0, 0, 0, 100, 0, 0, 0, 9, 0, 0, 1, 44]
        );
    }
}
