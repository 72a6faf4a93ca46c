#!/usr/bin/env python3
"""What issue 14 changed in the fetch path, measured on the current broker
(and, with `--baseline`, on an older build in the same run, so the figures
compare as ratios):

1. broker CPU per appended batch (utime + stime from /proc/<pid>/stat) while
   0, 1, 100 and 1,000 consumers are parked in long-poll fetches on *other*
   partitions: a parked fetch should cost nothing until its own partition
   changes, so the figure should stay flat;
2. produce and consume throughput (krabka-bench raw mode, 1 KiB records,
   one partition, acks=1) and produce latency at 20 000 records/s
   (krabka-bench producer mode, `linger.ms=0`);
3. the broker's resident memory while raw Fetch requests ask for
   `fetch.max.bytes=2147483647` of a partition holding 300 MB (1 and 20
   clients, 3 fetches each), against `krabka.fetch.memory.max.bytes`;
4. consume of one partition with large and small fetches, and with the
   fetch memory budget out of the way (`--sections consume`);
5. the time from starting a broker to its first read of tiered data (a
   fetch at offset 0 of a partition whose early segments left local disk).

    cargo build --release -p krabka-broker -p krabka-bench
    /work/main/.venv/bin/python bench/fetch_limits.py [--baseline OLD_KRABKA]
"""

import argparse
import os
import selectors
import shutil
import statistics
import struct
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "interop"))

from benchlib import KRABKA_BIN, Broker, RssSampler, cpu_seconds  # noqa: E402
from broker import BENCH_BIN, bench  # noqa: E402
from helpers import create_topic  # noqa: E402
from raw_client import RawConnection, batch, fetch_discarding, fetch_request, fill, memory  # noqa: E402

from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse  # noqa: E402
from kafka.protocol.consumer.fetch import FetchResponse  # noqa: E402
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse  # noqa: E402

MIB = 1 << 20
PARKED = [0, 1, 100, 1000]


def read_frame(conn):
    """Reads and drops one answer."""
    (n,) = struct.unpack(">i", conn._recv_exact(4))
    conn._recv_exact(n)


class Parked:
    """`count` connections, each keeping one long-poll Fetch (30 s) parked on
    its own partition of `topic`, re-sent whenever one returns."""

    def __init__(self, bootstrap, topic, count):
        self.topic = topic
        self.selector = selectors.DefaultSelector()
        self.conns = []
        self.stop = threading.Event()
        for p in range(count):
            conn = RawConnection(bootstrap)
            conn.partition = p
            self.conns.append(conn)
            self._park(conn)
            self.selector.register(conn.sock, selectors.EVENT_READ, conn)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _park(self, conn):
        conn.send(fetch_request([(self.topic, conn.partition, 0)], max_bytes=MIB, partition_max_bytes=MIB,
                                max_wait_ms=30000, min_bytes=1))

    def _run(self):
        while not self.stop.is_set():
            if not self.conns:
                self.stop.wait(0.2)
                continue
            for key, _ in self.selector.select(timeout=0.2):
                read_frame(key.data)
                self._park(key.data)

    def close(self):
        self.stop.set()
        self.thread.join()
        for conn in self.conns:
            conn.close()
        self.selector.close()


def produce_batches(bootstrap, topic, count, in_flight=16):
    """`count` one-record batches (100 B) to partition 0, pipelined."""
    T = ProduceRequest.TopicProduceData
    records = batch([b"x" * 100])
    with RawConnection(bootstrap) as conn:
        pending = 0
        for _ in range(count):
            conn.send(ProduceRequest[9](
                transactional_id=None, acks=1, timeout_ms=30000,
                topic_data=[T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=records)])]))
            pending += 1
            if pending == in_flight:
                conn.receive(ProduceResponse, 9)
                pending -= 1
        while pending:
            conn.receive(ProduceResponse, 9)
            pending -= 1


def cpu_per_batch(binary, batches):
    """{parked: (broker CPU µs per batch, batches/s)} on one broker."""
    broker = Broker(prefix="krabka-fetch-limits-", binary=binary)
    try:
        create_topic(broker.bootstrap, "hot")
        create_topic(broker.bootstrap, "idle", partitions=max(PARKED))
        produce_batches(broker.bootstrap, "hot", 500)  # warm up
        out = {}
        for count in PARKED:
            parked = Parked(broker.bootstrap, "idle", count)
            try:
                time.sleep(1.0)  # every fetch reaches the broker and parks
                before = cpu_seconds(broker.process.pid)
                start = time.perf_counter()
                produce_batches(broker.bootstrap, "hot", batches)
                elapsed = time.perf_counter() - start
                used = cpu_seconds(broker.process.pid) - before
            finally:
                parked.close()
            out[count] = (used / batches * 1e6, batches / elapsed)
        return out
    finally:
        broker.stop()


def throughput(binary, seconds):
    """(produce MB/s, consume MB/s, produce p99 ms at 20 000 records/s)."""
    broker = Broker(prefix="krabka-fetch-limits-", binary=binary)
    try:
        _, p_mb, _ = bench(broker, "produce", "-t", "tp", "-s", "1024", "-p", "1", "--acks", "1",
                           "-d", "%g" % seconds)
        _, c_mb, _ = bench(broker, "consume", "-t", "tp")
        _, _, lat = bench(broker, "produce", "-t", "lat", "-s", "1024", "--mode", "producer",
                          "--rate", "20000", "--linger-ms", "0", "--batch-size", "16384",
                          "--acks", "1", "-d", "%g" % seconds)
        return p_mb, c_mb, lat[1]
    finally:
        broker.stop()


def consume_probe(binary, seconds, settings=None):
    """Consume MB/s of one partition: ([two reads with krabka-bench's default
    24 MiB fetches], one read with 1 MiB fetches)."""
    broker = Broker(prefix="krabka-fetch-limits-", binary=binary, settings=settings)
    try:
        bench(broker, "produce", "-t", "tp", "-s", "1024", "-p", "1", "--acks", "1", "-d", "%g" % seconds)
        large = [bench(broker, "consume", "-t", "tp")[1] for _ in range(2)]
        small = bench(broker, "consume", "-t", "tp", "--max-bytes", str(MIB),
                      "--partition-max-bytes", str(MIB))[1]
        return large, small
    finally:
        broker.stop()


def hostile_phases(binary, phases, budget=None):
    """One broker whose partition holds 300 MB; for each client count in
    `phases`, that many clients each send 3 raw fetches asking 2 GiB.
    Returns (RSS after the fill, [(clients, peak sampled RSS, VmHWM after,
    largest response, errors)])."""
    settings = {"krabka.fetch.memory.max.bytes": str(budget)} if budget else {}
    broker = Broker(prefix="krabka-fetch-limits-", binary=binary, settings=settings)
    try:
        create_topic(broker.bootstrap, "big")
        count = fill(broker.bootstrap, "big", 300_000_000)
        filled, _ = memory(broker.process.pid)
        out = []
        for clients in phases:
            sizes, errors = [], []

            def hostile(n):
                try:
                    with RawConnection(broker.bootstrap, timeout=600) as conn:
                        for k in range(3):
                            size, _, _ = fetch_discarding(
                                conn, fetch_request([("big", 0, ((n * 3 + k) * 97) % count)]))
                            sizes.append(size)
                except Exception as e:  # reported in the table
                    errors.append(e)

            threads = [threading.Thread(target=hostile, args=(n,)) for n in range(clients)]
            with RssSampler(broker, interval=0.01) as sampler:
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            _, hwm = memory(broker.process.pid)
            out.append((clients, sampler.peak, hwm, max(sizes) if sizes else 0, errors))
        return filled, out
    finally:
        broker.stop()


TIERED = {
    "remote.log.storage.system.enable": "true",
    "remote.log.manager.task.interval.ms": "300",
    "log.retention.check.interval.ms": "500",
}


def first_tiered_read(binary):
    """Milliseconds from spawning the broker to its first answer with
    records at offset 0 of a tiered partition whose start left local disk."""
    directory = tempfile.mkdtemp(prefix="krabka-fetch-limits-tiered-")
    try:
        broker = Broker(directory=directory, binary=binary, settings=TIERED)
        try:
            R = CreateTopicsRequest[5]
            configs = {"segment.bytes": "65536", "remote.storage.enable": "true",
                       "local.retention.bytes": "131072"}
            with RawConnection(broker.bootstrap) as conn:
                conn.call(R(topics=[R.CreatableTopic(
                    name="tiered", num_partitions=1, replication_factor=1, assignments=[],
                    configs=[R.CreatableTopic.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])],
                    timeout_ms=30000, validate_only=False), CreateTopicsResponse)
            fill(broker.bootstrap, "tiered", 3_000_000, record_bytes=1000, per_batch=10)
            local = os.path.join(broker.data_dir, "tiered-0")
            deadline = time.monotonic() + 120
            while "%020d.log" % 0 in os.listdir(local):
                if time.monotonic() > deadline:
                    raise RuntimeError("segments never left local disk")
                time.sleep(0.1)
        finally:
            broker.stop()
        started = time.monotonic()
        broker = Broker(directory=directory, binary=binary, settings=TIERED)
        try:
            while time.monotonic() - started < 120:
                try:
                    with RawConnection(broker.bootstrap) as conn:
                        _, response = conn.call(fetch_request([("tiered", 0, 0)], max_bytes=MIB,
                                                              partition_max_bytes=MIB), FetchResponse)
                        p = response.responses[0].partitions[0]
                        if p.error_code == 0 and p.records:
                            return (time.monotonic() - started) * 1000
                except OSError:
                    pass
                time.sleep(0.005)
            raise RuntimeError("no tiered read within 120 s")
        finally:
            broker.stop()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def order(builds, r):
    """The builds of round `r`, alternating which goes first."""
    names = list(builds)
    return names if r % 2 == 0 else names[::-1]


def cpu_section(builds, args):
    print("### Broker CPU per appended batch, consumers parked on other partitions\n")
    print("| round | build | " + " | ".join("%d parked" % c for c in PARKED) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in PARKED) + " |")
    cpu = {}
    for r in range(args.rounds):
        for which in order(builds, r):
            got = cpu_per_batch(builds[which], args.batches)
            for c in PARKED:
                cpu.setdefault((which, c), []).append(got[c][0])
            print("| %d | %s | %s |" % (r + 1, which, " | ".join(
                "%.0f µs (%.0f batches/s)" % got[c] for c in PARKED)), flush=True)
    print("\nMedians, and each against the same build with none parked:\n")
    print("| parked | " + " | ".join(builds) + " |\n| --- |" + " --- |" * len(builds))
    for c in PARKED:
        cells = []
        for which in builds:
            m = statistics.median(cpu[(which, c)])
            cells.append("%.0f µs (%.2f×)" % (m, m / statistics.median(cpu[(which, 0)])))
        print("| %d | %s |" % (c, " | ".join(cells)))
    print(flush=True)


def throughput_section(builds, args):
    print("\n### Throughput and latency (krabka-bench, 1 KiB, one partition, acks=1)\n")
    print("| round | build | produce | consume | produce p99 at 20 000/s |\n| --- | --- | --- | --- | --- |")
    tp = {}
    for r in range(args.rounds):
        for which in order(builds, r):
            got = throughput(builds[which], args.seconds)
            tp.setdefault(which, []).append(got)
            print("| %d | %s | %.0f MB/s | %.0f MB/s | %.2f ms |" % (r + 1, which, *got), flush=True)
    print("\nMedians:\n")
    print("| build | produce | consume | produce p99 |\n| --- | --- | --- | --- |")
    for which in builds:
        print("| %s | %.0f MB/s | %.0f MB/s | %.2f ms |" % (
            which, *(statistics.median(t[i] for t in tp[which]) for i in range(3))))
    print(flush=True)


def consume_section(builds, args):
    print("\n### Consume of one partition: fetch size and fetch memory budget\n")
    print("| build | consume, 24 MiB fetches (two reads) | consume, 1 MiB fetches |\n| --- | --- | --- |")
    runs = [("candidate", None), ("candidate", {"krabka.fetch.memory.max.bytes": "4294967295"})]
    if "baseline" in builds:
        runs.append(("baseline", None))
    for which, settings in runs:
        large, small = consume_probe(builds[which], args.seconds, settings)
        label = which + (", `krabka.fetch.memory.max.bytes=4294967295`" if settings else "")
        print("| %s | %s MB/s | %.0f MB/s |" % (label, " / ".join("%.0f" % x for x in large), small), flush=True)


def rss_section(builds):
    print("\n### Broker RSS, raw fetches asking 2 GiB of a 300 MB partition\n")
    print("| build | budget | clients (3 fetches each) | RSS after the fill | peak RSS (sampled) | VmHWM | largest response |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    runs = [("candidate", [1, 20], None), ("candidate", [20], 64 * MIB)]
    if "baseline" in builds:
        # The older build may zero-fill what a fetch asks for: one client.
        runs.insert(0, ("baseline", [1], None))
    for which, phases, budget in runs:
        filled, rows = hostile_phases(builds[which], phases, budget)
        for clients, peak, hwm, largest, errors in rows:
            print("| %s | %s | %d | %.0f MiB | %.0f MiB | %.0f MiB | %.1f MiB |%s" % (
                which, "%d MiB" % (budget // MIB) if budget else "default (256 MiB)" if which == "candidate" else "none",
                clients,
                filled / MIB, peak / MIB, hwm / MIB, largest / MIB,
                " errors: %s" % errors[:2] if errors else ""), flush=True)


def start_section(builds, args):
    print("\n### Start to the first tiered read\n")
    print("| round | build | ms |\n| --- | --- | --- |")
    for r in range(args.rounds):
        for which in order(builds, r):
            print("| %d | %s | %.0f |" % (r + 1, which, first_tiered_read(builds[which])), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidate", default=KRABKA_BIN, help="the broker binary under test")
    parser.add_argument("--baseline", help="an older broker binary to compare against (optional)")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=2000)
    parser.add_argument("--sections", default="cpu,throughput,rss,start",
                        help="comma-separated subset of cpu,throughput,consume,rss,start")
    args = parser.parse_args()
    builds = {"candidate": args.candidate}
    if args.baseline:
        builds["baseline"] = args.baseline
    for binary in list(builds.values()) + [BENCH_BIN]:
        if not os.path.exists(binary):
            sys.exit("no binary at %s" % binary)
    print("## Run of %s, load average %.2f %.2f %.2f\n" % (time.strftime("%Y-%m-%d %H:%M"), *os.getloadavg()))
    sections = args.sections.split(",")
    for name in sections:
        {"cpu": cpu_section, "throughput": throughput_section,
         "rss": lambda b, a: rss_section(b), "start": start_section, "consume": consume_section}[name](builds, args)
    print("\nload average at the end %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()
