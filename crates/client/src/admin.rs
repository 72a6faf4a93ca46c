//! Admin calls: create and delete topics, add partitions, list offsets.
//!
//! Results are per topic or partition, like Kafka's admin client, so one bad
//! topic in a batch does not hide the others' outcomes.

use {
    crate::{Client, ClientError, records::IsolationLevel},
    kafka_protocol::{
        messages::{
            CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, ListOffsetsRequest,
            TopicName,
            create_partitions_request::CreatePartitionsTopic,
            create_topics_request::{CreatableTopic, CreatableTopicConfig},
            delete_topics_request::DeleteTopicState,
            list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic},
        },
        protocol::StrBytes,
    },
    krabka_ids::{LeaderEpoch, TopicId},
    std::{collections::BTreeMap, time::Duration},
};

/// A topic to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    /// Topic name.
    pub name: String,
    /// Partition count; -1 for the broker's `num.partitions`.
    pub partitions: i32,
    /// Replication factor; -1 for the broker's `default.replication.factor`.
    pub replication_factor: i16,
    /// Topic configs (`cleanup.policy`, `retention.ms`, ...).
    pub configs: Vec<(String, String)>,
}

impl NewTopic {
    /// A topic with `partitions` partitions, the broker's default replication and no configs.
    #[must_use]
    pub fn new(name: impl Into<String>, partitions: i32) -> Self {
        Self {
            name: name.into(),
            partitions,
            replication_factor: -1,
            configs: Vec::new(),
        }
    }

    /// Adds a topic config.
    #[must_use]
    pub fn config(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.configs.push((name.into(), value.into()));
        self
    }

    /// Sets the replication factor.
    #[must_use]
    pub fn replication_factor(mut self, factor: i16) -> Self {
        self.replication_factor = factor;
        self
    }
}

/// Which offset [`Client::list_offsets`] asks for; the negative values are
/// Kafka's special timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log end offset (or last stable offset under read_committed): -1.
    Latest,
    /// The log start offset: -2.
    Earliest,
    /// The offset of the record with the largest timestamp: -3.
    MaxTimestamp,
    /// The local log start offset of a tiered topic: -4.
    EarliestLocal,
    /// The highest offset copied to the remote tier: -5.
    LatestTiered,
    /// The earliest offset whose timestamp is at least this many ms since the epoch.
    Timestamp(i64),
}

impl OffsetSpec {
    /// The timestamp field of a ListOffsets request.
    #[must_use]
    pub fn timestamp(self) -> i64 {
        match self {
            Self::Latest => -1,
            Self::Earliest => -2,
            Self::MaxTimestamp => -3,
            Self::EarliestLocal => -4,
            Self::LatestTiered => -5,
            Self::Timestamp(t) => t,
        }
    }

    /// The lowest ListOffsets version that carries this spec.
    fn min_version(self) -> i16 {
        match self {
            Self::MaxTimestamp => 7,
            Self::EarliestLocal => 8,
            Self::LatestTiered => 9,
            _ => 1,
        }
    }
}

/// One partition's answer to ListOffsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListedOffset {
    /// Partition index.
    pub partition: i32,
    /// The offset (-1 when there is none, e.g. no record at or after the timestamp).
    pub offset: i64,
    /// The timestamp of that record (-1 when not applicable).
    pub timestamp: i64,
    /// The leader epoch of that record.
    pub leader_epoch: LeaderEpoch,
}

impl Client {
    /// Creates topics; one result per requested topic, in request order.
    ///
    /// # Errors
    ///
    /// Returns connection and protocol errors for the whole request; a
    /// per-topic failure (e.g. `TOPIC_ALREADY_EXISTS`, 36) is in that topic's result.
    pub async fn create_topics(
        &self,
        topics: &[NewTopic],
        timeout: Duration,
    ) -> Result<Vec<(String, Result<Option<TopicId>, ClientError>)>, ClientError> {
        let mut request = CreateTopicsRequest::default();
        request.timeout_ms = duration_ms(timeout);
        request.topics = topics
            .iter()
            .map(|t| {
                let mut topic = CreatableTopic::default();
                topic.name = topic_name(&t.name);
                topic.num_partitions = t.partitions;
                topic.replication_factor = t.replication_factor;
                topic.configs = t
                    .configs
                    .iter()
                    .map(|(k, v)| {
                        let mut config = CreatableTopicConfig::default();
                        config.name = StrBytes::from_string(k.clone());
                        config.value = Some(StrBytes::from_string(v.clone()));
                        config
                    })
                    .collect();
                topic
            })
            .collect();
        let response = self.controller_connection().await?.send(&request).await?;
        let mut by_name: BTreeMap<String, Result<Option<TopicId>, ClientError>> = response
            .topics
            .iter()
            .map(|r| {
                let name = r.name.0.to_string();
                let result = ClientError::check(r.error_code, r.error_message.as_deref(), || {
                    format!("CreateTopics {name}")
                })
                .map(|()| (!r.topic_id.is_nil()).then_some(r.topic_id));
                (name, result)
            })
            .collect();
        let names: Vec<&str> = topics.iter().map(|t| t.name.as_str()).collect();
        // Make the new topics visible to later calls of this client.
        if by_name.values().any(Result::is_ok) {
            let _ = self.refresh_metadata(&names).await;
        }
        Ok(topics
            .iter()
            .map(|t| {
                let result = by_name.remove(&t.name).unwrap_or_else(|| {
                    Err(ClientError::Protocol(format!(
                        "CreateTopics answered nothing for {}",
                        t.name
                    )))
                });
                (t.name.clone(), result)
            })
            .collect())
    }

    /// Creates one topic and returns its id (`None` when the broker's
    /// CreateTopics version carries none).
    ///
    /// # Errors
    ///
    /// As [`Client::create_topics`], with the topic's own error.
    pub async fn create_topic(
        &self,
        topic: &NewTopic,
        timeout: Duration,
    ) -> Result<Option<TopicId>, ClientError> {
        self.create_topics(std::slice::from_ref(topic), timeout)
            .await?
            .pop()
            .map_or_else(
                || {
                    Err(ClientError::Protocol(
                        "CreateTopics answered nothing".into(),
                    ))
                },
                |(_, r)| r,
            )
    }

    /// Deletes topics by name; one result per topic, in request order.
    ///
    /// # Errors
    ///
    /// Connection and protocol errors for the whole request; per-topic
    /// errors (`UNKNOWN_TOPIC_OR_PARTITION`, ...) in the results.
    pub async fn delete_topics(
        &self,
        names: &[&str],
        timeout: Duration,
    ) -> Result<Vec<(String, Result<(), ClientError>)>, ClientError> {
        let connection = self.controller_connection().await?;
        let version = connection.version(kafka_protocol::messages::ApiKey::DeleteTopics)?;
        let mut request = DeleteTopicsRequest::default();
        request.timeout_ms = duration_ms(timeout);
        if version >= 6 {
            request.topics = names
                .iter()
                .map(|n| {
                    let mut state = DeleteTopicState::default();
                    state.name = Some(topic_name(n));
                    state
                })
                .collect();
        } else {
            request.topic_names = names.iter().map(|n| topic_name(n)).collect();
        }
        let response = connection.send_version(&request, version).await?;
        let mut by_name: BTreeMap<String, Result<(), ClientError>> = response
            .responses
            .iter()
            .map(|r| {
                let name = r.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
                let result = ClientError::check(r.error_code, r.error_message.as_deref(), || {
                    format!("DeleteTopics {name}")
                });
                (name, result)
            })
            .collect();
        if let Ok(mut cache) = self.inner_metadata_write() {
            for name in names {
                cache.topics.remove(*name);
            }
        }
        Ok(names
            .iter()
            .map(|n| {
                let result = by_name.remove(*n).unwrap_or_else(|| {
                    Err(ClientError::Protocol(format!(
                        "DeleteTopics answered nothing for {n}"
                    )))
                });
                ((*n).to_owned(), result)
            })
            .collect())
    }

    /// Raises topics' partition counts to the totals given (CreatePartitions);
    /// one result per topic, in request order. With `validate_only` the
    /// broker only checks the request.
    ///
    /// # Errors
    ///
    /// Connection and protocol errors for the whole request; per-topic
    /// errors (`INVALID_PARTITIONS`, 37, for a count not above the current
    /// one; `UNKNOWN_TOPIC_OR_PARTITION`, 3) in the results.
    pub async fn create_partitions(
        &self,
        totals: &[(&str, i32)],
        timeout: Duration,
        validate_only: bool,
    ) -> Result<Vec<(String, Result<(), ClientError>)>, ClientError> {
        let mut request = CreatePartitionsRequest::default();
        request.timeout_ms = duration_ms(timeout);
        request.validate_only = validate_only;
        request.topics = totals
            .iter()
            .map(|(name, count)| {
                let mut t = CreatePartitionsTopic::default();
                t.name = topic_name(name);
                t.count = *count;
                // Null: the broker places the new partitions.
                t.assignments = None;
                t
            })
            .collect();
        let response = self.controller_connection().await?.send(&request).await?;
        let mut by_name: BTreeMap<String, Result<(), ClientError>> = response
            .results
            .iter()
            .map(|r| {
                let name = r.name.0.to_string();
                let result = ClientError::check(r.error_code, r.error_message.as_deref(), || {
                    format!("CreatePartitions {name}")
                });
                (name, result)
            })
            .collect();
        let names: Vec<&str> = totals.iter().map(|(n, _)| *n).collect();
        if !validate_only && by_name.values().any(Result::is_ok) {
            let _ = self.refresh_metadata(&names).await;
        }
        Ok(names
            .iter()
            .map(|n| {
                let result = by_name.remove(*n).unwrap_or_else(|| {
                    Err(ClientError::Protocol(format!(
                        "CreatePartitions answered nothing for {n}"
                    )))
                });
                ((*n).to_owned(), result)
            })
            .collect())
    }

    /// Lists offsets of partitions of one topic, asking each partition's leader.
    ///
    /// # Errors
    ///
    /// The first error met: an unknown topic or partition, the broker's error
    /// code for a partition, connection and protocol errors, or
    /// [`ClientError::UnsupportedApi`] when the broker's ListOffsets is too old
    /// for a special timestamp.
    pub async fn list_offsets(
        &self,
        topic: &str,
        partitions: &[(i32, OffsetSpec)],
        isolation: IsolationLevel,
    ) -> Result<Vec<ListedOffset>, ClientError> {
        // Group by leader so each broker gets one request.
        let mut by_leader: BTreeMap<krabka_ids::BrokerId, Vec<(i32, OffsetSpec)>> = BTreeMap::new();
        for &(partition, spec) in partitions {
            let leader = self.leader(topic, partition).await?;
            by_leader
                .entry(leader.id)
                .or_default()
                .push((partition, spec));
        }
        let mut out = Vec::with_capacity(partitions.len());
        for (leader, group) in by_leader {
            let connection = self.broker_connection(leader).await?;
            let version = connection.version(kafka_protocol::messages::ApiKey::ListOffsets)?;
            if let Some(needed) = group
                .iter()
                .map(|(_, s)| s.min_version())
                .max()
                .filter(|&v| v > version)
            {
                return Err(ClientError::UnsupportedApi {
                    api: format!("ListOffsets v{needed}"),
                    client_min: needed,
                    client_max: version,
                });
            }
            let mut request = ListOffsetsRequest::default();
            request.replica_id = (-1).into();
            request.isolation_level = isolation.code();
            request.timeout_ms = duration_ms(self.config().connection.request_timeout);
            let mut t = ListOffsetsTopic::default();
            t.name = topic_name(topic);
            t.partitions = group
                .iter()
                .map(|&(partition, spec)| {
                    let mut p = ListOffsetsPartition::default();
                    p.partition_index = partition;
                    p.current_leader_epoch = -1;
                    p.timestamp = spec.timestamp();
                    p
                })
                .collect();
            request.topics = vec![t];
            let response = connection.send_version(&request, version).await?;
            for t in &response.topics {
                for p in &t.partitions {
                    ClientError::check(p.error_code, None, || {
                        format!("ListOffsets {topic}-{}", p.partition_index)
                    })?;
                    out.push(ListedOffset {
                        partition: p.partition_index,
                        offset: p.offset,
                        timestamp: p.timestamp,
                        leader_epoch: LeaderEpoch(p.leader_epoch),
                    });
                }
            }
        }
        out.sort_by_key(|o| o.partition);
        Ok(out)
    }

    /// Lists one partition's offset.
    ///
    /// # Errors
    ///
    /// As [`Client::list_offsets`].
    pub async fn list_offset(
        &self,
        topic: &str,
        partition: i32,
        spec: OffsetSpec,
        isolation: IsolationLevel,
    ) -> Result<ListedOffset, ClientError> {
        self.list_offsets(topic, &[(partition, spec)], isolation)
            .await?
            .into_iter()
            .find(|o| o.partition == partition)
            .ok_or_else(|| {
                ClientError::Protocol(format!(
                    "ListOffsets answered nothing for {topic}-{partition}"
                ))
            })
    }
}

pub(crate) fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

pub(crate) fn duration_ms(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}
