//! State machine and coordinator tests, with an in-memory marker writer.

use {
    super::{
        coordinator::{MarkerError, MarkerWriter, ProducerIdSource, TransactionCoordinator},
        error::TxnError,
        state::{EndStep, InitStep, TopicPartition, TxnManager, TxnState},
    },
    assert2::check,
    krabka_ids::{ProducerEpoch, ProducerId},
    krabka_log::{ControlMarker, ManualClock},
    std::sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicI64, Ordering},
    },
};

fn tp(topic: &str, p: i32) -> TopicPartition {
    TopicPartition::new(topic, p)
}

fn counter() -> impl FnMut() -> Result<ProducerId, TxnError> {
    let mut next = 1000;
    move || {
        next += 1;
        Ok(ProducerId(next))
    }
}

fn ready(step: InitStep) -> (ProducerId, ProducerEpoch) {
    assert2::assert!(let InitStep::Ready(pid, epoch) = step);
    (pid, epoch)
}

#[test]
fn first_init_allocates_and_every_init_bumps_the_epoch() {
    let mut m = TxnManager::default();
    let mut ids = counter();
    let (pid, e0) = ready(m.init_producer_id("t", 60_000, None, 0, &mut ids).unwrap());
    check!(pid == ProducerId(1001));
    check!(e0 == ProducerEpoch(0));
    let (pid2, e1) = ready(m.init_producer_id("t", 60_000, None, 1, &mut ids).unwrap());
    check!(pid2 == pid);
    check!(e1 == ProducerEpoch(1));
    let (other, _) = ready(m.init_producer_id("u", 60_000, None, 1, &mut ids).unwrap());
    check!(other != pid);
}

#[test]
fn timeout_above_the_maximum_is_refused() {
    let mut m = TxnManager::new(900_000);
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
    let (pid, _) = ready(m.init_producer_id("t", 1000, None, 0, &mut ids).unwrap());
    let mut last = (pid, ProducerEpoch(0));
    for _ in 0..(i16::MAX as usize) {
        last = ready(m.init_producer_id("t", 1000, None, 0, &mut ids).unwrap());
        if last.0 != pid {
            break;
        }
    }
    check!(last.0 != pid);
    check!(last.1 == ProducerEpoch(0));
}

#[test]
fn full_commit_cycle_and_retry_of_end_txn() {
    let mut m = TxnManager::default();
    let mut ids = counter();
    let (pid, epoch) = ready(m.init_producer_id("t", 60_000, None, 0, &mut ids).unwrap());
    check!(m.get("t").unwrap().state == TxnState::Empty);
    m.add_partitions("t", pid, epoch, [tp("a", 0), tp("b", 1)], 5)
        .unwrap();
    check!(m.get("t").unwrap().state == TxnState::Ongoing);
    check!(m.verify("t", pid, epoch, &tp("a", 0)).is_ok());
    assert2::assert!(let Err(TxnError::InvalidTxnState(_)) = m.verify("t", pid, epoch, &tp("a", 1)));
    assert2::assert!(let Ok(EndStep::WriteMarkers(done)) = m.end_txn("t", pid, epoch, true, 6));
    check!(done.commit);
    check!(done.partitions == vec![tp("a", 0), tp("b", 1)]);
    check!(m.get("t").unwrap().state == TxnState::PrepareCommit);
    // While preparing: same outcome is concurrent, the opposite is invalid,
    // and nothing new can start.
    check!(m.end_txn("t", pid, epoch, true, 7) == Err(TxnError::ConcurrentTransactions));
    assert2::assert!(let Err(TxnError::InvalidTxnState(_)) = m.end_txn("t", pid, epoch, false, 7));
    check!(
        m.add_partitions("t", pid, epoch, [tp("a", 0)], 7) == Err(TxnError::ConcurrentTransactions)
    );
    check!(
        m.init_producer_id("t", 60_000, None, 7, &mut ids) == Err(TxnError::ConcurrentTransactions)
    );
    m.complete(&done, 8);
    check!(m.get("t").unwrap().state == TxnState::CompleteCommit);
    check!(m.get("t").unwrap().partitions.is_empty());
    check!(m.end_txn("t", pid, epoch, true, 9) == Ok(EndStep::AlreadyDone));
    assert2::assert!(let Err(TxnError::InvalidTxnState(_)) = m.end_txn("t", pid, epoch, false, 9));
    // The next transaction starts from CompleteCommit.
    m.add_partitions("t", pid, epoch, [tp("c", 0)], 10).unwrap();
    check!(m.get("t").unwrap().partitions.len() == 1);
    check!(m.get("t").unwrap().txn_start_ms == 10);
}

#[test]
fn end_txn_without_a_transaction_is_invalid() {
    let mut m = TxnManager::default();
    let mut ids = counter();
    let (pid, epoch) = ready(m.init_producer_id("t", 60_000, None, 0, &mut ids).unwrap());
    assert2::assert!(let Err(TxnError::InvalidTxnState(_)) = m.end_txn("t", pid, epoch, true, 1));
    assert2::assert!(let Err(TxnError::InvalidTxnState(_)) = m.end_txn("t", pid, epoch, false, 1));
}

#[test]
fn wrong_producer_or_epoch_is_refused() {
    let mut m = TxnManager::default();
    let mut ids = counter();
    let (pid, epoch) = ready(m.init_producer_id("t", 60_000, None, 0, &mut ids).unwrap());
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
    let (_, bumped) = ready(
        m.init_producer_id("t", 60_000, Some((pid, epoch)), 1, &mut ids)
            .unwrap(),
    );
    check!(bumped == ProducerEpoch(epoch.0 + 1));
}

#[test]
fn init_during_an_open_transaction_fences_and_aborts_it() {
    let mut m = TxnManager::default();
    let mut ids = counter();
    let (pid, old) = ready(m.init_producer_id("t", 60_000, None, 0, &mut ids).unwrap());
    m.add_partitions("t", pid, old, [tp("a", 0)], 1).unwrap();
    assert2::assert!(let Ok(InitStep::AbortFirst(abort)) = m.init_producer_id("t", 60_000, None, 2, &mut ids));
    check!(!abort.commit);
    check!(abort.producer_epoch == ProducerEpoch(old.0 + 1));
    check!(abort.partitions == vec![tp("a", 0)]);
    // The old producer is fenced at once.
    check!(m.end_txn("t", pid, old, true, 3) == Err(TxnError::ProducerFenced));
    m.complete(&abort, 3);
    check!(m.get("t").unwrap().state == TxnState::CompleteAbort);
    let (pid2, e) = ready(m.init_producer_id("t", 60_000, None, 4, &mut ids).unwrap());
    check!(pid2 == pid);
    check!(e == ProducerEpoch(old.0 + 2));
    check!(m.get("t").unwrap().state == TxnState::Empty);
}

#[test]
fn expired_transactions_are_aborted_under_a_bumped_epoch() {
    let mut m = TxnManager::default();
    let mut ids = counter();
    let (pid, epoch) = ready(m.init_producer_id("t", 1_000, None, 0, &mut ids).unwrap());
    m.add_partitions("t", pid, epoch, [tp("a", 0)], 100)
        .unwrap();
    check!(m.due(1_099).is_empty());
    let due = m.due(1_100);
    assert2::assert!(let [abort] = due.as_slice());
    check!(!abort.commit);
    check!(abort.producer_epoch == ProducerEpoch(epoch.0 + 1));
    // Handed out once while in flight.
    check!(m.due(5_000).is_empty());
    check!(m.end_txn("t", pid, epoch, true, 1_200) == Err(TxnError::ProducerFenced));
    m.complete(abort, 1_300);
    check!(m.get("t").unwrap().state == TxnState::CompleteAbort);
}

#[test]
fn failed_markers_are_retried_for_the_failed_partitions_only() {
    let mut m = TxnManager::default();
    let mut ids = counter();
    let (pid, epoch) = ready(m.init_producer_id("t", 60_000, None, 0, &mut ids).unwrap());
    m.add_partitions("t", pid, epoch, [tp("a", 0), tp("b", 0)], 1)
        .unwrap();
    assert2::assert!(let Ok(EndStep::WriteMarkers(done)) = m.end_txn("t", pid, epoch, true, 2));
    m.retry_later(&done, vec![tp("b", 0)], 3);
    check!(m.get("t").unwrap().state == TxnState::PrepareCommit);
    let due = m.due(4);
    assert2::assert!(let [again] = due.as_slice());
    check!(again.commit);
    check!(again.partitions == vec![tp("b", 0)]);
    m.retry_later(again, Vec::new(), 5);
    check!(m.get("t").unwrap().state == TxnState::CompleteCommit);
}

/// Records markers; can be told to fail.
#[derive(Default)]
struct Markers {
    written: Mutex<Vec<(TopicPartition, ControlMarker)>>,
    fail: AtomicBool,
}

impl MarkerWriter for Markers {
    fn write_marker(&self, p: &TopicPartition, marker: ControlMarker) -> Result<(), MarkerError> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(MarkerError::Failed("switched off".into()));
        }
        if p.topic == "deleted" {
            return Err(MarkerError::Gone);
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

fn coordinator() -> (TransactionCoordinator, Arc<Markers>, Arc<ManualClock>) {
    let markers = Arc::new(Markers::default());
    let clock = Arc::new(ManualClock::new(0));
    let c = TransactionCoordinator::new(
        900_000,
        Arc::clone(&markers) as Arc<dyn MarkerWriter>,
        Arc::new(Ids::default()),
        Arc::clone(&clock) as Arc<dyn krabka_log::Clock>,
    );
    (c, markers, clock)
}

#[test]
fn end_txn_writes_a_marker_to_every_partition() {
    let (c, markers, _) = coordinator();
    let (pid, epoch) = c.init_producer_id("t", 60_000, None).unwrap();
    c.add_partitions(
        "t",
        pid,
        epoch,
        vec![tp("a", 0), tp("deleted", 0), tp("b", 2)],
    )
    .unwrap();
    c.end_txn("t", pid, epoch, true).unwrap();
    let written = markers.written.lock().unwrap().clone();
    check!(written.len() == 2);
    for (_, m) in &written {
        check!(m.commit);
        check!(m.producer_id == pid);
        check!(m.producer_epoch == epoch);
    }
    check!(c.with_state(|s| s.get("t").unwrap().state) == TxnState::CompleteCommit);
}

#[test]
fn a_second_producer_fences_the_first_and_aborts_its_transaction() {
    let (c, markers, _) = coordinator();
    let (pid, first) = c.init_producer_id("t", 60_000, None).unwrap();
    c.add_partitions("t", pid, first, vec![tp("a", 0)]).unwrap();
    let (pid2, second) = c.init_producer_id("t", 60_000, None).unwrap();
    check!(pid2 == pid);
    check!(second.0 == first.0 + 2);
    let written = markers.written.lock().unwrap().clone();
    assert2::assert!(let [(p, m)] = written.as_slice());
    check!(*p == tp("a", 0));
    check!(!m.commit);
    check!(m.producer_epoch.0 == first.0 + 1);
    check!(c.end_txn("t", pid, first, true) == Err(TxnError::ProducerFenced));
    assert2::assert!(let
        Err(TxnError::ProducerFenced) = c.verify("t", pid, first, &tp("a", 0))
    );
}

#[test]
fn the_tick_aborts_after_the_timeout_and_retries_failed_markers() {
    let (c, markers, clock) = coordinator();
    let (pid, epoch) = c.init_producer_id("t", 1_000, None).unwrap();
    c.add_partitions("t", pid, epoch, vec![tp("a", 0)]).unwrap();
    check!(c.tick() == 0);
    markers.fail.store(true, Ordering::SeqCst);
    clock.advance(1_000);
    check!(c.tick() == 1);
    check!(c.with_state(|s| s.get("t").unwrap().state) == TxnState::PrepareAbort);
    markers.fail.store(false, Ordering::SeqCst);
    check!(c.tick() == 1);
    check!(c.with_state(|s| s.get("t").unwrap().state) == TxnState::CompleteAbort);
    check!(markers.written.lock().unwrap().len() == 1);
    check!(c.tick() == 0);
}

#[test]
fn old_versions_see_invalid_producer_epoch_for_fencing() {
    check!(TxnError::ProducerFenced.code_for(1, 2) == 47);
    check!(TxnError::ProducerFenced.code_for(2, 2) == 90);
    check!(TxnError::InvalidTransactionTimeout.code_for(0, 2) == 50);
}

#[test]
fn add_partitions_with_an_unknown_partition_adds_nothing() {
    use kafka_protocol::messages::{
        AddPartitionsToTxnRequest, TopicName, TransactionalId,
        add_partitions_to_txn_request::AddPartitionsToTxnTopic,
    };
    let (c, _, _) = coordinator();
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
    check!(c.with_state(|s| s.get("t").unwrap().state) == TxnState::Empty);
    request.v3_and_below_topics[0].partitions = vec![0];
    let response = c.handle_add_partitions(3, &request, &exists);
    check!(
        response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    );
    check!(c.with_state(|s| s.get("t").unwrap().state) == TxnState::Ongoing);
    // A stale epoch: PRODUCER_FENCED from v2, INVALID_PRODUCER_EPOCH before.
    request.v3_and_below_producer_epoch = epoch.0 - 1;
    let v1 = c.handle_add_partitions(1, &request, &exists);
    check!(v1.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 47);
    let v3 = c.handle_add_partitions(3, &request, &exists);
    check!(v3.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 90);
}

#[derive(Default)]
struct Committed(Mutex<Vec<kafka_protocol::messages::TxnOffsetCommitRequest>>);

impl super::OffsetCommitter for Committed {
    fn commit_offsets(&self, staged: Vec<kafka_protocol::messages::TxnOffsetCommitRequest>) {
        self.0.lock().unwrap().extend(staged);
    }
}

fn offset_commit(
    pid: ProducerId,
    epoch: ProducerEpoch,
    offset: i64,
) -> kafka_protocol::messages::TxnOffsetCommitRequest {
    use kafka_protocol::messages::{
        GroupId, TopicName, TransactionalId, TxnOffsetCommitRequest,
        txn_offset_commit_request::{TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic},
    };
    let mut p = TxnOffsetCommitRequestPartition::default();
    p.partition_index = 0;
    p.committed_offset = offset;
    let mut t = TxnOffsetCommitRequestTopic::default();
    t.name = TopicName("in".into());
    t.partitions = vec![p];
    let mut r = TxnOffsetCommitRequest::default();
    r.transactional_id = TransactionalId("t".into());
    r.group_id = GroupId("g".into());
    r.producer_id = kafka_protocol::messages::ProducerId(pid.0);
    r.producer_epoch = epoch.0;
    r.topics = vec![t];
    r
}

#[test]
fn transactional_offsets_are_applied_on_commit_only() {
    let (c, _, _) = coordinator();
    let committed = Arc::new(Committed::default());
    c.set_offset_committer(Arc::clone(&committed) as Arc<dyn super::OffsetCommitter>);
    let (pid, epoch) = c.init_producer_id("t", 60_000, None).unwrap();
    // Without AddOffsetsToTxn the group's partition is not in the transaction.
    let refused = c.handle_txn_offset_commit(offset_commit(pid, epoch, 5), "__consumer_offsets", 7);
    check!(refused.topics[0].partitions[0].error_code == 48);
    c.add_partitions("t", pid, epoch, vec![tp("__consumer_offsets", 7)])
        .unwrap();
    let ok = c.handle_txn_offset_commit(offset_commit(pid, epoch, 5), "__consumer_offsets", 7);
    check!(ok.topics[0].partitions[0].error_code == 0);
    check!(c.staged_offsets("t") == 1);
    c.end_txn("t", pid, epoch, false).unwrap();
    check!(committed.0.lock().unwrap().is_empty());
    check!(c.staged_offsets("t") == 0);
    c.add_partitions("t", pid, epoch, vec![tp("__consumer_offsets", 7)])
        .unwrap();
    c.handle_txn_offset_commit(offset_commit(pid, epoch, 9), "__consumer_offsets", 7);
    check!(committed.0.lock().unwrap().is_empty());
    c.end_txn("t", pid, epoch, true).unwrap();
    let applied = committed.0.lock().unwrap().clone();
    assert2::assert!(let [only] = applied.as_slice());
    check!(only.topics[0].partitions[0].committed_offset == 9);
}

#[test]
fn describe_and_list_transactions_report_the_state() {
    use kafka_protocol::messages::{
        DescribeTransactionsRequest, ListTransactionsRequest, TransactionalId,
    };
    let (c, _, clock) = coordinator();
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
    l.duration_filter = 3_999;
    check!(c.handle_list_transactions(&l).transaction_states.len() == 1);
    l.duration_filter = 4_000;
    check!(c.handle_list_transactions(&l).transaction_states.is_empty());
}
