//! Effective topic configuration: a topic's value for each setting comes from
//! its own override, else the dynamic per-broker value, else the dynamic
//! cluster default, else the broker's static setting, else Kafka's default —
//! the same precedence (and the same `DescribeConfigs` sources) as Kafka.

use {
    super::TopicRegistry,
    crate::config::{BrokerConfig, ConfigSource, defs},
    krabka_log::{CleanupPolicy, CompressionType, LogConfig, TimestampType},
    std::collections::BTreeMap,
};

/// One resolved value with where it came from, and the lower-precedence
/// values it hides (Kafka's "synonyms").
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The effective value.
    pub value: Option<String>,
    /// Where the effective value came from.
    pub source: ConfigSource,
    /// `(name, value, source)` of every level that has a value, highest first.
    pub synonyms: Vec<(String, Option<String>, ConfigSource)>,
}

/// Resolves the value of broker setting `name` for this node.
#[must_use]
pub fn resolve_broker(config: &BrokerConfig, registry: &TopicRegistry, name: &str) -> Resolved {
    let mut synonyms = Vec::new();
    let node = config.node_id.to_string();
    if let Some(v) = registry.broker_configs(&node).get(name) {
        synonyms.push((
            name.to_owned(),
            Some(v.clone()),
            ConfigSource::DynamicBroker,
        ));
    }
    if let Some(v) = registry.broker_configs("").get(name) {
        synonyms.push((
            name.to_owned(),
            Some(v.clone()),
            ConfigSource::DynamicDefaultBroker,
        ));
    }
    let (value, source) = config.static_value(name);
    synonyms.push((name.to_owned(), value, source));
    let (value, source) = synonyms
        .first()
        .map(|(_, v, s)| (v.clone(), *s))
        .unwrap_or((None, ConfigSource::Default));
    Resolved {
        value,
        source,
        synonyms,
    }
}

/// Resolves topic setting `name` given the topic's overrides.
#[must_use]
pub fn resolve_topic(
    config: &BrokerConfig,
    registry: &TopicRegistry,
    overrides: &BTreeMap<String, String>,
    name: &str,
) -> Resolved {
    let Some(setting) = defs::topic_setting(name) else {
        return Resolved {
            value: None,
            source: ConfigSource::Default,
            synonyms: Vec::new(),
        };
    };
    let broker = resolve_broker(config, registry, setting.broker_synonym);
    let mut synonyms = Vec::new();
    if let Some(v) = overrides.get(name) {
        synonyms.push((name.to_owned(), Some(v.clone()), ConfigSource::DynamicTopic));
    }
    synonyms.extend(
        broker
            .synonyms
            .into_iter()
            .map(|(_, v, s)| (setting.broker_synonym.to_owned(), v, s)),
    );
    let (value, source) = synonyms
        .first()
        .map(|(_, v, s)| (v.clone(), *s))
        .unwrap_or((None, ConfigSource::Default));
    Resolved {
        value,
        source,
        synonyms,
    }
}

/// Every effective topic setting, by name.
#[must_use]
pub fn effective_topic_configs(
    config: &BrokerConfig,
    registry: &TopicRegistry,
    overrides: &BTreeMap<String, String>,
) -> BTreeMap<&'static str, Resolved> {
    defs::TOPIC_SETTINGS
        .iter()
        .map(|s| (s.name, resolve_topic(config, registry, overrides, s.name)))
        .collect()
}

/// The settings a partition's broker-side checks need besides the log's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrokerSideConfig {
    /// `min.insync.replicas`: acks=all needs this many in-sync replicas.
    pub min_insync_replicas: i32,
    /// `remote.storage.enable`: the partition's records may lie in the
    /// remote tier below its local log start.
    pub remote_storage_enable: bool,
    /// `diskless.enable`: the partition's batches live in object storage,
    /// ordered by the batch coordinator (KIP-1150), with no local log.
    pub diskless_enable: bool,
}

/// Builds the log's configuration (and the broker-side extras) from the
/// effective topic settings. Values were validated when they were set, so a
/// value that no longer parses falls back to Kafka's default.
#[must_use]
pub fn log_config(
    config: &BrokerConfig,
    registry: &TopicRegistry,
    overrides: &BTreeMap<String, String>,
) -> (LogConfig, BrokerSideConfig) {
    let effective = effective_topic_configs(config, registry, overrides);
    let text = |name: &str| -> Option<String> { effective.get(name).and_then(|r| r.value.clone()) };
    let long = |name: &str| -> Option<i64> { text(name).and_then(|v| v.trim().parse().ok()) };
    // Kafka's "-1 = unlimited" and "Long.MAX = never" both become None.
    let optional = |name: &str| -> Option<u64> {
        long(name).and_then(|v| {
            if v < 0 || v == i64::MAX {
                None
            } else {
                u64::try_from(v).ok()
            }
        })
    };
    let defaults = LogConfig::default();
    let unsigned = |name: &str, default: u64| -> u64 {
        long(name)
            .and_then(|v| u64::try_from(v).ok())
            .unwrap_or(default)
    };
    let mut log = LogConfig {
        segment_bytes: unsigned("segment.bytes", defaults.segment_bytes),
        segment_ms: unsigned("segment.ms", defaults.segment_ms),
        segment_index_bytes: unsigned("segment.index.bytes", defaults.segment_index_bytes),
        index_interval_bytes: unsigned("index.interval.bytes", defaults.index_interval_bytes),
        retention_ms: match long("retention.ms") {
            Some(v) => optional_from(v),
            None => defaults.retention_ms,
        },
        retention_bytes: optional("retention.bytes"),
        cleanup_policy: text("cleanup.policy")
            .and_then(|v| CleanupPolicy::parse(&v))
            .unwrap_or(defaults.cleanup_policy),
        delete_retention_ms: unsigned("delete.retention.ms", defaults.delete_retention_ms),
        min_compaction_lag_ms: unsigned("min.compaction.lag.ms", defaults.min_compaction_lag_ms),
        min_cleanable_dirty_ratio: text("min.cleanable.dirty.ratio")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(defaults.min_cleanable_dirty_ratio),
        flush_messages: optional("flush.messages"),
        flush_ms: optional("flush.ms"),
        preallocate: text("preallocate").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
        max_message_bytes: long("max.message.bytes")
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(defaults.max_message_bytes),
        message_timestamp_type: match text("message.timestamp.type") {
            Some(v) if v.trim().eq_ignore_ascii_case("LogAppendTime") => {
                TimestampType::LogAppendTime
            }
            _ => TimestampType::CreateTime,
        },
        file_delete_delay_ms: unsigned("file.delete.delay.ms", defaults.file_delete_delay_ms),
        max_compaction_lag_ms: optional("max.compaction.lag.ms"),
        compression_type: text("compression.type")
            .and_then(|v| CompressionType::parse(&v))
            .unwrap_or_default(),
        message_timestamp_before_max_ms: optional("message.timestamp.before.max.ms"),
        message_timestamp_after_max_ms: match long("message.timestamp.after.max.ms") {
            Some(v) => optional_from(v),
            None => defaults.message_timestamp_after_max_ms,
        },
        decompressed_batch_max_bytes: config.decompressed_batch_max_bytes,
    };
    let remote_storage_enable =
        text("remote.storage.enable").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    if remote_storage_enable {
        crate::remote::policy::hand_retention_to_remote_log_manager(&mut log);
    }
    let extras = BrokerSideConfig {
        min_insync_replicas: long("min.insync.replicas")
            .and_then(|v| i32::try_from(v).ok())
            .unwrap_or(1),
        remote_storage_enable,
        diskless_enable: text("diskless.enable")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
    };
    (log, extras)
}

fn optional_from(v: i64) -> Option<u64> {
    if v < 0 || v == i64::MAX {
        None
    } else {
        u64::try_from(v).ok()
    }
}

#[cfg(test)]
mod tests {
    use {super::*, crate::config::RawSettings, assert2::check};

    #[test]
    fn precedence_is_topic_then_dynamic_then_static_then_default() {
        let dir = tempfile::tempdir().unwrap();
        let registry = TopicRegistry::open(dir.path()).unwrap();
        let mut raw = RawSettings::default();
        raw.set("log.retention.hours", "2", "test");
        let config = BrokerConfig::from_raw(&raw).unwrap();
        let none = BTreeMap::new();

        let r = resolve_topic(&config, &registry, &none, "retention.ms");
        check!(r.value.as_deref() == Some("7200000"));
        check!(r.source == ConfigSource::StaticBroker);
        let r = resolve_topic(&config, &registry, &none, "segment.bytes");
        check!(r.source == ConfigSource::Default);

        registry
            .set_broker_configs(
                "",
                BTreeMap::from([("log.retention.ms".into(), "5000".into())]),
            )
            .unwrap();
        let r = resolve_topic(&config, &registry, &none, "retention.ms");
        check!(r.value.as_deref() == Some("5000"));
        check!(r.source == ConfigSource::DynamicDefaultBroker);

        let overrides = BTreeMap::from([("retention.ms".to_owned(), "-1".to_owned())]);
        let r = resolve_topic(&config, &registry, &overrides, "retention.ms");
        check!(r.source == ConfigSource::DynamicTopic);
        check!(r.synonyms.len() == 3);
        let (log, _) = log_config(&config, &registry, &overrides);
        check!(log.retention_ms.is_none());
        let compact = BTreeMap::from([
            ("cleanup.policy".to_owned(), "compact".to_owned()),
            (
                "message.timestamp.type".to_owned(),
                "LogAppendTime".to_owned(),
            ),
        ]);
        let (log, _) = log_config(&config, &registry, &compact);
        check!(log.cleanup_policy == CleanupPolicy::Compact);
        check!(log.message_timestamp_type == TimestampType::LogAppendTime);
        check!(log.retention_ms == Some(5000));
    }
}
