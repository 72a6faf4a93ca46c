//! [`Client`]: bootstrap, cached metadata, one connection per broker.
//!
//! The client is a cheap handle (`Arc` inside) that the producer, the
//! consumer and the admin calls share. Metadata is cached and refreshed on
//! demand — callers that see [`ClientError::needs_metadata_refresh`] call
//! [`Client::refresh_metadata`] and retry. Connections are opened lazily per
//! broker address and replaced when they break.

use {
    crate::{
        ClientError,
        connection::{Connection, ConnectionConfig},
        counts::RequestCounts,
        metadata::{BrokerInfo, ClusterMetadata, TopicInfo},
    },
    kafka_protocol::{
        messages::{MetadataRequest, TopicName, metadata_request::MetadataRequestTopic},
        protocol::{Request, StrBytes},
    },
    krabka_ids::{BrokerId, TopicId},
    std::{
        collections::HashMap,
        sync::{Arc, RwLock},
    },
    tokio::sync::Mutex,
};

/// Settings of a [`Client`].
#[derive(Debug, Clone, Default)]
pub struct ClientConfig {
    /// Settings of every connection.
    pub connection: ConnectionConfig,
    /// Ask the broker to create unknown topics on Metadata (`allow.auto.create.topics`).
    pub allow_auto_topic_creation: bool,
}

struct Inner {
    config: ClientConfig,
    bootstrap: Vec<String>,
    metadata: RwLock<ClusterMetadata>,
    connections: Mutex<HashMap<String, Arc<Connection>>>,
    /// Coordinators found with FindCoordinator, by (key, key type).
    coordinators: std::sync::Mutex<HashMap<(String, i8), BrokerInfo>>,
    /// Requests sent by every connection of this client.
    counts: Arc<RequestCounts>,
}

/// A handle to a Kafka-compatible cluster.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("bootstrap", &self.inner.bootstrap)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Connects to the first reachable bootstrap address (`host:port`) and
    /// loads the cluster's brokers.
    ///
    /// # Errors
    ///
    /// Returns [`ClientError::InvalidArgument`] for an empty list, and the last
    /// connection or Metadata error when no bootstrap address works.
    pub async fn connect<S: AsRef<str>>(
        bootstrap: &[S],
        config: ClientConfig,
    ) -> Result<Self, ClientError> {
        let bootstrap: Vec<String> = bootstrap
            .iter()
            .map(|s| s.as_ref().trim().to_owned())
            .collect();
        if bootstrap.is_empty() {
            return Err(ClientError::InvalidArgument("no bootstrap servers".into()));
        }
        let client = Self {
            inner: Arc::new(Inner {
                config,
                bootstrap,
                metadata: RwLock::new(ClusterMetadata::default()),
                connections: Mutex::new(HashMap::new()),
                coordinators: std::sync::Mutex::new(HashMap::new()),
                counts: Arc::default(),
            }),
        };
        client.refresh_metadata(&[]).await?;
        Ok(client)
    }

    /// The settings this client was built with.
    #[must_use]
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// How many requests of each API this client has sent, over all its
    /// connections (the `ApiVersions` of each new connection included).
    #[must_use]
    pub fn request_counts(&self) -> &RequestCounts {
        &self.inner.counts
    }

    /// A copy of the cached metadata.
    #[must_use]
    pub fn cached_metadata(&self) -> ClusterMetadata {
        self.inner
            .metadata
            .read()
            .map(|m| m.clone())
            .unwrap_or_default()
    }

    /// Fetches metadata for `topics` (all topics when empty), merges it into
    /// the cache and returns the fresh snapshot.
    ///
    /// # Errors
    ///
    /// Returns connection and protocol errors, and the response's top-level
    /// error code. Per-topic errors are in [`ClusterMetadata::topic_errors`].
    pub async fn refresh_metadata(&self, topics: &[&str]) -> Result<ClusterMetadata, ClientError> {
        let mut request = MetadataRequest::default();
        request.allow_auto_topic_creation = self.inner.config.allow_auto_topic_creation;
        request.topics = (!topics.is_empty()).then(|| {
            topics
                .iter()
                .map(|t| {
                    let mut topic = MetadataRequestTopic::default();
                    topic.name = Some(TopicName(StrBytes::from_string((*t).to_owned())));
                    topic
                })
                .collect()
        });
        let response = self.send_any(&request).await?;
        ClientError::check(response.error_code, None, || "Metadata".into())?;
        let fresh = ClusterMetadata::from_response(&response);
        if let Ok(mut cache) = self.inner.metadata.write() {
            if topics.is_empty() {
                *cache = fresh.clone();
            } else {
                cache.merge(fresh.clone());
            }
        }
        Ok(fresh)
    }

    /// The topic called `name`, from the cache or, when absent, from the broker.
    ///
    /// # Errors
    ///
    /// `UNKNOWN_TOPIC_OR_PARTITION` (3) when the topic does not exist, and the
    /// errors of [`Client::refresh_metadata`].
    pub async fn topic(&self, name: &str) -> Result<TopicInfo, ClientError> {
        if let Some(topic) = self
            .inner
            .metadata
            .read()
            .ok()
            .and_then(|m| m.topics.get(name).cloned())
        {
            return Ok(topic);
        }
        self.refresh_metadata(&[name]).await?.topic(name).cloned()
    }

    /// The id of topic `name`.
    ///
    /// # Errors
    ///
    /// As [`Client::topic`]; [`ClientError::Protocol`] when the broker sends no topic ids.
    pub async fn topic_id(&self, name: &str) -> Result<TopicId, ClientError> {
        self.topic(name)
            .await?
            .id
            .ok_or_else(|| ClientError::Protocol(format!("the broker sent no topic id for {name}")))
    }

    /// The cached leader of `topic`/`partition`, without a network call.
    #[must_use]
    pub fn cached_leader(&self, topic: &str, partition: i32) -> Option<BrokerId> {
        self.inner
            .metadata
            .read()
            .ok()
            .and_then(|m| m.leader(topic, partition).ok().map(|b| b.id))
    }

    /// The leader of `topic`/`partition` from the cache, refreshing it once when unknown.
    ///
    /// # Errors
    ///
    /// As [`ClusterMetadata::leader`] after the refresh.
    pub async fn leader(&self, topic: &str, partition: i32) -> Result<BrokerInfo, ClientError> {
        let cached = self
            .inner
            .metadata
            .read()
            .ok()
            .and_then(|m| m.leader(topic, partition).ok().cloned());
        if let Some(leader) = cached {
            return Ok(leader);
        }
        self.refresh_metadata(&[topic]).await?;
        let meta = self
            .inner
            .metadata
            .read()
            .map_err(|_| ClientError::Closed("metadata lock poisoned".into()))?;
        meta.leader(topic, partition).cloned()
    }

    /// The connection to broker `id`, opened when needed.
    ///
    /// # Errors
    ///
    /// [`ClientError::InvalidArgument`] for a broker not in the metadata, and
    /// the errors of [`Connection::connect`].
    pub async fn broker_connection(&self, id: BrokerId) -> Result<Arc<Connection>, ClientError> {
        let addr = self
            .inner
            .metadata
            .read()
            .ok()
            .and_then(|m| m.brokers.get(&id).map(BrokerInfo::addr))
            .ok_or_else(|| {
                ClientError::InvalidArgument(format!("broker {id} is not in the metadata"))
            })?;
        self.connection(&addr).await
    }

    /// The connection to `addr` (`host:port`), opened when needed.
    ///
    /// # Errors
    ///
    /// As [`Connection::connect`].
    pub async fn connection(&self, addr: &str) -> Result<Arc<Connection>, ClientError> {
        let mut connections = self.inner.connections.lock().await;
        if let Some(connection) = connections.get(addr).filter(|c| !c.is_closed()) {
            return Ok(Arc::clone(connection));
        }
        let connection = Arc::new(
            Connection::connect_counted(
                addr,
                &self.inner.config.connection,
                Arc::clone(&self.inner.counts),
            )
            .await?,
        );
        connections.insert(addr.to_owned(), Arc::clone(&connection));
        Ok(connection)
    }

    /// A connection to any broker: an open one if there is one, else the
    /// known brokers and then the bootstrap list in turn.
    ///
    /// # Errors
    ///
    /// The last connection error when no broker is reachable.
    pub async fn any_connection(&self) -> Result<Arc<Connection>, ClientError> {
        {
            let connections = self.inner.connections.lock().await;
            if let Some(connection) = connections.values().find(|c| !c.is_closed()) {
                return Ok(Arc::clone(connection));
            }
        }
        let mut candidates: Vec<String> = self
            .inner
            .metadata
            .read()
            .map(|m| {
                let mut brokers: Vec<_> = m.brokers.values().collect();
                brokers.sort_by_key(|b| b.id);
                brokers.into_iter().map(BrokerInfo::addr).collect()
            })
            .unwrap_or_default();
        candidates.extend(self.inner.bootstrap.iter().cloned());
        let mut last_error = ClientError::InvalidArgument("no brokers known".into());
        for addr in candidates {
            match self.connection(&addr).await {
                Ok(connection) => return Ok(connection),
                Err(e) => last_error = e,
            }
        }
        Err(last_error)
    }

    /// Sends `request` to any broker in its negotiated version.
    ///
    /// # Errors
    ///
    /// As [`Client::any_connection`] and [`Connection::send`].
    pub async fn send_any<R: Request>(&self, request: &R) -> Result<R::Response, ClientError> {
        self.any_connection().await?.send(request).await
    }

    /// Sends `request` to broker `id`.
    ///
    /// # Errors
    ///
    /// As [`Client::broker_connection`] and [`Connection::send`].
    pub async fn send_to<R: Request>(
        &self,
        id: BrokerId,
        request: &R,
    ) -> Result<R::Response, ClientError> {
        self.broker_connection(id).await?.send(request).await
    }

    pub(crate) fn cached_coordinator(&self, key: &str, key_type: i8) -> Option<BrokerInfo> {
        self.inner
            .coordinators
            .lock()
            .ok()
            .and_then(|c| c.get(&(key.to_owned(), key_type)).cloned())
    }

    pub(crate) fn cache_coordinator(&self, key: &str, key_type: i8, broker: BrokerInfo) {
        if let Ok(mut c) = self.inner.coordinators.lock() {
            c.insert((key.to_owned(), key_type), broker);
        }
    }

    pub(crate) fn forget_coordinator(&self, key: &str, key_type: i8) {
        if let Ok(mut c) = self.inner.coordinators.lock() {
            c.remove(&(key.to_owned(), key_type));
        }
    }

    pub(crate) fn inner_metadata_write(
        &self,
    ) -> Result<std::sync::RwLockWriteGuard<'_, ClusterMetadata>, ClientError> {
        self.inner
            .metadata
            .write()
            .map_err(|_| ClientError::Closed("metadata lock poisoned".into()))
    }

    /// The connection for controller requests (CreateTopics, DeleteTopics):
    /// the controller when the metadata names a known broker, else any broker
    /// (KRaft brokers forward these requests).
    pub(crate) async fn controller_connection(&self) -> Result<Arc<Connection>, ClientError> {
        let controller = self
            .inner
            .metadata
            .read()
            .ok()
            .and_then(|m| m.controller.filter(|c| m.brokers.contains_key(c)));
        match controller {
            Some(id) => match self.broker_connection(id).await {
                Ok(connection) => Ok(connection),
                Err(_) => self.any_connection().await,
            },
            None => self.any_connection().await,
        }
    }
}
