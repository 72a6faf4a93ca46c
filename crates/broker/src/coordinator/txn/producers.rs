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
    crate::{broker::Broker, partition::PartitionStorage},
    kafka_protocol::{
        error::ResponseError,
        messages::{
            DescribeProducersRequest, DescribeProducersResponse,
            describe_producers_response::{PartitionResponse, ProducerState, TopicResponse},
        },
    },
    std::{sync::Arc, time::Duration},
};

/// Handles DescribeProducers (v0): per requested partition, every producer
/// the partition's storage knows; UNKNOWN_TOPIC_OR_PARTITION for a
/// partition this broker does not host. Reading producer state takes each
/// partition's append lock, so it runs on the blocking pool.
pub async fn describe_producers(
    broker: &Broker,
    request: &DescribeProducersRequest,
) -> DescribeProducersResponse {
    let wanted: Vec<(i32, Option<Arc<dyn PartitionStorage>>)> = request
        .topics
        .iter()
        .flat_map(|topic| {
            topic.partition_indexes.iter().map(|&index| {
                (
                    index,
                    broker.partitions.storage(topic.name.0.as_str(), index),
                )
            })
        })
        .collect();
    let found = crate::blocking::run(move || {
        wanted
            .into_iter()
            .map(|(index, partition)| (index, partition.map(|p| p.producers())))
            .collect::<Vec<_>>()
    })
    .await;
    let mut found = match found {
        Ok(found) => found.into_iter(),
        Err(e) => {
            tracing::warn!(error = %e, "reading producer state failed");
            Vec::new().into_iter()
        }
    };
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partition_indexes
                .iter()
                .map(|&index| {
                    let mut answer = PartitionResponse::default();
                    answer.partition_index = index;
                    match found.next() {
                        None => answer.error_code = ResponseError::UnknownServerError.code(),
                        Some((_, None)) => {
                            answer.error_code = ResponseError::UnknownTopicOrPartition.code();
                        }
                        Some((_, Some(producers))) => {
                            answer.active_producers = producers
                                .into_iter()
                                .map(|p| {
                                    let mut state = ProducerState::default();
                                    state.producer_id =
                                        kafka_protocol::messages::ProducerId(p.producer_id.0);
                                    state.producer_epoch = i32::from(p.producer_epoch.0);
                                    state.last_sequence = p.last_sequence;
                                    state.last_timestamp = p.last_timestamp;
                                    state.coordinator_epoch = p.coordinator_epoch;
                                    state.current_txn_start_offset =
                                        p.current_txn_start_offset.unwrap_or(-1);
                                    state
                                })
                                .collect();
                        }
                    }
                    answer
                })
                .collect();
            let mut answer = TopicResponse::default();
            answer.name = topic.name.clone();
            answer.partitions = partitions;
            answer
        })
        .collect();
    let mut response = DescribeProducersResponse::default();
    response.topics = topics;
    response
}

/// Every `producer.id.expiration.check.interval.ms`, drops the state of
/// producers idle for `producer.id.expiration.ms` with no open transaction
/// from every partition (Kafka's `removeExpiredProducers`), until shutdown.
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
