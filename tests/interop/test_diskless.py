"""Diskless topics (KIP-1150) on a single node, against the real broker with
no diskless setting at all: batches in objects under <log.dir>/krabka-diskless,
their order in the embedded batch coordinator. confluent-kafka, kafka-python
and kcat produce and consume (every codec, several partitions, keys and
headers, offsets dense from 0), idempotent producers, a consumer group's
commits, ListOffsets by timestamp, DeleteRecords, retention with the cleaner
deleting the dead objects, kill -9 after acknowledged writes, the configs
(describe, the create-only refusal, the invalid combinations), transactions
refused, DescribeLogDirs, DescribeProducers, producer expiry and the size
metrics, and the same store on S3 (moto)."""

import os
import subprocess
import time
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from conftest import free_port, kcat_path
from helpers import admin, as_tuples, consume_confluent, create_topic, make_records, produce_confluent, wait_for

DISKLESS = {"diskless.enable": "true"}
# Short intervals keep the tests quick; the defaults need no setting at all.
FAST = {"diskless.commit.interval.ms": "20"}


def objects(broker):
    """The diskless objects in the broker's default filesystem store, as
    paths under its `diskless` directory (`<cluster id>/<object id>`)."""
    root = os.path.join(broker.data_dir, "krabka-diskless", "diskless")
    return sorted(os.path.relpath(os.path.join(d, n), root) for d, _, names in os.walk(root) for n in names)


def cluster_id(broker):
    """The single node's cluster id, from its meta.properties."""
    with open(os.path.join(broker.data_dir, "meta.properties")) as f:
        return next(line.split("=", 1)[1].strip() for line in f if line.startswith("cluster.id="))


def watermarks(bootstrap, topic, partition=0):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm-" + uuid.uuid4().hex})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=20)
    finally:
        c.close()


def test_produce_consume_every_codec_and_partition_with_no_setting(broker):
    topic = "dl-codecs"
    create_topic(broker.bootstrap, topic, partitions=3, config=DISKLESS)
    # No partition directory: nothing of a diskless topic is in the log dir.
    assert not any(n.startswith(topic) for n in os.listdir(broker.data_dir))
    expected = {}
    for partition, codec in enumerate(["none", "gzip", "snappy"]):
        records = make_records(2_000, codec)
        produce_confluent(broker.bootstrap, topic, records, partition=partition, extra={"compression.type": codec})
        expected[partition] = records
    for codec in ["lz4", "zstd"]:
        records = make_records(1_000, codec)
        produce_confluent(broker.bootstrap, topic, records, partition=0, extra={"compression.type": codec})
        expected[0] = expected[0] + records
    for partition, records in expected.items():
        got = consume_confluent(broker.bootstrap, topic, len(records), partition=partition)
        assert as_tuples(got) == records
        assert [m.offset() for m in got] == list(range(len(records))), "offsets dense from 0"
        assert watermarks(broker.bootstrap, topic, partition) == (0, len(records))
    assert objects(broker), "the batches are objects in the store"
    # Each object ends with the footer's magic and verifies without the coordinator.
    first = os.path.join(broker.data_dir, "krabka-diskless", "diskless", objects(broker)[0])
    assert os.path.dirname(objects(broker)[0]) == cluster_id(broker), "in the cluster's own directory"
    assert os.path.getsize(first) > 0


def test_kafka_python_and_kcat(broker):
    from kafka import KafkaConsumer, KafkaProducer

    topic = "dl-clients"
    create_topic(broker.bootstrap, topic, partitions=2, config=DISKLESS)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", compression_type="gzip", linger_ms=5)
    sent = [(("k%d" % i).encode(), ("v%d" % i).encode(), [("h", b"x")]) for i in range(500)]
    futures = [producer.send(topic, key=k, value=v, headers=h, partition=1) for k, v, h in sent]
    offsets = [f.get(timeout=60).offset for f in futures]
    producer.close()
    assert offsets == list(range(500)), "each send answered with its assigned offset"
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, consumer_timeout_ms=10_000, auto_offset_reset="earliest")
    from kafka import TopicPartition as KpTp

    consumer.assign([KpTp(topic, 1)])
    got = []
    deadline = time.time() + 60
    while len(got) < 500 and time.time() < deadline:
        for records in consumer.poll(timeout_ms=1000).values():
            got.extend(records)
    consumer.close()
    assert [(r.key, r.value, list(r.headers)) for r in got] == sent

    lines = ["key%d:value%d" % (i, i) for i in range(300)]
    run = lambda *args, stdin=None: subprocess.run(
        [kcat_path(), "-b", broker.bootstrap, *args], input=stdin, capture_output=True, timeout=60, check=True
    ).stdout
    run("-P", "-t", topic, "-p", "0", "-K", ":", "-z", "lz4", stdin=("\n".join(lines) + "\n").encode())
    out = run("-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-K", ":", "-f", "%o %k:%s\n").decode()
    assert out.splitlines() == ["%d %s" % (i, line) for i, line in enumerate(lines)]


def test_idempotent_producer_and_consumer_group(broker_factory):
    broker = broker_factory(FAST)
    topic = "dl-idem"
    create_topic(broker.bootstrap, topic, partitions=2, config=DISKLESS)
    records = make_records(20_000, "idem")
    # Small batches, five in flight: sequences must stay in order through the shared object.
    produce_confluent(broker.bootstrap, topic, records, extra={
        "enable.idempotence": True, "acks": "all", "linger.ms": 1, "batch.num.messages": 100,
        "max.in.flight.requests.per.connection": 5,
    })
    got = consume_confluent(broker.bootstrap, topic, len(records))
    assert as_tuples(got) == records, "no duplicates, no gaps"

    group = "dl-group-" + uuid.uuid4().hex[:6]
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False}
    c = Consumer(conf)
    c.subscribe([topic])
    seen = []
    deadline = time.time() + 60
    while len(seen) < 5_000 and time.time() < deadline:
        for m in c.consume(num_messages=1000, timeout=1.0):
            assert not m.error(), m.error()
            if m.partition() == 0 and len(seen) < 5_000:
                seen.append(m)
    assert len(seen) == 5_000
    c.commit(offsets=[TopicPartition(topic, 0, seen[-1].offset() + 1)], asynchronous=False)
    c.close()
    c = Consumer(conf)
    try:
        committed = c.committed([TopicPartition(topic, 0)], timeout=20)
        assert committed[0].offset == 5_000
    finally:
        c.close()


def test_offsets_by_timestamp_and_delete_records(broker_factory):
    broker = broker_factory(FAST)
    topic = "dl-times"
    create_topic(broker.bootstrap, topic, config=DISKLESS)
    base = int(time.time() * 1000) - 3_600_000
    records = make_records(1_000, "t")
    stamps = [base + 10 * i for i in range(1_000)]
    produce_confluent(broker.bootstrap, topic, records, timestamps=stamps,
                      extra={"linger.ms": 0, "batch.num.messages": 37})
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "oft-" + uuid.uuid4().hex})
    try:
        for i in [0, 1, 36, 37, 500, 999]:
            found = c.offsets_for_times([TopicPartition(topic, 0, stamps[i])], timeout=20)[0]
            assert found.offset == i, "the exact record, not its batch"
            found = c.offsets_for_times([TopicPartition(topic, 0, stamps[i] - 5)], timeout=20)[0]
            assert found.offset == i
        assert c.offsets_for_times([TopicPartition(topic, 0, base + 100_000)], timeout=20)[0].offset == -1
    finally:
        c.close()
    from confluent_kafka.admin import OffsetSpec

    a = admin(broker.bootstrap)
    latest = a.list_offsets({TopicPartition(topic, 0): OffsetSpec.max_timestamp()})[TopicPartition(topic, 0)].result(30)
    assert (latest.offset, latest.timestamp) == (999, stamps[999])

    result = a.delete_records([TopicPartition(topic, 0, 600)])
    assert list(result.values())[0].result(timeout=30).low_watermark == 600
    assert watermarks(broker.bootstrap, topic) == (600, 1_000)
    got = consume_confluent(broker.bootstrap, topic, 400, offset=600)
    assert as_tuples(got) == records[600:]
    # Below the log start: the consumer resets to the earliest offset.
    got = consume_confluent(broker.bootstrap, topic, 400, offset=10, extra={"auto.offset.reset": "earliest"})
    assert got[0].offset() == 600


def test_retention_and_the_cleaner_delete_objects(broker_factory):
    broker = broker_factory({**FAST, "diskless.cleaner.interval.ms": "200", "diskless.cleaner.grace.period.ms": "0"})
    topic = "dl-retention"
    create_topic(broker.bootstrap, topic, config={**DISKLESS, "retention.ms": "600000"})
    old = int(time.time() * 1000) - 3_600_000
    records = make_records(500, "old")
    produce_confluent(broker.bootstrap, topic, records, timestamps=[old] * 500)
    fresh = make_records(300, "new")
    produce_confluent(broker.bootstrap, topic, fresh)
    # The old batches are past retention.ms: retention removes them, and the
    # cleaner deletes the objects holding nothing live any more.
    wait_for(lambda: watermarks(broker.bootstrap, topic)[0] == 500, timeout=60, what="retention by time")
    wait_for(lambda: len(objects(broker)) == 1, timeout=60, what="the cleaner to delete the dead object")
    got = consume_confluent(broker.bootstrap, topic, 300, offset=500)
    assert as_tuples(got) == fresh
    # retention.bytes, changed at runtime.
    a = admin(broker.bootstrap)
    changes = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.bytes", "1", incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([changes])[changes].result(timeout=30)
    produce_confluent(broker.bootstrap, topic, make_records(10, "last"))
    wait_for(lambda: watermarks(broker.bootstrap, topic)[0] > 500, timeout=60, what="retention by size")
    # Topic deletion: every object becomes garbage.
    a.delete_topics([topic])[topic].result(timeout=30)
    wait_for(lambda: objects(broker) == [], timeout=60, what="the cleaner to delete the topic's objects")


def test_orphans_of_a_dead_uploader_are_swept_and_nothing_else(broker_factory):
    """An uploader killed between its upload and its commit leaves an object
    the coordinator never heard of. The sweep records such objects — in this
    cluster's directory, older than diskless.cleaner.orphan.interval.ms — as
    dead, and the cleaner deletes them; committed objects, fresh ones (a
    commit may be on its way) and another cluster's stay."""
    sweep = {**FAST, "diskless.cleaner.interval.ms": "200", "diskless.cleaner.grace.period.ms": "0",
             "diskless.cleaner.orphan.interval.ms": "3000"}
    broker = broker_factory(sweep)
    topic = "dl-orphans"
    create_topic(broker.bootstrap, topic, config=DISKLESS)
    records = make_records(200, "kept")
    produce_confluent(broker.bootstrap, topic, records)
    committed = objects(broker)
    assert committed
    assert broker.stop() == 0
    root = os.path.join(broker.data_dir, "krabka-diskless", "diskless")
    an_hour_ago = time.time() - 3600

    def plant(relative, age):
        path = os.path.join(root, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(b"uploaded, never committed")
        if age:
            os.utime(path, (an_hour_ago, an_hour_ago))
        return relative

    ours = cluster_id(broker)
    orphan = plant(ours + "/" + uuid.uuid4().hex, age=True)
    fresh = plant(ours + "/" + uuid.uuid4().hex, age=False)
    foreign = plant("another-cluster/" + uuid.uuid4().hex, age=True)
    # Committed objects are old too: the sweep must ask, not guess.
    for name in committed:
        os.utime(os.path.join(root, name), (an_hour_ago, an_hour_ago))
    broker.start()
    wait_for(lambda: orphan not in objects(broker), timeout=60, what="the sweep and the cleaner to delete the orphan")
    assert "orphan recorded as dead" in broker.log()
    left = set(objects(broker))
    assert set(committed) <= left and foreign in left
    # The fresh one becomes an orphan once older than the interval.
    wait_for(lambda: fresh not in objects(broker), timeout=60, what="the fresh orphan, once old enough")
    assert set(committed) <= set(objects(broker)) and foreign in set(objects(broker))
    assert as_tuples(consume_confluent(broker.bootstrap, topic, len(records))) == records


def test_kill9_after_acknowledged_writes_keeps_everything(broker_factory):
    broker = broker_factory()
    topic = "dl-kill"
    create_topic(broker.bootstrap, topic, partitions=2, config=DISKLESS)
    acked = {0: [], 1: []}
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 2})

    def delivered(err, msg):
        if err is None:
            acked[msg.partition()].append((msg.offset(), msg.value()))

    for i in range(6_000):
        p.produce(topic, value=("v%d" % i).encode(), partition=i % 2, on_delivery=delivered)
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    broker.kill9()
    broker.start()
    for partition in (0, 1):
        want = sorted(acked[partition])
        got = consume_confluent(broker.bootstrap, topic, len(want), partition=partition)
        assert [(m.offset(), m.value()) for m in got] == want
    # Producing continues after the restart, offsets following on.
    produce_confluent(broker.bootstrap, topic, [(None, b"after", [])], partition=0)
    assert watermarks(broker.bootstrap, topic, 0) == (0, 3_001)


def test_one_connection_pipelines_past_its_read_ahead_while_an_object_fills(broker_factory):
    """A diskless produce is answered only at its object's commit, but the
    connection reads on once the object writer holds its batches: seven
    pipelined 0.99 MB requests on one connection (more than the 4 MiB a
    connection may hold unappended) fill one 6 MiB object, which closes on
    size, long before the two-minute commit interval."""
    from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
    from raw_client import RawConnection, batch

    broker = broker_factory({"diskless.commit.interval.ms": "120000",
                             "diskless.object.max.bytes": str(6 << 20)})
    create_topic(broker.bootstrap, "piped", partitions=1, config=DISKLESS)
    records = batch([b"p" * 110_000] * 9)
    T = ProduceRequest.TopicProduceData
    with RawConnection(broker.bootstrap, timeout=60) as conn:
        for _ in range(7):
            conn.send(ProduceRequest[9](
                transactional_id=None, acks=-1, timeout_ms=30000,
                topic_data=[T(name="piped", partition_data=[T.PartitionProduceData(index=0, records=records)])]))
        # Without reading ahead, the fifth request would wait for a
        # commit that only the interval (two minutes) would bring.
        bases = []
        for _ in range(7):
            _, r = conn.receive(ProduceResponse, 9)
            p = r.responses[0].partition_responses[0]
            assert p.error_code == 0, p
            bases.append(p.base_offset)
    assert bases == [0, 9, 18, 27, 36, 45, 54]
    assert len(objects(broker)) == 1, objects(broker)
    assert watermarks(broker.bootstrap, "piped") == (0, 63)


def test_configs_create_only_and_invalid_combinations(broker):
    topic = "dl-configs"
    create_topic(broker.bootstrap, topic, config=DISKLESS)
    a = admin(broker.bootstrap)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    described = a.describe_configs([resource])[resource].result(timeout=30)
    assert described["diskless.enable"].value == "true"
    plain = "dl-plain"
    create_topic(broker.bootstrap, plain)
    res_plain = ConfigResource(ConfigResource.Type.TOPIC, plain)
    assert a.describe_configs([res_plain])[res_plain].result(timeout=30)["diskless.enable"].value == "false"

    for name, value in [(topic, "false"), (plain, "true")]:
        change = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
            ConfigEntry("diskless.enable", value, incremental_operation=AlterConfigOpType.SET)])
        with pytest.raises(KafkaException) as info:
            a.incremental_alter_configs([change])[change].result(timeout=30)
        assert info.value.args[0].code() == KafkaError.INVALID_CONFIG
        assert "created" in info.value.args[0].str()
    # Other changes of a diskless topic still go through, but not compaction.
    ok = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "100000000", incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([ok])[ok].result(timeout=30)
    compact = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as info:
        a.incremental_alter_configs([compact])[compact].result(timeout=30)
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG

    for bad, why in [({"cleanup.policy": "compact"}, "cleanup.policy=compact"),
                     ({"remote.storage.enable": "true"}, "remote.storage.enable")]:
        futures = a.create_topics([NewTopic("dl-bad", 1, 1, config={**DISKLESS, **bad})])
        with pytest.raises(KafkaException) as info:
            futures["dl-bad"].result(timeout=30)
        assert info.value.args[0].code() == KafkaError.INVALID_CONFIG
        assert why in info.value.args[0].str()
    assert "dl-bad" not in a.list_topics(timeout=10).topics


def test_transactions_are_refused_on_diskless_topics(broker):
    topic = "dl-txn"
    create_topic(broker.bootstrap, topic, config=DISKLESS)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "dl-txn-" + uuid.uuid4().hex})
    p.init_transactions(30)
    p.begin_transaction()
    errors = []
    p.produce(topic, value=b"in a transaction", on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    assert errors and errors[0] is not None
    assert errors[0].code() == KafkaError.INVALID_TXN_STATE, errors[0]
    assert watermarks(broker.bootstrap, topic) == (0, 0), "nothing of it is visible"


def test_log_dirs_producers_expiry_and_metrics(broker_factory):
    """What the admin clients and /metrics see of diskless partitions:
    DescribeLogDirs sizes from the batch coordinator (shrinking with
    DeleteRecords), DescribeProducers from its idempotence state, a producer
    forgotten once its last batch is older than producer.id.expiration.ms,
    and the per-partition size gauge."""
    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import KafkaAdminClient
    from raw_client import RawConnection, batch, produce

    port = free_port()
    broker = broker_factory({
        **FAST,
        "krabka.metrics.listener": "127.0.0.1:%d" % port,
        "producer.id.expiration.ms": "3600000",
        "producer.id.expiration.check.interval.ms": "500",
    })
    topic = "dl-meta"
    create_topic(broker.bootstrap, topic, partitions=2, config=DISKLESS)
    idempotent = {"enable.idempotence": True, "acks": "all"}
    # Partition 0: a producer whose records are stamped just short of an
    # hour ago (the expiration), so it is forgotten some 30 s from now, and
    # one whose records are fresh, which stays.
    aging_ts = int(time.time() * 1000) - 3_600_000 + 30_000
    produce_confluent(broker.bootstrap, topic, make_records(200, "aging"), partition=0,
                      extra=idempotent, timestamps=[aging_ts] * 200)
    started = int(time.time() * 1000)
    produce_confluent(broker.bootstrap, topic, make_records(300, "fresh"), partition=0, extra=idempotent)
    # Partition 1: batches of known sizes from no idempotent producer.
    sent = [batch([b"x" * (100 * (i + 1))] * (i + 2)) for i in range(3)]
    with RawConnection(broker.bootstrap) as conn:
        assert [produce(conn, topic, 1, b) for b in sent] == [0, 2, 5]

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        tp0, tp1 = KTopicPartition(topic, 0), KTopicPartition(topic, 1)
        states = client.describe_producers([tp0, tp1])
        producers = sorted(states[tp0].active_producers, key=lambda p: p.last_timestamp)
        assert [p.last_timestamp for p in producers][0] == aging_ts
        aging, fresh = producers
        assert aging.producer_id != fresh.producer_id
        assert (aging.producer_epoch, aging.last_sequence) == (0, 199)
        assert (fresh.producer_epoch, fresh.last_sequence) == (0, 299)
        assert fresh.last_timestamp >= started - 60_000
        for p in producers:
            assert p.coordinator_epoch == -1
            assert p.current_transaction_start_offset == -1
        assert states[tp1].active_producers == []

        def sizes():
            [node] = client.describe_log_dirs()
            [log_dir] = node["log_dirs"]
            assert os.path.samefile(log_dir["log_dir"], broker.data_dir)
            return {(t["name"], p["partition_index"]): p["partition_size"]
                    for t in log_dir["topics"] for p in t["partitions"]}

        found = sizes()
        assert found[(topic, 1)] == sum(len(b) for b in sent), "the batches' bytes, as stored"
        assert found[(topic, 0)] > 0
        # DeleteRecords past the first batch: its bytes are no longer counted.
        deleter = admin(broker.bootstrap)  # kept: a collected client drops its futures
        result = deleter.delete_records([TopicPartition(topic, 1, 2)])
        assert list(result.values())[0].result(timeout=30).low_watermark == 2
        assert sizes()[(topic, 1)] == len(sent[1]) + len(sent[2])

        # The same size on /metrics, per partition (refreshed every 5 s).
        def scraped():
            text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
            return text if 'krabka_diskless_log_size_bytes{topic="%s",partition="1"} %d\n' % (
                topic, len(sent[1]) + len(sent[2])) in text else None

        text = wait_for(scraped, timeout=30, what="the diskless size gauge")
        assert 'krabka_partition_log_end_offset{topic="%s",partition="1"} 9\n' % topic in text
        assert 'krabka_partition_log_start_offset{topic="%s",partition="1"} 2\n' % topic in text

        # producer.id.expiration.ms: the aging producer goes, the fresh one stays.
        def expired():
            left = client.describe_producers([tp0])[tp0].active_producers
            return left if aging.producer_id not in {p.producer_id for p in left} else None

        left = wait_for(expired, timeout=90, interval=1, what="the idle producer to expire")
        assert [(p.producer_id, p.last_sequence) for p in left] == [(fresh.producer_id, 299)]
    finally:
        client.close()


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory):
    """The shared moto of `scripts/test`, or one of this module's own."""
    from objstore import MotoServer

    endpoint = os.environ.get("KRABKA_TEST_S3_ENDPOINT")
    if endpoint:
        yield endpoint
        return
    server = MotoServer(tmp_path_factory.mktemp("moto"))
    yield server.endpoint
    server.stop()


def test_diskless_store_on_s3(broker_factory, s3_endpoint):
    from objstore import ACCESS_KEY, SECRET_KEY, create_bucket, list_keys

    bucket = "krabka-dl-%s" % uuid.uuid4().hex[:10]
    create_bucket(s3_endpoint, bucket)
    STORE = "krabka.diskless.storage.config."
    broker = broker_factory({
        **FAST,
        "krabka.diskless.storage": "s3",
        STORE + "s3.bucket": bucket,
        STORE + "s3.endpoint": s3_endpoint,
        STORE + "s3.region": "us-east-1",
        STORE + "s3.path.style.access": "true",
        STORE + "s3.allow.http": "true",
        STORE + "s3.access.key.id": ACCESS_KEY,
        STORE + "s3.secret.access.key": SECRET_KEY,
        STORE + "s3.sdk.checksum.header": "true",
        STORE + "prefix": "cluster-a",
    })
    topic = "dl-s3"
    create_topic(broker.bootstrap, topic, partitions=2, config=DISKLESS)
    records = make_records(3_000, "s3")
    produce_confluent(broker.bootstrap, topic, records, partition=1, extra={"compression.type": "zstd"})
    keys = list_keys(s3_endpoint, bucket)
    assert keys and all(k.startswith("cluster-a/diskless/") for k in keys)
    broker.restart()
    # After a restart the cache is cold: the bytes come from the bucket.
    got = consume_confluent(broker.bootstrap, topic, len(records), partition=1)
    assert as_tuples(got) == records
    assert not os.path.isdir(os.path.join(broker.data_dir, "krabka-diskless"))
