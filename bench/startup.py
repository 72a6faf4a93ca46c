"""Startup time of a release broker against the data it holds (issue 19).

Two series, each on a fresh data directory under $TMPDIR:

* data size: one topic of 4 partitions (1 GiB segments) filled with N GB of
  1 KiB records by `krabka-bench produce`, then
  - `kill -9` right after the last acknowledgement and a restart: crash
    recovery checks every batch written since the broker last opened the
    logs (the recovery point is written when a log is opened or closed);
  - SIGTERM and a restart: a clean start reads no data.
* partition count: topics of 1000 partitions each, one record per
  partition, then the same clean and kill -9 restarts.

The time is from spawning `krabka serve` to its "krabka broker started"
line (logs opened, coordinators loaded, listener bound).

    cargo build --release -p krabka-broker -p krabka-bench
    .venv/bin/python bench/startup.py --sizes 1,5,10 --partitions 1000,10000
"""

import argparse
import os
import re
import resource
import shutil
import signal
import subprocess
import tempfile
import time

from benchlib import KRABKA_BIN, ROOT, free_port, wait_until

BENCH_BIN = os.path.join(ROOT, "target", "release", "krabka-bench")
# The broker holds one descriptor per partition (its active segment's .log;
# Kafka holds four per segment and advises 100,000 or more). This script
# asks for this many for itself and the brokers it starts where the hard
# limit allows it; 10,000 partitions fit in a hard limit of 20,000 anyway.
# The broker raises its soft limit to the hard one.
NOFILE = 131072


def raise_nofile():
    """Lifts this process's RLIMIT_NOFILE (and its children's) to NOFILE where allowed."""
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))
    except (ValueError, OSError):
        pass


STARTED = re.compile(rb"krabka broker started")


class Run:
    """One `krabka serve` on a directory kept across restarts."""

    def __init__(self, directory, settings):
        self.directory = directory
        self.port = free_port()
        self.bootstrap = "127.0.0.1:%d" % self.port
        self.settings = dict(settings)
        self.process = None
        self.log_path = None

    def start(self, timeout=1800):
        """Starts the broker; returns seconds until it said it started."""
        merged = {
            "listeners": "PLAINTEXT://127.0.0.1:%d" % self.port,
            "log.dirs": os.path.join(self.directory, "data"),
            "krabka.metrics.listener": "",
        }
        merged.update(self.settings)
        cmd = [KRABKA_BIN, "serve"]
        for k, v in merged.items():
            cmd += ["--override", "%s=%s" % (k, v)]
        self.log_path = os.path.join(self.directory, "krabka-%d.log" % time.monotonic_ns())
        log = open(self.log_path, "wb")
        env = dict(os.environ, RUST_LOG="info")
        began = time.monotonic()
        self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()

        def started():
            if self.process.poll() is not None:
                raise RuntimeError("krabka exited with %s" % self.process.returncode)
            with open(self.log_path, "rb") as f:
                return STARTED.search(f.read()) is not None

        return wait_until(started, "the broker to start", timeout=timeout, step=0.01) - began

    def removed(self):
        """Bytes recovery reported removing in the last start."""
        with open(self.log_path, "rb") as f:
            text = f.read()
        return sum(int(b) for b in re.findall(rb"recovery removed data.*?bytes\S*?=\S*?(\d+)", text))

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=600)

    def kill9(self):
        self.process.kill()
        self.process.wait()

    def descriptors(self):
        """Open file descriptors of the running broker (/proc/<pid>/fd)."""
        return len(os.listdir("/proc/%d/fd" % self.process.pid))

    def close(self):
        """Kills a broker still running (a failed step must not leave one)."""
        if self.process is not None and self.process.poll() is None:
            self.kill9()


def restarts(run):
    """(kill -9 restart, clean restart) seconds and the descriptors the
    broker holds after the clean start; the broker is running."""
    run.kill9()
    crash = run.start()
    run.stop()
    clean = run.start()
    fds = run.descriptors()
    run.stop()
    return crash, clean, fds


def data_size(gb, base):
    directory = tempfile.mkdtemp(prefix="krabka-startup-", dir=base)
    run = Run(directory, {})
    try:
        run.start()
        records = int(gb * (1 << 30) / 1024)
        subprocess.run(
            [BENCH_BIN, "produce", "-b", run.bootstrap, "-t", "big", "-p", "4", "-s", "1024",
             "-n", str(records), "--acks", "1", "--quiet"],
            check=True, stdout=subprocess.DEVNULL, timeout=3600,
        )
        return restarts(run)
    finally:
        run.close()
        shutil.rmtree(directory, ignore_errors=True)


def partition_count(count, base):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    directory = tempfile.mkdtemp(prefix="krabka-startup-", dir=base)
    run = Run(directory, {"krabka.max.partitions": str(count + 1000)})
    try:
        run.start()
        admin = AdminClient({"bootstrap.servers": run.bootstrap})
        names = ["p%d" % i for i in range(count // 1000)]
        for name in names:
            admin.create_topics([NewTopic(name, num_partitions=1000, replication_factor=1)])[name].result(600)
        producer = Producer({"bootstrap.servers": run.bootstrap, "linger.ms": 20})
        for name in names:
            for p in range(1000):
                producer.produce(name, value=b"x" * 100, partition=p)
            producer.poll(0)
        assert producer.flush(600) == 0
        del producer, admin  # no client reconnecting while the broker restarts
        return restarts(run)
    finally:
        run.close()
        shutil.rmtree(directory, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,5,10", help="GB of data, comma-separated")
    parser.add_argument("--partitions", default="1000,10000", help="partition counts, comma-separated")
    parser.add_argument("--dir", default=None, help="where the data directories go (default: $TMPDIR)")
    args = parser.parse_args()
    raise_nofile()
    print("open-file limit of the broker: %d (soft) / %d (hard)\n" % resource.getrlimit(resource.RLIMIT_NOFILE))
    print("| data | kill -9, then start | clean stop, then start | descriptors held after the clean start |")
    print("| --- | --- | --- | --- |")
    for gb in [float(s) for s in args.sizes.split(",") if s]:
        crash, clean, fds = data_size(gb, args.dir)
        print("| %g GB, 4 partitions | %.2f s | %.2f s | %d |" % (gb, crash, clean, fds), flush=True)
    for count in [int(s) for s in args.partitions.split(",") if s]:
        crash, clean, fds = partition_count(count, args.dir)
        print("| %d partitions (+100 internal) | %.2f s | %.2f s | %d |" % (count, crash, clean, fds), flush=True)


if __name__ == "__main__":
    main()
