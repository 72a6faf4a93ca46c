#!/usr/bin/env python3
"""Cost as work grows (issue 21 item 5): partitions, idle connections, data.

Three series, each on fresh brokers and data directories under $TMPDIR
(or --dir), deleted after their row:

* partitions: Kafka's `ProducerPerformance` (client defaults, acks=1,
  1 KiB records, --bytes in all, steady-state figure after a fifth of them)
  into one topic of 1, 16, 256 and 1,024 partitions: throughput, the
  broker's CPU seconds per GB, peak and final RSS, open descriptors;
* idle connections: 1,000 TCP connections that each send one ApiVersions
  request, read its answer and stay open: the broker's RSS and descriptors
  before and with them;
* data: restart times with 1, 5 and 10 GB of data, from bench/startup.py
  (`kill -9` then start, clean stop then start). A size that would leave
  less than 4 GB free on the disk is skipped and said so.

Krabka alone by default; `--kafka` runs the first two series against
Apache Kafka 4.4.0 as well (bench/vs_kafka.py's way of running it).

    KRABKA_COMPAT_M2=... /work/main/.venv/bin/python bench/scaling.py \\
        [--partitions 1,16,256,1024] [--connections 1000] [--sizes 1,5,10] [--kafka]
"""

import argparse
import os
import shutil
import socket
import sys
import tempfile
import time

from benchlib import WAIT, frame, open_fds, read_frame, rss_bytes, wait_until
from startup import data_size, raise_nofile
from vs_kafka import KafkaTarget, KrabkaTarget, Measure, create_topic, end_offsets, java_produce

DISK_MARGIN = 4e9  # bytes a data-size row must leave free


def partitions_row(kind, parent, count, nbytes):
    """(MB/s, CPU-s/GB, peak RSS, RSS after, descriptors) of one produce run."""
    # Krabka refuses more than 1,000 new partitions in one request by
    # default (krabka.max.partitions.per.request); Kafka has no such budget.
    target = kind(parent, {"krabka.max.partitions.per.request": "4000"}) if kind is KrabkaTarget else kind(parent)
    try:
        records = int(nbytes // 1024)
        create_topic(target.bootstrap, "scale", count)
        with Measure(target.pid) as m:
            mb_s = java_produce(target.bootstrap, "scale", 1024, records, "1", records // 5)[0]
        stored = end_offsets(target.bootstrap, "scale", count)
        if stored != records:
            raise RuntimeError("%d records stored, %d sent" % (stored, records))
        return mb_s, m.cpu / (records * 1024 / 1e9), m.rss.peak, rss_bytes(target.pid), open_fds(target.pid)
    finally:
        target.stop()


def settled(pid, quiet=1.0):
    """Waits until the broker's descriptors have not changed for `quiet`
    seconds (a fresh broker still opens its internal topics' logs after it
    listens); returns (RSS, descriptors) then."""
    last = [open_fds(pid), time.monotonic()]

    def still():
        fds = open_fds(pid)
        if fds != last[0]:
            last[:] = [fds, time.monotonic()]
        return time.monotonic() - last[1] >= quiet

    wait_until(still, "the broker's descriptors to settle", step=0.1)
    return rss_bytes(pid), open_fds(pid)


def connections_row(kind, parent, count):
    """RSS and descriptors of a fresh broker before and with `count` idle connections."""
    target = kind(parent)
    socks = []
    try:
        host, port = target.bootstrap.split(":")
        before = settled(target.pid)
        began = time.monotonic()
        for i in range(count):
            s = socket.create_connection((host, int(port)), timeout=WAIT)
            socks.append(s)
            s.sendall(frame(18, 0, i, b"", False))  # ApiVersions v0
            read_frame(s)
        opened = time.monotonic() - began
        with_them = rss_bytes(target.pid), open_fds(target.pid)
        return before, with_them, opened
    finally:
        for s in socks:
            s.close()
        target.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default="1,16,256,1024", help="partition counts, comma-separated")
    parser.add_argument("--bytes", type=float, default=5e8, help="bytes of record values per partitions row")
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--sizes", default="1,5,10", help="GB of data for the restart rows, comma-separated")
    parser.add_argument("--kafka", action="store_true", help="partitions and connections against Kafka too")
    parser.add_argument("--dir", default=None, help="parent of the data dirs (default: $TMPDIR)")
    args = parser.parse_args()
    raise_nofile()
    parent = tempfile.mkdtemp(prefix="krabka-scaling-", dir=args.dir)
    kinds = [KrabkaTarget] + ([KafkaTarget] if args.kafka else [])
    print("## Scaling, run of %s, load average %.1f %.1f %.1f\n" % (
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), *os.getloadavg()))
    try:
        print("| broker | partitions | produce 1 KiB, acks=1 (ProducerPerformance) | broker CPU-s/GB "
              "| peak RSS | RSS after | descriptors |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for count in [int(c) for c in args.partitions.split(",") if c]:
            for kind in kinds:
                mb_s, cpu_gb, peak, after, fds = partitions_row(kind, parent, count, args.bytes)
                print("| %s | %d | %.0f MB/s | %.2f | %.0f MiB | %.0f MiB | %d |" % (
                    kind.name, count, mb_s, cpu_gb, peak / 2**20, after / 2**20, fds), flush=True)
        print()
        if args.connections:
            print("| broker | RSS, fresh | RSS with %d idle connections | per connection | descriptors, fresh "
                  "| with them | seconds to open them |" % args.connections)
            print("| --- | --- | --- | --- | --- | --- | --- |")
            for kind in kinds:
                (rss0, fd0), (rss1, fd1), opened = connections_row(kind, parent, args.connections)
                print("| %s | %.1f MiB | %.1f MiB | %.1f KiB | %d | %d | %.2f |" % (
                    kind.name, rss0 / 2**20, rss1 / 2**20, (rss1 - rss0) / args.connections / 1024,
                    fd0, fd1, opened), flush=True)
            print()
        sizes = [float(s) for s in args.sizes.split(",") if s]
        if sizes:
            print("| Krabka data | kill -9, then start | clean stop, then start | descriptors after the clean start |")
            print("| --- | --- | --- | --- |")
            for gb in sizes:
                free = shutil.disk_usage(parent).free
                if free - gb * (1 << 30) < DISK_MARGIN:
                    print("| %g GB, 4 partitions | skipped: %.1f GB free | | |" % (gb, free / 1e9), flush=True)
                    continue
                crash, clean, fds = data_size(gb, parent)
                print("| %g GB, 4 partitions | %.2f s | %.2f s | %d |" % (gb, crash, clean, fds), flush=True)
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
