"""Deleting remote data on request, with real clients against the real
broker (filesystem tier, checked by listing the tier directory):
DeleteRecords below the local log start, topic deletion through the
partition delete lifecycle (also across a kill -9), and turning
`remote.storage.enable` off with `remote.log.delete.on.disable` (KIP-950)."""

import os

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from helpers import admin, create_topic, make_records, produce_confluent, wait_for

TIERED_BROKER = {
    "remote.log.storage.system.enable": "true",
    "remote.log.manager.task.interval.ms": "300",
}
TOPIC_CONFIG = {
    "segment.bytes": "65536",
    "remote.storage.enable": "true",
    "local.retention.bytes": "131072",
}
RECORDS = 20_000


def tier_root(broker):
    return os.path.join(broker.data_dir, "krabka-remote-tier")


def remote_logs(broker, topic):
    root = tier_root(broker)
    out = []
    for d in os.listdir(root) if os.path.isdir(root) else []:
        if d.startswith(topic + "-0-"):
            out += [f for f in os.listdir(os.path.join(root, d)) if f.endswith(".log")]
    return sorted(out)


def local_start(broker, topic):
    return local_bases(broker, topic)[0]


def local_bases(broker, topic):
    d = os.path.join(broker.data_dir, topic + "-0")
    return sorted(int(f.split(".")[0]) for f in os.listdir(d) if f.endswith(".log"))


def copies_done(broker, topic):
    """Every segment but the active one is in the tier (so the tier's
    listing stops changing) and some have left local disk."""
    remote = [int(n.split("-")[0]) for n in remote_logs(broker, topic)]
    local = local_bases(broker, topic)
    return len(remote) >= 10 and local[0] > 0 and len(local) >= 2 and max(remote) == local[-2]


def tiered_topic(broker, topic):
    create_topic(broker.bootstrap, topic, config=TOPIC_CONFIG)
    produce_confluent(broker.bootstrap, topic, make_records(RECORDS, topic), extra={"batch.size": 16384})
    wait_for(lambda: copies_done(broker, topic), timeout=60, what="segments to be copied and leave local disk")


def watermarks(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()


def first_offset_from_earliest(bootstrap, topic):
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "earliest-" + topic,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    c.subscribe([topic])
    try:
        msg = wait_for(lambda: c.poll(0.5), timeout=30, interval=0, what="a record")
        if msg.error():
            raise KafkaException(msg.error())
        return msg.offset()
    finally:
        c.close()


def test_delete_records_below_the_local_start_deletes_remote_segments(broker_factory):
    broker = broker_factory(TIERED_BROKER)
    topic = "tiered-dr"
    tiered_topic(broker, topic)
    before = remote_logs(broker, topic)
    starts = [int(n.split("-")[0]) for n in before]
    # An offset in the middle of the fourth remote segment.
    target = starts[3] + 7
    assert target < local_start(broker, topic)

    client = admin(broker.bootstrap)  # alive until the future resolves
    futures = client.delete_records([TopicPartition(topic, 0, target)])
    result = futures[TopicPartition(topic, 0)].result(timeout=30)
    assert result.low_watermark == target
    assert watermarks(broker.bootstrap, topic) == (target, RECORDS)

    # The three segments wholly below the new start leave the tier.
    wait_for(lambda: remote_logs(broker, topic) == before[3:], timeout=30, what="remote segments to go")
    assert first_offset_from_earliest(broker.bootstrap, topic) == target

    broker.restart()
    wait_for(lambda: watermarks(broker.bootstrap, topic) == (target, RECORDS), timeout=30,
             what="the log start after a restart")


def delete_topic(bootstrap, topic):
    client = admin(bootstrap)  # alive until the future resolves
    futures = client.delete_topics([topic], operation_timeout=30)
    futures[topic].result(timeout=30)


def test_topic_deletion_empties_the_tier(broker_factory):
    broker = broker_factory(TIERED_BROKER)
    topic = "tiered-gone"
    tiered_topic(broker, topic)
    delete_topic(broker.bootstrap, topic)
    wait_for(lambda: remote_logs(broker, topic) == [], timeout=30, what="the tier to empty")
    assert not os.path.exists(os.path.join(broker.data_dir, topic + "-0"))
    journal = os.path.join(broker.data_dir, "krabka-remote-deletions")
    wait_for(lambda: open(journal).read() == "", timeout=10, what="the deletion journal to clear")


def test_topic_deletion_finishes_after_a_kill9(broker_factory):
    # A long task interval: the deletion is journaled but not yet done when
    # the broker dies.
    broker = broker_factory(dict(TIERED_BROKER, **{"remote.log.manager.task.interval.ms": "3000"}))
    topic = "tiered-gone-kill"
    tiered_topic(broker, topic)
    copied = remote_logs(broker, topic)
    delete_topic(broker.bootstrap, topic)
    broker.kill9()
    assert remote_logs(broker, topic) != [] or copied == []
    assert "topic-deleted" in open(os.path.join(broker.data_dir, "krabka-remote-deletions")).read()

    broker.start()
    wait_for(lambda: remote_logs(broker, topic) == [], timeout=30, what="the tier to empty after restart")
    # The topic stays deleted and its name can be used again.
    create_topic(broker.bootstrap, topic, config=TOPIC_CONFIG)
    produce_confluent(broker.bootstrap, topic, make_records(10, "again"))
    assert watermarks(broker.bootstrap, topic) == (0, 10)


def alter(bootstrap, topic, pairs):
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in pairs.items()
    ])
    client = admin(bootstrap)  # alive until the future resolves
    futures = client.incremental_alter_configs([resource])
    return list(futures.values())[0].result(timeout=30)


def test_disabling_remote_storage_needs_delete_on_disable_and_deletes_the_tier(broker_factory):
    broker = broker_factory(TIERED_BROKER)
    topic = "tiered-off"
    tiered_topic(broker, topic)
    with pytest.raises(KafkaException) as refused:
        alter(broker.bootstrap, topic, {"remote.storage.enable": "false"})
    assert "without deleting remote data" in str(refused.value)
    assert remote_logs(broker, topic) != []

    alter(broker.bootstrap, topic, {"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"})
    wait_for(lambda: remote_logs(broker, topic) == [], timeout=30, what="the tier to empty")
    # What is left is the local log.
    start = local_start(broker, topic)
    wait_for(lambda: watermarks(broker.bootstrap, topic) == (start, RECORDS), timeout=10,
             what="the log start to be the local one")
    assert first_offset_from_earliest(broker.bootstrap, topic) == start

    # Tiering can be turned on again; copying starts over from the local log.
    alter(broker.bootstrap, topic, {"remote.storage.enable": "true"})
    produce_confluent(broker.bootstrap, topic, make_records(5000, "more"), extra={"batch.size": 16384})
    wait_for(lambda: remote_logs(broker, topic) != [], timeout=60, what="copies after re-enabling")
    assert int(remote_logs(broker, topic)[0].split("-")[0]) >= start
