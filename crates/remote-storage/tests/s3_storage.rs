//! `S3RemoteStorage` in plain (non-archive) mode against a real S3 server
//! (moto) and a real GCS emulator (fake-gcs-server): copy, ranged fetch,
//! index fetch and delete of segments, single PUT and multipart.
//!
//! The single-PUT S3 and the GCS cases copy a real segment written by
//! `krabka_log::Log` (v2 batches, trimmed indexes, producer snapshot,
//! leader-epoch checkpoint, an aborted transaction); the multipart case
//! keeps a pseudo-random `.log` above the multipart threshold.

mod support;

use assert2::{assert, check};
use bytes::Bytes;
use kafka_protocol::records::RecordBatchDecoder;
use krabka_remote_storage::{
    BytePosition, GcsConfig, IndexType, LogOffset, ObjectStoreConfig, RemoteStorageError,
    RemoteStorageManager, S3RemoteStorage, index,
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

/// Copy, ranged fetch, index fetch and delete of a real `krabka-log`
/// segment.
/// `objects` lists every object name in the bucket.
fn exercise_real(storage: &S3RemoteStorage, objects: &dyn Fn() -> Vec<String>) {
    let p = partition(2);
    let seg = real_segment(&p);
    let base = seg.metadata.start_offset();
    let custom = storage
        .copy_log_segment_data(&seg.metadata, &seg.data)
        .unwrap();
    let meta = seg.with_custom(custom);

    // Every batch, fetched alone by its byte range, is exactly the bytes on
    // disk and decodes to its records.
    let mut batches = Vec::new();
    let mut at = BytePosition(0);
    while let Some(header) = index::first_batch_at_or_after(&seg.log, at, LogOffset(0)).unwrap() {
        batches.push(header);
        at = BytePosition(u32::try_from(header.end()).unwrap());
    }
    check!(batches.len() > 10);
    check!(batches.first().map(|b| b.base_offset.0) == Some(base));
    check!(batches.last().map(|b| b.last_offset.0) == Some(seg.metadata.end_offset()));
    check!(batches.last().map(|b| b.end()) == Some(seg.log.len() as u64));
    for header in &batches {
        let from = header.position.0 as usize;
        let to = from + header.size as usize;
        let got = storage
            .fetch_log_segment(
                &meta,
                header.position,
                Some(BytePosition(u32::try_from(to - 1).unwrap())),
            )
            .unwrap();
        check!(got.as_ref() == &seg.log[from..to]);
        let mut bytes = Bytes::copy_from_slice(&got);
        let set = RecordBatchDecoder::decode(&mut bytes).unwrap();
        check!(set.records.first().map(|r| r.offset) == Some(header.base_offset.0));
        check!(set.records.last().map(|r| r.offset) == Some(header.last_offset.0));
    }
    // An open-ended read from the middle of the segment.
    let middle = batches[batches.len() / 2].position;
    let got = storage.fetch_log_segment(&meta, middle, None).unwrap();
    check!(got.as_ref() == &seg.log[middle.0 as usize..]);
    check!(index::corrupt_log(&got).is_none());

    // The fetched offset index decodes and every entry points at the start
    // of the batch that holds its offset.
    for m in [&meta, &seg.metadata] {
        let fetched = storage.fetch_index(m, IndexType::Offset).unwrap();
        check!(fetched.as_ref() == seg.offset_index.as_slice());
        let entries = index::parse_offset_index(&fetched).unwrap();
        check!(
            entries.len() >= 2,
            "index.interval.bytes makes several entries"
        );
        for entry in &entries {
            let offset = base + i64::from(entry.relative_offset.0);
            let batch = batches
                .iter()
                .find(|b| b.position == entry.position)
                .unwrap_or_else(|| panic!("no batch starts at {:?}", entry.position));
            check!(batch.base_offset.0 <= offset && offset <= batch.last_offset.0);
        }
        let time = storage.fetch_index(m, IndexType::Timestamp).unwrap();
        check!(time.as_ref() == seg.time_index.as_slice());
        check!(!index::parse_time_index(&time).unwrap().is_empty());
        let txn = storage.fetch_index(m, IndexType::Transaction).unwrap();
        check!(txn.as_ref() == seg.txn_index.as_deref().unwrap());
        let aborted = index::parse_txn_index(&txn).unwrap();
        check!(aborted.len() == 1);
        check!(aborted[0].producer_id.0 == 7);
        check!(
            storage
                .fetch_index(m, IndexType::LeaderEpoch)
                .unwrap()
                .as_ref()
                == seg.leader_epoch.as_ref()
        );
        check!(
            storage
                .fetch_index(m, IndexType::ProducerSnapshot)
                .unwrap()
                .as_ref()
                == seg.producer_snapshot.as_slice()
        );
    }
    check!(seg.leader_epoch.starts_with(b"0\n2\n0 "));

    // The copy wrote the log and each of the five indexes, nothing else.
    let written = objects();
    check!(written.len() == 6, "{written:?}");
    for suffix in [
        ".log",
        ".index",
        ".timeindex",
        ".txnindex",
        ".snapshot",
        ".leader_epoch_checkpoint",
    ] {
        check!(
            written.iter().any(|k| k.ends_with(suffix)),
            "{suffix}: {written:?}"
        );
    }

    // Delete removes every object: the log and each index are gone.
    storage.delete_log_segment_data(&meta).unwrap();
    let left = objects();
    check!(left.is_empty(), "delete left objects behind: {left:?}");
    storage.delete_log_segment_data(&meta).unwrap();
    for m in [&meta, &seg.metadata] {
        assert!(let
            Err(RemoteStorageError::SegmentNotFound { .. }) =
                storage.fetch_log_segment(m, BytePosition(0), None)
        );
        for kind in IndexType::ALL {
            check!(
                storage.fetch_index(m, kind).is_err(),
                "{kind:?} still there"
            );
        }
    }
}

fn lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
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
    exercise_real(&storage, &|| {
        lines(&boto(
            &server,
            "print('\\n'.join(o['Key'] for o in s3.list_objects_v2(Bucket='tier').get('Contents', [])))",
        ))
    });
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
    exercise_real(&storage, &|| lines(&gcs_object_names(&gcs.server, "tier")));
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
