"""kafka-python against krabka: admin, produce with every codec, consume
with group_id=None, offsets by timestamp."""

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
from kafka.errors import InvalidTopicError, TopicAlreadyExistsError

from helpers import make_records, stored_codecs


def admin_client(bootstrap):
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)


def consume(bootstrap, topic, count, offset=0, partition=0):
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
        consumer_timeout_ms=10000, max_partition_fetch_bytes=4 * 1024 * 1024,
    )
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    consumer.seek(tp, offset)
    out = []
    for msg in consumer:
        out.append(msg)
        if len(out) >= count:
            break
    consumer.close()
    return out


def test_admin_create_describe_delete(broker):
    a = admin_client(broker.bootstrap)
    a.create_topics([NewTopic("kp-admin", num_partitions=2, replication_factor=1, topic_configs={"retention.ms": "3600000"})])
    assert "kp-admin" in a.list_topics()
    with pytest.raises(TopicAlreadyExistsError):
        a.create_topics([NewTopic("kp-admin", num_partitions=1, replication_factor=1)])
    with pytest.raises(InvalidTopicError):
        a.create_topics([NewTopic("..", num_partitions=1, replication_factor=1)])
    described = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-admin")])
    text = repr(described)
    assert "retention.ms" in text and "3600000" in text
    cluster = a.describe_cluster()
    assert cluster["controller_id"] == 1
    assert len(cluster["brokers"]) == 1 and 1 in cluster["brokers"][0].values()
    dirs = a.describe_log_dirs()
    assert "kp-admin" in repr(dirs)
    a.delete_topics(["kp-admin"])
    assert "kp-admin" not in a.list_topics()
    a.close()


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_produce_consume_each_codec(broker, codec):
    # kafka-python's codec packages come from tests/requirements.txt; a
    # missing one is a broken setup, not a reason to skip.
    topic = "kp-%s" % (codec or "none")
    a = admin_client(broker.bootstrap)
    a.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    a.close()
    records = make_records(20_000, topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, acks="all", linger_ms=5)
    futures = [
        producer.send(topic, key=k, value=v, headers=h, partition=0)
        for k, v, h in records
    ]
    producer.flush(60)
    offsets = [f.get(timeout=30).offset for f in futures]
    producer.close()
    assert offsets == list(range(len(records)))
    got = consume(broker.bootstrap, topic, len(records))
    assert [(m.key, m.value, list(m.headers)) for m in got] == [(k, v, h) for k, v, h in records]
    stored = stored_codecs(broker.data_dir, topic)
    if codec is None:
        assert stored == {"none"}
    else:
        # kafka-python sends a batch uncompressed when compressing would not
        # shrink it (a batch of a record or two that the linger closed early),
        # so "none" may appear beside the codec; the codec must be there.
        assert codec in stored and stored <= {codec, "none"}, stored


def test_offsets_for_times_and_auto_create(broker):
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    base = 1_600_000_000_000
    for i in range(50):
        producer.send("kp-auto", value=b"v%d" % i, timestamp_ms=base + i * 10, partition=0)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    tp = TopicPartition("kp-auto", 0)
    assert consumer.beginning_offsets([tp])[tp] == 0
    assert consumer.end_offsets([tp])[tp] == 50
    found = consumer.offsets_for_times({tp: base + 205})
    assert found[tp].offset == 21
    assert found[tp].timestamp == base + 210
    consumer.close()
