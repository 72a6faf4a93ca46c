//! Produce: batches are handed to the partition's log exactly as sent; the
//! log validates them (CRC, sizes, `max.message.bytes`, idempotent
//! sequences and epochs, what compressed records inflate to), assigns
//! offsets and applies LogAppendTime. The message sets of Produce v0–v2
//! are first converted to v2 batches.
//!
//! On a single node every acks level means "written to this node's log":
//! acks=1 and acks=-1 both answer after the append; acks=-1 additionally
//! honours `min.insync.replicas` against an ISR of one. acks=0 gets no
//! answer, and a failed acks=0 append closes the connection (Kafka's way of
//! telling a producer that does not read answers).

use {
    crate::{broker::Broker, metrics, network::legacy::produce as legacy},
    kafka_protocol::{
        error::ResponseError,
        messages::{
            ProduceRequest, ProduceResponse, TopicName,
            produce_response::{
                BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
            },
        },
        protocol::StrBytes,
    },
    std::sync::Arc,
    tokio::sync::oneshot,
};

/// The result of a produce request: the answer, and whether any partition failed.
#[derive(Debug)]
pub struct ProduceOutcome {
    /// The answer (not sent for acks=0).
    pub response: ProduceResponse,
    /// The first failure, for the acks=0 close reason.
    pub failure: Option<String>,
}

fn partition_error(index: i32, code: i16, message: Option<String>) -> PartitionProduceResponse {
    let mut r = PartitionProduceResponse::default();
    r.index = index;
    r.error_code = code;
    r.base_offset = -1;
    r.log_append_time_ms = -1;
    r.log_start_offset = -1;
    r.error_message = message.map(StrBytes::from_string);
    r
}

/// A Produce request whose batches are queued at their partitions' logs,
/// so their order is fixed, but not necessarily appended yet.
pub struct QueuedProduce {
    by_id: bool,
    topics: Vec<TopicProduceResponse>,
    /// One slot per partition in request order: a ready answer, or None for
    /// the next finished append.
    slots: Vec<(usize, Option<PartitionProduceResponse>)>,
    pending: Vec<std::pin::Pin<Box<dyn Future<Output = PartitionProduceResponse> + Send>>>,
    accepted: Accepted,
}

/// When every partition of a queued produce has taken its batches: a
/// classic partition once they are appended, a diskless one once they are
/// in the object writer (long before the commit that answers them). The
/// connection reads further requests ahead against this, not against the
/// answer, so a producer pipelining to diskless partitions keeps the next
/// object filling while the last one commits.
#[derive(Debug, Default)]
pub struct Accepted {
    taken: Vec<oneshot::Receiver<()>>,
    diskless: bool,
}

impl Accepted {
    /// Whether the partitions take the batches before the answer: only
    /// when a diskless partition is among them (a classic partition takes
    /// them with its append, which is its answer), so a classic produce
    /// needs no separate wait.
    #[must_use]
    pub fn before_answer(&self) -> bool {
        self.diskless
    }

    /// Waits until every partition has taken its batches (or failed).
    pub async fn wait(self) {
        for taken in self.taken {
            // A dropped sender means the same: nothing more to take.
            let _ = taken.await;
        }
    }
}

impl std::fmt::Debug for QueuedProduce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueuedProduce")
            .field("appends", &self.pending.len())
            .finish_non_exhaustive()
    }
}

/// Checks a Produce request from client `client_id` and queues its batches
/// at their partitions' logs (see
/// [`crate::partition::Partition::queue_append`]); what cannot be appended
/// is answered at once. Must be called within a tokio runtime.
pub fn queue_produce(
    broker: &Arc<Broker>,
    version: i16,
    client_id: &str,
    mut request: ProduceRequest,
    txn_refused: Option<&(i16, String)>,
) -> QueuedProduce {
    let by_id = version >= 13;
    // Produce v0–v2 carries message sets: converted to v2 batches first,
    // within the broker's bound on inflating them.
    let mut conversions = if version <= legacy::MAX_VERSION {
        legacy::convert(&mut request, broker.config.decompressed_batch_max_bytes)
    } else {
        Vec::new()
    }
    .into_iter();
    let transactional = request
        .transactional_id
        .as_ref()
        .is_some_and(|t| !t.0.is_empty());
    let valid_acks = matches!(request.acks, -1..=1);
    // Kafka's request handler: transactional batches need a
    // transactional.id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for the
    // whole request).
    let unauthorized_txn = !transactional
        && crate::coordinator::txn::wire::has_transactional_records(
            request
                .topic_data
                .iter()
                .flat_map(|t| t.partition_data.iter().map(|p| p.records.as_ref())),
        );
    let mut topics: Vec<TopicProduceResponse> = Vec::new();
    let mut slots: Vec<(usize, Option<PartitionProduceResponse>)> = Vec::new();
    let mut pending: Vec<std::pin::Pin<Box<dyn Future<Output = PartitionProduceResponse> + Send>>> =
        Vec::new();
    let mut accepted = Accepted::default();
    for topic in request.topic_data {
        let mut topic_response = TopicProduceResponse::default();
        topic_response.name = topic.name.clone();
        topic_response.topic_id = topic.topic_id;
        let meta = if by_id {
            broker.registry.by_id(topic.topic_id)
        } else {
            broker.registry.get(&topic.name.0)
        };
        for data in topic.partition_data {
            let conversion = conversions.next().flatten();
            let refuse = |code: ResponseError, message: String| {
                partition_error(data.index, code.code(), Some(message))
            };
            let internal = meta
                .as_ref()
                .and_then(|m| crate::topics::names::produce_refusal(&m.name, client_id));
            let answer = if let Some(message) = internal {
                refuse(ResponseError::InvalidTopicException, message)
            } else if !valid_acks {
                refuse(
                    ResponseError::InvalidRequiredAcks,
                    format!("acks must be -1, 0 or 1, got {}", request.acks),
                )
            } else if unauthorized_txn {
                refuse(
                    ResponseError::TransactionalIdAuthorizationFailed,
                    "transactional records need a transactional.id".into(),
                )
            } else if let Some((code, message)) = conversion {
                refuse(code, message)
            } else if let Some((code, message)) = transactional
                .then_some(meta.as_ref())
                .flatten()
                .and_then(|m| {
                    crate::coordinator::txn::wire::check_produce(
                        broker,
                        version,
                        request
                            .transactional_id
                            .as_ref()
                            .map_or("", |t| t.0.as_str()),
                        &m.name,
                        data.index,
                        data.records.as_ref(),
                        txn_refused,
                    )
                })
            {
                partition_error(data.index, code, Some(message))
            } else if let Some(storage) = meta
                .as_ref()
                .and_then(|m| broker.partitions.get_diskless(&m.name, data.index))
            {
                // A diskless partition: the batches go to the shared object
                // writer, answered after the batch coordinator's commit.
                let records = data.records.unwrap_or_default();
                if let Some((code, message)) = refuse_records(version, &records) {
                    refuse(code, message)
                } else {
                    let (answer, taken) = append_diskless(storage, data.index, records);
                    pending.push(Box::pin(answer));
                    accepted.taken.push(taken);
                    accepted.diskless = true;
                    slots.push((topics.len(), None));
                    continue;
                }
            } else if let Some(partition) = meta
                .as_ref()
                .and_then(|m| broker.partitions.get(&m.name, data.index))
            {
                let records = data.records.unwrap_or_default();
                if let Some((code, message)) = refuse_records(version, &records) {
                    refuse(code, message)
                } else if request.acks == -1 && partition.extras().min_insync_replicas > 1 {
                    refuse(
                        ResponseError::NotEnoughReplicas,
                        format!(
                            "The size of the current ISR 1 is insufficient to satisfy the min.isr requirement of {}",
                            partition.extras().min_insync_replicas
                        ),
                    )
                } else {
                    let (taken, taken_rx) = oneshot::channel();
                    pending.push(Box::pin(append(partition, data.index, records, taken)));
                    accepted.taken.push(taken_rx);
                    slots.push((topics.len(), None));
                    continue;
                }
            } else if meta.is_none() && by_id {
                refuse(
                    ResponseError::UnknownTopicId,
                    "This server does not host this topic ID.".into(),
                )
            } else if let Some(reason) = meta
                .as_ref()
                .and_then(|m| broker.partitions.offline_reason(&m.name, data.index))
            {
                refuse(ResponseError::KafkaStorageError, reason)
            } else {
                refuse(
                    meta.as_ref()
                        .map_or(ResponseError::UnknownTopicOrPartition, |m| {
                            broker.missing_partition(&m.name, data.index)
                        }),
                    "This server does not host this topic-partition.".into(),
                )
            };
            slots.push((topics.len(), Some(answer)));
        }
        topics.push(topic_response);
    }
    QueuedProduce {
        by_id,
        topics,
        slots,
        pending,
        accepted,
    }
}

impl QueuedProduce {
    /// What tells when the partitions have taken the batches (see
    /// [`Accepted`]); taken once.
    pub fn take_accepted(&mut self) -> Accepted {
        std::mem::take(&mut self.accepted)
    }

    /// Waits for the queued appends and builds the answer.
    pub async fn answer(self) -> ProduceOutcome {
        let Self {
            by_id,
            mut topics,
            slots,
            pending,
            accepted: _,
        } = self;
        let mut failure = None;
        // Different partitions append side by side; a partition named twice
        // in one request was queued in the request's order.
        let mut appended = futures_util::future::join_all(pending).await.into_iter();
        for (topic_index, answer) in slots {
            let Some(answer) = answer.or_else(|| appended.next()) else {
                continue;
            };
            let Some(topic_response) = topics.get_mut(topic_index) else {
                continue;
            };
            if answer.error_code != 0 && failure.is_none() {
                failure = Some(format!(
                    "{}-{}: error {} {}",
                    topic_response.name.0,
                    answer.index,
                    answer.error_code,
                    answer.error_message.as_deref().unwrap_or("")
                ));
            }
            topic_response.partition_responses.push(answer);
        }
        if by_id {
            for t in &mut topics {
                t.name = TopicName(StrBytes::new());
            }
        }
        let mut response = ProduceResponse::default();
        response.responses = topics;
        ProduceOutcome { response, failure }
    }
}

/// Queues one partition's batches now; the future gives the append's
/// answer, and drops `taken` once the append is done.
fn append(
    partition: Arc<crate::partition::Partition>,
    index: i32,
    records: bytes::Bytes,
    taken: oneshot::Sender<()>,
) -> impl Future<Output = PartitionProduceResponse> + Send {
    let size = records.len();
    let appended = partition.queue_append(records);
    async move {
        let appended = appended.await;
        drop(taken);
        answer_append(&partition.topic, &*partition, index, size, appended)
    }
}

/// What every partition, classic or diskless, refuses in a produce request's
/// records before they reach its storage: none at all, or zstd below v7
/// (Kafka's `ProduceRequest.validateRecords`, KIP-110).
fn refuse_records(version: i16, records: &[u8]) -> Option<(ResponseError, String)> {
    if records.is_empty() {
        Some((
            ResponseError::CorruptMessage,
            "produce request carries no record batch".into(),
        ))
    } else if version < 7 && has_zstd_batch(records) {
        Some((
            ResponseError::UnsupportedCompressionType,
            format!(
                "Produce requests with version {version} are not allowed to use ZStandard compression"
            ),
        ))
    } else {
        None
    }
}

/// Queues one diskless partition's batches now; the future gives the
/// answer once they are committed, the receiver resolves once the object
/// writer holds them.
fn append_diskless(
    storage: Arc<crate::diskless::DisklessStorage>,
    index: i32,
    records: bytes::Bytes,
) -> (
    impl Future<Output = PartitionProduceResponse> + Send,
    oneshot::Receiver<()>,
) {
    let size = records.len();
    let (appended, taken) = storage.append_accepting(records);
    let answer = async move {
        let appended = appended.await;
        answer_append(&storage.topic, &*storage, index, size, appended)
    };
    (answer, taken)
}

fn answer_append(
    topic: &str,
    partition: &dyn std::fmt::Debug,
    index: i32,
    size: usize,
    appended: Result<Result<krabka_log::AppendInfo, krabka_log::LogError>, impl std::fmt::Display>,
) -> PartitionProduceResponse {
    match appended {
        Ok(Ok(info)) => {
            metrics::bytes_in(topic, size);
            metrics::messages_in(topic, info.record_count);
            let mut r = PartitionProduceResponse::default();
            r.index = index;
            r.base_offset = info.first_offset;
            r.log_append_time_ms = info.log_append_time.unwrap_or(-1);
            r.log_start_offset = info.log_start_offset;
            r
        }
        Ok(Err(e)) => {
            if matches!(e, krabka_log::LogError::DecompressedTooLarge { .. }) {
                // A client tried to make the broker inflate past its bound.
                tracing::warn!(
                    topic,
                    partition = index,
                    error = %e,
                    "refused a batch that inflates past krabka.decompressed.batch.max.bytes"
                );
            } else {
                tracing::debug!(partition = ?partition, error = %e, "append refused");
            }
            let mut r = partition_error(index, e.kafka_error_code(), Some(e.to_string()));
            if let krabka_log::LogError::RecordErrors { records, .. } = e {
                // KIP-467: the client fails exactly these records.
                r.record_errors = records
                    .into_iter()
                    .map(|e| {
                        let mut b = BatchIndexAndErrorMessage::default();
                        b.batch_index = e.batch_index;
                        b.batch_index_error_message = Some(StrBytes::from_string(e.message));
                        b
                    })
                    .collect();
            }
            r
        }
        Err(e) => partition_error(
            index,
            ResponseError::UnknownServerError.code(),
            Some(e.to_string()),
        ),
    }
}

/// Whether any batch of a partition's records is zstd-compressed (headers
/// only; the log checks the framing properly).
fn has_zstd_batch(records: &[u8]) -> bool {
    krabka_log::batch::BatchScan::new(records, false)
        .any(|(_, h)| h.compression() == Some(kafka_protocol::records::Compression::Zstd))
}
