//! Group coordinator settings, named and defaulted as Kafka's broker configs,
//! and the per-group settings (KIP-848 group configs, `DescribeConfigs`
//! resource type 32) that override some of them for one group.

use std::collections::BTreeMap;

/// Kafka's group config `consumer.session.timeout.ms`.
pub const CONSUMER_SESSION_TIMEOUT: &str = "consumer.session.timeout.ms";
/// Kafka's group config `consumer.heartbeat.interval.ms`.
pub const CONSUMER_HEARTBEAT_INTERVAL: &str = "consumer.heartbeat.interval.ms";

/// Every group config this coordinator applies, with its documentation.
pub const GROUP_SETTINGS: &[(&str, &str)] = &[
    (
        CONSUMER_SESSION_TIMEOUT,
        "The timeout to detect client failures when using the consumer group protocol.",
    ),
    (
        CONSUMER_HEARTBEAT_INTERVAL,
        "The heartbeat interval given to the members of a consumer group.",
    ),
];

/// Broker settings the group coordinator reads (Kafka property names in the
/// field docs; defaults are Kafka's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    /// `offsets.topic.num.partitions` (50).
    pub offsets_topic_num_partitions: i32,
    /// `group.initial.rebalance.delay.ms` (3000).
    pub initial_rebalance_delay_ms: i64,
    /// `group.min.session.timeout.ms` (6000).
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms` (1800000).
    pub max_session_timeout_ms: i32,
    /// `group.max.size` (unbounded: `Integer.MAX_VALUE`).
    pub max_size: usize,
    /// `offset.metadata.max.bytes` (4096).
    pub offset_metadata_max_bytes: usize,
    /// `offsets.retention.minutes` (10080, seven days), here in ms.
    pub offsets_retention_ms: i64,
    /// `offsets.retention.check.interval.ms` (600000).
    pub offsets_retention_check_interval_ms: i64,
    /// `group.consumer.session.timeout.ms` (45000), for KIP-848 members.
    pub consumer_session_timeout_ms: i64,
    /// `group.consumer.heartbeat.interval.ms` (5000), for KIP-848 members.
    pub consumer_heartbeat_interval_ms: i32,
    /// `group.consumer.min.session.timeout.ms` (45000): the lowest
    /// `consumer.session.timeout.ms` a group may set.
    pub consumer_min_session_timeout_ms: i64,
    /// `group.consumer.max.session.timeout.ms` (60000).
    pub consumer_max_session_timeout_ms: i64,
    /// `group.consumer.min.heartbeat.interval.ms` (5000): the lowest
    /// `consumer.heartbeat.interval.ms` a group may set.
    pub consumer_min_heartbeat_interval_ms: i32,
    /// `group.consumer.max.heartbeat.interval.ms` (15000).
    pub consumer_max_heartbeat_interval_ms: i32,
    /// `group.consumer.assignors` (`uniform,range`): the server assignors
    /// members may ask for; the first is used when none asks.
    pub consumer_assignors: Vec<String>,
}

impl GroupConfig {
    /// The assignor used when no member of a group asks for one.
    #[must_use]
    pub fn default_assignor(&self) -> &str {
        self.consumer_assignors
            .first()
            .map_or(super::assignor::ASSIGNORS[0], String::as_str)
    }
}

impl GroupConfig {
    /// The broker-level value a group config falls back to, as text.
    #[must_use]
    pub fn group_default(&self, name: &str) -> Option<String> {
        match name {
            CONSUMER_SESSION_TIMEOUT => Some(self.consumer_session_timeout_ms.to_string()),
            CONSUMER_HEARTBEAT_INTERVAL => Some(self.consumer_heartbeat_interval_ms.to_string()),
            _ => None,
        }
    }

    /// These settings with one group's configs applied. The configs were
    /// validated when they were set; a value that no longer parses is
    /// ignored.
    #[must_use]
    pub fn for_group(&self, configs: &BTreeMap<String, String>) -> Self {
        let mut out = self.clone();
        if let Some(v) = configs
            .get(CONSUMER_SESSION_TIMEOUT)
            .and_then(|v| v.parse().ok())
        {
            out.consumer_session_timeout_ms = v;
        }
        if let Some(v) = configs
            .get(CONSUMER_HEARTBEAT_INTERVAL)
            .and_then(|v| v.parse().ok())
        {
            out.consumer_heartbeat_interval_ms = v;
        }
        out
    }

    /// Checks one group's configs as Kafka's `GroupConfig.validate` does:
    /// known names, integer values within the broker's
    /// `group.consumer.{min,max}.*` bounds, and a heartbeat interval below
    /// the session timeout.
    ///
    /// # Errors
    ///
    /// Kafka's message for the first violated rule.
    pub fn validate_group_configs(&self, configs: &BTreeMap<String, String>) -> Result<(), String> {
        for (name, value) in configs {
            let parsed: i64 = value
                .trim()
                .parse()
                .ok()
                .filter(|v| i32::try_from(*v).is_ok())
                .ok_or_else(|| {
                    if GROUP_SETTINGS.iter().any(|(n, _)| n == name) {
                        format!("Invalid value {value} for configuration {name}: Not a number of type INT")
                    } else {
                        format!("Unknown group config name: {name}")
                    }
                })?;
            let (min, max, min_name, max_name) = match name.as_str() {
                CONSUMER_SESSION_TIMEOUT => (
                    self.consumer_min_session_timeout_ms,
                    self.consumer_max_session_timeout_ms,
                    "group.consumer.min.session.timeout.ms",
                    "group.consumer.max.session.timeout.ms",
                ),
                CONSUMER_HEARTBEAT_INTERVAL => (
                    i64::from(self.consumer_min_heartbeat_interval_ms),
                    i64::from(self.consumer_max_heartbeat_interval_ms),
                    "group.consumer.min.heartbeat.interval.ms",
                    "group.consumer.max.heartbeat.interval.ms",
                ),
                _ => return Err(format!("Unknown group config name: {name}")),
            };
            if parsed < min {
                return Err(format!(
                    "{name} must be greater than or equal to {min_name}"
                ));
            }
            if parsed > max {
                return Err(format!("{name} must be less than or equal to {max_name}"));
            }
        }
        let effective = self.for_group(configs);
        if i64::from(effective.consumer_heartbeat_interval_ms)
            >= effective.consumer_session_timeout_ms
        {
            return Err(format!(
                "{CONSUMER_HEARTBEAT_INTERVAL} must be less than {CONSUMER_SESSION_TIMEOUT}"
            ));
        }
        Ok(())
    }
}

impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            offsets_topic_num_partitions: 50,
            initial_rebalance_delay_ms: 3000,
            min_session_timeout_ms: 6000,
            max_session_timeout_ms: 1_800_000,
            max_size: i32::MAX as usize,
            offset_metadata_max_bytes: 4096,
            offsets_retention_ms: 10_080 * 60 * 1000,
            offsets_retention_check_interval_ms: 600_000,
            consumer_session_timeout_ms: 45_000,
            consumer_heartbeat_interval_ms: 5_000,
            consumer_min_session_timeout_ms: 45_000,
            consumer_max_session_timeout_ms: 60_000,
            consumer_min_heartbeat_interval_ms: 5_000,
            consumer_max_heartbeat_interval_ms: 15_000,
            consumer_assignors: vec!["uniform".into(), "range".into()],
        }
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn group_configs_are_bounded_by_the_broker() {
        let c = GroupConfig::default();
        let one = |n: &str, v: &str| BTreeMap::from([(n.to_owned(), v.to_owned())]);
        check!(
            c.validate_group_configs(&one(CONSUMER_SESSION_TIMEOUT, "50000"))
                .is_ok()
        );
        let low = c.validate_group_configs(&one(CONSUMER_SESSION_TIMEOUT, "1000"));
        check!(low == Err("consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms".to_owned()));
        check!(
            c.validate_group_configs(&one(CONSUMER_HEARTBEAT_INTERVAL, "16000"))
                .is_err()
        );
        check!(
            c.validate_group_configs(&one("share.record.lock.duration.ms", "1"))
                .is_err()
        );
        check!(
            c.validate_group_configs(&one(CONSUMER_HEARTBEAT_INTERVAL, "x"))
                .is_err()
        );
        let applied = c.for_group(&one(CONSUMER_HEARTBEAT_INTERVAL, "7000"));
        check!(applied.consumer_heartbeat_interval_ms == 7000);
        check!(applied.consumer_session_timeout_ms == 45_000);
    }
}
