//! The transaction coordinator: the [`TxnManager`] behind a lock, its
//! persistence in `__transaction_state`, the seams it needs from the broker
//! — a producer id allocator and a marker writer — and the request handlers
//! in `kafka-protocol` types.
//!
//! Every state change follows Kafka's order: the new metadata is appended
//! to the id's `__transaction_state` partition (Kafka's `abs(hashCode) %
//! partitions`) and only then takes effect and is answered — so
//! `PrepareCommit` is durable before any marker is written, and
//! `CompleteCommit` is written after the last one. Changes of the ids of one
//! partition are serialized by that partition's writer lock, which keeps the
//! log's order the order the state changed in; the state lock itself is only
//! held for moments and never while markers are written, so calls on a
//! completing transaction are answered CONCURRENT_TRANSACTIONS, as on Kafka.
//! On start the state is rebuilt by replaying every partition; a
//! transaction found preparing is completed by the first [`tick`].
//!
//! Every method here blocks (appends, markers, id allocation); the wire
//! layer runs them on tokio's blocking pool.
//!
//! [`tick`]: TransactionCoordinator::tick

use {
    super::{
        config::TxnConfig,
        error::TxnError,
        log::TxnStateLog,
        records::{TransactionLogValue, decode_key, encode_key},
        state::{
            Completion, EndStep, InitStep, TopicPartition, Transition, TxnManager, TxnMetadata,
        },
        version::TransactionVersion,
    },
    crate::coordinator::{
        group::partitioner,
        ownership::{Ownership, Refusal},
        state_topic::CoordinatorRecord,
    },
    kafka_protocol::{
        error::ResponseError,
        messages::{
            AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
            AddPartitionsToTxnResponse, DescribeTransactionsRequest, DescribeTransactionsResponse,
            EndTxnRequest, EndTxnResponse, InitProducerIdRequest, InitProducerIdResponse,
            ListTransactionsRequest, ListTransactionsResponse,
            add_partitions_to_txn_response::{
                AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult,
                AddPartitionsToTxnTopicResult,
            },
        },
    },
    krabka_ids::{ProducerEpoch, ProducerId},
    krabka_log::{Clock, ControlMarker},
    std::sync::{Arc, Mutex, MutexGuard},
};

/// The coordinator epoch stamped on markers by a single node, which never
/// hands `__transaction_state` partitions to another coordinator. In
/// cluster mode a partition's markers carry the epoch of the shard lease
/// they were written under ([`TransactionCoordinator::take_partition`]),
/// so partitions refuse the markers of a deposed coordinator.
pub const COORDINATOR_EPOCH: i32 = 0;

/// Why a marker could not be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MarkerError {
    /// The partition no longer exists (its topic was deleted): Kafka drops
    /// the marker.
    #[error("partition does not exist")]
    Gone,
    /// Anything else; the marker is retried later.
    #[error("{0}")]
    Failed(String),
}

/// Writes transaction markers (control batches) to partitions. Blocking.
pub trait MarkerWriter: Send + Sync {
    /// Appends `marker` to `partition`.
    ///
    /// # Errors
    ///
    /// [`MarkerError::Gone`] when the partition does not exist,
    /// [`MarkerError::Failed`] when the append failed.
    fn write_marker(
        &self,
        partition: &TopicPartition,
        marker: ControlMarker,
    ) -> Result<(), MarkerError>;
}

/// Mints producer ids that never repeat (persisted).
///
/// The coordinator takes ids while it holds its state lock, so it asks with
/// [`ProducerIdSource::try_allocate`], which must not block; when that
/// finds the reserved block used up, the coordinator drops the lock, calls
/// [`ProducerIdSource::refill`] (which may write and fsync) and tries again.
pub trait ProducerIdSource: Send + Sync {
    /// A fresh producer id. Blocking.
    ///
    /// # Errors
    ///
    /// [`TxnError::Storage`] when the allocator cannot persist.
    fn allocate(&self) -> Result<ProducerId, TxnError>;

    /// A fresh producer id if one is at hand without blocking, `None` when
    /// [`ProducerIdSource::refill`] must run first. The default allocates
    /// (for sources that never block).
    ///
    /// # Errors
    ///
    /// As [`ProducerIdSource::allocate`].
    fn try_allocate(&self) -> Result<Option<ProducerId>, TxnError> {
        self.allocate().map(Some)
    }

    /// Makes ids available to [`ProducerIdSource::try_allocate`] again
    /// (persists the next block). Blocking; called with no lock held.
    ///
    /// # Errors
    ///
    /// [`TxnError::Storage`] when the allocator cannot persist.
    fn refill(&self) -> Result<(), TxnError> {
        Ok(())
    }
}

/// Kafka's transaction coordinator for one node.
pub struct TransactionCoordinator {
    config: TxnConfig,
    state: Mutex<TxnManager>,
    /// One per `__transaction_state` partition: held while an id of that
    /// partition changes and its record is appended.
    writers: Vec<Mutex<()>>,
    /// Never used in practice: stands in should a partition index ever fall
    /// outside `writers`.
    spare_writer: Mutex<()>,
    log: Arc<dyn TxnStateLog>,
    markers: Arc<dyn MarkerWriter>,
    ids: Arc<dyn ProducerIdSource>,
    clock: Arc<dyn Clock>,
    /// Which `__transaction_state` partitions are served: on a single node
    /// all but those that could not be read at load (their ids are refused
    /// rather than treated as new); in cluster mode those whose shard lease
    /// this broker holds.
    ownership: Ownership,
    /// Cluster mode: the coordinator epoch of each partition taken.
    epochs: Mutex<std::collections::HashMap<i32, i32>>,
}

impl std::fmt::Debug for TransactionCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransactionCoordinator")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// What one replayed `__transaction_state` record means: the id and its
/// metadata, `None` for a tombstone.
///
/// # Errors
///
/// The record's decoding error.
fn replay(
    record: &CoordinatorRecord,
) -> Result<(String, Option<TxnMetadata>), super::records::RecordError> {
    let id = decode_key(&record.key)?;
    let meta = match &record.value {
        Some(value) => Some(TxnMetadata::from_value(TransactionLogValue::decode(value)?)),
        None => None,
    };
    Ok((id, meta))
}

impl TransactionCoordinator {
    /// The coordinator with its state rebuilt by replaying every
    /// `__transaction_state` partition of `log`. Records whose schema does
    /// not decode are skipped with a warning; a partition the log cannot
    /// read whole is not replayed and its transactional ids are refused
    /// ([`TransactionCoordinator::refusal`]) while the other
    /// partitions serve.
    ///
    /// # Errors
    ///
    /// None today; the `Result` is kept for logs that must fail the load.
    pub fn load(
        config: TxnConfig,
        log: Arc<dyn TxnStateLog>,
        markers: Arc<dyn MarkerWriter>,
        ids: Arc<dyn ProducerIdSource>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, TxnError> {
        let partitions = config.state_log_partitions.max(1);
        let mut manager = TxnManager::new(config.max_timeout_ms);
        let ownership = Ownership::every_partition();
        for partition in 0..partitions {
            let records = match log.read_all(partition) {
                Ok(records) => records,
                Err(e) => {
                    tracing::error!(
                        partition,
                        error = %e,
                        "__transaction_state partition cannot be loaded: its transactional ids are refused with COORDINATOR_NOT_AVAILABLE until it is repaired (`krabka recover --accept-loss __transaction_state-{partition}` cuts the damage out, reporting what it removes)"
                    );
                    ownership.unavailable(partition, e.to_string());
                    continue;
                }
            };
            for record in records {
                match replay(&record) {
                    Ok((id, meta)) => manager.load(id, meta),
                    Err(e) => {
                        tracing::warn!(partition, error = %e, "skipping a __transaction_state record");
                    }
                }
            }
        }
        Ok(Self {
            writers: (0..partitions).map(|_| Mutex::new(())).collect(),
            spare_writer: Mutex::new(()),
            config,
            state: Mutex::new(manager),
            log,
            markers,
            ids,
            clock,
            ownership,
            epochs: Mutex::default(),
        })
    }

    /// The coordinator of a cluster member: it serves no partition until it
    /// takes one ([`TransactionCoordinator::take_partition`]) after
    /// acquiring its shard lease.
    #[must_use]
    pub fn by_lease(
        config: TxnConfig,
        log: Arc<dyn TxnStateLog>,
        markers: Arc<dyn MarkerWriter>,
        ids: Arc<dyn ProducerIdSource>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let partitions = config.state_log_partitions.max(1);
        Self {
            writers: (0..partitions).map(|_| Mutex::new(())).collect(),
            spare_writer: Mutex::new(()),
            state: Mutex::new(TxnManager::new(config.max_timeout_ms)),
            config,
            log,
            markers,
            ids,
            clock,
            ownership: Ownership::by_lease(),
            epochs: Mutex::default(),
        }
    }

    /// Takes over `partition` (cluster mode, once its shard lease is held)
    /// as coordinator epoch `coordinator_epoch` (stamped on its markers):
    /// its ids are answered `COORDINATOR_LOAD_IN_PROGRESS` while its records
    /// are replayed, then served; transactions found preparing are then
    /// completed and those past their timeout aborted, as after a restart.
    /// Blocking.
    ///
    /// # Errors
    ///
    /// The log's error when the partition cannot be read; it is then not
    /// served (`NOT_COORDINATOR`) and the caller may try again.
    pub fn take_partition(&self, partition: i32, coordinator_epoch: i32) -> Result<(), TxnError> {
        self.epochs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(partition, coordinator_epoch);
        {
            let _writer = self.partition_writer(partition);
            self.ownership.loading(partition);
            let records = match self.log.read_all(partition) {
                Ok(records) => records,
                Err(e) => {
                    self.ownership.released(partition);
                    return Err(e);
                }
            };
            let partitions = self.config.state_log_partitions;
            let mut state = self.lock();
            state.forget(|id| partitioner::partition_for(id, partitions) == partition);
            for record in &records {
                match replay(record) {
                    Ok((id, meta)) => state.load(id, meta),
                    Err(e) => {
                        tracing::warn!(partition, error = %e, "skipping a __transaction_state record");
                    }
                }
            }
            drop(state);
            self.ownership.owned(partition);
            tracing::info!(
                partition,
                records = records.len(),
                "took over __transaction_state-{partition}"
            );
        }
        self.tick();
        Ok(())
    }

    /// Gives `partition` up (cluster mode: its lease was lost or handed
    /// on): its ids are forgotten and answered `NOT_COORDINATOR`.
    pub fn release_partition(&self, partition: i32) {
        self.ownership.released(partition);
        let partitions = self.config.state_log_partitions;
        self.lock()
            .forget(|id| partitioner::partition_for(id, partitions) == partition);
        tracing::info!(partition, "gave up __transaction_state-{partition}");
    }

    /// Which partitions are served, and until when (cluster mode).
    #[must_use]
    pub fn ownership(&self) -> &Ownership {
        &self.ownership
    }

    /// Why `transactional_id`'s partition is not served here, if it is not:
    /// another broker owns it, it is loading, or it could not be read.
    #[must_use]
    pub fn refusal(&self, transactional_id: &str) -> Option<Refusal> {
        self.ownership.refusal(self.partition_for(transactional_id))
    }

    /// The coordinator's settings.
    #[must_use]
    pub fn config(&self) -> &TxnConfig {
        &self.config
    }

    /// The `__transaction_state` partition of `transactional_id`: Kafka's
    /// `abs(transactionalId.hashCode) % transaction.state.log.num.partitions`.
    #[must_use]
    pub fn partition_for(&self, transactional_id: &str) -> i32 {
        partitioner::partition_for(transactional_id, self.config.state_log_partitions)
    }

    fn lock(&self) -> MutexGuard<'_, TxnManager> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The epoch the markers of `transactional_id`'s transactions carry.
    fn coordinator_epoch(&self, transactional_id: &str) -> i32 {
        self.epochs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&self.partition_for(transactional_id))
            .copied()
            .unwrap_or(COORDINATOR_EPOCH)
    }

    fn writer(&self, transactional_id: &str) -> MutexGuard<'_, ()> {
        self.partition_writer(self.partition_for(transactional_id))
    }

    fn partition_writer(&self, partition: i32) -> MutexGuard<'_, ()> {
        let partition = usize::try_from(partition).unwrap_or(0);
        self.writers
            .get(partition)
            .unwrap_or(&self.spare_writer)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether the state lock is free at this moment (tests check that
    /// nothing blocking runs under it).
    #[cfg(test)]
    pub(crate) fn state_lock_is_free(&self) -> bool {
        self.state.try_lock().is_ok()
    }

    /// Runs `f` on the state (for inspection).
    pub fn with_state<T>(&self, f: impl FnOnce(&TxnManager) -> T) -> T {
        f(&self.lock())
    }

    /// Appends `transition`'s record (the caller holds the id's writer).
    fn persist(&self, transition: &Transition) -> Result<(), TxnError> {
        let record = CoordinatorRecord {
            key: encode_key(&transition.transactional_id),
            value: Some(transition.next.to_value().encode()),
            timestamp_ms: self.clock.now_ms(),
        };
        self.log
            .append(self.partition_for(&transition.transactional_id), record)
    }

    /// Persists `transition` and makes it take effect (the caller holds the
    /// id's writer).
    fn persist_and_apply(&self, transition: Transition) -> Result<(), TxnError> {
        self.persist(&transition)?;
        self.lock().apply(transition);
        Ok(())
    }

    /// Writes every marker of `completion`, then persists the transaction's
    /// completion; returns whether it completed. Partitions whose marker
    /// failed (or all, when the completion could not be persisted) are
    /// handed out again by the next [`tick`](Self::tick).
    pub fn write_markers(&self, completion: &Completion) -> bool {
        let marker = ControlMarker {
            producer_id: completion.producer_id,
            producer_epoch: completion.producer_epoch,
            commit: completion.commit,
            coordinator_epoch: self.coordinator_epoch(&completion.transactional_id),
            transaction_version: completion.transaction_version,
        };
        let mut failed = Vec::new();
        for partition in &completion.partitions {
            match self.markers.write_marker(partition, marker) {
                Ok(()) | Err(MarkerError::Gone) => {}
                Err(MarkerError::Failed(reason)) => {
                    tracing::warn!(
                        transactional_id = %completion.transactional_id,
                        topic = %partition.topic,
                        partition = partition.partition,
                        %reason,
                        "writing a transaction marker failed; will retry"
                    );
                    failed.push(partition.clone());
                }
            }
        }
        let _writer = self.writer(&completion.transactional_id);
        let now = self.clock.now_ms();
        if !failed.is_empty() {
            self.lock().retry_later(completion, failed, now);
            return false;
        }
        let Some(done) = self.lock().complete(completion, now) else {
            return true;
        };
        match self.persist_and_apply(done) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(
                    transactional_id = %completion.transactional_id,
                    error = %e,
                    "recording a completed transaction failed; will retry"
                );
                self.lock().retry_later(completion, Vec::new(), now);
                false
            }
        }
    }

    /// InitProducerId with a `transactional.id`. An open transaction of the
    /// id is aborted first (under a bumped epoch that fences its producer).
    ///
    /// # Errors
    ///
    /// See [`TxnManager::init_producer_id`]; also
    /// [`TxnError::ConcurrentTransactions`] when the abort's markers could
    /// not all be written (the client retries), and
    /// [`TxnError::NotCoordinator`] when the new state could not be written.
    pub fn init_producer_id(
        &self,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(ProducerId, ProducerEpoch)>,
    ) -> Result<(ProducerId, ProducerEpoch), TxnError> {
        // At most two rounds: abort the open transaction, then bump again.
        let mut expected = expected;
        for _ in 0..2 {
            let abort = {
                let _writer = self.writer(transactional_id);
                let step = self.with_ids(|state, allocate| {
                    state.init_producer_id(
                        transactional_id,
                        timeout_ms,
                        expected,
                        self.clock.now_ms(),
                        allocate,
                    )
                })?;
                match step {
                    InitStep::Ready(transition) => {
                        let answer = (transition.next.producer_id, transition.next.producer_epoch);
                        self.persist_and_apply(transition)?;
                        return Ok(answer);
                    }
                    InitStep::AbortFirst(transition, completion) => {
                        self.persist_and_apply(transition)?;
                        completion
                    }
                }
            };
            if !self.write_markers(&abort) {
                return Err(TxnError::ConcurrentTransactions);
            }
            // The holder changed under the abort; the next round starts from
            // the fenced epoch.
            expected = None;
        }
        Err(TxnError::ConcurrentTransactions)
    }

    /// EndTxn: the prepare is durable before any marker is written, and the
    /// markers are written before answering (so a read_committed consumer
    /// sees a committed transaction as soon as its producer does).
    ///
    /// # Errors
    ///
    /// See [`TxnManager::end_txn`]; [`TxnError::NotCoordinator`] when the
    /// prepare could not be written.
    pub fn end_txn(
        &self,
        transactional_id: &str,
        producer_id: ProducerId,
        producer_epoch: ProducerEpoch,
        commit: bool,
    ) -> Result<(), TxnError> {
        self.end_transaction(
            transactional_id,
            producer_id,
            producer_epoch,
            commit,
            TransactionVersion::V0,
        )
        .map(|_| ())
    }

    /// EndTxn of a client following `version`: as [`Self::end_txn`], and
    /// under transactions v2 with the epoch bumped
    /// ([`TxnManager::end_txn_bumping`]). Returns the producer id and
    /// epoch the client holds next.
    ///
    /// # Errors
    ///
    /// See [`TxnManager::end_txn`] and [`TxnManager::end_txn_bumping`];
    /// [`TxnError::NotCoordinator`] when the prepare could not be written.
    pub fn end_transaction(
        &self,
        transactional_id: &str,
        producer_id: ProducerId,
        producer_epoch: ProducerEpoch,
        commit: bool,
        version: TransactionVersion,
    ) -> Result<(ProducerId, ProducerEpoch), TxnError> {
        let (completion, answer) = {
            let _writer = self.writer(transactional_id);
            let step = self.with_ids(|state, allocate| {
                let now = self.clock.now_ms();
                if version.bumps_epoch() {
                    state.end_txn_bumping(
                        transactional_id,
                        producer_id,
                        producer_epoch,
                        commit,
                        now,
                        allocate,
                    )
                } else {
                    state.end_txn(transactional_id, producer_id, producer_epoch, commit, now)
                }
            })?;
            match step {
                EndStep::AlreadyDone => {
                    let current = self
                        .lock()
                        .get(transactional_id)
                        .map(TxnMetadata::client_view);
                    return Ok(current.unwrap_or((producer_id, producer_epoch)));
                }
                EndStep::Prepare(transition, completion) => {
                    let answer = transition.next.client_view();
                    self.persist_and_apply(transition)?;
                    (completion, answer)
                }
            }
        };
        // Kafka answers once the prepare is durable; failed markers are
        // retried by `tick`, so the answer is success either way.
        self.write_markers(&completion);
        Ok(answer)
    }

    /// Runs a state machine `step` with a producer id allocator that never
    /// blocks under the state lock: a used-up block is refilled (a registry
    /// write and fsync) once the lock is dropped, and the step runs again.
    fn with_ids<T>(
        &self,
        mut step: impl FnMut(
            &TxnManager,
            &mut dyn FnMut() -> Result<ProducerId, TxnError>,
        ) -> Result<T, TxnError>,
    ) -> Result<T, TxnError> {
        loop {
            let used_up = std::cell::Cell::new(false);
            let mut allocate = || match self.ids.try_allocate() {
                Ok(Some(id)) => Ok(id),
                Ok(None) => {
                    used_up.set(true);
                    Err(TxnError::Storage("the producer id block is used up".into()))
                }
                Err(e) => Err(e),
            };
            // Bound first: the state lock's guard must be gone before a
            // refill writes.
            let attempt = step(&self.lock(), &mut allocate);
            match attempt {
                Err(_) if used_up.get() => self.ids.refill()?,
                other => return other,
            }
        }
    }

    /// Adds partitions to the open transaction (persisted before the answer).
    ///
    /// # Errors
    ///
    /// See [`TxnManager::add_partitions`]; [`TxnError::NotCoordinator`] when
    /// the new state could not be written.
    pub fn add_partitions(
        &self,
        transactional_id: &str,
        producer_id: ProducerId,
        producer_epoch: ProducerEpoch,
        partitions: Vec<TopicPartition>,
    ) -> Result<(), TxnError> {
        let _writer = self.writer(transactional_id);
        let transition = self.lock().add_partitions(
            transactional_id,
            producer_id,
            producer_epoch,
            partitions,
            self.clock.now_ms(),
        )?;
        match transition {
            Some(transition) => self.persist_and_apply(transition),
            None => Ok(()),
        }
    }

    /// The produce path's check of a transactional batch.
    ///
    /// # Errors
    ///
    /// See [`TxnManager::verify`].
    pub fn verify(
        &self,
        transactional_id: &str,
        producer_id: ProducerId,
        producer_epoch: ProducerEpoch,
        partition: &TopicPartition,
    ) -> Result<(), TxnError> {
        self.lock()
            .verify(transactional_id, producer_id, producer_epoch, partition)
    }

    /// Aborts timed-out transactions and completes the ones whose markers
    /// are not out (failed earlier, or found preparing after a restart);
    /// returns how many completions were attempted.
    pub fn tick(&self) -> usize {
        let due = self.lock().due_ids(self.clock.now_ms());
        let mut attempted = 0;
        for id in due {
            let completion = {
                let _writer = self.writer(&id);
                let Some((transition, completion)) = self.lock().due(&id, self.clock.now_ms())
                else {
                    continue;
                };
                if let Some(transition) = transition {
                    tracing::info!(transactional_id = %id, "aborting a transaction past its timeout");
                    if let Err(e) = self.persist_and_apply(transition) {
                        tracing::warn!(transactional_id = %id, error = %e, "could not record the abort; will retry");
                        continue;
                    }
                }
                completion
            };
            attempted += 1;
            self.write_markers(&completion);
        }
        attempted
    }

    /// Forgets transactional ids idle for `transactional.id.expiration.ms`
    /// with no transaction open (a tombstone each, as Kafka writes); returns
    /// how many.
    pub fn expire_transactional_ids(&self) -> usize {
        let expiration = self.config.id_expiration_ms;
        let candidates = self.lock().expired(self.clock.now_ms(), expiration);
        let mut removed = 0;
        for id in candidates {
            let _writer = self.writer(&id);
            let now = self.clock.now_ms();
            if !self.lock().is_expired(&id, now, expiration) {
                continue;
            }
            let tombstone = CoordinatorRecord {
                key: encode_key(&id),
                value: None,
                timestamp_ms: now,
            };
            match self.log.append(self.partition_for(&id), tombstone) {
                Ok(()) => {
                    tracing::info!(transactional_id = %id, "transactional id expired");
                    self.lock().remove(&id);
                    removed += 1;
                }
                Err(e) => {
                    tracing::warn!(transactional_id = %id, error = %e, "could not expire a transactional id");
                }
            }
        }
        removed
    }

    /// Handles InitProducerId for a request that carries a `transactional.id`.
    pub fn handle_init_producer_id(
        &self,
        version: i16,
        request: &InitProducerIdRequest,
    ) -> InitProducerIdResponse {
        let mut response = InitProducerIdResponse::default();
        response.producer_id = kafka_protocol::messages::ProducerId(-1);
        response.producer_epoch = -1;
        let Some(id) = request.transactional_id.as_ref().map(|t| t.0.as_str()) else {
            response.error_code = ResponseError::InvalidRequest.code();
            return response;
        };
        // Kafka: both -1 is a producer without an id yet; just one of them
        // is a malformed request.
        let expected = match (request.producer_id.0, request.producer_epoch) {
            (-1, -1) => None,
            (-1, _) | (_, -1) => {
                response.error_code = ResponseError::InvalidRequest.code();
                return response;
            }
            (pid, epoch) => Some((ProducerId(pid), ProducerEpoch(epoch))),
        };
        match self.init_producer_id(id, request.transaction_timeout_ms, expected) {
            Ok((pid, epoch)) => {
                response.producer_id = kafka_protocol::messages::ProducerId(pid.0);
                response.producer_epoch = epoch.0;
            }
            Err(e) => response.error_code = e.code_for(version, 4),
        }
        response
    }

    /// Handles AddPartitionsToTxn v0–3 (the client form). `exists` tells
    /// whether a partition exists on this broker; when one does not, it is
    /// answered UNKNOWN_TOPIC_OR_PARTITION and the rest OPERATION_NOT_ATTEMPTED.
    pub fn handle_add_partitions(
        &self,
        version: i16,
        request: &AddPartitionsToTxnRequest,
        exists: &dyn Fn(&str, i32) -> bool,
    ) -> AddPartitionsToTxnResponse {
        let wanted: Vec<TopicPartition> = request
            .v3_and_below_topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|&p| TopicPartition::new(t.name.0.as_str(), p))
            })
            .collect();
        let unknown: Vec<bool> = wanted
            .iter()
            .map(|tp| !exists(&tp.topic, tp.partition))
            .collect();
        let outcome = if unknown.iter().any(|u| *u) {
            Err(TxnError::OperationNotAttempted)
        } else {
            self.add_partitions(
                request.v3_and_below_transactional_id.0.as_str(),
                ProducerId(request.v3_and_below_producer_id.0),
                ProducerEpoch(request.v3_and_below_producer_epoch),
                wanted.clone(),
            )
        };
        let mut response = AddPartitionsToTxnResponse::default();
        response.results_by_topic_v3_and_below =
            topic_results(&request.v3_and_below_topics, |tp_index| {
                match (&outcome, unknown.get(tp_index)) {
                    (_, Some(true)) => ResponseError::UnknownTopicOrPartition.code(),
                    (Ok(()), _) => 0,
                    (Err(e), _) => e.code_for(version, 2),
                }
            });
        response
    }

    /// Handles AddPartitionsToTxn v4+ (the broker-to-coordinator form):
    /// verify-only transactions are checked, the others added.
    pub fn handle_add_partitions_batched(
        &self,
        request: &AddPartitionsToTxnRequest,
        exists: &dyn Fn(&str, i32) -> bool,
    ) -> AddPartitionsToTxnResponse {
        let mut response = AddPartitionsToTxnResponse::default();
        for txn in &request.transactions {
            let id = txn.transactional_id.0.as_str();
            let pid = ProducerId(txn.producer_id.0);
            let epoch = ProducerEpoch(txn.producer_epoch);
            let wanted: Vec<TopicPartition> = txn
                .topics
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(|&p| TopicPartition::new(t.name.0.as_str(), p))
                })
                .collect();
            let codes: Vec<i16> = if txn.verify_only {
                wanted
                    .iter()
                    .map(|tp| {
                        // Kafka's coordinator answers a partition outside the
                        // transaction TRANSACTION_ABORTABLE here; the
                        // broker that asked converts it for old clients.
                        self.verify(id, pid, epoch, tp).map_or_else(
                            |e| match e {
                                TxnError::InvalidTxnState(_) => {
                                    ResponseError::TransactionAbortable.code()
                                }
                                other => other.response_error().code(),
                            },
                            |()| 0,
                        )
                    })
                    .collect()
            } else if wanted.iter().any(|tp| !exists(&tp.topic, tp.partition)) {
                wanted
                    .iter()
                    .map(|tp| {
                        if exists(&tp.topic, tp.partition) {
                            ResponseError::OperationNotAttempted.code()
                        } else {
                            ResponseError::UnknownTopicOrPartition.code()
                        }
                    })
                    .collect()
            } else {
                let code = self
                    .add_partitions(id, pid, epoch, wanted.clone())
                    .map_or_else(|e| e.response_error().code(), |()| 0);
                vec![code; wanted.len()]
            };
            let mut result = AddPartitionsToTxnResult::default();
            result.transactional_id = txn.transactional_id.clone();
            result.topic_results =
                topic_results(&txn.topics, |i| codes.get(i).copied().unwrap_or(0));
            response.results_by_transaction.push(result);
        }
        response
    }

    /// Handles AddOffsetsToTxn: adds `offsets_partition`, the group's
    /// partition of `__consumer_offsets`, to the transaction.
    pub fn handle_add_offsets(
        &self,
        version: i16,
        request: &AddOffsetsToTxnRequest,
        offsets_topic: &str,
        offsets_partition: i32,
    ) -> AddOffsetsToTxnResponse {
        let mut response = AddOffsetsToTxnResponse::default();
        if let Err(e) = self.add_partitions(
            request.transactional_id.0.as_str(),
            ProducerId(request.producer_id.0),
            ProducerEpoch(request.producer_epoch),
            vec![TopicPartition::new(offsets_topic, offsets_partition)],
        ) {
            response.error_code = e.code_for(version, 2);
        }
        response
    }

    /// Handles DescribeTransactions: state, timeout, start time, producer
    /// and partitions of each id; TRANSACTIONAL_ID_NOT_FOUND for unknown ones.
    pub fn handle_describe_transactions(
        &self,
        request: &DescribeTransactionsRequest,
    ) -> DescribeTransactionsResponse {
        use kafka_protocol::messages::describe_transactions_response::{
            TopicData, TransactionState as Described,
        };
        let state = self.lock();
        let mut response = DescribeTransactionsResponse::default();
        response.transaction_states = request
            .transactional_ids
            .iter()
            .map(|id| {
                let mut d = Described::default();
                d.transactional_id = id.clone();
                d.producer_id = kafka_protocol::messages::ProducerId(-1);
                d.producer_epoch = -1;
                d.transaction_start_time_ms = -1;
                match state.get(id.0.as_str()) {
                    None => {
                        d.error_code = ResponseError::TransactionalIdNotFound.code();
                        d.transaction_state = "".into();
                    }
                    Some(meta) => {
                        d.transaction_state = meta.state.name().into();
                        d.transaction_timeout_ms = meta.timeout_ms;
                        d.transaction_start_time_ms = meta.txn_start_ms;
                        d.producer_id = kafka_protocol::messages::ProducerId(meta.producer_id.0);
                        d.producer_epoch = meta.producer_epoch.0;
                        let mut topics: Vec<TopicData> = Vec::new();
                        for tp in &meta.partitions {
                            match topics.last_mut() {
                                Some(t) if t.topic.0.as_str() == tp.topic => {
                                    t.partitions.push(tp.partition);
                                }
                                _ => {
                                    let mut t = TopicData::default();
                                    t.topic = kafka_protocol::messages::TopicName(
                                        kafka_protocol::protocol::StrBytes::from_string(
                                            tp.topic.clone(),
                                        ),
                                    );
                                    t.partitions = vec![tp.partition];
                                    topics.push(t);
                                }
                            }
                        }
                        d.topics = topics;
                    }
                }
                d
            })
            .collect();
        response
    }

    /// Handles ListTransactions v0–2: state and producer id filters, (v1)
    /// the duration filter — only transactions open longer than it — and
    /// (v2, KIP-1152) a regular expression the whole transactional id must
    /// match; one that does not compile is INVALID_REGULAR_EXPRESSION.
    pub fn handle_list_transactions(
        &self,
        request: &ListTransactionsRequest,
    ) -> ListTransactionsResponse {
        use super::state::TxnState;
        use kafka_protocol::messages::list_transactions_response::TransactionState as Listed;
        const STATES: [TxnState; 6] = [
            TxnState::Empty,
            TxnState::Ongoing,
            TxnState::PrepareCommit,
            TxnState::PrepareAbort,
            TxnState::CompleteCommit,
            TxnState::CompleteAbort,
        ];
        let mut response = ListTransactionsResponse::default();
        // Kafka compiles the pattern with RE2/J and asks for a whole match;
        // the `regex` crate has RE2's syntax and linear-time guarantee.
        let pattern = match request
            .transactional_id_pattern
            .as_deref()
            .filter(|p| !p.is_empty())
            .map(|p| regex::Regex::new(&format!("^(?:{p})$")))
            .transpose()
        {
            Ok(pattern) => pattern,
            Err(e) => {
                response.error_code = ResponseError::InvalidRegularExpression.code();
                tracing::debug!(error = %e, "ListTransactions with an invalid pattern");
                return response;
            }
        };
        response.unknown_state_filters = request
            .state_filters
            .iter()
            .filter(|f| !STATES.iter().any(|s| s.name() == f.as_str()))
            .cloned()
            .collect();
        let now = self.clock.now_ms();
        let state = self.lock();
        response.transaction_states = state
            .iter()
            .filter(|(_, m)| {
                request.state_filters.is_empty()
                    || request
                        .state_filters
                        .iter()
                        .any(|f| f.as_str() == m.state.name())
            })
            .filter(|(_, m)| {
                request.producer_id_filters.is_empty()
                    || request
                        .producer_id_filters
                        .iter()
                        .any(|p| p.0 == m.producer_id.0)
            })
            .filter(|(id, _)| pattern.as_ref().is_none_or(|p| p.is_match(id)))
            .filter(|(_, m)| {
                // KIP-994: only transactions running longer than the filter.
                request.duration_filter < 0
                    || (m.state.is_running()
                        && m.txn_start_ms >= 0
                        && now.saturating_sub(m.txn_start_ms) > request.duration_filter)
            })
            .map(|(id, m)| {
                let mut l = Listed::default();
                l.transactional_id = kafka_protocol::messages::TransactionalId(
                    kafka_protocol::protocol::StrBytes::from_string(id.clone()),
                );
                l.producer_id = kafka_protocol::messages::ProducerId(m.producer_id.0);
                l.transaction_state = m.state.name().into();
                l
            })
            .collect();
        response
    }

    /// Handles EndTxn.
    pub fn handle_end_txn(&self, version: i16, request: &EndTxnRequest) -> EndTxnResponse {
        let mut response = EndTxnResponse::default();
        response.producer_id = kafka_protocol::messages::ProducerId(-1);
        response.producer_epoch = -1;
        match self.end_transaction(
            request.transactional_id.0.as_str(),
            ProducerId(request.producer_id.0),
            ProducerEpoch(request.producer_epoch),
            request.committed,
            super::version::of_end_txn(version),
        ) {
            // v5 tells the client the epoch it holds next.
            Ok((pid, epoch)) if version >= 5 => {
                response.producer_id = kafka_protocol::messages::ProducerId(pid.0);
                response.producer_epoch = epoch.0;
            }
            Ok(_) => {}
            Err(e) => response.error_code = e.code_for(version, 2),
        }
        response
    }
}

/// Per-topic AddPartitionsToTxn results in request order; `code` gets the
/// flat index of each partition.
pub(crate) fn topic_results(
    topics: &[kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic],
    code: impl Fn(usize) -> i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut index = 0;
    topics
        .iter()
        .map(|t| {
            let mut result = AddPartitionsToTxnTopicResult::default();
            result.name = t.name.clone();
            result.results_by_partition = t
                .partitions
                .iter()
                .map(|&p| {
                    let mut r = AddPartitionsToTxnPartitionResult::default();
                    r.partition_index = p;
                    r.partition_error_code = code(index);
                    index += 1;
                    r
                })
                .collect();
            result
        })
        .collect()
}
