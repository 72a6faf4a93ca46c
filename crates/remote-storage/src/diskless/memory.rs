//! [`InMemoryBatchCoordinator`]: the reference [`BatchCoordinator`].
//!
//! All state is one [`MemoryState`] value behind a mutex, so every call is
//! trivially atomic and the rules read as plain code: this is the
//! implementation the others are compared with (through
//! [`conformance`](super::conformance)), and the state an embedded
//! single-node store persists.

mod producers;

use {
    super::{
        coordinator::BatchCoordinator,
        types::{
            BatchError, Committed, DeleteRecords, DisklessPartition, FindBatches, FoundBatch,
            FoundBatches, ListOffsetsQuery, LogInfo, ObjectCommit, ObjectKey, OffsetAnswer,
            OffsetQuery, PartitionError, RetentionOutcome, RetentionPolicy, TimestampType,
        },
    },
    crate::RemoteStorageError,
    async_trait::async_trait,
    producers::Producers,
    std::{
        collections::{BTreeMap, VecDeque},
        sync::{Arc, Mutex, PoisonError},
    },
    uuid::Uuid,
};

/// A clock in milliseconds since the epoch.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// One committed batch of a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
struct StoredBatch {
    object: ObjectKey,
    position: u64,
    size: u32,
    base_offset: i64,
    last_offset: i64,
    max_timestamp: i64,
    log_append_time: Option<i64>,
}

impl StoredBatch {
    /// The timestamp retention and lookups go by.
    fn timestamp(&self) -> i64 {
        self.log_append_time.unwrap_or(self.max_timestamp)
    }

    fn found(&self) -> FoundBatch {
        FoundBatch {
            object: self.object.clone(),
            position: self.position,
            size: self.size,
            base_offset: self.base_offset,
            last_offset: self.last_offset,
            max_timestamp: self.max_timestamp,
            log_append_time: self.log_append_time,
        }
    }
}

#[derive(Debug, Clone, Default)]
struct PartitionState {
    log_start: i64,
    next_offset: i64,
    /// Live batches in offset order; the first may start below `log_start`.
    batches: VecDeque<StoredBatch>,
    bytes: u64,
    producers: Producers,
}

impl PartitionState {
    fn info(&self) -> LogInfo {
        LogInfo {
            log_start_offset: self.log_start,
            high_watermark: self.next_offset,
            byte_size: self.bytes,
        }
    }

    fn out_of_range(&self, offset: i64) -> PartitionError {
        PartitionError::OffsetOutOfRange {
            offset,
            log_start_offset: self.log_start,
            high_watermark: self.next_offset,
        }
    }

    /// Removes the first batch; returns it.
    fn pop_front(&mut self) -> Option<StoredBatch> {
        let batch = self.batches.pop_front()?;
        self.bytes = self.bytes.saturating_sub(u64::from(batch.size));
        self.log_start = self.log_start.max(batch.last_offset + 1);
        Some(batch)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ObjectState {
    live_batches: u64,
    dead_since: Option<i64>,
}

/// The whole state of an in-memory coordinator.
#[derive(Debug, Clone, Default)]
pub struct MemoryState {
    partitions: BTreeMap<DisklessPartition, PartitionState>,
    objects: BTreeMap<ObjectKey, ObjectState>,
}

impl MemoryState {
    /// One batch of `object` is no longer live.
    fn release(&mut self, object: &ObjectKey, now: i64) {
        if let Some(o) = self.objects.get_mut(object) {
            o.live_batches = o.live_batches.saturating_sub(1);
            if o.live_batches == 0 && o.dead_since.is_none() {
                o.dead_since = Some(now);
            }
        }
    }

    fn commit(
        &mut self,
        commit: &ObjectCommit,
        now: i64,
    ) -> Result<Vec<Result<Committed, BatchError>>, RemoteStorageError> {
        if self.objects.contains_key(&commit.key) {
            return Err(RemoteStorageError::invalid_metadata(format!(
                "diskless object {} was already committed",
                commit.key
            )));
        }
        let mut live = 0;
        let mut answers = Vec::with_capacity(commit.batches.len());
        for batch in &commit.batches {
            let Some(p) = self.partitions.get_mut(&batch.partition) else {
                answers.push(Err(BatchError::UnknownTopicOrPartition));
                continue;
            };
            let offset_count = i64::from(batch.offset_count.max(1));
            if let Some(producer) = &batch.producer {
                match p.producers.check(producer) {
                    producers::Check::Duplicate(base_offset) => {
                        answers.push(Ok(Committed {
                            base_offset,
                            log_append_time: None,
                            log_start_offset: p.log_start,
                            duplicate: true,
                        }));
                        continue;
                    }
                    producers::Check::Refused(e) => {
                        answers.push(Err(e));
                        continue;
                    }
                    producers::Check::Accept => {}
                }
            }
            let base_offset = p.next_offset;
            let log_append_time =
                (batch.timestamp_type == TimestampType::LogAppendTime).then_some(now);
            p.next_offset += offset_count;
            p.bytes += u64::from(batch.size);
            p.batches.push_back(StoredBatch {
                object: commit.key.clone(),
                position: batch.position,
                size: batch.size,
                base_offset,
                last_offset: base_offset + offset_count - 1,
                max_timestamp: batch.max_timestamp,
                log_append_time,
            });
            if let Some(producer) = &batch.producer {
                p.producers.record(producer, base_offset);
            }
            live += 1;
            answers.push(Ok(Committed {
                base_offset,
                log_append_time,
                log_start_offset: p.log_start,
                duplicate: false,
            }));
        }
        self.objects.insert(
            commit.key.clone(),
            ObjectState {
                live_batches: live,
                dead_since: (live == 0).then_some(now),
            },
        );
        Ok(answers)
    }

    fn find(&self, request: &FindBatches) -> Result<FoundBatches, PartitionError> {
        let p = self
            .partitions
            .get(&request.partition)
            .ok_or(PartitionError::UnknownTopicOrPartition)?;
        if request.offset < p.log_start || request.offset > p.next_offset {
            return Err(p.out_of_range(request.offset));
        }
        let first = p
            .batches
            .partition_point(|b| b.last_offset < request.offset);
        let mut batches = Vec::new();
        let mut total = 0u64;
        for b in p.batches.iter().skip(first) {
            total += u64::from(b.size);
            if !batches.is_empty() && total > u64::from(request.max_bytes) {
                break;
            }
            batches.push(b.found());
        }
        Ok(FoundBatches {
            batches,
            info: p.info(),
        })
    }

    fn list_offset(&self, query: &ListOffsetsQuery) -> Result<OffsetAnswer, PartitionError> {
        let p = self
            .partitions
            .get(&query.partition)
            .ok_or(PartitionError::UnknownTopicOrPartition)?;
        Ok(match query.query {
            OffsetQuery::Earliest => OffsetAnswer::Offset(p.log_start),
            OffsetQuery::Latest => OffsetAnswer::Offset(p.next_offset),
            OffsetQuery::MaxTimestamp => p
                .batches
                .iter()
                .filter(|b| b.last_offset >= p.log_start)
                .fold(None::<&StoredBatch>, |best, b| match best {
                    Some(best) if best.timestamp() >= b.timestamp() => Some(best),
                    _ => Some(b),
                })
                .map_or(OffsetAnswer::NotFound, |b| OffsetAnswer::Batch(b.found())),
            OffsetQuery::Timestamp(ts) => p
                .batches
                .iter()
                .filter(|b| b.last_offset >= p.log_start)
                .find(|b| b.timestamp() >= ts)
                .map_or(OffsetAnswer::NotFound, |b| OffsetAnswer::Batch(b.found())),
        })
    }

    fn delete_records(&mut self, request: &DeleteRecords, now: i64) -> Result<i64, PartitionError> {
        let released = {
            let p = self
                .partitions
                .get_mut(&request.partition)
                .ok_or(PartitionError::UnknownTopicOrPartition)?;
            let target = if request.offset == -1 {
                p.next_offset
            } else {
                request.offset
            };
            if target < 0 || target > p.next_offset {
                return Err(p.out_of_range(request.offset));
            }
            let mut released = Vec::new();
            if target > p.log_start {
                while p.batches.front().is_some_and(|b| b.last_offset < target) {
                    released.extend(p.pop_front().map(|b| b.object));
                }
                p.log_start = target;
            }
            released
        };
        for object in &released {
            self.release(object, now);
        }
        Ok(self.partitions[&request.partition].log_start)
    }

    fn retention(
        &mut self,
        policy: &RetentionPolicy,
        now: i64,
    ) -> Result<RetentionOutcome, PartitionError> {
        let (outcome, released) = {
            let p = self
                .partitions
                .get_mut(&policy.partition)
                .ok_or(PartitionError::UnknownTopicOrPartition)?;
            let mut outcome = RetentionOutcome::default();
            let mut released = Vec::new();
            while let Some(front) = p.batches.front() {
                let too_old =
                    policy.retention_ms >= 0 && front.timestamp() < now - policy.retention_ms;
                let too_big = policy.retention_bytes >= 0
                    && p.bytes.saturating_sub(u64::from(front.size))
                        >= u64::try_from(policy.retention_bytes).unwrap_or(u64::MAX);
                if !(too_old || too_big) {
                    break;
                }
                if let Some(b) = p.pop_front() {
                    outcome.batches_deleted += 1;
                    outcome.bytes_deleted += u64::from(b.size);
                    released.push(b.object);
                }
            }
            outcome.log_start_offset = p.log_start;
            (outcome, released)
        };
        for object in &released {
            self.release(object, now);
        }
        Ok(outcome)
    }

    fn delete_topics(&mut self, topic_ids: &[Uuid], now: i64) {
        let doomed: Vec<DisklessPartition> = self
            .partitions
            .keys()
            .filter(|p| topic_ids.contains(&p.topic_id))
            .copied()
            .collect();
        for key in doomed {
            if let Some(p) = self.partitions.remove(&key) {
                for b in p.batches {
                    self.release(&b.object, now);
                }
            }
        }
    }
}

/// The reference batch coordinator, holding everything in memory.
#[derive(Clone)]
pub struct InMemoryBatchCoordinator {
    state: Arc<Mutex<MemoryState>>,
    clock: Clock,
}

impl std::fmt::Debug for InMemoryBatchCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InMemoryBatchCoordinator")
            .finish_non_exhaustive()
    }
}

impl Default for InMemoryBatchCoordinator {
    fn default() -> Self {
        Self::new()
    }
}

impl InMemoryBatchCoordinator {
    /// An empty coordinator on the system clock.
    #[must_use]
    pub fn new() -> Self {
        Self::with_clock(Arc::new(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        }))
    }

    /// An empty coordinator on `clock` (tests drive time by hand).
    #[must_use]
    pub fn with_clock(clock: Clock) -> Self {
        Self {
            state: Arc::default(),
            clock,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MemoryState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl BatchCoordinator for InMemoryBatchCoordinator {
    async fn create_partitions(
        &self,
        partitions: &[DisklessPartition],
    ) -> Result<(), RemoteStorageError> {
        let mut state = self.lock();
        for p in partitions {
            state.partitions.entry(*p).or_default();
        }
        Ok(())
    }

    async fn commit_object(
        &self,
        commit: &ObjectCommit,
    ) -> Result<Vec<Result<Committed, BatchError>>, RemoteStorageError> {
        let now = (self.clock)();
        // Work on a copy so a failure half way leaves nothing committed.
        let mut state = self.lock();
        let mut next = state.clone();
        let answers = next.commit(commit, now)?;
        *state = next;
        Ok(answers)
    }

    async fn find_batches(
        &self,
        requests: &[FindBatches],
    ) -> Result<Vec<Result<FoundBatches, PartitionError>>, RemoteStorageError> {
        let state = self.lock();
        Ok(requests.iter().map(|r| state.find(r)).collect())
    }

    async fn list_offsets(
        &self,
        requests: &[ListOffsetsQuery],
    ) -> Result<Vec<Result<OffsetAnswer, PartitionError>>, RemoteStorageError> {
        let state = self.lock();
        Ok(requests.iter().map(|q| state.list_offset(q)).collect())
    }

    async fn log_info(
        &self,
        partitions: &[DisklessPartition],
    ) -> Result<Vec<Result<LogInfo, PartitionError>>, RemoteStorageError> {
        let state = self.lock();
        Ok(partitions
            .iter()
            .map(|p| {
                state
                    .partitions
                    .get(p)
                    .map(PartitionState::info)
                    .ok_or(PartitionError::UnknownTopicOrPartition)
            })
            .collect())
    }

    async fn delete_records(
        &self,
        requests: &[DeleteRecords],
    ) -> Result<Vec<Result<i64, PartitionError>>, RemoteStorageError> {
        let now = (self.clock)();
        let mut state = self.lock();
        Ok(requests
            .iter()
            .map(|r| state.delete_records(r, now))
            .collect())
    }

    async fn enforce_retention(
        &self,
        policies: &[RetentionPolicy],
        now_ms: i64,
    ) -> Result<Vec<Result<RetentionOutcome, PartitionError>>, RemoteStorageError> {
        let mut state = self.lock();
        Ok(policies
            .iter()
            .map(|p| state.retention(p, now_ms))
            .collect())
    }

    async fn delete_topics(&self, topic_ids: &[Uuid]) -> Result<(), RemoteStorageError> {
        let now = (self.clock)();
        self.lock().delete_topics(topic_ids, now);
        Ok(())
    }

    async fn objects_to_delete(
        &self,
        dead_before_ms: i64,
    ) -> Result<Vec<ObjectKey>, RemoteStorageError> {
        Ok(self
            .lock()
            .objects
            .iter()
            .filter(|(_, o)| o.dead_since.is_some_and(|t| t <= dead_before_ms))
            .map(|(k, _)| k.clone())
            .collect())
    }

    async fn delete_objects(&self, keys: &[ObjectKey]) -> Result<(), RemoteStorageError> {
        let mut state = self.lock();
        for key in keys {
            if state
                .objects
                .get(key)
                .is_some_and(|o| o.dead_since.is_some())
            {
                state.objects.remove(key);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use {super::*, std::sync::atomic::AtomicI64};

    #[tokio::test]
    async fn passes_the_conformance_suite() {
        super::super::conformance::run_all(|| async {
            Arc::new(InMemoryBatchCoordinator::new()) as Arc<dyn BatchCoordinator>
        })
        .await;
    }

    #[tokio::test]
    async fn log_append_time_is_the_commit_time() {
        let now = Arc::new(AtomicI64::new(1_000));
        let clock = {
            let now = Arc::clone(&now);
            Arc::new(move || now.load(std::sync::atomic::Ordering::SeqCst))
        };
        let c = InMemoryBatchCoordinator::with_clock(clock);
        let p = DisklessPartition::new(Uuid::from_u128(1), 0);
        c.create_partitions(&[p]).await.unwrap();
        let mut commit = super::super::conformance::commit_of("o1", &[(p, 3)]);
        commit.batches[0].timestamp_type = TimestampType::LogAppendTime;
        now.store(5_000, std::sync::atomic::Ordering::SeqCst);
        let answers = c.commit_object(&commit).await.unwrap();
        assert_eq!(answers[0].as_ref().unwrap().log_append_time, Some(5_000));
        // Retention goes by the append time, not the producer's timestamp.
        let out = c
            .enforce_retention(
                &[RetentionPolicy {
                    partition: p,
                    retention_ms: 1_000,
                    retention_bytes: -1,
                }],
                5_500,
            )
            .await
            .unwrap();
        assert_eq!(out[0].as_ref().unwrap().batches_deleted, 0);
    }
}
