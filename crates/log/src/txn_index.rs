//! Kafka's `.txnindex`: one 34-byte entry per aborted transaction whose
//! ABORT marker landed in the segment, so `read_committed` fetches can tell
//! consumers which producer ranges to drop.
//!
//! Entries live in memory; the file is opened only to be written or synced
//! (aborts are rare), so it holds no descriptor between times.

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

/// Bytes per `.txnindex` entry.
pub const ENTRY_SIZE: usize = 34;

/// One aborted transaction (Kafka's `AbortedTxn`, version 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxnEntry {
    /// The producer id.
    pub producer_id: i64,
    /// First offset of the transaction.
    pub first_offset: i64,
    /// Offset of the ABORT marker.
    pub last_offset: i64,
    /// The last stable offset once the transaction was completed.
    pub last_stable_offset: i64,
}

impl AbortedTxnEntry {
    fn encode(&self) -> [u8; ENTRY_SIZE] {
        let mut out = [0u8; ENTRY_SIZE];
        out[0..2].copy_from_slice(&0i16.to_be_bytes());
        out[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        out[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        out[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        out[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        out
    }

    fn decode(buf: &[u8]) -> Option<Self> {
        let i64_at = |at: usize| {
            buf.get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .map(i64::from_be_bytes)
        };
        let version = i16::from_be_bytes(buf.get(0..2)?.try_into().ok()?);
        if version != 0 {
            return None;
        }
        Some(Self {
            producer_id: i64_at(2)?,
            first_offset: i64_at(10)?,
            last_offset: i64_at(18)?,
            last_stable_offset: i64_at(26)?,
        })
    }
}

/// The `.txnindex` of one segment.
#[derive(Debug)]
pub struct TxnIndex {
    path: PathBuf,
    entries: RwLock<Vec<AbortedTxnEntry>>,
}

impl TxnIndex {
    /// Opens or creates the file and loads its entries (a torn trailing entry
    /// or one with an unknown version ends the list).
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error.
    pub fn open(path: &Path) -> Result<Self, LogError> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(LogError::io(path))?;
        let mut raw = Vec::new();
        file.read_to_end(&mut raw).map_err(LogError::io(path))?;
        let entries: Vec<_> = raw
            .chunks_exact(ENTRY_SIZE)
            .map_while(AbortedTxnEntry::decode)
            .collect();
        let index = Self {
            path: path.to_path_buf(),
            entries: RwLock::new(entries),
        };
        if raw.len() != index.len() * ENTRY_SIZE {
            index.rewrite_into(&file)?;
        }
        Ok(index)
    }

    /// Opens the file for one operation (it exists since [`Self::open`]).
    fn file(&self) -> Result<File, LogError> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.path)
            .map_err(LogError::io(&self.path))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<AbortedTxnEntry>> {
        self.entries
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Vec<AbortedTxnEntry>> {
        self.entries
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Number of entries.
    #[must_use]
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// All entries.
    #[must_use]
    pub fn entries(&self) -> Vec<AbortedTxnEntry> {
        self.read().clone()
    }

    /// Appends an entry.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a write error.
    pub fn append(&self, entry: AbortedTxnEntry) -> Result<(), LogError> {
        let mut entries = self.write();
        let at = (entries.len() * ENTRY_SIZE) as u64;
        self.file()?
            .write_all_at(&entry.encode(), at)
            .map_err(LogError::io(&self.path))?;
        entries.push(entry);
        Ok(())
    }

    /// Replaces all entries.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a write error.
    pub fn reset(&self, new: Vec<AbortedTxnEntry>) -> Result<(), LogError> {
        *self.write() = new;
        self.rewrite()
    }

    /// Drops entries whose marker is at or after `offset`.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a write error.
    pub fn truncate_to(&self, offset: i64) -> Result<(), LogError> {
        self.write().retain(|e| e.last_offset < offset);
        self.rewrite()
    }

    fn rewrite(&self) -> Result<(), LogError> {
        self.rewrite_into(&self.file()?)
    }

    fn rewrite_into(&self, file: &File) -> Result<(), LogError> {
        let entries = self.read();
        let raw: Vec<u8> = entries.iter().flat_map(AbortedTxnEntry::encode).collect();
        file.set_len(0).map_err(LogError::io(&self.path))?;
        file.write_all_at(&raw, 0).map_err(LogError::io(&self.path))
    }

    /// `fsync`s the file.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error.
    pub fn flush(&self) -> Result<(), LogError> {
        self.file()?.sync_data().map_err(LogError::io(&self.path))
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn entries_are_34_bytes_and_reload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.txnindex");
        let idx = TxnIndex::open(&path).unwrap();
        let e = AbortedTxnEntry {
            producer_id: 7,
            first_offset: 3,
            last_offset: 9,
            last_stable_offset: 10,
        };
        idx.append(e).unwrap();
        drop(idx);
        let raw = std::fs::read(&path).unwrap();
        check!(raw.len() == 34);
        check!(raw[0..2] == [0, 0]);
        check!(raw[2..10] == 7i64.to_be_bytes());
        check!(TxnIndex::open(&path).unwrap().entries() == vec![e]);
    }
}
