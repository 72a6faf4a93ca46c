//! `krabka-worm-verify`: audits a Krabka write-once archive in S3 or GCS.
//!
//! The command line face of [`krabka_remote_storage::verify_archive`]: it
//! reads nothing but the bucket, checks every manifest chain and signature
//! against the trusted keys given, confirms every object, and exits with a
//! code that says what kind of problem it found (see `--help`).

use std::{path::PathBuf, process::ExitCode, sync::Arc};

use clap::{ArgGroup, Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use krabka_object_store::{GcsCredentials, check_bucket};
use krabka_remote_storage::{
    ArchiveVerifyReport, GcsConfig, ObjectStoreConfig, S3Config, TrustedManifestKeys, VerifyDepth,
    VerifyRequest, WormChainRecord, verify_archive,
};

/// Exit code: the archive verified.
const EXIT_VERIFIED: u8 = 0;
/// Exit code: bad usage, or the bucket could not be reached or read.
const EXIT_USAGE_OR_CONNECTION: u8 = 2;
/// Exit code: a manifest chain or signature is broken.
const EXIT_CHAIN_OR_SIGNATURE: u8 = 3;
/// Exit code: the chain ends before the recorded tip.
const EXIT_TRUNCATED_TAIL: u8 = 4;
/// Exit code: an object is missing or altered.
const EXIT_OBJECTS: u8 = 5;

const AFTER_HELP: &str = "\
Exit codes:
  0  verified: every chain and signature checks out and every object is intact
  2  usage error, or the bucket could not be reached, listed or read
  3  a manifest chain or signature is broken (forged, altered, dropped,
     reordered or unreadable manifest; head differs from --expect-head)
  4  truncated tail: a chain ends before the tip given with --expect-head
  5  an object named by a manifest is missing, resized, replaced or altered
When several kinds are found, the lowest non-zero code of 3, 4, 5 wins.

Credentials: S3 uses the standard AWS environment (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, web identity, instance
profile); GCS uses --gcs-credentials or application default credentials.";

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Depth {
    /// Presence, size and entity tag of every object (listing only).
    Presence,
    /// Also download every object and compare its SHA-256.
    Digest,
}

/// Audit a Krabka write-once (WORM) archive.
#[derive(Debug, Parser)]
#[command(name = "krabka-worm-verify", version, after_help = AFTER_HELP)]
#[command(group(ArgGroup::new("backend").required(true).args(["s3_bucket", "gcs_bucket"])))]
#[command(group(ArgGroup::new("keys").required(true).multiple(true).args(["trusted_key", "trusted_keys_file"])))]
struct Args {
    /// S3 bucket holding the archive.
    #[arg(long)]
    s3_bucket: Option<String>,
    /// S3 region (default: from the environment, then us-east-1).
    #[arg(long)]
    region: Option<String>,
    /// Endpoint of an S3-compatible server.
    #[arg(long)]
    endpoint: Option<String>,
    /// Address the S3 bucket path-style (`<endpoint>/<bucket>`).
    #[arg(long)]
    path_style: bool,
    /// Allow a plain http:// endpoint (local test servers only).
    #[arg(long)]
    allow_http: bool,
    /// GCS bucket holding the archive.
    #[arg(long)]
    gcs_bucket: Option<String>,
    /// GCS API root (e.g. a fake-gcs-server).
    #[arg(long)]
    gcs_endpoint: Option<String>,
    /// GCS service-account key file.
    #[arg(long)]
    gcs_credentials: Option<PathBuf>,
    /// Send no GCS credentials (emulators).
    #[arg(long)]
    gcs_anonymous: bool,
    /// Key prefix of the archive in the bucket.
    #[arg(long, default_value = "")]
    prefix: String,
    /// A trusted Ed25519 public key (64 hex digits); repeatable.
    #[arg(long)]
    trusted_key: Vec<String>,
    /// A file of trusted public keys, one hex key per line (`#` comments).
    #[arg(long)]
    trusted_keys_file: Option<PathBuf>,
    /// A file of independently recorded chain tips (WormChainRecord JSON, one
    /// per line or a JSON array), e.g. read from the metadata topic.
    #[arg(long)]
    expect_head: Option<PathBuf>,
    /// How deep to check objects.
    #[arg(long, value_enum, default_value = "presence")]
    depth: Depth,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
    /// Retries of a failed request (with exponential backoff).
    #[arg(long, default_value_t = 10)]
    retries: usize,
}

fn usage_error(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("krabka-worm-verify: {message}");
    ExitCode::from(EXIT_USAGE_OR_CONNECTION)
}

fn store_config(args: &Args) -> ObjectStoreConfig {
    if let Some(bucket) = &args.s3_bucket {
        let mut c = S3Config::new(bucket);
        c.region.clone_from(&args.region);
        c.endpoint.clone_from(&args.endpoint);
        c.path_style = args.path_style;
        c.allow_http = args.allow_http;
        c.prefix.clone_from(&args.prefix);
        c.retry.max_retries = args.retries;
        ObjectStoreConfig::S3(c)
    } else {
        let mut c = GcsConfig::new(args.gcs_bucket.clone().unwrap_or_default());
        c.endpoint.clone_from(&args.gcs_endpoint);
        c.allow_http = args.allow_http;
        c.prefix.clone_from(&args.prefix);
        c.retry.max_retries = args.retries;
        c.credentials = match (&args.gcs_credentials, args.gcs_anonymous) {
            (Some(path), _) => GcsCredentials::ServiceAccountPath(path.clone()),
            (None, true) => GcsCredentials::Anonymous,
            (None, false) => GcsCredentials::ApplicationDefault,
        };
        ObjectStoreConfig::Gcs(c)
    }
}

fn trusted_keys(args: &Args) -> Result<TrustedManifestKeys, String> {
    let mut keys = TrustedManifestKeys::new();
    for (i, key) in args.trusted_key.iter().enumerate() {
        keys.insert_hex(key, format!("--trusted-key #{}", i + 1))
            .map_err(|e| e.to_string())?;
    }
    if let Some(path) = &args.trusted_keys_file {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("read {}: {e}", path.display()))?;
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or_default().trim();
            if !line.is_empty() {
                keys.insert_hex(line, format!("{}:{}", path.display(), n + 1))
                    .map_err(|e| format!("{}:{}: {e}", path.display(), n + 1))?;
            }
        }
    }
    Ok(keys)
}

fn expected_heads(path: &PathBuf) -> Result<Vec<WormChainRecord>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("read {}: {e}", path.display()))?;
    if text.trim_start().starts_with('[') {
        let values: Vec<serde_json::Value> =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        return values
            .iter()
            .map(|v| WormChainRecord::from_bytes(v.to_string().as_bytes()))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{}: {e}", path.display()));
    }
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| WormChainRecord::from_bytes(l.as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn exit_code(report: &ArchiveVerifyReport) -> u8 {
    let breaks: Vec<_> = report.breaks().map(|(_, b)| b).collect();
    if breaks.iter().any(|b| b.is_chain_break()) {
        EXIT_CHAIN_OR_SIGNATURE
    } else if breaks.iter().any(|b| b.is_truncation()) {
        EXIT_TRUNCATED_TAIL
    } else if breaks.iter().any(|b| b.is_object_break()) {
        EXIT_OBJECTS
    } else {
        EXIT_VERIFIED
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn print_summary(target: &str, report: &ArchiveVerifyReport, code: u8) {
    println!("archive {target}");
    for p in &report.partitions {
        let tip = match (p.tip_seq, p.tip_head) {
            (Some(seq), Some(head)) => format!("tip {seq} {}", &head.to_string()[..16]),
            _ => "no chain".to_owned(),
        };
        let offsets = p
            .offsets
            .map_or_else(String::new, |(a, b)| format!(", offsets {a}..={b}"));
        let verdict = if p.breaks.is_empty() { "ok" } else { "FAILED" };
        println!(
            "  {}-{} ({}): {} manifests, {} objects, {}{offsets}, {tip}: {verdict}",
            p.topic,
            p.partition,
            p.topic_id,
            p.manifests,
            p.objects,
            mib(p.bytes)
        );
        for gap in &p.gaps {
            println!(
                "    note: offsets {}..{} not archived (before {})",
                gap.previous_end_offset + 1,
                gap.next_start_offset,
                gap.seq
            );
        }
        if p.unlisted_objects > 0 {
            println!(
                "    note: {} object(s) named by no authentic manifest",
                p.unlisted_objects
            );
        }
        for b in &p.breaks {
            println!("    BREAK: {b}");
        }
    }
    let secs = report.elapsed_ms as f64 / 1000.0;
    println!(
        "{} partitions, {} manifests, {} objects ({}) in {secs:.2}s",
        report.partitions.len(),
        report.manifests,
        report.objects,
        mib(report.bytes)
    );
    let findings = report.breaks().count();
    match code {
        EXIT_VERIFIED => println!("VERIFIED"),
        _ => println!("NOT VERIFIED: {findings} finding(s), exit code {code}"),
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let keys = match trusted_keys(&args) {
        Ok(k) if !k.is_empty() => k,
        Ok(_) => return usage_error("no trusted keys given"),
        Err(e) => return usage_error(e),
    };
    let expect_head = match &args.expect_head {
        Some(path) => match expected_heads(path) {
            Ok(h) => h,
            Err(e) => return usage_error(e),
        },
        None => Vec::new(),
    };
    let config = store_config(&args);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return usage_error(format!("cannot start runtime: {e}")),
    };
    let bar = if args.json || args.no_progress {
        ProgressBar::hidden()
    } else {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template("{spinner} {wide_bar} {pos}/{len} ({per_sec}, {eta})")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    };
    let progress_bar = bar.clone();
    let request = VerifyRequest {
        prefix: config.prefix().to_owned(),
        trusted_keys: keys,
        depth: match args.depth {
            Depth::Presence => VerifyDepth::Presence,
            Depth::Digest => VerifyDepth::Digest,
        },
        expect_head,
        progress: Some(Arc::new(move |done, total| {
            progress_bar.set_length(total);
            progress_bar.set_position(done);
        })),
    };
    let outcome = runtime.block_on(async {
        let store = config.build().map_err(|e| e.to_string())?;
        check_bucket(&*store, &config)
            .await
            .map_err(|e| e.to_string())?;
        verify_archive(&*store, &request)
            .await
            .map_err(|e| e.to_string())
    });
    bar.finish_and_clear();
    let report = match outcome {
        Ok(r) => r,
        Err(e) => return usage_error(e),
    };
    let code = exit_code(&report);
    if args.json {
        let value = serde_json::json!({
            "archive": config.describe(),
            "verified": code == EXIT_VERIFIED,
            "exit_code": code,
            "report": report,
        });
        match serde_json::to_string_pretty(&value) {
            Ok(text) => println!("{text}"),
            Err(e) => return usage_error(e),
        }
    } else {
        print_summary(&config.describe(), &report, code);
    }
    ExitCode::from(code)
}
