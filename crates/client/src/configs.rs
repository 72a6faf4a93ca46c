//! Config admin calls: DescribeConfigs and IncrementalAlterConfigs for topic
//! and broker resources, as Kafka's `Admin.describeConfigs` /
//! `incrementalAlterConfigs` make them.
//!
//! A broker resource is answered by that broker (its name is the broker id;
//! the empty name is the cluster-wide default, which any broker answers), so
//! those requests go to the named broker; topic resources go to any broker.

use {
    crate::{Client, ClientError},
    kafka_protocol::{
        messages::{
            ApiKey, DescribeConfigsRequest, IncrementalAlterConfigsRequest,
            describe_configs_request::DescribeConfigsResource,
            incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig},
        },
        protocol::StrBytes,
    },
    krabka_ids::BrokerId,
    std::sync::Arc,
};

/// The kind of a config resource (Kafka's `ConfigResource.Type` codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceKind {
    /// A topic (2).
    Topic,
    /// A broker (4); the name is its id, or empty for the cluster default.
    Broker,
}

impl ResourceKind {
    /// Kafka's wire code.
    #[must_use]
    pub fn code(self) -> i8 {
        match self {
            Self::Topic => 2,
            Self::Broker => 4,
        }
    }
}

/// A config resource: a topic or a broker.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConfigResource {
    /// Topic or broker.
    pub kind: ResourceKind,
    /// The topic name, or the broker id as text ("" for the cluster default).
    pub name: String,
}

impl ConfigResource {
    /// A topic resource.
    #[must_use]
    pub fn topic(name: impl Into<String>) -> Self {
        Self {
            kind: ResourceKind::Topic,
            name: name.into(),
        }
    }

    /// A broker resource (`""` for the cluster-wide default).
    #[must_use]
    pub fn broker(id: impl Into<String>) -> Self {
        Self {
            kind: ResourceKind::Broker,
            name: id.into(),
        }
    }
}

/// Kafka's `ConfigSource` by name, e.g. `DYNAMIC_TOPIC_CONFIG`.
#[must_use]
pub fn config_source_name(code: i8) -> &'static str {
    match code {
        1 => "DYNAMIC_TOPIC_CONFIG",
        2 => "DYNAMIC_BROKER_CONFIG",
        3 => "DYNAMIC_DEFAULT_BROKER_CONFIG",
        4 => "STATIC_BROKER_CONFIG",
        5 => "DEFAULT_CONFIG",
        6 => "DYNAMIC_BROKER_LOGGER_CONFIG",
        7 => "CLIENT_METRICS_CONFIG",
        8 => "GROUP_CONFIG",
        _ => "UNKNOWN",
    }
}

/// Kafka's config type by name (`DescribeConfigs` v3+), e.g. `LONG`.
#[must_use]
pub fn config_type_name(code: i8) -> &'static str {
    match code {
        1 => "BOOLEAN",
        2 => "STRING",
        3 => "INT",
        4 => "SHORT",
        5 => "LONG",
        6 => "DOUBLE",
        7 => "LIST",
        8 => "CLASS",
        9 => "PASSWORD",
        _ => "UNKNOWN",
    }
}

/// Where else a config's value could come from (`include_synonyms`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigSynonym {
    /// The synonym's name (e.g. `log.retention.ms` for `retention.ms`).
    pub name: String,
    /// Its value.
    pub value: Option<String>,
    /// Its source code (see [`config_source_name`]).
    pub source: i8,
}

/// One config of a resource as DescribeConfigs reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// The config's name.
    pub name: String,
    /// Its value (`None` for sensitive or unset values).
    pub value: Option<String>,
    /// Where the value comes from (see [`config_source_name`]).
    pub source: i8,
    /// Whether it cannot be altered.
    pub read_only: bool,
    /// Whether the value is hidden.
    pub sensitive: bool,
    /// The type code (see [`config_type_name`]), 0 when not sent.
    pub config_type: i8,
    /// Its documentation, when asked for and sent.
    pub documentation: Option<String>,
    /// The synonyms in precedence order, when asked for.
    pub synonyms: Vec<ConfigSynonym>,
}

/// How [`Client::incremental_alter_configs`] changes one config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlterConfigOp {
    /// Sets the value (0).
    Set(String, String),
    /// Removes the override, back to the default (1).
    Delete(String),
    /// Appends to a list config (2).
    Append(String, String),
    /// Removes from a list config (3).
    Subtract(String, String),
}

impl AlterConfigOp {
    fn to_wire(&self) -> AlterableConfig {
        let (name, op, value) = match self {
            Self::Set(n, v) => (n, 0, Some(v)),
            Self::Delete(n) => (n, 1, None),
            Self::Append(n, v) => (n, 2, Some(v)),
            Self::Subtract(n, v) => (n, 3, Some(v)),
        };
        let mut c = AlterableConfig::default();
        c.name = StrBytes::from_string(name.clone());
        c.config_operation = op;
        c.value = value.map(|v| StrBytes::from_string(v.clone()));
        c
    }
}

impl Client {
    /// The connection a resource's config requests go to.
    async fn config_connection(
        &self,
        resource: &ConfigResource,
    ) -> Result<Arc<crate::Connection>, ClientError> {
        match resource.kind {
            ResourceKind::Broker if !resource.name.is_empty() => {
                let id: i32 = resource.name.parse().map_err(|_| {
                    ClientError::InvalidArgument(format!(
                        "a broker resource is named by its id, not {:?}",
                        resource.name
                    ))
                })?;
                self.broker_connection(BrokerId(id)).await
            }
            _ => self.any_connection().await,
        }
    }

    /// Describes the configs of one resource (all of them when `names` is
    /// empty), with synonyms and documentation when the broker sends them.
    ///
    /// # Errors
    ///
    /// The resource's Kafka error (`UNKNOWN_TOPIC_OR_PARTITION`, 3, for a
    /// topic that does not exist), connection and protocol errors.
    pub async fn describe_configs(
        &self,
        resource: &ConfigResource,
        names: &[&str],
    ) -> Result<Vec<ConfigEntry>, ClientError> {
        let connection = self.config_connection(resource).await?;
        let version = connection.version(ApiKey::DescribeConfigs)?;
        let mut wanted = DescribeConfigsResource::default();
        wanted.resource_type = resource.kind.code();
        wanted.resource_name = StrBytes::from_string(resource.name.clone());
        wanted.configuration_keys = (!names.is_empty()).then(|| {
            names
                .iter()
                .map(|n| StrBytes::from_string((*n).to_owned()))
                .collect()
        });
        let mut request = DescribeConfigsRequest::default();
        request.resources = vec![wanted];
        request.include_synonyms = version >= 1;
        request.include_documentation = version >= 3;
        let response = connection.send_version(&request, version).await?;
        let result = response.results.into_iter().next().ok_or_else(|| {
            ClientError::Protocol(format!("DescribeConfigs answered nothing for {resource:?}"))
        })?;
        ClientError::check(result.error_code, result.error_message.as_deref(), || {
            format!(
                "DescribeConfigs {} {}",
                kind_word(resource.kind),
                resource.name
            )
        })?;
        Ok(result
            .configs
            .into_iter()
            .map(|c| ConfigEntry {
                name: c.name.to_string(),
                value: c.value.map(|v| v.to_string()),
                source: c.config_source,
                read_only: c.read_only,
                sensitive: c.is_sensitive,
                config_type: c.config_type,
                documentation: c.documentation.map(|d| d.to_string()),
                synonyms: c
                    .synonyms
                    .into_iter()
                    .map(|s| ConfigSynonym {
                        name: s.name.to_string(),
                        value: s.value.map(|v| v.to_string()),
                        source: s.source,
                    })
                    .collect(),
            })
            .collect())
    }

    /// Changes configs of one resource (IncrementalAlterConfigs); with
    /// `validate_only` the broker only checks them.
    ///
    /// # Errors
    ///
    /// The resource's Kafka error (`INVALID_CONFIG`, 40; `UNKNOWN_TOPIC_OR_PARTITION`,
    /// 3; ...), connection and protocol errors.
    pub async fn incremental_alter_configs(
        &self,
        resource: &ConfigResource,
        ops: &[AlterConfigOp],
        validate_only: bool,
    ) -> Result<(), ClientError> {
        let connection = self.config_connection(resource).await?;
        let mut target = AlterConfigsResource::default();
        target.resource_type = resource.kind.code();
        target.resource_name = StrBytes::from_string(resource.name.clone());
        target.configs = ops.iter().map(AlterConfigOp::to_wire).collect();
        let mut request = IncrementalAlterConfigsRequest::default();
        request.resources = vec![target];
        request.validate_only = validate_only;
        let response = connection.send(&request).await?;
        let result = response.responses.into_iter().next().ok_or_else(|| {
            ClientError::Protocol(format!(
                "IncrementalAlterConfigs answered nothing for {resource:?}"
            ))
        })?;
        ClientError::check(result.error_code, result.error_message.as_deref(), || {
            format!(
                "IncrementalAlterConfigs {} {}",
                kind_word(resource.kind),
                resource.name
            )
        })
    }
}

fn kind_word(kind: ResourceKind) -> &'static str {
    match kind {
        ResourceKind::Topic => "topic",
        ResourceKind::Broker => "broker",
    }
}
