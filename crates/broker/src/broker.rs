//! The broker's shared state: configuration, topic registry, partitions and
//! fetch sessions, behind one `Arc` that every connection task holds.

use {
    crate::{
        config::BrokerConfig,
        error::BrokerError,
        fetch::session::FetchSessionCache,
        partition::PartitionManager,
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
    /// The group coordinator, set once at startup.
    pub groups: std::sync::OnceLock<std::sync::Arc<crate::coordinator::group::GroupCoordinator>>,
    /// The remote log manager (tiered storage), set once at startup when
    /// `remote.log.storage.system.enable` is true.
    pub remote: std::sync::OnceLock<std::sync::Arc<crate::remote::RemoteLogManager>>,
    /// The transaction coordinator, set once at startup
    /// (`crate::coordinator::txn::broker_log::start`).
    pub txns: std::sync::OnceLock<std::sync::Arc<crate::coordinator::txn::TransactionCoordinator>>,
    /// Listeners' TLS and SASL, the authorizer and the SCRAM users.
    pub security: crate::security::Security,
    /// The port the listener actually bound (differs from the configured one
    /// when that is 0).
    bound_port: AtomicU16,
    /// Flips to `true` when shutdown begins; long polls end early on it.
    shutdown: watch::Sender<bool>,
}

impl Broker {
    /// Opens the registry and every partition it lists (recovering logs as
    /// needed). Blocking.
    ///
    /// # Errors
    ///
    /// [`BrokerError`] if the log directory, the registry or a log cannot be opened.
    pub fn open(config: BrokerConfig) -> Result<Self, BrokerError> {
        let registry = TopicRegistry::open(&config.log_dir)?;
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
        let partitions = PartitionManager::new(config.log_dir.clone(), cleaner);
        for topic in registry.topics() {
            let (log_config, extras) = topic_config::log_config(&config, &registry, &topic.configs);
            partitions.open_partitions(
                &topic.name,
                topic.id,
                0..topic.partitions,
                &log_config,
                extras,
            )?;
            tracing::info!(topic = %topic.name, partitions = topic.partitions, "opened topic");
        }
        let port = config.listener.port;
        Ok(Self {
            config,
            registry,
            partitions,
            fetch_sessions: FetchSessionCache::default(),
            groups: std::sync::OnceLock::new(),
            remote: std::sync::OnceLock::new(),
            txns: std::sync::OnceLock::new(),
            security,
            bound_port: AtomicU16::new(port),
            shutdown: watch::channel(false).0,
        })
    }

    /// Starts shutdown: waiting fetches return what they have.
    pub fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
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
