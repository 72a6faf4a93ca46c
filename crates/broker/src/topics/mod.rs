//! Topics: the persisted registry (names, ids, partition counts, config
//! overrides), Kafka's name rules, and the resolution of effective topic
//! configs from overrides and broker settings.

pub mod config;
pub mod names;
mod registry;

pub use registry::{PRODUCER_ID_BLOCK, REGISTRY_FILE, RegistryRefusal, TopicMeta, TopicRegistry};
