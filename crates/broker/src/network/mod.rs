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
//! blocking pool (a small one to an idle queue is made on the spot); at
//! most `PRODUCE_READ_AHEAD_BYTES` of produce requests per connection are
//! held read but not yet taken by their partitions. The writer itself waits
//! for a produce's appends, rather than a task of its own.
//! Any other request waits for the produce requests before it (as on
//! Kafka, which handles a connection's requests one by one); other
//! state-changing requests (admin, acks=0 produce) are handled before the
//! next frame is read, and read-only ones (fetch, metadata, ...) run
//! concurrently. A frame over `socket.request.max.bytes`, a truncated frame,
//! or one that does not decode closes that connection with a logged reason;
//! other connections are not affected.
//!
//! What a client can make the broker hold is bounded: connections at accept
//! ([`limits::ConnectionLimits`]), request bytes across all connections
//! ([`limits::RequestBudget`]), and the time a connection may sit idle or a
//! request may take to arrive ([`frame`]); running out of file descriptors
//! only delays accepting ([`fd`]). The per-connection code is generic over
//! the stream's halves, so a TLS stream serves as well as a TCP one; a
//! plain TCP connection keeps the socket's own write half, whose writer
//! sends the records of a Fetch answer from the page cache ([`writer`]).
//!
//! Each listener has its own accept loop; they share the limits and the
//! budget. On an SSL or SASL_SSL listener the TLS handshake runs first,
//! within a deadline (a failed one closes only that connection); every
//! request then passes the connection's
//! [`Authenticator`](crate::security::session::Authenticator), which
//! answers the SASL exchange itself and hands the other requests on with
//! the session's principal.

pub mod codec;
pub mod fd;
pub mod frame;
pub mod legacy;
pub mod limits;
pub mod newer;
pub mod read_ahead;
pub mod wire;
pub mod writer;

use {
    crate::{
        broker::Broker,
        config::BrokerConfig,
        handlers::{self, Reply},
        metrics,
        security::{
            Endpoint,
            principal::KafkaPrincipal,
            session::{Authenticator, Outcome},
        },
    },
    frame::{Activity, FrameRules, ReadEnd},
    futures_util::FutureExt,
    limits::{ConnectionLimits, RequestBudget},
    std::{
        net::SocketAddr,
        pin::Pin,
        sync::Arc,
        task::{Context, Poll},
        time::{Duration, Instant},
    },
    tokio::{
        io::{AsyncRead, AsyncWriteExt, BufWriter},
        net::{TcpListener, TcpStream},
        sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot, watch},
        task::JoinSet,
    },
};

/// Most requests of one connection waiting for their answer at once.
const MAX_IN_FLIGHT: usize = 100;

/// An answer the writer waits for in its turn (`None`: it will never come).
enum Pending {
    /// The receiving end of a handler's answer.
    Answer(oneshot::Receiver<Reply>),
    /// A produce's: the future that waits for its appends.
    Produce(Pin<Box<dyn Future<Output = Reply> + Send>>),
}

impl Future for Pending {
    type Output = Option<Reply>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Reply>> {
        match self.get_mut() {
            Self::Answer(answer) => Pin::new(answer).poll(cx).map(Result::ok),
            Self::Produce(answer) => answer.as_mut().poll(cx).map(Some),
        }
    }
}

/// The produce requests of one connection not yet answered, so that a
/// request read after them waits for them. Each holds one permit of a
/// semaphore far larger than the produces a connection can have in flight
/// (`MAX_IN_FLIGHT`); all of them free means none is left.
struct Produces(Arc<Semaphore>);

/// More permits than a connection's produces in flight can ever hold.
const PRODUCE_PERMITS: u32 = 1 << 16;

impl Default for Produces {
    fn default() -> Self {
        Self(Arc::new(Semaphore::new(PRODUCE_PERMITS as usize)))
    }
}

impl Produces {
    /// One more unanswered produce, until the permit is dropped.
    async fn one_more(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.0).acquire_owned().await.ok()
    }

    /// Waits until every produce counted so far is answered.
    async fn all_answered(&self) {
        if self.0.available_permits() < PRODUCE_PERMITS as usize {
            drop(self.0.acquire_many(PRODUCE_PERMITS).await);
        }
    }
}

/// Most bytes of produce requests one connection holds read but not yet
/// taken by their partitions (appended to a classic log, placed in a
/// diskless object): reading ahead keeps the log busy, and this keeps a
/// client that pipelines large requests from filling the broker's memory
/// (a request larger than this is read only once the ones before it are
/// taken).
const PRODUCE_READ_AHEAD_BYTES: u32 = 4 << 20;

/// Bytes read from a TLS connection's socket at once (rustls alone would
/// read 4 KiB at a time).
const TLS_SOCKET_READ_AHEAD: usize = 256 * 1024;

/// Longest a client may take to complete its TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest the accept loop backs off after a failed accept.
const MAX_ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// The broker-wide network state every connection shares.
#[derive(Debug)]
pub struct Network {
    limits: Arc<ConnectionLimits>,
    budget: RequestBudget,
    rules: FrameRules,
    /// `socket.send.buffer.bytes` (`None`: the OS default).
    send_buffer: Option<usize>,
    /// `socket.receive.buffer.bytes` (`None`: the OS default).
    receive_buffer: Option<usize>,
}

impl Network {
    /// The limits, budget and timers of `config`.
    ///
    /// # Errors
    ///
    /// A host name in `max.connections.per.ip.overrides` that does not
    /// resolve.
    pub async fn new(config: &BrokerConfig) -> Result<Self, String> {
        let settings = &config.connections;
        Ok(Self {
            limits: Arc::new(ConnectionLimits::resolve(settings).await?),
            budget: RequestBudget::new(settings.queued_max_request_bytes),
            rules: FrameRules::new(config.socket_request_max_bytes, settings),
            send_buffer: settings.send_buffer_bytes,
            receive_buffer: settings.receive_buffer_bytes,
        })
    }

    /// Sets an accepted connection's socket buffers as configured. A fixed
    /// send buffer, as Kafka's, keeps `sendfile` from queueing megabytes on
    /// a loopback socket: the broker's CPU per GB fetched fell by a quarter
    /// (docs/BENCHMARKS.md).
    fn size_buffers(&self, stream: &TcpStream, peer: SocketAddr) {
        let socket = socket2::SockRef::from(stream);
        let set = [
            self.send_buffer
                .map(|n| ("SO_SNDBUF", socket.set_send_buffer_size(n))),
            self.receive_buffer
                .map(|n| ("SO_RCVBUF", socket.set_recv_buffer_size(n))),
        ];
        for (option, result) in set.into_iter().flatten() {
            if let Err(e) = result {
                tracing::debug!(%peer, option, error = %e, "could not size the socket buffer");
            }
        }
    }

    /// Connections open now.
    #[must_use]
    pub fn open_connections(&self) -> usize {
        self.limits.open()
    }

    /// Request bytes held now, read but not yet answered.
    #[must_use]
    pub fn queued_request_bytes(&self) -> usize {
        self.budget.in_use()
    }
}

/// Logs refused connections at most once a second, with how many were
/// refused meanwhile (a flood of refusals must not flood the log).
#[derive(Debug, Default)]
struct RefusalLog {
    last: Option<Instant>,
    unlogged: u64,
}

impl RefusalLog {
    fn refused(&mut self, peer: Option<SocketAddr>, reason: &str) {
        self.unlogged += 1;
        if self
            .last
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return;
        }
        let peer = peer.map_or_else(|| "?".to_owned(), |p| p.to_string());
        tracing::warn!(%peer, %reason, refused = self.unlogged, "refusing connection at accept");
        self.last = Some(Instant::now());
        self.unlogged = 0;
    }
}

/// Gives memory back to the OS once many connections have closed: the
/// allocator keeps what they freed for reuse, so after a flood of
/// connections the broker's resident memory would stay at its peak.
#[derive(Debug, Default)]
struct Trim {
    peak: usize,
}

impl Trim {
    /// Connections that must have closed, and half of the peak, before the
    /// allocator is asked to trim.
    const AFTER: usize = 256;

    fn opened(&mut self, open: usize) {
        self.peak = self.peak.max(open);
    }

    fn closed(&mut self, open: usize) {
        if self.peak >= open + Self::AFTER && open <= self.peak / 2 {
            self.peak = open;
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            // SAFETY: malloc_trim only releases free memory of the allocator.
            unsafe {
                libc::malloc_trim(0);
            }
        }
    }
}

/// Accepts connections on one listener until `shutdown` becomes true, then
/// waits for every connection to answer what it has read.
pub async fn serve(
    broker: Arc<Broker>,
    network: Arc<Network>,
    listener: TcpListener,
    endpoint: Arc<Endpoint>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    let mut reserve = fd::Reserve::new();
    let mut refusals = RefusalLog::default();
    let mut backoff = Duration::ZERO;
    let mut trim = Trim::default();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    backoff = Duration::ZERO;
                    reserve.restore();
                    let slot = match network.limits.admit(peer.ip()) {
                        Ok(slot) => slot,
                        Err(refused) => {
                            metrics::connection_refused(match refused {
                                limits::Refused::Total { .. } => "max.connections",
                                limits::Refused::PerIp { setting, .. } => setting,
                            });
                            refusals.refused(Some(peer), &refused.to_string());
                            drop(stream);
                            continue;
                        }
                    };
                    metrics::connections_open(network.limits.open());
                    trim.opened(network.limits.open());
                    let _ = stream.set_nodelay(true);
                    network.size_buffers(&stream, peer);
                    let broker = Arc::clone(&broker);
                    let network = Arc::clone(&network);
                    let endpoint = Arc::clone(&endpoint);
                    let shutdown = shutdown.clone();
                    connections.spawn(async move {
                        tracing::debug!(%peer, listener = %endpoint.spec.name, "connection opened");
                        secure(broker, &network, stream, peer, endpoint, shutdown).await;
                        drop(slot);
                        metrics::connections_open(network.limits.open());
                        tracing::debug!(%peer, "connection closed");
                    });
                }
                Err(e) => {
                    if fd::is_exhaustion(&e) {
                        // Take the waiting client with the spare descriptor
                        // and close it: a refusal, not a hang, and the
                        // listener stops signalling it.
                        reserve.release();
                        let took_one = match listener.accept().now_or_never() {
                            Some(Ok((stream, peer))) => {
                                drop(stream);
                                metrics::connection_refused("file descriptors");
                                refusals.refused(Some(peer), &format!("out of file descriptors ({e})"));
                                true
                            }
                            _ => {
                                refusals.refused(None, &format!("accept failed: {e}"));
                                false
                            }
                        };
                        reserve.restore();
                        if took_one && reserve.is_held() {
                            // Progress: the next waiting client is refused
                            // as fast, not one per backoff step.
                            backoff = Duration::ZERO;
                            tokio::task::yield_now().await;
                            continue;
                        }
                    } else {
                        tracing::warn!(error = %e, "accept failed");
                    }
                    backoff = (backoff * 2).clamp(Duration::from_millis(10), MAX_ACCEPT_BACKOFF);
                    tokio::select! {
                        () = tokio::time::sleep(backoff) => {}
                        _ = shutdown.changed() => break,
                    }
                }
            },
            _ = shutdown.changed() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {
                trim.closed(network.limits.open());
            }
        }
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

/// Runs the TLS handshake on a TLS listener (within a deadline, and until
/// shutdown), then serves the connection.
async fn secure(
    broker: Arc<Broker>,
    network: &Network,
    stream: TcpStream,
    peer: SocketAddr,
    endpoint: Arc<Endpoint>,
    mut shutdown: watch::Receiver<bool>,
) {
    let Some(tls) = &endpoint.tls else {
        let auth = Authenticator::new(Arc::clone(&endpoint), peer, KafkaPrincipal::anonymous());
        let (reader, writer) = stream.into_split();
        return connection(broker, network, reader, writer, peer, auth, shutdown).await;
    };
    // rustls reads the socket 4 KiB at a time; a read-ahead below it makes
    // that a few large reads per request.
    let stream = read_ahead::ReadAhead::new(stream, TLS_SOCKET_READ_AHEAD);
    let handshake = tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, tls.acceptor().accept(stream));
    let accepted = tokio::select! {
        accepted = handshake => accepted,
        _ = shutdown.changed() => return,
    };
    let listener = &endpoint.spec.name;
    let stream = match accepted {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            metrics::tls_handshake_failed(listener);
            tracing::warn!(%peer, %listener, error = %e, "closing connection: TLS handshake failed");
            return;
        }
        Err(_) => {
            metrics::tls_handshake_failed(listener);
            tracing::warn!(%peer, %listener, "closing connection: TLS handshake timed out");
            return;
        }
    };
    let principal = match tls.principal(stream.get_ref().1.peer_certificates()) {
        Ok(principal) => principal,
        Err(reason) => {
            tracing::warn!(%peer, %listener, %reason, "closing connection: no principal for the client certificate");
            return;
        }
    };
    let auth = Authenticator::new(Arc::clone(&endpoint), peer, principal);
    let (reader, writer) = tokio::io::split(stream);
    connection(broker, network, reader, writer, peer, auth, shutdown).await;
}

/// Serves one connection, read through `reader` and answered through
/// `writer`, until the peer closes it, a request closes it, or `shutdown`
/// becomes true.
async fn connection<R, W>(
    broker: Arc<Broker>,
    network: &Network,
    reader: R,
    writer: W,
    peer: SocketAddr,
    mut auth: Authenticator,
    mut shutdown: watch::Receiver<bool>,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: writer::SendFile,
{
    // Pipelined small requests arrive together: one read takes several (a
    // buffer that exists only while bytes wait in it: idle connections
    // hold none).
    let mut reader = read_ahead::ReadAhead::new(reader, 64 * 1024);
    let activity = Arc::new(Activity::new());
    let (slots, mut queue) = mpsc::channel::<Pending>(MAX_IN_FLIGHT);
    // Dropped when the writer stops, so the reader stops too.
    let (writer_alive, mut writer_gone) = oneshot::channel::<()>();
    let answered = Arc::clone(&activity);
    let writer_task = tokio::spawn(async move {
        let _alive = writer_alive;
        let mut writer = writer;
        while let Some(mut slot) = queue.recv().await {
            // Answers that are ready together go out in one write; the
            // buffer lives only for that burst, so an idle connection holds
            // none.
            let mut out = BufWriter::with_capacity(64 * 1024, &mut writer);
            loop {
                // What is written goes out before waiting for an answer
                // that is not ready (a long poll must not hold it back).
                let reply = match (&mut slot).now_or_never() {
                    Some(reply) => reply,
                    None => {
                        if out.flush().await.is_err() {
                            return;
                        }
                        slot.await
                    }
                };
                answered.request_answered();
                match reply {
                    Some(Reply::Frame(frame)) => {
                        if let Err(e) = out.write_all(&frame).await {
                            tracing::debug!(%peer, error = %e, "write failed");
                            return;
                        }
                    }
                    Some(Reply::Parts(parts)) => {
                        match writer::write_parts(&mut out, &parts).await {
                            Ok(()) => {}
                            Err(writer::WriteEnd::Io(e)) => {
                                tracing::debug!(%peer, error = %e, "write failed");
                                return;
                            }
                            Err(writer::WriteEnd::Close(reason)) => {
                                tracing::warn!(%peer, %reason, "closing connection");
                                return;
                            }
                        }
                    }
                    Some(Reply::Nothing) => {}
                    Some(Reply::Close(reason)) => {
                        tracing::warn!(%peer, %reason, "closing connection");
                        let _ = out.flush().await;
                        return;
                    }
                    None => return,
                }
                match queue.try_recv() {
                    Ok(next) => slot = next,
                    Err(_) => break,
                }
            }
            if out.flush().await.is_err() {
                return;
            }
        }
    });
    let produces = Produces::default();
    let read_ahead = Arc::new(Semaphore::new(PRODUCE_READ_AHEAD_BYTES as usize));
    loop {
        if *shutdown.borrow() {
            break;
        }
        reader.release_if_drained();
        // Until a SASL client has authenticated, its frames have Kafka's
        // tighter bound.
        let rules = match auth.frame_limit() {
            Some(limit) => network.rules.bounded(limit, "sasl.server.max.receive.size"),
            None => network.rules,
        };
        let frame = tokio::select! {
            frame = frame::next_frame(&mut reader, &rules, &network.budget, &activity) => frame,
            _ = shutdown.changed() => break,
            _ = &mut writer_gone => break,
        };
        let frame::Frame { bytes: frame, hold } = match frame {
            Ok(frame) => frame,
            Err(ReadEnd::Eof) => break,
            Err(ReadEnd::Idle(after)) => {
                // As Kafka: routine, so not a warning.
                tracing::debug!(%peer, idle_ms = after.as_millis(), "closing idle connection (connections.max.idle.ms)");
                break;
            }
            Err(ReadEnd::Close(reason)) => {
                tracing::warn!(%peer, %reason, "closing connection");
                break;
            }
        };
        if auth.wants_raw_token() {
            // After SaslHandshake v0 the SASL tokens come unframed by Kafka
            // headers; they are answered in order like requests.
            let replies = auth.raw_token(&broker, &frame).await;
            drop(hold);
            if !send_replies(&slots, &activity, replies).await {
                break;
            }
            continue;
        }
        let received = Instant::now();
        let frame_bytes = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        metrics::request_bytes(frame.len());
        let correlation = codec::peek_correlation_id(&frame);
        let request = match codec::decode_request(frame, broker.served()) {
            Ok(request) => codec::DecodedRequest {
                peer: Some(peer),
                // Every connection's writer sends file slices (see `writer`).
                zero_copy: true,
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
                drop(hold);
                if !send_replies(&slots, &activity, replies).await {
                    break;
                }
                continue;
            }
        };
        let api = request.api_key;
        // A produce takes its place in its partitions' queues now and is
        // answered whenever its appends are done; the next request is read
        // meanwhile.
        // Held until the produce is answered; waiting here stops the
        // reading of further requests.
        let permit = if matches!(request.body, codec::Request::Produce(_)) {
            let permits = frame_bytes.clamp(1, PRODUCE_READ_AHEAD_BYTES);
            tokio::select! {
                permit = Arc::clone(&read_ahead).acquire_many_owned(permits) => match permit {
                    Ok(permit) => Some(permit),
                    Err(_) => break,
                },
                // A stop must not wait for storage that is itself stopping.
                _ = shutdown.changed() => break,
            }
        } else {
            None
        };
        let request = match handlers::queue_produce(&broker, request).await {
            handlers::Queued::Produce(answer, accepted) => {
                // With a diskless partition the read-ahead goes back once
                // the partitions hold the batches (its commit, the answer,
                // comes much later); the request's bytes stay in the
                // broker-wide budget until the answer.
                let mut permit = permit;
                if accepted.before_answer() {
                    let early = permit.take();
                    tokio::spawn(async move {
                        accepted.wait().await;
                        drop(early);
                    });
                }
                // The writer itself waits for the appends: no task of its
                // own, so one wake-up less per produce.
                let unanswered = produces.one_more().await;
                let answer = async move {
                    let reply = answer.await;
                    drop((permit, hold, unanswered));
                    metrics::request_done(
                        api,
                        received.elapsed(),
                        matches!(reply, Reply::Close(_)),
                    );
                    reply
                };
                if slots
                    .send(Pending::Produce(Box::pin(answer)))
                    .await
                    .is_err()
                {
                    break;
                }
                activity.request_read();
                continue;
            }
            handlers::Queued::Other(request) => {
                drop(permit);
                *request
            }
        };
        let (done, slot) = oneshot::channel();
        if slots.send(Pending::Answer(slot)).await.is_err() {
            break;
        }
        activity.request_read();
        // Anything else sees what the produce requests read before it
        // appended, as when Kafka handles a connection's requests one by one.
        produces.all_answered().await;
        let in_order = handlers::must_run_in_order(&request);
        let broker = Arc::clone(&broker);
        let work = async move {
            let reply = handlers::handle(&broker, request).await;
            drop(hold);
            metrics::request_done(api, received.elapsed(), matches!(reply, Reply::Close(_)));
            let _ = done.send(reply);
        };
        if in_order {
            work.await;
        } else {
            tokio::spawn(work);
        }
    }
    // The writer sends every answer for requests already read, then stops.
    drop(slots);
    let _ = writer_task.await;
}

/// Queues answers made without a handler; false when the connection is
/// closing (the writer stopped, or one of them closes it).
async fn send_replies(
    slots: &mpsc::Sender<Pending>,
    activity: &Activity,
    replies: Vec<Reply>,
) -> bool {
    for reply in replies {
        let closes = matches!(reply, Reply::Close(_));
        let (done, slot) = oneshot::channel();
        if slots.send(Pending::Answer(slot)).await.is_err() {
            return false;
        }
        activity.request_read();
        let _ = done.send(reply);
        if closes {
            return false;
        }
    }
    true
}
