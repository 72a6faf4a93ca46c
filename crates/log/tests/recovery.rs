//! Crash recovery: torn tails at every byte, corrupt indexes, clean start.

mod common;

use {
    assert2::check,
    common::*,
    krabka_ids::LeaderEpoch,
    krabka_log::{LogConfig, ManualClock},
    std::{fs::OpenOptions, sync::Arc},
};

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1 << 20,
        index_interval_bytes: 100,
        ..small_config()
    }
}

#[test]
fn tail_cut_at_every_byte_of_the_last_batch() {
    let src = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let log = open(src.path(), config(), &clock);
    for i in 0..10 {
        log.append_as_leader(batch(2, 30, i), LeaderEpoch(0))
            .unwrap();
    }
    let before_last = log.size_bytes();
    log.flush().unwrap();
    log.append_as_leader(batch(3, 50, 99), LeaderEpoch(0))
        .unwrap();
    let full = log.size_bytes();
    drop(log); // crash: no clean-shutdown marker
    let seg = format!("{:020}.log", 0);
    for cut in before_last..full {
        let dir = tempfile::tempdir().unwrap();
        for entry in std::fs::read_dir(src.path()).unwrap() {
            let e = entry.unwrap();
            std::fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
        }
        OpenOptions::new()
            .write(true)
            .open(dir.path().join(&seg))
            .unwrap()
            .set_len(cut)
            .unwrap();
        let log = open(dir.path(), config(), &clock);
        check!(log.log_end_offset() == 20, "cut at {cut}");
        check!(log.size_bytes() == before_last);
        let offsets: Vec<i64> = read_all(&log, 0).into_iter().map(|(o, _)| o).collect();
        check!(offsets == (0..20).collect::<Vec<_>>());
        // The log keeps working after recovery.
        check!(
            log.append_as_leader(batch(1, 5, 0), LeaderEpoch(0))
                .unwrap()
                .first_offset
                == 20
        );
    }
}

#[test]
fn corrupt_byte_in_tail_truncates_from_there() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let log = open(dir.path(), config(), &clock);
    let mut ends = Vec::new();
    for i in 0..10 {
        log.append_as_leader(batch(1, 30, i), LeaderEpoch(0))
            .unwrap();
        ends.push(log.size_bytes());
    }
    drop(log);
    // Flip a byte inside batch 6 (0-based): batches 0..6 survive.
    let path = dir.path().join(format!("{:020}.log", 0));
    let mut raw = std::fs::read(&path).unwrap();
    raw[ends[5] as usize + 40] ^= 0x55;
    std::fs::write(&path, raw).unwrap();
    let log = open(dir.path(), config(), &clock);
    check!(log.log_end_offset() == 6);
    check!(log.size_bytes() == ends[5]);
}

#[test]
fn flushed_batches_survive_and_recovery_point_limits_the_scan() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let cfg = LogConfig {
        segment_bytes: 2048,
        ..config()
    };
    let log = open(dir.path(), cfg.clone(), &clock);
    for i in 0..30 {
        log.append_as_leader(batch(1, 100, i), LeaderEpoch(0))
            .unwrap();
    }
    log.flush().unwrap();
    // As the broker does after a roll: the recovery point is persisted.
    check!(log.flush_rolled().unwrap());
    let segs = log.segments();
    check!(segs.len() > 2);
    drop(log);
    // Corrupt a byte in an early (pre-recovery-point) segment's data: a
    // trusted segment is not re-validated, so nothing is truncated.
    let first = &segs[0];
    let mut raw = std::fs::read(&first.log_path).unwrap();
    let n = raw.len();
    raw[n - 5] ^= 0x01;
    std::fs::write(&first.log_path, raw).unwrap();
    let log = open(dir.path(), cfg, &clock);
    check!(log.log_end_offset() == 30);
}

#[test]
fn corrupt_indexes_are_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let cfg = LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 64,
        ..config()
    };
    let log = open(dir.path(), cfg.clone(), &clock);
    for i in 0..40 {
        log.append_as_leader(batch(1, 100, 1000 + i), LeaderEpoch(0))
            .unwrap();
    }
    let expected = read_all(&log, 0)
        .into_iter()
        .map(|(o, _)| o)
        .collect::<Vec<_>>();
    let segs = log.segments();
    let good_index = std::fs::read(&segs[0].offset_index_path).unwrap();
    let good_time = std::fs::read(&segs[0].time_index_path).unwrap();
    log.close().unwrap();
    // Garbage in a closed segment's offset index, truncated time index.
    let mut bad = good_index.clone();
    bad[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
    std::fs::write(&segs[0].offset_index_path, &bad).unwrap();
    std::fs::write(&segs[0].time_index_path, &good_time[..5]).unwrap();
    // Delete the second segment's index entirely.
    std::fs::remove_file(&segs[1].offset_index_path).unwrap();
    let log = open(dir.path(), cfg, &clock);
    check!(std::fs::read(&segs[0].offset_index_path).unwrap() == good_index);
    check!(std::fs::read(&segs[0].time_index_path).unwrap() == good_time);
    check!(
        read_all(&log, 0)
            .into_iter()
            .map(|(o, _)| o)
            .collect::<Vec<_>>()
            == expected
    );
    for (i, o) in expected.iter().enumerate() {
        let r = log.read(*o, 1, i64::MAX, true).unwrap();
        let h = krabka_log::batch::BatchHeader::parse(&r.records).unwrap();
        check!(h.base_offset == *o, "offset {i}");
    }
}

#[test]
fn clean_shutdown_marker_and_unclean_index_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let log = open(dir.path(), config(), &clock);
    for i in 0..20 {
        log.append_as_leader(batch(1, 100, i), LeaderEpoch(0))
            .unwrap();
    }
    let idx_path = log.segments()[0].offset_index_path.clone();
    let entries_before = std::fs::read(&idx_path).unwrap();
    log.close().unwrap();
    check!(dir.path().join(".kafka_cleanshutdown").exists());
    let trimmed = std::fs::read(&idx_path).unwrap();
    check!(trimmed.len() < entries_before.len());
    check!(!trimmed.is_empty() && trimmed.chunks(8).all(|c| c != [0u8; 8]));
    let log = open(dir.path(), config(), &clock);
    check!(!dir.path().join(".kafka_cleanshutdown").exists());
    check!(log.log_end_offset() == 20);
    log.append_as_leader(batch(1, 100, 0), LeaderEpoch(0))
        .unwrap();
    drop(log); // unclean: the preallocated index is rebuilt
    let log = open(dir.path(), config(), &clock);
    check!(log.log_end_offset() == 21);
    check!(read_all(&log, 0).len() == 21);
}

#[test]
fn torn_index_and_misleading_last_entry_are_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let cfg = LogConfig {
        index_interval_bytes: 64,
        ..config()
    };
    let log = open(dir.path(), cfg.clone(), &clock);
    for i in 0..30 {
        log.append_as_leader(batch(2, 50, i), LeaderEpoch(0))
            .unwrap();
    }
    let idx = log.segments()[0].offset_index_path.clone();
    log.close().unwrap();
    let good = std::fs::read(&idx).unwrap();
    // A partial trailing entry.
    std::fs::write(&idx, [&good[..], &[0u8, 1, 2][..]].concat()).unwrap();
    let log = open(dir.path(), cfg.clone(), &clock);
    check!(std::fs::read(&idx).unwrap()[..good.len()] == good[..]);
    check!(log.log_end_offset() == 60);
    log.close().unwrap();
    // Last entry names the wrong offset for its position (positions still valid).
    let mut bad = std::fs::read(&idx).unwrap();
    bad.truncate(good.len());
    let n = bad.len();
    let rel = u32::from_be_bytes(bad[n - 8..n - 4].try_into().unwrap());
    bad[n - 8..n - 4].copy_from_slice(&(rel + 1).to_be_bytes());
    std::fs::write(&idx, &bad).unwrap();
    let log = open(dir.path(), cfg, &clock);
    check!(std::fs::read(&idx).unwrap()[..good.len()] == good[..]);
    for o in 0..60 {
        let r = log.read(o, 1, i64::MAX, true).unwrap();
        let h = krabka_log::batch::BatchHeader::parse(&r.records).unwrap();
        check!(h.base_offset <= o && o <= h.last_offset());
    }
}

#[test]
fn log_is_send_and_sync() {
    fn assert<T: Send + Sync>() {}
    assert::<krabka_log::Log>();
    assert::<krabka_log::LogCleaner>();
}

mod fuzz {
    use {super::*, proptest::prelude::*};

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
        /// Garbage written anywhere in the last segment or its indexes never
        /// panics the open, and every batch wholly before the damage survives.
        #[test]
        fn random_damage_never_panics_or_loses_earlier_batches(
            at_frac in 0.0f64..1.0,
            garbage in proptest::collection::vec(any::<u8>(), 1..200),
            target in 0usize..3,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let clock = Arc::new(ManualClock::new(0));
            let log = open(dir.path(), config(), &clock);
            let mut ends = vec![0u64];
            for i in 0..20 {
                log.append_as_leader(batch(1 + i % 3, 40, i as i64), LeaderEpoch(0)).unwrap();
                ends.push(log.size_bytes());
            }
            let seg = log.segments().pop().unwrap();
            drop(log);
            let path = [&seg.log_path, &seg.offset_index_path, &seg.time_index_path][target].clone();
            let mut raw = std::fs::read(&path).unwrap();
            let at = ((raw.len() as f64) * at_frac) as usize;
            for (i, b) in garbage.iter().enumerate() {
                if at + i < raw.len() { raw[at + i] = *b; } else { raw.push(*b); }
            }
            std::fs::write(&path, &raw).unwrap();
            let log = open(dir.path(), config(), &clock);
            let intact = if target == 0 { ends.iter().filter(|e| **e <= at as u64).count() - 1 } else { 20 };
            let batches: Vec<_> = read_all(&log, 0).into_iter().map(|(o, _)| o).collect();
            // Batches are 1..=3 records: count whole batches via offsets.
            let mut offsets = 0;
            for i in 0..intact { offsets += 1 + i % 3; }
            prop_assert!(batches.len() >= offsets);
            // A batch's base offset is outside its CRC (as in Kafka, whose
            // recovery takes it too): garbage there that only raises it
            // leaves a valid batch at a higher offset. Everything before
            // the damage is kept, in order, and offsets only rise; when no
            // base offset was touched they are the original run.
            let hit_base_offset = target == 0
                && ends[..20].iter().any(|&start| {
                    (start..start + 8).any(|b| (at as u64..(at + garbage.len()) as u64).contains(&b))
                });
            if hit_base_offset {
                prop_assert!(batches.iter().take(offsets).copied().eq(0..offsets as i64));
                prop_assert!(batches.windows(2).all(|w| w[0] < w[1]));
            } else {
                prop_assert!(batches.iter().copied().eq(0..batches.len() as i64));
            }
        }
    }
}
