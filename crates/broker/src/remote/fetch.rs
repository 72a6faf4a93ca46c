//! The fetch path's hook into the remote tier: a read that the local log
//! refused as out of range, for an offset below the local log start but at
//! or above the partition's log start, is answered from the remote tier.

use {
    crate::{broker::Broker, partition::Partition},
    krabka_log::{LogError, ReadInfo},
};

/// Turns a local read of `offset` into the answer the client gets, and the
/// log start offset to report: unchanged for partitions that are not tiered
/// or offsets the local log holds; from the remote tier for offsets below the
/// local log start. A failing remote tier gives `KAFKA_STORAGE_ERROR`, which
/// clients retry.
pub async fn below_local_start(
    broker: &Broker,
    partition: &Partition,
    offset: i64,
    max_bytes: usize,
    min_one_batch: bool,
    log_start: i64,
    local: Result<ReadInfo, LogError>,
) -> (i64, Result<ReadInfo, LogError>) {
    let Some(rlm) = broker.remote.get() else {
        return (log_start, local);
    };
    let start = rlm.log_start_offset(partition);
    let local_start = partition.log.log_start_offset();
    if offset < local_start
        && !rlm.is_loaded(partition)
        && super::RemoteLogManager::is_tiered(broker, partition)
    {
        // Remote metadata not loaded yet (just after start): retriable.
        return (
            start,
            Err(unavailable(
                partition,
                "remote log metadata is still loading",
            )),
        );
    }
    let below_local = matches!(local, Err(LogError::OffsetOutOfRange { .. }))
        && offset >= start
        && offset < partition.log.log_start_offset();
    if !below_local {
        return (start, local);
    }
    let log_end_offset = partition.log.log_end_offset();
    match rlm.read(partition, offset, max_bytes, min_one_batch).await {
        Ok(records) => (
            start,
            Ok(ReadInfo {
                records,
                log_start_offset: start,
                log_end_offset,
            }),
        ),
        Err(e) => {
            tracing::warn!(partition = ?partition, offset, error = %e, "remote fetch failed");
            (start, Err(unavailable(partition, &e.to_string())))
        }
    }
}

/// `KAFKA_STORAGE_ERROR` (retriable) for an offset the remote tier cannot serve now.
fn unavailable(partition: &Partition, reason: &str) -> LogError {
    LogError::Io {
        path: partition.log.dir().to_owned(),
        source: std::io::Error::other(reason.to_owned()),
    }
}
