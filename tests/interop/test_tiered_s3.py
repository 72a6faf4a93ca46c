"""Tiered storage (KIP-405) on object stores, against the real broker: the S3
tier on moto (round trip, restart, kill -9 during copies, the store taken
away and brought back, WORM archive mode audited by `krabka-worm-verify`
against the chain heads the broker published), the GCS tier on
fake-gcs-server, and the startup refusals of bad tier settings."""

import logging
import os
import subprocess
import time
import uuid

import pytest

from conftest import KRABKA_BIN, kcat_path
from helpers import consume_confluent, create_topic, make_records, produce_confluent, wait_for
from objstore import (
    FakeGcsServer, GcsXmlShim, MotoServer, TcpProxy, create_bucket, create_gcs_bucket,
    create_locked_bucket, gcs_object_names, list_keys, s3_broker_settings, s3_client,
)
from test_tiered import loaded_watermark, local_logs, low_watermark, read_all_and_compare, read_with_kcat
from test_tiered_reads import offsets_for_times

RECORDS = 50_000

TOPIC_CONFIG = {
    "segment.bytes": "65536",
    "remote.storage.enable": "true",
    "local.retention.bytes": "131072",
}

TIERED = {
    "remote.log.storage.system.enable": "true",
    "remote.log.manager.task.interval.ms": "300",
}

WORM_VERIFY_BIN = os.environ.get(
    "KRABKA_WORM_VERIFY_BIN", os.path.join(os.path.dirname(KRABKA_BIN), "krabka-worm-verify")
)


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory):
    """The shared moto of `scripts/test`, or one of this session's own."""
    endpoint = os.environ.get("KRABKA_TEST_S3_ENDPOINT")
    if endpoint:
        yield endpoint
        return
    server = MotoServer(tmp_path_factory.mktemp("moto"))
    yield server.endpoint
    server.stop()


@pytest.fixture(scope="session")
def gcs_endpoint(tmp_path_factory):
    """The shared fake-gcs-server of `scripts/test`, or one of this session's own."""
    endpoint = os.environ.get("KRABKA_TEST_GCS_ENDPOINT")
    server = None
    if not endpoint:
        server = FakeGcsServer(tmp_path_factory.mktemp("gcs"))
        endpoint = server.endpoint
    yield endpoint
    if server:
        server.stop()


def bucket_name(tag):
    return "krabka-%s-%s" % (tag, uuid.uuid4().hex[:10])


def segment_logs(keys, topic):
    """The remote `.log` objects of partition 0 of `topic`, by name."""
    return sorted(k.rsplit("/", 1)[1] for k in keys if ("/%s-0-" % topic) in k and k.endswith(".log"))


def assert_each_segment_once(logs):
    starts = [n.split("-")[0] for n in logs]
    assert len(starts) == len(set(starts)), "a segment is in the remote tier twice: %s" % logs


def test_s3_round_trip_restart_and_kill9(broker_factory, s3_endpoint):
    bucket = bucket_name("s3")
    create_bucket(s3_endpoint, bucket)
    settings = dict(TIERED, **s3_broker_settings(s3_endpoint, bucket))
    broker = broker_factory(settings)
    topic = "tiered-s3"
    create_topic(broker.bootstrap, topic, config=TOPIC_CONFIG)
    records = make_records(RECORDS, "s")
    # Ten milliseconds apart, an hour ago, so lookups by time have one answer.
    base = int(time.time() * 1000) - 3_600_000
    timestamps = [base + 10 * i for i in range(RECORDS)]
    produce_confluent(broker.bootstrap, topic, records, extra={"batch.size": 32768},
                      timestamps=timestamps)

    def check_time_lookups():
        # Offsets by timestamp that land in remote data (the first segments
        # left local disk), exactly on a record and between two records.
        assert int(local_logs(broker, topic)[0].split(".")[0]) > 4321
        assert offsets_for_times(broker.bootstrap, topic, timestamps[1234]) == 1234
        assert offsets_for_times(broker.bootstrap, topic, timestamps[4321] - 5) == 4321
        assert offsets_for_times(broker.bootstrap, topic, 0) == 0

    remote = lambda: segment_logs(list_keys(s3_endpoint, bucket, "tier/"), topic)
    wait_for(lambda: len(remote()) >= 10 and len(local_logs(broker, topic)) <= 4,
             timeout=120, what="segments to move to S3")
    assert len(remote()) > len(local_logs(broker, topic))
    assert low_watermark(broker.bootstrap, topic) == (0, RECORDS)
    # Every index travels with the segment.
    keys = list_keys(s3_endpoint, bucket, "tier/")
    first = [k for k in keys if k.endswith("/" + remote()[0])][0][: -len(".log")]
    for suffix in (".index", ".timeindex", ".leader_epoch_checkpoint"):
        assert first + suffix in keys

    read_all_and_compare(broker, topic, records)
    if kcat_path():
        read_with_kcat(broker, topic, records)
    check_time_lookups()

    broker.restart()
    wait_for(lambda: loaded_watermark(broker.bootstrap, topic), timeout=60, what="remote metadata to load")
    read_all_and_compare(broker, topic, records)
    check_time_lookups()
    assert_each_segment_once(remote())

    # kill -9 in the middle of copying more, then restart: each segment once.
    more = make_records(20_000, "s2")
    copied = len(remote())
    produce_confluent(broker.bootstrap, topic, more, extra={"batch.size": 32768})
    wait_for(lambda: len(remote()) > copied, timeout=120, interval=0.01, what="a new copy")
    broker.kill9()
    broker.start()
    wait_for(lambda: loaded_watermark(broker.bootstrap, topic), timeout=60, what="remote metadata to load")
    wait_for(lambda: len(local_logs(broker, topic)) <= 4, timeout=120, what="copies to catch up")
    assert_each_segment_once(remote())
    read_all_and_compare(broker, topic, records + more)


def fetch_errors_seen(bootstrap, topic, seconds):
    """kafka-python's consumer from offset 0; the fetch errors it logged."""
    from kafka import KafkaConsumer, TopicPartition as KTopicPartition

    seen = []

    class Catch(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    logger = logging.getLogger("kafka.consumer.fetcher")
    handler = Catch(level=logging.DEBUG)
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             fetch_max_wait_ms=200)
    got = 0
    try:
        tp = KTopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.time() + seconds
        while time.time() < deadline:
            got += sum(len(v) for v in consumer.poll(timeout_ms=200).values())
    finally:
        consumer.close()
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    return got, [m for m in seen if "Error fetching partition" in m]


def test_s3_store_down_then_back(broker_factory, tmp_path):
    """The S3 server unreachable, then hung, then back (a dedicated moto behind a proxy)."""
    moto = MotoServer(tmp_path)
    proxy = TcpProxy(moto.port)
    try:
        bucket = bucket_name("down")
        create_bucket(moto.endpoint, bucket)
        settings = dict(TIERED, **s3_broker_settings(proxy.endpoint, bucket))
        settings.update({
            "rsm.config.retries": "1",
            "rsm.config.request.timeout.ms": "1000",
            "rsm.config.retry.timeout.ms": "1000",
            "remote.fetch.max.wait.ms": "2000",
            "remote.log.manager.task.retry.backoff.max.ms": "2000",
        })
        broker = broker_factory(settings)
        topic = "tiered-down"
        create_topic(broker.bootstrap, topic, config=TOPIC_CONFIG)
        before = make_records(15_000, "b")
        produce_confluent(broker.bootstrap, topic, before, extra={"batch.size": 32768})
        remote = lambda: segment_logs(list_keys(moto.endpoint, bucket, "tier/"), topic)
        wait_for(lambda: len(remote()) >= 5 and len(local_logs(broker, topic)) <= 4,
                 timeout=120, what="segments to move to S3")

        # Unreachable: copying stops, local data stays past local retention,
        # remote-only offsets get a retriable error, local data is served.
        proxy.refuse()
        time.sleep(1)  # a copy in flight fails or finishes
        copied = len(remote())
        during = make_records(15_000, "d")
        produce_confluent(broker.bootstrap, topic, during, extra={"batch.size": 32768})
        time.sleep(3)
        assert broker.alive()
        assert len(local_logs(broker, topic)) > 6, "local segments were deleted without a copy"
        assert len(remote()) == copied
        latest = consume_confluent(broker.bootstrap, topic, 1000, offset=len(before) + len(during) - 1000)
        assert [m.value() for m in latest] == [v for _, v, _ in during[-1000:]]
        got, errors = fetch_errors_seen(broker.bootstrap, topic, 4)
        assert got == 0
        assert any("KafkaStorageError" in e for e in errors), errors[:5]

        # Hung: every call times out; the broker stays up and serves local data.
        proxy.stall()
        time.sleep(3)
        assert broker.alive()
        latest = consume_confluent(broker.bootstrap, topic, 100, offset=len(before) + len(during) - 100)
        assert len(latest) == 100

        # Back: the copies catch up, local disk shrinks, everything reads back.
        proxy.forward()
        wait_for(lambda: len(local_logs(broker, topic)) <= 4, timeout=120, what="copies to catch up")
        assert len(remote()) > copied
        assert_each_segment_once(remote())
        read_all_and_compare(broker, topic, before + during)
    finally:
        proxy.close()
        moto.stop()


def run_verify(endpoint, bucket, public_key, heads=None):
    cmd = [WORM_VERIFY_BIN, "--s3-bucket", bucket, "--endpoint", endpoint, "--region", "us-east-1",
           "--path-style", "--allow-http", "--prefix", "tier", "--trusted-key", public_key,
           "--no-progress", "--retries", "1"]
    if heads:
        cmd += ["--expect-head", heads]
    env = dict(os.environ, AWS_ACCESS_KEY_ID="krabka", AWS_SECRET_ACCESS_KEY="krabka")
    return subprocess.run(cmd, capture_output=True, timeout=120, env=env)


def worm_heads(broker, topic):
    result = subprocess.run(
        [KRABKA_BIN, "remote-metadata", "worm-heads", "--bootstrap", broker.bootstrap, "--topic", topic,
         "--timeout-secs", "30"],
        capture_output=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode()


def signing_key(tmp_path):
    """A fresh Ed25519 secret (32 random bytes as hex) and its public key."""
    secret = os.urandom(32).hex()
    path = tmp_path / "signing.key"
    path.write_text(secret + "\n")
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
    public = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(secret)).public_key()
    return str(path), public.public_bytes(Encoding.Raw, PublicFormat.Raw).hex()


def test_s3_worm_archive_verifies_and_truncation_is_caught(broker_factory, s3_endpoint, tmp_path):
    bucket = bucket_name("worm")
    create_locked_bucket(s3_endpoint, bucket)
    key_file, public_key = signing_key(tmp_path)
    settings = dict(TIERED, **s3_broker_settings(s3_endpoint, bucket))
    settings.update({
        "rsm.config.worm.enable": "true",
        "rsm.config.worm.signing.key.file": key_file,
    })
    broker = broker_factory(settings)
    topic = "tiered-worm"
    create_topic(broker.bootstrap, topic, config=TOPIC_CONFIG)
    records = make_records(20_000, "w")
    produce_confluent(broker.bootstrap, topic, records, extra={"batch.size": 32768})
    remote = lambda: segment_logs(list_keys(s3_endpoint, bucket, "tier/"), topic)
    wait_for(lambda: len(remote()) >= 5 and len(local_logs(broker, topic)) <= 4,
             timeout=120, what="segments to move to the archive")
    # The archive is read back like any tier.
    read_all_and_compare(broker, topic, records)

    # The broker published each new chain head; the newest matches the archive.
    def heads_now():
        text = worm_heads(broker, topic)
        manifests = [k for k in list_keys(s3_endpoint, bucket, "tier/") if k.endswith(".manifest")]
        import json
        lines = [json.loads(l) for l in text.splitlines() if l.strip()]
        return (text, lines) if lines and lines[0]["seq"] == len(manifests) - 1 else None
    text, lines = wait_for(heads_now, timeout=60, what="the newest chain head to be published")
    assert len(lines) == 1 and lines[0]["topic"] == topic and lines[0]["partition"] == 0
    heads = tmp_path / "heads.jsonl"
    heads.write_text(text)

    result = run_verify(s3_endpoint, bucket, public_key, str(heads))
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
    assert b"VERIFIED" in result.stdout

    # Tamper: drop the newest manifest (a delete marker; the locked version
    # stays, but a listing no longer shows it). The chain alone still looks
    # whole; against the published head the cut-off tail is caught.
    manifests = sorted(k for k in list_keys(s3_endpoint, bucket, "tier/") if k.endswith(".manifest"))
    s3_client(s3_endpoint).delete_object(Bucket=bucket, Key=manifests[-1])
    alone = run_verify(s3_endpoint, bucket, public_key)
    assert alone.returncode == 0, alone.stdout.decode() + alone.stderr.decode()
    against_head = run_verify(s3_endpoint, bucket, public_key, str(heads))
    assert against_head.returncode == 4, against_head.stdout.decode() + against_head.stderr.decode()
    assert b"NOT VERIFIED" in against_head.stdout


def test_s3_worm_refused_without_locked_bucket(broker_factory, s3_endpoint, tmp_path):
    bucket = bucket_name("plain")
    create_bucket(s3_endpoint, bucket)
    key_file, _ = signing_key(tmp_path)
    settings = dict(TIERED, **s3_broker_settings(s3_endpoint, bucket))
    settings.update({"rsm.config.worm.enable": "true", "rsm.config.worm.signing.key.file": key_file})
    broker = broker_factory(settings, start=False)
    try:
        broker.start()
    except RuntimeError:
        pass  # it may exit before it listens
    code = broker.process.wait(timeout=60) if broker.process else None
    log = broker.log()
    broker._closed()
    assert code not in (None, 0), log
    assert "WORM" in log and "versioning" in log, log


@pytest.mark.parametrize("setting,value", [
    ("rsm.config.s3.bukket", "x"),
    ("rsm.config.s3.path.style.access", "maybe"),
    ("krabka.remote.log.storage.manager", "tape"),
])
def test_bad_tier_settings_refused_at_startup(tmp_path, setting, value):
    cmd = [KRABKA_BIN, "serve", "--override", "log.dirs=%s" % tmp_path,
           "--override", "remote.log.storage.system.enable=true",
           "--override", "krabka.remote.log.storage.manager=s3",
           "--override", "rsm.config.s3.bucket=b",
           "--override", "%s=%s" % (setting, value)]
    result = subprocess.run(cmd, capture_output=True, timeout=30)
    assert result.returncode == 2
    assert setting.encode() in result.stderr


def test_gcs_round_trip(broker_factory, gcs_endpoint):
    port = int(gcs_endpoint.rsplit(":", 1)[1])
    shim = GcsXmlShim(port)
    try:
        bucket = bucket_name("gcs")
        create_gcs_bucket(gcs_endpoint, bucket)
        settings = dict(TIERED, **{
            "krabka.remote.log.storage.manager": "gcs",
            "rsm.config.gcs.bucket": bucket,
            "rsm.config.gcs.endpoint": shim.endpoint,
            "rsm.config.gcs.allow.http": "true",
            "rsm.config.gcs.anonymous": "true",
            "rsm.config.prefix": "tier",
        })
        broker = broker_factory(settings)
        topic = "tiered-gcs"
        create_topic(broker.bootstrap, topic, config=TOPIC_CONFIG)
        records = make_records(15_000, "g")
        produce_confluent(broker.bootstrap, topic, records, extra={"batch.size": 32768})
        remote = lambda: segment_logs(gcs_object_names(gcs_endpoint, bucket, "tier/"), topic)
        wait_for(lambda: len(remote()) >= 5 and len(local_logs(broker, topic)) <= 4,
                 timeout=120, what="segments to move to GCS")
        read_all_and_compare(broker, topic, records)
        if kcat_path():
            read_with_kcat(broker, topic, records)
    finally:
        shim.close()
