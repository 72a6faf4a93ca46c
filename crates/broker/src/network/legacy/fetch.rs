//! Fetch v0–v3: the fetch path reads v2 batches and converts them to
//! message format v0 (Fetch v0–v1) or v1 (Fetch v2–v3) before this writes
//! them ([`crate::fetch::convert`]).
//!
//! Request: `replica_id i32, max_wait_ms i32, min_bytes i32, [max_bytes
//! i32 (v3)], [topic string, [partition i32, fetch_offset i64,
//! partition_max_bytes i32]]`. Without v3's `max_bytes` the response is
//! bounded per partition only, as Kafka did. Response: `[throttle_time_ms
//! i32 (v1+)], [topic, [partition, error_code i16, high_watermark i64,
//! records bytes]]`.

use {
    super::{
        reason,
        wire::{Reader, Writer},
    },
    crate::network::codec::Request,
    bytes::{BufMut, Bytes, BytesMut},
    kafka_protocol::messages::{
        BrokerId, FetchRequest, FetchResponse, TopicName,
        fetch_request::{FetchPartition, FetchTopic},
    },
};

/// The message-format magic a Fetch of `version` (below v4) reads.
#[must_use]
pub fn magic(version: i16) -> i8 {
    if version <= 1 {
        krabka_log::message_set::MAGIC_V0
    } else {
        krabka_log::message_set::MAGIC_V1
    }
}

/// Decodes a Fetch v0–v3 body.
///
/// # Errors
///
/// The reason the body does not parse.
pub fn decode(buf: &mut Bytes, version: i16) -> Result<Request, String> {
    let mut r = Reader::new(buf);
    let mut request = FetchRequest::default();
    request.replica_id = BrokerId(r.i32().map_err(reason)?);
    request.max_wait_ms = r.i32().map_err(reason)?;
    request.min_bytes = r.i32().map_err(reason)?;
    request.max_bytes = if version >= 3 {
        r.i32().map_err(reason)?
    } else {
        i32::MAX
    };
    request.isolation_level = 0;
    request.session_id = 0;
    request.session_epoch = -1;
    request.topics = r
        .array(6, |r| {
            let mut topic = FetchTopic::default();
            topic.topic = TopicName(r.string()?);
            topic.partitions = r.array(16, |r| {
                let mut p = FetchPartition::default();
                p.partition = r.i32()?;
                p.fetch_offset = r.i64()?;
                p.partition_max_bytes = r.i32()?;
                p.current_leader_epoch = -1;
                p.last_fetched_epoch = -1;
                p.log_start_offset = -1;
                Ok(p)
            })?;
            Ok(topic)
        })
        .map_err(reason)?;
    Ok(Request::Fetch(request))
}

/// Writes a Fetch response at v0–v3; the records are already in the
/// version's message format.
pub fn encode(response: &FetchResponse, version: i16, buf: &mut BytesMut) {
    if version >= 1 {
        buf.put_i32(response.throttle_time_ms);
    }
    buf.put_count(response.responses.len());
    for topic in &response.responses {
        buf.put_string(Some(topic.topic.0.as_str()));
        buf.put_count(topic.partitions.len());
        for p in &topic.partitions {
            buf.put_i32(p.partition_index);
            buf.put_i16(p.error_code);
            buf.put_i64(p.high_watermark);
            buf.put_nullable_bytes(Some(p.records.as_deref().unwrap_or_default()));
        }
    }
}
