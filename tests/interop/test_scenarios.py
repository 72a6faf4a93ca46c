"""Scenario parity (issue 16, item 5): the single-node scenarios, written
once, run against one broker (`single`) and against three brokers sharing
one PostgreSQL database (`cluster3`).

Each scenario takes the `engine` fixture (engines.py) and uses several
partitions, so that in cluster3 they land on different brokers: every
client talks to the whole engine and must find each partition's broker.

* produce/consume with confluent-kafka, kafka-python and kcat: every record
  comes back, in order per partition, through each client;
* a consumer group of four (librdkafka and kafka-python) spread over the
  brokers, committing; a member leaves and the others take over; the
  committed offsets are read back by a new consumer of the group;
* transactions spanning the partitions of every broker, committed and
  aborted: read_committed sees each committed record exactly once and no
  aborted one; a consume-transform-produce loop with
  send_offsets_to_transaction, one round aborted and redone;
* tiered storage on a classic topic: segments below the local log start
  are read back from the remote tier.
"""

import json
import os
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition

from conftest import KRABKA_BIN, PostgresServer, create_database, kcat_path, postgres_installed
from engines import ENGINE_SETTINGS, Engine, wait_until
from helpers import as_tuples, consume_confluent, make_records, produce_confluent
from test_groups import ConfluentMember, KafkaPythonMember, all_committed, assignments_cover


@pytest.fixture(scope="module")
def scenario_postgres():
    """The URL of a PostgreSQL server for this module's cluster engines: the
    run's shared one (KRABKA_TEST_DATABASE_URL) or one started once here."""
    shared = os.environ.get("KRABKA_TEST_DATABASE_URL")
    if shared:
        yield shared
        return
    if not postgres_installed():
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL is not installed (scripts/test installs it)")
        pytest.skip("PostgreSQL is not installed")
    server = PostgresServer()
    try:
        yield server.start().url()
    finally:
        server.remove()


@pytest.fixture(params=["single", "cluster3"])
def engine(request, broker_factory, tmp_path):
    """A running engine (see engines.py); its brokers and database are
    stopped by the fixtures they come from."""
    remote = tmp_path / "remote-tier"
    remote.mkdir()
    settings = dict(ENGINE_SETTINGS, **{"krabka.remote.log.storage.dir": str(remote)})
    if request.param == "single":
        brokers = [broker_factory(settings)]
    else:
        server = request.getfixturevalue("scenario_postgres")
        url = create_database(server, "krabka_parity_%s" % uuid.uuid4().hex[:12])
        cluster_factory = request.getfixturevalue("cluster_factory")
        brokers = [cluster_factory(url, node, settings) for node in (1, 2, 3)]
    engine = Engine(request.param, brokers, remote, database_url=url if request.param == "cluster3" else None)
    engine.wait_for_members()
    return engine


def spread(engine, leaders):
    """In a cluster, the partitions landed on every broker."""
    assert len(set(leaders.values())) == len(engine.brokers), leaders


# --- produce / consume --------------------------------------------------------


def kcat(bootstrap, *args, stdin=None):
    result = subprocess.run([kcat_path(), "-b", bootstrap, *args], input=stdin, capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout


def test_produce_and_consume_with_every_client(engine):
    topic, partitions = "pc", 6
    spread(engine, engine.create_topic(topic, partitions))

    # Per partition, in this order: confluent-kafka's records (keys, null
    # values, headers), then kafka-python's, then kcat's.
    expected = {}
    for p in range(partitions):
        records = make_records(40, "p%d" % p)
        produce_confluent(engine.bootstrap, topic, records, partition=p)
        expected[p] = list(records)
    kp = KafkaProducer(bootstrap_servers=engine.bootstrap, linger_ms=5)
    for p in range(partitions):
        for i in range(20):
            key, value = b"kp-%d" % i, b"kafka-python %d/%d" % (p, i)
            kp.send(topic, key=key, value=value, partition=p)
            expected[p].append((key, value, []))
        kp.flush(30)
    kp.close()
    for p in range(partitions):
        lines = ["kc-%d:kcat %d/%d" % (i, p, i) for i in range(20)]
        kcat(engine.bootstrap, "-P", "-t", topic, "-p", str(p), "-K", ":",
             stdin=("\n".join(lines) + "\n").encode())
        expected[p] += [(line.split(":")[0].encode(), line.split(":")[1].encode(), []) for line in lines]

    # confluent-kafka: every record, byte for byte, at dense offsets.
    for p in range(partitions):
        got = consume_confluent(engine.bootstrap, topic, len(expected[p]), partition=p, timeout=30)
        assert [m.offset() for m in got] == list(range(len(expected[p]))), "partition %d" % p
        assert as_tuples(got) == expected[p], "partition %d" % p

    # kafka-python: everything, in order per partition.
    kc = KafkaConsumer(bootstrap_servers=engine.bootstrap, group_id=None, enable_auto_commit=False,
                       consumer_timeout_ms=5000)
    kc.assign([KTopicPartition(topic, p) for p in range(partitions)])
    kc.seek_to_beginning()
    seen = {p: [] for p in range(partitions)}
    total = sum(len(v) for v in expected.values())
    deadline = time.time() + 30
    while sum(len(v) for v in seen.values()) < total and time.time() < deadline:
        for tp, records in kc.poll(timeout_ms=500).items():
            seen[tp.partition] += [(r.offset, r.key, r.value) for r in records]
    kc.close()
    for p in range(partitions):
        assert seen[p] == [(o, k, v) for o, (k, v, _) in enumerate(expected[p])], "partition %d" % p

    # kcat: the whole topic to its end.
    out = kcat(engine.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%p %o %K\n")
    by_partition = {p: [] for p in range(partitions)}
    for line in out.decode().splitlines():
        p, o, keylen = (int(x) for x in line.split())
        by_partition[p].append((o, keylen))
    for p in range(partitions):
        want = [(o, -1 if k is None else len(k)) for o, (k, _, _) in enumerate(expected[p])]
        assert by_partition[p] == want, "partition %d" % p


# --- consumer groups ------------------------------------------------------------


def produce_round(engine, topic, partitions, per_partition, tag):
    for p in range(partitions):
        records = [(b"k", b"%s-%d-%d" % (tag.encode(), p, i), []) for i in range(per_partition)]
        produce_confluent(engine.bootstrap, topic, records, partition=p)


def test_a_group_shares_commits_rebalances_and_resumes(engine):
    topic, group, partitions = "grp", "parity-group", 6
    spread(engine, engine.create_topic(topic, partitions))
    produce_round(engine, topic, partitions, 20, "first")

    # Four members, each bootstrapped at a different broker of the engine.
    members = [ConfluentMember(engine.bootstrap_of(i), group, topic, "rdkafka-%d" % i) for i in range(3)]
    members.append(KafkaPythonMember(engine.bootstrap_of(3), group, topic, "kafka-python"))
    for m in members:
        m.start()
    leaving = members[0]
    try:
        wait_until("four disjoint assignments covering the partitions",
                   lambda: assignments_cover(members, partitions), timeout=60)
        wait_until("the first round committed", lambda: len(all_committed(members)) >= 20 * partitions, timeout=60)

        # One member leaves: the three others take every partition over.
        members.remove(leaving)
        leaving.stop()
        wait_until("three members covering the partitions",
                   lambda: assignments_cover(members, partitions), timeout=60)
        produce_round(engine, topic, partitions, 20, "second")
        wait_until("both rounds committed",
                   lambda: len(all_committed(members + [leaving])) >= 40 * partitions, timeout=60)
    finally:
        for m in members:
            m.stop()
    committed = all_committed(members + [leaving])
    assert len(committed) == len(set(committed)), "a record was committed twice"
    assert set(committed) == {(p, o) for p in range(partitions) for o in range(40)}, "a record was lost"

    # A new consumer of the group reads the committed offsets back and
    # resumes right after them.
    produce_round(engine, topic, partitions, 1, "third")
    fresh = Consumer({"bootstrap.servers": engine.bootstrap, "group.id": group,
                      "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        offsets = fresh.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=20)
        assert [tp.offset for tp in offsets] == [40] * partitions
        fresh.subscribe([topic])
        first = {}
        deadline = time.time() + 60
        while len(first) < partitions and time.time() < deadline:
            msg = fresh.poll(0.5)
            if msg is not None and not msg.error():
                first.setdefault(msg.partition(), (msg.offset(), msg.value()))
    finally:
        fresh.close()
    assert first == {p: (40, b"third-%d-0" % p) for p in range(partitions)}


# --- transactions -----------------------------------------------------------------


def read_to_end(bootstrap, topic, partitions, isolation, timeout=30):
    """{partition: [(offset, value)]} of everything readable with `isolation`:
    until every partition reported its end (the LSO under read_committed)."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "parity-reader-" + uuid.uuid4().hex,
        "enable.auto.commit": False,
        "isolation.level": isolation,
        "enable.partition.eof": True,
    })
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = {p: [] for p in range(partitions)}
    at_end = set()
    deadline = time.time() + timeout
    try:
        while at_end != set(out):
            assert time.time() < deadline, "timed out reading %s: ends of %s only" % (topic, sorted(at_end))
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    at_end.add(msg.partition())
                    continue
                raise KafkaException(msg.error())
            at_end.discard(msg.partition())
            out[msg.partition()].append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    return out


def values_of(read):
    return [v for records in read.values() for _, v in records]


@pytest.fixture
def txn_producers():
    """Makes transactional producers; those a failed scenario left with
    records in flight drop them at the end instead of holding up the exit."""
    made = []

    def make(engine, txn_id):
        producer = Producer({
            "bootstrap.servers": engine.bootstrap,
            "transactional.id": txn_id,
            "linger.ms": 5,
            "message.timeout.ms": 30000,
        })
        made.append(producer)
        producer.init_transactions(30)
        return producer

    yield make
    for producer in made:
        producer.purge()
        producer.flush(0)


def retried(what, call, timeout=30):
    """Runs a transactional call again while it fails with an error the
    client calls retriable (as Kafka's documentation asks an application
    to), until `timeout`."""
    deadline = time.time() + timeout
    while True:
        try:
            return call()
        except KafkaException as e:
            if not e.args[0].retriable() or time.time() >= deadline:
                raise AssertionError("%s failed: %s" % (what, e.args[0])) from e
            time.sleep(0.2)


def partitions_differing(engine, topic, seen, want):
    """{partition: 'leader N: read X records, want Y'} where `seen` and `want` differ."""
    leaders = engine.leaders(topic)
    return {
        p: "leader %d: read %d records, want %d" % (leaders[p], len(seen[p]), len(want[p]))
        for p in want if seen[p] != want[p]
    }


def test_transactions_over_every_broker_commit_and_abort(engine, txn_producers):
    topic, partitions = "txn", 6
    spread(engine, engine.create_topic(topic, partitions))
    producer = txn_producers(engine, "parity-txn-" + uuid.uuid4().hex)

    committed, aborted = [], []
    for t, outcome in enumerate(["commit", "abort", "commit", "abort", "commit"]):
        producer.begin_transaction()
        values = [b"t%d-%s-p%d-%d" % (t, outcome.encode(), p, i) for p in range(partitions) for i in range(5)]
        for v in values:
            producer.produce(topic, value=v, partition=int(v.split(b"-p")[1].split(b"-")[0]))
        assert producer.flush(30) == 0
        if outcome == "commit":
            retried("commit of transaction %d" % t, lambda: producer.commit_transaction(30))
            committed += values
        else:
            retried("abort of transaction %d" % t, lambda: producer.abort_transaction(30))
            aborted += values

    # Everything was written (read_uncommitted sees it all)...
    everything = read_to_end(engine.bootstrap, topic, partitions, "read_uncommitted")
    assert sorted(values_of(everything)) == sorted(committed + aborted)
    # ...and read_committed sees each committed record once, in order per
    # partition, and no aborted one.
    seen = read_to_end(engine.bootstrap, topic, partitions, "read_committed")
    want = {p: [v for v in committed if b"-p%d-" % p in v] for p in range(partitions)}
    got = {p: [v for _, v in seen[p]] for p in range(partitions)}
    assert not partitions_differing(engine, topic, got, want), \
        "read_committed: %s" % partitions_differing(engine, topic, got, want)


def committed_offsets(engine, group, topic, partitions):
    c = Consumer({"bootstrap.servers": engine.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return {tp.partition: tp.offset
                for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=20)}
    finally:
        c.close()


def test_consume_transform_produce_with_offsets_in_the_transaction(engine, txn_producers):
    source, sink, group, partitions = "ctp-in", "ctp-out", "ctp-group", 6
    spread(engine, engine.create_topic(source, partitions))
    spread(engine, engine.create_topic(sink, partitions))
    per_partition = 10
    produce_round(engine, source, partitions, per_partition, "in")

    consumer = Consumer({
        "bootstrap.servers": engine.bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
    })
    consumer.assign([TopicPartition(source, p) for p in range(partitions)])
    producer = txn_producers(engine, "parity-ctp-" + uuid.uuid4().hex)
    done = 0
    rounds = 0
    try:
        deadline = time.time() + 60
        while done < partitions * per_partition:
            assert time.time() < deadline, "the loop moved %d records only" % done
            batch = [m for m in consumer.consume(num_messages=25, timeout=0.5) if m.error() is None]
            if not batch:
                continue
            rounds += 1
            producer.begin_transaction()
            next_offsets = {}
            for m in batch:
                producer.produce(sink, value=m.value().replace(b"in-", b"out-"), partition=m.partition())
                next_offsets[m.partition()] = m.offset() + 1
            retried("round %d's send_offsets_to_transaction" % rounds,
                    lambda: producer.send_offsets_to_transaction(
                        [TopicPartition(source, p, o) for p, o in next_offsets.items()],
                        consumer.consumer_group_metadata(), 30))
            if rounds == 2:
                # Aborted: neither its records nor its offsets count; rewind
                # to the batch's first records and do it again.
                retried("round 2's abort", lambda: producer.abort_transaction(30))
                first = {}
                for m in batch:
                    first.setdefault(m.partition(), m.offset())
                for p, o in first.items():
                    consumer.seek(TopicPartition(source, p, o))
                continue
            retried("round %d's commit" % rounds, lambda: producer.commit_transaction(30))
            done += len(batch)
    finally:
        consumer.close()
    assert rounds >= 3, "the loop ran one aborted round and at least two committed ones"

    assert committed_offsets(engine, group, source, partitions) == {p: per_partition for p in range(partitions)}
    out = read_to_end(engine.bootstrap, sink, partitions, "read_committed")
    want = {p: [b"out-%d-%d" % (p, i) for i in range(per_partition)] for p in range(partitions)}
    got = {p: [v for _, v in out[p]] for p in range(partitions)}
    assert not partitions_differing(engine, sink, got, want), \
        "read_committed: %s" % partitions_differing(engine, sink, got, want)


# --- tiered storage on a classic topic -----------------------------------------------


def segment_starts(directory):
    """Base offsets of the partition's local segments."""
    return sorted(int(f.split(".")[0]) for f in os.listdir(directory) if f.endswith(".log"))


def remote_segments(engine, topic, partition):
    """Remote tier files `<start offset>-<segment id>.log` of one partition."""
    prefix = "%s-%d-" % (topic, partition)
    out = []
    for d in os.listdir(engine.remote_dir):
        if d.startswith(prefix) and len(d) == len(prefix) + 22:
            out += [f for f in os.listdir(os.path.join(engine.remote_dir, d)) if f.endswith(".log")]
    return sorted(out)


def test_tiered_classic_topic_reads_below_the_local_log_start(engine):
    topic, partitions = "tiered", 3
    spread(engine, engine.create_topic(topic, partitions, config={
        "segment.bytes": "16384",
        "remote.storage.enable": "true",
        "local.retention.bytes": "32768",
    }))
    records = {p: [(b"k%d" % i, b"%d-%d-" % (p, i) + b"x" * 500, []) for i in range(300)] for p in range(partitions)}
    for p in range(partitions):
        produce_confluent(engine.bootstrap, topic, records[p], partition=p, extra={"batch.size": 4096})

    # Closed segments leave local disk once they are in the remote tier.
    dirs = {p: engine.partition_dir(topic, p) for p in range(partitions)}
    for p in range(partitions):
        wait_until("partition %d's first segments to leave local disk" % p,
                   lambda p=p: segment_starts(dirs[p])[0] > 0 and remote_segments(engine, topic, p),
                   timeout=45, context=engine.warnings)
        local_start = segment_starts(dirs[p])[0]
        remote_starts = [int(f.split("-")[0]) for f in remote_segments(engine, topic, p)]
        assert 0 in remote_starts and min(remote_starts) < local_start

    # Every record comes back from offset 0: those below the local log start
    # from the remote tier, the rest from local disk.
    reader = Consumer({"bootstrap.servers": engine.bootstrap, "group.id": "wm"})
    try:
        for p in range(partitions):
            assert reader.get_watermark_offsets(TopicPartition(topic, p), timeout=10) == (0, 300)
    finally:
        reader.close()
    for p in range(partitions):
        got = consume_confluent(engine.bootstrap, topic, 300, partition=p, timeout=60)
        assert [m.offset() for m in got] == list(range(300)), "partition %d" % p
        assert as_tuples(got) == records[p], "partition %d" % p

    # The operator's view of the remote log metadata lists the same segments
    # (in a cluster it is read from the database, where the brokers keep it).
    out = subprocess.run(
        [KRABKA_BIN, "remote-metadata", "dump", "--topic", topic, "--timeout-secs", "30"]
        + engine.metadata_source_args(),
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    dumped = {d["partition"]: d for d in json.loads(out.stdout)["partitions"]}
    assert sorted(dumped) == list(range(partitions))
    for p in range(partitions):
        finished = sorted("%020d-%s.log" % (seg["start_offset"], seg["segment_id"])
                          for seg in dumped[p]["segments"] if seg["state"] == "COPY_SEGMENT_FINISHED")
        assert finished and set(finished) <= set(remote_segments(engine, topic, p)), "partition %d" % p
