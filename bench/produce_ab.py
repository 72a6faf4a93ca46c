"""Two builds of the broker side by side on the small-request produce path.

The cost the broker pays per Produce request shows most when a client
sends one record per request: confluent-kafka with `linger.ms=0` at a fixed
20 000 records/s (every record timed from when it was due), and
krabka-bench's producer mode at the same rate. This script starts one broker
from each binary and measures them in alternating rounds within one run, so
the machine's noise falls on both; it prints each round and the median of
the rounds with the candidate/baseline ratio.

With `--throughput` it measures the bulk path instead: krabka-bench's raw
mode (1 MiB requests of prebuilt batches, or `--batch-size` bytes) producing 100 B and 1 KiB records
to one partition, as throughput and broker CPU seconds per GB produced
(utime + stime of the broker process), the figure a change to the append's
own work moves.

    cp target/release/krabka /tmp/krabka-base      # before the change
    cargo build --release -p krabka-broker -p krabka-bench
    .venv/bin/python bench/produce_ab.py --baseline /tmp/krabka-base
"""

import argparse
import os
import sys

from confluent_kafka.admin import AdminClient

from benchlib import KRABKA_BIN, ab_brokers, ab_rounds, cpu_seconds
from broker import BENCH_BIN, bench, confluent_latency

RATE = 20_000
# Record bytes each bulk (--throughput) case produces.
THROUGHPUT_BYTES = 2e9


def cases(seconds):
    """(name, function of a broker returning (p50, p99, p99.9) in ms)."""

    def confluent(acks):
        def run(broker, r):
            topic = "ab-%d-confluent-acks%s" % (r, acks)
            return confluent_latency(broker.bootstrap, topic, 1024, RATE, seconds, acks)[1]
        return run

    def krabka_bench(broker, r):
        topic = "ab-%d-krabka-bench" % r
        return bench(broker, "produce", "-t", topic, "-s", "1024", "--mode", "producer",
                     "--rate", str(RATE), "--linger-ms", "0", "--batch-size", "16384",
                     "--acks", "1", "-d", "%g" % seconds)[2]

    return [
        ("confluent-kafka acks=1", confluent("1")),
        ("confluent-kafka acks=all", confluent("all")),
        ("krabka-bench acks=1", krabka_bench),
    ]


def throughput_cases(batch_size, volume):
    """(name, function of a broker returning (MB/s, broker CPU s per GB))."""

    def raw(size, acks):
        def run(broker, r):
            topic = "tp-%d-%d-acks%s" % (r, size, acks)
            # A fixed volume, deleted after: a timed run at page-cache speed
            # would fill the disk over the rounds.
            records = int(volume // size)
            before = cpu_seconds(broker.process.pid)
            _, mb_s, _ = bench(broker, "produce", "-t", topic, "-s", str(size), "--acks", acks,
                               "-n", str(records), "--batch-size", str(batch_size))
            used = cpu_seconds(broker.process.pid) - before
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            for future in admin.delete_topics([topic], operation_timeout=30).values():
                future.result(timeout=60)
            return mb_s, used / (records * size / 1e9)
        return run

    return [("raw %s acks=%s" % ("1 KiB" if size == 1024 else "%d B" % size, acks), raw(size, acks))
            for size in (100, 1024) for acks in ("1", "all")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, help="the broker binary to compare against")
    parser.add_argument("--candidate", default=KRABKA_BIN, help="the broker binary under test")
    parser.add_argument("--seconds", type=float, default=6.0, help="length of each measurement")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--throughput", action="store_true",
                        help="measure bulk produce throughput and broker CPU per GB instead")
    parser.add_argument("--batch-size", type=int, default=1024 * 1024,
                        help="bytes per request in --throughput (16384 is the Java producer's batch.size)")
    parser.add_argument("--bytes", type=float, default=THROUGHPUT_BYTES,
                        help="record bytes each --throughput case produces")
    args = parser.parse_args()
    if not os.path.exists(BENCH_BIN):
        sys.exit("no binary at %s" % BENCH_BIN)
    with ab_brokers(args.baseline, args.candidate, "krabka-ab-") as brokers:
        if args.throughput:
            ab_rounds(brokers, throughput_cases(args.batch_size, args.bytes), args.rounds,
                      [("MB/s", "%.0f"), ("broker CPU s/GB", "%.3f")])
        else:
            ab_rounds(brokers, cases(args.seconds), args.rounds,
                      [("p50", "%.2f ms"), ("p99", "%.2f ms"), ("p99.9", "%.2f ms")])


if __name__ == "__main__":
    main()
