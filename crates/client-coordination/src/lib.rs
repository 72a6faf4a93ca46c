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
