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
    fn new(error: ResponseError, message: impl Into<String>) -> Self {
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

/// Validates and creates one topic (used by CreateTopics and Metadata
/// auto-creation). `partitions` / `replication_factor` of -1 mean the
/// broker defaults.
///
/// # Errors
///
/// [`AdminError`] with Kafka's code for an invalid name, partition count,
/// replication factor, assignment or config, an existing topic, or a
/// storage failure.
pub async fn create_topic(
    broker: &Arc<Broker>,
    name: &str,
    partitions: i32,
    replication_factor: i16,
    assignments: &[(i32, Vec<BrokerId>)],
    configs: BTreeMap<String, String>,
    validate_only: bool,
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
    if validate_only {
        return Ok(TopicMeta {
            name: name.to_owned(),
            id: uuid::Uuid::nil(),
            partitions,
            configs,
        });
    }
    let broker = Arc::clone(broker);
    let name = name.to_owned();
    crate::blocking::run(move || {
        let meta = broker.registry.create(&name, partitions, configs)?;
        let (log_config, extras) = topic_config::log_config(&broker.config, &broker.registry, &meta.configs);
        if let Err(e) = broker.partitions.open_partitions(&name, meta.id, 0..partitions, &log_config, extras) {
            tracing::error!(topic = %name, error = %e, "creating topic logs failed");
            let _ = broker.partitions.delete_topic(&name);
            let _ = broker.registry.delete(&name);
            return Err(AdminError::new(ResponseError::KafkaStorageError, e.to_string()));
        }
        tracing::info!(topic = %name, partitions, id = %krabka_ids::kafka_uuid(meta.id), "created topic");
        Ok(meta)
    })
    .await
    .map_err(|e| AdminError::new(ResponseError::UnknownServerError, e.to_string()))?
}

/// Handles CreateTopics.
pub async fn handle_create_topics(
    broker: &Arc<Broker>,
    version: i16,
    request: CreateTopicsRequest,
) -> CreateTopicsResponse {
    let mut response = CreateTopicsResponse::default();
    let mut seen = BTreeMap::new();
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
        match create_topic(
            broker,
            &name,
            topic.num_partitions,
            topic.replication_factor,
            &assignments,
            configs,
            request.validate_only,
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
            Some(meta) => {
                result.name = Some(TopicName(StrBytes::from_string(meta.name.clone())));
                result.topic_id = meta.id;
                let broker = Arc::clone(broker);
                crate::blocking::run(move || -> Result<(), AdminError> {
                    // The remote data goes through the partition delete
                    // lifecycle, journaled first so a restart finishes it.
                    if let Some(rlm) = broker.remote.get() {
                        rlm.topic_deleted(&meta.name, meta.id, meta.partitions)
                            .map_err(|e| {
                                AdminError::new(ResponseError::KafkaStorageError, e.to_string())
                            })?;
                    }
                    broker.registry.delete(&meta.name)?;
                    broker.partitions.delete_topic(&meta.name).map_err(|e| {
                        AdminError::new(ResponseError::KafkaStorageError, e.to_string())
                    })?;
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
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let mut result = CreatePartitionsTopicResult::default();
        result.name = topic.name.clone();
        let outcome = async {
            let meta = broker.registry.get(&name).ok_or_else(|| AdminError::from(RegistryRefusal::Unknown))?;
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
            if request.validate_only {
                return Ok(());
            }
            let broker = Arc::clone(broker);
            let count = topic.count;
            crate::blocking::run(move || -> Result<(), AdminError> {
                let old = broker.registry.set_partitions(&meta.name, count)?;
                let (log_config, extras) = topic_config::log_config(&broker.config, &broker.registry, &meta.configs);
                broker
                    .partitions
                    .open_partitions(&meta.name, meta.id, old..count, &log_config, extras)
                    .map_err(|e| AdminError::new(ResponseError::KafkaStorageError, e.to_string()))
            })
            .await
            .unwrap_or_else(|e| Err(AdminError::new(ResponseError::UnknownServerError, e.to_string())))
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
            match broker.partitions.storage(&topic.name.0, p.partition_index) {
                None => r.error_code = ResponseError::UnknownTopicOrPartition.code(),
                Some(partition) => match partition.delete_records(p.offset).await {
                    Ok(low) => r.low_watermark = low,
                    Err(e) => r.error_code = e.kafka_error_code(),
                },
            }
            t.partitions.push(r);
        }
        response.topics.push(t);
    }
    response
}

/// Handles DescribeLogDirs: the one log directory and its partition sizes.
/// The directory and volume calls run on the blocking pool.
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
    for partition in broker.partitions.all() {
        if let Some(wanted) = &wanted {
            match wanted.get(&partition.topic) {
                Some(list) if list.contains(&partition.index) => {}
                _ => continue,
            }
        }
        let mut p = DescribeLogDirsPartition::default();
        p.partition_index = partition.index;
        // Local bytes only, as Kafka reports (remote sizes are in the metrics).
        p.partition_size = i64::try_from(partition.size_bytes()).unwrap_or(i64::MAX);
        by_topic.entry(partition.topic.clone()).or_default().push(p);
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
