//! Coordinator shards and their leases.
//!
//! A shard is one partition of a coordinator's internal topic. Its lease row
//! names the owner, an epoch bumped by every acquisition, and an expiry on
//! the database's clock. Only a live broker can acquire, and only a shard
//! that is free or whose lease expired; the holder renews its shards together
//! with its own registration ([`Cluster::renew`](crate::Cluster::renew)).
//!
//! Writes are fenced ([`Fence`]): inside the writing transaction, the
//! writer's lease row is read `FOR SHARE` with the condition that it is still
//! the writer's, at its epoch, and unexpired. The lock makes a concurrent
//! acquisition wait until the write commits, so every write of an old epoch
//! commits before the new epoch exists, and the new owner's load sees it.

use {
    crate::{
        Cluster,
        db::OpError,
        error::ClusterError,
        lease::{BrokerLease, LeaseEpoch, LeaseTiming},
    },
    deadpool_postgres::GenericClient,
    krabka_ids::BrokerId,
};

/// Which coordinator a shard belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ShardKind {
    /// A partition of `__consumer_offsets` (the group coordinator).
    ConsumerOffsets,
    /// A partition of `__transaction_state` (the transaction coordinator).
    TransactionState,
    /// A partition of `__remote_log_metadata`.
    RemoteLogMetadata,
    /// The controller role (one shard): its owner is the controller id the
    /// brokers report.
    Controller,
}

impl ShardKind {
    /// Every kind.
    pub const ALL: [Self; 4] = [
        Self::ConsumerOffsets,
        Self::TransactionState,
        Self::RemoteLogMetadata,
        Self::Controller,
    ];

    /// The name stored in the database (the internal topic's name).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ConsumerOffsets => "__consumer_offsets",
            Self::TransactionState => "__transaction_state",
            Self::RemoteLogMetadata => "__remote_log_metadata",
            Self::Controller => "controller",
        }
    }

    /// The kind stored as `name`.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl std::fmt::Display for ShardKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One shard: a coordinator kind and a partition of its topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShardId {
    /// The coordinator.
    pub kind: ShardKind,
    /// The partition.
    pub partition: i32,
}

impl ShardId {
    /// Shard `partition` of `kind`.
    #[must_use]
    pub fn new(kind: ShardKind, partition: i32) -> Self {
        Self { kind, partition }
    }
}

impl std::fmt::Display for ShardId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.kind, self.partition)
    }
}

/// A lease held on a shard: what a fenced write presents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShardLease {
    /// The shard.
    pub shard: ShardId,
    /// The holder.
    pub owner: BrokerId,
    /// The epoch of the holder's acquisition.
    pub epoch: LeaseEpoch,
}

/// A shard's lease row as anyone can read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardOwner {
    /// The shard.
    pub shard: ShardId,
    /// The last holder (None if never held or released).
    pub owner: Option<BrokerId>,
    /// The latest epoch.
    pub epoch: LeaseEpoch,
    /// Whether the lease is unexpired now, by the database's clock.
    pub live: bool,
    /// Milliseconds the lease has left (0 when expired).
    pub remaining_ms: i64,
}

/// What a write is conditional on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fence {
    /// The writer holds this shard lease, unexpired.
    Shard(ShardLease),
    /// The writer's registration is this one, unexpired.
    Broker(BrokerLease),
}

impl Fence {
    /// Inside a write's transaction: locks the lease row the write depends
    /// on, or refuses with [`ClusterError::Fenced`].
    pub(crate) async fn check<C: GenericClient + Sync>(&self, tx: &C) -> Result<(), OpError> {
        let held = match self {
            Self::Shard(lease) => tx
                .query_opt(
                    "SELECT 1 FROM shard_leases
                     WHERE kind = $1 AND shard = $2 AND owner = $3 AND epoch = $4
                       AND expires_at > clock_timestamp()
                     FOR SHARE",
                    &[
                        &lease.shard.kind.as_str(),
                        &lease.shard.partition,
                        &lease.owner.0,
                        &lease.epoch.0,
                    ],
                )
                .await?
                .is_some(),
            Self::Broker(broker) => tx
                .query_opt(
                    "SELECT 1 FROM brokers
                     WHERE node_id = $1 AND epoch = $2 AND lease_expires_at > clock_timestamp()
                     FOR SHARE",
                    &[&broker.node.0, &broker.epoch.0],
                )
                .await?
                .is_some(),
        };
        if held {
            Ok(())
        } else {
            Err(ClusterError::Fenced(match self {
                Self::Shard(lease) => format!(
                    "broker {} no longer holds {} at epoch {}",
                    lease.owner.0, lease.shard, lease.epoch
                ),
                Self::Broker(broker) => format!(
                    "registration {} of broker {} is no longer live",
                    broker.epoch.0, broker.node.0
                ),
            })
            .into())
        }
    }
}

impl Cluster {
    /// Acquires `shard` for `broker` if it is free or its lease expired, and
    /// the broker's own registration is live. Returns the new lease (with an
    /// epoch larger than any before), or `None` when someone holds it.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn acquire_shard(
        &self,
        broker: &BrokerLease,
        shard: ShardId,
        timing: &LeaseTiming,
    ) -> Result<Option<ShardLease>, ClusterError> {
        let duration = timing.duration_ms();
        self.db
            .run("acquire_shard", async |conn| {
                conn.execute(
                    "INSERT INTO shard_leases (kind, shard) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                    &[&shard.kind.as_str(), &shard.partition],
                )
                .await?;
                let row = conn
                    .query_opt(
                        "UPDATE shard_leases
                         SET owner = $3, epoch = epoch + 1,
                             expires_at = clock_timestamp() + $5 * interval '1 millisecond'
                         WHERE kind = $1 AND shard = $2 AND expires_at <= clock_timestamp()
                           AND EXISTS (SELECT 1 FROM brokers
                                       WHERE node_id = $3 AND epoch = $4
                                         AND lease_expires_at > clock_timestamp())
                         RETURNING epoch",
                        &[
                            &shard.kind.as_str(),
                            &shard.partition,
                            &broker.node.0,
                            &broker.epoch.0,
                            &(duration as f64),
                        ],
                    )
                    .await?;
                Ok::<_, OpError>(row.map(|row| ShardLease {
                    shard,
                    owner: broker.node,
                    epoch: LeaseEpoch(row.get(0)),
                }))
            })
            .await
    }

    /// [`acquire_shard`](Self::acquire_shard) for several shards in one
    /// round trip: returns the leases of those that were free or expired
    /// (in shard order).
    ///
    /// # Errors
    ///
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn acquire_shards(
        &self,
        broker: &BrokerLease,
        shards: &[ShardId],
        timing: &LeaseTiming,
    ) -> Result<Vec<ShardLease>, ClusterError> {
        if shards.is_empty() {
            return Ok(Vec::new());
        }
        let duration = timing.duration_ms() as f64;
        let kinds: Vec<&str> = shards.iter().map(|s| s.kind.as_str()).collect();
        let partitions: Vec<i32> = shards.iter().map(|s| s.partition).collect();
        self.db
            .run("acquire_shards", async |conn| {
                let tx = conn.transaction().await?;
                tx.execute(
                    "INSERT INTO shard_leases (kind, shard)
                     SELECT * FROM unnest($1::text[], $2::integer[]) ON CONFLICT DO NOTHING",
                    &[&kinds, &partitions],
                )
                .await?;
                let rows = tx
                    .query(
                        "UPDATE shard_leases AS s
                         SET owner = $3, epoch = s.epoch + 1,
                             expires_at = clock_timestamp() + $5 * interval '1 millisecond'
                         FROM unnest($1::text[], $2::integer[]) AS w(kind, shard)
                         WHERE s.kind = w.kind AND s.shard = w.shard
                           AND s.expires_at <= clock_timestamp()
                           AND EXISTS (SELECT 1 FROM brokers
                                       WHERE node_id = $3 AND epoch = $4
                                         AND lease_expires_at > clock_timestamp())
                         RETURNING s.kind, s.shard, s.epoch",
                        &[
                            &kinds,
                            &partitions,
                            &broker.node.0,
                            &broker.epoch.0,
                            &duration,
                        ],
                    )
                    .await?;
                tx.commit().await?;
                let mut leases: Vec<ShardLease> = rows
                    .iter()
                    .filter_map(|row| {
                        Some(ShardLease {
                            shard: ShardId::new(ShardKind::parse(row.get(0))?, row.get(1)),
                            owner: broker.node,
                            epoch: LeaseEpoch(row.get(2)),
                        })
                    })
                    .collect();
                leases.sort_by_key(|l| l.shard);
                Ok::<_, OpError>(leases)
            })
            .await
    }

    /// Gives `lease` up at once (a clean shutdown or a rebalance), so another
    /// broker need not wait for it to expire. Returns whether it was still
    /// held.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn release_shard(&self, lease: &ShardLease) -> Result<bool, ClusterError> {
        self.db
            .run("release_shard", async |conn| {
                let n = conn
                    .execute(
                        "UPDATE shard_leases SET owner = NULL, expires_at = '-infinity'
                         WHERE kind = $1 AND shard = $2 AND owner = $3 AND epoch = $4",
                        &[
                            &lease.shard.kind.as_str(),
                            &lease.shard.partition,
                            &lease.owner.0,
                            &lease.epoch.0,
                        ],
                    )
                    .await?;
                Ok::<_, OpError>(n == 1)
            })
            .await
    }

    /// Every shard lease row, in shard order (shards never acquired have
    /// none).
    ///
    /// # Errors
    ///
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn shard_owners(&self) -> Result<Vec<ShardOwner>, ClusterError> {
        self.db
            .run("shard_owners", async |conn| {
                let rows = conn
                    .query(
                        "SELECT kind, shard, owner, epoch, expires_at > clock_timestamp(),
                                CASE WHEN expires_at > clock_timestamp()
                                     THEN (extract(epoch FROM expires_at - clock_timestamp())
                                           * 1000)::bigint
                                     ELSE 0 END
                         FROM shard_leases ORDER BY kind, shard",
                        &[],
                    )
                    .await?;
                Ok::<_, OpError>(
                    rows.iter()
                        .filter_map(|row| {
                            let kind = ShardKind::parse(row.get(0))?;
                            Some(ShardOwner {
                                shard: ShardId::new(kind, row.get(1)),
                                owner: row.get::<_, Option<i32>>(2).map(BrokerId),
                                epoch: LeaseEpoch(row.get(3)),
                                live: row.get(4),
                                remaining_ms: row.get(5),
                            })
                        })
                        .collect(),
                )
            })
            .await
    }
}
