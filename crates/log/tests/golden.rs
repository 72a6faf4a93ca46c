//! Golden bytes: the `.log`, `.index` and `.timeindex` of a segment built
//! from kafka-protocol-encoded client batches are exactly what Kafka writes
//! (batches byte for byte with broker-assigned base offset and leader epoch,
//! index entries per Kafka's `LogSegment.append` rules), and a directory laid
//! out that way by Kafka opens and reads back.

mod common;

use {
    assert2::check,
    bytes::BytesMut,
    common::*,
    kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions},
    krabka_ids::LeaderEpoch,
    krabka_log::{LogConfig, ManualClock},
    std::sync::Arc,
};

fn records(first_offset: i64, ts: i64, leader_epoch: i32, compression: Compression) -> Vec<u8> {
    let recs: Vec<Record> = (0..3)
        .map(|j| {
            let mut r = record(
                Some(format!("key-{j}").as_bytes()),
                Some(format!("value-{ts}-{j}").as_bytes()),
                ts + j,
            );
            r.offset = first_offset + j;
            r.sequence = j as i32 - 1;
            r.partition_leader_epoch = leader_epoch;
            r
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        recs.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .unwrap();
    buf.to_vec()
}

fn be32(a: u32, b: u32) -> Vec<u8> {
    [a.to_be_bytes(), b.to_be_bytes()].concat()
}

#[test]
fn segment_and_index_bytes_are_kafkas() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000));
    let config = LogConfig {
        index_interval_bytes: 1,
        segment_ms: 10_000,
        ..LogConfig::default()
    };
    let log = open(dir.path(), config.clone(), &clock);
    let shapes = [
        (100, Compression::None),
        (300, Compression::Gzip),
        (200, Compression::Lz4),
    ];
    let mut expected_log = Vec::new();
    let mut sizes = Vec::new();
    for (i, (ts, codec)) in shapes.iter().enumerate() {
        // What the producer sends: base offset 0, no leader epoch.
        let client = records(0, *ts, -1, *codec);
        let info = log.append_as_leader(client.into(), LeaderEpoch(5)).unwrap();
        check!(info.first_offset == i as i64 * 3);
        let stored = records(i as i64 * 3, *ts, 5, *codec);
        sizes.push(stored.len() as u32);
        expected_log.extend_from_slice(&stored);
    }
    clock.advance(20_000);
    log.maybe_roll().unwrap(); // seals the segment: final time entry, indexes trimmed
    check!(log.segments().len() == 2);
    let base = dir.path().join(format!("{:020}", 0));
    check!(std::fs::read(base.with_extension("log")).unwrap() == expected_log);
    let expected_index = [be32(5, sizes[0]), be32(8, sizes[0] + sizes[1])].concat();
    check!(std::fs::read(base.with_extension("index")).unwrap() == expected_index);
    let expected_time = [302i64.to_be_bytes().to_vec(), 5u32.to_be_bytes().to_vec()].concat();
    check!(std::fs::read(base.with_extension("timeindex")).unwrap() == expected_time);
    check!(
        std::fs::read(base.with_extension("txnindex"))
            .unwrap()
            .is_empty()
    );
    check!(
        std::fs::read_to_string(dir.path().join("leader-epoch-checkpoint")).unwrap()
            == "0\n1\n5 0\n"
    );
    // The producer-state snapshot written at the roll: version 1, CRC, no producers.
    let snap = std::fs::read(dir.path().join(format!("{:020}.snapshot", 9))).unwrap();
    let body = 0i32.to_be_bytes();
    let mut want = 1i16.to_be_bytes().to_vec();
    want.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
    want.extend_from_slice(&body);
    check!(snap == want);

    // A partition directory laid out by Kafka (no Krabka files, no clean
    // shutdown marker in the partition dir) opens and reads back.
    let kafka_dir = tempfile::tempdir().unwrap();
    let kbase = kafka_dir.path().join(format!("{:020}", 0));
    std::fs::write(kbase.with_extension("log"), &expected_log).unwrap();
    std::fs::write(kbase.with_extension("index"), &expected_index).unwrap();
    std::fs::write(kbase.with_extension("timeindex"), &expected_time).unwrap();
    std::fs::write(
        kafka_dir.path().join("partition.metadata"),
        format!("version: 0\ntopic_id: {}\n", krabka_ids::kafka_uuid(TOPIC)),
    )
    .unwrap();
    std::fs::write(
        kafka_dir.path().join("leader-epoch-checkpoint"),
        "0\n1\n5 0\n",
    )
    .unwrap();
    let klog = open(kafka_dir.path(), config, &clock);
    check!(klog.log_end_offset() == 9);
    check!(klog.latest_epoch() == Some(LeaderEpoch(5)));
    let all = read_all(&klog, 0);
    check!(all.len() == 9);
    check!(all[4].1.value.as_deref() == Some(&b"value-300-1"[..]));
    check!(klog.offset_for_timestamp(250).unwrap().map(|t| t.offset) == Some(3));
    check!(std::fs::read(kbase.with_extension("index")).unwrap()[..16] == expected_index[..]);
}
