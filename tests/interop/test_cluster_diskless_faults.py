"""Diskless topics in a three-broker cluster under faults (issue 18's
cluster list): PostgreSQL is the batch coordinator, the store is S3 on
moto, reached through a `TcpProxy` so a test can take it away.

- confluent-kafka, kafka-python and kcat write through all three brokers
  and read back through every one: byte-identical keys, values and
  headers, several codecs, offsets dense from 0; an idempotent producer's
  retries through other brokers are answered with the original offsets;
- DeleteRecords and retention remove batches and the cleaner deletes their
  objects from the bucket;
- kill -9 of a broker under acks=all load with a consumer group reading:
  every acknowledged record once, the group reads everything;
- the store unreachable for 30 s, then PostgreSQL killed and restarted:
  retriable errors while they are away, nothing acknowledged lost,
  production resumes, and the objects uploaded while their commits failed
  leave the bucket.
"""

import subprocess
import threading
import time
import urllib.parse
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from kafka.protocol.consumer.fetch import FetchResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse
from kafka.record import MemoryRecords

from conftest import create_database, kcat_path, sql
from helpers import (
    as_tuples, consume_confluent, create_topic, make_records, produce_confluent, record_batch, wait_for,
    wait_for_cluster,
)
from objstore import TcpProxy, create_bucket, list_keys, s3_broker_settings
from raw_client import RawConnection, fetch_request
from test_cluster_coordinators import committed, restart_postgres, shard_of, shard_owner
from test_cluster_diskless import NOT_YET
from test_diskless import s3_endpoint, watermarks  # noqa: F401 (s3_endpoint: the module's moto)

DISKLESS = {"diskless.enable": "true"}
PREFIX = "faults"
STORE = "krabka.diskless.storage.config."
# Short intervals keep the tests quick: objects close after 20 ms, the
# cleaner runs every 300 ms with no grace, and a store that refuses
# connections fails an upload in about two seconds (two attempts per PUT,
# five PUTs) instead of the defaults' minute or so.
FAST = {
    "diskless.commit.interval.ms": "20",
    "diskless.cleaner.interval.ms": "300",
    "diskless.cleaner.grace.period.ms": "0",
    STORE + "retries": "1",
    STORE + "retry.backoff.ms": "50",
    STORE + "retry.backoff.max.ms": "100",
    STORE + "retry.timeout.ms": "1000",
    STORE + "request.timeout.ms": "5000",
    STORE + "connect.timeout.ms": "1000",
}
KAFKA_STORAGE_ERROR = 56
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
# What a broker may answer a produce while the store or the database is
# away: Kafka's retriable codes (KAFKA_STORAGE_ERROR is what it does answer;
# REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION
# would be as good).
RETRIABLE = {KAFKA_STORAGE_ERROR, 7, 6, 3}


def diskless_store_settings(endpoint, bucket, prefix):
    """The remote tier's S3 settings (objstore) under the diskless store's
    prefix: the issue gives both stores the same setting names."""
    out = {}
    for key, value in s3_broker_settings(endpoint, bucket, prefix).items():
        if key == "krabka.remote.log.storage.manager":
            out["krabka.diskless.storage"] = value
        else:
            out[STORE + key[len("rsm.config."):]] = value
    return out


class DisklessCluster:
    """Three brokers of one cluster whose diskless store is a moto bucket
    behind `proxy`; `admins` are kept for the whole test (librdkafka must
    not destroy a client with a request in flight)."""

    def __init__(self, db, brokers, proxy, s3, bucket):
        self.db = db
        self.brokers = brokers
        self.proxy = proxy
        self.s3 = s3
        self.bucket = bucket
        self.admins = {}

    def live(self):
        return {n: b for n, b in self.brokers.items() if b.alive()}

    def bootstrap(self):
        """The live brokers, for clients."""
        return ",".join(b.bootstrap for b in self.live().values())

    def admin(self, node):
        if node not in self.admins:
            self.admins[node] = AdminClient({"bootstrap.servers": self.brokers[node].bootstrap})
        return self.admins[node]

    def keys(self):
        """The objects in the bucket (moto, not through the proxy)."""
        return set(list_keys(self.s3, self.bucket, PREFIX + "/"))

    def live_object_keys(self):
        """The objects PostgreSQL says hold a live batch."""
        rows = sql(self.db, "SELECT DISTINCT o.object_key FROM diskless_objects o "
                            "JOIN diskless_batches b USING (object_id)")
        return {r[0] for r in rows}

    def leaders(self, topic, partitions, node):
        """{partition: leader} as broker `node` reports it, once it names a
        live leader for every partition (None before)."""
        md = self.admin(node).list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        live = set(self.live())
        if t is None or t.error or len(t.partitions) != partitions or {b for b in md.brokers} != live:
            return None
        found = {p: m.leader for p, m in t.partitions.items()}
        return found if set(found.values()) <= live and not any(m.error for m in t.partitions.values()) else None

    def create_topic(self, topic, partitions, config=None):
        """Creates a diskless topic and waits until every live broker names
        the same live leader for each partition; returns those leaders."""
        create_topic(self.bootstrap(), topic, partitions=partitions, config={**DISKLESS, **(config or {})})
        return self.agreed_leaders(topic, partitions)

    def agreed_leaders(self, topic, partitions, timeout=60):
        def agreed():
            views = [self.leaders(topic, partitions, n) for n in self.live()]
            return views[0] if views[0] and all(v == views[0] for v in views) else None

        return wait_for(agreed, timeout=timeout, what="every broker to agree on %s's leaders" % topic)


@pytest.fixture
def diskless_cluster(cluster_factory, s3_endpoint):  # noqa: F811
    """`diskless_cluster(db)` starts brokers 1, 2 and 3 on database `db`
    with a fresh bucket behind a fresh proxy; afterwards it stops the
    brokers (while the store is still reachable) and the proxy."""
    made = []

    def make(db, overrides=None):
        bucket = "krabka-dlf-%s" % uuid.uuid4().hex[:10]
        create_bucket(s3_endpoint, bucket)
        proxy = TcpProxy(urllib.parse.urlparse(s3_endpoint).port)
        settings = {**FAST, **diskless_store_settings(proxy.endpoint, bucket, PREFIX), **(overrides or {})}
        cluster = DisklessCluster(db, {}, proxy, s3_endpoint, bucket)
        made.append(cluster)
        for node in (1, 2, 3):
            cluster.brokers[node] = cluster_factory(db, node, settings)
        wait_for_cluster([b.bootstrap for b in cluster.brokers.values()], timeout=60)
        return cluster

    yield make
    for cluster in made:
        cluster.admins.clear()  # idle now; gone before their brokers
        cluster.proxy.forward()
        try:
            for b in cluster.brokers.values():
                if b.alive():
                    code = b.stop()
                    if code != 0:
                        print(b.log())
        finally:
            cluster.proxy.close()


# --- Raw requests to one chosen broker ---------------------------------------


def raw_records(broker, topic, partition, offset=0):
    """What `broker` itself returns from `offset` (not the leader Metadata
    names): [(offset, key, value, headers)], read to the end."""
    out = []
    deadline = time.time() + 60
    while True:
        with RawConnection(broker.bootstrap) as conn:
            _, response = conn.call(fetch_request([(topic, partition, offset)]), FetchResponse)
        p = response.responses[0].partitions[0]
        if p.error_code in NOT_YET and time.time() < deadline:
            time.sleep(0.2)
            continue
        assert p.error_code == 0, "fetch through port %d failed with %d" % (broker.port, p.error_code)
        records = MemoryRecords(bytes(p.records or b""))
        got = []
        while records.has_next():
            for r in records.next_batch():
                got.append((r.offset, r.key, r.value, [(k, v) for k, v in r.headers]))
        if not got:
            return out
        out += got
        offset = got[-1][0] + 1


def init_producer_id(broker):
    with RawConnection(broker.bootstrap) as conn:
        _, r = conn.call(InitProducerIdRequest[1](transactional_id=None, transaction_timeout_ms=60000),
                         InitProducerIdResponse)
    assert r.error_code == 0, r
    return r.producer_id, r.producer_epoch


def raw_produce(broker, topic, partition, records, timeout=60, until_open=False):
    """Sends one acks=all produce to `broker` itself: (error code, base
    offset); with `until_open`, again while the broker has not opened the
    partition yet (nothing was appended then)."""
    T = ProduceRequest.TopicProduceData
    deadline = time.time() + timeout
    while True:
        request = ProduceRequest[9](
            transactional_id=None, acks=-1, timeout_ms=30000,
            topic_data=[T(name=topic, partition_data=[T.PartitionProduceData(index=partition, records=records)])])
        with RawConnection(broker.bootstrap, timeout=timeout) as conn:
            _, response = conn.call(request, ProduceResponse)
        p = response.responses[0].partition_responses[0]
        if until_open and p.error_code in NOT_YET and time.time() < deadline:
            time.sleep(0.2)
            continue
        return p.error_code, p.base_offset


# --- Tests -------------------------------------------------------------------


def kcat(*args, stdin=None):
    return subprocess.run([kcat_path(), *args], input=stdin, capture_output=True, timeout=60,
                          check=True).stdout


def kcat_records(bootstrap, topic, partition):
    """kcat's view of a partition, byte for byte: [(offset, key, value,
    headers)] parsed from a length-prefixed output format."""
    out = kcat("-b", bootstrap, "-C", "-t", topic, "-p", str(partition), "-o", "beginning", "-e",
               "-f", "%o:%K:%S:%k%s|%h\n")
    records, pos = [], 0
    while pos < len(out):
        fields = []
        for _ in range(3):
            end = out.index(b":", pos)
            fields.append(int(out[pos:end]))
            pos = end + 1
        offset, key_len, value_len = fields
        key = out[pos:pos + key_len] if key_len >= 0 else None
        pos += max(key_len, 0)
        value = out[pos:pos + value_len] if value_len >= 0 else None
        pos += max(value_len, 0)
        assert out[pos:pos + 1] == b"|", out[pos:pos + 20]
        end = out.index(b"\n", pos)
        headers = [tuple(h.split(b"=", 1)) for h in out[pos + 1:end].split(b",") if h]
        records.append((offset, key, value, [(k.decode(), v) for k, v in headers]))
        pos = end + 1
    return records


def test_three_clients_write_and_read_through_all_three_brokers(cluster_db, diskless_cluster):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KpPartition

    c = diskless_cluster(cluster_db)
    # 24 partitions: each broker leads some (rendezvous hashing of a random
    # topic id), so a client writing one partition per broker talks to all
    # three, and every partition holds batches of all three clients. Once
    # failed in CI with a broker leading none: the brokers agree on leaders
    # over the brokers they see live, and a lease renewed late on a loaded
    # machine leaves one out for a while. So wait until all three lead some,
    # and take another topic in the rare case its id leaves one out.
    def all_three_lead(topic):
        leaders = c.agreed_leaders(topic, 24)
        return leaders if set(leaders.values()) == {1, 2, 3} else None

    for attempt in range(3):
        topic = "dl-clients-%d" % attempt
        c.create_topic(topic, 24)
        try:
            leaders = wait_for(lambda: all_three_lead(topic), timeout=20,
                               what="all three brokers to lead partitions of %s" % topic)
            break
        except AssertionError:
            continue
    else:
        raise AssertionError("no topic of three had partitions led by all three brokers")
    chosen = {node: min(p for p, n in leaders.items() if n == node) for node in (1, 2, 3)}
    expected = {p: [] for p in chosen.values()}

    for node, partition in chosen.items():
        records = make_records(150, "ck%d" % node)
        codec = {1: "gzip", 2: "zstd", 3: "none"}[node]
        produce_confluent(c.bootstrap(), topic, records, partition=partition,
                          extra={"acks": "all", "compression.type": codec})
        expected[partition] += records

    producer = KafkaProducer(bootstrap_servers=c.bootstrap(), acks="all", compression_type="lz4", linger_ms=5)
    try:
        for node, partition in chosen.items():
            records = make_records(100, "kp%d" % node)
            futures = [producer.send(topic, key=k, value=v, headers=h, partition=partition) for k, v, h in records]
            offsets = [f.get(timeout=60).offset for f in futures]
            assert offsets == list(range(150, 250)), "each send answered with its dense offset"
            expected[partition] += records
    finally:
        producer.close()

    for node, partition in chosen.items():
        lines = ["kc-key-%d-%d:kc-value-%d-%d" % (node, i, node, i) for i in range(50)]
        kcat("-b", c.bootstrap(), "-P", "-t", topic, "-p", str(partition), "-K", ":", "-z", "snappy",
             "-H", "src=kcat", stdin=("\n".join(lines) + "\n").encode())
        expected[partition] += [(k.encode(), v.encode(), [("src", b"kcat")])
                                for k, v in (line.split(":") for line in lines)]

    numbered = {p: [(i, *r) for i, r in enumerate(records)] for p, records in expected.items()}
    for node, partition in chosen.items():
        # librdkafka, bootstrapped from another broker than the leader.
        other = c.brokers[node % 3 + 1].bootstrap
        got = consume_confluent(other, topic, len(expected[partition]), partition=partition)
        assert [m.offset() for m in got] == list(range(300)), "offsets dense from 0"
        assert as_tuples(got) == expected[partition]
        assert kcat_records(other, topic, partition) == numbered[partition]
        # Every broker serves the partition itself, not only its leader.
        for b in c.brokers.values():
            assert raw_records(b, topic, partition) == numbered[partition], "through port %d" % b.port

    consumer = KafkaConsumer(bootstrap_servers=c.bootstrap(), consumer_timeout_ms=10_000)
    try:
        consumer.assign([KpPartition(topic, p) for p in chosen.values()])
        consumer.seek_to_beginning()
        got = {p: [] for p in chosen.values()}
        deadline = time.time() + 60
        while sum(map(len, got.values())) < 900 and time.time() < deadline:
            for tp, batch in consumer.poll(timeout_ms=1000).items():
                got[tp.partition] += [(r.offset, r.key, r.value, list(r.headers)) for r in batch]
    finally:
        consumer.close()
    assert got == numbered

    # An idempotent producer whose retries go to other brokers: the
    # database checks its sequences, whichever broker commits.
    spare = next(p for p in leaders if p not in chosen.values())
    pid, epoch = init_producer_id(c.brokers[1])

    # By first sequence; a retry resends the very same bytes.
    batches = {seq: record_batch(values, pid, epoch, seq)
               for seq, values in ((0, [b"i0", b"i1"]), (2, [b"i2"]), (3, [b"i3"]), (10, [b"lost"]))}

    def send(node, sequence):
        return raw_produce(c.brokers[node], topic, spare, batches[sequence], until_open=True)

    assert send(1, 0) == (0, 0)
    assert send(2, 0) == (0, 0), "a retry answered with its original offset"
    assert send(3, 2) == (0, 2)
    assert send(1, 2) == (0, 2)
    assert send(2, 10)[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert send(2, 3) == (0, 3)
    for b in c.brokers.values():
        assert [(o, v) for o, _, v, _ in raw_records(b, topic, spare)] == \
            [(0, b"i0"), (1, b"i1"), (2, b"i2"), (3, b"i3")], "no duplicate, no gap"


def test_delete_records_and_retention_make_the_cleaner_empty_the_bucket(cluster_db, diskless_cluster):
    c = diskless_cluster(cluster_db)
    topics = {"dl-keep": 2, "dl-trim": 2, "dl-old": 1}
    for topic, partitions in topics.items():
        c.create_topic(topic, partitions, config={"retention.ms": "-1"} if topic == "dl-old" else None)

    def produce_phase(topic, records, partitions, **kwargs):
        """The objects one phase wrote (each phase's produce is acknowledged,
        so committed, before the next begins: no object spans two)."""
        before = c.keys()
        for p in range(partitions):
            produce_confluent(c.bootstrap(), topic, records, partition=p, extra={"acks": "all"}, **kwargs)
        new = c.keys() - before
        assert new, "the phase wrote objects to the bucket"
        return new

    keep = make_records(200, "keep")
    kept_keys = produce_phase("dl-keep", keep, 2)
    trimmed_keys = produce_phase("dl-trim", make_records(300, "trim"), 2)
    hour_ago = int(time.time() * 1000) - 3_600_000
    old_keys = produce_phase("dl-old", make_records(300, "old"), 1, timestamps=[hour_ago + i for i in range(300)])
    assert c.keys() == c.live_object_keys() == kept_keys | trimmed_keys | old_keys

    # DeleteRecords through broker 2, retention changed at runtime through
    # broker 3: the batches go, then the cleaner deletes their objects.
    deleted = c.admin(2).delete_records([TopicPartition("dl-trim", p, 300) for p in range(2)])
    assert [f.result(timeout=30).low_watermark for f in deleted.values()] == [300, 300]
    change = ConfigResource(ConfigResource.Type.TOPIC, "dl-old", incremental_configs=[
        ConfigEntry("retention.ms", "600000", incremental_operation=AlterConfigOpType.SET)])
    c.admin(3).incremental_alter_configs([change])[change].result(timeout=30)

    wait_for(lambda: c.keys() == kept_keys, timeout=60,
             what="the cleaner to delete the trimmed and the expired objects, and only those")
    assert c.live_object_keys() == kept_keys
    for b in c.brokers.values():
        assert watermarks(b.bootstrap, "dl-trim", 1) == (300, 300)
        assert watermarks(b.bootstrap, "dl-old", 0) == (300, 300)
        # What is left reads back through every broker (two of which never
        # cached it: from the bucket).
        for p in range(2):
            assert [r[1:] for r in raw_records(b, "dl-keep", p)] == keep
    # The trimmed partition goes on at its old end.
    produce_confluent(c.bootstrap(), "dl-trim", make_records(5, "after"), partition=0)
    assert [r[0] for r in raw_records(c.brokers[1], "dl-trim", 0, offset=300)] == list(range(300, 305))

    # Topic deletion: every object goes, and the database forgets them.
    for f in c.admin(1).delete_topics(list(topics)).values():
        f.result(timeout=30)
    wait_for(lambda: c.keys() == set(), timeout=60, what="the cleaner to delete every object")
    wait_for(lambda: sql(c.db, "SELECT count(*) FROM diskless_objects") == [("0",)], timeout=30,
             what="the object rows to go")


class SteadyProducer:
    """An idempotent acks=all producer writing numbered records round-robin
    over a topic's partitions from a thread, about 200 a second, until
    `finish`; remembers what it sent where and what was acknowledged at
    which offset."""

    def __init__(self, bootstrap, topic, partitions, name):
        self.topic, self.partitions, self.name = topic, partitions, name
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
            # Longer than any outage here: records wait, they do not fail.
            "message.timeout.ms": 240000,
        })
        self.sent = {p: [] for p in range(partitions)}
        self.acked = {}  # value -> (partition, offset)
        self.errors = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _delivered(self, err, msg):
        with self.lock:
            if err is not None:
                self.errors.append(err)
            else:
                self.acked[msg.value()] = (msg.partition(), msg.offset())

    def _run(self):
        i = 0
        while not self.stopping.is_set():
            for _ in range(10):
                value = b"%s-%d" % (self.name.encode(), i)
                p = i % self.partitions
                self.sent[p].append(value)
                self.producer.produce(self.topic, value=value, partition=p, on_delivery=self._delivered)
                i += 1
            self.producer.poll(0.05)

    def count(self):
        with self.lock:
            assert not self.errors, self.errors[:5]
            return len(self.acked)

    def wait_acked(self, at_least, timeout, what):
        wait_for(lambda: self.count() >= at_least, timeout=timeout, interval=0.1, what=what)

    def finish(self, timeout=120):
        """Stops producing and waits until everything sent is acknowledged."""
        self.stopping.set()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive()
        assert self.producer.flush(timeout) == 0, "records still unacknowledged"
        assert self.count() == sum(map(len, self.sent.values()))
        # Destroyed now, while its brokers are up, not by a later garbage
        # collection (the thread's target refers back to this object).
        self.producer = self.thread = None


def assert_exactly_once(c, topic, partitions, producers):
    """Each partition holds exactly the records the producers sent to it,
    each once, each producer's in the order sent (no duplicate, no gap),
    at the offsets their acknowledgements named."""
    for p in range(partitions):
        total = sum(len(prod.sent[p]) for prod in producers)
        assert watermarks(c.bootstrap(), topic, p) == (0, total)
        got = consume_confluent(c.bootstrap(), topic, total, partition=p)
        values = [m.value() for m in got]
        assert len(values) == total
        for prod in producers:
            assert [v for v in values if v.startswith(prod.name.encode() + b"-")] == prod.sent[p]
            for m in got:
                if m.value().startswith(prod.name.encode() + b"-"):
                    assert prod.acked[m.value()] == (p, m.offset())


class GroupReader:
    """Three consumers of one group in threads, auto-committing every
    200 ms; counts how often each value was read."""

    def __init__(self, bootstrap, group, topic):
        self.consumers = [Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": True, "auto.commit.interval.ms": 200,
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
        }) for _ in range(3)]
        self.seen = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        for consumer in self.consumers:
            consumer.subscribe([topic])
        self.threads = [threading.Thread(target=self._run, args=(c,), daemon=True) for c in self.consumers]
        for t in self.threads:
            t.start()

    def _run(self, consumer):
        while not self.stopping.is_set():
            for msg in consumer.consume(num_messages=500, timeout=0.2):
                if msg.error():
                    continue
                with self.lock:
                    self.seen[msg.value()] = self.seen.get(msg.value(), 0) + 1

    def values(self):
        with self.lock:
            return set(self.seen)

    def close(self):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=30)
        for consumer in self.consumers:
            consumer.close()


def test_kill_9_of_a_broker_under_acks_all_load_while_a_group_reads(cluster_db, diskless_cluster):
    c = diskless_cluster(cluster_db, {"group.initial.rebalance.delay.ms": "300"})
    topic, partitions = "dl-load", 12
    leaders = c.create_topic(topic, partitions)
    # The victim leads the most partitions (so producers and consumers must
    # move) and coordinates the group (so the group must move too).
    victim = max((1, 2, 3), key=lambda n: list(leaders.values()).count(n))
    group = wait_for(lambda: next((g for g in ("dl-load-%d" % i for i in range(200))
                                   if (shard_owner(c.db, "__consumer_offsets", shard_of(g)) or (0,))[0] == victim),
                                  None), timeout=60, what="a group the victim coordinates")
    survivors = [n for n in c.brokers if n != victim]

    producers = [SteadyProducer(c.bootstrap(), topic, partitions, name) for name in ("pa", "pb")]
    reader = GroupReader(c.bootstrap(), group, topic)
    try:
        for prod in producers:
            prod.wait_acked(500, timeout=60, what="load before the kill")
        wait_for(lambda: len(reader.values()) >= 500, timeout=60, what="the group to read before the kill")
        c.brokers[victim].kill9()
        before = [prod.count() for prod in producers]
        # Its partitions and its group shard move once its lease lapses (2 s).
        moved = c.agreed_leaders(topic, partitions, timeout=60)
        assert victim not in moved.values()
        assert {p: n for p, n in moved.items() if leaders[p] != victim} == \
            {p: n for p, n in leaders.items() if n != victim}, "only the dead broker's partitions moved"
        wait_for(lambda: (shard_owner(c.db, "__consumer_offsets", shard_of(group)) or (victim,))[0] in survivors,
                 timeout=30, what="the group's shard on a survivor")
        for prod, n in zip(producers, before):
            prod.wait_acked(n + 500, timeout=90, what="load through the survivors")
    finally:
        for prod in producers:
            prod.finish()
    try:
        acked = set().union(*(prod.acked for prod in producers))
        wait_for(lambda: reader.values() >= acked, timeout=90, what="the group to read every record")
    finally:
        reader.close()
    assert reader.values() == acked, "nothing unacknowledged was read"
    assert_exactly_once(c, topic, partitions, producers)

    # The group committed its way to the end through the new coordinator.
    ends = {p: watermarks(c.bootstrap(), topic, p)[1] for p in range(partitions)}
    reader_admin = c.admin(survivors[0])
    for p, end in ends.items():
        wait_for(lambda p=p, end=end: committed(reader_admin, group, topic, p) == end, timeout=30,
                 what="the group's commit of partition %d" % p)


OUTAGE_SECONDS = 30


def produce_refused_everywhere(c, topic, what, timeout=60):
    """Until every live broker answers a produce to `topic` with a retriable
    error; returns the codes. A raw request, so no client retry hides it."""
    codes = {}

    def refused(node, b):
        code, _ = raw_produce(b, topic, 0, record_batch([b"probe"]))
        assert code == 0 or code in RETRIABLE, "port %d answered %d while %s" % (b.port, code, what)
        if code:
            codes[node] = code
        return code != 0

    for node, b in c.live().items():
        wait_for(lambda: refused(node, b), timeout=timeout, interval=0.5,
                 what="port %d to refuse produce while %s" % (b.port, what))
    return codes


def in_flight_settled(producer, quiet=1.0, timeout=30):
    """Until the acknowledged count has stayed the same for `quiet` seconds
    (what was in flight when the outage began is answered), within
    `timeout`; a fixed pause would flake on a slow machine."""
    deadline = time.time() + timeout
    last, since = producer.count(), time.time()
    while time.time() - since < quiet:
        assert time.time() < deadline, "acknowledgements still arriving %ss into the outage" % timeout
        time.sleep(0.1)
        now = producer.count()
        if now != last:
            last, since = now, time.time()


def acks_frozen(producer, seconds):
    """Nothing is acknowledged for `seconds`: the brokers store nothing."""
    before = producer.count()
    time.sleep(seconds)
    assert producer.count() == before, "records acknowledged while they could not be stored"
    return before


def test_store_unreachable_then_postgres_killed_nothing_acknowledged_is_lost(postgres, diskless_cluster):
    c = diskless_cluster(create_database(postgres.url(), "dlfaults"))
    topic, partitions = "dl-outage", 3
    c.create_topic(topic, partitions)
    c.create_topic("dl-probe", 1)
    prod = SteadyProducer(c.bootstrap(), topic, partitions, "po")
    try:
        prod.wait_acked(300, timeout=60, what="load before the outage")

        # The store goes away for OUTAGE_SECONDS.
        c.proxy.refuse()
        gone = time.time()
        codes = produce_refused_everywhere(c, "dl-probe", "the store is away")
        assert set(codes.values()) == {KAFKA_STORAGE_ERROR}, codes
        probing = time.time() - gone
        # What was in flight settles (a failed upload takes about 2 s here),
        # then nothing more is acknowledged until the store is back, which
        # every broker still refuses at the end.
        in_flight_settled(prod)
        frozen = acks_frozen(prod, max(1.0, OUTAGE_SECONDS - (time.time() - gone) - probing))
        produce_refused_everywhere(c, "dl-probe", "the store is still away")
        assert prod.count() == frozen
        c.proxy.forward()
        print("store away for %.1f s" % (time.time() - gone))
        prod.wait_acked(frozen + 300, timeout=90, what="production to resume after the store outage")

        # PostgreSQL killed (-9) and restarted on its data.
        postgres.kill9()
        try:
            killed = time.time()
            codes = produce_refused_everywhere(c, "dl-probe", "PostgreSQL is down")
            in_flight_settled(prod)
            frozen = acks_frozen(prod, 5)
        finally:
            restart_postgres(postgres)
        print("PostgreSQL away for %.1f s, produce answered %s" % (time.time() - killed, codes))
        prod.wait_acked(frozen + 300, timeout=120, what="production to resume after PostgreSQL's restart")
        # Every broker takes produce again, at dense offsets.
        offsets = []
        for b in c.brokers.values():
            answer = wait_for(lambda b=b: (lambda r: r if r[0] == 0 else None)(
                raw_produce(b, "dl-probe", 0, record_batch([b"probe"]))), timeout=60, interval=0.5,
                what="port %d to take produce again" % b.port)
            offsets.append(answer[1])
        assert offsets == [offsets[0], offsets[0] + 1, offsets[0] + 2], offsets
    finally:
        prod.finish(timeout=180)
    assert_exactly_once(c, topic, partitions, [prod])
    # The objects uploaded while their commits failed were handed to the
    # cleaner: the bucket holds only objects with live batches.
    wait_for(lambda: c.keys() == c.live_object_keys(), timeout=60,
             what="the objects of failed commits to leave the bucket")
