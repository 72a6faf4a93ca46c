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
import statistics
import sys
import time

from benchlib import KRABKA_BIN, Broker
from broker import BENCH_BIN, bench

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(broker):
    """The broker process's user + system CPU time so far."""
    with open("/proc/%d/stat" % broker.process.pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # Fields 14 and 15 of stat(5), counted after the command name.
    return (int(fields[11]) + int(fields[12])) / TICKS


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, help="the broker binary to compare against")
    parser.add_argument("--candidate", default=KRABKA_BIN, help="the broker binary under test")
    parser.add_argument("--records", type=int, default=1_000_000, help="1 KiB records per topic")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for binary in (args.baseline, args.candidate, BENCH_BIN):
        if not os.path.exists(binary):
            sys.exit("no binary at %s" % binary)

    print("## Run of %s, load average %.2f %.2f %.2f\n" % (time.strftime("%Y-%m-%d %H:%M"), *os.getloadavg()))
    brokers = {
        "baseline": Broker(prefix="krabka-cab-base-", binary=args.baseline),
        "candidate": Broker(prefix="krabka-cab-cand-", binary=args.candidate),
    }
    cases = [1, 8]
    results = {}
    try:
        for parts in cases:
            for broker in brokers.values():
                bench(broker, "produce", "-t", "c-%d" % parts, "-s", "1024", "-p", str(parts),
                      "--acks", "1", "-n", str(args.records))
        print("| round | partitions | build | consume | broker CPU |\n| --- | --- | --- | --- | --- |")
        for r in range(args.rounds):
            order = ["baseline", "candidate"] if r % 2 == 0 else ["candidate", "baseline"]
            for parts in cases:
                for which in order:
                    broker = brokers[which]
                    before = cpu_seconds(broker)
                    rec, mb, _ = bench(broker, "consume", "-t", "c-%d" % parts, "-n", str(args.records))
                    cpu = cpu_seconds(broker) - before
                    gb = args.records * 1024 / 1e9
                    per_gb = cpu / gb
                    results.setdefault((parts, which), []).append((mb, per_gb))
                    print("| %d | %d | %s | %.0f MB/s | %.2f CPU-s/GB |" % (r + 1, parts, which, mb, per_gb))
        print("\nMedians of %d rounds (candidate / baseline):\n" % args.rounds)
        print("| 1 KiB records | consume | broker CPU-s/GB |\n| --- | --- | --- |")
        for parts in cases:
            cells = []
            for i, unit in ((0, "MB/s"), (1, "CPU-s/GB")):
                base = statistics.median(x[i] for x in results[(parts, "baseline")])
                cand = statistics.median(x[i] for x in results[(parts, "candidate")])
                cells.append("%.2f / %.2f %s (%.2f)" % (cand, base, unit, cand / base if base else float("nan")))
            print("| %d partition%s | %s |" % (parts, "" if parts == 1 else "s", " | ".join(cells)))
    finally:
        for b in brokers.values():
            b.stop()
    print("\nLoad average at the end: %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()
