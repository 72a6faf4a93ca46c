//! `krabka cluster status`: what the cluster database says about brokers,
//! leases and coordinator shard owners, read straight from the database (so
//! it works while every broker is down).

use {
    krabka_cluster::{BrokerInfo, Cluster, ClusterError, DatabaseConfig, ShardOwner},
    std::fmt::Write as _,
};

/// Everything the command prints.
#[derive(Debug)]
pub struct Status {
    /// The cluster id.
    pub cluster_id: String,
    /// The metadata version.
    pub metadata_version: i64,
    /// Every broker that ever registered.
    pub brokers: Vec<BrokerInfo>,
    /// Every shard lease row.
    pub shards: Vec<ShardOwner>,
    /// Topic count.
    pub topics: usize,
}

/// Reads the status from the database at `config`.
///
/// # Errors
///
/// [`ClusterError`] when the database cannot be reached or read.
pub async fn status(config: &DatabaseConfig) -> Result<Status, ClusterError> {
    let cluster = Cluster::connect(config).await?;
    let metadata = cluster.load_metadata().await?;
    Ok(Status {
        cluster_id: cluster.cluster_id().to_owned(),
        metadata_version: metadata.version,
        brokers: cluster.brokers().await?,
        shards: cluster.shard_owners().await?,
        topics: metadata.topics.len(),
    })
}

/// The status as text: a broker table, then one line per shard kind with
/// each owner's shards.
#[must_use]
pub fn render(status: &Status) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "cluster id:       {}", status.cluster_id);
    let _ = writeln!(out, "metadata version: {}", status.metadata_version);
    let _ = writeln!(out, "topics:           {}", status.topics);
    let _ = writeln!(out, "\nbrokers:");
    let _ = writeln!(
        out,
        "  {:>6}  {:<5}  {:>6}  {:>10}  {:<10}  listeners",
        "node", "state", "epoch", "lease ms", "rack"
    );
    for b in &status.brokers {
        let _ = writeln!(
            out,
            "  {:>6}  {:<5}  {:>6}  {:>10}  {:<10}  {}",
            b.node.0,
            if b.live { "live" } else { "down" },
            b.epoch.0,
            b.remaining_ms,
            b.rack.as_deref().unwrap_or("-"),
            b.listeners
        );
    }
    let _ = writeln!(out, "\nshard leases:");
    let _ = writeln!(
        out,
        "  {:<24}  {:>5}  {:<6}  {:>6}  {:>10}",
        "shard", "", "owner", "epoch", "lease ms"
    );
    for s in &status.shards {
        let _ = writeln!(
            out,
            "  {:<24}  {:>5}  {:<6}  {:>6}  {:>10}",
            s.shard.kind.as_str(),
            s.shard.partition,
            match (s.owner, s.live) {
                (Some(o), true) => o.0.to_string(),
                _ => "-".to_owned(),
            },
            s.epoch.0,
            s.remaining_ms
        );
    }
    out
}
