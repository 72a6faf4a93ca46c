"""Shared client helpers for the interop tests (confluent-kafka and kafka-python)."""

import os
import struct
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


def wait_for_cluster(bootstraps, timeout=30):
    """Until every broker lists all of `bootstraps`. A broker learns of the
    ones started after it only at its next metadata refresh, and places new
    partitions over the brokers it knows, so tests that check placement wait
    for every view, not one."""
    for bootstrap in bootstraps:
        client = admin(bootstrap)
        wait_for(lambda: len(client.list_topics(timeout=10).brokers) == len(bootstraps),
                 timeout=timeout, what="%s to list %d brokers" % (bootstrap, len(bootstraps)))


def raw_call(bootstrap, request, response_class, correlation_id=1):
    """Sends one request encoded by kafka-python's protocol classes on a
    fresh connection and decodes the answer with them (for requests no
    client API lets a test send as it is, e.g. out of order or malformed)."""
    import socket
    import struct

    host, port = bootstrap.rsplit(":", 1)
    version = request.API_VERSION
    request.with_header(correlation_id=correlation_id, client_id="interop-raw")
    frame = request.encode(header=True, framed=True)
    with socket.create_connection((host, int(port)), timeout=20) as s:
        s.sendall(frame)
        size = b""
        while len(size) < 4:
            chunk = s.recv(4 - len(size))
            if not chunk:
                raise ConnectionError("closed before the answer")
            size += chunk
        (n,) = struct.unpack(">i", size)
        body = b""
        while len(body) < n:
            chunk = s.recv(n - len(body))
            if not chunk:
                raise ConnectionError("closed in the middle of the answer")
            body += chunk
    return response_class[version].decode(body, header=True)


def record_batch(values, producer_id=-1, producer_epoch=-1, base_sequence=-1, transactional=False):
    """A v2 record batch built by kafka-python's record builder."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=transactional,
        producer_id=producer_id, producer_epoch=producer_epoch,
        base_sequence=base_sequence, batch_size=1 << 20)
    now = int(time.time() * 1000)
    for i, value in enumerate(values):
        builder.append(i, timestamp=now, key=None, value=value, headers=[])
    return bytes(builder.build())


CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def stored_batches(data_dir, topic, partition=0):
    """`(base offset, codec name, attributes)` of every data batch in the
    partition's segment files, read from the v2 batch headers the broker
    wrote (control batches left out): what the log really holds, whatever
    the clients saw."""
    directory = os.path.join(str(data_dir), "%s-%d" % (topic, partition))
    batches = []
    for name in sorted(f for f in os.listdir(directory) if f.endswith(".log")):
        with open(os.path.join(directory, name), "rb") as f:
            data = f.read()
        pos = 0
        while pos + 61 <= len(data):
            base_offset, length = struct.unpack_from(">qi", data, pos)
            (attributes,) = struct.unpack_from(">h", data, pos + 21)
            if length <= 0:
                break
            if not attributes & 0x20:
                batches.append((base_offset, CODEC_NAMES.get(attributes & 7, attributes & 7), attributes))
            pos += 12 + length
    return batches


def stored_codecs(data_dir, topic, partition=0):
    """The set of codec names of the partition's stored data batches."""
    return {codec for _, codec, _ in stored_batches(data_dir, topic, partition)}
