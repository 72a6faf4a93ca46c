//! Incremental fetch sessions (KIP-227).
//!
//! A consumer that fetches many partitions sends the full list once (epoch
//! 0), gets a session id, and afterwards sends only the partitions whose
//! fetch position changed; the broker answers only partitions with news
//! (records, or a changed high watermark / log start / last stable offset).
//!
//! The cache behaves as Kafka's `FetchSessionCache`:
//!
//! * its size is `max.incremental.fetch.session.cache.slots` (1000);
//! * session ids are random, so a client cannot guess another's;
//! * when it is full, a new session may only evict a session unused for two
//!   minutes, or else one older than two minutes that holds fewer
//!   partitions than the newcomer (larger sessions save the most, so they
//!   are privileged). Otherwise no session is created and the fetch is
//!   answered without one (session id 0), so one client looping epoch-0
//!   fetches cannot evict the sessions of everyone else.
//!
//! A session keeps its partitions in the order the client added them;
//! partitions that returned records move to the end (as Kafka does), so
//! under a byte budget the partitions after them get their turn next.

use {
    kafka_protocol::indexmap::IndexMap,
    std::{collections::HashMap, sync::Mutex, time::Duration},
    tokio::time::Instant,
    uuid::Uuid,
};

/// Kafka's default `max.incremental.fetch.session.cache.slots`.
pub const MAX_SESSIONS: usize = 1000;

/// How long a session must be unused (or must have existed) before a
/// newcomer may evict it (Kafka's fixed `evictionMs`, two minutes).
pub const EVICTION_AFTER: Duration = Duration::from_secs(120);

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

/// Partitions of a fetch, in the order they are read and answered.
pub type SessionPartitions = IndexMap<(TopicRef, i32), CachedPartition>;

/// What a response sent for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The partition.
    pub key: (TopicRef, i32),
    /// Its offsets as sent.
    pub values: SentValues,
    /// Whether records were sent (the partition then moves to the end).
    pub had_records: bool,
}

#[derive(Debug)]
struct Session {
    next_epoch: i32,
    partitions: SessionPartitions,
    created: Instant,
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
#[derive(Debug)]
pub struct FetchSessionCache {
    slots: usize,
    sessions: Mutex<HashMap<i32, Session>>,
}

impl Default for FetchSessionCache {
    fn default() -> Self {
        Self::new(MAX_SESSIONS)
    }
}

/// A random positive session id.
fn random_id() -> i32 {
    let bytes = Uuid::new_v4().into_bytes();
    i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) & i32::MAX
}

impl FetchSessionCache {
    /// A cache of `slots` sessions (0: no sessions at all).
    #[must_use]
    pub fn new(slots: usize) -> Self {
        Self {
            slots,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i32, Session>> {
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sessions held now.
    #[must_use]
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no session is held.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops a session (epoch -1, or a new full request naming the old id).
    pub fn remove(&self, id: i32) {
        self.lock().remove(&id);
    }

    /// Makes room for a session of `size` partitions as Kafka does (see
    /// the module docs); returns whether there is room now.
    fn make_room(
        sessions: &mut HashMap<i32, Session>,
        slots: usize,
        size: usize,
        now: Instant,
    ) -> bool {
        if sessions.len() < slots {
            return true;
        }
        let stale = sessions
            .iter()
            .filter(|(_, s)| now.duration_since(s.last_used) > EVICTION_AFTER)
            .min_by_key(|(_, s)| s.last_used)
            .map(|(id, _)| *id);
        let victim = stale.or_else(|| {
            sessions
                .iter()
                .filter(|(_, s)| now.duration_since(s.created) > EVICTION_AFTER)
                .min_by_key(|(id, s)| (s.partitions.len(), **id))
                .filter(|(_, s)| s.partitions.len() < size)
                .map(|(id, _)| *id)
        });
        match victim {
            Some(id) => {
                sessions.remove(&id);
                true
            }
            None => false,
        }
    }

    /// Creates a session holding `partitions` if there is room for it;
    /// returns its id, or 0 when none was created (the fetch is answered
    /// without a session, as Kafka does).
    pub fn create(&self, partitions: SessionPartitions) -> i32 {
        let now = Instant::now();
        let mut sessions = self.lock();
        if !Self::make_room(&mut sessions, self.slots, partitions.len(), now) {
            return 0;
        }
        let id = loop {
            let id = random_id();
            if id != 0 && !sessions.contains_key(&id) {
                break id;
            }
        };
        sessions.insert(
            id,
            Session {
                next_epoch: 1,
                partitions,
                created: now,
                last_used: now,
            },
        );
        id
    }

    /// Applies an incremental request: checks the epoch, merges `updates`
    /// (new partitions go to the end), drops `forgotten`, and returns the
    /// session's partitions.
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
            session.partitions.shift_remove(key);
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

    /// Remembers what was last sent for some partitions of a session;
    /// those that returned records move to the end of its order.
    pub fn record_sent(&self, id: i32, sent: &[Sent]) {
        let mut sessions = self.lock();
        let Some(session) = sessions.get_mut(&id) else {
            return;
        };
        for s in sent {
            if let Some(p) = session.partitions.get_mut(&s.key) {
                p.last_sent = Some(s.values);
            }
            if s.had_records
                && let Some(p) = session.partitions.shift_remove(&s.key)
            {
                session.partitions.insert(s.key.clone(), p);
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

    fn partitions(n: i32) -> SessionPartitions {
        (0..n)
            .map(|p| {
                (
                    key(p),
                    CachedPartition {
                        fetch_offset: 0,
                        max_bytes: 100,
                        last_sent: None,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn epochs_must_follow_each_other() {
        let cache = FetchSessionCache::default();
        let id = cache.create(partitions(1));
        check!(id > 0);
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

    #[test]
    fn the_client_order_is_kept_and_partitions_with_records_rotate_to_the_end() {
        let cache = FetchSessionCache::default();
        let mut order = SessionPartitions::new();
        for p in [5, 1, 3] {
            order.insert(key(p), partitions(1)[&key(0)]);
        }
        let id = cache.create(order);
        let parts = cache.update(id, 1, vec![(key(0), 0, 10)], &[]).unwrap();
        let keys: Vec<i32> = parts.keys().map(|k| k.1).collect();
        check!(keys == vec![5, 1, 3, 0]);
        cache.record_sent(
            id,
            &[
                Sent {
                    key: key(5),
                    values: (1, 1, 0),
                    had_records: true,
                },
                Sent {
                    key: key(1),
                    values: (0, 0, 0),
                    had_records: false,
                },
            ],
        );
        let parts = cache.update(id, 2, vec![], &[]).unwrap();
        let keys: Vec<i32> = parts.keys().map(|k| k.1).collect();
        check!(keys == vec![1, 3, 0, 5]);
        check!(parts[&key(5)].last_sent == Some((1, 1, 0)));
    }

    #[test]
    fn ids_are_random_and_never_zero() {
        let cache = FetchSessionCache::default();
        let a = cache.create(partitions(1));
        let b = cache.create(partitions(1));
        check!(a > 0 && b > 0 && a != b);
        // Not a counter: consecutive ids are not neighbours (a 1 in 2^31 miss).
        check!((a - b).abs() != 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_cache_evicts_only_stale_or_older_smaller_sessions() {
        let cache = FetchSessionCache::new(3);
        let steady = cache.create(partitions(2));
        let small = cache.create(partitions(1));
        let big = cache.create(partitions(5));
        check!(cache.len() == 3);
        // Full, and nobody old enough: the newcomer gets no session.
        for _ in 0..100 {
            check!(cache.create(partitions(3)) == 0);
        }
        check!(cache.len() == 3);
        // Two minutes on, with `steady` and `big` in use: the smallest
        // session older than two minutes goes if smaller than the newcomer.
        tokio::time::advance(EVICTION_AFTER / 2).await;
        let mut epoch = 1;
        let touch = |epoch: i32| {
            cache.update(steady, epoch, vec![], &[]).unwrap();
            cache.update(big, epoch, vec![], &[]).unwrap();
        };
        touch(epoch);
        epoch += 1;
        tokio::time::advance(EVICTION_AFTER / 2 + Duration::from_secs(1)).await;
        touch(epoch);
        // `small` is stale (unused for over two minutes): it goes first,
        // whatever the newcomer's size.
        let newcomer = cache.create(partitions(1));
        check!(newcomer > 0);
        check!(cache.update(small, 1, vec![], &[]) == Err(SessionError::NotFound));
        // Nobody stale now; `newcomer` is young, `steady` (2) is old but
        // not smaller than a newcomer of 2: refused.
        check!(cache.create(partitions(2)) == 0);
        // A newcomer of 3 evicts the smallest old session, `steady`.
        let bigger = cache.create(partitions(3));
        check!(bigger > 0);
        check!(cache.update(steady, epoch + 1, vec![], &[]) == Err(SessionError::NotFound));
        check!(cache.update(big, epoch + 1, vec![], &[]).is_ok());
        // No slots, no sessions.
        check!(FetchSessionCache::new(0).create(partitions(1)) == 0);
    }
}
