//! [`verify_archive`]: auditing an archive from the objects alone.
//!
//! The audit lists every object under the prefix, groups them by partition
//! directory, reads and authenticates each partition's manifests
//! ([`authenticate_archive`]), then checks every object the authentic chain
//! names: present, with the recorded size and entity tag, and at
//! [`VerifyDepth::Digest`] with the recorded SHA-256. Manifest reads and
//! digest checks run concurrently.

use std::{collections::BTreeMap, sync::Arc, time::Instant};

use futures_util::{StreamExt as _, TryStreamExt as _, stream};
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt as _, path::Path};
use serde::Serialize;

use super::{
    WormError,
    archiver::list_all,
    authenticate::{VerifyBreak, authenticate_archive},
    chain::{ChainHead, WormChainRecord},
    digest::Sha256Digest,
    manifest::{MANIFEST_SUFFIX, MAX_MANIFEST_BYTES, ManifestSeq},
    sign::{SealedManifest, TrustedManifestKeys},
};
use crate::{metadata::TopicIdPartition, storage_manager::parse_partition_dir_name};

/// Concurrent requests during an audit.
const CONCURRENCY: usize = 16;

/// How deep the object checks go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VerifyDepth {
    /// Presence, size and entity tag from the listing (no object reads).
    #[default]
    Presence,
    /// Also download every object and compare its SHA-256.
    Digest,
}

/// Progress callback: `(steps done, steps known so far)`.
pub type ProgressFn = dyn Fn(u64, u64) + Send + Sync;

/// What to audit and against what.
#[derive(Clone, Default)]
pub struct VerifyRequest {
    /// Key prefix of the archive (empty for the bucket root).
    pub prefix: String,
    /// Keys whose signatures are accepted.
    pub trusted_keys: TrustedManifestKeys,
    /// Object check depth.
    pub depth: VerifyDepth,
    /// Independently recorded chain tips (from the metadata topic). A
    /// partition whose chain ends before its recorded tip is reported as
    /// [`VerifyBreak::TruncatedTail`]; without a recorded tip a cut-off tail
    /// is undetectable.
    pub expect_head: Vec<WormChainRecord>,
    /// Called as the audit advances.
    pub progress: Option<Arc<ProgressFn>>,
}

impl std::fmt::Debug for VerifyRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifyRequest")
            .field("prefix", &self.prefix)
            .field("trusted_keys", &self.trusted_keys.len())
            .field("depth", &self.depth)
            .field("expect_head", &self.expect_head)
            .finish_non_exhaustive()
    }
}

/// Consecutive manifests whose segments do not meet (`next_start_offset !=
/// previous_end_offset + 1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OffsetGap {
    /// Position of the later manifest.
    pub seq: ManifestSeq,
    /// Last offset of the earlier segment.
    pub previous_end_offset: i64,
    /// First offset of the later segment.
    pub next_start_offset: i64,
}

/// The audit of one partition.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionVerifyReport {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Topic id (Kafka text form).
    pub topic_id: String,
    /// Authentic manifests.
    pub manifests: u64,
    /// Objects checked.
    pub objects: u64,
    /// Bytes the checked objects hold (read, at digest depth).
    pub bytes: u64,
    /// Position of the chain tip.
    pub tip_seq: Option<ManifestSeq>,
    /// Head of the chain tip.
    pub tip_head: Option<ChainHead>,
    /// First and last offset covered.
    pub offsets: Option<(i64, i64)>,
    /// Holes between consecutive segments (informational).
    pub gaps: Vec<OffsetGap>,
    /// Objects in the directory that no authentic manifest names (left by
    /// failed copies, or by a dropped manifest).
    pub unlisted_objects: u64,
    /// Findings.
    pub breaks: Vec<VerifyBreak>,
}

/// The audit of a whole archive.
#[derive(Debug, Clone, Serialize)]
pub struct ArchiveVerifyReport {
    /// Per partition, in directory-name order.
    pub partitions: Vec<PartitionVerifyReport>,
    /// Authentic manifests in total.
    pub manifests: u64,
    /// Objects checked in total.
    pub objects: u64,
    /// Bytes of checked objects.
    pub bytes: u64,
    /// Bytes of manifests read.
    pub manifest_bytes: u64,
    /// Wall-clock duration of the audit in milliseconds.
    pub elapsed_ms: u64,
    /// Object-store keys outside any partition directory.
    pub foreign_objects: u64,
}

impl ArchiveVerifyReport {
    /// Every finding, with its partition.
    pub fn breaks(&self) -> impl Iterator<Item = (&PartitionVerifyReport, &VerifyBreak)> {
        self.partitions
            .iter()
            .flat_map(|p| p.breaks.iter().map(move |b| (p, b)))
    }

    /// Whether the archive verified with no finding at all.
    #[must_use]
    pub fn is_verified(&self) -> bool {
        self.breaks().next().is_none()
    }
}

struct Progress {
    callback: Option<Arc<ProgressFn>>,
    done: std::sync::atomic::AtomicU64,
    total: std::sync::atomic::AtomicU64,
}

impl Progress {
    fn add_total(&self, n: u64) {
        self.total
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        self.report();
    }
    fn step(&self) {
        self.done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.report();
    }
    fn report(&self) {
        if let Some(cb) = &self.callback {
            cb(
                self.done.load(std::sync::atomic::Ordering::Relaxed),
                self.total.load(std::sync::atomic::Ordering::Relaxed),
            );
        }
    }
}

/// Audits the archive under `request.prefix` in `store`.
///
/// Findings (tampering, loss, truncation) are not errors: they are listed in
/// the report, and [`ArchiveVerifyReport::is_verified`] is `false`.
///
/// # Errors
///
/// [`WormError::Store`] if the store cannot be listed or read.
pub async fn verify_archive(
    store: &dyn ObjectStore,
    request: &VerifyRequest,
) -> Result<ArchiveVerifyReport, WormError> {
    let started = Instant::now();
    let progress = Progress {
        callback: request.progress.clone(),
        done: 0.into(),
        total: 0.into(),
    };
    let prefix = request.prefix.trim_matches('/');
    let prefix_path = (!prefix.is_empty()).then(|| Path::from(prefix));
    let listed = list_all(store, prefix_path.as_ref()).await?;

    // Group by partition directory: the first path part below the prefix.
    let skip = prefix_path.as_ref().map_or(0, |p| p.parts().count());
    let mut dirs: BTreeMap<String, BTreeMap<String, ObjectMeta>> = BTreeMap::new();
    let mut foreign_objects = 0u64;
    for meta in listed {
        let parts: Vec<String> = meta
            .location
            .parts()
            .skip(skip)
            .map(|p| p.as_ref().to_owned())
            .collect();
        match parts.as_slice() {
            [dir, name] => {
                dirs.entry(dir.clone())
                    .or_default()
                    .insert(name.clone(), meta);
            }
            _ => foreign_objects += 1,
        }
    }

    let mut report = ArchiveVerifyReport {
        partitions: Vec::new(),
        manifests: 0,
        objects: 0,
        bytes: 0,
        manifest_bytes: 0,
        elapsed_ms: 0,
        foreign_objects,
    };
    let mut expected: BTreeMap<TopicIdPartition, &WormChainRecord> = request
        .expect_head
        .iter()
        .map(|r| (r.topic_id_partition(), r))
        .collect();

    for (dir, objects) in &dirs {
        let Ok(parsed) = parse_partition_dir_name(dir) else {
            report.foreign_objects += objects.len() as u64;
            continue;
        };
        let partition = parsed.topic_id_partition();
        let expect = expected.remove(&partition);
        let part = verify_partition(store, request, &progress, &partition, objects, expect).await?;
        report.manifest_bytes += part.1;
        report.partitions.push(part.0);
    }
    // Recorded tips whose partition has vanished entirely.
    for (partition, record) in expected {
        report.partitions.push(PartitionVerifyReport {
            topic: partition.topic().to_owned(),
            partition: partition.partition(),
            topic_id: krabka_ids::kafka_uuid(partition.topic_id()),
            manifests: 0,
            objects: 0,
            bytes: 0,
            tip_seq: None,
            tip_head: None,
            offsets: None,
            gaps: Vec::new(),
            unlisted_objects: 0,
            breaks: vec![VerifyBreak::TruncatedTail {
                expected_seq: record.seq,
                expected_head: record.head,
                found_seq: None,
            }],
        });
    }
    for p in &report.partitions {
        report.manifests += p.manifests;
        report.objects += p.objects;
        report.bytes += p.bytes;
    }
    report.elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    Ok(report)
}

/// A parsed manifest and its stored size, or why it could not be read.
type ManifestRead = Result<(SealedManifest, u64), String>;

/// Reads one manifest, bounded by [`MAX_MANIFEST_BYTES`].
async fn read_manifest(store: &dyn ObjectStore, meta: &ObjectMeta) -> ManifestRead {
    if meta.size > MAX_MANIFEST_BYTES {
        return Err(format!(
            "{} bytes exceed the {MAX_MANIFEST_BYTES}-byte limit",
            meta.size
        ));
    }
    let bytes = store
        .get(&meta.location)
        .await
        .map_err(|e| e.to_string())?
        .bytes()
        .await
        .map_err(|e| e.to_string())?;
    let len = bytes.len() as u64;
    SealedManifest::from_json(&bytes)
        .map(|m| (m, len))
        .map_err(|e| e.to_string())
}

async fn object_digest(store: &dyn ObjectStore, location: &Path) -> Result<Sha256Digest, String> {
    let mut stream = store
        .get(location)
        .await
        .map_err(|e| e.to_string())?
        .into_stream();
    let mut hasher = sha2::Sha256::default();
    while let Some(chunk) = stream.try_next().await.map_err(|e| e.to_string())? {
        sha2::Digest::update(&mut hasher, &chunk);
    }
    Ok(Sha256Digest(sha2::Digest::finalize(hasher).into()))
}

async fn verify_partition(
    store: &dyn ObjectStore,
    request: &VerifyRequest,
    progress: &Progress,
    partition: &TopicIdPartition,
    objects: &BTreeMap<String, ObjectMeta>,
    expect: Option<&WormChainRecord>,
) -> Result<(PartitionVerifyReport, u64), WormError> {
    let manifest_metas: Vec<&ObjectMeta> = objects
        .iter()
        .filter(|(name, _)| name.ends_with(MANIFEST_SUFFIX))
        .map(|(_, m)| m)
        .collect();
    progress.add_total(manifest_metas.len() as u64);
    let read: Vec<(String, ManifestRead)> = stream::iter(manifest_metas)
        .map(|meta| async move {
            let name = meta.location.filename().unwrap_or_default().to_owned();
            let result = read_manifest(store, meta).await;
            progress.step();
            (name, result)
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut breaks = Vec::new();
    let mut found = Vec::new();
    let mut manifest_bytes = 0;
    for (name, result) in read {
        match result {
            Ok((sealed, len)) => {
                manifest_bytes += len;
                found.push((name, sealed));
            }
            Err(reason) => breaks.push(VerifyBreak::UnreadableManifest { name, reason }),
        }
    }
    breaks.sort_by_key(ToString::to_string);
    let auth = authenticate_archive(partition, found, &request.trusted_keys, expect);
    breaks.extend(auth.breaks.iter().cloned());

    // Object checks.
    let mut named = std::collections::BTreeSet::new();
    let mut digest_checks = Vec::new();
    let mut checked = 0u64;
    let mut bytes = 0u64;
    for sealed in &auth.chain {
        let seq = sealed.manifest.stamp.seq;
        named.insert(sealed.manifest.body.manifest_name());
        for entry in &sealed.manifest.body.objects {
            named.insert(entry.name.clone());
            checked += 1;
            let Some(meta) = objects.get(&entry.name) else {
                breaks.push(VerifyBreak::MissingObject {
                    seq,
                    name: entry.name.clone(),
                });
                continue;
            };
            bytes += meta.size;
            if meta.size != entry.size {
                breaks.push(VerifyBreak::SizeMismatch {
                    seq,
                    name: entry.name.clone(),
                    expected: entry.size,
                    actual: meta.size,
                });
                continue;
            }
            if let (Some(recorded), Some(listed)) =
                (entry.protection.e_tag(), meta.e_tag.as_deref())
                && recorded.trim_matches('"') != listed.trim_matches('"')
            {
                breaks.push(VerifyBreak::ObjectReplaced {
                    seq,
                    name: entry.name.clone(),
                    reason: format!("entity tag is {listed}, recorded {recorded}"),
                });
                continue;
            }
            if request.depth == VerifyDepth::Digest {
                digest_checks.push((seq, entry.name.clone(), entry.sha256, meta.location.clone()));
            }
        }
    }
    progress.add_total(digest_checks.len() as u64);
    let digests: Vec<_> = stream::iter(digest_checks)
        .map(|(seq, name, expected, location)| async move {
            let result = object_digest(store, &location).await;
            progress.step();
            (seq, name, expected, result)
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut digest_breaks = Vec::new();
    for (seq, name, expected, result) in digests {
        match result {
            Ok(actual) if actual == expected => {}
            Ok(_) => digest_breaks.push(VerifyBreak::DigestMismatch { seq, name }),
            Err(_) => digest_breaks.push(VerifyBreak::MissingObject { seq, name }),
        }
    }
    digest_breaks.sort_by_key(ToString::to_string);
    breaks.extend(digest_breaks);

    let mut gaps = Vec::new();
    for pair in auth.chain.windows(2) {
        if let [a, b] = pair {
            let (a, b) = (&a.manifest.body.identity, &b.manifest);
            if b.body.identity.start_offset != a.end_offset.saturating_add(1) {
                gaps.push(OffsetGap {
                    seq: b.stamp.seq,
                    previous_end_offset: a.end_offset,
                    next_start_offset: b.body.identity.start_offset,
                });
            }
        }
    }
    let offsets = match (auth.chain.first(), auth.chain.last()) {
        (Some(first), Some(last)) => Some((
            first.manifest.body.identity.start_offset,
            last.manifest.body.identity.end_offset,
        )),
        _ => None,
    };
    let tip = auth.tip();
    Ok((
        PartitionVerifyReport {
            topic: partition.topic().to_owned(),
            partition: partition.partition(),
            topic_id: krabka_ids::kafka_uuid(partition.topic_id()),
            manifests: auth.chain.len() as u64,
            objects: checked,
            bytes,
            tip_seq: tip.map(|t| t.0),
            tip_head: tip.map(|t| t.1),
            offsets,
            gaps,
            unlisted_objects: objects.keys().filter(|n| !named.contains(*n)).count() as u64,
            breaks,
        },
        manifest_bytes,
    ))
}
