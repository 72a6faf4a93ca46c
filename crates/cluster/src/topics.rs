//! Topics, their partitions' brokers, topic configs and dynamic broker
//! configs.
//!
//! Every change bumps `cluster.metadata_version` in the same transaction, so
//! a broker learns that anything changed with one cheap query
//! ([`Cluster::metadata_version`]) and then reads one consistent snapshot
//! ([`Cluster::load_metadata`]).

use {
    crate::{Cluster, db::OpError, error::ClusterError},
    deadpool_postgres::GenericClient,
    krabka_ids::BrokerId,
    std::collections::{BTreeMap, BTreeSet},
    tokio_postgres::IsolationLevel,
    uuid::Uuid,
};

/// A topic as the cluster stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicRecord {
    /// Its name.
    pub name: String,
    /// Its id.
    pub id: Uuid,
    /// The broker of each partition, by partition index.
    pub partitions: Vec<BrokerId>,
    /// Its config overrides.
    pub configs: BTreeMap<String, String>,
}

/// Everything brokers share about topics and configs, as of one version.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MetadataSnapshot {
    /// The metadata version the snapshot is at.
    pub version: i64,
    /// The topics, by name.
    pub topics: BTreeMap<String, TopicRecord>,
    /// Dynamic broker configs by resource ("" for the cluster default, else
    /// a node id).
    pub broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// ACL bindings, each as the broker's canonical text of it.
    pub acls: BTreeSet<String>,
    /// SCRAM credentials: (user, mechanism name) to the credential's text.
    pub scram: BTreeMap<(String, String), String>,
}

pub(crate) async fn bump_version<C: GenericClient + Sync>(
    tx: &C,
) -> Result<i64, tokio_postgres::Error> {
    Ok(tx
        .query_one(
            "UPDATE cluster SET metadata_version = metadata_version + 1
             RETURNING metadata_version",
            &[],
        )
        .await?
        .get(0))
}

async fn insert_configs<C: GenericClient + Sync>(
    tx: &C,
    topic: Uuid,
    configs: &BTreeMap<String, String>,
) -> Result<(), tokio_postgres::Error> {
    let names: Vec<&str> = configs.keys().map(String::as_str).collect();
    let values: Vec<&str> = configs.values().map(String::as_str).collect();
    tx.execute(
        "INSERT INTO topic_configs (topic_id, name, value)
         SELECT $1, n, v FROM unnest($2::text[], $3::text[]) AS c(n, v)",
        &[&topic, &names, &values],
    )
    .await?;
    Ok(())
}

async fn insert_partitions<C: GenericClient + Sync>(
    tx: &C,
    topic: Uuid,
    first: i32,
    brokers: &[BrokerId],
) -> Result<(), tokio_postgres::Error> {
    let indexes: Vec<i32> = (first..).take(brokers.len()).collect();
    let nodes: Vec<i32> = brokers.iter().map(|b| b.0).collect();
    tx.execute(
        "INSERT INTO topic_partitions (topic_id, partition, broker_id)
         SELECT $1, p, b FROM unnest($2::integer[], $3::integer[]) AS a(p, b)",
        &[&topic, &indexes, &nodes],
    )
    .await?;
    Ok(())
}

impl Cluster {
    /// The current metadata version (bumped by every topic or config
    /// change).
    ///
    /// # Errors
    ///
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn metadata_version(&self) -> Result<i64, ClusterError> {
        self.db
            .run("metadata_version", async |conn| {
                let row = conn
                    .query_one("SELECT metadata_version FROM cluster", &[])
                    .await?;
                Ok::<_, OpError>(row.get(0))
            })
            .await
    }

    /// One consistent snapshot of topics and configs.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn load_metadata(&self) -> Result<MetadataSnapshot, ClusterError> {
        self.db
            .run("load_metadata", async |conn| {
                let tx = conn
                    .build_transaction()
                    .isolation_level(IsolationLevel::RepeatableRead)
                    .read_only(true)
                    .start()
                    .await?;
                let version: i64 = tx
                    .query_one("SELECT metadata_version FROM cluster", &[])
                    .await?
                    .get(0);
                let mut by_id: BTreeMap<Uuid, TopicRecord> = BTreeMap::new();
                for row in tx.query("SELECT name, topic_id FROM topics", &[]).await? {
                    let id: Uuid = row.get(1);
                    by_id.insert(
                        id,
                        TopicRecord {
                            name: row.get(0),
                            id,
                            partitions: Vec::new(),
                            configs: BTreeMap::new(),
                        },
                    );
                }
                for row in tx
                    .query(
                        "SELECT topic_id, broker_id FROM topic_partitions
                         ORDER BY topic_id, partition",
                        &[],
                    )
                    .await?
                {
                    if let Some(topic) = by_id.get_mut(&row.get::<_, Uuid>(0)) {
                        topic.partitions.push(BrokerId(row.get(1)));
                    }
                }
                for row in tx
                    .query("SELECT topic_id, name, value FROM topic_configs", &[])
                    .await?
                {
                    if let Some(topic) = by_id.get_mut(&row.get::<_, Uuid>(0)) {
                        topic.configs.insert(row.get(1), row.get(2));
                    }
                }
                let mut broker_configs: BTreeMap<String, BTreeMap<String, String>> =
                    BTreeMap::new();
                for row in tx
                    .query("SELECT resource, name, value FROM broker_configs", &[])
                    .await?
                {
                    broker_configs
                        .entry(row.get(0))
                        .or_default()
                        .insert(row.get(1), row.get(2));
                }
                let acls = tx
                    .query("SELECT binding FROM acl_bindings", &[])
                    .await?
                    .into_iter()
                    .map(|row| row.get(0))
                    .collect();
                let scram = tx
                    .query(
                        "SELECT user_name, mechanism, credential FROM scram_credentials",
                        &[],
                    )
                    .await?
                    .into_iter()
                    .map(|row| ((row.get(0), row.get(1)), row.get(2)))
                    .collect();
                tx.commit().await?;
                Ok::<_, OpError>(MetadataSnapshot {
                    version,
                    topics: by_id.into_values().map(|t| (t.name.clone(), t)).collect(),
                    broker_configs,
                    acls,
                    scram,
                })
            })
            .await
    }

    /// Creates a topic with one broker per partition. Returns the new
    /// metadata version.
    ///
    /// # Errors
    ///
    /// [`ClusterError::TopicExists`] when the name (or id) is taken,
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn create_topic(&self, topic: &TopicRecord) -> Result<i64, ClusterError> {
        self.db
            .run("create_topic", async |conn| {
                let tx = conn.transaction().await?;
                let inserted = tx
                    .execute(
                        "INSERT INTO topics (name, topic_id) VALUES ($1, $2)
                         ON CONFLICT DO NOTHING",
                        &[&topic.name, &topic.id],
                    )
                    .await?;
                if inserted == 0 {
                    return Err(ClusterError::TopicExists(topic.name.clone()).into());
                }
                insert_partitions(&tx, topic.id, 0, &topic.partitions).await?;
                insert_configs(&tx, topic.id, &topic.configs).await?;
                let version = bump_version(&tx).await?;
                tx.commit().await?;
                Ok::<_, OpError>(version)
            })
            .await
    }

    /// Deletes a topic with its partitions and configs. Returns its id and
    /// the new metadata version.
    ///
    /// # Errors
    ///
    /// [`ClusterError::UnknownTopic`], [`ClusterError::Database`] /
    /// [`ClusterError::Unavailable`].
    pub async fn delete_topic(&self, name: &str) -> Result<(Uuid, i64), ClusterError> {
        self.delete_topic_in("delete_topic", name, false).await
    }

    /// [`Cluster::delete_topic`] for a topic with data in the remote tier:
    /// the same transaction records each of its partitions as a pending
    /// remote deletion ([`crate::remote_deletions`]), so the topic is gone
    /// only if its deletion is pending, and the other way round.
    ///
    /// # Errors
    ///
    /// As [`Cluster::delete_topic`]; nothing is recorded then.
    pub async fn delete_topic_and_remote_data(
        &self,
        name: &str,
    ) -> Result<(Uuid, i64), ClusterError> {
        self.delete_topic_in("delete_topic_and_remote_data", name, true)
            .await
    }

    async fn delete_topic_in(
        &self,
        op: &'static str,
        name: &str,
        remote_data: bool,
    ) -> Result<(Uuid, i64), ClusterError> {
        self.db
            .run(op, async |conn| {
                let tx = conn.transaction().await?;
                let Some(row) = tx
                    .query_opt(
                        "SELECT topic_id FROM topics WHERE name = $1 FOR UPDATE",
                        &[&name],
                    )
                    .await?
                else {
                    return Err(ClusterError::UnknownTopic(name.to_owned()).into());
                };
                let id: Uuid = row.get(0);
                if remote_data {
                    // Before the row goes: its partitions cascade with it.
                    crate::remote_deletions::insert_pending(&tx, id).await?;
                }
                tx.execute("DELETE FROM topics WHERE topic_id = $1", &[&id])
                    .await?;
                let version = bump_version(&tx).await?;
                tx.commit().await?;
                Ok::<_, OpError>((id, version))
            })
            .await
    }

    /// Adds partitions to a topic that has `current` of them now, one per
    /// broker in `brokers`. Returns the new metadata version.
    ///
    /// # Errors
    ///
    /// [`ClusterError::UnknownTopic`]; [`ClusterError::Invalid`] when the
    /// topic no longer has `current` partitions (a concurrent change);
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn add_partitions(
        &self,
        name: &str,
        current: i32,
        brokers: &[BrokerId],
    ) -> Result<i64, ClusterError> {
        self.db
            .run("add_partitions", async |conn| {
                let tx = conn.transaction().await?;
                let Some(row) = tx
                    .query_opt(
                        "SELECT topic_id FROM topics WHERE name = $1 FOR UPDATE",
                        &[&name],
                    )
                    .await?
                else {
                    return Err(ClusterError::UnknownTopic(name.to_owned()).into());
                };
                let id: Uuid = row.get(0);
                let have: i64 = tx
                    .query_one(
                        "SELECT count(*) FROM topic_partitions WHERE topic_id = $1",
                        &[&id],
                    )
                    .await?
                    .get(0);
                if have != i64::from(current) {
                    return Err(ClusterError::Invalid(format!(
                        "topic {name} has {have} partitions, not {current}"
                    ))
                    .into());
                }
                insert_partitions(&tx, id, current, brokers).await?;
                let version = bump_version(&tx).await?;
                tx.commit().await?;
                Ok::<_, OpError>(version)
            })
            .await
    }

    /// Replaces a topic's config overrides. Returns the new metadata
    /// version.
    ///
    /// # Errors
    ///
    /// [`ClusterError::UnknownTopic`], [`ClusterError::Database`] /
    /// [`ClusterError::Unavailable`].
    pub async fn set_topic_configs(
        &self,
        name: &str,
        configs: &BTreeMap<String, String>,
    ) -> Result<i64, ClusterError> {
        self.db
            .run("set_topic_configs", async |conn| {
                let tx = conn.transaction().await?;
                let Some(row) = tx
                    .query_opt(
                        "SELECT topic_id FROM topics WHERE name = $1 FOR UPDATE",
                        &[&name],
                    )
                    .await?
                else {
                    return Err(ClusterError::UnknownTopic(name.to_owned()).into());
                };
                let id: Uuid = row.get(0);
                tx.execute("DELETE FROM topic_configs WHERE topic_id = $1", &[&id])
                    .await?;
                insert_configs(&tx, id, configs).await?;
                let version = bump_version(&tx).await?;
                tx.commit().await?;
                Ok::<_, OpError>(version)
            })
            .await
    }

    /// Replaces the dynamic configs of a broker resource ("" for the
    /// cluster default, else a node id). Returns the new metadata version.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn set_broker_configs(
        &self,
        resource: &str,
        configs: &BTreeMap<String, String>,
    ) -> Result<i64, ClusterError> {
        let names: Vec<&str> = configs.keys().map(String::as_str).collect();
        let values: Vec<&str> = configs.values().map(String::as_str).collect();
        self.db
            .run("set_broker_configs", async |conn| {
                let tx = conn.transaction().await?;
                tx.execute(
                    "DELETE FROM broker_configs WHERE resource = $1",
                    &[&resource],
                )
                .await?;
                tx.execute(
                    "INSERT INTO broker_configs (resource, name, value)
                     SELECT $1, n, v FROM unnest($2::text[], $3::text[]) AS c(n, v)",
                    &[&resource, &names, &values],
                )
                .await?;
                let version = bump_version(&tx).await?;
                tx.commit().await?;
                Ok::<_, OpError>(version)
            })
            .await
    }
}
