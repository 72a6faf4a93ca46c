//! Latency of the coordination calls against a running broker, for
//! `docs/BENCHMARKS.md`.
//!
//! ```text
//! cargo run --release -p krabka-client-coordination --example latency -- --bootstrap 127.0.0.1:9092
//! ```
//!
//! Measures, interleaved in one run so machine load hits every call alike:
//! a third party's `describe` (one DescribeTransactions) against the same
//! check done the two-request way (FindCoordinator, then
//! DescribeTransactions); a holder's lease renewal (AddPartitionsToTxn,
//! Produce, EndTxn); and one application write through the fenced producer.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use clap::Parser;
use krabka_client::{Client, ClientConfig, CoordinatorType, NewTopic, ProducerRecord};
use krabka_client_coordination::{
    CoordinationTransport, MemberId, Role, Timing,
    broker::{BrokerTransport, BrokerTransportConfig},
    succession,
};

/// Measure the coordination calls.
#[derive(Debug, Parser)]
struct Args {
    /// Bootstrap servers, comma-separated `host:port`.
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap: String,
    /// Rounds; each round makes one call of every kind.
    #[arg(long, default_value_t = 2_000)]
    rounds: usize,
    /// The role to hold while measuring.
    #[arg(long, default_value = "latency-bench")]
    role: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let bootstrap: Vec<&str> = args.bootstrap.split(',').collect();
    let role = Role::new(&args.role)?;
    let member = MemberId::new("bench")?;
    let timing = Timing::default();
    let config = BrokerTransportConfig {
        lease: timing.lease,
        ..BrokerTransportConfig::default()
    };
    let topic = format!("{}-writes", args.role);
    let holder = Arc::new(BrokerTransport::new(
        Client::connect(&bootstrap, ClientConfig::default()).await?,
        config.clone(),
    ));
    let _ = holder
        .client()
        .create_topic(&NewTopic::new(topic.clone(), 1), Duration::from_secs(30))
        .await;
    let token = holder.acquire_epoch(&role).await?;
    let producer = holder.producer(&role, token)?;
    let third_party = BrokerTransport::new(
        Client::connect(&bootstrap, ClientConfig::default()).await?,
        config,
    );
    let plain = Client::connect(&bootstrap, ClientConfig::default()).await?;
    let clock = krabka_client_coordination::SystemClock::new();

    let mut describe = Vec::with_capacity(args.rounds);
    let mut two_requests = Vec::with_capacity(args.rounds);
    let mut renewal = Vec::with_capacity(args.rounds);
    let mut write = Vec::with_capacity(args.rounds);
    for round in 0..args.rounds {
        let started = Instant::now();
        let seen = third_party.describe(&role).await?;
        describe.push(started.elapsed());
        assert_eq!(seen, Some(token), "the holder changed during the run");

        let started = Instant::now();
        plain
            .find_coordinator(role.as_str(), CoordinatorType::Transaction)
            .await?;
        plain.describe_transactions(&[role.as_str()]).await?;
        two_requests.push(started.elapsed());

        let lease = succession::grant(
            &member,
            token,
            krabka_client_coordination::Clock::now_ms(&clock),
            &timing,
        );
        let started = Instant::now();
        holder.write_lease(&role, token, &lease).await?;
        renewal.push(started.elapsed());

        let record = ProducerRecord::value(format!("round {round}"));
        let started = Instant::now();
        producer
            .send_transaction(vec![(topic.as_str(), 0, vec![record])])
            .await?;
        write.push(started.elapsed());
    }
    println!("{} rounds against {}", args.rounds, args.bootstrap);
    println!("| call | requests | p50 | p99 |");
    println!("| --- | --- | --- | --- |");
    for (name, requests, samples) in [
        ("describe (one request)", "1", &mut describe),
        ("FindCoordinator + describe", "2", &mut two_requests),
        ("lease renewal", "3", &mut renewal),
        ("fenced application write", "3", &mut write),
    ] {
        samples.sort();
        println!(
            "| {name} | {requests} | {:.3} ms | {:.3} ms |",
            millis(percentile(samples, 50)),
            millis(percentile(samples, 99))
        );
    }
    Ok(())
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    let index = (sorted.len().saturating_sub(1) * p) / 100;
    sorted.get(index).copied().unwrap_or_default()
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1_000.0
}
