//! The coordinator's state and its rules: every change is an [`Op`]
//! applied to a [`MemoryState`], deterministically, so the embedded store
//! persists a state by journaling the ops that made it.

use {
    super::{
        super::types::{
            BatchError, Committed, Consolidate, Consolidated, DeleteRecords, DisklessPartition,
            FindBatches, FoundBatch, FoundBatches, ListOffsetsQuery, LogInfo, ObjectCommit,
            ObjectKey, OffsetAnswer, OffsetQuery, PartitionError, ProducerInfo, RetentionOutcome,
            RetentionPolicy,
        },
        producers::Producers,
    },
    crate::{RemoteStorageError, diskless::ProducerCheck},
    serde::{Deserialize, Serialize},
    std::collections::{BTreeMap, VecDeque},
    uuid::Uuid,
};

/// A change to the state, with the time it happened.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) enum Op {
    /// Partitions made known.
    CreatePartitions(Vec<DisklessPartition>),
    /// An object committed.
    Commit {
        /// The commit.
        commit: ObjectCommit,
        /// Its time.
        now: i64,
    },
    /// Log starts moved.
    DeleteRecords {
        /// The requests.
        requests: Vec<DeleteRecords>,
        /// Their time.
        now: i64,
    },
    /// Batches consolidated into tiered segments.
    Consolidate {
        /// The requests.
        requests: Vec<Consolidate>,
        /// Their time.
        now: i64,
    },
    /// A retention pass.
    Retention {
        /// The policies applied.
        policies: Vec<RetentionPolicy>,
        /// The time they were applied at.
        now: i64,
    },
    /// Topics deleted.
    DeleteTopics {
        /// Their ids.
        topic_ids: Vec<Uuid>,
        /// Their time.
        now: i64,
    },
    /// Dead objects forgotten after the cleaner removed them.
    DeleteObjects(Vec<ObjectKey>),
    /// Producers idle since before this time forgotten
    /// (`producer.id.expiration.ms`).
    ExpireProducers {
        /// The horizon: a producer whose last batch is older goes.
        idle_before: i64,
    },
}

/// What applying an [`Op`] answered.
#[derive(Debug)]
pub(super) enum Answer {
    /// Nothing to say.
    Done,
    /// Per batch of a commit.
    Committed(Vec<Result<Committed, BatchError>>),
    /// Per DeleteRecords request.
    LogStarts(Vec<Result<i64, PartitionError>>),
    /// Per consolidation.
    Consolidated(Vec<Result<Consolidated, PartitionError>>),
    /// Per retention policy.
    Retention(Vec<Result<RetentionOutcome, PartitionError>>),
    /// Producers forgotten.
    Expired(u64),
}

/// One committed batch of a partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct StoredBatch {
    object: ObjectKey,
    position: u64,
    size: u32,
    base_offset: i64,
    last_offset: i64,
    max_timestamp: i64,
}

impl StoredBatch {
    /// The timestamp retention and lookups go by.
    fn timestamp(&self) -> i64 {
        self.max_timestamp
    }

    fn found(&self) -> FoundBatch {
        FoundBatch {
            object: self.object.clone(),
            position: self.position,
            size: self.size,
            base_offset: self.base_offset,
            last_offset: self.last_offset,
            max_timestamp: self.max_timestamp,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct PartitionState {
    log_start: i64,
    next_offset: i64,
    /// Live batches in offset order; the first may start below `log_start`.
    batches: VecDeque<StoredBatch>,
    bytes: u64,
    producers: Producers,
    /// Where the last consolidation ended (0 in states from before
    /// consolidation; the batch start is never below the log start).
    #[serde(default)]
    consolidated_to: i64,
}

impl PartitionState {
    /// The first offset held as batches.
    fn batch_start(&self) -> i64 {
        self.consolidated_to.max(self.log_start)
    }

    fn info(&self) -> LogInfo {
        LogInfo {
            log_start_offset: self.log_start,
            high_watermark: self.next_offset,
            byte_size: self.bytes,
            batch_start_offset: self.batch_start(),
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct ObjectState {
    live_batches: u64,
    dead_since: Option<i64>,
}

/// The whole state of an in-memory coordinator.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MemoryState {
    #[serde(with = "pairs")]
    partitions: BTreeMap<DisklessPartition, PartitionState>,
    objects: BTreeMap<ObjectKey, ObjectState>,
}

impl MemoryState {
    /// Applies one change; the answer is the same every time the same
    /// change is applied to the same state, which is what lets the journal
    /// replay it.
    pub(super) fn apply(&mut self, op: &Op) -> Answer {
        match op {
            Op::CreatePartitions(partitions) => {
                for p in partitions {
                    self.partitions.entry(*p).or_default();
                }
                Answer::Done
            }
            Op::Commit { commit, now } => Answer::Committed(self.commit(commit, *now)),
            Op::DeleteRecords { requests, now } => Answer::LogStarts(
                requests
                    .iter()
                    .map(|r| self.delete_records(r, *now))
                    .collect(),
            ),
            Op::Consolidate { requests, now } => {
                Answer::Consolidated(requests.iter().map(|r| self.consolidate(r, *now)).collect())
            }
            Op::Retention { policies, now } => {
                Answer::Retention(policies.iter().map(|p| self.retention(p, *now)).collect())
            }
            Op::DeleteTopics { topic_ids, now } => {
                self.delete_topics(topic_ids, *now);
                Answer::Done
            }
            Op::ExpireProducers { idle_before } => Answer::Expired(
                self.partitions
                    .values_mut()
                    .map(|p| p.producers.expire(*idle_before) as u64)
                    .sum(),
            ),
            Op::DeleteObjects(keys) => {
                for key in keys {
                    if self
                        .objects
                        .get(key)
                        .is_some_and(|o| o.dead_since.is_some())
                    {
                        self.objects.remove(key);
                    }
                }
                Answer::Done
            }
        }
    }

    /// Offsets and size of one partition.
    pub(super) fn info(&self, partition: &DisklessPartition) -> Result<LogInfo, PartitionError> {
        self.partitions
            .get(partition)
            .map(PartitionState::info)
            .ok_or(PartitionError::UnknownTopicOrPartition)
    }

    /// The producers one partition knows.
    pub(super) fn producers(
        &self,
        partition: &DisklessPartition,
    ) -> Result<Vec<ProducerInfo>, PartitionError> {
        self.partitions
            .get(partition)
            .map(|p| p.producers.describe())
            .ok_or(PartitionError::UnknownTopicOrPartition)
    }

    /// How many producers an [`Op::ExpireProducers`] at `idle_before`
    /// would forget (none: it need not be journaled).
    pub(super) fn idle_producers(&self, idle_before: i64) -> usize {
        self.partitions
            .values()
            .map(|p| p.producers.idle(idle_before))
            .sum()
    }

    /// Objects dead since `dead_before` or earlier.
    /// Whether the object is committed or abandoned (and not yet forgotten).
    pub(super) fn knows_object(&self, key: &ObjectKey) -> bool {
        self.objects.contains_key(key)
    }

    pub(super) fn dead_objects(&self, dead_before: i64) -> Vec<ObjectKey> {
        self.objects
            .iter()
            .filter(|(_, o)| o.dead_since.is_some_and(|t| t <= dead_before))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// One batch of `object` is no longer live.
    fn release(&mut self, object: &ObjectKey, now: i64) {
        if let Some(o) = self.objects.get_mut(object) {
            o.live_batches = o.live_batches.saturating_sub(1);
            if o.live_batches == 0 && o.dead_since.is_none() {
                o.dead_since = Some(now);
            }
        }
    }

    /// Refuses a commit that cannot be applied, before anything changes.
    pub(super) fn check_commit(&self, commit: &ObjectCommit) -> Result<(), RemoteStorageError> {
        if self.objects.contains_key(&commit.key) {
            return Err(RemoteStorageError::invalid_metadata(format!(
                "diskless object {} was already committed or abandoned",
                commit.key
            )));
        }
        Ok(())
    }

    fn commit(&mut self, commit: &ObjectCommit, now: i64) -> Vec<Result<Committed, BatchError>> {
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
                    ProducerCheck::Duplicate(base_offset) => {
                        answers.push(Ok(Committed {
                            base_offset,
                            log_start_offset: p.log_start,
                            duplicate: true,
                        }));
                        continue;
                    }
                    ProducerCheck::Refused(e) => {
                        answers.push(Err(e));
                        continue;
                    }
                    ProducerCheck::Accept => {}
                }
            }
            let base_offset = p.next_offset;
            p.next_offset += offset_count;
            p.bytes += u64::from(batch.size);
            p.batches.push_back(StoredBatch {
                object: commit.key.clone(),
                position: batch.position,
                size: batch.size,
                base_offset,
                last_offset: base_offset + offset_count - 1,
                max_timestamp: batch.max_timestamp,
            });
            if let Some(producer) = &batch.producer {
                p.producers
                    .record(producer, base_offset, batch.max_timestamp);
            }
            live += 1;
            answers.push(Ok(Committed {
                base_offset,
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
        answers
    }

    pub(super) fn find(&self, request: &FindBatches) -> Result<FoundBatches, PartitionError> {
        let p = self
            .partitions
            .get(&request.partition)
            .ok_or(PartitionError::UnknownTopicOrPartition)?;
        if request.offset < p.log_start || request.offset > p.next_offset {
            return Err(p.out_of_range(request.offset));
        }
        if request.offset < p.batch_start() {
            // Consolidated: the tiered segments hold it.
            return Ok(FoundBatches {
                batches: Vec::new(),
                info: p.info(),
            });
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

    pub(super) fn list_offset(
        &self,
        query: &ListOffsetsQuery,
    ) -> Result<OffsetAnswer, PartitionError> {
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

    pub(super) fn delete_records(
        &mut self,
        request: &DeleteRecords,
        now: i64,
    ) -> Result<i64, PartitionError> {
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

    pub(super) fn consolidate(
        &mut self,
        request: &Consolidate,
        now: i64,
    ) -> Result<Consolidated, PartitionError> {
        let released = {
            let p = self
                .partitions
                .get_mut(&request.partition)
                .ok_or(PartitionError::UnknownTopicOrPartition)?;
            let start = p.batch_start();
            let boundary = request.to == p.next_offset
                || p.batches.iter().any(|b| b.base_offset == request.to);
            if start != request.from || request.to <= start || !boundary {
                return Ok(Consolidated::Refused {
                    batch_start_offset: start,
                });
            }
            let mut released = Vec::new();
            while p
                .batches
                .front()
                .is_some_and(|b| b.last_offset < request.to)
            {
                if let Some(b) = p.batches.pop_front() {
                    p.bytes = p.bytes.saturating_sub(u64::from(b.size));
                    released.push(b.object);
                }
            }
            p.consolidated_to = request.to;
            released
        };
        for object in &released {
            self.release(object, now);
        }
        Ok(Consolidated::Applied)
    }

    pub(super) fn retention(
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

    pub(super) fn delete_topics(&mut self, topic_ids: &[Uuid], now: i64) {
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

/// A map with structured keys, as a list of pairs (JSON keys are strings).
mod pairs {
    use {
        serde::{Deserialize, Deserializer, Serialize, Serializer},
        std::collections::BTreeMap,
    };

    pub(super) fn serialize<K: Serialize, V: Serialize, S: Serializer>(
        map: &BTreeMap<K, V>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(map.iter())
    }

    pub(super) fn deserialize<'de, K, V, D>(d: D) -> Result<BTreeMap<K, V>, D::Error>
    where
        K: Deserialize<'de> + Ord,
        V: Deserialize<'de>,
        D: Deserializer<'de>,
    {
        Vec::<(K, V)>::deserialize(d).map(|pairs| pairs.into_iter().collect())
    }
}
