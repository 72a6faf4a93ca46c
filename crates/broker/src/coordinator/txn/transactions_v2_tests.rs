//! Transactions version 2 (KIP-890 part 2): the epoch bump of every EndTxn
//! v5, its retries, the move to a fresh producer id, and what is persisted.

use {
    super::{
        error::TxnError,
        records::TransactionLogValue,
        state::{EndStep, TxnManager, TxnMetadata, TxnState},
        tests::{Fixture, add, at_last_epoch, complete, counter, init, tp},
        version::TransactionVersion,
    },
    assert2::check,
    krabka_ids::{ProducerEpoch, ProducerId},
};

/// EndTxn v5 on the state machine.
fn end(
    m: &TxnManager,
    producer: (ProducerId, ProducerEpoch),
    commit: bool,
    now: i64,
) -> Result<EndStep, TxnError> {
    m.end_txn_bumping("t", producer.0, producer.1, commit, now, &mut counter())
}

#[test]
fn every_end_bumps_the_epoch_and_a_retry_gets_the_same_answer() {
    let mut m = TxnManager::default();
    let mut ids = counter();
    let (pid, e0) = init(&mut m, "t", None, 0, &mut ids);
    let e1 = ProducerEpoch(e0.0 + 1);
    add(&mut m, "t", (pid, e0), &[tp("a", 0)], 1);
    assert2::assert!(let Ok(EndStep::Prepare(t, done)) = end(&m, (pid, e0), true, 2));
    // The markers carry the new epoch, and the client is told it.
    check!(done.producer_epoch == e1);
    check!(done.partitions == vec![tp("a", 0)]);
    check!(t.next.client_view() == (pid, e1));
    check!(t.next.client_version == TransactionVersion::V2);
    m.apply(t);
    // A retry while the markers go out is concurrent; the old epoch is
    // not the holder any more.
    check!(end(&m, (pid, e0), true, 3) == Err(TxnError::ConcurrentTransactions));
    check!(end(&m, (pid, e1), true, 3) == Err(TxnError::ProducerFenced));
    complete(&mut m, &done, 4);
    check!(m.get("t").unwrap().state == TxnState::CompleteCommit);
    // A retry after completion is answered again, without a second bump.
    check!(end(&m, (pid, e0), true, 5) == Ok(EndStep::AlreadyDone));
    check!(m.get("t").unwrap().client_view() == (pid, e1));
    assert2::assert!(let Err(TxnError::InvalidTxnState(_)) = end(&m, (pid, e0), false, 5));
    // Nothing open under the new epoch: a commit is invalid, an epoch
    // beyond it fenced.
    assert2::assert!(let Err(TxnError::InvalidTxnState(_)) = end(&m, (pid, e1), true, 5));
    check!(end(&m, (pid, ProducerEpoch(e1.0 + 1)), true, 5) == Err(TxnError::ProducerFenced));
    // A late write of the finished transaction is fenced; the next one
    // opens under the new epoch.
    check!(m.add_partitions("t", pid, e0, [tp("a", 0)], 6) == Err(TxnError::ProducerFenced));
    add(&mut m, "t", (pid, e1), &[tp("b", 0)], 6);
    check!(m.get("t").unwrap().state == TxnState::Ongoing);
}

#[test]
fn an_abort_with_nothing_open_still_ends_a_transaction_and_bumps() {
    let mut m = TxnManager::default();
    let mut ids = counter();
    let (pid, e0) = init(&mut m, "t", None, 0, &mut ids);
    assert2::assert!(let Err(TxnError::InvalidTxnState(_)) = end(&m, (pid, e0), true, 1));
    assert2::assert!(let Ok(EndStep::Prepare(t, done)) = end(&m, (pid, e0), false, 2));
    check!(done.partitions.is_empty());
    check!(!done.commit);
    check!(t.next.txn_start_ms == 2);
    m.apply(t);
    complete(&mut m, &done, 3);
    let meta = m.get("t").unwrap();
    check!(meta.state == TxnState::CompleteAbort);
    check!(meta.producer_epoch == ProducerEpoch(e0.0 + 1));
    // Another abort under the new epoch is a new (empty) transaction.
    assert2::assert!(let Ok(EndStep::Prepare(t, _)) = end(&m, (pid, ProducerEpoch(e0.0 + 1)), false, 4));
    check!(t.next.producer_epoch == ProducerEpoch(e0.0 + 2));
}

#[test]
fn an_exhausted_epoch_moves_to_a_fresh_producer_id_once_the_markers_are_out() {
    let mut m = TxnManager::default();
    let last = ProducerEpoch(i16::MAX - 1);
    m.load(
        "t".into(),
        Some(TxnMetadata::from_value(TransactionLogValue {
            client_transaction_version: 2,
            ..at_last_epoch()
        })),
    );
    add(&mut m, "t", (ProducerId(77), last), &[tp("a", 0)], 1);
    assert2::assert!(let Ok(EndStep::Prepare(t, done)) = end(&m, (ProducerId(77), last), true, 2));
    // The markers go out under the old id at the very last epoch; the
    // client is answered with the fresh id.
    check!(done.producer_id == ProducerId(77));
    check!(done.producer_epoch == ProducerEpoch(i16::MAX));
    let fresh = t.next.next_producer_id.unwrap();
    check!(t.next.client_view() == (fresh, ProducerEpoch(0)));
    // What is persisted carries the next id (so a restart completes the
    // move) in Kafka's flexible value version.
    let value = t.next.to_value().encode();
    check!(i16::from_be_bytes([value[0], value[1]]) == 1);
    let decoded = TransactionLogValue::decode(&value).unwrap();
    check!(decoded.next_producer_id == fresh.0);
    check!(decoded.client_transaction_version == 2);
    check!(TxnMetadata::from_value(decoded).next_producer_id == Some(fresh));
    m.apply(t);
    complete(&mut m, &done, 3);
    let meta = m.get("t").unwrap();
    check!((meta.producer_id, meta.producer_epoch) == (fresh, ProducerEpoch(0)));
    check!(meta.previous_producer_id == Some(ProducerId(77)));
    check!(meta.next_producer_id.is_none());
    // The EndTxn retried under the old id is recognised.
    check!(end(&m, (ProducerId(77), last), true, 4) == Ok(EndStep::AlreadyDone));
    check!(m.get("t").unwrap().client_view() == (fresh, ProducerEpoch(0)));
    check!(end(&m, (ProducerId(78), last), true, 4) == Err(TxnError::InvalidProducerIdMapping));
}

#[test]
fn the_coordinator_answers_the_bumped_epoch_and_writes_markers_with_it() {
    let f = Fixture::new();
    let (pid, e0) = f.c.init_producer_id("t", 60_000, None).unwrap();
    f.c.add_partitions("t", pid, e0, vec![tp("a", 0)]).unwrap();
    let answer =
        f.c.end_transaction("t", pid, e0, true, TransactionVersion::V2)
            .unwrap();
    let e1 = ProducerEpoch(e0.0 + 1);
    check!(answer == (pid, e1));
    let written = f.markers.written.lock().unwrap().clone();
    check!(written.len() == 1);
    check!(written[0].1.producer_epoch == e1);
    check!(f.state("t") == Some(TxnState::CompleteCommit));
    // The same EndTxn retried: the same answer.
    check!(f.c.end_transaction("t", pid, e0, true, TransactionVersion::V2) == Ok((pid, e1)));
    // A v1 EndTxn of the same client keeps the epoch.
    f.c.add_partitions("t", pid, e1, vec![tp("a", 0)]).unwrap();
    check!(f.c.end_transaction("t", pid, e1, true, TransactionVersion::V0) == Ok((pid, e1)));
    check!(
        f.persisted("t")
            == vec![
                Some(TxnState::Empty),
                Some(TxnState::Ongoing),
                Some(TxnState::PrepareCommit),
                Some(TxnState::CompleteCommit),
                Some(TxnState::Ongoing),
                Some(TxnState::PrepareCommit),
                Some(TxnState::CompleteCommit),
            ]
    );
    // A restart replays the bumped epoch and the client's version.
    let again = f.restart();
    let meta = again.c.with_state(|s| s.get("t").cloned()).unwrap();
    check!(meta.producer_epoch == e1);
    check!(meta.client_version == TransactionVersion::V2);
}
