"""The Java client (kafka-clients, newest) on diskless topics (KIP-1150,
issue 18): produced through any broker and consumed through any broker,
byte-identical (keys, binary values, headers with null values,
timestamps), with every codec, idempotent and acks=all, offsets dense from
0 and equal to the acknowledged ones.

Two set-ups: one broker with no diskless setting at all (the default
local-directory store, the embedded batch coordinator, no PostgreSQL), and
three brokers of one cluster on PostgreSQL with the store on S3 (moto).
In the cluster, Metadata steers each partition's clients to one broker, so
a topic of several partitions has the Java client write and read through
each broker that leads some; java/Diskless.java prints the leaders, and
checks that Admin.describeTopics names the same ones as Metadata.

The Python clients prove the same in tests/interop; this lives in
tests/compat because that is where the JDK, Maven and the kafka-clients
classpath are (java/Diskless.java is compiled like java/Compat.java). The
brokers and the store settings are the interop fixtures and helpers.
"""

import os
import subprocess
import uuid

import pytest

import kafka_ref
from conftest import _interop, compile_java, interop_module

# The interop fixtures, under their own names so tests here can ask for them.
broker_factory = _interop.broker_factory
cluster_factory = _interop.cluster_factory

PARTITIONS = 6


def required_env(name, what):
    """The value of `name`; without it the test fails under CI (scripts/test
    exports it) and is skipped elsewhere."""
    value = os.environ.get(name)
    if not value:
        if os.environ.get("CI"):
            pytest.fail("%s is not set (scripts/test starts %s and exports it)" % (name, what))
        pytest.skip("%s is not set (%s)" % (name, what))
    return value


def run_diskless(brokers, topic):
    """Diskless.java creates `topic` through the first of `brokers`, then
    produces and consumes through each; its output when it passes."""
    cp = compile_java("Diskless", kafka_ref.KAFKA_VERSION)
    cmd = [kafka_ref.java(), "-Xmx384m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp, "Diskless",
           "--bootstraps", ",".join(b.bootstrap for b in brokers), "--topic", topic,
           "--partitions", str(PARTITIONS), "--create"]
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    except subprocess.TimeoutExpired as e:
        pytest.fail("Diskless.java did not finish in 600 s:\n%s%s" % (e.stdout or "", broker_logs(brokers)))
    assert proc.returncode == 0, "Diskless.java failed:\n%s%s" % (proc.stdout[-10000:], broker_logs(brokers))
    print(proc.stdout)
    return proc.stdout


def broker_logs(brokers):
    return "".join("\n--- broker on port %d ---\n%s" % (b.port, b.log()[-3000:]) for b in brokers)


def stop_all(brokers):
    for b in brokers:
        code = b.stop()
        assert code == 0, "broker on port %d did not shut down cleanly (%s):\n%s" % (b.port, code, b.log())


def test_java_client_single_node_default_store(broker_factory):
    broker = broker_factory()
    out = run_diskless([broker], "java-diskless-" + uuid.uuid4().hex[:8])
    assert any(line.startswith("OK ") for line in out.splitlines()), out
    stop_all([broker])


def test_java_client_three_brokers_postgres_s3(cluster_factory):
    server = required_env("KRABKA_TEST_DATABASE_URL", "PostgreSQL")
    endpoint = required_env("KRABKA_TEST_S3_ENDPOINT", "moto")
    objstore = interop_module("objstore")
    faults = interop_module("test_cluster_diskless_faults")
    helpers = interop_module("helpers")

    db = _interop.create_database(server, "krabka_java_dl_%s" % uuid.uuid4().hex[:12])
    bucket = "krabka-java-dl-%s" % uuid.uuid4().hex[:10]
    objstore.create_bucket(endpoint, bucket)
    settings = faults.diskless_store_settings(endpoint, bucket, "java")
    # cluster_factory waits for each broker's registration.
    brokers = [cluster_factory(db, node, settings) for node in (1, 2, 3)]
    helpers.wait_for_cluster([b.bootstrap for b in brokers], timeout=60)
    run_diskless(brokers, "java-diskless-" + uuid.uuid4().hex[:8])
    assert objstore.list_keys(endpoint, bucket, "java/"), "the batches are objects in the bucket"
    stop_all(brokers)
