//! Metadata and DescribeCluster: this node is the only broker, the
//! controller, and the leader and only in-sync replica of every partition.

use {
    super::admin,
    crate::{broker::Broker, partition::LEADER_EPOCH, topics::TopicMeta},
    kafka_protocol::{
        error::ResponseError,
        messages::{
            BrokerId, DescribeClusterRequest, DescribeClusterResponse, MetadataRequest,
            MetadataResponse, TopicName,
            describe_cluster_response::DescribeClusterBroker,
            metadata_response::{
                MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
            },
        },
        protocol::StrBytes,
    },
    std::{collections::BTreeMap, sync::Arc},
};

/// `authorized_operations` when the client did not ask for them.
pub const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

/// Kafka's ACL operation codes a topic supports (no authorizer: all allowed).
const TOPIC_OPERATIONS: &[i32] = &[3, 4, 5, 6, 7, 8, 10, 11];
/// Cluster operations (CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE).
const CLUSTER_OPERATIONS: &[i32] = &[5, 7, 8, 9, 10, 11, 12];

/// The `topic_authorized_operations` bits of every topic (no authorizer).
#[must_use]
pub fn topic_operations() -> i32 {
    bits(TOPIC_OPERATIONS)
}

fn bits(ops: &[i32]) -> i32 {
    ops.iter().fold(0, |acc, op| acc | (1 << op))
}

fn topic_entry(broker: &Broker, topic: &TopicMeta, with_ops: bool) -> MetadataResponseTopic {
    let mut entry = MetadataResponseTopic::default();
    entry.name = Some(TopicName(StrBytes::from_string(topic.name.clone())));
    entry.topic_id = topic.id;
    entry.is_internal = crate::topics::names::is_internal(&topic.name);
    entry.topic_authorized_operations = if with_ops {
        bits(TOPIC_OPERATIONS)
    } else {
        OPERATIONS_NOT_REQUESTED
    };
    entry.partitions = (0..topic.partitions)
        .map(|index| {
            let placed = super::placement::placement(broker, &topic.name, topic.id, index);
            let mut p = MetadataResponsePartition::default();
            p.partition_index = index;
            p.leader_id = placed.leader;
            p.leader_epoch = LEADER_EPOCH.0;
            p.replica_nodes = placed.replicas;
            p.isr_nodes = placed.isr;
            p.offline_replicas = placed.offline;
            p.error_code = placed.error_code;
            p
        })
        .collect();
    entry
}

fn error_entry(name: Option<String>, id: uuid::Uuid, code: i16) -> MetadataResponseTopic {
    let mut entry = MetadataResponseTopic::default();
    entry.name = name.map(|n| TopicName(StrBytes::from_string(n)));
    entry.topic_id = id;
    entry.error_code = code;
    entry.topic_authorized_operations = OPERATIONS_NOT_REQUESTED;
    entry
}

/// The brokers clients are told about, as (id, host, port, rack): this node
/// alone, or in cluster mode every live broker.
fn brokers(broker: &Broker) -> Vec<(i32, String, i32, Option<String>)> {
    if let Some(node) = broker.cluster.get() {
        return node
            .live_brokers()
            .into_iter()
            .filter_map(|b| {
                let (host, port) = crate::cluster::listener_address(&b.listeners)?;
                Some((b.node.0, host, port, b.rack))
            })
            .collect();
    }
    let (host, port) = broker.advertised();
    vec![(broker.config.node_id, host, port, None)]
}

/// The controller id: this node, or in cluster mode the controller lease's
/// holder.
fn controller(broker: &Broker) -> i32 {
    broker
        .cluster
        .get()
        .and_then(|node| node.controller())
        .map_or(broker.config.node_id, |id| id.0)
}

/// Handles Metadata.
pub async fn handle_metadata(
    broker: &Arc<Broker>,
    version: i16,
    request: MetadataRequest,
) -> MetadataResponse {
    let mut response = MetadataResponse::default();
    response.brokers = brokers(broker)
        .into_iter()
        .map(|(id, host, port, rack)| {
            let mut node = MetadataResponseBroker::default();
            node.node_id = BrokerId(id);
            node.host = StrBytes::from_string(host);
            node.port = port;
            node.rack = rack.map(StrBytes::from_string);
            node
        })
        .collect();
    response.cluster_id = Some(StrBytes::from_string(broker.cluster_id()));
    response.controller_id = BrokerId(controller(broker));
    response.cluster_authorized_operations = if request.include_cluster_authorized_operations {
        bits(CLUSTER_OPERATIONS)
    } else {
        OPERATIONS_NOT_REQUESTED
    };
    let with_ops = request.include_topic_authorized_operations;
    // v0: an empty list means all topics; v1+: null means all, empty none.
    let wanted = match request.topics {
        None => None,
        Some(list) if list.is_empty() && version == 0 => None,
        Some(list) => Some(list),
    };
    let Some(wanted) = wanted else {
        response.topics = broker
            .registry
            .topics()
            .iter()
            .map(|t| topic_entry(broker, t, with_ops))
            .collect();
        return response;
    };
    // Auto-creation exists before v4 unconditionally, from v4 on request.
    let may_create =
        broker.config.auto_create_topics && (version < 4 || request.allow_auto_topic_creation);
    let mut seen = BTreeMap::new();
    for topic in wanted {
        let entry = match topic.name {
            Some(name) => {
                let name = name.0.to_string();
                if seen.insert(name.clone(), ()).is_some() {
                    continue;
                }
                match broker.registry.get(&name) {
                    Some(meta) => topic_entry(broker, &meta, with_ops),
                    None if may_create => {
                        match admin::create_topic(
                            broker,
                            &name,
                            -1,
                            -1,
                            &[],
                            BTreeMap::new(),
                            false,
                        )
                        .await
                        {
                            Ok(meta) => {
                                tracing::info!(topic = %name, "auto-created topic");
                                topic_entry(broker, &meta, with_ops)
                            }
                            Err(e) if e.code == ResponseError::TopicAlreadyExists.code() => {
                                match broker.registry.get(&name) {
                                    Some(meta) => topic_entry(broker, &meta, with_ops),
                                    None => error_entry(
                                        Some(name),
                                        uuid::Uuid::nil(),
                                        ResponseError::UnknownTopicOrPartition.code(),
                                    ),
                                }
                            }
                            Err(e) => error_entry(Some(name), uuid::Uuid::nil(), e.code),
                        }
                    }
                    None => {
                        let code = if crate::topics::names::validate_topic_name(&name).is_err() {
                            ResponseError::InvalidTopicException.code()
                        } else {
                            ResponseError::UnknownTopicOrPartition.code()
                        };
                        error_entry(Some(name), uuid::Uuid::nil(), code)
                    }
                }
            }
            None => match broker.registry.by_id(topic.topic_id) {
                Some(meta) => topic_entry(broker, &meta, with_ops),
                None => error_entry(None, topic.topic_id, ResponseError::UnknownTopicId.code()),
            },
        };
        response.topics.push(entry);
    }
    response
}

/// Handles DescribeCluster.
#[must_use]
pub fn handle_describe_cluster(
    broker: &Broker,
    request: &DescribeClusterRequest,
) -> DescribeClusterResponse {
    let mut response = DescribeClusterResponse::default();
    response.cluster_id = StrBytes::from_string(broker.cluster_id());
    response.controller_id = BrokerId(controller(broker));
    response.endpoint_type = request.endpoint_type;
    response.brokers = brokers(broker)
        .into_iter()
        .map(|(id, host, port, rack)| {
            let mut node = DescribeClusterBroker::default();
            node.broker_id = BrokerId(id);
            node.host = StrBytes::from_string(host);
            node.port = port;
            node.rack = rack.map(StrBytes::from_string);
            node
        })
        .collect();
    response.cluster_authorized_operations = if request.include_cluster_authorized_operations {
        bits(CLUSTER_OPERATIONS)
    } else {
        OPERATIONS_NOT_REQUESTED
    };
    response
}
