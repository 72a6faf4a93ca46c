//! The values that cross the [`BatchCoordinator`](super::BatchCoordinator)
//! seam: what a broker commits, what it asks for, and what it gets back.
//!
//! Per-partition and per-batch refusals are values ([`PartitionError`],
//! [`BatchError`]) carrying Kafka's error codes, because a produce or fetch
//! answers each partition on its own; only a failure of the coordinator
//! itself (database down) is a [`RemoteStorageError`](crate::RemoteStorageError).

use {
    krabka_ids::{BrokerId, ProducerEpoch, ProducerId},
    serde::{Deserialize, Serialize},
    std::fmt,
    uuid::Uuid,
};

/// One partition of a diskless topic, named by topic id (names can be
/// reused after a deletion, ids cannot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DisklessPartition {
    /// The topic id.
    pub topic_id: Uuid,
    /// The partition index.
    pub partition: i32,
}

impl DisklessPartition {
    /// Partition `partition` of topic `topic_id`.
    #[must_use]
    pub fn new(topic_id: Uuid, partition: i32) -> Self {
        Self {
            topic_id,
            partition,
        }
    }
}

impl fmt::Display for DisklessPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}-{}",
            krabka_ids::kafka_uuid(self.topic_id),
            self.partition
        )
    }
}

/// The key of one object in the diskless store.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectKey(pub String);

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The idempotence fields of a batch from an idempotent producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerBatch {
    /// Producer id.
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
    /// Sequence number of the batch's first record.
    pub base_sequence: i32,
    /// Sequence number of its last record.
    pub last_sequence: i32,
}

/// What the coordinator remembers of one idempotent producer on one
/// partition, as DescribeProducers reports it. Diskless topics carry no
/// transactions, so there is no coordinator epoch or open transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerInfo {
    /// Producer id.
    pub producer_id: ProducerId,
    /// Its current epoch.
    pub producer_epoch: ProducerEpoch,
    /// Sequence number of the last record of its last batch.
    pub last_sequence: i32,
    /// The largest timestamp of its last batch (Kafka's `lastTimestamp`,
    /// which `producer.id.expiration.ms` goes by).
    pub last_timestamp: i64,
}

/// One batch of an object being committed, as the broker validated it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitBatch {
    /// Its partition.
    pub partition: DisklessPartition,
    /// Byte position of the batch in the object.
    pub position: u64,
    /// Size of the batch in bytes.
    pub size: u32,
    /// Number of offsets it takes (`lastOffsetDelta + 1`), at least 1.
    pub offset_count: u32,
    /// The batch's largest timestamp (on a `LogAppendTime` topic the
    /// broker stamps the batch before appending it, as Kafka does, and
    /// passes that time here).
    pub max_timestamp: i64,
    /// Idempotence fields, for batches of idempotent producers.
    pub producer: Option<ProducerBatch>,
}

/// An uploaded object and its batches, committed in one step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectCommit {
    /// Where the object is.
    pub key: ObjectKey,
    /// The broker that uploaded it.
    #[serde(with = "broker_id_as_i32")]
    pub uploader: BrokerId,
    /// Its total size in bytes (batches and footer).
    pub size: u64,
    /// Its batches, in object order.
    pub batches: Vec<CommitBatch>,
}

/// A batch the coordinator accepted (or recognised as a retry of one it
/// had accepted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Committed {
    /// The first offset assigned to the batch.
    pub base_offset: i64,
    /// The partition's log start offset after the commit.
    pub log_start_offset: i64,
    /// The batch repeats one committed earlier by the same producer
    /// (same epoch and sequences): these are that batch's offsets and
    /// nothing was added.
    pub duplicate: bool,
}

/// Why a batch of a commit was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// The partition is not a diskless partition the coordinator knows
    /// (never created, or deleted).
    #[error("unknown diskless partition")]
    UnknownTopicOrPartition,
    /// The producer's epoch is older than the one the partition has seen.
    #[error("producer epoch {epoch} is older than the current epoch {current}")]
    InvalidProducerEpoch {
        /// The batch's epoch.
        epoch: i16,
        /// The epoch the partition has.
        current: i16,
    },
    /// The batch's first sequence does not follow the producer's last.
    #[error("out of order sequence number {sequence}: expected {expected}")]
    OutOfOrderSequence {
        /// The batch's first sequence.
        sequence: i32,
        /// The sequence that would have been in order.
        expected: i32,
    },
}

impl BatchError {
    /// Kafka's error code for this refusal.
    #[must_use]
    pub fn kafka_code(&self) -> i16 {
        match self {
            Self::UnknownTopicOrPartition => 3,
            Self::InvalidProducerEpoch { .. } => 47,
            Self::OutOfOrderSequence { .. } => 45,
        }
    }
}

/// Why a partition-level request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PartitionError {
    /// The partition is not a diskless partition the coordinator knows.
    #[error("unknown diskless partition")]
    UnknownTopicOrPartition,
    /// The offset is below the log start or above the high watermark.
    #[error("offset {offset} is out of range [{log_start_offset}, {high_watermark}]")]
    OffsetOutOfRange {
        /// The offset asked for.
        offset: i64,
        /// The partition's log start offset.
        log_start_offset: i64,
        /// Its high watermark.
        high_watermark: i64,
    },
}

impl PartitionError {
    /// Kafka's error code for this refusal.
    #[must_use]
    pub fn kafka_code(&self) -> i16 {
        match self {
            Self::UnknownTopicOrPartition => 3,
            Self::OffsetOutOfRange { .. } => 1,
        }
    }
}

/// A fetch's question for one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FindBatches {
    /// The partition.
    pub partition: DisklessPartition,
    /// The offset to read from.
    pub offset: i64,
    /// Soft byte limit: batches are added while they fit, but the first
    /// batch is always returned (KIP-74).
    pub max_bytes: u32,
}

/// A committed batch and where its bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundBatch {
    /// The object holding it.
    pub object: ObjectKey,
    /// Byte position in the object.
    pub position: u64,
    /// Size in bytes.
    pub size: u32,
    /// First offset assigned to it.
    pub base_offset: i64,
    /// Last offset assigned to it.
    pub last_offset: i64,
    /// Its largest timestamp.
    pub max_timestamp: i64,
}

/// The offsets of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogInfo {
    /// The first offset still readable.
    pub log_start_offset: i64,
    /// The next offset to be assigned (every committed batch is visible).
    pub high_watermark: i64,
    /// Bytes of the partition's live batches.
    pub byte_size: u64,
    /// The first offset still held as batches: the offsets from the log
    /// start below it were consolidated into tiered segments
    /// ([`BatchCoordinator::consolidate`](super::BatchCoordinator::consolidate));
    /// equal to the log start while nothing was.
    pub batch_start_offset: i64,
}

/// The answer to a [`FindBatches`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundBatches {
    /// The batches from the one holding the requested offset on, in
    /// offset order (empty at the high watermark).
    pub batches: Vec<FoundBatch>,
    /// The partition's offsets at the time of the answer.
    pub info: LogInfo,
}

/// What ListOffsets asks of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetQuery {
    /// `-2`: the log start offset.
    Earliest,
    /// `-1`: the high watermark.
    Latest,
    /// `-3`: the batch holding the largest timestamp (the first, on a tie).
    MaxTimestamp,
    /// A timestamp: the first batch with a timestamp at or after it.
    Timestamp(i64),
}

/// One ListOffsets question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListOffsetsQuery {
    /// The partition.
    pub partition: DisklessPartition,
    /// What is asked.
    pub query: OffsetQuery,
}

/// The answer to a [`ListOffsetsQuery`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffsetAnswer {
    /// An offset (Earliest, Latest).
    Offset(i64),
    /// The batch that answers a timestamp question; the broker reads it to
    /// name the exact record (the coordinator knows batches, not records).
    Batch(FoundBatch),
    /// No batch matches.
    NotFound,
}

/// One DeleteRecords request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteRecords {
    /// The partition.
    pub partition: DisklessPartition,
    /// The new log start offset; `-1` means the high watermark.
    pub offset: i64,
}

/// One consolidation: the batches of `partition` in `[from, to)` were
/// copied into a tiered segment and can leave the coordinator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Consolidate {
    /// The partition.
    pub partition: DisklessPartition,
    /// The batch start the segment begins at.
    pub from: i64,
    /// One past the segment's last offset: a batch boundary.
    pub to: i64,
}

/// The answer to a [`Consolidate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Consolidated {
    /// The batches below `to` are gone; the batch start is `to`.
    Applied,
    /// Nothing changed: the batch start is not `from` any more (another
    /// broker consolidated first, or the log start moved past it), or `to`
    /// is not a batch boundary at or below the high watermark.
    Refused {
        /// The partition's batch start now.
        batch_start_offset: i64,
    },
}

/// A partition's retention settings, as the topic configures them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetentionPolicy {
    /// The partition.
    pub partition: DisklessPartition,
    /// `retention.ms`; negative means no time limit.
    pub retention_ms: i64,
    /// `retention.bytes`; negative means no size limit.
    pub retention_bytes: i64,
}

/// What a retention pass removed from one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetentionOutcome {
    /// Batches removed.
    pub batches_deleted: u64,
    /// Their bytes.
    pub bytes_deleted: u64,
    /// The log start offset after the pass.
    pub log_start_offset: i64,
}

/// Broker ids in the embedded store's journal, as Kafka's integer.
mod broker_id_as_i32 {
    use {
        krabka_ids::BrokerId,
        serde::{Deserialize, Deserializer, Serializer},
    };

    pub(super) fn serialize<S: Serializer>(id: &BrokerId, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i32(id.0)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BrokerId, D::Error> {
        i32::deserialize(d).map(BrokerId)
    }
}
