//! The `RemoteStorageManager` SPI, the segment bundle it copies, and the
//! archive key codec.
//!
//! The SPI mirrors Kafka's `RemoteStorageManager`: copy a closed segment with
//! all its indexes, fetch a byte range of the log, fetch one index, delete.
//! It is synchronous on purpose (Kafka's is blocking; the broker runs it on a
//! blocking pool), so an implementation needs no runtime of its own.
//!
//! The key codec is Kafka's `LocalTieredStorage` naming, which Krabka also
//! uses for object keys: a partition directory
//! `<topic>-<partition>-<topic id>` holding files
//! `<start offset, 20 digits>-<segment id>.<suffix>`, ids in Kafka's UUID text
//! form. Every name it writes parses back, so an archive can be discovered
//! from a directory or bucket listing alone.

pub use krabka_ids::{decode_kafka_uuid, kafka_uuid};
use {
    crate::{
        error::RemoteStorageError,
        index::BytePosition,
        metadata::{CustomMetadata, RemoteLogSegmentMetadata, TopicIdPartition},
    },
    bytes::Bytes,
    std::{fmt, path::PathBuf},
    uuid::Uuid,
};

/// Suffix of a segment's record data file.
pub const LOG_FILE_SUFFIX: &str = ".log";

/// Length of Kafka's UUID text form.
const UUID_TEXT_LEN: usize = 22;
/// Width of the zero-padded offset in a segment file name.
const OFFSET_DIGITS: usize = 20;

/// The indexes that travel with a segment (Kafka's
/// `RemoteStorageManager.IndexType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IndexType {
    /// The sparse offset index (`.index`).
    Offset,
    /// The sparse time index (`.timeindex`).
    Timestamp,
    /// The aborted-transaction index (`.txnindex`).
    Transaction,
    /// The leader-epoch checkpoint covering the segment
    /// (`.leader_epoch_checkpoint`).
    LeaderEpoch,
    /// The producer-state snapshot at the segment's start (`.snapshot`).
    ProducerSnapshot,
}

impl IndexType {
    /// Every index type.
    pub const ALL: [Self; 5] = [
        Self::Offset,
        Self::Timestamp,
        Self::Transaction,
        Self::LeaderEpoch,
        Self::ProducerSnapshot,
    ];

    /// The file suffix Kafka's `LocalTieredStorage` gives this index,
    /// including the dot.
    #[must_use]
    pub fn suffix(self) -> &'static str {
        match self {
            Self::Offset => ".index",
            Self::Timestamp => ".timeindex",
            Self::Transaction => ".txnindex",
            Self::LeaderEpoch => ".leader_epoch_checkpoint",
            Self::ProducerSnapshot => ".snapshot",
        }
    }

    /// The index type whose [`suffix`](Self::suffix) is `suffix`.
    #[must_use]
    pub fn from_suffix(suffix: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|index| index.suffix() == suffix)
    }

    /// Kafka's enum constant name, e.g. `OFFSET`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Offset => "OFFSET",
            Self::Timestamp => "TIMESTAMP",
            Self::Transaction => "TRANSACTION",
            Self::LeaderEpoch => "LEADER_EPOCH",
            Self::ProducerSnapshot => "PRODUCER_SNAPSHOT",
        }
    }
}

impl fmt::Display for IndexType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A closed local segment to copy (Kafka's `LogSegmentData`): the paths of
/// its files and the leader-epoch checkpoint content covering it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSegmentData {
    /// The `.log` file.
    pub log_segment: PathBuf,
    /// The `.index` file.
    pub offset_index: PathBuf,
    /// The `.timeindex` file.
    pub time_index: PathBuf,
    /// The `.txnindex` file, if the segment has one.
    pub transaction_index: Option<PathBuf>,
    /// The producer snapshot at the segment's base offset, if one exists.
    pub producer_snapshot_index: Option<PathBuf>,
    /// The leader-epoch checkpoint text for the epochs up to the segment's
    /// end (the broker builds it from its leader-epoch cache).
    pub leader_epoch_index: Bytes,
}

/// Copies, fetches and deletes segment data in the remote tier (Kafka's
/// `RemoteStorageManager`).
///
/// Implementations are shared by the broker's copy, fetch and delete pools,
/// so every method takes `&self`.
pub trait RemoteStorageManager: Send + Sync {
    /// Copies the segment and all its indexes to the remote tier under
    /// `metadata`'s segment id. Returns custom metadata to be stored with
    /// the segment, if the implementation has any.
    ///
    /// A copy is all-or-nothing as far as fetches can tell: until it
    /// returns `Ok`, no part of it is served.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::Io`] if a local file cannot be read,
    /// [`RemoteStorageError::WriteRefused`] if the tier refuses the write,
    /// [`RemoteStorageError::Backend`] or `Io` if the tier fails.
    fn copy_log_segment_data(
        &self,
        metadata: &RemoteLogSegmentMetadata,
        segment: &LogSegmentData,
    ) -> Result<Option<CustomMetadata>, RemoteStorageError>;

    /// The bytes of the segment's `.log` from `start_position` up to and
    /// including `end_position` (Kafka's end is inclusive), or to the end of
    /// the segment when `end_position` is `None`. An end past the segment is
    /// clamped to its last byte.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::SegmentNotFound`] if the segment is not in the
    /// tier, [`RemoteStorageError::InvalidRange`] if `start_position` is past
    /// the end or `end_position < start_position`,
    /// [`RemoteStorageError::FetchRefused`] on a write-only archive, `Io` or
    /// `Backend` if the tier fails.
    fn fetch_log_segment(
        &self,
        metadata: &RemoteLogSegmentMetadata,
        start_position: BytePosition,
        end_position: Option<BytePosition>,
    ) -> Result<Bytes, RemoteStorageError>;

    /// The whole content of one index of the segment.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::SegmentNotFound`] if the segment is not in the
    /// tier, [`RemoteStorageError::IndexNotFound`] if this (optional) index
    /// was not copied, `FetchRefused`, `Io` or `Backend` as for
    /// [`fetch_log_segment`](Self::fetch_log_segment).
    fn fetch_index(
        &self,
        metadata: &RemoteLogSegmentMetadata,
        index_type: IndexType,
    ) -> Result<Bytes, RemoteStorageError>;

    /// Deletes the segment's data and indexes. Deleting a segment that is
    /// not (or no longer) there succeeds.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::DeleteRefused`] on a WORM archive, `Io` or
    /// `Backend` if the tier fails.
    fn delete_log_segment_data(
        &self,
        metadata: &RemoteLogSegmentMetadata,
    ) -> Result<(), RemoteStorageError>;
}

/// The name of a partition's directory (or key prefix) in the remote tier:
/// `<topic>-<partition>-<topic id>`.
#[must_use]
pub fn partition_dir_name(topic_id_partition: &TopicIdPartition) -> String {
    format!(
        "{}-{}-{}",
        topic_id_partition.topic(),
        topic_id_partition.partition(),
        kafka_uuid(topic_id_partition.topic_id())
    )
}

/// A parsed partition directory name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionDirName {
    /// The topic name.
    pub topic: String,
    /// The partition index.
    pub partition: i32,
    /// The topic id.
    pub topic_id: Uuid,
}

impl PartitionDirName {
    /// The partition this directory belongs to.
    #[must_use]
    pub fn topic_id_partition(&self) -> TopicIdPartition {
        TopicIdPartition::new(self.topic_id, self.topic.clone(), self.partition)
    }
}

fn invalid_name(name: &str, reason: impl Into<String>) -> RemoteStorageError {
    RemoteStorageError::InvalidName {
        name: name.to_owned(),
        reason: reason.into(),
    }
}

/// Parses a name written by [`partition_dir_name`]. The topic may itself
/// contain `-`; the topic id is the last 22 characters and the partition the
/// number before it.
///
/// # Errors
///
/// [`RemoteStorageError::InvalidName`] unless `name` is
/// `<legal Kafka topic name>-<partition, non-negative decimal>-<Kafka UUID text>`.
pub fn parse_partition_dir_name(name: &str) -> Result<PartitionDirName, RemoteStorageError> {
    let split = name
        .len()
        .checked_sub(UUID_TEXT_LEN + 1)
        .filter(|&at| name.is_char_boundary(at))
        .ok_or_else(|| invalid_name(name, "too short for <topic>-<partition>-<topic id>"))?;
    let (head, id_part) = name.split_at(split);
    let id_text = id_part
        .strip_prefix('-')
        .ok_or_else(|| invalid_name(name, "no '-' before the topic id"))?;
    let topic_id = decode_kafka_uuid(id_text)?;
    let (topic, partition_text) = head
        .rsplit_once('-')
        .ok_or_else(|| invalid_name(name, "no '-' before the partition"))?;
    if !is_legal_topic_name(topic) {
        return Err(invalid_name(
            name,
            "topic is not a legal Kafka topic name ([a-zA-Z0-9._-]{1,249}, not '.' or '..')",
        ));
    }
    let partition = parse_decimal(partition_text)
        .and_then(|value| i32::try_from(value).ok())
        .ok_or_else(|| invalid_name(name, "partition is not a non-negative 32-bit number"))?;
    Ok(PartitionDirName {
        topic: topic.to_owned(),
        partition,
        topic_id,
    })
}

/// Whether `topic` is a legal Kafka topic name: 1 to 249 characters of
/// `[a-zA-Z0-9._-]`, and neither `.` nor `..`. Such a name is also a safe
/// single path component.
#[must_use]
pub(crate) fn is_legal_topic_name(topic: &str) -> bool {
    (1..=249).contains(&topic.len())
        && topic != "."
        && topic != ".."
        && topic
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Parses plain ASCII decimal digits (no sign, not empty).
fn parse_decimal(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// The name of one file of a segment: `<start offset, 20 digits>-<segment
/// id><suffix>`, e.g. `suffix` = [`LOG_FILE_SUFFIX`] or
/// [`IndexType::suffix`].
///
/// Start offsets are never negative ([`RemoteLogSegmentMetadata::new`]
/// refuses them); a negative value would have no 20-digit form and is written
/// as 0.
#[must_use]
pub fn segment_file_name(start_offset: i64, segment_id: Uuid, suffix: &str) -> String {
    format!(
        "{:0width$}-{}{}",
        start_offset.max(0),
        kafka_uuid(segment_id),
        suffix,
        width = OFFSET_DIGITS
    )
}

/// A parsed segment file name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentFileName {
    /// The segment's start offset.
    pub start_offset: i64,
    /// The segment's id.
    pub segment_id: Uuid,
    /// The suffix, including its dot (e.g. `.log`, `.index`).
    pub suffix: String,
}

impl SegmentFileName {
    /// Whether this is the segment's `.log`.
    #[must_use]
    pub fn is_log(&self) -> bool {
        self.suffix == LOG_FILE_SUFFIX
    }

    /// The index this file holds, if its suffix is an index suffix.
    #[must_use]
    pub fn index_type(&self) -> Option<IndexType> {
        IndexType::from_suffix(&self.suffix)
    }
}

/// Parses a name written by [`segment_file_name`]. Any suffix of a dot
/// followed by ASCII letters, digits, `_` or `-` is accepted, so files of
/// layers above this one (such as archive manifests) parse too.
///
/// # Errors
///
/// [`RemoteStorageError::InvalidName`] unless `name` is 20 decimal digits,
/// `-`, a Kafka UUID text and such a suffix.
pub fn parse_segment_file_name(name: &str) -> Result<SegmentFileName, RemoteStorageError> {
    let offset_text = name
        .get(..OFFSET_DIGITS)
        .ok_or_else(|| invalid_name(name, "too short for a segment file name"))?;
    let start_offset = parse_decimal(offset_text)
        .and_then(|value| i64::try_from(value).ok())
        .ok_or_else(|| invalid_name(name, "start offset is not 20 decimal digits"))?;
    let rest = name
        .get(OFFSET_DIGITS..)
        .and_then(|rest| rest.strip_prefix('-'))
        .ok_or_else(|| invalid_name(name, "no '-' after the start offset"))?;
    let id_text = rest
        .get(..UUID_TEXT_LEN)
        .ok_or_else(|| invalid_name(name, "too short for a segment id"))?;
    let segment_id = decode_kafka_uuid(id_text)?;
    let suffix = rest
        .get(UUID_TEXT_LEN..)
        .ok_or_else(|| invalid_name(name, "no suffix"))?;
    let valid_suffix = suffix.len() > 1
        && suffix.starts_with('.')
        && suffix
            .bytes()
            .skip(1)
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !valid_suffix {
        return Err(invalid_name(name, "suffix is not '.' and [A-Za-z0-9_-]+"));
    }
    Ok(SegmentFileName {
        start_offset,
        segment_id,
        suffix: suffix.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check, proptest::prelude::*};

    #[test]
    fn names_match_kafkas_local_tiered_storage() {
        let tp = TopicIdPartition::new(Uuid::from_u128(0xCA), "orders", 7);
        check!(partition_dir_name(&tp) == "orders-7-AAAAAAAAAAAAAAAAAAAAyg");
        check!(
            segment_file_name(42, Uuid::from_u128(0xFE), LOG_FILE_SUFFIX)
                == "00000000000000000042-AAAAAAAAAAAAAAAAAAAA_g.log"
        );
        let suffixes: Vec<&str> = IndexType::ALL.iter().map(|i| i.suffix()).collect();
        check!(
            suffixes
                == [
                    ".index",
                    ".timeindex",
                    ".txnindex",
                    ".leader_epoch_checkpoint",
                    ".snapshot"
                ]
        );
    }

    #[test]
    fn topic_with_dashes_and_digits_parses() {
        let tp = TopicIdPartition::new(Uuid::from_u128(u128::MAX), "my-topic-12", 3);
        let parsed = parse_partition_dir_name(&partition_dir_name(&tp)).unwrap();
        check!(parsed.topic_id_partition() == tp);
    }

    #[test]
    fn garbage_names_are_refused() {
        for name in [
            "",
            "orders",
            "orders-7",
            "-7-AAAAAAAAAAAAAAAAAAAAyg",
            "orders--AAAAAAAAAAAAAAAAAAAAyg",
            "orders-x-AAAAAAAAAAAAAAAAAAAAyg",
            "orders-7_AAAAAAAAAAAAAAAAAAAAyg",
            "orders-7-AAAAAAAAAAAAAAAAAAAAyh",
            "or/ders-7-AAAAAAAAAAAAAAAAAAAAyg",
            "..-7-AAAAAAAAAAAAAAAAAAAAyg",
            "orders-99999999999-AAAAAAAAAAAAAAAAAAAAyg",
            "é-7-AAAAAAAAAAAAAAAAAAAAéé",
        ] {
            assert2::assert!(let
                Err(RemoteStorageError::InvalidName { .. }) = parse_partition_dir_name(name),
                "{name}"
            );
        }
        for name in [
            "",
            "00000000000000000042",
            "0000000000000000004-AAAAAAAAAAAAAAAAAAAA_g.log",
            "00000000000000000042AAAAAAAAAAAAAAAAAAAA_g.log",
            "00000000000000000042-AAAAAAAAAAAAAAAAAAAA_g",
            "00000000000000000042-AAAAAAAAAAAAAAAAAAAA_g.",
            "00000000000000000042-AAAAAAAAAAAAAAAAAAAA_glog",
            "00000000000000000042-AAAAAAAAAAAAAAAAAAAA_g.l/g",
            "+0000000000000000042-AAAAAAAAAAAAAAAAAAAA_g.log",
            "99999999999999999999-AAAAAAAAAAAAAAAAAAAA_g.log",
            "00000000000000000042-AAAAAAAAAAAAAAAAAAAAé.log",
        ] {
            assert2::assert!(let
                Err(RemoteStorageError::InvalidName { .. }) = parse_segment_file_name(name),
                "{name}"
            );
        }
    }

    proptest! {
        #[test]
        fn partition_dir_names_round_trip(
            topic in "[a-zA-Z0-9._-]{1,40}",
            partition in 0..=i32::MAX,
            id in any::<u128>(),
        ) {
            prop_assume!(topic != "." && topic != "..");
            let tp = TopicIdPartition::new(Uuid::from_u128(id), topic, partition);
            let parsed = parse_partition_dir_name(&partition_dir_name(&tp)).unwrap();
            prop_assert_eq!(parsed.topic_id_partition(), tp);
        }

        #[test]
        fn segment_file_names_round_trip(start in 0..=i64::MAX, id in any::<u128>(), index in 0..6usize) {
            let suffix = IndexType::ALL.get(index).map_or(LOG_FILE_SUFFIX, |i| i.suffix());
            let name = segment_file_name(start, Uuid::from_u128(id), suffix);
            let parsed = parse_segment_file_name(&name).unwrap();
            prop_assert_eq!(parsed.start_offset, start);
            prop_assert_eq!(parsed.segment_id, Uuid::from_u128(id));
            prop_assert_eq!(parsed.index_type(), IndexType::ALL.get(index).copied());
            prop_assert_eq!(parsed.is_log(), index == 5);
        }

        #[test]
        fn arbitrary_names_never_panic(name in "\\PC{0,60}") {
            let _ = parse_partition_dir_name(&name);
            let _ = parse_segment_file_name(&name);
        }
    }
}
