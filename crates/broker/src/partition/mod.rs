//! The partition manager: every partition this node leads, each owning all
//! of its storage behind the [`PartitionStorage`] seam.
//!
//! A [`Partition`] here is a classic partition: its local `krabka_log::Log`
//! and, for a tiered topic, the remote tier below the local log start
//! (served through the remote log manager, whose task publishes what it
//! learns of the tier into the partition, see [`TierOffsets`]). On a single
//! node the leader is the only replica, so the high watermark is the log
//! end offset and the ISR is this node. Log calls run on the blocking pool
//! ([`crate::blocking`]); the log serializes appends per partition and lets
//! reads proceed beside them. Every append notifies the partition's
//! [`PartitionStorage::changed`], which the fetches parked on it wait for.

mod append_queue;
mod classic;
pub mod storage;
#[cfg(test)]
mod tests;

pub use {
    append_queue::Appended,
    storage::{
        Isolation, OffsetQuery, Offsets, PartitionStorage, Read, ReadRequest, ReadResult, Records,
        StorageError,
    },
};

use {
    crate::{
        diskless::{DisklessRuntime, DisklessSettings, DisklessStorage},
        error::BrokerError,
        remote::RemoteLogManager,
        topics::config::BrokerSideConfig,
    },
    append_queue::AppendQueue,
    bytes::Bytes,
    krabka_ids::LeaderEpoch,
    krabka_log::{Clock, Log, LogCleaner, LogConfig, SystemClock},
    krabka_remote_storage::diskless::{BatchCoordinator, DisklessPartition},
    std::{
        collections::HashMap,
        path::{Path, PathBuf},
        sync::{Arc, Mutex, OnceLock, PoisonError, RwLock, Weak},
    },
    tokio::sync::Notify,
    uuid::Uuid,
};

/// The leader epoch of every partition: one node, never a leader change.
pub const LEADER_EPOCH: LeaderEpoch = LeaderEpoch(0);

/// Threads that open the partitions of one topic, or close every
/// partition at shutdown, side by side: both are a few fsyncs per
/// partition, which the file system commits together when they overlap.
const FILE_THREADS: usize = 8;

/// The broker's remote log manager, once it has started (shared by every
/// partition, set once).
pub type RemoteSlot = Arc<OnceLock<Arc<RemoteLogManager>>>;

/// What the remote log manager has learnt of a tiered partition's remote
/// data, published into the partition so that it can answer for all of its
/// storage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TierOffsets {
    /// The partition's remote metadata was loaded since this broker started;
    /// before that, offsets below the local log start cannot be answered.
    pub loaded: bool,
    /// The first offset held in the remote tier, if any segment is there.
    pub remote_start: Option<i64>,
    /// The highest offset copied to the remote tier (KIP-1005 "latest tiered").
    pub highest_tiered: Option<i64>,
}

/// One partition this node leads.
pub struct Partition {
    /// Topic name.
    pub topic: String,
    /// Topic id.
    pub topic_id: Uuid,
    /// Partition index.
    pub index: i32,
    log: Arc<Log>,
    extras: RwLock<BrokerSideConfig>,
    appends: Arc<AppendQueue>,
    changed: Arc<Notify>,
    remote: RemoteSlot,
    /// `remote.log.storage.system.enable`.
    remote_system: bool,
    tier: Mutex<TierOffsets>,
    /// This partition, for the futures of its remote reads.
    me: Weak<Partition>,
}

impl std::fmt::Debug for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.index)
    }
}

impl Partition {
    /// The local log, for the two users below the request handlers: the
    /// coordinators, whose internal topics are always local and which write
    /// and replay them as a log, and the remote log manager, which tiers it.
    /// Request handlers go through [`PartitionStorage`]. A writer must call
    /// [`Partition::notify_appended`] after an append.
    #[must_use]
    pub fn local_log(&self) -> &Arc<Log> {
        &self.log
    }

    /// After an append made directly on [`Partition::local_log`] (a
    /// coordinator's record, a transaction marker): wakes whoever waits on
    /// this partition and, if the append rolled, flushes the segments it
    /// closed in the background, as the append queue does for clients.
    pub fn notify_appended(&self) {
        self.changed.notify_waiters();
        append_queue::flush_rolled(&self.log);
    }

    /// The high watermark: the log end offset on a single node.
    #[must_use]
    pub fn high_watermark(&self) -> i64 {
        self.log.log_end_offset()
    }

    /// Queues a client's batches for appending as leader, behind every
    /// append queued before (see [`append_queue`]); the receiver gets the
    /// log's answer, and the partition's waiters are woken. Must be called
    /// within a tokio runtime.
    pub fn queue_append(&self, records: Bytes) -> Appended {
        self.appends.push(&self.log, &self.changed, records)
    }

    /// Broker-side settings (e.g. `min.insync.replicas`).
    #[must_use]
    pub fn extras(&self) -> BrokerSideConfig {
        *self.extras.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the topic has `remote.storage.enable=true`.
    #[must_use]
    pub fn is_tiered(&self) -> bool {
        self.extras().remote_storage_enable
    }

    /// What the remote log manager last published about the remote data.
    #[must_use]
    pub fn tier_offsets(&self) -> TierOffsets {
        *self.tier.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Publishes what the remote log manager learnt of the remote data.
    pub fn publish_tier_offsets(&self, offsets: TierOffsets) {
        *self.tier.lock().unwrap_or_else(PoisonError::into_inner) = offsets;
    }

    /// The partition's log start offset: the first offset in the remote
    /// tier when there is one below the local log start, else the local
    /// one, never below the log start floor DeleteRecords set.
    #[must_use]
    pub fn log_start_offset(&self) -> i64 {
        let local = self.log.log_start_offset();
        let start = self
            .tier_offsets()
            .remote_start
            .map_or(local, |r| r.min(local));
        start.max(self.log.log_start_floor())
    }

    /// Whether this tiered partition cannot answer for its remote data yet:
    /// the remote log manager has not started or has not loaded the
    /// partition's metadata. Offsets below the local log start then get a
    /// retriable error, never an answer from local data alone. A log that
    /// still starts at 0 has nothing below it and is never pending.
    #[must_use]
    pub fn remote_pending(&self) -> bool {
        self.log.log_start_offset() > 0
            && self.remote_system
            && self.is_tiered()
            && (self.remote.get().is_none() || !self.tier_offsets().loaded)
    }
}

/// The partition directory name Kafka uses: `<topic>-<partition>`.
#[must_use]
pub fn partition_dir(log_dir: &Path, topic: &str, index: i32) -> PathBuf {
    log_dir.join(format!("{topic}-{index}"))
}

/// All partitions of this node.
pub struct PartitionManager {
    log_dir: PathBuf,
    clock: Arc<dyn Clock>,
    partitions: RwLock<HashMap<(String, i32), Arc<Partition>>>,
    /// Partitions whose log could not be opened, with the reason: refused
    /// with `KAFKA_STORAGE_ERROR` (Kafka's answer for a partition of a
    /// failed log directory) while the others serve.
    offline: RwLock<HashMap<(String, i32), String>>,
    cleaner: Option<LogCleaner>,
    remote: RemoteSlot,
    remote_system: bool,
    /// Partitions of diskless topics (no local log; see [`crate::diskless`]).
    diskless: RwLock<HashMap<(String, i32), Arc<DisklessStorage>>>,
    /// How diskless topics run here, if they may.
    diskless_settings: Option<DisklessSettings>,
    /// Started with the first diskless partition.
    diskless_runtime: Mutex<Option<Arc<DisklessRuntime>>>,
    /// In cluster mode, the cluster's batch coordinator (PostgreSQL), set
    /// once the broker has joined; diskless partitions wait for it.
    cluster_coordinator: Option<Mutex<Option<ClusterCoordinator>>>,
}

/// The cluster's batch coordinator and the cluster's id.
type ClusterCoordinator = (Arc<dyn BatchCoordinator>, String);

impl std::fmt::Debug for PartitionManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionManager")
            .field("log_dir", &self.log_dir)
            .finish()
    }
}

impl PartitionManager {
    /// An empty manager for partitions under `log_dir`; logs are registered
    /// with `cleaner` (compaction) if there is one. Tiered partitions read
    /// their remote data through the manager in `remote` once it is set;
    /// `remote_system` is `remote.log.storage.system.enable`.
    #[must_use]
    pub fn new(
        log_dir: PathBuf,
        cleaner: Option<LogCleaner>,
        remote: RemoteSlot,
        remote_system: bool,
    ) -> Self {
        Self {
            log_dir,
            clock: Arc::new(SystemClock),
            partitions: RwLock::new(HashMap::new()),
            offline: RwLock::new(HashMap::new()),
            cleaner,
            remote,
            remote_system,
            diskless: RwLock::new(HashMap::new()),
            diskless_settings: None,
            diskless_runtime: Mutex::new(None),
            cluster_coordinator: None,
        }
    }

    /// Lets topics with `diskless.enable=true` open, running as `settings`
    /// say.
    #[must_use]
    pub fn with_diskless(mut self, settings: DisklessSettings) -> Self {
        self.diskless_settings = Some(settings);
        self
    }

    /// Cluster mode: diskless partitions run on the coordinator given to
    /// [`PartitionManager::use_cluster_coordinator`], never on the
    /// embedded one (whose order other brokers would not see).
    #[must_use]
    pub fn in_cluster_mode(mut self) -> Self {
        self.cluster_coordinator = Some(Mutex::new(None));
        self
    }

    /// Cluster mode: the batch coordinator every broker shares, for the
    /// diskless runtime to start on, and the cluster's id.
    pub fn use_cluster_coordinator(
        &self,
        coordinator: Arc<dyn BatchCoordinator>,
        cluster_id: &str,
    ) {
        if let Some(slot) = &self.cluster_coordinator {
            *slot.lock().unwrap_or_else(PoisonError::into_inner) =
                Some((coordinator, cluster_id.to_owned()));
        }
    }

    /// The diskless runtime, started now if it was not. Blocking.
    fn diskless_runtime(&self) -> Result<Arc<DisklessRuntime>, BrokerError> {
        let mut slot = self
            .diskless_runtime
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(runtime) = slot.as_ref() {
            return Ok(Arc::clone(runtime));
        }
        let settings = self.diskless_settings.clone().ok_or_else(|| {
            BrokerError::Config("diskless topics are not enabled on this broker".into())
        })?;
        let runtime = match &self.cluster_coordinator {
            None => DisklessRuntime::start(settings, Arc::clone(&self.remote))?,
            Some(cluster) => {
                let (coordinator, cluster_id) = cluster
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone()
                    .ok_or_else(|| {
                        BrokerError::Task(
                            "diskless partitions wait for the cluster's batch coordinator".into(),
                        )
                    })?;
                DisklessRuntime::start_with(
                    settings.for_cluster(&cluster_id),
                    coordinator,
                    Arc::clone(&self.remote),
                )?
            }
        };
        *slot = Some(Arc::clone(&runtime));
        Ok(runtime)
    }

    /// The diskless runtime, if a diskless partition started it.
    #[must_use]
    pub fn diskless_started(&self) -> Option<Arc<DisklessRuntime>> {
        self.diskless_runtime
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn diskless_map(
        &self,
    ) -> std::sync::RwLockReadGuard<'_, HashMap<(String, i32), Arc<DisklessStorage>>> {
        self.diskless.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Creates (in the batch coordinator) or reopens diskless partitions;
    /// returns the ones that failed. Blocking; within a tokio runtime.
    fn open_diskless(
        &self,
        topic: &str,
        topic_id: Uuid,
        indexes: &[i32],
        config: &LogConfig,
    ) -> Vec<(i32, BrokerError)> {
        let fail_all = |e: &BrokerError| {
            indexes
                .iter()
                .map(|i| (*i, BrokerError::Task(e.to_string())))
                .collect::<Vec<_>>()
        };
        let handle = match tokio::runtime::Handle::try_current() {
            Ok(handle) => handle,
            Err(e) => return fail_all(&BrokerError::Task(format!("diskless partitions: {e}"))),
        };
        let runtime = match self.diskless_runtime() {
            Ok(runtime) => runtime,
            Err(e) => return fail_all(&e),
        };
        let ids: Vec<DisklessPartition> = indexes
            .iter()
            .map(|i| DisklessPartition::new(topic_id, *i))
            .collect();
        let coordinator = Arc::clone(&runtime.coordinator);
        let infos = handle.block_on(async {
            coordinator.create_partitions(&ids).await?;
            coordinator.log_info(&ids).await
        });
        let infos = match infos {
            Ok(infos) => infos,
            Err(e) => {
                return fail_all(&BrokerError::Task(format!(
                    "diskless batch coordinator: {e}"
                )));
            }
        };
        let _entered = handle.enter();
        let mut failed = Vec::new();
        for (index, info) in indexes.iter().zip(infos) {
            match info {
                Ok(info) => {
                    let storage = DisklessStorage::new(
                        topic,
                        topic_id,
                        *index,
                        config.clone(),
                        info,
                        &runtime,
                    );
                    self.write_offline().remove(&(topic.to_owned(), *index));
                    self.diskless
                        .write()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert((topic.to_owned(), *index), storage);
                }
                Err(e) => failed.push((
                    *index,
                    BrokerError::Task(format!("diskless partition {index}: {e}")),
                )),
            }
        }
        failed
    }

    /// One diskless partition, if this node has it.
    #[must_use]
    pub fn get_diskless(&self, topic: &str, index: i32) -> Option<Arc<DisklessStorage>> {
        self.diskless_map().get(&(topic.to_owned(), index)).cloned()
    }

    /// Every diskless partition.
    #[must_use]
    pub fn all_diskless(&self) -> Vec<Arc<DisklessStorage>> {
        self.diskless_map().values().cloned().collect()
    }

    /// Whether this node serves the partition (classic or diskless).
    #[must_use]
    pub fn contains(&self, topic: &str, index: i32) -> bool {
        self.get(topic, index).is_some() || self.get_diskless(topic, index).is_some()
    }

    fn read_map(&self) -> std::sync::RwLockReadGuard<'_, HashMap<(String, i32), Arc<Partition>>> {
        self.partitions
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn write_map(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<(String, i32), Arc<Partition>>> {
        self.partitions
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens (recovering) or creates partitions `from..to` of a topic. Blocking.
    ///
    /// # Errors
    ///
    /// [`BrokerError::Log`] if a log cannot be opened.
    pub fn open_partitions(
        &self,
        topic: &str,
        topic_id: Uuid,
        range: std::ops::Range<i32>,
        config: &LogConfig,
        extras: BrokerSideConfig,
    ) -> Result<(), BrokerError> {
        let indexes: Vec<i32> = range.collect();
        match self
            .open_available(topic, topic_id, &indexes, config, extras)
            .into_iter()
            .next()
        {
            Some((_, e)) => Err(e),
            None => Ok(()),
        }
    }

    /// Opens (recovering) or creates the partitions `indexes` of a topic,
    /// as far as they open; returns the ones that failed, with their
    /// errors (the caller decides whether they go offline). A coordinator's
    /// state topic is opened refusing corruption (see
    /// [`crate::topics::names::is_state_topic`]). What recovery removed is
    /// counted in the metrics. Blocking.
    pub fn open_available(
        &self,
        topic: &str,
        topic_id: Uuid,
        indexes: &[i32],
        config: &LogConfig,
        extras: BrokerSideConfig,
    ) -> Vec<(i32, BrokerError)> {
        // The coordinators' state topics stay local logs whatever the
        // broker default of diskless.enable says.
        if extras.diskless_enable && !crate::topics::names::is_state_topic(topic) {
            return self.open_diskless(topic, topic_id, indexes, config);
        }
        let options = krabka_log::OpenOptions {
            corruption: if crate::topics::names::is_state_topic(topic) {
                krabka_log::CorruptionPolicy::Refuse
            } else {
                krabka_log::CorruptionPolicy::Truncate
            },
            verify_all: false,
        };
        // Opening a log is mostly waiting for fsyncs (a new partition writes
        // its metadata and checkpoints durably); opened side by side, the
        // file system commits them together, which is what makes creating
        // the 50 partitions of an internal topic take milliseconds, not
        // seconds.
        let chunk = indexes.len().div_ceil(FILE_THREADS).max(1);
        let opened: Vec<Result<(i32, Log), (i32, BrokerError)>> = std::thread::scope(|scope| {
            let workers: Vec<_> = indexes
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || {
                        part.iter()
                            .map(|&index| {
                                let dir = partition_dir(&self.log_dir, topic, index);
                                Log::open_with(
                                    &dir,
                                    topic_id,
                                    config.clone(),
                                    Arc::clone(&self.clock),
                                    options,
                                )
                                .map(|log| (index, log))
                                .map_err(|source| (index, BrokerError::Log { dir, source }))
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| {
                    w.join().unwrap_or_else(|_| {
                        vec![Err((
                            -1,
                            BrokerError::Task(format!("opening a partition of {topic} panicked")),
                        ))]
                    })
                })
                .collect()
        });
        let mut failed = Vec::new();
        for result in opened {
            let (index, log) = match result {
                Ok(opened) => opened,
                Err(failure) => {
                    failed.push(failure);
                    continue;
                }
            };
            crate::metrics::recovery_removed(topic, log.recovery_report());
            self.write_offline().remove(&(topic.to_owned(), index));
            let log = Arc::new(log);
            if let Some(cleaner) = &self.cleaner {
                cleaner.register(&log);
            }
            let partition = Arc::new_cyclic(|me| Partition {
                topic: topic.to_owned(),
                topic_id,
                index,
                log,
                extras: RwLock::new(extras),
                appends: Arc::default(),
                changed: Arc::default(),
                remote: Arc::clone(&self.remote),
                remote_system: self.remote_system,
                tier: Mutex::default(),
                me: me.clone(),
            });
            self.write_map()
                .insert((topic.to_owned(), index), partition);
        }
        failed
    }

    fn write_offline(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<(String, i32), String>> {
        self.offline
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn read_offline(&self) -> std::sync::RwLockReadGuard<'_, HashMap<(String, i32), String>> {
        self.offline
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records that a partition could not be opened: requests for it are
    /// refused with `KAFKA_STORAGE_ERROR` and `reason` is what it reports.
    pub fn mark_offline(&self, topic: &str, index: i32, reason: String) {
        self.write_offline()
            .insert((topic.to_owned(), index), reason);
        crate::metrics::offline_partitions(self.read_offline().len());
    }

    /// Why a partition is offline, if it is.
    #[must_use]
    pub fn offline_reason(&self, topic: &str, index: i32) -> Option<String> {
        self.read_offline().get(&(topic.to_owned(), index)).cloned()
    }

    /// Every offline partition with its reason.
    #[must_use]
    pub fn offline(&self) -> Vec<((String, i32), String)> {
        self.read_offline()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// One partition, if this node has it.
    #[must_use]
    pub fn get(&self, topic: &str, index: i32) -> Option<Arc<Partition>> {
        self.read_map().get(&(topic.to_owned(), index)).cloned()
    }

    /// Every partition, in no particular order.
    #[must_use]
    pub fn all(&self) -> Vec<Arc<Partition>> {
        self.read_map().values().cloned().collect()
    }

    /// Applies a new configuration to every partition of a topic.
    pub fn update_config(&self, topic: &str, config: &LogConfig, extras: BrokerSideConfig) {
        for partition in self.diskless_map().values().filter(|p| p.topic == topic) {
            partition.update_config(config.clone());
        }
        for partition in self.read_map().values().filter(|p| p.topic == topic) {
            partition.log.update_config(config.clone());
            *partition
                .extras
                .write()
                .unwrap_or_else(PoisonError::into_inner) = extras;
        }
    }

    /// Removes every partition of a topic and deletes its data. Blocking.
    ///
    /// # Errors
    ///
    /// [`BrokerError::Log`] / [`BrokerError::Io`] if the data cannot be removed.
    pub fn delete_topic(&self, topic: &str) -> Result<(), BrokerError> {
        self.delete_partitions(topic, 0)
    }

    /// Removes the partitions `from..` of a topic and deletes their data
    /// (an aborted CreatePartitions). Blocking.
    ///
    /// # Errors
    ///
    /// [`BrokerError::Log`] / [`BrokerError::Io`] if the data cannot be removed.
    pub fn delete_partitions(&self, topic: &str, from: i32) -> Result<(), BrokerError> {
        self.write_offline()
            .retain(|(t, i), _| t != topic || *i < from);
        self.delete_diskless(topic, from)?;
        let removed: Vec<Arc<Partition>> = {
            let mut map = self.write_map();
            let keys: Vec<_> = map
                .keys()
                .filter(|(t, i)| t == topic && *i >= from)
                .cloned()
                .collect();
            keys.iter().filter_map(|k| map.remove(k)).collect()
        };
        for partition in removed {
            let dir = partition.log.dir().to_owned();
            let mut log = Arc::clone(&partition.log);
            drop(partition);
            if let Some(cleaner) = &self.cleaner {
                cleaner.unregister(&log);
            }
            // A fetch still reading holds a clone of the log for a moment;
            // wait for it so the log deletes itself, else close and remove.
            let mut attempts = 0;
            loop {
                match Arc::try_unwrap(log) {
                    Ok(owned) => {
                        owned.delete().map_err(|source| BrokerError::Log {
                            dir: dir.clone(),
                            source,
                        })?;
                        break;
                    }
                    Err(shared) if attempts < 500 => {
                        log = shared;
                        attempts += 1;
                        std::thread::sleep(std::time::Duration::from_millis(10));
                    }
                    Err(shared) => {
                        if let Err(e) = shared.close() {
                            tracing::warn!(dir = %dir.display(), error = %e, "closing deleted log");
                        }
                        std::fs::remove_dir_all(&dir).map_err(|source| BrokerError::Io {
                            action: "remove partition directory",
                            path: dir.clone(),
                            source,
                        })?;
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    /// Forgets the diskless partitions `from..` of a topic; for a whole
    /// topic its batches are deleted in the coordinator, and its objects
    /// become garbage for the cleaner. Blocking; within a tokio runtime.
    fn delete_diskless(&self, topic: &str, from: i32) -> Result<(), BrokerError> {
        let removed: Vec<Arc<DisklessStorage>> = {
            let mut map = self
                .diskless
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            let keys: Vec<_> = map
                .keys()
                .filter(|(t, i)| t == topic && *i >= from)
                .cloned()
                .collect();
            keys.iter().filter_map(|k| map.remove(k)).collect()
        };
        let Some(first) = removed.first() else {
            return Ok(());
        };
        // An aborted CreatePartitions leaves empty partitions in the
        // coordinator, recreated as they are if the topic grows again.
        if from > 0 {
            return Ok(());
        }
        let topic_id = first.topic_id;
        let runtime = self.diskless_runtime()?;
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|e| BrokerError::Task(format!("deleting diskless topic {topic}: {e}")))?;
        handle
            .block_on(runtime.coordinator.delete_topics(&[topic_id]))
            .map_err(|e| BrokerError::Task(format!("deleting diskless topic {topic}: {e}")))?;
        tracing::info!(topic, "diskless topic deleted from the batch coordinator");
        Ok(())
    }

    /// Closes every log cleanly (flush, producer snapshots, clean marker),
    /// several at a time: one after the other, the hundred partitions of
    /// the internal topics alone took seconds of fsyncs on a busy disk.
    /// Blocking.
    pub fn close_all(&self) {
        if let Some(cleaner) = &self.cleaner {
            cleaner.shutdown();
        }
        let partitions = self.all();
        let close = |part: &[Arc<Partition>]| {
            for partition in part {
                if let Err(e) = partition.log.close() {
                    tracing::error!(partition = ?partition, error = %e, "closing log failed");
                }
            }
        };
        let chunk = partitions.len().div_ceil(FILE_THREADS).max(1);
        std::thread::scope(|scope| {
            for part in partitions.chunks(chunk) {
                // A thread that cannot start closes its share here.
                if std::thread::Builder::new()
                    .spawn_scoped(scope, move || close(part))
                    .is_err()
                {
                    close(part);
                }
            }
        });
    }

    /// Asks the cleaner for a compaction pass now (after a config change).
    pub fn wake_cleaner(&self) {
        if let Some(cleaner) = &self.cleaner {
            cleaner.wake();
        }
    }

    /// The storage seam of one partition, if this node has it: what
    /// request handlers use.
    #[must_use]
    pub fn storage(&self, topic: &str, index: i32) -> Option<Arc<dyn PartitionStorage>> {
        match self.get(topic, index) {
            Some(p) => Some(p as Arc<dyn PartitionStorage>),
            None => self
                .get_diskless(topic, index)
                .map(|p| p as Arc<dyn PartitionStorage>),
        }
    }
}
