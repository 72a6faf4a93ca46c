//! The partition manager: every partition this node leads, each owning its
//! `krabka_log::Log`.
//!
//! On a single node the leader is the only replica, so the high watermark is
//! the log end offset and the ISR is this node. All log calls run on
//! tokio's blocking pool so the async workers never wait for the disk; the
//! log itself serializes appends per partition and lets reads proceed beside
//! them. Every append bumps a watch channel that long-polling fetches wait on.

mod append_queue;

pub use append_queue::Appended;

use {
    crate::{error::BrokerError, topics::config::BrokerSideConfig},
    append_queue::AppendQueue,
    bytes::Bytes,
    krabka_ids::LeaderEpoch,
    krabka_log::{Clock, Log, LogCleaner, LogConfig, SystemClock},
    std::{
        collections::HashMap,
        path::{Path, PathBuf},
        sync::{Arc, RwLock},
    },
    tokio::sync::watch,
    uuid::Uuid,
};

/// The leader epoch of every partition: one node, never a leader change.
pub const LEADER_EPOCH: LeaderEpoch = LeaderEpoch(0);

/// Threads that open the partitions of one topic side by side.
const OPEN_THREADS: usize = 8;

/// One partition this node leads.
pub struct Partition {
    /// Topic name.
    pub topic: String,
    /// Topic id.
    pub topic_id: Uuid,
    /// Partition index.
    pub index: i32,
    /// The partition's log.
    pub log: Arc<Log>,
    extras: RwLock<BrokerSideConfig>,
    appends: Arc<AppendQueue>,
}

impl std::fmt::Debug for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.index)
    }
}

impl Partition {
    /// The high watermark: the log end offset on a single node.
    #[must_use]
    pub fn high_watermark(&self) -> i64 {
        self.log.log_end_offset()
    }

    /// Queues a client's batches for appending as leader, behind every
    /// append queued before (see [`append_queue`]); the receiver gets the
    /// log's answer. Must be called within a tokio runtime.
    pub fn queue_append(&self, records: Bytes) -> Appended {
        self.appends.push(&self.log, records)
    }

    /// Broker-side settings (e.g. `min.insync.replicas`).
    #[must_use]
    pub fn extras(&self) -> BrokerSideConfig {
        *self
            .extras
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The partition directory name Kafka uses: `<topic>-<partition>`.
#[must_use]
pub fn partition_dir(log_dir: &Path, topic: &str, index: i32) -> PathBuf {
    log_dir.join(format!("{topic}-{index}"))
}

/// All partitions of this node.
pub struct PartitionManager {
    log_dir: PathBuf,
    clock: Arc<dyn Clock>,
    partitions: RwLock<HashMap<(String, i32), Arc<Partition>>>,
    /// Partitions whose log could not be opened, with the reason: refused
    /// with `KAFKA_STORAGE_ERROR` (Kafka's answer for a partition of a
    /// failed log directory) while the others serve.
    offline: RwLock<HashMap<(String, i32), String>>,
    appended: watch::Sender<u64>,
    cleaner: Option<LogCleaner>,
}

impl std::fmt::Debug for PartitionManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionManager")
            .field("log_dir", &self.log_dir)
            .finish()
    }
}

impl PartitionManager {
    /// An empty manager for partitions under `log_dir`; logs are registered
    /// with `cleaner` (compaction) if there is one.
    #[must_use]
    pub fn new(log_dir: PathBuf, cleaner: Option<LogCleaner>) -> Self {
        Self {
            log_dir,
            clock: Arc::new(SystemClock),
            partitions: RwLock::new(HashMap::new()),
            offline: RwLock::new(HashMap::new()),
            appended: watch::channel(0).0,
            cleaner,
        }
    }

    fn read_map(&self) -> std::sync::RwLockReadGuard<'_, HashMap<(String, i32), Arc<Partition>>> {
        self.partitions
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write_map(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<(String, i32), Arc<Partition>>> {
        self.partitions
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Opens (recovering) or creates partitions `from..to` of a topic. Blocking.
    ///
    /// # Errors
    ///
    /// [`BrokerError::Log`] if a log cannot be opened.
    pub fn open_partitions(
        &self,
        topic: &str,
        topic_id: Uuid,
        range: std::ops::Range<i32>,
        config: &LogConfig,
        extras: BrokerSideConfig,
    ) -> Result<(), BrokerError> {
        let indexes: Vec<i32> = range.collect();
        match self
            .open_available(topic, topic_id, &indexes, config, extras)
            .into_iter()
            .next()
        {
            Some((_, e)) => Err(e),
            None => Ok(()),
        }
    }

    /// Opens (recovering) or creates the partitions `indexes` of a topic,
    /// as far as they open; returns the ones that failed, with their
    /// errors (the caller decides whether they go offline). A coordinator's
    /// state topic is opened refusing corruption (see
    /// [`crate::topics::names::is_state_topic`]). What recovery removed is
    /// counted in the metrics. Blocking.
    pub fn open_available(
        &self,
        topic: &str,
        topic_id: Uuid,
        indexes: &[i32],
        config: &LogConfig,
        extras: BrokerSideConfig,
    ) -> Vec<(i32, BrokerError)> {
        let options = krabka_log::OpenOptions {
            corruption: if crate::topics::names::is_state_topic(topic) {
                krabka_log::CorruptionPolicy::Refuse
            } else {
                krabka_log::CorruptionPolicy::Truncate
            },
            verify_all: false,
        };
        // Opening a log is mostly waiting for fsyncs (a new partition writes
        // its metadata and checkpoints durably); opened side by side, the
        // file system commits them together, which is what makes creating
        // the 50 partitions of an internal topic take milliseconds, not
        // seconds.
        let chunk = indexes.len().div_ceil(OPEN_THREADS).max(1);
        let opened: Vec<Result<(i32, Log), (i32, BrokerError)>> = std::thread::scope(|scope| {
            let workers: Vec<_> = indexes
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || {
                        part.iter()
                            .map(|&index| {
                                let dir = partition_dir(&self.log_dir, topic, index);
                                Log::open_with(
                                    &dir,
                                    topic_id,
                                    config.clone(),
                                    Arc::clone(&self.clock),
                                    options,
                                )
                                .map(|log| (index, log))
                                .map_err(|source| (index, BrokerError::Log { dir, source }))
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| {
                    w.join().unwrap_or_else(|_| {
                        vec![Err((
                            -1,
                            BrokerError::Task(format!("opening a partition of {topic} panicked")),
                        ))]
                    })
                })
                .collect()
        });
        let mut failed = Vec::new();
        for result in opened {
            let (index, log) = match result {
                Ok(opened) => opened,
                Err(failure) => {
                    failed.push(failure);
                    continue;
                }
            };
            crate::metrics::recovery_removed(topic, log.recovery_report());
            self.write_offline().remove(&(topic.to_owned(), index));
            let log = Arc::new(log);
            if let Some(cleaner) = &self.cleaner {
                cleaner.register(&log);
            }
            let partition = Arc::new(Partition {
                topic: topic.to_owned(),
                topic_id,
                index,
                log,
                extras: RwLock::new(extras),
                appends: Arc::default(),
            });
            self.write_map()
                .insert((topic.to_owned(), index), partition);
        }
        failed
    }

    fn write_offline(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<(String, i32), String>> {
        self.offline
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn read_offline(&self) -> std::sync::RwLockReadGuard<'_, HashMap<(String, i32), String>> {
        self.offline
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records that a partition could not be opened: requests for it are
    /// refused with `KAFKA_STORAGE_ERROR` and `reason` is what it reports.
    pub fn mark_offline(&self, topic: &str, index: i32, reason: String) {
        self.write_offline()
            .insert((topic.to_owned(), index), reason);
        crate::metrics::offline_partitions(self.read_offline().len());
    }

    /// Why a partition is offline, if it is.
    #[must_use]
    pub fn offline_reason(&self, topic: &str, index: i32) -> Option<String> {
        self.read_offline().get(&(topic.to_owned(), index)).cloned()
    }

    /// Every offline partition with its reason.
    #[must_use]
    pub fn offline(&self) -> Vec<((String, i32), String)> {
        self.read_offline()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// One partition, if this node has it.
    #[must_use]
    pub fn get(&self, topic: &str, index: i32) -> Option<Arc<Partition>> {
        self.read_map().get(&(topic.to_owned(), index)).cloned()
    }

    /// Every partition, in no particular order.
    #[must_use]
    pub fn all(&self) -> Vec<Arc<Partition>> {
        self.read_map().values().cloned().collect()
    }

    /// Applies a new configuration to every partition of a topic.
    pub fn update_config(&self, topic: &str, config: &LogConfig, extras: BrokerSideConfig) {
        for partition in self.read_map().values().filter(|p| p.topic == topic) {
            partition.log.update_config(config.clone());
            *partition
                .extras
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = extras;
        }
    }

    /// Removes every partition of a topic and deletes its data. Blocking.
    ///
    /// # Errors
    ///
    /// [`BrokerError::Log`] / [`BrokerError::Io`] if the data cannot be removed.
    pub fn delete_topic(&self, topic: &str) -> Result<(), BrokerError> {
        self.delete_partitions(topic, 0)
    }

    /// Removes the partitions `from..` of a topic and deletes their data
    /// (an aborted CreatePartitions). Blocking.
    ///
    /// # Errors
    ///
    /// [`BrokerError::Log`] / [`BrokerError::Io`] if the data cannot be removed.
    pub fn delete_partitions(&self, topic: &str, from: i32) -> Result<(), BrokerError> {
        self.write_offline()
            .retain(|(t, i), _| t != topic || *i < from);
        let removed: Vec<Arc<Partition>> = {
            let mut map = self.write_map();
            let keys: Vec<_> = map
                .keys()
                .filter(|(t, i)| t == topic && *i >= from)
                .cloned()
                .collect();
            keys.iter().filter_map(|k| map.remove(k)).collect()
        };
        for partition in removed {
            let dir = partition.log.dir().to_owned();
            let mut log = Arc::clone(&partition.log);
            drop(partition);
            if let Some(cleaner) = &self.cleaner {
                cleaner.unregister(&log);
            }
            // A fetch still reading holds a clone of the log for a moment;
            // wait for it so the log deletes itself, else close and remove.
            let mut attempts = 0;
            loop {
                match Arc::try_unwrap(log) {
                    Ok(owned) => {
                        owned.delete().map_err(|source| BrokerError::Log {
                            dir: dir.clone(),
                            source,
                        })?;
                        break;
                    }
                    Err(shared) if attempts < 500 => {
                        log = shared;
                        attempts += 1;
                        std::thread::sleep(std::time::Duration::from_millis(10));
                    }
                    Err(shared) => {
                        if let Err(e) = shared.close() {
                            tracing::warn!(dir = %dir.display(), error = %e, "closing deleted log");
                        }
                        std::fs::remove_dir_all(&dir).map_err(|source| BrokerError::Io {
                            action: "remove partition directory",
                            path: dir.clone(),
                            source,
                        })?;
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    /// Closes every log cleanly (flush, producer snapshots, clean marker). Blocking.
    pub fn close_all(&self) {
        if let Some(cleaner) = &self.cleaner {
            cleaner.shutdown();
        }
        for partition in self.all() {
            if let Err(e) = partition.log.close() {
                tracing::error!(partition = ?partition, error = %e, "closing log failed");
            }
        }
    }

    /// Asks the cleaner for a compaction pass now (after a config change).
    pub fn wake_cleaner(&self) {
        if let Some(cleaner) = &self.cleaner {
            cleaner.wake();
        }
    }

    /// Wakes long-polling fetches after an append.
    pub fn notify_append(&self) {
        self.appended.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that changes after every append.
    #[must_use]
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.appended.subscribe()
    }
}
