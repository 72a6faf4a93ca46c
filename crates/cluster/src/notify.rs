//! Wake-ups between brokers through PostgreSQL's `LISTEN`/`NOTIFY`.
//!
//! A consumer long-polling a diskless partition on broker B must see a
//! commit made through broker A when it happens, not when its wait ends.
//! Each diskless commit notifies [`DISKLESS_COMMITS`] inside its
//! transaction (PostgreSQL delivers it only if the transaction commits),
//! naming the partitions it appended to; every broker listens on a
//! connection of its own ([`Cluster::watch_diskless_commits`]) and wakes the
//! fetches parked on those partitions. A notification is only a hint: a
//! woken fetch reads the partition's state from the database as before, so
//! one lost while a broker was reconnecting costs latency, never data, and
//! every (re)subscription wakes everything once to cover the gap.

use {
    crate::Cluster,
    krabka_remote_storage::diskless::DisklessPartition,
    std::{sync::Arc, time::Duration},
    uuid::Uuid,
};

/// The channel diskless commits are announced on.
pub const DISKLESS_COMMITS: &str = "krabka_diskless_commits";

/// The payload that means "every partition" (a commit that names too many
/// to fit PostgreSQL's 8000-byte payload, or a re-subscription).
const ALL: &str = "*";

/// Longest payload sent; PostgreSQL refuses more than 8000 bytes.
const MAX_PAYLOAD: usize = 7900;

/// Longest pause between attempts to listen again.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// What a notification asks to wake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitWake {
    /// Every diskless partition.
    All,
    /// These partitions.
    Partitions(Vec<DisklessPartition>),
}

/// The payload naming `touched`: `topic-id:partition` entries separated by
/// commas, or [`ALL`] when they do not fit.
#[must_use]
pub fn payload(touched: &[DisklessPartition]) -> String {
    let mut out = String::new();
    for p in touched {
        if !out.is_empty() {
            out.push(',');
        }
        out.push_str(&format!("{}:{}", p.topic_id, p.partition));
        if out.len() > MAX_PAYLOAD {
            return ALL.to_owned();
        }
    }
    out
}

/// What `payload` asks to wake; anything unreadable wakes everything (a
/// hint too many is harmless).
#[must_use]
pub fn parse(payload: &str) -> CommitWake {
    if payload == ALL {
        return CommitWake::All;
    }
    let parsed: Option<Vec<DisklessPartition>> = payload
        .split(',')
        .map(|entry| {
            let (topic, partition) = entry.split_once(':')?;
            Some(DisklessPartition {
                topic_id: Uuid::parse_str(topic).ok()?,
                partition: partition.parse().ok()?,
            })
        })
        .collect();
    parsed.map_or(CommitWake::All, CommitWake::Partitions)
}

impl Cluster {
    /// Calls `on` for every diskless commit any broker of the cluster makes
    /// (this one's included), and with [`CommitWake::All`] each time it
    /// starts listening; reconnects with a backoff when the database is out
    /// of reach. Runs until the returned task is aborted.
    pub fn watch_diskless_commits(
        &self,
        on: Arc<dyn Fn(CommitWake) + Send + Sync>,
    ) -> tokio::task::JoinHandle<()> {
        let db = self.db.clone();
        tokio::spawn(async move {
            let mut backoff = Duration::from_millis(100);
            loop {
                let handle = |payload: Option<&str>| on(payload.map_or(CommitWake::All, parse));
                let started = std::time::Instant::now();
                if let Err(e) = db.listen(DISKLESS_COMMITS, &handle).await {
                    tracing::warn!(error = %e, "not listening for diskless commits of other brokers; retrying");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_too_many_partitions_mean_all() {
        let t = Uuid::from_u128(7);
        let few = vec![
            DisklessPartition {
                topic_id: t,
                partition: 0,
            },
            DisklessPartition {
                topic_id: t,
                partition: 12,
            },
        ];
        assert_eq!(parse(&payload(&few)), CommitWake::Partitions(few));
        let many: Vec<_> = (0..400)
            .map(|partition| DisklessPartition {
                topic_id: t,
                partition,
            })
            .collect();
        assert_eq!(payload(&many), ALL);
        assert_eq!(parse(ALL), CommitWake::All);
        assert_eq!(parse("garbage"), CommitWake::All);
    }
}
