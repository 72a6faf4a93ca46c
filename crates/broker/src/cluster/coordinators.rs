//! Where clients find coordinators in cluster mode, for now.
//!
//! Until coordinator shards move by lease (each partition of
//! `__consumer_offsets` / `__transaction_state` owned by whoever holds its
//! lease), every group and transaction is coordinated by one broker — the
//! controller — so all clients of a group meet in one place. Its state
//! stays on that broker's disk; moving it with the lease is the next step.

use {
    super::ClusterNode,
    kafka_protocol::{
        messages::{BrokerId, FindCoordinatorResponse},
        protocol::StrBytes,
    },
};

/// Rewrites the successful answers of a FindCoordinator response to name
/// the controller (unchanged when this broker is the controller, or no
/// controller is known).
pub fn point_at_controller(node: &ClusterNode, response: &mut FindCoordinatorResponse) {
    let Some(controller) = node.controller() else {
        return;
    };
    if controller == node.node() {
        return;
    }
    let Some((host, port)) = node
        .live_brokers()
        .into_iter()
        .find(|b| b.node == controller)
        .and_then(|b| super::listener_address(&b.listeners))
    else {
        return;
    };
    if response.error_code == 0 && response.node_id.0 >= 0 {
        response.node_id = BrokerId(controller.0);
        response.host = StrBytes::from_string(host.clone());
        response.port = port;
    }
    for c in &mut response.coordinators {
        if c.error_code == 0 && c.node_id.0 >= 0 {
            c.node_id = BrokerId(controller.0);
            c.host = StrBytes::from_string(host.clone());
            c.port = port;
        }
    }
}
