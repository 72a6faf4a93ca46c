//! InitProducerId for idempotent producers.
//!
//! Ids come from the registry's persisted allocator, so an id is never
//! reused across restarts (the logs keep per-producer sequence state).
//! A non-transactional producer that sends its current id and epoch
//! (KIP-360, to reset after an unknown-producer or sequence error) gets a
//! fresh id at epoch 0, as on Kafka, whose coordinator answers a request
//! without `transactional.id` from its id generator alone: nothing here
//! records who holds an id, so handing out epoch + 1 of the id a client names
//! would let any client take over another producer's id, and a retry after
//! a lost answer is answered like any other request. A request with a
//! `transactional.id` is routed by the dispatcher to the transaction
//! coordinator (`crate::coordinator::txn::wire::init_producer_id`); should
//! one reach this handler it is answered COORDINATOR_NOT_AVAILABLE.

use {
    crate::broker::Broker,
    kafka_protocol::{
        error::ResponseError,
        messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId},
    },
    std::sync::Arc,
};

/// Handles InitProducerId.
pub async fn handle_init_producer_id(
    broker: &Arc<Broker>,
    request: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse::default();
    response.producer_id = ProducerId(-1);
    response.producer_epoch = -1;
    if request
        .transactional_id
        .as_ref()
        .is_some_and(|t| !t.0.is_empty())
    {
        response.error_code = ResponseError::CoordinatorNotAvailable.code();
        return response;
    }
    // Kafka: an empty transactional.id, or an id without an epoch (or the
    // reverse), is malformed.
    if request
        .transactional_id
        .as_ref()
        .is_some_and(|t| t.0.is_empty())
        || (request.producer_id.0 == -1) != (request.producer_epoch == -1)
    {
        response.error_code = ResponseError::InvalidRequest.code();
        return response;
    }
    let broker = Arc::clone(broker);
    match tokio::task::spawn_blocking(move || broker.allocate_producer_id()).await {
        Ok(Ok(id)) => {
            response.producer_id = ProducerId(id);
            response.producer_epoch = 0;
        }
        Ok(Err(e)) => {
            tracing::error!(error = %e, "allocating a producer id failed");
            response.error_code = ResponseError::KafkaStorageError.code();
        }
        Err(_) => response.error_code = ResponseError::UnknownServerError.code(),
    }
    response
}
