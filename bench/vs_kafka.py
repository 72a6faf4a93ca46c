#!/usr/bin/env python3
"""Krabka against Apache Kafka on this machine, with the same clients (issue 21).

Runs Apache Kafka (4.4.0 from Maven Central, one KRaft broker+controller
node, its default settings and the JVM flags of `kafka-server-start.sh`,
through tests/compat/kafka_ref.py) and Krabka (`target/release/krabka`, or
$KRABKA_BIN, its default settings) one after the other in alternating
rounds — only one broker runs at a time, each on a fresh data directory
under the same parent, so on the same disk — and drives both with:

* Kafka's own `ProducerPerformance` and `ConsumerPerformance` (the
  `kafka-tools` jar, the JVM flags of `kafka-producer-perf-test.sh`, client
  defaults except `acks`), and
* kcat, a librdkafka client (librdkafka's defaults except `acks`):
  `yes | head -n N | kcat -P` to produce, `kcat -C -e` to consume.

After each start, an unmeasured produce and consume with each client
(--warmup-bytes) lets Kafka's JIT compile its hot paths; ProducerPerformance's figures are
its steady-state line (after --warmup-records: a fifth of the records, two
seconds of the latency rows), so the client's own JIT is left out too.

Rows: produce of 1 KiB and 100 B records to 1 and 8 partitions with
acks=1 and acks=all; consume of the acks=1 topics from the beginning;
produce latency (p50/p99) of 1 KiB records at a fixed rate with
`linger.ms=0` (ProducerPerformance `--throughput`). For each row: client
throughput (MB/s = 10^6 bytes of record values per second), the broker's
CPU seconds (utime + stime of /proc/<pid>/stat: Krabka's process, Kafka's
JVM) per GB moved, and its peak RSS (VmRSS sampled every 50 ms). Each
produce row checks the topic's end offsets add up to the records sent.
Topics are deleted after their rows, so at most 2 x --bytes of records sit
on disk (Kafka deletes a topic's files a minute after the delete).

    cargo build --release -p krabka-broker      # or use an existing build
    KRABKA_COMPAT_M2=... /work/main/.venv/bin/python bench/vs_kafka.py \\
        [--rounds 3] [--bytes 1e9] [--clients java,kcat] [--quick]
        [--sizes 1024,100] [--partitions 1,8] [--acks 1,all]   # a subset of the rows

Prints a Markdown table of both brokers' medians over the rounds and the
Krabka/Kafka ratios, then every round's figures. Not part of scripts/test.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import KRABKA_BIN, ROOT, WAIT, Broker, RssSampler, cpu_times

sys.path.insert(0, os.path.join(ROOT, "tests", "compat"))
import kafka_ref  # noqa: E402

MB = 1_000_000
# kafka-server-start.sh's heap and kafka-run-class.sh's performance flags
# (KafkaRef adds -XX:+UseG1GC and -Djava.awt.headless=true itself).
KAFKA_HEAP = "1g"
KAFKA_JVM_OPTS = ["-server", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
                  "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15"]
# kafka-producer-perf-test.sh / kafka-consumer-perf-test.sh: -Xmx512M and the same flags.
TOOL_JVM_OPTS = ["-Xmx512M", "-XX:+UseG1GC", "-Djava.awt.headless=true"] + KAFKA_JVM_OPTS
TOOLS = "org.apache.kafka.tools."
CLIENT_TIMEOUT = 20 * WAIT  # seconds one client run may take

# ConsumerPerformance's summary line starts with its start and end times.
SUMMARY = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}, ")
# --print-metrics: "consumer-fetch-manager-metrics:fetch-latency-avg:{client-id=...} : 11.69"
FETCH_METRIC = re.compile(r"consumer-fetch-manager-metrics:([a-z-]+):\{client-id=[^,}]*\}\s*:\s*([-\d.E]+)\s*$")
PRODUCED = re.compile(r"(\d+) (?:steady state )?records sent, ([\d.]+) records/sec .*?([\d.]+) ms 50th, ([\d.]+) ms 95th, "
                      r"([\d.]+) ms 99th, ([\d.]+) ms 99\.9th")


class KafkaTarget:
    """Apache Kafka on a fresh directory under `parent`; removed on stop."""

    name = "Kafka"

    def __init__(self, parent):
        self.dir = tempfile.mkdtemp(prefix="kafka-", dir=parent)
        self.ref = kafka_ref.KafkaRef(self.dir, heap=KAFKA_HEAP, jvm_opts=KAFKA_JVM_OPTS)
        try:
            self.ref.start()
        except BaseException:  # a failed start or Ctrl-C leaves no JVM behind
            self.stop()
            raise
        self.bootstrap = self.ref.bootstrap
        self.pid = self.ref.pid()

    def stop(self):
        try:
            self.ref.stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


class KrabkaTarget:
    """Krabka (`binary`, else the release build) on a fresh directory under
    `parent`; removed on stop."""

    name = "Krabka"

    def __init__(self, parent, settings=None, binary=None):
        self.dir = tempfile.mkdtemp(prefix="krabka-", dir=parent)
        try:
            self.broker = Broker(settings, directory=self.dir, binary=binary)
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        self.bootstrap = self.broker.bootstrap
        self.pid = self.broker.process.pid

    def stop(self):
        try:
            self.broker.stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


def admin(bootstrap):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})


def create_topic(bootstrap, topic, partitions):
    from confluent_kafka.admin import NewTopic
    client = admin(bootstrap)  # kept alive until the answer is in
    client.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(WAIT)


def delete_topics(bootstrap, topics):
    client = admin(bootstrap)
    for future in client.delete_topics(list(topics)).values():
        future.result(WAIT)


def end_offsets(bootstrap, topic, partitions):
    """The sum of the topic's high watermarks (records, one offset each)."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "vs-kafka-check"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=WAIT)[1]
                   for p in range(partitions))
    finally:
        consumer.close()


def java_tool(main_class, args):
    out = kafka_ref.run_tool(TOOLS + main_class, [str(a) for a in args], timeout=CLIENT_TIMEOUT,
                             jvm_opts=TOOL_JVM_OPTS).stdout
    return out.strip().splitlines()


def java_produce(bootstrap, topic, size, records, acks, warmup, rate=-1, extra=()):
    """ProducerPerformance; returns (MB/s, p50 ms, p99 ms) of its steady-state
    summary line: after the first `warmup` records (the client's JIT)."""
    lines = java_tool("ProducerPerformance", [
        "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", records,
        "--record-size", size, "--throughput", rate, "--reporting-interval", 600_000,
        "--warmup-records", warmup, "--command-property", "acks=%s" % acks, *extra])
    for line in reversed(lines):
        m = PRODUCED.search(line)
        if m:
            return float(m.group(2)) * size / MB, float(m.group(3)), float(m.group(5))
    raise RuntimeError("no summary in ProducerPerformance's output:\n" + "\n".join(lines))


def java_consume(bootstrap, topic, size, records, metrics=None):
    """ConsumerPerformance; returns MB/s of the fetch phase (its rebalance excluded).
    With a dict as `metrics`, the consumer's fetch metrics (`fetch-total`,
    `fetch-latency-avg`, ...: the tool's `--print-metrics`) go into it."""
    lines = java_tool("ConsumerPerformance", [
        "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", records,
        "--timeout", 60_000, "--hide-header", "--group", "vs-kafka-%d" % time.time_ns(),
        *(["--print-metrics"] if metrics is not None else [])])
    summary = [line for line in lines if SUMMARY.match(line)]
    if not summary:
        raise RuntimeError("no summary in ConsumerPerformance's output:\n" + "\n".join(lines))
    for line in lines if metrics is not None else ():
        m = FETCH_METRIC.match(line)
        if m:
            metrics[m.group(1)] = float(m.group(2))
    # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    # rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    fields = [f.strip() for f in summary[-1].split(",")]
    got, fetch_rec_s = int(fields[4]), float(fields[9])
    if got < records:
        raise RuntimeError("ConsumerPerformance read %d of %d records" % (got, records))
    return fetch_rec_s * size / MB


def kcat_produce(bootstrap, topic, size, records, acks):
    """`yes | head -n N | kcat -P`: records of `size` bytes (the newline is the delimiter)."""
    payload = "x" * size
    start = time.perf_counter()
    gen = subprocess.Popen(["yes", payload], stdout=subprocess.PIPE)
    head = subprocess.Popen(["head", "-n", str(records)], stdin=gen.stdout, stdout=subprocess.PIPE)
    gen.stdout.close()
    try:
        proc = subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", topic, "-X", "acks=%s" % acks],
                              stdin=head.stdout, stderr=subprocess.PIPE, timeout=CLIENT_TIMEOUT)
        elapsed = time.perf_counter() - start
    finally:
        head.stdout.close()
        for p in (head, gen):
            p.kill()
            p.wait()
    if proc.returncode != 0:
        raise RuntimeError("kcat -P exited %s: %s" % (proc.returncode, proc.stderr.decode()[-2000:]))
    return records * size / elapsed / MB


def kcat_consume(bootstrap, topic, size, records):
    """`kcat -C -e` of every partition from the beginning, one newline printed per record."""
    start = time.perf_counter()
    proc = subprocess.Popen(["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
                             "-f", "\\n"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    got = 0
    try:
        deadline = time.monotonic() + CLIENT_TIMEOUT
        while time.monotonic() < deadline:
            chunk = proc.stdout.read1(1 << 20)
            if not chunk:
                break
            got += chunk.count(b"\n")
        proc.wait(timeout=WAIT)
        elapsed = time.perf_counter() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 0 or got < records:
        raise RuntimeError("kcat -C exited %s after %d of %d records: %s" % (
            proc.returncode, got, records, proc.stderr.read().decode()[-2000:]))
    return got * size / elapsed / MB


class Measure:
    """The broker's CPU seconds (and the kernel's part of them) and peak
    RSS around one client run."""

    def __init__(self, pid):
        self.pid = pid

    def __enter__(self):
        self.user, self.system = cpu_times(self.pid)
        self.rss = RssSampler(self.pid).__enter__()
        return self

    def __exit__(self, *exc):
        self.rss.__exit__(*exc)
        user, system = cpu_times(self.pid)
        self.system = system - self.system
        self.cpu = user - self.user + self.system
        return False


def check_disk(parent, need):
    free = shutil.disk_usage(parent).free
    if free < need:
        raise RuntimeError("only %.1f GB free under %s, %.1f GB needed: use a smaller --bytes" % (
            free / 1e9, parent, need / 1e9))


def label(size):
    return "1 KiB" if size == 1024 else "%d B" % size


def warm_up(bootstrap, nbytes, clients):
    """Unmeasured produce and consume of 1 KiB records with each client, so
    Kafka's JIT has compiled the paths each client's requests take before
    the first row (Krabka has no JIT; it gets the same load)."""
    records = int(nbytes // 1024)
    for client in clients if records else ():
        topic = "warm-up-" + client
        create_topic(bootstrap, topic, 1)
        if client == "java":
            java_produce(bootstrap, topic, 1024, records, "1", records // 5)
            java_consume(bootstrap, topic, 1024, records)
        else:
            kcat_produce(bootstrap, topic, 1024, records, "1")
            kcat_consume(bootstrap, topic, 1024, records)
        delete_topics(bootstrap, [topic])


def run_target(target, args, results, round_no):
    """Every row against one running broker; adds (MB/s, CPU-s/GB, RSS) per row."""
    bs = target.bootstrap
    warm_up(bs, args.warmup_bytes, args.clients)

    def record(key, mb_s, moved, m, extra=None):
        entry = {"mb_s": mb_s, "cpu_gb": m.cpu / (moved / 1e9), "sys_gb": m.system / (moved / 1e9),
                 "rss": m.rss.peak}
        entry.update(extra or {})
        results.setdefault(key, {}).setdefault(target.name, []).append(entry)
        print("  round %d %-6s %-45s %7.1f MB/s %6.2f CPU-s/GB %6.0f MiB%s" % (
            round_no, target.name, key, mb_s, entry["cpu_gb"], m.rss.peak / 2**20,
            "".join(" %s=%s" % kv for kv in (extra or {}).items())), file=sys.stderr, flush=True)

    for client in args.clients:
        for size in args.sizes:
            records = int(args.bytes // size)
            moved = records * size
            for parts in args.partitions:
                check_disk(args.dir, 2 * moved * 1.2 + 1e9)
                topics = {}
                for acks in args.acks:
                    topic = "%s-%d-%d-%s" % (client, size, parts, acks)
                    create_topic(bs, topic, parts)
                    topics[acks] = topic
                    with Measure(target.pid) as m:
                        if client == "java":
                            mb_s = java_produce(bs, topic, size, records, acks, records // 5)[0]
                        else:
                            mb_s = kcat_produce(bs, topic, size, records, acks)
                    stored = end_offsets(bs, topic, parts)
                    if stored != records:
                        raise RuntimeError("%s holds %d records, %d were sent" % (topic, stored, records))
                    record("produce %s, %d part, acks=%s | %s" % (label(size), parts, acks, client), mb_s, moved, m)
                topic = topics[args.acks[0]]
                with Measure(target.pid) as m:
                    if client == "java":
                        mb_s = java_consume(bs, topic, size, records)
                    else:
                        mb_s = kcat_consume(bs, topic, size, records)
                record("consume %s, %d part | %s" % (label(size), parts, client), mb_s, moved, m)
                delete_topics(bs, topics.values())
    if "java" in args.clients:
        records = int(args.rate * (args.latency_seconds + 2))
        for acks in args.acks:
            topic = "latency-%s" % acks
            create_topic(bs, topic, 1)
            with Measure(target.pid) as m:
                mb_s, p50, p99 = java_produce(bs, topic, 1024, records, acks, 2 * args.rate,
                                              rate=args.rate, extra=("linger.ms=0",))
            record("latency 1 KiB at %d/s, acks=%s | java" % (args.rate, acks), mb_s, records * 1024, m,
                   {"p50": p50, "p99": p99})
            delete_topics(bs, [topic])


def med(entries, field):
    return statistics.median(e[field] for e in entries)


def report(results, args):
    print("| row (client) | Kafka MB/s | Krabka MB/s | Krabka/Kafka | Kafka CPU-s/GB | Krabka CPU-s/GB "
          "| Krabka/Kafka | Kafka peak RSS | Krabka peak RSS | Krabka/Kafka |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for key, by in results.items():
        if "Kafka" not in by or "Krabka" not in by or key.startswith("latency"):
            continue
        k, r = by["Kafka"], by["Krabka"]
        row, client = key.split(" | ")
        print("| %s (%s) | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f | %.0f MiB | %.0f MiB | %.3f |" % (
            row, client, med(k, "mb_s"), med(r, "mb_s"), med(r, "mb_s") / med(k, "mb_s"),
            med(k, "cpu_gb"), med(r, "cpu_gb"), med(r, "cpu_gb") / med(k, "cpu_gb"),
            med(k, "rss") / 2**20, med(r, "rss") / 2**20, med(r, "rss") / med(k, "rss")))
    lat = [(key, by) for key, by in results.items() if key.startswith("latency") and len(by) == 2]
    if lat:
        print("\n| row (client) | Kafka rate | Krabka rate | Kafka p50 | Krabka p50 | Kafka p99 | Krabka p99 "
              "| Kafka CPU-s/GB | Krabka CPU-s/GB | Kafka peak RSS | Krabka peak RSS |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for key, by in lat:
            k, r = by["Kafka"], by["Krabka"]
            row, client = key.split(" | ")
            print("| %s (%s) | %.1f MB/s | %.1f MB/s | %g ms | %g ms | %g ms | %g ms | %.2f | %.2f "
                  "| %.0f MiB | %.0f MiB |" % (
                      row, client, med(k, "mb_s"), med(r, "mb_s"), med(k, "p50"), med(r, "p50"),
                      med(k, "p99"), med(r, "p99"), med(k, "cpu_gb"), med(r, "cpu_gb"),
                      med(k, "rss") / 2**20, med(r, "rss") / 2**20))
    print("\nEvery round (MB/s; CPU-s/GB, of which the kernel's in brackets):\n")
    print("| row (client) | Kafka | Krabka |\n| --- | --- | --- |")
    for key, by in results.items():
        cells = [", ".join("%.0f; %.2f [%.2f]" % (e["mb_s"], e["cpu_gb"], e["sys_gb"]) for e in by.get(name, []))
                 for name in ("Kafka", "Krabka")]
        row, client = key.split(" | ")
        print("| %s (%s) | %s | %s |" % (row, client, *cells))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds (each runs Kafka, then Krabka)")
    parser.add_argument("--bytes", type=float, default=1e9, help="bytes of record values per produce row")
    parser.add_argument("--clients", default="java,kcat", help="java (Kafka's perf tools) and/or kcat")
    parser.add_argument("--rate", type=int, default=10_000, help="records/s of the latency rows")
    parser.add_argument("--latency-seconds", type=float, default=10.0,
                        help="measured seconds of each latency row (after 2 s of warm-up)")
    parser.add_argument("--warmup-bytes", type=float, default=2e8,
                        help="unmeasured produce+consume with each client after each broker start")
    parser.add_argument("--dir", default=None, help="parent of both brokers' data dirs (default: $TMPDIR)")
    parser.add_argument("--sizes", default="1024,100", help="record sizes of the rows (bytes)")
    parser.add_argument("--partitions", default="1,8", help="partition counts of the rows")
    parser.add_argument("--acks", default="1,all", help="acks of the produce rows (consume reads the first's topic)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 1 round, 100 MB, 1 KiB, 1 partition, acks=1, 2 s of latency")
    args = parser.parse_args()
    args.clients = [c for c in args.clients.split(",") if c]
    if set(args.clients) - {"java", "kcat"}:
        sys.exit("--clients takes java and kcat")
    args.sizes = tuple(int(x) for x in args.sizes.split(","))
    args.partitions = tuple(int(x) for x in args.partitions.split(","))
    args.acks = tuple(args.acks.split(","))
    if args.quick:
        args.rounds, args.bytes, args.latency_seconds, args.warmup_bytes = 1, 1e8, 2.0, 5e7
        args.sizes, args.partitions, args.acks = (1024,), (1,), ("1",)
    if not os.path.exists(KRABKA_BIN):
        sys.exit("no binary at %s: cargo build --release -p krabka-broker" % KRABKA_BIN)
    if "kcat" in args.clients and shutil.which("kcat") is None:
        sys.exit("kcat is not installed (apt-get install kcat)")
    kafka_ref.classpath("kafka")  # resolve the jars before any clock starts
    args.dir = tempfile.mkdtemp(prefix="krabka-vs-kafka-", dir=args.dir)
    results = {}
    began = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    loads = [os.getloadavg()]
    try:
        for round_no in range(1, args.rounds + 1):
            for kind in (KafkaTarget, KrabkaTarget):
                target = kind(args.dir)
                try:
                    run_target(target, args, results, round_no)
                finally:
                    target.stop()
                loads.append(os.getloadavg())
    finally:
        shutil.rmtree(args.dir, ignore_errors=True)
    print("## Krabka vs Apache Kafka %s, run of %s to %s\n" % (
        kafka_ref.KAFKA_VERSION, began, time.strftime("%H:%M UTC", time.gmtime())))
    print("%d round(s), %.2g bytes per produce row, clients %s; 1-minute load average %s\n" % (
        args.rounds, args.bytes, ", ".join(args.clients), " / ".join("%.1f" % load[0] for load in loads)))
    report(results, args)


if __name__ == "__main__":
    main()
