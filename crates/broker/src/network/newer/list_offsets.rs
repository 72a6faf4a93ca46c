//! ListOffsets v11 (Kafka 4.2, KIP-1023): v10's wire form, with one more
//! special timestamp, -6, for the earliest offset not yet copied to the
//! remote tier ([`crate::partition::OffsetQuery::EarliestPendingUpload`]).

use {
    crate::network::codec::Request,
    bytes::Bytes,
    kafka_protocol::{messages::ListOffsetsRequest, protocol::Decodable},
};

/// The version whose wire form v11 shares, request and response.
pub const WIRE_AS: i16 = 10;

/// Decodes a ListOffsets v11 body.
///
/// # Errors
///
/// The reason the body does not parse.
pub fn decode(buf: &mut Bytes, _version: i16) -> Result<Request, String> {
    ListOffsetsRequest::decode(buf, WIRE_AS)
        .map(Request::ListOffsets)
        .map_err(|e| e.to_string())
}
