//! Transactions: coordinator lookup, producer ids, AddPartitionsToTxn,
//! EndTxn, DescribeTransactions, and a [`TransactionalProducer`] on top.
//!
//! The calls are typed one-to-one with Kafka's APIs and keep Kafka's error
//! codes, because the coordination layer decides on them: `PRODUCER_FENCED`
//! (90) and `INVALID_PRODUCER_EPOCH` (47) mean a newer epoch exists
//! ([`ClientError::is_fenced`]), `CONCURRENT_TRANSACTIONS` (51) and the
//! coordinator-moved codes mean "retry".

use {
    crate::{
        Client, ClientError,
        admin::{duration_ms, topic_name},
        metadata::BrokerInfo,
        producer::{Acks, PartitionBatch, ProduceOutcome, enqueue_produce, wrapping_sequence},
        records::{BatchProducer, ProducerRecord, encode_batch},
    },
    kafka_protocol::{
        messages::{
            AddPartitionsToTxnRequest, ApiKey, DescribeTransactionsRequest,
            DescribeTransactionsResponse, EndTxnRequest, FindCoordinatorRequest,
            InitProducerIdRequest, TransactionalId,
            add_partitions_to_txn_request::AddPartitionsToTxnTopic,
        },
        protocol::StrBytes,
        records::Compression,
    },
    krabka_ids::{BrokerId, ProducerEpoch, ProducerId},
    std::{
        collections::{BTreeSet, HashMap},
        sync::Arc,
        time::{Duration, SystemTime, UNIX_EPOCH},
    },
};

/// What a coordinator is looked up for (FindCoordinator `key_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoordinatorType {
    /// A consumer group (0).
    Group,
    /// A transactional id (1).
    Transaction,
}

impl CoordinatorType {
    fn code(self) -> i8 {
        match self {
            Self::Group => 0,
            Self::Transaction => 1,
        }
    }
}

/// A producer id with its epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProducerIdAndEpoch {
    /// The producer id.
    pub producer_id: ProducerId,
    /// Its epoch.
    pub epoch: ProducerEpoch,
}

/// One transactional id as DescribeTransactions reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionDescription {
    /// The transactional id.
    pub transactional_id: String,
    /// Kafka's state name: `Empty`, `Ongoing`, `PrepareCommit`, `CompleteCommit`, ...
    pub state: String,
    /// `transaction.timeout.ms`.
    pub timeout_ms: i32,
    /// When the ongoing transaction started (ms), -1 when none.
    pub start_time_ms: i64,
    /// The producer id and epoch currently holding the transactional id.
    pub producer: ProducerIdAndEpoch,
    /// Partitions in the ongoing transaction.
    pub partitions: Vec<(String, i32)>,
}

impl Client {
    /// The coordinator for `key`, from this client's cache or, when not
    /// cached, from FindCoordinator. A transactional call that gets
    /// `NOT_COORDINATOR` (16), `COORDINATOR_NOT_AVAILABLE` (15) or a
    /// connection error drops the cached entry, so the next call looks again.
    ///
    /// # Errors
    ///
    /// As [`Client::find_coordinator`].
    pub async fn coordinator(
        &self,
        key: &str,
        key_type: CoordinatorType,
    ) -> Result<BrokerInfo, ClientError> {
        if let Some(broker) = self.cached_coordinator(key, key_type.code()) {
            return Ok(broker);
        }
        let broker = self.find_coordinator(key, key_type).await?;
        self.cache_coordinator(key, key_type.code(), broker.clone());
        Ok(broker)
    }

    /// Sends `request` to the transaction coordinator of `transactional_id`,
    /// forgetting the cached coordinator when the answer says it moved.
    async fn send_to_txn_coordinator<R: kafka_protocol::protocol::Request>(
        &self,
        transactional_id: &str,
        request: &R,
        error_code: impl Fn(&R::Response) -> i16,
    ) -> Result<R::Response, ClientError> {
        let kind = CoordinatorType::Transaction;
        let coordinator = self.coordinator(transactional_id, kind).await?;
        let result = match self.connection(&coordinator.addr()).await {
            Ok(connection) => connection.send(request).await,
            Err(e) => Err(e),
        };
        let moved = match &result {
            Ok(response) => matches!(error_code(response), 15 | 16),
            Err(e) => matches!(e, ClientError::Connection { .. }),
        };
        if moved {
            self.forget_coordinator(transactional_id, kind.code());
        }
        result
    }

    /// Finds the coordinator for `key` (a group id or a transactional id).
    ///
    /// # Errors
    ///
    /// The broker's error code (e.g. `COORDINATOR_NOT_AVAILABLE`, 15, while
    /// the coordinator's topic is being created), connection and protocol errors.
    pub async fn find_coordinator(
        &self,
        key: &str,
        key_type: CoordinatorType,
    ) -> Result<BrokerInfo, ClientError> {
        let connection = self.any_connection().await?;
        let version = connection.version(ApiKey::FindCoordinator)?;
        let mut request = FindCoordinatorRequest::default();
        request.key_type = key_type.code();
        if version >= 4 {
            request.coordinator_keys = vec![StrBytes::from_string(key.to_owned())];
        } else {
            request.key = StrBytes::from_string(key.to_owned());
        }
        let response = connection.send_version(&request, version).await?;
        let context = || format!("FindCoordinator {key}");
        let (node, host, port) = if version >= 4 {
            let c = response
                .coordinators
                .iter()
                .find(|c| c.key.as_str() == key)
                .ok_or_else(|| {
                    ClientError::Protocol(format!("FindCoordinator answered nothing for {key}"))
                })?;
            ClientError::check(c.error_code, c.error_message.as_deref(), context)?;
            (c.node_id.0, c.host.to_string(), c.port)
        } else {
            ClientError::check(
                response.error_code,
                response.error_message.as_deref(),
                context,
            )?;
            (response.node_id.0, response.host.to_string(), response.port)
        };
        Ok(BrokerInfo {
            id: BrokerId(node),
            host,
            port,
            rack: None,
        })
    }

    /// InitProducerId. `transactional_id` `None` gives an idempotent producer
    /// id from any broker; `Some` goes to that id's transaction coordinator,
    /// which bumps the epoch (fencing older holders) and aborts an open
    /// transaction. `current` is the id/epoch being re-initialised (KIP-360),
    /// or `None`.
    ///
    /// # Errors
    ///
    /// The broker's error code (`CONCURRENT_TRANSACTIONS`, 51, while a previous
    /// transaction is completing; `PRODUCER_FENCED`, 90; `INVALID_TRANSACTION_TIMEOUT`, 50),
    /// connection and protocol errors.
    pub async fn init_producer_id(
        &self,
        transactional_id: Option<&str>,
        transaction_timeout: Duration,
    ) -> Result<ProducerIdAndEpoch, ClientError> {
        self.init_producer_id_with(transactional_id, transaction_timeout, None)
            .await
    }

    /// [`Client::init_producer_id`] with the id/epoch being re-initialised.
    ///
    /// # Errors
    ///
    /// As [`Client::init_producer_id`].
    pub async fn init_producer_id_with(
        &self,
        transactional_id: Option<&str>,
        transaction_timeout: Duration,
        current: Option<ProducerIdAndEpoch>,
    ) -> Result<ProducerIdAndEpoch, ClientError> {
        let mut request = InitProducerIdRequest::default();
        request.transactional_id = transactional_id.map(transactional);
        request.transaction_timeout_ms = duration_ms(transaction_timeout);
        let current = current.unwrap_or(ProducerIdAndEpoch {
            producer_id: ProducerId::NONE,
            epoch: ProducerEpoch::NONE,
        });
        request.producer_id = current.producer_id.0.into();
        request.producer_epoch = current.epoch.0;
        let response = match transactional_id {
            Some(id) => {
                self.send_to_txn_coordinator(id, &request, |r| r.error_code)
                    .await?
            }
            None => self.any_connection().await?.send(&request).await?,
        };
        ClientError::check(response.error_code, None, || {
            format!(
                "InitProducerId {}",
                transactional_id.unwrap_or("(idempotent)")
            )
        })?;
        Ok(ProducerIdAndEpoch {
            producer_id: ProducerId(response.producer_id.0),
            epoch: ProducerEpoch(response.producer_epoch),
        })
    }

    /// AddPartitionsToTxn: registers partitions with the transaction before
    /// the producer writes to them.
    ///
    /// # Errors
    ///
    /// The first partition's (or the request's) Kafka error, e.g.
    /// `PRODUCER_FENCED` (90), `INVALID_PRODUCER_EPOCH` (47), `CONCURRENT_TRANSACTIONS` (51).
    pub async fn add_partitions_to_txn(
        &self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        partitions: &[(&str, i32)],
    ) -> Result<(), ClientError> {
        let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
        for &(topic, partition) in partitions {
            match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
                Some(t) => t.partitions.push(partition),
                None => {
                    let mut t = AddPartitionsToTxnTopic::default();
                    t.name = topic_name(topic);
                    t.partitions.push(partition);
                    topics.push(t);
                }
            }
        }
        let mut request = AddPartitionsToTxnRequest::default();
        request.v3_and_below_transactional_id = transactional(transactional_id);
        request.v3_and_below_producer_id = producer.producer_id.0.into();
        request.v3_and_below_producer_epoch = producer.epoch.0;
        request.v3_and_below_topics = topics;
        let response = self
            .send_to_txn_coordinator(transactional_id, &request, |r| {
                // v0-3 carry the coordinator errors per partition.
                r.results_by_topic_v3_and_below
                    .iter()
                    .flat_map(|t| t.results_by_partition.iter())
                    .map(|p| p.partition_error_code)
                    .find(|&c| c != 0)
                    .unwrap_or(r.error_code)
            })
            .await?;
        ClientError::check(response.error_code, None, || {
            format!("AddPartitionsToTxn {transactional_id}")
        })?;
        for topic in &response.results_by_topic_v3_and_below {
            for p in &topic.results_by_partition {
                ClientError::check(p.partition_error_code, None, || {
                    format!(
                        "AddPartitionsToTxn {transactional_id} {}-{}",
                        topic.name.0.as_str(),
                        p.partition_index
                    )
                })?;
            }
        }
        Ok(())
    }

    /// EndTxn: commits (`commit = true`) or aborts the ongoing transaction.
    ///
    /// # Errors
    ///
    /// Kafka's error, e.g. `PRODUCER_FENCED` (90), `INVALID_TXN_STATE` (48),
    /// `CONCURRENT_TRANSACTIONS` (51).
    pub async fn end_txn(
        &self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        commit: bool,
    ) -> Result<(), ClientError> {
        let mut request = EndTxnRequest::default();
        request.transactional_id = transactional(transactional_id);
        request.producer_id = producer.producer_id.0.into();
        request.producer_epoch = producer.epoch.0;
        request.committed = commit;
        let response = self
            .send_to_txn_coordinator(transactional_id, &request, |r| r.error_code)
            .await?;
        ClientError::check(response.error_code, None, || {
            format!(
                "EndTxn {transactional_id} ({})",
                if commit { "commit" } else { "abort" }
            )
        })
    }

    /// DescribeTransactions for each id, one request per id in the common
    /// case.
    ///
    /// A describe is how a third party checks a writer's authority, so it
    /// should cost one round trip: each id goes to its cached coordinator,
    /// or, when none is cached, straight to any connected broker (on a
    /// single node, or when that broker happens to coordinate the id, that
    /// is the answer). Only when the broker answers `NOT_COORDINATOR` (16)
    /// or `COORDINATOR_NOT_AVAILABLE` (15), or the cached coordinator cannot
    /// be reached, does the call look the coordinator up with
    /// FindCoordinator and ask it.
    ///
    /// # Errors
    ///
    /// The first id's Kafka error (`TRANSACTIONAL_ID_NOT_FOUND`, 105, for an
    /// unknown id), connection and protocol errors.
    pub async fn describe_transactions(
        &self,
        ids: &[&str],
    ) -> Result<Vec<TransactionDescription>, ClientError> {
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let mut request = DescribeTransactionsRequest::default();
            request.transactional_ids = vec![transactional(id)];
            let response = self.describe_one(id, &request).await?;
            for state in response.transaction_states {
                ClientError::check(state.error_code, None, || {
                    format!("DescribeTransactions {id}")
                })?;
                out.push(TransactionDescription {
                    transactional_id: state.transactional_id.0.to_string(),
                    state: state.transaction_state.to_string(),
                    timeout_ms: state.transaction_timeout_ms,
                    start_time_ms: state.transaction_start_time_ms,
                    producer: ProducerIdAndEpoch {
                        producer_id: ProducerId(state.producer_id.0),
                        epoch: ProducerEpoch(state.producer_epoch),
                    },
                    partitions: state
                        .topics
                        .iter()
                        .flat_map(|t| t.partitions.iter().map(|p| (t.topic.0.to_string(), *p)))
                        .collect(),
                });
            }
        }
        Ok(out)
    }

    /// Sends one id's DescribeTransactions to the cached coordinator or any
    /// broker, and through FindCoordinator only when that broker is not the
    /// coordinator.
    async fn describe_one(
        &self,
        id: &str,
        request: &DescribeTransactionsRequest,
    ) -> Result<DescribeTransactionsResponse, ClientError> {
        let kind = CoordinatorType::Transaction;
        let error_code = |r: &DescribeTransactionsResponse| {
            r.transaction_states.first().map_or(0, |t| t.error_code)
        };
        let first = match self.cached_coordinator(id, kind.code()) {
            Some(coordinator) => match self.connection(&coordinator.addr()).await {
                Ok(connection) => connection.send(request).await,
                Err(e) => Err(e),
            },
            None => self.any_connection().await?.send(request).await,
        };
        let elsewhere = match &first {
            Ok(response) => matches!(error_code(response), 15 | 16),
            Err(e) => matches!(e, ClientError::Connection { .. }),
        };
        if !elsewhere {
            return first;
        }
        self.forget_coordinator(id, kind.code());
        self.send_to_txn_coordinator(id, request, error_code).await
    }

    /// Produces one batch per entry of `batches` (`topic`, `partition`,
    /// records) in one pipelined round trip per leader, without idempotence.
    /// Results are in the order of `batches`.
    ///
    /// # Errors
    ///
    /// Leader lookup, encoding, connection and protocol errors for the whole
    /// call; each batch's Kafka error in its result.
    pub async fn produce(
        &self,
        batches: &[(&str, i32, Vec<ProducerRecord>)],
        acks: Acks,
        compression: Compression,
    ) -> Result<Vec<Result<ProduceOutcome, ClientError>>, ClientError> {
        self.produce_as(batches, acks, compression, BatchProducer::NONE, None)
            .await
    }

    /// Like [`Client::produce`], with explicit producer fields (each batch
    /// starts at `producer.base_sequence`) and a transactional id.
    pub(crate) async fn produce_as(
        &self,
        batches: &[(&str, i32, Vec<ProducerRecord>)],
        acks: Acks,
        compression: Compression,
        producer: BatchProducer,
        transactional_id: Option<&str>,
    ) -> Result<Vec<Result<ProduceOutcome, ClientError>>, ClientError> {
        let now = now_ms();
        let timeout = self.config().connection.request_timeout;
        // One request per leader; a second batch for the same partition goes in a later request.
        let mut requests: Vec<(BrokerId, Vec<(usize, PartitionBatch)>)> = Vec::new();
        for (i, (topic, partition, records)) in batches.iter().enumerate() {
            let leader = self.leader(topic, *partition).await?;
            let batch = PartitionBatch {
                topic: Arc::from(*topic),
                partition: *partition,
                batch: encode_batch(records, producer, compression, now)?,
            };
            let slot = requests.iter_mut().find(|(b, list)| {
                *b == leader.id
                    && !list
                        .iter()
                        .any(|(_, e)| &*e.topic == *topic && e.partition == *partition)
            });
            match slot {
                Some((_, list)) => list.push((i, batch)),
                None => requests.push((leader.id, vec![(i, batch)])),
            }
        }
        let mut futures = Vec::with_capacity(requests.len());
        for (broker, list) in requests {
            let connection = self.broker_connection(broker).await?;
            let (indexes, encoded): (Vec<usize>, Vec<PartitionBatch>) = list.into_iter().unzip();
            futures.push((
                indexes,
                enqueue_produce(&connection, &encoded, acks, timeout, transactional_id)?,
            ));
        }
        let mut out: Vec<Option<Result<ProduceOutcome, ClientError>>> =
            batches.iter().map(|_| None).collect();
        for (indexes, future) in futures {
            let results = future.await?;
            for (i, result) in indexes.into_iter().zip(results) {
                if let Some(slot) = out.get_mut(i) {
                    *slot = Some(result);
                }
            }
        }
        Ok(out
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|| Err(ClientError::Protocol("batch was not answered".into())))
            })
            .collect())
    }
}

fn transactional(id: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(id.to_owned()))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A producer bound to one `transactional.id` and the epoch InitProducerId
/// minted for it. Every write carries that (producer id, epoch), so once a
/// newer holder initialises the same id, this producer's writes, commits and
/// aborts fail with a fencing error ([`ClientError::is_fenced`]).
///
/// Writes are acks=all, one batch per call, in the caller's order; the
/// producer tracks each partition's sequence numbers and registers each
/// partition with the transaction (AddPartitionsToTxn) before its first write.
#[derive(Debug)]
pub struct TransactionalProducer {
    client: Client,
    transactional_id: String,
    transaction_timeout: Duration,
    identity: ProducerIdAndEpoch,
    compression: Compression,
    sequences: HashMap<(String, i32), i32>,
    in_transaction: Option<BTreeSet<(String, i32)>>,
}

impl TransactionalProducer {
    /// Initialises `transactional_id` (`transaction.timeout.ms` = `transaction_timeout`),
    /// fencing any earlier holder.
    ///
    /// # Errors
    ///
    /// As [`Client::init_producer_id`].
    pub async fn init(
        client: Client,
        transactional_id: &str,
        transaction_timeout: Duration,
    ) -> Result<Self, ClientError> {
        let identity = client
            .init_producer_id(Some(transactional_id), transaction_timeout)
            .await?;
        Ok(Self {
            client,
            transactional_id: transactional_id.to_owned(),
            transaction_timeout,
            identity,
            compression: Compression::None,
            sequences: HashMap::new(),
            in_transaction: None,
        })
    }

    /// Sets the compression of later batches.
    pub fn set_compression(&mut self, compression: Compression) {
        self.compression = compression;
    }

    /// The (producer id, epoch) every write of this producer carries.
    #[must_use]
    pub fn identity(&self) -> ProducerIdAndEpoch {
        self.identity
    }

    /// The `transactional.id`.
    #[must_use]
    pub fn transactional_id(&self) -> &str {
        &self.transactional_id
    }

    /// The `transaction.timeout.ms` it was initialised with.
    #[must_use]
    pub fn transaction_timeout(&self) -> Duration {
        self.transaction_timeout
    }

    /// Starts a transaction (local state only, as in Kafka).
    ///
    /// # Errors
    ///
    /// [`ClientError::InvalidArgument`] when a transaction is already open.
    pub fn begin(&mut self) -> Result<(), ClientError> {
        if self.in_transaction.is_some() {
            return Err(ClientError::InvalidArgument(
                "a transaction is already open".into(),
            ));
        }
        self.in_transaction = Some(BTreeSet::new());
        Ok(())
    }

    /// Writes `records` as one batch to `topic`/`partition` inside the open transaction.
    ///
    /// # Errors
    ///
    /// [`ClientError::InvalidArgument`] outside a transaction or for no
    /// records; Kafka's errors from AddPartitionsToTxn and Produce (fencing
    /// among them).
    pub async fn send(
        &mut self,
        topic: &str,
        partition: i32,
        records: Vec<ProducerRecord>,
    ) -> Result<ProduceOutcome, ClientError> {
        let key = (topic.to_owned(), partition);
        let Some(partitions) = self.in_transaction.as_mut() else {
            return Err(ClientError::InvalidArgument(
                "send outside a transaction".into(),
            ));
        };
        if !partitions.contains(&key) {
            self.client
                .add_partitions_to_txn(&self.transactional_id, self.identity, &[(topic, partition)])
                .await?;
            if let Some(p) = self.in_transaction.as_mut() {
                p.insert(key.clone());
            }
        }
        let count = i32::try_from(records.len())
            .map_err(|_| ClientError::InvalidArgument("too many records".into()))?;
        let base_sequence = self.sequences.get(&key).copied().unwrap_or(0);
        let producer = BatchProducer {
            producer_id: self.identity.producer_id,
            epoch: self.identity.epoch,
            base_sequence,
            transactional: true,
        };
        let mut results = self
            .client
            .produce_as(
                &[(topic, partition, records)],
                Acks::All,
                self.compression,
                producer,
                Some(&self.transactional_id),
            )
            .await?;
        let outcome = results
            .pop()
            .unwrap_or_else(|| Err(ClientError::Protocol("produce answered nothing".into())))?;
        self.sequences
            .insert(key, wrapping_sequence(base_sequence, count));
        Ok(outcome)
    }

    /// Commits the open transaction.
    ///
    /// # Errors
    ///
    /// [`ClientError::InvalidArgument`] without an open transaction; Kafka's EndTxn errors.
    pub async fn commit(&mut self) -> Result<(), ClientError> {
        self.end(true).await
    }

    /// Aborts the open transaction.
    ///
    /// # Errors
    ///
    /// As [`TransactionalProducer::commit`].
    pub async fn abort(&mut self) -> Result<(), ClientError> {
        self.end(false).await
    }

    async fn end(&mut self, commit: bool) -> Result<(), ClientError> {
        let Some(partitions) = self.in_transaction.take() else {
            return Err(ClientError::InvalidArgument("no open transaction".into()));
        };
        if partitions.is_empty() {
            return Ok(()); // nothing was registered with the coordinator
        }
        let result = self
            .client
            .end_txn(&self.transactional_id, self.identity, commit)
            .await;
        if result.is_err() {
            self.in_transaction = Some(partitions);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    //! The coordinator lookup of DescribeTransactions against a scripted
    //! two-broker cluster on 127.0.0.1: a single Krabka node is always the
    //! coordinator, so only a scripted peer can answer NOT_COORDINATOR.
    //! Broker 1 is the bootstrap and answers NOT_COORDINATOR; broker 2
    //! coordinates every transactional id.

    use {
        super::*,
        crate::{
            ClientConfig,
            test_peer::{read_frame, response_frame},
        },
        assert2::check,
        kafka_protocol::{
            messages::{
                ApiVersionsResponse, DescribeTransactionsResponse, FindCoordinatorResponse,
                MetadataResponse, api_versions_response::ApiVersion,
                describe_transactions_response::TransactionState,
                find_coordinator_response::Coordinator, metadata_response::MetadataResponseBroker,
            },
            protocol::{Decodable, decode_request_header_from_buffer},
        },
        tokio::{io::AsyncWriteExt, net::TcpListener},
    };

    const COORDINATOR: i32 = 2;

    /// Serves every connection to broker `node` of the two at `ports`.
    async fn broker(listener: TcpListener, node: i32, ports: [u16; 2]) {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(serve(stream, node, ports));
        }
    }

    async fn serve(mut stream: tokio::net::TcpStream, node: i32, ports: [u16; 2]) {
        while let Some(mut frame) = read_frame(&mut stream).await {
            let header = decode_request_header_from_buffer(&mut frame).unwrap();
            let version = header.request_api_version;
            let key = ApiKey::try_from(header.request_api_key).unwrap();
            let correlation = header.correlation_id;
            let header_version = key.response_header_version(version);
            let response = match key {
                ApiKey::ApiVersions => {
                    let mut response = ApiVersionsResponse::default();
                    response.api_keys = [
                        (ApiKey::ApiVersions, 3),
                        (ApiKey::Metadata, 12),
                        (ApiKey::FindCoordinator, 4),
                        (ApiKey::DescribeTransactions, 0),
                    ]
                    .into_iter()
                    .map(|(api, max)| {
                        let mut entry = ApiVersion::default();
                        entry.api_key = api as i16;
                        entry.max_version = max;
                        entry
                    })
                    .collect();
                    // ApiVersions answers with header v0 whatever the version.
                    response_frame(correlation, 0, &response, version)
                }
                ApiKey::Metadata => {
                    let mut response = MetadataResponse::default();
                    response.controller_id = kafka_protocol::messages::BrokerId(1);
                    response.brokers = [1, 2]
                        .into_iter()
                        .zip(ports)
                        .map(|(id, port)| {
                            let mut b = MetadataResponseBroker::default();
                            b.node_id = kafka_protocol::messages::BrokerId(id);
                            b.host = StrBytes::from_static_str("127.0.0.1");
                            b.port = i32::from(port);
                            b
                        })
                        .collect();
                    response_frame(correlation, header_version, &response, version)
                }
                ApiKey::FindCoordinator => {
                    let request = FindCoordinatorRequest::decode(&mut frame, version).unwrap();
                    let mut coordinator = Coordinator::default();
                    coordinator.key = request.coordinator_keys[0].clone();
                    coordinator.node_id = kafka_protocol::messages::BrokerId(COORDINATOR);
                    coordinator.host = StrBytes::from_static_str("127.0.0.1");
                    coordinator.port = i32::from(ports[1]);
                    let mut response = FindCoordinatorResponse::default();
                    response.coordinators = vec![coordinator];
                    response_frame(correlation, header_version, &response, version)
                }
                ApiKey::DescribeTransactions => {
                    let request = DescribeTransactionsRequest::decode(&mut frame, version).unwrap();
                    let mut state = TransactionState::default();
                    state.transactional_id = request.transactional_ids[0].clone();
                    if node == COORDINATOR {
                        state.transaction_state = StrBytes::from_static_str("Empty");
                        state.producer_id = kafka_protocol::messages::ProducerId(7);
                        state.producer_epoch = 3;
                    } else {
                        state.error_code = 16; // NOT_COORDINATOR
                    }
                    let mut response = DescribeTransactionsResponse::default();
                    response.transaction_states = vec![state];
                    response_frame(correlation, header_version, &response, version)
                }
                other => panic!("the scripted broker does not serve {other:?}"),
            };
            if stream.write_all(&response).await.is_err() {
                return;
            }
        }
    }

    #[tokio::test]
    async fn describe_finds_the_coordinator_only_when_the_first_broker_is_not_it() {
        let listeners = [
            TcpListener::bind("127.0.0.1:0").await.unwrap(),
            TcpListener::bind("127.0.0.1:0").await.unwrap(),
        ];
        let ports = listeners.each_ref().map(|l| l.local_addr().unwrap().port());
        let [first, second] = listeners;
        let servers = [
            tokio::spawn(broker(first, 1, ports)),
            tokio::spawn(broker(second, COORDINATOR, ports)),
        ];
        let bootstrap = format!("127.0.0.1:{}", ports[0]);
        let client = Client::connect(&[bootstrap], ClientConfig::default())
            .await
            .unwrap();
        let counts = client.request_counts();

        // Broker 1 says NOT_COORDINATOR: look the coordinator up, ask it.
        let described = client.describe_transactions(&["controller"]).await.unwrap();
        check!(described.len() == 1);
        check!(described[0].producer.producer_id == ProducerId(7));
        check!(described[0].producer.epoch == ProducerEpoch(3));
        check!(counts.sent(ApiKey::DescribeTransactions) == 2);
        check!(counts.sent(ApiKey::FindCoordinator) == 1);

        // The coordinator is cached now: one request, no lookup.
        client.describe_transactions(&["controller"]).await.unwrap();
        check!(counts.sent(ApiKey::DescribeTransactions) == 3);
        check!(counts.sent(ApiKey::FindCoordinator) == 1);

        for server in servers {
            server.abort();
        }
    }
}
