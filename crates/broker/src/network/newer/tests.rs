//! The newer codecs against `kafka-protocol` where a newer form is an older
//! one's, and against the field layout of Kafka's message schemas where it
//! adds fields, read back with the bounded reader.

use {
    super::*,
    crate::{
        api_versions::{self, Served},
        coordinator::group::wire::GroupRequest,
        network::{
            codec::{self, Request},
            wire::{CompactWriter, Reader, WireError},
        },
    },
    assert2::check,
    bytes::{BufMut, Bytes},
    kafka_protocol::{
        messages::{
            DeleteGroupsRequest, DescribeLogDirsRequest, GroupId, ListOffsetsRequest,
            RequestHeader, TopicName,
            delete_groups_response::DeletableGroupResult,
            describe_log_dirs_response::{
                DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
            },
            list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic},
            list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse},
        },
        protocol::{Encodable, StrBytes, encode_request_header_into_buffer},
    },
};

/// A request header of `api` at `version` (correlation id 7), to which a
/// test appends the body.
fn header(api: ApiKey, version: i16) -> BytesMut {
    let mut header = RequestHeader::default();
    header.request_api_key = api as i16;
    header.request_api_version = version;
    header.correlation_id = 7;
    let mut buf = BytesMut::new();
    encode_request_header_into_buffer(&mut buf, &header).unwrap();
    buf
}

/// A whole request frame (no size prefix) of `api` at `version` whose body
/// is `body` written at `body_as`.
fn frame<R: Encodable>(api: ApiKey, version: i16, body: &R, body_as: i16) -> Bytes {
    let mut buf = header(api, version);
    body.encode(&mut buf, body_as).unwrap();
    buf.freeze()
}

fn decoded(frame: Bytes) -> Request {
    codec::decode_request(frame, Served::Kafka4).unwrap().body
}

/// The body of an encoded response frame (after size, correlation id and
/// the flexible header's empty tag section).
fn response_body(frame: &Bytes) -> Bytes {
    frame.slice(4 + 4 + 1..)
}

#[test]
fn list_offsets_v11_is_v10_on_the_wire() {
    let mut request = ListOffsetsRequest::default();
    request.replica_id = kafka_protocol::messages::BrokerId(-1);
    request.topics = vec![
        ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(vec![
                ListOffsetsPartition::default()
                    .with_partition_index(2)
                    .with_timestamp(-6),
            ]),
    ];
    let Request::ListOffsets(got) = decoded(frame(ApiKey::ListOffsets, 11, &request, 10)) else {
        panic!("not ListOffsets");
    };
    check!(got.topics[0].partitions[0].timestamp == -6);

    let mut response = ListOffsetsResponse::default();
    response.topics = vec![
        ListOffsetsTopicResponse::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(vec![
                ListOffsetsPartitionResponse::default()
                    .with_partition_index(2)
                    .with_offset(42)
                    .with_timestamp(-1)
                    .with_leader_epoch(0),
            ]),
    ];
    let frame = codec::encode_response(ApiKey::ListOffsets, 11, 7, &response).unwrap();
    let mut v10 = BytesMut::new();
    response.encode(&mut v10, 10).unwrap();
    check!(response_body(&frame) == v10.freeze());
}

#[test]
fn delete_groups_v3_adds_a_null_message_per_group() {
    let mut request = DeleteGroupsRequest::default();
    request.groups_names = vec![GroupId(StrBytes::from_static_str("g"))];
    let Request::Group(GroupRequest::DeleteGroups(got)) =
        decoded(frame(ApiKey::DeleteGroups, 3, &request, 2))
    else {
        panic!("not DeleteGroups");
    };
    check!(got.groups_names == request.groups_names);

    let mut response = DeleteGroupsResponse::default();
    response.throttle_time_ms = 5;
    response.results = vec![
        DeletableGroupResult::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_error_code(69),
    ];
    let frame = codec::encode_response(ApiKey::DeleteGroups, 3, 7, &response).unwrap();
    let mut body = response_body(&frame);
    let mut r = Reader::new(&mut body);
    check!(r.i32() == Ok(5));
    let results = r
        .compact_array(4, |r| {
            let group = r.compact_string()?;
            let code = r.i16()?;
            let message = r.compact_nullable_string()?;
            r.skip_tagged_fields()?;
            Ok((group, code, message))
        })
        .unwrap();
    check!(results == vec![(StrBytes::from_static_str("g"), 69, None)]);
    check!(r.skip_tagged_fields() == Ok(()));
    check!(body.is_empty());
}

#[test]
fn describe_log_dirs_v5_adds_is_cordoned() {
    let request = DescribeLogDirsRequest::default();
    check!(matches!(
        decoded(frame(ApiKey::DescribeLogDirs, 5, &request, 4)),
        Request::DescribeLogDirs(_)
    ));

    let mut response = DescribeLogDirsResponse::default();
    response.results = vec![
        DescribeLogDirsResult::default()
            .with_log_dir(StrBytes::from_static_str("/data"))
            .with_total_bytes(1000)
            .with_usable_bytes(600)
            .with_topics(vec![
                DescribeLogDirsTopic::default()
                    .with_name(TopicName(StrBytes::from_static_str("t")))
                    .with_partitions(vec![
                        DescribeLogDirsPartition::default()
                            .with_partition_index(1)
                            .with_partition_size(123),
                    ]),
            ]),
    ];
    let frame = codec::encode_response(ApiKey::DescribeLogDirs, 5, 7, &response).unwrap();
    let mut body = response_body(&frame);
    let mut r = Reader::new(&mut body);
    check!(r.i32() == Ok(0));
    check!(r.i16() == Ok(0));
    let dirs = r
        .compact_array(10, |r| -> Result<_, WireError> {
            let _error = r.i16()?;
            let dir = r.compact_string()?;
            let sizes = r.compact_array(3, |r| {
                let name = r.compact_string()?;
                let partitions = r.compact_array(22, |r| {
                    let index = r.i32()?;
                    let size = r.i64()?;
                    let _lag = r.i64()?;
                    let _future = r.bool()?;
                    r.skip_tagged_fields()?;
                    Ok((index, size))
                })?;
                r.skip_tagged_fields()?;
                Ok((name, partitions))
            })?;
            let total = r.i64()?;
            let usable = r.i64()?;
            let cordoned = r.bool()?;
            r.skip_tagged_fields()?;
            Ok((dir, sizes, total, usable, cordoned))
        })
        .unwrap();
    check!(
        dirs == vec![(
            StrBytes::from_static_str("/data"),
            vec![(StrBytes::from_static_str("t"), vec![(1, 123)])],
            1000,
            600,
            false
        )]
    );
    check!(r.skip_tagged_fields() == Ok(()));
    check!(body.is_empty());
}

#[test]
fn the_table_names_a_newer_decoder_for_each_newer_version() {
    for row in api_versions::APIS {
        if let Some(newer) = row.newer {
            check!(newer.min <= row.max, "{:?}", row.key);
            for version in newer.min..=row.max {
                check!(row.is_newer(version));
                check!(row.decoder(version, Served::Kafka4).is_some());
            }
            check!(!row.is_newer(newer.min - 1));
        }
    }
    // A response of another API's type is refused, not written.
    let mut buf = BytesMut::new();
    check!(
        encode_body(
            ApiKey::ListOffsets,
            11,
            &DeleteGroupsResponse::default(),
            &mut buf
        )
        .is_err()
    );
    check!(buf.is_empty());
}

/// An OffsetCommit v10 frame: group "g", member epoch 3, member "m", no
/// instance id, one topic by `id` with partition 1 at offset 42.
fn offset_commit_v10(id: uuid::Uuid) -> Bytes {
    let mut buf = header(ApiKey::OffsetCommit, 10);
    buf.put_compact_string(Some("g"));
    buf.put_i32(3);
    buf.put_compact_string(Some("m"));
    buf.put_compact_string(None);
    buf.put_compact_count(1);
    buf.put_uuid(id);
    buf.put_compact_count(1);
    buf.put_i32(1);
    buf.put_i64(42);
    buf.put_i32(-1);
    buf.put_compact_string(Some("meta"));
    buf.put_no_tags();
    buf.put_no_tags();
    buf.put_no_tags();
    buf.freeze()
}

#[test]
fn offset_commit_v10_names_topics_by_id() {
    let id = uuid::Uuid::from_u128(0xfeed);
    let frame = offset_commit_v10(id);
    let Request::Group(GroupRequest::OffsetCommit(got)) = decoded(frame.clone()) else {
        panic!("not OffsetCommit");
    };
    check!(got.group_id.0.as_str() == "g");
    check!(got.generation_id_or_member_epoch == 3);
    check!(got.member_id.as_str() == "m");
    check!(got.group_instance_id == None);
    check!(got.topics.len() == 1);
    check!(got.topics[0].topic_id == id);
    check!(got.topics[0].name.0.is_empty());
    let p = &got.topics[0].partitions[0];
    check!(
        (
            p.partition_index,
            p.committed_offset,
            p.committed_leader_epoch
        ) == (1, 42, -1)
    );
    check!(p.committed_metadata.as_ref().map(StrBytes::as_str) == Some("meta"));
    // Every cut-off body is refused, none panics.
    for cut in 1..frame.len() {
        let _ = codec::decode_request(frame.slice(..cut), Served::Kafka4);
    }

    // The response names the topic by id.
    let mut response = OffsetCommitResponse::default();
    response.topics = vec![
        kafka_protocol::messages::offset_commit_response::OffsetCommitResponseTopic::default()
            .with_topic_id(id)
            .with_partitions(vec![
                kafka_protocol::messages::offset_commit_response::OffsetCommitResponsePartition::default()
                    .with_partition_index(1)
                    .with_error_code(100),
            ]),
    ];
    let frame = codec::encode_response(ApiKey::OffsetCommit, 10, 7, &response).unwrap();
    let mut body = response_body(&frame);
    let mut r = Reader::new(&mut body);
    check!(r.i32() == Ok(0));
    let topics = crate::handlers::test_call::topics_by_id(&mut r);
    check!(topics == vec![(id, vec![(1, 100)])]);
}

#[test]
fn offset_fetch_v10_names_topics_by_id() {
    let id = uuid::Uuid::from_u128(0xbeef);
    let mut buf = header(ApiKey::OffsetFetch, 10);
    buf.put_compact_count(2);
    // Group "a": member "m" at epoch 5, topic `id` partitions 0 and 2.
    buf.put_compact_string(Some("a"));
    buf.put_compact_string(Some("m"));
    buf.put_i32(5);
    buf.put_compact_count(1);
    buf.put_uuid(id);
    buf.put_compact_count(2);
    buf.put_i32(0);
    buf.put_i32(2);
    buf.put_no_tags();
    buf.put_no_tags();
    // Group "b": no member, all topics (null).
    buf.put_compact_string(Some("b"));
    buf.put_compact_string(None);
    buf.put_i32(-1);
    buf.put_uvarint(0);
    buf.put_no_tags();
    // require_stable
    buf.put_u8(1);
    buf.put_no_tags();
    let Request::Group(GroupRequest::OffsetFetch(got)) = decoded(buf.freeze()) else {
        panic!("not OffsetFetch");
    };
    check!(got.require_stable);
    check!(got.groups.len() == 2);
    let a = &got.groups[0];
    check!(a.group_id.0.as_str() == "a");
    check!(a.member_id.as_ref().map(StrBytes::as_str) == Some("m"));
    check!(a.member_epoch == 5);
    let topics = a.topics.as_ref().unwrap();
    check!(topics[0].topic_id == id);
    check!(topics[0].partition_indexes == vec![0, 2]);
    check!(got.groups[1].topics.is_none());
    check!(got.groups[1].member_id.is_none());
}

/// An ApiVersions v5 frame from "kcat" 1.0 expecting `cluster` and node
/// `node`.
fn api_versions_v5(cluster: Option<&str>, node: i32) -> Bytes {
    let mut buf = header(ApiKey::ApiVersions, 5);
    buf.put_compact_string(Some("kcat"));
    buf.put_compact_string(Some("1.0"));
    buf.put_compact_string(cluster);
    buf.put_i32(node);
    buf.put_no_tags();
    buf.freeze()
}

#[test]
fn api_versions_v5_carries_the_expected_cluster_and_node() {
    let Request::ApiVersionsChecked(checked) = decoded(api_versions_v5(Some("c1"), 3)) else {
        panic!("not ApiVersions v5");
    };
    check!(checked.request.client_software_name.as_str() == "kcat");
    check!(checked.cluster_id.as_ref().map(StrBytes::as_str) == Some("c1"));
    check!(checked.node_id == 3);
    check!(!checked.mismatches("c1", 3));
    check!(checked.mismatches("c1", 4));
    check!(checked.mismatches("c2", 3));
    // A bootstrap connection names no cluster: nothing to check.
    let Request::ApiVersionsChecked(bootstrap) = decoded(api_versions_v5(None, -1)) else {
        panic!("not ApiVersions v5");
    };
    check!(!bootstrap.mismatches("c1", 3));
    // v6 is still unknown: the v0 fallback.
    let buf = header(ApiKey::ApiVersions, 6);
    check!(matches!(
        decoded(buf.freeze()),
        Request::ApiVersionsUnsupported
    ));
}

/// A TxnOffsetCommit v6 frame: transaction "tx", group "g", producer 9 at
/// epoch 2, generation 3, member "m", no instance id, one topic by `id`
/// with partition 1 at offset 42.
fn txn_offset_commit_v6(id: uuid::Uuid) -> Bytes {
    let mut buf = header(ApiKey::TxnOffsetCommit, 6);
    buf.put_compact_string(Some("tx"));
    buf.put_compact_string(Some("g"));
    buf.put_i64(9);
    buf.put_i16(2);
    buf.put_i32(3);
    buf.put_compact_string(Some("m"));
    buf.put_compact_string(None);
    buf.put_compact_count(1);
    buf.put_uuid(id);
    buf.put_compact_count(1);
    buf.put_i32(1);
    buf.put_i64(42);
    buf.put_i32(-1);
    buf.put_compact_string(Some("meta"));
    buf.put_no_tags();
    buf.put_no_tags();
    buf.put_no_tags();
    buf.freeze()
}

#[test]
fn txn_offset_commit_v6_names_topics_by_id() {
    use crate::coordinator::txn::wire::TxnRequest;
    let id = uuid::Uuid::from_u128(0xfeed);
    let frame = txn_offset_commit_v6(id);
    let Request::Txn(TxnRequest::TxnOffsetCommit(got)) = decoded(frame.clone()) else {
        panic!("not TxnOffsetCommit");
    };
    check!(got.transactional_id.0.as_str() == "tx");
    check!(got.group_id.0.as_str() == "g");
    check!((got.producer_id.0, got.producer_epoch, got.generation_id) == (9, 2, 3));
    check!(got.member_id.as_str() == "m");
    check!(got.group_instance_id == None);
    check!(got.topics.len() == 1);
    check!(txn_offset_commit::topic_id(&got.topics[0].unknown_tagged_fields) == Some(id));
    check!(got.topics[0].name.0.is_empty());
    let p = &got.topics[0].partitions[0];
    check!(
        (
            p.partition_index,
            p.committed_offset,
            p.committed_leader_epoch
        ) == (1, 42, -1)
    );
    check!(p.committed_metadata.as_ref().map(StrBytes::as_str) == Some("meta"));
    for cut in 1..frame.len() {
        let _ = codec::decode_request(frame.slice(..cut), Served::Kafka4);
    }

    // The answer to the decoded topic carries its id.
    let mut response = kafka_protocol::messages::TxnOffsetCommitResponse::default();
    response.throttle_time_ms = 5;
    response.topics =
        vec![crate::coordinator::group::topic_ids::answer_txn_commit_topic(&got.topics[0], 100)];
    let frame = codec::encode_response(ApiKey::TxnOffsetCommit, 6, 7, &response).unwrap();
    let mut body = response_body(&frame);
    let mut r = Reader::new(&mut body);
    check!(r.i32() == Ok(5));
    let topics = crate::handlers::test_call::topics_by_id(&mut r);
    check!(topics == vec![(id, vec![(1, 100)])]);
    r.skip_tagged_fields().unwrap();
    check!(body.is_empty());
}

#[test]
fn write_txn_markers_v2_carries_the_transaction_version() {
    let mut buf = header(ApiKey::WriteTxnMarkers, 2);
    buf.put_compact_count(1);
    buf.put_i64(9);
    buf.put_i16(2);
    buf.put_u8(0);
    buf.put_compact_count(1);
    buf.put_compact_string(Some("data"));
    buf.put_compact_count(1);
    buf.put_i32(3);
    buf.put_no_tags();
    buf.put_i32(4);
    buf.put_i8(2);
    buf.put_no_tags();
    buf.put_no_tags();
    let frame = buf.freeze();
    let Request::WriteTxnMarkers(r) = decoded(frame.clone()) else {
        panic!("not WriteTxnMarkers");
    };
    let m = &r.markers[0];
    check!((m.producer_id.0, m.producer_epoch, m.transaction_result) == (9, 2, false));
    check!(m.coordinator_epoch == 4);
    check!(m.topics[0].partition_indexes == vec![3]);
    check!(write_txn_markers::transaction_version(m) == krabka_ids::TransactionVersion::V2);
    for cut in 1..frame.len() {
        let _ = codec::decode_request(frame.slice(..cut), Served::Kafka4);
    }
    // The answer is v1's form.
    let answer = crate::handlers::txn_markers::answer_all(&r, 47);
    let v2 = codec::encode_response(ApiKey::WriteTxnMarkers, 2, 7, &answer).unwrap();
    let v1 = codec::encode_response(ApiKey::WriteTxnMarkers, 1, 7, &answer).unwrap();
    check!(v2 == v1);
}
