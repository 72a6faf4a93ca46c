//! The coordinator's side of the broker's request dispatch: its APIs'
//! requests (decoded by the API table, [`crate::api_versions::APIS`]), running them on the blocking pool, routing TxnOffsetCommit to the
//! group coordinator once the transaction holds the group's partition, and
//! the produce path's check of transactional batches.
//!
//! The coordinator is started with the broker
//! ([`broker_log::start`](super::broker_log::start)); until then (or
//! without it, in tests of other modules) its APIs are answered
//! COORDINATOR_NOT_AVAILABLE.

use {
    super::{coordinator::TransactionCoordinator, error::TxnError, state::TopicPartition},
    crate::{
        broker::Broker,
        coordinator::{
            group::{OFFSETS_TOPIC, RequestContext, topic_ids},
            ownership::Refusal,
        },
        network::{codec::encode_response, newer::txn_offset_commit},
    },
    bytes::Bytes,
    kafka_protocol::{
        error::ResponseError,
        messages::{
            AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
            AddPartitionsToTxnResponse, ApiKey, DescribeProducersRequest,
            DescribeTransactionsRequest, DescribeTransactionsResponse, EndTxnRequest,
            EndTxnResponse, InitProducerIdRequest, InitProducerIdResponse, ListTransactionsRequest,
            ListTransactionsResponse, ProduceRequest, TxnOffsetCommitRequest,
            TxnOffsetCommitResponse,
            txn_offset_commit_response::{
                TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
            },
        },
    },
    krabka_ids::{ProducerEpoch, ProducerId},
    krabka_log::batch::BatchHeader,
    std::sync::Arc,
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
    DescribeProducers(DescribeProducersRequest),
}

/// Runs a blocking coordinator call on the blocking pool.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    crate::blocking::run(f)
        .await
        .map_err(|e| format!("transaction coordinator task failed: {e}"))
}

/// The `__consumer_offsets` partition of `group`.
fn offsets_partition(broker: &Broker, group: &str) -> i32 {
    match broker.groups.get() {
        Some(groups) => groups.partition_for(group),
        None => crate::coordinator::group::partitioner::partition_for(
            group,
            broker
                .registry
                .get(OFFSETS_TOPIC)
                .map_or(1, |m| m.partitions.max(1)),
        ),
    }
}

/// The answer to a request that reached no coordinator: every part of it
/// `code`, and the parts the authorizer refused with its codes (`fixup`).
fn unavailable(
    request: &TxnRequest,
    version: i16,
    code: i16,
    fixup: crate::security::authorize::Fixup,
) -> Result<Box<dyn Encodable>, String> {
    Ok(match request {
        TxnRequest::AddPartitionsToTxn(r) => {
            let mut response = AddPartitionsToTxnResponse::default();
            if version >= 4 {
                response.error_code = code;
            } else {
                response.results_by_topic_v3_and_below =
                    super::coordinator::topic_results(&r.v3_and_below_topics, |_| code);
            }
            Box::new(fixup.fill(response))
        }
        TxnRequest::AddOffsetsToTxn(_) => {
            let mut response = AddOffsetsToTxnResponse::default();
            response.error_code = code;
            Box::new(fixup.fill(response))
        }
        TxnRequest::EndTxn(_) => {
            let mut response = EndTxnResponse::default();
            response.error_code = code;
            response.producer_id = kafka_protocol::messages::ProducerId(-1);
            response.producer_epoch = -1;
            Box::new(fixup.fill(response))
        }
        TxnRequest::TxnOffsetCommit(r) => Box::new(fixup.fill(txn_offset_commit_error(r, code))),
        TxnRequest::DescribeTransactions(r) => {
            let mut response = DescribeTransactionsResponse::default();
            response.transaction_states = r
                .transactional_ids
                .iter()
                .map(|id| {
                    let mut d = kafka_protocol::messages::describe_transactions_response::TransactionState::default();
                    d.transactional_id = id.clone();
                    d.error_code = code;
                    d.producer_id = kafka_protocol::messages::ProducerId(-1);
                    d.producer_epoch = -1;
                    d.transaction_start_time_ms = -1;
                    d
                })
                .collect();
            Box::new(fixup.fill(response))
        }
        TxnRequest::ListTransactions(_) => {
            let mut response = ListTransactionsResponse::default();
            response.error_code = code;
            Box::new(fixup.fill(response))
        }
        TxnRequest::DescribeProducers(_) => {
            return Err("DescribeProducers needs no coordinator".into());
        }
    })
}

/// Whether a request needs a `__transaction_state` (or, for the offsets of
/// a transaction, `__consumer_offsets`) partition this broker does not
/// serve: it is then answered with the refusal's code (`NOT_COORDINATOR`
/// when another broker owns it, `COORDINATOR_LOAD_IN_PROGRESS`, or
/// `COORDINATOR_NOT_AVAILABLE` when it could not be read), never served
/// from a state missing that partition.
fn refusal(
    broker: &Broker,
    c: &TransactionCoordinator,
    request: &TxnRequest,
    version: i16,
) -> Option<Refusal> {
    let txn = |id: &str| c.refusal(id);
    let group = |g: &str| broker.groups.get().and_then(|groups| groups.refusal(g));
    // A partition that could not be read refuses whoever needs it; one
    // owned by another broker only refuses the requests sent to its owner.
    let unreadable = |r: Option<Refusal>| r.filter(|r| matches!(r, Refusal::Unavailable(_)));
    match request {
        TxnRequest::AddPartitionsToTxn(r) if version < 4 => {
            txn(r.v3_and_below_transactional_id.0.as_str())
        }
        TxnRequest::AddPartitionsToTxn(r) => r
            .transactions
            .iter()
            .find_map(|t| txn(t.transactional_id.0.as_str())),
        TxnRequest::AddOffsetsToTxn(r) => {
            txn(r.transactional_id.0.as_str()).or_else(|| unreadable(group(r.group_id.0.as_str())))
        }
        // TxnOffsetCommit goes to the group's coordinator.
        TxnRequest::TxnOffsetCommit(r) => {
            group(r.group_id.0.as_str()).or_else(|| unreadable(txn(r.transactional_id.0.as_str())))
        }
        TxnRequest::EndTxn(r) => txn(r.transactional_id.0.as_str()),
        _ => None,
    }
}

/// A response `encode_response` can write (object-safe stand-in).
trait Encodable {
    fn encode(&self, api_key: ApiKey, version: i16, correlation_id: i32) -> Result<Bytes, String>;
}

impl<T> Encodable for T
where
    T: kafka_protocol::protocol::Encodable + kafka_protocol::protocol::HeaderVersion + 'static,
{
    fn encode(&self, api_key: ApiKey, version: i16, correlation_id: i32) -> Result<Bytes, String> {
        encode_response(api_key, version, correlation_id, self)
    }
}

/// Every partition of a TxnOffsetCommit answered with `code`.
fn txn_offset_commit_error(request: &TxnOffsetCommitRequest, code: i16) -> TxnOffsetCommitResponse {
    let mut response = TxnOffsetCommitResponse::default();
    response.topics = request
        .topics
        .iter()
        .map(|t| topic_ids::answer_txn_commit_topic(t, code))
        .collect();
    response
}

/// TxnOffsetCommit: the transaction must hold the group's
/// `__consumer_offsets` partition (AddOffsetsToTxn), then the group
/// coordinator writes the offsets under the producer's id and epoch;
/// partitions of topics this broker does not have are answered
/// UNKNOWN_TOPIC_OR_PARTITION, as OffsetCommit's are.
async fn txn_offset_commit(
    broker: &Arc<Broker>,
    coordinator: Arc<TransactionCoordinator>,
    version: i16,
    mut request: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    if version < txn_offset_commit::FIRST_VERSION_BY_ID {
        return txn_offset_commit_named(broker, coordinator, version, request).await;
    }
    let unknown = topic_ids::name_txn_commit(&broker.registry, &mut request);
    let mut response = txn_offset_commit_named(broker, coordinator, version, request).await;
    topic_ids::id_txn_commit_response(&broker.registry, &mut response, unknown);
    response
}

/// TxnOffsetCommit once every topic is named.
async fn txn_offset_commit_named(
    broker: &Arc<Broker>,
    coordinator: Arc<TransactionCoordinator>,
    version: i16,
    mut request: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    let Some(groups) = broker.groups.get() else {
        return txn_offset_commit_error(&request, ResponseError::CoordinatorNotAvailable.code());
    };
    let partition = groups.partition_for(request.group_id.0.as_str());
    // In a cluster the transaction's coordinator may be another broker's:
    // this one then checks no more than Kafka's group coordinator does.
    let transactional_id = request.transactional_id.0.to_string();
    let producer = (
        ProducerId(request.producer_id.0),
        ProducerEpoch(request.producer_epoch),
    );
    let offsets = TopicPartition::new(OFFSETS_TOPIC, partition);
    let verified = if super::version::offset_commit_adds_partition(version) {
        // Transactions v2: no AddOffsetsToTxn came first; the group's
        // partition joins the transaction here, wherever its coordinator is.
        add_implicitly(
            broker,
            coordinator,
            &transactional_id,
            producer,
            vec![offsets],
        )
        .await
    } else if coordinator.refusal(&transactional_id).is_some() {
        Ok(())
    } else {
        coordinator.verify(&transactional_id, producer.0, producer.1, &offsets)
    };
    if let Err(e) = verified {
        // TxnOffsetCommit v4 is the first to know TRANSACTION_ABORTABLE.
        return txn_offset_commit_error(&request, e.verification_code(version >= 4));
    }
    let mut unknown: Vec<(kafka_protocol::messages::TopicName, i32)> = Vec::new();
    for topic in &mut request.topics {
        topic.partitions.retain(|p| {
            let known = broker.partition_exists(topic.name.0.as_str(), p.partition_index);
            if !known {
                unknown.push((topic.name.clone(), p.partition_index));
            }
            known
        });
    }
    request.topics.retain(|t| !t.partitions.is_empty());
    let ctx = RequestContext::new(version, "", "");
    let mut response = groups.txn_offset_commit(&ctx, request).await;
    for (name, partition) in unknown {
        let mut answer = TxnOffsetCommitResponsePartition::default();
        answer.partition_index = partition;
        answer.error_code = ResponseError::UnknownTopicOrPartition.code();
        match response.topics.iter_mut().find(|t| t.name == name) {
            Some(t) => t.partitions.push(answer),
            None => {
                let mut topic = TxnOffsetCommitResponseTopic::default();
                topic.name = name;
                topic.partitions = vec![answer];
                response.topics.push(topic);
            }
        }
    }
    response
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
    fixup: crate::security::authorize::Fixup,
) -> Result<Bytes, String> {
    if let TxnRequest::DescribeProducers(r) = &request {
        let response = fixup.fill(super::producers::describe_producers(broker, r).await);
        return encode_response(api_key, version, correlation_id, &response);
    }
    let Some(c) = broker.txns.get().map(Arc::clone) else {
        return unavailable(
            &request,
            version,
            ResponseError::CoordinatorNotAvailable.code(),
            fixup,
        )?
        .encode(api_key, version, correlation_id);
    };
    if let Some(refused) = refusal(broker, &c, &request, version) {
        return unavailable(&request, version, refused.code(), fixup)?.encode(
            api_key,
            version,
            correlation_id,
        );
    }
    let b = Arc::clone(broker);
    // A group's `__consumer_offsets` partition joins transactions too (a
    // TxnOffsetCommit v5 on another broker adds it here); in a cluster it
    // is a coordinator shard, not a partition of any broker.
    let offsets_partitions = broker
        .groups
        .get()
        .map_or(0, |g| g.config().offsets_topic_num_partitions);
    let exists = move |topic: &str, partition: i32| {
        b.partition_exists(topic, partition)
            || (topic == OFFSETS_TOPIC && (0..offsets_partitions).contains(&partition))
    };
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
            let partition = offsets_partition(broker, r.group_id.0.as_str());
            let response =
                blocking(move || c.handle_add_offsets(version, &r, OFFSETS_TOPIC, partition))
                    .await?;
            encode_response(api_key, version, correlation_id, &response)
        }
        TxnRequest::TxnOffsetCommit(r) => {
            let response = fixup.fill(txn_offset_commit(broker, c, version, r).await);
            encode_response(api_key, version, correlation_id, &response)
        }
        TxnRequest::DescribeTransactions(r) => {
            let mut response = c.handle_describe_transactions(&r);
            for state in &mut response.transaction_states {
                if let Some(refused) = c.refusal(state.transactional_id.0.as_str()) {
                    state.error_code = refused.code();
                }
            }
            let response = fixup.fill(response);
            encode_response(api_key, version, correlation_id, &response)
        }
        TxnRequest::ListTransactions(r) => {
            let response = fixup.fill(c.handle_list_transactions(&r));
            encode_response(api_key, version, correlation_id, &response)
        }
        TxnRequest::EndTxn(r) => {
            let response = blocking(move || c.handle_end_txn(version, &r)).await?;
            encode_response(api_key, version, correlation_id, &response)
        }
        TxnRequest::DescribeProducers(_) => Err("DescribeProducers was answered above".into()),
    }
}

/// InitProducerId with a `transactional.id` (called by the producer handler).
pub async fn init_producer_id(
    broker: &Arc<Broker>,
    version: i16,
    request: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let failed = |code: i16| {
        let mut response = InitProducerIdResponse::default();
        response.producer_id = kafka_protocol::messages::ProducerId(-1);
        response.producer_epoch = -1;
        response.error_code = code;
        response
    };
    let Some(c) = broker.txns.get().map(Arc::clone) else {
        return failed(ResponseError::CoordinatorNotAvailable.code());
    };
    if let Some(refused) = request
        .transactional_id
        .as_ref()
        .and_then(|id| c.refusal(id.0.as_str()))
    {
        return failed(refused.code());
    }
    match blocking(move || c.handle_init_producer_id(version, &request)).await {
        Ok(response) => response,
        Err(reason) => {
            tracing::error!(%reason, "InitProducerId failed");
            failed(ResponseError::UnknownServerError.code())
        }
    }
}

/// Whether a produce request carries transactional batches (the request
/// without a `transactional.id` is then refused as a whole with
/// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka's request handler does).
#[must_use]
pub fn has_transactional_records<'a>(records: impl IntoIterator<Item = Option<&'a Bytes>>) -> bool {
    records
        .into_iter()
        .flatten()
        .filter_map(|r| BatchHeader::parse(r))
        .any(|h| h.is_transactional())
}

/// Transactions v2 (KIP-890): a Produce of version 12 or later adds the
/// partitions of its transactional batches to the open transaction itself
/// — durably, on the blocking pool, before any batch is queued — as Kafka's
/// broker asks the coordinator to. Partitions already in the transaction
/// cost nothing. Returns the refusal every transactional batch of the
/// request gets when the add failed (PRODUCER_FENCED as
/// INVALID_PRODUCER_EPOCH, CONCURRENT_TRANSACTIONS and NOT_COORDINATOR
/// retriable, as Kafka answers a Produce).
pub async fn add_produced_partitions(
    broker: &Arc<Broker>,
    version: i16,
    request: &ProduceRequest,
) -> Option<(i16, String)> {
    if !super::version::produce_adds_partitions(version) {
        return None;
    }
    let transactional_id = request
        .transactional_id
        .as_ref()
        .map(|t| t.0.as_str())
        .filter(|t| !t.is_empty())?;
    let coordinator = broker.txns.get().map(Arc::clone)?;
    // Partitions already in a transaction this broker coordinates are
    // skipped; another broker's coordinator is asked about all of them.
    let local = coordinator.refusal(transactional_id).is_none();
    let mut producer = None;
    let mut wanted = Vec::new();
    for topic in &request.topic_data {
        let name = if version >= 13 {
            broker
                .registry
                .by_id(topic.topic_id)
                .map(|m| m.name.clone())
        } else {
            Some(topic.name.0.to_string())
        };
        let Some(name) = name else { continue };
        for data in &topic.partition_data {
            let Some(header) = data.records.as_ref().and_then(|r| BatchHeader::parse(r)) else {
                continue;
            };
            if !header.is_transactional() || !broker.partition_exists(&name, data.index) {
                continue;
            }
            let ids = (
                ProducerId(header.producer_id),
                ProducerEpoch(header.producer_epoch),
            );
            let partition = TopicPartition::new(name.as_str(), data.index);
            if local
                && coordinator
                    .verify(transactional_id, ids.0, ids.1, &partition)
                    .is_ok()
            {
                continue;
            }
            producer.get_or_insert(ids);
            wanted.push(partition);
        }
    }
    let producer = producer?;
    add_implicitly(broker, coordinator, transactional_id, producer, wanted)
        .await
        .err()
        .map(|e| (e.verification_code(true), e.to_string()))
}

/// Adds `partitions` to the open transaction of `transactional_id` for
/// `producer` (transactions v2): on this broker's coordinator when it owns
/// the id, durably; in a cluster, on the broker that does
/// ([`crate::cluster::txn_partitions`]).
///
/// # Errors
///
/// The coordinator's refusal; [`TxnError::NotCoordinator`] (retriable)
/// when the id's coordinator is loading, unreadable or unreachable.
async fn add_implicitly(
    broker: &Arc<Broker>,
    coordinator: Arc<TransactionCoordinator>,
    transactional_id: &str,
    producer: (ProducerId, ProducerEpoch),
    partitions: Vec<TopicPartition>,
) -> Result<(), TxnError> {
    match (coordinator.refusal(transactional_id), broker.cluster.get()) {
        (None, _) => {
            let id = transactional_id.to_owned();
            blocking(move || coordinator.add_partitions(&id, producer.0, producer.1, partitions))
                .await
                .unwrap_or_else(|reason| Err(TxnError::NotCoordinator(reason)))
        }
        (Some(Refusal::NotCoordinator), Some(node)) => {
            crate::cluster::txn_partitions::add_on_coordinator(
                broker,
                node,
                transactional_id,
                coordinator.partition_for(transactional_id),
                producer,
                &partitions,
            )
            .await
        }
        (Some(refused), _) => Err(TxnError::NotCoordinator(format!(
            "the coordinator of {transactional_id} is not ready here ({refused:?})"
        ))),
    }
}

/// The produce path's check of a request with a `transactional.id`: a
/// transactional batch must come from the id's current producer and epoch
/// and go to a partition added to its open transaction
/// (`transaction.partition.verification.enable`). `refused` is what
/// [`add_produced_partitions`] answered, if it failed. Returns the refusal,
/// if any, with the code Kafka gives a Produce of `version`.
pub fn check_produce(
    broker: &Arc<Broker>,
    version: i16,
    transactional_id: &str,
    topic: &str,
    partition: i32,
    records: Option<&Bytes>,
    refused: Option<&(i16, String)>,
) -> Option<(i16, String)> {
    let header = records.and_then(|r| BatchHeader::parse(r))?;
    if !header.is_transactional() {
        return None;
    }
    if let Some(refused) = refused {
        return Some(refused.clone());
    }
    let Some(coordinator) = broker.txns.get() else {
        return Some((
            ResponseError::CoordinatorNotAvailable.code(),
            "the transaction coordinator has not started".into(),
        ));
    };
    // In a cluster, verification asks the local coordinator only when it
    // is the id's (Kafka asks the owner with AddPartitionsToTxn v4).
    if !coordinator.config().partition_verification
        || coordinator.refusal(transactional_id).is_some()
    {
        return None;
    }
    let outcome = coordinator.verify(
        transactional_id,
        ProducerId(header.producer_id),
        ProducerEpoch(header.producer_epoch),
        &TopicPartition::new(topic, partition),
    );
    // Produce v11 is the first to know TRANSACTION_ABORTABLE.
    outcome
        .err()
        .map(|e| (e.verification_code(version >= 11), e.to_string()))
}
