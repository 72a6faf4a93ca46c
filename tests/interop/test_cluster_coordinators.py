"""Cluster mode: coordinators move between brokers with their shard leases.

Each partition of `__consumer_offsets` and `__transaction_state` is a shard
owned by the broker holding its lease in PostgreSQL; its state lives in the
database. These tests kill, pause and restart the owner and check what
clients and the database see.
"""

import threading
import time

from confluent_kafka import ConsumerGroupTopicPartitions, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import sql

OFFSETS_PARTITIONS = 50


def wait_for(what, check, timeout=30):
    deadline = time.time() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.time() < deadline, "timed out waiting for " + what
        time.sleep(0.1)


def java_hash(text):
    """Java's String.hashCode (for ASCII), as Kafka uses it."""
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def shard_of(key, partitions=OFFSETS_PARTITIONS):
    """Kafka's coordinator partition: abs(hashCode) % partitions."""
    return abs(java_hash(key)) % partitions


def shard_owner(db, kind, shard):
    """The live owner of a shard in the database, or None."""
    rows = sql(db, "SELECT owner, epoch FROM shard_leases WHERE kind = '%s' AND shard = %d "
                   "AND expires_at > now() AND owner IS NOT NULL" % (kind, shard))
    return (int(rows[0][0]), int(rows[0][1])) if rows else None


def find_coordinator(bootstrap, group):
    """The node FindCoordinator names for `group` (librdkafka's
    DescribeConsumerGroups reports the coordinator it found)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(30).coordinator.id


def three_brokers(cluster_db, cluster_factory):
    brokers = {n: cluster_factory(cluster_db, n) for n in (1, 2, 3)}

    def spread():
        # Every broker holds its share of the 100 shards (shards spread by
        # index over the live brokers, about 33 each).
        rows = sql(cluster_db, "SELECT owner, count(*) FROM shard_leases WHERE kind <> 'controller' "
                               "AND expires_at > now() AND owner IS NOT NULL GROUP BY owner")
        counts = {int(o): int(c) for o, c in rows}
        return counts if sorted(counts) == [1, 2, 3] and sum(counts.values()) == 100 else None

    wait_for("the coordinator shards to spread over three brokers", spread, timeout=60)
    return brokers


def test_coordinator_shards_spread_and_find_coordinator_names_the_owner(cluster_db, cluster_factory):
    brokers = three_brokers(cluster_db, cluster_factory)
    for group in ("alpha", "beta", "gamma", "delta"):
        owner, _ = shard_owner(cluster_db, "__consumer_offsets", shard_of(group))
        for b in brokers.values():
            assert find_coordinator(b.bootstrap, group) == owner, (group, b.bootstrap)


def test_a_group_survives_kill_9_of_its_coordinator(cluster_db, cluster_factory):
    brokers = three_brokers(cluster_db, cluster_factory)
    group = "failover-group"
    shard = shard_of(group)
    victim, epoch = shard_owner(cluster_db, "__consumer_offsets", shard)
    survivors = [n for n in brokers if n != victim]
    bootstrap = ",".join(brokers[n].bootstrap for n in survivors)

    admin = AdminClient({"bootstrap.servers": brokers[survivors[0]].bootstrap})
    admin.create_topics([NewTopic("moving", num_partitions=6, replication_factor=1)])["moving"].result(30)
    leaders = wait_for("the topic's leaders", lambda: (lambda t: {
        p: m.leader for p, m in t.partitions.items()} if t and len(t.partitions) == 6 and all(
        m.leader > 0 for m in t.partitions.values()) else None)(
        admin.list_topics(timeout=10).topics.get("moving")))
    # Records only on partitions of the brokers that stay up, so the group
    # can finish while the victim is down.
    live_parts = sorted(p for p, leader in leaders.items() if leader != victim)
    assert live_parts, leaders

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})

    def produce(first, count):
        for i in range(first, first + count):
            producer.produce("moving", value=b"%d" % i, partition=live_parts[i % len(live_parts)])
        assert producer.flush(30) == 0

    produce(0, 300)
    consumers = [Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
    }) for _ in range(4)]
    for c in consumers:
        c.subscribe(["moving"])

    seen = {}  # (partition, offset) -> times consumed
    uncommitted = set()  # records whose commit failed (may be read again)
    lock = threading.Lock()
    stop = threading.Event()

    def consume(c):
        while not stop.is_set():
            msg = c.poll(0.2)
            if msg is None or msg.error():
                continue
            key = (msg.partition(), msg.offset())
            with lock:
                seen[key] = seen.get(key, 0) + 1
            try:
                c.commit(message=msg, asynchronous=False)
            except KafkaException:
                with lock:
                    uncommitted.add(key)

    threads = [threading.Thread(target=consume, args=(c,)) for c in consumers]
    for t in threads:
        t.start()
    try:
        wait_for("the first 300 records", lambda: len(seen) >= 300, timeout=60)
        brokers[victim].kill9()
        # Another live broker takes the shard once the lease lapses (2 s).
        moved = wait_for("another broker to take the group's shard", lambda: (
            lambda o: o if o and o[0] != victim else None)(
            shard_owner(cluster_db, "__consumer_offsets", shard)), timeout=30)
        assert moved[1] > epoch, "a new lease epoch"
        assert find_coordinator(brokers[survivors[0]].bootstrap, group) == moved[0]
        produce(300, 300)
        wait_for("all 600 records after the failover", lambda: len(seen) >= 600, timeout=90)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
        for c in consumers:
            c.close()
        producer.flush(10)

    # No record consumed twice past its commit: only a record whose commit
    # failed in the failover may have been read again.
    twice = {k for k, n in seen.items() if n > 1}
    assert twice <= uncommitted, sorted(twice - uncommitted)
    assert len(seen) == 600

    # No committed offset lost: the new owner serves every commit.
    offsets = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition("moving", p) for p in live_parts])]
    )[group].result(30)
    ends = {p: admin_end(brokers, survivors, p) for p in live_parts}
    assert {tp.partition: tp.offset for tp in offsets.topic_partitions} == ends
    rows = sql(cluster_db, "SELECT count(*) FROM coordinator_state WHERE kind = '__consumer_offsets' "
                           "AND shard = %d" % shard)
    assert int(rows[0][0]) >= len(live_parts) + 1, "the offsets and the group live in the database"


def admin_end(brokers, survivors, partition):
    c = Consumer({"bootstrap.servers": brokers[survivors[0]].bootstrap, "group.id": "probe"})
    try:
        return c.get_watermark_offsets(TopicPartition("moving", partition), timeout=10)[1]
    finally:
        c.close()
