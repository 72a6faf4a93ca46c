//! Topics named by id: OffsetCommit v10 and OffsetFetch v10 (KIP-848) name
//! each topic by its id, while the coordinator keeps offsets by topic name
//! (as Kafka's `__consumer_offsets` records do). The group handler names
//! the requested topics from the registry before the coordinator runs and
//! puts each answered topic's id back before the response is written.
//!
//! TxnOffsetCommit v6 (KIP-1319) does the same for a transaction's
//! offsets ([`name_txn_commit`], [`id_txn_commit_response`]).
//!
//! An id the registry does not know is answered `UNKNOWN_TOPIC_ID` for each
//! of its partitions, as Kafka 4.1 does; it never reaches the coordinator.

use {
    crate::{
        network::newer::txn_offset_commit::{set_topic_id, topic_id},
        topics::TopicRegistry,
    },
    kafka_protocol::{
        error::ResponseError,
        messages::{
            GroupId, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
            OffsetFetchResponse, TopicName, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
            offset_commit_request::OffsetCommitRequestTopic,
            offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic},
            offset_fetch_request::OffsetFetchRequestTopics,
            offset_fetch_response::{OffsetFetchResponsePartitions, OffsetFetchResponseTopics},
            txn_offset_commit_request::TxnOffsetCommitRequestTopic,
            txn_offset_commit_response::{
                TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
            },
        },
        protocol::StrBytes,
    },
    uuid::Uuid,
};

/// The first version of OffsetCommit and OffsetFetch that names topics by
/// id.
pub const FIRST_VERSION_BY_ID: i16 = 10;

/// The topics of a request given by an id this broker does not know.
#[derive(Debug, Default)]
pub struct UnknownIds<T>(Vec<T>);

/// The name of topic `id`, if the registry knows it.
fn name_of(registry: &TopicRegistry, id: Uuid) -> Option<TopicName> {
    registry
        .by_id(id)
        .map(|meta| TopicName(StrBytes::from_string(meta.name)))
}

/// The id of topic `name`, nil if the registry does not know it.
fn id_of(registry: &TopicRegistry, name: &TopicName) -> Uuid {
    registry.get(name.0.as_str()).map_or(Uuid::nil(), |m| m.id)
}

/// Names `topics` by their ids (`name_and_id` reaches a topic's two
/// fields), taking out those whose id is unknown.
fn name_topics<T: Default>(
    registry: &TopicRegistry,
    topics: &mut Vec<T>,
    name_and_id: impl Fn(&mut T) -> (&mut TopicName, Uuid),
) -> UnknownIds<T> {
    let mut unknown = Vec::new();
    topics.retain_mut(|topic| {
        let (name, id) = name_and_id(topic);
        if !name.0.is_empty() {
            return true;
        }
        match name_of(registry, id) {
            Some(found) => {
                *name = found;
                true
            }
            None => {
                unknown.push(std::mem::take(topic));
                false
            }
        }
    });
    UnknownIds(unknown)
}

/// Names the topics of an OffsetCommit v10 by their ids, taking out those
/// whose id is unknown.
pub fn name_commit(
    registry: &TopicRegistry,
    request: &mut OffsetCommitRequest,
) -> UnknownIds<OffsetCommitRequestTopic> {
    name_topics(registry, &mut request.topics, |t| (&mut t.name, t.topic_id))
}

/// Puts the topic ids into an OffsetCommit v10 response and answers the
/// unknown ids.
pub fn id_commit_response(
    registry: &TopicRegistry,
    response: &mut OffsetCommitResponse,
    unknown: UnknownIds<OffsetCommitRequestTopic>,
) {
    for topic in &mut response.topics {
        if topic.topic_id.is_nil() {
            topic.topic_id = id_of(registry, &topic.name);
        }
    }
    let code = ResponseError::UnknownTopicId.code();
    response
        .topics
        .extend(unknown.0.iter().map(|t| answer_commit_topic(t, code)));
}

/// The answer to every partition of a commit's `topic`: `code`.
#[must_use]
pub fn answer_commit_topic(
    topic: &OffsetCommitRequestTopic,
    code: i16,
) -> OffsetCommitResponseTopic {
    OffsetCommitResponseTopic::default()
        .with_name(topic.name.clone())
        .with_topic_id(topic.topic_id)
        .with_partitions(
            topic
                .partitions
                .iter()
                .map(|p| {
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                })
                .collect(),
        )
}

/// Names the topics of an OffsetFetch v10 by their ids, taking out those
/// whose id is unknown, by group.
pub fn name_fetch(
    registry: &TopicRegistry,
    request: &mut OffsetFetchRequest,
) -> Vec<(GroupId, UnknownIds<OffsetFetchRequestTopics>)> {
    request
        .groups
        .iter_mut()
        .map(|group| {
            let unknown = match &mut group.topics {
                Some(topics) => name_topics(registry, topics, |t| (&mut t.name, t.topic_id)),
                None => UnknownIds::default(),
            };
            (group.group_id.clone(), unknown)
        })
        .collect()
}

/// Puts the topic ids into an OffsetFetch v10 response and answers the
/// unknown ids. A topic of a whole-group fetch that no longer exists has
/// no id to be named by, and is left out.
pub fn id_fetch_response(
    registry: &TopicRegistry,
    response: &mut OffsetFetchResponse,
    unknown: Vec<(GroupId, UnknownIds<OffsetFetchRequestTopics>)>,
) {
    let code = ResponseError::UnknownTopicId.code();
    for group in &mut response.groups {
        for topic in &mut group.topics {
            if topic.topic_id.is_nil() {
                topic.topic_id = id_of(registry, &topic.name);
            }
        }
        group.topics.retain(|t| !t.topic_id.is_nil());
    }
    for (group_id, unknown) in unknown {
        let Some(group) = response.groups.iter_mut().find(|g| g.group_id == group_id) else {
            continue;
        };
        group.topics.extend(unknown.0.into_iter().map(|t| {
            OffsetFetchResponseTopics::default()
                .with_topic_id(t.topic_id)
                .with_partitions(
                    t.partition_indexes
                        .iter()
                        .map(|p| {
                            OffsetFetchResponsePartitions::default()
                                .with_partition_index(*p)
                                .with_committed_offset(-1)
                                .with_committed_leader_epoch(-1)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        }));
    }
}

/// Names the topics of a TxnOffsetCommit v6 by their ids, taking out those
/// whose id is unknown.
pub fn name_txn_commit(
    registry: &TopicRegistry,
    request: &mut TxnOffsetCommitRequest,
) -> UnknownIds<TxnOffsetCommitRequestTopic> {
    name_topics(registry, &mut request.topics, |t| {
        let id = topic_id(&t.unknown_tagged_fields).unwrap_or_default();
        (&mut t.name, id)
    })
}

/// Puts the topic ids into a TxnOffsetCommit v6 response and answers the
/// unknown ids.
pub fn id_txn_commit_response(
    registry: &TopicRegistry,
    response: &mut TxnOffsetCommitResponse,
    unknown: UnknownIds<TxnOffsetCommitRequestTopic>,
) {
    for topic in &mut response.topics {
        if topic_id(&topic.unknown_tagged_fields).is_none() {
            set_topic_id(
                &mut topic.unknown_tagged_fields,
                id_of(registry, &topic.name),
            );
        }
    }
    let code = ResponseError::UnknownTopicId.code();
    response
        .topics
        .extend(unknown.0.iter().map(|t| answer_txn_commit_topic(t, code)));
}

/// The answer to every partition of a transactional commit's `topic`:
/// `code` (the topic's id, if it came by id, goes with it).
#[must_use]
pub fn answer_txn_commit_topic(
    topic: &TxnOffsetCommitRequestTopic,
    code: i16,
) -> TxnOffsetCommitResponseTopic {
    let mut answer = TxnOffsetCommitResponseTopic::default();
    answer.name = topic.name.clone();
    if let Some(id) = topic_id(&topic.unknown_tagged_fields) {
        set_topic_id(&mut answer.unknown_tagged_fields, id);
    }
    answer.partitions = topic
        .partitions
        .iter()
        .map(|p| {
            TxnOffsetCommitResponsePartition::default()
                .with_partition_index(p.partition_index)
                .with_error_code(code)
        })
        .collect();
    answer
}
