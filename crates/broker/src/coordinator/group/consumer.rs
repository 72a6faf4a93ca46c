//! The KIP-848 consumer group protocol: ConsumerGroupHeartbeat and
//! ConsumerGroupDescribe, with server-side assignment.
//!
//! Membership changes (join, leave, subscription change, session expiry)
//! bump the group epoch and recompute every member's *target* assignment
//! with the group's assignor. Each heartbeat then reconciles the member
//! toward its target the way Kafka's `CurrentAssignmentBuilder` does:
//! partitions leaving the target are revoked first (the member keeps its
//! epoch until a heartbeat shows it no longer owns them), and a partition is
//! only handed to its new owner once no other member holds it or still has
//! to revoke it. When the member holds nothing it must revoke, it moves to
//! the target epoch.
//!
//! Consumer groups share the [`Group`] record with classic groups, so
//! committed offsets work the same; their membership is not persisted
//! (members rejoin with epoch 0 after a coordinator restart, as they do
//! when Kafka fences them).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::TopicName;
use kafka_protocol::messages::consumer_group_describe_request::ConsumerGroupDescribeRequest;
use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment as DescribeAssignment, ConsumerGroupDescribeResponse, DescribedGroup,
    Member as DescribedMember, TopicPartitions as DescribeTopicPartitions,
};
use kafka_protocol::messages::consumer_group_heartbeat_request::ConsumerGroupHeartbeatRequest;
use kafka_protocol::messages::consumer_group_heartbeat_response::{
    Assignment as HeartbeatAssignment, ConsumerGroupHeartbeatResponse,
    TopicPartitions as HeartbeatTopicPartitions,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::assignor::{self, Assignment, AssignorMember};
use super::config::GroupConfig;
use super::coordinator::{CoordinatorState, GroupCoordinator, RequestContext};
use super::state::{Group, GroupState};

/// Member epoch a leaving member sends.
const LEAVE_EPOCH: i32 = -1;
/// Member epoch a leaving static member sends.
const STATIC_LEAVE_EPOCH: i32 = -2;

/// Topic names and ids as the broker knows them, for the assignors.
pub trait TopicLookup: Send + Sync + 'static {
    /// The id and partition count of the topic called `name`.
    fn by_name(&self, name: &str) -> Option<(Uuid, i32)>;
    /// The name of the topic with `id`.
    fn name_of(&self, id: Uuid) -> Option<String>;
}

/// One member of a consumer group.
#[derive(Debug, Clone)]
pub struct ConsumerMember {
    /// The member id.
    pub id: String,
    /// The static instance id.
    pub instance_id: Option<String>,
    /// The rack id.
    pub rack_id: Option<String>,
    /// The client id.
    pub client_id: String,
    /// The client host.
    pub client_host: String,
    /// The rebalance timeout (ms).
    pub rebalance_timeout_ms: i32,
    /// Subscribed topic names.
    pub subscribed: Vec<String>,
    /// The member's epoch.
    pub member_epoch: i32,
    /// The epoch before the last bump (a retried heartbeat may carry it).
    pub previous_epoch: i32,
    /// What the coordinator has given the member.
    pub assigned: Assignment,
    /// Partitions the member was told to revoke and still owns.
    pub revoking: Assignment,
    /// The assignment last sent, to send only changes.
    pub last_sent: Option<Assignment>,
    /// When the session expires (ms).
    pub session_deadline_ms: i64,
    /// The session timeout (`group.consumer.session.timeout.ms` at join).
    pub session_timeout_ms: i64,
    /// When an unacknowledged revocation fences the member (ms).
    pub revoke_deadline_ms: Option<i64>,
}

/// The consumer-protocol side of a group.
#[derive(Debug, Clone, Default)]
pub struct ConsumerGroup {
    /// The group epoch.
    pub group_epoch: i32,
    /// The epoch of the current target assignment.
    pub assignment_epoch: i32,
    /// Members by id.
    pub members: BTreeMap<String, ConsumerMember>,
    /// Target assignment per member.
    pub target: BTreeMap<String, Assignment>,
    /// The server assignor each member asked for.
    pub assignors: BTreeMap<String, String>,
    /// The assignor used when no member asks for one (the first of
    /// `group.consumer.assignors`); empty means `uniform`.
    pub default_assignor: String,
}

impl ConsumerGroup {
    /// KIP-848's group state name.
    pub fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.assignment_epoch < self.group_epoch {
            "Assigning"
        } else if self.members.values().any(|m| {
            m.member_epoch != self.assignment_epoch
                || !m.revoking.is_empty()
                || self.target.get(&m.id).is_some_and(|t| *t != m.assigned)
        }) {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// The assignor the members asked for (the first member's choice), or
    /// the configured default.
    pub fn assignor_name(&self) -> String {
        self.assignors.values().next().cloned().unwrap_or_else(|| {
            if self.default_assignor.is_empty() {
                assignor::ASSIGNORS[0].to_owned()
            } else {
                self.default_assignor.clone()
            }
        })
    }
}

fn remove_partitions(from: &mut Assignment, what: &Assignment) {
    for (topic, ps) in what {
        if let Some(set) = from.get_mut(topic) {
            set.retain(|p| !ps.contains(p));
            if set.is_empty() {
                from.remove(topic);
            }
        }
    }
}

fn minus(a: &Assignment, b: &Assignment) -> Assignment {
    let mut out = a.clone();
    remove_partitions(&mut out, b);
    out
}

fn intersect(a: &Assignment, b: &Assignment) -> Assignment {
    let mut out = Assignment::new();
    for (topic, ps) in a {
        if let Some(other) = b.get(topic) {
            let both: BTreeSet<i32> = ps.intersection(other).copied().collect();
            if !both.is_empty() {
                out.insert(*topic, both);
            }
        }
    }
    out
}

/// Recomputes every member's target and bumps the assignment epoch.
fn compute_target(
    group: &mut ConsumerGroup,
    assignor_name: &str,
    topics: Option<&Arc<dyn TopicLookup>>,
) {
    let members: Vec<AssignorMember> = group
        .members
        .values()
        .map(|m| AssignorMember {
            id: m.id.clone(),
            topics: m
                .subscribed
                .iter()
                .filter_map(|t| topics.and_then(|l| l.by_name(t)))
                .collect(),
            current: group.target.get(&m.id).cloned().unwrap_or_default(),
        })
        .collect();
    group.target = assignor::assign(assignor_name, &members);
    group.assignment_epoch = group.group_epoch;
}

/// Moves `member_id` toward its target (Kafka's `CurrentAssignmentBuilder`).
fn reconcile(group: &mut ConsumerGroup, member_id: &str, owned: Option<&Assignment>, now: i64) {
    let target = group.target.get(member_id).cloned().unwrap_or_default();
    let epoch = group.assignment_epoch;
    // Partitions held (or still being revoked) by anyone else.
    let mut busy = Assignment::new();
    for (id, m) in &group.members {
        if id != member_id {
            for (t, ps) in m.assigned.iter().chain(m.revoking.iter()) {
                busy.entry(*t).or_default().extend(ps.iter().copied());
            }
        }
    }
    let Some(member) = group.members.get_mut(member_id) else {
        return;
    };
    let leaving = minus(&member.assigned, &target);
    if !leaving.is_empty() {
        for (t, ps) in &leaving {
            member
                .revoking
                .entry(*t)
                .or_default()
                .extend(ps.iter().copied());
        }
        member.assigned = intersect(&member.assigned, &target);
        member.revoke_deadline_ms = Some(now + i64::from(member.rebalance_timeout_ms.max(0)));
    }
    if let Some(owned) = owned {
        member.revoking = intersect(&member.revoking, owned);
    }
    if !member.revoking.is_empty() {
        return;
    }
    member.revoke_deadline_ms = None;
    for (t, ps) in &target {
        for p in ps {
            let free = !busy.get(t).is_some_and(|b| b.contains(p));
            if free {
                member.assigned.entry(*t).or_default().insert(*p);
            }
        }
    }
    if member.member_epoch != epoch {
        member.previous_epoch = member.member_epoch;
        member.member_epoch = epoch;
    }
}

fn to_assignment(
    parts: &Option<
        Vec<kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions>,
    >,
) -> Option<Assignment> {
    parts.as_ref().map(|v| {
        v.iter()
            .filter(|t| !t.partitions.is_empty())
            .map(|t| (t.topic_id, t.partitions.iter().copied().collect()))
            .collect()
    })
}

/// Removes a member, bumps the epoch and recomputes the target.
pub(crate) fn remove_consumer_member(
    group: &mut Group,
    member_id: &str,
    topics: Option<&Arc<dyn TopicLookup>>,
    now: i64,
) {
    let Some(cg) = group.consumer.as_mut() else {
        return;
    };
    if cg.members.remove(member_id).is_none() {
        return;
    }
    cg.group_epoch += 1;
    cg.assignors.remove(member_id);
    let name = cg.assignor_name();
    compute_target(cg, &name, topics);
    if cg.members.is_empty() {
        group.state_timestamp_ms = now;
    }
}

/// Expires consumer members whose session or revocation deadline passed.
pub(crate) fn run_consumer_timers(
    group: &mut Group,
    topics: Option<&Arc<dyn TopicLookup>>,
    now: i64,
) {
    let expired: Vec<String> = group
        .consumer
        .as_ref()
        .map(|cg| {
            cg.members
                .values()
                .filter(|m| {
                    now >= m.session_deadline_ms || m.revoke_deadline_ms.is_some_and(|d| now >= d)
                })
                .map(|m| m.id.clone())
                .collect()
        })
        .unwrap_or_default();
    for id in expired {
        tracing::info!(group = %group.id, member = %id, "consumer group member expired");
        remove_consumer_member(group, &id, topics, now);
    }
}

/// Whether a consumer member has a due deadline.
pub(crate) fn has_due_consumer_timer(group: &Group, now: i64) -> bool {
    group.consumer.as_ref().is_some_and(|cg| {
        cg.members
            .values()
            .any(|m| now >= m.session_deadline_ms || m.revoke_deadline_ms.is_some_and(|d| now >= d))
    })
}

/// Validates a consumer group's offset commit (member id and epoch).
pub(crate) fn validate_consumer_commit(
    group: &mut Group,
    member_id: &str,
    epoch: i32,
    now: i64,
) -> i16 {
    let Some(cg) = group.consumer.as_mut() else {
        return ResponseError::UnknownMemberId.code();
    };
    if member_id.is_empty() && epoch < 0 {
        return if cg.members.is_empty() {
            0
        } else {
            ResponseError::UnknownMemberId.code()
        };
    }
    let Some(member) = cg.members.get_mut(member_id) else {
        return ResponseError::UnknownMemberId.code();
    };
    if epoch > member.member_epoch {
        return ResponseError::FencedMemberEpoch.code();
    }
    if epoch < member.member_epoch {
        return ResponseError::StaleMemberEpoch.code();
    }
    member.session_deadline_ms = now + member.session_timeout_ms;
    0
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn heartbeat_error(code: ResponseError, message: &str) -> ConsumerGroupHeartbeatResponse {
    tracing::debug!(error = ?code, message, "ConsumerGroupHeartbeat refused");
    ConsumerGroupHeartbeatResponse::default()
        .with_error_code(code.code())
        .with_error_message(Some(sb(message)))
}

fn heartbeat(
    state: &mut CoordinatorState,
    config: &GroupConfig,
    topics: Option<&Arc<dyn TopicLookup>>,
    ctx: &RequestContext,
    req: &ConsumerGroupHeartbeatRequest,
    now: i64,
) -> ConsumerGroupHeartbeatResponse {
    let group_id = req.group_id.0.as_str();
    let epoch = req.member_epoch;
    // librdkafka sends an empty regex when it subscribes by name.
    let regex = req
        .subscribed_topic_regex
        .as_ref()
        .filter(|r| !r.is_empty());
    if group_id.is_empty() {
        return heartbeat_error(ResponseError::InvalidRequest, "GroupId can't be empty.");
    }
    if epoch == 0 {
        if req
            .subscribed_topic_names
            .as_ref()
            .is_none_or(Vec::is_empty)
            && regex.is_none()
        {
            return heartbeat_error(
                ResponseError::InvalidRequest,
                "SubscribedTopicNames must be set in first request.",
            );
        }
        if req.rebalance_timeout_ms <= 0 {
            return heartbeat_error(
                ResponseError::InvalidRequest,
                "RebalanceTimeoutMs must be provided in first request.",
            );
        }
    }
    if regex.is_some() {
        return heartbeat_error(
            ResponseError::InvalidRequest,
            "Regular expression subscriptions are not supported.",
        );
    }
    if let Some(name) = &req.server_assignor
        && !config.consumer_assignors.iter().any(|a| a == name.as_str())
    {
        return heartbeat_error(
            ResponseError::UnsupportedAssignor,
            &format!("Assignor {} is not supported.", name.as_str()),
        );
    }
    let group = state
        .groups
        .entry(group_id.to_owned())
        .or_insert_with(|| Group::new(group_id, now));
    if group.consumer.is_none() {
        if !group.members.is_empty() || group.state != GroupState::Empty {
            return heartbeat_error(
                ResponseError::GroupIdNotFound,
                &format!("Group {group_id} is not a consumer group."),
            );
        }
        group.consumer = Some(ConsumerGroup {
            default_assignor: config.default_assignor().to_owned(),
            ..ConsumerGroup::default()
        });
        group.protocol_type = Some("consumer".into());
    }
    let mut member_id = req.member_id.as_str().to_owned();
    let instance = req.instance_id.as_ref().map(|s| s.as_str().to_owned());
    let owned = to_assignment(&req.topic_partitions);
    let Some(cg) = group.consumer.as_mut() else {
        return heartbeat_error(ResponseError::CoordinatorNotAvailable, "group vanished");
    };
    if epoch == LEAVE_EPOCH || epoch == STATIC_LEAVE_EPOCH {
        if !cg.members.contains_key(&member_id) {
            return heartbeat_error(ResponseError::UnknownMemberId, "unknown member");
        }
        remove_consumer_member(group, &member_id, topics, now);
        return ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(sb(&member_id)))
            .with_member_epoch(epoch)
            .with_heartbeat_interval_ms(0);
    }
    let mut bump = false;
    if epoch == 0 {
        if member_id.is_empty() {
            member_id = Uuid::new_v4().simple().to_string();
        }
        // A static member replacing its previous incarnation takes over its
        // place (and target) without a rebalance.
        let replaced = instance.as_ref().and_then(|i| {
            cg.members
                .values()
                .find(|m| m.instance_id.as_ref() == Some(i) && m.id != member_id)
                .map(|m| m.id.clone())
        });
        let subscribed: Vec<String> = req
            .subscribed_topic_names
            .as_ref()
            .map(|v| v.iter().map(|t| t.0.as_str().to_owned()).collect())
            .unwrap_or_default();
        let mut member = ConsumerMember {
            id: member_id.clone(),
            instance_id: instance.clone(),
            rack_id: req.rack_id.as_ref().map(|s| s.as_str().to_owned()),
            client_id: ctx.client_id.clone(),
            client_host: ctx.client_host.clone(),
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            subscribed: subscribed.clone(),
            member_epoch: 0,
            previous_epoch: 0,
            assigned: Assignment::new(),
            revoking: Assignment::new(),
            last_sent: None,
            session_deadline_ms: now + config.consumer_session_timeout_ms,
            session_timeout_ms: config.consumer_session_timeout_ms,
            revoke_deadline_ms: None,
        };
        match replaced.and_then(|old| cg.members.remove(&old).map(|m| (old, m))) {
            Some((old_id, old)) if old.subscribed == subscribed => {
                if let Some(t) = cg.target.remove(&old_id) {
                    cg.target.insert(member_id.clone(), t);
                }
                member.assigned = old.assigned;
                member.member_epoch = old.member_epoch;
                member.previous_epoch = old.previous_epoch;
            }
            // A new member, a rejoin with epoch 0 (which gives up what the
            // member held), or a static member with a new subscription.
            _ => bump = true,
        }
        cg.members.insert(member_id.clone(), member);
    } else {
        let Some(member) = cg.members.get_mut(&member_id) else {
            return heartbeat_error(ResponseError::UnknownMemberId, "Unknown member id.");
        };
        let retry_ok = epoch == member.previous_epoch
            && owned.as_ref().is_some_and(|o| {
                o.iter()
                    .all(|(t, ps)| member.assigned.get(t).is_some_and(|a| ps.is_subset(a)))
            });
        if epoch != member.member_epoch && !retry_ok {
            return heartbeat_error(
                ResponseError::FencedMemberEpoch,
                "The member epoch is fenced.",
            );
        }
        member.session_deadline_ms = now + member.session_timeout_ms;
        if let Some(names) = &req.subscribed_topic_names {
            let subscribed: Vec<String> = names.iter().map(|t| t.0.as_str().to_owned()).collect();
            if subscribed != member.subscribed {
                member.subscribed = subscribed;
                bump = true;
            }
        }
        if let Some(r) = &req.rebalance_timeout_ms.checked_abs().filter(|r| *r > 0) {
            member.rebalance_timeout_ms = *r;
        }
    }
    if let Some(name) = &req.server_assignor {
        cg.assignors
            .insert(member_id.clone(), name.as_str().to_owned());
    }
    if bump {
        cg.group_epoch += 1;
        let name = cg.assignor_name();
        compute_target(cg, &name, topics);
    } else if topics.is_some() {
        // Topics may have been created or grown since the last computation.
        let name = cg.assignor_name();
        let before = cg.target.clone();
        compute_target(cg, &name, topics);
        if cg.target != before {
            cg.group_epoch += 1;
            cg.assignment_epoch = cg.group_epoch;
        }
    }
    reconcile(cg, &member_id, owned.as_ref(), now);
    let Some(member) = cg.members.get_mut(&member_id) else {
        return heartbeat_error(ResponseError::CoordinatorNotAvailable, "member vanished");
    };
    let send = epoch == 0
        || member.last_sent.as_ref() != Some(&member.assigned)
        || owned.as_ref().is_some_and(|o| *o != member.assigned);
    let assignment = if send {
        member.last_sent = Some(member.assigned.clone());
        Some(
            HeartbeatAssignment::default().with_topic_partitions(
                member
                    .assigned
                    .iter()
                    .map(|(t, ps)| {
                        HeartbeatTopicPartitions::default()
                            .with_topic_id(*t)
                            .with_partitions(ps.iter().copied().collect())
                    })
                    .collect(),
            ),
        )
    } else {
        None
    };
    ConsumerGroupHeartbeatResponse::default()
        .with_member_id(Some(sb(&member_id)))
        .with_member_epoch(member.member_epoch)
        .with_heartbeat_interval_ms(config.consumer_heartbeat_interval_ms)
        .with_assignment(assignment)
}

impl GroupCoordinator {
    /// Handles ConsumerGroupHeartbeat (v0–1).
    pub async fn consumer_group_heartbeat(
        &self,
        ctx: &RequestContext,
        req: ConsumerGroupHeartbeatRequest,
    ) -> ConsumerGroupHeartbeatResponse {
        let topics = self.topic_lookup();
        let group_id = req.group_id.0.as_str().to_owned();
        // The group's own configs (KIP-848) over the broker's.
        let overrides = self.group_configs(&group_id);
        let config = if overrides.is_empty() {
            std::borrow::Cow::Borrowed(&self.config)
        } else {
            std::borrow::Cow::Owned(self.config.for_group(&overrides))
        };
        let (resp, _) = self
            .mutate(&group_id, |state, now, _effects| {
                heartbeat(state, &config, topics.as_ref(), ctx, &req, now)
            })
            .await;
        tracing::debug!(
            member = %req.member_id.as_str(),
            epoch = req.member_epoch,
            owned = ?req.topic_partitions,
            error = resp.error_code,
            answer_epoch = resp.member_epoch,
            assignment = ?resp.assignment,
            "ConsumerGroupHeartbeat"
        );
        resp
    }

    /// Handles ConsumerGroupDescribe (v0–1).
    pub async fn consumer_group_describe(
        &self,
        _ctx: &RequestContext,
        req: ConsumerGroupDescribeRequest,
    ) -> ConsumerGroupDescribeResponse {
        let topics = self.topic_lookup();
        let state = self.lock();
        let describe_assignment = |a: &Assignment| {
            DescribeAssignment::default().with_topic_partitions(
                a.iter()
                    .map(|(t, ps)| {
                        DescribeTopicPartitions::default()
                            .with_topic_id(*t)
                            .with_topic_name(TopicName(sb(&topics
                                .as_ref()
                                .and_then(|l| l.name_of(*t))
                                .unwrap_or_default())))
                            .with_partitions(ps.iter().copied().collect())
                    })
                    .collect(),
            )
        };
        let groups = req
            .group_ids
            .iter()
            .map(|id| {
                let described = DescribedGroup::default().with_group_id(id.clone());
                match state
                    .groups
                    .get(id.0.as_str())
                    .and_then(|g| g.consumer.as_ref())
                {
                    None => described
                        .with_error_code(ResponseError::GroupIdNotFound.code())
                        .with_error_message(Some(sb(&format!(
                            "Group {} not found.",
                            id.0.as_str()
                        ))))
                        .with_group_state(StrBytes::from_static_str("Dead")),
                    Some(cg) => described
                        .with_group_state(StrBytes::from_static_str(cg.state_name()))
                        .with_group_epoch(cg.group_epoch)
                        .with_assignment_epoch(cg.assignment_epoch)
                        .with_assignor_name(sb(&cg.assignor_name()))
                        .with_authorized_operations(if req.include_authorized_operations {
                            (1 << 3) | (1 << 6) | (1 << 8)
                        } else {
                            i32::MIN
                        })
                        .with_members(
                            cg.members
                                .values()
                                .map(|m| {
                                    DescribedMember::default()
                                        .with_member_id(sb(&m.id))
                                        .with_instance_id(m.instance_id.as_deref().map(sb))
                                        .with_rack_id(m.rack_id.as_deref().map(sb))
                                        .with_member_epoch(m.member_epoch)
                                        .with_client_id(sb(&m.client_id))
                                        .with_client_host(sb(&m.client_host))
                                        .with_subscribed_topic_names(
                                            m.subscribed.iter().map(|t| TopicName(sb(t))).collect(),
                                        )
                                        .with_assignment(describe_assignment(&m.assigned))
                                        .with_target_assignment(describe_assignment(
                                            &cg.target.get(&m.id).cloned().unwrap_or_default(),
                                        ))
                                        .with_member_type(1)
                                })
                                .collect(),
                        ),
                }
            })
            .collect();
        ConsumerGroupDescribeResponse::default().with_groups(groups)
    }
}
