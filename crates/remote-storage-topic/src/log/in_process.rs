//! [`InProcessMetadataEventLog`]: the in-memory [`MetadataEventLog`].
//!
//! Every partition is an ordered map from offset to record behind one mutex.
//! A publish appends under that mutex and, still holding it, hands the record
//! to every subscriber that has the partition assigned. Adding a partition to
//! a subscription sends its backlog under the same mutex. So no record can
//! fall between a backlog replay and the live records, or arrive out of
//! order.
//!
//! Each subscriber gets an unbounded channel. A record carries the
//! *generation* of the assignment it was sent for; removing and re-adding a
//! partition starts a new generation, and the stream drops records of any
//! generation that is no longer assigned. So `remove` stops the emission at
//! once, even for records already queued.
//!
//! Keyed publication keeps Kafka's compaction semantics. [`compact`] plays the
//! log cleaner: for each key it keeps only the latest record, and it drops a
//! latest record that is a tombstone (as Kafka does once
//! `delete.retention.ms` has passed). Unkeyed records are never compacted. The
//! low water mark is the first retained offset, so it moves with compaction.
//!
//! [`compact`]: InProcessMetadataEventLog::compact

use {
    super::{
        AssignmentHandle, MetadataEventLog, MetadataEventRecord, MetadataEventStream,
        PartitionStart, RangeVisitor,
    },
    crate::error::MetadataLogError,
    async_trait::async_trait,
    bytes::Bytes,
    futures_util::stream::Stream,
    std::{
        collections::{BTreeMap, HashMap},
        pin::Pin,
        sync::{Arc, Mutex, MutexGuard, PoisonError},
        task::{Context, Poll},
    },
    tokio::sync::mpsc,
};

/// An in-memory metadata log shared by clones: every clone (and every manager
/// given one) sees the same partitions.
#[derive(Debug, Clone)]
pub struct InProcessMetadataEventLog {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    partition_count: i32,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    partitions: Vec<PartitionLog>,
    subscribers: HashMap<u64, Subscriber>,
    next_subscriber: u64,
    closed: bool,
}

#[derive(Debug, Default)]
struct PartitionLog {
    records: BTreeMap<i64, Stored>,
    next_offset: i64,
}

impl PartitionLog {
    /// First retained offset; the next offset when nothing is retained.
    fn low_water_mark(&self) -> i64 {
        self.records
            .keys()
            .next()
            .copied()
            .unwrap_or(self.next_offset)
    }
}

#[derive(Debug, Clone)]
struct Stored {
    key: Option<Bytes>,
    payload: Bytes,
    tombstone: bool,
}

impl Stored {
    fn to_record(&self, partition: i32, offset: i64) -> MetadataEventRecord {
        MetadataEventRecord {
            partition,
            offset,
            key: self.key.clone(),
            payload: self.payload.clone(),
            tombstone: self.tombstone,
        }
    }
}

#[derive(Debug)]
struct Subscriber {
    /// `None` once the log is closed: the stream then ends after what was
    /// already queued, and the assignment stays for `is_current`.
    sender: Option<mpsc::UnboundedSender<Delivery>>,
    /// Assigned partition → generation of that assignment.
    assigned: HashMap<i32, u64>,
    next_generation: u64,
}

#[derive(Debug)]
struct Delivery {
    generation: u64,
    record: MetadataEventRecord,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent under every panic point (each mutation
        // is a single insert or remove), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn index(&self, partition: i32) -> Result<usize, MetadataLogError> {
        usize::try_from(partition)
            .ok()
            .filter(|_| partition < self.partition_count)
            .ok_or(MetadataLogError::PartitionOutOfRange {
                partition,
                partition_count: self.partition_count,
            })
    }

    fn append(
        &self,
        partition: i32,
        key: Option<Bytes>,
        payload: Option<Bytes>,
    ) -> Result<i64, MetadataLogError> {
        let index = self.index(partition)?;
        let mut state = self.lock();
        if state.closed {
            return Err(MetadataLogError::Closed);
        }
        let State {
            partitions,
            subscribers,
            ..
        } = &mut *state;
        let log = partitions
            .get_mut(index)
            .ok_or(MetadataLogError::PartitionOutOfRange {
                partition,
                partition_count: self.partition_count,
            })?;
        let offset = log.next_offset;
        log.next_offset += 1;
        let stored = Stored {
            key,
            tombstone: payload.is_none(),
            payload: payload.unwrap_or_default(),
        };
        let record = stored.to_record(partition, offset);
        log.records.insert(offset, stored);
        // A subscriber whose stream is gone is dropped here.
        subscribers.retain(|_, subscriber| match subscriber.assigned.get(&partition) {
            Some(&generation) => subscriber.sender.as_ref().is_some_and(|sender| {
                sender
                    .send(Delivery {
                        generation,
                        record: record.clone(),
                    })
                    .is_ok()
            }),
            None => subscriber
                .sender
                .as_ref()
                .is_some_and(|sender| !sender.is_closed()),
        });
        Ok(offset)
    }
}

impl InProcessMetadataEventLog {
    /// An empty log of `partition_count` partitions (a negative count holds
    /// none).
    #[must_use]
    pub fn new(partition_count: i32) -> Self {
        let partition_count = partition_count.max(0);
        let partitions = (0..partition_count)
            .map(|_| PartitionLog::default())
            .collect();
        Self {
            shared: Arc::new(Shared {
                partition_count,
                state: Mutex::new(State {
                    partitions,
                    ..State::default()
                }),
            }),
        }
    }

    /// Runs one compaction pass over every partition, as Kafka's log cleaner
    /// would: of each key only the latest record stays, and a latest record
    /// that is a tombstone goes too. Unkeyed records stay. Returns how many
    /// records were removed.
    pub fn compact(&self) -> usize {
        let mut state = self.shared.lock();
        let mut removed = 0;
        for log in &mut state.partitions {
            let mut latest: HashMap<Bytes, i64> = HashMap::new();
            for (&offset, stored) in &log.records {
                if let Some(key) = &stored.key {
                    latest.insert(key.clone(), offset);
                }
            }
            let before = log.records.len();
            log.records.retain(|&offset, stored| match &stored.key {
                None => true,
                Some(key) => latest.get(key) == Some(&offset) && !stored.tombstone,
            });
            removed += before - log.records.len();
        }
        removed
    }

    /// Closes the log: later publications fail with
    /// [`MetadataLogError::Closed`] and every subscription's stream ends once
    /// it has delivered what was already queued.
    pub fn close(&self) {
        let mut state = self.shared.lock();
        state.closed = true;
        for subscriber in state.subscribers.values_mut() {
            subscriber.sender = None;
        }
    }
}

#[async_trait]
impl MetadataEventLog for InProcessMetadataEventLog {
    fn partition_count(&self) -> i32 {
        self.shared.partition_count
    }

    async fn publish(&self, partition: i32, event: Bytes) -> Result<i64, MetadataLogError> {
        self.shared.append(partition, None, Some(event))
    }

    async fn publish_keyed(
        &self,
        partition: i32,
        key: Bytes,
        event: Option<Bytes>,
    ) -> Result<i64, MetadataLogError> {
        self.shared.append(partition, Some(key), event)
    }

    fn subscribe(
        &self,
        assignment: Vec<PartitionStart>,
    ) -> (MetadataEventStream, Arc<dyn AssignmentHandle>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        let id = {
            let mut state = self.shared.lock();
            let id = state.next_subscriber;
            state.next_subscriber += 1;
            // A closed log hands out a stream that ends at once.
            if !state.closed {
                state.subscribers.insert(
                    id,
                    Subscriber {
                        sender: Some(sender),
                        assigned: HashMap::new(),
                        next_generation: 0,
                    },
                );
            }
            id
        };
        let handle = InProcessAssignment {
            shared: Arc::clone(&self.shared),
            id,
        };
        for start in assignment {
            handle.add(start);
        }
        let stream = InProcessStream {
            receiver,
            shared: Arc::clone(&self.shared),
            id,
        };
        (Box::pin(stream), Arc::new(handle))
    }

    async fn low_water_marks(&self) -> Result<Vec<i64>, MetadataLogError> {
        let state = self.shared.lock();
        Ok(state
            .partitions
            .iter()
            .map(PartitionLog::low_water_mark)
            .collect())
    }

    async fn high_water_marks(&self) -> Result<Vec<i64>, MetadataLogError> {
        let state = self.shared.lock();
        Ok(state.partitions.iter().map(|log| log.next_offset).collect())
    }

    async fn visit_range(
        &self,
        partition: i32,
        start: i64,
        end: i64,
        visit: &mut RangeVisitor<'_>,
    ) -> Result<(), MetadataLogError> {
        let index = self.shared.index(partition)?;
        if start >= end {
            return Ok(());
        }
        // Copy the range out (payloads are shared `Bytes`), so `visit` runs
        // without the lock and may take its time.
        let records: Vec<MetadataEventRecord> = {
            let state = self.shared.lock();
            let log = state
                .partitions
                .get(index)
                .ok_or(MetadataLogError::PartitionOutOfRange {
                    partition,
                    partition_count: self.shared.partition_count,
                })?;
            if end > log.next_offset {
                return Err(MetadataLogError::RangeShort {
                    partition,
                    reached: log.next_offset,
                    end,
                });
            }
            log.records
                .range(start..end)
                .map(|(&offset, stored)| stored.to_record(partition, offset))
                .collect()
        };
        for record in records {
            visit(record)?;
        }
        Ok(())
    }
}

/// The [`AssignmentHandle`] of one in-process subscription.
struct InProcessAssignment {
    shared: Arc<Shared>,
    id: u64,
}

impl AssignmentHandle for InProcessAssignment {
    fn add(&self, start: PartitionStart) {
        let Ok(index) = self.shared.index(start.partition) else {
            tracing::warn!(
                partition = start.partition,
                "ignoring assignment of a metadata partition outside the log"
            );
            return;
        };
        let mut state = self.shared.lock();
        let State {
            partitions,
            subscribers,
            ..
        } = &mut *state;
        let (Some(subscriber), Some(log)) = (subscribers.get_mut(&self.id), partitions.get(index))
        else {
            return;
        };
        if subscriber.assigned.contains_key(&start.partition) {
            return;
        }
        let Some(sender) = &subscriber.sender else {
            return;
        };
        let generation = subscriber.next_generation;
        subscriber.next_generation += 1;
        subscriber.assigned.insert(start.partition, generation);
        for (&offset, stored) in log.records.range(start.start_offset.max(0)..) {
            let delivery = Delivery {
                generation,
                record: stored.to_record(start.partition, offset),
            };
            if sender.send(delivery).is_err() {
                // The stream is gone; nobody will read the rest.
                break;
            }
        }
    }

    fn remove(&self, partition: i32) {
        let mut state = self.shared.lock();
        if let Some(subscriber) = state.subscribers.get_mut(&self.id) {
            subscriber.assigned.remove(&partition);
        }
    }

    fn assigned(&self) -> Vec<i32> {
        let state = self.shared.lock();
        state
            .subscribers
            .get(&self.id)
            .map(|subscriber| subscriber.assigned.keys().copied().collect())
            .unwrap_or_default()
    }
}

/// The stream of one in-process subscription.
struct InProcessStream {
    receiver: mpsc::UnboundedReceiver<Delivery>,
    shared: Arc<Shared>,
    id: u64,
}

impl InProcessStream {
    /// Whether `delivery` was sent for an assignment that is still current.
    fn is_current(&self, delivery: &Delivery) -> bool {
        let state = self.shared.lock();
        state
            .subscribers
            .get(&self.id)
            .and_then(|subscriber| subscriber.assigned.get(&delivery.record.partition))
            == Some(&delivery.generation)
    }
}

impl Stream for InProcessStream {
    type Item = MetadataEventRecord;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            match self.receiver.poll_recv(cx) {
                Poll::Ready(Some(delivery)) => {
                    if self.is_current(&delivery) {
                        return Poll::Ready(Some(delivery.record));
                    }
                }
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl Drop for InProcessStream {
    fn drop(&mut self) {
        self.shared.lock().subscribers.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        crate::log::KeyedEvent,
        assert2::{assert, check},
        futures_util::StreamExt,
        std::time::Duration,
    };

    fn payload(text: &'static str) -> Bytes {
        Bytes::from_static(text.as_bytes())
    }

    async fn next(stream: &mut MetadataEventStream) -> MetadataEventRecord {
        tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("a record within the test's patience")
            .expect("the stream is still open")
    }

    /// Nothing is queued right now (everything sent has been read).
    fn drained(stream: &mut MetadataEventStream) -> bool {
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        stream.as_mut().poll_next(&mut cx).is_pending()
    }

    #[tokio::test]
    async fn offsets_increase_per_partition_and_subscribers_see_them() {
        let log = InProcessMetadataEventLog::new(3);
        check!(log.publish(0, payload("a")).await.unwrap() == 0);
        check!(log.publish(0, payload("b")).await.unwrap() == 1);
        check!(log.publish(2, payload("c")).await.unwrap() == 0);
        check!(log.high_water_marks().await.unwrap() == vec![2, 0, 1]);
        check!(log.low_water_marks().await.unwrap() == vec![0, 0, 0]);

        let (mut stream, handle) = log.subscribe(vec![PartitionStart::new(0, 0)]);
        let first = next(&mut stream).await;
        check!(first.offset == 0);
        check!(first.payload == payload("a"));
        check!(first.key.is_none());
        check!(!first.tombstone);
        check!(next(&mut stream).await.offset == 1);
        check!(handle.assigned() == vec![0]);

        // Live records follow the backlog; other partitions stay out.
        check!(log.publish(1, payload("x")).await.unwrap() == 0);
        check!(log.publish(0, payload("d")).await.unwrap() == 2);
        let live = next(&mut stream).await;
        check!((live.partition, live.offset, live.payload) == (0, 2, payload("d")));
        check!(drained(&mut stream));
    }

    #[tokio::test]
    async fn backlog_replays_from_the_start_offset() {
        let log = InProcessMetadataEventLog::new(1);
        for text in ["a", "b", "c", "d"] {
            log.publish(0, payload(text)).await.unwrap();
        }
        let (mut stream, _handle) = log.subscribe(vec![PartitionStart::new(0, 2)]);
        check!(next(&mut stream).await.payload == payload("c"));
        check!(next(&mut stream).await.payload == payload("d"));
        check!(drained(&mut stream));
    }

    #[tokio::test]
    async fn partitions_are_added_and_removed_at_runtime() {
        let log = InProcessMetadataEventLog::new(2);
        log.publish(1, payload("old")).await.unwrap();
        let (mut stream, handle) = log.subscribe(vec![PartitionStart::new(0, 0)]);

        handle.add(PartitionStart::new(1, 0));
        let backlog = next(&mut stream).await;
        check!((backlog.partition, backlog.payload) == (1, payload("old")));
        // Adding an assigned partition again does nothing (no second replay).
        handle.add(PartitionStart::new(1, 0));
        check!(drained(&mut stream));
        let mut assigned = handle.assigned();
        assigned.sort_unstable();
        check!(assigned == vec![0, 1]);

        // Records queued before a removal are not emitted after it.
        log.publish(1, payload("queued")).await.unwrap();
        handle.remove(1);
        handle.remove(1);
        log.publish(1, payload("unseen")).await.unwrap();
        log.publish(0, payload("zero")).await.unwrap();
        let record = next(&mut stream).await;
        check!((record.partition, record.payload) == (0, payload("zero")));
        check!(handle.assigned() == vec![0]);

        // Re-adding replays from the new start offset.
        handle.add(PartitionStart::new(1, 2));
        let record = next(&mut stream).await;
        check!((record.partition, record.offset) == (1, 2));
        check!(drained(&mut stream));

        // A partition outside the log is ignored.
        handle.add(PartitionStart::new(5, 0));
        check!(!handle.assigned().contains(&5));
    }

    #[tokio::test]
    async fn subscribers_share_writes() {
        let log = InProcessMetadataEventLog::new(1);
        let other = log.clone();
        let (mut first, _a) = log.subscribe(vec![PartitionStart::new(0, 0)]);
        let (mut second, _b) = other.subscribe(vec![PartitionStart::new(0, 0)]);
        other.publish(0, payload("shared")).await.unwrap();
        check!(next(&mut first).await.payload == payload("shared"));
        check!(next(&mut second).await.payload == payload("shared"));
    }

    #[tokio::test]
    async fn per_partition_order_holds_under_concurrent_publishers() {
        let log = InProcessMetadataEventLog::new(2);
        let (mut stream, _handle) =
            log.subscribe(vec![PartitionStart::new(0, 0), PartitionStart::new(1, 0)]);
        let mut tasks = Vec::new();
        for writer in 0..4_u8 {
            let log = log.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..50_u8 {
                    let partition = i32::from(i % 2);
                    log.publish(partition, Bytes::from(vec![writer, i]))
                        .await
                        .unwrap();
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let mut expected = [0_i64; 2];
        let mut last_of_writer = HashMap::new();
        for _ in 0..200 {
            let record = next(&mut stream).await;
            let slot = usize::try_from(record.partition).unwrap();
            check!(record.offset == expected[slot]);
            expected[slot] += 1;
            // Each writer's records on a partition arrive in its own order.
            let key = (record.partition, record.payload[0]);
            let previous = last_of_writer.insert(key, record.payload[1]);
            check!(previous.is_none_or(|previous| previous < record.payload[1]));
        }
        check!(expected == [100, 100]);
    }

    #[tokio::test]
    async fn out_of_range_partitions_and_closed_logs_refuse_writes() {
        let log = InProcessMetadataEventLog::new(2);
        let error = log.publish(2, payload("x")).await.unwrap_err();
        assert!(let MetadataLogError::PartitionOutOfRange { partition: 2, partition_count: 2 } = error);
        assert!(let Err(MetadataLogError::PartitionOutOfRange { .. }) = log.publish(-1, payload("x")).await);

        let (mut stream, _handle) = log.subscribe(vec![PartitionStart::new(0, 0)]);
        log.publish(0, payload("before")).await.unwrap();
        log.close();
        assert!(let Err(MetadataLogError::Closed) = log.publish(0, payload("after")).await);
        assert!(let Err(MetadataLogError::Closed) = log.publish_keyed(0, payload("k"), None).await);
        // What was queued is delivered, then the stream ends.
        check!(next(&mut stream).await.payload == payload("before"));
        check!(stream.next().await.is_none());
    }

    #[tokio::test]
    async fn compaction_keeps_the_latest_value_per_key_and_drops_tombstones() {
        let log = InProcessMetadataEventLog::new(1);
        let k1 = payload("k1");
        let k2 = payload("k2");
        check!(
            log.publish_keyed(0, k1.clone(), Some(payload("v1")))
                .await
                .unwrap()
                == 0
        );
        check!(
            log.publish_keyed(0, k2.clone(), Some(payload("w1")))
                .await
                .unwrap()
                == 1
        );
        check!(
            log.publish_keyed(0, k1.clone(), Some(payload("v2")))
                .await
                .unwrap()
                == 2
        );
        check!(log.publish_keyed(0, k2.clone(), None).await.unwrap() == 3);
        check!(log.publish(0, payload("unkeyed")).await.unwrap() == 4);

        // Before compaction, the whole history (tombstone included) is there.
        let (mut stream, _handle) = log.subscribe(vec![PartitionStart::new(0, 0)]);
        let mut seen = Vec::new();
        for _ in 0..5 {
            seen.push(next(&mut stream).await);
        }
        check!(seen[3].tombstone);
        check!(seen[3].key == Some(k2.clone()));
        check!(seen[3].payload.is_empty());

        check!(log.compact() == 3);
        check!(log.low_water_marks().await.unwrap() == vec![2]);
        check!(log.high_water_marks().await.unwrap() == vec![5]);
        let (mut after, _handle) = log.subscribe(vec![PartitionStart::new(0, 0)]);
        let first = next(&mut after).await;
        check!((first.offset, first.key, first.payload) == (2, Some(k1), payload("v2")));
        check!(next(&mut after).await.offset == 4);
        check!(drained(&mut after));
        // Offsets keep counting after compaction.
        check!(log.publish_keyed(0, k2, Some(payload("w2"))).await.unwrap() == 5);
    }

    #[tokio::test]
    async fn keyed_groups_append_in_order_across_partitions() {
        let log = InProcessMetadataEventLog::new(2);
        let event = |partition, key: &'static str, value: Option<&'static str>| KeyedEvent {
            partition,
            key: payload(key),
            event: value.map(payload),
        };
        let offsets = log
            .publish_keyed_group(vec![
                event(1, "a", Some("1")),
                event(0, "a", Some("2")),
                event(1, "b", None),
            ])
            .await
            .unwrap();
        check!(offsets == vec![0, 0, 1]);
        let result = log
            .publish_keyed_group(vec![event(0, "c", Some("3")), event(2, "d", Some("4"))])
            .await;
        assert!(let Err(MetadataLogError::PartitionOutOfRange { partition: 2, .. }) = result);
        // Records before the failing one were appended.
        check!(log.high_water_marks().await.unwrap() == vec![2, 2]);
    }

    #[tokio::test]
    async fn a_fully_compacted_partition_has_its_low_water_mark_at_the_end() {
        let log = InProcessMetadataEventLog::new(1);
        log.publish_keyed(0, payload("k"), Some(payload("v")))
            .await
            .unwrap();
        log.publish_keyed(0, payload("k"), None).await.unwrap();
        check!(log.compact() == 2);
        check!(log.low_water_marks().await.unwrap() == vec![2]);
    }

    #[tokio::test]
    async fn visit_range_reads_retained_records_in_order() {
        let log = InProcessMetadataEventLog::new(1);
        for (key, value) in [("a", "1"), ("b", "2"), ("a", "3"), ("c", "4")] {
            log.publish_keyed(0, payload(key), Some(payload(value)))
                .await
                .unwrap();
        }
        log.compact();
        let mut offsets = Vec::new();
        log.visit_range(0, 0, 4, &mut |record| {
            offsets.push(record.offset);
            Ok(())
        })
        .await
        .unwrap();
        check!(offsets == vec![1, 2, 3]);

        offsets.clear();
        log.visit_range(0, 2, 3, &mut |record| {
            offsets.push(record.offset);
            Ok(())
        })
        .await
        .unwrap();
        check!(offsets == vec![2]);

        // An empty range visits nothing.
        log.visit_range(0, 3, 3, &mut |_| panic!("nothing to visit"))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn visit_range_reports_bad_partitions_short_ranges_and_visitor_errors() {
        let log = InProcessMetadataEventLog::new(1);
        log.publish(0, payload("a")).await.unwrap();
        log.publish(0, payload("b")).await.unwrap();
        let result = log.visit_range(1, 0, 1, &mut |_| Ok(())).await;
        assert!(let Err(MetadataLogError::PartitionOutOfRange { partition: 1, .. }) = result);

        let result = log.visit_range(0, 0, 3, &mut |_| Ok(())).await;
        assert!(let Err(MetadataLogError::RangeShort { partition: 0, reached: 2, end: 3 }) = result);

        let mut visits = 0;
        let result = log
            .visit_range(0, 0, 2, &mut |_| {
                visits += 1;
                Err(MetadataLogError::Other("stop".into()))
            })
            .await;
        assert!(let Err(MetadataLogError::Other(_)) = result);
        check!(visits == 1);
    }

    #[tokio::test]
    async fn dropping_a_stream_unregisters_its_subscriber() {
        let log = InProcessMetadataEventLog::new(1);
        let (stream, handle) = log.subscribe(vec![PartitionStart::new(0, 0)]);
        drop(stream);
        check!(handle.assigned().is_empty());
        check!(log.publish(0, payload("x")).await.unwrap() == 0);
        check!(log.shared.lock().subscribers.is_empty());
    }

    /// One operation of a random session against the log.
    #[derive(Debug, Clone)]
    enum Op {
        Publish {
            partition: i32,
            key: Option<u8>,
            tombstone: bool,
        },
        Add {
            partition: i32,
            start: i64,
        },
        Remove {
            partition: i32,
        },
        Compact,
    }

    fn arb_op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            6 => (0..3_i32, proptest::option::of(0..3_u8), any::<bool>())
                .prop_map(|(partition, key, tombstone)| Op::Publish { partition, key, tombstone: tombstone && key.is_some() }),
            2 => (0..3_i32, 0..8_i64).prop_map(|(partition, start)| Op::Add { partition, start }),
            1 => (0..3_i32).prop_map(|partition| Op::Remove { partition }),
            1 => Just(Op::Compact),
        ]
    }

    proptest::proptest! {
        /// Against a model: the stream yields, in send order, exactly the
        /// records of the assignments still current — each assignment's
        /// retained backlog from its start offset, then its live records.
        #[test]
        fn the_stream_matches_a_model_of_assignments_and_compaction(
            ops in proptest::collection::vec(arb_op(), 0..80)
        ) {
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            runtime.block_on(async {
                let log = InProcessMetadataEventLog::new(3);
                let (mut stream, handle) = log.subscribe(Vec::new());
                // Model: retained (offset, key, tombstone) per partition, next
                // offsets, the current generation per assigned partition, and
                // every record sent with its generation.
                let mut retained: Vec<Vec<(i64, Option<u8>, bool)>> = vec![Vec::new(); 3];
                let mut next_offset = [0_i64; 3];
                let mut generation: HashMap<i32, u64> = HashMap::new();
                let mut generations = 0_u64;
                let mut sent: Vec<(u64, i32, i64)> = Vec::new();
                for op in ops {
                    match op {
                        Op::Publish { partition, key, tombstone } => {
                            let index = usize::try_from(partition).unwrap();
                            let offset = match key {
                                Some(key) => log.publish_keyed(partition, Bytes::from(vec![key]), (!tombstone).then(|| payload("v"))).await,
                                None => log.publish(partition, payload("v")).await,
                            }.unwrap();
                            proptest::prop_assert_eq!(offset, next_offset[index]);
                            next_offset[index] += 1;
                            retained[index].push((offset, key, tombstone));
                            if let Some(&g) = generation.get(&partition) {
                                sent.push((g, partition, offset));
                            }
                        }
                        Op::Add { partition, start } => {
                            handle.add(PartitionStart::new(partition, start));
                            if let std::collections::hash_map::Entry::Vacant(slot) = generation.entry(partition) {
                                generations += 1;
                                slot.insert(generations);
                                let index = usize::try_from(partition).unwrap();
                                for &(offset, _, _) in retained[index].iter().filter(|r| r.0 >= start) {
                                    sent.push((generations, partition, offset));
                                }
                            }
                        }
                        Op::Remove { partition } => {
                            handle.remove(partition);
                            generation.remove(&partition);
                        }
                        Op::Compact => {
                            log.compact();
                            for records in &mut retained {
                                let latest: HashMap<u8, i64> = records.iter().filter_map(|r| r.1.map(|k| (k, r.0))).collect();
                                records.retain(|&(offset, key, tombstone)| match key {
                                    None => true,
                                    Some(key) => latest.get(&key) == Some(&offset) && !tombstone,
                                });
                            }
                        }
                    }
                }
                let expected: Vec<(i32, i64)> = sent
                    .into_iter()
                    .filter(|(g, partition, _)| generation.get(partition) == Some(g))
                    .map(|(_, partition, offset)| (partition, offset))
                    .collect();
                // Closing ends the stream once the queue is read.
                log.close();
                let mut seen = Vec::new();
                while let Some(record) = stream.next().await {
                    seen.push((record.partition, record.offset));
                }
                proptest::prop_assert_eq!(seen, expected);
                let lows = log.low_water_marks().await.unwrap();
                for (index, records) in retained.iter().enumerate() {
                    proptest::prop_assert_eq!(lows[index], records.first().map_or(next_offset[index], |r| r.0));
                }
                Ok(())
            })?;
        }
    }
}
