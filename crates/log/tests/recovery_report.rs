//! What recovery removes is reported (offsets, records, bytes, cause), a
//! corrupt log opened with `CorruptionPolicy::Refuse` is left as it is, and
//! a torn tail is still cut then.

mod common;

use {
    assert2::check,
    common::*,
    krabka_ids::LeaderEpoch,
    krabka_log::{
        CorruptionPolicy, Log, LogConfig, LogError, ManualClock, OpenOptions,
        recovery::{LossCause, Removal},
    },
    std::{path::Path, sync::Arc},
};

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1 << 20,
        index_interval_bytes: 100,
        ..small_config()
    }
}

/// `count` one-record batches; returns the byte end of each.
fn fill(log: &Log, count: i64) -> Vec<u64> {
    (0..count)
        .map(|i| {
            log.append_as_leader(batch(1, 50, i), LeaderEpoch(0))
                .unwrap();
            log.size_bytes()
        })
        .collect()
}

fn segment(dir: &Path, base: i64) -> std::path::PathBuf {
    dir.join(format!("{base:020}.log"))
}

fn flip(path: &Path, at: u64) {
    let mut raw = std::fs::read(path).unwrap();
    raw[at as usize] ^= 0x55;
    std::fs::write(path, raw).unwrap();
}

fn open_with(dir: &Path, cfg: LogConfig, policy: CorruptionPolicy) -> Result<Log, LogError> {
    Log::open_with(
        dir,
        TOPIC,
        cfg,
        Arc::new(ManualClock::new(0)),
        OpenOptions {
            corruption: policy,
            verify_all: false,
        },
    )
}

#[test]
fn a_corrupt_batch_in_the_middle_is_cut_and_reported_in_records() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let log = open(dir.path(), config(), &clock);
    let ends = fill(&log, 30);
    drop(log); // crash
    let size = *ends.last().unwrap();
    flip(&segment(dir.path(), 0), ends[11] + 40); // inside batch 12
    let log = open(dir.path(), config(), &clock);
    check!(log.log_end_offset() == 12);
    let report = log.recovery_report();
    check!(!report.clean_start);
    let [removal] = report.removals.as_slice() else {
        panic!("one removal expected: {report:?}");
    };
    check!(
        (
            removal.segment,
            removal.from_offset,
            removal.to_offset,
            removal.records,
            removal.bytes
        ) == (0, 12, Some(30), 18, size - ends[11])
    );
    let LossCause::Corruption { reason } = &removal.cause else {
        panic!("corruption expected: {removal:?}");
    };
    check!(reason.contains("CRC"));
    check!(report.records_removed() == 18);
}

#[test]
fn refusing_corruption_changes_nothing_and_names_the_damage() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let log = open(dir.path(), config(), &clock);
    let ends = fill(&log, 30);
    drop(log);
    let path = segment(dir.path(), 0);
    flip(&path, ends[11] + 40);
    let damaged = std::fs::read(&path).unwrap();
    let refused = open_with(dir.path(), config(), CorruptionPolicy::Refuse);
    let Err(LogError::CorruptLog {
        segment,
        position,
        offset,
        records_after,
        bytes_after,
        ..
    }) = refused
    else {
        panic!("refusal expected: {refused:?}");
    };
    check!((segment, position, offset, records_after) == (0, ends[11], 12, 18));
    check!(bytes_after == ends[29] - ends[11]);
    check!(std::fs::read(&path).unwrap() == damaged);
    // Refused again on the next attempt, then cut on purpose.
    check!(open_with(dir.path(), config(), CorruptionPolicy::Refuse).is_err());
    let log = open_with(dir.path(), config(), CorruptionPolicy::Truncate).unwrap();
    check!(log.log_end_offset() == 12);
}

#[test]
fn a_torn_tail_is_cut_when_refusing_and_reported_on_a_clean_start() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let log = open(dir.path(), config(), &clock);
    let ends = fill(&log, 10);
    log.close().unwrap();
    drop(log);
    // Half of a batch at the end, as a write cut short leaves it.
    let path = segment(dir.path(), 0);
    let mut raw = std::fs::read(&path).unwrap();
    let mut whole = batch(2, 50, 7).to_vec();
    // As the log writes it: at the next offset.
    whole[..8].copy_from_slice(&10i64.to_be_bytes());
    raw.extend_from_slice(&whole[..whole.len() / 2]);
    std::fs::write(&path, raw).unwrap();
    let log = open_with(dir.path(), config(), CorruptionPolicy::Refuse).unwrap();
    check!(log.log_end_offset() == 10);
    check!(log.size_bytes() == ends[9]);
    let report = log.recovery_report();
    check!(report.clean_start);
    check!(
        report.removals
            == vec![Removal {
                segment: 0,
                from_offset: 10,
                // The torn batch's header still says what it held.
                to_offset: Some(12),
                records: 2,
                bytes: (whole.len() / 2) as u64,
                cause: LossCause::TornTail,
            }]
    );
}

#[test]
fn later_segments_deleted_after_corruption_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let cfg = LogConfig {
        segment_bytes: 1024,
        ..config()
    };
    let log = open(dir.path(), cfg.clone(), &clock);
    fill(&log, 60);
    let segs = log.segments();
    check!(segs.len() >= 4);
    drop(log); // crash
    // Rolls move the recovery point; as if it had stayed at 0 (Kafka's
    // checkpoint is written asynchronously), every segment is recovered.
    krabka_log::checkpoint::write_offset(
        &dir.path().join(krabka_log::checkpoint::RECOVERY_POINT_FILE),
        0,
    )
    .unwrap();
    // Corrupt the last batch of the second segment.
    let second = &segs[1];
    let len = std::fs::metadata(&second.log_path).unwrap().len();
    flip(&second.log_path, len - 3);
    let log = open(dir.path(), cfg.clone(), &clock);
    let report = log.recovery_report().clone();
    let kept = log.log_end_offset();
    check!(kept < segs[2].base_offset);
    check!(report.records_removed() == 60 - kept as u64);
    check!(report.removals.len() == segs.len() - 1);
    check!(
        report.removals[1..]
            .iter()
            .all(|r| r.cause == LossCause::AfterCorruption)
    );
    check!(log.segments().len() == 2);
}

#[test]
fn a_clean_log_reports_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let log = open(dir.path(), config(), &clock);
    fill(&log, 5);
    log.close().unwrap();
    drop(log);
    let log = open(dir.path(), config(), &clock);
    check!(log.recovery_report().removals.is_empty());
    check!(log.recovery_report().clean_start);
    drop(log); // crash right after a clean start: nothing to cut either
    let log = open(dir.path(), config(), &clock);
    check!(log.recovery_report().removals.is_empty());
    check!(log.log_end_offset() == 5);
}
