//! The coordinator's side of the broker's request dispatch: decoding the
//! group APIs and encoding their answers.
//!
//! The broker's codec has one variant, `Request::Group`, for every API in
//! [`SUPPORTED_APIS`](super::SUPPORTED_APIS); it carries a [`GroupRequest`]
//! decoded here, and the dispatcher hands it to [`handle`]. Keeping the
//! per-API plumbing in this module keeps the broker's own files to one line
//! each.

use std::sync::Arc;

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
use kafka_protocol::protocol::Decodable;

use super::{RequestContext, SUPPORTED_APIS};
use crate::{broker::Broker, network::codec::encode_response};

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

/// Whether `api` is one of the coordinator's.
pub fn handles(api: ApiKey) -> bool {
    SUPPORTED_APIS.iter().any(|(key, _, _)| *key == api)
}

/// Decodes the body of a coordinator request.
///
/// # Errors
///
/// The decoder's message when the body does not parse, or when `api` is not
/// a coordinator API.
pub fn decode(api: ApiKey, buf: &mut Bytes, version: i16) -> Result<GroupRequest, String> {
    fn d<T: Decodable>(buf: &mut Bytes, version: i16) -> Result<T, String> {
        T::decode(buf, version).map_err(|e| e.to_string())
    }
    Ok(match api {
        ApiKey::FindCoordinator => GroupRequest::FindCoordinator(d(buf, version)?),
        ApiKey::JoinGroup => GroupRequest::JoinGroup(d(buf, version)?),
        ApiKey::SyncGroup => GroupRequest::SyncGroup(d(buf, version)?),
        ApiKey::Heartbeat => GroupRequest::Heartbeat(d(buf, version)?),
        ApiKey::LeaveGroup => GroupRequest::LeaveGroup(d(buf, version)?),
        ApiKey::OffsetCommit => GroupRequest::OffsetCommit(d(buf, version)?),
        ApiKey::OffsetFetch => GroupRequest::OffsetFetch(d(buf, version)?),
        ApiKey::OffsetDelete => GroupRequest::OffsetDelete(d(buf, version)?),
        ApiKey::ListGroups => GroupRequest::ListGroups(d(buf, version)?),
        ApiKey::DescribeGroups => GroupRequest::DescribeGroups(d(buf, version)?),
        ApiKey::DeleteGroups => GroupRequest::DeleteGroups(d(buf, version)?),
        ApiKey::ConsumerGroupHeartbeat => GroupRequest::ConsumerGroupHeartbeat(d(buf, version)?),
        ApiKey::ConsumerGroupDescribe => GroupRequest::ConsumerGroupDescribe(d(buf, version)?),
        other => return Err(format!("{other:?} is not a group coordinator API")),
    })
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
    fixup: crate::security::authorize::Fixup,
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
        GroupRequest::FindCoordinator(r) => encode_response(
            api_key,
            version,
            id,
            &fixup.fill(c.find_coordinator(&ctx, r).await),
        ),
        GroupRequest::JoinGroup(r) => encode_response(
            api_key,
            version,
            id,
            &fixup.fill(c.join_group(&ctx, r).await),
        ),
        GroupRequest::SyncGroup(r) => encode_response(
            api_key,
            version,
            id,
            &fixup.fill(c.sync_group(&ctx, r).await),
        ),
        GroupRequest::Heartbeat(r) => encode_response(
            api_key,
            version,
            id,
            &fixup.fill(c.heartbeat(&ctx, r).await),
        ),
        GroupRequest::LeaveGroup(r) => encode_response(
            api_key,
            version,
            id,
            &fixup.fill(c.leave_group(&ctx, r).await),
        ),
        GroupRequest::OffsetCommit(r) => {
            let response = fixup.fill(commit_known_partitions(broker, c, &ctx, r).await);
            encode_response(api_key, version, id, &response)
        }
        GroupRequest::OffsetFetch(r) => encode_response(
            api_key,
            version,
            id,
            &fixup.fill(c.offset_fetch(&ctx, r).await),
        ),
        GroupRequest::OffsetDelete(r) => encode_response(
            api_key,
            version,
            id,
            &fixup.fill(c.offset_delete(&ctx, r).await),
        ),
        GroupRequest::ListGroups(r) => encode_response(
            api_key,
            version,
            id,
            &fixup.fill(c.list_groups(&ctx, r).await),
        ),
        GroupRequest::DescribeGroups(r) => encode_response(
            api_key,
            version,
            id,
            &fixup.fill(c.describe_groups(&ctx, r).await),
        ),
        GroupRequest::DeleteGroups(r) => encode_response(
            api_key,
            version,
            id,
            &fixup.fill(c.delete_groups(&ctx, r).await),
        ),
        GroupRequest::ConsumerGroupHeartbeat(r) => encode_response(
            api_key,
            version,
            id,
            &fixup.fill(c.consumer_group_heartbeat(&ctx, r).await),
        ),
        GroupRequest::ConsumerGroupDescribe(r) => encode_response(
            api_key,
            version,
            id,
            &fixup.fill(c.consumer_group_describe(&ctx, r).await),
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
            let known = broker
                .partitions
                .get(topic.name.0.as_str(), p.partition_index)
                .is_some();
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
