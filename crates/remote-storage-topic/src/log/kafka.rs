//! [`KafkaMetadataEventLog`]: the [`MetadataEventLog`] over a Kafka-compatible
//! cluster (Krabka or Apache Kafka), through `krabka-client`.
//!
//! - **Topic.** [`KafkaMetadataEventLog::connect`] creates the metadata topic
//!   (`__remote_log_metadata`, 50 partitions, `retention.ms=-1`, as Kafka's
//!   `remote.log.metadata.topic.*` defaults) when it is absent, and otherwise
//!   uses the partition count it has.
//! - **Writes** go through one non-idempotent `acks=all` producer. Each
//!   publication is retried with exponential backoff while the failure is
//!   transient (leader change, timeout, broken connection), up to
//!   `delivery_timeout`. A retry after an ambiguous failure may append an
//!   event twice; the manager's consumer refuses the copy deterministically,
//!   so every replica's state stays the same. `publish_keyed_group` submits
//!   the whole group to the producer before it awaits any acknowledgment, so
//!   the group is batched and pipelined into one round trip per leader.
//! - **Reads.** A subscription is one fetch task that keeps its own position
//!   per assigned partition and fetches them without a consumer group, in one
//!   multi-partition Fetch per leader (long-polling, so new records arrive
//!   without waiting out a poll interval). Records go to the stream through a
//!   bounded channel, so a slow consumer holds back the fetching, and at most
//!   one fetched page is held. Like the in-process log, every record is
//!   tagged with the generation of its partition's assignment, and the stream
//!   drops records of an assignment that was removed.
//! - **Range reads** fetch page by page from `start`, hand each record over,
//!   and step over offsets compaction removed; they stop with an error when
//!   the partition's high watermark is below `end`.

use {
    super::{
        AssignmentHandle, KeyedEvent, MetadataEventLog, MetadataEventRecord, MetadataEventStream,
        PartitionStart, RangeVisitor,
    },
    crate::error::MetadataLogError,
    async_trait::async_trait,
    bytes::Bytes,
    futures_util::stream::Stream,
    krabka_client::{
        Acks, Client, ClientConfig, ClientError, ConsumerConfig, ConsumerRecord, IsolationLevel,
        NewTopic, OffsetSpec, PartitionFetch, Producer, ProducerConfig, ProducerRecord,
    },
    std::{
        collections::HashMap,
        future::Future,
        pin::Pin,
        sync::{Arc, Mutex, MutexGuard, PoisonError},
        task::{Context, Poll},
        time::{Duration, Instant},
    },
    tokio::{
        runtime::Handle,
        sync::{Notify, mpsc},
        task::JoinHandle,
    },
};

/// Kafka's name of the metadata topic.
pub const REMOTE_LOG_METADATA_TOPIC: &str = "__remote_log_metadata";

/// The start of the client id of every client that writes the metadata
/// topic (Kafka's `REMOTE_LOG_METADATA_CLIENT_PREFIX`).
pub const REMOTE_LOG_METADATA_CLIENT_PREFIX: &str = "__remote_log_metadata_client";
/// Kafka's `remote.log.metadata.topic.num.partitions` default.
pub const DEFAULT_METADATA_TOPIC_PARTITIONS: i32 = 50;
/// Kafka's `TOPIC_ALREADY_EXISTS` error code.
const TOPIC_ALREADY_EXISTS: i16 = 36;
/// Kafka's `OFFSET_OUT_OF_RANGE` error code.
const OFFSET_OUT_OF_RANGE: i16 = 1;
/// Records buffered between a subscription's fetch task and its stream.
const STREAM_BUFFER: usize = 1024;

/// Settings of a [`KafkaMetadataEventLog`], named after Kafka's
/// `remote.log.metadata.*` configs.
#[derive(Debug, Clone)]
pub struct KafkaMetadataEventLogConfig {
    /// `bootstrap.servers` of the cluster holding the topic.
    pub bootstrap_servers: Vec<String>,
    /// The metadata topic's name (Kafka: `__remote_log_metadata`).
    pub topic: String,
    /// `remote.log.metadata.topic.num.partitions` (default 50), used when
    /// the topic is created.
    pub partitions: i32,
    /// `remote.log.metadata.topic.replication.factor`; Kafka's default is 3,
    /// this one is -1, the cluster's `default.replication.factor`, so a
    /// single node works out of the box.
    pub replication_factor: i16,
    /// `remote.log.metadata.topic.retention.ms` (default -1: forever).
    pub retention_ms: i64,
    /// Settings of the underlying client.
    pub client: ClientConfig,
    /// Fetch settings of subscriptions and range reads.
    pub fetch: ConsumerConfig,
    /// First backoff after a transient failure (`retry.backoff.ms`, 100 ms).
    pub retry_backoff: Duration,
    /// Largest backoff (`retry.backoff.max.ms`, 1 s).
    pub retry_backoff_max: Duration,
    /// How long a write or water-mark query keeps retrying
    /// (`delivery.timeout.ms`, 2 min).
    pub delivery_timeout: Duration,
}

impl KafkaMetadataEventLogConfig {
    /// Kafka's defaults for a cluster reachable at `bootstrap_servers`.
    #[must_use]
    pub fn new(bootstrap_servers: Vec<String>) -> Self {
        Self {
            bootstrap_servers,
            topic: REMOTE_LOG_METADATA_TOPIC.to_owned(),
            partitions: DEFAULT_METADATA_TOPIC_PARTITIONS,
            replication_factor: -1,
            retention_ms: -1,
            // Kafka's topic-based manager names its clients
            // `__remote_log_metadata_client_<broker>_producer`; a Krabka
            // broker lets only such clients write the metadata topic.
            client: {
                let mut client = ClientConfig::default();
                client.connection.client_id =
                    format!("{REMOTE_LOG_METADATA_CLIENT_PREFIX}_producer");
                client
            },
            fetch: ConsumerConfig::default(),
            retry_backoff: Duration::from_millis(100),
            retry_backoff_max: Duration::from_secs(1),
            delivery_timeout: Duration::from_secs(120),
        }
    }
}

/// The metadata log in a Kafka topic (see the module documentation).
#[derive(Clone)]
pub struct KafkaMetadataEventLog {
    shared: Arc<Shared>,
}

struct Shared {
    client: Client,
    producer: Producer,
    config: KafkaMetadataEventLogConfig,
    partition_count: i32,
    runtime: Handle,
}

impl std::fmt::Debug for KafkaMetadataEventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaMetadataEventLog")
            .field("topic", &self.shared.config.topic)
            .field("partition_count", &self.shared.partition_count)
            .finish_non_exhaustive()
    }
}

fn transport(context: &str, error: &ClientError) -> MetadataLogError {
    MetadataLogError::Transport(format!("{context}: {error}"))
}

/// Exponential backoff between `first` and `max`.
struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    fn new(config: &KafkaMetadataEventLogConfig) -> Self {
        Self {
            next: config.retry_backoff,
            max: config.retry_backoff_max.max(config.retry_backoff),
        }
    }

    async fn wait(&mut self) {
        tokio::time::sleep(self.next).await;
        self.next = (self.next * 2).min(self.max);
    }
}

impl Shared {
    /// Runs `attempt` until it succeeds, fails for good, or `delivery_timeout`
    /// passes; refreshes metadata before retrying where the error asks for it.
    async fn retrying<T, F, Fut>(&self, what: &str, mut attempt: F) -> Result<T, MetadataLogError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, ClientError>>,
    {
        let deadline = Instant::now() + self.config.delivery_timeout;
        let mut backoff = Backoff::new(&self.config);
        loop {
            match attempt().await {
                Ok(value) => return Ok(value),
                Err(error) if error.is_retriable() && Instant::now() < deadline => {
                    tracing::debug!(%error, "{what} failed; retrying");
                    if error.needs_metadata_refresh() {
                        let _ = self.client.refresh_metadata(&[&self.config.topic]).await;
                    }
                    backoff.wait().await;
                }
                Err(error) => return Err(transport(what, &error)),
            }
        }
    }

    fn check_partition(&self, partition: i32) -> Result<(), MetadataLogError> {
        if (0..self.partition_count).contains(&partition) {
            Ok(())
        } else {
            Err(MetadataLogError::PartitionOutOfRange {
                partition,
                partition_count: self.partition_count,
            })
        }
    }

    async fn append(
        &self,
        partition: i32,
        record: ProducerRecord,
    ) -> Result<i64, MetadataLogError> {
        self.check_partition(partition)?;
        let topic = self.config.topic.as_str();
        let producer = &self.producer;
        self.retrying("publication to the metadata topic", || {
            let record = record.clone();
            async move {
                producer
                    .send(topic, Some(partition), record)
                    .await?
                    .await
                    .map(|metadata| metadata.offset)
            }
        })
        .await
    }

    async fn list_offsets(&self, spec: OffsetSpec) -> Result<Vec<i64>, MetadataLogError> {
        let partitions: Vec<(i32, OffsetSpec)> =
            (0..self.partition_count).map(|p| (p, spec)).collect();
        let listed = self
            .retrying("listing the metadata topic's offsets", || {
                self.client.list_offsets(
                    &self.config.topic,
                    &partitions,
                    IsolationLevel::ReadUncommitted,
                )
            })
            .await?;
        let mut offsets = vec![0; partitions.len()];
        for listed in listed {
            if let Some(slot) = usize::try_from(listed.partition)
                .ok()
                .and_then(|index| offsets.get_mut(index))
            {
                *slot = listed.offset;
            }
        }
        Ok(offsets)
    }
}

impl KafkaMetadataEventLog {
    /// Connects to the cluster, creates the metadata topic when it is absent,
    /// and waits until every partition has a leader. The subscriptions' fetch
    /// tasks run on the runtime this is called on.
    ///
    /// # Errors
    ///
    /// [`MetadataLogError::Other`] outside a Tokio runtime, and
    /// [`MetadataLogError::Transport`] when the cluster cannot be reached
    /// within `delivery_timeout`, refuses to create the topic, or the topic
    /// never gets leaders.
    pub async fn connect(config: KafkaMetadataEventLogConfig) -> Result<Self, MetadataLogError> {
        let runtime = Handle::try_current().map_err(|_| {
            MetadataLogError::Other("the Kafka metadata log needs a Tokio runtime".into())
        })?;
        let deadline = Instant::now() + config.delivery_timeout;
        let mut backoff = Backoff::new(&config);
        let client = loop {
            match Client::connect(&config.bootstrap_servers, config.client.clone()).await {
                Ok(client) => break client,
                Err(error) if error.is_retriable() && Instant::now() < deadline => {
                    tracing::debug!(%error, "metadata topic cluster not reachable yet");
                    backoff.wait().await;
                }
                Err(error) => return Err(transport("connecting to the metadata cluster", &error)),
            }
        };
        let partition_count = ensure_topic(&client, &config, deadline).await?;
        let producer = Producer::new(
            client.clone(),
            ProducerConfig {
                acks: Acks::All,
                linger: Duration::ZERO,
                idempotence: false,
                ..ProducerConfig::default()
            },
        )
        .await
        .map_err(|error| transport("starting the metadata producer", &error))?;
        Ok(Self {
            shared: Arc::new(Shared {
                client,
                producer,
                config,
                partition_count,
                runtime,
            }),
        })
    }

    /// The metadata topic's name.
    #[must_use]
    pub fn topic(&self) -> &str {
        &self.shared.config.topic
    }

    /// Flushes and stops the producer; later publications fail.
    pub async fn close(&self) {
        self.shared.producer.close().await;
    }
}

/// Creates the topic when absent; returns its partition count once every
/// partition has a leader.
async fn ensure_topic(
    client: &Client,
    config: &KafkaMetadataEventLogConfig,
    deadline: Instant,
) -> Result<i32, MetadataLogError> {
    let topic = config.topic.as_str();
    let mut backoff = Backoff::new(config);
    let mut created = false;
    loop {
        let metadata = client.refresh_metadata(&[topic]).await;
        match metadata.as_ref().map(|metadata| metadata.topic(topic)) {
            Ok(Ok(info)) if !info.partitions.is_empty() => {
                if info
                    .partitions
                    .iter()
                    .all(|p| p.leader.is_some() && p.error_code == 0)
                {
                    return i32::try_from(info.partitions.len()).map_err(|_| {
                        MetadataLogError::Transport(format!("{topic} has too many partitions"))
                    });
                }
            }
            Ok(_) if !created => {
                let new_topic = NewTopic::new(topic, config.partitions)
                    .replication_factor(config.replication_factor)
                    .config("cleanup.policy", "delete")
                    .config("retention.ms", config.retention_ms.to_string());
                match client
                    .create_topic(&new_topic, Duration::from_secs(30))
                    .await
                {
                    Ok(_) => {
                        tracing::info!(
                            topic,
                            partitions = config.partitions,
                            "created the metadata topic"
                        );
                        created = true;
                    }
                    Err(error) if error.code() == Some(TOPIC_ALREADY_EXISTS) => created = true,
                    Err(error) if error.is_retriable() => {
                        tracing::debug!(%error, "creating the metadata topic; retrying");
                    }
                    Err(error) => return Err(transport("creating the metadata topic", &error)),
                }
            }
            Ok(_) => {}
            Err(error) if error.is_retriable() => {
                tracing::debug!(%error, "metadata of the metadata topic; retrying");
            }
            Err(error) => return Err(transport("metadata of the metadata topic", error)),
        }
        if Instant::now() >= deadline {
            return Err(MetadataLogError::Transport(format!(
                "{topic} has no leader for every partition"
            )));
        }
        backoff.wait().await;
    }
}

fn to_record(partition: i32, record: ConsumerRecord) -> MetadataEventRecord {
    MetadataEventRecord {
        partition,
        offset: record.offset,
        key: record.key,
        tombstone: record.value.is_none(),
        payload: record.value.unwrap_or_default(),
    }
}

#[async_trait]
impl MetadataEventLog for KafkaMetadataEventLog {
    fn partition_count(&self) -> i32 {
        self.shared.partition_count
    }

    async fn publish(&self, partition: i32, event: Bytes) -> Result<i64, MetadataLogError> {
        self.shared
            .append(partition, ProducerRecord::value(event))
            .await
    }

    async fn publish_keyed(
        &self,
        partition: i32,
        key: Bytes,
        event: Option<Bytes>,
    ) -> Result<i64, MetadataLogError> {
        let record = ProducerRecord {
            key: Some(key),
            value: event,
            ..ProducerRecord::default()
        };
        self.shared.append(partition, record).await
    }

    /// Submits every record before awaiting any, then awaits them all. When
    /// every record failed with a transient error nothing was appended, and
    /// the whole group is retried; otherwise the first error is returned.
    async fn publish_keyed_group(
        &self,
        events: Vec<KeyedEvent>,
    ) -> Result<Vec<i64>, MetadataLogError> {
        for event in &events {
            self.shared.check_partition(event.partition)?;
        }
        let shared = &self.shared;
        let topic = shared.config.topic.as_str();
        let deadline = Instant::now() + shared.config.delivery_timeout;
        let mut backoff = Backoff::new(&shared.config);
        loop {
            let mut deliveries = Vec::with_capacity(events.len());
            for event in &events {
                let record = ProducerRecord {
                    key: Some(event.key.clone()),
                    value: event.event.clone(),
                    ..ProducerRecord::default()
                };
                deliveries.push(
                    shared
                        .producer
                        .send(topic, Some(event.partition), record)
                        .await,
                );
            }
            let mut results = Vec::with_capacity(deliveries.len());
            for delivery in deliveries {
                results.push(match delivery {
                    Ok(future) => future.await.map(|metadata| metadata.offset),
                    Err(error) => Err(error),
                });
            }
            let all_transient = results
                .iter()
                .all(|result| result.as_ref().is_err_and(ClientError::is_retriable));
            if all_transient && !results.is_empty() && Instant::now() < deadline {
                let _ = shared.client.refresh_metadata(&[topic]).await;
                backoff.wait().await;
                continue;
            }
            return results
                .into_iter()
                .map(|result| result.map_err(|error| transport("keyed group publication", &error)))
                .collect();
        }
    }

    fn subscribe(
        &self,
        assignment: Vec<PartitionStart>,
    ) -> (MetadataEventStream, Arc<dyn AssignmentHandle>) {
        let (sender, receiver) = mpsc::channel(STREAM_BUFFER);
        let subscription = Arc::new(Subscription {
            partition_count: self.shared.partition_count,
            assigned: Mutex::new(Assigned::default()),
            changed: Notify::new(),
        });
        for start in assignment {
            subscription.add(start);
        }
        let task = self.shared.runtime.spawn(fetch_loop(
            Arc::clone(&self.shared),
            Arc::clone(&subscription),
            sender,
        ));
        let stream = KafkaStream {
            receiver,
            subscription: Arc::clone(&subscription),
            task,
        };
        (Box::pin(stream), subscription)
    }

    async fn low_water_marks(&self) -> Result<Vec<i64>, MetadataLogError> {
        self.shared.list_offsets(OffsetSpec::Earliest).await
    }

    async fn high_water_marks(&self) -> Result<Vec<i64>, MetadataLogError> {
        self.shared.list_offsets(OffsetSpec::Latest).await
    }

    async fn visit_range(
        &self,
        partition: i32,
        start: i64,
        end: i64,
        visit: &mut RangeVisitor<'_>,
    ) -> Result<(), MetadataLogError> {
        let shared = &self.shared;
        shared.check_partition(partition)?;
        let topic = shared.config.topic.clone();
        let mut offset = start.max(0);
        let mut backoff = Backoff::new(&shared.config);
        while offset < end {
            let wanted = [PartitionFetch {
                topic: topic.clone(),
                partition,
                offset,
            }];
            let fetched = match shared.client.fetch(&wanted, &shared.config.fetch).await {
                Ok(mut results) => results
                    .pop()
                    .unwrap_or_else(|| Err(ClientError::Protocol("fetch answered nothing".into()))),
                Err(error) => Err(error),
            };
            let page = match fetched {
                Ok(page) => page,
                Err(error) if error.code() == Some(OFFSET_OUT_OF_RANGE) => {
                    // Below the log start the records are gone; step to it.
                    let earliest = shared.list_offsets(OffsetSpec::Earliest).await?;
                    let log_start = usize::try_from(partition)
                        .ok()
                        .and_then(|index| earliest.get(index).copied())
                        .unwrap_or(offset);
                    if log_start <= offset {
                        return Err(MetadataLogError::RangeShort {
                            partition,
                            reached: offset,
                            end,
                        });
                    }
                    offset = log_start;
                    continue;
                }
                Err(error) if error.is_retriable() => {
                    if error.needs_metadata_refresh() {
                        let _ = shared.client.refresh_metadata(&[&topic]).await;
                    }
                    backoff.wait().await;
                    continue;
                }
                Err(error) => return Err(transport("range read of the metadata topic", &error)),
            };
            for record in page.records {
                if record.offset >= end {
                    return Ok(());
                }
                if record.offset >= offset {
                    visit(to_record(partition, record))?;
                }
            }
            if page.next_offset > offset {
                offset = page.next_offset;
            } else if page.high_watermark < end && page.high_watermark <= offset {
                return Err(MetadataLogError::RangeShort {
                    partition,
                    reached: page.high_watermark.max(offset),
                    end,
                });
            }
        }
        Ok(())
    }
}

/// The assignment of one subscription.
struct Subscription {
    partition_count: i32,
    assigned: Mutex<Assigned>,
    changed: Notify,
}

#[derive(Default)]
struct Assigned {
    /// Partition → (generation, next offset to fetch).
    partitions: HashMap<i32, (u64, i64)>,
    next_generation: u64,
}

impl Subscription {
    fn lock(&self) -> MutexGuard<'_, Assigned> {
        self.assigned.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn is_current(&self, partition: i32, generation: u64) -> bool {
        self.lock()
            .partitions
            .get(&partition)
            .is_some_and(|&(current, _)| current == generation)
    }
}

impl AssignmentHandle for Subscription {
    fn add(&self, start: PartitionStart) {
        if !(0..self.partition_count).contains(&start.partition) {
            tracing::warn!(
                partition = start.partition,
                "ignoring assignment of a metadata partition outside the topic"
            );
            return;
        }
        {
            let mut assigned = self.lock();
            if assigned.partitions.contains_key(&start.partition) {
                return;
            }
            let generation = assigned.next_generation;
            assigned.next_generation += 1;
            assigned
                .partitions
                .insert(start.partition, (generation, start.start_offset.max(0)));
        }
        self.changed.notify_one();
    }

    fn remove(&self, partition: i32) {
        self.lock().partitions.remove(&partition);
        self.changed.notify_one();
    }

    fn assigned(&self) -> Vec<i32> {
        self.lock().partitions.keys().copied().collect()
    }
}

/// Fetches the assigned partitions and forwards their records until the
/// stream is dropped. Errors are logged and retried with backoff; the loop
/// never gives up on its own.
async fn fetch_loop(
    shared: Arc<Shared>,
    subscription: Arc<Subscription>,
    sender: mpsc::Sender<(u64, MetadataEventRecord)>,
) {
    let topic = shared.config.topic.clone();
    let mut backoff = Backoff::new(&shared.config);
    loop {
        let wanted: Vec<(u64, PartitionFetch)> = subscription
            .lock()
            .partitions
            .iter()
            .map(|(&partition, &(generation, offset))| {
                (
                    generation,
                    PartitionFetch {
                        topic: topic.clone(),
                        partition,
                        offset,
                    },
                )
            })
            .collect();
        if wanted.is_empty() {
            let changed = subscription.changed.notified();
            if subscription.lock().partitions.is_empty() {
                if sender.is_closed() {
                    return;
                }
                changed.await;
            }
            continue;
        }
        let fetches: Vec<PartitionFetch> = wanted.iter().map(|(_, fetch)| fetch.clone()).collect();
        let results = match shared.client.fetch(&fetches, &shared.config.fetch).await {
            Ok(results) => results,
            Err(error) => {
                tracing::debug!(%error, "fetching the metadata topic failed; retrying");
                if error.needs_metadata_refresh() || !error.is_retriable() {
                    let _ = shared.client.refresh_metadata(&[&topic]).await;
                }
                backoff.wait().await;
                continue;
            }
        };
        let mut failed = false;
        for ((generation, fetch), result) in wanted.into_iter().zip(results) {
            match result {
                Ok(page) => {
                    for record in page.records {
                        if record.offset < fetch.offset {
                            continue;
                        }
                        let record = to_record(fetch.partition, record);
                        if sender.send((generation, record)).await.is_err() {
                            return;
                        }
                    }
                    let mut assigned = subscription.lock();
                    if let Some(entry) = assigned.partitions.get_mut(&fetch.partition)
                        && entry.0 == generation
                    {
                        entry.1 = entry.1.max(page.next_offset);
                    }
                }
                Err(error) if error.code() == Some(OFFSET_OUT_OF_RANGE) => {
                    failed = true;
                    reset_to_log_start(&shared, &subscription, fetch.partition, generation).await;
                }
                Err(error) => {
                    failed = true;
                    tracing::debug!(%error, partition = fetch.partition, "fetch failed; retrying");
                    if error.needs_metadata_refresh() {
                        let _ = shared.client.refresh_metadata(&[&topic]).await;
                    }
                }
            }
        }
        if failed {
            backoff.wait().await;
        } else {
            backoff = Backoff::new(&shared.config);
        }
    }
}

/// Moves a partition whose position fell below the log start (retention or
/// compaction removed the records) to the log start.
async fn reset_to_log_start(
    shared: &Shared,
    subscription: &Subscription,
    partition: i32,
    generation: u64,
) {
    let Ok(earliest) = shared.list_offsets(OffsetSpec::Earliest).await else {
        return;
    };
    let Some(&log_start) = usize::try_from(partition)
        .ok()
        .and_then(|index| earliest.get(index))
    else {
        return;
    };
    let mut assigned = subscription.lock();
    if let Some(entry) = assigned.partitions.get_mut(&partition)
        && entry.0 == generation
        && entry.1 < log_start
    {
        tracing::warn!(
            partition,
            from = entry.1,
            to = log_start,
            "metadata records were removed; skipping to the log start"
        );
        entry.1 = log_start;
    }
}

/// The stream of one Kafka-backed subscription; dropping it stops the fetch task.
struct KafkaStream {
    receiver: mpsc::Receiver<(u64, MetadataEventRecord)>,
    subscription: Arc<Subscription>,
    task: JoinHandle<()>,
}

impl Stream for KafkaStream {
    type Item = MetadataEventRecord;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            match self.receiver.poll_recv(cx) {
                Poll::Ready(Some((generation, record))) => {
                    if self.subscription.is_current(record.partition, generation) {
                        return Poll::Ready(Some(record));
                    }
                }
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl Drop for KafkaStream {
    fn drop(&mut self) {
        self.task.abort();
    }
}
