//! The classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.
//!
//! This follows Kafka's classic group state machine (`Empty` →
//! `PreparingRebalance` → `CompletingRebalance` → `Stable`, and back):
//!
//! * a new dynamic member of a v4+ JoinGroup first gets `MEMBER_ID_REQUIRED`
//!   with a minted id and rejoins with it;
//! * a join into an `Empty` group starts the *initial delayed join*
//!   (`group.initial.rebalance.delay.ms`, extended while members keep
//!   arriving, bounded by the rebalance timeout); any other rebalance ends as
//!   soon as every known member has rejoined, or at the rebalance timeout,
//!   when the members that did not rejoin are removed;
//! * the join answers carry the new generation; the leader's carries every
//!   member's metadata for the protocol the members voted for;
//! * the leader's SyncGroup assignment is written to `__consumer_offsets`
//!   before anyone gets it; members that never sync within the rebalance
//!   timeout are removed;
//! * static members (`group.instance.id`) keep their assignment across a
//!   restart: a rejoin under a known instance id replaces the old member id
//!   (which is fenced with `FENCED_INSTANCE_ID`) without a rebalance when
//!   its protocols are unchanged.

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::heartbeat_request::HeartbeatRequest;
use kafka_protocol::messages::heartbeat_response::HeartbeatResponse;
use kafka_protocol::messages::join_group_request::JoinGroupRequest;
use kafka_protocol::messages::join_group_response::{JoinGroupResponse, JoinGroupResponseMember};
use kafka_protocol::messages::leave_group_request::LeaveGroupRequest;
use kafka_protocol::messages::leave_group_response::{LeaveGroupResponse, MemberResponse};
use kafka_protocol::messages::sync_group_request::SyncGroupRequest;
use kafka_protocol::messages::sync_group_response::SyncGroupResponse;
use kafka_protocol::protocol::StrBytes;
use tokio::sync::oneshot;

use super::config::GroupConfig;
use super::coordinator::{Effects, GroupCoordinator, RequestContext};
use super::state::{
    Group, GroupState, JoinOutcome, JoinedMember, Member, RebalanceTimer, SyncOutcome,
};

const NONE: i16 = 0;

fn code(e: ResponseError) -> i16 {
    e.code()
}

fn opt_str(s: &Option<StrBytes>) -> Option<String> {
    s.as_ref().map(|s| s.as_str().to_owned())
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// Whether `group` has a timer that is due at `now`.
pub(crate) fn has_due_timer(group: &Group, now: i64) -> bool {
    group.rebalance.is_some_and(|t| now >= t.deadline_ms)
        || group.sync_deadline_ms.is_some_and(|d| now >= d)
        || group.pending_members.values().any(|d| now >= *d)
        || group.members.values().any(|m| session_expired(m, now))
}

/// Kafka's `shouldKeepAlive`, inverted: a member waiting for a join or sync
/// answer is kept alive by the rebalance, not by heartbeats.
fn session_expired(member: &Member, now: i64) -> bool {
    member.awaiting_join.is_none()
        && member.awaiting_sync.is_none()
        && now >= member.heartbeat_deadline_ms
}

/// Runs `group`'s due timers.
pub(crate) fn run_timers(group: &mut Group, config: &GroupConfig, now: i64, effects: &mut Effects) {
    let expired_pending: Vec<String> = group
        .pending_members
        .iter()
        .filter(|(_, d)| now >= **d)
        .map(|(id, _)| id.clone())
        .collect();
    for id in expired_pending {
        group.pending_members.remove(&id);
    }
    let expired: Vec<String> = group
        .members
        .values()
        .filter(|m| session_expired(m, now))
        .map(|m| m.id.clone())
        .collect();
    for id in expired {
        tracing::info!(group = %group.id, member = %id, "member session expired");
        remove_member(group, &id, config, now, effects);
    }
    if group.sync_deadline_ms.is_some_and(|d| now >= d) {
        group.sync_deadline_ms = None;
        let laggards: Vec<String> = group.pending_sync.drain().collect();
        if matches!(
            group.state,
            GroupState::CompletingRebalance | GroupState::Stable
        ) {
            for id in laggards {
                tracing::info!(group = %group.id, member = %id, "member did not sync in time");
                remove_member(group, &id, config, now, effects);
            }
        }
    }
    check_join(group, config, now, effects);
}

/// Moves the group to `PreparingRebalance` (Kafka's `prepareRebalance`).
pub(crate) fn prepare_rebalance(
    group: &mut Group,
    config: &GroupConfig,
    now: i64,
    effects: &mut Effects,
) {
    if group.state == GroupState::CompletingRebalance {
        // Everyone waiting for the old generation's assignment must rejoin.
        for member in group.members.values_mut() {
            member.assignment = Bytes::new();
            if let Some(tx) = member.awaiting_sync.take() {
                let _ = tx.send(SyncOutcome::error(code(ResponseError::RebalanceInProgress)));
            }
        }
    }
    group.pending_sync.clear();
    group.sync_deadline_ms = None;
    let rebalance_timeout = group.max_rebalance_timeout_ms();
    let timer = if group.state == GroupState::Empty {
        let delay = config.initial_rebalance_delay_ms.max(0);
        RebalanceTimer {
            deadline_ms: now + delay,
            initial: true,
            remaining_ms: (rebalance_timeout - delay).max(0),
            new_member_joined: false,
        }
    } else {
        RebalanceTimer {
            deadline_ms: now + rebalance_timeout,
            initial: false,
            remaining_ms: 0,
            new_member_joined: false,
        }
    };
    group.rebalance = Some(timer);
    group.transition(GroupState::PreparingRebalance, now);
    check_join(group, config, now, effects);
}

fn maybe_prepare_rebalance(
    group: &mut Group,
    config: &GroupConfig,
    now: i64,
    effects: &mut Effects,
) {
    if matches!(
        group.state,
        GroupState::Empty | GroupState::Stable | GroupState::CompletingRebalance
    ) {
        prepare_rebalance(group, config, now, effects);
    }
}

/// Completes the join phase when it is due (Kafka's `DelayedJoin` /
/// `InitialDelayedJoin`).
fn check_join(group: &mut Group, config: &GroupConfig, now: i64, effects: &mut Effects) {
    if group.state != GroupState::PreparingRebalance {
        return;
    }
    let Some(mut timer) = group.rebalance else {
        complete_join(group, now, effects);
        return;
    };
    if timer.initial {
        if now < timer.deadline_ms {
            return;
        }
        if timer.new_member_joined && timer.remaining_ms > 0 {
            let delay = config
                .initial_rebalance_delay_ms
                .max(0)
                .min(timer.remaining_ms);
            timer.deadline_ms = now + delay;
            timer.remaining_ms = (timer.remaining_ms - delay).max(0);
            timer.new_member_joined = false;
            group.rebalance = Some(timer);
            if delay > 0 {
                return;
            }
        }
        complete_join(group, now, effects);
    } else if group.all_members_joined() || now >= timer.deadline_ms {
        complete_join(group, now, effects);
    }
}

/// Ends the join phase: drops dynamic members that did not rejoin, starts
/// the next generation and answers every waiting JoinGroup.
fn complete_join(group: &mut Group, now: i64, effects: &mut Effects) {
    group.rebalance = None;
    let stragglers: Vec<String> = group
        .members
        .values()
        .filter(|m| m.awaiting_join.is_none() && m.instance_id.is_none())
        .map(|m| m.id.clone())
        .collect();
    for id in stragglers {
        tracing::info!(group = %group.id, member = %id, "member did not rejoin in time");
        detach_member(group, &id);
    }
    if group.leader.as_ref().is_none_or(|l| {
        group
            .members
            .get(l)
            .is_none_or(|m| m.awaiting_join.is_none())
    }) {
        let joined = group
            .members
            .values()
            .find(|m| m.awaiting_join.is_some())
            .map(|m| m.id.clone());
        group.leader = joined.or_else(|| group.members.keys().next().cloned());
    }
    group.generation = group.generation.wrapping_add(1);
    if group.members.is_empty() {
        group.protocol_name = None;
        group.leader = None;
        group.transition(GroupState::Empty, now);
        effects.write_group(group, now);
        return;
    }
    group.protocol_name = group.select_protocol();
    group.transition(GroupState::CompletingRebalance, now);
    group.pending_sync = group.members.keys().cloned().collect();
    group.sync_deadline_ms = Some(now + group.max_rebalance_timeout_ms());
    let protocol = group.protocol_name.clone().unwrap_or_default();
    let everyone: Vec<JoinedMember> = group
        .members
        .values()
        .map(|m| JoinedMember {
            member_id: m.id.clone(),
            group_instance_id: m.instance_id.clone(),
            metadata: m.metadata_for(&protocol).cloned().unwrap_or_default(),
        })
        .collect();
    let leader = group.leader.clone().unwrap_or_default();
    let protocol_type = group.protocol_type.clone();
    let protocol_name = group.protocol_name.clone();
    let generation = group.generation;
    for member in group.members.values_mut() {
        member.heartbeat_deadline_ms = now + i64::from(member.session_timeout_ms);
        if let Some(tx) = member.awaiting_join.take() {
            let is_leader = member.id == leader;
            let _ = tx.send(JoinOutcome {
                error: NONE,
                generation_id: generation,
                protocol_type: protocol_type.clone(),
                protocol_name: protocol_name.clone(),
                leader: leader.clone(),
                member_id: member.id.clone(),
                members: if is_leader {
                    everyone.clone()
                } else {
                    Vec::new()
                },
                skip_assignment: false,
            });
        }
    }
}

/// Takes a member out of the group's maps without touching the state.
fn detach_member(group: &mut Group, id: &str) -> Option<Member> {
    let member = group.members.remove(id)?;
    if let Some(instance) = &member.instance_id
        && group.static_members.get(instance).is_some_and(|m| m == id)
    {
        group.static_members.remove(instance);
    }
    group.pending_sync.remove(id);
    if group.leader.as_deref() == Some(id) {
        group.leader = group
            .members
            .values()
            .find(|m| m.awaiting_join.is_some())
            .or_else(|| group.members.values().next())
            .map(|m| m.id.clone());
    }
    Some(member)
}

/// Removes a member and rebalances (Kafka's `removeMemberAndUpdateGroup`).
pub(crate) fn remove_member(
    group: &mut Group,
    id: &str,
    config: &GroupConfig,
    now: i64,
    effects: &mut Effects,
) {
    let Some(mut member) = detach_member(group, id) else {
        return;
    };
    if let Some(tx) = member.awaiting_join.take() {
        let _ = tx.send(JoinOutcome::error(code(ResponseError::UnknownMemberId), id));
    }
    if let Some(tx) = member.awaiting_sync.take() {
        let _ = tx.send(SyncOutcome::error(code(ResponseError::UnknownMemberId)));
    }
    match group.state {
        GroupState::Stable | GroupState::CompletingRebalance => {
            prepare_rebalance(group, config, now, effects);
        }
        GroupState::PreparingRebalance => check_join(group, config, now, effects),
        GroupState::Empty | GroupState::Dead => {}
    }
}

/// The JoinGroup answer for a member of the current generation.
fn current_outcome(
    group: &Group,
    member_id: &str,
    with_members: bool,
    skip_assignment: bool,
) -> JoinOutcome {
    let protocol = group.protocol_name.clone().unwrap_or_default();
    JoinOutcome {
        error: NONE,
        generation_id: group.generation,
        protocol_type: group.protocol_type.clone(),
        protocol_name: group.protocol_name.clone(),
        leader: group.leader.clone().unwrap_or_default(),
        member_id: member_id.to_owned(),
        members: if with_members {
            group
                .members
                .values()
                .map(|m| JoinedMember {
                    member_id: m.id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    metadata: m.metadata_for(&protocol).cloned().unwrap_or_default(),
                })
                .collect()
        } else {
            Vec::new()
        },
        skip_assignment,
    }
}

/// A join that is answered now or later.
pub(crate) enum JoinStart {
    /// Answered at once.
    Done(JoinOutcome),
    /// Answered when the join phase completes.
    Wait(oneshot::Receiver<JoinOutcome>),
}

/// The parts of a JoinGroup the state machine needs.
struct JoinParams {
    instance_id: Option<String>,
    client_id: String,
    client_host: String,
    session_timeout_ms: i32,
    rebalance_timeout_ms: i32,
    protocol_type: String,
    protocols: Vec<(String, Bytes)>,
    version: i16,
}

fn new_member_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4())
}

fn add_member_and_rebalance(
    group: &mut Group,
    id: String,
    params: &JoinParams,
    config: &GroupConfig,
    now: i64,
    effects: &mut Effects,
) -> JoinStart {
    let (tx, rx) = oneshot::channel();
    if group.members.is_empty() {
        group.protocol_type = Some(params.protocol_type.clone());
    }
    if let Some(instance) = &params.instance_id {
        group.static_members.insert(instance.clone(), id.clone());
    }
    group.members.insert(
        id.clone(),
        Member {
            id: id.clone(),
            instance_id: params.instance_id.clone(),
            client_id: params.client_id.clone(),
            client_host: params.client_host.clone(),
            rebalance_timeout_ms: params.rebalance_timeout_ms,
            session_timeout_ms: params.session_timeout_ms,
            protocols: params.protocols.clone(),
            assignment: Bytes::new(),
            awaiting_join: Some(tx),
            awaiting_sync: None,
            heartbeat_deadline_ms: now + i64::from(params.session_timeout_ms),
        },
    );
    if group.leader.is_none() {
        group.leader = Some(id);
    }
    if group.state == GroupState::PreparingRebalance
        && let Some(timer) = group.rebalance.as_mut()
        && timer.initial
    {
        timer.new_member_joined = true;
    }
    maybe_prepare_rebalance(group, config, now, effects);
    check_join(group, config, now, effects);
    JoinStart::Wait(rx)
}

fn update_member_and_rebalance(
    group: &mut Group,
    id: &str,
    params: &JoinParams,
    config: &GroupConfig,
    now: i64,
    effects: &mut Effects,
) -> JoinStart {
    let (tx, rx) = oneshot::channel();
    if let Some(member) = group.members.get_mut(id) {
        member.protocols = params.protocols.clone();
        member.rebalance_timeout_ms = params.rebalance_timeout_ms;
        member.session_timeout_ms = params.session_timeout_ms;
        member.client_id = params.client_id.clone();
        member.client_host = params.client_host.clone();
        member.heartbeat_deadline_ms = now + i64::from(params.session_timeout_ms);
        // A retried join supersedes the one still waiting.
        member.awaiting_join = Some(tx);
    }
    maybe_prepare_rebalance(group, config, now, effects);
    check_join(group, config, now, effects);
    JoinStart::Wait(rx)
}

/// A static member rejoining with an empty member id under a known
/// instance id (Kafka's `updateStaticMemberAndRebalance`).
fn replace_static_member(
    group: &mut Group,
    old_id: &str,
    params: &JoinParams,
    config: &GroupConfig,
    now: i64,
    effects: &mut Effects,
) -> JoinStart {
    let instance = params.instance_id.clone().unwrap_or_default();
    let new_id = new_member_id(&instance);
    let Some(mut old) = group.members.remove(old_id) else {
        return add_member_and_rebalance(group, new_id, params, config, now, effects);
    };
    let fenced = code(ResponseError::FencedInstanceId);
    if let Some(tx) = old.awaiting_join.take() {
        let _ = tx.send(JoinOutcome::error(fenced, old_id));
    }
    if let Some(tx) = old.awaiting_sync.take() {
        let _ = tx.send(SyncOutcome::error(fenced));
    }
    let protocols_changed = !old.same_protocols(&params.protocols);
    let member = Member {
        id: new_id.clone(),
        instance_id: params.instance_id.clone(),
        client_id: params.client_id.clone(),
        client_host: params.client_host.clone(),
        rebalance_timeout_ms: params.rebalance_timeout_ms,
        session_timeout_ms: params.session_timeout_ms,
        protocols: params.protocols.clone(),
        assignment: old.assignment.clone(),
        awaiting_join: None,
        awaiting_sync: None,
        heartbeat_deadline_ms: now + i64::from(params.session_timeout_ms),
    };
    group.members.insert(new_id.clone(), member);
    group.static_members.insert(instance, new_id.clone());
    if group.pending_sync.remove(old_id) {
        group.pending_sync.insert(new_id.clone());
    }
    let was_leader = group.leader.as_deref() == Some(old_id);
    if was_leader {
        group.leader = Some(new_id.clone());
    }
    match group.state {
        GroupState::Stable if !protocols_changed => {
            // Same subscription: keep the generation and the assignment; the
            // new id must be durable before the member relies on it. A
            // returning leader gets the member list; from v9 it is told to
            // skip the assignment, before that its SyncGroup in Stable just
            // returns the current one.
            effects.write_group(group, now);
            let skip = was_leader && params.version >= 9;
            JoinStart::Done(current_outcome(group, &new_id, was_leader, skip))
        }
        _ => update_member_and_rebalance(group, &new_id, params, config, now, effects),
    }
}

fn join(
    state: &mut super::coordinator::CoordinatorState,
    config: &GroupConfig,
    now: i64,
    effects: &mut Effects,
    group_id: &str,
    member_id: &str,
    params: JoinParams,
) -> JoinStart {
    let err = |e: ResponseError| JoinStart::Done(JoinOutcome::error(code(e), member_id));
    if group_id.is_empty() {
        return err(ResponseError::InvalidGroupId);
    }
    if params.session_timeout_ms < config.min_session_timeout_ms
        || params.session_timeout_ms > config.max_session_timeout_ms
    {
        return err(ResponseError::InvalidSessionTimeout);
    }
    if params.protocol_type.is_empty() || params.protocols.is_empty() {
        return err(ResponseError::InconsistentGroupProtocol);
    }
    let group = if member_id.is_empty() {
        state
            .groups
            .entry(group_id.to_owned())
            .or_insert_with(|| Group::new(group_id, now))
    } else {
        match state.groups.get_mut(group_id) {
            Some(g) => g,
            None => return err(ResponseError::UnknownMemberId),
        }
    };
    if group.state == GroupState::Dead {
        return err(ResponseError::CoordinatorNotAvailable);
    }
    if group.is_consumer_group() {
        if group.has_members() {
            // Classic members cannot join a consumer-protocol group.
            return err(ResponseError::InconsistentGroupProtocol);
        }
        group.consumer = None;
    }
    if !group.supports_protocols(&params.protocol_type, &params.protocols) {
        return err(ResponseError::InconsistentGroupProtocol);
    }
    let instance = params.instance_id.clone();
    if member_id.is_empty() {
        if let Some(old_id) = group.static_member(instance.as_deref()).map(str::to_owned) {
            return replace_static_member(group, &old_id, &params, config, now, effects);
        }
        if group.members.len() + group.pending_members.len() >= config.max_size {
            return err(ResponseError::GroupMaxSizeReached);
        }
        if instance.is_some() {
            let id = new_member_id(instance.as_deref().unwrap_or_default());
            return add_member_and_rebalance(group, id, &params, config, now, effects);
        }
        let id = new_member_id(&params.client_id);
        if params.version >= 4 {
            group
                .pending_members
                .insert(id.clone(), now + i64::from(params.session_timeout_ms));
            return JoinStart::Done(JoinOutcome::error(
                code(ResponseError::MemberIdRequired),
                &id,
            ));
        }
        return add_member_and_rebalance(group, id, &params, config, now, effects);
    }
    if group.pending_members.remove(member_id).is_some() {
        return add_member_and_rebalance(
            group,
            member_id.to_owned(),
            &params,
            config,
            now,
            effects,
        );
    }
    if group.is_static_member_fenced(member_id, instance.as_deref()) {
        return err(ResponseError::FencedInstanceId);
    }
    let Some(member) = group.members.get(member_id) else {
        return err(ResponseError::UnknownMemberId);
    };
    let same = member.same_protocols(&params.protocols);
    let is_leader = group.leader.as_deref() == Some(member_id);
    match group.state {
        GroupState::PreparingRebalance => {
            update_member_and_rebalance(group, member_id, &params, config, now, effects)
        }
        GroupState::CompletingRebalance if same => {
            JoinStart::Done(current_outcome(group, member_id, is_leader, false))
        }
        GroupState::Stable if same && !is_leader => {
            if let Some(m) = group.members.get_mut(member_id) {
                m.heartbeat_deadline_ms = now + i64::from(m.session_timeout_ms);
            }
            JoinStart::Done(current_outcome(group, member_id, false, false))
        }
        GroupState::CompletingRebalance | GroupState::Stable => {
            update_member_and_rebalance(group, member_id, &params, config, now, effects)
        }
        GroupState::Empty | GroupState::Dead => err(ResponseError::UnknownMemberId),
    }
}

/// Shapes a join outcome as the response of `version`.
pub(crate) fn join_response(outcome: JoinOutcome, version: i16) -> JoinGroupResponse {
    let mut resp = JoinGroupResponse::default()
        .with_error_code(outcome.error)
        .with_generation_id(outcome.generation_id)
        .with_protocol_name(outcome.protocol_name.as_deref().map(sb))
        .with_leader(sb(&outcome.leader))
        .with_member_id(sb(&outcome.member_id))
        .with_members(
            outcome
                .members
                .iter()
                .map(|m| {
                    JoinGroupResponseMember::default()
                        .with_member_id(sb(&m.member_id))
                        .with_group_instance_id(if version >= 5 {
                            m.group_instance_id.as_deref().map(sb)
                        } else {
                            None
                        })
                        .with_metadata(m.metadata.clone())
                })
                .collect(),
        );
    if version >= 7 {
        resp = resp.with_protocol_type(outcome.protocol_type.as_deref().map(sb));
    }
    if version >= 9 {
        resp = resp.with_skip_assignment(outcome.skip_assignment);
    }
    if version < 7 && resp.protocol_name.is_none() {
        // Before v7 the protocol name is not nullable.
        resp.protocol_name = Some(StrBytes::new());
    }
    resp
}

impl GroupCoordinator {
    /// Handles JoinGroup (v0–9). The answer may wait for the rebalance to
    /// complete.
    pub async fn join_group(
        &self,
        ctx: &RequestContext,
        req: JoinGroupRequest,
    ) -> JoinGroupResponse {
        let version = ctx.api_version;
        let group_id = req.group_id.0.as_str().to_owned();
        let member_id = req.member_id.as_str().to_owned();
        let rebalance_timeout_ms = if version == 0 || req.rebalance_timeout_ms < 0 {
            req.session_timeout_ms
        } else {
            req.rebalance_timeout_ms
        };
        let params = JoinParams {
            instance_id: opt_str(&req.group_instance_id),
            client_id: ctx.client_id.clone(),
            client_host: ctx.client_host.clone(),
            session_timeout_ms: req.session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type: req.protocol_type.as_str().to_owned(),
            protocols: req
                .protocols
                .iter()
                .map(|p| (p.name.as_str().to_owned(), p.metadata.clone()))
                .collect(),
            version,
        };
        let config = &self.config;
        let (start, write_error) = self
            .mutate(&group_id, |state, now, effects| {
                join(state, config, now, effects, &group_id, &member_id, params)
            })
            .await;
        let outcome = match start {
            JoinStart::Done(outcome) if write_error != NONE && outcome.error == NONE => {
                JoinOutcome::error(write_error, &outcome.member_id)
            }
            JoinStart::Done(outcome) => outcome,
            JoinStart::Wait(rx) => rx.await.unwrap_or_else(|_| {
                JoinOutcome::error(code(ResponseError::CoordinatorNotAvailable), &member_id)
            }),
        };
        join_response(outcome, version)
    }

    /// Handles SyncGroup (v0–5). The answer waits for the leader's
    /// assignment and its durable write.
    pub async fn sync_group(
        &self,
        ctx: &RequestContext,
        req: SyncGroupRequest,
    ) -> SyncGroupResponse {
        let version = ctx.api_version;
        let group_id = req.group_id.0.as_str().to_owned();
        let config = &self.config;
        let (start, _) = self
            .mutate(&group_id, |state, now, effects| {
                sync(state, config, now, effects, &req)
            })
            .await;
        let outcome = match start {
            Ok(outcome) => outcome,
            Err(rx) => rx.await.unwrap_or_else(|_| {
                SyncOutcome::error(code(ResponseError::CoordinatorNotAvailable))
            }),
        };
        let mut resp = SyncGroupResponse::default()
            .with_error_code(outcome.error)
            .with_assignment(outcome.assignment);
        if version >= 5 {
            resp = resp
                .with_protocol_type(outcome.protocol_type.as_deref().map(sb))
                .with_protocol_name(outcome.protocol_name.as_deref().map(sb));
        }
        resp
    }

    /// Handles Heartbeat (v0–4).
    pub async fn heartbeat(
        &self,
        _ctx: &RequestContext,
        req: HeartbeatRequest,
    ) -> HeartbeatResponse {
        let now = self.now_ms();
        let mut state = self.lock();
        let error = heartbeat(
            &mut state,
            now,
            req.group_id.0.as_str(),
            req.member_id.as_str(),
            opt_str(&req.group_instance_id).as_deref(),
            req.generation_id,
        );
        HeartbeatResponse::default().with_error_code(error)
    }

    /// Handles LeaveGroup (v0–5, batched from v3).
    pub async fn leave_group(
        &self,
        ctx: &RequestContext,
        req: LeaveGroupRequest,
    ) -> LeaveGroupResponse {
        let version = ctx.api_version;
        let group_id = req.group_id.0.as_str().to_owned();
        let leaving: Vec<(String, Option<String>)> = if version >= 3 {
            req.members
                .iter()
                .map(|m| {
                    (
                        m.member_id.as_str().to_owned(),
                        opt_str(&m.group_instance_id),
                    )
                })
                .collect()
        } else {
            vec![(req.member_id.as_str().to_owned(), None)]
        };
        let config = &self.config;
        let ((top, per_member), write_error) = self
            .mutate(&group_id, |state, now, effects| {
                leave(state, config, now, effects, &group_id, &leaving)
            })
            .await;
        let top = if top == NONE { write_error } else { top };
        if version >= 3 {
            LeaveGroupResponse::default()
                .with_error_code(top)
                .with_members(
                    per_member
                        .into_iter()
                        .map(|(member_id, instance, error)| {
                            MemberResponse::default()
                                .with_member_id(sb(&member_id))
                                .with_group_instance_id(instance.as_deref().map(sb))
                                .with_error_code(error)
                        })
                        .collect(),
                )
        } else {
            let error = per_member.first().map(|(_, _, e)| *e).unwrap_or(NONE);
            LeaveGroupResponse::default().with_error_code(if top != NONE { top } else { error })
        }
    }
}

fn sync(
    state: &mut super::coordinator::CoordinatorState,
    config: &GroupConfig,
    now: i64,
    effects: &mut Effects,
    req: &SyncGroupRequest,
) -> Result<SyncOutcome, oneshot::Receiver<SyncOutcome>> {
    let err = |e: ResponseError| Ok(SyncOutcome::error(code(e)));
    let member_id = req.member_id.as_str();
    let instance = opt_str(&req.group_instance_id);
    let Some(group) = state.groups.get_mut(req.group_id.0.as_str()) else {
        return err(ResponseError::UnknownMemberId);
    };
    if group.state == GroupState::Dead {
        return err(ResponseError::CoordinatorNotAvailable);
    }
    if group.is_static_member_fenced(member_id, instance.as_deref()) {
        return err(ResponseError::FencedInstanceId);
    }
    if !group.members.contains_key(member_id) {
        return err(ResponseError::UnknownMemberId);
    }
    if req.generation_id != group.generation {
        return err(ResponseError::IllegalGeneration);
    }
    if req
        .protocol_type
        .as_ref()
        .is_some_and(|t| group.protocol_type.as_deref() != Some(t.as_str()))
        || req
            .protocol_name
            .as_ref()
            .is_some_and(|n| group.protocol_name.as_deref() != Some(n.as_str()))
    {
        return err(ResponseError::InconsistentGroupProtocol);
    }
    match group.state {
        GroupState::Empty | GroupState::Dead => err(ResponseError::UnknownMemberId),
        GroupState::PreparingRebalance => err(ResponseError::RebalanceInProgress),
        GroupState::Stable => {
            group.pending_sync.remove(member_id);
            let member = group.members.get_mut(member_id);
            let assignment = member
                .map(|m| {
                    m.heartbeat_deadline_ms = now + i64::from(m.session_timeout_ms);
                    m.assignment.clone()
                })
                .unwrap_or_default();
            Ok(SyncOutcome {
                error: NONE,
                protocol_type: group.protocol_type.clone(),
                protocol_name: group.protocol_name.clone(),
                assignment,
            })
        }
        GroupState::CompletingRebalance => {
            let (tx, rx) = oneshot::channel();
            group.pending_sync.remove(member_id);
            if let Some(m) = group.members.get_mut(member_id) {
                m.awaiting_sync = Some(tx);
                m.heartbeat_deadline_ms = now + i64::from(m.session_timeout_ms);
            }
            if group.leader.as_deref() == Some(member_id) {
                for member in group.members.values_mut() {
                    member.assignment = req
                        .assignments
                        .iter()
                        .find(|a| a.member_id.as_str() == member.id)
                        .map(|a| a.assignment.clone())
                        .unwrap_or_default();
                }
                group.transition(GroupState::Stable, now);
                effects.write_group(group, now);
                effects.assignment_of = Some((group.id.clone(), group.generation));
                for member in group.members.values_mut() {
                    if let Some(tx) = member.awaiting_sync.take() {
                        effects.deferred_syncs.push((
                            tx,
                            SyncOutcome {
                                error: NONE,
                                protocol_type: group.protocol_type.clone(),
                                protocol_name: group.protocol_name.clone(),
                                assignment: member.assignment.clone(),
                            },
                        ));
                    }
                }
            }
            let _ = config;
            Err(rx)
        }
    }
}

fn heartbeat(
    state: &mut super::coordinator::CoordinatorState,
    now: i64,
    group_id: &str,
    member_id: &str,
    instance: Option<&str>,
    generation: i32,
) -> i16 {
    let Some(group) = state.groups.get_mut(group_id) else {
        return code(ResponseError::UnknownMemberId);
    };
    if group.state == GroupState::Dead {
        return code(ResponseError::CoordinatorNotAvailable);
    }
    if group.is_static_member_fenced(member_id, instance) {
        return code(ResponseError::FencedInstanceId);
    }
    let Some(member) = group.members.get_mut(member_id) else {
        return code(ResponseError::UnknownMemberId);
    };
    if group.state == GroupState::Empty {
        return code(ResponseError::UnknownMemberId);
    }
    if generation != group.generation {
        return code(ResponseError::IllegalGeneration);
    }
    member.heartbeat_deadline_ms = now + i64::from(member.session_timeout_ms);
    match group.state {
        GroupState::PreparingRebalance => code(ResponseError::RebalanceInProgress),
        _ => NONE,
    }
}

type LeaveResult = (i16, Vec<(String, Option<String>, i16)>);

fn leave(
    state: &mut super::coordinator::CoordinatorState,
    config: &GroupConfig,
    now: i64,
    effects: &mut Effects,
    group_id: &str,
    leaving: &[(String, Option<String>)],
) -> LeaveResult {
    let Some(group) = state.groups.get_mut(group_id) else {
        return (code(ResponseError::UnknownMemberId), Vec::new());
    };
    if group.state == GroupState::Dead {
        return (code(ResponseError::CoordinatorNotAvailable), Vec::new());
    }
    let mut results = Vec::with_capacity(leaving.len());
    for (member_id, instance) in leaving {
        let error = leave_one(group, member_id, instance.as_deref(), config, now, effects);
        results.push((member_id.clone(), instance.clone(), error));
    }
    (NONE, results)
}

fn leave_one(
    group: &mut Group,
    member_id: &str,
    instance: Option<&str>,
    config: &GroupConfig,
    now: i64,
    effects: &mut Effects,
) -> i16 {
    let target = if let Some(instance) = instance {
        match group.static_member(Some(instance)) {
            None => return code(ResponseError::UnknownMemberId),
            Some(registered) if !member_id.is_empty() && registered != member_id => {
                return code(ResponseError::FencedInstanceId);
            }
            Some(registered) => registered.to_owned(),
        }
    } else {
        member_id.to_owned()
    };
    if group.pending_members.remove(&target).is_some() {
        check_join(group, config, now, effects);
        return NONE;
    }
    if !group.members.contains_key(&target) {
        return code(ResponseError::UnknownMemberId);
    }
    tracing::info!(group = %group.id, member = %target, "member left");
    remove_member(group, &target, config, now, effects);
    NONE
}
