//! Test support: a transactional producer's requests through the broker's
//! dispatcher, in process — InitProducerId, AddPartitionsToTxn, a
//! transactional produce to `data-0`, offsets sent to the transaction —
//! and what a `require_stable` offset fetch then sees.

use {
    super::wire::TxnRequest,
    crate::{
        broker::Broker, coordinator::group::RequestContext, handlers::test_call::call,
        network::codec::Request,
    },
    assert2::check,
    bytes::Bytes,
    kafka_protocol::{
        messages::*,
        protocol::StrBytes,
        records::{Record, TimestampType},
    },
    std::sync::Arc,
};

pub(crate) fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// InitProducerId for transactional id `id`; returns (producer id, epoch).
pub(crate) async fn init(broker: &Arc<Broker>, id: &str, timeout_ms: i32) -> (i64, i16) {
    let mut r = InitProducerIdRequest::default();
    r.transactional_id = Some(TransactionalId(sb(id)));
    r.transaction_timeout_ms = timeout_ms;
    r.producer_id = ProducerId(-1);
    r.producer_epoch = -1;
    let resp: InitProducerIdResponse = call(
        broker,
        ApiKey::InitProducerId,
        4,
        Request::InitProducerId(r),
    )
    .await;
    check!(resp.error_code == 0);
    (resp.producer_id.0, resp.producer_epoch)
}

/// Adds partition 0 of `topic` to `id`'s transaction.
pub(crate) async fn add_partition(
    broker: &Arc<Broker>,
    id: &str,
    producer: (i64, i16),
    topic: &str,
) {
    let mut t = add_partitions_to_txn_request::AddPartitionsToTxnTopic::default();
    t.name = TopicName(sb(topic));
    t.partitions = vec![0];
    let mut r = AddPartitionsToTxnRequest::default();
    r.v3_and_below_transactional_id = TransactionalId(sb(id));
    r.v3_and_below_producer_id = ProducerId(producer.0);
    r.v3_and_below_producer_epoch = producer.1;
    r.v3_and_below_topics = vec![t];
    let resp: AddPartitionsToTxnResponse = call(
        broker,
        ApiKey::AddPartitionsToTxn,
        3,
        Request::Txn(TxnRequest::AddPartitionsToTxn(r)),
    )
    .await;
    check!(resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0);
}

/// One transactional batch of `values` from `producer`.
pub(crate) fn txn_batch(producer: (i64, i16), values: &[&str]) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: true,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: producer.0,
            producer_epoch: producer.1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: i as i32,
            timestamp: 1_000,
            key: None,
            value: Some(Bytes::copy_from_slice(v.as_bytes())),
            headers: Default::default(),
        })
        .collect();
    crate::coordinator::state_topic::encode_v2_batch(&records).unwrap()
}

/// Produces `values` to `data-0` in `id`'s transaction (acks=all).
pub(crate) async fn produce(broker: &Arc<Broker>, id: &str, producer: (i64, i16), values: &[&str]) {
    let mut p = produce_request::PartitionProduceData::default();
    p.index = 0;
    p.records = Some(txn_batch(producer, values));
    let mut t = produce_request::TopicProduceData::default();
    t.name = TopicName(sb("data"));
    t.partition_data = vec![p];
    let mut r = ProduceRequest::default();
    r.transactional_id = Some(TransactionalId(sb(id)));
    r.acks = -1;
    r.timeout_ms = 5_000;
    r.topic_data = vec![t];
    let resp: ProduceResponse = call(broker, ApiKey::Produce, 9, Request::Produce(r)).await;
    check!(resp.responses[0].partition_responses[0].error_code == 0);
}

/// AddOffsetsToTxn for `group`, then TxnOffsetCommit of `offset` for
/// `data-0`: the group's offset is pending until the transaction ends.
pub(crate) async fn send_offsets(
    broker: &Arc<Broker>,
    id: &str,
    producer: (i64, i16),
    group: &str,
    offset: i64,
) {
    let mut add = AddOffsetsToTxnRequest::default();
    add.transactional_id = TransactionalId(sb(id));
    add.producer_id = ProducerId(producer.0);
    add.producer_epoch = producer.1;
    add.group_id = GroupId(sb(group));
    let resp: AddOffsetsToTxnResponse = call(
        broker,
        ApiKey::AddOffsetsToTxn,
        3,
        Request::Txn(TxnRequest::AddOffsetsToTxn(add)),
    )
    .await;
    check!(resp.error_code == 0);
    let mut p = txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
    p.partition_index = 0;
    p.committed_offset = offset;
    let mut t = txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
    t.name = TopicName(sb("data"));
    t.partitions = vec![p];
    let mut offsets = TxnOffsetCommitRequest::default();
    offsets.transactional_id = TransactionalId(sb(id));
    offsets.group_id = GroupId(sb(group));
    offsets.producer_id = ProducerId(producer.0);
    offsets.producer_epoch = producer.1;
    offsets.generation_id = -1;
    offsets.topics = vec![t];
    let resp: TxnOffsetCommitResponse = call(
        broker,
        ApiKey::TxnOffsetCommit,
        3,
        Request::Txn(TxnRequest::TxnOffsetCommit(offsets)),
    )
    .await;
    check!(resp.topics[0].partitions[0].error_code == 0);
}

/// `group`'s committed offset of `data-0` as a `require_stable` fetch sees
/// it: the offset, or minus the error code (−88 while a transaction's
/// offset is pending).
pub(crate) async fn committed_offset(broker: &Arc<Broker>, group: &str) -> i64 {
    let mut t = offset_fetch_request::OffsetFetchRequestTopic::default();
    t.name = TopicName(sb("data"));
    t.partition_indexes = vec![0];
    let mut r = OffsetFetchRequest::default();
    r.group_id = GroupId(sb(group));
    r.topics = Some(vec![t]);
    r.require_stable = true;
    let resp = broker
        .groups
        .get()
        .unwrap()
        .offset_fetch(&RequestContext::new(7, "test", ""), r)
        .await;
    let p = &resp.topics[0].partitions[0];
    if p.error_code != 0 {
        return -(i64::from(p.error_code));
    }
    p.committed_offset
}
