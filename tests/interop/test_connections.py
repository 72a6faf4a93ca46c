"""Connection and request budgets against the real binary: connection
limits at accept (total, per IP, overrides), idle and slow connections
reaped, request bytes bounded however large the sizes clients announce, a
hostile array count in a tiny frame, running out of file descriptors, and
the socket buffer sizes each connection gets.

Every wait has a deadline; the broker's memory is read from /proc."""

import re
import resource
import selectors
import shutil
import socket
import struct
import subprocess
import threading
import time

import pytest

from helpers import consume_confluent, create_topic, produce_confluent


def raise_fd_limit(wanted):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(wanted, soft), hard), hard))
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert soft >= wanted, "this test needs %d file descriptors, the limit is %d" % (wanted, soft)


def rss_bytes(broker):
    with open("/proc/%d/status" % broker.process.pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS for the broker")


def full_log(broker):
    with open(broker.log_path, "rb") as f:
        return f.read().decode("utf-8", "replace")


def api_versions_frame(correlation_id):
    header = struct.pack(">hhih", 18, 0, correlation_id, 3) + b"net"
    return struct.pack(">i", len(header)) + header


def recv_exact(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed after %d of %d bytes" % (len(data), n))
        data += chunk
    return data


def api_versions_answered(s, correlation_id=42):
    """Whether the connection answers an ApiVersions request (10 s deadline)."""
    s.settimeout(10)
    try:
        s.sendall(api_versions_frame(correlation_id))
        (size,) = struct.unpack(">i", recv_exact(s, 4))
        body = recv_exact(s, size)
    except OSError:
        return False
    return struct.unpack(">ih", body[:6]) == (correlation_id, 0)


def healthy(broker):
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as s:
        return api_versions_answered(s)


def connect_many(broker, count, source="127.0.0.1"):
    """Opens `count` connections from `source`; connections the broker
    refuses may already be closed when this returns."""
    out = []
    for _ in range(count):
        s = socket.socket()
        s.bind((source, 0))
        s.settimeout(10)
        s.connect(("127.0.0.1", broker.port))
        s.setblocking(False)
        out.append(s)
    return out


def wait_closed(sockets, expected, timeout=60):
    """Waits until `expected` of `sockets` have been closed by the broker;
    returns (closed, still open)."""
    sel = selectors.DefaultSelector()
    for s in sockets:
        sel.register(s, selectors.EVENT_READ)
    closed = []
    deadline = time.time() + timeout
    while len(closed) < expected and time.time() < deadline:
        for key, _ in sel.select(timeout=0.5):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if data == b"":
                sel.unregister(s)
                closed.append(s)
    sel.close()
    still = [s for s in sockets if s not in closed]
    assert len(closed) >= expected, "only %d of %d connections were closed within %ss" % (
        len(closed), expected, timeout)
    return closed, still


def close_all(sockets):
    for s in sockets:
        s.close()


def test_max_connections_refuses_the_excess_and_clients_still_work(broker_factory):
    raise_fd_limit(4500)
    b = broker_factory({"max.connections": "1000"})
    create_topic(b.bootstrap, "limits")
    flood = connect_many(b, 2000)
    try:
        refused, held = wait_closed(flood, 1000)
        assert len(refused) == 1000 and len(held) == 1000
        # The connections held are served; the refused ones were closed at
        # accept, with the reason in the log.
        for s in held[:20]:
            s.setblocking(True)
            assert api_versions_answered(s)
        assert "max.connections (1000) reached" in full_log(b)
        # With a few slots free again, ordinary clients produce and consume.
        close_all(held[:50])
        held = held[50:]
        produce_confluent(b.bootstrap, "limits", [(b"k", b"v%d" % i, []) for i in range(100)])
        got = consume_confluent(b.bootstrap, "limits", 100)
        assert [m.value() for m in got] == [b"v%d" % i for i in range(100)]
        # And the limit still holds.
        more = connect_many(b, 100)
        refused_more, _ = wait_closed(more, 50)
        close_all(more)
        assert len(refused_more) >= 50
    finally:
        close_all(flood)
    assert b.alive()


def test_per_ip_limits_and_overrides(broker_factory):
    b = broker_factory({
        "max.connections.per.ip": "5",
        "max.connections.per.ip.overrides": "127.0.0.2:10,127.0.0.3:0",
    })
    # Not 127.0.0.1: the fixture's start-up probe may still hold a slot there.
    ones = connect_many(b, 8, "127.0.0.4")
    twos = connect_many(b, 12, "127.0.0.2")
    threes = connect_many(b, 2, "127.0.0.3")
    try:
        refused, held = wait_closed(ones, 3)
        assert len(held) == 5
        refused, held_twos = wait_closed(twos, 2)
        assert len(held_twos) == 10
        wait_closed(threes, 2)
        for s in held + held_twos:
            s.setblocking(True)
            assert api_versions_answered(s)
        log = full_log(b)
        assert "127.0.0.4 holds its limit of 5 connections (max.connections.per.ip)" in log
        # A slot freed is a slot available again (once the broker has seen
        # the close).
        held[0].close()
        deadline = time.time() + 30
        while True:
            again = connect_many(b, 1, "127.0.0.4")[0]
            again.setblocking(True)
            served = api_versions_answered(again)
            again.close()
            if served:
                break
            assert time.time() < deadline, "the freed slot was not given back"
            time.sleep(0.1)
    finally:
        close_all(ones + twos + threes)


def test_idle_and_slow_connections_are_reaped(broker_factory):
    raise_fd_limit(4500)
    b = broker_factory({
        "connections.max.idle.ms": "3000",
        "krabka.request.read.timeout.ms": "2000",
    })
    create_topic(b.bootstrap, "reaped")
    produce_confluent(b.bootstrap, "reaped", [(None, b"warm", [])])
    assert len(consume_confluent(b.bootstrap, "reaped", 1)) == 1
    baseline = rss_bytes(b)

    stop = threading.Event()

    def slowloris(s):
        # A 50 MB request announced, then one byte every 100 ms.
        try:
            s.sendall(struct.pack(">i", 50_000_000))
            while not stop.is_set():
                s.sendall(b"x")
                time.sleep(0.1)
        except OSError:
            pass

    slow = [socket.create_connection(("127.0.0.1", b.port), timeout=10) for _ in range(5)]
    threads = [threading.Thread(target=slowloris, args=(s,), daemon=True) for s in slow]
    for t in threads:
        t.start()
    idle = connect_many(b, 2000)
    started = time.time()
    try:
        peak = rss_bytes(b)
        closed, _ = wait_closed(idle, 2000, timeout=60)
        # Not before the idle bound.
        assert time.time() - started >= 2.5
        for s in slow:
            s.setblocking(False)
        closed_slow, _ = wait_closed(slow, 5, timeout=30)
        assert len(closed_slow) == 5
        peak = max(peak, rss_bytes(b))
        log = full_log(b)
        assert "request arrived too slowly" in log
        # The broker is back near where it started.
        deadline = time.time() + 30
        after = rss_bytes(b)
        while after >= baseline + 24 * 2**20 and time.time() < deadline:
            time.sleep(0.2)
            after = rss_bytes(b)
        print("RSS: baseline %d, peak %d, after %d" % (baseline, peak, after))
        assert after < baseline + 24 * 2**20, (baseline, peak, after)
        assert healthy(b)
    finally:
        stop.set()
        close_all(idle + slow)
    for t in threads:
        t.join(timeout=10)


def test_trickled_huge_size_prefixes_hold_bounded_memory(broker_factory):
    b = broker_factory({"krabka.request.read.timeout.ms": "3000"})
    create_topic(b.bootstrap, "bystander")
    baseline = rss_bytes(b)
    stop = threading.Event()
    samples = []

    def trickle(s):
        try:
            s.sendall(struct.pack(">i", 100_000_000))
            while not stop.is_set():
                s.sendall(b"y" * 1000)
                time.sleep(0.1)
        except OSError:
            pass

    conns = [socket.create_connection(("127.0.0.1", b.port), timeout=10) for _ in range(10)]
    threads = [threading.Thread(target=trickle, args=(s,), daemon=True) for s in conns]
    for t in threads:
        t.start()
    try:
        # A well-behaved client is served meanwhile.
        produce_confluent(b.bootstrap, "bystander", [(None, b"meanwhile", [])])
        samples.append(rss_bytes(b))
        for s in conns:
            s.setblocking(False)
        closed, _ = wait_closed(conns, 10, timeout=60)
        samples.append(rss_bytes(b))
        print("RSS: baseline %d, samples %s" % (baseline, samples))
        assert max(samples) < baseline + 64 * 2**20, (baseline, samples)
        assert full_log(b).count("request arrived too slowly") >= 10
        assert healthy(b)
    finally:
        stop.set()
        close_all(conns)
    for t in threads:
        t.join(timeout=10)


def test_request_bytes_across_connections_stay_within_the_budget(broker_factory):
    # Ten clients each send 30 MB of a 90 MB request quickly, then stall:
    # 300 MB announced and sent, but the broker holds at most the budget.
    budget = 64 * 2**20
    b = broker_factory({
        "socket.request.max.bytes": str(budget),
        "queued.max.request.bytes": str(budget),
        "krabka.request.read.timeout.ms": "5000",
    })
    baseline = rss_bytes(b)
    chunk = b"z" * (1 << 20)

    def send_part(s):
        try:
            s.sendall(struct.pack(">i", 60 * 2**20))
            for _ in range(30):
                s.sendall(chunk)
        except OSError:
            pass

    conns = [socket.create_connection(("127.0.0.1", b.port), timeout=30) for _ in range(10)]
    threads = [threading.Thread(target=send_part, args=(s,), daemon=True) for s in conns]
    for t in threads:
        t.start()
    peak = 0
    deadline = time.time() + 4
    while time.time() < deadline:
        peak = max(peak, rss_bytes(b))
        time.sleep(0.05)
    for s in conns:
        s.setblocking(False)
    try:
        wait_closed(conns, 10, timeout=120)
        peak = max(peak, rss_bytes(b))
        # The budget plus the socket buffers and the broker's own working set.
        print("RSS: baseline %d, peak %d" % (baseline, peak))
        assert peak < baseline + budget + 48 * 2**20, (baseline, peak)
        assert healthy(b)
    finally:
        close_all(conns)
    for t in threads:
        t.join(timeout=30)


def test_an_array_claiming_two_billion_elements_closes_only_that_connection(broker):
    create_topic(broker.bootstrap, "arrays")
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as bystander:
        assert api_versions_answered(bystander, 1)
        before = rss_bytes(broker)
        frames = []
        # Metadata v1: topics array of 2^31-1 names, in a 100-byte frame.
        header = struct.pack(">hhih", 3, 1, 7, 3) + b"arr"
        body = struct.pack(">i", 2**31 - 1) + b"\x00\x05topic" * 20
        frames.append((header + body)[:100])
        # CreateTopics v2 and Produce v3: the same count in their first array.
        frames.append((struct.pack(">hhih", 19, 2, 8, 3) + b"arr" + struct.pack(">i", 2**31 - 1)).ljust(100, b"\x01"))
        frames.append((struct.pack(">hhih", 0, 3, 9, 3) + b"arr" + struct.pack(">hhii", -1, 1, 1000, 2**31 - 1)).ljust(100, b"\x01"))
        # Metadata v12 (flexible): a compact array of 2^31 elements.
        flexible = struct.pack(">hhih", 3, 12, 10, 3) + b"arr" + b"\x00" + bytes([0x80, 0x80, 0x80, 0x80, 0x08])
        frames.append(flexible.ljust(100, b"\x00"))
        for frame in frames:
            assert len(frame) == 100
            for _ in range(20):
                with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as s:
                    s.sendall(struct.pack(">i", len(frame)) + frame)
                    s.settimeout(10)
                    try:
                        assert s.recv(1) == b""
                    except ConnectionResetError:
                        pass
        after = rss_bytes(broker)
        print("RSS: before %d, after %d" % (before, after))
        assert after < before + 16 * 2**20, (before, after)
        assert broker.alive()
        assert api_versions_answered(bystander, 2)
    assert "undecodable request" in full_log(broker)


def test_running_out_of_file_descriptors_only_delays_accepting(broker_factory):
    b = broker_factory(start=False)

    # An empty broker holds ~110 descriptors (one per internal partition):
    # 400 leaves room for fewer than 300 of the 600 connections.
    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (400, 400))

    b.preexec_fn = low_limit
    b.start()
    assert "open-file limit" in full_log(b)
    conns = connect_many(b, 600)
    try:
        # Some of the 600 cannot get a descriptor: they are closed at once
        # rather than left hanging.
        refused, held = wait_closed(conns, 100, timeout=60)
        assert "out of file descriptors" in full_log(b)
    finally:
        close_all(conns)
    # Once descriptors are free again, the broker accepts and serves.
    deadline = time.time() + 30
    while not healthy(b):
        assert time.time() < deadline, "the broker did not accept again:\n" + full_log(b)
        time.sleep(0.2)
    create_topic(b.bootstrap, "after-exhaustion")
    produce_confluent(b.bootstrap, "after-exhaustion", [(None, b"ok", [])])
    assert [m.value() for m in consume_confluent(b.bootstrap, "after-exhaustion", 1)] == [b"ok"]


def broker_socket_buffers(port):
    """(SO_RCVBUF, SO_SNDBUF) as the kernel holds them (twice the value
    set) for the broker's end of each established connection on `port`,
    from `ss`'s socket memory (rb, tb)."""
    out = subprocess.run(["ss", "-tmnH", "state", "established", "( sport = :%d )" % port],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    return [(int(m.group(1)), int(m.group(2))) for m in re.finditer(r"rb(\d+),t\d+,tb(\d+)", out.stdout)]


@pytest.mark.skipif(shutil.which("ss") is None, reason="iproute2's ss not installed")
def test_socket_buffer_settings_size_each_connection(broker_factory):
    """socket.send.buffer.bytes (Kafka's 102400 by default) and
    socket.receive.buffer.bytes size the broker's end of every connection;
    -1 leaves the OS's own (autotuned) sizes."""
    sized = broker_factory({"socket.receive.buffer.bytes": "65536"})
    client = socket.create_connection(("127.0.0.1", sized.port), timeout=10)
    try:
        deadline = time.time() + 30
        while (buffers := broker_socket_buffers(sized.port)) != [(131072, 204800)]:
            assert time.time() < deadline, buffers
            time.sleep(0.05)
    finally:
        client.close()
    # The sizes apply: a produce and a consume through them still work.
    create_topic(sized.bootstrap, "buffers")
    values = [b"v%d" % i * 500 for i in range(2000)]
    produce_confluent(sized.bootstrap, "buffers", [(None, v, []) for v in values])
    assert [m.value() for m in consume_confluent(sized.bootstrap, "buffers", len(values))] == values

    unsized = broker_factory({"socket.send.buffer.bytes": "-1"})
    client = socket.create_connection(("127.0.0.1", unsized.port), timeout=10)
    try:
        deadline = time.time() + 30
        while not (buffers := broker_socket_buffers(unsized.port)):
            assert time.time() < deadline, "no connection seen by ss"
            time.sleep(0.05)
        assert len(buffers) == 1 and buffers[0][1] != 204800, buffers
    finally:
        client.close()
