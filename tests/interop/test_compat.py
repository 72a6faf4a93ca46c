"""Compatibility gaps real clients found (issue 20): per-record produce
errors (KIP-467), the topic configs Kafka 4.x lists, recompression to a
topic's compression.type, max.compaction.lag.ms, and zstd on old versions.
Every test checks what the broker really did (stored codecs, the offsets
left after compaction), not just the client's answer."""

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import ConfigResource, NewTopic
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse

from helpers import (
    admin,
    consume_confluent,
    create_topic,
    make_records,
    produce_confluent,
    raw_call,
    stored_batches,
    stored_codecs,
    wait_for,
)

# Every topic config of Apache Kafka 4.x (TopicConfig, as its documentation
# lists them), each with a value Kafka accepts.
KAFKA_4_TOPIC_CONFIGS = {
    "cleanup.policy": "compact,delete",
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.type": "lz4",
    "compression.zstd.level": "3",
    "delete.retention.ms": "3600000",
    "file.delete.delay.ms": "1000",
    "flush.messages": "100000",
    "flush.ms": "60000",
    "follower.replication.throttled.replicas": "0:1",
    "index.interval.bytes": "8192",
    "leader.replication.throttled.replicas": "*",
    "local.retention.bytes": "-2",
    "local.retention.ms": "-2",
    "max.compaction.lag.ms": "86400000",
    "max.message.bytes": "2000000",
    "message.downconversion.enable": "false",
    "message.timestamp.after.max.ms": "7200000",
    "message.timestamp.before.max.ms": "86400000",
    "message.timestamp.type": "LogAppendTime",
    "min.cleanable.dirty.ratio": "0.3",
    "min.compaction.lag.ms": "1000",
    "min.insync.replicas": "1",
    "preallocate": "true",
    "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
    "remote.storage.enable": "false",
    "retention.bytes": "1000000000",
    "retention.ms": "86400000",
    "segment.bytes": "10485760",
    "segment.index.bytes": "1048576",
    "segment.jitter.ms": "0",
    "segment.ms": "3600000",
    "unclean.leader.election.enable": "true",
}

# Values of Kafka 4.x topic configs Krabka refuses, and the reason it gives.
REFUSED_VALUES = {
    "segment.jitter.ms": ("1000", "only 0 is supported"),
    "compression.gzip.level": ("5", "default level"),
    "compression.lz4.level": ("12", "default level"),
    "compression.zstd.level": ("10", "default level"),
}


def test_every_kafka_topic_config_is_accepted_and_reported(broker):
    a = admin(broker.bootstrap)
    futures = a.create_topics(
        [NewTopic("all-configs", 1, 1, config=KAFKA_4_TOPIC_CONFIGS)], operation_timeout=10
    )
    futures["all-configs"].result(timeout=30)
    resource = ConfigResource(ConfigResource.Type.TOPIC, "all-configs")
    described = a.describe_configs([resource])[resource].result(timeout=30)
    for name, value in KAFKA_4_TOPIC_CONFIGS.items():
        assert name in described, name
        assert described[name].value == value, (name, described[name].value)
    for name, (value, reason) in REFUSED_VALUES.items():
        futures = a.create_topics([NewTopic("refused-" + name, 1, 1, config={name: value})],
                                  operation_timeout=10)
        with pytest.raises(KafkaException) as refused:
            futures["refused-" + name].result(timeout=30)
        assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG, name
        assert reason in refused.value.args[0].str(), refused.value.args[0].str()


def delivery_errors(bootstrap, topic, records, extra=None):
    """Produces `records` ((key, value, timestamp)) as one batch; returns the
    delivery error of each, in order (None for a delivered record). The
    linger is long so that nothing but flush() sends: a short one could expire
    between two produce() calls on a loaded machine and split the batch."""
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 60000, "batch.num.messages": 1000,
            "retries": 0, "compression.type": "lz4"}
    conf.update(extra or {})
    producer = Producer(conf)
    results = [None] * len(records)
    done = [False] * len(records)

    def report(i):
        def on_delivery(err, msg):
            results[i] = err
            done[i] = True
        return on_delivery

    for i, (key, value, ts) in enumerate(records):
        kwargs = {"timestamp": ts} if ts is not None else {}
        producer.produce(topic, key=key, value=value, partition=0, on_delivery=report(i), **kwargs)
    assert producer.flush(60) == 0
    assert all(done)
    return results


def test_per_record_errors_fail_exactly_the_bad_records(broker):
    """KIP-467: a batch refused for some of its records names them; librdkafka
    fails those with the broker's message and the others of the batch with
    _INVALID_DIFFERENT_RECORD."""
    create_topic(broker.bootstrap, "rec-errors", config={"cleanup.policy": "compact"})
    records = [(b"k0", b"v0", None), (None, b"v1", None), (b"k2", b"v2", None), (None, b"v3", None)]
    errors = delivery_errors(broker.bootstrap, "rec-errors", records)
    assert [e.code() if e else None for e in errors] == [
        KafkaError._INVALID_DIFFERENT_RECORD, KafkaError.INVALID_RECORD,
        KafkaError._INVALID_DIFFERENT_RECORD, KafkaError.INVALID_RECORD,
    ], errors
    assert stored_batches(broker.data_dir, "rec-errors") == []
    # The answer itself (ProduceResponse v8+): each bad record's index and
    # reason, and Kafka's summary as the partition's error message.
    answer = produce_v(broker, 9, "rec-errors", make_batch([b"v0", b"v1", b"v2"], keys=[b"k0", None, b"k2"]))
    assert answer.error_code == 87
    assert [(e.batch_index, e.batch_index_error_message) for e in answer.record_errors] == [
        (1, "Compacted topic cannot accept message without key in topic partition rec-errors-0.")]
    assert answer.error_message.startswith("One or more records have been rejected due to 1 record errors")

    # Timestamps out of message.timestamp.before.max.ms: INVALID_TIMESTAMP.
    create_topic(broker.bootstrap, "rec-ts", config={"message.timestamp.before.max.ms": "3600000"})
    now = int(time.time() * 1000)
    records = [(b"a", b"ok", now), (b"b", b"old", now - 7_200_000), (b"c", b"ok", now)]
    errors = delivery_errors(broker.bootstrap, "rec-ts", records)
    # librdkafka applies record errors to INVALID_RECORD only: it fails the
    # whole batch here, with the broker's code.
    assert [e.code() if e else None for e in errors] == [KafkaError.INVALID_TIMESTAMP] * 3, errors
    answer = produce_v(broker, 9, "rec-ts", make_batch([b"ok", b"old"], keys=[b"a", b"b"],
                                                       timestamps=[now, now - 7_200_000]))
    assert answer.error_code == 32
    assert [e.batch_index for e in answer.record_errors] == [1]
    assert "is out of range" in answer.record_errors[0].batch_index_error_message
    assert answer.error_message == "One or more records have been rejected due to invalid timestamp"
    assert stored_batches(broker.data_dir, "rec-ts") == []
    # Good records alone go through.
    assert delivery_errors(broker.bootstrap, "rec-ts", [(b"a", b"ok", now)]) == [None]


@pytest.mark.parametrize("topic_codec,stored", [("zstd", "zstd"), ("uncompressed", "none"), ("snappy", "snappy")])
def test_topic_compression_type_recompresses(broker, topic_codec, stored):
    topic = "recompress-" + topic_codec
    create_topic(broker.bootstrap, topic, config={"compression.type": topic_codec})
    records = make_records(5000, topic)
    produce_confluent(broker.bootstrap, topic, records, extra={"compression.type": "gzip"})
    assert stored_codecs(broker.data_dir, topic) == {stored}
    got = consume_confluent(broker.bootstrap, topic, len(records))
    assert [(m.key(), m.value(), list(m.headers() or [])) for m in got] == records


def test_idempotent_batches_survive_recompression(broker):
    create_topic(broker.bootstrap, "recompress-idem", config={"compression.type": "zstd"})
    records = make_records(3000, "idem")
    produce_confluent(broker.bootstrap, "recompress-idem", records,
                      extra={"compression.type": "gzip", "enable.idempotence": True, "acks": "all"})
    assert stored_codecs(broker.data_dir, "recompress-idem") == {"zstd"}
    got = consume_confluent(broker.bootstrap, "recompress-idem", len(records))
    assert [m.offset() for m in got] == list(range(len(records)))


def test_max_compaction_lag_compacts_in_time(broker_factory):
    """A compacted topic whose dirty ratio never reaches
    min.cleanable.dirty.ratio is still cleaned once its records are older than
    max.compaction.lag.ms (the active segment rolls at that age too)."""
    b = broker_factory({"log.cleaner.backoff.ms": "200", "log.retention.check.interval.ms": "200"})
    create_topic(b.bootstrap, "lagged", config={
        "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.99",
        "max.compaction.lag.ms": "1500", "segment.ms": "86400000",
    })
    records = [(b"key-%d" % (i % 10), b"value-%d" % i, []) for i in range(500)]
    produce_confluent(b.bootstrap, "lagged", records, extra={"linger.ms": 0, "batch.num.messages": 20})

    def compacted():
        offsets = [m.offset() for m in consume_confluent(b.bootstrap, "lagged", 10, timeout=5)]
        return offsets if offsets and offsets[0] >= 400 else None

    offsets = wait_for(compacted, timeout=60, interval=0.5, what="compaction by max.compaction.lag.ms")
    # Only the latest value of each key is left (the last 10 offsets), the
    # offsets never renumbered.
    assert offsets == list(range(490, 500)), offsets


def produce_v(broker, version, topic, batch):
    T = ProduceRequest.TopicProduceData
    r = raw_call(broker.bootstrap, ProduceRequest[version](
        acks=-1, timeout_ms=5000,
        topic_data=[T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=batch)])]),
        ProduceResponse)
    return r.responses[0].partition_responses[0]


def fetch_v(broker, version, topic, offset=0):
    F = FetchRequest.FetchTopic
    r = raw_call(broker.bootstrap, FetchRequest[version](
        replica_id=-1, max_wait_ms=100, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
        topics=[F(topic=topic, partitions=[F.FetchPartition(partition=0, fetch_offset=offset,
                                                             partition_max_bytes=1 << 20)])]),
        FetchResponse)
    return r.responses[0].partitions[0]


def make_batch(values, keys=None, compression_type=0, timestamps=None):
    """A v2 batch built by kafka-python (compression_type 4 is zstd)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression_type, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    keys = keys or [None] * len(values)
    timestamps = timestamps or [int(time.time() * 1000)] * len(values)
    for i, (key, value, ts) in enumerate(zip(keys, values, timestamps)):
        builder.append(i, timestamp=ts, key=key, value=value, headers=[])
    return bytes(builder.build())


def test_zstd_needs_produce_v7_and_fetch_v10(broker):
    create_topic(broker.bootstrap, "zstd-old")
    batch = make_batch([b"a" * 100, b"b" * 100], compression_type=4)
    refused = produce_v(broker, 6, "zstd-old", batch)
    assert refused.error_code == 76  # UNSUPPORTED_COMPRESSION_TYPE
    assert stored_batches(broker.data_dir, "zstd-old") == []
    assert produce_v(broker, 7, "zstd-old", batch).error_code == 0
    assert stored_codecs(broker.data_dir, "zstd-old") == {"zstd"}
    # A pre-zstd fetcher gets the error instead of batches it cannot read.
    old = fetch_v(broker, 9, "zstd-old")
    assert old.error_code == 76 and not old.records
    new = fetch_v(broker, 10, "zstd-old")
    assert new.error_code == 0 and new.records
    # A topic that stores zstd answers old fetches with the error outright.
    create_topic(broker.bootstrap, "zstd-topic", config={"compression.type": "zstd"})
    assert fetch_v(broker, 4, "zstd-topic").error_code == 76


def alter_group_configs(bootstrap, group, configs, validate_only=False):
    """IncrementalAlterConfigs on a GROUP resource (type 32); `configs` maps a
    name to a value (SET) or None (DELETE). Returns (error code, message)."""
    from kafka.protocol.admin import IncrementalAlterConfigsRequest as I, IncrementalAlterConfigsResponse

    R = I.AlterConfigsResource
    request = I[1](validate_only=validate_only, resources=[R(
        resource_type=32, resource_name=group,
        configs=[R.AlterableConfig(name=n, config_operation=0 if v is not None else 1, value=v)
                 for n, v in configs.items()])])
    r = raw_call(bootstrap, request, IncrementalAlterConfigsResponse).responses[0]
    return r.error_code, r.error_message


def describe_group_configs(bootstrap, group):
    """DescribeConfigs v4 of a GROUP resource: {name: (value, source)}."""
    from kafka.protocol.admin import DescribeConfigsRequest as D, DescribeConfigsResponse

    request = D[4](include_synonyms=True, include_documentation=False, resources=[
        D.DescribeConfigsResource(resource_type=32, resource_name=group, configuration_keys=None)])
    result = raw_call(bootstrap, request, DescribeConfigsResponse).results[0]
    assert result.error_code == 0, result.error_message
    return {c.name: (c.value, c.config_source) for c in result.configs}


CONSUMER_SCRIPT = r"""
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "group.protocol": "consumer"})
c.subscribe([sys.argv[3]])
while not c.assignment():
    c.poll(0.2)
print("assigned", flush=True)
sys.stdin.read()
"""


def test_group_configs_are_validated_persisted_and_applied(broker_factory, tmp_path):
    """KIP-848 group configs: DescribeConfigs / IncrementalAlterConfigs on the
    GROUP resource, bounded by the broker's group.consumer.min/max settings,
    kept across a restart, and applied: a member that dies without leaving
    is fenced after the group's consumer.session.timeout.ms, not the
    broker's 45 s."""
    import subprocess
    import sys

    from confluent_kafka.admin import AdminClient

    b = broker_factory({"group.consumer.min.session.timeout.ms": "1000",
                        "group.consumer.min.heartbeat.interval.ms": "500"})
    create_topic(b.bootstrap, "gcfg")
    assert describe_group_configs(b.bootstrap, "g1")["consumer.session.timeout.ms"] == ("45000", 5)

    code, message = alter_group_configs(b.bootstrap, "g1", {"consumer.session.timeout.ms": "500"})
    assert code == 40 and "greater than or equal to group.consumer.min.session.timeout.ms" in message
    code, message = alter_group_configs(b.bootstrap, "g1", {"consumer.heartbeat.interval.ms": "60000"})
    assert code == 40, message
    code, message = alter_group_configs(b.bootstrap, "g1", {"share.record.lock.duration.ms": "5000"})
    assert code == 40 and "Unknown group config name" in message
    assert alter_group_configs(b.bootstrap, "g1", {"consumer.session.timeout.ms": "2000",
                                                   "consumer.heartbeat.interval.ms": "500"})[0] == 0
    b.restart()
    described = describe_group_configs(b.bootstrap, "g1")
    assert described["consumer.session.timeout.ms"] == ("2000", 8)
    assert described["consumer.heartbeat.interval.ms"] == ("500", 8)

    member = subprocess.Popen([sys.executable, "-c", CONSUMER_SCRIPT, b.bootstrap, "g1", "gcfg"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        line = member.stdout.readline()
        assert line.strip() == b"assigned", line
        a = AdminClient({"bootstrap.servers": b.bootstrap})
        members = lambda: len(a.describe_consumer_groups(["g1"])["g1"].result(timeout=10).members)
        assert members() == 1
        member.kill()
        member.wait()
        killed = time.time()
        wait_for(lambda: members() == 0, timeout=20, interval=0.25,
                 what="the dead member to be fenced by the group's session timeout")
        assert time.time() - killed < 20
    finally:
        if member.poll() is None:
            member.kill()
            member.wait()
    # Deleting the config falls back to the broker's value.
    assert alter_group_configs(b.bootstrap, "g1", {"consumer.session.timeout.ms": None,
                                                   "consumer.heartbeat.interval.ms": None})[0] == 0
    assert describe_group_configs(b.bootstrap, "g1")["consumer.session.timeout.ms"] == ("45000", 5)


def describe_topic_partitions(bootstrap, topics, limit=2000, cursor=None):
    from kafka.protocol.admin import DescribeTopicPartitionsRequest as D, DescribeTopicPartitionsResponse

    request = D[0](topics=[D.TopicRequest(name=t) for t in topics], response_partition_limit=limit,
                   cursor=D.Cursor(topic_name=cursor[0], partition_index=cursor[1]) if cursor else None)
    return raw_call(bootstrap, request, DescribeTopicPartitionsResponse)


def test_describe_topic_partitions_pages_with_a_cursor(broker):
    """DescribeTopicPartitions (KIP-966, what kafka-topics.sh --describe
    sends since 3.7): topics in name order, partitions paged by the limit and
    resumed from the cursor."""
    create_topic(broker.bootstrap, "dtp-a", partitions=3)
    create_topic(broker.bootstrap, "dtp-b", partitions=2)
    r = describe_topic_partitions(broker.bootstrap, ["dtp-b", "dtp-a", "dtp-missing"])
    assert [(t.name, t.error_code, len(t.partitions)) for t in r.topics] == [
        ("dtp-a", 0, 3), ("dtp-b", 0, 2), ("dtp-missing", 3, 0)]
    p = r.topics[0].partitions[2]
    assert (p.partition_index, p.leader_id, list(p.replica_nodes), list(p.isr_nodes)) == (2, 1, [1], [1])
    assert r.next_cursor is None
    # Pages of two partitions: a-0,a-1 | a-2,b-0 | b-1.
    pages, cursor = [], None
    while True:
        r = describe_topic_partitions(broker.bootstrap, ["dtp-a", "dtp-b"], limit=2, cursor=cursor)
        pages.append([(t.name, p.partition_index) for t in r.topics for p in t.partitions])
        if r.next_cursor is None:
            break
        cursor = (r.next_cursor.topic_name, r.next_cursor.partition_index)
    assert pages == [[("dtp-a", 0), ("dtp-a", 1)], [("dtp-a", 2), ("dtp-b", 0)], [("dtp-b", 1)]]
    # Every topic when none is named.
    names = [t.name for t in describe_topic_partitions(broker.bootstrap, []).topics]
    assert names == sorted(names) and {"dtp-a", "dtp-b"} <= set(names)


def test_produce_is_advertised_from_v0_but_old_versions_close_the_connection(broker):
    """KAFKA-18659: Produce is advertised from v0 (librdkafka < 2.11.1 only
    compresses then) while v0-v2 requests are refused as Kafka 4 refuses any
    removed version: the connection is closed without an answer."""
    from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse

    answer = raw_call(broker.bootstrap, ApiVersionsRequest[3](client_software_name="t",
                                                               client_software_version="1"),
                      ApiVersionsResponse)
    produce = [k for k in answer.api_keys if k.api_key == 0][0]
    assert (produce.min_version, produce.max_version) == (0, 13)
    create_topic(broker.bootstrap, "old-produce")
    with pytest.raises(ConnectionError):
        produce_v(broker, 2, "old-produce", make_batch([b"x"]))
    assert produce_v(broker, 3, "old-produce", make_batch([b"x"])).error_code == 0
    assert "Received request for api with key 0 (Produce) and unsupported version 2" in broker.log()
