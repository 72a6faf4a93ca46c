"""Where Krabka's answers differ from Apache Kafka's in the Java client
scenarios (java/Compat.java), and why.

Keys are transcript keys (``scenario.key``), ``fnmatch`` patterns allowed;
the value names where the difference belongs (an issue item, or "by
design"). docs/COMPATIBILITY.md explains each entry; test_differential.py
fails on a difference not listed here and, in the long run, on an entry
that no longer differs.
"""

TOPIC_CONFIGS = ("issue 20 item 4: topic configs Kafka 4.4 lists that Krabka does not (and diskless.enable, "
                 "message.downconversion.enable that only Krabka lists)")
FEATURES = ("by design: Krabka announces the features a client acts on (transaction.version, group.version); "
            "Kafka also lists KRaft's metadata.version and kraft.version and features Krabka lacks")

KNOWN = {
    # Topic configs (issue 20 item 4).
    "configs.topic.names": TOPIC_CONFIGS,
    # Kafka 4's `kafka-storage format` writes a cluster-wide dynamic
    # min.insync.replicas=1 (KIP-966, eligible leader replicas); Krabka has
    # no cluster-wide dynamic defaults. Same value, another source.
    "configs.*min.insync.replicas": "by design: same value; Kafka's comes from a cluster-level dynamic default",
    # Kafka reports log.retention.ms as null when only log.retention.hours
    # decides it; Krabka reports the effective value.
    "configs.broker.log.retention.ms": "small: Krabka reports the effective value where Kafka reports null",
    # Kafka refuses a dynamic change of a read-only broker config with
    # INVALID_REQUEST, Krabka with INVALID_CONFIG.
    "configs.broker.dynamic_readonly": "small: INVALID_CONFIG where Kafka answers INVALID_REQUEST",
    # Features (KIP-584).
    "features.finalized": FEATURES,
    "features.supported": FEATURES,
}
