"""Kafka's own log reader (kafka-dump-log, DumpLogSegments) on Krabka's files.

A Krabka broker with small segments and a dense index takes records from
librdkafka (several codecs, an idempotent producer, committed and aborted
transactions), shuts down cleanly, and then Kafka's reader goes over its
partition directory:

- ``--deep-iteration --print-data-log`` on every segment: every batch is
  valid (CRC), has the codec it was sent with, and the records are exactly
  the ones produced, at the offsets the producer was told, with the commit
  and abort markers where the transactions ended;
- ``--verify-index-only`` and ``--index-sanity-check`` on every offset and
  time index: no mismatch against the segment, no out-of-order timestamp;
- the producer snapshots agree with the last batch of each producer in the
  log, and the transaction index lists exactly the aborted transaction.
"""

import os
import re

import pytest

import kafka_ref
from conftest import start_krabka

TOPIC = "dump-log"
DUMP = "org.apache.kafka.tools.DumpLogSegments"
WAIT = 60


def produce(bootstrap):
    """Writes the records; returns ``{offset: value}`` of the data records and
    the offsets of the aborted ones."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(TOPIC, 1, 1, config={
        "segment.bytes": "4096", "index.interval.bytes": "256"})])
    fs[TOPIC].result(WAIT)

    delivered = {}

    def remember(err, msg):
        assert err is None, err
        delivered[msg.offset()] = msg.value()

    base = {"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 8, "log_level": 2}
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        p = Producer(dict(base, **{"compression.codec": codec, "enable.idempotence": True}))
        for i in range(48):
            value = ("%s-%03d-" % (codec, i)).encode() + b"abcdefgh" * (i % 9)
            p.produce(TOPIC, value=value, key=b"k%d" % (i % 5), partition=0, on_delivery=remember)
            if i % 8 == 7:
                p.flush(WAIT)
        assert p.flush(WAIT) == 0

    aborted = []
    t = Producer(dict(base, **{"transactional.id": "dump-log-txn"}))
    t.init_transactions(WAIT)
    for n, commit in enumerate((True, False, True)):
        t.begin_transaction()
        before = set(delivered)
        for i in range(6):
            t.produce(TOPIC, value=b"txn-%d-%d" % (n, i), partition=0, on_delivery=remember)
        assert t.flush(WAIT) == 0
        if commit:
            t.commit_transaction(WAIT)
        else:
            t.abort_transaction(WAIT)
            aborted = sorted(set(delivered) - before)
    return delivered, aborted


@pytest.fixture(scope="module")
def krabka_files(tmp_path_factory):
    data = tmp_path_factory.mktemp("dump-log") / "data"
    broker = start_krabka(data)
    try:
        records, aborted = produce(broker.bootstrap)
    finally:
        code = broker.stop()
    assert code == 0, broker.log()
    part = os.path.join(str(data), TOPIC + "-0")
    return part, records, aborted


def files(part, suffix):
    return sorted(os.path.join(part, f) for f in os.listdir(part) if f.endswith(suffix))


def dump(*args):
    return kafka_ref.run_tool(DUMP, list(args), timeout=180).stdout


def dump_each(paths, *args):
    """One run of the reader over ``paths``; its output split per file."""
    out = dump(*args, "--files", ",".join(paths))
    sections, current = {}, None
    for line in out.splitlines():
        if line.startswith("Dumping "):
            current = line[len("Dumping "):].strip()
            sections[current] = []
        elif current is not None:
            sections[current].append(line)
    assert set(sections) == set(paths), out[:3000]
    return {k: "\n".join(v) for k, v in sections.items()}


BATCH = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) baseSequence: (-?\d+) lastSequence: (-?\d+) "
                   r"producerId: (-?\d+) producerEpoch: (-?\d+) .*?isTransactional: (\w+) isControl: (\w+) .*?"
                   r"compresscodec: (\w+) crc: \d+ isvalid: (\w+)$")
RECORD = re.compile(r"^\| offset: (\d+) .*?(?:payload: (.*)|endTxnMarker: (\w+) .*)$")


def parse_log(text):
    batches, records, markers = [], {}, {}
    for line in text.splitlines():
        m = BATCH.match(line)
        if m:
            batches.append(m.groups())
            continue
        m = RECORD.match(line)
        if m:
            offset = int(m.group(1))
            if m.group(3):
                markers[offset] = m.group(3)
            else:
                records[offset] = m.group(2)
    return batches, records, markers


def test_segments_read_back_as_produced(krabka_files):
    part, produced, aborted = krabka_files
    logs = files(part, ".log")
    assert len(logs) >= 3, "expected several segments, got %s" % logs
    out = dump("--deep-iteration", "--print-data-log", "--files", ",".join(logs))
    batches, records, markers = parse_log(out)
    assert batches, out[:3000]
    assert all(b[10] == "true" for b in batches), "a batch failed its CRC check"
    assert records == {o: v.decode() for o, v in produced.items()}
    codecs = {b[9] for b in batches if b[8] == "false"}
    assert codecs == {"none", "gzip", "snappy", "lz4", "zstd"}, codecs
    assert sorted(markers.values()) == ["ABORT", "COMMIT", "COMMIT"]
    abort_at = [o for o, kind in markers.items() if kind == "ABORT"][0]
    assert aborted and max(aborted) < abort_at
    # Offsets are dense: every offset is a record or a marker.
    everything = sorted(set(records) | set(markers))
    assert everything == list(range(everything[0], everything[-1] + 1))


def test_indexes_verify_against_segments(krabka_files):
    part, _, _ = krabka_files
    indexes = files(part, ".index") + files(part, ".timeindex")
    assert len(indexes) >= 6
    assert any(os.path.getsize(f) > 0 for f in files(part, ".index")), "index.interval.bytes=256 wrote no entry"
    out = dump("--verify-index-only", "--files", ",".join(indexes))
    bad = [l for l in out.splitlines() if re.search(r"mismatch|not found|out of order|Mismatches", l, re.I)]
    assert not bad, out
    out = dump("--index-sanity-check", "--files", ",".join(indexes))
    for f in indexes:
        assert "%s passed sanity check." % f in out, out


def test_offset_index_entries_point_at_batches(krabka_files):
    part, _, _ = krabka_files
    indexes = files(part, ".index")
    logs = dump_each([i[:-len(".index")] + ".log" for i in indexes])
    entries = dump_each(indexes)
    for index in indexes:
        starts = {}
        for line in logs[index[:-len(".index")] + ".log"].splitlines():
            m = re.match(r"^baseOffset: (\d+) lastOffset: (\d+) .*? position: (\d+) ", line)
            if m:
                starts[int(m.group(3))] = (int(m.group(1)), int(m.group(2)))
        for offset, position in re.findall(r"^offset: (\d+) position: (\d+)$", entries[index], re.M):
            assert int(position) in starts, "%s: entry %s -> %s is not a batch start" % (index, offset, position)
            base, last = starts[int(position)]
            # Kafka indexes a batch by its last offset (LogSegment.append).
            assert int(offset) == last, "%s: entry %s points at batch %d..%d" % (index, offset, base, last)


def test_producer_snapshots_match_the_log(krabka_files):
    part, _, _ = krabka_files
    snapshots = files(part, ".snapshot")
    assert snapshots, "no producer snapshot in %s" % os.listdir(part)
    batches, _, _ = parse_log(dump("--deep-iteration", "--files", ",".join(files(part, ".log"))))
    last = {}
    for b in batches:
        if b[8] == "false" and int(b[5]) >= 0:
            last[int(b[5])] = (int(b[6]), int(b[4]), int(b[1]))  # epoch, last sequence, last offset
    out = dump("--files", snapshots[-1])
    got = {}
    for m in re.finditer(r"producerId: (\d+) producerEpoch: (\d+) .*?lastSequence: (-?\d+) lastOffset: (\d+)", out):
        got[int(m.group(1))] = (int(m.group(2)), int(m.group(3)), int(m.group(4)))
    assert got == last, "snapshot %s:\n%s" % (snapshots[-1], out)


def test_transaction_index_lists_the_aborted_transaction(krabka_files):
    part, _, aborted = krabka_files
    out = dump("--files", ",".join(files(part, ".txnindex")))
    entries = re.findall(r"producerId: (\d+) firstOffset: (\d+) lastOffset: (\d+)", out)
    assert len(entries) == 1, out
    _, first, last = entries[0]
    assert int(first) == aborted[0] and int(last) == aborted[-1] + 1, out
