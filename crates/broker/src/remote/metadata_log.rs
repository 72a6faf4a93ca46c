//! [`BrokerMetadataEventLog`]: the [`MetadataEventLog`] of the broker's own
//! `__remote_log_metadata`, served in process on its partitions.
//!
//! The topic-based metadata manager (seed 000) keeps remote segment
//! metadata as events in `__remote_log_metadata`. The topic is an ordinary
//! topic of this broker (50 partitions by default, `retention.ms=-1`, as
//! Kafka creates it), so the broker appends to and reads from its
//! partitions directly — as the group coordinator does with
//! `__consumer_offsets` — never through `krabka-client` to its own
//! advertised address: a broker whose advertised host it cannot reach
//! itself still tiers, and no connection, request encoding or poll interval
//! stands between the manager and its events. The Kafka-backed adapter
//! stays for tools that read the topic from outside (`krabka
//! remote-metadata`), and reads exactly these records.
//!
//! * **Writes** are appends through the partition's storage seam
//!   ([`PartitionStorage::append`]): one v2 batch per event (key and value
//!   as the Kafka adapter sends them), queued behind any other append.
//! * **Subscriptions** are one task each that keeps a position per assigned
//!   partition, reads the assigned partitions in one trip to the blocking
//!   pool, hands the records to the stream through a bounded channel (a slow
//!   consumer holds back the reading) and, when it has caught up, waits for
//!   an append to one of its partitions — the same wake-up a parked fetch
//!   uses, so new events arrive at once. Records are tagged with the
//!   generation of their partition's assignment, and the stream drops those
//!   of an assignment that was removed.
//! * **Range reads** read from the start (stepping up to the log start when
//!   records below it are gone) and stop with an error when the partition
//!   ends short of the range.

use {
    crate::{
        blocking,
        broker::Broker,
        coordinator::state_topic,
        partition::{Isolation, Partition, PartitionStorage, Read, ReadRequest, StorageError},
    },
    async_trait::async_trait,
    bytes::Bytes,
    futures_util::{future::select_all, stream::Stream},
    kafka_protocol::records::{Record, TimestampType},
    krabka_log::batch::{BatchScan, decode_records},
    krabka_remote_storage_topic::{
        AssignmentHandle, KeyedEvent, MetadataEventLog, MetadataEventRecord, MetadataEventStream,
        MetadataLogError, PartitionStart, REMOTE_LOG_METADATA_TOPIC, RangeVisitor,
    },
    std::{
        collections::HashMap,
        pin::Pin,
        sync::{Arc, Mutex, MutexGuard, PoisonError, Weak},
        task::{Context, Poll},
        time::{SystemTime, UNIX_EPOCH},
    },
    tokio::{
        runtime::Handle,
        sync::{Notify, mpsc},
        task::JoinHandle,
    },
};

/// Bytes one read of a metadata partition pulls.
const READ_BYTES: usize = 1 << 20;
/// Records buffered between a subscription's task and its stream.
const STREAM_BUFFER: usize = 1024;

/// `__remote_log_metadata` on this broker's partitions.
#[derive(Clone)]
pub struct BrokerMetadataEventLog {
    shared: Arc<Shared>,
}

struct Shared {
    broker: Weak<Broker>,
    partition_count: i32,
    runtime: Handle,
}

impl std::fmt::Debug for BrokerMetadataEventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerMetadataEventLog")
            .field("partition_count", &self.shared.partition_count)
            .finish_non_exhaustive()
    }
}

fn transport(e: impl std::fmt::Display) -> MetadataLogError {
    MetadataLogError::Transport(e.to_string())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// One record as a v2 batch, as a Kafka producer would send it.
fn encode(key: Option<Bytes>, value: Option<Bytes>) -> Result<Bytes, MetadataLogError> {
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: now_ms(),
        key,
        value,
        headers: Default::default(),
    };
    state_topic::encode_v2_batch(std::slice::from_ref(&record)).map_err(MetadataLogError::Other)
}

/// The records of `partition` in `bytes` at or after `from`, and the offset
/// after the last batch.
fn decode(partition: i32, bytes: &Bytes, from: i64) -> (Vec<MetadataEventRecord>, i64) {
    let mut out = Vec::new();
    let mut next = from;
    for (at, header) in BatchScan::new(bytes, false) {
        next = next.max(header.next_offset());
        if header.is_control() {
            continue;
        }
        let Some(batch) = bytes.get(at..) else { break };
        let Ok(records) = decode_records(batch) else {
            tracing::warn!(
                partition,
                offset = header.base_offset,
                "skipping an undecodable metadata batch"
            );
            continue;
        };
        for r in records.into_iter().filter(|r| r.offset >= from) {
            out.push(MetadataEventRecord {
                partition,
                offset: r.offset,
                key: r.key,
                tombstone: r.value.is_none(),
                payload: r.value.unwrap_or_default(),
            });
        }
    }
    (out, next)
}

/// One read of a metadata partition from `offset`: its records and the
/// next offset, or where the log now starts when `offset` fell below it.
enum Page {
    Records(Vec<MetadataEventRecord>, i64),
    Below(i64),
}

fn read_page(partition: &Partition, index: i32, offset: i64) -> Result<Page, MetadataLogError> {
    let request = ReadRequest {
        offset,
        max_bytes: READ_BYTES,
        min_one_batch: true,
        isolation: Isolation::ReadUncommitted,
        zero_copy: false,
    };
    match partition.read(&request) {
        Ok(Read::Ready(read)) => {
            let records = read.records.in_memory().cloned().unwrap_or_default();
            let (records, next) = decode(index, &records, offset);
            Ok(Page::Records(records, next))
        }
        Ok(Read::Later(_)) => Err(MetadataLogError::Other(
            "the metadata topic is not served from local disk".into(),
        )),
        Err(StorageError::OffsetOutOfRange { log_start, .. }) if offset < log_start => {
            Ok(Page::Below(log_start))
        }
        Err(e) => Err(transport(e)),
    }
}

impl BrokerMetadataEventLog {
    /// The metadata log of `broker`, creating `__remote_log_metadata` with
    /// `partitions` partitions when it does not exist (an existing topic
    /// keeps its count). Subscriptions run on the current runtime.
    ///
    /// # Errors
    ///
    /// [`MetadataLogError::Other`] outside a tokio runtime,
    /// [`MetadataLogError::Transport`] when the topic cannot be created.
    pub async fn open(broker: &Arc<Broker>, partitions: i32) -> Result<Self, MetadataLogError> {
        let runtime = Handle::try_current().map_err(|_| {
            MetadataLogError::Other("the metadata log needs a tokio runtime".into())
        })?;
        let creating = Arc::clone(broker);
        blocking::run(move || {
            state_topic::ensure_topic_with(
                &creating,
                REMOTE_LOG_METADATA_TOPIC,
                partitions,
                &[("cleanup.policy", "delete"), ("retention.ms", "-1")],
            )
        })
        .await
        .map_err(transport)?
        .map_err(MetadataLogError::Transport)?;
        let partition_count = broker
            .registry
            .get(REMOTE_LOG_METADATA_TOPIC)
            .map_or(partitions, |meta| meta.partitions);
        Ok(Self {
            shared: Arc::new(Shared {
                broker: Arc::downgrade(broker),
                partition_count,
                runtime,
            }),
        })
    }
}

impl Shared {
    fn partition(&self, partition: i32) -> Result<Arc<Partition>, MetadataLogError> {
        if !(0..self.partition_count).contains(&partition) {
            return Err(MetadataLogError::PartitionOutOfRange {
                partition,
                partition_count: self.partition_count,
            });
        }
        let broker = self.broker.upgrade().ok_or(MetadataLogError::Closed)?;
        broker
            .partitions
            .get(REMOTE_LOG_METADATA_TOPIC, partition)
            .ok_or_else(|| {
                transport(format!(
                    "{REMOTE_LOG_METADATA_TOPIC}-{partition} is not hosted here"
                ))
            })
    }

    fn partitions(&self) -> Result<Vec<Arc<Partition>>, MetadataLogError> {
        (0..self.partition_count)
            .map(|p| self.partition(p))
            .collect()
    }

    async fn append(
        &self,
        partition: i32,
        key: Option<Bytes>,
        value: Option<Bytes>,
    ) -> Result<i64, MetadataLogError> {
        let target = self.partition(partition)?;
        let appended = target.append(encode(key, value)?);
        match appended.await {
            Ok(Ok(info)) => Ok(info.first_offset),
            Ok(Err(e)) => Err(transport(e)),
            Err(_) => Err(MetadataLogError::Closed),
        }
    }
}

#[async_trait]
impl MetadataEventLog for BrokerMetadataEventLog {
    fn partition_count(&self) -> i32 {
        self.shared.partition_count
    }

    async fn publish(&self, partition: i32, event: Bytes) -> Result<i64, MetadataLogError> {
        self.shared.append(partition, None, Some(event)).await
    }

    async fn publish_keyed(
        &self,
        partition: i32,
        key: Bytes,
        event: Option<Bytes>,
    ) -> Result<i64, MetadataLogError> {
        self.shared.append(partition, Some(key), event).await
    }

    /// Queues every record before awaiting any (each partition keeps the
    /// order given), then awaits them all.
    async fn publish_keyed_group(
        &self,
        events: Vec<KeyedEvent>,
    ) -> Result<Vec<i64>, MetadataLogError> {
        let mut queued = Vec::with_capacity(events.len());
        for event in events {
            let target = self.shared.partition(event.partition)?;
            queued.push(target.append(encode(Some(event.key), event.event)?));
        }
        let mut offsets = Vec::with_capacity(queued.len());
        for appended in queued {
            offsets.push(match appended.await {
                Ok(Ok(info)) => info.first_offset,
                Ok(Err(e)) => return Err(transport(e)),
                Err(_) => return Err(MetadataLogError::Closed),
            });
        }
        Ok(offsets)
    }

    fn subscribe(
        &self,
        assignment: Vec<PartitionStart>,
    ) -> (MetadataEventStream, Arc<dyn AssignmentHandle>) {
        let shared = Arc::clone(&self.shared);
        subscription(
            &self.shared.runtime,
            self.shared.partition_count,
            assignment,
            |subscription, sender| follow(shared, subscription, sender),
        )
    }

    async fn low_water_marks(&self) -> Result<Vec<i64>, MetadataLogError> {
        Ok(self
            .shared
            .partitions()?
            .iter()
            .map(|p| p.offsets().log_start)
            .collect())
    }

    async fn high_water_marks(&self) -> Result<Vec<i64>, MetadataLogError> {
        Ok(self
            .shared
            .partitions()?
            .iter()
            .map(|p| p.offsets().high_watermark)
            .collect())
    }

    async fn visit_range(
        &self,
        partition: i32,
        start: i64,
        end: i64,
        visit: &mut RangeVisitor<'_>,
    ) -> Result<(), MetadataLogError> {
        let target = self.shared.partition(partition)?;
        let mut offset = start.max(0);
        while offset < end {
            let reading = Arc::clone(&target);
            let page = blocking::run(move || read_page(&reading, partition, offset))
                .await
                .map_err(transport)??;
            match page {
                Page::Below(log_start) => offset = log_start,
                Page::Records(records, next) => {
                    for record in records {
                        if record.offset >= end {
                            return Ok(());
                        }
                        visit(record)?;
                    }
                    if next <= offset {
                        return Err(MetadataLogError::RangeShort {
                            partition,
                            reached: offset,
                            end,
                        });
                    }
                    offset = next;
                }
            }
        }
        Ok(())
    }
}

/// A subscription's stream and assignment handle whose records come from
/// `follow` (spawned on `runtime` with the assignment and the sending half
/// of the stream's channel). The stream drops the records of a partition
/// whose assignment was removed, and aborts the task when dropped; the
/// cluster's metadata log uses it with a follower of its own.
pub(crate) fn subscription<F, Fut>(
    runtime: &Handle,
    partition_count: i32,
    assignment: Vec<PartitionStart>,
    follow: F,
) -> (MetadataEventStream, Arc<dyn AssignmentHandle>)
where
    F: FnOnce(Arc<Subscription>, mpsc::Sender<(u64, MetadataEventRecord)>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (sender, receiver) = mpsc::channel(STREAM_BUFFER);
    let subscription = Arc::new(Subscription {
        partition_count,
        assigned: Mutex::new(Assigned::default()),
        changed: Notify::new(),
    });
    for start in assignment {
        subscription.add(start);
    }
    let task = runtime.spawn(follow(Arc::clone(&subscription), sender));
    let stream = SubscriptionStream {
        receiver,
        subscription: Arc::clone(&subscription),
        task,
    };
    (Box::pin(stream), subscription)
}

/// The assignment of one subscription.
pub(crate) struct Subscription {
    partition_count: i32,
    assigned: Mutex<Assigned>,
    changed: Notify,
}

#[derive(Default)]
struct Assigned {
    /// Partition → (generation, next offset to read).
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

    /// Each assigned partition with its assignment's generation and the
    /// next offset to read.
    pub(crate) fn positions(&self) -> Vec<(i32, u64, i64)> {
        self.lock()
            .partitions
            .iter()
            .map(|(&partition, &(generation, offset))| (partition, generation, offset))
            .collect()
    }

    /// Moves `partition`'s next offset up to `next`, if it is still
    /// assigned under `generation`.
    pub(crate) fn advance(&self, partition: i32, generation: u64, next: i64) {
        let mut assigned = self.lock();
        if let Some(entry) = assigned.partitions.get_mut(&partition)
            && entry.0 == generation
        {
            entry.1 = entry.1.max(next);
        }
    }

    /// Notified when the assignment changes.
    pub(crate) fn changed(&self) -> &Notify {
        &self.changed
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

/// Reads the assigned partitions and forwards their records until the
/// stream is dropped; waits for appends when it has caught up.
async fn follow(
    shared: Arc<Shared>,
    subscription: Arc<Subscription>,
    sender: mpsc::Sender<(u64, MetadataEventRecord)>,
) {
    loop {
        let wanted: Vec<(i32, u64, i64)> = subscription
            .lock()
            .partitions
            .iter()
            .map(|(&partition, &(generation, offset))| (partition, generation, offset))
            .collect();
        let targets: Vec<Arc<Partition>> = match wanted
            .iter()
            .map(|(partition, _, _)| shared.partition(*partition))
            .collect()
        {
            Ok(targets) => targets,
            Err(MetadataLogError::Closed) => return,
            Err(e) => {
                tracing::warn!(error = %e, "metadata subscription cannot read its partitions");
                return;
            }
        };
        // Listen before reading: an append during the read wakes the wait.
        let assignment_changed = subscription.changed.notified();
        tokio::pin!(assignment_changed);
        assignment_changed.as_mut().enable();
        let mut appended: Vec<_> = targets
            .iter()
            .map(|t| Box::pin(t.changed().notified()))
            .collect();
        for a in &mut appended {
            a.as_mut().enable();
        }
        let reading = targets.clone();
        let jobs = wanted.clone();
        let pages = blocking::run(move || {
            reading
                .iter()
                .zip(jobs)
                .map(|(target, (partition, _, offset))| read_page(target, partition, offset))
                .collect::<Vec<_>>()
        })
        .await;
        let Ok(pages) = pages else { return };
        let mut progressed = false;
        for ((partition, generation, offset), page) in wanted.into_iter().zip(pages) {
            let next = match page {
                Ok(Page::Records(records, next)) => {
                    for record in records {
                        if sender.send((generation, record)).await.is_err() {
                            return;
                        }
                    }
                    next
                }
                Ok(Page::Below(log_start)) => {
                    tracing::warn!(
                        partition,
                        from = offset,
                        to = log_start,
                        "metadata records were removed; skipping to the log start"
                    );
                    log_start
                }
                Err(e) => {
                    tracing::warn!(partition, error = %e, "reading the metadata topic failed");
                    offset
                }
            };
            if next > offset {
                progressed = true;
                let mut assigned = subscription.lock();
                if let Some(entry) = assigned.partitions.get_mut(&partition)
                    && entry.0 == generation
                {
                    entry.1 = entry.1.max(next);
                }
            }
        }
        if progressed {
            continue;
        }
        let any_append = async {
            if appended.is_empty() {
                std::future::pending::<()>().await;
            } else {
                select_all(appended.iter_mut()).await;
            }
        };
        tokio::select! {
            () = any_append => {}
            () = assignment_changed => {}
            () = sender.closed() => return,
        }
    }
}

/// The stream of one subscription; dropping it stops its task.
struct SubscriptionStream {
    receiver: mpsc::Receiver<(u64, MetadataEventRecord)>,
    subscription: Arc<Subscription>,
    task: JoinHandle<()>,
}

impl Stream for SubscriptionStream {
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

impl Drop for SubscriptionStream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        crate::{
            config::{BrokerConfig, RawSettings},
            partition::{Isolation, PartitionStorage, Read, ReadRequest},
            remote::{
                RemoteLogManager,
                tests::{append, batch, decode},
            },
        },
        assert2::check,
        futures_util::StreamExt,
        std::time::Duration,
    };

    /// A broker with tiering on and the topic-based metadata manager, whose
    /// advertised address leads nowhere; no listener runs at all.
    fn broker(dir: &std::path::Path) -> Arc<Broker> {
        let mut raw = RawSettings::default();
        raw.set("log.dirs", &dir.display().to_string(), "test");
        raw.set("log.cleaner.enable", "false", "test");
        raw.set("remote.log.storage.system.enable", "true", "test");
        raw.set("remote.log.metadata.topic.num.partitions", "3", "test");
        raw.set(
            "advertised.listeners",
            "PLAINTEXT://unreachable.invalid:1",
            "test",
        );
        Arc::new(Broker::open(BrokerConfig::from_raw(&raw).unwrap()).unwrap())
    }

    async fn next(stream: &mut MetadataEventStream) -> MetadataEventRecord {
        tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .expect("a record within 30 s")
            .expect("the stream goes on")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn events_are_appended_to_and_read_from_the_brokers_own_partitions() {
        let dir = tempfile::tempdir().unwrap();
        let broker = broker(dir.path());
        let log = BrokerMetadataEventLog::open(&broker, 3).await.unwrap();
        check!(log.partition_count() == 3);
        check!(
            broker
                .registry
                .get(REMOTE_LOG_METADATA_TOPIC)
                .unwrap()
                .partitions
                == 3
        );
        check!(log.publish(1, Bytes::from_static(b"first")).await.unwrap() == 0);
        check!(log.publish(1, Bytes::from_static(b"second")).await.unwrap() == 1);
        let keyed = log
            .publish_keyed(2, Bytes::from_static(b"k"), None)
            .await
            .unwrap();
        check!(keyed == 0);
        check!(log.high_water_marks().await.unwrap() == vec![0, 2, 1]);
        check!(log.low_water_marks().await.unwrap() == vec![0, 0, 0]);
        check!(matches!(
            log.publish(3, Bytes::new()).await,
            Err(MetadataLogError::PartitionOutOfRange { .. })
        ));

        // A subscription replays from its start, then follows live appends.
        let (mut stream, assignment) = log.subscribe(vec![PartitionStart::new(1, 1)]);
        let r = next(&mut stream).await;
        check!((r.partition, r.offset, r.payload.as_ref()) == (1, 1, &b"second"[..]));
        assignment.add(PartitionStart::new(2, 0));
        let r = next(&mut stream).await;
        check!((r.partition, r.offset, r.tombstone) == (2, 0, true));
        check!(r.key.as_deref() == Some(&b"k"[..]));
        log.publish(1, Bytes::from_static(b"live")).await.unwrap();
        let r = next(&mut stream).await;
        check!((r.partition, r.offset, r.payload.as_ref()) == (1, 2, &b"live"[..]));
        // A removed partition's records stop.
        assignment.remove(1);
        log.publish(1, Bytes::from_static(b"gone")).await.unwrap();
        log.publish(2, Bytes::from_static(b"kept")).await.unwrap();
        let r = next(&mut stream).await;
        check!((r.partition, r.payload.as_ref()) == (2, &b"kept"[..]));

        // Range reads, and a range past the end is short.
        let mut seen = Vec::new();
        log.visit_range(1, 1, 3, &mut |r| {
            seen.push(r.offset);
            Ok(())
        })
        .await
        .unwrap();
        check!(seen == vec![1, 2]);
        let short = log.visit_range(1, 0, 10, &mut |_| Ok(())).await;
        check!(matches!(short, Err(MetadataLogError::RangeShort { .. })));
        broker.partitions.close_all();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_broker_that_cannot_reach_its_advertised_address_tiers_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let broker = broker(dir.path());
        let rlm = RemoteLogManager::start(&broker).await.unwrap().unwrap();
        broker.remote.set(Arc::clone(&rlm)).unwrap();
        let configs = [
            ("segment.bytes", "2048"),
            ("remote.storage.enable", "true"),
            ("local.retention.bytes", "1"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        crate::handlers::admin::create_topic(&broker, "far", 1, -1, &[], configs, false)
            .await
            .unwrap();
        let p = broker.partitions.get("far", 0).unwrap();
        for n in 0..30 {
            append(&p, batch(&format!("b{n}"), n, None));
        }
        let pass = |rlm: Arc<RemoteLogManager>| {
            let broker = Arc::clone(&broker);
            crate::blocking::run(move || {
                rlm.before_first_pass(&broker);
                rlm.run_once(&broker);
            })
        };
        pass(Arc::clone(&rlm)).await.unwrap();
        check!(
            p.local_log().log_start_offset() > 0,
            "segments left local disk"
        );
        // The segment events are in the broker's own metadata topic.
        let events: i64 = broker
            .partitions
            .all()
            .iter()
            .filter(|q| q.topic == REMOTE_LOG_METADATA_TOPIC)
            .map(|q| q.offsets().log_end)
            .sum();
        check!(events >= 4);
        // Offset 0 is served from the tier.
        let read = |p: Arc<crate::partition::Partition>| async move {
            let request = ReadRequest {
                offset: 0,
                max_bytes: 4096,
                min_one_batch: true,
                isolation: Isolation::ReadUncommitted,
                zero_copy: false,
            };
            match crate::blocking::run(move || p.read(&request))
                .await
                .unwrap()
                .unwrap()
            {
                Read::Later(future) => future.await.unwrap(),
                Read::Ready(_) => panic!("offset 0 left local disk"),
            }
        };
        check!(decode(read(Arc::clone(&p)).await.records.in_memory().unwrap())[0].offset == 0);

        // A new manager (as after a restart) rebuilds its state from the topic.
        let again = RemoteLogManager::start(&broker).await.unwrap().unwrap();
        p.publish_tier_offsets(crate::partition::TierOffsets::default());
        pass(again).await.unwrap();
        check!(p.tier_offsets().remote_start == Some(0));
        check!(p.log_start_offset() == 0);
        broker.partitions.close_all();
    }
}
