//! The coordinator's side of the broker's request dispatch: the group APIs'
//! requests and the encoding of their answers.
//!
//! The broker's codec has one variant, `Request::Group`, for every group
//! API of the API table ([`crate::api_versions::APIS`], which decodes each
//! into its [`GroupRequest`] variant), and the dispatcher hands it to
//! [`handle`]. Keeping the per-API plumbing in this module keeps the
//! broker's own files to one line each.

use std::sync::Arc;

use super::RequestContext;
use crate::{broker::Broker, network::codec::encode_response};
use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::OffsetCommitResponse;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, DeleteGroupsRequest,
    DescribeGroupsRequest, FindCoordinatorRequest, HeartbeatRequest, JoinGroupRequest,
    LeaveGroupRequest, ListGroupsRequest, OffsetCommitRequest, OffsetDeleteRequest,
    OffsetFetchRequest, RequestHeader, SyncGroupRequest,
};

/// A decoded request of one of the group coordinator's APIs.
#[derive(Debug, Clone)]
#[allow(missing_docs)]
pub enum GroupRequest {
    FindCoordinator(FindCoordinatorRequest),
    JoinGroup(JoinGroupRequest),
    SyncGroup(SyncGroupRequest),
    Heartbeat(HeartbeatRequest),
    LeaveGroup(LeaveGroupRequest),
    OffsetCommit(OffsetCommitRequest),
    OffsetFetch(OffsetFetchRequest),
    OffsetDelete(OffsetDeleteRequest),
    ListGroups(ListGroupsRequest),
    DescribeGroups(DescribeGroupsRequest),
    DeleteGroups(DeleteGroupsRequest),
    ConsumerGroupHeartbeat(ConsumerGroupHeartbeatRequest),
    ConsumerGroupDescribe(ConsumerGroupDescribeRequest),
}

/// Handles a coordinator request and encodes the answer frame.
///
/// # Errors
///
/// The encoder's message when the answer cannot be written (the connection
/// is then closed), or when the coordinator has not started.
pub async fn handle(
    broker: &Arc<Broker>,
    api_key: ApiKey,
    version: i16,
    header: &RequestHeader,
    peer: Option<std::net::SocketAddr>,
    request: GroupRequest,
) -> Result<Bytes, String> {
    let Some(coordinator) = broker.groups.get() else {
        return Err("the group coordinator has not started".into());
    };
    let ctx = RequestContext::new(
        version,
        header
            .client_id
            .as_ref()
            .map(|c| c.as_str().to_owned())
            .unwrap_or_default(),
        // Kafka reports the address as Java's InetAddress prints it.
        peer.map(|p| format!("/{}", p.ip())).unwrap_or_default(),
    );
    let id = header.correlation_id;
    let c = coordinator.as_ref();
    match request {
        GroupRequest::FindCoordinator(r) => {
            let mut response = c.find_coordinator(&ctx, r).await;
            if let Some(node) = broker.cluster.get() {
                crate::cluster::coordinators::point_at_controller(node, &mut response);
            }
            encode_response(api_key, version, id, &response)
        }
        GroupRequest::JoinGroup(r) => {
            encode_response(api_key, version, id, &c.join_group(&ctx, r).await)
        }
        GroupRequest::SyncGroup(r) => {
            encode_response(api_key, version, id, &c.sync_group(&ctx, r).await)
        }
        GroupRequest::Heartbeat(r) => {
            encode_response(api_key, version, id, &c.heartbeat(&ctx, r).await)
        }
        GroupRequest::LeaveGroup(r) => {
            encode_response(api_key, version, id, &c.leave_group(&ctx, r).await)
        }
        GroupRequest::OffsetCommit(r) => {
            let response = commit_known_partitions(broker, c, &ctx, r).await;
            encode_response(api_key, version, id, &response)
        }
        GroupRequest::OffsetFetch(r) => {
            encode_response(api_key, version, id, &c.offset_fetch(&ctx, r).await)
        }
        GroupRequest::OffsetDelete(r) => {
            encode_response(api_key, version, id, &c.offset_delete(&ctx, r).await)
        }
        GroupRequest::ListGroups(r) => {
            encode_response(api_key, version, id, &c.list_groups(&ctx, r).await)
        }
        GroupRequest::DescribeGroups(r) => {
            encode_response(api_key, version, id, &c.describe_groups(&ctx, r).await)
        }
        GroupRequest::DeleteGroups(r) => {
            encode_response(api_key, version, id, &c.delete_groups(&ctx, r).await)
        }
        GroupRequest::ConsumerGroupHeartbeat(r) => encode_response(
            api_key,
            version,
            id,
            &c.consumer_group_heartbeat(&ctx, r).await,
        ),
        GroupRequest::ConsumerGroupDescribe(r) => encode_response(
            api_key,
            version,
            id,
            &c.consumer_group_describe(&ctx, r).await,
        ),
    }
}

/// OffsetCommit as Kafka's request handler runs it: partitions of topics
/// this broker does not have are answered `UNKNOWN_TOPIC_OR_PARTITION`
/// without reaching the coordinator; the rest are committed.
async fn commit_known_partitions(
    broker: &Broker,
    coordinator: &super::GroupCoordinator,
    ctx: &RequestContext,
    mut request: OffsetCommitRequest,
) -> OffsetCommitResponse {
    let mut unknown: Vec<(kafka_protocol::messages::TopicName, i32)> = Vec::new();
    for topic in &mut request.topics {
        topic.partitions.retain(|p| {
            let known = broker.partition_exists(topic.name.0.as_str(), p.partition_index);
            if !known {
                unknown.push((topic.name.clone(), p.partition_index));
            }
            known
        });
    }
    request.topics.retain(|t| !t.partitions.is_empty());
    let mut response = coordinator.offset_commit(ctx, request).await;
    for (name, partition) in unknown {
        let answer = OffsetCommitResponsePartition::default()
            .with_partition_index(partition)
            .with_error_code(ResponseError::UnknownTopicOrPartition.code());
        match response.topics.iter_mut().find(|t| t.name == name) {
            Some(t) => t.partitions.push(answer),
            None => response.topics.push(
                OffsetCommitResponseTopic::default()
                    .with_name(name)
                    .with_partitions(vec![answer]),
            ),
        }
    }
    response
}
