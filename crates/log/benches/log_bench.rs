//! Append / read / recovery throughput of the partition log, next to a plain
//! sequential `write` of the same bytes to the same disk.
//!
//! Run: `cargo bench -p krabka-log --bench log_bench` (env `KRABKA_BENCH_MB`
//! sets the no-fsync volume, default 1024; `KRABKA_BENCH_FSYNC_MB` the
//! fsync-per-batch volume, default 32). Files go under Cargo's target tmp dir.

use {
    bytes::{Bytes, BytesMut},
    kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    },
    krabka_ids::LeaderEpoch,
    krabka_log::{Log, LogConfig, SystemClock},
    std::{
        fs::File,
        io::Write,
        path::{Path, PathBuf},
        sync::Arc,
        time::Instant,
    },
    uuid::Uuid,
};

const RECORD: usize = 1024;
const PER_BATCH: usize = 16;

fn batch() -> Bytes {
    let value = Bytes::from(vec![b'x'; RECORD]);
    let recs: Vec<Record> = (0..PER_BATCH)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: i as i32 - 1,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(value.clone()),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        recs.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Throughput in MB/s: (until the last write returns, including a final fsync).
type Rate = (f64, f64);

fn plain_write(path: &Path, batch: &Bytes, n: usize, fsync: bool) -> Rate {
    let mut f = File::create(path).unwrap();
    let start = Instant::now();
    for _ in 0..n {
        f.write_all(batch).unwrap();
        if fsync {
            f.sync_data().unwrap();
        }
    }
    let buffered = start.elapsed().as_secs_f64();
    f.sync_data().unwrap();
    let synced = start.elapsed().as_secs_f64();
    drop(f);
    std::fs::remove_file(path).unwrap();
    let size = mb((batch.len() * n) as u64);
    (size / buffered, size / synced)
}

fn log_append(dir: &Path, batch: &Bytes, n: usize, fsync: bool) -> (Rate, Log) {
    let _ = std::fs::remove_dir_all(dir);
    let config = LogConfig {
        flush_messages: fsync.then_some(1),
        ..LogConfig::default()
    };
    let log = Log::open(dir, Uuid::from_u128(7), config, Arc::new(SystemClock)).unwrap();
    let start = Instant::now();
    for _ in 0..n {
        log.append_as_leader(batch.clone(), LeaderEpoch(0)).unwrap();
    }
    let buffered = start.elapsed().as_secs_f64();
    log.flush().unwrap();
    let synced = start.elapsed().as_secs_f64();
    let size = mb((batch.len() * n) as u64);
    ((size / buffered, size / synced), log)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` probes with --list
    }
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("krabka-log-bench");
    std::fs::create_dir_all(&root).unwrap();
    let batch = batch();
    let total_mb = env_usize("KRABKA_BENCH_MB", 1024);
    let fsync_mb = env_usize("KRABKA_BENCH_FSYNC_MB", 32);
    let n = total_mb * 1024 * 1024 / batch.len();
    let n_sync = fsync_mb * 1024 * 1024 / batch.len();
    println!(
        "batch: {} records x {} B = {} B per batch",
        PER_BATCH,
        RECORD,
        batch.len()
    );

    // Alternate plain and log rounds so page-cache writeback hits both alike.
    let rounds = env_usize("KRABKA_BENCH_ROUNDS", 3);
    let (mut pb, mut ps, mut lb, mut ls) = (vec![], vec![], vec![], vec![]);
    let mut kept = None;
    for round in 0..rounds {
        let p = plain_write(&root.join("plain.bin"), &batch, n, false);
        let (l, log) = log_append(&root.join("t-0"), &batch, n, false);
        println!(
            "  round {round}: plain {:7.1} / {:7.1} MB/s, log {:7.1} / {:7.1} MB/s (buffered / incl. final fsync)",
            p.0, p.1, l.0, l.1
        );
        pb.push(p.0);
        ps.push(p.1);
        lb.push(l.0);
        ls.push(l.1);
        if round + 1 == rounds {
            kept = Some(log);
        } else {
            let dir = log.dir().to_path_buf();
            drop(log);
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    let log = kept.unwrap();
    let (pb, ps, lb, ls) = (median(pb), median(ps), median(lb), median(ls));
    println!(
        "append, no fsync ({total_mb} MiB, median of {rounds}): buffered: log {lb:.1} MB/s vs plain {pb:.1} MB/s, ratio {:.2}",
        lb / pb
    );
    println!(
        "append, no fsync ({total_mb} MiB, median of {rounds}): incl. final fsync: log {ls:.1} MB/s vs plain {ps:.1} MB/s, ratio {:.2}",
        ls / ps
    );

    // Read back sequentially, 1 MiB fetches.
    let start = Instant::now();
    let mut offset = 0;
    let mut bytes = 0u64;
    while offset < log.log_end_offset() {
        let r = log.read(offset, 1 << 20, i64::MAX, true).unwrap();
        bytes += r.records.len() as u64;
        let last = krabka_log::batch::BatchScan::new(&r.records, false)
            .last()
            .unwrap()
            .1;
        offset = last.next_offset();
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "read, 1 MiB fetches ({:.0} MiB): {:8.1} MB/s",
        mb(bytes),
        mb(bytes) / secs
    );

    // Recovery of the log just written.
    let dir = log.dir().to_path_buf();
    let size = log.size_bytes();
    log.close().unwrap();
    drop(log);
    let start = Instant::now();
    let log = Log::open(
        &dir,
        Uuid::from_u128(7),
        LogConfig::default(),
        Arc::new(SystemClock),
    )
    .unwrap();
    let clean = start.elapsed();
    check_end(&log, n);
    drop(log); // unclean: no marker
    // Worst case: recovery point lost, every batch is validated.
    std::fs::remove_file(dir.join("krabka-recovery-point")).unwrap();
    let start = Instant::now();
    let log = Log::open(
        &dir,
        Uuid::from_u128(7),
        LogConfig::default(),
        Arc::new(SystemClock),
    )
    .unwrap();
    let unclean = start.elapsed();
    check_end(&log, n);
    println!(
        "recovery of {:.0} MiB: clean {:.1} ms, unclean from offset 0 (CRC of every batch) {:.1} ms",
        mb(size),
        clean.as_secs_f64() * 1e3,
        unclean.as_secs_f64() * 1e3
    );
    drop(log);
    let _ = std::fs::remove_dir_all(&dir);

    let plain_sync = plain_write(&root.join("plain.bin"), &batch, n_sync, true).1;
    let (append_sync, log) = log_append(&root.join("t-1"), &batch, n_sync, true);
    let append_sync = append_sync.1;
    println!(
        "append, fsync per batch ({fsync_mb} MiB): log {append_sync:.1} MB/s vs plain write+fdatasync {plain_sync:.1} MB/s, ratio {:.2}",
        append_sync / plain_sync
    );
    drop(log);
    let _ = std::fs::remove_dir_all(root);
}

fn check_end(log: &Log, n: usize) {
    assert_eq!(log.log_end_offset(), (n * PER_BATCH) as i64);
}
