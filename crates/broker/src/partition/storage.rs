//! [`PartitionStorage`]: the one seam between the request handlers and
//! wherever a partition's records live.
//!
//! A classic partition ([`Partition`](super::Partition)) keeps its records
//! in a local log and, when its topic is tiered, below the local log start
//! in a remote tier. A diskless partition (`diskless.enable=true`, see
//! DESIGN.md) will keep them as byte ranges of objects in object storage,
//! ordered by a batch coordinator. Fetch, ListOffsets, DeleteRecords,
//! DescribeLogDirs and DescribeProducers see neither: they call this trait,
//! and the partition answers for all of its storage — which store holds an
//! offset, both log-start offsets and the DeleteRecords floor, the high
//! watermark and last stable offset, its producer state.
//!
//! Two shapes make it fit both kinds and keep fetch cheap:
//!
//! * [`PartitionStorage::read`] is *blocking* and answers at once with
//!   what local storage holds ([`Read::Ready`]), or hands back a future for
//!   a slower store ([`Read::Later`]: the remote tier; for a diskless
//!   partition, the coordinator query and the object reads). A fetch reads
//!   all its partitions in one trip to the blocking pool and waits for the
//!   slow ones only until its deadline, so a slow store never holds up the
//!   partitions that were ready.
//! * [`PartitionStorage::changed`] is notified after every append and every
//!   move of the high watermark or last stable offset, so a parked fetch
//!   waits on the partitions it reads and nothing else.

use {
    bytes::Bytes,
    futures_util::future::BoxFuture,
    kafka_protocol::error::ResponseError,
    krabka_log::{AbortedTxn, FileSlice, LogError, ProducerSummary, TimestampOffset},
    tokio::sync::Notify,
};

pub use super::append_queue::Appended;

/// Which records a read may return (Fetch and ListOffsets `isolation_level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Up to the high watermark.
    ReadUncommitted,
    /// Up to the last stable offset, with the aborted transactions among them.
    ReadCommitted,
}

impl Isolation {
    /// Kafka's wire value: 1 is `READ_COMMITTED`, anything else uncommitted.
    #[must_use]
    pub fn from_wire(level: i8) -> Self {
        if level == 1 {
            Self::ReadCommitted
        } else {
            Self::ReadUncommitted
        }
    }
}

/// One read of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadRequest {
    /// The first offset wanted.
    pub offset: i64,
    /// Soft limit on the bytes returned.
    pub max_bytes: usize,
    /// Return one whole batch even if it exceeds `max_bytes` (KIP-74: the
    /// first partition of a fetch with data must make progress).
    pub min_one_batch: bool,
    /// Up to the high watermark or the last stable offset.
    pub isolation: Isolation,
    /// The caller can send file slices from the page cache (a plain TCP
    /// connection, a Fetch version that needs no conversion): a read from
    /// a local segment may then answer [`Records::File`]. Every other store
    /// ignores it and answers bytes.
    pub zero_copy: bool,
}

/// A partition's offsets at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offsets {
    /// The first offset a client may read, wherever it is stored.
    pub log_start: i64,
    /// The first offset on local disk (KIP-405 "earliest local").
    pub local_log_start: i64,
    /// The high watermark (the log end offset on a single node).
    pub high_watermark: i64,
    /// The last stable offset: the first offset of the earliest open
    /// transaction, else the high watermark.
    pub last_stable: i64,
    /// The next offset to be assigned.
    pub log_end: i64,
}

impl Offsets {
    /// The bound a read of `isolation` stops before.
    #[must_use]
    pub fn upper(&self, isolation: Isolation) -> i64 {
        match isolation {
            Isolation::ReadUncommitted => self.high_watermark,
            Isolation::ReadCommitted => self.last_stable,
        }
    }
}

/// Whole record batches, as stored: in memory, or left in a local
/// segment file for the connection to send with `sendfile`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Records {
    /// Read into memory.
    Bytes(Bytes),
    /// Where they lie in a local segment file (see
    /// [`ReadRequest::zero_copy`]).
    File(FileSlice),
}

impl Records {
    /// Their size on the wire.
    #[must_use]
    pub fn len(&self) -> usize {
        match self {
            Self::Bytes(b) => b.len(),
            Self::File(f) => usize::try_from(f.len()).unwrap_or(usize::MAX),
        }
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The memory they hold (nothing for a file slice).
    #[must_use]
    pub fn memory(&self) -> usize {
        match self {
            Self::Bytes(b) => b.len(),
            Self::File(_) => 0,
        }
    }

    /// The bytes, if they were read into memory.
    #[must_use]
    pub fn in_memory(&self) -> Option<&Bytes> {
        match self {
            Self::Bytes(b) => Some(b),
            Self::File(_) => None,
        }
    }
}

impl Default for Records {
    fn default() -> Self {
        Self::Bytes(Bytes::new())
    }
}

impl From<Bytes> for Records {
    fn from(bytes: Bytes) -> Self {
        Self::Bytes(bytes)
    }
}

/// What a read returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResult {
    /// Whole record batches, as stored.
    pub records: Records,
    /// For read_committed: the aborted transactions overlapping them.
    pub aborted: Option<Vec<AbortedTxn>>,
    /// The partition's offsets when it was read.
    pub offsets: Offsets,
}

/// A read's answer: now, or later from a slower store.
pub enum Read {
    /// Read from local storage.
    Ready(ReadResult),
    /// To be read from a slower store (remote tier, object storage): await
    /// it without holding up other partitions.
    Later(BoxFuture<'static, Result<ReadResult, StorageError>>),
}

impl std::fmt::Debug for Read {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Ready(r) => f.debug_tuple("Ready").field(r).finish(),
            Self::Later(_) => f.write_str("Later(..)"),
        }
    }
}

/// A ListOffsets question (Kafka's special timestamps, or a timestamp).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetQuery {
    /// -1: the high watermark (read_uncommitted) or last stable offset.
    Latest,
    /// -2: the log start offset.
    Earliest,
    /// -3: the first record carrying the largest timestamp.
    MaxTimestamp,
    /// -4: the first offset on local disk.
    EarliestLocal,
    /// -5: the highest offset copied to the remote tier.
    LatestTiered,
    /// -6: the first offset not yet copied to the remote tier (KIP-1023);
    /// none on a partition without one.
    EarliestPendingUpload,
    /// The first record whose timestamp is at least this one.
    AtOrAfter(i64),
}

/// Why a partition could not answer.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The local log refused or failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// The offset is below the log start or past the log end.
    #[error("offset {offset} is outside [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        /// The offset asked for.
        offset: i64,
        /// The partition's log start.
        log_start: i64,
        /// Its log end.
        log_end: i64,
    },
    /// The partition cannot name its log start yet (a tiered partition
    /// whose remote metadata is still loading): retriable.
    #[error("the remote log metadata is still loading")]
    Loading,
    /// A slower store failed or refused the read now: retriable.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// The blocking task running the call failed.
    #[error(transparent)]
    Task(#[from] crate::blocking::TaskFailed),
}

impl StorageError {
    /// Kafka's error code for this refusal.
    #[must_use]
    pub fn kafka_error_code(&self) -> i16 {
        match self {
            Self::Log(e) => e.kafka_error_code(),
            Self::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange.code(),
            Self::Loading => ResponseError::LeaderNotAvailable.code(),
            Self::Unavailable(_) => ResponseError::KafkaStorageError.code(),
            Self::Task(_) => ResponseError::UnknownServerError.code(),
        }
    }
}

/// The storage of one partition, whatever holds it (see the module docs).
///
/// Methods documented as blocking touch the disk or take the append lock:
/// call them through [`crate::blocking`].
#[async_trait::async_trait]
pub trait PartitionStorage: Send + Sync + std::fmt::Debug {
    /// The partition's offsets now (in memory, never blocks).
    fn offsets(&self) -> Offsets;

    /// Reads from `request.offset`: at once from local storage, or a
    /// future for a slower store. Blocking.
    ///
    /// # Errors
    ///
    /// [`StorageError::OffsetOutOfRange`] outside `[log start, log end]`,
    /// [`StorageError::Unavailable`] when the store cannot serve the offset
    /// now, [`StorageError::Log`] when the local log fails.
    fn read(&self, request: &ReadRequest) -> Result<Read, StorageError>;

    /// Queues a client's batches behind every append queued before; the
    /// receiver gets the answer. Must be called within a tokio runtime.
    fn append(&self, records: Bytes) -> Appended;

    /// Answers a ListOffsets question; `None` when nothing matches.
    ///
    /// # Errors
    ///
    /// [`StorageError::Loading`] while the log start is not known yet,
    /// [`StorageError::Unavailable`] when a slower store fails,
    /// [`StorageError::Log`] when the local log fails.
    async fn list_offset(
        &self,
        query: OffsetQuery,
        isolation: Isolation,
    ) -> Result<Option<TimestampOffset>, StorageError>;

    /// DeleteRecords: moves the log start to `offset` (-1: the high
    /// watermark), durably before answering; returns the new log start
    /// (the current one if `offset` is not past it).
    ///
    /// # Errors
    ///
    /// [`StorageError::OffsetOutOfRange`] past the high watermark,
    /// [`StorageError::Loading`] while the log start is not known yet,
    /// [`StorageError::Log`] if it cannot be persisted.
    async fn delete_records(&self, offset: i64) -> Result<i64, StorageError>;

    /// Bytes of the partition's records that DescribeLogDirs and the
    /// metrics report: a classic partition's on this broker's disk (local
    /// bytes, as Kafka reports), a diskless partition's live batches in
    /// object storage (as the batch coordinator last counted them).
    fn size_bytes(&self) -> u64;

    /// The producers the partition knows (DescribeProducers): the local
    /// log's producer state, or a diskless partition's in the batch
    /// coordinator.
    ///
    /// # Errors
    ///
    /// [`StorageError::Unavailable`] when the batch coordinator cannot
    /// answer, [`StorageError::Task`] when reading the log's state fails.
    async fn producers(&self) -> Result<Vec<ProducerSummary>, StorageError>;

    /// Notified after every append and every move of the high watermark or
    /// last stable offset.
    fn changed(&self) -> &Notify;
}
