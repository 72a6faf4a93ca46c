//! The `krabka` binary: `krabka serve [--config FILE] [--override name=value]...`
//! `krabka remote-metadata dump [--bootstrap HOST:PORT] [--topic NAME]`,
//! `krabka remote-metadata worm-heads [--bootstrap HOST:PORT] [--topic NAME]` and
//! `krabka tls generate --dir DIR [--san HOST]... [--client NAME]...`.
//!
//! Settings are Kafka's property names. They come from the properties file,
//! then `KRABKA_*` environment variables (`KRABKA_LOG_DIRS` → `log.dirs`),
//! then `--override` flags; later sources win. An unknown or invalid
//! setting stops startup with a message naming it.

mod cli;

use {
    clap::{Parser, Subcommand},
    krabka_broker::{BrokerConfig, RawSettings},
    std::{path::PathBuf, process::ExitCode},
};

#[derive(Parser)]
#[command(
    name = "krabka",
    version,
    about = "A Kafka-compatible streaming broker"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a broker (node id 1 on 127.0.0.1:9092, data in ./krabka-data by default).
    Serve {
        /// A server.properties-style file with Kafka property names.
        #[arg(long, short = 'c', value_name = "FILE")]
        config: Option<PathBuf>,
        /// Override one setting, e.g. `--override num.partitions=3`; repeatable.
        #[arg(long = "override", short = 'o', value_name = "NAME=VALUE")]
        overrides: Vec<String>,
    },
    /// Inspect the KIP-405 remote log metadata of a running cluster.
    RemoteMetadata {
        #[command(subcommand)]
        command: RemoteMetadataCommand,
    },
    /// Certificates for TLS listeners.
    Tls {
        #[command(subcommand)]
        command: TlsCommand,
    },
}

#[derive(Subcommand)]
enum TlsCommand {
    /// Generate a CA, a broker certificate and client certificates (PEM,
    /// optionally PKCS#12): ca.pem, ca.key, broker.pem, broker.key,
    /// broker.p12, <client>.pem, <client>.key.
    Generate {
        /// Directory to write them to (created if missing).
        #[arg(long, value_name = "DIR")]
        dir: PathBuf,
        /// Common name of the broker certificate.
        #[arg(long, value_name = "NAME", default_value = "localhost")]
        broker_name: String,
        /// A DNS name or IP address of the broker; repeatable
        /// (default: localhost and 127.0.0.1).
        #[arg(long = "san", value_name = "HOST")]
        sans: Vec<String>,
        /// Also issue a client certificate with this common name; repeatable.
        #[arg(long = "client", value_name = "NAME")]
        clients: Vec<String>,
        /// Issue an already expired client certificate (for tests); repeatable.
        #[arg(long = "expired-client", value_name = "NAME")]
        expired_clients: Vec<String>,
        /// Encrypt broker.key with this password (ssl.key.password).
        #[arg(long, value_name = "PASSWORD")]
        key_password: Option<String>,
        /// Also write broker.p12 protected by this password (ssl.keystore.password).
        #[arg(long, value_name = "PASSWORD")]
        pkcs12_password: Option<String>,
    },
}

#[derive(Subcommand)]
enum RemoteMetadataCommand {
    /// Print every remote segment and partition-delete state from
    /// `__remote_log_metadata` as JSON.
    Dump {
        /// A broker of the cluster.
        #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:9092")]
        bootstrap: String,
        /// Only partitions of this topic.
        #[arg(long, value_name = "NAME")]
        topic: Option<String>,
        /// Seconds to wait for the cluster and the metadata.
        #[arg(long, value_name = "SECONDS", default_value_t = 60)]
        timeout_secs: u64,
    },
    /// Print the newest WORM chain head of each partition, as published in
    /// `__remote_log_metadata`: one JSON record per line, the file
    /// `krabka-worm-verify --expect-head` takes.
    WormHeads {
        /// A broker of the cluster.
        #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:9092")]
        bootstrap: String,
        /// Only partitions of this topic.
        #[arg(long, value_name = "NAME")]
        topic: Option<String>,
        /// Seconds to wait for the cluster and the metadata.
        #[arg(long, value_name = "SECONDS", default_value_t = 60)]
        timeout_secs: u64,
    },
}

#[global_allocator]
static ALLOCATOR: krabka_broker::alloc_guard::GuardedAllocator =
    krabka_broker::alloc_guard::GuardedAllocator;

fn load(config: Option<PathBuf>, overrides: &[String]) -> Result<BrokerConfig, String> {
    let mut raw = RawSettings::default();
    if let Some(path) = config {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
        raw.parse_properties(&text, &path.display().to_string())
            .map_err(|e| e.to_string())?;
    }
    raw.read_env(std::env::vars());
    for o in overrides {
        raw.parse_override(o).map_err(|e| e.to_string())?;
    }
    BrokerConfig::from_raw(&raw).map_err(|e| e.to_string())
}

/// Runs one async CLI command to completion; its error goes to stderr.
fn block_on_cli<T, E: std::fmt::Display>(
    command: impl std::future::Future<Output = Result<T, E>>,
) -> Option<T> {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("krabka: cannot start the runtime: {e}");
            return None;
        }
    };
    runtime
        .block_on(command)
        .map_err(|e| eprintln!("krabka: {e}"))
        .ok()
}

fn remote_metadata_dump(request: cli::remote_metadata::DumpRequest) -> ExitCode {
    match block_on_cli(cli::remote_metadata::dump(&request)) {
        Some(dump) => {
            println!("{}", dump.to_json_pretty());
            ExitCode::SUCCESS
        }
        None => ExitCode::FAILURE,
    }
}

fn worm_heads(request: cli::worm_heads::HeadsRequest) -> ExitCode {
    match block_on_cli(cli::worm_heads::heads(&request)) {
        Some(records) => {
            print!("{}", cli::worm_heads::render(&records));
            ExitCode::SUCCESS
        }
        None => ExitCode::FAILURE,
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::RemoteMetadata {
            command:
                RemoteMetadataCommand::Dump {
                    bootstrap,
                    topic,
                    timeout_secs,
                },
        } => remote_metadata_dump(cli::remote_metadata::DumpRequest {
            bootstrap,
            topic,
            timeout: std::time::Duration::from_secs(timeout_secs),
        }),
        Command::RemoteMetadata {
            command:
                RemoteMetadataCommand::WormHeads {
                    bootstrap,
                    topic,
                    timeout_secs,
                },
        } => worm_heads(cli::worm_heads::HeadsRequest {
            bootstrap,
            topic,
            timeout: std::time::Duration::from_secs(timeout_secs),
        }),
        Command::Tls {
            command:
                TlsCommand::Generate {
                    dir,
                    broker_name,
                    sans,
                    clients,
                    expired_clients,
                    key_password,
                    pkcs12_password,
                },
        } => {
            let sans = if sans.is_empty() {
                vec!["localhost".to_owned(), "127.0.0.1".to_owned()]
            } else {
                sans
            };
            let request = krabka_broker::security::certs::GenerateRequest {
                dir,
                broker_name,
                sans,
                clients,
                expired_clients,
                key_password,
                pkcs12_password,
            };
            match krabka_broker::security::certs::generate(&request) {
                Ok(files) => {
                    for file in files {
                        println!("{}", file.display());
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("krabka: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Serve { config, overrides } => {
            let config = match load(config, &overrides) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("krabka: {e}");
                    return ExitCode::from(2);
                }
            };
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("krabka: cannot start the runtime: {e}");
                    return ExitCode::FAILURE;
                }
            };
            match runtime.block_on(krabka_broker::run(config)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = %e, "broker failed");
                    eprintln!("krabka: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
