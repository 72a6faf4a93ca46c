//! Kafka's transaction coordinator (KIP-98): transactional producer ids and
//! epochs, the transaction state machine, and commit/abort markers.
//!
//! The pieces:
//!
//! * [`state`] — the state machine (`Empty → Ongoing → PrepareCommit /
//!   PrepareAbort → CompleteCommit / CompleteAbort`), pure and unit-tested;
//! * [`coordinator`] — the machine behind a lock, with two seams: a
//!   [`ProducerIdSource`] (the registry's persisted allocator, so ids never
//!   repeat across restarts) and a [`MarkerWriter`] (control batches through
//!   `Log::append_control_marker`), plus handlers in `kafka-protocol` types;
//! * [`wire`] — the broker side: decoding, dispatch, the seams over the
//!   partition layer, and the produce path's check.
//!
//! TxnOffsetCommit stages offsets with the transaction and hands them to
//! the group coordinator's ordinary commit once the commit markers are
//! written, so they become visible on commit only (but are not written in
//! the same atomic step as the markers).
//!
//! Not yet here: persistence in `__transaction_state` (the state is in
//! memory, so a restart forgets open transactions), ListTransactions v2's
//! id pattern, and DescribeProducers.

pub mod coordinator;
pub mod error;
pub mod state;
pub mod wire;

#[cfg(test)]
mod tests;

use kafka_protocol::messages::ApiKey;

pub use coordinator::{
    MarkerError, MarkerWriter, OffsetCommitter, ProducerIdSource, TransactionCoordinator,
};
pub use error::TxnError;
pub use state::{Completion, TopicPartition, TxnManager, TxnMetadata, TxnState};

/// Kafka's default `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
pub const TRANSACTION_ABORT_INTERVAL_MS: u64 = 10_000;

/// `(api key, min version, max version)` of the APIs [`wire`] decodes, for
/// the broker's ApiVersions table. AddPartitionsToTxn v0–3 is the client
/// form, v4–5 the batched form with verify-only; EndTxn stops at v4 (v5 is
/// KIP-890's transaction version 2).
pub const SUPPORTED_APIS: &[(ApiKey, i16, i16)] = &[
    (ApiKey::AddPartitionsToTxn, 0, 5),
    (ApiKey::AddOffsetsToTxn, 0, 4),
    (ApiKey::EndTxn, 0, 4),
    (ApiKey::TxnOffsetCommit, 0, 4),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::ListTransactions, 0, 1),
];
