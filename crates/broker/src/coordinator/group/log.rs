//! The persistence seam: the group coordinator's view of `__consumer_offsets`.
//!
//! The coordinator never touches partitions or segments itself. It hands the
//! broker's partition layer already-encoded key/value records (Kafka's
//! schemas, see [`records`](super::records)) for one partition and waits
//! until they are durable, and on start it reads a partition's records back
//! in offset order to rebuild its state. A `None` value is a tombstone, which
//! compaction eventually turns into the absence of the key.
//!
//! [`InMemoryGroupLog`] implements the seam for tests and for a broker
//! without persistent storage.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use bytes::Bytes;

use super::error::GroupError;

/// One `__consumer_offsets` record as the coordinator writes and reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupLogRecord {
    /// The encoded record key.
    pub key: Bytes,
    /// The encoded value; `None` is a tombstone.
    pub value: Option<Bytes>,
    /// The record timestamp (ms since the epoch) to put in the batch.
    pub timestamp_ms: i64,
}

/// Durable storage for the group coordinator: the partitions of the
/// compacted `__consumer_offsets` topic.
#[async_trait]
pub trait GroupLog: Send + Sync + 'static {
    /// Appends `records` to `partition` (as one batch, in order) and returns
    /// once they are durable.
    ///
    /// # Errors
    ///
    /// [`GroupError::NotCoordinator`] when this broker cannot write the
    /// partition, [`GroupError::Log`] for any other failure; either way none
    /// of the records may be considered written.
    async fn append(&self, partition: i32, records: Vec<GroupLogRecord>) -> Result<(), GroupError>;

    /// Every record currently stored in `partition`, in offset order (a
    /// missing partition has none).
    ///
    /// # Errors
    ///
    /// [`GroupError::Log`] when the partition cannot be read.
    async fn read_all(&self, partition: i32) -> Result<Vec<GroupLogRecord>, GroupError>;
}

/// A [`GroupLog`] held in memory: every append is kept in order, nothing is
/// compacted. For tests, and to inspect what the coordinator wrote.
#[derive(Debug, Default)]
pub struct InMemoryGroupLog {
    partitions: Mutex<HashMap<i32, Vec<GroupLogRecord>>>,
    fail_appends: std::sync::atomic::AtomicBool,
}

impl InMemoryGroupLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every record appended to `partition` so far.
    pub fn records(&self, partition: i32) -> Vec<GroupLogRecord> {
        self.lock().get(&partition).cloned().unwrap_or_default()
    }

    /// Makes every following append fail (or succeed again), to exercise the
    /// coordinator's handling of a log that cannot write.
    pub fn set_fail_appends(&self, fail: bool) {
        self.fail_appends
            .store(fail, std::sync::atomic::Ordering::SeqCst);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i32, Vec<GroupLogRecord>>> {
        self.partitions.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl GroupLog for InMemoryGroupLog {
    async fn append(&self, partition: i32, records: Vec<GroupLogRecord>) -> Result<(), GroupError> {
        if self.fail_appends.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(GroupError::Log {
                partition,
                reason: "appends are failing (test switch)".into(),
            });
        }
        self.lock().entry(partition).or_default().extend(records);
        Ok(())
    }

    async fn read_all(&self, partition: i32) -> Result<Vec<GroupLogRecord>, GroupError> {
        Ok(self.records(partition))
    }
}
