//! OffsetForLeaderEpoch v0–v1 (consumers of Kafka 0.11–2.0 truncating
//! after a leader change).
//!
//! Request v0–v1: `[topic string, [partition i32, leader_epoch i32]]` (v2
//! added `current_leader_epoch` before the epoch). Response v0: `[topic,
//! [error_code i16, partition i32, end_offset i64]]`; v1 adds
//! `leader_epoch i32` after the partition (v2 a leading
//! `throttle_time_ms`).

use {
    super::{
        reason,
        wire::{Reader, Writer},
    },
    crate::network::codec::Request,
    bytes::{BufMut, Bytes, BytesMut},
    kafka_protocol::messages::{
        BrokerId, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, TopicName,
        offset_for_leader_epoch_request::{OffsetForLeaderPartition, OffsetForLeaderTopic},
    },
};

/// Decodes an OffsetForLeaderEpoch v0–v1 body.
///
/// # Errors
///
/// The reason the body does not parse.
pub fn decode(buf: &mut Bytes, _version: i16) -> Result<Request, String> {
    let mut r = Reader::new(buf);
    let mut request = OffsetForLeaderEpochRequest::default();
    request.replica_id = BrokerId(-1);
    request.topics = r
        .array(6, |r| {
            let mut topic = OffsetForLeaderTopic::default();
            topic.topic = TopicName(r.string()?);
            topic.partitions = r.array(8, |r| {
                let mut p = OffsetForLeaderPartition::default();
                p.partition = r.i32()?;
                p.current_leader_epoch = -1;
                p.leader_epoch = r.i32()?;
                Ok(p)
            })?;
            Ok(topic)
        })
        .map_err(reason)?;
    Ok(Request::OffsetForLeaderEpoch(request))
}

/// Writes an OffsetForLeaderEpoch response at v0–v1.
pub fn encode(response: &OffsetForLeaderEpochResponse, version: i16, buf: &mut BytesMut) {
    buf.put_count(response.topics.len());
    for topic in &response.topics {
        buf.put_string(Some(topic.topic.0.as_str()));
        buf.put_count(topic.partitions.len());
        for p in &topic.partitions {
            buf.put_i16(p.error_code);
            buf.put_i32(p.partition);
            if version >= 1 {
                buf.put_i32(p.leader_epoch);
            }
            buf.put_i64(p.end_offset);
        }
    }
}
