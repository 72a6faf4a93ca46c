//! Leader election for Kafka clients, with fencing enforced by the broker.
//!
//! A role (`controller`, `compactor`, ...) is held by at most one member at a
//! time. The leadership epoch of a role is the producer epoch that the
//! transaction coordinator mints for `transactional.id = <role>`: taking the
//! role bumps that epoch, and from then on the broker refuses every write of
//! the previous holder. Leases in the compacted topic `__coordination_state`
//! only tell standbys when to challenge; the broker, not the lease, stops a
//! deposed leader.
//!
//! * [`record`] — roles, members, tokens, leases and their codec;
//! * [`transport`] — the seam to the cluster ([`CoordinationTransport`]);
//! * [`succession`] — the pure rules: rank, challenge time, renewal;
//! * [`leadership`] — the API an application uses: campaign, wait until
//!   elected, renew in the background, resign, watch changes;
//! * [`broker`] — [`broker::BrokerTransport`], the seam over `krabka-client`.
//!
//! # Example
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use krabka_client::{Client, ClientConfig, ProducerRecord};
//! use krabka_client_coordination::{
//!     Coordinator, MemberId, Role, Timing,
//!     broker::{BrokerTransport, BrokerTransportConfig},
//! };
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::connect(&["127.0.0.1:9092"], ClientConfig::default()).await?;
//! let timing = Timing::default();
//! let config = BrokerTransportConfig { lease: timing.lease, ..BrokerTransportConfig::default() };
//! let coordinator = Coordinator::new(Arc::new(BrokerTransport::new(client, config)), timing)?;
//!
//! let campaign = coordinator.campaign(Role::new("controller")?, MemberId::new("node-1")?).await?;
//! let token = campaign.elected().await?;
//! // Every write through this producer carries `token`; the broker refuses
//! // it once another member has taken the role.
//! let producer = campaign.producer()?;
//! producer.send_transaction(vec![("events", 0, vec![ProducerRecord::value("hello")])]).await?;
//! println!("wrote under {token}");
//! campaign.resign().await?;
//! # Ok(())
//! # }
//! ```

//!
//! # An election in three terminals
//!
//! The `member` example runs one member of a role and prints every
//! leadership change. Start a broker, then three members with different ids:
//!
//! ```text
//! # terminal 0: a single-node broker on 127.0.0.1:9092
//! cargo run --release -p krabka-broker --bin krabka -- serve
//!
//! # terminals 1, 2 and 3 (node-2 and node-3 likewise)
//! cargo run --release -p krabka-client-coordination --example member -- \
//!     --role controller --member node-1 --lease-ms 4000 --stagger-ms 2000 --renew-ms 1000 \
//!     --write-topic events
//! ```
//!
//! One member prints `ELECTED with token P/E`, the others `leader is node-1
//! with token P/E`; with `--write-topic` the leader also writes a record
//! through its fenced producer every second and prints its offset.
//!
//! * **Failover.** Press Ctrl-Z in the leader's terminal (or `kill -STOP` it) and
//!   wait past the lease: the head of the line prints `ELECTED` with a larger
//!   token. Type `fg` (or `kill -CONT`): the old leader's next write is refused
//!   (`write under P/E refused: fenced: ...`), it prints `DEPOSED` and
//!   registers again at the tail of the line — it does not take the role
//!   back.
//! * **Crash.** `kill -9` the leader's process: the next member in line takes
//!   over once the lease runs out (rank `n` waits `n` staggers more).
//! * **Resign.** Ctrl-C in the leader's terminal writes a released lease, and
//!   the head of the line takes over at once.
//!
//! `tests/three_members.rs` runs exactly this scenario against the `krabka`
//! binary and checks the data topic afterwards.

#![warn(missing_docs)]

#[cfg(test)]
mod sim;

#[cfg(feature = "broker")]
pub mod broker;
pub mod error;
pub mod leadership;
pub mod record;
pub mod succession;
pub mod transport;

pub use error::CoordinationError;
pub use leadership::{
    Authority, Campaign, Clock, Coordinator, LeadershipChange, LeadershipChanges, MemberState,
    SystemClock,
};
pub use record::{
    CoordinationKey, CoordinationRecord, FencingToken, Lease, MemberId, Registration, Role,
};
pub use succession::Timing;
pub use transport::{CoordinationTransport, RoleRecords};
