//! One member of a role: campaigns, prints every leadership change, and
//! resigns on Ctrl-C.
//!
//! ```text
//! cargo run --release --example member -- --role controller --member node-1 --bootstrap 127.0.0.1:9092
//! ```
//!
//! Start three in three terminals with different `--member` names: one is
//! elected, the others print the leader they see. Stop the leader (Ctrl-Z or
//! `kill -STOP`) for longer than the lease and a standby takes over; let it
//! continue (`fg` or `kill -CONT`) and it prints that it was deposed. With
//! `--write-topic T` the leader also writes one record every
//! `--write-interval-ms` to partition 0 of `T` through the producer bound to
//! its epoch, so a deposed leader's next write shows the broker's fence.
//!
//! The output is one line per event, `<member>: <event>`, stable enough for
//! the crate's three-process test (`tests/three_members.rs`) to parse:
//! `ELECTED with token P/E ...`, `DEPOSED, token P/E is fenced`,
//! `leader is M with token P/E`, `wrote under P/E at offset O`,
//! `write under P/E refused: <error>`. A written record has the member id as
//! its key and `<member> <token> <sequence>` as its value.

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use clap::Parser;
use futures_util::StreamExt;
use krabka_client::{Client, ClientConfig, NewTopic, ProducerRecord};
use krabka_client_coordination::{
    Coordinator, LeadershipChange, MemberId, Role, Timing,
    broker::{BrokerTransport, BrokerTransportConfig},
};

/// Campaign for a role and print leadership changes.
#[derive(Debug, Parser)]
struct Args {
    /// The role to campaign for (also its `transactional.id`).
    #[arg(long)]
    role: String,
    /// This member's id.
    #[arg(long)]
    member: String,
    /// Bootstrap servers, comma-separated `host:port`.
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap: String,
    /// Lease duration in ms (also `transaction.timeout.ms`).
    #[arg(long, default_value_t = 10_000)]
    lease_ms: u64,
    /// Gap between the challenges of consecutive ranks, in ms.
    #[arg(long, default_value_t = 2_000)]
    stagger_ms: u64,
    /// How long after each grant the leader renews, in ms.
    #[arg(long, default_value_t = 3_000)]
    renew_ms: u64,
    /// A topic the leader writes to through its fenced producer.
    #[arg(long)]
    write_topic: Option<String>,
    /// How often the leader writes to `--write-topic`, in ms.
    #[arg(long, default_value_t = 1_000)]
    write_interval_ms: u64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let role = Role::new(&args.role)?;
    let member = MemberId::new(&args.member)?;
    let timing = Timing {
        lease: Duration::from_millis(args.lease_ms),
        stagger: Duration::from_millis(args.stagger_ms),
        renew_after: Duration::from_millis(args.renew_ms),
    };
    timing.validate()?;

    let bootstrap: Vec<&str> = args.bootstrap.split(',').collect();
    let client = Client::connect(&bootstrap, ClientConfig::default()).await?;
    if let Some(topic) = &args.write_topic {
        // Already existing is fine; any other failure shows on the first write.
        let _ = client
            .create_topic(&NewTopic::new(topic.clone(), 1), Duration::from_secs(30))
            .await;
    }
    let transport = BrokerTransport::new(
        client,
        BrokerTransportConfig {
            lease: timing.lease,
            ..BrokerTransportConfig::default()
        },
    );
    let coordinator = Coordinator::new(Arc::new(transport), timing)?;
    let campaign = coordinator.campaign(role.clone(), member.clone()).await?;
    println!("{member}: campaigning for {role}");

    let mut changes = campaign.changes();
    let mut writes = tokio::time::interval(Duration::from_millis(args.write_interval_ms.max(1)));
    // A member that was stopped (SIGSTOP) writes once when it resumes, not a
    // burst of every tick it missed.
    writes.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sequence = 0_u64;
    // One Ctrl-C future for the whole loop: a fresh one per turn would miss
    // a Ctrl-C that arrives while a write is in flight.
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    loop {
        tokio::select! {
            change = changes.next() => {
                let Some(change) = change else { break };
                print_change(&member, &change);
            }
            _ = writes.tick(), if args.write_topic.is_some() => {
                let (Some(topic), Ok(producer)) = (&args.write_topic, campaign.producer()) else {
                    continue;
                };
                sequence += 1;
                let value = Bytes::from(format!("{member} {} {sequence}", producer.token()));
                let record = ProducerRecord::keyed(Bytes::from(member.to_string()), value);
                match producer.send_transaction(vec![(topic.as_str(), 0, vec![record])]).await {
                    Ok(outcomes) => {
                        let offset = outcomes.first().map_or(-1, |o| o.base_offset);
                        println!("{member}: wrote under {} at offset {offset}", producer.token());
                    }
                    Err(error) => println!("{member}: write under {} refused: {error}", producer.token()),
                }
            }
            _ = &mut interrupted => {
                println!("{member}: resigning");
                campaign.resign().await?;
                break;
            }
        }
    }
    Ok(())
}

fn print_change(member: &MemberId, change: &LeadershipChange) {
    match change {
        LeadershipChange::Registered => println!("{member}: registered"),
        LeadershipChange::Elected { token, deadline } => {
            println!("{member}: ELECTED with token {token} (lease until {deadline})");
        }
        LeadershipChange::Renewed { .. } => {}
        LeadershipChange::Deposed { token } => {
            println!("{member}: DEPOSED, token {token} is fenced")
        }
        LeadershipChange::Expired { token } => {
            println!("{member}: lease of {token} expired, stepping down")
        }
        LeadershipChange::Resigned { token } => println!("{member}: resigned {token}"),
        LeadershipChange::LeaderObserved {
            member: leader,
            token,
            ..
        } => {
            println!("{member}: leader is {leader} with token {token}");
        }
    }
}
