//! `krabka remote-metadata dump`: print what the cluster's
//! `__remote_log_metadata` topic says about each tiered partition, as the
//! JSON of [`RlmmCacheDump`].
//!
//! The dump is built the way a broker would see it, not by a second reading
//! of the events: the command runs a [`TopicBasedRemoteLogMetadataManager`]
//! over a [`KafkaMetadataEventLog`], assigns it every user partition found in
//! the topic as a follower, waits until each is ready and asks the SPI. The
//! topic does not list its user partitions anywhere, so they are discovered
//! first by one bounded range read of each metadata partition (which needs
//! only `READ` on the topic) and decoding each event's partition.
//!
//! Connecting creates the metadata topic when it is absent, as every
//! [`KafkaMetadataEventLog`] does; on a cluster that never tiered anything
//! the dump is then simply empty. In cluster mode the metadata is not a
//! topic but event logs in the cluster database, which `--database-url`
//! reads instead ([`MetadataSource`]).
//!
//! [`KafkaMetadataEventLog`]: krabka_remote_storage_topic::KafkaMetadataEventLog

use {
    super::metadata_source::{self, MetadataSource, OpenError},
    krabka_remote_storage::{
        RemoteLogMetadataManager, RemoteStorageError, RlmmCacheDump, TopicIdPartition,
    },
    krabka_remote_storage_topic::{
        MetadataEventLog, MetadataLogError, TopicBasedRemoteLogMetadataManager,
        TopicBasedRlmmConfig, serde::RemoteLogMetadataSerde,
    },
    std::{
        collections::BTreeSet,
        sync::Arc,
        time::{Duration, Instant},
    },
    tokio::runtime::Handle,
};

/// What `krabka remote-metadata dump` was asked for.
#[derive(Debug, Clone)]
pub struct DumpRequest {
    /// Where the metadata is read.
    pub source: MetadataSource,
    /// Only partitions of this topic; every topic when `None`.
    pub topic: Option<String>,
    /// How long to wait for the metadata to be read.
    pub timeout: Duration,
}

/// Why a dump could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    /// The metadata topic could not be reached or read.
    #[error("cannot read the remote log metadata topic: {0}")]
    Log(#[from] MetadataLogError),
    /// The metadata manager refused a call.
    #[error("remote log metadata manager: {0}")]
    Manager(#[from] RemoteStorageError),
    /// The cluster did not answer within the timeout.
    #[error("could not reach {0} in time")]
    Unreachable(String),
    /// The cluster database could not be read.
    #[error("cannot read the cluster database: {0}")]
    Database(krabka_cluster::ClusterError),
    /// A partition's metadata was not caught up within the timeout.
    #[error("timed out waiting for the metadata of {0} to be read")]
    NotReady(String),
    /// The blocking part of the dump did not finish.
    #[error("the dump task failed: {0}")]
    Task(String),
}

/// Every user partition named by an event in the metadata topic, sorted and
/// filtered to `topic` when one is given.
///
/// # Errors
///
/// [`DumpError::Log`] when the water marks or a range cannot be read.
pub async fn discover_partitions(
    log: &dyn MetadataEventLog,
    topic: Option<&str>,
) -> Result<Vec<TopicIdPartition>, DumpError> {
    let lows = log.low_water_marks().await?;
    let highs = log.high_water_marks().await?;
    let mut found = BTreeSet::new();
    for (partition, (&low, &high)) in (0..).zip(lows.iter().zip(highs.iter())) {
        if high <= low {
            continue;
        }
        log.visit_range(partition, low, high, &mut |record| {
            if record.tombstone {
                return Ok(());
            }
            // An event that does not decode is skipped here, as the
            // manager's consumer skips it.
            let Ok(event) = RemoteLogMetadataSerde::deserialize(&record.payload) else {
                return Ok(());
            };
            if let Some(tip) = event.topic_id_partition() {
                if topic.is_none_or(|wanted| wanted == tip.topic()) {
                    found.insert(tip.clone());
                }
            }
            Ok(())
        })
        .await?;
    }
    Ok(found.into_iter().collect())
}

/// Read the cluster's remote log metadata and build the dump.
///
/// # Errors
///
/// [`DumpError`] when the cluster cannot be reached, the topic cannot be
/// read, or the metadata is not caught up within `request.timeout`.
pub async fn dump(request: &DumpRequest) -> Result<RlmmCacheDump, DumpError> {
    let opened = metadata_source::open(&request.source, request.timeout)
        .await
        .map_err(|e| match e {
            OpenError::Unreachable(what) => DumpError::Unreachable(what),
            OpenError::Log(e) => DumpError::Log(e),
            OpenError::Database(e) => DumpError::Database(e),
        })?;
    let Some(log) = opened.log() else {
        return Ok(RlmmCacheDump {
            partitions: Vec::new(),
        });
    };
    let result = dump_log(log, request).await;
    opened.close().await;
    result
}

/// [`dump`] of an opened log.
async fn dump_log(
    log: Arc<dyn MetadataEventLog>,
    request: &DumpRequest,
) -> Result<RlmmCacheDump, DumpError> {
    let partitions = tokio::time::timeout(
        request.timeout,
        discover_partitions(log.as_ref(), request.topic.as_deref()),
    )
    .await
    .map_err(|_| DumpError::NotReady("the metadata topic".to_owned()))??;
    let runtime = Handle::current();
    let timeout = request.timeout;
    // The SPI is synchronous and blocks its thread.
    krabka_broker::blocking::run(move || {
        let rlmm = TopicBasedRemoteLogMetadataManager::new(
            log,
            runtime,
            TopicBasedRlmmConfig {
                consume_wait: timeout,
                ..TopicBasedRlmmConfig::default()
            },
        );
        let dumped = collect(&rlmm, &partitions, timeout);
        let closed = rlmm.close();
        let dumped = dumped?;
        closed?;
        Ok(dumped)
    })
    .await
    .map_err(|e| DumpError::Task(e.to_string()))?
}

fn collect(
    rlmm: &TopicBasedRemoteLogMetadataManager,
    partitions: &[TopicIdPartition],
    timeout: Duration,
) -> Result<RlmmCacheDump, DumpError> {
    // Followers: the command only reads, it leads nothing.
    rlmm.on_partition_leadership_changes(&[], partitions)?;
    let deadline = Instant::now() + timeout;
    for partition in partitions {
        while !rlmm.is_ready(partition) {
            if Instant::now() >= deadline {
                return Err(DumpError::NotReady(format!(
                    "{}-{}",
                    partition.topic(),
                    partition.partition()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Ok(RlmmCacheDump::collect(rlmm, partitions)?)
}
