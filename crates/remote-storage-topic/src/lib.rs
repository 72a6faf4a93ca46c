//! krabka-remote-storage-topic: remote log metadata kept in the
//! `__remote_log_metadata` topic (KIP-405), as Kafka's
//! `TopicBasedRemoteLogMetadataManager` keeps it.

mod error;
mod log;
mod partitioner;
pub mod serde;

pub use {
    error::MetadataLogError,
    log::{
        AssignmentHandle, InProcessMetadataEventLog, KeyedEvent, MetadataEventLog,
        MetadataEventRecord, MetadataEventStream, PartitionStart, RangeVisitor,
    },
    partitioner::{RemoteLogMetadataTopicPartitioner, murmur2},
};
