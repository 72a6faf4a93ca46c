//! DescribeLogDirs v0: the request and response have v1's wire form (v1
//! changed only when the broker throttles, KIP-219), so v0 is decoded and
//! written as v1.

use {
    super::EncodeError,
    crate::network::codec::Request,
    bytes::{Bytes, BytesMut},
    kafka_protocol::{
        messages::{DescribeLogDirsRequest, DescribeLogDirsResponse},
        protocol::Decodable,
    },
};

/// The version whose wire form v0 shares.
const SAME_AS: i16 = 1;

/// Decodes a DescribeLogDirs v0 body.
///
/// # Errors
///
/// The reason the body does not parse.
pub fn decode(buf: &mut Bytes, _version: i16) -> Result<Request, String> {
    let request = DescribeLogDirsRequest::decode(buf, SAME_AS).map_err(|e| e.to_string())?;
    Ok(Request::DescribeLogDirs(request))
}

/// Writes a DescribeLogDirs response at v0 (v1's form).
///
/// # Errors
///
/// [`EncodeError::Protocol`] if `kafka-protocol` refuses it.
pub fn encode(response: &DescribeLogDirsResponse, buf: &mut BytesMut) -> Result<(), EncodeError> {
    super::wire::encode_as(response, SAME_AS, buf)
}
