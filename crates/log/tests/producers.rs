//! Idempotent producers, transactions, markers, LSO and the aborted-transaction index.

mod common;

use {
    assert2::check,
    common::*,
    kafka_protocol::records::Compression,
    krabka_ids::{LeaderEpoch, ProducerEpoch, ProducerId},
    krabka_log::{ControlMarker, ManualClock},
    std::sync::Arc,
};

fn pbatch(pid: i64, epoch: i16, seq: i32, n: usize, txn: bool) -> bytes::Bytes {
    encode(
        (0..n).map(|_| record(Some(b"k"), Some(b"v"), 5)).collect(),
        Some((pid, epoch, seq)),
        txn,
        Compression::None,
    )
}

fn marker(pid: i64, epoch: i16, commit: bool) -> ControlMarker {
    ControlMarker {
        producer_id: ProducerId(pid),
        producer_epoch: ProducerEpoch(epoch),
        commit,
        coordinator_epoch: 0,
        transaction_version: krabka_ids::TransactionVersion::V0,
    }
}

#[test]
fn idempotent_appends_and_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let log = open(dir.path(), small_config(), &clock);
    let b0 = pbatch(9, 0, 0, 2, false);
    check!(
        log.append_as_leader(b0.clone(), LeaderEpoch(0))
            .unwrap()
            .first_offset
            == 0
    );
    log.append_as_leader(batch(1, 1, 0), LeaderEpoch(0))
        .unwrap();
    check!(
        log.append_as_leader(pbatch(9, 0, 2, 1, false), LeaderEpoch(0))
            .unwrap()
            .first_offset
            == 3
    );
    let dup = log.append_as_leader(b0, LeaderEpoch(0)).unwrap();
    check!(dup.duplicate && dup.first_offset == 0 && dup.last_offset == 1);
    check!(log.log_end_offset() == 4);
    check!(
        log.append_as_leader(pbatch(9, 0, 9, 1, false), LeaderEpoch(0))
            .unwrap_err()
            .kafka_error_code()
            == 45
    );
    check!(
        log.append_as_leader(pbatch(9, 1, 0, 1, false), LeaderEpoch(0))
            .unwrap()
            .first_offset
            == 4
    );
    check!(
        log.append_as_leader(pbatch(9, 0, 3, 1, false), LeaderEpoch(0))
            .unwrap_err()
            .kafka_error_code()
            == 47
    );
    let p = log.producers();
    check!(p.len() == 1);
    check!(p[0].producer_epoch == ProducerEpoch(1) && p[0].last_sequence == 0);

    // State is rebuilt from the snapshot (clean) and from the log (unclean).
    log.close().unwrap();
    let log = open(dir.path(), small_config(), &clock);
    check!(
        log.append_as_leader(pbatch(9, 1, 2, 1, false), LeaderEpoch(0))
            .unwrap_err()
            .kafka_error_code()
            == 45
    );
    check!(
        log.append_as_leader(pbatch(9, 1, 1, 1, false), LeaderEpoch(0))
            .unwrap()
            .first_offset
            == 5
    );
    drop(log);
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "snapshot") {
            std::fs::remove_file(p).unwrap();
        }
    }
    let log = open(dir.path(), small_config(), &clock);
    let dup = log
        .append_as_leader(pbatch(9, 1, 1, 1, false), LeaderEpoch(0))
        .unwrap();
    check!(dup.duplicate && dup.first_offset == 5);
}

#[test]
fn transactions_markers_lso_and_txnindex() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let log = open(dir.path(), small_config(), &clock);
    log.append_as_leader(batch(1, 1, 0), LeaderEpoch(0))
        .unwrap(); // 0
    log.append_as_leader(pbatch(1, 0, 0, 2, true), LeaderEpoch(0))
        .unwrap(); // 1-2
    check!(log.last_stable_offset() == 1);
    log.append_as_leader(pbatch(2, 0, 0, 1, true), LeaderEpoch(0))
        .unwrap(); // 3
    log.append_as_leader(pbatch(1, 0, 2, 1, true), LeaderEpoch(0))
        .unwrap(); // 4
    check!(
        log.append_as_leader(pbatch(1, 0, 3, 1, false), LeaderEpoch(0))
            .unwrap_err()
            .kafka_error_code()
            == 48
    );
    let abort = log
        .append_control_marker(marker(1, 0, false), LeaderEpoch(0))
        .unwrap(); // 5
    check!(abort.first_offset == 5);
    check!(log.last_stable_offset() == 3);
    let commit = log
        .append_control_marker(marker(2, 0, true), LeaderEpoch(0))
        .unwrap(); // 6
    check!(commit.first_offset == 6);
    check!(log.last_stable_offset() == 7);
    check!(log.log_end_offset() == 7);
    let aborted = log.aborted_transactions(0, 7).unwrap();
    check!(aborted.len() == 1);
    check!(aborted[0].producer_id == ProducerId(1) && aborted[0].first_offset == 1);
    check!(log.aborted_transactions(6, 7).unwrap().is_empty());
    check!(log.aborted_transactions(0, 1).unwrap().is_empty());
    // txnindex bytes: version 0, pid 1, first 1, last 5, lso 3.
    let seg = &log.segments()[0];
    let raw = std::fs::read(&seg.txn_index_path).unwrap();
    let mut want = vec![0u8, 0];
    for v in [1i64, 1, 5, 3] {
        want.extend_from_slice(&v.to_be_bytes());
    }
    check!(raw == want);
    // Fenced marker.
    check!(
        log.append_control_marker(marker(9, 0, false), LeaderEpoch(0))
            .is_ok()
    );
    log.append_as_leader(pbatch(9, 3, 0, 1, false), LeaderEpoch(0))
        .unwrap();
    check!(
        log.append_control_marker(marker(9, 2, false), LeaderEpoch(0))
            .unwrap_err()
            .kafka_error_code()
            == 47
    );

    // An open transaction survives a crash (rebuilt from the log), and the
    // txnindex is rebuilt by recovery.
    log.append_as_leader(pbatch(4, 0, 0, 1, true), LeaderEpoch(0))
        .unwrap();
    let open_at = log.log_end_offset() - 1;
    std::fs::remove_file(&seg.txn_index_path).unwrap();
    drop(log);
    let log = open(dir.path(), small_config(), &clock);
    check!(log.last_stable_offset() == open_at);
    let aborted = log.aborted_transactions(0, 100).unwrap();
    check!(
        aborted
            .iter()
            .any(|a| a.producer_id == ProducerId(1) && a.first_offset == 1)
    );
    check!(std::fs::read(&log.segments()[0].txn_index_path).unwrap()[..34] == want[..]);
}

/// Transactions version 2 (KIP-1228): the coordinator ends every
/// transaction under a bumped epoch, so a marker at the epoch the records
/// were written under is stale while a transaction is open, and is taken
/// as a retry once none is.
#[test]
fn a_version_2_marker_needs_an_epoch_above_the_open_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let log = open(dir.path(), small_config(), &clock);
    let v2 = |epoch: i16, commit: bool| ControlMarker {
        transaction_version: krabka_ids::TransactionVersion::V2,
        ..marker(7, epoch, commit)
    };
    log.append_as_leader(pbatch(7, 3, 0, 1, true), LeaderEpoch(0))
        .unwrap(); // 0
    // A stale marker at the transaction's own epoch ends nothing.
    check!(
        log.append_control_marker(v2(3, true), LeaderEpoch(0))
            .unwrap_err()
            .kafka_error_code()
            == 47
    );
    check!(log.last_stable_offset() == 0);
    // The same marker as version 0 (the epoch may equal the producer's).
    let dir0 = tempfile::tempdir().unwrap();
    let log0 = open(dir0.path(), small_config(), &clock);
    log0.append_as_leader(pbatch(7, 3, 0, 1, true), LeaderEpoch(0))
        .unwrap();
    check!(
        log0.append_control_marker(marker(7, 3, true), LeaderEpoch(0))
            .is_ok()
    );
    // The bumped epoch ends it.
    check!(
        log.append_control_marker(v2(4, true), LeaderEpoch(0))
            .unwrap()
            .first_offset
            == 1
    );
    check!(log.last_stable_offset() == 2);
    // Its retry, with no transaction open, is written again.
    check!(
        log.append_control_marker(v2(4, true), LeaderEpoch(0))
            .is_ok()
    );
    // The next transaction, at the bumped epoch, is not ended by a stale
    // marker of the previous one.
    log.append_as_leader(pbatch(7, 4, 0, 1, true), LeaderEpoch(0))
        .unwrap(); // 3
    check!(
        log.append_control_marker(v2(4, false), LeaderEpoch(0))
            .unwrap_err()
            .kafka_error_code()
            == 47
    );
    check!(log.last_stable_offset() == 3);
    check!(
        log.append_control_marker(v2(5, false), LeaderEpoch(0))
            .is_ok()
    );
    check!(log.last_stable_offset() == log.log_end_offset());
}

#[test]
fn idle_producers_expire() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let log = open(dir.path(), small_config(), &clock);
    log.append_as_leader(pbatch(1, 0, 0, 1, false), LeaderEpoch(0))
        .unwrap(); // ts 5
    log.append_as_leader(pbatch(2, 0, 0, 1, true), LeaderEpoch(0))
        .unwrap(); // open txn
    clock.set(100_000);
    check!(log.remove_expired_producers(1_000).unwrap() == 1);
    check!(
        log.producers()
            .iter()
            .map(|p| p.producer_id)
            .collect::<Vec<_>>()
            == vec![ProducerId(2)]
    );
}

#[test]
fn compacted_topics_need_keys() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let cfg = krabka_log::LogConfig {
        cleanup_policy: krabka_log::CleanupPolicy::Compact,
        ..small_config()
    };
    let log = open(dir.path(), cfg, &clock);
    check!(
        log.append_as_leader(batch(1, 10, 0), LeaderEpoch(0))
            .unwrap_err()
            .kafka_error_code()
            == 87
    );
    check!(
        log.append_as_leader(keyed("k", Some("v"), 0), LeaderEpoch(0))
            .is_ok()
    );
}
