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
use crate::{broker::Broker, partition::LEADER_EPOCH, topics::config as topic_config};

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

/// The coordinator settings from the broker's explicit settings (Kafka's
/// property names), defaulting as Kafka does.
pub fn group_config(broker: &Broker) -> GroupConfig {
    let explicit = &broker.config.explicit;
    let get = |name: &str| {
        explicit
            .get(name)
            .and_then(|v| v.trim().parse::<i64>().ok())
    };
    let defaults = GroupConfig::default();
    let as_i32 = |v: i64, d: i32| i32::try_from(v).unwrap_or(d);
    GroupConfig {
        offsets_topic_num_partitions: get("offsets.topic.num.partitions")
            .map_or(defaults.offsets_topic_num_partitions, |v| {
                as_i32(v, defaults.offsets_topic_num_partitions).max(1)
            }),
        initial_rebalance_delay_ms: get("group.initial.rebalance.delay.ms")
            .unwrap_or(defaults.initial_rebalance_delay_ms),
        min_session_timeout_ms: get("group.min.session.timeout.ms")
            .map_or(defaults.min_session_timeout_ms, |v| {
                as_i32(v, defaults.min_session_timeout_ms)
            }),
        max_session_timeout_ms: get("group.max.session.timeout.ms")
            .map_or(defaults.max_session_timeout_ms, |v| {
                as_i32(v, defaults.max_session_timeout_ms)
            }),
        max_size: get("group.max.size")
            .and_then(|v| usize::try_from(v).ok())
            .unwrap_or(defaults.max_size),
        offset_metadata_max_bytes: get("offset.metadata.max.bytes")
            .and_then(|v| usize::try_from(v).ok())
            .unwrap_or(defaults.offset_metadata_max_bytes),
        offsets_retention_ms: get("offsets.retention.minutes")
            .map_or(defaults.offsets_retention_ms, |m| m.saturating_mul(60_000)),
        offsets_retention_check_interval_ms: get("offsets.retention.check.interval.ms")
            .unwrap_or(defaults.offsets_retention_check_interval_ms),
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
    let config = group_config(broker);
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
