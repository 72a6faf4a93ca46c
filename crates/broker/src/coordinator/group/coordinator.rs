//! The [`GroupCoordinator`]: shared state, persistence plumbing, load and timers.
//!
//! All groups live behind one mutex that is never held across an `.await`.
//! A request that changes a group runs in three steps: take the group's
//! `__consumer_offsets` partition *writer* lock (a tokio mutex, one per
//! partition), change the state under the state mutex and collect the
//! records to write, then append them and wait for durability while still
//! holding the writer. The writer lock keeps the log's record order the same
//! as the order the in-memory state changed in, so replaying the log always
//! rebuilds the state the coordinator had. Answers that Kafka only sends once
//! the write is durable (SyncGroup, OffsetCommit) are released after the
//! append; delayed JoinGroup answers travel over oneshot channels.
//!
//! Timeouts are deadlines compared against the injected [`Clock`] by
//! [`GroupCoordinator::tick`], which the broker calls periodically
//! ([`GroupCoordinator::spawn_ticker`]) and tests call by hand.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use kafka_protocol::ResponseError;
use tokio::sync::oneshot;

use super::config::GroupConfig;
use super::consumer_persist::{ConsumerView, changes, replay_consumer};
use super::error::GroupError;
use super::log::{GroupLog, GroupLogEntry, GroupLogRecord};
use super::partitioner::partition_for;
use super::records::{GroupMetadataKey, OffsetCommitValue, RecordKey};
use super::state::{CommittedOffset, Group, SyncOutcome};
use crate::coordinator::ownership::{Ownership, Refusal};
use krabka_ids::{ProducerEpoch, ProducerId};
use krabka_log::{Clock, ControlMarker};

/// Where clients should send coordinator requests: this broker's advertised
/// listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorNode {
    /// The broker's node id.
    pub node_id: i32,
    /// The advertised host.
    pub host: String,
    /// The advertised port.
    pub port: i32,
}

/// What the coordinator needs to know about the request beyond its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestContext {
    /// The request's API version (responses are shaped for it).
    pub api_version: i16,
    /// The client id from the request header.
    pub client_id: String,
    /// The client's address, as Kafka shows it (`/127.0.0.1`).
    pub client_host: String,
}

impl RequestContext {
    /// A context for `api_version` with the given client id and host.
    pub fn new(
        api_version: i16,
        client_id: impl Into<String>,
        client_host: impl Into<String>,
    ) -> Self {
        Self {
            api_version,
            client_id: client_id.into(),
            client_host: client_host.into(),
        }
    }
}

/// Everything the coordinator holds in memory.
#[derive(Debug, Default)]
pub(crate) struct CoordinatorState {
    pub groups: HashMap<String, Group>,
    pub next_expiry_check_ms: i64,
    /// Consumer groups whose last records failed to write, with the view
    /// the log still holds: their next change is written against it.
    pub unsynced: HashMap<String, Option<ConsumerView>>,
}

/// An offset to make visible (or, in a transaction, pending) once the
/// record that writes it is durable.
#[derive(Debug)]
pub(crate) struct OffsetToApply {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub offset: CommittedOffset,
    /// Index of its record in [`Effects::records`] (its log offset is the
    /// batch's first offset plus this).
    pub record: usize,
}

/// Side effects of a state change, carried out after the state mutex is
/// released.
#[derive(Debug, Default)]
pub(crate) struct Effects {
    /// Records to append to the group's partition.
    pub records: Vec<GroupLogRecord>,
    /// Write `records` as a transactional batch of this producer (a
    /// TxnOffsetCommit); its offsets then become pending, not visible.
    pub producer: Option<(ProducerId, ProducerEpoch)>,
    /// SyncGroup answers to release once `records` are durable.
    pub deferred_syncs: Vec<(oneshot::Sender<SyncOutcome>, SyncOutcome)>,
    /// Offsets to make visible once `records` are durable.
    pub apply_offsets: Vec<OffsetToApply>,
    /// When the write carried a generation's assignment: the group and
    /// generation to reset if it fails.
    pub assignment_of: Option<(String, i32)>,
    /// When `records` carry a consumer group's changes: the group and the
    /// view the log held before them, to write against again if they fail.
    pub consumer_baseline: Option<(String, Option<ConsumerView>)>,
}

impl Effects {
    /// Queues the group's metadata record.
    pub fn write_group(&mut self, group: &Group, now_ms: i64) {
        self.records.push(GroupLogRecord {
            key: GroupMetadataKey {
                group: group.id.clone(),
            }
            .encode(),
            value: Some(group.to_record().encode()),
            timestamp_ms: now_ms,
        });
    }
}

/// The group coordinator of one broker.
pub struct GroupCoordinator {
    pub(crate) config: GroupConfig,
    pub(crate) node: CoordinatorNode,
    clock: Arc<dyn Clock>,
    log: Arc<dyn GroupLog>,
    state: Mutex<CoordinatorState>,
    writers: Vec<tokio::sync::Mutex<()>>,
    topics: std::sync::OnceLock<Arc<dyn super::consumer::TopicLookup>>,
    /// Per-group configs (KIP-848), as persisted by the broker's registry.
    group_configs: std::sync::RwLock<HashMap<String, std::collections::BTreeMap<String, String>>>,
    /// Which `__consumer_offsets` partitions are served: on a single node
    /// all but those that could not be read at load (their groups are
    /// refused rather than served from a state missing what they hold); in
    /// cluster mode those whose shard lease this broker holds.
    ownership: Ownership,
}

impl std::fmt::Debug for GroupCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCoordinator")
            .field("config", &self.config)
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl GroupCoordinator {
    /// Builds the coordinator and rebuilds its state by replaying every
    /// `__consumer_offsets` partition from `log`.
    ///
    /// Records whose schema does not decode are skipped with a warning; a
    /// partition the log cannot read whole (a batch failing its checks, an
    /// offline partition) is not replayed at all and its groups are refused
    /// ([`GroupCoordinator::refusal`]) — the other partitions
    /// load and serve.
    ///
    /// # Errors
    ///
    /// None today; the `Result` is kept for logs that must fail the load.
    pub async fn load(
        config: GroupConfig,
        node: CoordinatorNode,
        clock: Arc<dyn Clock>,
        log: Arc<dyn GroupLog>,
    ) -> Result<Arc<Self>, GroupError> {
        let partitions = config.offsets_topic_num_partitions.max(1);
        let now = clock.now_ms();
        let mut state = CoordinatorState {
            groups: HashMap::new(),
            next_expiry_check_ms: now + config.offsets_retention_check_interval_ms,
            unsynced: HashMap::new(),
        };
        let ownership = Ownership::every_partition();
        for partition in 0..partitions {
            match log.read_all(partition).await {
                Ok(entries) => {
                    for entry in entries {
                        replay(&mut state.groups, partition, &config, &entry, now);
                    }
                }
                Err(e) => {
                    tracing::error!(
                        partition,
                        error = %e,
                        "__consumer_offsets partition cannot be loaded: its groups are refused with COORDINATOR_NOT_AVAILABLE until it is repaired (`krabka recover --accept-loss __consumer_offsets-{partition}` cuts the damage out, reporting what it removes)"
                    );
                    ownership.unavailable(partition, e.to_string());
                }
            }
        }
        Ok(Self::with_state(config, node, clock, log, state, ownership))
    }

    /// Builds the coordinator of a cluster member: it serves no partition
    /// until it takes one ([`GroupCoordinator::take_partition`]) after
    /// acquiring its shard lease.
    #[must_use]
    pub fn by_lease(
        config: GroupConfig,
        node: CoordinatorNode,
        clock: Arc<dyn Clock>,
        log: Arc<dyn GroupLog>,
    ) -> Arc<Self> {
        let state = CoordinatorState {
            groups: HashMap::new(),
            next_expiry_check_ms: clock.now_ms() + config.offsets_retention_check_interval_ms,
            unsynced: HashMap::new(),
        };
        Self::with_state(config, node, clock, log, state, Ownership::by_lease())
    }

    fn with_state(
        config: GroupConfig,
        node: CoordinatorNode,
        clock: Arc<dyn Clock>,
        log: Arc<dyn GroupLog>,
        state: CoordinatorState,
        ownership: Ownership,
    ) -> Arc<Self> {
        let partitions = config.offsets_topic_num_partitions.max(1);
        Arc::new(Self {
            writers: (0..partitions)
                .map(|_| tokio::sync::Mutex::new(()))
                .collect(),
            config,
            node,
            clock,
            log,
            state: Mutex::new(state),
            topics: std::sync::OnceLock::new(),
            group_configs: std::sync::RwLock::default(),
            ownership,
        })
    }

    /// Takes over `partition` (cluster mode, once its shard lease is held):
    /// answers its groups `COORDINATOR_LOAD_IN_PROGRESS` while it replays
    /// what the log holds for it, then serves them.
    ///
    /// # Errors
    ///
    /// The log's error when the partition cannot be read; it is then not
    /// served (`NOT_COORDINATOR`) and the caller may try again.
    pub async fn take_partition(&self, partition: i32) -> Result<(), GroupError> {
        let _writer = match self.writer(partition) {
            Some(w) => w.lock().await,
            None => return Err(GroupError::NotCoordinator { partition }),
        };
        self.ownership.loading(partition);
        let entries = match self.log.read_all(partition).await {
            Ok(entries) => entries,
            Err(e) => {
                self.ownership.released(partition);
                return Err(e);
            }
        };
        let partitions = self.config.offsets_topic_num_partitions;
        let now = self.clock.now_ms();
        let mut loaded = HashMap::new();
        for entry in &entries {
            replay(&mut loaded, partition, &self.config, entry, now);
        }
        let groups = loaded.len();
        {
            let mut state = self.lock();
            state
                .groups
                .retain(|id, _| partition_for(id, partitions) != partition);
            state
                .unsynced
                .retain(|id, _| partition_for(id, partitions) != partition);
            state.groups.extend(loaded);
        }
        self.ownership.owned(partition);
        tracing::info!(
            partition,
            groups,
            "took over __consumer_offsets-{partition}"
        );
        Ok(())
    }

    /// Gives `partition` up (cluster mode: its lease was lost or handed
    /// on): its groups are forgotten and answered `NOT_COORDINATOR`, so
    /// their members find the new owner.
    pub fn release_partition(&self, partition: i32) {
        self.ownership.released(partition);
        let partitions = self.config.offsets_topic_num_partitions;
        let mut state = self.lock();
        state
            .groups
            .retain(|id, _| partition_for(id, partitions) != partition);
        state
            .unsynced
            .retain(|id, _| partition_for(id, partitions) != partition);
        drop(state);
        tracing::info!(partition, "gave up __consumer_offsets-{partition}");
    }

    /// Which partitions are served, and until when (cluster mode).
    #[must_use]
    pub fn ownership(&self) -> &Ownership {
        &self.ownership
    }

    fn writer(&self, partition: i32) -> Option<&tokio::sync::Mutex<()>> {
        usize::try_from(partition)
            .ok()
            .and_then(|p| self.writers.get(p))
    }

    /// The configs set on `group` (empty when none).
    #[must_use]
    pub fn group_configs(&self, group: &str) -> std::collections::BTreeMap<String, String> {
        self.group_configs
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(group)
            .cloned()
            .unwrap_or_default()
    }

    /// Replaces the configs of `group`; members joining or heartbeating
    /// after this get the new session timeout and heartbeat interval.
    pub fn set_group_configs(
        &self,
        group: &str,
        configs: std::collections::BTreeMap<String, String>,
    ) {
        let mut all = self
            .group_configs
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if configs.is_empty() {
            all.remove(group);
        } else {
            all.insert(group.to_owned(), configs);
        }
    }

    /// Why `group`'s partition is not served here, if it is not: another
    /// broker owns it, it is loading, or it could not be read.
    #[must_use]
    pub fn refusal(&self, group: &str) -> Option<Refusal> {
        self.ownership.refusal(self.partition_for(group))
    }

    /// The `__consumer_offsets` partition that holds `group`.
    pub fn partition_for(&self, group: &str) -> i32 {
        partition_for(group, self.config.offsets_topic_num_partitions)
    }

    /// Tells the coordinator which topics exist (the KIP-848 assignors need
    /// their ids and partition counts); only the first call has an effect.
    pub fn set_topic_lookup(&self, topics: Arc<dyn super::consumer::TopicLookup>) {
        let _ = self.topics.set(topics);
    }

    pub(crate) fn topic_lookup(&self) -> Option<Arc<dyn super::consumer::TopicLookup>> {
        self.topics.get().cloned()
    }

    /// The coordinator's settings.
    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    pub(crate) fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, CoordinatorState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the state with `group`'s partition writer held, then
    /// carries out its effects; returns `f`'s result and the write outcome
    /// (as a Kafka error code, 0 when nothing failed). When `group` is a
    /// KIP-848 consumer group, what `f` changed of its persisted state is
    /// written too ([`changes`]).
    pub(crate) async fn mutate<R>(
        &self,
        group: &str,
        f: impl FnOnce(&mut CoordinatorState, i64, &mut Effects) -> R,
    ) -> (R, i16) {
        let partition = self.partition_for(group);
        let _guard = match self.writer(partition) {
            Some(w) => Some(w.lock().await),
            None => None,
        };
        let mut effects = Effects::default();
        let result = {
            let mut state = self.lock();
            let now = self.clock.now_ms();
            let before = match state.unsynced.remove(group) {
                Some(logged) => logged,
                None => ConsumerView::of(state.groups.get(group)),
            };
            let result = f(&mut state, now, &mut effects);
            let after = ConsumerView::of(state.groups.get(group));
            if before != after {
                if effects.producer.is_some() {
                    // A transactional batch holds offsets only: write the
                    // change with the group's next one.
                    state.unsynced.insert(group.to_owned(), before);
                } else {
                    let records = changes(group, before.as_ref(), after.as_ref(), now);
                    effects.records.extend(records);
                    effects.consumer_baseline = Some((group.to_owned(), before));
                }
            }
            result
        };
        let code = self.persist(partition, effects).await;
        (result, code)
    }

    async fn persist(&self, partition: i32, effects: Effects) -> i16 {
        let Effects {
            records,
            producer,
            deferred_syncs,
            apply_offsets,
            assignment_of,
            consumer_baseline,
        } = effects;
        let outcome = if records.is_empty() {
            Ok(-1)
        } else {
            self.log.append(partition, records, producer).await
        };
        match outcome {
            Ok(first) => {
                if !apply_offsets.is_empty() {
                    let mut state = self.lock();
                    for apply in apply_offsets {
                        let OffsetToApply {
                            group,
                            topic,
                            partition: p,
                            mut offset,
                            record,
                        } = apply;
                        offset.record_offset =
                            first.saturating_add(i64::try_from(record).unwrap_or(0));
                        // A group deleted meanwhile takes its offsets with it.
                        let Some(g) = state.groups.get_mut(&group) else {
                            continue;
                        };
                        match producer {
                            Some((pid, _)) => {
                                g.pending_txn_offsets
                                    .entry(pid.0)
                                    .or_default()
                                    .insert((topic, p), offset);
                            }
                            None => {
                                g.offsets.insert((topic, p), offset);
                            }
                        }
                    }
                }
                for (tx, outcome) in deferred_syncs {
                    let _ = tx.send(outcome);
                }
                0
            }
            Err(err) => {
                let code = write_error_code(&err);
                tracing::warn!(partition, %err, "__consumer_offsets append failed");
                if let Some((group, logged)) = consumer_baseline {
                    self.lock().unsynced.insert(group, logged);
                }
                for (tx, _) in deferred_syncs {
                    let _ = tx.send(SyncOutcome::error(code));
                }
                if let Some((group, generation)) = assignment_of {
                    let now = self.clock.now_ms();
                    let mut state = self.lock();
                    if let Some(g) = state.groups.get_mut(&group)
                        && g.generation == generation
                    {
                        // Kafka's resetAndPropagateAssignmentError: the
                        // assignment never became durable, so rebalance.
                        for m in g.members.values_mut() {
                            m.assignment = bytes::Bytes::new();
                        }
                        let mut ignored = Effects::default();
                        super::classic::prepare_rebalance(g, &self.config, now, &mut ignored);
                    }
                }
                code
            }
        }
    }

    /// Writes a transaction marker to `partition` (the transaction
    /// coordinator's call for a transaction that sent offsets here) and ends
    /// the producer's pending offsets of that partition's groups: visible on
    /// COMMIT, dropped on ABORT. The partition's writer is held throughout,
    /// so the marker's place in the log and the state change agree.
    ///
    /// # Errors
    ///
    /// The log's [`GroupError`] when the marker cannot be written (nothing
    /// changes then; the transaction coordinator retries).
    pub async fn write_txn_marker(
        &self,
        partition: i32,
        marker: ControlMarker,
    ) -> Result<(), GroupError> {
        let writer = self
            .writer(partition)
            .ok_or(GroupError::NotCoordinator { partition })?;
        let _guard = writer.lock().await;
        if self.ownership.refusal(partition).is_some() {
            return Err(GroupError::NotCoordinator { partition });
        }
        self.log.append_marker(partition, marker).await?;
        let partitions = self.config.offsets_topic_num_partitions;
        let mut state = self.lock();
        complete_txn(
            &mut state.groups,
            partition,
            partitions,
            marker.producer_id.0,
            marker.commit,
        );
        Ok(())
    }

    /// Runs every timer that is due: session expiry, pending member expiry,
    /// the rebalance (join) timeout and initial delay, the sync timeout, and,
    /// every `offsets.retention.check.interval.ms`, offset expiry.
    pub async fn tick(&self) {
        let now = self.clock.now_ms();
        let (due, expiry_due) = {
            let mut state = self.lock();
            let due: Vec<String> = state
                .groups
                .values()
                .filter(|g| {
                    super::classic::has_due_timer(g, now)
                        || super::consumer::has_due_consumer_timer(g, now)
                })
                .map(|g| g.id.clone())
                .collect();
            let expiry_due = now >= state.next_expiry_check_ms;
            if expiry_due {
                state.next_expiry_check_ms = now + self.config.offsets_retention_check_interval_ms;
            }
            (due, expiry_due)
        };
        let topics = self.topic_lookup();
        for id in due {
            let config = &self.config;
            self.mutate(&id, |state, now, effects| {
                if let Some(group) = state.groups.get_mut(&id) {
                    super::classic::run_timers(group, config, now, effects);
                    super::consumer::run_consumer_timers(group, topics.as_ref(), now);
                }
            })
            .await;
        }
        if expiry_due {
            self.expire_offsets().await;
        }
    }

    /// Spawns a task that calls [`tick`](Self::tick) every `period` until the
    /// coordinator is dropped.
    pub fn spawn_ticker(self: &Arc<Self>, period: Duration) -> tokio::task::JoinHandle<()> {
        let weak: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(period);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                let Some(coordinator) = weak.upgrade() else {
                    return;
                };
                coordinator.tick().await;
            }
        })
    }
}

/// The Kafka error code a failed `__consumer_offsets` write is reported as.
pub(crate) fn write_error_code(err: &GroupError) -> i16 {
    match err {
        GroupError::NotCoordinator { .. } => ResponseError::NotCoordinator.code(),
        GroupError::Refused { code, .. } => *code,
        _ => ResponseError::CoordinatorNotAvailable.code(),
    }
}

/// Ends producer `producer_id`'s transaction for every group whose offsets
/// live in `partition` (of `partitions`).
fn complete_txn(
    groups: &mut HashMap<String, Group>,
    partition: i32,
    partitions: i32,
    producer_id: i64,
    commit: bool,
) {
    for group in groups.values_mut() {
        if group.pending_txn_offsets.contains_key(&producer_id)
            && partition_for(&group.id, partitions) == partition
        {
            group.complete_txn(producer_id, commit);
        }
    }
}

/// Applies one replayed entry of `partition` to the groups being loaded.
fn replay(
    groups: &mut HashMap<String, Group>,
    partition: i32,
    config: &GroupConfig,
    entry: &GroupLogEntry,
    now: i64,
) {
    let partitions = config.offsets_topic_num_partitions;
    let (offset, record, producer) = match entry {
        GroupLogEntry::Marker {
            producer_id,
            commit,
            ..
        } => {
            complete_txn(groups, partition, partitions, producer_id.0, *commit);
            return;
        }
        GroupLogEntry::Record {
            offset,
            record,
            producer_id,
        } => (*offset, record, *producer_id),
    };
    let key = match RecordKey::decode(&record.key) {
        Ok(k) => k,
        Err(err) => {
            tracing::warn!(%err, "skipping undecodable __consumer_offsets key");
            return;
        }
    };
    if let Some(producer) = producer {
        // A transactional offset commit: pending until the producer's marker.
        match (key, &record.value) {
            (RecordKey::Offset(k), Some(value)) => match OffsetCommitValue::decode(value) {
                Ok(v) => {
                    groups
                        .entry(k.group.clone())
                        .or_insert_with(|| Group::new(&k.group, now))
                        .pending_txn_offsets
                        .entry(producer.0)
                        .or_default()
                        .insert(
                            (k.topic, k.partition),
                            CommittedOffset::from_value(v, offset),
                        );
                }
                Err(err) => tracing::warn!(group = %k.group, %err, "skipping bad offset value"),
            },
            _ => tracing::warn!("skipping a transactional record that is not an offset commit"),
        }
        return;
    }
    match key {
        RecordKey::Offset(k) => match &record.value {
            Some(value) => match OffsetCommitValue::decode(value) {
                Ok(v) => {
                    groups
                        .entry(k.group.clone())
                        .or_insert_with(|| Group::new(&k.group, now))
                        .offsets
                        .insert(
                            (k.topic, k.partition),
                            CommittedOffset::from_value(v, offset),
                        );
                }
                Err(err) => tracing::warn!(group = %k.group, %err, "skipping bad offset value"),
            },
            None => {
                if let Some(g) = groups.get_mut(&k.group) {
                    g.offsets.remove(&(k.topic, k.partition));
                }
            }
        },
        RecordKey::Group(k) => match &record.value {
            Some(value) => match super::records::GroupMetadataValue::decode(value) {
                Ok(v) => {
                    let (offsets, pending) = groups
                        .remove(&k.group)
                        .map(|g| (g.offsets, g.pending_txn_offsets))
                        .unwrap_or_default();
                    let mut group = Group::from_record(&k.group, v, now);
                    group.offsets = offsets;
                    group.pending_txn_offsets = pending;
                    groups.insert(k.group, group);
                }
                Err(err) => tracing::warn!(group = %k.group, %err, "skipping bad group value"),
            },
            None => {
                // Deletion and expiry tombstone the offsets alongside.
                groups.remove(&k.group);
            }
        },
        RecordKey::Consumer(k) => {
            let group = k.group().to_owned();
            if let Err(err) = replay_consumer(groups, k, record.value.as_deref(), config, now) {
                tracing::warn!(%group, %err, "skipping bad consumer group record");
            }
        }
        RecordKey::Other(_) => {}
    }
}
