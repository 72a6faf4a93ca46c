//! Cluster mode: this broker as a member of a cluster whose shared state
//! lives in PostgreSQL (`krabka.cluster.database.url`, see `krabka-cluster`).
//!
//! Without that setting none of this runs and the broker is a single node.
//! With it, [`ClusterNode::join`] connects (applying schema migrations),
//! registers the broker, and refuses to start when the database is out of
//! reach, its schema is newer than this binary, or the node id is held by a
//! live broker. [`ClusterNode::run`] then renews the lease every
//! `krabka.cluster.lease.renew.interval.ms`, keeps the list of live brokers
//! and the controller (the holder of the controller lease) for Metadata and
//! DescribeCluster, and re-registers after a lapse. Whether this broker may
//! act as an owner is [`ClusterNode::lease_valid`]: true only until the
//! local deadline of its last successful renewal (see
//! `krabka_cluster::lease`), so it stops before anyone else can take over.

pub mod coordinator_state;
pub mod coordinators;
pub mod markers;
pub mod remote_deletions;
pub mod remote_log_metadata;
pub mod security;
pub mod settings;
pub mod topics;
pub mod txn_partitions;

use {
    crate::error::BrokerError,
    krabka_cluster::{
        BrokerInfo, BrokerLease, BrokerRegistration, Cluster, LocalLease, ShardId, ShardKind,
        ShardLease,
    },
    krabka_ids::BrokerId,
    std::{
        sync::{Arc, Mutex},
        time::Instant,
    },
    tokio::sync::watch,
};

pub use settings::ClusterSettings;

/// The controller shard: its holder is the controller id brokers report.
const CONTROLLER: ShardId = ShardId {
    kind: ShardKind::Controller,
    partition: 0,
};

/// What the member knows, refreshed by each renewal round.
#[derive(Debug)]
struct Membership {
    /// The current registration, if any.
    lease: Option<BrokerLease>,
    /// Until when this broker may act on it.
    local: Option<LocalLease<Instant>>,
    /// Shard leases held (the controller's among them).
    shards: Vec<ShardLease>,
    /// Live brokers as of the last round.
    live: Vec<BrokerInfo>,
    /// The controller as of the last round.
    controller: Option<BrokerId>,
    /// Every shard's live owner as of the last round (this broker's own
    /// acquisitions included as they happen).
    owners: std::collections::HashMap<ShardId, BrokerId>,
}

/// This broker's membership in a cluster.
#[derive(Debug)]
pub struct ClusterNode {
    cluster: Cluster,
    settings: ClusterSettings,
    registration: BrokerRegistration,
    state: Mutex<Membership>,
    /// The last metadata snapshot mirrored into the local registry.
    metadata: Mutex<krabka_cluster::topics::MetadataSnapshot>,
    /// What is left of the producer-id block the database gave this broker.
    producer_ids: Mutex<std::ops::Range<i64>>,
    /// The runtime, for the blocking callers of the producer-id allocator.
    runtime: tokio::runtime::Handle,
    /// Set once the ACLs and SCRAM users live in the database.
    security: std::sync::OnceLock<Arc<security::WrittenVersion>>,
}

/// How many producer ids a broker takes from the database at once.
const PRODUCER_ID_BLOCK: i32 = 1000;

impl ClusterNode {
    /// Connects to the cluster database, migrates its schema and registers
    /// node `node` with `listeners` (Kafka's `PLAINTEXT://host:port` form).
    ///
    /// # Errors
    ///
    /// [`BrokerError::Cluster`] when the database cannot be reached, its
    /// schema is newer than this binary, or a live broker holds the node id.
    pub async fn join(
        settings: ClusterSettings,
        node: i32,
        listeners: String,
    ) -> Result<Arc<Self>, BrokerError> {
        let cluster = Cluster::connect(&settings.database).await?;
        let registration = BrokerRegistration {
            node: BrokerId(node),
            rack: settings.rack.clone(),
            listeners,
            incarnation: uuid::Uuid::new_v4(),
        };
        let sent = Instant::now();
        let lease = cluster
            .register_broker(&registration, &settings.timing)
            .await?;
        tracing::info!(
            node,
            epoch = lease.epoch.0,
            cluster_id = cluster.cluster_id(),
            "registered in the cluster database"
        );
        let this = Arc::new(Self {
            state: Mutex::new(Membership {
                lease: Some(lease),
                local: Some(LocalLease::granted(&settings.timing, sent)),
                shards: Vec::new(),
                live: Vec::new(),
                controller: None,
                owners: std::collections::HashMap::new(),
            }),
            cluster,
            settings,
            registration,
            metadata: Mutex::new(krabka_cluster::topics::MetadataSnapshot::default()),
            producer_ids: Mutex::new(0..0),
            runtime: tokio::runtime::Handle::current(),
            security: std::sync::OnceLock::new(),
        });
        this.refresh().await?;
        Ok(this)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Membership> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The cluster's shared id.
    #[must_use]
    pub fn cluster_id(&self) -> &str {
        self.cluster.cluster_id()
    }

    /// The stores.
    #[must_use]
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// Moves `broker`'s ACLs and SCRAM users to the cluster's database
    /// (blocking; once, at join).
    ///
    /// # Errors
    ///
    /// A reason when the database cannot be read or written.
    pub fn use_security_stores(&self, broker: &crate::broker::Broker) -> Result<(), String> {
        let written = security::use_cluster_stores(broker, &self.cluster, &self.runtime)?;
        let _ = self.security.set(written);
        Ok(())
    }

    /// Serves the ACLs and SCRAM users of `snapshot` (blocking; from the
    /// metadata sync), once they live in the database.
    pub fn mirror_security(
        &self,
        broker: &crate::broker::Broker,
        snapshot: &krabka_cluster::topics::MetadataSnapshot,
    ) {
        if let Some(written) = self.security.get() {
            security::mirror(broker, written, snapshot);
        }
    }

    /// This broker's node id.
    #[must_use]
    pub fn node(&self) -> BrokerId {
        self.registration.node
    }

    /// The settings it joined with.
    #[must_use]
    pub fn settings(&self) -> &ClusterSettings {
        &self.settings
    }

    /// Whether this broker's registration may be acted on now: renewed, and
    /// its local deadline not passed.
    #[must_use]
    pub fn lease_valid(&self) -> bool {
        self.lock()
            .local
            .is_some_and(|l| l.is_valid_at(Instant::now()))
    }

    /// The current registration, while it is valid.
    #[must_use]
    pub fn broker_lease(&self) -> Option<BrokerLease> {
        let state = self.lock();
        state
            .local
            .is_some_and(|l| l.is_valid_at(Instant::now()))
            .then_some(state.lease)
            .flatten()
    }

    /// The live brokers as of the last renewal round (always including this
    /// one while its lease is valid).
    #[must_use]
    pub fn live_brokers(&self) -> Vec<BrokerInfo> {
        self.lock().live.clone()
    }

    /// The controller id brokers report: the holder of the controller lease,
    /// else the lowest live node id.
    #[must_use]
    pub fn controller(&self) -> Option<BrokerId> {
        let state = self.lock();
        state
            .controller
            .or_else(|| state.live.iter().map(|b| b.node).min())
    }

    /// A producer id from this broker's block, taking a new block from the
    /// database when it ran out (so no id ever goes to two brokers).
    /// Blocking: call from a blocking thread, never from async code.
    ///
    /// # Errors
    ///
    /// A message when the lease lapsed or the database is out of reach.
    pub fn allocate_producer_id_blocking(&self) -> Result<i64, String> {
        if let Some(id) = self.try_allocate_producer_id() {
            return Ok(id);
        }
        self.reserve_producer_ids_blocking()?;
        self.try_allocate_producer_id()
            .ok_or_else(|| "the producer-id block taken from the database is empty".to_owned())
    }

    /// A producer id from the block this broker holds, without a database
    /// round trip; `None` when the block is used up.
    #[must_use]
    pub fn try_allocate_producer_id(&self) -> Option<i64> {
        let mut ids = self
            .producer_ids
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (!ids.is_empty()).then(|| {
            let id = ids.start;
            ids.start += 1;
            id
        })
    }

    /// Takes a fresh block of producer ids from the database when the one
    /// held is used up. Blocking: runs on the calling (blocking) thread.
    ///
    /// # Errors
    ///
    /// The reason when this broker's lease lapsed or the database refused.
    pub fn reserve_producer_ids_blocking(&self) -> Result<(), String> {
        let used_up = self
            .producer_ids
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_empty();
        if !used_up {
            return Ok(());
        }
        let lease = self
            .broker_lease()
            .ok_or_else(|| "this broker's cluster lease lapsed".to_owned())?;
        let block = self
            .runtime
            .block_on(
                self.cluster
                    .allocate_producer_ids(&lease, PRODUCER_ID_BLOCK),
            )
            .map_err(|e| e.to_string())?;
        let mut ids = self
            .producer_ids
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if ids.is_empty() {
            *ids = block;
        }
        Ok(())
    }

    /// One renewal round: renew (or re-register), try for the controller
    /// lease, list live brokers and the controller.
    async fn refresh(&self) -> Result<(), BrokerError> {
        let timing = self.settings.timing;
        let (lease, shards) = {
            let state = self.lock();
            (state.lease, state.shards.clone())
        };
        let sent = Instant::now();
        let (lease, shards) = match lease {
            Some(lease) => {
                let renewal = self.cluster.renew(&lease, &shards, &timing).await?;
                if renewal.registered {
                    (lease, renewal.shards)
                } else {
                    tracing::warn!(
                        epoch = lease.epoch.0,
                        "cluster lease lapsed; registering again"
                    );
                    metrics::counter!("krabka_cluster_lease_lost_total").increment(1);
                    self.lose_lease();
                    let lease = self
                        .cluster
                        .register_broker(&self.registration, &timing)
                        .await?;
                    (lease, Vec::new())
                }
            }
            None => {
                let lease = self
                    .cluster
                    .register_broker(&self.registration, &timing)
                    .await?;
                (lease, Vec::new())
            }
        };
        let local = LocalLease::granted(&timing, sent);
        let mut shards = shards;
        if !shards.iter().any(|s| s.shard == CONTROLLER)
            && let Some(controller) = self
                .cluster
                .acquire_shard(&lease, CONTROLLER, &timing)
                .await?
        {
            tracing::info!(epoch = controller.epoch.0, "this broker is the controller");
            shards.push(controller);
        }
        let live: Vec<BrokerInfo> = self
            .cluster
            .brokers()
            .await?
            .into_iter()
            .filter(|b| b.live)
            .collect();
        let owners: std::collections::HashMap<ShardId, BrokerId> = self
            .cluster
            .shard_owners()
            .await?
            .into_iter()
            .filter(|o| o.live)
            .filter_map(|o| Some((o.shard, o.owner?)))
            .collect();
        let controller = if shards.iter().any(|s| s.shard == CONTROLLER) {
            Some(lease.node)
        } else {
            owners.get(&CONTROLLER).copied()
        };
        metrics::gauge!("krabka_cluster_live_brokers").set(live.len() as f64);
        metrics::gauge!("krabka_cluster_owned_shards", "kind" => "controller")
            .set(f64::from(u8::from(controller == Some(lease.node))));
        let mut state = self.lock();
        state.lease = Some(lease);
        state.local = Some(local);
        state.shards = shards;
        state.live = live;
        state.controller = controller;
        state.owners = owners;
        metrics::gauge!("krabka_cluster_lease_held").set(1.0);
        Ok(())
    }

    /// This broker's lease on `shard`, while it holds one and its own
    /// registration is valid (what a fenced write presents).
    #[must_use]
    pub fn shard_lease(&self, shard: ShardId) -> Option<ShardLease> {
        let state = self.lock();
        if !state.local.is_some_and(|l| l.is_valid_at(Instant::now())) {
            return None;
        }
        state.shards.iter().find(|l| l.shard == shard).copied()
    }

    /// The shard leases this broker holds (while its registration is
    /// valid).
    #[must_use]
    pub fn shard_leases(&self) -> Vec<ShardLease> {
        let state = self.lock();
        if !state.local.is_some_and(|l| l.is_valid_at(Instant::now())) {
            return Vec::new();
        }
        state.shards.clone()
    }

    /// The broker holding `shard`'s lease as of the last round, if it is
    /// live.
    #[must_use]
    pub fn shard_owner(&self, shard: ShardId) -> Option<BrokerId> {
        self.lock().owners.get(&shard).copied()
    }

    /// Until when this broker may act on its leases (the local deadline of
    /// its last renewal).
    #[must_use]
    pub fn lease_deadline(&self) -> Option<Instant> {
        self.lock().local.map(|l| l.deadline())
    }

    /// Acquires those of `shards` that are free or expired; returns the
    /// leases won, which are renewed with the registration from then on.
    ///
    /// # Errors
    ///
    /// [`BrokerError::Cluster`] when the database cannot be reached.
    pub async fn acquire_shards(&self, shards: &[ShardId]) -> Result<Vec<ShardLease>, BrokerError> {
        let Some(lease) = self.broker_lease() else {
            return Ok(Vec::new());
        };
        let won = self
            .cluster
            .acquire_shards(&lease, shards, &self.settings.timing)
            .await?;
        let mut state = self.lock();
        if state.lease == Some(lease) {
            for l in &won {
                state.shards.retain(|held| held.shard != l.shard);
                state.shards.push(*l);
                state.owners.insert(l.shard, lease.node);
            }
        }
        Ok(won)
    }

    /// Gives `lease` up at once, so another broker need not wait for it to
    /// expire (the caller has stopped serving it).
    ///
    /// # Errors
    ///
    /// [`BrokerError::Cluster`] when the database cannot be reached (the
    /// lease then lapses on its own).
    pub async fn release_shard(&self, lease: &ShardLease) -> Result<(), BrokerError> {
        {
            let mut state = self.lock();
            state.shards.retain(|held| held != lease);
            state.owners.remove(&lease.shard);
        }
        self.cluster.release_shard(lease).await?;
        Ok(())
    }

    /// Forgets the registration and every shard (the lease lapsed).
    fn lose_lease(&self) {
        let mut state = self.lock();
        state.lease = None;
        state.local = None;
        state.shards.clear();
        state.controller = None;
        metrics::gauge!("krabka_cluster_lease_held").set(0.0);
    }

    /// Renews (and mirrors the shared metadata into `broker`) until
    /// `shutdown` turns true, then deregisters (releasing the controller
    /// lease at once).
    pub async fn run(
        self: Arc<Self>,
        broker: std::sync::Weak<crate::broker::Broker>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let mut every = tokio::time::interval(self.settings.timing.renew_interval);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        every.tick().await;
        loop {
            tokio::select! {
                _ = every.tick() => {}
                _ = shutdown.changed() => break,
            }
            if let Err(e) = self.refresh().await {
                metrics::counter!("krabka_cluster_renew_errors_total").increment(1);
                tracing::warn!(error = %e, "cluster lease renewal failed");
            }
            if let Some(broker) = broker.upgrade() {
                if let Err(e) = self.sync_metadata(&broker).await {
                    tracing::warn!(error = %e, "cannot read the cluster's metadata");
                }
                coordinators::move_shards(&self, &broker).await;
            }
            if !self.lease_valid() && self.lock().local.is_some() {
                tracing::warn!("cluster lease expired locally; no longer acting as a member");
                metrics::gauge!("krabka_cluster_lease_held").set(0.0);
            }
        }
        let lease = self.lock().lease;
        if let Some(lease) = lease {
            match self.cluster.deregister_broker(&lease).await {
                Ok(()) => tracing::info!("deregistered from the cluster"),
                Err(e) => tracing::warn!(error = %e, "could not deregister from the cluster"),
            }
        }
    }
}

/// What a broker registers as its listeners, in Kafka's
/// `NAME://host:port,…` form: every listener's advertised address, the
/// inter-broker listener first (the address other brokers and tools use).
#[must_use]
pub fn advertised_listeners(security: &crate::security::Security) -> String {
    let inter = security.inter_broker();
    std::iter::once(inter)
        .chain(
            security
                .endpoints()
                .iter()
                .filter(|e| !Arc::ptr_eq(e, inter)),
        )
        .map(|e| {
            let (host, port) = e.advertised();
            let host = if host.contains(':') {
                format!("[{host}]")
            } else {
                host
            };
            format!("{}://{host}:{port}", e.spec.name)
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `(host, port)` of one `NAME://host:port` entry.
fn entry_address(entry: &str) -> Option<(String, i32)> {
    let entry = entry.trim();
    let address = entry.split_once("://").map_or(entry, |(_, rest)| rest);
    let (host, port) = address.rsplit_once(':')?;
    Some((host.trim_matches(['[', ']']).to_owned(), port.parse().ok()?))
}

/// `(host, port)` of the first listener in Kafka's
/// `PLAINTEXT://host:port,…` form (the inter-broker one).
#[must_use]
pub fn listener_address(listeners: &str) -> Option<(String, i32)> {
    entry_address(listeners.split(',').next()?)
}

/// `(host, port)` of the listener named `name` (case-insensitive, as
/// Kafka's listener names) in Kafka's `NAME://host:port,…` form; `None`
/// when the broker has no such listener.
#[must_use]
pub fn named_listener_address(listeners: &str, name: &str) -> Option<(String, i32)> {
    listeners
        .split(',')
        .find(|entry| {
            entry
                .trim()
                .split_once("://")
                .is_some_and(|(n, _)| n.eq_ignore_ascii_case(name))
        })
        .and_then(entry_address)
}

#[cfg(test)]
mod tests {
    use super::{listener_address, named_listener_address};

    #[test]
    fn a_named_listener_is_found_whatever_its_place() {
        let listeners = "INTERNAL://10.0.0.1:9093,SASL_SSL://broker.example:9094,[::1]:1";
        assert_eq!(
            named_listener_address(listeners, "sasl_ssl"),
            Some(("broker.example".to_owned(), 9094))
        );
        assert_eq!(
            named_listener_address(listeners, "INTERNAL"),
            Some(("10.0.0.1".to_owned(), 9093))
        );
        assert_eq!(named_listener_address(listeners, "SSL"), None);
    }

    #[test]
    fn listeners_give_host_and_port() {
        assert_eq!(
            listener_address("PLAINTEXT://127.0.0.1:9093"),
            Some(("127.0.0.1".to_owned(), 9093))
        );
        assert_eq!(
            listener_address("PLAINTEXT://[::1]:1,SSL://h:2"),
            Some(("::1".to_owned(), 1))
        );
        assert_eq!(listener_address("garbage"), None);
    }
}
