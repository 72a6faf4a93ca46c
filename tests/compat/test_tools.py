"""Kafka's own command-line tools (kafka-tools 4.x) against Krabka.

Each test runs the tools' main classes the way bin/kafka-*.sh does and
checks what they print against what the broker must hold: the topics and
partitions created, the records a console producer wrote and a console
consumer read back, committed and reset offsets, low watermarks, the log
directory sizes on disk, open transactions. In the long run the same tests
also run against Apache Kafka, which keeps the expectations honest.
"""

import json
import os
import re
import subprocess
import time
import uuid

import pytest

import api_versions
import kafka_ref
from conftest import ROOT, start_krabka

T = "org.apache.kafka.tools."
BROKERS = ["krabka", pytest.param("kafka", marks=pytest.mark.full)]
DEADLINE = 60


@pytest.fixture(params=BROKERS)
def target(request):
    """The broker under test: Krabka, and Apache Kafka in the long run."""
    return request.param, request.getfixturevalue(request.param)


def tool(broker, main, *args, input=None, check=True, timeout=120):
    """Runs a Kafka tool against ``broker``; returns (exit code, stdout, stderr)."""
    p = kafka_ref.run_tool(T + main, ["--bootstrap-server", broker.bootstrap] + list(args),
                           input=input, check=check, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def tool_sub(broker, main, sub, *args, check=True):
    """For tools whose sub-command comes before --bootstrap-server."""
    p = kafka_ref.run_tool(T + main, ["--bootstrap-server", broker.bootstrap, sub] + list(args), check=check)
    return p.returncode, p.stdout, p.stderr


def unique(name):
    return "tools-%s-%s" % (name, uuid.uuid4().hex[:8])


def until(what, probe):
    """Calls ``probe`` until it returns a true value, within DEADLINE seconds."""
    deadline = time.time() + DEADLINE
    while True:
        value = probe()
        if value:
            return value
        assert time.time() < deadline, "timed out after %ss waiting for %s" % (DEADLINE, what)
        time.sleep(0.5)


def describe_partitions(broker, topic):
    _, out, _ = tool(broker, "TopicCommand", "--describe", "--topic", topic)
    rows = re.findall(r"Partition: (\d+)\s+Leader: (\d+)\s+Replicas: (\S+)\s+Isr: (\S+)", out)
    return out, {int(p): (int(leader), replicas, isr) for p, leader, replicas, isr in rows}


def test_kafka_topics(target):
    _, broker = target
    topic = unique("topics")
    _, out, _ = tool(broker, "TopicCommand", "--create", "--topic", topic, "--partitions", "3",
                     "--config", "retention.ms=86400000")
    assert out.strip() == "Created topic %s." % topic
    _, out, _ = tool(broker, "TopicCommand", "--list")
    assert topic in out.split()

    head, parts = describe_partitions(broker, topic)
    assert "PartitionCount: 3" in head and "ReplicationFactor: 1" in head
    assert "retention.ms=86400000" in head
    assert parts == {p: (1, "1", "1") for p in range(3)}, head

    tool(broker, "TopicCommand", "--alter", "--topic", topic, "--partitions", "5")
    head, parts = describe_partitions(broker, topic)
    assert sorted(parts) == [0, 1, 2, 3, 4], head

    code, out, err = tool(broker, "TopicCommand", "--create", "--topic", topic, "--partitions", "1", check=False)
    assert code != 0 and "already exists" in out + err

    tool(broker, "TopicCommand", "--delete", "--topic", topic)
    until("topic %s to disappear from --list" % topic,
          lambda: topic not in tool(broker, "TopicCommand", "--list")[1].split())


def config_lines(out):
    """``name -> (value, synonyms text)`` from kafka-configs --describe."""
    found = {}
    for m in re.finditer(r"^\s*([a-z0-9.]+)=(.*?) sensitive=(?:true|false) synonyms=\{(.*)\}$", out, re.M):
        found[m.group(1)] = (m.group(2), m.group(3))
    return found


def test_kafka_configs(target):
    _, broker = target
    topic = unique("configs")
    tool(broker, "TopicCommand", "--create", "--topic", topic, "--partitions", "1")
    args = ["--entity-type", "topics", "--entity-name", topic]
    _, out, _ = tool(broker, "ConfigCommand", *args, "--alter",
                     "--add-config", "retention.ms=5000000,cleanup.policy=[compact,delete],max.message.bytes=200000")
    assert "Completed updating config for topic %s." % topic in out
    _, out, _ = tool(broker, "ConfigCommand", *args, "--describe")
    conf = config_lines(out)
    assert conf["retention.ms"][0] == "5000000"
    assert conf["cleanup.policy"][0] == "compact,delete"
    assert conf["max.message.bytes"][0] == "200000"
    assert "DYNAMIC_TOPIC_CONFIG:retention.ms=5000000" in conf["retention.ms"][1]

    tool(broker, "ConfigCommand", *args, "--alter", "--delete-config", "retention.ms")
    _, out, _ = tool(broker, "ConfigCommand", *args, "--describe")
    conf = config_lines(out)
    assert "retention.ms" not in conf and conf["max.message.bytes"][0] == "200000"

    code, out, err = tool(broker, "ConfigCommand", *args, "--alter", "--add-config", "retention.ms=soon", check=False)
    assert code != 0 and "retention.ms" in out + err

    _, out, _ = tool(broker, "ConfigCommand", "--entity-type", "brokers", "--entity-name", "1", "--describe", "--all")
    conf = config_lines(out)
    assert conf["num.partitions"][0] == "1"
    assert conf["log.segment.bytes"][0] == "1073741824"
    assert conf["group.initial.rebalance.delay.ms"][0] == "0"
    assert "STATIC_BROKER_CONFIG:group.initial.rebalance.delay.ms=0" in conf["group.initial.rebalance.delay.ms"][1]


def test_kafka_configs_groups(target):
    """Group configs (KIP-848's GROUP resource, type 32)."""
    _, broker = target
    group = unique("group-config")
    args = ["--entity-type", "groups", "--entity-name", group]
    code, out, err = tool(broker, "ConfigCommand", *args, "--alter",
                          "--add-config", "consumer.session.timeout.ms=50000", check=False)
    assert code == 0, out + err
    _, out, _ = tool(broker, "ConfigCommand", *args, "--describe")
    assert config_lines(out)["consumer.session.timeout.ms"][0] == "50000"


def console_produce(broker, topic, lines, *extra):
    tool(broker, "ConsoleProducer", "--topic", topic, "--reader-property", "parse.key=true",
         "--reader-property", "key.separator=:", *extra, input="".join(l + "\n" for l in lines))


def console_consume(broker, topic, count, *extra):
    _, out, err = tool(broker, "consumer.ConsoleConsumer", "--topic", topic, "--from-beginning",
                       "--max-messages", str(count), "--timeout-ms", str(DEADLINE * 1000),
                       "--formatter-property", "print.key=true", "--formatter-property", "print.partition=true",
                       "--formatter-property", "print.offset=true", *extra)
    assert "Processed a total of %d messages" % count in err, err
    return [l for l in out.splitlines() if l.startswith("Partition:")]


def test_console_producer_and_consumer(target):
    _, broker = target
    topic = unique("console")
    tool(broker, "TopicCommand", "--create", "--topic", topic, "--partitions", "1")
    lines = ["k%d:value %d ünïcødé %s" % (i, i, "x" * i) for i in range(20)]
    console_produce(broker, topic, lines[:10])
    console_produce(broker, topic, lines[10:], "--compression-codec", "zstd")
    got = console_consume(broker, topic, 20)
    want = ["Partition:0\tOffset:%d\t%s\t%s" % ((i,) + tuple(l.split(":", 1))) for i, l in enumerate(lines)]
    assert got == want


def group_rows(out):
    """(topic, partition) -> (current offset, log end offset, lag) from kafka-consumer-groups --describe."""
    rows = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 6 and f[2].isdigit():
            rows[(f[1], int(f[2]))] = tuple(f[3:6])
    return rows


def reset_rows(out):
    rows = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 4 and f[2].isdigit():
            rows[(f[1], int(f[2]))] = int(f[3])
    return rows


def test_kafka_consumer_groups_and_reset_offsets(target):
    _, broker = target
    topic, group = unique("groups"), unique("g")
    tool(broker, "TopicCommand", "--create", "--topic", topic, "--partitions", "2")
    console_produce(broker, topic, ["k%d:v%d" % (i, i) for i in range(10)])
    console_consume(broker, topic, 10, "--group", group)
    cg = "consumer.group.ConsumerGroupCommand"

    _, out, _ = tool(broker, cg, "--list")
    assert group in out.split()
    _, out, err = tool(broker, cg, "--describe", "--group", group)
    rows = group_rows(out)
    assert set(rows) == {(topic, 0), (topic, 1)}, out
    assert all(cur == end and lag == "0" for cur, end, lag in rows.values()), out
    ends = {p: int(end) for (_, p), (_, end, _) in rows.items()}
    assert sum(ends.values()) == 10
    assert "has no active members" in err

    _, out, _ = tool(broker, cg, "--describe", "--group", group, "--state")
    assert re.search(r"\bEmpty\b\s+0\s*$", out.strip()), out

    _, out, _ = tool(broker, cg, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--dry-run")
    assert reset_rows(out) == {(topic, 0): 0, (topic, 1): 0}
    _, out, _ = tool(broker, cg, "--describe", "--group", group)
    assert all(lag == "0" for _, _, lag in group_rows(out).values()), "a dry run changed the offsets:\n" + out

    _, out, _ = tool(broker, cg, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    assert reset_rows(out) == {(topic, 0): 0, (topic, 1): 0}
    rows = group_rows(tool(broker, cg, "--describe", "--group", group)[1])
    assert {p: (int(c), int(l)) for (_, p), (c, _, l) in rows.items()} == {p: (0, e) for p, e in ends.items()}

    _, out, _ = tool(broker, cg, "--reset-offsets", "--group", group, "--topic", topic + ":0", "--to-offset", "2", "--execute")
    assert reset_rows(out) == {(topic, 0): 2}
    _, out, _ = tool(broker, cg, "--reset-offsets", "--group", group, "--topic", topic, "--shift-by", "1", "--execute")
    assert reset_rows(out) == {(topic, 0): 3, (topic, 1): 1}
    _, out, _ = tool(broker, cg, "--reset-offsets", "--group", group, "--topic", topic, "--to-latest", "--execute")
    assert reset_rows(out) == {(topic, p): e for p, e in ends.items()}

    # A consumer of the group resumes from the reset offsets: nothing left to read after --to-latest,
    # everything of partition 1 after --to-earliest on it.
    tool(broker, cg, "--reset-offsets", "--group", group, "--topic", topic + ":1", "--to-earliest", "--execute")
    got = console_consume(broker, topic, ends[1], "--group", group)
    assert all(l.startswith("Partition:1\t") for l in got) and len(got) == ends[1]

    _, out, _ = tool(broker, cg, "--delete-offsets", "--group", group, "--topic", topic)
    assert re.search(r"%s\s+0\s+Successful" % re.escape(topic), out), out
    _, out, _ = tool(broker, cg, "--delete", "--group", group)
    assert "Deletion of requested consumer groups ('%s') was successful." % group in out
    _, out, _ = tool(broker, cg, "--list")
    assert group not in out.split()


def offsets(broker, topic, *extra):
    _, out, _ = tool(broker, "GetOffsetShell", "--topic", topic, *extra)
    return {int(p): int(o) for t, p, o in (l.rsplit(":", 2) for l in out.split()) if t == topic}


def test_get_offsets_and_delete_records(target, tmp_path):
    _, broker = target
    topic = unique("offsets")
    tool(broker, "TopicCommand", "--create", "--topic", topic, "--partitions", "2")
    console_produce(broker, topic, ["k:v%d" % i for i in range(10)])  # one key: all in one partition
    latest = offsets(broker, topic)
    part = max(latest, key=latest.get)
    assert latest == {part: 10, 1 - part: 0}
    assert offsets(broker, topic, "--time", "-2") == {0: 0, 1: 0}
    assert offsets(broker, topic, "--time", "-3")[part] in range(10)
    assert offsets(broker, topic, "--partitions", str(part)) == {part: 10}

    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": part, "offset": 4}]}))
    _, out, _ = tool(broker, "DeleteRecordsCommand", "--offset-json-file", str(spec))
    assert "partition: %s-%d\tlow_watermark: 4" % (topic, part) in out
    assert offsets(broker, topic, "--time", "-2") == {part: 4, 1 - part: 0}
    got = console_consume(broker, topic, 6)
    assert [l.split("\t")[1] for l in got] == ["Offset:%d" % i for i in range(4, 10)]

    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": part, "offset": 50}]}))
    code, out, err = tool(broker, "DeleteRecordsCommand", "--offset-json-file", str(spec), check=False)
    assert "OffsetOutOfRange" in out + err, out + err


def test_kafka_log_dirs(target):
    name, broker = target
    topic = unique("logdirs")
    tool(broker, "TopicCommand", "--create", "--topic", topic, "--partitions", "2")
    console_produce(broker, topic, ["a:%s" % ("x" * 100), "b:%s" % ("y" * 200)])
    _, out, _ = tool(broker, "LogDirsCommand", "--describe", "--topic-list", topic)
    report = json.loads(out.strip().splitlines()[-1])
    (b,) = report["brokers"]
    assert b["broker"] == 1
    (d,) = b["logDirs"]
    assert d["error"] is None
    data_dir = broker.data_dir
    assert os.path.realpath(d["logDir"]) == os.path.realpath(data_dir)
    sizes = {p["partition"]: p["size"] for p in d["partitions"]}
    assert set(sizes) == {"%s-0" % topic, "%s-1" % topic}
    for partition, size in sizes.items():
        on_disk = sum(os.path.getsize(os.path.join(data_dir, partition, f))
                      for f in os.listdir(os.path.join(data_dir, partition)) if f.endswith(".log"))
        assert size == on_disk, "%s: reported %d, segments hold %d bytes" % (partition, size, on_disk)
    assert sum(sizes.values()) > 300


def open_transaction(broker, topic, txn_id):
    """A confluent-kafka producer with one open transaction holding 3 records."""
    from confluent_kafka import Producer

    # log_level 2: the producer outlives the test in a failure report; its
    # reconnect complaints after the broker stops are noise.
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id,
                  "transaction.timeout.ms": 120000, "log_level": 2})
    p.init_transactions(DEADLINE)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=b"txn-%d" % i, partition=0)
    assert p.flush(DEADLINE) == 0
    return p


def test_kafka_features_describe(target):
    """`kafka-features describe` reads the finalized features: transaction.version 2
    is what turns transactions v2 (KIP-890) on in Kafka 4 clients."""
    _, broker = target
    _, out, _ = tool_sub(broker, "FeatureCommand", "describe")
    rows = {}
    for line in out.splitlines():
        fields = dict(re.findall(r"(\w+): (\S+)", line))
        if "Feature" in fields:
            rows[fields["Feature"]] = fields
    assert rows["transaction.version"]["SupportedMaxVersion"] == "2", out
    assert rows["transaction.version"]["FinalizedVersionLevel"] == "2", out
    assert rows["group.version"]["FinalizedVersionLevel"] == "1", out


def test_kafka_transactions(target):
    _, broker = target
    topic, txn_id = unique("txn"), unique("txn-id")
    tool(broker, "TopicCommand", "--create", "--topic", topic, "--partitions", "1")
    producer = open_transaction(broker, topic, txn_id)
    try:
        _, out, _ = tool_sub(broker, "TransactionsCommand", "list")
        rows = [l.split() for l in out.splitlines() if l.startswith(txn_id)]
        assert len(rows) == 1 and rows[0][1] == "1" and rows[0][3] == "Ongoing", out
        _, out, _ = tool_sub(broker, "TransactionsCommand", "describe", "--transactional-id", txn_id)
        header, row = [l.split("\t") for l in out.strip().splitlines()[:2]]
        desc = dict(zip([h.strip() for h in header], [r.strip() for r in row]))
        assert desc["TransactionState"] == "Ongoing", out
        assert desc["TopicPartitions"] == "%s-0" % topic, out
        assert desc["TransactionTimeoutMs"] == "120000", out
        _, out, _ = tool_sub(broker, "TransactionsCommand", "describe-producers", "--topic", topic, "--partition", "0")
        header, row = [l.split("\t") for l in out.strip().splitlines()[:2]]
        prod = dict(zip([h.strip() for h in header], [r.strip() for r in row]))
        assert prod["CurrentTransactionStartOffset"] == "0" and prod["LastSequence"] == "2", out
        _, out, _ = tool_sub(broker, "TransactionsCommand", "find-hanging", "--broker-id", "1")
        assert topic not in out, "an open transaction the coordinator knows is not hanging:\n" + out
        producer.commit_transaction(DEADLINE)
    finally:
        producer.flush(10)
    _, out, _ = tool_sub(broker, "TransactionsCommand", "describe", "--transactional-id", txn_id)
    assert "CompleteCommit" in out, out
    assert offsets(broker, topic) == {0: 4}  # 3 records and the commit marker


@pytest.mark.full
def test_kafka_transactions_abort_hanging(target):
    """`kafka-transactions abort` writes an abort marker with WriteTxnMarkers."""
    name, broker = target
    topic, txn_id = unique("txn-abort"), unique("txn-abort-id")
    tool(broker, "TopicCommand", "--create", "--topic", topic, "--partitions", "1")
    producer = open_transaction(broker, topic, txn_id)
    try:
        _, out, _ = tool_sub(broker, "TransactionsCommand", "describe-producers", "--topic", topic, "--partition", "0")
        pid, epoch = out.strip().splitlines()[1].split()[:2]
        code, out, err = tool_sub(broker, "TransactionsCommand", "abort", "--topic", topic, "--partition", "0",
                                  "--producer-id", pid, "--producer-epoch", epoch, "--coordinator-epoch", "0",
                                  check=False)
        assert code == 0, out + err
        _, out, _ = tool_sub(broker, "TransactionsCommand", "describe-producers", "--topic", topic, "--partition", "0")
        assert out.strip().splitlines()[1].split()[5] == "None", out
    finally:
        try:
            producer.abort_transaction(DEADLINE)
        except Exception:  # already aborted by the tool: nothing left to clean up
            pass


def test_kafka_leader_election(target):
    """On one node every partition already has its preferred leader."""
    _, broker = target
    topic = unique("elect")
    tool(broker, "TopicCommand", "--create", "--topic", topic, "--partitions", "2")
    code, out, err = tool(broker, "LeaderElectionCommand", "--election-type", "preferred",
                          "--topic", topic, "--partition", "0", check=False)
    assert code == 0, out + err
    assert "Valid replica already elected for partitions %s-0" % topic in out
    code, out, err = tool(broker, "LeaderElectionCommand", "--election-type", "unclean",
                          "--topic", topic, "--partition", "1", check=False)
    assert code == 0 and "Valid replica already elected for partitions %s-1" % topic in out, out + err
    _, out, _ = tool(broker, "LeaderElectionCommand", "--election-type", "preferred", "--all-topic-partitions")
    assert "Error" not in out


def test_kafka_broker_api_versions(target):
    """The tool's view of ApiVersions matches the raw answer."""
    _, broker = target
    _, out, _ = tool(broker, "BrokerApiVersionsCommand")
    raw = api_versions.fetch(broker.bootstrap)
    seen = {}
    for name, key, rng in re.findall(r"(\w+)\((\d+)\): ([^,\n]+)", out):
        if rng.startswith("UNSUPPORTED"):
            seen[int(key)] = None
        else:
            m = re.match(r"(\d+)(?: to (\d+))?", rng)
            lo = int(m.group(1))
            seen[int(key)] = (lo, int(m.group(2) or lo))
    for key, rng in raw.items():
        if key in seen:
            assert seen[key] == rng, "%s: tool says %s, ApiVersions says %s" % (api_versions.NAMES.get(key), seen[key], rng)
    assert all(rng is None for key, rng in seen.items() if key not in raw)


def test_kafka_cluster_id(target):
    _, broker = target
    out = kafka_ref.run_tool(T + "ClusterTool", ["cluster-id", "--bootstrap-server", broker.bootstrap]).stdout
    assert re.fullmatch(r"Cluster ID: [A-Za-z0-9_-]{22}\n", out), out


KRABKA_BIN = os.environ.get("KRABKA_BIN", os.path.join(ROOT, "target", "release", "krabka"))
ACL_RESOURCE = re.compile(r"ResourcePattern\(resourceType=(\w+), name=(.*), patternType=(\w+)\)")
ACL_ENTRY = re.compile(r"\(principal=(.*), host=(.*), operation=(\w+), permissionType=(\w+)\)")


def acl_rows(out):
    """kafka-acls.sh --list output as `krabka acl list --format json` objects."""
    rows, resource = [], None
    for line in out.splitlines():
        m = ACL_RESOURCE.search(line)
        if m:
            resource = m.groups()
            continue
        m = ACL_ENTRY.search(line)
        if m and resource:
            rows.append({
                "resource_type": resource[0], "name": resource[1], "pattern_type": resource[2],
                "principal": m.group(1), "host": m.group(2), "operation": m.group(3), "permission": m.group(4),
            })
    return sorted(rows, key=json.dumps)


def krabka_acls(broker, *args):
    out = subprocess.run(
        [KRABKA_BIN, "acl", *args, "--bootstrap", broker.bootstrap, "--format", "json"],
        check=True, capture_output=True, text=True, timeout=60).stdout
    return sorted(json.loads(out), key=json.dumps)


def test_kafka_acls_and_krabka_acl_agree(tmp_path):
    """ACLs made by `krabka acl create` are what kafka-acls.sh --list shows,
    those made by kafka-acls.sh --add are what `krabka acl list` shows, and
    each tool removes what the other made. Krabka only: the reference
    broker runs without an authorizer."""
    broker = start_krabka(tmp_path / "acl-data", {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
    })
    try:
        krabka_acls(broker, "create", "--allow-principal", "User:alice", "--operation", "Read",
                    "--operation", "Describe", "--topic", "orders")
        tool(broker, "AclCommand", "--add", "--deny-principal", "User:mallory", "--deny-host", "10.0.0.7",
             "--operation", "All", "--group", "billing-", "--resource-pattern-type", "prefixed")
        _, out, _ = tool(broker, "AclCommand", "--list")
        by_kafka = acl_rows(out)
        assert by_kafka == krabka_acls(broker, "list"), out
        assert len(by_kafka) == 3
        assert {"resource_type": "GROUP", "name": "billing-", "pattern_type": "PREFIXED",
                "principal": "User:mallory", "host": "10.0.0.7", "operation": "ALL",
                "permission": "DENY"} in by_kafka

        tool(broker, "AclCommand", "--remove", "--force", "--allow-principal", "User:alice",
             "--operation", "Read", "--topic", "orders")
        assert [r["operation"] for r in krabka_acls(broker, "list", "--topic", "orders")] == ["DESCRIBE"]
        deleted = krabka_acls(broker, "delete", "--group", "billing-", "--resource-pattern-type", "prefixed")
        assert [r["principal"] for r in deleted] == ["User:mallory"]
        _, out, _ = tool(broker, "AclCommand", "--list")
        assert acl_rows(out) == krabka_acls(broker, "list") and len(acl_rows(out)) == 1, out
    finally:
        broker.stop()
