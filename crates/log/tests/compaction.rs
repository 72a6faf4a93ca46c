//! Compaction against a reference model, bounded offset map, transactions.

mod common;

use {
    assert2::check,
    common::*,
    kafka_protocol::records::Compression,
    krabka_ids::{LeaderEpoch, ProducerEpoch, ProducerId},
    krabka_log::{
        CleanerConfig, CleanupPolicy, Clock, ControlMarker, LogCleaner, LogConfig, ManualClock,
    },
    proptest::prelude::*,
    std::{collections::HashMap, sync::Arc},
};

fn compact_config() -> LogConfig {
    LogConfig {
        cleanup_policy: CleanupPolicy::Compact,
        segment_bytes: 1024,
        delete_retention_ms: 1000,
        ..small_config()
    }
}

type Rec = (i64, Option<Vec<u8>>, Option<Vec<u8>>, i64);

fn contents(log: &krabka_log::Log) -> Vec<Rec> {
    read_all(log, log.log_start_offset())
        .into_iter()
        .filter(|(_, r)| !r.control)
        .map(|(o, r)| {
            (
                o,
                r.key.map(|k| k.to_vec()),
                r.value.map(|v| v.to_vec()),
                r.timestamp,
            )
        })
        .collect()
}

/// What a full compaction of everything below `end` must leave.
fn model(all: &[Rec], end: i64, horizon: i64) -> Vec<Rec> {
    let mut latest: HashMap<Vec<u8>, i64> = HashMap::new();
    for (o, k, _, _) in all {
        if *o < end {
            if let Some(k) = k {
                latest.insert(k.clone(), *o);
            }
        }
    }
    all.iter()
        .filter(|(o, k, v, ts)| {
            if *o >= end {
                return true;
            }
            let Some(k) = k else { return true };
            latest.get(k) == Some(o) && !(v.is_none() && *ts < horizon)
        })
        .cloned()
        .collect()
}

const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

fn run_model_check(ops: Vec<(u8, bool, u8, usize)>, dedupe_entries: u64) {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(10_000));
    let log = open(dir.path(), compact_config(), &clock);
    for (i, (key, tombstone, n, codec)) in ops.iter().enumerate() {
        let ts = 5_000 + i as i64 * 10;
        let recs = (0..=*n)
            .map(|j| {
                let k = format!("k{}", (*key as usize + j as usize) % 12);
                let v = format!("v{i}-{j}");
                record(
                    Some(k.as_bytes()),
                    if *tombstone && j == 0 {
                        None
                    } else {
                        Some(v.as_bytes())
                    },
                    ts,
                )
            })
            .collect();
        log.append_as_leader(encode(recs, None, false, CODECS[codec % 5]), LeaderEpoch(0))
            .unwrap();
    }
    let before = contents(&log);
    let end = log.segments().last().unwrap().base_offset;
    let cfg = CleanerConfig {
        dedupe_buffer_size: dedupe_entries * 24,
        dedupe_buffer_load_factor: 1.0,
        ..CleanerConfig::default()
    };
    for _ in 0..200 {
        match log.clean(&cfg, true).unwrap() {
            Some(s) if s.clean_end_offset < end => continue,
            _ => break,
        }
    }
    // Run once more so records cleaned early see the final map.
    let _ = log.clean(&cfg, true).unwrap();
    let horizon = clock.now_ms() - 1000;
    let expected = model(&before, end, horizon);
    check!(contents(&log) == expected);
    check!(log.log_end_offset() == before.last().map_or(0, |r| r.0 + 1));
    // Survives a restart.
    log.close().unwrap();
    let log = open(dir.path(), compact_config(), &clock);
    check!(contents(&log) == expected);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn compaction_matches_reference_model(ops in proptest::collection::vec((0u8..12, any::<bool>(), 0u8..4, 0usize..5), 1..80)) {
        run_model_check(ops, 1_000);
    }

    #[test]
    fn bounded_offset_map_converges(ops in proptest::collection::vec((0u8..12, any::<bool>(), 0u8..3, 0usize..5), 1..60)) {
        run_model_check(ops, 5);
    }
}

#[test]
fn tombstones_are_kept_until_delete_retention_passes() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(10_000));
    let log = open(dir.path(), compact_config(), &clock);
    for i in 0..20 {
        log.append_as_leader(
            keyed(&format!("k{}", i % 3), Some("v"), 9_900),
            LeaderEpoch(0),
        )
        .unwrap();
    }
    log.append_as_leader(keyed("k0", None, 9_950), LeaderEpoch(0))
        .unwrap();
    for i in 0..20 {
        log.append_as_leader(
            keyed("filler", Some(&format!("{i:0100}")), 9_990),
            LeaderEpoch(0),
        )
        .unwrap();
    }
    let cfg = CleanerConfig::default();
    log.clean(&cfg, true).unwrap();
    let has_tombstone = |log: &krabka_log::Log| {
        contents(log)
            .iter()
            .any(|r| r.1.as_deref() == Some(b"k0") && r.2.is_none())
    };
    check!(has_tombstone(&log));
    check!(
        !contents(&log)
            .iter()
            .any(|r| r.1.as_deref() == Some(b"k0") && r.2.is_some())
    );
    clock.advance(5_000);
    log.clean(&cfg, true).unwrap();
    check!(!has_tombstone(&log));
}

#[test]
fn aborted_data_removed_markers_kept_by_background_cleaner() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(10_000));
    let log = Arc::new(open(
        dir.path(),
        LogConfig {
            min_cleanable_dirty_ratio: 0.01,
            ..compact_config()
        },
        &clock,
    ));
    let txn = |seq| {
        encode(
            vec![record(Some(b"t"), Some(b"aborted"), 1)],
            Some((7, 0, seq)),
            true,
            Compression::None,
        )
    };
    log.append_as_leader(keyed("t", Some("committed"), 1), LeaderEpoch(0))
        .unwrap();
    log.append_as_leader(txn(0), LeaderEpoch(0)).unwrap();
    let m = ControlMarker {
        producer_id: ProducerId(7),
        producer_epoch: ProducerEpoch(0),
        commit: false,
        coordinator_epoch: 1,
        transaction_version: krabka_ids::TransactionVersion::V0,
    };
    log.append_control_marker(m, LeaderEpoch(0)).unwrap();
    for i in 0..20 {
        log.append_as_leader(
            keyed("filler", Some(&format!("{i:0100}")), 2),
            LeaderEpoch(0),
        )
        .unwrap();
    }
    let cleaner = LogCleaner::start(CleanerConfig {
        backoff_ms: 10,
        ..CleanerConfig::default()
    })
    .unwrap();
    cleaner.register(&log);
    cleaner.wake();
    for _ in 0..500 {
        if log.first_dirty_offset() > 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    cleaner.shutdown();
    let all = read_all(&log, 0);
    let t: Vec<_> = all
        .iter()
        .filter(|(_, r)| r.key.as_deref() == Some(b"t"))
        .map(|(_, r)| r.value.clone().unwrap())
        .collect();
    check!(t == vec![bytes::Bytes::from_static(b"committed")]);
    check!(all.iter().any(|(o, r)| *o == 2 && r.control));
    // Offsets are not renumbered.
    check!(all.iter().any(|(o, _)| *o == 0));
}
