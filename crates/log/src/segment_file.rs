//! The `.log` file of a segment, held open only while it must be.
//!
//! A broker with ten thousand partitions cannot keep every segment's files
//! open under an ordinary `RLIMIT_NOFILE` (Kafka holds four per segment and
//! asks for 100,000 descriptors). The file is held while its segment is
//! active, because every append writes to it, and opened for each use
//! otherwise: a closed segment is read far less often than the active one
//! is written, and one `open` per fetch or lookup is cheap beside the read.
//!
//! A segment taken out of the log (deleted by retention, or replaced by its
//! compacted copy under the same name) is *retired*: its file is opened and
//! held before the name goes, so a reader that still holds the segment reads
//! the bytes it indexed — never the file that replaced them, nor a missing
//! one. An open by name happens under the read lock that retiring takes for
//! writing, so no reader can open the name after it changed hands.

use {
    crate::LogError,
    bytes::BytesMut,
    std::{
        fs::{File, OpenOptions},
        io::IoSlice,
        os::fd::AsRawFd,
        path::{Path, PathBuf},
        sync::{Arc, RwLock},
    },
};

/// Writes `parts`, one after the other, at `position` of `file` in as few
/// `pwritev` calls as the kernel allows: an append writes the client's
/// batch bytes where they lie, around the few header bytes it rewrote,
/// instead of first copying the whole request. A positioned write needs no
/// `lseek` first, and leaves the file's cursor alone.
///
/// # Errors
///
/// The first write error; a write that makes no progress is
/// [`std::io::ErrorKind::WriteZero`].
pub(crate) fn write_all_vectored_at(
    file: &File,
    parts: &[&[u8]],
    position: u64,
) -> std::io::Result<()> {
    // The kernel takes at most IOV_MAX (1024 on Linux) slices per call.
    const MAX_SLICES: usize = 1024;
    let mut slices: Vec<IoSlice<'_>> = parts
        .iter()
        .filter(|p| !p.is_empty())
        .map(|p| IoSlice::new(p))
        .collect();
    let mut rest = slices.as_mut_slice();
    let mut at = position;
    while !rest.is_empty() {
        let count = rest.len().min(MAX_SLICES);
        let offset = libc::off_t::try_from(at).map_err(std::io::Error::other)?;
        // SAFETY: `IoSlice` is ABI-compatible with `iovec` on Unix, and the
        // first `count` slices of `rest` point at live, readable memory.
        let n = unsafe {
            libc::pwritev(
                file.as_raw_fd(),
                rest.as_ptr().cast::<libc::iovec>(),
                libc::c_int::try_from(count).unwrap_or(libc::c_int::MAX),
                offset,
            )
        };
        if let Some(n) = progress(n, std::io::ErrorKind::WriteZero)? {
            IoSlice::advance_slices(&mut rest, n);
            at += n as u64;
        }
    }
    Ok(())
}

/// What a positioned read or write system call that returned `n` did:
/// `Some` bytes moved, `None` when a signal interrupted it (call again).
///
/// # Errors
///
/// The call's error; `none_left` when it moved nothing (end of file, or a
/// write that makes no progress).
fn progress(n: isize, none_left: std::io::ErrorKind) -> std::io::Result<Option<usize>> {
    match n {
        0 => Err(none_left.into()),
        n if n < 0 => {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                Ok(None)
            } else {
                Err(e)
            }
        }
        n => Ok(Some(n.unsigned_abs())),
    }
}

/// Reads exactly `len` bytes at `pos` of `file` into the spare capacity of
/// `buf` (appending them), without zero-filling that room first: a fetch
/// buffer is written once, by the read. `buf` grows if it lacks the room.
///
/// # Errors
///
/// The read's error; [`std::io::ErrorKind::UnexpectedEof`] if the file
/// ends first (what was read stays appended).
pub(crate) fn read_exact_at_uninit(
    file: &File,
    buf: &mut BytesMut,
    len: usize,
    pos: u64,
) -> std::io::Result<()> {
    buf.reserve(len);
    let mut done = 0usize;
    while done < len {
        let spare = buf.spare_capacity_mut();
        let want = (len - done).min(spare.len());
        let at = libc::off_t::try_from(pos + done as u64).map_err(std::io::Error::other)?;
        // SAFETY: `spare` is writable memory owned by `buf` of at least
        // `want` bytes; pread writes at most `want` bytes into it.
        let n = unsafe { libc::pread(file.as_raw_fd(), spare.as_mut_ptr().cast(), want, at) };
        if let Some(n) = progress(n, std::io::ErrorKind::UnexpectedEof)? {
            // SAFETY: pread initialized the first `n` bytes of the spare room.
            unsafe { buf.set_len(buf.len() + n) };
            done += n;
        }
    }
    Ok(())
}

/// A segment's `.log` file: a held descriptor, or its path to open.
#[derive(Debug)]
pub(crate) struct SegmentFile {
    path: PathBuf,
    held: RwLock<Option<Arc<File>>>,
}

fn open(path: &Path) -> Result<File, LogError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(LogError::io(path))
}

impl SegmentFile {
    /// The file at `path`, holding `file` (already open) if given.
    pub(crate) fn new(path: PathBuf, file: Option<File>) -> Self {
        Self {
            path,
            held: RwLock::new(file.map(Arc::new)),
        }
    }

    /// The open file: the held one, or a fresh descriptor closed when the
    /// caller drops it.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] if the file cannot be opened.
    pub(crate) fn get(&self) -> Result<Arc<File>, LogError> {
        let held = self
            .held
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(file) = held.as_ref() {
            return Ok(Arc::clone(file));
        }
        // Still under the read lock: `hold` waits for this open.
        Ok(Arc::new(open(&self.path)?))
    }

    /// Keeps the file open from now on (the segment became active, or is
    /// about to be retired).
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] if the file cannot be opened.
    pub(crate) fn hold(&self) -> Result<(), LogError> {
        let mut held = self
            .held
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if held.is_none() {
            *held = Some(Arc::new(open(&self.path)?));
        }
        Ok(())
    }

    /// Holds the file before its name is removed or replaced; a file
    /// already gone has nothing left to protect.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] if the file exists but cannot be opened.
    pub(crate) fn retire(&self) -> Result<(), LogError> {
        match self.hold() {
            Err(LogError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                Ok(())
            }
            other => other,
        }
    }

    /// Stops holding the file (the segment is no longer active); readers
    /// that took it keep their descriptor until they drop it.
    pub(crate) fn release(&self) {
        *self
            .held
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    /// Whether the file is held open.
    #[cfg(test)]
    pub(crate) fn is_held(&self) -> bool {
        self.held
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some()
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check, std::os::unix::fs::FileExt};

    #[test]
    fn vectored_writes_land_whole_at_their_position_beyond_the_kernels_slice_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.log");
        std::fs::write(&path, b"keep").unwrap();
        let file = open(&path).unwrap();
        // More parts than one writev takes (IOV_MAX is 1024), some empty.
        let owned: Vec<Vec<u8>> = (0..3000u32)
            .map(|i| vec![u8::try_from(i % 251).unwrap(); usize::try_from(i % 7).unwrap()])
            .collect();
        let parts: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
        write_all_vectored_at(&file, &parts, 4).unwrap();
        let expected: Vec<u8> = b"keep".iter().copied().chain(owned.concat()).collect();
        check!(std::fs::read(&path).unwrap() == expected);
        // A later write at an earlier position overwrites in place.
        write_all_vectored_at(&file, &[b"KE", b"EP"], 0).unwrap();
        check!(std::fs::read(&path).unwrap().get(..4) == Some(&b"KEEP"[..]));
    }

    #[test]
    fn a_retired_file_is_read_after_its_name_is_replaced_or_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.log");
        std::fs::write(&path, b"original").unwrap();
        let file = SegmentFile::new(path.clone(), None);
        check!(!file.is_held());
        let mut buf = [0u8; 8];
        file.get().unwrap().read_exact_at(&mut buf, 0).unwrap();
        check!(&buf == b"original");
        check!(!file.is_held());

        file.retire().unwrap();
        check!(file.is_held());
        let other = dir.path().join("cleaned");
        std::fs::write(&other, b"replaced").unwrap();
        std::fs::rename(&other, &path).unwrap();
        file.get().unwrap().read_exact_at(&mut buf, 0).unwrap();
        check!(&buf == b"original");
        std::fs::remove_file(&path).unwrap();
        file.get().unwrap().read_exact_at(&mut buf, 0).unwrap();
        check!(&buf == b"original");
    }

    #[test]
    fn retiring_a_file_already_gone_is_no_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = SegmentFile::new(dir.path().join("gone.log"), None);
        file.retire().unwrap();
        check!(!file.is_held());
        check!(file.get().is_err());
    }

    #[test]
    fn a_released_file_keeps_serving_readers_that_took_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("active.log");
        std::fs::write(&path, b"abc").unwrap();
        let file = SegmentFile::new(path.clone(), None);
        file.hold().unwrap();
        let taken = file.get().unwrap();
        file.release();
        check!(!file.is_held());
        std::fs::remove_file(&path).unwrap();
        let mut buf = [0u8; 3];
        taken.read_exact_at(&mut buf, 0).unwrap();
        check!(&buf == b"abc");
    }
}
