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
//!
//! ## Example
//!
//! Three calls from a thread that may block (the broker's `spawn_blocking`):
//!
//! ```
//! use {
//!     krabka_ids::LeaderEpoch,
//!     krabka_remote_storage::{
//!         RemoteLogMetadataManager, RemoteLogSegmentDetails, RemoteLogSegmentId,
//!         RemoteLogSegmentMetadata, RemoteLogSegmentState, TopicIdPartition,
//!     },
//!     krabka_remote_storage_topic::{
//!         InProcessMetadataEventLog, TopicBasedRemoteLogMetadataManager, TopicBasedRlmmConfig,
//!     },
//!     std::{collections::BTreeMap, sync::Arc},
//!     uuid::Uuid,
//! };
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = tokio::runtime::Runtime::new()?;
//! let log = Arc::new(InProcessMetadataEventLog::new(50));
//! let rlmm = TopicBasedRemoteLogMetadataManager::new(
//!     log,
//!     runtime.handle().clone(),
//!     TopicBasedRlmmConfig::default(),
//! );
//! let orders = TopicIdPartition::new(Uuid::new_v4(), "orders", 0);
//! rlmm.on_partition_leadership_changes(std::slice::from_ref(&orders), &[])?;
//! while !rlmm.is_ready(&orders) {
//!     std::thread::yield_now();
//! }
//! let details = RemoteLogSegmentDetails::new(
//!     1024,
//!     RemoteLogSegmentState::CopySegmentStarted,
//!     BTreeMap::from([(LeaderEpoch(0), 0)]),
//! );
//! let segment_id = RemoteLogSegmentId::generate_new(orders.clone());
//! rlmm.add_remote_log_segment_metadata(RemoteLogSegmentMetadata::new(
//!     segment_id, 0, 99, 0, 1, 0, details,
//! )?)?;
//! // The call returned once the manager's own consumer applied the event.
//! assert_eq!(rlmm.list_remote_log_segments(&orders)?.len(), 1);
//! rlmm.close()?;
//! # Ok(())
//! # }
//! ```

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
        MetadataEventRecord, MetadataEventStream, PartitionStart,
        REMOTE_LOG_METADATA_CLIENT_PREFIX, REMOTE_LOG_METADATA_TOPIC, RangeVisitor,
    },
    manager::{
        ConsumerStats, DEFAULT_CONSUME_WAIT, DEFAULT_SNAPSHOT_INTERVAL_EVENTS,
        TopicBasedRemoteLogMetadataManager, TopicBasedRlmmConfig,
    },
    partitioner::{RemoteLogMetadataTopicPartitioner, murmur2},
};
