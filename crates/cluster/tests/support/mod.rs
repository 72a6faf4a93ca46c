//! What the store tests share: a fresh database and cluster per test, and
//! brokers registered with a given lease.

#![allow(dead_code)]

use {
    krabka_cluster::{
        BrokerLease, BrokerRegistration, Cluster, DatabaseConfig, LeaseTiming, ShardLease,
    },
    krabka_ids::BrokerId,
    krabka_test_support::TestDatabase,
    std::time::{Duration, Instant},
};

/// A long lease: nothing expires during a test unless the test expires it.
pub const LONG: LeaseTiming = LeaseTiming {
    duration: Duration::from_secs(600),
    renew_interval: Duration::from_secs(100),
    safety_margin: Duration::from_secs(10),
};

/// A fresh database with the schema applied, or `None` when no PostgreSQL
/// is available outside CI.
pub async fn cluster() -> Option<(TestDatabase, Cluster)> {
    let db = TestDatabase::create().await?;
    let cluster = Cluster::connect(&DatabaseConfig::new(db.url()))
        .await
        .expect("connect and migrate");
    Some((db, cluster))
}

/// Registration details for node `node`.
pub fn registration(node: i32) -> BrokerRegistration {
    BrokerRegistration {
        node: BrokerId(node),
        rack: None,
        listeners: format!("PLAINTEXT://127.0.0.1:{}", 9000 + node),
        incarnation: uuid::Uuid::new_v4(),
    }
}

/// Registers node `node` with a long lease.
pub async fn register(cluster: &Cluster, node: i32) -> BrokerLease {
    cluster
        .register_broker(&registration(node), &LONG)
        .await
        .expect("register")
}

/// Makes `lease` lapse now, as if its holder had stopped renewing long ago.
pub async fn expire_shard(cluster: &Cluster, lease: &ShardLease) {
    let conn = cluster.database().connection().await.expect("connection");
    conn.execute(
        "UPDATE shard_leases SET expires_at = clock_timestamp() - interval '1 millisecond'
         WHERE kind = $1 AND shard = $2",
        &[&lease.shard.kind.as_str(), &lease.shard.partition],
    )
    .await
    .expect("expire");
}

/// Makes `broker`'s registration lapse now.
pub async fn expire_broker(cluster: &Cluster, broker: &BrokerLease) {
    let conn = cluster.database().connection().await.expect("connection");
    conn.execute(
        "UPDATE brokers SET lease_expires_at = clock_timestamp() - interval '1 millisecond'
         WHERE node_id = $1",
        &[&broker.node.0],
    )
    .await
    .expect("expire");
}

/// Polls `check` until it holds, failing with `what` after 30 seconds.
pub async fn eventually<F: AsyncFnMut() -> bool>(what: &str, mut check: F) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
