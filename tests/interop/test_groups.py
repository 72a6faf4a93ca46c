"""Consumer groups against krabka: the classic group protocol with real
clients (librdkafka via confluent-kafka, kafka-python, kcat), committed
offsets across a broker restart, and the admin views of groups."""

import subprocess
import threading
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition
from kafka import KafkaConsumer
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.structs import OffsetAndMetadata
from kafka.structs import TopicPartition as KafkaTopicPartition

from conftest import kcat_path
from helpers import admin, create_topic, produce_confluent

PARTITIONS = 8


def wait_until(predicate, timeout=90, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError("timed out waiting for " + what)


class ConfluentMember(threading.Thread):
    """A librdkafka group member that commits every record synchronously and
    records it only once that commit succeeded."""

    def __init__(self, bootstrap, group, topic, name, extra=None):
        super().__init__(daemon=True, name=name)
        conf = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
        if (extra or {}).get("group.protocol") != "consumer":
            # The KIP-848 protocol takes these from the broker instead.
            conf.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
        conf.update(extra or {})
        self.consumer = Consumer(conf)
        self.topic = topic
        self.lock = threading.Lock()
        self.assigned = set()
        self.assign_calls = 0
        self.committed = []
        self.stopping = threading.Event()
        self.closed = threading.Event()

    # Incremental, so both the eager classic protocol (whole assignment
    # revoked, then assigned) and KIP-848 (only the changes) are tracked.
    def _on_assign(self, consumer, partitions):
        with self.lock:
            self.assigned |= {p.partition for p in partitions}
            self.assign_calls += 1

    def _on_revoke(self, consumer, partitions):
        with self.lock:
            self.assigned -= {p.partition for p in partitions}

    def run(self):
        self.consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        try:
            while not self.stopping.is_set():
                msg = self.consumer.poll(0.2)
                if msg is None or msg.error():
                    continue
                try:
                    self.consumer.commit(message=msg, asynchronous=False)
                except KafkaException:
                    continue  # not committed: it will be delivered again
                with self.lock:
                    self.committed.append((msg.partition(), msg.offset()))
        finally:
            self.consumer.close()
            self.closed.set()

    def assignment(self):
        with self.lock:
            return set(self.assigned)

    def stop(self):
        self.stopping.set()
        self.closed.wait(30)


class KafkaPythonMember(threading.Thread):
    """The same member behaviour with kafka-python."""

    def __init__(self, bootstrap, group, topic, name):
        super().__init__(daemon=True, name=name)
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=name,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=10000,
            heartbeat_interval_ms=500,
        )
        self.topic = topic
        self.lock = threading.Lock()
        self.assigned = set()
        self.committed = []
        self.stopping = threading.Event()
        self.closed = threading.Event()

    def run(self):
        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                with member.lock:
                    member.assigned = set()

            def on_partitions_assigned(self, assigned):
                with member.lock:
                    member.assigned = {tp.partition for tp in assigned}

        self.consumer.subscribe([self.topic], listener=Listener())
        try:
            while not self.stopping.is_set():
                batches = self.consumer.poll(timeout_ms=200)
                for tp, records in batches.items():
                    for r in records:
                        try:
                            self.consumer.commit({tp: OffsetAndMetadata(r.offset + 1, "", -1)})
                        except Exception:  # CommitFailedError and friends
                            continue
                        with self.lock:
                            self.committed.append((tp.partition, r.offset))
        finally:
            self.consumer.close()
            self.closed.set()

    def assignment(self):
        with self.lock:
            return set(self.assigned)

    def stop(self):
        self.stopping.set()
        self.closed.wait(30)


def assignments_cover(members, partitions=PARTITIONS):
    """Every partition is assigned to exactly one member, and every member has one."""
    sets = [m.assignment() for m in members]
    if any(not s for s in sets):
        return False
    total = sum(len(s) for s in sets)
    union = set().union(*sets)
    return total == partitions and union == set(range(partitions))


def produce_round(bootstrap, topic, per_partition, tag):
    for p in range(PARTITIONS):
        records = [(b"k", ("%s-%d-%d" % (tag, p, i)).encode(), []) for i in range(per_partition)]
        produce_confluent(bootstrap, topic, records, partition=p)


def all_committed(members):
    out = []
    for m in members:
        with m.lock:
            out.extend(m.committed)
    return out


def test_four_members_share_partitions_and_rebalance_without_loss_or_duplicates(broker):
    topic, group = "grp-eight", "four-members"
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    produce_round(broker.bootstrap, topic, 50, "first")
    members = [ConfluentMember(broker.bootstrap, group, topic, "rdkafka-%d" % i) for i in range(3)]
    members.append(KafkaPythonMember(broker.bootstrap, group, topic, "kafka-python"))
    for m in members:
        m.start()
    try:
        wait_until(lambda: assignments_cover(members), what="four disjoint assignments covering 8 partitions")
        wait_until(lambda: len(all_committed(members)) >= 400, what="first 400 records committed")

        # The admin views agree.
        a = admin(broker.bootstrap)
        listed = a.list_consumer_groups().result(timeout=30)
        assert group in {g.group_id for g in listed.valid}
        described = a.describe_consumer_groups([group])[group].result(timeout=30)
        assert len(described.members) == 4
        assert described.partition_assignor in ("range", "roundrobin")
        owned = [tp.partition for m in described.members for tp in m.assignment.topic_partitions]
        assert sorted(owned) == list(range(PARTITIONS))

        # One member leaves: the other three take over every partition.
        leaving = members.pop(0)
        leaving.stop()
        wait_until(lambda: assignments_cover(members), what="three members covering 8 partitions")
        produce_round(broker.bootstrap, topic, 50, "second")
        wait_until(lambda: len(all_committed(members + [leaving])) >= 800, what="all 800 records committed")
    finally:
        for m in members:
            m.stop()
    committed = all_committed(members + [leaving])
    assert len(committed) == len(set(committed)), "a record was committed twice"
    expected = {(p, o) for p in range(PARTITIONS) for o in range(100)}
    assert set(committed) == expected, "a record was lost"


def test_committed_offsets_survive_a_restart(broker):
    topic, group = "resume", "resume-group"
    create_topic(broker.bootstrap, topic, partitions=2)
    for p in range(2):
        produce_confluent(broker.bootstrap, topic, [(None, b"v%d" % i, []) for i in range(10)], partition=p)

    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    consumer.subscribe([topic])
    seen = 0
    deadline = time.time() + 60
    while seen < 7 and time.time() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        consumer.commit(message=msg, asynchronous=False)
        seen += 1
    assert seen == 7
    before = {tp.partition: tp.offset for tp in consumer.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)}
    consumer.close()

    # A simple (manually assigned) kafka-python consumer commits without joining.
    simple = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="simple-group", enable_auto_commit=False)
    tp0 = KafkaTopicPartition(topic, 0)
    simple.assign([tp0])
    simple.commit({tp0: OffsetAndMetadata(4, "note", -1)})
    simple.close()

    broker.restart()

    resumed = Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    after = {tp.partition: tp.offset for tp in resumed.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)}
    assert after == before
    resumed.subscribe([topic])
    first = {}
    total = 0
    deadline = time.time() + 60
    while total < 13 and time.time() < deadline:
        msg = resumed.poll(0.5)
        if msg is None or msg.error():
            continue
        first.setdefault(msg.partition(), msg.offset())
        total += 1
    resumed.close()
    assert total == 13, "resumed from the committed offsets, nothing re-read"
    for p, offset in first.items():
        assert offset == max(before[p], 0)

    check = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="simple-group", enable_auto_commit=False)
    assert check.committed(tp0) == 4
    check.close()


def test_kcat_balanced_consumer_commits(broker):
    kcat = kcat_path()
    assert kcat, "kcat is not installed"
    topic = "kcat-group"
    create_topic(broker.bootstrap, topic, partitions=2)
    for p in range(2):
        produce_confluent(broker.bootstrap, topic, [(None, b"r%d" % i, []) for i in range(10)], partition=p)
    cmd = [
        kcat, "-b", broker.bootstrap, "-G", "kcat-g", topic, "-e", "-q",
        "-f", "%p:%o\\n", "-X", "auto.offset.reset=earliest",
    ]
    out = subprocess.run(cmd, capture_output=True, timeout=90, check=True).stdout.decode().split()
    assert sorted(out) == sorted("%d:%d" % (p, o) for p in range(2) for o in range(10))
    # The second run starts from what the first committed: nothing left.
    again = subprocess.run(cmd, capture_output=True, timeout=90, check=True).stdout.decode().split()
    assert again == []


def test_static_member_restart_causes_no_rebalance(broker):
    topic, group = "static", "static-group"
    create_topic(broker.bootstrap, topic, partitions=4)
    static = {"session.timeout.ms": 30000}
    a = ConfluentMember(broker.bootstrap, group, topic, "a", dict(static, **{"group.instance.id": "inst-a"}))
    b = ConfluentMember(broker.bootstrap, group, topic, "b", dict(static, **{"group.instance.id": "inst-b"}))
    a.start()
    b.start()
    try:
        wait_until(lambda: assignments_cover([a, b], 4), what="two static members covering 4 partitions")
        time.sleep(2)
        b_assign_calls, a_partitions = b.assign_calls, a.assignment()
        a.stop()  # a static member does not leave on close
        a2 = ConfluentMember(broker.bootstrap, group, topic, "a2", dict(static, **{"group.instance.id": "inst-a"}))
        a2.start()
        wait_until(lambda: a2.assignment() == a_partitions, what="the restarted member getting its partitions back")
        time.sleep(3)
        assert b.assign_calls == b_assign_calls, "the other member saw a rebalance"
        a2.stop()
    finally:
        b.stop()


def test_consumer_protocol_members_share_and_hand_over_partitions(broker):
    """KIP-848 (group.protocol=consumer): server-side assignment, handover
    on leave, every record committed exactly once."""
    topic, group = "kip848", "kip848-group"
    create_topic(broker.bootstrap, topic, partitions=4)
    for p in range(4):
        produce_confluent(broker.bootstrap, topic, [(None, b"a%d" % i, []) for i in range(25)], partition=p)
    extra = {"group.protocol": "consumer"}
    members = [ConfluentMember(broker.bootstrap, group, topic, "new-%d" % i, extra) for i in range(2)]
    for m in members:
        m.start()
    try:
        wait_until(lambda: assignments_cover(members, 4), what="two KIP-848 members covering 4 partitions")
        wait_until(lambda: len(all_committed(members)) >= 100, what="first 100 records committed")
        leaving = members.pop(0)
        leaving.stop()
        wait_until(lambda: members[0].assignment() == set(range(4)), what="the remaining member owning all 4")
        for p in range(4):
            produce_confluent(broker.bootstrap, topic, [(None, b"b%d" % i, []) for i in range(25)], partition=p)
        wait_until(lambda: len(all_committed(members + [leaving])) >= 200, what="all 200 records committed")
    finally:
        for m in members:
            m.stop()
    committed = all_committed(members + [leaving])
    assert len(committed) == len(set(committed)), "a record was committed twice"
    assert set(committed) == {(p, o) for p in range(4) for o in range(50)}


CRASHING_MEMBER = r"""
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "client.id": "crasher",
              "enable.auto.commit": False, "auto.offset.reset": "earliest",
              "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
def on_assign(consumer, partitions):
    print("assigned", len(partitions), flush=True)
c.subscribe([sys.argv[3]], on_assign=on_assign)
while True:
    c.poll(0.2)
"""


def test_crashed_member_is_expired_and_its_partitions_reassigned(broker):
    """kill -9 of a member: no LeaveGroup, the session timeout removes it."""
    import sys

    topic, group = "crash", "crash-group"
    create_topic(broker.bootstrap, topic, partitions=4)
    survivor = ConfluentMember(broker.bootstrap, group, topic, "survivor")
    survivor.start()
    crasher = subprocess.Popen(
        [sys.executable, "-c", CRASHING_MEMBER, broker.bootstrap, group, topic],
        stdout=subprocess.PIPE,
    )
    try:
        wait_until(lambda: 0 < len(survivor.assignment()) < 4, what="the partitions shared with the crasher")
        crasher.kill()
        crasher.wait()
        wait_until(lambda: survivor.assignment() == set(range(4)), what="the survivor owning all 4 partitions")
    finally:
        if crasher.poll() is None:
            crasher.kill()
        survivor.stop()


def test_group_settings_internal_topics_and_client_host(broker_factory):
    """Group settings are validated broker settings; __consumer_offsets is
    flagged internal in Metadata; DescribeGroups names the member's host."""
    import pytest

    with pytest.raises(RuntimeError, match="group.max.size"):
        broker_factory({"group.max.size": "0"})
    broker = broker_factory({"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"})
    topic, group = "settings", "settings-group"
    create_topic(broker.bootstrap, topic, partitions=2)
    # Below Kafka's default group.min.session.timeout.ms (6000), so this join
    # only works because the override reached the coordinator.
    m = ConfluentMember(broker.bootstrap, group, topic, "short-session", {"session.timeout.ms": 2000})
    m.start()
    try:
        wait_until(lambda: m.assignment() == {0, 1}, what="the member owning both partitions")
        a = admin(broker.bootstrap)
        described = a.describe_consumer_groups([group])[group].result(timeout=30)
        assert [member.host for member in described.members] == ["/127.0.0.1"]
    finally:
        m.stop()

    listed = a.list_topics(timeout=30).topics
    assert "__consumer_offsets" in listed and topic in listed
    from confluent_kafka import TopicCollection

    desc = a.describe_topics(TopicCollection(["__consumer_offsets", topic]))
    assert desc["__consumer_offsets"].result(timeout=30).is_internal
    assert not desc[topic].result(timeout=30).is_internal
    # kafka-python leaves internal topics out of its topic listing.
    kp = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        names = kp.topics()
        assert topic in names and "__consumer_offsets" not in names
    finally:
        kp.close()
