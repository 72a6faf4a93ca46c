//! Which broker Metadata names as a diskless partition's leader in cluster
//! mode.
//!
//! Every broker accepts produce and fetch for a diskless partition, so the
//! leader reported to clients only steers them: one live broker per
//! partition, chosen by rendezvous hashing over the live brokers. Every
//! broker computes the same answer from the same live set without asking
//! anyone; partitions spread evenly (and with them clients and the block
//! caches they warm); when a broker dies only its partitions move, each to
//! the live broker that ranks next.
//!
//! The same choice says which broker *reports* a partition where Kafka
//! reports a replica: DescribeLogDirs entries and per-partition metrics
//! ([`ReportedHere`]). Every broker could answer for every diskless
//! partition, but tools and dashboards sum over brokers, and would then
//! count each partition once per broker.

use {crate::broker::Broker, krabka_ids::BrokerId, uuid::Uuid};

/// SplitMix64's finalizer: a fixed, well-mixed 64-bit hash step.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The broker of `live` reported as the leader of partition `partition`
/// of topic `topic_id`; `None` when no broker is live.
#[must_use]
pub fn reported_leader(topic_id: Uuid, partition: i32, live: &[BrokerId]) -> Option<BrokerId> {
    let (high, low) = topic_id.as_u64_pair();
    let key = mix(high ^ mix(low ^ mix(u64::from(u32::from_ne_bytes(partition.to_ne_bytes())))));
    live.iter().copied().max_by_key(|node| {
        (
            mix(key ^ u64::from(u32::from_ne_bytes(node.0.to_ne_bytes()))),
            node.0,
        )
    })
}

/// The diskless partitions this broker reports as its own: those Metadata
/// names it the leader (and only replica) of — every one on a single node,
/// in a cluster the ones [`reported_leader`] gives this broker among the
/// live brokers of the moment.
#[derive(Debug, Clone)]
pub struct ReportedHere {
    me: BrokerId,
    /// The live brokers, in cluster mode.
    live: Option<Vec<BrokerId>>,
}

impl ReportedHere {
    /// The choice as `broker` sees its cluster now.
    #[must_use]
    pub fn of(broker: &Broker) -> Self {
        Self {
            me: BrokerId(broker.config.node_id),
            live: broker
                .cluster
                .get()
                .map(|c| c.live_brokers().iter().map(|b| b.node).collect()),
        }
    }

    /// Whether this broker reports partition `partition` of `topic_id`.
    #[must_use]
    pub fn contains(&self, topic_id: Uuid, partition: i32) -> bool {
        self.live
            .as_ref()
            .is_none_or(|live| reported_leader(topic_id, partition, live) == Some(self.me))
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check, std::collections::BTreeMap};

    #[test]
    fn spread_evenly_and_only_a_dead_brokers_partitions_move() {
        let topic = Uuid::from_u128(0x1234_5678_9abc_def0_1234_5678_9abc_def0);
        let three = [BrokerId(1), BrokerId(2), BrokerId(3)];
        let before: Vec<_> = (0..300)
            .map(|p| reported_leader(topic, p, &three).unwrap())
            .collect();
        let mut counts: BTreeMap<BrokerId, usize> = BTreeMap::new();
        for leader in &before {
            *counts.entry(*leader).or_default() += 1;
        }
        check!(counts.len() == 3);
        check!(
            counts.values().all(|n| (70..=130).contains(n)),
            "{counts:?}"
        );
        // The order of the live list does not matter.
        let shuffled = [BrokerId(3), BrokerId(1), BrokerId(2)];
        for (p, leader) in (0..).zip(&before) {
            check!(reported_leader(topic, p, &shuffled) == Some(*leader));
        }
        // Broker 2 dies: its partitions move, the others stay.
        let two = [BrokerId(1), BrokerId(3)];
        for (p, old) in (0..).zip(&before) {
            let new = reported_leader(topic, p, &two).unwrap();
            if *old == BrokerId(2) {
                check!(new != BrokerId(2));
            } else {
                check!(new == *old);
            }
        }
        check!(reported_leader(topic, 0, &[]).is_none());
    }

    #[test]
    fn each_partition_is_reported_by_exactly_one_live_broker() {
        let topic = Uuid::from_u128(77);
        let live = vec![BrokerId(1), BrokerId(2), BrokerId(3)];
        let views: Vec<_> = live
            .iter()
            .map(|me| ReportedHere {
                me: *me,
                live: Some(live.clone()),
            })
            .collect();
        for p in 0..50 {
            let reporters = views.iter().filter(|v| v.contains(topic, p)).count();
            check!(reporters == 1, "partition {p}");
        }
        let single = ReportedHere {
            me: BrokerId(1),
            live: None,
        };
        check!((0..50).all(|p| single.contains(topic, p)));
        // A broker that is not live (yet) reports nothing.
        let outside = ReportedHere {
            me: BrokerId(9),
            live: Some(live),
        };
        check!((0..50).all(|p| !outside.contains(topic, p)));
    }
}
