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

use {krabka_ids::BrokerId, uuid::Uuid};

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
}
