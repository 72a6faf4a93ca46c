"""kill -9 under acks=all load from an idempotent producer: after a restart
every acknowledged record is present exactly once."""

import collections
import threading
import time

from confluent_kafka import Producer, TopicPartition

from helpers import consume_confluent, create_topic


def test_kill9_under_idempotent_load_loses_and_duplicates_nothing(broker):
    create_topic(broker.bootstrap, "durable", config={"segment.bytes": "1000000"})
    acked = []
    failed = []
    lock = threading.Lock()

    def on_delivery(err, msg):
        with lock:
            (failed if err is not None else acked).append(msg.value())

    producer = Producer({
        "bootstrap.servers": broker.bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "max.in.flight.requests.per.connection": 5,
        "linger.ms": 2,
        "message.timeout.ms": 120000,
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 500,
    })
    total = 60_000

    def poll_until(predicate, timeout):
        deadline = time.time() + timeout
        while not predicate():
            assert time.time() < deadline, "timed out"
            producer.poll(0.05)

    killed = False
    for i in range(total):
        while True:
            try:
                producer.produce("durable", value=b"rec-%08d" % i, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
        if i == 30_000:
            # Kill while acknowledged records and records in flight both exist.
            poll_until(lambda: len(acked) >= 15_000, timeout=120)
            broker.kill9()
            killed = True
            broker.start()
    assert killed
    assert producer.flush(180) == 0
    assert not failed, "%d records failed, first %r" % (len(failed), failed[:3])
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    _, high = c.get_watermark_offsets(TopicPartition("durable", 0), timeout=10)
    c.close()
    got = [m.value() for m in consume_confluent(broker.bootstrap, "durable", high, timeout=120)]
    counts = collections.Counter(got)
    duplicates = [v for v, n in counts.items() if n > 1]
    assert not duplicates, "duplicated: %r" % duplicates[:5]
    missing = [v for v in acked if v not in counts]
    assert not missing, "acknowledged but missing: %r" % missing[:5]
    assert len(acked) == total
    # Order within the partition is the order produced.
    assert got == sorted(got)
