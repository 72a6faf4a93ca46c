//! `krabka cluster info` (brokers, controller, cluster id, and in cluster
//! mode the broker leases and coordinator shard owners, which are not in the
//! Kafka protocol: they are read from the cluster database when
//! `--database-url` is given) and
//! `krabka log-dirs` (each broker's log directories and the replicas in
//! them, from DescribeLogDirs).

use {
    super::{CliError, Common, Format, Table, human_bytes, print_json},
    clap::{Args, Subcommand},
    serde::Serialize,
};

/// `krabka cluster ...`.
#[derive(Debug, Args)]
pub struct ClusterArgs {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(Debug, Subcommand)]
enum ClusterCommand {
    /// The cluster id, the controller and every broker; with
    /// `--database-url`, also the cluster-mode leases and shard owners.
    Info {
        /// The cluster database (`postgresql://...`), to show broker leases
        /// and coordinator shard owners of a cluster-mode deployment.
        #[arg(long, value_name = "URL", env = "KRABKA_DATABASE_URL")]
        database_url: Option<String>,
    },
    /// Cluster mode: brokers, leases and coordinator shard owners, read
    /// from the cluster database (works while every broker is down).
    Status {
        /// The broker configuration to take `krabka.cluster.database.*` from.
        #[arg(long, short = 'c', value_name = "FILE")]
        config: Option<std::path::PathBuf>,
        /// Override one setting (e.g. `krabka.cluster.database.url=...`); repeatable.
        #[arg(long = "override", short = 'o', value_name = "NAME=VALUE")]
        overrides: Vec<String>,
    },
}

impl ClusterArgs {
    /// `krabka cluster status` reads the database, not a broker: its
    /// configuration file and overrides, or the arguments back for [`run`].
    ///
    /// # Errors
    ///
    /// The arguments themselves when the command talks to a broker.
    pub fn into_database_status(
        self,
    ) -> Result<(Option<std::path::PathBuf>, Vec<String>), Box<Self>> {
        match self.command {
            ClusterCommand::Status { config, overrides } => Ok((config, overrides)),
            ClusterCommand::Info { .. } => Err(Box::new(self)),
        }
    }
}

#[derive(Debug, Serialize)]
struct BrokerView {
    id: i32,
    host: String,
    port: i32,
    rack: Option<String>,
}

/// Runs `krabka cluster ...`.
///
/// # Errors
///
/// [`CliError`] with the exit code of the failure.
pub async fn run(args: ClusterArgs) -> Result<(), CliError> {
    let common = args.common;
    let client = common.connect().await?;
    match args.command {
        ClusterCommand::Status { .. } => Err(CliError::Usage(
            "krabka cluster status reads the cluster database, not a broker".to_owned(),
        )),
        ClusterCommand::Info { database_url } => {
            let d = client.describe_cluster().await?;
            let leases = match database_url {
                Some(url) => Some(read_leases(&url, common.timeout()).await?),
                None => None,
            };
            let topics = client.refresh_metadata(&[]).await?.topics.len();
            let brokers: Vec<BrokerView> = d
                .brokers
                .iter()
                .map(|b| BrokerView {
                    id: b.id.0,
                    host: b.host.clone(),
                    port: b.port,
                    rack: b.rack.clone(),
                })
                .collect();
            match common.format {
                Format::Json => print_json(&serde_json::json!({
                    "cluster_id": d.cluster_id,
                    "controller": d.controller.map(|c| c.0),
                    "brokers": brokers,
                    "topics": topics,
                    "cluster_database": leases.as_ref().map_or_else(
                        || serde_json::json!({"read": false, "reason": NO_DATABASE}),
                        leases_json,
                    ),
                })),
                Format::Text => {
                    println!("Cluster id: {}", d.cluster_id.as_deref().unwrap_or("-"));
                    println!(
                        "Controller: {}",
                        d.controller
                            .map_or_else(|| "none".to_owned(), |c| c.0.to_string())
                    );
                    println!("Topics:     {topics}");
                    println!();
                    let mut table = Table::new(&["BROKER", "ADDRESS", "RACK", "ROLE"]);
                    for b in &brokers {
                        table.row(vec![
                            b.id.to_string(),
                            format!("{}:{}", b.host, b.port),
                            b.rack.clone().unwrap_or_else(|| "-".into()),
                            if d.controller.map(|c| c.0) == Some(b.id) {
                                "controller".into()
                            } else {
                                String::new()
                            },
                        ]);
                    }
                    table.print()?;
                    println!();
                    match &leases {
                        Some(status) => print!("{}", super::cluster_status::render(status)),
                        None => println!("Leases and shard owners: not shown ({NO_DATABASE})."),
                    }
                    Ok(())
                }
            }
        }
    }
}

/// Why `cluster info` shows no leases.
const NO_DATABASE: &str = "they live in the cluster database, not in the Kafka protocol; \
     pass --database-url or set KRABKA_DATABASE_URL to read them";

async fn read_leases(
    url: &str,
    timeout: std::time::Duration,
) -> Result<super::cluster_status::Status, CliError> {
    let mut config = krabka_cluster::DatabaseConfig::new(url);
    config.pool_size = 1;
    config.connect_timeout = timeout.min(std::time::Duration::from_secs(10));
    match tokio::time::timeout(timeout, super::cluster_status::status(&config)).await {
        Ok(Ok(status)) => Ok(status),
        Ok(Err(e)) => Err(CliError::Unreachable(format!(
            "cannot read the cluster database: {e}"
        ))),
        Err(_) => Err(CliError::Unreachable(format!(
            "the cluster database did not answer within {} s",
            timeout.as_secs()
        ))),
    }
}

fn leases_json(status: &super::cluster_status::Status) -> serde_json::Value {
    serde_json::json!({
        "read": true,
        "cluster_id": status.cluster_id,
        "metadata_version": status.metadata_version,
        "brokers": status.brokers.iter().map(|b| serde_json::json!({
            "id": b.node.0,
            "live": b.live,
            "epoch": b.epoch.0,
            "lease_remaining_ms": b.remaining_ms,
            "rack": b.rack,
            "listeners": b.listeners,
        })).collect::<Vec<_>>(),
        "shards": status.shards.iter().map(|s| serde_json::json!({
            "kind": s.shard.kind.as_str(),
            "partition": s.shard.partition,
            "owner": s.owner.filter(|_| s.live).map(|o| o.0),
            "last_owner": s.owner.map(|o| o.0),
            "epoch": s.epoch.0,
            "live": s.live,
            "lease_remaining_ms": s.remaining_ms,
        })).collect::<Vec<_>>(),
    })
}

/// `krabka log-dirs`.
#[derive(Debug, Args)]
pub struct LogDirsArgs {
    #[command(flatten)]
    common: Common,
    /// Only replicas of these topics; all when none.
    #[arg(long = "topic")]
    topics: Vec<String>,
}

/// Runs `krabka log-dirs`.
///
/// # Errors
///
/// [`CliError`] with the exit code of the failure.
pub async fn log_dirs(args: LogDirsArgs) -> Result<(), CliError> {
    let common = args.common;
    let client = common.connect().await?;
    let refs: Vec<&str> = args.topics.iter().map(String::as_str).collect();
    let dirs = client.describe_log_dirs(&refs).await?;
    match common.format {
        Format::Json => print_json(
            &dirs
                .iter()
                .map(|d| {
                    serde_json::json!({
                        "broker": d.broker.0,
                        "path": d.path,
                        "error": (d.error_code != 0).then(|| krabka_client::error_name(d.error_code)),
                        "total_bytes": d.total_bytes,
                        "usable_bytes": d.usable_bytes,
                        "partitions": d.partitions.iter().map(|p| serde_json::json!({
                            "topic": p.topic,
                            "partition": p.partition,
                            "size_bytes": p.size_bytes,
                            "offset_lag": p.offset_lag,
                            "is_future": p.is_future,
                        })).collect::<Vec<_>>(),
                    })
                })
                .collect::<Vec<_>>(),
        ),
        Format::Text => {
            for (i, d) in dirs.iter().enumerate() {
                if i > 0 {
                    println!();
                }
                let total: i64 = d.partitions.iter().map(|p| p.size_bytes).sum();
                println!(
                    "Broker {}  {}  volume {} of which {} free  replicas {} ({}){}",
                    d.broker.0,
                    d.path,
                    human_bytes(d.total_bytes),
                    human_bytes(d.usable_bytes),
                    d.partitions.len(),
                    human_bytes(total),
                    if d.error_code == 0 {
                        String::new()
                    } else {
                        format!("  ERROR {}", krabka_client::error_name(d.error_code))
                    }
                );
                let mut table = Table::new(&["TOPIC", "PARTITION", "SIZE", "BYTES", "OFFSET-LAG"]);
                for p in &d.partitions {
                    table.row(vec![
                        p.topic.clone(),
                        p.partition.to_string(),
                        human_bytes(p.size_bytes),
                        p.size_bytes.to_string(),
                        p.offset_lag.to_string(),
                    ]);
                }
                table.print()?;
            }
            Ok(())
        }
    }
}
