//! Cluster-wide admin calls: DescribeCluster, DescribeLogDirs,
//! ListTransactions and DescribeProducers.
//!
//! What Kafka keeps per broker (log directories, the transactions a
//! coordinator owns) is asked of every broker and merged, as Kafka's admin
//! client does; what a partition leader keeps (its producers) is asked of
//! the leader.

use {
    crate::{Client, ClientError, admin::topic_name, metadata::BrokerInfo},
    kafka_protocol::{
        messages::{
            ApiKey, DescribeClusterRequest, DescribeLogDirsRequest, DescribeProducersRequest,
            ListTransactionsRequest, describe_producers_request::TopicRequest,
        },
        protocol::StrBytes,
    },
    krabka_ids::{BrokerId, ProducerId},
    std::collections::BTreeMap,
};

/// The cluster as DescribeCluster (or, on brokers without it, Metadata) reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterDescription {
    /// The cluster id.
    pub cluster_id: Option<String>,
    /// The controller's id (in KRaft, a broker that forwards controller requests).
    pub controller: Option<BrokerId>,
    /// Every broker, sorted by id.
    pub brokers: Vec<BrokerInfo>,
}

/// One partition's replica in a log directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDirPartition {
    /// The topic.
    pub topic: String,
    /// The partition index.
    pub partition: i32,
    /// Bytes of the replica's log on this disk.
    pub size_bytes: i64,
    /// How far the replica is behind (0 for a leader).
    pub offset_lag: i64,
    /// Whether it is a future replica (a move between directories).
    pub is_future: bool,
}

/// One log directory of one broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDirDescription {
    /// The broker holding it.
    pub broker: BrokerId,
    /// Its path.
    pub path: String,
    /// Kafka's error code for the directory (0 when fine, 57 `KAFKA_STORAGE_ERROR` when offline).
    pub error_code: i16,
    /// The volume's size in bytes (-1 when the broker does not say, before v4).
    pub total_bytes: i64,
    /// The volume's free bytes (-1 when the broker does not say).
    pub usable_bytes: i64,
    /// The replicas in it.
    pub partitions: Vec<LogDirPartition>,
}

/// One transaction as ListTransactions reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedTransaction {
    /// The transactional id.
    pub transactional_id: String,
    /// The producer id holding it.
    pub producer_id: ProducerId,
    /// Kafka's state name (`Ongoing`, `CompleteCommit`, ...).
    pub state: String,
    /// The coordinator that answered.
    pub coordinator: BrokerId,
}

/// One producer active on a partition (DescribeProducers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveProducer {
    /// The producer id.
    pub producer_id: ProducerId,
    /// Its epoch.
    pub epoch: i32,
    /// The last sequence number written.
    pub last_sequence: i32,
    /// The timestamp of its last write (ms).
    pub last_timestamp: i64,
    /// The coordinator epoch of its last transaction marker (-1 when none).
    pub coordinator_epoch: i32,
    /// The first offset of its open transaction, -1 when none is open.
    pub current_txn_start_offset: i64,
}

impl Client {
    /// The cluster id, controller and brokers.
    ///
    /// # Errors
    ///
    /// The broker's error code, connection and protocol errors.
    pub async fn describe_cluster(&self) -> Result<ClusterDescription, ClientError> {
        let connection = self.any_connection().await?;
        if connection.version(ApiKey::DescribeCluster).is_err() {
            let meta = self.refresh_metadata(&[]).await?;
            let mut brokers: Vec<BrokerInfo> = meta.brokers.into_values().collect();
            brokers.sort_by_key(|b| b.id);
            return Ok(ClusterDescription {
                cluster_id: meta.cluster_id,
                controller: meta.controller,
                brokers,
            });
        }
        let mut request = DescribeClusterRequest::default();
        request.endpoint_type = 1; // brokers
        let response = connection.send(&request).await?;
        ClientError::check(
            response.error_code,
            response.error_message.as_deref(),
            || "DescribeCluster".into(),
        )?;
        let mut brokers: Vec<BrokerInfo> = response
            .brokers
            .iter()
            .map(|b| BrokerInfo {
                id: BrokerId(b.broker_id.0),
                host: b.host.to_string(),
                port: b.port,
                rack: b.rack.as_ref().map(ToString::to_string),
            })
            .collect();
        brokers.sort_by_key(|b| b.id);
        Ok(ClusterDescription {
            cluster_id: Some(response.cluster_id.to_string()).filter(|c| !c.is_empty()),
            controller: (response.controller_id.0 >= 0)
                .then_some(BrokerId(response.controller_id.0)),
            brokers,
        })
    }

    /// The known brokers, sorted by id, from fresh metadata.
    async fn all_brokers(&self) -> Result<Vec<BrokerInfo>, ClientError> {
        let meta = self.refresh_metadata(&[]).await?;
        let mut brokers: Vec<BrokerInfo> = meta.brokers.into_values().collect();
        brokers.sort_by_key(|b| b.id);
        Ok(brokers)
    }

    /// Every log directory of every broker with the replicas in it (all
    /// topics when `topics` is empty).
    ///
    /// # Errors
    ///
    /// A broker's top-level error code, connection and protocol errors.
    pub async fn describe_log_dirs(
        &self,
        topics: &[&str],
    ) -> Result<Vec<LogDirDescription>, ClientError> {
        let mut request = DescribeLogDirsRequest::default();
        if !topics.is_empty() {
            let meta = self.refresh_metadata(topics).await?;
            let mut wanted = Vec::new();
            for name in topics {
                let topic = meta.topic(name)?;
                let mut t = kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic::default();
                t.topic = topic_name(name);
                t.partitions = topic.partitions.iter().map(|p| p.partition).collect();
                wanted.push(t);
            }
            request.topics = Some(wanted);
        }
        let mut out = Vec::new();
        for broker in self.all_brokers().await? {
            let response = self.send_to(broker.id, &request).await?;
            ClientError::check(response.error_code, None, || {
                format!("DescribeLogDirs on broker {}", broker.id)
            })?;
            for dir in response.results {
                let mut partitions: Vec<LogDirPartition> = dir
                    .topics
                    .iter()
                    .flat_map(|t| {
                        t.partitions.iter().map(|p| LogDirPartition {
                            topic: t.name.0.to_string(),
                            partition: p.partition_index,
                            size_bytes: p.partition_size,
                            offset_lag: p.offset_lag,
                            is_future: p.is_future_key,
                        })
                    })
                    .collect();
                partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
                out.push(LogDirDescription {
                    broker: broker.id,
                    path: dir.log_dir.to_string(),
                    error_code: dir.error_code,
                    total_bytes: dir.total_bytes,
                    usable_bytes: dir.usable_bytes,
                    partitions,
                });
            }
        }
        Ok(out)
    }

    /// The transactions every coordinator holds, optionally only those in
    /// `states` (Kafka's state names) or of `producer_ids`.
    ///
    /// # Errors
    ///
    /// A coordinator's error code, connection and protocol errors.
    pub async fn list_transactions(
        &self,
        states: &[&str],
        producer_ids: &[ProducerId],
    ) -> Result<Vec<ListedTransaction>, ClientError> {
        let mut request = ListTransactionsRequest::default();
        request.state_filters = states
            .iter()
            .map(|s| StrBytes::from_string((*s).to_owned()))
            .collect();
        request.producer_id_filters = producer_ids
            .iter()
            .map(|p| kafka_protocol::messages::ProducerId(p.0))
            .collect();
        request.duration_filter = -1;
        let mut out = Vec::new();
        for broker in self.all_brokers().await? {
            let response = self.send_to(broker.id, &request).await?;
            ClientError::check(response.error_code, None, || {
                format!("ListTransactions on broker {}", broker.id)
            })?;
            out.extend(
                response
                    .transaction_states
                    .iter()
                    .map(|t| ListedTransaction {
                        transactional_id: t.transactional_id.0.to_string(),
                        producer_id: ProducerId(t.producer_id.0),
                        state: t.transaction_state.to_string(),
                        coordinator: broker.id,
                    }),
            );
        }
        out.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        Ok(out)
    }

    /// The producers active on each partition of `topic` (all when
    /// `partitions` is empty), from each partition's leader; one result per
    /// partition, sorted by partition.
    ///
    /// # Errors
    ///
    /// Metadata, connection and protocol errors for the whole call; a
    /// partition's Kafka error in its result.
    pub async fn describe_producers(
        &self,
        topic: &str,
        partitions: &[i32],
    ) -> Result<Vec<(i32, Result<Vec<ActiveProducer>, ClientError>)>, ClientError> {
        let info = self.refresh_metadata(&[topic]).await?.topic(topic)?.clone();
        let wanted: Vec<i32> = if partitions.is_empty() {
            info.partitions.iter().map(|p| p.partition).collect()
        } else {
            partitions.to_vec()
        };
        let mut by_leader: BTreeMap<BrokerId, Vec<i32>> = BTreeMap::new();
        for &p in &wanted {
            let leader = self.leader(topic, p).await?;
            by_leader.entry(leader.id).or_default().push(p);
        }
        let mut out = Vec::new();
        for (leader, group) in by_leader {
            let mut t = TopicRequest::default();
            t.name = topic_name(topic);
            t.partition_indexes = group.clone();
            let mut request = DescribeProducersRequest::default();
            request.topics = vec![t];
            let response = self.send_to(leader, &request).await?;
            for t in &response.topics {
                for p in &t.partitions {
                    let result =
                        ClientError::check(p.error_code, p.error_message.as_deref(), || {
                            format!("DescribeProducers {topic}-{}", p.partition_index)
                        })
                        .map(|()| {
                            p.active_producers
                                .iter()
                                .map(|s| ActiveProducer {
                                    producer_id: ProducerId(s.producer_id.0),
                                    epoch: s.producer_epoch,
                                    last_sequence: s.last_sequence,
                                    last_timestamp: s.last_timestamp,
                                    coordinator_epoch: s.coordinator_epoch,
                                    current_txn_start_offset: s.current_txn_start_offset,
                                })
                                .collect()
                        });
                    out.push((p.partition_index, result));
                }
            }
        }
        out.sort_by_key(|(p, _)| *p);
        Ok(out)
    }
}
