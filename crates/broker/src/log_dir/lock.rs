//! The exclusive lock on a log directory (`<log.dir>/.lock`, Kafka's name).
//!
//! Two brokers writing the same partition files assign the same offsets to
//! different records, and whichever wrote last wins after a restart. Kafka
//! prevents that with an exclusive `flock` on `.lock` in every log
//! directory, held for the life of the process; Krabka does the same. The
//! lock is advisory and per open file description: the kernel drops it when
//! the process exits, however it exits (`kill -9` included), so a stale lock
//! never blocks a restart.

use std::{
    fs::{File, OpenOptions},
    os::fd::AsRawFd,
    path::{Path, PathBuf},
};

/// File name of the lock inside a log directory.
pub const LOCK_FILE: &str = ".lock";

/// A held lock on a log directory; released when dropped (or when the
/// process ends).
#[derive(Debug)]
pub struct DirLock {
    path: PathBuf,
    // Held open: closing the file releases the lock.
    _file: File,
}

/// Why a log directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process (or another broker in this one) holds the lock.
    #[error(
        "log directory {dir} is in use by another process: the lock on {lock} is held (another broker already runs on this directory)"
    )]
    InUse {
        /// The log directory.
        dir: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// The lock file cannot be opened or locked.
    #[error("cannot lock {path}: {source}")]
    Io {
        /// The lock file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl DirLock {
    /// Takes the exclusive lock on `dir` without waiting, creating the lock
    /// file (empty) when it does not exist.
    ///
    /// # Errors
    ///
    /// [`LockError::InUse`] when another holder has it, [`LockError::Io`]
    /// when the file cannot be opened or the lock call fails otherwise.
    pub fn acquire(dir: &Path) -> Result<Self, LockError> {
        let path = dir.join(LOCK_FILE);
        let io = |source| LockError::Io {
            path: path.clone(),
            source,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        // SAFETY: flock only reads the descriptor, which `file` owns and
        // keeps open for the call; no memory is passed.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            return Err(if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                LockError::InUse {
                    dir: dir.to_owned(),
                    lock: path,
                }
            } else {
                io(err)
            });
        }
        Ok(Self { path, _file: file })
    }

    /// The lock file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let first = DirLock::acquire(dir.path()).unwrap();
        check!(first.path() == dir.path().join(LOCK_FILE));
        let second = DirLock::acquire(dir.path());
        let Err(LockError::InUse { dir: named, .. }) = second else {
            panic!("a second lock was granted: {second:?}");
        };
        check!(named == dir.path());
        drop(first);
        check!(DirLock::acquire(dir.path()).is_ok());
    }

    #[test]
    fn a_missing_directory_is_an_io_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("absent");
        check!(matches!(
            DirLock::acquire(&missing),
            Err(LockError::Io { .. })
        ));
    }
}
