//! The transaction state machine, free of I/O.
//!
//! [`TxnManager`] holds one [`TxnMetadata`] per `transactional.id` and
//! applies Kafka's rules for InitProducerId, AddPartitionsToTxn,
//! AddOffsetsToTxn and EndTxn. Writing the commit/abort markers is not its
//! business: a call that has to complete a transaction moves it to
//! `PrepareCommit`/`PrepareAbort` and hands back a [`Completion`] naming the
//! partitions and the marker's producer id and epoch; the caller writes the
//! markers and reports back with [`TxnManager::complete`] (or
//! [`TxnManager::retry_later`] for partitions that failed). Keeping the two
//! apart lets the state machine be tested exhaustively without a log, and
//! keeps the coordinator's lock off the disk.

use {
    super::error::TxnError,
    krabka_ids::{ProducerEpoch, ProducerId},
    std::collections::{BTreeSet, HashMap},
};

/// One partition of a transaction.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
}

impl TopicPartition {
    /// `topic`-`partition`.
    #[must_use]
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        Self {
            topic: topic.into(),
            partition,
        }
    }
}

/// Kafka's `TransactionState` (the ones a single coordinator goes through).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnState {
    /// No transaction open (after InitProducerId).
    Empty,
    /// Partitions were added; records may be written.
    Ongoing,
    /// EndTxn(commit) accepted; commit markers being written.
    PrepareCommit,
    /// EndTxn(abort), a timeout or a fencing InitProducerId; abort markers being written.
    PrepareAbort,
    /// Commit markers written everywhere.
    CompleteCommit,
    /// Abort markers written everywhere.
    CompleteAbort,
}

impl TxnState {
    /// The name Kafka's tools show (`DescribeTransactions`).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::Ongoing => "Ongoing",
            Self::PrepareCommit => "PrepareCommit",
            Self::PrepareAbort => "PrepareAbort",
            Self::CompleteCommit => "CompleteCommit",
            Self::CompleteAbort => "CompleteAbort",
        }
    }

    fn is_preparing(self) -> bool {
        matches!(self, Self::PrepareCommit | Self::PrepareAbort)
    }
}

/// Everything the coordinator knows about one `transactional.id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    /// The producer id currently assigned.
    pub producer_id: ProducerId,
    /// Its current epoch.
    pub producer_epoch: ProducerEpoch,
    /// `transaction.timeout.ms` of the last InitProducerId.
    pub timeout_ms: i32,
    /// Where the transaction is.
    pub state: TxnState,
    /// The partitions of the open (or completing) transaction.
    pub partitions: BTreeSet<TopicPartition>,
    /// When the open transaction started (first partition added), ms.
    pub txn_start_ms: i64,
    /// When the metadata last changed, ms.
    pub last_update_ms: i64,
    /// A [`Completion`] is out with a marker writer.
    markers_in_flight: bool,
}

/// Markers to write to finish a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The transaction.
    pub transactional_id: String,
    /// Producer id of the markers.
    pub producer_id: ProducerId,
    /// Producer epoch of the markers (bumped when the transaction is fenced).
    pub producer_epoch: ProducerEpoch,
    /// COMMIT (`true`) or ABORT.
    pub commit: bool,
    /// Where to write them.
    pub partitions: Vec<TopicPartition>,
}

/// What an InitProducerId call needs next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitStep {
    /// The producer may go on with this id and epoch.
    Ready(ProducerId, ProducerEpoch),
    /// An open transaction was fenced: write these abort markers, report
    /// with [`TxnManager::complete`], then call InitProducerId again.
    AbortFirst(Completion),
}

/// What an EndTxn call needs next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndStep {
    /// Nothing to do: the same EndTxn already completed (a retry).
    AlreadyDone,
    /// Write these markers, then report with [`TxnManager::complete`].
    WriteMarkers(Completion),
}

/// `transaction.max.timeout.ms` default (15 minutes).
pub const DEFAULT_MAX_TIMEOUT_MS: i32 = 900_000;

/// The state of every `transactional.id`, and the rules.
#[derive(Debug)]
pub struct TxnManager {
    txns: HashMap<String, TxnMetadata>,
    max_timeout_ms: i32,
}

impl Default for TxnManager {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_TIMEOUT_MS)
    }
}

/// The next epoch, or `None` when the epoch is exhausted and a fresh
/// producer id is needed (Kafka stops at `Short.MaxValue - 1`).
fn next_epoch(epoch: ProducerEpoch) -> Option<ProducerEpoch> {
    (epoch.0 < i16::MAX - 1).then(|| ProducerEpoch(epoch.0 + 1))
}

impl TxnManager {
    /// An empty manager refusing timeouts above `max_timeout_ms`.
    #[must_use]
    pub fn new(max_timeout_ms: i32) -> Self {
        Self {
            txns: HashMap::new(),
            max_timeout_ms,
        }
    }

    /// The metadata of one `transactional.id`.
    #[must_use]
    pub fn get(&self, transactional_id: &str) -> Option<&TxnMetadata> {
        self.txns.get(transactional_id)
    }

    /// Every `transactional.id` with its metadata.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &TxnMetadata)> {
        self.txns.iter()
    }

    /// InitProducerId for `transactional_id`.
    ///
    /// `expected` is the (producer id, epoch) a KIP-360 client sends to bump
    /// its own epoch; `allocate` mints a fresh producer id.
    ///
    /// # Errors
    ///
    /// [`TxnError::InvalidTransactionTimeout`], [`TxnError::ConcurrentTransactions`]
    /// while markers are being written, [`TxnError::ProducerFenced`] when
    /// `expected` is not the current holder, [`TxnError::Storage`] when no id
    /// can be allocated.
    pub fn init_producer_id(
        &mut self,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(ProducerId, ProducerEpoch)>,
        now_ms: i64,
        allocate: &mut dyn FnMut() -> Result<ProducerId, TxnError>,
    ) -> Result<InitStep, TxnError> {
        if timeout_ms <= 0 || timeout_ms > self.max_timeout_ms {
            return Err(TxnError::InvalidTransactionTimeout);
        }
        let Some(meta) = self.txns.get_mut(transactional_id) else {
            let producer_id = allocate()?;
            self.txns.insert(
                transactional_id.to_owned(),
                TxnMetadata {
                    producer_id,
                    producer_epoch: ProducerEpoch(0),
                    timeout_ms,
                    state: TxnState::Empty,
                    partitions: BTreeSet::new(),
                    txn_start_ms: -1,
                    last_update_ms: now_ms,
                    markers_in_flight: false,
                },
            );
            return Ok(InitStep::Ready(producer_id, ProducerEpoch(0)));
        };
        if meta.state.is_preparing() {
            return Err(TxnError::ConcurrentTransactions);
        }
        if let Some((pid, epoch)) = expected
            && (pid != meta.producer_id || epoch != meta.producer_epoch)
        {
            return Err(TxnError::ProducerFenced);
        }
        if meta.state == TxnState::Ongoing {
            // Fence the old producer: its epoch is bumped and the open
            // transaction is aborted under the new epoch.
            if let Some(bumped) = next_epoch(meta.producer_epoch) {
                meta.producer_epoch = bumped;
            }
            meta.state = TxnState::PrepareAbort;
            meta.last_update_ms = now_ms;
            meta.markers_in_flight = true;
            return Ok(InitStep::AbortFirst(Completion {
                transactional_id: transactional_id.to_owned(),
                producer_id: meta.producer_id,
                producer_epoch: meta.producer_epoch,
                commit: false,
                partitions: meta.partitions.iter().cloned().collect(),
            }));
        }
        match next_epoch(meta.producer_epoch) {
            Some(epoch) => meta.producer_epoch = epoch,
            None => {
                meta.producer_id = allocate()?;
                meta.producer_epoch = ProducerEpoch(0);
            }
        }
        meta.timeout_ms = timeout_ms;
        meta.state = TxnState::Empty;
        meta.partitions.clear();
        meta.txn_start_ms = -1;
        meta.last_update_ms = now_ms;
        Ok(InitStep::Ready(meta.producer_id, meta.producer_epoch))
    }

    fn holder(
        &mut self,
        transactional_id: &str,
        producer_id: ProducerId,
        producer_epoch: ProducerEpoch,
    ) -> Result<&mut TxnMetadata, TxnError> {
        let meta = self
            .txns
            .get_mut(transactional_id)
            .ok_or(TxnError::InvalidProducerIdMapping)?;
        if meta.producer_id != producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if meta.producer_epoch != producer_epoch {
            return Err(TxnError::ProducerFenced);
        }
        Ok(meta)
    }

    /// AddPartitionsToTxn (and AddOffsetsToTxn, with the group's
    /// `__consumer_offsets` partition): opens the transaction if needed.
    ///
    /// # Errors
    ///
    /// [`TxnError::InvalidProducerIdMapping`] for an unknown id or producer,
    /// [`TxnError::ProducerFenced`] for another epoch,
    /// [`TxnError::ConcurrentTransactions`] while the previous transaction
    /// is completing.
    pub fn add_partitions(
        &mut self,
        transactional_id: &str,
        producer_id: ProducerId,
        producer_epoch: ProducerEpoch,
        partitions: impl IntoIterator<Item = TopicPartition>,
        now_ms: i64,
    ) -> Result<(), TxnError> {
        let meta = self.holder(transactional_id, producer_id, producer_epoch)?;
        if meta.state.is_preparing() {
            return Err(TxnError::ConcurrentTransactions);
        }
        if meta.state != TxnState::Ongoing {
            meta.state = TxnState::Ongoing;
            meta.txn_start_ms = now_ms;
            meta.partitions.clear();
        }
        meta.partitions.extend(partitions);
        meta.last_update_ms = now_ms;
        Ok(())
    }

    /// Whether a transactional write by (`producer_id`, `producer_epoch`)
    /// to `partition` belongs to the open transaction (the produce path's
    /// check, and AddPartitionsToTxn's verify-only form).
    ///
    /// # Errors
    ///
    /// [`TxnError::InvalidProducerIdMapping`] for an unknown id or producer,
    /// [`TxnError::ProducerFenced`] for another epoch,
    /// [`TxnError::InvalidTxnState`] when the partition was not added.
    pub fn verify(
        &self,
        transactional_id: &str,
        producer_id: ProducerId,
        producer_epoch: ProducerEpoch,
        partition: &TopicPartition,
    ) -> Result<(), TxnError> {
        let meta = self
            .txns
            .get(transactional_id)
            .ok_or(TxnError::InvalidProducerIdMapping)?;
        if meta.producer_id != producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if meta.producer_epoch != producer_epoch {
            return Err(TxnError::ProducerFenced);
        }
        if meta.state != TxnState::Ongoing || !meta.partitions.contains(partition) {
            return Err(TxnError::InvalidTxnState(format!(
                "{}-{} is not part of the open transaction of {transactional_id}",
                partition.topic, partition.partition
            )));
        }
        Ok(())
    }

    /// EndTxn.
    ///
    /// # Errors
    ///
    /// [`TxnError::InvalidProducerIdMapping`], [`TxnError::ProducerFenced`],
    /// [`TxnError::ConcurrentTransactions`] while the same outcome is being
    /// written, [`TxnError::InvalidTxnState`] for no open transaction or the
    /// opposite outcome of one that is completing or completed.
    pub fn end_txn(
        &mut self,
        transactional_id: &str,
        producer_id: ProducerId,
        producer_epoch: ProducerEpoch,
        commit: bool,
        now_ms: i64,
    ) -> Result<EndStep, TxnError> {
        let meta = self.holder(transactional_id, producer_id, producer_epoch)?;
        let wrong = |state: TxnState| {
            TxnError::InvalidTxnState(format!(
                "cannot {} a transaction in state {}",
                if commit { "commit" } else { "abort" },
                state.name()
            ))
        };
        match (meta.state, commit) {
            (TxnState::Ongoing, _) => {
                meta.state = if commit {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                };
                meta.last_update_ms = now_ms;
                meta.markers_in_flight = true;
                Ok(EndStep::WriteMarkers(Completion {
                    transactional_id: transactional_id.to_owned(),
                    producer_id: meta.producer_id,
                    producer_epoch: meta.producer_epoch,
                    commit,
                    partitions: meta.partitions.iter().cloned().collect(),
                }))
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {
                Ok(EndStep::AlreadyDone)
            }
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(TxnError::ConcurrentTransactions)
            }
            (state, _) => Err(wrong(state)),
        }
    }

    /// Records that every marker of `done` is written: the transaction is
    /// complete. A completion that no longer matches (superseded) is ignored.
    pub fn complete(&mut self, done: &Completion, now_ms: i64) {
        let Some(meta) = self.txns.get_mut(&done.transactional_id) else {
            return;
        };
        let preparing = if done.commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        if meta.state != preparing || meta.producer_id != done.producer_id {
            return;
        }
        meta.state = if done.commit {
            TxnState::CompleteCommit
        } else {
            TxnState::CompleteAbort
        };
        meta.partitions.clear();
        meta.txn_start_ms = -1;
        meta.last_update_ms = now_ms;
        meta.markers_in_flight = false;
    }

    /// Records that the markers for `failed` could not be written yet: the
    /// transaction stays preparing with just those partitions, for
    /// [`TxnManager::due`] to hand out again.
    pub fn retry_later(&mut self, done: &Completion, failed: Vec<TopicPartition>, now_ms: i64) {
        if failed.is_empty() {
            self.complete(done, now_ms);
            return;
        }
        if let Some(meta) = self.txns.get_mut(&done.transactional_id)
            && meta.producer_id == done.producer_id
            && meta.state.is_preparing()
        {
            meta.partitions = failed.into_iter().collect();
            meta.markers_in_flight = false;
            meta.last_update_ms = now_ms;
        }
    }

    /// The periodic work: aborts every transaction open for longer than its
    /// timeout (bumping the epoch, which fences the producer, as Kafka does)
    /// and hands out again every completion whose markers failed.
    pub fn due(&mut self, now_ms: i64) -> Vec<Completion> {
        let mut out = Vec::new();
        for (id, meta) in &mut self.txns {
            if meta.markers_in_flight {
                continue;
            }
            match meta.state {
                TxnState::Ongoing
                    if meta.txn_start_ms.saturating_add(i64::from(meta.timeout_ms)) <= now_ms =>
                {
                    if let Some(bumped) = next_epoch(meta.producer_epoch) {
                        meta.producer_epoch = bumped;
                    }
                    meta.state = TxnState::PrepareAbort;
                    meta.last_update_ms = now_ms;
                }
                TxnState::PrepareCommit | TxnState::PrepareAbort => {}
                _ => continue,
            }
            meta.markers_in_flight = true;
            out.push(Completion {
                transactional_id: id.clone(),
                producer_id: meta.producer_id,
                producer_epoch: meta.producer_epoch,
                commit: meta.state == TxnState::PrepareCommit,
                partitions: meta.partitions.iter().cloned().collect(),
            });
        }
        out
    }
}
