"""Tiered storage on a broker that cannot reach its own advertised address
(issue 14, item 4): `__remote_log_metadata` is read and written in process,
never through the broker's listener, so a broker advertised on an address
nothing listens on still copies segments to the tier and serves remote
reads. The test speaks to the real port only, with requests encoded by
kafka-python's protocol classes (a client following the advertised address
could not connect at all)."""

import time

from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse
from kafka.protocol.consumer.fetch import FetchResponse
from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka.record import MemoryRecords

from conftest import free_port
from helpers import wait_for
from raw_client import RawConnection, batch, fetch_request, produce
from test_tiered import TIERED_BROKER, local_logs, remote_logs

BATCHES = 300
PER_BATCH = 10


def create_tiered_topic(conn, topic):
    R = CreateTopicsRequest[5]
    configs = {"segment.bytes": "65536", "remote.storage.enable": "true", "local.retention.bytes": "131072"}
    request = R(topics=[R.CreatableTopic(
        name=topic, num_partitions=1, replication_factor=1, assignments=[],
        configs=[R.CreatableTopic.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])],
        timeout_ms=30000, validate_only=False)
    _, response = conn.call(request, CreateTopicsResponse)
    assert response.topics[0].error_code == 0, response


def earliest(conn, topic):
    R = ListOffsetsRequest[5]
    request = R(replica_id=-1, isolation_level=0, topics=[R.ListOffsetsTopic(
        name=topic, partitions=[R.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=0, current_leader_epoch=-1, timestamp=-2)])])
    _, response = conn.call(request, ListOffsetsResponse)
    p = response.topics[0].partitions[0]
    return p.error_code, p.offset


def read_from(conn, topic, offset, end):
    """(offset, value) of every record from `offset` to `end`, following the log."""
    out = []
    while offset < end:
        _, response = conn.call(
            fetch_request([(topic, 0, offset)], max_bytes=1 << 20, partition_max_bytes=1 << 20),
            FetchResponse)
        p = response.responses[0].partitions[0]
        assert p.error_code == 0, "fetch at %d: error %d" % (offset, p.error_code)
        records = MemoryRecords(p.records)
        got = False
        while records.has_next():
            for r in records.next_batch():
                if r.offset >= offset:
                    out.append((r.offset, r.value))
                    got = True
        assert got, "no progress at %d" % offset
        offset = out[-1][0] + 1
    return out


def value(b, i):
    return b"batch-%04d-record-%02d-" % (b, i) + b"x" * 900


def test_a_broker_advertised_where_it_cannot_reach_itself_tiers_and_serves_remote_reads(broker_factory):
    nowhere = free_port()  # nothing listens there, on an address the broker does not bind
    broker = broker_factory(dict(TIERED_BROKER, **{
        "advertised.listeners": "PLAINTEXT://127.0.0.2:%d" % nowhere,
    }))
    topic = "tiered-nowhere"
    with RawConnection(broker.bootstrap) as conn:
        create_tiered_topic(conn, topic)
        for b in range(BATCHES):
            produce(conn, topic, 0, batch([value(b, i) for i in range(PER_BATCH)]))
    end = BATCHES * PER_BATCH

    # Segments reach the tier and leave local disk.
    wait_for(lambda: len(remote_logs(broker, topic)) >= 10 and local_logs(broker, topic)[0] != "%020d.log" % 0,
             timeout=120, what="segments to reach the tier")
    expected = [(b * PER_BATCH + i, value(b, i)) for b in range(BATCHES) for i in range(PER_BATCH)]
    with RawConnection(broker.bootstrap) as conn:
        assert earliest(conn, topic) == (0, 0)
        assert read_from(conn, topic, 0, end) == expected

    # After a restart the tiered data is served again as soon as the
    # partition's remote metadata is loaded (no connection to set up first).
    broker.stop()
    started = time.monotonic()
    broker.start()

    def first_tiered_read():
        try:
            with RawConnection(broker.bootstrap) as conn:
                _, response = conn.call(
                    fetch_request([(topic, 0, 0)], max_bytes=1 << 20, partition_max_bytes=1 << 20),
                    FetchResponse)
                p = response.responses[0].partitions[0]
                return p.error_code == 0 and len(p.records) > 0
        except OSError:
            return False

    wait_for(first_tiered_read, timeout=60, interval=0.01, what="the first tiered read after a restart")
    print("start to first tiered read: %.0f ms" % ((time.monotonic() - started) * 1000))
    with RawConnection(broker.bootstrap) as conn:
        assert read_from(conn, topic, 0, end) == expected
    assert "__remote_log_metadata" in broker.log()
