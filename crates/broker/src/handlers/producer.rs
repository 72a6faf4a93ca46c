//! InitProducerId for idempotent producers.
//!
//! Ids come from the registry's persisted allocator, so an id is never
//! reused across restarts (the logs keep per-producer sequence state).
//! A producer that asks to bump its own epoch (KIP-360) gets epoch + 1, or a
//! fresh id when the epoch would overflow. A request with a
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
    if request.producer_id.0 >= 0
        && request.producer_epoch >= 0
        && request.producer_epoch < i16::MAX - 1
    {
        response.producer_id = request.producer_id;
        response.producer_epoch = request.producer_epoch + 1;
        return response;
    }
    let broker = Arc::clone(broker);
    match tokio::task::spawn_blocking(move || broker.registry.allocate_producer_id()).await {
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
