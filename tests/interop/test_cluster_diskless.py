"""Diskless topics in cluster mode: two brokers on one PostgreSQL (the
batch coordinator) and one shared filesystem store directory. Every broker
serves every diskless partition, so a record produced through one broker
is read back through the other, byte-identical, at offsets the database
assigned densely across both; Metadata steers each partition's clients to
one live broker, and when a broker dies its partitions move to the other,
which serves everything either wrote. With consolidation, a topic deleted
through one broker that dies at once still has its tiered segments
deleted, by the other."""

import os
import re
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from kafka.protocol.consumer.fetch import FetchResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.record import MemoryRecords

from conftest import sql
from helpers import consume_confluent, create_topic, wait_for_cluster
from raw_client import RawConnection, batch, fetch_request

TOPIC = "dl-shared"
# Kafka's codes a broker answers while it has not opened the partition yet.
NOT_YET = {3, 6}


def wait_for(what, check, timeout=60):
    deadline = time.time() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.time() < deadline, "timed out waiting for " + what
        time.sleep(0.1)


def produce_to(broker, partition, values):
    """Sends one batch of `values` to `broker` itself (not to the leader
    Metadata names); answers the base offset once the broker accepts it."""
    records = batch(values)
    T = ProduceRequest.TopicProduceData

    def attempt():
        with RawConnection(broker.bootstrap) as conn:
            request = ProduceRequest[9](
                transactional_id=None, acks=-1, timeout_ms=30000,
                topic_data=[T(name=TOPIC, partition_data=[T.PartitionProduceData(index=partition, records=records)])])
            _, response = conn.call(request, ProduceResponse)
        p = response.responses[0].partition_responses[0]
        if p.error_code in NOT_YET:
            return None
        assert p.error_code == 0, "produce through port %d failed with %d" % (broker.port, p.error_code)
        return (p.base_offset,)

    return wait_for("port %d to accept produce" % broker.port, attempt)[0]


def fetch_from(broker, partition, offset):
    """The records `broker` itself returns from `offset`: [(offset, value)]."""
    with RawConnection(broker.bootstrap) as conn:
        _, response = conn.call(fetch_request([(TOPIC, partition, offset)]), FetchResponse)
    p = response.responses[0].partitions[0]
    if p.error_code in NOT_YET:
        return []
    assert p.error_code == 0, "fetch through port %d failed with %d" % (broker.port, p.error_code)
    out = []
    records = MemoryRecords(bytes(p.records or b""))
    while records.has_next():
        for record in records.next_batch():
            out.append((record.offset, record.value))
    return out


def two_brokers_and_a_diskless_topic(cluster_db, cluster_factory, tmp_path, partitions):
    """Brokers 1 and 2 of one cluster sharing a store directory, both
    listed, and TOPIC created diskless with `partitions`."""
    store = tmp_path / "shared-diskless-store"
    settings = {"krabka.diskless.storage.dir": str(store), "diskless.commit.interval.ms": "20"}
    brokers = [cluster_factory(cluster_db, node, settings) for node in (1, 2)]
    wait_for_cluster([b.bootstrap for b in brokers])
    create_topic(brokers[0].bootstrap, TOPIC, partitions=partitions, config={"diskless.enable": "true"})
    return brokers, store


def test_a_record_produced_through_one_broker_is_read_through_the_other(cluster_db, cluster_factory, tmp_path):
    brokers, store = two_brokers_and_a_diskless_topic(cluster_db, cluster_factory, tmp_path, 2)

    # Through broker 1, read through broker 2; then the other way round, on
    # the same partition: one order, dense offsets, whichever broker wrote.
    first = produce_to(brokers[0], 0, [b"from broker one"])
    assert first == 0
    got = wait_for("broker 2 to serve what broker 1 wrote", lambda: fetch_from(brokers[1], 0, 0))
    assert got == [(0, b"from broker one")]
    second = produce_to(brokers[1], 0, [b"from broker two", b"and again"])
    assert second == 1
    for b in brokers:
        got = wait_for("port %d to serve all three" % b.port,
                       lambda b=b: (lambda r: r if len(r) == 3 else None)(fetch_from(b, 0, 0)))
        assert got == [(0, b"from broker one"), (1, b"from broker two"), (2, b"and again")]

    # Both brokers writing partition 1 at once, 20 batches each.
    for i in range(20):
        produce_to(brokers[i % 2], 1, [b"p1-%d" % i])
    # A real client (librdkafka, routed by Metadata) reads it all back.
    for partition, expected in ((0, [b"from broker one", b"from broker two", b"and again"]),
                                (1, sorted(b"p1-%d" % i for i in range(20)))):
        got = consume_confluent(brokers[1].bootstrap, TOPIC, len(expected), partition=partition)
        assert [m.offset() for m in got] == list(range(len(expected)))
        values = [m.value() for m in got]
        assert (values if partition == 0 else sorted(values)) == expected

    # The order lives in the database: one row per batch, in one table.
    rows = sql(cluster_db, "SELECT partition, count(*), max(last_offset) FROM diskless_batches GROUP BY partition ORDER BY partition")
    assert rows == [("0", "2", "2"), ("1", "20", "19")], rows
    # And the objects in the one directory both brokers write.
    files = [f for _, _, names in os.walk(store) for f in names]
    assert files, "objects in the shared store"

    # Both brokers name the same live leader for each partition.
    def leaders(b):
        md = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(TOPIC, timeout=10)
        parts = md.topics[TOPIC].partitions
        if len(md.brokers) != len(brokers_alive) or any(p.error for p in parts.values()):
            return None
        return {i: p.leader for i, p in parts.items()}

    brokers_alive = brokers
    views = [wait_for("leaders on port %d" % b.port, lambda b=b: leaders(b)) for b in brokers]
    assert views[0] == views[1] and set(views[0].values()) <= {1, 2}, views

    # Broker 1 dies (kill -9): Metadata steers both partitions to broker 2,
    # which serves what both wrote, and production goes on.
    brokers[0].kill9()
    survivor = brokers[1]
    brokers_alive = [survivor]
    wait_for("both partitions led by broker 2 (2 s lease)",
             lambda: leaders(survivor) == {0: 2, 1: 2})
    producer = Producer({"bootstrap.servers": survivor.bootstrap, "enable.idempotence": True})
    for i in range(10):
        producer.produce(TOPIC, value=b"after-%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    p0 = consume_confluent(survivor.bootstrap, TOPIC, 8, partition=0)
    assert [m.offset() for m in p0] == list(range(8))
    assert [m.value() for m in p0] == [b"from broker one", b"from broker two", b"and again"] + \
        [b"after-%d" % i for i in range(0, 10, 2)]
    p1 = consume_confluent(survivor.bootstrap, TOPIC, 25, partition=1)
    assert [m.offset() for m in p1] == list(range(25))
    assert [m.value() for m in p1][20:] == [b"after-%d" % i for i in range(1, 10, 2)]


def test_a_fetch_parked_on_one_broker_wakes_on_a_commit_through_another(cluster_db, cluster_factory, tmp_path):
    """A consumer long-polling broker 2 gets a record produced through
    broker 1 when its commit happens (PostgreSQL NOTIFY), not when its
    20 s wait ends."""
    import threading

    brokers, _ = two_brokers_and_a_diskless_topic(cluster_db, cluster_factory, tmp_path, 1)
    first = produce_to(brokers[0], 0, [b"first"])
    wait_for("broker 2 to serve the partition", lambda: fetch_from(brokers[1], 0, first))

    parked = {}

    def long_poll():
        started = time.monotonic()
        with RawConnection(brokers[1].bootstrap) as conn:
            _, response = conn.call(
                fetch_request([(TOPIC, 0, first + 1)], max_wait_ms=20000, min_bytes=1), FetchResponse)
        p = response.responses[0].partitions[0]
        records = MemoryRecords(bytes(p.records or b""))
        values = []
        while records.has_next():
            values.extend(r.value for r in records.next_batch())
        parked.update(error=p.error_code, values=values, seconds=time.monotonic() - started)

    waiter = threading.Thread(target=long_poll)
    waiter.start()
    time.sleep(1.0)  # let the fetch park on broker 2
    assert waiter.is_alive(), "the fetch answered before anything was produced: %s" % parked
    produce_to(brokers[0], 0, [b"second"])
    waiter.join(timeout=30)
    assert not waiter.is_alive()
    assert parked["error"] == 0 and parked["values"] == [b"second"], parked
    assert parked["seconds"] < 10, "woken by the commit, not by the end of its wait: %s" % parked


def tier_segments(tier, topic):
    """The segment files of `topic`'s partitions in the shared filesystem
    tier: {partition: [file]} for the partitions that have any."""
    out = {}
    for d in os.listdir(tier) if os.path.isdir(tier) else []:
        if not d.startswith(topic + "-"):  # <topic>-<partition>-<topic id>
            continue
        partition = d[len(topic) + 1:].partition("-")[0]
        files = sorted(f for f in os.listdir(os.path.join(tier, d)) if f.endswith(".log"))
        if partition.isdigit() and files:
            out.setdefault(int(partition), []).extend(files)
    return out


def log_lines(broker):
    """Every line of `broker`'s log so far, without colour codes."""
    with open(broker.log_path, "rb") as f:
        text = f.read().decode("utf-8", "replace")
    return re.sub(r"\x1b\[[0-9;]*m", "", text).splitlines()


def test_a_deleted_topics_segments_are_deleted_by_another_broker_when_the_deleting_one_dies(
        cluster_db, cluster_factory, tmp_path):
    """A consolidated diskless topic is deleted through broker 1, which is
    killed (kill -9) as soon as DeleteTopics answers: the deletion left its
    partitions pending in the database, in the transaction that deleted
    the topic, so broker 2 deletes their segments from the shared tier and
    the pending table empties. Broker 1 makes its remote log manager pass
    only once, at start, so it never gets to the deletion itself."""
    from helpers import admin, make_records, produce_confluent
    from test_diskless_consolidation import BROKER as CONSOLIDATING, TOPIC_CONFIG

    tier = str(tmp_path / "shared-tier")
    common = {**CONSOLIDATING,
              "krabka.diskless.storage.dir": str(tmp_path / "shared-store"),
              "krabka.remote.log.storage.dir": tier}
    one = cluster_factory(cluster_db, 1, {**common, "remote.log.manager.task.interval.ms": "3600000"})
    two = cluster_factory(cluster_db, 2, common)
    wait_for_cluster([one.bootstrap, two.bootstrap])

    # Only a partition's reported leader consolidates it, and broker 1 never
    # does: find a partition broker 2 leads (a topic's leaders follow from
    # its id, so try another topic in the rare case it has none).
    def agreed_leaders(topic):
        """{partition: leader} once both brokers name the same ones."""
        views = []
        for b in (one, two):
            md = admin(b.bootstrap).list_topics(topic, timeout=10)
            t = md.topics.get(topic)
            if t is None or t.error or len(md.brokers) != 2 or any(p.error for p in t.partitions.values()):
                return None
            views.append({i: p.leader for i, p in t.partitions.items()})
        return views[0] if views[0] == views[1] else None

    for attempt in range(10):
        topic = "dl-gone-%d" % attempt
        create_topic(one.bootstrap, topic, partitions=2, config=TOPIC_CONFIG)
        leaders = wait_for("both brokers to agree on %s's leaders" % topic, lambda: agreed_leaders(topic))
        mine = sorted(p for p, leader in leaders.items() if leader == 2)
        if mine:
            break
    else:
        raise AssertionError("broker 2 led no partition of ten topics")
    partition = mine[0]
    base = int(time.time() * 1000) - 600_000
    produce_confluent(two.bootstrap, topic, make_records(1500, "gone"), partition=partition,
                      timestamps=[base + 10 * i for i in range(1500)],
                      extra={"linger.ms": 0, "batch.num.messages": 50})
    wait_for("broker 2 to consolidate segments into the tier",
             lambda: len(tier_segments(tier, topic).get(partition, [])) >= 2, timeout=90)
    assert sql(cluster_db, "SELECT count(*) FROM pending_remote_deletions") == [("0",)]

    # Deleted through broker 1, which dies the moment it has answered.
    client = admin(one.bootstrap)
    client.delete_topics([topic], operation_timeout=30)[topic].result(timeout=30)
    one.kill9()
    assert sql(cluster_db, "SELECT count(*) FROM topics WHERE name = '%s'" % topic) == [("0",)]

    # Broker 2 deletes the segments and the pending entries go.
    wait_for("broker 2 to delete the deleted topic's segments",
             lambda: tier_segments(tier, topic) == {}, timeout=60)
    wait_for("the pending remote deletions to be done",
             lambda: sql(cluster_db, "SELECT count(*) FROM pending_remote_deletions") == [("0",)], timeout=60)
    # It was broker 2's doing, for both partitions; broker 1 did none of it.
    log_one, log_two = log_lines(one), log_lines(two)
    deleted = [line for line in log_two if "remote data deleted" in line]
    for p in (0, 1):
        assert any(":%s-%d " % (topic, p) in line for line in deleted), deleted
    assert any("claimed pending remote deletions" in line for line in log_two)
    assert not any("claimed pending remote deletions" in line or "remote data deleted" in line
                   for line in log_one)
    wait_for("broker 2 to forget the topic",
             lambda: topic not in admin(two.bootstrap).list_topics(timeout=10).topics)
