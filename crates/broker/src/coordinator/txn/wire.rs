//! The coordinator's side of the broker: its seams over the partition layer
//! and the topic registry, the request dispatch for its APIs, and the
//! produce path's check of transactional batches.
//!
//! The coordinator is created on first use ([`coordinator`]) and starts its
//! timeout task then, so the broker's startup needs no change.

use {
    super::{
        SUPPORTED_APIS, TRANSACTION_ABORT_INTERVAL_MS,
        coordinator::{MarkerError, MarkerWriter, ProducerIdSource, TransactionCoordinator},
        error::TxnError,
        state::{DEFAULT_MAX_TIMEOUT_MS, TopicPartition},
    },
    crate::{
        broker::Broker,
        coordinator::group::{OFFSETS_TOPIC, partitioner},
        network::codec::encode_response,
        partition::LEADER_EPOCH,
    },
    bytes::Bytes,
    kafka_protocol::{
        error::ResponseError,
        messages::{
            AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, ApiKey, DescribeTransactionsRequest,
            EndTxnRequest, ListTransactionsRequest, OffsetCommitRequest, TxnOffsetCommitRequest,
            offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic},
        },
        protocol::Decodable,
    },
    krabka_ids::{ProducerEpoch, ProducerId},
    krabka_log::{ControlMarker, SystemClock, batch::BatchHeader},
    std::{
        sync::{Arc, Weak},
        time::Duration,
    },
};

/// A decoded request of one of the transaction coordinator's APIs
/// (InitProducerId stays with the producer handler, which forwards the
/// transactional form here).
#[derive(Debug, Clone)]
#[allow(missing_docs)]
pub enum TxnRequest {
    AddPartitionsToTxn(AddPartitionsToTxnRequest),
    AddOffsetsToTxn(AddOffsetsToTxnRequest),
    EndTxn(EndTxnRequest),
    TxnOffsetCommit(TxnOffsetCommitRequest),
    DescribeTransactions(DescribeTransactionsRequest),
    ListTransactions(ListTransactionsRequest),
}

/// Whether `api` is one of the coordinator's.
#[must_use]
pub fn handles(api: ApiKey) -> bool {
    SUPPORTED_APIS.iter().any(|(key, _, _)| *key == api)
}

/// Decodes the body of a coordinator request.
///
/// # Errors
///
/// The decoder's message when the body does not parse or `api` is not one
/// of the coordinator's.
pub fn decode(api: ApiKey, buf: &mut Bytes, version: i16) -> Result<TxnRequest, String> {
    fn d<T: Decodable>(buf: &mut Bytes, version: i16) -> Result<T, String> {
        T::decode(buf, version).map_err(|e| e.to_string())
    }
    Ok(match api {
        ApiKey::AddPartitionsToTxn => TxnRequest::AddPartitionsToTxn(d(buf, version)?),
        ApiKey::AddOffsetsToTxn => TxnRequest::AddOffsetsToTxn(d(buf, version)?),
        ApiKey::EndTxn => TxnRequest::EndTxn(d(buf, version)?),
        ApiKey::TxnOffsetCommit => TxnRequest::TxnOffsetCommit(d(buf, version)?),
        ApiKey::DescribeTransactions => TxnRequest::DescribeTransactions(d(buf, version)?),
        ApiKey::ListTransactions => TxnRequest::ListTransactions(d(buf, version)?),
        other => return Err(format!("{other:?} is not a transaction coordinator API")),
    })
}

/// Markers go straight into the partition's log.
struct PartitionMarkers {
    broker: Weak<Broker>,
}

impl MarkerWriter for PartitionMarkers {
    fn write_marker(
        &self,
        partition: &TopicPartition,
        marker: ControlMarker,
    ) -> Result<(), MarkerError> {
        let broker = self
            .broker
            .upgrade()
            .ok_or_else(|| MarkerError::Failed("the broker is shutting down".into()))?;
        let target = broker
            .partitions
            .get(&partition.topic, partition.partition)
            .ok_or(MarkerError::Gone)?;
        target
            .log
            .append_control_marker(marker, LEADER_EPOCH)
            .map_err(|e| MarkerError::Failed(e.to_string()))?;
        broker.partitions.notify_append();
        Ok(())
    }
}

/// Producer ids from the registry's persisted allocator (shared with
/// idempotent producers, so no id is ever handed out twice).
struct RegistryIds {
    broker: Weak<Broker>,
}

impl ProducerIdSource for RegistryIds {
    fn allocate(&self) -> Result<ProducerId, TxnError> {
        let broker = self
            .broker
            .upgrade()
            .ok_or_else(|| TxnError::Storage("the broker is shutting down".into()))?;
        broker
            .registry
            .allocate_producer_id()
            .map(ProducerId)
            .map_err(|e| TxnError::Storage(format!("{e:?}")))
    }
}

/// Committed transactional offsets go through the group coordinator's
/// OffsetCommit (with the generation and member the consumer sent, so a
/// zombie member's offsets are refused as they would be outside a
/// transaction).
struct GroupOffsets {
    broker: Weak<Broker>,
    runtime: tokio::runtime::Handle,
}

/// The OffsetCommit version whose semantics the staged commit uses (the
/// classic protocol's newest before KIP-848's member epochs).
const OFFSET_COMMIT_VERSION: i16 = 8;

fn as_offset_commit(staged: TxnOffsetCommitRequest) -> OffsetCommitRequest {
    let mut r = OffsetCommitRequest::default();
    r.group_id = staged.group_id;
    r.generation_id_or_member_epoch = staged.generation_id;
    r.member_id = staged.member_id;
    r.group_instance_id = staged.group_instance_id;
    r.retention_time_ms = -1;
    r.topics = staged
        .topics
        .into_iter()
        .map(|t| {
            let mut topic = OffsetCommitRequestTopic::default();
            topic.name = t.name;
            topic.partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let mut out = OffsetCommitRequestPartition::default();
                    out.partition_index = p.partition_index;
                    out.committed_offset = p.committed_offset;
                    out.committed_leader_epoch = p.committed_leader_epoch;
                    out.committed_metadata = p.committed_metadata;
                    out
                })
                .collect();
            topic
        })
        .collect();
    r
}

impl super::OffsetCommitter for GroupOffsets {
    fn commit_offsets(&self, staged: Vec<TxnOffsetCommitRequest>) {
        let Some(broker) = self.broker.upgrade() else {
            return;
        };
        let Some(groups) = broker.groups.get() else {
            tracing::error!("committed transactional offsets dropped: no group coordinator");
            return;
        };
        for request in staged {
            let group = request.group_id.0.as_str().to_owned();
            let ctx = crate::coordinator::group::RequestContext::new(
                OFFSET_COMMIT_VERSION,
                "transaction-coordinator",
                String::new(),
            );
            let response = self
                .runtime
                .block_on(groups.offset_commit(&ctx, as_offset_commit(request)));
            for topic in &response.topics {
                for p in topic.partitions.iter().filter(|p| p.error_code != 0) {
                    tracing::warn!(
                        %group,
                        topic = %topic.name.0,
                        partition = p.partition_index,
                        error = p.error_code,
                        "a committed transactional offset was refused"
                    );
                }
            }
        }
    }
}

/// `transaction.max.timeout.ms` from the broker's explicit settings.
fn max_timeout_ms(broker: &Broker) -> i32 {
    broker
        .config
        .explicit
        .get("transaction.max.timeout.ms")
        .and_then(|v| v.trim().parse::<i32>().ok())
        .filter(|v| *v > 0)
        .unwrap_or(DEFAULT_MAX_TIMEOUT_MS)
}

/// The broker's transaction coordinator, created (and its timeout task
/// started, when inside a tokio runtime) on first use.
pub fn coordinator(broker: &Arc<Broker>) -> Arc<TransactionCoordinator> {
    Arc::clone(broker.txns.get_or_init(|| {
        let coordinator = Arc::new(TransactionCoordinator::new(
            max_timeout_ms(broker),
            Arc::new(PartitionMarkers {
                broker: Arc::downgrade(broker),
            }),
            Arc::new(RegistryIds {
                broker: Arc::downgrade(broker),
            }),
            Arc::new(SystemClock),
        ));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            coordinator.set_offset_committer(Arc::new(GroupOffsets {
                broker: Arc::downgrade(broker),
                runtime,
            }));
            spawn_timeout_task(Arc::downgrade(&coordinator), broker.shutdown_signal());
        }
        coordinator
    }))
}

/// Kafka's `transaction.abort.timed.out.transaction.cleanup.interval.ms`
/// loop: aborts expired transactions and retries failed markers.
fn spawn_timeout_task(
    coordinator: Weak<TransactionCoordinator>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_millis(TRANSACTION_ABORT_INTERVAL_MS));
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = every.tick() => {}
                _ = shutdown.changed() => return,
            }
            if *shutdown.borrow() {
                return;
            }
            let Some(c) = coordinator.upgrade() else {
                return;
            };
            if tokio::task::spawn_blocking(move || c.tick()).await.is_err() {
                return;
            }
        }
    });
}

/// Runs a blocking coordinator call on the blocking pool.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| format!("transaction coordinator task failed: {e}"))
}

/// Handles a coordinator request and encodes the answer frame.
///
/// # Errors
///
/// The encoder's message when the answer cannot be written (the connection
/// is then closed).
pub async fn handle(
    broker: &Arc<Broker>,
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    request: TxnRequest,
) -> Result<Bytes, String> {
    let c = coordinator(broker);
    let b = Arc::clone(broker);
    let exists = move |topic: &str, partition: i32| b.partitions.get(topic, partition).is_some();
    match request {
        TxnRequest::AddPartitionsToTxn(r) => {
            let response = blocking(move || {
                if version >= 4 {
                    c.handle_add_partitions_batched(&r, &exists)
                } else {
                    c.handle_add_partitions(version, &r, &exists)
                }
            })
            .await?;
            encode_response(api_key, version, correlation_id, &response)
        }
        TxnRequest::AddOffsetsToTxn(r) => {
            let partitions = broker
                .registry
                .get(OFFSETS_TOPIC)
                .map_or(1, |m| m.partitions.max(1));
            let partition = partitioner::partition_for(r.group_id.0.as_str(), partitions);
            let response =
                blocking(move || c.handle_add_offsets(version, &r, OFFSETS_TOPIC, partition))
                    .await?;
            encode_response(api_key, version, correlation_id, &response)
        }
        TxnRequest::TxnOffsetCommit(r) => {
            let partitions = broker
                .registry
                .get(OFFSETS_TOPIC)
                .map_or(1, |m| m.partitions.max(1));
            let partition = partitioner::partition_for(r.group_id.0.as_str(), partitions);
            let response =
                blocking(move || c.handle_txn_offset_commit(r, OFFSETS_TOPIC, partition)).await?;
            encode_response(api_key, version, correlation_id, &response)
        }
        TxnRequest::DescribeTransactions(r) => {
            let response = c.handle_describe_transactions(&r);
            encode_response(api_key, version, correlation_id, &response)
        }
        TxnRequest::ListTransactions(r) => {
            let response = c.handle_list_transactions(&r);
            encode_response(api_key, version, correlation_id, &response)
        }
        TxnRequest::EndTxn(r) => {
            let response = blocking(move || c.handle_end_txn(version, &r)).await?;
            encode_response(api_key, version, correlation_id, &response)
        }
    }
}

/// InitProducerId with a `transactional.id` (called by the producer handler).
pub async fn init_producer_id(
    broker: &Arc<Broker>,
    version: i16,
    request: kafka_protocol::messages::InitProducerIdRequest,
) -> kafka_protocol::messages::InitProducerIdResponse {
    let c = coordinator(broker);
    match blocking(move || c.handle_init_producer_id(version, &request)).await {
        Ok(response) => response,
        Err(reason) => {
            tracing::error!(%reason, "InitProducerId failed");
            let mut response = kafka_protocol::messages::InitProducerIdResponse::default();
            response.producer_id = kafka_protocol::messages::ProducerId(-1);
            response.producer_epoch = -1;
            response.error_code = ResponseError::UnknownServerError.code();
            response
        }
    }
}

/// The produce path's check of a request with a `transactional.id`: a
/// transactional batch must come from the id's current producer and epoch
/// and go to a partition added to its open transaction. Returns the refusal,
/// if any.
pub fn check_produce(
    broker: &Arc<Broker>,
    transactional_id: &str,
    topic: &str,
    partition: i32,
    records: Option<&Bytes>,
) -> Option<(ResponseError, String)> {
    let header = records.and_then(|r| BatchHeader::parse(r))?;
    if !header.is_transactional() {
        return None;
    }
    let outcome = coordinator(broker).verify(
        transactional_id,
        ProducerId(header.producer_id),
        ProducerEpoch(header.producer_epoch),
        &TopicPartition::new(topic, partition),
    );
    outcome.err().map(|e| {
        let error = match &e {
            // The log's own answer to a stale epoch.
            TxnError::ProducerFenced => ResponseError::InvalidProducerEpoch,
            other => other.response_error(),
        };
        (error, e.to_string())
    })
}
