#!/usr/bin/env python3
"""Broker benchmark (issue 3): the machine's own limits, `krabka-bench`
produce/consume throughput and produce latency, and the same load from
third-party clients (confluent-kafka, kcat), all in one run so the figures
can be compared as ratios.

Starts the release broker (`target/release/krabka`, or $KRABKA_BIN) on a
free 127.0.0.1 port with a temporary data directory and drives it with
`target/release/krabka-bench` ($KRABKA_BENCH_BIN). Build both first:

    cargo build --release -p krabka-broker -p krabka-bench
    /work/main/.venv/bin/python bench/broker.py [--seconds 8] [--quick]

Prints a Markdown report: the limits (sequential write with fdatasync to the
data directory's disk, loopback TCP throughput), the throughput matrix
(record size x partitions x acks, with the broker's peak resident memory),
latency at a fixed rate, and the third-party rows.
"""

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from benchlib import KRABKA_BIN, ROOT, WAIT, Broker, RssSampler

BENCH_BIN = os.environ.get("KRABKA_BENCH_BIN", os.path.join(ROOT, "target", "release", "krabka-bench"))
MB = 1_000_000

THROUGHPUT = re.compile(r"(\d+) records in ([\d.]+) s: (\d+) records/s, ([\d.]+) MB/s")
LATENCY = re.compile(r"p50 ([\d.]+) p99 ([\d.]+) p99\.9 ([\d.]+)")


def bench(broker, *args):
    """Runs krabka-bench; returns (records/s, MB/s, latency triple or None)."""
    out = subprocess.run(
        [BENCH_BIN, args[0], "-b", broker.bootstrap, "--quiet", *args[1:]],
        check=True, capture_output=True, text=True, timeout=10 * WAIT,
    ).stdout
    line = out.strip().splitlines()[-1]
    m = THROUGHPUT.search(line)
    if not m:
        raise RuntimeError("unexpected krabka-bench output: " + out)
    lat = LATENCY.search(line)
    return (
        float(m.group(3)),
        float(m.group(4)),
        tuple(float(x) for x in lat.groups()) if lat else None,
    )


def disk_write_mb_s(directory, mib=1024):
    """Sequential 1 MiB writes with one final fdatasync, as `dd conv=fdatasync`."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "dd.tmp")
    start = time.perf_counter()
    subprocess.run(
        ["dd", "if=/dev/zero", "of=" + path, "bs=1M", "count=%d" % mib, "conv=fdatasync"],
        check=True, capture_output=True,
    )
    elapsed = time.perf_counter() - start
    os.unlink(path)
    return mib * 1024 * 1024 / elapsed / MB


def loopback_mb_s(seconds=3.0):
    """One TCP stream over 127.0.0.1 between two threads, 1 MiB sends."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    received = [0]

    def sink():
        conn, _ = server.accept()
        buf = bytearray(1 << 20)
        while True:
            n = conn.recv_into(buf)
            if n == 0:
                break
            received[0] += n
        conn.close()

    t = threading.Thread(target=sink, daemon=True)
    t.start()
    client = socket.create_connection(server.getsockname())
    chunk = b"\0" * (1 << 20)
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        client.sendall(chunk)
    client.close()
    t.join(WAIT)
    elapsed = time.perf_counter() - start
    server.close()
    return received[0] / elapsed / MB


def confluent_produce(bootstrap, topic, size, seconds, acks="1", extra=None):
    """confluent-kafka producing `size`-byte records as fast as it can
    (`extra`: more client settings, e.g. security)."""
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "queue.buffering.max.messages": 1_000_000,
        "enable.idempotence": acks == "all",
        **(extra or {}),
    })
    value = b"x" * size
    sent = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(1000):
            try:
                producer.produce(topic, value, partition=0)
            except BufferError:
                producer.poll(0.001)
                continue
            sent += 1
        producer.poll(0)
    remaining = producer.flush(WAIT)
    elapsed = time.perf_counter() - start
    if remaining:
        raise RuntimeError("%d records not delivered" % remaining)
    return sent / elapsed, sent * size / elapsed / MB, sent


def confluent_consume(bootstrap, topic, expected, extra=None):
    """confluent-kafka reading `expected` records of partition 0 from offset 0."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "bench-%d" % time.time_ns(),
        "enable.auto.commit": False,
        "fetch.max.bytes": 52_428_800,
        "max.partition.fetch.bytes": 4_194_304,
        "queued.max.messages.kbytes": 1_048_576,
        **(extra or {}),
    })
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    size = 0
    start = None
    deadline = time.monotonic() + 10 * WAIT
    while got < expected and time.monotonic() < deadline:
        for msg in consumer.consume(num_messages=10_000, timeout=1.0):
            if msg.error():
                continue
            if start is None:
                start = time.perf_counter()
            got += 1
            size += len(msg.value())
    elapsed = time.perf_counter() - (start or time.perf_counter())
    consumer.close()
    return got / elapsed, size / elapsed / MB


def confluent_latency(bootstrap, topic, size, rate, seconds, acks, extra=None):
    """Per-record latency at a fixed rate, from when each record was due."""
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "linger.ms": 0,
        "batch.size": 16384,
        "enable.idempotence": acks == "all",
        **(extra or {}),
    })
    value = b"x" * size
    # Warm up: metadata, the connection and (idempotence) the producer id
    # are had before the clock starts, as for krabka-bench's producer.
    producer.produce(topic, value, partition=0)
    if producer.flush(WAIT):
        raise RuntimeError("the warm-up record was not delivered")
    latencies = []

    def delivered(due):
        return lambda err, msg: latencies.append(time.perf_counter() - due)

    start = time.perf_counter()
    i = 0
    while True:
        now = time.perf_counter()
        if now - start > seconds:
            break
        due = start + i / rate
        if due > now:
            # Wait in poll(), which also runs the delivery callbacks; a busy
            # loop would starve librdkafka's own threads on two cores.
            producer.poll(min(due - now, 0.001))
            continue
        producer.produce(topic, value, partition=0, on_delivery=delivered(due))
        i += 1
        if i % 32 == 0:
            producer.poll(0)
    producer.flush(WAIT)
    latencies.sort()

    def q(f):
        return latencies[min(len(latencies) - 1, int(f * len(latencies)))] * 1000

    return len(latencies) / seconds, (q(0.5), q(0.99), q(0.999))


def kcat_produce(bootstrap, topic, size, count, directory):
    """kcat -P of `count` newline-separated records of `size` bytes."""
    path = os.path.join(directory, "kcat-input")
    line = b"x" * size + b"\n"
    with open(path, "wb") as f:
        for _ in range(count):
            f.write(line)
    start = time.perf_counter()
    subprocess.run(
        ["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", "0", "-l",
         "-X", "linger.ms=5", "-X", "batch.size=1000000", path],
        check=True, capture_output=True, timeout=10 * WAIT,
    )
    elapsed = time.perf_counter() - start
    os.unlink(path)
    return count / elapsed, count * size / elapsed / MB


def kcat_consume(bootstrap, topic, count, size):
    """kcat -C from the beginning to the end of partition 0, output discarded."""
    start = time.perf_counter()
    subprocess.run(
        ["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
         "-X", "fetch.max.bytes=52428800"],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=10 * WAIT,
    )
    elapsed = time.perf_counter() - start
    return count / elapsed, count * size / elapsed / MB


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each throughput run")
    parser.add_argument("--quick", action="store_true", help="1 KiB, 1 partition, acks=1 only")
    args = parser.parse_args()
    for binary in (KRABKA_BIN, BENCH_BIN):
        if not os.path.exists(binary):
            sys.exit("no binary at %s: cargo build --release -p krabka-broker -p krabka-bench" % binary)
    if shutil.which("kcat") is None:
        sys.exit("kcat is not installed")
    secs = "%g" % args.seconds

    load = os.getloadavg()
    print("## Run of %s, load average %.2f %.2f %.2f\n" % (time.strftime("%Y-%m-%d %H:%M"), *load))
    broker = Broker(prefix="krabka-bench-broker-")
    try:
        print("| limit | figure |\n| --- | --- |")
        print("| sequential write + fdatasync, data dir disk | %.0f MB/s |" % disk_write_mb_s(broker.dir))
        print("| loopback TCP, one stream | %.0f MB/s |" % loopback_mb_s())
        print()

        print("| record | partitions | acks | produce | consume | broker peak RSS |")
        print("| --- | --- | --- | --- | --- | --- |")
        cases = [(1024, 1, "1")] if args.quick else [
            (size, parts, acks) for size in (1024, 100) for parts in (1, 8) for acks in ("1", "all")
        ]
        for size, parts, acks in cases:
            topic = "t-%d-%d-%s" % (size, parts, acks)
            with RssSampler(broker) as rss:
                p_rec, p_mb, _ = bench(broker, "produce", "-t", topic, "-s", str(size), "-p", str(parts),
                                       "--acks", acks, "-d", secs)
                c_rec, c_mb, _ = bench(broker, "consume", "-t", topic)
            print("| %s | %d | %s | %.0f MB/s (%.2f M rec/s) | %.0f MB/s (%.2f M rec/s) | %.0f MiB |" % (
                "1 KiB" if size == 1024 else "%d B" % size, parts, acks,
                p_mb, p_rec / 1e6, c_mb, c_rec / 1e6, rss.peak / 2**20))
        print()

        print("| client | record | acks | rate | p50 | p99 | p99.9 |\n| --- | --- | --- | --- | --- | --- | --- |")
        for size in (1024,) if args.quick else (1024, 100):
            for acks in ("1", "all"):
                rec, _, lat = bench(broker, "produce", "-t", "lat-%d-%s" % (size, acks), "-s", str(size),
                                    "--mode", "producer", "--rate", "20000", "--linger-ms", "0",
                                    "--batch-size", "16384", "--acks", acks, "-d", secs)
                print("| krabka-bench | %d B | %s | %.0f/s | %.2f ms | %.2f ms | %.2f ms |" % (size, acks, rec, *lat))
        for acks in ("1", "all"):
            rate, lat = confluent_latency(broker.bootstrap, "clat-%s" % acks, 1024, 20000, args.seconds, acks)
            print("| confluent-kafka | 1024 B | %s | %.0f/s | %.2f ms | %.2f ms | %.2f ms |" % (acks, rate, *lat))
        print()

        print("| client (1 KiB, 1 partition, acks=1) | produce | consume |\n| --- | --- | --- |")
        with RssSampler(broker) as rss:
            p_rec, p_mb, sent = confluent_produce(broker.bootstrap, "ck", 1024, args.seconds)
            c_rec, c_mb = confluent_consume(broker.bootstrap, "ck", sent)
        print("| confluent-kafka | %.0f MB/s (%.0f k rec/s) | %.0f MB/s (%.0f k rec/s) |" % (
            p_mb, p_rec / 1e3, c_mb, c_rec / 1e3))
        count = 1_000_000 if not args.quick else 200_000
        kp_rec, kp_mb = kcat_produce(broker.bootstrap, "kc", 1024, count, broker.dir)
        kc_rec, kc_mb = kcat_consume(broker.bootstrap, "kc", count, 1024)
        print("| kcat | %.0f MB/s (%.0f k rec/s) | %.0f MB/s (%.0f k rec/s) |" % (
            kp_mb, kp_rec / 1e3, kc_mb, kc_rec / 1e3))
        print("\nBroker peak RSS during the confluent-kafka runs: %.0f MiB" % (rss.peak / 2**20))
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
