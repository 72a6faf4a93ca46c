//! Transaction markers for partitions this broker does not host, sent to
//! the broker that does with Kafka's WriteTxnMarkers.
//!
//! In a cluster the transaction coordinator of a transactional id may live
//! on one broker while the transaction's partitions — classic partitions
//! assigned elsewhere, `__consumer_offsets` shards owned elsewhere — live on
//! others. [`RoutedMarkers`] is the coordinator's [`MarkerWriter`] there: a
//! route closure (written against the cluster's assignments and shard
//! owners) says where each partition is, and the marker is written locally
//! or sent to the owner by [`MarkerClient`], which keeps one connection per
//! broker to its inter-broker listener (the first entry of its registered
//! listeners, as Kafka uses `inter.broker.listener.name`), reconnects after
//! a failure, and bounds every exchange by a deadline so no coordinator
//! thread waits forever on a dead peer.
//!
//! The owner's per-partition answer keeps the coordinator's meaning: a
//! partition that does not exist or a stale producer epoch drops the marker
//! ([`MarkerError::Gone`]), anything else — including a broken connection
//! or a refused authorization — is retried on the coordinator's next round.
//!
//! Only a PLAINTEXT inter-broker listener is dialled for now: with SSL or
//! SASL between brokers, every remote marker fails with a reason saying so
//! (and is retried), rather than going out unauthenticated.

use {
    crate::{
        broker::Broker,
        coordinator::txn::{MarkerError, MarkerWriter, TopicPartition},
        network::newer::write_txn_markers::{self, Sent},
    },
    kafka_protocol::{
        error::ResponseError,
        messages::{
            ApiKey, ProducerId as WireProducerId, TopicName, WriteTxnMarkersRequest,
            WriteTxnMarkersResponse,
            write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic},
        },
        protocol::StrBytes,
    },
    krabka_client::{ClientError, Connection, ConnectionConfig},
    krabka_ids::BrokerId,
    krabka_log::ControlMarker,
    std::{
        collections::HashMap,
        ops::RangeInclusive,
        sync::{Arc, Mutex},
        time::Duration,
    },
};

/// The WriteTxnMarkers versions sent: v2, with the markers' transaction
/// version (KIP-1228), to a peer that serves it, else v1 (the flexible
/// one, the oldest Kafka 4 brokers accept).
pub const WRITE_TXN_MARKERS_VERSIONS: RangeInclusive<i16> = 1..=2;

/// Where a partition's marker is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkerRoute {
    /// On this broker.
    Local,
    /// On broker `node`, reached at the first entry of `listeners` (its
    /// registered `NAME://host:port,…`).
    Remote {
        /// The owning broker.
        node: BrokerId,
        /// Its registered listeners.
        listeners: String,
    },
    /// Nowhere now (the owner is down, the shard has no owner): retried
    /// later; the text says why.
    Unavailable(String),
}

/// Says where each partition's marker goes.
pub type MarkerRouter = Arc<dyn Fn(&TopicPartition) -> MarkerRoute + Send + Sync>;

/// Sends the transaction coordinators' requests to other brokers —
/// WriteTxnMarkers, and AddPartitionsToTxn for transactions v2 — one
/// connection per broker.
pub struct MarkerClient {
    config: ConnectionConfig,
    /// Why remote markers cannot be sent at all (an inter-broker listener
    /// this client cannot dial).
    unusable: Option<String>,
    connections: Mutex<HashMap<BrokerId, Arc<Connection>>>,
}

impl std::fmt::Debug for MarkerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MarkerClient")
            .field("client_id", &self.config.client_id)
            .field("unusable", &self.unusable)
            .finish_non_exhaustive()
    }
}

impl MarkerClient {
    /// A client with these connection settings (`request_timeout` and
    /// `connect_timeout` bound every exchange; `tls` and `sasl` as the
    /// peers' inter-broker listener needs them).
    #[must_use]
    pub fn new(config: ConnectionConfig) -> Self {
        Self {
            config,
            unusable: None,
            connections: Mutex::new(HashMap::new()),
        }
    }

    /// The client of `broker`: its inter-broker listener's protocol (the
    /// same on every broker, as on Kafka) with the broker's own TLS and SASL
    /// credentials (see [`crate::security::InterBrokerClient`]),
    /// `request.timeout.ms` (Kafka's default, 30 s) and a 10 s connect
    /// timeout. When those credentials are missing or unusable the client
    /// fails every remote marker with the reason (and the coordinator
    /// retries them).
    #[must_use]
    pub fn for_broker(broker: &Broker) -> Self {
        let (tls, sasl, unusable) = match broker.security.inter_broker_client() {
            Ok(own) => (own.tls, own.sasl, None),
            Err(reason) => (
                None,
                None,
                Some(format!(
                    "the inter-broker listener {}: {reason}",
                    broker.security.inter_broker().spec.name
                )),
            ),
        };
        let config = ConnectionConfig {
            client_id: format!("broker-{}-txn-markers", broker.config.node_id),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_response_size: 16 * 1024 * 1024,
            tls,
            sasl,
        };
        let mut client = Self::new(config);
        client.unusable = unusable;
        client
    }

    /// Sends WriteTxnMarkers `request` to broker `node` at the first entry
    /// of `listeners` and returns its answer (see [`Self::call`]).
    ///
    /// # Errors
    ///
    /// As [`Self::call`].
    pub async fn send(
        &self,
        node: BrokerId,
        listeners: &str,
        request: Sent,
    ) -> Result<WriteTxnMarkersResponse, String> {
        self.call(node, listeners, &request, WRITE_TXN_MARKERS_VERSIONS)
            .await
            .map(|answer| answer.0)
    }

    /// Sends `request` at the newest of `versions` broker `node` serves, at
    /// the first entry of `listeners`, and returns its answer — the coordinators' calls to
    /// their peers (WriteTxnMarkers, AddPartitionsToTxn). A broken or
    /// timed-out connection is dropped, so the next call opens a new one.
    ///
    /// # Errors
    ///
    /// A message when the listeners do not parse, the inter-broker listener
    /// cannot be dialled, the connection fails or times out, or the peer
    /// does not serve the API at any of `versions`.
    pub async fn call<R: kafka_protocol::protocol::Request>(
        &self,
        node: BrokerId,
        listeners: &str,
        request: &R,
        versions: RangeInclusive<i16>,
    ) -> Result<R::Response, String> {
        if let Some(reason) = &self.unusable {
            return Err(reason.clone());
        }
        let api = ApiKey::try_from(R::KEY).map_err(|()| format!("unknown API key {}", R::KEY))?;
        let (host, port) = crate::cluster::listener_address(listeners)
            .ok_or_else(|| format!("broker {node} registered no usable listener ({listeners})"))?;
        let addr = format!("{host}:{port}");
        // One deadline over connecting, negotiating and the exchange.
        let deadline = self.config.connect_timeout + self.config.request_timeout;
        let exchange = async {
            let connection = self.connection(node, &addr).await?;
            let served = connection.versions().broker_range(api);
            let version = served
                .map(|r| (*versions.end()).min(r.max))
                .filter(|v| served.is_some_and(|r| *v >= r.min) && versions.contains(v))
                .ok_or_else(|| {
                    format!("broker {node} at {addr} does not serve {api:?} v{versions:?}")
                })?;
            connection
                .send_version(request, version)
                .await
                .map_err(|e| self.broken(node, api, &e))
        };
        match tokio::time::timeout(deadline, exchange).await {
            Ok(answer) => answer,
            Err(_) => {
                self.forget(node);
                Err(format!(
                    "{api:?} to broker {node} at {addr} timed out after {deadline:?}"
                ))
            }
        }
    }

    /// How many brokers this client holds a connection to.
    #[must_use]
    pub fn connections(&self) -> usize {
        self.lock().len()
    }

    /// The open connection to `node` at `addr`, or a new one.
    async fn connection(&self, node: BrokerId, addr: &str) -> Result<Arc<Connection>, String> {
        if let Some(c) = self.lock().get(&node)
            && c.addr() == addr
            && !c.is_closed()
        {
            return Ok(Arc::clone(c));
        }
        let connection = Connection::connect(addr, &self.config)
            .await
            .map_err(|e| format!("broker {node} at {addr}: {e}"))?;
        let connection = Arc::new(connection);
        self.lock().insert(node, Arc::clone(&connection));
        Ok(connection)
    }

    fn broken(&self, node: BrokerId, api: ApiKey, error: &ClientError) -> String {
        self.forget(node);
        format!("{api:?} to broker {node}: {error}")
    }

    fn forget(&self, node: BrokerId) {
        self.lock().remove(&node);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<BrokerId, Arc<Connection>>> {
        self.connections
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The coordinator's [`MarkerWriter`] in a cluster: each marker is written
/// here or sent to the broker the route names.
pub struct RoutedMarkers {
    local: Arc<dyn MarkerWriter>,
    route: MarkerRouter,
    client: Arc<MarkerClient>,
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for RoutedMarkers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoutedMarkers")
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

impl RoutedMarkers {
    /// Markers routed by `route`: [`MarkerRoute::Local`] ones written by
    /// `local`, remote ones sent by `client` on `runtime` (the writer is
    /// called on blocking-pool threads, which wait on it).
    #[must_use]
    pub fn new(
        local: Arc<dyn MarkerWriter>,
        route: MarkerRouter,
        client: Arc<MarkerClient>,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        Self {
            local,
            route,
            client,
            runtime,
        }
    }
}

impl MarkerWriter for RoutedMarkers {
    fn write_marker(
        &self,
        partition: &TopicPartition,
        marker: ControlMarker,
    ) -> Result<(), MarkerError> {
        match (self.route)(partition) {
            MarkerRoute::Local => self.local.write_marker(partition, marker),
            MarkerRoute::Unavailable(reason) => Err(MarkerError::Failed(format!(
                "{}-{}: {reason}",
                partition.topic, partition.partition
            ))),
            MarkerRoute::Remote { node, listeners } => {
                let answer = self
                    .runtime
                    .block_on(
                        self.client
                            .send(node, &listeners, request(partition, marker)),
                    )
                    .map_err(MarkerError::Failed)?;
                let code = partition_code(&answer, partition).ok_or_else(|| {
                    MarkerError::Failed(format!(
                        "broker {node} did not answer for {}-{}",
                        partition.topic, partition.partition
                    ))
                })?;
                outcome(code).inspect_err(|e| {
                    tracing::debug!(
                        node = node.0,
                        topic = %partition.topic,
                        partition = partition.partition,
                        error = %e,
                        "WriteTxnMarkers answered an error"
                    );
                })
            }
        }
    }
}

/// The WriteTxnMarkers request for one marker on one partition.
#[must_use]
pub fn request(partition: &TopicPartition, marker: ControlMarker) -> Sent {
    let mut topic = WritableTxnMarkerTopic::default();
    topic.name = TopicName(StrBytes::from_string(partition.topic.clone()));
    topic.partition_indexes = vec![partition.partition];
    let mut m = WritableTxnMarker::default();
    m.producer_id = WireProducerId(marker.producer_id.0);
    m.producer_epoch = marker.producer_epoch.0;
    m.transaction_result = marker.commit;
    m.coordinator_epoch = marker.coordinator_epoch;
    m.topics = vec![topic];
    write_txn_markers::set_transaction_version(&mut m, marker.transaction_version);
    let mut request = WriteTxnMarkersRequest::default();
    request.markers = vec![m];
    Sent(request)
}

/// The code `answer` gives `partition`, if it names it.
fn partition_code(answer: &WriteTxnMarkersResponse, partition: &TopicPartition) -> Option<i16> {
    answer
        .markers
        .iter()
        .flat_map(|m| &m.topics)
        .filter(|t| t.name.0.as_str() == partition.topic)
        .flat_map(|t| &t.partitions)
        .find(|p| p.partition_index == partition.partition)
        .map(|p| p.error_code)
}

/// What a per-partition WriteTxnMarkers code means to the coordinator.
///
/// # Errors
///
/// [`MarkerError::Gone`] for UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH
/// and INVALID_TXN_STATE (the marker is moot, as the local path drops it);
/// [`MarkerError::Failed`] naming the error for every other code (retried).
pub fn outcome(code: i16) -> Result<(), MarkerError> {
    match ResponseError::try_from_code(code) {
        None => Ok(()),
        Some(
            ResponseError::UnknownTopicOrPartition
            | ResponseError::InvalidProducerEpoch
            | ResponseError::InvalidTxnState,
        ) => Err(MarkerError::Gone),
        Some(e) => Err(MarkerError::Failed(format!(
            "WriteTxnMarkers answered {e:?} ({code})"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn answers_mean_drop_or_retry() {
        check!(outcome(0) == Ok(()));
        check!(outcome(3) == Err(MarkerError::Gone));
        check!(outcome(47) == Err(MarkerError::Gone));
        check!(outcome(48) == Err(MarkerError::Gone));
        for retried in [6, 14, 15, 16, 2, 31, 56, -1, 12_345] {
            check!(
                matches!(outcome(retried), Err(MarkerError::Failed(_))),
                "code {retried}"
            );
        }
    }

    #[test]
    fn one_marker_one_partition_and_its_answer() {
        use kafka_protocol::protocol::{Decodable, Encodable};
        let tp = TopicPartition::new("data", 2);
        let marker = ControlMarker {
            producer_id: krabka_ids::ProducerId(7),
            producer_epoch: krabka_ids::ProducerEpoch(3),
            commit: true,
            coordinator_epoch: 5,
            transaction_version: krabka_ids::TransactionVersion::V2,
        };
        let sent = request(&tp, marker);
        // v2 carries the transaction version, read back as a peer reads it.
        let mut v2 = bytes::BytesMut::new();
        sent.encode(&mut v2, 2).unwrap();
        check!(sent.compute_size(2).unwrap() == v2.len());
        let crate::network::codec::Request::WriteTxnMarkers(r) =
            write_txn_markers::decode(&mut v2.freeze(), 2).unwrap()
        else {
            panic!("not WriteTxnMarkers");
        };
        check!(r.markers.len() == 1);
        check!(r.markers[0].producer_id.0 == 7);
        check!(r.markers[0].producer_epoch == 3);
        check!(r.markers[0].transaction_result);
        check!(r.markers[0].coordinator_epoch == 5);
        check!(r.markers[0].topics[0].partition_indexes == vec![2]);
        check!(
            write_txn_markers::transaction_version(&r.markers[0])
                == krabka_ids::TransactionVersion::V2
        );
        // v1, for a peer without v2, has no trace of it.
        let mut v1 = bytes::BytesMut::new();
        sent.encode(&mut v1, 1).unwrap();
        let plain = WriteTxnMarkersRequest::decode(&mut v1.freeze(), 1).unwrap();
        check!(plain.markers[0].unknown_tagged_fields.is_empty());
        check!(plain.markers[0].coordinator_epoch == 5);
        let answer = crate::handlers::txn_markers::answer_all(&r, 47);
        check!(partition_code(&answer, &tp) == Some(47));
        check!(partition_code(&answer, &TopicPartition::new("data", 1)).is_none());
        check!(partition_code(&answer, &TopicPartition::new("other", 2)).is_none());
    }

    #[test]
    fn an_unavailable_route_is_retried_and_local_goes_local() {
        struct Gone;
        impl MarkerWriter for Gone {
            fn write_marker(
                &self,
                _: &TopicPartition,
                _: ControlMarker,
            ) -> Result<(), MarkerError> {
                Err(MarkerError::Gone)
            }
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let marker = ControlMarker {
            producer_id: krabka_ids::ProducerId(1),
            producer_epoch: krabka_ids::ProducerEpoch(0),
            commit: false,
            coordinator_epoch: 0,
            transaction_version: krabka_ids::TransactionVersion::V0,
        };
        let client = Arc::new(MarkerClient::new(ConnectionConfig::default()));
        let routed = RoutedMarkers::new(
            Arc::new(Gone),
            Arc::new(|tp: &TopicPartition| {
                if tp.partition == 0 {
                    MarkerRoute::Local
                } else {
                    MarkerRoute::Unavailable("owner down".into())
                }
            }),
            client,
            runtime.handle().clone(),
        );
        check!(routed.write_marker(&TopicPartition::new("t", 0), marker) == Err(MarkerError::Gone));
        let Err(MarkerError::Failed(reason)) =
            routed.write_marker(&TopicPartition::new("t", 1), marker)
        else {
            panic!("an unavailable partition must be retried");
        };
        check!(reason.contains("owner down"));
    }
}
