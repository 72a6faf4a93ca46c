"""Reads that reach into the remote tier (KIP-405) with real clients against
the real broker, filesystem tier: read_committed over committed and aborted
transactions that left local disk, offsets by timestamp and the max
timestamp landing in remote data, and both again right after a restart."""

import time
import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import OffsetSpec

from helpers import admin, create_topic, make_records, produce_confluent, wait_for
from test_tiered import TIERED_BROKER, local_logs, remote_logs

def local_start(broker, topic):
    return int(local_logs(broker, topic)[0].split(".")[0])


def read_all(bootstrap, topic, isolation, expected_count, timeout=60):
    """(offset, value) of every record from offset 0 with `isolation`."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "tiered-reader-" + uuid.uuid4().hex,
        "enable.auto.commit": False,
        "isolation.level": isolation,
        "enable.partition.eof": True,
    })
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    if len(out) >= expected_count:
                        break
                    continue
                raise KafkaException(msg.error())
            out.append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    return out


def test_tiered_read_committed_from_remote_segments(broker_factory):
    broker = broker_factory(TIERED_BROKER)
    topic = "tiered-txn"
    create_topic(broker.bootstrap, topic, config={
        "segment.bytes": "16384",
        "remote.storage.enable": "true",
        "local.retention.bytes": "32768",
    })
    producer = Producer({
        "bootstrap.servers": broker.bootstrap,
        "transactional.id": "tiered-txn-" + uuid.uuid4().hex,
        "linger.ms": 5,
    })
    producer.init_transactions(30)
    committed, everything = [], []
    for t in range(40):
        values = [b"t%02d-%03d-" % (t, i) + b"x" * 200 for i in range(40)]
        producer.begin_transaction()
        for v in values:
            producer.produce(topic, value=v, partition=0)
        producer.flush(30)
        everything += values
        if t % 3 == 1:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            committed += values
    # A last plain record after the final marker.
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value=b"the end", partition=0)
    plain.flush(30)
    committed.append(b"the end")
    everything.append(b"the end")

    # Transactions, committed and aborted, leave local disk.
    # Copies and local retention go on while this waits: wait for most
    # segments to have left, not just the first ones.
    wait_for(lambda: len(remote_logs(broker, topic)) >= 10 and local_start(broker, topic) > 0
             and len(remote_logs(broker, topic)) > len(local_logs(broker, topic)),
             timeout=60, what="transactional segments to leave local disk")

    got = read_all(broker.bootstrap, topic, "read_committed", len(committed))
    assert [v for _, v in got] == committed
    got = read_all(broker.bootstrap, topic, "read_uncommitted", len(everything))
    assert [v for _, v in got] == everything

    # Right after a restart the same answers (retriable errors while the
    # remote metadata loads, never a wrong answer).
    broker.restart()
    got = read_all(broker.bootstrap, topic, "read_committed", len(committed))
    assert [v for _, v in got] == committed


def offsets_for_times(bootstrap, topic, ts):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "oft-" + uuid.uuid4().hex})
    try:
        [found] = c.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=20)
        # A partition error would otherwise read as offset -1 (not found).
        assert found.error is None, found.error
        return found.offset
    finally:
        c.close()


def list_offset(bootstrap, topic, spec):
    client = admin(bootstrap)
    futures = client.list_offsets({TopicPartition(topic, 0): spec}, request_timeout=20)
    result = futures[TopicPartition(topic, 0)].result(timeout=30)
    return result.offset, result.timestamp


def test_tiered_offsets_by_timestamp_land_in_remote_data(broker_factory):
    broker = broker_factory(TIERED_BROKER)
    topic = "tiered-time"
    create_topic(broker.bootstrap, topic, config={
        "segment.bytes": "65536",
        "remote.storage.enable": "true",
        "local.retention.bytes": "131072",
    })
    count = 20_000
    base = int(time.time() * 1000) - 3_600_000
    # Ten milliseconds apart, but record 5000 carries the largest timestamp.
    timestamps = [base + 10 * i for i in range(count)]
    timestamps[5000] = base + 10 * count + 123_456
    records = make_records(count, "ts")
    produce_confluent(broker.bootstrap, topic, records, timestamps=timestamps,
                      extra={"batch.size": 16384})
    wait_for(lambda: len(remote_logs(broker, topic)) >= 10 and local_start(broker, topic) > 6000,
             timeout=60, what="segments to leave local disk")
    start = local_start(broker, topic)

    def check_lookups():
        # Exactly a record's timestamp, and between two records.
        assert offsets_for_times(broker.bootstrap, topic, timestamps[1234]) == 1234
        assert offsets_for_times(broker.bootstrap, topic, timestamps[4321] - 5) == 4321
        # The first record.
        assert offsets_for_times(broker.bootstrap, topic, 0) == 0
        # Past every timestamp: no offset (-1), after searching both tiers.
        assert offsets_for_times(broker.bootstrap, topic, timestamps[5000] + 1) == -1
        # Max timestamp (-3) across local and remote data: record 5000, remote.
        assert list_offset(broker.bootstrap, topic, OffsetSpec.max_timestamp()) == (5000, timestamps[5000])
        assert list_offset(broker.bootstrap, topic, OffsetSpec.for_timestamp(timestamps[777])) == (777, timestamps[777])
        assert list_offset(broker.bootstrap, topic, OffsetSpec.earliest())[0] == 0

    assert 5000 < start
    check_lookups()
    broker.restart()
    check_lookups()
