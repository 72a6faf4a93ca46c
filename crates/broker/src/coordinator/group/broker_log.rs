//! The [`GroupLog`] seam implemented over the broker's partition layer, and
//! the coordinator's startup.
//!
//! `__consumer_offsets` is an ordinary topic of this broker: 50 partitions
//! (`offsets.topic.num.partitions`), `cleanup.policy=compact`, created on
//! first start. The coordinator's records go in as one v2 record batch per
//! append through the same `append_as_leader` path a producer uses, and are
//! read back batch by batch from the log start on load.
//!
//! The log holds a `Weak` reference to the broker, because the broker owns
//! the coordinator that owns the log.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use bytes::BytesMut;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use krabka_log::batch::{BatchScan, decode_records};

use super::{
    CoordinatorNode, GroupConfig, GroupCoordinator, GroupError, GroupLog, GroupLogRecord,
    OFFSETS_TOPIC, SystemClock,
};
use crate::{
    broker::Broker, config::BrokerConfig, partition::LEADER_EPOCH, topics::config as topic_config,
};

/// How much of a partition one read pulls while loading.
const LOAD_READ_BYTES: usize = 1 << 20;
/// `offsets.topic.segment.bytes` (Kafka's default, 100 MiB).
const OFFSETS_SEGMENT_BYTES: &str = "104857600";
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

    fn partition(&self, partition: i32) -> Result<Arc<crate::partition::Partition>, GroupError> {
        let broker = self
            .broker
            .upgrade()
            .ok_or(GroupError::NotCoordinator { partition })?;
        broker
            .partitions
            .get(OFFSETS_TOPIC, partition)
            .ok_or(GroupError::NotCoordinator { partition })
    }
}

/// Creates `__consumer_offsets` with `partitions` compacted partitions when
/// it does not exist yet. Blocking.
///
/// # Errors
///
/// [`GroupError::Log`] when the topic cannot be recorded or its logs opened.
pub fn ensure_offsets_topic(broker: &Broker, partitions: i32) -> Result<(), GroupError> {
    if broker.registry.get(OFFSETS_TOPIC).is_some() {
        return Ok(());
    }
    let configs: BTreeMap<String, String> = [
        ("cleanup.policy", "compact"),
        ("segment.bytes", OFFSETS_SEGMENT_BYTES),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let fail = |reason: String| GroupError::Log {
        partition: -1,
        reason,
    };
    let meta = broker
        .registry
        .create(OFFSETS_TOPIC, partitions, configs)
        .map_err(|e| fail(format!("creating {OFFSETS_TOPIC}: {e:?}")))?;
    let (log_config, extras) =
        topic_config::log_config(&broker.config, &broker.registry, &meta.configs);
    broker
        .partitions
        .open_partitions(OFFSETS_TOPIC, meta.id, 0..partitions, &log_config, extras)
        .map_err(|e| fail(format!("opening {OFFSETS_TOPIC}: {e}")))?;
    tracing::info!(partitions, "created {OFFSETS_TOPIC}");
    Ok(())
}

#[async_trait]
impl GroupLog for PartitionGroupLog {
    async fn append(&self, partition: i32, records: Vec<GroupLogRecord>) -> Result<(), GroupError> {
        if records.is_empty() {
            return Ok(());
        }
        let target = self.partition(partition)?;
        let records: Vec<Record> = records
            .into_iter()
            .enumerate()
            .map(|(i, r)| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: LEADER_EPOCH.0,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                sequence: -1,
                timestamp: r.timestamp_ms,
                key: Some(r.key),
                value: r.value,
                headers: Default::default(),
            })
            .collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            records.iter(),
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )
        .map_err(|e| GroupError::Log {
            partition,
            reason: format!("encoding batch: {e}"),
        })?;
        let log = Arc::clone(&target.log);
        let bytes = buf.freeze();
        tokio::task::spawn_blocking(move || log.append_as_leader(bytes, LEADER_EPOCH))
            .await
            .map_err(|e| GroupError::Log {
                partition,
                reason: e.to_string(),
            })?
            .map_err(|e| GroupError::Log {
                partition,
                reason: e.to_string(),
            })?;
        if let Some(broker) = self.broker.upgrade() {
            broker.partitions.notify_append();
        }
        Ok(())
    }

    async fn read_all(&self, partition: i32) -> Result<Vec<GroupLogRecord>, GroupError> {
        let Ok(target) = self.partition(partition) else {
            return Ok(Vec::new());
        };
        let log = Arc::clone(&target.log);
        let fail = move |reason: String| GroupError::Log { partition, reason };
        tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            let mut next = log.log_start_offset();
            let end = log.log_end_offset();
            while next < end {
                let read = log
                    .read(next, LOAD_READ_BYTES, end, true)
                    .map_err(|e| fail(e.to_string()))?;
                if read.records.is_empty() {
                    break;
                }
                let before = next;
                for (at, header) in BatchScan::new(&read.records, false) {
                    next = next.max(header.next_offset());
                    if header.is_control() {
                        continue;
                    }
                    let Some(batch) = read.records.get(at..) else {
                        break;
                    };
                    match decode_records(batch) {
                        Ok(records) => {
                            out.extend(records.into_iter().filter(|r| !r.control).filter_map(|r| {
                                Some(GroupLogRecord {
                                    key: r.key?,
                                    value: r.value,
                                    timestamp_ms: r.timestamp,
                                })
                            }))
                        }
                        Err(e) => {
                            tracing::warn!(partition, error = %e, "skipping undecodable batch");
                        }
                    }
                }
                if next <= before {
                    break;
                }
            }
            Ok(out)
        })
        .await
        .map_err(|e| GroupError::Log {
            partition,
            reason: e.to_string(),
        })?
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
    let creating = Arc::clone(broker);
    tokio::task::spawn_blocking(move || ensure_offsets_topic(&creating, partitions))
        .await
        .map_err(|e| GroupError::Log {
            partition: -1,
            reason: e.to_string(),
        })??;
    let (host, port) = broker.advertised();
    let node = CoordinatorNode {
        node_id: broker.config.node_id,
        host,
        port,
    };
    let log = Arc::new(PartitionGroupLog::new(broker));
    let coordinator = GroupCoordinator::load(config, node, Arc::new(SystemClock), log).await?;
    coordinator.set_topic_lookup(Arc::new(RegistryTopics {
        broker: Arc::downgrade(broker),
    }));
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
            }
        );
        check!(got.default_assignor() == "range");
    }
}
