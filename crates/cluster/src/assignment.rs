//! Where a classic partition lives: one live broker per partition,
//! spread across brokers and racks.
//!
//! As Kafka's rack-aware assignment does, the brokers are put in an order
//! that alternates racks (the first broker of each rack, then the second of
//! each, …), and partitions go round-robin over that order from a starting
//! index the caller picks (Kafka picks it at random, so that many small
//! topics do not all start on the same broker).

use {crate::brokers::BrokerInfo, krabka_ids::BrokerId, std::collections::BTreeMap};

/// The brokers of `live` in rack-alternating order (brokers without a rack
/// form one rack of their own).
#[must_use]
pub fn rack_alternating(live: &[BrokerInfo]) -> Vec<BrokerId> {
    let mut racks: BTreeMap<Option<&str>, Vec<BrokerId>> = BTreeMap::new();
    for broker in live {
        racks
            .entry(broker.rack.as_deref())
            .or_default()
            .push(broker.node);
    }
    for nodes in racks.values_mut() {
        nodes.sort();
    }
    let deepest = racks.values().map(Vec::len).max().unwrap_or(0);
    (0..deepest)
        .flat_map(|i| {
            racks
                .values()
                .filter_map(move |nodes| nodes.get(i).copied())
        })
        .collect()
}

/// Brokers for `count` partitions (the new ones, numbered from
/// `first_partition`), spread over `live` from `start`.
///
/// Returns `None` when there is no live broker.
#[must_use]
pub fn assign(
    live: &[BrokerInfo],
    first_partition: i32,
    count: i32,
    start: usize,
) -> Option<Vec<BrokerId>> {
    let order = rack_alternating(live);
    if order.is_empty() {
        return None;
    }
    Some(
        (first_partition..first_partition.saturating_add(count.max(0)))
            .map(|p| order[(start + p.unsigned_abs() as usize) % order.len()])
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::BrokerEpoch;

    fn broker(node: i32, rack: Option<&str>) -> BrokerInfo {
        BrokerInfo {
            node: BrokerId(node),
            rack: rack.map(str::to_owned),
            listeners: String::new(),
            epoch: BrokerEpoch(1),
            live: true,
            remaining_ms: 1000,
        }
    }

    #[test]
    fn racks_alternate() {
        let live = [
            broker(1, Some("a")),
            broker(2, Some("a")),
            broker(3, Some("b")),
            broker(4, Some("b")),
            broker(5, Some("c")),
        ];
        let order: Vec<i32> = rack_alternating(&live).iter().map(|b| b.0).collect();
        assert_eq!(order, [1, 3, 5, 2, 4]);
    }

    #[test]
    fn partitions_spread_evenly_from_the_start_index() {
        let live = [broker(1, None), broker(2, None), broker(3, None)];
        let got: Vec<i32> = assign(&live, 0, 6, 1)
            .unwrap()
            .iter()
            .map(|b| b.0)
            .collect();
        assert_eq!(got, [2, 3, 1, 2, 3, 1]);
        let more: Vec<i32> = assign(&live, 6, 2, 1)
            .unwrap()
            .iter()
            .map(|b| b.0)
            .collect();
        assert_eq!(more, [2, 3]);
        assert!(assign(&[], 0, 3, 0).is_none());
    }
}
