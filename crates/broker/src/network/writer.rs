//! How a connection writes its answers: bytes through a buffer, and the
//! record bytes of a local segment from the page cache, with `sendfile(2)`
//! on a plain TCP connection, as Kafka does.
//!
//! An answer is a frame ([`Reply::Frame`](crate::handlers::Reply)) or a
//! frame in [`Parts`]: byte runs around [`FileSlice`]s (a Fetch answer, see
//! `fetch::zero_copy`). [`SendFile`] is the one writer abstraction, with two
//! implementations: the owned write half of a `TcpStream` sends a slice
//! with `sendfile` on its descriptor (waiting for writability through tokio
//! when the socket is full); the write half of any other stream (TLS),
//! which must see the bytes to encrypt them, reads the slice from the file
//! [`CHUNK`] bytes at a time and writes each, as Kafka's SSL transport
//! does. Either way the answer holds no memory for its records, and a TLS
//! client decrypts the first chunk while the broker reads the next. Bytes
//! queued before a slice are flushed first, so the frame goes out in order.
//!
//! A peer that closes mid-answer ends the connection quietly; a segment
//! file shorter than its slice (cut under the read) ends it with a logged
//! reason: the client then sees a connection closed mid-frame, never
//! other bytes in place of its records.

use {
    crate::{fetch::budget::MemoryUnits, metrics},
    bytes::Bytes,
    krabka_log::FileSlice,
    std::{
        io,
        os::{fd::AsRawFd, unix::fs::FileExt},
    },
    tokio::{
        io::{AsyncWrite, AsyncWriteExt, BufWriter, Interest, WriteHalf},
        net::tcp::OwnedWriteHalf,
    },
};

/// Most bytes one `sendfile` call moves (Linux moves at most this much).
const SENDFILE_MAX: u64 = 0x7fff_f000;

/// Bytes of a file slice read at a time for a writer that must see them
/// (TLS): four TLS records, and below glibc's mmap threshold, so the
/// buffer comes from the heap again rather than from fresh pages.
pub const CHUNK: usize = 64 * 1024;

/// One piece of a frame.
#[derive(Debug)]
pub enum Part {
    /// Bytes in memory.
    Bytes(Bytes),
    /// Bytes of a segment file, sent from the page cache.
    File(FileSlice),
}

impl Part {
    /// Its size on the wire.
    #[must_use]
    pub fn len(&self) -> u64 {
        match self {
            Self::Bytes(b) => b.len() as u64,
            Self::File(f) => f.len(),
        }
    }

    /// Whether it is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A frame as pieces, with the fetch memory its bytes hold until written.
#[derive(Debug)]
pub struct Parts {
    parts: Vec<Part>,
    _units: Option<MemoryUnits>,
}

impl Parts {
    /// The frame `parts` (size prefix included); `units` shrink to the
    /// bytes the parts hold in memory and are given back once written.
    #[must_use]
    pub fn new(parts: Vec<Part>, units: Option<MemoryUnits>) -> Self {
        let memory: usize = parts
            .iter()
            .map(|p| match p {
                Part::Bytes(b) => b.len(),
                Part::File(_) => 0,
            })
            .sum();
        let units = units.map(|mut u| {
            u.shrink_to(memory);
            u
        });
        Self {
            parts,
            _units: units,
        }
    }

    /// The pieces, in order.
    #[must_use]
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }
}

/// Why writing an answer stopped.
#[derive(Debug, thiserror::Error)]
pub enum WriteEnd {
    /// The socket failed (usually: the peer went away). Routine.
    #[error("write failed: {0}")]
    Io(#[from] io::Error),
    /// The answer cannot be sent as it is; the connection closes with
    /// this reason logged.
    #[error("{0}")]
    Close(String),
}

/// The write half of a connection: an ordinary async writer that may also
/// send file slices (see the module docs).
pub trait SendFile: AsyncWrite + Unpin + Send + 'static {
    /// Sends `slice` (after everything written before, which the caller
    /// has flushed).
    ///
    /// # Errors
    ///
    /// [`WriteEnd::Io`] when the socket or the file read fails,
    /// [`WriteEnd::Close`] when the file is shorter than the slice.
    fn send_file(&mut self, slice: &FileSlice)
    -> impl Future<Output = Result<(), WriteEnd>> + Send;
}

impl SendFile for OwnedWriteHalf {
    async fn send_file(&mut self, slice: &FileSlice) -> Result<(), WriteEnd> {
        let stream: &tokio::net::TcpStream = self.as_ref();
        let (socket, file) = (stream.as_raw_fd(), slice.file().as_raw_fd());
        let end = slice.position().saturating_add(slice.len());
        let mut at = slice.position();
        while at < end {
            stream.writable().await?;
            let mut offset = libc::off_t::try_from(at).map_err(io::Error::other)?;
            let count = usize::try_from((end - at).min(SENDFILE_MAX)).unwrap_or(usize::MAX);
            let mut short = None;
            let sent = stream.try_io(Interest::WRITABLE, || {
                // SAFETY: both descriptors stay open for the call (the
                // stream and the slice's file are borrowed); the kernel
                // writes only `offset`.
                let n = unsafe { libc::sendfile(socket, file, &raw mut offset, count) };
                if n < 0 {
                    return Err(io::Error::last_os_error());
                }
                let n = n.unsigned_abs();
                if n > 0 && n < count && !file_ends_within(slice, at + n as u64) {
                    // A short send into a file that goes on means the socket
                    // is full, as tokio takes a short write to mean:
                    // reporting it as `WouldBlock` clears the readiness, so
                    // the loop waits for room rather than calling
                    // `sendfile` again for an EAGAIN (which reads up to
                    // 64 KiB of the page cache into a pipe for nothing).
                    short = Some(n);
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                Ok(n)
            });
            let sent = match (sent, short) {
                (Err(_), Some(n)) => Ok(n),
                (sent, _) => sent,
            };
            match sent {
                Ok(0) => {
                    return Err(WriteEnd::Close(format!(
                        "segment file ends at byte {at}, before the {} bytes of the fetched records ({}..{end})",
                        end - at,
                        slice.position()
                    )));
                }
                Ok(n) => {
                    at += n as u64;
                    metrics::fetch_zero_copy_bytes(n as u64);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

/// Whether `slice`'s file ends at or before byte `at` (cut under the read),
/// or cannot be looked at: then a short `sendfile` is not a full socket,
/// and the next call finds out what it is.
fn file_ends_within(slice: &FileSlice, at: u64) -> bool {
    slice.file().metadata().map_or(true, |m| m.len() <= at)
}

impl<S: AsyncWrite + Send + 'static> SendFile for WriteHalf<S> {
    async fn send_file(&mut self, slice: &FileSlice) -> Result<(), WriteEnd> {
        let end = slice.position().saturating_add(slice.len());
        let mut at = slice.position();
        // The buffer lives for this slice only: an idle connection holds none.
        let size = usize::try_from(slice.len()).map_or(CHUNK, |len| len.min(CHUNK));
        let mut chunk = vec![0; size];
        while at < end {
            let want = usize::try_from(end - at).map_or(size, |left| left.min(size));
            // From the page cache, on this task, as `sendfile` reads.
            let read = slice.file().read_at(&mut chunk[..want], at)?;
            if read == 0 {
                return Err(WriteEnd::Close(format!(
                    "segment file ends at byte {at}, before the {} bytes of the fetched records ({}..{end})",
                    end - at,
                    slice.position()
                )));
            }
            self.write_all(&chunk[..read]).await?;
            at += read as u64;
            metrics::fetch_file_chunk_bytes(read as u64);
        }
        Ok(())
    }
}

/// Writes `parts` through `out`: bytes buffered, each file slice after
/// flushing what is buffered before it.
///
/// # Errors
///
/// As [`SendFile::send_file`], and [`WriteEnd::Io`] when a write fails.
pub async fn write_parts<W: SendFile>(
    out: &mut BufWriter<&mut W>,
    parts: &Parts,
) -> Result<(), WriteEnd> {
    for part in parts.parts() {
        match part {
            Part::Bytes(bytes) => out.write_all(bytes).await?,
            Part::File(slice) => {
                out.flush().await?;
                out.get_mut().send_file(slice).await?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        assert2::check,
        std::{io::Write, sync::Arc},
        tokio::{
            io::{AsyncRead, AsyncReadExt},
            net::{TcpListener, TcpStream},
        },
    };

    /// A connected pair: the broker's owned write half, and the client.
    async fn pair() -> (OwnedWriteHalf, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let (_read, write) = server.into_split();
        (write, client)
    }

    /// A file holding `junk` then `body`, and the slice of `body`.
    fn file_with(dir: &tempfile::TempDir, junk: usize, body: &[u8]) -> FileSlice {
        let path = dir.path().join("00000000000000000000.log");
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&vec![b'j'; junk]).unwrap();
        f.write_all(body).unwrap();
        let file = Arc::new(std::fs::File::open(&path).unwrap());
        FileSlice::new(file, junk as u64, body.len() as u64)
    }

    /// Writes "head", a slice of `body` and "tail" through `write`; the
    /// client, which starts reading after `late`, gets exactly those bytes.
    async fn head_slice_tail_arrive_in_order<W, C>(
        mut write: W,
        mut client: C,
        body: &[u8],
        late: std::time::Duration,
    ) where
        W: SendFile,
        C: AsyncRead + Unpin + Send + 'static,
    {
        let dir = tempfile::tempdir().unwrap();
        let slice = file_with(&dir, 4096 + 17, body);
        let parts = Parts::new(
            vec![
                Part::Bytes(Bytes::from_static(b"head")),
                Part::File(slice),
                Part::Bytes(Bytes::from_static(b"tail")),
            ],
            None,
        );
        let want_len = 8 + body.len();
        let reader = tokio::spawn(async move {
            tokio::time::sleep(late).await;
            let mut got = vec![0u8; want_len];
            client.read_exact(&mut got).await.unwrap();
            got
        });
        let mut out = BufWriter::new(&mut write);
        write_parts(&mut out, &parts).await.unwrap();
        out.flush().await.unwrap();
        let got = reader.await.unwrap();
        check!(got.get(..4) == Some(&b"head"[..]));
        check!(got.get(4..4 + body.len()) == Some(body));
        check!(got.get(4 + body.len()..) == Some(&b"tail"[..]));
    }

    /// A slice of `len` bytes of 7 after 10 bytes of junk, whose file is
    /// then cut `kept` bytes into the slice.
    fn cut_file(dir: &tempfile::TempDir, len: usize, kept: usize) -> FileSlice {
        let slice = file_with(dir, 10, &vec![7u8; len]);
        std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join("00000000000000000000.log"))
            .unwrap()
            .set_len(10 + kept as u64)
            .unwrap();
        slice
    }

    /// Sends a slice of `len` bytes whose file is cut `kept` bytes into it:
    /// the answer ends with the reason, and the client reads the bytes that
    /// existed, then the end: never others.
    async fn a_cut_file_ends_the_answer<W, C>(mut write: W, mut client: C, len: usize, kept: usize)
    where
        W: SendFile,
        C: AsyncRead + Unpin,
    {
        let dir = tempfile::tempdir().unwrap();
        let slice = cut_file(&dir, len, kept);
        let parts = Parts::new(vec![Part::File(slice)], None);
        let mut out = BufWriter::new(&mut write);
        let end = write_parts(&mut out, &parts).await.unwrap_err();
        let reason = format!("segment file ends at byte {}", 10 + kept);
        check!(matches!(&end, WriteEnd::Close(r) if r.contains(&reason)));
        drop(out);
        drop(write);
        let mut got = Vec::new();
        client.read_to_end(&mut got).await.unwrap();
        check!(got == vec![7u8; kept]);
    }

    #[tokio::test]
    async fn bytes_and_a_large_slice_arrive_in_order_through_a_full_socket() {
        let body: Vec<u8> = (0..32 << 20).map(|i: u32| (i % 251) as u8).collect();
        let (write, client) = pair().await;
        // The reader starts late: sendfile meets a full socket and waits.
        head_slice_tail_arrive_in_order(write, client, &body, std::time::Duration::from_millis(50))
            .await;
    }

    #[tokio::test]
    async fn a_file_cut_under_the_slice_ends_the_answer_with_a_reason() {
        let (write, client) = pair().await;
        a_cut_file_ends_the_answer(write, client, 1000, 490).await;
    }

    #[tokio::test]
    async fn a_file_cut_far_into_a_slice_ends_the_answer_through_a_full_socket() {
        // Short sends that fill the socket wait for room; the short send
        // that meets the cut must not wait for room that never comes.
        let (len, kept) = (8 << 20, 5 << 20);
        let dir = tempfile::tempdir().unwrap();
        let slice = cut_file(&dir, len, kept);
        let (mut write, mut client) = pair().await;
        let reader = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            let mut got = Vec::new();
            client.read_to_end(&mut got).await.unwrap();
            got
        });
        let parts = Parts::new(vec![Part::File(slice)], None);
        let mut out = BufWriter::new(&mut write);
        let end = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            write_parts(&mut out, &parts),
        )
        .await
        .expect("the answer ends within 30 s")
        .unwrap_err();
        check!(
            matches!(&end, WriteEnd::Close(r) if r.contains(&format!("ends at byte {}", 10 + kept)))
        );
        drop(out);
        drop(write);
        let got = reader.await.unwrap();
        check!(got.len() == kept);
        check!(got.iter().all(|&b| b == 7));
    }

    /// A stream that must see every byte (as TLS must to encrypt): the
    /// write half of a split in-memory pipe of `room` bytes, and its reader.
    fn piped(room: usize) -> (WriteHalf<tokio::io::DuplexStream>, tokio::io::DuplexStream) {
        let (server, client) = tokio::io::duplex(room);
        let (_read, write) = tokio::io::split(server);
        (write, client)
    }

    #[tokio::test]
    async fn a_stream_that_sees_the_bytes_gets_a_slice_read_in_chunks_in_order() {
        // Not a whole number of chunks, and not at a chunk's boundary,
        // through a pipe far smaller than a chunk.
        let body: Vec<u8> = (0..3 * CHUNK as u32 + 4321)
            .map(|i| (i % 251) as u8)
            .collect();
        let (write, client) = piped(1000);
        head_slice_tail_arrive_in_order(write, client, &body, std::time::Duration::ZERO).await;
    }

    #[tokio::test]
    async fn a_file_cut_under_a_chunked_slice_ends_the_answer_with_a_reason() {
        let (write, client) = piped(4 * CHUNK);
        a_cut_file_ends_the_answer(write, client, 2 * CHUNK, CHUNK + 5).await;
    }

    #[tokio::test]
    async fn a_peer_gone_mid_answer_is_a_write_failure() {
        let dir = tempfile::tempdir().unwrap();
        let slice = file_with(&dir, 0, &vec![1u8; 16 << 20]);
        let (mut write, client) = pair().await;
        drop(client);
        let parts = Parts::new(vec![Part::File(slice)], None);
        let mut out = BufWriter::new(&mut write);
        let end = write_parts(&mut out, &parts).await.unwrap_err();
        check!(matches!(end, WriteEnd::Io(_)));
    }
}
