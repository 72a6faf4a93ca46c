//! Producer-id blocks: each broker's transaction coordinator hands out
//! producer ids from blocks the database allocates, one counter for the
//! whole cluster, so no id ever goes to two brokers.

use {
    crate::{Cluster, db::OpError, error::ClusterError, lease::BrokerLease},
    std::ops::Range,
};

impl Cluster {
    /// Allocates the next `size` producer ids to `broker`, recording the
    /// block. Conditional on the broker's registration being live.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Fenced`] when the registration lapsed,
    /// [`ClusterError::Invalid`] for a size below 1,
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn allocate_producer_ids(
        &self,
        broker: &BrokerLease,
        size: i32,
    ) -> Result<Range<i64>, ClusterError> {
        if size < 1 {
            return Err(ClusterError::Invalid(format!(
                "producer id block size {size}"
            )));
        }
        self.db
            .run("allocate_producer_ids", async |conn| {
                let tx = conn.transaction().await?;
                crate::Fence::Broker(*broker).check(&tx).await?;
                let first: i64 = tx
                    .query_one(
                        "UPDATE cluster SET next_producer_id = next_producer_id + $1
                         RETURNING next_producer_id - $1",
                        &[&i64::from(size)],
                    )
                    .await?
                    .get(0);
                tx.execute(
                    "INSERT INTO producer_id_blocks (first_id, size, node_id) VALUES ($1, $2, $3)",
                    &[&first, &size, &broker.node.0],
                )
                .await?;
                tx.commit().await?;
                Ok::<_, OpError>(first..first + i64::from(size))
            })
            .await
    }
}
