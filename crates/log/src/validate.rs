//! The checks and rewrites of a client's batch that need its records:
//! Kafka's `LogValidator`, in small.
//!
//! Most batches pass untouched: their header alone shows that nothing below
//! needs the records, and the log stores them byte for byte. A batch is
//! opened (decompressed) only when
//!
//! - the log compacts: every record needs a key;
//! - timestamps are bounded (`message.timestamp.before.max.ms`, or a header
//!   max timestamp beyond `message.timestamp.after.max.ms`) and the topic
//!   keeps CreateTime;
//! - `compression.type` names a codec other than the batch's: the records
//!   are recompressed, as Kafka does.
//!
//! An opened batch inflates into at most `krabka.decompressed.batch.max.bytes`
//! ([`LogConfig::decompressed_batch_max_bytes`]): a batch that would inflate
//! further is refused whole, as too large, before that memory is taken.
//!
//! The records are walked in their wire form, never decoded into values, so
//! the checks see exactly what the client sent and a recompressed batch
//! carries the very same record bytes (keys, values, duplicate or non-UTF-8
//! header keys) under a new codec; only the header's codec bits, length and
//! CRC change. A refused batch names each bad record by its index in the
//! batch (KIP-467), so a client fails exactly those records.

use {
    crate::{
        LogConfig, LogError, TimestampType,
        batch::{self, BatchHeader, HEADER_SIZE},
    },
    bytes::{BufMut, BytesMut},
    kafka_protocol::{
        compression::{Compressor, Gzip, Lz4, Snappy, Zstd},
        records::Compression,
    },
};

/// One refused record of a batch (KIP-467's `BatchIndexAndErrorMessage`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    /// Index of the record within its batch.
    pub batch_index: i32,
    /// Why it was refused.
    pub message: String,
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Java's `ProduceResponse.RecordError.toString`, which Kafka's
        // summary message lists.
        write!(
            f,
            "RecordError(batchIndex={}, message='{}')",
            self.batch_index, self.message
        )
    }
}

/// Checks one client batch (already framed and CRC-checked) against the
/// log's configuration at time `now`; returns the batch recompressed when
/// `compression.type` asks for another codec, `None` to store it as sent.
/// `topic_partition` names the log in messages, as Kafka's do.
///
/// # Errors
///
/// [`LogError::RecordErrors`] naming every refused record,
/// [`LogError::DecompressedTooLarge`] when the records inflate past
/// `config.decompressed_batch_max_bytes`, [`LogError::CorruptRecord`] when
/// they cannot be walked or decompressed.
pub fn validate_batch(
    batch: &[u8],
    header: &BatchHeader,
    config: &LogConfig,
    topic_partition: &str,
    now: i64,
) -> Result<Option<Vec<u8>>, LogError> {
    let codec = header
        .compression()
        .ok_or_else(|| LogError::corrupt("unknown compression codec"))?;
    let target = config.compression_type.target().filter(|t| *t != codec);
    let bounds = TimestampBounds::of(config, now);
    let check_timestamps = bounds.is_some_and(|b| {
        b.lower > i64::MIN || header.max_timestamp > b.upper || header.base_timestamp < b.lower
    });
    let check_keys = config.cleanup_policy.compacts();
    if !check_timestamps && !check_keys && target.is_none() {
        return Ok(None);
    }
    let size = usize::try_from(header.size()).unwrap_or(usize::MAX);
    let payload = batch
        .get(HEADER_SIZE..size)
        .ok_or_else(|| LogError::corrupt("batch shorter than its header says"))?;
    let raw = crate::compression::inflate(codec, payload, config.decompressed_batch_max_bytes)?;
    if check_timestamps || check_keys {
        let mut errors = Vec::new();
        let mut timestamp_error = false;
        let records = walk_records(&raw, header)?;
        for (index, record) in records.iter().enumerate() {
            let batch_index = i32::try_from(index).unwrap_or(i32::MAX);
            if check_keys && record.key_length < 0 {
                errors.push(RecordError {
                    batch_index,
                    message: format!(
                        "Compacted topic cannot accept message without key in topic partition {topic_partition}."
                    ),
                });
            }
            let timestamp = header.base_timestamp.saturating_add(record.timestamp_delta);
            let out_of_range = bounds
                .filter(|_| timestamp != -1)
                .filter(|b| timestamp < b.lower || timestamp > b.upper);
            if let Some(b) = out_of_range {
                timestamp_error = true;
                errors.push(RecordError {
                    batch_index,
                    message: format!(
                        "Timestamp {timestamp} of message with offset {} is out of range. The timestamp should be within [{}, {}]",
                        header
                            .base_offset
                            .saturating_add(i64::from(record.offset_delta)),
                        b.lower,
                        b.upper
                    ),
                });
            }
        }
        if !errors.is_empty() {
            return Err(refusal(errors, timestamp_error));
        }
    }
    target
        .map(|target| {
            let compressed = compress(target, &raw)?;
            batch::rebuild_with_payload(batch, target, &compressed)
        })
        .transpose()
}

/// Kafka's `processRecordErrors`: one summary for the whole batch.
fn refusal(errors: Vec<RecordError>, invalid_timestamp: bool) -> LogError {
    let message = if invalid_timestamp {
        "One or more records have been rejected due to invalid timestamp".to_owned()
    } else {
        let shown: Vec<String> = errors.iter().take(3).map(ToString::to_string).collect();
        format!(
            "One or more records have been rejected due to {} record errors in total, and only showing the first three errors at most: [{}]",
            errors.len(),
            shown.join(", ")
        )
    };
    LogError::RecordErrors {
        invalid_timestamp,
        message,
        records: errors,
    }
}

/// The timestamps a CreateTime log accepts at one moment.
#[derive(Debug, Clone, Copy)]
struct TimestampBounds {
    lower: i64,
    upper: i64,
}

impl TimestampBounds {
    fn of(config: &LogConfig, now: i64) -> Option<Self> {
        if config.message_timestamp_type != TimestampType::CreateTime {
            return None;
        }
        let ms = |v: Option<u64>| v.and_then(|v| i64::try_from(v).ok());
        let lower =
            ms(config.message_timestamp_before_max_ms).map_or(i64::MIN, |b| now.saturating_sub(b));
        let upper =
            ms(config.message_timestamp_after_max_ms).map_or(i64::MAX, |a| now.saturating_add(a));
        (lower > i64::MIN || upper < i64::MAX).then_some(Self { lower, upper })
    }
}

/// The fields of one record the checks need.
#[derive(Debug, Clone, Copy)]
struct RecordView {
    timestamp_delta: i64,
    offset_delta: i32,
    /// -1 for a null key.
    key_length: i64,
}

/// Walks the records of an uncompressed record area; each must lie within
/// it and their count must match the header's.
fn walk_records(raw: &[u8], header: &BatchHeader) -> Result<Vec<RecordView>, LogError> {
    let expected = usize::try_from(header.record_count).unwrap_or(0);
    // Each record takes at least 7 bytes, so the count cannot make us
    // allocate more than the bytes at hand justify.
    let mut records = Vec::with_capacity(expected.min(raw.len() / 7 + 1));
    let mut pos = 0usize;
    while pos < raw.len() {
        let corrupt = || {
            LogError::corrupt(format!(
                "record {} of the batch is malformed",
                records.len()
            ))
        };
        let length = read_varint(raw, &mut pos).ok_or_else(corrupt)?;
        let length = usize::try_from(length).map_err(|_| corrupt())?;
        let end = pos
            .checked_add(length)
            .filter(|e| *e <= raw.len())
            .ok_or_else(corrupt)?;
        let body = &raw[pos..end];
        let mut at = 1usize; // attributes
        let timestamp_delta = read_varint(body, &mut at).ok_or_else(corrupt)?;
        let offset_delta = read_varint(body, &mut at).ok_or_else(corrupt)?;
        let key_length = read_varint(body, &mut at).ok_or_else(corrupt)?;
        if body.is_empty() || key_length < -1 {
            return Err(corrupt());
        }
        records.push(RecordView {
            timestamp_delta,
            offset_delta: i32::try_from(offset_delta).map_err(|_| corrupt())?,
            key_length,
        });
        pos = end;
    }
    if records.len() != expected {
        return Err(LogError::corrupt(format!(
            "batch declares {expected} records but holds {}",
            records.len()
        )));
    }
    Ok(records)
}

/// A zig-zag varint (Kafka's record fields), at most 10 bytes.
pub(crate) fn read_varint(buf: &[u8], pos: &mut usize) -> Option<i64> {
    let mut value: u64 = 0;
    for shift in 0..10 {
        let byte = *buf.get(*pos)?;
        *pos += 1;
        value |= u64::from(byte & 0x7f) << (7 * shift);
        if byte & 0x80 == 0 {
            return Some(((value >> 1) as i64) ^ -((value & 1) as i64));
        }
    }
    None
}

fn compress(codec: Compression, raw: &[u8]) -> Result<Vec<u8>, LogError> {
    let mut out = BytesMut::with_capacity(raw.len() / 2 + 64);
    let fill = |tmp: &mut BytesMut| {
        tmp.put_slice(raw);
        Ok(())
    };
    let result = match codec {
        Compression::None => {
            out.put_slice(raw);
            Ok(())
        }
        Compression::Gzip => Gzip::compress(&mut out, fill),
        Compression::Snappy => Snappy::compress(&mut out, fill),
        Compression::Lz4 => Lz4::compress(&mut out, fill),
        Compression::Zstd => Zstd::compress(&mut out, fill),
    };
    result.map_err(|e| LogError::invalid(format!("compressing records with {codec:?}: {e}")))?;
    Ok(out.to_vec())
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        crate::CompressionType,
        bytes::Bytes,
        kafka_protocol::records::{
            Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
            TimestampType as Wire,
        },
    };

    fn record(i: usize, key: Option<&[u8]>, value: Vec<u8>) -> Record {
        Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: 7,
            producer_epoch: 1,
            timestamp_type: Wire::Creation,
            offset: i as i64,
            sequence: i as i32,
            timestamp: 1,
            key: key.map(Bytes::copy_from_slice),
            value: Some(Bytes::from(value)),
            headers: Default::default(),
        }
    }

    fn encode(records: Vec<Record>, codec: Compression) -> Vec<u8> {
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &records,
            &RecordEncodeOptions {
                version: 2,
                compression: codec,
            },
        )
        .unwrap();
        buf.to_vec()
    }

    fn batch(keys: &[Option<&str>], timestamps: &[i64], codec: Compression) -> Vec<u8> {
        let records: Vec<Record> = keys
            .iter()
            .zip(timestamps)
            .enumerate()
            .map(|(i, (k, ts))| Record {
                timestamp: *ts,
                ..record(i, k.map(str::as_bytes), vec![b'v'; 300])
            })
            .collect();
        encode(records, codec)
    }

    fn check(bytes: &[u8], config: &LogConfig, now: i64) -> Result<Option<Vec<u8>>, LogError> {
        let header = batch::check_batch(bytes).unwrap();
        validate_batch(bytes, &header, config, "t-0", now)
    }

    #[test]
    fn an_ordinary_batch_is_stored_as_sent() {
        let b = batch(&[None, Some("k")], &[1000, 1001], Compression::Gzip);
        assert!(check(&b, &LogConfig::default(), 1000).unwrap().is_none());
    }

    #[test]
    fn keyless_records_of_a_compacted_log_are_named() {
        let config = LogConfig {
            cleanup_policy: crate::CleanupPolicy::Compact,
            ..LogConfig::default()
        };
        let b = batch(
            &[Some("a"), None, Some("c"), None],
            &[5; 4],
            Compression::Lz4,
        );
        let Err(LogError::RecordErrors {
            invalid_timestamp,
            message,
            records,
        }) = check(&b, &config, 5)
        else {
            panic!("refused");
        };
        assert!(!invalid_timestamp);
        assert_eq!(
            records.iter().map(|r| r.batch_index).collect::<Vec<_>>(),
            [1, 3]
        );
        assert!(message.contains("due to 2 record errors"), "{message}");
        assert!(message.contains("RecordError(batchIndex=1, message='Compacted topic cannot accept message without key in topic partition t-0.')"), "{message}");
    }

    #[test]
    fn timestamps_outside_the_bounds_are_named() {
        let config = LogConfig {
            message_timestamp_before_max_ms: Some(100),
            message_timestamp_after_max_ms: Some(100),
            ..LogConfig::default()
        };
        let now = 10_000;
        let b = batch(
            &[Some("a"); 4],
            &[now, now - 101, now + 100, now + 101],
            Compression::None,
        );
        let Err(e @ LogError::RecordErrors { .. }) = check(&b, &config, now) else {
            panic!("refused");
        };
        assert_eq!(e.kafka_error_code(), 32);
        let LogError::RecordErrors { records, .. } = e else {
            unreachable!()
        };
        assert_eq!(
            records.iter().map(|r| r.batch_index).collect::<Vec<_>>(),
            [1, 3]
        );
        assert!(
            records[1]
                .message
                .contains("should be within [9900, 10100]"),
            "{}",
            records[1].message
        );
        // LogAppendTime topics take any timestamp.
        let lat = LogConfig {
            message_timestamp_type: TimestampType::LogAppendTime,
            ..config
        };
        assert!(check(&b, &lat, now).unwrap().is_none());
    }

    #[test]
    fn recompression_keeps_the_record_bytes_and_the_producer_fields() {
        for target in [
            CompressionType::Zstd,
            CompressionType::Uncompressed,
            CompressionType::Snappy,
        ] {
            let config = LogConfig {
                compression_type: target,
                ..LogConfig::default()
            };
            let sent = batch(&[Some("a"), None, Some("c")], &[1, 2, 3], Compression::Gzip);
            let stored = check(&sent, &config, 2).unwrap().unwrap();
            let (before, after) = (
                batch::check_batch(&sent).unwrap(),
                batch::check_batch(&stored).unwrap(),
            );
            assert_eq!(after.compression(), target.target());
            assert_eq!(
                (
                    after.producer_id,
                    after.producer_epoch,
                    after.base_sequence,
                    after.record_count,
                    after.max_timestamp
                ),
                (
                    before.producer_id,
                    before.producer_epoch,
                    before.base_sequence,
                    before.record_count,
                    before.max_timestamp
                )
            );
            let decoded = RecordBatchDecoder::decode(&mut Bytes::from(stored)).unwrap();
            let original = RecordBatchDecoder::decode(&mut Bytes::from(sent)).unwrap();
            assert_eq!(decoded.records, original.records);
        }
    }

    #[test]
    fn a_batch_inflating_past_the_bound_is_refused_as_too_large() {
        let bound = 1 << 20;
        let mut config = LogConfig {
            cleanup_policy: crate::CleanupPolicy::Compact,
            decompressed_batch_max_bytes: bound,
            ..LogConfig::default()
        };
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let bomb = encode(vec![record(0, Some(b"k"), vec![0; 2 * bound])], codec);
            let refused = check(&bomb, &config, 0);
            assert!(
                matches!(
                    &refused,
                    Err(e @ LogError::DecompressedTooLarge { limit, .. })
                        if *limit == bound && e.kafka_error_code() == 10
                ),
                "{codec:?}: {refused:?}"
            );
        }
        // A topic that recompresses opens the batch too; a larger bound admits it.
        config.cleanup_policy = crate::CleanupPolicy::Delete;
        config.compression_type = CompressionType::Lz4;
        let batch = encode(
            vec![record(0, Some(b"k"), vec![0; 2 * bound])],
            Compression::Gzip,
        );
        assert!(matches!(
            check(&batch, &config, 0),
            Err(LogError::DecompressedTooLarge { .. })
        ));
        config.decompressed_batch_max_bytes = 4 * bound;
        assert!(check(&batch, &config, 0).unwrap().is_some());
    }

    #[test]
    fn malformed_records_are_corrupt_not_a_panic() {
        let config = LogConfig {
            cleanup_policy: crate::CleanupPolicy::Compact,
            ..LogConfig::default()
        };
        let mut b = batch(&[Some("a")], &[1], Compression::None);
        let last = b.len() - 1;
        b[HEADER_SIZE] = 0x7f; // record length far beyond the batch
        b[last] ^= 0;
        batch::recompute_crc(&mut b);
        assert!(matches!(
            check(&b, &config, 1),
            Err(LogError::CorruptRecord { .. })
        ));
    }
}
