//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topic,
//! broker and group (KIP-848) resources, with Kafka's names, defaults,
//! sources and validation.
//!
//! Topic overrides and dynamic broker settings are persisted in the
//! registry; after a change the effective configuration is pushed into the
//! affected logs immediately, so e.g. a lowered `retention.ms` is applied by
//! the next retention pass.

use {
    crate::{
        broker::Broker,
        config::defs,
        remote::delete::TieringChange,
        topics::config::{resolve_broker, resolve_topic},
    },
    kafka_protocol::{
        error::ResponseError,
        messages::{
            AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest,
            DescribeConfigsResponse, IncrementalAlterConfigsRequest,
            IncrementalAlterConfigsResponse, alter_configs_response,
            describe_configs_response::{
                DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
            },
            incremental_alter_configs_response,
        },
        protocol::StrBytes,
    },
    std::{collections::BTreeMap, sync::Arc},
};

/// `ConfigResource.Type.TOPIC`.
pub const TOPIC: i8 = 2;
/// `ConfigResource.Type.BROKER`.
pub const BROKER: i8 = 4;
/// `ConfigResource.Type.GROUP` (KIP-848 group configs).
pub const GROUP: i8 = 32;

struct Refusal {
    code: i16,
    message: String,
}

fn refuse(error: ResponseError, message: impl Into<String>) -> Refusal {
    Refusal {
        code: error.code(),
        message: message.into(),
    }
}

/// Checks that a broker resource name is this node ("" is the cluster default).
fn check_broker_resource(broker: &Broker, name: &str) -> Result<(), Refusal> {
    if name.is_empty() || name == broker.config.node_id.to_string() {
        Ok(())
    } else {
        Err(refuse(
            ResponseError::InvalidRequest,
            format!(
                "Unexpected broker id, expected {} or empty string, but received {name}",
                broker.config.node_id
            ),
        ))
    }
}

/// What the request asked to include besides name and value.
#[derive(Clone, Copy)]
struct Detail {
    synonyms: bool,
    documentation: bool,
}

/// Whether a setting's value must be hidden (Kafka's PASSWORD settings,
/// also per listener, and the storage manager's credentials and key file).
fn sensitive(broker: &Broker, name: &str) -> bool {
    defs::is_sensitive(name, &broker.config.rsm_prefix())
}

#[allow(clippy::too_many_arguments)]
fn entry(
    name: &str,
    resolved: crate::topics::config::Resolved,
    read_only: bool,
    kind: defs::ConfigKind,
    doc: &str,
    detail: Detail,
    is_sensitive: bool,
) -> DescribeConfigsResourceResult {
    let crate::topics::config::Resolved {
        mut value,
        source,
        mut synonyms,
    } = resolved;
    // As Kafka: a secret is described as set or not, never by its value.
    if is_sensitive {
        value = None;
        for (_, v, _) in &mut synonyms {
            *v = None;
        }
    }
    let (include_synonyms, include_documentation) = (detail.synonyms, detail.documentation);
    let mut e = DescribeConfigsResourceResult::default();
    e.name = StrBytes::from_string(name.to_owned());
    e.value = value.map(StrBytes::from_string);
    e.is_sensitive = is_sensitive;
    e.read_only = read_only;
    e.config_source = source.code();
    e.config_type = kind.type_code();
    if include_synonyms {
        e.synonyms = synonyms
            .into_iter()
            .map(|(n, v, s)| {
                let mut syn = DescribeConfigsSynonym::default();
                syn.name = StrBytes::from_string(n);
                syn.value = v.map(StrBytes::from_string);
                syn.source = s.code();
                syn
            })
            .collect();
    }
    if include_documentation {
        e.documentation = Some(StrBytes::from_string(doc.to_owned()));
    }
    e
}

/// Handles DescribeConfigs.
#[must_use]
pub fn handle_describe_configs(
    broker: &Broker,
    request: &DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let mut response = DescribeConfigsResponse::default();
    for resource in &request.resources {
        let mut result = DescribeConfigsResult::default();
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name.clone();
        let keys: Option<Vec<String>> = resource
            .configuration_keys
            .as_ref()
            .map(|k| k.iter().map(|s| s.to_string()).collect());
        // Null or empty: every setting (as Kafka's ConfigHelper does).
        let wanted = |name: &str| {
            keys.as_ref()
                .is_none_or(|k| k.is_empty() || k.iter().any(|w| w == name))
        };
        let name = resource.resource_name.to_string();
        let detail = Detail {
            synonyms: request.include_synonyms,
            documentation: request.include_documentation,
        };
        let outcome: Result<Vec<DescribeConfigsResourceResult>, Refusal> = match resource
            .resource_type
        {
            TOPIC => match broker.registry.get(&name) {
                None => Err(refuse(
                    ResponseError::UnknownTopicOrPartition,
                    format!("Topic {name} does not exist"),
                )),
                Some(meta) => Ok(defs::TOPIC_SETTINGS
                    .iter()
                    .filter(|s| wanted(s.name))
                    .map(|s| {
                        let r =
                            resolve_topic(&broker.config, &broker.registry, &meta.configs, s.name);
                        entry(s.name, r, false, s.kind, s.doc, detail, false)
                    })
                    .collect()),
            },
            BROKER => check_broker_resource(broker, &name).map(|()| {
                let mut configs: Vec<DescribeConfigsResourceResult> = defs::BROKER_SETTINGS
                    .iter()
                    .filter(|s| wanted(s.name))
                    .map(|s| {
                        let r = resolve_broker(&broker.config, &broker.registry, s.name);
                        entry(
                            s.name,
                            r,
                            !s.dynamic,
                            s.kind,
                            s.doc,
                            detail,
                            sensitive(broker, s.name),
                        )
                    })
                    .collect();
                // Settings outside the table that are set: per-listener ones
                // and the remote storage manager's.
                let prefix = broker.config.rsm_prefix();
                let mut extra: std::collections::BTreeSet<String> = broker
                    .config
                    .explicit
                    .keys()
                    .filter(|k| defs::listener_scoped(k).is_some() || k.starts_with(&prefix))
                    .filter(|k| k.as_str() != crate::remote::backend::IMPL_PREFIX_SETTING)
                    .cloned()
                    .collect();
                for resource in [broker.config.node_id.to_string(), String::new()] {
                    extra.extend(
                        broker
                            .registry
                            .broker_configs(&resource)
                            .into_keys()
                            .filter(|k| defs::listener_scoped(k).is_some()),
                    );
                }
                for name in extra.iter().filter(|n| wanted(n)) {
                    let setting = defs::broker_setting(name);
                    let r = resolve_broker(&broker.config, &broker.registry, name);
                    configs.push(entry(
                        name,
                        r,
                        !setting.is_some_and(|s| s.dynamic),
                        setting.map_or(defs::ConfigKind::Text, |s| s.kind),
                        setting.map_or("", |s| s.doc),
                        detail,
                        sensitive(broker, name),
                    ));
                }
                configs
            }),
            GROUP => describe_group(broker, &name).map(|entries| {
                entries
                    .into_iter()
                    .filter(|(n, ..)| wanted(n))
                    .map(|(n, r, doc)| entry(n, r, false, GROUP_KIND, doc, detail, false))
                    .collect()
            }),
            other => Err(refuse(
                ResponseError::InvalidRequest,
                format!("Unsupported resource type {other}"),
            )),
        };
        match outcome {
            Ok(configs) => result.configs = configs,
            Err(r) => {
                result.error_code = r.code;
                result.error_message = Some(StrBytes::from_string(r.message));
            }
        }
        response.results.push(result);
    }
    response
}

/// Every group config is an INT in Kafka.
const GROUP_KIND: defs::ConfigKind = defs::ConfigKind::Int {
    min: 1,
    max: i32::MAX as i64,
};

fn group_coordinator(
    broker: &Broker,
) -> Result<&Arc<crate::coordinator::group::GroupCoordinator>, Refusal> {
    broker.groups.get().ok_or_else(|| {
        refuse(
            ResponseError::CoordinatorNotAvailable,
            "The group coordinator is not available.",
        )
    })
}

/// The group configs of `group`: its own value (GROUP_CONFIG) or the
/// broker's (DEFAULT_CONFIG), as Kafka's ConfigHelper reports them.
fn describe_group(
    broker: &Broker,
    group: &str,
) -> Result<Vec<(&'static str, crate::topics::config::Resolved, &'static str)>, Refusal> {
    if group.is_empty() {
        return Err(refuse(
            ResponseError::InvalidRequest,
            "Group name must not be empty",
        ));
    }
    let coordinator = group_coordinator(broker)?;
    let own = coordinator.group_configs(group);
    Ok(crate::coordinator::group::config::GROUP_SETTINGS
        .iter()
        .map(|&(name, doc)| {
            let default = coordinator.config().group_default(name);
            let mut synonyms = Vec::new();
            if let Some(v) = own.get(name) {
                synonyms.push((
                    name.to_owned(),
                    Some(v.clone()),
                    crate::config::ConfigSource::Group,
                ));
            }
            synonyms.push((
                name.to_owned(),
                default,
                crate::config::ConfigSource::Default,
            ));
            let (value, source) = synonyms
                .first()
                .map(|(_, v, s)| (v.clone(), *s))
                .unwrap_or((None, crate::config::ConfigSource::Default));
            (
                name,
                crate::topics::config::Resolved {
                    value,
                    source,
                    synonyms,
                },
                doc,
            )
        })
        .collect())
}

/// Applies `changes` to a group's configs, validated against the broker's bounds.
fn apply_group(
    coordinator: &crate::coordinator::group::GroupCoordinator,
    current: &BTreeMap<String, String>,
    changes: Vec<(String, Change)>,
    replace: bool,
) -> Result<BTreeMap<String, String>, Refusal> {
    let mut next = if replace {
        BTreeMap::new()
    } else {
        current.clone()
    };
    for (name, change) in changes {
        if !crate::coordinator::group::config::GROUP_SETTINGS
            .iter()
            .any(|(n, _)| *n == name)
        {
            return Err(refuse(
                ResponseError::InvalidConfig,
                format!("Unknown group config name: {name}"),
            ));
        }
        match change {
            Change::Set(v) => {
                next.insert(name, v);
            }
            Change::Delete => {
                next.remove(&name);
            }
            Change::Append(_) | Change::Subtract(_) => {
                return Err(refuse(
                    ResponseError::InvalidConfig,
                    format!(
                        "Config value append/subtract is not allowed for config {name} as it is not of type LIST"
                    ),
                ));
            }
        }
    }
    coordinator
        .config()
        .validate_group_configs(&next)
        .map_err(|m| refuse(ResponseError::InvalidConfig, m))?;
    Ok(next)
}

/// A requested change to one setting.
enum Change {
    Set(String),
    Delete,
    Append(String),
    Subtract(String),
}

fn validate_broker_setting(name: &str, value: &str) -> Result<(), Refusal> {
    let setting = defs::broker_setting(name).ok_or_else(|| {
        refuse(
            ResponseError::InvalidConfig,
            format!("Unknown broker config name: {name}"),
        )
    })?;
    if !setting.dynamic {
        return Err(refuse(
            ResponseError::InvalidConfig,
            format!("Cannot update these configs dynamically: Set({name})"),
        ));
    }
    setting.kind.validate(value).map_err(|m| {
        refuse(
            ResponseError::InvalidConfig,
            format!("Invalid value {value} for configuration {name}: {m}"),
        )
    })?;
    defs::check_supported_value(name, value).map_err(|m| refuse(ResponseError::InvalidConfig, m))
}

fn apply(
    current: &BTreeMap<String, String>,
    changes: Vec<(String, Change)>,
    topic: bool,
    replace: bool,
) -> Result<BTreeMap<String, String>, Refusal> {
    let mut next = if replace {
        BTreeMap::new()
    } else {
        current.clone()
    };
    for (name, change) in changes {
        let is_list = if topic {
            defs::topic_setting(&name).map(|s| matches!(s.kind, defs::ConfigKind::List { .. }))
        } else {
            defs::broker_setting(&name).map(|s| matches!(s.kind, defs::ConfigKind::List { .. }))
        };
        let Some(is_list) = is_list else {
            let kind = if topic { "topic" } else { "broker" };
            return Err(refuse(
                ResponseError::InvalidConfig,
                format!("Unknown {kind} config name: {name}"),
            ));
        };
        match change {
            Change::Set(v) => {
                next.insert(name, v);
            }
            Change::Delete => {
                next.remove(&name);
            }
            Change::Append(_) | Change::Subtract(_) if !is_list => {
                return Err(refuse(
                    ResponseError::InvalidConfig,
                    format!(
                        "Config value append/subtract is not allowed for config {name} as it is not of type LIST"
                    ),
                ));
            }
            Change::Append(v) => {
                let mut items: Vec<String> = next
                    .get(&name)
                    .map(|c| {
                        c.split(',')
                            .map(|s| s.trim().to_owned())
                            .filter(|s| !s.is_empty())
                            .collect()
                    })
                    .unwrap_or_default();
                for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    if !items.iter().any(|i| i == item) {
                        items.push(item.to_owned());
                    }
                }
                next.insert(name, items.join(","));
            }
            Change::Subtract(v) => {
                let remove: Vec<&str> = v.split(',').map(str::trim).collect();
                let items: Vec<String> = next
                    .get(&name)
                    .map(|c| {
                        c.split(',')
                            .map(|s| s.trim().to_owned())
                            .filter(|s| !s.is_empty() && !remove.contains(&s.as_str()))
                            .collect()
                    })
                    .unwrap_or_default();
                next.insert(name, items.join(","));
            }
        }
    }
    for (name, value) in &next {
        if topic {
            defs::validate_topic_setting(name, value)
                .map_err(|m| refuse(ResponseError::InvalidConfig, m))?;
            if name == "cleanup.policy" && value.trim().is_empty() {
                return Err(refuse(
                    ResponseError::InvalidConfig,
                    "cleanup.policy must name delete and/or compact",
                ));
            }
        } else {
            validate_broker_setting(name, value)?;
        }
    }
    Ok(next)
}

/// `diskless.enable` is create-only (refused as Kafka refuses changing a
/// create-only config), and a diskless topic's other configs must stay
/// valid for it.
fn diskless_change(
    broker: &Broker,
    current: &BTreeMap<String, String>,
    next: &BTreeMap<String, String>,
) -> Result<(), Refusal> {
    let value = |configs: &BTreeMap<String, String>, name: &str| {
        resolve_topic(&broker.config, &broker.registry, configs, name).value
    };
    let flag = |configs: &BTreeMap<String, String>| {
        value(configs, "diskless.enable").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    };
    if flag(current) != flag(next) {
        return Err(refuse(
            ResponseError::InvalidConfig,
            "diskless.enable can only be set when the topic is created; it cannot be altered.",
        ));
    }
    crate::diskless::validate_topic(&|n| value(next, n))
        .map_err(|m| refuse(ResponseError::InvalidConfig, m))
}

/// KIP-950: what the change does to `remote.storage.enable`, refused when
/// Kafka refuses it.
fn tiering_change(
    broker: &Broker,
    current: &BTreeMap<String, String>,
    next: &BTreeMap<String, String>,
    topic: &str,
) -> Result<TieringChange, Refusal> {
    let flag = |configs: &BTreeMap<String, String>, name: &str| {
        resolve_topic(&broker.config, &broker.registry, configs, name)
            .value
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    };
    crate::remote::delete::validate_tiering_change(
        topic,
        flag(current, "remote.storage.enable"),
        flag(next, "remote.storage.enable"),
        flag(next, "remote.log.delete.on.disable"),
        broker.remote.get().is_some_and(|rlm| rlm.disabling(topic)),
    )
    .map_err(|m| refuse(ResponseError::InvalidConfig, m))
}

/// Validates and (unless `validate_only`) applies changes to one resource.
async fn alter_resource(
    broker: &Arc<Broker>,
    resource_type: i8,
    name: String,
    changes: Vec<(String, Change)>,
    replace: bool,
    validate_only: bool,
) -> Result<(), Refusal> {
    match resource_type {
        TOPIC => {
            let meta = broker.registry.get(&name).ok_or_else(|| {
                refuse(
                    ResponseError::UnknownTopicOrPartition,
                    format!("Topic {name} does not exist"),
                )
            })?;
            if crate::topics::names::is_state_topic(&name) {
                // Its configs are what keeps the coordinators' state
                // (compaction, infinite retention).
                return Err(refuse(
                    ResponseError::InvalidTopicException,
                    format!("Cannot alter the configs of internal topic {name}."),
                ));
            }
            let next = apply(&meta.configs, changes, true, replace)?;
            diskless_change(broker, &meta.configs, &next)?;
            crate::remote::settings::validate_topic(
                crate::remote::settings::system_enabled(&broker.config),
                &|n| {
                    crate::topics::config::resolve_topic(&broker.config, &broker.registry, &next, n)
                        .value
                },
            )
            .map_err(|m| refuse(ResponseError::InvalidConfig, m))?;
            let tiering = tiering_change(broker, &meta.configs, &next, &name)?;
            if validate_only {
                return Ok(());
            }
            if let Some(node) = broker.cluster.get() {
                // The database first: every broker mirrors it from there.
                node.cluster()
                    .set_topic_configs(&name, &next)
                    .await
                    .map_err(|e| refuse(ResponseError::KafkaStorageError, e.to_string()))?;
            }
            let broker = Arc::clone(broker);
            crate::blocking::run(move || -> Result<(), Refusal> {
                if tiering == TieringChange::Disable
                    && let Some(rlm) = broker.remote.get()
                {
                    // Journaled before the change is stored, so a crash in
                    // between never leaves remote data nobody deletes.
                    rlm.tiering_disabled(&name, meta.id, meta.partitions)
                        .map_err(|e| refuse(ResponseError::KafkaStorageError, e.to_string()))?;
                }
                if let Err(e) = broker.registry.set_topic_configs(&name, next) {
                    if tiering == TieringChange::Disable
                        && let Some(rlm) = broker.remote.get()
                        && let Err(e) = rlm.tiering_disable_aborted(&name)
                    {
                        tracing::warn!(topic = %name, error = %e, "a disable that failed is still journaled; it is dropped at the next start");
                    }
                    return Err(refuse(ResponseError::KafkaStorageError, e.to_string()));
                }
                if let Some(meta) = broker.registry.get(&name) {
                    broker.refresh_topic_config(&meta);
                    tracing::info!(topic = %name, configs = ?meta.configs, "topic configs changed");
                }
                Ok(())
            })
            .await
            .unwrap_or_else(|e| Err(refuse(ResponseError::UnknownServerError, e.to_string())))
        }
        BROKER => {
            check_broker_resource(broker, &name)?;
            let current = broker.registry.broker_configs(&name);
            let next = apply(&current, changes, false, replace)?;
            let tls_changed = crate::security::Security::tls_changed(&current, &next);
            // A keystore or truststore change is loaded before it is stored
            // (Kafka's SSLFactory validation, also for validate-only), and
            // served to new connections once it is; established ones keep
            // theirs.
            let prepared = if tls_changed {
                let broker = Arc::clone(broker);
                let (name, next) = (name.clone(), next.clone());
                let prepared = crate::blocking::run(move || {
                    let node = broker.config.node_id.to_string();
                    let (per_broker, defaults) = if name.is_empty() {
                        (broker.registry.broker_configs(&node), next)
                    } else {
                        (next, broker.registry.broker_configs(""))
                    };
                    broker
                        .security
                        .prepare_tls(&broker.config, &per_broker, &defaults)
                        .map_err(|m| refuse(ResponseError::InvalidConfig, m))
                })
                .await
                .unwrap_or_else(|e| {
                    Err(refuse(ResponseError::UnknownServerError, e.to_string()))
                })?;
                Some(prepared)
            } else {
                None
            };
            if validate_only {
                return Ok(());
            }
            if let Some(node) = broker.cluster.get() {
                node.cluster()
                    .set_broker_configs(&name, &next)
                    .await
                    .map_err(|e| refuse(ResponseError::KafkaStorageError, e.to_string()))?;
            }
            let broker = Arc::clone(broker);
            crate::blocking::run(move || -> Result<(), Refusal> {
                broker
                    .registry
                    .set_broker_configs(&name, next)
                    .map_err(|e| refuse(ResponseError::KafkaStorageError, e.to_string()))?;
                if let Some(prepared) = prepared {
                    broker.security.install_tls(prepared);
                }
                for topic in broker.registry.topics() {
                    broker.refresh_topic_config(&topic);
                }
                Ok(())
            })
            .await
            .unwrap_or_else(|e| Err(refuse(ResponseError::UnknownServerError, e.to_string())))
        }
        GROUP => {
            if name.is_empty() {
                return Err(refuse(
                    ResponseError::InvalidRequest,
                    "Group name must not be empty",
                ));
            }
            let coordinator = Arc::clone(group_coordinator(broker)?);
            let next = apply_group(
                &coordinator,
                &coordinator.group_configs(&name),
                changes,
                replace,
            )?;
            if validate_only {
                return Ok(());
            }
            let broker = Arc::clone(broker);
            crate::blocking::run(move || -> Result<(), Refusal> {
                broker
                    .registry
                    .set_group_configs(&name, next.clone())
                    .map_err(|e| refuse(ResponseError::KafkaStorageError, e.to_string()))?;
                tracing::info!(group = %name, configs = ?next, "group configs changed");
                coordinator.set_group_configs(&name, next);
                Ok(())
            })
            .await
            .unwrap_or_else(|e| Err(refuse(ResponseError::UnknownServerError, e.to_string())))
        }
        other => Err(refuse(
            ResponseError::InvalidRequest,
            format!("Unsupported resource type {other}"),
        )),
    }
}

/// Handles AlterConfigs (the whole set of overrides is replaced).
pub async fn handle_alter_configs(
    broker: &Arc<Broker>,
    request: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let mut response = AlterConfigsResponse::default();
    for resource in request.resources {
        let changes = resource
            .configs
            .iter()
            .filter_map(|c| {
                c.value
                    .as_ref()
                    .map(|v| (c.name.to_string(), Change::Set(v.to_string())))
            })
            .collect();
        let mut r = alter_configs_response::AlterConfigsResourceResponse::default();
        r.resource_type = resource.resource_type;
        r.resource_name = resource.resource_name.clone();
        if let Err(e) = alter_resource(
            broker,
            resource.resource_type,
            resource.resource_name.to_string(),
            changes,
            true,
            request.validate_only,
        )
        .await
        {
            r.error_code = e.code;
            r.error_message = Some(StrBytes::from_string(e.message));
        }
        response.responses.push(r);
    }
    response
}

/// Handles IncrementalAlterConfigs (SET, DELETE, APPEND, SUBTRACT).
pub async fn handle_incremental_alter_configs(
    broker: &Arc<Broker>,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut response = IncrementalAlterConfigsResponse::default();
    for resource in request.resources {
        let mut r = incremental_alter_configs_response::AlterConfigsResourceResponse::default();
        r.resource_type = resource.resource_type;
        r.resource_name = resource.resource_name.clone();
        let mut changes = Vec::new();
        let mut bad = None;
        for c in &resource.configs {
            let value = c.value.as_ref().map(|v| v.to_string());
            let change = match (c.config_operation, value) {
                (0, Some(v)) => Change::Set(v),
                (1, _) => Change::Delete,
                (2, Some(v)) => Change::Append(v),
                (3, Some(v)) => Change::Subtract(v),
                (0 | 2 | 3, None) => {
                    bad = Some(refuse(
                        ResponseError::InvalidRequest,
                        format!("Null value not supported for : {}", c.name),
                    ));
                    break;
                }
                (op, _) => {
                    bad = Some(refuse(
                        ResponseError::InvalidRequest,
                        format!("Unknown config operation {op}"),
                    ));
                    break;
                }
            };
            changes.push((c.name.to_string(), change));
        }
        let outcome = match bad {
            Some(b) => Err(b),
            None => {
                alter_resource(
                    broker,
                    resource.resource_type,
                    resource.resource_name.to_string(),
                    changes,
                    false,
                    request.validate_only,
                )
                .await
            }
        };
        if let Err(e) = outcome {
            r.error_code = e.code;
            r.error_message = Some(StrBytes::from_string(e.message));
        }
        response.responses.push(r);
    }
    response
}
