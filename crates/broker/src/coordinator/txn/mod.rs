//! Kafka's transaction coordinator (KIP-98): transactional producer ids and
//! epochs, the transaction state machine persisted in `__transaction_state`,
//! commit/abort markers, and the transaction tooling's APIs.
//!
//! The pieces:
//!
//! * [`state`] — the state machine (`Empty → Ongoing → PrepareCommit /
//!   PrepareAbort → CompleteCommit / CompleteAbort`), pure and unit-tested;
//!   it proposes [`state::Transition`]s that take effect once persisted;
//! * [`records`] — Kafka's `TransactionLogKey` / `TransactionLogValue`
//!   schemas, byte for byte;
//! * [`coordinator`] — the machine behind a lock with its seams: the
//!   [`log::TxnStateLog`] it persists to (every change durable before it is
//!   answered, in Kafka's order), a [`ProducerIdSource`] (the registry's
//!   persisted allocator) and a [`MarkerWriter`]; plus the handlers in
//!   `kafka-protocol` types;
//! * [`broker_log`] — those seams over the broker, and the startup that
//!   replays `__transaction_state` and completes what was preparing;
//! * [`local_markers`] — one marker written to a partition of this broker,
//!   for the coordinator and for WriteTxnMarkers from another broker's;
//! * [`wire`] — dispatch, TxnOffsetCommit's route to the group
//!   coordinator, and the produce path's check;
//! * [`producers`] — DescribeProducers and producer-id expiry over the
//!   partitions' producer state;
//! * [`config`] — the `transaction.*` settings;
//! * [`version`] — the `transaction.version` feature (KIP-890).
//!
//! TxnOffsetCommit is the group coordinator's: it writes the offsets to the
//! group's `__consumer_offsets` partition as a transactional batch under the
//! producer's id and epoch, and the COMMIT marker this coordinator writes
//! there makes them visible (ABORT drops them) — Kafka's design, so offsets
//! of a transaction that was preparing at a crash still commit after it.
//!
//! Transactions version 2 (KIP-890 part 2: an epoch bump per transaction,
//! partitions added by Produce and TxnOffsetCommit) is the client's choice
//! per request; [`version`] says what it changes and which level the
//! broker announces.

pub mod broker_log;
pub mod config;
pub mod coordinator;
pub mod error;
pub mod local_markers;
pub mod log;
pub mod producers;
pub mod records;
pub mod state;
pub mod version;
pub mod wire;

#[cfg(test)]
mod restart_tests;
#[cfg(test)]
pub(crate) mod test_client;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod transactions_v2_tests;

pub use config::TxnConfig;
pub use coordinator::{MarkerError, MarkerWriter, ProducerIdSource, TransactionCoordinator};
pub use error::TxnError;
pub use log::{InMemoryTxnStateLog, TxnStateLog};
pub use state::{Completion, TopicPartition, Transition, TxnManager, TxnMetadata, TxnState};
pub use version::TransactionVersion;

/// The internal topic the coordinator persists to.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";
