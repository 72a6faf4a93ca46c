"""A bounded mutation fuzzer against the release binary.

Seeds are real client request frames (tests/interop/fuzz_corpus/frames,
recorded from confluent-kafka, kafka-python and the Java client by
fuzz_corpus/record.py),
plus a header-only frame for any API the broker advertises that the corpus
lacks. Several connections send mutated frames for a fixed time while a
health client checks, once a second, that a fresh connection is answered
(ApiVersions and Metadata within a deadline). The run asserts: the broker
never exits, never stops answering, its memory stays under a bound, and the
number of partitions on disk stays bounded (absurd CreateTopics and
CreatePartitions counts are refused).

KRABKA_FUZZ_SEED and KRABKA_FUZZ_SECONDS change the seed and the duration;
a failure prints the seed so it can be replayed. KRABKA_FUZZ_SKIP_APIS
(comma-separated API keys) leaves those APIs' frames out, to triage one
finding while looking for others."""

import os
import random
import socket
import struct
import threading
import time

from helpers import consume_confluent, create_topic, produce_confluent

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz_corpus", "frames")
SEED = int(os.environ.get("KRABKA_FUZZ_SEED", "20261204"))
SECONDS = float(os.environ.get("KRABKA_FUZZ_SECONDS", "60"))
SKIP_APIS = {int(k) for k in os.environ.get("KRABKA_FUZZ_SKIP_APIS", "").split(",") if k.strip()}
SENDERS = 4
RSS_BOUND = 1024 * 2**20
PARTITION_BOUND = 5000
INTERESTING = [0, 1, -1, 0x7F, 0x80, 0xFF, 0x7FFF, -0x8000, 0xFFFF, 0x7FFFFFFF, -0x80000000,
               1000000, 2**24]


# Clients the corpus was recorded from (the last part but one of a frame's name).
CLIENTS = {"confluent", "kafkapython", "java"}


def load_corpus():
    frames = []
    clients = set()
    for name in sorted(os.listdir(CORPUS)):
        with open(os.path.join(CORPUS, name), "rb") as f:
            frames.append(f.read())
        clients.add(name.rsplit("-", 2)[-2])
    assert frames, "the corpus is empty: run fuzz_corpus/record.py"
    assert clients == CLIENTS, "the corpus lacks frames of %s: run fuzz_corpus/record.py --clients ..." % (
        CLIENTS - clients)
    return frames


def recv_exact(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def advertised_apis(port):
    """(api key, max version) of every API the broker advertises."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        header = struct.pack(">hhih", 18, 0, 1, 4) + b"fuzz"
        s.sendall(struct.pack(">i", len(header)) + header)
        (size,) = struct.unpack(">i", recv_exact(s, 4))
        body = recv_exact(s, size)
    _, error, count = struct.unpack(">ihi", body[:10])
    assert error == 0
    return [struct.unpack(">hhh", body[10 + 6 * i:16 + 6 * i])[::2] for i in range(count)]


def header_only(api, version):
    """A request header with no body, in both header shapes (whether the
    version is flexible differs per API)."""
    plain = struct.pack(">hhih", api, version, 0, 4) + b"fuzz"
    return [plain, plain + b"\x00"]


def mutate(rng, frames):
    frame = bytearray(rng.choice(frames))
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(8)
        if op == 0 and frame:  # flip bits
            for _ in range(rng.randint(1, 8)):
                i = rng.randrange(len(frame))
                frame[i] ^= 1 << rng.randrange(8)
        elif op == 1 and frame:  # random bytes
            for _ in range(rng.randint(1, 4)):
                frame[rng.randrange(len(frame))] = rng.randrange(256)
        elif op == 2 and len(frame) > 8:  # an interesting number (counts, lengths)
            value = rng.choice(INTERESTING)
            width = rng.choice((1, 2, 4))
            at = rng.randrange(8, len(frame))
            packed = (value & ((1 << (8 * width)) - 1)).to_bytes(width, "big")
            frame[at:at + width] = packed
        elif op == 3:  # insert
            at = rng.randrange(len(frame) + 1)
            frame[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 32)))
        elif op == 4 and len(frame) > 8:  # delete a range
            at = rng.randrange(8, len(frame))
            del frame[at:at + rng.randint(1, 64)]
        elif op == 5 and len(frame) > 8:  # truncate
            del frame[rng.randrange(8, len(frame)):]
        elif op == 6:  # splice with another frame of any API
            other = rng.choice(frames)
            cut = rng.randrange(len(frame) + 1)
            frame = frame[:cut] + other[rng.randrange(len(other) + 1):]
        elif op == 7 and len(frame) >= 4:  # a neighbouring version
            version = struct.unpack(">h", frame[2:4])[0] + rng.choice((-2, -1, 1, 2))
            frame[2:4] = struct.pack(">h", max(-1, min(version, 20)))
    if len(frame) >= 8:
        frame[4:8] = struct.pack(">i", rng.randrange(2**31))
    return bytes(frame)


def rss_bytes(broker):
    with open("/proc/%d/status" % broker.process.pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def partitions_on_disk(broker):
    try:
        return sum(1 for name in os.listdir(broker.data_dir) if name.rsplit("-", 1)[-1].isdigit())
    except OSError:
        return 0


def healthy(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.settimeout(10)
            header = struct.pack(">hhih", 18, 0, 7, 6) + b"health"
            metadata = struct.pack(">hhih", 3, 1, 8, 6) + b"health" + struct.pack(">i", -1)
            for frame in (header, metadata):
                s.sendall(struct.pack(">i", len(frame)) + frame)
            for correlation in (7, 8):
                (size,) = struct.unpack(">i", recv_exact(s, 4))
                body = recv_exact(s, size)
                if struct.unpack(">i", body[:4])[0] != correlation:
                    return False
        return True
    except OSError:
        return False


def sender(port, frames, seed, deadline, stats):
    rng = random.Random(seed)
    s = None
    while time.time() < deadline:
        if s is None:
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                s.settimeout(0.2)
            except OSError:
                time.sleep(0.05)
                continue
        frame = mutate(rng, frames)
        size = len(frame)
        if rng.random() < 0.02:
            size += rng.randint(1, 100)  # announce more than is sent
        try:
            s.sendall(struct.pack(">i", size) + frame)
            stats["sent"] += 1
            s.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            pass
        else:
            continue
        s.close()
        s = None
        stats["closed"] += 1
    if s is not None:
        s.close()


def test_mutated_client_frames_never_crash_wedge_or_explode(broker_factory):
    b = broker_factory({
        "socket.request.max.bytes": str(16 * 2**20),
        "queued.max.request.bytes": str(64 * 2**20),
        "krabka.request.read.timeout.ms": "2000",
        "group.initial.rebalance.delay.ms": "0",
    })
    # The topics the recorded frames name (by confluent-kafka, kafka-python
    # and the Java client), so mutated frames reach real partitions.
    for topic in ("c-topic", "p-topic", "fuzz-produce", "fuzz-txn"):
        create_topic(b.bootstrap, topic, partitions=3)
    frames = [f for f in load_corpus() if struct.unpack(">h", f[:2])[0] not in SKIP_APIS]
    have = {struct.unpack(">hh", f[:4]) for f in frames}
    for api, max_version in advertised_apis(b.port):
        if api not in SKIP_APIS and not any(k == api for k, _ in have):
            frames.extend(header_only(api, max_version))
    deadline = time.time() + SECONDS
    stats = {"sent": 0, "closed": 0}
    threads = [threading.Thread(target=sender, args=(b.port, frames, SEED + i, deadline, stats), daemon=True)
               for i in range(SENDERS)]
    for t in threads:
        t.start()
    peak_rss, peak_partitions, misses, in_a_row = 0, 0, 0, 0
    while time.time() < deadline:
        started = time.time()
        assert b.alive(), "seed %d: the broker exited:\n%s" % (SEED, b.log())
        if healthy(b.port):
            in_a_row = 0
        else:
            misses += 1
            in_a_row += 1
        # Each check waits up to 10 s: two misses in a row is a wedge.
        assert in_a_row < 2, "seed %d: the broker stopped answering:\n%s" % (SEED, b.log())
        peak_rss = max(peak_rss, rss_bytes(b))
        peak_partitions = max(peak_partitions, partitions_on_disk(b))
        assert peak_rss < RSS_BOUND, "seed %d: RSS %d" % (SEED, peak_rss)
        assert peak_partitions < PARTITION_BOUND, "seed %d: %d partitions" % (SEED, peak_partitions)
        time.sleep(max(0.0, 1.0 - (time.time() - started)))
    for t in threads:
        t.join(timeout=30)
    print("fuzz seed %d: %d frames sent, %d connections closed by the broker, peak RSS %d MiB, "
          "%d partitions on disk, %d health checks missed" % (
              SEED, stats["sent"], stats["closed"], peak_rss >> 20, peak_partitions, misses))
    assert b.alive(), "seed %d: the broker exited:\n%s" % (SEED, b.log())
    assert healthy(b.port)
    assert stats["sent"] > 1000
    # Ordinary clients still produce and consume.
    produce_confluent(b.bootstrap, "after-fuzz", [(None, b"still here", [])])
    assert [m.value() for m in consume_confluent(b.bootstrap, "after-fuzz", 1)] == [b"still here"]
