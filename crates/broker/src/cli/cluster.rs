//! `krabka cluster info` (brokers, controller, cluster id) and
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
    /// The cluster id, the controller and every broker.
    Info,
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
            ClusterCommand::Info => Err(Box::new(self)),
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
        ClusterCommand::Info => {
            let d = client.describe_cluster().await?;
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
                    table.print()
                }
            }
        }
    }
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
