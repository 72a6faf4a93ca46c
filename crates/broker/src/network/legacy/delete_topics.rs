//! DeleteTopics v0: the request is v1's (`[name string], timeout_ms i32`),
//! the response v1's without the leading `throttle_time_ms`:
//! `[name string, error_code i16]`.

use {
    super::wire::Writer,
    crate::network::codec::Request,
    bytes::{BufMut, Bytes, BytesMut},
    kafka_protocol::{
        messages::{DeleteTopicsRequest, DeleteTopicsResponse},
        protocol::Decodable,
    },
};

/// The version whose request form v0 shares.
const REQUEST_AS: i16 = 1;

/// Decodes a DeleteTopics v0 body.
///
/// # Errors
///
/// The reason the body does not parse.
pub fn decode(buf: &mut Bytes, _version: i16) -> Result<Request, String> {
    let request = DeleteTopicsRequest::decode(buf, REQUEST_AS).map_err(|e| e.to_string())?;
    Ok(Request::DeleteTopics(request))
}

/// Writes a DeleteTopics response at v0.
pub fn encode(response: &DeleteTopicsResponse, buf: &mut BytesMut) {
    buf.put_count(response.responses.len());
    for t in &response.responses {
        buf.put_string(Some(t.name.as_ref().map_or("", |n| n.0.as_str())));
        buf.put_i16(t.error_code);
    }
}
