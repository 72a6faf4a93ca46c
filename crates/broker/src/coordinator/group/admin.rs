//! Group administration: ListGroups, DescribeGroups, DeleteGroups, and
//! FindCoordinator.
//!
//! On a single node this broker coordinates every group and transactional
//! id, so FindCoordinator always names the broker's own advertised listener;
//! it still validates the key type and answers per key from v4 (batched).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::BrokerId;
use kafka_protocol::messages::delete_groups_request::DeleteGroupsRequest;
use kafka_protocol::messages::delete_groups_response::{
    DeletableGroupResult, DeleteGroupsResponse,
};
use kafka_protocol::messages::describe_groups_request::DescribeGroupsRequest;
use kafka_protocol::messages::describe_groups_response::{
    DescribeGroupsResponse, DescribedGroup, DescribedGroupMember,
};
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::{Coordinator, FindCoordinatorResponse};
use kafka_protocol::messages::list_groups_request::ListGroupsRequest;
use kafka_protocol::messages::list_groups_response::{ListGroupsResponse, ListedGroup};
use kafka_protocol::protocol::StrBytes;

use super::coordinator::{GroupCoordinator, RequestContext};
use super::offsets::{group_tombstone, offset_tombstone};
use super::state::GroupState;

const NONE: i16 = 0;
/// FindCoordinator key type of a consumer group.
pub const KEY_TYPE_GROUP: i8 = 0;
/// FindCoordinator key type of a transactional id.
pub const KEY_TYPE_TRANSACTION: i8 = 1;
/// The operations a group grants when nobody is restricted (no authorizer):
/// READ (3), DELETE (6), DESCRIBE (8), as `authorized_operations` bits.
const GROUP_OPERATIONS: i32 = (1 << 3) | (1 << 6) | (1 << 8);

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

impl GroupCoordinator {
    /// Handles ListGroups (v0–5), with the v4 state filter and the v5 type
    /// filter (both case-insensitive; every group here is `classic`).
    pub async fn list_groups(
        &self,
        ctx: &RequestContext,
        req: ListGroupsRequest,
    ) -> ListGroupsResponse {
        let version = ctx.api_version;
        let states: Vec<String> = req
            .states_filter
            .iter()
            .map(|s| s.as_str().to_lowercase())
            .collect();
        let types: Vec<String> = req
            .types_filter
            .iter()
            .map(|s| s.as_str().to_lowercase())
            .collect();
        let state = self.lock();
        let mut groups: Vec<_> = state
            .groups
            .values()
            .filter(|g| g.state != GroupState::Dead)
            .filter(|g| states.is_empty() || states.contains(&g.listed_state().0.to_lowercase()))
            .filter(|g| types.is_empty() || types.iter().any(|t| t == g.listed_state().1))
            .map(|g| {
                let (state_name, group_type) = g.listed_state();
                let mut listed = ListedGroup::default()
                    .with_group_id(kafka_protocol::messages::GroupId(sb(&g.id)))
                    .with_protocol_type(sb(g.protocol_type.as_deref().unwrap_or("")));
                if version >= 4 {
                    listed = listed.with_group_state(sb(state_name));
                }
                if version >= 5 {
                    listed = listed.with_group_type(sb(group_type));
                }
                listed
            })
            .collect();
        groups.sort_by(|a, b| a.group_id.0.cmp(&b.group_id.0));
        ListGroupsResponse::default().with_groups(groups)
    }

    /// Handles DescribeGroups (v0–6).
    pub async fn describe_groups(
        &self,
        ctx: &RequestContext,
        req: DescribeGroupsRequest,
    ) -> DescribeGroupsResponse {
        let version = ctx.api_version;
        let state = self.lock();
        let groups = req
            .groups
            .iter()
            .map(|id| {
                let mut described = DescribedGroup::default().with_group_id(id.clone());
                if version >= 3 {
                    described = described.with_authorized_operations(
                        if req.include_authorized_operations {
                            GROUP_OPERATIONS
                        } else {
                            i32::MIN
                        },
                    );
                }
                match state
                    .groups
                    .get(id.0.as_str())
                    .filter(|g| g.state != GroupState::Dead)
                {
                    None if version >= 6 => described
                        .with_error_code(ResponseError::GroupIdNotFound.code())
                        .with_error_message(Some(sb(&format!(
                            "Group {} not found.",
                            id.0.as_str()
                        ))))
                        .with_group_state(StrBytes::from_static_str("Dead")),
                    None => described.with_group_state(StrBytes::from_static_str("Dead")),
                    Some(g) => {
                        let stable = g.state == GroupState::Stable;
                        let protocol = g.protocol_name.clone().unwrap_or_default();
                        let members = g
                            .members
                            .values()
                            .map(|m| {
                                let mut dm = DescribedGroupMember::default()
                                    .with_member_id(sb(&m.id))
                                    .with_client_id(sb(&m.client_id))
                                    .with_client_host(sb(&m.client_host));
                                if version >= 4 {
                                    dm =
                                        dm.with_group_instance_id(m.instance_id.as_deref().map(sb));
                                }
                                if stable {
                                    dm = dm
                                        .with_member_metadata(
                                            m.metadata_for(&protocol).cloned().unwrap_or_default(),
                                        )
                                        .with_member_assignment(m.assignment.clone());
                                }
                                dm
                            })
                            .collect();
                        described
                            .with_group_state(sb(g.state.name()))
                            .with_protocol_type(sb(g.protocol_type.as_deref().unwrap_or("")))
                            .with_protocol_data(if stable {
                                sb(&protocol)
                            } else {
                                StrBytes::new()
                            })
                            .with_members(members)
                    }
                }
            })
            .collect();
        DescribeGroupsResponse::default().with_groups(groups)
    }

    /// Handles DeleteGroups (v0–2): only empty groups can go; their offsets
    /// and metadata are tombstoned.
    pub async fn delete_groups(
        &self,
        _ctx: &RequestContext,
        req: DeleteGroupsRequest,
    ) -> DeleteGroupsResponse {
        let mut results = Vec::with_capacity(req.groups_names.len());
        for id in &req.groups_names {
            let name = id.0.as_str().to_owned();
            let (error, write_error) = self
                .mutate(&name, |state, now, effects| {
                    if name.is_empty() {
                        return ResponseError::InvalidGroupId.code();
                    }
                    let Some(group) = state.groups.get(&name) else {
                        return ResponseError::GroupIdNotFound.code();
                    };
                    match group.state {
                        GroupState::Dead => return ResponseError::GroupIdNotFound.code(),
                        GroupState::Empty if !group.has_members() => {}
                        _ => return ResponseError::NonEmptyGroup.code(),
                    }
                    for (topic, partition) in group.offsets.keys() {
                        effects
                            .records
                            .push(offset_tombstone(&name, topic, *partition, now));
                    }
                    effects.records.push(group_tombstone(&name, now));
                    state.groups.remove(&name);
                    NONE
                })
                .await;
            results.push(
                DeletableGroupResult::default()
                    .with_group_id(id.clone())
                    .with_error_code(if error == NONE { write_error } else { error }),
            );
        }
        DeleteGroupsResponse::default().with_results(results)
    }

    /// Handles FindCoordinator (v0–6, batched keys from v4) for group and
    /// transaction keys: the coordinator is always this broker.
    pub async fn find_coordinator(
        &self,
        ctx: &RequestContext,
        req: FindCoordinatorRequest,
    ) -> FindCoordinatorResponse {
        let version = ctx.api_version;
        let key_type = if version >= 1 {
            req.key_type
        } else {
            KEY_TYPE_GROUP
        };
        let answer = |key: &str| -> (i16, Option<String>) {
            match key_type {
                KEY_TYPE_GROUP => (NONE, None),
                KEY_TYPE_TRANSACTION if key.is_empty() => (
                    ResponseError::InvalidRequest.code(),
                    Some("transactional id must not be empty".into()),
                ),
                KEY_TYPE_TRANSACTION => (NONE, None),
                other => (
                    ResponseError::InvalidRequest.code(),
                    Some(format!("unknown coordinator key type {other}")),
                ),
            }
        };
        let node = &self.node;
        if version >= 4 {
            let coordinators = req
                .coordinator_keys
                .iter()
                .map(|key| {
                    let (error, message) = answer(key.as_str());
                    let c = Coordinator::default()
                        .with_key(key.clone())
                        .with_error_code(error)
                        .with_error_message(message.as_deref().map(sb));
                    if error == NONE {
                        c.with_node_id(BrokerId(node.node_id))
                            .with_host(sb(&node.host))
                            .with_port(node.port)
                    } else {
                        c.with_node_id(BrokerId(-1)).with_port(-1)
                    }
                })
                .collect();
            return FindCoordinatorResponse::default().with_coordinators(coordinators);
        }
        let (error, message) = answer(req.key.as_str());
        let resp = FindCoordinatorResponse::default().with_error_code(error);
        let resp = if version >= 1 {
            resp.with_error_message(message.as_deref().map(sb))
        } else {
            resp
        };
        if error == NONE {
            resp.with_node_id(BrokerId(node.node_id))
                .with_host(sb(&node.host))
                .with_port(node.port)
        } else {
            resp.with_node_id(BrokerId(-1)).with_port(-1)
        }
    }
}
