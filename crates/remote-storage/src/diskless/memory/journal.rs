//! The embedded store's journal: every change to the coordinator's state,
//! made durable before it takes effect, and replayed at open.
//!
//! A single node needs no database to run diskless topics, but its batch
//! order must survive `kill -9` like any acknowledged data. Because every
//! change is a deterministic [`Op`], the journal stores the ops themselves:
//!
//! ```text
//! entry = length (u32) | crc32c of sequence and op (u32) | sequence (u64) | op (JSON)
//! ```
//!
//! Once the journal passes [`COMPACT_AT_BYTES`] the whole state is written
//! as a snapshot (with the sequence of the last op it contains) and the
//! journal starts again empty; ops at or below the snapshot's sequence are
//! skipped on replay, so a crash between the two steps applies nothing
//! twice. A torn last entry (a crash mid-write: never acknowledged) is cut
//! off and reported; a damaged entry with valid data after it is
//! corruption and refuses to open, naming the file and position.

use {
    super::state::{MemoryState, Op},
    crate::RemoteStorageError,
    serde::{Deserialize, Serialize},
    std::{
        fs::{self, File, OpenOptions},
        io::Write as _,
        path::{Path, PathBuf},
    },
};

/// The journal file in the store's directory.
pub const JOURNAL_FILE: &str = "diskless-journal";
/// The snapshot file in the store's directory.
pub const SNAPSHOT_FILE: &str = "diskless-snapshot.json";
/// Journal size at which the state is snapshotted and the journal emptied.
pub const COMPACT_AT_BYTES: u64 = 64 << 20;
/// Largest entry the journal accepts (a commit of a full object of small
/// batches is a few MiB).
const MAX_ENTRY_BYTES: usize = 256 << 20;
const HEADER: usize = 4 + 4 + 8;

#[derive(Serialize, Deserialize)]
struct Snapshot {
    sequence: u64,
    state: MemoryState,
}

/// An open journal.
#[derive(Debug)]
pub(super) struct Journal {
    dir: PathBuf,
    file: File,
    len: u64,
    sequence: u64,
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> RemoteStorageError {
    let path = path.to_owned();
    move |e| RemoteStorageError::io(action, path, e)
}

fn corrupt(path: &Path, position: u64, reason: impl std::fmt::Display) -> RemoteStorageError {
    RemoteStorageError::CorruptLog {
        position,
        reason: format!("{}: {reason}", path.display()),
    }
}

impl Journal {
    /// Opens (or creates) the store in `dir`: loads the snapshot, replays
    /// the journal after it, cuts a torn last entry.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::Io`] on file errors;
    /// [`RemoteStorageError::CorruptLog`] for a snapshot that does not
    /// decode or a damaged entry that is not the last.
    pub(super) fn open(dir: &Path) -> Result<(Self, MemoryState), RemoteStorageError> {
        fs::create_dir_all(dir).map_err(io("create", dir))?;
        let snapshot_path = dir.join(SNAPSHOT_FILE);
        let (mut sequence, mut state) = match fs::read(&snapshot_path) {
            Ok(bytes) => {
                let s: Snapshot =
                    serde_json::from_slice(&bytes).map_err(|e| corrupt(&snapshot_path, 0, e))?;
                (s.sequence, s.state)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (0, MemoryState::default()),
            Err(e) => return Err(io("read", &snapshot_path)(e)),
        };
        let path = dir.join(JOURNAL_FILE);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io("read", &path)(e)),
        };
        let mut at = 0usize;
        while at < bytes.len() {
            match decode(&bytes[at..]) {
                Ok((len, seq, op)) => {
                    if seq > sequence {
                        state.apply(&op);
                        sequence = seq;
                    }
                    at += len;
                }
                Err(reason) => {
                    if !is_tail(&bytes[at..]) {
                        return Err(corrupt(&path, at as u64, reason));
                    }
                    tracing::warn!(
                        journal = %path.display(),
                        position = at,
                        bytes = bytes.len() - at,
                        %reason,
                        "cutting a torn last entry of the diskless journal (never acknowledged)"
                    );
                    break;
                }
            }
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io("open", &path))?;
        if at < bytes.len() {
            file.set_len(at as u64).map_err(io("truncate", &path))?;
            file.sync_all().map_err(io("fsync", &path))?;
        }
        krabka_ids::durable::sync_dir(dir).map_err(|e| io(e.action, &e.path)(e.source))?;
        Ok((
            Self {
                dir: dir.to_owned(),
                file,
                len: at as u64,
                sequence,
            },
            state,
        ))
    }

    /// Appends `op` durably (written and fsynced before this returns).
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::Io`] if it cannot be written; the journal is
    /// then cut back so a later append does not follow a partial entry.
    pub(super) fn append(&mut self, op: &Op) -> Result<(), RemoteStorageError> {
        let path = self.dir.join(JOURNAL_FILE);
        let entry = encode(self.sequence + 1, op).map_err(|e| corrupt(&path, self.len, e))?;
        let written = self
            .file
            .write_all(&entry)
            .and_then(|()| self.file.sync_data());
        if let Err(e) = written {
            let _ = self.file.set_len(self.len);
            return Err(io("append to", &path)(e));
        }
        self.len += entry.len() as u64;
        self.sequence += 1;
        Ok(())
    }

    /// Whether the journal has grown enough to be replaced by a snapshot.
    pub(super) fn wants_compaction(&self) -> bool {
        self.len >= COMPACT_AT_BYTES
    }

    /// Writes `state` (which holds every op journaled so far) as the
    /// snapshot, then empties the journal.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::Io`] if either step fails; the journal still
    /// holds every op then.
    pub(super) fn compact(&mut self, state: &MemoryState) -> Result<(), RemoteStorageError> {
        let snapshot_path = self.dir.join(SNAPSHOT_FILE);
        let bytes = serde_json::to_vec(&Snapshot {
            sequence: self.sequence,
            state: state.clone(),
        })
        .map_err(|e| corrupt(&snapshot_path, 0, e))?;
        krabka_ids::durable::write_atomic(&snapshot_path, &bytes)
            .map_err(|e| io(e.action, &e.path)(e.source))?;
        let path = self.dir.join(JOURNAL_FILE);
        self.file.set_len(0).map_err(io("truncate", &path))?;
        self.file.sync_all().map_err(io("fsync", &path))?;
        self.len = 0;
        Ok(())
    }
}

fn encode(sequence: u64, op: &Op) -> Result<Vec<u8>, String> {
    let json = serde_json::to_vec(op).map_err(|e| e.to_string())?;
    if json.len() > MAX_ENTRY_BYTES {
        return Err(format!(
            "journal entry of {} bytes is too large",
            json.len()
        ));
    }
    let mut body = Vec::with_capacity(8 + json.len());
    body.extend_from_slice(&sequence.to_be_bytes());
    body.extend_from_slice(&json);
    let mut entry = Vec::with_capacity(8 + body.len());
    entry.extend_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_be_bytes());
    entry.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
    entry.extend_from_slice(&body);
    Ok(entry)
}

/// Decodes the entry at the start of `bytes`: `(its length, sequence, op)`.
fn decode(bytes: &[u8]) -> Result<(usize, u64, Op), String> {
    if bytes.len() < HEADER {
        return Err(format!(
            "{} bytes is too short for an entry header",
            bytes.len()
        ));
    }
    let len = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
    if !(8..=MAX_ENTRY_BYTES + 8).contains(&len) || len > bytes.len() - 8 {
        return Err(format!("entry length {len} does not fit the bytes left"));
    }
    let body = &bytes[8..8 + len];
    let stored = u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
    if crc32c::crc32c(body) != stored {
        return Err("entry CRC-32C does not match".to_owned());
    }
    let mut sequence = [0; 8];
    sequence.copy_from_slice(&body[..8]);
    let op =
        serde_json::from_slice(&body[8..]).map_err(|e| format!("entry does not decode: {e}"))?;
    Ok((8 + len, u64::from_be_bytes(sequence), op))
}

/// Whether a damaged entry at the start of `bytes` can be a torn last
/// write: it claims to reach (or pass) the end of the file.
fn is_tail(bytes: &[u8]) -> bool {
    if bytes.len() < HEADER {
        return true;
    }
    let len = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
    len.saturating_add(8) >= bytes.len()
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        crate::diskless::{DisklessPartition, conformance::commit_of},
        assert2::check,
        uuid::Uuid,
    };

    fn reopen(dir: &Path) -> (Journal, MemoryState) {
        Journal::open(dir).unwrap()
    }

    fn hw(state: &MemoryState, p: DisklessPartition) -> i64 {
        state.info(&p).unwrap().high_watermark
    }

    #[test]
    fn replays_what_was_appended_and_cuts_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let p = DisklessPartition::new(Uuid::from_u128(3), 0);
        let ops = [
            Op::CreatePartitions(vec![p]),
            Op::Commit {
                commit: commit_of("a", &[(p, 5)]),
                now: 1,
            },
        ];
        {
            let (mut journal, mut state) = reopen(dir.path());
            for op in &ops {
                journal.append(op).unwrap();
                state.apply(op);
            }
            check!(hw(&state, p) == 5);
        }
        let (_, state) = reopen(dir.path());
        check!(hw(&state, p) == 5);
        // Half an entry at the end: a crash mid-write.
        let path = dir.path().join(JOURNAL_FILE);
        let full = fs::read(&path).unwrap();
        let entry = encode(3, &ops[1]).unwrap();
        let mut torn = full.clone();
        torn.extend_from_slice(&entry[..entry.len() / 2]);
        fs::write(&path, &torn).unwrap();
        let (mut journal, state) = reopen(dir.path());
        check!(hw(&state, p) == 5);
        check!(fs::read(&path).unwrap() == full, "the torn tail is cut off");
        journal
            .append(&Op::Commit {
                commit: commit_of("b", &[(p, 1)]),
                now: 2,
            })
            .unwrap();
        drop(journal);
        check!(hw(&reopen(dir.path()).1, p) == 6);
    }

    #[test]
    fn damage_before_the_last_entry_refuses_to_open() {
        let dir = tempfile::tempdir().unwrap();
        let p = DisklessPartition::new(Uuid::from_u128(4), 0);
        {
            let (mut journal, _) = reopen(dir.path());
            journal.append(&Op::CreatePartitions(vec![p])).unwrap();
            journal
                .append(&Op::Commit {
                    commit: commit_of("a", &[(p, 1)]),
                    now: 1,
                })
                .unwrap();
        }
        let path = dir.path().join(JOURNAL_FILE);
        let mut bytes = fs::read(&path).unwrap();
        bytes[HEADER + 2] ^= 0x40;
        fs::write(&path, &bytes).unwrap();
        let e = Journal::open(dir.path()).unwrap_err();
        check!(e.to_string().contains(JOURNAL_FILE));
        check!(e.to_string().contains("CRC-32C"));
    }

    #[test]
    fn a_snapshot_replaces_the_journal_and_nothing_is_applied_twice() {
        let dir = tempfile::tempdir().unwrap();
        let p = DisklessPartition::new(Uuid::from_u128(5), 0);
        let (mut journal, mut state) = reopen(dir.path());
        let create = Op::CreatePartitions(vec![p]);
        let commit = Op::Commit {
            commit: commit_of("a", &[(p, 2)]),
            now: 1,
        };
        for op in [&create, &commit] {
            journal.append(op).unwrap();
            state.apply(op);
        }
        // A crash after the snapshot but before the journal is emptied.
        let journal_bytes = fs::read(dir.path().join(JOURNAL_FILE)).unwrap();
        journal.compact(&state).unwrap();
        check!(fs::metadata(dir.path().join(JOURNAL_FILE)).unwrap().len() == 0);
        drop(journal);
        fs::write(dir.path().join(JOURNAL_FILE), &journal_bytes).unwrap();
        let (mut journal, state) = reopen(dir.path());
        check!(
            hw(&state, p) == 2,
            "the journaled commit is not applied again"
        );
        let later = Op::Commit {
            commit: commit_of("b", &[(p, 1)]),
            now: 2,
        };
        journal.append(&later).unwrap();
        drop(journal);
        check!(hw(&reopen(dir.path()).1, p) == 3);
    }
}
