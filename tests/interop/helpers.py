"""Shared client helpers for the interop tests (confluent-kafka and kafka-python)."""

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap, name, partitions=1, config=None):
    client = admin(bootstrap)  # keep the handle alive until the future resolves
    futures = client.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=10,
    )
    futures[name].result(timeout=30)


def make_records(count, tag=""):
    """Records with keys, headers, and every 7th value null; every 11th key null (never both: kafka-python refuses that)."""
    records = []
    for i in range(count):
        key = None if (i % 11 == 0 and i % 7 != 0) else ("key-%s-%d" % (tag, i % 1000)).encode()
        value = None if i % 7 == 0 else ("value-%s-%d-" % (tag, i)).encode() + bytes([i % 256]) * (i % 50)
        headers = [("h1", ("hv-%d" % i).encode()), ("h2", b"")] if i % 3 == 0 else []
        records.append((key, value, headers))
    return records


def produce_confluent(bootstrap, topic, records, partition=0, extra=None, timestamps=None):
    conf = {
        "bootstrap.servers": bootstrap,
        "linger.ms": 5,
        "batch.num.messages": 10000,
        "queue.buffering.max.messages": 1000000,
    }
    conf.update(extra or {})
    producer = Producer(conf)
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)

    for i, (key, value, headers) in enumerate(records):
        kwargs = {}
        if timestamps is not None:
            kwargs["timestamp"] = timestamps[i]
        while True:
            try:
                producer.produce(
                    topic, value=value, key=key, headers=headers or None,
                    partition=partition, on_delivery=on_delivery, **kwargs
                )
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    remaining = producer.flush(60)
    assert remaining == 0, "%d records not delivered" % remaining
    assert not errors, errors[:5]


def consume_confluent(bootstrap, topic, count, partition=0, offset=0, timeout=60, extra=None):
    """Reads `count` records from an explicit offset with assign() (no group)."""
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": "unused-interop",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
    }
    conf.update(extra or {})
    consumer = Consumer(conf)
    consumer.assign([TopicPartition(topic, partition, offset)])
    out = []
    deadline = time.time() + timeout
    try:
        while len(out) < count and time.time() < deadline:
            for msg in consumer.consume(num_messages=10000, timeout=1.0):
                if msg.error():
                    raise AssertionError("consume error: %s" % msg.error())
                out.append(msg)
    finally:
        consumer.close()
    return out


def as_tuples(messages):
    return [(m.key(), m.value(), list(m.headers() or [])) for m in messages]


def wait_for(predicate, timeout=30, interval=0.2, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("timed out waiting for " + what)
