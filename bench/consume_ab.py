"""Two builds of the broker side by side on the consume path (issue 21,
zero-copy fetch): consume throughput of 1 KiB records from 1 and 8
partitions with `krabka-bench consume`, and the broker's CPU seconds per GB
sent, read from /proc/<pid>/stat (utime + stime) around each consume.

One broker runs from each binary; each gets the same topics, filled once
with the same number of records (so both serve them from the page cache),
then they are consumed from the start in alternating rounds within one run,
so the machine's noise falls on both. Prints each round and the medians
with the candidate/baseline ratio.

    cp target/release/krabka /tmp/krabka-base      # before the change
    cargo build --release -p krabka-broker -p krabka-bench
    .venv/bin/python bench/consume_ab.py --baseline /tmp/krabka-base
"""

import argparse
import os
import sys

from benchlib import KRABKA_BIN, ab_brokers, ab_rounds, cpu_seconds
from broker import BENCH_BIN, bench


def cases(records):
    """(name, function of a broker returning (MB/s, broker CPU s per GB))."""

    def consume(parts):
        def run(broker, _round):
            before = cpu_seconds(broker.process.pid)
            _, mb, _ = bench(broker, "consume", "-t", "c-%d" % parts, "-n", str(records))
            return mb, (cpu_seconds(broker.process.pid) - before) / (records * 1024 / 1e9)
        return run

    return [("%d partition%s" % (parts, "" if parts == 1 else "s"), consume(parts)) for parts in (1, 8)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, help="the broker binary to compare against")
    parser.add_argument("--candidate", default=KRABKA_BIN, help="the broker binary under test")
    parser.add_argument("--records", type=int, default=1_000_000, help="1 KiB records per topic")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not os.path.exists(BENCH_BIN):
        sys.exit("no binary at %s" % BENCH_BIN)
    with ab_brokers(args.baseline, args.candidate, "krabka-cab-") as brokers:
        # The same topics on both, filled once: consumed from the page cache.
        for parts in (1, 8):
            for broker in brokers.values():
                bench(broker, "produce", "-t", "c-%d" % parts, "-s", "1024", "-p", str(parts),
                      "--acks", "1", "-n", str(args.records))
        ab_rounds(brokers, cases(args.records), args.rounds,
                  [("consume", "%.0f MB/s"), ("broker CPU", "%.2f CPU-s/GB")])


if __name__ == "__main__":
    main()
