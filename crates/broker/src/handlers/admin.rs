//! Topic administration: CreateTopics, DeleteTopics, CreatePartitions,
//! DeleteRecords and DescribeLogDirs.
//!
//! Registry changes and log creation/deletion touch the disk, so they run on
//! the blocking pool. A topic is first recorded in the registry and then its
//! logs are created; if that fails the registry entry is rolled back.

use {
    crate::{
        broker::Broker,
        config::defs,
        diskless::DisklessStorage,
        partition::PartitionStorage,
        topics::{RegistryRefusal, TopicMeta, config as topic_config, names},
    },
    kafka_protocol::{
        error::ResponseError,
        messages::{
            BrokerId, CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
            CreateTopicsResponse, DeleteRecordsRequest, DeleteRecordsResponse, DeleteTopicsRequest,
            DeleteTopicsResponse, DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName,
            create_partitions_response::CreatePartitionsTopicResult,
            create_topics_response::{CreatableTopicConfigs, CreatableTopicResult},
            delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult},
            delete_topics_response::DeletableTopicResult,
            describe_log_dirs_response::{
                DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
            },
        },
        protocol::StrBytes,
    },
    std::{collections::BTreeMap, sync::Arc},
};

/// A refused admin operation: Kafka error code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminError {
    /// Kafka's error code.
    pub code: i16,
    /// Human-readable message.
    pub message: String,
}

impl AdminError {
    pub(crate) fn new(error: ResponseError, message: impl Into<String>) -> Self {
        Self {
            code: error.code(),
            message: message.into(),
        }
    }
}

impl From<RegistryRefusal> for AdminError {
    fn from(refusal: RegistryRefusal) -> Self {
        let code = match &refusal {
            RegistryRefusal::Exists => ResponseError::TopicAlreadyExists,
            RegistryRefusal::Collides(_) => ResponseError::InvalidTopicException,
            RegistryRefusal::Unknown => ResponseError::UnknownTopicOrPartition,
            RegistryRefusal::Invalid(_) => ResponseError::InvalidPartitions,
            RegistryRefusal::Storage(_) => ResponseError::KafkaStorageError,
        };
        Self::new(code, refusal.to_string())
    }
}

fn check_assignment(broker: &Broker, replicas: &[BrokerId]) -> Result<(), AdminError> {
    if let Some(node) = broker.cluster.get()
        && let [one] = replicas
        && node.is_live(krabka_ids::BrokerId(one.0))
    {
        // Cluster mode: one replica, on any live broker.
        return Ok(());
    }
    if replicas.len() == 1 && replicas.first().map(|b| b.0) == Some(broker.config.node_id) {
        Ok(())
    } else {
        Err(AdminError::new(
            ResponseError::InvalidReplicaAssignment,
            format!(
                "Replica assignment {:?} is invalid: the only broker is {}",
                replicas.iter().map(|b| b.0).collect::<Vec<_>>(),
                broker.config.node_id
            ),
        ))
    }
}

/// The one broker of each partition of an explicit assignment, by
/// partition index.
fn explicit_brokers(assignments: &[(i32, Vec<BrokerId>)]) -> Vec<krabka_ids::BrokerId> {
    let mut sorted: Vec<&(i32, Vec<BrokerId>)> = assignments.iter().collect();
    sorted.sort_by_key(|(index, _)| *index);
    sorted
        .iter()
        .filter_map(|(_, replicas)| replicas.first().map(|b| krabka_ids::BrokerId(b.0)))
        .collect()
}

/// The partition budgets: `krabka.max.partitions` (all partitions this
/// broker hosts) and `krabka.max.partitions.per.request` (what one
/// CreateTopics or CreatePartitions request may add).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionLimits {
    /// Most partitions the broker hosts.
    pub per_broker: i64,
    /// Most partitions one request adds.
    pub per_request: i64,
}

impl PartitionLimits {
    /// The budgets of `config` (validated settings; Kafka-style defaults).
    #[must_use]
    pub fn from_config(config: &crate::config::BrokerConfig) -> Self {
        let get = |name: &str, default: i64| {
            config
                .static_value(name)
                .0
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(default)
        };
        Self {
            per_broker: get("krabka.max.partitions", 4000),
            per_request: get("krabka.max.partitions.per.request", 1000),
        }
    }

    /// Checks adding `adding` partitions to a broker hosting `hosted`, by a
    /// request that has added `by_request` before.
    ///
    /// # Errors
    ///
    /// `POLICY_VIOLATION` naming the setting that would be exceeded.
    pub fn check(&self, hosted: i64, by_request: i64, adding: i64) -> Result<(), AdminError> {
        if by_request.saturating_add(adding) > self.per_request {
            return Err(AdminError::new(
                ResponseError::PolicyViolation,
                format!(
                    "Adding {adding} partitions would take this request to {} new partitions, above krabka.max.partitions.per.request={}.",
                    by_request.saturating_add(adding),
                    self.per_request
                ),
            ));
        }
        if hosted.saturating_add(adding) > self.per_broker {
            return Err(AdminError::new(
                ResponseError::PolicyViolation,
                format!(
                    "Adding {adding} partitions would bring this broker to {} partitions, above krabka.max.partitions={} (it hosts {hosted}).",
                    hosted.saturating_add(adding),
                    self.per_broker
                ),
            ));
        }
        Ok(())
    }
}

/// A refusal from a blocking task that failed to run.
fn task_failed(e: impl std::fmt::Display) -> AdminError {
    AdminError::new(ResponseError::UnknownServerError, e.to_string())
}

/// Whether an admin failure was the disk being full.
fn out_of_space(e: &RegistryRefusal) -> bool {
    crate::log_dir::reserve::is_out_of_space(e)
}

/// Creates a topic now: its partitions' directories first, under a fresh
/// id, then its registry record, so a crash never leaves a recorded topic
/// without its partitions (an interrupted creation leaves empty directories,
/// removed at the next start). With `limits`, the broker budget is checked
/// first, under the lock that serializes topic changes. Blocking.
///
/// # Errors
///
/// `TOPIC_ALREADY_EXISTS`, `POLICY_VIOLATION` over the budget,
/// `KAFKA_STORAGE_ERROR` when the partitions cannot be created or the
/// topic recorded (nothing is left behind then).
pub fn create_topic_now(
    broker: &Broker,
    name: &str,
    partitions: i32,
    configs: BTreeMap<String, String>,
    limits: Option<PartitionLimits>,
) -> Result<TopicMeta, AdminError> {
    let _changes = broker
        .topic_changes
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if broker.registry.get(name).is_some() {
        return Err(AdminError::new(
            ResponseError::TopicAlreadyExists,
            format!("Topic '{name}' already exists."),
        ));
    }
    if let Some(limits) = limits {
        limits.check(broker.registry.partition_count(), 0, i64::from(partitions))?;
    }
    let id = uuid::Uuid::new_v4();
    let (log_config, extras) = topic_config::log_config(&broker.config, &broker.registry, &configs);
    if let Err(e) = broker
        .partitions
        .open_partitions(name, id, 0..partitions, &log_config, extras)
    {
        tracing::error!(topic = %name, error = %e, "creating topic logs failed");
        let _ = broker.partitions.delete_topic(name);
        return Err(AdminError::new(
            ResponseError::KafkaStorageError,
            e.to_string(),
        ));
    }
    match broker
        .registry
        .create_with_id(name, id, partitions, configs)
    {
        Ok(meta) => {
            tracing::info!(topic = %name, partitions, id = %krabka_ids::kafka_uuid(id), "created topic");
            Ok(meta)
        }
        Err(e) => {
            let _ = broker.partitions.delete_topic(name);
            Err(e.into())
        }
    }
}

/// Validates and creates one topic (used by CreateTopics and Metadata
/// auto-creation). `partitions` / `replication_factor` of -1 mean the
/// broker defaults.
///
/// # Errors
///
/// [`AdminError`] with Kafka's code for an invalid name, partition count,
/// replication factor, assignment or config, an existing topic, a count
/// over the partition budgets, or a storage failure.
pub async fn create_topic(
    broker: &Arc<Broker>,
    name: &str,
    partitions: i32,
    replication_factor: i16,
    assignments: &[(i32, Vec<BrokerId>)],
    configs: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<TopicMeta, AdminError> {
    create_topic_within(
        broker,
        name,
        partitions,
        replication_factor,
        assignments,
        configs,
        validate_only,
        &mut 0,
    )
    .await
}

/// [`create_topic`] as one topic of a request that has already added
/// `by_request` partitions (the count grows by this topic's).
#[allow(clippy::too_many_arguments)]
async fn create_topic_within(
    broker: &Arc<Broker>,
    name: &str,
    partitions: i32,
    replication_factor: i16,
    assignments: &[(i32, Vec<BrokerId>)],
    configs: BTreeMap<String, String>,
    validate_only: bool,
    by_request: &mut i64,
) -> Result<TopicMeta, AdminError> {
    names::validate_topic_name(name)
        .map_err(|m| AdminError::new(ResponseError::InvalidTopicException, m))?;
    let partitions = if assignments.is_empty() {
        match partitions {
            -1 => broker.config.num_partitions,
            n if n >= 1 => n,
            n => {
                return Err(AdminError::new(
                    ResponseError::InvalidPartitions,
                    format!("Number of partitions was set to an invalid non-positive value: {n}."),
                ));
            }
        }
    } else {
        if partitions != -1 || replication_factor != -1 {
            return Err(AdminError::new(
                ResponseError::InvalidRequest,
                "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
            ));
        }
        let mut indexes: Vec<i32> = assignments.iter().map(|(i, _)| *i).collect();
        indexes.sort_unstable();
        if indexes
            .iter()
            .enumerate()
            .any(|(pos, i)| i32::try_from(pos).ok() != Some(*i))
        {
            return Err(AdminError::new(
                ResponseError::InvalidReplicaAssignment,
                "Partitions should be a consecutive 0-based integer sequence",
            ));
        }
        for (_, replicas) in assignments {
            check_assignment(broker, replicas)?;
        }
        i32::try_from(assignments.len()).unwrap_or(i32::MAX)
    };
    if replication_factor != -1 && replication_factor != 1 {
        return Err(AdminError::new(
            ResponseError::InvalidReplicationFactor,
            format!(
                "Unable to replicate the partition {replication_factor} time(s): The target replication factor of {replication_factor} cannot be reached because only 1 broker(s) are registered."
            ),
        ));
    }
    for (key, value) in &configs {
        defs::validate_topic_setting(key, value)
            .map_err(|m| AdminError::new(ResponseError::InvalidConfig, m))?;
    }
    // The diskless combinations first: their refusal says what is wrong.
    crate::diskless::validate_topic(&|n| {
        topic_config::resolve_topic(&broker.config, &broker.registry, &configs, n).value
    })
    .map_err(|m| AdminError::new(ResponseError::InvalidConfig, m))?;
    crate::remote::settings::validate_topic(
        crate::remote::settings::system_enabled(&broker.config),
        &|n| topic_config::resolve_topic(&broker.config, &broker.registry, &configs, n).value,
    )
    .map_err(|m| AdminError::new(ResponseError::InvalidConfig, m))?;
    if broker.registry.get(name).is_some() {
        return Err(AdminError::new(
            ResponseError::TopicAlreadyExists,
            format!("Topic '{name}' already exists."),
        ));
    }
    // The budgets are checked before anything is created (and again under
    // the topic-change lock, against concurrent creations).
    let limits = PartitionLimits::from_config(&broker.config);
    limits.check(
        broker.registry.partition_count(),
        *by_request,
        i64::from(partitions),
    )?;
    *by_request += i64::from(partitions);
    if validate_only {
        return Ok(TopicMeta {
            name: name.to_owned(),
            id: uuid::Uuid::nil(),
            partitions,
            configs,
        });
    }
    if let Some(node) = broker.cluster.get() {
        let explicit = (!assignments.is_empty()).then(|| explicit_brokers(assignments));
        return node
            .create_topic(broker, name, partitions, explicit, configs)
            .await;
    }
    let broker = Arc::clone(broker);
    let name = name.to_owned();
    crate::blocking::run(move || {
        create_topic_now(&broker, &name, partitions, configs, Some(limits))
    })
    .await
    .map_err(task_failed)?
}

/// Handles CreateTopics.
pub async fn handle_create_topics(
    broker: &Arc<Broker>,
    version: i16,
    request: CreateTopicsRequest,
) -> CreateTopicsResponse {
    let mut response = CreateTopicsResponse::default();
    let mut seen = BTreeMap::new();
    let mut by_request = 0i64;
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let mut result = CreatableTopicResult::default();
        result.name = topic.name.clone();
        result.num_partitions = -1;
        result.replication_factor = -1;
        if seen.insert(name.clone(), ()).is_some() {
            result.error_code = ResponseError::InvalidRequest.code();
            result.error_message = Some(StrBytes::from_string(format!(
                "Duplicate topic name {name} in request"
            )));
            response.topics.push(result);
            continue;
        }
        let assignments: Vec<(i32, Vec<BrokerId>)> = topic
            .assignments
            .iter()
            .map(|a| (a.partition_index, a.broker_ids.clone()))
            .collect();
        let configs: BTreeMap<String, String> = topic
            .configs
            .iter()
            .filter_map(|c| {
                c.value
                    .as_ref()
                    .map(|v| (c.name.to_string(), v.to_string()))
            })
            .collect();
        match create_topic_within(
            broker,
            &name,
            topic.num_partitions,
            topic.replication_factor,
            &assignments,
            configs,
            request.validate_only,
            &mut by_request,
        )
        .await
        {
            Ok(meta) => {
                result.topic_id = meta.id;
                result.num_partitions = meta.partitions;
                result.replication_factor = 1;
                if version >= 5 {
                    let effective = topic_config::effective_topic_configs(
                        &broker.config,
                        &broker.registry,
                        &meta.configs,
                    );
                    result.configs = Some(
                        effective
                            .into_iter()
                            .map(|(name, resolved)| {
                                let mut c = CreatableTopicConfigs::default();
                                c.name = StrBytes::from_static_str(name);
                                c.value = resolved.value.map(StrBytes::from_string);
                                c.config_source = resolved.source.code();
                                c
                            })
                            .collect(),
                    );
                }
            }
            Err(e) => {
                result.error_code = e.code;
                result.error_message = Some(StrBytes::from_string(e.message));
            }
        }
        response.topics.push(result);
    }
    response
}

/// Handles DeleteTopics (by name before v6, by name or id from v6).
pub async fn handle_delete_topics(
    broker: &Arc<Broker>,
    version: i16,
    request: DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    let mut response = DeleteTopicsResponse::default();
    let targets: Vec<(Option<String>, uuid::Uuid)> = if version >= 6 {
        request
            .topics
            .iter()
            .map(|t| (t.name.as_ref().map(|n| n.0.to_string()), t.topic_id))
            .collect()
    } else {
        request
            .topic_names
            .iter()
            .map(|n| (Some(n.0.to_string()), uuid::Uuid::nil()))
            .collect()
    };
    for (name, id) in targets {
        let mut result = DeletableTopicResult::default();
        result.name = name.clone().map(|n| TopicName(StrBytes::from_string(n)));
        result.topic_id = id;
        let meta = match &name {
            Some(n) => broker.registry.get(n),
            None => broker.registry.by_id(id),
        };
        let outcome = match meta {
            _ if !broker.config.delete_topic_enable => Err(AdminError::new(
                ResponseError::TopicDeletionDisabled,
                "Topic deletion is disabled.",
            )),
            None if name.is_none() => Err(AdminError::new(
                ResponseError::UnknownTopicId,
                "This server does not host this topic ID.",
            )),
            None => Err(AdminError::new(
                ResponseError::UnknownTopicOrPartition,
                "This server does not host this topic-partition.",
            )),
            Some(meta) if names::is_state_topic(&meta.name) => {
                result.name = Some(TopicName(StrBytes::from_string(meta.name.clone())));
                result.topic_id = meta.id;
                Err(AdminError::new(
                    ResponseError::InvalidTopicException,
                    format!(
                        "Topic {} is an internal topic and is not allowed to be deleted.",
                        meta.name
                    ),
                ))
            }
            Some(meta) if broker.cluster.get().is_some() => {
                result.name = Some(TopicName(StrBytes::from_string(meta.name.clone())));
                result.topic_id = meta.id;
                // A diskless topic's consolidated segments go through the
                // partition delete lifecycle on whichever broker claims
                // them: the database records them as pending in the
                // transaction that deletes the topic (`remote::delete`).
                let diskless = meta
                    .configs
                    .get("diskless.enable")
                    .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
                let rlm = broker.remote.get().filter(|_| diskless);
                match broker.cluster.get() {
                    Some(node) => node
                        .delete_topic(broker, &meta.name, rlm.is_some())
                        .await
                        .map(|()| {
                            if let Some(rlm) = rlm {
                                rlm.forget_topic(&meta.name);
                            }
                        }),
                    None => Ok(()), // not reached: the guard
                }
            }
            Some(meta) => {
                result.name = Some(TopicName(StrBytes::from_string(meta.name.clone())));
                result.topic_id = meta.id;
                let broker = Arc::clone(broker);
                crate::blocking::run(move || -> Result<(), AdminError> {
                    let _changes = broker
                        .topic_changes
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    // The remote data goes through the partition delete
                    // lifecycle, journaled first so a restart finishes it.
                    if let Some(rlm) = broker.remote.get() {
                        rlm.topic_deleted(&meta.name, meta.id, meta.partitions)
                            .map_err(|e| {
                                AdminError::new(ResponseError::KafkaStorageError, e.to_string())
                            })?;
                    }
                    // Deleting frees space, so it must work on a full disk:
                    // the reserve makes room for the registry's rewrite.
                    broker
                        .log_dir
                        .reserve()
                        .run_freeing(|| broker.registry.delete(&meta.name), out_of_space)?;
                    broker.partitions.delete_topic(&meta.name).map_err(|e| {
                        AdminError::new(ResponseError::KafkaStorageError, e.to_string())
                    })?;
                    crate::metrics::topic_deleted(&meta.name);
                    tracing::info!(topic = %meta.name, "deleted topic");
                    Ok(())
                })
                .await
                .unwrap_or_else(|e| {
                    Err(AdminError::new(
                        ResponseError::UnknownServerError,
                        e.to_string(),
                    ))
                })
            }
        };
        if let Err(e) = outcome {
            result.error_code = e.code;
            result.error_message = Some(StrBytes::from_string(e.message));
        }
        response.responses.push(result);
    }
    response
}

/// Handles CreatePartitions.
pub async fn handle_create_partitions(
    broker: &Arc<Broker>,
    request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let mut response = CreatePartitionsResponse::default();
    let limits = PartitionLimits::from_config(&broker.config);
    let mut by_request = 0i64;
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let mut result = CreatePartitionsTopicResult::default();
        result.name = topic.name.clone();
        let outcome = async {
            let meta = broker.registry.get(&name).ok_or_else(|| AdminError::from(RegistryRefusal::Unknown))?;
            if names::is_state_topic(&meta.name) {
                return Err(AdminError::new(
                    ResponseError::InvalidTopicException,
                    format!("Cannot add partitions to internal topic {}: its keys are placed by partition count.", meta.name),
                ));
            }
            if topic.count <= meta.partitions {
                return Err(AdminError::new(
                    ResponseError::InvalidPartitions,
                    format!("Topic currently has {} partitions, which is higher than the requested {}.", meta.partitions, topic.count),
                ));
            }
            if let Some(assignments) = &topic.assignments {
                if i64::try_from(assignments.len()).ok() != Some(i64::from(topic.count) - i64::from(meta.partitions)) {
                    return Err(AdminError::new(ResponseError::InvalidReplicaAssignment, "Increasing the number of partitions needs one assignment per new partition"));
                }
                for a in assignments {
                    check_assignment(broker, &a.broker_ids)?;
                }
            }
            let adding = i64::from(topic.count) - i64::from(meta.partitions);
            limits.check(broker.registry.partition_count(), by_request, adding)?;
            by_request += adding;
            if request.validate_only {
                return Ok(());
            }
            if let Some(node) = broker.cluster.get() {
                let explicit = topic.assignments.as_ref().map(|assignments| {
                    assignments
                        .iter()
                        .filter_map(|a| a.broker_ids.first().map(|b| krabka_ids::BrokerId(b.0)))
                        .collect()
                });
                return node
                    .add_partitions(broker, &meta.name, meta.partitions, topic.count, explicit)
                    .await;
            }
            let broker = Arc::clone(broker);
            let count = topic.count;
            crate::blocking::run(move || add_partitions_now(&broker, &meta.name, count, limits))
                .await
                .unwrap_or_else(|e| Err(task_failed(e)))
        }
        .await;
        if let Err(e) = outcome {
            result.error_code = e.code;
            result.error_message = Some(StrBytes::from_string(e.message));
        }
        response.results.push(result);
    }
    response
}

/// Raises a topic's partition count to `count`: the new partitions'
/// directories first, then the registry (a crash in between leaves empty
/// directories, removed at the next start). Blocking.
fn add_partitions_now(
    broker: &Broker,
    name: &str,
    count: i32,
    limits: PartitionLimits,
) -> Result<(), AdminError> {
    let _changes = broker
        .topic_changes
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let meta = broker
        .registry
        .get(name)
        .ok_or_else(|| AdminError::from(RegistryRefusal::Unknown))?;
    if count <= meta.partitions {
        return Err(AdminError::new(
            ResponseError::InvalidPartitions,
            format!(
                "Topic currently has {} partitions, which is higher than the requested {count}.",
                meta.partitions
            ),
        ));
    }
    limits.check(
        broker.registry.partition_count(),
        0,
        i64::from(count) - i64::from(meta.partitions),
    )?;
    let (log_config, extras) =
        topic_config::log_config(&broker.config, &broker.registry, &meta.configs);
    let opened = broker.partitions.open_partitions(
        name,
        meta.id,
        meta.partitions..count,
        &log_config,
        extras,
    );
    let recorded = opened
        .map_err(|e| AdminError::new(ResponseError::KafkaStorageError, e.to_string()))
        .and_then(|()| {
            broker
                .registry
                .set_partitions(name, count)
                .map_err(AdminError::from)
        });
    if recorded.is_err() {
        let _ = broker.partitions.delete_partitions(name, meta.partitions);
    }
    recorded.map(|_| ())
}

/// Handles DeleteRecords: moves each partition's log start offset forward
/// through its storage seam.
pub async fn handle_delete_records(
    broker: &Arc<Broker>,
    request: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let mut response = DeleteRecordsResponse::default();
    for topic in request.topics {
        let mut t = DeleteRecordsTopicResult::default();
        t.name = topic.name.clone();
        for p in topic.partitions {
            let mut r = DeleteRecordsPartitionResult::default();
            r.partition_index = p.partition_index;
            r.low_watermark = -1;
            if names::is_state_topic(&topic.name.0) {
                r.error_code = ResponseError::InvalidTopicException.code();
                t.partitions.push(r);
                continue;
            }
            match broker.partitions.storage(&topic.name.0, p.partition_index) {
                None => {
                    r.error_code = broker
                        .missing_partition(&topic.name.0, p.partition_index)
                        .code();
                }
                Some(partition) => {
                    let mut outcome = partition.delete_records(p.offset).await;
                    // It frees space: on a full disk the reserve makes room
                    // for the checkpoint.
                    if matches!(&outcome, Err(e) if crate::log_dir::reserve::is_out_of_space(e))
                        && broker.log_dir.reserve().release()
                    {
                        outcome = partition.delete_records(p.offset).await;
                    }
                    match outcome {
                        Ok(low) => r.low_watermark = low,
                        Err(e) => r.error_code = e.kafka_error_code(),
                    }
                }
            }
            t.partitions.push(r);
        }
        response.topics.push(t);
    }
    response
}

/// Handles DescribeLogDirs: the one log directory and its partition sizes.
/// The directory and volume calls run on the blocking pool.
///
/// A classic partition's size is its local log's bytes (remote bytes are in
/// the metrics), as Kafka reports. A diskless partition has no local log:
/// it is listed under the same directory, by the one broker Metadata names
/// its leader ([`ReportedHere`](crate::diskless::ReportedHere)), with the
/// bytes of its live batches in object storage as the batch coordinator
/// counts them now — so `kafka-log-dirs` and the admin clients see every
/// diskless partition once, and its size shrink with retention and
/// DeleteRecords. (Inkless lists none; a size that is in object storage
/// rather than on this volume is still the size tools sum per topic.)
pub async fn handle_describe_log_dirs(
    broker: &Arc<Broker>,
    request: &DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    let mut result = DescribeLogDirsResult::default();
    let configured = broker.config.log_dir.clone();
    let (dir, (total, usable)) = crate::blocking::run(move || {
        let dir = std::fs::canonicalize(&configured).unwrap_or(configured);
        // v4+ carries the volume's size and free space; older versions keep -1.
        let space = crate::handlers::disk::volume_bytes(&dir).unwrap_or((-1, -1));
        (dir, space)
    })
    .await
    .unwrap_or_else(|_| (broker.config.log_dir.clone(), (-1, -1)));
    result.log_dir = StrBytes::from_string(dir.display().to_string());
    result.total_bytes = total;
    result.usable_bytes = usable;
    let mut by_topic: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
    let wanted: Option<BTreeMap<String, Vec<i32>>> = request.topics.as_ref().map(|topics| {
        topics
            .iter()
            .map(|t| (t.topic.0.to_string(), t.partitions.clone()))
            .collect()
    });
    let is_wanted = |topic: &str, index: i32| {
        wanted
            .as_ref()
            .is_none_or(|w| w.get(topic).is_some_and(|list| list.contains(&index)))
    };
    let entry = |index: i32, size: u64| {
        let mut p = DescribeLogDirsPartition::default();
        p.partition_index = index;
        p.partition_size = i64::try_from(size).unwrap_or(i64::MAX);
        p
    };
    for partition in broker.partitions.all() {
        if is_wanted(&partition.topic, partition.index) {
            by_topic
                .entry(partition.topic.clone())
                .or_default()
                .push(entry(partition.index, partition.size_bytes()));
        }
    }
    let here = crate::diskless::ReportedHere::of(broker);
    let diskless: Vec<_> = broker
        .partitions
        .all_diskless()
        .into_iter()
        .filter(|p| is_wanted(&p.topic, p.index) && here.contains(p.topic_id, p.index))
        .collect();
    DisklessStorage::refresh_all(&diskless).await;
    for partition in diskless {
        by_topic
            .entry(partition.topic.clone())
            .or_default()
            .push(entry(partition.index, partition.size_bytes()));
    }
    result.topics = by_topic
        .into_iter()
        .map(|(name, mut partitions)| {
            partitions.sort_by_key(|p| p.partition_index);
            let mut t = DescribeLogDirsTopic::default();
            t.name = TopicName(StrBytes::from_string(name));
            t.partitions = partitions;
            t
        })
        .collect();
    let mut response = DescribeLogDirsResponse::default();
    response.results = vec![result];
    response
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn budgets_are_checked_per_request_and_per_broker() {
        let limits = PartitionLimits {
            per_broker: 100,
            per_request: 10,
        };
        check!(limits.check(90, 0, 10).is_ok());
        let per_request = limits.check(0, 6, 5).unwrap_err();
        check!(per_request.code == ResponseError::PolicyViolation.code());
        check!(
            per_request
                .message
                .contains("krabka.max.partitions.per.request=10")
        );
        let per_broker = limits.check(95, 0, 6).unwrap_err();
        check!(per_broker.message.contains("krabka.max.partitions=100"));
        check!(per_broker.message.contains("it hosts 95"));
        // No overflow on absurd counts.
        check!(
            limits
                .check(i64::MAX, i64::MAX, i64::from(i32::MAX))
                .is_err()
        );
    }

    #[tokio::test]
    async fn an_over_budget_topic_leaves_no_directory_and_no_record() {
        let dir = tempfile::tempdir().unwrap();
        let mut raw = crate::config::RawSettings::default();
        raw.set("log.dirs", &dir.path().display().to_string(), "test");
        raw.set("log.cleaner.enable", "false", "test");
        raw.set("krabka.max.partitions", "5", "test");
        let broker =
            Arc::new(Broker::open(crate::config::BrokerConfig::from_raw(&raw).unwrap()).unwrap());
        let refused = create_topic(&broker, "big", i32::MAX, -1, &[], BTreeMap::new(), false)
            .await
            .unwrap_err();
        check!(refused.code == ResponseError::PolicyViolation.code());
        check!(broker.registry.get("big").is_none());
        check!(!dir.path().join("big-0").exists());
        check!(
            create_topic(&broker, "ok", 5, -1, &[], BTreeMap::new(), false)
                .await
                .is_ok()
        );
        check!(dir.path().join("ok-4").exists());
        let full = create_topic(&broker, "one-more", 1, -1, &[], BTreeMap::new(), false)
            .await
            .unwrap_err();
        check!(full.code == ResponseError::PolicyViolation.code());
    }
}
