//! [`DbDeletionStore`]: the pending remote deletions of deleted topics in
//! the cluster database (`krabka_cluster::remote_deletions`), as the remote
//! log manager's task works through them (`crate::remote::delete`).
//!
//! A topic's deletion records its partitions there in the transaction that
//! deletes the topic ([`ClusterNode::delete_topic`] with `remote_data`), so
//! the work outlives the broker that took the request. Every broker's task
//! pass claims entries for itself (a claim holds while this broker's
//! registration is live and for at most [`CLAIM`]), deletes their remote
//! data, removes each entry once its data is gone and gives up the claim
//! on one that failed, so any broker's next pass retries it.

use {
    super::ClusterNode,
    crate::{
        error::BrokerError,
        remote::delete::{DeletionCause, DeletionStore, PendingDeletion},
    },
    krabka_remote_storage::TopicIdPartition,
    std::time::Duration,
};

/// How long a claim lasts unless renewed (every pass renews this broker's
/// claims). A dead broker's claims pass on once its registration lapses;
/// this bounds how long a live one that stopped making passes keeps them.
pub const CLAIM: Duration = Duration::from_secs(10 * 60);
/// Entries one pass claims at most (the next pass takes more).
pub const CLAIM_LIMIT: i64 = 64;

/// The cluster database's pending remote deletions, as one broker works
/// through them. Blocking: its calls wait on the member's runtime, so they
/// run on the remote log manager's blocking thread.
#[derive(Debug, Clone, Copy)]
pub struct DbDeletionStore<'a> {
    node: &'a ClusterNode,
}

impl<'a> DbDeletionStore<'a> {
    /// The store as `node` sees it.
    #[must_use]
    pub fn new(node: &'a ClusterNode) -> Self {
        Self { node }
    }
}

impl DeletionStore for DbDeletionStore<'_> {
    fn name(&self) -> &'static str {
        "the cluster database"
    }

    fn take(&self) -> Result<Vec<PendingDeletion>, BrokerError> {
        // A broker whose registration lapsed claims nothing (the others
        // may be taking its claims over right now).
        let Some(lease) = self.node.broker_lease() else {
            return Ok(Vec::new());
        };
        let claimed = self
            .node
            .runtime
            .block_on(
                self.node
                    .cluster
                    .claim_remote_deletions(&lease, CLAIM_LIMIT, CLAIM),
            )?;
        if !claimed.is_empty() {
            tracing::info!(
                entries = claimed.len(),
                "claimed pending remote deletions of deleted topics"
            );
        }
        Ok(claimed
            .into_iter()
            .map(|e| PendingDeletion {
                cause: DeletionCause::TopicDeleted,
                partition: TopicIdPartition::new(e.topic_id, e.topic, e.partition),
            })
            .collect())
    }

    fn finished(&self, entry: &PendingDeletion) -> Result<(), BrokerError> {
        let tp = &entry.partition;
        self.node.runtime.block_on(
            self.node
                .cluster
                .remove_remote_deletion(tp.topic_id(), tp.partition()),
        )?;
        Ok(())
    }

    fn failed(&self, entry: &PendingDeletion) -> Result<(), BrokerError> {
        let tp = &entry.partition;
        self.node
            .runtime
            .block_on(self.node.cluster.release_remote_deletion(
                self.node.node(),
                tp.topic_id(),
                tp.partition(),
            ))?;
        Ok(())
    }
}
