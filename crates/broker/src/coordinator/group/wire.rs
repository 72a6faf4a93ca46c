//! The coordinator's side of the broker's request dispatch: the group APIs'
//! requests and the encoding of their answers.
//!
//! The broker's codec has one variant, `Request::Group`, for every group
//! API of the API table ([`crate::api_versions::APIS`], which decodes each
//! into its [`GroupRequest`] variant), and the dispatcher hands it to
//! [`handle`]. Keeping the per-API plumbing in this module keeps the
//! broker's own files to one line each.

use std::sync::Arc;

use super::{RequestContext, topic_ids};
use crate::coordinator::ownership::Refusal;
use crate::{broker::Broker, network::codec::encode_response};
use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::OffsetCommitResponse;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, DeleteGroupsRequest, DescribeGroupsRequest,
    FindCoordinatorRequest, FindCoordinatorResponse, HeartbeatRequest, HeartbeatResponse,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, ListGroupsRequest,
    OffsetCommitRequest, OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchRequest,
    OffsetFetchResponse, RequestHeader, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;

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
    let fixup = match refuse_unavailable(c, api_key, version, id, &request, fixup) {
        Ok(refused) => return refused,
        Err(fixup) => fixup,
    };
    match request {
        GroupRequest::FindCoordinator(r) => {
            let mut response = c.find_coordinator(&ctx, r.clone()).await;
            if let Some(node) = broker.cluster.get() {
                crate::cluster::coordinators::point_at_owners(
                    broker,
                    node,
                    version,
                    &r,
                    &mut response,
                );
            }
            mark_unavailable_coordinators(broker, c, version, &r, &mut response);
            // Last: the fixup gives the addresses on the client's listener.
            let response = fixup.fill(response);
            encode_response(api_key, version, id, &response)
        }
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
        GroupRequest::OffsetCommit(mut r) => {
            let by_id = version >= topic_ids::FIRST_VERSION_BY_ID;
            let unknown = by_id.then(|| topic_ids::name_commit(&broker.registry, &mut r));
            let mut response = fixup.fill(commit_known_partitions(broker, c, &ctx, r).await);
            if let Some(unknown) = unknown {
                topic_ids::id_commit_response(&broker.registry, &mut response, unknown);
            }
            encode_response(api_key, version, id, &response)
        }
        GroupRequest::OffsetFetch(mut r) => {
            let by_id = version >= topic_ids::FIRST_VERSION_BY_ID;
            let unknown = by_id.then(|| topic_ids::name_fetch(&broker.registry, &mut r));
            let mut response = fixup.fill(c.offset_fetch(&ctx, r).await);
            for g in &mut response.groups {
                if let Some(refusal) = c.refusal(g.group_id.0.as_str()) {
                    g.topics.clear();
                    g.error_code = refusal.code();
                }
            }
            if let Some(unknown) = unknown {
                topic_ids::id_fetch_response(&broker.registry, &mut response, unknown);
            }
            encode_response(api_key, version, id, &response)
        }
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
        GroupRequest::DescribeGroups(r) => {
            let mut response = fixup.fill(c.describe_groups(&ctx, r).await);
            for g in &mut response.groups {
                if let Some(refusal) = c.refusal(g.group_id.0.as_str()) {
                    g.error_code = refusal.code();
                }
            }
            encode_response(api_key, version, id, &response)
        }
        GroupRequest::DeleteGroups(r) => {
            // An unavailable partition's groups are not in memory, so the
            // coordinator writes nothing for them.
            let mut response = fixup.fill(c.delete_groups(&ctx, r).await);
            for g in &mut response.results {
                if let Some(refusal) = c.refusal(g.group_id.0.as_str()) {
                    g.error_code = refusal.code();
                }
            }
            encode_response(api_key, version, id, &response)
        }
        GroupRequest::ConsumerGroupHeartbeat(r) => encode_response(
            api_key,
            version,
            id,
            &fixup.fill(c.consumer_group_heartbeat(&ctx, r).await),
        ),
        GroupRequest::ConsumerGroupDescribe(r) => {
            let mut response = fixup.fill(c.consumer_group_describe(&ctx, r).await);
            for g in &mut response.groups {
                if let Some(refusal) = c.refusal(g.group_id.0.as_str()) {
                    g.error_code = refusal.code();
                    g.error_message = Some(StrBytes::from_string(refusal.reason()));
                }
            }
            encode_response(api_key, version, id, &response)
        }
    }
}

/// A request for one group whose `__consumer_offsets` partition is not
/// served here is answered without reaching the coordinator: with
/// `NOT_COORDINATOR` when another broker owns it,
/// `COORDINATOR_LOAD_IN_PROGRESS` while it loads, and
/// `COORDINATOR_NOT_AVAILABLE` when it could not be read (the coordinator
/// would otherwise serve it from a state missing what it holds). Requests
/// naming several groups are answered per group after the coordinator ran
/// (it knows none of those groups, so it wrote nothing for them). The
/// parts the authorizer refused keep their codes (`fixup`), which is given
/// back when the request is not refused here.
fn refuse_unavailable(
    c: &super::GroupCoordinator,
    api_key: ApiKey,
    version: i16,
    id: i32,
    request: &GroupRequest,
    fixup: crate::security::authorize::Fixup,
) -> Result<Result<Bytes, String>, crate::security::authorize::Fixup> {
    let group = match request {
        GroupRequest::JoinGroup(r) => &r.group_id,
        GroupRequest::SyncGroup(r) => &r.group_id,
        GroupRequest::Heartbeat(r) => &r.group_id,
        GroupRequest::LeaveGroup(r) => &r.group_id,
        GroupRequest::OffsetDelete(r) => &r.group_id,
        GroupRequest::ConsumerGroupHeartbeat(r) => &r.group_id,
        GroupRequest::OffsetCommit(r) => &r.group_id,
        GroupRequest::OffsetFetch(r) if version < 8 => &r.group_id,
        _ => return Err(fixup),
    };
    let Some(refusal) = c.refusal(group.0.as_str()) else {
        return Err(fixup);
    };
    let code = refusal.code();
    match request {
        GroupRequest::JoinGroup(r) => {
            let mut response = JoinGroupResponse::default();
            response.error_code = code;
            response.generation_id = -1;
            response.member_id = r.member_id.clone();
            Ok(encode_response(api_key, version, id, &fixup.fill(response)))
        }
        GroupRequest::SyncGroup(_) => {
            let mut response = SyncGroupResponse::default();
            response.error_code = code;
            Ok(encode_response(api_key, version, id, &fixup.fill(response)))
        }
        GroupRequest::Heartbeat(_) => {
            let mut response = HeartbeatResponse::default();
            response.error_code = code;
            Ok(encode_response(api_key, version, id, &fixup.fill(response)))
        }
        GroupRequest::LeaveGroup(_) => {
            let mut response = LeaveGroupResponse::default();
            response.error_code = code;
            Ok(encode_response(api_key, version, id, &fixup.fill(response)))
        }
        GroupRequest::OffsetDelete(_) => {
            let mut response = OffsetDeleteResponse::default();
            response.error_code = code;
            Ok(encode_response(api_key, version, id, &fixup.fill(response)))
        }
        GroupRequest::ConsumerGroupHeartbeat(_) => {
            let mut response = ConsumerGroupHeartbeatResponse::default();
            response.error_code = code;
            response.error_message = Some(StrBytes::from_string(refusal.reason()));
            Ok(encode_response(api_key, version, id, &fixup.fill(response)))
        }
        GroupRequest::OffsetCommit(r) => {
            let topics = r
                .topics
                .iter()
                .map(|t| topic_ids::answer_commit_topic(t, code))
                .collect();
            let response = OffsetCommitResponse::default().with_topics(topics);
            Ok(encode_response(api_key, version, id, &fixup.fill(response)))
        }
        GroupRequest::OffsetFetch(_) => {
            let mut response = OffsetFetchResponse::default();
            response.error_code = code;
            Ok(encode_response(api_key, version, id, &fixup.fill(response)))
        }
        _ => Err(fixup),
    }
}

/// FindCoordinator for a group or transactional id whose partition could
/// not be loaded answers `COORDINATOR_NOT_AVAILABLE` with the reason, so
/// clients retry instead of being served a state with a hole.
fn mark_unavailable_coordinators(
    broker: &Broker,
    c: &super::GroupCoordinator,
    version: i16,
    request: &FindCoordinatorRequest,
    response: &mut FindCoordinatorResponse,
) {
    let key_type = if version >= 1 { request.key_type } else { 0 };
    // Only a partition that could not be read: one owned elsewhere is
    // pointed at its owner (cluster mode), not refused.
    let reason = |key: &str| -> Option<String> {
        let refusal = match key_type {
            0 => c.refusal(key),
            1 => broker.txns.get().and_then(|t| t.refusal(key)),
            _ => None,
        };
        match refusal {
            Some(Refusal::Unavailable(reason)) => Some(reason),
            _ => None,
        }
    };
    let code = ResponseError::CoordinatorNotAvailable.code();
    if version >= 4 {
        for coordinator in &mut response.coordinators {
            if let Some(reason) = reason(coordinator.key.as_str()) {
                coordinator.error_code = code;
                coordinator.error_message = Some(StrBytes::from_string(reason));
                coordinator.node_id = kafka_protocol::messages::BrokerId(-1);
                coordinator.host = StrBytes::new();
                coordinator.port = -1;
            }
        }
    } else if let Some(reason) = reason(request.key.as_str()) {
        response.error_code = code;
        if version >= 1 {
            response.error_message = Some(StrBytes::from_string(reason));
        }
        response.node_id = kafka_protocol::messages::BrokerId(-1);
        response.host = StrBytes::new();
        response.port = -1;
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
