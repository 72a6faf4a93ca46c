//! Offset-index lookups against a linear scan, for random batch shapes.

mod common;

use {
    common::*,
    krabka_ids::LeaderEpoch,
    krabka_log::{Log, LogConfig, ManualClock, batch::BatchScan},
    proptest::prelude::*,
    std::sync::Arc,
};

fn check_reads(log: &Log, batches: &[(i64, i64)], max_bytes: usize) -> Result<(), TestCaseError> {
    for o in 0..log.log_end_offset() {
        let want = batches
            .iter()
            .position(|(f, l)| *f <= o && o <= *l)
            .unwrap();
        let r = log.read(o, max_bytes, i64::MAX, true).unwrap();
        let got: Vec<_> = BatchScan::new(&r.records, true)
            .map(|(_, h)| (h.base_offset, h.last_offset()))
            .collect();
        prop_assert!(!got.is_empty());
        // Consecutive batches from the one holding `o`, within max_bytes unless a single batch.
        prop_assert!(got.len() == 1 || r.records.len() <= max_bytes);
        for (k, g) in got.iter().enumerate() {
            prop_assert_eq!(*g, batches[want + k]);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]
    #[test]
    fn read_by_offset_matches_linear_scan(
        shapes in proptest::collection::vec((1usize..6, 1usize..300), 1..60),
        interval in 1u64..2000,
        segment_bytes in 2000u64..8000,
        max_bytes in 1usize..3000,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(0));
        let config = LogConfig { index_interval_bytes: interval, segment_bytes, segment_index_bytes: 4096, ..small_config() };
        let log = open(dir.path(), config.clone(), &clock);
        let mut batches = Vec::new();
        for (i, (n, size)) in shapes.iter().enumerate() {
            let info = log.append_as_leader(batch(*n, *size, i as i64), LeaderEpoch(0)).unwrap();
            batches.push((info.first_offset, info.last_offset));
        }
        check_reads(&log, &batches, max_bytes)?;
        log.close().unwrap();
        let log = open(dir.path(), config.clone(), &clock);
        check_reads(&log, &batches, max_bytes)?;
        drop(log);
        // And after an unclean restart (indexes rebuilt from the recovery point).
        let log = open(dir.path(), config, &clock);
        check_reads(&log, &batches, max_bytes)?;
    }
}
