//! Append / read round trips, offsets, persistence of the public state.

mod common;

use {
    assert2::check,
    common::*,
    krabka_ids::LeaderEpoch,
    krabka_log::{LogConfig, LogError, ManualClock},
    std::sync::Arc,
};

#[test]
fn append_read_round_trip_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let pdir = dir.path().join("t-0");
    let clock = Arc::new(ManualClock::new(1_000));
    let log = open(&pdir, small_config(), &clock);
    let mut expected = Vec::new();
    for i in 0..50 {
        let b = batch(3, 40, 1_000 + i);
        let info = log.append_as_leader(b, LeaderEpoch(1)).unwrap();
        check!(info.first_offset == i * 3);
        check!(info.last_offset == i * 3 + 2);
        check!(info.record_count == 3);
        check!(!info.duplicate);
        expected.extend([i * 3, i * 3 + 1, i * 3 + 2]);
    }
    check!(log.log_end_offset() == 150);
    check!(log.segments().len() > 1, "small segments roll");
    let got: Vec<i64> = read_all(&log, 0).into_iter().map(|(o, _)| o).collect();
    check!(got == expected);
    // Reads from the middle of a batch start at that batch.
    let info = log.read(4, 10_000, i64::MAX, true).unwrap();
    let h = krabka_log::batch::BatchHeader::parse(&info.records).unwrap();
    check!(h.base_offset == 3);
    check!(h.partition_leader_epoch == 1);
    // max_offset bounds the read.
    let info = log.read(0, 1 << 20, 6, true).unwrap();
    let offsets: Vec<i64> = krabka_log::batch::BatchScan::new(&info.records, true)
        .map(|(_, h)| h.base_offset)
        .collect();
    check!(offsets == vec![0, 3]);
    check!(matches!(
        log.read(151, 100, i64::MAX, true),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    check!(
        log.read(150, 100, i64::MAX, true)
            .unwrap()
            .records
            .is_empty()
    );
    log.close().unwrap();
    check!(
        log.append_as_leader(batch(1, 1, 0), LeaderEpoch(1))
            .is_err()
    );

    let text = std::fs::read_to_string(pdir.join("partition.metadata")).unwrap();
    check!(text == format!("version: 0\ntopic_id: {}\n", krabka_ids::kafka_uuid(TOPIC)));
    check!(std::fs::read_to_string(pdir.join("leader-epoch-checkpoint")).unwrap() == "0\n1\n1 0\n");
    check!(pdir.join("00000000000000000000.log").exists());

    let log = open(&pdir, small_config(), &clock);
    check!(log.log_end_offset() == 150);
    let got: Vec<i64> = read_all(&log, 0).into_iter().map(|(o, _)| o).collect();
    check!(got == expected);
    let info = log
        .append_as_leader(batch(1, 1, 5_000), LeaderEpoch(2))
        .unwrap();
    check!(info.first_offset == 150);
    check!(log.end_offset_for_epoch(LeaderEpoch(1)) == Some((LeaderEpoch(1), 150)));
}

#[test]
fn refusals_have_kafka_codes() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let log = open(
        dir.path(),
        LogConfig {
            max_message_bytes: 500,
            ..small_config()
        },
        &clock,
    );
    let good = batch(1, 10, 0);
    let mut bad_crc = good.to_vec();
    let n = bad_crc.len();
    bad_crc[n - 1] ^= 0xff;
    check!(
        log.append_as_leader(bad_crc.into(), LeaderEpoch(0))
            .unwrap_err()
            .kafka_error_code()
            == 2
    );
    let mut bad_magic = good.to_vec();
    bad_magic[16] = 1;
    check!(
        log.append_as_leader(bad_magic.into(), LeaderEpoch(0))
            .unwrap_err()
            .kafka_error_code()
            == 2
    );
    let cut = good.slice(..good.len() - 3);
    check!(
        log.append_as_leader(cut, LeaderEpoch(0))
            .unwrap_err()
            .kafka_error_code()
            == 2
    );
    // Record count not matching lastOffsetDelta (CRC recomputed so only that is wrong).
    let mut bad_count = good.to_vec();
    bad_count[57..61].copy_from_slice(&5i32.to_be_bytes());
    krabka_log::batch::recompute_crc(&mut bad_count);
    check!(
        log.append_as_leader(bad_count.into(), LeaderEpoch(0))
            .unwrap_err()
            .kafka_error_code()
            == 87
    );
    check!(
        log.append_as_leader(batch(1, 600, 0), LeaderEpoch(0))
            .unwrap_err()
            .kafka_error_code()
            == 10
    );
    check!(
        log.append_as_leader(bytes::Bytes::new(), LeaderEpoch(0))
            .unwrap_err()
            .kafka_error_code()
            == 87
    );
    check!(log.log_end_offset() == 0);
    check!(
        log.append_as_leader(good, LeaderEpoch(0))
            .unwrap()
            .first_offset
            == 0
    );
}

#[test]
fn topic_id_mismatch_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    drop(open(dir.path(), small_config(), &clock));
    let err = krabka_log::Log::open(dir.path(), uuid::Uuid::from_u128(1), small_config(), clock)
        .unwrap_err();
    check!(err.kafka_error_code() == 103);
}

#[test]
fn readers_see_whole_batches_while_appending() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let log = Arc::new(open(
        dir.path(),
        LogConfig {
            segment_bytes: 64 * 1024,
            ..small_config()
        },
        &clock,
    ));
    let writer = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            for i in 0..1500 {
                log.append_as_leader(batch(1 + i % 4, 100, i as i64), LeaderEpoch(0))
                    .unwrap();
            }
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                let mut reads = 0;
                let mut o = 0i64;
                while reads < 3000 {
                    let leo = log.log_end_offset();
                    if leo == 0 {
                        continue;
                    }
                    o = (o * 31 + 7 + t) % leo;
                    let r = log.read(o, 2000, i64::MAX, true).unwrap();
                    let mut next = None;
                    let scan = krabka_log::batch::BatchScan::new(&r.records, true);
                    for (_, h) in scan {
                        if let Some(n) = next {
                            assert_eq!(h.base_offset, n);
                        } else {
                            assert!(h.base_offset <= o && o <= h.last_offset());
                        }
                        next = Some(h.next_offset());
                    }
                    assert!(
                        next.is_some(),
                        "offset {o} below leo {leo} returned nothing"
                    );
                    reads += 1;
                }
            })
        })
        .collect();
    writer.join().unwrap();
    for r in readers {
        r.join().unwrap();
    }
}
