//! OffsetFetch v0: the committed offsets of Kafka 0.8.1/0.8.2 clients.
//!
//! Kafka 3.9 read v0 from ZooKeeper and v1 from its offsets topic; the wire
//! forms of v0 and v1 are the same (request `group_id, [topic,
//! [partition]]`, response `[topic, [partition, offset, metadata,
//! error_code]]`), so both read the group coordinator's offsets and v0 is
//! decoded and written as v1.

use {
    super::EncodeError,
    crate::{coordinator::group::wire::GroupRequest, network::codec::Request},
    bytes::{Bytes, BytesMut},
    kafka_protocol::{
        messages::{OffsetFetchRequest, OffsetFetchResponse},
        protocol::Decodable,
    },
};

/// The version whose wire form v0 shares.
const SAME_AS: i16 = 1;

/// Decodes an OffsetFetch v0 body.
///
/// # Errors
///
/// The reason the body does not parse.
pub fn decode(buf: &mut Bytes, _version: i16) -> Result<Request, String> {
    let request = OffsetFetchRequest::decode(buf, SAME_AS).map_err(|e| e.to_string())?;
    Ok(Request::Group(GroupRequest::OffsetFetch(request)))
}

/// Writes an OffsetFetch response at v0 (v1's form).
///
/// # Errors
///
/// [`EncodeError::Protocol`] if `kafka-protocol` refuses it.
pub fn encode(response: &OffsetFetchResponse, buf: &mut BytesMut) -> Result<(), EncodeError> {
    super::wire::encode_as(response, SAME_AS, buf)
}
