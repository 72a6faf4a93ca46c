//! State machine and coordinator tests, over an in-memory
//! `__transaction_state` and an in-memory marker writer.

use {
    super::{
        config::TxnConfig,
        coordinator::{MarkerError, MarkerWriter, ProducerIdSource, TransactionCoordinator},
        error::TxnError,
        log::{InMemoryTxnStateLog, TxnStateLog},
        records::{TransactionLogValue, decode_key},
        state::{EndStep, InitStep, TopicPartition, Transition, TxnManager, TxnMetadata, TxnState},
    },
    assert2::check,
    krabka_ids::{ProducerEpoch, ProducerId},
    krabka_log::{ControlMarker, ManualClock},
    std::sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicI64, Ordering},
    },
};

pub(super) fn tp(topic: &str, p: i32) -> TopicPartition {
    TopicPartition::new(topic, p)
}

pub(super) fn counter() -> impl FnMut() -> Result<ProducerId, TxnError> {
    let mut next = 1000;
    move || {
        next += 1;
        Ok(ProducerId(next))
    }
}

/// InitProducerId that must be ready at once; applied.
pub(super) fn init(
    m: &mut TxnManager,
    id: &str,
    expected: Option<(ProducerId, ProducerEpoch)>,
    now: i64,
    ids: &mut dyn FnMut() -> Result<ProducerId, TxnError>,
) -> (ProducerId, ProducerEpoch) {
    let step = m.init_producer_id(id, 60_000, expected, now, ids).unwrap();
    assert2::assert!(let InitStep::Ready(t) = step);
    let answer = (t.next.producer_id, t.next.producer_epoch);
    m.apply(t);
    answer
}

pub(super) fn add(
    m: &mut TxnManager,
    id: &str,
    producer: (ProducerId, ProducerEpoch),
    parts: &[TopicPartition],
    now: i64,
) {
    if let Some(t) = m
        .add_partitions(id, producer.0, producer.1, parts.iter().cloned(), now)
        .unwrap()
    {
        m.apply(t);
    }
}

/// Producer 77 at the last epoch a client may hold (32766), its last
/// transaction committed, as `__transaction_state` holds it.
pub(super) fn at_last_epoch() -> TransactionLogValue {
    TransactionLogValue {
        producer_id: ProducerId(77),
        producer_epoch: ProducerEpoch(i16::MAX - 1),
        timeout_ms: 60_000,
        state: TxnState::CompleteCommit,
        partitions: Default::default(),
        last_update_ms: 0,
        start_ms: 0,
        previous_producer_id: -1,
        next_producer_id: -1,
        client_transaction_version: 0,
    }
}

pub(super) fn complete(m: &mut TxnManager, done: &super::Completion, now: i64) {
    let t = m.complete(done, now).expect("completes");
    m.apply(t);
}

#[test]
fn first_init_allocates_and_every_init_bumps_the_epoch() {
    let mut m = TxnManager::default();
    let mut ids = counter();
    let (pid, e0) = init(&mut m, "t", None, 0, &mut ids);
    check!(pid == ProducerId(1001));
    check!(e0 == ProducerEpoch(0));
    let (pid2, e1) = init(&mut m, "t", None, 1, &mut ids);
    check!(pid2 == pid);
    check!(e1 == ProducerEpoch(1));
    let (other, _) = init(&mut m, "u", None, 1, &mut ids);
    check!(other != pid);
}

#[test]
fn nothing_changes_until_a_transition_is_applied() {
    let mut m = TxnManager::default();
    let mut ids = counter();
    let step = m.init_producer_id("t", 60_000, None, 0, &mut ids).unwrap();
    check!(m.get("t").is_none());
    assert2::assert!(let InitStep::Ready(t) = step);
    m.apply(t);
    let producer = (
        m.get("t").unwrap().producer_id,
        m.get("t").unwrap().producer_epoch,
    );
    let t = m
        .add_partitions("t", producer.0, producer.1, [tp("a", 0)], 5)
        .unwrap()
        .unwrap();
    check!(m.get("t").unwrap().state == TxnState::Empty);
    check!(t.next.state == TxnState::Ongoing);
    m.apply(t);
    // Adding a partition already in the transaction persists nothing.
    check!(
        m.add_partitions("t", producer.0, producer.1, [tp("a", 0)], 6)
            .unwrap()
            .is_none()
    );
}

#[test]
fn timeout_above_the_maximum_is_refused() {
    let m = TxnManager::new(900_000);
    let mut ids = counter();
    check!(
        m.init_producer_id("t", 900_001, None, 0, &mut ids)
            == Err(TxnError::InvalidTransactionTimeout)
    );
    check!(
        m.init_producer_id("t", 0, None, 0, &mut ids) == Err(TxnError::InvalidTransactionTimeout)
    );
    check!(m.init_producer_id("t", 900_000, None, 0, &mut ids).is_ok());
}

#[test]
fn exhausted_epoch_gets_a_fresh_producer_id() {
    let mut m = TxnManager::default();
    let mut ids = counter();
    let (pid, _) = init(&mut m, "t", None, 0, &mut ids);
    let mut last = (pid, ProducerEpoch(0));
    for _ in 0..(i16::MAX as usize) {
        last = init(&mut m, "t", None, 0, &mut ids);
        if last.0 != pid {
            break;
        }
    }
    check!(last.0 != pid);
    check!(last.1 == ProducerEpoch(0));
}

/// A producer holding the last epoch a client may hold (32766) with an open
/// transaction is still fenced: the abort markers carry 32767, and the next
/// InitProducerId moves to a fresh producer id (Kafka's
/// `prepareFenceProducerEpoch`).
#[test]
fn fencing_at_the_last_epoch_marks_the_abort_with_the_maximum_epoch() {
    let mut m = TxnManager::default();
    let mut ids = counter();
    let last = ProducerEpoch(i16::MAX - 1);
    m.load(
        "t".into(),
        Some(TxnMetadata::from_value(TransactionLogValue {
            state: TxnState::Empty,
            start_ms: -1,
            ..at_last_epoch()
        })),
    );
    add(&mut m, "t", (ProducerId(77), last), &[tp("a", 0)], 1);
    assert2::assert!(let Ok(InitStep::AbortFirst(t, abort)) = m.init_producer_id("t", 60_000, None, 2, &mut ids));
    check!(t.next.producer_epoch == ProducerEpoch(i16::MAX));
    m.apply(t);
    check!(abort.producer_epoch == ProducerEpoch(i16::MAX));
    check!(m.end_txn("t", ProducerId(77), last, false, 3) == Err(TxnError::ProducerFenced));
    complete(&mut m, &abort, 3);
    let (pid, epoch) = init(&mut m, "t", None, 4, &mut ids);
    check!(pid != ProducerId(77));
    check!(epoch == ProducerEpoch(0));

    // The same holds when the transaction times out.
    add(&mut m, "t", (pid, epoch), &[tp("a", 0)], 5);
    let mut meta = m.get("t").unwrap().clone();
    meta.producer_epoch = last;
    m.load("t".into(), Some(meta));
    let (t, abort) = m.due("t", 1_000_000).unwrap();
    check!(abort.producer_epoch == ProducerEpoch(i16::MAX));
    m.apply(t.unwrap());
}

#[test]
fn full_commit_cycle_and_retry_of_end_txn() {
    let mut m = TxnManager::default();
    let mut ids = counter();
    let (pid, epoch) = init(&mut m, "t", None, 0, &mut ids);
    check!(m.get("t").unwrap().state == TxnState::Empty);
    add(&mut m, "t", (pid, epoch), &[tp("a", 0), tp("b", 1)], 5);
    check!(m.get("t").unwrap().state == TxnState::Ongoing);
    check!(m.verify("t", pid, epoch, &tp("a", 0)).is_ok());
    assert2::assert!(let Err(TxnError::InvalidTxnState(_)) = m.verify("t", pid, epoch, &tp("a", 1)));
    assert2::assert!(let Ok(EndStep::Prepare(t, done)) = m.end_txn("t", pid, epoch, true, 6));
    check!(done.commit);
    check!(done.partitions == vec![tp("a", 0), tp("b", 1)]);
    check!(t.next.state == TxnState::PrepareCommit);
    m.apply(t);
    // While preparing: same outcome is concurrent, the opposite is invalid,
    // and nothing new can start.
    check!(m.end_txn("t", pid, epoch, true, 7) == Err(TxnError::ConcurrentTransactions));
    assert2::assert!(let Err(TxnError::InvalidTxnState(_)) = m.end_txn("t", pid, epoch, false, 7));
    check!(
        m.add_partitions("t", pid, epoch, [tp("a", 0)], 7) == Err(TxnError::ConcurrentTransactions)
    );
    check!(m.verify("t", pid, epoch, &tp("a", 0)) == Err(TxnError::ConcurrentTransactions));
    check!(
        m.init_producer_id("t", 60_000, None, 7, &mut ids) == Err(TxnError::ConcurrentTransactions)
    );
    complete(&mut m, &done, 8);
    check!(m.get("t").unwrap().state == TxnState::CompleteCommit);
    check!(m.get("t").unwrap().partitions.is_empty());
    check!(m.end_txn("t", pid, epoch, true, 9) == Ok(EndStep::AlreadyDone));
    assert2::assert!(let Err(TxnError::InvalidTxnState(_)) = m.end_txn("t", pid, epoch, false, 9));
    // The next transaction starts from CompleteCommit.
    add(&mut m, "t", (pid, epoch), &[tp("c", 0)], 10);
    check!(m.get("t").unwrap().partitions.len() == 1);
    check!(m.get("t").unwrap().txn_start_ms == 10);
}

#[test]
fn end_txn_without_a_transaction_is_invalid() {
    let mut m = TxnManager::default();
    let mut ids = counter();
    let (pid, epoch) = init(&mut m, "t", None, 0, &mut ids);
    assert2::assert!(let Err(TxnError::InvalidTxnState(_)) = m.end_txn("t", pid, epoch, true, 1));
    assert2::assert!(let Err(TxnError::InvalidTxnState(_)) = m.end_txn("t", pid, epoch, false, 1));
}

#[test]
fn wrong_producer_or_epoch_is_refused() {
    let mut m = TxnManager::default();
    let mut ids = counter();
    let (pid, epoch) = init(&mut m, "t", None, 0, &mut ids);
    check!(
        m.add_partitions("nope", pid, epoch, [tp("a", 0)], 1)
            == Err(TxnError::InvalidProducerIdMapping)
    );
    check!(
        m.add_partitions("t", ProducerId(pid.0 + 7), epoch, [tp("a", 0)], 1)
            == Err(TxnError::InvalidProducerIdMapping)
    );
    check!(
        m.add_partitions("t", pid, ProducerEpoch(epoch.0 + 1), [tp("a", 0)], 1)
            == Err(TxnError::ProducerFenced)
    );
    check!(
        m.end_txn("t", pid, ProducerEpoch(epoch.0 + 1), true, 1) == Err(TxnError::ProducerFenced)
    );
    // KIP-360: bumping one's own epoch needs the current (pid, epoch).
    check!(
        m.init_producer_id("t", 60_000, Some((pid, ProducerEpoch(9))), 1, &mut ids)
            == Err(TxnError::ProducerFenced)
    );
    let (_, bumped) = init(&mut m, "t", Some((pid, epoch)), 1, &mut ids);
    check!(bumped == ProducerEpoch(epoch.0 + 1));
}

/// A whole transaction by `producer`: add, commit, complete.
fn commit_one(m: &mut TxnManager, id: &str, producer: (ProducerId, ProducerEpoch), now: i64) {
    add(m, id, producer, &[tp("a", 0)], now);
    let step = m.end_txn(id, producer.0, producer.1, true, now).unwrap();
    assert2::assert!(let EndStep::Prepare(t, done) = step);
    m.apply(t);
    check!(done.producer_id == producer.0);
    check!(done.producer_epoch == producer.1);
    complete(m, &done, now);
    check!(m.get(id).unwrap().state == TxnState::CompleteCommit);
}

#[test]
fn kip360_txn_retried_bump_gets_the_same_answer_without_another_bump() {
    let mut m = TxnManager::default();
    let mut ids = counter();
    let (pid, e0) = init(&mut m, "t", None, 0, &mut ids);
    let (_, e1) = init(&mut m, "t", None, 1, &mut ids);
    check!(e1 == ProducerEpoch(e0.0 + 1));
    // The bump: (pid, e1) -> (pid, e1 + 1).
    let bumped = init(&mut m, "t", Some((pid, e1)), 2, &mut ids);
    check!(bumped == (pid, ProducerEpoch(e1.0 + 1)));
    // Its answer was lost: the same request again is answered alike, twice.
    check!(init(&mut m, "t", Some((pid, e1)), 3, &mut ids) == bumped);
    check!(init(&mut m, "t", Some((pid, e1)), 4, &mut ids) == bumped);
    check!(m.get("t").unwrap().producer_epoch == bumped.1);
    check!(m.get("t").unwrap().state == TxnState::Empty);
    // An older epoch is a zombie.
    check!(
        m.init_producer_id("t", 60_000, Some((pid, e0)), 5, &mut ids)
            == Err(TxnError::ProducerFenced)
    );
    // The retried answer is usable: a transaction commits under it.
    commit_one(&mut m, "t", bumped, 6);
    // Once the holder bumps again, the first bump's retry is stale.
    let again = init(&mut m, "t", Some(bumped), 7, &mut ids);
    check!(again == (pid, ProducerEpoch(bumped.1.0 + 1)));
    check!(
        m.init_producer_id("t", 60_000, Some((pid, e1)), 8, &mut ids)
            == Err(TxnError::ProducerFenced)
    );
    check!(init(&mut m, "t", Some(bumped), 9, &mut ids) == again);
}

#[test]
fn kip360_txn_retry_is_stale_once_another_producer_took_over() {
    let mut m = TxnManager::default();
    let mut ids = counter();
    let (pid, e0) = init(&mut m, "t", None, 0, &mut ids);
    let bumped = init(&mut m, "t", Some((pid, e0)), 1, &mut ids);
    // A new producer (no id of its own) takes the transactional id over.
    let (_, e2) = init(&mut m, "t", None, 2, &mut ids);
    check!(e2 == ProducerEpoch(bumped.1.0 + 1));
    for stale in [(pid, e0), bumped] {
        check!(
            m.init_producer_id("t", 60_000, Some(stale), 3, &mut ids)
                == Err(TxnError::ProducerFenced)
        );
    }
    // So does a timed-out transaction aborted under a bumped epoch.
    let mut m = TxnManager::default();
    let (pid, e0) = init(&mut m, "u", None, 0, &mut ids);
    let bumped = init(&mut m, "u", Some((pid, e0)), 1, &mut ids);
    add(&mut m, "u", bumped, &[tp("a", 0)], 10);
    let (fence, abort) = m.due("u", 100_000).unwrap();
    m.apply(fence.unwrap());
    complete(&mut m, &abort, 100_001);
    check!(
        m.init_producer_id("u", 60_000, Some((pid, e0)), 100_002, &mut ids)
            == Err(TxnError::ProducerFenced)
    );
}

#[test]
fn kip360_txn_retry_while_a_transaction_is_open_is_fenced_and_aborts_nothing() {
    let mut m = TxnManager::default();
    let mut ids = counter();
    let (pid, e0) = init(&mut m, "t", None, 0, &mut ids);
    let bumped = init(&mut m, "t", Some((pid, e0)), 1, &mut ids);
    add(&mut m, "t", bumped, &[tp("a", 0)], 2);
    // A late duplicate of the bump cannot be the producer of this
    // transaction (it never saw the answer), so it must not abort it.
    check!(
        m.init_producer_id("t", 60_000, Some((pid, e0)), 3, &mut ids)
            == Err(TxnError::ProducerFenced)
    );
    check!(m.get("t").unwrap().state == TxnState::Ongoing);
    check!(m.get("t").unwrap().producer_epoch == bumped.1);
}

#[test]
fn kip360_txn_retry_after_an_exhausted_epoch_names_the_previous_producer_id() {
    let mut m = TxnManager::default();
    let mut ids = counter();
    let last = ProducerEpoch(i16::MAX - 1);
    let mut value = at_last_epoch();
    m.load("t".into(), Some(TxnMetadata::from_value(value.clone())));
    // The epoch is exhausted: the bump rotates to a fresh producer id.
    let rotated = init(&mut m, "t", Some((ProducerId(77), last)), 1, &mut ids);
    check!(rotated.0 != ProducerId(77));
    check!(rotated.1 == ProducerEpoch(0));
    // The retry still names the old id and epoch; it gets the new id again
    // and no other id is allocated.
    check!(init(&mut m, "t", Some((ProducerId(77), last)), 2, &mut ids) == rotated);
    check!(ids().unwrap() == ProducerId(rotated.0.0 + 1));
    // The old id with any other epoch is fenced.
    check!(
        m.init_producer_id(
            "t",
            60_000,
            Some((ProducerId(77), ProducerEpoch(last.0 - 1))),
            3,
            &mut ids
        ) == Err(TxnError::ProducerFenced)
    );
    commit_one(&mut m, "t", rotated, 4);
    let next = init(&mut m, "t", Some(rotated), 5, &mut ids);
    check!(next == (rotated.0, ProducerEpoch(1)));

    // Loaded from `__transaction_state` (a restart), the last bump is not
    // known, as on Kafka before KIP-890: such a retry is fenced.
    value.producer_id = rotated.0;
    value.producer_epoch = rotated.1;
    let mut m = TxnManager::default();
    m.load("t".into(), Some(TxnMetadata::from_value(value)));
    check!(
        m.init_producer_id("t", 60_000, Some((ProducerId(77), last)), 6, &mut ids)
            == Err(TxnError::ProducerFenced)
    );
}

#[test]
fn init_during_an_open_transaction_fences_and_aborts_it() {
    let mut m = TxnManager::default();
    let mut ids = counter();
    let (pid, old) = init(&mut m, "t", None, 0, &mut ids);
    add(&mut m, "t", (pid, old), &[tp("a", 0)], 1);
    assert2::assert!(let Ok(InitStep::AbortFirst(t, abort)) = m.init_producer_id("t", 60_000, None, 2, &mut ids));
    check!(t.next.state == TxnState::PrepareAbort);
    m.apply(t);
    check!(!abort.commit);
    check!(abort.producer_epoch == ProducerEpoch(old.0 + 1));
    check!(abort.partitions == vec![tp("a", 0)]);
    // The old producer is fenced at once.
    check!(m.end_txn("t", pid, old, true, 3) == Err(TxnError::ProducerFenced));
    complete(&mut m, &abort, 3);
    check!(m.get("t").unwrap().state == TxnState::CompleteAbort);
    let (pid2, e) = init(&mut m, "t", None, 4, &mut ids);
    check!(pid2 == pid);
    check!(e == ProducerEpoch(old.0 + 2));
    check!(m.get("t").unwrap().state == TxnState::Empty);
}

#[test]
fn expired_transactions_are_aborted_under_a_bumped_epoch() {
    let mut m = TxnManager::default();
    let mut ids = counter();
    let step = m.init_producer_id("t", 1_000, None, 0, &mut ids).unwrap();
    assert2::assert!(let InitStep::Ready(t) = step);
    let (pid, epoch) = (t.next.producer_id, t.next.producer_epoch);
    m.apply(t);
    add(&mut m, "t", (pid, epoch), &[tp("a", 0)], 100);
    check!(m.due_ids(1_099).is_empty());
    check!(m.due_ids(1_100) == vec!["t".to_owned()]);
    let (transition, abort) = m.due("t", 1_100).unwrap();
    let transition = transition.expect("the abort is persisted first");
    check!(transition.next.state == TxnState::PrepareAbort);
    m.apply(transition);
    check!(!abort.commit);
    check!(abort.producer_epoch == ProducerEpoch(epoch.0 + 1));
    // Handed out once while in flight.
    check!(m.due_ids(5_000).is_empty());
    check!(m.due("t", 5_000).is_none());
    check!(m.end_txn("t", pid, epoch, true, 1_200) == Err(TxnError::ProducerFenced));
    complete(&mut m, &abort, 1_300);
    check!(m.get("t").unwrap().state == TxnState::CompleteAbort);
}

#[test]
fn failed_markers_are_retried_for_the_failed_partitions_only() {
    let mut m = TxnManager::default();
    let mut ids = counter();
    let (pid, epoch) = init(&mut m, "t", None, 0, &mut ids);
    add(&mut m, "t", (pid, epoch), &[tp("a", 0), tp("b", 0)], 1);
    assert2::assert!(let Ok(EndStep::Prepare(t, done)) = m.end_txn("t", pid, epoch, true, 2));
    m.apply(t);
    check!(m.due_ids(3).is_empty());
    m.retry_later(&done, vec![tp("b", 0)], 3);
    check!(m.get("t").unwrap().state == TxnState::PrepareCommit);
    let (transition, again) = m.due("t", 4).unwrap();
    check!(transition.is_none());
    check!(again.commit);
    check!(again.partitions == vec![tp("b", 0)]);
    complete(&mut m, &again, 5);
    check!(m.get("t").unwrap().state == TxnState::CompleteCommit);
}

#[test]
fn idle_ids_expire_but_not_with_a_transaction_open() {
    let mut m = TxnManager::default();
    let mut ids = counter();
    let idle = init(&mut m, "idle", None, 0, &mut ids);
    let busy = init(&mut m, "busy", None, 0, &mut ids);
    add(&mut m, "busy", busy, &[tp("a", 0)], 10);
    check!(m.expired(999, 1_000).is_empty());
    check!(m.expired(1_000, 1_000) == vec!["idle".to_owned()]);
    check!(m.expired(100_000, 1_000) == vec!["idle".to_owned()]);
    let _ = idle;
    m.remove("idle");
    check!(m.get("idle").is_none());
}

/// Records markers; can be told to fail; checks that the prepare is
/// durable when each marker is written.
#[derive(Default)]
pub(super) struct Markers {
    pub(super) written: Mutex<Vec<(TopicPartition, ControlMarker)>>,
    fail: AtomicBool,
    log: Mutex<Option<Arc<InMemoryTxnStateLog>>>,
}

impl MarkerWriter for Markers {
    fn write_marker(&self, p: &TopicPartition, marker: ControlMarker) -> Result<(), MarkerError> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(MarkerError::Failed("switched off".into()));
        }
        if p.topic == "deleted" {
            return Err(MarkerError::Gone);
        }
        if let Some(log) = self.log.lock().unwrap().as_ref() {
            // The producer's latest record (an id's records share a partition).
            let state = log
                .all_records()
                .into_iter()
                .filter_map(|(_, r)| TransactionLogValue::decode(&r.value?).ok())
                .filter(|v| v.producer_id == marker.producer_id)
                .last()
                .unwrap()
                .state;
            let expect = if marker.commit {
                TxnState::PrepareCommit
            } else {
                TxnState::PrepareAbort
            };
            assert_eq!(state, expect, "a marker before its prepare was durable");
        }
        self.written.lock().unwrap().push((p.clone(), marker));
        Ok(())
    }
}

#[derive(Default)]
struct Ids(AtomicI64);

impl ProducerIdSource for Ids {
    fn allocate(&self) -> Result<ProducerId, TxnError> {
        Ok(ProducerId(self.0.fetch_add(1, Ordering::SeqCst)))
    }
}

pub(super) struct Fixture {
    pub(super) c: TransactionCoordinator,
    pub(super) markers: Arc<Markers>,
    clock: Arc<ManualClock>,
    pub(super) log: Arc<InMemoryTxnStateLog>,
    ids: Arc<Ids>,
}

impl Fixture {
    pub(super) fn new() -> Self {
        Self::over(
            Arc::new(InMemoryTxnStateLog::new()),
            Arc::new(ManualClock::new(0)),
            Arc::new(Ids::default()),
        )
    }

    fn over(log: Arc<InMemoryTxnStateLog>, clock: Arc<ManualClock>, ids: Arc<Ids>) -> Self {
        let markers = Arc::new(Markers::default());
        *markers.log.lock().unwrap() = Some(Arc::clone(&log));
        let c = TransactionCoordinator::load(
            TxnConfig {
                id_expiration_ms: 10_000,
                ..TxnConfig::default()
            },
            Arc::clone(&log) as Arc<dyn TxnStateLog>,
            Arc::clone(&markers) as Arc<dyn MarkerWriter>,
            Arc::clone(&ids) as Arc<dyn ProducerIdSource>,
            Arc::clone(&clock) as Arc<dyn krabka_log::Clock>,
        )
        .unwrap();
        Self {
            c,
            markers,
            clock,
            log,
            ids,
        }
    }

    /// A coordinator reloaded from the same log (and the same persisted id
    /// allocator), as after a restart.
    pub(super) fn restart(&self) -> Self {
        Self::over(
            Arc::clone(&self.log),
            Arc::clone(&self.clock),
            Arc::clone(&self.ids),
        )
    }

    pub(super) fn state(&self, id: &str) -> Option<TxnState> {
        self.c.with_state(|s| s.get(id).map(|m| m.state))
    }

    /// The states persisted for `id`, in order.
    pub(super) fn persisted(&self, id: &str) -> Vec<Option<TxnState>> {
        self.log
            .records(self.c.partition_for(id))
            .into_iter()
            .filter(|r| decode_key(&r.key).unwrap() == id)
            .map(|r| {
                r.value
                    .map(|v| TransactionLogValue::decode(&v).unwrap().state)
            })
            .collect()
    }
}

#[test]
fn every_change_is_persisted_in_kafkas_order_before_it_takes_effect() {
    let f = Fixture::new();
    let (pid, epoch) = f.c.init_producer_id("t", 60_000, None).unwrap();
    f.c.add_partitions(
        "t",
        pid,
        epoch,
        vec![tp("a", 0), tp("deleted", 0), tp("b", 2)],
    )
    .unwrap();
    // Nothing new: nothing written.
    f.c.add_partitions("t", pid, epoch, vec![tp("a", 0)])
        .unwrap();
    f.c.end_txn("t", pid, epoch, true).unwrap();
    let written = f.markers.written.lock().unwrap().clone();
    check!(written.len() == 2);
    for (_, m) in &written {
        check!(m.commit);
        check!(m.producer_id == pid);
        check!(m.producer_epoch == epoch);
    }
    check!(f.state("t") == Some(TxnState::CompleteCommit));
    use TxnState::*;
    check!(
        f.persisted("t")
            == vec![
                Some(Empty),
                Some(Ongoing),
                Some(PrepareCommit),
                Some(CompleteCommit)
            ]
    );
    // Records go to Kafka's partition for the id (Java hashCode "t" = 116).
    check!(f.c.partition_for("t") == 116 % 50);
}

#[test]
fn a_failed_write_changes_nothing_and_answers_not_coordinator() {
    let f = Fixture::new();
    let (pid, epoch) = f.c.init_producer_id("t", 60_000, None).unwrap();
    f.log.set_fail_appends(true);
    assert2::assert!(let Err(TxnError::NotCoordinator(_)) = f.c.add_partitions("t", pid, epoch, vec![tp("a", 0)]));
    check!(f.state("t") == Some(TxnState::Empty));
    assert2::assert!(let Err(TxnError::NotCoordinator(_)) = f.c.init_producer_id("t", 60_000, None));
    check!(f.c.with_state(|s| s.get("t").unwrap().producer_epoch) == epoch);
    check!(
        TxnError::NotCoordinator(String::new())
            .response_error()
            .code()
            == 16
    );
    f.log.set_fail_appends(false);
    f.c.add_partitions("t", pid, epoch, vec![tp("a", 0)])
        .unwrap();
    // A failed prepare leaves the transaction open; no marker is written.
    f.log.set_fail_appends(true);
    assert2::assert!(let Err(TxnError::NotCoordinator(_)) = f.c.end_txn("t", pid, epoch, true));
    check!(f.state("t") == Some(TxnState::Ongoing));
    check!(f.markers.written.lock().unwrap().is_empty());
    f.log.set_fail_appends(false);
    f.c.end_txn("t", pid, epoch, true).unwrap();
    check!(f.state("t") == Some(TxnState::CompleteCommit));
}

#[test]
fn a_second_producer_fences_the_first_and_aborts_its_transaction() {
    let f = Fixture::new();
    let (pid, first) = f.c.init_producer_id("t", 60_000, None).unwrap();
    f.c.add_partitions("t", pid, first, vec![tp("a", 0)])
        .unwrap();
    let (pid2, second) = f.c.init_producer_id("t", 60_000, None).unwrap();
    check!(pid2 == pid);
    check!(second.0 == first.0 + 2);
    let written = f.markers.written.lock().unwrap().clone();
    assert2::assert!(let [(p, m)] = written.as_slice());
    check!(*p == tp("a", 0));
    check!(!m.commit);
    check!(m.producer_epoch.0 == first.0 + 1);
    check!(f.c.end_txn("t", pid, first, true) == Err(TxnError::ProducerFenced));
    assert2::assert!(let
        Err(TxnError::ProducerFenced) = f.c.verify("t", pid, first, &tp("a", 0))
    );
    use TxnState::*;
    check!(
        f.persisted("t")
            == vec![
                Some(Empty),
                Some(Ongoing),
                Some(PrepareAbort),
                Some(CompleteAbort),
                Some(Empty)
            ]
    );
}

#[test]
fn the_tick_aborts_after_the_timeout_and_retries_failed_markers() {
    let f = Fixture::new();
    let (pid, epoch) = f.c.init_producer_id("t", 1_000, None).unwrap();
    f.c.add_partitions("t", pid, epoch, vec![tp("a", 0)])
        .unwrap();
    check!(f.c.tick() == 0);
    f.markers.fail.store(true, Ordering::SeqCst);
    f.clock.advance(1_000);
    check!(f.c.tick() == 1);
    check!(f.state("t") == Some(TxnState::PrepareAbort));
    f.markers.fail.store(false, Ordering::SeqCst);
    check!(f.c.tick() == 1);
    check!(f.state("t") == Some(TxnState::CompleteAbort));
    check!(f.markers.written.lock().unwrap().len() == 1);
    check!(f.c.tick() == 0);
}

#[test]
fn a_restart_replays_the_state_and_completes_what_was_preparing() {
    let f = Fixture::new();
    let (pid, epoch) = f.c.init_producer_id("t", 60_000, None).unwrap();
    f.clock.set(500);
    f.c.add_partitions("t", pid, epoch, vec![tp("a", 0), tp("b", 0)])
        .unwrap();
    let (open_pid, open_epoch) = f.c.init_producer_id("open", 2_000, None).unwrap();
    f.c.add_partitions("open", open_pid, open_epoch, vec![tp("a", 1)])
        .unwrap();
    // The commit's markers fail, as if the broker died right after the
    // prepare was written.
    f.markers.fail.store(true, Ordering::SeqCst);
    f.c.end_txn("t", pid, epoch, true).unwrap();
    check!(f.state("t") == Some(TxnState::PrepareCommit));

    let again = f.restart();
    check!(again.state("t") == Some(TxnState::PrepareCommit));
    check!(again.state("open") == Some(TxnState::Ongoing));
    let meta = again.c.with_state(|s| s.get("t").unwrap().clone());
    check!(meta.producer_id == pid);
    check!(meta.producer_epoch == epoch);
    check!(meta.txn_start_ms == 500);
    check!(meta.partitions.len() == 2);
    // The first tick writes every marker of the prepared commit, then its
    // completion; the open transaction waits for its timeout.
    check!(again.c.tick() == 1);
    check!(again.state("t") == Some(TxnState::CompleteCommit));
    let written = again.markers.written.lock().unwrap().clone();
    check!(written.len() == 2);
    check!(
        written
            .iter()
            .all(|(_, m)| m.commit && m.producer_epoch == epoch)
    );
    check!(again.state("open") == Some(TxnState::Ongoing));
    again.clock.set(2_500);
    check!(again.c.tick() == 1);
    check!(again.state("open") == Some(TxnState::CompleteAbort));
    // The fenced producer stays fenced after yet another restart.
    let third = again.restart();
    check!(third.c.end_txn("open", open_pid, open_epoch, true) == Err(TxnError::ProducerFenced));
    check!(third.c.with_state(|s| s.get("t").unwrap().state) == TxnState::CompleteCommit);
    // The same producer id and the next epoch carry on.
    let (pid2, epoch2) = third.c.init_producer_id("t", 60_000, None).unwrap();
    check!(pid2 == pid);
    check!(epoch2.0 == epoch.0 + 1);
}

#[test]
fn expired_ids_are_tombstoned_and_stay_gone_after_a_restart() {
    let f = Fixture::new();
    let (first, _) = f.c.init_producer_id("old", 60_000, None).unwrap();
    let (pid, epoch) = f.c.init_producer_id("busy", 60_000, None).unwrap();
    f.c.add_partitions("busy", pid, epoch, vec![tp("a", 0)])
        .unwrap();
    f.clock.set(9_999);
    check!(f.c.expire_transactional_ids() == 0);
    f.clock.set(10_000);
    check!(f.c.expire_transactional_ids() == 1);
    check!(f.state("old").is_none());
    check!(f.state("busy") == Some(TxnState::Ongoing));
    check!(f.persisted("old").last() == Some(&None));
    let again = f.restart();
    check!(again.state("old").is_none());
    // The id starts over with a fresh producer id.
    let (second, epoch) = again.c.init_producer_id("old", 60_000, None).unwrap();
    check!(second != first);
    check!(epoch == ProducerEpoch(0));
}

#[test]
fn fencing_codes_follow_the_request_version() {
    check!(TxnError::ProducerFenced.code_for(1, 2) == 47);
    check!(TxnError::ProducerFenced.code_for(2, 2) == 90);
    check!(TxnError::InvalidTransactionTimeout.code_for(0, 2) == 50);
    // A transactional write's verification, as the broker converts it.
    let outside = TxnError::InvalidTxnState("x".into());
    check!(outside.verification_code(false) == 48);
    check!(outside.verification_code(true) == 120);
    check!(TxnError::ProducerFenced.verification_code(true) == 47);
    check!(TxnError::InvalidProducerIdMapping.verification_code(false) == 49);
}

#[test]
fn add_partitions_with_an_unknown_partition_adds_nothing() {
    use kafka_protocol::messages::{
        AddPartitionsToTxnRequest, TopicName, TransactionalId,
        add_partitions_to_txn_request::AddPartitionsToTxnTopic,
    };
    let f = Fixture::new();
    let c = &f.c;
    let (pid, epoch) = c.init_producer_id("t", 60_000, None).unwrap();
    let mut request = AddPartitionsToTxnRequest::default();
    request.v3_and_below_transactional_id = TransactionalId("t".into());
    request.v3_and_below_producer_id = kafka_protocol::messages::ProducerId(pid.0);
    request.v3_and_below_producer_epoch = epoch.0;
    let mut topic = AddPartitionsToTxnTopic::default();
    topic.name = TopicName("a".into());
    topic.partitions = vec![0, 9];
    request.v3_and_below_topics = vec![topic];
    let exists = |t: &str, p: i32| t == "a" && p == 0;
    let response = c.handle_add_partitions(3, &request, &exists);
    let codes: Vec<i16> = response.results_by_topic_v3_and_below[0]
        .results_by_partition
        .iter()
        .map(|r| r.partition_error_code)
        .collect();
    check!(codes == vec![55, 3]);
    check!(f.state("t") == Some(TxnState::Empty));
    request.v3_and_below_topics[0].partitions = vec![0];
    let response = c.handle_add_partitions(3, &request, &exists);
    check!(
        response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    );
    check!(f.state("t") == Some(TxnState::Ongoing));
    // A stale epoch: PRODUCER_FENCED from v2, INVALID_PRODUCER_EPOCH before.
    request.v3_and_below_producer_epoch = epoch.0 - 1;
    let v1 = c.handle_add_partitions(1, &request, &exists);
    check!(v1.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 47);
    let v3 = c.handle_add_partitions(3, &request, &exists);
    check!(v3.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 90);
}

#[test]
fn verify_only_answers_transaction_abortable_for_a_partition_outside() {
    use kafka_protocol::messages::{
        AddPartitionsToTxnRequest, TopicName, TransactionalId,
        add_partitions_to_txn_request::{AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction},
    };
    let f = Fixture::new();
    let (pid, epoch) = f.c.init_producer_id("t", 60_000, None).unwrap();
    f.c.add_partitions("t", pid, epoch, vec![tp("a", 0)])
        .unwrap();
    let mut topic = AddPartitionsToTxnTopic::default();
    topic.name = TopicName("a".into());
    topic.partitions = vec![0, 1];
    let mut txn = AddPartitionsToTxnTransaction::default();
    txn.transactional_id = TransactionalId("t".into());
    txn.producer_id = kafka_protocol::messages::ProducerId(pid.0);
    txn.producer_epoch = epoch.0;
    txn.verify_only = true;
    txn.topics = vec![topic];
    let mut request = AddPartitionsToTxnRequest::default();
    request.transactions = vec![txn];
    let response = f.c.handle_add_partitions_batched(&request, &|_, _| true);
    let codes: Vec<i16> = response.results_by_transaction[0].topic_results[0]
        .results_by_partition
        .iter()
        .map(|r| r.partition_error_code)
        .collect();
    check!(codes == vec![0, 120]);
    // Verifying added nothing.
    check!(f.c.with_state(|s| s.get("t").unwrap().partitions.len()) == 1);
}

#[test]
fn describe_and_list_transactions_report_the_state() {
    use kafka_protocol::messages::{
        DescribeTransactionsRequest, ListTransactionsRequest, TransactionalId,
    };
    let f = Fixture::new();
    let (c, clock) = (&f.c, &f.clock);
    let (pid, epoch) = c.init_producer_id("t", 60_000, None).unwrap();
    c.init_producer_id("idle", 60_000, None).unwrap();
    clock.set(1_000);
    c.add_partitions("t", pid, epoch, vec![tp("a", 1), tp("a", 0), tp("b", 0)])
        .unwrap();
    clock.set(5_000);

    let mut d = DescribeTransactionsRequest::default();
    d.transactional_ids = vec![TransactionalId("t".into()), TransactionalId("nope".into())];
    let described = c.handle_describe_transactions(&d);
    let [t, nope] = described.transaction_states.as_slice() else {
        panic!("two answers expected");
    };
    check!(t.error_code == 0);
    check!(t.transaction_state.as_str() == "Ongoing");
    check!(t.producer_id.0 == pid.0);
    check!(t.transaction_start_time_ms == 1_000);
    check!(t.topics.len() == 2);
    check!(t.topics[0].partitions == vec![0, 1]);
    check!(nope.error_code == 105);

    let mut l = ListTransactionsRequest::default();
    l.duration_filter = -1;
    check!(c.handle_list_transactions(&l).transaction_states.len() == 2);
    l.state_filters = vec!["Ongoing".into(), "Bogus".into()];
    let listed = c.handle_list_transactions(&l);
    check!(listed.transaction_states.len() == 1);
    check!(listed.unknown_state_filters.len() == 1);
    l.state_filters.clear();
    l.producer_id_filters = vec![kafka_protocol::messages::ProducerId(pid.0)];
    check!(c.handle_list_transactions(&l).transaction_states.len() == 1);
    l.producer_id_filters.clear();
    l.duration_filter = 3_999;
    check!(c.handle_list_transactions(&l).transaction_states.len() == 1);
    l.duration_filter = 4_000;
    check!(c.handle_list_transactions(&l).transaction_states.is_empty());

    // KIP-1152: the whole transactional id must match the pattern.
    l.duration_filter = -1;
    let ids = |l: &ListTransactionsRequest| {
        let mut ids: Vec<String> = c
            .handle_list_transactions(l)
            .transaction_states
            .iter()
            .map(|t| t.transactional_id.0.to_string())
            .collect();
        ids.sort();
        ids
    };
    l.transactional_id_pattern = Some("".into());
    check!(ids(&l) == ["idle", "t"]);
    l.transactional_id_pattern = Some("i.*".into());
    check!(ids(&l) == ["idle"]);
    l.transactional_id_pattern = Some("id|t".into());
    check!(ids(&l) == ["t"]);
    l.transactional_id_pattern = Some("(".into());
    let refused = c.handle_list_transactions(&l);
    check!(refused.error_code == 128);
    check!(refused.transaction_states.is_empty());
}

#[test]
fn transitions_carry_what_kafka_persists() {
    // The Empty record of a fresh id: no partitions, no start time.
    let m = TxnManager::default();
    let step = m
        .init_producer_id("t", 30_000, None, 42, &mut counter())
        .unwrap();
    assert2::assert!(let InitStep::Ready(Transition { next, .. }) = step);
    let value = next.to_value();
    check!(value.state == TxnState::Empty);
    check!(value.timeout_ms == 30_000);
    check!(value.start_ms == -1);
    check!(value.last_update_ms == 42);
    check!(value.partitions.is_empty());
}

#[test]
fn kip360_txn_retry_through_the_coordinator_is_persisted_and_fenced_after_a_restart() {
    use kafka_protocol::messages::{InitProducerIdRequest, TransactionalId};
    let f = Fixture::new();
    let request = |pid: i64, epoch: i16| {
        let mut r = InitProducerIdRequest::default();
        r.transactional_id = Some(TransactionalId("t".into()));
        r.transaction_timeout_ms = 60_000;
        r.producer_id = kafka_protocol::messages::ProducerId(pid);
        r.producer_epoch = epoch;
        r
    };
    let answer = |r: kafka_protocol::messages::InitProducerIdResponse| {
        (r.error_code, r.producer_id.0, r.producer_epoch)
    };
    check!(answer(f.c.handle_init_producer_id(4, &request(-1, -1))).0 == 0);
    let (code, pid, e0) = answer(f.c.handle_init_producer_id(4, &request(-1, -1)));
    check!(code == 0);
    check!(e0 == 1);
    let bump = request(pid, e0);
    check!(answer(f.c.handle_init_producer_id(4, &bump)) == (0, pid, e0 + 1));
    check!(answer(f.c.handle_init_producer_id(4, &bump)) == (0, pid, e0 + 1));
    // A stale epoch: PRODUCER_FENCED from v4 (INVALID_PRODUCER_EPOCH before).
    let stale = request(pid, e0 - 1);
    check!(f.c.handle_init_producer_id(4, &stale).error_code == 90);
    check!(f.c.handle_init_producer_id(3, &stale).error_code == 47);
    // An id without an epoch, or the reverse, is malformed (Kafka's KafkaApis).
    check!(f.c.handle_init_producer_id(4, &request(pid, -1)).error_code == 42);
    check!(f.c.handle_init_producer_id(4, &request(-1, e0)).error_code == 42);
    use TxnState::*;
    // Kafka writes the retry's Empty state too (with its timeout).
    check!(f.persisted("t") == vec![Some(Empty); 4]);
    // The answer works: a transaction commits under it.
    let producer = (ProducerId(pid), ProducerEpoch(e0 + 1));
    f.c.add_partitions("t", producer.0, producer.1, vec![tp("a", 0)])
        .unwrap();
    f.c.end_txn("t", producer.0, producer.1, true).unwrap();
    check!(f.state("t") == Some(CompleteCommit));
    // The last bump lives in memory only: after a restart its retry is fenced
    // while the holder itself still bumps.
    let again = f.restart();
    check!(again.c.handle_init_producer_id(4, &bump).error_code == 90);
    check!(
        again
            .c
            .handle_init_producer_id(4, &request(pid, e0 + 1))
            .producer_epoch
            == e0 + 2
    );
}

/// Ids in blocks of two: `try_allocate` finds the block used up every other
/// call, and `refill` (the persisting step) checks that the coordinator's
/// state lock is not held while it runs.
#[derive(Default)]
struct BlockIds {
    block: Mutex<(i64, i64)>,
    refills: std::sync::atomic::AtomicUsize,
    refills_under_lock: std::sync::atomic::AtomicUsize,
    coordinator: std::sync::OnceLock<std::sync::Weak<TransactionCoordinator>>,
}

impl ProducerIdSource for BlockIds {
    fn allocate(&self) -> Result<ProducerId, TxnError> {
        unreachable!("the coordinator only takes ids without blocking")
    }

    fn try_allocate(&self) -> Result<Option<ProducerId>, TxnError> {
        let mut block = self.block.lock().unwrap();
        Ok((block.0 < block.1).then(|| {
            block.0 += 1;
            ProducerId(block.0 - 1)
        }))
    }

    fn refill(&self) -> Result<(), TxnError> {
        self.refills.fetch_add(1, Ordering::SeqCst);
        let free = self
            .coordinator
            .get()
            .and_then(std::sync::Weak::upgrade)
            .is_none_or(|c| c.state_lock_is_free());
        if !free {
            self.refills_under_lock.fetch_add(1, Ordering::SeqCst);
        }
        let mut block = self.block.lock().unwrap();
        block.1 = block.0 + 2;
        Ok(())
    }
}

#[test]
fn producer_id_blocks_are_refilled_outside_the_state_lock() {
    let ids = Arc::new(BlockIds::default());
    let log = Arc::new(InMemoryTxnStateLog::new());
    let markers = Arc::new(Markers::default());
    *markers.log.lock().unwrap() = Some(Arc::clone(&log));
    let c = Arc::new(
        TransactionCoordinator::load(
            TxnConfig::default(),
            log as Arc<dyn TxnStateLog>,
            markers as Arc<dyn MarkerWriter>,
            Arc::clone(&ids) as Arc<dyn ProducerIdSource>,
            Arc::new(ManualClock::new(0)) as Arc<dyn krabka_log::Clock>,
        )
        .unwrap(),
    );
    let _ = ids.coordinator.set(Arc::downgrade(&c));
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..5 {
        let (pid, epoch) = c.init_producer_id(&format!("t{i}"), 60_000, None).unwrap();
        check!(epoch == ProducerEpoch(0));
        check!(seen.insert(pid.0), "producer id {} handed out twice", pid.0);
    }
    check!(ids.refills.load(Ordering::SeqCst) == 3);
    check!(ids.refills_under_lock.load(Ordering::SeqCst) == 0);
}

#[test]
fn an_open_transaction_moves_with_its_partition_and_completes_on_the_new_owner() {
    let f = Fixture::new();
    let (pid, epoch) = f.c.init_producer_id("t", 60_000, None).unwrap();
    f.c.add_partitions("t", pid, epoch, vec![tp("a", 0)])
        .unwrap();
    let partition = f.c.partition_for("t");

    // Another broker's coordinator over the same stored state.
    let markers = Arc::new(Markers::default());
    let moved = TransactionCoordinator::by_lease(
        TxnConfig::default(),
        Arc::clone(&f.log) as Arc<dyn TxnStateLog>,
        Arc::clone(&markers) as Arc<dyn MarkerWriter>,
        Arc::clone(&f.ids) as Arc<dyn ProducerIdSource>,
        Arc::clone(&f.clock) as Arc<dyn krabka_log::Clock>,
    );
    let not_coordinator = kafka_protocol::ResponseError::NotCoordinator.code();
    check!(moved.refusal("t").map(|r| r.code()) == Some(not_coordinator));
    moved
        .ownership()
        .valid_until(std::time::Instant::now() + std::time::Duration::from_secs(60));
    moved.take_partition(partition, 3).unwrap();
    check!(moved.refusal("t").is_none());
    check!(moved.with_state(|s| s.get("t").map(|m| m.state)) == Some(TxnState::Ongoing));

    // The producer's commit is completed by the new owner, markers and all.
    moved.end_txn("t", pid, epoch, true).unwrap();
    let written = markers.written.lock().unwrap().clone();
    check!(written.len() == 1);
    check!(written[0].1.commit);
    check!(
        written[0].1.coordinator_epoch == 3,
        "markers carry the lease's epoch"
    );
    check!(moved.with_state(|s| s.get("t").map(|m| m.state)) == Some(TxnState::CompleteCommit));

    moved.release_partition(partition);
    check!(moved.refusal("t").map(|r| r.code()) == Some(not_coordinator));
    check!(
        moved.with_state(|s| s.get("t").is_none()),
        "its ids are forgotten"
    );
}
