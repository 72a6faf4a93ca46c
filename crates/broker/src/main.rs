//! The `krabka` binary: `krabka serve [--config FILE] [--override name=value]...`,
//! `krabka recover [--config FILE] [--override name=value]... [--accept-loss TOPIC-PARTITION]... [--dry-run]`,
//! `krabka remote-metadata dump [--bootstrap HOST:PORT] [--topic NAME]`,
//! `krabka remote-metadata worm-heads [--bootstrap HOST:PORT] [--topic NAME]`,
//! `krabka tls generate --dir DIR [--san HOST]... [--client NAME]...`,
//! and the operator commands over the Kafka protocol (`topic`, `group`,
//! `produce`, `consume`, `config`, `cluster`, `log-dirs`, `tier`, `txn`; see
//! `docs/CLI.md` and the [`cli`] modules).
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
    /// Repair a log directory the broker refuses to start on, on purpose:
    /// rebuild a lost topic registry (and meta.properties) from the
    /// partition directories, and cut corruption out of partitions named
    /// with --accept-loss, printing everything it does. Takes the
    /// directory's lock: stop the broker first.
    Recover {
        /// The broker's server.properties-style file (log.dirs, node.id).
        #[arg(long, short = 'c', value_name = "FILE")]
        config: Option<PathBuf>,
        /// Override one setting, e.g. `--override log.dirs=/data`; repeatable.
        #[arg(long = "override", short = 'o', value_name = "NAME=VALUE")]
        overrides: Vec<String>,
        /// Check every batch of this partition (TOPIC-PARTITION, e.g.
        /// __consumer_offsets-7) and cut it at the first invalid one, as
        /// Kafka's recovery does, reporting the records removed; repeatable.
        #[arg(long = "accept-loss", value_name = "TOPIC-PARTITION")]
        accept_loss: Vec<String>,
        /// Say what would be done; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Inspect the KIP-405 remote log metadata of a running cluster.
    RemoteMetadata {
        #[command(subcommand)]
        command: RemoteMetadataCommand,
    },
    /// Create, list, describe, alter and delete topics.
    Topic(cli::topic::TopicArgs),
    /// List, describe and delete consumer groups; reset and delete their offsets.
    Group(cli::group::GroupArgs),
    /// Write records read from stdin or a file, one per line.
    Produce(cli::produce::ProduceArgs),
    /// Print records of a topic.
    Consume(cli::consume::ConsumeArgs),
    /// Describe and alter topic and broker configs; print the settings reference.
    Config(cli::configs::ConfigArgs),
    /// Show the cluster: id, controller, brokers.
    Cluster(cli::cluster::ClusterArgs),
    /// Show each broker's log directories and the replicas in them.
    LogDirs(cli::cluster::LogDirsArgs),
    /// Show tiered storage state per partition.
    Tier(cli::tier::TierArgs),
    /// List and describe transactions and active producers.
    Txn(cli::txn::TxnArgs),
    /// List, create and delete ACLs (the options of kafka-acls.sh).
    Acl(cli::acl::AclArgs),
    /// List SCRAM users, set their passwords, delete them.
    User(cli::user::UserArgs),
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
    Dump(MetadataArgs),
    /// Print the newest WORM chain head of each partition, as published in
    /// `__remote_log_metadata`: one JSON record per line, the file
    /// `krabka-worm-verify --expect-head` takes.
    WormHeads(MetadataArgs),
}

/// What both `remote-metadata` commands read, and from where.
#[derive(clap::Args)]
struct MetadataArgs {
    /// A broker of the cluster.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:9092")]
    bootstrap: String,
    /// Cluster mode: read the cluster database (`postgresql://...`), where
    /// the brokers keep the metadata, instead of asking a broker.
    #[arg(long, value_name = "URL", env = "KRABKA_DATABASE_URL")]
    database_url: Option<String>,
    /// Only partitions of this topic.
    #[arg(long, value_name = "NAME")]
    topic: Option<String>,
    /// Seconds to wait for the cluster and the metadata.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    timeout_secs: u64,
    /// Client security settings (Kafka's `security.protocol`, `sasl.*`, `ssl.*`).
    #[arg(long, value_name = "FILE", env = "KRABKA_COMMAND_CONFIG")]
    command_config: Option<PathBuf>,
}

impl MetadataArgs {
    /// Runs `command` with the source, topic and timeout these name.
    fn run(
        self,
        command: impl FnOnce(
            cli::metadata_source::MetadataSource,
            Option<String>,
            std::time::Duration,
        ) -> ExitCode,
    ) -> ExitCode {
        let timeout = std::time::Duration::from_secs(self.timeout_secs);
        let (bootstrap, database_url, topic) = (self.bootstrap, self.database_url, self.topic);
        with_security(self.command_config.as_deref(), |security| {
            let source = cli::metadata_source::MetadataSource::from_args(
                bootstrap,
                database_url,
                security,
                timeout,
            );
            command(source, topic, timeout)
        })
    }
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

/// Runs `run` with the client security of `--command-config FILE`, or
/// exits with the file's usage error.
fn with_security(
    command_config: Option<&std::path::Path>,
    run: impl FnOnce(cli::command_config::ClientSecurity) -> ExitCode,
) -> ExitCode {
    match cli::command_config::ClientSecurity::from_option(command_config) {
        Ok(security) => run(security),
        Err(e) => {
            eprintln!("krabka: {e}");
            ExitCode::from(e.exit_code())
        }
    }
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

/// The broker logs to stdout at `info` (`RUST_LOG` overrides), as text or,
/// with `krabka.log.format=json`, one JSON object per line; the operator
/// commands log warnings only, to stderr, so their stdout stays parseable.
fn init_logging(serving: bool, json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(if serving { "info" } else { "warn" })
    });
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match (serving, json) {
        (true, true) => builder
            .json()
            .flatten_event(true)
            .with_writer(|| LossyStdout)
            .init(),
        (true, false) => builder.with_writer(|| LossyStdout).init(),
        (false, _) => builder.with_writer(std::io::stderr).init(),
    }
}

fn cluster_status(config: Option<PathBuf>, overrides: &[String]) -> ExitCode {
    let settings = load(config, overrides).and_then(|config| {
        krabka_broker::cluster::ClusterSettings::from_config(&config)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "krabka.cluster.database.url is not set".to_owned())
    });
    let settings = match settings {
        Ok(s) => s,
        Err(e) => {
            eprintln!("krabka: {e}");
            return ExitCode::from(2);
        }
    };
    match block_on_cli(cli::cluster_status::status(&settings.database)) {
        Some(status) => {
            print!("{}", cli::cluster_status::render(&status));
            ExitCode::SUCCESS
        }
        None => ExitCode::FAILURE,
    }
}

/// Standard output for the log, where a failed write (the disk holding a
/// redirected log is full) drops the line instead of failing: the
/// subscriber would report the failure on stderr, and a failing stderr
/// panics the process.
struct LossyStdout;

impl std::io::Write for LossyStdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Ok(std::io::stdout().write(buf).unwrap_or(buf.len()))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stdout().flush();
        Ok(())
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve { .. }) {
        init_logging(false, false);
    }
    match cli.command {
        Command::Topic(args) => cli::run(cli::topic::run(args)),
        Command::Group(args) => cli::run(cli::group::run(args)),
        Command::Produce(args) => cli::run(cli::produce::run(args)),
        Command::Consume(args) => cli::run(cli::consume::run(args)),
        Command::Config(args) => cli::run(cli::configs::run(args)),
        Command::Cluster(args) => match args.into_database_status() {
            Ok((config, overrides)) => cluster_status(config, &overrides),
            Err(args) => cli::run(cli::cluster::run(*args)),
        },
        Command::LogDirs(args) => cli::run(cli::cluster::log_dirs(args)),
        Command::Tier(args) => cli::run(cli::tier::run(args)),
        Command::Txn(args) => cli::run(cli::txn::run(args)),
        Command::Acl(args) => cli::run(cli::acl::run(args)),
        Command::User(args) => cli::run(cli::user::run(args)),
        Command::RemoteMetadata {
            command: RemoteMetadataCommand::Dump(args),
        } => args.run(|source, topic, timeout| {
            remote_metadata_dump(cli::remote_metadata::DumpRequest {
                source,
                topic,
                timeout,
            })
        }),
        Command::RemoteMetadata {
            command: RemoteMetadataCommand::WormHeads(args),
        } => args.run(|source, topic, timeout| {
            worm_heads(cli::worm_heads::HeadsRequest {
                source,
                topic,
                timeout,
            })
        }),
        Command::Recover {
            config,
            overrides,
            accept_loss,
            dry_run,
        } => {
            let config = match load(config, &overrides) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("krabka: {e}");
                    return ExitCode::from(2);
                }
            };
            let request = krabka_broker::log_dir::recover::RecoverRequest {
                accept_loss,
                dry_run,
            };
            match krabka_broker::log_dir::recover::run(&config, &request) {
                Ok(lines) => {
                    for line in lines {
                        println!("{line}");
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("krabka: {e}");
                    ExitCode::FAILURE
                }
            }
        }
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
            init_logging(
                true,
                config
                    .explicit
                    .get("krabka.log.format")
                    .is_some_and(|f| f.eq_ignore_ascii_case("json")),
            );
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
