//! OffsetCommit v0–v1: commits of Kafka 0.8.2 clients (sarama's default).
//!
//! Request v0: `group_id string, [topic string, [partition i32, offset
//! i64, metadata nullable_string]]`; v1 adds `generation_id i32, member_id
//! string` after the group and a per-partition `commit_timestamp i64`
//! before the metadata. Kafka 3.9 kept v0 commits in ZooKeeper; here both
//! go to the group coordinator like v2's, a v0 commit as a simple
//! consumer's (generation -1, no member). The commit timestamp is ignored,
//! as Kafka ignored it once offsets expired by retention. The response of
//! v0–v1 is v2's: `[topic, [partition, error_code]]`.

use {
    super::{
        EncodeError, reason,
        wire::{Reader, WireError},
    },
    crate::{coordinator::group::wire::GroupRequest, network::codec::Request},
    bytes::{Bytes, BytesMut},
    kafka_protocol::{
        messages::{
            GroupId, OffsetCommitRequest, OffsetCommitResponse, TopicName,
            offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic},
        },
        protocol::StrBytes,
    },
};

/// The version whose response v0–v1 share.
const RESPONSE_AS: i16 = 2;

/// Decodes an OffsetCommit v0–v1 body.
///
/// # Errors
///
/// The reason the body does not parse.
pub fn decode(buf: &mut Bytes, version: i16) -> Result<Request, String> {
    let mut r = Reader::new(buf);
    let mut request = OffsetCommitRequest::default();
    request.group_id = GroupId(r.string().map_err(reason)?);
    if version >= 1 {
        request.generation_id_or_member_epoch = r.i32().map_err(reason)?;
        request.member_id = r.string().map_err(reason)?;
    } else {
        request.generation_id_or_member_epoch = -1;
        request.member_id = StrBytes::default();
    }
    request.retention_time_ms = -1;
    request.topics = r
        .array(6, |r| {
            let mut topic = OffsetCommitRequestTopic::default();
            topic.name = TopicName(r.string()?);
            topic.partitions = r.array(14, |r| partition(r, version))?;
            Ok(topic)
        })
        .map_err(reason)?;
    Ok(Request::Group(GroupRequest::OffsetCommit(request)))
}

fn partition(r: &mut Reader<'_>, version: i16) -> Result<OffsetCommitRequestPartition, WireError> {
    let mut p = OffsetCommitRequestPartition::default();
    p.partition_index = r.i32()?;
    p.committed_offset = r.i64()?;
    if version >= 1 {
        let _commit_timestamp = r.i64()?;
    }
    p.committed_leader_epoch = -1;
    p.committed_metadata = r.nullable_string()?;
    Ok(p)
}

/// Writes an OffsetCommit response at v0–v1 (v2's form).
///
/// # Errors
///
/// [`EncodeError::Protocol`] if `kafka-protocol` refuses it.
pub fn encode(response: &OffsetCommitResponse, buf: &mut BytesMut) -> Result<(), EncodeError> {
    super::wire::encode_as(response, RESPONSE_AS, buf)
}
