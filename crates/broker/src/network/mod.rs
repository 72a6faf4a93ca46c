//! The network layer: one tokio task per connection reading size-prefixed
//! frames, and one writer task per connection sending answers in request
//! order.
//!
//! Clients pipeline requests and match answers by order, so every request
//! gets a slot in a FIFO queue when it is read; the writer waits for each
//! slot in turn. A produce (acks 1 or -1) takes its place in its
//! partitions' append queues as soon as it is read, so a producer's
//! pipelined batches reach the log in the order sent while the connection
//! reads on, and the appends that queue up meanwhile share one trip to the
//! blocking pool; at most `PRODUCE_READ_AHEAD_BYTES` of produce requests
//! per connection are held read but unanswered. Any other request waits for the produce requests before it
//! (as on Kafka, which handles a connection's requests one by one); other
//! state-changing requests (admin, acks=0 produce) are handled before the
//! next frame is read, and read-only ones (fetch, metadata, ...) run
//! concurrently. A frame over `socket.request.max.bytes`, a truncated frame,
//! or one that does not decode closes that connection with a logged reason;
//! other connections are not affected.
//!
//! Each listener has its own accept loop. On an SSL or SASL_SSL listener
//! the TLS handshake runs first (a failed one closes only that
//! connection); every frame then passes the connection's
//! [`Authenticator`](crate::security::session::Authenticator), which
//! answers the SASL exchange itself and hands the other requests on with
//! the session's principal.

pub mod codec;

use {
    crate::{
        broker::Broker,
        handlers::{self, Reply},
        metrics,
        security::{
            Endpoint,
            principal::KafkaPrincipal,
            session::{Authenticator, Outcome},
        },
    },
    bytes::{Bytes, BytesMut},
    std::{net::SocketAddr, sync::Arc, time::Duration, time::Instant},
    tokio::{
        io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter},
        net::{TcpListener, TcpStream},
        sync::{Semaphore, mpsc, oneshot, watch},
        task::JoinSet,
    },
};

/// Longest a client may take to complete its TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// Most requests of one connection waiting for their answer at once.
const MAX_IN_FLIGHT: usize = 100;

/// Most bytes of produce requests one connection holds read but not yet
/// appended: reading ahead keeps the log busy, and this keeps a client
/// that pipelines large requests from filling the broker's memory (a
/// request larger than this is read only once the ones before it are done).
const PRODUCE_READ_AHEAD_BYTES: u32 = 4 << 20;

/// Accepts connections on one listener until `shutdown` becomes true, then
/// waits for every connection to answer what it has read.
pub async fn serve(
    broker: Arc<Broker>,
    listener: TcpListener,
    endpoint: Arc<Endpoint>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let broker = Arc::clone(&broker);
                    let shutdown = shutdown.clone();
                    let endpoint = Arc::clone(&endpoint);
                    connections.spawn(async move {
                        tracing::debug!(%peer, "connection opened");
                        connection(broker, stream, peer, endpoint, shutdown).await;
                        tracing::debug!(%peer, "connection closed");
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
            _ = shutdown.changed() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

/// Why reading a frame stopped.
enum ReadEnd {
    /// The peer closed the connection between frames.
    Eof,
    /// The connection must be closed for this reason.
    Close(String),
}

async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    max: usize,
) -> Result<Bytes, ReadEnd> {
    let mut size = [0u8; 4];
    match reader.read_exact(&mut size).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(ReadEnd::Eof),
        Err(e) => return Err(ReadEnd::Close(format!("read failed: {e}"))),
    }
    let size = i32::from_be_bytes(size);
    let Ok(size) = usize::try_from(size) else {
        return Err(ReadEnd::Close(format!("negative frame size {size}")));
    };
    if size > max {
        return Err(ReadEnd::Close(format!(
            "request of {size} bytes exceeds socket.request.max.bytes ({max})"
        )));
    }
    // Grow the buffer as bytes arrive rather than trusting the size prefix
    // with one large allocation.
    let mut buf = BytesMut::with_capacity(size.min(1 << 20));
    while buf.len() < size {
        if buf.capacity() == buf.len() {
            buf.reserve((size - buf.len()).min(1 << 20));
        }
        let want = size - buf.len();
        let mut limited = (&mut *reader).take(u64::try_from(want).unwrap_or(u64::MAX));
        match limited.read_buf(&mut buf).await {
            Ok(0) => {
                return Err(ReadEnd::Close(format!(
                    "truncated frame: connection closed after {} of {size} bytes",
                    buf.len()
                )));
            }
            Ok(_) => {}
            Err(e) => return Err(ReadEnd::Close(format!("read failed: {e}"))),
        }
    }
    Ok(buf.freeze())
}

/// Runs one connection: the TLS handshake on a TLS listener, then the
/// request loop.
async fn connection(
    broker: Arc<Broker>,
    stream: TcpStream,
    peer: SocketAddr,
    endpoint: Arc<Endpoint>,
    shutdown: watch::Receiver<bool>,
) {
    let Some(tls) = &endpoint.tls else {
        let auth = Authenticator::new(Arc::clone(&endpoint), peer, KafkaPrincipal::anonymous());
        let (reader, writer) = stream.into_split();
        return requests(broker, reader, writer, peer, auth, shutdown).await;
    };
    let accepted = tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, tls.acceptor().accept(stream)).await;
    let stream = match accepted {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            tracing::warn!(%peer, listener = %endpoint.spec.name, error = %e, "closing connection: TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::warn!(%peer, listener = %endpoint.spec.name, "closing connection: TLS handshake timed out");
            return;
        }
    };
    let principal = match tls.principal(stream.get_ref().1.peer_certificates()) {
        Ok(principal) => principal,
        Err(reason) => {
            tracing::warn!(%peer, %reason, "closing connection: no principal for the client certificate");
            return;
        }
    };
    let auth = Authenticator::new(Arc::clone(&endpoint), peer, principal);
    let (reader, writer) = tokio::io::split(stream);
    requests(broker, reader, writer, peer, auth, shutdown).await;
}

/// The request loop of one connection, over any byte stream.
async fn requests<R, W>(
    broker: Arc<Broker>,
    reader: R,
    writer: W,
    peer: SocketAddr,
    mut auth: Authenticator,
    mut shutdown: watch::Receiver<bool>,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    // Pipelined small requests arrive together: one read takes several.
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let (slots, mut queue) = mpsc::channel::<oneshot::Receiver<Reply>>(MAX_IN_FLIGHT);
    // Dropped when the writer stops, so the reader stops too.
    let (writer_alive, mut writer_gone) = oneshot::channel::<()>();
    let writer_task = tokio::spawn(async move {
        let _alive = writer_alive;
        let mut writer = BufWriter::with_capacity(64 * 1024, writer);
        while let Some(slot) = queue.recv().await {
            match slot.await {
                Ok(Reply::Frame(frame)) => {
                    if let Err(e) = writer.write_all(&frame).await {
                        tracing::debug!(%peer, error = %e, "write failed");
                        return;
                    }
                }
                Ok(Reply::Nothing) => {}
                Ok(Reply::Close(reason)) => {
                    tracing::warn!(%peer, %reason, "closing connection");
                    let _ = writer.flush().await;
                    return;
                }
                Err(_) => return,
            }
            if queue.is_empty() && writer.flush().await.is_err() {
                return;
            }
        }
        let _ = writer.flush().await;
    });
    let max = broker.config.socket_request_max_bytes;
    let mut produces = JoinSet::new();
    let read_ahead = Arc::new(Semaphore::new(PRODUCE_READ_AHEAD_BYTES as usize));
    loop {
        if *shutdown.borrow() {
            break;
        }
        let frame = tokio::select! {
            frame = read_frame(&mut reader, max) => frame,
            _ = shutdown.changed() => break,
            _ = &mut writer_gone => break,
        };
        let frame = match frame {
            Ok(frame) => frame,
            Err(ReadEnd::Eof) => break,
            Err(ReadEnd::Close(reason)) => {
                tracing::warn!(%peer, %reason, "closing connection");
                break;
            }
        };
        if auth.wants_raw_token() {
            // After SaslHandshake v0 the SASL tokens come unframed by Kafka
            // headers; they are answered in order like requests.
            let replies = auth.raw_token(&broker, &frame).await;
            if !send_replies(&slots, replies).await {
                break;
            }
            continue;
        }
        let received = Instant::now();
        let frame_bytes = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        metrics::request_bytes(frame.len());
        let correlation = codec::peek_correlation_id(&frame);
        let request = match codec::decode_request(frame) {
            Ok(request) => codec::DecodedRequest {
                peer: Some(peer),
                ..request
            },
            Err(e) => {
                tracing::warn!(%peer, correlation_id = ?correlation, reason = %e, "closing connection: undecodable request");
                metrics::decode_error();
                break;
            }
        };
        // Authentication requests are answered here (in order, through the
        // same slots); anything else goes on with the session.
        let request = match auth.request(&broker, request).await {
            Outcome::Handle(request) => *request,
            Outcome::Reply(replies) => {
                if !send_replies(&slots, replies).await {
                    break;
                }
                continue;
            }
        };
        let (done, slot) = oneshot::channel();
        if slots.send(slot).await.is_err() {
            break;
        }
        let api = request.api_key;
        // A produce takes its place in its partitions' queues now and is
        // answered whenever its appends are done; the next request is read
        // meanwhile.
        // Held until the produce is answered; waiting here stops the
        // reading of further requests.
        let permit = if matches!(request.body, codec::Request::Produce(_)) {
            let permits = frame_bytes.clamp(1, PRODUCE_READ_AHEAD_BYTES);
            match Arc::clone(&read_ahead).acquire_many_owned(permits).await {
                Ok(permit) => Some(permit),
                Err(_) => break,
            }
        } else {
            None
        };
        let request = match handlers::queue_produce(&broker, request) {
            handlers::Queued::Produce(answer) => {
                produces.spawn(async move {
                    let reply = answer.await;
                    drop(permit);
                    metrics::request_done(
                        api,
                        received.elapsed(),
                        matches!(reply, Reply::Close(_)),
                    );
                    let _ = done.send(reply);
                });
                while produces.try_join_next().is_some() {}
                continue;
            }
            handlers::Queued::Other(request) => {
                drop(permit);
                *request
            }
        };
        // Anything else sees what the produce requests read before it
        // appended, as when Kafka handles a connection's requests one by one.
        while produces.join_next().await.is_some() {}
        let in_order = handlers::must_run_in_order(&request.body);
        let broker = Arc::clone(&broker);
        let work = async move {
            let reply = handlers::handle(&broker, request).await;
            metrics::request_done(api, received.elapsed(), matches!(reply, Reply::Close(_)));
            let _ = done.send(reply);
        };
        if in_order {
            work.await;
        } else {
            tokio::spawn(work);
        }
    }
    // Let the writer send every answer for requests already read.
    while produces.join_next().await.is_some() {}
    drop(slots);
    let _ = writer_task.await;
}

/// Queues answers made without a handler; false when the connection is
/// closing (the writer stopped, or one of them closes it).
async fn send_replies(slots: &mpsc::Sender<oneshot::Receiver<Reply>>, replies: Vec<Reply>) -> bool {
    for reply in replies {
        let closes = matches!(reply, Reply::Close(_));
        let (done, slot) = oneshot::channel();
        if slots.send(slot).await.is_err() {
            return false;
        }
        let _ = done.send(reply);
        if closes {
            return false;
        }
    }
    true
}
