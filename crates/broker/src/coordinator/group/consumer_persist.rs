//! Persistence of KIP-848 consumer groups: which records a change writes,
//! and how a load rebuilds the groups from them.
//!
//! The coordinator does not track which of a consumer group's fields a
//! request touched. Instead [`ConsumerView`] is the part of a
//! [`ConsumerGroup`] that Kafka persists (group epoch, member metadata,
//! target assignment and its epoch, each member's current assignment), and
//! [`changes`] compares the view before a request with the view after it,
//! writing a record only for a key whose value changed and a tombstone for a
//! key that went away. A heartbeat that changes nothing (the common case)
//! writes nothing. Records come out in the order Kafka writes them (member
//! metadata, group epoch, targets, target epoch, current assignments; on
//! removal current assignment, target, then metadata), and [`replay_consumer`]
//! accepts them in any order, as a compacted log may hold them.
//!
//! What is not persisted is rebuilt on load as Kafka rebuilds it: sessions
//! (and the revocation deadline of a member still revoking) start over at
//! load time, and regular expressions are resolved again on the next
//! heartbeat.

use std::collections::BTreeMap;

use super::assignor::Assignment;
use super::config::GroupConfig;
use super::consumer::{ConsumerGroup, ConsumerMember, ResolvedRegex};
use super::consumer_records::{
    ConsumerKey, CurrentAssignmentValue, EpochedPartitions, GroupEpochValue, MemberMetadataValue,
    MemberState, TargetEpochValue, TargetMemberValue,
};
use super::error::GroupError;
use super::log::GroupLogRecord;
use super::state::Group;

/// What Kafka persists of one consumer group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ConsumerView {
    group_epoch: i32,
    assignment_epoch: i32,
    members: BTreeMap<String, MemberMetadataValue>,
    targets: BTreeMap<String, Assignment>,
    current: BTreeMap<String, CurrentAssignmentValue>,
}

impl ConsumerView {
    /// The persisted view of `group`, `None` when it is not a consumer
    /// group or has never held anything worth writing.
    pub(crate) fn of(group: Option<&Group>) -> Option<Self> {
        let cg = group?.consumer.as_ref()?;
        let view = Self {
            group_epoch: cg.group_epoch,
            assignment_epoch: cg.assignment_epoch,
            members: cg
                .members
                .values()
                .map(|m| (m.id.clone(), member_metadata(cg, m)))
                .collect(),
            targets: cg.target.clone(),
            current: cg
                .members
                .values()
                .map(|m| (m.id.clone(), current_assignment(cg, m)))
                .collect(),
        };
        (view != Self::default()).then_some(view)
    }
}

fn member_metadata(cg: &ConsumerGroup, m: &ConsumerMember) -> MemberMetadataValue {
    MemberMetadataValue {
        instance_id: m.instance_id.clone(),
        rack_id: m.rack_id.clone(),
        client_id: m.client_id.clone(),
        client_host: m.client_host.clone(),
        subscribed_topic_names: m.subscribed.clone(),
        subscribed_topic_regex: m.subscribed_regex.clone(),
        rebalance_timeout_ms: m.rebalance_timeout_ms,
        server_assignor: cg.assignors.get(&m.id).cloned(),
    }
}

fn epoched(m: &ConsumerMember, partitions: &Assignment) -> Vec<EpochedPartitions> {
    partitions
        .iter()
        .filter(|(_, ps)| !ps.is_empty())
        .map(|(topic, ps)| EpochedPartitions {
            topic: *topic,
            partitions: ps.iter().copied().collect(),
            assignment_epochs: Some(
                ps.iter()
                    .map(|p| {
                        m.assignment_epochs
                            .get(&(*topic, *p))
                            .copied()
                            .unwrap_or(m.member_epoch)
                    })
                    .collect(),
            ),
        })
        .collect()
}

fn current_assignment(cg: &ConsumerGroup, m: &ConsumerMember) -> CurrentAssignmentValue {
    let state = if !m.revoking.is_empty() {
        MemberState::UnrevokedPartitions
    } else if m.member_epoch == cg.assignment_epoch
        && cg.target.get(&m.id).is_some_and(|t| *t != m.assigned)
    {
        MemberState::UnreleasedPartitions
    } else {
        MemberState::Stable
    };
    CurrentAssignmentValue {
        member_epoch: m.member_epoch,
        previous_member_epoch: m.previous_epoch,
        state,
        assigned: epoched(m, &m.assigned),
        revoking: epoched(m, &m.revoking),
    }
}

fn record(key: ConsumerKey, value: Option<bytes::Bytes>, now: i64) -> GroupLogRecord {
    GroupLogRecord {
        key: key.encode(),
        value,
        timestamp_ms: now,
    }
}

/// The records that take group `id`'s persisted state from `before` to
/// `after` (`None`: not a consumer group, or gone).
pub(crate) fn changes(
    id: &str,
    before: Option<&ConsumerView>,
    after: Option<&ConsumerView>,
    now: i64,
) -> Vec<GroupLogRecord> {
    let mut out = Vec::new();
    let member_key = |member: &str| ConsumerKey::Member {
        group: id.to_owned(),
        member: member.to_owned(),
    };
    let target_key = |member: &str| ConsumerKey::Target {
        group: id.to_owned(),
        member: member.to_owned(),
    };
    let current_key = |member: &str| ConsumerKey::Current {
        group: id.to_owned(),
        member: member.to_owned(),
    };
    let empty = ConsumerView::default();
    let old = before.unwrap_or(&empty);
    let Some(new) = after else {
        if before.is_none() {
            return out;
        }
        // The group is gone: Kafka's tombstones, in its order.
        for member in old.current.keys() {
            out.push(record(current_key(member), None, now));
        }
        for member in old.targets.keys() {
            out.push(record(target_key(member), None, now));
        }
        out.push(record(
            ConsumerKey::TargetEpoch {
                group: id.to_owned(),
            },
            None,
            now,
        ));
        for member in old.members.keys() {
            out.push(record(member_key(member), None, now));
        }
        out.push(record(
            ConsumerKey::GroupEpoch {
                group: id.to_owned(),
            },
            None,
            now,
        ));
        return out;
    };
    for (member, value) in &new.members {
        if old.members.get(member) != Some(value) {
            out.push(record(member_key(member), Some(value.encode()), now));
        }
    }
    if new.group_epoch != old.group_epoch || before.is_none() {
        let value = GroupEpochValue {
            epoch: new.group_epoch,
        };
        out.push(record(
            ConsumerKey::GroupEpoch {
                group: id.to_owned(),
            },
            Some(value.encode()),
            now,
        ));
    }
    for (member, partitions) in &new.targets {
        if old.targets.get(member) != Some(partitions) {
            let value = TargetMemberValue {
                partitions: partitions.clone(),
            };
            out.push(record(target_key(member), Some(value.encode()), now));
        }
    }
    for member in old.targets.keys() {
        if !new.targets.contains_key(member) {
            out.push(record(target_key(member), None, now));
        }
    }
    if new.assignment_epoch != old.assignment_epoch {
        let value = TargetEpochValue {
            epoch: new.assignment_epoch,
        };
        out.push(record(
            ConsumerKey::TargetEpoch {
                group: id.to_owned(),
            },
            Some(value.encode()),
            now,
        ));
    }
    for (member, value) in &new.current {
        if old.current.get(member) != Some(value) {
            out.push(record(current_key(member), Some(value.encode()), now));
        }
    }
    for member in old.members.keys() {
        if !new.members.contains_key(member) {
            out.push(record(current_key(member), None, now));
            out.push(record(member_key(member), None, now));
        }
    }
    out
}

/// The consumer side of group `id` while loading, created (with its group)
/// when a record names it first.
fn loading<'a>(
    groups: &'a mut std::collections::HashMap<String, Group>,
    id: &str,
    config: &GroupConfig,
    now: i64,
) -> &'a mut ConsumerGroup {
    let group = groups
        .entry(id.to_owned())
        .or_insert_with(|| Group::new(id, now));
    group.protocol_type = Some("consumer".into());
    group.consumer.get_or_insert_with(|| ConsumerGroup {
        default_assignor: config.default_assignor().to_owned(),
        ..ConsumerGroup::default()
    })
}

/// A member still revoking gets its rebalance timeout again from load
/// time, as Kafka reschedules it.
fn reset_revoke_deadline(member: &mut ConsumerMember, now: i64) {
    member.revoke_deadline_ms =
        (!member.revoking.is_empty()).then(|| now + i64::from(member.rebalance_timeout_ms.max(0)));
}

fn to_assignment(
    member: &mut ConsumerMember,
    topics: Vec<EpochedPartitions>,
    epoch: i32,
) -> Assignment {
    let mut out = Assignment::new();
    for t in topics {
        let epochs = t.assignment_epochs.unwrap_or_default();
        for (i, p) in t.partitions.into_iter().enumerate() {
            out.entry(t.topic).or_default().insert(p);
            let at = epochs.get(i).copied().unwrap_or(epoch);
            member.assignment_epochs.insert((t.topic, p), at);
        }
    }
    out
}

/// Applies one consumer group record (`value` `None`: a tombstone) to the
/// groups being loaded.
///
/// # Errors
///
/// The value's [`GroupError`] when it does not decode; nothing changes then
/// (the caller skips the record with a warning).
pub(crate) fn replay_consumer(
    groups: &mut std::collections::HashMap<String, Group>,
    key: ConsumerKey,
    value: Option<&[u8]>,
    config: &GroupConfig,
    now: i64,
) -> Result<(), GroupError> {
    match (key, value) {
        (ConsumerKey::GroupEpoch { group }, Some(v)) => {
            let epoch = GroupEpochValue::decode(v)?.epoch;
            loading(groups, &group, config, now).group_epoch = epoch;
        }
        (ConsumerKey::GroupEpoch { group }, None) => {
            if let Some(g) = groups.get_mut(&group) {
                g.consumer = None;
                if g.protocol_type.as_deref() == Some("consumer") && g.members.is_empty() {
                    g.protocol_type = None;
                }
            }
        }
        (ConsumerKey::TargetEpoch { group }, Some(v)) => {
            let epoch = TargetEpochValue::decode(v)?.epoch;
            loading(groups, &group, config, now).assignment_epoch = epoch;
        }
        (ConsumerKey::TargetEpoch { group }, None) => {
            if let Some(cg) = groups.get_mut(&group).and_then(|g| g.consumer.as_mut()) {
                cg.assignment_epoch = 0;
            }
        }
        (ConsumerKey::Target { group, member }, Some(v)) => {
            let partitions = TargetMemberValue::decode(v)?.partitions;
            loading(groups, &group, config, now)
                .target
                .insert(member, partitions);
        }
        (ConsumerKey::Target { group, member }, None) => {
            if let Some(cg) = groups.get_mut(&group).and_then(|g| g.consumer.as_mut()) {
                cg.target.remove(&member);
            }
        }
        (ConsumerKey::Member { group, member }, Some(v)) => {
            let meta = MemberMetadataValue::decode(v)?;
            let cg = loading(groups, &group, config, now);
            match meta.server_assignor {
                Some(name) => cg.assignors.insert(member.clone(), name),
                None => cg.assignors.remove(&member),
            };
            let m = cg
                .members
                .entry(member.clone())
                .or_insert_with(|| ConsumerMember::fresh(&member, config, now));
            m.instance_id = meta.instance_id;
            m.rack_id = meta.rack_id;
            m.client_id = meta.client_id;
            m.client_host = meta.client_host;
            m.subscribed = meta.subscribed_topic_names;
            m.subscribed_regex = meta.subscribed_topic_regex;
            m.rebalance_timeout_ms = meta.rebalance_timeout_ms;
            reset_revoke_deadline(m, now);
            if let Some(pattern) = m.regex().map(str::to_owned)
                && !cg.regexes.contains_key(&pattern)
            {
                match ResolvedRegex::compile(&pattern) {
                    Ok(compiled) => {
                        cg.regexes.insert(pattern, compiled);
                    }
                    Err(err) => {
                        tracing::warn!(%group, %member, %pattern, %err, "stored subscription regex does not compile");
                    }
                }
            }
        }
        (ConsumerKey::Member { group, member }, None) => {
            if let Some(cg) = groups.get_mut(&group).and_then(|g| g.consumer.as_mut()) {
                cg.members.remove(&member);
                cg.assignors.remove(&member);
            }
        }
        (ConsumerKey::Current { group, member }, Some(v)) => {
            let current = CurrentAssignmentValue::decode(v)?;
            let cg = loading(groups, &group, config, now);
            let m = cg
                .members
                .entry(member.clone())
                .or_insert_with(|| ConsumerMember::fresh(&member, config, now));
            m.member_epoch = current.member_epoch;
            m.previous_epoch = current.previous_member_epoch;
            m.assignment_epochs.clear();
            m.assigned = to_assignment(m, current.assigned, current.member_epoch);
            m.revoking = to_assignment(m, current.revoking, current.member_epoch);
            m.last_sent = None;
            reset_revoke_deadline(m, now);
        }
        (ConsumerKey::Current { group, member }, None) => {
            if let Some(m) = groups
                .get_mut(&group)
                .and_then(|g| g.consumer.as_mut())
                .and_then(|cg| cg.members.get_mut(&member))
            {
                m.assigned.clear();
                m.revoking.clear();
                m.assignment_epochs.clear();
                m.revoke_deadline_ms = None;
            }
        }
    }
    Ok(())
}
