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
