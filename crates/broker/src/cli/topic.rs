//! `krabka topic create|list|describe|alter-config|add-partitions|delete`:
//! what `kafka-topics.sh` does, plus the sizes, offsets, configs with their
//! sources and the tiered / diskless state in `describe`.

use {
    super::{CliError, Common, Format, Table, human_bytes, key_value, print_json, progress},
    clap::{Args, Subcommand},
    krabka_client::{
        AlterConfigOp, Client, ConfigEntry, ConfigResource, IsolationLevel, NewTopic, OffsetSpec,
        config_source_name,
    },
    serde::Serialize,
    std::collections::BTreeMap,
};

/// `krabka topic ...`.
#[derive(Debug, Args)]
pub struct TopicArgs {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: TopicCommand,
}

#[derive(Debug, Subcommand)]
enum TopicCommand {
    /// Create a topic.
    Create {
        /// The topic's name.
        name: String,
        /// Partitions; the broker's num.partitions when not given.
        #[arg(long, short = 'p')]
        partitions: Option<i32>,
        /// Replication factor; the broker's default when not given.
        #[arg(long, short = 'r')]
        replication_factor: Option<i16>,
        /// A topic config, name=value; repeatable.
        #[arg(long = "config", short = 'c', value_name = "NAME=VALUE")]
        configs: Vec<String>,
        /// Succeed when the topic already exists.
        #[arg(long)]
        if_not_exists: bool,
    },
    /// List topics.
    List {
        /// Include internal topics (__consumer_offsets, ...).
        #[arg(long)]
        internal: bool,
    },
    /// Describe topics: partitions, leaders, offsets, sizes, configs and tiered state.
    Describe {
        /// Topics to describe; every non-internal topic when none.
        names: Vec<String>,
        /// Show every config, not only those set on the topic or broker.
        #[arg(long)]
        all_configs: bool,
    },
    /// Change a topic's configs.
    AlterConfig {
        /// The topic.
        name: String,
        /// Set a config, name=value; repeatable.
        #[arg(long = "set", value_name = "NAME=VALUE")]
        set: Vec<String>,
        /// Remove a config override (back to the broker default); repeatable.
        #[arg(long = "delete", value_name = "NAME")]
        delete: Vec<String>,
        /// Append to a list config, name=value; repeatable.
        #[arg(long = "append", value_name = "NAME=VALUE")]
        append: Vec<String>,
        /// Remove from a list config, name=value; repeatable.
        #[arg(long = "subtract", value_name = "NAME=VALUE")]
        subtract: Vec<String>,
        /// Only validate the change.
        #[arg(long)]
        dry_run: bool,
    },
    /// Raise a topic's partition count.
    AddPartitions {
        /// The topic.
        name: String,
        /// The new total number of partitions.
        #[arg(long, short = 'p', value_name = "TOTAL")]
        partitions: i32,
    },
    /// Delete topics.
    Delete {
        /// The topics.
        #[arg(required = true)]
        names: Vec<String>,
        /// Succeed for topics that do not exist.
        #[arg(long)]
        if_exists: bool,
    },
}

/// Runs `krabka topic ...`.
///
/// # Errors
///
/// [`CliError`] with the exit code of the failure.
pub async fn run(args: TopicArgs) -> Result<(), CliError> {
    let common = args.common;
    let client = common.connect().await?;
    match args.command {
        TopicCommand::Create {
            name,
            partitions,
            replication_factor,
            configs,
            if_not_exists,
        } => {
            let mut topic = NewTopic::new(&name, partitions.unwrap_or(-1))
                .replication_factor(replication_factor.unwrap_or(-1));
            for c in &configs {
                let (k, v) = key_value(c)?;
                topic = topic.config(k, v);
            }
            create(&client, &common, &topic, if_not_exists).await
        }
        TopicCommand::List { internal } => list(&client, &common, internal).await,
        TopicCommand::Describe { names, all_configs } => {
            describe(&client, &common, names, all_configs).await
        }
        TopicCommand::AlterConfig {
            name,
            set,
            delete,
            append,
            subtract,
            dry_run,
        } => {
            let ops = config_ops(&set, &delete, &append, &subtract)?;
            client
                .incremental_alter_configs(&ConfigResource::topic(&name), &ops, dry_run)
                .await?;
            report(
                &common,
                &serde_json::json!({"topic": name, "altered": ops.len(), "dry_run": dry_run}),
                &format!(
                    "{} {} config(s) of topic {name}",
                    if dry_run { "Validated" } else { "Altered" },
                    ops.len()
                ),
            )
        }
        TopicCommand::AddPartitions { name, partitions } => {
            let result = client
                .create_partitions(&[(&name, partitions)], common.timeout(), false)
                .await?
                .pop()
                .map(|(_, r)| r)
                .unwrap_or(Ok(()));
            result?;
            report(
                &common,
                &serde_json::json!({"topic": name, "partitions": partitions}),
                &format!("Topic {name} now has {partitions} partitions"),
            )
        }
        TopicCommand::Delete { names, if_exists } => {
            delete(&client, &common, &names, if_exists).await
        }
    }
}

/// The alter operations of `--set/--delete/--append/--subtract`.
///
/// # Errors
///
/// [`CliError::Usage`] for a malformed pair or no operation at all.
pub fn config_ops(
    set: &[String],
    delete: &[String],
    append: &[String],
    subtract: &[String],
) -> Result<Vec<AlterConfigOp>, CliError> {
    let mut ops = Vec::new();
    for s in set {
        let (k, v) = key_value(s)?;
        ops.push(AlterConfigOp::Set(k, v));
    }
    for d in delete {
        ops.push(AlterConfigOp::Delete(d.trim().to_owned()));
    }
    for a in append {
        let (k, v) = key_value(a)?;
        ops.push(AlterConfigOp::Append(k, v));
    }
    for s in subtract {
        let (k, v) = key_value(s)?;
        ops.push(AlterConfigOp::Subtract(k, v));
    }
    if ops.is_empty() {
        return Err(CliError::Usage(
            "nothing to change: give --set, --delete, --append or --subtract".into(),
        ));
    }
    Ok(ops)
}

/// Prints `json` or `text` according to the format.
fn report(common: &Common, json: &serde_json::Value, text: &str) -> Result<(), CliError> {
    match common.format {
        Format::Json => print_json(json),
        Format::Text => {
            println!("{text}");
            Ok(())
        }
    }
}

async fn create(
    client: &Client,
    common: &Common,
    topic: &NewTopic,
    if_not_exists: bool,
) -> Result<(), CliError> {
    let id = match client.create_topic(topic, common.timeout()).await {
        Ok(id) => id,
        // TOPIC_ALREADY_EXISTS
        Err(e) if if_not_exists && e.code() == Some(36) => client.topic(&topic.name).await?.id,
        Err(e) => return Err(e.into()),
    };
    let info = client.refresh_metadata(&[&topic.name]).await?;
    let partitions = info.topics.get(&topic.name).map_or(topic.partitions, |t| {
        i32::try_from(t.partitions.len()).unwrap_or(i32::MAX)
    });
    let id_text = id.map(krabka_ids::kafka_uuid);
    report(
        common,
        &serde_json::json!({"topic": topic.name, "topic_id": id_text, "partitions": partitions}),
        &format!(
            "Created topic {} ({} partitions{})",
            topic.name,
            partitions,
            id_text.map(|i| format!(", id {i}")).unwrap_or_default()
        ),
    )
}

#[derive(Debug, Serialize)]
struct ListedTopic {
    name: String,
    topic_id: Option<String>,
    partitions: usize,
    internal: bool,
}

async fn list(client: &Client, common: &Common, internal: bool) -> Result<(), CliError> {
    let meta = client.refresh_metadata(&[]).await?;
    let mut topics: Vec<ListedTopic> = meta
        .topics
        .values()
        .filter(|t| internal || !t.is_internal)
        .map(|t| ListedTopic {
            name: t.name.clone(),
            topic_id: t.id.map(krabka_ids::kafka_uuid),
            partitions: t.partitions.len(),
            internal: t.is_internal,
        })
        .collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    match common.format {
        Format::Json => print_json(&topics),
        Format::Text => {
            let mut table = Table::new(&["TOPIC", "PARTITIONS", "TOPIC-ID"]);
            for t in &topics {
                table.row(vec![
                    t.name.clone(),
                    t.partitions.to_string(),
                    t.topic_id.clone().unwrap_or_default(),
                ]);
            }
            table.print()
        }
    }
}

/// One partition in `topic describe`.
#[derive(Debug, Serialize)]
struct PartitionDescription {
    partition: i32,
    leader: Option<i32>,
    leader_epoch: i32,
    replicas: Vec<i32>,
    isr: Vec<i32>,
    log_start_offset: Option<i64>,
    log_end_offset: Option<i64>,
    /// Bytes of the local log (DescribeLogDirs).
    size_bytes: Option<i64>,
    /// Tiered topics: the local log start (ListOffsets -4).
    #[serde(skip_serializing_if = "Option::is_none")]
    local_log_start_offset: Option<i64>,
    /// Tiered topics: the highest offset in the remote tier (ListOffsets -5), -1 when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    highest_tiered_offset: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// One config in `topic describe` and `config describe`.
#[derive(Debug, Serialize)]
pub struct DescribedConfig {
    name: String,
    value: Option<String>,
    source: &'static str,
    read_only: bool,
    sensitive: bool,
    /// Where the value would come from without this source, in order.
    synonyms: Vec<(String, Option<String>, &'static str)>,
}

impl From<ConfigEntry> for DescribedConfig {
    fn from(c: ConfigEntry) -> Self {
        Self {
            name: c.name,
            value: c.value,
            source: config_source_name(c.source),
            read_only: c.read_only,
            sensitive: c.sensitive,
            synonyms: c
                .synonyms
                .into_iter()
                .map(|s| (s.name, s.value, config_source_name(s.source)))
                .collect(),
        }
    }
}

impl DescribedConfig {
    /// Whether the value was set by someone (not Kafka's default).
    #[must_use]
    pub fn is_set(&self) -> bool {
        self.source != "DEFAULT_CONFIG"
    }

    /// A row of NAME VALUE SOURCE.
    #[must_use]
    pub fn row(&self) -> Vec<String> {
        vec![
            self.name.clone(),
            if self.sensitive {
                "(sensitive)".to_owned()
            } else {
                self.value.clone().unwrap_or_else(|| "null".to_owned())
            },
            self.source.to_owned(),
        ]
    }
}

#[derive(Debug, Serialize)]
struct TopicDescription {
    name: String,
    topic_id: Option<String>,
    internal: bool,
    partition_count: usize,
    size_bytes: i64,
    /// `remote.storage.enable` (KIP-405).
    tiered: bool,
    /// `diskless.enable` (KIP-1150), false when the broker has no such config.
    diskless: bool,
    partitions: Vec<PartitionDescription>,
    configs: Vec<DescribedConfig>,
}

fn config_is_true(configs: &[DescribedConfig], name: &str) -> bool {
    configs.iter().any(|c| {
        c.name == name
            && c.value
                .as_deref()
                .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    })
}

/// The offsets of every partition for `spec`, or `None` per partition when
/// the broker cannot answer it (e.g. ListOffsets too old for -4/-5).
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
        .map(|listed| {
            listed
                .into_iter()
                .map(|o| (o.partition, o.offset))
                .collect()
        })
        .unwrap_or_default()
}

async fn describe(
    client: &Client,
    common: &Common,
    names: Vec<String>,
    all_configs: bool,
) -> Result<(), CliError> {
    let meta = client.refresh_metadata(&[]).await?;
    let names: Vec<String> = if names.is_empty() {
        let mut all: Vec<String> = meta
            .topics
            .values()
            .filter(|t| !t.is_internal)
            .map(|t| t.name.clone())
            .collect();
        all.sort();
        all
    } else {
        names
    };
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    // Sizes: every replica of the described topics on every broker.
    let mut sizes: BTreeMap<(String, i32), i64> = BTreeMap::new();
    if !name_refs.is_empty() {
        if let Ok(dirs) = client.describe_log_dirs(&name_refs).await {
            for dir in dirs {
                for p in dir.partitions.into_iter().filter(|p| !p.is_future) {
                    *sizes.entry((p.topic, p.partition)).or_default() += p.size_bytes;
                }
            }
        }
    }
    let mut described = Vec::with_capacity(names.len());
    for name in &names {
        let info = client
            .refresh_metadata(&[name])
            .await?
            .topic(name)
            .cloned()
            .map_err(|_| CliError::NotFound(format!("topic {name} does not exist")))?;
        let configs: Vec<DescribedConfig> = client
            .describe_configs(&ConfigResource::topic(name), &[])
            .await?
            .into_iter()
            .map(DescribedConfig::from)
            .collect();
        let tiered = config_is_true(&configs, "remote.storage.enable");
        let diskless = config_is_true(&configs, "diskless.enable");
        let indexes: Vec<i32> = info.partitions.iter().map(|p| p.partition).collect();
        let starts = offsets(client, name, &indexes, OffsetSpec::Earliest).await;
        let ends = offsets(client, name, &indexes, OffsetSpec::Latest).await;
        let (local_starts, tiered_ends) = if tiered {
            (
                offsets(client, name, &indexes, OffsetSpec::EarliestLocal).await,
                offsets(client, name, &indexes, OffsetSpec::LatestTiered).await,
            )
        } else {
            (BTreeMap::new(), BTreeMap::new())
        };
        let partitions: Vec<PartitionDescription> = info
            .partitions
            .iter()
            .map(|p| PartitionDescription {
                partition: p.partition,
                leader: p.leader.map(|b| b.0),
                leader_epoch: p.leader_epoch.0,
                replicas: p.replicas.iter().map(|b| b.0).collect(),
                isr: p.isr.iter().map(|b| b.0).collect(),
                log_start_offset: starts.get(&p.partition).copied(),
                log_end_offset: ends.get(&p.partition).copied(),
                size_bytes: sizes.get(&(name.clone(), p.partition)).copied(),
                local_log_start_offset: local_starts.get(&p.partition).copied(),
                highest_tiered_offset: tiered_ends.get(&p.partition).copied(),
                error: (p.error_code != 0).then(|| krabka_client::error_name(p.error_code)),
            })
            .collect();
        described.push(TopicDescription {
            name: name.clone(),
            topic_id: info.id.map(krabka_ids::kafka_uuid),
            internal: info.is_internal,
            partition_count: partitions.len(),
            size_bytes: partitions.iter().filter_map(|p| p.size_bytes).sum(),
            tiered,
            diskless,
            partitions,
            configs,
        });
    }
    match common.format {
        Format::Json => print_json(&described),
        Format::Text => {
            for (i, t) in described.iter().enumerate() {
                if i > 0 {
                    println!();
                }
                print_topic(t, all_configs)?;
            }
            Ok(())
        }
    }
}

fn opt(v: Option<i64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn ids(v: &[i32]) -> String {
    v.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn print_topic(t: &TopicDescription, all_configs: bool) -> Result<(), CliError> {
    println!(
        "Topic: {}  TopicId: {}  Partitions: {}  Size: {}  Tiered: {}  Diskless: {}{}",
        t.name,
        t.topic_id.as_deref().unwrap_or("-"),
        t.partition_count,
        human_bytes(t.size_bytes),
        if t.tiered { "yes" } else { "no" },
        if t.diskless { "yes" } else { "no" },
        if t.internal { "  (internal)" } else { "" }
    );
    let mut header = vec![
        "PARTITION",
        "LEADER",
        "EPOCH",
        "REPLICAS",
        "ISR",
        "LOG-START",
        "LOG-END",
        "SIZE",
    ];
    if t.tiered {
        header.extend(["LOCAL-START", "TIERED-UP-TO"]);
    }
    let mut table = Table::new(&header);
    for p in &t.partitions {
        let mut row = vec![
            p.partition.to_string(),
            p.leader
                .map_or_else(|| "none".to_owned(), |l| l.to_string()),
            p.leader_epoch.to_string(),
            ids(&p.replicas),
            ids(&p.isr),
            opt(p.log_start_offset),
            opt(p.log_end_offset),
            p.size_bytes.map_or_else(|| "-".to_owned(), human_bytes),
        ];
        if t.tiered {
            row.push(opt(p.local_log_start_offset));
            row.push(opt(p.highest_tiered_offset));
        }
        if let Some(e) = &p.error {
            row.push(e.clone());
        }
        table.row(row);
    }
    table.print()?;
    let mut configs = Table::new(&["CONFIG", "VALUE", "SOURCE"]);
    for c in t.configs.iter().filter(|c| all_configs || c.is_set()) {
        configs.row(c.row());
    }
    if configs.is_empty() {
        println!("Configs: all defaults (--all-configs to list them)");
        Ok(())
    } else {
        configs.print()
    }
}

async fn delete(
    client: &Client,
    common: &Common,
    names: &[String],
    if_exists: bool,
) -> Result<(), CliError> {
    let bar = progress(u64::try_from(names.len()).unwrap_or(0), "deleting topics");
    let mut outcomes = Vec::new();
    let mut failures = Vec::new();
    let mut missing = Vec::new();
    // In chunks so the progress moves and one huge request does not time out.
    for chunk in names.chunks(50) {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        for (name, result) in client.delete_topics(&refs, common.timeout()).await? {
            let outcome = match result {
                Ok(()) => "deleted".to_owned(),
                Err(e) if e.code() == Some(3) => {
                    if !if_exists {
                        missing.push(name.clone());
                    }
                    "does not exist".to_owned()
                }
                Err(e) => {
                    failures.push(format!("{name}: {e}"));
                    e.to_string()
                }
            };
            outcomes.push(serde_json::json!({"topic": name, "result": outcome}));
            if common.format == Format::Text {
                bar.suspend(|| println!("{name}: {outcome}"));
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    if common.format == Format::Json {
        print_json(&outcomes)?;
    }
    if !failures.is_empty() {
        return Err(CliError::Failed(format!(
            "could not delete {}",
            failures.join("; ")
        )));
    }
    if !missing.is_empty() {
        return Err(CliError::NotFound(format!(
            "no such topic: {}",
            missing.join(", ")
        )));
    }
    Ok(())
}
