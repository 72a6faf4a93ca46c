//! Request decoding and response encoding on top of `kafka-protocol`.
//!
//! [`decode_request`] turns one frame (without its size prefix) into a typed
//! [`Request`]. It never panics on any input: the fixed header fields are
//! length-checked before `kafka-protocol` sees the bytes, only the (API,
//! version) pairs of the API table ([`api_versions::APIS`]) are decoded,
//! each by its row's decoder, and a missing byte is an error that closes
//! the connection.
//!
//! With `krabka.legacy.protocol.enable` ([`Served::WithLegacy`]) the table
//! also names the versions Kafka 4 removed, which hand-written decoders
//! read onto the same request types ([`super::legacy`]); an answer at such a
//! version is written by [`encode_response`] through the legacy encoders.
//! The versions of Kafka 4.1+ that `kafka-protocol` does not know are read
//! and written the same way ([`super::newer`]), always.
//!
//! `kafka-protocol` 0.18 reserves an array's capacity from the count on the
//! wire before it reads the elements; the process-wide allocator guard
//! ([`crate::alloc_guard`]) keeps such a count from aborting the process.

use {
    crate::{
        api_versions::{self, Served},
        network::{legacy, newer},
    },
    bytes::{Buf, Bytes, BytesMut},
    kafka_protocol::{
        messages::{
            AlterConfigsRequest, ApiKey, ApiVersionsRequest, CreatePartitionsRequest,
            CreateTopicsRequest, DeleteRecordsRequest, DeleteTopicsRequest, DescribeClusterRequest,
            DescribeConfigsRequest, DescribeLogDirsRequest, DescribeTopicPartitionsRequest,
            ElectLeadersRequest, FetchRequest, IncrementalAlterConfigsRequest,
            InitProducerIdRequest, ListOffsetsRequest, MetadataRequest,
            OffsetForLeaderEpochRequest, ProduceRequest, RequestHeader, ResponseHeader,
            WriteTxnMarkersRequest,
        },
        protocol::{Decodable, Encodable, HeaderVersion},
    },
};

/// A decoded request of an implemented API.
#[derive(Debug, Clone)]
#[allow(missing_docs)]
pub enum Request {
    Produce(ProduceRequest),
    Fetch(FetchRequest),
    ListOffsets(ListOffsetsRequest),
    Metadata(MetadataRequest),
    ApiVersions(ApiVersionsRequest),
    CreateTopics(CreateTopicsRequest),
    DeleteTopics(DeleteTopicsRequest),
    DeleteRecords(DeleteRecordsRequest),
    InitProducerId(InitProducerIdRequest),
    OffsetForLeaderEpoch(OffsetForLeaderEpochRequest),
    DescribeConfigs(DescribeConfigsRequest),
    AlterConfigs(AlterConfigsRequest),
    DescribeLogDirs(DescribeLogDirsRequest),
    CreatePartitions(CreatePartitionsRequest),
    IncrementalAlterConfigs(IncrementalAlterConfigsRequest),
    DescribeCluster(DescribeClusterRequest),
    ElectLeaders(ElectLeadersRequest),
    DescribeTopicPartitions(DescribeTopicPartitionsRequest),
    WriteTxnMarkers(WriteTxnMarkersRequest),
    /// One of the group coordinator's APIs.
    Group(crate::coordinator::group::wire::GroupRequest),
    /// One of the transaction coordinator's APIs.
    Txn(crate::coordinator::txn::wire::TxnRequest),
    /// SASL and the ACL and SCRAM-credential APIs.
    Security(crate::security::admin::SecurityRequest),
    /// An `ApiVersions` request of a version this broker does not know: it
    /// is answered in the v0 format with UNSUPPORTED_VERSION, as Kafka does,
    /// so the client can pick a version it shares.
    ApiVersionsUnsupported,
    /// An `ApiVersions` v5 request, which names the cluster and node the
    /// client expects (KIP-1242, [`super::newer::api_versions`]).
    ApiVersionsChecked(Box<super::newer::api_versions::Checked>),
}

/// One decoded frame.
#[derive(Debug, Clone)]
pub struct DecodedRequest {
    /// The API.
    pub api_key: ApiKey,
    /// The request (and response) version.
    pub version: i16,
    /// The request header.
    pub header: RequestHeader,
    /// The body.
    pub body: Request,
    /// The client's address (set by the connection that read the frame);
    /// the group coordinator reports it as a member's client host.
    pub peer: Option<std::net::SocketAddr>,
    /// Who sent it, on which listener (set by the connection); `None` for
    /// requests the broker makes of itself, which are not authorized.
    pub session: Option<std::sync::Arc<crate::security::session::Session>>,
    /// Whether the connection can send records from the page cache (plain
    /// TCP, see [`super::writer`]): a Fetch answer may then carry file
    /// slices. Set by the connection.
    pub zero_copy: bool,
}

/// Why a frame could not be decoded; the connection is closed with this as
/// the logged reason.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    /// Shorter than the fixed header fields.
    #[error("frame of {0} bytes is too short for a request header")]
    Truncated(usize),
    /// API key not known to Kafka at all.
    #[error("unknown API key {0}")]
    UnknownApi(i16),
    /// A Kafka API this broker does not implement, or a version outside the
    /// range. Kafka 4 closes the connection without an answer, logging
    /// this same text.
    #[error("Received request for api with key {} ({api:?}) and unsupported version {version}", *api as i16)]
    UnsupportedVersion {
        /// The API.
        api: ApiKey,
        /// The version asked for.
        version: i16,
    },
    /// The header or body does not parse.
    #[error("malformed {api:?} v{version} request: {reason}")]
    Malformed {
        /// The API.
        api: ApiKey,
        /// The version.
        version: i16,
        /// The decoder's message.
        reason: String,
    },
}

/// The correlation id of a frame, if it is long enough to have one (used to
/// log which request was refused).
#[must_use]
pub fn peek_correlation_id(frame: &[u8]) -> Option<i32> {
    let bytes: [u8; 4] = frame.get(4..8)?.try_into().ok()?;
    Some(i32::from_be_bytes(bytes))
}

/// Decodes one request frame of a version `served`.
///
/// # Errors
///
/// A [`DecodeError`] for any frame that is not a well-formed request of an
/// implemented (API, version).
pub fn decode_request(mut frame: Bytes, served: Served) -> Result<DecodedRequest, DecodeError> {
    if frame.len() < 8 {
        return Err(DecodeError::Truncated(frame.len()));
    }
    let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let api_key = ApiKey::try_from(raw_key).map_err(|()| DecodeError::UnknownApi(raw_key))?;
    let malformed = |reason: String| DecodeError::Malformed {
        api: api_key,
        version,
        reason,
    };
    let Some(decode) = api_versions::lookup(api_key).and_then(|row| row.decoder(version, served))
    else {
        if api_key == ApiKey::ApiVersions && version > 0 {
            // Newer than we know: the header may have a shape we cannot
            // parse, so take only the fixed fields.
            let mut header = RequestHeader::default();
            header.request_api_key = raw_key;
            header.request_api_version = version;
            header.correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
            return Ok(DecodedRequest {
                api_key,
                version,
                header,
                body: Request::ApiVersionsUnsupported,
                peer: None,
                session: None,
                zero_copy: false,
            });
        }
        return Err(DecodeError::UnsupportedVersion {
            api: api_key,
            version,
        });
    };
    let header_version = api_key.request_header_version(version);
    let header = RequestHeader::decode(&mut frame, header_version)
        .map_err(|e| malformed(format!("header: {e}")))?;
    let body = decode(&mut frame, version).map_err(malformed)?;
    if frame.has_remaining() {
        // Kafka ignores bytes after the last field it knows (a newer
        // client's tagged data); do the same.
        tracing::debug!(api = ?api_key, version, trailing = frame.remaining(), bytes = ?&frame[..frame.remaining().min(16)], "ignoring trailing request bytes");
    }
    Ok(DecodedRequest {
        api_key,
        version,
        header,
        body,
        peer: None,
        session: None,
        zero_copy: false,
    })
}

/// Encodes a response frame (size prefix, header, body) for `api` `version`;
/// a legacy version (below what Kafka 4 serves) is written by the legacy
/// encoder of its API ([`legacy::encode_body`]), a version newer than
/// `kafka-protocol` knows by the newer one ([`newer::encode_body`]).
///
/// # Errors
///
/// The encoder's message if the body cannot be written in that version
/// (a field set that the version cannot carry).
pub fn encode_response<R: Encodable + HeaderVersion + 'static>(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &R,
) -> Result<Bytes, String> {
    let mut header = ResponseHeader::default();
    header.correlation_id = correlation_id;
    let row = api_versions::lookup(api_key);
    let is_legacy = row.is_some_and(|row| row.is_legacy(version));
    let is_newer = row.is_some_and(|row| row.is_newer(version));
    // Every legacy version has response header v0.
    let header_version = if is_legacy {
        0
    } else {
        api_key.response_header_version(version)
    };
    // Sized once: a large response (a fetch) grown by doubling would leave
    // its discarded halves in the allocator's arenas.
    let body_size = body.compute_size(version).unwrap_or(0);
    let mut buf = BytesMut::with_capacity(64 + body_size);
    buf.extend_from_slice(&[0; 4]);
    header
        .encode(&mut buf, header_version)
        .map_err(|e| e.to_string())?;
    if is_legacy {
        legacy::encode_body(api_key, version, body, &mut buf).map_err(|e| e.to_string())?;
    } else if is_newer {
        newer::encode_body(api_key, version, body, &mut buf).map_err(|e| e.to_string())?;
    } else {
        body.encode(&mut buf, version).map_err(|e| e.to_string())?;
    }
    let size = i32::try_from(buf.len() - 4).map_err(|_| "response too large".to_owned())?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        assert2::check,
        kafka_protocol::protocol::{StrBytes, encode_request_header_into_buffer},
        proptest::prelude::*,
    };

    fn decode(frame: Bytes) -> Result<DecodedRequest, DecodeError> {
        decode_request(frame, Served::Kafka4)
    }

    fn frame<R: Encodable>(key: ApiKey, version: i16, body: &R) -> Bytes {
        let mut header = RequestHeader::default();
        header.request_api_key = key as i16;
        header.request_api_version = version;
        header.correlation_id = 7;
        header.client_id = Some(StrBytes::from_static_str("test"));
        let mut buf = BytesMut::new();
        encode_request_header_into_buffer(&mut buf, &header).unwrap();
        body.encode(&mut buf, version).unwrap();
        buf.freeze()
    }

    #[test]
    fn decodes_a_metadata_request() {
        let bytes = frame(ApiKey::Metadata, 12, &MetadataRequest::default());
        let decoded = decode(bytes).unwrap();
        check!(decoded.header.correlation_id == 7);
        check!(matches!(decoded.body, Request::Metadata(_)));
    }

    #[test]
    fn newer_api_versions_gets_the_fallback() {
        let mut bytes =
            BytesMut::from(&frame(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default())[..]);
        bytes[3] = 9;
        let decoded = decode(bytes.freeze()).unwrap();
        check!(matches!(decoded.body, Request::ApiVersionsUnsupported));
        check!(decoded.header.correlation_id == 7);
    }

    #[test]
    fn refuses_bad_frames() {
        check!(matches!(
            decode(Bytes::from_static(&[0, 3])),
            Err(DecodeError::Truncated(2))
        ));
        check!(matches!(
            decode(Bytes::from_static(&[0x7f, 0, 0, 0, 0, 0, 0, 1])),
            Err(DecodeError::UnknownApi(_))
        ));
        check!(matches!(
            decode(Bytes::from_static(&[0, 29, 0, 0, 0, 0, 0, 1])),
            Err(DecodeError::UnsupportedVersion { .. })
        ));
        let full = frame(ApiKey::Metadata, 12, &MetadataRequest::default());
        check!(matches!(
            decode(full.slice(..full.len() - 1)),
            Err(DecodeError::Malformed { .. })
        ));
    }

    /// `ApiKey::valid_versions` and the request types of `kafka-protocol`
    /// do not always agree (0.18 lists OffsetCommit / OffsetFetch v10, but
    /// their request types stop at v9): every advertised version must get
    /// past the request type's own version check.
    #[test]
    fn every_supported_version_has_a_request_decoder() {
        for row in api_versions::APIS {
            let key = row.key;
            for version in [row.min, row.max, row.min_served(Served::WithLegacy)] {
                let mut header = RequestHeader::default();
                header.request_api_key = key as i16;
                header.request_api_version = version;
                let mut buf = BytesMut::new();
                encode_request_header_into_buffer(&mut buf, &header).unwrap();
                let refused = match decode_request(buf.freeze(), Served::WithLegacy) {
                    Err(DecodeError::Malformed { reason, .. }) => {
                        reason.contains("version not supported")
                    }
                    _ => false,
                };
                check!(!refused, "{key:?} v{version}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode(Bytes::from(bytes));
        }

        #[test]
        fn arbitrary_bodies_of_every_supported_api_never_panic(
            index in 0..api_versions::APIS.len(),
            version_pick in any::<u16>(),
            body in proptest::collection::vec(any::<u8>(), 0..256),
        ) {
            let row = &api_versions::APIS[index];
            let (key, min, max) = (row.key, row.min_served(Served::WithLegacy), row.max);
            let span = u16::try_from(max - min + 1).unwrap();
            let version = min + i16::try_from(version_pick % span).unwrap();
            let mut header = RequestHeader::default();
            header.request_api_key = key as i16;
            header.request_api_version = version;
            let mut buf = BytesMut::new();
            encode_request_header_into_buffer(&mut buf, &header).unwrap();
            buf.extend_from_slice(&body);
            let _ = decode_request(buf.freeze(), Served::WithLegacy);
        }
    }
}
