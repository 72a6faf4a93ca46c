//! The topic registry: topic names, ids, partition counts and config
//! overrides, the cluster id, dynamic broker configs and the producer-id
//! high-water mark, persisted as one JSON file in the log directory.
//!
//! Readers never wait for the disk: every lookup reads an immutable
//! [`Snapshot`] behind an `Arc` that a change replaces once its new state
//! is durable. Produce, fetch and metadata requests look topics up on every
//! call, while changes are rare admin operations that write and fsync the
//! file, so the two are kept apart: a change takes the writer lock, writes
//! the new file crash-safe (temporary file, fsync, rename, directory fsync
//! through [`krabka_ids::durable::write_atomic`]), then swaps the snapshot
//! pointer. After a crash the file holds either the old or the new state,
//! never a torn one.
//!
//! Producer ids are handed out from a block reserved in the file
//! ([`PRODUCER_ID_BLOCK`] at a time): taking one from the block touches no
//! file ([`TopicRegistry::try_allocate_producer_id`]); reserving the next
//! block is a registry change ([`TopicRegistry::reserve_producer_ids`]),
//! which callers holding other locks do outside them.
//!
//! The interface is kept to what a topic store must answer — lookups by
//! name and id, the partition total, and the few changes below — so that a
//! store in another place (cluster mode keeps topics in PostgreSQL) can
//! take its place behind the same methods.

use {
    crate::error::BrokerError,
    krabka_ids::{decode_kafka_uuid, kafka_uuid},
    serde::{Deserialize, Serialize},
    std::{
        collections::{BTreeMap, HashMap},
        fs,
        path::{Path, PathBuf},
        sync::{Arc, Mutex, RwLock},
    },
    uuid::Uuid,
};

/// File name of the registry inside the log directory.
pub const REGISTRY_FILE: &str = "krabka-topics.json";

/// How many producer ids are reserved (persisted) at once.
pub const PRODUCER_ID_BLOCK: i64 = 1000;

/// A topic as the registry knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicMeta {
    /// The topic name.
    pub name: String,
    /// The topic id assigned at creation.
    pub id: Uuid,
    /// Number of partitions.
    pub partitions: i32,
    /// Per-topic config overrides (Kafka topic config names).
    pub configs: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct TopicRecord {
    id: String,
    partitions: i32,
    #[serde(default)]
    configs: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct RegistryFile {
    version: u32,
    cluster_id: String,
    /// Producer ids below this value may have been handed out.
    producer_id_limit: i64,
    topics: BTreeMap<String, TopicRecord>,
    /// Dynamic broker configs by resource name ("" = cluster default, or a node id).
    #[serde(default)]
    broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Group configs (KIP-848) by group id.
    #[serde(default)]
    group_configs: BTreeMap<String, BTreeMap<String, String>>,
}

/// One consistent state of the registry, decoded once per change.
#[derive(Debug)]
struct Snapshot {
    file: RegistryFile,
    topics: BTreeMap<String, TopicMeta>,
    by_id: HashMap<Uuid, String>,
    partitions: i64,
}

impl Snapshot {
    fn new(file: RegistryFile) -> Result<Self, String> {
        let mut topics = BTreeMap::new();
        let mut by_id = HashMap::new();
        let mut partitions = 0i64;
        for (name, record) in &file.topics {
            let id = decode_kafka_uuid(&record.id).map_err(|e| format!("topic {name}: {e}"))?;
            if record.partitions < 1 {
                return Err(format!(
                    "topic {name}: partition count {} is not positive",
                    record.partitions
                ));
            }
            partitions += i64::from(record.partitions);
            by_id.insert(id, name.clone());
            topics.insert(
                name.clone(),
                TopicMeta {
                    name: name.clone(),
                    id,
                    partitions: record.partitions,
                    configs: record.configs.clone(),
                },
            );
        }
        Ok(Self {
            file,
            topics,
            by_id,
            partitions,
        })
    }
}

#[derive(Debug)]
struct ProducerIds {
    /// The next id to hand out.
    next: i64,
    /// Ids below this are reserved in the file.
    limit: i64,
}

/// The persisted registry.
#[derive(Debug)]
pub struct TopicRegistry {
    path: PathBuf,
    /// What readers see; replaced (never changed in place) after a change
    /// is durable.
    current: RwLock<Arc<Snapshot>>,
    /// Serializes changes, held across the file write; readers never take it.
    writer: Mutex<()>,
    producer_ids: Mutex<ProducerIds>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every change is built on a copy and published whole, so a panic while
    // a lock is held cannot leave a half-made state: poisoning is ignored.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl TopicRegistry {
    /// Opens the registry in `log_dir`, creating the directory and a fresh
    /// registry (with a new cluster id) if there is none. An existing file
    /// is read, never rewritten.
    ///
    /// # Errors
    ///
    /// [`BrokerError::Io`] or [`BrokerError::Registry`] if the directory or
    /// file cannot be created or the file does not parse.
    pub fn open(log_dir: &Path) -> Result<Self, BrokerError> {
        match Self::open_existing(log_dir)? {
            Some(registry) => Ok(registry),
            None => Self::format(log_dir, &kafka_uuid(Uuid::new_v4())),
        }
    }

    /// Opens the registry file of `log_dir` if there is one (read only:
    /// nothing is written).
    ///
    /// # Errors
    ///
    /// [`BrokerError::Io`] if the file cannot be read,
    /// [`BrokerError::Registry`] if it does not parse.
    pub fn open_existing(log_dir: &Path) -> Result<Option<Self>, BrokerError> {
        let path = log_dir.join(REGISTRY_FILE);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(BrokerError::Io {
                    action: "read",
                    path,
                    source,
                });
            }
        };
        let registry_error = |reason: String| BrokerError::Registry {
            path: path.clone(),
            reason,
        };
        let file: RegistryFile =
            serde_json::from_slice(&bytes).map_err(|e| registry_error(e.to_string()))?;
        let snapshot = Snapshot::new(file).map_err(registry_error)?;
        Ok(Some(Self::from_snapshot(path, snapshot)))
    }

    /// Writes a fresh, empty registry for cluster `cluster_id` into `log_dir`
    /// (creating the directory), replacing any file there.
    ///
    /// # Errors
    ///
    /// [`BrokerError::Io`] if the directory or file cannot be written.
    pub fn format(log_dir: &Path, cluster_id: &str) -> Result<Self, BrokerError> {
        Self::rebuild(log_dir, cluster_id, &[], 0)
    }

    /// Writes a registry holding `topics` (configs included) and reserving
    /// producer ids below `producer_id_limit`, replacing any file there: the
    /// recovery of a directory whose registry was lost.
    ///
    /// # Errors
    ///
    /// [`BrokerError::Io`] if the file cannot be written,
    /// [`BrokerError::Registry`] if a topic is invalid (a partition count
    /// below 1).
    pub fn rebuild(
        log_dir: &Path,
        cluster_id: &str,
        topics: &[TopicMeta],
        producer_id_limit: i64,
    ) -> Result<Self, BrokerError> {
        fs::create_dir_all(log_dir).map_err(|source| BrokerError::Io {
            action: "create log directory",
            path: log_dir.to_owned(),
            source,
        })?;
        let path = log_dir.join(REGISTRY_FILE);
        let file = RegistryFile {
            version: 1,
            cluster_id: cluster_id.to_owned(),
            producer_id_limit: producer_id_limit.max(0),
            topics: topics
                .iter()
                .map(|t| {
                    (
                        t.name.clone(),
                        TopicRecord {
                            id: kafka_uuid(t.id),
                            partitions: t.partitions,
                            configs: t.configs.clone(),
                        },
                    )
                })
                .collect(),
            broker_configs: BTreeMap::new(),
            group_configs: BTreeMap::new(),
        };
        let snapshot = Snapshot::new(file).map_err(|reason| BrokerError::Registry {
            path: path.clone(),
            reason,
        })?;
        write_file(&path, &snapshot.file)?;
        Ok(Self::from_snapshot(path, snapshot))
    }

    fn from_snapshot(path: PathBuf, snapshot: Snapshot) -> Self {
        let limit = snapshot.file.producer_id_limit;
        Self {
            path,
            current: RwLock::new(Arc::new(snapshot)),
            writer: Mutex::new(()),
            producer_ids: Mutex::new(ProducerIds { next: limit, limit }),
        }
    }

    /// The current state (an `Arc` clone; the read lock is held only for that).
    fn snapshot(&self) -> Arc<Snapshot> {
        Arc::clone(
            &self
                .current
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// Applies `change` to a copy of the state, persists it, then publishes
    /// it. Readers keep seeing the old state until the new one is durable.
    fn update<T>(
        &self,
        change: impl FnOnce(&mut RegistryFile) -> Result<T, RegistryRefusal>,
    ) -> Result<T, RegistryRefusal> {
        let _writer = lock(&self.writer);
        let mut next = self.snapshot().file.clone();
        let value = change(&mut next)?;
        let snapshot = Snapshot::new(next).map_err(RegistryRefusal::Invalid)?;
        write_file(&self.path, &snapshot.file).map_err(RegistryRefusal::Storage)?;
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(snapshot);
        Ok(value)
    }

    /// The cluster id (Kafka's base64 UUID text), fixed at first start.
    #[must_use]
    pub fn cluster_id(&self) -> String {
        self.snapshot().file.cluster_id.clone()
    }

    /// All topics, by name.
    #[must_use]
    pub fn topics(&self) -> Vec<TopicMeta> {
        self.snapshot().topics.values().cloned().collect()
    }

    /// One topic by name.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<TopicMeta> {
        self.snapshot().topics.get(name).cloned()
    }

    /// One topic by id.
    #[must_use]
    pub fn by_id(&self, id: Uuid) -> Option<TopicMeta> {
        let snapshot = self.snapshot();
        let name = snapshot.by_id.get(&id)?;
        snapshot.topics.get(name).cloned()
    }

    /// The number of partitions of all topics together.
    #[must_use]
    pub fn partition_count(&self) -> i64 {
        self.snapshot().partitions
    }

    /// Records a new topic under `id` (its partitions' directories should
    /// exist already: a crash must not leave a recorded topic without them).
    ///
    /// # Errors
    ///
    /// [`RegistryRefusal::Exists`] if the name is taken,
    /// [`RegistryRefusal::Collides`] if it differs from an existing name only
    /// in `.` versus `_`, [`RegistryRefusal::Invalid`] for a partition count
    /// below 1, [`RegistryRefusal::Storage`] if it cannot be persisted.
    pub fn create_with_id(
        &self,
        name: &str,
        id: Uuid,
        partitions: i32,
        configs: BTreeMap<String, String>,
    ) -> Result<TopicMeta, RegistryRefusal> {
        self.update(|file| {
            if file.topics.contains_key(name) {
                return Err(RegistryRefusal::Exists);
            }
            if let Some(other) = file.topics.keys().find(|t| super::names::collides(t, name)) {
                return Err(RegistryRefusal::Collides(other.clone()));
            }
            let record = TopicRecord {
                id: kafka_uuid(id),
                partitions,
                configs: configs.clone(),
            };
            file.topics.insert(name.to_owned(), record);
            Ok(())
        })?;
        Ok(TopicMeta {
            name: name.to_owned(),
            id,
            partitions,
            configs,
        })
    }

    /// Records a new topic under a fresh id.
    ///
    /// # Errors
    ///
    /// As [`TopicRegistry::create_with_id`].
    pub fn create(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
    ) -> Result<TopicMeta, RegistryRefusal> {
        self.create_with_id(name, Uuid::new_v4(), partitions, configs)
    }

    /// Forgets a topic.
    ///
    /// # Errors
    ///
    /// [`RegistryRefusal::Unknown`] or [`RegistryRefusal::Storage`].
    pub fn delete(&self, name: &str) -> Result<TopicMeta, RegistryRefusal> {
        let meta = self.get(name).ok_or(RegistryRefusal::Unknown)?;
        self.update(|file| {
            file.topics.remove(name).ok_or(RegistryRefusal::Unknown)?;
            Ok(())
        })?;
        Ok(meta)
    }

    /// Raises a topic's partition count.
    ///
    /// # Errors
    ///
    /// [`RegistryRefusal::Unknown`], [`RegistryRefusal::Storage`], or
    /// [`RegistryRefusal::Invalid`] when `count` is not larger than today's.
    pub fn set_partitions(&self, name: &str, count: i32) -> Result<i32, RegistryRefusal> {
        self.update(|file| {
            let record = file.topics.get_mut(name).ok_or(RegistryRefusal::Unknown)?;
            if count <= record.partitions {
                return Err(RegistryRefusal::Invalid(format!(
                    "Topic currently has {} partitions, which is higher than the requested {count}.",
                    record.partitions
                )));
            }
            let old = record.partitions;
            record.partitions = count;
            Ok(old)
        })
    }

    /// Replaces a topic's config overrides.
    ///
    /// # Errors
    ///
    /// [`RegistryRefusal::Unknown`] or [`RegistryRefusal::Storage`].
    pub fn set_topic_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<(), RegistryRefusal> {
        self.update(|file| {
            let record = file.topics.get_mut(name).ok_or(RegistryRefusal::Unknown)?;
            record.configs = configs;
            Ok(())
        })
    }

    /// Dynamic broker configs of one resource ("" = cluster default, else a node id).
    #[must_use]
    pub fn broker_configs(&self, resource: &str) -> BTreeMap<String, String> {
        self.snapshot()
            .file
            .broker_configs
            .get(resource)
            .cloned()
            .unwrap_or_default()
    }

    /// Replaces the dynamic broker configs of one resource.
    ///
    /// # Errors
    ///
    /// [`RegistryRefusal::Storage`].
    pub fn set_broker_configs(
        &self,
        resource: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<(), RegistryRefusal> {
        self.update(|file| {
            if configs.is_empty() {
                file.broker_configs.remove(resource);
            } else {
                file.broker_configs.insert(resource.to_owned(), configs);
            }
            Ok(())
        })
    }

    /// Every group's configs, by group id.
    #[must_use]
    pub fn all_group_configs(&self) -> BTreeMap<String, BTreeMap<String, String>> {
        self.snapshot().file.group_configs.clone()
    }

    /// Replaces the configs of one group (none removes its entry).
    ///
    /// # Errors
    ///
    /// [`RegistryRefusal::Storage`].
    pub fn set_group_configs(
        &self,
        group: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<(), RegistryRefusal> {
        self.update(|file| {
            if configs.is_empty() {
                file.group_configs.remove(group);
            } else {
                file.group_configs.insert(group.to_owned(), configs);
            }
            Ok(())
        })
    }

    /// A producer id never handed out before, also across restarts, taken
    /// from the reserved block without touching any file; `None` when the
    /// block is used up (then [`TopicRegistry::reserve_producer_ids`]).
    #[must_use]
    pub fn try_allocate_producer_id(&self) -> Option<i64> {
        let mut ids = lock(&self.producer_ids);
        (ids.next < ids.limit).then(|| {
            let id = ids.next;
            ids.next = id.saturating_add(1);
            id
        })
    }

    /// Reserves (persists) the next block of producer ids if the current one
    /// is used up. Blocking: call it without holding other locks.
    ///
    /// # Errors
    ///
    /// [`RegistryRefusal::Storage`] if the new block cannot be persisted.
    pub fn reserve_producer_ids(&self) -> Result<(), RegistryRefusal> {
        let next = lock(&self.producer_ids).next;
        let limit = self.update(|file| {
            if next < file.producer_id_limit {
                // Another caller reserved a block meanwhile.
                return Ok(file.producer_id_limit);
            }
            file.producer_id_limit = next.saturating_add(PRODUCER_ID_BLOCK);
            Ok(file.producer_id_limit)
        })?;
        let mut ids = lock(&self.producer_ids);
        ids.limit = ids.limit.max(limit);
        Ok(())
    }

    /// Hands out a producer id never handed out before, also across restarts
    /// (ids are reserved in persisted blocks). Blocking when a new block
    /// must be reserved.
    ///
    /// # Errors
    ///
    /// [`RegistryRefusal::Storage`] if a new block cannot be persisted.
    pub fn allocate_producer_id(&self) -> Result<i64, RegistryRefusal> {
        loop {
            if let Some(id) = self.try_allocate_producer_id() {
                return Ok(id);
            }
            self.reserve_producer_ids()?;
        }
    }
}

fn write_file(path: &Path, file: &RegistryFile) -> Result<(), BrokerError> {
    let text = serde_json::to_vec_pretty(file).map_err(|e| BrokerError::Registry {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    krabka_ids::durable::write_atomic(path, &text).map_err(|e| BrokerError::Io {
        action: e.action,
        path: e.path,
        source: e.source,
    })
}

/// Why the registry refused a change.
#[derive(Debug, thiserror::Error)]
pub enum RegistryRefusal {
    /// The topic already exists.
    #[error("Topic already exists.")]
    Exists,
    /// The name collides with an existing topic.
    #[error("Topic collides with existing topic: {0}")]
    Collides(String),
    /// The topic does not exist.
    #[error("This server does not host this topic-partition.")]
    Unknown,
    /// The change itself is invalid.
    #[error("{0}")]
    Invalid(String),
    /// The change could not be persisted.
    #[error(transparent)]
    Storage(BrokerError),
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let registry = TopicRegistry::open(dir.path()).unwrap();
        let cluster = registry.cluster_id();
        let created = registry
            .create(
                "orders",
                3,
                BTreeMap::from([("retention.ms".into(), "1000".into())]),
            )
            .unwrap();
        check!(matches!(
            registry.create("orders", 1, BTreeMap::new()),
            Err(RegistryRefusal::Exists)
        ));
        check!(registry.create("orde_rs", 1, BTreeMap::new()).is_ok());
        check!(matches!(
            registry.create("orde.rs", 1, BTreeMap::new()),
            Err(RegistryRefusal::Collides(_))
        ));
        registry.set_partitions("orders", 5).unwrap();
        check!(registry.set_partitions("orders", 2).is_err());
        check!(registry.partition_count() == 6);
        let pid = registry.allocate_producer_id().unwrap();
        drop(registry);

        let registry = TopicRegistry::open(dir.path()).unwrap();
        check!(registry.cluster_id() == cluster);
        let topic = registry.get("orders").unwrap();
        check!(topic.id == created.id);
        check!(topic.partitions == 5);
        check!(topic.configs.get("retention.ms").map(String::as_str) == Some("1000"));
        check!(registry.by_id(created.id).map(|t| t.name) == Some("orders".to_owned()));
        check!(registry.allocate_producer_id().unwrap() > pid);
        registry.delete("orders").unwrap();
        check!(registry.get("orders").is_none());
        check!(registry.by_id(created.id).is_none());
        check!(registry.partition_count() == 1);
    }

    #[test]
    fn opening_an_existing_registry_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(REGISTRY_FILE);
        TopicRegistry::open(dir.path())
            .unwrap()
            .create("t", 1, BTreeMap::new())
            .unwrap();
        let before = fs::metadata(&path).unwrap();
        let reopened = TopicRegistry::open(dir.path()).unwrap();
        check!(reopened.get("t").is_some());
        // A rewrite would replace the file (write_atomic renames a new one
        // over it): same inode, same mtime means a start wrote nothing, so
        // it works on a full disk.
        let after = fs::metadata(&path).unwrap();
        check!(
            std::os::unix::fs::MetadataExt::ino(&after)
                == std::os::unix::fs::MetadataExt::ino(&before)
        );
        check!(after.modified().unwrap() == before.modified().unwrap());
        check!(
            TopicRegistry::open_existing(&dir.path().join("absent"))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn lookups_are_served_while_a_change_is_being_written() {
        let dir = tempfile::tempdir().unwrap();
        let registry = Arc::new(TopicRegistry::open(dir.path()).unwrap());
        registry.create("a", 1, BTreeMap::new()).unwrap();
        // Hold the writer lock as a change in the middle of its fsync does.
        let writer = lock(&registry.writer);
        let reader = {
            let registry = Arc::clone(&registry);
            std::thread::spawn(move || (registry.get("a").is_some(), registry.topics().len()))
        };
        let (found, count) = reader.join().unwrap();
        check!(found);
        check!(count == 1);
        drop(writer);
    }

    #[test]
    fn producer_ids_come_from_persisted_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let registry = TopicRegistry::open(dir.path()).unwrap();
        // A fresh registry has no block yet: taking an id needs a reservation.
        check!(registry.try_allocate_producer_id().is_none());
        registry.reserve_producer_ids().unwrap();
        let ids: Vec<i64> = (0..PRODUCER_ID_BLOCK)
            .map(|_| registry.try_allocate_producer_id().unwrap())
            .collect();
        check!(ids.first() == Some(&0));
        check!(ids.last() == Some(&(PRODUCER_ID_BLOCK - 1)));
        check!(registry.try_allocate_producer_id().is_none());
        check!(registry.allocate_producer_id().unwrap() == PRODUCER_ID_BLOCK);
        drop(registry);
        // After a restart, ids continue above everything reserved.
        let registry = TopicRegistry::open(dir.path()).unwrap();
        check!(registry.allocate_producer_id().unwrap() == 2 * PRODUCER_ID_BLOCK);
    }
}
