//! A filesystem [`RemoteStorageManager`]: Kafka's `LocalTieredStorage`.
//!
//! The remote tier is a directory tree with Kafka's names:
//! `<root>/<topic>-<partition>-<topic id>/<start offset>-<segment id>.<suffix>`
//! (see [`partition_dir_name`] and [`segment_file_name`]). It backs tests,
//! single-node setups and any mounted shared filesystem.
//!
//! # Atomic copies
//!
//! A copy first writes every file into a private staging directory
//! (`.copy-<segment id>-<nonce>` inside the partition directory, a name no
//! segment file can have), syncs each file and the directory, then renames
//! the files into place with the `.log` **last**. A segment is visible only
//! when its `.log` exists, and fetches of indexes check that first, so a
//! crash at any point leaves either no visible segment (stray indexes or a
//! staging directory stay behind, ignored, and are removed by the next copy
//! or delete of that segment) or the complete one.
//!
//! Ranged fetches seek into the `.log` and read only the bytes asked for.

use {
    crate::{
        error::RemoteStorageError,
        index::BytePosition,
        metadata::{CustomMetadata, RemoteLogSegmentMetadata},
        storage_manager::{
            IndexType, LOG_FILE_SUFFIX, LogSegmentData, RemoteStorageManager, is_legal_topic_name,
            kafka_uuid, parse_segment_file_name, partition_dir_name, segment_file_name,
        },
    },
    bytes::Bytes,
    std::{
        fs::{self, File},
        io::{self, Read, Seek, SeekFrom, Write},
        path::{Path, PathBuf},
    },
    uuid::Uuid,
};

/// Prefix of a copy's staging directory.
const STAGING_PREFIX: &str = ".copy-";

/// The remote tier as a local directory tree (Kafka's `LocalTieredStorage`).
#[derive(Debug)]
pub struct LocalTieredStorage {
    root: PathBuf,
    #[cfg(test)]
    crash: crash::CrashPoint,
}

impl LocalTieredStorage {
    /// A tier rooted at `root`. Nothing is touched until the first copy,
    /// which creates the directories it needs.
    #[must_use]
    pub fn new(root: PathBuf) -> Self {
        Self {
            root,
            #[cfg(test)]
            crash: crash::CrashPoint::default(),
        }
    }

    /// The root directory.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of `metadata`'s partition.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::InvalidName`] if the topic is not a legal Kafka
    /// topic name (and so could not be a single path component).
    pub fn partition_dir(
        &self,
        metadata: &RemoteLogSegmentMetadata,
    ) -> Result<PathBuf, RemoteStorageError> {
        let partition = metadata.topic_id_partition();
        if !is_legal_topic_name(partition.topic()) {
            return Err(RemoteStorageError::InvalidName {
                name: partition.topic().to_owned(),
                reason: "not a legal Kafka topic name".to_owned(),
            });
        }
        Ok(self.root.join(partition_dir_name(partition)))
    }

    /// The path of one file of the segment (`suffix` as in
    /// [`segment_file_name`]).
    ///
    /// # Errors
    ///
    /// As for [`partition_dir`](Self::partition_dir).
    pub fn segment_file(
        &self,
        metadata: &RemoteLogSegmentMetadata,
        suffix: &str,
    ) -> Result<PathBuf, RemoteStorageError> {
        Ok(self
            .partition_dir(metadata)?
            .join(file_name(metadata, suffix)))
    }

    /// The segment's `.log`, or `SegmentNotFound` if the segment is not
    /// (completely) in the tier.
    fn visible_log(
        &self,
        metadata: &RemoteLogSegmentMetadata,
    ) -> Result<(PathBuf, File), RemoteStorageError> {
        let path = self.segment_file(metadata, LOG_FILE_SUFFIX)?;
        match File::open(&path) {
            Ok(file) => Ok((path, file)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                Err(RemoteStorageError::SegmentNotFound {
                    segment_id: metadata.remote_log_segment_id().clone(),
                })
            }
            Err(error) => Err(RemoteStorageError::io("open", path, error)),
        }
    }

    fn copy(
        &self,
        metadata: &RemoteLogSegmentMetadata,
        segment: &LogSegmentData,
    ) -> Result<(), RemoteStorageError> {
        let dir = self.partition_dir(metadata)?;
        let log_path = dir.join(file_name(metadata, LOG_FILE_SUFFIX));
        if log_path.exists() {
            // Re-copying would replace a served segment file by file.
            return Err(RemoteStorageError::WriteRefused {
                reason: format!(
                    "segment {} is already in the tier",
                    metadata.remote_log_segment_id()
                ),
            });
        }
        fs::create_dir_all(&dir)
            .map_err(|e| RemoteStorageError::io("create directory", &dir, e))?;
        let staging = dir.join(format!(
            "{STAGING_PREFIX}{}-{}",
            kafka_uuid(metadata.remote_log_segment_id().id()),
            kafka_uuid(Uuid::new_v4())
        ));
        self.step()?;
        fs::create_dir(&staging)
            .map_err(|e| RemoteStorageError::io("create directory", &staging, e))?;
        let result = self.stage_and_publish(metadata, segment, &dir, &staging);
        if !self.crashed(&result) {
            // Best effort: a leftover staging directory is harmless and is
            // swept by the next copy or delete of the segment.
            let _ = fs::remove_dir_all(&staging);
        }
        result
    }

    fn stage_and_publish(
        &self,
        metadata: &RemoteLogSegmentMetadata,
        segment: &LogSegmentData,
        dir: &Path,
        staging: &Path,
    ) -> Result<(), RemoteStorageError> {
        // Indexes first, the `.log` last: its rename publishes the segment.
        let mut files: Vec<(String, Source<'_>)> = vec![
            (
                file_name(metadata, IndexType::Offset.suffix()),
                Source::Path(&segment.offset_index),
            ),
            (
                file_name(metadata, IndexType::Timestamp.suffix()),
                Source::Path(&segment.time_index),
            ),
            (
                file_name(metadata, IndexType::LeaderEpoch.suffix()),
                Source::Bytes(&segment.leader_epoch_index),
            ),
        ];
        if let Some(path) = &segment.transaction_index {
            files.push((
                file_name(metadata, IndexType::Transaction.suffix()),
                Source::Path(path),
            ));
        }
        if let Some(path) = &segment.producer_snapshot_index {
            files.push((
                file_name(metadata, IndexType::ProducerSnapshot.suffix()),
                Source::Path(path),
            ));
        }
        files.push((
            file_name(metadata, LOG_FILE_SUFFIX),
            Source::Path(&segment.log_segment),
        ));

        for (name, source) in &files {
            self.step()?;
            write_synced(&staging.join(name), source)?;
        }
        self.step()?;
        sync_dir(staging)?;
        for (name, _) in &files {
            self.step()?;
            let (from, to) = (staging.join(name), dir.join(name));
            fs::rename(&from, &to).map_err(|e| RemoteStorageError::io("rename", &from, e))?;
        }
        self.step()?;
        sync_dir(dir)
    }

    #[cfg(test)]
    fn step(&self) -> Result<(), RemoteStorageError> {
        self.crash.step()
    }

    #[cfg(not(test))]
    #[allow(clippy::unused_self, clippy::unnecessary_wraps)]
    fn step(&self) -> Result<(), RemoteStorageError> {
        Ok(())
    }

    #[cfg(test)]
    fn crashed(&self, result: &Result<(), RemoteStorageError>) -> bool {
        result.is_err() && self.crash.fired()
    }

    #[cfg(not(test))]
    #[allow(clippy::unused_self)]
    fn crashed(&self, _result: &Result<(), RemoteStorageError>) -> bool {
        false
    }
}

fn file_name(metadata: &RemoteLogSegmentMetadata, suffix: &str) -> String {
    segment_file_name(
        metadata.start_offset(),
        metadata.remote_log_segment_id().id(),
        suffix,
    )
}

enum Source<'a> {
    Path(&'a Path),
    Bytes(&'a Bytes),
}

fn write_synced(to: &Path, source: &Source<'_>) -> Result<(), RemoteStorageError> {
    match source {
        Source::Path(from) => {
            // `fs::copy` uses the kernel's copy path (copy_file_range) where
            // it can.
            fs::copy(from, to).map_err(|e| RemoteStorageError::io("copy", *from, e))?;
            File::options()
                .write(true)
                .open(to)
                .and_then(|file| file.sync_all())
                .map_err(|e| RemoteStorageError::io("sync", to, e))
        }
        Source::Bytes(bytes) => {
            let mut file = File::create(to).map_err(|e| RemoteStorageError::io("create", to, e))?;
            file.write_all(bytes)
                .and_then(|()| file.sync_all())
                .map_err(|e| RemoteStorageError::io("write", to, e))
        }
    }
}

fn sync_dir(dir: &Path) -> Result<(), RemoteStorageError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| RemoteStorageError::io("sync directory", dir, e))
}

impl RemoteStorageManager for LocalTieredStorage {
    fn copy_log_segment_data(
        &self,
        metadata: &RemoteLogSegmentMetadata,
        segment: &LogSegmentData,
    ) -> Result<Option<CustomMetadata>, RemoteStorageError> {
        self.copy(metadata, segment)?;
        Ok(None)
    }

    fn fetch_log_segment(
        &self,
        metadata: &RemoteLogSegmentMetadata,
        start_position: BytePosition,
        end_position: Option<BytePosition>,
    ) -> Result<Bytes, RemoteStorageError> {
        let (path, mut file) = self.visible_log(metadata)?;
        let size = file
            .metadata()
            .map_err(|e| RemoteStorageError::io("stat", &path, e))?
            .len();
        let start = u64::from(start_position.0);
        let end = end_position.map(|end| u64::from(end.0));
        let invalid = || RemoteStorageError::InvalidRange { start, end, size };
        if start >= size && !(start == 0 && size == 0) {
            return Err(invalid());
        }
        // Kafka's end position is inclusive; past the end reads to the end.
        let end_exclusive = match end {
            Some(end) if end < start => return Err(invalid()),
            Some(end) => (end + 1).min(size),
            None => size,
        };
        let len = usize::try_from(end_exclusive - start).map_err(|_| invalid())?;
        let mut buf = vec![0u8; len];
        file.seek(SeekFrom::Start(start))
            .and_then(|_| file.read_exact(&mut buf))
            .map_err(|e| RemoteStorageError::io("read", &path, e))?;
        Ok(Bytes::from(buf))
    }

    fn fetch_index(
        &self,
        metadata: &RemoteLogSegmentMetadata,
        index_type: IndexType,
    ) -> Result<Bytes, RemoteStorageError> {
        // An index is served only once its segment is published.
        drop(self.visible_log(metadata)?);
        let path = self.segment_file(metadata, index_type.suffix())?;
        match fs::read(&path) {
            Ok(bytes) => Ok(Bytes::from(bytes)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                Err(RemoteStorageError::IndexNotFound {
                    segment_id: metadata.remote_log_segment_id().clone(),
                    index_type,
                })
            }
            Err(error) => Err(RemoteStorageError::io("read", path, error)),
        }
    }

    fn delete_log_segment_data(
        &self,
        metadata: &RemoteLogSegmentMetadata,
    ) -> Result<(), RemoteStorageError> {
        let dir = self.partition_dir(metadata)?;
        let id = metadata.remote_log_segment_id().id();
        // The `.log` goes first, which unpublishes the segment at once.
        let log_path = dir.join(file_name(metadata, LOG_FILE_SUFFIX));
        remove_if_present(&log_path, false)?;
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(error) => return Err(RemoteStorageError::io("list", dir, error)),
        };
        let staging_prefix = format!("{STAGING_PREFIX}{}-", kafka_uuid(id));
        for entry in entries {
            let entry = entry.map_err(|e| RemoteStorageError::io("list", &dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with(&staging_prefix) {
                remove_if_present(&entry.path(), true)?;
            } else if parse_segment_file_name(name).is_ok_and(|parsed| parsed.segment_id == id) {
                remove_if_present(&entry.path(), false)?;
            }
        }
        sync_dir(&dir)
    }
}

fn remove_if_present(path: &Path, dir: bool) -> Result<(), RemoteStorageError> {
    let result = if dir {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    };
    match result {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(RemoteStorageError::io("remove", path, error)),
    }
}

/// Test-only crash injection: fail the n-th step of a copy as a crash
/// would, with no cleanup.
#[cfg(test)]
mod crash {
    use {
        crate::error::RemoteStorageError,
        std::sync::atomic::{AtomicBool, AtomicUsize, Ordering},
    };

    #[derive(Debug)]
    pub(super) struct CrashPoint {
        countdown: AtomicUsize,
        fired: AtomicBool,
    }

    impl Default for CrashPoint {
        fn default() -> Self {
            Self {
                countdown: AtomicUsize::new(usize::MAX),
                fired: AtomicBool::new(false),
            }
        }
    }

    impl CrashPoint {
        pub(super) fn arm(&self, after_steps: usize) {
            self.countdown.store(after_steps, Ordering::SeqCst);
        }

        pub(super) fn step(&self) -> Result<(), RemoteStorageError> {
            let left = self.countdown.load(Ordering::SeqCst);
            if left == 0 {
                self.fired.store(true, Ordering::SeqCst);
                return Err(RemoteStorageError::Backend {
                    message: "injected crash".to_owned(),
                });
            }
            if left != usize::MAX {
                self.countdown.store(left - 1, Ordering::SeqCst);
            }
            Ok(())
        }

        pub(super) fn fired(&self) -> bool {
            self.fired.load(Ordering::SeqCst)
        }
    }
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        crate::test_support::{log_of, segment},
        assert2::check,
        tempfile::TempDir,
    };

    struct Source {
        _dir: TempDir,
        data: LogSegmentData,
        log: Vec<u8>,
    }

    /// A closed local segment with every index present (or the optional
    /// ones left out).
    fn source(with_optional: bool) -> Source {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = log_of(0, &[3, 4, 2], &[1, 2, 3, 4, 5, 6, 7, 8, 9]);
        let write = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            fs::write(&path, bytes).unwrap();
            path
        };
        let data = LogSegmentData {
            log_segment: write("00000000000000000000.log", &log),
            offset_index: write("00000000000000000000.index", &[0, 0, 0, 2, 0, 0, 0, 0]),
            time_index: write("00000000000000000000.timeindex", &[7; 12]),
            transaction_index: with_optional
                .then(|| write("00000000000000000000.txnindex", &[0; 34])),
            producer_snapshot_index: with_optional
                .then(|| write("00000000000000000000.snapshot", b"snapshot")),
            leader_epoch_index: Bytes::from_static(b"0\n1\n0 0\n"),
        };
        Source {
            _dir: dir,
            data,
            log,
        }
    }

    fn expected_index(source: &Source, index: IndexType) -> Option<Vec<u8>> {
        let path = match index {
            IndexType::Offset => Some(&source.data.offset_index),
            IndexType::Timestamp => Some(&source.data.time_index),
            IndexType::Transaction => source.data.transaction_index.as_ref(),
            IndexType::ProducerSnapshot => source.data.producer_snapshot_index.as_ref(),
            IndexType::LeaderEpoch => return Some(source.data.leader_epoch_index.to_vec()),
        };
        path.map(|p| fs::read(p).unwrap())
    }

    #[test]
    fn copy_then_fetch_everything_in_kafkas_layout() {
        let root = tempfile::tempdir().unwrap();
        let storage = LocalTieredStorage::new(root.path().to_path_buf());
        let metadata = segment(0, 8);
        let src = source(true);
        check!(storage.copy_log_segment_data(&metadata, &src.data).unwrap() == None);

        let dir = root.path().join("orders-7-AAAAAAAAAAAAAAAAAAAAyg");
        let id = kafka_uuid(metadata.remote_log_segment_id().id());
        let mut names: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        let mut expected: Vec<String> = [
            ".index",
            ".leader_epoch_checkpoint",
            ".log",
            ".snapshot",
            ".timeindex",
            ".txnindex",
        ]
        .iter()
        .map(|suffix| format!("00000000000000000000-{id}{suffix}"))
        .collect();
        expected.sort();
        check!(names == expected, "no staging directory left behind");

        check!(
            storage
                .fetch_log_segment(&metadata, BytePosition(0), None)
                .unwrap()
                == src.log
        );
        for index in IndexType::ALL {
            check!(
                Some(storage.fetch_index(&metadata, index).unwrap().to_vec())
                    == expected_index(&src, index)
            );
        }
        assert2::assert!(let Err(RemoteStorageError::WriteRefused { .. }) = storage.copy_log_segment_data(&metadata, &src.data));
    }

    #[test]
    fn ranged_fetch() {
        let root = tempfile::tempdir().unwrap();
        let storage = LocalTieredStorage::new(root.path().to_path_buf());
        let metadata = segment(0, 8);
        let src = source(false);
        storage.copy_log_segment_data(&metadata, &src.data).unwrap();
        let size = u32::try_from(src.log.len()).unwrap();
        let fetch = |start, end: Option<u32>| {
            storage.fetch_log_segment(&metadata, BytePosition(start), end.map(BytePosition))
        };
        check!(fetch(10, Some(19)).unwrap() == src.log[10..20]);
        check!(fetch(10, Some(10)).unwrap() == src.log[10..11]);
        check!(fetch(size - 1, None).unwrap() == src.log[src.log.len() - 1..]);
        check!(
            fetch(5, Some(size + 100)).unwrap() == src.log[5..],
            "an end past the segment is clamped"
        );
        assert2::assert!(let Err(RemoteStorageError::InvalidRange { .. }) = fetch(size, None));
        assert2::assert!(let Err(RemoteStorageError::InvalidRange { .. }) = fetch(20, Some(19)));
        for index in [IndexType::Transaction, IndexType::ProducerSnapshot] {
            assert2::assert!(let Err(RemoteStorageError::IndexNotFound { index_type, .. }) = storage.fetch_index(&metadata, index));
            check!(index_type == index);
        }
    }

    #[test]
    fn unknown_segments_and_idempotent_delete() {
        let root = tempfile::tempdir().unwrap();
        let storage = LocalTieredStorage::new(root.path().to_path_buf());
        let metadata = segment(0, 8);
        assert2::assert!(let Err(RemoteStorageError::SegmentNotFound { .. }) = storage.fetch_log_segment(&metadata, BytePosition(0), None));
        assert2::assert!(let Err(RemoteStorageError::SegmentNotFound { .. }) = storage.fetch_index(&metadata, IndexType::Offset));
        storage.delete_log_segment_data(&metadata).unwrap();

        let keep = segment(9, 20);
        let src = source(true);
        storage.copy_log_segment_data(&metadata, &src.data).unwrap();
        storage.copy_log_segment_data(&keep, &src.data).unwrap();
        storage.delete_log_segment_data(&metadata).unwrap();
        storage.delete_log_segment_data(&metadata).unwrap();
        assert2::assert!(let Err(RemoteStorageError::SegmentNotFound { .. }) = storage.fetch_index(&metadata, IndexType::Timestamp));
        check!(
            storage
                .fetch_log_segment(&keep, BytePosition(0), None)
                .unwrap()
                == src.log
        );
        let left = fs::read_dir(storage.partition_dir(&keep).unwrap())
            .unwrap()
            .count();
        check!(left == 6, "only the other segment's files remain");
    }

    #[test]
    fn illegal_topic_names_never_reach_the_filesystem() {
        let root = tempfile::tempdir().unwrap();
        let storage = LocalTieredStorage::new(root.path().join("tier"));
        let tp = crate::TopicIdPartition::new(Uuid::nil(), "../escape", 0);
        let metadata = crate::test_support::segment_in(
            &tp,
            0,
            1,
            &[(0, 0)],
            crate::RemoteLogSegmentState::CopySegmentStarted,
        );
        assert2::assert!(let Err(RemoteStorageError::InvalidName { .. }) = storage.copy_log_segment_data(&metadata, &source(false).data));
        check!(!root.path().join("tier").exists());
    }

    /// What fetch shows of a segment: nothing, or everything it was given.
    fn observe(
        storage: &LocalTieredStorage,
        metadata: &RemoteLogSegmentMetadata,
        src: &Source,
    ) -> &'static str {
        match storage.fetch_log_segment(metadata, BytePosition(0), None) {
            Err(RemoteStorageError::SegmentNotFound { .. }) => {
                for index in IndexType::ALL {
                    let missing = matches!(
                        storage.fetch_index(metadata, index),
                        Err(RemoteStorageError::SegmentNotFound { .. })
                    );
                    assert!(missing, "{index} index visible without its log");
                }
                "old"
            }
            Ok(log) => {
                assert_eq!(log, src.log, "log visible but not whole");
                for index in IndexType::ALL {
                    let fetched = storage
                        .fetch_index(metadata, index)
                        .ok()
                        .map(|b| b.to_vec());
                    assert_eq!(fetched, expected_index(src, index), "{index} index differs");
                }
                "new"
            }
            Err(other) => panic!("unexpected error {other}"),
        }
    }

    #[test]
    fn a_copy_interrupted_at_any_step_shows_old_or_new_never_a_mix() {
        let src = source(true);
        // 1 staging dir + 6 files + 1 sync + 6 renames + 1 sync.
        let steps = 15;
        let mut seen = Vec::new();
        for crash_at in 0..=steps {
            let root = tempfile::tempdir().unwrap();
            let other = segment(100, 108);
            let metadata = segment(0, 8);
            {
                let before = LocalTieredStorage::new(root.path().to_path_buf());
                before.copy_log_segment_data(&other, &src.data).unwrap();
                before.crash.arm(crash_at);
                let result = before.copy_log_segment_data(&metadata, &src.data);
                check!(
                    result.is_err() == (crash_at < steps),
                    "crash at step {crash_at}"
                );
            }
            // "Restart": a fresh instance over what the crash left.
            let after = LocalTieredStorage::new(root.path().to_path_buf());
            seen.push(observe(&after, &metadata, &src));
            check!(
                observe(&after, &other, &src) == "new",
                "an earlier segment is untouched"
            );
            // A retry after a crash before publication completes the copy;
            // a delete afterwards leaves nothing of the segment behind.
            if seen.last() == Some(&"old") {
                after.copy_log_segment_data(&metadata, &src.data).unwrap();
                check!(observe(&after, &metadata, &src) == "new");
            }
            after.delete_log_segment_data(&metadata).unwrap();
            let left: Vec<String> = fs::read_dir(after.partition_dir(&metadata).unwrap())
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|n| !n.starts_with("00000000000000000100-"))
                .collect();
            check!(left.is_empty(), "crash at {crash_at} left {left:?}");
        }
        // Publication happens at the `.log` rename, the 14th step.
        let expected: Vec<&str> = (0..=steps)
            .map(|k| if k < 14 { "old" } else { "new" })
            .collect();
        check!(seen == expected);
    }
}
