//! The `RemoteLogMetadataManager` SPI (Kafka's interface of that name).
//!
//! It records the lifecycle of every remote segment and answers the broker's
//! questions: which segment holds offset `o` written under epoch `e`, how far
//! has epoch `e` been copied, which segments exist, how big the remote log
//! is. Kafka's methods return futures that complete when the event is
//! durable; this SPI is synchronous, so a call returns once the change is
//! applied and visible to lookups (the topic-based implementation returns
//! once its event is consumed back).
//!
//! Lookups serve only `COPY_SEGMENT_FINISHED` segments; listings show every
//! segment that is not yet `DELETE_SEGMENT_FINISHED`, sorted by start offset.

use {
    crate::{
        error::RemoteStorageError,
        metadata::{
            RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate,
            RemotePartitionDeleteMetadata, TopicIdPartition,
        },
    },
    krabka_ids::LeaderEpoch,
};

/// Stores and queries remote-segment metadata with a strict lifecycle.
pub trait RemoteLogMetadataManager: Send + Sync {
    /// Records a new segment. Its state must be `COPY_SEGMENT_STARTED`.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::IllegalStateTransition`] (with `from: None`) if
    /// the state is not `COPY_SEGMENT_STARTED`,
    /// [`RemoteStorageError::DuplicateSegment`] if the id is known,
    /// [`RemoteStorageError::PartitionDeleted`] if the partition is being
    /// deleted, [`RemoteStorageError::Closed`] after [`close`](Self::close),
    /// or a storage error of the implementation.
    fn add_remote_log_segment_metadata(
        &self,
        metadata: RemoteLogSegmentMetadata,
    ) -> Result<(), RemoteStorageError>;

    /// Moves a known segment to a new state. `DELETE_SEGMENT_FINISHED`
    /// forgets the segment.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::UnknownSegment`] if the id is not known,
    /// [`RemoteStorageError::IllegalStateTransition`] if the lifecycle does
    /// not allow the move, [`RemoteStorageError::PartitionDeleted`] for a
    /// `COPY_SEGMENT_FINISHED` on a partition being deleted, `Closed`, or a
    /// storage error.
    fn update_remote_log_segment_metadata(
        &self,
        update: RemoteLogSegmentMetadataUpdate,
    ) -> Result<(), RemoteStorageError>;

    /// The `COPY_SEGMENT_FINISHED` segment of `partition` that holds `offset`
    /// written under `epoch_for_offset`, if any: among the segments where
    /// that epoch occurs, the one with the greatest epoch start offset not
    /// after `offset`, provided the epoch's last offset in it is not before
    /// `offset`.
    ///
    /// # Errors
    ///
    /// `Closed`, or a storage error of the implementation.
    fn remote_log_segment_metadata(
        &self,
        partition: &TopicIdPartition,
        epoch_for_offset: LeaderEpoch,
        offset: i64,
    ) -> Result<Option<RemoteLogSegmentMetadata>, RemoteStorageError>;

    /// The highest offset of `leader_epoch` copied to the remote tier (over
    /// `COPY_SEGMENT_FINISHED` segments; deletion does not lower it), if any.
    ///
    /// # Errors
    ///
    /// `Closed`, or a storage error.
    fn highest_offset_for_epoch(
        &self,
        partition: &TopicIdPartition,
        leader_epoch: LeaderEpoch,
    ) -> Result<Option<i64>, RemoteStorageError>;

    /// Records a step of a partition's deletion: `DELETE_PARTITION_MARKED`,
    /// then `_STARTED`, then `_FINISHED`, which drops all its segments.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::IllegalPartitionDeleteTransition`] if the step
    /// is out of order, `Closed`, or a storage error.
    fn put_remote_partition_delete_metadata(
        &self,
        metadata: RemotePartitionDeleteMetadata,
    ) -> Result<(), RemoteStorageError>;

    /// The latest delete step recorded for `partition`, if any. (Kafka keeps
    /// this internal; Krabka exposes it for operators' dumps.)
    ///
    /// # Errors
    ///
    /// `Closed`, or a storage error.
    fn remote_partition_delete_metadata(
        &self,
        partition: &TopicIdPartition,
    ) -> Result<Option<RemotePartitionDeleteMetadata>, RemoteStorageError>;

    /// Every segment of `partition` in any state before
    /// `DELETE_SEGMENT_FINISHED`, sorted by start offset. An unknown
    /// partition has none.
    ///
    /// # Errors
    ///
    /// `Closed`, or a storage error.
    fn list_remote_log_segments(
        &self,
        partition: &TopicIdPartition,
    ) -> Result<Vec<RemoteLogSegmentMetadata>, RemoteStorageError>;

    /// The segments of `partition` in which `leader_epoch` occurs, in any
    /// state before `DELETE_SEGMENT_FINISHED`, sorted by start offset.
    ///
    /// # Errors
    ///
    /// `Closed`, or a storage error.
    fn list_remote_log_segments_for_epoch(
        &self,
        partition: &TopicIdPartition,
        leader_epoch: LeaderEpoch,
    ) -> Result<Vec<RemoteLogSegmentMetadata>, RemoteStorageError>;

    /// The broker became leader of `leader_partitions` and follower of
    /// `follower_partitions`; an implementation that loads metadata per
    /// partition starts doing so for both.
    ///
    /// # Errors
    ///
    /// `Closed`, or a storage error of the implementation.
    fn on_partition_leadership_changes(
        &self,
        leader_partitions: &[TopicIdPartition],
        follower_partitions: &[TopicIdPartition],
    ) -> Result<(), RemoteStorageError>;

    /// The broker stopped serving `partitions` (moved away or deleted).
    ///
    /// # Errors
    ///
    /// `Closed`, or a storage error of the implementation.
    fn on_stopped_partitions(
        &self,
        partitions: &[TopicIdPartition],
    ) -> Result<(), RemoteStorageError>;

    /// Total `.log` bytes of the segments that
    /// [`list_remote_log_segments_for_epoch`](Self::list_remote_log_segments_for_epoch)
    /// returns for `leader_epoch`.
    ///
    /// # Errors
    ///
    /// `Closed`, or a storage error.
    fn remote_log_size(
        &self,
        partition: &TopicIdPartition,
        leader_epoch: LeaderEpoch,
    ) -> Result<u64, RemoteStorageError>;

    /// The next segment, at or after `offset` in `epoch`, that may hold
    /// aborted-transaction entries. The default is Kafka's: the segment that
    /// [`remote_log_segment_metadata`](Self::remote_log_segment_metadata)
    /// finds, whether or not its transaction index is empty.
    ///
    /// # Errors
    ///
    /// As for `remote_log_segment_metadata`.
    fn next_segment_with_txn_index(
        &self,
        partition: &TopicIdPartition,
        epoch: LeaderEpoch,
        offset: i64,
    ) -> Result<Option<RemoteLogSegmentMetadata>, RemoteStorageError> {
        self.remote_log_segment_metadata(partition, epoch, offset)
    }

    /// Whether the metadata of `partition` is loaded and can be served
    /// (Kafka's `isReady`). An implementation that is always up to date
    /// keeps the default, `true`.
    fn is_ready(&self, partition: &TopicIdPartition) -> bool {
        let _ = partition;
        true
    }

    /// Releases the manager's resources; later calls return
    /// [`RemoteStorageError::Closed`].
    ///
    /// # Errors
    ///
    /// A storage error of the implementation while shutting down.
    fn close(&self) -> Result<(), RemoteStorageError>;
}
