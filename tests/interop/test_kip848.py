"""KIP-848 consumer groups (group.protocol=consumer) with librdkafka:
pattern subscriptions that the broker resolves (SubscribedTopicRegex), and
members that join and leave while they commit, checked record by record."""

import threading
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition

from helpers import admin, create_topic, produce_confluent, wait_for

KIP848 = {"group.protocol": "consumer"}


def consumer(bootstrap, group, name, extra=None):
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": name,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        # Metadata often, so a topic created later is seen soon.
        "topic.metadata.refresh.interval.ms": 1000,
    }
    conf.update(KIP848)
    conf.update(extra or {})
    return Consumer(conf)


def poll_until(c, seen, predicate, timeout, what):
    """Polls `c`, adding (topic, partition, offset, value) to `seen`, until
    `predicate(seen)` holds; fails after `timeout` seconds."""
    deadline = time.time() + timeout
    while not predicate(seen):
        assert time.time() < deadline, "timed out waiting for " + what + "; seen " + repr(sorted(seen))
        msg = c.poll(0.2)
        if msg is None or msg.error():
            continue
        seen.add((msg.topic(), msg.partition(), msg.offset(), msg.value()))


def test_pattern_subscription_is_resolved_by_the_broker(broker):
    """`^rx-.*` with the consumer protocol: librdkafka sends the pattern to
    the broker, which assigns the partitions of every matching topic (and of
    a matching topic created later), never a topic that does not match."""
    b = broker.bootstrap
    for name, partitions in (("rx-a", 2), ("rx-b", 1), ("not-rx", 1)):
        create_topic(b, name, partitions=partitions)
    produce_confluent(b, "rx-a", [(None, b"a0", [])], partition=0)
    produce_confluent(b, "rx-a", [(None, b"a1", [])], partition=1)
    produce_confluent(b, "rx-b", [(None, b"b0", [])], partition=0)
    produce_confluent(b, "not-rx", [(None, b"no", [])], partition=0)

    c = consumer(b, "rx-group", "rx")
    assigned = set()
    c.subscribe(["^rx-.*"], on_assign=lambda _c, ps: assigned.update((p.topic, p.partition) for p in ps))
    seen = set()
    try:
        poll_until(c, seen, lambda s: len(s) >= 3, 60, "the three records of rx-a and rx-b")
        assert {(t, p, v) for t, p, _, v in seen} == {("rx-a", 0, b"a0"), ("rx-a", 1, b"a1"), ("rx-b", 0, b"b0")}
        assert assigned == {("rx-a", 0), ("rx-a", 1), ("rx-b", 0)}

        # The broker's view: one member whose regex covers the two topics.
        client = admin(b)  # keep the handle alive until the future resolves
        group = client.describe_consumer_groups(["rx-group"])["rx-group"].result(timeout=30)
        owned = {(tp.topic, tp.partition) for m in group.members for tp in m.assignment.topic_partitions}
        assert owned == {("rx-a", 0), ("rx-a", 1), ("rx-b", 0)}

        # A topic created now matches: the broker resolves the pattern again.
        create_topic(b, "rx-c", partitions=1)
        produce_confluent(b, "rx-c", [(None, b"c0", [])], partition=0)
        poll_until(c, seen, lambda s: any(t == "rx-c" for t, *_ in s), 60, "the record of the new topic rx-c")
        c.commit(asynchronous=False)
        committed = c.committed([TopicPartition("rx-a", 0), TopicPartition("rx-c", 0)], timeout=10)
        assert [tp.offset for tp in committed] == [1, 1]
    finally:
        c.close()
    assert not any(t == "not-rx" for t, *_ in seen), "a topic outside the pattern was consumed"


class ChurnMember(threading.Thread):
    """A KIP-848 member that commits every 10 records and, in its revocation
    callback, what it consumed of the partitions it gives up; a slow
    callback (as an ETL's flush is) keeps the revocation open for a while.

    Every delivery and every successful commit goes through `ledger`, which
    checks the order of the two across members."""

    def __init__(self, bootstrap, group, topic, name, ledger):
        super().__init__(daemon=True, name=name)
        self.consumer = consumer(bootstrap, group, name)
        self.topic = topic
        self.ledger = ledger
        self.positions = {}
        self.failed_commits = []
        self.stopping = threading.Event()
        self.closed = threading.Event()
        self.error = None

    def commit(self, partitions):
        offsets = [TopicPartition(self.topic, p, self.positions[p]) for p in partitions if p in self.positions]
        if not offsets:
            return
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as e:
            self.failed_commits.append(str(e))
            return
        self.ledger.committed({tp.partition: tp.offset for tp in offsets})

    def on_revoke(self, _consumer, partitions):
        time.sleep(0.5)
        revoked = [p.partition for p in partitions]
        self.commit(revoked)
        for p in revoked:
            self.positions.pop(p, None)

    def run(self):
        try:
            self.consumer.subscribe([self.topic], on_revoke=self.on_revoke)
            since_commit = 0
            while not self.stopping.is_set():
                msg = self.consumer.poll(0.2)
                if msg is None or msg.error():
                    continue
                self.ledger.delivered(self.name, msg.partition(), msg.offset())
                self.positions[msg.partition()] = msg.offset() + 1
                since_commit += 1
                if since_commit >= 10:
                    self.commit(list(self.positions))
                    since_commit = 0
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.error = e
        finally:
            self.consumer.close()  # revokes everything: on_revoke commits
            self.closed.set()

    def stop(self):
        self.stopping.set()
        assert self.closed.wait(60), self.name + " did not close"


class Ledger:
    """Deliveries and successful commits in one order, across members."""

    def __init__(self):
        self.lock = threading.Lock()
        self.committed_up_to = {}
        self.deliveries = []
        self.past_commit = []

    def delivered(self, member, partition, offset):
        with self.lock:
            self.deliveries.append((partition, offset))
            if offset < self.committed_up_to.get(partition, 0):
                self.past_commit.append((member, partition, offset, self.committed_up_to[partition]))

    def committed(self, offsets):
        with self.lock:
            for p, o in offsets.items():
                self.committed_up_to[p] = max(o, self.committed_up_to.get(p, 0))


def test_members_join_and_leave_while_committing(broker):
    """franz-go's TestGroupETL churn with librdkafka: members join and leave
    one after the other while records keep arriving and each member commits
    in its (slow) revocation callback. No record is delivered after a
    commit that covered it, no commit is refused, and every record is
    delivered exactly once."""
    b = broker.bootstrap
    topic, group, partitions = "churn848", "churn848-group", 4
    create_topic(b, topic, partitions=partitions)
    ledger = Ledger()
    produced = {p: 0 for p in range(partitions)}

    def produce(n):
        for p in range(partitions):
            produce_confluent(b, topic, [(None, b"%d-%d" % (p, produced[p] + i), []) for i in range(n)], partition=p)
            produced[p] += n

    produce(50)
    members = [ChurnMember(b, group, topic, "m0", ledger), ChurnMember(b, group, topic, "m1", ledger)]
    for m in members:
        m.start()
    gone = []
    try:
        for step in range(2, 6):
            wait_for(lambda: len(ledger.deliveries) >= sum(produced.values()) * 3 // 4, timeout=90,
                     what="most records delivered before step %d" % step)
            produce(50)
            joining = ChurnMember(b, group, topic, "m%d" % step, ledger)
            joining.start()
            members.append(joining)
            time.sleep(2)  # the rebalance is under way while the oldest member leaves
            leaving = members.pop(0)
            leaving.stop()
            gone.append(leaving)
        total = sum(produced.values())
        wait_for(lambda: len(set(ledger.deliveries)) >= total, timeout=120, what="every record delivered")
    finally:
        for m in members:
            m.stop()
    everyone = gone + members
    assert [m.error for m in everyone if m.error] == []
    assert ledger.past_commit == [], "records delivered again after a commit covered them"
    assert [f for m in everyone for f in m.failed_commits] == [], "commits refused"
    expected = {(p, o) for p in range(partitions) for o in range(produced[p])}
    assert set(ledger.deliveries) == expected
    assert len(ledger.deliveries) == len(expected), "a record was delivered twice"
    # What the group committed is where every partition ends.
    check = consumer(b, group, "check")
    try:
        committed = check.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    finally:
        check.close()
    assert {tp.partition: tp.offset for tp in committed} == produced


class WatchedMembers:
    """KIP-848 members of `group` subscribed to `topic`, one per name, whose
    assign / revoke / lost callbacks after `changes_from_now()` are
    recorded in `events` as (member, callback, partitions)."""

    def __init__(self, bootstrap, group, topic, names):
        self.events = []
        self._watching = threading.Event()
        self.members = {}
        for name in names:
            c = consumer(bootstrap, group, name)
            c.subscribe([topic], on_assign=self._recorder(name, "assign"),
                        on_revoke=self._recorder(name, "revoke"), on_lost=self._recorder(name, "lost"))
            self.members[name] = c

    def _recorder(self, name, kind):
        def record(_c, ps):
            if self._watching.is_set():
                self.events.append((name, kind, sorted(p.partition for p in ps)))
        return record

    def changes_from_now(self):
        self._watching.set()

    def held(self):
        """Each member's partitions."""
        return {name: sorted(tp.partition for tp in c.assignment()) for name, c in self.members.items()}

    def poll(self):
        for c in self.members.values():
            c.poll(0.1)


def test_members_keep_their_epochs_across_a_broker_restart(broker):
    """Two KIP-848 members hold two partitions each; the broker restarts.
    The coordinator reloads their epochs and assignments from
    `__consumer_offsets`, so their next heartbeats are accepted as they are:
    no member is fenced (librdkafka would report the partitions lost and
    assign them again), nothing is revoked, and each goes on consuming its
    own partitions."""
    b = broker.bootstrap
    topic, group, partitions = "restart848", "restart848-group", 4
    create_topic(b, topic, partitions=partitions)
    watched = WatchedMembers(b, group, topic, ("r0", "r1"))
    members, held = watched.members, watched.held
    try:
        deadline = time.time() + 60
        while not (all(len(ps) == 2 for ps in held().values())):
            assert time.time() < deadline, "the group never settled: %r" % held()
            for c in members.values():
                c.poll(0.1)
        before = held()
        client = admin(b)
        described = client.describe_consumer_groups([group])[group].result(timeout=30)
        ids_before = sorted(m.member_id for m in described.members)

        watched.changes_from_now()
        broker.restart()
        # Records on every partition: each member must read those of its own.
        for p in range(partitions):
            produce_confluent(b, topic, [(None, b"after-%d" % p, [])], partition=p)
        seen = {name: set() for name in members}
        deadline = time.time() + 90
        while any(len(s) < 2 for s in seen.values()):
            assert time.time() < deadline, "records not consumed after the restart: %r" % seen
            for name, c in members.items():
                msg = c.poll(0.1)
                if msg is not None and not msg.error():
                    seen[name].add(msg.partition())
        assert {name: sorted(s) for name, s in seen.items()} == before
        assert held() == before, "the assignment changed across the restart"
        assert watched.events == [], "members were fenced or rebalanced: %r" % watched.events
        client = admin(b)
        described = client.describe_consumer_groups([group])[group].result(timeout=30)
        assert sorted(m.member_id for m in described.members) == ids_before
        owned = {m.member_id: sorted(tp.partition for tp in m.assignment.topic_partitions)
                 for m in described.members}
        assert sorted(owned.values()) == sorted(before.values())
    finally:
        for c in members.values():
            c.close()
