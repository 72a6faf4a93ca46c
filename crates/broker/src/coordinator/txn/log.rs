//! The persistence seam: the transaction coordinator's view of
//! `__transaction_state`.
//!
//! The coordinator hands over one encoded record (Kafka's
//! `TransactionLogKey`/`TransactionLogValue`, see [`records`](super::records))
//! per state change and waits until it is durable before the change takes
//! effect; on start it reads every partition back in offset order. A `None`
//! value is the tombstone of an expired transactional id. Unlike the group
//! coordinator's seam this one is blocking: the coordinator's calls already
//! run on tokio's blocking pool.
//!
//! [`InMemoryTxnStateLog`] implements it for tests.

use {
    super::error::TxnError,
    crate::coordinator::state_topic::CoordinatorRecord,
    std::{
        collections::HashMap,
        sync::{
            Mutex, MutexGuard,
            atomic::{AtomicBool, Ordering},
        },
    },
};

/// Durable storage for the transaction coordinator: the partitions of the
/// compacted `__transaction_state` topic. Blocking.
pub trait TxnStateLog: Send + Sync {
    /// Appends `record` to `partition` and returns once it is durable.
    ///
    /// # Errors
    ///
    /// [`TxnError::NotCoordinator`] when the record could not be written
    /// (nothing may then be considered written).
    fn append(&self, partition: i32, record: CoordinatorRecord) -> Result<(), TxnError>;

    /// Every record of `partition` in offset order (none for a partition
    /// that does not exist).
    ///
    /// # Errors
    ///
    /// [`TxnError::NotCoordinator`] when the partition cannot be read.
    fn read_all(&self, partition: i32) -> Result<Vec<CoordinatorRecord>, TxnError>;
}

/// A [`TxnStateLog`] in memory: every append kept in order, nothing
/// compacted; appends can be made to fail.
#[derive(Debug, Default)]
pub struct InMemoryTxnStateLog {
    partitions: Mutex<HashMap<i32, Vec<CoordinatorRecord>>>,
    fail: AtomicBool,
}

impl InMemoryTxnStateLog {
    /// An empty log.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Every record appended to `partition` so far.
    #[must_use]
    pub fn records(&self, partition: i32) -> Vec<CoordinatorRecord> {
        self.lock().get(&partition).cloned().unwrap_or_default()
    }

    /// Every record of every partition, partition by partition.
    #[must_use]
    pub fn all_records(&self) -> Vec<(i32, CoordinatorRecord)> {
        let map = self.lock();
        let mut partitions: Vec<_> = map.keys().copied().collect();
        partitions.sort_unstable();
        partitions
            .into_iter()
            .flat_map(|p| {
                map.get(&p)
                    .into_iter()
                    .flatten()
                    .cloned()
                    .map(move |r| (p, r))
            })
            .collect()
    }

    /// Makes every following append fail (or succeed again).
    pub fn set_fail_appends(&self, fail: bool) {
        self.fail.store(fail, Ordering::SeqCst);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<i32, Vec<CoordinatorRecord>>> {
        self.partitions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl TxnStateLog for InMemoryTxnStateLog {
    fn append(&self, partition: i32, record: CoordinatorRecord) -> Result<(), TxnError> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(TxnError::NotCoordinator(
                "appends are failing (test switch)".into(),
            ));
        }
        self.lock().entry(partition).or_default().push(record);
        Ok(())
    }

    fn read_all(&self, partition: i32) -> Result<Vec<CoordinatorRecord>, TxnError> {
        Ok(self.records(partition))
    }
}
