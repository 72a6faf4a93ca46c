//! CreateTopics v0–v1 (segmentio/kafka-go 0.2, sarama's admin before 2.0).
//!
//! Request v0: `[name string, num_partitions i32, replication_factor i16,
//! [partition_index i32, [broker_id i32]], [config_name string,
//! config_value nullable_string]], timeout_ms i32`; v1 adds `validate_only
//! bool` (and is v2's form). Response v0: `[name string, error_code i16]`;
//! v1 adds `error_message nullable_string` per topic.

use {
    super::{
        reason,
        wire::{Reader, Writer},
    },
    crate::network::codec::Request,
    bytes::{BufMut, Bytes, BytesMut},
    kafka_protocol::messages::{
        BrokerId, CreateTopicsRequest, CreateTopicsResponse, TopicName,
        create_topics_request::{CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig},
    },
};

/// Decodes a CreateTopics v0–v1 body.
///
/// # Errors
///
/// The reason the body does not parse.
pub fn decode(buf: &mut Bytes, version: i16) -> Result<Request, String> {
    let mut r = Reader::new(buf);
    let mut request = CreateTopicsRequest::default();
    request.topics = r
        .array(18, |r| {
            let mut t = CreatableTopic::default();
            t.name = TopicName(r.string()?);
            t.num_partitions = r.i32()?;
            t.replication_factor = r.i16()?;
            t.assignments = r.array(8, |r| {
                let mut a = CreatableReplicaAssignment::default();
                a.partition_index = r.i32()?;
                a.broker_ids = r.array(4, |r| Ok(BrokerId(r.i32()?)))?;
                Ok(a)
            })?;
            t.configs = r.array(4, |r| {
                let mut c = CreatableTopicConfig::default();
                c.name = r.string()?;
                c.value = r.nullable_string()?;
                Ok(c)
            })?;
            Ok(t)
        })
        .map_err(reason)?;
    request.timeout_ms = r.i32().map_err(reason)?;
    if version >= 1 {
        request.validate_only = r.bool().map_err(reason)?;
    }
    Ok(Request::CreateTopics(request))
}

/// Writes a CreateTopics response at v0–v1.
pub fn encode(response: &CreateTopicsResponse, version: i16, buf: &mut BytesMut) {
    buf.put_count(response.topics.len());
    for t in &response.topics {
        buf.put_string(Some(t.name.0.as_str()));
        buf.put_i16(t.error_code);
        if version >= 1 {
            buf.put_string(t.error_message.as_deref());
        }
    }
}
