//! The broker's shared state: configuration, topic registry, partitions and
//! fetch sessions, behind one `Arc` that every connection task holds.

use {
    crate::{
        config::BrokerConfig,
        error::BrokerError,
        fetch::{FetchSettings, budget::FetchMemory, session::FetchSessionCache},
        partition::{PartitionManager, RemoteSlot},
        topics::{TopicMeta, TopicRegistry, config as topic_config},
    },
    std::sync::atomic::{AtomicU16, Ordering},
    tokio::sync::watch,
};

/// Everything a request handler needs.
#[derive(Debug)]
pub struct Broker {
    /// The validated configuration.
    pub config: BrokerConfig,
    /// Persisted topics.
    pub registry: TopicRegistry,
    /// Open partitions.
    pub partitions: PartitionManager,
    /// Incremental fetch sessions (KIP-227).
    pub fetch_sessions: FetchSessionCache,
    /// `fetch.max.bytes` and the other fetch settings.
    pub fetch_settings: FetchSettings,
    /// The memory budget of all fetch responses being built or sent.
    pub fetch_memory: FetchMemory,
    /// The group coordinator, set once at startup.
    pub groups: std::sync::OnceLock<std::sync::Arc<crate::coordinator::group::GroupCoordinator>>,
    /// The remote log manager (tiered storage), set once at startup when
    /// `remote.log.storage.system.enable` is true (shared with the
    /// partitions, which read their remote data through it).
    pub remote: RemoteSlot,
    /// The transaction coordinator, set once at startup
    /// (`crate::coordinator::txn::broker_log::start`).
    pub txns: std::sync::OnceLock<std::sync::Arc<crate::coordinator::txn::TransactionCoordinator>>,
    /// Listeners' TLS and SASL, the authorizer and the SCRAM users.
    pub security: crate::security::Security,
    /// This broker's membership of a cluster (`krabka.cluster.database.url`),
    /// set once at startup; unset on a single node.
    pub cluster: std::sync::OnceLock<std::sync::Arc<crate::cluster::ClusterNode>>,
    /// The client of this broker's calls to its peers (transaction markers,
    /// partitions added to another broker's transaction), made on first use.
    peers: std::sync::OnceLock<std::sync::Arc<crate::cluster::markers::MarkerClient>>,
    /// The port the listener actually bound (differs from the configured one
    /// when that is 0).
    bound_port: AtomicU16,
    /// Flips to `true` when shutdown begins; long polls end early on it.
    shutdown: watch::Sender<bool>,
    /// The log directory: its lock (held as long as the broker lives), its
    /// identity and its space reserve.
    pub log_dir: crate::log_dir::LogDir,
    /// Serializes topic creation, partition creation and topic deletion
    /// (admin operations only; no request path waits on it).
    pub(crate) topic_changes: std::sync::Mutex<()>,
}

impl Broker {
    /// Locks and identifies the log directory, opens the registry and every
    /// partition it lists (recovering logs as needed). A partition that
    /// cannot be opened is offline (refused with `KAFKA_STORAGE_ERROR`,
    /// logged with its reason) while the others serve. Blocking.
    ///
    /// # Errors
    ///
    /// [`BrokerError`] if the log directory is refused (in use, another
    /// node's, data without identity or registry; see [`crate::log_dir`]),
    /// or the registry cannot be read.
    pub fn open(config: BrokerConfig) -> Result<Self, BrokerError> {
        let (log_dir, registry) = crate::log_dir::LogDir::open(&config.log_dir, config.node_id)?;
        crate::log_dir::recover::sweep_leftovers(&config.log_dir, &registry)?;
        let security = crate::security::Security::from_config(&config, &registry)?;
        let cleaner = if config.cleaner_enable {
            let cleaner_config = krabka_log::CleanerConfig {
                dedupe_buffer_size: config.cleaner_dedupe_buffer_size,
                backoff_ms: config.cleaner_backoff_ms,
                ..krabka_log::CleanerConfig::default()
            };
            Some(
                krabka_log::LogCleaner::start(cleaner_config).map_err(|source| {
                    BrokerError::Log {
                        dir: config.log_dir.clone(),
                        source,
                    }
                })?,
            )
        } else {
            None
        };
        let remote = RemoteSlot::default();
        // In cluster mode only internal topics open here; the others open
        // once the cluster says which of their partitions live on this broker.
        let cluster_mode = crate::cluster::ClusterSettings::from_config(&config)?.is_some();
        let partitions = PartitionManager::new(
            config.log_dir.clone(),
            cleaner,
            std::sync::Arc::clone(&remote),
            crate::remote::settings::system_enabled(&config),
        )
        .with_diskless(
            crate::diskless::DisklessSettings::from_config(&config)?
                .for_cluster(&registry.cluster_id()),
        );
        let partitions = if cluster_mode {
            partitions.in_cluster_mode()
        } else {
            partitions
        };
        let fetch_settings = FetchSettings::from_config(&config);
        for topic in registry.topics() {
            if cluster_mode && !crate::topics::names::is_internal(&topic.name) {
                continue;
            }
            let (log_config, extras) = topic_config::log_config(&config, &registry, &topic.configs);
            let indexes: Vec<i32> = (0..topic.partitions).collect();
            let open = |indexes: &[i32]| {
                partitions.open_available(&topic.name, topic.id, indexes, &log_config, extras)
            };
            let mut failed = open(&indexes);
            // Recovery after a crash writes a little (recovery point,
            // flushed indexes): on a full disk, the reserve makes room.
            if failed
                .iter()
                .any(|(_, e)| crate::log_dir::reserve::is_out_of_space(e))
                && log_dir.reserve().release()
            {
                let retry: Vec<i32> = failed.iter().map(|(i, _)| *i).collect();
                failed = open(&retry);
            }
            for (index, e) in failed {
                tracing::error!(
                    topic = %topic.name,
                    partition = index,
                    error = %e,
                    "partition cannot be opened: it is offline (KAFKA_STORAGE_ERROR) until it is repaired"
                );
                partitions.mark_offline(&topic.name, index, e.to_string());
            }
            tracing::info!(topic = %topic.name, partitions = topic.partitions, "opened topic");
        }
        let port = config.listener.port;
        Ok(Self {
            config,
            registry,
            partitions,
            fetch_sessions: FetchSessionCache::new(fetch_settings.session_slots),
            fetch_memory: FetchMemory::new(fetch_settings.memory_max_bytes),
            fetch_settings,
            groups: std::sync::OnceLock::new(),
            remote,
            txns: std::sync::OnceLock::new(),
            security,
            cluster: std::sync::OnceLock::new(),
            peers: std::sync::OnceLock::new(),
            bound_port: AtomicU16::new(port),
            shutdown: watch::channel(false).0,
            log_dir,
            topic_changes: std::sync::Mutex::new(()),
        })
    }

    /// Starts shutdown: waiting fetches return what they have.
    pub fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// The request versions this broker serves
    /// (`krabka.legacy.protocol.enable`).
    #[must_use]
    pub fn served(&self) -> crate::api_versions::Served {
        crate::api_versions::Served::from_setting(self.config.legacy_protocol)
    }

    /// The client of this broker's calls to its peers over their
    /// inter-broker listener (one connection per peer, shared).
    #[must_use]
    pub fn peers(&self) -> std::sync::Arc<crate::cluster::markers::MarkerClient> {
        std::sync::Arc::clone(self.peers.get_or_init(|| {
            std::sync::Arc::new(crate::cluster::markers::MarkerClient::for_broker(self))
        }))
    }

    /// The features this broker announces in ApiVersions
    /// (`krabka.transaction.version`).
    #[must_use]
    pub fn features(&self) -> crate::api_versions::Features {
        crate::api_versions::Features {
            transaction_version: self.config.transaction_version,
        }
    }

    /// A receiver that becomes `true` when shutdown begins.
    #[must_use]
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Records the port the listener bound.
    pub fn set_bound_port(&self, port: u16) {
        self.bound_port.store(port, Ordering::Relaxed);
    }

    /// `(host, port)` clients are told to connect to.
    #[must_use]
    pub fn advertised(&self) -> (String, i32) {
        let listener = &self.config.advertised_listener;
        let port = if listener.port == 0 {
            self.bound_port.load(Ordering::Relaxed)
        } else {
            listener.port
        };
        (listener.host.clone(), i32::from(port))
    }

    /// The cluster id clients see: the cluster's in cluster mode, else the
    /// registry's.
    #[must_use]
    pub fn cluster_id(&self) -> String {
        match self.cluster.get() {
            Some(node) => node.cluster_id().to_owned(),
            None => self.registry.cluster_id(),
        }
    }

    /// The error for a partition this broker does not serve:
    /// `KAFKA_STORAGE_ERROR` when its log could not be opened; in cluster
    /// mode, `NOT_LEADER_OR_FOLLOWER` when the cluster has it on another
    /// broker; else `UNKNOWN_TOPIC_OR_PARTITION`.
    #[must_use]
    pub fn missing_partition(
        &self,
        topic: &str,
        partition: i32,
    ) -> kafka_protocol::error::ResponseError {
        // A partition whose log could not be opened is refused as Kafka
        // refuses one of a failed log directory.
        if self.partitions.offline_reason(topic, partition).is_some() {
            return kafka_protocol::error::ResponseError::KafkaStorageError;
        }
        match self
            .cluster
            .get()
            .and_then(|c| c.assigned(topic, partition))
        {
            Some(_) => kafka_protocol::error::ResponseError::NotLeaderOrFollower,
            None => kafka_protocol::error::ResponseError::UnknownTopicOrPartition,
        }
    }

    /// Whether the partition exists: open here, or (cluster mode) placed on
    /// another broker.
    #[must_use]
    pub fn partition_exists(&self, topic: &str, partition: i32) -> bool {
        self.partitions.contains(topic, partition)
            || self
                .cluster
                .get()
                .is_some_and(|c| c.assigned(topic, partition).is_some())
    }

    /// A producer id never handed out before, cluster-wide in cluster mode
    /// (from a block the database allocated to this broker). Blocking.
    ///
    /// # Errors
    ///
    /// A message when no id can be had (the registry cannot persist, or the
    /// cluster database is out of reach).
    pub fn allocate_producer_id(&self) -> Result<i64, String> {
        match self.cluster.get() {
            Some(node) => node.allocate_producer_id_blocking(),
            None => self
                .registry
                .allocate_producer_id()
                .map_err(|e| e.to_string()),
        }
    }

    /// A producer id from the block already reserved (the registry's, or in
    /// cluster mode the database's), without blocking; `None` when the block
    /// is used up (then [`Broker::reserve_producer_ids`]).
    #[must_use]
    pub fn try_allocate_producer_id(&self) -> Option<i64> {
        match self.cluster.get() {
            Some(node) => node.try_allocate_producer_id(),
            None => self.registry.try_allocate_producer_id(),
        }
    }

    /// Reserves the next block of producer ids if the current one is used
    /// up. Blocking: call it without holding other locks.
    ///
    /// # Errors
    ///
    /// The reason when the block cannot be persisted (or, in cluster mode,
    /// taken from the database).
    pub fn reserve_producer_ids(&self) -> Result<(), String> {
        match self.cluster.get() {
            Some(node) => node.reserve_producer_ids_blocking(),
            None => self
                .registry
                .reserve_producer_ids()
                .map_err(|e| e.to_string()),
        }
    }

    /// Re-applies the effective configuration of one topic to its logs
    /// (after a topic or broker config change).
    pub fn refresh_topic_config(&self, topic: &TopicMeta) {
        let (log_config, extras) =
            topic_config::log_config(&self.config, &self.registry, &topic.configs);
        self.partitions
            .update_config(&topic.name, &log_config, extras);
        self.partitions.wake_cleaner();
    }
}
