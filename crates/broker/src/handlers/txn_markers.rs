//! WriteTxnMarkers (API 27): another broker's transaction coordinator asks
//! this broker to write COMMIT/ABORT markers to partitions it hosts.
//!
//! Each partition is written through [`write_local_marker`], the path this
//! broker's own coordinator takes, in request order, and answered with its
//! own code. The writes block (appends, fsyncs, the group coordinator's
//! writer), so the whole request runs on the blocking pool. Authorization
//! (CLUSTER_ACTION on the cluster) is checked before, in
//! [`crate::security::authorize`], which answers a refusal with
//! [`refused`].

use {
    crate::{
        broker::Broker,
        coordinator::txn::{TopicPartition, local_markers::write_local_marker},
        network::newer::write_txn_markers,
    },
    kafka_protocol::{
        error::ResponseError,
        messages::{
            WriteTxnMarkersRequest, WriteTxnMarkersResponse,
            write_txn_markers_request::WritableTxnMarker,
            write_txn_markers_response::{
                WritableTxnMarkerPartitionResult, WritableTxnMarkerResult,
                WritableTxnMarkerTopicResult,
            },
        },
    },
    krabka_ids::{ProducerEpoch, ProducerId},
    krabka_log::ControlMarker,
    std::sync::Arc,
};

/// Writes every marker of `request` and answers each partition.
pub async fn handle_write_txn_markers(
    broker: &Arc<Broker>,
    request: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    let runtime = tokio::runtime::Handle::current();
    let b = Arc::clone(broker);
    let markers = request.markers.clone();
    match crate::blocking::run(move || write_all(&b, &runtime, markers)).await {
        Ok(response) => response,
        // The pool is gone (shutdown): nothing was written for sure.
        Err(e) => {
            tracing::warn!(error = %e, "WriteTxnMarkers not run");
            answer_all(&request, ResponseError::KafkaStorageError.code())
        }
    }
}

fn write_all(
    broker: &Broker,
    runtime: &tokio::runtime::Handle,
    markers: Vec<WritableTxnMarker>,
) -> WriteTxnMarkersResponse {
    let mut response = WriteTxnMarkersResponse::default();
    for m in markers {
        let marker = ControlMarker {
            producer_id: ProducerId(m.producer_id.0),
            producer_epoch: ProducerEpoch(m.producer_epoch),
            commit: m.transaction_result,
            coordinator_epoch: m.coordinator_epoch,
            transaction_version: write_txn_markers::transaction_version(&m),
        };
        let mut result = WritableTxnMarkerResult::default();
        result.producer_id = m.producer_id;
        for t in m.topics {
            let mut topic = WritableTxnMarkerTopicResult::default();
            for index in t.partition_indexes {
                let partition = TopicPartition::new(t.name.0.as_str(), index);
                let code = match write_local_marker(broker, runtime, &partition, marker) {
                    Ok(()) => 0,
                    Err(e) => {
                        tracing::debug!(
                            topic = %partition.topic,
                            partition = index,
                            error = %e,
                            "WriteTxnMarkers: marker not written"
                        );
                        e.code()
                    }
                };
                let mut p = WritableTxnMarkerPartitionResult::default();
                p.partition_index = index;
                p.error_code = code;
                topic.partitions.push(p);
            }
            topic.name = t.name;
            result.topics.push(topic);
        }
        response.markers.push(result);
    }
    response
}

/// The answer giving every partition of `request` the error `code`.
#[must_use]
pub fn answer_all(request: &WriteTxnMarkersRequest, code: i16) -> WriteTxnMarkersResponse {
    let mut response = WriteTxnMarkersResponse::default();
    for m in &request.markers {
        let mut result = WritableTxnMarkerResult::default();
        result.producer_id = m.producer_id;
        for t in &m.topics {
            let mut topic = WritableTxnMarkerTopicResult::default();
            topic.name = t.name.clone();
            for index in &t.partition_indexes {
                let mut p = WritableTxnMarkerPartitionResult::default();
                p.partition_index = *index;
                p.error_code = code;
                topic.partitions.push(p);
            }
            result.topics.push(topic);
        }
        response.markers.push(result);
    }
    response
}

/// The answer to a principal without CLUSTER_ACTION: every partition
/// CLUSTER_AUTHORIZATION_FAILED, as Kafka answers it.
#[must_use]
pub fn refused(request: &WriteTxnMarkersRequest) -> WriteTxnMarkersResponse {
    answer_all(request, ResponseError::ClusterAuthorizationFailed.code())
}

#[cfg(test)]
#[path = "txn_markers_tests.rs"]
mod tests;
