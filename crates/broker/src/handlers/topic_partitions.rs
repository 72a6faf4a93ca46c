//! DescribeTopicPartitions (KIP-966; `kafka-topics.sh --describe` uses it
//! since Kafka 3.7): the partitions of the named topics, or of every topic,
//! in name order, paged by a partition limit and a cursor.
//!
//! Each partition's leader and replicas are Metadata's
//! ([`super::placement`]), with empty eligible-leader lists (no ELR
//! without replication).

use {
    super::metadata::topic_operations,
    crate::{broker::Broker, partition::LEADER_EPOCH, topics::TopicMeta},
    kafka_protocol::{
        error::ResponseError,
        messages::{
            DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
            describe_topic_partitions_response::{
                Cursor, DescribeTopicPartitionsResponsePartition,
                DescribeTopicPartitionsResponseTopic,
            },
        },
        protocol::StrBytes,
    },
};

/// Kafka's `max.request.partition.size.limit` default: the most partitions
/// one answer carries, whatever the request asks.
pub const MAX_PARTITIONS_PER_RESPONSE: i32 = 2000;

fn name(text: &str) -> TopicName {
    TopicName(StrBytes::from_string(text.to_owned()))
}

fn error_topic(topic: &str, code: i16) -> DescribeTopicPartitionsResponseTopic {
    let mut t = DescribeTopicPartitionsResponseTopic::default();
    t.name = Some(name(topic));
    t.error_code = code;
    t.topic_authorized_operations = i32::MIN;
    t
}

fn partitions(
    broker: &Broker,
    meta: &TopicMeta,
    from: i32,
    count: i32,
) -> Vec<DescribeTopicPartitionsResponsePartition> {
    (from..from.saturating_add(count).min(meta.partitions))
        .map(|index| {
            let placed = super::placement::placement(broker, &meta.name, meta.id, index);
            let mut p = DescribeTopicPartitionsResponsePartition::default();
            p.partition_index = index;
            p.leader_id = placed.leader;
            p.leader_epoch = LEADER_EPOCH.0;
            p.replica_nodes = placed.replicas;
            p.isr_nodes = placed.isr;
            p.offline_replicas = placed.offline;
            p.error_code = placed.error_code;
            p.eligible_leader_replicas = Some(Vec::new());
            p.last_known_elr = Some(Vec::new());
            p
        })
        .collect()
}

/// Handles DescribeTopicPartitions v0.
#[must_use]
pub fn handle_describe_topic_partitions(
    broker: &Broker,
    request: &DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let mut response = DescribeTopicPartitionsResponse::default();
    let mut wanted: Vec<String> = if request.topics.is_empty() {
        broker
            .registry
            .topics()
            .into_iter()
            .map(|t| t.name)
            .collect()
    } else {
        request
            .topics
            .iter()
            .map(|t| t.name.0.to_string())
            .collect()
    };
    wanted.sort();
    wanted.dedup();
    let cursor = request
        .cursor
        .as_ref()
        .map(|c| (c.topic_name.0.to_string(), c.partition_index));
    let refusal = match &cursor {
        Some((_, index)) if *index < 0 => Some("cursor partition index cannot be negative"),
        Some((topic, _)) if !request.topics.is_empty() && !wanted.contains(topic) => {
            Some("DescribeTopicPartitionsRequest topic list should contain the cursor topic")
        }
        _ => None,
    };
    if let Some(reason) = refusal {
        tracing::debug!(reason, "DescribeTopicPartitions refused");
        response.topics = wanted
            .iter()
            .map(|t| error_topic(t, ResponseError::InvalidRequest.code()))
            .collect();
        return response;
    }
    let mut left = request
        .response_partition_limit
        .clamp(1, MAX_PARTITIONS_PER_RESPONSE);
    let start = cursor.as_ref().map(|(t, _)| t.as_str());
    let mut topics = wanted
        .iter()
        .filter(|t| start.is_none_or(|s| t.as_str() >= s))
        .peekable();
    while let Some(topic) = topics.next() {
        let Some(meta) = broker.registry.get(topic) else {
            response.topics.push(error_topic(
                topic,
                ResponseError::UnknownTopicOrPartition.code(),
            ));
            continue;
        };
        let from = match &cursor {
            Some((t, index)) if t == topic => *index,
            _ => 0,
        };
        let mut t = DescribeTopicPartitionsResponseTopic::default();
        t.name = Some(name(topic));
        t.topic_id = meta.id;
        t.is_internal = crate::topics::names::is_internal(topic);
        t.topic_authorized_operations = topic_operations();
        t.partitions = partitions(broker, &meta, from, left);
        let sent = i32::try_from(t.partitions.len()).unwrap_or(i32::MAX);
        left -= sent;
        let next_index = from.saturating_add(sent);
        response.topics.push(t);
        if left <= 0 {
            // Full: the next answer starts where this one stopped.
            let next = if next_index < meta.partitions {
                Some((topic.clone(), next_index))
            } else {
                topics.peek().map(|t| ((*t).clone(), 0))
            };
            response.next_cursor = next.map(|(topic, index)| {
                let mut c = Cursor::default();
                c.topic_name = name(&topic);
                c.partition_index = index;
                c
            });
            break;
        }
    }
    response
}
