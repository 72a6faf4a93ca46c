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
//! A member subscribes by topic names, by a regular expression
//! (`SubscribedTopicRegex`, RE2 syntax, matched against whole topic names),
//! or both: its topics are the union, as in Kafka's `GroupMetadataManager`.
//! The coordinator resolves a group's expressions against the topics that
//! exist when a member brings a new one and again at most every
//! [`REGEX_REFRESH_INTERVAL_MS`] while heartbeats arrive, so created and
//! deleted topics reach the assignment; the resolution is synchronous here
//! (Kafka runs it on an executor), so a member's first answer already holds
//! its partitions.
//!
//! Each held partition remembers the epoch it was assigned at (KIP-1251), so
//! an OffsetCommit carrying an older member epoch is still accepted for the
//! partitions the member held at that epoch ([`validate_consumer_commit`]).
//!
//! Consumer groups share the [`Group`] record with classic groups, so
//! committed offsets work the same. Their membership is persisted with
//! Kafka's own records ([`consumer_records`](super::consumer_records)):
//! the coordinator writes what a request changed of the group epoch, member
//! metadata, target and current assignments
//! ([`consumer_persist`](super::consumer_persist)), so after a restart or a
//! coordinator move members go on heartbeating with their epochs and
//! assignments.

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
use regex::Regex;
use uuid::Uuid;

use super::assignor::{self, Assignment, AssignorMember};
use super::config::GroupConfig;
use super::coordinator::{CoordinatorState, GroupCoordinator, RequestContext};
use super::state::{Group, GroupState};

/// Member epoch a leaving member sends.
const LEAVE_EPOCH: i32 = -1;
/// Member epoch a leaving static member sends.
const STATIC_LEAVE_EPOCH: i32 = -2;
/// How often a group's regular expressions are resolved again while its
/// members heartbeat (Kafka's `REGEX_BATCH_REFRESH_INTERVAL_MS`).
pub const REGEX_REFRESH_INTERVAL_MS: i64 = 10_000;
/// The first OffsetCommit version a consumer-protocol member may use.
const FIRST_CONSUMER_COMMIT_VERSION: i16 = 9;

/// Topic names and ids as the broker knows them, for the assignors.
pub trait TopicLookup: Send + Sync + 'static {
    /// The id and partition count of the topic called `name`.
    fn by_name(&self, name: &str) -> Option<(Uuid, i32)>;
    /// The name of the topic with `id`.
    fn name_of(&self, id: Uuid) -> Option<String>;
    /// The names of every topic, internal ones included (regular
    /// expressions are resolved against them, as Kafka resolves them
    /// against its whole metadata image).
    fn names(&self) -> Vec<String>;
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
    /// The subscribed regular expression as last sent (an empty one means
    /// none; see [`ConsumerMember::regex`]).
    pub subscribed_regex: Option<String>,
    /// The member's epoch.
    pub member_epoch: i32,
    /// The epoch before the last bump (a retried heartbeat may carry it).
    pub previous_epoch: i32,
    /// What the coordinator has given the member.
    pub assigned: Assignment,
    /// Partitions the member was told to revoke and still owns.
    pub revoking: Assignment,
    /// The member epoch each held partition (assigned or being revoked) was
    /// assigned at (KIP-1251's assignment epochs).
    pub assignment_epochs: BTreeMap<(Uuid, i32), i32>,
    /// The assignment last sent, to send only changes.
    pub last_sent: Option<Assignment>,
    /// When the session expires (ms).
    pub session_deadline_ms: i64,
    /// The session timeout (`group.consumer.session.timeout.ms` at join).
    pub session_timeout_ms: i64,
    /// When an unacknowledged revocation fences the member (ms).
    pub revoke_deadline_ms: Option<i64>,
}

impl ConsumerMember {
    /// A member known by its id only (joining, or met first in a load):
    /// epoch 0, nothing assigned or subscribed, its session starting `now`.
    pub(crate) fn fresh(id: &str, config: &GroupConfig, now: i64) -> Self {
        Self {
            id: id.to_owned(),
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            rebalance_timeout_ms: -1,
            subscribed: Vec::new(),
            subscribed_regex: None,
            member_epoch: 0,
            previous_epoch: 0,
            assigned: Assignment::new(),
            revoking: Assignment::new(),
            assignment_epochs: BTreeMap::new(),
            last_sent: None,
            session_deadline_ms: now + config.consumer_session_timeout_ms,
            session_timeout_ms: config.consumer_session_timeout_ms,
            revoke_deadline_ms: None,
        }
    }

    /// The member's regular expression, if it subscribes with one.
    pub fn regex(&self) -> Option<&str> {
        self.subscribed_regex.as_deref().filter(|r| !r.is_empty())
    }
}

/// A regular expression some member subscribes with, and the topics it
/// matched when last resolved.
#[derive(Debug, Clone)]
pub struct ResolvedRegex {
    /// The expression anchored at both ends (Kafka matches whole names).
    matcher: Regex,
    /// The topics it matched.
    pub topics: BTreeSet<String>,
    /// Whether it has been resolved yet.
    pub resolved: bool,
}

impl ResolvedRegex {
    /// Compiles `pattern` the way Kafka validates `SubscribedTopicRegex`.
    ///
    /// # Errors
    ///
    /// The compiler's description when the pattern is not a valid regular
    /// expression (Kafka's INVALID_REGULAR_EXPRESSION).
    pub fn compile(pattern: &str) -> Result<Self, String> {
        // The pattern must be valid on its own: wrapping an invalid one such
        // as `a)|(b` could make it parse.
        Regex::new(pattern).map_err(|e| e.to_string())?;
        let matcher = Regex::new(&format!("^(?:{pattern})$")).map_err(|e| e.to_string())?;
        Ok(Self {
            matcher,
            topics: BTreeSet::new(),
            resolved: false,
        })
    }

    /// Whether the expression matches the whole of `topic`.
    pub fn matches(&self, topic: &str) -> bool {
        self.matcher.is_match(topic)
    }
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
    /// The regular expressions members subscribe with, by pattern.
    pub regexes: BTreeMap<String, ResolvedRegex>,
    /// When the regular expressions were last resolved (ms).
    pub regexes_resolved_ms: Option<i64>,
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

    /// The topics `member` subscribes to: its names and what its regular
    /// expression resolved to.
    pub fn member_topics<'a>(&'a self, member: &'a ConsumerMember) -> BTreeSet<&'a str> {
        let mut topics: BTreeSet<&str> = member.subscribed.iter().map(String::as_str).collect();
        if let Some(resolved) = member.regex().and_then(|r| self.regexes.get(r)) {
            topics.extend(resolved.topics.iter().map(String::as_str));
        }
        topics
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
            topics: group
                .member_topics(m)
                .into_iter()
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
            if free && member.assigned.entry(*t).or_default().insert(*p) {
                // A partition is held from the epoch the member moves to.
                member.assignment_epochs.insert((*t, *p), epoch);
            }
        }
    }
    if member.member_epoch != epoch {
        member.previous_epoch = member.member_epoch;
        member.member_epoch = epoch;
    }
}

/// Forgets the assignment epochs of partitions the member no longer holds.
fn prune_assignment_epochs(member: &mut ConsumerMember) {
    let (assigned, revoking) = (&member.assigned, &member.revoking);
    member.assignment_epochs.retain(|(t, p), _| {
        assigned.get(t).is_some_and(|ps| ps.contains(p))
            || revoking.get(t).is_some_and(|ps| ps.contains(p))
    });
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
    // After a load the expressions are not resolved yet.
    refresh_regexes(cg, topics, now);
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

/// Kafka's `ConsumerGroup.validateOffsetCommit` with KIP-1251's
/// assignment epochs, for the `partitions` (topic name, partition) of one
/// OffsetCommit or TxnOffsetCommit; 0 accepts the whole commit, any other
/// code refuses all of it.
///
/// A negative epoch commits into a group without members (the admin client,
/// or a consumer without group management). Otherwise the member must exist,
/// and a non-transactional commit must be OffsetCommit v9 or later. The
/// member's current epoch commits anything; a newer one is stale; an older
/// one commits only partitions the member holds (assigned or still being
/// revoked) since that epoch or before, so a commit sent just before a
/// heartbeat moved the member on still lands, and a zombie's does not. A
/// refused TxnOffsetCommit answers ILLEGAL_GENERATION instead of
/// STALE_MEMBER_EPOCH.
#[allow(clippy::too_many_arguments)]
pub(crate) fn validate_consumer_commit(
    group: &Group,
    member_id: &str,
    epoch: i32,
    partitions: &[(&str, i32)],
    topics: Option<&Arc<dyn TopicLookup>>,
    version: i16,
    transactional: bool,
) -> i16 {
    let Some(cg) = group.consumer.as_ref() else {
        return ResponseError::UnknownMemberId.code();
    };
    if epoch < 0 && cg.members.is_empty() {
        return 0;
    }
    let Some(member) = cg.members.get(member_id) else {
        return ResponseError::UnknownMemberId.code();
    };
    if !transactional && version < FIRST_CONSUMER_COMMIT_VERSION {
        return ResponseError::UnsupportedVersion.code();
    }
    let accepted = match epoch.cmp(&member.member_epoch) {
        std::cmp::Ordering::Equal => true,
        std::cmp::Ordering::Greater => false,
        std::cmp::Ordering::Less => partitions.iter().all(|(topic, partition)| {
            topics
                .and_then(|l| l.by_name(topic))
                .and_then(|(id, _)| member.assignment_epochs.get(&(id, *partition)))
                .is_some_and(|assigned_at| *assigned_at <= epoch)
        }),
    };
    match (accepted, transactional) {
        (true, _) => 0,
        (false, false) => ResponseError::StaleMemberEpoch.code(),
        (false, true) => ResponseError::IllegalGeneration.code(),
    }
}

/// Drops the regular expressions no member subscribes with any more.
fn forget_unused_regexes(cg: &mut ConsumerGroup) {
    let used: BTreeSet<&str> = cg.members.values().filter_map(|m| m.regex()).collect();
    cg.regexes.retain(|r, _| used.contains(r.as_str()));
}

/// Resolves the group's regular expressions against the topics that exist
/// when one is new or the last resolution is [`REGEX_REFRESH_INTERVAL_MS`]
/// old; the caller's target recomputation turns a change into a rebalance.
fn refresh_regexes(cg: &mut ConsumerGroup, topics: Option<&Arc<dyn TopicLookup>>, now: i64) {
    forget_unused_regexes(cg);
    let Some(lookup) = topics else {
        return;
    };
    if cg.regexes.is_empty() {
        cg.regexes_resolved_ms = None;
        return;
    }
    let due = cg.regexes.values().any(|r| !r.resolved)
        || cg
            .regexes_resolved_ms
            .is_none_or(|at| now.saturating_sub(at) >= REGEX_REFRESH_INTERVAL_MS);
    if !due {
        return;
    }
    let names = lookup.names();
    for resolved in cg.regexes.values_mut() {
        resolved.topics = names
            .iter()
            .filter(|n| resolved.matches(n))
            .cloned()
            .collect();
        resolved.resolved = true;
    }
    cg.regexes_resolved_ms = Some(now);
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

/// Kafka's `GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid`.
fn invalid_heartbeat(
    config: &GroupConfig,
    ctx: &RequestContext,
    req: &ConsumerGroupHeartbeatRequest,
) -> Option<ConsumerGroupHeartbeatResponse> {
    let invalid = |message: &str| Some(heartbeat_error(ResponseError::InvalidRequest, message));
    let epoch = req.member_epoch;
    // From v1 the client generates its member id (KIP-1082).
    if req.member_id.is_empty() && (ctx.api_version >= 1 || epoch > 0 || epoch == LEAVE_EPOCH) {
        return invalid("MemberId can't be empty.");
    }
    if req.group_id.0.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if req.instance_id.as_ref().is_some_and(|i| i.is_empty()) {
        return invalid("InstanceId can't be empty.");
    }
    if req.rack_id.as_ref().is_some_and(|r| r.is_empty()) {
        return invalid("RackId can't be empty.");
    }
    if epoch == 0 {
        if req.rebalance_timeout_ms == -1 {
            return invalid("RebalanceTimeoutMs must be provided in first request.");
        }
        if req.topic_partitions.as_ref().is_none_or(|t| !t.is_empty()) {
            return invalid("TopicPartitions must be empty when (re-)joining.");
        }
        // An empty list of names or an empty regex joins without topics.
        if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
            return invalid(
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
            );
        }
    } else if epoch == STATIC_LEAVE_EPOCH {
        if req.instance_id.is_none() {
            return invalid("InstanceId can't be null.");
        }
    } else if epoch < STATIC_LEAVE_EPOCH {
        return invalid("MemberEpoch is invalid.");
    }
    if let Some(name) = &req.server_assignor
        && !config.consumer_assignors.iter().any(|a| a == name.as_str())
    {
        return Some(heartbeat_error(
            ResponseError::UnsupportedAssignor,
            &format!(
                "ServerAssignor {} is not supported. Supported assignors: {}.",
                name.as_str(),
                config.consumer_assignors.join(", ")
            ),
        ));
    }
    None
}

fn heartbeat(
    state: &mut CoordinatorState,
    config: &GroupConfig,
    topics: Option<&Arc<dyn TopicLookup>>,
    ctx: &RequestContext,
    req: &ConsumerGroupHeartbeatRequest,
    now: i64,
) -> ConsumerGroupHeartbeatResponse {
    if let Some(refused) = invalid_heartbeat(config, ctx, req) {
        return refused;
    }
    let group_id = req.group_id.0.as_str();
    let epoch = req.member_epoch;
    let created = !state.groups.contains_key(group_id);
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
    if epoch != 0 {
        let Some(member) = cg.members.get(&member_id) else {
            return heartbeat_error(ResponseError::UnknownMemberId, "Unknown member id.");
        };
        // A retry with the previous epoch is fine when the answer that
        // bumped it may have been lost (Kafka's
        // `throwIfConsumerGroupMemberEpochIsInvalid`).
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
    }
    // A regular expression new to the group must compile before anything
    // changes (Kafka's `throwIfRegularExpressionIsInvalid`).
    let new_regex = match req
        .subscribed_topic_regex
        .as_ref()
        .map(|r| r.as_str())
        .filter(|r| !r.is_empty() && !cg.regexes.contains_key(*r))
    {
        Some(pattern) => match ResolvedRegex::compile(pattern) {
            Ok(compiled) => Some((pattern.to_owned(), compiled)),
            Err(description) => {
                if created {
                    state.groups.remove(group_id);
                }
                return heartbeat_error(
                    ResponseError::InvalidRegularExpression,
                    &format!(
                        "SubscribedTopicRegex `{pattern}` is not a valid regular expression: {description}."
                    ),
                );
            }
        },
        None => None,
    };
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
        let subscribed_regex = req
            .subscribed_topic_regex
            .as_ref()
            .map(|r| r.as_str().to_owned());
        let mut member = ConsumerMember {
            instance_id: instance.clone(),
            rack_id: req.rack_id.as_ref().map(|s| s.as_str().to_owned()),
            client_id: ctx.client_id.clone(),
            client_host: ctx.client_host.clone(),
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            subscribed: subscribed.clone(),
            subscribed_regex,
            ..ConsumerMember::fresh(&member_id, config, now)
        };
        match replaced.and_then(|old| cg.members.remove(&old).map(|m| (old, m))) {
            Some((old_id, old))
                if old.subscribed == subscribed && old.regex() == member.regex() =>
            {
                if let Some(t) = cg.target.remove(&old_id) {
                    cg.target.insert(member_id.clone(), t);
                }
                member.assigned = old.assigned;
                member.assignment_epochs = old.assignment_epochs;
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
        member.session_deadline_ms = now + member.session_timeout_ms;
        if let Some(names) = &req.subscribed_topic_names {
            let subscribed: Vec<String> = names.iter().map(|t| t.0.as_str().to_owned()).collect();
            if subscribed != member.subscribed {
                member.subscribed = subscribed;
                bump = true;
            }
        }
        if let Some(regex) = &req.subscribed_topic_regex
            && member.subscribed_regex.as_deref() != Some(regex.as_str())
        {
            let before = member.regex().map(str::to_owned);
            member.subscribed_regex = Some(regex.as_str().to_owned());
            bump |= member.regex() != before.as_deref();
        }
        // -1 means unchanged (Kafka's `ofSentinel`).
        if req.rebalance_timeout_ms != -1 {
            member.rebalance_timeout_ms = req.rebalance_timeout_ms;
        }
    }
    if let Some((pattern, compiled)) = new_regex {
        cg.regexes.insert(pattern, compiled);
    }
    refresh_regexes(cg, topics, now);
    if let Some(name) = &req.server_assignor {
        cg.assignors
            .insert(member_id.clone(), name.as_str().to_owned());
    }
    if bump {
        cg.group_epoch += 1;
        let name = cg.assignor_name();
        compute_target(cg, &name, topics);
    } else if topics.is_some() {
        // Topics may have been created, grown or deleted, or a regular
        // expression resolved anew, since the last computation.
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
    prune_assignment_epochs(member);
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
        let (mut resp, write_error) = self
            .mutate(&group_id, |state, now, _effects| {
                heartbeat(state, &config, topics.as_ref(), ctx, &req, now)
            })
            .await;
        if write_error != 0 && resp.error_code == 0 {
            // The change is not durable: the member retries, as with Kafka.
            resp = ConsumerGroupHeartbeatResponse::default()
                .with_error_code(write_error)
                .with_error_message(Some(sb("The group's records could not be written.")));
        }
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
                                        .with_subscribed_topic_regex(
                                            m.subscribed_regex.as_deref().map(sb),
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
