//! [`GroupMember`]: membership of a classic consumer group (JoinGroup,
//! SyncGroup, Heartbeat, LeaveGroup) with the `range` assignor, so a reader
//! can share a group's partitions with Java, librdkafka or Python
//! consumers and commit where they will resume.
//!
//! The member only tracks membership: [`GroupMember::join`] returns the
//! partitions assigned to it; a background task heartbeats and raises
//! [`GroupMember::needs_rejoin`] when the group rebalances; the reader
//! fetches the partitions itself (so it can pipeline fetches as it likes)
//! and commits through [`GroupMember::commit`] under the current generation.
//!
//! The classic protocol is used rather than KIP-848's because every
//! Kafka-compatible broker speaks it. The leader computes the assignment
//! with Kafka's `RangeAssignor`: per topic, partitions split in contiguous
//! ranges over the members subscribed to it, sorted by member id.

use {
    crate::{
        Client, ClientError, CoordinatorType,
        groups::{decode_assignment, decode_subscription, encode_assignment, encode_subscription},
        metadata::BrokerInfo,
    },
    kafka_protocol::{
        messages::{
            ApiKey, GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest,
            SyncGroupRequest, join_group_request::JoinGroupRequestProtocol,
            leave_group_request::MemberIdentity, sync_group_request::SyncGroupRequestAssignment,
        },
        protocol::StrBytes,
    },
    std::{
        collections::BTreeMap,
        sync::{
            Arc, Mutex,
            atomic::{AtomicBool, Ordering},
        },
        time::{Duration, Instant},
    },
    tokio::task::JoinHandle,
};

/// `MEMBER_ID_REQUIRED`: JoinGroup v4+ hands out the member id first.
const MEMBER_ID_REQUIRED: i16 = 79;
/// `UNKNOWN_MEMBER_ID`.
const UNKNOWN_MEMBER_ID: i16 = 25;
/// `ILLEGAL_GENERATION`.
const ILLEGAL_GENERATION: i16 = 22;
/// `REBALANCE_IN_PROGRESS`.
const REBALANCE_IN_PROGRESS: i16 = 27;
/// `FENCED_INSTANCE_ID`.
const FENCED_INSTANCE_ID: i16 = 82;

/// Settings of a group member, named after Kafka's consumer configs.
#[derive(Debug, Clone)]
pub struct GroupMemberConfig {
    /// `group.id`.
    pub group_id: String,
    /// `session.timeout.ms` (default 45 s).
    pub session_timeout: Duration,
    /// `max.poll.interval.ms`, sent as the rebalance timeout (default 5 min).
    pub rebalance_timeout: Duration,
    /// `heartbeat.interval.ms` (default 3 s).
    pub heartbeat_interval: Duration,
    /// How long [`GroupMember::join`] keeps trying before it gives up.
    pub join_timeout: Duration,
}

impl GroupMemberConfig {
    /// Kafka's defaults for `group_id`.
    #[must_use]
    pub fn new(group_id: impl Into<String>) -> Self {
        Self {
            group_id: group_id.into(),
            session_timeout: Duration::from_secs(45),
            rebalance_timeout: Duration::from_secs(300),
            heartbeat_interval: Duration::from_secs(3),
            join_timeout: Duration::from_secs(60),
        }
    }
}

/// Who this member is in the current generation.
#[derive(Debug, Clone, Default)]
struct Identity {
    member_id: String,
    generation: i32,
    coordinator: Option<BrokerInfo>,
}

/// One member of a classic consumer group.
#[derive(Debug)]
pub struct GroupMember {
    client: Client,
    config: GroupMemberConfig,
    topics: Vec<String>,
    identity: Arc<Mutex<Identity>>,
    rejoin: Arc<AtomicBool>,
    heartbeat: Option<JoinHandle<()>>,
}

impl Drop for GroupMember {
    fn drop(&mut self) {
        if let Some(task) = self.heartbeat.take() {
            task.abort();
        }
    }
}

/// Kafka's `RangeAssignor`: for each topic, the members subscribed to it
/// (sorted by id) get contiguous ranges of its partitions, the first
/// `partitions % members` one more.
#[must_use]
pub fn range_assign(
    subscriptions: &BTreeMap<String, Vec<String>>,
    partitions: &BTreeMap<String, i32>,
) -> BTreeMap<String, Vec<(String, i32)>> {
    let mut out: BTreeMap<String, Vec<(String, i32)>> = subscriptions
        .keys()
        .map(|m| (m.clone(), Vec::new()))
        .collect();
    for (topic, &count) in partitions {
        let members: Vec<&String> = subscriptions
            .iter()
            .filter(|(_, topics)| topics.contains(topic))
            .map(|(m, _)| m)
            .collect();
        let Ok(n) = i32::try_from(members.len()) else {
            continue;
        };
        if n == 0 {
            continue;
        }
        let (per, extra) = (count / n, count % n);
        let mut next = 0;
        for (i, member) in (0..).zip(members) {
            let take = per + i32::from(i < extra);
            if let Some(list) = out.get_mut(member) {
                list.extend((next..next + take).map(|p| (topic.clone(), p)));
            }
            next += take;
        }
    }
    out
}

impl GroupMember {
    /// A member of `config.group_id` subscribing to `topics`; not joined yet.
    #[must_use]
    pub fn new(client: Client, config: GroupMemberConfig, topics: Vec<String>) -> Self {
        Self {
            client,
            config,
            topics,
            identity: Arc::new(Mutex::new(Identity::default())),
            rejoin: Arc::new(AtomicBool::new(true)),
            heartbeat: None,
        }
    }

    /// Whether the group rebalanced (or the membership was lost) since the
    /// last join: call [`GroupMember::join`] again before reading on.
    #[must_use]
    pub fn needs_rejoin(&self) -> bool {
        self.rejoin.load(Ordering::Acquire)
    }

    /// The current `(generation, member id)`.
    #[must_use]
    pub fn generation(&self) -> (i32, String) {
        let id = self.identity();
        (id.generation, id.member_id)
    }

    fn identity(&self) -> Identity {
        self.identity.lock().map(|i| i.clone()).unwrap_or_default()
    }

    fn set_identity(&self, identity: Identity) {
        if let Ok(mut i) = self.identity.lock() {
            *i = identity;
        }
    }

    /// Joins (or rejoins) the group and returns this member's partitions,
    /// sorted. Retries through coordinator moves and concurrent rebalances
    /// until `join_timeout`.
    ///
    /// # Errors
    ///
    /// The last Kafka error (`GROUP_AUTHORIZATION_FAILED`, 30;
    /// `INCONSISTENT_GROUP_PROTOCOL`, 23; ...) or [`ClientError::Timeout`]
    /// when the join does not complete in time.
    pub async fn join(&mut self) -> Result<Vec<(String, i32)>, ClientError> {
        if let Some(task) = self.heartbeat.take() {
            task.abort();
        }
        let deadline = Instant::now() + self.config.join_timeout;
        let mut last_error =
            ClientError::Timeout(format!("joining group {}", self.config.group_id));
        while Instant::now() < deadline {
            match self.join_once().await {
                Ok(partitions) => {
                    self.rejoin.store(false, Ordering::Release);
                    self.start_heartbeat();
                    return Ok(partitions);
                }
                Err(e) => {
                    let retry = e.is_retriable()
                        || matches!(
                            e.code(),
                            Some(
                                MEMBER_ID_REQUIRED
                                    | UNKNOWN_MEMBER_ID
                                    | ILLEGAL_GENERATION
                                    | REBALANCE_IN_PROGRESS
                            )
                        );
                    if !retry {
                        return Err(e);
                    }
                    if e.needs_metadata_refresh() {
                        self.client.forget_group_coordinator(&self.config.group_id);
                    }
                    last_error = e;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        Err(last_error)
    }

    async fn join_once(&mut self) -> Result<Vec<(String, i32)>, ClientError> {
        let group = self.config.group_id.clone();
        let coordinator = self
            .client
            .coordinator(&group, CoordinatorType::Group)
            .await?;
        let connection = self.client.connection(&coordinator.addr()).await?;
        let mut identity = self.identity();
        identity.coordinator = Some(coordinator.clone());

        let mut protocol = JoinGroupRequestProtocol::default();
        protocol.name = StrBytes::from_static_str("range");
        protocol.metadata = encode_subscription(&self.topics)?;
        let mut request = JoinGroupRequest::default();
        request.group_id = GroupId(StrBytes::from_string(group.clone()));
        request.session_timeout_ms = millis(self.config.session_timeout);
        request.rebalance_timeout_ms = millis(self.config.rebalance_timeout);
        request.member_id = StrBytes::from_string(identity.member_id.clone());
        request.protocol_type = StrBytes::from_static_str("consumer");
        request.protocols = vec![protocol];
        let version = connection.version(ApiKey::JoinGroup)?;
        // The coordinator answers a join when the rebalance completes, which
        // may take up to the rebalance timeout.
        let response = connection
            .enqueue(&request, version, Some(self.config.rebalance_timeout))?
            .await?;
        if response.error_code == MEMBER_ID_REQUIRED || !response.member_id.is_empty() {
            identity.member_id = response.member_id.to_string();
        }
        if matches!(response.error_code, UNKNOWN_MEMBER_ID | FENCED_INSTANCE_ID) {
            identity.member_id.clear();
        }
        self.set_identity(identity.clone());
        ClientError::check(response.error_code, None, || format!("JoinGroup {group}"))?;
        identity.generation = response.generation_id;
        self.set_identity(identity.clone());

        let mut sync = SyncGroupRequest::default();
        sync.group_id = GroupId(StrBytes::from_string(group.clone()));
        sync.generation_id = response.generation_id;
        sync.member_id = StrBytes::from_string(identity.member_id.clone());
        sync.protocol_type = Some(StrBytes::from_static_str("consumer"));
        sync.protocol_name = response.protocol_name.clone();
        if response.leader.as_str() == identity.member_id {
            let mut subscriptions = BTreeMap::new();
            for m in &response.members {
                subscriptions.insert(m.member_id.to_string(), decode_subscription(&m.metadata)?);
            }
            let mut topics: Vec<&str> = subscriptions
                .values()
                .flatten()
                .map(String::as_str)
                .collect();
            topics.sort_unstable();
            topics.dedup();
            let meta = self.client.refresh_metadata(&topics).await?;
            let counts: BTreeMap<String, i32> = topics
                .iter()
                .filter_map(|t| {
                    let info = meta.topics.get(*t)?;
                    Some(((*t).to_owned(), i32::try_from(info.partitions.len()).ok()?))
                })
                .collect();
            sync.assignments = range_assign(&subscriptions, &counts)
                .into_iter()
                .map(|(member, partitions)| {
                    let mut a = SyncGroupRequestAssignment::default();
                    a.member_id = StrBytes::from_string(member);
                    a.assignment = encode_assignment(&partitions).unwrap_or_default();
                    a
                })
                .collect();
        }
        let synced = connection
            .enqueue(
                &sync,
                connection.version(ApiKey::SyncGroup)?,
                Some(self.config.rebalance_timeout),
            )?
            .await?;
        ClientError::check(synced.error_code, None, || format!("SyncGroup {group}"))?;
        decode_assignment(&synced.assignment)
    }

    fn start_heartbeat(&mut self) {
        let client = self.client.clone();
        let identity = Arc::clone(&self.identity);
        let rejoin = Arc::clone(&self.rejoin);
        let group = self.config.group_id.clone();
        let every = self.config.heartbeat_interval;
        self.heartbeat = Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Ok(id) = identity.lock().map(|i| i.clone()) else {
                    return;
                };
                let mut request = HeartbeatRequest::default();
                request.group_id = GroupId(StrBytes::from_string(group.clone()));
                request.generation_id = id.generation;
                request.member_id = StrBytes::from_string(id.member_id.clone());
                let Some(coordinator) = id.coordinator else {
                    return;
                };
                let answer = match client.connection(&coordinator.addr()).await {
                    Ok(c) => c.send(&request).await.map(|r| r.error_code),
                    Err(e) => Err(e),
                };
                match answer {
                    Ok(0) => {}
                    Ok(code) => {
                        tracing::debug!(group = %group, code, "heartbeat: rejoin needed");
                        rejoin.store(true, Ordering::Release);
                        if matches!(code, 14..=16) {
                            client.forget_group_coordinator(&group);
                        }
                        return;
                    }
                    Err(e) => {
                        // A broken connection: the next beat reconnects; the
                        // session timeout decides whether membership survived.
                        tracing::debug!(group = %group, error = %e, "heartbeat failed");
                    }
                }
            }
        }));
    }

    /// Commits `offsets` (topic, partition, next offset to read) under the
    /// current generation.
    ///
    /// # Errors
    ///
    /// As [`Client::commit_offsets`]; `REBALANCE_IN_PROGRESS` (27) or
    /// `ILLEGAL_GENERATION` (22) also mark the member for rejoining.
    pub async fn commit(&self, offsets: &[(String, i32, i64)]) -> Result<(), ClientError> {
        if offsets.is_empty() {
            return Ok(());
        }
        let (generation, member_id) = self.generation();
        let result = self
            .client
            .commit_offsets(
                &self.config.group_id,
                Some((generation, &member_id)),
                offsets,
            )
            .await;
        if let Err(e) = &result {
            if matches!(
                e.code(),
                Some(REBALANCE_IN_PROGRESS | ILLEGAL_GENERATION | UNKNOWN_MEMBER_ID)
            ) {
                self.rejoin.store(true, Ordering::Release);
            }
        }
        result
    }

    /// Leaves the group (LeaveGroup), so its partitions move to the other
    /// members at once instead of after the session timeout.
    ///
    /// # Errors
    ///
    /// Connection and protocol errors; Kafka's `UNKNOWN_MEMBER_ID` (the
    /// member already left) is not an error.
    pub async fn leave(&mut self) -> Result<(), ClientError> {
        if let Some(task) = self.heartbeat.take() {
            task.abort();
        }
        let id = self.identity();
        let Some(coordinator) = id.coordinator else {
            return Ok(());
        };
        if id.member_id.is_empty() {
            return Ok(());
        }
        let connection = self.client.connection(&coordinator.addr()).await?;
        let mut request = LeaveGroupRequest::default();
        request.group_id = GroupId(StrBytes::from_string(self.config.group_id.clone()));
        let version = connection.version(ApiKey::LeaveGroup)?;
        if version >= 3 {
            let mut member = MemberIdentity::default();
            member.member_id = StrBytes::from_string(id.member_id.clone());
            request.members = vec![member];
        } else {
            request.member_id = StrBytes::from_string(id.member_id.clone());
        }
        let response = connection.send_version(&request, version).await?;
        self.rejoin.store(true, Ordering::Release);
        match response.error_code {
            0 | UNKNOWN_MEMBER_ID => Ok(()),
            code => ClientError::check(code, None, || {
                format!("LeaveGroup {}", self.config.group_id)
            }),
        }
    }
}

fn millis(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn range_assignment_is_kafkas() {
        let subs: BTreeMap<String, Vec<String>> = [
            ("m-b".to_owned(), vec!["t".to_owned(), "u".to_owned()]),
            ("m-a".to_owned(), vec!["t".to_owned()]),
        ]
        .into();
        let counts: BTreeMap<String, i32> = [("t".to_owned(), 5), ("u".to_owned(), 2)].into();
        let a = range_assign(&subs, &counts);
        let t = |p: &[i32], topic: &str| -> Vec<(String, i32)> {
            p.iter().map(|&p| (topic.to_owned(), p)).collect()
        };
        check!(a["m-a"] == t(&[0, 1, 2], "t"));
        let mut b = t(&[3, 4], "t");
        b.extend(t(&[0, 1], "u"));
        check!(a["m-b"] == b);
    }
}
