//! The legacy codecs against byte vectors written out from Kafka's
//! documented schemas (the protocol guide's BNF of each old version), and
//! against `kafka-protocol` where an old form is a newer one's.

use {
    super::*,
    crate::{coordinator::group::wire::GroupRequest, network::codec::Request},
    assert2::check,
    bytes::{BufMut, Bytes, BytesMut},
    kafka_protocol::{
        error::ResponseError,
        messages::{
            DescribeLogDirsRequest, OffsetCommitResponse, OffsetFetchRequest,
            OffsetForLeaderEpochResponse, ProduceRequest, TopicName,
            create_topics_response::CreatableTopicResult,
            delete_topics_response::DeletableTopicResult,
            describe_configs_response::{DescribeConfigsResourceResult, DescribeConfigsResult},
            fetch_response::{FetchableTopicResponse, PartitionData},
            list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse},
            offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic},
            offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult},
            produce_response::{PartitionProduceResponse, TopicProduceResponse},
        },
        protocol::{Decodable, Encodable, StrBytes},
    },
};

/// A magic 0 message: offset 0, CRC, magic 0, attributes 0, key null,
/// value "hi".
const MESSAGE_V0: &[u8] = &[
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16, 0xfd, 0x6e, 0xbd, 0xdb, 0, 0, 0xff, 0xff, 0xff, 0xff, 0,
    0, 0, 2, b'h', b'i',
];

fn string(buf: &mut BytesMut, s: &str) {
    buf.put_i16(i16::try_from(s.len()).unwrap());
    buf.put_slice(s.as_bytes());
}

/// Produce v0: acks 1, timeout 1000, topic "t", partition 3, `records`.
fn produce_v0(records: &[u8]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(1);
    b.put_i32(1000);
    b.put_i32(1);
    string(&mut b, "t");
    b.put_i32(1);
    b.put_i32(3);
    b.put_i32(i32::try_from(records.len()).unwrap());
    b.put_slice(records);
    b.freeze()
}

fn produce(body: Bytes, version: i16) -> ProduceRequest {
    match produce::decode(&mut body.clone(), version).unwrap() {
        Request::Produce(r) => r,
        other => panic!("{other:?}"),
    }
}

/// Every prefix of `body` is refused by `decode` (and none panics).
fn refuses_every_truncation(decode: crate::api_versions::Decoder, body: &Bytes, version: i16) {
    for cut in 0..body.len() {
        let mut prefix = body.slice(..cut);
        check!(
            decode(&mut prefix, version).is_err(),
            "cut at {cut} of {}",
            body.len()
        );
    }
}

/// `produce` with its message sets converted, each partition's refusal.
fn converted(body: Bytes, version: i16, limit: usize) -> (ProduceRequest, Vec<Option<i16>>) {
    let mut r = produce(body, version);
    let refusals = produce::convert(&mut r, limit)
        .into_iter()
        .map(|e| e.map(|(code, _)| code.code()))
        .collect();
    (r, refusals)
}

#[test]
fn produce_v0_converts_its_message_set() {
    // Decoding keeps the set as sent; the handler converts it.
    let raw = produce(produce_v0(MESSAGE_V0), 0);
    check!(raw.topic_data[0].partition_data[0].records.as_deref() == Some(MESSAGE_V0));
    let (r, refusals) = converted(produce_v0(MESSAGE_V0), 0, 1 << 20);
    check!(refusals == vec![None]);
    check!(r.acks == 1);
    check!(r.timeout_ms == 1000);
    check!(r.transactional_id.is_none());
    check!(r.topic_data[0].name.0.as_str() == "t");
    let p = &r.topic_data[0].partition_data[0];
    check!(p.index == 3);
    let batch = p.records.clone().unwrap();
    let header = krabka_log::batch::check_batch(&batch).unwrap();
    check!(header.record_count == 1);
    check!(header.max_timestamp == -1);
    let records = krabka_log::batch::decode_records(&batch).unwrap();
    check!(records[0].value.as_deref() == Some(&b"hi"[..]));
}

#[test]
fn produce_v0_reads_as_v3_without_its_transactional_id() {
    // v3 is v0 with a transactional id in front; with the records already
    // v2 both decoders must agree on every other field.
    let v2_batch = converted(produce_v0(MESSAGE_V0), 0, 1 << 20).0.topic_data[0].partition_data[0]
        .records
        .clone()
        .unwrap();
    let mut v3 = BytesMut::new();
    v3.put_i16(-1);
    v3.put_slice(&produce_v0(&v2_batch));
    let modern = ProduceRequest::decode(&mut v3.freeze(), 3).unwrap();
    check!(converted(produce_v0(MESSAGE_V0), 2, 1 << 20).0 == modern);
}

#[test]
fn a_corrupt_message_set_leaves_the_partition_empty() {
    let mut bad = MESSAGE_V0.to_vec();
    bad[27] = b'j';
    let (r, refusals) = converted(produce_v0(&bad), 1, 1 << 20);
    check!(r.topic_data[0].partition_data[0].records.as_deref() == Some(&b""[..]));
    check!(refusals == vec![Some(ResponseError::CorruptMessage.code())]);
    refuses_every_truncation(produce::decode, &produce_v0(MESSAGE_V0), 0);
}

/// A magic 1 gzip wrapper around one message of `size` zeros: a v2 gzip
/// batch, down-converted as a Fetch v2 gets it.
fn gzip_wrapper(size: usize) -> Vec<u8> {
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: 0,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1,
        key: None,
        value: Some(Bytes::from(vec![0; size])),
        headers: Default::default(),
    };
    let mut batch = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut batch,
        [&record],
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::Gzip,
        },
    )
    .unwrap();
    krabka_log::message_set::from_batches(&batch, 1, 0, usize::MAX).to_vec()
}

#[test]
fn a_message_set_inflating_past_the_bound_is_too_large_for_its_partition_alone() {
    let limit = 1 << 20;
    let mut b = BytesMut::new();
    b.put_i16(1);
    b.put_i32(1000);
    b.put_i32(1);
    string(&mut b, "t");
    b.put_i32(2);
    for (index, set) in [(0, gzip_wrapper(2 * limit)), (1, MESSAGE_V0.to_vec())] {
        b.put_i32(index);
        b.put_i32(i32::try_from(set.len()).unwrap());
        b.put_slice(&set);
    }
    let (r, refusals) = converted(b.freeze(), 2, limit);
    check!(refusals == vec![Some(ResponseError::MessageTooLarge.code()), None]);
    check!(r.topic_data[0].partition_data[0].records.as_deref() == Some(&b""[..]));
    let batch = r.topic_data[0].partition_data[1].records.clone().unwrap();
    check!(krabka_log::batch::check_batch(&batch).is_ok());
    // The bound is for the whole request: two sets of 600 KiB pass one by
    // one, not together.
    let (_, alone) = converted(produce_v0(&gzip_wrapper(600 << 10)), 0, limit);
    check!(alone == vec![None]);
    let mut both = BytesMut::new();
    both.put_i16(1);
    both.put_i32(1000);
    both.put_i32(1);
    string(&mut both, "t");
    both.put_i32(2);
    for index in 0..2 {
        let set = gzip_wrapper(600 << 10);
        both.put_i32(index);
        both.put_i32(i32::try_from(set.len()).unwrap());
        both.put_slice(&set);
    }
    let (_, refusals) = converted(both.freeze(), 0, limit);
    check!(refusals == vec![None, Some(ResponseError::MessageTooLarge.code())]);
}

#[test]
fn produce_responses_at_v0_to_v2() {
    let mut p = PartitionProduceResponse::default();
    p.index = 3;
    p.error_code = 0;
    p.base_offset = 42;
    p.log_append_time_ms = -1;
    let mut t = TopicProduceResponse::default();
    t.name = TopicName(StrBytes::from_static_str("t"));
    t.partition_responses.push(p);
    let mut r = ProduceResponse::default();
    r.responses.push(t);
    r.throttle_time_ms = 5;
    let body = |v| {
        let mut b = BytesMut::new();
        produce::encode(&r, v, &mut b);
        b.to_vec()
    };
    let v0 = [
        0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 42,
    ];
    check!(body(0) == v0);
    check!(body(1) == [&v0[..], &[0, 0, 0, 5]].concat());
    // v2's form is v3's.
    let mut v3 = BytesMut::new();
    r.encode(&mut v3, 3).unwrap();
    check!(body(2) == v3.to_vec());
}

fn fetch_body(version: i16) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i32(-1);
    b.put_i32(500);
    b.put_i32(1);
    if version >= 3 {
        b.put_i32(1 << 20);
    }
    b.put_i32(1);
    string(&mut b, "t");
    b.put_i32(1);
    b.put_i32(0);
    b.put_i64(7);
    b.put_i32(65536);
    b.freeze()
}

#[test]
fn fetch_requests_v0_to_v3() {
    for version in 0..=3 {
        let Request::Fetch(r) = fetch::decode(&mut fetch_body(version), version).unwrap() else {
            panic!()
        };
        check!(r.max_wait_ms == 500);
        check!(r.min_bytes == 1);
        check!(r.max_bytes == if version >= 3 { 1 << 20 } else { i32::MAX });
        check!(r.isolation_level == 0);
        check!(r.session_epoch == -1);
        let p = &r.topics[0].partitions[0];
        check!((p.fetch_offset, p.partition_max_bytes) == (7, 65536));
        refuses_every_truncation(fetch::decode, &fetch_body(version), version);
    }
    check!(fetch::magic(0) == 0);
    check!(fetch::magic(1) == 0);
    check!(fetch::magic(2) == 1);
    check!(fetch::magic(3) == 1);
}

#[test]
fn fetch_responses_v0_and_v1() {
    let mut p = PartitionData::default();
    p.partition_index = 0;
    p.high_watermark = 9;
    p.records = Some(Bytes::from_static(b"MS"));
    let mut t = FetchableTopicResponse::default();
    t.topic = TopicName(StrBytes::from_static_str("t"));
    t.partitions.push(p);
    let mut r = FetchResponse::default();
    r.responses.push(t);
    r.throttle_time_ms = 2;
    let body = |v| {
        let mut b = BytesMut::new();
        fetch::encode(&r, v, &mut b);
        b.to_vec()
    };
    let v0 = [
        0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 2,
        b'M', b'S',
    ];
    check!(body(0) == v0);
    check!(body(3) == [&[0, 0, 0, 2][..], &v0].concat());
}

#[test]
fn list_offsets_v0() {
    let mut b = BytesMut::new();
    b.put_i32(-1);
    b.put_i32(1);
    string(&mut b, "t");
    b.put_i32(1);
    b.put_i32(0);
    b.put_i64(-2);
    b.put_i32(1);
    let body = b.freeze();
    let Request::ListOffsets(r) = list_offsets::decode(&mut body.clone(), 0).unwrap() else {
        panic!()
    };
    check!(r.topics[0].partitions[0].timestamp == -2);
    refuses_every_truncation(list_offsets::decode, &body, 0);

    let mut ok = ListOffsetsPartitionResponse::default();
    ok.offset = 12;
    let mut failed = ListOffsetsPartitionResponse::default();
    failed.partition_index = 1;
    failed.error_code = 3;
    failed.offset = -1;
    let mut t = ListOffsetsTopicResponse::default();
    t.name = TopicName(StrBytes::from_static_str("t"));
    t.partitions = vec![ok, failed];
    let mut resp = ListOffsetsResponse::default();
    resp.topics.push(t);
    let mut out = BytesMut::new();
    list_offsets::encode(&resp, &mut out);
    check!(
        out.to_vec()
            == [
                &[0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 2][..],
                &[0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 12],
                &[0, 0, 0, 1, 0, 3, 0, 0, 0, 0],
            ]
            .concat()
    );
}

fn offset_commit_body(version: i16) -> Bytes {
    let mut b = BytesMut::new();
    string(&mut b, "g");
    if version >= 1 {
        b.put_i32(-1);
        string(&mut b, "");
    }
    b.put_i32(1);
    string(&mut b, "t");
    b.put_i32(1);
    b.put_i32(0);
    b.put_i64(33);
    if version >= 1 {
        b.put_i64(-1);
    }
    string(&mut b, "meta");
    b.freeze()
}

#[test]
fn offset_commit_v0_and_v1() {
    for version in 0..=1 {
        let body = offset_commit_body(version);
        let Request::Group(GroupRequest::OffsetCommit(r)) =
            offset_commit::decode(&mut body.clone(), version).unwrap()
        else {
            panic!()
        };
        check!(r.group_id.0.as_str() == "g");
        check!(r.generation_id_or_member_epoch == -1);
        check!(r.member_id.as_str() == "");
        let p = &r.topics[0].partitions[0];
        check!(p.committed_offset == 33);
        check!(p.committed_metadata.as_deref() == Some("meta"));
        refuses_every_truncation(offset_commit::decode, &body, version);
    }
    let mut p = OffsetCommitResponsePartition::default();
    p.error_code = 25;
    let mut t = OffsetCommitResponseTopic::default();
    t.name = TopicName(StrBytes::from_static_str("t"));
    t.partitions.push(p);
    let mut r = OffsetCommitResponse::default();
    r.topics.push(t);
    r.throttle_time_ms = 9;
    let mut out = BytesMut::new();
    offset_commit::encode(&r, &mut out).unwrap();
    check!(out.to_vec() == [0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 0, 0, 25]);
}

#[test]
fn offset_fetch_v0_is_v1() {
    let mut b = BytesMut::new();
    string(&mut b, "g");
    b.put_i32(1);
    string(&mut b, "t");
    b.put_i32(1);
    b.put_i32(0);
    let body = b.freeze();
    let Request::Group(GroupRequest::OffsetFetch(r)) =
        offset_fetch::decode(&mut body.clone(), 0).unwrap()
    else {
        panic!()
    };
    check!(r == OffsetFetchRequest::decode(&mut body.clone(), 1).unwrap());
    refuses_every_truncation(offset_fetch::decode, &body, 0);
}

fn create_topics_body(version: i16) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i32(1);
    string(&mut b, "new");
    b.put_i32(3);
    b.put_i16(1);
    b.put_i32(0); // no assignments
    b.put_i32(1);
    string(&mut b, "cleanup.policy");
    string(&mut b, "compact");
    b.put_i32(5000);
    if version >= 1 {
        b.put_u8(1);
    }
    b.freeze()
}

#[test]
fn create_topics_v0_and_v1() {
    for version in 0..=1 {
        let body = create_topics_body(version);
        let Request::CreateTopics(r) = create_topics::decode(&mut body.clone(), version).unwrap()
        else {
            panic!()
        };
        let t = &r.topics[0];
        check!(t.name.0.as_str() == "new");
        check!((t.num_partitions, t.replication_factor) == (3, 1));
        check!(t.configs[0].value.as_deref() == Some("compact"));
        check!(r.timeout_ms == 5000);
        check!(r.validate_only == (version == 1));
        refuses_every_truncation(create_topics::decode, &body, version);
    }
    let mut t = CreatableTopicResult::default();
    t.name = TopicName(StrBytes::from_static_str("new"));
    t.error_code = 36;
    t.error_message = Some(StrBytes::from_static_str("x"));
    let mut r = CreateTopicsResponse::default();
    r.topics.push(t);
    let body = |v| {
        let mut b = BytesMut::new();
        create_topics::encode(&r, v, &mut b);
        b.to_vec()
    };
    let v0 = [0, 0, 0, 1, 0, 3, b'n', b'e', b'w', 0, 36];
    check!(body(0) == v0);
    check!(body(1) == [&v0[..], &[0, 1, b'x']].concat());
}

#[test]
fn delete_topics_v0() {
    let mut b = BytesMut::new();
    b.put_i32(1);
    string(&mut b, "old");
    b.put_i32(1000);
    let body = b.freeze();
    let Request::DeleteTopics(r) = delete_topics::decode(&mut body.clone(), 0).unwrap() else {
        panic!()
    };
    check!(r.topic_names[0].0.as_str() == "old");
    refuses_every_truncation(delete_topics::decode, &body, 0);
    let mut t = DeletableTopicResult::default();
    t.name = Some(TopicName(StrBytes::from_static_str("old")));
    t.error_code = 3;
    let mut resp = DeleteTopicsResponse::default();
    resp.responses.push(t);
    resp.throttle_time_ms = 7;
    let mut out = BytesMut::new();
    delete_topics::encode(&resp, &mut out);
    check!(out.to_vec() == [0, 0, 0, 1, 0, 3, b'o', b'l', b'd', 0, 3]);
}

#[test]
fn describe_configs_v0() {
    let mut b = BytesMut::new();
    b.put_i32(1);
    b.put_i8(2);
    string(&mut b, "t");
    b.put_i32(-1);
    let body = b.freeze();
    let Request::DescribeConfigs(r) = describe_configs::decode(&mut body.clone(), 0).unwrap()
    else {
        panic!()
    };
    check!(r.resources[0].resource_type == 2);
    check!(r.resources[0].configuration_keys.is_none());
    check!(!r.include_synonyms);
    refuses_every_truncation(describe_configs::decode, &body, 0);

    let mut c = DescribeConfigsResourceResult::default();
    c.name = StrBytes::from_static_str("a");
    c.value = Some(StrBytes::from_static_str("1"));
    c.config_source = 5;
    let mut res = DescribeConfigsResult::default();
    res.error_message = None;
    res.resource_type = 2;
    res.resource_name = StrBytes::from_static_str("t");
    res.configs.push(c);
    let mut resp = DescribeConfigsResponse::default();
    resp.results.push(res);
    let mut out = BytesMut::new();
    describe_configs::encode(&resp, &mut out);
    check!(
        out.to_vec()
            == [
                0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0xff, 0xff, 2, 0, 1, b't', 0, 0, 0, 1, 0, 1, b'a', 0,
                1, b'1', 0, 1, 0
            ]
    );
}

#[test]
fn offset_for_leader_epoch_v0_and_v1() {
    let mut b = BytesMut::new();
    b.put_i32(1);
    string(&mut b, "t");
    b.put_i32(1);
    b.put_i32(2);
    b.put_i32(5);
    let body = b.freeze();
    for version in 0..=1 {
        let Request::OffsetForLeaderEpoch(r) =
            offset_for_leader_epoch::decode(&mut body.clone(), version).unwrap()
        else {
            panic!()
        };
        let p = &r.topics[0].partitions[0];
        check!((p.partition, p.leader_epoch, p.current_leader_epoch) == (2, 5, -1));
        refuses_every_truncation(offset_for_leader_epoch::decode, &body, version);
    }
    let mut p = EpochEndOffset::default();
    p.partition = 2;
    p.leader_epoch = 5;
    p.end_offset = 100;
    let mut t = OffsetForLeaderTopicResult::default();
    t.topic = TopicName(StrBytes::from_static_str("t"));
    t.partitions.push(p);
    let mut resp = OffsetForLeaderEpochResponse::default();
    resp.topics.push(t);
    let body = |v| {
        let mut b = BytesMut::new();
        offset_for_leader_epoch::encode(&resp, v, &mut b);
        b.to_vec()
    };
    let head = [0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 0, 0, 2];
    let end = [0, 0, 0, 0, 0, 0, 0, 100];
    check!(body(0) == [&head[..], &end].concat());
    check!(body(1) == [&head[..], &[0, 0, 0, 5], &end].concat());
}

#[test]
fn describe_log_dirs_v0_is_v1() {
    let mut b = BytesMut::new();
    b.put_i32(-1);
    let body = b.freeze();
    let Request::DescribeLogDirs(r) = describe_log_dirs::decode(&mut body.clone(), 0).unwrap()
    else {
        panic!()
    };
    check!(r == DescribeLogDirsRequest::decode(&mut body.clone(), 1).unwrap());
    refuses_every_truncation(describe_log_dirs::decode, &body, 0);
}

#[test]
fn a_response_of_the_wrong_type_has_no_encoder() {
    let mut out = BytesMut::new();
    check!(
        encode_body(ApiKey::Produce, 0, &FetchResponse::default(), &mut out)
            == Err(EncodeError::NoEncoder {
                api: ApiKey::Produce,
                version: 0
            })
    );
    check!(encode_body(ApiKey::Metadata, 0, &FetchResponse::default(), &mut out).is_err());
}
