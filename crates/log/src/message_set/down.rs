//! The batches a fetch read become messages of an old fetch's magic
//! (Kafka's down-conversion).
//!
//! As Kafka 3.9 does for Fetch v0–v3 (`RecordsUtil.downConvert`): control
//! batches are left out (an old client cannot tell them from data), headers
//! are dropped (v0/v1 have none), a magic 1 message keeps the record's
//! timestamp and its type, and each batch keeps its codec:
//!
//! - an uncompressed batch becomes one message per record, records before
//!   the fetch offset dropped (a batch is read whole);
//! - a gzip, snappy or lz4 batch becomes one compressed wrapper holding all
//!   its records (the client skips those before its fetch offset), compressed
//!   as Kafka compresses it. The wrapper's offset is its last record's; inner
//!   offsets are relative to the first record in magic 1 and absolute in
//!   magic 0. In magic 1 the wrapper's timestamp is the batch's log append
//!   time, or else the largest inner timestamp, and a log-append-time batch
//!   stamps every inner message with that time.
//!
//! zstd batches never get here: the old formats cannot carry zstd, and the
//! fetch path cuts them off before converting (Kafka refuses them too); one
//! that does ends the conversion. Stored batches are inflated within
//! [`crate::compression::STORED_BATCH_INFLATE_LIMIT`].

use {
    super::{LOG_APPEND_TIME_BIT, MAGIC_V1, codec, write_message},
    crate::batch::{BatchScan, decode_records},
    bytes::Bytes,
    kafka_protocol::records::{Compression, Record},
};

/// The messages of magic `magic` for the v2 `batches` a fetch from
/// `fetch_offset` read, at most `limit` bytes of them (but always the first
/// message or wrapper, so one larger than the limit cannot stall the
/// client). A batch that does not decode or compress ends the conversion
/// there.
#[must_use]
pub fn from_batches(batches: &[u8], magic: i8, fetch_offset: i64, limit: usize) -> Bytes {
    let mut out = Vec::new();
    for (at, header) in BatchScan::new(batches, false) {
        if header.is_control() {
            continue;
        }
        let end = at.saturating_add(usize::try_from(header.size()).unwrap_or(usize::MAX));
        let Some(Ok(records)) = batches.get(at..end).map(decode_records) else {
            break;
        };
        let log_append_time = header.is_log_append_time().then_some(header.max_timestamp);
        let codec = header.compression().unwrap_or(Compression::None);
        if codec == Compression::None {
            for r in records.iter().filter(|r| r.offset >= fetch_offset) {
                let mut next = Vec::new();
                append_message(&mut next, r, r.offset, magic, log_append_time);
                if !out.is_empty() && out.len() + next.len() > limit {
                    return Bytes::from(out);
                }
                out.extend_from_slice(&next);
            }
        } else {
            let Some(wrapper) = wrapper(&records, codec, magic, log_append_time) else {
                break;
            };
            if !out.is_empty() && out.len() + wrapper.len() > limit {
                return Bytes::from(out);
            }
            out.extend_from_slice(&wrapper);
        }
    }
    Bytes::from(out)
}

/// Appends record `r` as a message at `offset` (Kafka's
/// `MemoryRecordsBuilder.appendLegacyRecord`).
fn append_message(
    out: &mut Vec<u8>,
    r: &Record,
    offset: i64,
    magic: i8,
    log_append_time: Option<i64>,
) {
    let attributes = if magic == MAGIC_V1 && log_append_time.is_some() {
        LOG_APPEND_TIME_BIT
    } else {
        0
    };
    write_message(
        out,
        offset,
        magic,
        attributes,
        log_append_time.unwrap_or(r.timestamp),
        r.key.as_deref(),
        r.value.as_deref(),
    );
}

/// One compressed wrapper holding `records`, as Kafka's
/// `MemoryRecordsBuilder` closes a legacy compressed batch
/// (`writeLegacyCompressedWrapperHeader`); `None` for no records or a codec
/// the old formats lack.
fn wrapper(
    records: &[Record],
    codec: Compression,
    magic: i8,
    log_append_time: Option<i64>,
) -> Option<Vec<u8>> {
    let codec_id = codec::codec_id(codec)?;
    let base = records.first()?.offset;
    let last = records.last()?.offset;
    let mut inner = Vec::new();
    let mut max_timestamp = -1;
    for r in records {
        let offset = if magic >= MAGIC_V1 {
            r.offset.wrapping_sub(base)
        } else {
            r.offset
        };
        append_message(&mut inner, r, offset, magic, log_append_time);
        max_timestamp = max_timestamp.max(r.timestamp);
    }
    let value = codec::deflate(codec, magic, &inner).ok()?;
    let mut attributes = codec_id;
    if magic == MAGIC_V1 && log_append_time.is_some() {
        attributes |= LOG_APPEND_TIME_BIT;
    }
    let mut out = Vec::new();
    write_message(
        &mut out,
        last,
        magic,
        attributes,
        log_append_time.unwrap_or(max_timestamp),
        None,
        Some(&value),
    );
    Some(out)
}
