//! Produce v0–v2: message formats v0/v1, converted to one v2 batch per
//! partition before the produce handler queues them.
//!
//! Request v0–v2: `acks i16, timeout_ms i32, [topic string, [partition
//! i32, records bytes]]` (v3 added the transactional id in front). The body
//! is decoded here with each message set as sent; the produce handler
//! converts them ([`convert`]) once the request is authorized, because what
//! compressed messages may inflate to is a broker setting
//! (`krabka.decompressed.batch.max.bytes`). A partition whose message set
//! cannot be converted is refused alone, as Kafka does: MESSAGE_TOO_LARGE
//! when it inflates past the bound, CORRUPT_MESSAGE otherwise (bad CRC, cut
//! off, nested or unknown compression). Response v0: `[topic, [partition,
//! error_code, base_offset]]`; v1 adds `throttle_time_ms` at the end; v2
//! also `log_append_time_ms` after the base offset (v2's form is v3's).

use {
    super::{
        reason,
        wire::{Reader, WireError, Writer},
    },
    crate::network::codec::Request,
    bytes::{BufMut, Bytes, BytesMut},
    kafka_protocol::{
        error::ResponseError,
        messages::{
            ProduceRequest, ProduceResponse, TopicName,
            produce_request::{PartitionProduceData, TopicProduceData},
        },
    },
    krabka_log::message_set::{self, MessageSetError},
};

/// The newest Produce version that carries message sets (v0/v1 messages).
pub const MAX_VERSION: i16 = 2;

/// Decodes a Produce v0–v2 body; each partition's records are its message
/// set as sent, for [`convert`].
///
/// # Errors
///
/// The reason the body does not parse.
pub fn decode(buf: &mut Bytes, _version: i16) -> Result<Request, String> {
    let mut r = Reader::new(buf);
    let mut request = ProduceRequest::default();
    request.acks = r.i16().map_err(reason)?;
    request.timeout_ms = r.i32().map_err(reason)?;
    request.topic_data = r
        .array(6, |r| {
            let mut topic = TopicProduceData::default();
            topic.name = TopicName(r.string()?);
            topic.partition_data = r.array(8, partition)?;
            Ok(topic)
        })
        .map_err(reason)?;
    Ok(Request::Produce(request))
}

fn partition(r: &mut Reader<'_>) -> Result<PartitionProduceData, WireError> {
    let mut p = PartitionProduceData::default();
    p.index = r.i32()?;
    p.records = Some(r.nullable_bytes()?.unwrap_or_default());
    Ok(p)
}

/// Converts the message set of every partition of a decoded Produce v0–v2
/// request into one v2 batch, in place. The compressed messages of all its
/// partitions inflate into at most `limit` bytes in all (the frame's size
/// bounds what was sent, not what it inflates to). Returns one entry per
/// partition in request order: the refusal of a partition whose set does
/// not convert (its records are then left empty), `None` for the others.
#[must_use]
pub fn convert(request: &mut ProduceRequest, limit: usize) -> Vec<Option<(ResponseError, String)>> {
    let mut budget = limit;
    let mut refusals = Vec::new();
    for topic in &mut request.topic_data {
        for p in &mut topic.partition_data {
            let set = p.records.take().unwrap_or_default();
            let refusal = match message_set::to_batch(set, &mut budget) {
                Ok(batch) => {
                    p.records = Some(batch);
                    None
                }
                Err(MessageSetError::TooLarge(bound)) => {
                    tracing::warn!(
                        topic = %topic.name.0,
                        partition = p.index,
                        bound,
                        "refusing a legacy message set: its compressed messages inflate past krabka.decompressed.batch.max.bytes"
                    );
                    Some((
                        ResponseError::MessageTooLarge,
                        format!(
                            "the compressed messages of the request inflate to more than {limit} bytes (krabka.decompressed.batch.max.bytes)"
                        ),
                    ))
                }
                Err(e) => {
                    tracing::debug!(topic = %topic.name.0, partition = p.index, error = %e, "refusing a legacy message set");
                    Some((ResponseError::CorruptMessage, e.to_string()))
                }
            };
            if refusal.is_some() {
                p.records = Some(Bytes::new());
            }
            refusals.push(refusal);
        }
    }
    refusals
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
