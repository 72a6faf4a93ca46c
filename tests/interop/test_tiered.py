"""Tiered storage (KIP-405) against the real broker: segments leave local
disk for the filesystem tier and every client still reads from offset 0."""

import os
import subprocess

import pytest
from confluent_kafka import Consumer, TopicPartition

from conftest import kcat_path
from helpers import as_tuples, consume_confluent, create_topic, make_records, produce_confluent, wait_for

RECORDS = 50_000

TIERED_BROKER = {
    "remote.log.storage.system.enable": "true",
    "remote.log.manager.task.interval.ms": "300",
}


def local_logs(broker, topic):
    d = os.path.join(broker.data_dir, topic + "-0")
    return sorted(f for f in os.listdir(d) if f.endswith(".log"))


def remote_logs(broker, topic):
    root = os.path.join(broker.data_dir, "krabka-remote-tier")
    out = []
    for d in os.listdir(root) if os.path.isdir(root) else []:
        if d.startswith(topic + "-0-"):
            out += [f for f in os.listdir(os.path.join(root, d)) if f.endswith(".log")]
    return sorted(out)


def low_watermark(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()


def loaded_watermark(bootstrap, topic):
    try:
        return low_watermark(bootstrap, topic)[0] == 0
    except Exception:
        return False


def read_all_and_compare(broker, topic, expected):
    got = consume_confluent(broker.bootstrap, topic, len(expected), offset=0, timeout=120)
    assert [m.offset() for m in got] == list(range(len(expected)))
    assert as_tuples(got) == [(k, v, h) for k, v, h in expected]


def read_with_kcat(broker, topic, expected):
    result = subprocess.run(
        [kcat_path(), "-b", broker.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e",
         "-f", "%o\t%K\t%S\t%k\n"],
        capture_output=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stdout.decode("utf-8", "replace").splitlines()
    want = [
        "%d\t%d\t%d\t%s" % (i, -1 if k is None else len(k), -1 if v is None else len(v), (k or b"").decode())
        for i, (k, v, _) in enumerate(expected)
    ]
    assert lines == want


def test_tiered_filesystem_round_trip_and_restart(broker_factory):
    broker = broker_factory(TIERED_BROKER)
    topic = "tiered-fs"
    create_topic(broker.bootstrap, topic, config={
        "segment.bytes": "65536",
        "remote.storage.enable": "true",
        "local.retention.bytes": "131072",
    })
    records = make_records(RECORDS, "t")
    produce_confluent(broker.bootstrap, topic, records, extra={"batch.size": 32768})

    # Most closed segments move to the tier and leave local disk.
    wait_for(lambda: len(remote_logs(broker, topic)) >= 10 and len(local_logs(broker, topic)) <= 4,
             timeout=120, what="segments to leave local disk")
    assert len(remote_logs(broker, topic)) > len(local_logs(broker, topic))
    assert local_logs(broker, topic)[0] != "%020d.log" % 0
    assert low_watermark(broker.bootstrap, topic) == (0, RECORDS)

    read_all_and_compare(broker, topic, records)
    if kcat_path():
        read_with_kcat(broker, topic, records)

    broker.restart()
    # The remote metadata loads in the background after a start; until then
    # ListOffsets(earliest) answers a retriable error, never a later offset.
    wait_for(lambda: loaded_watermark(broker.bootstrap, topic), timeout=60, what="remote metadata to load")
    assert low_watermark(broker.bootstrap, topic) == (0, RECORDS)
    read_all_and_compare(broker, topic, records)
    # Nothing was copied twice after the restart.
    names = remote_logs(broker, topic)
    starts = [n.split("-")[0] for n in names]
    assert len(starts) == len(set(starts))


def test_tiered_refused_when_system_disabled(broker):
    from confluent_kafka.admin import NewTopic
    from helpers import admin
    client = admin(broker.bootstrap)
    fut = client.create_topics([NewTopic("not-tiered", 1, 1, config={"remote.storage.enable": "true"})])
    with pytest.raises(Exception) as e:
        fut["not-tiered"].result(timeout=30)
    assert "Tiered Storage functionality is disabled" in str(e.value)


def test_tiered_refuses_compacted_and_local_above_total(broker_factory):
    from confluent_kafka.admin import NewTopic
    from helpers import admin
    broker = broker_factory(TIERED_BROKER)
    client = admin(broker.bootstrap)
    bad = {
        "t-compact": {"remote.storage.enable": "true", "cleanup.policy": "compact"},
        "t-local": {"remote.storage.enable": "true", "retention.bytes": "1000", "local.retention.bytes": "2000"},
    }
    futs = client.create_topics([NewTopic(n, 1, 1, config=c) for n, c in bad.items()])
    for name in bad:
        with pytest.raises(Exception):
            futs[name].result(timeout=30)


def test_tiered_kill9_during_copies_leaves_each_segment_once(broker_factory):
    broker = broker_factory(TIERED_BROKER)
    topic = "tiered-kill"
    create_topic(broker.bootstrap, topic, config={
        "segment.bytes": "65536",
        "remote.storage.enable": "true",
        "local.retention.bytes": "131072",
    })
    records = make_records(RECORDS, "k")
    produce_confluent(broker.bootstrap, topic, records, extra={"batch.size": 32768})
    # Kill as soon as copying has begun, most likely in the middle of it.
    wait_for(lambda: len(remote_logs(broker, topic)) >= 1, timeout=120, interval=0.01, what="first copy")
    broker.kill9()

    broker.start()
    wait_for(lambda: len(local_logs(broker, topic)) <= 4, timeout=120, what="segments to leave local disk")
    wait_for(lambda: loaded_watermark(broker.bootstrap, topic), timeout=60, what="remote metadata to load")
    starts = [n.split("-")[0] for n in remote_logs(broker, topic)]
    assert len(starts) == len(set(starts)), "a segment is in the remote tier twice"
    read_all_and_compare(broker, topic, records)
