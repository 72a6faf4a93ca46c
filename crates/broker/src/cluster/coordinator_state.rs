//! The coordinators' persistence seams over the cluster database.
//!
//! In cluster mode `__consumer_offsets` and `__transaction_state` are not
//! topics of any broker: each partition is a shard whose records live in
//! the database's coordinator-state tables (`krabka_cluster::state`), keyed
//! as the compacted topics are keyed, so whichever broker takes a shard
//! loads the same state the last owner wrote. Every write presents this
//! broker's lease on the shard, and the database refuses it once another
//! broker has taken the shard: a deposed owner cannot write, which is what
//! makes moving a coordinator safe.

use {
    super::ClusterNode,
    crate::coordinator::{
        group::{GroupError, GroupLog, GroupLogEntry, GroupLogRecord},
        state_topic::CoordinatorRecord,
        txn::{TxnError, TxnStateLog},
    },
    async_trait::async_trait,
    bytes::Bytes,
    kafka_protocol::ResponseError,
    krabka_cluster::{
        ClusterError, ShardId, ShardKind, ShardLease,
        state::{PendingMarker, StateRecord, StoredEntry},
    },
    krabka_ids::{ProducerEpoch, ProducerId},
    krabka_log::ControlMarker,
    std::sync::Arc,
};

/// `__consumer_offsets` in the cluster database.
#[derive(Debug)]
pub struct DbGroupLog {
    node: Arc<ClusterNode>,
}

impl DbGroupLog {
    /// The group coordinator's log of the cluster `node` belongs to.
    #[must_use]
    pub fn new(node: Arc<ClusterNode>) -> Self {
        Self { node }
    }

    fn lease(&self, partition: i32) -> Result<ShardLease, GroupError> {
        self.node
            .shard_lease(ShardId::new(ShardKind::ConsumerOffsets, partition))
            .ok_or(GroupError::NotCoordinator { partition })
    }
}

fn state_records(records: &[GroupLogRecord]) -> Vec<StateRecord> {
    records
        .iter()
        .map(|r| StateRecord {
            key: r.key.to_vec(),
            value: r.value.as_ref().map(|v| v.to_vec()),
        })
        .collect()
}

/// A database refusal as the group coordinator reports it.
fn group_error(partition: i32, e: ClusterError) -> GroupError {
    match e {
        ClusterError::Fenced(_) => GroupError::NotCoordinator { partition },
        e @ ClusterError::ProducerFenced { .. } => GroupError::Refused {
            partition,
            code: ResponseError::InvalidProducerEpoch.code(),
            reason: e.to_string(),
        },
        e @ ClusterError::CoordinatorFenced { .. } => GroupError::Refused {
            partition,
            code: ResponseError::TransactionCoordinatorFenced.code(),
            reason: e.to_string(),
        },
        e => GroupError::Log {
            partition,
            reason: e.to_string(),
        },
    }
}

fn loaded_record(
    offset: i64,
    key: Vec<u8>,
    value: Option<Vec<u8>>,
    producer_id: Option<ProducerId>,
) -> GroupLogEntry {
    GroupLogEntry::Record {
        offset,
        record: CoordinatorRecord {
            key: Bytes::from(key),
            value: value.map(Bytes::from),
            // The tables keep no record timestamps; the values carry theirs.
            timestamp_ms: 0,
        },
        producer_id,
    }
}

#[async_trait]
impl GroupLog for DbGroupLog {
    async fn append(
        &self,
        partition: i32,
        records: Vec<GroupLogRecord>,
        producer: Option<(ProducerId, ProducerEpoch)>,
    ) -> Result<i64, GroupError> {
        let lease = self.lease(partition)?;
        let records = state_records(&records);
        let cluster = self.node.cluster();
        match producer {
            Some(producer) => cluster.write_pending(&lease, producer, &records).await,
            None => cluster.write_state(&lease, &records).await,
        }
        .map_err(|e| group_error(partition, e))
    }

    async fn append_marker(
        &self,
        partition: i32,
        marker: ControlMarker,
    ) -> Result<i64, GroupError> {
        let lease = self.lease(partition)?;
        let marker = PendingMarker {
            producer: marker.producer_id,
            epoch: marker.producer_epoch,
            coordinator_epoch: marker.coordinator_epoch,
            commit: marker.commit,
        };
        self.node
            .cluster()
            .complete_pending(&lease, &marker)
            .await
            .map(|_| -1)
            .map_err(|e| group_error(partition, e))
    }

    async fn read_all(&self, partition: i32) -> Result<Vec<GroupLogEntry>, GroupError> {
        let shard = ShardId::new(ShardKind::ConsumerOffsets, partition);
        let stored = self
            .node
            .cluster()
            .read_state(shard)
            .await
            .map_err(|e| group_error(partition, e))?;
        Ok(stored
            .into_iter()
            .map(|entry| match entry {
                StoredEntry::Committed { seq, key, value } => {
                    loaded_record(seq, key, Some(value), None)
                }
                StoredEntry::Pending {
                    seq,
                    producer,
                    key,
                    value,
                    ..
                } => loaded_record(seq, key, value, Some(producer)),
            })
            .collect())
    }
}

/// `__transaction_state` in the cluster database. Blocking, as the
/// transaction coordinator's seam is: each call waits on the runtime from
/// the blocking pool.
#[derive(Debug)]
pub struct DbTxnStateLog {
    node: Arc<ClusterNode>,
    runtime: tokio::runtime::Handle,
}

impl DbTxnStateLog {
    /// The transaction coordinator's log of the cluster `node` belongs to.
    #[must_use]
    pub fn new(node: Arc<ClusterNode>, runtime: tokio::runtime::Handle) -> Self {
        Self { node, runtime }
    }
}

fn txn_error(partition: i32, e: &ClusterError) -> TxnError {
    TxnError::NotCoordinator(format!("__transaction_state-{partition}: {e}"))
}

impl TxnStateLog for DbTxnStateLog {
    fn append(&self, partition: i32, record: CoordinatorRecord) -> Result<(), TxnError> {
        let lease = self
            .node
            .shard_lease(ShardId::new(ShardKind::TransactionState, partition))
            .ok_or_else(|| {
                TxnError::NotCoordinator(format!(
                    "this broker does not hold __transaction_state-{partition}"
                ))
            })?;
        let record = StateRecord {
            key: record.key.to_vec(),
            value: record.value.map(|v| v.to_vec()),
        };
        self.runtime
            .block_on(self.node.cluster().write_state(&lease, &[record]))
            .map(|_| ())
            .map_err(|e| txn_error(partition, &e))
    }

    fn read_all(&self, partition: i32) -> Result<Vec<CoordinatorRecord>, TxnError> {
        let shard = ShardId::new(ShardKind::TransactionState, partition);
        let stored = self
            .runtime
            .block_on(self.node.cluster().read_state(shard))
            .map_err(|e| txn_error(partition, &e))?;
        Ok(stored
            .into_iter()
            .filter_map(|entry| match entry {
                StoredEntry::Committed { key, value, .. } => Some(CoordinatorRecord {
                    key: Bytes::from(key),
                    value: Some(Bytes::from(value)),
                    timestamp_ms: 0,
                }),
                // The transaction coordinator writes no transactional records.
                StoredEntry::Pending { .. } => None,
            })
            .collect())
    }
}
