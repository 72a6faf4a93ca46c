//! The persistence seam: the group coordinator's view of `__consumer_offsets`.
//!
//! The coordinator never touches partitions or segments itself. It hands the
//! broker's partition layer already-encoded key/value records (Kafka's
//! schemas, see [`records`](super::records)) for one partition and waits
//! until they are durable, and on start it reads a partition's records back
//! in offset order to rebuild its state. A `None` value is a tombstone, which
//! compaction eventually turns into the absence of the key. Transactional
//! offset commits go in as transactional batches under the producer's id and
//! epoch, and the transaction coordinator's markers end them, so a load
//! yields markers as well as records.
//!
//! [`InMemoryGroupLog`] implements the seam for tests and for a broker
//! without persistent storage.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use krabka_ids::{ProducerEpoch, ProducerId};
use krabka_log::ControlMarker;

use super::error::GroupError;

/// One `__consumer_offsets` record as the coordinator writes and reads it
/// (the shared coordinator record: encoded key, value or tombstone, timestamp).
pub use crate::coordinator::state_topic::CoordinatorRecord as GroupLogRecord;
/// One entry of a `__consumer_offsets` partition as a load reads it: a
/// record (of a transactional batch or not) or a transaction marker.
pub use crate::coordinator::state_topic::LoadedEntry as GroupLogEntry;

/// Durable storage for the group coordinator: the partitions of the
/// compacted `__consumer_offsets` topic.
#[async_trait]
pub trait GroupLog: Send + Sync + 'static {
    /// Appends `records` to `partition` (as one batch, in order; a
    /// transactional batch under `producer` when given) and returns the
    /// offset of the first once they are durable.
    ///
    /// # Errors
    ///
    /// [`GroupError::NotCoordinator`] when this broker cannot write the
    /// partition, [`GroupError::Refused`] when the log refuses the producer
    /// (fenced epoch), [`GroupError::Log`] for any other failure; either way
    /// none of the records may be considered written.
    async fn append(
        &self,
        partition: i32,
        records: Vec<GroupLogRecord>,
        producer: Option<(ProducerId, ProducerEpoch)>,
    ) -> Result<i64, GroupError>;

    /// Appends a transaction marker to `partition` and returns its offset.
    ///
    /// # Errors
    ///
    /// As [`GroupLog::append`].
    async fn append_marker(&self, partition: i32, marker: ControlMarker)
    -> Result<i64, GroupError>;

    /// Every entry currently stored in `partition`, in offset order (a
    /// missing partition has none).
    ///
    /// # Errors
    ///
    /// [`GroupError::Log`] when the partition cannot be read.
    async fn read_all(&self, partition: i32) -> Result<Vec<GroupLogEntry>, GroupError>;
}

/// A [`GroupLog`] held in memory: every append is kept in order, nothing is
/// compacted. For tests, and to inspect what the coordinator wrote.
#[derive(Debug, Default)]
pub struct InMemoryGroupLog {
    partitions: Mutex<HashMap<i32, Vec<GroupLogEntry>>>,
    fail_appends: std::sync::atomic::AtomicBool,
}

impl InMemoryGroupLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every record (not marker) appended to `partition` so far.
    pub fn records(&self, partition: i32) -> Vec<GroupLogRecord> {
        self.entries(partition)
            .into_iter()
            .filter_map(|e| match e {
                GroupLogEntry::Record { record, .. } => Some(record),
                GroupLogEntry::Marker { .. } => None,
            })
            .collect()
    }

    /// Every entry appended to `partition` so far.
    pub fn entries(&self, partition: i32) -> Vec<GroupLogEntry> {
        self.lock().get(&partition).cloned().unwrap_or_default()
    }

    /// Makes every following append fail (or succeed again), to exercise the
    /// coordinator's handling of a log that cannot write.
    pub fn set_fail_appends(&self, fail: bool) {
        self.fail_appends
            .store(fail, std::sync::atomic::Ordering::SeqCst);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i32, Vec<GroupLogEntry>>> {
        self.partitions.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn check(&self, partition: i32) -> Result<(), GroupError> {
        if self.fail_appends.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(GroupError::Log {
                partition,
                reason: "appends are failing (test switch)".into(),
            });
        }
        Ok(())
    }
}

#[async_trait]
impl GroupLog for InMemoryGroupLog {
    async fn append(
        &self,
        partition: i32,
        records: Vec<GroupLogRecord>,
        producer: Option<(ProducerId, ProducerEpoch)>,
    ) -> Result<i64, GroupError> {
        self.check(partition)?;
        let mut map = self.lock();
        let entries = map.entry(partition).or_default();
        let first = entries.len() as i64;
        for record in records {
            let offset = entries.len() as i64;
            entries.push(GroupLogEntry::Record {
                offset,
                record,
                producer_id: producer.map(|(p, _)| p),
            });
        }
        Ok(first)
    }

    async fn append_marker(
        &self,
        partition: i32,
        marker: ControlMarker,
    ) -> Result<i64, GroupError> {
        self.check(partition)?;
        let mut map = self.lock();
        let entries = map.entry(partition).or_default();
        let offset = entries.len() as i64;
        entries.push(GroupLogEntry::Marker {
            offset,
            producer_id: marker.producer_id,
            commit: marker.commit,
        });
        Ok(offset)
    }

    async fn read_all(&self, partition: i32) -> Result<Vec<GroupLogEntry>, GroupError> {
        Ok(self.entries(partition))
    }
}
