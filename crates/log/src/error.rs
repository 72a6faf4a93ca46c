//! The one error type of the crate, with the Kafka error code each refusal
//! maps to in a Produce / Fetch / ListOffsets answer.

use {
    krabka_ids::{ProducerEpoch, ProducerId},
    std::path::PathBuf,
};

/// Why a log operation was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// A batch failed its CRC-32C or framing checks (`CORRUPT_MESSAGE`).
    #[error("corrupt record batch: {reason}")]
    CorruptRecord {
        /// What was wrong.
        reason: String,
    },
    /// A batch is well framed but not acceptable (`INVALID_RECORD`).
    #[error("invalid record batch: {reason}")]
    InvalidRecord {
        /// What was wrong.
        reason: String,
    },
    /// Some records of a batch were refused, each named by its index in the
    /// batch (KIP-467): `INVALID_TIMESTAMP` when a timestamp was out of
    /// range, else `INVALID_RECORD`. The whole append is refused.
    #[error("{message}")]
    RecordErrors {
        /// A timestamp was out of range (`INVALID_TIMESTAMP`).
        invalid_timestamp: bool,
        /// Kafka's summary of the refusal.
        message: String,
        /// Every refused record.
        records: Vec<crate::validate::RecordError>,
    },
    /// A batch is larger than `max.message.bytes` (`MESSAGE_TOO_LARGE`).
    #[error("record batch of {size} bytes exceeds max.message.bytes {max}")]
    RecordTooLarge {
        /// Size of the batch.
        size: u64,
        /// The configured limit.
        max: u64,
    },
    /// Compressed records inflate past the bound they are read with
    /// (`krabka.decompressed.batch.max.bytes` for a client's batch), so
    /// they were not inflated (`MESSAGE_TOO_LARGE`, Kafka's
    /// `RecordTooLargeException`).
    #[error(
        "the {codec}-compressed records of the batch decompress to more than {limit} bytes (krabka.decompressed.batch.max.bytes)"
    )]
    DecompressedTooLarge {
        /// The batch's codec.
        codec: &'static str,
        /// The bound, in bytes.
        limit: usize,
    },
    /// The whole append is larger than a segment (`RECORD_LIST_TOO_LARGE`).
    #[error("append of {size} bytes exceeds segment.bytes {max}")]
    RecordListTooLarge {
        /// Size of the append.
        size: u64,
        /// The configured segment size.
        max: u64,
    },
    /// An offset outside `[log start, log end]` (`OFFSET_OUT_OF_RANGE`).
    #[error("offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        /// The offset asked for.
        offset: i64,
        /// The log start offset.
        log_start_offset: i64,
        /// The log end offset.
        log_end_offset: i64,
    },
    /// A sequence number gap or reordering (`OUT_OF_ORDER_SEQUENCE_NUMBER`).
    #[error(
        "out of order sequence for producer {producer_id}: expected {expected_sequence}, got {found_sequence}"
    )]
    OutOfOrderSequence {
        /// The producer.
        producer_id: ProducerId,
        /// The sequence the log expected next (-1 if unknown).
        expected_sequence: i32,
        /// The first sequence of the refused batch.
        found_sequence: i32,
    },
    /// A batch or marker from a fenced (older) producer epoch (`INVALID_PRODUCER_EPOCH`).
    #[error("producer {producer_id} epoch {found} is older than current epoch {current}")]
    InvalidProducerEpoch {
        /// The producer.
        producer_id: ProducerId,
        /// The epoch the log knows.
        current: ProducerEpoch,
        /// The epoch in the refused batch.
        found: ProducerEpoch,
    },
    /// A transactional state violation (`INVALID_TXN_STATE`).
    #[error("invalid transaction state for producer {producer_id}: {reason}")]
    InvalidTxnState {
        /// The producer.
        producer_id: ProducerId,
        /// What was wrong.
        reason: String,
    },
    /// The directory belongs to another topic (`INCONSISTENT_TOPIC_ID`).
    #[error("partition.metadata in {dir} holds topic id {found}, expected {expected}")]
    TopicIdMismatch {
        /// The partition directory.
        dir: PathBuf,
        /// The topic id the caller opened with.
        expected: uuid::Uuid,
        /// The topic id on disk.
        found: uuid::Uuid,
    },
    /// A log file could not be understood (`KAFKA_STORAGE_ERROR`).
    #[error("corrupt log file {path}: {reason}")]
    CorruptFile {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        reason: String,
    },
    /// The log was closed or deleted (`KAFKA_STORAGE_ERROR`).
    #[error("log {dir} is closed")]
    Closed {
        /// The partition directory.
        dir: PathBuf,
    },
    /// Recovery found a corrupt batch with valid data after it, and the log
    /// was opened with [`crate::recovery::CorruptionPolicy::Refuse`]: nothing
    /// was cut (`KAFKA_STORAGE_ERROR`).
    #[error(
        "log {dir} is corrupt: segment {segment} has an invalid batch at byte {position} (offset {offset}): {reason}; {records_after} records ({bytes_after} bytes) lie after it; nothing was removed"
    )]
    CorruptLog {
        /// The partition directory.
        dir: PathBuf,
        /// Base offset of the segment.
        segment: i64,
        /// Byte position of the invalid batch in the segment.
        position: u64,
        /// The offset the invalid batch should start at.
        offset: i64,
        /// What is wrong with it.
        reason: String,
        /// Records that recovery would remove (at least).
        records_after: u64,
        /// Bytes that recovery would remove.
        bytes_after: u64,
    },
    /// An I/O error on a log file (`KAFKA_STORAGE_ERROR`).
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl LogError {
    /// Kafka's error code for this refusal in a produce / fetch answer.
    #[must_use]
    pub fn kafka_error_code(&self) -> i16 {
        match self {
            Self::CorruptRecord { .. } => 2,
            Self::InvalidRecord { .. } => 87,
            Self::RecordErrors {
                invalid_timestamp, ..
            } => {
                if *invalid_timestamp {
                    32
                } else {
                    87
                }
            }
            Self::RecordTooLarge { .. } | Self::DecompressedTooLarge { .. } => 10,
            Self::RecordListTooLarge { .. } => 18,
            Self::OffsetOutOfRange { .. } => 1,
            Self::OutOfOrderSequence { .. } => 45,
            Self::InvalidProducerEpoch { .. } => 47,
            Self::InvalidTxnState { .. } => 48,
            Self::TopicIdMismatch { .. } => 103,
            Self::CorruptFile { .. }
            | Self::CorruptLog { .. }
            | Self::Closed { .. }
            | Self::Io { .. } => 56,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { path, source }
    }

    pub(crate) fn corrupt(reason: impl Into<String>) -> Self {
        Self::CorruptRecord {
            reason: reason.into(),
        }
    }

    pub(crate) fn invalid(reason: impl Into<String>) -> Self {
        Self::InvalidRecord {
            reason: reason.into(),
        }
    }
}
