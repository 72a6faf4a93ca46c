//! Produce v0–v2: message formats v0/v1, converted to one v2 batch per
//! partition before the produce handler sees them.
//!
//! Request v0–v2: `acks i16, timeout_ms i32, [topic string, [partition
//! i32, records bytes]]` (v3 added the transactional id in front). A
//! partition whose message set cannot be converted (bad CRC, cut off,
//! nested or unknown compression) is handed on with no records, which the
//! handler answers with CORRUPT_MESSAGE for that partition alone, as Kafka
//! does. Response v0: `[topic, [partition, error_code, base_offset]]`; v1
//! adds `throttle_time_ms` at the end; v2 also `log_append_time_ms` after
//! the base offset (v2's form is v3's).

use {
    super::{
        reason,
        wire::{Reader, WireError, Writer},
    },
    crate::network::codec::Request,
    bytes::{BufMut, Bytes, BytesMut},
    kafka_protocol::messages::{
        ProduceRequest, ProduceResponse, TopicName,
        produce_request::{PartitionProduceData, TopicProduceData},
    },
    krabka_log::message_set,
};

/// The most bytes the compressed messages of one request may inflate to:
/// the frame's size bounds what was sent, not what it inflates to.
pub const INFLATE_LIMIT: usize = 64 << 20;

/// Decodes a Produce v0–v2 body, converting each partition's message set.
///
/// # Errors
///
/// The reason the body does not parse.
pub fn decode(buf: &mut Bytes, _version: i16) -> Result<Request, String> {
    let mut r = Reader::new(buf);
    let mut request = ProduceRequest::default();
    request.acks = r.i16().map_err(reason)?;
    request.timeout_ms = r.i32().map_err(reason)?;
    let mut budget = INFLATE_LIMIT;
    request.topic_data = r
        .array(6, |r| {
            let mut topic = TopicProduceData::default();
            topic.name = TopicName(r.string()?);
            topic.partition_data = r.array(8, |r| partition(r, &mut budget))?;
            Ok(topic)
        })
        .map_err(reason)?;
    Ok(Request::Produce(request))
}

fn partition(r: &mut Reader<'_>, budget: &mut usize) -> Result<PartitionProduceData, WireError> {
    let mut p = PartitionProduceData::default();
    p.index = r.i32()?;
    let set = r.nullable_bytes()?.unwrap_or_default();
    p.records = Some(match message_set::to_batch(set, budget) {
        Ok(batch) => batch,
        Err(e) => {
            tracing::debug!(partition = p.index, error = %e, "refusing a legacy message set");
            Bytes::new()
        }
    });
    Ok(p)
}

/// Writes a Produce response at v0–v2.
pub fn encode(response: &ProduceResponse, version: i16, buf: &mut BytesMut) {
    buf.put_count(response.responses.len());
    for topic in &response.responses {
        buf.put_string(Some(topic.name.0.as_str()));
        buf.put_count(topic.partition_responses.len());
        for p in &topic.partition_responses {
            buf.put_i32(p.index);
            buf.put_i16(p.error_code);
            buf.put_i64(p.base_offset);
            if version >= 2 {
                buf.put_i64(p.log_append_time_ms);
            }
        }
    }
    if version >= 1 {
        buf.put_i32(response.throttle_time_ms);
    }
}
