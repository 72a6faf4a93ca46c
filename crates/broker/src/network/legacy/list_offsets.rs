//! ListOffsets v0: one offset per partition, in the old array form.
//!
//! Request v0: `replica_id i32, [topic string, [partition i32, timestamp
//! i64, max_num_offsets i32]]`; v1 dropped `max_num_offsets` and answers one
//! offset. Response v0: `[topic, [partition, error_code i16,
//! old_style_offsets [i64]]]`. Kafka 3.9 could list several segment base
//! offsets for v0; the clients that send v0 (sarama, librdkafka) ask for
//! one, so the answer is v1's single offset, or none on an error.

use {
    super::{
        reason,
        wire::{Reader, Writer},
    },
    crate::network::codec::Request,
    bytes::{BufMut, Bytes, BytesMut},
    kafka_protocol::messages::{
        BrokerId, ListOffsetsRequest, ListOffsetsResponse, TopicName,
        list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic},
    },
};

/// Decodes a ListOffsets v0 body.
///
/// # Errors
///
/// The reason the body does not parse.
pub fn decode(buf: &mut Bytes, _version: i16) -> Result<Request, String> {
    let mut r = Reader::new(buf);
    let mut request = ListOffsetsRequest::default();
    request.replica_id = BrokerId(r.i32().map_err(reason)?);
    request.topics = r
        .array(6, |r| {
            let mut topic = ListOffsetsTopic::default();
            topic.name = TopicName(r.string()?);
            topic.partitions = r.array(16, |r| {
                let mut p = ListOffsetsPartition::default();
                p.partition_index = r.i32()?;
                p.timestamp = r.i64()?;
                let _max_num_offsets = r.i32()?;
                p.current_leader_epoch = -1;
                Ok(p)
            })?;
            Ok(topic)
        })
        .map_err(reason)?;
    Ok(Request::ListOffsets(request))
}

/// Writes a ListOffsets response at v0.
pub fn encode(response: &ListOffsetsResponse, buf: &mut BytesMut) {
    buf.put_count(response.topics.len());
    for topic in &response.topics {
        buf.put_string(Some(topic.name.0.as_str()));
        buf.put_count(topic.partitions.len());
        for p in &topic.partitions {
            buf.put_i32(p.partition_index);
            buf.put_i16(p.error_code);
            if p.error_code == 0 && p.offset >= 0 {
                buf.put_count(1);
                buf.put_i64(p.offset);
            } else {
                buf.put_count(0);
            }
        }
    }
}
