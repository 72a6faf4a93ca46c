//! Writing one transaction marker to a partition of this broker: the one
//! path both the transaction coordinator (for partitions it finds here) and
//! the WriteTxnMarkers handler (for another broker's coordinator) take.
//!
//! A marker for `__consumer_offsets` goes through the group coordinator,
//! which appends it and turns the transaction's pending offsets into
//! committed ones (or drops them) under the partition's writer; any other
//! marker is appended to the partition's local log. The outcomes are kept
//! apart ([`LocalMarkerError`]) because a WriteTxnMarkers answer names each
//! with its own Kafka code, while the coordinator only needs to know whether
//! to drop the marker or retry it ([`MarkerError`]).

use {
    super::{coordinator::MarkerError, state::TopicPartition},
    crate::{
        broker::Broker,
        coordinator::group::{GroupError, OFFSETS_TOPIC},
        partition::LEADER_EPOCH,
    },
    kafka_protocol::error::ResponseError,
    krabka_log::{ControlMarker, LogError},
};

/// Why a marker was not written here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocalMarkerError {
    /// No such topic or partition (UNKNOWN_TOPIC_OR_PARTITION): the marker
    /// is moot.
    #[error("unknown topic or partition")]
    UnknownPartition,
    /// A classic partition the cluster assigned to another broker
    /// (NOT_LEADER_OR_FOLLOWER).
    #[error("the partition is assigned to another broker")]
    NotLeader,
    /// The group coordinator does not own (or has not loaded) that
    /// `__consumer_offsets` partition.
    #[error("{0}")]
    NotCoordinator(String),
    /// The producer moved on (a fenced epoch, a transaction in another
    /// state): the marker is moot, as Kafka drops it.
    #[error("{reason}")]
    Stale {
        /// Kafka's code for it (INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE).
        code: i16,
        /// What the log reported.
        reason: String,
    },
    /// The append failed (a storage error, an offline log, a shutdown).
    #[error("{reason}")]
    Failed {
        /// Kafka's code for it (KAFKA_STORAGE_ERROR, CORRUPT_MESSAGE, …).
        code: i16,
        /// What went wrong.
        reason: String,
    },
}

impl LocalMarkerError {
    /// The per-partition error code of a WriteTxnMarkers answer. A group
    /// coordinator that does not own the partition answers
    /// NOT_LEADER_OR_FOLLOWER, as Kafka's broker does, so the transaction
    /// coordinator looks the owner up again and retries.
    #[must_use]
    pub fn code(&self) -> i16 {
        match self {
            Self::UnknownPartition => ResponseError::UnknownTopicOrPartition.code(),
            Self::NotLeader | Self::NotCoordinator(_) => ResponseError::NotLeaderOrFollower.code(),
            Self::Stale { code, .. } | Self::Failed { code, .. } => *code,
        }
    }
}

impl From<LocalMarkerError> for MarkerError {
    /// Gone (drop the marker) for a partition that does not exist or a
    /// stale producer; anything else is retried.
    fn from(e: LocalMarkerError) -> Self {
        match e {
            LocalMarkerError::UnknownPartition | LocalMarkerError::Stale { .. } => Self::Gone,
            other => Self::Failed(other.to_string()),
        }
    }
}

/// Writes `marker` to `partition` of `broker`. Blocking: call it on the
/// blocking pool; `runtime` runs the group coordinator's (async) write.
///
/// # Errors
///
/// [`LocalMarkerError`] saying why the marker is not in the log: unknown
/// partition, assigned elsewhere, `__consumer_offsets` partition not owned,
/// stale producer, or a failed append.
pub fn write_local_marker(
    broker: &Broker,
    runtime: &tokio::runtime::Handle,
    partition: &TopicPartition,
    marker: ControlMarker,
) -> Result<(), LocalMarkerError> {
    if partition.topic == OFFSETS_TOPIC {
        let groups = broker.groups.get().ok_or_else(|| {
            LocalMarkerError::NotCoordinator("the group coordinator has not started".into())
        })?;
        return runtime
            .block_on(groups.write_txn_marker(partition.partition, marker))
            .map_err(|e| {
                let error = group_error(e);
                if let LocalMarkerError::Stale { reason, .. } = &error {
                    tracing::warn!(%reason, "dropping a stale transaction marker");
                }
                error
            });
    }
    let Some(target) = broker.partitions.get(&partition.topic, partition.partition) else {
        let code = broker.missing_partition(&partition.topic, partition.partition);
        return Err(match code {
            ResponseError::UnknownTopicOrPartition => LocalMarkerError::UnknownPartition,
            ResponseError::NotLeaderOrFollower => LocalMarkerError::NotLeader,
            other => LocalMarkerError::Failed {
                code: other.code(),
                reason: format!("{}-{} is offline", partition.topic, partition.partition),
            },
        });
    };
    match target
        .local_log()
        .append_control_marker(marker, LEADER_EPOCH)
    {
        Ok(_) => {
            target.notify_appended();
            Ok(())
        }
        Err(e @ (LogError::InvalidProducerEpoch { .. } | LogError::InvalidTxnState { .. })) => {
            tracing::warn!(partition = ?target, error = %e, "dropping a stale transaction marker");
            Err(LocalMarkerError::Stale {
                code: e.kafka_error_code(),
                reason: e.to_string(),
            })
        }
        Err(e) => Err(LocalMarkerError::Failed {
            code: e.kafka_error_code(),
            reason: e.to_string(),
        }),
    }
}

fn group_error(e: GroupError) -> LocalMarkerError {
    match e {
        GroupError::NotCoordinator { .. } => LocalMarkerError::NotCoordinator(e.to_string()),
        GroupError::Refused { code, reason, .. } => LocalMarkerError::Stale { code, reason },
        GroupError::Log { .. } => LocalMarkerError::Failed {
            code: ResponseError::KafkaStorageError.code(),
            reason: e.to_string(),
        },
        GroupError::Malformed(_) | GroupError::UnsupportedVersion { .. } => {
            LocalMarkerError::Failed {
                code: ResponseError::UnknownServerError.code(),
                reason: e.to_string(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn codes_and_the_coordinators_meaning() {
        let stale = LocalMarkerError::Stale {
            code: 47,
            reason: "fenced".into(),
        };
        let failed = LocalMarkerError::Failed {
            code: 56,
            reason: "disk".into(),
        };
        check!(LocalMarkerError::UnknownPartition.code() == 3);
        check!(LocalMarkerError::NotLeader.code() == 6);
        check!(LocalMarkerError::NotCoordinator("x".into()).code() == 6);
        check!(stale.code() == 47);
        check!(failed.code() == 56);
        check!(MarkerError::from(LocalMarkerError::UnknownPartition) == MarkerError::Gone);
        check!(MarkerError::from(stale) == MarkerError::Gone);
        check!(matches!(
            MarkerError::from(LocalMarkerError::NotLeader),
            MarkerError::Failed(_)
        ));
        check!(MarkerError::from(failed) == MarkerError::Failed("disk".into()));
        check!(
            group_error(GroupError::Refused {
                partition: 1,
                code: 47,
                reason: "old".into()
            }) == LocalMarkerError::Stale {
                code: 47,
                reason: "old".into()
            }
        );
        check!(group_error(GroupError::NotCoordinator { partition: 1 }).code() == 6);
        check!(
            group_error(GroupError::Log {
                partition: 1,
                reason: "io".into()
            })
            .code()
                == 56
        );
    }
}
