//! `krabka group list|describe|reset-offsets|delete-offsets|delete`: what
//! `kafka-consumer-groups.sh` does. `describe` shows the members, each
//! partition's committed offset, log end offset and lag; `reset-offsets`
//! takes Kafka's strategies and, as Kafka's tool, only shows the plan unless
//! `--execute` is given.

use {
    super::{
        CliError, Common, Format, Table, print_json, progress,
        timefmt::{now_millis, parse_datetime, parse_duration},
    },
    clap::{ArgGroup, Args, Subcommand},
    krabka_client::{Client, GroupDescription, IsolationLevel, OffsetSpec},
    serde::Serialize,
    std::collections::{BTreeMap, BTreeSet},
};

/// `krabka group ...`.
#[derive(Debug, Args)]
pub struct GroupArgs {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: GroupCommand,
}

#[derive(Debug, Subcommand)]
enum GroupCommand {
    /// List consumer groups.
    List {
        /// Only groups in this state (Stable, Empty, ...); repeatable.
        #[arg(long = "state")]
        states: Vec<String>,
    },
    /// Describe groups: members, assignment, committed offsets and lag.
    Describe {
        /// The groups.
        #[arg(required = true)]
        groups: Vec<String>,
    },
    /// Plan or apply new committed offsets for a group (dry run unless --execute).
    #[command(group(
        ArgGroup::new("strategy")
            .required(true)
            .args(["to_earliest", "to_latest", "to_offset", "to_datetime", "shift_by", "by_duration", "to_current"])
    ))]
    #[command(group(ArgGroup::new("scope").required(true).args(["topics", "all_topics"])))]
    #[command(group(ArgGroup::new("mode").args(["dry_run", "execute"])))]
    ResetOffsets {
        /// The group.
        group: String,
        /// A topic, or topic:partition,partition,...; repeatable.
        #[arg(long = "topic", value_name = "TOPIC[:PARTITIONS]")]
        topics: Vec<String>,
        /// Every topic the group has committed offsets for.
        #[arg(long)]
        all_topics: bool,
        /// The log start offsets.
        #[arg(long)]
        to_earliest: bool,
        /// The log end offsets.
        #[arg(long)]
        to_latest: bool,
        /// This offset (clamped to the log's range).
        #[arg(long, value_name = "OFFSET")]
        to_offset: Option<i64>,
        /// The first offset at or after this time (YYYY-MM-DDTHH:mm:SS.sss, UTC unless zoned, or epoch ms).
        #[arg(long, value_name = "DATETIME")]
        to_datetime: Option<String>,
        /// The committed offset moved by N (negative goes back).
        #[arg(long, value_name = "N", allow_hyphen_values = true)]
        shift_by: Option<i64>,
        /// The first offset at or after now minus this ISO-8601 duration (PT1H, P1DT2H, ...).
        #[arg(long, value_name = "DURATION")]
        by_duration: Option<String>,
        /// The committed offsets as they are (re-commit).
        #[arg(long)]
        to_current: bool,
        /// Only show the plan (the default).
        #[arg(long)]
        dry_run: bool,
        /// Commit the new offsets (the group must have no active members).
        #[arg(long)]
        execute: bool,
    },
    /// Delete a group's committed offsets for topics or partitions.
    DeleteOffsets {
        /// The group.
        group: String,
        /// A topic, or topic:partition,partition,...; repeatable.
        #[arg(long = "topic", value_name = "TOPIC[:PARTITIONS]", required = true)]
        topics: Vec<String>,
    },
    /// Delete groups (they must have no active members).
    Delete {
        /// The groups.
        #[arg(required = true)]
        groups: Vec<String>,
    },
}

/// Runs `krabka group ...`.
///
/// # Errors
///
/// [`CliError`] with the exit code of the failure.
pub async fn run(args: GroupArgs) -> Result<(), CliError> {
    let common = args.common;
    let client = common.connect().await?;
    match args.command {
        GroupCommand::List { states } => list(&client, &common, &states).await,
        GroupCommand::Describe { groups } => {
            let mut all = Vec::new();
            for g in &groups {
                all.push(describe(&client, g).await?);
            }
            match common.format {
                Format::Json => print_json(&all),
                Format::Text => {
                    for (i, d) in all.iter().enumerate() {
                        if i > 0 {
                            println!();
                        }
                        print_described(d)?;
                    }
                    Ok(())
                }
            }
        }
        GroupCommand::ResetOffsets {
            group,
            topics,
            all_topics,
            to_earliest,
            to_latest,
            to_offset,
            to_datetime,
            shift_by,
            by_duration,
            to_current,
            dry_run: _,
            execute,
        } => {
            let strategy = if to_earliest {
                Strategy::Earliest
            } else if to_latest {
                Strategy::Latest
            } else if let Some(o) = to_offset {
                Strategy::Offset(o)
            } else if let Some(d) = to_datetime {
                Strategy::Timestamp(parse_datetime(&d).map_err(CliError::Usage)?)
            } else if let Some(n) = shift_by {
                Strategy::Shift(n)
            } else if let Some(d) = by_duration {
                Strategy::Timestamp(now_millis() - parse_duration(&d).map_err(CliError::Usage)?)
            } else if to_current {
                Strategy::Current
            } else {
                return Err(CliError::Usage("no reset strategy given".into()));
            };
            reset(
                &client, &common, &group, &topics, all_topics, strategy, execute,
            )
            .await
        }
        GroupCommand::DeleteOffsets { group, topics } => {
            let partitions = resolve_partitions(&client, &topics).await?;
            let results = client.delete_offsets(&group, &partitions).await?;
            let mut failed = Vec::new();
            let mut rows = Vec::new();
            for ((t, p), r) in results {
                let outcome = match r {
                    Ok(()) => "deleted".to_owned(),
                    Err(e) => {
                        failed.push(format!("{t}-{p}: {e}"));
                        e.to_string()
                    }
                };
                rows.push((t, p, outcome));
            }
            match common.format {
                Format::Json => print_json(
                    &rows
                        .iter()
                        .map(|(t, p, o)| serde_json::json!({"topic": t, "partition": p, "result": o}))
                        .collect::<Vec<_>>(),
                )?,
                Format::Text => {
                    let mut table = Table::new(&["TOPIC", "PARTITION", "RESULT"]);
                    for (t, p, o) in rows {
                        table.row(vec![t, p.to_string(), o]);
                    }
                    table.print()?;
                }
            }
            if failed.is_empty() {
                Ok(())
            } else {
                Err(CliError::Failed(failed.join("; ")))
            }
        }
        GroupCommand::Delete { groups } => {
            let refs: Vec<&str> = groups.iter().map(String::as_str).collect();
            let mut missing = Vec::new();
            let mut failed = Vec::new();
            let mut out = Vec::new();
            for (g, r) in client.delete_groups(&refs).await? {
                let outcome = match r {
                    Ok(()) => "deleted".to_owned(),
                    Err(e) if e.code() == Some(69) => {
                        missing.push(g.clone());
                        "does not exist".to_owned()
                    }
                    Err(e) => {
                        failed.push(format!("{g}: {e}"));
                        e.to_string()
                    }
                };
                if common.format == Format::Text {
                    println!("{g}: {outcome}");
                }
                out.push(serde_json::json!({"group": g, "result": outcome}));
            }
            if common.format == Format::Json {
                print_json(&out)?;
            }
            if !failed.is_empty() {
                return Err(CliError::Failed(failed.join("; ")));
            }
            if !missing.is_empty() {
                return Err(CliError::NotFound(format!(
                    "no such group: {}",
                    missing.join(", ")
                )));
            }
            Ok(())
        }
    }
}

async fn list(client: &Client, common: &Common, states: &[String]) -> Result<(), CliError> {
    let refs: Vec<&str> = states.iter().map(String::as_str).collect();
    let groups = client.list_groups(&refs).await?;
    match common.format {
        Format::Json => print_json(
            &groups
                .iter()
                .map(|g| {
                    serde_json::json!({
                        "group": g.group_id,
                        "state": g.state,
                        "type": g.group_type,
                        "protocol_type": g.protocol_type,
                        "coordinator": g.coordinator.0,
                    })
                })
                .collect::<Vec<_>>(),
        ),
        Format::Text => {
            let mut table = Table::new(&["GROUP", "STATE", "TYPE", "PROTOCOL-TYPE"]);
            for g in groups {
                table.row(vec![
                    g.group_id,
                    g.state.unwrap_or_else(|| "-".into()),
                    g.group_type.unwrap_or_else(|| "-".into()),
                    g.protocol_type,
                ]);
            }
            table.print()
        }
    }
}

/// One partition row of `group describe`.
#[derive(Debug, Serialize)]
struct PartitionLag {
    topic: String,
    partition: i32,
    /// The committed offset, `None` when the group has committed nothing.
    committed_offset: Option<i64>,
    log_end_offset: Option<i64>,
    /// Log end minus committed, `None` without a commit.
    lag: Option<i64>,
    member_id: Option<String>,
    client_id: Option<String>,
    host: Option<String>,
}

#[derive(Debug, Serialize)]
struct MemberView {
    member_id: String,
    group_instance_id: Option<String>,
    client_id: String,
    host: String,
    assignment: Vec<(String, i32)>,
}

#[derive(Debug, Serialize)]
struct Described {
    group: String,
    state: String,
    group_type: String,
    protocol_type: String,
    protocol: String,
    coordinator: i32,
    members: Vec<MemberView>,
    partitions: Vec<PartitionLag>,
    total_lag: i64,
}

/// The log end offsets of `partitions`, per topic.
async fn log_ends(
    client: &Client,
    partitions: &BTreeSet<(String, i32)>,
    spec: OffsetSpec,
) -> Result<BTreeMap<(String, i32), i64>, CliError> {
    let mut by_topic: BTreeMap<&str, Vec<(i32, OffsetSpec)>> = BTreeMap::new();
    for (t, p) in partitions {
        by_topic.entry(t).or_default().push((*p, spec));
    }
    let mut out = BTreeMap::new();
    for (topic, wanted) in by_topic {
        match client
            .list_offsets(topic, &wanted, IsolationLevel::ReadUncommitted)
            .await
        {
            Ok(listed) => {
                for o in listed {
                    out.insert((topic.to_owned(), o.partition), o.offset);
                }
            }
            // A committed offset of a deleted topic: no log end to show.
            Err(e) if e.code() == Some(3) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(out)
}

async fn describe(client: &Client, group: &str) -> Result<Described, CliError> {
    let d: GroupDescription = client.describe_group(group).await?;
    let committed = client.fetch_committed(group, None).await?;
    if d.state == "Dead" && d.members.is_empty() && committed.is_empty() {
        return Err(CliError::NotFound(format!(
            "consumer group {group} does not exist"
        )));
    }
    let mut owners: BTreeMap<(String, i32), &krabka_client::MemberDescription> = BTreeMap::new();
    for m in &d.members {
        for tp in &m.assignment {
            owners.insert(tp.clone(), m);
        }
    }
    let mut keys: BTreeSet<(String, i32)> = owners.keys().cloned().collect();
    let committed_by: BTreeMap<(String, i32), i64> = committed
        .iter()
        .filter(|c| c.offset >= 0)
        .map(|c| ((c.topic.clone(), c.partition), c.offset))
        .collect();
    keys.extend(committed_by.keys().cloned());
    let ends = log_ends(client, &keys, OffsetSpec::Latest).await?;
    let partitions: Vec<PartitionLag> = keys
        .iter()
        .map(|key| {
            let committed = committed_by.get(key).copied();
            let end = ends.get(key).copied();
            let owner = owners.get(key);
            PartitionLag {
                topic: key.0.clone(),
                partition: key.1,
                committed_offset: committed,
                log_end_offset: end,
                lag: committed.zip(end).map(|(c, e)| (e - c).max(0)),
                member_id: owner.map(|m| m.member_id.clone()),
                client_id: owner.map(|m| m.client_id.clone()),
                host: owner.map(|m| m.client_host.clone()),
            }
        })
        .collect();
    Ok(Described {
        group: d.group_id.clone(),
        state: d.state.clone(),
        group_type: d.group_type.clone(),
        protocol_type: d.protocol_type.clone(),
        protocol: d.protocol.clone(),
        coordinator: d.coordinator.id.0,
        total_lag: partitions.iter().filter_map(|p| p.lag).sum(),
        members: d
            .members
            .iter()
            .map(|m| MemberView {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                host: m.client_host.clone(),
                assignment: m.assignment.clone(),
            })
            .collect(),
        partitions,
    })
}

fn dash(v: Option<impl ToString>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn print_described(d: &Described) -> Result<(), CliError> {
    println!(
        "Group: {}  State: {}  Type: {}  Protocol: {}  Coordinator: {}  Members: {}  Total lag: {}",
        d.group,
        d.state,
        d.group_type,
        if d.protocol.is_empty() {
            "-"
        } else {
            &d.protocol
        },
        d.coordinator,
        d.members.len(),
        d.total_lag
    );
    let mut table = Table::new(&[
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]);
    for p in &d.partitions {
        table.row(vec![
            p.topic.clone(),
            p.partition.to_string(),
            dash(p.committed_offset),
            dash(p.log_end_offset),
            dash(p.lag),
            dash(p.member_id.clone()),
            dash(p.host.clone()),
            dash(p.client_id.clone()),
        ]);
    }
    table.print()?;
    if !d.members.is_empty() {
        println!();
        let mut members = Table::new(&["MEMBER-ID", "CLIENT-ID", "HOST", "PARTITIONS"]);
        for m in &d.members {
            members.row(vec![
                m.member_id.clone(),
                m.client_id.clone(),
                m.host.clone(),
                m.assignment
                    .iter()
                    .map(|(t, p)| format!("{t}-{p}"))
                    .collect::<Vec<_>>()
                    .join(","),
            ]);
        }
        members.print()?;
    }
    Ok(())
}

/// Kafka's reset strategies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strategy {
    Earliest,
    Latest,
    Offset(i64),
    /// The first offset at or after this timestamp (ms).
    Timestamp(i64),
    Shift(i64),
    Current,
}

/// `topic` or `topic:0,1,2` to partitions (all of the topic's when none are named).
async fn resolve_partitions(
    client: &Client,
    specs: &[String],
) -> Result<Vec<(String, i32)>, CliError> {
    let mut out = Vec::new();
    for spec in specs {
        let (topic, list) = match spec.split_once(':') {
            Some((t, l)) => (t.to_owned(), Some(l)),
            None => (spec.clone(), None),
        };
        let info = client
            .refresh_metadata(&[&topic])
            .await?
            .topic(&topic)
            .cloned()
            .map_err(|_| CliError::NotFound(format!("topic {topic} does not exist")))?;
        match list {
            None => out.extend(info.partitions.iter().map(|p| (topic.clone(), p.partition))),
            Some(list) => {
                for p in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    let p: i32 = p.parse().map_err(|_| {
                        CliError::Usage(format!("{spec}: {p:?} is not a partition number"))
                    })?;
                    if info.partition(p).is_none() {
                        return Err(CliError::NotFound(format!(
                            "topic {topic} has no partition {p}"
                        )));
                    }
                    out.push((topic.clone(), p));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

#[derive(Debug, Serialize)]
struct PlannedOffset {
    group: String,
    topic: String,
    partition: i32,
    current_offset: Option<i64>,
    new_offset: i64,
}

async fn reset(
    client: &Client,
    common: &Common,
    group: &str,
    topics: &[String],
    all_topics: bool,
    strategy: Strategy,
    execute: bool,
) -> Result<(), CliError> {
    let committed = client.fetch_committed(group, None).await?;
    let current: BTreeMap<(String, i32), i64> = committed
        .iter()
        .filter(|c| c.offset >= 0)
        .map(|c| ((c.topic.clone(), c.partition), c.offset))
        .collect();
    let partitions: Vec<(String, i32)> = if all_topics {
        let names: BTreeSet<String> = current.keys().map(|(t, _)| t.clone()).collect();
        let names: Vec<String> = names.into_iter().collect();
        resolve_partitions(client, &names).await?
    } else {
        resolve_partitions(client, topics).await?
    };
    if partitions.is_empty() {
        return Err(CliError::NotFound(format!(
            "group {group} has no committed offsets to reset"
        )));
    }
    if execute {
        let d = client.describe_group(group).await?;
        if !matches!(d.state.as_str(), "Empty" | "Dead") || !d.members.is_empty() {
            return Err(CliError::Failed(format!(
                "group {group} is {} with {} active member(s); offsets can only be reset while it is inactive",
                d.state,
                d.members.len()
            )));
        }
    }
    let keys: BTreeSet<(String, i32)> = partitions.iter().cloned().collect();
    let bar = progress(u64::try_from(keys.len()).unwrap_or(0), "resolving offsets");
    let earliest = log_ends(client, &keys, OffsetSpec::Earliest).await?;
    bar.inc(u64::try_from(keys.len() / 3).unwrap_or(0));
    let latest = log_ends(client, &keys, OffsetSpec::Latest).await?;
    bar.inc(u64::try_from(keys.len() / 3).unwrap_or(0));
    let by_time = match strategy {
        Strategy::Timestamp(ts) => Some(log_ends(client, &keys, OffsetSpec::Timestamp(ts)).await?),
        _ => None,
    };
    bar.finish_and_clear();
    let mut plan = Vec::with_capacity(keys.len());
    for key in &keys {
        let low = earliest.get(key).copied().unwrap_or(0);
        let high = latest.get(key).copied().unwrap_or(low);
        let now = current.get(key).copied();
        let target = match strategy {
            Strategy::Earliest => low,
            Strategy::Latest => high,
            Strategy::Offset(o) => o,
            // No record at or after the time: the log end, as Kafka does.
            Strategy::Timestamp(_) => by_time
                .as_ref()
                .and_then(|m| m.get(key).copied())
                .filter(|&o| o >= 0)
                .unwrap_or(high),
            Strategy::Shift(n) => now.unwrap_or(high).saturating_add(n),
            Strategy::Current => now.unwrap_or(high),
        };
        plan.push(PlannedOffset {
            group: group.to_owned(),
            topic: key.0.clone(),
            partition: key.1,
            current_offset: now,
            new_offset: target.clamp(low, high.max(low)),
        });
    }
    if execute {
        let offsets: Vec<(String, i32, i64)> = plan
            .iter()
            .map(|p| (p.topic.clone(), p.partition, p.new_offset))
            .collect();
        let bar = progress(u64::try_from(offsets.len()).unwrap_or(0), "committing");
        for chunk in offsets.chunks(500) {
            client.commit_offsets(group, None, chunk).await?;
            bar.inc(u64::try_from(chunk.len()).unwrap_or(0));
        }
        bar.finish_and_clear();
    }
    match common.format {
        Format::Json => print_json(&serde_json::json!({
            "group": group,
            "executed": execute,
            "offsets": plan,
        })),
        Format::Text => {
            let mut table = Table::new(&[
                "GROUP",
                "TOPIC",
                "PARTITION",
                "CURRENT-OFFSET",
                "NEW-OFFSET",
            ]);
            for p in &plan {
                table.row(vec![
                    p.group.clone(),
                    p.topic.clone(),
                    p.partition.to_string(),
                    dash(p.current_offset),
                    p.new_offset.to_string(),
                ]);
            }
            table.print()?;
            if !execute {
                println!("\nDry run: nothing was committed. Add --execute to apply.");
            }
            Ok(())
        }
    }
}
