//! Throughput of the S3 tier and of the archive verifier against a local
//! moto server: segment copy (single PUT and multipart), ranged fetch, and
//! `verify_archive` in manifests/s and MB/s.
//!
//! Run: `cargo bench -p krabka-remote-storage --bench s3_worm` (needs the
//! venv with moto; see `tests/support`). Figures go to `docs/BENCHMARKS.md`.
//! moto is a single-threaded Python server holding objects in memory, so the
//! figures measure Krabka's client path plus moto, not S3.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::Instant;

use ed25519_dalek::SigningKey;
use krabka_remote_storage::{
    BytePosition, ObjectStoreConfig, RemoteStorageManager, S3RemoteStorage, TrustedManifestKeys,
    VerifyDepth, VerifyRequest, WormConfig, verify_archive,
};
use support::*;

const MIB: usize = 1024 * 1024;

fn mbps(bytes: usize, secs: f64) -> f64 {
    bytes as f64 / MIB as f64 / secs
}

fn copy_bench(server: &Server, label: &str, threshold: u64, size: usize, count: usize) {
    let bucket = format!("bench-{label}");
    create_plain_bucket(server, &bucket);
    let mut c = s3_config(server, &bucket);
    c.multipart_threshold = threshold;
    c.multipart_chunk_size = 8 * MIB;
    let storage = S3RemoteStorage::new(ObjectStoreConfig::S3(c)).unwrap();
    let p = partition(1);
    let segments: Vec<_> = (0..count)
        .map(|i| {
            let start = i64::try_from(i).unwrap() * 1000;
            segment(&p, start, start + 999, size, false)
        })
        .collect();
    let t = Instant::now();
    for s in &segments {
        storage.copy_log_segment_data(&s.metadata, &s.data).unwrap();
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "copy {label}: {count} x {} MiB in {secs:.2}s = {:.1} MB/s",
        size / MIB,
        mbps(size * count, secs)
    );
    // Ranged fetches of 1 MiB at spread positions.
    let fetches = 64;
    let t = Instant::now();
    let mut got = 0;
    for i in 0..fetches {
        let s = &segments[i % count];
        let start = (i * 7919 * 1024) % (size - MIB);
        let bytes = storage
            .fetch_log_segment(
                &s.metadata,
                BytePosition(u32::try_from(start).unwrap()),
                Some(BytePosition(u32::try_from(start + MIB - 1).unwrap())),
            )
            .unwrap();
        got += bytes.len();
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "ranged fetch {label}: {fetches} x 1 MiB in {secs:.2}s = {:.1} MB/s, {:.0} fetches/s",
        mbps(got, secs),
        fetches as f64 / secs
    );
}

fn verify_bench(server: &Server, segments: usize, size: usize) {
    create_locked_bucket(server, "bench-worm", "COMPLIANCE");
    let key = SigningKey::from_bytes(&[1; 32]);
    let config = ObjectStoreConfig::S3(s3_config(server, "bench-worm"));
    let storage = S3RemoteStorage::new(config.clone())
        .unwrap()
        .with_worm(WormConfig::new(key.clone()))
        .unwrap();
    let p = partition(2);
    let t = Instant::now();
    let mut bytes = 0;
    for i in 0..segments {
        let start = i64::try_from(i).unwrap() * 1000;
        let s = segment(&p, start, start + 999, size, false);
        storage.copy_log_segment_data(&s.metadata, &s.data).unwrap();
        bytes += size;
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "WORM copy: {segments} segments x {} KiB (+ indexes, manifest) in {secs:.2}s = {:.1} \
         segments/s",
        size / 1024,
        segments as f64 / secs
    );
    let mut trusted = TrustedManifestKeys::new();
    trusted.insert(key.verifying_key(), "bench");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let store = {
        let _g = rt.enter();
        config.build().unwrap()
    };
    for depth in [VerifyDepth::Presence, VerifyDepth::Digest] {
        let request = VerifyRequest {
            prefix: "tiered".into(),
            trusted_keys: trusted.clone(),
            depth,
            expect_head: storage.chain_record(&p).into_iter().collect(),
            progress: None,
        };
        let t = Instant::now();
        let report = rt.block_on(verify_archive(&*store, &request)).unwrap();
        let secs = t.elapsed().as_secs_f64();
        assert!(report.is_verified());
        let read = if depth == VerifyDepth::Digest {
            usize::try_from(report.bytes + report.manifest_bytes).unwrap()
        } else {
            usize::try_from(report.manifest_bytes).unwrap()
        };
        println!(
            "verify_archive {depth:?}: {} manifests, {} objects in {secs:.2}s = {:.0} manifests/s, \
             {:.1} MB/s read ({} MiB of segment data covered)",
            report.manifests,
            report.objects,
            report.manifests as f64 / secs,
            mbps(read, secs),
            bytes / MIB
        );
    }
    let _ = bytes;
}

/// The verifier's own cost, without I/O: chain and signature checks of
/// `n` in-memory manifests.
fn authenticate_bench(n: u64) {
    use krabka_remote_storage::{
        ManifestBody, ObjectEntry, ObjectProtectionReport, SealedManifest, SegmentIdentity,
        SegmentManifest, Sha256Digest, authenticate_archive, next_chain_stamp,
    };
    let key = SigningKey::from_bytes(&[3; 32]);
    let p = partition(3);
    let mut tip = None;
    let manifests: Vec<_> = (0..n)
        .map(|i| {
            let start = i64::try_from(i).unwrap() * 1000;
            let segment_id = uuid::Uuid::from_u128(u128::from(i) + 1);
            let body = ManifestBody {
                format_version: krabka_remote_storage::MANIFEST_FORMAT_VERSION,
                identity: SegmentIdentity {
                    topic: p.topic().to_owned(),
                    partition: p.partition(),
                    topic_id: p.topic_id(),
                    segment_id,
                    start_offset: start,
                    end_offset: start + 999,
                    max_timestamp_ms: 0,
                    broker_id: 1,
                    segment_size_bytes: 1 << 20,
                    leader_epochs: Vec::new(),
                },
                objects: [
                    ".log",
                    ".index",
                    ".timeindex",
                    ".snapshot",
                    ".leader_epoch_checkpoint",
                ]
                .iter()
                .map(|suffix| ObjectEntry {
                    name: krabka_remote_storage::segment_file_name(start, segment_id, suffix),
                    size: 1 << 20,
                    sha256: Sha256Digest::of(suffix.as_bytes()),
                    protection: ObjectProtectionReport::ConditionalCreate {
                        e_tag: Some("\"etag\"".into()),
                        version: Some("v".into()),
                    },
                })
                .collect(),
                sealed_at_ms: 0,
            };
            let sealed = SealedManifest::seal(
                SegmentManifest {
                    stamp: next_chain_stamp(tip),
                    body,
                },
                &key,
            );
            tip = Some((sealed.manifest.stamp.seq, sealed.head));
            (sealed.manifest.body.manifest_name(), sealed)
        })
        .collect();
    let mut trusted = TrustedManifestKeys::new();
    trusted.insert(key.verifying_key(), "bench");
    let t = Instant::now();
    let auth = authenticate_archive(&p, manifests, &trusted, None);
    let secs = t.elapsed().as_secs_f64();
    assert!(auth.is_intact());
    println!(
        "authenticate_archive (CPU only): {n} manifests in {secs:.3}s = {:.0} manifests/s",
        n as f64 / secs
    );
}

fn main() {
    authenticate_bench(20_000);
    let server = moto();
    copy_bench(&server, "single-put", 64 * MIB as u64, 16 * MIB, 8);
    copy_bench(&server, "multipart", 32 * MIB as u64, 64 * MIB, 2);
    verify_bench(&server, 200, 256 * 1024);
}
