//! The cluster as a Metadata response describes it: brokers, topics with
//! their ids, partitions and leaders.
//!
//! Plain owned types (strings, `krabka-ids` newtypes) so callers never touch
//! the wire structs, with lookups the producer and consumer need on every
//! batch (leader of a partition, topic by name).

use {
    crate::ClientError,
    kafka_protocol::messages::MetadataResponse,
    krabka_ids::{BrokerId, LeaderEpoch, TopicId},
    std::collections::HashMap,
};

/// One broker of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerInfo {
    /// The broker's node id.
    pub id: BrokerId,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: i32,
    /// `broker.rack`, when set.
    pub rack: Option<String>,
}

impl BrokerInfo {
    /// `host:port`.
    #[must_use]
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// One partition of a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// Partition index.
    pub partition: i32,
    /// The leader, if the partition has one.
    pub leader: Option<BrokerId>,
    /// The leader's epoch.
    pub leader_epoch: LeaderEpoch,
    /// All replicas.
    pub replicas: Vec<BrokerId>,
    /// In-sync replicas.
    pub isr: Vec<BrokerId>,
    /// Kafka's error code for this partition (0 when fine, e.g. 5 `LEADER_NOT_AVAILABLE`).
    pub error_code: i16,
}

/// One topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// Topic name.
    pub name: String,
    /// Topic id; `None` when the broker did not send one (Metadata < v10).
    pub id: Option<TopicId>,
    /// Whether it is an internal topic (`__consumer_offsets`, ...).
    pub is_internal: bool,
    /// Partitions, sorted by index.
    pub partitions: Vec<PartitionInfo>,
}

impl TopicInfo {
    /// The partition with index `partition`.
    #[must_use]
    pub fn partition(&self, partition: i32) -> Option<&PartitionInfo> {
        self.partitions.iter().find(|p| p.partition == partition)
    }
}

/// A snapshot of cluster metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterMetadata {
    /// The cluster id.
    pub cluster_id: Option<String>,
    /// The controller (or, in KRaft, a broker the client may send controller requests to).
    pub controller: Option<BrokerId>,
    /// Brokers by id.
    pub brokers: HashMap<BrokerId, BrokerInfo>,
    /// Topics that exist, by name.
    pub topics: HashMap<String, TopicInfo>,
    /// Topics the broker reported an error for (name, Kafka error code).
    pub topic_errors: Vec<(String, i16)>,
}

impl ClusterMetadata {
    /// Builds the snapshot from a Metadata response.
    #[must_use]
    pub fn from_response(response: &MetadataResponse) -> Self {
        let brokers = response
            .brokers
            .iter()
            .map(|b| {
                let id = BrokerId(b.node_id.0);
                let info = BrokerInfo {
                    id,
                    host: b.host.to_string(),
                    port: b.port,
                    rack: b.rack.as_ref().map(ToString::to_string),
                };
                (id, info)
            })
            .collect();
        let mut topics = HashMap::new();
        let mut topic_errors = Vec::new();
        for topic in &response.topics {
            let name = topic
                .name
                .as_ref()
                .map(|n| n.0.to_string())
                .unwrap_or_default();
            if topic.error_code != 0 {
                topic_errors.push((name, topic.error_code));
                continue;
            }
            let mut partitions: Vec<PartitionInfo> = topic
                .partitions
                .iter()
                .map(|p| PartitionInfo {
                    partition: p.partition_index,
                    leader: (p.leader_id.0 >= 0).then_some(BrokerId(p.leader_id.0)),
                    leader_epoch: LeaderEpoch(p.leader_epoch),
                    replicas: p.replica_nodes.iter().map(|b| BrokerId(b.0)).collect(),
                    isr: p.isr_nodes.iter().map(|b| BrokerId(b.0)).collect(),
                    error_code: p.error_code,
                })
                .collect();
            partitions.sort_by_key(|p| p.partition);
            let info = TopicInfo {
                name: name.clone(),
                id: (!topic.topic_id.is_nil()).then_some(topic.topic_id),
                is_internal: topic.is_internal,
                partitions,
            };
            topics.insert(name, info);
        }
        Self {
            cluster_id: response.cluster_id.as_ref().map(ToString::to_string),
            controller: (response.controller_id.0 >= 0)
                .then_some(BrokerId(response.controller_id.0)),
            brokers,
            topics,
            topic_errors,
        }
    }

    /// The topic called `name`.
    ///
    /// # Errors
    ///
    /// Returns the broker's error for the topic, or `UNKNOWN_TOPIC_OR_PARTITION`
    /// (3) when the topic is not in this snapshot.
    pub fn topic(&self, name: &str) -> Result<&TopicInfo, ClientError> {
        if let Some(topic) = self.topics.get(name) {
            return Ok(topic);
        }
        let code = self
            .topic_errors
            .iter()
            .find(|(n, _)| n == name)
            .map_or(3, |(_, code)| *code);
        Err(ClientError::broker(
            code,
            None,
            format!("metadata for topic {name}"),
        ))
    }

    /// The leader of `topic`/`partition`.
    ///
    /// # Errors
    ///
    /// Returns the errors of [`ClusterMetadata::topic`], the partition's error
    /// code, or `LEADER_NOT_AVAILABLE` (5) when it has no leader.
    pub fn leader(&self, topic: &str, partition: i32) -> Result<&BrokerInfo, ClientError> {
        let context = || format!("leader of {topic}-{partition}");
        let info = self
            .topic(topic)?
            .partition(partition)
            .ok_or_else(|| ClientError::broker(3, None, context()))?;
        ClientError::check(info.error_code, None, context)?;
        info.leader
            .and_then(|id| self.brokers.get(&id))
            .ok_or_else(|| ClientError::broker(5, None, context()))
    }

    /// Merges a newer (possibly partial) snapshot into this one.
    pub fn merge(&mut self, newer: Self) {
        if newer.cluster_id.is_some() {
            self.cluster_id = newer.cluster_id;
        }
        self.controller = newer.controller.or(self.controller);
        if !newer.brokers.is_empty() {
            self.brokers = newer.brokers;
        }
        for (name, _) in &newer.topic_errors {
            self.topics.remove(name);
        }
        self.topic_errors = newer.topic_errors;
        self.topics.extend(newer.topics);
    }
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        assert2::check,
        kafka_protocol::{
            messages::{
                TopicName,
                metadata_response::{
                    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
                },
            },
            protocol::StrBytes,
        },
    };

    fn response() -> MetadataResponse {
        let mut broker = MetadataResponseBroker::default();
        broker.node_id = 1.into();
        broker.host = StrBytes::from_static_str("127.0.0.1");
        broker.port = 9092;
        let mut p0 = MetadataResponsePartition::default();
        p0.partition_index = 1;
        p0.leader_id = 1.into();
        let mut p1 = MetadataResponsePartition::default();
        p1.partition_index = 0;
        p1.leader_id = (-1).into();
        let mut topic = MetadataResponseTopic::default();
        topic.name = Some(TopicName(StrBytes::from_static_str("t")));
        topic.topic_id = uuid::Uuid::from_u128(7);
        topic.partitions = vec![p0, p1];
        let mut missing = MetadataResponseTopic::default();
        missing.name = Some(TopicName(StrBytes::from_static_str("gone")));
        missing.error_code = 3;
        let mut response = MetadataResponse::default();
        response.brokers = vec![broker];
        response.topics = vec![topic, missing];
        response.controller_id = 1.into();
        response
    }

    #[test]
    fn leaders_and_errors() {
        let meta = ClusterMetadata::from_response(&response());
        check!(meta.leader("t", 1).unwrap().addr() == "127.0.0.1:9092");
        check!(meta.leader("t", 0).unwrap_err().code() == Some(5));
        check!(meta.leader("t", 9).unwrap_err().code() == Some(3));
        check!(meta.topic("gone").unwrap_err().code() == Some(3));
        let t = meta.topic("t").unwrap();
        check!(t.id == Some(uuid::Uuid::from_u128(7)));
        check!(t.partitions.iter().map(|p| p.partition).collect::<Vec<_>>() == vec![0, 1]);
    }
}
