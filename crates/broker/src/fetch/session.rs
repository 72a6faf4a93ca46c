//! Incremental fetch sessions (KIP-227).
//!
//! A consumer that fetches many partitions sends the full list once (epoch
//! 0), gets a session id, and afterwards sends only the partitions whose
//! fetch position changed; the broker answers only partitions with news
//! (records, or a changed high watermark / log start / last stable offset).
//! The cache is bounded like Kafka's (`max.incremental.fetch.session.cache.slots`,
//! 1000) and evicts the least recently used session.

use {
    std::{
        collections::{BTreeMap, HashMap},
        sync::Mutex,
        time::Instant,
    },
    uuid::Uuid,
};

/// Kafka's default session cache size.
pub const MAX_SESSIONS: usize = 1000;

/// How a request names a topic: by name before Fetch v13, by id from v13.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TopicRef {
    /// Fetch v4–v12.
    Name(String),
    /// Fetch v13+.
    Id(Uuid),
}

/// One partition of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachedPartition {
    /// The client's fetch position.
    pub fetch_offset: i64,
    /// `partition_max_bytes`.
    pub max_bytes: i32,
    /// Values last sent to the client, to decide whether there is news.
    pub last_sent: Option<SentValues>,
}

/// `(high watermark, last stable offset, log start offset)` last sent for a partition.
pub type SentValues = (i64, i64, i64);

/// Partitions of a session, in the order the client added them.
pub type SessionPartitions = BTreeMap<(TopicRef, i32), CachedPartition>;

#[derive(Debug)]
struct Session {
    next_epoch: i32,
    partitions: SessionPartitions,
    last_used: Instant,
}

/// Why an incremental request was refused (Kafka's top-level error codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionError {
    /// FETCH_SESSION_ID_NOT_FOUND (70).
    NotFound,
    /// INVALID_FETCH_SESSION_EPOCH (71).
    InvalidEpoch,
}

impl SessionError {
    /// Kafka's error code.
    #[must_use]
    pub fn code(self) -> i16 {
        match self {
            Self::NotFound => 70,
            Self::InvalidEpoch => 71,
        }
    }
}

/// All sessions of this broker.
#[derive(Debug, Default)]
pub struct FetchSessionCache {
    sessions: Mutex<HashMap<i32, Session>>,
    next_id: Mutex<i32>,
}

impl FetchSessionCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i32, Session>> {
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Drops a session (epoch -1, or a new full request naming the old id).
    pub fn remove(&self, id: i32) {
        self.lock().remove(&id);
    }

    /// Creates a session holding `partitions`; returns its id.
    pub fn create(&self, partitions: SessionPartitions) -> i32 {
        let id = {
            let mut next = self
                .next_id
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *next = if *next >= i32::MAX - 1 { 1 } else { *next + 1 };
            *next
        };
        let mut sessions = self.lock();
        if sessions.len() >= MAX_SESSIONS {
            if let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(id, _)| *id)
            {
                sessions.remove(&oldest);
            }
        }
        sessions.insert(
            id,
            Session {
                next_epoch: 1,
                partitions,
                last_used: Instant::now(),
            },
        );
        id
    }

    /// Applies an incremental request: checks the epoch, merges `updates`,
    /// drops `forgotten`, and returns the session's partitions.
    ///
    /// # Errors
    ///
    /// [`SessionError`] for an unknown session or a wrong epoch.
    pub fn update(
        &self,
        id: i32,
        epoch: i32,
        updates: Vec<((TopicRef, i32), i64, i32)>,
        forgotten: &[(TopicRef, i32)],
    ) -> Result<SessionPartitions, SessionError> {
        let mut sessions = self.lock();
        let session = sessions.get_mut(&id).ok_or(SessionError::NotFound)?;
        if session.next_epoch != epoch {
            return Err(SessionError::InvalidEpoch);
        }
        session.next_epoch = if epoch == i32::MAX { 1 } else { epoch + 1 };
        session.last_used = Instant::now();
        for key in forgotten {
            session.partitions.remove(key);
        }
        for (key, fetch_offset, max_bytes) in updates {
            let entry = session.partitions.entry(key).or_insert(CachedPartition {
                fetch_offset,
                max_bytes,
                last_sent: None,
            });
            entry.fetch_offset = fetch_offset;
            entry.max_bytes = max_bytes;
        }
        Ok(session.partitions.clone())
    }

    /// Remembers what was last sent for some partitions of a session.
    pub fn record_sent(&self, id: i32, sent: &[((TopicRef, i32), SentValues)]) {
        let mut sessions = self.lock();
        if let Some(session) = sessions.get_mut(&id) {
            for (key, values) in sent {
                if let Some(p) = session.partitions.get_mut(key) {
                    p.last_sent = Some(*values);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    fn key(p: i32) -> (TopicRef, i32) {
        (TopicRef::Name("t".into()), p)
    }

    #[test]
    fn epochs_must_follow_each_other() {
        let cache = FetchSessionCache::default();
        let mut initial = SessionPartitions::new();
        initial.insert(
            key(0),
            CachedPartition {
                fetch_offset: 0,
                max_bytes: 100,
                last_sent: None,
            },
        );
        let id = cache.create(initial);
        check!(cache.update(id, 2, vec![], &[]) == Err(SessionError::InvalidEpoch));
        let parts = cache.update(id, 1, vec![(key(1), 5, 10)], &[]).unwrap();
        check!(parts.len() == 2);
        let parts = cache
            .update(id, 2, vec![(key(0), 9, 100)], &[key(1)])
            .unwrap();
        check!(parts.len() == 1);
        check!(parts[&key(0)].fetch_offset == 9);
        check!(cache.update(id + 1, 1, vec![], &[]) == Err(SessionError::NotFound));
        cache.remove(id);
        check!(cache.update(id, 3, vec![], &[]) == Err(SessionError::NotFound));
    }
}
