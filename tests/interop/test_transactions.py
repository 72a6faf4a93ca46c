"""Transactions (KIP-98) with confluent-kafka against the krabka binary.

Commit and abort through the transaction coordinator, read_committed vs
read_uncommitted consumers, the LSO holding back an open transaction,
fencing of an older producer with the same transactional.id, and the
coordinator aborting a transaction that outlives its timeout.
"""

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from helpers import create_topic


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


def test_transaction_past_its_timeout_is_aborted(broker):
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
    # The coordinator's abort task runs every 10 s (Kafka's default); once
    # it aborts, the LSO moves past the stuck records and "later" shows.
    seen = read_values(broker.bootstrap, topic, [0], "read_committed",
                       until=lambda v: b"later" in v, timeout=40.0)
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
