"""Where a consume's kernel time goes, per GB sent (issue 21): the broker's
user and system CPU, its context switches, the loopback interface's packets
and their mean size, (with `perf` at hand) how many of each syscall the
broker makes, and the client's fetches (count, mean size and latency, from
the consumer's own metrics), while Kafka's own `ConsumerPerformance` reads
1 KiB records from a topic of `--partitions` partitions.

Brokers, each on a fresh data directory under `--dir`: Apache Kafka
(`--kafka`, as `vs_kafka.py` runs it) and any number of Krabka binaries
(`--krabka NAME=BINARY`), one at a time, in alternating rounds. Each round
starts the broker, warms it with 0.1 GB through the Java client, produces
the topic with `ProducerPerformance` (acks=1), then counts around the
consume. Not part of `./scripts/test`.

    KRABKA_COMPAT_M2=tests/compat/.m2 .venv/bin/python bench/consume_syscalls.py \\
        --kafka --krabka head=target/release/krabka --rounds 2
"""

import argparse
import glob
import os
import shutil
import subprocess
import tempfile
import time

import vs_kafka
from benchlib import cpu_times

SIZE = 1024
SYSCALLS = ["sendfile64", "epoll_wait", "write", "writev", "sendto", "read", "recvfrom", "futex"]


def context_switches(pid):
    """(voluntary, involuntary) context switches of all of `pid`'s threads."""
    counts = [0, 0]
    for path in glob.glob("/proc/%d/task/*/status" % pid):
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        counts[0] += int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches"):
                        counts[1] += int(line.split()[1])
        except OSError:
            pass  # a thread that ended
    return counts


def loopback():
    """(packets, bytes) sent on `lo` so far."""
    base = "/sys/class/net/lo/statistics/"
    with open(base + "tx_packets") as p, open(base + "tx_bytes") as b:
        return int(p.read()), int(b.read())


def start_perf(pid):
    if shutil.which("perf") is None:
        return None
    events = ",".join("syscalls:sys_enter_" + s for s in SYSCALLS)
    return subprocess.Popen(["perf", "stat", "-x,", "-e", events, "-p", str(pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def stop_perf(perf):
    """{syscall: count} from a `perf stat` started by `start_perf`."""
    if perf is None:
        return {}
    perf.send_signal(2)
    _, err = perf.communicate(timeout=30)
    counts = {}
    for line in err.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[0].strip().isdigit():
            counts[fields[2].replace("syscalls:sys_enter_", "")] = int(fields[0])
    return counts


def measure(name, bootstrap, pid, partitions, records):
    topic = "syscalls-%d" % time.time_ns()
    vs_kafka.create_topic(bootstrap, topic, partitions)
    vs_kafka.java_produce(bootstrap, topic, SIZE, records, "1", records // 5)
    time.sleep(2)  # the produce's last flushes and acknowledgements settle
    cpu0, ctx0, lo0 = cpu_times(pid), context_switches(pid), loopback()
    perf = start_perf(pid)
    fetches = {}
    mbs = vs_kafka.java_consume(bootstrap, topic, SIZE, records, metrics=fetches)
    calls = stop_perf(perf)
    cpu1, ctx1, lo1 = cpu_times(pid), context_switches(pid), loopback()
    vs_kafka.delete_topics(bootstrap, [topic])
    gb = records * SIZE / 1e9
    packets = lo1[0] - lo0[0]
    print("%-8s %4.0f MB/s  user %.3f  sys %.3f CPU-s/GB  ctx %5.0f vol %4.0f invol /GB  "
          "lo %5.0f packets/GB of %5.0f B" % (
              name, mbs, (cpu1[0] - cpu0[0]) / gb, (cpu1[1] - cpu0[1]) / gb,
              (ctx1[0] - ctx0[0]) / gb, (ctx1[1] - ctx0[1]) / gb,
              packets / gb, (lo1[1] - lo0[1]) / max(1, packets)), flush=True)
    print("         client: %.0f fetches/GB of %.2f MB, fetch latency %.1f ms mean, %.0f ms max" % (
        fetches.get("fetch-total", 0) / gb, fetches.get("fetch-size-avg", 0) / 1e6,
        fetches.get("fetch-latency-avg", 0), fetches.get("fetch-latency-max", 0)), flush=True)
    if calls:
        print("         syscalls/GB: " + "  ".join("%s %.0f" % (s, calls.get(s, 0) / gb) for s in SYSCALLS),
              flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kafka", action="store_true", help="measure Apache Kafka too")
    parser.add_argument("--krabka", action="append", default=[], metavar="NAME=BINARY",
                        help="a Krabka binary to measure (repeatable)")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--bytes", type=float, default=1e9, help="record bytes per topic")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="parent of the data directories")
    args = parser.parse_args()
    records = int(args.bytes // SIZE)
    targets = (["kafka"] if args.kafka else []) + args.krabka
    if not targets:
        parser.error("nothing to measure: --kafka and/or --krabka NAME=BINARY")
    for _ in range(args.rounds):
        for target in targets:
            if target == "kafka":
                broker = vs_kafka.KafkaTarget(args.dir)
                name = "Kafka"
            else:
                name, _, binary = target.partition("=")
                broker = vs_kafka.KrabkaTarget(args.dir, binary=binary)
            try:
                vs_kafka.warm_up(broker.bootstrap, 1e8, ["java"])
                measure(name, broker.bootstrap, broker.pid, args.partitions, records)
            finally:
                broker.stop()


if __name__ == "__main__":
    main()
