//! `Log::read_slice` answers exactly what `Log::read` answers, as a slice of
//! the segment file: across segment boundaries, under small `max_bytes`,
//! bounded by the high watermark or the last stable offset, and after the
//! segment was deleted by retention.

mod common;

use {
    assert2::check,
    common::*,
    kafka_protocol::records::Compression,
    krabka_ids::{LeaderEpoch, ProducerEpoch, ProducerId},
    krabka_log::{ControlMarker, Log, LogConfig, ManualClock},
    proptest::prelude::*,
    std::sync::Arc,
};

/// What a log is built from: plain batches, and transactional ones of one
/// producer that end in a commit or an abort (the last may stay open).
#[derive(Debug, Clone)]
enum Step {
    Plain { records: usize, value: usize },
    Txn { records: usize, end: Option<bool> },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (1usize..6, 0usize..300).prop_map(|(records, value)| Step::Plain { records, value }),
        1 => (1usize..4, prop::option::weighted(0.8, any::<bool>()))
            .prop_map(|(records, end)| Step::Txn { records, end }),
    ]
}

fn build(dir: &std::path::Path, steps: &[Step], segment_bytes: u64) -> Log {
    let clock = Arc::new(ManualClock::new(0));
    let log = open(
        dir,
        LogConfig {
            segment_bytes,
            ..small_config()
        },
        &clock,
    );
    let (pid, mut seq) = (7i64, 0i32);
    for s in steps {
        match s {
            Step::Plain { records, value } => {
                log.append_as_leader(batch(*records, *value, 1), LeaderEpoch(0))
                    .unwrap();
            }
            Step::Txn { records, end } => {
                let b = encode(
                    (0..*records)
                        .map(|_| record(Some(b"k"), Some(b"txn"), 1))
                        .collect(),
                    Some((pid, 0, seq)),
                    true,
                    Compression::None,
                );
                seq += i32::try_from(*records).unwrap();
                log.append_as_leader(b, LeaderEpoch(0)).unwrap();
                if let Some(commit) = end {
                    log.append_control_marker(
                        ControlMarker {
                            producer_id: ProducerId(pid),
                            producer_epoch: ProducerEpoch(0),
                            commit: *commit,
                            coordinator_epoch: 0,
                            transaction_version: krabka_ids::TransactionVersion::V0,
                        },
                        LeaderEpoch(0),
                    )
                    .unwrap();
                }
            }
        }
    }
    log
}

/// Every start offset, under every `max_bytes` and both bounds, reads the
/// same bytes both ways.
fn check_all(log: &Log, max_bytes: &[usize]) {
    let (hw, lso) = (log.log_end_offset(), log.last_stable_offset());
    for start in log.log_start_offset()..=hw {
        for &max in max_bytes {
            for bound in [hw, lso] {
                for min_one in [true, false] {
                    let bytes = log.read(start, max, bound, min_one).unwrap();
                    let slice = log.read_slice(start, max, bound, min_one).unwrap();
                    let sent = slice
                        .records
                        .as_ref()
                        .map(|s| s.read().unwrap())
                        .unwrap_or_default();
                    check!(
                        sent == bytes.records,
                        "start {start} max_bytes {max} bound {bound} min_one {min_one}"
                    );
                    check!(slice.records.is_none() == bytes.records.is_empty());
                    check!(slice.log_start_offset == bytes.log_start_offset);
                    check!(slice.log_end_offset == bytes.log_end_offset);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn a_slice_holds_the_bytes_a_read_returns(
        steps in prop::collection::vec(step(), 1..60),
        segment_bytes in prop::sample::select(vec![2048u64, 4096, 1 << 20]),
        max_bytes in prop::collection::vec(1usize..6000, 3),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let log = build(dir.path(), &steps, segment_bytes);
        let mut max_bytes = max_bytes;
        max_bytes.push(1 << 20);
        check_all(&log, &max_bytes);
    }
}

#[test]
fn read_committed_stops_at_an_open_transaction_and_spans_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut steps = Vec::new();
    for i in 0..40 {
        steps.push(Step::Plain {
            records: 1 + i % 3,
            value: 200,
        });
        steps.push(Step::Txn {
            records: 2,
            end: Some(i % 2 == 0),
        });
    }
    steps.push(Step::Txn {
        records: 1,
        end: None,
    });
    steps.push(Step::Plain {
        records: 1,
        value: 10,
    });
    let log = build(dir.path(), &steps, 2048);
    check!(log.segments().len() > 5);
    check!(log.last_stable_offset() < log.log_end_offset());
    check!(
        !log.aborted_transactions(0, log.last_stable_offset())
            .unwrap()
            .is_empty()
    );
    check_all(&log, &[1, 100, 700, 3000, 1 << 20]);
}

#[test]
fn a_slice_outlives_its_segment_deleted_by_retention() {
    let dir = tempfile::tempdir().unwrap();
    let steps: Vec<Step> = (0..30)
        .map(|_| Step::Plain {
            records: 2,
            value: 300,
        })
        .collect();
    let log = build(dir.path(), &steps, 2048);
    let first = log.segments()[0].clone();
    check!(!first.active);
    let want = log.read(0, 1 << 20, i64::MAX, true).unwrap().records;
    let slice = log
        .read_slice(0, 1 << 20, i64::MAX, true)
        .unwrap()
        .records
        .unwrap();
    log.advance_log_start_offset(first.end_offset + 2).unwrap();
    check!(!first.log_path.exists());
    check!(slice.read().unwrap() == want);
    check!(log.read_slice(0, 100, i64::MAX, true).is_err());
}
