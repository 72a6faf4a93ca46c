"""`krabka produce` / `krabka consume` throughput next to kcat's, on the
same broker in one run.

One release broker; an input file of N lines of S bytes. Each round runs,
in alternation so the machine's noise falls on both:

- produce: `kcat -P -l FILE` and `krabka produce --file FILE`, each into a
  fresh one-partition topic, acks=all (kcat's default; krabka is also
  idempotent at acks=all), linger 5 ms;
- consume: `kcat -C -e -f '%s\\n'` and `krabka consume -e -f '%s\\n'` of a
  topic holding the file, from the beginning to the end, into /dev/null.

Each figure is the wall time of the whole command (connect included) and
the CPU time (user + system) the client process used; the script prints
every round and the medians of the rounds with the krabka/kcat ratios. On
a shared, loaded machine the wall times scatter; the CPU times much less.

    cargo build --release -p krabka-broker --bin krabka
    .venv/bin/python bench/cli.py --records 1000000 --size 100 --rounds 3
"""

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import KRABKA_BIN, Broker


def kcat():
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if not path:
        sys.exit("kcat is not installed (apt-get install -y kcat)")
    return path


def timed(cmd, stdout=subprocess.DEVNULL):
    """(wall seconds, CPU seconds user+system) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    result = subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, timeout=900)
    elapsed = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (cmd[0], result.returncode, result.stderr.decode()[-2000:]))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def create(broker, topic):
    subprocess.run([KRABKA_BIN, "topic", "create", topic, "--partitions", "1", "-b", broker.bootstrap],
                   check=True, stdout=subprocess.DEVNULL)


def end_offset(broker, topic):
    out = subprocess.run([KRABKA_BIN, "topic", "describe", topic, "-b", broker.bootstrap, "--format", "json"],
                         check=True, capture_output=True).stdout
    import json
    return json.loads(out)[0]["partitions"][0]["log_end_offset"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100, help="bytes per line (newline excluded)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    kcat_bin = kcat()
    work = tempfile.mkdtemp(prefix="krabka-cli-bench-")
    try:
        path = os.path.join(work, "input.txt")
        line = (b"x" * (args.size - 12))
        with open(path, "wb") as f:
            for i in range(args.records):
                f.write(b"%011d " % i + line + b"\n")
        mb = args.records * args.size / 1e6
        broker = Broker({"log.segment.bytes": "268435456"})
        try:
            results = {k: [] for k in ("produce kcat", "produce krabka", "consume kcat", "consume krabka")}
            for r in range(args.rounds):
                order = ["kcat", "krabka"] if r % 2 == 0 else ["krabka", "kcat"]
                produced = {}
                for who in order:
                    topic = "p-%s-%d" % (who, r)
                    create(broker, topic)
                    if who == "kcat":
                        cmd = [kcat_bin, "-P", "-b", broker.bootstrap, "-t", topic, "-p", "0", "-l",
                               "-X", "acks=all", "-X", "linger.ms=5", path]
                    else:
                        cmd = [KRABKA_BIN, "produce", topic, "-b", broker.bootstrap, "-p", "0",
                               "--file", path, "--acks", "all", "--linger-ms", "5"]
                    secs, cpu = timed(cmd)
                    assert end_offset(broker, topic) == args.records, "%s lost records" % who
                    results["produce " + who].append((secs, cpu))
                    produced[who] = topic
                    print("round %d produce %-6s %6.2f s  %8.0f rec/s  %6.1f MB/s  cpu %5.2f s" % (
                        r, who, secs, args.records / secs, mb / secs, cpu), flush=True)
                source = produced["kcat"]
                for who in order:
                    if who == "kcat":
                        cmd = [kcat_bin, "-C", "-b", broker.bootstrap, "-t", source, "-p", "0",
                               "-o", "beginning", "-e", "-q", "-f", "%s\n"]
                    else:
                        cmd = [KRABKA_BIN, "consume", source, "-b", broker.bootstrap, "-p", "0",
                               "-o", "beginning", "-e", "-f", "%s\\n"]
                    with open(os.path.join(work, "out-%s" % who), "wb") as out:
                        secs, cpu = timed(cmd, stdout=out)
                    size = os.path.getsize(os.path.join(work, "out-%s" % who))
                    assert size == args.records * (args.size + 1), "%s printed %d bytes" % (who, size)
                    results["consume " + who].append((secs, cpu))
                    print("round %d consume %-6s %6.2f s  %8.0f rec/s  %6.1f MB/s  cpu %5.2f s" % (
                        r, who, secs, args.records / secs, mb / secs, cpu), flush=True)
            print()
            print("records %d x %d B (%.0f MB), %d rounds, medians:" % (args.records, args.size, mb, args.rounds))
            for op in ("produce", "consume"):
                k = statistics.median(w for w, _ in results[op + " kcat"])
                m = statistics.median(w for w, _ in results[op + " krabka"])
                kc = statistics.median(c for _, c in results[op + " kcat"])
                mc = statistics.median(c for _, c in results[op + " krabka"])
                print("  %s  kcat %6.2f s (%8.0f rec/s, cpu %.2f s)  krabka %6.2f s (%8.0f rec/s, cpu %.2f s)"
                      "  krabka/kcat throughput %.2f, cpu %.2f" % (
                          op, k, args.records / k, kc, m, args.records / m, mc, k / m, mc / kc))
        finally:
            broker.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
