//! The transaction state machine, free of I/O.
//!
//! [`TxnManager`] holds one [`TxnMetadata`] per `transactional.id` and
//! applies Kafka's rules for InitProducerId, AddPartitionsToTxn,
//! AddOffsetsToTxn and EndTxn. It never changes a transactional id's
//! metadata by itself: every decision is a [`Transition`] (the metadata the
//! id is to have) that the caller first persists in `__transaction_state`
//! and then [`TxnManager::apply`]s — Kafka's `prepareTransitionTo` /
//! `completeTransitionTo` — so what clients were told is always what a
//! restart replays. Writing the commit/abort markers is not its business
//! either: a transition to `PrepareCommit`/`PrepareAbort` comes with a
//! [`Completion`] naming the partitions and the marker's producer id and
//! epoch; the caller writes the markers and asks [`TxnManager::complete`]
//! for the transition to `CompleteCommit`/`CompleteAbort` (or calls
//! [`TxnManager::retry_later`] for partitions that failed). Keeping the
//! three apart lets the state machine be tested exhaustively without a log,
//! and keeps the coordinator's lock off the disk.

mod epoch_bump;

use {
    super::{error::TxnError, records::TransactionLogValue, version::TransactionVersion},
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

    /// Kafka's `TransactionState` id, as persisted in `TransactionLogValue`.
    #[must_use]
    pub fn id(self) -> i8 {
        match self {
            Self::Empty => 0,
            Self::Ongoing => 1,
            Self::PrepareCommit => 2,
            Self::PrepareAbort => 3,
            Self::CompleteCommit => 4,
            Self::CompleteAbort => 5,
        }
    }

    /// The state with Kafka's id `id`; `None` for Dead (6) and
    /// PrepareEpochFence (7), which Kafka never persists, and unknown ids.
    #[must_use]
    pub fn from_id(id: i8) -> Option<Self> {
        Some(match id {
            0 => Self::Empty,
            1 => Self::Ongoing,
            2 => Self::PrepareCommit,
            3 => Self::PrepareAbort,
            4 => Self::CompleteCommit,
            5 => Self::CompleteAbort,
            _ => return None,
        })
    }

    /// Whether a transaction is open or completing (what ListTransactions'
    /// duration filter looks at).
    #[must_use]
    pub fn is_running(self) -> bool {
        matches!(
            self,
            Self::Ongoing | Self::PrepareCommit | Self::PrepareAbort
        )
    }

    fn is_preparing(self) -> bool {
        matches!(self, Self::PrepareCommit | Self::PrepareAbort)
    }

    /// Whether an id in this state may expire (`transactional.id.expiration.ms`):
    /// no transaction open or completing.
    fn expiration_allowed(self) -> bool {
        matches!(
            self,
            Self::Empty | Self::CompleteCommit | Self::CompleteAbort
        )
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
    /// When the transaction started (first partition added), ms; kept once
    /// it completes, -1 after InitProducerId.
    pub txn_start_ms: i64,
    /// When the metadata last changed, ms.
    pub last_update_ms: i64,
    /// A [`Completion`] is out with a marker writer (not persisted).
    markers_in_flight: bool,
    /// The (producer id, epoch) a KIP-360 client held when it last bumped
    /// its own epoch (Kafka's `lastProducerId`/`lastProducerEpoch`), so that
    /// the same request retried after a lost answer is recognised; `None`
    /// once anyone else took the id over. In memory only, as on Kafka
    /// before KIP-890: after a restart such a retry is fenced.
    bumped_from: Option<(ProducerId, ProducerEpoch)>,
    /// The transaction version of the last EndTxn (KIP-890).
    pub client_version: TransactionVersion,
    /// The producer id held before the last one (transactions v2 move to a
    /// fresh id when the epoch is exhausted), so a retried EndTxn of the
    /// old id is recognised.
    pub previous_producer_id: Option<ProducerId>,
    /// The producer id to move to once the completing transaction's
    /// markers are out (transactions v2, epoch exhausted).
    pub next_producer_id: Option<ProducerId>,
}

impl TxnMetadata {
    /// The `__transaction_state` value for this metadata.
    #[must_use]
    pub fn to_value(&self) -> TransactionLogValue {
        TransactionLogValue {
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            timeout_ms: self.timeout_ms,
            state: self.state,
            partitions: if self.state == TxnState::Empty {
                BTreeSet::new()
            } else {
                self.partitions.clone()
            },
            last_update_ms: self.last_update_ms,
            start_ms: self.txn_start_ms,
            previous_producer_id: self.previous_producer_id.map_or(-1, |id| id.0),
            next_producer_id: self.next_producer_id.map_or(-1, |id| id.0),
            client_transaction_version: self.client_version.0,
        }
    }

    /// The metadata a `__transaction_state` value describes (as loaded: no
    /// markers in flight).
    #[must_use]
    pub fn from_value(value: TransactionLogValue) -> Self {
        Self {
            producer_id: value.producer_id,
            producer_epoch: value.producer_epoch,
            timeout_ms: value.timeout_ms,
            state: value.state,
            partitions: value.partitions,
            txn_start_ms: value.start_ms,
            last_update_ms: value.last_update_ms,
            markers_in_flight: false,
            bumped_from: None,
            client_version: TransactionVersion(value.client_transaction_version),
            previous_producer_id: (value.previous_producer_id >= 0)
                .then_some(ProducerId(value.previous_producer_id)),
            next_producer_id: (value.next_producer_id >= 0)
                .then_some(ProducerId(value.next_producer_id)),
        }
    }

    /// The producer id and epoch the client holds once this metadata is
    /// durable: a transactions v2 completion that moves to a fresh producer
    /// id answers with that id at epoch 0.
    #[must_use]
    pub fn client_view(&self) -> (ProducerId, ProducerEpoch) {
        match self.next_producer_id {
            Some(next) => (next, ProducerEpoch(0)),
            None => (self.producer_id, self.producer_epoch),
        }
    }

    fn completion(&self, transactional_id: &str) -> Completion {
        Completion {
            transactional_id: transactional_id.to_owned(),
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            commit: self.state == TxnState::PrepareCommit,
            partitions: self.partitions.iter().cloned().collect(),
            transaction_version: self.client_version,
        }
    }
}

/// A transactional id's next metadata: persist it, then
/// [`TxnManager::apply`] it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// The transactional id.
    pub transactional_id: String,
    /// Its metadata once the transition is durable.
    pub next: TxnMetadata,
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
    /// The transaction version the markers are written under.
    pub transaction_version: TransactionVersion,
}

/// What an InitProducerId call needs next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitStep {
    /// Persist and apply this transition (state `Empty` under the new
    /// producer id and epoch), then answer with its id and epoch.
    Ready(Transition),
    /// An open transaction is fenced: persist and apply this transition to
    /// `PrepareAbort` (under a bumped epoch), write the abort markers,
    /// complete, then call InitProducerId again.
    AbortFirst(Transition, Completion),
}

/// What an EndTxn call needs next.
#[derive(Debug, Clone, PartialEq, Eq)]
// Built and matched at once, never stored: boxing would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum EndStep {
    /// Nothing to do: the same EndTxn already completed (a retry).
    AlreadyDone,
    /// Persist and apply this transition to `PrepareCommit`/`PrepareAbort`,
    /// write the markers, then complete.
    Prepare(Transition, Completion),
}

/// EndTxn's refusal of a transaction in `state`.
fn cannot_end(commit: bool, state: TxnState) -> TxnError {
    TxnError::InvalidTxnState(format!(
        "cannot {} a transaction in state {}",
        if commit { "commit" } else { "abort" },
        state.name()
    ))
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

/// The epoch that fences an open transaction's producer (Kafka's
/// `prepareFenceProducerEpoch`): one more, which may be `i16::MAX` itself —
/// the markers must carry an epoch above the producer's even when its epoch
/// is the last one a client may hold; the next InitProducerId then finds
/// the epoch exhausted and moves to a fresh producer id.
fn fencing_epoch(epoch: ProducerEpoch) -> ProducerEpoch {
    ProducerEpoch(epoch.0.saturating_add(1))
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

    /// Makes a persisted transition take effect.
    pub fn apply(&mut self, transition: Transition) {
        self.txns
            .insert(transition.transactional_id, transition.next);
    }

    /// Replays one `__transaction_state` record: `Some` metadata replaces
    /// the id's, a tombstone (`None`) removes it.
    pub fn load(&mut self, transactional_id: String, value: Option<TxnMetadata>) {
        match value {
            Some(meta) => {
                self.txns.insert(transactional_id, meta);
            }
            None => {
                self.txns.remove(&transactional_id);
            }
        }
    }

    /// Forgets every id for which `leaving` is true (their partition moved
    /// to another coordinator).
    pub fn forget(&mut self, mut leaving: impl FnMut(&str) -> bool) {
        self.txns.retain(|id, _| !leaving(id));
    }

    /// Forgets an expired transactional id (its tombstone is durable).
    pub fn remove(&mut self, transactional_id: &str) {
        self.txns.remove(transactional_id);
    }

    /// InitProducerId for `transactional_id`.
    ///
    /// `expected` is the (producer id, epoch) a KIP-360 client sends to bump
    /// its own epoch; `allocate` mints a fresh producer id. The same
    /// request retried after a successful bump (its answer lost) gets the
    /// current id and epoch again without another bump, as on Kafka.
    ///
    /// # Errors
    ///
    /// [`TxnError::InvalidTransactionTimeout`], [`TxnError::ConcurrentTransactions`]
    /// while markers are being written, [`TxnError::ProducerFenced`] when
    /// `expected` is neither the current holder nor the retry of the last
    /// bump (a retry is fenced while a transaction is open, and after a
    /// restart), [`TxnError::Storage`] when no id can be allocated.
    pub fn init_producer_id(
        &self,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(ProducerId, ProducerEpoch)>,
        now_ms: i64,
        allocate: &mut dyn FnMut() -> Result<ProducerId, TxnError>,
    ) -> Result<InitStep, TxnError> {
        if timeout_ms <= 0 || timeout_ms > self.max_timeout_ms {
            return Err(TxnError::InvalidTransactionTimeout);
        }
        let transition = |next: TxnMetadata| Transition {
            transactional_id: transactional_id.to_owned(),
            next,
        };
        let Some(current) = self.txns.get(transactional_id) else {
            let producer_id = allocate()?;
            return Ok(InitStep::Ready(transition(TxnMetadata {
                producer_id,
                producer_epoch: ProducerEpoch(0),
                timeout_ms,
                state: TxnState::Empty,
                partitions: BTreeSet::new(),
                txn_start_ms: -1,
                last_update_ms: now_ms,
                markers_in_flight: false,
                bumped_from: None,
                client_version: TransactionVersion::V0,
                previous_producer_id: None,
                next_producer_id: None,
            })));
        };
        let holder = (current.producer_id, current.producer_epoch);
        // KIP-360: the same bump retried after its answer was lost (Kafka's
        // `isValidProducerId` and `prepareIncrementProducerEpoch`; after an
        // exhausted epoch the retry names the previous producer id).
        let retry = expected.is_some() && expected == current.bumped_from;
        if let Some(expected) = expected
            && expected != holder
            && !retry
        {
            return Err(TxnError::ProducerFenced);
        }
        if current.state.is_preparing() {
            return Err(TxnError::ConcurrentTransactions);
        }
        let mut next = current.clone();
        next.last_update_ms = now_ms;
        if current.state == TxnState::Ongoing {
            // Only the current holder (or a new producer) may abort the
            // open transaction: the answer to a retried bump was never
            // used to open one, so such a request is stale.
            if retry {
                return Err(TxnError::ProducerFenced);
            }
            // Fence the old producer: its epoch is bumped and the open
            // transaction is aborted under the new epoch.
            next.producer_epoch = fencing_epoch(next.producer_epoch);
            next.state = TxnState::PrepareAbort;
            next.markers_in_flight = true;
            next.bumped_from = None;
            let completion = next.completion(transactional_id);
            return Ok(InitStep::AbortFirst(transition(next), completion));
        }
        // A retry is answered with the current id and epoch again, without
        // bumping (Kafka still writes the Empty state, with the new timeout).
        if !retry {
            match next_epoch(next.producer_epoch) {
                Some(epoch) => next.producer_epoch = epoch,
                None => {
                    next.producer_id = allocate()?;
                    next.producer_epoch = ProducerEpoch(0);
                }
            }
            // A bump by the holder itself can be retried; a new producer
            // (no expected id) makes every earlier holder's retry stale.
            next.bumped_from = expected;
        }
        next.timeout_ms = timeout_ms;
        next.state = TxnState::Empty;
        next.partitions.clear();
        next.txn_start_ms = -1;
        Ok(InitStep::Ready(transition(next)))
    }

    fn holder(
        &self,
        transactional_id: &str,
        producer_id: ProducerId,
        producer_epoch: ProducerEpoch,
    ) -> Result<&TxnMetadata, TxnError> {
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
        Ok(meta)
    }

    /// AddPartitionsToTxn (and AddOffsetsToTxn, with the group's
    /// `__consumer_offsets` partition): opens the transaction if needed.
    /// `None` when every partition is already in the open transaction
    /// (nothing to persist, as on Kafka).
    ///
    /// # Errors
    ///
    /// [`TxnError::InvalidProducerIdMapping`] for an unknown id or producer,
    /// [`TxnError::ProducerFenced`] for another epoch,
    /// [`TxnError::ConcurrentTransactions`] while the previous transaction
    /// is completing.
    pub fn add_partitions(
        &self,
        transactional_id: &str,
        producer_id: ProducerId,
        producer_epoch: ProducerEpoch,
        partitions: impl IntoIterator<Item = TopicPartition>,
        now_ms: i64,
    ) -> Result<Option<Transition>, TxnError> {
        let current = self.holder(transactional_id, producer_id, producer_epoch)?;
        if current.state.is_preparing() {
            return Err(TxnError::ConcurrentTransactions);
        }
        let mut next = current.clone();
        if next.state != TxnState::Ongoing {
            next.state = TxnState::Ongoing;
            next.txn_start_ms = now_ms;
            next.partitions.clear();
        }
        let before = next.partitions.len();
        next.partitions.extend(partitions);
        if current.state == TxnState::Ongoing && next.partitions.len() == before {
            return Ok(None);
        }
        next.last_update_ms = now_ms;
        Ok(Some(Transition {
            transactional_id: transactional_id.to_owned(),
            next,
        }))
    }

    /// Whether a transactional write by (`producer_id`, `producer_epoch`)
    /// to `partition` belongs to the open transaction (the produce path's
    /// check, and AddPartitionsToTxn's verify-only form).
    ///
    /// # Errors
    ///
    /// [`TxnError::InvalidProducerIdMapping`] for an unknown id or producer,
    /// [`TxnError::ProducerFenced`] for another epoch,
    /// [`TxnError::ConcurrentTransactions`] while the transaction completes,
    /// [`TxnError::InvalidTxnState`] when the partition was not added.
    pub fn verify(
        &self,
        transactional_id: &str,
        producer_id: ProducerId,
        producer_epoch: ProducerEpoch,
        partition: &TopicPartition,
    ) -> Result<(), TxnError> {
        let meta = self.holder(transactional_id, producer_id, producer_epoch)?;
        if meta.state.is_preparing() {
            return Err(TxnError::ConcurrentTransactions);
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
        &self,
        transactional_id: &str,
        producer_id: ProducerId,
        producer_epoch: ProducerEpoch,
        commit: bool,
        now_ms: i64,
    ) -> Result<EndStep, TxnError> {
        let current = self.holder(transactional_id, producer_id, producer_epoch)?;
        let wrong = |state: TxnState| cannot_end(commit, state);
        match (current.state, commit) {
            (TxnState::Ongoing, _) => {
                let mut next = current.clone();
                next.state = if commit {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                };
                next.last_update_ms = now_ms;
                next.markers_in_flight = true;
                let completion = next.completion(transactional_id);
                Ok(EndStep::Prepare(
                    Transition {
                        transactional_id: transactional_id.to_owned(),
                        next,
                    },
                    completion,
                ))
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

    /// The transition that records every marker of `done` as written: the
    /// transaction is complete. `None` when `done` no longer matches the
    /// id's metadata (superseded).
    #[must_use]
    pub fn complete(&self, done: &Completion, now_ms: i64) -> Option<Transition> {
        let current = self.txns.get(&done.transactional_id)?;
        let preparing = if done.commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        if current.state != preparing || current.producer_id != done.producer_id {
            return None;
        }
        let mut next = current.clone();
        next.state = if done.commit {
            TxnState::CompleteCommit
        } else {
            TxnState::CompleteAbort
        };
        // Kafka keeps the start time of the completed transaction.
        next.partitions.clear();
        // Transactions v2 with the epoch exhausted: the producer moves on.
        if let Some(fresh) = next.next_producer_id.take() {
            next.previous_producer_id = Some(next.producer_id);
            next.producer_id = fresh;
            next.producer_epoch = ProducerEpoch(0);
        }
        next.last_update_ms = now_ms;
        next.markers_in_flight = false;
        Some(Transition {
            transactional_id: done.transactional_id.clone(),
            next,
        })
    }

    /// Records that the markers for `failed` (or, after a failed write of
    /// the completion, all of them) could not be written yet: the
    /// transaction stays preparing with just those partitions, for
    /// [`TxnManager::due`] to hand out again. In memory only: a restart
    /// rewrites every marker of the persisted prepare, which is harmless.
    pub fn retry_later(&mut self, done: &Completion, failed: Vec<TopicPartition>, now_ms: i64) {
        if let Some(meta) = self.txns.get_mut(&done.transactional_id)
            && meta.producer_id == done.producer_id
            && meta.state.is_preparing()
        {
            if !failed.is_empty() {
                meta.partitions = failed.into_iter().collect();
            }
            meta.markers_in_flight = false;
            meta.last_update_ms = now_ms;
        }
    }

    /// Transactional ids with periodic work due at `now_ms`: an open
    /// transaction past its timeout, or a completion whose markers are not
    /// out (failed, or found preparing after a restart).
    #[must_use]
    pub fn due_ids(&self, now_ms: i64) -> Vec<String> {
        self.txns
            .iter()
            .filter(|(_, meta)| !meta.markers_in_flight)
            .filter(|(_, meta)| match meta.state {
                TxnState::Ongoing => {
                    meta.txn_start_ms.saturating_add(i64::from(meta.timeout_ms)) <= now_ms
                }
                TxnState::PrepareCommit | TxnState::PrepareAbort => true,
                _ => false,
            })
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// The periodic work for one id (see [`TxnManager::due_ids`]): a
    /// transaction open past its timeout is aborted under a bumped epoch,
    /// which fences its producer as Kafka does (a transition to persist
    /// first); a completing one is handed out again. The completion is
    /// marked in flight either way.
    pub fn due(
        &mut self,
        transactional_id: &str,
        now_ms: i64,
    ) -> Option<(Option<Transition>, Completion)> {
        let meta = self.txns.get_mut(transactional_id)?;
        if meta.markers_in_flight {
            return None;
        }
        match meta.state {
            TxnState::Ongoing
                if meta.txn_start_ms.saturating_add(i64::from(meta.timeout_ms)) <= now_ms =>
            {
                let mut next = meta.clone();
                next.producer_epoch = fencing_epoch(next.producer_epoch);
                next.state = TxnState::PrepareAbort;
                next.last_update_ms = now_ms;
                next.markers_in_flight = true;
                next.bumped_from = None;
                let completion = next.completion(transactional_id);
                Some((
                    Some(Transition {
                        transactional_id: transactional_id.to_owned(),
                        next,
                    }),
                    completion,
                ))
            }
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                meta.markers_in_flight = true;
                Some((None, meta.completion(transactional_id)))
            }
            _ => None,
        }
    }

    /// Transactional ids idle for `expiration_ms` with no transaction open
    /// or completing (Kafka's `transactional.id.expiration.ms`), to
    /// tombstone and then [`TxnManager::remove`].
    #[must_use]
    pub fn expired(&self, now_ms: i64, expiration_ms: i64) -> Vec<String> {
        self.txns
            .keys()
            .filter(|id| self.is_expired(id, now_ms, expiration_ms))
            .cloned()
            .collect()
    }

    /// Whether `transactional_id` is expired (see [`TxnManager::expired`]).
    #[must_use]
    pub fn is_expired(&self, transactional_id: &str, now_ms: i64, expiration_ms: i64) -> bool {
        self.txns.get(transactional_id).is_some_and(|meta| {
            meta.state.expiration_allowed()
                && !meta.markers_in_flight
                && meta.last_update_ms <= now_ms.saturating_sub(expiration_ms)
        })
    }
}
