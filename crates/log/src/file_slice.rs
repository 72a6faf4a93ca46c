//! [`FileSlice`]: whole record batches left in a segment's `.log` file, for
//! a caller that sends them from the page cache (`sendfile`) instead of
//! reading them into memory.
//!
//! A slice holds the segment's open file, not its name: a segment deleted
//! by retention or replaced by its compacted copy after the read stays
//! readable through the slice, so the bytes sent are the bytes the read
//! found (see `segment_file`). The bytes of a slice never change: a
//! segment is only ever appended to past its published size.

use {
    bytes::{Bytes, BytesMut},
    std::{fs::File, sync::Arc},
};

/// `len` bytes at `position` of an open segment file: whole batches, the
/// same ones [`Log::read`](crate::Log::read) would have returned.
#[derive(Debug, Clone)]
pub struct FileSlice {
    file: Arc<File>,
    position: u64,
    len: u64,
}

impl FileSlice {
    /// The `len` bytes at `position` of `file` (the log makes them; a
    /// test may make its own).
    #[must_use]
    pub fn new(file: Arc<File>, position: u64, len: u64) -> Self {
        Self {
            file,
            position,
            len,
        }
    }

    /// The open file.
    #[must_use]
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Where the batches start in the file.
    #[must_use]
    pub fn position(&self) -> u64 {
        self.position
    }

    /// How many bytes they take.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the slice is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Reads the slice into memory (for an answer that goes out as one
    /// buffered frame).
    ///
    /// # Errors
    ///
    /// The read's error; [`std::io::ErrorKind::UnexpectedEof`] if the file
    /// is shorter than the slice (cut under the reader).
    pub fn read(&self) -> std::io::Result<Bytes> {
        let len = usize::try_from(self.len).map_err(std::io::Error::other)?;
        let mut buf = BytesMut::with_capacity(len);
        crate::segment_file::read_exact_at_uninit(&self.file, &mut buf, len, self.position)?;
        Ok(buf.freeze())
    }
}

/// Two slices are equal when they cover the same bytes of the same open file.
impl PartialEq for FileSlice {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.file, &other.file)
            && self.position == other.position
            && self.len == other.len
    }
}

impl Eq for FileSlice {}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn a_slice_reads_its_bytes_and_refuses_a_file_cut_under_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.log");
        std::fs::write(&path, b"0123456789").unwrap();
        let file = Arc::new(File::options().read(true).write(true).open(&path).unwrap());
        let slice = FileSlice::new(Arc::clone(&file), 3, 4);
        check!(slice.read().unwrap().as_ref() == b"3456");
        file.set_len(5).unwrap();
        check!(slice.read().unwrap_err().kind() == std::io::ErrorKind::UnexpectedEof);
    }
}
