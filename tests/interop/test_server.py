"""Startup configuration, clean shutdown and the metrics endpoint."""

import os
import subprocess
import time
import urllib.request

from conftest import KRABKA_BIN, free_port
from helpers import consume_confluent, create_topic, make_records, produce_confluent, wait_for


def run_refused(args, env=None):
    result = subprocess.run([KRABKA_BIN, "serve", *args], capture_output=True, timeout=30, env=env)
    return result.returncode, result.stderr.decode()


def test_unknown_and_invalid_settings_are_refused_by_name(tmp_path):
    code, err = run_refused(["--override", "log.retention.msec=5", "--override", "log.dirs=%s" % tmp_path])
    assert code != 0 and "log.retention.msec" in err
    code, err = run_refused(["--override", "num.partitions=many", "--override", "log.dirs=%s" % tmp_path])
    assert code != 0 and "num.partitions" in err
    props = tmp_path / "server.properties"
    props.write_text("# test\nlisteners=SASL_SSL://127.0.0.1:1\n")
    code, err = run_refused(["--config", str(props)])
    assert code != 0 and "listeners" in err
    env = dict(os.environ, KRABKA_NUM_PARTITIONS="-3", KRABKA_LOG_DIRS=str(tmp_path))
    code, err = run_refused([], env=env)
    assert code != 0 and "num.partitions" in err


def test_properties_file_env_and_overrides(broker_factory, tmp_path):
    b = broker_factory(start=False)
    props = tmp_path / "server.properties"
    props.write_text("krabka.metrics.listener=\nnum.partitions=2\nlog.dirs=%s\nlisteners=PLAINTEXT://127.0.0.1:%d\n" % (b.data_dir, b.port))
    cmd = [KRABKA_BIN, "serve", "--config", str(props)]
    b.command = lambda: cmd
    b.start()
    from confluent_kafka.admin import AdminClient, NewTopic

    client = AdminClient({"bootstrap.servers": b.bootstrap})
    client.create_topics([NewTopic("dflt", -1, -1)])["dflt"].result(timeout=30)
    meta = client.list_topics(timeout=10)
    assert len(meta.topics["dflt"].partitions) == 2


def test_sigterm_shuts_down_cleanly_and_data_survives(broker):
    create_topic(broker.bootstrap, "clean")
    records = make_records(2_000, "c")
    produce_confluent(broker.bootstrap, "clean", records)
    assert broker.stop() == 0
    assert "krabka broker stopped" in broker.log()
    broker.start()
    got = consume_confluent(broker.bootstrap, "clean", len(records))
    assert [(m.key(), m.value()) for m in got] == [(k, v) for k, v, _ in records]


def test_metrics_endpoint(broker_factory):
    port = free_port()
    b = broker_factory({"krabka.metrics.listener": "127.0.0.1:%d" % port})
    create_topic(b.bootstrap, "metered")
    produce_confluent(b.bootstrap, "metered", make_records(100, "m"))
    consume_confluent(b.bootstrap, "metered", 100)

    def scrape():
        text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5).read().decode()
        return text if "krabka_partition_log_size_bytes" in text else None

    text = wait_for(scrape, timeout=30, what="partition size gauge")
    assert 'krabka_requests_total{api="Produce"}' in text
    assert "krabka_request_duration_seconds" in text
    assert "krabka_bytes_in_total" in text
    assert "krabka_bytes_out_total" in text


def test_shutdown_with_a_waiting_consumer_and_producer_connected(broker):
    import threading

    from confluent_kafka import Consumer, Producer, TopicPartition

    create_topic(broker.bootstrap, "busy")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1})
    producer.produce("busy", value=b"first", partition=0)
    producer.flush(10)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "fetch.wait.max.ms": 120000, "socket.timeout.ms": 200000})
    consumer.assign([TopicPartition("busy", 0, 1)])
    stop = threading.Event()

    def poll():
        while not stop.is_set():
            consumer.poll(0.2)

    t = threading.Thread(target=poll)
    t.start()
    time.sleep(1.0)  # let the consumer park a long-poll fetch
    # A parked long poll would hold shutdown for two minutes; it must end early.
    code = broker.stop(timeout=60)
    stop.set()
    t.join()
    consumer.close()
    assert code == 0
    assert "krabka broker stopped" in broker.log()
    broker.start()
    got = consume_confluent(broker.bootstrap, "busy", 1)
    assert got[0].value() == b"first"
