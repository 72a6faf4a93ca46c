//! Write-once archive mode against a real S3 server (moto with versioning
//! and Object Lock): startup checks, refused overwrites and deletes, chain
//! continuation across restarts, and every tampering the archive must
//! reveal — each detected by `verify_archive` and by the exit code of
//! `krabka-worm-verify`.
//!
//! moto enforces compliance-mode retention on object *versions* (a version
//! delete is refused, as the `bucket_refuses_version_delete` check shows),
//! so the one attack that needs a version delete runs on a bucket whose
//! default retention was switched to governance mode after the archive
//! started; the others (overwrite with a new version, delete marker) are
//! possible on a compliance bucket too and run there.

mod support;

use std::{process::Command, sync::Arc};

use assert2::{assert, check};
use ed25519_dalek::SigningKey;
use krabka_remote_storage::{
    ArchiveVerifyReport, BytePosition, IndexType, ObjectStoreConfig, RemoteStorageError,
    RemoteStorageManager, S3RemoteStorage, SealedManifest, TrustedManifestKeys, VerifyBreak,
    VerifyDepth, VerifyRequest, WormChainRecord, WormConfig, verify_archive,
};
use object_store::{ObjectStore, ObjectStoreExt as _, PutPayload, path::Path};
use support::*;

const MIB: usize = 1024 * 1024;

fn signing_key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

fn trusted() -> TrustedManifestKeys {
    let mut keys = TrustedManifestKeys::new();
    keys.insert(signing_key(1).verifying_key(), "broker");
    keys
}

fn config(server: &Server, bucket: &str) -> ObjectStoreConfig {
    let mut c = s3_config(server, bucket);
    // Small multipart settings so one segment below goes multipart.
    c.multipart_threshold = 6 * MIB as u64;
    c.multipart_chunk_size = 5 * MIB;
    ObjectStoreConfig::S3(c)
}

fn worm_storage(server: &Server, bucket: &str) -> S3RemoteStorage {
    S3RemoteStorage::new(config(server, bucket))
        .unwrap()
        .with_worm(WormConfig::new(signing_key(1)))
        .unwrap()
}

/// An archive of `n` consecutive segments (the second one multipart).
struct Archive {
    server: Server,
    bucket: String,
    storage: S3RemoteStorage,
    segments: Vec<SegmentFixture>,
    tip: WormChainRecord,
}

fn archive(n: usize, governance: bool) -> Archive {
    let server = moto();
    let bucket = "archive".to_owned();
    create_locked_bucket(&server, &bucket, "COMPLIANCE");
    let storage = worm_storage(&server, &bucket);
    if governance {
        // Weakened after startup (moto only allows it on an empty bucket):
        // models an operator with bypass rights turning against the archive.
        boto(
            &server,
            &format!(
                "s3.put_object_lock_configuration(Bucket='{bucket}', ObjectLockConfiguration=\
                 {{'ObjectLockEnabled': 'Enabled', 'Rule': {{'DefaultRetention': \
                 {{'Mode': 'GOVERNANCE', 'Days': 1}}}}}})"
            ),
        );
    }
    let p = partition(7);
    let mut segments = Vec::new();
    for i in 0..n {
        let start = i64::try_from(i).unwrap() * 1000;
        let size = if i == 1 { 7 * MIB } else { 20_000 + i };
        let seg = segment(&p, start, start + 999, size, i % 2 == 0);
        storage
            .copy_log_segment_data(&seg.metadata, &seg.data)
            .unwrap();
        segments.push(seg);
    }
    let tip = storage.chain_record(&p).unwrap();
    Archive {
        server,
        bucket,
        storage,
        segments,
        tip,
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Runtime::new().unwrap()
}

impl Archive {
    /// A separate client, as an auditor (or attacker) would have.
    fn store(&self, rt: &tokio::runtime::Runtime) -> Arc<dyn ObjectStore> {
        let _guard = rt.enter();
        config(&self.server, &self.bucket).build().unwrap()
    }

    fn verify(&self, depth: VerifyDepth, expect: bool) -> ArchiveVerifyReport {
        let rt = runtime();
        let store = self.store(&rt);
        let request = VerifyRequest {
            prefix: "tiered".into(),
            trusted_keys: trusted(),
            depth,
            expect_head: if expect {
                vec![self.tip.clone()]
            } else {
                Vec::new()
            },
            progress: None,
        };
        rt.block_on(verify_archive(&*store, &request)).unwrap()
    }

    /// Runs `krabka-worm-verify`; returns its exit code and stdout.
    fn cli(&self, extra: &[&str], expect: bool) -> (i32, String) {
        let dir = tempfile::tempdir().unwrap();
        let heads = dir.path().join("heads.jsonl");
        std::fs::write(&heads, self.tip.to_bytes()).unwrap();
        let key = hex::encode(signing_key(1).verifying_key().to_bytes());
        let mut cmd = Command::new(worm_verify_bin());
        cmd.args([
            "--s3-bucket",
            &self.bucket,
            "--endpoint",
            &self.server.endpoint,
        ])
        .args([
            "--path-style",
            "--allow-http",
            "--prefix",
            "tiered",
            "--no-progress",
        ])
        .args(["--trusted-key", &key])
        .args(extra)
        .env("AWS_ACCESS_KEY_ID", "krabka")
        .env("AWS_SECRET_ACCESS_KEY", "krabka")
        .env("AWS_REGION", "us-east-1");
        if expect {
            cmd.arg("--expect-head").arg(&heads);
        }
        let out = cmd.output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    /// Object keys of segment `i` with `suffix`.
    fn key(&self, i: usize, suffix: &str) -> String {
        let id = self.segments[i].metadata.remote_log_segment_id();
        format!(
            "tiered/{}/{}",
            krabka_remote_storage::partition_dir_name(id.topic_id_partition()),
            krabka_remote_storage::segment_file_name(
                self.segments[i].metadata.start_offset(),
                id.id(),
                suffix
            )
        )
    }
}

fn breaks(report: &ArchiveVerifyReport) -> Vec<VerifyBreak> {
    report.breaks().map(|(_, b)| b.clone()).collect()
}

#[test]
fn startup_refused_without_versioning_and_compliance_lock() {
    let server = moto();
    create_plain_bucket(&server, "plain");
    let err = S3RemoteStorage::new(config(&server, "plain"))
        .unwrap()
        .with_worm(WormConfig::new(signing_key(1)))
        .unwrap_err();
    assert!(let RemoteStorageError::WriteRefused { .. } = &err);
    check!(err.to_string().contains("versioning"), "{err}");

    // Versioning alone is not enough.
    boto(
        &server,
        "s3.put_bucket_versioning(Bucket='plain', VersioningConfiguration={'Status': 'Enabled'})",
    );
    let err = S3RemoteStorage::new(config(&server, "plain"))
        .unwrap()
        .with_worm(WormConfig::new(signing_key(1)))
        .unwrap_err();
    check!(err.to_string().contains("COMPLIANCE"), "{err}");

    // Governance mode can be bypassed, so it is refused too.
    create_locked_bucket(&server, "gov", "GOVERNANCE");
    let err = S3RemoteStorage::new(config(&server, "gov"))
        .unwrap()
        .with_worm(WormConfig::new(signing_key(1)))
        .unwrap_err();
    check!(err.to_string().contains("Governance"), "{err}");
}

#[test]
fn archive_verifies_refuses_overwrite_and_delete_and_continues_after_restart() {
    let a = archive(3, false);
    let report = a.verify(VerifyDepth::Digest, true);
    check!(report.is_verified(), "{:?}", breaks(&report));
    check!(report.manifests == 3);
    check!(report.objects == 3 * 5 + 2); // .log, 3 indexes, snapshot; 2 txn indexes
    check!(report.partitions[0].gaps.is_empty());
    check!(report.partitions[0].offsets == Some((0, 2999)));
    let (code, out) = a.cli(&["--depth", "digest"], true);
    check!(code == 0, "{out}");
    check!(out.contains("VERIFIED"));
    let (code, out) = a.cli(&["--json"], true);
    check!(code == 0);
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    check!(json["verified"] == true);
    check!(json["report"]["manifests"] == 3);

    // The multipart object was reserved, uploaded and read back.
    let rt = runtime();
    let store = a.store(&rt);
    let manifest = rt.block_on(async {
        let bytes = store
            .get(&Path::from(a.key(1, ".manifest")))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        SealedManifest::from_json(&bytes).unwrap()
    });
    let log = &manifest.manifest.body.objects[0];
    check!(log.size == 7 * MIB as u64);
    assert!(let krabka_remote_storage::ObjectProtectionReport::ReservedMultipart { parts: 2, .. } = &log.protection);

    // A second create of an existing key is refused.
    let err = a
        .storage
        .copy_log_segment_data(&a.segments[0].metadata, &a.segments[0].data)
        .unwrap_err();
    assert!(let RemoteStorageError::WriteRefused { .. } = &err);
    check!(err.to_string().contains("already exists"), "{err}");
    // Every delete is refused.
    assert!(let Err(RemoteStorageError::DeleteRefused { .. }) =
        a.storage.delete_log_segment_data(&a.segments[0].metadata));
    // Fetches still work in a read-write archive.
    let got = a
        .storage
        .fetch_log_segment(
            &a.segments[2].metadata,
            BytePosition(0),
            Some(BytePosition(9)),
        )
        .unwrap();
    check!(got.as_ref() == &a.segments[2].log[..10]);

    // The bucket itself refuses deleting a locked version.
    let refused = boto(
        &a.server,
        &format!(
            "v = s3.list_object_versions(Bucket='archive', Prefix='{}')['Versions'][0]['VersionId']\n\
             try:\n    s3.delete_object(Bucket='archive', Key='{}', VersionId=v)\n    print('deleted')\n\
             except botocore.exceptions.ClientError as e:\n    print(e.response['Error']['Code'])",
            a.key(0, ".log"),
            a.key(0, ".log")
        ),
    );
    check!(refused.trim() == "AccessDenied");

    // A restarted broker recovers the tip from the bucket and extends it.
    let restarted = worm_storage(&a.server, &a.bucket);
    let p = partition(7);
    let seg = segment(&p, 3000, 3999, 5000, false);
    restarted
        .copy_log_segment_data(&seg.metadata, &seg.data)
        .unwrap();
    let tip = restarted.chain_record(&p).unwrap();
    check!(tip.seq.0 == 3);
    let report = a.verify(VerifyDepth::Presence, true);
    check!(report.is_verified(), "{:?}", breaks(&report));
    check!(report.manifests == 4);
}

#[test]
fn write_only_archive_refuses_fetches() {
    let server = moto();
    create_locked_bucket(&server, "write-only", "COMPLIANCE");
    let storage = S3RemoteStorage::new(config(&server, "write-only"))
        .unwrap()
        .with_worm(WormConfig::new(signing_key(1)).with_write_only(true))
        .unwrap();
    let seg = segment(&partition(1), 0, 9, 100, false);
    storage
        .copy_log_segment_data(&seg.metadata, &seg.data)
        .unwrap();
    assert!(let Err(RemoteStorageError::FetchRefused { .. }) =
        storage.fetch_log_segment(&seg.metadata, BytePosition(0), None));
    assert!(let Err(RemoteStorageError::FetchRefused { .. }) =
        storage.fetch_index(&seg.metadata, IndexType::Offset));
}

#[test]
fn changed_byte_is_detected() {
    let a = archive(3, false);
    // Overwrite the .log of segment 0 with one byte changed (a new version;
    // Object Lock keeps the old one but the current content differs).
    let mut altered = a.segments[0].log.clone();
    altered[100] ^= 1;
    let rt = runtime();
    let store = a.store(&rt);
    rt.block_on(store.put(&Path::from(a.key(0, ".log")), PutPayload::from(altered)))
        .unwrap();
    for depth in [VerifyDepth::Presence, VerifyDepth::Digest] {
        let report = a.verify(depth, true);
        let b = breaks(&report);
        check!(b.len() == 1, "{b:?}");
        check!(b[0].is_object_break());
    }
    check!(a.cli(&[], true).0 == 5);
    check!(a.cli(&["--depth", "digest"], false).0 == 5);
}

#[test]
fn deleted_object_version_is_detected() {
    let a = archive(3, true);
    boto(
        &a.server,
        &format!(
            "key = '{}'\n\
             v = s3.list_object_versions(Bucket='archive', Prefix=key)['Versions'][0]['VersionId']\n\
             s3.delete_object(Bucket='archive', Key=key, VersionId=v, BypassGovernanceRetention=True)",
            a.key(2, ".index")
        ),
    );
    let report = a.verify(VerifyDepth::Presence, true);
    let b = breaks(&report);
    check!(b.len() == 1, "{b:?}");
    assert!(let VerifyBreak::MissingObject { .. } = &b[0]);
    check!(a.cli(&[], true).0 == 5);
}

fn read_manifest(a: &Archive, rt: &tokio::runtime::Runtime, i: usize) -> SealedManifest {
    let store = a.store(rt);
    rt.block_on(async {
        let bytes = store
            .get(&Path::from(a.key(i, ".manifest")))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        SealedManifest::from_json(&bytes).unwrap()
    })
}

fn write_manifest(a: &Archive, rt: &tokio::runtime::Runtime, i: usize, m: &SealedManifest) {
    let store = a.store(rt);
    rt.block_on(store.put(
        &Path::from(a.key(i, ".manifest")),
        PutPayload::from(m.to_json()),
    ))
    .unwrap();
}

#[test]
fn manifest_resigned_with_untrusted_key_is_detected() {
    let a = archive(3, false);
    let rt = runtime();
    let mut m = read_manifest(&a, &rt, 1);
    m.manifest.body.identity.max_timestamp_ms += 1;
    let forged = SealedManifest::seal(m.manifest, &signing_key(9));
    write_manifest(&a, &rt, 1, &forged);
    let report = a.verify(VerifyDepth::Presence, true);
    let b = breaks(&report);
    check!(
        b.iter()
            .any(|b| matches!(b, VerifyBreak::BadSignature { .. })),
        "{b:?}"
    );
    check!(a.cli(&[], true).0 == 3);
    check!(a.cli(&[], false).0 == 3);

    // A restarted broker finds the forged manifest and refuses to extend
    // the broken chain.
    let restarted = worm_storage(&a.server, &a.bucket);
    let seg = segment(&partition(7), 3000, 3999, 100, false);
    let err = restarted
        .copy_log_segment_data(&seg.metadata, &seg.data)
        .unwrap_err();
    assert!(let RemoteStorageError::WriteRefused { .. } = &err);
    check!(err.to_string().contains("broken"), "{err}");
}

#[test]
fn reordered_manifests_are_detected() {
    let a = archive(3, false);
    let rt = runtime();
    let (m0, m1) = (read_manifest(&a, &rt, 0), read_manifest(&a, &rt, 1));
    write_manifest(&a, &rt, 0, &m1);
    write_manifest(&a, &rt, 1, &m0);
    let report = a.verify(VerifyDepth::Presence, false);
    let b = breaks(&report);
    check!(
        b.iter()
            .filter(|b| matches!(b, VerifyBreak::MisplacedManifest { .. }))
            .count()
            == 2,
        "{b:?}"
    );
    check!(a.cli(&[], false).0 == 3);
}

#[test]
fn dropped_manifest_is_detected() {
    let a = archive(4, false);
    // A plain delete through the store's API leaves a delete marker, which
    // Object Lock allows: the manifest vanishes from listings.
    let rt = runtime();
    let store = a.store(&rt);
    rt.block_on(store.delete(&Path::from(a.key(1, ".manifest"))))
        .unwrap();
    let report = a.verify(VerifyDepth::Presence, false);
    let b = breaks(&report);
    check!(
        b.iter()
            .any(|b| matches!(b, VerifyBreak::MissingManifests { .. })),
        "{b:?}"
    );
    check!(a.cli(&[], false).0 == 3);
}

#[test]
fn truncated_tail_is_detected_only_with_expect_head() {
    let a = archive(4, false);
    let rt = runtime();
    let store = a.store(&rt);
    rt.block_on(store.delete(&Path::from(a.key(3, ".manifest"))))
        .unwrap();
    // Without an independent tip the shorter chain is consistent.
    let report = a.verify(VerifyDepth::Presence, false);
    check!(report.is_verified(), "{:?}", breaks(&report));
    check!(report.manifests == 3);
    check!(report.partitions[0].unlisted_objects == 5);
    check!(a.cli(&[], false).0 == 0);
    // With the tip the broker published, the truncation shows.
    let report = a.verify(VerifyDepth::Presence, true);
    let b = breaks(&report);
    check!(b.len() == 1, "{b:?}");
    check!(b[0].is_truncation());
    check!(a.cli(&[], true).0 == 4);
}

#[test]
fn cli_reports_usage_and_connection_errors() {
    let out = Command::new(worm_verify_bin()).output().unwrap();
    check!(out.status.code() == Some(2));
    let key = hex::encode(signing_key(1).verifying_key().to_bytes());
    let endpoint = format!("http://127.0.0.1:{}", free_port());
    let out = Command::new(worm_verify_bin())
        .args([
            "--s3-bucket",
            "b",
            "--endpoint",
            &endpoint,
            "--path-style",
            "--allow-http",
        ])
        .args(["--trusted-key", &key, "--no-progress"])
        .env("AWS_ACCESS_KEY_ID", "krabka")
        .env("AWS_SECRET_ACCESS_KEY", "krabka")
        .args(["--retries", "0"])
        .output()
        .unwrap();
    check!(out.status.code() == Some(2));
    let help = Command::new(worm_verify_bin())
        .arg("--help")
        .output()
        .unwrap();
    check!(String::from_utf8_lossy(&help.stdout).contains("truncated tail"));
}
