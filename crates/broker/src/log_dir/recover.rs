//! Reading a log directory without its registry, and `krabka recover`.
//!
//! Every partition directory (`<topic>-<partition>`) names its topic and
//! partition and holds the topic id in `partition.metadata`, so a lost
//! topic registry can be rebuilt from the directories: topic names, ids and
//! partition counts come back; per-topic config overrides and dynamic
//! broker configs do not (they lived only in the registry), except the
//! configs Krabka itself gives its internal topics. Producer ids restart
//! above every id the partitions' producer state still names, with a wide
//! margin for ids that expired from it.
//!
//! The same scan finds directories the registry does not list: what an
//! interrupted topic creation or deletion leaves. Empty ones are removed at
//! start ([`sweep_leftovers`]); ones with data are left alone and named.
//!
//! Nothing here runs unless asked: the broker refuses to start on a
//! directory with data and no registry, and `krabka recover` does the
//! rebuild, printing every step.

use {
    super::{lock_dir, meta::MetaProperties, read_meta, write_meta},
    crate::{
        config::BrokerConfig,
        error::BrokerError,
        topics::{PRODUCER_ID_BLOCK, TopicMeta, TopicRegistry, names},
    },
    krabka_log::{
        CorruptionPolicy, Log, LogConfig, OpenOptions, SystemClock,
        checkpoint::{PARTITION_METADATA_FILE, parse_partition_metadata, read_optional},
    },
    std::{
        collections::{BTreeMap, BTreeSet},
        path::{Path, PathBuf},
        sync::Arc,
    },
    uuid::Uuid,
};

/// Producer ids that may have been handed out after the newest one the
/// partitions still remember (their state drops idle producers): a rebuilt
/// registry starts this many ids above it.
const PRODUCER_ID_MARGIN: i64 = 1000 * PRODUCER_ID_BLOCK;

/// One `<topic>-<partition>` directory of a log directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionDir {
    /// The directory.
    pub path: PathBuf,
    /// Its topic (from the name).
    pub topic: String,
    /// Its partition (from the name).
    pub index: i32,
    /// The topic id in its `partition.metadata`, if readable.
    pub topic_id: Option<Uuid>,
    /// Bytes of its `.log` segment files.
    pub data_bytes: u64,
}

/// The topic and partition a directory name stands for, if it is one.
#[must_use]
pub fn parse_partition_dir_name(name: &str) -> Option<(String, i32)> {
    let (topic, index) = name.rsplit_once('-')?;
    if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let index: i32 = index.parse().ok()?;
    names::validate_topic_name(topic).ok()?;
    Some((topic.to_owned(), index))
}

/// Every partition directory of `dir`, sorted by topic and partition.
///
/// # Errors
///
/// [`BrokerError::Io`] when the directory cannot be listed.
pub fn scan_partition_dirs(dir: &Path) -> Result<Vec<PartitionDir>, BrokerError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| BrokerError::Io {
            action: "list",
            path,
            source,
        }
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        if !entry.file_type().map_err(io(dir))?.is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((topic, index)) = parse_partition_dir_name(&name) else {
            continue;
        };
        let path = entry.path();
        let meta_path = path.join(PARTITION_METADATA_FILE);
        let topic_id = read_optional(&meta_path)
            .ok()
            .flatten()
            .and_then(|text| parse_partition_metadata(&meta_path, &text).ok());
        let mut data_bytes = 0;
        for file in std::fs::read_dir(&path).map_err(io(&path))? {
            let file = file.map_err(io(&path))?;
            if file.file_name().to_string_lossy().ends_with(".log") {
                data_bytes += file.metadata().map_or(0, |m| m.len());
            }
        }
        out.push(PartitionDir {
            path,
            topic,
            index,
            topic_id,
            data_bytes,
        });
    }
    out.sort_by(|a, b| (&a.topic, a.index).cmp(&(&b.topic, b.index)));
    Ok(out)
}

/// Whether the registry accounts for `p`: its topic, with that id, has
/// that partition.
fn registered(registry: &TopicRegistry, p: &PartitionDir) -> bool {
    registry
        .get(&p.topic)
        .is_some_and(|t| p.index < t.partitions && p.topic_id.is_none_or(|id| id == t.id))
}

/// At start: removes partition directories the registry does not list and
/// that hold no records (an interrupted topic creation: partitions are
/// created before the topic is recorded); names the ones that do hold
/// records and leaves them in place. Returns the directories left.
///
/// # Errors
///
/// [`BrokerError::Io`] when the directory cannot be listed or a leftover
/// cannot be removed.
pub fn sweep_leftovers(dir: &Path, registry: &TopicRegistry) -> Result<Vec<PathBuf>, BrokerError> {
    let mut kept = Vec::new();
    for p in scan_partition_dirs(dir)? {
        if registered(registry, &p) {
            continue;
        }
        if p.data_bytes == 0 {
            std::fs::remove_dir_all(&p.path).map_err(|source| BrokerError::Io {
                action: "remove leftover partition directory",
                path: p.path.clone(),
                source,
            })?;
            tracing::info!(dir = %p.path.display(), "removed an empty partition directory left by an interrupted topic creation or deletion");
        } else {
            tracing::warn!(
                dir = %p.path.display(),
                bytes = p.data_bytes,
                "partition directory is not in the topic registry and holds data: left in place and not served (move it away, or delete it, once you know whose it is)"
            );
            kept.push(p.path);
        }
    }
    Ok(kept)
}

/// The configs Krabka gives the internal topics it creates; a rebuilt
/// registry gives them back (other overrides are lost with the registry).
fn internal_configs(topic: &str) -> BTreeMap<String, String> {
    let pairs: &[(&str, &str)] = match topic {
        "__consumer_offsets" | "__transaction_state" => &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", "104857600"),
        ],
        names::COORDINATION_STATE_TOPIC => &[("cleanup.policy", "compact")],
        krabka_remote_storage_topic::REMOTE_LOG_METADATA_TOPIC => {
            &[("cleanup.policy", "delete"), ("retention.ms", "-1")]
        }
        _ => &[],
    };
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// What `krabka recover` is asked to do.
#[derive(Debug, Clone, Default)]
pub struct RecoverRequest {
    /// Partitions (`topic-N`) to repair by cutting out corruption, as
    /// Kafka's recovery would, after every batch is checked.
    pub accept_loss: Vec<String>,
    /// Say what would be done, change nothing.
    pub dry_run: bool,
}

/// Runs `krabka recover` on the log directory of `config`: rebuilds a lost
/// registry and identity, repairs the partitions named in
/// `accept_loss`, and lists leftovers. Returns the lines to print.
///
/// # Errors
///
/// [`BrokerError::LogDir`] when the directory is in use, belongs to another
/// node, or an `accept_loss` partition is unknown; [`BrokerError::Io`],
/// [`BrokerError::Registry`] or [`BrokerError::Log`] when a step fails.
pub fn run(config: &BrokerConfig, request: &RecoverRequest) -> Result<Vec<String>, BrokerError> {
    let dir = &config.log_dir;
    let _lock = lock_dir(dir)?;
    let mut out = Vec::new();
    let meta = read_meta(dir)?;
    if let Some(meta) = &meta
        && meta.node_id != config.node_id
    {
        return Err(BrokerError::LogDir {
            dir: dir.clone(),
            reason: format!(
                "it belongs to node {}, but these settings are node.id={}",
                meta.node_id, config.node_id
            ),
        });
    }
    let registry = match TopicRegistry::open_existing(dir)? {
        Some(registry) => {
            out.push(format!(
                "topic registry present ({} topics, {} partitions): not rebuilt",
                registry.topics().len(),
                registry.partition_count()
            ));
            Some(registry)
        }
        None => rebuild_registry(config, meta.as_ref(), request.dry_run, &mut out)?,
    };
    if meta.is_none() {
        let cluster_id = registry
            .as_ref()
            .map_or_else(|| "(new)".to_owned(), TopicRegistry::cluster_id);
        out.push(format!(
            "writing meta.properties: cluster.id={cluster_id} node.id={}",
            config.node_id
        ));
        if let (false, Some(registry)) = (request.dry_run, &registry) {
            write_meta(
                dir,
                &MetaProperties::new(registry.cluster_id(), config.node_id),
            )?;
        }
    }
    for name in &request.accept_loss {
        accept_loss(config, registry.as_ref(), name, request.dry_run, &mut out)?;
    }
    if let Some(registry) = &registry {
        for p in scan_partition_dirs(dir)? {
            if !registered(registry, &p) {
                out.push(format!(
                    "not in the registry (left as is): {} ({} bytes of segments)",
                    p.path.display(),
                    p.data_bytes
                ));
            }
        }
    }
    if request.dry_run {
        out.push("dry run: nothing was changed".to_owned());
    }
    Ok(out)
}

fn rebuild_registry(
    config: &BrokerConfig,
    meta: Option<&MetaProperties>,
    dry_run: bool,
    out: &mut Vec<String>,
) -> Result<Option<TopicRegistry>, BrokerError> {
    let dir = &config.log_dir;
    out.push(format!(
        "no topic registry in {}: rebuilding it from the partition directories",
        dir.display()
    ));
    let mut topics: BTreeMap<String, (Uuid, BTreeSet<i32>)> = BTreeMap::new();
    let mut conflicting = BTreeSet::new();
    let dirs = scan_partition_dirs(dir)?;
    for p in &dirs {
        let Some(id) = p.topic_id else {
            out.push(format!(
                "skipped {}: no readable {PARTITION_METADATA_FILE}",
                p.path.display()
            ));
            continue;
        };
        let entry = topics
            .entry(p.topic.clone())
            .or_insert((id, BTreeSet::new()));
        if entry.0 != id {
            conflicting.insert(p.topic.clone());
        }
        entry.1.insert(p.index);
    }
    let mut metas = Vec::new();
    let mut max_producer = -1i64;
    for (name, (id, indexes)) in topics {
        if conflicting.contains(&name) {
            out.push(format!(
                "skipped topic {name}: its partition directories hold different topic ids"
            ));
            continue;
        }
        let count = indexes.last().map_or(0, |last| last + 1);
        let missing: Vec<String> = (0..count)
            .filter(|i| !indexes.contains(i))
            .map(|i| i.to_string())
            .collect();
        let configs = internal_configs(&name);
        out.push(format!(
            "topic {name}: id {}, {count} partitions{}{}",
            krabka_ids::kafka_uuid(id),
            if missing.is_empty() {
                String::new()
            } else {
                format!(
                    " (partitions {} have no directory and start empty)",
                    missing.join(",")
                )
            },
            if configs.is_empty() {
                ", config overrides lost with the registry (set them again)".to_owned()
            } else {
                format!(", internal configs {configs:?}")
            }
        ));
        for index in &indexes {
            max_producer = max_producer.max(max_producer_id(config, &name, id, *index, out));
        }
        metas.push(TopicMeta {
            name,
            id,
            partitions: count,
            configs,
        });
    }
    let limit = max_producer
        .saturating_add(1)
        .saturating_add(PRODUCER_ID_MARGIN);
    let cluster_id = meta.map_or_else(
        || krabka_ids::kafka_uuid(Uuid::new_v4()),
        |m| m.cluster_id.clone(),
    );
    out.push(format!(
        "registry: cluster {cluster_id}, {} topics, producer ids from {limit} (newest remembered: {max_producer})",
        metas.len()
    ));
    if dry_run {
        return Ok(None);
    }
    TopicRegistry::rebuild(dir, &cluster_id, &metas, limit).map(Some)
}

/// The largest producer id the partition's producer state names (-1 when
/// none, or the log cannot be opened; that is reported).
fn max_producer_id(
    config: &BrokerConfig,
    topic: &str,
    id: Uuid,
    index: i32,
    out: &mut Vec<String>,
) -> i64 {
    let dir = crate::partition::partition_dir(&config.log_dir, topic, index);
    let options = OpenOptions {
        corruption: if names::is_state_topic(topic) {
            CorruptionPolicy::Refuse
        } else {
            CorruptionPolicy::Truncate
        },
        verify_all: false,
    };
    match Log::open_with(
        &dir,
        id,
        LogConfig::default(),
        Arc::new(SystemClock),
        options,
    ) {
        Ok(log) => {
            report_recovery(&dir, log.recovery_report(), out);
            let max = log
                .producers()
                .iter()
                .map(|p| p.producer_id.0)
                .max()
                .unwrap_or(-1);
            if let Err(e) = log.close() {
                out.push(format!("closing {}: {e}", dir.display()));
            }
            max
        }
        Err(e) => {
            out.push(format!("could not open {}: {e}", dir.display()));
            -1
        }
    }
}

fn report_recovery(dir: &Path, report: &krabka_log::RecoveryReport, out: &mut Vec<String>) {
    for r in &report.removals {
        out.push(format!(
            "{}: removed offsets {}..{} ({} records, {} bytes) from segment {}: {}",
            dir.display(),
            r.from_offset,
            r.to_offset
                .map_or_else(|| "?".to_owned(), |t| t.to_string()),
            r.records,
            r.bytes,
            r.segment,
            r.cause
        ));
    }
}

fn accept_loss(
    config: &BrokerConfig,
    registry: Option<&TopicRegistry>,
    name: &str,
    dry_run: bool,
    out: &mut Vec<String>,
) -> Result<(), BrokerError> {
    let refused = |reason: String| BrokerError::LogDir {
        dir: config.log_dir.clone(),
        reason,
    };
    let (topic, index) = parse_partition_dir_name(name)
        .ok_or_else(|| refused(format!("--accept-loss {name}: expected TOPIC-PARTITION")))?;
    let meta = registry
        .and_then(|r| r.get(&topic))
        .filter(|t| index < t.partitions)
        .ok_or_else(|| {
            refused(format!(
                "--accept-loss {name}: no such partition in the registry"
            ))
        })?;
    let dir = crate::partition::partition_dir(&config.log_dir, &topic, index);
    if dry_run {
        out.push(format!(
            "would check every batch of {} and cut at the first invalid one",
            dir.display()
        ));
        return Ok(());
    }
    let log = Log::open_with(
        &dir,
        meta.id,
        LogConfig::default(),
        Arc::new(SystemClock),
        OpenOptions {
            corruption: CorruptionPolicy::Truncate,
            verify_all: true,
        },
    )
    .map_err(|source| BrokerError::Log {
        dir: dir.clone(),
        source,
    })?;
    if log.recovery_report().removals.is_empty() {
        out.push(format!(
            "{}: every batch is valid, nothing removed",
            dir.display()
        ));
    }
    report_recovery(&dir, log.recovery_report(), out);
    log.close()
        .map_err(|source| BrokerError::Log { dir, source })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn partition_directory_names() {
        check!(parse_partition_dir_name("orders-0") == Some(("orders".into(), 0)));
        check!(parse_partition_dir_name("my-topic-12") == Some(("my-topic".into(), 12)));
        check!(
            parse_partition_dir_name("__consumer_offsets-49")
                == Some(("__consumer_offsets".into(), 49))
        );
        check!(parse_partition_dir_name("krabka-remote-tier").is_none());
        check!(parse_partition_dir_name("orders-").is_none());
        check!(parse_partition_dir_name("-3").is_none());
    }
}
