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
        protocol::{Decodable, Encodable, buf::ByteBufMut},
    },
};

/// Bytes of the size prefix.
pub const SIZE_PREFIX: usize = 4;

/// Payloads at least this large are sent from their own buffer instead of
/// being copied into the frame.
const ZERO_COPY_MIN: usize = 4096;

/// Encodes one request frame: size prefix, request header in `header_version`,
/// then `body` in `version`. The frame comes back as chunks to write in
/// order: any of `payloads` (record batches of a Produce request) that the
/// encoder writes whole is referenced, not copied, so a large batch goes from
/// the caller's buffer straight to the socket.
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
    payloads: &[Bytes],
) -> Result<Vec<Bytes>, ClientError> {
    let header_size = header
        .compute_size(header_version)
        .map_err(ClientError::protocol)?;
    let body_size = body.compute_size(version).map_err(ClientError::protocol)?;
    let size = header_size + body_size;
    let size_i32 = i32::try_from(size)
        .map_err(|_| ClientError::Protocol(format!("request of {size} bytes is too large")))?;
    let copied: usize = size
        - payloads
            .iter()
            .map(Bytes::len)
            .filter(|&n| n >= ZERO_COPY_MIN)
            .sum::<usize>()
            .min(size);
    let mut buf = ChunkedBuf {
        done: Vec::new(),
        done_len: 0,
        current: BytesMut::with_capacity(SIZE_PREFIX + copied),
        payloads,
    };
    buf.current.put_i32(size_i32);
    header
        .encode(&mut buf, header_version)
        .map_err(ClientError::protocol)?;
    body.encode(&mut buf, version)
        .map_err(ClientError::protocol)?;
    let total = buf.offset();
    if total != SIZE_PREFIX + size {
        return Err(ClientError::Protocol(format!(
            "request encoded to {} bytes, expected {}",
            total - SIZE_PREFIX,
            size
        )));
    }
    let mut chunks = buf.done;
    if !buf.current.is_empty() {
        chunks.push(buf.current.freeze());
    }
    Ok(chunks)
}

/// The encoder's output buffer: bytes are copied into `current`, except
/// whole `payloads`, which end the current chunk and are kept by reference.
struct ChunkedBuf<'a> {
    done: Vec<Bytes>,
    done_len: usize,
    current: BytesMut,
    payloads: &'a [Bytes],
}

// SAFETY: every method delegates to `current`, a `BytesMut`, whose `BufMut`
// implementation upholds the trait's contract.
unsafe impl BufMut for ChunkedBuf<'_> {
    fn remaining_mut(&self) -> usize {
        self.current.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller initialised `cnt` bytes of `chunk_mut()`, which is `current`'s.
        unsafe { self.current.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut bytes::buf::UninitSlice {
        self.current.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        if src.len() >= ZERO_COPY_MIN {
            let shared = self
                .payloads
                .iter()
                .find(|p| p.as_ptr() == src.as_ptr() && p.len() == src.len());
            if let Some(payload) = shared {
                let current = std::mem::take(&mut self.current);
                self.done_len += current.len() + payload.len();
                if !current.is_empty() {
                    self.done.push(current.freeze());
                }
                self.done.push(payload.clone());
                return;
            }
        }
        self.current.extend_from_slice(src);
    }
}

impl ByteBufMut for ChunkedBuf<'_> {
    fn offset(&self) -> usize {
        self.done_len + self.current.len()
    }

    fn seek(&mut self, offset: usize) {
        // Gaps are only used inside record batches, which are pre-encoded;
        // a seek stays within the current chunk.
        let local = offset.saturating_sub(self.done_len);
        self.current.resize(local, 0);
    }

    fn range(&mut self, r: std::ops::Range<usize>) -> &mut [u8] {
        let len = self.current.len();
        let end = r.end.saturating_sub(self.done_len).min(len);
        let start = r.start.saturating_sub(self.done_len).min(end);
        self.current.get_mut(start..end).unwrap_or_default()
    }
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
        let frame: Bytes = encode_request(&header, hv, &body, 12, &[])
            .unwrap()
            .concat()
            .into();
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
    fn produce_batches_are_referenced_not_copied() {
        use kafka_protocol::messages::{
            ProduceRequest, TopicName,
            produce_request::{PartitionProduceData, TopicProduceData},
        };
        let big = Bytes::from(vec![7u8; 10_000]);
        let small = Bytes::from(vec![8u8; 100]);
        let mut request = ProduceRequest::default();
        request.acks = -1;
        let mut topic = TopicProduceData::default();
        topic.name = TopicName(StrBytes::from_static_str("t"));
        for (i, records) in [&big, &small, &big].into_iter().enumerate() {
            let mut p = PartitionProduceData::default();
            p.index = i32::try_from(i).unwrap();
            p.records = Some(records.clone());
            topic.partition_data.push(p);
        }
        request.topic_data = vec![topic];
        let mut header = RequestHeader::default();
        header.request_api_key = ApiKey::Produce as i16;
        header.request_api_version = 9;
        for version in [7i16, 9] {
            let hv = ApiKey::Produce.request_header_version(version);
            let chunks = encode_request(
                &header,
                hv,
                &request,
                version,
                &[big.clone(), small.clone()],
            )
            .unwrap();
            // The big batch appears twice, by reference.
            check!(chunks.iter().filter(|c| c.as_ptr() == big.as_ptr()).count() == 2);
            let frame: Bytes = chunks.concat().into();
            let mut rest = frame.slice(4..);
            check!(
                usize::try_from(i32::from_be_bytes(frame[..4].try_into().unwrap())).unwrap()
                    == rest.len()
            );
            let _ = RequestHeader::decode(&mut rest, hv).unwrap();
            let decoded = ProduceRequest::decode(&mut rest, version).unwrap();
            check!(decoded == request);
        }
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
