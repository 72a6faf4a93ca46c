//! Kafka's framing: every request and response is a 4-byte big-endian size
//! followed by that many bytes.
//!
//! Kept apart from the socket code so the size checks can be tested without a
//! connection: a negative size or one above the configured limit is refused
//! before any buffer is allocated for it.

use {
    crate::ClientError,
    bytes::{Buf, BufMut, Bytes, BytesMut},
    kafka_protocol::{
        messages::{RequestHeader, ResponseHeader},
        protocol::{Decodable, Encodable},
    },
};

/// Bytes of the size prefix.
pub const SIZE_PREFIX: usize = 4;

/// Encodes one request frame: size prefix, request header in `header_version`,
/// then `body` in `version`.
///
/// # Errors
///
/// Returns [`ClientError::Protocol`] when the header or body cannot be encoded
/// in the given versions, or the frame would exceed `i32::MAX` bytes.
pub fn encode_request<B: Encodable>(
    header: &RequestHeader,
    header_version: i16,
    body: &B,
    version: i16,
) -> Result<Bytes, ClientError> {
    let header_size = header
        .compute_size(header_version)
        .map_err(ClientError::protocol)?;
    let body_size = body.compute_size(version).map_err(ClientError::protocol)?;
    let size = header_size + body_size;
    let size_i32 = i32::try_from(size)
        .map_err(|_| ClientError::Protocol(format!("request of {size} bytes is too large")))?;
    let mut buf = BytesMut::with_capacity(SIZE_PREFIX + size);
    buf.put_i32(size_i32);
    header
        .encode(&mut buf, header_version)
        .map_err(ClientError::protocol)?;
    body.encode(&mut buf, version)
        .map_err(ClientError::protocol)?;
    if buf.len() != SIZE_PREFIX + size {
        return Err(ClientError::Protocol(format!(
            "request encoded to {} bytes, expected {}",
            buf.len() - SIZE_PREFIX,
            size
        )));
    }
    Ok(buf.freeze())
}

/// Reads a frame's size prefix and checks it against `max_size`.
///
/// # Errors
///
/// Returns [`ClientError::Protocol`] for a negative size or one above `max_size`.
pub fn frame_size(prefix: [u8; SIZE_PREFIX], max_size: usize) -> Result<usize, ClientError> {
    let size = i32::from_be_bytes(prefix);
    let size = usize::try_from(size)
        .map_err(|_| ClientError::Protocol(format!("negative frame size {size}")))?;
    if size > max_size {
        return Err(ClientError::Protocol(format!(
            "frame of {size} bytes exceeds the limit of {max_size}"
        )));
    }
    Ok(size)
}

/// Splits a response frame (without its size prefix) into its header and body.
///
/// # Errors
///
/// Returns [`ClientError::Protocol`] when the header does not decode.
pub fn decode_response_header(
    mut frame: Bytes,
    header_version: i16,
) -> Result<(ResponseHeader, Bytes), ClientError> {
    if frame.remaining() < 4 {
        return Err(ClientError::Protocol(format!(
            "response frame of {} bytes has no header",
            frame.len()
        )));
    }
    let header =
        ResponseHeader::decode(&mut frame, header_version).map_err(ClientError::protocol)?;
    Ok((header, frame))
}

/// Decodes a response body in `version`.
///
/// # Errors
///
/// Returns [`ClientError::Protocol`] when the body does not decode.
pub fn decode_body<R: Decodable>(
    mut body: Bytes,
    version: i16,
    api: &str,
) -> Result<R, ClientError> {
    R::decode(&mut body, version)
        .map_err(|e| ClientError::Protocol(format!("{api} v{version} response: {e}")))
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        assert2::check,
        kafka_protocol::{
            messages::{ApiKey, MetadataRequest, MetadataResponse, ResponseHeader},
            protocol::StrBytes,
        },
        proptest::prelude::*,
    };

    #[test]
    fn request_frame_round_trips_through_the_crate_decoder() {
        let mut header = RequestHeader::default();
        header.request_api_key = ApiKey::Metadata as i16;
        header.request_api_version = 12;
        header.correlation_id = 42;
        header.client_id = Some(StrBytes::from_static_str("krabka"));
        let hv = ApiKey::Metadata.request_header_version(12);
        check!(hv == 2);
        let body = MetadataRequest::default();
        let frame = encode_request(&header, hv, &body, 12).unwrap();
        let size = frame_size(frame[..4].try_into().unwrap(), 1 << 20).unwrap();
        check!(size == frame.len() - 4);
        let mut rest = frame.slice(4..);
        let decoded =
            kafka_protocol::protocol::decode_request_header_from_buffer(&mut rest).unwrap();
        check!(decoded.correlation_id == 42);
        check!(decoded.request_api_version == 12);
        let decoded_body = MetadataRequest::decode(&mut rest, 12).unwrap();
        check!(decoded_body == body);
    }

    #[test]
    fn response_header_is_split_from_body() {
        let mut header = ResponseHeader::default();
        header.correlation_id = 7;
        let mut buf = BytesMut::new();
        header.encode(&mut buf, 1).unwrap();
        let mut response = MetadataResponse::default();
        response.throttle_time_ms = 3;
        response.encode(&mut buf, 12).unwrap();
        let (h, body) = decode_response_header(buf.freeze(), 1).unwrap();
        check!(h.correlation_id == 7);
        let decoded: MetadataResponse = decode_body(body, 12, "Metadata").unwrap();
        check!(decoded.throttle_time_ms == 3);
    }

    #[test]
    fn bad_sizes_are_refused() {
        check!(frame_size((-1i32).to_be_bytes(), 100).is_err());
        check!(frame_size(101i32.to_be_bytes(), 100).is_err());
        check!(frame_size(100i32.to_be_bytes(), 100).unwrap() == 100);
        check!(decode_response_header(Bytes::from_static(&[0, 0]), 0).is_err());
    }

    proptest! {
        // Only the header split is ours. `kafka-protocol`'s body decoders
        // reserve `Vec::with_capacity(n)` for a wire array count, so arbitrary
        // body bytes can abort the process on allocation; they are not fuzzed here.
        #[test]
        fn arbitrary_header_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64), hv in 0i16..2) {
            let _ = decode_response_header(Bytes::from(bytes), hv);
        }
    }
}
