"""Transactions (KIP-98) with confluent-kafka against the krabka binary.

Commit and abort through the transaction coordinator, read_committed vs
read_uncommitted consumers, the LSO holding back an open transaction,
fencing of an older producer with the same transactional.id, the
coordinator aborting a transaction that outlives its timeout, the
transaction tooling (DescribeProducers, ListTransactions,
DescribeTransactions through kafka-python's admin client), transactional id
expiry, the transaction settings, and Kafka's error codes for out-of-order
or stale transactional calls (sent raw, encoded by kafka-python).
"""

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka import TopicPartition as KTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import TransactionalIdNotFoundError, UnknownTopicOrPartitionError
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, EndTxnRequest, EndTxnResponse, InitProducerIdRequest,
    InitProducerIdResponse, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
)

from helpers import create_topic, raw_call, record_batch, wait_for

# Timed-out transactions are aborted within half a second instead of
# Kafka's 10 s check interval.
FAST_ABORT = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "300"}


def txn_producer(bootstrap, txn_id, extra=None):
    conf = {
        "bootstrap.servers": bootstrap,
        "transactional.id": txn_id,
        "linger.ms": 5,
    }
    conf.update(extra or {})
    return Producer(conf)


def read_values(bootstrap, topic, partitions, isolation, until=None, timeout=20.0, quiet=2.0):
    """Every value in `partitions` of `topic` from the start, as a list.

    Stops when `until(values)` is true, or after `quiet` seconds without a
    new record once something was read (or `timeout` overall).
    """
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "txn-reader-" + uuid.uuid4().hex,
        "enable.auto.commit": False,
        "isolation.level": isolation,
        "enable.partition.eof": False,
    })
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    values = []
    deadline = time.time() + timeout
    last = time.time()
    try:
        while time.time() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                if until is None and values and time.time() - last > quiet:
                    break
                continue
            if msg.error():
                raise KafkaException(msg.error())
            values.append(msg.value())
            last = time.time()
            if until is not None and until(values):
                break
    finally:
        consumer.close()
    return values


def produce_all(producer, topic, values, partitions=(0,)):
    for i, v in enumerate(values):
        producer.produce(topic, value=v, partition=partitions[i % len(partitions)])
    producer.flush(10)


def test_commit_and_abort_with_both_isolation_levels(broker):
    topic = "txn-basic"
    create_topic(broker.bootstrap, topic, partitions=2)
    p = txn_producer(broker.bootstrap, "basic-" + uuid.uuid4().hex)
    p.init_transactions(10)

    committed = [b"c1-%d" % i for i in range(10)]
    aborted = [b"a-%d" % i for i in range(5)]
    committed2 = [b"c2-%d" % i for i in range(3)]

    p.begin_transaction()
    produce_all(p, topic, committed, partitions=(0, 1))
    p.commit_transaction(10)

    p.begin_transaction()
    produce_all(p, topic, aborted, partitions=(0, 1))
    p.abort_transaction(10)

    p.begin_transaction()
    produce_all(p, topic, committed2, partitions=(0, 1))
    p.commit_transaction(10)

    everything = set(committed + aborted + committed2)
    seen_all = read_values(broker.bootstrap, topic, [0, 1], "read_uncommitted",
                           until=lambda v: set(v) >= everything)
    assert sorted(seen_all) == sorted(committed + aborted + committed2)

    want = set(committed + committed2)
    seen = read_values(broker.bootstrap, topic, [0, 1], "read_committed")
    assert sorted(seen) == sorted(committed + committed2)
    assert not (set(seen) & set(aborted))
    assert set(seen) == want


def test_open_transaction_is_held_back_until_commit(broker):
    topic = "txn-lso"
    create_topic(broker.bootstrap, topic)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value=b"before", partition=0)
    plain.flush(10)

    p = txn_producer(broker.bootstrap, "lso-" + uuid.uuid4().hex)
    p.init_transactions(10)
    p.begin_transaction()
    produce_all(p, topic, [b"open-%d" % i for i in range(4)])
    # Written after the open transaction: above the LSO until it ends.
    plain.produce(topic, value=b"after", partition=0)
    plain.flush(10)

    uncommitted = read_values(broker.bootstrap, topic, [0], "read_uncommitted",
                              until=lambda v: b"after" in v)
    assert b"after" in uncommitted and b"open-0" in uncommitted
    held = read_values(broker.bootstrap, topic, [0], "read_committed", timeout=5.0)
    assert held == [b"before"]

    p.commit_transaction(10)
    released = read_values(broker.bootstrap, topic, [0], "read_committed",
                           until=lambda v: b"after" in v)
    assert released == [b"before"] + [b"open-%d" % i for i in range(4)] + [b"after"]


def test_second_producer_fences_the_first(broker):
    topic = "txn-fence"
    create_topic(broker.bootstrap, topic)
    txn_id = "fence-" + uuid.uuid4().hex
    old = txn_producer(broker.bootstrap, txn_id)
    old.init_transactions(10)
    old.begin_transaction()
    produce_all(old, topic, [b"old-%d" % i for i in range(3)])

    new = txn_producer(broker.bootstrap, txn_id)
    new.init_transactions(10)  # aborts the old producer's open transaction

    with pytest.raises(KafkaException):
        old.commit_transaction(10)

    new.begin_transaction()
    produce_all(new, topic, [b"new-%d" % i for i in range(3)])
    new.commit_transaction(10)

    seen = read_values(broker.bootstrap, topic, [0], "read_committed",
                       until=lambda v: b"new-2" in v)
    assert seen == [b"new-0", b"new-1", b"new-2"]
    everything = read_values(broker.bootstrap, topic, [0], "read_uncommitted",
                             until=lambda v: b"new-2" in v)
    assert everything == [b"old-0", b"old-1", b"old-2", b"new-0", b"new-1", b"new-2"]


def test_transaction_past_its_timeout_is_aborted(broker_factory):
    broker = broker_factory(FAST_ABORT)
    topic = "txn-timeout"
    create_topic(broker.bootstrap, topic)
    stuck = txn_producer(broker.bootstrap, "timeout-" + uuid.uuid4().hex,
                         {"transaction.timeout.ms": 2000,
                          "message.timeout.ms": 2000})
    stuck.init_transactions(10)
    stuck.begin_transaction()
    produce_all(stuck, topic, [b"stuck-%d" % i for i in range(3)])
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value=b"later", partition=0)
    plain.flush(10)
    # Once the coordinator aborts it, the LSO moves past the stuck records
    # and "later" shows.
    seen = read_values(broker.bootstrap, topic, [0], "read_committed",
                       until=lambda v: b"later" in v, timeout=30.0)
    assert seen == [b"later"]


def committed_offset(bootstrap, group, topic, partition=0):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        [tp] = c.committed([TopicPartition(topic, partition)], timeout=10)
        return tp.offset
    finally:
        c.close()


def test_send_offsets_to_transaction_commits_offsets_on_commit_only(broker):
    source, sink, group = "txn-in", "txn-out", "txn-group-" + uuid.uuid4().hex
    create_topic(broker.bootstrap, source)
    create_topic(broker.bootstrap, sink)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(6):
        plain.produce(source, value=b"in-%d" % i, partition=0)
    plain.flush(10)

    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
    })
    consumer.subscribe([source])
    p = txn_producer(broker.bootstrap, "ctp-" + uuid.uuid4().hex)
    p.init_transactions(10)

    def transform(count, commit):
        got = []
        deadline = time.time() + 30
        while len(got) < count and time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg)
        assert len(got) == count
        p.begin_transaction()
        for m in got:
            p.produce(sink, value=m.value().replace(b"in", b"out"), partition=0)
        p.send_offsets_to_transaction(
            [TopicPartition(source, 0, got[-1].offset() + 1)],
            consumer.consumer_group_metadata(), 10)
        if commit:
            p.commit_transaction(10)
        else:
            p.abort_transaction(10)
        return got

    transform(3, commit=True)
    assert committed_offset(broker.bootstrap, group, source) == 3
    aborted = transform(3, commit=False)
    # The aborted transaction's offsets never become visible.
    assert committed_offset(broker.bootstrap, group, source) == 3
    consumer.seek(TopicPartition(source, 0, aborted[0].offset()))
    transform(3, commit=True)
    assert committed_offset(broker.bootstrap, group, source) == 6
    consumer.close()

    out = read_values(broker.bootstrap, sink, [0], "read_committed",
                      until=lambda v: len(v) >= 6)
    assert out == [b"out-%d" % i for i in range(6)]


def kadmin(bootstrap):
    return KafkaAdminClient(bootstrap_servers=bootstrap)


def test_describe_producers_and_the_transaction_tooling(broker):
    topic = "txn-tools"
    create_topic(broker.bootstrap, topic, partitions=2)
    txn_id = "tools-" + uuid.uuid4().hex
    p = txn_producer(broker.bootstrap, txn_id)
    p.init_transactions(10)
    p.begin_transaction()
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value=b"first", partition=1)
    plain.flush(10)
    produce_all(p, topic, [b"a", b"b", b"c"], partitions=(1,))
    admin = kadmin(broker.bootstrap)
    try:
        tp = KTopicPartition(topic, 1)
        [open_state] = admin.describe_producers([tp])[tp].active_producers
        described = admin.describe_transactions([txn_id])[txn_id]
        assert open_state.producer_id == described.producer_id
        assert open_state.producer_epoch == described.producer_epoch
        assert open_state.current_transaction_start_offset == 1
        assert open_state.last_sequence == 2
        assert open_state.coordinator_epoch == -1
        assert open_state.last_timestamp > 0
        assert described.state.value == "Ongoing"
        assert described.topic_partitions == {tp}
        assert described.transaction_timeout_ms == 60000
        # ListTransactions filters: state, producer id, duration (KIP-994).
        [(node, listed)] = admin.list_transactions(state_filters=["Ongoing"]).items()
        assert [t.transactional_id for t in listed] == [txn_id]
        by_pid = admin.list_transactions(producer_id_filters=[described.producer_id])[node]
        assert [t.transactional_id for t in by_pid] == [txn_id]
        assert admin.list_transactions(producer_id_filters=[described.producer_id + 999])[node] == []
        time.sleep(0.3)
        assert [t.transactional_id for t in admin.list_transactions(duration_filter_ms=100)[node]] == [txn_id]
        assert admin.list_transactions(duration_filter_ms=600000)[node] == []
        # KIP-1152 (ListTransactions v2): a pattern the whole id must match.
        by_pattern = admin.list_transactions(transactional_id_pattern="tools-[0-9a-f]+")[node]
        assert [t.transactional_id for t in by_pattern] == [txn_id]
        assert admin.list_transactions(transactional_id_pattern="tools-")[node] == []

        p.commit_transaction(10)
        [done] = admin.describe_producers([tp])[tp].active_producers
        assert done.current_transaction_start_offset == -1
        assert done.coordinator_epoch == 0
        assert admin.describe_transactions([txn_id])[txn_id].state.value == "CompleteCommit"
        assert admin.list_transactions(state_filters=["Ongoing"])[node] == []
        # A partition with no producers, and one that does not exist.
        assert admin.describe_producers([KTopicPartition(topic, 0)])[KTopicPartition(topic, 0)].active_producers == []
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.describe_producers([KTopicPartition(topic, 9)], broker_id=1)
        with pytest.raises(TransactionalIdNotFoundError):
            admin.describe_transactions(["never-" + uuid.uuid4().hex])
    finally:
        admin.close()


def test_idle_transactional_ids_expire(broker_factory):
    broker = broker_factory({
        "transactional.id.expiration.ms": "1000",
        "transaction.remove.expired.transaction.cleanup.interval.ms": "200",
    })
    txn_id = "expiring-" + uuid.uuid4().hex
    p = txn_producer(broker.bootstrap, txn_id)
    p.init_transactions(10)
    def gone():
        admin = kadmin(broker.bootstrap)
        try:
            admin.describe_transactions([txn_id])
            return False
        except TransactionalIdNotFoundError:
            return True
        finally:
            admin.close()

    admin = kadmin(broker.bootstrap)
    first = admin.describe_transactions([txn_id])[txn_id].producer_id
    admin.close()
    wait_for(gone, timeout=20, what="the idle transactional id to expire")
    # It stays gone after a restart, and starts over with a fresh producer id.
    broker.restart()
    assert gone()
    again = txn_producer(broker.bootstrap, txn_id)
    again.init_transactions(10)
    admin = kadmin(broker.bootstrap)
    try:
        described = admin.describe_transactions([txn_id])[txn_id]
        assert described.producer_id != first
        assert described.producer_epoch == 0
    finally:
        admin.close()


def test_transaction_settings_are_validated_and_applied(broker_factory, tmp_path):
    bad = broker_factory({"transaction.max.timeout.ms": "0"}, start=False)
    with pytest.raises(RuntimeError, match="transaction.max.timeout.ms"):
        bad.start(timeout=10)
    broker = broker_factory({"transaction.max.timeout.ms": "5000",
                             "transaction.state.log.num.partitions": "4"})
    too_long = txn_producer(broker.bootstrap, "long-" + uuid.uuid4().hex,
                            {"transaction.timeout.ms": 10000})
    with pytest.raises(KafkaException) as refused:
        too_long.init_transactions(10)
    assert refused.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT
    ok = txn_producer(broker.bootstrap, "short-" + uuid.uuid4().hex, {"transaction.timeout.ms": 5000})
    ok.init_transactions(10)
    admin = kadmin(broker.bootstrap)
    try:
        meta = admin.describe_topics(["__transaction_state"])[0]
        assert len(meta["partitions"]) == 4
        assert meta["is_internal"]
    finally:
        admin.close()


def raw(broker, request, response_class):
    return raw_call(broker.bootstrap, request, response_class)


def init_raw(broker, txn_id, timeout_ms=60000):
    r = raw(broker, InitProducerIdRequest[3](transactional_id=txn_id, transaction_timeout_ms=timeout_ms,
                                              producer_id=-1, producer_epoch=-1), InitProducerIdResponse)
    return r.error_code, r.producer_id, r.producer_epoch


def add_raw(broker, txn_id, pid, epoch, topic, partitions, version=3):
    A = AddPartitionsToTxnRequest
    r = raw(broker, A[version](v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
                               v3_and_below_producer_epoch=epoch,
                               v3_and_below_topics=[A.AddPartitionsToTxnTopic(name=topic, partitions=partitions)]),
            AddPartitionsToTxnResponse)
    return [p.partition_error_code for t in r.results_by_topic_v3_and_below for p in t.results_by_partition]


def end_raw(broker, txn_id, pid, epoch, commit, version=3):
    return raw(broker, EndTxnRequest[version](transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                              committed=commit), EndTxnResponse).error_code


def produce_raw(broker, txn_id, topic, partition, batch, version=9):
    T = ProduceRequest.TopicProduceData
    r = raw(broker, ProduceRequest[version](
        transactional_id=txn_id, acks=-1, timeout_ms=5000,
        topic_data=[T(name=topic, partition_data=[T.PartitionProduceData(index=partition, records=batch)])]),
        ProduceResponse)
    return r.responses[0].partition_responses[0].error_code


def test_out_of_order_and_stale_transactional_calls_get_kafkas_codes(broker):
    topic = "txn-bad-calls"
    create_topic(broker.bootstrap, topic, partitions=2)
    txn_id = "bad-calls-" + uuid.uuid4().hex

    # Calls before InitProducerId: the id has no producer.
    assert add_raw(broker, txn_id, 4242, 0, topic, [0]) == [49]  # INVALID_PRODUCER_ID_MAPPING
    assert end_raw(broker, txn_id, 4242, 0, True) == 49
    assert produce_raw(broker, txn_id, topic, 0,
                       record_batch([b"x"], 4242, 0, 0, transactional=True)) == 49
    # A timeout above transaction.max.timeout.ms (Kafka's default 15 min).
    assert init_raw(broker, txn_id, timeout_ms=900001)[0] == 50  # INVALID_TRANSACTION_TIMEOUT

    code, pid, epoch = init_raw(broker, txn_id)
    assert code == 0
    # EndTxn with no transaction open.
    assert end_raw(broker, txn_id, pid, epoch, True) == 48  # INVALID_TXN_STATE
    # A transactional write to a partition not added: INVALID_TXN_STATE for
    # Produce up to v10, TRANSACTION_ABORTABLE from v11 (KIP-890).
    batch = record_batch([b"v0"], pid, epoch, 0, transactional=True)
    assert produce_raw(broker, txn_id, topic, 0, batch, version=9) == 48
    assert produce_raw(broker, txn_id, topic, 0, batch, version=11) == 120
    # Transactional records without a transactional.id.
    assert produce_raw(broker, None, topic, 0, batch) == 53  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # A wrong producer id for the transactional id.
    assert add_raw(broker, txn_id, pid + 1, epoch, topic, [0]) == [49]
    # A stale epoch: PRODUCER_FENCED from AddPartitionsToTxn v2 / EndTxn v2,
    # INVALID_PRODUCER_EPOCH before.
    assert add_raw(broker, txn_id, pid, epoch + 1, topic, [0]) == [90]
    assert add_raw(broker, txn_id, pid, epoch + 1, topic, [0], version=1) == [47]
    assert end_raw(broker, txn_id, pid, epoch + 1, True, version=1) == 47
    # An unknown partition: nothing of the request is added.
    assert add_raw(broker, txn_id, pid, epoch, topic, [0, 7]) == [55, 3]
    # TxnOffsetCommit without AddOffsetsToTxn.
    C = TxnOffsetCommitRequest
    commit = C[3](transactional_id=txn_id, group_id="bad-calls-group", producer_id=pid, producer_epoch=epoch,
                  generation_id=-1, member_id="", group_instance_id=None,
                  topics=[C.TxnOffsetCommitRequestTopic(name=topic, partitions=[
                      C.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                          partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                          committed_metadata="")])])
    r = raw(broker, commit, TxnOffsetCommitResponse)
    assert r.topics[0].partitions[0].error_code == 48

    # None of it left a partial transaction: the real one still works.
    assert add_raw(broker, txn_id, pid, epoch, topic, [0]) == [0]
    # Verify-only (the broker-to-coordinator form, v4+): a partition outside
    # the transaction is TRANSACTION_ABORTABLE.
    A = AddPartitionsToTxnRequest
    verify = raw(broker, A[4](transactions=[A.AddPartitionsToTxnTransaction(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, verify_only=True,
        topics=[A.AddPartitionsToTxnTransaction.AddPartitionsToTxnTopic(name=topic, partitions=[0, 1])])]),
        AddPartitionsToTxnResponse)
    codes = [p.partition_error_code for t in verify.results_by_transaction[0].topic_results
             for p in t.results_by_partition]
    assert codes == [0, 120]
    assert produce_raw(broker, txn_id, topic, 0, batch) == 0
    r = raw(broker, AddOffsetsToTxnRequest[3](transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                               group_id="bad-calls-group"), AddOffsetsToTxnResponse)
    assert r.error_code == 0
    assert raw(broker, commit, TxnOffsetCommitResponse).topics[0].partitions[0].error_code == 0
    # Aborting where a commit is in order is fine; committing twice is not.
    assert end_raw(broker, txn_id, pid, epoch, True) == 0
    assert end_raw(broker, txn_id, pid, epoch, True) == 0  # a retry of the same outcome
    assert end_raw(broker, txn_id, pid, epoch, False) == 48
    # No stuck LSO: read_committed sees the committed record and ends at the HW.
    seen = read_values(broker.bootstrap, topic, [0], "read_committed", until=lambda v: b"v0" in v)
    assert seen == [b"v0"]
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "bad-calls-group",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        [committed] = c.committed([TopicPartition(topic, 0)], timeout=10)
        assert committed.offset == 1
    finally:
        c.close()


def init_bump_raw(broker, txn_id, pid, epoch, version=4):
    r = raw(broker, InitProducerIdRequest[version](transactional_id=txn_id, transaction_timeout_ms=60000,
                                                    producer_id=pid, producer_epoch=epoch), InitProducerIdResponse)
    return r.error_code, r.producer_id, r.producer_epoch


def test_kip360_retried_epoch_bump_gets_the_same_answer_and_commits(broker):
    """A KIP-360 epoch bump whose answer was lost is retried with the same
    (producer id, epoch): the broker answers with the bumped epoch again
    instead of PRODUCER_FENCED, and the answer is usable."""
    topic = "txn-kip360-retry"
    create_topic(broker.bootstrap, topic, partitions=1)
    txn_id = "kip360-" + uuid.uuid4().hex
    assert init_raw(broker, txn_id)[0] == 0
    code, pid, epoch = init_raw(broker, txn_id)
    assert (code, epoch) == (0, 1)
    bumped = init_bump_raw(broker, txn_id, pid, epoch)
    assert bumped == (0, pid, epoch + 1)
    assert init_bump_raw(broker, txn_id, pid, epoch) == bumped
    # An older epoch is still a zombie: PRODUCER_FENCED (v4+), INVALID_PRODUCER_EPOCH before.
    assert init_bump_raw(broker, txn_id, pid, epoch - 1)[0] == 90
    assert init_bump_raw(broker, txn_id, pid, epoch - 1, version=3)[0] == 47
    # A transaction under the retried answer commits, and a read_committed
    # consumer sees it.
    _, pid, epoch = bumped
    assert add_raw(broker, txn_id, pid, epoch, topic, [0]) == [0]
    assert produce_raw(broker, txn_id, topic, 0,
                       record_batch([b"after-retry"], pid, epoch, 0, transactional=True)) == 0
    assert end_raw(broker, txn_id, pid, epoch, True) == 0
    assert read_values(broker.bootstrap, topic, [0], "read_committed",
                       until=lambda v: v == [b"after-retry"]) == [b"after-retry"]

    # Idempotent (no transactional.id): naming an id gets a fresh one at
    # epoch 0, as on Kafka; a retry is just another such call.
    code, idem, idem_epoch = init_bump_raw(broker, None, -1, -1)
    assert (code, idem_epoch) == (0, 0)
    code, renewed, renewed_epoch = init_bump_raw(broker, None, idem, idem_epoch)
    assert (code, renewed_epoch) == (0, 0)
    assert renewed != idem
    assert init_bump_raw(broker, None, idem, -1)[0] == 42  # INVALID_REQUEST
