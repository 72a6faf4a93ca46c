//! Coordinators: the broker-side state machines that persist their state in
//! internal compacted topics and rebuild it from them on start.
//!
//! Each coordinator is a self-contained module whose only seams to the rest of
//! the broker are a persistence trait (implemented over the partition layer),
//! a clock, and request handlers that take and return `kafka-protocol`
//! message structs, so wiring them into the network dispatch is a few lines.
//! What they share about their internal topics (creation, batch encoding,
//! replay) lives in [`state_topic`], and the primitive encodings of their
//! record schemas in [`record_codec`].

pub mod group;
pub mod ownership;
pub mod record_codec;
pub mod state_topic;
pub mod txn;
