//! ElectLeaders (`kafka-leader-election`, `Admin.electLeaders`) on one node.
//!
//! This node leads every partition it hosts and is its only replica, so the
//! preferred leader is always the leader and no unclean election can be
//! needed: each named partition that exists answers ELECTION_NOT_NEEDED,
//! as Kafka's controller does for a partition whose preferred replica
//! already leads, and a name that does not exist answers
//! UNKNOWN_TOPIC_OR_PARTITION. A request for every partition (null list)
//! gets an empty answer, since Kafka leaves out the partitions that needed
//! no election.

use {
    crate::broker::Broker,
    kafka_protocol::{
        error::ResponseError,
        messages::{
            ElectLeadersRequest, ElectLeadersResponse,
            elect_leaders_response::{PartitionResult, ReplicaElectionResult},
        },
        protocol::StrBytes,
    },
};

/// Kafka's `ElectionType`: 0 preferred, 1 unclean.
const ELECTION_TYPES: [i8; 2] = [0, 1];

/// Handles ElectLeaders.
#[must_use]
pub fn handle_elect_leaders(
    broker: &Broker,
    version: i16,
    request: &ElectLeadersRequest,
) -> ElectLeadersResponse {
    let mut response = ElectLeadersResponse::default();
    // v0 has no election type (always preferred) and no top-level error.
    if version >= 1 && !ELECTION_TYPES.contains(&request.election_type) {
        response.error_code = ResponseError::InvalidRequest.code();
        return response;
    }
    let Some(topics) = &request.topic_partitions else {
        return response;
    };
    for topic in topics {
        let mut result = ReplicaElectionResult::default();
        result.topic = topic.topic.clone();
        for &partition in &topic.partitions {
            let mut p = PartitionResult::default();
            p.partition_id = partition;
            let error = if broker.partitions.contains(&topic.topic.0, partition) {
                ResponseError::ElectionNotNeeded
            } else {
                ResponseError::UnknownTopicOrPartition
            };
            p.error_code = error.code();
            p.error_message = Some(StrBytes::from_static_str(match error {
                ResponseError::ElectionNotNeeded => {
                    "Leader election not needed for topic partition."
                }
                _ => "This server does not host this topic-partition.",
            }));
            result.partition_result.push(p);
        }
        response.replica_election_results.push(result);
    }
    response
}
