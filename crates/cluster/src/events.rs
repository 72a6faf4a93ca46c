//! Append-only event logs: the partitions of `__remote_log_metadata`.
//!
//! Each shard has dense offsets from 0, handed out under a lock on the
//! shard's head row, so concurrent appenders get distinct increasing offsets
//! and a reader sees every offset below the head. Appends are fenced (by the
//! shard lease or by the appending broker's registration), so a broker
//! declared dead cannot add events.

use crate::{Cluster, db::OpError, error::ClusterError, shards::Fence};

/// One event of a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Its offset in the shard.
    pub offset: i64,
    /// Its key, if keyed.
    pub key: Option<Vec<u8>>,
    /// Its value (`None` for a tombstone).
    pub value: Option<Vec<u8>>,
}

/// An event to append.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NewEvent {
    /// Its key, if keyed.
    pub key: Option<Vec<u8>>,
    /// Its value (`None` for a tombstone).
    pub value: Option<Vec<u8>>,
}

impl Cluster {
    /// Appends `events` to `shard`'s log as one step and
    /// returns their offsets.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Fenced`] when `fence` no longer holds (nothing was
    /// appended), [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn append_events(
        &self,
        fence: &Fence,
        shard: i32,
        events: &[NewEvent],
    ) -> Result<Vec<i64>, ClusterError> {
        let keys: Vec<Option<&[u8]>> = events.iter().map(|e| e.key.as_deref()).collect();
        let values: Vec<Option<&[u8]>> = events.iter().map(|e| e.value.as_deref()).collect();
        let count = i64::try_from(events.len()).unwrap_or(i64::MAX);
        self.db
            .run("append_events", async |conn| {
                let tx = conn.transaction().await?;
                fence.check(&tx).await?;
                tx.execute(
                    "INSERT INTO event_log_heads (shard, next_offset) VALUES ($1, 0)
                     ON CONFLICT DO NOTHING",
                    &[&shard],
                )
                .await?;
                let first: i64 = tx
                    .query_one(
                        "UPDATE event_log_heads SET next_offset = next_offset + $2
                         WHERE shard = $1 RETURNING next_offset - $2",
                        &[&shard, &count],
                    )
                    .await?
                    .get(0);
                tx.execute(
                    "INSERT INTO event_log (shard, \"offset\", key, value)
                     SELECT $1, $2 + i - 1, k, v
                     FROM unnest($3::bytea[], $4::bytea[]) WITH ORDINALITY AS e(k, v, i)",
                    &[&shard, &first, &keys, &values],
                )
                .await?;
                tx.commit().await?;
                Ok::<_, OpError>((first..first + count).collect())
            })
            .await
    }

    /// Up to `limit` events of `shard` from offset `from`, in offset order.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn read_events(
        &self,
        shard: i32,
        from: i64,
        limit: i64,
    ) -> Result<Vec<Event>, ClusterError> {
        self.db
            .run("read_events", async |conn| {
                let rows = conn
                    .query(
                        "SELECT \"offset\", key, value FROM event_log
                         WHERE shard = $1 AND \"offset\" >= $2
                         ORDER BY \"offset\" LIMIT $3",
                        &[&shard, &from, &limit],
                    )
                    .await?;
                Ok::<_, OpError>(
                    rows.iter()
                        .map(|row| Event {
                            offset: row.get(0),
                            key: row.get(1),
                            value: row.get(2),
                        })
                        .collect(),
                )
            })
            .await
    }
}
