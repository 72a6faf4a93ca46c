"""A data directory is never lost silently: its identity and lock, loud
recovery, coordinator state that is refused rather than dropped, bounded
topic creation and internal topics closed to clients (issue 19).

Every test runs the real binary on its own directory and checks the real
effect: the process exit and its message, the files on disk, what clients
read back.
"""

import os
import re
import struct
import subprocess
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic

from conftest import KRABKA_BIN, KrabkaBroker, free_port
from helpers import admin, consume_confluent, create_topic, produce_confluent, wait_for


def values(n, tag):
    return [(None, ("%s-%06d" % (tag, i)).encode(), []) for i in range(n)]


def read_values(bootstrap, topic, count, partition=0, timeout=60):
    got = consume_confluent(bootstrap, topic, count, partition=partition, timeout=timeout)
    return [m.value() for m in got]


def plain(text):
    """Log text without the terminal colours of the log format."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def start_fails(data_dir, overrides=None, timeout=30):
    """Starts a broker that must exit on its own; returns its output."""
    b = KrabkaBroker(data_dir, overrides)
    with pytest.raises(RuntimeError) as failed:
        b.start(timeout=timeout)
    assert not b.alive()
    return plain(str(failed.value))


def recover(data_dir, *args):
    out = subprocess.run(
        [KRABKA_BIN, "recover", "--override", "log.dirs=%s" % data_dir, *args],
        capture_output=True, text=True, timeout=120,
    )
    return out.returncode, out.stdout + out.stderr


def java_hash(s):
    h = 0
    for c in s.encode("utf-16-be").decode("utf-16-be"):
        h = (31 * h + ord(c)) & 0xFFFFFFFF
    return h


def offsets_partition(group, partitions=50):
    return (java_hash(group) & 0x7FFFFFFF) % partitions


def batches(path):
    """(position, size, base offset) of every record batch in a segment."""
    with open(path, "rb") as f:
        data = f.read()
    out = []
    pos = 0
    while pos + 12 <= len(data):
        base, length = struct.unpack(">qi", data[pos:pos + 12])
        if length <= 0 or pos + 12 + length > len(data):
            break
        out.append((pos, 12 + length, base))
        pos += 12 + length
    return out, data


def flip_byte(path, position):
    with open(path, "r+b") as f:
        f.seek(position)
        b = f.read(1)
        f.seek(position)
        f.write(bytes([b[0] ^ 0x5A]))


def commit(bootstrap, group, offsets):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=offsets, asynchronous=False)
    finally:
        c.close()


def committed(bootstrap, group, partitions, timeout=10):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return [tp.offset for tp in c.committed(partitions, timeout=timeout)]
    finally:
        c.close()


# --- identity and exclusivity -------------------------------------------------


def test_a_second_broker_on_the_same_dir_exits_and_the_first_loses_nothing(broker):
    create_topic(broker.bootstrap, "held")
    produce_confluent(broker.bootstrap, "held", values(2000, "a"), extra={"acks": "all"})
    out = start_fails(broker.data_dir)
    assert "is in use by another process" in out, out
    assert broker.data_dir in out, out
    assert broker.alive()
    produce_confluent(broker.bootstrap, "held", values(2000, "b"), extra={"acks": "all"})
    broker.restart()
    got = read_values(broker.bootstrap, "held", 4000)
    assert got == [v for _, v, _ in values(2000, "a") + values(2000, "b")]


def test_a_dir_of_another_node_is_refused_and_its_own_node_still_starts(broker):
    create_topic(broker.bootstrap, "mine")
    produce_confluent(broker.bootstrap, "mine", values(100, "n"))
    assert broker.stop() == 0
    with open(os.path.join(broker.data_dir, "meta.properties")) as f:
        meta = f.read()
    assert re.search(r"^node\.id=1$", meta, re.M) and re.search(r"^version=1$", meta, re.M), meta
    assert re.search(r"^cluster\.id=\S+$", meta, re.M) and re.search(r"^directory\.id=\S{22}$", meta, re.M)
    out = start_fails(broker.data_dir, {"node.id": "7"})
    assert "belongs to node 1" in out and "node.id=7" in out, out
    broker.start()
    assert read_values(broker.bootstrap, "mine", 100) == [v for _, v, _ in values(100, "n")]


def test_a_lost_registry_is_refused_and_krabka_recover_restores_the_data(broker):
    create_topic(broker.bootstrap, "kept", partitions=3)
    for p in range(3):
        produce_confluent(broker.bootstrap, "kept", values(500, "p%d" % p), partition=p)
    commit(broker.bootstrap, "reader", [TopicPartition("kept", 1, 123)])
    assert broker.stop() == 0
    registry = os.path.join(broker.data_dir, "krabka-topics.json")
    os.remove(registry)

    out = start_fails(broker.data_dir)
    assert "topic registry krabka-topics.json is missing" in out and "krabka recover" in out, out
    assert not os.path.exists(registry), "a refused start wrote a registry"

    code, text = recover(broker.data_dir, "--dry-run")
    assert code == 0, text
    assert "topic kept:" in text and "dry run" in text, text
    assert not os.path.exists(registry)
    code, text = recover(broker.data_dir)
    assert code == 0, text
    assert "topic kept:" in text and "3 partitions" in text, text
    assert os.path.exists(registry)

    broker.start()
    for p in range(3):
        got = read_values(broker.bootstrap, "kept", 500, partition=p)
        assert got == [v for _, v, _ in values(500, "p%d" % p)]
    assert committed(broker.bootstrap, "reader", [TopicPartition("kept", 1)]) == [123]
    # New producer ids do not collide with the ones in the logs.
    produce_confluent(broker.bootstrap, "kept", values(10, "after"), extra={"enable.idempotence": True})


# --- coordinator state is refused, never dropped ------------------------------


@pytest.mark.parametrize("stop", ["clean", "kill9"])
def test_a_flipped_byte_in_consumer_offsets_refuses_the_partition_and_loses_no_commit(broker_factory, stop):
    broker = broker_factory()
    create_topic(broker.bootstrap, "orders", partitions=2)
    group = "settled"
    commit(broker.bootstrap, group, [TopicPartition("orders", 0, 42)])
    commit(broker.bootstrap, group, [TopicPartition("orders", 0, 84)])
    commit(broker.bootstrap, group, [TopicPartition("orders", 1, 7)])
    # A group on another partition of __consumer_offsets.
    other = next("other-%d" % i for i in range(1000)
                 if offsets_partition("other-%d" % i) != offsets_partition(group))
    commit(broker.bootstrap, other, [TopicPartition("orders", 0, 5)])
    if stop == "clean":
        assert broker.stop() == 0
    else:
        broker.kill9()

    n = offsets_partition(group)
    segment = os.path.join(broker.data_dir, "__consumer_offsets-%d" % n, "%020d.log" % 0)
    found, _ = batches(segment)
    assert len(found) == 3, found  # one batch per commit
    pos, size, base = found[1]  # the commit of offset 84
    flip_byte(segment, pos + size - 4)
    with open(segment, "rb") as f:
        damaged = f.read()

    broker.start()
    # The coordinators load after the listeners bind: wait for the refusal.
    refusal = (r"__consumer_offsets partition cannot be loaded.*partition=%d\b" % n,
               r"partition=%d\b.*__consumer_offsets partition cannot be loaded" % n)
    try:
        wait_for(lambda: any(re.search(r, plain(broker.log())) for r in refusal),
                 timeout=30, what="the refusal of __consumer_offsets-%d in the log" % n)
    except AssertionError:
        raise AssertionError(plain(broker.log()))
    with pytest.raises(KafkaException) as refused:
        committed(broker.bootstrap, group, [TopicPartition("orders", 0)], timeout=8)
    assert refused.value.args[0].code() in (KafkaError._TIMED_OUT, KafkaError.COORDINATOR_NOT_AVAILABLE)
    assert committed(broker.bootstrap, other, [TopicPartition("orders", 0)]) == [5]
    with open(segment, "rb") as f:
        assert f.read() == damaged, "the refused partition was modified"

    # The operator accepts the loss on purpose: the cut is reported.
    assert broker.stop() == 0
    code, text = recover(broker.data_dir, "--accept-loss", "__consumer_offsets-%d" % n)
    assert code == 0, text
    assert re.search(r"removed offsets %d\.\.\d+ \(2 records" % base, text), text
    broker.start()
    assert committed(broker.bootstrap, group, [TopicPartition("orders", 0)]) == [42]


def metrics_text(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        return r.read().decode()


def test_recovery_reports_what_it_cuts_in_the_log_and_the_metrics(broker_factory):
    metrics_port = free_port()
    broker = broker_factory({"krabka.metrics.listener": "127.0.0.1:%d" % metrics_port})
    create_topic(broker.bootstrap, "cut")
    for i in range(3):
        produce_confluent(broker.bootstrap, "cut", values(100, "b%d" % i))
    broker.kill9()
    segment = os.path.join(broker.data_dir, "cut-0", "%020d.log" % 0)
    found, _ = batches(segment)
    assert len(found) >= 3, found
    pos, size, base = found[1]
    flip_byte(segment, pos + size - 4)

    broker.start()
    log = plain(broker.log())
    line = next((l for l in log.splitlines() if "recovery removed data" in l and "cut-0" in l), None)
    assert line, log
    assert "from_offset=%d" % base in line and "cause=corrupt batch" in line, line
    # The corrupt batch and every valid one after it, counted in records.
    removed = int(re.search(r"records=(\d+)", line).group(1))
    assert removed == 300 - base, line
    text = wait_for(lambda: (t := metrics_text(metrics_port)) and "krabka_log_recovery_removed_records_total" in t and t,
                    what="recovery metrics")
    assert re.search(r'krabka_log_recovery_removed_records_total\{[^}]*topic="cut"[^}]*\} %d' % removed, text), text
    all_values = [v for i in range(3) for _, v, _ in values(100, "b%d" % i)]
    assert read_values(broker.bootstrap, "cut", base) == all_values[:base]

    # A torn tail after a clean shutdown is cut and said so too.
    assert broker.stop() == 0
    _, data = batches(segment)
    with open(segment, "ab") as f:
        f.write(data[:40])
    broker.start()
    assert re.search(r"recovery removed data.*cut-0.*cause=torn tail|cut-0.*recovery removed data.*torn tail",
                     plain(broker.log())), plain(broker.log())


# --- partition budgets --------------------------------------------------------


def partition_dirs(data_dir, topic):
    return [d for d in os.listdir(data_dir) if d.startswith(topic + "-")]


def raw_create_topic(bootstrap, name, count):
    from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse

    from helpers import raw_call

    cls = CreateTopicsRequest[2]
    topic = cls.CreatableTopic(name=name, num_partitions=count, replication_factor=1, assignments=[], configs=[])
    request = cls(topics=[topic], timeout_ms=10000, validate_only=False)
    topic = raw_call(bootstrap, request, CreateTopicsResponse).topics[0]
    return topic.error_code, topic.error_message


def raw_create_partitions(bootstrap, name, count):
    from kafka.protocol.admin import CreatePartitionsRequest, CreatePartitionsResponse

    from helpers import raw_call

    cls = CreatePartitionsRequest[1]
    topic = cls.CreatePartitionsTopic(name=name, count=count, assignments=None)
    request = cls(topics=[topic], timeout_ms=10000, validate_only=False)
    result = raw_call(bootstrap, request, CreatePartitionsResponse).results[0]
    return result.error_code, result.error_message


POLICY_VIOLATION = 44


@pytest.mark.parametrize("count", [2**31 - 1, 100_000])
def test_a_huge_partition_count_is_refused_before_any_file_and_the_broker_stays_up(broker_factory, count):
    broker = broker_factory({"krabka.max.partitions.per.request": "10"})
    code, message = raw_create_topic(broker.bootstrap, "huge", count)
    assert code == POLICY_VIOLATION, message
    assert "krabka.max.partitions" in message, message
    assert partition_dirs(broker.data_dir, "huge") == []
    # CreatePartitions is bounded the same way.
    create_topic(broker.bootstrap, "small")
    code, message = raw_create_partitions(broker.bootstrap, "small", count)
    assert code == POLICY_VIOLATION, message
    assert partition_dirs(broker.data_dir, "small") == ["small-0"]
    a = admin(broker.bootstrap)
    a.create_partitions([NewPartitions("small", 3)])["small"].result(timeout=30)
    assert sorted(partition_dirs(broker.data_dir, "small")) == ["small-0", "small-1", "small-2"]
    # One request's topics share its budget.
    fs = a.create_topics([NewTopic("half-%d" % i, num_partitions=6, replication_factor=1) for i in range(2)])
    outcomes = []
    for name, fut in sorted(fs.items()):
        try:
            fut.result(timeout=60)
            outcomes.append("ok")
        except KafkaException as e:
            outcomes.append(e.args[0].code())
    assert sorted(outcomes, key=str) == sorted(["ok", KafkaError.POLICY_VIOLATION], key=str), outcomes
    assert broker.alive()
    with open(os.path.join(broker.data_dir, "krabka-topics.json")) as f:
        assert '"huge"' not in f.read()
    assert broker.stop() == 0
    broker.start()
    md = a.list_topics(timeout=30).topics
    assert "huge" not in md and len(md["small"].partitions) == 3


def open_descriptors(pid, data_dir):
    """(all, on segment .log files, on other partition files) descriptors of a process."""
    data_dir = os.path.realpath(data_dir)
    total = logs = other = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue  # closed since the listing
        total += 1
        if not target.startswith(data_dir + os.sep):
            continue
        if target.endswith(".log"):
            logs += 1
        elif target.endswith((".index", ".timeindex", ".txnindex", ".snapshot")):
            other += 1
    return total, logs, other


def test_a_partition_holds_one_descriptor_however_many_segments_it_has(broker_factory):
    """The active segment's .log is the one file a partition holds open:
    closed segments and every index are opened when used (issue 19, 10,000
    partitions under a 20,000 descriptor limit)."""
    broker = broker_factory({"krabka.max.partitions": "3000"})
    a = admin(broker.bootstrap)
    a.create_topics([NewTopic("many", num_partitions=1000, replication_factor=1,
                              config={"segment.bytes": "4096"})])["many"].result(timeout=120)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for _ in range(4):
        # One batch of 3 KB per partition per round: each round rolls a segment.
        for partition in range(200):
            p.produce("many", value=b"x" * 3000, partition=partition)
        assert p.flush(120) == 0
    del p
    partitions = len([d for d in os.listdir(broker.data_dir) if re.match(r".+-\d+$", d)])
    segments = sum(1 for _root, _dirs, files in os.walk(broker.data_dir) for f in files if f.endswith(".log"))
    assert partitions >= 1000 and segments >= partitions + 600, (partitions, segments)

    def assert_bounded(when):
        # One per partition, plus sockets, the lock, the log output, epoll;
        # reads open closed segments for a moment, hence the deadline.
        last = []

        def bounded():
            last[:] = [open_descriptors(broker.process.pid, broker.data_dir)]
            total, logs, other = last[0]
            return logs <= partitions and other == 0 and total <= partitions + 100

        try:
            wait_for(bounded, timeout=60)
        except AssertionError:
            raise AssertionError("%s: (all, .log, other partition files) descriptors %s for %d partitions, %d segments"
                                 % (when, last[0], partitions, segments))

    assert_bounded("after produce")
    # Crash recovery (which reads closed segments) leaves the same.
    broker.kill9()
    broker.start(timeout=120)
    assert_bounded("after kill -9 and recovery")
    got = consume_confluent(broker.bootstrap, "many", 4, partition=7, timeout=60)
    assert [len(m.value()) for m in got] == [3000] * 4
    assert_bounded("after reading closed segments")
    # A clean stop closes (fsyncs, checkpoints) 1,100 logs: give a loaded
    # machine time for it.
    assert broker.stop(timeout=300) == 0


# --- internal topics ----------------------------------------------------------


def test_clients_cannot_write_delete_trim_or_reconfigure_internal_topics(broker):
    create_topic(broker.bootstrap, "plain")
    # The broker's own writer still works: a group commits.
    commit(broker.bootstrap, "g", [TopicPartition("plain", 0, 3)])
    errors = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 10000, "retries": 0})
    for topic in ["__consumer_offsets", "__transaction_state"]:
        p.produce(topic, value=b"garbage", partition=0, on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    assert [e.code() if e else None for e in errors] == [KafkaError.TOPIC_EXCEPTION] * 2, errors

    a = admin(broker.bootstrap)
    f = a.delete_topics(["__consumer_offsets"], operation_timeout=10)["__consumer_offsets"]
    with pytest.raises(KafkaException) as refused:
        f.result(timeout=30)
    assert refused.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
    fs = a.delete_records([TopicPartition("__consumer_offsets", 0, 0)])
    with pytest.raises(KafkaException) as refused:
        list(fs.values())[0].result(timeout=30)
    assert refused.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
    res = ConfigResource(ConfigResource.Type.TOPIC, "__consumer_offsets", set_config={"cleanup.policy": "delete"})
    with pytest.raises(KafkaException):
        a.alter_configs([res])[res].result(timeout=30)
    assert committed(broker.bootstrap, "g", [TopicPartition("plain", 0)]) == [3]
    assert "__consumer_offsets" in a.list_topics(timeout=10).topics


# --- a full disk --------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(mount)],
                       check=True, capture_output=True, timeout=30)
    except (subprocess.CalledProcessError, FileNotFoundError, PermissionError) as e:
        pytest.skip("cannot mount a 256 MiB tmpfs here (needs root): %s" % e)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=30)


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill(bootstrap, topic, payload):
    """Produces until the broker refuses for lack of space; returns the
    values it acknowledged."""
    acked, failed = [], []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "message.timeout.ms": 15000, "batch.size": 1 << 20})

    def done(err, msg):
        (failed if err else acked).append((err, msg.value()[:16]))

    i = 0
    deadline = time.time() + 300
    while not failed:
        assert time.time() < deadline, "the disk never filled"
        for _ in range(50):
            p.produce(topic, value=b"%015d:" % i + payload, partition=0, on_delivery=done)
            i += 1
        p.poll(0)
        if i % 500 == 0:
            p.flush(30)
    p.flush(60)
    assert all(err.code() in (KafkaError.KAFKA_STORAGE_ERROR, KafkaError._MSG_TIMED_OUT) for err, _ in failed), failed[:3]
    return [v for _, v in acked]


def test_a_full_disk_frees_space_through_delete_topics_and_restarts(small_disk, tmp_path):
    data = small_disk / "data"
    data.mkdir()
    broker = KrabkaBroker(data, {"log.segment.bytes": str(8 << 20)})
    # The broker's own output stays off the full disk.
    broker.log_path = str(tmp_path / "broker.log")
    broker.start()
    try:
        create_topic(broker.bootstrap, "keep")
        create_topic(broker.bootstrap, "filler")
        produce_confluent(broker.bootstrap, "keep", values(1000, "k"), extra={"acks": "all"})
        acked = fill(broker.bootstrap, "filler", b"x" * 50_000)
        assert len(acked) > 1000
        # Whatever the last refused batch left free is taken too: not a
        # byte is left for the broker's own files.
        fd = os.open(small_disk / "ballast", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"\0" * 4096) > 0:
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        assert free_bytes(small_disk) == 0

        # Restarts on the full disk: clean, then after kill -9.
        broker.stop()
        broker.start()
        broker.kill9()
        broker.start()
        assert read_values(broker.bootstrap, "keep", 1000) == [v for _, v, _ in values(1000, "k")]
        got = consume_confluent(broker.bootstrap, "filler", len(acked), timeout=120)
        assert {m.value()[:16] for m in got} >= set(acked), "acknowledged records lost"

        before = free_bytes(small_disk)
        a = admin(broker.bootstrap)
        a.delete_topics(["filler"], operation_timeout=30)["filler"].result(timeout=60)
        assert free_bytes(small_disk) > before + (100 << 20)
        produce_confluent(broker.bootstrap, "keep", values(100, "after"), extra={"acks": "all"})
        with open(broker.log_path, "rb") as f:
            whole_log = plain(f.read().decode("utf-8", "replace"))
        assert "log directory is full: released the space reserve" in whole_log, whole_log[-5000:]
    finally:
        if broker.alive():
            broker.kill9()


def test_a_broker_whose_log_output_cannot_be_written_keeps_serving(tmp_path):
    """Logs redirected to a full disk drop lines; they do not stop the broker
    (a failed write to stderr used to panic it)."""
    b = KrabkaBroker(tmp_path / "data")
    (tmp_path / "data").mkdir()
    with open("/dev/full", "wb") as full:
        b.process = subprocess.Popen(b.command(), stdout=full, stderr=full)
    try:
        wait_for(lambda: b.process.poll() is not None or _listening(b.port), timeout=30, what="the broker to listen")
        assert b.process.poll() is None, "exited with %s" % b.process.returncode
        create_topic(b.bootstrap, "quiet")
        produce_confluent(b.bootstrap, "quiet", values(100, "q"))
        assert read_values(b.bootstrap, "quiet", 100) == [v for _, v, _ in values(100, "q")]
        assert b.process.poll() is None
    finally:
        b.process.terminate()
        assert b.process.wait(timeout=30) == 0
        b.process = None


def _listening(port):
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False
