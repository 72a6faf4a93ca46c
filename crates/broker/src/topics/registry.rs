//! The topic registry: topic names, ids, partition counts and config
//! overrides, the cluster id, dynamic broker configs and the producer-id
//! high-water mark, persisted as one JSON file in the log directory.
//!
//! Every change is written crash-safe (temporary file, fsync, rename, fsync
//! of the directory), so after a crash the file holds either the old or the
//! new state, never a torn one. Changes are rare (admin operations), so one
//! lock around the whole state is enough.

use {
    crate::error::BrokerError,
    krabka_ids::{decode_kafka_uuid, kafka_uuid},
    serde::{Deserialize, Serialize},
    std::{
        collections::BTreeMap,
        fs,
        path::{Path, PathBuf},
        sync::Mutex,
    },
    uuid::Uuid,
};

/// File name of the registry inside the log directory.
pub const REGISTRY_FILE: &str = "krabka-topics.json";

/// How many producer ids are reserved (persisted) at once.
const PRODUCER_ID_BLOCK: i64 = 1000;

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

#[derive(Debug)]
struct State {
    file: RegistryFile,
    next_producer_id: i64,
}

/// The persisted registry.
#[derive(Debug)]
pub struct TopicRegistry {
    path: PathBuf,
    state: Mutex<State>,
}

impl TopicRegistry {
    /// Opens the registry in `log_dir`, creating the directory and a fresh
    /// registry (with a new cluster id) if there is none.
    ///
    /// # Errors
    ///
    /// [`BrokerError::Io`] or [`BrokerError::Registry`] if the directory or
    /// file cannot be created or the file does not parse.
    pub fn open(log_dir: &Path) -> Result<Self, BrokerError> {
        fs::create_dir_all(log_dir).map_err(|source| BrokerError::Io {
            action: "create log directory",
            path: log_dir.to_owned(),
            source,
        })?;
        let path = log_dir.join(REGISTRY_FILE);
        let registry_error = |reason: String| BrokerError::Registry {
            path: path.clone(),
            reason,
        };
        let file = match fs::read(&path) {
            Ok(bytes) => {
                let file: RegistryFile =
                    serde_json::from_slice(&bytes).map_err(|e| registry_error(e.to_string()))?;
                for (name, topic) in &file.topics {
                    decode_kafka_uuid(&topic.id)
                        .map_err(|e| registry_error(format!("topic {name}: {e}")))?;
                }
                file
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => RegistryFile {
                version: 1,
                cluster_id: kafka_uuid(Uuid::new_v4()),
                producer_id_limit: 0,
                topics: BTreeMap::new(),
                broker_configs: BTreeMap::new(),
                group_configs: BTreeMap::new(),
            },
            Err(source) => {
                return Err(BrokerError::Io {
                    action: "read",
                    path,
                    source,
                });
            }
        };
        let next_producer_id = file.producer_id_limit;
        let registry = Self {
            path,
            state: Mutex::new(State {
                file,
                next_producer_id,
            }),
        };
        {
            let state = registry.lock();
            registry.persist(&state.file)?;
        }
        Ok(registry)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the state half-changed
        // (every change is applied to a copy first), so poisoning is ignored.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn persist(&self, file: &RegistryFile) -> Result<(), BrokerError> {
        let text = serde_json::to_vec_pretty(file).map_err(|e| BrokerError::Registry {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        krabka_ids::durable::write_atomic(&self.path, &text).map_err(|e| BrokerError::Io {
            action: e.action,
            path: e.path,
            source: e.source,
        })
    }

    /// Applies `change` to a copy of the state, persists it, then keeps it.
    fn update<T>(
        &self,
        change: impl FnOnce(&mut RegistryFile) -> Result<T, RegistryRefusal>,
    ) -> Result<T, RegistryRefusal> {
        let mut state = self.lock();
        let mut next = state.file.clone();
        let value = change(&mut next)?;
        self.persist(&next).map_err(RegistryRefusal::Storage)?;
        state.file = next;
        Ok(value)
    }

    /// The cluster id (Kafka's base64 UUID text), fixed at first start.
    #[must_use]
    pub fn cluster_id(&self) -> String {
        self.lock().file.cluster_id.clone()
    }

    /// All topics, by name.
    #[must_use]
    pub fn topics(&self) -> Vec<TopicMeta> {
        self.lock()
            .file
            .topics
            .iter()
            .filter_map(|(name, t)| meta(name, t))
            .collect()
    }

    /// One topic by name.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<TopicMeta> {
        let state = self.lock();
        state.file.topics.get(name).and_then(|t| meta(name, t))
    }

    /// One topic by id.
    #[must_use]
    pub fn by_id(&self, id: Uuid) -> Option<TopicMeta> {
        let text = kafka_uuid(id);
        let state = self.lock();
        state
            .file
            .topics
            .iter()
            .find(|(_, t)| t.id == text)
            .and_then(|(name, t)| meta(name, t))
    }

    /// Records a new topic.
    ///
    /// # Errors
    ///
    /// [`RegistryRefusal::Exists`] if the name is taken,
    /// [`RegistryRefusal::Collides`] if it differs from an existing name only
    /// in `.` versus `_`, [`RegistryRefusal::Storage`] if it cannot be persisted.
    pub fn create(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
    ) -> Result<TopicMeta, RegistryRefusal> {
        self.create_with_id(name, Uuid::new_v4(), partitions, configs)
    }

    /// Records a new topic under an id chosen elsewhere (cluster mode: the
    /// cluster database's).
    ///
    /// # Errors
    ///
    /// As [`TopicRegistry::create`].
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

    /// Forgets a topic.
    ///
    /// # Errors
    ///
    /// [`RegistryRefusal::Unknown`] or [`RegistryRefusal::Storage`].
    pub fn delete(&self, name: &str) -> Result<TopicMeta, RegistryRefusal> {
        self.update(|file| {
            let record = file.topics.remove(name).ok_or(RegistryRefusal::Unknown)?;
            meta(name, &record).ok_or(RegistryRefusal::Unknown)
        })
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
        self.lock()
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
        self.lock().file.group_configs.clone()
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

    /// Hands out a producer id never handed out before, also across restarts
    /// (ids are reserved in persisted blocks).
    ///
    /// # Errors
    ///
    /// [`RegistryRefusal::Storage`] if a new block cannot be persisted.
    pub fn allocate_producer_id(&self) -> Result<i64, RegistryRefusal> {
        let mut state = self.lock();
        if state.next_producer_id >= state.file.producer_id_limit {
            let mut next = state.file.clone();
            next.producer_id_limit = state.next_producer_id.saturating_add(PRODUCER_ID_BLOCK);
            self.persist(&next).map_err(RegistryRefusal::Storage)?;
            state.file = next;
        }
        let id = state.next_producer_id;
        state.next_producer_id = id.saturating_add(1);
        Ok(id)
    }
}

fn meta(name: &str, record: &TopicRecord) -> Option<TopicMeta> {
    Some(TopicMeta {
        name: name.to_owned(),
        id: decode_kafka_uuid(&record.id).ok()?,
        partitions: record.partitions,
        configs: record.configs.clone(),
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
    }
}
