//! Roll, index preallocation/trimming, timestamp lookups, retention, log start offset.

mod common;

use {
    assert2::check,
    common::*,
    krabka_ids::LeaderEpoch,
    krabka_log::{CleanupPolicy, LogConfig, ManualClock},
    std::sync::Arc,
};

fn file_len(dir: &std::path::Path, base: i64, suffix: &str) -> u64 {
    std::fs::metadata(dir.join(format!("{base:020}{suffix}")))
        .unwrap()
        .len()
}

#[test]
fn roll_by_size_preallocates_and_trims_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let log = open(dir.path(), small_config(), &clock);
    // Active segment's indexes are preallocated to segment.index.bytes (rounded to entries).
    check!(file_len(dir.path(), 0, ".index") == 1024);
    check!(file_len(dir.path(), 0, ".timeindex") == 1020);
    for i in 0..40 {
        log.append_as_leader(batch(1, 200, i), LeaderEpoch(0))
            .unwrap();
    }
    let segs = log.segments();
    check!(segs.len() > 2);
    for s in &segs[..segs.len() - 1] {
        check!(s.size_bytes <= 4096);
        // Closed segment: indexes trimmed to their entries.
        let idx = std::fs::metadata(&s.offset_index_path).unwrap().len();
        let tidx = std::fs::metadata(&s.time_index_path).unwrap().len();
        check!(idx % 8 == 0 && idx < 1024 && idx > 0);
        check!(tidx % 12 == 0 && tidx < 1020 && tidx > 0);
        // A snapshot is written at each roll.
        check!(
            dir.path()
                .join(format!("{:020}.snapshot", s.end_offset))
                .exists()
        );
    }
    let active = segs.last().unwrap();
    check!(std::fs::metadata(&active.offset_index_path).unwrap().len() == 1024);
    log.close().unwrap();
    check!(std::fs::metadata(&active.offset_index_path).unwrap().len() < 1024);
}

#[test]
fn roll_by_time_and_by_full_index() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000_000));
    let config = LogConfig {
        segment_ms: 1000,
        segment_bytes: 1 << 30,
        ..small_config()
    };
    let log = open(dir.path(), config, &clock);
    log.append_as_leader(batch(1, 10, 1_000_000), LeaderEpoch(0))
        .unwrap();
    log.maybe_roll().unwrap();
    check!(log.segments().len() == 1);
    // A batch whose timestamp is segment.ms past the first batch rolls on append.
    log.append_as_leader(batch(1, 10, 1_002_000), LeaderEpoch(0))
        .unwrap();
    check!(log.segments().len() == 2);
    check!(log.segments()[1].base_offset == 1);
    // maybe_roll rolls by the clock.
    clock.advance(5_000);
    log.maybe_roll().unwrap();
    check!(log.segments().len() == 3);

    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 1 << 30,
        segment_index_bytes: 16,
        index_interval_bytes: 1,
        ..small_config()
    };
    let log = open(dir.path(), config, &clock);
    for i in 0..10 {
        log.append_as_leader(batch(1, 10, i), LeaderEpoch(0))
            .unwrap();
    }
    // Two offset-index entries fit; one time-index entry: roll every few batches.
    check!(log.segments().len() >= 3);
}

#[test]
fn timestamp_lookups_match_linear_scan() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let log = open(dir.path(), small_config(), &clock);
    // Timestamps not monotonic across batches; several records per batch.
    let mut recs = Vec::new();
    for i in 0..60i64 {
        let ts = 1000 + (i * 37) % 500 + i * 10;
        let b = encode(
            (0..3).map(|j| record(None, Some(b"v"), ts + j)).collect(),
            None,
            false,
            kafka_protocol::records::Compression::None,
        );
        let info = log.append_as_leader(b, LeaderEpoch(3)).unwrap();
        for j in 0..3 {
            recs.push((info.first_offset + j, ts + j));
        }
    }
    for target in [0, 999, 1000, 1001, 1200, 1333, 1500, 1800, 2000, 2100, 5000] {
        let expected = recs.iter().find(|(_, ts)| *ts >= target).copied();
        let got = log
            .offset_for_timestamp(target)
            .unwrap()
            .map(|t| (t.offset, t.timestamp));
        check!(got == expected, "target {target}");
    }
    let max = recs.iter().map(|r| r.1).max().unwrap();
    let first_max = recs.iter().find(|r| r.1 == max).unwrap();
    let got = log.max_timestamp_offset().unwrap().unwrap();
    check!((got.offset, got.timestamp) == *first_max);
    check!(got.leader_epoch == LeaderEpoch(3));
    // Same after a clean restart (from the time index).
    log.close().unwrap();
    let log = open(dir.path(), small_config(), &clock);
    let got = log.max_timestamp_offset().unwrap().unwrap();
    check!((got.offset, got.timestamp) == *first_max);
    check!(
        log.offset_for_timestamp(1500).unwrap().map(|t| t.offset)
            == recs.iter().find(|r| r.1 >= 1500).map(|r| r.0)
    );
}

#[test]
fn log_append_time_is_stamped() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(777_000));
    let config = LogConfig {
        message_timestamp_type: krabka_log::TimestampType::LogAppendTime,
        ..small_config()
    };
    let log = open(dir.path(), config, &clock);
    let info = log
        .append_as_leader(batch(2, 10, 5), LeaderEpoch(0))
        .unwrap();
    check!(info.log_append_time == Some(777_000));
    let read = log.read(0, 1000, i64::MAX, true).unwrap();
    let h = krabka_log::batch::check_batch(&read.records).unwrap();
    check!(h.is_log_append_time());
    check!(h.max_timestamp == 777_000);
    let rs = krabka_log::batch::decode_records(&read.records).unwrap();
    check!(rs.iter().all(|r| r.timestamp == 777_000));
}

#[test]
fn retention_by_time_and_size_never_the_active_segment() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(10_000));
    let log = open(dir.path(), small_config(), &clock);
    for i in 0..40 {
        log.append_as_leader(batch(1, 200, 1_000 + i * 100), LeaderEpoch(0))
            .unwrap();
    }
    let before = log.segments();
    check!(before.len() >= 3);
    // Size: keep at most ~2 segments' worth.
    log.update_config(LogConfig {
        retention_bytes: Some(4096),
        ..small_config()
    });
    let deleted = log.apply_retention().unwrap();
    check!(deleted > 0);
    check!(log.size_bytes() >= 4096);
    let after = log.segments();
    check!(log.log_start_offset() == after[0].base_offset);
    check!(!before[0].log_path.exists());
    // Time: everything is older than 1 ms, but the active segment stays.
    log.update_config(LogConfig {
        retention_ms: Some(1),
        ..small_config()
    });
    clock.advance(1_000_000);
    log.apply_retention().unwrap();
    let left = log.segments();
    check!(left.len() == 1);
    check!(left[0].active);
    check!(log.log_start_offset() == left[0].base_offset);
    check!(log.read(0, 100, i64::MAX, true).is_err());
    // compact-only logs ignore time/size retention.
    log.update_config(LogConfig {
        retention_ms: Some(1),
        cleanup_policy: CleanupPolicy::Compact,
        ..small_config()
    });
    for i in 0..20 {
        let value = format!("{i:0200}");
        log.append_as_leader(keyed("k", Some(&value), i), LeaderEpoch(0))
            .unwrap();
    }
    check!(log.segments().len() > 1);
    check!(log.apply_retention().unwrap() == 0);
}

#[test]
fn advance_log_start_offset_is_persisted() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let log = open(dir.path(), small_config(), &clock);
    for i in 0..40 {
        log.append_as_leader(batch(1, 200, i), LeaderEpoch(0))
            .unwrap();
    }
    check!(log.advance_log_start_offset(17).unwrap() == 17);
    check!(log.advance_log_start_offset(5).unwrap() == 17, "never back");
    check!(log.advance_log_start_offset(41).is_err());
    check!(log.log_start_offset() == 17);
    check!(log.segments()[0].base_offset <= 17);
    check!(
        log.read(16, 100, i64::MAX, true)
            .unwrap_err()
            .kafka_error_code()
            == 1
    );
    let first = read_all(&log, 17);
    check!(first[0].0 == 17);
    drop(log); // unclean
    let log = open(dir.path(), small_config(), &clock);
    check!(log.log_start_offset() == 17);
    check!(log.log_end_offset() == 40);
}

#[test]
fn a_write_only_append_declines_what_waits_on_the_disk_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let log = open(dir.path(), small_config(), &clock);
    // The first append records leader epoch 0 in its checkpoint: declined.
    check!(
        log.try_append_as_leader(batch(1, 200, 0), LeaderEpoch(0))
            .unwrap()
            .is_none()
    );
    check!(log.log_end_offset() == 0);
    log.append_as_leader(batch(1, 200, 0), LeaderEpoch(0))
        .unwrap();
    // A plain write goes through, at the next offset, readable.
    let info = log
        .try_append_as_leader(batch(2, 200, 1), LeaderEpoch(0))
        .unwrap()
        .unwrap();
    check!((info.first_offset, info.last_offset) == (1, 2));
    check!(read_all(&log, 0).len() == 3);
    // An append that would fill the 4 KiB segment needs a roll: declined,
    // and neither the segments nor the offsets move.
    let before = log.segments().len();
    check!(
        log.try_append_as_leader(batch(1, 4000, 2), LeaderEpoch(0))
            .unwrap()
            .is_none()
    );
    check!(log.segments().len() == before);
    check!(log.log_end_offset() == 3);
    // A new epoch is declined too; the full append does all of it.
    check!(
        log.try_append_as_leader(batch(1, 10, 2), LeaderEpoch(1))
            .unwrap()
            .is_none()
    );
    log.append_as_leader(batch(1, 4000, 2), LeaderEpoch(0))
        .unwrap();
    check!(log.segments().len() == before + 1);

    // With flush.messages=2 the append that reaches the count is declined.
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        flush_messages: Some(2),
        ..small_config()
    };
    let log = open(dir.path(), config, &clock);
    log.append_as_leader(batch(1, 10, 0), LeaderEpoch(0))
        .unwrap();
    check!(
        log.try_append_as_leader(batch(1, 10, 0), LeaderEpoch(0))
            .unwrap()
            .is_none()
    );
    check!(log.log_end_offset() == 1);
}

#[test]
fn a_roll_leaves_its_flush_and_the_recovery_point_to_flush_rolled() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let log = open(dir.path(), small_config(), &clock);
    let point = || {
        krabka_log::checkpoint::read_offset(
            &dir.path().join(krabka_log::checkpoint::RECOVERY_POINT_FILE),
        )
        .unwrap()
    };
    let before = point();
    check!(!log.roll_flush_due());
    for i in 0..40 {
        log.append_as_leader(batch(1, 200, i), LeaderEpoch(0))
            .unwrap();
    }
    let segs = log.segments();
    check!(segs.len() > 2);
    // The rolls neither flushed nor moved the persisted recovery point.
    check!(log.roll_flush_due());
    check!(point() == before);
    // flush_rolled does, up to the active segment's base, once.
    check!(log.flush_rolled().unwrap());
    check!(point() == Some(segs.last().unwrap().base_offset));
    check!(!log.roll_flush_due());
    check!(!log.flush_rolled().unwrap());
}

#[test]
fn what_flush_rolled_covered_no_longer_counts_toward_flush_messages() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let config = LogConfig {
        flush_messages: Some(10),
        ..small_config()
    };
    let log = open(dir.path(), config, &clock);
    // Three records of 2.5 KiB: each of the last two rolls the 4 KiB
    // segment, so offsets 0 and 1 lie in closed segments.
    for i in 0..3 {
        log.append_as_leader(batch(1, 2500, i), LeaderEpoch(0))
            .unwrap();
    }
    check!(log.segments().len() == 3);
    check!(log.flush_rolled().unwrap());
    // One message is left unflushed (offset 2): write-only appends of one
    // record each are taken until the tenth would reach flush.messages.
    let mut taken = 0;
    while log
        .try_append_as_leader(batch(1, 10, 3 + taken), LeaderEpoch(0))
        .unwrap()
        .is_some()
    {
        taken += 1;
        assert!(
            taken <= 10,
            "flush.messages never declined a write-only append"
        );
    }
    check!(taken == 8);
    check!(log.segments().len() == 3);
}
