//! Plain result types of the log's public API.

use {
    krabka_ids::{LeaderEpoch, ProducerEpoch, ProducerId, TransactionVersion},
    std::path::PathBuf,
};

/// Result of an append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset of the first record appended (or of the original, if duplicate).
    pub first_offset: i64,
    /// Offset of the last record.
    pub last_offset: i64,
    /// The broker's timestamp when the log uses LogAppendTime.
    pub log_append_time: Option<i64>,
    /// The log start offset after the append.
    pub log_start_offset: i64,
    /// Whether this was a retry of a batch already in the log.
    pub duplicate: bool,
    /// Records appended (sum over batches).
    pub record_count: u32,
}

/// Result of a read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadInfo {
    /// Whole record batches, as stored.
    pub records: bytes::Bytes,
    /// The log start offset at the time of the read.
    pub log_start_offset: i64,
    /// The log end offset at the time of the read.
    pub log_end_offset: i64,
}

/// Result of a read answered as a file slice ([`crate::Log::read_slice`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceInfo {
    /// The batches [`crate::Log::read`] would have returned, left in their
    /// segment file; `None` when it would have returned none.
    pub records: Option<crate::FileSlice>,
    /// The log start offset at the time of the read.
    pub log_start_offset: i64,
    /// The log end offset at the time of the read.
    pub log_end_offset: i64,
}

/// An offset found by timestamp (ListOffsets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    /// Timestamp of the record.
    pub timestamp: i64,
    /// Its offset.
    pub offset: i64,
    /// Partition leader epoch of its batch.
    pub leader_epoch: LeaderEpoch,
}

/// An aborted transaction overlapping a fetch range (FetchResponse
/// `AbortedTransactions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    /// The producer whose records to drop.
    pub producer_id: ProducerId,
    /// First offset of the aborted transaction.
    pub first_offset: i64,
}

/// A transaction marker to write (WriteTxnMarkers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlMarker {
    /// The producer.
    pub producer_id: ProducerId,
    /// Its epoch.
    pub producer_epoch: ProducerEpoch,
    /// COMMIT (`true`) or ABORT (`false`).
    pub commit: bool,
    /// The transaction coordinator's epoch.
    pub coordinator_epoch: i32,
    /// The transaction's version: from version 2 the coordinator bumps the
    /// producer's epoch to end every transaction, so the marker's epoch must
    /// be above the one the producer wrote under (KIP-1228).
    pub transaction_version: TransactionVersion,
}

/// Description of one segment, for tiered storage and tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentInfo {
    /// Base offset.
    pub base_offset: i64,
    /// Offset after its last batch.
    pub end_offset: i64,
    /// Bytes in the `.log` file.
    pub size_bytes: u64,
    /// Largest timestamp (-1 if none).
    pub max_timestamp: i64,
    /// Whether it is the active (last) segment.
    pub active: bool,
    /// `.log` path.
    pub log_path: PathBuf,
    /// `.index` path.
    pub offset_index_path: PathBuf,
    /// `.timeindex` path.
    pub time_index_path: PathBuf,
    /// `.txnindex` path.
    pub txn_index_path: PathBuf,
}
