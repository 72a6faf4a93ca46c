//! OffsetFetch v10 (Kafka 4.1, KIP-848): v9 with each topic named by its
//! id instead of its name.
//!
//! Request v10: `groups [group_id compact_string, member_id
//! compact_nullable_string, member_epoch i32, topics (nullable) [topic_id
//! uuid, partition_indexes [i32], tags], tags], require_stable bool, tags`.
//! As for OffsetCommit v10, the request is read onto v9's struct with the
//! ids set, the group handler names the topics ([`crate::coordinator::group::topic_ids`]), and
//! `kafka-protocol` writes the v10 response.

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
        GroupId, OffsetFetchRequest,
        offset_fetch_request::{OffsetFetchRequestGroup, OffsetFetchRequestTopics},
    },
};

/// Decodes an OffsetFetch v10 body.
///
/// # Errors
///
/// The reason the body does not parse.
pub fn decode(buf: &mut Bytes, _version: i16) -> Result<Request, String> {
    read(&mut Reader::new(buf))
        .map(|r| Request::Group(GroupRequest::OffsetFetch(r)))
        .map_err(reason)
}

fn read(r: &mut Reader<'_>) -> Result<OffsetFetchRequest, WireError> {
    let mut request = OffsetFetchRequest::default();
    request.groups = r.compact_array(7, |r| {
        let mut group = OffsetFetchRequestGroup::default();
        group.group_id = GroupId(r.compact_string()?);
        group.member_id = r.compact_nullable_string()?;
        group.member_epoch = r.i32()?;
        group.topics = r.compact_nullable_array(18, |r| {
            let mut topic = OffsetFetchRequestTopics::default();
            topic.topic_id = r.uuid()?;
            topic.partition_indexes = r.compact_array(4, Reader::i32)?;
            r.skip_tagged_fields()?;
            Ok(topic)
        })?;
        r.skip_tagged_fields()?;
        Ok(group)
    })?;
    request.require_stable = r.bool()?;
    r.skip_tagged_fields()?;
    Ok(request)
}
