//! Where the operator commands read `__remote_log_metadata` from: through a
//! broker (the topic, on a single node) or, in cluster mode, straight from
//! the cluster database, where the brokers keep it as event logs (see
//! `krabka_broker::cluster::remote_log_metadata`). Both are the same
//! [`MetadataEventLog`], so `remote-metadata dump` and `worm-heads` read
//! either one with the same code.

use {
    krabka_broker::cluster::remote_log_metadata::DbMetadataEventLog,
    krabka_cluster::{Cluster, DatabaseConfig},
    krabka_remote_storage_topic::{
        KafkaMetadataEventLog, KafkaMetadataEventLogConfig, MetadataEventLog, MetadataLogError,
    },
    std::{sync::Arc, time::Duration},
};

/// Where to read the remote log metadata.
#[derive(Debug, Clone)]
pub enum MetadataSource {
    /// The `__remote_log_metadata` topic, through a broker.
    Broker {
        /// `host:port` of a broker of the cluster.
        bootstrap: String,
        /// TLS and SASL of the connections (`--command-config`).
        security: super::command_config::ClientSecurity,
    },
    /// The cluster database of a cluster-mode deployment (`--database-url`).
    Database(DatabaseConfig),
}

impl MetadataSource {
    /// `--database-url` when given, else the broker at `bootstrap`.
    #[must_use]
    pub fn from_args(
        bootstrap: String,
        database_url: Option<String>,
        security: super::command_config::ClientSecurity,
        timeout: Duration,
    ) -> Self {
        match database_url {
            Some(url) => {
                let mut config = DatabaseConfig::new(url);
                config.pool_size = 2;
                config.connect_timeout = timeout.min(Duration::from_secs(10));
                Self::Database(config)
            }
            None => Self::Broker {
                bootstrap,
                security,
            },
        }
    }

    /// What the source is, for messages.
    #[must_use]
    pub fn describe(&self) -> String {
        match self {
            Self::Broker { bootstrap, .. } => format!("the cluster at {bootstrap}"),
            Self::Database(_) => "the cluster database".to_owned(),
        }
    }
}

/// An opened metadata log, closed with [`OpenedLog::close`].
#[derive(Debug)]
pub enum OpenedLog {
    /// Through a broker.
    Kafka(Arc<KafkaMetadataEventLog>),
    /// The cluster database, read-only.
    Database(DbMetadataEventLog),
    /// A cluster whose brokers never opened the log: nothing was tiered.
    Empty,
}

impl OpenedLog {
    /// The log to read, `None` when there is none.
    #[must_use]
    pub fn log(&self) -> Option<Arc<dyn MetadataEventLog>> {
        match self {
            Self::Kafka(log) => Some(log.clone()),
            Self::Database(log) => Some(Arc::new(log.clone())),
            Self::Empty => None,
        }
    }

    /// Stops the log's connections.
    pub async fn close(self) {
        if let Self::Kafka(log) = self {
            log.close().await;
        }
    }
}

/// Why the metadata log could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The source did not answer within the timeout.
    #[error("could not reach {0} in time")]
    Unreachable(String),
    /// The log could not be opened.
    #[error("cannot read the remote log metadata: {0}")]
    Log(#[from] MetadataLogError),
    /// The cluster database refused the connection.
    #[error("cannot read the cluster database: {0}")]
    Database(#[from] krabka_cluster::ClusterError),
}

/// Opens `source`'s metadata log within `timeout`. Through a broker this
/// creates the topic when it is absent, as every [`KafkaMetadataEventLog`]
/// does; the database is only read.
///
/// # Errors
///
/// [`OpenError`] when the source cannot be reached or read in time.
pub async fn open(source: &MetadataSource, timeout: Duration) -> Result<OpenedLog, OpenError> {
    let unreachable = || OpenError::Unreachable(source.describe());
    match source {
        MetadataSource::Broker {
            bootstrap,
            security,
        } => {
            let mut config = KafkaMetadataEventLogConfig::new(vec![bootstrap.clone()]);
            config.delivery_timeout = timeout;
            security.apply(&mut config.client.connection);
            let log = tokio::time::timeout(timeout, KafkaMetadataEventLog::connect(config))
                .await
                .map_err(|_| unreachable())??;
            Ok(OpenedLog::Kafka(Arc::new(log)))
        }
        MetadataSource::Database(config) => {
            let opened = tokio::time::timeout(timeout, async {
                let cluster = Cluster::connect(config).await?;
                Ok::<_, OpenError>(DbMetadataEventLog::read_only(cluster).await?)
            })
            .await
            .map_err(|_| unreachable())??;
            Ok(opened.map_or(OpenedLog::Empty, OpenedLog::Database))
        }
    }
}
