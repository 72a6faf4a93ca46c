//! DescribeLogDirs v5 (Kafka 4.2, KIP-1066): v2's request; the response
//! adds whether each log dir is cordoned (closed to new partitions).
//! Krabka does not cordon log dirs, so every dir answers `false`.
//!
//! Response v5: `throttle_time_ms i32, error_code i16, results [error_code
//! i16, log_dir compact_string, topics [name compact_string, partitions
//! [partition_index i32, partition_size i64, offset_lag i64, is_future_key
//! bool, tags], tags], total_bytes i64, usable_bytes i64, is_cordoned
//! bool, tags], tags`.

use {
    crate::network::{codec::Request, wire::CompactWriter},
    bytes::{BufMut, Bytes, BytesMut},
    kafka_protocol::{
        messages::{DescribeLogDirsRequest, DescribeLogDirsResponse},
        protocol::Decodable,
    },
};

/// The version whose request form v5 shares.
const REQUEST_AS: i16 = 4;

/// Decodes a DescribeLogDirs v5 body.
///
/// # Errors
///
/// The reason the body does not parse.
pub fn decode(buf: &mut Bytes, _version: i16) -> Result<Request, String> {
    DescribeLogDirsRequest::decode(buf, REQUEST_AS)
        .map(Request::DescribeLogDirs)
        .map_err(|e| e.to_string())
}

/// Writes a DescribeLogDirs response at v5.
pub fn encode(response: &DescribeLogDirsResponse, buf: &mut BytesMut) {
    buf.put_i32(response.throttle_time_ms);
    buf.put_i16(response.error_code);
    buf.put_compact_count(response.results.len());
    for dir in &response.results {
        buf.put_i16(dir.error_code);
        buf.put_compact_string(Some(&dir.log_dir));
        buf.put_compact_count(dir.topics.len());
        for topic in &dir.topics {
            buf.put_compact_string(Some(&topic.name.0));
            buf.put_compact_count(topic.partitions.len());
            for p in &topic.partitions {
                buf.put_i32(p.partition_index);
                buf.put_i64(p.partition_size);
                buf.put_i64(p.offset_lag);
                buf.put_u8(u8::from(p.is_future_key));
                buf.put_no_tags();
            }
            buf.put_no_tags();
        }
        buf.put_i64(dir.total_bytes);
        buf.put_i64(dir.usable_bytes);
        // Not cordoned.
        buf.put_u8(0);
        buf.put_no_tags();
    }
    buf.put_no_tags();
}
