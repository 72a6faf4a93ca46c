//! `krabka consume TOPIC`: print records, as `kcat -C` does.
//!
//! Partitions are read either by assignment (all of the topic's, or those
//! given with `-p`) from `--offset`, or as a member of a consumer group
//! (`-g`), starting from the group's committed offsets and committing what
//! was printed every five seconds and on exit. Output is kcat's `-f` format
//! string, or one JSON object per record with `--format json`.
//!
//! Throughput is the point of the shape: the next fetch goes out as soon as
//! a response is in; decoding and formatting run on other tasks (at most
//! [`MAX_FORMATTING`] responses behind), and one thread writes the formatted
//! chunks to stdout in order, so fetching, formatting and writing overlap.

use {
    super::{CliError, Common, Format, progress, timefmt::parse_datetime},
    bytes::Bytes,
    clap::Args,
    krabka_client::{
        Client, ClientError, ConsumerConfig, ConsumerRecord, GroupMember, GroupMemberConfig,
        IsolationLevel, OffsetSpec, PartitionFetch, RawFetchedPartition, TimestampType,
    },
    std::{
        collections::{BTreeMap, VecDeque},
        io::{IsTerminal, Write},
        sync::{
            Arc, Mutex,
            atomic::{AtomicBool, AtomicU64, Ordering},
        },
        time::{Duration, Instant},
    },
    tokio::task::JoinHandle,
};

/// Fetched responses being formatted at once, at most.
const MAX_FORMATTING: usize = 4;
/// How often a group member commits what it printed.
const COMMIT_EVERY: Duration = Duration::from_secs(5);

/// `krabka consume ...`.
#[derive(Debug, Args)]
pub struct ConsumeArgs {
    #[command(flatten)]
    common: Common,
    /// The topic.
    topic: String,
    /// Only these partitions (assign mode); repeatable.
    #[arg(long = "partition", short = 'p')]
    partitions: Vec<i32>,
    /// Consume as a member of this consumer group, committing what was printed.
    #[arg(long, short = 'g', conflicts_with = "partitions")]
    group: Option<String>,
    /// Where to start: beginning, end, an offset N, -N (N before the end),
    /// or @TIME (epoch ms or YYYY-MM-DDTHH:mm:SS). In a group, only for
    /// partitions without a committed offset.
    #[arg(
        long,
        short = 'o',
        default_value = "beginning",
        allow_hyphen_values = true
    )]
    offset: String,
    /// Same as --offset beginning.
    #[arg(long)]
    from_beginning: bool,
    /// Stop after this many records.
    #[arg(long, short = 'c')]
    count: Option<u64>,
    /// Exit when every partition's end is reached (instead of waiting for more).
    #[arg(long, short = 'e')]
    exit_at_end: bool,
    /// Exit after this many milliseconds without a record.
    #[arg(long, value_name = "MS")]
    idle_timeout_ms: Option<u64>,
    /// kcat's format string: %t topic, %p partition, %o offset, %k key, %s
    /// value, %K key length, %S value length, %T timestamp, %h headers
    /// (k=v,...), %% a percent sign; \n \t \r \0 \\ escapes.
    #[arg(long = "fmt", short = 'f', value_name = "FORMAT")]
    fmt: Option<String>,
    /// Print the key before the value.
    #[arg(long)]
    print_key: bool,
    /// Print the headers before the value.
    #[arg(long)]
    print_headers: bool,
    /// Print the timestamp first.
    #[arg(long)]
    print_timestamp: bool,
    /// Print partition and offset first.
    #[arg(long)]
    print_offset: bool,
    /// Separator between the printed fields.
    #[arg(long, default_value = "\t")]
    separator: String,
    /// Read only committed transactional records (isolation.level=read_committed).
    #[arg(long)]
    read_committed: bool,
}

/// One piece of a compiled format string.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Text(Vec<u8>),
    Topic,
    Partition,
    Offset,
    Key,
    Value,
    KeyLength,
    ValueLength,
    Timestamp,
    Headers,
}

/// A compiled kcat `-f` format string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordFormat {
    tokens: Vec<Token>,
}

impl RecordFormat {
    /// Compiles `pattern`.
    ///
    /// # Errors
    ///
    /// A message for an unknown `%` directive.
    pub fn parse(pattern: &str) -> Result<Self, String> {
        let mut tokens = Vec::new();
        let mut text = Vec::new();
        let mut chars = pattern.chars().peekable();
        let push = |tokens: &mut Vec<Token>, text: &mut Vec<u8>, t: Token| {
            if !text.is_empty() {
                tokens.push(Token::Text(std::mem::take(text)));
            }
            tokens.push(t);
        };
        while let Some(c) = chars.next() {
            match c {
                '%' => {
                    let token = match chars.next() {
                        Some('t') => Token::Topic,
                        Some('p') => Token::Partition,
                        Some('o') => Token::Offset,
                        Some('k') => Token::Key,
                        Some('s') => Token::Value,
                        Some('K') => Token::KeyLength,
                        Some('S') => Token::ValueLength,
                        Some('T') => Token::Timestamp,
                        Some('h') => Token::Headers,
                        Some('%') => {
                            text.push(b'%');
                            continue;
                        }
                        other => {
                            return Err(format!(
                                "unknown format directive %{}",
                                other.map(String::from).unwrap_or_default()
                            ));
                        }
                    };
                    push(&mut tokens, &mut text, token);
                }
                '\\' => match chars.next() {
                    Some('n') => text.push(b'\n'),
                    Some('t') => text.push(b'\t'),
                    Some('r') => text.push(b'\r'),
                    Some('0') => text.push(0),
                    Some('\\') | None => text.push(b'\\'),
                    Some(other) => {
                        text.push(b'\\');
                        let mut buf = [0u8; 4];
                        text.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
                    }
                },
                other => {
                    let mut buf = [0u8; 4];
                    text.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        if !text.is_empty() {
            tokens.push(Token::Text(text));
        }
        Ok(Self { tokens })
    }

    /// The format the `--print-*` flags ask for (kcat's default is `%s\n`).
    #[must_use]
    pub fn from_flags(key: bool, headers: bool, timestamp: bool, offset: bool, sep: &str) -> Self {
        let sep = sep.as_bytes().to_vec();
        let mut tokens = Vec::new();
        let mut field = |t: Token| {
            tokens.push(t);
            tokens.push(Token::Text(sep.clone()));
        };
        if timestamp {
            field(Token::Timestamp);
        }
        if offset {
            field(Token::Partition);
            field(Token::Offset);
        }
        if headers {
            field(Token::Headers);
        }
        if key {
            field(Token::Key);
        }
        tokens.push(Token::Value);
        tokens.push(Token::Text(b"\n".to_vec()));
        Self { tokens }
    }

    /// Appends one record to `out`.
    pub fn write(&self, out: &mut Vec<u8>, topic: &str, partition: i32, r: &ConsumerRecord) {
        for token in &self.tokens {
            match token {
                Token::Text(t) => out.extend_from_slice(t),
                Token::Topic => out.extend_from_slice(topic.as_bytes()),
                Token::Partition => push_number(out, i64::from(partition)),
                Token::Offset => push_number(out, r.offset),
                Token::Key => out.extend_from_slice(r.key.as_deref().unwrap_or_default()),
                Token::Value => out.extend_from_slice(r.value.as_deref().unwrap_or_default()),
                Token::KeyLength => push_number(out, r.key.as_ref().map_or(-1, len)),
                Token::ValueLength => push_number(out, r.value.as_ref().map_or(-1, len)),
                Token::Timestamp => push_number(out, r.timestamp),
                Token::Headers => {
                    for (i, (k, v)) in r.headers.iter().enumerate() {
                        if i > 0 {
                            out.push(b',');
                        }
                        out.extend_from_slice(k.as_bytes());
                        out.push(b'=');
                        out.extend_from_slice(v.as_deref().unwrap_or_default());
                    }
                }
            }
        }
    }
}

fn len(b: &Bytes) -> i64 {
    i64::try_from(b.len()).unwrap_or(i64::MAX)
}

fn push_number(out: &mut Vec<u8>, n: i64) {
    let _ = write!(out, "{n}");
}

fn text(b: Option<&Bytes>) -> serde_json::Value {
    b.map_or(serde_json::Value::Null, |b| {
        serde_json::Value::String(String::from_utf8_lossy(b).into_owned())
    })
}

/// One record as a JSON line.
fn write_json(out: &mut Vec<u8>, topic: &str, partition: i32, r: &ConsumerRecord) {
    let value = serde_json::json!({
        "topic": topic,
        "partition": partition,
        "offset": r.offset,
        "timestamp": r.timestamp,
        "timestamp_type": match r.timestamp_type {
            TimestampType::LogAppend => "LogAppendTime",
            TimestampType::Creation => "CreateTime",
        },
        "key": text(r.key.as_ref()),
        "value": text(r.value.as_ref()),
        "headers": r.headers.iter().map(|(k, v)| serde_json::json!({"key": k, "value": text(v.as_ref())})).collect::<Vec<_>>(),
    });
    let _ = serde_json::to_writer(&mut *out, &value);
    out.push(b'\n');
}

/// How records are printed.
#[derive(Debug, Clone)]
enum Printer {
    Format(RecordFormat),
    Json,
}

/// One fetched response, formatted.
#[derive(Debug, Default)]
struct Chunk {
    topic: String,
    partition: i32,
    bytes: Vec<u8>,
    /// Per record: the end of its bytes and its offset.
    ends: Vec<(usize, i64)>,
    /// The offset after the whole response (to commit when all of it was printed).
    next_offset: i64,
}

fn format_chunk(raw: RawFetchedPartition, printer: &Printer) -> Result<Chunk, ClientError> {
    let next_offset = raw.next_offset();
    let fetched = raw.decode()?;
    let mut chunk = Chunk {
        bytes: Vec::with_capacity(fetched.bytes + fetched.records.len() * 8),
        ends: Vec::with_capacity(fetched.records.len()),
        next_offset,
        topic: fetched.topic,
        partition: fetched.partition,
    };
    for r in &fetched.records {
        match printer {
            Printer::Format(f) => f.write(&mut chunk.bytes, &chunk.topic, chunk.partition, r),
            Printer::Json => write_json(&mut chunk.bytes, &chunk.topic, chunk.partition, r),
        }
        chunk.ends.push((chunk.bytes.len(), r.offset));
    }
    Ok(chunk)
}

/// What the writer thread shares with the fetch loop.
#[derive(Debug, Default)]
struct Written {
    records: AtomicU64,
    /// Set once `--count` records were written or stdout closed.
    done: AtomicBool,
    /// Per partition, the offset to commit (after the last record printed).
    positions: Mutex<BTreeMap<(String, i32), i64>>,
}

/// The writer thread: writes chunks in order, stops at `limit` records.
fn spawn_writer(
    mut chunks: tokio::sync::mpsc::Receiver<Chunk>,
    written: Arc<Written>,
    limit: u64,
    bar: indicatif::ProgressBar,
) -> std::thread::JoinHandle<std::io::Result<()>> {
    std::thread::spawn(move || {
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
        while let Some(chunk) = chunks.blocking_recv() {
            let already = written.records.load(Ordering::Relaxed);
            let room = usize::try_from(limit.saturating_sub(already)).unwrap_or(usize::MAX);
            let take = chunk.ends.len().min(room);
            let (end_byte, commit) = if take == chunk.ends.len() {
                (chunk.bytes.len(), Some(chunk.next_offset))
            } else {
                let last = take.checked_sub(1).and_then(|i| chunk.ends.get(i));
                (last.map_or(0, |e| e.0), last.map(|e| e.1 + 1))
            };
            if let Err(e) = out.write_all(chunk.bytes.get(..end_byte).unwrap_or_default()) {
                written.done.store(true, Ordering::Release);
                return if e.kind() == std::io::ErrorKind::BrokenPipe {
                    Ok(())
                } else {
                    Err(e)
                };
            }
            let n = u64::try_from(take).unwrap_or(0);
            written.records.fetch_add(n, Ordering::Relaxed);
            bar.inc(n);
            if let (Some(offset), Ok(mut positions)) = (commit, written.positions.lock()) {
                positions.insert((chunk.topic.clone(), chunk.partition), offset);
            }
            if already + n >= limit {
                written.done.store(true, Ordering::Release);
                break;
            }
            // Flush when idle so a tailing reader sees records promptly.
            if chunks.is_empty() && out.flush().is_err() {
                written.done.store(true, Ordering::Release);
                return Ok(());
            }
        }
        match out.flush() {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e),
            _ => Ok(()),
        }
    })
}

/// Where to start a partition that has no committed offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    Beginning,
    End,
    Offset(i64),
    FromEnd(i64),
    Timestamp(i64),
}

fn parse_start(text: &str) -> Result<Start, CliError> {
    let t = text.trim();
    Ok(match t {
        "beginning" | "earliest" => Start::Beginning,
        "end" | "latest" => Start::End,
        _ => {
            if let Some(ts) = t.strip_prefix("s@").or_else(|| t.strip_prefix('@')) {
                Start::Timestamp(parse_datetime(ts).map_err(CliError::Usage)?)
            } else if let Some(n) = t.strip_prefix('-') {
                Start::FromEnd(
                    n.parse()
                        .map_err(|_| CliError::Usage(format!("--offset {t}: expected -N")))?,
                )
            } else {
                Start::Offset(t.parse().map_err(|_| {
                    CliError::Usage(format!(
                        "--offset {t}: expected beginning, end, N, -N or @TIME"
                    ))
                })?)
            }
        }
    })
}

/// The start offsets of `partitions` of `topic`, clamped into each log.
async fn start_offsets(
    client: &Client,
    topic: &str,
    partitions: &[i32],
    start: Start,
    isolation: IsolationLevel,
) -> Result<BTreeMap<i32, i64>, CliError> {
    let list = |spec: OffsetSpec| {
        let wanted: Vec<(i32, OffsetSpec)> = partitions.iter().map(|&p| (p, spec)).collect();
        async move {
            client
                .list_offsets(topic, &wanted, isolation)
                .await
                .map(|l| {
                    l.into_iter()
                        .map(|o| (o.partition, o.offset))
                        .collect::<BTreeMap<_, _>>()
                })
        }
    };
    let earliest = list(OffsetSpec::Earliest).await?;
    let latest = list(OffsetSpec::Latest).await?;
    let by_time = match start {
        Start::Timestamp(ts) => Some(list(OffsetSpec::Timestamp(ts)).await?),
        _ => None,
    };
    Ok(partitions
        .iter()
        .map(|&p| {
            let low = earliest.get(&p).copied().unwrap_or(0);
            let high = latest.get(&p).copied().unwrap_or(low).max(low);
            let offset = match start {
                Start::Beginning => low,
                Start::End => high,
                Start::Offset(o) => o,
                Start::FromEnd(n) => high.saturating_sub(n),
                Start::Timestamp(_) => by_time
                    .as_ref()
                    .and_then(|m| m.get(&p).copied())
                    .filter(|&o| o >= 0)
                    .unwrap_or(high),
            };
            (p, offset.clamp(low, high))
        })
        .collect())
}

/// Runs `krabka consume ...`.
///
/// # Errors
///
/// [`CliError`] with the exit code of the failure.
#[allow(clippy::too_many_lines)] // one loop, read top to bottom
pub async fn run(args: ConsumeArgs) -> Result<(), CliError> {
    let start = if args.from_beginning {
        Start::Beginning
    } else {
        parse_start(&args.offset)?
    };
    let printer = match (&args.fmt, args.common.format) {
        (Some(f), _) => Printer::Format(RecordFormat::parse(f).map_err(CliError::Usage)?),
        (None, Format::Json) => Printer::Json,
        (None, Format::Text) => Printer::Format(RecordFormat::from_flags(
            args.print_key,
            args.print_headers,
            args.print_timestamp,
            args.print_offset,
            &args.separator,
        )),
    };
    let isolation = if args.read_committed {
        IsolationLevel::ReadCommitted
    } else {
        IsolationLevel::ReadUncommitted
    };
    let client = args.common.connect().await?;
    let topic = args.topic.clone();
    let info = client
        .refresh_metadata(&[&topic])
        .await?
        .topic(&topic)
        .cloned()
        .map_err(|_| CliError::NotFound(format!("topic {topic} does not exist")))?;
    let all: Vec<i32> = info.partitions.iter().map(|p| p.partition).collect();
    for p in &args.partitions {
        if !all.contains(p) {
            return Err(CliError::NotFound(format!(
                "topic {topic} has no partition {p}"
            )));
        }
    }
    let config = ConsumerConfig {
        isolation,
        max_wait: Duration::from_millis(500),
        min_bytes: 1,
        max_bytes: 64 * 1024 * 1024,
        partition_max_bytes: 8 * 1024 * 1024,
    };

    let mut member = args.group.as_ref().map(|g| {
        let mut c = GroupMemberConfig::new(g.clone());
        c.rebalance_timeout = Duration::from_secs(60);
        c.join_timeout = args.common.timeout();
        GroupMember::new(client.clone(), c, vec![topic.clone()])
    });

    let limit = args.count.unwrap_or(u64::MAX);
    let written = Arc::new(Written::default());
    // A bar only when records go elsewhere than the terminal the bar is on.
    let bounded = args.count.is_some() || args.exit_at_end;
    let bar = if bounded && !std::io::stdout().is_terminal() {
        progress(args.count.unwrap_or(0), &format!("consuming {topic}"))
    } else {
        indicatif::ProgressBar::hidden()
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Chunk>(MAX_FORMATTING * 2);
    let writer = spawn_writer(rx, Arc::clone(&written), limit, bar.clone());
    let printer = Arc::new(printer);

    let mut positions: Vec<PartitionFetch> = Vec::new();
    let mut formatting: VecDeque<JoinHandle<Result<Chunk, ClientError>>> = VecDeque::new();
    let mut at_end: BTreeMap<i32, bool> = BTreeMap::new();
    let mut last_record = Instant::now();
    let mut last_commit = Instant::now();
    let mut assigned_once = false;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut outcome: Result<(), CliError> = Ok(());

    'outer: loop {
        if written.done.load(Ordering::Acquire) {
            break;
        }
        // (Re)join the group and start from its committed offsets.
        if let Some(m) = member.as_mut().filter(|m| m.needs_rejoin()) {
            drain(&mut formatting, &tx, 0).await?;
            commit(m, &written).await;
            let assigned = tokio::select! {
                a = m.join() => a?,
                _ = &mut ctrl_c => break 'outer,
            };
            let mine: Vec<i32> = assigned
                .iter()
                .filter(|(t, _)| *t == topic)
                .map(|(_, p)| *p)
                .collect();
            let wanted: Vec<(String, i32)> = mine.iter().map(|&p| (topic.clone(), p)).collect();
            let committed: BTreeMap<i32, i64> = client
                .fetch_committed(args.group.as_deref().unwrap_or_default(), Some(&wanted))
                .await?
                .into_iter()
                .filter(|c| c.offset >= 0)
                .map(|c| (c.partition, c.offset))
                .collect();
            let fallback = start_offsets(&client, &topic, &mine, start, isolation).await?;
            positions = mine
                .iter()
                .map(|&p| PartitionFetch {
                    topic: topic.clone(),
                    partition: p,
                    offset: committed
                        .get(&p)
                        .or_else(|| fallback.get(&p))
                        .copied()
                        .unwrap_or(0),
                })
                .collect();
            at_end.clear();
            assigned_once = true;
            if let Ok(mut p) = written.positions.lock() {
                p.clear();
            }
        } else if member.is_none() && !assigned_once {
            let mine = if args.partitions.is_empty() {
                all.clone()
            } else {
                args.partitions.clone()
            };
            let starts = start_offsets(&client, &topic, &mine, start, isolation).await?;
            positions = mine
                .iter()
                .map(|&p| PartitionFetch {
                    topic: topic.clone(),
                    partition: p,
                    offset: starts.get(&p).copied().unwrap_or(0),
                })
                .collect();
            if args.exit_at_end && args.count.is_none() {
                let ends = start_offsets(&client, &topic, &mine, Start::End, isolation).await?;
                let total: i64 = positions
                    .iter()
                    .map(|p| ends.get(&p.partition).copied().unwrap_or(0) - p.offset)
                    .sum();
                bar.set_length(u64::try_from(total.max(0)).unwrap_or(0));
            }
            assigned_once = true;
        }
        let reading: Vec<PartitionFetch> = positions
            .iter()
            .filter(|p| !(args.exit_at_end && at_end.get(&p.partition).copied().unwrap_or(false)))
            .cloned()
            .collect();
        if args.exit_at_end && !positions.is_empty() && reading.is_empty() {
            break;
        }
        if args
            .idle_timeout_ms
            .is_some_and(|ms| last_record.elapsed() >= Duration::from_millis(ms))
        {
            break;
        }
        if let Some(m) = &member {
            if last_commit.elapsed() >= COMMIT_EVERY {
                commit(m, &written).await;
                last_commit = Instant::now();
            }
        }
        if reading.is_empty() {
            // A group member without partitions waits for a rebalance.
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(200)) => continue,
                _ = &mut ctrl_c => break,
            }
        }
        let results = tokio::select! {
            r = client.fetch_raw(&reading, &config) => r,
            _ = &mut ctrl_c => break,
        };
        let results = match results {
            Ok(r) => r,
            Err(e) if e.is_retriable() || e.needs_metadata_refresh() => {
                let _ = client.refresh_metadata(&[&topic]).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            Err(e) => {
                outcome = Err(e.into());
                break;
            }
        };
        for (wanted, result) in reading.iter().zip(results) {
            let raw = match result {
                Ok(raw) => raw,
                // OFFSET_OUT_OF_RANGE: the log moved (retention); restart at its start.
                Err(e) if e.code() == Some(1) => {
                    let fresh = start_offsets(
                        &client,
                        &topic,
                        &[wanted.partition],
                        Start::Beginning,
                        isolation,
                    )
                    .await?;
                    if let Some(p) = positions
                        .iter_mut()
                        .find(|p| p.partition == wanted.partition)
                    {
                        eprintln!(
                            "krabka: {topic}-{} offset {} is out of range; continuing from {}",
                            wanted.partition,
                            p.offset,
                            fresh.get(&wanted.partition).copied().unwrap_or(0)
                        );
                        p.offset = fresh.get(&wanted.partition).copied().unwrap_or(0);
                    }
                    continue;
                }
                Err(e) if e.is_retriable() || e.needs_metadata_refresh() => {
                    let _ = client.refresh_metadata(&[&topic]).await;
                    continue;
                }
                Err(e) => {
                    outcome = Err(e.into());
                    break 'outer;
                }
            };
            let next = raw.next_offset();
            let end = if isolation == IsolationLevel::ReadCommitted && raw.last_stable_offset >= 0 {
                raw.last_stable_offset
            } else {
                raw.high_watermark
            };
            at_end.insert(wanted.partition, next >= end);
            if next > wanted.offset {
                last_record = Instant::now();
                if let Some(p) = positions
                    .iter_mut()
                    .find(|p| p.partition == wanted.partition)
                {
                    p.offset = next;
                }
                let printer = Arc::clone(&printer);
                formatting.push_back(tokio::spawn(async move { format_chunk(raw, &printer) }));
            }
        }
        drain(&mut formatting, &tx, MAX_FORMATTING).await?;
    }
    if outcome.is_ok() {
        drain(&mut formatting, &tx, 0).await?;
    }
    drop(tx);
    let written_result = krabka_broker::blocking::run(move || writer.join())
        .await
        .map_err(|e| CliError::Failed(format!("writer: {e}")))?
        .map_err(|_| CliError::Failed("the output writer panicked".into()))?;
    bar.finish_and_clear();
    if let Some(mut m) = member {
        commit(&m, &written).await;
        let _ = m.leave().await;
    }
    written_result?;
    outcome
}

/// Hands finished chunks to the writer, in order, until at most `keep` are formatting.
async fn drain(
    formatting: &mut VecDeque<JoinHandle<Result<Chunk, ClientError>>>,
    tx: &tokio::sync::mpsc::Sender<Chunk>,
    keep: usize,
) -> Result<(), CliError> {
    while formatting.len() > keep {
        let Some(task) = formatting.pop_front() else {
            break;
        };
        let chunk = task
            .await
            .map_err(|e| CliError::Failed(format!("formatting records: {e}")))??;
        if tx.send(chunk).await.is_err() {
            // The writer stopped (count reached or stdout closed).
            formatting.clear();
            break;
        }
    }
    Ok(())
}

/// Commits what was printed so far; a failure is reported, not fatal (the
/// next commit or the rejoin takes over).
async fn commit(member: &GroupMember, written: &Written) {
    let offsets: Vec<(String, i32, i64)> = written
        .positions
        .lock()
        .map(|p| p.iter().map(|((t, p), o)| (t.clone(), *p, *o)).collect())
        .unwrap_or_default();
    if let Err(e) = member.commit(&offsets).await {
        eprintln!("krabka: committing offsets failed: {e}");
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    fn record() -> ConsumerRecord {
        ConsumerRecord {
            offset: 42,
            timestamp: 1000,
            timestamp_type: TimestampType::Creation,
            key: Some(Bytes::from_static(b"k1")),
            value: Some(Bytes::from_static(b"hello")),
            headers: vec![
                ("a".into(), Some(Bytes::from_static(b"1"))),
                ("b".into(), None),
            ],
            producer_id: krabka_ids::ProducerId(-1),
            leader_epoch: krabka_ids::LeaderEpoch(0),
            transactional: false,
        }
    }

    #[test]
    fn kcat_format_strings() {
        let f = RecordFormat::parse("%t/%p@%o %k=%s (%K,%S) %T [%h] 100%%\\n").unwrap();
        let mut out = Vec::new();
        f.write(&mut out, "t", 3, &record());
        check!(String::from_utf8(out).unwrap() == "t/3@42 k1=hello (2,5) 1000 [a=1,b=] 100%\n");
        check!(RecordFormat::parse("%x").is_err());
        let f = RecordFormat::from_flags(true, false, false, true, "|");
        let mut out = Vec::new();
        f.write(&mut out, "t", 0, &record());
        check!(out == b"0|42|k1|hello\n");
    }

    #[test]
    fn start_specs() {
        check!(parse_start("beginning").unwrap() == Start::Beginning);
        check!(parse_start("end").unwrap() == Start::End);
        check!(parse_start("17").unwrap() == Start::Offset(17));
        check!(parse_start("-5").unwrap() == Start::FromEnd(5));
        check!(parse_start("@1000").unwrap() == Start::Timestamp(1000));
        check!(parse_start("s@1970-01-01T00:00:01").unwrap() == Start::Timestamp(1000));
        check!(parse_start("soon").is_err());
    }
}
