//! OffsetCommit v10 (Kafka 4.1, KIP-848): v9 with each topic named by its
//! id instead of its name.
//!
//! Request v10: `group_id compact_string, generation_id_or_member_epoch
//! i32, member_id compact_string, group_instance_id
//! compact_nullable_string, topics [topic_id uuid, partitions
//! [partition_index i32, committed_offset i64, committed_leader_epoch i32,
//! committed_metadata compact_nullable_string, tags], tags], tags`. The
//! request is read onto v9's struct with the ids set and the names empty;
//! the group handler names the topics ([`crate::coordinator::group::topic_ids`]) and
//! `kafka-protocol` writes the v10 response (it knows that one).

use {
    super::reason,
    crate::{
        coordinator::group::wire::GroupRequest,
        network::{
            codec::Request,
            wire::{Reader, WireError},
        },
    },
    bytes::Bytes,
    kafka_protocol::messages::{
        GroupId, OffsetCommitRequest,
        offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic},
    },
};

/// Decodes an OffsetCommit v10 body.
///
/// # Errors
///
/// The reason the body does not parse.
pub fn decode(buf: &mut Bytes, _version: i16) -> Result<Request, String> {
    read(&mut Reader::new(buf))
        .map(|r| Request::Group(GroupRequest::OffsetCommit(r)))
        .map_err(reason)
}

fn read(r: &mut Reader<'_>) -> Result<OffsetCommitRequest, WireError> {
    let mut request = OffsetCommitRequest::default();
    request.group_id = GroupId(r.compact_string()?);
    request.generation_id_or_member_epoch = r.i32()?;
    request.member_id = r.compact_string()?;
    request.group_instance_id = r.compact_nullable_string()?;
    request.topics = r.compact_array(18, |r| {
        let mut topic = OffsetCommitRequestTopic::default();
        topic.topic_id = r.uuid()?;
        topic.partitions = r.compact_array(18, |r| {
            let mut p = OffsetCommitRequestPartition::default();
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
