//! Fetch: reads with long polling, sizes, topic ids and sessions.
//!
//! A fetch reads every requested partition once; if fewer than `min_bytes`
//! came back and `max_wait_ms` has not passed, it waits for the next append
//! anywhere on the broker (or the deadline) and reads again. `max_bytes` and
//! `partition_max_bytes` are soft limits as in Kafka (KIP-74): the first
//! non-empty partition always returns at least one whole batch, so a batch
//! larger than the limits cannot stall a consumer.

pub mod convert;
pub mod session;

use {
    crate::{broker::Broker, partition::Partition},
    bytes::Bytes,
    kafka_protocol::{
        error::ResponseError,
        messages::{
            FetchRequest, FetchResponse, TopicName,
            fetch_response::{AbortedTransaction, FetchableTopicResponse, PartitionData},
        },
        protocol::StrBytes,
    },
    session::{CachedPartition, SessionPartitions, TopicRef},
    std::{sync::Arc, time::Duration},
    tokio::time::Instant,
};

/// Isolation level `READ_COMMITTED` in Fetch and ListOffsets.
pub const READ_COMMITTED: i8 = 1;

/// The answer for one partition, before it becomes wire structs.
#[derive(Debug, Clone)]
struct PartitionResult {
    key: (TopicRef, i32),
    data: PartitionData,
    bytes: usize,
}

fn resolve(broker: &Broker, topic: &TopicRef, index: i32) -> Result<Arc<Partition>, i16> {
    match topic {
        TopicRef::Name(name) => broker
            .partitions
            .get(name, index)
            .ok_or_else(|| broker.missing_partition(name, index).code()),
        TopicRef::Id(id) => {
            let meta = broker
                .registry
                .by_id(*id)
                .ok_or(ResponseError::UnknownTopicId.code())?;
            broker
                .partitions
                .get(&meta.name, index)
                .ok_or_else(|| broker.missing_partition(&meta.name, index).code())
        }
    }
}

async fn read_partition(
    broker: &Broker,
    version: i16,
    key: &(TopicRef, i32),
    wanted: CachedPartition,
    budget: usize,
    first: bool,
    isolation: i8,
) -> PartitionResult {
    let mut data = PartitionData::default();
    data.partition_index = key.1;
    data.high_watermark = -1;
    data.last_stable_offset = -1;
    data.log_start_offset = -1;
    data.preferred_read_replica = kafka_protocol::messages::BrokerId(-1);
    data.records = Some(Bytes::new());
    let partition = match resolve(broker, &key.0, key.1) {
        Ok(p) => p,
        Err(code) => {
            data.error_code = code;
            return PartitionResult {
                key: key.clone(),
                data,
                bytes: 0,
            };
        }
    };
    let log = Arc::clone(&partition.log);
    let limit = usize::try_from(wanted.max_bytes.max(0))
        .unwrap_or(0)
        .min(budget);
    let fetch_offset = wanted.fetch_offset;
    let read = tokio::task::spawn_blocking(move || {
        let hw = log.log_end_offset();
        let lso = log.last_stable_offset();
        let upper = if isolation == READ_COMMITTED { lso } else { hw };
        let result = log.read(fetch_offset, limit, upper, first);
        let aborted = if isolation == READ_COMMITTED {
            log.aborted_transactions(fetch_offset, upper).ok()
        } else {
            None
        };
        (hw, lso, log.log_start_offset(), result, aborted)
    })
    .await;
    let Ok((hw, lso, log_start, result, aborted)) = read else {
        data.error_code = ResponseError::UnknownServerError.code();
        return PartitionResult {
            key: key.clone(),
            data,
            bytes: 0,
        };
    };
    data.high_watermark = hw;
    data.last_stable_offset = lso;
    data.log_start_offset = log_start;
    let upper = if isolation == READ_COMMITTED { lso } else { hw };
    let (log_start, result, remote_aborted) = crate::remote::fetch::below_local_start(
        broker,
        &partition,
        fetch_offset,
        limit,
        first,
        (upper, isolation == READ_COMMITTED),
        log_start,
        result,
    )
    .await;
    // A read served by the remote tier reports the remote transaction indexes.
    let aborted = remote_aborted.or(aborted);
    data.log_start_offset = log_start;
    let compression_type = partition.log.config().compression_type;
    let result = result.map(|mut info| {
        let records = std::mem::take(&mut info.records);
        convert::for_fetch_version(version, compression_type, records).map(|records| {
            info.records = records;
            info
        })
    });
    match result {
        Ok(Err(code)) => {
            data.error_code = code;
            PartitionResult {
                key: key.clone(),
                data,
                bytes: 0,
            }
        }
        Ok(Ok(info)) => {
            data.log_start_offset = info.log_start_offset.min(log_start);
            let bytes = info.records.len();
            data.records = Some(info.records);
            if isolation == READ_COMMITTED {
                data.aborted_transactions = Some(
                    aborted
                        .unwrap_or_default()
                        .into_iter()
                        .map(|a| {
                            let mut t = AbortedTransaction::default();
                            t.producer_id = kafka_protocol::messages::ProducerId(a.producer_id.0);
                            t.first_offset = a.first_offset;
                            t
                        })
                        .collect(),
                );
            }
            PartitionResult {
                key: key.clone(),
                data,
                bytes,
            }
        }
        Err(e) => {
            data.error_code = e.kafka_error_code();
            PartitionResult {
                key: key.clone(),
                data,
                bytes: 0,
            }
        }
    }
}

/// Handles one Fetch request of version `version`.
pub async fn handle_fetch(
    broker: &Arc<Broker>,
    version: i16,
    request: FetchRequest,
) -> FetchResponse {
    let mut response = FetchResponse::default();
    let by_id = version >= 13;
    let topic_ref = |name: &TopicName, id: uuid::Uuid| {
        if by_id {
            TopicRef::Id(id)
        } else {
            TopicRef::Name(name.0.to_string())
        }
    };
    let mut requested: Vec<((TopicRef, i32), i64, i32)> = Vec::new();
    for topic in &request.topics {
        for p in &topic.partitions {
            requested.push((
                (topic_ref(&topic.topic, topic.topic_id), p.partition),
                p.fetch_offset,
                p.partition_max_bytes,
            ));
        }
    }
    let forgotten: Vec<(TopicRef, i32)> = request
        .forgotten_topics_data
        .iter()
        .flat_map(|t| {
            let r = topic_ref(&t.topic, t.topic_id);
            t.partitions.iter().map(move |p| (r.clone(), *p))
        })
        .collect();

    // Session handling (sessions exist from Fetch v7).
    let (session_id, incremental, partitions): (i32, bool, SessionPartitions) =
        if version < 7 || request.session_epoch == -1 {
            if request.session_id != 0 {
                broker.fetch_sessions.remove(request.session_id);
            }
            (0, false, to_partitions(requested))
        } else if request.session_epoch == 0 {
            if request.session_id != 0 {
                broker.fetch_sessions.remove(request.session_id);
            }
            let parts = to_partitions(requested);
            let id = broker.fetch_sessions.create(parts.clone());
            (id, false, parts)
        } else {
            match broker.fetch_sessions.update(
                request.session_id,
                request.session_epoch,
                requested,
                &forgotten,
            ) {
                Ok(parts) => (request.session_id, true, parts),
                Err(e) => {
                    response.error_code = e.code();
                    response.session_id = 0;
                    return response;
                }
            }
        };

    let max_bytes = usize::try_from(request.max_bytes.max(0)).unwrap_or(usize::MAX);
    let min_bytes = usize::try_from(request.min_bytes.max(0)).unwrap_or(0);
    let wait = Duration::from_millis(u64::try_from(request.max_wait_ms.max(0)).unwrap_or(0));
    let deadline = Instant::now() + wait;
    let mut appended = broker.partitions.subscribe();
    let mut shutdown = broker.shutdown_signal();
    let results = loop {
        // Mark the current append generation as seen before reading, so an
        // append that lands during the read wakes the next wait.
        appended.borrow_and_update();
        let mut results = Vec::with_capacity(partitions.len());
        let mut total = 0usize;
        let mut any_error = false;
        for (key, wanted) in &partitions {
            let budget = max_bytes.saturating_sub(total);
            let r = read_partition(
                broker,
                version,
                key,
                *wanted,
                budget,
                total == 0,
                request.isolation_level,
            )
            .await;
            total = total.saturating_add(r.bytes);
            any_error |= r.data.error_code != 0;
            results.push(r);
        }
        if total >= min_bytes || any_error || Instant::now() >= deadline || *shutdown.borrow() {
            break results;
        }
        let _parked = crate::metrics::parked_fetch();
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => {}
            changed = appended.changed() => { if changed.is_err() { break results; } }
            _ = shutdown.changed() => {}
        }
    };

    // In an incremental session only partitions with news are answered.
    let mut sent = Vec::new();
    let mut topics: Vec<FetchableTopicResponse> = Vec::new();
    for r in results {
        let values = (
            r.data.high_watermark,
            r.data.last_stable_offset,
            r.data.log_start_offset,
        );
        if incremental {
            let previous = partitions.get(&r.key).and_then(|c| c.last_sent);
            if r.bytes == 0 && r.data.error_code == 0 && previous == Some(values) {
                continue;
            }
        }
        if session_id != 0 {
            sent.push((r.key.clone(), values));
        }
        let (name, id) = match &r.key.0 {
            TopicRef::Name(n) => (n.clone(), uuid::Uuid::nil()),
            TopicRef::Id(id) => (String::new(), *id),
        };
        match topics.last_mut() {
            Some(t) if t.topic.0.as_str() == name && t.topic_id == id => t.partitions.push(r.data),
            _ => {
                let mut t = FetchableTopicResponse::default();
                t.topic = TopicName(StrBytes::from_string(name));
                t.topic_id = id;
                t.partitions.push(r.data);
                topics.push(t);
            }
        }
    }
    if session_id != 0 {
        broker.fetch_sessions.record_sent(session_id, &sent);
    }
    response.session_id = session_id;
    response.responses = topics;
    response
}

fn to_partitions(requested: Vec<((TopicRef, i32), i64, i32)>) -> SessionPartitions {
    requested
        .into_iter()
        .map(|(key, fetch_offset, max_bytes)| {
            (
                key,
                CachedPartition {
                    fetch_offset,
                    max_bytes,
                    last_sent: None,
                },
            )
        })
        .collect()
}
