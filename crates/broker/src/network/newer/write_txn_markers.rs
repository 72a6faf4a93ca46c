//! WriteTxnMarkers v2 (Kafka 4.2, KIP-1228): v1 with each marker's
//! transaction version, which says how its producer epoch is checked
//! ([`krabka_log::ControlMarker::transaction_version`]).
//!
//! Request v2: `markers [producer_id i64, producer_epoch i16,
//! transaction_result bool, topics [name compact_string,
//! partition_indexes [i32], tags], coordinator_epoch i32,
//! transaction_version i8, tags], tags`. The version travels in a
//! [`slot`] of the marker. The response is v1's.
//!
//! A coordinator's markers for another broker go out through [`Sent`],
//! which writes v2 by hand (`kafka-protocol` 0.18 writes only v1) and v1
//! without the slot, for a peer that does not serve v2.

use {
    super::{reason, slot},
    crate::network::{
        codec::Request,
        wire::{CompactWriter, Reader, WireError},
    },
    bytes::{BufMut, Bytes, BytesMut},
    kafka_protocol::{
        messages::{
            ProducerId, TopicName, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
            write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic},
        },
        protocol::{
            Decodable, Encodable, HeaderVersion, Message, VersionRange,
            buf::{ByteBuf, ByteBufMut},
        },
    },
    krabka_ids::TransactionVersion,
};

/// The version whose response form v2 shares.
pub const RESPONSE_AS: i16 = 1;

/// The transaction version of `marker`: the one it carries (v2), else
/// version 0, which WriteTxnMarkers v0 and v1 markers follow.
#[must_use]
pub fn transaction_version(marker: &WritableTxnMarker) -> TransactionVersion {
    slot::i8(&marker.unknown_tagged_fields, slot::TRANSACTION_VERSION)
        .map_or(TransactionVersion::V0, |v| TransactionVersion(i16::from(v)))
}

/// Keeps `version` in `marker`, for [`Sent`] to write at v2.
pub fn set_transaction_version(marker: &mut WritableTxnMarker, version: TransactionVersion) {
    slot::set_i8(
        &mut marker.unknown_tagged_fields,
        slot::TRANSACTION_VERSION,
        i8::try_from(version.0).unwrap_or(i8::MAX),
    );
}

/// Decodes a WriteTxnMarkers v2 body.
///
/// # Errors
///
/// The reason the body does not parse.
pub fn decode(buf: &mut Bytes, _version: i16) -> Result<Request, String> {
    read(&mut Reader::new(buf))
        .map(Request::WriteTxnMarkers)
        .map_err(reason)
}

fn read(r: &mut Reader<'_>) -> Result<WriteTxnMarkersRequest, WireError> {
    let mut request = WriteTxnMarkersRequest::default();
    request.markers = r.compact_array(20, |r| {
        let mut marker = WritableTxnMarker::default();
        marker.producer_id = ProducerId(r.i64()?);
        marker.producer_epoch = r.i16()?;
        marker.transaction_result = r.bool()?;
        marker.topics = r.compact_array(3, |r| {
            let mut topic = WritableTxnMarkerTopic::default();
            topic.name = TopicName(r.compact_string()?);
            topic.partition_indexes = r.compact_array(4, Reader::i32)?;
            r.skip_tagged_fields()?;
            Ok(topic)
        })?;
        marker.coordinator_epoch = r.i32()?;
        let version = r.i8()?;
        slot::set_i8(
            &mut marker.unknown_tagged_fields,
            slot::TRANSACTION_VERSION,
            version,
        );
        r.skip_tagged_fields()?;
        Ok(marker)
    })?;
    r.skip_tagged_fields()?;
    Ok(request)
}

/// A WriteTxnMarkers request as a coordinator sends it to another broker:
/// v2 with each marker's transaction version, or v1 without it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sent(pub WriteTxnMarkersRequest);

impl Sent {
    /// The request without the slots, as `kafka-protocol` writes it.
    fn plain(&self) -> WriteTxnMarkersRequest {
        let mut plain = self.0.clone();
        for marker in &mut plain.markers {
            marker
                .unknown_tagged_fields
                .remove(&slot::TRANSACTION_VERSION);
        }
        plain
    }

    /// The v2 body.
    fn v2(&self) -> BytesMut {
        let mut buf = BytesMut::new();
        buf.put_compact_count(self.0.markers.len());
        for marker in &self.0.markers {
            buf.put_i64(marker.producer_id.0);
            buf.put_i16(marker.producer_epoch);
            buf.put_u8(u8::from(marker.transaction_result));
            buf.put_compact_count(marker.topics.len());
            for topic in &marker.topics {
                buf.put_compact_string(Some(&topic.name.0));
                buf.put_compact_count(topic.partition_indexes.len());
                for p in &topic.partition_indexes {
                    buf.put_i32(*p);
                }
                buf.put_no_tags();
            }
            buf.put_i32(marker.coordinator_epoch);
            buf.put_i8(
                slot::i8(&marker.unknown_tagged_fields, slot::TRANSACTION_VERSION).unwrap_or(0),
            );
            buf.put_no_tags();
        }
        buf.put_no_tags();
        buf
    }
}

impl Message for Sent {
    const VERSIONS: VersionRange = VersionRange { min: 1, max: 2 };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Encodable for Sent {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> anyhow::Result<()> {
        if version >= 2 {
            buf.put_slice(&self.v2());
            Ok(())
        } else {
            self.plain().encode(buf, version)
        }
    }

    fn compute_size(&self, version: i16) -> anyhow::Result<usize> {
        if version >= 2 {
            Ok(self.v2().len())
        } else {
            self.plain().compute_size(version)
        }
    }
}

impl Decodable for Sent {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> anyhow::Result<Self> {
        WriteTxnMarkersRequest::decode(buf, version.min(RESPONSE_AS)).map(Self)
    }
}

impl HeaderVersion for Sent {
    fn header_version(version: i16) -> i16 {
        WriteTxnMarkersRequest::header_version(version)
    }
}

impl kafka_protocol::protocol::Request for Sent {
    const KEY: i16 = <WriteTxnMarkersRequest as kafka_protocol::protocol::Request>::KEY;
    type Response = Answer;
}

/// The answer to a [`Sent`]: v2's is v1's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer(pub WriteTxnMarkersResponse);

impl Message for Answer {
    const VERSIONS: VersionRange = VersionRange { min: 1, max: 2 };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Encodable for Answer {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, _version: i16) -> anyhow::Result<()> {
        self.0.encode(buf, RESPONSE_AS)
    }

    fn compute_size(&self, _version: i16) -> anyhow::Result<usize> {
        self.0.compute_size(RESPONSE_AS)
    }
}

impl Decodable for Answer {
    fn decode<B: ByteBuf>(buf: &mut B, _version: i16) -> anyhow::Result<Self> {
        WriteTxnMarkersResponse::decode(buf, RESPONSE_AS).map(Self)
    }
}

impl HeaderVersion for Answer {
    fn header_version(_version: i16) -> i16 {
        WriteTxnMarkersResponse::header_version(RESPONSE_AS)
    }
}
