//! Group coordinator settings, named and defaulted as Kafka's broker configs.

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
            consumer_assignors: vec!["uniform".into(), "range".into()],
        }
    }
}
