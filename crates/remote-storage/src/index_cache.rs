//! `RemoteIndexCache`: the broker's local copy of remote segments' indexes.
//!
//! Serving a fetch from the remote tier needs the segment's offset index
//! (and for some requests its time or transaction index) before it can
//! fetch the right byte range of the `.log`. Fetching an index from the
//! remote tier per request would double the remote round trips, so, like
//! Kafka's `RemoteIndexCache`, indexes are kept in a directory named
//! [`REMOTE_INDEX_CACHE_DIR`] under a log directory, bounded in total size
//! (Kafka's `remote.log.index.file.cache.total.size.bytes`, default
//! [`DEFAULT_INDEX_CACHE_TOTAL_SIZE_BYTES`]) with least-recently-used
//! eviction.
//!
//! - Entries survive a restart: [`RemoteIndexCache::open`] adopts the files
//!   it finds, oldest first, and drops anything half-written.
//! - Each file's name carries the CRC-32C of its content; an entry read back
//!   from disk that does not match is deleted and fetched again
//!   ([`IndexCacheOutcome::Refetched`]).
//! - Offset, time and transaction indexes are decoded once before they are
//!   cached, so a damaged remote index is reported, not cached.
//! - Concurrent readers of one missing entry share a single remote fetch
//!   ([`IndexCacheOutcome::Coalesced`] for the ones that waited).
//!
//! An entry, once read, is held in memory as well, so a hit is a map lookup;
//! the same total-size bound applies to that memory.

use {
    crate::{
        cache::LruBySize,
        error::RemoteStorageError,
        index::{parse_offset_index, parse_time_index, parse_txn_index},
        metadata::{RemoteLogSegmentId, RemoteLogSegmentMetadata},
        storage_manager::{IndexType, RemoteStorageManager, decode_kafka_uuid, kafka_uuid},
    },
    bytes::Bytes,
    std::{
        collections::HashMap,
        fs, io,
        path::{Path, PathBuf},
        sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError},
        time::SystemTime,
    },
    uuid::Uuid,
};

/// Name of the cache directory under a log directory (Kafka's
/// `RemoteIndexCache.DIR_NAME`).
pub const REMOTE_INDEX_CACHE_DIR: &str = "remote-log-index-cache";

/// Default total size bound: 1 GiB, Kafka's default for
/// `remote.log.index.file.cache.total.size.bytes`.
pub const DEFAULT_INDEX_CACHE_TOTAL_SIZE_BYTES: u64 = 1024 * 1024 * 1024;

/// How [`RemoteIndexCache::get`] got its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexCacheOutcome {
    /// Served from the cache.
    Hit,
    /// Not cached; fetched from the remote tier by this call.
    Miss,
    /// Not cached; another call's fetch in progress served this one too.
    Coalesced,
    /// The cached copy was corrupt; it was dropped and fetched again.
    Refetched,
}

/// Counters of a [`RemoteIndexCache`] since it was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IndexCacheStats {
    /// Calls answered from the cache.
    pub hits: u64,
    /// Calls that fetched from the remote tier (including refetches).
    pub misses: u64,
    /// Calls that waited for another call's fetch.
    pub coalesced: u64,
    /// Cached entries found corrupt and fetched again.
    pub corrupt_refetches: u64,
    /// Entries evicted to keep within the size bound.
    pub evictions: u64,
    /// Entries cached now.
    pub entries: usize,
    /// Bytes cached now.
    pub size_bytes: u64,
}

type Key = (Uuid, IndexType);

#[derive(Debug)]
struct Entry {
    path: PathBuf,
    crc: u32,
    /// The content once read in this process.
    loaded: Option<Bytes>,
}

/// A remote fetch in progress that other readers of the same key wait for.
#[derive(Debug, Default)]
struct Flight {
    done: Mutex<bool>,
    finished: Condvar,
}

#[derive(Debug)]
struct Inner {
    lru: LruBySize<Key, Entry>,
    in_flight: HashMap<Key, Arc<Flight>>,
    stats: IndexCacheStats,
}

/// A disk-backed, size-bounded LRU cache of remote segment indexes.
pub struct RemoteIndexCache {
    dir: PathBuf,
    storage: Arc<dyn RemoteStorageManager>,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for RemoteIndexCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteIndexCache")
            .field("dir", &self.dir)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// `<start offset>_<segment id>_<crc32c, 8 hex digits><suffix>`: Kafka's
/// `<start offset>_<segment id><suffix>` with the content's checksum added.
fn cache_file_name(start_offset: i64, id: Uuid, crc: u32, index_type: IndexType) -> String {
    format!(
        "{start_offset}_{}_{crc:08x}{}",
        kafka_uuid(id),
        index_type.suffix()
    )
}

fn parse_cache_file_name(name: &str) -> Option<(Uuid, u32, IndexType)> {
    let index_type = IndexType::ALL
        .into_iter()
        .find(|index| name.ends_with(index.suffix()))?;
    let stem = name.strip_suffix(index_type.suffix())?;
    let (offset, rest) = stem.split_once('_')?;
    if offset.is_empty() || !offset.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let id = decode_kafka_uuid(rest.get(..22)?).ok()?;
    let crc_text = rest.get(22..)?.strip_prefix('_')?;
    if crc_text.len() != 8 {
        return None;
    }
    let crc = u32::from_str_radix(crc_text, 16).ok()?;
    Some((id, crc, index_type))
}

/// Decodes the indexes this crate knows, so a damaged one is refused
/// before it is cached.
fn validate(index_type: IndexType, bytes: &[u8]) -> Result<(), RemoteStorageError> {
    match index_type {
        IndexType::Offset => parse_offset_index(bytes).map(drop),
        IndexType::Timestamp => parse_time_index(bytes).map(drop),
        IndexType::Transaction => parse_txn_index(bytes).map(drop),
        IndexType::LeaderEpoch | IndexType::ProducerSnapshot => Ok(()),
    }
}

/// Removes a file the cache owns; a file already gone is fine.
fn remove_file(path: &Path) {
    // Best effort: a file that cannot be removed now is not referenced any
    // more and is dropped by the next `open`.
    if let Err(error) = fs::remove_file(path)
        && error.kind() != io::ErrorKind::NotFound
    {
        tracing::warn!(path = %path.display(), %error, "could not remove remote index cache file");
    }
}

/// Wakes the readers waiting on a fetch and retires it, however the fetch
/// ends (an error or a panic included).
struct FlightGuard<'a> {
    cache: &'a RemoteIndexCache,
    key: Key,
    flight: Arc<Flight>,
}

impl Drop for FlightGuard<'_> {
    fn drop(&mut self) {
        self.cache.lock().in_flight.remove(&self.key);
        *self
            .flight
            .done
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = true;
        self.flight.finished.notify_all();
    }
}

enum Lookup {
    Hit(Bytes),
    /// Cached before a restart; read and check the file outside the lock.
    OnDisk(PathBuf, u32),
    Wait(Arc<Flight>),
    Fetch(Arc<Flight>),
}

impl RemoteIndexCache {
    /// Opens (creating if needed) the cache in
    /// `<log_dir>/`[`REMOTE_INDEX_CACHE_DIR`], holding at most
    /// `total_size_bytes`, fetching missing indexes through `storage`.
    /// Files left by an earlier run are adopted (oldest first, evicting if
    /// the bound shrank); names that are not cache entries, such as the
    /// temporary file of an interrupted write, are deleted.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::Io`] if the directory cannot be created or
    /// listed.
    pub fn open(
        log_dir: &Path,
        total_size_bytes: u64,
        storage: Arc<dyn RemoteStorageManager>,
    ) -> Result<Self, RemoteStorageError> {
        let dir = log_dir.join(REMOTE_INDEX_CACHE_DIR);
        fs::create_dir_all(&dir)
            .map_err(|e| RemoteStorageError::io("create directory", &dir, e))?;
        let mut found = Vec::new();
        for entry in fs::read_dir(&dir).map_err(|e| RemoteStorageError::io("list", &dir, e))? {
            let entry = entry.map_err(|e| RemoteStorageError::io("list", &dir, e))?;
            let path = entry.path();
            let Ok(metadata) = entry.metadata() else {
                continue;
            };
            if !metadata.is_file() {
                continue;
            }
            let parsed = entry.file_name().to_str().and_then(parse_cache_file_name);
            match parsed {
                Some((id, crc, index_type)) => {
                    let modified = metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                    found.push((modified, (id, index_type), path, crc, metadata.len()));
                }
                None => remove_file(&path),
            }
        }
        found.sort_by_key(|(modified, ..)| *modified);
        let mut inner = Inner {
            lru: LruBySize::new(total_size_bytes),
            in_flight: HashMap::new(),
            stats: IndexCacheStats::default(),
        };
        for (_, key, path, crc, size) in found {
            let entry = Entry {
                path,
                crc,
                loaded: None,
            };
            for (_, evicted) in inner.lru.insert(key, entry, size) {
                remove_file(&evicted.path);
            }
        }
        Ok(Self {
            dir,
            storage,
            inner: Mutex::new(inner),
        })
    }

    /// The cache directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    // Bookkeeping changes are applied whole under the lock, so a poisoned
    // lock still guards a consistent state.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The `index_type` index of the segment, from the cache or fetched
    /// from the remote tier (then cached), and how it was obtained.
    ///
    /// # Errors
    ///
    /// The remote tier's error when a fetch fails (e.g.
    /// [`RemoteStorageError::IndexNotFound`] for an index the segment does
    /// not have), [`RemoteStorageError::CorruptIndex`] if the fetched index
    /// does not decode, or [`RemoteStorageError::Io`] if the cache file
    /// cannot be written.
    pub fn get(
        &self,
        metadata: &RemoteLogSegmentMetadata,
        index_type: IndexType,
    ) -> Result<(Bytes, IndexCacheOutcome), RemoteStorageError> {
        let key = (metadata.remote_log_segment_id().id(), index_type);
        let mut waited = false;
        let mut corrupt = false;
        loop {
            match self.lookup(key) {
                Lookup::Hit(bytes) => {
                    let mut inner = self.lock();
                    let outcome = if waited {
                        inner.stats.coalesced += 1;
                        IndexCacheOutcome::Coalesced
                    } else {
                        inner.stats.hits += 1;
                        IndexCacheOutcome::Hit
                    };
                    return Ok((bytes, outcome));
                }
                Lookup::OnDisk(path, crc) => {
                    let intact = fs::read(&path)
                        .ok()
                        .filter(|bytes| crc32c::crc32c(bytes) == crc)
                        .map(Bytes::from);
                    let mut inner = self.lock();
                    match intact {
                        Some(bytes) => {
                            if let Some(entry) = inner.lru.get_mut(&key)
                                && entry.crc == crc
                            {
                                entry.loaded = Some(bytes.clone());
                            }
                            if !waited {
                                inner.stats.hits += 1;
                            } else {
                                inner.stats.coalesced += 1;
                            }
                            let outcome = if waited {
                                IndexCacheOutcome::Coalesced
                            } else {
                                IndexCacheOutcome::Hit
                            };
                            return Ok((bytes, outcome));
                        }
                        None => {
                            if inner
                                .lru
                                .get_mut(&key)
                                .is_some_and(|entry| entry.path == path)
                            {
                                inner.lru.remove(&key);
                            }
                            drop(inner);
                            tracing::warn!(path = %path.display(), "corrupt remote index cache entry, fetching again");
                            remove_file(&path);
                            corrupt = true;
                        }
                    }
                }
                Lookup::Wait(flight) => {
                    let mut done = flight.done.lock().unwrap_or_else(PoisonError::into_inner);
                    while !*done {
                        done = flight
                            .finished
                            .wait(done)
                            .unwrap_or_else(PoisonError::into_inner);
                    }
                    // Look again: the fetch may have failed, then this call
                    // tries itself.
                    waited = true;
                }
                Lookup::Fetch(flight) => {
                    let guard = FlightGuard {
                        cache: self,
                        key,
                        flight,
                    };
                    let bytes = self.fetch_and_store(metadata, key)?;
                    drop(guard);
                    let mut inner = self.lock();
                    inner.stats.misses += 1;
                    let outcome = if corrupt {
                        inner.stats.corrupt_refetches += 1;
                        IndexCacheOutcome::Refetched
                    } else {
                        IndexCacheOutcome::Miss
                    };
                    return Ok((bytes, outcome));
                }
            }
        }
    }

    fn lookup(&self, key: Key) -> Lookup {
        let mut inner = self.lock();
        if let Some(entry) = inner.lru.get_mut(&key) {
            return match &entry.loaded {
                Some(bytes) => Lookup::Hit(bytes.clone()),
                None => Lookup::OnDisk(entry.path.clone(), entry.crc),
            };
        }
        if let Some(flight) = inner.in_flight.get(&key) {
            return Lookup::Wait(Arc::clone(flight));
        }
        let flight = Arc::new(Flight::default());
        inner.in_flight.insert(key, Arc::clone(&flight));
        Lookup::Fetch(flight)
    }

    fn fetch_and_store(
        &self,
        metadata: &RemoteLogSegmentMetadata,
        key: Key,
    ) -> Result<Bytes, RemoteStorageError> {
        let (id, index_type) = key;
        let bytes = self.storage.fetch_index(metadata, index_type)?;
        validate(index_type, &bytes)?;
        let crc = crc32c::crc32c(&bytes);
        let path = self.dir.join(cache_file_name(
            metadata.start_offset(),
            id,
            crc,
            index_type,
        ));
        // Written under a name `open` does not adopt, then renamed: a crash
        // leaves either no entry or a whole one.
        let temp = self
            .dir
            .join(format!(".tmp-{}", kafka_uuid(Uuid::new_v4())));
        fs::write(&temp, &bytes).map_err(|e| RemoteStorageError::io("write", &temp, e))?;
        if let Err(error) = fs::rename(&temp, &path) {
            remove_file(&temp);
            return Err(RemoteStorageError::io("rename", temp, error));
        }
        let size = bytes.len() as u64;
        let mut inner = self.lock();
        if size > inner.lru.max_weight() {
            // Too big to keep at all: serve it, but keep no copy.
            inner.stats.evictions += 1;
            drop(inner);
            remove_file(&path);
            return Ok(bytes);
        }
        let entry = Entry {
            path: path.clone(),
            crc,
            loaded: Some(bytes.clone()),
        };
        for (evicted_key, evicted) in inner.lru.insert(key, entry, size) {
            if evicted_key == key {
                // A copy of this key replaced by the one just written; its
                // file may have the very same name.
                if evicted.path != path {
                    remove_file(&evicted.path);
                }
            } else {
                inner.stats.evictions += 1;
                remove_file(&evicted.path);
            }
        }
        Ok(bytes)
    }

    /// Drops every cached index of `segment_id` (when the segment is
    /// deleted from the remote tier).
    pub fn remove_segment(&self, segment_id: &RemoteLogSegmentId) {
        let id = segment_id.id();
        let mut inner = self.lock();
        for key in inner.lru.keys_where(|(entry_id, _)| *entry_id == id) {
            if let Some(entry) = inner.lru.remove(&key) {
                remove_file(&entry.path);
            }
        }
    }

    /// The counters and current size.
    #[must_use]
    pub fn stats(&self) -> IndexCacheStats {
        let inner = self.lock();
        IndexCacheStats {
            entries: inner.lru.len(),
            size_bytes: inner.lru.total_weight(),
            ..inner.stats
        }
    }
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        crate::{BytePosition, CustomMetadata, LogSegmentData, test_support::segment},
        assert2::check,
        std::{
            sync::atomic::{AtomicUsize, Ordering},
            thread,
            time::Duration,
        },
    };

    /// A remote tier that serves made-up offset indexes and counts fetches.
    #[derive(Default)]
    struct CountingStorage {
        fetches: AtomicUsize,
        delay: Option<Duration>,
        entries: usize,
    }

    impl CountingStorage {
        fn index_for(&self, metadata: &RemoteLogSegmentMetadata) -> Bytes {
            let mut bytes = Vec::new();
            let start = u32::try_from(metadata.start_offset()).unwrap();
            for n in 0..u32::try_from(self.entries.max(1)).unwrap() {
                bytes.extend_from_slice(&(start % 1000 + n + 1).to_be_bytes());
                bytes.extend_from_slice(&(n * 100 + 1).to_be_bytes());
            }
            Bytes::from(bytes)
        }
    }

    impl RemoteStorageManager for CountingStorage {
        fn copy_log_segment_data(
            &self,
            _: &RemoteLogSegmentMetadata,
            _: &LogSegmentData,
        ) -> Result<Option<CustomMetadata>, RemoteStorageError> {
            Err(RemoteStorageError::WriteRefused {
                reason: "read-only test tier".into(),
            })
        }

        fn fetch_log_segment(
            &self,
            metadata: &RemoteLogSegmentMetadata,
            _: BytePosition,
            _: Option<BytePosition>,
        ) -> Result<Bytes, RemoteStorageError> {
            Err(RemoteStorageError::SegmentNotFound {
                segment_id: metadata.remote_log_segment_id().clone(),
            })
        }

        fn fetch_index(
            &self,
            metadata: &RemoteLogSegmentMetadata,
            index_type: IndexType,
        ) -> Result<Bytes, RemoteStorageError> {
            self.fetches.fetch_add(1, Ordering::SeqCst);
            if let Some(delay) = self.delay {
                // Holds the fetch open so the other readers pile up on it.
                thread::sleep(delay);
            }
            match index_type {
                IndexType::Offset => Ok(self.index_for(metadata)),
                IndexType::Timestamp => Ok(Bytes::from_static(&[0xFF; 5])),
                _ => Err(RemoteStorageError::IndexNotFound {
                    segment_id: metadata.remote_log_segment_id().clone(),
                    index_type,
                }),
            }
        }

        fn delete_log_segment_data(
            &self,
            _: &RemoteLogSegmentMetadata,
        ) -> Result<(), RemoteStorageError> {
            Ok(())
        }
    }

    fn cache_files(cache: &RemoteIndexCache) -> usize {
        fs::read_dir(cache.dir()).unwrap().count()
    }

    #[test]
    fn miss_then_hit_then_restart_hit() {
        let log_dir = tempfile::tempdir().unwrap();
        let storage = Arc::new(CountingStorage::default());
        let metadata = segment(0, 9);
        let expected = storage.index_for(&metadata);
        {
            let cache = RemoteIndexCache::open(log_dir.path(), 1_000, storage.clone()).unwrap();
            check!(cache.dir() == log_dir.path().join("remote-log-index-cache"));
            check!(
                cache.get(&metadata, IndexType::Offset).unwrap()
                    == (expected.clone(), IndexCacheOutcome::Miss)
            );
            check!(
                cache.get(&metadata, IndexType::Offset).unwrap()
                    == (expected.clone(), IndexCacheOutcome::Hit)
            );
            let stats = cache.stats();
            check!((stats.hits, stats.misses, stats.entries, stats.size_bytes) == (1, 1, 1, 8));
        }
        // A leftover temporary file of an interrupted write is swept.
        fs::write(
            log_dir
                .path()
                .join(REMOTE_INDEX_CACHE_DIR)
                .join(".tmp-junk"),
            b"half",
        )
        .unwrap();
        let cache = RemoteIndexCache::open(log_dir.path(), 1_000, storage.clone()).unwrap();
        check!(cache_files(&cache) == 1);
        check!(cache.stats().entries == 1);
        check!(
            cache.get(&metadata, IndexType::Offset).unwrap() == (expected, IndexCacheOutcome::Hit)
        );
        check!(
            storage.fetches.load(Ordering::SeqCst) == 1,
            "the restart did not refetch"
        );
    }

    #[test]
    fn errors_are_not_cached_and_bad_indexes_are_refused() {
        let log_dir = tempfile::tempdir().unwrap();
        let storage = Arc::new(CountingStorage::default());
        let cache = RemoteIndexCache::open(log_dir.path(), 1_000, storage.clone()).unwrap();
        let metadata = segment(0, 9);
        for _ in 0..2 {
            assert2::assert!(let Err(RemoteStorageError::IndexNotFound { .. }) = cache.get(&metadata, IndexType::Transaction));
            assert2::assert!(let Err(RemoteStorageError::CorruptIndex { .. }) = cache.get(&metadata, IndexType::Timestamp));
        }
        check!(storage.fetches.load(Ordering::SeqCst) == 4);
        check!(cache.stats().entries == 0);
        check!(cache_files(&cache) == 0);
    }

    #[test]
    fn corrupt_entry_is_detected_and_refetched() {
        let log_dir = tempfile::tempdir().unwrap();
        let storage = Arc::new(CountingStorage {
            entries: 3,
            ..Default::default()
        });
        let metadata = segment(0, 9);
        let dir = {
            let cache = RemoteIndexCache::open(log_dir.path(), 1_000, storage.clone()).unwrap();
            cache.get(&metadata, IndexType::Offset).unwrap();
            cache.dir().to_path_buf()
        };
        let file = fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
        let mut bytes = fs::read(&file).unwrap();
        bytes[5] ^= 0x40;
        fs::write(&file, bytes).unwrap();

        let cache = RemoteIndexCache::open(log_dir.path(), 1_000, storage.clone()).unwrap();
        let (bytes, outcome) = cache.get(&metadata, IndexType::Offset).unwrap();
        check!(outcome == IndexCacheOutcome::Refetched);
        check!(bytes == storage.index_for(&metadata));
        check!(cache.stats().corrupt_refetches == 1);
        check!(storage.fetches.load(Ordering::SeqCst) == 2);
        check!(cache.get(&metadata, IndexType::Offset).unwrap().1 == IndexCacheOutcome::Hit);
        check!(cache_files(&cache) == 1);
    }

    #[test]
    fn lru_eviction_order_and_size_bound() {
        let log_dir = tempfile::tempdir().unwrap();
        // Every index is 16 bytes; room for three.
        let storage = Arc::new(CountingStorage {
            entries: 2,
            ..Default::default()
        });
        let cache = RemoteIndexCache::open(log_dir.path(), 48, storage.clone()).unwrap();
        let segments: Vec<_> = (0..4).map(|n| segment(n * 10, n * 10 + 9)).collect();
        let get = |n: usize| cache.get(&segments[n], IndexType::Offset).unwrap().1;
        check!(get(0) == IndexCacheOutcome::Miss);
        check!(get(1) == IndexCacheOutcome::Miss);
        check!(get(2) == IndexCacheOutcome::Miss);
        check!(get(0) == IndexCacheOutcome::Hit);
        check!(
            get(3) == IndexCacheOutcome::Miss,
            "evicts 1, the least recently used"
        );
        check!(cache.stats().evictions == 1);
        check!(get(0) == IndexCacheOutcome::Hit);
        check!(get(2) == IndexCacheOutcome::Hit);
        check!(get(3) == IndexCacheOutcome::Hit);
        check!(get(1) == IndexCacheOutcome::Miss);
        let stats = cache.stats();
        check!(stats.size_bytes <= 48);
        check!(stats.entries == 3);
        check!(cache_files(&cache) == 3, "evicted files are deleted");

        // Reopened with a smaller bound, the oldest files go.
        drop(cache);
        let cache = RemoteIndexCache::open(log_dir.path(), 16, storage.clone()).unwrap();
        check!(cache.stats().entries == 1);
        check!(cache_files(&cache) == 1);

        // An index larger than the whole bound is served, not kept.
        let big = Arc::new(CountingStorage {
            entries: 10,
            ..Default::default()
        });
        let cache = RemoteIndexCache::open(log_dir.path(), 16, big).unwrap();
        check!(cache.get(&segments[0], IndexType::Offset).unwrap().1 == IndexCacheOutcome::Miss);
        check!(cache.get(&segments[0], IndexType::Offset).unwrap().1 == IndexCacheOutcome::Miss);
        check!(cache.stats().size_bytes <= 16);
    }

    #[test]
    fn remove_segment_drops_its_files() {
        let log_dir = tempfile::tempdir().unwrap();
        let storage = Arc::new(CountingStorage::default());
        let cache = RemoteIndexCache::open(log_dir.path(), 1_000, storage).unwrap();
        let (a, b) = (segment(0, 9), segment(10, 19));
        cache.get(&a, IndexType::Offset).unwrap();
        cache.get(&b, IndexType::Offset).unwrap();
        cache.remove_segment(a.remote_log_segment_id());
        check!(cache.stats().entries == 1);
        check!(cache_files(&cache) == 1);
        check!(cache.get(&a, IndexType::Offset).unwrap().1 == IndexCacheOutcome::Miss);
    }

    #[test]
    fn concurrent_readers_of_a_missing_entry_fetch_it_once() {
        let log_dir = tempfile::tempdir().unwrap();
        let storage = Arc::new(CountingStorage {
            delay: Some(Duration::from_millis(100)),
            ..Default::default()
        });
        let cache =
            Arc::new(RemoteIndexCache::open(log_dir.path(), 1_000, storage.clone()).unwrap());
        let metadata = segment(0, 9);
        let barrier = Arc::new(std::sync::Barrier::new(8));
        let readers: Vec<_> = (0..8)
            .map(|_| {
                let (cache, metadata, barrier) =
                    (Arc::clone(&cache), metadata.clone(), Arc::clone(&barrier));
                thread::spawn(move || {
                    barrier.wait();
                    cache.get(&metadata, IndexType::Offset).unwrap()
                })
            })
            .collect();
        let results: Vec<_> = readers.into_iter().map(|r| r.join().unwrap()).collect();
        check!(storage.fetches.load(Ordering::SeqCst) == 1);
        check!(
            results
                .iter()
                .all(|(bytes, _)| *bytes == storage.index_for(&metadata))
        );
        let misses = results
            .iter()
            .filter(|(_, o)| *o == IndexCacheOutcome::Miss)
            .count();
        check!(misses == 1);
        let stats = cache.stats();
        check!(stats.misses + stats.hits + stats.coalesced == 8);
    }

    #[test]
    fn cache_file_names_round_trip() {
        let id = Uuid::from_u128(0x1234_5678);
        for index in IndexType::ALL {
            let name = cache_file_name(42, id, 0xDEAD_BEEF, index);
            check!(parse_cache_file_name(&name) == Some((id, 0xDEAD_BEEF, index)));
        }
        for junk in [
            "",
            ".tmp-x",
            "42_short_deadbeef.index",
            "x_AAAAAAAAAAAAAAAAAAAAyg_deadbeef.index",
            "42_AAAAAAAAAAAAAAAAAAAAyg_deadbee.index",
        ] {
            check!(parse_cache_file_name(junk) == None, "{junk}");
        }
    }
}
