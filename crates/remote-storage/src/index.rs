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

use std::fmt;

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
    pub producer_id: krabka_ids::ProducerId,
    /// First offset of the transaction.
    pub first_offset: LogOffset,
    /// Offset of the abort marker.
    pub last_offset: LogOffset,
    /// Last stable offset when the abort was written.
    pub last_stable_offset: LogOffset,
}
