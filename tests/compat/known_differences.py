"""Where Krabka's answers differ from Apache Kafka's in the Java client
scenarios (java/Compat.java), and why.

Keys are transcript keys (``scenario.key``), ``fnmatch`` patterns allowed;
the value names where the difference belongs (an issue item, or "by
design"). docs/COMPATIBILITY.md explains each entry; test_differential.py
fails on a difference not listed here and, in the long run, on an entry
that no longer differs.
"""

TOPIC_CONFIGS = "issue 20 item 4: topic configs Kafka 4.x lists that Krabka neither implements nor reports"
KIP_890 = "issue 20 item 7: transactions v2 (KIP-890) and the finalized features that announce it"

KNOWN = {
    # Topic configs (issue 20 item 4).
    "configs.topic.names": TOPIC_CONFIGS,
    "configs.topic.max.compaction.lag.ms": TOPIC_CONFIGS,
    "configs.topic.message.timestamp.after.max.ms": TOPIC_CONFIGS,
    "configs.topic.message.timestamp.before.max.ms": TOPIC_CONFIGS,
    "configs.topic.segment.jitter.ms": TOPIC_CONFIGS,
    "configs.topic.unclean.leader.election.enable": TOPIC_CONFIGS,
    "errors.create.timestamp_before_max": TOPIC_CONFIGS,
    "errors.produce.timestamp_now": TOPIC_CONFIGS,
    "errors.produce.timestamp_too_old": TOPIC_CONFIGS,
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
    # Transactions v2 and features (issue 20 item 7).
    "transactions.fenced": KIP_890,
    "features.finalized": KIP_890,
    "features.supported": KIP_890,
    # KIP-848 pattern subscriptions, resolved by the broker: Krabka refuses
    # SubscribedTopicRegex with INVALID_REQUEST (coordinator/group/mod.rs).
    "regex.consumer.*": "KIP-848 broker-side regex subscriptions are not implemented",
}
