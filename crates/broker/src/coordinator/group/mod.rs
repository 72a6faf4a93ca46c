//! Kafka's group coordinator: consumer groups and committed offsets.
//!
//! The module is self-contained. Its seams to the rest of the broker are:
//!
//! * [`GroupLog`] — durable storage: append encoded records to a partition
//!   of the compacted `__consumer_offsets` topic and read a partition back on
//!   load. The broker implements it over its partition layer;
//!   [`InMemoryGroupLog`] serves tests.
//! * [`Clock`] — time, injectable ([`ManualClock`]) so every timeout can be
//!   driven by hand; [`GroupCoordinator::tick`] fires due timers and
//!   [`GroupCoordinator::spawn_ticker`] calls it periodically.
//! * request handlers on [`GroupCoordinator`] that take `kafka-protocol`
//!   request structs plus a [`RequestContext`] (API version, client id and
//!   host) and return the response struct shaped for that version (the
//!   versions served are rows of the broker's API table,
//!   [`crate::api_versions::APIS`]).
//!
//! Records in `__consumer_offsets` use Kafka's own schemas ([`records`]), and
//! a group's partition is Kafka's `abs(hashCode(group)) % 50`
//! ([`partitioner`]), so the topic's contents mean the same thing to Krabka
//! and to Kafka tools.
//!
//! Implemented: FindCoordinator, the classic protocol (JoinGroup, SyncGroup,
//! Heartbeat, LeaveGroup), OffsetCommit, OffsetFetch, OffsetDelete,
//! ListGroups, DescribeGroups, DeleteGroups, the KIP-848 consumer
//! protocol (ConsumerGroupHeartbeat / ConsumerGroupDescribe with the
//! `uniform` and `range` server assignors, [`consumer`]), and transactional
//! offset commits (TxnOffsetCommit, routed here by the transaction
//! coordinator, made visible by its markers), with regular-expression
//! subscriptions resolved by the coordinator. Classic groups, KIP-848
//! consumer groups (member epochs, target and current assignments,
//! [`consumer_records`]) and offsets all persist, so they survive a restart
//! and, in cluster mode, a coordinator move.

mod admin;
pub mod assignor;
pub mod broker_log;
mod classic;
mod committed;
pub mod config;
pub mod consumer;
mod consumer_persist;
mod consumer_protocol;
pub mod consumer_records;
mod coordinator;
pub mod error;
pub mod log;
mod offsets;
pub mod partitioner;
pub mod records;
mod state;
pub mod topic_ids;
pub mod wire;

#[cfg(test)]
mod tests;

pub use admin::{KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION};
pub use committed::CommittedPosition;
// The log's injectable clock serves the coordinator's deadlines too.
pub use config::GroupConfig;
pub use consumer::TopicLookup;
pub use coordinator::{CoordinatorNode, GroupCoordinator, RequestContext};
pub use error::GroupError;
pub use krabka_log::{Clock, ManualClock, SystemClock};
pub use log::{GroupLog, GroupLogEntry, GroupLogRecord, InMemoryGroupLog};
pub use state::GroupState;

/// The internal topic the coordinator persists to.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
