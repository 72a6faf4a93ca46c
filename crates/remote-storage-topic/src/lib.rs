//! krabka-remote-storage-topic: KIP-405 remote log metadata kept in the
//! `__remote_log_metadata` topic, as Kafka's `TopicBasedRemoteLogMetadataManager`
//! keeps it.
//!
//! - [`MetadataEventLog`] is the publish/subscribe seam to the durable event
//!   store; [`InProcessMetadataEventLog`] is its in-memory implementation.
//! - [`serde`] is the event codec, byte for byte Kafka's
//!   `RemoteLogMetadataSerde`.
//! - [`KafkaMetadataEventLog`] is the seam over a Kafka-compatible cluster
//!   (the `__remote_log_metadata` topic itself).
//! - [`RemoteLogMetadataTopicPartitioner`] places a user partition's events
//!   in the same metadata partition Kafka does.
//! - [`TopicBasedRemoteLogMetadataManager`] is the
//!   [`RemoteLogMetadataManager`](krabka_remote_storage::RemoteLogMetadataManager)
//!   built on them.

mod error;
mod log;
mod manager;
mod partitioner;
pub mod serde;

pub use {
    error::MetadataLogError,
    log::{
        AssignmentHandle, DEFAULT_METADATA_TOPIC_PARTITIONS, InProcessMetadataEventLog,
        KafkaMetadataEventLog, KafkaMetadataEventLogConfig, KeyedEvent, MetadataEventLog,
        MetadataEventRecord, MetadataEventStream, PartitionStart, REMOTE_LOG_METADATA_TOPIC,
        RangeVisitor,
    },
    manager::{
        ConsumerStats, DEFAULT_CONSUME_WAIT, DEFAULT_SNAPSHOT_INTERVAL_EVENTS,
        TopicBasedRemoteLogMetadataManager, TopicBasedRlmmConfig,
    },
    partitioner::{RemoteLogMetadataTopicPartitioner, murmur2},
};
