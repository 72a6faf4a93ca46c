//! EndTxn under transactions version 2 (KIP-890 part 2): every end of a
//! transaction bumps the producer epoch.
//!
//! The markers carry the bumped epoch, so a write the producer sent for
//! the finished transaction and that arrives late is fenced by every
//! partition's producer state instead of opening a transaction nobody will
//! end. The client learns the new epoch from the answer; when the epoch is
//! exhausted the answer is a fresh producer id at epoch 0, which the
//! metadata takes once the markers are out ([`TxnManager::complete`]).
//!
//! Because the epoch moves, "same epoch" no longer tells a retry from the
//! next call: a retried EndTxn is one whose epoch is one below the
//! coordinator's (or the last epoch of the previous producer id), as
//! Kafka's `TransactionCoordinator` decides it.

use {
    super::{
        Completion, EndStep, Transition, TxnManager, TxnMetadata, TxnState, cannot_end,
        fencing_epoch, next_epoch,
    },
    crate::coordinator::txn::{error::TxnError, version::TransactionVersion},
    krabka_ids::{ProducerEpoch, ProducerId},
};

impl TxnManager {
    /// EndTxn v5: like [`TxnManager::end_txn`], but the transition to
    /// `PrepareCommit`/`PrepareAbort` bumps the epoch (`allocate` mints the
    /// next producer id when the epoch is exhausted), an abort is accepted
    /// with no transaction open (the client cannot know whether its
    /// implicitly added partitions reached the coordinator), and a retry is
    /// recognised by the epoch it carries. The caller answers with
    /// [`TxnMetadata::client_view`] of the transition, or of the current
    /// metadata for [`EndStep::AlreadyDone`].
    ///
    /// # Errors
    ///
    /// [`TxnError::InvalidProducerIdMapping`] for an unknown id or producer,
    /// [`TxnError::ProducerFenced`] for an epoch that is neither current nor
    /// a retry's, [`TxnError::ConcurrentTransactions`] while the same
    /// outcome is being written, [`TxnError::InvalidTxnState`] for a commit
    /// with nothing open or the opposite outcome of a completed one,
    /// [`TxnError::Storage`] when no producer id can be allocated.
    pub fn end_txn_bumping(
        &self,
        transactional_id: &str,
        producer_id: ProducerId,
        producer_epoch: ProducerEpoch,
        commit: bool,
        now_ms: i64,
        allocate: &mut dyn FnMut() -> Result<ProducerId, TxnError>,
    ) -> Result<EndStep, TxnError> {
        let current = self
            .txns
            .get(transactional_id)
            .ok_or(TxnError::InvalidProducerIdMapping)?;
        let retry_on_bump = i32::from(current.producer_epoch.0) == i32::from(producer_epoch.0) + 1;
        let retry_on_overflow = current.previous_producer_id == Some(producer_id)
            && producer_epoch.0 == i16::MAX - 1
            && current.producer_epoch.0 == 0;
        if current.producer_id != producer_id && !retry_on_overflow {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        let same = current.producer_id == producer_id && current.producer_epoch == producer_epoch;
        let valid = match current.state {
            TxnState::Ongoing | TxnState::Empty => same,
            TxnState::PrepareCommit | TxnState::PrepareAbort => retry_on_bump,
            TxnState::CompleteCommit | TxnState::CompleteAbort => {
                retry_on_bump || retry_on_overflow || same
            }
        };
        if !valid {
            return Err(TxnError::ProducerFenced);
        }
        let retry = retry_on_bump || retry_on_overflow;
        match (current.state, commit) {
            (TxnState::Ongoing, _) => {
                prepare(transactional_id, current, commit, false, now_ms, allocate)
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) if retry => {
                Ok(EndStep::AlreadyDone)
            }
            // An abort with nothing open still ends a (possibly
            // half-started) transaction and fences its writes.
            (TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort, false)
                if !retry =>
            {
                prepare(transactional_id, current, false, true, now_ms, allocate)
            }
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(TxnError::ConcurrentTransactions)
            }
            (state, _) => Err(cannot_end(commit, state)),
        }
    }
}

/// The transition to `PrepareCommit`/`PrepareAbort` under the bumped epoch
/// (or, exhausted, the last epoch plus a fresh id to move to), with its
/// markers.
fn prepare(
    transactional_id: &str,
    current: &TxnMetadata,
    commit: bool,
    nothing_open: bool,
    now_ms: i64,
    allocate: &mut dyn FnMut() -> Result<ProducerId, TxnError>,
) -> Result<EndStep, TxnError> {
    let mut next = current.clone();
    next.state = if commit {
        TxnState::PrepareCommit
    } else {
        TxnState::PrepareAbort
    };
    if nothing_open {
        // Kafka takes the update time as the start of such a transaction.
        next.partitions.clear();
        next.txn_start_ms = now_ms;
    }
    match next_epoch(current.producer_epoch) {
        Some(epoch) => next.producer_epoch = epoch,
        None => {
            next.next_producer_id = Some(allocate()?);
            next.producer_epoch = fencing_epoch(current.producer_epoch);
        }
    }
    next.client_version = TransactionVersion::V2;
    next.last_update_ms = now_ms;
    next.markers_in_flight = true;
    next.bumped_from = None;
    let completion: Completion = next.completion(transactional_id);
    Ok(EndStep::Prepare(
        Transition {
            transactional_id: transactional_id.to_owned(),
            next,
        },
        completion,
    ))
}
