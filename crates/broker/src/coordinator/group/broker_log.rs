//! The [`GroupLog`] seam implemented over the broker's partition layer, and
//! the coordinator's startup.
//!
//! `__consumer_offsets` is an ordinary topic of this broker: 50 partitions
//! (`offsets.topic.num.partitions`), `cleanup.policy=compact`, created on
//! first start. The coordinator's records go in as one v2 record batch per
//! append through the partition's log and are read back, with the
//! transaction markers among them, from the log start on load — both through
//! the plumbing the transaction coordinator shares
//! ([`state_topic`](crate::coordinator::state_topic)).
//!
//! The log holds a `Weak` reference to the broker, because the broker owns
//! the coordinator that owns the log.

use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use krabka_ids::{ProducerEpoch, ProducerId};
use krabka_log::{ControlMarker, LogError};

use super::{
    CoordinatorNode, GroupConfig, GroupCoordinator, GroupError, GroupLog, GroupLogEntry,
    GroupLogRecord, OFFSETS_TOPIC, SystemClock,
};
use crate::{
    broker::Broker,
    config::BrokerConfig,
    coordinator::state_topic,
    partition::{LEADER_EPOCH, Partition},
};

/// `offsets.topic.segment.bytes` (Kafka's default, 100 MiB).
const OFFSETS_SEGMENT_BYTES: i64 = 104_857_600;
/// How often coordinator timers are checked.
const TICK: Duration = Duration::from_millis(100);

/// `__consumer_offsets` partitions of this broker as the coordinator's log.
#[derive(Debug)]
pub struct PartitionGroupLog {
    broker: Weak<Broker>,
}

impl PartitionGroupLog {
    /// The log over `broker`'s `__consumer_offsets` partitions.
    pub fn new(broker: &Arc<Broker>) -> Self {
        Self {
            broker: Arc::downgrade(broker),
        }
    }

    fn partition(&self, partition: i32) -> Result<Arc<Partition>, GroupError> {
        let broker = self
            .broker
            .upgrade()
            .ok_or(GroupError::NotCoordinator { partition })?;
        broker
            .partitions
            .get(OFFSETS_TOPIC, partition)
            .ok_or(GroupError::NotCoordinator { partition })
    }

    /// Runs a blocking write on the partition's log, then wakes fetches.
    async fn write(
        &self,
        partition: i32,
        write: impl FnOnce(&krabka_log::Log) -> Result<i64, LogError> + Send + 'static,
    ) -> Result<i64, GroupError> {
        let target = self.partition(partition)?;
        let log = Arc::clone(target.local_log());
        let offset = crate::blocking::run(move || write(&log))
            .await
            .map_err(|e| GroupError::Log {
                partition,
                reason: e.to_string(),
            })?
            .map_err(|e| log_error(partition, &e))?;
        target.notify_appended();
        Ok(offset)
    }
}

/// A log refusal as the coordinator reports it: a producer's fenced epoch
/// or wrong transaction state keeps Kafka's code, anything else makes the
/// coordinator unavailable.
fn log_error(partition: i32, e: &LogError) -> GroupError {
    match e {
        LogError::InvalidProducerEpoch { .. } | LogError::InvalidTxnState { .. } => {
            GroupError::Refused {
                partition,
                code: e.kafka_error_code(),
                reason: e.to_string(),
            }
        }
        other => GroupError::Log {
            partition,
            reason: other.to_string(),
        },
    }
}

/// Creates `__consumer_offsets` with `partitions` compacted partitions when
/// it does not exist yet. Blocking.
///
/// # Errors
///
/// [`GroupError::Log`] when the topic cannot be recorded or its logs opened.
pub fn ensure_offsets_topic(broker: &Broker, partitions: i32) -> Result<(), GroupError> {
    state_topic::ensure_topic(broker, OFFSETS_TOPIC, partitions, OFFSETS_SEGMENT_BYTES).map_err(
        |reason| GroupError::Log {
            partition: -1,
            reason,
        },
    )
}

#[async_trait]
impl GroupLog for PartitionGroupLog {
    async fn append(
        &self,
        partition: i32,
        records: Vec<GroupLogRecord>,
        producer: Option<(ProducerId, ProducerEpoch)>,
    ) -> Result<i64, GroupError> {
        if records.is_empty() {
            return Ok(-1);
        }
        self.write(partition, move |log| {
            state_topic::append(log, &records, producer)
        })
        .await
    }

    async fn append_marker(
        &self,
        partition: i32,
        marker: ControlMarker,
    ) -> Result<i64, GroupError> {
        self.write(partition, move |log| {
            Ok(log
                .append_control_marker(marker, LEADER_EPOCH)?
                .first_offset)
        })
        .await
    }

    async fn read_all(&self, partition: i32) -> Result<Vec<GroupLogEntry>, GroupError> {
        if let Some(reason) = self
            .broker
            .upgrade()
            .and_then(|b| b.partitions.offline_reason(OFFSETS_TOPIC, partition))
        {
            return Err(GroupError::Log { partition, reason });
        }
        let Ok(target) = self.partition(partition) else {
            return Ok(Vec::new());
        };
        let log = Arc::clone(target.local_log());
        crate::blocking::run(move || state_topic::read_all(&log))
            .await
            .map_err(|e| GroupError::Log {
                partition,
                reason: e.to_string(),
            })?
            .map_err(|e| GroupError::Log {
                partition,
                reason: e.to_string(),
            })
    }
}

/// The coordinator settings from the broker's validated configuration
/// (Kafka's property names; the defaults are those of the settings table).
/// `BrokerConfig::from_raw` has checked every value, so a value that does
/// not parse here cannot happen; it would fall back to Kafka's default.
#[must_use]
pub fn group_config(config: &BrokerConfig) -> GroupConfig {
    let defaults = GroupConfig::default();
    let get = |name: &str| -> Option<i64> { config.static_value(name).0?.trim().parse().ok() };
    let get_i32 = |name: &str, d: i32| get(name).and_then(|v| i32::try_from(v).ok()).unwrap_or(d);
    let get_usize =
        |name: &str, d: usize| get(name).and_then(|v| usize::try_from(v).ok()).unwrap_or(d);
    let assignors: Vec<String> = config
        .static_value("group.consumer.assignors")
        .0
        .unwrap_or_default()
        .split(',')
        .map(|a| a.trim().to_ascii_lowercase())
        .filter(|a| !a.is_empty())
        .collect();
    GroupConfig {
        offsets_topic_num_partitions: get_i32(
            "offsets.topic.num.partitions",
            defaults.offsets_topic_num_partitions,
        )
        .max(1),
        initial_rebalance_delay_ms: get("group.initial.rebalance.delay.ms")
            .unwrap_or(defaults.initial_rebalance_delay_ms),
        min_session_timeout_ms: get_i32(
            "group.min.session.timeout.ms",
            defaults.min_session_timeout_ms,
        ),
        max_session_timeout_ms: get_i32(
            "group.max.session.timeout.ms",
            defaults.max_session_timeout_ms,
        ),
        max_size: get_usize("group.max.size", defaults.max_size),
        offset_metadata_max_bytes: get_usize(
            "offset.metadata.max.bytes",
            defaults.offset_metadata_max_bytes,
        ),
        offsets_retention_ms: get("offsets.retention.minutes")
            .map_or(defaults.offsets_retention_ms, |m| m.saturating_mul(60_000)),
        offsets_retention_check_interval_ms: get("offsets.retention.check.interval.ms")
            .unwrap_or(defaults.offsets_retention_check_interval_ms),
        consumer_session_timeout_ms: get("group.consumer.session.timeout.ms")
            .unwrap_or(defaults.consumer_session_timeout_ms),
        consumer_heartbeat_interval_ms: get_i32(
            "group.consumer.heartbeat.interval.ms",
            defaults.consumer_heartbeat_interval_ms,
        ),
        consumer_min_session_timeout_ms: get("group.consumer.min.session.timeout.ms")
            .unwrap_or(defaults.consumer_min_session_timeout_ms),
        consumer_max_session_timeout_ms: get("group.consumer.max.session.timeout.ms")
            .unwrap_or(defaults.consumer_max_session_timeout_ms),
        consumer_min_heartbeat_interval_ms: get_i32(
            "group.consumer.min.heartbeat.interval.ms",
            defaults.consumer_min_heartbeat_interval_ms,
        ),
        consumer_max_heartbeat_interval_ms: get_i32(
            "group.consumer.max.heartbeat.interval.ms",
            defaults.consumer_max_heartbeat_interval_ms,
        ),
        consumer_assignors: if assignors.is_empty() {
            defaults.consumer_assignors
        } else {
            assignors
        },
    }
}

/// Starts the group coordinator of `broker`: creates `__consumer_offsets`
/// if needed, replays it, and starts the timer task. Call after the
/// listener is bound (the coordinator advertises the bound port).
///
/// # Errors
///
/// [`GroupError`] when the topic cannot be created or read.
pub async fn start(broker: &Arc<Broker>) -> Result<Arc<GroupCoordinator>, GroupError> {
    let config = group_config(&broker.config);
    let partitions = config.offsets_topic_num_partitions;
    let (host, port) = broker.advertised();
    let node = CoordinatorNode {
        node_id: broker.config.node_id,
        host,
        port,
    };
    let coordinator = if let Some(cluster) = broker.cluster.get() {
        // Cluster mode: the state lives in the database, shard by shard,
        // and is loaded as this broker takes shards.
        let log = Arc::new(crate::cluster::coordinator_state::DbGroupLog::new(
            Arc::clone(cluster),
        ));
        GroupCoordinator::by_lease(config, node, Arc::new(SystemClock), log)
    } else {
        let creating = Arc::clone(broker);
        crate::blocking::run(move || ensure_offsets_topic(&creating, partitions))
            .await
            .map_err(|e| GroupError::Log {
                partition: -1,
                reason: e.to_string(),
            })??;
        let log = Arc::new(PartitionGroupLog::new(broker));
        GroupCoordinator::load(config, node, Arc::new(SystemClock), log).await?
    };
    coordinator.set_topic_lookup(Arc::new(RegistryTopics {
        broker: Arc::downgrade(broker),
    }));
    for (group, configs) in broker.registry.all_group_configs() {
        coordinator.set_group_configs(&group, configs);
    }
    let groups = coordinator.lock().groups.len();
    tracing::info!(groups, "group coordinator loaded {OFFSETS_TOPIC}");
    coordinator.spawn_ticker(TICK);
    Ok(coordinator)
}

/// [`TopicLookup`](super::TopicLookup) over the broker's topic registry.
#[derive(Debug)]
struct RegistryTopics {
    broker: Weak<Broker>,
}

impl super::TopicLookup for RegistryTopics {
    fn by_name(&self, name: &str) -> Option<(uuid::Uuid, i32)> {
        let meta = self.broker.upgrade()?.registry.get(name)?;
        Some((meta.id, meta.partitions))
    }

    fn name_of(&self, id: uuid::Uuid) -> Option<String> {
        Some(self.broker.upgrade()?.registry.by_id(id)?.name)
    }

    fn names(&self) -> Vec<String> {
        self.broker
            .upgrade()
            .map(|b| b.registry.topics().into_iter().map(|t| t.name).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RawSettings;
    use assert2::check;

    fn config(pairs: &[(&str, &str)]) -> BrokerConfig {
        let mut raw = RawSettings::default();
        for (k, v) in pairs {
            raw.set(k, v, "test");
        }
        BrokerConfig::from_raw(&raw).unwrap()
    }

    #[test]
    fn defaults_of_the_settings_table_are_the_coordinator_defaults() {
        check!(group_config(&config(&[])) == GroupConfig::default());
    }

    #[test]
    fn set_values_reach_the_coordinator() {
        let got = group_config(&config(&[
            ("group.initial.rebalance.delay.ms", "0"),
            ("group.min.session.timeout.ms", "100"),
            ("group.max.session.timeout.ms", "200000"),
            ("group.max.size", "7"),
            ("offsets.topic.num.partitions", "3"),
            ("offsets.retention.minutes", "2"),
            ("offsets.retention.check.interval.ms", "1000"),
            ("offset.metadata.max.bytes", "10"),
            ("group.consumer.session.timeout.ms", "20000"),
            ("group.consumer.heartbeat.interval.ms", "1000"),
            ("group.consumer.assignors", "range"),
        ]));
        check!(
            got == GroupConfig {
                offsets_topic_num_partitions: 3,
                initial_rebalance_delay_ms: 0,
                min_session_timeout_ms: 100,
                max_session_timeout_ms: 200_000,
                max_size: 7,
                offset_metadata_max_bytes: 10,
                offsets_retention_ms: 120_000,
                offsets_retention_check_interval_ms: 1000,
                consumer_session_timeout_ms: 20_000,
                consumer_heartbeat_interval_ms: 1000,
                consumer_assignors: vec!["range".into()],
                ..GroupConfig::default()
            }
        );
        check!(got.default_assignor() == "range");
    }
}
