#!/usr/bin/env python3
"""Krabka against Tansu's in-memory engine on this machine (issue 21).

Tansu is not built by this repository: install it with
`cargo install tansu --version 0.6.0 --locked --no-default-features
--features dynostore --root DIR` (crates.io; about 25 minutes on two
cores) and point $TANSU_BIN at `DIR/bin/tansu`. It runs as
`tansu broker --storage-engine memory://tansu/` on a free loopback port;
Krabka (`target/release/krabka`, or $KRABKA_BIN) on its defaults. Only one
broker runs at a time, in alternating rounds, each started fresh.

The client is krabka-bench's raw mode for both, which sends pre-built
1 MiB batches with five requests in flight and does almost nothing per
record, so its figures are the broker's (`target/release/krabka-bench`,
or $KRABKA_BENCH_BIN). librdkafka clients (kcat, confluent-kafka) cannot
talk to Tansu 0.6.0 with their defaults: its ApiVersions answer fails
("ApiVersionRequest failed: Local: Read underflow"), and confluent-kafka's
records are never delivered.

Rows: produce of 100 B records with acks=1 and acks=all and of 1 KiB
records with acks=1 (1 partition), and consume of 1 KiB records from 1
and 8 partitions. Each row reports client MB/s (10^6 bytes of record
values per second), the broker's CPU seconds per GB (/proc/<pid>/stat)
and its peak RSS. Tansu keeps every record in memory, so each round's
broker holds at most a few --bytes.

    cargo build --release -p krabka-broker -p krabka-bench
    TANSU_BIN=/path/to/tansu /work/main/.venv/bin/python bench/vs_tansu.py [--rounds 3] [--bytes 3e8] \
        [--krabka-log-parent /dev/shm]

Prints a Markdown table of the medians and the Krabka/Tansu ratios, then
every round. Not part of scripts/test.
"""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import tempfile

from benchlib import WAIT, Broker, free_port, wait_until
from broker import BENCH_BIN, THROUGHPUT
from vs_kafka import Measure

TANSU_BIN = os.environ.get("TANSU_BIN", "tansu")


class Tansu:
    """One `tansu broker` on the memory engine, on a free loopback port."""

    def __init__(self):
        self.port = free_port()
        url = "tcp://127.0.0.1:%d" % self.port
        self.process = subprocess.Popen(
            [TANSU_BIN, "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/", "--silent"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until(self.listening, "tansu to listen on port %d" % self.port, step=0.05)
        except RuntimeError:
            self.stop()
            raise

    def listening(self):
        if self.process.poll() is not None:
            raise RuntimeError("tansu exited with %s" % self.process.returncode)
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    @property
    def bootstrap(self):
        return "127.0.0.1:%d" % self.port

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class KrabkaIn(Broker):
    """Krabka with its log directory in a new directory under `parent`
    (e.g. /dev/shm, so that neither broker writes to the disk)."""

    def __init__(self, parent):
        self.log_dir = tempfile.mkdtemp(prefix="krabka-vs-tansu-", dir=parent)
        try:
            super().__init__({"log.dirs": self.log_dir}, prefix="krabka-vs-tansu-")
        except BaseException:
            shutil.rmtree(self.log_dir, ignore_errors=True)
            raise

    def stop(self):
        try:
            super().stop()
        finally:
            shutil.rmtree(self.log_dir, ignore_errors=True)


def bench(bootstrap, *args):
    """krabka-bench's MB/s."""
    out = subprocess.run([BENCH_BIN, args[0], "-b", bootstrap, "--quiet", *args[1:]],
                         check=True, capture_output=True, text=True, timeout=10 * WAIT).stdout
    m = THROUGHPUT.search(out.strip().splitlines()[-1])
    if not m:
        raise RuntimeError("unexpected krabka-bench output: " + out)
    return float(m.group(4))


def rows(nbytes):
    """(label, setup, measured): `setup` fills a topic unmeasured (or
    None), `measured` returns (MB/s, GB moved); both take (bootstrap, topic)."""
    n100, n1k = int(nbytes // 100), int(nbytes // 1024)

    def produce(size, n, acks, parts=1):
        return lambda b, t: (bench(b, "produce", "-t", t, "-n", str(n), "-s", str(size), "-p", str(parts),
                                   "--acks", acks), n * size / 1e9)

    def consume(n):
        return lambda b, t: (bench(b, "consume", "-t", t, "-n", str(n)), n * 1024 / 1e9)

    return [
        ("produce 100 B, acks=1 (krabka-bench)", None, produce(100, n100, "1")),
        ("produce 100 B, acks=all (krabka-bench)", None, produce(100, n100, "all")),
        ("produce 1 KiB, acks=1 (krabka-bench)", None, produce(1024, n1k, "1")),
        ("consume 1 KiB, 1 part (krabka-bench)", produce(1024, n1k, "1"), consume(n1k)),
        ("consume 1 KiB, 8 part (krabka-bench)", produce(1024, n1k, "1", 8), consume(n1k)),
    ]


def run_round(name, make, nbytes, results, round_no):
    for i, (label, setup, measured) in enumerate(rows(nbytes)):
        # A fresh broker per row: Tansu holds every record in memory.
        broker = make()
        try:
            topic = "vs-tansu-%d-%d" % (round_no, i)
            if setup:
                setup(broker.bootstrap, topic)
            with Measure(broker.process.pid) as m:
                mb_s, gb = measured(broker.bootstrap, topic)
            results.setdefault(label, {}).setdefault(name, []).append((mb_s, m.cpu / gb, m.rss.peak))
            print("round %d %-6s %-40s %8.1f MB/s %5.2f CPU-s/GB %6.0f MiB" % (
                round_no, name, label, mb_s, m.cpu / gb, m.rss.peak / 2**20), flush=True)
        finally:
            broker.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bytes", type=float, default=3e8, help="bytes of record values per row")
    parser.add_argument("--krabka-log-parent", metavar="DIR",
                        help="also run Krabka with its log directory under DIR (a tmpfs such as "
                             "/dev/shm compares two brokers that both keep records in memory)")
    args = parser.parse_args()
    if not shutil.which(TANSU_BIN) and not os.path.exists(TANSU_BIN):
        raise SystemExit("no tansu at %r: set TANSU_BIN (see this script's docstring)" % TANSU_BIN)
    contestants = [("tansu", Tansu), ("krabka", lambda: Broker(prefix="krabka-vs-tansu-"))]
    if args.krabka_log_parent:
        contestants.append(("krabka-in-dir", lambda: KrabkaIn(args.krabka_log_parent)))
    results = {}
    for r in range(args.rounds):
        # Who goes first alternates; with three, the order rotates.
        k = r % len(contestants)
        for name, make in contestants[k:] + contestants[:k]:
            run_round(name, make, args.bytes, results, r)
    names = [n for n, _ in contestants]
    titles = {"tansu": "Tansu", "krabka": "Krabka",
              "krabka-in-dir": "Krabka (log in %s)" % args.krabka_log_parent}
    print()
    head = ["row"]
    for what in ("MB/s", "CPU-s/GB", "peak RSS"):
        head += ["%s %s" % (titles[n], what) for n in names]
    head += ["%s/Tansu MB/s" % titles[n] for n in names[1:]]
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    for label, by in results.items():
        med = {n: [statistics.median(x[i] for x in by[n]) for i in range(3)] for n in names}
        cells = [label]
        cells += ["%.0f" % med[n][0] for n in names]
        cells += ["%.2f" % med[n][1] for n in names]
        cells += ["%.0f MiB" % (med[n][2] / 2**20) for n in names]
        cells += ["%.2f" % (med[n][0] / med["tansu"][0]) for n in names[1:]]
        print("| " + " | ".join(cells) + " |")
    print()
    print("Every round (MB/s):")
    for label, by in results.items():
        print("- %s: " % label + "; ".join(
            "%s %s" % (titles[n], " / ".join("%.0f" % x[0] for x in by[n])) for n in names))

if __name__ == "__main__":
    main()
