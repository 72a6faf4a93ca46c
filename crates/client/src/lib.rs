//! `krabka-client`: a small async Kafka client on the `kafka-protocol` crate.
//!
//! It is what Krabka's own tools and libraries use to talk to a
//! Kafka-compatible cluster (Krabka or Apache Kafka): the bench tool, the
//! Kafka-backed remote-log-metadata event log, the coordination transport and
//! the broker's tests. Every request and response codec, and the v2 record
//! batch format, come from `kafka-protocol`; this crate adds the connection
//! handling (framing, pipelining, version negotiation), cluster metadata, and
//! the producer and consumer logic on top.
//!
//! - [`Connection`]: one pipelined TCP connection with negotiated API
//!   versions, optionally over TLS ([`TlsConfig`]) and authenticated with
//!   SASL PLAIN or SCRAM ([`SaslConfig`]).
//! - [`Client`]: bootstrap, metadata, per-broker connections, admin calls
//!   (create/delete topics, add partitions, list offsets, describe and
//!   alter configs, describe the cluster and its log dirs, list, describe
//!   and delete groups and their offsets, list transactions, describe
//!   producers) and the transactional calls (FindCoordinator,
//!   InitProducerId, AddPartitionsToTxn, EndTxn, DescribeTransactions).
//! - [`Producer`]: batching with `batch.size` and `linger.ms`, pipelined
//!   produce, acks 0/1/all, compression, idempotence; a future per record.
//! - [`Consumer`]: fetch from assigned partitions without a group, with
//!   read_committed filtering.
//! - [`GroupMember`]: membership of a classic consumer group (range
//!   assignor, heartbeats, commits under the generation).
//! - [`ClientError`]: one error type that keeps Kafka's error codes.
//! - [`RequestCounts`]: how many requests of each API a client has sent, so
//!   a test can hold a call to the round trips it promises.
//!
//! ```no_run
//! use krabka_client::{
//!     Client, ClientConfig, Consumer, ConsumerConfig, NewTopic, Producer, ProducerConfig,
//!     ProducerRecord,
//! };
//! use std::time::Duration;
//!
//! # async fn demo() -> Result<(), krabka_client::ClientError> {
//! let client = Client::connect(&["127.0.0.1:9092"], ClientConfig::default()).await?;
//! client.create_topic(&NewTopic::new("events", 3), Duration::from_secs(10)).await?;
//!
//! let producer = Producer::new(client.clone(), ProducerConfig::default()).await?;
//! let delivery = producer.send("events", None, ProducerRecord::keyed("k", "v")).await?;
//! let written = delivery.await?; // partition and offset
//!
//! let mut consumer = Consumer::new(client, ConsumerConfig::default());
//! consumer.assign("events", written.partition, written.offset);
//! for partition in consumer.poll().await? {
//!     for record in partition.records {
//!         println!("{}: {:?}", record.offset, record.value);
//!     }
//! }
//! producer.close().await;
//! # Ok(())
//! # }
//! ```

mod admin;
mod client;
mod cluster;
mod configs;
pub mod connection;
mod consumer;
mod counts;
mod error;
pub mod frame;
mod group_member;
mod groups;
mod metadata;
pub mod partitioner;
pub mod producer;
pub mod records;
pub mod sasl;
pub mod scram;
#[cfg(test)]
mod test_peer;
pub mod tls;
mod txn;
pub mod versions;

pub use {
    admin::{ListedOffset, NewTopic, OffsetSpec},
    client::{Client, ClientConfig},
    cluster::{
        ActiveProducer, ClusterDescription, ListedTransaction, LogDirDescription, LogDirPartition,
    },
    configs::{
        AlterConfigOp, ConfigEntry, ConfigResource, ConfigSynonym, ResourceKind,
        config_source_name, config_type_name,
    },
    connection::{Connection, ConnectionConfig},
    consumer::{Consumer, ConsumerConfig, FetchedPartition, PartitionFetch, RawFetchedPartition},
    counts::RequestCounts,
    error::{
        ClientError, INVALID_PRODUCER_EPOCH, PRODUCER_FENCED, TRANSACTION_COORDINATOR_FENCED,
        error_name,
    },
    group_member::{GroupMember, GroupMemberConfig, range_assign},
    groups::{
        CommittedOffset, GroupDescription, ListedGroup, MemberDescription, decode_assignment,
        decode_subscription, encode_assignment, encode_subscription,
    },
    kafka_protocol::{
        messages::ApiKey,
        records::{Compression, TimestampType},
    },
    metadata::{BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo},
    producer::{Acks, DeliveryFuture, ProduceOutcome, Producer, ProducerConfig, RecordMetadata},
    records::{AbortedTransaction, BatchProducer, ConsumerRecord, IsolationLevel, ProducerRecord},
    sasl::{SaslConfig, SaslMechanism},
    scram::ScramMechanism,
    tls::{TlsConfig, TlsOptions},
    txn::{CoordinatorType, ProducerIdAndEpoch, TransactionDescription, TransactionalProducer},
};
