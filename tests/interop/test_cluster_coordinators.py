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
from test_cluster import wait_for

OFFSETS_PARTITIONS = 50


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


def find_coordinator(admin, group, timeout=30):
    """The node FindCoordinator names for `group` (librdkafka's
    DescribeConsumerGroups reports the coordinator it found)."""
    found = admin.describe_consumer_groups([group])[group].result(timeout)
    return found.coordinator.id


def spread(cluster_db):
    """The shards each of brokers 1–3 holds once every broker holds its
    share of the 100 (shards spread by index over the live brokers, about
    33 each), else None."""
    rows = sql(cluster_db, "SELECT owner, count(*) FROM shard_leases WHERE kind <> 'controller' "
                           "AND expires_at > now() AND owner IS NOT NULL GROUP BY owner")
    counts = {int(o): int(c) for o, c in rows}
    # Settled, not merely begun: a test that pauses or kills a broker
    # while it is still handing shards on tests something else.
    settled = sorted(counts) == [1, 2, 3] and sum(counts.values()) == 100 and min(counts.values()) >= 30
    return counts if settled else None


def three_brokers(cluster_db, cluster_factory):
    brokers = {n: cluster_factory(cluster_db, n) for n in (1, 2, 3)}
    wait_for("the coordinator shards to spread over three brokers", lambda: spread(cluster_db), timeout=60)
    return brokers


def test_coordinator_shards_spread_and_find_coordinator_names_the_owner(cluster_db, cluster_factory):
    brokers = three_brokers(cluster_db, cluster_factory)
    admins = {b.bootstrap: AdminClient({"bootstrap.servers": b.bootstrap}) for b in brokers.values()}
    for group in ("alpha", "beta", "gamma", "delta"):
        owner, _ = shard_owner(cluster_db, "__consumer_offsets", shard_of(group))
        for bootstrap, admin in admins.items():
            assert find_coordinator(admin, group) == owner, (group, bootstrap)


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
        assert find_coordinator(admin, group) == moved[0]
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


# --- Split brain and a database outage -----------------------------------------

import os
import signal

from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetCommitResponse

from conftest import create_database
from raw_client import RawConnection

NOT_COORDINATOR = 16
OWNERSHIP_ERRORS = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR


def commit_request(group, topic, partition, offset):
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    return OffsetCommitRequest[8](
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[T(name=topic, partitions=[T.OffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
            committed_metadata=None)])])


def commit_error(response):
    return response.topics[0].partitions[0].error_code


# The admin clients are the test's own, passed in and kept alive until it
# ends: librdkafka must never destroy a client with a request in flight (a
# result that timed out), which can crash the interpreter.

def committed(admin, group, topic, partition):
    """The group's committed offset (None while the coordinator cannot
    answer, so a bounded wait can retry)."""
    future = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, partition)])])[group]
    try:
        return future.result(30).topic_partitions[0].offset
    except KafkaException:
        return None


def alter_committed(admin, group, topic, partition, offset):
    future = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, partition, offset)])])[group]
    result = future.result(30)
    assert result.topic_partitions[0].error is None, result.topic_partitions[0].error


def test_a_paused_coordinator_does_not_write_after_its_shard_moved(cluster_db, cluster_factory):
    brokers = three_brokers(cluster_db, cluster_factory)
    group, shard = "paused-group", shard_of("paused-group")
    victim, epoch = shard_owner(cluster_db, "__consumer_offsets", shard)
    survivors = ",".join(b.bootstrap for n, b in brokers.items() if n != victim)
    creator = AdminClient({"bootstrap.servers": survivors})
    creator.create_topics([NewTopic("paused", num_partitions=1, replication_factor=1)])["paused"].result(30)
    wait_for("the topic on the victim", lambda: "paused" in AdminClient(
        {"bootstrap.servers": brokers[victim].bootstrap}).list_topics(timeout=10).topics)

    with RawConnection(brokers[victim].bootstrap) as conn:
        _, response = conn.call(commit_request(group, "paused", 0, 5), OffsetCommitResponse)
        assert commit_error(response) == 0
        pid = brokers[victim].process.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            moved = wait_for("another broker to take the shard of the paused one", lambda: (
                lambda o: o if o and o[0] != victim else None)(
                shard_owner(cluster_db, "__consumer_offsets", shard)), timeout=30)
            assert moved[1] > epoch
            # Until every survivor's Metadata drops the paused broker, a new
            # client may still learn of it and send it the coordinator lookup
            # (its port accepts and never answers; seen in a full run).
            views = [AdminClient({"bootstrap.servers": b.bootstrap}) for n, b in brokers.items() if n != victim]

            def dropped():
                try:
                    return all(victim not in v.list_topics(timeout=10).brokers for v in views)
                except KafkaException:
                    return False

            wait_for("the survivors to drop the paused broker from Metadata", dropped, timeout=30)

            # And until both name the new owner: one whose view of the
            # shard is a renewal round behind would send the alter to the
            # paused broker, which never answers.
            def name_the_new_owner():
                try:
                    return all(find_coordinator(v, group, timeout=5) == moved[0] for v in views)
                except (KafkaException, TimeoutError):
                    return False

            wait_for("the survivors to name the shard's new owner", name_the_new_owner, timeout=60)
            # A new client: one already connected to the paused broker may
            # send it the lookup and wait on it.
            during = AdminClient({"bootstrap.servers": survivors})
            alter_committed(during, group, "paused", 0, 7)
            # Queued while paused: the first thing the broker reads when it
            # wakes, before any renewal round could tell it what happened.
            conn.send(commit_request(group, "paused", 0, 666))
        finally:
            os.kill(pid, signal.SIGCONT)
        _, response = conn.receive(OffsetCommitResponse, 8)
        assert commit_error(response) == NOT_COORDINATOR, "the woken broker refused to act as coordinator"

    # The database holds the new owner's write, made under its epoch.
    rows = sql(cluster_db, "SELECT epoch FROM coordinator_state WHERE kind = '__consumer_offsets' "
                           "AND shard = %d" % shard)
    assert [int(r[0]) for r in rows] == [moved[1]], rows
    # Clients read what the new owner wrote, through any broker, once the
    # woken broker is back in the cluster (the shard may move back to it).
    readers = [AdminClient({"bootstrap.servers": b.bootstrap}) for b in brokers.values()]
    # Read once the shards have settled again and every broker names their
    # owner: an OffsetFetch that meets a shard in the middle of a move is
    # answered NOT_COORDINATOR, on which librdkafka's admin client (2.16)
    # dereferences the consumer group it does not have and crashes the
    # interpreter (confluent-kafka-javascript#374).
    def settled():
        owner = shard_owner(cluster_db, "__consumer_offsets", shard)
        if not spread(cluster_db) or owner is None:
            return None
        try:
            named = [find_coordinator(reader, group) for reader in readers]
        except KafkaException:
            return None
        return owner if named == [owner[0]] * len(readers) else None

    wait_for("the shards to settle after the broker woke", settled, timeout=60)
    for b, reader in zip(brokers.values(), readers):
        assert wait_for("the committed offset through %s" % b.bootstrap,
                        lambda reader=reader: committed(reader, group, "paused", 0) == 7)


def restart_postgres(server, timeout=60):
    """Starts the killed server again on its data (its crash recovery runs);
    retried while the old backends are still exiting."""
    deadline = time.time() + timeout
    while True:
        try:
            return server.start()
        except RuntimeError:
            if time.time() > deadline:
                raise
            time.sleep(0.5)


def test_brokers_ride_out_kill_9_of_postgres(postgres, cluster_factory):
    db = create_database(postgres.url(), "outage")
    brokers = three_brokers(db, cluster_factory)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    group, shard = "outage-group", shard_of("outage-group")
    owner, _ = shard_owner(db, "__consumer_offsets", shard)
    creator = AdminClient({"bootstrap.servers": bootstrap})
    creator.create_topics([NewTopic("outage", num_partitions=3, replication_factor=1)])["outage"].result(30)
    wait_for("the topic everywhere", lambda: all("outage" in AdminClient(
        {"bootstrap.servers": b.bootstrap}).list_topics(timeout=10).topics for b in brokers.values()))
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(30):
        producer.produce("outage", value=b"before-%d" % i, partition=i % 3)
    assert producer.flush(30) == 0
    alter_committed(creator, group, "outage", 0, 10)

    postgres.kill9()
    try:
        # Once its lease's local deadline passes, the owner stops writing as
        # coordinator: commits are refused, not acknowledged and lost.
        with RawConnection(brokers[owner].bootstrap) as conn:
            def refused():
                _, response = conn.call(commit_request(group, "outage", 0, 99), OffsetCommitResponse)
                return commit_error(response) in OWNERSHIP_ERRORS
            wait_for("the coordinator to refuse commits while the database is down", refused, timeout=15)
        # Classic partitions need no database: produce goes on.
        for i in range(30):
            producer.produce("outage", value=b"during-%d" % i, partition=i % 3)
        assert producer.flush(30) == 0
    finally:
        restart_postgres(postgres)

    # Back: the shards are owned again and nothing acknowledged was lost.
    wait_for("the shards to be owned again", lambda: shard_owner(db, "__consumer_offsets", shard), timeout=60)
    assert wait_for("the commit made before the outage",
                    lambda: committed(creator, group, "outage", 0) == 10, timeout=60)
    alter_committed(creator, group, "outage", 0, 20)
    assert committed(creator, group, "outage", 0) == 20
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "outage-reader",
                         "auto.offset.reset": "earliest"})
    try:
        ends = [consumer.get_watermark_offsets(TopicPartition("outage", p), timeout=10)[1] for p in range(3)]
    finally:
        consumer.close()
    assert ends == [20, 20, 20], "every acknowledged record is there"


# --- Transactions across brokers and a coordinator failover --------------------

TXN_PARTITIONS = 50


def test_a_transaction_coordinator_failover_aborts_the_open_transaction_and_fences_the_zombie(
        cluster_db, cluster_factory):
    brokers = three_brokers(cluster_db, cluster_factory)
    # A transactional id whose coordinator is broker `victim`; the data
    # partitions used are on the two other brokers.
    txn_id = "ctp-txn"
    victim, _ = shard_owner(cluster_db, "__transaction_state", shard_of(txn_id, TXN_PARTITIONS))
    survivors = [n for n in brokers if n != victim]
    bootstrap = ",".join(brokers[n].bootstrap for n in survivors)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, num_partitions=6, replication_factor=1)
                                  for t in ("ctp-in", "ctp-out")]).values():
        f.result(30)

    def leaders(topic):
        t = admin.list_topics(timeout=10).topics.get(topic)
        if not t or len(t.partitions) != 6 or any(m.leader <= 0 for m in t.partitions.values()):
            return None
        return {p: m.leader for p, m in t.partitions.items()}

    out_parts = sorted(p for p, n in wait_for("ctp-out's leaders", lambda: leaders("ctp-out")).items()
                       if n != victim)
    in_parts = sorted(p for p, n in wait_for("ctp-in's leaders", lambda: leaders("ctp-in")).items()
                      if n != victim)
    assert len({leaders("ctp-out")[p] for p in out_parts}) == 2, "output partitions on two brokers"

    feeder = Producer({"bootstrap.servers": bootstrap})
    for i in range(30):
        feeder.produce("ctp-in", value=b"in-%d" % i, partition=in_parts[i % len(in_parts)])
    assert feeder.flush(30) == 0

    def transactional():
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                      "transaction.timeout.ms": 60000})
        p.init_transactions(30)
        return p

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ctp-group",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    consumer.assign([TopicPartition("ctp-in", p) for p in in_parts])

    def transform_round(producer, label, count, commit=True):
        """Consumes `count` inputs and writes them transformed, with the
        offsets, in one transaction."""
        got = []
        deadline = time.time() + 30
        while len(got) < count and time.time() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                got.append(msg)
        assert len(got) == count
        producer.begin_transaction()
        for i, msg in enumerate(got):
            producer.produce("ctp-out", value=label + b":" + msg.value(), partition=out_parts[i % len(out_parts)])
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 30)
        if commit:
            producer.commit_transaction(30)

    zombie = transactional()
    transform_round(zombie, b"first", 10)
    # The second round is left open when the coordinator's broker dies.
    transform_round(zombie, b"open", 10, commit=False)
    assert zombie.flush(30) == 0
    brokers[victim].kill9()
    wait_for("another broker to take the transaction shard", lambda: (
        lambda o: o if o and o[0] != victim else None)(
        shard_owner(cluster_db, "__transaction_state", shard_of(txn_id, TXN_PARTITIONS))), timeout=30)

    # A new instance of the application takes over: InitProducerId on the new
    # coordinator fences the old producer and aborts its open transaction.
    successor = transactional()
    consumer.close()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ctp-group",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    consumer.assign([TopicPartition("ctp-in", p) for p in in_parts])
    transform_round(successor, b"second", 20)

    # The zombie cannot commit what it left open.
    try:
        zombie.commit_transaction(30)
        raise AssertionError("the zombie producer committed")
    except KafkaException as e:
        assert e.args[0].fatal() or e.args[0].txn_requires_abort(), e
    consumer.close()

    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "ctp-reader",
                       "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    reader.assign([TopicPartition("ctp-out", p) for p in out_parts])
    values = []
    deadline = time.time() + 30
    while len(values) < 30 and time.time() < deadline:
        msg = reader.poll(0.2)
        if msg is not None and not msg.error():
            values.append(msg.value())
    extra = reader.poll(2)
    reader.close()
    assert extra is None or extra.error(), "nothing past the committed transactions"
    labels = sorted(v.split(b":")[0] for v in values)
    assert labels == [b"first"] * 10 + [b"second"] * 20, labels
    inputs = sorted(v.split(b":", 1)[1] for v in values)
    assert inputs == sorted(b"in-%d" % i for i in range(30)), "each input transformed exactly once"
    # The group's committed offsets cover every input once.
    assert sum(committed(admin, "ctp-group", "ctp-in", p) for p in in_parts) == 30


def test_kip848_members_keep_their_epochs_when_the_coordinator_moves(cluster_db, cluster_factory):
    """KIP-848 members' epochs and assignments live in the database with
    the group's shard: after kill -9 of the coordinator's broker, the new
    owner accepts their heartbeats as they are (no fencing, no revocation)."""
    from test_kip848 import WatchedMembers

    brokers = three_brokers(cluster_db, cluster_factory)
    group, topic = "moving-848", "moving-848-topic"
    victim, _ = shard_owner(cluster_db, "__consumer_offsets", shard_of(group))
    bootstrap = ",".join(b.bootstrap for n, b in brokers.items() if n != victim)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)])[topic].result(30)
    wait_for("the topic on every broker", lambda: all(topic in AdminClient(
        {"bootstrap.servers": b.bootstrap}).list_topics(timeout=10).topics for b in brokers.values()))
    watched = WatchedMembers(bootstrap, group, topic, ("m0", "m1"))
    members, held, poll_all = watched.members, watched.held, watched.poll

    try:
        wait_for("the group to settle", lambda: poll_all() or all(len(ps) == 2 for ps in held().values()),
                 timeout=60)
        before = held()
        watched.changes_from_now()
        brokers[victim].kill9()
        wait_for("the group's shard on another broker", lambda: (
            lambda o: o and o[0] != victim)(shard_owner(cluster_db, "__consumer_offsets", shard_of(group))))
        # Heartbeats reach the new owner for a while (several intervals).
        deadline = time.time() + 8
        while time.time() < deadline:
            poll_all()
        assert held() == before, "the assignment changed when the coordinator moved"
        assert watched.events == [], "members were fenced or rebalanced: %r" % watched.events
        described = admin.describe_consumer_groups([group])[group].result(30)
        assert described.coordinator.id != victim
        assert sorted(m.client_id for m in described.members) == ["m0", "m1"]
    finally:
        for c in members.values():
            c.close()
