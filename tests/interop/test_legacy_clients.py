"""Old clients against `krabka.legacy.protocol.enable` (issue 20, item 2).

Kafka 4 removed the request versions of KIP-896 and message formats v0/v1;
clients still in the field speak them. With the setting on, Krabka serves
what Kafka 3.9 served: kcat (librdkafka) forced to Kafka 0.8.2 and 0.10.0
(Produce v0/v2 with message formats v0/v1, compressed or not; Fetch v0/v2,
compressed batches down-converted to wrappers of their codec; ListOffsets
v0), sarama 1.22 with its defaults (Kafka 0.8.2: OffsetCommit
v1 commits that a restart resumes from), and segmentio/kafka-go 0.2
(CreateTopics v0, Produce v2, Fetch v1). With it off, the same clients are
refused as Kafka 4 refuses them: the connection is closed.

The Go clients live in tests/legacy (one go.mod pinning their versions)
and are built here with `go build`; without `go` these tests skip.
"""

import json
import os
import shutil
import subprocess

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions

from conftest import kcat_path
from helpers import admin, create_topic, raw_call, stored_batches, stored_codecs, wait_for

GO = shutil.which("go")
pytestmark = pytest.mark.skipif(GO is None, reason="go is not installed")

LEGACY = {"krabka.legacy.protocol.enable": "true"}
GO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "legacy")
REFUSED = "and unsupported version"


@pytest.fixture(scope="module")
def go_clients(tmp_path_factory):
    out = tmp_path_factory.mktemp("legacy-go")
    env = dict(os.environ)
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -mod=mod").strip()
    built = subprocess.run([GO, "build", "-o", str(out) + os.sep, "./..."], cwd=GO_DIR, env=env,
                           capture_output=True, timeout=900)
    assert built.returncode == 0, built.stderr.decode()
    return {name: str(out / name) for name in ("sarama", "kafkago")}


def run(cmd, timeout=90, check=True):
    result = subprocess.run(cmd, capture_output=True, timeout=timeout)
    if check:
        assert result.returncode == 0, "%s failed:\n%s" % (cmd, result.stderr.decode())
    return result


def old_kcat(bootstrap, fallback, *args, stdin=None, check=True, timeout=60):
    """kcat with librdkafka pinned to an old broker version: no ApiVersions,
    the request versions of `fallback`."""
    result = subprocess.run(
        [kcat_path(), "-b", bootstrap, "-X", "api.version.request=false",
         "-X", "broker.version.fallback=" + fallback, *args],
        input=stdin, capture_output=True, timeout=timeout)
    if check:
        assert result.returncode == 0, result.stderr.decode()
    return result


def api_ranges(bootstrap):
    from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse

    answer = raw_call(bootstrap, ApiVersionsRequest[3](client_software_name="t",
                                                        client_software_version="1"),
                      ApiVersionsResponse)
    return {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}


def test_api_versions_advertise_legacy_ranges_only_when_enabled(broker_factory):
    legacy = broker_factory(LEGACY)
    plain = broker_factory()
    on, off = api_ranges(legacy.bootstrap), api_ranges(plain.bootstrap)
    # Produce, Fetch, ListOffsets, Metadata, CreateTopics, DeleteTopics,
    # DescribeConfigs, OffsetCommit, OffsetFetch, OffsetForLeaderEpoch,
    # DescribeLogDirs, WriteTxnMarkers and the ACL APIs.
    assert on[0] == (0, 13) and off[0] == (0, 13)  # Produce: KAFKA-18659 either way
    assert on[1] == (0, 18) and off[1] == (4, 18)
    assert on[2] == (0, 11) and off[2] == (1, 11)
    assert on[3] == off[3] == (0, 13)
    assert on[19] == (0, 7) and off[19] == (2, 7)
    assert on[20] == (0, 6) and off[20] == (1, 6)
    assert on[32] == (0, 4) and off[32] == (1, 4)
    assert on[23] == (0, 4) and off[23] == (2, 4)  # OffsetForLeaderEpoch
    assert on[35] == (0, 5) and off[35] == (1, 5)  # DescribeLogDirs
    assert on[8] == (0, 10) and off[8] == (2, 10)
    assert on[9] == (0, 10) and off[9] == (1, 10)
    assert on[27] == (0, 2) and off[27] == (1, 2)  # WriteTxnMarkers
    assert on[28] == off[28] == (0, 6)  # TxnOffsetCommit
    for acls in (29, 30, 31):  # DescribeAcls, CreateAcls, DeleteAcls
        assert on[acls] == (0, 3) and off[acls] == (1, 3)
    # Everything else is the same.
    differ = (1, 2, 8, 9, 19, 20, 23, 27, 29, 30, 31, 32, 35)
    assert {k: v for k, v in on.items() if k not in differ} == \
        {k: v for k, v in off.items() if k not in differ}


@pytest.mark.parametrize("fallback", ["0.8.2.2", "0.10.0.0"])
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
def test_kcat_with_old_versions_produces_and_consumes(broker_factory, fallback, codec):
    broker = broker_factory(LEGACY)
    topic = "old-kcat-%s-%s" % (fallback.replace(".", ""), codec)
    create_topic(broker.bootstrap, topic)
    lines = ["%d:line %d %s" % (i % 10, i, "x" * (i % 30)) for i in range(2000)]
    old_kcat(broker.bootstrap, fallback, "-P", "-t", topic, "-p", "0", "-K", ":", "-z", codec,
             stdin=("\n".join(lines) + "\n").encode())
    out = old_kcat(broker.bootstrap, fallback, "-C", "-t", topic, "-p", "0", "-o", "beginning",
                   "-e", "-K", ":", "-f", "%k:%s:%o\n").stdout.decode().splitlines()
    assert [line.rsplit(":", 1)[0] for line in out] == lines
    assert [int(line.rsplit(":", 1)[1]) for line in out] == list(range(len(lines)))
    # Message formats v0/v1 became v2 batches of the codec the client used.
    assert stored_codecs(broker.data_dir, topic) == {codec}
    log = broker.log()
    assert REFUSED not in log


def v2_batch(values, codec):
    """One v2 batch of `values` with codec id `codec`, keyed k0, k1, ..."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    for i, value in enumerate(values):
        builder.append(i, timestamp=1000 + i, key=b"k%d" % i, value=value, headers=[])
    return bytes(builder.build())


def old_fetch(bootstrap, version, topic, offset):
    """The message set a Fetch of `version` (v0-v3) answers from `offset`."""
    from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse

    F = FetchRequest.FetchTopic
    r = raw_call(bootstrap, FetchRequest[version](
        replica_id=-1, max_wait_ms=100, min_bytes=0, max_bytes=1 << 20,
        topics=[F(topic=topic, partitions=[F.FetchPartition(partition=0, fetch_offset=offset,
                                                             partition_max_bytes=1 << 20)])]),
        FetchResponse)
    p = r.responses[0].partitions[0]
    assert p.error_code == 0, p
    return bytes(p.records)


@pytest.mark.parametrize("codec,codec_id", [("gzip", 1), ("snappy", 2), ("lz4", 3)])
def test_old_fetches_keep_each_batch_codec(broker_factory, codec, codec_id):
    """Down-conversion keeps a batch's codec, as Kafka 3.9 does: a compressed
    v2 batch reaches Fetch v0 (magic 0) and v2 (magic 1) as one wrapper of
    that codec holding all its records, which old readers (kafka-python's,
    and kcat's librdkafka forced to 0.8.2 / 0.10.0) read back in order."""
    from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
    from kafka.record.memory_records import MemoryRecords

    broker = broker_factory(LEGACY)
    topic = "old-fetch-" + codec
    create_topic(broker.bootstrap, topic)
    values = [b"value %d %s" % (i, b"x" * (i % 50)) for i in range(300)]
    T = ProduceRequest.TopicProduceData
    for part in (values[:100], values[100:]):
        r = raw_call(broker.bootstrap, ProduceRequest[9](
            transactional_id=None, acks=-1, timeout_ms=5000,
            topic_data=[T(name=topic, partition_data=[
                T.PartitionProduceData(index=0, records=v2_batch(part, codec_id))])]),
            ProduceResponse)
        assert r.responses[0].partition_responses[0].error_code == 0
    assert stored_codecs(broker.data_dir, topic) == {codec}
    for version, magic in ((0, 0), (2, 1)):
        records = MemoryRecords(old_fetch(broker.bootstrap, version, topic, 150))
        wrappers = []
        while records.has_next():
            wrappers.append(records.next_batch())
        # Only the second batch holds offset 150: one wrapper, all 200 records.
        assert [(w.magic, w.compression_type) for w in wrappers] == [(magic, codec_id)]
        if codec == "lz4" and magic == 0:
            # kafka-python reads magic 0 LZ4 (KAFKA-3160's header checksum)
            # only with xxhash installed; kcat reads it below.
            continue
        inner = list(wrappers[0])
        assert [m.offset for m in inner] == list(range(100, 300))
        assert [m.value for m in inner] == values[100:]
        assert [m.key for m in inner] == [b"k%d" % i for i in range(200)]
        if magic == 1:
            assert [m.timestamp for m in inner] == [1000 + i for i in range(200)]
    for fallback in ("0.8.2.2", "0.10.0.0"):
        out = old_kcat(broker.bootstrap, fallback, "-C", "-t", topic, "-p", "0", "-o", "150", "-e",
                       "-f", "%o:%s\n").stdout.decode().splitlines()
        assert out == ["%d:%s" % (i, values[i].decode()) for i in range(150, 300)], fallback
    assert REFUSED not in broker.log()


def test_kcat_with_old_versions_is_refused_when_disabled(broker):
    create_topic(broker.bootstrap, "old-kcat-off")
    produced = old_kcat(broker.bootstrap, "0.8.2.2", "-P", "-t", "old-kcat-off", "-p", "0",
                        "-X", "message.timeout.ms=3000", stdin=b"a\nb\n", check=False)
    assert produced.returncode != 0 or b"fail" in produced.stderr.lower(), produced.stderr
    assert "Received request for api with key 0 (Produce) and unsupported version 0" in broker.log()
    assert stored_batches(broker.data_dir, "old-kcat-off") == []


def sarama_consume(go_clients, broker, topic, group, count):
    out = run([go_clients["sarama"], "consume", broker.bootstrap, topic, group, str(count)])
    return json.loads(out.stdout)


def test_sarama_defaults_produce_consume_and_commit_across_a_restart(broker_factory, go_clients):
    broker = broker_factory(LEGACY)
    topic = "old-sarama"
    create_topic(broker.bootstrap, topic)
    for codec in ("none", "gzip", "snappy"):
        run([go_clients["sarama"], "produce", broker.bootstrap, topic, "10", codec])
    assert stored_codecs(broker.data_dir, topic) == {"none", "gzip", "snappy"}
    expected = ["%s-%d" % (codec, i) for codec in ("none", "gzip", "snappy") for i in range(10)]

    first = sarama_consume(go_clients, broker, topic, "sarama-group", 12)
    assert first == {"first": 0, "values": expected[:12]}
    # OffsetCommit v1 reached the group coordinator, and survives a restart.
    broker.restart()
    second = sarama_consume(go_clients, broker, topic, "sarama-group", 18)
    assert second == {"first": 12, "values": expected[12:]}
    client = admin(broker.bootstrap)
    committed = client.list_consumer_group_offsets([ConsumerGroupTopicPartitions("sarama-group")])
    offsets = committed["sarama-group"].result().topic_partitions
    assert [(tp.topic, tp.partition, tp.offset) for tp in offsets] == [(topic, 0, 30)]
    assert REFUSED not in broker.log()


def test_sarama_defaults_are_refused_when_disabled(broker, go_clients):
    create_topic(broker.bootstrap, "old-sarama-off")
    result = run([go_clients["sarama"], "produce", broker.bootstrap, "old-sarama-off", "1", "none"],
                 check=False)
    assert result.returncode != 0
    assert "Received request for api with key 0 (Produce) and unsupported version 0" in broker.log()


def test_sarama_fetch_needs_downconversion(broker_factory, go_clients):
    """A topic with message.downconversion.enable=false answers old fetches
    UNSUPPORTED_VERSION, as Kafka 3.9 did."""
    broker = broker_factory(LEGACY)
    create_topic(broker.bootstrap, "old-no-down", config={"message.downconversion.enable": "false"})
    run([go_clients["sarama"], "produce", broker.bootstrap, "old-no-down", "3", "none"])
    result = run([go_clients["sarama"], "consume", broker.bootstrap, "old-no-down", "g", "3"],
                 check=False, timeout=60)
    assert result.returncode != 0
    assert b"version" in result.stderr.lower(), result.stderr


def test_kafka_go_0_2_creates_produces_and_consumes(broker_factory, go_clients):
    broker = broker_factory(LEGACY)
    topic = "old-kafka-go"
    run([go_clients["kafkago"], "create", broker.bootstrap, topic])
    wait_for(lambda: topic in admin(broker.bootstrap).list_topics(timeout=10).topics,
             what="the topic CreateTopics v0 made")
    run([go_clients["kafkago"], "produce", broker.bootstrap, topic, "20"])
    out = json.loads(run([go_clients["kafkago"], "consume", broker.bootstrap, topic, "20"]).stdout)
    assert out == {"offsets": list(range(20)), "values": ["kafka-go-%d" % i for i in range(20)]}
    assert stored_codecs(broker.data_dir, topic) == {"none"}
    assert REFUSED not in broker.log()


def test_kafka_go_0_2_is_refused_when_disabled(broker, go_clients):
    result = run([go_clients["kafkago"], "create", broker.bootstrap, "old-kafka-go-off"],
                 check=False, timeout=60)
    assert result.returncode != 0
    assert "Received request for api with key 19 (CreateTopics) and unsupported version 0" in broker.log()


def test_acl_apis_v0_manage_only_literal_acls(broker_factory):
    """DescribeAcls, CreateAcls and DeleteAcls v0 (admin tools before Kafka
    2.0) predate resource patterns: what they create is LITERAL, and their
    filters find only LITERAL ACLs, so a PREFIXED one made with v1 is
    neither listed nor deleted by them. Refused without the setting."""
    from kafka.protocol.admin import (
        CreateAclsRequest as C, CreateAclsResponse, DeleteAclsRequest as X, DeleteAclsResponse,
        DescribeAclsRequest as D, DescribeAclsResponse,
    )
    from raw_client import RawConnection
    broker = broker_factory(dict(LEGACY, **{
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
    }))
    # Resource type TOPIC (2), operation READ (3), permission ALLOW (3);
    # filters of ANY (1).
    literal = C.AclCreation(resource_type=2, resource_name="t0", principal="User:alice", host="*",
                            operation=3, permission_type=3)
    prefixed = C.AclCreation(resource_type=2, resource_name="pre", resource_pattern_type=4,
                             principal="User:bob", host="*", operation=3, permission_type=3)
    any_v0 = dict(resource_type_filter=1, resource_name_filter=None, principal_filter=None,
                  host_filter=None, operation=1, permission_type=1)
    with RawConnection(broker.bootstrap) as c:
        _, created = c.call(C[0](creations=[literal]), CreateAclsResponse)
        assert [r.error_code for r in created.results] == [0]
        _, created = c.call(C[1](creations=[prefixed]), CreateAclsResponse)
        assert [r.error_code for r in created.results] == [0]
        _, described = c.call(D[0](**any_v0), DescribeAclsResponse)
        assert described.error_code == 0
        assert [(r.resource_name, [(a.principal, a.operation) for a in r.acls])
                for r in described.resources] == [("t0", [("User:alice", 3)])]
        _, deleted = c.call(X[0](filters=[X.DeleteAclsFilter(**any_v0)]), DeleteAclsResponse)
        assert [[(m.error_code, m.resource_name, m.principal) for m in f.matching_acls]
                for f in deleted.filter_results] == [[(0, "t0", "User:alice")]]
        # v1 sees what is left: the PREFIXED ACL only.
        _, left = c.call(D[1](pattern_type_filter=1, **any_v0), DescribeAclsResponse)
        assert [(r.resource_name, r.pattern_type) for r in left.resources] == [("pre", 4)]

    plain = broker_factory()
    with RawConnection(plain.bootstrap) as c:
        with pytest.raises((ConnectionError, OSError)):
            c.call(D[0](**any_v0), DescribeAclsResponse)
    assert "Received request for api with key 29 (DescribeAcls) and unsupported version 0" in plain.log()
