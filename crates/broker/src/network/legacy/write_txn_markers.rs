//! WriteTxnMarkers v0 (Kafka 0.11–3.9): v1 before flexible versions, sent
//! by the transaction coordinators of brokers before Kafka 2.8.
//!
//! Request v0: `[producer_id i64, producer_epoch i16, transaction_result
//! bool, [name string, [partition_index i32]], coordinator_epoch i32]`.
//! Response v0: `[producer_id i64, [name string, [partition_index i32,
//! error_code i16]]]`.

use {
    super::{
        reason,
        wire::{Reader, WireError, Writer},
    },
    crate::network::codec::Request,
    bytes::{BufMut, Bytes, BytesMut},
    kafka_protocol::messages::{
        ProducerId, TopicName, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
        write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic},
    },
};

/// Decodes a WriteTxnMarkers v0 body.
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
    request.markers = r.array(19, |r| {
        let mut marker = WritableTxnMarker::default();
        marker.producer_id = ProducerId(r.i64()?);
        marker.producer_epoch = r.i16()?;
        marker.transaction_result = r.bool()?;
        marker.topics = r.array(6, |r| {
            let mut topic = WritableTxnMarkerTopic::default();
            topic.name = TopicName(r.string()?);
            topic.partition_indexes = r.array(4, Reader::i32)?;
            Ok(topic)
        })?;
        marker.coordinator_epoch = r.i32()?;
        Ok(marker)
    })?;
    Ok(request)
}

/// Writes a WriteTxnMarkers response at v0.
pub fn encode(response: &WriteTxnMarkersResponse, buf: &mut BytesMut) {
    buf.put_count(response.markers.len());
    for marker in &response.markers {
        buf.put_i64(marker.producer_id.0);
        buf.put_count(marker.topics.len());
        for topic in &marker.topics {
            buf.put_string(Some(&topic.name.0));
            buf.put_count(topic.partitions.len());
            for p in &topic.partitions {
                buf.put_i32(p.partition_index);
                buf.put_i16(p.error_code);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        crate::{api_versions::Served, network::codec},
        assert2::check,
        kafka_protocol::{
            messages::{
                ApiKey, RequestHeader,
                write_txn_markers_response::{
                    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult,
                    WritableTxnMarkerTopicResult,
                },
            },
            protocol::encode_request_header_into_buffer,
        },
    };

    /// A WriteTxnMarkers v0 frame: producer 9 at epoch 2 commits `data`
    /// partitions 0 and 3 under coordinator epoch 4.
    fn v0_frame() -> Bytes {
        let mut header = RequestHeader::default();
        header.request_api_key = ApiKey::WriteTxnMarkers as i16;
        header.request_api_version = 0;
        header.correlation_id = 7;
        let mut buf = BytesMut::new();
        encode_request_header_into_buffer(&mut buf, &header).unwrap();
        buf.put_count(1);
        buf.put_i64(9);
        buf.put_i16(2);
        buf.put_u8(1);
        buf.put_count(1);
        buf.put_string(Some("data"));
        buf.put_count(2);
        buf.put_i32(0);
        buf.put_i32(3);
        buf.put_i32(4);
        buf.freeze()
    }

    #[test]
    fn v0_is_served_only_with_the_legacy_setting() {
        check!(codec::decode_request(v0_frame(), Served::Kafka4).is_err());
        let decoded = codec::decode_request(v0_frame(), Served::WithLegacy).unwrap();
        let Request::WriteTxnMarkers(r) = decoded.body else {
            panic!("not WriteTxnMarkers");
        };
        let m = &r.markers[0];
        check!((m.producer_id.0, m.producer_epoch, m.transaction_result) == (9, 2, true));
        check!(m.coordinator_epoch == 4);
        check!(m.topics[0].name.0.as_str() == "data");
        check!(m.topics[0].partition_indexes == vec![0, 3]);
        let frame = v0_frame();
        for cut in 1..frame.len() {
            let _ = codec::decode_request(frame.slice(..cut), Served::WithLegacy);
        }

        let mut response = WriteTxnMarkersResponse::default();
        let mut marker = WritableTxnMarkerResult::default();
        marker.producer_id = ProducerId(9);
        let mut topic = WritableTxnMarkerTopicResult::default();
        topic.name = TopicName(kafka_protocol::protocol::StrBytes::from_static_str("data"));
        topic.partitions = vec![
            WritableTxnMarkerPartitionResult::default()
                .with_partition_index(3)
                .with_error_code(47),
        ];
        marker.topics = vec![topic];
        response.markers = vec![marker];
        let mut buf = BytesMut::new();
        encode(&response, &mut buf);
        let mut body = buf.freeze();
        let mut r = Reader::new(&mut body);
        let markers = r
            .array(8, |r| {
                let pid = r.i64()?;
                let topics = r.array(6, |r| {
                    let name = r.string()?;
                    let partitions = r.array(6, |r| Ok((r.i32()?, r.i16()?)))?;
                    Ok((name.to_string(), partitions))
                })?;
                Ok((pid, topics))
            })
            .unwrap();
        check!(markers == vec![(9, vec![("data".to_owned(), vec![(3, 47)])])]);
    }
}
