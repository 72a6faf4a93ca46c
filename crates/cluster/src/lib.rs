//! Cluster mode's shared state, in PostgreSQL.
//!
//! Several Krabka brokers form a cluster by pointing at one database
//! (`krabka.cluster.database.url`). The database is the only source of truth
//! and the only arbiter: brokers register and renew leases there, coordinator
//! shards (the partitions of `__consumer_offsets`, `__transaction_state` and
//! `__remote_log_metadata`) are owned through leases with epochs, and every
//! write an owner makes is conditional on its epoch, so there is no consensus
//! protocol of our own to get wrong. Lease expiry is always the database's
//! clock; how a broker stops trusting a lease in time is in [`lease`].
//!
//! [`Cluster`] is the handle. Its operations are split by the state they
//! touch, one module each: [`brokers`] (membership), [`shards`] (coordinator
//! leases), [`topics`] (topics, partitions and configs), [`producer_ids`]
//! (producer-id blocks), [`state`] (coordinator state tables),
//! [`events`] (append-only event logs), [`diskless`] (the batch
//! coordinator of diskless topics) and [`remote_deletions`] (the remote
//! data deleted topics left in the tier). [`migrate`] creates and upgrades
//! the schema when a broker connects.

pub mod assignment;
pub mod brokers;
pub mod config;
pub mod db;
pub mod diskless;
pub mod error;
pub mod events;
pub mod lease;
pub mod migrate;
pub mod notify;
pub mod producer_ids;
pub mod remote_deletions;
pub mod security;
pub mod shards;
pub mod state;
pub mod topics;

use crate::db::OpError;
pub use crate::{
    brokers::{BrokerInfo, BrokerRegistration, Renewal},
    config::{DatabaseConfig, DatabaseTls},
    db::Database,
    diskless::PgBatchCoordinator,
    error::ClusterError,
    lease::{BrokerEpoch, BrokerLease, LeaseEpoch, LeaseTiming, LocalLease},
    shards::{Fence, ShardId, ShardKind, ShardLease, ShardOwner},
};

/// A connection to a cluster's database, with its schema up to date.
#[derive(Debug, Clone)]
pub struct Cluster {
    db: Database,
    cluster_id: String,
}

impl Cluster {
    /// Connects, applies the schema migrations this binary brings, and reads
    /// (or, for a new cluster, creates) the cluster id.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Config`] for bad settings,
    /// [`ClusterError::Unavailable`] when the database cannot be reached,
    /// [`ClusterError::SchemaTooNew`] when a newer Krabka upgraded it.
    pub async fn connect(config: &DatabaseConfig) -> Result<Self, ClusterError> {
        let db = Database::new(config)?;
        Self::open(db).await
    }

    /// [`Cluster::connect`] over an existing pool.
    ///
    /// # Errors
    ///
    /// As [`Cluster::connect`].
    pub async fn open(db: Database) -> Result<Self, ClusterError> {
        migrate::migrate(&db).await?;
        let proposed = krabka_ids::kafka_uuid(uuid::Uuid::new_v4());
        let cluster_id = db
            .run("cluster_id", async |conn| {
                conn.execute(
                    "INSERT INTO cluster (cluster_id) VALUES ($1) ON CONFLICT DO NOTHING",
                    &[&proposed],
                )
                .await?;
                let row = conn
                    .query_one("SELECT cluster_id FROM cluster", &[])
                    .await?;
                Ok::<String, OpError>(row.get(0))
            })
            .await?;
        Ok(Self { db, cluster_id })
    }

    /// The cluster id every broker of the cluster reports.
    #[must_use]
    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    /// The connection pool.
    #[must_use]
    pub fn database(&self) -> &Database {
        &self.db
    }
}
