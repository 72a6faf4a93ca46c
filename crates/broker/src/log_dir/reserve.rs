//! A few megabytes kept aside so that the operations that free space still
//! work when the disk is full.
//!
//! Deleting a topic must rewrite the topic registry, DeleteRecords and
//! retention must write the log-start checkpoint, and a restart after a
//! crash writes the recovery point — each a small file written beside the
//! old one and renamed over it, which needs free blocks before it frees any.
//! On a full disk those writes fail, so the only way out would be deleting
//! files by hand. The reserve is an ordinary file of zeros in the log
//! directory (`.krabka-space-reserve`), written when there is room; an
//! operation that frees space and fails for lack of it removes the reserve
//! and tries once more ([`SpaceReserve::run_freeing`]). Housekeeping writes
//! the reserve again once the disk has room.

use std::{
    fs::{self, File},
    io::Write,
    path::{Path, PathBuf},
};

/// File name of the reserve inside the log directory.
pub const RESERVE_FILE: &str = ".krabka-space-reserve";

/// Size of the reserve: room for the registry of thousands of topics and a
/// few hundred checkpoint files.
pub const RESERVE_BYTES: u64 = 4 << 20;

/// The space reserve of one log directory.
#[derive(Debug)]
pub struct SpaceReserve {
    path: PathBuf,
    bytes: u64,
}

/// Whether `error`, or an error it was caused by, is the file system saying
/// it is out of space (`ENOSPC`) or quota (`EDQUOT`).
#[must_use]
pub fn is_out_of_space(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && (matches!(io.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
                || io.kind() == std::io::ErrorKind::StorageFull)
        {
            return true;
        }
        next = e.source();
    }
    false
}

impl SpaceReserve {
    /// The reserve of the log directory `dir` (nothing is written yet).
    #[must_use]
    pub fn new(dir: &Path) -> Self {
        Self::with_size(dir, RESERVE_BYTES)
    }

    /// A reserve of `bytes` (tests use small ones).
    #[must_use]
    pub fn with_size(dir: &Path, bytes: u64) -> Self {
        Self {
            path: dir.join(RESERVE_FILE),
            bytes,
        }
    }

    /// Whether the reserve is in place (at its full size).
    #[must_use]
    pub fn is_held(&self) -> bool {
        fs::metadata(&self.path).is_ok_and(|m| m.len() >= self.bytes)
    }

    /// Writes the reserve if it is missing or short; a reserve in place is
    /// left untouched (a start on a full disk writes nothing). Returns
    /// whether the reserve is now held.
    pub fn ensure(&self) -> bool {
        if self.is_held() {
            return true;
        }
        match self.write() {
            Ok(()) => true,
            Err(e) => {
                // A partial reserve would hold space without guaranteeing
                // any: give it back.
                let _ = fs::remove_file(&self.path);
                tracing::debug!(path = %self.path.display(), error = %e, "no room for the space reserve yet");
                false
            }
        }
    }

    fn write(&self) -> std::io::Result<()> {
        let mut file = File::create(&self.path)?;
        let zeros = vec![0u8; 64 << 10];
        let mut left = self.bytes;
        while left > 0 {
            let n = usize::try_from(left.min(zeros.len() as u64)).unwrap_or(zeros.len());
            file.write_all(zeros.get(..n).unwrap_or_default())?;
            left -= n as u64;
        }
        file.sync_all()?;
        krabka_ids::durable::sync_parent(&self.path).map_err(|e| e.source)
    }

    /// Gives the reserve's space back to the file system. Returns whether
    /// there was a reserve to give.
    pub fn release(&self) -> bool {
        match fs::remove_file(&self.path) {
            Ok(()) => {
                tracing::warn!(
                    path = %self.path.display(),
                    bytes = self.bytes,
                    "log directory is full: released the space reserve so that space can be freed"
                );
                crate::metrics::space_reserve_released();
                true
            }
            Err(_) => false,
        }
    }

    /// Runs `op`, an operation that frees space (or must work on a full
    /// disk); when it fails for lack of space, releases the reserve and runs
    /// it once more. `op` must be safe to repeat after a failure.
    ///
    /// # Errors
    ///
    /// `op`'s error when it fails for another reason, or again after the
    /// reserve is released (or there was none).
    pub fn run_freeing<T, E>(
        &self,
        mut op: impl FnMut() -> Result<T, E>,
        out_of_space: impl Fn(&E) -> bool,
    ) -> Result<T, E> {
        match op() {
            Err(e) if out_of_space(&e) && self.release() => op(),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn the_reserve_is_written_once_released_on_a_full_disk_and_recognised_in_error_chains() {
        let dir = tempfile::tempdir().unwrap();
        let reserve = SpaceReserve::with_size(dir.path(), 100_000);
        check!(!reserve.is_held());
        check!(reserve.ensure());
        check!(fs::metadata(dir.path().join(RESERVE_FILE)).unwrap().len() == 100_000);
        // In place: not rewritten.
        let before = fs::metadata(dir.path().join(RESERVE_FILE))
            .unwrap()
            .modified()
            .unwrap();
        check!(reserve.ensure());
        check!(
            fs::metadata(dir.path().join(RESERVE_FILE))
                .unwrap()
                .modified()
                .unwrap()
                == before
        );

        let full = || std::io::Error::from_raw_os_error(libc::ENOSPC);
        let mut calls = 0;
        let outcome: Result<u8, std::io::Error> = reserve.run_freeing(
            || {
                calls += 1;
                if calls == 1 { Err(full()) } else { Ok(7) }
            },
            |e| is_out_of_space(e),
        );
        check!(outcome.unwrap() == 7);
        check!(calls == 2);
        check!(!reserve.is_held());
        // Without a reserve left, the failure stands.
        let outcome: Result<u8, std::io::Error> =
            reserve.run_freeing(|| Err(full()), |e| is_out_of_space(e));
        check!(outcome.is_err());
        // Other failures are not retried.
        check!(reserve.ensure());
        let mut calls = 0;
        let _: Result<u8, std::io::Error> = reserve.run_freeing(
            || {
                calls += 1;
                Err(std::io::Error::other("broken"))
            },
            |e| is_out_of_space(e),
        );
        check!(calls == 1);
        check!(reserve.is_held());

        let wrapped = krabka_log::LogError::Io {
            path: "x".into(),
            source: full(),
        };
        check!(is_out_of_space(&wrapped));
        check!(!is_out_of_space(&krabka_log::LogError::Io {
            path: "x".into(),
            source: std::io::Error::other("eio"),
        }));
    }
}
