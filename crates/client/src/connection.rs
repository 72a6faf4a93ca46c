//! One TCP connection to one broker, pipelined.
//!
//! A request is encoded in the caller's task (so encoding work spreads over
//! the callers), queued to a writer task, and answered through a oneshot
//! channel. Kafka answers the requests of one connection in the order it
//! received them, so the pending replies form a FIFO: the writer pushes a
//! reply slot *before* it writes the frame, and the reader task pops the front
//! slot for each response and checks its correlation id. Any number of
//! requests may be in flight; callers bound that themselves (the producer
//! keeps `max.in.flight.requests.per.connection`).
//!
//! On connect the client runs the TLS handshake when [`ConnectionConfig::tls`]
//! is set, sends `ApiVersions` and keeps, per API, the highest version both
//! sides speak, then authenticates when [`ConnectionConfig::sasl`] is set.
//! The reader and writer tasks are generic over the stream halves, so a
//! plaintext connection keeps tokio's lock-free TCP halves. A broken connection fails every pending request
//! and every later one; the [`crate::Client`] opens a new connection on demand.

use {
    crate::{
        ClientError,
        counts::RequestCounts,
        frame::{self, SIZE_PREFIX},
        sasl::{self, SaslConfig},
        tls::TlsConfig,
        versions::{ApiVersionTable, client_range},
    },
    bytes::{Bytes, BytesMut},
    kafka_protocol::{
        messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader},
        protocol::{Decodable, HeaderVersion, Request, StrBytes},
    },
    std::{
        collections::VecDeque,
        future::Future,
        sync::{
            Arc, Mutex,
            atomic::{AtomicI32, Ordering},
        },
        time::Duration,
    },
    tokio::{
        io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter},
        net::TcpStream,
        sync::{mpsc, oneshot},
        task::JoinHandle,
    },
};

/// Settings of one connection.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    /// `client.id` sent in every request header.
    pub client_id: String,
    /// How long to wait for the TCP connect (`socket.connection.setup.timeout.ms`).
    pub connect_timeout: Duration,
    /// How long to wait for a response (`request.timeout.ms`, default 30 s).
    pub request_timeout: Duration,
    /// The largest response frame accepted (bytes); a larger one closes the connection.
    pub max_response_size: usize,
    /// TLS to the broker (`security.protocol` SSL or SASL_SSL); `None` for plain TCP.
    pub tls: Option<TlsConfig>,
    /// SASL authentication (`security.protocol` SASL_PLAINTEXT or SASL_SSL).
    pub sasl: Option<SaslConfig>,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        Self {
            client_id: "krabka-client".to_owned(),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_response_size: 512 * 1024 * 1024,
            tls: None,
            sasl: None,
        }
    }
}

type Reply = oneshot::Sender<Result<Bytes, ClientError>>;

/// A reply slot for a request that expects a response.
struct Pending {
    correlation_id: i32,
    header_version: i16,
    reply: Reply,
}

/// One frame for the writer task.
struct Outgoing {
    frame: Vec<Bytes>,
    pending: Option<Pending>,
}

/// The FIFO of reply slots, shared by the writer and the reader.
#[derive(Default)]
struct InFlight {
    queue: VecDeque<Pending>,
    /// Set once the connection broke; later requests fail with it.
    closed: Option<ClientError>,
}

impl InFlight {
    fn close(&mut self, error: ClientError) {
        if self.closed.is_none() {
            self.closed = Some(error.clone());
        }
        for pending in self.queue.drain(..) {
            let _ = pending.reply.send(Err(error.clone()));
        }
    }
}

/// A pipelined connection to one broker; cheap to share behind an `Arc`.
pub struct Connection {
    addr: String,
    client_id: StrBytes,
    request_timeout: Duration,
    versions: ApiVersionTable,
    next_correlation_id: AtomicI32,
    outgoing: mpsc::UnboundedSender<Outgoing>,
    in_flight: Arc<Mutex<InFlight>>,
    tasks: [JoinHandle<()>; 2],
    counts: Arc<RequestCounts>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Connection {
    /// Opens a connection to `addr` (`host:port`) and negotiates API versions.
    ///
    /// # Errors
    ///
    /// Returns [`ClientError::Connection`] when the TCP connect fails or times
    /// out, and the errors of [`Connection::send`] for the `ApiVersions` exchange.
    pub async fn connect(addr: &str, config: &ConnectionConfig) -> Result<Self, ClientError> {
        Self::connect_counted(addr, config, Arc::default()).await
    }

    /// [`Connection::connect`], counting every request in `counts` (which
    /// the connections of one client share).
    pub(crate) async fn connect_counted(
        addr: &str,
        config: &ConnectionConfig,
        counts: Arc<RequestCounts>,
    ) -> Result<Self, ClientError> {
        let connection_error = |reason: String| ClientError::Connection {
            broker: addr.to_owned(),
            reason,
        };
        let stream = tokio::time::timeout(config.connect_timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| {
                connection_error(format!(
                    "connect timed out after {:?}",
                    config.connect_timeout
                ))
            })?
            .map_err(|e| connection_error(e.to_string()))?;
        stream
            .set_nodelay(true)
            .map_err(|e| connection_error(e.to_string()))?;
        let in_flight = Arc::new(Mutex::new(InFlight::default()));
        let (outgoing, outgoing_rx) = mpsc::unbounded_channel();
        let tasks = match &config.tls {
            None => {
                let (read, write) = stream.into_split();
                spawn_io(read, write, outgoing_rx, &in_flight, addr, config)
            }
            Some(tls) => {
                let stream =
                    tokio::time::timeout(config.connect_timeout, tls.connect(addr, stream))
                        .await
                        .map_err(|_| {
                            connection_error(format!(
                                "TLS handshake timed out after {:?}",
                                config.connect_timeout
                            ))
                        })??;
                let (read, write) = tokio::io::split(stream);
                spawn_io(read, write, outgoing_rx, &in_flight, addr, config)
            }
        };
        let mut connection = Self {
            addr: addr.to_owned(),
            client_id: StrBytes::from_string(config.client_id.clone()),
            request_timeout: config.request_timeout,
            versions: ApiVersionTable::default(),
            next_correlation_id: AtomicI32::new(0),
            outgoing,
            in_flight,
            tasks,
            counts,
        };
        connection.versions = connection.negotiate_versions().await?;
        if let Some(sasl) = &config.sasl {
            sasl::authenticate(&connection, sasl).await?;
        }
        Ok(connection)
    }

    /// Sends `ApiVersions` (v3, falling back to the version a v0 error answer
    /// names) and builds the version table.
    async fn negotiate_versions(&self) -> Result<ApiVersionTable, ClientError> {
        let mut version = client_range(ApiKey::ApiVersions).map_or(0, |r| r.max);
        for _attempt in 0..2 {
            let mut request = ApiVersionsRequest::default();
            request.client_software_name = StrBytes::from_static_str("krabka-client");
            request.client_software_version = StrBytes::from_static_str(env!("CARGO_PKG_VERSION"));
            let body = self.enqueue_raw(&request, version, true, &[])?.await?;
            // A broker that does not speak our version answers in v0 with
            // UNSUPPORTED_VERSION and its own range for ApiVersions.
            let response = match ApiVersionsResponse::decode(&mut body.clone(), version) {
                Ok(response) if response.error_code == 0 => response,
                _ => frame::decode_body::<ApiVersionsResponse>(body, 0, "ApiVersions")?,
            };
            if response.error_code == 35 {
                let broker_max = response
                    .api_keys
                    .iter()
                    .find(|k| k.api_key == ApiKey::ApiVersions as i16)
                    .map(|k| k.max_version);
                match broker_max {
                    Some(max) if max < version => {
                        version = max;
                        continue;
                    }
                    _ => {}
                }
            }
            ClientError::check(response.error_code, None, || {
                format!("ApiVersions v{version} to {}", self.addr)
            })?;
            return Ok(ApiVersionTable::negotiate(&response));
        }
        Err(ClientError::Protocol(format!(
            "{} refused every ApiVersions version",
            self.addr
        )))
    }

    /// The broker address this connection goes to.
    #[must_use]
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The negotiated versions.
    #[must_use]
    pub fn versions(&self) -> &ApiVersionTable {
        &self.versions
    }

    /// The negotiated version of `api`.
    ///
    /// # Errors
    ///
    /// Returns [`ClientError::UnsupportedApi`] when the broker and client share no version.
    pub fn version(&self, api: ApiKey) -> Result<i16, ClientError> {
        self.versions.version(api)
    }

    /// How many requests of each API this connection has sent (for a
    /// connection of a [`crate::Client`], the counts of the whole client).
    #[must_use]
    pub fn request_counts(&self) -> &RequestCounts {
        &self.counts
    }

    /// True once the connection broke; a new one must be opened.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.in_flight.lock().map_or(true, |g| g.closed.is_some())
    }

    /// Sends `request` in the negotiated version and waits for its response.
    ///
    /// # Errors
    ///
    /// Returns the errors of [`Connection::enqueue`], [`ClientError::Timeout`]
    /// after `request.timeout.ms`, and [`ClientError::Protocol`] for a
    /// response that does not decode. Error codes inside the response are the
    /// caller's to check.
    pub async fn send<R: Request>(&self, request: &R) -> Result<R::Response, ClientError> {
        let version = self.version(api_key::<R>()?)?;
        self.send_version(request, version).await
    }

    /// Like [`Connection::send`], in an explicit `version`.
    ///
    /// # Errors
    ///
    /// As [`Connection::send`].
    pub async fn send_version<R: Request>(
        &self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, ClientError> {
        self.enqueue(request, version, None)?.await
    }

    /// Encodes `request` and queues it, returning a future of its response;
    /// the request goes out even if the future is never polled, so callers
    /// pipeline by enqueueing several requests before awaiting any.
    /// `extra_timeout` adds to `request.timeout.ms` (a long-polling fetch adds
    /// its `max_wait_ms`).
    ///
    /// # Errors
    ///
    /// Returns [`ClientError::Protocol`] when the request does not encode in
    /// `version`, and [`ClientError::Connection`] when the connection is broken.
    pub fn enqueue<R: Request>(
        &self,
        request: &R,
        version: i16,
        extra_timeout: Option<Duration>,
    ) -> Result<
        impl Future<Output = Result<R::Response, ClientError>> + Send + 'static + use<R>,
        ClientError,
    > {
        self.enqueue_sharing(request, version, extra_timeout, &[])
    }

    /// [`Connection::enqueue`] for a request that carries large `payloads`
    /// (the record batches of a Produce): they are written from their own
    /// buffers instead of being copied into the frame.
    ///
    /// # Errors
    ///
    /// As [`Connection::enqueue`].
    pub fn enqueue_sharing<R: Request>(
        &self,
        request: &R,
        version: i16,
        extra_timeout: Option<Duration>,
        payloads: &[Bytes],
    ) -> Result<
        impl Future<Output = Result<R::Response, ClientError>> + Send + 'static + use<R>,
        ClientError,
    > {
        let body = self.enqueue_raw(request, version, true, payloads)?;
        let timeout = self.request_timeout + extra_timeout.unwrap_or_default();
        let in_flight = Arc::clone(&self.in_flight);
        let addr = self.addr.clone();
        Ok(async move {
            let body = match tokio::time::timeout(timeout, body).await {
                Ok(body) => body?,
                Err(_) => {
                    // The stream position is unknown now; Kafka's clients close it too.
                    let error = ClientError::Timeout(format!(
                        "{} v{version} to {addr} after {timeout:?}",
                        api_name::<R>()
                    ));
                    if let Ok(mut guard) = in_flight.lock() {
                        guard.close(ClientError::Connection {
                            broker: addr.clone(),
                            reason: error.to_string(),
                        });
                    }
                    return Err(error);
                }
            };
            frame::decode_body::<R::Response>(body, version, &api_name::<R>())
        })
    }

    /// Sends a request that gets no response (a Produce with acks=0);
    /// `payloads` as in [`Connection::enqueue_sharing`].
    ///
    /// # Errors
    ///
    /// As [`Connection::enqueue`].
    pub fn send_without_response<R: Request>(
        &self,
        request: &R,
        version: i16,
        payloads: &[Bytes],
    ) -> Result<(), ClientError> {
        self.enqueue_raw(request, version, false, payloads)
            .map(drop)
    }

    /// Encodes and queues one frame; the returned future yields the response body.
    fn enqueue_raw<R: Request>(
        &self,
        request: &R,
        version: i16,
        expect_response: bool,
        payloads: &[Bytes],
    ) -> Result<
        impl Future<Output = Result<Bytes, ClientError>> + Send + 'static + use<R>,
        ClientError,
    > {
        let key = api_key::<R>()?;
        let correlation_id = self.next_correlation_id.fetch_add(1, Ordering::Relaxed) & i32::MAX;
        let mut header = RequestHeader::default();
        header.request_api_key = R::KEY;
        header.request_api_version = version;
        header.correlation_id = correlation_id;
        header.client_id = Some(self.client_id.clone());
        let frame = frame::encode_request(
            &header,
            key.request_header_version(version),
            request,
            version,
            payloads,
        )?;
        let (reply, receiver) = oneshot::channel();
        let pending = expect_response.then(|| Pending {
            correlation_id,
            header_version: <R::Response as HeaderVersion>::header_version(version),
            reply,
        });
        if let Some(error) = self.in_flight.lock().ok().and_then(|g| g.closed.clone()) {
            return Err(error);
        }
        self.outgoing
            .send(Outgoing { frame, pending })
            .map_err(|_| ClientError::Connection {
                broker: self.addr.clone(),
                reason: "connection closed".into(),
            })?;
        self.counts.record(R::KEY);
        let addr = self.addr.clone();
        Ok(async move {
            receiver.await.map_err(|_| ClientError::Connection {
                broker: addr,
                reason: "connection closed".into(),
            })?
        })
    }
}

/// Starts the writer and reader tasks of a connection over `read` and `write`.
fn spawn_io<R, W>(
    read: R,
    write: W,
    outgoing: mpsc::UnboundedReceiver<Outgoing>,
    in_flight: &Arc<Mutex<InFlight>>,
    addr: &str,
    config: &ConnectionConfig,
) -> [JoinHandle<()>; 2]
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let writer = tokio::spawn(write_loop(
        write,
        outgoing,
        Arc::clone(in_flight),
        addr.to_owned(),
    ));
    let reader = tokio::spawn(read_loop(
        read,
        Arc::clone(in_flight),
        addr.to_owned(),
        config.max_response_size,
    ));
    [writer, reader]
}

fn api_key<R: Request>() -> Result<ApiKey, ClientError> {
    ApiKey::try_from(R::KEY)
        .map_err(|()| ClientError::Protocol(format!("unknown API key {}", R::KEY)))
}

fn api_name<R: Request>() -> String {
    ApiKey::try_from(R::KEY).map_or_else(|()| format!("api {}", R::KEY), |k| format!("{k:?}"))
}

enum FrameError {
    Io(std::io::Error),
    Protocol(ClientError),
}

/// Reads one frame (without its size prefix) through `buf`.
async fn read_frame<R: AsyncRead + Unpin>(
    read: &mut R,
    buf: &mut BytesMut,
    max_size: usize,
) -> Result<Bytes, FrameError> {
    fill(read, buf, SIZE_PREFIX).await?;
    let mut prefix = [0u8; SIZE_PREFIX];
    prefix.copy_from_slice(buf.get(..SIZE_PREFIX).unwrap_or(&[0; SIZE_PREFIX]));
    let size = frame::frame_size(prefix, max_size).map_err(FrameError::Protocol)?;
    fill(read, buf, SIZE_PREFIX + size).await?;
    let mut frame = buf.split_to(SIZE_PREFIX + size);
    let _ = frame.split_to(SIZE_PREFIX);
    Ok(frame.freeze())
}

/// Reads until `buf` holds at least `want` bytes.
async fn fill<R: AsyncRead + Unpin>(
    read: &mut R,
    buf: &mut BytesMut,
    want: usize,
) -> Result<(), FrameError> {
    if buf.len() < want {
        // Room for the rest of this frame and a little of the next.
        buf.reserve(want - buf.len() + 16 * 1024);
    }
    while buf.len() < want {
        let n = read.read_buf(buf).await.map_err(FrameError::Io)?;
        if n == 0 {
            return Err(FrameError::Io(std::io::ErrorKind::UnexpectedEof.into()));
        }
    }
    Ok(())
}

/// Writes queued frames; gathers whatever is queued into one flush so small
/// pipelined requests share syscalls.
async fn write_loop<W: AsyncWrite + Unpin>(
    write: W,
    mut outgoing: mpsc::UnboundedReceiver<Outgoing>,
    in_flight: Arc<Mutex<InFlight>>,
    addr: String,
) {
    let mut write = BufWriter::with_capacity(64 * 1024, write);
    let mut batch = Vec::with_capacity(64);
    while outgoing.recv_many(&mut batch, 64).await > 0 {
        {
            let Ok(mut guard) = in_flight.lock() else {
                return;
            };
            for item in &mut batch {
                if let Some(pending) = item.pending.take() {
                    match &guard.closed {
                        Some(error) => {
                            let _ = pending.reply.send(Err(error.clone()));
                        }
                        None => guard.queue.push_back(pending),
                    }
                }
            }
            if guard.closed.is_some() {
                return;
            }
        }
        let mut result = Ok(());
        for item in batch.drain(..) {
            for chunk in &item.frame {
                result = write.write_all(chunk).await;
                if result.is_err() {
                    break;
                }
            }
            if result.is_err() {
                break;
            }
        }
        if result.is_ok() {
            result = write.flush().await;
        }
        if let Err(e) = result {
            tracing::debug!(broker = %addr, error = %e, "write failed; closing connection");
            if let Ok(mut guard) = in_flight.lock() {
                guard.close(ClientError::Connection {
                    broker: addr.clone(),
                    reason: e.to_string(),
                });
            }
            return;
        }
    }
}

/// Reads response frames and hands each to the oldest pending request.
///
/// Reads go into one growing buffer, never zero-filled: small responses
/// share a read, and a large one is read straight into a buffer reserved
/// for the whole frame, which becomes the response `Bytes` without a copy.
async fn read_loop<R: AsyncRead + Unpin>(
    mut read: R,
    in_flight: Arc<Mutex<InFlight>>,
    addr: String,
    max_size: usize,
) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let error = loop {
        let frame = match read_frame(&mut read, &mut buf, max_size).await {
            Ok(frame) => frame,
            Err(e) => {
                break match e {
                    FrameError::Io(e) => ClientError::Connection {
                        broker: addr.clone(),
                        reason: format!("read failed: {e}"),
                    },
                    FrameError::Protocol(e) => e,
                };
            }
        };
        let Some(pending) = in_flight.lock().ok().and_then(|mut g| g.queue.pop_front()) else {
            break ClientError::Protocol(format!("{addr} sent a response to no request"));
        };
        match frame::decode_response_header(frame, pending.header_version) {
            Ok((header, body)) if header.correlation_id == pending.correlation_id => {
                let _ = pending.reply.send(Ok(body));
            }
            Ok((header, _)) => {
                let error = ClientError::Protocol(format!(
                    "{addr} answered correlation id {} while {} was next",
                    header.correlation_id, pending.correlation_id
                ));
                let _ = pending.reply.send(Err(error.clone()));
                break error;
            }
            Err(e) => {
                let _ = pending.reply.send(Err(e.clone()));
                break e;
            }
        }
    };
    tracing::debug!(broker = %addr, %error, "connection closed");
    if let Ok(mut guard) = in_flight.lock() {
        guard.close(error);
    }
}

#[cfg(test)]
mod tests {
    //! The connection against a scripted peer on 127.0.0.1: it answers
    //! ApiVersions, then holds a number of Metadata requests before answering
    //! them all, echoing each request's topic name, so the test sees that
    //! pipelined requests are matched to their own responses.

    use {
        super::*,
        crate::test_peer::{read_frame, response_frame},
        assert2::check,
        kafka_protocol::{
            messages::{
                MetadataRequest, MetadataResponse, TopicName, api_versions_response::ApiVersion,
                metadata_request::MetadataRequestTopic, metadata_response::MetadataResponseTopic,
            },
            protocol::{Decodable, decode_request_header_from_buffer},
        },
        tokio::net::TcpListener,
    };

    /// Serves one connection: ApiVersions, then Metadata requests answered in
    /// groups of `hold`; with `skew`, the first Metadata answer carries a wrong
    /// correlation id.
    async fn peer(listener: TcpListener, hold: usize, skew: bool) {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut held = Vec::new();
        while let Some(mut frame) = read_frame(&mut stream).await {
            let header = decode_request_header_from_buffer(&mut frame).unwrap();
            let version = header.request_api_version;
            if header.request_api_key == ApiKey::ApiVersions as i16 {
                let mut response = ApiVersionsResponse::default();
                let mut metadata = ApiVersion::default();
                metadata.api_key = ApiKey::Metadata as i16;
                metadata.max_version = 12;
                response.api_keys = vec![metadata];
                stream
                    .write_all(&response_frame(
                        header.correlation_id,
                        0,
                        &response,
                        version,
                    ))
                    .await
                    .unwrap();
                continue;
            }
            let request = MetadataRequest::decode(&mut frame, version).unwrap();
            let mut response = MetadataResponse::default();
            response.topics = request
                .topics
                .unwrap_or_default()
                .into_iter()
                .map(|t| {
                    let mut topic = MetadataResponseTopic::default();
                    topic.name = t.name;
                    topic
                })
                .collect();
            let correlation = if skew {
                header.correlation_id + 1000
            } else {
                header.correlation_id
            };
            held.push(response_frame(
                correlation,
                ApiKey::Metadata.response_header_version(version),
                &response,
                version,
            ));
            if held.len() == hold {
                for frame in held.drain(..) {
                    stream.write_all(&frame).await.unwrap();
                }
            }
        }
    }

    fn metadata_for(topic: &str) -> MetadataRequest {
        let mut request = MetadataRequest::default();
        let mut t = MetadataRequestTopic::default();
        t.name = Some(TopicName(StrBytes::from_string(topic.to_owned())));
        request.topics = Some(vec![t]);
        request
    }

    #[tokio::test]
    async fn pipelined_requests_get_their_own_responses() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let server = tokio::spawn(peer(listener, 50, false));
        let connection = Connection::connect(&addr, &ConnectionConfig::default())
            .await
            .unwrap();
        check!(connection.version(ApiKey::Metadata).unwrap() == 12);
        check!(connection.version(ApiKey::Produce).is_err());
        // All 50 are on the wire before the peer answers any.
        let futures: Vec<_> = (0..50)
            .map(|i| {
                connection
                    .enqueue(&metadata_for(&format!("t{i}")), 12, None)
                    .unwrap()
            })
            .collect();
        for (i, future) in futures.into_iter().enumerate() {
            let response = future.await.unwrap();
            let name = response.topics[0].name.as_ref().unwrap().0.to_string();
            check!(name == format!("t{i}"));
        }
        drop(connection);
        server.abort();
    }

    #[tokio::test]
    async fn a_wrong_correlation_id_closes_the_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let server = tokio::spawn(peer(listener, 1, true));
        let connection = Connection::connect(&addr, &ConnectionConfig::default())
            .await
            .unwrap();
        let error = connection.send(&metadata_for("x")).await.unwrap_err();
        check!(matches!(error, ClientError::Protocol(_)), "{error}");
        check!(connection.is_closed());
        check!(connection.send(&metadata_for("y")).await.is_err());
        server.abort();
    }

    #[tokio::test]
    async fn connect_to_a_closed_port_fails() {
        let port = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let error = Connection::connect(&format!("127.0.0.1:{port}"), &ConnectionConfig::default())
            .await
            .unwrap_err();
        check!(matches!(error, ClientError::Connection { .. }));
    }
}
