//! Consumer group admin calls: ListGroups, DescribeGroups (and
//! ConsumerGroupDescribe for KIP-848 groups), OffsetFetch, OffsetCommit as
//! an administrator, OffsetDelete and DeleteGroups.
//!
//! Group requests go to the group's coordinator, found with FindCoordinator
//! and cached; `NOT_COORDINATOR`, `COORDINATOR_NOT_AVAILABLE`,
//! `COORDINATOR_LOAD_IN_PROGRESS` and broken connections make the call look
//! again and retry, within the connection's request timeout, as Kafka's
//! admin client does. ListGroups asks every broker (each lists the groups
//! it coordinates).

use {
    crate::{Client, ClientError, CoordinatorType, admin::topic_name, metadata::BrokerInfo},
    bytes::{Buf, BufMut, Bytes, BytesMut},
    kafka_protocol::{
        messages::{
            ApiKey, ConsumerGroupDescribeRequest, ConsumerProtocolAssignment,
            ConsumerProtocolSubscription, DeleteGroupsRequest, DescribeGroupsRequest, GroupId,
            ListGroupsRequest, OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest,
            offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic},
            offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic},
            offset_fetch_request::{
                OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
            },
        },
        protocol::{Decodable, Encodable, Request, StrBytes},
    },
    std::{
        collections::BTreeMap,
        time::{Duration, Instant},
    },
};

/// Error codes meaning "the coordinator moved or is loading: look again".
const COORDINATOR_RETRY: [i16; 3] = [14, 15, 16];

/// One group as ListGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    /// The group id.
    pub group_id: String,
    /// The protocol type (`consumer` for consumer groups, "" for offsets-only groups).
    pub protocol_type: String,
    /// The state (`Stable`, `Empty`, ...), when the broker sends it (v4+).
    pub state: Option<String>,
    /// `classic` or `consumer`, when the broker sends it (v5+).
    pub group_type: Option<String>,
    /// The coordinator that listed it.
    pub coordinator: krabka_ids::BrokerId,
}

/// One member of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    /// The member id.
    pub member_id: String,
    /// The static member id (`group.instance.id`), if any.
    pub group_instance_id: Option<String>,
    /// The member's `client.id`.
    pub client_id: String,
    /// The member's host as the broker saw it.
    pub client_host: String,
    /// The partitions assigned to it (decoded for `consumer` groups).
    pub assignment: Vec<(String, i32)>,
}

/// A group as DescribeGroups (or ConsumerGroupDescribe) reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// The group id.
    pub group_id: String,
    /// The state (`Stable`, `Empty`, `Dead`, ...).
    pub state: String,
    /// The protocol type (`consumer` for classic consumer groups).
    pub protocol_type: String,
    /// The chosen assignor (`range`, ...), or the server assignor of a KIP-848 group.
    pub protocol: String,
    /// `classic` or `consumer` (KIP-848).
    pub group_type: String,
    /// The members.
    pub members: Vec<MemberDescription>,
    /// The coordinator.
    pub coordinator: BrokerInfo,
}

/// A committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The offset (-1 when nothing is committed).
    pub offset: i64,
    /// The leader epoch of the committed record, -1 when unknown.
    pub leader_epoch: i32,
    /// The commit's metadata string.
    pub metadata: Option<String>,
}

/// Encodes a `consumer` protocol subscription (version prefix + body).
///
/// # Errors
///
/// [`ClientError::Protocol`] when the message does not encode.
pub fn encode_subscription(topics: &[String]) -> Result<Bytes, ClientError> {
    let mut sub = ConsumerProtocolSubscription::default();
    sub.topics = topics
        .iter()
        .map(|t| StrBytes::from_string(t.clone()))
        .collect();
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    sub.encode(&mut buf, 0).map_err(ClientError::protocol)?;
    Ok(buf.freeze())
}

/// The topics of a `consumer` protocol subscription.
///
/// # Errors
///
/// [`ClientError::Protocol`] when the bytes do not decode.
pub fn decode_subscription(bytes: &Bytes) -> Result<Vec<String>, ClientError> {
    let mut buf = bytes.clone();
    if buf.remaining() < 2 {
        return Err(ClientError::Protocol("empty consumer subscription".into()));
    }
    let version = buf.get_i16().clamp(0, 3);
    let sub =
        ConsumerProtocolSubscription::decode(&mut buf, version).map_err(ClientError::protocol)?;
    Ok(sub.topics.iter().map(ToString::to_string).collect())
}

/// Encodes a `consumer` protocol assignment (version prefix + body).
///
/// # Errors
///
/// [`ClientError::Protocol`] when the message does not encode.
pub fn encode_assignment(partitions: &[(String, i32)]) -> Result<Bytes, ClientError> {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (t, p) in partitions {
        by_topic.entry(t).or_default().push(*p);
    }
    let mut assignment = ConsumerProtocolAssignment::default();
    assignment.assigned_partitions = by_topic
        .into_iter()
        .map(|(t, ps)| {
            let mut tp =
                kafka_protocol::messages::consumer_protocol_assignment::TopicPartition::default();
            tp.topic = topic_name(t);
            tp.partitions = ps;
            tp
        })
        .collect();
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    assignment
        .encode(&mut buf, 0)
        .map_err(ClientError::protocol)?;
    Ok(buf.freeze())
}

/// The partitions of a `consumer` protocol assignment; empty bytes are an
/// empty assignment.
///
/// # Errors
///
/// [`ClientError::Protocol`] when the bytes do not decode.
pub fn decode_assignment(bytes: &Bytes) -> Result<Vec<(String, i32)>, ClientError> {
    let mut buf = bytes.clone();
    if buf.remaining() < 2 {
        return Ok(Vec::new());
    }
    let version = buf.get_i16().clamp(0, 3);
    let a = ConsumerProtocolAssignment::decode(&mut buf, version).map_err(ClientError::protocol)?;
    let mut out: Vec<(String, i32)> = a
        .assigned_partitions
        .iter()
        .flat_map(|tp| tp.partitions.iter().map(|p| (tp.topic.0.to_string(), *p)))
        .collect();
    out.sort();
    Ok(out)
}

impl Client {
    /// Sends `request` to `group`'s coordinator, looking the coordinator up
    /// again and retrying while it moves or loads (bounded by the
    /// connection's request timeout).
    pub(crate) async fn send_to_group<R: Request>(
        &self,
        group: &str,
        request: &R,
        error_code: impl Fn(&R::Response) -> i16,
    ) -> Result<(R::Response, BrokerInfo), ClientError> {
        let kind = CoordinatorType::Group;
        let deadline = Instant::now() + self.config().connection.request_timeout;
        let mut backoff = Duration::from_millis(50);
        loop {
            let attempt = async {
                let coordinator = self.coordinator(group, kind).await?;
                let response = self
                    .connection(&coordinator.addr())
                    .await?
                    .send(request)
                    .await?;
                Ok::<_, ClientError>((response, coordinator))
            }
            .await;
            let retry = match &attempt {
                Ok((response, _)) => COORDINATOR_RETRY.contains(&error_code(response)),
                Err(e) => {
                    matches!(e, ClientError::Connection { .. })
                        || e.code().is_some_and(|c| COORDINATOR_RETRY.contains(&c))
                }
            };
            if !retry || Instant::now() + backoff >= deadline {
                return attempt;
            }
            self.forget_group_coordinator(group);
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(1));
        }
    }

    pub(crate) fn forget_group_coordinator(&self, group: &str) {
        self.forget_coordinator(group, 0);
    }

    /// Every group of the cluster (each broker lists those it coordinates),
    /// sorted by id; `states` filters by state name (v4+ brokers).
    ///
    /// # Errors
    ///
    /// A broker's error code, connection and protocol errors.
    pub async fn list_groups(&self, states: &[&str]) -> Result<Vec<ListedGroup>, ClientError> {
        let meta = self.refresh_metadata(&[]).await?;
        let mut brokers: Vec<BrokerInfo> = meta.brokers.into_values().collect();
        brokers.sort_by_key(|b| b.id);
        let mut request = ListGroupsRequest::default();
        request.states_filter = states
            .iter()
            .map(|s| StrBytes::from_string((*s).to_owned()))
            .collect();
        let mut out = Vec::new();
        for broker in brokers {
            let response = self.send_to(broker.id, &request).await?;
            ClientError::check(response.error_code, None, || {
                format!("ListGroups on broker {}", broker.id)
            })?;
            out.extend(response.groups.iter().map(|g| ListedGroup {
                group_id: g.group_id.0.to_string(),
                protocol_type: g.protocol_type.to_string(),
                state: Some(g.group_state.to_string()).filter(|s| !s.is_empty()),
                group_type: Some(g.group_type.to_string()).filter(|s| !s.is_empty()),
                coordinator: broker.id,
            }));
        }
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        Ok(out)
    }

    /// Describes one group: state, protocol and members with their
    /// assignments. A KIP-848 (`consumer` type) group is described with
    /// ConsumerGroupDescribe.
    ///
    /// # Errors
    ///
    /// `GROUP_ID_NOT_FOUND` (69) when the broker says so, other Kafka errors,
    /// connection and protocol errors. A group that does not exist is
    /// described by Kafka as `Dead` with no members, not as an error.
    pub async fn describe_group(&self, group: &str) -> Result<GroupDescription, ClientError> {
        let mut request = DescribeGroupsRequest::default();
        request.groups = vec![GroupId(StrBytes::from_string(group.to_owned()))];
        let (response, coordinator) = self
            .send_to_group(group, &request, |r| {
                r.groups.first().map_or(0, |g| g.error_code)
            })
            .await?;
        let described = response.groups.into_iter().next().ok_or_else(|| {
            ClientError::Protocol(format!("DescribeGroups answered nothing for {group}"))
        })?;
        let consumer_group = described.error_code == 69
            || described.protocol_type.as_str() == "consumer" && described.group_state.is_empty();
        if consumer_group
            && self
                .connection(&coordinator.addr())
                .await?
                .version(ApiKey::ConsumerGroupDescribe)
                .is_ok()
        {
            if let Some(d) = self.describe_consumer_group(group).await? {
                return Ok(d);
            }
        }
        ClientError::check(
            described.error_code,
            described.error_message.as_deref(),
            || format!("DescribeGroups {group}"),
        )?;
        let is_consumer = described.protocol_type.as_str() == "consumer";
        let members = described
            .members
            .iter()
            .map(|m| MemberDescription {
                member_id: m.member_id.to_string(),
                group_instance_id: m.group_instance_id.as_ref().map(ToString::to_string),
                client_id: m.client_id.to_string(),
                client_host: m.client_host.to_string(),
                assignment: if is_consumer {
                    decode_assignment(&m.member_assignment).unwrap_or_default()
                } else {
                    Vec::new()
                },
            })
            .collect();
        Ok(GroupDescription {
            group_id: described.group_id.0.to_string(),
            state: described.group_state.to_string(),
            protocol_type: described.protocol_type.to_string(),
            protocol: described.protocol_data.to_string(),
            group_type: "classic".to_owned(),
            members,
            coordinator,
        })
    }

    /// ConsumerGroupDescribe of a KIP-848 group; `None` when the group is
    /// not a consumer-protocol group after all.
    async fn describe_consumer_group(
        &self,
        group: &str,
    ) -> Result<Option<GroupDescription>, ClientError> {
        let mut request = ConsumerGroupDescribeRequest::default();
        request.group_ids = vec![GroupId(StrBytes::from_string(group.to_owned()))];
        let (response, coordinator) = self
            .send_to_group(group, &request, |r| {
                r.groups.first().map_or(0, |g| g.error_code)
            })
            .await?;
        let Some(described) = response.groups.into_iter().next() else {
            return Ok(None);
        };
        // GROUP_ID_NOT_FOUND (69): a classic group or none at all.
        if described.error_code == 69 {
            return Ok(None);
        }
        ClientError::check(
            described.error_code,
            described.error_message.as_deref(),
            || format!("ConsumerGroupDescribe {group}"),
        )?;
        let members = described
            .members
            .iter()
            .map(|m| {
                let mut assignment: Vec<(String, i32)> = m
                    .assignment
                    .topic_partitions
                    .iter()
                    .flat_map(|tp| {
                        tp.partitions
                            .iter()
                            .map(|p| (tp.topic_name.0.to_string(), *p))
                    })
                    .collect();
                assignment.sort();
                MemberDescription {
                    member_id: m.member_id.to_string(),
                    group_instance_id: m.instance_id.as_ref().map(ToString::to_string),
                    client_id: m.client_id.to_string(),
                    client_host: m.client_host.to_string(),
                    assignment,
                }
            })
            .collect();
        Ok(Some(GroupDescription {
            group_id: described.group_id.0.to_string(),
            state: described.group_state.to_string(),
            protocol_type: "consumer".to_owned(),
            protocol: described.assignor_name.to_string(),
            group_type: "consumer".to_owned(),
            members,
            coordinator,
        }))
    }

    /// The group's committed offsets: of `partitions` when given, else of
    /// every partition it has committed for. Sorted by topic and partition.
    ///
    /// # Errors
    ///
    /// The group's Kafka error, connection and protocol errors.
    pub async fn fetch_committed(
        &self,
        group: &str,
        partitions: Option<&[(String, i32)]>,
    ) -> Result<Vec<CommittedOffset>, ClientError> {
        let coordinator = self.coordinator(group, CoordinatorType::Group).await?;
        let version = self
            .connection(&coordinator.addr())
            .await?
            .version(ApiKey::OffsetFetch)?;
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (t, p) in partitions.unwrap_or_default() {
            by_topic.entry(t).or_default().push(*p);
        }
        let mut request = OffsetFetchRequest::default();
        request.require_stable = version >= 7;
        if version >= 8 {
            let mut g = OffsetFetchRequestGroup::default();
            g.group_id = GroupId(StrBytes::from_string(group.to_owned()));
            g.member_epoch = -1;
            g.topics = partitions.map(|_| {
                by_topic
                    .iter()
                    .map(|(t, ps)| {
                        let mut topic = OffsetFetchRequestTopics::default();
                        topic.name = topic_name(t);
                        topic.partition_indexes = ps.clone();
                        topic
                    })
                    .collect()
            });
            request.groups = vec![g];
        } else {
            request.group_id = GroupId(StrBytes::from_string(group.to_owned()));
            request.topics = partitions.map(|_| {
                by_topic
                    .iter()
                    .map(|(t, ps)| {
                        let mut topic = OffsetFetchRequestTopic::default();
                        topic.name = topic_name(t);
                        topic.partition_indexes = ps.clone();
                        topic
                    })
                    .collect()
            });
        }
        let (response, _) = self
            .send_to_group(group, &request, |r| {
                r.groups.first().map_or(r.error_code, |g| g.error_code)
            })
            .await?;
        let context = || format!("OffsetFetch {group}");
        let mut out = Vec::new();
        if version >= 8 {
            let g = response.groups.into_iter().next().ok_or_else(|| {
                ClientError::Protocol(format!("OffsetFetch answered nothing for {group}"))
            })?;
            ClientError::check(g.error_code, None, context)?;
            for t in g.topics {
                for p in t.partitions {
                    ClientError::check(p.error_code, None, context)?;
                    out.push(CommittedOffset {
                        topic: t.name.0.to_string(),
                        partition: p.partition_index,
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata: p.metadata.map(|m| m.to_string()),
                    });
                }
            }
        } else {
            ClientError::check(response.error_code, None, context)?;
            for t in response.topics {
                for p in t.partitions {
                    ClientError::check(p.error_code, None, context)?;
                    out.push(CommittedOffset {
                        topic: t.name.0.to_string(),
                        partition: p.partition_index,
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata: p.metadata.map(|m| m.to_string()),
                    });
                }
            }
        }
        out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        Ok(out)
    }

    /// Commits offsets for a group. `member` is `(generation, member id)`
    /// of a member of the group; `None` commits as an administrator
    /// (generation -1), which Kafka allows only while the group is empty.
    ///
    /// # Errors
    ///
    /// The first partition's Kafka error (`UNKNOWN_MEMBER_ID`, 25, when the
    /// group has active members; `REBALANCE_IN_PROGRESS`, 27; ...),
    /// connection and protocol errors.
    pub async fn commit_offsets(
        &self,
        group: &str,
        member: Option<(i32, &str)>,
        offsets: &[(String, i32, i64)],
    ) -> Result<(), ClientError> {
        let mut by_topic: BTreeMap<&str, Vec<(i32, i64)>> = BTreeMap::new();
        for (t, p, o) in offsets {
            by_topic.entry(t).or_default().push((*p, *o));
        }
        let mut request = OffsetCommitRequest::default();
        request.group_id = GroupId(StrBytes::from_string(group.to_owned()));
        let (generation, member_id) = member.unwrap_or((-1, ""));
        request.generation_id_or_member_epoch = generation;
        request.member_id = StrBytes::from_string(member_id.to_owned());
        request.retention_time_ms = -1;
        request.topics = by_topic
            .into_iter()
            .map(|(t, ps)| {
                let mut topic = OffsetCommitRequestTopic::default();
                topic.name = topic_name(t);
                topic.partitions = ps
                    .into_iter()
                    .map(|(p, o)| {
                        let mut part = OffsetCommitRequestPartition::default();
                        part.partition_index = p;
                        part.committed_offset = o;
                        part.committed_leader_epoch = -1;
                        part
                    })
                    .collect();
                topic
            })
            .collect();
        let (response, _) = self
            .send_to_group(group, &request, |r| {
                r.topics
                    .first()
                    .and_then(|t| t.partitions.first())
                    .map_or(0, |p| p.error_code)
            })
            .await?;
        for t in &response.topics {
            for p in &t.partitions {
                ClientError::check(p.error_code, None, || {
                    format!("OffsetCommit {group} {}-{}", t.name.0, p.partition_index)
                })?;
            }
        }
        Ok(())
    }

    /// Deletes a group's committed offsets of `partitions` (OffsetDelete);
    /// one result per partition.
    ///
    /// # Errors
    ///
    /// The group-level Kafka error (`GROUP_SUBSCRIBED_TO_TOPIC`, 86, is per
    /// partition), connection and protocol errors.
    pub async fn delete_offsets(
        &self,
        group: &str,
        partitions: &[(String, i32)],
    ) -> Result<Vec<((String, i32), Result<(), ClientError>)>, ClientError> {
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (t, p) in partitions {
            by_topic.entry(t).or_default().push(*p);
        }
        let mut request = OffsetDeleteRequest::default();
        request.group_id = GroupId(StrBytes::from_string(group.to_owned()));
        request.topics = by_topic
            .into_iter()
            .map(|(t, ps)| {
                let mut topic = OffsetDeleteRequestTopic::default();
                topic.name = topic_name(t);
                topic.partitions = ps
                    .into_iter()
                    .map(|p| {
                        let mut part = OffsetDeleteRequestPartition::default();
                        part.partition_index = p;
                        part
                    })
                    .collect();
                topic
            })
            .collect();
        let (response, _) = self
            .send_to_group(group, &request, |r| r.error_code)
            .await?;
        ClientError::check(response.error_code, None, || {
            format!("OffsetDelete {group}")
        })?;
        let mut out = Vec::new();
        for t in &response.topics {
            for p in &t.partitions {
                let key = (t.name.0.to_string(), p.partition_index);
                let result = ClientError::check(p.error_code, None, || {
                    format!("OffsetDelete {group} {}-{}", key.0, key.1)
                });
                out.push((key, result));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Deletes groups; one result per group, in request order.
    ///
    /// # Errors
    ///
    /// Connection and protocol errors; per-group errors
    /// (`GROUP_ID_NOT_FOUND`, 69; `NON_EMPTY_GROUP`, 68) in the results.
    pub async fn delete_groups(
        &self,
        groups: &[&str],
    ) -> Result<Vec<(String, Result<(), ClientError>)>, ClientError> {
        let mut out = Vec::with_capacity(groups.len());
        for group in groups {
            let mut request = DeleteGroupsRequest::default();
            request.groups_names = vec![GroupId(StrBytes::from_string((*group).to_owned()))];
            let (response, _) = self
                .send_to_group(group, &request, |r| {
                    r.results.first().map_or(0, |g| g.error_code)
                })
                .await?;
            let result = response
                .results
                .iter()
                .find(|r| r.group_id.0.as_str() == *group)
                .map_or_else(
                    || {
                        Err(ClientError::Protocol(format!(
                            "DeleteGroups answered nothing for {group}"
                        )))
                    },
                    |r| ClientError::check(r.error_code, None, || format!("DeleteGroups {group}")),
                );
            out.push(((*group).to_owned(), result));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn consumer_protocol_round_trips() {
        let sub = encode_subscription(&["a".into(), "b".into()]).unwrap();
        check!(decode_subscription(&sub).unwrap() == vec!["a".to_owned(), "b".to_owned()]);
        let parts = vec![
            ("b".to_owned(), 1),
            ("a".to_owned(), 0),
            ("b".to_owned(), 0),
        ];
        let bytes = encode_assignment(&parts).unwrap();
        check!(
            decode_assignment(&bytes).unwrap()
                == vec![
                    ("a".to_owned(), 0),
                    ("b".to_owned(), 0),
                    ("b".to_owned(), 1)
                ]
        );
        check!(decode_assignment(&Bytes::new()).unwrap().is_empty());
        check!(decode_subscription(&Bytes::from_static(&[0])).is_err());
    }
}
