//! `krabka-broker`: a single-node, Kafka-compatible broker on `krabka-log`.
//!
//! The crate is laid out by layer: [`config`] (Kafka property names and
//! defaults), [`network`] (framing, decoding, ordered answers), [`handlers`]
//! (one module per API family), [`fetch`] (long polls, KIP-227 sessions and
//! the fetch memory budget), [`partition`] (each partition owning all of its
//! storage behind one seam), [`blocking`] (the one door to the blocking
//! pool), [`topics`] (the persisted topic registry and effective topic
//! configs), [`log_dir`] (the log directory's lock, identity and space
//! reserve), [`api_versions`] (what is implemented), [`metrics`] with
//! [`health`] (the `/metrics`, `/healthz` and `/readyz` endpoint) and
//! [`server`] (startup, housekeeping and shutdown). Unmodified Kafka clients
//! speak to it through `kafka-protocol`.

pub mod alloc_guard;
pub mod api_versions;
pub mod blocking;
pub mod broker;
pub mod cluster;
pub mod config;
pub mod coordinator;
pub mod diskless;
pub mod error;
pub mod fetch;
pub mod handlers;
pub mod health;
pub mod log_dir;
pub mod metrics;
pub mod network;
pub mod partition;
pub mod remote;
pub mod security;
pub mod server;
pub mod topics;

pub use {
    config::{BrokerConfig, RawSettings},
    error::BrokerError,
    server::{run, run_until},
};

// The unit tests (notably the decoder fuzz tests) run under the same
// allocator as the binary.
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: alloc_guard::GuardedAllocator = alloc_guard::GuardedAllocator;
