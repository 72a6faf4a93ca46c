//! [`WormArchiver`]: protected writes and manifest sealing.
//!
//! The archiver is the write side of archive mode. `S3RemoteStorage` hands it
//! each object of a segment copy and, once all are stored, the manifest body;
//! the archiver stamps the body onto the partition's chain, signs it, stores
//! it with a conditional create, and only then advances the in-memory tip.
//!
//! Protection per object:
//!
//! - below the multipart threshold: one `PutMode::Create` (the store refuses
//!   an existing key);
//! - multipart: an empty conditional create first *reserves* the key (on S3;
//!   on GCS a locked retention policy already forbids replacing an existing
//!   object), then the upload completes over it, and the result is read back
//!   to confirm the SHA-256, size and that the current version is the one
//!   the upload produced.
//!
//! The tip of a partition is recovered from the bucket on its first copy
//! after start (all manifests are read and authenticated); a chain that does
//! not authenticate is never extended.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use bytes::Bytes;
use futures_util::{StreamExt as _, TryStreamExt as _};
use object_store::{
    GetOptions, ObjectStore, ObjectStoreExt as _, PutMode, PutOptions, PutPayload, path::Path,
};

use super::{
    WormConfig, WormError,
    authenticate::authenticate_archive,
    chain::{ChainHead, WORM_CHAIN_RECORD_VERSION, WormChainRecord, next_chain_stamp},
    digest::Sha256Digest,
    manifest::{MANIFEST_SUFFIX, MAX_MANIFEST_BYTES, ManifestBody, ManifestSeq, SegmentManifest},
    sign::SealedManifest,
};
use crate::{metadata::TopicIdPartition, storage_manager::partition_dir_name};

type Tip = Option<(ManifestSeq, ChainHead)>;
/// `None` until recovered from the bucket.
type TipSlot = Arc<tokio::sync::Mutex<Option<Tip>>>;

/// Writes archive objects with write-once protection and seals each segment
/// copy into its partition's signed manifest chain.
pub struct WormArchiver {
    store: Arc<dyn ObjectStore>,
    prefix: String,
    config: WormConfig,
    reserve_multipart_keys: bool,
    tips: Mutex<HashMap<String, TipSlot>>,
    records: Mutex<HashMap<TopicIdPartition, WormChainRecord>>,
}

impl std::fmt::Debug for WormArchiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WormArchiver")
            .field("store", &self.store.to_string())
            .field("prefix", &self.prefix)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn create_opts() -> PutOptions {
    PutOptions::from(PutMode::Create)
}

fn map_put_error(key: &Path, e: object_store::Error) -> WormError {
    match e {
        object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. } => {
            WormError::AlreadyExists {
                key: key.to_string(),
            }
        }
        other => WormError::store(other),
    }
}

impl WormArchiver {
    /// An archiver over `store`, writing under `prefix` (empty for the bucket
    /// root). `reserve_multipart_keys` is `true` for S3 (versioned bucket:
    /// reserve, then complete over the reservation) and `false` for GCS
    /// (locked retention: an existing object cannot be replaced at all).
    #[must_use]
    pub fn new(
        store: Arc<dyn ObjectStore>,
        prefix: impl Into<String>,
        config: WormConfig,
        reserve_multipart_keys: bool,
    ) -> Self {
        Self {
            store,
            prefix: prefix.into().trim_matches('/').to_owned(),
            config,
            reserve_multipart_keys,
            tips: Mutex::new(HashMap::new()),
            records: Mutex::new(HashMap::new()),
        }
    }

    /// The archive settings.
    #[must_use]
    pub fn config(&self) -> &WormConfig {
        &self.config
    }

    /// The key of `name` in `partition`'s directory.
    #[must_use]
    pub fn key(&self, partition: &TopicIdPartition, name: &str) -> Path {
        let dir = partition_dir_name(partition);
        if self.prefix.is_empty() {
            Path::from(format!("{dir}/{name}"))
        } else {
            Path::from(format!("{}/{dir}/{name}", self.prefix))
        }
    }

    /// Stores `data` at `key` only if the key is free.
    ///
    /// # Errors
    ///
    /// [`WormError::AlreadyExists`] if the key is taken, [`WormError::Store`]
    /// if the store fails.
    pub async fn create_object(
        &self,
        key: &Path,
        data: Bytes,
    ) -> Result<super::ObjectProtectionReport, WormError> {
        let result = self
            .store
            .put_opts(key, PutPayload::from(data), create_opts())
            .await
            .map_err(|e| map_put_error(key, e))?;
        Ok(super::ObjectProtectionReport::ConditionalCreate {
            e_tag: result.e_tag,
            version: result.version,
        })
    }

    /// Uploads `file` (of `size` bytes, in `chunk_size` parts) to `key` with
    /// multipart upload, protected as described in the module docs. Returns
    /// the content digest.
    ///
    /// # Errors
    ///
    /// [`WormError::AlreadyExists`] if the key is taken,
    /// [`WormError::ReadBackMismatch`] if the stored object is not what was
    /// uploaded, [`WormError::Io`] or [`WormError::Store`] on failures.
    pub async fn create_multipart_object(
        &self,
        key: &Path,
        file: &std::path::Path,
        chunk_size: usize,
    ) -> Result<(u64, Sha256Digest, super::ObjectProtectionReport), WormError> {
        let reservation_version = if self.reserve_multipart_keys {
            match self.create_object(key, Bytes::new()).await? {
                super::ObjectProtectionReport::ConditionalCreate { version, .. } => version,
                super::ObjectProtectionReport::ReservedMultipart { version, .. } => version,
            }
        } else {
            // No reservation: the key must at least be free now.
            match self.store.head(key).await {
                Ok(_) => {
                    return Err(WormError::AlreadyExists {
                        key: key.to_string(),
                    });
                }
                Err(object_store::Error::NotFound { .. }) => None,
                Err(e) => return Err(WormError::store(e)),
            }
        };
        let uploaded = crate::s3::upload_file_multipart(&*self.store, key, file, chunk_size)
            .await
            .map_err(|e| match e {
                crate::RemoteStorageError::Io { source, .. } => WormError::Io {
                    path: file.display().to_string(),
                    source,
                },
                other => WormError::store(other),
            })?;

        // Read back exactly the version the upload produced (when the store
        // reports versions) and confirm it is also the current one.
        let options = GetOptions::new().with_version(uploaded.result.version.clone());
        let got = self
            .store
            .get_opts(key, options)
            .await
            .map_err(WormError::store)?;
        let current = self.store.head(key).await.map_err(WormError::store)?;
        let mismatch = |reason: String| WormError::ReadBackMismatch {
            key: key.to_string(),
            reason,
        };
        if uploaded.result.version.is_some() && current.version != uploaded.result.version {
            return Err(mismatch(format!(
                "current version {:?} is not the uploaded version {:?}",
                current.version, uploaded.result.version
            )));
        }
        let mut hasher = sha2::Sha256::default();
        let mut read = 0u64;
        let mut stream = got.into_stream();
        while let Some(chunk) = stream.try_next().await.map_err(WormError::store)? {
            sha2::Digest::update(&mut hasher, &chunk);
            read = read.saturating_add(chunk.len() as u64);
        }
        let digest = Sha256Digest(sha2::Digest::finalize(hasher).into());
        if read != uploaded.size || digest != uploaded.sha256 {
            return Err(mismatch(format!(
                "read back {read} bytes with SHA-256 {digest}, uploaded {} bytes with {}",
                uploaded.size, uploaded.sha256
            )));
        }
        Ok((
            uploaded.size,
            uploaded.sha256,
            super::ObjectProtectionReport::ReservedMultipart {
                e_tag: uploaded.result.e_tag,
                version: uploaded.result.version,
                reservation_version,
                parts: uploaded.parts,
            },
        ))
    }

    fn slot(&self, partition: &TopicIdPartition) -> TipSlot {
        let mut tips = self
            .tips
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        tips.entry(partition_dir_name(partition))
            .or_default()
            .clone()
    }

    /// Reads and authenticates `partition`'s manifests in the bucket and
    /// returns the chain tip (`None`: no manifests yet).
    ///
    /// # Errors
    ///
    /// [`WormError::ChainBroken`] if the existing chain does not
    /// authenticate against [`WormConfig::trusted_keys`],
    /// [`WormError::Store`] if the store fails.
    pub async fn recover_tip(&self, partition: &TopicIdPartition) -> Result<Tip, WormError> {
        let dir = self.key(partition, "");
        let listed: Vec<_> = self
            .store
            .list(Some(&dir))
            .try_collect()
            .await
            .map_err(WormError::store)?;
        let mut found = Vec::new();
        for meta in listed {
            let Some(name) = meta.location.filename().map(str::to_owned) else {
                continue;
            };
            if !name.ends_with(MANIFEST_SUFFIX) {
                continue;
            }
            if meta.size > MAX_MANIFEST_BYTES {
                return Err(WormError::ChainBroken {
                    partition: partition.to_string(),
                    reason: format!("manifest {name} is {} bytes", meta.size),
                });
            }
            let bytes = self
                .store
                .get(&meta.location)
                .await
                .map_err(WormError::store)?
                .bytes()
                .await
                .map_err(WormError::store)?;
            let sealed = SealedManifest::from_json(&bytes).map_err(|e| WormError::ChainBroken {
                partition: partition.to_string(),
                reason: format!("{name}: {e}"),
            })?;
            found.push((name, sealed));
        }
        let auth = authenticate_archive(partition, found, &self.config.trusted_keys(), None);
        if let Some(first) = auth.breaks.first() {
            return Err(WormError::ChainBroken {
                partition: partition.to_string(),
                reason: first.to_string(),
            });
        }
        Ok(auth.tip())
    }

    /// Stamps `body` onto `partition`'s chain, signs it and stores it next to
    /// the segment's objects. Copies of one partition are sealed one at a
    /// time; the tip advances only after the manifest is stored.
    ///
    /// # Errors
    ///
    /// As for [`recover_tip`](Self::recover_tip), and
    /// [`WormError::AlreadyExists`] if the manifest key is taken.
    pub async fn seal(
        &self,
        partition: &TopicIdPartition,
        body: ManifestBody,
    ) -> Result<(SealedManifest, WormChainRecord), WormError> {
        let slot = self.slot(partition);
        let mut tip = slot.lock().await;
        let current = match *tip {
            Some(current) => current,
            None => {
                let recovered = self.recover_tip(partition).await?;
                *tip = Some(recovered);
                recovered
            }
        };
        let manifest = SegmentManifest {
            stamp: next_chain_stamp(current),
            body,
        };
        let sealed = SealedManifest::seal(manifest, &self.config.signing_key);
        let key = self.key(partition, &sealed.manifest.body.manifest_name());
        self.create_object(&key, Bytes::from(sealed.to_json()))
            .await?;
        *tip = Some(Some((sealed.manifest.stamp.seq, sealed.head)));
        let identity = &sealed.manifest.body.identity;
        let record = WormChainRecord {
            version: WORM_CHAIN_RECORD_VERSION,
            topic: identity.topic.clone(),
            partition: identity.partition,
            topic_id: identity.topic_id,
            seq: sealed.manifest.stamp.seq,
            head: sealed.head,
            segment_id: identity.segment_id,
            end_offset: identity.end_offset,
        };
        self.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(partition.clone(), record.clone());
        Ok((sealed, record))
    }

    /// The newest chain record sealed for `partition` by this process, for
    /// the broker to publish in the metadata topic.
    #[must_use]
    pub fn last_record(&self, partition: &TopicIdPartition) -> Option<WormChainRecord> {
        self.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(partition)
            .cloned()
    }
}

/// Drains a stream of listed keys into names (used by the verifier too).
pub(crate) async fn list_all(
    store: &dyn ObjectStore,
    prefix: Option<&Path>,
) -> Result<Vec<object_store::ObjectMeta>, WormError> {
    store
        .list(prefix)
        .map(|r| r.map_err(WormError::store))
        .try_collect()
        .await
}
