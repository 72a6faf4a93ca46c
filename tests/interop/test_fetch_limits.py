"""Fetch budgets against the real broker (issue 14): `fetch.max.bytes`
caps what a client asking for 2 GiB gets, the broker-wide fetch memory
budget (`krabka.fetch.memory.max.bytes`) bounds the broker's memory however
many such clients fetch at once, and a flood of new fetch sessions cannot
evict a steady consumer's session.

Memory is the broker's own, read from /proc/<pid>/status (VmHWM, the peak
resident set since start), so it counts every buffer the broker allocated."""

import threading
import time

from confluent_kafka import Consumer, TopicPartition

from helpers import create_topic
from raw_client import RawConnection, fetch_discarding, fetch_request, fill, memory

MIB = 1 << 20
# Kafka's fetch.max.bytes default (55 MiB).
FETCH_MAX_BYTES = 57671680
# Room for one fetch: it holds its bytes twice while its response is encoded.
BUDGET = 128 * MIB
SLACK = 64 * MIB
# A response is the records plus a few hundred bytes of fields.
FRAME_SLACK = 64 * 1024
PARTITION_BYTES = 300_000_000


def big_partition(broker, topic):
    create_topic(broker.bootstrap, topic)
    return fill(broker.bootstrap, topic, PARTITION_BYTES)


def budgeted(broker_factory):
    return broker_factory({"krabka.fetch.memory.max.bytes": str(BUDGET)})


def test_a_consumer_asking_2_gib_gets_capped_responses_within_the_memory_budget(broker_factory):
    broker = budgeted(broker_factory)
    count = big_partition(broker, "huge")

    # A raw Fetch asking 2 GiB for the response and the partition: every
    # answer is capped at fetch.max.bytes, and all of it comes back.
    sizes = []
    with RawConnection(broker.bootstrap) as conn:
        for offset in range(0, count, count // 6):
            size, error, _ = fetch_discarding(conn, fetch_request([("huge", 0, offset)]))
            assert error == 0
            sizes.append(size)
    assert all(FETCH_MAX_BYTES // 2 < s <= FETCH_MAX_BYTES + FRAME_SLACK for s in sizes), sizes

    # A real consumer with every fetch limit at its maximum reads it all.
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": "huge-reader",
        "enable.auto.commit": False,
        "fetch.max.bytes": 2147483135,
        "max.partition.fetch.bytes": 1000000000,
        "receive.message.max.bytes": 2147483647,
    })
    consumer.assign([TopicPartition("huge", 0, 0)])
    seen, total, deadline = 0, 0, time.time() + 120
    try:
        while seen < count and time.time() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=1.0):
                assert msg.error() is None, msg.error()
                assert msg.offset() == seen
                seen += 1
                total += len(msg.value())
    finally:
        consumer.close()
    assert seen == count
    assert total == count * 100_000

    rss, peak = memory(broker.process.pid)
    print("broker peak RSS %.1f MiB, now %.1f MiB" % (peak / MIB, rss / MIB))
    assert peak < BUDGET + SLACK, "peak RSS %d MiB over budget %d MiB + %d MiB" % (
        peak // MIB, BUDGET // MIB, SLACK // MIB)


def test_twenty_hostile_consumers_at_once_stay_within_the_memory_budget(broker_factory):
    broker = budgeted(broker_factory)
    count = big_partition(broker, "shared")
    errors, sizes = [], []

    def hostile(n):
        try:
            with RawConnection(broker.bootstrap, timeout=300) as conn:
                for k in range(3):
                    offset = ((n * 3 + k) * 97) % count
                    size, error, _ = fetch_discarding(conn, fetch_request([("shared", 0, offset)]))
                    assert error == 0
                    sizes.append(size)
        except Exception as e:  # reported below, with the others
            errors.append(e)

    threads = [threading.Thread(target=hostile, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
        assert not t.is_alive(), "a fetch never finished"
    assert not errors, errors[:3]
    assert len(sizes) == 60
    assert all(0 < s <= FETCH_MAX_BYTES + FRAME_SLACK for s in sizes)
    assert max(sizes) > FETCH_MAX_BYTES // 2
    rss, peak = memory(broker.process.pid)
    print("broker peak RSS %.1f MiB, now %.1f MiB" % (peak / MIB, rss / MIB))
    assert peak < BUDGET + SLACK, "peak RSS %d MiB over budget %d MiB + %d MiB" % (
        peak // MIB, BUDGET // MIB, SLACK // MIB)


def test_a_flood_of_new_fetch_sessions_does_not_evict_a_steady_consumers_session(broker):
    create_topic(broker.bootstrap, "steady", partitions=3)
    steady_partitions = [("steady", p, 0) for p in range(3)]
    with RawConnection(broker.bootstrap) as steady:
        _, error, session = fetch_discarding(
            steady, fetch_request(steady_partitions, max_bytes=MIB, partition_max_bytes=MIB,
                                  session_id=0, session_epoch=0))
        assert error == 0 and session > 0
        epoch = 1
        _, error, same = fetch_discarding(
            steady, fetch_request([], session_id=session, session_epoch=epoch))
        assert (error, same) == (0, session)
        epoch += 1

        # 1,000 clients each open a session of one partition while the
        # steady consumer is idle: the cache (1,000 slots) fills up, and the
        # newcomers may evict only stale sessions or older, smaller ones.
        refused = 0
        conns = [RawConnection(broker.bootstrap) for _ in range(10)]
        try:
            for n in range(1000):
                _, error, got = fetch_discarding(
                    conns[n % 10], fetch_request([("steady", n % 3, 0)], session_id=0, session_epoch=0))
                assert error == 0
                refused += got == 0
        finally:
            for c in conns:
                c.close()
        assert refused >= 1, "the cache never filled up"

        # The steady consumer's session is still there (no
        # FETCH_SESSION_ID_NOT_FOUND = 70), under its id.
        _, error, same = fetch_discarding(
            steady, fetch_request([], session_id=session, session_epoch=epoch))
        assert (error, same) == (0, session)
