//! Decoders and lookups for Kafka's segment index files.
//!
//! A remote reader has the segment's indexes (fetched once, cached by
//! [`RemoteIndexCache`](crate::RemoteIndexCache)) and fetches only the byte
//! range of the `.log` it needs. These functions turn index bytes into typed
//! entries and answer the questions the fetch path asks: where does the batch
//! holding offset `o` start, where does a read have to stop, which
//! transactions were aborted in a range, which offset a timestamp maps to.
//!
//! The formats are Kafka's (and `krabka-log`'s):
//!
//! - `.index`: 8-byte entries, offset relative to the segment's base (u32 BE)
//!   and byte position in the `.log` (u32 BE);
//! - `.timeindex`: 12-byte entries, timestamp (i64 BE) and relative offset
//!   (u32 BE);
//! - `.txnindex`: 34-byte entries, version (i16), producer id, first offset,
//!   last offset and last stable offset (i64 each, BE).
//!
//! Offset and time indexes are preallocated and may end in zero-filled
//! entries; like Kafka, a decoder stops at the first entry after the first
//! that does not move forward.

use {
    crate::{error::RemoteStorageError, storage_manager::IndexType},
    bytes::Bytes,
    kafka_protocol::records::{Compression, Record, RecordBatchDecoder},
    krabka_ids::{LeaderEpoch, ProducerId},
    std::fmt,
};

/// An absolute log offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct LogOffset(pub i64);

/// An offset relative to a segment's base offset, as the indexes store it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct RelativeOffset(pub u32);

/// A byte position within a segment's `.log`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct BytePosition(pub u32);

/// A record timestamp in milliseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TimestampMs(pub i64);

macro_rules! display_inner {
    ($($ty:ty),*) => {$(
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    )*};
}
display_inner!(LogOffset, RelativeOffset, BytePosition, TimestampMs);

/// One `.index` entry. Kafka indexes a batch by its *last* offset: the batch
/// that starts at `position` ends with `relative_offset`, so a read for any
/// later offset can start scanning batch headers there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetIndexEntry {
    /// Offset relative to the segment base.
    pub relative_offset: RelativeOffset,
    /// Byte position of the batch in the `.log`.
    pub position: BytePosition,
}

/// One `.timeindex` entry: the records up to `relative_offset` have
/// timestamps up to `timestamp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeIndexEntry {
    /// Largest timestamp seen so far in the segment.
    pub timestamp: TimestampMs,
    /// Offset (relative to the segment base) of the record with it.
    pub relative_offset: RelativeOffset,
}

/// One `.txnindex` entry: an aborted transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxnIndexEntry {
    /// Entry format version (Kafka writes 0).
    pub version: i16,
    /// The producer whose transaction was aborted.
    pub producer_id: ProducerId,
    /// First offset of the transaction.
    pub first_offset: LogOffset,
    /// Offset of the abort marker.
    pub last_offset: LogOffset,
    /// Last stable offset when the abort was written.
    pub last_stable_offset: LogOffset,
}

impl LogOffset {
    /// This offset relative to a segment's `base` offset, if it fits the
    /// index's 32 bits (it does for every offset inside the segment).
    #[must_use]
    pub fn relative_to(self, base: LogOffset) -> Option<RelativeOffset> {
        self.0
            .checked_sub(base.0)
            .and_then(|delta| u32::try_from(delta).ok())
            .map(RelativeOffset)
    }
}

impl RelativeOffset {
    /// The absolute offset, for a segment starting at `base`.
    #[must_use]
    pub fn absolute(self, base: LogOffset) -> LogOffset {
        LogOffset(base.0.saturating_add(i64::from(self.0)))
    }
}

const OFFSET_ENTRY_SIZE: usize = 8;
const TIME_ENTRY_SIZE: usize = 12;
const TXN_ENTRY_SIZE: usize = 34;
/// The only aborted-transaction entry version Kafka writes.
const TXN_ENTRY_VERSION: i16 = 0;

fn corrupt(index_type: IndexType, reason: impl Into<String>) -> RemoteStorageError {
    RemoteStorageError::CorruptIndex {
        index_type,
        reason: reason.into(),
    }
}

/// Splits an index into fixed-size entries, dropping the zero-filled tail of
/// a preallocated file: an all-zero entry after the first ends the index,
/// and everything after it must be zero too.
fn live_entries<const N: usize>(
    bytes: &[u8],
    index_type: IndexType,
) -> Result<Vec<[u8; N]>, RemoteStorageError> {
    if bytes.len() % N != 0 {
        return Err(corrupt(
            index_type,
            format!(
                "{} bytes is not a whole number of {N}-byte entries",
                bytes.len()
            ),
        ));
    }
    let mut entries = Vec::with_capacity(bytes.len() / N);
    for (n, chunk) in bytes.chunks_exact(N).enumerate() {
        let mut entry = [0u8; N];
        entry.copy_from_slice(chunk);
        if n > 0 && entry.iter().all(|&b| b == 0) {
            if bytes
                .get(n * N..)
                .is_some_and(|rest| rest.iter().any(|&b| b != 0))
            {
                return Err(corrupt(
                    index_type,
                    format!("non-zero data after the zero-filled entry {n}"),
                ));
            }
            break;
        }
        entries.push(entry);
    }
    Ok(entries)
}

fn be_u32(bytes: &[u8], at: usize) -> u32 {
    let mut raw = [0u8; 4];
    if let Some(slice) = bytes.get(at..at + 4) {
        raw.copy_from_slice(slice);
    }
    u32::from_be_bytes(raw)
}

fn be_i64(bytes: &[u8], at: usize) -> i64 {
    let mut raw = [0u8; 8];
    if let Some(slice) = bytes.get(at..at + 8) {
        raw.copy_from_slice(slice);
    }
    i64::from_be_bytes(raw)
}

fn be_i32(bytes: &[u8], at: usize) -> i32 {
    be_u32(bytes, at) as i32
}

fn be_i16(bytes: &[u8], at: usize) -> i16 {
    let mut raw = [0u8; 2];
    if let Some(slice) = bytes.get(at..at + 2) {
        raw.copy_from_slice(slice);
    }
    i16::from_be_bytes(raw)
}

/// Decodes a `.index` file.
///
/// # Errors
///
/// [`RemoteStorageError::CorruptIndex`] if the length is not a multiple of
/// 8, if relative offsets or positions do not strictly increase, or if
/// non-zero data follows the zero-filled tail.
pub fn parse_offset_index(bytes: &[u8]) -> Result<Vec<OffsetIndexEntry>, RemoteStorageError> {
    let raw = live_entries::<OFFSET_ENTRY_SIZE>(bytes, IndexType::Offset)?;
    let mut entries: Vec<OffsetIndexEntry> = Vec::with_capacity(raw.len());
    for (n, entry) in raw.iter().enumerate() {
        let parsed = OffsetIndexEntry {
            relative_offset: RelativeOffset(be_u32(entry, 0)),
            position: BytePosition(be_u32(entry, 4)),
        };
        if let Some(previous) = entries.last()
            && (parsed.relative_offset <= previous.relative_offset
                || parsed.position <= previous.position)
        {
            return Err(corrupt(
                IndexType::Offset,
                format!("entry {n} {parsed:?} does not move forward from {previous:?}"),
            ));
        }
        entries.push(parsed);
    }
    Ok(entries)
}

/// Decodes a `.timeindex` file.
///
/// # Errors
///
/// [`RemoteStorageError::CorruptIndex`] if the length is not a multiple of
/// 12, if timestamps or relative offsets decrease, or if non-zero data
/// follows the zero-filled tail.
pub fn parse_time_index(bytes: &[u8]) -> Result<Vec<TimeIndexEntry>, RemoteStorageError> {
    let raw = live_entries::<TIME_ENTRY_SIZE>(bytes, IndexType::Timestamp)?;
    let mut entries: Vec<TimeIndexEntry> = Vec::with_capacity(raw.len());
    for (n, entry) in raw.iter().enumerate() {
        let parsed = TimeIndexEntry {
            timestamp: TimestampMs(be_i64(entry, 0)),
            relative_offset: RelativeOffset(be_u32(entry, 8)),
        };
        if let Some(previous) = entries.last()
            && (parsed.timestamp < previous.timestamp
                || parsed.relative_offset < previous.relative_offset)
        {
            return Err(corrupt(
                IndexType::Timestamp,
                format!("entry {n} {parsed:?} goes back from {previous:?}"),
            ));
        }
        entries.push(parsed);
    }
    Ok(entries)
}

/// Decodes a `.txnindex` file.
///
/// # Errors
///
/// [`RemoteStorageError::CorruptIndex`] if the length is not a multiple of
/// 34, an entry has a version other than 0, or its offsets are out of order
/// (`first_offset > last_offset`).
pub fn parse_txn_index(bytes: &[u8]) -> Result<Vec<AbortedTxnIndexEntry>, RemoteStorageError> {
    if bytes.len() % TXN_ENTRY_SIZE != 0 {
        return Err(corrupt(
            IndexType::Transaction,
            format!(
                "{} bytes is not a whole number of {TXN_ENTRY_SIZE}-byte entries",
                bytes.len()
            ),
        ));
    }
    bytes
        .chunks_exact(TXN_ENTRY_SIZE)
        .enumerate()
        .map(|(n, entry)| {
            let parsed = AbortedTxnIndexEntry {
                version: be_i16(entry, 0),
                producer_id: ProducerId(be_i64(entry, 2)),
                first_offset: LogOffset(be_i64(entry, 10)),
                last_offset: LogOffset(be_i64(entry, 18)),
                last_stable_offset: LogOffset(be_i64(entry, 26)),
            };
            if parsed.version != TXN_ENTRY_VERSION {
                return Err(corrupt(
                    IndexType::Transaction,
                    format!("entry {n} has version {}", parsed.version),
                ));
            }
            if parsed.first_offset > parsed.last_offset {
                return Err(corrupt(
                    IndexType::Transaction,
                    format!("entry {n} {parsed:?} ends before it starts"),
                ));
            }
            Ok(parsed)
        })
        .collect()
}

/// Where to start reading for `target`: the position of the last index
/// entry whose relative offset is at most `target`, or 0 if there is none
/// (Kafka's `OffsetIndex.lookup`). The batch holding `target` starts at or
/// after it; [`first_batch_at_or_after`] finds it.
#[must_use]
pub fn position_for_relative_offset(
    entries: &[OffsetIndexEntry],
    target: RelativeOffset,
) -> BytePosition {
    let after = entries.partition_point(|entry| entry.relative_offset <= target);
    after
        .checked_sub(1)
        .and_then(|at| entries.get(at))
        .map_or(BytePosition(0), |entry| entry.position)
}

/// An exclusive byte position at which a read of offsets up to and including
/// `target` may stop: every batch holding an offset at most `target` ends at
/// or before it. It is the position of the entry after the first entry past
/// `target` (so the read overshoots by at most one index interval), or
/// `segment_size` when the index does not reach that far.
#[must_use]
pub fn end_position_for(
    entries: &[OffsetIndexEntry],
    target: RelativeOffset,
    segment_size: BytePosition,
) -> BytePosition {
    // The batch at the first entry past `target` may still hold `target`;
    // every batch from the next entry on starts after it.
    let first_past = entries.partition_point(|entry| entry.relative_offset <= target);
    entries
        .get(first_past + 1)
        .map_or(segment_size, |entry| entry.position.min(segment_size))
}

/// The largest relative offset the time index maps to a timestamp at most
/// `target`, or 0 if every entry is later (Kafka's `TimeIndex.lookup`). A
/// search for the first record at or after `target` starts at this offset's
/// position.
#[must_use]
pub fn relative_offset_floor_for_timestamp(
    entries: &[TimeIndexEntry],
    target: TimestampMs,
) -> RelativeOffset {
    let after = entries.partition_point(|entry| entry.timestamp <= target);
    after
        .checked_sub(1)
        .and_then(|at| entries.get(at))
        .map_or(RelativeOffset(0), |entry| entry.relative_offset)
}

/// The aborted transactions that a read of `fetch_offset..upper_bound_offset`
/// must report, and whether this index alone settles it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TxnOverlap {
    /// Entries overlapping the range, in index order.
    pub aborted: Vec<AbortedTxnIndexEntry>,
    /// True when an entry's last stable offset reaches `upper_bound_offset`:
    /// no later segment can hold an abort for the range (Kafka's
    /// `TxnIndexSearchResult.isComplete`).
    pub complete: bool,
}

/// The entries overlapping `fetch_offset..upper_bound_offset` (Kafka's
/// `TransactionIndex.collectAbortedTxns`): an entry counts when its last
/// offset is at least `fetch_offset` and its first offset is below
/// `upper_bound_offset`. The scan stops at the first entry whose last stable
/// offset reaches `upper_bound_offset`.
#[must_use]
pub fn txn_overlaps(
    entries: &[AbortedTxnIndexEntry],
    fetch_offset: LogOffset,
    upper_bound_offset: LogOffset,
) -> TxnOverlap {
    let mut overlap = TxnOverlap::default();
    for entry in entries {
        if entry.last_offset >= fetch_offset && entry.first_offset < upper_bound_offset {
            overlap.aborted.push(*entry);
        }
        if entry.last_stable_offset >= upper_bound_offset {
            overlap.complete = true;
            break;
        }
    }
    overlap
}

/// Size of a v2 batch header (Kafka's `RECORD_BATCH_OVERHEAD`).
const BATCH_HEADER_SIZE: usize = 61;
/// Base offset and length, the part before the length counts (Kafka's
/// `LOG_OVERHEAD`).
const LOG_OVERHEAD: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
const ATTRIBUTES_AT: usize = 21;

/// The header fields of one v2 record batch, read without touching its
/// records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// Where the batch starts in the log bytes given.
    pub position: BytePosition,
    /// Total size of the batch in bytes.
    pub size: u32,
    /// First offset of the batch.
    pub base_offset: LogOffset,
    /// Last offset of the batch.
    pub last_offset: LogOffset,
    /// Largest timestamp in the batch.
    pub max_timestamp: TimestampMs,
    /// `partitionLeaderEpoch` of the batch, `None` for Kafka's -1.
    pub leader_epoch: Option<LeaderEpoch>,
}

impl BatchHeader {
    /// Byte position just past the batch.
    #[must_use]
    pub fn end(&self) -> u64 {
        u64::from(self.position.0) + u64::from(self.size)
    }
}

/// How a segment's `.log` is damaged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogCorruptionKind {
    /// The log ends inside a batch: `needed` bytes from the batch start, only
    /// `available` left.
    Truncated {
        /// Bytes the batch claims (or the header needs).
        needed: u64,
        /// Bytes left in the log.
        available: u64,
    },
    /// A batch length below the v2 header size.
    BadLength(i32),
    /// A magic byte other than 2.
    BadMagic(i8),
    /// A CRC-32C that does not match the batch content.
    BadCrc {
        /// CRC stored in the batch.
        stored: u32,
        /// CRC computed over the batch.
        computed: u32,
    },
    /// A batch whose last offset is before its base offset, or whose offsets
    /// go back from the previous batch's.
    BadOffsets {
        /// The batch's base offset.
        base_offset: i64,
        /// Its last offset.
        last_offset: i64,
    },
}

/// The first damage found in a segment's `.log`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogCorruption {
    /// Where the damaged batch starts.
    pub position: BytePosition,
    /// What is wrong with it.
    pub kind: LogCorruptionKind,
}

impl fmt::Display for LogCorruptionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncated { needed, available } => {
                write!(f, "truncated batch: needs {needed} bytes, {available} left")
            }
            Self::BadLength(length) => write!(f, "batch length {length} is below the header size"),
            Self::BadMagic(magic) => write!(f, "magic byte {magic}, expected 2"),
            Self::BadCrc { stored, computed } => {
                write!(
                    f,
                    "CRC-32C mismatch: stored {stored:#010x}, computed {computed:#010x}"
                )
            }
            Self::BadOffsets {
                base_offset,
                last_offset,
            } => write!(
                f,
                "batch offsets {base_offset}..={last_offset} out of order"
            ),
        }
    }
}

impl From<LogCorruption> for RemoteStorageError {
    fn from(corruption: LogCorruption) -> Self {
        Self::CorruptLog {
            position: u64::from(corruption.position.0),
            reason: corruption.kind.to_string(),
        }
    }
}

/// Reads the batch header at `position`. `Ok(None)` at the exact end of the
/// log; a truncated or malformed header is an error.
fn batch_header_at(log: &[u8], position: usize) -> Result<Option<BatchHeader>, LogCorruption> {
    let available = log.len().saturating_sub(position);
    if available == 0 {
        return Ok(None);
    }
    let at = BytePosition(u32::try_from(position).unwrap_or(u32::MAX));
    let fail = |kind| LogCorruption { position: at, kind };
    let header = log
        .get(position..position + BATCH_HEADER_SIZE)
        .ok_or_else(|| {
            fail(LogCorruptionKind::Truncated {
                needed: BATCH_HEADER_SIZE as u64,
                available: available as u64,
            })
        })?;
    let length = be_i32(header, 8);
    let size = usize::try_from(length)
        .ok()
        .map(|length| length + LOG_OVERHEAD)
        .filter(|&size| size >= BATCH_HEADER_SIZE)
        .ok_or_else(|| fail(LogCorruptionKind::BadLength(length)))?;
    let magic = header.get(MAGIC_AT).map_or(0, |&b| b as i8);
    if magic != 2 {
        return Err(fail(LogCorruptionKind::BadMagic(magic)));
    }
    if size > available {
        return Err(fail(LogCorruptionKind::Truncated {
            needed: size as u64,
            available: available as u64,
        }));
    }
    let base_offset = be_i64(header, 0);
    let last_offset_delta = be_i32(header, 23);
    let last_offset = base_offset.saturating_add(i64::from(last_offset_delta));
    if last_offset_delta < 0 || base_offset < 0 {
        return Err(fail(LogCorruptionKind::BadOffsets {
            base_offset,
            last_offset,
        }));
    }
    let epoch = be_i32(header, 12);
    Ok(Some(BatchHeader {
        position: at,
        size: u32::try_from(size).unwrap_or(u32::MAX),
        base_offset: LogOffset(base_offset),
        last_offset: LogOffset(last_offset),
        max_timestamp: TimestampMs(be_i64(header, 35)),
        leader_epoch: (epoch >= 0).then_some(LeaderEpoch(epoch)),
    }))
}

/// Iterates the batch headers of `log` from `from`, stopping at the end.
fn batches_from(
    log: &[u8],
    from: BytePosition,
) -> impl Iterator<Item = Result<BatchHeader, LogCorruption>> + '_ {
    let mut position = Some(from.0 as usize);
    std::iter::from_fn(move || {
        let at = position?;
        match batch_header_at(log, at) {
            Ok(Some(header)) => {
                position = usize::try_from(header.end()).ok();
                Some(Ok(header))
            }
            Ok(None) => {
                position = None;
                None
            }
            Err(corruption) => {
                position = None;
                Some(Err(corruption))
            }
        }
    })
}

/// The first batch at or after byte `from` of `log` whose last offset is at
/// least `target` (Kafka's `FileRecords.searchForOffsetFromPosition`),
/// reading only batch headers. `None` if the log ends first.
///
/// # Errors
///
/// [`RemoteStorageError::CorruptLog`] if a header on the way is truncated or
/// malformed.
pub fn first_batch_at_or_after(
    log: &[u8],
    from: BytePosition,
    target: LogOffset,
) -> Result<Option<BatchHeader>, RemoteStorageError> {
    for header in batches_from(log, from) {
        let header = header?;
        if header.last_offset >= target {
            return Ok(Some(header));
        }
    }
    Ok(None)
}

/// The record [`first_record_at_or_after_timestamp`] finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampAndOffset {
    /// The record's timestamp.
    pub timestamp: TimestampMs,
    /// The record's offset.
    pub offset: LogOffset,
    /// Its batch's leader epoch, `None` for Kafka's -1.
    pub leader_epoch: Option<LeaderEpoch>,
}

/// The first record at or after byte `from` of `log` whose timestamp is at
/// least `target` and whose offset is at least `starting_offset` (Kafka's
/// `FileRecords.searchForTimestamp`). Batches whose max timestamp is below
/// `target` are skipped by header; the others are decoded (decompressing if
/// needed).
///
/// # Errors
///
/// [`RemoteStorageError::CorruptLog`] if a batch on the way is malformed or
/// its records do not decode.
pub fn first_record_at_or_after_timestamp(
    log: &[u8],
    from: BytePosition,
    target: TimestampMs,
    starting_offset: LogOffset,
) -> Result<Option<TimestampAndOffset>, RemoteStorageError> {
    for header in batches_from(log, from) {
        let header = header?;
        if header.max_timestamp < target || header.last_offset < starting_offset {
            continue;
        }
        let start = header.position.0 as usize;
        let bytes = log
            .get(start..start + header.size as usize)
            .ok_or_else(|| RemoteStorageError::CorruptLog {
                position: u64::from(header.position.0),
                reason: "batch runs past the log".to_owned(),
            })?;
        let records = decode_records(bytes).map_err(|error| RemoteStorageError::CorruptLog {
            position: u64::from(header.position.0),
            reason: format!("records do not decode: {error}"),
        })?;
        if let Some(record) = records
            .iter()
            .find(|r| r.timestamp >= target.0 && r.offset >= starting_offset.0)
        {
            return Ok(Some(TimestampAndOffset {
                timestamp: TimestampMs(record.timestamp),
                offset: LogOffset(record.offset),
                leader_epoch: header.leader_epoch,
            }));
        }
    }
    Ok(None)
}

/// The fewest bytes one v2 record takes (seven one-byte fields).
const MIN_RECORD_SIZE: usize = 7;

/// Byte position of `recordCount` in a v2 batch header.
const RECORD_COUNT_AT: usize = 57;

/// Decodes the records of one whole batch. The decoder reserves room for
/// the header's record count before it reads a record, so that count is
/// first checked against the (decompressed) record bytes.
fn decode_records(batch: &[u8]) -> Result<Vec<Record>, String> {
    use kafka_protocol::compression::{Decompressor, Gzip, Lz4, Snappy, Zstd};
    let count = be_i32(batch, RECORD_COUNT_AT);
    let mut buf = Bytes::copy_from_slice(batch);
    let take = |b: &mut Bytes| Ok(std::mem::take(b));
    let set = RecordBatchDecoder::decode_with_custom_compression(
        &mut buf,
        Some(|records: &mut Bytes, compression: Compression| {
            let plain = match compression {
                Compression::None => std::mem::take(records),
                Compression::Gzip => <Gzip as Decompressor<Bytes>>::decompress(records, take)?,
                Compression::Snappy => <Snappy as Decompressor<Bytes>>::decompress(records, take)?,
                Compression::Lz4 => <Lz4 as Decompressor<Bytes>>::decompress(records, take)?,
                Compression::Zstd => <Zstd as Decompressor<Bytes>>::decompress(records, take)?,
            };
            if !usize::try_from(count).is_ok_and(|n| n <= plain.len() / MIN_RECORD_SIZE) {
                Err(std::io::Error::other(format!(
                    "record count {count} cannot fit in {} bytes of records",
                    plain.len()
                )))?;
            }
            Ok(plain)
        }),
    )
    .map_err(|e| e.to_string())?;
    Ok(set.records)
}

/// The first damage in a segment's `.log`, or `None` if every batch is whole,
/// has magic 2, a valid length, a matching CRC-32C, and offsets that move
/// forward. Checks headers and CRCs only; records are not decompressed.
#[must_use]
pub fn corrupt_log(log: &[u8]) -> Option<LogCorruption> {
    let mut previous_last: Option<i64> = None;
    for header in batches_from(log, BytePosition(0)) {
        let header = match header {
            Ok(header) => header,
            Err(corruption) => return Some(corruption),
        };
        let start = header.position.0 as usize;
        let Some(content) = log.get(start + ATTRIBUTES_AT..start + header.size as usize) else {
            // `batch_header_at` checked the batch fits; kept total anyway.
            return Some(LogCorruption {
                position: header.position,
                kind: LogCorruptionKind::Truncated {
                    needed: u64::from(header.size),
                    available: log.len().saturating_sub(start) as u64,
                },
            });
        };
        let stored = be_u32(log, start + CRC_AT);
        let computed = crc32c::crc32c(content);
        if stored != computed {
            return Some(LogCorruption {
                position: header.position,
                kind: LogCorruptionKind::BadCrc { stored, computed },
            });
        }
        if previous_last.is_some_and(|last| header.base_offset.0 <= last) {
            return Some(LogCorruption {
                position: header.position,
                kind: LogCorruptionKind::BadOffsets {
                    base_offset: header.base_offset.0,
                    last_offset: header.last_offset.0,
                },
            });
        }
        previous_last = Some(header.last_offset.0);
    }
    None
}

#[cfg(test)]
pub(crate) mod tests {
    use {
        super::*,
        crate::test_support::{batch, log_of},
        assert2::check,
        kafka_protocol::records::Compression,
        proptest::prelude::*,
    };

    /// The `.index` and `.timeindex` Kafka's `LogSegment.append` writes for a
    /// segment of `layout` (position, base, last) with per-batch max
    /// timestamps, one entry once more than `interval` bytes passed since the
    /// last, plus the time-index entry written when the segment rolls.
    pub(crate) fn kafka_indexes(
        base: i64,
        layout: &[(u32, i64, i64)],
        batch_max_ts: &[i64],
        log_len: usize,
        interval: usize,
    ) -> (Vec<u8>, Vec<u8>) {
        let (mut offset_index, mut time_index) = (Vec::new(), Vec::new());
        let mut since_last = 0usize;
        let mut max_so_far: Option<(i64, i64)> = None;
        let mut last_time_entry: Option<i64> = None;
        let mut append_time = |index: &mut Vec<u8>, (ts, off): (i64, i64)| {
            if last_time_entry.is_none_or(|last| ts > last) {
                index.extend_from_slice(&ts.to_be_bytes());
                index.extend_from_slice(&u32::try_from(off - base).unwrap().to_be_bytes());
                last_time_entry = Some(ts);
            }
        };
        for (n, &(position, _, last)) in layout.iter().enumerate() {
            let ts = batch_max_ts[n];
            if max_so_far.is_none_or(|(max, _)| ts > max) {
                max_so_far = Some((ts, last));
            }
            if since_last > interval {
                offset_index.extend_from_slice(&u32::try_from(last - base).unwrap().to_be_bytes());
                offset_index.extend_from_slice(&position.to_be_bytes());
                append_time(&mut time_index, max_so_far.unwrap());
                since_last = 0;
            }
            let end = layout.get(n + 1).map_or(log_len, |next| next.0 as usize);
            since_last += end - position as usize;
        }
        if let Some(max) = max_so_far {
            append_time(&mut time_index, max);
        }
        (offset_index, time_index)
    }

    fn offset_bytes(entries: &[(u32, u32)]) -> Vec<u8> {
        entries
            .iter()
            .flat_map(|&(o, p)| o.to_be_bytes().into_iter().chain(p.to_be_bytes()))
            .collect()
    }

    fn txn_bytes(version: i16, pid: i64, first: i64, last: i64, lso: i64) -> Vec<u8> {
        let mut bytes = version.to_be_bytes().to_vec();
        for value in [pid, first, last, lso] {
            bytes.extend_from_slice(&value.to_be_bytes());
        }
        bytes
    }

    #[test]
    fn offset_index_decodes_and_drops_the_preallocated_tail() {
        let mut bytes = offset_bytes(&[(0, 0), (5, 100), (9, 230)]);
        bytes.resize(bytes.len() + 8 * 10, 0);
        let entries = parse_offset_index(&bytes).unwrap();
        check!(entries.len() == 3);
        check!(
            entries[2]
                == OffsetIndexEntry {
                    relative_offset: RelativeOffset(9),
                    position: BytePosition(230)
                }
        );
        check!(parse_offset_index(&[]).unwrap().is_empty());
        check!(position_for_relative_offset(&entries, RelativeOffset(4)) == BytePosition(0));
        check!(position_for_relative_offset(&entries, RelativeOffset(5)) == BytePosition(100));
        check!(position_for_relative_offset(&entries, RelativeOffset(100)) == BytePosition(230));
        check!(position_for_relative_offset(&[], RelativeOffset(100)) == BytePosition(0));
        check!(
            end_position_for(&entries, RelativeOffset(3), BytePosition(400)) == BytePosition(230)
        );
        check!(
            end_position_for(&entries, RelativeOffset(5), BytePosition(400)) == BytePosition(400)
        );
    }

    #[test]
    fn damaged_indexes_are_refused() {
        let refused = |result: Result<Vec<OffsetIndexEntry>, RemoteStorageError>| {
            matches!(
                result,
                Err(RemoteStorageError::CorruptIndex {
                    index_type: IndexType::Offset,
                    ..
                })
            )
        };
        check!(refused(parse_offset_index(&[0; 7])));
        check!(refused(parse_offset_index(&offset_bytes(&[
            (5, 100),
            (4, 200)
        ]))));
        check!(refused(parse_offset_index(&offset_bytes(&[
            (5, 100),
            (6, 100)
        ]))));
        check!(refused(parse_offset_index(&offset_bytes(&[
            (5, 100),
            (0, 0),
            (7, 300)
        ]))));

        let mut time = Vec::new();
        for (ts, off) in [(100i64, 1u32), (50, 2)] {
            time.extend_from_slice(&ts.to_be_bytes());
            time.extend_from_slice(&off.to_be_bytes());
        }
        assert2::assert!(let Err(RemoteStorageError::CorruptIndex { index_type: IndexType::Timestamp, .. }) = parse_time_index(&time));
        assert2::assert!(let Err(RemoteStorageError::CorruptIndex { .. }) = parse_time_index(&[1; 13]));

        assert2::assert!(let Err(RemoteStorageError::CorruptIndex { .. }) = parse_txn_index(&[0; 33]));
        assert2::assert!(let Err(RemoteStorageError::CorruptIndex { .. }) = parse_txn_index(&txn_bytes(1, 7, 0, 5, 5)));
        assert2::assert!(let Err(RemoteStorageError::CorruptIndex { .. }) = parse_txn_index(&txn_bytes(0, 7, 6, 5, 5)));
    }

    #[test]
    fn time_index_floor_lookup() {
        let mut bytes = Vec::new();
        for (ts, off) in [(100i64, 3u32), (200, 8), (300, 12)] {
            bytes.extend_from_slice(&ts.to_be_bytes());
            bytes.extend_from_slice(&off.to_be_bytes());
        }
        bytes.resize(bytes.len() + 24, 0);
        let entries = parse_time_index(&bytes).unwrap();
        check!(entries.len() == 3);
        check!(relative_offset_floor_for_timestamp(&entries, TimestampMs(50)) == RelativeOffset(0));
        check!(
            relative_offset_floor_for_timestamp(&entries, TimestampMs(200)) == RelativeOffset(8)
        );
        check!(
            relative_offset_floor_for_timestamp(&entries, TimestampMs(299)) == RelativeOffset(8)
        );
        check!(
            relative_offset_floor_for_timestamp(&entries, TimestampMs(1_000)) == RelativeOffset(12)
        );
    }

    #[test]
    fn txn_index_overlaps_like_kafka() {
        let mut bytes = txn_bytes(0, 1, 0, 10, 11);
        bytes.extend(txn_bytes(0, 2, 5, 30, 31));
        bytes.extend(txn_bytes(0, 3, 40, 50, 60));
        let entries = parse_txn_index(&bytes).unwrap();
        check!(entries[1].producer_id == ProducerId(2));
        check!(entries[1].last_stable_offset == LogOffset(31));
        let pids = |o: TxnOverlap| {
            o.aborted
                .iter()
                .map(|e| e.producer_id.0)
                .collect::<Vec<_>>()
        };
        let overlap = txn_overlaps(&entries, LogOffset(11), LogOffset(45));
        check!(pids(overlap.clone()) == [2, 3]);
        check!(overlap.complete);
        let overlap = txn_overlaps(&entries, LogOffset(0), LogOffset(8));
        check!(pids(overlap.clone()) == [1]);
        check!(overlap.complete, "lso 11 >= 8 settles it");
        let overlap = txn_overlaps(&entries, LogOffset(51), LogOffset(100));
        check!(pids(overlap.clone()).is_empty());
        check!(!overlap.complete);
    }

    #[test]
    fn corrupt_log_finds_the_damage() {
        let (log, layout) = log_of(100, &[3, 2, 4], &[1, 2, 3, 4, 5, 6, 7, 8, 9]);
        check!(corrupt_log(&log) == None);
        check!(corrupt_log(&[]) == None);

        let second = layout[1].0;
        let mut flipped = log.clone();
        let last = flipped.len() - 3;
        flipped[last] ^= 0xFF;
        let found = corrupt_log(&flipped).unwrap();
        check!(found.position == BytePosition(layout[2].0));
        check!(matches!(found.kind, LogCorruptionKind::BadCrc { .. }));

        let truncated = &log[..log.len() - 1];
        let found = corrupt_log(truncated).unwrap();
        check!(found.position == BytePosition(layout[2].0));
        check!(matches!(found.kind, LogCorruptionKind::Truncated { .. }));

        let mut bad_magic = log.clone();
        bad_magic[second as usize + 16] = 1;
        let found = corrupt_log(&bad_magic).unwrap();
        check!(
            found
                == LogCorruption {
                    position: BytePosition(second),
                    kind: LogCorruptionKind::BadMagic(1)
                }
        );

        let mut bad_length = log.clone();
        bad_length[second as usize + 8..second as usize + 12].copy_from_slice(&10i32.to_be_bytes());
        check!(corrupt_log(&bad_length).unwrap().kind == LogCorruptionKind::BadLength(10));

        let error = RemoteStorageError::from(corrupt_log(truncated).unwrap());
        check!(
            matches!(error, RemoteStorageError::CorruptLog { position, .. } if position == u64::from(layout[2].0))
        );
    }

    #[test]
    fn timestamp_search_reads_compressed_batches() {
        let mut log = batch(0, &[10, 20], Compression::Gzip).to_vec();
        log.extend_from_slice(&batch(2, &[15, 40, 30], Compression::Zstd));
        check!(corrupt_log(&log) == None);
        let found = first_record_at_or_after_timestamp(
            &log,
            BytePosition(0),
            TimestampMs(25),
            LogOffset(0),
        )
        .unwrap()
        .unwrap();
        check!(found.offset == LogOffset(3));
        check!(found.timestamp == TimestampMs(40));
        check!(found.leader_epoch == Some(LeaderEpoch(0)));
        check!(
            first_record_at_or_after_timestamp(
                &log,
                BytePosition(0),
                TimestampMs(41),
                LogOffset(0)
            )
            .unwrap()
                == None
        );
        let found = first_record_at_or_after_timestamp(
            &log,
            BytePosition(0),
            TimestampMs(12),
            LogOffset(2),
        )
        .unwrap()
        .unwrap();
        check!(found.offset == LogOffset(2));
    }

    #[test]
    fn record_counts_beyond_the_bytes_left_are_refused() {
        for codec in [Compression::None, Compression::Gzip, Compression::Zstd] {
            let mut log = batch(0, &[10, 20], codec).to_vec();
            log[RECORD_COUNT_AT..RECORD_COUNT_AT + 4].copy_from_slice(&i32::MAX.to_be_bytes());
            krabka_log::batch::recompute_crc(&mut log);
            let error = first_record_at_or_after_timestamp(
                &log,
                BytePosition(0),
                TimestampMs(0),
                LogOffset(0),
            )
            .unwrap_err();
            check!(
                error.to_string().contains("cannot fit"),
                "{codec:?}: {error}"
            );
            check!(decode_records(&batch(0, &[10, 20], codec)).unwrap().len() == 2);
        }
    }

    proptest! {
        /// Index lookups against a linear scan of the segment.
        #[test]
        fn lookups_match_a_linear_scan(
            base in 0i64..1_000_000,
            sizes in proptest::collection::vec(1usize..5, 1..40),
            stamps in proptest::collection::vec(0i64..1_000, 200),
            interval in 0usize..400,
            preallocated in 0usize..5,
            targets in proptest::collection::vec(0i64..1_100, 1..20),
        ) {
            let records: usize = sizes.iter().sum();
            let stamps = &stamps[..records];
            let (log, layout) = log_of(base, &sizes, stamps);
            let mut record_ts = stamps.iter();
            let batch_max: Vec<i64> = sizes.iter().map(|&n| *record_ts.by_ref().take(n).max().unwrap()).collect();
            let (mut offset_index, mut time_index) = kafka_indexes(base, &layout, &batch_max, log.len(), interval);
            offset_index.resize(offset_index.len() + 8 * preallocated, 0);
            time_index.resize(time_index.len() + 12 * preallocated, 0);
            let offsets = parse_offset_index(&offset_index).unwrap();
            let times = parse_time_index(&time_index).unwrap();
            prop_assert_eq!(corrupt_log(&log), None);
            let size = BytePosition(u32::try_from(log.len()).unwrap());
            let last_offset = layout.last().unwrap().2;

            for offset in base..=last_offset {
                let rel = LogOffset(offset).relative_to(LogOffset(base)).unwrap();
                let expected = layout.iter().find(|&&(_, b, l)| b <= offset && offset <= l).unwrap();
                let start = position_for_relative_offset(&offsets, rel);
                let found = first_batch_at_or_after(&log, start, LogOffset(offset)).unwrap().unwrap();
                prop_assert_eq!((found.position.0, found.base_offset.0, found.last_offset.0), *expected);
                let end = end_position_for(&offsets, rel, size);
                prop_assert!(end <= size);
                prop_assert!(found.end() <= u64::from(end.0));
            }
            prop_assert_eq!(first_batch_at_or_after(&log, BytePosition(0), LogOffset(last_offset + 1)).unwrap(), None);

            for target in targets {
                let expected = stamps.iter().position(|&ts| ts >= target)
                    .map(|n| (base + i64::try_from(n).unwrap(), stamps[n]));
                let rel = relative_offset_floor_for_timestamp(&times, TimestampMs(target));
                let start = position_for_relative_offset(&offsets, rel);
                let found = first_record_at_or_after_timestamp(&log, start, TimestampMs(target), LogOffset(base)).unwrap()
                    .map(|f| (f.offset.0, f.timestamp.0));
                prop_assert_eq!(found, expected, "target {}", target);
            }
        }

        #[test]
        fn txn_overlap_matches_a_filter(
            txns in proptest::collection::vec((0i64..100, 0i64..20, 0i64..10), 0..10),
            fetch in 0i64..130,
            len in 0i64..50,
        ) {
            let mut bytes = Vec::new();
            for (n, &(first, span, lso_gap)) in txns.iter().enumerate() {
                bytes.extend(txn_bytes(0, i64::try_from(n).unwrap(), first, first + span, first + span + lso_gap));
            }
            let entries = parse_txn_index(&bytes).unwrap();
            let upper = fetch + len;
            let stop = entries.iter().position(|e| e.last_stable_offset.0 >= upper);
            let considered = stop.map_or(&entries[..], |at| &entries[..=at]);
            let expected: Vec<_> = considered.iter()
                .filter(|e| e.last_offset.0 >= fetch && e.first_offset.0 < upper)
                .copied().collect();
            let overlap = txn_overlaps(&entries, LogOffset(fetch), LogOffset(upper));
            prop_assert_eq!(overlap.aborted, expected);
            prop_assert_eq!(overlap.complete, stop.is_some());
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300), from in 0u32..400) {
            let _ = parse_offset_index(&bytes);
            let _ = parse_time_index(&bytes);
            let _ = parse_txn_index(&bytes);
            let _ = corrupt_log(&bytes);
            let _ = first_batch_at_or_after(&bytes, BytePosition(from), LogOffset(5));
            let _ = first_record_at_or_after_timestamp(&bytes, BytePosition(from), TimestampMs(5), LogOffset(0));
        }
    }

    /// The decoders against segments written by `krabka-log` itself: closed
    /// segments (trimmed indexes) and the active one (preallocated,
    /// zero-filled index tails).
    mod krabka_log_segments {
        use {
            super::*,
            krabka_log::{Log, LogConfig, ManualClock},
            std::{fs, sync::Arc},
            uuid::Uuid,
        };

        #[test]
        fn lookups_on_segments_written_by_krabka_log() {
            let dir = tempfile::tempdir().unwrap();
            let config = LogConfig {
                segment_bytes: 6_000,
                index_interval_bytes: 150,
                segment_index_bytes: 4_096,
                ..LogConfig::default()
            };
            let log = Log::open(
                &dir.path().join("orders-0"),
                Uuid::from_u128(1),
                config,
                Arc::new(ManualClock::new(1_000)),
            )
            .unwrap();
            // Deterministic, non-monotonic timestamps.
            let mut seed = 17u64;
            let mut next = || {
                seed = seed
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                seed >> 33
            };
            for _ in 0..300 {
                let count = 1 + (next() % 4) as usize;
                let stamps: Vec<i64> = (0..count)
                    .map(|_| 1_000 + (next() % 5_000) as i64)
                    .collect();
                let compression = if next() % 3 == 0 {
                    Compression::Lz4
                } else {
                    Compression::None
                };
                log.append_as_leader(batch(0, &stamps, compression), LeaderEpoch(3))
                    .unwrap();
            }
            let segments = log.segments();
            check!(segments.len() > 3, "the test wants several closed segments");
            for info in &segments {
                check_segment(
                    info.base_offset,
                    &fs::read(&info.log_path).unwrap(),
                    &fs::read(&info.offset_index_path).unwrap(),
                    &fs::read(&info.time_index_path).unwrap(),
                    info.active,
                );
            }
        }

        fn check_segment(
            base: i64,
            log: &[u8],
            offset_index: &[u8],
            time_index: &[u8],
            active: bool,
        ) {
            check!(corrupt_log(log) == None, "segment {base}");
            let offsets = parse_offset_index(offset_index).unwrap();
            let times = parse_time_index(time_index).unwrap();
            if !active {
                check!(
                    offset_index.len() == offsets.len() * 8,
                    "closed segment {base}: trimmed index"
                );
            }
            // The linear truth: every batch and every record.
            let mut batches = Vec::new();
            let mut records = Vec::new();
            let mut at = BytePosition(0);
            while let Some(header) = first_batch_at_or_after(log, at, LogOffset(0)).unwrap() {
                let start = header.position.0 as usize;
                let mut bytes = Bytes::copy_from_slice(&log[start..start + header.size as usize]);
                let set = RecordBatchDecoder::decode(&mut bytes).unwrap();
                records.extend(set.records.iter().map(|r| (r.offset, r.timestamp)));
                check!(header.leader_epoch == Some(LeaderEpoch(3)));
                batches.push(header);
                at = BytePosition(u32::try_from(header.end()).unwrap());
            }
            check!(batches.first().map(|b| b.base_offset.0) == Some(base));
            let size = BytePosition(u32::try_from(log.len()).unwrap());
            for &(offset, _) in &records {
                let rel = LogOffset(offset).relative_to(LogOffset(base)).unwrap();
                let expected = batches
                    .iter()
                    .find(|b| b.base_offset.0 <= offset && offset <= b.last_offset.0)
                    .unwrap();
                let found = first_batch_at_or_after(
                    log,
                    position_for_relative_offset(&offsets, rel),
                    LogOffset(offset),
                )
                .unwrap()
                .unwrap();
                check!(found == *expected, "offset {offset}");
                check!(found.end() <= u64::from(end_position_for(&offsets, rel, size).0));
            }
            for target in (900..6_100).step_by(37) {
                let expected = records
                    .iter()
                    .find(|&&(_, ts)| ts >= target)
                    .map(|&(o, ts)| (o, ts));
                let rel = relative_offset_floor_for_timestamp(&times, TimestampMs(target));
                let start = position_for_relative_offset(&offsets, rel);
                let found = first_record_at_or_after_timestamp(
                    log,
                    start,
                    TimestampMs(target),
                    LogOffset(base),
                )
                .unwrap()
                .map(|f| (f.offset.0, f.timestamp.0));
                check!(found == expected, "segment {base}, timestamp {target}");
            }
        }
    }
}
