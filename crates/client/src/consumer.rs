//! Fetching: [`Client::fetch`] for one round of Fetch requests, and
//! [`Consumer`], which keeps a position per assigned partition (no group).
//!
//! One Fetch request per leader, all sent before any is awaited, so the
//! leaders work in parallel. Sessionless fetches (session id 0, epoch -1):
//! every request names all its partitions, which is simple and what a
//! group-less reader of a few partitions needs. Fetch v13+ names topics by id,
//! taken from the metadata; without ids the client stays at v12.

use {
    crate::{
        Client, ClientError,
        admin::{duration_ms, topic_name},
        records::{
            AbortedTransaction, ConsumerRecord, IsolationLevel, decode_fetched, next_fetch_offset,
        },
    },
    bytes::Bytes,
    kafka_protocol::messages::{
        ApiKey, FetchRequest,
        fetch_request::{FetchPartition, FetchTopic},
    },
    krabka_ids::{BrokerId, ProducerId, TopicId},
    std::{collections::BTreeMap, time::Duration},
};

/// Settings of a fetch, named after Kafka's consumer configs.
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    /// `isolation.level` (default read_uncommitted).
    pub isolation: IsolationLevel,
    /// `fetch.max.wait.ms` (default 500 ms).
    pub max_wait: Duration,
    /// `fetch.min.bytes` (default 1).
    pub min_bytes: i32,
    /// `fetch.max.bytes` (default 50 MiB).
    pub max_bytes: i32,
    /// `max.partition.fetch.bytes` (default 1 MiB).
    pub partition_max_bytes: i32,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        Self {
            isolation: IsolationLevel::ReadUncommitted,
            max_wait: Duration::from_millis(500),
            min_bytes: 1,
            max_bytes: 50 * 1024 * 1024,
            partition_max_bytes: 1024 * 1024,
        }
    }
}

/// One partition to fetch from an offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionFetch {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Offset to read from.
    pub offset: i64,
}

/// One partition's fetch result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Records at or after the fetch offset (aborted ones removed under read_committed).
    pub records: Vec<ConsumerRecord>,
    /// The offset to fetch next.
    pub next_offset: i64,
    /// The partition's high watermark.
    pub high_watermark: i64,
    /// The partition's last stable offset (-1 when the broker did not send it).
    pub last_stable_offset: i64,
    /// The partition's log start offset (-1 when unknown).
    pub log_start_offset: i64,
    /// Bytes of record batches received for the partition.
    pub bytes: usize,
}

/// One partition's fetched batches, not yet decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawFetchedPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// The offset the fetch asked for.
    pub fetch_offset: i64,
    /// The isolation level of the fetch.
    pub isolation: IsolationLevel,
    /// The aborted transactions the broker listed (read_committed).
    pub aborted: Vec<AbortedTransaction>,
    /// The record batches as received (may end in a partial batch).
    pub records: Bytes,
    /// The partition's high watermark.
    pub high_watermark: i64,
    /// The partition's last stable offset (-1 when the broker did not send it).
    pub last_stable_offset: i64,
    /// The partition's log start offset (-1 when unknown).
    pub log_start_offset: i64,
}

impl RawFetchedPartition {
    /// The offset to fetch next: past the last complete batch, or the fetch
    /// offset when there was none. Reads only batch headers.
    #[must_use]
    pub fn next_offset(&self) -> i64 {
        next_fetch_offset(&self.records).map_or(self.fetch_offset, |n| n.max(self.fetch_offset))
    }

    /// Decodes the batches into records (read_committed filtering included).
    ///
    /// # Errors
    ///
    /// [`ClientError::Protocol`] for a batch that does not decode.
    pub fn decode(self) -> Result<FetchedPartition, ClientError> {
        let size = self.records.len();
        let decoded = decode_fetched(
            self.records,
            self.fetch_offset,
            self.isolation,
            &self.aborted,
        )?;
        Ok(FetchedPartition {
            topic: self.topic,
            partition: self.partition,
            records: decoded.records,
            next_offset: decoded
                .next_offset
                .map_or(self.fetch_offset, |n| n.max(self.fetch_offset)),
            high_watermark: self.high_watermark,
            last_stable_offset: self.last_stable_offset,
            log_start_offset: self.log_start_offset,
            bytes: size,
        })
    }
}

impl Client {
    /// Fetches each partition once from its offset and decodes the records;
    /// one result per partition, in the order given. Long-polls up to
    /// `config.max_wait` when no data is there.
    ///
    /// # Errors
    ///
    /// Leader lookup, connection and protocol errors for the whole call;
    /// per-partition Kafka errors (`OFFSET_OUT_OF_RANGE`, 1;
    /// `NOT_LEADER_OR_FOLLOWER`, 6; ...) and undecodable batches in the results.
    pub async fn fetch(
        &self,
        partitions: &[PartitionFetch],
        config: &ConsumerConfig,
    ) -> Result<Vec<Result<FetchedPartition, ClientError>>, ClientError> {
        Ok(self
            .fetch_raw(partitions, config)
            .await?
            .into_iter()
            .map(|raw| raw.and_then(RawFetchedPartition::decode))
            .collect())
    }

    /// Like [`Client::fetch`], without decoding: each partition's batches
    /// come back as received, with the offset to fetch next already known
    /// from the batch headers. A reader can send its next fetch at once and
    /// decode ([`RawFetchedPartition::decode`]) on another task meanwhile.
    ///
    /// # Errors
    ///
    /// As [`Client::fetch`], except that decoding errors come from `decode`.
    pub async fn fetch_raw(
        &self,
        partitions: &[PartitionFetch],
        config: &ConsumerConfig,
    ) -> Result<Vec<Result<RawFetchedPartition, ClientError>>, ClientError> {
        let mut by_leader: BTreeMap<BrokerId, Vec<usize>> = BTreeMap::new();
        let mut ids: BTreeMap<&str, Option<TopicId>> = BTreeMap::new();
        for (i, p) in partitions.iter().enumerate() {
            let leader = self.leader(&p.topic, p.partition).await?;
            by_leader.entry(leader.id).or_default().push(i);
            if !ids.contains_key(p.topic.as_str()) {
                ids.insert(p.topic.as_str(), self.topic(&p.topic).await?.id);
            }
        }
        let mut futures = Vec::with_capacity(by_leader.len());
        for (leader, indexes) in by_leader {
            let connection = self.broker_connection(leader).await?;
            let mut version = connection.version(ApiKey::Fetch)?;
            let all_ids = indexes.iter().all(|&i| {
                partitions
                    .get(i)
                    .and_then(|p| ids.get(p.topic.as_str()).copied().flatten())
                    .is_some()
            });
            if version >= 13 && !all_ids {
                version = 12;
            }
            let mut request = FetchRequest::default();
            request.replica_id = (-1).into();
            request.max_wait_ms = duration_ms(config.max_wait);
            request.min_bytes = config.min_bytes;
            request.max_bytes = config.max_bytes;
            request.isolation_level = config.isolation.code();
            let mut topics: Vec<FetchTopic> = Vec::new();
            for &i in &indexes {
                let Some(p) = partitions.get(i) else { continue };
                let mut fp = FetchPartition::default();
                fp.partition = p.partition;
                fp.fetch_offset = p.offset;
                fp.partition_max_bytes = config.partition_max_bytes;
                match topics.iter_mut().find(|t| t.topic.0.as_str() == p.topic) {
                    Some(t) => t.partitions.push(fp),
                    None => {
                        let mut t = FetchTopic::default();
                        t.topic = topic_name(&p.topic);
                        t.topic_id = ids
                            .get(p.topic.as_str())
                            .copied()
                            .flatten()
                            .unwrap_or_default();
                        t.partitions.push(fp);
                        topics.push(t);
                    }
                }
            }
            request.topics = topics;
            futures.push((
                indexes,
                version,
                connection.enqueue(&request, version, Some(config.max_wait))?,
            ));
        }
        let mut out: Vec<Option<Result<RawFetchedPartition, ClientError>>> =
            partitions.iter().map(|_| None).collect();
        for (indexes, version, future) in futures {
            let response = future.await?;
            ClientError::check(response.error_code, None, || "Fetch".into())?;
            for i in indexes {
                let Some(wanted) = partitions.get(i) else {
                    continue;
                };
                let topic_id = ids.get(wanted.topic.as_str()).copied().flatten();
                let found = response
                    .responses
                    .iter()
                    .filter(|t| {
                        if version >= 13 {
                            Some(t.topic_id) == topic_id
                        } else {
                            t.topic.0.as_str() == wanted.topic
                        }
                    })
                    .flat_map(|t| t.partitions.iter())
                    .find(|p| p.partition_index == wanted.partition);
                let result = match found {
                    None => Err(ClientError::Protocol(format!(
                        "Fetch answered nothing for {}-{}",
                        wanted.topic, wanted.partition
                    ))),
                    Some(data) => ClientError::check(data.error_code, None, || {
                        format!(
                            "Fetch {}-{} at {}",
                            wanted.topic, wanted.partition, wanted.offset
                        )
                    })
                    .map(|()| RawFetchedPartition {
                        topic: wanted.topic.clone(),
                        partition: wanted.partition,
                        fetch_offset: wanted.offset,
                        isolation: config.isolation,
                        aborted: data
                            .aborted_transactions
                            .iter()
                            .flatten()
                            .map(|a| AbortedTransaction {
                                first_offset: a.first_offset,
                                producer_id: ProducerId(a.producer_id.0),
                            })
                            .collect(),
                        records: data.records.clone().unwrap_or_default(),
                        high_watermark: data.high_watermark,
                        last_stable_offset: data.last_stable_offset,
                        log_start_offset: data.log_start_offset,
                    }),
                };
                if let Some(slot) = out.get_mut(i) {
                    *slot = Some(result);
                }
            }
        }
        Ok(out
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|| Err(ClientError::Protocol("partition was not fetched".into())))
            })
            .collect())
    }
}

/// Reads assigned partitions from chosen offsets, without a consumer group.
#[derive(Debug)]
pub struct Consumer {
    client: Client,
    config: ConsumerConfig,
    positions: BTreeMap<(String, i32), i64>,
}

impl Consumer {
    /// A consumer with no partitions assigned.
    #[must_use]
    pub fn new(client: Client, config: ConsumerConfig) -> Self {
        Self {
            client,
            config,
            positions: BTreeMap::new(),
        }
    }

    /// Reads `topic`/`partition` from `offset` on (replacing an earlier position).
    pub fn assign(&mut self, topic: &str, partition: i32, offset: i64) {
        self.positions.insert((topic.to_owned(), partition), offset);
    }

    /// Stops reading `topic`/`partition`.
    pub fn unassign(&mut self, topic: &str, partition: i32) {
        self.positions.remove(&(topic.to_owned(), partition));
    }

    /// The next offset that will be read from `topic`/`partition`.
    #[must_use]
    pub fn position(&self, topic: &str, partition: i32) -> Option<i64> {
        self.positions.get(&(topic.to_owned(), partition)).copied()
    }

    /// The assigned partitions with their positions.
    #[must_use]
    pub fn assignment(&self) -> Vec<PartitionFetch> {
        self.positions
            .iter()
            .map(|((topic, partition), offset)| PartitionFetch {
                topic: topic.clone(),
                partition: *partition,
                offset: *offset,
            })
            .collect()
    }

    /// Fetches once from every assigned partition and moves the positions
    /// past what was returned. Partitions without new data are left out.
    ///
    /// # Errors
    ///
    /// The errors of [`Client::fetch`], and the first partition error;
    /// positions of partitions that succeeded still advance.
    pub async fn poll(&mut self) -> Result<Vec<FetchedPartition>, ClientError> {
        let wanted = self.assignment();
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let results = match self.client.fetch(&wanted, &self.config).await {
            Ok(results) => results,
            Err(e) => {
                if e.needs_metadata_refresh() {
                    let _ = self.client.refresh_metadata(&[]).await;
                }
                return Err(e);
            }
        };
        let mut out = Vec::new();
        let mut first_error = None;
        for result in results {
            match result {
                Ok(fetched) => {
                    self.positions.insert(
                        (fetched.topic.clone(), fetched.partition),
                        fetched.next_offset,
                    );
                    if !fetched.records.is_empty() {
                        out.push(fetched);
                    }
                }
                Err(e) => {
                    if e.needs_metadata_refresh() {
                        let _ = self.client.refresh_metadata(&[]).await;
                    }
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) if out.is_empty() => Err(e),
            _ => Ok(out),
        }
    }
}
