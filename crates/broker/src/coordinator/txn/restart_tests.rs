//! Crash-and-restart tests over a real broker state directory: real
//! partition logs, a real `__transaction_state` and `__consumer_offsets`,
//! requests through the broker's dispatcher. The "crash" drops the broker
//! without closing a single log, as `kill -9` leaves it.

use {
    super::{TRANSACTION_STATE_TOPIC, TxnState, wire::TxnRequest},
    crate::{
        broker::Broker,
        config::{BrokerConfig, RawSettings},
        coordinator::group::{OFFSETS_TOPIC, wire::GroupRequest},
        network::codec::Request,
    },
    assert2::check,
    kafka_protocol::messages::*,
    std::{path::Path, sync::Arc, time::Duration},
};

fn config(dir: &Path) -> BrokerConfig {
    let mut raw = RawSettings::default();
    for (k, v) in [
        ("log.dirs", dir.display().to_string().as_str()),
        ("log.cleaner.enable", "false"),
        ("offsets.topic.num.partitions", "3"),
        ("transaction.state.log.num.partitions", "3"),
        // The test drives every abort itself (at startup).
        (
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            "600000",
        ),
    ] {
        raw.set(k, v, "test");
    }
    BrokerConfig::from_raw(&raw).unwrap()
}

/// Opens the broker in `dir` and starts both coordinators, as `serve` does.
async fn start(dir: &Path) -> Arc<Broker> {
    let cfg = config(dir);
    let broker = Arc::new(
        crate::blocking::run(move || Broker::open(cfg))
            .await
            .unwrap()
            .unwrap(),
    );
    let groups = crate::coordinator::group::broker_log::start(&broker)
        .await
        .unwrap();
    let _ = broker.groups.set(groups);
    let txns = super::broker_log::start(&broker).await.unwrap();
    let _ = broker.txns.set(txns);
    broker
}

use {
    super::test_client::{add_partition, committed_offset, init, produce, sb, send_offsets},
    crate::handlers::test_call::call,
};

fn state(broker: &Broker, id: &str) -> Option<(TxnState, i16)> {
    broker
        .txns
        .get()
        .unwrap()
        .with_state(|s| s.get(id).map(|m| (m.state, m.producer_epoch.0)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_prepared_before_a_crash_completes_and_an_open_one_aborts_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path()).await;
    crate::handlers::admin::create_topic(&broker, "data", 1, -1, &[], Default::default(), false)
        .await
        .unwrap();
    check!(
        broker
            .registry
            .get(TRANSACTION_STATE_TOPIC)
            .unwrap()
            .partitions
            == 3
    );
    check!(
        broker
            .registry
            .get(TRANSACTION_STATE_TOPIC)
            .unwrap()
            .configs["cleanup.policy"]
            == "compact"
    );

    let dying = init(&broker, "dying", 1_000).await;
    add_partition(&broker, "dying", dying, "data").await;
    produce(&broker, "dying", dying, &["d1", "d2"]).await;

    let committing = init(&broker, "committing", 60_000).await;
    add_partition(&broker, "committing", committing, "data").await;
    produce(&broker, "committing", committing, &["c1", "c2"]).await;
    send_offsets(&broker, "committing", committing, "g", 4).await;
    // Pending: a require_stable fetch is told to wait.
    check!(committed_offset(&broker, "g").await == -88);

    // Every marker fails from here on (the logs refuse appends), as if the
    // broker died right after the prepare: EndTxn is answered once
    // PrepareCommit is durable.
    let group_partition = broker.groups.get().unwrap().partition_for("g");
    broker
        .partitions
        .get("data", 0)
        .unwrap()
        .local_log()
        .close()
        .unwrap();
    broker
        .partitions
        .get(OFFSETS_TOPIC, group_partition)
        .unwrap()
        .local_log()
        .close()
        .unwrap();
    let mut end = EndTxnRequest::default();
    end.transactional_id = TransactionalId(sb("committing"));
    end.producer_id = ProducerId(committing.0);
    end.producer_epoch = committing.1;
    end.committed = true;
    let resp: EndTxnResponse = call(
        &broker,
        ApiKey::EndTxn,
        3,
        Request::Txn(TxnRequest::EndTxn(end)),
    )
    .await;
    check!(resp.error_code == 0);
    check!(state(&broker, "committing") == Some((TxnState::PrepareCommit, committing.1)));
    // "dying" outlives its timeout while the broker is down.
    tokio::time::sleep(Duration::from_millis(1_100)).await;

    // Crash: nothing is closed or flushed.
    check!(Arc::strong_count(&broker) == 1);
    drop(broker);

    let broker = start(dir.path()).await;
    // Startup wrote the commit's markers and recorded its completion, and
    // aborted the expired transaction under a bumped epoch.
    check!(state(&broker, "committing") == Some((TxnState::CompleteCommit, committing.1)));
    check!(state(&broker, "dying") == Some((TxnState::CompleteAbort, dying.1 + 1)));
    let log = Arc::clone(broker.partitions.get("data", 0).unwrap().local_log());
    check!(log.last_stable_offset() == log.log_end_offset());
    let aborted = log.aborted_transactions(0, log.log_end_offset()).unwrap();
    check!(aborted.len() == 1);
    check!(aborted[0].producer_id.0 == dying.0);
    check!(aborted[0].first_offset == 0);
    // The transaction's offsets became visible with its COMMIT marker.
    check!(committed_offset(&broker, "g").await == 4);
    let producers = log.producers();
    check!(
        producers
            .iter()
            .all(|p| p.current_txn_start_offset.is_none())
    );

    // A clean restart keeps all of it; the ids carry on with their producer ids.
    let closing = Arc::clone(&broker);
    crate::blocking::run(move || closing.partitions.close_all())
        .await
        .unwrap();
    drop(broker);
    let broker = start(dir.path()).await;
    check!(state(&broker, "committing") == Some((TxnState::CompleteCommit, committing.1)));
    check!(committed_offset(&broker, "g").await == 4);
    let again = init(&broker, "committing", 60_000).await;
    check!(again == (committing.0, committing.1 + 1));
    // The persisted allocator never hands out an id again after restarts.
    let fresh = init(&broker, "fresh", 60_000).await;
    check!(fresh.0 != dying.0);
    check!(fresh.0 != committing.0);
    check!(fresh.1 == 0);
    let resp: ListGroupsResponse = call(
        &broker,
        ApiKey::ListGroups,
        4,
        Request::Group(GroupRequest::ListGroups(ListGroupsRequest::default())),
    )
    .await;
    check!(resp.groups.iter().any(|g| g.group_id.0.as_str() == "g"));
    let closing = Arc::clone(&broker);
    crate::blocking::run(move || closing.partitions.close_all())
        .await
        .unwrap();
}

async fn init_with(
    broker: &Arc<Broker>,
    id: Option<&str>,
    producer: (i64, i16),
    version: i16,
) -> (i16, i64, i16) {
    let mut r = InitProducerIdRequest::default();
    r.transactional_id = id.map(|id| TransactionalId(sb(id)));
    r.transaction_timeout_ms = 60_000;
    r.producer_id = ProducerId(producer.0);
    r.producer_epoch = producer.1;
    let resp: InitProducerIdResponse = call(
        broker,
        ApiKey::InitProducerId,
        version,
        Request::InitProducerId(r),
    )
    .await;
    (resp.error_code, resp.producer_id.0, resp.producer_epoch)
}

/// KIP-360 through the dispatcher: a transactional producer's retried bump
/// gets the same answer and can commit under it, a restart forgets the bump
/// (its retry is fenced); an idempotent producer naming its id gets a fresh
/// one, as on Kafka.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip360_txn_retried_init_producer_id_through_the_dispatcher() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path()).await;
    crate::handlers::admin::create_topic(&broker, "data", 1, -1, &[], Default::default(), false)
        .await
        .unwrap();
    init(&broker, "kip360", 60_000).await;
    let first = init(&broker, "kip360", 60_000).await;
    check!(first.1 == 1);
    let bump = init_with(&broker, Some("kip360"), first, 4).await;
    check!(bump == (0, first.0, first.1 + 1));
    check!(init_with(&broker, Some("kip360"), first, 4).await == bump);
    let producer = (bump.1, bump.2);
    add_partition(&broker, "kip360", producer, "data").await;
    produce(&broker, "kip360", producer, &["a"]).await;
    let mut end = EndTxnRequest::default();
    end.transactional_id = TransactionalId(sb("kip360"));
    end.producer_id = ProducerId(producer.0);
    end.producer_epoch = producer.1;
    end.committed = true;
    let resp: EndTxnResponse = call(
        &broker,
        ApiKey::EndTxn,
        3,
        Request::Txn(TxnRequest::EndTxn(end)),
    )
    .await;
    check!(resp.error_code == 0);
    check!(state(&broker, "kip360") == Some((TxnState::CompleteCommit, producer.1)));
    // An epoch older than the last bump's is a zombie (PRODUCER_FENCED).
    check!(
        init_with(&broker, Some("kip360"), (first.0, first.1 - 1), 4)
            .await
            .0
            == 90
    );

    // Idempotent: never the named id back, and a retry is just another call.
    let (code, pid, epoch) = init_with(&broker, None, (-1, -1), 4).await;
    check!((code, epoch) == (0, 0));
    let renewed = init_with(&broker, None, (pid, epoch), 4).await;
    check!(renewed.0 == 0);
    check!(renewed.1 != pid);
    check!(renewed.2 == 0);
    let retried = init_with(&broker, None, (pid, epoch), 4).await;
    check!(retried.0 == 0);
    check!(retried.1 != renewed.1);
    check!(init_with(&broker, None, (pid, -1), 4).await.0 == 42);
    // An empty transactional.id is malformed too (Kafka's coordinator).
    check!(init_with(&broker, Some(""), (-1, -1), 4).await.0 == 42);

    let closing = Arc::clone(&broker);
    crate::blocking::run(move || closing.partitions.close_all())
        .await
        .unwrap();
    drop(broker);
    let broker = start(dir.path()).await;
    check!(init_with(&broker, Some("kip360"), first, 4).await.0 == 90);
    check!(
        init_with(&broker, Some("kip360"), producer, 4).await == (0, producer.0, producer.1 + 1)
    );
    let closing = Arc::clone(&broker);
    crate::blocking::run(move || closing.partitions.close_all())
        .await
        .unwrap();
}

/// A TxnOffsetCommit v6 (topics by id, transactions v2) frame's body for
/// partition 0 of each of `ids`, at `offset`, decoded as the broker does.
fn txn_offset_commit_v6(
    id: &str,
    producer: (i64, i16),
    group: &str,
    ids: &[uuid::Uuid],
) -> Request {
    use {crate::network::wire::CompactWriter, bytes::BufMut};
    let mut header = RequestHeader::default();
    header.request_api_key = ApiKey::TxnOffsetCommit as i16;
    header.request_api_version = 6;
    let mut buf = bytes::BytesMut::new();
    kafka_protocol::protocol::encode_request_header_into_buffer(&mut buf, &header).unwrap();
    buf.put_compact_string(Some(id));
    buf.put_compact_string(Some(group));
    buf.put_i64(producer.0);
    buf.put_i16(producer.1);
    buf.put_i32(-1);
    buf.put_compact_string(Some(""));
    buf.put_compact_string(None);
    buf.put_compact_count(ids.len());
    for topic in ids {
        buf.put_uuid(*topic);
        buf.put_compact_count(1);
        buf.put_i32(0);
        buf.put_i64(4);
        buf.put_i32(-1);
        buf.put_compact_string(None);
        buf.put_no_tags();
        buf.put_no_tags();
    }
    buf.put_no_tags();
    crate::network::codec::decode_request(buf.freeze(), crate::api_versions::Served::Kafka4)
        .unwrap()
        .body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_sent_by_topic_id_commit_with_the_transaction_and_survive_a_crash() {
    use crate::network::wire::Reader;
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path()).await;
    crate::handlers::admin::create_topic(&broker, "data", 1, -1, &[], Default::default(), false)
        .await
        .unwrap();
    let data = broker.registry.get("data").unwrap().id;
    let stranger = uuid::Uuid::from_u128(0x5);
    let producer = init(&broker, "tx", 60_000).await;

    // Transactions v2: the v6 commit adds the group's partition itself.
    let body = txn_offset_commit_v6("tx", producer, "g", &[data, stranger]);
    let mut answer =
        crate::handlers::test_call::call_raw(&broker, None, ApiKey::TxnOffsetCommit, 6, body).await;
    let mut r = Reader::new(&mut answer);
    check!(r.i32() == Ok(0));
    let mut topics = crate::handlers::test_call::topics_by_id(&mut r);
    topics.sort();
    let mut expected = vec![(data, vec![(0, 0)]), (stranger, vec![(0, 100)])];
    expected.sort();
    check!(topics == expected);
    check!(committed_offset(&broker, "g").await == -88);

    let mut end = EndTxnRequest::default();
    end.transactional_id = TransactionalId(sb("tx"));
    end.producer_id = ProducerId(producer.0);
    end.producer_epoch = producer.1;
    end.committed = true;
    let resp: EndTxnResponse = call(
        &broker,
        ApiKey::EndTxn,
        5,
        Request::Txn(TxnRequest::EndTxn(end)),
    )
    .await;
    check!(resp.error_code == 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while committed_offset(&broker, "g").await != 4 {
        assert!(
            std::time::Instant::now() < deadline,
            "the offset never became visible"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Crash: nothing is closed or flushed; the committed offset stays.
    check!(Arc::strong_count(&broker) == 1);
    drop(broker);
    let broker = start(dir.path()).await;
    check!(committed_offset(&broker, "g").await == 4);
    let closing = Arc::clone(&broker);
    crate::blocking::run(move || closing.partitions.close_all())
        .await
        .unwrap();
}
