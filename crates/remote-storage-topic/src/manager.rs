//! [`TopicBasedRemoteLogMetadataManager`]: a [`RemoteLogMetadataManager`]
//! that keeps every event in the metadata topic and serves lookups from the
//! state its own consumer builds, as Kafka's manager of that name does.
//!
//! # Flow
//!
//! A write encodes the event ([`crate::serde`]), appends it to the metadata
//! partition of its user partition ([`RemoteLogMetadataTopicPartitioner`]),
//! and returns once this manager's consumer has applied that offset — so the
//! caller reads its own write, and a write the state machine refuses at
//! apply time comes back as that refusal. Before writing, the call checks the
//! event against the local state when it is caught up, so obviously illegal
//! events (a duplicate add, an update of an unknown segment) do not reach the
//! topic at all.
//!
//! The consumer applies the events of every user partition in the metadata
//! partitions it consumes, not only of the assigned ones, so the state of a
//! metadata partition is a pure function of its events below an offset. That
//! makes the snapshot cache exact and makes every replica agree. An event
//! that does not decode, names an unknown segment, breaks the lifecycle, or
//! sits in the wrong metadata partition is logged, counted in
//! [`ConsumerStats`] and skipped; the consumer goes on.
//!
//! # Assignment and readiness
//!
//! The broker calls [`on_partition_leadership_changes`] with its leader and
//! follower partitions; the manager then consumes their metadata partitions,
//! each from its snapshot-cache offset (or the start). A metadata partition
//! is *ready* once the consumer has reached the end offset it had when it was
//! assigned; until then reads of its user partitions fail with
//! [`MetadataLogError::NotReady`] rather than answer from stale state, and
//! [`is_ready`] is false. [`on_stopped_partitions`] drops metadata partitions
//! no assigned user partition needs any more, writing their snapshot first.
//!
//! # Threading
//!
//! The SPI is synchronous, the [`MetadataEventLog`] asynchronous. The manager
//! is given a Tokio runtime [`Handle`]; the consumer is a task on it and
//! every log call is spawned onto it. A synchronous call then blocks its own
//! thread until the result (or `consume_wait`) arrives. Call the SPI from a
//! plain thread or from `spawn_blocking`, as the broker does; on a
//! multi-threaded runtime's worker the call uses `block_in_place`. On the
//! thread of a current-thread runtime the spawned work cannot run while the
//! caller blocks, so such a call times out rather than deadlocks.
//!
//! # Snapshot cache
//!
//! With a `snapshot_dir`, each metadata partition's state is written to a
//! file (see `snapshot_cache`) every `snapshot_interval_events` applied
//! events, when the partition is dropped, and on [`close`].
//!
//! [`on_partition_leadership_changes`]: RemoteLogMetadataManager::on_partition_leadership_changes
//! [`on_stopped_partitions`]: RemoteLogMetadataManager::on_stopped_partitions
//! [`is_ready`]: RemoteLogMetadataManager::is_ready
//! [`close`]: RemoteLogMetadataManager::close

mod snapshot_cache;
mod store;
#[cfg(test)]
mod tests;

use {
    self::store::PartitionStore,
    crate::{
        error::MetadataLogError,
        log::{
            AssignmentHandle, MetadataEventLog, MetadataEventRecord, MetadataEventStream,
            PartitionStart,
        },
        partitioner::RemoteLogMetadataTopicPartitioner,
        serde::{RemoteLogMetadata, RemoteLogMetadataSerde},
    },
    futures_util::StreamExt,
    krabka_ids::LeaderEpoch,
    krabka_remote_storage::{
        RemoteLogMetadataManager, RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate,
        RemoteLogSegmentState, RemotePartitionDeleteMetadata, RemoteStorageError, TopicIdPartition,
    },
    std::{
        collections::{HashMap, HashSet, VecDeque},
        future::Future,
        path::PathBuf,
        sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, mpsc::RecvTimeoutError},
        time::{Duration, Instant},
    },
    tokio::{
        runtime::{Handle, RuntimeFlavor},
        task::JoinHandle,
    },
};

/// Kafka's `remote.log.metadata.consume.wait.ms` default: two minutes.
pub const DEFAULT_CONSUME_WAIT: Duration = Duration::from_secs(120);
/// Applied events between two snapshot-cache writes of a metadata partition.
pub const DEFAULT_SNAPSHOT_INTERVAL_EVENTS: u64 = 1000;
/// How many apply-time refusals are kept for writers to pick up.
const REJECTIONS_KEPT: usize = 1024;

/// Settings of a [`TopicBasedRemoteLogMetadataManager`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicBasedRlmmConfig {
    /// Directory of the snapshot cache; `None` keeps no cache, so every
    /// start replays the assigned metadata partitions.
    pub snapshot_dir: Option<PathBuf>,
    /// How long a call waits for its log operation and for its event to be
    /// consumed back (`remote.log.metadata.consume.wait.ms`).
    pub consume_wait: Duration,
    /// Applied events of a metadata partition between two cache writes.
    pub snapshot_interval_events: u64,
}

impl Default for TopicBasedRlmmConfig {
    fn default() -> Self {
        Self {
            snapshot_dir: None,
            consume_wait: DEFAULT_CONSUME_WAIT,
            snapshot_interval_events: DEFAULT_SNAPSHOT_INTERVAL_EVENTS,
        }
    }
}

/// Key prefix of the WORM chain-head records the broker publishes into the
/// metadata topic (`WormChainRecord::key`); the consumer steps over them.
const WORM_CHAIN_KEY_PREFIX: &[u8] = b"worm-chain/";

/// What the consumer has done with the events it read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConsumerStats {
    /// Events applied to the state.
    pub applied: u64,
    /// Events that decoded but were refused: unknown segment, illegal
    /// transition, duplicate, wrong metadata partition, or a record kind that
    /// does not belong in the topic.
    pub rejected: u64,
    /// Records that did not decode (or were tombstones).
    pub undecodable: u64,
}

/// A [`RemoteLogMetadataManager`] over a [`MetadataEventLog`] (see the module
/// documentation).
pub struct TopicBasedRemoteLogMetadataManager {
    inner: Arc<Inner>,
    consumer: Mutex<Option<JoinHandle<()>>>,
}

struct Inner {
    log: Arc<dyn MetadataEventLog>,
    runtime: Handle,
    config: TopicBasedRlmmConfig,
    partitioner: RemoteLogMetadataTopicPartitioner,
    assignment: Arc<dyn AssignmentHandle>,
    state: Mutex<State>,
    changed: Condvar,
    /// Next offset of the last snapshot written per metadata partition; held
    /// while writing, so writes of one partition never overtake each other.
    written: Mutex<HashMap<i32, i64>>,
}

#[derive(Default)]
struct State {
    closed: bool,
    /// The log's stream ended (the log was closed): nothing more is applied.
    stream_ended: bool,
    user_partitions: HashSet<TopicIdPartition>,
    metadata: HashMap<i32, MetadataPartition>,
    rejections: VecDeque<Rejection>,
    stats: ConsumerStats,
}

struct MetadataPartition {
    /// Every event below this offset is applied.
    next_offset: i64,
    /// The end offset at assignment; ready once `next_offset` reaches it.
    ready_at: i64,
    stores: HashMap<TopicIdPartition, PartitionStore>,
    applied_since_snapshot: u64,
}

impl MetadataPartition {
    fn is_ready(&self) -> bool {
        self.next_offset >= self.ready_at
    }
}

struct Rejection {
    partition: i32,
    offset: i64,
    error: RemoteStorageError,
}

/// A snapshot to write: metadata partition, next offset, file contents.
type PendingSnapshot = (i32, i64, Vec<u8>);

/// Runs `wait` where blocking is allowed (see "Threading").
fn blocking<R>(wait: impl FnOnce() -> R) -> R {
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(wait)
        }
        _ => wait(),
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Each mutation under the lock is applied whole or not at all.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn metadata_partition(&self, partition: &TopicIdPartition) -> i32 {
        self.partitioner
            .metadata_partition(partition.topic_id(), partition.partition())
    }

    /// Runs `future` on the runtime and waits for it, at most `consume_wait`.
    fn run<T: Send + 'static>(
        &self,
        what: &str,
        future: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, MetadataLogError> {
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        let task = self.runtime.spawn(async move {
            // The receiver is gone only if the caller timed out.
            let _ = sender.send(future.await);
        });
        let wait = self.config.consume_wait;
        blocking(|| receiver.recv_timeout(wait)).map_err(|error| {
            task.abort();
            match error {
                RecvTimeoutError::Timeout => MetadataLogError::Timeout {
                    what: what.to_owned(),
                    waited_ms: wait.as_millis(),
                },
                RecvTimeoutError::Disconnected => {
                    MetadataLogError::Other(format!("the runtime stopped before {what} completed"))
                }
            }
        })
    }

    /// The consumed metadata partition of an assigned `partition`.
    fn served<'s>(
        &self,
        state: &'s State,
        partition: &TopicIdPartition,
    ) -> Result<(i32, &'s MetadataPartition), MetadataLogError> {
        let metadata_partition = self.metadata_partition(partition);
        match state.metadata.get(&metadata_partition) {
            Some(consumed) if state.user_partitions.contains(partition) => {
                Ok((metadata_partition, consumed))
            }
            _ => Err(MetadataLogError::NotAssigned {
                partition: partition.to_string(),
            }),
        }
    }

    /// The store of an assigned, caught-up `partition` (`None`: no events).
    fn ready_store<'s>(
        &self,
        state: &'s State,
        partition: &TopicIdPartition,
    ) -> Result<Option<&'s PartitionStore>, RemoteStorageError> {
        if state.closed {
            return Err(RemoteStorageError::Closed);
        }
        let (metadata_partition, consumed) = self.served(state, partition)?;
        if !consumed.is_ready() {
            return Err(MetadataLogError::NotReady {
                partition: partition.to_string(),
                metadata_partition,
                position: consumed.next_offset,
                target: consumed.ready_at,
            }
            .into());
        }
        Ok(consumed.stores.get(partition))
    }

    /// Publishes `event` for `partition` after `precheck` accepts it against
    /// the local state, then waits until it is applied.
    ///
    /// The local state may lag events of other writers, so a refusal by
    /// `precheck` is only final once the consumer has caught up with the
    /// metadata partition's current end; until the partition is ready, the
    /// apply-time check alone decides.
    fn publish(
        &self,
        partition: &TopicIdPartition,
        event: RemoteLogMetadata,
        precheck: impl Fn(&PartitionStore) -> Result<(), RemoteStorageError>,
    ) -> Result<(), RemoteStorageError> {
        let check = |state: &State| -> Result<Option<RemoteStorageError>, RemoteStorageError> {
            if state.closed {
                return Err(RemoteStorageError::Closed);
            }
            let (_, consumed) = self.served(state, partition)?;
            if !consumed.is_ready() {
                return Ok(None);
            }
            let empty = PartitionStore::default();
            Ok(precheck(consumed.stores.get(partition).unwrap_or(&empty)).err())
        };
        let metadata_partition = self.metadata_partition(partition);
        let refused = check(&self.lock())?;
        if refused.is_some() {
            let end = self.end_offset(metadata_partition)?;
            self.wait_position(metadata_partition, end)?;
            if let Some(refusal) = check(&self.lock())? {
                return Err(refusal);
            }
        }
        let value = RemoteLogMetadataSerde::serialize(&event);
        let log = Arc::clone(&self.log);
        let offset = self.run("publication to the metadata log", async move {
            log.publish(metadata_partition, value).await
        })??;
        self.wait_position(metadata_partition, offset + 1)?;
        let mut state = self.lock();
        let refused = state
            .rejections
            .iter()
            .position(|r| r.partition == metadata_partition && r.offset == offset);
        match refused.and_then(|at| state.rejections.remove(at)) {
            Some(rejection) => Err(rejection.error),
            None => Ok(()),
        }
    }

    /// The current end offset of `metadata_partition` in the log.
    fn end_offset(&self, metadata_partition: i32) -> Result<i64, MetadataLogError> {
        let log = Arc::clone(&self.log);
        let ends = self.run("the metadata log's end offsets", async move {
            log.high_water_marks().await
        })??;
        usize::try_from(metadata_partition)
            .ok()
            .and_then(|index| ends.get(index).copied())
            .ok_or(MetadataLogError::PartitionOutOfRange {
                partition: metadata_partition,
                partition_count: self.partitioner.partitions(),
            })
    }

    /// Waits until the consumer has applied everything of
    /// `metadata_partition` below `position`.
    fn wait_position(
        &self,
        metadata_partition: i32,
        position: i64,
    ) -> Result<(), RemoteStorageError> {
        let wait = self.config.consume_wait;
        let deadline = Instant::now() + wait;
        blocking(|| {
            let mut state = self.lock();
            loop {
                if state.closed || state.stream_ended {
                    return Err(RemoteStorageError::Closed);
                }
                let Some(consumed) = state.metadata.get(&metadata_partition) else {
                    return Err(MetadataLogError::Other(format!(
                        "metadata partition {metadata_partition} was unassigned before offset \
                         {position} was consumed"
                    ))
                    .into());
                };
                if consumed.next_offset >= position {
                    return Ok(());
                }
                let now = Instant::now();
                if now >= deadline {
                    return Err(MetadataLogError::Timeout {
                        what: format!(
                            "metadata partition {metadata_partition} to be consumed to offset {position}"
                        ),
                        waited_ms: wait.as_millis(),
                    }
                    .into());
                }
                state = self
                    .changed
                    .wait_timeout(state, deadline - now)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        })
    }

    /// Applies one record from the stream; returns a snapshot due for writing.
    fn apply(&self, record: MetadataEventRecord) -> Option<PendingSnapshot> {
        let mut guard = self.lock();
        let state = &mut *guard;
        if state.closed {
            return None;
        }
        let consumed = state.metadata.get_mut(&record.partition)?;
        if record.offset < consumed.next_offset {
            // Already reflected (the snapshot covers it, or a replay repeats it).
            return None;
        }
        if record
            .key
            .as_ref()
            .is_some_and(|key| key.starts_with(WORM_CHAIN_KEY_PREFIX))
        {
            // The broker's WORM chain heads share the topic (keyed, see
            // `WormChainRecord::key`) but are no metadata events: step over
            // them without counting them as undecodable.
            consumed.next_offset = record.offset + 1;
            drop(guard);
            self.changed.notify_all();
            return None;
        }
        let outcome = if record.tombstone {
            Err(Refusal::Undecodable(MetadataLogError::Decode(
                "tombstone in the metadata topic".into(),
            )))
        } else {
            apply_event(
                &self.partitioner,
                record.partition,
                &mut consumed.stores,
                &record.payload,
            )
        };
        consumed.next_offset = record.offset + 1;
        match outcome {
            Ok(()) => {
                state.stats.applied += 1;
                consumed.applied_since_snapshot += 1;
            }
            Err(Refusal::Undecodable(error)) => {
                state.stats.undecodable += 1;
                tracing::warn!(
                    partition = record.partition,
                    offset = record.offset,
                    %error,
                    "skipping an undecodable remote log metadata record"
                );
            }
            Err(Refusal::Refused(error)) => {
                state.stats.rejected += 1;
                tracing::warn!(
                    partition = record.partition,
                    offset = record.offset,
                    %error,
                    "skipping a remote log metadata event the lifecycle refuses"
                );
                if state.rejections.len() == REJECTIONS_KEPT {
                    state.rejections.pop_front();
                }
                state.rejections.push_back(Rejection {
                    partition: record.partition,
                    offset: record.offset,
                    error,
                });
            }
        }
        let due = self.config.snapshot_dir.is_some()
            && consumed.applied_since_snapshot >= self.config.snapshot_interval_events.max(1);
        let snapshot = due.then(|| {
            consumed.applied_since_snapshot = 0;
            (
                record.partition,
                consumed.next_offset,
                snapshot_cache::encode(record.partition, consumed.next_offset, &consumed.stores),
            )
        });
        drop(guard);
        self.changed.notify_all();
        snapshot
    }

    /// Writes a snapshot unless a newer one of that partition was written.
    fn write_snapshot(
        &self,
        (partition, next_offset, contents): PendingSnapshot,
    ) -> Result<(), MetadataLogError> {
        let Some(dir) = &self.config.snapshot_dir else {
            return Ok(());
        };
        let mut written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        if written
            .get(&partition)
            .is_some_and(|&last| last >= next_offset)
        {
            return Ok(());
        }
        snapshot_cache::write_atomic(dir, partition, &contents)?;
        written.insert(partition, next_offset);
        Ok(())
    }

    /// Starts to consume `metadata_partition`, whose log currently ends at
    /// `end`, from its cached snapshot.
    fn start_consuming(&self, metadata_partition: i32, end: i64) -> Result<(), MetadataLogError> {
        let snapshot = match &self.config.snapshot_dir {
            None => None,
            Some(dir) => snapshot_cache::read(dir, metadata_partition).unwrap_or_else(|error| {
                tracing::warn!(%error, "ignoring the snapshot cache; replaying the partition");
                None
            }),
        };
        let snapshot = snapshot.filter(|snapshot| {
            let usable = snapshot.next_offset <= end;
            if !usable {
                tracing::warn!(
                    metadata_partition,
                    snapshot_offset = snapshot.next_offset,
                    end,
                    "the snapshot cache is ahead of the metadata log; replaying the partition"
                );
            }
            usable
        });
        let (next_offset, stores) = snapshot.map_or((0, HashMap::new()), |snapshot| {
            (snapshot.next_offset, snapshot.stores)
        });
        {
            let mut state = self.lock();
            if state.closed {
                return Err(MetadataLogError::Closed);
            }
            if state.metadata.contains_key(&metadata_partition) {
                return Ok(());
            }
            state.metadata.insert(
                metadata_partition,
                MetadataPartition {
                    next_offset,
                    ready_at: end,
                    stores,
                    applied_since_snapshot: 0,
                },
            );
        }
        self.written
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(metadata_partition, next_offset);
        self.assignment
            .add(PartitionStart::new(metadata_partition, next_offset));
        self.changed.notify_all();
        Ok(())
    }
}

/// Why the consumer skipped an event.
enum Refusal {
    Undecodable(MetadataLogError),
    Refused(RemoteStorageError),
}

/// Applies the event `payload` read from `metadata_partition` to `stores`.
fn apply_event(
    partitioner: &RemoteLogMetadataTopicPartitioner,
    metadata_partition: i32,
    stores: &mut HashMap<TopicIdPartition, PartitionStore>,
    payload: &[u8],
) -> Result<(), Refusal> {
    let event = RemoteLogMetadataSerde::deserialize(payload).map_err(Refusal::Undecodable)?;
    let Some(partition) = event.topic_id_partition().cloned() else {
        return Err(Refusal::Refused(RemoteStorageError::invalid_metadata(
            "a segment snapshot record does not belong in the metadata topic",
        )));
    };
    let home = partitioner.metadata_partition(partition.topic_id(), partition.partition());
    if home != metadata_partition {
        return Err(Refusal::Refused(RemoteStorageError::invalid_metadata(
            format!(
                "event for {partition} read from metadata partition {metadata_partition}, \
             but it belongs in {home}"
            ),
        )));
    }
    let result = match event {
        RemoteLogMetadata::Segment(metadata) => match stores.get_mut(&partition) {
            Some(store) => store.add(metadata),
            None => {
                let mut store = PartitionStore::default();
                store.add(metadata).map(|()| {
                    stores.insert(partition, store);
                })
            }
        },
        RemoteLogMetadata::SegmentUpdate(update) => match stores.get_mut(&partition) {
            Some(store) => store.update(&update),
            None => Err(RemoteStorageError::UnknownSegment {
                segment_id: update.remote_log_segment_id().clone(),
            }),
        },
        RemoteLogMetadata::PartitionDelete(delete) => match stores.get_mut(&partition) {
            Some(store) => store.put_delete(delete),
            None => {
                let mut store = PartitionStore::default();
                store.put_delete(delete).map(|()| {
                    stores.insert(partition, store);
                })
            }
        },
        RemoteLogMetadata::SegmentSnapshot(_) => Ok(()),
    };
    result.map_err(Refusal::Refused)
}

/// The consumer task: applies records until the stream ends.
async fn consume(inner: Arc<Inner>, mut stream: MetadataEventStream) {
    while let Some(record) = stream.next().await {
        if let Some(snapshot) = inner.apply(record) {
            let writer = Arc::clone(&inner);
            let written =
                tokio::task::spawn_blocking(move || writer.write_snapshot(snapshot)).await;
            match written {
                Ok(Ok(())) => {}
                Ok(Err(error)) => tracing::warn!(%error, "could not write the snapshot cache"),
                Err(error) => tracing::warn!(%error, "the snapshot cache writer failed"),
            }
        }
    }
    tracing::debug!("the metadata log stream ended");
    inner.lock().stream_ended = true;
    inner.changed.notify_all();
}

impl TopicBasedRemoteLogMetadataManager {
    /// A manager over `log` whose consumer runs on `runtime`. It consumes
    /// nothing until [`on_partition_leadership_changes`] assigns partitions.
    ///
    /// [`on_partition_leadership_changes`]: RemoteLogMetadataManager::on_partition_leadership_changes
    #[must_use]
    pub fn new(
        log: Arc<dyn MetadataEventLog>,
        runtime: Handle,
        config: TopicBasedRlmmConfig,
    ) -> Self {
        let partitioner = RemoteLogMetadataTopicPartitioner::new(log.partition_count());
        let (stream, assignment) = log.subscribe(Vec::new());
        let inner = Arc::new(Inner {
            log,
            runtime: runtime.clone(),
            config,
            partitioner,
            assignment,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            written: Mutex::new(HashMap::new()),
        });
        let consumer = runtime.spawn(consume(Arc::clone(&inner), stream));
        Self {
            inner,
            consumer: Mutex::new(Some(consumer)),
        }
    }

    /// The metadata partition that holds `partition`'s events.
    #[must_use]
    pub fn metadata_partition(&self, partition: &TopicIdPartition) -> i32 {
        self.inner.metadata_partition(partition)
    }

    /// What the consumer has applied, refused and skipped so far.
    #[must_use]
    pub fn stats(&self) -> ConsumerStats {
        self.inner.lock().stats
    }

    /// The next offset to apply of each consumed metadata partition.
    #[must_use]
    pub fn consumed_positions(&self) -> HashMap<i32, i64> {
        self.inner
            .lock()
            .metadata
            .iter()
            .map(|(&partition, consumed)| (partition, consumed.next_offset))
            .collect()
    }

    fn read<T>(
        &self,
        partition: &TopicIdPartition,
        answer: impl FnOnce(Option<&PartitionStore>) -> T,
    ) -> Result<T, RemoteStorageError> {
        let state = self.inner.lock();
        self.inner.ready_store(&state, partition).map(answer)
    }
}

impl RemoteLogMetadataManager for TopicBasedRemoteLogMetadataManager {
    fn add_remote_log_segment_metadata(
        &self,
        metadata: RemoteLogSegmentMetadata,
    ) -> Result<(), RemoteStorageError> {
        if metadata.state() != RemoteLogSegmentState::CopySegmentStarted {
            return Err(RemoteStorageError::IllegalStateTransition {
                segment_id: metadata.remote_log_segment_id().clone(),
                from: None,
                to: metadata.state(),
            });
        }
        let partition = metadata.topic_id_partition().clone();
        let check = metadata.clone();
        self.inner
            .publish(&partition, RemoteLogMetadata::Segment(metadata), |store| {
                store.check_add(&check)
            })
    }

    fn update_remote_log_segment_metadata(
        &self,
        update: RemoteLogSegmentMetadataUpdate,
    ) -> Result<(), RemoteStorageError> {
        if update.state() == RemoteLogSegmentState::CopySegmentStarted {
            // Nothing ever moves back to (or stays in) COPY_SEGMENT_STARTED.
            return Err(RemoteStorageError::IllegalStateTransition {
                segment_id: update.remote_log_segment_id().clone(),
                from: None,
                to: update.state(),
            });
        }
        let partition = update.topic_id_partition().clone();
        let check = update.clone();
        self.inner.publish(
            &partition,
            RemoteLogMetadata::SegmentUpdate(update),
            |store| store.check_update(&check).map(|_| ()),
        )
    }

    fn remote_log_segment_metadata(
        &self,
        partition: &TopicIdPartition,
        epoch_for_offset: LeaderEpoch,
        offset: i64,
    ) -> Result<Option<RemoteLogSegmentMetadata>, RemoteStorageError> {
        self.read(partition, |store| {
            store.and_then(|store| store.lookup(epoch_for_offset, offset))
        })
    }

    fn highest_offset_for_epoch(
        &self,
        partition: &TopicIdPartition,
        leader_epoch: LeaderEpoch,
    ) -> Result<Option<i64>, RemoteStorageError> {
        self.read(partition, |store| {
            store.and_then(|store| store.highest_offset_for_epoch(leader_epoch))
        })
    }

    fn put_remote_partition_delete_metadata(
        &self,
        metadata: RemotePartitionDeleteMetadata,
    ) -> Result<(), RemoteStorageError> {
        let partition = metadata.topic_id_partition().clone();
        let check = metadata.clone();
        self.inner.publish(
            &partition,
            RemoteLogMetadata::PartitionDelete(metadata),
            |store| store.check_delete(&check),
        )
    }

    fn remote_partition_delete_metadata(
        &self,
        partition: &TopicIdPartition,
    ) -> Result<Option<RemotePartitionDeleteMetadata>, RemoteStorageError> {
        self.read(partition, |store| {
            store.and_then(|store| store.delete_metadata().cloned())
        })
    }

    fn list_remote_log_segments(
        &self,
        partition: &TopicIdPartition,
    ) -> Result<Vec<RemoteLogSegmentMetadata>, RemoteStorageError> {
        self.read(partition, |store| {
            store.map(PartitionStore::list).unwrap_or_default()
        })
    }

    fn list_remote_log_segments_for_epoch(
        &self,
        partition: &TopicIdPartition,
        leader_epoch: LeaderEpoch,
    ) -> Result<Vec<RemoteLogSegmentMetadata>, RemoteStorageError> {
        self.read(partition, |store| {
            store
                .map(|store| store.list_for_epoch(leader_epoch))
                .unwrap_or_default()
        })
    }

    fn on_partition_leadership_changes(
        &self,
        leader_partitions: &[TopicIdPartition],
        follower_partitions: &[TopicIdPartition],
    ) -> Result<(), RemoteStorageError> {
        let mut new_metadata_partitions = Vec::new();
        {
            let mut state = self.inner.lock();
            if state.closed {
                return Err(RemoteStorageError::Closed);
            }
            for partition in leader_partitions.iter().chain(follower_partitions) {
                let metadata_partition = self.inner.metadata_partition(partition);
                state.user_partitions.insert(partition.clone());
                if !state.metadata.contains_key(&metadata_partition)
                    && !new_metadata_partitions.contains(&metadata_partition)
                {
                    new_metadata_partitions.push(metadata_partition);
                }
            }
        }
        if new_metadata_partitions.is_empty() {
            return Ok(());
        }
        // One look at the log's ends serves every partition taken on here.
        let log = Arc::clone(&self.inner.log);
        let ends = self
            .inner
            .run("the metadata log's end offsets", async move {
                log.high_water_marks().await
            })??;
        for metadata_partition in new_metadata_partitions {
            let end = usize::try_from(metadata_partition)
                .ok()
                .and_then(|index| ends.get(index).copied())
                .ok_or(MetadataLogError::PartitionOutOfRange {
                    partition: metadata_partition,
                    partition_count: self.inner.partitioner.partitions(),
                })?;
            self.inner.start_consuming(metadata_partition, end)?;
        }
        Ok(())
    }

    fn on_stopped_partitions(
        &self,
        partitions: &[TopicIdPartition],
    ) -> Result<(), RemoteStorageError> {
        let mut snapshots = Vec::new();
        {
            let mut guard = self.inner.lock();
            let state = &mut *guard;
            if state.closed {
                return Err(RemoteStorageError::Closed);
            }
            for partition in partitions {
                state.user_partitions.remove(partition);
            }
            let needed: HashSet<i32> = state
                .user_partitions
                .iter()
                .map(|partition| self.inner.metadata_partition(partition))
                .collect();
            let unneeded: Vec<i32> = state
                .metadata
                .keys()
                .copied()
                .filter(|partition| !needed.contains(partition))
                .collect();
            for partition in unneeded {
                if let Some(consumed) = state.metadata.remove(&partition) {
                    self.inner.assignment.remove(partition);
                    snapshots.push((
                        partition,
                        consumed.next_offset,
                        snapshot_cache::encode(partition, consumed.next_offset, &consumed.stores),
                    ));
                }
            }
        }
        self.inner.changed.notify_all();
        blocking(|| {
            snapshots
                .into_iter()
                .try_for_each(|snapshot| self.inner.write_snapshot(snapshot))
        })?;
        Ok(())
    }

    fn remote_log_size(
        &self,
        partition: &TopicIdPartition,
        leader_epoch: LeaderEpoch,
    ) -> Result<u64, RemoteStorageError> {
        self.read(partition, |store| {
            store.map_or(0, |store| {
                store
                    .list_for_epoch(leader_epoch)
                    .iter()
                    .map(|segment| u64::try_from(segment.segment_size_in_bytes()).unwrap_or(0))
                    .sum()
            })
        })
    }

    fn is_ready(&self, partition: &TopicIdPartition) -> bool {
        let state = self.inner.lock();
        self.inner.ready_store(&state, partition).is_ok()
    }

    /// Stops the consumer and writes the snapshot cache of every consumed
    /// metadata partition. Closing twice does nothing the second time.
    fn close(&self) -> Result<(), RemoteStorageError> {
        let snapshots: Vec<PendingSnapshot> = {
            let mut state = self.inner.lock();
            if state.closed {
                return Ok(());
            }
            state.closed = true;
            state
                .metadata
                .iter()
                .map(|(&partition, consumed)| {
                    (
                        partition,
                        consumed.next_offset,
                        snapshot_cache::encode(partition, consumed.next_offset, &consumed.stores),
                    )
                })
                .collect()
        };
        self.inner.changed.notify_all();
        if let Some(consumer) = self
            .consumer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            consumer.abort();
        }
        for partition in self.inner.assignment.assigned() {
            self.inner.assignment.remove(partition);
        }
        let mut first_error = None;
        blocking(|| {
            for snapshot in snapshots {
                if let Err(error) = self.inner.write_snapshot(snapshot) {
                    tracing::warn!(%error, "could not flush the snapshot cache");
                    first_error.get_or_insert(error);
                }
            }
        });
        first_error.map_or(Ok(()), |error| Err(error.into()))
    }
}

impl Drop for TopicBasedRemoteLogMetadataManager {
    fn drop(&mut self) {
        // The consumer holds the shared state; without this it would run on.
        if let Some(consumer) = self
            .consumer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            consumer.abort();
        }
    }
}
