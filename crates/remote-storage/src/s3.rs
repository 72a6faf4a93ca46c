//! [`S3RemoteStorage`]: the object-store [`RemoteStorageManager`] for S3 and
//! Google Cloud Storage.
//!
//! Objects use Kafka's `LocalTieredStorage` names as keys,
//! `<prefix>/<topic>-<partition>-<topic id>/<start offset>-<segment id>.<suffix>`,
//! so an archive is readable from a bucket listing alone. Files below the
//! multipart threshold go up in one PUT, larger ones by multipart upload in
//! parts of the configured chunk size (streamed from disk, never held whole
//! in memory). Log reads are ranged GETs.
//!
//! # Runtime
//!
//! The SPI is synchronous and `object_store` is async. By default the
//! storage owns a small multi-threaded Tokio runtime (two workers) and
//! blocks on it; [`S3RemoteStorage::with_runtime`] runs on a runtime the
//! caller passes instead. The methods may be called from any thread: from
//! plain threads they block directly, and from inside a Tokio context (an
//! async task or a `spawn_blocking` thread, where blocking on a runtime
//! would panic) they block on a short-lived helper thread. A borrowed
//! *current-thread* runtime must not be the one whose task makes the call,
//! since that task's thread is the only one that could drive it.
//!
//! # Custom metadata
//!
//! A copy returns [`CustomMetadata`] (stored by Kafka with the segment's
//! remote metadata, 128 bytes at most by default) recording what a later
//! fetch or delete needs, big-endian:
//!
//! ```text
//! u8  format (1)
//! u8  flags: 0x01 .txnindex stored, 0x02 .snapshot stored, 0x04 sealed in a WORM chain
//! u64 size of the .log object
//! WORM only: u64 manifest sequence number, 32 bytes chain head
//! ```

use std::{path::Path as FsPath, sync::Arc};

use bytes::Bytes;
use futures_util::{StreamExt as _, stream::FuturesUnordered};
use krabka_object_store::{ObjectStoreConfig, check_bucket};
use object_store::{ObjectStore, ObjectStoreExt as _, PutPayload, PutResult, path::Path};
use sha2::Digest as _;
use tokio::runtime::{Handle, Runtime};

use crate::{
    error::RemoteStorageError,
    index::BytePosition,
    metadata::{CustomMetadata, RemoteLogSegmentMetadata, TopicIdPartition},
    storage_manager::{
        IndexType, LOG_FILE_SUFFIX, LogSegmentData, RemoteStorageManager, partition_dir_name,
        segment_file_name,
    },
    worm::{
        ChainHead, EpochId, EpochSpan, MANIFEST_FORMAT_VERSION, ManifestBody, ManifestSeq,
        ObjectEntry, ObjectProtectionReport, SegmentIdentity, Sha256Digest, WormArchiver,
        WormChainRecord, WormConfig,
    },
};

const CUSTOM_METADATA_FORMAT: u8 = 1;
const FLAG_TXN_INDEX: u8 = 0x01;
const FLAG_PRODUCER_SNAPSHOT: u8 = 0x02;
const FLAG_WORM: u8 = 0x04;

/// Parts uploaded at once in a multipart upload.
const PART_CONCURRENCY: usize = 4;

/// What a copy recorded about a segment (the decoded custom metadata).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegmentRecord {
    pub(crate) flags: u8,
    pub(crate) log_size: u64,
    pub(crate) chain: Option<(ManifestSeq, ChainHead)>,
}

impl SegmentRecord {
    pub(crate) fn encode(&self) -> CustomMetadata {
        let mut out = Vec::with_capacity(50);
        out.push(CUSTOM_METADATA_FORMAT);
        out.push(self.flags);
        out.extend_from_slice(&self.log_size.to_be_bytes());
        if let Some((seq, head)) = self.chain {
            out.extend_from_slice(&seq.0.to_be_bytes());
            out.extend_from_slice(&head.0.0);
        }
        CustomMetadata::new(out)
    }

    /// Decodes custom metadata written by [`encode`](Self::encode); anything
    /// else (another plugin's metadata) yields `None`.
    pub(crate) fn decode(custom: &CustomMetadata) -> Option<Self> {
        let v = custom.value();
        if v.first() != Some(&CUSTOM_METADATA_FORMAT) {
            return None;
        }
        let flags = *v.get(1)?;
        let log_size = u64::from_be_bytes(v.get(2..10)?.try_into().ok()?);
        let chain = if flags & FLAG_WORM != 0 {
            let seq = u64::from_be_bytes(v.get(10..18)?.try_into().ok()?);
            let head: [u8; 32] = v.get(18..50)?.try_into().ok()?;
            Some((ManifestSeq(seq), ChainHead(Sha256Digest(head))))
        } else {
            None
        };
        Some(Self {
            flags,
            log_size,
            chain,
        })
    }
}

/// One uploaded object.
pub(crate) struct Uploaded {
    pub(crate) size: u64,
    pub(crate) sha256: Sha256Digest,
    pub(crate) result: PutResult,
    pub(crate) parts: u32,
}

fn backend(e: impl std::fmt::Display) -> RemoteStorageError {
    RemoteStorageError::Backend {
        message: e.to_string(),
    }
}

/// Streams `file` to `key` by multipart upload in `chunk_size` parts,
/// hashing as it reads. Aborts the upload on failure.
pub(crate) async fn upload_file_multipart(
    store: &dyn ObjectStore,
    key: &Path,
    file: &FsPath,
    chunk_size: usize,
) -> Result<Uploaded, RemoteStorageError> {
    use std::io::Read as _;
    let mut reader =
        std::fs::File::open(file).map_err(|e| RemoteStorageError::io("open", file, e))?;
    let mut upload = store.put_multipart(key).await.map_err(backend)?;
    let mut hasher = sha2::Sha256::new();
    let mut size = 0u64;
    let mut parts = 0u32;
    let mut in_flight = FuturesUnordered::new();
    let outcome: Result<(), RemoteStorageError> = async {
        loop {
            let mut chunk = vec![0u8; chunk_size];
            let mut filled = 0;
            while filled < chunk_size {
                let n = reader
                    .read(&mut chunk[filled..])
                    .map_err(|e| RemoteStorageError::io("read", file, e))?;
                if n == 0 {
                    break;
                }
                filled += n;
            }
            if filled == 0 && parts > 0 {
                break;
            }
            chunk.truncate(filled);
            hasher.update(&chunk);
            size += filled as u64;
            parts += 1;
            in_flight.push(upload.put_part(PutPayload::from(chunk)));
            while in_flight.len() >= PART_CONCURRENCY {
                if let Some(r) = in_flight.next().await {
                    r.map_err(backend)?;
                }
            }
            if filled < chunk_size {
                break;
            }
        }
        while let Some(r) = in_flight.next().await {
            r.map_err(backend)?;
        }
        Ok(())
    }
    .await;
    drop(in_flight);
    if let Err(e) = outcome {
        // Best effort: the error that matters is the one above.
        let _ = upload.abort().await;
        return Err(e);
    }
    let result = upload.complete().await.map_err(backend)?;
    Ok(Uploaded {
        size,
        sha256: Sha256Digest(hasher.finalize().into()),
        result,
        parts,
    })
}

/// The runtime the async object-store calls run on: always a handle, and
/// the runtime itself when the storage owns it.
struct Rt {
    handle: Handle,
    owned: Option<Runtime>,
}

impl Drop for Rt {
    fn drop(&mut self) {
        // A runtime dropped the ordinary way blocks, which panics inside an
        // async context; nothing of ours outlives the storage, so stop it
        // without waiting.
        if let Some(rt) = self.owned.take() {
            rt.shutdown_background();
        }
    }
}

impl Rt {
    fn block_on<F>(&self, f: F) -> F::Output
    where
        F: std::future::Future + Send,
        F::Output: Send,
    {
        if Handle::try_current().is_ok() {
            // Inside a runtime context (an async task, or a `spawn_blocking`
            // thread): blocking directly would panic in an async task, so
            // block on a scoped helper thread instead.
            std::thread::scope(|scope| {
                scope
                    .spawn(|| self.handle.block_on(f))
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
        } else {
            self.handle.block_on(f)
        }
    }
}

/// Archive-mode state.
struct Worm {
    archiver: WormArchiver,
}

/// A [`RemoteStorageManager`] over S3 or Google Cloud Storage, optionally in
/// write-once archive mode ([`with_worm`](Self::with_worm)).
pub struct S3RemoteStorage {
    store: Arc<dyn ObjectStore>,
    config: ObjectStoreConfig,
    runtime: Rt,
    worm: Option<Worm>,
}

impl std::fmt::Debug for S3RemoteStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3RemoteStorage")
            .field("bucket", &self.config.describe())
            .field("prefix", &self.config.prefix())
            .field("worm", &self.worm.as_ref().map(|w| w.archiver.config()))
            .finish_non_exhaustive()
    }
}

impl S3RemoteStorage {
    /// A plain (non-archive) remote tier on `config`'s bucket, with its own
    /// runtime. Confirms that the bucket exists and accepts the credentials.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::Backend`] if the config is invalid, the bucket
    /// does not exist, the credentials are refused or the endpoint is
    /// unreachable (the message says which).
    pub fn new(config: ObjectStoreConfig) -> Result<Self, RemoteStorageError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("krabka-s3")
            .enable_all()
            .build()
            .map_err(|e| backend(format!("cannot start the object-store runtime: {e}")))?;
        Self::start(
            config,
            Rt {
                handle: runtime.handle().clone(),
                owned: Some(runtime),
            },
        )
    }

    /// As [`new`](Self::new), on the caller's runtime.
    ///
    /// # Errors
    ///
    /// As for [`new`](Self::new).
    pub fn with_runtime(
        config: ObjectStoreConfig,
        handle: Handle,
    ) -> Result<Self, RemoteStorageError> {
        Self::start(
            config,
            Rt {
                handle,
                owned: None,
            },
        )
    }

    fn start(config: ObjectStoreConfig, runtime: Rt) -> Result<Self, RemoteStorageError> {
        let store = {
            // Clients built inside the runtime bind their connection pool to it.
            let _guard = runtime.handle.enter();
            config.build().map_err(backend)?
        };
        runtime
            .block_on(check_bucket(&*store, &config))
            .map_err(backend)?;
        Ok(Self {
            store,
            config,
            runtime,
            worm: None,
        })
    }

    /// Puts the storage into write-once archive mode.
    ///
    /// Refuses unless the bucket already enforces retention: on S3,
    /// versioning enabled and a default Object Lock retention in compliance
    /// mode; on GCS, a locked retention policy (Bucket Lock). GCS needs no
    /// versioning: it does not allow versioning together with a retention
    /// policy, and a retained object cannot be replaced at all.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::WriteRefused`] naming what the bucket lacks, or
    /// `Backend` if its configuration cannot be read.
    pub fn with_worm(mut self, worm: WormConfig) -> Result<Self, RemoteStorageError> {
        let protection = self
            .runtime
            .block_on(self.config.bucket_protection())
            .map_err(backend)?;
        let reserve_multipart_keys = match &self.config {
            ObjectStoreConfig::S3(c) => {
                if !protection.versioning {
                    return Err(not_protected(&c.bucket, "versioning is not enabled"));
                }
                if !protection.has_locked_retention() {
                    return Err(not_protected(
                        &c.bucket,
                        &format!(
                            "no default Object Lock retention in COMPLIANCE mode (found {:?} for \
                             {:?})",
                            protection.retention_mode, protection.retention_period
                        ),
                    ));
                }
                true
            }
            ObjectStoreConfig::Gcs(c) => {
                crate::gcs::require_locked_retention(&c.bucket, &protection)?;
                false
            }
        };
        self.worm = Some(Worm {
            archiver: WormArchiver::new(
                self.store.clone(),
                self.config.prefix(),
                worm,
                reserve_multipart_keys,
            ),
        });
        Ok(self)
    }

    /// The object store (for audits with [`crate::verify_archive`]).
    #[must_use]
    pub fn object_store(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }

    /// The bucket config.
    #[must_use]
    pub fn config(&self) -> &ObjectStoreConfig {
        &self.config
    }

    /// In archive mode, the newest chain tip this storage sealed for
    /// `partition`: the record the broker publishes (keyed) to the metadata
    /// topic so auditors hold an independent tip.
    #[must_use]
    pub fn chain_record(&self, partition: &TopicIdPartition) -> Option<WormChainRecord> {
        self.worm.as_ref()?.archiver.last_record(partition)
    }

    fn key(&self, partition: &TopicIdPartition, name: &str) -> Path {
        let dir = partition_dir_name(partition);
        match self.config.prefix() {
            "" => Path::from(format!("{dir}/{name}")),
            prefix => Path::from(format!("{prefix}/{dir}/{name}")),
        }
    }

    fn segment_key(&self, metadata: &RemoteLogSegmentMetadata, suffix: &str) -> Path {
        let id = metadata.remote_log_segment_id();
        self.key(
            id.topic_id_partition(),
            &segment_file_name(metadata.start_offset(), id.id(), suffix),
        )
    }

    /// Uploads one object: returns its manifest entry.
    async fn put_object(
        &self,
        key: &Path,
        source: Source<'_>,
    ) -> Result<ObjectEntry, RemoteStorageError> {
        let name = key.filename().unwrap_or_default().to_owned();
        let threshold = self.config.multipart_threshold();
        let (size, sha256, protection) = match source {
            Source::File(path) => {
                let len = std::fs::metadata(path)
                    .map_err(|e| RemoteStorageError::io("stat", path, e))?
                    .len();
                if len >= threshold {
                    let chunk = self.config.multipart_chunk_size();
                    match &self.worm {
                        Some(worm) => {
                            worm.archiver
                                .create_multipart_object(key, path, chunk)
                                .await?
                        }
                        None => {
                            let up = upload_file_multipart(&*self.store, key, path, chunk).await?;
                            (up.size, up.sha256, plain_protection(up.result))
                        }
                    }
                } else {
                    let data = Bytes::from(
                        std::fs::read(path).map_err(|e| RemoteStorageError::io("read", path, e))?,
                    );
                    self.put_small(key, data).await?
                }
            }
            Source::Bytes(data) => self.put_small(key, data).await?,
        };
        Ok(ObjectEntry {
            name,
            size,
            sha256,
            protection,
        })
    }

    async fn put_small(
        &self,
        key: &Path,
        data: Bytes,
    ) -> Result<(u64, Sha256Digest, ObjectProtectionReport), RemoteStorageError> {
        let size = data.len() as u64;
        let sha256 = Sha256Digest::of(&data);
        let protection = match &self.worm {
            Some(worm) => worm.archiver.create_object(key, data).await?,
            None => plain_protection(
                self.store
                    .put(key, PutPayload::from(data))
                    .await
                    .map_err(backend)?,
            ),
        };
        Ok((size, sha256, protection))
    }

    async fn copy(
        &self,
        metadata: &RemoteLogSegmentMetadata,
        segment: &LogSegmentData,
    ) -> Result<CustomMetadata, RemoteStorageError> {
        let mut flags = 0u8;
        let mut objects = vec![
            self.put_object(
                &self.segment_key(metadata, LOG_FILE_SUFFIX),
                Source::File(&segment.log_segment),
            )
            .await?,
        ];
        let mut indexes: Vec<(IndexType, Source<'_>)> = vec![
            (IndexType::Offset, Source::File(&segment.offset_index)),
            (IndexType::Timestamp, Source::File(&segment.time_index)),
            (
                IndexType::LeaderEpoch,
                Source::Bytes(segment.leader_epoch_index.clone()),
            ),
        ];
        if let Some(path) = &segment.transaction_index {
            flags |= FLAG_TXN_INDEX;
            indexes.push((IndexType::Transaction, Source::File(path)));
        }
        if let Some(path) = &segment.producer_snapshot_index {
            flags |= FLAG_PRODUCER_SNAPSHOT;
            indexes.push((IndexType::ProducerSnapshot, Source::File(path)));
        }
        for (index, source) in indexes {
            objects.push(
                self.put_object(&self.segment_key(metadata, index.suffix()), source)
                    .await?,
            );
        }
        let log_size = objects.first().map_or(0, |o| o.size);
        let mut record = SegmentRecord {
            flags,
            log_size,
            chain: None,
        };
        if let Some(worm) = &self.worm {
            let partition = metadata.topic_id_partition();
            let body = ManifestBody {
                format_version: MANIFEST_FORMAT_VERSION,
                identity: identity(metadata),
                objects,
                sealed_at_ms: now_ms(),
            };
            let (sealed, _record) = worm.archiver.seal(partition, body).await?;
            record.flags |= FLAG_WORM;
            record.chain = Some((sealed.manifest.stamp.seq, sealed.head));
        }
        Ok(record.encode())
    }

    fn check_fetch(&self) -> Result<(), RemoteStorageError> {
        match &self.worm {
            Some(worm) if worm.archiver.config().write_only => {
                Err(RemoteStorageError::FetchRefused {
                    reason: format!(
                        "{} is a write-only WORM archive; remote fetches are disabled",
                        self.config.describe()
                    ),
                })
            }
            _ => Ok(()),
        }
    }

    fn not_found(&self, metadata: &RemoteLogSegmentMetadata) -> RemoteStorageError {
        RemoteStorageError::SegmentNotFound {
            segment_id: metadata.remote_log_segment_id().clone(),
        }
    }

    async fn log_size(
        &self,
        metadata: &RemoteLogSegmentMetadata,
    ) -> Result<u64, RemoteStorageError> {
        if let Some(record) = metadata.custom_metadata().and_then(SegmentRecord::decode) {
            return Ok(record.log_size);
        }
        match self
            .store
            .head(&self.segment_key(metadata, LOG_FILE_SUFFIX))
            .await
        {
            Ok(meta) => Ok(meta.size),
            Err(object_store::Error::NotFound { .. }) => Err(self.not_found(metadata)),
            Err(e) => Err(backend(e)),
        }
    }
}

fn not_protected(bucket: &str, reason: &str) -> RemoteStorageError {
    crate::worm::WormError::BucketNotProtected {
        bucket: bucket.to_owned(),
        reason: reason.to_owned(),
    }
    .into()
}

fn plain_protection(result: PutResult) -> ObjectProtectionReport {
    // Plain mode records what the store said; the manifest is only written in
    // archive mode, so this is never presented as a protection guarantee.
    ObjectProtectionReport::ConditionalCreate {
        e_tag: result.e_tag,
        version: result.version,
    }
}

enum Source<'a> {
    File(&'a FsPath),
    Bytes(Bytes),
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn identity(metadata: &RemoteLogSegmentMetadata) -> SegmentIdentity {
    let id = metadata.remote_log_segment_id();
    let partition = id.topic_id_partition();
    SegmentIdentity {
        topic: partition.topic().to_owned(),
        partition: partition.partition(),
        topic_id: partition.topic_id(),
        segment_id: id.id(),
        start_offset: metadata.start_offset(),
        end_offset: metadata.end_offset(),
        max_timestamp_ms: metadata.max_timestamp_ms(),
        broker_id: metadata.broker_id().0,
        segment_size_bytes: i64::from(metadata.segment_size_in_bytes()),
        leader_epochs: metadata
            .segment_leader_epochs()
            .iter()
            .map(|(epoch, start)| EpochSpan {
                epoch: EpochId(epoch.0),
                start_offset: *start,
            })
            .collect(),
    }
}

impl RemoteStorageManager for S3RemoteStorage {
    fn copy_log_segment_data(
        &self,
        metadata: &RemoteLogSegmentMetadata,
        segment: &LogSegmentData,
    ) -> Result<Option<CustomMetadata>, RemoteStorageError> {
        self.runtime
            .block_on(self.copy(metadata, segment))
            .map(Some)
    }

    fn fetch_log_segment(
        &self,
        metadata: &RemoteLogSegmentMetadata,
        start_position: BytePosition,
        end_position: Option<BytePosition>,
    ) -> Result<Bytes, RemoteStorageError> {
        self.check_fetch()?;
        self.runtime.block_on(async {
            let size = self.log_size(metadata).await?;
            let start = u64::from(start_position.0);
            let end = end_position.map(|e| u64::from(e.0));
            let invalid = || RemoteStorageError::InvalidRange { start, end, size };
            if start >= size || end.is_some_and(|e| e < start) {
                return Err(invalid());
            }
            // Kafka's end is inclusive; clamp it to the last byte.
            let last = end.map_or(size - 1, |e| e.min(size - 1));
            match self
                .store
                .get_range(
                    &self.segment_key(metadata, LOG_FILE_SUFFIX),
                    start..last + 1,
                )
                .await
            {
                Ok(bytes) => Ok(bytes),
                Err(object_store::Error::NotFound { .. }) => Err(self.not_found(metadata)),
                Err(e) => Err(backend(e)),
            }
        })
    }

    fn fetch_index(
        &self,
        metadata: &RemoteLogSegmentMetadata,
        index_type: IndexType,
    ) -> Result<Bytes, RemoteStorageError> {
        self.check_fetch()?;
        let index_missing = || RemoteStorageError::IndexNotFound {
            segment_id: metadata.remote_log_segment_id().clone(),
            index_type,
        };
        if let Some(record) = metadata.custom_metadata().and_then(SegmentRecord::decode) {
            let absent = match index_type {
                IndexType::Transaction => record.flags & FLAG_TXN_INDEX == 0,
                IndexType::ProducerSnapshot => record.flags & FLAG_PRODUCER_SNAPSHOT == 0,
                _ => false,
            };
            if absent {
                return Err(index_missing());
            }
        }
        self.runtime.block_on(async {
            match self
                .store
                .get(&self.segment_key(metadata, index_type.suffix()))
                .await
            {
                Ok(result) => result.bytes().await.map_err(backend),
                Err(object_store::Error::NotFound { .. }) => {
                    // Tell a missing optional index from a missing segment.
                    match self
                        .store
                        .head(&self.segment_key(metadata, LOG_FILE_SUFFIX))
                        .await
                    {
                        Ok(_) => Err(index_missing()),
                        Err(object_store::Error::NotFound { .. }) => Err(self.not_found(metadata)),
                        Err(e) => Err(backend(e)),
                    }
                }
                Err(e) => Err(backend(e)),
            }
        })
    }

    fn delete_log_segment_data(
        &self,
        metadata: &RemoteLogSegmentMetadata,
    ) -> Result<(), RemoteStorageError> {
        if self.worm.is_some() {
            return Err(RemoteStorageError::DeleteRefused {
                reason: format!(
                    "{} is a WORM archive; segment {} stays until bucket retention expires",
                    self.config.describe(),
                    metadata.remote_log_segment_id()
                ),
            });
        }
        self.runtime.block_on(async {
            let keys = std::iter::once(LOG_FILE_SUFFIX)
                .chain(IndexType::ALL.iter().map(|i| i.suffix()))
                .map(|suffix| self.segment_key(metadata, suffix));
            for key in keys {
                match self.store.delete(&key).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(backend(e)),
                }
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use assert2::check;

    use super::*;

    #[test]
    fn custom_metadata_round_trip_and_fits_kafka_default() {
        let plain = SegmentRecord {
            flags: FLAG_TXN_INDEX,
            log_size: 1 << 40,
            chain: None,
        };
        check!(SegmentRecord::decode(&plain.encode()) == Some(plain));
        let worm = SegmentRecord {
            flags: FLAG_WORM | FLAG_PRODUCER_SNAPSHOT,
            log_size: 7,
            chain: Some((ManifestSeq(3), ChainHead(Sha256Digest::of(b"h")))),
        };
        let encoded = worm.encode();
        check!(encoded.value().len() <= 128);
        check!(SegmentRecord::decode(&encoded) == Some(worm));
        check!(SegmentRecord::decode(&CustomMetadata::new(vec![9u8, 0])).is_none());
        check!(SegmentRecord::decode(&CustomMetadata::new(vec![1u8, FLAG_WORM, 0])).is_none());
    }
}
