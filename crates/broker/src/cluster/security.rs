//! ACLs and SCRAM users of a cluster member, kept in the cluster's
//! database so every broker authorizes and authenticates alike.
//!
//! [`DbAclStore`] and [`DbScramStore`] are the database behind the
//! authorizer's and the SCRAM users' store traits: a change made on one
//! broker is stored (all or nothing) before that broker serves it, and the
//! other brokers pick it up with the rest of the metadata
//! ([`mirror`], called by every metadata sync). A binding is stored as its
//! canonical JSON text, a credential as the JSON of its salt, keys and
//! iterations; never a password.
//!
//! A sync that read the database just before this broker's own change
//! must not take that change back until the next sync: the stores remember
//! the metadata version of their last write, and an older snapshot leaves
//! what this broker serves as it is.

use {
    crate::{
        broker::Broker,
        security::{
            acl::{
                binding::AclBinding,
                store::{AclStore, AclStoreError},
            },
            credentials::{CredentialStoreError, ScramStore, StoredCredential},
            sasl::scram::{ScramCredential, ScramMechanism},
        },
    },
    krabka_cluster::{Cluster, ClusterError, security::ScramRow, topics::MetadataSnapshot},
    std::sync::{
        Arc,
        atomic::{AtomicI64, Ordering},
    },
    tokio::runtime::Handle,
};

/// Where the stores' errors say they were.
const ACL_TABLE: &str = "cluster database, table acl_bindings";
const SCRAM_TABLE: &str = "cluster database, table scram_credentials";

/// The metadata version of the last security change this broker stored.
#[derive(Debug, Default)]
pub struct WrittenVersion(AtomicI64);

impl WrittenVersion {
    fn wrote(&self, version: i64) {
        self.0.fetch_max(version, Ordering::AcqRel);
    }

    /// Whether a snapshot at `version` is at least as new as every change
    /// this broker stored.
    fn covers(&self, version: i64) -> bool {
        version >= self.0.load(Ordering::Acquire)
    }
}

/// ACL bindings in the cluster's database. Blocking: call from the
/// blocking pool.
#[derive(Debug)]
pub struct DbAclStore {
    cluster: Cluster,
    runtime: Handle,
    written: Arc<WrittenVersion>,
}

fn acl_error(reason: impl std::fmt::Display) -> AclStoreError {
    AclStoreError {
        path: ACL_TABLE.to_owned(),
        reason: reason.to_string(),
    }
}

/// The canonical text of each binding.
fn binding_texts(bindings: &[AclBinding]) -> Result<Vec<String>, AclStoreError> {
    bindings
        .iter()
        .map(|b| serde_json::to_string(b).map_err(acl_error))
        .collect()
}

impl AclStore for DbAclStore {
    fn list(&self) -> Result<Vec<AclBinding>, AclStoreError> {
        let texts = self
            .runtime
            .block_on(self.cluster.acls())
            .map_err(acl_error)?;
        texts
            .iter()
            .map(|t| serde_json::from_str(t).map_err(|e| acl_error(format!("{e} in {t:?}"))))
            .collect()
    }

    fn add(&self, bindings: &[AclBinding]) -> Result<(), AclStoreError> {
        let texts = binding_texts(bindings)?;
        self.wrote(self.runtime.block_on(self.cluster.add_acls(&texts)))
    }

    fn remove(&self, bindings: &[AclBinding]) -> Result<(), AclStoreError> {
        let texts = binding_texts(bindings)?;
        self.wrote(self.runtime.block_on(self.cluster.remove_acls(&texts)))
    }
}

impl DbAclStore {
    /// Remembers the metadata version a write produced.
    fn wrote(&self, version: Result<i64, ClusterError>) -> Result<(), AclStoreError> {
        self.written.wrote(version.map_err(acl_error)?);
        Ok(())
    }
}

/// SCRAM credentials in the cluster's database. Blocking: call from the
/// blocking pool.
#[derive(Debug)]
pub struct DbScramStore {
    cluster: Cluster,
    runtime: Handle,
    written: Arc<WrittenVersion>,
}

fn scram_error(reason: impl std::fmt::Display) -> CredentialStoreError {
    CredentialStoreError {
        path: SCRAM_TABLE.to_owned(),
        reason: reason.to_string(),
    }
}

/// A stored row as a credential; `None` (logged) for one this binary
/// cannot read.
fn credential(user: String, mechanism: &str, text: &str) -> Option<StoredCredential> {
    let Some(parsed) = ScramMechanism::parse(mechanism) else {
        tracing::warn!(%user, mechanism, "unknown SCRAM mechanism in the cluster database");
        return None;
    };
    match serde_json::from_str::<ScramCredential>(text) {
        Ok(credential) => Some(StoredCredential {
            user,
            mechanism: parsed,
            credential,
        }),
        Err(e) => {
            tracing::warn!(%user, mechanism, error = %e, "unreadable SCRAM credential in the cluster database");
            None
        }
    }
}

impl ScramStore for DbScramStore {
    fn list(&self) -> Result<Vec<StoredCredential>, CredentialStoreError> {
        let rows = self
            .runtime
            .block_on(self.cluster.scram_credentials())
            .map_err(scram_error)?;
        Ok(rows
            .into_iter()
            .filter_map(|r| credential(r.user, &r.mechanism, &r.credential))
            .collect())
    }

    fn apply(
        &self,
        upserts: &[StoredCredential],
        deletions: &[(String, ScramMechanism)],
    ) -> Result<(), CredentialStoreError> {
        let upserts = upserts
            .iter()
            .map(|c| {
                Ok(ScramRow {
                    user: c.user.clone(),
                    mechanism: c.mechanism.name().to_owned(),
                    credential: serde_json::to_string(&c.credential).map_err(scram_error)?,
                })
            })
            .collect::<Result<Vec<_>, CredentialStoreError>>()?;
        let deletions: Vec<(String, String)> = deletions
            .iter()
            .map(|(u, m)| (u.clone(), m.name().to_owned()))
            .collect();
        let version = self
            .runtime
            .block_on(self.cluster.apply_scram(&upserts, &deletions))
            .map_err(scram_error)?;
        self.written.wrote(version);
        Ok(())
    }
}

/// Moves `broker`'s ACLs (when it has an authorizer) and SCRAM users to
/// the cluster's database, adding the bootstrap file's users it lacks.
/// Blocking. Returns what the metadata sync needs to mirror them.
///
/// # Errors
///
/// A reason when the database cannot be read or written.
pub fn use_cluster_stores(
    broker: &Broker,
    cluster: &Cluster,
    runtime: &Handle,
) -> Result<Arc<WrittenVersion>, String> {
    let written = Arc::new(WrittenVersion::default());
    if let Some(authorizer) = &broker.security.authorizer {
        authorizer
            .use_store(Arc::new(DbAclStore {
                cluster: cluster.clone(),
                runtime: runtime.clone(),
                written: Arc::clone(&written),
            }))
            .map_err(|e| e.to_string())?;
    }
    broker.security.scram.use_store(Arc::new(DbScramStore {
        cluster: cluster.clone(),
        runtime: runtime.clone(),
        written: Arc::clone(&written),
    }))?;
    Ok(written)
}

/// Serves the ACLs and SCRAM users of `snapshot`, unless this broker stored
/// a change the snapshot does not have yet.
pub fn mirror(broker: &Broker, written: &WrittenVersion, snapshot: &MetadataSnapshot) {
    if !written.covers(snapshot.version) {
        return;
    }
    if let Some(authorizer) = &broker.security.authorizer {
        let bindings = snapshot
            .acls
            .iter()
            .filter_map(|t| match serde_json::from_str::<AclBinding>(t) {
                Ok(b) => Some(b),
                Err(e) => {
                    tracing::warn!(binding = %t, error = %e, "unreadable ACL binding in the cluster database");
                    None
                }
            })
            .collect();
        authorizer.install(bindings);
    }
    broker.security.scram.install(
        snapshot
            .scram
            .iter()
            .filter_map(|((user, mechanism), text)| credential(user.clone(), mechanism, text))
            .collect(),
    );
}
