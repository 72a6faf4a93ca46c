//! [`BrokerTransport`]: the [`CoordinationTransport`] over a Kafka cluster,
//! built on `krabka-client`.
//!
//! * Per-role state lives in the compacted topic `__coordination_state`,
//!   created when absent; a role's records go to the partition Kafka's default
//!   partitioner picks for the role's name, so each role has one partition
//!   (two roles may share one; readers drop the other role's records).
//! * The leadership epoch is the producer epoch of `transactional.id =
//!   <role>`: [`CoordinationTransport::acquire_epoch`] runs InitProducerId,
//!   which fences every earlier holder, with `transaction.timeout.ms` set to
//!   the lease, so a holder stuck inside a transaction for longer than its
//!   lease is aborted and fenced by the coordinator itself.
//! * Lease writes are transactions of that producer; registrations are plain
//!   acks=all appends (no producer id), because a candidate holds no epoch.
//! * Reads are `read_committed`, up to the last stable offset; a transport
//!   remembers where it stopped and keeps only the records the succession
//!   rules look at ([`succession::retain_decisive`]), so a poll reads just
//!   the new records. The result is what a compacted partition holds, never
//!   less: the latest registration of each member and the latest lease of
//!   each holder.
//! * [`FencedProducer`] hands the application the same transactional producer,
//!   so every write the application makes is fenced by the broker too.

use std::{collections::HashMap, sync::Arc, time::Duration};

use async_trait::async_trait;
use krabka_client::{
    Acks, Client, ClientError, Compression, ConsumerConfig, IsolationLevel, NewTopic,
    PartitionFetch, ProduceOutcome, ProducerRecord, TransactionalProducer,
    partitioner::partition_for_key,
};
use tokio::sync::{Mutex, OnceCell};
use tracing::{debug, warn};

use crate::{
    error::CoordinationError,
    leadership::{Campaign, Clock, FenceReporter, SystemClock},
    record::{
        CoordinationKey, CoordinationRecord, FencingToken, Lease, MemberId, Registration, Role,
        decode_record,
    },
    succession,
    transport::{CoordinationTransport, RoleRecords},
};

/// The topic that holds coordination state.
pub const COORDINATION_TOPIC: &str = "__coordination_state";

/// Kafka's `TOPIC_ALREADY_EXISTS`.
const TOPIC_ALREADY_EXISTS: i16 = 36;
/// Kafka's `TRANSACTIONAL_ID_NOT_FOUND`.
const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;

/// Settings of a [`BrokerTransport`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerTransportConfig {
    /// The state topic (default [`COORDINATION_TOPIC`]).
    pub topic: String,
    /// Partitions of the state topic when this transport creates it (default 50,
    /// like Kafka's `transaction.state.log.num.partitions`).
    pub partitions: i32,
    /// Replication factor when creating it; -1 for the broker's default.
    pub replication_factor: i16,
    /// The lease duration, sent as `transaction.timeout.ms`; should equal
    /// the [`Timing::lease`](crate::succession::Timing::lease) of the coordinator.
    pub lease: Duration,
    /// How long an admin call may take: topic creation, and the wait for the
    /// state topic's partitions to have leaders.
    pub admin_timeout: Duration,
}

impl Default for BrokerTransportConfig {
    fn default() -> Self {
        Self {
            topic: COORDINATION_TOPIC.to_owned(),
            partitions: 50,
            replication_factor: -1,
            lease: crate::succession::Timing::default().lease,
            admin_timeout: Duration::from_secs(30),
        }
    }
}

/// The [`CoordinationTransport`] that talks to a Kafka-compatible cluster.
pub struct BrokerTransport {
    client: Client,
    config: BrokerTransportConfig,
    clock: SystemClock,
    /// The partition count of the state topic, once known.
    partitions: OnceCell<i32>,
    /// Per role: the records read so far (pruned to what the rules use) and
    /// the offset to read next.
    read_cache: Mutex<HashMap<Role, (i64, RoleRecords)>>,
    /// The writer each role's epoch binds, from the latest `acquire_epoch`.
    producers: std::sync::Mutex<HashMap<Role, Arc<Mutex<TransactionalProducer>>>>,
}

impl std::fmt::Debug for BrokerTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerTransport")
            .field("client", &self.client)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl BrokerTransport {
    /// A transport over `client`. Nothing is sent until the first call.
    #[must_use]
    pub fn new(client: Client, config: BrokerTransportConfig) -> Self {
        Self {
            client,
            config,
            clock: SystemClock::new(),
            partitions: OnceCell::new(),
            read_cache: Mutex::new(HashMap::new()),
            producers: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// The client underneath.
    #[must_use]
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The settings.
    #[must_use]
    pub fn config(&self) -> &BrokerTransportConfig {
        &self.config
    }

    /// The partition of the state topic that holds `role`.
    ///
    /// # Errors
    ///
    /// Returns [`CoordinationError::Admin`] when the topic cannot be looked
    /// up or created.
    pub async fn partition_of(&self, role: &Role) -> Result<i32, CoordinationError> {
        let partitions = *self
            .partitions
            .get_or_try_init(|| self.ensure_topic())
            .await?;
        Ok(partition_for_key(role.as_str().as_bytes(), partitions))
    }

    /// A producer for the application, bound to `token`: its writes are
    /// fenced by the broker as soon as a later member takes `role`.
    ///
    /// # Errors
    ///
    /// Returns [`CoordinationError::NotHeld`] when this transport's current
    /// epoch for `role` is not `token`.
    pub fn producer(
        &self,
        role: &Role,
        token: FencingToken,
    ) -> Result<FencedProducer, CoordinationError> {
        let not_held = || CoordinationError::NotHeld {
            role: role.clone(),
            token,
        };
        let inner = self
            .producers
            .lock()
            .map_err(|_| not_held())?
            .get(role)
            .cloned()
            .ok_or_else(not_held)?;
        Ok(FencedProducer {
            role: role.clone(),
            token,
            inner,
            reporter: None,
        })
    }

    async fn ensure_topic(&self) -> Result<i32, CoordinationError> {
        let topic = self.config.topic.as_str();
        let exists =
            matches!(self.client.topic(topic).await, Ok(info) if !info.partitions.is_empty());
        if !exists {
            let new = NewTopic::new(topic, self.config.partitions)
                .replication_factor(self.config.replication_factor)
                .config("cleanup.policy", "compact");
            match self
                .client
                .create_topic(&new, self.config.admin_timeout)
                .await
            {
                Ok(_) => debug!(topic, "created the coordination state topic"),
                Err(error) if error.code() == Some(TOPIC_ALREADY_EXISTS) => {}
                Err(error) => return Err(CoordinationError::Admin(Box::new(error))),
            }
        }
        // A topic that another member has just created may not have its
        // leaders yet; wait for them, as a Kafka admin does after
        // CreateTopics, so the first registration does not fail on
        // LEADER_NOT_AVAILABLE.
        let deadline = tokio::time::Instant::now() + self.config.admin_timeout;
        loop {
            let metadata = self
                .client
                .refresh_metadata(&[topic])
                .await
                .map_err(|error| CoordinationError::Admin(Box::new(error)))?;
            if let Ok(info) = metadata.topic(topic)
                && !info.partitions.is_empty()
                && info.partitions.iter().all(|p| p.leader.is_some())
            {
                return partition_count(info.partitions.len());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(CoordinationError::Admin(
                    format!(
                        "{topic} has no leader for every partition after {:?}",
                        self.config.admin_timeout
                    )
                    .into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn current_producer(
        &self,
        role: &Role,
        token: FencingToken,
    ) -> Result<Arc<Mutex<TransactionalProducer>>, CoordinationError> {
        self.producer(role, token).map(|producer| producer.inner)
    }
}

fn partition_count(count: usize) -> Result<i32, CoordinationError> {
    i32::try_from(count)
        .ok()
        .filter(|count| *count > 0)
        .ok_or_else(|| {
            CoordinationError::Admin(format!("the state topic has {count} partitions").into())
        })
}

fn token_of(producer: &TransactionalProducer) -> Result<FencingToken, CoordinationError> {
    let identity = producer.identity();
    FencingToken::new(identity.producer_id.0, identity.epoch.0)
}

/// Sorts a client error into the coordination error a caller acts on.
fn producer_error(role: &Role, error: ClientError) -> CoordinationError {
    if error.is_fenced() {
        CoordinationError::Fenced { role: role.clone() }
    } else if matches!(
        error,
        ClientError::Connection { .. } | ClientError::Timeout(_)
    ) {
        CoordinationError::Client(Box::new(error))
    } else {
        CoordinationError::Producer {
            role: role.clone(),
            source: Box::new(error),
        }
    }
}

fn client_error(error: ClientError) -> CoordinationError {
    CoordinationError::Client(Box::new(error))
}

/// Runs one transaction of `writes` on `producer`, aborting it on failure.
async fn transact(
    role: &Role,
    producer: &mut TransactionalProducer,
    writes: Vec<(&str, i32, Vec<ProducerRecord>)>,
) -> Result<Vec<ProduceOutcome>, CoordinationError> {
    producer
        .begin()
        .map_err(|error| producer_error(role, error))?;
    let mut outcomes = Vec::with_capacity(writes.len());
    for (topic, partition, records) in writes {
        match producer.send(topic, partition, records).await {
            Ok(outcome) => outcomes.push(outcome),
            Err(error) => {
                if let Err(abort) = producer.abort().await {
                    debug!(%role, %abort, "abort after a failed send failed too");
                }
                return Err(producer_error(role, error));
            }
        }
    }
    if let Err(error) = producer.commit().await {
        if !error.is_fenced()
            && let Err(abort) = producer.abort().await
        {
            debug!(%role, %abort, "abort after a failed commit failed too");
        }
        return Err(producer_error(role, error));
    }
    Ok(outcomes)
}

#[async_trait]
impl CoordinationTransport for BrokerTransport {
    async fn acquire_epoch(&self, role: &Role) -> Result<FencingToken, CoordinationError> {
        // The topic must exist before the first lease write; finding out
        // here keeps that failure out of the guarded write.
        self.partition_of(role).await?;
        let producer =
            TransactionalProducer::init(self.client.clone(), role.as_str(), self.config.lease)
                .await
                .map_err(|error| producer_error(role, error))?;
        let token = token_of(&producer)?;
        self.producers
            .lock()
            .map_err(|_| CoordinationError::Producer {
                role: role.clone(),
                source: "the producer table is poisoned".into(),
            })?
            .insert(role.clone(), Arc::new(Mutex::new(producer)));
        Ok(token)
    }

    async fn read_role_records(&self, role: &Role) -> Result<RoleRecords, CoordinationError> {
        let topic = self.config.topic.as_str();
        let partition = self.partition_of(role).await?;
        let end = self
            .client
            .list_offset(
                topic,
                partition,
                krabka_client::OffsetSpec::Latest,
                IsolationLevel::ReadCommitted,
            )
            .await
            .map_err(client_error)?
            .offset;
        let earliest = self
            .client
            .list_offset(
                topic,
                partition,
                krabka_client::OffsetSpec::Earliest,
                IsolationLevel::ReadCommitted,
            )
            .await
            .map_err(client_error)?
            .offset;
        let config = ConsumerConfig {
            isolation: IsolationLevel::ReadCommitted,
            max_wait: Duration::from_millis(100),
            min_bytes: 0,
            ..ConsumerConfig::default()
        };
        // Continue from what this transport read last time, unless the log
        // moved under it (deleted records, a recreated topic).
        let mut cache = self.read_cache.lock().await;
        let (mut offset, mut records) = match cache.remove(role) {
            Some((next, records)) if (earliest..=end).contains(&next) => (next, records),
            _ => (earliest, RoleRecords::new()),
        };
        while offset < end {
            let fetch = [PartitionFetch {
                topic: topic.to_owned(),
                partition,
                offset,
            }];
            let fetched = self
                .client
                .fetch(&fetch, &config)
                .await
                .map_err(client_error)?
                .pop()
                .ok_or_else(|| {
                    client_error(ClientError::Protocol("fetch answered nothing".into()))
                })?
                .map_err(client_error)?;
            for record in fetched.records {
                let (Some(key), Some(value)) = (record.key.as_ref(), record.value.as_ref()) else {
                    continue; // a tombstone
                };
                let key_role = match CoordinationKey::decode(key) {
                    Ok(decoded) => decoded.role().clone(),
                    Err(error) => {
                        warn!(%role, offset = record.offset, %error, "skipping a foreign record");
                        continue;
                    }
                };
                if key_role != *role {
                    continue;
                }
                let (key, value) = decode_record(key, value)?;
                records.push((record.offset, key, value));
            }
            if fetched.next_offset <= offset {
                break; // nothing more is readable now (e.g. an open transaction)
            }
            offset = fetched.next_offset;
        }
        let records = succession::retain_decisive(records);
        cache.insert(role.clone(), (offset, records.clone()));
        Ok(records)
    }

    async fn register(&self, role: &Role, member: &MemberId) -> Result<(), CoordinationError> {
        let partition = self.partition_of(role).await?;
        let key = CoordinationKey::registration(role.clone(), member.clone());
        let value = CoordinationRecord::Registration(Registration {
            member: member.clone(),
            registered_at: self.clock.now_ms(),
        });
        let batches = [(
            self.config.topic.as_str(),
            partition,
            vec![ProducerRecord::keyed(key.encode(), value.encode())],
        )];
        let outcome = self
            .client
            .produce(&batches, Acks::All, Compression::None)
            .await
            .map_err(|error| producer_error(role, error))?
            .pop()
            .ok_or_else(|| {
                producer_error(
                    role,
                    ClientError::Protocol("produce answered nothing".into()),
                )
            })?;
        outcome
            .map(|_| ())
            .map_err(|error| producer_error(role, error))
    }

    async fn write_lease(
        &self,
        role: &Role,
        token: FencingToken,
        lease: &Lease,
    ) -> Result<(), CoordinationError> {
        let partition = self.partition_of(role).await?;
        let producer = self.current_producer(role, token)?;
        let mut producer = producer.lock().await;
        if token_of(&producer)? != token {
            return Err(CoordinationError::NotHeld {
                role: role.clone(),
                token,
            });
        }
        let key = CoordinationKey::lease(role.clone());
        let value = CoordinationRecord::Lease(lease.clone());
        let record = ProducerRecord::keyed(key.encode(), value.encode());
        transact(
            role,
            &mut producer,
            vec![(self.config.topic.as_str(), partition, vec![record])],
        )
        .await
        .map(|_| ())
    }

    async fn describe(&self, role: &Role) -> Result<Option<FencingToken>, CoordinationError> {
        match self.client.describe_transactions(&[role.as_str()]).await {
            Ok(descriptions) => {
                let Some(description) = descriptions
                    .into_iter()
                    .find(|d| d.transactional_id == role.as_str())
                else {
                    return Ok(None);
                };
                let producer = description.producer;
                if producer.producer_id.0 < 0 || producer.epoch.0 < 0 {
                    return Ok(None);
                }
                FencingToken::new(producer.producer_id.0, producer.epoch.0).map(Some)
            }
            Err(error) if error.code() == Some(TRANSACTIONAL_ID_NOT_FOUND) => Ok(None),
            Err(error) => Err(CoordinationError::Admin(Box::new(error))),
        }
    }
}

/// The role's transactional producer, for the application's own writes.
///
/// Every transaction carries the epoch of the token it was created for, so
/// the broker refuses it once a later member has taken the role; the
/// application learns that from [`CoordinationError::Fenced`]. It shares the
/// producer with the lease renewals, which take turns with it.
#[derive(Clone)]
pub struct FencedProducer {
    role: Role,
    token: FencingToken,
    inner: Arc<Mutex<TransactionalProducer>>,
    /// The campaign to tell when a write is fenced, when it came from one.
    reporter: Option<FenceReporter>,
}

impl std::fmt::Debug for FencedProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FencedProducer")
            .field("role", &self.role)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl FencedProducer {
    /// The token every write carries.
    #[must_use]
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// Writes each `(topic, partition, records)` batch in one transaction and
    /// commits it; on failure the transaction is aborted.
    ///
    /// # Errors
    ///
    /// Returns [`CoordinationError::Fenced`] when the broker refuses the
    /// epoch, [`CoordinationError::NotHeld`] when the transport has minted a
    /// newer epoch since this producer was handed out, and
    /// [`CoordinationError::Producer`] or [`CoordinationError::Client`] for
    /// other failures.
    pub async fn send_transaction(
        &self,
        writes: Vec<(&str, i32, Vec<ProducerRecord>)>,
    ) -> Result<Vec<ProduceOutcome>, CoordinationError> {
        let mut producer = self.inner.lock().await;
        if token_of(&producer)? != self.token {
            return Err(CoordinationError::NotHeld {
                role: self.role.clone(),
                token: self.token,
            });
        }
        let outcome = transact(&self.role, &mut producer, writes).await;
        if let (Err(error), Some(reporter)) = (&outcome, &self.reporter) {
            reporter.report(self.token, error);
        }
        outcome
    }
}

impl Campaign<BrokerTransport> {
    /// The transactional producer bound to the member's epoch, while it holds
    /// the role. When one of its writes is fenced, the campaign steps down
    /// at once.
    ///
    /// # Errors
    ///
    /// Returns [`CoordinationError::NotLeader`] when the member does not
    /// hold the role.
    pub fn producer(&self) -> Result<FencedProducer, CoordinationError> {
        let token = self.token().ok_or_else(|| CoordinationError::NotLeader {
            role: self.role().clone(),
        })?;
        let mut producer = self.transport().producer(self.role(), token)?;
        producer.reporter = Some(self.fence_reporter());
        Ok(producer)
    }
}

#[cfg(test)]
mod tests {
    use assert2::{assert, check};
    use krabka_client::{INVALID_PRODUCER_EPOCH, PRODUCER_FENCED};

    use super::*;

    fn role() -> Role {
        Role::new("controller").unwrap()
    }

    #[test]
    fn fencing_codes_become_fenced_and_the_rest_keep_their_cause() {
        let fenced = producer_error(
            &role(),
            ClientError::broker(PRODUCER_FENCED, None, "EndTxn".into()),
        );
        check!(fenced.to_string() == "fenced: another member holds role controller");
        let epoch = producer_error(
            &role(),
            ClientError::broker(INVALID_PRODUCER_EPOCH, None, "Produce".into()),
        );
        check!(epoch.is_fenced());
        let connection = producer_error(
            &role(),
            ClientError::Connection {
                broker: "127.0.0.1:9092".into(),
                reason: "reset".into(),
            },
        );
        assert!(let CoordinationError::Client(_) = &connection);
        // CONCURRENT_TRANSACTIONS: the coordinator is busy, a retry may pass.
        let busy = producer_error(
            &role(),
            ClientError::broker(51, None, "InitProducerId controller".into()),
        );
        assert!(let CoordinationError::Producer { .. } = &busy);
        check!(
            busy.to_string()
                == "producer for role controller: broker error CONCURRENT_TRANSACTIONS (51) in InitProducerId controller"
        );
    }

    #[test]
    fn defaults_follow_kafka_and_the_lease() {
        let config = BrokerTransportConfig::default();
        check!(config.topic == "__coordination_state");
        check!(config.partitions == 50);
        check!(config.lease == crate::succession::Timing::default().lease);
    }

    #[test]
    fn partition_counts_are_checked() {
        check!(partition_count(3).unwrap() == 3);
        check!(partition_count(0).is_err());
    }
}
