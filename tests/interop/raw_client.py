"""A persistent connection that sends requests encoded by kafka-python's
protocol classes, for tests that need Kafka requests no client API sends as
they are (a 2 GiB fetch, thousands of fetch sessions, a broker reached only
through its real port while it advertises another address)."""

import socket
import struct
import time

from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatchBuilder


class RawConnection:
    """One TCP connection; requests are answered in order."""

    def __init__(self, bootstrap, timeout=60):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _recv_exact(self, n):
        chunks, got = [], 0
        while got < n:
            chunk = self.sock.recv(min(n - got, 1 << 20))
            if not chunk:
                raise ConnectionError("closed in the middle of an answer")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def send(self, request):
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id="interop-raw")
        self.sock.sendall(request.encode(header=True, framed=True))

    def receive(self, response_class, version):
        """The next answer: (frame size, decoded response)."""
        (n,) = struct.unpack(">i", self._recv_exact(4))
        body = self._recv_exact(n)
        return n, response_class[version].decode(body, header=True)

    def call(self, request, response_class):
        self.send(request)
        return self.receive(response_class, request.API_VERSION)


def batch(values, base_timestamp=None):
    """One v2 record batch of `values` (kafka-python's record builder)."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False,
        producer_id=-1, producer_epoch=-1, base_sequence=-1,
        batch_size=sum(len(v) for v in values) + 1024)
    now = base_timestamp or int(time.time() * 1000)
    for i, value in enumerate(values):
        builder.append(i, timestamp=now, key=None, value=value, headers=[])
    return bytes(builder.build())


def produce(conn, topic, partition, records, version=9):
    T = ProduceRequest.TopicProduceData
    request = ProduceRequest[version](
        transactional_id=None, acks=1, timeout_ms=30000,
        topic_data=[T(name=topic, partition_data=[T.PartitionProduceData(index=partition, records=records)])])
    _, response = conn.call(request, ProduceResponse)
    p = response.responses[0].partition_responses[0]
    assert p.error_code == 0, "produce failed with %d" % p.error_code
    return p.base_offset


def fill(bootstrap, topic, total_bytes, record_bytes=100_000, per_batch=10, in_flight=8):
    """Appends about `total_bytes` of records to partition 0, in 1 MB
    batches pipelined `in_flight` deep; returns the number of records."""
    value = b"v" * record_bytes
    records = batch([value] * per_batch)
    T = ProduceRequest.TopicProduceData
    count = 0
    with RawConnection(bootstrap) as conn:
        pending = 0
        sent = 0
        while sent < total_bytes:
            request = ProduceRequest[9](
                transactional_id=None, acks=1, timeout_ms=30000,
                topic_data=[T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=records)])])
            conn.send(request)
            sent += len(records)
            count += per_batch
            pending += 1
            if pending == in_flight:
                _, r = conn.receive(ProduceResponse, 9)
                assert r.responses[0].partition_responses[0].error_code == 0
                pending -= 1
        while pending:
            _, r = conn.receive(ProduceResponse, 9)
            assert r.responses[0].partition_responses[0].error_code == 0
            pending -= 1
    return count


def fetch_request(partitions, max_bytes=2147483647, partition_max_bytes=2147483647,
                  session_id=0, session_epoch=-1, max_wait_ms=0, min_bytes=0, version=12):
    """A Fetch of `partitions`, [(topic, partition, offset)], by name (v12)."""
    R = FetchRequest[version]
    by_topic = {}
    for topic, partition, offset in partitions:
        by_topic.setdefault(topic, []).append(R.FetchTopic.FetchPartition(
            partition=partition, current_leader_epoch=-1, fetch_offset=offset,
            last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=partition_max_bytes))
    return R(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
             isolation_level=0, session_id=session_id, session_epoch=session_epoch,
             topics=[R.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
             forgotten_topics_data=[], rack_id="")


def memory(pid):
    """(VmRSS, VmHWM) of process `pid`, in bytes."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(rest.split()[0]) * 1024
    return out["VmRSS"], out["VmHWM"]


def fetch_discarding(conn, request):
    """Sends a Fetch and reads its answer without keeping it: returns the
    frame size and the top-level error code (the records are skipped, so a
    test can run many large fetches without holding them)."""
    conn.send(request)
    (n,) = struct.unpack(">i", conn._recv_exact(4))
    # Fetch v12's response header is the correlation id and an empty
    # tagged-field section; the body starts with throttle_time_ms,
    # error_code and session_id.
    head = conn._recv_exact(min(n, 15))
    assert head[4] == 0, "unexpected tagged fields in the response header"
    error_code, session_id = struct.unpack(">hi", head[9:15])
    left = n - len(head)
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    while left:
        got = conn.sock.recv_into(view, min(left, len(buf)))
        if not got:
            raise ConnectionError("closed in the middle of an answer")
        left -= got
    return n, error_code, session_id
