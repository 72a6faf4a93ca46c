//! `krabka-bench`: produce and consume load against a Kafka-compatible broker.
//!
//! `produce` reports records/s, MB/s (record payload bytes) and produce
//! latency percentiles; `consume` reads partitions from the earliest offset
//! and reports records/s and MB/s. A progress line shows the running figures.
//!
//! Two produce modes. `raw` (the default) encodes one batch per partition
//! once and sends that same `Bytes` again and again (the broker assigns
//! offsets, so a re-sent batch is a new batch), with many requests in flight
//! per partition: the client does almost no work per record, so the figure is
//! the broker's. `producer` goes through [`krabka_client::Producer`] record by
//! record (batching, linger, a future per record), which is what an
//! application sees; latency there is per record, from the moment the record
//! was due to be sent (so a stalled producer cannot hide latency) to its
//! acknowledgement.

mod stats;

use {
    bytes::Bytes,
    clap::{Args, Parser, Subcommand, ValueEnum},
    futures_util::{StreamExt, stream::FuturesUnordered},
    indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle},
    krabka_client::{
        Acks, Client, ClientConfig, ClientError, Compression, ConsumerConfig, IsolationLevel,
        NewTopic, OffsetSpec, PartitionFetch, Producer, ProducerConfig, ProducerRecord,
        producer::{PartitionBatch, enqueue_produce},
        records::{BatchProducer, encode_batch},
    },
    stats::{Counters, Report},
    std::{
        process::ExitCode,
        sync::{Arc, atomic::Ordering},
        time::{Duration, Instant},
    },
    tokio::sync::{Semaphore, mpsc},
};

#[derive(Parser)]
#[command(
    name = "krabka-bench",
    version,
    about = "Produce/consume load generator for Kafka-compatible brokers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Produce records and report throughput and latency.
    Produce(ProduceArgs),
    /// Consume a topic from the earliest offset and report throughput.
    Consume(ConsumeArgs),
}

#[derive(Args, Clone)]
struct Common {
    /// Bootstrap servers, `host:port[,host:port...]`.
    #[arg(long, short = 'b', default_value = "127.0.0.1:9092")]
    bootstrap: String,
    /// Topic.
    #[arg(long, short = 't', default_value = "krabka-bench")]
    topic: String,
    /// Stop after this many seconds.
    #[arg(long, short = 'd')]
    duration: Option<f64>,
    /// Stop after this many records.
    #[arg(long, short = 'n')]
    records: Option<u64>,
    /// Hide the progress line.
    #[arg(long)]
    quiet: bool,
    /// Connect with TLS (`security.protocol=SSL`), trusting the CA
    /// certificates in this PEM file.
    #[arg(long, value_name = "PEM")]
    tls_ca: Option<std::path::PathBuf>,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Mode {
    /// Pre-built batches, many in flight.
    Raw,
    /// Record by record through the client's Producer.
    Producer,
}

#[derive(Clone, Copy, ValueEnum)]
enum AcksArg {
    #[value(name = "0")]
    Zero,
    #[value(name = "1")]
    One,
    #[value(name = "all", alias = "-1")]
    All,
}

#[derive(Clone, Copy, ValueEnum)]
enum CompressionArg {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

#[derive(Args, Clone)]
struct ProduceArgs {
    #[command(flatten)]
    common: Common,
    /// Bytes of each record's value.
    #[arg(long, short = 's', default_value_t = 1024)]
    record_size: usize,
    /// Partitions to write to (the topic is created with this many if absent).
    #[arg(long, short = 'p', default_value_t = 1)]
    partitions: i32,
    /// `acks`: 0, 1 or all.
    #[arg(long, value_enum, default_value = "1")]
    acks: AcksArg,
    /// Target rate in records/s (default: as fast as possible).
    #[arg(long)]
    rate: Option<u64>,
    /// `raw` (pre-built batches) or `producer` (record by record).
    #[arg(long, value_enum, default_value = "raw")]
    mode: Mode,
    /// Bytes per batch (`batch.size`).
    #[arg(long, default_value_t = 1024 * 1024)]
    batch_size: usize,
    /// `linger.ms` (producer mode).
    #[arg(long, default_value_t = 5)]
    linger_ms: u64,
    /// Requests in flight per partition (raw) or per connection (producer).
    #[arg(long, default_value_t = 5)]
    max_in_flight: usize,
    /// Compression codec.
    #[arg(long, value_enum, default_value = "none")]
    compression: CompressionArg,
}

#[derive(Args, Clone)]
struct ConsumeArgs {
    #[command(flatten)]
    common: Common,
    /// `max.partition.fetch.bytes`.
    #[arg(long, default_value_t = 4 * 1024 * 1024)]
    partition_max_bytes: i32,
    /// `fetch.max.bytes`. Kept below glibc's largest mmap threshold (32 MiB)
    /// so response buffers are reused instead of freshly mapped and
    /// page-faulted for every fetch.
    #[arg(long, default_value_t = 24 * 1024 * 1024)]
    max_bytes: i32,
    /// Read with `isolation.level=read_committed`.
    #[arg(long)]
    read_committed: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("krabka-bench: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Produce(args) => produce(args).await,
            Command::Consume(args) => consume(args).await,
        }
    });
    match result {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("krabka-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn connect(common: &Common) -> Result<Client, ClientError> {
    let servers: Vec<&str> = common.bootstrap.split(',').collect();
    let mut config = ClientConfig::default();
    if let Some(path) = &common.tls_ca {
        let ca_pem = std::fs::read(path).map_err(|e| {
            ClientError::InvalidArgument(format!("--tls-ca {}: {e}", path.display()))
        })?;
        config.connection.tls = Some(krabka_client::tls::TlsConfig::new(
            &krabka_client::tls::TlsOptions {
                ca_pem: Some(ca_pem),
                verify_hostname: true,
                ..Default::default()
            },
        )?);
    }
    Client::connect(&servers, config).await
}

/// Creates the topic when it is absent; returns its partition count.
async fn ensure_topic(client: &Client, topic: &str, partitions: i32) -> Result<i32, ClientError> {
    match client.topic(topic).await {
        Ok(info) => Ok(i32::try_from(info.partitions.len()).unwrap_or(i32::MAX)),
        Err(e) if e.code() == Some(3) => {
            match client
                .create_topic(&NewTopic::new(topic, partitions), Duration::from_secs(30))
                .await
            {
                Ok(_) => {}
                Err(e) if e.code() == Some(36) => {} // created concurrently
                Err(e) => return Err(e),
            }
            // Wait until every partition has a leader.
            for _ in 0..100 {
                let meta = client.refresh_metadata(&[topic]).await?;
                if (0..partitions).all(|p| meta.leader(topic, p).is_ok()) {
                    return Ok(partitions);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(ClientError::Timeout(format!(
                "partitions of {topic} have no leader"
            )))
        }
        Err(e) => Err(e),
    }
}

fn progress(quiet: bool, what: &'static str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    if quiet {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    } else {
        bar.set_draw_target(ProgressDrawTarget::stderr_with_hz(5));
    }
    if let Ok(style) = ProgressStyle::with_template("{spinner} [{elapsed_precise}] {prefix} {msg}")
    {
        bar.set_style(style);
    }
    bar.set_prefix(what);
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Updates the progress line from the counters until `done` resolves.
fn spawn_progress(bar: ProgressBar, counters: Arc<Counters>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let start = Instant::now();
        let mut last = (Instant::now(), 0u64, 0u64);
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let now = Instant::now();
            let records = counters.records.load(Ordering::Relaxed);
            let bytes = counters.bytes.load(Ordering::Relaxed);
            let dt = now.duration_since(last.0).as_secs_f64().max(1e-9);
            bar.set_message(format!(
                "{records} records, {:.0} rec/s, {:.1} MB/s now; {:.1} MB/s average",
                (records - last.1) as f64 / dt,
                (bytes - last.2) as f64 / dt / 1e6,
                bytes as f64 / now.duration_since(start).as_secs_f64().max(1e-9) / 1e6,
            ));
            last = (now, records, bytes);
        }
    })
}

fn deadline_and_limit(common: &Common) -> (Option<Instant>, u64) {
    let deadline = common
        .duration
        .map(|d| Instant::now() + Duration::from_secs_f64(d));
    let limit = match (common.records, deadline) {
        (Some(n), _) => n,
        (None, Some(_)) => u64::MAX,
        (None, None) => 1_000_000,
    };
    (deadline, limit)
}

async fn produce(args: ProduceArgs) -> Result<Report, ClientError> {
    let client = connect(&args.common).await?;
    let partitions = ensure_topic(&client, &args.common.topic, args.partitions)
        .await?
        .min(args.partitions)
        .max(1);
    let counters = Arc::new(Counters::new());
    counters.set_record_size(args.record_size);
    let bar = progress(args.common.quiet, "produce");
    let ticker = spawn_progress(bar.clone(), Arc::clone(&counters));
    let start = Instant::now();
    let result = match args.mode {
        Mode::Raw => produce_raw(&client, &args, partitions, &counters).await,
        Mode::Producer => produce_records(&client, &args, partitions, &counters).await,
    };
    let elapsed = start.elapsed();
    ticker.abort();
    bar.finish_and_clear();
    result?;
    Ok(counters.report("produce", elapsed, args.record_size))
}

fn acks(arg: AcksArg) -> Acks {
    match arg {
        AcksArg::Zero => Acks::None,
        AcksArg::One => Acks::Leader,
        AcksArg::All => Acks::All,
    }
}

fn compression(arg: CompressionArg) -> Compression {
    match arg {
        CompressionArg::None => Compression::None,
        CompressionArg::Gzip => Compression::Gzip,
        CompressionArg::Snappy => Compression::Snappy,
        CompressionArg::Lz4 => Compression::Lz4,
        CompressionArg::Zstd => Compression::Zstd,
    }
}

/// A value of `size` bytes that does not compress to nothing.
fn payload(size: usize) -> Bytes {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..size)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            b'a' + (state % 26) as u8
        })
        .collect::<Vec<u8>>()
        .into()
}

/// Raw mode: one task per partition, each re-sending the same pre-built batch
/// with up to `max_in_flight` requests outstanding.
async fn produce_raw(
    client: &Client,
    args: &ProduceArgs,
    partitions: i32,
    counters: &Arc<Counters>,
) -> Result<(), ClientError> {
    let (deadline, limit) = deadline_and_limit(&args.common);
    let per_batch = (args.batch_size / (args.record_size + 20)).max(1);
    let value = payload(args.record_size);
    let records: Vec<ProducerRecord> = (0..per_batch)
        .map(|_| ProducerRecord {
            value: Some(value.clone()),
            ..Default::default()
        })
        .collect();
    let batch = encode_batch(
        &records,
        BatchProducer::NONE,
        compression(args.compression),
        now_ms(),
    )?;
    let per_batch = per_batch as u64;
    let topic: Arc<str> = Arc::from(args.common.topic.as_str());
    // Batches per second for the whole run, split across partitions.
    let interval = args.rate.map(|rate| {
        Duration::from_secs_f64(per_batch as f64 * f64::from(partitions) / rate.max(1) as f64)
    });
    let sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tasks = Vec::new();
    for partition in 0..partitions {
        let client = client.clone();
        let topic = Arc::clone(&topic);
        let batch = batch.clone();
        let counters = Arc::clone(counters);
        let sent = Arc::clone(&sent);
        let acks = acks(args.acks);
        let max_in_flight = args.max_in_flight.max(1);
        tasks.push(tokio::spawn(async move {
            let leader = client.leader(&topic, partition).await?;
            let connection = client.broker_connection(leader.id).await?;
            let slots = Arc::new(Semaphore::new(max_in_flight));
            let batches = [PartitionBatch {
                topic: Arc::clone(&topic),
                partition,
                batch,
            }];
            let mut pending = FuturesUnordered::new();
            let start = Instant::now();
            let mut n: u32 = 0;
            loop {
                if deadline.is_some_and(|d| Instant::now() >= d)
                    || sent.fetch_add(per_batch, Ordering::Relaxed) >= limit
                {
                    break;
                }
                // When rate-limited, latency counts from when the batch was due.
                let due = match interval {
                    Some(interval) => {
                        let due = start + interval * n;
                        tokio::time::sleep_until(due.into()).await;
                        due
                    }
                    None => Instant::now(),
                };
                n = n.wrapping_add(1);
                let permit = Arc::clone(&slots)
                    .acquire_owned()
                    .await
                    .map_err(|_| ClientError::Closed("semaphore".into()))?;
                let future =
                    enqueue_produce(&connection, &batches, acks, Duration::from_secs(30), None)?;
                pending.push(async move {
                    let result = future.await;
                    drop(permit);
                    (due, result)
                });
                // Reap whatever is done without waiting.
                while let Some(Some((due, result))) =
                    futures_util::FutureExt::now_or_never(pending.next())
                {
                    record_batch(&counters, due, result, per_batch)?;
                }
                if slots.available_permits() == 0 {
                    if let Some((due, result)) = pending.next().await {
                        record_batch(&counters, due, result, per_batch)?;
                    }
                }
            }
            while let Some((due, result)) = pending.next().await {
                record_batch(&counters, due, result, per_batch)?;
            }
            Ok::<(), ClientError>(())
        }));
    }
    for task in tasks {
        task.await
            .map_err(|e| ClientError::Closed(format!("producer task: {e}")))??;
    }
    Ok(())
}

fn record_batch(
    counters: &Counters,
    due: Instant,
    result: Result<krabka_client::producer::ProduceResults, ClientError>,
    records: u64,
) -> Result<(), ClientError> {
    for outcome in result? {
        outcome?;
    }
    counters.acked(records, due.elapsed(), records);
    Ok(())
}

/// Producer mode: records one by one through the client's Producer.
async fn produce_records(
    client: &Client,
    args: &ProduceArgs,
    partitions: i32,
    counters: &Arc<Counters>,
) -> Result<(), ClientError> {
    let (deadline, limit) = deadline_and_limit(&args.common);
    let config = ProducerConfig {
        acks: acks(args.acks),
        linger: Duration::from_millis(args.linger_ms),
        batch_size: args.batch_size,
        compression: compression(args.compression),
        idempotence: matches!(args.acks, AcksArg::All),
        max_in_flight: args.max_in_flight.clamp(1, 5),
        max_request_size: (args.batch_size * 2).max(1024 * 1024),
        ..ProducerConfig::default()
    };
    let producer = Producer::new(client.clone(), config).await?;
    let value = payload(args.record_size);
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, krabka_client::DeliveryFuture)>();
    let collector = {
        let counters = Arc::clone(counters);
        tokio::spawn(async move {
            let mut pending = FuturesUnordered::new();
            let mut first_error = None;
            loop {
                tokio::select! {
                    item = rx.recv() => match item {
                        Some((due, future)) => pending.push(async move { (due, future.await) }),
                        None => break,
                    },
                    Some((due, result)) = pending.next(), if !pending.is_empty() => {
                        match result {
                            Ok(_) => counters.acked(1, due.elapsed(), 1),
                            Err(e) => { first_error.get_or_insert(e); }
                        }
                    }
                }
            }
            while let Some((due, result)) = pending.next().await {
                match result {
                    Ok(_) => counters.acked(1, due.elapsed(), 1),
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
            first_error.map_or(Ok(()), Err)
        })
    };
    let interval = args
        .rate
        .map(|rate| Duration::from_secs_f64(1.0 / rate.max(1) as f64));
    let start = Instant::now();
    let mut i: u64 = 0;
    while i < limit && deadline.is_none_or(|d| i % 1024 != 0 || Instant::now() < d) {
        let due = match interval {
            Some(interval) => {
                let due = start + interval.mul_f64(i as f64);
                let now = Instant::now();
                if due > now + Duration::from_millis(1) {
                    tokio::time::sleep_until(due.into()).await;
                }
                due
            }
            None => Instant::now(),
        };
        let partition = i32::try_from(i % u64::try_from(partitions).unwrap_or(1)).unwrap_or(0);
        let record = ProducerRecord {
            value: Some(value.clone()),
            ..Default::default()
        };
        let future = producer
            .send(&args.common.topic, Some(partition), record)
            .await?;
        if tx.send((due, future)).is_err() {
            break;
        }
        i += 1;
    }
    producer.flush().await;
    drop(tx);
    let result = collector
        .await
        .map_err(|e| ClientError::Closed(format!("collector: {e}")))?;
    producer.close().await;
    result
}

async fn consume(args: ConsumeArgs) -> Result<Report, ClientError> {
    let client = connect(&args.common).await?;
    let topic = client.topic(&args.common.topic).await?;
    let isolation = if args.read_committed {
        IsolationLevel::ReadCommitted
    } else {
        IsolationLevel::ReadUncommitted
    };
    let partitions: Vec<(i32, OffsetSpec)> = topic
        .partitions
        .iter()
        .map(|p| (p.partition, OffsetSpec::Earliest))
        .collect();
    let starts = client
        .list_offsets(&topic.name, &partitions, isolation)
        .await?;
    let ends_spec: Vec<(i32, OffsetSpec)> = topic
        .partitions
        .iter()
        .map(|p| (p.partition, OffsetSpec::Latest))
        .collect();
    let ends = client
        .list_offsets(&topic.name, &ends_spec, isolation)
        .await?;
    let (deadline, limit) = deadline_and_limit(&args.common);
    let limit = if args.common.records.is_none() && args.common.duration.is_none() {
        u64::MAX
    } else {
        limit
    };
    let config = ConsumerConfig {
        isolation,
        max_wait: Duration::from_millis(100),
        min_bytes: 1,
        max_bytes: args.max_bytes,
        partition_max_bytes: args.partition_max_bytes,
    };
    let mut positions: Vec<PartitionFetch> = starts
        .iter()
        .map(|o| PartitionFetch {
            topic: topic.name.clone(),
            partition: o.partition,
            offset: o.offset,
        })
        .collect();
    let end_of = |partition: i32| {
        ends.iter()
            .find(|e| e.partition == partition)
            .map_or(0, |e| e.offset)
    };
    let counters = Arc::new(Counters::new());
    let bar = progress(args.common.quiet, "consume");
    let ticker = spawn_progress(bar.clone(), Arc::clone(&counters));
    let start = Instant::now();
    let mut total: u64 = 0;
    let mut payload_bytes: u64 = 0;
    // The next fetch goes out as soon as a response is in; decoding runs on
    // other tasks meanwhile, at most `MAX_DECODING` responses behind.
    const MAX_DECODING: usize = 4;
    let mut decoding = std::collections::VecDeque::new();
    let mut settle = |counts: Result<(u64, u64), ClientError>| -> Result<(), ClientError> {
        let (n, bytes) = counts?;
        total += n;
        payload_bytes += bytes;
        counters.records.fetch_add(n, Ordering::Relaxed);
        counters.bytes.fetch_add(bytes, Ordering::Relaxed);
        Ok(())
    };
    let mut fetched_records: u64 = 0;
    loop {
        positions.retain(|p| p.offset < end_of(p.partition));
        if positions.is_empty()
            || fetched_records >= limit
            || deadline.is_some_and(|d| Instant::now() >= d)
        {
            break;
        }
        let results = client.fetch_raw(&positions, &config).await?;
        for (position, result) in positions.iter_mut().zip(results) {
            let raw = result?;
            let next = raw.next_offset();
            fetched_records += u64::try_from(next - position.offset).unwrap_or(0);
            position.offset = next;
            decoding.push_back(tokio::spawn(async move {
                let fetched = raw.decode()?;
                let bytes: u64 = fetched
                    .records
                    .iter()
                    .map(|r| {
                        (r.value.as_ref().map_or(0, Bytes::len)
                            + r.key.as_ref().map_or(0, Bytes::len)) as u64
                    })
                    .sum();
                Ok::<_, ClientError>((fetched.records.len() as u64, bytes))
            }));
        }
        while decoding.len() > MAX_DECODING {
            if let Some(task) = decoding.pop_front() {
                settle(
                    task.await
                        .map_err(|e| ClientError::Closed(format!("decoder: {e}")))?,
                )?;
            }
        }
    }
    while let Some(task) = decoding.pop_front() {
        settle(
            task.await
                .map_err(|e| ClientError::Closed(format!("decoder: {e}")))?,
        )?;
    }
    let elapsed = start.elapsed();
    ticker.abort();
    bar.finish_and_clear();
    let average = payload_bytes
        .checked_div(total)
        .map_or(0, |a| usize::try_from(a).unwrap_or(0));
    Ok(counters.report("consume", elapsed, average))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
