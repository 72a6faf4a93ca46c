//! Transactions v2 in a cluster: partitions added to a transaction whose
//! coordinator is another broker.
//!
//! Under KIP-890's transactions v2 the client sends no AddPartitionsToTxn;
//! the broker that takes a transactional Produce (v12+), or the group
//! coordinator that takes a TxnOffsetCommit (v5), adds the partition. When
//! the transactional id's `__transaction_state` shard is leased by another
//! broker, this module asks that broker with AddPartitionsToTxn v5 over its
//! inter-broker listener — the call Kafka's `AddPartitionsToTxnManager`
//! makes — and the write waits for the answer, so the coordinator knows
//! every partition it must send a marker to before any batch of it lands.
//!
//! The call goes out once per request (all its partitions together); a
//! partition already in the transaction costs the coordinator no write.

use {
    super::ClusterNode,
    crate::{
        broker::Broker,
        coordinator::txn::{TopicPartition, TxnError},
    },
    kafka_protocol::{
        error::ResponseError,
        messages::{
            AddPartitionsToTxnRequest, ProducerId as WireProducerId, TopicName, TransactionalId,
            add_partitions_to_txn_request::{
                AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
            },
        },
        protocol::StrBytes,
    },
    krabka_cluster::{ShardId, ShardKind},
    krabka_ids::{ProducerEpoch, ProducerId},
};

/// The AddPartitionsToTxn version sent: the broker-to-coordinator form
/// that adds (not only verifies), as Kafka 4 sends it for transactions v2.
pub const ADD_PARTITIONS_VERSION: i16 = 5;

/// Adds `partitions` to the open transaction of `transactional_id` (whose
/// state lives in `__transaction_state` partition `txn_partition`) on the
/// broker leasing that shard.
///
/// # Errors
///
/// What the coordinator answered, as the local coordinator would fail
/// ([`TxnError::ProducerFenced`], [`TxnError::ConcurrentTransactions`],
/// ...); [`TxnError::NotCoordinator`] when the shard has no live owner,
/// is moving to this broker, or the call failed (the client retries).
pub async fn add_on_coordinator(
    broker: &Broker,
    node: &ClusterNode,
    transactional_id: &str,
    txn_partition: i32,
    producer: (ProducerId, ProducerEpoch),
    partitions: &[TopicPartition],
) -> Result<(), TxnError> {
    let shard = ShardId::new(ShardKind::TransactionState, txn_partition);
    let owner = node
        .shard_owner(shard)
        .ok_or_else(|| TxnError::NotCoordinator(format!("{shard} has no live owner")))?;
    if owner == node.node() {
        return Err(TxnError::NotCoordinator(format!(
            "{shard} is being loaded here"
        )));
    }
    let listeners = node
        .live_brokers()
        .into_iter()
        .find(|b| b.node == owner)
        .map(|b| b.listeners)
        .ok_or_else(|| {
            TxnError::NotCoordinator(format!("broker {} holding {shard} is not live", owner.0))
        })?;
    let request = request(transactional_id, producer, partitions);
    tracing::debug!(
        transactional_id,
        owner = owner.0,
        ?partitions,
        "adding partitions on the coordinator"
    );
    let answer = broker
        .peers()
        .call(
            owner,
            &listeners,
            &request,
            ADD_PARTITIONS_VERSION..=ADD_PARTITIONS_VERSION,
        )
        .await
        .map_err(TxnError::NotCoordinator)?;
    let codes = std::iter::once(answer.error_code).chain(
        answer
            .results_by_transaction
            .iter()
            .flat_map(|t| &t.topic_results)
            .flat_map(|t| &t.results_by_partition)
            .map(|p| p.partition_error_code),
    );
    let outcome = match codes.into_iter().find(|code| *code != 0) {
        None => Ok(()),
        Some(code) => Err(error_of(code, owner.0)),
    };
    tracing::debug!(
        transactional_id,
        owner = owner.0,
        ?outcome,
        "partitions added on the coordinator"
    );
    outcome
}

/// The AddPartitionsToTxn v5 request adding `partitions` for `producer`.
fn request(
    transactional_id: &str,
    producer: (ProducerId, ProducerEpoch),
    partitions: &[TopicPartition],
) -> AddPartitionsToTxnRequest {
    let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
    for tp in partitions {
        match topics.iter_mut().find(|t| t.name.0.as_str() == tp.topic) {
            Some(topic) => topic.partitions.push(tp.partition),
            None => {
                let mut topic = AddPartitionsToTxnTopic::default();
                topic.name = TopicName(StrBytes::from_string(tp.topic.clone()));
                topic.partitions = vec![tp.partition];
                topics.push(topic);
            }
        }
    }
    let mut txn = AddPartitionsToTxnTransaction::default();
    txn.transactional_id = TransactionalId(StrBytes::from_string(transactional_id.to_owned()));
    txn.producer_id = WireProducerId(producer.0.0);
    txn.producer_epoch = producer.1.0;
    txn.verify_only = false;
    txn.topics = topics;
    let mut request = AddPartitionsToTxnRequest::default();
    request.transactions = vec![txn];
    request
}

/// The coordinator's answer `code` as the error the local coordinator
/// would have raised.
fn error_of(code: i16, owner: i32) -> TxnError {
    match ResponseError::try_from_code(code) {
        Some(ResponseError::ProducerFenced | ResponseError::InvalidProducerEpoch) => {
            TxnError::ProducerFenced
        }
        Some(ResponseError::InvalidProducerIdMapping) => TxnError::InvalidProducerIdMapping,
        Some(ResponseError::ConcurrentTransactions) => TxnError::ConcurrentTransactions,
        Some(ResponseError::UnknownTopicOrPartition) => TxnError::UnknownTopicOrPartition,
        Some(ResponseError::InvalidTxnState | ResponseError::TransactionAbortable) => {
            TxnError::InvalidTxnState(format!("broker {owner} refused the partitions"))
        }
        other => TxnError::NotCoordinator(format!(
            "broker {owner} answered AddPartitionsToTxn with {other:?} ({code})"
        )),
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn one_request_names_every_partition_once_under_its_topic() {
        let r = request(
            "t",
            (ProducerId(7), ProducerEpoch(3)),
            &[
                TopicPartition::new("a", 0),
                TopicPartition::new("b", 1),
                TopicPartition::new("a", 2),
            ],
        );
        let txn = &r.transactions[0];
        check!(txn.transactional_id.0.as_str() == "t");
        check!((txn.producer_id.0, txn.producer_epoch) == (7, 3));
        check!(!txn.verify_only);
        let topics: Vec<(&str, Vec<i32>)> = txn
            .topics
            .iter()
            .map(|t| (t.name.0.as_str(), t.partitions.clone()))
            .collect();
        check!(topics == vec![("a", vec![0, 2]), ("b", vec![1])]);
    }

    #[test]
    fn coordinator_answers_become_the_local_errors() {
        check!(error_of(ResponseError::ProducerFenced.code(), 2) == TxnError::ProducerFenced);
        check!(
            error_of(ResponseError::ConcurrentTransactions.code(), 2)
                == TxnError::ConcurrentTransactions
        );
        assert2::assert!(let TxnError::NotCoordinator(_) = error_of(ResponseError::NotCoordinator.code(), 2));
        assert2::assert!(let TxnError::InvalidTxnState(_) = error_of(ResponseError::TransactionAbortable.code(), 2));
    }
}
