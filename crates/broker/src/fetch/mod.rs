//! Fetch: reads with long polling, sizes, topic ids, sessions and a memory
//! budget.
//!
//! A fetch resolves its partitions to their [`PartitionStorage`] seams and
//! reads them all in one trip to the blocking pool, in the client's order
//! (a session's order for an incremental fetch, see [`session`]). A
//! partition whose data lies in a slower store (the remote tier) hands back
//! a future; those run side by side and are awaited together, each bounded
//! by its store. A slow one never holds up the partitions that were read at
//! once: when those have data, the slower reads get until the fetch's
//! deadline and then answer empty (the client asks again). If fewer than `min_bytes` came back and `max_wait_ms` has not
//! passed, the fetch parks on the partitions it reads — an append elsewhere
//! on the broker does not wake it — and reads again when one of them
//! changes, or answers at the deadline.
//!
//! Sizes follow Kafka: a response holds at most `min(max_bytes,
//! fetch.max.bytes)` bytes and a partition at most its
//! `partition_max_bytes`, except that the first partition with data always
//! returns one whole batch (KIP-74), so a batch larger than the limits
//! cannot stall a consumer. Before reading, a fetch takes what it may
//! allocate from the broker-wide budget ([`budget`]) and holds the bytes it
//! read until its response has been written.
//!
//! On a connection that can send from the page cache (every client
//! connection, see [`crate::network::writer`]), and for a version whose
//! records need no conversion ([`convert`]), local partitions answer with
//! slices of their segment files instead of bytes: the response is encoded
//! around them ([`zero_copy`]) and the records go to the socket with
//! `sendfile` (plain TCP) or are read and encrypted a chunk at a time
//! (TLS), holding no memory. Remote-tier and diskless reads answer bytes; a
//! response with many of them is sent in parts too, each partition's
//! records written from the buffer they were read into, on any connection.

pub mod budget;
pub mod convert;
pub mod session;
pub mod zero_copy;

use {
    crate::{
        blocking,
        broker::Broker,
        config::BrokerConfig,
        handlers::Reply,
        network::{codec::encode_response, writer::Parts},
        partition::{Isolation, Offsets, PartitionStorage, Read, ReadRequest, ReadResult, Records},
    },
    budget::MemoryUnits,
    bytes::Bytes,
    futures_util::future::{join_all, select_all},
    kafka_protocol::{
        error::ResponseError,
        messages::{
            ApiKey, FetchRequest, FetchResponse, TopicName,
            fetch_response::{AbortedTransaction, FetchableTopicResponse, PartitionData},
        },
        protocol::StrBytes,
    },
    session::{CachedPartition, Sent, SessionPartitions, TopicRef},
    std::{pin::Pin, sync::Arc, time::Duration},
    tokio::time::Instant,
    zero_copy::FileRecords,
};

/// Isolation level `READ_COMMITTED` in Fetch and ListOffsets.
pub const READ_COMMITTED: i8 = 1;

/// Bytes a response spends on one partition besides its records (index,
/// offsets, error code, aborted transactions): counted against the budget.
const PARTITION_OVERHEAD: usize = 64;

/// The broker's fetch settings (Kafka's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchSettings {
    /// `fetch.max.bytes`: the most a response holds (KIP-74's one batch aside).
    pub max_bytes: usize,
    /// `krabka.fetch.memory.max.bytes`: the budget of all responses being
    /// built or sent at once.
    pub memory_max_bytes: usize,
    /// `max.incremental.fetch.session.cache.slots`.
    pub session_slots: usize,
}

impl FetchSettings {
    /// The settings from the broker's validated configuration (the table
    /// in `config::defs` holds their defaults and ranges).
    #[must_use]
    pub fn from_config(config: &BrokerConfig) -> Self {
        let get = |name: &str, default: usize| -> usize {
            config
                .static_value(name)
                .0
                .and_then(|v| v.trim().parse::<u64>().ok())
                .and_then(|v| usize::try_from(v).ok())
                .unwrap_or(default)
        };
        Self {
            max_bytes: get("fetch.max.bytes", 57_671_680),
            memory_max_bytes: get("krabka.fetch.memory.max.bytes", 268_435_456),
            session_slots: get(
                "max.incremental.fetch.session.cache.slots",
                session::MAX_SESSIONS,
            ),
        }
    }
}

/// One partition of a fetch and what became of it.
struct Slot {
    key: (TopicRef, i32),
    wanted: CachedPartition,
    target: Result<Arc<dyn PartitionStorage>, i16>,
}

/// The answer for one partition, before it becomes wire structs.
enum Outcome {
    Data(ReadResult),
    /// An error code, with the partition's offsets when it is known.
    Failed(i16, Option<Offsets>),
}

impl Outcome {
    /// Record bytes on the wire.
    fn bytes(&self) -> usize {
        match self {
            Self::Data(r) => r.records.len(),
            Self::Failed(..) => 0,
        }
    }

    /// Record bytes held in memory (none for a file slice).
    fn memory(&self) -> usize {
        match self {
            Self::Data(r) => r.records.memory(),
            Self::Failed(..) => 0,
        }
    }
}

fn resolve(
    broker: &Broker,
    topic: &TopicRef,
    index: i32,
) -> Result<Arc<dyn PartitionStorage>, i16> {
    match topic {
        TopicRef::Name(name) => broker
            .partitions
            .storage(name, index)
            .ok_or_else(|| broker.missing_partition(name, index).code()),
        TopicRef::Id(id) => {
            let meta = broker
                .registry
                .by_id(*id)
                .ok_or(ResponseError::UnknownTopicId.code())?;
            broker
                .partitions
                .storage(&meta.name, index)
                .ok_or_else(|| broker.missing_partition(&meta.name, index).code())
        }
    }
}

/// What one read attempt gave: an outcome per slot (in order), and the
/// budget units it holds.
struct Attempt {
    outcomes: Vec<Outcome>,
    units: MemoryUnits,
}

/// Reads every slot once: the local reads in one trip to the blocking
/// pool, then the slower reads side by side. With `zero_copy`, local reads
/// answer file slices.
async fn read_once(
    broker: &Broker,
    slots: &[Slot],
    limit: usize,
    isolation: Isolation,
    deadline: Instant,
    zero_copy: bool,
) -> Attempt {
    let wanted_total: usize = slots
        .iter()
        .filter(|s| s.target.is_ok())
        .map(|s| usize::try_from(s.wanted.max_bytes.max(0)).unwrap_or(0))
        .fold(0usize, usize::saturating_add)
        .min(limit);
    // Reading costs the bytes twice while the response is encoded.
    let mut units = broker
        .fetch_memory
        .reserve(
            wanted_total
                .saturating_mul(2)
                .saturating_add(PARTITION_OVERHEAD.saturating_mul(slots.len())),
        )
        .await;
    let limit = wanted_total.min(units.held() / 2);
    let jobs: Vec<(Option<Arc<dyn PartitionStorage>>, CachedPartition)> = slots
        .iter()
        .map(|s| (s.target.as_ref().ok().cloned(), s.wanted))
        .collect();
    let reads = blocking::run(move || {
        // Bytes read, and bytes a slower read may still bring.
        let (mut total, mut reserved) = (0usize, 0usize);
        jobs.into_iter()
            .map(|(target, wanted)| {
                let target = target?;
                let budget = limit.saturating_sub(total.saturating_add(reserved));
                let request = ReadRequest {
                    offset: wanted.fetch_offset,
                    max_bytes: usize::try_from(wanted.max_bytes.max(0))
                        .unwrap_or(0)
                        .min(budget),
                    min_one_batch: total == 0 && reserved == 0,
                    isolation,
                    zero_copy,
                };
                let read = target.read(&request);
                match &read {
                    Ok(Read::Ready(r)) => total = total.saturating_add(r.records.len()),
                    Ok(Read::Later(_)) => reserved = reserved.saturating_add(request.max_bytes),
                    Err(_) => {}
                }
                Some((read, target))
            })
            .collect::<Vec<_>>()
    })
    .await;
    let Ok(reads) = reads else {
        let code = ResponseError::UnknownServerError.code();
        return Attempt {
            outcomes: slots
                .iter()
                .map(|s| Outcome::Failed(s.target.as_ref().err().copied().unwrap_or(code), None))
                .collect(),
            units,
        };
    };
    let mut outcomes: Vec<Option<Outcome>> = Vec::with_capacity(slots.len());
    let mut later = Vec::new();
    for (i, (slot, read)) in slots.iter().zip(reads).enumerate() {
        outcomes.push(match read {
            None => Some(Outcome::Failed(
                slot.target
                    .as_ref()
                    .err()
                    .copied()
                    .unwrap_or(ResponseError::UnknownServerError.code()),
                None,
            )),
            Some((Ok(Read::Ready(r)), _)) => Some(Outcome::Data(r)),
            Some((Ok(Read::Later(future)), target)) => {
                later.push((i, future, target));
                None
            }
            Some((Err(e), target)) => Some(Outcome::Failed(
                e.kafka_error_code(),
                Some(target.offsets()),
            )),
        });
    }
    if !later.is_empty() {
        // With local data in hand, a slower store has until the fetch's
        // deadline; then its partitions answer empty and the client asks
        // again. With nothing else to send, the fetch waits for it (each
        // store bounds its own reads, e.g. `remote.fetch.max.wait.ms`).
        let ready: usize = outcomes.iter().flatten().map(Outcome::bytes).sum();
        let cut = (ready > 0).then_some(deadline);
        let futures = later.into_iter().map(|(i, future, target)| async move {
            let result = match cut {
                Some(deadline) => tokio::time::timeout_at(deadline, future).await.ok(),
                None => Some(future.await),
            };
            (i, result, target)
        });
        for (i, result, target) in join_all(futures).await {
            if let Some(slot) = outcomes.get_mut(i) {
                *slot = Some(match result {
                    Some(Ok(r)) => Outcome::Data(r),
                    Some(Err(e)) => Outcome::Failed(e.kafka_error_code(), Some(target.offsets())),
                    None => Outcome::Data(ReadResult {
                        records: Bytes::new().into(),
                        aborted: None,
                        offsets: target.offsets(),
                    }),
                });
            }
        }
    }
    let outcomes: Vec<Outcome> = outcomes
        .into_iter()
        .map(|o| {
            o.unwrap_or(Outcome::Failed(
                ResponseError::UnknownServerError.code(),
                None,
            ))
        })
        .collect();
    // Keep what was read into memory (twice while encoding; file slices
    // hold none); a batch larger than the limit (KIP-74) takes its excess
    // if the budget has it.
    let read: usize = outcomes.iter().map(Outcome::memory).sum();
    let needed = read
        .saturating_mul(2)
        .saturating_add(PARTITION_OVERHEAD.saturating_mul(slots.len()));
    if needed > units.held() {
        let _ = units.try_grow(needed - units.held());
    }
    units.shrink_to(needed);
    Attempt { outcomes, units }
}

/// A fetch's answer and the budget its bytes hold.
#[derive(Debug)]
pub struct Fetched {
    /// The response; a partition whose records are in `files` has empty
    /// records here.
    pub response: FetchResponse,
    /// Units of the fetch memory budget its records hold.
    pub units: Option<MemoryUnits>,
    /// Records left in segment files, by their place in the response.
    pub files: Vec<FileRecords>,
}

/// Handles one Fetch request of version `version`, with every record in
/// the response.
pub async fn handle_fetch(
    broker: &Arc<Broker>,
    version: i16,
    request: FetchRequest,
) -> FetchResponse {
    fetch(broker, version, request, false).await.response
}

/// Handles one Fetch request and encodes its answer, with the
/// authorization's `fixup` applied (partitions the client may not read);
/// the frame holds the fetch's memory budget until it has been written.
/// With `zero_copy` (the connection can send files), local records are
/// sent from their segment files ([`Reply::Parts`]).
pub async fn answer(
    broker: &Arc<Broker>,
    version: i16,
    correlation_id: i32,
    request: FetchRequest,
    fixup: crate::security::authorize::Fixup,
    zero_copy: bool,
) -> Reply {
    let Fetched {
        response,
        mut units,
        files,
    } = fetch(broker, version, request, zero_copy).await;
    let mut response = fixup.fill(response);
    crate::metrics::fetch_answered(broker, &response, &files);
    if !files.is_empty() || in_memory_records(&response) >= PARTS_FROM_MEMORY {
        match zero_copy::encode(version, correlation_id, &response, files) {
            Ok(parts) => return Reply::Parts(Parts::new(parts, units)),
            Err(files) if files.is_empty() => {}
            Err(files) => {
                if let Err(reason) = read_files(&mut response, files, units.as_mut()).await {
                    return Reply::Close(format!("cannot read fetched records: {reason}"));
                }
            }
        }
    }
    match encode_response(ApiKey::Fetch, version, correlation_id, &response) {
        Ok(frame) => {
            drop(response);
            Reply::Frame(match units {
                Some(units) => units.attach(frame),
                None => frame,
            })
        }
        Err(reason) => Reply::Close(format!("cannot encode Fetch v{version} response: {reason}")),
    }
}

/// Records in memory (diskless objects, the remote tier, converted
/// batches) from this many bytes on leave as parts of their own rather
/// than copied into one frame buffer: that copy went into fresh memory,
/// faulted in page by page, at every large fetch.
const PARTS_FROM_MEMORY: usize = 64 * 1024;

/// Bytes of records the response holds in memory.
fn in_memory_records(response: &FetchResponse) -> usize {
    response
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .filter_map(|p| p.records.as_ref())
        .map(Bytes::len)
        .sum()
}

/// Reads file records into the response, for a response the zero-copy
/// encoder cannot write (see [`zero_copy::encode`]); the budget takes
/// their bytes if it has them.
async fn read_files(
    response: &mut FetchResponse,
    files: Vec<FileRecords>,
    units: Option<&mut MemoryUnits>,
) -> Result<(), String> {
    let read = blocking::run(move || {
        files
            .into_iter()
            .map(|f| f.slice.read().map(|bytes| (f.topic, f.partition, bytes)))
            .collect::<std::io::Result<Vec<_>>>()
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| e.to_string())?;
    let bytes: usize = read.iter().map(|(_, _, b)| b.len()).sum();
    if let Some(units) = units {
        let _ = units.try_grow(bytes.saturating_mul(2));
    }
    for (topic, partition, records) in read {
        if let Some(p) = response
            .responses
            .get_mut(topic)
            .and_then(|t| t.partitions.get_mut(partition))
        {
            p.records = Some(records);
        }
    }
    Ok(())
}

/// Handles one Fetch request; see the module docs. With `zero_copy`,
/// local records may come back as file slices.
pub async fn fetch(
    broker: &Arc<Broker>,
    version: i16,
    request: FetchRequest,
    zero_copy: bool,
) -> Fetched {
    // Old versions convert records in memory.
    let zero_copy = zero_copy && version >= convert::ZSTD_MIN_FETCH_VERSION;
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
                    return Fetched {
                        response,
                        units: None,
                        files: Vec::new(),
                    };
                }
            }
        };

    let slots: Vec<Slot> = partitions
        .iter()
        .map(|(key, wanted)| Slot {
            key: key.clone(),
            wanted: *wanted,
            target: resolve(broker, &key.0, key.1),
        })
        .collect();
    let limit = usize::try_from(request.max_bytes.max(0))
        .unwrap_or(usize::MAX)
        .min(broker.fetch_settings.max_bytes);
    let min_bytes = usize::try_from(request.min_bytes.max(0)).unwrap_or(0);
    let isolation = Isolation::from_wire(request.isolation_level);
    let wait = Duration::from_millis(u64::try_from(request.max_wait_ms.max(0)).unwrap_or(0));
    let deadline = Instant::now() + wait;
    let mut shutdown = broker.shutdown_signal();
    let targets: Vec<&Arc<dyn PartitionStorage>> = slots
        .iter()
        .filter_map(|s| s.target.as_ref().ok())
        .collect();
    let attempt = loop {
        // Listen before reading, so an append that lands during the read
        // wakes the wait below.
        let mut woken: Vec<Pin<Box<tokio::sync::futures::Notified<'_>>>> = targets
            .iter()
            .map(|t| Box::pin(t.changed().notified()))
            .collect();
        for w in &mut woken {
            w.as_mut().enable();
        }
        let attempt = read_once(broker, &slots, limit, isolation, deadline, zero_copy).await;
        let total: usize = attempt.outcomes.iter().map(Outcome::bytes).sum();
        let any_error = attempt
            .outcomes
            .iter()
            .any(|o| matches!(o, Outcome::Failed(..)));
        if total >= min_bytes || any_error || Instant::now() >= deadline || *shutdown.borrow() {
            break attempt;
        }
        // Nothing held while parked: the budget is for fetches that read.
        drop(attempt);
        let _parked = crate::metrics::parked_fetch();
        let changed = async {
            if woken.is_empty() {
                std::future::pending::<()>().await;
            } else {
                select_all(woken.iter_mut()).await;
            }
        };
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => {}
            () = changed => {}
            _ = shutdown.changed() => {}
        }
    };
    drop(targets);
    let mut attempt = attempt;
    if version < convert::ZSTD_MIN_FETCH_VERSION {
        for_old_fetch_version(broker, version, &slots, &mut attempt.outcomes);
    }

    // In an incremental session only partitions with news are answered.
    let mut sent = Vec::new();
    let mut topics: Vec<FetchableTopicResponse> = Vec::new();
    let mut files = Vec::new();
    for (slot, outcome) in slots.into_iter().zip(attempt.outcomes) {
        let bytes = outcome.bytes();
        let (data, file) = partition_data(slot.key.1, outcome, isolation);
        let values = (
            data.high_watermark,
            data.last_stable_offset,
            data.log_start_offset,
        );
        if incremental
            && bytes == 0
            && data.error_code == 0
            && slot.wanted.last_sent == Some(values)
        {
            continue;
        }
        if session_id != 0 {
            sent.push(Sent {
                key: slot.key.clone(),
                values,
                had_records: bytes > 0,
            });
        }
        let (name, id) = match &slot.key.0 {
            TopicRef::Name(n) => (n.clone(), uuid::Uuid::nil()),
            TopicRef::Id(id) => (String::new(), *id),
        };
        let index = data.partition_index;
        match topics.last_mut() {
            Some(t) if t.topic.0.as_str() == name && t.topic_id == id => t.partitions.push(data),
            _ => {
                let mut t = FetchableTopicResponse::default();
                t.topic = TopicName(StrBytes::from_string(name));
                t.topic_id = id;
                t.partitions.push(data);
                topics.push(t);
            }
        }
        if let Some(slice) = file {
            files.push(FileRecords {
                topic: topics.len() - 1,
                partition: topics.last().map_or(0, |t| t.partitions.len() - 1),
                index,
                slice,
            });
        }
    }
    if session_id != 0 {
        broker.fetch_sessions.record_sent(session_id, &sent);
    }
    response.session_id = session_id;
    response.responses = topics;
    Fetched {
        response,
        units: Some(attempt.units),
        files,
    }
}

/// Applies [`convert::for_fetch_version`] to what was read for a client of
/// an old Fetch version.
fn for_old_fetch_version(broker: &Broker, version: i16, slots: &[Slot], outcomes: &mut [Outcome]) {
    for (slot, outcome) in slots.iter().zip(outcomes.iter_mut()) {
        let Outcome::Data(read) = outcome else {
            continue;
        };
        // The topic's effective `compression.type`, whatever stores it.
        let meta = match &slot.key.0 {
            TopicRef::Name(n) => broker.registry.get(n),
            TopicRef::Id(id) => broker.registry.by_id(*id),
        };
        let Some(meta) = meta else {
            // A client of these versions must never be sent v2 batches.
            if version < convert::V2_MIN_FETCH_VERSION {
                let offsets = read.offsets;
                *outcome =
                    Outcome::Failed(ResponseError::UnknownTopicOrPartition.code(), Some(offsets));
            }
            continue;
        };
        let compression =
            crate::topics::config::log_config(&broker.config, &broker.registry, &meta.configs)
                .0
                .compression_type;
        // These versions read bytes (see `fetch`), never file slices.
        let Records::Bytes(records) = std::mem::take(&mut read.records) else {
            *outcome =
                Outcome::Failed(ResponseError::UnknownServerError.code(), Some(read.offsets));
            continue;
        };
        let converted =
            convert::for_fetch_version(version, compression, records).and_then(|records| {
                if version >= convert::V2_MIN_FETCH_VERSION {
                    return Ok(records);
                }
                let downconversion = crate::topics::config::resolve_topic(
                    &broker.config,
                    &broker.registry,
                    &meta.configs,
                    "message.downconversion.enable",
                )
                .value
                .is_none_or(|v| v.eq_ignore_ascii_case("true"));
                convert::to_message_format(
                    version,
                    downconversion,
                    slot.wanted.fetch_offset,
                    slot.wanted.max_bytes,
                    &records,
                )
            });
        match converted {
            Ok(records) => read.records = Records::Bytes(records),
            Err(code) => *outcome = Outcome::Failed(code, Some(read.offsets)),
        }
    }
}

/// The wire struct of one partition's answer, and its records when they
/// stay in a segment file (the struct then has empty records).
fn partition_data(
    index: i32,
    outcome: Outcome,
    isolation: Isolation,
) -> (PartitionData, Option<krabka_log::FileSlice>) {
    let mut file = None;
    let mut data = PartitionData::default();
    data.partition_index = index;
    data.high_watermark = -1;
    data.last_stable_offset = -1;
    data.log_start_offset = -1;
    data.preferred_read_replica = kafka_protocol::messages::BrokerId(-1);
    data.records = Some(Bytes::new());
    let set_offsets = |data: &mut PartitionData, offsets: &Offsets| {
        data.high_watermark = offsets.high_watermark;
        data.last_stable_offset = offsets.last_stable;
        data.log_start_offset = offsets.log_start;
    };
    match outcome {
        Outcome::Data(read) => {
            set_offsets(&mut data, &read.offsets);
            data.records = Some(match read.records {
                Records::Bytes(bytes) => bytes,
                Records::File(slice) => {
                    file = Some(slice);
                    Bytes::new()
                }
            });
            if isolation == Isolation::ReadCommitted {
                data.aborted_transactions = Some(
                    read.aborted
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
        }
        Outcome::Failed(code, offsets) => {
            data.error_code = code;
            if let Some(offsets) = offsets {
                set_offsets(&mut data, &offsets);
            }
        }
    }
    (data, file)
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
