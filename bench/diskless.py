#!/usr/bin/env python3
"""Diskless-topic benchmark (issue 18): produce and consume throughput of a
diskless topic next to a classic one, on one single-node broker whose
diskless store is the default filesystem directory under its log dir.

For each `diskless.commit.interval.ms` asked for, the script starts the
release broker (`target/release/krabka`, or $KRABKA_BIN) on a free
127.0.0.1 port with a temporary data directory, creates `classic` and
`diskless` (same partitions; `diskless.enable=true` on the second), and
then, alternating the two topics `--rounds` times, fills each with
`krabka-bench produce` (raw mode, acks=all, pre-built 1 MiB batches, five
in flight per partition) and reads it back from the start with
`krabka-bench consume` (hot: the objects this broker wrote are in its
cache). Then it restarts the broker on the same data, drops the kernel's
page cache when it may (root), and reads both topics once more: cold,
every diskless byte comes from the store through the broker's read-back
budget. It reports MB/s and produce latency percentiles as krabka-bench
prints them, the diskless/classic ratios, and the number of objects
(PUTs) per GB written. Every wait is bounded.

With `--consolidation` it measures consolidation instead
(`diskless.consolidation.enable`, the filesystem tier): it fills a diskless
topic whose `segment.bytes` is `--segment-mib`, times how long the broker
takes to copy its batches into tiered segments (MB/s of segments written,
from the first batch committed to the last segment in the tier), and reads
it back cold — the consolidated part from segment files — next to a
diskless topic of the same data that was not consolidated.

    cargo build --release -p krabka-broker -p krabka-bench
    /work/main/.venv/bin/python bench/diskless.py [--mib 64] [--partitions 4] [--rounds 2] [--intervals 250,50]
    /work/main/.venv/bin/python bench/diskless.py --consolidation [--mib 256] [--partitions 4] [--segment-mib 16]
"""

import argparse
import json
import os
import re
import statistics
import shutil
import subprocess
import sys
import tempfile
import time

from confluent_kafka.admin import AdminClient, NewTopic

from benchlib import ROOT, Broker

BENCH_BIN = os.environ.get("KRABKA_BENCH_BIN", os.path.join(ROOT, "target", "release", "krabka-bench"))
RECORD = 1024
WAIT = 600


def bench(args):
    result = subprocess.run([BENCH_BIN] + args + ["--quiet"], capture_output=True, timeout=WAIT)
    if result.returncode != 0:
        raise RuntimeError("krabka-bench %s failed: %s" % (" ".join(args), result.stderr.decode()))
    return result.stdout.decode()


def number(pattern, report):
    m = re.search(pattern, report)
    if not m:
        raise RuntimeError("%r not in krabka-bench output:\n%s" % (pattern, report))
    return float(m.group(1))


def drop_page_cache():
    """Empties the kernel's page cache (root only); answers whether it did."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def run(interval, mib, partitions, rounds):
    settings = {"diskless.commit.interval.ms": str(interval)}
    directory = tempfile.mkdtemp(prefix="krabka-bench-diskless-")
    broker = Broker(settings, directory=directory)
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        futures = admin.create_topics([
            NewTopic("classic", partitions, 1),
            NewTopic("diskless", partitions, 1, config={"diskless.enable": "true"}),
        ])
        for f in futures.values():
            f.result(timeout=60)
        records = mib * 1024 * 1024 // RECORD
        out = {"commit_interval_ms": interval, "mib_per_round": mib, "partitions": partitions}
        for topic in ("classic", "diskless"):
            out[topic] = {"produce_MBps": [], "p50_ms": [], "p99_ms": [], "consume_MBps": []}
        for _ in range(rounds):
            for topic in ("classic", "diskless"):
                report = bench(["produce", "-b", broker.bootstrap, "-t", topic, "-p", str(partitions),
                                "--record-size", str(RECORD), "-n", str(records), "--acks", "all"])
                r = out[topic]
                r["produce_MBps"].append(number(r"([0-9.]+) MB/s", report))
                r["p50_ms"].append(number(r"p50[^0-9]*([0-9.]+)", report))
                r["p99_ms"].append(number(r"p99[^0-9]*([0-9.]+)", report))
                report = bench(["consume", "-b", broker.bootstrap, "-t", topic])
                r["consume_MBps"].append(number(r"([0-9.]+) MB/s", report))
        for topic in ("classic", "diskless"):
            r = out[topic]
            for key in ("produce_MBps", "p50_ms", "p99_ms", "consume_MBps"):
                r[key + "_median"] = statistics.median(r[key])
        for key in ("produce_MBps", "consume_MBps"):
            out["diskless_over_classic_" + key] = round(
                out["diskless"][key + "_median"] / out["classic"][key + "_median"], 2)
        store = os.path.join(broker.data_dir, "krabka-diskless", "diskless")
        written = rounds * mib / 1024
        out["objects"] = sum(len(names) for _, _, names in os.walk(store))
        out["objects_per_GB"] = round(out["objects"] / written, 1)
        broker.stop()
        broker = Broker(settings, directory=directory)
        out["cold_page_cache_dropped"] = drop_page_cache()
        for topic in ("classic", "diskless"):
            report = bench(["consume", "-b", broker.bootstrap, "-t", topic])
            out[topic]["cold_consume_MBps"] = number(r"([0-9.]+) MB/s", report)
        out["diskless_over_classic_cold_consume_MBps"] = round(
            out["diskless"]["cold_consume_MBps"] / out["classic"]["cold_consume_MBps"], 2)
        return out
    finally:
        broker.stop()
        shutil.rmtree(directory, ignore_errors=True)


def tier_bytes(broker, topic):
    """Bytes of `topic`'s `.log` segments in the filesystem tier."""
    root = os.path.join(broker.data_dir, "krabka-remote-tier")
    total = 0
    for d, _, names in os.walk(root):
        if os.path.basename(d).startswith(topic + "-"):
            total += sum(os.path.getsize(os.path.join(d, n)) for n in names if n.endswith(".log"))
    return total


def run_consolidation(mib, partitions, segment_mib):
    settings = {
        "remote.log.storage.system.enable": "true",
        "remote.log.manager.task.interval.ms": "1000",
        "diskless.consolidation.enable": "true",
        "diskless.cleaner.interval.ms": "1000",
    }
    directory = tempfile.mkdtemp(prefix="krabka-bench-consolidation-")
    broker = Broker(settings, directory=directory)
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        segment = str(segment_mib * 1024 * 1024)
        futures = admin.create_topics([
            # The same data twice: one consolidated, one kept as batches
            # (a segment size it never reaches).
            NewTopic("consolidated", partitions, 1, config={"diskless.enable": "true", "segment.bytes": segment}),
            NewTopic("batches", partitions, 1, config={"diskless.enable": "true", "segment.bytes": "1073741824"}),
        ])
        for f in futures.values():
            f.result(timeout=60)
        records = mib * 1024 * 1024 // RECORD
        out = {"mib": mib, "partitions": partitions, "segment_mib": segment_mib}
        for topic in ("batches", "consolidated"):
            started = time.time()
            report = bench(["produce", "-b", broker.bootstrap, "-t", topic, "-p", str(partitions),
                            "--record-size", str(RECORD), "-n", str(records), "--acks", "all"])
            out[topic + "_produce_MBps"] = number(r"([0-9.]+) MB/s", report)
        # Consolidation has caught up once the tier stops growing (the
        # last part of each partition, less than a segment, stays batches).
        deadline = time.time() + WAIT
        seen, changed = 0, time.time()
        while seen == 0 or time.time() - changed < 5:
            if time.time() > deadline:
                raise RuntimeError("consolidation did not settle: %d bytes" % seen)
            now = tier_bytes(broker, "consolidated")
            if now != seen:
                seen, changed = now, time.time()
            time.sleep(0.2)
        elapsed = changed - started
        tiered = tier_bytes(broker, "consolidated")
        out["tiered_MiB"] = round(tiered / 1048576, 1)
        out["produce_then_consolidate_s"] = round(elapsed, 1)
        out["consolidated_MBps_incl_produce"] = round(tiered / 1e6 / elapsed, 1)
        broker.stop()
        broker = Broker(settings, directory=directory)
        out["cold_page_cache_dropped"] = drop_page_cache()
        for topic in ("batches", "consolidated"):
            report = bench(["consume", "-b", broker.bootstrap, "-t", topic])
            out[topic + "_cold_consume_MBps"] = number(r"([0-9.]+) MB/s", report)
        out["consolidated_over_batches_cold_consume"] = round(
            out["consolidated_cold_consume_MBps"] / out["batches_cold_consume_MBps"], 2)
        return out
    finally:
        broker.stop()
        shutil.rmtree(directory, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=64, help="data per topic and round")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--intervals", default="250,50", help="diskless.commit.interval.ms values")
    parser.add_argument("--consolidation", action="store_true", help="measure consolidation instead")
    parser.add_argument("--segment-mib", type=int, default=16, help="segment.bytes of the consolidated topic")
    args = parser.parse_args()
    print("uptime:", subprocess.run(["uptime"], capture_output=True).stdout.decode().strip())
    if args.consolidation:
        print(json.dumps(run_consolidation(args.mib, args.partitions, args.segment_mib), indent=1))
        return
    for interval in [int(i) for i in args.intervals.split(",")]:
        print(json.dumps(run(interval, args.mib, args.partitions, args.rounds), indent=1))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
