//! `LocalTieredStorage` copy and ranged-fetch throughput next to a plain
//! file copy / read of the same bytes, and `RemoteIndexCache` hit latency.
//!
//! The plain baselines do the same durability work (fsync of the copy) so
//! the ratio shows what the staged, atomic copy costs on top.

use {
    bytes::Bytes,
    criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main},
    krabka_ids::LeaderEpoch,
    krabka_remote_storage::{
        BytePosition, IndexType, LocalTieredStorage, LogSegmentData, RemoteIndexCache,
        RemoteLogSegmentDetails, RemoteLogSegmentId, RemoteLogSegmentMetadata,
        RemoteLogSegmentState, RemoteStorageManager, TopicIdPartition,
    },
    std::{
        collections::BTreeMap,
        fs::{self, File},
        hint::black_box,
        io::{Read, Seek, SeekFrom},
        path::Path,
        sync::Arc,
        time::Duration,
    },
    uuid::Uuid,
};

const SEGMENT_BYTES: usize = 64 * 1024 * 1024;
const RANGE_BYTES: u32 = 1024 * 1024;

fn metadata(start: i64) -> RemoteLogSegmentMetadata {
    RemoteLogSegmentMetadata::new(
        RemoteLogSegmentId::new(
            TopicIdPartition::new(Uuid::from_u128(7), "bench", 0),
            Uuid::new_v4(),
        ),
        start,
        start + 999,
        0,
        1,
        0,
        RemoteLogSegmentDetails::new(
            i32::try_from(SEGMENT_BYTES).unwrap(),
            RemoteLogSegmentState::CopySegmentStarted,
            BTreeMap::from([(LeaderEpoch(0), start)]),
        ),
    )
    .unwrap()
}

fn segment(dir: &Path) -> LogSegmentData {
    // Incompressible-looking content; the tier does not look at it.
    let log: Vec<u8> = (0..SEGMENT_BYTES)
        .map(|n| (n as u32).wrapping_mul(2_654_435_761) as u8)
        .collect();
    let log_path = dir.join("00000000000000000000.log");
    fs::write(&log_path, log).unwrap();
    let index: Vec<u8> = (0u32..8192)
        .flat_map(|n| [(n * 100).to_be_bytes(), (n * 8192).to_be_bytes()].concat())
        .collect();
    let index_path = dir.join("00000000000000000000.index");
    fs::write(&index_path, index).unwrap();
    let time_path = dir.join("00000000000000000000.timeindex");
    fs::write(&time_path, vec![0u8; 12 * 1024]).unwrap();
    LogSegmentData {
        log_segment: log_path,
        offset_index: index_path,
        time_index: time_path,
        transaction_index: None,
        producer_snapshot_index: None,
        leader_epoch_index: Bytes::from_static(b"0\n1\n0 0\n"),
    }
}

fn copy(c: &mut Criterion) {
    let source = tempfile::tempdir().unwrap();
    let data = segment(source.path());
    let mut group = c.benchmark_group("copy_64MiB_segment");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(8));
    group.throughput(Throughput::Bytes(SEGMENT_BYTES as u64));

    group.bench_function("plain_fs_copy_fsync", |b| {
        let target = tempfile::tempdir().unwrap();
        let to = target.path().join("copy.log");
        b.iter(|| {
            fs::copy(&data.log_segment, &to).unwrap();
            File::options()
                .write(true)
                .open(&to)
                .unwrap()
                .sync_all()
                .unwrap();
        });
    });
    group.bench_function("local_tiered_storage", |b| {
        let root = tempfile::tempdir().unwrap();
        let storage = LocalTieredStorage::new(root.path().to_path_buf());
        let mut start = 0;
        b.iter(|| {
            let metadata = metadata(start);
            start += 1000;
            storage.copy_log_segment_data(&metadata, &data).unwrap();
            // Keep the disk footprint flat across iterations.
            storage.delete_log_segment_data(&metadata).unwrap();
        });
    });
    group.finish();
}

fn ranged_fetch(c: &mut Criterion) {
    let source = tempfile::tempdir().unwrap();
    let data = segment(source.path());
    let root = tempfile::tempdir().unwrap();
    let storage = LocalTieredStorage::new(root.path().to_path_buf());
    let metadata = metadata(0);
    storage.copy_log_segment_data(&metadata, &data).unwrap();
    let positions: Vec<u32> = (0..64u32)
        .map(|n| (n * 7919 % 63) * RANGE_BYTES + n * 13)
        .collect();

    let mut group = c.benchmark_group("ranged_fetch_1MiB");
    group.throughput(Throughput::Bytes(u64::from(RANGE_BYTES)));
    group.bench_function("plain_file_seek_read", |b| {
        let mut n = 0;
        b.iter(|| {
            let start = positions[n % positions.len()];
            n += 1;
            let mut file = File::open(&data.log_segment).unwrap();
            let mut buf = vec![0u8; RANGE_BYTES as usize];
            file.seek(SeekFrom::Start(u64::from(start))).unwrap();
            file.read_exact(&mut buf).unwrap();
            black_box(buf);
        });
    });
    group.bench_function("local_tiered_storage", |b| {
        let mut n = 0;
        b.iter(|| {
            let start = positions[n % positions.len()];
            n += 1;
            let end = BytePosition(start + RANGE_BYTES - 1);
            black_box(
                storage
                    .fetch_log_segment(&metadata, BytePosition(start), Some(end))
                    .unwrap(),
            );
        });
    });
    group.finish();
}

fn index_cache_hit(c: &mut Criterion) {
    let source = tempfile::tempdir().unwrap();
    let data = segment(source.path());
    let root = tempfile::tempdir().unwrap();
    let storage = Arc::new(LocalTieredStorage::new(root.path().to_path_buf()));
    let segments: Vec<_> = (0..16).map(|n| metadata(n * 1000)).collect();
    for metadata in &segments {
        storage.copy_log_segment_data(metadata, &data).unwrap();
    }
    let log_dir = tempfile::tempdir().unwrap();
    let cache = RemoteIndexCache::open(log_dir.path(), 1 << 30, storage).unwrap();
    for metadata in &segments {
        cache.get(metadata, IndexType::Offset).unwrap();
    }
    let mut group = c.benchmark_group("index_cache");
    group.bench_with_input(
        BenchmarkId::new("hit", "64KiB_offset_index"),
        &segments,
        |b, segments| {
            let mut n = 0;
            b.iter(|| {
                n += 1;
                black_box(
                    cache
                        .get(&segments[n % segments.len()], IndexType::Offset)
                        .unwrap(),
                );
            });
        },
    );
    group.finish();
}

criterion_group!(benches, copy, ranged_fetch, index_cache_hit);
criterion_main!(benches);
