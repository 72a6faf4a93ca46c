"""Zero-copy fetch (issue 21 item 2) against the real broker: on a PLAINTEXT
listener the records of local segments go from the page cache to the
socket with sendfile, and every client still reads exactly what was
produced, in order. On an SSL listener the same answers are read from the
segment files a chunk at a time and encrypted, never held whole.

Several segments' worth of 1 KiB records (segment.bytes 64 KiB) are read
back by confluent-kafka, kcat and kafka-python and compared value by value;
a transactional topic with an aborted transaction between two committed
ones is read with read_committed and read_uncommitted; the broker's
`krabka_fetch_zero_copy_bytes_total` counter proves the records went by
sendfile (`krabka_fetch_file_chunk_bytes_total` that they went through
TLS in chunks); and consumers that drop their connection in the middle of a large
answer leave the broker serving the next one."""

import socket
import struct
import subprocess
import time
import urllib.request
import uuid

from confluent_kafka import Producer
from kafka import KafkaConsumer, TopicPartition as KTopicPartition

from conftest import free_port, kcat_path
from helpers import consume_confluent, create_topic, produce_confluent, wait_for
from raw_client import RawConnection, fetch_request
from security_helpers import generate_certs

SEGMENT = {"segment.bytes": "65536"}
# Batches must fit a segment.
SMALL_BATCHES = {"batch.size": 16384}
COUNT = 3000


def value(i, tag="v"):
    # About 1 KiB, printable and newline-free (kcat prints one per line).
    return ("%s%06d-" % (tag, i)).encode() + bytes(65 + (i * 7 + j) % 26 for j in range(1010))


def counter(port, name):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(name):
            return int(float(line.split()[-1]))
    return 0


def zero_copy_bytes(port):
    return counter(port, "krabka_fetch_zero_copy_bytes_total")


def chunk_bytes(port):
    return counter(port, "krabka_fetch_file_chunk_bytes_total")


def segments(broker, topic):
    import os
    d = os.path.join(broker.data_dir, "%s-0" % topic)
    return sorted(f for f in os.listdir(d) if f.endswith(".log"))


def started(broker_factory):
    port = free_port()
    return broker_factory({"krabka.metrics.listener": "127.0.0.1:%d" % port}), port


def read_kafka_python(bootstrap, topic, count, isolation="read_uncommitted", timeout=60):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             isolation_level=isolation, fetch_max_bytes=1 << 20,
                             max_partition_fetch_bytes=256 * 1024)
    tp = KTopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    out = []
    deadline = time.time() + timeout
    try:
        while len(out) < count and time.time() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                out.extend(r.value for r in records)
    finally:
        consumer.close()
    return out


def test_every_client_reads_several_segments_byte_identical_by_sendfile(broker_factory):
    broker, port = started(broker_factory)
    topic = "zc-plain"
    create_topic(broker.bootstrap, topic, config=SEGMENT)
    values = [value(i) for i in range(COUNT)]
    produce_confluent(broker.bootstrap, topic, [(b"k%d" % i, v, []) for i, v in enumerate(values)],
                      extra=SMALL_BATCHES)
    assert len(segments(broker, topic)) >= 10, segments(broker, topic)
    assert zero_copy_bytes(port) == 0

    # confluent-kafka, with small fetches so answers end at many places.
    got = consume_confluent(broker.bootstrap, topic, COUNT, extra={
        "fetch.max.bytes": 100_000, "message.max.bytes": 100_000,
        "max.partition.fetch.bytes": 70_000})
    assert [m.value() for m in got] == values
    assert [m.offset() for m in got] == list(range(COUNT))
    sent = zero_copy_bytes(port)
    assert sent >= sum(len(v) for v in values), sent

    # kcat, one value per line.
    out = subprocess.run([kcat_path(), "-b", broker.bootstrap, "-C", "-t", topic, "-p", "0",
                          "-o", "beginning", "-e", "-f", "%s\n"],
                         capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.splitlines() == values

    # kafka-python.
    assert read_kafka_python(broker.bootstrap, topic, COUNT) == values
    assert zero_copy_bytes(port) >= sent + 2 * sum(len(v) for v in values)


def test_tls_clients_read_several_segments_byte_identical_through_chunks(broker_factory, tmp_path):
    certs = generate_certs(tmp_path / "certs", "--pkcs12-password", "store-pw")
    metrics, ssl_port = free_port(), free_port()
    broker = broker_factory(start=False)
    broker.overrides.update({
        "krabka.metrics.listener": "127.0.0.1:%d" % metrics,
        "listeners": "PLAINTEXT://127.0.0.1:%d,SSL://127.0.0.1:%d" % (broker.port, ssl_port),
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(tmp_path / "certs" / "broker.p12"),
        "ssl.keystore.password": "store-pw",
    })
    broker.start()

    def listening():
        try:
            socket.create_connection(("127.0.0.1", ssl_port), timeout=1).close()
            return True
        except OSError:
            return False

    wait_for(listening, what="the SSL listener")
    topic = "zc-tls"
    create_topic(broker.bootstrap, topic, config=SEGMENT)
    values = [value(i, "t") for i in range(COUNT)]
    produce_confluent(broker.bootstrap, topic, [(None, v, []) for v in values], extra=SMALL_BATCHES)
    assert len(segments(broker, topic)) >= 10, segments(broker, topic)
    tls = {"security.protocol": "SSL", "ssl.ca.location": "%s/ca.pem" % certs}
    bootstrap = "127.0.0.1:%d" % ssl_port

    # confluent-kafka with small fetches, so answers end at many places;
    # then with large ones, so slices span several 64 KiB chunks.
    for fetch in ({"fetch.max.bytes": 100_000, "message.max.bytes": 100_000,
                   "max.partition.fetch.bytes": 70_000},
                  {"fetch.max.bytes": 4 << 20, "max.partition.fetch.bytes": 1 << 20}):
        got = consume_confluent(bootstrap, topic, COUNT, extra=dict(tls, **fetch))
        assert [m.value() for m in got] == values
        assert [m.offset() for m in got] == list(range(COUNT))
    sent = chunk_bytes(metrics)
    assert sent >= 2 * sum(len(v) for v in values), sent

    # kcat, one value per line.
    out = subprocess.run([kcat_path(), "-b", bootstrap, "-X", "security.protocol=SSL",
                          "-X", "ssl.ca.location=%s/ca.pem" % certs, "-C", "-t", topic, "-p", "0",
                          "-o", "beginning", "-e", "-f", "%s\n"],
                         capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.splitlines() == values
    assert chunk_bytes(metrics) >= sent + sum(len(v) for v in values)
    # Nothing went out by sendfile: every read was over TLS.
    assert zero_copy_bytes(metrics) == 0


def test_read_committed_skips_an_aborted_transaction_across_segments(broker_factory):
    broker, port = started(broker_factory)
    topic = "zc-txn"
    create_topic(broker.bootstrap, topic, config=SEGMENT)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5,
                  "transactional.id": "zc-" + uuid.uuid4().hex, **SMALL_BATCHES})
    p.init_transactions(10)
    rounds = [("c1", True), ("ab", False), ("c2", True)]
    for tag, commit in rounds:
        p.begin_transaction()
        for i in range(300):
            p.produce(topic, value=value(i, tag), partition=0)
            if i % 100 == 0:
                p.poll(0)
        p.flush(30)
        if commit:
            p.commit_transaction(10)
        else:
            p.abort_transaction(10)
    assert len(segments(broker, topic)) >= 10
    committed = [value(i, "c1") for i in range(300)] + [value(i, "c2") for i in range(300)]
    everything = committed[:300] + [value(i, "ab") for i in range(300)] + committed[300:]
    before = zero_copy_bytes(port)

    seen = consume_confluent(broker.bootstrap, topic, len(committed), extra={
        "isolation.level": "read_committed", "max.partition.fetch.bytes": 50_000})
    assert [m.value() for m in seen] == committed
    seen = consume_confluent(broker.bootstrap, topic, len(everything), extra={
        "isolation.level": "read_uncommitted"})
    assert [m.value() for m in seen] == everything
    assert read_kafka_python(broker.bootstrap, topic, len(committed), "read_committed") == committed
    assert zero_copy_bytes(port) > before + 2 * sum(len(v) for v in everything)


def test_consumers_dropping_the_connection_mid_answer_do_not_disturb_the_broker(broker_factory):
    broker, port = started(broker_factory)
    topic = "zc-drop"
    create_topic(broker.bootstrap, topic, config=SEGMENT)
    values = [value(i) for i in range(COUNT)]
    produce_confluent(broker.bootstrap, topic, [(None, v, []) for v in values], extra=SMALL_BATCHES)

    for n in range(20):
        conn = RawConnection(broker.bootstrap)
        # Small receive buffer, so the broker's sendfile meets a full socket.
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        conn.send(fetch_request([(topic, 0, (n * 97) % COUNT)]))
        (size,) = struct.unpack(">i", conn._recv_exact(4))
        # Part of the answer only: the rest is still being sent.
        conn._recv_exact(max(0, min(size - 10, 100 + n * 500)))
        if n % 2:
            # A reset, not a clean close.
            conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()

    assert broker.alive()
    got = consume_confluent(broker.bootstrap, topic, COUNT)
    assert [m.value() for m in got] == values
    wait_for(lambda: zero_copy_bytes(port) >= sum(len(v) for v in values), what="zero-copy bytes")
    assert "panicked" not in broker.log()
