"""ApiVersions of a broker, asked over a plain socket (request v0, which
every broker answers and whose response lists every API with its range).

``fetch(bootstrap)`` returns ``{api_key: (min, max)}``;
``markdown_table(kafka, krabka)`` renders the side-by-side table kept in
docs/COMPATIBILITY.md (``tests/compat/run --api-table`` prints it).
"""

import socket
import struct

import kafka_ref

# Kafka 4.4's API keys (org.apache.kafka.common.protocol.ApiKeys).
NAMES = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    4: "LeaderAndIsr",
    5: "StopReplica",
    6: "UpdateMetadata",
    7: "ControlledShutdown",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    17: "SaslHandshake",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    21: "DeleteRecords",
    22: "InitProducerId",
    23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn",
    26: "EndTxn",
    27: "WriteTxnMarkers",
    28: "TxnOffsetCommit",
    29: "DescribeAcls",
    30: "CreateAcls",
    31: "DeleteAcls",
    32: "DescribeConfigs",
    33: "AlterConfigs",
    34: "AlterReplicaLogDirs",
    35: "DescribeLogDirs",
    36: "SaslAuthenticate",
    37: "CreatePartitions",
    38: "CreateDelegationToken",
    39: "RenewDelegationToken",
    40: "ExpireDelegationToken",
    41: "DescribeDelegationToken",
    42: "DeleteGroups",
    43: "ElectLeaders",
    44: "IncrementalAlterConfigs",
    45: "AlterPartitionReassignments",
    46: "ListPartitionReassignments",
    47: "OffsetDelete",
    48: "DescribeClientQuotas",
    49: "AlterClientQuotas",
    50: "DescribeUserScramCredentials",
    51: "AlterUserScramCredentials",
    52: "Vote",
    53: "BeginQuorumEpoch",
    54: "EndQuorumEpoch",
    55: "DescribeQuorum",
    56: "AlterPartition",
    57: "UpdateFeatures",
    58: "Envelope",
    59: "FetchSnapshot",
    60: "DescribeCluster",
    61: "DescribeProducers",
    62: "BrokerRegistration",
    63: "BrokerHeartbeat",
    64: "UnregisterBroker",
    65: "DescribeTransactions",
    66: "ListTransactions",
    67: "AllocateProducerIds",
    68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe",
    70: "ControllerRegistration",
    71: "GetTelemetrySubscriptions",
    72: "PushTelemetry",
    73: "AssignReplicasToDirs",
    74: "ListConfigResources",
    75: "DescribeTopicPartitions",
    76: "ShareGroupHeartbeat",
    77: "ShareGroupDescribe",
    78: "ShareFetch",
    79: "ShareAcknowledge",
    80: "AddRaftVoter",
    81: "RemoveRaftVoter",
    82: "UpdateRaftVoter",
    83: "InitializeShareGroupState",
    84: "ReadShareGroupState",
    85: "WriteShareGroupState",
    86: "DeleteShareGroupState",
    87: "ReadShareGroupStateSummary",
    88: "StreamsGroupHeartbeat",
    89: "StreamsGroupDescribe",
    90: "DescribeShareGroupOffsets",
    91: "AlterShareGroupOffsets",
    92: "DeleteShareGroupOffsets",
    93: "StreamsGroupTopologyDescriptionUpdate",
    94: "UnregisterController",
}


def _read_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the broker closed the connection after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return buf


def fetch(bootstrap, timeout=30):
    """``{api_key: (min_version, max_version)}`` from an ApiVersions v0 request.

    Raises AssertionError when the broker answers an error code.
    """
    host, port = bootstrap.rsplit(":", 1)
    client_id = b"krabka-compat"
    body = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", _read_exact(sock, 4))
        assert 0 < size < 1 << 20, "implausible ApiVersions response size %d" % size
        data = _read_exact(sock, size)
    correlation, error, count = struct.unpack_from(">ihi", data, 0)
    assert correlation == 1, "correlation id %d" % correlation
    assert error == 0, "ApiVersions answered error %d" % error
    apis = {}
    for i in range(count):
        key, lo, hi = struct.unpack_from(">hhh", data, 10 + 6 * i)
        apis[key] = (lo, hi)
    return apis


def markdown_table(kafka, krabka):
    """The two brokers' ranges side by side, one API a row (Kafka's, then any Krabka-only)."""
    rows = ["| key | API | Apache Kafka %s | Krabka |" % kafka_ref.KAFKA_VERSION, "| ---: | --- | --- | --- |"]
    for key in sorted(set(kafka) | set(krabka)):
        def fmt(apis):
            return "%d–%d" % apis[key] if key in apis else "—"
        rows.append("| %d | %s | %s | %s |" % (key, NAMES.get(key, "?"), fmt(kafka), fmt(krabka)))
    return "\n".join(rows) + "\n"
