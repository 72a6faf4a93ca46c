//! [`Producer`]: batching, linger and pipelined produce, with a future per record.
//!
//! Shaped like Kafka's producer. [`Producer::send`] appends a record to its
//! partition's open batch in the accumulator (a short critical section, no
//! encoding) and returns a [`DeliveryFuture`]. A batch closes when adding a
//! record would pass `batch.size`, when it has waited `linger.ms`, or on
//! [`Producer::flush`]. One sender task drains closed batches — at most one
//! per partition per request — into one Produce request per leader, encodes
//! them with `kafka-protocol`'s batch encoder and pipelines up to
//! `max.in.flight.requests.per.connection` requests per broker. Because the
//! sender only takes batches when a broker has a free in-flight slot, records
//! keep collecting into open batches while the broker is busy, which is what
//! makes batches large under load even with `linger.ms = 0`.
//!
//! With idempotence the producer takes a producer id from InitProducerId and
//! numbers each partition's records from 0 when a batch is closed, so the
//! broker can drop duplicates and detect gaps. The responses of one broker are
//! handled in order by one task, so a partition's futures resolve in order.
//!
//! Retries: a batch that fails with a retriable error (a leader change, a
//! timeout, a broken connection) goes back to the front of its partition's
//! queue, in its original order, and is sent again after `retry.backoff.ms`
//! until `delivery.timeout.ms` has passed since it was opened; metadata is
//! refreshed so it goes to the new leader. An idempotent batch keeps its
//! sequence numbers, so the broker drops a copy it already has
//! (`DUPLICATE_SEQUENCE_NUMBER` counts as success, offset unknown), and the
//! batches behind a retried one that the broker refuses as out of order are
//! retried with it. Not done: bumping the epoch after an unresolvable
//! sequence error (KIP-360); create a new producer after such an error.

use {
    crate::{
        Client, ClientError,
        admin::{duration_ms, topic_name},
        connection::Connection,
        partitioner::partition_for_key,
        records::{self, BatchProducer, ProducerRecord},
    },
    bytes::Bytes,
    kafka_protocol::{
        messages::{
            ApiKey, ProduceRequest, TransactionalId,
            produce_request::{PartitionProduceData, TopicProduceData},
        },
        protocol::StrBytes,
        records::{Compression, Record},
    },
    krabka_ids::{BrokerId, ProducerEpoch, ProducerId},
    std::{
        collections::{HashMap, VecDeque},
        future::Future,
        pin::Pin,
        sync::{
            Arc, Mutex,
            atomic::{AtomicBool, AtomicUsize, Ordering},
        },
        task::{Context, Poll, Waker},
        time::{Duration, Instant, SystemTime, UNIX_EPOCH},
    },
    tokio::sync::{Notify, mpsc},
};

/// How many acknowledgements a produce waits for (`acks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// `acks=0`: no response; offsets are unknown (-1).
    None,
    /// `acks=1`: the leader has written the batch.
    Leader,
    /// `acks=all` (-1): all in-sync replicas have it.
    All,
}

impl Acks {
    /// The wire value: 0, 1 or -1.
    #[must_use]
    pub fn code(self) -> i16 {
        match self {
            Self::None => 0,
            Self::Leader => 1,
            Self::All => -1,
        }
    }
}

/// Settings of a [`Producer`], named after Kafka's producer configs.
#[derive(Debug, Clone)]
pub struct ProducerConfig {
    /// `acks` (default all).
    pub acks: Acks,
    /// `linger.ms` (default 5 ms, Kafka 4.0's default).
    pub linger: Duration,
    /// `batch.size` in bytes (default 16384).
    pub batch_size: usize,
    /// `compression.type` (default none).
    pub compression: Compression,
    /// `enable.idempotence` (default true; needs acks=all).
    pub idempotence: bool,
    /// `max.in.flight.requests.per.connection` (default 5).
    pub max_in_flight: usize,
    /// `buffer.memory`: bytes of records waiting in the producer before `send` waits (default 32 MiB).
    pub buffer_memory: usize,
    /// `max.request.size`: bytes of batches in one request (default 1 MiB).
    pub max_request_size: usize,
    /// `request.timeout.ms` sent to the broker as the produce timeout (default 30 s).
    pub request_timeout: Duration,
    /// `delivery.timeout.ms`: how long a batch may be retried after it was opened (default 120 s).
    pub delivery_timeout: Duration,
    /// `retry.backoff.ms` (default 100 ms).
    pub retry_backoff: Duration,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        Self {
            acks: Acks::All,
            linger: Duration::from_millis(5),
            batch_size: 16_384,
            compression: Compression::None,
            idempotence: true,
            max_in_flight: 5,
            buffer_memory: 32 * 1024 * 1024,
            max_request_size: 1024 * 1024,
            request_timeout: Duration::from_secs(30),
            delivery_timeout: Duration::from_secs(120),
            retry_backoff: Duration::from_millis(100),
        }
    }
}

/// Where an acknowledged record was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordMetadata {
    /// Partition index.
    pub partition: i32,
    /// Offset, or -1 with acks=0.
    pub offset: i64,
    /// CreateTime, or the broker's LogAppendTime when the topic uses it.
    pub timestamp: i64,
}

/// One partition's answer to a produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProduceOutcome {
    /// Offset given to the batch's first record (-1 with acks=0).
    pub base_offset: i64,
    /// The broker's LogAppendTime, or -1 for CreateTime topics.
    pub log_append_time: i64,
    /// The partition's log start offset (-1 when unknown).
    pub log_start_offset: i64,
}

/// One batch of a produce request.
#[derive(Debug, Clone)]
pub struct PartitionBatch {
    /// Topic name.
    pub topic: Arc<str>,
    /// Partition index.
    pub partition: i32,
    /// One encoded v2 record batch.
    pub batch: Bytes,
}

/// A request's batches with their outcomes, in request order.
pub type ProduceResults = Vec<Result<ProduceOutcome, ClientError>>;

/// Queues a Produce request with `batches` (at most one per partition) on
/// `connection` and returns the future of the per-batch outcomes, in the
/// order of `batches`. With [`Acks::None`] the future resolves at once with
/// offset -1.
///
/// # Errors
///
/// The errors of [`Connection::enqueue`].
pub fn enqueue_produce(
    connection: &Connection,
    batches: &[PartitionBatch],
    acks: Acks,
    timeout: Duration,
    transactional_id: Option<&str>,
) -> Result<
    impl Future<Output = Result<ProduceResults, ClientError>> + Send + 'static + use<>,
    ClientError,
> {
    let version = connection.version(ApiKey::Produce)?;
    let mut request = ProduceRequest::default();
    request.acks = acks.code();
    request.timeout_ms = duration_ms(timeout);
    request.transactional_id =
        transactional_id.map(|t| TransactionalId(StrBytes::from_string(t.to_owned())));
    let mut topics: Vec<TopicProduceData> = Vec::new();
    for b in batches {
        let mut data = PartitionProduceData::default();
        data.index = b.partition;
        data.records = Some(b.batch.clone());
        match topics.iter_mut().find(|t| t.name.0.as_str() == &*b.topic) {
            Some(t) => t.partition_data.push(data),
            None => {
                let mut t = TopicProduceData::default();
                t.name = topic_name(&b.topic);
                t.partition_data.push(data);
                topics.push(t);
            }
        }
    }
    request.topic_data = topics;
    let keys: Vec<(Arc<str>, i32)> = batches
        .iter()
        .map(|b| (Arc::clone(&b.topic), b.partition))
        .collect();
    let payloads: Vec<Bytes> = batches.iter().map(|b| b.batch.clone()).collect();
    let response = if acks == Acks::None {
        connection.send_without_response(&request, version, &payloads)?;
        None
    } else {
        Some(connection.enqueue_sharing(&request, version, None, &payloads)?)
    };
    Ok(async move {
        let Some(response) = response else {
            let none = ProduceOutcome {
                base_offset: -1,
                log_append_time: -1,
                log_start_offset: -1,
            };
            return Ok(keys.iter().map(|_| Ok(none)).collect());
        };
        let response = response.await?;
        Ok(keys
            .iter()
            .map(|(topic, partition)| {
                let found = response
                    .responses
                    .iter()
                    .filter(|t| t.name.0.as_str() == &**topic)
                    .flat_map(|t| t.partition_responses.iter())
                    .find(|p| p.index == *partition);
                let Some(p) = found else {
                    return Err(ClientError::Protocol(format!(
                        "Produce answered nothing for {topic}-{partition}"
                    )));
                };
                ClientError::check(p.error_code, p.error_message.as_deref(), || {
                    format!("Produce {topic}-{partition}")
                })?;
                Ok(ProduceOutcome {
                    base_offset: p.base_offset,
                    log_append_time: p.log_append_time_ms,
                    log_start_offset: p.log_start_offset,
                })
            })
            .collect())
    })
}

/// The shared outcome of one batch; every record's future points at it.
#[derive(Default)]
struct Completion {
    state: Mutex<CompletionState>,
}

#[derive(Default)]
struct CompletionState {
    result: Option<Result<ProduceOutcome, ClientError>>,
    wakers: Vec<Waker>,
}

impl Completion {
    fn complete(&self, result: Result<ProduceOutcome, ClientError>) {
        let wakers = match self.state.lock() {
            Ok(mut state) => {
                state.result.get_or_insert(result);
                std::mem::take(&mut state.wakers)
            }
            Err(_) => return,
        };
        for waker in wakers {
            waker.wake();
        }
    }

    fn poll_result(&self, cx: &Context<'_>) -> Poll<Result<ProduceOutcome, ClientError>> {
        let Ok(mut state) = self.state.lock() else {
            return Poll::Ready(Err(ClientError::Closed("producer state poisoned".into())));
        };
        match &state.result {
            Some(result) => Poll::Ready(result.clone()),
            None => {
                state.wakers.push(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// Resolves when the record's batch is acknowledged (or fails).
#[must_use = "a DeliveryFuture reports whether the record was written"]
pub struct DeliveryFuture {
    completion: Arc<Completion>,
    partition: i32,
    index: i64,
    timestamp: i64,
}

impl std::fmt::Debug for DeliveryFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeliveryFuture")
            .field("partition", &self.partition)
            .field("index", &self.index)
            .finish()
    }
}

impl DeliveryFuture {
    /// The partition the record went to.
    #[must_use]
    pub fn partition(&self) -> i32 {
        self.partition
    }
}

impl Future for DeliveryFuture {
    type Output = Result<RecordMetadata, ClientError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.completion.poll_result(cx).map(|result| {
            result.map(|outcome| RecordMetadata {
                partition: self.partition,
                offset: if outcome.base_offset >= 0 {
                    outcome.base_offset + self.index
                } else {
                    -1
                },
                timestamp: if outcome.log_append_time >= 0 {
                    outcome.log_append_time
                } else {
                    self.timestamp
                },
            })
        })
    }
}

/// The batch being filled for one partition.
struct OpenBatch {
    records: Vec<ProducerRecord>,
    bytes: usize,
    created: Instant,
    completion: Arc<Completion>,
}

/// A closed batch waiting for the sender.
struct SealedBatch {
    records: Vec<ProducerRecord>,
    bytes: usize,
    base_sequence: i32,
    completion: Arc<Completion>,
    /// Closing order across the producer; a retried batch goes back in this order.
    seal_id: u64,
    /// When the batch was opened; retries stop after `delivery.timeout.ms`.
    created: Instant,
    /// Not before this instant (retry backoff).
    retry_at: Option<Instant>,
}

#[derive(Default)]
struct PartitionQueue {
    open: Option<OpenBatch>,
    sealed: VecDeque<SealedBatch>,
    next_sequence: i32,
    /// The most recently closed batch; [`Producer::flush`] waits for it.
    last_sealed: Option<Arc<Completion>>,
}

struct TopicQueues {
    topic: Arc<str>,
    partitions: Vec<PartitionQueue>,
    sticky: usize,
}

/// Records waiting to be sent, per topic and partition.
struct Accumulator {
    topics: HashMap<String, TopicQueues>,
    in_flight: HashMap<BrokerId, usize>,
    next_seal_id: u64,
    /// Close every open batch at the next sender pass (flush or close).
    flush: bool,
}

impl Accumulator {
    /// Closes the open batch of `queue`, numbering its records when idempotent.
    fn seal(queue: &mut PartitionQueue, idempotent: bool, next_seal_id: &mut u64) {
        let Some(open) = queue.open.take() else {
            return;
        };
        let base_sequence = if idempotent { queue.next_sequence } else { -1 };
        if idempotent {
            let count = i32::try_from(open.records.len()).unwrap_or(i32::MAX);
            // Kafka wraps sequence numbers at i32::MAX back to 0.
            queue.next_sequence = wrapping_sequence(queue.next_sequence, count);
        }
        queue.last_sealed = Some(Arc::clone(&open.completion));
        *next_seal_id += 1;
        queue.sealed.push_back(SealedBatch {
            records: open.records,
            bytes: open.bytes,
            base_sequence,
            completion: open.completion,
            seal_id: *next_seal_id,
            created: open.created,
            retry_at: None,
        });
    }
}

/// `sequence + count`, wrapping past `i32::MAX` to 0 as Kafka does.
#[must_use]
pub fn wrapping_sequence(sequence: i32, count: i32) -> i32 {
    let next = i64::from(sequence) + i64::from(count);
    i32::try_from(next % (i64::from(i32::MAX) + 1)).unwrap_or(0)
}

struct Shared {
    client: Client,
    config: ProducerConfig,
    identity: Option<(ProducerId, ProducerEpoch)>,
    accumulator: Mutex<Accumulator>,
    wake: Notify,
    buffered: AtomicUsize,
    space: Notify,
    closed: AtomicBool,
    /// When the sender last asked for metadata because a leader was unknown.
    last_leader_refresh: Mutex<Option<Instant>>,
}

/// A Kafka producer; share it between tasks behind an `Arc`.
pub struct Producer {
    shared: Arc<Shared>,
    sender: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

impl Producer {
    /// Starts a producer; with idempotence it first takes a producer id.
    ///
    /// # Errors
    ///
    /// [`ClientError::InvalidArgument`] for idempotence without acks=all or a
    /// zero batch size / in-flight limit, and the errors of
    /// [`Client::init_producer_id`].
    pub async fn new(client: Client, config: ProducerConfig) -> Result<Self, ClientError> {
        if config.idempotence && config.acks != Acks::All {
            return Err(ClientError::InvalidArgument(
                "enable.idempotence requires acks=all".into(),
            ));
        }
        if config.batch_size == 0 || config.max_in_flight == 0 {
            return Err(ClientError::InvalidArgument(
                "batch.size and max.in.flight must be positive".into(),
            ));
        }
        if config.idempotence && config.max_in_flight > 5 {
            return Err(ClientError::InvalidArgument(
                "enable.idempotence allows at most 5 in-flight requests per connection".into(),
            ));
        }
        let identity = if config.idempotence {
            let id = client
                .init_producer_id(None, Duration::from_secs(60))
                .await?;
            Some((id.producer_id, id.epoch))
        } else {
            None
        };
        let shared = Arc::new(Shared {
            client,
            config,
            identity,
            accumulator: Mutex::new(Accumulator {
                topics: HashMap::new(),
                in_flight: HashMap::new(),
                next_seal_id: 0,
                flush: false,
            }),
            wake: Notify::new(),
            buffered: AtomicUsize::new(0),
            space: Notify::new(),
            closed: AtomicBool::new(false),
            last_leader_refresh: Mutex::new(None),
        });
        let sender = tokio::spawn(sender_loop(Arc::clone(&shared)));
        Ok(Self {
            shared,
            sender: Mutex::new(Some(sender)),
        })
    }

    /// The producer id and epoch, when idempotent.
    #[must_use]
    pub fn producer_identity(&self) -> Option<(ProducerId, ProducerEpoch)> {
        self.shared.identity
    }

    /// Queues `record` for `topic`, in `partition` or, when `None`, the
    /// partition Kafka's default partitioner picks (murmur2 of the key, or a
    /// sticky partition per batch for null keys). Waits only while more than
    /// `buffer.memory` bytes are queued. The returned future resolves when the
    /// record's batch is acknowledged.
    ///
    /// # Errors
    ///
    /// [`ClientError::Closed`] after [`Producer::close`],
    /// [`ClientError::InvalidArgument`] for a partition the topic lacks or a
    /// record over `max.request.size`, and metadata errors for an unknown topic.
    pub async fn send(
        &self,
        topic: &str,
        partition: Option<i32>,
        record: ProducerRecord,
    ) -> Result<DeliveryFuture, ClientError> {
        let shared = &self.shared;
        if shared.closed.load(Ordering::Acquire) {
            return Err(ClientError::Closed("the producer is closed".into()));
        }
        let size = record.estimated_size();
        if size + records::BATCH_HEADER_SIZE > shared.config.max_request_size {
            return Err(ClientError::InvalidArgument(format!(
                "record of about {size} bytes is larger than max.request.size {}",
                shared.config.max_request_size
            )));
        }
        // Back-pressure: wait while the buffer is full.
        while shared.buffered.load(Ordering::Acquire) + size > shared.config.buffer_memory {
            let space = shared.space.notified();
            tokio::pin!(space);
            space.as_mut().enable();
            if shared.buffered.load(Ordering::Acquire) + size <= shared.config.buffer_memory {
                break;
            }
            space.await;
        }
        let known = shared
            .accumulator
            .lock()
            .map(|a| a.topics.contains_key(topic))
            .unwrap_or(false);
        if !known {
            let info = shared.client.topic(topic).await?;
            let count = info.partitions.len();
            if let Ok(mut acc) = shared.accumulator.lock() {
                acc.topics
                    .entry(topic.to_owned())
                    .or_insert_with(|| TopicQueues {
                        topic: Arc::from(topic),
                        partitions: (0..count).map(|_| PartitionQueue::default()).collect(),
                        sticky: 0,
                    });
            }
        }
        let timestamp = record.timestamp.unwrap_or_else(now_ms);
        let mut record = record;
        record.timestamp = Some(timestamp);
        let idempotent = shared.identity.is_some();
        let batch_size = shared.config.batch_size;
        let mut acc = shared
            .accumulator
            .lock()
            .map_err(|_| ClientError::Closed("producer state poisoned".into()))?;
        let Accumulator {
            topics,
            next_seal_id,
            ..
        } = &mut *acc;
        let queues = topics
            .get_mut(topic)
            .ok_or_else(|| ClientError::broker(3, None, format!("produce to {topic}")))?;
        let count = queues.partitions.len();
        let index = match (partition, record.key.as_ref()) {
            (Some(p), _) => usize::try_from(p)
                .ok()
                .filter(|&p| p < count)
                .ok_or_else(|| {
                    ClientError::InvalidArgument(format!("{topic} has no partition {p}"))
                })?,
            (None, Some(key)) => usize::try_from(partition_for_key(
                key,
                i32::try_from(count).unwrap_or(i32::MAX),
            ))
            .unwrap_or(0),
            (None, None) => queues.sticky % count.max(1),
        };
        let partition_index = i32::try_from(index).unwrap_or(i32::MAX);
        let Some(queue) = queues.partitions.get_mut(index) else {
            return Err(ClientError::InvalidArgument(format!(
                "{topic} has no partitions"
            )));
        };
        let mut woke = false;
        if queue
            .open
            .as_ref()
            .is_some_and(|open| open.bytes + size > batch_size && !open.records.is_empty())
        {
            Accumulator::seal(queue, idempotent, next_seal_id);
            if partition.is_none() && record.key.is_none() {
                // Sticky partitioning: move on once a batch is full.
                queues.sticky = queues.sticky.wrapping_add(1);
            }
            woke = true;
        }
        let Some(queue) = queues.partitions.get_mut(index) else {
            return Err(ClientError::InvalidArgument(format!(
                "{topic} has no partitions"
            )));
        };
        let open = queue.open.get_or_insert_with(|| {
            woke = true; // a new batch starts a linger timer
            OpenBatch {
                records: Vec::new(),
                bytes: records::BATCH_HEADER_SIZE,
                created: Instant::now(),
                completion: Arc::new(Completion::default()),
            }
        });
        let index_in_batch = i64::try_from(open.records.len()).unwrap_or(i64::MAX);
        open.records.push(record);
        open.bytes += size;
        let completion = Arc::clone(&open.completion);
        if open.bytes >= batch_size {
            Accumulator::seal(queue, idempotent, next_seal_id);
            woke = true;
        }
        drop(acc);
        shared.buffered.fetch_add(size, Ordering::AcqRel);
        if woke {
            shared.wake.notify_one();
        }
        Ok(DeliveryFuture {
            completion,
            partition: partition_index,
            index: index_in_batch,
            timestamp,
        })
    }

    /// Sends every queued record now (ignoring `linger.ms`) and waits until
    /// all records sent before this call are acknowledged or failed.
    pub async fn flush(&self) {
        let completions: Vec<Arc<Completion>> = {
            let Ok(mut acc) = self.shared.accumulator.lock() else {
                return;
            };
            acc.flush = true;
            acc.topics
                .values()
                .flat_map(|t| t.partitions.iter())
                .filter_map(|q| {
                    q.open
                        .as_ref()
                        .map(|o| Arc::clone(&o.completion))
                        .or_else(|| q.last_sealed.clone())
                })
                .collect()
        };
        self.shared.wake.notify_one();
        // A partition's batches complete in order (one response task per
        // broker), so its newest batch completing means all of them have.
        for completion in completions {
            let _ = WaitCompletion(completion).await;
        }
    }

    /// Flushes and stops the producer; later sends fail with [`ClientError::Closed`].
    pub async fn close(&self) {
        self.shared.closed.store(true, Ordering::Release);
        self.flush().await;
        let handle = self.sender.lock().ok().and_then(|mut s| s.take());
        self.shared.wake.notify_one();
        if let Some(handle) = handle {
            let _ = handle.await;
        }
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        // The sender drains what is queued, then exits.
        self.shared.closed.store(true, Ordering::Release);
        if let Ok(mut acc) = self.shared.accumulator.lock() {
            acc.flush = true;
        }
        self.shared.wake.notify_one();
    }
}

struct WaitCompletion(Arc<Completion>);

impl Future for WaitCompletion {
    type Output = Result<ProduceOutcome, ClientError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.poll_result(cx)
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A request being assembled for one broker.
struct Outgoing {
    batches: Vec<(Arc<str>, i32, SealedBatch)>,
    bytes: usize,
}

/// Requests handed to a broker's response task, in send order.
type InFlightRequest = (
    Pin<Box<dyn Future<Output = Result<ProduceResults, ClientError>> + Send>>,
    Vec<(Arc<str>, i32, SealedBatch)>,
);

async fn sender_loop(shared: Arc<Shared>) {
    let mut responders: HashMap<BrokerId, mpsc::UnboundedSender<InFlightRequest>> = HashMap::new();
    loop {
        let (ready, next_deadline, idle) = collect_ready(&shared);
        let sent_any = !ready.is_empty();
        for (broker, outgoing) in ready {
            send_request(&shared, &mut responders, broker, outgoing).await;
        }
        if idle && shared.closed.load(Ordering::Acquire) {
            return;
        }
        if sent_any {
            continue;
        }
        let notified = shared.wake.notified();
        match next_deadline {
            Some(deadline) => {
                let _ = tokio::time::timeout_at(deadline.into(), notified).await;
            }
            None => notified.await,
        }
    }
}

/// Takes the batches that may go now, grouped into one request per leader.
/// Returns them, the earliest linger deadline of the open batches left, and
/// whether the producer is fully idle (nothing open, queued or in flight).
fn collect_ready(shared: &Shared) -> (Vec<(BrokerId, Outgoing)>, Option<Instant>, bool) {
    let Ok(mut acc) = shared.accumulator.lock() else {
        return (Vec::new(), None, true);
    };
    let now = Instant::now();
    let linger = shared.config.linger;
    let idempotent = shared.identity.is_some();
    let flush = std::mem::take(&mut acc.flush);
    let mut next_deadline: Option<Instant> = None;
    let mut requests: HashMap<BrokerId, Outgoing> = HashMap::new();
    let mut missing_leader = false;
    let mut idle = true;
    let Accumulator {
        topics,
        in_flight,
        next_seal_id,
        ..
    } = &mut *acc;
    for queues in topics.values_mut() {
        for (index, queue) in queues.partitions.iter_mut().enumerate() {
            if let Some(open) = &queue.open {
                let deadline = open.created + linger;
                if flush || deadline <= now {
                    Accumulator::seal(queue, idempotent, next_seal_id);
                } else {
                    next_deadline = Some(next_deadline.map_or(deadline, |d| d.min(deadline)));
                    idle = false;
                }
            }
            if queue.sealed.is_empty() {
                continue;
            }
            idle = false;
            if let Some(retry_at) = queue
                .sealed
                .front()
                .and_then(|b| b.retry_at)
                .filter(|&t| t > now)
            {
                next_deadline = Some(next_deadline.map_or(retry_at, |d| d.min(retry_at)));
                continue;
            }
            let partition = i32::try_from(index).unwrap_or(i32::MAX);
            let Some(leader) = shared.client.cached_leader(&queues.topic, partition) else {
                missing_leader = true;
                continue;
            };
            let busy = in_flight.get(&leader).copied().unwrap_or(0);
            if busy >= shared.config.max_in_flight && !requests.contains_key(&leader) {
                continue;
            }
            let request = requests.entry(leader).or_insert_with(|| Outgoing {
                batches: Vec::new(),
                bytes: 0,
            });
            let Some(bytes) = queue.sealed.front().map(|b| b.bytes) else {
                continue;
            };
            if !request.batches.is_empty() && request.bytes + bytes > shared.config.max_request_size
            {
                continue;
            }
            if let Some(batch) = queue.sealed.pop_front() {
                request.bytes += bytes;
                request
                    .batches
                    .push((Arc::clone(&queues.topic), partition, batch));
            }
        }
    }
    for broker in requests.keys() {
        *in_flight.entry(*broker).or_insert(0) += 1;
    }
    if in_flight.values().any(|&n| n > 0) {
        idle = false;
    }
    drop(acc);
    if missing_leader {
        // Learn the new leaders (at most one refresh per backoff), then look again.
        let now = Instant::now();
        let due = shared
            .last_leader_refresh
            .lock()
            .map(|mut last| {
                let due = last.is_none_or(|t| now.duration_since(t) >= shared.config.retry_backoff);
                if due {
                    *last = Some(now);
                }
                due
            })
            .unwrap_or(false);
        if due {
            let client = shared.client.clone();
            tokio::spawn(async move {
                let _ = client.refresh_metadata(&[]).await;
            });
        }
        let wake_later = now + Duration::from_millis(100);
        next_deadline = Some(next_deadline.map_or(wake_later, |d| d.min(wake_later)));
    }
    (
        requests
            .into_iter()
            .filter(|(_, r)| !r.batches.is_empty())
            .collect(),
        next_deadline,
        idle,
    )
}

/// Encodes and queues one request, and hands its response to the broker's
/// response task.
async fn send_request(
    shared: &Arc<Shared>,
    responders: &mut HashMap<BrokerId, mpsc::UnboundedSender<InFlightRequest>>,
    broker: BrokerId,
    outgoing: Outgoing,
) {
    let fail =
        |shared: &Arc<Shared>, batches: Vec<(Arc<str>, i32, SealedBatch)>, error: ClientError| {
            for (topic, partition, batch) in batches {
                settle(shared, topic, partition, batch, Err(error.clone()));
            }
            release_slot(shared, broker);
        };
    let producer = |base_sequence: i32| match shared.identity {
        Some((producer_id, epoch)) => BatchProducer {
            producer_id,
            epoch,
            base_sequence,
            transactional: false,
        },
        None => BatchProducer::NONE,
    };
    let mut encoded = Vec::with_capacity(outgoing.batches.len());
    for (topic, partition, batch) in &outgoing.batches {
        let wire: Result<Vec<Record>, ClientError> = batch
            .records
            .iter()
            .enumerate()
            .map(|(i, r)| records::to_wire(r, i, producer(batch.base_sequence), 0))
            .collect();
        match wire.and_then(|w| records::encode_wire_batch(&w, shared.config.compression)) {
            Ok(bytes) => encoded.push(PartitionBatch {
                topic: Arc::clone(topic),
                partition: *partition,
                batch: bytes,
            }),
            Err(e) => return fail(shared, outgoing.batches, e),
        }
    }
    let connection = match shared.client.broker_connection(broker).await {
        Ok(connection) => connection,
        Err(e) => return fail(shared, outgoing.batches, e),
    };
    let future = match enqueue_produce(
        &connection,
        &encoded,
        shared.config.acks,
        shared.config.request_timeout,
        None,
    ) {
        Ok(future) => future,
        Err(e) => return fail(shared, outgoing.batches, e),
    };
    let responder = responders.entry(broker).or_insert_with(|| {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(response_loop(Arc::clone(shared), broker, rx));
        tx
    });
    if let Err(mpsc::error::SendError((_, batches))) =
        responder.send((Box::pin(future), outgoing.batches))
    {
        responders.remove(&broker);
        fail(
            shared,
            batches,
            ClientError::Closed("response task stopped".into()),
        );
    }
}

/// Completes one broker's requests in the order they were sent.
async fn response_loop(
    shared: Arc<Shared>,
    broker: BrokerId,
    mut requests: mpsc::UnboundedReceiver<InFlightRequest>,
) {
    while let Some((future, batches)) = requests.recv().await {
        let results = match future.await {
            Ok(results) => results,
            Err(error) => batches.iter().map(|_| Err(error.clone())).collect(),
        };
        let mut refresh = false;
        for ((topic, partition, batch), result) in batches.into_iter().zip(results) {
            refresh |= result
                .as_ref()
                .is_err_and(ClientError::needs_metadata_refresh);
            settle(&shared, topic, partition, batch, result);
        }
        if refresh {
            let _ = shared.client.refresh_metadata(&[]).await;
        }
        release_slot(&shared, broker);
    }
}

/// Kafka's `OUT_OF_ORDER_SEQUENCE_NUMBER`.
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
/// Kafka's `DUPLICATE_SEQUENCE_NUMBER`: the broker already has the batch.
const DUPLICATE_SEQUENCE_NUMBER: i16 = 46;

/// Completes a batch, or puts it back for another attempt when the error is
/// retriable and `delivery.timeout.ms` has not passed. An idempotent batch
/// refused as out of order behind a batch that is itself being retried is
/// retried too, so the partition's batches go again in their original order.
fn settle(
    shared: &Shared,
    topic: Arc<str>,
    partition: i32,
    batch: SealedBatch,
    result: Result<ProduceOutcome, ClientError>,
) {
    let error = match result {
        Ok(outcome) => return finish_batch(shared, &batch, Ok(outcome)),
        Err(e) if e.code() == Some(DUPLICATE_SEQUENCE_NUMBER) => {
            let outcome = ProduceOutcome {
                base_offset: -1,
                log_append_time: -1,
                log_start_offset: -1,
            };
            return finish_batch(shared, &batch, Ok(outcome));
        }
        Err(e) => e,
    };
    let in_time = batch.created.elapsed() < shared.config.delivery_timeout;
    let retriable = shared.config.acks != Acks::None && in_time;
    let Ok(mut acc) = shared.accumulator.lock() else {
        return finish_batch(shared, &batch, Err(error));
    };
    let Some(queue) = acc.topics.get_mut(&*topic).and_then(|t| {
        t.partitions
            .get_mut(usize::try_from(partition).unwrap_or(usize::MAX))
    }) else {
        drop(acc);
        return finish_batch(shared, &batch, Err(error));
    };
    let behind_a_retry = shared.identity.is_some()
        && error.code() == Some(OUT_OF_ORDER_SEQUENCE_NUMBER)
        && queue.sealed.iter().any(|b| b.seal_id < batch.seal_id);
    if retriable && (error.is_retriable() || behind_a_retry) {
        tracing::debug!(%topic, partition, %error, "retrying produce batch");
        requeue(queue, batch, Instant::now() + shared.config.retry_backoff);
        drop(acc);
        shared.wake.notify_one();
        return;
    }
    drop(acc);
    finish_batch(shared, &batch, Err(error));
}

/// Puts a batch back into its partition's queue in closing order, to go
/// again at `retry_at`.
fn requeue(queue: &mut PartitionQueue, mut batch: SealedBatch, retry_at: Instant) {
    batch.retry_at = Some(retry_at);
    let at = queue
        .sealed
        .iter()
        .position(|b| b.seal_id > batch.seal_id)
        .unwrap_or(queue.sealed.len());
    queue.sealed.insert(at, batch);
}

fn finish_batch(shared: &Shared, batch: &SealedBatch, result: Result<ProduceOutcome, ClientError>) {
    let bytes = batch.bytes.saturating_sub(records::BATCH_HEADER_SIZE);
    batch.completion.complete(result);
    shared.buffered.fetch_sub(
        bytes.min(shared.buffered.load(Ordering::Acquire)),
        Ordering::AcqRel,
    );
    shared.space.notify_waiters();
}

fn release_slot(shared: &Shared, broker: BrokerId) {
    if let Ok(mut acc) = shared.accumulator.lock() {
        if let Some(n) = acc.in_flight.get_mut(&broker) {
            *n = n.saturating_sub(1);
        }
    }
    shared.wake.notify_one();
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn sequences_wrap_like_kafka() {
        check!(wrapping_sequence(0, 5) == 5);
        check!(wrapping_sequence(i32::MAX - 1, 1) == i32::MAX);
        check!(wrapping_sequence(i32::MAX, 1) == 0);
        check!(wrapping_sequence(i32::MAX - 2, 5) == 2);
    }

    #[test]
    fn sealing_numbers_batches_per_partition() {
        let mut queue = PartitionQueue::default();
        for n in [3usize, 2, 4] {
            queue.open = Some(OpenBatch {
                records: (0..n)
                    .map(|i| ProducerRecord::value(format!("{i}")))
                    .collect(),
                bytes: 0,
                created: Instant::now(),
                completion: Arc::new(Completion::default()),
            });
            Accumulator::seal(&mut queue, true, &mut 0);
        }
        let bases: Vec<i32> = queue.sealed.iter().map(|b| b.base_sequence).collect();
        check!(bases == vec![0, 3, 5]);
        check!(queue.next_sequence == 9);
        // Without idempotence there are no sequence numbers.
        let mut plain = PartitionQueue {
            open: Some(OpenBatch {
                records: vec![ProducerRecord::value("x")],
                bytes: 0,
                created: Instant::now(),
                completion: Arc::new(Completion::default()),
            }),
            ..PartitionQueue::default()
        };
        Accumulator::seal(&mut plain, false, &mut 0);
        check!(plain.sealed.front().map(|b| b.base_sequence) == Some(-1));
    }

    #[test]
    fn retried_batches_go_back_in_closing_order() {
        let mut queue = PartitionQueue::default();
        let mut ids = 0;
        let mut sealed = Vec::new();
        for i in 0..4 {
            queue.open = Some(OpenBatch {
                records: vec![ProducerRecord::value(format!("{i}"))],
                bytes: 0,
                created: Instant::now(),
                completion: Arc::new(Completion::default()),
            });
            Accumulator::seal(&mut queue, true, &mut ids);
        }
        // Batches 1 and 2 were sent; 3 and 4 still wait.
        sealed.extend(queue.sealed.drain(..2));
        let later = Instant::now();
        for batch in sealed {
            requeue(&mut queue, batch, later);
        }
        let order: Vec<u64> = queue.sealed.iter().map(|b| b.seal_id).collect();
        check!(order == vec![1, 2, 3, 4]);
        let sequences: Vec<i32> = queue.sealed.iter().map(|b| b.base_sequence).collect();
        check!(sequences == vec![0, 1, 2, 3]);
        check!(queue.sealed.front().and_then(|b| b.retry_at) == Some(later));
    }

    #[tokio::test]
    async fn delivery_futures_share_their_batch_outcome() {
        let completion = Arc::new(Completion::default());
        let first = DeliveryFuture {
            completion: Arc::clone(&completion),
            partition: 2,
            index: 0,
            timestamp: 10,
        };
        let third = DeliveryFuture {
            completion: Arc::clone(&completion),
            partition: 2,
            index: 2,
            timestamp: 11,
        };
        let waiter = tokio::spawn(third);
        completion.complete(Ok(ProduceOutcome {
            base_offset: 100,
            log_append_time: -1,
            log_start_offset: 0,
        }));
        check!(
            waiter.await.unwrap().unwrap()
                == RecordMetadata {
                    partition: 2,
                    offset: 102,
                    timestamp: 11
                }
        );
        check!(first.await.unwrap().offset == 100);
        // A failed batch fails every record; LogAppendTime replaces CreateTime.
        let failed = Arc::new(Completion::default());
        failed.complete(Err(ClientError::broker(10, None, "produce".into())));
        let f = DeliveryFuture {
            completion: failed,
            partition: 0,
            index: 0,
            timestamp: 0,
        };
        check!(f.await.unwrap_err().code() == Some(10));
        let appended = Arc::new(Completion::default());
        appended.complete(Ok(ProduceOutcome {
            base_offset: 5,
            log_append_time: 999,
            log_start_offset: 0,
        }));
        let f = DeliveryFuture {
            completion: appended,
            partition: 0,
            index: 1,
            timestamp: 1,
        };
        check!(
            f.await.unwrap()
                == RecordMetadata {
                    partition: 0,
                    offset: 6,
                    timestamp: 999
                }
        );
    }
}
