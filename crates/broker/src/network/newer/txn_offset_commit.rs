//! TxnOffsetCommit v6 (Kafka 4.4, KIP-1319): v5 with each topic named by
//! its id instead of its name.
//!
//! Request v6: `transactional_id compact_string, group_id compact_string,
//! producer_id i64, producer_epoch i16, generation_id_or_member_epoch i32,
//! member_id compact_string, group_instance_id compact_nullable_string,
//! topics [topic_id uuid, partitions [partition_index i32,
//! committed_offset i64, committed_leader_epoch i32, committed_metadata
//! compact_nullable_string, tags], tags], tags`. Response v6:
//! `throttle_time_ms i32, topics [topic_id uuid, partitions
//! [partition_index i32, error_code i16, tags], tags], tags`.
//!
//! `kafka-protocol` 0.18's TxnOffsetCommit topics have no id field, so the
//! id travels in a [`slot`]. The request is read with the names empty; the
//! transaction handler names the topics from the registry
//! ([`crate::coordinator::txn::wire`]) and every answer carries the ids
//! back in the same slot, which [`encode`] writes.

use {
    super::{reason, slot},
    crate::{
        coordinator::txn::wire::TxnRequest,
        network::{
            codec::Request,
            wire::{CompactWriter, Reader, WireError},
        },
    },
    bytes::{BufMut, Bytes, BytesMut},
    kafka_protocol::messages::{
        ProducerId, TransactionalId, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
        txn_offset_commit_request::{TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic},
    },
    uuid::Uuid,
};

/// The first TxnOffsetCommit version that names topics by id.
pub const FIRST_VERSION_BY_ID: i16 = 6;

/// The id kept in a topic's `fields`, if any.
#[must_use]
pub fn topic_id(fields: &slot::Fields) -> Option<Uuid> {
    slot::uuid(fields, slot::TOPIC_ID)
}

/// Keeps `id` in a topic's `fields`.
pub fn set_topic_id(fields: &mut slot::Fields, id: Uuid) {
    slot::set_uuid(fields, slot::TOPIC_ID, id);
}

/// Decodes a TxnOffsetCommit v6 body.
///
/// # Errors
///
/// The reason the body does not parse.
pub fn decode(buf: &mut Bytes, _version: i16) -> Result<Request, String> {
    read(&mut Reader::new(buf))
        .map(|r| Request::Txn(TxnRequest::TxnOffsetCommit(r)))
        .map_err(reason)
}

fn read(r: &mut Reader<'_>) -> Result<TxnOffsetCommitRequest, WireError> {
    let mut request = TxnOffsetCommitRequest::default();
    request.transactional_id = TransactionalId(r.compact_string()?);
    request.group_id = kafka_protocol::messages::GroupId(r.compact_string()?);
    request.producer_id = ProducerId(r.i64()?);
    request.producer_epoch = r.i16()?;
    request.generation_id = r.i32()?;
    request.member_id = r.compact_string()?;
    request.group_instance_id = r.compact_nullable_string()?;
    request.topics = r.compact_array(18, |r| {
        let mut topic = TxnOffsetCommitRequestTopic::default();
        let id = r.uuid()?;
        set_topic_id(&mut topic.unknown_tagged_fields, id);
        topic.partitions = r.compact_array(18, |r| {
            let mut p = TxnOffsetCommitRequestPartition::default();
            p.partition_index = r.i32()?;
            p.committed_offset = r.i64()?;
            p.committed_leader_epoch = r.i32()?;
            p.committed_metadata = r.compact_nullable_string()?;
            r.skip_tagged_fields()?;
            Ok(p)
        })?;
        r.skip_tagged_fields()?;
        Ok(topic)
    })?;
    r.skip_tagged_fields()?;
    Ok(request)
}

/// Writes a TxnOffsetCommit response at v6 (a topic without a kept id is
/// written with the nil id).
pub fn encode(response: &TxnOffsetCommitResponse, buf: &mut BytesMut) {
    buf.put_i32(response.throttle_time_ms);
    buf.put_compact_count(response.topics.len());
    for topic in &response.topics {
        buf.put_uuid(topic_id(&topic.unknown_tagged_fields).unwrap_or(Uuid::nil()));
        buf.put_compact_count(topic.partitions.len());
        for p in &topic.partitions {
            buf.put_i32(p.partition_index);
            buf.put_i16(p.error_code);
            buf.put_no_tags();
        }
        buf.put_no_tags();
    }
    buf.put_no_tags();
}
