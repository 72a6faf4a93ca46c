"""Bad input on the wire: each bad frame closes only its own connection
(or gets Kafka's error), and the broker keeps serving everyone else."""

import socket
import struct

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import NewTopic

from helpers import admin, consume_confluent, create_topic, produce_confluent


def connect(broker):
    s = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    return s


def api_versions_frame(version, correlation_id=7, client_id=b"raw"):
    header = struct.pack(">hhih", 18, version, correlation_id, len(client_id)) + client_id
    if version >= 3:
        # flexible header: tagged fields, then body: client software name/version + tags
        header += b"\x00" + b"\x04raw" + b"\x021" + b"\x00"
    return struct.pack(">i", len(header)) + header


def read_frame(s):
    size = recv_exact(s, 4)
    (n,) = struct.unpack(">i", size)
    return recv_exact(s, n)


def recv_exact(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed after %d of %d bytes" % (len(data), n))
        data += chunk
    return data


def is_closed(s):
    s.settimeout(10)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def api_versions_ok(broker):
    with connect(broker) as s:
        s.sendall(api_versions_frame(0, correlation_id=42))
        body = read_frame(s)
        correlation, error = struct.unpack(">ih", body[:6])
        return correlation == 42 and error == 0


def test_unknown_api_versions_version_gets_v0_answer(broker):
    with connect(broker) as s:
        frame = bytearray(api_versions_frame(3, correlation_id=9))
        frame[6:8] = struct.pack(">h", 99)  # a future ApiVersions version
        s.sendall(bytes(frame))
        body = read_frame(s)
        correlation, error, count = struct.unpack(">ihi", body[:10])
        assert correlation == 9
        assert error == 35  # UNSUPPORTED_VERSION
        keys = {struct.unpack(">hhh", body[10 + 6 * i: 16 + 6 * i])[0] for i in range(count)}
        assert {0, 1, 2, 3, 18, 19}.issubset(keys)


def test_bad_frames_close_only_their_connection(broker_factory):
    b = broker_factory({"socket.request.max.bytes": "100000"})
    bystander = connect(b)
    bystander.sendall(api_versions_frame(0, correlation_id=1))
    read_frame(bystander)

    cases = [
        struct.pack(">i", 200000) + b"\x00" * 16,            # over socket.request.max.bytes
        struct.pack(">i", -5),                               # negative size
        struct.pack(">i", 6) + b"\x00\x12\x00\x00\x00\x01",  # too short for a header
        struct.pack(">i", 10) + struct.pack(">hhih", 999, 0, 1, 0),  # unknown API key
        struct.pack(">i", 10) + struct.pack(">hhih", 11, 0, 1, 0),   # JoinGroup: not implemented
        struct.pack(">i", 10) + struct.pack(">hhih", 1, 2, 1, 0),    # Fetch v2: below the range
        struct.pack(">i", 12) + struct.pack(">hhih", 3, 12, 1, 0) + b"\xff\xff",  # garbage body
    ]
    for frame in cases:
        with connect(b) as s:
            s.sendall(frame)
            assert is_closed(s), frame
    # A truncated frame followed by a hang-up.
    with connect(b) as s:
        s.sendall(struct.pack(">i", 500) + b"\x00" * 20)
    # The bystander and new connections are unaffected.
    bystander.sendall(api_versions_frame(0, correlation_id=2))
    assert struct.unpack(">i", read_frame(bystander)[:4])[0] == 2
    bystander.close()
    assert api_versions_ok(b)
    assert b.alive()
    assert "closing connection" in b.log()


def test_corrupt_batch_is_refused_with_kafka_error(broker):
    create_topic(broker.bootstrap, "corrupt")
    produce_confluent(broker.bootstrap, "corrupt", [(b"k", b"good", [])])
    # Produce v3 with a record batch whose CRC is wrong.
    batch = bytearray(61 + 10)
    struct.pack_into(">qi", batch, 0, 0, len(batch) - 12)  # base offset, batch length
    struct.pack_into(">ib", batch, 12, 0, 2)  # leader epoch, magic 2
    struct.pack_into(">I", batch, 17, 0xDEADBEEF)  # bogus CRC
    struct.pack_into(">i", batch, 57, 1)  # record count
    topic = b"corrupt"
    body = struct.pack(">hhii", -1, 1, 30000, 1)  # transactional id null, acks, timeout, 1 topic
    body += struct.pack(">h", len(topic)) + topic + struct.pack(">ii", 1, 0)
    body += struct.pack(">i", len(batch)) + bytes(batch)
    header = struct.pack(">hhih", 0, 3, 5, 3) + b"raw"
    with connect(broker) as s:
        s.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        response = read_frame(s)
    # correlation, topics count, name, partitions count, index, error code
    correlation, _ = struct.unpack(">ii", response[:8])
    (name_len,) = struct.unpack(">h", response[8:10])
    offset = 10 + name_len
    _, index, error = struct.unpack(">iih", response[offset:offset + 10])
    assert correlation == 5 and index == 0
    assert error == 2  # CORRUPT_MESSAGE
    # The partition is unharmed.
    produce_confluent(broker.bootstrap, "corrupt", [(b"k", b"after", [])])
    got = consume_confluent(broker.bootstrap, "corrupt", 2)
    assert [m.value() for m in got] == [b"good", b"after"]


def test_unknown_topic_partition_and_offset_out_of_range(broker_factory):
    b = broker_factory({"auto.create.topics.enable": "false"})
    p = Producer({"bootstrap.servers": b.bootstrap, "message.timeout.ms": 3000})
    errors = []
    p.produce("missing", value=b"x", on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors and errors[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._MSG_TIMED_OUT)
    create_topic(b.bootstrap, "present")
    produce_confluent(b.bootstrap, "present", [(None, b"a", [])])
    # librdkafka refuses an unknown partition either at once (when it already
    # holds the topic's metadata) or through the delivery report.
    errors = []
    try:
        p.produce("present", value=b"x", partition=5, on_delivery=lambda err, msg: errors.append(err))
        p.flush(10)
    except KafkaException as e:
        errors.append(e.args[0])
    assert errors and errors[0] is not None
    assert errors[0].code() in (KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART)
    # A fetch far past the end: with auto.offset.reset=error the consumer reports it.
    try:
        consume_confluent(b.bootstrap, "present", 1, offset=1000, timeout=10, extra={"auto.offset.reset": "error"})
        raise AssertionError("expected an offset out of range error")
    except AssertionError as e:
        assert "out of range" in str(e).lower() or "offset" in str(e).lower()
    # Invalid names are refused.
    try:
        client = admin(b.bootstrap)
        client.create_topics([NewTopic("x" * 250, 1, 1)])["x" * 250].result(timeout=30)
        raise AssertionError("expected invalid topic")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.TOPIC_EXCEPTION


def test_random_frames_never_disturb_the_broker(broker):
    import random

    rng = random.Random(1234)
    keys = [0, 1, 2, 3, 18, 19, 20, 21, 23, 32, 33, 35, 37, 44, 60]
    create_topic(broker.bootstrap, "fuzz")
    for i in range(400):
        key = rng.choice(keys)
        version = rng.randint(0, 14)
        body = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 200)))
        if rng.random() < 0.3:
            # A plausible array length followed by too few bytes.
            body = struct.pack(">i", rng.randint(1, 2**31 - 1)) + body[:8]
        header = struct.pack(">hhih", key, version, i, 3) + b"fz!"
        if rng.random() < 0.5:
            header += b"\x00"  # flexible header tags
        frame = header + body
        with connect(broker) as s:
            s.sendall(struct.pack(">i", len(frame)) + frame)
            s.settimeout(5)
            try:
                s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                pass
    assert broker.alive()
    assert api_versions_ok(broker)
    produce_confluent(broker.bootstrap, "fuzz", [(b"k", b"still fine", [])])
    assert [m.value() for m in consume_confluent(broker.bootstrap, "fuzz", 1)] == [b"still fine"]
