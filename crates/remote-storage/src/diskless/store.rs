//! Where diskless objects live: create-only uploads, ranged reads through a
//! bounded cache, deletes by the cleaner.
//!
//! Any `object_store` backend serves (a local directory for a single node
//! or tests, S3, GCS). Every object gets a fresh random key, so an upload
//! is a create-only PUT and a retry that finds the key taken means an
//! earlier attempt of the same upload landed. Reads go through an
//! [`ObjectCache`]: objects this broker just wrote are put there whole
//! (the consumers that follow producers then never reach the store), and
//! reads of older data use a separate, smaller budget so a lagging reader
//! cannot evict the hot tail.

use {
    super::{cache::ObjectCache, types::ObjectKey},
    crate::RemoteStorageError,
    bytes::Bytes,
    object_store::{ObjectStore, ObjectStoreExt as _, PutMode, PutOptions, PutPayload, path::Path},
    std::{ops::Range, sync::Arc, time::Duration},
};

/// Upload attempts before a create-only PUT is given up.
const UPLOAD_ATTEMPTS: u32 = 5;
/// The first retry's delay; it doubles each time.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// An upload's payload goes in pieces of at most this size (views of the
/// object, not copies): a local directory writes each piece with its own
/// `write`. On the Linux VMs this was measured on, single writes of several
/// MiB into the page cache often ran near 0.4 GB/s where 1 MiB writes ran
/// near 3.5 GB/s (see `docs/BENCHMARKS.md`). HTTP stores stream the pieces
/// as one body.
const PUT_PIECE_BYTES: usize = 1 << 20;

/// The diskless object store of one broker.
#[derive(Debug, Clone)]
pub struct DisklessStore {
    store: Arc<dyn ObjectStore>,
    /// Where this store's objects go: `<prefix>/diskless[/<cluster id>]`.
    dir: String,
    cache: Arc<ObjectCache>,
}

/// An object found by [`DisklessStore::list_older_than`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedObject {
    /// Its key.
    pub key: ObjectKey,
    /// Its size in bytes.
    pub size: u64,
}

fn backend(action: &str, key: &ObjectKey, e: &object_store::Error) -> RemoteStorageError {
    RemoteStorageError::Backend {
        message: format!("{action} diskless object {key}: {e}"),
    }
}

/// `bytes` as a payload of [`PUT_PIECE_BYTES`] views.
fn pieces(bytes: &Bytes) -> PutPayload {
    (0..bytes.len())
        .step_by(PUT_PIECE_BYTES)
        .map(|at| bytes.slice(at..bytes.len().min(at + PUT_PIECE_BYTES)))
        .collect()
}

impl DisklessStore {
    /// Objects in `store` under `prefix` (may be empty), read through `cache`.
    #[must_use]
    pub fn new(store: Arc<dyn ObjectStore>, prefix: &str, cache: Arc<ObjectCache>) -> Self {
        let prefix = prefix.trim_matches('/');
        let dir = if prefix.is_empty() {
            "diskless".to_owned()
        } else {
            format!("{prefix}/diskless")
        };
        Self { store, dir, cache }
    }

    /// The same store with its new objects under the cluster's own
    /// directory, `<prefix>/diskless/<cluster id>/`: the orphan sweep lists
    /// only there, so another cluster sharing the bucket and prefix by
    /// mistake never has its objects taken for orphans.
    #[must_use]
    pub fn for_cluster(mut self, cluster_id: &str) -> Self {
        let cluster = cluster_id.trim_matches('/');
        if !cluster.is_empty() {
            self.dir = format!("{}/{cluster}", self.dir);
        }
        self
    }

    /// A key no object has: `<its directory>/<random id>`.
    #[must_use]
    pub fn new_key(&self) -> ObjectKey {
        let id = krabka_ids::kafka_uuid(uuid::Uuid::new_v4());
        ObjectKey(format!("{}/{id}", self.dir))
    }

    /// Uploads a finished object under a fresh key with a create-only PUT,
    /// retrying transient failures with backoff; on success the object is
    /// cached as hot data.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::Backend`] when every attempt failed.
    pub async fn put(&self, key: &ObjectKey, bytes: Bytes) -> Result<(), RemoteStorageError> {
        let path = Path::from(key.0.as_str());
        let mut backoff = FIRST_BACKOFF;
        let mut attempt = 1;
        loop {
            let options = PutOptions {
                mode: PutMode::Create,
                ..PutOptions::default()
            };
            match self.store.put_opts(&path, pieces(&bytes), options).await {
                // The key is ours alone: taken means an earlier attempt landed.
                Ok(_) | Err(object_store::Error::AlreadyExists { .. }) => break,
                Err(e) if attempt >= UPLOAD_ATTEMPTS => return Err(backend("upload", key, &e)),
                Err(e) => {
                    tracing::warn!(object = %key, attempt, error = %e, "diskless upload failed; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff *= 2;
                    attempt += 1;
                }
            }
        }
        self.cache.insert_written(key, bytes);
        Ok(())
    }

    /// Reads a byte range of an object, from the cache when it holds it.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::Backend`] when the store fails;
    /// [`RemoteStorageError::InvalidRange`] for a range the object does
    /// not have.
    pub async fn read(
        &self,
        key: &ObjectKey,
        range: Range<u64>,
    ) -> Result<Bytes, RemoteStorageError> {
        if let Some(bytes) = self.cache.get(key, range.clone()) {
            return Ok(bytes);
        }
        let path = Path::from(key.0.as_str());
        let bytes = self
            .store
            .get_range(&path, range.clone())
            .await
            .map_err(|e| backend("read", key, &e))?;
        if bytes.len() as u64 != range.end - range.start {
            return Err(RemoteStorageError::InvalidRange {
                start: range.start,
                end: Some(range.end),
                size: bytes.len() as u64,
            });
        }
        self.cache.insert_read(key, range.start, bytes.clone());
        Ok(bytes)
    }

    /// Deletes an object (one already gone is fine) and drops it from the
    /// cache.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::Backend`] when the store fails.
    pub async fn delete(&self, key: &ObjectKey) -> Result<(), RemoteStorageError> {
        self.cache.remove(key);
        match self.store.delete(&Path::from(key.0.as_str())).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(backend("delete", key, &e)),
        }
    }

    /// Keys of every object in this store's directory (for tests and
    /// operators: what the cleaner has left).
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::Backend`] when listing fails.
    pub async fn list(&self) -> Result<Vec<ObjectKey>, RemoteStorageError> {
        use futures_util::TryStreamExt as _;
        self.list_older_than(i64::MAX)
            .map_ok(|o| o.key)
            .try_collect()
            .await
    }

    /// The objects in this store's directory last modified before
    /// `before_ms` (milliseconds since the epoch), as the store lists them:
    /// a stream, so a bucket of any size is walked in bounded memory.
    ///
    /// # Errors
    ///
    /// Each item is [`RemoteStorageError::Backend`] when listing fails.
    pub fn list_older_than(
        &self,
        before_ms: i64,
    ) -> impl futures_util::Stream<Item = Result<ListedObject, RemoteStorageError>> + Send + '_
    {
        use futures_util::StreamExt as _;
        let dir = Path::from(self.dir.as_str());
        self.store.list(Some(&dir)).filter_map(move |listed| {
            let item = match listed {
                Ok(meta) if meta.last_modified.timestamp_millis() < before_ms => {
                    Some(Ok(ListedObject {
                        key: ObjectKey(meta.location.to_string()),
                        size: meta.size,
                    }))
                }
                Ok(_) => None,
                Err(e) => Some(Err(RemoteStorageError::Backend {
                    message: format!("list diskless objects under {}: {e}", self.dir),
                })),
            };
            std::future::ready(item)
        })
    }
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        crate::diskless::{DisklessPartition, ObjectBuilder, ObjectFile},
        assert2::check,
        object_store::local::LocalFileSystem,
    };

    fn store(dir: &std::path::Path, cache_bytes: u64) -> DisklessStore {
        let fs = LocalFileSystem::new_with_prefix(dir).unwrap();
        DisklessStore::new(
            Arc::new(fs),
            "cluster-a",
            Arc::new(ObjectCache::new(cache_bytes, cache_bytes / 4)),
        )
    }

    #[test]
    fn an_upload_goes_in_pieces_of_at_most_a_mebibyte() {
        let bytes = Bytes::from(
            (0..(5 * PUT_PIECE_BYTES / 2))
                .map(|i| i as u8)
                .collect::<Vec<u8>>(),
        );
        let payload = pieces(&bytes);
        let sizes: Vec<usize> = payload.iter().map(Bytes::len).collect();
        check!(sizes == [PUT_PIECE_BYTES, PUT_PIECE_BYTES, PUT_PIECE_BYTES / 2]);
        check!(payload.iter().flatten().copied().eq(bytes.iter().copied()));
        check!(pieces(&Bytes::new()).iter().count() == 0);
    }

    #[tokio::test]
    async fn an_object_of_several_pieces_lands_whole() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path(), 0);
        let mut builder = ObjectBuilder::new();
        let p = DisklessPartition::new(uuid::Uuid::from_u128(1), 0);
        let big: Vec<u8> = (0..3 * PUT_PIECE_BYTES + 17)
            .map(|i| (i % 251) as u8)
            .collect();
        let placed = builder.push(p, &big).unwrap();
        let bytes = builder.finish();
        let key = s.new_key();
        s.put(&key, bytes.clone()).await.unwrap();
        let whole = s.read(&key, 0..bytes.len() as u64).await.unwrap();
        check!(whole == bytes);
        let range = placed.position..placed.position + u64::from(placed.size);
        check!(s.read(&key, range).await.unwrap() == big);
    }

    #[tokio::test]
    async fn an_object_round_trips_through_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path(), 0);
        let mut builder = ObjectBuilder::new();
        let p = DisklessPartition::new(uuid::Uuid::from_u128(1), 2);
        let placed = builder.push(p, b"first batch").unwrap();
        builder.push(p, b"second").unwrap();
        let bytes = builder.finish();
        let key = s.new_key();
        check!(key.0.starts_with("cluster-a/diskless/"));
        s.put(&key, bytes.clone()).await.unwrap();
        // A retried upload of the same object is not an error.
        s.put(&key, bytes.clone()).await.unwrap();
        let range = placed.position..placed.position + u64::from(placed.size);
        check!(s.read(&key, range).await.unwrap() == &b"first batch"[..]);
        let whole = s.read(&key, 0..bytes.len() as u64).await.unwrap();
        check!(ObjectFile::parse(&whole).unwrap().batches().len() == 2);
        check!(s.list().await.unwrap() == std::slice::from_ref(&key));
        s.delete(&key).await.unwrap();
        s.delete(&key).await.unwrap();
        check!(s.list().await.unwrap().is_empty());
        check!(s.read(&key, 0..4).await.is_err());
    }

    #[tokio::test]
    async fn written_objects_are_served_from_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path(), 1 << 20);
        let key = s.new_key();
        s.put(&key, Bytes::from_static(b"0123456789"))
            .await
            .unwrap();
        // Gone from the store, still served: the read came from the cache.
        std::fs::remove_dir_all(dir.path().join("cluster-a")).unwrap();
        check!(s.read(&key, 2..5).await.unwrap() == &b"234"[..]);
    }
}
