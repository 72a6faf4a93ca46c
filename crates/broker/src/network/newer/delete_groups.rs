//! DeleteGroups v3 (Kafka 4.4): v2's request; the response adds a nullable
//! error message per group, which Krabka leaves null (the error code says
//! it all).
//!
//! Response v3: `throttle_time_ms i32, results [group_id compact_string,
//! error_code i16, error_message compact_nullable_string, tags], tags`.

use {
    crate::{
        coordinator::group::wire::GroupRequest,
        network::{codec::Request, wire::CompactWriter},
    },
    bytes::{BufMut, Bytes, BytesMut},
    kafka_protocol::{
        messages::{DeleteGroupsRequest, DeleteGroupsResponse},
        protocol::Decodable,
    },
};

/// The version whose request form v3 shares.
const REQUEST_AS: i16 = 2;

/// Decodes a DeleteGroups v3 body.
///
/// # Errors
///
/// The reason the body does not parse.
pub fn decode(buf: &mut Bytes, _version: i16) -> Result<Request, String> {
    DeleteGroupsRequest::decode(buf, REQUEST_AS)
        .map(|r| Request::Group(GroupRequest::DeleteGroups(r)))
        .map_err(|e| e.to_string())
}

/// Writes a DeleteGroups response at v3.
pub fn encode(response: &DeleteGroupsResponse, buf: &mut BytesMut) {
    buf.put_i32(response.throttle_time_ms);
    buf.put_compact_count(response.results.len());
    for result in &response.results {
        buf.put_compact_string(Some(&result.group_id.0));
        buf.put_i16(result.error_code);
        buf.put_compact_string(None);
        buf.put_no_tags();
    }
    buf.put_no_tags();
}
