//! `krabka txn list|describe|describe-producers`: what
//! `kafka-transactions.sh` shows, from ListTransactions,
//! DescribeTransactions and DescribeProducers.

use {
    super::{CliError, Common, Format, Table, print_json, timefmt::format_millis},
    clap::{Args, Subcommand},
    krabka_ids::ProducerId,
};

/// `krabka txn ...`.
#[derive(Debug, Args)]
pub struct TxnArgs {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: TxnCommand,
}

#[derive(Debug, Subcommand)]
enum TxnCommand {
    /// Every transactional id the coordinators hold.
    List {
        /// Only these states (Ongoing, CompleteCommit, ...); repeatable.
        #[arg(long = "state")]
        states: Vec<String>,
        /// Only these producer ids; repeatable.
        #[arg(long = "producer-id")]
        producer_ids: Vec<i64>,
    },
    /// State, producer, timeout and partitions of transactional ids.
    Describe {
        /// The transactional ids.
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// The producers active on a topic's partitions, with their open transactions.
    DescribeProducers {
        /// The topic.
        #[arg(long)]
        topic: String,
        /// Only these partitions; repeatable (all when none).
        #[arg(long = "partition", short = 'p')]
        partitions: Vec<i32>,
    },
}

/// Runs `krabka txn ...`.
///
/// # Errors
///
/// [`CliError`] with the exit code of the failure.
pub async fn run(args: TxnArgs) -> Result<(), CliError> {
    let common = args.common;
    let client = common.connect().await?;
    match args.command {
        TxnCommand::List {
            states,
            producer_ids,
        } => {
            let refs: Vec<&str> = states.iter().map(String::as_str).collect();
            let ids: Vec<ProducerId> = producer_ids.into_iter().map(ProducerId).collect();
            let listed = client.list_transactions(&refs, &ids).await?;
            match common.format {
                Format::Json => print_json(
                    &listed
                        .iter()
                        .map(|t| {
                            serde_json::json!({
                                "transactional_id": t.transactional_id,
                                "producer_id": t.producer_id.0,
                                "state": t.state,
                                "coordinator": t.coordinator.0,
                            })
                        })
                        .collect::<Vec<_>>(),
                ),
                Format::Text => {
                    let mut table =
                        Table::new(&["TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE"]);
                    for t in listed {
                        table.row(vec![
                            t.transactional_id,
                            t.coordinator.0.to_string(),
                            t.producer_id.0.to_string(),
                            t.state,
                        ]);
                    }
                    table.print()
                }
            }
        }
        TxnCommand::Describe { ids } => {
            let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
            let described = client.describe_transactions(&refs).await?;
            match common.format {
                Format::Json => print_json(
                    &described
                        .iter()
                        .map(|t| {
                            serde_json::json!({
                                "transactional_id": t.transactional_id,
                                "state": t.state,
                                "producer_id": t.producer.producer_id.0,
                                "producer_epoch": t.producer.epoch.0,
                                "timeout_ms": t.timeout_ms,
                                "start_time_ms": t.start_time_ms,
                                "partitions": t.partitions.iter().map(|(topic, p)| serde_json::json!({"topic": topic, "partition": p})).collect::<Vec<_>>(),
                            })
                        })
                        .collect::<Vec<_>>(),
                ),
                Format::Text => {
                    let mut table = Table::new(&[
                        "TRANSACTIONAL-ID",
                        "STATE",
                        "PRODUCER-ID",
                        "EPOCH",
                        "TIMEOUT-MS",
                        "STARTED",
                        "PARTITIONS",
                    ]);
                    for t in described {
                        table.row(vec![
                            t.transactional_id,
                            t.state,
                            t.producer.producer_id.0.to_string(),
                            t.producer.epoch.0.to_string(),
                            t.timeout_ms.to_string(),
                            format_millis(t.start_time_ms),
                            t.partitions
                                .iter()
                                .map(|(topic, p)| format!("{topic}-{p}"))
                                .collect::<Vec<_>>()
                                .join(","),
                        ]);
                    }
                    table.print()
                }
            }
        }
        TxnCommand::DescribeProducers { topic, partitions } => {
            let results = client.describe_producers(&topic, &partitions).await?;
            let mut rows = Vec::new();
            let mut failures = Vec::new();
            for (partition, result) in results {
                match result {
                    Ok(producers) => {
                        for p in producers {
                            rows.push((partition, p));
                        }
                    }
                    Err(e) => failures.push(format!("{topic}-{partition}: {e}")),
                }
            }
            match common.format {
                Format::Json => print_json(
                    &rows
                        .iter()
                        .map(|(partition, p)| {
                            serde_json::json!({
                                "topic": topic,
                                "partition": partition,
                                "producer_id": p.producer_id.0,
                                "producer_epoch": p.epoch,
                                "last_sequence": p.last_sequence,
                                "last_timestamp": p.last_timestamp,
                                "coordinator_epoch": p.coordinator_epoch,
                                "current_transaction_start_offset": p.current_txn_start_offset,
                            })
                        })
                        .collect::<Vec<_>>(),
                )?,
                Format::Text => {
                    let mut table = Table::new(&[
                        "PARTITION",
                        "PRODUCER-ID",
                        "EPOCH",
                        "LAST-SEQUENCE",
                        "LAST-TIMESTAMP",
                        "COORDINATOR-EPOCH",
                        "TXN-START-OFFSET",
                    ]);
                    for (partition, p) in &rows {
                        table.row(vec![
                            partition.to_string(),
                            p.producer_id.0.to_string(),
                            p.epoch.to_string(),
                            p.last_sequence.to_string(),
                            format_millis(p.last_timestamp),
                            p.coordinator_epoch.to_string(),
                            if p.current_txn_start_offset < 0 {
                                "-".to_owned()
                            } else {
                                p.current_txn_start_offset.to_string()
                            },
                        ]);
                    }
                    table.print()?;
                }
            }
            if failures.is_empty() {
                Ok(())
            } else {
                Err(CliError::Failed(failures.join("; ")))
            }
        }
    }
}
