//! A read-ahead buffer that exists only while bytes are waiting in it.
//!
//! Clients pipeline small requests, so one read should take several frames;
//! but an idle connection should cost almost nothing, and thousands of them
//! each holding a 64 KiB buffer would hold a lot. [`ReadAhead`] frees its
//! buffer once it has been drained ([`ReadAhead::release_if_drained`],
//! called before waiting for the next request); the first read after that
//! (the wait for the next request's size prefix) goes straight to the
//! stream, so nothing is allocated while the connection waits, and the
//! reads after it share one buffer again. Reads at least as large as the
//! buffer bypass it.
//!
//! Under a TLS stream it serves the other way round: rustls asks the
//! socket for at most 4 KiB at a time, so a 1 MiB produce request would
//! take 256 system calls; read ahead, it takes a few. There nobody calls
//! [`ReadAhead::release_if_drained`], so the buffer is also freed whenever
//! it is empty and the stream has nothing more (an idle TLS connection
//! holds none either). Writes pass straight through.

use {
    std::{
        io,
        pin::Pin,
        task::{Context, Poll},
    },
    tokio::io::{AsyncRead, AsyncWrite, ReadBuf},
};

/// Buffered reads over `R` with a buffer allocated on demand.
#[derive(Debug)]
pub struct ReadAhead<R> {
    inner: R,
    capacity: usize,
    buf: Vec<u8>,
    pos: usize,
    /// Set by a read that returned data; cleared when the buffer is freed.
    warm: bool,
}

impl<R> ReadAhead<R> {
    /// Wraps `inner` with a read-ahead of up to `capacity` bytes.
    pub fn new(inner: R, capacity: usize) -> Self {
        Self {
            inner,
            capacity: capacity.max(1),
            buf: Vec::new(),
            pos: 0,
            warm: false,
        }
    }

    /// Bytes read ahead and not yet consumed.
    #[must_use]
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Frees the buffer if nothing is waiting in it.
    pub fn release_if_drained(&mut self) {
        if self.buffered() == 0 {
            self.buf = Vec::new();
            self.pos = 0;
            self.warm = false;
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for ReadAhead<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.buffered() == 0 {
            if !this.warm || out.remaining() >= this.capacity {
                let before = out.filled().len();
                let read = Pin::new(&mut this.inner).poll_read(cx, out);
                if matches!(read, Poll::Ready(Ok(()))) && out.filled().len() > before {
                    this.warm = true;
                }
                return read;
            }
            if this.buf.capacity() < this.capacity {
                this.buf = Vec::with_capacity(this.capacity);
            }
            this.buf.clear();
            this.pos = 0;
            let mut into = ReadBuf::uninit(this.buf.spare_capacity_mut());
            match Pin::new(&mut this.inner).poll_read(cx, &mut into) {
                Poll::Ready(Ok(())) => {}
                Poll::Pending => {
                    // Nothing waits: the connection may now sit idle.
                    this.release_if_drained();
                    return Poll::Pending;
                }
                other => return other,
            }
            let filled = into.filled().len();
            // SAFETY: the inner reader initialised the first `filled` bytes
            // of the spare capacity.
            unsafe { this.buf.set_len(filled) };
        }
        let n = this.buffered().min(out.remaining());
        out.put_slice(&this.buf[this.pos..this.pos + n]);
        this.pos += n;
        Poll::Ready(Ok(()))
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for ReadAhead<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        assert2::check,
        tokio::io::{AsyncReadExt, AsyncWriteExt, duplex},
    };

    #[tokio::test]
    async fn small_reads_share_one_fill_and_the_buffer_is_freed_when_drained() {
        let (mut client, server) = duplex(1 << 16);
        let mut reader = ReadAhead::new(server, 1024);
        check!(reader.buf.capacity() == 0);
        // Waiting for the first bytes allocates nothing.
        let mut four = [0u8; 4];
        check!(
            tokio::time::timeout(std::time::Duration::from_millis(20), reader.read(&mut four))
                .await
                .is_err()
        );
        check!(reader.buf.capacity() == 0);
        client.write_all(b"abcdefghijkl").await.unwrap();
        // The first read after idle goes to the stream, the next fills the
        // buffer with everything waiting.
        reader.read_exact(&mut four).await.unwrap();
        check!(&four == b"abcd");
        check!(reader.buf.capacity() == 0);
        reader.read_exact(&mut four).await.unwrap();
        check!(&four == b"efgh");
        check!(reader.buffered() == 4);
        reader.release_if_drained();
        check!(reader.buf.capacity() == 1024);
        reader.read_exact(&mut four).await.unwrap();
        check!(&four == b"ijkl");
        reader.release_if_drained();
        check!(reader.buf.capacity() == 0);
        // A large read bypasses the buffer.
        let big = vec![9u8; 4096];
        client.write_all(&big).await.unwrap();
        let mut got = vec![0u8; 4096];
        reader.read_exact(&mut got).await.unwrap();
        check!(got == big);
        drop(client);
        check!(reader.read(&mut four).await.unwrap() == 0);
    }

    #[tokio::test]
    async fn the_buffer_is_freed_when_the_stream_runs_dry_and_writes_pass_through() {
        let (mut client, server) = duplex(1 << 16);
        let mut stream = ReadAhead::new(server, 1024);
        client.write_all(b"abcdefgh").await.unwrap();
        let mut two = [0u8; 2];
        // Direct, then buffered: the rest waits in the buffer.
        stream.read_exact(&mut two).await.unwrap();
        stream.read_exact(&mut two).await.unwrap();
        check!(stream.buffered() == 4);
        let mut four = [0u8; 4];
        stream.read_exact(&mut four).await.unwrap();
        check!(&four == b"efgh");
        // Nobody releases it, yet a read that finds nothing frees it.
        check!(
            tokio::time::timeout(std::time::Duration::from_millis(20), stream.read(&mut two))
                .await
                .is_err()
        );
        check!(stream.buf.capacity() == 0);
        stream.write_all(b"reply").await.unwrap();
        stream.flush().await.unwrap();
        let mut reply = [0u8; 5];
        client.read_exact(&mut reply).await.unwrap();
        check!(&reply == b"reply");
    }
}
