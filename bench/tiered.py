#!/usr/bin/env python3
"""Tiered-storage benchmark (issue 9): consume throughput from remote-only
data next to consume throughput from local data, and copy throughput, for
the filesystem tier and for an S3 server (moto).

For each tier the script starts the release broker (`target/release/krabka`,
or $KRABKA_BIN) on a free 127.0.0.1 port with a temporary data directory,
creates two topics with the same settings except tiering — `local` and
`tiered` (copying held back with `remote.log.copy.disable=true`,
`local.retention.ms=1`) — and fills both with
`krabka-bench produce`. Then:

* copy throughput: `remote.log.copy.disable` is switched off and the time
  until every closed segment of `tiered` is in the tier (and gone from local
  disk) is taken; MB/s counts the segment bytes copied;
* consume throughput: `krabka-bench consume` reads each topic from its
  earliest offset, alternating local and tiered, `--rounds` times; `tiered`
  is then served entirely from the remote tier (its local log holds only the
  active segment, empty of anything before the end).

The S3 tier uses a `moto_server` of its own (from the virtualenv of this
Python); moto keeps objects in memory in one Python process, so S3 figures
bound moto, not S3. Every wait is bounded.

    cargo build --release -p krabka-broker -p krabka-bench
    /work/main/.venv/bin/python bench/tiered.py [--mib 256] [--s3-mib 64] [--rounds 3]
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from benchlib import KRABKA_BIN, ROOT, Broker, free_port, wait_until

BENCH_BIN = os.environ.get("KRABKA_BENCH_BIN", os.path.join(ROOT, "target", "release", "krabka-bench"))
SEGMENT = 16 * 1024 * 1024
RECORD = 1024
WAIT = 600  # seconds any single wait may take


class Moto:
    def __init__(self, workdir):
        self.port = free_port()
        self.endpoint = "http://127.0.0.1:%d" % self.port
        self.log = open(os.path.join(workdir, "moto.log"), "wb")
        moto = os.path.join(os.path.dirname(sys.executable), "moto_server")
        self.process = subprocess.Popen([moto, "-H", "127.0.0.1", "-p", str(self.port)],
                                        stdout=self.log, stderr=subprocess.STDOUT)

        def up():
            try:
                urllib.request.urlopen(self.endpoint + "/", timeout=1).read()
                return True
            except OSError:
                return False
        wait_until(up, "moto_server", timeout=60)
        import boto3
        boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id="krabka",
                     aws_secret_access_key="krabka", region_name="us-east-1").create_bucket(Bucket="bench")

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()


class TieredBroker(Broker):
    """A broker with tiering on, in `workdir` (kept for inspection)."""

    def __init__(self, workdir, tier_settings):
        settings = {
            "remote.log.storage.system.enable": "true",
            "remote.log.manager.task.interval.ms": "200",
            # Time-based rolls are checked this often (see roll_tiered).
            "log.retention.check.interval.ms": "500",
        }
        settings.update(tier_settings)
        super().__init__(settings, directory=workdir)
        self.data = self.data_dir

    def local_logs(self, topic):
        d = os.path.join(self.data, topic + "-0")
        return sorted(f for f in os.listdir(d) if f.endswith(".log"))


def create_topics(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    common = {"segment.bytes": str(SEGMENT)}
    tiered = dict(common, **TIERED_TOPIC)
    futures = admin.create_topics([
        NewTopic("local", 1, 1, config=common),
        NewTopic("tiered", 1, 1, config=tiered),
    ])
    for f in futures.values():
        f.result(timeout=30)
    return admin


TIERED_TOPIC = {
    "remote.storage.enable": "true",
    "remote.log.copy.disable": "true",
    # Every copied segment leaves local disk.
    "local.retention.ms": "1",
}


def alter_tiered(admin, **changes):
    config = dict(TIERED_TOPIC, **{"segment.bytes": str(SEGMENT)})
    config.update({k.replace("_", "."): v for k, v in changes.items()})
    resource = ConfigResource("topic", "tiered", set_config=config)
    for f in admin.alter_configs([resource]).values():
        f.result(timeout=30)


def roll_tiered(admin, broker):
    """Closes the partly filled last segment (segment.ms), so all data can leave local disk."""
    before = broker.local_logs("tiered")
    alter_tiered(admin, segment_ms="1000")
    path = lambda name: os.path.join(broker.data, "tiered-0", name)
    wait_until(lambda: len(broker.local_logs("tiered")) > len(before)
               and os.path.getsize(path(broker.local_logs("tiered")[-1])) == 0,
               "the last segment of tiered to roll", timeout=60)
    alter_tiered(admin, segment_ms="604800000")


def bench(args):
    result = subprocess.run([BENCH_BIN] + args + ["--quiet"], capture_output=True, timeout=WAIT)
    if result.returncode != 0:
        raise RuntimeError("krabka-bench %s failed: %s" % (" ".join(args), result.stderr.decode()))
    return result.stdout.decode()


def mb_per_s(report):
    m = re.search(r"([0-9.]+) MB/s", report)
    if not m:
        raise RuntimeError("no MB/s in krabka-bench output:\n" + report)
    return float(m.group(1))


def run_tier(name, tier_settings, mib, rounds, tier_bytes):
    workdir = tempfile.mkdtemp(prefix="krabka-bench-tiered-%s-" % name)
    broker = TieredBroker(workdir, tier_settings)
    try:
        admin = create_topics(broker.bootstrap)
        records = mib * 1024 * 1024 // RECORD
        for topic in ("local", "tiered"):
            bench(["produce", "-b", broker.bootstrap, "-t", topic, "--record-size", str(RECORD),
                   "-n", str(records), "--acks", "1"])
        roll_tiered(admin, broker)
        segments = len(broker.local_logs("tiered"))
        t0 = time.monotonic()
        alter_tiered(admin, remote_log_copy_disable="false")
        t1 = wait_until(lambda: len(broker.local_logs("tiered")) == 1, "every segment to be copied",
                        timeout=WAIT, step=0.02)
        copied = tier_bytes(broker)
        copy = copied / (t1 - t0) / 1e6
        out = {"tier": name, "segments_copied": segments - 1, "bytes_copied": copied,
               "copy_seconds": round(t1 - t0, 2), "copy_MBps": round(copy, 1),
               "local_MBps": [], "remote_MBps": []}
        for _ in range(rounds):
            for topic, key in (("local", "local_MBps"), ("tiered", "remote_MBps")):
                report = bench(["consume", "-b", broker.bootstrap, "-t", topic])
                out[key].append(mb_per_s(report))
        out["local_median"] = statistics.median(out["local_MBps"])
        out["remote_median"] = statistics.median(out["remote_MBps"])
        out["remote_over_local"] = round(out["remote_median"] / out["local_median"], 2)
        return out
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def fs_tier_bytes(broker):
    root = os.path.join(broker.data, "krabka-remote-tier")
    total = 0
    for d in os.listdir(root):
        for f in os.listdir(os.path.join(root, d)):
            if f.endswith(".log"):
                total += os.path.getsize(os.path.join(root, d, f))
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=256, help="data per topic, filesystem tier")
    parser.add_argument("--s3-mib", type=int, default=64, help="data per topic, S3 tier")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-s3", action="store_true")
    args = parser.parse_args()
    print("uptime:", subprocess.run(["uptime"], capture_output=True).stdout.decode().strip())
    results = [run_tier("filesystem", {}, args.mib, args.rounds, fs_tier_bytes)]
    if not args.skip_s3:
        workdir = tempfile.mkdtemp(prefix="krabka-bench-moto-")
        moto = Moto(workdir)
        try:
            import boto3
            s3 = boto3.client("s3", endpoint_url=moto.endpoint, aws_access_key_id="krabka",
                              aws_secret_access_key="krabka", region_name="us-east-1")

            def s3_tier_bytes(_broker):
                total = 0
                for page in s3.get_paginator("list_objects_v2").paginate(Bucket="bench"):
                    total += sum(o["Size"] for o in page.get("Contents", []) if o["Key"].endswith(".log"))
                return total
            settings = {
                "krabka.remote.log.storage.manager": "s3",
                "rsm.config.s3.bucket": "bench",
                "rsm.config.s3.endpoint": moto.endpoint,
                "rsm.config.s3.region": "us-east-1",
                "rsm.config.s3.path.style.access": "true",
                "rsm.config.s3.allow.http": "true",
                "rsm.config.s3.access.key.id": "krabka",
                "rsm.config.s3.secret.access.key": "krabka",
                "rsm.config.s3.sdk.checksum.header": "true",
            }
            results.append(run_tier("s3 (moto)", settings, args.s3_mib, args.rounds, s3_tier_bytes))
        finally:
            moto.stop()
            shutil.rmtree(workdir, ignore_errors=True)
    print("uptime:", subprocess.run(["uptime"], capture_output=True).stdout.decode().strip())
    for r in results:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
