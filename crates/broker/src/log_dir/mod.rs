//! The log directory as a whole: whose it is, who may use it, and what to
//! do when it is full.
//!
//! Opening the directory at start ([`LogDir::open`]) does, in order:
//!
//! 1. take the exclusive lock on `.lock` ([`lock`]), before anything is read
//!    or written, so a second broker pointed at the same directory stops at
//!    once and cannot touch the first one's files;
//! 2. check the directory's identity ([`meta`]): `meta.properties` must name
//!    this node and the registry's cluster. A directory that holds data but
//!    no identity, or an identity but no topic registry, is refused — a
//!    broker that started anyway would write a fresh registry and serve no
//!    topics while the data sits unseen. `krabka recover` rebuilds what is
//!    missing, on purpose ([`recover`]). An empty directory is formatted; a
//!    directory written before `meta.properties` existed (registry, no
//!    identity) is adopted by this node;
//! 3. keep the space reserve in place ([`reserve`]).
//!
//! Nothing that is already in place is rewritten, so a start on a full disk
//! writes nothing.

pub mod lock;
pub mod meta;
pub mod recover;
pub mod reserve;

use {
    crate::{error::BrokerError, topics::REGISTRY_FILE, topics::TopicRegistry},
    lock::{DirLock, LOCK_FILE, LockError},
    meta::{META_PROPERTIES_FILE, MetaProperties},
    reserve::{RESERVE_FILE, SpaceReserve},
    std::path::{Path, PathBuf},
};

/// An opened (locked, identified) log directory.
#[derive(Debug)]
pub struct LogDir {
    path: PathBuf,
    meta: MetaProperties,
    reserve: SpaceReserve,
    // Held for the life of the broker.
    _lock: DirLock,
}

/// The log directory refused to open: the reason names the directory.
fn refused(dir: &Path, reason: String) -> BrokerError {
    BrokerError::LogDir {
        dir: dir.to_owned(),
        reason,
    }
}

/// Takes the exclusive lock of `dir` (creating the directory).
///
/// # Errors
///
/// [`BrokerError::LogDir`] when another process holds it,
/// [`BrokerError::Io`] when the directory or lock file cannot be made.
pub fn lock_dir(dir: &Path) -> Result<DirLock, BrokerError> {
    std::fs::create_dir_all(dir).map_err(|source| BrokerError::Io {
        action: "create log directory",
        path: dir.to_owned(),
        source,
    })?;
    DirLock::acquire(dir).map_err(|e| match e {
        LockError::InUse { .. } => refused(dir, e.to_string()),
        LockError::Io { path, source } => BrokerError::Io {
            action: "lock",
            path,
            source,
        },
    })
}

/// Reads `meta.properties` of `dir`, if there is one.
///
/// # Errors
///
/// [`BrokerError::LogDir`] when it cannot be read or does not parse.
pub fn read_meta(dir: &Path) -> Result<Option<MetaProperties>, BrokerError> {
    let path = dir.join(META_PROPERTIES_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => MetaProperties::parse(&text)
            .map(Some)
            .map_err(|reason| refused(dir, format!("{}: {reason}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(refused(dir, format!("cannot read {}: {e}", path.display()))),
    }
}

/// Writes `meta.properties` of `dir` durably.
///
/// # Errors
///
/// [`BrokerError::Io`] when it cannot be written.
pub fn write_meta(dir: &Path, meta: &MetaProperties) -> Result<(), BrokerError> {
    krabka_ids::durable::write_atomic(&dir.join(META_PROPERTIES_FILE), meta.to_text().as_bytes())
        .map_err(|e| BrokerError::Io {
            action: e.action,
            path: e.path,
            source: e.source,
        })
}

/// Entries of `dir` that are data (anything but the lock, the reserve, the
/// identity and registry files and their temporaries), sorted, at most
/// `limit` of them.
///
/// # Errors
///
/// [`BrokerError::Io`] when the directory cannot be listed.
pub fn data_entries(dir: &Path, limit: usize) -> Result<Vec<String>, BrokerError> {
    let io = |source| BrokerError::Io {
        action: "list",
        path: dir.to_owned(),
        source,
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let name = entry
            .map_err(io)?
            .file_name()
            .to_string_lossy()
            .into_owned();
        let bookkeeping = [LOCK_FILE, RESERVE_FILE, META_PROPERTIES_FILE, REGISTRY_FILE]
            .iter()
            .any(|f| name == *f || name == format!("{f}.tmp"));
        if !bookkeeping {
            out.push(name);
        }
    }
    out.sort();
    out.truncate(limit);
    Ok(out)
}

impl LogDir {
    /// Locks and identifies `dir` for node `node_id` and opens its topic
    /// registry (see the module documentation for the rules).
    ///
    /// # Errors
    ///
    /// [`BrokerError::LogDir`] naming the directory and the problem: in use
    /// by another process, another node's or cluster's directory, data
    /// without identity or registry; [`BrokerError::Io`] /
    /// [`BrokerError::Registry`] when a file cannot be read or written.
    pub fn open(dir: &Path, node_id: i32) -> Result<(Self, TopicRegistry), BrokerError> {
        let lock = lock_dir(dir)?;
        let meta = read_meta(dir)?;
        let registry = TopicRegistry::open_existing(dir)?;
        let recover_hint = "start `krabka recover` with this broker's settings to rebuild it from the partition directories (nothing is changed until you do)";
        let (meta, registry) = match (meta, registry) {
            (Some(meta), Some(registry)) => {
                if meta.node_id != node_id {
                    return Err(refused(
                        dir,
                        format!(
                            "it belongs to node {} ({}), but this broker is node.id={node_id}; if the data was moved here on purpose, set node.id={}; to start a new node, give it an empty log directory",
                            meta.node_id,
                            dir.join(META_PROPERTIES_FILE).display(),
                            meta.node_id
                        ),
                    ));
                }
                if meta.cluster_id != registry.cluster_id() {
                    return Err(refused(
                        dir,
                        format!(
                            "{} names cluster {}, but the topic registry {} belongs to cluster {}: the two files come from different clusters",
                            META_PROPERTIES_FILE,
                            meta.cluster_id,
                            REGISTRY_FILE,
                            registry.cluster_id()
                        ),
                    ));
                }
                (meta, registry)
            }
            (Some(meta), None) => {
                return Err(refused(
                    dir,
                    format!(
                        "it is formatted ({META_PROPERTIES_FILE}: cluster {}, node {}) but its topic registry {REGISTRY_FILE} is missing, so every topic on it would be ignored; {recover_hint}",
                        meta.cluster_id, meta.node_id
                    ),
                ));
            }
            (None, Some(registry)) => {
                // Written before directories had an identity: this node
                // adopts it.
                let meta = MetaProperties::new(registry.cluster_id(), node_id);
                write_meta(dir, &meta)?;
                tracing::warn!(
                    dir = %dir.display(),
                    cluster_id = %meta.cluster_id,
                    node_id,
                    "log directory had no {META_PROPERTIES_FILE}: recorded this node and the registry's cluster"
                );
                (meta, registry)
            }
            (None, None) => {
                let data = data_entries(dir, 5)?;
                if !data.is_empty() {
                    return Err(refused(
                        dir,
                        format!(
                            "it holds data ({}) but neither {META_PROPERTIES_FILE} nor the topic registry {REGISTRY_FILE}; {recover_hint}",
                            data.join(", ")
                        ),
                    ));
                }
                // Registry first: a crash before the identity is written
                // leaves a directory that the next start adopts.
                let registry =
                    TopicRegistry::format(dir, &krabka_ids::kafka_uuid(uuid::Uuid::new_v4()))?;
                let meta = MetaProperties::new(registry.cluster_id(), node_id);
                write_meta(dir, &meta)?;
                tracing::info!(dir = %dir.display(), cluster_id = %meta.cluster_id, node_id, "formatted a new log directory");
                (meta, registry)
            }
        };
        let reserve = SpaceReserve::new(dir);
        if !reserve.ensure() {
            tracing::warn!(dir = %dir.display(), "no room for the space reserve: freeing space on a full disk may fail until there is");
        }
        Ok((
            Self {
                path: dir.to_owned(),
                meta,
                reserve,
                _lock: lock,
            },
            registry,
        ))
    }

    /// The directory.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its identity.
    #[must_use]
    pub fn meta(&self) -> &MetaProperties {
        &self.meta
    }

    /// Its space reserve.
    #[must_use]
    pub fn reserve(&self) -> &SpaceReserve {
        &self.reserve
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    fn message(e: BrokerError) -> String {
        e.to_string()
    }

    #[test]
    fn an_empty_directory_is_formatted_and_reopens_as_the_same_node() {
        let dir = tempfile::tempdir().unwrap();
        let (log_dir, registry) = LogDir::open(dir.path(), 1).unwrap();
        check!(log_dir.meta().node_id == 1);
        check!(log_dir.meta().cluster_id == registry.cluster_id());
        let cluster = registry.cluster_id();
        drop((log_dir, registry));
        let (log_dir, registry) = LogDir::open(dir.path(), 1).unwrap();
        check!(registry.cluster_id() == cluster);
        check!(log_dir.reserve().is_held());
    }

    #[test]
    fn a_second_opener_another_node_and_lost_files_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let opened = LogDir::open(dir.path(), 1).unwrap();
        let busy = message(LogDir::open(dir.path(), 1).unwrap_err());
        check!(busy.contains("in use by another process"));
        check!(busy.contains(&dir.path().display().to_string()));
        drop(opened);

        let other = message(LogDir::open(dir.path(), 7).unwrap_err());
        check!(other.contains("belongs to node 1"));
        check!(other.contains("node.id=7"));

        std::fs::create_dir(dir.path().join("orders-0")).unwrap();
        std::fs::remove_file(dir.path().join(REGISTRY_FILE)).unwrap();
        let lost = message(LogDir::open(dir.path(), 1).unwrap_err());
        check!(lost.contains("topic registry krabka-topics.json is missing"));
        check!(lost.contains("krabka recover"));
        // Nothing was written by the refused starts.
        check!(!dir.path().join(REGISTRY_FILE).exists());

        std::fs::remove_file(dir.path().join(META_PROPERTIES_FILE)).unwrap();
        let bare = message(LogDir::open(dir.path(), 1).unwrap_err());
        check!(bare.contains("holds data (orders-0)"));
    }

    #[test]
    fn a_registry_without_identity_is_adopted_and_a_foreign_cluster_refused() {
        let dir = tempfile::tempdir().unwrap();
        let registry = TopicRegistry::open(dir.path()).unwrap();
        let cluster = registry.cluster_id();
        drop(registry);
        let (log_dir, _) = LogDir::open(dir.path(), 4).unwrap();
        check!(log_dir.meta().cluster_id == cluster);
        check!(read_meta(dir.path()).unwrap().unwrap().node_id == 4);
        drop(log_dir);
        write_meta(dir.path(), &MetaProperties::new("other-cluster".into(), 4)).unwrap();
        let foreign = message(LogDir::open(dir.path(), 4).unwrap_err());
        check!(foreign.contains("names cluster other-cluster"));
    }
}
