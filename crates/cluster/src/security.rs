//! ACL bindings and SCRAM credentials, shared by every broker of the
//! cluster as Kafka shares them through its metadata log.
//!
//! This crate does not know the broker's ACL or credential types: a
//! binding is the broker's canonical text of it, a credential the text of
//! its salt, keys and iterations. Changes bump `cluster.metadata_version`
//! in their transaction, so other brokers read them with the rest of the
//! metadata ([`Cluster::load_metadata`]) within one sync period.

use crate::{Cluster, db::OpError, error::ClusterError, topics::bump_version};

/// One SCRAM credential as the cluster stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramRow {
    /// The user name.
    pub user: String,
    /// The mechanism's name (`SCRAM-SHA-256`, `SCRAM-SHA-512`).
    pub mechanism: String,
    /// Salt, keys and iterations, as the broker writes them.
    pub credential: String,
}

impl Cluster {
    /// Every ACL binding stored.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn acls(&self) -> Result<Vec<String>, ClusterError> {
        self.db
            .run("acls", async |conn| {
                Ok::<_, OpError>(
                    conn.query("SELECT binding FROM acl_bindings", &[])
                        .await?
                        .into_iter()
                        .map(|row| row.get(0))
                        .collect(),
                )
            })
            .await
    }

    /// Every SCRAM credential stored.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn scram_credentials(&self) -> Result<Vec<ScramRow>, ClusterError> {
        self.db
            .run("scram_credentials", async |conn| {
                Ok::<_, OpError>(
                    conn.query(
                        "SELECT user_name, mechanism, credential FROM scram_credentials",
                        &[],
                    )
                    .await?
                    .into_iter()
                    .map(|row| ScramRow {
                        user: row.get(0),
                        mechanism: row.get(1),
                        credential: row.get(2),
                    })
                    .collect(),
                )
            })
            .await
    }

    /// Stores `bindings` (one already stored stays as it is). Returns the
    /// new metadata version.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`]; nothing
    /// is stored then.
    pub async fn add_acls(&self, bindings: &[String]) -> Result<i64, ClusterError> {
        self.change_acls(
            "add_acls",
            "INSERT INTO acl_bindings (binding) SELECT unnest($1::text[])
             ON CONFLICT DO NOTHING",
            bindings,
        )
        .await
    }

    /// Removes `bindings`. Returns the new metadata version.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`]; nothing
    /// is removed then.
    pub async fn remove_acls(&self, bindings: &[String]) -> Result<i64, ClusterError> {
        self.change_acls(
            "remove_acls",
            "DELETE FROM acl_bindings WHERE binding = ANY($1::text[])",
            bindings,
        )
        .await
    }

    /// Runs `statement` on `bindings` and bumps the metadata version, in
    /// one transaction.
    async fn change_acls(
        &self,
        op: &'static str,
        statement: &str,
        bindings: &[String],
    ) -> Result<i64, ClusterError> {
        self.db
            .run(op, async |conn| {
                let tx = conn.transaction().await?;
                tx.execute(statement, &[&bindings]).await?;
                let version = bump_version(&tx).await?;
                tx.commit().await?;
                Ok::<_, OpError>(version)
            })
            .await
    }

    /// Stores `upserts` (replacing a user's credential of the same
    /// mechanism) and removes `deletions` (user, mechanism name), all in one
    /// transaction. Returns the new metadata version.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`]; nothing
    /// changes then.
    pub async fn apply_scram(
        &self,
        upserts: &[ScramRow],
        deletions: &[(String, String)],
    ) -> Result<i64, ClusterError> {
        let users: Vec<&str> = upserts.iter().map(|r| r.user.as_str()).collect();
        let mechanisms: Vec<&str> = upserts.iter().map(|r| r.mechanism.as_str()).collect();
        let credentials: Vec<&str> = upserts.iter().map(|r| r.credential.as_str()).collect();
        let gone_users: Vec<&str> = deletions.iter().map(|(u, _)| u.as_str()).collect();
        let gone_mechanisms: Vec<&str> = deletions.iter().map(|(_, m)| m.as_str()).collect();
        self.db
            .run("apply_scram", async |conn| {
                let tx = conn.transaction().await?;
                tx.execute(
                    "DELETE FROM scram_credentials AS s
                     USING unnest($1::text[], $2::text[]) AS d(u, m)
                     WHERE s.user_name = d.u AND s.mechanism = d.m",
                    &[&gone_users, &gone_mechanisms],
                )
                .await?;
                tx.execute(
                    "INSERT INTO scram_credentials (user_name, mechanism, credential)
                     SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
                     ON CONFLICT (user_name, mechanism)
                     DO UPDATE SET credential = excluded.credential",
                    &[&users, &mechanisms, &credentials],
                )
                .await?;
                let version = bump_version(&tx).await?;
                tx.commit().await?;
                Ok::<_, OpError>(version)
            })
            .await
    }
}
