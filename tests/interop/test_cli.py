"""The `krabka` operator commands against the real broker, each effect
checked through a third-party client (confluent-kafka, kafka-python), not
only through the CLI's own output; the metrics port's /healthz, /readyz and
/metrics; the Grafana dashboard's metrics; JSON logs."""

import json
import os
import re
import socket
import struct
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from conftest import KRABKA_BIN, free_port
from helpers import admin, consume_confluent, create_topic, make_records, produce_confluent, wait_for

DASHBOARD = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "grafana-dashboard.json")


def cli(broker, *args, check=True, stdin=None, timeout=120, fmt=None, bootstrap=None):
    """Runs `krabka ARGS --bootstrap B`; returns the CompletedProcess."""
    cmd = [KRABKA_BIN, *args, "--bootstrap", bootstrap or broker.bootstrap]
    if fmt:
        cmd += ["--format", fmt]
    result = subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError("%s exited %d:\nstdout: %s\nstderr: %s" % (
            " ".join(cmd), result.returncode, result.stdout.decode(errors="replace")[-4000:],
            result.stderr.decode(errors="replace")[-4000:]))
    return result


def cli_json(broker, *args, **kwargs):
    return json.loads(cli(broker, *args, fmt="json", **kwargs).stdout)


def topic_configs(bootstrap, topic):
    resource = ConfigResource("topic", topic)
    client = admin(bootstrap)  # alive until the future resolves
    got = client.describe_configs([resource])[resource].result(timeout=30)
    return {name: entry.value for name, entry in got.items()}


def partition_count(bootstrap, topic):
    # All topics: asking for one by name may auto-create it.
    client = admin(bootstrap)
    t = client.list_topics(timeout=10).topics.get(topic)
    return None if t is None or t.error is not None else len(t.partitions)


def committed(bootstrap, group, topic, partitions):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(topic, p) for p in partitions], timeout=20)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


def consume_in_group(bootstrap, group, topic, count, timeout=60):
    """A confluent group member that reads `count` records, commits them and leaves."""
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
    })
    c.subscribe([topic])
    got = []
    deadline = time.time() + timeout
    try:
        while len(got) < count and time.time() < deadline:
            for m in c.consume(num_messages=count - len(got), timeout=1.0):
                assert m.error() is None, m.error()
                got.append(m)
        assert len(got) == count, "read %d of %d records" % (len(got), count)
        c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def test_topic_create_describe_alter_add_partitions_delete(broker):
    out = cli_json(broker, "topic", "create", "orders", "--partitions", "3",
                   "--config", "retention.ms=3600000", "--config", "cleanup.policy=compact")
    assert out["topic"] == "orders" and out["partitions"] == 3
    # The effect, seen by confluent-kafka.
    assert partition_count(broker.bootstrap, "orders") == 3
    configs = topic_configs(broker.bootstrap, "orders")
    assert configs["retention.ms"] == "3600000"
    assert configs["cleanup.policy"] == "compact"

    # Keyed: the topic is compacted.
    produce_confluent(broker.bootstrap, "orders", [(b"k%d" % i, b"v", []) for i in range(50)], partition=1)
    described = cli_json(broker, "topic", "describe", "orders")
    assert len(described) == 1
    d = described[0]
    assert d["partition_count"] == 3 and d["tiered"] is False and d["diskless"] is False
    by_p = {p["partition"]: p for p in d["partitions"]}
    assert by_p[1]["log_end_offset"] == 50 and by_p[0]["log_end_offset"] == 0
    assert by_p[1]["leader"] == 1 and by_p[1]["replicas"] == [1]
    assert by_p[1]["size_bytes"] > 0 and by_p[0]["size_bytes"] == 0
    sources = {c["name"]: c["source"] for c in d["configs"]}
    assert sources["retention.ms"] == "DYNAMIC_TOPIC_CONFIG"
    assert sources["segment.bytes"] == "DEFAULT_CONFIG"
    text = cli(broker, "topic", "describe", "orders").stdout.decode()
    assert "retention.ms" in text and "DYNAMIC_TOPIC_CONFIG" in text

    listed = cli_json(broker, "topic", "list")
    assert {"name": "orders", "partitions": 3} .items() <= next(t for t in listed if t["name"] == "orders").items()

    cli(broker, "topic", "alter-config", "orders", "--set", "retention.ms=7200000", "--delete", "cleanup.policy")
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        result = kp.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, "orders")], config_filter="all")
        entries = {k: v["value"] for k, v in result["topic"]["orders"].items()}
    finally:
        kp.close()
    assert entries["retention.ms"] == "7200000"
    assert entries["cleanup.policy"] == "delete"

    cli(broker, "topic", "add-partitions", "orders", "--partitions", "5")
    assert partition_count(broker.bootstrap, "orders") == 5

    cli(broker, "topic", "delete", "orders")
    wait_for(lambda: partition_count(broker.bootstrap, "orders") is None, timeout=30, what="topic gone")


def test_exit_codes(broker):
    create_topic(broker.bootstrap, "exists")
    # 3: not found.
    assert cli(broker, "topic", "describe", "missing", check=False).returncode == 3
    assert cli(broker, "topic", "delete", "missing", check=False).returncode == 3
    assert cli(broker, "topic", "delete", "missing", "--if-exists", check=False).returncode == 0
    assert cli(broker, "group", "describe", "no-such-group", check=False).returncode == 3
    assert cli(broker, "consume", "missing", "-e", check=False).returncode == 3
    assert cli(broker, "txn", "describe", "no-such-txn", check=False).returncode == 3
    # 1: the broker refused.
    dup = cli(broker, "topic", "create", "exists", check=False)
    assert dup.returncode == 1 and b"TOPIC_ALREADY_EXISTS" in dup.stderr
    assert cli(broker, "topic", "create", "exists", "--if-not-exists", check=False).returncode == 0
    bad = cli(broker, "topic", "alter-config", "exists", "--set", "retention.ms=soon", check=False)
    assert bad.returncode == 1 and b"INVALID_CONFIG" in bad.stderr
    # 2: usage.
    assert cli(broker, "topic", "frobnicate", check=False).returncode == 2
    assert cli(broker, "group", "reset-offsets", "g", "--topic", "exists", check=False).returncode == 2
    assert cli(broker, "topic", "alter-config", "exists", check=False).returncode == 2
    # 4: unreachable.
    down = cli(broker, "topic", "list", "--timeout", "3", check=False,
               bootstrap="127.0.0.1:%d" % free_port())
    assert down.returncode == 4
    # JSON on stdout parses, errors stay on stderr.
    assert isinstance(cli_json(broker, "cluster", "info"), dict)


def test_group_lag_reset_offsets_and_delete(broker):
    topic, group = "lagged", "billing"
    create_topic(broker.bootstrap, topic, partitions=2)
    produce_confluent(broker.bootstrap, topic, make_records(60, "a"), partition=0)
    produce_confluent(broker.bootstrap, topic, make_records(40, "b"), partition=1)
    consume_in_group(broker.bootstrap, group, topic, 30)
    before = committed(broker.bootstrap, group, topic, [0, 1])
    consumed = sum(max(o, 0) for o in before.values())
    assert consumed == 30

    [d] = cli_json(broker, "group", "describe", group)
    assert d["state"] == "Empty"
    ends = {0: 60, 1: 40}
    # Kafka shows no lag for a partition without a committed offset.
    assert d["total_lag"] == sum(ends[p] - o for p, o in before.items() if o >= 0)
    rows = {p["partition"]: p for p in d["partitions"]}
    # Kafka lists the partitions a group has committed for (or owns).
    assert set(rows) == {p for p, o in before.items() if o >= 0}
    for p, row in rows.items():
        assert row["log_end_offset"] == ends[p]
        assert row["committed_offset"] == before[p]
        assert row["lag"] == ends[p] - before[p]
    assert [g for g in cli_json(broker, "group", "list") if g["group"] == group]

    # Dry run (the default): the plan, and nothing committed.
    plan = cli_json(broker, "group", "reset-offsets", group, "--topic", topic, "--to-earliest")
    assert plan["executed"] is False
    assert {(o["partition"], o["new_offset"]) for o in plan["offsets"]} == {(0, 0), (1, 0)}
    assert committed(broker.bootstrap, group, topic, [0, 1]) == before
    text = cli(broker, "group", "reset-offsets", group, "--topic", topic, "--to-earliest").stdout
    assert b"Dry run" in text

    # --execute moves the offsets a new member of the group starts from.
    cli(broker, "group", "reset-offsets", group, "--topic", topic + ":0", "--to-offset", "10", "--execute")
    cli(broker, "group", "reset-offsets", group, "--topic", topic + ":1", "--to-latest", "--execute")
    assert committed(broker.bootstrap, group, topic, [0, 1]) == {0: 10, 1: 40}
    got = consume_in_group(broker.bootstrap, group, topic, 50)
    assert sorted((m.partition(), m.offset()) for m in got) == [(0, o) for o in range(10, 60)]

    cli(broker, "group", "reset-offsets", group, "--all-topics", "--shift-by", "-5", "--execute")
    assert committed(broker.bootstrap, group, topic, [0, 1]) == {0: 55, 1: 35}
    # A datetime before every record: the log start.
    cli(broker, "group", "reset-offsets", group, "--topic", topic, "--to-datetime", "2000-01-01T00:00:00", "--execute")
    assert committed(broker.bootstrap, group, topic, [0, 1]) == {0: 0, 1: 0}
    cli(broker, "group", "reset-offsets", group, "--topic", topic, "--by-duration", "PT1H", "--execute")
    assert committed(broker.bootstrap, group, topic, [0, 1]) == {0: 0, 1: 0}

    # A group with an active member refuses --execute, as Kafka does.
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "session.timeout.ms": 10000})
    c.subscribe([topic])
    try:
        wait_for(lambda: c.poll(0.5) is not None or c.assignment(), timeout=30, what="a member")
        busy = cli(broker, "group", "reset-offsets", group, "--topic", topic, "--to-latest", "--execute", check=False)
        assert busy.returncode == 1 and b"inactive" in busy.stderr
        described = cli_json(broker, "group", "describe", group)[0]
        assert described["state"] == "Stable" and len(described["members"]) == 1
        assert sorted(tuple(a) for a in described["members"][0]["assignment"]) == [(topic, 0), (topic, 1)]
    finally:
        c.close()

    cli(broker, "group", "delete-offsets", group, "--topic", topic + ":1")
    assert committed(broker.bootstrap, group, topic, [0, 1])[1] < 0
    cli(broker, "group", "delete", group)
    assert committed(broker.bootstrap, group, topic, [0, 1]) == {0: -1001, 1: -1001}
    assert cli(broker, "group", "describe", group, check=False).returncode == 3


def test_produce_consume_round_trip_with_keys_and_headers(broker):
    topic = "roundtrip"
    create_topic(broker.bootstrap, topic, partitions=2)
    lines = b"".join(b"key-%d:value %d with: colon\n" % (i, i) for i in range(200)) + b"no-key-line\n"
    out = json.loads(cli(broker, "produce", topic, "-K", ":", "--header", "source=cli",
                         "--header", "n=1", "--partition", "1", stdin=lines, fmt="json").stdout)
    assert out["records"] == 201
    # What a third-party client reads.
    got = consume_confluent(broker.bootstrap, topic, 201, partition=1)
    assert [(m.key(), m.value()) for m in got[:2]] == [(b"key-0", b"value 0 with: colon"), (b"key-1", b"value 1 with: colon")]
    assert got[-1].key() is None and got[-1].value() == b"no-key-line"
    assert got[5].headers() == [("source", b"cli"), ("n", b"1")]

    # Records written by confluent-kafka, read back by the CLI.
    # Printable values (make_records' binary tails would hold the separators).
    records = [(None if i % 11 == 0 else b"k%d" % i, None if i % 7 == 0 else b"v%d" % i,
                [("h", b"%d" % i)] if i % 3 == 0 else []) for i in range(100)]
    produce_confluent(broker.bootstrap, topic, records, partition=0)
    text = cli(broker, "consume", topic, "-p", "0", "-e",
               "-f", "%p:%o|%k|%s|%h|%K|%S\\n").stdout
    lines_out = text.split(b"\n")[:-1]
    assert len(lines_out) == 100
    for i, line in enumerate(lines_out):
        key, value, headers = records[i]
        p_o, k, rest = line.split(b"|", 2)
        assert p_o == b"0:%d" % i
        assert k == (key or b"")
        want_headers = b",".join(hk.encode() + b"=" + hv for hk, hv in headers)
        assert rest == (value or b"") + b"|" + want_headers + b"|%d|%d" % (
            len(key) if key is not None else -1, len(value) if value is not None else -1)

    # JSON lines, a count, and the last N.
    js = cli(broker, "consume", topic, "-p", "1", "-e", "-c", "3", fmt="json").stdout.decode().splitlines()
    assert len(js) == 3
    first = json.loads(js[0])
    assert first["key"] == "key-0" and first["offset"] == 0 and first["partition"] == 1
    assert {"key": "source", "value": "cli"} in first["headers"]
    assert first["timestamp_type"] == "CreateTime"
    tail = cli(broker, "consume", topic, "-p", "1", "-o", "-2", "-e", "-f", "%o\\n").stdout
    assert tail == b"199\n200\n"

    # As a group member: what was printed is committed.
    grouped = cli(broker, "consume", topic, "-g", "cli-readers", "-e").stdout
    assert grouped.count(b"\n") == 301
    assert committed(broker.bootstrap, "cli-readers", topic, [0, 1]) == {0: 100, 1: 201}
    # A second run of the group reads nothing new.
    again = cli(broker, "consume", topic, "-g", "cli-readers", "-e").stdout
    assert again == b""


def test_read_committed_and_transactions(broker):
    topic = "txns"
    create_topic(broker.bootstrap, topic)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "cli-writer"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, value=b"open-%d" % i, partition=0)
    p.flush(30)
    listed = cli_json(broker, "txn", "list")
    mine = [t for t in listed if t["transactional_id"] == "cli-writer"]
    assert mine and mine[0]["state"] == "Ongoing"
    [d] = cli_json(broker, "txn", "describe", "cli-writer")
    assert d["state"] == "Ongoing" and {"topic": topic, "partition": 0} in d["partitions"]
    producers = cli_json(broker, "txn", "describe-producers", "--topic", topic)
    assert producers[0]["producer_id"] == d["producer_id"]
    assert producers[0]["current_transaction_start_offset"] == 0
    # read_committed sees nothing yet, read_uncommitted sees the records.
    assert cli(broker, "consume", topic, "-e", "--read-committed").stdout == b""
    assert cli(broker, "consume", topic, "-e").stdout.count(b"\n") == 5
    p.commit_transaction(30)
    got = cli(broker, "consume", topic, "-e", "--read-committed", "-f", "%s\\n").stdout
    assert got == b"".join(b"open-%d\n" % i for i in range(5))
    assert cli_json(broker, "txn", "describe", "cli-writer")[0]["state"] == "CompleteCommit"


def test_cluster_info_configs_and_log_dirs(broker):
    create_topic(broker.bootstrap, "sized")
    produce_confluent(broker.bootstrap, "sized", make_records(100, "s"))
    info = cli_json(broker, "cluster", "info")
    md = admin(broker.bootstrap).list_topics(timeout=10)
    assert info["cluster_id"] == md.cluster_id
    assert info["controller"] == 1
    assert info["brokers"] == [{"id": 1, "host": "127.0.0.1", "port": broker.port, "rack": None}]

    dirs = cli_json(broker, "log-dirs", "--topic", "sized")
    assert len(dirs) == 1 and os.path.samefile(dirs[0]["path"], broker.data_dir)
    [part] = dirs[0]["partitions"]
    size = os.path.getsize(os.path.join(broker.data_dir, "sized-0", "00000000000000000000.log"))
    assert part["topic"] == "sized" and part["size_bytes"] == size

    cli(broker, "config", "alter", "--topic", "sized", "--set", "max.message.bytes=2000000")
    assert topic_configs(broker.bootstrap, "sized")["max.message.bytes"] == "2000000"
    described = {c["name"]: c for c in cli_json(broker, "config", "describe", "--topic", "sized")}
    assert described["max.message.bytes"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    cli(broker, "config", "alter", "--broker", "1", "--set", "log.retention.ms=86400000")
    broker_cfg = {c["name"]: c for c in cli_json(broker, "config", "describe", "--broker", "1")}
    assert broker_cfg["log.retention.ms"]["value"] == "86400000"
    assert broker_cfg["log.retention.ms"]["source"] == "DYNAMIC_BROKER_CONFIG"
    # The topic now inherits it.
    assert topic_configs(broker.bootstrap, "sized")["retention.ms"] == "86400000"

    reference = json.loads(subprocess.run([KRABKA_BIN, "config", "reference", "--format", "json"],
                                          capture_output=True, check=True).stdout)
    by = {(e["name"], e["scope"]): e for e in reference}
    assert by[("log.segment.bytes", "broker")]["type"] == "INT"
    assert by[("log.segment.bytes", "broker")]["dynamic"] is True
    assert by[("retention.ms", "topic")]["default"] == "604800000"


def remote_log_files(broker, topic):
    root = os.path.join(broker.data_dir, "krabka-remote-tier")
    out = []
    for d in os.listdir(root) if os.path.isdir(root) else []:
        if d.startswith(topic + "-0-"):
            out += [os.path.join(root, d, f) for f in os.listdir(os.path.join(root, d)) if f.endswith(".log")]
    return out


def local_log_files(broker, topic):
    d = os.path.join(broker.data_dir, topic + "-0")
    return [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".log")]


def test_tier_status_after_segments_moved(broker_factory):
    broker = broker_factory({
        "remote.log.storage.system.enable": "true",
        "remote.log.manager.task.interval.ms": "300",
    })
    topic = "tiered-cli"
    cli(broker, "topic", "create", topic, "--config", "segment.bytes=65536",
        "--config", "remote.storage.enable=true", "--config", "local.retention.bytes=131072")
    produce_confluent(broker.bootstrap, topic, make_records(20_000, "t"), extra={"batch.size": 16384})
    wait_for(lambda: len(remote_log_files(broker, topic)) >= 10 and len(local_log_files(broker, topic)) <= 4,
             timeout=90, what="segments to move to the tier")

    def settled():
        [row] = cli_json(broker, "tier", "status", "--topic", topic)
        files = remote_log_files(broker, topic)
        local = local_log_files(broker, topic)
        local_start = min(int(os.path.basename(f).split(".")[0]) for f in local)
        ok = (row["remote_segments"] == len(files)
              and row["remote_size_bytes"] == sum(os.path.getsize(f) for f in files)
              and row["local_size_bytes"] == sum(os.path.getsize(f) for f in local)
              and row["local_log_start_offset"] == local_start)
        return row if ok else None

    row = wait_for(settled, timeout=60, what="tier status to match the tier and the disk")
    assert row["log_start_offset"] == 0
    assert row["log_end_offset"] == 20_000
    assert row["local_log_start_offset"] > 0
    assert row["local_log_start_offset"] - 1 <= row["highest_tiered_offset"] < row["log_end_offset"]
    assert row["copy_lag_offsets"] == row["log_end_offset"] - row["highest_tiered_offset"] - 1
    assert row["last_copy_ms"] > 0 and row["last_copy"].endswith("Z")
    assert row["copies_in_progress"] == 0
    text = cli(broker, "tier", "status").stdout.decode()
    assert topic in text and "COPY-LAG" in text
    [described] = cli_json(broker, "topic", "describe", topic)
    assert described["tiered"] is True
    assert described["partitions"][0]["local_log_start_offset"] == row["local_log_start_offset"]


def http_get(port, path):
    """(status, body) of GET path on the metrics port; None when nothing listens yet."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, ConnectionError, socket.timeout):
        return None


def test_readyz_not_ready_during_recovery_then_ready(broker_factory):
    port = free_port()
    broker = broker_factory({"krabka.metrics.listener": "127.0.0.1:%d" % port, "num.partitions": "1"})
    # The coordinators load just after the listener binds.
    status, body = wait_for(lambda: (lambda g: g if g and g[0] == 200 else None)(http_get(port, "/readyz")),
                            timeout=30, what="ready")
    assert json.loads(body) == {"ready": True, "checks": json.loads(body)["checks"], "not_ready": []}
    assert http_get(port, "/healthz")[0] == 200
    # A large log in active segments, then kill -9: the next start recovers
    # (re-reads and checks) every byte after the recovery point.
    big = b"x" * 4000
    for t in range(8):
        create_topic(broker.bootstrap, "big-%d" % t)
        produce_confluent(broker.bootstrap, "big-%d" % t, [(None, big, [])] * 12_500,
                          extra={"linger.ms": 50, "batch.size": 1 << 20, "compression.type": "none"})
    broker.kill9()

    broker.log_file = open(broker.log_path, "ab")
    broker.process = subprocess.Popen(broker.command(), stdout=broker.log_file, stderr=subprocess.STDOUT)
    seen = []
    deadline = time.time() + 300
    while time.time() < deadline:
        got = http_get(port, "/readyz")
        if got is not None:
            seen.append(got)
            if got[0] == 200:
                break
        time.sleep(0.02)
    assert seen and seen[-1][0] == 200, "never ready: %s\n%s" % (seen[-1:], broker.log())
    not_ready = [json.loads(b) for s, b in seen if s == 503]
    assert not_ready, "no /readyz answer before the broker was ready (%d answers)" % len(seen)
    first = not_ready[0]
    assert first["ready"] is False and "logs" in first["not_ready"]
    assert {c["name"] for c in first["checks"]} >= {"logs", "listener", "coordinators", "shutdown"}
    assert "recovery" in next(c["detail"] for c in first["checks"] if c["name"] == "logs")
    # Alive the whole time.
    assert http_get(port, "/healthz")[0] == 200
    got = consume_confluent(broker.bootstrap, "big-7", 12_500, timeout=120)
    assert len(got) == 12_500


def scrape_families(port):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5).read().decode()
    return text, set(re.findall(r"^# TYPE (\S+) ", text, re.M))


def send_garbage(bootstrap):
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(struct.pack(">i", 8) + b"\xff" * 8)
        try:
            s.recv(16)
        except OSError:
            pass


def test_dashboard_metrics_exist_and_deleted_topics_leave_no_series(broker_factory):
    port = free_port()
    broker = broker_factory({
        "krabka.metrics.listener": "127.0.0.1:%d" % port,
        "remote.log.storage.system.enable": "true",
        "remote.log.manager.task.interval.ms": "300",
    })
    topic = "watched"
    create_topic(broker.bootstrap, topic, config={
        "segment.bytes": "65536", "remote.storage.enable": "true",
        "local.retention.bytes": "131072", "flush.messages": "1000",
    })
    produce_confluent(broker.bootstrap, topic, make_records(20_000, "w"), extra={"batch.size": 16384})
    wait_for(lambda: len(remote_log_files(broker, topic)) >= 10 and len(local_log_files(broker, topic)) <= 4,
             timeout=90, what="copies and local deletion")
    consume_in_group(broker.bootstrap, "watchers", topic, 1000)  # reads from the tier, commits
    send_garbage(broker.bootstrap)
    # A long poll at the log end parks a fetch.
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x", "fetch.wait.max.ms": 2000})
    c.assign([TopicPartition(topic, 0, 20_000)])
    c.poll(3)
    c.close()

    dashboard = json.load(open(DASHBOARD))
    exprs = []

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("expr", "definition") and isinstance(v, str):
                    exprs.append(v)
                elif k == "query" and isinstance(v, dict) and isinstance(v.get("query"), str):
                    exprs.append(v["query"])
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(dashboard)
    wanted = set()
    for e in exprs:
        for name in re.findall(r"\b(krabka_[a-z0-9_]+)", e):
            wanted.add(re.sub(r"_(bucket|sum|count)$", "", name)
                       if name.endswith(("_bucket", "_sum", "_count")) and "duration" in name else name)
    assert len(wanted) >= 25, wanted

    def all_there():
        _, families = scrape_families(port)
        missing = wanted - families
        return None if missing else families

    try:
        wait_for(all_there, timeout=60, what="every dashboard metric")
    except AssertionError:
        _, families = scrape_families(port)
        raise AssertionError("the dashboard queries metrics the broker does not export: %s" % sorted(wanted - families))
    text, _ = scrape_families(port)
    assert re.search(r'krabka_consumer_group_lag\{group="watchers",topic="%s",partition="0"\} 19000' % topic, text)
    assert re.search(r'krabka_bytes_out_total\{topic="%s"\} [1-9]' % topic, text)
    assert 'krabka_request_duration_seconds_bucket{api="Produce",le="+Inf"}' in text

    # Deleting a topic removes its series.
    create_topic(broker.bootstrap, "doomed")
    produce_confluent(broker.bootstrap, "doomed", make_records(10, "d"))
    wait_for(lambda: 'topic="doomed"' in scrape_families(port)[0], timeout=30, what="doomed's series")
    cli(broker, "topic", "delete", "doomed")
    wait_for(lambda: 'topic="doomed"' not in scrape_families(port)[0], timeout=30,
             what="doomed's series to disappear")


def test_json_log_format(broker_factory):
    broker = broker_factory({"krabka.log.format": "json"})
    create_topic(broker.bootstrap, "logged")
    lines = [l for l in broker.log().splitlines() if l.strip()]
    assert lines
    parsed = [json.loads(l) for l in lines]
    started = [p for p in parsed if p.get("message") == "krabka broker started"]
    assert started and started[0]["level"] == "INFO" and "cluster_id" in started[0]


# --- Security: --command-config, acl, user, and cluster info's leases -------

from confluent_kafka import KafkaError, KafkaException  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from security_helpers import SCRAM_PASSWORD, SecureBroker, generate_certs  # noqa: E402

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def cli_certs(tmp_path_factory):
    return generate_certs(
        tmp_path_factory.mktemp("cli-certs"), "--client", "alice",
        "--key-password", "key-pw", "--pkcs12-password", "store-pw",
    )


def properties(tmp_path, name, **settings):
    """Writes a command-config file; keys use '_' for '.'."""
    path = os.path.join(str(tmp_path), name + ".properties")
    with open(path, "w") as f:
        f.write("# written by test_cli.py\n")
        for key, value in settings.items():
            f.write("%s=%s\n" % (key.replace("_", "."), value))
    return path


def scram_config(tmp_path, certs, user, password, mechanism="SCRAM-SHA-256", jaas=True):
    settings = {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": mechanism,
        "ssl_truststore_type": "PEM",
        "ssl_truststore_location": os.path.join(certs, "ca.pem"),
    }
    if jaas:
        settings["sasl_jaas_config"] = (
            'org.apache.kafka.common.security.scram.ScramLoginModule required '
            'username="%s" password="%s";' % (user, password))
    else:
        settings["sasl_username"] = user
        settings["sasl_password"] = password
    return properties(tmp_path, "%s-%s" % (user, password), **settings)


def secure_cli(secure, config, *args, check=True, stdin=None, fmt=None, listener="SASL_SSL"):
    return cli(secure.broker, *args, "--command-config", config, check=check, stdin=stdin, fmt=fmt,
               bootstrap=secure.bootstrap(listener), timeout=60)


def read_as(secure, user, password, topic, group, count, mechanism="SCRAM-SHA-512", timeout=40):
    """Subscribes as `user`; returns (values, error codes)."""
    conf = secure.client("SASL_SSL", mechanism, user, password)
    consumer = Consumer(dict(conf, **{
        "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False,
    }))
    consumer.subscribe([topic])
    values, errors = [], []
    deadline = time.time() + timeout
    try:
        while len(values) < count and time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                errors.append(msg.error().code())
                if msg.error().code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                          KafkaError.GROUP_AUTHORIZATION_FAILED):
                    break
                continue
            values.append(msg.value())
    finally:
        consumer.close()
    return values, errors


def test_scram_users_and_acls_over_sasl_ssl(broker_factory, cli_certs, tmp_path):
    """Over a SASL_SSL listener with SCRAM and an authorizer: the admin's
    --command-config (JAAS), users created by `user set-password` who then
    log in with confluent-kafka, ACLs created/listed/deleted by `acl` and
    enforced on real consumers, `user delete` ending a login, and the exit
    codes of a wrong password and a bad config."""
    secure = SecureBroker(broker_factory, cli_certs, tmp_path, {
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "false",
    }).start()
    admin_cfg = scram_config(tmp_path, cli_certs, "admin", SCRAM_PASSWORD["admin"])
    topic = "cli-secure"
    secure_cli(secure, admin_cfg, "topic", "create", topic, "--partitions", "1")

    # Users: a password from --password, and one from stdin.
    out = json.loads(secure_cli(secure, admin_cfg, "user", "set-password", "carol", "--password", "carol-pw",
                                "--mechanism", "SCRAM-SHA-512", fmt="json").stdout)
    assert out == {"user": "carol", "result": "set", "mechanisms": ["SCRAM-SHA-512"]}
    secure_cli(secure, admin_cfg, "user", "set-password", "dave", "--iterations", "8192", stdin=b"dave-pw\n")
    users = json.loads(secure_cli(secure, admin_cfg, "user", "list", fmt="json").stdout)
    assert {"user": "carol", "mechanism": "SCRAM-SHA-512", "iterations": 4096} in users, users
    assert {"user": "dave", "mechanism": "SCRAM-SHA-256", "iterations": 8192} in users, users
    assert secure_cli(secure, admin_cfg, "user", "list", "nobody", check=False).returncode == 3

    # carol may write once an ACL says so; she logs in with the password set above.
    created = json.loads(secure_cli(
        secure, admin_cfg, "acl", "create", "--allow-principal", "User:carol",
        "--operation", "Write", "--operation", "Describe", "--topic", topic, fmt="json").stdout)
    assert len(created) == 2
    producer = Producer(dict(secure.client("SASL_SSL", "SCRAM-SHA-512", "carol", "carol-pw"),
                             **{"linger.ms": 0, "message.timeout.ms": 20000}))
    errors = []
    for i in range(3):
        producer.produce(topic, value=b"secret-%d" % i, on_delivery=lambda e, m: errors.append(e))
    assert producer.flush(30) == 0
    assert errors == [None, None, None], errors

    # Reading: carol gets Read on the topic, both get the group; dave cannot read.
    secure_cli(secure, admin_cfg, "acl", "create", "--allow-principal", "User:carol", "--operation", "Read",
               "--topic", topic)
    secure_cli(secure, admin_cfg, "acl", "create", "--allow-principal", "User:carol",
               "--allow-principal", "User:dave", "--operation", "read", "--group", "readers-",
               "--resource-pattern-type", "prefixed")
    values, errs = read_as(secure, "carol", "carol-pw", topic, "readers-carol", 3)
    assert values == [b"secret-0", b"secret-1", b"secret-2"], errs
    values, errs = read_as(secure, "dave", "dave-pw", topic, "readers-dave", 1, mechanism="SCRAM-SHA-256",
                           timeout=20)
    assert values == [] and KafkaError.TOPIC_AUTHORIZATION_FAILED in errs, errs

    listed = json.loads(secure_cli(secure, admin_cfg, "acl", "list", fmt="json").stdout)
    expected = [
        {"resource_type": "GROUP", "name": "readers-", "pattern_type": "PREFIXED", "principal": "User:carol",
         "host": "*", "operation": "READ", "permission": "ALLOW"},
        {"resource_type": "GROUP", "name": "readers-", "pattern_type": "PREFIXED", "principal": "User:dave",
         "host": "*", "operation": "READ", "permission": "ALLOW"},
    ] + [
        {"resource_type": "TOPIC", "name": topic, "pattern_type": "LITERAL", "principal": "User:carol",
         "host": "*", "operation": op, "permission": "ALLOW"} for op in ("DESCRIBE", "READ", "WRITE")
    ]
    assert sorted(listed, key=json.dumps) == sorted(expected, key=json.dumps), listed
    only_topic = json.loads(secure_cli(secure, admin_cfg, "acl", "list", "--topic", topic, fmt="json").stdout)
    assert len(only_topic) == 3
    text = secure_cli(secure, admin_cfg, "acl", "list", "--group", "readers-x",
                      "--resource-pattern-type", "match").stdout.decode()
    assert text.count("User:") == 2 and "PREFIXED" in text, text

    # Deleting carol's Read takes her reading away.
    deleted = json.loads(secure_cli(secure, admin_cfg, "acl", "delete", "--allow-principal", "User:carol",
                                    "--operation", "Read", "--topic", topic, fmt="json").stdout)
    assert deleted == [dict(expected[3])], deleted
    values, errs = read_as(secure, "carol", "carol-pw", topic, "readers-carol2", 1, timeout=20)
    assert values == [] and KafkaError.TOPIC_AUTHORIZATION_FAILED in errs, errs

    # A deleted user can no longer log in, with the CLI or confluent-kafka.
    out = json.loads(secure_cli(secure, admin_cfg, "user", "delete", "carol", fmt="json").stdout)
    assert out["mechanisms"] == ["SCRAM-SHA-512"]
    carol_cfg = scram_config(tmp_path, cli_certs, "carol", "carol-pw", "SCRAM-SHA-512", jaas=False)
    refused = secure_cli(secure, carol_cfg, "topic", "list", check=False)
    assert refused.returncode == 1, refused.stderr
    assert b"SASL_AUTHENTICATION_FAILED" in refused.stderr, refused.stderr
    client = AdminClient(secure.client("SASL_SSL", "SCRAM-SHA-512", "carol", "carol-pw"))
    with pytest.raises(KafkaException):
        client.list_topics(timeout=10)
    assert secure_cli(secure, admin_cfg, "user", "delete", "carol", "--mechanism", "SCRAM-SHA-512",
                      check=False).returncode == 3

    # A wrong password: the broker-error exit code and the broker's reason.
    wrong = scram_config(tmp_path, cli_certs, "admin", "not-the-password")
    result = secure_cli(secure, wrong, "topic", "list", check=False)
    assert result.returncode == 1, result.stderr
    assert b"SASL_AUTHENTICATION_FAILED" in result.stderr, result.stderr
    # PLAIN over SASL_PLAINTEXT, with the JAAS login module.
    plain = properties(
        tmp_path, "plain", security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
        sasl_jaas_config='org.apache.kafka.common.security.plain.PlainLoginModule required '
                         'username="admin" password="admin-secret";')
    listed = json.loads(secure_cli(secure, plain, "topic", "list", fmt="json", listener="SASL_PLAINTEXT").stdout)
    assert topic in json.dumps(listed), listed
    # An unknown property is a usage error that names it.
    bad = properties(tmp_path, "bad", security_protocol="SSL", ssl_keystore_password="x")
    result = secure_cli(secure, bad, "topic", "list", check=False, listener="SSL")
    assert result.returncode == 2 and b"ssl.keystore.password" in result.stderr, result.stderr


def test_mtls_client_certificate_through_command_config(broker_factory, cli_certs, tmp_path):
    """A client certificate from --command-config, as Kafka's PEM keystore
    and as librdkafka's certificate/key pair: `krabka produce` over the
    mTLS listener stores what confluent-kafka then reads over PLAINTEXT;
    without a certificate the handshake is refused."""
    secure = SecureBroker(broker_factory, cli_certs, tmp_path).start()
    keystore = os.path.join(str(tmp_path), "alice-keystore.pem")
    with open(keystore, "w") as f:
        f.write(open(os.path.join(cli_certs, "alice.key")).read())
        f.write(open(os.path.join(cli_certs, "alice.pem")).read())
    kafka_style = properties(
        tmp_path, "mtls-kafka", security_protocol="SSL",
        ssl_truststore_type="PEM", ssl_truststore_location=os.path.join(cli_certs, "ca.pem"),
        ssl_keystore_type="PEM", ssl_keystore_location=keystore)
    rdkafka_style = properties(
        tmp_path, "mtls-rdkafka", security_protocol="SSL",
        ssl_ca_location=os.path.join(cli_certs, "ca.pem"),
        ssl_certificate_location=os.path.join(cli_certs, "alice.pem"),
        ssl_key_location=os.path.join(cli_certs, "alice.key"))
    with open(rdkafka_style, "a") as f:
        f.write("ssl.endpoint.identification.algorithm=\n")
    topic = "cli-mtls"
    secure_cli(secure, kafka_style, "topic", "create", topic, "--partitions", "1", listener="MTLS")
    secure_cli(secure, kafka_style, "produce", topic, stdin=b"one\ntwo\n", listener="MTLS")
    secure_cli(secure, rdkafka_style, "produce", topic, stdin=b"three\n", listener="MTLS")
    got = consume_confluent(secure.broker.bootstrap, topic, 3)
    assert [m.value() for m in got] == [b"one", b"two", b"three"]

    no_cert = properties(tmp_path, "tls-only", security_protocol="SSL",
                         ssl_ca_location=os.path.join(cli_certs, "ca.pem"))
    assert secure_cli(secure, no_cert, "topic", "list", listener="SSL").returncode == 0
    refused = secure_cli(secure, no_cert, "topic", "list", check=False, listener="MTLS")
    assert refused.returncode == 4, refused.stderr
    # A CA that did not sign the broker's certificate fails the handshake too.
    other_ca = generate_certs(tmp_path / "other-ca")
    untrusted = properties(tmp_path, "untrusted", security_protocol="SSL",
                           ssl_ca_location=os.path.join(other_ca, "ca.pem"))
    result = secure_cli(secure, untrusted, "topic", "list", check=False, listener="SSL")
    assert result.returncode != 0 and b"TLS handshake failed" in result.stderr, result.stderr


def test_cluster_info_reads_leases_from_the_database(cluster_db, cluster_factory):
    """In cluster mode `cluster info --database-url` adds both brokers'
    leases and the coordinator shard owners from PostgreSQL; without it the
    output says they are not shown and why."""
    brokers = [cluster_factory(cluster_db, node) for node in (1, 2)]

    def registered():
        info = json.loads(subprocess.run(
            [KRABKA_BIN, "cluster", "info", "--bootstrap", brokers[0].bootstrap, "--format", "json",
             "--database-url", cluster_db],
            check=True, capture_output=True, timeout=60).stdout)
        live = [b["id"] for b in info["cluster_database"]["brokers"] if b["live"]]
        return info if sorted(live) == [1, 2] and len(info["brokers"]) == 2 else None

    info = wait_for(registered, timeout=60, interval=0.5, what="both brokers' leases in the database")
    db = info["cluster_database"]
    assert db["read"] is True and db["cluster_id"] == info["cluster_id"]
    for b, broker in zip(sorted(db["brokers"], key=lambda b: b["id"]), brokers):
        assert b["lease_remaining_ms"] > 0 and b["epoch"] >= 1, b
        assert "127.0.0.1:%d" % broker.port in b["listeners"], b
    controller = [s for s in db["shards"] if s["kind"] == "controller"]
    assert len(controller) == 1 and controller[0]["owner"] in (1, 2), db["shards"]
    assert controller[0]["owner"] == info["controller"]

    env = {k: v for k, v in os.environ.items() if k != "KRABKA_DATABASE_URL"}
    text = subprocess.run(
        [KRABKA_BIN, "cluster", "info", "--bootstrap", brokers[1].bootstrap], env=dict(env, KRABKA_DATABASE_URL=cluster_db),
        check=True, capture_output=True, text=True, timeout=60).stdout
    assert "shard leases:" in text and text.count(" live ") == 2, text
    plain = subprocess.run(
        [KRABKA_BIN, "cluster", "info", "--bootstrap", brokers[1].bootstrap, "--format", "json"], env=env,
        check=True, capture_output=True, timeout=60).stdout
    assert json.loads(plain)["cluster_database"]["read"] is False
    text = subprocess.run(
        [KRABKA_BIN, "cluster", "info", "--bootstrap", brokers[1].bootstrap], env=env,
        check=True, capture_output=True, text=True, timeout=60).stdout
    assert "Leases and shard owners: not shown" in text and "--database-url" in text, text


def test_hostname_check_follows_endpoint_identification(broker_factory, tmp_path):
    """A broker certificate that names another host: refused by default
    (`ssl.endpoint.identification.algorithm=https`), accepted with the
    algorithm empty, while the chain is still checked."""
    certs = generate_certs(tmp_path / "misnamed", "--san", "broker.example",
                           "--key-password", "key-pw", "--pkcs12-password", "store-pw")
    secure = SecureBroker(broker_factory, certs, tmp_path).start()
    ca = os.path.join(certs, "ca.pem")
    checked = properties(tmp_path, "checked", security_protocol="SSL", ssl_ca_location=ca)
    result = secure_cli(secure, checked, "topic", "list", check=False, listener="SSL")
    assert result.returncode == 4, result.stderr
    assert b"TLS handshake failed" in result.stderr and b"not valid for name" in result.stderr, result.stderr
    unchecked = properties(tmp_path, "unchecked", security_protocol="SSL", ssl_ca_location=ca,
                           ssl_endpoint_identification_algorithm="")
    assert secure_cli(secure, unchecked, "topic", "list", listener="SSL").returncode == 0
