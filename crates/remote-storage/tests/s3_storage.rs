//! `S3RemoteStorage` in plain (non-archive) mode against a real S3 server
//! (moto) and a real GCS emulator (fake-gcs-server): copy, ranged fetch,
//! index fetch and delete of segments, single PUT and multipart.

mod support;

use assert2::{assert, check};
use krabka_remote_storage::{
    BytePosition, GcsConfig, IndexType, ObjectStoreConfig, RemoteStorageError,
    RemoteStorageManager, S3RemoteStorage,
};
use support::*;

const MIB: usize = 1024 * 1024;

fn exercise(storage: &S3RemoteStorage, multipart: bool) {
    let p = partition(1);
    let size = if multipart { 12 * MIB + 123 } else { 300_000 };
    let seg = segment(&p, 0, 999, size, true);
    let custom = storage
        .copy_log_segment_data(&seg.metadata, &seg.data)
        .unwrap();
    check!(custom.is_some());
    let meta = seg.with_custom(custom);

    // Ranged reads: Kafka's end position is inclusive; an end past the
    // segment is clamped.
    let got = storage
        .fetch_log_segment(&meta, BytePosition(10), Some(BytePosition(20)))
        .unwrap();
    check!(got.as_ref() == &seg.log[10..=20]);
    let tail_start = u32::try_from(size - 100).unwrap();
    let got = storage
        .fetch_log_segment(&meta, BytePosition(tail_start), None)
        .unwrap();
    check!(got.as_ref() == &seg.log[size - 100..]);
    let got = storage
        .fetch_log_segment(&meta, BytePosition(0), Some(BytePosition(u32::MAX)))
        .unwrap();
    check!(got.len() == size);
    check!(got.as_ref() == seg.log.as_slice());
    assert!(let
        Err(RemoteStorageError::InvalidRange { .. }) =
            storage.fetch_log_segment(&meta, BytePosition(u32::try_from(size).unwrap()), None)
    );
    assert!(let
        Err(RemoteStorageError::InvalidRange { .. }) =
            storage.fetch_log_segment(&meta, BytePosition(5), Some(BytePosition(4)))
    );

    // Indexes, the same without the custom metadata (falls back to HEAD).
    for m in [&meta, &seg.metadata] {
        check!(
            storage.fetch_index(m, IndexType::Offset).unwrap().as_ref()
                == seg.offset_index.as_slice()
        );
        check!(
            storage
                .fetch_index(m, IndexType::Transaction)
                .unwrap()
                .as_ref()
                == seg.txn_index.as_deref().unwrap()
        );
        check!(
            storage
                .fetch_index(m, IndexType::LeaderEpoch)
                .unwrap()
                .as_ref()
                == b"0\n1\n0 0\n"
        );
        check!(
            storage
                .fetch_index(m, IndexType::ProducerSnapshot)
                .unwrap()
                .len()
                == 64
        );
    }

    // A segment without a transaction index.
    let seg2 = segment(&p, 1000, 1999, 1000, false);
    let custom2 = storage
        .copy_log_segment_data(&seg2.metadata, &seg2.data)
        .unwrap();
    for m in [seg2.with_custom(custom2), seg2.metadata.clone()] {
        assert!(let
            Err(RemoteStorageError::IndexNotFound { .. }) =
                storage.fetch_index(&m, IndexType::Transaction)
        );
    }

    // Delete removes every object; deleting again succeeds.
    storage.delete_log_segment_data(&meta).unwrap();
    storage.delete_log_segment_data(&meta).unwrap();
    assert!(let
        Err(RemoteStorageError::SegmentNotFound { .. }) =
            storage.fetch_log_segment(&seg.metadata, BytePosition(0), None)
    );
    assert!(let
        Err(RemoteStorageError::SegmentNotFound { .. }) =
            storage.fetch_index(&seg.metadata, IndexType::Offset)
    );
    // The other segment is untouched.
    check!(
        storage
            .fetch_log_segment(&seg2.metadata, BytePosition(0), None)
            .unwrap()
            .len()
            == 1000
    );
}

fn small_multipart(mut config: krabka_remote_storage::S3Config) -> ObjectStoreConfig {
    config.multipart_threshold = 6 * MIB as u64;
    config.multipart_chunk_size = 5 * MIB;
    ObjectStoreConfig::S3(config)
}

#[test]
fn s3_single_put_copy_fetch_delete() {
    let server = moto();
    create_plain_bucket(&server, "tier");
    let storage = S3RemoteStorage::new(ObjectStoreConfig::S3(s3_config(&server, "tier"))).unwrap();
    exercise(&storage, false);
    // Keys are Kafka-style under the prefix.
    let keys = boto(
        &server,
        "print('\\n'.join(o['Key'] for o in s3.list_objects_v2(Bucket='tier')['Contents']))",
    );
    check!(keys.lines().all(|k| k.starts_with("tiered/orders-0-")));
    check!(
        keys.lines()
            .any(|k| k.ends_with(".leader_epoch_checkpoint"))
    );
}

#[test]
fn s3_multipart_copy_fetch_delete() {
    let server = moto();
    create_plain_bucket(&server, "tier");
    let storage = S3RemoteStorage::new(small_multipart(s3_config(&server, "tier"))).unwrap();
    exercise(&storage, true);
}

#[test]
fn s3_missing_bucket_is_a_clear_error() {
    let server = moto();
    let err = S3RemoteStorage::new(ObjectStoreConfig::S3(s3_config(&server, "nope"))).unwrap_err();
    check!(err.to_string().contains("\"nope\" does not exist"), "{err}");
}

#[test]
fn s3_unreachable_endpoint_is_an_error() {
    let mut config = s3_config_for_port(free_port());
    config.retry.max_retries = 0;
    let err = S3RemoteStorage::new(ObjectStoreConfig::S3(config)).unwrap_err();
    check!(matches!(err, RemoteStorageError::Backend { .. }), "{err}");
}

fn s3_config_for_port(port: u16) -> krabka_remote_storage::S3Config {
    krabka_remote_storage::S3Config::local("tier", format!("http://127.0.0.1:{port}"))
}

#[test]
fn gcs_copy_fetch_delete() {
    // fake-gcs-server behind the XML PUT shim (see `GcsXmlShim`).
    let gcs = fake_gcs_with_shim();
    create_gcs_bucket(&gcs.server, "tier");
    let mut config = GcsConfig::emulator("tier", gcs.endpoint());
    config.prefix = "tiered".into();
    let storage = S3RemoteStorage::new(ObjectStoreConfig::Gcs(config)).unwrap();
    exercise(&storage, false);
}

#[test]
fn gcs_worm_startup_refused_without_locked_retention() {
    // fake-gcs-server cannot model a retention policy at all (its bucket
    // resource has no `retentionPolicy`), so only the refusal is testable:
    // a GCS archive on the emulator must not start.
    let gcs = fake_gcs_with_shim();
    create_gcs_bucket(&gcs.server, "tier");
    let config = GcsConfig::emulator("tier", gcs.endpoint());
    let err = S3RemoteStorage::new(ObjectStoreConfig::Gcs(config))
        .unwrap()
        .with_worm(krabka_remote_storage::WormConfig::new(
            ed25519_dalek::SigningKey::from_bytes(&[1; 32]),
        ))
        .unwrap_err();
    assert!(let RemoteStorageError::WriteRefused { .. } = &err);
    check!(err.to_string().contains("locked retention policy"), "{err}");
}

#[test]
fn gcs_missing_bucket_is_a_clear_error() {
    let server = fake_gcs();
    let config = GcsConfig::emulator("nope", server.endpoint.clone());
    let err = S3RemoteStorage::new(ObjectStoreConfig::Gcs(config)).unwrap_err();
    check!(err.to_string().contains("\"nope\" does not exist"), "{err}");
}

#[tokio::test]
async fn usable_and_droppable_inside_an_async_context() {
    let server = moto();
    create_plain_bucket(&server, "tier");
    let storage = S3RemoteStorage::new(ObjectStoreConfig::S3(s3_config(&server, "tier"))).unwrap();
    let seg = segment(&partition(1), 0, 9, 1000, false);
    storage
        .copy_log_segment_data(&seg.metadata, &seg.data)
        .unwrap();
    let got = storage
        .fetch_log_segment(&seg.metadata, BytePosition(0), None)
        .unwrap();
    check!(got.as_ref() == seg.log.as_slice());
    // A caller-owned runtime works the same from a blocking thread.
    let handle = tokio::runtime::Handle::current();
    let config = ObjectStoreConfig::S3(s3_config(&server, "tier"));
    let fetched = tokio::task::spawn_blocking(move || {
        let borrowed = S3RemoteStorage::with_runtime(config, handle).unwrap();
        borrowed
            .fetch_index(&seg.metadata, IndexType::Offset)
            .unwrap()
    })
    .await
    .unwrap();
    check!(fetched.len() == 128);
    drop(storage);
}
