//! Pending remote deletions: partitions of deleted topics whose data in the
//! remote tier (the segments a diskless topic's consolidation wrote) is
//! still to be deleted.
//!
//! Brokers are stateless and replaceable, so the work a topic deletion
//! leaves behind cannot be kept on the broker that took the request: the
//! deletion inserts the topic's partitions here in the transaction that
//! deletes the topic row ([`Cluster::delete_topic_and_remote_data`]), so
//! "topic gone" and "deletion pending" commit together or not at all.
//! Every broker's remote log manager then asks for work
//! ([`Cluster::claim_remote_deletions`]), deletes a claimed partition's
//! data and removes its row only once the data is gone
//! ([`Cluster::remove_remote_deletion`]).
//!
//! A claim names the broker and expires by the database's clock. A row is
//! free to claim when it was never claimed, its claim expired, or its
//! claimant's registration is no longer live: a live broker's claim is
//! respected, a dead one's passes to the next broker that asks (within a
//! lease period, not the claim's whole length). A claimant renews its
//! claims by claiming again and gives up one it failed on
//! ([`Cluster::release_remote_deletion`]) so any broker retries it. Two
//! brokers asking at once never get the same row (`FOR UPDATE SKIP
//! LOCKED`), and claiming is conditional on the claimant's own
//! registration being live.

use {
    crate::{Cluster, db::OpError, error::ClusterError, lease::BrokerLease},
    deadpool_postgres::GenericClient,
    krabka_ids::BrokerId,
    std::time::Duration,
    tokio_postgres::Row,
    uuid::Uuid,
};

/// One partition whose remote data is still to be deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingRemoteDeletion {
    /// The deleted topic's id.
    pub topic_id: Uuid,
    /// The deleted topic's name (the tier's paths and the remote metadata
    /// name the partition by both).
    pub topic: String,
    /// The partition index.
    pub partition: i32,
    /// When the topic was deleted, in milliseconds since the epoch by the
    /// database's clock.
    pub added_ms: i64,
    /// The broker whose claim holds now, if any (an expired claim, or one
    /// of a broker no longer live, is no claim).
    pub claimed_by: Option<BrokerId>,
    /// Milliseconds that claim has left (0 without one).
    pub claim_remaining_ms: i64,
}

/// The columns [`PendingRemoteDeletion::from_row`] decodes, of a row `d`
/// joined to its claimant's registration `b`.
const COLUMNS: &str = "d.topic_id, d.topic_name, d.partition,
    (extract(epoch FROM d.added_at) * 1000)::bigint,
    CASE WHEN d.claim_expires_at > clock_timestamp() AND b.lease_expires_at > clock_timestamp()
         THEN d.claimed_by END,
    CASE WHEN d.claim_expires_at > clock_timestamp() AND b.lease_expires_at > clock_timestamp()
         THEN (extract(epoch FROM d.claim_expires_at - clock_timestamp()) * 1000)::bigint
         ELSE 0 END";

impl PendingRemoteDeletion {
    fn from_row(row: &Row) -> Self {
        Self {
            topic_id: row.get(0),
            topic: row.get(1),
            partition: row.get(2),
            added_ms: row.get(3),
            claimed_by: row.get::<_, Option<i32>>(4).map(BrokerId),
            claim_remaining_ms: row.get(5),
        }
    }
}

/// Inside a topic deletion's transaction, before the topic row goes:
/// records every partition of topic `topic` as pending (an entry already
/// there is kept as it is).
pub(crate) async fn insert_pending<C: GenericClient + Sync>(
    tx: &C,
    topic: Uuid,
) -> Result<u64, tokio_postgres::Error> {
    tx.execute(
        "INSERT INTO pending_remote_deletions (topic_id, topic_name, partition)
         SELECT t.topic_id, t.name, p.partition
         FROM topics t JOIN topic_partitions p USING (topic_id)
         WHERE t.topic_id = $1
         ON CONFLICT DO NOTHING",
        &[&topic],
    )
    .await
}

impl Cluster {
    /// Every pending remote deletion, oldest first, with its claim as of
    /// now.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn pending_remote_deletions(
        &self,
    ) -> Result<Vec<PendingRemoteDeletion>, ClusterError> {
        let query = format!(
            "SELECT {COLUMNS}
             FROM pending_remote_deletions d LEFT JOIN brokers b ON b.node_id = d.claimed_by
             ORDER BY d.added_at, d.topic_id, d.partition"
        );
        self.db
            .run("pending_remote_deletions", async |conn| {
                let rows = conn.query(&query, &[]).await?;
                Ok::<_, OpError>(rows.iter().map(PendingRemoteDeletion::from_row).collect())
            })
            .await
    }

    /// Claims for `broker`, for `claim_for` by the database's clock, up to
    /// `limit` pending remote deletions, oldest first: those nobody holds
    /// (never claimed, the claim expired, or its claimant is no longer
    /// live) and the broker's own, whose claims this renews. Rows another
    /// broker is claiming at the same moment are skipped, not waited for.
    /// Conditional on the broker's registration being live.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Fenced`] when the registration lapsed (nothing is
    /// claimed), [`ClusterError::Invalid`] for a limit below 1,
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn claim_remote_deletions(
        &self,
        broker: &BrokerLease,
        limit: i64,
        claim_for: Duration,
    ) -> Result<Vec<PendingRemoteDeletion>, ClusterError> {
        if limit < 1 {
            return Err(ClusterError::Invalid(format!(
                "remote deletion claim limit {limit}"
            )));
        }
        let claim_ms = i64::try_from(claim_for.as_millis()).unwrap_or(i64::MAX);
        self.db
            .run("claim_remote_deletions", async |conn| {
                let tx = conn.transaction().await?;
                crate::Fence::Broker(*broker).check(&tx).await?;
                let rows = tx
                    .query(
                        // The claimant's liveness is a subquery, not a
                        // join: a row locked after a concurrent claim
                        // committed is checked again with its new claimant
                        // (a joined row would keep the old one's).
                        "WITH free AS (
                             SELECT d.topic_id, d.partition
                             FROM pending_remote_deletions d
                             WHERE d.claimed_by IS NULL
                                OR d.claimed_by = $1
                                OR d.claim_expires_at <= clock_timestamp()
                                OR NOT EXISTS (
                                    SELECT 1 FROM brokers b
                                    WHERE b.node_id = d.claimed_by
                                      AND b.lease_expires_at > clock_timestamp())
                             ORDER BY d.added_at, d.topic_id, d.partition
                             LIMIT $2
                             FOR UPDATE SKIP LOCKED
                         )
                         UPDATE pending_remote_deletions d
                         SET claimed_by = $1,
                             claim_expires_at = clock_timestamp()
                                 + $3::bigint * interval '1 millisecond'
                         FROM free
                         WHERE d.topic_id = free.topic_id AND d.partition = free.partition
                         RETURNING d.topic_id, d.topic_name, d.partition,
                                   (extract(epoch FROM d.added_at) * 1000)::bigint,
                                   d.claimed_by, $3::bigint,
                                   (extract(epoch FROM d.added_at) * 1000000)::bigint",
                        &[&broker.node.0, &limit, &claim_ms],
                    )
                    .await?;
                tx.commit().await?;
                // UPDATE ... RETURNING has no order: sort as the claim
                // chose, by the microseconds of `added_at` (two deletions
                // in one millisecond would tie on `added_ms` and fall to
                // the random topic id).
                let mut claimed: Vec<(i64, PendingRemoteDeletion)> = rows
                    .iter()
                    .map(|row| (row.get(6), PendingRemoteDeletion::from_row(row)))
                    .collect();
                claimed.sort_by(|(a_us, a), (b_us, b)| {
                    (a_us, a.topic_id, a.partition).cmp(&(b_us, b.topic_id, b.partition))
                });
                Ok::<_, OpError>(claimed.into_iter().map(|(_, d)| d).collect())
            })
            .await
    }

    /// Gives up `broker`'s claim on one pending deletion (it failed), so
    /// that any broker may claim it next. Answers whether the broker held
    /// it.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn release_remote_deletion(
        &self,
        broker: BrokerId,
        topic_id: Uuid,
        partition: i32,
    ) -> Result<bool, ClusterError> {
        self.db
            .run("release_remote_deletion", async |conn| {
                let released = conn
                    .execute(
                        "UPDATE pending_remote_deletions
                         SET claimed_by = NULL, claim_expires_at = '-infinity'
                         WHERE topic_id = $1 AND partition = $2 AND claimed_by = $3",
                        &[&topic_id, &partition, &broker.0],
                    )
                    .await?;
                Ok::<_, OpError>(released == 1)
            })
            .await
    }

    /// Removes a pending deletion whose remote data is gone, whoever
    /// claims it now (the data is gone either way). Answers whether it was
    /// there.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn remove_remote_deletion(
        &self,
        topic_id: Uuid,
        partition: i32,
    ) -> Result<bool, ClusterError> {
        self.db
            .run("remove_remote_deletion", async |conn| {
                let removed = conn
                    .execute(
                        "DELETE FROM pending_remote_deletions
                         WHERE topic_id = $1 AND partition = $2",
                        &[&topic_id, &partition],
                    )
                    .await?;
                Ok::<_, OpError>(removed == 1)
            })
            .await
    }
}
