"""Consolidation of diskless partitions into tiered segments
(diskless.consolidation.enable), on a single node against the real binary:
once a diskless partition holds segment.bytes of batches, its cold batches
become ordinary KIP-405 segments in the filesystem tier, the batch
coordinator forgets them and the cleaner deletes the objects that held
nothing else. Every client still reads from offset 0, byte-identical (the
consolidated part from the segments), ListOffsets by timestamp reaches
into the segments, a restart and kill -9 change nothing, DeleteRecords and
retention delete whole segments, and topic deletion empties the tier."""

import os
import subprocess
import time
import uuid

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, OffsetSpec

from conftest import free_port, kcat_path
from helpers import admin, as_tuples, consume_confluent, create_topic, make_records, produce_confluent, wait_for
from test_diskless import objects, watermarks
from test_tiered import remote_logs as segments
from test_tiered_observability import scrape

BROKER = {
    "diskless.commit.interval.ms": "20",
    "remote.log.storage.system.enable": "true",
    "remote.log.manager.task.interval.ms": "300",
    "diskless.consolidation.enable": "true",
    "diskless.cleaner.interval.ms": "200",
    "diskless.cleaner.grace.period.ms": "0",
}
TOPIC_CONFIG = {"diskless.enable": "true", "segment.bytes": "32768"}
RECORDS = 3_000


def settled_segments(broker, topic, at_least=3):
    """The topic's segments once at least `at_least` are in the tier and
    none has been added for 2 s (consolidation has caught up)."""
    seen, since = None, time.time()
    deadline = time.time() + 90
    while True:
        now = segments(broker, topic)
        if now != seen:
            seen, since = now, time.time()
        elif len(now) >= at_least and time.time() - since >= 2:
            return now
        assert time.time() < deadline, "timed out waiting for consolidation to settle: %s" % now
        time.sleep(0.2)


def tier_bytes(broker, topic):
    """The bytes of the topic's segment files in the filesystem tier."""
    root = os.path.join(broker.data_dir, "krabka-remote-tier")
    dirs = [os.path.join(root, d) for d in os.listdir(root) if d.startswith(topic + "-0-")]
    return sum(os.path.getsize(os.path.join(d, f)) for d in dirs for f in os.listdir(d) if f.endswith(".log"))


def read_back(broker, topic, expected, offset=0):
    got = consume_confluent(broker.bootstrap, topic, len(expected), offset=offset, timeout=120)
    assert [m.offset() for m in got] == list(range(offset, offset + len(expected)))
    assert as_tuples(got) == expected


def produce(broker, topic, count, prefix, base_ms):
    """Produces in six flushed parts, so the batches spread over several
    objects whatever the machine's pace."""
    records = make_records(count, prefix)
    stamps = [base_ms + 10 * i for i in range(count)]
    step = max(1, count // 6)
    for start in range(0, count, step):
        produce_confluent(broker.bootstrap, topic, records[start:start + step],
                          timestamps=stamps[start:start + step],
                          extra={"linger.ms": 0, "batch.num.messages": 50})
    return records, stamps


def test_cold_batches_become_segments_every_client_reads(broker_factory):
    port = free_port()
    broker = broker_factory({**BROKER, "krabka.metrics.listener": "127.0.0.1:%d" % port})
    topic = "dl-consolidated"
    # Created with segments too large to fill; smaller ones once written,
    # so the objects all hold unconsolidated batches when counted.
    create_topic(broker.bootstrap, topic, config={**TOPIC_CONFIG, "segment.bytes": "1073741824"})
    base = int(time.time() * 1000) - 600_000
    records, stamps = produce(broker, topic, RECORDS, "c", base)
    written = len(objects(broker))
    assert segments(broker, topic) == []
    a = admin(broker.bootstrap)
    change = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("segment.bytes", TOPIC_CONFIG["segment.bytes"], incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([change])[change].result(timeout=30)
    settled_segments(broker, topic)
    # The tier's size is published as for a classic tiered partition.
    wait_for(lambda: scrape(port).get(("krabka_remote_log_size_bytes", topic, "0"))
             == tier_bytes(broker, topic),
             timeout=30, what="krabka_remote_log_size_bytes to match the tier")
    # The objects that held only consolidated batches are deleted.
    wait_for(lambda: len(objects(broker)) < written, timeout=60, what="the cleaner to delete consolidated objects")
    assert watermarks(broker.bootstrap, topic) == (0, RECORDS)
    read_back(broker, topic, records)
    # kcat reads every offset too, from the segments and then the batches.
    out = subprocess.run(
        [kcat_path(), "-b", broker.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e",
         "-f", "%o %S\n"],
        capture_output=True, timeout=120, check=True).stdout.decode().split()
    sizes = [len(v) if v is not None else -1 for _, v, _ in records]
    assert out == [str(x) for i, n in enumerate(sizes) for x in (i, n)]
    # ListOffsets by timestamp finds the exact record, in a segment or not.
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "oft-" + uuid.uuid4().hex})
    try:
        for i in [0, 1, 49, 50, 777, 1500, RECORDS - 1]:
            found = c.offsets_for_times([TopicPartition(topic, 0, stamps[i] - 5)], timeout=20)[0]
            assert found.offset == i
    finally:
        c.close()
    tp = TopicPartition(topic, 0)
    latest = a.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(30)
    assert (latest.offset, latest.timestamp) == (RECORDS - 1, stamps[-1])
    # A restart, and a kill -9, lose nothing: segments and batches both read.
    broker.restart()
    read_back(broker, topic, records)
    more, _ = produce(broker, topic, 500, "d", base + 100_000)
    broker.kill9()
    broker.start()
    read_back(broker, topic, records + more)


def test_delete_records_retention_and_topic_deletion_delete_segments(broker_factory):
    broker = broker_factory(BROKER)
    topic = "dl-consolidated-gone"
    create_topic(broker.bootstrap, topic, config={**TOPIC_CONFIG, "retention.ms": "3600000"})
    base = int(time.time() * 1000) - 600_000
    records, _ = produce(broker, topic, RECORDS, "g", base)
    before = len(settled_segments(broker, topic))
    # DeleteRecords past the first segments: they go.
    a = admin(broker.bootstrap)
    cut = RECORDS // 2
    result = a.delete_records([TopicPartition(topic, 0, cut)])
    assert list(result.values())[0].result(timeout=30).low_watermark == cut
    wait_for(lambda: len(segments(broker, topic)) < before, timeout=60, what="segments below the log start deleted")
    read_back(broker, topic, records[cut:], offset=cut)
    # Time retention: batches an hour and a half old expire, consolidated or not.
    # The fresh records follow only once the old ones are gone: a segment
    # built over both would live as long as its newest record, as in Kafka.
    old = int(time.time() * 1000) - 5_400_000
    create_topic(broker.bootstrap, topic + "-old", config={**TOPIC_CONFIG, "retention.ms": "3600000"})
    produce(broker, topic + "-old", RECORDS, "o", old)
    wait_for(lambda: watermarks(broker.bootstrap, topic + "-old") == (RECORDS, RECORDS), timeout=90,
             what="retention of the old records")
    wait_for(lambda: segments(broker, topic + "-old") == [], timeout=60, what="expired segments deleted")
    fresh, _ = produce(broker, topic + "-old", 100, "n", int(time.time() * 1000))
    read_back(broker, topic + "-old", fresh, offset=RECORDS)
    # Retention passes (every 200-300 ms here) go on and leave the fresh
    # records alone: the watermarks hold still across several of them.
    until = time.time() + 2
    while time.time() < until:
        now = watermarks(broker.bootstrap, topic + "-old")
        assert now == (RECORDS, RECORDS + 100), "retention touched the fresh records: %s" % (now,)
        time.sleep(0.2)
    # Topic deletion empties the tier and the store.
    for name in (topic, topic + "-old"):
        a.delete_topics([name])[name].result(timeout=30)
    wait_for(lambda: segments(broker, topic) == [] and segments(broker, topic + "-old") == [], timeout=60,
             what="the deleted topics' segments gone")
    wait_for(lambda: objects(broker) == [], timeout=60, what="the deleted topics' objects gone")


def test_a_cluster_consolidates_and_every_broker_reads_the_segments(cluster_db, cluster_factory, tmp_path):
    """Two brokers on PostgreSQL sharing a store and a tier directory: the
    broker Metadata names a partition's leader consolidates it, the remote
    metadata is in the database, and either broker reads the segments; when
    one dies, the other consolidates its partitions from where it stopped."""
    from conftest import sql
    from helpers import wait_for_cluster
    from test_cluster_diskless import fetch_from

    settings = {**BROKER,
                "krabka.diskless.storage.dir": str(tmp_path / "shared-store"),
                "krabka.remote.log.storage.dir": str(tmp_path / "shared-tier")}
    brokers = [cluster_factory(cluster_db, node, settings) for node in (1, 2)]
    wait_for_cluster([b.bootstrap for b in brokers])
    topic = "dl-shared"
    create_topic(brokers[0].bootstrap, topic, partitions=2, config=TOPIC_CONFIG)
    base = int(time.time() * 1000) - 600_000
    expected = {}
    for partition in (0, 1):
        records = make_records(RECORDS, "p%d" % partition)
        produce_confluent(brokers[partition].bootstrap, topic, records, partition=partition,
                          timestamps=[base + 10 * i for i in range(RECORDS)],
                          extra={"linger.ms": 0, "batch.num.messages": 50})
        expected[partition] = records

    def consolidated_to():
        rows = sql(cluster_db, "SELECT partition, consolidated_to FROM diskless_partitions ORDER BY partition")
        return {int(p): int(c) for p, c in rows}

    wait_for(lambda: all(c >= 1_000 for c in consolidated_to().values()), timeout=90,
             what="both partitions consolidated")
    # The coordinator forgot the consolidated batches.
    floors = consolidated_to()
    rows = sql(cluster_db, "SELECT partition, min(base_offset) FROM diskless_batches GROUP BY partition ORDER BY partition")
    for p, low in rows:
        assert int(low) >= floors[int(p)]
    # Either broker serves offset 0 of either partition from the segments.
    for b in brokers:
        for partition in (0, 1):
            got = fetch_from(b, partition, 0)
            assert got and got[0][0] == 0
            assert got[0][1] == expected[partition][0][1]
    for partition in (0, 1):
        got = consume_confluent(brokers[1].bootstrap, topic, RECORDS, partition=partition, offset=0, timeout=120)
        assert [m.offset() for m in got] == list(range(RECORDS))
        assert as_tuples(got) == expected[partition]
    # Broker 1 dies: broker 2 takes over and consolidates what follows.
    brokers[0].kill9()
    survivor = brokers[1]
    more = make_records(RECORDS, "more")
    for partition in (0, 1):
        produce_confluent(survivor.bootstrap, topic, more, partition=partition,
                          timestamps=[base + 100_000 + 10 * i for i in range(RECORDS)],
                          extra={"linger.ms": 0, "batch.num.messages": 50})
    wait_for(lambda: all(consolidated_to()[p] >= RECORDS for p in (0, 1)), timeout=120,
             what="the survivor consolidating both partitions")
    for partition in (0, 1):
        got = consume_confluent(survivor.bootstrap, topic, 2 * RECORDS, partition=partition, offset=0, timeout=120)
        assert [m.offset() for m in got] == list(range(2 * RECORDS))
        assert as_tuples(got) == expected[partition] + more
