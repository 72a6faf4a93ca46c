//! Where a partition lives, as Metadata and DescribeTopicPartitions report
//! it: one answer for both, so `kafka-topics.sh --describe` (which uses
//! DescribeTopicPartitions) and producers (which use Metadata) never
//! disagree about a leader.
//!
//! A single node leads every partition it holds and is its only replica.
//! In cluster mode a classic partition lives on the one broker the cluster
//! assigned it to, and a diskless partition on every broker, with one live
//! broker chosen by a stable hash reported as its leader.

use {
    crate::broker::Broker,
    kafka_protocol::{error::ResponseError, messages::BrokerId},
};

/// A partition's leader and replicas as clients are told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The leader, or -1 when none is available.
    pub leader: BrokerId,
    /// Its replicas.
    pub replicas: Vec<BrokerId>,
    /// Its in-sync replicas.
    pub isr: Vec<BrokerId>,
    /// Replicas whose log is offline.
    pub offline: Vec<BrokerId>,
    /// `LEADER_NOT_AVAILABLE` when there is no leader, else 0.
    pub error_code: i16,
}

impl Placement {
    fn led_by(node: BrokerId) -> Self {
        Self {
            leader: node,
            replicas: vec![node],
            isr: vec![node],
            offline: Vec::new(),
            error_code: 0,
        }
    }

    /// No leader: the replicas stay, nothing is in sync.
    fn leaderless(mut self) -> Self {
        self.error_code = ResponseError::LeaderNotAvailable.code();
        self.leader = BrokerId(-1);
        self.isr = Vec::new();
        self
    }
}

/// Where partition `index` of `topic` (id `topic_id`) lives, as this broker
/// reports it.
#[must_use]
pub fn placement(broker: &Broker, topic: &str, topic_id: uuid::Uuid, index: i32) -> Placement {
    let node = BrokerId(broker.config.node_id);
    let cluster = broker
        .cluster
        .get()
        .filter(|_| !crate::topics::names::is_internal(topic));
    if let Some(c) = cluster {
        if broker.partitions.get_diskless(topic, index).is_some() {
            // Every broker serves it; clients are steered to one live broker.
            let live: Vec<_> = c.live_brokers().iter().map(|b| b.node).collect();
            return match crate::diskless::reported_leader(topic_id, index, &live) {
                Some(leader) => Placement::led_by(BrokerId(leader.0)),
                None => Placement::led_by(node).leaderless(),
            };
        }
        if let Some(owner) = c.assigned(topic, index) {
            // The partition's one broker, while it is live.
            let placed = Placement::led_by(BrokerId(owner.0));
            return if c.is_live(owner) {
                placed
            } else {
                placed.leaderless()
            };
        }
    }
    let mut placed = Placement::led_by(node);
    if !broker.partitions.contains(topic, index) {
        let offline = broker.partitions.offline_reason(topic, index).is_some();
        placed.error_code = ResponseError::LeaderNotAvailable.code();
        placed.leader = BrokerId(-1);
        if offline {
            // Its only replica's log could not be opened (Kafka's replica
            // on a failed log directory).
            placed.isr = Vec::new();
            placed.offline = vec![node];
        }
    }
    placed
}
