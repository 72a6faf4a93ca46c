"""Transactions v2 (KIP-890 part 2) with the Java client (kafka-clients,
newest): the broker finalizes `transaction.version=2`, so the client ends
every transaction with EndTxn v5 (an epoch bump each time) and adds no
partition itself — each Produce v12 and TxnOffsetCommit v5 adds its
partition to the transaction through the broker that takes it.

On one node that is the local coordinator. In a cluster the partition's
broker is often not the transactional id's coordinator: it asks that
broker with AddPartitionsToTxn v5 before appending, so the coordinator
still writes a marker to every partition. java/TransactionsV2.java checks
read_committed sees exactly the committed records, the group offset of
the transaction is committed, and the epoch moved once per transaction.
"""

import re
import subprocess
import uuid

import pytest

import kafka_ref
from conftest import _interop, compile_java, interop_module
from test_diskless_java import broker_logs, required_env, stop_all

broker_factory = _interop.broker_factory
cluster_factory = _interop.cluster_factory


def run_transactions(brokers):
    """TransactionsV2.java through `brokers` (produce through the first,
    read through the last); its output when it passes."""
    cp = compile_java("TransactionsV2", kafka_ref.KAFKA_VERSION)
    suffix = uuid.uuid4().hex[:8]
    cmd = [kafka_ref.java(), "-Xmx384m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp,
           "TransactionsV2", "--bootstraps", ",".join(b.bootstrap for b in brokers),
           "--topic", "txn-v2-" + suffix, "--id", "txn-v2-id-" + suffix, "--group", "txn-v2-g-" + suffix,
           "--partitions", "4"]
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    except subprocess.TimeoutExpired as e:
        pytest.fail("TransactionsV2.java did not finish in 300 s:\n%s%s" % (e.stdout or "", broker_logs(brokers)))
    assert proc.returncode == 0, "TransactionsV2.java failed:\n%s%s" % (proc.stdout[-10000:], broker_logs(brokers))
    assert "OK" in proc.stdout.splitlines(), proc.stdout
    return proc.stdout


def leaders(out):
    """The partition leaders TransactionsV2.java printed: {partition: node}."""
    line = next(l for l in out.splitlines() if l.startswith("LEADERS "))
    return {int(p): int(n) for p, n in re.findall(r"(\d+)=(\d+)", line)}


def test_java_transactions_v2_single_node(broker_factory):
    broker = broker_factory()
    run_transactions([broker])
    stop_all([broker])


def test_java_transactions_v2_across_two_brokers(cluster_factory):
    server = required_env("KRABKA_TEST_DATABASE_URL", "PostgreSQL")
    helpers = interop_module("helpers")
    db = _interop.create_database(server, "krabka_txn_v2_%s" % uuid.uuid4().hex[:12])
    brokers = [cluster_factory(db, node) for node in (1, 2)]
    helpers.wait_for_cluster([b.bootstrap for b in brokers], timeout=60)
    out = run_transactions(brokers)
    # Partitions on both brokers: whichever holds the transactional id,
    # the other one had to add its partitions on it.
    assert set(leaders(out).values()) == {1, 2}, out
    stop_all(brokers)
