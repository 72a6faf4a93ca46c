//! The transaction coordinator's errors, each tied to the Kafka error code a
//! client sees for it.

use kafka_protocol::error::ResponseError;

/// Why a transaction coordinator call was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    /// `transaction.timeout.ms` is not positive or above `transaction.max.timeout.ms`.
    #[error(
        "The transaction timeout is larger than the maximum value allowed by the broker (as configured by transaction.max.timeout.ms)."
    )]
    InvalidTransactionTimeout,
    /// The transaction is completing (markers being written); retry.
    #[error(
        "The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing."
    )]
    ConcurrentTransactions,
    /// The call does not fit the transaction's state.
    #[error("The producer attempted a transactional operation in an invalid state: {0}")]
    InvalidTxnState(String),
    /// A newer producer with the same `transactional.id` holds the id.
    #[error(
        "There is a newer producer with the same transactionalId which fences the current one."
    )]
    ProducerFenced,
    /// The producer id does not belong to the `transactional.id`.
    #[error(
        "The producer attempted to use a producer id which is not currently assigned to its transactional id."
    )]
    InvalidProducerIdMapping,
    /// The producer's epoch is stale (pre-KIP-588 clients see this for fencing).
    #[error("Producer attempted to produce with an old epoch.")]
    InvalidProducerEpoch,
    /// A partition named in the call does not exist.
    #[error("This server does not host this topic-partition.")]
    UnknownTopicOrPartition,
    /// Not attempted because another partition of the same call failed.
    #[error("The operation was not attempted because another part of the request failed.")]
    OperationNotAttempted,
    /// A producer id could not be allocated (the allocator could not persist).
    #[error("producer id allocation failed: {0}")]
    Storage(String),
    /// The state change could not be written to `__transaction_state`
    /// (Kafka answers NOT_COORDINATOR; the client finds the coordinator
    /// again and retries).
    #[error("writing __transaction_state failed: {0}")]
    NotCoordinator(String),
}

impl TxnError {
    /// The Kafka error this maps to.
    #[must_use]
    pub fn response_error(&self) -> ResponseError {
        match self {
            Self::InvalidTransactionTimeout => ResponseError::InvalidTransactionTimeout,
            Self::ConcurrentTransactions => ResponseError::ConcurrentTransactions,
            Self::InvalidTxnState(_) => ResponseError::InvalidTxnState,
            Self::ProducerFenced => ResponseError::ProducerFenced,
            Self::InvalidProducerIdMapping => ResponseError::InvalidProducerIdMapping,
            Self::InvalidProducerEpoch => ResponseError::InvalidProducerEpoch,
            Self::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition,
            Self::OperationNotAttempted => ResponseError::OperationNotAttempted,
            Self::Storage(_) => ResponseError::KafkaStorageError,
            Self::NotCoordinator(_) => ResponseError::NotCoordinator,
        }
    }

    /// The code a failed partition verification (a transactional write's
    /// check against the open transaction) is answered with, as Kafka's
    /// `AddPartitionsToTxnManager` converts it: a fenced producer sees
    /// INVALID_PRODUCER_EPOCH, a partition outside the transaction
    /// TRANSACTION_ABORTABLE where the request version knows it
    /// (`abortable_known`), INVALID_TXN_STATE before.
    #[must_use]
    pub fn verification_code(&self, abortable_known: bool) -> i16 {
        match self {
            Self::ProducerFenced => ResponseError::InvalidProducerEpoch.code(),
            Self::InvalidTxnState(_) if abortable_known => {
                ResponseError::TransactionAbortable.code()
            }
            other => other.response_error().code(),
        }
    }

    /// The wire error code for an API `version` where `fenced_since` is the
    /// first version that knows PRODUCER_FENCED (90); older clients get
    /// INVALID_PRODUCER_EPOCH (47) instead, as Kafka answers them.
    #[must_use]
    pub fn code_for(&self, version: i16, fenced_since: i16) -> i16 {
        match self {
            Self::ProducerFenced if version < fenced_since => {
                ResponseError::InvalidProducerEpoch.code()
            }
            other => other.response_error().code(),
        }
    }
}
