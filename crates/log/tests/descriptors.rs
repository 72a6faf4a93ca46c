//! Open file descriptors: a log holds one (its active segment's `.log`)
//! however many segments it has, through rolls, reads, retention,
//! compaction, crash recovery and a clean reopen.

mod common;

use {
    assert2::check,
    common::*,
    krabka_ids::LeaderEpoch,
    krabka_log::{CleanerConfig, CleanupPolicy, LogConfig, ManualClock},
    std::{path::Path, sync::Arc},
};

/// This process's open descriptors on files under `dir`.
fn open_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap() {
        let Ok(target) = std::fs::read_link(entry.unwrap().path()) else {
            continue;
        };
        if target.starts_with(dir) {
            out.push(target.display().to_string());
        }
    }
    out.sort();
    out
}

fn active_log(dir: &Path, log: &krabka_log::Log) -> Vec<String> {
    let base = log.segments().last().unwrap().base_offset;
    vec![dir.join(format!("{base:020}.log")).display().to_string()]
}

#[test]
fn a_log_holds_only_its_active_segment_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().canonicalize().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let log = open(&path, small_config(), &clock);
    check!(open_under(&path) == active_log(&path, &log));
    for i in 0..200 {
        log.append_as_leader(batch(1, 200, i), LeaderEpoch(0))
            .unwrap();
    }
    check!(log.segments().len() > 10);
    check!(open_under(&path) == active_log(&path, &log));
    // Reading every closed segment opens each for the read only.
    check!(read_all(&log, 0).len() == 200);
    check!(log.offset_for_timestamp(5).unwrap().is_some());
    check!(open_under(&path) == active_log(&path, &log));
    log.flush().unwrap();
    check!(open_under(&path) == active_log(&path, &log));

    // A crash (no close) and a recovery of every segment.
    drop(log);
    check!(open_under(&path).is_empty());
    let log = open(&path, small_config(), &clock);
    check!(read_all(&log, 0).len() == 200);
    check!(open_under(&path) == active_log(&path, &log));

    // Retention deletes closed segments; a clean close and reopen.
    let before = log.segments().len();
    log.advance_log_start_offset(100).unwrap();
    log.apply_retention().unwrap();
    check!(log.segments().len() < before);
    check!(open_under(&path) == active_log(&path, &log));
    log.close().unwrap();
    drop(log);
    let log = open(&path, small_config(), &clock);
    check!(read_all(&log, 100).len() == 100);
    check!(open_under(&path) == active_log(&path, &log));
}

#[test]
fn compaction_swaps_segments_without_holding_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().canonicalize().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let config = LogConfig {
        cleanup_policy: CleanupPolicy::Compact,
        min_cleanable_dirty_ratio: 0.0,
        ..small_config()
    };
    let log = open(&path, config, &clock);
    for i in 0..200 {
        let key = format!("k{}", i % 5);
        log.append_as_leader(keyed(&key, Some("value-value-value"), i), LeaderEpoch(0))
            .unwrap();
    }
    let before = log.segments().len();
    check!(before > 3);
    let stats = log.clean(&CleanerConfig::default(), true).unwrap();
    check!(stats.is_some_and(|s| s.records_removed > 0));
    check!(open_under(&path) == active_log(&path, &log));
    // The latest value of each key is still read.
    let keys: std::collections::BTreeSet<_> = read_all(&log, 0)
        .into_iter()
        .filter_map(|(_, r)| r.key)
        .collect();
    check!(keys.len() == 5);
    check!(open_under(&path) == active_log(&path, &log));
}
