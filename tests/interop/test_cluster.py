"""Cluster mode: several krabka processes sharing one PostgreSQL.

Membership: each broker registers and renews a lease; Metadata and
DescribeCluster list the live brokers with one cluster id and one
controller; a node id held by a live broker, an unreachable database and a
dead broker's lapse behave as the design says.
"""

import subprocess
import time

from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient

from conftest import KRABKA_BIN, free_port, sql
from helpers import wait_for_cluster


def wait_for(what, check, timeout=30):
    deadline = time.time() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.time() < deadline, "timed out waiting for " + what
        time.sleep(0.1)


def brokers_seen(bootstrap):
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return md


def test_three_brokers_share_one_cluster(cluster_db, cluster_factory):
    brokers = [cluster_factory(cluster_db, node) for node in (1, 2, 3)]
    expected = {b.port: node for node, b in zip((1, 2, 3), brokers)}

    def all_three(b):
        md = brokers_seen(b.bootstrap)
        return md if {m.id: m.port for m in md.brokers.values()} == {v: k for k, v in expected.items()} else None

    views = [wait_for("broker %s to list all three" % b.bootstrap, lambda b=b: all_three(b)) for b in brokers]
    assert len({md.cluster_id for md in views}) == 1, "one shared cluster id"
    assert len(views[0].cluster_id) == 22
    controllers = {md.controller_id for md in views}
    assert len(controllers) == 1 and controllers.pop() in (1, 2, 3)

    # kafka-python's DescribeCluster agrees.
    client = KafkaAdminClient(bootstrap_servers=brokers[1].bootstrap)
    try:
        described = client.describe_cluster()
    finally:
        client.close()
    assert described["cluster_id"] == views[0].cluster_id
    nodes = [b.get("node_id", b.get("broker_id")) for b in described["brokers"]]
    assert sorted(nodes) == [1, 2, 3], described
    assert described["controller_id"] == views[0].controller_id

    # The database holds the registrations and the controller lease.
    rows = sql(cluster_db, "SELECT node_id, listeners FROM brokers WHERE lease_expires_at > now() ORDER BY node_id")
    assert [int(r[0]) for r in rows] == [1, 2, 3]
    assert rows[0][1] == "PLAINTEXT://" + brokers[0].bootstrap
    owner = sql(cluster_db, "SELECT owner FROM shard_leases WHERE kind = 'controller'")
    assert int(owner[0][0]) == views[0].controller_id

    # `krabka cluster status` prints the same from the database.
    out = subprocess.run(
        [KRABKA_BIN, "cluster", "status", "--override", "krabka.cluster.database.url=" + cluster_db],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout
    assert "cluster id:       " + views[0].cluster_id in out
    assert out.count(" live ") == 3, out
    assert "controller" in out


def test_a_dead_broker_leaves_metadata_and_its_controller_lease_moves(cluster_db, cluster_factory):
    brokers = {node: cluster_factory(cluster_db, node) for node in (1, 2, 3)}
    md = wait_for(
        "three brokers",
        lambda: (lambda m: m if len(m.brokers) == 3 else None)(brokers_seen(brokers[1].bootstrap)),
    )
    controller = md.controller_id
    brokers[controller].kill9()
    survivor = next(b for n, b in brokers.items() if n != controller)

    def without_the_dead():
        m = brokers_seen(survivor.bootstrap)
        ok = controller not in m.brokers and len(m.brokers) == 2 and m.controller_id in m.brokers
        return m if ok else None

    md = wait_for("the killed broker to lapse (2 s lease)", without_the_dead)
    assert md.controller_id != controller
    epochs = sql(cluster_db, "SELECT owner, epoch FROM shard_leases WHERE kind = 'controller'")
    assert int(epochs[0][0]) == md.controller_id and int(epochs[0][1]) >= 2

    # A clean shutdown deregisters at once (no waiting for the lease).
    other = next(n for n in brokers if n not in (controller, md.controller_id))
    assert brokers[other].stop() == 0
    rows = sql(cluster_db, "SELECT node_id FROM brokers WHERE lease_expires_at > now()")
    assert [int(r[0]) for r in rows] == [md.controller_id]


def run_to_exit(broker, timeout=60):
    """Runs a broker that must refuse to start; returns (exit code, output)."""
    done = subprocess.run(broker.command(), capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout + done.stderr


def test_a_node_id_held_by_a_live_broker_is_refused(cluster_db, cluster_factory):
    first = cluster_factory(cluster_db, 1)
    code, output = run_to_exit(cluster_factory(cluster_db, 1, start=False))
    assert code != 0
    assert "node.id 1 is held by a live broker" in output, output
    assert first.alive()
    rows = sql(cluster_db, "SELECT listeners FROM brokers WHERE node_id = 1")
    assert rows == [("PLAINTEXT://" + first.bootstrap,)], "the first registration stands"


def test_an_unreachable_database_stops_startup(cluster_factory):
    url = "postgresql://postgres@127.0.0.1:%d/nothing" % free_port()
    broker = cluster_factory(url, 1, {"krabka.cluster.database.connect.timeout.ms": "1000"}, start=False)
    code, output = run_to_exit(broker)
    assert code != 0
    assert "cannot reach the cluster database" in output, output


# --- Shared topics ----------------------------------------------------------

import os
import socket
import struct

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic
from kafka import KafkaConsumer, KafkaProducer

from conftest import kcat_path


def list_offsets_v1(bootstrap, topic, partition):
    """ListOffsets v1 (latest) for one partition, sent to exactly this broker;
    returns (error code, offset)."""
    host, port = bootstrap.split(":")
    name = topic.encode()
    body = struct.pack(">i", -1) + struct.pack(">i", 1) + struct.pack(">h", len(name)) + name
    body += struct.pack(">i", 1) + struct.pack(">iq", partition, -1)
    client = b"cluster-test"
    header = struct.pack(">hhih", 2, 1, 7, len(client)) + client
    frame = header + body
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _read(s, 4))[0]
        data = _read(s, size)
    pos = 4 + 4  # correlation id, topic count
    (n,) = struct.unpack_from(">h", data, pos)
    pos += 2 + n + 4  # name, partition count
    _, error, _, offset = struct.unpack_from(">ihqq", data, pos)
    return error, offset


def _read(s, n):
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        assert chunk, "connection closed"
        out += chunk
    return out


def topic_view(bootstrap, topic):
    # All topics: asking for one by name would auto-create it.
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return {p.id: (p.leader, p.error) for p in t.partitions.values()}


def consume_all(bootstrap, topic, expected, group=None, timeout=60):
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group or "reader-%d" % time.time_ns(),
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    consumer.subscribe([topic])
    got = []
    deadline = time.time() + timeout
    try:
        while len(got) < expected and time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            got.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    return got


def test_topics_are_shared_and_each_partition_lives_on_one_broker(cluster_db, cluster_factory):
    brokers = {node: cluster_factory(cluster_db, node) for node in (1, 2, 3)}
    wait_for_cluster([b.bootstrap for b in brokers.values()])
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    admin.create_topics([NewTopic("shared", num_partitions=6, replication_factor=1)])["shared"].result(30)

    # Every broker sees the topic, with one live leader per partition, the
    # leaders spread over all three.
    views = {
        node: wait_for("broker %d to see the topic" % node,
                       lambda b=b: (lambda v: v if v and len(v) == 6 and all(e is None for _, e in v.values()) else None)(
                           topic_view(b.bootstrap, "shared")))
        for node, b in brokers.items()
    }
    leaders = {p: leader for p, (leader, _) in views[1].items()}
    assert all(views[n] == views[1] for n in brokers), views
    assert sorted(set(leaders.values())) == [1, 2, 3], leaders
    rows = sql(cluster_db, "SELECT partition, broker_id FROM topic_partitions ORDER BY partition")
    assert {int(p): int(b) for p, b in rows} == leaders

    # Produce through broker 2 (librdkafka routes to each leader), read
    # through broker 3: byte-identical.
    producer = Producer({"bootstrap.servers": brokers[2].bootstrap, "linger.ms": 5})
    sent = {}
    for i in range(600):
        key, value = b"k%d" % i, b"v%d-" % i + bytes([i % 256]) * (i % 40)
        producer.produce("shared", key=key, value=value, partition=i % 6)
        sent[key] = (i % 6, value)
    assert producer.flush(30) == 0
    got = consume_all(brokers[3].bootstrap, "shared", 600)
    assert len(got) == 600
    assert {k: (p, v) for p, _, k, v in got} == sent
    for p in range(6):
        offsets = sorted(o for q, o, _, _ in got if q == p)
        assert offsets == list(range(100)), "dense offsets from 0 on partition %d" % p

    # kafka-python through broker 1 agrees.
    kp = KafkaProducer(bootstrap_servers=brokers[1].bootstrap)
    for p in range(6):
        kp.send("shared", key=b"kp", value=b"from kafka-python", partition=p)
    kp.flush(30)
    kp.close()
    kc = KafkaConsumer("shared", bootstrap_servers=brokers[3].bootstrap, auto_offset_reset="earliest",
                       consumer_timeout_ms=10000)
    records = list(kc)
    kc.close()
    assert len(records) == 606

    # kcat through broker 3 reads all of it too.
    out = subprocess.run(
        [kcat_path(), "-b", brokers[3].bootstrap, "-C", "-t", "shared", "-e", "-q", "-f", "%p %o\n"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout
    assert len(out.splitlines()) == 606

    # Each partition's data lives only on its broker; the others refuse it.
    for p, leader in leaders.items():
        for node, b in brokers.items():
            exists = os.path.isdir(os.path.join(b.data_dir, "shared-%d" % p))
            assert exists == (node == leader), (p, node, leader)
            error, offset = list_offsets_v1(b.bootstrap, "shared", p)
            if node == leader:
                assert (error, offset) == (0, 101)
            else:
                assert error == 6, "NOT_LEADER_OR_FOLLOWER from broker %d for partition %d" % (node, p)

    # Growing the topic and changing its configs on one broker shows on the others.
    admin = AdminClient({"bootstrap.servers": brokers[3].bootstrap})
    admin.create_partitions([NewPartitions("shared", 9)])["shared"].result(30)
    for f in admin.alter_configs([ConfigResource("topic", "shared", set_config={"retention.ms": "123456789"})]).values():
        f.result(30)
    wait_for("nine partitions on broker 1",
             lambda: len(topic_view(brokers[1].bootstrap, "shared") or {}) == 9)

    def retention_on(node):
        res = ConfigResource("topic", "shared")
        a = AdminClient({"bootstrap.servers": brokers[node].bootstrap})
        configs = a.describe_configs([res])[res].result(30)
        return configs["retention.ms"].value == "123456789"

    wait_for("the config change on broker 2", lambda: retention_on(2))

    # Deleting on one broker removes it everywhere, with its data.
    deleter = AdminClient({"bootstrap.servers": brokers[2].bootstrap})
    deleter.delete_topics(["shared"])["shared"].result(30)
    for node, b in brokers.items():
        wait_for("broker %d to forget the topic" % node, lambda b=b: topic_view(b.bootstrap, "shared") is None)
        wait_for("broker %d to drop the data" % node,
                 lambda b=b: not any(d.startswith("shared-") for d in os.listdir(b.data_dir)))


def test_a_partition_is_unavailable_while_its_broker_is_down(cluster_db, cluster_factory):
    brokers = {node: cluster_factory(cluster_db, node) for node in (1, 2, 3)}
    wait_for_cluster([b.bootstrap for b in brokers.values()])
    creator = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    creator.create_topics([NewTopic("spread", num_partitions=3, replication_factor=1)])["spread"].result(30)
    view = wait_for("the topic on broker 1",
                    lambda: (lambda v: v if v and len(v) == 3 and all(e is None for _, e in v.values()) else None)(
                        topic_view(brokers[1].bootstrap, "spread")))
    producer = Producer({"bootstrap.servers": brokers[1].bootstrap})
    for p in range(3):
        for i in range(10):
            producer.produce("spread", value=b"%d-%d" % (p, i), partition=p)
    assert producer.flush(30) == 0

    victim_partition, victim = next((p, leader) for p, (leader, _) in sorted(view.items()) if leader != 1)
    brokers[victim].kill9()

    def unavailable():
        v = topic_view(brokers[1].bootstrap, "spread")
        leader, error = v[victim_partition]
        return leader == -1 and error is not None and error.code() == KafkaError.LEADER_NOT_AVAILABLE

    wait_for("the dead broker's partition to be reported unavailable", unavailable)

    # It comes back with its data once the broker's lease lapsed and it restarts.
    wait_for("the dead broker's lease to lapse",
             lambda: not sql(cluster_db, "SELECT 1 FROM brokers WHERE node_id = %d AND lease_expires_at > now()" % victim))
    brokers[victim].start()
    wait_for("the partition to have its leader back",
             lambda: topic_view(brokers[1].bootstrap, "spread")[victim_partition] == (victim, None))
    error, offset = list_offsets_v1(brokers[victim].bootstrap, "spread", victim_partition)
    assert (error, offset) == (0, 10), "the partition's records survived"


# --- Groups across brokers, and what produce costs the database ---------------

import threading
import urllib.request

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition

# The statements a broker runs on its own schedule (renewal rounds and the
# metadata poll); anything else during a produce/consume run would be a
# database round trip on the data path.
PERIODIC_OPS = {
    "renew", "brokers", "shard_owners", "acquire_shard", "acquire_shards", "release_shard",
    "read_state", "metadata_version", "load_metadata",
}


def db_ops(metrics_port):
    """`krabka_cluster_db_round_trip_seconds_count` by op, from /metrics."""
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % metrics_port, timeout=10).read().decode()
    ops = {}
    for line in text.splitlines():
        if line.startswith("krabka_cluster_db_round_trip_seconds_count{"):
            labels, value = line.rsplit(" ", 1)
            op = labels.split('op="', 1)[1].split('"', 1)[0]
            ops[op] = float(value)
    return ops


def test_a_group_across_brokers_and_no_database_round_trip_per_record(cluster_db, cluster_factory):
    metrics = {n: free_port() for n in (1, 2, 3)}
    brokers = {
        n: cluster_factory(cluster_db, n, {"krabka.metrics.listener": "127.0.0.1:%d" % metrics[n]})
        for n in (1, 2, 3)
    }
    wait_for_cluster([b.bootstrap for b in brokers.values()])
    creator = AdminClient({"bootstrap.servers": brokers[2].bootstrap})
    creator.create_topics([NewTopic("work", num_partitions=6, replication_factor=1)])["work"].result(30)
    for b in brokers.values():
        wait_for("the topic everywhere", lambda b=b: (lambda v: v and len(v) == 6 and all(
            e is None for _, e in v.values()))(topic_view(b.bootstrap, "work")))

    # Four members, each bootstrapped at a different broker; the group
    # settles before anything is produced, so nothing is read twice.
    consumers = []
    for i in range(4):
        c = Consumer({
            "bootstrap.servers": brokers[i % 3 + 1].bootstrap,
            "group.id": "spread-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 10000,
        })
        c.subscribe(["work"])
        consumers.append(c)

    def settled():
        for c in consumers:
            c.poll(0.1)
        parts = [tp.partition for c in consumers for tp in c.assignment()]
        return sorted(parts) == list(range(6))

    wait_for("the group to assign all six partitions once", settled, timeout=60)

    before = {n: db_ops(metrics[n]) for n in brokers}
    started = time.time()
    count = 6000
    producer = Producer({"bootstrap.servers": brokers[3].bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce("work", key=b"%d" % i, value=b"record-%d" % i, partition=i % 6)
    assert producer.flush(30) == 0

    seen = []
    lock = threading.Lock()

    def drain(c):
        deadline = time.time() + 60
        while time.time() < deadline:
            with lock:
                if len(seen) >= count:
                    return
            msg = c.poll(0.2)
            if msg is None or msg.error():
                continue
            with lock:
                seen.append(msg.value())
            if int(msg.key()) % 500 == 499:
                c.commit(message=msg, asynchronous=False)

    threads = [threading.Thread(target=drain, args=(c,)) for c in consumers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in consumers:
        try:
            c.commit(asynchronous=False)
        except KafkaException as e:
            # A member whose offsets were all committed already has nothing new.
            assert e.args[0].code() == KafkaError._NO_OFFSET, e
    elapsed = time.time() - started
    after = {n: db_ops(metrics[n]) for n in brokers}
    for c in consumers:
        c.close()

    assert len(seen) == count and len(set(seen)) == count, "every record consumed exactly once"

    # Committed offsets, read through another broker, cover everything.
    reader = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    offsets = reader.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("spread-group", [TopicPartition("work", p) for p in range(6)])]
    )["spread-group"].result(30)
    assert sorted(tp.offset for tp in offsets.topic_partitions) == [count // 6] * 6

    # Producing and consuming made no database round trip: only the periodic
    # statements ran, at their own pace (renewal every 300 ms), and one
    # write per offset commit (12 in the loop, at most 4 at the end).
    commits = 0
    for n in brokers:
        grew = {op: after[n].get(op, 0) - before[n].get(op, 0) for op in after[n]}
        grew = {op: d for op, d in grew.items() if d > 0}
        commits += grew.pop("write_state", 0)
        assert set(grew) <= PERIODIC_OPS, (n, grew)
        assert grew.get("renew", 0) <= elapsed / 0.3 + 3, (n, grew, elapsed)
    assert 12 <= commits <= 16, commits
