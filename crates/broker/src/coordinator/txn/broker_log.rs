//! The transaction coordinator over the broker: `__transaction_state` as its
//! log, the partitions as its marker writer, the registry's allocator as its
//! producer ids, and its startup.
//!
//! `__transaction_state` is an ordinary topic of this broker: 50 partitions
//! (`transaction.state.log.num.partitions`), `cleanup.policy=compact`,
//! created on first start through the plumbing the group coordinator uses
//! too ([`state_topic`]). On start the coordinator replays it, then at once
//! completes every transaction it finds preparing (markers, then the
//! completion record) and aborts those already past their timeout, before
//! the listener serves clients.
//!
//! Markers are written by [`super::local_markers`] (shared with the
//! WriteTxnMarkers handler): those for `__consumer_offsets` go through the
//! group coordinator, which turns the transaction's pending offsets into
//! committed ones (or drops them) as it appends the marker.
//!
//! The seams hold `Weak` references to the broker, because the broker owns
//! the coordinator that owns them.

use {
    super::{
        TRANSACTION_STATE_TOPIC,
        config::TxnConfig,
        coordinator::{MarkerError, MarkerWriter, ProducerIdSource, TransactionCoordinator},
        error::TxnError,
        log::TxnStateLog,
        state::TopicPartition,
    },
    crate::{
        broker::Broker,
        coordinator::state_topic::{self, CoordinatorRecord},
        partition::Partition,
    },
    krabka_ids::ProducerId,
    krabka_log::{ControlMarker, SystemClock},
    std::{
        sync::{Arc, Weak},
        time::Duration,
    },
};

/// `__transaction_state` partitions of this broker as the coordinator's log.
struct PartitionTxnLog {
    broker: Weak<Broker>,
}

impl PartitionTxnLog {
    fn log(&self, partition: i32) -> Result<Arc<Partition>, TxnError> {
        let broker = self
            .broker
            .upgrade()
            .ok_or_else(|| TxnError::NotCoordinator("the broker is shutting down".into()))?;
        broker
            .partitions
            .get(TRANSACTION_STATE_TOPIC, partition)
            .ok_or_else(|| {
                TxnError::NotCoordinator(format!(
                    "{TRANSACTION_STATE_TOPIC}-{partition} is not hosted here"
                ))
            })
    }
}

impl TxnStateLog for PartitionTxnLog {
    fn append(&self, partition: i32, record: CoordinatorRecord) -> Result<(), TxnError> {
        let target = self.log(partition)?;
        state_topic::append(target.local_log(), &[record], None).map_err(|e| {
            TxnError::NotCoordinator(format!("{TRANSACTION_STATE_TOPIC}-{partition}: {e}"))
        })?;
        target.notify_appended();
        Ok(())
    }

    fn read_all(&self, partition: i32) -> Result<Vec<CoordinatorRecord>, TxnError> {
        if let Some(reason) = self.broker.upgrade().and_then(|b| {
            b.partitions
                .offline_reason(TRANSACTION_STATE_TOPIC, partition)
        }) {
            return Err(TxnError::NotCoordinator(format!(
                "{TRANSACTION_STATE_TOPIC}-{partition} is offline: {reason}"
            )));
        }
        let Ok(target) = self.log(partition) else {
            return Ok(Vec::new());
        };
        let entries = state_topic::read_all(target.local_log()).map_err(|e| {
            TxnError::NotCoordinator(format!("{TRANSACTION_STATE_TOPIC}-{partition}: {e}"))
        })?;
        Ok(entries
            .into_iter()
            .filter_map(|e| match e {
                state_topic::LoadedEntry::Record { record, .. } => Some(record),
                state_topic::LoadedEntry::Marker { .. } => None,
            })
            .collect())
    }
}

/// Markers go into the partitions' logs; those for `__consumer_offsets`
/// through the group coordinator.
struct PartitionMarkers {
    broker: Weak<Broker>,
    runtime: tokio::runtime::Handle,
}

impl MarkerWriter for PartitionMarkers {
    fn write_marker(
        &self,
        partition: &TopicPartition,
        marker: ControlMarker,
    ) -> Result<(), MarkerError> {
        let broker = self
            .broker
            .upgrade()
            .ok_or_else(|| MarkerError::Failed("the broker is shutting down".into()))?;
        super::local_markers::write_local_marker(&broker, &self.runtime, partition, marker)
            .map_err(MarkerError::from)
    }
}

/// Producer ids from the registry's persisted allocator (shared with
/// idempotent producers, so no id is ever handed out twice).
struct RegistryIds {
    broker: Weak<Broker>,
}

impl RegistryIds {
    fn broker(&self) -> Result<Arc<Broker>, TxnError> {
        self.broker
            .upgrade()
            .ok_or_else(|| TxnError::Storage("the broker is shutting down".into()))
    }
}

impl ProducerIdSource for RegistryIds {
    fn allocate(&self) -> Result<ProducerId, TxnError> {
        self.broker()?
            .allocate_producer_id()
            .map(ProducerId)
            .map_err(TxnError::Storage)
    }

    fn try_allocate(&self) -> Result<Option<ProducerId>, TxnError> {
        Ok(self.broker()?.try_allocate_producer_id().map(ProducerId))
    }

    fn refill(&self) -> Result<(), TxnError> {
        self.broker()?
            .reserve_producer_ids()
            .map_err(TxnError::Storage)
    }
}

/// Starts the transaction coordinator of `broker`: creates
/// `__transaction_state` if needed, replays it, completes what was
/// preparing, and starts the periodic tasks (timeouts, id expiry, producer
/// id expiry). Call after the group coordinator has started (markers for
/// `__consumer_offsets` go through it) and before serving clients.
///
/// # Errors
///
/// [`TxnError::NotCoordinator`] when the topic cannot be created or read.
pub async fn start(broker: &Arc<Broker>) -> Result<Arc<TransactionCoordinator>, TxnError> {
    let mut config = TxnConfig::from_broker(&broker.config);
    let runtime = tokio::runtime::Handle::current();
    let markers = Arc::new(PartitionMarkers {
        broker: Arc::downgrade(broker),
        runtime: runtime.clone(),
    });
    let ids = Arc::new(RegistryIds {
        broker: Arc::downgrade(broker),
    });
    let coordinator = if let Some(cluster) = broker.cluster.get() {
        // Cluster mode: the state lives in the database, shard by shard,
        // and is loaded as this broker takes shards; markers for partitions
        // of other brokers go to them with WriteTxnMarkers.
        let node = Arc::clone(cluster);
        let markers = Arc::new(crate::cluster::markers::RoutedMarkers::new(
            markers,
            Arc::new(move |partition: &TopicPartition| {
                crate::cluster::coordinators::marker_route(&node, partition)
            }),
            broker.peers(),
            runtime.clone(),
        ));
        TransactionCoordinator::by_lease(
            config,
            Arc::new(crate::cluster::coordinator_state::DbTxnStateLog::new(
                Arc::clone(cluster),
                runtime,
            )),
            markers,
            ids,
            Arc::new(SystemClock),
        )
    } else {
        let b = Arc::clone(broker);
        crate::blocking::run(move || {
            state_topic::ensure_topic(
                &b,
                TRANSACTION_STATE_TOPIC,
                config.state_log_partitions,
                config.state_log_segment_bytes,
            )
            .map_err(TxnError::NotCoordinator)?;
            // An existing topic keeps its partition count (as on Kafka, the
            // setting only matters when the topic is created).
            if let Some(meta) = b.registry.get(TRANSACTION_STATE_TOPIC) {
                config.state_log_partitions = meta.partitions.max(1);
            }
            let coordinator = TransactionCoordinator::load(
                config,
                Arc::new(PartitionTxnLog {
                    broker: Arc::downgrade(&b),
                }),
                markers,
                ids,
                Arc::new(SystemClock),
            )?;
            let (ids, open) = coordinator.with_state(|s| {
                let open = s.iter().filter(|(_, m)| !m.partitions.is_empty()).count();
                (s.iter().count(), open)
            });
            let completed = coordinator.tick();
            tracing::info!(
                transactional_ids = ids,
                open,
                completed,
                "transaction coordinator loaded {TRANSACTION_STATE_TOPIC}"
            );
            Ok::<_, TxnError>(coordinator)
        })
        .await
        .map_err(|e| TxnError::NotCoordinator(e.to_string()))??
    };
    let coordinator = Arc::new(coordinator);
    let config = coordinator.config().clone();
    let weak = Arc::downgrade(&coordinator);
    every(
        broker,
        config.abort_interval_ms,
        weak.clone(),
        |c: &TransactionCoordinator| {
            c.tick();
        },
    );
    every(
        broker,
        config.remove_expired_interval_ms,
        weak,
        |c: &TransactionCoordinator| {
            c.expire_transactional_ids();
        },
    );
    super::producers::spawn_expiration(broker, &config);
    Ok(coordinator)
}

/// Runs `work` on the blocking pool every `interval_ms` until shutdown or
/// until the coordinator is gone.
fn every(
    broker: &Broker,
    interval_ms: u64,
    coordinator: Weak<TransactionCoordinator>,
    work: fn(&TransactionCoordinator),
) {
    let mut shutdown = broker.shutdown_signal();
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(Duration::from_millis(interval_ms.max(1)));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = shutdown.changed() => return,
            }
            if *shutdown.borrow() {
                return;
            }
            let Some(c) = coordinator.upgrade() else {
                return;
            };
            if crate::blocking::run(move || work(&c)).await.is_err() {
                return;
            }
        }
    });
}
