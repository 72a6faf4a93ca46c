//! Per-partition log configuration, named after Kafka's topic configs.
//!
//! Every field but one maps to one Kafka topic config (named in its doc
//! comment) and `Default` gives Kafka's default, so a broker can fill a
//! `LogConfig` straight from `server.properties` / `AlterConfigs` values; the
//! exception is the broker-wide bound on inflating a client's batch.

/// `cleanup.policy`: what happens to old data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CleanupPolicy {
    /// `delete`: whole segments are removed by time and size retention.
    #[default]
    Delete,
    /// `compact`: the cleaner keeps the latest record per key.
    Compact,
    /// `compact,delete`: both.
    CompactDelete,
}

impl CleanupPolicy {
    /// Parses Kafka's text form (`delete`, `compact`, `compact,delete` in any
    /// order, spaces allowed); `None` for anything else.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        let mut compact = false;
        let mut delete = false;
        for part in text.split(',') {
            match part.trim() {
                "compact" => compact = true,
                "delete" => delete = true,
                _ => return None,
            }
        }
        match (compact, delete) {
            (true, true) => Some(Self::CompactDelete),
            (true, false) => Some(Self::Compact),
            (false, true) => Some(Self::Delete),
            (false, false) => None,
        }
    }

    /// Kafka's text form of the policy.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delete => "delete",
            Self::Compact => "compact",
            Self::CompactDelete => "compact,delete",
        }
    }

    /// Whether the log cleaner compacts this log.
    #[must_use]
    pub fn compacts(self) -> bool {
        matches!(self, Self::Compact | Self::CompactDelete)
    }

    /// Whether time and size retention delete segments of this log.
    #[must_use]
    pub fn deletes(self) -> bool {
        matches!(self, Self::Delete | Self::CompactDelete)
    }
}

/// `message.timestamp.type`: which timestamp the log keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimestampType {
    /// `CreateTime`: the producer's timestamps are stored as sent.
    #[default]
    CreateTime,
    /// `LogAppendTime`: the broker stamps each batch with its append time.
    LogAppendTime,
}

/// `compression.type`: the codec the log stores batches in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CompressionType {
    /// `producer`: batches are stored with the codec the producer chose.
    #[default]
    Producer,
    /// `uncompressed`: batches are stored without compression.
    Uncompressed,
    /// `gzip`.
    Gzip,
    /// `snappy`.
    Snappy,
    /// `lz4`.
    Lz4,
    /// `zstd`.
    Zstd,
}

impl CompressionType {
    /// Parses Kafka's text form (case-insensitive); `None` for anything else.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text.trim().to_ascii_lowercase().as_str() {
            "producer" => Self::Producer,
            "uncompressed" => Self::Uncompressed,
            "gzip" => Self::Gzip,
            "snappy" => Self::Snappy,
            "lz4" => Self::Lz4,
            "zstd" => Self::Zstd,
            _ => return None,
        })
    }

    /// The codec every stored batch must have; `None` for `producer`.
    #[must_use]
    pub fn target(self) -> Option<kafka_protocol::records::Compression> {
        use kafka_protocol::records::Compression;
        match self {
            Self::Producer => None,
            Self::Uncompressed => Some(Compression::None),
            Self::Gzip => Some(Compression::Gzip),
            Self::Snappy => Some(Compression::Snappy),
            Self::Lz4 => Some(Compression::Lz4),
            Self::Zstd => Some(Compression::Zstd),
        }
    }
}

/// Configuration of one partition log (Kafka topic-config names in the docs).
#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes` (1 GiB): roll when the active segment would exceed this.
    pub segment_bytes: u64,
    /// `segment.ms` (7 days): roll when the active segment is this old.
    pub segment_ms: u64,
    /// `segment.index.bytes` (10 MiB): preallocated size of each index file.
    pub segment_index_bytes: u64,
    /// `index.interval.bytes` (4096): bytes of batches between index entries.
    pub index_interval_bytes: u64,
    /// `retention.ms` (7 days; `None` = -1 = infinite).
    pub retention_ms: Option<u64>,
    /// `retention.bytes` (`None` = -1 = infinite).
    pub retention_bytes: Option<u64>,
    /// `cleanup.policy` (delete).
    pub cleanup_policy: CleanupPolicy,
    /// `delete.retention.ms` (1 day): how long tombstones survive compaction.
    pub delete_retention_ms: u64,
    /// `min.compaction.lag.ms` (0): records younger than this are not compacted.
    pub min_compaction_lag_ms: u64,
    /// `min.cleanable.dirty.ratio` (0.5): dirty share of the log that triggers cleaning.
    pub min_cleanable_dirty_ratio: f64,
    /// `flush.messages` (`None` = Long.MAX = leave flushing to the OS).
    pub flush_messages: Option<u64>,
    /// `flush.ms` (`None` = leave flushing to the OS).
    pub flush_ms: Option<u64>,
    /// `preallocate` (false). Accepted for config compatibility; segment files
    /// are not preallocated by this implementation (index files always are).
    pub preallocate: bool,
    /// `max.message.bytes` (1048588): largest record batch accepted.
    pub max_message_bytes: u32,
    /// `message.timestamp.type` (CreateTime).
    pub message_timestamp_type: TimestampType,
    /// `file.delete.delay.ms` (60000). Accepted for config compatibility:
    /// deleted segment files are unlinked at once, readers that still hold a
    /// segment keep reading it through their open file handle.
    pub file_delete_delay_ms: u64,
    /// `max.compaction.lag.ms` (`None` = Long.MAX = never forced): a record
    /// of a compacted log stays uncompacted at most this long — the active
    /// segment rolls at this age and a log whose oldest dirty batch is older
    /// is cleaned whatever its dirty ratio (KIP-354).
    pub max_compaction_lag_ms: Option<u64>,
    /// `compression.type` (producer): the codec batches are stored in; the
    /// log recompresses a batch sent with another codec, as Kafka does.
    pub compression_type: CompressionType,
    /// `message.timestamp.before.max.ms` (`None` = Long.MAX = unbounded):
    /// with CreateTime, how far in the past a record's timestamp may be.
    pub message_timestamp_before_max_ms: Option<u64>,
    /// `message.timestamp.after.max.ms` (1 hour, Kafka 4.0's default): with
    /// CreateTime, how far in the future a record's timestamp may be.
    pub message_timestamp_after_max_ms: Option<u64>,
    /// Not a topic config: Krabka's broker setting
    /// `krabka.decompressed.batch.max.bytes` (64 MiB), carried here because
    /// the log's checks open a client's compressed batches. The most bytes
    /// one batch's records may inflate to; a batch past it is refused
    /// ([`crate::LogError::DecompressedTooLarge`]) without being inflated.
    pub decompressed_batch_max_bytes: usize,
}

/// Kafka's default `segment.bytes`.
pub const DEFAULT_SEGMENT_BYTES: u64 = 1024 * 1024 * 1024;
const DAY_MS: u64 = 24 * 60 * 60 * 1000;

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            segment_ms: 7 * DAY_MS,
            segment_index_bytes: 10 * 1024 * 1024,
            index_interval_bytes: 4096,
            retention_ms: Some(7 * DAY_MS),
            retention_bytes: None,
            cleanup_policy: CleanupPolicy::Delete,
            delete_retention_ms: DAY_MS,
            min_compaction_lag_ms: 0,
            min_cleanable_dirty_ratio: 0.5,
            flush_messages: None,
            flush_ms: None,
            preallocate: false,
            max_message_bytes: 1_048_588,
            message_timestamp_type: TimestampType::CreateTime,
            file_delete_delay_ms: 60_000,
            max_compaction_lag_ms: None,
            compression_type: CompressionType::Producer,
            message_timestamp_before_max_ms: None,
            message_timestamp_after_max_ms: Some(3_600_000),
            decompressed_batch_max_bytes: crate::compression::DEFAULT_DECOMPRESSED_BATCH_MAX_BYTES,
        }
    }
}

impl LogConfig {
    /// The age at which the active segment rolls: `segment.ms`, or
    /// `max.compaction.lag.ms` when that is smaller and the log compacts
    /// (Kafka's `LogConfig.maxSegmentMs`).
    #[must_use]
    pub fn max_segment_ms(&self) -> u64 {
        match self.max_compaction_lag_ms {
            Some(lag) if self.cleanup_policy.compacts() && lag > 0 => lag.min(self.segment_ms),
            _ => self.segment_ms,
        }
    }
}

/// Configuration of the [`crate::LogCleaner`] (Kafka broker configs).
#[derive(Debug, Clone, PartialEq)]
pub struct CleanerConfig {
    /// `log.cleaner.dedupe.buffer.size` (128 MiB): memory for the key → offset
    /// map, accounted as Kafka does (16-byte key hash + 8-byte offset per key).
    pub dedupe_buffer_size: u64,
    /// `log.cleaner.io.buffer.load.factor` (0.9): how full the map may get.
    pub dedupe_buffer_load_factor: f64,
    /// `log.cleaner.backoff.ms` (15000): sleep when there is nothing to clean.
    pub backoff_ms: u64,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        Self {
            dedupe_buffer_size: 128 * 1024 * 1024,
            dedupe_buffer_load_factor: 0.9,
            backoff_ms: 15_000,
        }
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn cleanup_policy_text() {
        check!(CleanupPolicy::parse("delete") == Some(CleanupPolicy::Delete));
        check!(CleanupPolicy::parse("compact") == Some(CleanupPolicy::Compact));
        check!(CleanupPolicy::parse("delete, compact") == Some(CleanupPolicy::CompactDelete));
        check!(CleanupPolicy::parse("bogus").is_none());
        check!(CleanupPolicy::parse("").is_none());
    }
}
