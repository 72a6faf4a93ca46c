//! [`InMemoryBatchCoordinator`]: the reference [`BatchCoordinator`], and
//! with a journal, the embedded store a single node runs diskless topics
//! on.
//!
//! All state is one [`MemoryState`] value, and every change to it is an op
//! applied deterministically ([`state`]), so the rules read as plain code:
//! this is the implementation the others are compared with (through
//! [`conformance`](super::conformance)). [`InMemoryBatchCoordinator::open`]
//! adds the [`journal`]: each op is made durable before it is applied, and
//! replayed at the next open. Changes are serialized by the journal's lock
//! and the state's write lock is held only to apply them, so reads (fetch,
//! ListOffsets) never wait for an fsync.

mod journal;
mod producers;
mod state;

pub use {
    journal::{COMPACT_AT_BYTES, JOURNAL_FILE, SNAPSHOT_FILE},
    state::MemoryState,
};

use {
    super::{
        coordinator::BatchCoordinator,
        types::{
            BatchError, Committed, Consolidate, Consolidated, DeleteRecords, DisklessPartition,
            FindBatches, FoundBatches, ListOffsetsQuery, LogInfo, ObjectCommit, ObjectKey,
            OffsetAnswer, PartitionError, ProducerInfo, RetentionOutcome, RetentionPolicy,
        },
    },
    crate::RemoteStorageError,
    async_trait::async_trait,
    journal::Journal,
    krabka_ids::BrokerId,
    state::{Answer, Op},
    std::{
        path::Path,
        sync::{Arc, Mutex, PoisonError, RwLock},
    },
    uuid::Uuid,
};

/// A clock in milliseconds since the epoch.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

#[derive(Debug, Default)]
struct Inner {
    /// Serializes changes; `None` for a coordinator that keeps nothing.
    journal: Mutex<Option<Journal>>,
    state: RwLock<MemoryState>,
}

impl Inner {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, MemoryState> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Journals (when there is a journal) and applies one change. Blocking
    /// when journaled.
    fn change(&self, op: &Op) -> Result<Answer, RemoteStorageError> {
        let mut journal = self.journal.lock().unwrap_or_else(PoisonError::into_inner);
        if let Op::Commit { commit, .. } = op {
            self.read().check_commit(commit)?;
        }
        self.apply(&mut journal, op)
    }

    /// Records `abandoned` (a commit of no batch: a dead object) unless its
    /// key is already known; answers whether it did. Blocking when
    /// journaled.
    fn abandon(&self, abandoned: &ObjectCommit, now: i64) -> Result<bool, RemoteStorageError> {
        let mut journal = self.journal.lock().unwrap_or_else(PoisonError::into_inner);
        // Under the journal's lock, which every change takes: no commit of
        // the same key can come between this check and the record.
        if self.read().check_commit(abandoned).is_err() {
            return Ok(false);
        }
        let op = Op::Commit {
            commit: abandoned.clone(),
            now,
        };
        self.apply(&mut journal, &op).map(|_| true)
    }

    /// Journals and applies `op`, with the journal's lock held.
    fn apply(&self, journal: &mut Option<Journal>, op: &Op) -> Result<Answer, RemoteStorageError> {
        if let Some(journal) = journal.as_mut() {
            journal.append(op)?;
        }
        let answer = self
            .state
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .apply(op);
        if let Some(journal) = journal.as_mut().filter(|j| j.wants_compaction()) {
            if let Err(e) = journal.compact(&self.read()) {
                tracing::warn!(error = %e, "diskless journal compaction failed; the journal keeps growing");
            }
        }
        Ok(answer)
    }
}

/// The reference batch coordinator: in memory, or journaled to a directory.
#[derive(Clone)]
pub struct InMemoryBatchCoordinator {
    inner: Arc<Inner>,
    journaled: bool,
    clock: Clock,
}

impl std::fmt::Debug for InMemoryBatchCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InMemoryBatchCoordinator")
            .field("journaled", &self.journaled)
            .finish_non_exhaustive()
    }
}

impl Default for InMemoryBatchCoordinator {
    fn default() -> Self {
        Self::new()
    }
}

fn system_clock() -> Clock {
    Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    })
}

impl InMemoryBatchCoordinator {
    /// An empty coordinator on the system clock that keeps nothing.
    #[must_use]
    pub fn new() -> Self {
        Self::with_clock(system_clock())
    }

    /// An empty coordinator on `clock` (tests drive time by hand).
    #[must_use]
    pub fn with_clock(clock: Clock) -> Self {
        Self {
            inner: Arc::default(),
            journaled: false,
            clock,
        }
    }

    /// The embedded store: the state kept in `dir` (journal and snapshot),
    /// loaded now, every later change durable before it is answered.
    /// Blocking.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::Io`] if the directory cannot be read or
    /// written; [`RemoteStorageError::CorruptLog`] (naming the file) if
    /// the journal or snapshot is damaged other than by a torn last write.
    pub fn open(dir: &Path) -> Result<Self, RemoteStorageError> {
        let (journal, state) = Journal::open(dir)?;
        Ok(Self {
            inner: Arc::new(Inner {
                journal: Mutex::new(Some(journal)),
                state: RwLock::new(state),
            }),
            journaled: true,
            clock: system_clock(),
        })
    }

    async fn change(&self, op: Op) -> Result<Answer, RemoteStorageError> {
        self.blocking(move |inner| inner.change(&op)).await
    }

    /// Runs `f` on the state: on a blocking thread when it writes the
    /// journal.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Inner) -> Result<T, RemoteStorageError> + Send + 'static,
    ) -> Result<T, RemoteStorageError> {
        if !self.journaled {
            return f(&self.inner);
        }
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || f(&inner))
            .await
            .map_err(|e| RemoteStorageError::Backend {
                message: format!("diskless journal task: {e}"),
            })?
    }

    fn now(&self) -> i64 {
        (self.clock)()
    }
}

fn unexpected(answer: &Answer) -> RemoteStorageError {
    RemoteStorageError::Backend {
        message: format!("diskless state answered {answer:?} to another change"),
    }
}

#[async_trait]
impl BatchCoordinator for InMemoryBatchCoordinator {
    async fn create_partitions(
        &self,
        partitions: &[DisklessPartition],
    ) -> Result<(), RemoteStorageError> {
        self.change(Op::CreatePartitions(partitions.to_vec()))
            .await
            .map(drop)
    }

    async fn commit_object(
        &self,
        commit: &ObjectCommit,
    ) -> Result<Vec<Result<Committed, BatchError>>, RemoteStorageError> {
        let op = Op::Commit {
            commit: commit.clone(),
            now: self.now(),
        };
        match self.change(op).await? {
            Answer::Committed(answers) => Ok(answers),
            other => Err(unexpected(&other)),
        }
    }

    async fn find_batches(
        &self,
        requests: &[FindBatches],
    ) -> Result<Vec<Result<FoundBatches, PartitionError>>, RemoteStorageError> {
        let state = self.inner.read();
        Ok(requests.iter().map(|r| state.find(r)).collect())
    }

    async fn list_offsets(
        &self,
        requests: &[ListOffsetsQuery],
    ) -> Result<Vec<Result<OffsetAnswer, PartitionError>>, RemoteStorageError> {
        let state = self.inner.read();
        Ok(requests.iter().map(|q| state.list_offset(q)).collect())
    }

    async fn log_info(
        &self,
        partitions: &[DisklessPartition],
    ) -> Result<Vec<Result<LogInfo, PartitionError>>, RemoteStorageError> {
        let state = self.inner.read();
        Ok(partitions.iter().map(|p| state.info(p)).collect())
    }

    async fn delete_records(
        &self,
        requests: &[DeleteRecords],
    ) -> Result<Vec<Result<i64, PartitionError>>, RemoteStorageError> {
        let op = Op::DeleteRecords {
            requests: requests.to_vec(),
            now: self.now(),
        };
        match self.change(op).await? {
            Answer::LogStarts(answers) => Ok(answers),
            other => Err(unexpected(&other)),
        }
    }

    async fn consolidate(
        &self,
        requests: &[Consolidate],
    ) -> Result<Vec<Result<Consolidated, PartitionError>>, RemoteStorageError> {
        let op = Op::Consolidate {
            requests: requests.to_vec(),
            now: self.now(),
        };
        match self.change(op).await? {
            Answer::Consolidated(answers) => Ok(answers),
            other => Err(unexpected(&other)),
        }
    }

    async fn enforce_retention(
        &self,
        policies: &[RetentionPolicy],
        now_ms: i64,
    ) -> Result<Vec<Result<RetentionOutcome, PartitionError>>, RemoteStorageError> {
        let op = Op::Retention {
            policies: policies.to_vec(),
            now: now_ms,
        };
        match self.change(op).await? {
            Answer::Retention(answers) => Ok(answers),
            other => Err(unexpected(&other)),
        }
    }

    async fn delete_topics(&self, topic_ids: &[Uuid]) -> Result<(), RemoteStorageError> {
        let op = Op::DeleteTopics {
            topic_ids: topic_ids.to_vec(),
            now: self.now(),
        };
        self.change(op).await.map(drop)
    }

    async fn abandon_object(
        &self,
        key: &ObjectKey,
        uploader: BrokerId,
        size: u64,
    ) -> Result<bool, RemoteStorageError> {
        let abandoned = ObjectCommit {
            key: key.clone(),
            uploader,
            size,
            batches: Vec::new(),
        };
        let now = self.now();
        self.blocking(move |inner| inner.abandon(&abandoned, now))
            .await
    }

    async fn objects_to_delete(
        &self,
        dead_before_ms: i64,
    ) -> Result<Vec<ObjectKey>, RemoteStorageError> {
        Ok(self.inner.read().dead_objects(dead_before_ms))
    }

    async fn delete_objects(&self, keys: &[ObjectKey]) -> Result<(), RemoteStorageError> {
        self.change(Op::DeleteObjects(keys.to_vec()))
            .await
            .map(drop)
    }

    async fn unknown_objects(
        &self,
        keys: &[ObjectKey],
    ) -> Result<Vec<ObjectKey>, RemoteStorageError> {
        let state = self.inner.read();
        Ok(keys
            .iter()
            .filter(|k| !state.knows_object(k))
            .cloned()
            .collect())
    }

    async fn describe_producers(
        &self,
        partitions: &[DisklessPartition],
    ) -> Result<Vec<Result<Vec<ProducerInfo>, PartitionError>>, RemoteStorageError> {
        let state = self.inner.read();
        Ok(partitions.iter().map(|p| state.producers(p)).collect())
    }

    async fn expire_producers(&self, idle_before_ms: i64) -> Result<u64, RemoteStorageError> {
        // A pass with nothing to forget is not journaled (it runs every
        // few minutes); a commit racing it only makes producers younger.
        if self.inner.read().idle_producers(idle_before_ms) == 0 {
            return Ok(0);
        }
        let op = Op::ExpireProducers {
            idle_before: idle_before_ms,
        };
        match self.change(op).await? {
            Answer::Expired(n) => Ok(n),
            other => Err(unexpected(&other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn passes_the_conformance_suite() {
        super::super::conformance::run_all(|| async {
            Arc::new(InMemoryBatchCoordinator::new()) as Arc<dyn BatchCoordinator>
        })
        .await;
    }

    #[tokio::test]
    async fn the_journaled_store_passes_the_conformance_suite_and_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let mut n = 0;
        super::super::conformance::run_all(|| {
            n += 1;
            let path = dir.path().join(format!("case-{n}"));
            async move {
                Arc::new(InMemoryBatchCoordinator::open(&path).unwrap())
                    as Arc<dyn BatchCoordinator>
            }
        })
        .await;
        // Every case's state comes back as it was left.
        for case in 1..=n {
            let path = dir.path().join(format!("case-{case}"));
            let before =
                serde_json::to_value(&*InMemoryBatchCoordinator::open(&path).unwrap().inner.read())
                    .unwrap();
            let again =
                serde_json::to_value(&*InMemoryBatchCoordinator::open(&path).unwrap().inner.read())
                    .unwrap();
            assert_eq!(before, again);
            assert!(
                before["partitions"]
                    .as_array()
                    .is_some_and(|p| !p.is_empty()),
                "case {case} kept its partitions"
            );
        }
    }
}
