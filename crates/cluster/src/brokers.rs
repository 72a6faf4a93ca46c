//! Membership: brokers register, renew one lease for themselves and their
//! shards, and list each other.
//!
//! A registration takes a node id only if nobody holds it: the row is absent,
//! its lease expired, or it is the same incarnation re-registering (a broker
//! whose own lease lapsed). Every registration bumps the node's epoch, so
//! what the previous registration fenced with is dead.

use {
    crate::{
        Cluster,
        db::OpError,
        error::ClusterError,
        lease::{BrokerEpoch, BrokerLease, LeaseEpoch, LeaseTiming},
        shards::{ShardId, ShardKind, ShardLease},
    },
    krabka_ids::BrokerId,
    uuid::Uuid,
};

/// What a broker registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerRegistration {
    /// Its `node.id`.
    pub node: BrokerId,
    /// Its `broker.rack`, if any.
    pub rack: Option<String>,
    /// Its advertised listeners, as Kafka writes them
    /// (`PLAINTEXT://host:port,…`).
    pub listeners: String,
    /// A fresh id of this process (or of its log directory), so the same
    /// broker can re-register after its own lease lapsed.
    pub incarnation: Uuid,
}

/// A registered broker as the others see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerInfo {
    /// Its node id.
    pub node: BrokerId,
    /// Its rack.
    pub rack: Option<String>,
    /// Its advertised listeners.
    pub listeners: String,
    /// Its registration epoch.
    pub epoch: BrokerEpoch,
    /// Whether its lease is unexpired, by the database's clock.
    pub live: bool,
    /// Milliseconds its lease has left (0 when expired).
    pub remaining_ms: i64,
}

/// What a renewal achieved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Renewal {
    /// Whether the broker's own registration was still live and is renewed;
    /// if not, nothing was renewed and the broker must register again.
    pub registered: bool,
    /// The shard leases renewed (those given that were still held).
    pub shards: Vec<ShardLease>,
}

impl Cluster {
    /// Registers a broker with a lease of `timing.duration`.
    ///
    /// # Errors
    ///
    /// [`ClusterError::NodeIdTaken`] when another live incarnation holds the
    /// node id; [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn register_broker(
        &self,
        registration: &BrokerRegistration,
        timing: &LeaseTiming,
    ) -> Result<BrokerLease, ClusterError> {
        let duration = timing.duration_ms() as f64;
        let node = registration.node;
        self.db
            .run("register_broker", async |conn| {
                let row = conn
                    .query_opt(
                        "INSERT INTO brokers AS b (node_id, rack, listeners, incarnation, epoch,
                                              registered_at, lease_expires_at)
                         VALUES ($1, $2, $3, $4, 1, clock_timestamp(),
                                 clock_timestamp() + $5 * interval '1 millisecond')
                         ON CONFLICT (node_id) DO UPDATE
                         SET rack = excluded.rack, listeners = excluded.listeners,
                             incarnation = excluded.incarnation, epoch = b.epoch + 1,
                             registered_at = excluded.registered_at,
                             lease_expires_at = excluded.lease_expires_at
                         WHERE b.lease_expires_at <= clock_timestamp()
                            OR b.incarnation = excluded.incarnation
                         RETURNING epoch",
                        &[
                            &node.0,
                            &registration.rack,
                            &registration.listeners,
                            &registration.incarnation,
                            &duration,
                        ],
                    )
                    .await?;
                if let Some(row) = row {
                    return Ok(BrokerLease {
                        node,
                        epoch: BrokerEpoch(row.get(0)),
                    });
                }
                let holder = conn
                    .query_opt(
                        "SELECT listeners,
                                CASE WHEN lease_expires_at > clock_timestamp()
                                     THEN (extract(epoch FROM lease_expires_at - clock_timestamp())
                                           * 1000)::bigint
                                     ELSE 0 END
                         FROM brokers WHERE node_id = $1",
                        &[&node.0],
                    )
                    .await?;
                let (listeners, remaining_ms) = holder
                    .map(|row| (row.get(0), row.get(1)))
                    .unwrap_or_else(|| (String::new(), 0));
                Err(OpError::Store(ClusterError::NodeIdTaken {
                    node,
                    listeners,
                    remaining_ms,
                }))
            })
            .await
    }

    /// Renews `broker`'s registration and, in the same transaction, the
    /// shard leases in `shards` it still holds. When the registration itself
    /// lapsed nothing is renewed.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn renew(
        &self,
        broker: &BrokerLease,
        shards: &[ShardLease],
        timing: &LeaseTiming,
    ) -> Result<Renewal, ClusterError> {
        let duration = timing.duration_ms() as f64;
        let kinds: Vec<&str> = shards.iter().map(|l| l.shard.kind.as_str()).collect();
        let partitions: Vec<i32> = shards.iter().map(|l| l.shard.partition).collect();
        let epochs: Vec<i64> = shards.iter().map(|l| l.epoch.0).collect();
        self.db
            .run("renew", async |conn| {
                let tx = conn.transaction().await?;
                let registered = tx
                    .execute(
                        "UPDATE brokers
                         SET lease_expires_at = clock_timestamp() + $3 * interval '1 millisecond'
                         WHERE node_id = $1 AND epoch = $2 AND lease_expires_at > clock_timestamp()",
                        &[&broker.node.0, &broker.epoch.0, &duration],
                    )
                    .await?
                    == 1;
                let mut renewed = Vec::new();
                if registered && !shards.is_empty() {
                    let rows = tx
                        .query(
                            "UPDATE shard_leases AS s
                             SET expires_at = clock_timestamp() + $2 * interval '1 millisecond'
                             FROM unnest($3::text[], $4::integer[], $5::bigint[]) AS h(kind, shard, epoch)
                             WHERE s.kind = h.kind AND s.shard = h.shard AND s.epoch = h.epoch
                               AND s.owner = $1 AND s.expires_at > clock_timestamp()
                             RETURNING s.kind, s.shard, s.epoch",
                            &[&broker.node.0, &duration, &kinds, &partitions, &epochs],
                        )
                        .await?;
                    for row in rows {
                        if let Some(kind) = ShardKind::parse(row.get(0)) {
                            renewed.push(ShardLease {
                                shard: ShardId::new(kind, row.get(1)),
                                owner: broker.node,
                                epoch: LeaseEpoch(row.get(2)),
                            });
                        }
                    }
                    renewed.sort_by_key(|l| l.shard);
                }
                tx.commit().await?;
                Ok::<_, OpError>(Renewal {
                    registered,
                    shards: renewed,
                })
            })
            .await
    }

    /// Ends `broker`'s registration and releases its shards at once (a clean
    /// shutdown), so the others take over without waiting for expiry.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn deregister_broker(&self, broker: &BrokerLease) -> Result<(), ClusterError> {
        self.db
            .run("deregister_broker", async |conn| {
                let tx = conn.transaction().await?;
                let n = tx
                    .execute(
                        "UPDATE brokers SET lease_expires_at = '-infinity'
                         WHERE node_id = $1 AND epoch = $2",
                        &[&broker.node.0, &broker.epoch.0],
                    )
                    .await?;
                if n == 1 {
                    tx.execute(
                        "UPDATE shard_leases SET owner = NULL, expires_at = '-infinity'
                         WHERE owner = $1",
                        &[&broker.node.0],
                    )
                    .await?;
                }
                tx.commit().await?;
                Ok::<_, OpError>(())
            })
            .await
    }

    /// Every broker that ever registered, live or not, by node id.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn brokers(&self) -> Result<Vec<BrokerInfo>, ClusterError> {
        self.db
            .run("brokers", async |conn| {
                let rows = conn
                    .query(
                        "SELECT node_id, rack, listeners, epoch,
                                lease_expires_at > clock_timestamp(),
                                CASE WHEN lease_expires_at > clock_timestamp()
                                     THEN (extract(epoch FROM lease_expires_at - clock_timestamp())
                                           * 1000)::bigint
                                     ELSE 0 END
                         FROM brokers ORDER BY node_id",
                        &[],
                    )
                    .await?;
                Ok::<_, OpError>(
                    rows.iter()
                        .map(|row| BrokerInfo {
                            node: BrokerId(row.get(0)),
                            rack: row.get(1),
                            listeners: row.get(2),
                            epoch: BrokerEpoch(row.get(3)),
                            live: row.get(4),
                            remaining_ms: row.get(5),
                        })
                        .collect(),
                )
            })
            .await
    }
}
