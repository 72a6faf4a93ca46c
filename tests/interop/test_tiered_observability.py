"""What an operator sees of tiered storage, from the real broker: the
Prometheus metrics of copies, remote reads, remote size and copy lag
(scraped from /metrics and checked against the tier directory), and
DescribeLogDirs with the volume's size (v4) and local partition sizes."""

import os
import re
import urllib.request

from kafka.admin import KafkaAdminClient

from conftest import free_port
from helpers import consume_confluent, create_topic, make_records, produce_confluent, wait_for

RECORDS = 20_000


def remote_log_files(broker, topic):
    root = os.path.join(broker.data_dir, "krabka-remote-tier")
    out = []
    for d in os.listdir(root) if os.path.isdir(root) else []:
        if d.startswith(topic + "-0-"):
            out += [os.path.join(root, d, f) for f in os.listdir(os.path.join(root, d)) if f.endswith(".log")]
    return out


def local_log_files(broker, topic):
    d = os.path.join(broker.data_dir, topic + "-0")
    return [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".log")]


def scrape(port):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5).read().decode()
    values = {}
    for line in text.splitlines():
        m = re.match(r'^(krabka_remote_\w+)(\{[^}]*\})?\s+(\S+)$', line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
            values[(m.group(1), labels.get("topic"), labels.get("partition"))] = float(m.group(3))
    return values


def test_tiered_metrics_match_the_tier(broker_factory):
    port = free_port()
    broker = broker_factory({
        "remote.log.storage.system.enable": "true",
        "remote.log.manager.task.interval.ms": "300",
        "krabka.metrics.listener": "127.0.0.1:%d" % port,
    })
    topic = "tiered-metrics"
    create_topic(broker.bootstrap, topic, config={
        "segment.bytes": "65536",
        "remote.storage.enable": "true",
        "local.retention.bytes": "131072",
    })
    records = make_records(RECORDS, "m")
    produce_confluent(broker.bootstrap, topic, records, extra={"batch.size": 16384})
    wait_for(lambda: len(remote_log_files(broker, topic)) >= 10, timeout=60, what="copies")

    def settled():
        files = remote_log_files(broker, topic)
        size = sum(os.path.getsize(f) for f in files)
        m = scrape(port)
        ok = (m.get(("krabka_remote_log_size_bytes", topic, "0")) == size
              and m.get(("krabka_remote_log_segments", topic, "0")) == len(files)
              and m.get(("krabka_remote_copy_bytes_total", topic, None)) == size)
        return (m, size, files) if ok else None

    # Nothing is deleted remotely here: every byte copied is in the tier.
    m, size, files = wait_for(settled, timeout=30, what="metrics to match the tier")
    assert m[("krabka_remote_copy_requests_total", topic, None)] == len(files)
    assert m[("krabka_remote_copy_errors_total", topic, None)] == 0
    assert m[("krabka_remote_fetch_errors_total", topic, None)] == 0
    # Only the active segment is left to copy (it never is while active).
    assert m[("krabka_remote_copy_lag_segments", topic, "0")] == 0
    assert m[("krabka_remote_copy_lag_bytes", topic, "0")] == 0

    local_start = min(int(os.path.basename(f).split(".")[0]) for f in local_log_files(broker, topic))
    by_start = sorted((int(os.path.basename(f).split("-")[0]), os.path.getsize(f)) for f in files)
    remote_only = sum(s for (_, s), (nxt, _) in zip(by_start, by_start[1:]) if nxt <= local_start)
    got = consume_confluent(broker.bootstrap, topic, RECORDS, offset=0, timeout=120)
    assert len(got) == RECORDS
    m = scrape(port)
    fetched = m[("krabka_remote_fetch_bytes_total", topic, None)]
    # Every byte only the tier holds was read from it.
    assert remote_only > 0
    assert fetched >= remote_only
    assert m[("krabka_remote_fetch_requests_total", topic, None)] >= 1
    assert m[("krabka_remote_fetch_errors_total", topic, None)] == 0


def test_describe_log_dirs_reports_volume_and_local_sizes(broker_factory):
    broker = broker_factory({
        "remote.log.storage.system.enable": "true",
        "remote.log.manager.task.interval.ms": "300",
    })
    topic = "tiered-logdirs"
    create_topic(broker.bootstrap, topic, config={
        "segment.bytes": "65536",
        "remote.storage.enable": "true",
        "local.retention.bytes": "131072",
    })
    produce_confluent(broker.bootstrap, topic, make_records(RECORDS, "d"), extra={"batch.size": 16384})
    wait_for(lambda: len(remote_log_files(broker, topic)) >= 10 and len(local_log_files(broker, topic)) <= 4,
             timeout=60, what="segments to leave local disk")
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        def described():
            result = client.describe_log_dirs()
            log_dir = result[0]["log_dirs"][0]
            local = sum(os.path.getsize(f) for f in local_log_files(broker, topic))
            for t in log_dir["topics"]:
                if t["name"] == topic:
                    if t["partitions"][0]["partition_size"] == local:
                        return log_dir
            return None

        log_dir = wait_for(described, timeout=30, what="local size in DescribeLogDirs")
    finally:
        client.close()
    st = os.statvfs(broker.data_dir)
    assert log_dir["total_bytes"] == st.f_blocks * st.f_frsize
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
    assert os.path.samefile(log_dir["log_dir"], broker.data_dir)
