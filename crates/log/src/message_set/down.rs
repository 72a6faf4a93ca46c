//! The batches a fetch read become messages of an old fetch's magic
//! (Kafka's down-conversion).
//!
//! As Kafka 3.9 does for Fetch v0–v3: control batches are left out (an old
//! client cannot tell them from data), records before the fetch offset are
//! dropped (a batch is read whole), headers are dropped (v0/v1 have none),
//! and a magic 1 message keeps the record's timestamp and its type. The
//! messages are written uncompressed: the old formats cannot carry zstd,
//! and an uncompressed message is read by every old client.

use {
    super::{LOG_APPEND_TIME_BIT, MAGIC_V1, write_message},
    crate::batch::{BatchScan, decode_records},
    bytes::Bytes,
    kafka_protocol::records::TimestampType,
};

/// The messages of magic `magic` for the v2 `batches` a fetch from
/// `fetch_offset` read, at most `limit` bytes of them (but always the first
/// message, so a message larger than the limit cannot stall the client).
/// A batch that does not decode ends the conversion there.
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
        for r in records.iter().filter(|r| r.offset >= fetch_offset) {
            let mut next = Vec::new();
            let attributes = if magic == MAGIC_V1 && r.timestamp_type == TimestampType::LogAppend {
                LOG_APPEND_TIME_BIT
            } else {
                0
            };
            write_message(
                &mut next,
                r.offset,
                magic,
                attributes,
                r.timestamp,
                r.key.as_deref(),
                r.value.as_deref(),
            );
            if !out.is_empty() && out.len() + next.len() > limit {
                return Bytes::from(out);
            }
            out.extend_from_slice(&next);
        }
    }
    Bytes::from(out)
}
