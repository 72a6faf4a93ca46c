//! The authorizer: ACL bindings with Kafka's `StandardAuthorizer` semantics,
//! kept in an [`AclStore`](store::AclStore), decided through an
//! [`AclIndex`](matcher::AclIndex) snapshot.
//!
//! [`binding`] holds the data model and filters, [`matcher`] the decision
//! rules, [`store`] the durable storage. [`Authorizer`] ties them together
//! with `super.users` and `allow.everyone.if.no.acl.found`, and counts
//! changes in a generation number that per-connection decision caches
//! compare against, so a decision is computed once per connection until the
//! ACLs change.

pub mod binding;
pub mod matcher;
pub mod store;

use {
    self::{
        binding::{AclBinding, AclBindingFilter, Operation, ResourceType},
        matcher::{AclIndex, Decision},
        store::{AclStore, AclStoreError},
    },
    std::{
        collections::HashSet,
        sync::{
            Arc, Mutex, PoisonError, RwLock,
            atomic::{AtomicU64, Ordering},
        },
    },
};

/// The class names `authorizer.class.name` accepts: Kafka's KRaft
/// authorizer, and its ZooKeeper-era predecessor with the same semantics.
pub const AUTHORIZER_CLASS_NAMES: &[&str] = &[
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
];

#[derive(Debug, Default)]
struct Snapshot {
    bindings: Vec<AclBinding>,
    index: AclIndex,
}

/// The broker's authorizer.
#[derive(Debug)]
pub struct Authorizer {
    super_users: HashSet<String>,
    allow_if_no_acl: bool,
    /// Replaced once when a broker joins a cluster (its ACLs then live in
    /// the cluster's database).
    store: RwLock<Arc<dyn AclStore>>,
    snapshot: RwLock<Arc<Snapshot>>,
    generation: AtomicU64,
    writes: Mutex<()>,
}

/// Why one binding of a CreateAcls request was not created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateRefusal {
    /// Kafka's error code.
    pub code: i16,
    /// Kafka's message.
    pub message: String,
}

impl Authorizer {
    /// An authorizer over `store`, with `super.users` (`User:a;User:b`) and
    /// `allow.everyone.if.no.acl.found`.
    ///
    /// # Errors
    ///
    /// [`AclStoreError`] when the store cannot be read.
    pub fn new(
        store: Arc<dyn AclStore>,
        super_users: &str,
        allow_if_no_acl: bool,
    ) -> Result<Self, AclStoreError> {
        let bindings = store.list()?;
        let index = AclIndex::new(&bindings);
        tracing::info!(acls = bindings.len(), "authorizer loaded its ACLs");
        Ok(Self {
            super_users: super_users
                .split(';')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
            allow_if_no_acl,
            store: RwLock::new(store),
            snapshot: RwLock::new(Arc::new(Snapshot { bindings, index })),
            generation: AtomicU64::new(1),
            writes: Mutex::new(()),
        })
    }

    fn current(&self) -> Arc<Snapshot> {
        Arc::clone(&self.snapshot.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Changes whenever the ACLs change.
    #[must_use]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Whether `principal` is one of `super.users`.
    #[must_use]
    pub fn is_super_user(&self, principal: &str) -> bool {
        self.super_users.contains(principal)
    }

    /// Whether `principal` (as `Type:name`) connected from `host` may do
    /// `operation` on the resource `resource_type`/`name`.
    #[must_use]
    pub fn authorize(
        &self,
        principal: &str,
        host: &str,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        if self.is_super_user(principal) {
            return true;
        }
        match self
            .current()
            .index
            .decide(principal, host, operation, resource_type, name)
        {
            Decision::Allowed => true,
            Decision::Denied | Decision::NoMatch => false,
            Decision::NoAcls => self.allow_if_no_acl,
        }
    }

    /// Whether `principal` may do `operation` on some resource of
    /// `resource_type` (Kafka's `authorizeByResourceType`).
    #[must_use]
    pub fn authorize_any(
        &self,
        principal: &str,
        host: &str,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        if self.is_super_user(principal) {
            return true;
        }
        let snapshot = self.current();
        if self.allow_if_no_acl && !snapshot.index.has_type(resource_type) {
            return true;
        }
        snapshot
            .index
            .allows_some(principal, host, operation, resource_type)
    }

    /// The bindings `filter` matches.
    #[must_use]
    pub fn describe(&self, filter: &AclBindingFilter) -> Vec<AclBinding> {
        self.current()
            .bindings
            .iter()
            .filter(|b| filter.matches(b))
            .cloned()
            .collect()
    }

    fn store(&self) -> Arc<dyn AclStore> {
        Arc::clone(&self.store.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Keeps the ACLs in `store` from now on, and serves what it holds
    /// (blocking).
    ///
    /// # Errors
    ///
    /// [`AclStoreError`] when `store` cannot be read; nothing changed.
    pub fn use_store(&self, store: Arc<dyn AclStore>) -> Result<(), AclStoreError> {
        let _writing = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
        let bindings = store.list()?;
        *self.store.write().unwrap_or_else(PoisonError::into_inner) = store;
        tracing::info!(acls = bindings.len(), "authorizer loaded its ACLs");
        self.publish(bindings);
        Ok(())
    }

    /// Serves `bindings`, as the store now holds them (changes another
    /// broker of the cluster made); nothing happens when they are the ones
    /// served already.
    pub fn install(&self, mut bindings: Vec<AclBinding>) {
        let _writing = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
        let mut current = self.current().bindings.clone();
        current.sort();
        bindings.sort();
        if current != bindings {
            tracing::info!(acls = bindings.len(), "ACLs changed in the cluster");
            self.publish(bindings);
        }
    }

    fn publish(&self, bindings: Vec<AclBinding>) {
        let index = AclIndex::new(&bindings);
        *self
            .snapshot
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(Snapshot { bindings, index });
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Creates `bindings` durably (blocking); one result per binding.
    pub fn create(&self, bindings: &[AclBinding]) -> Vec<Result<(), CreateRefusal>> {
        let _writing = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
        let mut results: Vec<Result<(), CreateRefusal>> = bindings
            .iter()
            .map(|b| {
                b.validate().map_err(|e| CreateRefusal {
                    code: kafka_protocol::error::ResponseError::InvalidRequest.code(),
                    message: e.0,
                })
            })
            .collect();
        let valid: Vec<AclBinding> = bindings
            .iter()
            .zip(&results)
            .filter(|(_, r)| r.is_ok())
            .map(|(b, _)| b.clone())
            .collect();
        if valid.is_empty() {
            return results;
        }
        match self.store().add(&valid) {
            Ok(()) => {
                let mut all = self.current().bindings.clone();
                for b in valid {
                    if !all.contains(&b) {
                        all.push(b);
                    }
                }
                tracing::info!(acls = all.len(), "ACLs created");
                self.publish(all);
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot store ACLs");
                for r in results.iter_mut().filter(|r| r.is_ok()) {
                    *r = Err(CreateRefusal {
                        code: kafka_protocol::error::ResponseError::UnknownServerError.code(),
                        message: format!("The ACL could not be stored: {e}"),
                    });
                }
            }
        }
        results
    }

    /// Deletes every binding one of `filters` matches, durably (blocking);
    /// returns the bindings each filter matched.
    ///
    /// # Errors
    ///
    /// [`AclStoreError`] when the store cannot be written; nothing was deleted.
    pub fn delete(
        &self,
        filters: &[AclBindingFilter],
    ) -> Result<Vec<Vec<AclBinding>>, AclStoreError> {
        let _writing = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
        let current = self.current();
        let matched: Vec<Vec<AclBinding>> = filters
            .iter()
            .map(|f| {
                current
                    .bindings
                    .iter()
                    .filter(|b| f.matches(b))
                    .cloned()
                    .collect()
            })
            .collect();
        let gone: HashSet<&AclBinding> = matched.iter().flatten().collect();
        if gone.is_empty() {
            return Ok(matched);
        }
        let gone_list: Vec<AclBinding> = gone.iter().map(|b| (*b).clone()).collect();
        self.store().remove(&gone_list)?;
        let rest = current
            .bindings
            .iter()
            .filter(|b| !gone.contains(b))
            .cloned()
            .collect::<Vec<_>>();
        tracing::info!(deleted = gone_list.len(), acls = rest.len(), "ACLs deleted");
        self.publish(rest);
        Ok(matched)
    }
}

/// A connection's cached decisions, valid while the authorizer's generation
/// is the one they were made under. Bounded: a client naming ever new
/// resources only empties it.
#[derive(Debug, Default)]
pub struct DecisionCache {
    generation: u64,
    decisions: std::collections::HashMap<
        (ResourceType, Operation),
        std::collections::HashMap<String, bool>,
    >,
    entries: usize,
}

/// Most decisions one connection caches before starting over.
const CACHE_ENTRIES: usize = 4096;

impl DecisionCache {
    /// The cached decision, or `decide()`'s, remembered.
    pub fn get_or(
        &mut self,
        generation: u64,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
        decide: impl FnOnce() -> bool,
    ) -> bool {
        if generation != self.generation || self.entries >= CACHE_ENTRIES {
            self.decisions.clear();
            self.entries = 0;
            self.generation = generation;
        }
        let by_name = self
            .decisions
            .entry((resource_type, operation))
            .or_default();
        if let Some(&allowed) = by_name.get(name) {
            return allowed;
        }
        let allowed = decide();
        by_name.insert(name.to_owned(), allowed);
        self.entries += 1;
        allowed
    }
}

#[cfg(test)]
mod tests {
    use {
        super::{binding::*, *},
        assert2::check,
    };

    fn allow(name: &str, principal: &str, op: Operation) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern {
                resource_type: ResourceType::Topic,
                name: name.into(),
                pattern_type: PatternType::Literal,
            },
            entry: AccessControlEntry {
                principal: principal.into(),
                host: "*".into(),
                operation: op,
                permission: Permission::Allow,
            },
        }
    }

    fn authorizer(dir: &std::path::Path, supers: &str, allow_if_none: bool) -> Authorizer {
        Authorizer::new(
            Arc::new(store::FileAclStore::open(dir).unwrap()),
            supers,
            allow_if_none,
        )
        .unwrap()
    }

    #[test]
    fn super_users_and_the_no_acl_default() {
        let dir = tempfile::tempdir().unwrap();
        let a = authorizer(dir.path(), "User:admin; User:ops", false);
        check!(a.authorize(
            "User:admin",
            "h",
            Operation::Alter,
            ResourceType::Cluster,
            "kafka-cluster"
        ));
        check!(a.authorize("User:ops", "h", Operation::Write, ResourceType::Topic, "t"));
        check!(!a.authorize(
            "User:alice",
            "h",
            Operation::Write,
            ResourceType::Topic,
            "t"
        ));
        let open = authorizer(dir.path(), "", true);
        check!(open.authorize(
            "User:alice",
            "h",
            Operation::Write,
            ResourceType::Topic,
            "t"
        ));
        open.create(&[allow("t", "User:bob", Operation::Write)]);
        // Once a binding names the topic, only it decides.
        check!(!open.authorize(
            "User:alice",
            "h",
            Operation::Write,
            ResourceType::Topic,
            "t"
        ));
        check!(open.authorize(
            "User:alice",
            "h",
            Operation::Write,
            ResourceType::Topic,
            "u"
        ));
    }

    #[test]
    fn create_describe_delete_and_restart() {
        let dir = tempfile::tempdir().unwrap();
        let a = authorizer(dir.path(), "", false);
        let g0 = a.generation();
        let results = a.create(&[
            allow("t", "User:alice", Operation::Read),
            allow("", "User:alice", Operation::Read),
        ]);
        check!(results[0].is_ok());
        check!(results[1].as_ref().unwrap_err().code == 42);
        check!(a.generation() > g0);
        check!(a.authorize("User:alice", "h", Operation::Read, ResourceType::Topic, "t"));
        let reopened = authorizer(dir.path(), "", false);
        check!(reopened.describe(&AclBindingFilter::any()).len() == 1);
        let deleted = reopened.delete(&[AclBindingFilter::any()]).unwrap();
        check!(deleted[0].len() == 1);
        check!(!reopened.authorize("User:alice", "h", Operation::Read, ResourceType::Topic, "t"));
        check!(
            authorizer(dir.path(), "", false)
                .describe(&AclBindingFilter::any())
                .is_empty()
        );
    }

    #[test]
    fn the_cache_starts_over_when_the_acls_change() {
        let mut cache = DecisionCache::default();
        check!(cache.get_or(1, Operation::Read, ResourceType::Topic, "t", || true));
        check!(cache.get_or(1, Operation::Read, ResourceType::Topic, "t", || false));
        check!(!cache.get_or(2, Operation::Read, ResourceType::Topic, "t", || false));
    }

    #[test]
    fn a_new_store_is_served_and_installed_bindings_change_decisions_once() {
        let dir = tempfile::tempdir().unwrap();
        let a = authorizer(dir.path(), "", false);
        a.create(&[allow("t", "User:bob", Operation::Write)]);
        let other = tempfile::tempdir().unwrap();
        let elsewhere = store::FileAclStore::open(other.path()).unwrap();
        elsewhere
            .add(&[allow("u", "User:carol", Operation::Write)])
            .unwrap();
        // The new store's bindings replace the old store's.
        a.use_store(Arc::new(elsewhere)).unwrap();
        check!(!a.authorize("User:bob", "h", Operation::Write, ResourceType::Topic, "t"));
        check!(a.authorize(
            "User:carol",
            "h",
            Operation::Write,
            ResourceType::Topic,
            "u"
        ));
        // Installing what is served already keeps cached decisions valid;
        // anything else invalidates them.
        let generation = a.generation();
        a.install(vec![allow("u", "User:carol", Operation::Write)]);
        check!(a.generation() == generation);
        a.install(vec![allow("t", "User:bob", Operation::Write)]);
        check!(a.generation() != generation);
        check!(a.authorize("User:bob", "h", Operation::Write, ResourceType::Topic, "t"));
        // Writes now go to the new store.
        a.create(&[allow("v", "User:dave", Operation::Read)]);
        check!(
            store::FileAclStore::open(other.path())
                .unwrap()
                .list()
                .unwrap()
                .len()
                == 2
        );
    }
}
