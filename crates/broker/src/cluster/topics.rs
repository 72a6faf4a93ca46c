//! Shared topics in cluster mode: the database is the truth, the local
//! registry a mirror of it.
//!
//! An admin change on any broker is written to the database first and then
//! applied here at once; every other broker notices the bumped metadata
//! version on its next renewal round (within one renewal interval, well
//! inside a lease period) and mirrors the snapshot into its own registry.
//! Each classic partition lives on the one broker the database assigned it
//! to: only that broker opens its log; the others answer
//! `NOT_LEADER_OR_FOLLOWER`, and Metadata names the assigned broker as
//! leader while it is live (`LEADER_NOT_AVAILABLE` while it is down).
//! Internal topics (`__consumer_offsets`, …) stay local to each broker.

use {
    super::ClusterNode,
    crate::{
        broker::Broker,
        error::BrokerError,
        handlers::admin::AdminError,
        topics::{TopicMeta, config as topic_config, names},
    },
    kafka_protocol::error::ResponseError,
    krabka_cluster::{
        ClusterError,
        topics::{MetadataSnapshot, TopicRecord},
    },
    krabka_ids::BrokerId,
    std::{collections::BTreeMap, sync::Arc},
};

fn admin_error(e: ClusterError) -> AdminError {
    let code = match &e {
        ClusterError::TopicExists(_) => ResponseError::TopicAlreadyExists,
        ClusterError::UnknownTopic(_) => ResponseError::UnknownTopicOrPartition,
        ClusterError::Invalid(_) => ResponseError::InvalidPartitions,
        _ => ResponseError::KafkaStorageError,
    };
    AdminError::new(code, e.to_string())
}

impl ClusterNode {
    /// The broker a classic partition is assigned to, as of the last
    /// snapshot (`None` for an unknown topic or partition).
    #[must_use]
    pub fn assigned(&self, topic: &str, partition: i32) -> Option<BrokerId> {
        let metadata = self.lock_metadata();
        let index = usize::try_from(partition).ok()?;
        metadata.topics.get(topic)?.partitions.get(index).copied()
    }

    /// Whether `node` is live as of the last renewal round.
    #[must_use]
    pub fn is_live(&self, node: BrokerId) -> bool {
        self.live_brokers().iter().any(|b| b.node == node)
    }

    fn lock_metadata(&self) -> std::sync::MutexGuard<'_, MetadataSnapshot> {
        self.metadata
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Brokers for `count` new partitions from `first`: the explicit ones
    /// if given (each must be live), else spread over the live brokers.
    fn place(
        &self,
        first: i32,
        count: i32,
        explicit: Option<Vec<BrokerId>>,
    ) -> Result<Vec<BrokerId>, AdminError> {
        let live = self.live_brokers();
        if let Some(explicit) = explicit {
            if let Some(dead) = explicit
                .iter()
                .find(|b| !live.iter().any(|l| l.node == **b))
            {
                return Err(AdminError::new(
                    ResponseError::InvalidReplicaAssignment,
                    format!("Broker {} in the replica assignment is not live", dead.0),
                ));
            }
            return Ok(explicit);
        }
        // Kafka starts at a random broker so small topics do not pile up.
        let start = (uuid::Uuid::new_v4().as_u128() % 1024) as usize;
        krabka_cluster::assignment::assign(&live, first, count, start).ok_or_else(|| {
            AdminError::new(
                ResponseError::BrokerNotAvailable,
                "No live broker in the cluster",
            )
        })
    }

    /// Creates a topic in the database and mirrors it here.
    ///
    /// # Errors
    ///
    /// An [`AdminError`] with Kafka's code (`TOPIC_ALREADY_EXISTS`,
    /// `KAFKA_STORAGE_ERROR` when the database is out of reach, …).
    pub async fn create_topic(
        &self,
        broker: &Arc<Broker>,
        name: &str,
        partitions: i32,
        explicit: Option<Vec<BrokerId>>,
        configs: BTreeMap<String, String>,
    ) -> Result<TopicMeta, AdminError> {
        let placement = self.place(0, partitions, explicit)?;
        let record = TopicRecord {
            name: name.to_owned(),
            id: uuid::Uuid::new_v4(),
            partitions: placement,
            configs: configs.clone(),
        };
        self.cluster
            .create_topic(&record)
            .await
            .map_err(admin_error)?;
        tracing::info!(topic = %name, partitions, "created topic in the cluster");
        self.sync_metadata(broker)
            .await
            .map_err(|e| AdminError::new(ResponseError::KafkaStorageError, e.to_string()))?;
        Ok(TopicMeta {
            name: name.to_owned(),
            id: record.id,
            partitions,
            configs,
        })
    }

    /// Deletes a topic in the database and here. With `remote_data`, the
    /// same transaction records its partitions' remote data as pending
    /// deletions, which every broker's remote log manager works through
    /// ([`super::remote_deletions`]).
    ///
    /// # Errors
    ///
    /// An [`AdminError`] with Kafka's code.
    pub async fn delete_topic(
        &self,
        broker: &Arc<Broker>,
        name: &str,
        remote_data: bool,
    ) -> Result<(), AdminError> {
        if remote_data {
            self.cluster.delete_topic_and_remote_data(name).await
        } else {
            self.cluster.delete_topic(name).await
        }
        .map_err(admin_error)?;
        self.sync_metadata(broker)
            .await
            .map_err(|e| AdminError::new(ResponseError::KafkaStorageError, e.to_string()))
    }

    /// Grows a topic from `current` to `count` partitions in the database
    /// and here.
    ///
    /// # Errors
    ///
    /// An [`AdminError`] with Kafka's code.
    pub async fn add_partitions(
        &self,
        broker: &Arc<Broker>,
        name: &str,
        current: i32,
        count: i32,
        explicit: Option<Vec<BrokerId>>,
    ) -> Result<(), AdminError> {
        let placement = self.place(current, count - current, explicit)?;
        self.cluster
            .add_partitions(name, current, &placement)
            .await
            .map_err(admin_error)?;
        self.sync_metadata(broker)
            .await
            .map_err(|e| AdminError::new(ResponseError::KafkaStorageError, e.to_string()))
    }

    /// Reads the database's metadata if its version moved and mirrors it
    /// into the local registry and partitions.
    ///
    /// # Errors
    ///
    /// [`BrokerError::Cluster`] when the database cannot be read,
    /// [`BrokerError::Task`] when the local apply failed to run.
    pub async fn sync_metadata(&self, broker: &Arc<Broker>) -> Result<(), BrokerError> {
        let version = self.cluster.metadata_version().await?;
        if self.lock_metadata().version == version && version != 0 {
            return Ok(());
        }
        let snapshot = self.cluster.load_metadata().await?;
        let node = self.node();
        let applying = Arc::clone(broker);
        // Known before the registry shows it, so Metadata never names a
        // topic without its partitions' brokers.
        *self.lock_metadata() = snapshot.clone();
        crate::blocking::run(move || apply(&applying, node, &snapshot))
            .await
            .map_err(|e| BrokerError::Task(e.to_string()))?;
        Ok(())
    }
}

/// Mirrors the cluster's dynamic broker configs into `broker`'s registry
/// (a resource whose configs were all deleted is cleared too); when the
/// cluster default or this node's own configs change a keystore or
/// truststore, loads it and serves it to new connections, as the broker
/// that took the alter did (one that does not load is logged and the
/// listener keeps what it serves).
fn mirror_broker_configs(broker: &Broker, node: BrokerId, snapshot: &MetadataSnapshot) {
    let own = node.0.to_string();
    let mut tls_changed = false;
    for resource in ["", own.as_str()]
        .into_iter()
        .map(str::to_owned)
        .chain(snapshot.broker_configs.keys().cloned())
        .collect::<std::collections::BTreeSet<_>>()
    {
        let current = broker.registry.broker_configs(&resource);
        let next = snapshot
            .broker_configs
            .get(&resource)
            .cloned()
            .unwrap_or_default();
        if current == next {
            continue;
        }
        if (resource.is_empty() || resource == own)
            && crate::security::Security::tls_changed(&current, &next)
        {
            tls_changed = true;
        }
        if let Err(e) = broker.registry.set_broker_configs(&resource, next) {
            tracing::warn!(resource, error = %e, "cannot mirror broker configs");
        }
    }
    if tls_changed {
        let per_broker = broker.registry.broker_configs(&own);
        let defaults = broker.registry.broker_configs("");
        match broker
            .security
            .prepare_tls(&broker.config, &per_broker, &defaults)
        {
            Ok(prepared) => broker.security.install_tls(prepared),
            Err(reason) => {
                tracing::warn!(%reason, "a TLS change from the cluster does not load here; listeners keep their keystores");
            }
        }
    }
}

/// Mirrors `snapshot` into `broker`'s registry and opens the partitions
/// assigned to `node`. Blocking (registry writes, log opens).
fn apply(broker: &Broker, node: BrokerId, snapshot: &MetadataSnapshot) {
    mirror_broker_configs(broker, node, snapshot);
    if let Some(member) = broker.cluster.get() {
        member.mirror_security(broker, snapshot);
    }
    for local in broker.registry.topics() {
        if names::is_internal(&local.name) {
            continue;
        }
        let current = snapshot.topics.get(&local.name);
        if current.is_none_or(|t| t.id != local.id) {
            tracing::info!(topic = %local.name, "topic deleted in the cluster");
            if let Err(e) = broker.registry.delete(&local.name) {
                tracing::warn!(topic = %local.name, error = %e, "cannot forget topic");
            }
            if let Err(e) = broker.partitions.delete_topic(&local.name) {
                tracing::warn!(topic = %local.name, error = %e, "cannot delete topic logs");
            }
        }
    }
    for topic in snapshot.topics.values() {
        let count = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
        let meta = match broker.registry.get(&topic.name) {
            None => match broker.registry.create_with_id(
                &topic.name,
                topic.id,
                count,
                topic.configs.clone(),
            ) {
                Ok(meta) => meta,
                Err(e) => {
                    tracing::warn!(topic = %topic.name, error = %e, "cannot mirror topic");
                    continue;
                }
            },
            Some(meta) => {
                if meta.partitions < count
                    && let Err(e) = broker.registry.set_partitions(&topic.name, count)
                {
                    tracing::warn!(topic = %topic.name, error = %e, "cannot mirror partitions");
                }
                if meta.configs != topic.configs {
                    if let Err(e) = broker
                        .registry
                        .set_topic_configs(&topic.name, topic.configs.clone())
                    {
                        tracing::warn!(topic = %topic.name, error = %e, "cannot mirror configs");
                    }
                }
                match broker.registry.get(&topic.name) {
                    Some(meta) => meta,
                    None => continue,
                }
            }
        };
        broker.refresh_topic_config(&meta);
        let (log_config, extras) =
            topic_config::log_config(&broker.config, &broker.registry, &meta.configs);
        // A diskless partition is served by every broker (its batches are
        // ordered by the cluster's batch coordinator, not by an owner).
        let everywhere = extras.diskless_enable && !names::is_state_topic(&topic.name);
        for (index, owner) in (0..).zip(&topic.partitions) {
            if (*owner == node || everywhere) && !broker.partitions.contains(&topic.name, index) {
                if let Err(e) = broker.partitions.open_partitions(
                    &topic.name,
                    topic.id,
                    index..index + 1,
                    &log_config,
                    extras,
                ) {
                    tracing::error!(topic = %topic.name, partition = index, error = %e, "cannot open partition");
                }
            }
        }
    }
}
