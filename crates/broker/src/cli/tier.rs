//! `krabka tier status`: per partition of each tiered topic, how much is on
//! local disk and in the remote tier, where each log starts, and how far
//! copying lags — from what any KIP-405 broker exposes over the protocol:
//!
//! - local size: DescribeLogDirs;
//! - log start (global, -2), local log start (-4), highest tiered offset
//!   (-5) and log end (-1): ListOffsets;
//! - remote segments, their total size and the time of the last finished
//!   copy: the `__remote_log_metadata` topic, read the way a broker reads it
//!   (the same code as `krabka remote-metadata dump`).
//!
//! One figure is approximated: the copy lag is counted in offsets, from the
//! highest tiered offset to the log end. It includes the active segment and
//! anything above the last stable offset, which are not copyable yet, so it
//! is an upper bound of what the broker's `krabka_remote_copy_lag_bytes` /
//! `_segments` gauges count in bytes and segments.

use {
    super::{
        CliError, Common, Format, Table, human_bytes,
        metadata_source::MetadataSource,
        print_json,
        remote_metadata::{DumpRequest, dump},
        timefmt::format_millis,
    },
    clap::{Args, Subcommand},
    krabka_client::{Client, ConfigResource, IsolationLevel, OffsetSpec},
    serde::Serialize,
    std::collections::BTreeMap,
};

/// `krabka tier ...`.
#[derive(Debug, Args)]
pub struct TierArgs {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: TierCommand,
}

#[derive(Debug, Subcommand)]
enum TierCommand {
    /// Local and remote sizes, log starts, copy lag and remote segments per partition.
    Status {
        /// Only these topics; every tiered topic when none.
        #[arg(long = "topic")]
        topics: Vec<String>,
    },
}

/// One partition's tiering state.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PartitionTier {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// Bytes of the local log.
    pub local_size_bytes: Option<i64>,
    /// Bytes of the finished remote segments.
    pub remote_size_bytes: Option<i64>,
    /// Finished remote segments.
    pub remote_segments: Option<usize>,
    /// The log start offset of the whole log, remote included (ListOffsets -2).
    pub log_start_offset: Option<i64>,
    /// The local log start offset (ListOffsets -4).
    pub local_log_start_offset: Option<i64>,
    /// The highest offset in the remote tier, -1 when none (ListOffsets -5).
    pub highest_tiered_offset: Option<i64>,
    /// The log end offset (ListOffsets -1).
    pub log_end_offset: Option<i64>,
    /// Offsets above the highest tiered one: an upper bound of the copy lag
    /// (it includes the active segment, never copied while active).
    pub copy_lag_offsets: Option<i64>,
    /// When the newest remote segment finished copying (epoch ms).
    pub last_copy_ms: Option<i64>,
    /// The same, as UTC text.
    pub last_copy: Option<String>,
    /// Remote segments whose copy started and has not finished (or was abandoned).
    pub copies_in_progress: Option<usize>,
}

/// What `__remote_log_metadata` says about one partition.
#[derive(Debug, Default)]
struct RemoteSums {
    /// Bytes of finished segments.
    size: i64,
    /// Finished segments.
    finished: usize,
    /// When the newest finished copy was recorded.
    last_copy: Option<i64>,
    /// Copies started and not finished.
    started: usize,
}

async fn offsets(
    client: &Client,
    topic: &str,
    partitions: &[i32],
    spec: OffsetSpec,
) -> BTreeMap<i32, i64> {
    let wanted: Vec<(i32, OffsetSpec)> = partitions.iter().map(|&p| (p, spec)).collect();
    client
        .list_offsets(topic, &wanted, IsolationLevel::ReadUncommitted)
        .await
        .map(|l| l.into_iter().map(|o| (o.partition, o.offset)).collect())
        .unwrap_or_default()
}

/// Runs `krabka tier ...`.
///
/// # Errors
///
/// [`CliError`] with the exit code of the failure.
pub async fn run(args: TierArgs) -> Result<(), CliError> {
    let common = args.common;
    let client = common.connect().await?;
    let TierCommand::Status { topics } = args.command;
    let meta = client.refresh_metadata(&[]).await?;
    let candidates: Vec<String> = if topics.is_empty() {
        let mut all: Vec<String> = meta
            .topics
            .values()
            .filter(|t| !t.is_internal)
            .map(|t| t.name.clone())
            .collect();
        all.sort();
        all
    } else {
        for t in &topics {
            if !meta.topics.contains_key(t) {
                return Err(CliError::NotFound(format!("topic {t} does not exist")));
            }
        }
        topics.clone()
    };
    let mut tiered = Vec::new();
    for name in &candidates {
        let configs = client
            .describe_configs(&ConfigResource::topic(name), &["remote.storage.enable"])
            .await?;
        let on = configs.iter().any(|c| {
            c.name == "remote.storage.enable"
                && c.value
                    .as_deref()
                    .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        });
        if on {
            tiered.push(name.clone());
        } else if !topics.is_empty() {
            eprintln!("krabka: topic {name} is not tiered (remote.storage.enable=false)");
        }
    }
    let refs: Vec<&str> = tiered.iter().map(String::as_str).collect();
    let mut local: BTreeMap<(String, i32), i64> = BTreeMap::new();
    if !refs.is_empty() {
        for dir in client.describe_log_dirs(&refs).await? {
            for p in dir.partitions.into_iter().filter(|p| !p.is_future) {
                *local.entry((p.topic, p.partition)).or_default() += p.size_bytes;
            }
        }
    }
    // The metadata topic is read only when it exists: connecting to it
    // would otherwise create it on a cluster that never tiered anything.
    let remote = if !tiered.is_empty() && meta.topics.contains_key("__remote_log_metadata") {
        let request = DumpRequest {
            source: MetadataSource::Broker {
                bootstrap: common
                    .bootstrap
                    .split(',')
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_owned(),
                security: common.security()?,
            },
            topic: if tiered.len() == 1 {
                tiered.first().cloned()
            } else {
                None
            },
            timeout: common.timeout(),
        };
        Some(dump(&request).await.map_err(|e| match e {
            super::remote_metadata::DumpError::Unreachable(_) => {
                CliError::Unreachable(e.to_string())
            }
            other => CliError::Failed(other.to_string()),
        })?)
    } else {
        None
    };
    let mut remote_by: BTreeMap<(String, i32), RemoteSums> = BTreeMap::new();
    if let Some(dump) = &remote {
        for p in &dump.partitions {
            let mut size = 0i64;
            let mut finished = 0usize;
            let mut started = 0usize;
            let mut last = None;
            for s in &p.segments {
                match s.state.as_str() {
                    "COPY_SEGMENT_FINISHED" => {
                        size += i64::from(s.segment_size_in_bytes);
                        finished += 1;
                        last =
                            Some(last.map_or(s.event_timestamp_ms, |l: i64| {
                                l.max(s.event_timestamp_ms)
                            }));
                    }
                    "COPY_SEGMENT_STARTED" => started += 1,
                    _ => {}
                }
            }
            // Two incarnations of a topic name: keep the sums of both (the
            // deleted one's segments are being removed).
            let entry = remote_by.entry((p.topic.clone(), p.partition)).or_default();
            entry.size += size;
            entry.finished += finished;
            entry.last_copy = match (entry.last_copy, last) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            entry.started += started;
        }
    }
    let mut rows = Vec::new();
    for name in &tiered {
        let Some(info) = meta.topics.get(name) else {
            continue;
        };
        let parts: Vec<i32> = info.partitions.iter().map(|p| p.partition).collect();
        let starts = offsets(&client, name, &parts, OffsetSpec::Earliest).await;
        let local_starts = offsets(&client, name, &parts, OffsetSpec::EarliestLocal).await;
        let tiered_ends = offsets(&client, name, &parts, OffsetSpec::LatestTiered).await;
        let ends = offsets(&client, name, &parts, OffsetSpec::Latest).await;
        for p in parts {
            let key = (name.clone(), p);
            let r = remote_by.get(&key);
            let highest = tiered_ends.get(&p).copied();
            let end = ends.get(&p).copied();
            let last = r.and_then(|r| r.last_copy);
            rows.push(PartitionTier {
                topic: name.clone(),
                partition: p,
                local_size_bytes: local.get(&key).copied(),
                remote_size_bytes: remote.as_ref().map(|_| r.map_or(0, |r| r.size)),
                remote_segments: remote.as_ref().map(|_| r.map_or(0, |r| r.finished)),
                log_start_offset: starts.get(&p).copied(),
                local_log_start_offset: local_starts.get(&p).copied(),
                highest_tiered_offset: highest,
                log_end_offset: end,
                copy_lag_offsets: highest.zip(end).map(|(h, e)| (e - (h + 1).max(0)).max(0)),
                last_copy_ms: last,
                last_copy: last.map(format_millis),
                copies_in_progress: remote.as_ref().map(|_| r.map_or(0, |r| r.started)),
            });
        }
    }
    match common.format {
        Format::Json => print_json(&rows),
        Format::Text => {
            if rows.is_empty() {
                println!("No tiered topics (remote.storage.enable=true).");
                return Ok(());
            }
            let mut table = Table::new(&[
                "TOPIC",
                "PARTITION",
                "LOCAL-SIZE",
                "REMOTE-SIZE",
                "REMOTE-SEGMENTS",
                "LOG-START",
                "LOCAL-START",
                "TIERED-UP-TO",
                "LOG-END",
                "COPY-LAG(<=)",
                "LAST-COPY",
            ]);
            let n = |v: Option<i64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
            for r in &rows {
                table.row(vec![
                    r.topic.clone(),
                    r.partition.to_string(),
                    r.local_size_bytes.map_or_else(|| "-".into(), human_bytes),
                    r.remote_size_bytes.map_or_else(|| "-".into(), human_bytes),
                    r.remote_segments
                        .map_or_else(|| "-".into(), |s| s.to_string()),
                    n(r.log_start_offset),
                    n(r.local_log_start_offset),
                    n(r.highest_tiered_offset),
                    n(r.log_end_offset),
                    n(r.copy_lag_offsets),
                    r.last_copy.clone().unwrap_or_else(|| "-".into()),
                ]);
            }
            table.print()?;
            println!(
                "\nCOPY-LAG counts offsets above the highest tiered offset, the active segment included: an upper bound."
            );
            Ok(())
        }
    }
}
