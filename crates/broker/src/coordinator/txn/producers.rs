//! The partitions' producer state as the transaction tooling sees it:
//! DescribeProducers (API 61, KIP-664 — what `kafka-transactions.sh
//! describe-producers` and the admin clients' `describe_producers` call) and
//! the periodic expiry of idle producer ids (`producer.id.expiration.ms`).
//!
//! Both read or trim the state each partition's log keeps per producer id
//! (epoch, last sequence, last timestamp, coordinator epoch of the last
//! marker, first offset of an open transaction); nothing here belongs to the
//! coordinator's own state, but it is the coordinator's view of the
//! partitions that makes hanging transactions findable.

use {
    super::config::TxnConfig,
    crate::broker::Broker,
    kafka_protocol::{
        error::ResponseError,
        messages::{
            DescribeProducersRequest, DescribeProducersResponse,
            describe_producers_response::{PartitionResponse, ProducerState, TopicResponse},
        },
        protocol::StrBytes,
    },
    krabka_log::ProducerSummary,
    std::{sync::Arc, time::Duration},
};

/// Handles DescribeProducers (v0): per requested partition, every producer
/// the partition's storage knows — the local log's producer state, or for
/// a diskless partition the batch coordinator's — UNKNOWN_TOPIC_OR_PARTITION
/// for a partition this broker does not host, and the storage's own error
/// (KAFKA_STORAGE_ERROR when the coordinator cannot answer) otherwise. The
/// partitions are asked concurrently.
pub async fn describe_producers(
    broker: &Broker,
    request: &DescribeProducersRequest,
) -> DescribeProducersResponse {
    let asks = request.topics.iter().flat_map(|topic| {
        topic.partition_indexes.iter().map(|&index| {
            let storage = broker.partitions.storage(topic.name.0.as_str(), index);
            async move {
                let mut answer = PartitionResponse::default();
                answer.partition_index = index;
                let Some(storage) = storage else {
                    answer.error_code = ResponseError::UnknownTopicOrPartition.code();
                    return answer;
                };
                match storage.producers().await {
                    Ok(producers) => {
                        answer.active_producers = producers.into_iter().map(wire_state).collect();
                    }
                    Err(e) => {
                        tracing::warn!(partition = ?storage, error = %e, "reading producer state failed");
                        answer.error_code = e.kafka_error_code();
                        answer.error_message = Some(StrBytes::from_string(e.to_string()));
                    }
                }
                answer
            }
        })
    });
    let mut answers = futures_util::future::join_all(asks).await.into_iter();
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let mut answer = TopicResponse::default();
            answer.name = topic.name.clone();
            answer.partitions = answers
                .by_ref()
                .take(topic.partition_indexes.len())
                .collect();
            answer
        })
        .collect();
    let mut response = DescribeProducersResponse::default();
    response.topics = topics;
    response
}

/// One producer as DescribeProducers carries it.
fn wire_state(p: ProducerSummary) -> ProducerState {
    let mut state = ProducerState::default();
    state.producer_id = kafka_protocol::messages::ProducerId(p.producer_id.0);
    state.producer_epoch = i32::from(p.producer_epoch.0);
    state.last_sequence = p.last_sequence;
    state.last_timestamp = p.last_timestamp;
    state.coordinator_epoch = p.coordinator_epoch;
    state.current_txn_start_offset = p.current_txn_start_offset.unwrap_or(-1);
    state
}

/// Every `producer.id.expiration.check.interval.ms`, drops the state of
/// producers idle for `producer.id.expiration.ms` with no open transaction
/// from every partition (Kafka's `removeExpiredProducers`), classic and
/// diskless, until shutdown.
pub fn spawn_expiration(broker: &Arc<Broker>, config: &TxnConfig) {
    let weak = Arc::downgrade(broker);
    let mut shutdown = broker.shutdown_signal();
    let interval = Duration::from_millis(config.producer_id_expiration_check_interval_ms.max(1));
    let expiration_ms = config.producer_id_expiration_ms;
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = shutdown.changed() => return,
            }
            if *shutdown.borrow() {
                return;
            }
            let Some(broker) = weak.upgrade() else {
                return;
            };
            // Diskless partitions keep their producers in the batch
            // coordinator, which forgets them for every partition at once.
            if let Some(runtime) = broker.partitions.diskless_started() {
                runtime.expire_producers(expiration_ms).await;
            }
            let pass = crate::blocking::run(move || {
                for partition in broker.partitions.all() {
                    match partition
                        .local_log()
                        .remove_expired_producers(expiration_ms)
                    {
                        Ok(0) | Err(krabka_log::LogError::Closed { .. }) => {}
                        Ok(n) => tracing::debug!(?partition, removed = n, "expired producer ids"),
                        Err(e) => {
                            tracing::warn!(?partition, error = %e, "expiring producer ids failed");
                        }
                    }
                }
            });
            if pass.await.is_err() {
                return;
            }
        }
    });
}
