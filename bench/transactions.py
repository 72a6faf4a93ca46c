#!/usr/bin/env python3
"""Transaction benchmark (issue 5): transactional produce throughput —
transactions per second of 100 records — next to non-transactional produce
of the same records, in one run against one broker.

Starts the release broker (`target/release/krabka`, or $KRABKA_BIN) on a
free 127.0.0.1 port with a temporary data directory, drives it with one
confluent-kafka (librdkafka) producer per measurement and stops it. Every
wait is bounded, so a broken broker makes the script fail instead of hanging.

    /work/main/.venv/bin/python bench/transactions.py [--seconds 8] [--rounds 3]

For each record size (1 KiB and 100 B), `--rounds` times (every other
round in reverse order):

* transactional: begin_transaction, 100 × produce, commit_transaction (which
  flushes, then EndTxn: PrepareCommit appended to __transaction_state, a
  COMMIT marker per partition, CompleteCommit), back to back for --seconds;
  also with send_offsets_to_transaction on every transaction (the
  consume-transform-produce shape: AddOffsetsToTxn, TxnOffsetCommit, a
  marker to __consumer_offsets too);
* plain: the same 100-record groups with an idempotent producer
  (acks=all), flush() after each group, so both wait for the same 100
  records to be acknowledged before the next group;
* plain, unflushed: records produced as fast as librdkafka batches them
  (the ceiling of the client on this machine).

One partition, one producer, linger.ms=5.
"""

import argparse
import os
import statistics
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from benchlib import KRABKA_BIN, WAIT, Broker

RECORDS_PER_TXN = 100


def create_topic(bootstrap, name):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(WAIT)


def base_conf(bootstrap):
    return {
        "bootstrap.servers": bootstrap,
        "linger.ms": 5,
        "acks": "all",
        "enable.idempotence": True,
        "queue.buffering.max.messages": 1000000,
    }


def transactional(bootstrap, topic, value, seconds, run, with_offsets):
    producer = Producer(dict(base_conf(bootstrap), **{"transactional.id": "bench-%s" % run}))
    producer.init_transactions(WAIT)
    group = None
    if with_offsets:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-group-%s" % run,
                             "enable.auto.commit": False})
        group = consumer.consumer_group_metadata()
    txns = 0
    offset = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        producer.begin_transaction()
        for _ in range(RECORDS_PER_TXN):
            producer.produce(topic, value=value, partition=0)
        if group is not None:
            offset += RECORDS_PER_TXN
            producer.send_offsets_to_transaction([TopicPartition(topic, 0, offset)], group, WAIT)
        producer.commit_transaction(WAIT)
        txns += 1
    elapsed = time.monotonic() - start
    if with_offsets:
        consumer.close()
    return txns / elapsed


def plain_flushed(bootstrap, topic, value, seconds):
    producer = Producer(base_conf(bootstrap))
    groups = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        for _ in range(RECORDS_PER_TXN):
            producer.produce(topic, value=value, partition=0)
        if producer.flush(WAIT) != 0:
            raise RuntimeError("records not delivered")
        groups += 1
    return groups / (time.monotonic() - start)


def plain_unflushed(bootstrap, topic, value, seconds):
    producer = Producer(base_conf(bootstrap))
    records = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            producer.produce(topic, value=value, partition=0)
            records += 1
        except BufferError:
            producer.poll(0.001)
        if records % 1000 == 0:
            producer.poll(0)
    if producer.flush(WAIT) != 0:
        raise RuntimeError("records not delivered")
    return records / (time.monotonic() - start) / RECORDS_PER_TXN


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="duration of each measurement")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per record size")
    args = parser.parse_args()
    if not os.path.exists(KRABKA_BIN):
        sys.exit("no broker binary at %s: cargo build --release -p krabka-broker" % KRABKA_BIN)
    broker = Broker(prefix="krabka-bench-txn-")
    try:
        with open("/proc/loadavg") as f:
            print("load average at start:", f.read().strip(), flush=True)
        for size in (1024, 100):
            value = b"x" * size
            results = {"txn": [], "txn+offsets": [], "plain flushed": [], "plain": []}
            for r in range(args.rounds):
                topic = "bench-%d-%d" % (size, r)
                create_topic(broker.bootstrap, topic)
                run = "%d-%d" % (size, r)
                measurements = [
                    ("txn", lambda: transactional(broker.bootstrap, topic, value, args.seconds, run, False)),
                    ("txn+offsets",
                     lambda: transactional(broker.bootstrap, topic, value, args.seconds, run + "o", True)),
                    ("plain flushed", lambda: plain_flushed(broker.bootstrap, topic, value, args.seconds)),
                    ("plain", lambda: plain_unflushed(broker.bootstrap, topic, value, args.seconds)),
                ]
                # Every other round in reverse, so no kind always runs first.
                if r % 2:
                    measurements.reverse()
                for name, measure in measurements:
                    results[name].append(measure())
            base = statistics.median(results["plain flushed"])
            for name, rates in results.items():
                median = statistics.median(rates)
                print("%5d B records, %-13s: %7.1f groups of 100/s = %8.0f records/s (%.2f x plain flushed; runs %s)"
                      % (size, name, median, median * RECORDS_PER_TXN, median / base,
                         ", ".join("%.1f" % x for x in rates)), flush=True)
        with open("/proc/loadavg") as f:
            print("load average at end:", f.read().strip(), flush=True)
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
