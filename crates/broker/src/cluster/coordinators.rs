//! Coordinators in cluster mode: which broker serves which shard, how a
//! shard moves, and where FindCoordinator sends clients.
//!
//! Each partition of `__consumer_offsets` and `__transaction_state` is a
//! shard owned by the broker holding its lease in the database. A shard's
//! preferred broker is picked among the live brokers by its index, so the
//! shards spread evenly and every broker computes the same spread from the
//! same list. Each renewal round a broker reconciles:
//!
//! 1. shards whose lease it no longer holds (lapsed, or taken after a
//!    pause) stop being served at once;
//! 2. shards it holds but another live broker is preferred for are given
//!    up (served no more, then released in the database), so a broker that
//!    joins or returns gets its share;
//! 3. shards it is preferred for and that are free or expired are acquired
//!    and loaded; until loaded their requests get
//!    `COORDINATOR_LOAD_IN_PROGRESS`.
//!
//! Safety does not rest on this loop being timely: every write is fenced by
//! the lease epoch in the database, and the coordinators stop serving at
//! the lease's local deadline on their own ([`Ownership`]).
//!
//! [`Ownership`]: crate::coordinator::ownership::Ownership

use {
    super::{ClusterNode, markers::MarkerRoute},
    crate::{broker::Broker, coordinator::txn::TopicPartition},
    kafka_protocol::{
        ResponseError,
        messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse},
        protocol::StrBytes,
    },
    krabka_cluster::{ShardId, ShardKind},
    std::{collections::BTreeSet, sync::Arc},
};

/// The shard a coordinator key lives in: `key_type` 0 is a group, 1 a
/// transactional id (FindCoordinator's key types).
fn shard_of(broker: &Broker, key_type: i8, key: &str) -> Option<ShardId> {
    match key_type {
        0 => {
            let groups = broker.groups.get()?;
            Some(ShardId::new(
                ShardKind::ConsumerOffsets,
                groups.partition_for(key),
            ))
        }
        1 => {
            let txns = broker.txns.get()?;
            Some(ShardId::new(
                ShardKind::TransactionState,
                txns.partition_for(key),
            ))
        }
        _ => None,
    }
}

/// Where the owner of `shard` is: its node id and inter-broker address
/// (the client's listener is put in afterwards by the listener fixup).
fn owner_address(node: &ClusterNode, shard: ShardId) -> Option<(i32, String, i32)> {
    let owner = node.shard_owner(shard)?;
    let live = node.live_brokers();
    let info = live.iter().find(|b| b.node == owner)?;
    let (host, port) = super::listener_address(&info.listeners)?;
    Some((owner.0, host, port))
}

/// Rewrites FindCoordinator's successful answers to name each key's shard
/// owner; a key whose shard has no live owner right now is answered
/// `COORDINATOR_NOT_AVAILABLE`, which clients retry.
pub fn point_at_owners(
    broker: &Broker,
    node: &ClusterNode,
    version: i16,
    request: &FindCoordinatorRequest,
    response: &mut FindCoordinatorResponse,
) {
    let key_type = if version >= 1 { request.key_type } else { 0 };
    let locate = |key: &str| shard_of(broker, key_type, key).map(|s| owner_address(node, s));
    let missing = ResponseError::CoordinatorNotAvailable.code();
    if version >= 4 {
        for c in &mut response.coordinators {
            if c.error_code != 0 {
                continue;
            }
            match locate(c.key.as_str()) {
                Some(Some((id, host, port))) => {
                    c.node_id = BrokerId(id);
                    c.host = StrBytes::from_string(host);
                    c.port = port;
                }
                Some(None) => {
                    c.error_code = missing;
                    c.error_message = Some(StrBytes::from_static_str(
                        "the coordinator is moving between brokers",
                    ));
                    c.node_id = BrokerId(-1);
                    c.host = StrBytes::new();
                    c.port = -1;
                }
                None => {}
            }
        }
    } else if response.error_code == 0 {
        match locate(request.key.as_str()) {
            Some(Some((id, host, port))) => {
                response.node_id = BrokerId(id);
                response.host = StrBytes::from_string(host);
                response.port = port;
            }
            Some(None) => {
                response.error_code = missing;
                response.node_id = BrokerId(-1);
                response.host = StrBytes::new();
                response.port = -1;
            }
            None => {}
        }
    }
}

/// Where a transaction marker for `partition` goes in cluster mode: to the
/// live owner of a `__consumer_offsets` shard, to the broker a classic
/// partition is assigned to, locally when that is this broker (or when the
/// partition is not a classic one: diskless partitions are served by every
/// broker). A partition whose broker is not live waits: the marker is
/// retried, never dropped.
#[must_use]
pub fn marker_route(node: &ClusterNode, partition: &TopicPartition) -> MarkerRoute {
    let target = if partition.topic == crate::coordinator::group::OFFSETS_TOPIC {
        let shard = ShardId::new(ShardKind::ConsumerOffsets, partition.partition);
        match node.shard_owner(shard) {
            Some(owner) => owner,
            None => return MarkerRoute::Unavailable(format!("{shard} has no live owner")),
        }
    } else {
        match node.assigned(&partition.topic, partition.partition) {
            Some(owner) => owner,
            None => return MarkerRoute::Local,
        }
    };
    if target == node.node() {
        return MarkerRoute::Local;
    }
    match node.live_brokers().into_iter().find(|b| b.node == target) {
        Some(info) => MarkerRoute::Remote {
            node: target,
            listeners: info.listeners,
        },
        None => MarkerRoute::Unavailable(format!(
            "broker {} holding {}-{} is not live",
            target.0, partition.topic, partition.partition
        )),
    }
}

/// The live broker preferred for `shard`: the shard's index (offset per
/// kind, so group and transaction shards do not pile up alike) among the
/// live node ids in order.
fn preferred(shard: ShardId, live: &[krabka_ids::BrokerId]) -> Option<krabka_ids::BrokerId> {
    let offset = match shard.kind {
        ShardKind::TransactionState => 1,
        _ => 0,
    };
    let n = i64::try_from(live.len()).ok().filter(|n| *n > 0)?;
    let index = (i64::from(shard.partition) + offset).rem_euclid(n);
    live.get(usize::try_from(index).ok()?).copied()
}

/// One reconciliation round (see the module doc): stops serving lost
/// shards, hands on those preferred elsewhere, takes and loads those
/// preferred here.
pub async fn move_shards(node: &Arc<ClusterNode>, broker: &Arc<Broker>) {
    let (Some(groups), Some(txns)) = (broker.groups.get(), broker.txns.get()) else {
        return;
    };
    if let Some(deadline) = node.lease_deadline() {
        groups.ownership().valid_until(deadline);
        txns.ownership().valid_until(deadline);
    }
    let leases = node.shard_leases();
    let leased: BTreeSet<ShardId> = leases.iter().map(|l| l.shard).collect();
    // 1. Lost: served here but no longer leased.
    for p in groups.ownership().held() {
        if !leased.contains(&ShardId::new(ShardKind::ConsumerOffsets, p)) {
            groups.release_partition(p);
        }
    }
    for p in txns.ownership().held() {
        if !leased.contains(&ShardId::new(ShardKind::TransactionState, p)) {
            txns.release_partition(p);
        }
    }
    let mut live: Vec<krabka_ids::BrokerId> = node.live_brokers().iter().map(|b| b.node).collect();
    live.sort_unstable();
    live.dedup();
    if !live.contains(&node.node()) {
        return;
    }
    let all = (0..groups.config().offsets_topic_num_partitions)
        .map(|p| ShardId::new(ShardKind::ConsumerOffsets, p))
        .chain(
            (0..txns.config().state_log_partitions)
                .map(|p| ShardId::new(ShardKind::TransactionState, p)),
        );
    let mut wanted = Vec::new();
    for shard in all {
        let mine = preferred(shard, &live) == Some(node.node());
        match (mine, leases.iter().find(|l| l.shard == shard)) {
            // 2. Handed on: stop serving first, then let go.
            (false, Some(lease)) => {
                match shard.kind {
                    ShardKind::ConsumerOffsets => groups.release_partition(shard.partition),
                    _ => txns.release_partition(shard.partition),
                }
                if let Err(e) = node.release_shard(lease).await {
                    tracing::warn!(%shard, error = %e, "cannot release a shard; it will lapse");
                }
            }
            (true, None) => wanted.push(shard),
            _ => {}
        }
    }
    // 3. Taken: acquire what is free, then load it.
    let won = if wanted.is_empty() {
        Vec::new()
    } else {
        match node.acquire_shards(&wanted).await {
            Ok(won) => won,
            Err(e) => {
                tracing::warn!(error = %e, "cannot acquire coordinator shards");
                Vec::new()
            }
        }
    };
    let mut missing: BTreeSet<ShardId> = leased;
    missing.extend(won.iter().map(|l| l.shard));
    for shard in missing {
        let loaded = match shard.kind {
            ShardKind::ConsumerOffsets if groups.ownership().refusal(shard.partition).is_some() => {
                groups
                    .take_partition(shard.partition)
                    .await
                    .map_err(|e| e.to_string())
            }
            ShardKind::TransactionState if txns.ownership().refusal(shard.partition).is_some() => {
                let txns = Arc::clone(txns);
                // Markers carry the lease epoch, so partitions refuse those
                // of a coordinator deposed by a later lease.
                let epoch = node
                    .shard_lease(shard)
                    .map_or(0, |l| i32::try_from(l.epoch.0).unwrap_or(i32::MAX));
                crate::blocking::run(move || txns.take_partition(shard.partition, epoch))
                    .await
                    .map_err(|e| e.to_string())
                    .and_then(|r| r.map_err(|e| e.to_string()))
            }
            _ => Ok(()),
        };
        if let Err(reason) = loaded {
            tracing::warn!(%shard, %reason, "cannot load a coordinator shard; giving it up");
            if let Some(lease) = node.shard_lease(shard) {
                let _ = node.release_shard(&lease).await;
            }
        }
    }
    let owned = |kind| {
        node.shard_leases()
            .iter()
            .filter(|l| l.shard.kind == kind)
            .count() as f64
    };
    metrics::gauge!("krabka_cluster_owned_shards", "kind" => "group")
        .set(owned(ShardKind::ConsumerOffsets));
    metrics::gauge!("krabka_cluster_owned_shards", "kind" => "transaction")
        .set(owned(ShardKind::TransactionState));
}

#[cfg(test)]
mod tests {
    use {
        super::preferred,
        krabka_cluster::{ShardId, ShardKind},
        krabka_ids::BrokerId,
    };

    #[test]
    fn shards_spread_evenly_over_the_live_brokers() {
        let live = [BrokerId(1), BrokerId(2), BrokerId(5)];
        let mut count = std::collections::HashMap::new();
        for kind in [ShardKind::ConsumerOffsets, ShardKind::TransactionState] {
            for p in 0..50 {
                let owner = preferred(ShardId::new(kind, p), &live);
                *count.entry(owner).or_insert(0) += 1;
            }
        }
        assert_eq!(count.len(), 3);
        assert!(count.values().all(|n| (33..=34).contains(n)), "{count:?}");
        assert_eq!(
            preferred(ShardId::new(ShardKind::ConsumerOffsets, 0), &[]),
            None
        );
    }
}
