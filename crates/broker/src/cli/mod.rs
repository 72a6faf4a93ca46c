//! Operator subcommands of the `krabka` binary other than `serve`.
//!
//! Each command group lives in its own module (`topic`, `group`, `produce`,
//! `consume`, `configs`, `cluster`, `tier`, `txn`) with its clap arguments
//! and its code, so `main.rs` stays a thin clap front. They all talk the
//! Kafka protocol through `krabka-client`, so they work against any
//! Kafka-compatible cluster, not only Krabka.
//!
//! What they share is here: the connection options ([`Common`]: bootstrap,
//! output format, timeout, the `--command-config` security settings), the error type whose variants are the exit
//! codes ([`CliError`], documented in `docs/CLI.md`), text tables, and the
//! progress bar shown on a terminal only.

pub mod acl;
pub mod cluster;
pub mod cluster_status;
pub mod command_config;
pub mod configs;
pub mod consume;
pub mod group;
pub mod metadata_source;
pub mod produce;
pub mod remote_metadata;
pub mod tier;
pub mod timefmt;
pub mod topic;
pub mod txn;
pub mod user;
pub mod worm_heads;

use {
    krabka_client::{Client, ClientConfig, ClientError},
    std::{
        io::{IsTerminal, Write},
        process::ExitCode,
        time::Duration,
    },
};

/// Exit code of success.
pub const EXIT_OK: u8 = 0;
/// Exit code of a failure the broker reported (a Kafka error other than not-found) or any other runtime failure.
pub const EXIT_BROKER: u8 = 1;
/// Exit code of a usage error: bad arguments (clap uses it too).
pub const EXIT_USAGE: u8 = 2;
/// Exit code when the topic, group, transactional id or broker named does not exist.
pub const EXIT_NOT_FOUND: u8 = 3;
/// Exit code when the cluster cannot be reached or does not answer in time.
pub const EXIT_UNREACHABLE: u8 = 4;

/// Kafka error codes that mean "what you named does not exist":
/// `UNKNOWN_TOPIC_OR_PARTITION`, `GROUP_ID_NOT_FOUND`, `UNKNOWN_TOPIC_ID`,
/// `TRANSACTIONAL_ID_NOT_FOUND`, `RESOURCE_NOT_FOUND`.
const NOT_FOUND_CODES: [i16; 5] = [3, 69, 100, 105, 91];

/// Why a command failed; each variant is one exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad arguments.
    #[error("{0}")]
    Usage(String),
    /// The named resource does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The cluster could not be reached or timed out.
    #[error("{0}")]
    Unreachable(String),
    /// The broker refused, or something else failed.
    #[error("{0}")]
    Failed(String),
}

impl CliError {
    /// The process exit code of this error.
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => EXIT_USAGE,
            Self::NotFound(_) => EXIT_NOT_FOUND,
            Self::Unreachable(_) => EXIT_UNREACHABLE,
            Self::Failed(_) => EXIT_BROKER,
        }
    }
}

impl From<ClientError> for CliError {
    fn from(e: ClientError) -> Self {
        let text = e.to_string();
        match &e {
            ClientError::Broker { code, .. } if NOT_FOUND_CODES.contains(code) => {
                Self::NotFound(text)
            }
            ClientError::Connection { .. } | ClientError::Timeout(_) => Self::Unreachable(text),
            ClientError::InvalidArgument(_) => Self::Usage(text),
            _ => Self::Failed(text),
        }
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        Self::Failed(e.to_string())
    }
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Tables and sentences for people.
    Text,
    /// JSON for scripts (one document; `consume` prints one object per line).
    Json,
}

/// Options every command that talks to a cluster takes.
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    /// A broker of the cluster, host:port (comma-separated for several).
    #[arg(
        long,
        short = 'b',
        visible_alias = "bootstrap-server",
        env = "KRABKA_BOOTSTRAP",
        default_value = "127.0.0.1:9092",
        global = true
    )]
    pub bootstrap: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text, global = true)]
    pub format: Format,
    /// Seconds to wait for the cluster and for each request.
    #[arg(long, value_name = "SECONDS", default_value_t = 30, global = true)]
    pub timeout: u64,
    /// A properties file with Kafka's client security settings
    /// (`security.protocol`, `sasl.*`, `ssl.*`), as the Kafka tools take it.
    #[arg(
        long,
        value_name = "FILE",
        env = "KRABKA_COMMAND_CONFIG",
        global = true
    )]
    pub command_config: Option<std::path::PathBuf>,
}

impl Common {
    /// The timeout as a duration.
    #[must_use]
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout.max(1))
    }

    /// The TLS and SASL settings of `--command-config` (none without it).
    ///
    /// # Errors
    ///
    /// [`CliError::Usage`] for a bad file.
    pub fn security(&self) -> Result<command_config::ClientSecurity, CliError> {
        command_config::ClientSecurity::from_option(self.command_config.as_deref())
    }

    /// Connects to the cluster.
    ///
    /// # Errors
    ///
    /// [`CliError::Usage`] for a bad `--command-config`,
    /// [`CliError::Unreachable`] when no bootstrap broker answers in time,
    /// [`CliError::Failed`] when the broker refuses the credentials.
    pub async fn connect(&self) -> Result<Client, CliError> {
        let mut config = ClientConfig::default();
        config.connection.client_id = "krabka-cli".to_owned();
        self.security()?.apply(&mut config.connection);
        config.connection.request_timeout = self.timeout();
        config.connection.connect_timeout = self.timeout().min(Duration::from_secs(10));
        let servers: Vec<&str> = self
            .bootstrap
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        match tokio::time::timeout(self.timeout(), Client::connect(&servers, config)).await {
            Ok(Ok(client)) => Ok(client),
            // Refused credentials are the broker's answer, not an unreachable cluster.
            Ok(Err(e @ ClientError::Broker { .. })) => Err(CliError::Failed(format!(
                "cannot log in to the cluster at {}: {e}",
                self.bootstrap
            ))),
            Ok(Err(e)) => Err(CliError::Unreachable(format!(
                "cannot reach the cluster at {}: {e}",
                self.bootstrap
            ))),
            Err(_) => Err(CliError::Unreachable(format!(
                "the cluster at {} did not answer within {} s",
                self.bootstrap, self.timeout
            ))),
        }
    }
}

/// Runs one async command on a fresh runtime and turns its outcome into
/// the process exit code (the error goes to stderr).
pub fn run(command: impl std::future::Future<Output = Result<(), CliError>>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("krabka: cannot start the runtime: {e}");
            return ExitCode::from(EXIT_BROKER);
        }
    };
    match runtime.block_on(command) {
        Ok(()) => ExitCode::from(EXIT_OK),
        Err(e) => {
            eprintln!("krabka: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// Prints `value` as pretty JSON on stdout.
///
/// # Errors
///
/// [`CliError::Failed`] when stdout is closed.
pub fn print_json(value: &impl serde::Serialize) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value).map_err(|e| CliError::Failed(e.to_string()))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    Ok(())
}

/// A text table: a header row and rows, columns padded to their widest cell.
#[derive(Debug, Default)]
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles.
    #[must_use]
    pub fn new(header: &[&str]) -> Self {
        Self {
            rows: vec![header.iter().map(|h| (*h).to_owned()).collect()],
        }
    }

    /// Adds a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Whether only the header is there.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.rows.len() <= 1
    }

    /// The table as text, one line per row.
    #[must_use]
    pub fn render(&self) -> String {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|c| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(c))
                    .map(|s| s.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in &self.rows {
            let mut line = String::new();
            for (c, cell) in row.iter().enumerate() {
                let width = widths.get(c).copied().unwrap_or(0);
                if c + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    line.push_str(&format!("{cell:<width$}  "));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    /// Prints the table on stdout.
    ///
    /// # Errors
    ///
    /// [`CliError::Failed`] when stdout is closed.
    pub fn print(&self) -> Result<(), CliError> {
        let mut out = std::io::stdout().lock();
        out.write_all(self.render().as_bytes())?;
        Ok(())
    }
}

/// A progress bar on stderr, or a hidden one when stderr is not a terminal
/// (piped, redirected, CI) so scripts see no escape codes.
#[must_use]
pub fn progress(length: u64, what: &str) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(length),
        indicatif::ProgressDrawTarget::stderr(),
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{msg} [{bar:30}] {pos}/{len} ({elapsed}, eta {eta})",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_owned());
    bar
}

/// Parses `name=value`.
///
/// # Errors
///
/// [`CliError::Usage`] without an `=`.
pub fn key_value(text: &str) -> Result<(String, String), CliError> {
    text.split_once('=')
        .map(|(k, v)| (k.trim().to_owned(), v.to_owned()))
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| CliError::Usage(format!("expected name=value, got {text:?}")))
}

/// Bytes as a short human size (`1.5 MiB`).
#[must_use]
#[allow(clippy::cast_precision_loss)] // display only
pub fn human_bytes(n: i64) -> String {
    if n < 0 {
        return "-".to_owned();
    }
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", units.get(unit).copied().unwrap_or("B"))
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn errors_map_to_exit_codes() {
        let not_found: CliError = ClientError::broker(3, None, "t".into()).into();
        check!(not_found.exit_code() == EXIT_NOT_FOUND);
        let group: CliError = ClientError::broker(69, None, "g".into()).into();
        check!(group.exit_code() == EXIT_NOT_FOUND);
        let refused: CliError = ClientError::broker(40, None, "c".into()).into();
        check!(refused.exit_code() == EXIT_BROKER);
        let down: CliError = ClientError::Connection {
            broker: "x".into(),
            reason: "refused".into(),
        }
        .into();
        check!(down.exit_code() == EXIT_UNREACHABLE);
    }

    #[test]
    fn tables_pad_columns() {
        let mut t = Table::new(&["TOPIC", "P"]);
        t.row(vec!["a-long-name".into(), "0".into()]);
        t.row(vec!["b".into(), "12".into()]);
        check!(t.render() == "TOPIC        P\na-long-name  0\nb            12\n");
        check!(human_bytes(512) == "512 B");
        check!(human_bytes(1536) == "1.5 KiB");
    }
}
