//! `krabka produce TOPIC`: one record per line of stdin or a file, as
//! `kcat -P` does: an optional key separator (`-K`), headers on every
//! record (`-H`), a fixed partition, acks and compression.
//!
//! Input is read in large blocks on a blocking thread and cut into records
//! without copying (each key and value is a slice of its block); the
//! producer batches them (`linger.ms`, `batch.size`) and pipelines the
//! requests, and a separate task waits for the acknowledgements, so
//! reading, sending and acknowledging overlap.

use {
    super::{CliError, Common, Format, key_value, print_json, progress},
    bytes::{Bytes, BytesMut},
    clap::{Args, ValueEnum},
    krabka_client::{Acks, Compression, Producer, ProducerConfig, ProducerRecord},
    std::{
        io::{IsTerminal, Read},
        path::PathBuf,
        time::{Duration, Instant},
    },
};

/// Bytes read from the input at a time.
const READ_BLOCK: usize = 1 << 20;

/// `acks` on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AcksArg {
    /// No acknowledgement.
    #[value(name = "0")]
    Zero,
    /// The leader wrote it.
    #[value(name = "1")]
    One,
    /// Every in-sync replica has it.
    #[value(name = "all", alias = "-1")]
    All,
}

/// `compression.type` on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompressionArg {
    /// No compression.
    None,
    /// gzip.
    Gzip,
    /// Snappy.
    Snappy,
    /// LZ4.
    Lz4,
    /// Zstandard.
    Zstd,
}

/// `krabka produce ...`.
#[derive(Debug, Args)]
pub struct ProduceArgs {
    #[command(flatten)]
    common: Common,
    /// The topic.
    topic: String,
    /// Read records from this file instead of stdin.
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
    /// Split each line into key and value at the first occurrence of SEP.
    #[arg(long, short = 'K', value_name = "SEP")]
    key_separator: Option<String>,
    /// The record delimiter (default: newline).
    #[arg(long, short = 'D', default_value = "\n")]
    delimiter: String,
    /// A header on every record, name=value; repeatable.
    #[arg(long = "header", short = 'H', value_name = "NAME=VALUE")]
    headers: Vec<String>,
    /// Write every record to this partition (default: Kafka's partitioner).
    #[arg(long, short = 'p')]
    partition: Option<i32>,
    /// Acknowledgements to wait for.
    #[arg(long, value_enum, default_value = "all")]
    acks: AcksArg,
    /// Compression of the batches.
    #[arg(long, short = 'z', value_enum, default_value = "none")]
    compression: CompressionArg,
    /// linger.ms: how long a batch waits for more records.
    #[arg(long, default_value_t = 5)]
    linger_ms: u64,
    /// batch.size in bytes (librdkafka's default; a batch must stay under
    /// the broker's message.max.bytes).
    #[arg(long, default_value_t = 1_000_000)]
    batch_size: usize,
}

/// Splits `block` at `delimiter` (the last piece is whatever follows the
/// last delimiter) into records.
fn records(
    block: &Bytes,
    delimiter: &[u8],
    key_separator: Option<&[u8]>,
    headers: &[(String, Option<Bytes>)],
    out: &mut Vec<ProducerRecord>,
) {
    let finder = memchr::memmem::Finder::new(delimiter);
    let key_finder = key_separator.map(memchr::memmem::Finder::new);
    let mut start = 0;
    let mut cut = |from: usize, to: usize| {
        let line = block.slice(from..to);
        let (key, value) = match &key_finder {
            Some(f) => match f.find(&line) {
                Some(i) => (Some(line.slice(..i)), line.slice(i + f.needle().len()..)),
                None => (None, line),
            },
            None => (None, line),
        };
        out.push(ProducerRecord {
            key,
            value: Some(value),
            headers: headers.to_vec(),
            timestamp: None,
        });
    };
    for i in finder.find_iter(block) {
        cut(start, i);
        start = i + delimiter.len();
    }
    if start < block.len() {
        cut(start, block.len());
    }
}

/// Reads the input on a blocking thread, sending blocks that end at a
/// delimiter (the last block may not).
fn spawn_reader(
    file: Option<PathBuf>,
    delimiter: Vec<u8>,
    blocks: tokio::sync::mpsc::Sender<Bytes>,
    bar: indicatif::ProgressBar,
) -> std::thread::JoinHandle<std::io::Result<()>> {
    std::thread::spawn(move || {
        let mut input: Box<dyn Read> = match &file {
            Some(path) => Box::new(std::fs::File::open(path)?),
            None => Box::new(std::io::stdin().lock()),
        };
        let mut pending = BytesMut::with_capacity(READ_BLOCK * 2);
        loop {
            if pending.capacity() - pending.len() < READ_BLOCK {
                pending.reserve(READ_BLOCK);
            }
            let old = pending.len();
            pending.resize(old + READ_BLOCK, 0);
            let n = match input.read(pending.get_mut(old..).unwrap_or_default()) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => 0,
                Err(e) => return Err(e),
            };
            pending.truncate(old + n);
            bar.inc(u64::try_from(n).unwrap_or(0));
            if n == 0 {
                if !pending.is_empty() {
                    let _ = blocks.blocking_send(pending.split().freeze());
                }
                return Ok(());
            }
            // Send up to the last complete record; keep the rest.
            if let Some(i) = memchr::memmem::rfind(&pending, &delimiter) {
                let block = pending.split_to(i + delimiter.len()).freeze();
                if blocks.blocking_send(block).is_err() {
                    return Ok(());
                }
            }
        }
    })
}

/// Unescapes `\n`, `\t`, `\r`, `\0` and `\\` in a separator given on the command line.
fn unescape(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push(b'\n'),
                Some('t') => out.push(b'\t'),
                Some('r') => out.push(b'\r'),
                Some('0') => out.push(0),
                Some(other) => {
                    if other != '\\' {
                        out.push(b'\\');
                    }
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
                }
                None => out.push(b'\\'),
            }
        } else {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
    }
    out
}

/// Runs `krabka produce ...`.
///
/// # Errors
///
/// [`CliError`] with the exit code of the failure.
pub async fn run(args: ProduceArgs) -> Result<(), CliError> {
    let delimiter = unescape(&args.delimiter);
    if delimiter.is_empty() {
        return Err(CliError::Usage(
            "the record delimiter must not be empty".into(),
        ));
    }
    let key_separator = args.key_separator.as_deref().map(unescape);
    if key_separator.as_ref().is_some_and(Vec::is_empty) {
        return Err(CliError::Usage(
            "the key separator must not be empty".into(),
        ));
    }
    let mut headers = Vec::new();
    for h in &args.headers {
        let (k, v) = key_value(h)?;
        headers.push((k, Some(Bytes::from(v))));
    }
    let client = args.common.connect().await?;
    let topic = args.topic.clone();
    let info = client
        .refresh_metadata(&[&topic])
        .await?
        .topic(&topic)
        .cloned()
        .map_err(|_| CliError::NotFound(format!("topic {topic} does not exist")))?;
    if let Some(p) = args.partition {
        if info.partition(p).is_none() {
            return Err(CliError::NotFound(format!(
                "topic {topic} has no partition {p}"
            )));
        }
    }
    let acks = match args.acks {
        AcksArg::Zero => Acks::None,
        AcksArg::One => Acks::Leader,
        AcksArg::All => Acks::All,
    };
    let config = ProducerConfig {
        acks,
        linger: Duration::from_millis(args.linger_ms),
        batch_size: args.batch_size.max(1024),
        compression: match args.compression {
            CompressionArg::None => Compression::None,
            CompressionArg::Gzip => Compression::Gzip,
            CompressionArg::Snappy => Compression::Snappy,
            CompressionArg::Lz4 => Compression::Lz4,
            CompressionArg::Zstd => Compression::Zstd,
        },
        idempotence: acks == Acks::All,
        // One full batch per request, and five of them in flight.
        max_request_size: args.batch_size.max(1024) + 64 * 1024,
        request_timeout: args.common.timeout(),
        ..ProducerConfig::default()
    };
    let producer = Producer::new(client, config).await?;

    let total = args
        .file
        .as_ref()
        .and_then(|f| std::fs::metadata(f).ok())
        .map(|m| m.len());
    let bar = match total {
        Some(len) if args.common.format == Format::Text => {
            progress(len, &format!("producing to {topic}"))
        }
        _ => indicatif::ProgressBar::hidden(),
    };
    let (block_tx, mut block_rx) = tokio::sync::mpsc::channel::<Bytes>(4);
    let reader = spawn_reader(args.file.clone(), delimiter.clone(), block_tx, bar.clone());
    // Acknowledgements are awaited in order on their own task.
    let (ack_tx, mut ack_rx) =
        tokio::sync::mpsc::unbounded_channel::<krabka_client::DeliveryFuture>();
    let acker = tokio::spawn(async move {
        let mut first_error = None;
        while let Some(delivery) = ack_rx.recv().await {
            if let Err(e) = delivery.await {
                first_error.get_or_insert(e);
            }
        }
        first_error
    });
    let started = Instant::now();
    let mut count: u64 = 0;
    let mut bytes: u64 = 0;
    let mut batch = Vec::new();
    let mut failed = None;
    'blocks: while let Some(block) = block_rx.recv().await {
        records(
            &block,
            &delimiter,
            key_separator.as_deref(),
            &headers,
            &mut batch,
        );
        for record in batch.drain(..) {
            bytes += u64::try_from(
                record.value.as_ref().map_or(0, Bytes::len)
                    + record.key.as_ref().map_or(0, Bytes::len),
            )
            .unwrap_or(0);
            match producer.send(&topic, args.partition, record).await {
                Ok(delivery) => {
                    count += 1;
                    let _ = ack_tx.send(delivery);
                }
                Err(e) => {
                    failed = Some(e);
                    break 'blocks;
                }
            }
        }
    }
    drop(block_rx);
    producer.flush().await;
    drop(ack_tx);
    let ack_error = acker
        .await
        .map_err(|e| CliError::Failed(format!("acknowledgements: {e}")))?;
    producer.close().await;
    bar.finish_and_clear();
    let read = krabka_broker::blocking::run(move || reader.join())
        .await
        .map_err(|e| CliError::Failed(format!("reader: {e}")))?
        .map_err(|_| CliError::Failed("the input reader panicked".into()))?;
    read.map_err(|e| CliError::Failed(format!("reading the input: {e}")))?;
    if let Some(e) = failed.or(ack_error) {
        return Err(e.into());
    }
    let elapsed = started.elapsed().as_secs_f64();
    match args.common.format {
        Format::Json => print_json(&serde_json::json!({
            "topic": topic,
            "records": count,
            "bytes": bytes,
            "seconds": elapsed,
        })),
        Format::Text => {
            if std::io::stderr().is_terminal() {
                #[allow(clippy::cast_precision_loss)] // display only
                let rate = count as f64 / elapsed.max(1e-9);
                eprintln!(
                    "produced {count} records ({}) to {topic} in {elapsed:.2} s ({rate:.0} records/s)",
                    super::human_bytes(i64::try_from(bytes).unwrap_or(i64::MAX))
                );
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn lines_become_keyed_records() {
        let block = Bytes::from_static(b"k1:v1\nno-key\nk2:a:b\n\nlast");
        let headers = vec![("h".to_owned(), Some(Bytes::from_static(b"1")))];
        let mut out = Vec::new();
        records(&block, b"\n", Some(b":"), &headers, &mut out);
        let got: Vec<(Option<&[u8]>, &[u8])> = out
            .iter()
            .map(|r| (r.key.as_deref(), r.value.as_deref().unwrap_or_default()))
            .collect();
        check!(
            got == vec![
                (Some(&b"k1"[..]), &b"v1"[..]),
                (None, &b"no-key"[..]),
                (Some(&b"k2"[..]), &b"a:b"[..]),
                (None, &b""[..]),
                (None, &b"last"[..]),
            ]
        );
        check!(out[0].headers == headers);
        check!(unescape("\\t") == b"\t");
        check!(unescape("::") == b"::");
    }
}
