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
