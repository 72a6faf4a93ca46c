//! The data model exchanged through the two SPIs.
//!
//! These types mirror Kafka's `storage-api` classes field for field
//! (`TopicIdPartition`, `RemoteLogSegmentId`, `RemoteLogSegmentMetadata`,
//! `RemoteLogSegmentMetadataUpdate`, `RemotePartitionDeleteMetadata`,
//! `CustomMetadata` and the two state enums), with Kafka's widths and byte ids,
//! so the `__remote_log_metadata` codec can be written from them byte for byte.
//! Constructors that can be handed nonsense validate and return an error; the
//! fields are private so a value that exists is a valid one.
//!
//! `RemoteLogSegmentMetadata::new` takes its size, state, leader-epoch map,
//! custom metadata and transaction-index flag as one
//! [`RemoteLogSegmentDetails`] value, which keeps the constructor readable
//! where Kafka's has eleven positional parameters.

use {
    crate::error::RemoteStorageError,
    bytes::Bytes,
    krabka_ids::{BrokerId, LeaderEpoch, kafka_uuid},
    std::{collections::BTreeMap, fmt},
    uuid::Uuid,
};

/// A topic partition together with its topic id (Kafka's `TopicIdPartition`).
///
/// The topic id tells apart two incarnations of a topic with the same name, so
/// everything in the remote tier is keyed by it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicIdPartition {
    topic_id: Uuid,
    topic: String,
    partition: i32,
}

impl TopicIdPartition {
    /// A topic partition with its topic id.
    pub fn new(topic_id: Uuid, topic: impl Into<String>, partition: i32) -> Self {
        Self {
            topic_id,
            topic: topic.into(),
            partition,
        }
    }

    /// The topic id.
    #[must_use]
    pub fn topic_id(&self) -> Uuid {
        self.topic_id
    }

    /// The topic name.
    #[must_use]
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The partition index.
    #[must_use]
    pub fn partition(&self) -> i32 {
        self.partition
    }
}

impl fmt::Display for TopicIdPartition {
    /// Kafka's form: `<topic id>:<topic>-<partition>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}-{}",
            kafka_uuid(self.topic_id),
            self.topic,
            self.partition
        )
    }
}

/// The unique id of one remote log segment (Kafka's `RemoteLogSegmentId`): the
/// partition it belongs to and a random UUID minted for each copy attempt.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RemoteLogSegmentId {
    topic_id_partition: TopicIdPartition,
    id: Uuid,
}

impl RemoteLogSegmentId {
    /// The segment id `id` within `topic_id_partition`.
    #[must_use]
    pub fn new(topic_id_partition: TopicIdPartition, id: Uuid) -> Self {
        Self {
            topic_id_partition,
            id,
        }
    }

    /// A fresh random segment id for `topic_id_partition` (Kafka's
    /// `RemoteLogSegmentId.generateNew`).
    #[must_use]
    pub fn generate_new(topic_id_partition: TopicIdPartition) -> Self {
        Self::new(topic_id_partition, Uuid::new_v4())
    }

    /// The partition this segment belongs to.
    #[must_use]
    pub fn topic_id_partition(&self) -> &TopicIdPartition {
        &self.topic_id_partition
    }

    /// The segment's own UUID.
    #[must_use]
    pub fn id(&self) -> Uuid {
        self.id
    }
}

impl fmt::Display for RemoteLogSegmentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.topic_id_partition, kafka_uuid(self.id))
    }
}

/// Opaque bytes a [`RemoteStorageManager`](crate::RemoteStorageManager)
/// returns from a copy and gets back on every later call for that segment
/// (Kafka's `RemoteLogSegmentMetadata.CustomMetadata`). The broker bounds
/// their size with `remote.log.metadata.custom.metadata.max.bytes`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CustomMetadata(Bytes);

impl CustomMetadata {
    /// Wraps the plugin's bytes.
    pub fn new(value: impl Into<Bytes>) -> Self {
        Self(value.into())
    }

    /// The bytes.
    #[must_use]
    pub fn value(&self) -> &[u8] {
        &self.0
    }

    /// The bytes, as a cheaply clonable buffer.
    #[must_use]
    pub fn bytes(&self) -> &Bytes {
        &self.0
    }
}

/// Where a remote segment is in its lifecycle (Kafka's
/// `RemoteLogSegmentState`, with Kafka's byte ids).
///
/// ```text
/// COPY_SEGMENT_STARTED ──► COPY_SEGMENT_FINISHED
///          │                        │
///          └──────► DELETE_SEGMENT_STARTED ◄┘
///                           │
///                           ▼
///                  DELETE_SEGMENT_FINISHED
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RemoteLogSegmentState {
    /// The copy to the remote tier has started and not finished; the segment
    /// is not readable yet.
    CopySegmentStarted,
    /// The copy finished; the segment serves fetches.
    CopySegmentFinished,
    /// Deletion started (retention, or an abandoned copy); no longer served.
    DeleteSegmentStarted,
    /// The data is gone; the metadata manager forgets the segment.
    DeleteSegmentFinished,
}

impl RemoteLogSegmentState {
    /// Every state, in id order.
    pub const ALL: [Self; 4] = [
        Self::CopySegmentStarted,
        Self::CopySegmentFinished,
        Self::DeleteSegmentStarted,
        Self::DeleteSegmentFinished,
    ];

    /// Kafka's byte id (`0..=3`), as written by `RemoteLogMetadataSerde`.
    #[must_use]
    pub fn id(self) -> i8 {
        match self {
            Self::CopySegmentStarted => 0,
            Self::CopySegmentFinished => 1,
            Self::DeleteSegmentStarted => 2,
            Self::DeleteSegmentFinished => 3,
        }
    }

    /// The state with Kafka's byte id `id`, or `None` for an unknown id.
    #[must_use]
    pub fn from_id(id: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.id() == id)
    }

    /// Kafka's enum constant name, e.g. `COPY_SEGMENT_STARTED`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::CopySegmentStarted => "COPY_SEGMENT_STARTED",
            Self::CopySegmentFinished => "COPY_SEGMENT_FINISHED",
            Self::DeleteSegmentStarted => "DELETE_SEGMENT_STARTED",
            Self::DeleteSegmentFinished => "DELETE_SEGMENT_FINISHED",
        }
    }

    /// Whether a segment may move from `from` (`None`: not known yet) to `to`.
    ///
    /// Only `COPY_SEGMENT_STARTED` creates a segment; the edges are the ones
    /// drawn on the type. Unlike Kafka, a self-transition (the same state
    /// applied twice) is refused: Krabka's lifecycle is strict, so a retried
    /// update is visible to the caller instead of being silently re-applied.
    #[must_use]
    pub fn is_valid_transition(from: Option<Self>, to: Self) -> bool {
        use RemoteLogSegmentState::*;
        matches!(
            (from, to),
            (None, CopySegmentStarted)
                | (
                    Some(CopySegmentStarted),
                    CopySegmentFinished | DeleteSegmentStarted
                )
                | (Some(CopySegmentFinished), DeleteSegmentStarted)
                | (Some(DeleteSegmentStarted), DeleteSegmentFinished)
        )
    }
}

impl fmt::Display for RemoteLogSegmentState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a partition's remote deletion is (Kafka's
/// `RemotePartitionDeleteState`, with Kafka's byte ids):
/// `DELETE_PARTITION_MARKED` → `DELETE_PARTITION_STARTED` →
/// `DELETE_PARTITION_FINISHED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RemotePartitionDeleteState {
    /// The controller marked the partition for deletion.
    DeletePartitionMarked,
    /// A remover started deleting its remote segments.
    DeletePartitionStarted,
    /// Every remote segment of the partition is deleted.
    DeletePartitionFinished,
}

impl RemotePartitionDeleteState {
    /// Every state, in id order.
    pub const ALL: [Self; 3] = [
        Self::DeletePartitionMarked,
        Self::DeletePartitionStarted,
        Self::DeletePartitionFinished,
    ];

    /// Kafka's byte id (`0..=2`).
    #[must_use]
    pub fn id(self) -> i8 {
        match self {
            Self::DeletePartitionMarked => 0,
            Self::DeletePartitionStarted => 1,
            Self::DeletePartitionFinished => 2,
        }
    }

    /// The state with Kafka's byte id `id`, or `None` for an unknown id.
    #[must_use]
    pub fn from_id(id: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.id() == id)
    }

    /// Kafka's enum constant name, e.g. `DELETE_PARTITION_MARKED`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::DeletePartitionMarked => "DELETE_PARTITION_MARKED",
            Self::DeletePartitionStarted => "DELETE_PARTITION_STARTED",
            Self::DeletePartitionFinished => "DELETE_PARTITION_FINISHED",
        }
    }

    /// Whether a partition's delete state may move from `from` (`None`: no
    /// delete recorded) to `to`. Strict like
    /// [`RemoteLogSegmentState::is_valid_transition`]: self-transitions are
    /// refused.
    #[must_use]
    pub fn is_valid_transition(from: Option<Self>, to: Self) -> bool {
        use RemotePartitionDeleteState::*;
        matches!(
            (from, to),
            (None, DeletePartitionMarked)
                | (Some(DeletePartitionMarked), DeletePartitionStarted)
                | (Some(DeletePartitionStarted), DeletePartitionFinished)
        )
    }
}

impl fmt::Display for RemotePartitionDeleteState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The size, state, leader epochs and plugin data of a remote segment: the
/// part of [`RemoteLogSegmentMetadata`] beyond its identity and offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteLogSegmentDetails {
    segment_size_in_bytes: i32,
    state: RemoteLogSegmentState,
    segment_leader_epochs: BTreeMap<LeaderEpoch, i64>,
    custom_metadata: Option<CustomMetadata>,
    txn_idx_empty: bool,
}

impl RemoteLogSegmentDetails {
    /// Details with no custom metadata and the transaction index not marked
    /// empty (Kafka's defaults). `segment_leader_epochs` maps each leader
    /// epoch that wrote records in the segment to its first offset there.
    #[must_use]
    pub fn new(
        segment_size_in_bytes: i32,
        state: RemoteLogSegmentState,
        segment_leader_epochs: BTreeMap<LeaderEpoch, i64>,
    ) -> Self {
        Self {
            segment_size_in_bytes,
            state,
            segment_leader_epochs,
            custom_metadata: None,
            txn_idx_empty: false,
        }
    }

    /// These details with `custom_metadata` attached.
    #[must_use]
    pub fn with_custom_metadata(mut self, custom_metadata: Option<CustomMetadata>) -> Self {
        self.custom_metadata = custom_metadata;
        self
    }

    /// These details with the transaction-index-empty flag set to `empty`
    /// (KIP-1058: lets readers skip fetching an empty `.txnindex`).
    #[must_use]
    pub fn with_txn_idx_empty(mut self, empty: bool) -> Self {
        self.txn_idx_empty = empty;
        self
    }

    /// Size of the segment's `.log` in bytes.
    #[must_use]
    pub fn segment_size_in_bytes(&self) -> i32 {
        self.segment_size_in_bytes
    }

    /// The lifecycle state.
    #[must_use]
    pub fn state(&self) -> RemoteLogSegmentState {
        self.state
    }

    /// Leader epoch → first offset of that epoch within the segment.
    #[must_use]
    pub fn segment_leader_epochs(&self) -> &BTreeMap<LeaderEpoch, i64> {
        &self.segment_leader_epochs
    }

    /// The plugin's custom metadata, if any.
    #[must_use]
    pub fn custom_metadata(&self) -> Option<&CustomMetadata> {
        self.custom_metadata.as_ref()
    }

    /// Whether the segment's transaction index is known to be empty.
    #[must_use]
    pub fn is_txn_idx_empty(&self) -> bool {
        self.txn_idx_empty
    }
}

/// Everything known about one remote log segment (Kafka's
/// `RemoteLogSegmentMetadata`).
///
/// A new segment starts in `COPY_SEGMENT_STARTED`; its state changes by
/// applying a [`RemoteLogSegmentMetadataUpdate`]
/// ([`create_with_updates`](Self::create_with_updates)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteLogSegmentMetadata {
    remote_log_segment_id: RemoteLogSegmentId,
    start_offset: i64,
    end_offset: i64,
    max_timestamp_ms: i64,
    broker_id: BrokerId,
    event_timestamp_ms: i64,
    details: RemoteLogSegmentDetails,
}

impl RemoteLogSegmentMetadata {
    /// Metadata of the segment `remote_log_segment_id`, covering offsets
    /// `start_offset..=end_offset`, whose latest record timestamp is
    /// `max_timestamp_ms`, as recorded by broker `broker_id` at
    /// `event_timestamp_ms`.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::InvalidMetadata`] unless: `0 <= start_offset <=
    /// end_offset`; the segment size is not negative; the leader-epoch map is
    /// not empty, has no negative epoch, its start offsets do not decrease as
    /// the epochs ascend, and every one lies within
    /// `start_offset..=end_offset`.
    pub fn new(
        remote_log_segment_id: RemoteLogSegmentId,
        start_offset: i64,
        end_offset: i64,
        max_timestamp_ms: i64,
        broker_id: i32,
        event_timestamp_ms: i64,
        details: RemoteLogSegmentDetails,
    ) -> Result<Self, RemoteStorageError> {
        if start_offset < 0 {
            return Err(RemoteStorageError::invalid_metadata(format!(
                "start offset {start_offset} is negative"
            )));
        }
        if end_offset < start_offset {
            return Err(RemoteStorageError::invalid_metadata(format!(
                "end offset {end_offset} is before start offset {start_offset}"
            )));
        }
        if details.segment_size_in_bytes < 0 {
            return Err(RemoteStorageError::invalid_metadata(format!(
                "segment size {} is negative",
                details.segment_size_in_bytes
            )));
        }
        if details.segment_leader_epochs.is_empty() {
            return Err(RemoteStorageError::invalid_metadata(
                "segment leader epochs are empty",
            ));
        }
        let mut previous: Option<(LeaderEpoch, i64)> = None;
        for (&epoch, &offset) in &details.segment_leader_epochs {
            if epoch.0 < 0 {
                return Err(RemoteStorageError::invalid_metadata(format!(
                    "leader epoch {epoch} is negative"
                )));
            }
            if !(start_offset..=end_offset).contains(&offset) {
                return Err(RemoteStorageError::invalid_metadata(format!(
                    "leader epoch {epoch} starts at offset {offset}, outside the segment \
                     {start_offset}..={end_offset}"
                )));
            }
            if let Some((previous_epoch, previous_offset)) = previous
                && offset < previous_offset
            {
                return Err(RemoteStorageError::invalid_metadata(format!(
                    "leader epoch {epoch} starts at offset {offset}, before epoch \
                     {previous_epoch} at {previous_offset}"
                )));
            }
            previous = Some((epoch, offset));
        }
        Ok(Self {
            remote_log_segment_id,
            start_offset,
            end_offset,
            max_timestamp_ms,
            broker_id: BrokerId(broker_id),
            event_timestamp_ms,
            details,
        })
    }

    /// The segment's unique id.
    #[must_use]
    pub fn remote_log_segment_id(&self) -> &RemoteLogSegmentId {
        &self.remote_log_segment_id
    }

    /// The partition the segment belongs to.
    #[must_use]
    pub fn topic_id_partition(&self) -> &TopicIdPartition {
        self.remote_log_segment_id.topic_id_partition()
    }

    /// First offset in the segment (inclusive).
    #[must_use]
    pub fn start_offset(&self) -> i64 {
        self.start_offset
    }

    /// Last offset in the segment (inclusive).
    #[must_use]
    pub fn end_offset(&self) -> i64 {
        self.end_offset
    }

    /// Largest record timestamp in the segment, in milliseconds.
    #[must_use]
    pub fn max_timestamp_ms(&self) -> i64 {
        self.max_timestamp_ms
    }

    /// The broker that produced this metadata event.
    #[must_use]
    pub fn broker_id(&self) -> BrokerId {
        self.broker_id
    }

    /// When this metadata event happened, in milliseconds since the epoch.
    #[must_use]
    pub fn event_timestamp_ms(&self) -> i64 {
        self.event_timestamp_ms
    }

    /// Size of the segment's `.log` in bytes.
    #[must_use]
    pub fn segment_size_in_bytes(&self) -> i32 {
        self.details.segment_size_in_bytes
    }

    /// The lifecycle state.
    #[must_use]
    pub fn state(&self) -> RemoteLogSegmentState {
        self.details.state
    }

    /// Leader epoch → first offset of that epoch within the segment.
    #[must_use]
    pub fn segment_leader_epochs(&self) -> &BTreeMap<LeaderEpoch, i64> {
        &self.details.segment_leader_epochs
    }

    /// The plugin's custom metadata, if any.
    #[must_use]
    pub fn custom_metadata(&self) -> Option<&CustomMetadata> {
        self.details.custom_metadata.as_ref()
    }

    /// Whether the segment's transaction index is known to be empty.
    #[must_use]
    pub fn is_txn_idx_empty(&self) -> bool {
        self.details.txn_idx_empty
    }

    /// Size, state, epochs and plugin data together.
    #[must_use]
    pub fn details(&self) -> &RemoteLogSegmentDetails {
        &self.details
    }

    /// The last offset that `leader_epoch` wrote in this segment: one before
    /// the next epoch's start, or the segment's end offset. `None` if the
    /// epoch does not occur in the segment.
    #[must_use]
    pub fn epoch_end_offset(&self, leader_epoch: LeaderEpoch) -> Option<i64> {
        use std::ops::Bound::{Excluded, Unbounded};
        let epochs = &self.details.segment_leader_epochs;
        epochs.get(&leader_epoch)?;
        Some(
            epochs
                .range((Excluded(leader_epoch), Unbounded))
                .next()
                .map_or(self.end_offset, |(_, &next_start)| next_start - 1),
        )
    }

    /// A copy of this metadata with `update` applied: its state, custom
    /// metadata, broker id and event time replace these (Kafka's
    /// `createWithUpdates`). Whether the transition is legal is the metadata
    /// manager's business, not checked here.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::InvalidMetadata`] if `update` is for another
    /// segment.
    pub fn create_with_updates(
        &self,
        update: &RemoteLogSegmentMetadataUpdate,
    ) -> Result<Self, RemoteStorageError> {
        if update.remote_log_segment_id != self.remote_log_segment_id {
            return Err(RemoteStorageError::invalid_metadata(format!(
                "update for {} applied to {}",
                update.remote_log_segment_id, self.remote_log_segment_id
            )));
        }
        let mut updated = self.clone();
        updated.broker_id = update.broker_id;
        updated.event_timestamp_ms = update.event_timestamp_ms;
        updated.details.state = update.state;
        updated.details.custom_metadata = update.custom_metadata.clone();
        Ok(updated)
    }
}

/// A change of a remote segment's state (Kafka's
/// `RemoteLogSegmentMetadataUpdate`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteLogSegmentMetadataUpdate {
    remote_log_segment_id: RemoteLogSegmentId,
    event_timestamp_ms: i64,
    custom_metadata: Option<CustomMetadata>,
    state: RemoteLogSegmentState,
    broker_id: BrokerId,
}

impl RemoteLogSegmentMetadataUpdate {
    /// The segment `remote_log_segment_id` moves to `state` at
    /// `event_timestamp_ms`, as recorded by broker `broker_id`, carrying the
    /// plugin's `custom_metadata` (argument order as in Kafka).
    #[must_use]
    pub fn new(
        remote_log_segment_id: RemoteLogSegmentId,
        event_timestamp_ms: i64,
        custom_metadata: Option<CustomMetadata>,
        state: RemoteLogSegmentState,
        broker_id: i32,
    ) -> Self {
        Self {
            remote_log_segment_id,
            event_timestamp_ms,
            custom_metadata,
            state,
            broker_id: BrokerId(broker_id),
        }
    }

    /// The segment being updated.
    #[must_use]
    pub fn remote_log_segment_id(&self) -> &RemoteLogSegmentId {
        &self.remote_log_segment_id
    }

    /// The partition of the segment.
    #[must_use]
    pub fn topic_id_partition(&self) -> &TopicIdPartition {
        self.remote_log_segment_id.topic_id_partition()
    }

    /// When the change happened, in milliseconds since the epoch.
    #[must_use]
    pub fn event_timestamp_ms(&self) -> i64 {
        self.event_timestamp_ms
    }

    /// The plugin's custom metadata, if any.
    #[must_use]
    pub fn custom_metadata(&self) -> Option<&CustomMetadata> {
        self.custom_metadata.as_ref()
    }

    /// The new state.
    #[must_use]
    pub fn state(&self) -> RemoteLogSegmentState {
        self.state
    }

    /// The broker that produced this event.
    #[must_use]
    pub fn broker_id(&self) -> BrokerId {
        self.broker_id
    }
}

/// A change of a partition's remote-delete state (Kafka's
/// `RemotePartitionDeleteMetadata`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemotePartitionDeleteMetadata {
    topic_id_partition: TopicIdPartition,
    state: RemotePartitionDeleteState,
    event_timestamp_ms: i64,
    broker_id: BrokerId,
}

impl RemotePartitionDeleteMetadata {
    /// `topic_id_partition` moves to `state` at `event_timestamp_ms`, as
    /// recorded by broker `broker_id` (argument order as in Kafka).
    #[must_use]
    pub fn new(
        topic_id_partition: TopicIdPartition,
        state: RemotePartitionDeleteState,
        event_timestamp_ms: i64,
        broker_id: i32,
    ) -> Self {
        Self {
            topic_id_partition,
            state,
            event_timestamp_ms,
            broker_id: BrokerId(broker_id),
        }
    }

    /// The partition.
    #[must_use]
    pub fn topic_id_partition(&self) -> &TopicIdPartition {
        &self.topic_id_partition
    }

    /// The new delete state.
    #[must_use]
    pub fn state(&self) -> RemotePartitionDeleteState {
        self.state
    }

    /// When the change happened, in milliseconds since the epoch.
    #[must_use]
    pub fn event_timestamp_ms(&self) -> i64 {
        self.event_timestamp_ms
    }

    /// The broker that produced this event.
    #[must_use]
    pub fn broker_id(&self) -> BrokerId {
        self.broker_id
    }
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        crate::test_support::{partition, segment},
        assert2::check,
    };

    fn details(epochs: &[(i32, i64)]) -> RemoteLogSegmentDetails {
        RemoteLogSegmentDetails::new(
            100,
            RemoteLogSegmentState::CopySegmentStarted,
            epochs.iter().map(|&(e, o)| (LeaderEpoch(e), o)).collect(),
        )
    }

    fn build(
        start: i64,
        end: i64,
        details: RemoteLogSegmentDetails,
    ) -> Result<RemoteLogSegmentMetadata, RemoteStorageError> {
        RemoteLogSegmentMetadata::new(
            RemoteLogSegmentId::generate_new(partition()),
            start,
            end,
            5,
            1,
            6,
            details,
        )
    }

    #[test]
    fn valid_metadata_keeps_every_field() {
        let custom = CustomMetadata::new(vec![1, 2, 3]);
        let metadata = build(
            10,
            99,
            details(&[(0, 10), (3, 50)])
                .with_custom_metadata(Some(custom.clone()))
                .with_txn_idx_empty(true),
        )
        .unwrap();
        check!(metadata.start_offset() == 10);
        check!(metadata.end_offset() == 99);
        check!(metadata.max_timestamp_ms() == 5);
        check!(metadata.broker_id() == BrokerId(1));
        check!(metadata.event_timestamp_ms() == 6);
        check!(metadata.segment_size_in_bytes() == 100);
        check!(metadata.custom_metadata() == Some(&custom));
        check!(metadata.is_txn_idx_empty());
        check!(metadata.epoch_end_offset(LeaderEpoch(0)) == Some(49));
        check!(metadata.epoch_end_offset(LeaderEpoch(3)) == Some(99));
        check!(metadata.epoch_end_offset(LeaderEpoch(1)) == None);
    }

    #[test]
    fn invalid_metadata_is_refused() {
        let cases = [
            build(-1, 5, details(&[(0, 0)])),
            build(6, 5, details(&[(0, 6)])),
            build(0, 5, details(&[])),
            build(0, 5, details(&[(0, 6)])),
            build(2, 5, details(&[(0, 1)])),
            build(0, 5, details(&[(0, 3), (1, 2)])),
            build(0, 5, details(&[(-1, 0)])),
            build(
                0,
                5,
                RemoteLogSegmentDetails::new(
                    -1,
                    RemoteLogSegmentState::CopySegmentStarted,
                    [(LeaderEpoch(0), 0)].into(),
                ),
            ),
        ];
        for (n, case) in cases.into_iter().enumerate() {
            assert2::assert!(let
                Err(RemoteStorageError::InvalidMetadata { .. }) = case,
                "case {n}"
            );
        }
    }

    #[test]
    fn updates_apply_to_their_own_segment_only() {
        let metadata = segment(0, 9);
        let update = RemoteLogSegmentMetadataUpdate::new(
            metadata.remote_log_segment_id().clone(),
            77,
            Some(CustomMetadata::new(vec![9])),
            RemoteLogSegmentState::CopySegmentFinished,
            4,
        );
        let updated = metadata.create_with_updates(&update).unwrap();
        check!(updated.state() == RemoteLogSegmentState::CopySegmentFinished);
        check!(updated.event_timestamp_ms() == 77);
        check!(updated.broker_id() == BrokerId(4));
        check!(updated.custom_metadata().map(CustomMetadata::value) == Some(&[9u8][..]));
        check!(updated.start_offset() == metadata.start_offset());

        let other = segment(0, 9);
        assert2::assert!(let
            Err(RemoteStorageError::InvalidMetadata { .. }) = other.create_with_updates(&update)
        );
    }

    #[test]
    fn state_ids_are_kafkas() {
        let ids: Vec<i8> = RemoteLogSegmentState::ALL.iter().map(|s| s.id()).collect();
        check!(ids == [0, 1, 2, 3]);
        let ids: Vec<i8> = RemotePartitionDeleteState::ALL
            .iter()
            .map(|s| s.id())
            .collect();
        check!(ids == [0, 1, 2]);
        for state in RemoteLogSegmentState::ALL {
            check!(RemoteLogSegmentState::from_id(state.id()) == Some(state));
        }
        for state in RemotePartitionDeleteState::ALL {
            check!(RemotePartitionDeleteState::from_id(state.id()) == Some(state));
        }
        check!(RemoteLogSegmentState::from_id(4) == None);
        check!(RemoteLogSegmentState::from_id(-1) == None);
        check!(RemotePartitionDeleteState::from_id(3) == None);
    }

    #[test]
    fn segment_transitions_against_the_full_table() {
        use RemoteLogSegmentState::*;
        let legal = [
            (None, CopySegmentStarted),
            (Some(CopySegmentStarted), CopySegmentFinished),
            (Some(CopySegmentStarted), DeleteSegmentStarted),
            (Some(CopySegmentFinished), DeleteSegmentStarted),
            (Some(DeleteSegmentStarted), DeleteSegmentFinished),
        ];
        let froms = std::iter::once(None).chain(RemoteLogSegmentState::ALL.map(Some));
        let mut seen = 0;
        for from in froms {
            for to in RemoteLogSegmentState::ALL {
                let expected = legal.contains(&(from, to));
                check!(
                    RemoteLogSegmentState::is_valid_transition(from, to) == expected,
                    "{from:?} -> {to:?}"
                );
                seen += 1;
            }
        }
        check!(seen == 20);
    }

    #[test]
    fn partition_delete_transitions_against_the_full_table() {
        use RemotePartitionDeleteState::*;
        let legal = [
            (None, DeletePartitionMarked),
            (Some(DeletePartitionMarked), DeletePartitionStarted),
            (Some(DeletePartitionStarted), DeletePartitionFinished),
        ];
        let froms = std::iter::once(None).chain(RemotePartitionDeleteState::ALL.map(Some));
        for from in froms {
            for to in RemotePartitionDeleteState::ALL {
                let expected = legal.contains(&(from, to));
                check!(
                    RemotePartitionDeleteState::is_valid_transition(from, to) == expected,
                    "{from:?} -> {to:?}"
                );
            }
        }
    }

    #[test]
    fn display_forms() {
        check!(partition().to_string() == "AAAAAAAAAAAAAAAAAAAAyg:orders-7");
        check!(RemoteLogSegmentState::DeleteSegmentStarted.to_string() == "DELETE_SEGMENT_STARTED");
        check!(
            RemotePartitionDeleteState::DeletePartitionMarked.to_string()
                == "DELETE_PARTITION_MARKED"
        );
    }
}
