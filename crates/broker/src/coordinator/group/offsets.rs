//! Committed offsets: OffsetCommit, TxnOffsetCommit, OffsetFetch,
//! OffsetDelete and expiry.
//!
//! A commit is validated against the group the way Kafka's classic group
//! validates it (a *simple* consumer commits with generation -1 and no member
//! id, which creates an `Empty` group without protocol type), written to
//! `__consumer_offsets`, and only made visible to OffsetFetch once durable.
//! Partitions are judged one by one: an oversized metadata string fails its
//! own partition with `OFFSET_METADATA_TOO_LARGE` and the others commit.
//!
//! A transactional commit (KIP-98) is written as a transactional batch under
//! the producer's id and epoch and stays pending per producer until the
//! transaction's marker reaches the partition; meanwhile OffsetFetch with
//! `require_stable` (KIP-447) answers `UNSTABLE_OFFSET_COMMIT` for it.
//!
//! Expiry follows `offsets.retention.minutes`: the offsets of an `Empty`
//! group expire a retention period after it became empty; those of a simple
//! group, or of topics a `Stable` consumer group no longer subscribes to, a
//! retention period after their commit; an explicit expire timestamp from an
//! old-version commit wins. A group left empty without offsets is deleted.

use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::TopicName;
use kafka_protocol::messages::offset_commit_request::OffsetCommitRequest;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponse, OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_request::OffsetDeleteRequest;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponse, OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequest;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponse, OffsetFetchResponseGroup, OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions, OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequest;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponse, TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::protocol::StrBytes;
use krabka_ids::{ProducerEpoch, ProducerId};

use super::consumer::TopicLookup;
use super::coordinator::{CoordinatorState, GroupCoordinator, OffsetToApply, RequestContext};
use super::log::GroupLogRecord;
use super::records::{GroupMetadataKey, OffsetCommitKey};
use super::state::{CommittedOffset, Group, GroupState};

const NONE: i16 = 0;

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// Kafka's `ClassicGroup.validateOffsetCommit` (and the group lookup
/// around it); creates a simple group for a generation -1 commit. A
/// transactional commit (TxnOffsetCommit) that names no member, generation
/// or instance is not validated against the membership (those fields only
/// exist from v3), and is not refused during a rebalance. A consumer-protocol
/// group checks the member epoch against the committed `partitions`
/// ([`super::consumer::validate_consumer_commit`]).
#[allow(clippy::too_many_arguments)]
fn validate_commit(
    state: &mut CoordinatorState,
    now: i64,
    group_id: &str,
    generation: i32,
    member_id: &str,
    instance: Option<&str>,
    version: i16,
    transactional: bool,
    partitions: &[(&str, i32)],
    topics: Option<&Arc<dyn TopicLookup>>,
) -> i16 {
    if group_id.is_empty() {
        return ResponseError::InvalidGroupId.code();
    }
    let group = match state.groups.get_mut(group_id) {
        Some(g) => g,
        None if generation < 0 => state
            .groups
            .entry(group_id.to_owned())
            .or_insert_with(|| Group::new(group_id, now)),
        None if version >= 9 => return ResponseError::GroupIdNotFound.code(),
        None => return ResponseError::IllegalGeneration.code(),
    };
    if group.state == GroupState::Dead {
        return ResponseError::CoordinatorNotAvailable.code();
    }
    if transactional && generation == -1 && member_id.is_empty() && instance.is_none() {
        return NONE;
    }
    if group.is_consumer_group() {
        return super::consumer::validate_consumer_commit(
            group,
            member_id,
            generation,
            partitions,
            topics,
            version,
            transactional,
        );
    }
    if generation < 0 && group.state == GroupState::Empty {
        return NONE;
    }
    if generation >= 0 || !member_id.is_empty() || instance.is_some() {
        if let Some(instance) = instance {
            match group.static_member(Some(instance)) {
                None => return ResponseError::UnknownMemberId.code(),
                Some(registered) if registered != member_id => {
                    return ResponseError::FencedInstanceId.code();
                }
                Some(_) => {}
            }
        }
        if !group.members.contains_key(member_id) {
            return ResponseError::UnknownMemberId.code();
        }
        if generation != group.generation {
            return ResponseError::IllegalGeneration.code();
        }
    } else {
        // No member id, but the group has members: not a simple consumer.
        return ResponseError::UnknownMemberId.code();
    }
    if !transactional && group.state == GroupState::CompletingRebalance {
        return ResponseError::RebalanceInProgress.code();
    }
    if let Some(m) = group.members.get_mut(member_id) {
        m.heartbeat_deadline_ms = now + i64::from(m.session_timeout_ms);
    }
    NONE
}

impl GroupCoordinator {
    /// Handles OffsetCommit (v2–9).
    pub async fn offset_commit(
        &self,
        ctx: &RequestContext,
        req: OffsetCommitRequest,
    ) -> OffsetCommitResponse {
        let version = ctx.api_version;
        let group_id = req.group_id.0.as_str().to_owned();
        let max_metadata = self.config.offset_metadata_max_bytes;
        let lookup = self.topic_lookup();
        let committed: Vec<(&str, i32)> = req
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (t.name.0.as_str(), p.partition_index))
            })
            .collect();
        let (mut topics, write_error) = self
            .mutate(&group_id, |state, now, effects| {
                let group_error = validate_commit(
                    state,
                    now,
                    &group_id,
                    req.generation_id_or_member_epoch,
                    req.member_id.as_str(),
                    req.group_instance_id.as_ref().map(|s| s.as_str()),
                    version,
                    false,
                    &committed,
                    lookup.as_ref(),
                );
                let expire_timestamp = if version <= 4 && req.retention_time_ms >= 0 {
                    now.saturating_add(req.retention_time_ms)
                } else {
                    -1
                };
                req.topics
                    .iter()
                    .map(|topic| {
                        let partitions = topic
                            .partitions
                            .iter()
                            .map(|p| {
                                let metadata = p
                                    .committed_metadata
                                    .as_ref()
                                    .map(|m| m.as_str().to_owned())
                                    .unwrap_or_default();
                                let error = if group_error != NONE {
                                    group_error
                                } else if metadata.len() > max_metadata {
                                    ResponseError::OffsetMetadataTooLarge.code()
                                } else {
                                    let offset = CommittedOffset {
                                        offset: p.committed_offset,
                                        leader_epoch: if version >= 6 {
                                            p.committed_leader_epoch
                                        } else {
                                            -1
                                        },
                                        metadata,
                                        commit_timestamp: now,
                                        expire_timestamp,
                                        record_offset: -1,
                                    };
                                    queue_offset(
                                        effects,
                                        &group_id,
                                        topic.name.0.as_str(),
                                        p.partition_index,
                                        offset,
                                        now,
                                    );
                                    NONE
                                };
                                OffsetCommitResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(error)
                            })
                            .collect();
                        OffsetCommitResponseTopic::default()
                            .with_name(topic.name.clone())
                            .with_partitions(partitions)
                    })
                    .collect::<Vec<_>>()
            })
            .await;
        if write_error != NONE {
            for topic in &mut topics {
                for p in &mut topic.partitions {
                    if p.error_code == NONE {
                        p.error_code = write_error;
                    }
                }
            }
        }
        OffsetCommitResponse::default().with_topics(topics)
    }

    /// Handles TxnOffsetCommit (v0–4) for producer (`producer_id`,
    /// `producer_epoch`), whose transaction the caller has checked holds the
    /// group's partition: the offsets are validated as an OffsetCommit's
    /// (without the rebalance check), written as a transactional batch
    /// under the producer's id and epoch, and kept pending — invisible to
    /// OffsetFetch until the transaction's COMMIT marker reaches the
    /// partition ([`GroupCoordinator::write_txn_marker`]).
    pub async fn txn_offset_commit(
        &self,
        ctx: &RequestContext,
        req: TxnOffsetCommitRequest,
    ) -> TxnOffsetCommitResponse {
        let group_id = req.group_id.0.as_str().to_owned();
        let producer = (
            ProducerId(req.producer_id.0),
            ProducerEpoch(req.producer_epoch),
        );
        let max_metadata = self.config.offset_metadata_max_bytes;
        let version = ctx.api_version;
        let lookup = self.topic_lookup();
        let committed: Vec<(&str, i32)> = req
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (t.name.0.as_str(), p.partition_index))
            })
            .collect();
        let (mut topics, write_error) = self
            .mutate(&group_id, |state, now, effects| {
                effects.producer = Some(producer);
                let group_error = validate_commit(
                    state,
                    now,
                    &group_id,
                    req.generation_id,
                    req.member_id.as_str(),
                    req.group_instance_id.as_ref().map(|s| s.as_str()),
                    // Kafka answers a missing group with ILLEGAL_GENERATION
                    // here, as OffsetCommit did before v9.
                    8,
                    true,
                    &committed,
                    lookup.as_ref(),
                );
                req.topics
                    .iter()
                    .map(|topic| {
                        let partitions = topic
                            .partitions
                            .iter()
                            .map(|p| {
                                let metadata = p
                                    .committed_metadata
                                    .as_ref()
                                    .map(|m| m.as_str().to_owned())
                                    .unwrap_or_default();
                                let error = if group_error != NONE {
                                    group_error
                                } else if metadata.len() > max_metadata {
                                    ResponseError::OffsetMetadataTooLarge.code()
                                } else {
                                    let offset = CommittedOffset {
                                        offset: p.committed_offset,
                                        leader_epoch: if version >= 2 {
                                            p.committed_leader_epoch
                                        } else {
                                            -1
                                        },
                                        metadata,
                                        commit_timestamp: now,
                                        expire_timestamp: -1,
                                        record_offset: -1,
                                    };
                                    queue_offset(
                                        effects,
                                        &group_id,
                                        topic.name.0.as_str(),
                                        p.partition_index,
                                        offset,
                                        now,
                                    );
                                    NONE
                                };
                                TxnOffsetCommitResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(error)
                            })
                            .collect();
                        TxnOffsetCommitResponseTopic::default()
                            .with_name(topic.name.clone())
                            .with_partitions(partitions)
                    })
                    .collect::<Vec<_>>()
            })
            .await;
        if write_error != NONE {
            for topic in &mut topics {
                for p in &mut topic.partitions {
                    if p.error_code == NONE {
                        p.error_code = write_error;
                    }
                }
            }
        }
        TxnOffsetCommitResponse::default().with_topics(topics)
    }

    /// Handles OffsetFetch (v1–9, one group before v8, many from v8).
    pub async fn offset_fetch(
        &self,
        ctx: &RequestContext,
        req: OffsetFetchRequest,
    ) -> OffsetFetchResponse {
        let version = ctx.api_version;
        let state = self.lock();
        if version >= 8 {
            let groups = req
                .groups
                .iter()
                .map(|g| {
                    let requested = g.topics.as_ref().map(|topics| {
                        topics
                            .iter()
                            .map(|t| (t.name.0.as_str().to_owned(), t.partition_indexes.clone()))
                            .collect::<Vec<_>>()
                    });
                    let rows =
                        fetch_rows(&state, g.group_id.0.as_str(), requested, req.require_stable);
                    OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id.clone())
                        .with_topics(
                            rows.into_iter()
                                .map(|(topic, partitions)| {
                                    OffsetFetchResponseTopics::default()
                                        .with_name(TopicName(sb(&topic)))
                                        .with_partitions(
                                            partitions
                                                .into_iter()
                                                .map(|(p, o, error)| {
                                                    OffsetFetchResponsePartitions::default()
                                                        .with_partition_index(p)
                                                        .with_error_code(error)
                                                        .with_committed_offset(
                                                            o.as_ref().map_or(-1, |o| o.offset),
                                                        )
                                                        .with_committed_leader_epoch(
                                                            o.as_ref()
                                                                .map_or(-1, |o| o.leader_epoch),
                                                        )
                                                        .with_metadata(Some(sb(o
                                                            .as_ref()
                                                            .map_or("", |o| o.metadata.as_str()))))
                                                })
                                                .collect(),
                                        )
                                })
                                .collect(),
                        )
                })
                .collect();
            return OffsetFetchResponse::default().with_groups(groups);
        }
        let requested = req.topics.as_ref().map(|topics| {
            topics
                .iter()
                .map(|t| (t.name.0.as_str().to_owned(), t.partition_indexes.clone()))
                .collect::<Vec<_>>()
        });
        let rows = fetch_rows(
            &state,
            req.group_id.0.as_str(),
            requested,
            version >= 7 && req.require_stable,
        );
        let topics = rows
            .into_iter()
            .map(|(topic, partitions)| {
                OffsetFetchResponseTopic::default()
                    .with_name(TopicName(sb(&topic)))
                    .with_partitions(
                        partitions
                            .into_iter()
                            .map(|(p, o, error)| {
                                OffsetFetchResponsePartition::default()
                                    .with_partition_index(p)
                                    .with_error_code(error)
                                    .with_committed_offset(o.as_ref().map_or(-1, |o| o.offset))
                                    .with_committed_leader_epoch(if version >= 5 {
                                        o.as_ref().map_or(-1, |o| o.leader_epoch)
                                    } else {
                                        -1
                                    })
                                    .with_metadata(Some(sb(o
                                        .as_ref()
                                        .map_or("", |o| o.metadata.as_str()))))
                            })
                            .collect(),
                    )
            })
            .collect();
        OffsetFetchResponse::default().with_topics(topics)
    }

    /// Handles OffsetDelete (v0).
    pub async fn offset_delete(
        &self,
        _ctx: &RequestContext,
        req: OffsetDeleteRequest,
    ) -> OffsetDeleteResponse {
        let group_id = req.group_id.0.as_str().to_owned();
        let ((top, topics), write_error) = self
            .mutate(&group_id, |state, now, effects| {
                let Some(group) = state.groups.get_mut(&group_id) else {
                    return (ResponseError::GroupIdNotFound.code(), Vec::new());
                };
                match group.state {
                    GroupState::Dead => return (ResponseError::GroupIdNotFound.code(), Vec::new()),
                    GroupState::Stable
                    | GroupState::PreparingRebalance
                    | GroupState::CompletingRebalance
                        if group.protocol_type.as_deref() != Some("consumer") =>
                    {
                        return (ResponseError::NonEmptyGroup.code(), Vec::new());
                    }
                    _ => {}
                }
                let subscribed = if group.state == GroupState::Empty {
                    Some(Default::default())
                } else {
                    group.subscribed_topics()
                };
                let topics = req
                    .topics
                    .iter()
                    .map(|t| {
                        let name = t.name.0.as_str();
                        // Unknown subscriptions count as subscribed: never
                        // delete offsets a live member may still rely on.
                        let is_subscribed = subscribed.as_ref().is_none_or(|s| s.contains(name));
                        let partitions = t
                            .partitions
                            .iter()
                            .map(|p| {
                                let error = if is_subscribed {
                                    ResponseError::GroupSubscribedToTopic.code()
                                } else {
                                    if group
                                        .offsets
                                        .remove(&(name.to_owned(), p.partition_index))
                                        .is_some()
                                    {
                                        effects.records.push(offset_tombstone(
                                            &group_id,
                                            name,
                                            p.partition_index,
                                            now,
                                        ));
                                    }
                                    NONE
                                };
                                OffsetDeleteResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(error)
                            })
                            .collect();
                        OffsetDeleteResponseTopic::default()
                            .with_name(t.name.clone())
                            .with_partitions(partitions)
                    })
                    .collect();
                (NONE, topics)
            })
            .await;
        OffsetDeleteResponse::default()
            .with_error_code(if top == NONE { write_error } else { top })
            .with_topics(topics)
    }

    /// Expires offsets past `offsets.retention.minutes` and deletes groups
    /// left empty without offsets (Kafka's periodic `cleanupGroupMetadata`).
    pub(crate) async fn expire_offsets(&self) {
        let candidates: Vec<String> = self.lock().groups.keys().cloned().collect();
        let retention = self.config.offsets_retention_ms;
        for id in candidates {
            self.mutate(&id, |state, now, effects| {
                let Some(group) = state.groups.get_mut(&id) else {
                    return;
                };
                let expired = expired_offsets(group, now, retention);
                for key in &expired {
                    group.offsets.remove(key);
                    effects
                        .records
                        .push(offset_tombstone(&id, &key.0, key.1, now));
                }
                if group.state == GroupState::Empty
                    && group.offsets.is_empty()
                    && group.pending_txn_offsets.is_empty()
                    && !group.has_members()
                {
                    tracing::info!(group = %id, "deleting empty group without offsets");
                    group.transition(GroupState::Dead, now);
                    effects.records.push(group_tombstone(&id, now));
                    state.groups.remove(&id);
                }
            })
            .await;
        }
    }
}

/// Every (topic, partition) of `group` whose offset has expired at `now`
/// (never one an open transaction is about to commit).
fn expired_offsets(group: &Group, now: i64, retention: i64) -> Vec<(String, i32)> {
    let mut expired = candidate_offsets(group, now, retention);
    expired.retain(|(topic, p)| !group.has_pending_txn_offset(topic, *p));
    expired
}

fn candidate_offsets(group: &Group, now: i64, retention: i64) -> Vec<(String, i32)> {
    let is_expired = |o: &CommittedOffset, base: i64| {
        if o.expire_timestamp >= 0 {
            now >= o.expire_timestamp
        } else {
            now.saturating_sub(base) >= retention
        }
    };
    if group
        .consumer
        .as_ref()
        .is_some_and(|c| !c.members.is_empty())
    {
        return Vec::new();
    }
    match (&group.protocol_type, group.state) {
        (Some(_), GroupState::Empty) => group
            .offsets
            .iter()
            .filter(|(_, o)| is_expired(o, group.state_timestamp_ms.max(0)))
            .map(|(k, _)| k.clone())
            .collect(),
        (Some(t), GroupState::Stable) if t == "consumer" => match group.subscribed_topics() {
            Some(subscribed) => group
                .offsets
                .iter()
                .filter(|((topic, _), o)| {
                    !subscribed.contains(topic) && is_expired(o, o.commit_timestamp)
                })
                .map(|(k, _)| k.clone())
                .collect(),
            None => Vec::new(),
        },
        (Some(_), _) => Vec::new(),
        (None, _) => group
            .offsets
            .iter()
            .filter(|(_, o)| is_expired(o, o.commit_timestamp))
            .map(|(k, _)| k.clone())
            .collect(),
    }
}

/// Queues the record committing `offset` and its application once durable.
fn queue_offset(
    effects: &mut super::coordinator::Effects,
    group: &str,
    topic: &str,
    partition: i32,
    offset: CommittedOffset,
    now: i64,
) {
    let key = OffsetCommitKey {
        group: group.to_owned(),
        topic: topic.to_owned(),
        partition,
    };
    effects.apply_offsets.push(OffsetToApply {
        group: key.group.clone(),
        topic: key.topic.clone(),
        partition,
        record: effects.records.len(),
        offset: offset.clone(),
    });
    effects.records.push(GroupLogRecord {
        key: key.encode(),
        value: Some(offset.to_value().encode()),
        timestamp_ms: now,
    });
}

pub(crate) fn offset_tombstone(
    group: &str,
    topic: &str,
    partition: i32,
    now: i64,
) -> GroupLogRecord {
    GroupLogRecord {
        key: OffsetCommitKey {
            group: group.to_owned(),
            topic: topic.to_owned(),
            partition,
        }
        .encode(),
        value: None,
        timestamp_ms: now,
    }
}

pub(crate) fn group_tombstone(group: &str, now: i64) -> GroupLogRecord {
    GroupLogRecord {
        key: GroupMetadataKey {
            group: group.to_owned(),
        }
        .encode(),
        value: None,
        timestamp_ms: now,
    }
}

/// Per topic: (partition, committed offset, partition error code).
type FetchRows = Vec<(String, Vec<(i32, Option<CommittedOffset>, i16)>)>;

/// The offsets asked for (`None` = every committed offset of the group).
/// With `require_stable` (KIP-447), a partition an open transaction has
/// written an offset for is answered UNSTABLE_OFFSET_COMMIT, no offset.
fn fetch_rows(
    state: &CoordinatorState,
    group_id: &str,
    requested: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> FetchRows {
    let group = state
        .groups
        .get(group_id)
        .filter(|g| g.state != GroupState::Dead);
    let row = |topic: &str, p: i32, o: Option<&CommittedOffset>| {
        if require_stable && group.is_some_and(|g| g.has_pending_txn_offset(topic, p)) {
            (p, None, ResponseError::UnstableOffsetCommit.code())
        } else {
            (p, o.cloned(), NONE)
        }
    };
    match requested {
        Some(topics) => topics
            .into_iter()
            .map(|(topic, partitions)| {
                let rows = partitions
                    .into_iter()
                    .map(|p| {
                        let o = group.and_then(|g| g.offsets.get(&(topic.clone(), p)));
                        row(&topic, p, o)
                    })
                    .collect();
                (topic, rows)
            })
            .collect(),
        None => {
            let mut out: FetchRows = Vec::new();
            if let Some(g) = group {
                for ((topic, p), o) in &g.offsets {
                    let r = row(topic, *p, Some(o));
                    match out.last_mut() {
                        Some((t, rows)) if t == topic => rows.push(r),
                        _ => out.push((topic.clone(), vec![r])),
                    }
                }
            }
            out
        }
    }
}
