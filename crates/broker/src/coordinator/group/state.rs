//! The in-memory model of a group: its state, members and committed offsets.
//!
//! A [`Group`] is plain data plus the small rules Kafka's `ClassicGroup`
//! applies to it (protocol compatibility, protocol selection, leader choice,
//! the metadata record it persists). The request flows that move it between
//! states live in [`classic`](super::classic); this module holds no I/O.

use std::collections::{BTreeMap, HashMap, HashSet};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::records::{GroupMetadataValue, MemberMetadata, OffsetCommitValue};

/// The classic protocol's group states, named as Kafka names them (the names
/// appear in `ListGroups` and `DescribeGroups`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupState {
    /// No members; may still hold committed offsets.
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Joined; waiting for the leader's assignment.
    CompletingRebalance,
    /// Every member has its assignment.
    Stable,
    /// Deleted or expired; about to disappear.
    Dead,
}

impl GroupState {
    /// Kafka's name for the state.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// A committed offset as the coordinator keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// The offset.
    pub offset: i64,
    /// The leader epoch the client reported, -1 when none.
    pub leader_epoch: i32,
    /// Client metadata.
    pub metadata: String,
    /// Commit time (ms).
    pub commit_timestamp: i64,
    /// Explicit expiry from an old-version commit, -1 when none.
    pub expire_timestamp: i64,
    /// The `__consumer_offsets` offset of the record that wrote it (-1 until
    /// written): when a transaction's offsets are committed, the most recent
    /// record wins over an older regular commit, as on Kafka.
    pub record_offset: i64,
}

impl CommittedOffset {
    /// The `__consumer_offsets` value for this offset.
    pub fn to_value(&self) -> OffsetCommitValue {
        OffsetCommitValue {
            offset: self.offset,
            leader_epoch: self.leader_epoch,
            metadata: self.metadata.clone(),
            commit_timestamp: self.commit_timestamp,
            expire_timestamp: self.expire_timestamp,
        }
    }

    /// The offset a `__consumer_offsets` value at `record_offset` describes.
    pub fn from_value(v: OffsetCommitValue, record_offset: i64) -> Self {
        Self {
            offset: v.offset,
            leader_epoch: v.leader_epoch,
            metadata: v.metadata,
            commit_timestamp: v.commit_timestamp,
            expire_timestamp: v.expire_timestamp,
            record_offset,
        }
    }
}

/// What a delayed JoinGroup is answered with.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JoinOutcome {
    /// Kafka error code (0 = none).
    pub error: i16,
    /// The generation the member joined.
    pub generation_id: i32,
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The selected protocol.
    pub protocol_name: Option<String>,
    /// The leader's member id.
    pub leader: String,
    /// The member's id.
    pub member_id: String,
    /// Every member with its metadata (only for the leader).
    pub members: Vec<JoinedMember>,
    /// The leader must not compute a new assignment (static leader rejoin).
    pub skip_assignment: bool,
}

impl JoinOutcome {
    /// An error-only outcome.
    pub fn error(code: i16, member_id: &str) -> Self {
        Self {
            error: code,
            generation_id: -1,
            member_id: member_id.to_owned(),
            ..Self::default()
        }
    }
}

/// A member as the leader sees it in its JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    /// The member id.
    pub member_id: String,
    /// The static instance id.
    pub group_instance_id: Option<String>,
    /// Its metadata for the selected protocol.
    pub metadata: Bytes,
}

/// What a delayed SyncGroup is answered with.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SyncOutcome {
    /// Kafka error code (0 = none).
    pub error: i16,
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The selected protocol.
    pub protocol_name: Option<String>,
    /// The member's assignment.
    pub assignment: Bytes,
}

impl SyncOutcome {
    /// An error-only outcome.
    pub fn error(code: i16) -> Self {
        Self {
            error: code,
            ..Self::default()
        }
    }
}

/// One member of a classic group.
#[derive(Debug)]
pub struct Member {
    /// The member id the coordinator minted.
    pub id: String,
    /// The static instance id (`group.instance.id`).
    pub instance_id: Option<String>,
    /// The client id from the request header.
    pub client_id: String,
    /// The client's address.
    pub client_host: String,
    /// How long a rebalance may wait for this member (ms).
    pub rebalance_timeout_ms: i32,
    /// How long the member may go without a heartbeat (ms).
    pub session_timeout_ms: i32,
    /// The protocols it supports, in preference order, with metadata.
    pub protocols: Vec<(String, Bytes)>,
    /// Its current assignment.
    pub assignment: Bytes,
    /// A pending JoinGroup response.
    pub awaiting_join: Option<oneshot::Sender<JoinOutcome>>,
    /// A pending SyncGroup response.
    pub awaiting_sync: Option<oneshot::Sender<SyncOutcome>>,
    /// When the session expires without a heartbeat (ms).
    pub heartbeat_deadline_ms: i64,
}

impl Member {
    /// The metadata this member sent for `protocol`.
    pub fn metadata_for(&self, protocol: &str) -> Option<&Bytes> {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, m)| m)
    }

    /// Whether the member's protocols are exactly `protocols`.
    pub fn same_protocols(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }
}

/// The timer of a rebalance in `PreparingRebalance`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RebalanceTimer {
    /// When the join phase ends (ms).
    pub deadline_ms: i64,
    /// Whether this is the initial delayed join of an empty group
    /// (`group.initial.rebalance.delay.ms`), which never completes early.
    pub initial: bool,
    /// For the initial delay: how much of the rebalance timeout is left to
    /// extend by (ms).
    pub remaining_ms: i64,
    /// For the initial delay: whether a member joined since the last extension.
    pub new_member_joined: bool,
}

/// A group: classic membership plus committed offsets.
#[derive(Debug)]
pub struct Group {
    /// The group id.
    pub id: String,
    /// The current state.
    pub state: GroupState,
    /// When the current state was entered (ms).
    pub state_timestamp_ms: i64,
    /// The protocol type all members share, once any joined.
    pub protocol_type: Option<String>,
    /// The protocol selected for the current generation.
    pub protocol_name: Option<String>,
    /// The generation id.
    pub generation: i32,
    /// The leader's member id.
    pub leader: Option<String>,
    /// Members by id (ordered so responses are deterministic).
    pub members: BTreeMap<String, Member>,
    /// Static instance id to member id.
    pub static_members: HashMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, with their expiry (ms).
    pub pending_members: HashMap<String, i64>,
    /// Members that have not sent SyncGroup for the current generation.
    pub pending_sync: HashSet<String>,
    /// The join-phase timer while `PreparingRebalance`.
    pub rebalance: Option<RebalanceTimer>,
    /// When members still in `pending_sync` are removed (ms).
    pub sync_deadline_ms: Option<i64>,
    /// Committed offsets by (topic, partition).
    pub offsets: BTreeMap<(String, i32), CommittedOffset>,
    /// Offsets written by open transactions (TxnOffsetCommit), by producer
    /// id: invisible until that producer's COMMIT marker reaches the group's
    /// `__consumer_offsets` partition, dropped on ABORT.
    pub pending_txn_offsets: BTreeMap<i64, BTreeMap<(String, i32), CommittedOffset>>,
    /// The KIP-848 side, when this is a consumer-protocol group.
    pub consumer: Option<super::consumer::ConsumerGroup>,
}

impl Group {
    /// A new empty group.
    pub fn new(id: &str, now_ms: i64) -> Self {
        Self {
            id: id.to_owned(),
            state: GroupState::Empty,
            state_timestamp_ms: now_ms,
            protocol_type: None,
            protocol_name: None,
            generation: 0,
            leader: None,
            members: BTreeMap::new(),
            static_members: HashMap::new(),
            pending_members: HashMap::new(),
            pending_sync: HashSet::new(),
            rebalance: None,
            sync_deadline_ms: None,
            offsets: BTreeMap::new(),
            pending_txn_offsets: BTreeMap::new(),
            consumer: None,
        }
    }

    /// Moves to `state`, stamping the time.
    pub fn transition(&mut self, state: GroupState, now_ms: i64) {
        self.state = state;
        self.state_timestamp_ms = now_ms;
    }

    /// Whether the group has members (joined, or pending a member id).
    pub fn has_members(&self) -> bool {
        !self.members.is_empty()
            || !self.pending_members.is_empty()
            || self
                .consumer
                .as_ref()
                .is_some_and(|c| !c.members.is_empty())
    }

    /// Whether an open transaction has written an offset of `topic`-`partition`
    /// (OffsetFetch with `require_stable` answers UNSTABLE_OFFSET_COMMIT then).
    pub fn has_pending_txn_offset(&self, topic: &str, partition: i32) -> bool {
        self.pending_txn_offsets
            .values()
            .any(|offsets| offsets.contains_key(&(topic.to_owned(), partition)))
    }

    /// Ends producer `producer_id`'s transaction for this group: on commit
    /// its offsets replace the committed ones unless a regular commit was
    /// written after them; on abort they are dropped.
    pub fn complete_txn(&mut self, producer_id: i64, commit: bool) {
        let Some(pending) = self.pending_txn_offsets.remove(&producer_id) else {
            return;
        };
        if !commit {
            return;
        }
        for (key, offset) in pending {
            let newer = self
                .offsets
                .get(&key)
                .is_none_or(|current| current.record_offset < offset.record_offset);
            if newer {
                self.offsets.insert(key, offset);
            }
        }
    }

    /// Whether this is a KIP-848 consumer-protocol group.
    pub fn is_consumer_group(&self) -> bool {
        self.consumer.is_some()
    }

    /// The state name `ListGroups` shows, and the group type.
    pub fn listed_state(&self) -> (&'static str, &'static str) {
        match &self.consumer {
            Some(c) => (c.state_name(), "consumer"),
            None => (self.state.name(), "classic"),
        }
    }

    /// The member id registered for a static instance id.
    pub fn static_member(&self, instance_id: Option<&str>) -> Option<&str> {
        instance_id
            .and_then(|i| self.static_members.get(i))
            .map(String::as_str)
    }

    /// Kafka's `isStaticMemberFenced`: the instance id is known but bound to
    /// another member id.
    pub fn is_static_member_fenced(&self, member_id: &str, instance_id: Option<&str>) -> bool {
        match self.static_member(instance_id) {
            Some(registered) => registered != member_id,
            None => false,
        }
    }

    /// Protocols every member supports.
    fn candidate_protocols(&self) -> Vec<String> {
        let mut first = match self.members.values().next() {
            Some(m) => m
                .protocols
                .iter()
                .map(|(n, _)| n.clone())
                .collect::<Vec<_>>(),
            None => return Vec::new(),
        };
        first.retain(|p| self.members.values().all(|m| m.metadata_for(p).is_some()));
        first
    }

    /// Whether a member with these protocols may join (Kafka's
    /// `supportsProtocols`).
    pub fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        let candidates = self.candidate_protocols();
        protocols.iter().any(|(name, _)| candidates.contains(name))
    }

    /// Kafka's `selectProtocol`: among protocols all members support, each
    /// member votes for the first it lists; the most votes win (ties go to
    /// the protocol listed first by the earliest member).
    pub fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes: Vec<(String, usize)> = candidates.iter().map(|c| (c.clone(), 0)).collect();
        for member in self.members.values() {
            let choice = member
                .protocols
                .iter()
                .find(|(name, _)| candidates.contains(name));
            if let Some((name, _)) = choice
                && let Some(slot) = votes.iter_mut().find(|(c, _)| c == name)
            {
                slot.1 += 1;
            }
        }
        let mut best: Option<(String, usize)> = None;
        for (name, count) in votes {
            if best.as_ref().is_none_or(|(_, b)| count > *b) {
                best = Some((name, count));
            }
        }
        best.map(|(name, _)| name)
    }

    /// The largest rebalance timeout among members (ms).
    pub fn max_rebalance_timeout_ms(&self) -> i64 {
        self.members
            .values()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    /// Whether every member has rejoined and no member id is pending.
    pub fn all_members_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.values().all(|m| m.awaiting_join.is_some())
    }

    /// The group metadata record value for the current generation.
    pub fn to_record(&self) -> GroupMetadataValue {
        let protocol = self.protocol_name.clone();
        GroupMetadataValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: protocol.clone(),
            leader: self.leader.clone(),
            current_state_timestamp: self.state_timestamp_ms,
            members: self
                .members
                .values()
                .map(|m| MemberMetadata {
                    member_id: m.id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout: m.rebalance_timeout_ms,
                    session_timeout: m.session_timeout_ms,
                    subscription: protocol
                        .as_deref()
                        .and_then(|p| m.metadata_for(p))
                        .cloned()
                        .unwrap_or_default(),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    /// Rebuilds a group from its persisted metadata (members are kept as
    /// they were; their sessions start over at `now_ms`).
    pub fn from_record(id: &str, value: GroupMetadataValue, now_ms: i64) -> Self {
        let mut group = Group::new(id, now_ms);
        group.protocol_type = Some(value.protocol_type.clone()).filter(|t| !t.is_empty());
        group.protocol_name = value.protocol.clone();
        group.generation = value.generation;
        group.leader = value.leader.clone();
        if value.current_state_timestamp >= 0 {
            group.state_timestamp_ms = value.current_state_timestamp;
        }
        for m in value.members {
            if let Some(instance) = &m.group_instance_id {
                group
                    .static_members
                    .insert(instance.clone(), m.member_id.clone());
            }
            let protocols = value
                .protocol
                .clone()
                .map(|p| vec![(p, m.subscription.clone())])
                .unwrap_or_default();
            group.members.insert(
                m.member_id.clone(),
                Member {
                    id: m.member_id,
                    instance_id: m.group_instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    rebalance_timeout_ms: m.rebalance_timeout,
                    session_timeout_ms: m.session_timeout,
                    protocols,
                    assignment: m.assignment,
                    awaiting_join: None,
                    awaiting_sync: None,
                    heartbeat_deadline_ms: now_ms + i64::from(m.session_timeout),
                },
            );
        }
        group.state = if group.members.is_empty() {
            GroupState::Empty
        } else {
            GroupState::Stable
        };
        if group
            .leader
            .as_ref()
            .is_some_and(|l| !group.members.contains_key(l))
        {
            group.leader = group.members.keys().next().cloned();
        }
        group
    }

    /// Topics the members subscribe to, when the protocol type is `consumer`
    /// and every subscription parses; `None` when unknown.
    pub fn subscribed_topics(&self) -> Option<HashSet<String>> {
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        let protocol = self.protocol_name.as_deref()?;
        let mut topics = HashSet::new();
        for member in self.members.values() {
            let metadata = member.metadata_for(protocol)?;
            topics.extend(super::consumer_protocol::subscription_topics(metadata)?);
        }
        Some(topics)
    }
}
