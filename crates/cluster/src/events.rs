//! Append-only event logs: the partitions of `__remote_log_metadata`.
//!
//! Each shard has dense offsets from 0, handed out under a lock on the
//! shard's head row, so concurrent appenders get distinct increasing offsets
//! and a reader sees every offset below the head. Appends are fenced (by the
//! shard lease or by the appending broker's registration), so a broker
//! declared dead cannot add events.
//!
//! The broker's remote log metadata manager reads these logs as the
//! partitions of a topic: [`Cluster::append_event_group`] writes records for
//! several shards in one transaction (heads locked in shard order, so two
//! groups cannot deadlock), [`Cluster::read_event_pages`] reads a bounded
//! page of several shards in one round trip, and
//! [`Cluster::event_log_heads`] gives each shard's high water mark; the
//! number of shards is fixed by the first broker that opens the log
//! ([`Cluster::event_log_partitions`]), as a topic keeps the count it was
//! created with. Every
//! append announces itself on [`EVENT_APPENDS`] inside its transaction, so
//! readers on other brokers wake when it commits
//! ([`Cluster::watch_event_appends`]); a notification is only a hint, and a
//! reader that missed one finds the events on its next read.

use {
    crate::{Cluster, db::OpError, error::ClusterError, shards::Fence},
    std::{sync::Arc, time::Duration},
};

/// The channel event appends are announced on (the payload is the shards
/// appended to, comma-separated).
pub const EVENT_APPENDS: &str = "krabka_event_appends";

/// Longest pause between attempts to listen again.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

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
                tx.execute(
                    "SELECT pg_notify($1, $2)",
                    &[&EVENT_APPENDS, &shard.to_string()],
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

    /// The partition count of event log `log`: `proposed` if this is the
    /// first call for it, else the count the first caller fixed.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Invalid`] for a count below 1,
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn event_log_partitions(
        &self,
        log: &str,
        proposed: i32,
    ) -> Result<i32, ClusterError> {
        if proposed < 1 {
            return Err(ClusterError::Invalid(format!(
                "event log {log} needs at least one partition, not {proposed}"
            )));
        }
        self.db
            .run("event_log_partitions", async |conn| {
                conn.execute(
                    "INSERT INTO event_log_partitions (log, partitions) VALUES ($1, $2)
                     ON CONFLICT DO NOTHING",
                    &[&log, &proposed],
                )
                .await?;
                let row = conn
                    .query_one(
                        "SELECT partitions FROM event_log_partitions WHERE log = $1",
                        &[&log],
                    )
                    .await?;
                Ok::<i32, OpError>(row.get(0))
            })
            .await
    }

    /// The partition count fixed for `log`, or `None` when no broker has
    /// opened it yet; reads only.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn event_log_partition_count(&self, log: &str) -> Result<Option<i32>, ClusterError> {
        self.db
            .run("event_log_partition_count", async |conn| {
                let row = conn
                    .query_opt(
                        "SELECT partitions FROM event_log_partitions WHERE log = $1",
                        &[&log],
                    )
                    .await?;
                Ok::<Option<i32>, OpError>(row.map(|r| r.get(0)))
            })
            .await
    }

    /// Appends `events` (each with its shard) as one transaction and
    /// returns their offsets in the order given; events of one shard take
    /// consecutive offsets in that order. Nothing is appended unless all is.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Fenced`] when `fence` no longer holds (nothing was
    /// appended), [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn append_event_group(
        &self,
        fence: &Fence,
        events: &[(i32, NewEvent)],
    ) -> Result<Vec<i64>, ClusterError> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let mut shards: Vec<i32> = events.iter().map(|(shard, _)| *shard).collect();
        shards.sort_unstable();
        shards.dedup();
        let keys: Vec<Option<&[u8]>> = events.iter().map(|(_, e)| e.key.as_deref()).collect();
        let values: Vec<Option<&[u8]>> = events.iter().map(|(_, e)| e.value.as_deref()).collect();
        let touched = shards
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",");
        self.db
            .run("append_event_group", async |conn| {
                let tx = conn.transaction().await?;
                fence.check(&tx).await?;
                // In shard order, both the creation of missing heads and the
                // locks, so concurrent groups queue instead of deadlocking.
                tx.execute(
                    "INSERT INTO event_log_heads (shard, next_offset)
                     SELECT s, 0 FROM unnest($1::integer[]) AS s ORDER BY s
                     ON CONFLICT DO NOTHING",
                    &[&shards],
                )
                .await?;
                let rows = tx
                    .query(
                        "SELECT shard, next_offset FROM event_log_heads
                         WHERE shard = ANY($1) ORDER BY shard FOR UPDATE",
                        &[&shards],
                    )
                    .await?;
                let mut heads: std::collections::HashMap<i32, i64> = rows
                    .iter()
                    .map(|row| (row.get::<_, i32>(0), row.get::<_, i64>(1)))
                    .collect();
                let mut offsets = Vec::with_capacity(events.len());
                let mut event_shards = Vec::with_capacity(events.len());
                for (shard, _) in events {
                    let head = heads.entry(*shard).or_insert(0);
                    offsets.push(*head);
                    event_shards.push(*shard);
                    *head += 1;
                }
                let (head_shards, head_offsets): (Vec<i32>, Vec<i64>) = heads.into_iter().unzip();
                tx.execute(
                    "UPDATE event_log_heads h SET next_offset = n.next_offset
                     FROM unnest($1::integer[], $2::bigint[]) AS n(shard, next_offset)
                     WHERE h.shard = n.shard",
                    &[&head_shards, &head_offsets],
                )
                .await?;
                tx.execute(
                    "INSERT INTO event_log (shard, \"offset\", key, value)
                     SELECT * FROM unnest($1::integer[], $2::bigint[], $3::bytea[], $4::bytea[])",
                    &[&event_shards, &offsets, &keys, &values],
                )
                .await?;
                tx.execute("SELECT pg_notify($1, $2)", &[&EVENT_APPENDS, &touched])
                    .await?;
                tx.commit().await?;
                Ok::<_, OpError>(offsets)
            })
            .await
    }

    /// The events of several shards in one round trip: for each
    /// `(shard, from)`, up to `limit_per_shard` of its events at or after
    /// `from`, in offset order (so at most `from.len() * limit_per_shard`
    /// rows). The result is grouped by shard, each shard's events in order.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Invalid`] for a limit below 1,
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn read_event_pages(
        &self,
        from: &[(i32, i64)],
        limit_per_shard: i64,
    ) -> Result<Vec<(i32, Event)>, ClusterError> {
        if limit_per_shard < 1 {
            return Err(ClusterError::Invalid(format!(
                "event page limit {limit_per_shard} is below 1"
            )));
        }
        if from.is_empty() {
            return Ok(Vec::new());
        }
        let (shards, starts): (Vec<i32>, Vec<i64>) = from.iter().copied().unzip();
        self.db
            .run("read_event_pages", async |conn| {
                let rows = conn
                    .query(
                        "SELECT f.shard, e.\"offset\", e.key, e.value
                         FROM unnest($1::integer[], $2::bigint[]) AS f(shard, start)
                         CROSS JOIN LATERAL (
                             SELECT \"offset\", key, value FROM event_log
                             WHERE shard = f.shard AND \"offset\" >= f.start
                             ORDER BY \"offset\" LIMIT $3) e
                         ORDER BY f.shard, e.\"offset\"",
                        &[&shards, &starts, &limit_per_shard],
                    )
                    .await?;
                Ok::<_, OpError>(
                    rows.iter()
                        .map(|row| {
                            (
                                row.get(0),
                                Event {
                                    offset: row.get(1),
                                    key: row.get(2),
                                    value: row.get(3),
                                },
                            )
                        })
                        .collect(),
                )
            })
            .await
    }

    /// One past the last offset of each shard in `[0, shards)`, indexed by
    /// shard (0 for a shard never appended to).
    ///
    /// # Errors
    ///
    /// [`ClusterError::Database`] / [`ClusterError::Unavailable`].
    pub async fn event_log_heads(&self, shards: i32) -> Result<Vec<i64>, ClusterError> {
        let mut heads = vec![0; usize::try_from(shards).unwrap_or(0)];
        let rows = self
            .db
            .run("event_log_heads", async |conn| {
                Ok::<_, OpError>(
                    conn.query(
                        "SELECT shard, next_offset FROM event_log_heads
                         WHERE shard >= 0 AND shard < $1",
                        &[&shards],
                    )
                    .await?,
                )
            })
            .await?;
        for row in rows {
            let shard: i32 = row.get(0);
            if let Some(head) = usize::try_from(shard).ok().and_then(|s| heads.get_mut(s)) {
                *head = row.get(1);
            }
        }
        Ok(heads)
    }

    /// Calls `on` with the shards of every event append any broker of the
    /// cluster makes (this one's included), and with `None` each time it
    /// starts listening (appends made while it was not listening went
    /// unannounced); reconnects with a backoff when the database is out of
    /// reach. Runs until the returned task is aborted.
    pub fn watch_event_appends(
        &self,
        on: Arc<dyn Fn(Option<Vec<i32>>) + Send + Sync>,
    ) -> tokio::task::JoinHandle<()> {
        let db = self.db.clone();
        tokio::spawn(async move {
            let mut backoff = Duration::from_millis(100);
            loop {
                let handle = |payload: Option<&str>| {
                    on(payload.map(|p| p.split(',').filter_map(|s| s.parse().ok()).collect()));
                };
                let started = std::time::Instant::now();
                if let Err(e) = db.listen(EVENT_APPENDS, &handle).await {
                    tracing::warn!(error = %e, "not listening for event appends of other brokers; retrying");
                }
                if started.elapsed() > MAX_BACKOFF * 2 {
                    backoff = Duration::from_millis(100);
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        })
    }
}
