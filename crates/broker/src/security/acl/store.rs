//! Where ACL bindings are kept: a narrow trait, so that cluster mode can keep
//! them in PostgreSQL, and the single-node file store.
//!
//! The file store keeps every binding in one JSON file in the log directory
//! (`krabka-acls.json`), replaced whole through
//! [`krabka_ids::durable::write_atomic`] on every change: ACLs change
//! rarely, and a change that was acknowledged survives `kill -9`.

use {
    super::binding::AclBinding,
    std::{
        collections::BTreeSet,
        path::{Path, PathBuf},
        sync::{Mutex, PoisonError},
    },
};

/// The file name of the single-node store in the log directory.
pub const ACL_FILE: &str = "krabka-acls.json";

/// Why the store could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("ACL store {path}: {reason}")]
pub struct AclStoreError {
    /// The file or table.
    pub path: String,
    /// What went wrong.
    pub reason: String,
}

/// Durable storage of ACL bindings. Every method is blocking.
pub trait AclStore: Send + Sync + std::fmt::Debug {
    /// Every binding stored.
    ///
    /// # Errors
    ///
    /// [`AclStoreError`] when the store cannot be read.
    fn list(&self) -> Result<Vec<AclBinding>, AclStoreError>;

    /// Stores `bindings` (those already stored are left as they are); all of
    /// them or none are durable when this returns.
    ///
    /// # Errors
    ///
    /// [`AclStoreError`] when the store cannot be written; nothing changed.
    fn add(&self, bindings: &[AclBinding]) -> Result<(), AclStoreError>;

    /// Removes `bindings`; all of them or none are durably gone when this
    /// returns.
    ///
    /// # Errors
    ///
    /// [`AclStoreError`] when the store cannot be written; nothing changed.
    fn remove(&self, bindings: &[AclBinding]) -> Result<(), AclStoreError>;
}

/// The single-node store: one JSON file.
#[derive(Debug)]
pub struct FileAclStore {
    path: PathBuf,
    bindings: Mutex<BTreeSet<AclBinding>>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct FileContents {
    version: u32,
    acls: Vec<AclBinding>,
}

impl FileAclStore {
    /// Opens (or starts empty) the store in `log_dir`.
    ///
    /// # Errors
    ///
    /// [`AclStoreError`] when the file exists but cannot be read or parsed:
    /// starting without the ACLs it holds would change who may do what.
    pub fn open(log_dir: &Path) -> Result<Self, AclStoreError> {
        let path = log_dir.join(ACL_FILE);
        let error = |reason: String| AclStoreError {
            path: path.display().to_string(),
            reason,
        };
        let bindings = match std::fs::read(&path) {
            Ok(bytes) => {
                let contents: FileContents =
                    serde_json::from_slice(&bytes).map_err(|e| error(e.to_string()))?;
                if contents.version != 1 {
                    return Err(error(format!("unknown version {}", contents.version)));
                }
                for b in &contents.acls {
                    b.validate().map_err(|e| error(format!("{b:?}: {e}")))?;
                }
                contents.acls.into_iter().collect()
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeSet::new(),
            Err(e) => return Err(error(e.to_string())),
        };
        Ok(Self {
            path,
            bindings: Mutex::new(bindings),
        })
    }

    fn write(&self, next: &BTreeSet<AclBinding>) -> Result<(), AclStoreError> {
        let contents = FileContents {
            version: 1,
            acls: next.iter().cloned().collect(),
        };
        let text = serde_json::to_vec_pretty(&contents).map_err(|e| AclStoreError {
            path: self.path.display().to_string(),
            reason: e.to_string(),
        })?;
        krabka_ids::durable::write_atomic(&self.path, &text).map_err(|e| AclStoreError {
            path: self.path.display().to_string(),
            reason: e.to_string(),
        })
    }

    fn change(&self, f: impl FnOnce(&mut BTreeSet<AclBinding>)) -> Result<(), AclStoreError> {
        let mut bindings = self.bindings.lock().unwrap_or_else(PoisonError::into_inner);
        let mut next = bindings.clone();
        f(&mut next);
        if next != *bindings {
            self.write(&next)?;
            *bindings = next;
        }
        Ok(())
    }
}

impl AclStore for FileAclStore {
    fn list(&self) -> Result<Vec<AclBinding>, AclStoreError> {
        let bindings = self.bindings.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(bindings.iter().cloned().collect())
    }

    fn add(&self, bindings: &[AclBinding]) -> Result<(), AclStoreError> {
        self.change(|set| set.extend(bindings.iter().cloned()))
    }

    fn remove(&self, bindings: &[AclBinding]) -> Result<(), AclStoreError> {
        self.change(|set| {
            for b in bindings {
                set.remove(b);
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        crate::security::acl::binding::{
            AccessControlEntry, Operation, PatternType, Permission, ResourcePattern, ResourceType,
        },
        assert2::check,
    };

    fn binding(name: &str) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern {
                resource_type: ResourceType::Topic,
                name: name.into(),
                pattern_type: PatternType::Prefixed,
            },
            entry: AccessControlEntry {
                principal: "User:alice".into(),
                host: "*".into(),
                operation: Operation::Write,
                permission: Permission::Allow,
            },
        }
    }

    #[test]
    fn bindings_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileAclStore::open(dir.path()).unwrap();
        check!(store.list().unwrap().is_empty());
        store.add(&[binding("a"), binding("b")]).unwrap();
        store.remove(&[binding("a")]).unwrap();
        let reopened = FileAclStore::open(dir.path()).unwrap();
        check!(reopened.list().unwrap() == vec![binding("b")]);
        let text = std::fs::read_to_string(dir.path().join(ACL_FILE)).unwrap();
        check!(text.contains("\"PREFIXED\""));
    }

    #[test]
    fn a_corrupt_file_stops_the_store() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(ACL_FILE), b"{not json").unwrap();
        check!(FileAclStore::open(dir.path()).is_err());
    }
}
