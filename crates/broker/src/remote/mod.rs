//! The remote log manager (KIP-405 tiered storage inside the broker).
//!
//! For every partition of a topic with `remote.storage.enable=true` a
//! periodic task (every `remote.log.manager.task.interval.ms`, on tokio's
//! blocking pool because both SPIs are synchronous) does, in order:
//!
//! 1. once per broker start, cleans up segments an earlier run left in
//!    `COPY_SEGMENT_STARTED` or `DELETE_SEGMENT_STARTED` (delete lifecycle),
//!    so an interrupted copy is redone, never duplicated;
//! 2. copies closed segments below the last stable offset, in offset order,
//!    through `COPY_SEGMENT_STARTED` → copy → `COPY_SEGMENT_FINISHED`
//!    (a failure backs the partition off exponentially);
//! 3. local retention: deletes local segments whose copy finished and that
//!    are past `local.retention.*` (the log itself applies no retention to a
//!    tiered topic, see [`policy::hand_retention_to_remote_log_manager`]);
//! 4. total retention (`retention.*` over local plus remote) deletes remote
//!    segments through the delete lifecycle.
//!
//! The log's own log start offset is the *local* log start offset once
//! segments have left local disk. What the task learns of the tier (the
//! first remote offset, the highest tiered one, that the metadata is loaded)
//! it publishes into the partition ([`TierOffsets`]), which answers for all
//! of its storage behind its seam: the partition's log start offset is the
//! first offset held remotely, raised by the DeleteRecords floor the log
//! keeps. The log exports what a copy needs
//! (`krabka_log::Log::tierable_segments`). Reads below the local log start
//! come here from the partition ([`RemoteLogManager::read_remote`]) and run
//! on their own `remote.log.reader.threads` threads ([`reader`]) so they
//! cannot take the blocking threads local fetches use. Deletion on request
//! (DeleteRecords' floor, topic deletion, KIP-950 disable) is in [`delete`],
//! reads beyond plain batches in [`read`], metrics in [`metrics`].

pub mod backend;
pub mod delete;
pub mod diskless;
pub mod metadata_log;
pub mod metrics;
pub mod policy;
pub mod read;
pub mod reader;
pub mod settings;
pub mod worm;

use {
    crate::{
        broker::Broker,
        error::BrokerError,
        partition::{LEADER_EPOCH, Partition, TierOffsets},
        topics::config as topic_config,
    },
    bytes::Bytes,
    krabka_ids::LeaderEpoch,
    krabka_remote_storage::{
        BytePosition, IndexType, InmemoryRemoteLogMetadataManager, LogOffset, LogSegmentData,
        RemoteIndexCache, RemoteLogMetadataManager, RemoteLogSegmentDetails, RemoteLogSegmentId,
        RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState,
        RemoteStorageError, RemoteStorageManager, TopicIdPartition, parse_offset_index,
        position_for_relative_offset,
    },
    krabka_remote_storage_topic::{
        MetadataEventLog, TopicBasedRemoteLogMetadataManager, TopicBasedRlmmConfig,
    },
    policy::{LocalSegment, RemoteSegment, Retention},
    settings::{MetadataManagerChoice, RemoteSettings},
    std::{
        collections::{BTreeMap, HashMap},
        sync::{Arc, Mutex, PoisonError},
        time::{Duration, Instant, SystemTime, UNIX_EPOCH},
    },
    tokio::sync::watch,
};

/// Bytes read from the remote tier at least, so small fetches of a
/// sequential consumer do not each cost a remote round trip per batch.
const MIN_REMOTE_READ: usize = 64 * 1024;
/// How old an unfinished copy must be before anything deletes it: far
/// longer than any copy takes, so a copy still uploading (another broker's
/// consolidation, say) is never cut short, and none lands after it.
pub const UNFINISHED_AGE_MS: i64 = 15 * 60 * 1000;

/// A segment in [`RemoteLogManager`]'s set of copies under way for as long
/// as this lives, so a copy that fails or panics never stays in it (a
/// deletion would wait on it for ever).
struct Copying<'a> {
    rlm: &'a RemoteLogManager,
    id: uuid::Uuid,
}

impl<'a> Copying<'a> {
    fn new(rlm: &'a RemoteLogManager, id: uuid::Uuid) -> Self {
        rlm.copying_now().insert(id);
        Self { rlm, id }
    }
}

impl Drop for Copying<'_> {
    fn drop(&mut self) {
        self.rlm.copying_now().remove(&self.id);
    }
}

/// Per-partition bookkeeping of the remote log manager's task (what it
/// learns of the tier is published into the partition, [`TierOffsets`]).
#[derive(Debug, Clone, Default)]
struct PartitionState {
    /// Whether the partition was assigned to the metadata manager and its
    /// leftovers from an earlier run were cleaned up.
    prepared: bool,
    /// Copy failures in a row.
    failures: u32,
    /// No copy before this instant (back-off).
    retry_at: Option<Instant>,
    /// The topic id this state belongs to (a recreated topic starts afresh).
    topic_id: uuid::Uuid,
}

/// A closed segment's files and what its remote metadata records.
#[derive(Debug)]
pub(crate) struct SegmentToCopy {
    /// Its first offset.
    pub base: i64,
    /// One past its last offset.
    pub end: i64,
    /// Its largest record timestamp.
    pub max_timestamp: i64,
    /// The `.log` file's size.
    pub size_bytes: u64,
    /// Each leader epoch in it, with its first offset.
    pub epochs: BTreeMap<LeaderEpoch, i64>,
    /// The files.
    pub data: LogSegmentData,
}

/// Whether the tier is a write-once (WORM) archive, and who publishes its
/// chain heads.
#[derive(Debug, Default)]
pub struct Archive {
    /// The tier refuses deletes.
    pub enabled: bool,
    /// Publishes each new chain head into the metadata topic.
    pub chain_heads: Option<worm::ChainHeadPublisher>,
}

/// Copies, expires and serves remote data of tiered partitions.
pub struct RemoteLogManager {
    broker_id: i32,
    storage: Arc<dyn RemoteStorageManager>,
    metadata: Arc<dyn RemoteLogMetadataManager>,
    index_cache: RemoteIndexCache,
    readers: reader::RemoteReaderPool,
    deletions: delete::DeletionJournal,
    settings: RemoteSettings,
    state: Mutex<HashMap<(String, i32), PartitionState>>,
    /// The tier is a write-once archive: it refuses deletes, so the delete
    /// lifecycle only retires metadata (the bucket's retention removes the
    /// objects).
    archive: bool,
    /// Publishes WORM chain heads into the metadata topic (archive mode).
    chain_heads: Option<worm::ChainHeadPublisher>,
    /// Set at shutdown: the running pass stops after its current step.
    stopping: std::sync::atomic::AtomicBool,
    /// Diskless partitions whose metadata is loaded here ([`diskless`]).
    diskless_loaded: Mutex<std::collections::HashSet<TopicIdPartition>>,
    /// The segments this broker is copying right now: a deletion leaves
    /// them (and other brokers' recent copies) to a later pass.
    copying: Mutex<std::collections::HashSet<uuid::Uuid>>,
}

impl std::fmt::Debug for RemoteLogManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteLogManager")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn backend(message: String) -> RemoteStorageError {
    RemoteStorageError::Backend { message }
}

fn storage_error(e: &RemoteStorageError) -> BrokerError {
    BrokerError::Task(format!("remote storage: {e}"))
}

/// Whether a topic's effective configuration turns tiering on.
fn is_tiered(broker: &Broker, configs: &BTreeMap<String, String>, name: &str) -> bool {
    topic_config::resolve_topic(&broker.config, &broker.registry, configs, name)
        .value
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

fn long_setting(broker: &Broker, configs: &BTreeMap<String, String>, name: &str) -> i64 {
    topic_config::resolve_topic(&broker.config, &broker.registry, configs, name)
        .value
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(-1)
}

impl RemoteLogManager {
    /// Builds the manager from the broker's settings, or `None` when
    /// `remote.log.storage.system.enable` is false. The topic-based metadata
    /// manager reads and writes `__remote_log_metadata` on this broker's own
    /// partitions ([`metadata_log`]), never through its listener.
    ///
    /// # Errors
    ///
    /// [`BrokerError::Config`] for bad settings, [`BrokerError::Task`] if the
    /// tier directory, index cache or metadata log cannot be opened.
    pub async fn start(broker: &Arc<Broker>) -> Result<Option<Arc<Self>>, BrokerError> {
        let Some(settings) = RemoteSettings::from_config(&broker.config)? else {
            return Ok(None);
        };
        let storage_settings =
            backend::StorageSettings::from_config(&broker.config, settings.storage_dir.clone())?;
        // Building an object-store tier checks the bucket (blocking calls).
        let built = crate::blocking::run(move || backend::build(&storage_settings))
            .await
            .map_err(|e| BrokerError::Task(format!("remote storage manager: {e}")))??;
        let storage = Arc::clone(&built.storage);
        let mut event_log: Option<Arc<dyn MetadataEventLog>> = None;
        let metadata: Arc<dyn RemoteLogMetadataManager> = match settings.metadata_manager {
            MetadataManagerChoice::InMemory => Arc::new(InmemoryRemoteLogMetadataManager::new()),
            MetadataManagerChoice::Topic => {
                let log = Self::metadata_log(broker, &settings).await?;
                event_log = Some(Arc::clone(&log));
                Arc::new(TopicBasedRemoteLogMetadataManager::new(
                    log,
                    tokio::runtime::Handle::current(),
                    TopicBasedRlmmConfig::default(),
                ))
            }
        };
        let chain_heads = match (&built.object, built.worm) {
            (Some(object), true) => {
                // The chain heads go to the metadata topic even when the
                // segment metadata is kept in memory.
                let log = match event_log {
                    Some(log) => log,
                    None => Self::metadata_log(broker, &settings).await?,
                };
                Some(worm::ChainHeadPublisher::new(
                    Arc::clone(object),
                    log,
                    tokio::runtime::Handle::current(),
                ))
            }
            _ => None,
        };
        Self::from_parts(
            broker.config.node_id,
            &broker.config.log_dir,
            settings,
            storage,
            metadata,
            Archive {
                enabled: built.worm,
                chain_heads,
            },
        )
        .map(Some)
    }

    /// Builds the manager over a given tier and metadata manager, keeping
    /// its index cache and deletion journal under `log_dir`.
    ///
    /// # Errors
    ///
    /// [`BrokerError::Task`] if the index cache cannot be opened or the
    /// reader threads cannot be started, [`BrokerError::Io`] if the deletion
    /// journal cannot be read.
    pub fn from_parts(
        broker_id: i32,
        log_dir: &std::path::Path,
        settings: RemoteSettings,
        storage: Arc<dyn RemoteStorageManager>,
        metadata: Arc<dyn RemoteLogMetadataManager>,
        archive: Archive,
    ) -> Result<Arc<Self>, BrokerError> {
        let index_cache =
            RemoteIndexCache::open(log_dir, settings.index_cache_bytes, Arc::clone(&storage))
                .map_err(|e| storage_error(&e))?;
        let readers =
            reader::RemoteReaderPool::new(settings.reader_threads, settings.reader_max_pending)
                .map_err(|e| BrokerError::Task(format!("remote log reader threads: {e}")))?;
        Ok(Arc::new(Self {
            broker_id,
            storage,
            metadata,
            index_cache,
            readers,
            deletions: delete::DeletionJournal::open(log_dir)?,
            settings,
            state: Mutex::new(HashMap::new()),
            archive: archive.enabled,
            chain_heads: archive.chain_heads,
            stopping: std::sync::atomic::AtomicBool::new(false),
            diskless_loaded: Mutex::default(),
            copying: Mutex::default(),
        }))
    }

    /// The broker's own `__remote_log_metadata`, in process (created on
    /// first use); in cluster mode, the cluster database's event logs
    /// instead (no local topic).
    async fn metadata_log(
        broker: &Arc<Broker>,
        settings: &RemoteSettings,
    ) -> Result<Arc<dyn MetadataEventLog>, BrokerError> {
        if let Some(node) = broker.cluster.get() {
            let log = crate::cluster::remote_log_metadata::DbMetadataEventLog::open(
                Arc::clone(node),
                settings.metadata_partitions,
            )
            .await
            .map_err(|e| BrokerError::Task(format!("remote log metadata log: {e}")))?;
            return Ok(Arc::new(log));
        }
        let log = metadata_log::BrokerMetadataEventLog::open(broker, settings.metadata_partitions)
            .await
            .map_err(|e| BrokerError::Task(format!("remote log metadata topic: {e}")))?;
        Ok(Arc::new(log))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, i32), PartitionState>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn partition_state(&self, p: &Partition) -> PartitionState {
        self.lock()
            .get(&(p.topic.clone(), p.index))
            .filter(|s| s.topic_id == p.topic_id)
            .cloned()
            .unwrap_or_default()
    }

    fn set_partition_state(&self, p: &Partition, mut state: PartitionState) {
        state.topic_id = p.topic_id;
        self.lock().insert((p.topic.clone(), p.index), state);
    }

    /// Whether the partition belongs to a topic with `remote.storage.enable=true`.
    #[must_use]
    pub fn is_tiered(broker: &Broker, p: &Partition) -> bool {
        broker
            .registry
            .get(&p.topic)
            .is_some_and(|meta| is_tiered(broker, &meta.configs, "remote.storage.enable"))
    }

    /// Runs the copy and retention tasks every task interval until shutdown.
    pub async fn run(self: Arc<Self>, broker: Arc<Broker>, mut shutdown: watch::Receiver<bool>) {
        // Load every tiered partition's metadata before the first copy, so
        // reads of remote data are served as soon as it is loaded.
        {
            let rlm = Arc::clone(&self);
            let broker = Arc::clone(&broker);
            let _ = crate::blocking::run(move || rlm.before_first_pass(&broker)).await;
        }
        let mut tick = tokio::time::interval(self.settings.task_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let rlm = Arc::clone(&self);
                    let passing = Arc::clone(&broker);
                    let pass = crate::blocking::run(move || rlm.run_once(&passing));
                    tokio::pin!(pass);
                    tokio::select! {
                        _ = &mut pass => {}
                        _ = shutdown.changed() => {
                            // Finish the segment being copied, skip the rest.
                            self.stopping.store(true, std::sync::atomic::Ordering::Release);
                            let _ = pass.await;
                            break;
                        }
                    }
                    // Diskless partitions' cold batches, when enabled.
                    let consolidation = crate::diskless::consolidate::run_pass(&broker, &self);
                    tokio::select! {
                        () = consolidation => {}
                        _ = shutdown.changed() => break,
                    }
                }
                _ = shutdown.changed() => break,
            }
        }
        // Persist the metadata manager's state (e.g. its snapshot cache) so
        // the next start loads it quickly.
        let rlm = Arc::clone(&self);
        let _ = crate::blocking::run(move || {
            if let Err(e) = rlm.metadata.close() {
                tracing::warn!(error = %e, "closing the remote log metadata manager failed");
            }
        })
        .await;
    }

    fn stopping(&self) -> bool {
        self.stopping.load(std::sync::atomic::Ordering::Acquire)
    }

    /// What a start does before the first pass: forgets a disable that
    /// never finished, and loads the metadata of every tiered partition.
    /// Blocking.
    pub(crate) fn before_first_pass(&self, broker: &Broker) {
        self.drop_unfinished_disables(broker);
        self.prepare_all(broker);
    }

    /// One pass of the tasks over every tiered partition. Blocking.
    pub fn run_once(&self, broker: &Broker) {
        self.process_pending_deletions(broker);
        for p in broker.partitions.all() {
            if self.stopping() {
                return;
            }
            let Some(meta) = broker.registry.get(&p.topic) else {
                continue;
            };
            if !is_tiered(broker, &meta.configs, "remote.storage.enable") {
                continue;
            }
            if let Err(e) = self.run_partition(broker, &p, &meta.configs) {
                tracing::warn!(partition = ?p, error = %e, "remote log manager task failed");
            }
        }
    }

    /// Assigns every tiered partition to the metadata manager in one call
    /// (one look at the metadata topic's ends for all of them), then loads
    /// each. Blocking.
    fn prepare_all(&self, broker: &Broker) {
        let started = Instant::now();
        let partitions: Vec<Arc<Partition>> = broker
            .partitions
            .all()
            .into_iter()
            .filter(|p| Self::is_tiered(broker, p))
            .collect();
        if partitions.is_empty() {
            return;
        }
        let tps: Vec<TopicIdPartition> = partitions.iter().map(|p| Self::tip(p)).collect();
        if let Err(e) = self.metadata.on_partition_leadership_changes(&tps, &[]) {
            tracing::warn!(error = %e, "assigning tiered partitions to the metadata manager failed");
            return;
        }
        for (p, tp) in partitions.iter().zip(&tps) {
            let mut state = self.partition_state(p);
            if let Err(e) = self.prepare(p, tp, &mut state) {
                tracing::warn!(partition = ?p, error = %e, "loading remote log metadata failed; the task retries");
            }
        }
        tracing::info!(
            partitions = partitions.len(),
            elapsed_ms = started.elapsed().as_millis(),
            "remote log metadata loaded"
        );
    }

    fn tip(p: &Partition) -> TopicIdPartition {
        TopicIdPartition::new(p.topic_id, p.topic.clone(), p.index)
    }

    fn run_partition(
        &self,
        broker: &Broker,
        p: &Partition,
        configs: &BTreeMap<String, String>,
    ) -> Result<(), RemoteStorageError> {
        let tp = Self::tip(p);
        let mut state = self.partition_state(p);
        // While backing off, the remote tier is left alone entirely: the
        // clean-up of a failed copy needs it as much as the copy does.
        let backing_off = state.retry_at.is_some_and(|t| Instant::now() < t);
        if !state.prepared && !backing_off {
            let mut fresh = state.clone();
            match self.prepare(p, &tp, &mut fresh) {
                Ok(()) => state = fresh,
                Err(e) => {
                    self.back_off(p, &mut state, &e, "preparing the partition failed");
                    self.set_partition_state(p, state);
                    return Ok(());
                }
            }
        }
        if !state.prepared {
            // Backing off before the clean-up: nothing is copied or deleted.
            return Ok(());
        }
        let copy_disabled = is_tiered(broker, configs, "remote.log.copy.disable");
        if !copy_disabled && !backing_off {
            match self.copy_pending(p, &tp) {
                Ok(()) => {
                    state.failures = 0;
                    state.retry_at = None;
                }
                Err(e) => {
                    metrics::copy_failed(&p.topic);
                    self.back_off(p, &mut state, &e, "segment copy failed");
                    // The failed copy is left in COPY_SEGMENT_STARTED; clean it
                    // (and redo it) at the next attempt.
                    state.prepared = false;
                }
            }
        }
        // Publish the remote start before local retention moves the local
        // one past it, so ListOffsets and Fetch never see a gap.
        self.refresh(p, &tp)?;
        self.set_partition_state(p, state.clone());
        let retention = Retention::from_raw(
            long_setting(broker, configs, "retention.ms"),
            long_setting(broker, configs, "retention.bytes"),
            long_setting(broker, configs, "local.retention.ms"),
            long_setting(broker, configs, "local.retention.bytes"),
        );
        self.apply_local_retention(p, retention);
        self.apply_total_retention(p, &tp, retention)?;
        self.delete_below_log_start(p, &tp)?;
        self.refresh(p, &tp)?;
        self.publish_gauges(p, &tp)?;
        self.set_partition_state(p, state);
        Ok(())
    }

    /// Loads a partition's remote metadata (assigning it to the metadata
    /// manager and waiting until it is ready), cleans up what an earlier run
    /// left unfinished, and publishes its remote start.
    fn prepare(
        &self,
        p: &Partition,
        tp: &TopicIdPartition,
        state: &mut PartitionState,
    ) -> Result<(), RemoteStorageError> {
        self.metadata
            .on_partition_leadership_changes(std::slice::from_ref(tp), &[])?;
        let waited = Instant::now();
        while !self.metadata.is_ready(tp) {
            if waited.elapsed() > Duration::from_secs(30) || self.stopping() {
                return Err(backend(format!("metadata of {tp} not ready")));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        self.clean_unfinished(tp)?;
        state.prepared = true;
        self.refresh(p, tp)?;
        self.set_partition_state(p, state.clone());
        Ok(())
    }

    /// Records a failure of the remote tier: no remote work on the
    /// partition until an exponentially growing back-off
    /// (`remote.log.manager.task.retry.backoff.ms`, doubling up to
    /// `remote.log.manager.task.retry.backoff.max.ms`) has passed.
    fn back_off(
        &self,
        p: &Partition,
        state: &mut PartitionState,
        e: &RemoteStorageError,
        what: &str,
    ) {
        state.failures = state.failures.saturating_add(1);
        let backoff = self
            .settings
            .retry_backoff
            .saturating_mul(2u32.saturating_pow(state.failures.saturating_sub(1).min(16)))
            .min(self.settings.retry_backoff_max);
        state.retry_at = Some(Instant::now() + backoff);
        tracing::warn!(partition = ?p, error = %e, ?backoff, failures = state.failures, "{what}; retrying later");
    }

    /// Re-reads the remote start and highest offset from the (loaded)
    /// metadata manager and publishes them into the partition.
    fn refresh(&self, p: &Partition, tp: &TopicIdPartition) -> Result<(), RemoteStorageError> {
        let finished: Vec<_> = self
            .metadata
            .list_remote_log_segments(tp)?
            .into_iter()
            .filter(|m| m.state() == RemoteLogSegmentState::CopySegmentFinished)
            .collect();
        p.publish_tier_offsets(TierOffsets {
            loaded: true,
            remote_start: finished
                .iter()
                .map(RemoteLogSegmentMetadata::start_offset)
                .min(),
            highest_tiered: finished
                .iter()
                .map(RemoteLogSegmentMetadata::end_offset)
                .max(),
        });
        Ok(())
    }

    /// Deletes (through the lifecycle) every segment an earlier run left
    /// half copied or half deleted.
    fn clean_unfinished(&self, tp: &TopicIdPartition) -> Result<(), RemoteStorageError> {
        for m in self.metadata.list_remote_log_segments(tp)? {
            match m.state() {
                RemoteLogSegmentState::CopySegmentStarted => {
                    tracing::info!(segment = %m.remote_log_segment_id(), "cleaning up an unfinished copy");
                    self.delete_remote(&m, true)?;
                }
                RemoteLogSegmentState::DeleteSegmentStarted => self.delete_remote(&m, false)?,
                _ => {}
            }
        }
        Ok(())
    }

    fn update(
        &self,
        m: &RemoteLogSegmentMetadata,
        state: RemoteLogSegmentState,
        custom: Option<krabka_remote_storage::CustomMetadata>,
    ) -> Result<(), RemoteStorageError> {
        self.metadata
            .update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate::new(
                m.remote_log_segment_id().clone(),
                now_ms(),
                custom,
                state,
                self.broker_id,
            ))
    }

    /// DELETE_SEGMENT_STARTED (unless already there) → delete → DELETE_SEGMENT_FINISHED.
    fn delete_remote(
        &self,
        m: &RemoteLogSegmentMetadata,
        start: bool,
    ) -> Result<(), RemoteStorageError> {
        if start {
            self.update(m, RemoteLogSegmentState::DeleteSegmentStarted, None)?;
        }
        if self.archive {
            // A write-once archive refuses deletes; its objects stay until the
            // bucket's retention expires, and only the metadata is retired.
            tracing::info!(segment = %m.remote_log_segment_id(), "segment retired; its archive objects stay under bucket retention");
        } else {
            if let Err(e) = self.storage.delete_log_segment_data(m) {
                metrics::delete_failed(m.topic_id_partition().topic());
                return Err(e);
            }
            metrics::delete_done(m.topic_id_partition().topic());
        }
        self.index_cache.remove_segment(m.remote_log_segment_id());
        self.update(m, RemoteLogSegmentState::DeleteSegmentFinished, None)
    }

    fn local_segments(p: &Partition) -> Vec<LocalSegment> {
        p.local_log()
            .segments()
            .into_iter()
            .map(|s| LocalSegment {
                base_offset: s.base_offset,
                end_offset: s.end_offset,
                size_bytes: s.size_bytes,
                max_timestamp: s.max_timestamp,
                active: s.active,
            })
            .collect()
    }

    /// One past the highest offset in the tier.
    fn next_to_copy(p: &Partition) -> i64 {
        p.tier_offsets().highest_tiered.map_or(0, |h| h + 1)
    }

    fn copy_pending(&self, p: &Partition, tp: &TopicIdPartition) -> Result<(), RemoteStorageError> {
        // A chain head whose publication failed earlier goes out first.
        self.publish_chain_head(tp)?;
        for segment in p.local_log().tierable_segments(Self::next_to_copy(p)) {
            if self.stopping() {
                break;
            }
            self.copy_segment(p, tp, &segment)?;
        }
        Ok(())
    }

    fn copy_segment(
        &self,
        p: &Partition,
        tp: &TopicIdPartition,
        segment: &krabka_log::TierableSegment,
    ) -> Result<(), RemoteStorageError> {
        let info = &segment.segment;
        let (base, end) = (info.base_offset, info.end_offset);
        let mut segment_epochs = segment.segment_epochs();
        if segment_epochs.is_empty() {
            segment_epochs.insert(LEADER_EPOCH, base);
        }
        let data = LogSegmentData {
            log_segment: info.log_path.clone(),
            offset_index: info.offset_index_path.clone(),
            time_index: info.time_index_path.clone(),
            transaction_index: (segment.txn_index_bytes > 0).then(|| info.txn_index_path.clone()),
            producer_snapshot_index: segment.producer_snapshot.clone(),
            leader_epoch_index: Bytes::from(segment.leader_epoch_checkpoint()),
        };
        self.copy_files(
            tp,
            SegmentToCopy {
                base,
                end,
                max_timestamp: info.max_timestamp,
                size_bytes: info.size_bytes,
                epochs: segment_epochs,
                data,
            },
        )?;
        tracing::debug!(partition = ?p, base, end, "copied segment to the remote tier");
        Ok(())
    }

    /// Copies one segment's files through the metadata lifecycle
    /// (`COPY_SEGMENT_STARTED` → copy → `COPY_SEGMENT_FINISHED`) and
    /// publishes the chain head in archive mode; answers the finished
    /// segment's metadata. Blocking.
    ///
    /// # Errors
    ///
    /// The tier's or the metadata manager's error; the segment is then left
    /// in `COPY_SEGMENT_STARTED` for the clean-up of unfinished copies.
    pub(crate) fn copy_files(
        &self,
        tp: &TopicIdPartition,
        segment: SegmentToCopy,
    ) -> Result<RemoteLogSegmentMetadata, RemoteStorageError> {
        let size = i32::try_from(segment.size_bytes).map_err(|_| {
            backend(format!(
                "segment {} too large",
                segment.data.log_segment.display()
            ))
        })?;
        let details = RemoteLogSegmentDetails::new(
            size,
            RemoteLogSegmentState::CopySegmentStarted,
            segment.epochs,
        )
        .with_txn_idx_empty(segment.data.transaction_index.is_none());
        let metadata = RemoteLogSegmentMetadata::new(
            RemoteLogSegmentId::generate_new(tp.clone()),
            segment.base,
            segment.end - 1,
            segment.max_timestamp,
            self.broker_id,
            now_ms(),
            details,
        )?;
        let _copying = Copying::new(self, metadata.remote_log_segment_id().id());
        self.copy_started(tp, &metadata, &segment.data, segment.size_bytes)
    }

    fn copying_now(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<uuid::Uuid>> {
        self.copying.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether this broker is copying segment `id` right now.
    pub(crate) fn is_copying(&self, id: uuid::Uuid) -> bool {
        self.copying_now().contains(&id)
    }

    /// The lifecycle of [`Self::copy_files`] from `COPY_SEGMENT_STARTED` on.
    fn copy_started(
        &self,
        tp: &TopicIdPartition,
        metadata: &RemoteLogSegmentMetadata,
        data: &LogSegmentData,
        size_bytes: u64,
    ) -> Result<RemoteLogSegmentMetadata, RemoteStorageError> {
        self.metadata
            .add_remote_log_segment_metadata(metadata.clone())?;
        let custom = self.storage.copy_log_segment_data(metadata, data)?;
        let finished = RemoteLogSegmentMetadataUpdate::new(
            metadata.remote_log_segment_id().clone(),
            now_ms(),
            custom,
            RemoteLogSegmentState::CopySegmentFinished,
            self.broker_id,
        );
        if let Err(e) = self
            .metadata
            .update_remote_log_segment_metadata(finished.clone())
        {
            self.drop_refused_copy(metadata, &e);
            return Err(e);
        }
        metrics::copy_done(tp.topic(), size_bytes);
        self.publish_chain_head(tp)?;
        // What the tier holds now, as a reader will find it.
        metadata.create_with_updates(&finished)
    }

    /// Deletes the data of a copy whose `COPY_SEGMENT_FINISHED` the
    /// metadata refused for good: its partition was deleted, or its segment
    /// deleted, while it uploaded, and no metadata is left to find the data
    /// by. Any other error (the metadata unreachable, say) keeps the data,
    /// since the update may have landed after all.
    fn drop_refused_copy(&self, metadata: &RemoteLogSegmentMetadata, refusal: &RemoteStorageError) {
        let for_good = matches!(
            refusal,
            RemoteStorageError::PartitionDeleted { .. }
                | RemoteStorageError::IllegalStateTransition { .. }
        );
        if !for_good || self.archive {
            return;
        }
        match self.storage.delete_log_segment_data(metadata) {
            Ok(()) => {
                tracing::info!(segment = %metadata.remote_log_segment_id(), reason = %refusal, "deleted a copy its metadata refused");
            }
            Err(e) => {
                tracing::warn!(segment = %metadata.remote_log_segment_id(), reason = %refusal, error = %e, "cannot delete a copy its metadata refused");
            }
        }
    }

    /// In archive mode, publishes the partition's newest chain head into
    /// the metadata topic (see [`worm`]).
    fn publish_chain_head(&self, tp: &TopicIdPartition) -> Result<(), RemoteStorageError> {
        match &self.chain_heads {
            Some(publisher) => publisher.sync(tp).map(|_| ()),
            None => Ok(()),
        }
    }

    fn apply_local_retention(&self, p: &Partition, retention: Retention) {
        let plain = Self::local_segments(p);
        let n =
            policy::local_segments_to_delete(&plain, Self::next_to_copy(p), retention, now_ms());
        let Some(last) = n.checked_sub(1).and_then(|i| plain.get(i)) else {
            return;
        };
        match p.local_log().delete_local_segments_below(last.end_offset) {
            Ok(_) => {
                tracing::info!(partition = ?p, segments = n, local_log_start = last.end_offset, "local retention deleted tiered segments")
            }
            Err(e) => tracing::warn!(partition = ?p, error = %e, "local retention failed"),
        }
    }

    fn apply_total_retention(
        &self,
        p: &Partition,
        tp: &TopicIdPartition,
        retention: Retention,
    ) -> Result<(), RemoteStorageError> {
        let finished: Vec<RemoteLogSegmentMetadata> = self
            .metadata
            .list_remote_log_segments(tp)?
            .into_iter()
            .filter(|m| m.state() == RemoteLogSegmentState::CopySegmentFinished)
            .collect();
        let remote: Vec<RemoteSegment> = finished.iter().map(RemoteSegment::of).collect();
        let next = Self::next_to_copy(p);
        let local_only: u64 = p
            .local_log()
            .segments()
            .iter()
            .filter(|s| s.base_offset >= next)
            .map(|s| s.size_bytes)
            .sum();
        let n = policy::remote_segments_to_delete(&remote, local_only, retention, now_ms());
        let mut new_start = None;
        for m in finished.iter().take(n) {
            self.delete_remote(m, true)?;
            new_start = Some(m.end_offset() + 1);
        }
        // Offsets gone from the remote tier are gone from the log: local copies
        // of them (if local retention kept any) go too.
        let log = p.local_log();
        if let Some(start) = new_start
            && start > log.log_start_offset()
            && let Err(e) = log.advance_log_start_offset(start.min(log.log_end_offset()))
        {
            tracing::warn!(partition = ?p, error = %e, "advancing the log start after remote retention failed");
        }
        if n > 0 {
            tracing::info!(partition = ?p, segments = n, "total retention deleted remote segments");
        }
        Ok(())
    }

    fn find_segment(
        &self,
        tp: &TopicIdPartition,
        offset: i64,
    ) -> Result<RemoteLogSegmentMetadata, RemoteStorageError> {
        // The epoch lookup Kafka uses first; a log whose epochs below the local
        // start were truncated falls back to the offset ranges.
        let epoch: LeaderEpoch = LEADER_EPOCH;
        if let Some(m) = self
            .metadata
            .remote_log_segment_metadata(tp, epoch, offset)?
        {
            return Ok(m);
        }
        self.metadata
            .list_remote_log_segments(tp)?
            .into_iter()
            .find(|m| {
                m.state() == RemoteLogSegmentState::CopySegmentFinished
                    && m.start_offset() <= offset
                    && offset <= m.end_offset()
            })
            .ok_or_else(|| backend(format!("no remote segment of {tp} holds offset {offset}")))
    }

    fn read_blocking(
        &self,
        tp: &TopicIdPartition,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<Bytes, RemoteStorageError> {
        let m = self.find_segment(tp, offset)?;
        let (index, _) = self.index_cache.get(&m, IndexType::Offset)?;
        let entries = parse_offset_index(&index)?;
        let relative = LogOffset(offset)
            .relative_to(LogOffset(m.start_offset()))
            .ok_or_else(|| backend(format!("offset {offset} outside its segment")))?;
        let start = position_for_relative_offset(&entries, relative);
        let size = u32::try_from(m.segment_size_in_bytes()).unwrap_or(0);
        if start.0 >= size {
            return Ok(Bytes::new());
        }
        let want = u32::try_from(max_bytes.max(MIN_REMOTE_READ)).unwrap_or(u32::MAX);
        let end = start.0.saturating_add(want).min(size).saturating_sub(1);
        let chunk = self
            .storage
            .fetch_log_segment(&m, start, Some(BytePosition(end)))?;
        let mut at = 0usize;
        let mut first: Option<usize> = None;
        let mut last_end = 0usize;
        while let Some(header) = chunk.get(at..at + 27) {
            let len_field = header
                .get(8..12)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map(i32::from_be_bytes)
                .unwrap_or(-1);
            let base = header
                .get(0..8)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map(i64::from_be_bytes)
                .unwrap_or(-1);
            let delta = header
                .get(23..27)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map(i32::from_be_bytes)
                .unwrap_or(-1);
            let Ok(len) = usize::try_from(len_field) else {
                return Err(backend(format!(
                    "corrupt batch in remote segment {}",
                    m.remote_log_segment_id()
                )));
            };
            let total = 12 + len;
            let last = base + i64::from(delta);
            if first.is_none() && last < offset {
                at += total;
                continue;
            }
            let taken = first.map_or(0, |f| last_end - f);
            if at + total > chunk.len() {
                if first.is_none() && min_one_batch {
                    // The first batch is larger than the read: fetch exactly it.
                    let from = start
                        .0
                        .saturating_add(u32::try_from(at).unwrap_or(u32::MAX));
                    let to = from
                        .saturating_add(u32::try_from(total).unwrap_or(u32::MAX))
                        .saturating_sub(1);
                    return self.storage.fetch_log_segment(
                        &m,
                        BytePosition(from),
                        Some(BytePosition(to)),
                    );
                }
                break;
            }
            if taken + total > max_bytes && !(first.is_none() && min_one_batch) {
                break;
            }
            first.get_or_insert(at);
            at += total;
            last_end = at;
        }
        Ok(first.map_or_else(Bytes::new, |f| chunk.slice(f..last_end)))
    }
}

#[cfg(test)]
pub(crate) mod tests;
