//! Diskless topics on this broker (KIP-1150, DESIGN.md "Diskless topics"):
//! the settings, the shared runtime every diskless partition uses, and
//! [`DisklessStorage`], the diskless implementation of the partition
//! storage seam.
//!
//! The library pieces live in `krabka_remote_storage::diskless`; this module
//! wires them to the broker. One [`DisklessRuntime`] per broker holds the
//! batch coordinator (behind the `BatchCoordinator` trait; on a single node
//! the journaled [`InMemoryBatchCoordinator`] under the log directory), the
//! object store with its cache, and the one [`ObjectWriter`] all diskless
//! produce goes through. It starts when the first diskless partition opens,
//! so a broker without diskless topics creates nothing and a single node
//! needs no setting at all: the store is a directory under the log dir.

pub mod consolidate;
mod leader;
mod storage;
#[cfg(test)]
mod tests;

pub use leader::{ReportedHere, reported_leader};

pub use storage::DisklessStorage;

use {
    crate::{config::BrokerConfig, error::BrokerError},
    krabka_ids::BrokerId,
    krabka_object_store::ObjectStoreConfig,
    krabka_remote_storage::diskless::{
        BatchCoordinator, DisklessPartition, DisklessStore, InMemoryBatchCoordinator, ObjectCache,
        ObjectWriter, OnCommit, WriterConfig,
    },
    std::{
        collections::HashMap,
        path::PathBuf,
        sync::{Arc, Mutex, PoisonError, RwLock, Weak},
        time::Duration,
    },
    tokio::sync::Notify,
};

/// The prefix of the diskless object store's own settings, which take the
/// names the remote tier's `rsm.config.` settings take
/// (`krabka.diskless.storage.config.s3.bucket`, ...).
pub const STORAGE_CONFIG_PREFIX: &str = "krabka.diskless.storage.config.";
/// The default filesystem store under the log directory.
pub const DEFAULT_STORE_DIR: &str = "krabka-diskless";
/// The default directory of the embedded batch coordinator.
pub const DEFAULT_COORDINATOR_DIR: &str = "krabka-diskless-coordinator";

/// Where diskless objects are stored.
#[derive(Debug, Clone)]
pub enum StoreChoice {
    /// A local directory (a single node, or brokers sharing one machine).
    Filesystem(PathBuf),
    /// S3 or GCS, configured as the remote tier's object stores are.
    Object(Box<ObjectStoreConfig>),
}

/// The broker settings of diskless topics.
#[derive(Debug, Clone)]
pub struct DisklessSettings {
    /// `krabka.diskless.storage` and its settings.
    pub store: StoreChoice,
    /// The embedded batch coordinator's directory.
    pub coordinator_dir: PathBuf,
    /// `diskless.object.max.bytes`.
    pub max_object_bytes: usize,
    /// `diskless.commit.interval.ms`.
    pub commit_interval: Duration,
    /// `diskless.upload.parallelism`.
    pub upload_parallelism: usize,
    /// `diskless.fetch.cache.bytes`.
    pub cache_bytes: u64,
    /// `diskless.cleaner.grace.period.ms`.
    pub cleaner_grace: Duration,
    /// `diskless.cleaner.interval.ms`.
    pub cleaner_interval: Duration,
    /// `diskless.cleaner.orphan.interval.ms`: how often the store is
    /// swept for orphans, and how old an object must be to be one.
    pub orphan_interval: Duration,
    /// `diskless.consolidation.enable`: cold batches become tiered
    /// segments ([`consolidate`]).
    pub consolidation: bool,
    /// This broker, the uploader of its objects.
    pub broker: BrokerId,
    /// The cluster's id: objects go under `diskless/<cluster id>/`, the
    /// one directory the orphan sweep lists. Set by the broker once known.
    pub cluster_id: String,
}

impl DisklessSettings {
    /// Reads the settings from the validated configuration (types and
    /// ranges were checked by the table in `config::defs`).
    ///
    /// # Errors
    ///
    /// [`BrokerError::Config`] when the object store's settings do not fit
    /// the chosen store (a bucket missing, another store's settings given).
    pub fn from_config(config: &BrokerConfig) -> Result<Self, BrokerError> {
        let text = |name: &str| {
            config
                .static_value(name)
                .0
                .unwrap_or_default()
                .trim()
                .to_owned()
        };
        let number = |name: &str| -> Result<u64, BrokerError> {
            text(name).parse().map_err(|_| {
                BrokerError::Config(format!("setting {name} must be a non-negative number"))
            })
        };
        let dir_or = |name: &str, default: &str| {
            let dir = text(name);
            if dir.is_empty() {
                config.log_dir.join(default)
            } else {
                PathBuf::from(dir)
            }
        };
        let reader = crate::remote::backend::Reader::new(config, STORAGE_CONFIG_PREFIX);
        let store = match text("krabka.diskless.storage")
            .to_ascii_lowercase()
            .as_str()
        {
            "s3" => {
                reader.refuse_family("gcs.", "s3")?;
                StoreChoice::Object(Box::new(ObjectStoreConfig::S3(reader.s3()?)))
            }
            "gcs" => {
                reader.refuse_family("s3.", "gcs")?;
                StoreChoice::Object(Box::new(ObjectStoreConfig::Gcs(reader.gcs()?)))
            }
            _ => {
                for family in [
                    "s3.",
                    "gcs.",
                    "worm.",
                    "multipart.",
                    "retr",
                    "request.",
                    "connect.",
                ] {
                    reader.refuse_family(family, "filesystem")?;
                }
                StoreChoice::Filesystem(dir_or("krabka.diskless.storage.dir", DEFAULT_STORE_DIR))
            }
        };
        let consolidation = text("diskless.consolidation.enable").eq_ignore_ascii_case("true");
        if consolidation && !crate::remote::settings::system_enabled(config) {
            return Err(BrokerError::Config(
                "setting diskless.consolidation.enable=true needs remote.log.storage.system.enable=true: consolidated segments go to the remote tier".into(),
            ));
        }
        if reader.text("worm.enable").eq_ignore_ascii_case("true") {
            return Err(BrokerError::Config(format!(
                "setting {STORAGE_CONFIG_PREFIX}worm.enable does not apply: diskless objects are deleted by the cleaner"
            )));
        }
        Ok(Self {
            store,
            coordinator_dir: dir_or("krabka.diskless.coordinator.dir", DEFAULT_COORDINATOR_DIR),
            max_object_bytes: usize::try_from(number("diskless.object.max.bytes")?)
                .unwrap_or(usize::MAX)
                .max(1),
            commit_interval: Duration::from_millis(number("diskless.commit.interval.ms")?.max(1)),
            upload_parallelism: usize::try_from(number("diskless.upload.parallelism")?)
                .unwrap_or(1)
                .max(1),
            cache_bytes: number("diskless.fetch.cache.bytes")?,
            cleaner_grace: Duration::from_millis(number("diskless.cleaner.grace.period.ms")?),
            cleaner_interval: Duration::from_millis(number("diskless.cleaner.interval.ms")?.max(1)),
            orphan_interval: Duration::from_millis(
                number("diskless.cleaner.orphan.interval.ms")?.max(1),
            ),
            consolidation,
            broker: BrokerId(config.node_id),
            cluster_id: String::new(),
        })
    }

    /// The same settings for the cluster `cluster_id`.
    #[must_use]
    pub fn for_cluster(mut self, cluster_id: &str) -> Self {
        cluster_id.clone_into(&mut self.cluster_id);
        self
    }

    /// The key prefix inside the bucket (the filesystem store has none).
    fn key_prefix(&self) -> String {
        match &self.store {
            StoreChoice::Filesystem(_) => String::new(),
            StoreChoice::Object(c) => c.prefix().to_owned(),
        }
    }
}

/// Kafka's cross-setting checks of a diskless topic, given its effective
/// values.
///
/// # Errors
///
/// The reason, for `INVALID_CONFIG`.
pub fn validate_topic(effective: &dyn Fn(&str) -> Option<String>) -> Result<(), String> {
    let flag = |name: &str| effective(name).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    if !flag("diskless.enable") {
        return Ok(());
    }
    if flag("remote.storage.enable") {
        return Err("diskless.enable=true cannot be combined with remote.storage.enable=true: a diskless topic already keeps all of its data in object storage.".into());
    }
    if effective("cleanup.policy").is_some_and(|v| {
        v.split(',')
            .any(|p| p.trim().eq_ignore_ascii_case("compact"))
    }) {
        return Err("diskless.enable=true cannot be combined with cleanup.policy=compact: diskless topics support only cleanup.policy=delete.".into());
    }
    Ok(())
}

/// Partitions' wake-ups, by coordinator id: a commit wakes the fetches
/// parked on the partitions it touched.
type Waiters = RwLock<HashMap<DisklessPartition, Weak<Notify>>>;

/// What every diskless partition of this broker shares.
pub struct DisklessRuntime {
    /// The batch coordinator.
    pub coordinator: Arc<dyn BatchCoordinator>,
    /// The object store, read through the cache.
    pub store: DisklessStore,
    writer: Mutex<Option<Arc<ObjectWriter>>>,
    waiters: Arc<Waiters>,
    settings: DisklessSettings,
    /// The remote tier, which holds consolidated segments.
    remote: crate::partition::RemoteSlot,
    /// When the store was last swept for orphans (none yet: the first
    /// housekeeping pass sweeps, catching what a crash left).
    last_sweep: Mutex<Option<tokio::time::Instant>>,
}

impl std::fmt::Debug for DisklessRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DisklessRuntime")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl DisklessRuntime {
    /// Opens the embedded coordinator and the store and starts the writer.
    /// Blocking (the coordinator replays its journal); must be called within
    /// a tokio runtime.
    ///
    /// # Errors
    ///
    /// [`BrokerError`] when the coordinator's directory cannot be read or
    /// is damaged, or the store cannot be created.
    pub fn start(
        settings: DisklessSettings,
        remote: crate::partition::RemoteSlot,
    ) -> Result<Arc<Self>, BrokerError> {
        let coordinator =
            InMemoryBatchCoordinator::open(&settings.coordinator_dir).map_err(|e| {
                BrokerError::Task(format!(
                    "diskless batch coordinator in {}: {e}",
                    settings.coordinator_dir.display()
                ))
            })?;
        Self::start_with(settings, Arc::new(coordinator), remote)
    }

    /// As [`DisklessRuntime::start`], on a given coordinator (the seam a
    /// cluster's PostgreSQL coordinator plugs into).
    ///
    /// # Errors
    ///
    /// [`BrokerError`] when the store cannot be created.
    pub fn start_with(
        settings: DisklessSettings,
        coordinator: Arc<dyn BatchCoordinator>,
        remote: crate::partition::RemoteSlot,
    ) -> Result<Arc<Self>, BrokerError> {
        let object_store: Arc<dyn object_store::ObjectStore> = match &settings.store {
            StoreChoice::Filesystem(dir) => {
                std::fs::create_dir_all(dir).map_err(|source| BrokerError::Io {
                    action: "create diskless store directory",
                    path: dir.clone(),
                    source,
                })?;
                Arc::new(
                    object_store::local::LocalFileSystem::new_with_prefix(dir)
                        .map_err(|e| {
                            BrokerError::Config(format!("diskless store {}: {e}", dir.display()))
                        })?
                        .with_automatic_cleanup(true)
                        // An object is durable before its batches are committed.
                        .with_fsync(true),
                )
            }
            StoreChoice::Object(config) => config.build().map_err(|e| {
                BrokerError::Config(format!("diskless store {}: {e}", config.describe()))
            })?,
        };
        let written = settings.cache_bytes / 4 * 3;
        let cache = Arc::new(ObjectCache::new(written, settings.cache_bytes - written));
        let store = DisklessStore::new(object_store, &settings.key_prefix(), cache)
            .for_cluster(&settings.cluster_id);
        let waiters: Arc<Waiters> = Arc::default();
        let on_commit: OnCommit = {
            let waiters = Arc::clone(&waiters);
            Arc::new(move |touched: &[DisklessPartition]| {
                let waiters = waiters.read().unwrap_or_else(PoisonError::into_inner);
                for p in touched {
                    if let Some(notify) = waiters.get(p).and_then(Weak::upgrade) {
                        notify.notify_waiters();
                    }
                }
            })
        };
        let writer = ObjectWriter::start(
            WriterConfig {
                uploader: settings.broker,
                max_object_bytes: settings.max_object_bytes,
                commit_interval: settings.commit_interval,
                upload_parallelism: settings.upload_parallelism,
            },
            store.clone(),
            Arc::clone(&coordinator),
            on_commit,
        );
        tracing::info!(store = ?settings.store, coordinator = %settings.coordinator_dir.display(), "diskless topics started");
        Ok(Arc::new(Self {
            coordinator,
            store,
            writer: Mutex::new(Some(Arc::new(writer))),
            waiters,
            settings,
            remote,
            last_sweep: Mutex::new(None),
        }))
    }

    /// The writer, until [`DisklessRuntime::stop`].
    fn writer(&self) -> Option<Arc<ObjectWriter>> {
        self.writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Wakes the fetches parked on the partitions `wake` names (a commit
    /// made through another broker of the cluster).
    pub fn wake(&self, wake: &krabka_cluster::notify::CommitWake) {
        let waiters = self.waiters.read().unwrap_or_else(PoisonError::into_inner);
        let wake_one = |notify: &Weak<Notify>| {
            if let Some(notify) = notify.upgrade() {
                notify.notify_waiters();
            }
        };
        match wake {
            krabka_cluster::notify::CommitWake::All => waiters.values().for_each(wake_one),
            krabka_cluster::notify::CommitWake::Partitions(touched) => {
                touched
                    .iter()
                    .filter_map(|p| waiters.get(p))
                    .for_each(wake_one);
            }
        }
    }

    /// Registers the wake-up of a partition.
    fn watch(&self, partition: DisklessPartition, notify: &Arc<Notify>) {
        let mut waiters = self.waiters.write().unwrap_or_else(PoisonError::into_inner);
        waiters.retain(|_, w| w.strong_count() > 0);
        waiters.insert(partition, Arc::downgrade(notify));
    }

    /// The remote log manager, when the remote tier is up.
    #[must_use]
    pub fn remote(&self) -> Option<Arc<crate::remote::RemoteLogManager>> {
        self.remote.get().cloned()
    }

    /// The settings the runtime runs with.
    #[must_use]
    pub fn settings(&self) -> &DisklessSettings {
        &self.settings
    }

    /// Commits what is pending and stops the writer: produce to diskless
    /// partitions is refused from now on.
    pub async fn stop(&self) {
        let writer = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(mut writer) = writer else {
            return;
        };
        // Appends in flight hold a clone for a moment.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            match Arc::try_unwrap(writer) {
                Ok(owned) => {
                    owned.stop().await;
                    return;
                }
                Err(shared) if tokio::time::Instant::now() < deadline => {
                    writer = shared;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(_) => {
                    tracing::warn!(
                        "diskless writer still in use at shutdown; pending batches are answered as failed"
                    );
                    return;
                }
            }
        }
    }

    /// Forgets the idempotent producers of every diskless partition whose
    /// last batch is older than `expiration_ms` (`producer.id.expiration.ms`,
    /// measured as for classic partitions: from the batch's largest
    /// timestamp to now). In a cluster every broker may run it: it is one
    /// idempotent call on the shared coordinator.
    pub async fn expire_producers(&self, expiration_ms: u64) {
        let idle_before = now_ms().saturating_sub(i64::try_from(expiration_ms).unwrap_or(i64::MAX));
        match self.coordinator.expire_producers(idle_before).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(removed = n, "expired diskless producer ids"),
            Err(e) => tracing::warn!(error = %e, "expiring diskless producer ids failed"),
        }
    }

    /// One pass of retention over `partitions` (their policies), then the
    /// cleaner: objects dead for the grace period are deleted.
    pub async fn housekeeping(&self, partitions: &[Arc<DisklessStorage>]) {
        let now = now_ms();
        let policies: Vec<_> = partitions.iter().map(|p| p.retention_policy()).collect();
        if !policies.is_empty() {
            match self.coordinator.enforce_retention(&policies, now).await {
                Ok(outcomes) => {
                    for (p, outcome) in partitions.iter().zip(outcomes) {
                        match outcome {
                            Ok(o) if o.batches_deleted > 0 => {
                                tracing::info!(partition = ?p, batches = o.batches_deleted, bytes = o.bytes_deleted, log_start = o.log_start_offset, "diskless retention deleted batches");
                                p.refresh().await;
                            }
                            Ok(_) => {}
                            Err(e) => {
                                tracing::debug!(partition = ?p, error = %e, "diskless retention skipped")
                            }
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "diskless retention failed"),
            }
        }
        match krabka_remote_storage::diskless::clean_once(
            self.coordinator.as_ref(),
            &self.store,
            self.settings.cleaner_grace,
            now,
        )
        .await
        {
            Ok(pass) if pass.deleted > 0 || pass.failed > 0 => {
                tracing::info!(
                    deleted = pass.deleted,
                    failed = pass.failed,
                    "diskless cleaner pass"
                );
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "diskless cleaner failed"),
        }
        self.sweep_if_due(now).await;
    }

    /// Sweeps the store for orphans once every `orphan_interval`: objects
    /// older than that interval the coordinator does not know. In a cluster
    /// every broker sweeps; recording an orphan is idempotent.
    async fn sweep_if_due(&self, now: i64) {
        let due = {
            let mut last = self
                .last_sweep
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let due = last.is_none_or(|at| at.elapsed() >= self.settings.orphan_interval);
            if due {
                *last = Some(tokio::time::Instant::now());
            }
            due
        };
        if !due {
            return;
        }
        let age = i64::try_from(self.settings.orphan_interval.as_millis()).unwrap_or(i64::MAX);
        match krabka_remote_storage::diskless::sweep_orphans(
            self.coordinator.as_ref(),
            &self.store,
            self.settings.broker,
            now.saturating_sub(age),
        )
        .await
        {
            Ok(pass) => tracing::debug!(
                examined = pass.examined,
                orphans = pass.abandoned,
                "diskless orphan sweep"
            ),
            Err(e) => tracing::warn!(error = %e, "diskless orphan sweep failed"),
        }
    }
}

/// Milliseconds since the epoch.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
