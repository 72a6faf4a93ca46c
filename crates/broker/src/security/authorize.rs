//! What every API checks before it runs, in one place, with Kafka's
//! resources, operations and error codes (`KafkaApis`).
//!
//! The dispatcher calls [`check`] with each decoded request. It either
//! answers the whole request itself (a refused cluster action, group or
//! transactional id), or removes the refused topics, groups or keys from
//! the request and returns a [`Fixup`] that puts their errors into the
//! handler's response, so handlers never see what the principal may not
//! touch. The fixup also fills what depends on the connection: the
//! addresses of the listener the client connected to (Metadata,
//! DescribeCluster, FindCoordinator) and KIP-430's authorized operations.
//!
//! Without an authorizer only the listener addresses are fixed up, and
//! only when the client's listener is not the inter-broker one.

use {
    super::{
        acl::binding::{CLUSTER_NAME, Operation, ResourceType},
        session::Session,
    },
    crate::{
        broker::Broker,
        coordinator::{
            group::{topic_ids, wire::GroupRequest},
            txn::wire::TxnRequest,
        },
        handlers::Reply,
        network::{
            codec::{DecodedRequest, Request, encode_response},
            newer::txn_offset_commit,
        },
    },
    kafka_protocol::{
        error::ResponseError,
        messages::{self as m, ApiKey, BrokerId, TopicName},
        protocol::{Encodable, HeaderVersion, StrBytes},
    },
    std::{any::Any, collections::HashMap, sync::Arc},
};

type Edit = Box<dyn FnOnce(&mut dyn Any) + Send>;

/// Completes a handler's response: errors of the refused parts and the
/// connection-dependent fields. Empty for most requests.
#[derive(Default)]
pub struct Fixup {
    edits: Vec<Edit>,
    refused: bool,
}

impl std::fmt::Debug for Fixup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fixup")
            .field("edits", &self.edits.len())
            .field("refused", &self.refused)
            .finish()
    }
}

impl Fixup {
    /// Nothing to fix.
    #[must_use]
    pub fn none() -> Self {
        Self::default()
    }

    fn edit<R: Any>(mut self, f: impl FnOnce(&mut R) + Send + 'static) -> Self {
        self.edits.push(Box::new(move |any: &mut dyn Any| {
            if let Some(response) = any.downcast_mut::<R>() {
                f(response);
            } else {
                debug_assert!(false, "fixup for another response type");
            }
        }));
        self
    }

    fn refusing(mut self, refused: bool) -> Self {
        self.refused |= refused;
        self
    }

    /// Whether some part of the request was refused (an acks=0 produce then
    /// closes the connection, as on Kafka).
    #[must_use]
    pub fn refused_any(&self) -> bool {
        self.refused
    }

    /// Applies the fixes to `response`.
    #[must_use]
    pub fn fill<R: Any>(self, mut response: R) -> R {
        for edit in self.edits {
            edit(&mut response);
        }
        response
    }
}

fn answer<R: Encodable + HeaderVersion + 'static>(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &R,
) -> Reply {
    match encode_response(api, version, correlation_id, body) {
        Ok(frame) => Reply::Frame(frame),
        Err(reason) => Reply::Close(format!(
            "cannot encode {api:?} v{version} response: {reason}"
        )),
    }
}

/// Removes and returns the items `keep` refuses.
fn split<T>(items: &mut Vec<T>, mut keep: impl FnMut(&T) -> bool) -> Vec<T> {
    let mut refused = Vec::new();
    let mut kept = Vec::with_capacity(items.len());
    for item in items.drain(..) {
        if keep(&item) {
            kept.push(item);
        } else {
            refused.push(item);
        }
    }
    *items = kept;
    refused
}

const TOPIC_DENIED: i16 = 29;
const GROUP_DENIED: i16 = 30;
const CLUSTER_DENIED: i16 = 31;
const TXN_DENIED: i16 = 53;

fn code(e: ResponseError) -> i16 {
    e.code()
}

/// The checks of one request.
struct Ctx<'a> {
    broker: &'a Arc<Broker>,
    session: &'a Arc<Session>,
}

impl Ctx<'_> {
    fn allow(&self, operation: Operation, resource_type: ResourceType, name: &str) -> bool {
        self.session
            .authorize(&self.broker.security, operation, resource_type, name)
    }

    fn cluster(&self, operation: Operation) -> bool {
        self.allow(operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    fn topic(&self, operation: Operation, name: &str) -> bool {
        self.allow(operation, ResourceType::Topic, name)
    }

    /// The name of a topic given by name or (newer versions) by id; `None`
    /// for an id this broker does not know (the handler answers it).
    fn topic_name(&self, name: &TopicName, id: uuid::Uuid) -> Option<String> {
        if !name.0.is_empty() {
            return Some(name.0.to_string());
        }
        self.broker.registry.by_id(id).map(|m| m.name)
    }
}

/// The KIP-430 bit set of the operations `session` may do on a resource.
fn operations(broker: &Broker, session: &Session, resource_type: ResourceType, name: &str) -> i32 {
    Operation::supported_by(resource_type)
        .iter()
        .filter(|op| session.authorize(&broker.security, **op, resource_type, name))
        .fold(0, |bits, op| bits | (1 << op.code()))
}

/// Every broker's address on `session`'s listener, by node id: this
/// broker's own, and in cluster mode each live broker's registration of
/// the listener of that name (a broker without one is left out, as Kafka
/// leaves out brokers that lack the client's listener).
fn addresses_on_listener(broker: &Broker, session: &Session) -> HashMap<BrokerId, (StrBytes, i32)> {
    let name = &session.listener.spec.name;
    let mut addresses: HashMap<_, _> = broker
        .cluster
        .get()
        .map(|node| node.live_brokers())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|b| {
            let (host, port) = crate::cluster::named_listener_address(&b.listeners, name)?;
            Some((BrokerId(b.node.0), (StrBytes::from_string(host), port)))
        })
        .collect();
    let (host, port) = session.listener.advertised();
    addresses.insert(
        BrokerId(broker.config.node_id),
        (StrBytes::from_string(host), port),
    );
    addresses
}

/// The fix that gives the client every broker's address on the listener
/// it connected to, where the handlers wrote the inter-broker ones.
fn listener_address(broker: &Arc<Broker>, session: &Arc<Session>, api: ApiKey) -> Fixup {
    if Arc::ptr_eq(broker.security.inter_broker(), &session.listener)
        || !matches!(
            api,
            ApiKey::Metadata | ApiKey::DescribeCluster | ApiKey::FindCoordinator
        )
    {
        return Fixup::none();
    }
    let on = addresses_on_listener(broker, session);
    match api {
        ApiKey::Metadata => Fixup::none().edit(move |r: &mut m::MetadataResponse| {
            r.brokers
                .retain_mut(|b| readdress(&on, b.node_id, &mut b.host, &mut b.port));
        }),
        ApiKey::DescribeCluster => Fixup::none().edit(move |r: &mut m::DescribeClusterResponse| {
            r.brokers
                .retain_mut(|b| readdress(&on, b.broker_id, &mut b.host, &mut b.port));
        }),
        _ => Fixup::none().edit(move |r: &mut m::FindCoordinatorResponse| {
            readdress(&on, r.node_id, &mut r.host, &mut r.port);
            for c in &mut r.coordinators {
                readdress(&on, c.node_id, &mut c.host, &mut c.port);
            }
        }),
    }
}

/// Puts `node`'s address from `on` into `host` and `port`; false when `on`
/// has none for it.
fn readdress(
    on: &HashMap<BrokerId, (StrBytes, i32)>,
    node: BrokerId,
    host: &mut StrBytes,
    port: &mut i32,
) -> bool {
    match on.get(&node) {
        Some((h, p)) => {
            *host = h.clone();
            *port = *p;
            true
        }
        None => false,
    }
}

/// Checks `request` for its session: `Ok` with the fixes for the
/// handler's response (the request may have lost refused parts), or `Err`
/// with the whole answer.
///
/// # Errors
///
/// The answer to send instead of handling the request: Kafka's
/// authorization error for a refused cluster action, group, transactional
/// id or coordinator key.
pub fn check(broker: &Arc<Broker>, request: &mut DecodedRequest) -> Result<Fixup, Reply> {
    let Some(session) = request.session.clone() else {
        // Requests the broker makes of itself carry no session.
        return Ok(Fixup::none());
    };
    let listener = match request.api_key {
        ApiKey::Metadata | ApiKey::DescribeCluster | ApiKey::FindCoordinator => {
            listener_address(broker, &session, request.api_key)
        }
        _ => Fixup::none(),
    };
    if broker.security.authorizer.is_none() {
        return Ok(listener);
    }
    let ctx = Ctx {
        broker,
        session: &session,
    };
    let (api, version, id) = (
        request.api_key,
        request.version,
        request.header.correlation_id,
    );
    let whole = |reply: Reply| -> Result<Fixup, Reply> { Err(reply) };
    let fixup = match &mut request.body {
        Request::ApiVersions(_)
        | Request::ApiVersionsUnsupported
        | Request::ApiVersionsChecked(_) => Fixup::none(),
        Request::Produce(r) => produce(&ctx, r),
        Request::Fetch(r) => fetch(&ctx, r),
        Request::ListOffsets(r) => list_offsets(&ctx, r),
        Request::Metadata(r) => metadata(&ctx, version, r),
        Request::CreateTopics(r) => create_topics(&ctx, r),
        Request::DeleteTopics(r) => delete_topics(&ctx, r),
        Request::DeleteRecords(r) => delete_records(&ctx, r),
        Request::CreatePartitions(r) => {
            let refused = split(&mut r.topics, |t| {
                ctx.topic(Operation::Alter, t.name.0.as_str())
            });
            Fixup::none().refusing(!refused.is_empty()).edit(
                move |resp: &mut m::CreatePartitionsResponse| {
                    for t in refused {
                        let mut result =
                            m::create_partitions_response::CreatePartitionsTopicResult::default();
                        result.name = t.name;
                        result.error_code = TOPIC_DENIED;
                        resp.results.push(result);
                    }
                },
            )
        }
        Request::InitProducerId(r) => {
            let allowed = match r.transactional_id.as_ref().filter(|t| !t.0.is_empty()) {
                Some(txn) => ctx.allow(
                    Operation::Write,
                    ResourceType::TransactionalId,
                    txn.0.as_str(),
                ),
                None => {
                    ctx.cluster(Operation::IdempotentWrite)
                        || session.authorize_any(
                            &broker.security,
                            Operation::Write,
                            ResourceType::Topic,
                        )
                }
            };
            if !allowed {
                let mut response = m::InitProducerIdResponse::default();
                response.error_code =
                    if r.transactional_id.as_ref().is_some_and(|t| !t.0.is_empty()) {
                        TXN_DENIED
                    } else {
                        CLUSTER_DENIED
                    };
                response.producer_id = m::ProducerId(-1);
                response.producer_epoch = -1;
                return whole(answer(api, version, id, &response));
            }
            Fixup::none()
        }
        Request::OffsetForLeaderEpoch(r) => {
            if r.replica_id.0 >= 0 && !ctx.cluster(Operation::ClusterAction) {
                let refused = std::mem::take(&mut r.topics);
                epoch_refusals(refused)
            } else {
                let refused = split(&mut r.topics, |t| {
                    ctx.topic(Operation::Describe, t.topic.0.as_str())
                });
                epoch_refusals(refused)
            }
        }
        Request::DescribeConfigs(r) => {
            let refused = split(&mut r.resources, |res| {
                config_allowed(
                    &ctx,
                    Operation::DescribeConfigs,
                    res.resource_type,
                    res.resource_name.as_str(),
                )
            });
            Fixup::none().refusing(!refused.is_empty()).edit(
                move |resp: &mut m::DescribeConfigsResponse| {
                    for res in refused {
                        let mut result =
                            m::describe_configs_response::DescribeConfigsResult::default();
                        result.error_code = config_denied(res.resource_type);
                        result.resource_type = res.resource_type;
                        result.resource_name = res.resource_name;
                        resp.results.push(result);
                    }
                },
            )
        }
        Request::AlterConfigs(r) => {
            let refused = split(&mut r.resources, |res| {
                config_allowed(
                    &ctx,
                    Operation::AlterConfigs,
                    res.resource_type,
                    res.resource_name.as_str(),
                )
            });
            Fixup::none().refusing(!refused.is_empty()).edit(
                move |resp: &mut m::AlterConfigsResponse| {
                    for res in refused {
                        let mut result =
                            m::alter_configs_response::AlterConfigsResourceResponse::default();
                        result.error_code = config_denied(res.resource_type);
                        result.resource_type = res.resource_type;
                        result.resource_name = res.resource_name;
                        resp.responses.push(result);
                    }
                },
            )
        }
        Request::IncrementalAlterConfigs(r) => {
            let refused = split(&mut r.resources, |res| {
                config_allowed(
                    &ctx,
                    Operation::AlterConfigs,
                    res.resource_type,
                    res.resource_name.as_str(),
                )
            });
            Fixup::none()
                .refusing(!refused.is_empty())
                .edit(move |resp: &mut m::IncrementalAlterConfigsResponse| {
                    for res in refused {
                        let mut result =
                            m::incremental_alter_configs_response::AlterConfigsResourceResponse::default();
                        result.error_code = config_denied(res.resource_type);
                        result.resource_type = res.resource_type;
                        result.resource_name = res.resource_name;
                        resp.responses.push(result);
                    }
                })
        }
        Request::DescribeLogDirs(_) => {
            if !ctx.cluster(Operation::Describe) {
                let mut response = m::DescribeLogDirsResponse::default();
                if version >= 3 {
                    response.error_code = CLUSTER_DENIED;
                }
                return whole(answer(api, version, id, &response));
            }
            Fixup::none()
        }
        Request::DescribeCluster(r) => {
            if !ctx.cluster(Operation::Describe) {
                let mut response = m::DescribeClusterResponse::default();
                response.error_code = CLUSTER_DENIED;
                response.endpoint_type = r.endpoint_type;
                response.controller_id = BrokerId(-1);
                response.cluster_authorized_operations = i32::MIN;
                return whole(answer(api, version, id, &response));
            }
            if r.include_cluster_authorized_operations {
                let (b, s) = (Arc::clone(broker), Arc::clone(&session));
                Fixup::none().edit(move |resp: &mut m::DescribeClusterResponse| {
                    resp.cluster_authorized_operations =
                        operations(&b, &s, ResourceType::Cluster, CLUSTER_NAME);
                })
            } else {
                Fixup::none()
            }
        }
        Request::ElectLeaders(r) => {
            if !ctx.cluster(Operation::Alter) {
                return whole(answer(api, version, id, &elect_denied(r)));
            }
            Fixup::none()
        }
        Request::WriteTxnMarkers(r) => {
            if !ctx.cluster(Operation::ClusterAction) {
                let response = crate::handlers::txn_markers::refused(r);
                return whole(answer(api, version, id, &response));
            }
            Fixup::none()
        }
        Request::DescribeTopicPartitions(r) => match describe_topic_partitions(&ctx, r) {
            Ok(f) => f,
            Err(response) => return whole(answer(api, version, id, &response)),
        },
        Request::Group(g) => match group(&ctx, api, version, id, g) {
            Ok(f) => f,
            Err(reply) => return whole(reply),
        },
        Request::Txn(t) => match txn(&ctx, api, version, id, t) {
            Ok(f) => f,
            Err(reply) => return whole(reply),
        },
        Request::Security(s) => {
            match super::admin::authorize(&ctx.as_checker(), api, version, id, s) {
                Some(reply) => return whole(reply),
                None => Fixup::none(),
            }
        }
    };
    let mut fixup = fixup;
    fixup.edits.extend(listener.edits);
    Ok(fixup)
}

/// What [`super::admin`] needs to check its APIs.
pub struct Checker<'a> {
    ctx: &'a Ctx<'a>,
}

impl Checker<'_> {
    /// Whether the session may do `operation` on the cluster.
    #[must_use]
    pub fn cluster(&self, operation: Operation) -> bool {
        self.ctx.cluster(operation)
    }
}

impl<'a> Ctx<'a> {
    fn as_checker(&'a self) -> Checker<'a> {
        Checker { ctx: self }
    }
}

/// Encodes a whole answer (for [`super::admin`]).
pub(crate) fn whole_answer<R: Encodable + HeaderVersion + 'static>(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &R,
) -> Reply {
    answer(api, version, correlation_id, body)
}

fn config_allowed(ctx: &Ctx<'_>, operation: Operation, resource_type: i8, name: &str) -> bool {
    match resource_type {
        2 => ctx.topic(operation, name),
        4 | 8 => ctx.cluster(operation),
        _ => true,
    }
}

fn config_denied(resource_type: i8) -> i16 {
    if resource_type == 2 {
        TOPIC_DENIED
    } else {
        CLUSTER_DENIED
    }
}

fn epoch_refusals(refused: Vec<m::offset_for_leader_epoch_request::OffsetForLeaderTopic>) -> Fixup {
    Fixup::none().refusing(!refused.is_empty()).edit(
        move |resp: &mut m::OffsetForLeaderEpochResponse| {
            for t in refused {
                let mut topic =
                    m::offset_for_leader_epoch_response::OffsetForLeaderTopicResult::default();
                topic.topic = t.topic;
                topic.partitions = t
                    .partitions
                    .iter()
                    .map(|p| {
                        let mut e = m::offset_for_leader_epoch_response::EpochEndOffset::default();
                        e.error_code = TOPIC_DENIED;
                        e.partition = p.partition;
                        e.leader_epoch = -1;
                        e.end_offset = -1;
                        e
                    })
                    .collect();
                resp.topics.push(topic);
            }
        },
    )
}

fn produce(ctx: &Ctx<'_>, r: &mut m::ProduceRequest) -> Fixup {
    let txn_denied = r.transactional_id.as_ref().is_some_and(|t| {
        !ctx.allow(
            Operation::Write,
            ResourceType::TransactionalId,
            t.0.as_str(),
        )
    });
    let refused = if txn_denied {
        std::mem::take(&mut r.topic_data)
    } else {
        split(&mut r.topic_data, |t| {
            ctx.topic_name(&t.name, t.topic_id)
                .is_none_or(|n| ctx.topic(Operation::Write, &n))
        })
    };
    if refused.is_empty() {
        return Fixup::none();
    }
    let error = if txn_denied { TXN_DENIED } else { TOPIC_DENIED };
    Fixup::none()
        .refusing(true)
        .edit(move |resp: &mut m::ProduceResponse| {
            for t in refused {
                let mut topic = m::produce_response::TopicProduceResponse::default();
                topic.name = t.name;
                topic.topic_id = t.topic_id;
                topic.partition_responses = t
                    .partition_data
                    .iter()
                    .map(|p| {
                        let mut pr = m::produce_response::PartitionProduceResponse::default();
                        pr.index = p.index;
                        pr.error_code = error;
                        pr.base_offset = -1;
                        pr.log_append_time_ms = -1;
                        pr.log_start_offset = -1;
                        pr
                    })
                    .collect();
                resp.responses.push(topic);
            }
        })
}

fn denied_fetch_partition(index: i32) -> m::fetch_response::PartitionData {
    let mut p = m::fetch_response::PartitionData::default();
    p.partition_index = index;
    p.error_code = TOPIC_DENIED;
    p.high_watermark = -1;
    p.last_stable_offset = -1;
    p.log_start_offset = -1;
    p.preferred_read_replica = BrokerId(-1);
    p
}

fn fetch(ctx: &Ctx<'_>, r: &mut m::FetchRequest) -> Fixup {
    let replica = r.replica_id.0 >= 0 || r.replica_state.replica_id.0 >= 0;
    let refused = if replica && !ctx.cluster(Operation::ClusterAction) {
        std::mem::take(&mut r.topics)
    } else {
        split(&mut r.topics, |t| {
            ctx.topic_name(&t.topic, t.topic_id)
                .is_none_or(|n| ctx.topic(Operation::Read, &n))
        })
    };
    // Partitions a fetch session carries from earlier requests are checked
    // again in the response: ACLs may have changed since.
    let (broker, session) = (Arc::clone(ctx.broker), Arc::clone(ctx.session));
    Fixup::none()
        .refusing(!refused.is_empty())
        .edit(move |resp: &mut m::FetchResponse| {
            for topic in &mut resp.responses {
                let name = if topic.topic.0.is_empty() {
                    broker.registry.by_id(topic.topic_id).map(|m| m.name)
                } else {
                    Some(topic.topic.0.to_string())
                };
                let allowed = name.is_none_or(|n| {
                    session.authorize(&broker.security, Operation::Read, ResourceType::Topic, &n)
                });
                if !allowed {
                    for p in &mut topic.partitions {
                        *p = denied_fetch_partition(p.partition_index);
                    }
                }
            }
            for t in refused {
                let mut topic = m::fetch_response::FetchableTopicResponse::default();
                topic.topic = t.topic;
                topic.topic_id = t.topic_id;
                topic.partitions = t
                    .partitions
                    .iter()
                    .map(|p| denied_fetch_partition(p.partition))
                    .collect();
                resp.responses.push(topic);
            }
        })
}

fn list_offsets(ctx: &Ctx<'_>, r: &mut m::ListOffsetsRequest) -> Fixup {
    let refused = split(&mut r.topics, |t| {
        ctx.topic(Operation::Describe, t.name.0.as_str())
    });
    Fixup::none()
        .refusing(!refused.is_empty())
        .edit(move |resp: &mut m::ListOffsetsResponse| {
            for t in refused {
                let mut topic = m::list_offsets_response::ListOffsetsTopicResponse::default();
                topic.name = t.name;
                topic.partitions = t
                    .partitions
                    .iter()
                    .map(|p| {
                        let mut pr =
                            m::list_offsets_response::ListOffsetsPartitionResponse::default();
                        pr.partition_index = p.partition_index;
                        pr.error_code = TOPIC_DENIED;
                        pr.timestamp = -1;
                        pr.offset = -1;
                        pr.leader_epoch = -1;
                        pr
                    })
                    .collect();
                resp.topics.push(topic);
            }
        })
}

fn metadata(ctx: &Ctx<'_>, version: i16, r: &mut m::MetadataRequest) -> Fixup {
    let broker = ctx.broker;
    let may_create =
        broker.config.auto_create_topics && (version < 4 || r.allow_auto_topic_creation);
    let all_topics = match &r.topics {
        None => true,
        Some(list) => list.is_empty() && version == 0,
    };
    let mut refused = Vec::new();
    if let Some(topics) = r.topics.as_mut().filter(|_| !all_topics) {
        refused = split(topics, |t| {
            let name = match &t.name {
                Some(n) => Some(n.0.to_string()),
                None => broker.registry.by_id(t.topic_id).map(|m| m.name),
            };
            let Some(name) = name else { return true };
            if !ctx.topic(Operation::Describe, &name) {
                return false;
            }
            // Auto-creation needs CREATE on the cluster or the topic.
            let creates = may_create
                && broker.registry.get(&name).is_none()
                && crate::topics::names::validate_topic_name(&name).is_ok();
            !creates || ctx.cluster(Operation::Create) || ctx.topic(Operation::Create, &name)
        });
    }
    let (with_topic_ops, with_cluster_ops) = (
        r.include_topic_authorized_operations,
        r.include_cluster_authorized_operations,
    );
    let (b, s) = (Arc::clone(broker), Arc::clone(ctx.session));
    Fixup::none()
        .refusing(!refused.is_empty())
        .edit(move |resp: &mut m::MetadataResponse| {
            if all_topics {
                resp.topics.retain(|t| {
                    t.name.as_ref().is_some_and(|n| {
                        s.authorize(
                            &b.security,
                            Operation::Describe,
                            ResourceType::Topic,
                            n.0.as_str(),
                        )
                    })
                });
            }
            if with_topic_ops {
                for t in resp.topics.iter_mut().filter(|t| t.error_code == 0) {
                    if let Some(name) = &t.name {
                        t.topic_authorized_operations =
                            operations(&b, &s, ResourceType::Topic, name.0.as_str());
                    }
                }
            }
            if with_cluster_ops {
                resp.cluster_authorized_operations =
                    operations(&b, &s, ResourceType::Cluster, CLUSTER_NAME);
            }
            for t in refused {
                let mut topic = m::metadata_response::MetadataResponseTopic::default();
                topic.name = t.name;
                topic.topic_id = if topic.name.is_none() {
                    t.topic_id
                } else {
                    uuid::Uuid::nil()
                };
                topic.error_code = TOPIC_DENIED;
                topic.topic_authorized_operations = i32::MIN;
                resp.topics.push(topic);
            }
        })
}

/// ElectLeaders needs ALTER on the cluster; refused, every partition asked
/// for answers CLUSTER_AUTHORIZATION_FAILED, as Kafka does.
fn elect_denied(r: &m::ElectLeadersRequest) -> m::ElectLeadersResponse {
    let mut response = m::ElectLeadersResponse::default();
    response.error_code = CLUSTER_DENIED;
    response.replica_election_results = r
        .topic_partitions
        .iter()
        .flatten()
        .map(|t| {
            let mut result = m::elect_leaders_response::ReplicaElectionResult::default();
            result.topic = t.topic.clone();
            result.partition_result = t
                .partitions
                .iter()
                .map(|&p| {
                    let mut pr = m::elect_leaders_response::PartitionResult::default();
                    pr.partition_id = p;
                    pr.error_code = CLUSTER_DENIED;
                    pr
                })
                .collect();
            result
        })
        .collect();
    response
}

/// DescribeTopicPartitions, as Kafka's handler: a named topic the session
/// may not describe answers TOPIC_AUTHORIZATION_FAILED; when every topic is
/// asked for, the request is narrowed to the describable ones before
/// paging (so a page, and its cursor, never name a hidden topic). `Err` is
/// the whole (empty) answer when nothing is left to describe.
fn describe_topic_partitions(
    ctx: &Ctx<'_>,
    r: &mut m::DescribeTopicPartitionsRequest,
) -> Result<Fixup, m::DescribeTopicPartitionsResponse> {
    use m::describe_topic_partitions_request::TopicRequest;
    let mut refused = Vec::new();
    if r.topics.is_empty() {
        let mut visible: Vec<String> = ctx
            .broker
            .registry
            .topics()
            .into_iter()
            .map(|t| t.name)
            .filter(|name| ctx.topic(Operation::Describe, name))
            .collect();
        visible.sort();
        if let Some(cursor) = r.cursor.as_mut() {
            let from = cursor.topic_name.0.to_string();
            if !visible.contains(&from) {
                // The cursor names a hidden topic: go on from the next
                // visible one.
                match visible.iter().find(|t| t.as_str() > from.as_str()) {
                    Some(next) => {
                        cursor.topic_name = TopicName(StrBytes::from_string(next.clone()));
                        cursor.partition_index = 0;
                    }
                    None => visible.clear(),
                }
            }
        }
        if visible.is_empty() {
            return Err(m::DescribeTopicPartitionsResponse::default());
        }
        r.topics = visible
            .into_iter()
            .map(|name| {
                let mut t = TopicRequest::default();
                t.name = TopicName(StrBytes::from_string(name));
                t
            })
            .collect();
    } else {
        refused = split(&mut r.topics, |t| {
            ctx.topic(Operation::Describe, t.name.0.as_str())
        });
        if r.topics.is_empty() {
            let mut response = m::DescribeTopicPartitionsResponse::default();
            response.topics = refused.into_iter().map(denied_partitions_topic).collect();
            return Err(response);
        }
    }
    let (b, s) = (Arc::clone(ctx.broker), Arc::clone(ctx.session));
    Ok(Fixup::none().refusing(!refused.is_empty()).edit(
        move |resp: &mut m::DescribeTopicPartitionsResponse| {
            for t in resp.topics.iter_mut().filter(|t| t.error_code == 0) {
                if let Some(name) = &t.name {
                    t.topic_authorized_operations =
                        operations(&b, &s, ResourceType::Topic, name.0.as_str());
                }
            }
            resp.topics
                .extend(refused.into_iter().map(denied_partitions_topic));
        },
    ))
}

fn denied_partitions_topic(
    t: m::describe_topic_partitions_request::TopicRequest,
) -> m::describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic {
    let mut topic =
        m::describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic::default();
    topic.name = Some(t.name);
    topic.error_code = TOPIC_DENIED;
    topic.topic_authorized_operations = i32::MIN;
    topic
}

fn create_topics(ctx: &Ctx<'_>, r: &mut m::CreateTopicsRequest) -> Fixup {
    let cluster_create = ctx.cluster(Operation::Create);
    let refused = split(&mut r.topics, |t| {
        cluster_create || ctx.topic(Operation::Create, t.name.0.as_str())
    });
    let (b, s) = (Arc::clone(ctx.broker), Arc::clone(ctx.session));
    Fixup::none()
        .refusing(!refused.is_empty())
        .edit(move |resp: &mut m::CreateTopicsResponse| {
            for t in resp.topics.iter_mut().filter(|t| t.error_code == 0) {
                if !s.authorize(
                    &b.security,
                    Operation::DescribeConfigs,
                    ResourceType::Topic,
                    t.name.0.as_str(),
                ) {
                    t.topic_config_error_code = TOPIC_DENIED;
                    t.configs = None;
                }
            }
            for t in refused {
                let mut result = m::create_topics_response::CreatableTopicResult::default();
                result.name = t.name;
                result.error_code = TOPIC_DENIED;
                result.error_message = Some(StrBytes::from_static_str("Authorization failed."));
                result.num_partitions = -1;
                result.replication_factor = -1;
                resp.topics.push(result);
            }
        })
}

fn delete_topics(ctx: &Ctx<'_>, r: &mut m::DeleteTopicsRequest) -> Fixup {
    let refused_names = split(&mut r.topic_names, |n| {
        ctx.topic(Operation::Delete, n.0.as_str())
    });
    let refused_states = split(&mut r.topics, |t| {
        let name = match &t.name {
            Some(n) => Some(n.0.to_string()),
            None => ctx.broker.registry.by_id(t.topic_id).map(|m| m.name),
        };
        name.is_none_or(|n| ctx.topic(Operation::Delete, &n))
    });
    let refused = !refused_names.is_empty() || !refused_states.is_empty();
    Fixup::none()
        .refusing(refused)
        .edit(move |resp: &mut m::DeleteTopicsResponse| {
            for name in refused_names {
                let mut result = m::delete_topics_response::DeletableTopicResult::default();
                result.name = Some(name);
                result.error_code = TOPIC_DENIED;
                resp.responses.push(result);
            }
            for t in refused_states {
                let mut result = m::delete_topics_response::DeletableTopicResult::default();
                result.name = t.name;
                result.topic_id = t.topic_id;
                result.error_code = TOPIC_DENIED;
                resp.responses.push(result);
            }
        })
}

fn delete_records(ctx: &Ctx<'_>, r: &mut m::DeleteRecordsRequest) -> Fixup {
    let refused = split(&mut r.topics, |t| {
        ctx.topic(Operation::Delete, t.name.0.as_str())
    });
    Fixup::none()
        .refusing(!refused.is_empty())
        .edit(move |resp: &mut m::DeleteRecordsResponse| {
            for t in refused {
                let mut topic = m::delete_records_response::DeleteRecordsTopicResult::default();
                topic.name = t.name;
                topic.partitions = t
                    .partitions
                    .iter()
                    .map(|p| {
                        let mut pr =
                            m::delete_records_response::DeleteRecordsPartitionResult::default();
                        pr.partition_index = p.partition_index;
                        pr.low_watermark = -1;
                        pr.error_code = TOPIC_DENIED;
                        pr
                    })
                    .collect();
                resp.topics.push(topic);
            }
        })
}

fn group(
    ctx: &Ctx<'_>,
    api: ApiKey,
    version: i16,
    id: i32,
    request: &mut GroupRequest,
) -> Result<Fixup, Reply> {
    let group_allowed = |op: Operation, group: &str| ctx.allow(op, ResourceType::Group, group);
    match request {
        GroupRequest::FindCoordinator(r) => {
            let allowed = |key_type: i8, key: &str| match key_type {
                0 => group_allowed(Operation::Describe, key),
                1 => ctx.allow(Operation::Describe, ResourceType::TransactionalId, key),
                _ => true,
            };
            let denied = |key_type: i8| {
                if key_type == 1 {
                    TXN_DENIED
                } else {
                    GROUP_DENIED
                }
            };
            if version < 4 {
                if !allowed(r.key_type, r.key.as_str()) {
                    let mut response = m::FindCoordinatorResponse::default();
                    response.error_code = denied(r.key_type);
                    response.node_id = BrokerId(-1);
                    response.port = -1;
                    return Err(answer(api, version, id, &response));
                }
                return Ok(Fixup::none());
            }
            let key_type = r.key_type;
            let refused = split(&mut r.coordinator_keys, |k| allowed(key_type, k.as_str()));
            Ok(Fixup::none().refusing(!refused.is_empty()).edit(
                move |resp: &mut m::FindCoordinatorResponse| {
                    for key in refused {
                        let mut c = m::find_coordinator_response::Coordinator::default();
                        c.key = key;
                        c.error_code = denied(key_type);
                        c.node_id = BrokerId(-1);
                        c.port = -1;
                        resp.coordinators.push(c);
                    }
                },
            ))
        }
        GroupRequest::JoinGroup(r) => {
            if !group_allowed(Operation::Read, r.group_id.0.as_str()) {
                let mut response = m::JoinGroupResponse::default();
                response.error_code = GROUP_DENIED;
                response.generation_id = -1;
                response.member_id = r.member_id.clone();
                return Err(answer(api, version, id, &response));
            }
            Ok(Fixup::none())
        }
        GroupRequest::SyncGroup(r) => {
            if !group_allowed(Operation::Read, r.group_id.0.as_str()) {
                let mut response = m::SyncGroupResponse::default();
                response.error_code = GROUP_DENIED;
                return Err(answer(api, version, id, &response));
            }
            Ok(Fixup::none())
        }
        GroupRequest::Heartbeat(r) => {
            if !group_allowed(Operation::Read, r.group_id.0.as_str()) {
                let mut response = m::HeartbeatResponse::default();
                response.error_code = GROUP_DENIED;
                return Err(answer(api, version, id, &response));
            }
            Ok(Fixup::none())
        }
        GroupRequest::LeaveGroup(r) => {
            if !group_allowed(Operation::Read, r.group_id.0.as_str()) {
                let mut response = m::LeaveGroupResponse::default();
                response.error_code = GROUP_DENIED;
                return Err(answer(api, version, id, &response));
            }
            Ok(Fixup::none())
        }
        GroupRequest::ConsumerGroupHeartbeat(r) => {
            if !group_allowed(Operation::Read, r.group_id.0.as_str()) {
                let mut response = m::ConsumerGroupHeartbeatResponse::default();
                response.error_code = GROUP_DENIED;
                response.error_message =
                    Some(StrBytes::from_static_str("Group authorization failed."));
                return Err(answer(api, version, id, &response));
            }
            Ok(Fixup::none())
        }
        GroupRequest::OffsetCommit(r) => {
            let group_ok = group_allowed(Operation::Read, r.group_id.0.as_str());
            let refused = if group_ok {
                split(&mut r.topics, |t| {
                    ctx.topic_name(&t.name, t.topic_id)
                        .is_none_or(|n| ctx.topic(Operation::Read, &n))
                })
            } else {
                std::mem::take(&mut r.topics)
            };
            let error = if group_ok { TOPIC_DENIED } else { GROUP_DENIED };
            if !group_ok {
                let mut response = m::OffsetCommitResponse::default();
                append_commit_refusals(&mut response, refused, error);
                return Err(answer(api, version, id, &response));
            }
            Ok(Fixup::none().refusing(!refused.is_empty()).edit(
                move |resp: &mut m::OffsetCommitResponse| {
                    append_commit_refusals(resp, refused, error);
                },
            ))
        }
        GroupRequest::OffsetFetch(r) => Ok(offset_fetch(ctx, api, version, id, r)?),
        GroupRequest::OffsetDelete(r) => {
            if !group_allowed(Operation::Delete, r.group_id.0.as_str()) {
                let mut response = m::OffsetDeleteResponse::default();
                response.error_code = GROUP_DENIED;
                return Err(answer(api, version, id, &response));
            }
            let refused = split(&mut r.topics, |t| {
                ctx.topic(Operation::Read, t.name.0.as_str())
            });
            Ok(Fixup::none()
                .refusing(!refused.is_empty())
                .edit(move |resp: &mut m::OffsetDeleteResponse| {
                    for t in refused {
                        let mut topic = m::offset_delete_response::OffsetDeleteResponseTopic::default();
                        topic.name = t.name;
                        topic.partitions = t
                            .partitions
                            .iter()
                            .map(|p| {
                                let mut pr = m::offset_delete_response::OffsetDeleteResponsePartition::default();
                                pr.partition_index = p.partition_index;
                                pr.error_code = TOPIC_DENIED;
                                pr
                            })
                            .collect();
                        resp.topics.push(topic);
                    }
                }))
        }
        GroupRequest::ListGroups(_) => {
            if ctx.cluster(Operation::Describe) {
                return Ok(Fixup::none());
            }
            let (b, s) = (Arc::clone(ctx.broker), Arc::clone(ctx.session));
            Ok(Fixup::none().edit(move |resp: &mut m::ListGroupsResponse| {
                resp.groups.retain(|g| {
                    s.authorize(
                        &b.security,
                        Operation::Describe,
                        ResourceType::Group,
                        g.group_id.0.as_str(),
                    )
                });
            }))
        }
        GroupRequest::DescribeGroups(r) => {
            let refused = split(&mut r.groups, |g| {
                group_allowed(Operation::Describe, g.0.as_str())
            });
            let with_ops = r.include_authorized_operations;
            let (b, s) = (Arc::clone(ctx.broker), Arc::clone(ctx.session));
            Ok(Fixup::none().refusing(!refused.is_empty()).edit(
                move |resp: &mut m::DescribeGroupsResponse| {
                    if with_ops {
                        for g in resp.groups.iter_mut().filter(|g| g.error_code == 0) {
                            g.authorized_operations =
                                operations(&b, &s, ResourceType::Group, g.group_id.0.as_str());
                        }
                    }
                    for group in refused {
                        let mut g = m::describe_groups_response::DescribedGroup::default();
                        g.group_id = group;
                        g.error_code = GROUP_DENIED;
                        g.authorized_operations = i32::MIN;
                        resp.groups.push(g);
                    }
                },
            ))
        }
        GroupRequest::DeleteGroups(r) => {
            let refused = split(&mut r.groups_names, |g| {
                group_allowed(Operation::Delete, g.0.as_str())
            });
            Ok(Fixup::none().refusing(!refused.is_empty()).edit(
                move |resp: &mut m::DeleteGroupsResponse| {
                    for group in refused {
                        let mut g = m::delete_groups_response::DeletableGroupResult::default();
                        g.group_id = group;
                        g.error_code = GROUP_DENIED;
                        resp.results.push(g);
                    }
                },
            ))
        }
        GroupRequest::ConsumerGroupDescribe(r) => {
            let refused = split(&mut r.group_ids, |g| {
                group_allowed(Operation::Describe, g.0.as_str())
            });
            let with_ops = r.include_authorized_operations;
            let (b, s) = (Arc::clone(ctx.broker), Arc::clone(ctx.session));
            Ok(Fixup::none().refusing(!refused.is_empty()).edit(
                move |resp: &mut m::ConsumerGroupDescribeResponse| {
                    if with_ops {
                        for g in resp.groups.iter_mut().filter(|g| g.error_code == 0) {
                            g.authorized_operations =
                                operations(&b, &s, ResourceType::Group, g.group_id.0.as_str());
                        }
                    }
                    for group in refused {
                        let mut g = m::consumer_group_describe_response::DescribedGroup::default();
                        g.group_id = group;
                        g.error_code = GROUP_DENIED;
                        g.authorized_operations = i32::MIN;
                        resp.groups.push(g);
                    }
                },
            ))
        }
    }
}

fn append_commit_refusals(
    resp: &mut m::OffsetCommitResponse,
    refused: Vec<m::offset_commit_request::OffsetCommitRequestTopic>,
    error: i16,
) {
    resp.topics.extend(
        refused
            .iter()
            .map(|t| crate::coordinator::group::topic_ids::answer_commit_topic(t, error)),
    );
}

fn offset_fetch(
    ctx: &Ctx<'_>,
    api: ApiKey,
    version: i16,
    id: i32,
    r: &mut m::OffsetFetchRequest,
) -> Result<Fixup, Reply> {
    use m::offset_fetch_response as resp_m;
    let describe_topic = |n: &str| ctx.topic(Operation::Describe, n);
    let (b, s) = (Arc::clone(ctx.broker), Arc::clone(ctx.session));
    let visible =
        move |name: &str| s.authorize(&b.security, Operation::Describe, ResourceType::Topic, name);
    if version < 8 {
        if !ctx.allow(
            Operation::Describe,
            ResourceType::Group,
            r.group_id.0.as_str(),
        ) {
            let mut response = m::OffsetFetchResponse::default();
            response.error_code = GROUP_DENIED;
            if version < 2 {
                for t in r.topics.iter().flatten() {
                    let mut topic = resp_m::OffsetFetchResponseTopic::default();
                    topic.name = t.name.clone();
                    topic.partitions = t
                        .partition_indexes
                        .iter()
                        .map(|p| {
                            let mut pr = resp_m::OffsetFetchResponsePartition::default();
                            pr.partition_index = *p;
                            pr.committed_offset = -1;
                            pr.error_code = GROUP_DENIED;
                            pr
                        })
                        .collect();
                    response.topics.push(topic);
                }
            }
            return Err(answer(api, version, id, &response));
        }
        let all = r.topics.is_none();
        let refused = r
            .topics
            .as_mut()
            .map(|topics| split(topics, |t| describe_topic(t.name.0.as_str())))
            .unwrap_or_default();
        return Ok(Fixup::none().refusing(!refused.is_empty()).edit(
            move |resp: &mut m::OffsetFetchResponse| {
                if all {
                    resp.topics.retain(|t| visible(t.name.0.as_str()));
                }
                for t in refused {
                    let mut topic = resp_m::OffsetFetchResponseTopic::default();
                    topic.name = t.name;
                    topic.partitions = t
                        .partition_indexes
                        .iter()
                        .map(|p| {
                            let mut pr = resp_m::OffsetFetchResponsePartition::default();
                            pr.partition_index = *p;
                            pr.committed_offset = -1;
                            pr.committed_leader_epoch = -1;
                            pr.error_code = TOPIC_DENIED;
                            pr
                        })
                        .collect();
                    resp.topics.push(topic);
                }
            },
        ));
    }
    let refused_groups = split(&mut r.groups, |g| {
        ctx.allow(
            Operation::Describe,
            ResourceType::Group,
            g.group_id.0.as_str(),
        )
    });
    let mut refused_topics = Vec::new();
    let mut all_topics = Vec::new();
    for g in &mut r.groups {
        match &mut g.topics {
            None => all_topics.push(g.group_id.clone()),
            Some(topics) => {
                let refused = split(topics, |t| {
                    ctx.topic_name(&t.name, t.topic_id)
                        .is_none_or(|n| describe_topic(&n))
                });
                if !refused.is_empty() {
                    refused_topics.push((g.group_id.clone(), refused));
                }
            }
        }
    }
    let refused = !refused_groups.is_empty() || !refused_topics.is_empty();
    Ok(Fixup::none()
        .refusing(refused)
        .edit(move |resp: &mut m::OffsetFetchResponse| {
            for g in resp
                .groups
                .iter_mut()
                .filter(|g| all_topics.contains(&g.group_id))
            {
                g.topics.retain(|t| visible(t.name.0.as_str()));
            }
            for (group, topics) in refused_topics {
                let Some(g) = resp.groups.iter_mut().find(|g| g.group_id == group) else {
                    continue;
                };
                for t in topics {
                    let mut topic = resp_m::OffsetFetchResponseTopics::default();
                    topic.name = t.name;
                    topic.topic_id = t.topic_id;
                    topic.partitions = t
                        .partition_indexes
                        .iter()
                        .map(|p| {
                            let mut pr = resp_m::OffsetFetchResponsePartitions::default();
                            pr.partition_index = *p;
                            pr.committed_offset = -1;
                            pr.committed_leader_epoch = -1;
                            pr.error_code = TOPIC_DENIED;
                            pr
                        })
                        .collect();
                    g.topics.push(topic);
                }
            }
            for group in refused_groups {
                let mut g = resp_m::OffsetFetchResponseGroup::default();
                g.group_id = group.group_id;
                g.error_code = GROUP_DENIED;
                resp.groups.push(g);
            }
        }))
}

fn txn(
    ctx: &Ctx<'_>,
    api: ApiKey,
    version: i16,
    id: i32,
    request: &mut TxnRequest,
) -> Result<Fixup, Reply> {
    let txn_allowed = |op: Operation, txn: &str| ctx.allow(op, ResourceType::TransactionalId, txn);
    match request {
        TxnRequest::AddPartitionsToTxn(r) => {
            use m::add_partitions_to_txn_response as resp_m;
            if version >= 4 {
                if !ctx.cluster(Operation::ClusterAction) {
                    let mut response = m::AddPartitionsToTxnResponse::default();
                    response.error_code = CLUSTER_DENIED;
                    return Err(answer(api, version, id, &response));
                }
                return Ok(Fixup::none());
            }
            let txn_ok = txn_allowed(Operation::Write, r.v3_and_below_transactional_id.0.as_str());
            let denied: Vec<&str> = r
                .v3_and_below_topics
                .iter()
                .filter(|t| !ctx.topic(Operation::Write, t.name.0.as_str()))
                .map(|t| t.name.0.as_str())
                .collect();
            if txn_ok && denied.is_empty() {
                return Ok(Fixup::none());
            }
            let mut response = m::AddPartitionsToTxnResponse::default();
            response.results_by_topic_v3_and_below = r
                .v3_and_below_topics
                .iter()
                .map(|t| {
                    let error = if !txn_ok {
                        TXN_DENIED
                    } else if denied.contains(&t.name.0.as_str()) {
                        TOPIC_DENIED
                    } else {
                        code(ResponseError::OperationNotAttempted)
                    };
                    let mut topic = resp_m::AddPartitionsToTxnTopicResult::default();
                    topic.name = t.name.clone();
                    topic.results_by_partition = t
                        .partitions
                        .iter()
                        .map(|p| {
                            let mut pr = resp_m::AddPartitionsToTxnPartitionResult::default();
                            pr.partition_index = *p;
                            pr.partition_error_code = error;
                            pr
                        })
                        .collect();
                    topic
                })
                .collect();
            Err(answer(api, version, id, &response))
        }
        TxnRequest::AddOffsetsToTxn(r) => {
            let error = if !txn_allowed(Operation::Write, r.transactional_id.0.as_str()) {
                TXN_DENIED
            } else if !ctx.allow(Operation::Read, ResourceType::Group, r.group_id.0.as_str()) {
                GROUP_DENIED
            } else {
                return Ok(Fixup::none());
            };
            let mut response = m::AddOffsetsToTxnResponse::default();
            response.error_code = error;
            Err(answer(api, version, id, &response))
        }
        TxnRequest::EndTxn(r) => {
            if !txn_allowed(Operation::Write, r.transactional_id.0.as_str()) {
                let mut response = m::EndTxnResponse::default();
                response.error_code = TXN_DENIED;
                response.producer_id = m::ProducerId(-1);
                response.producer_epoch = -1;
                return Err(answer(api, version, id, &response));
            }
            Ok(Fixup::none())
        }
        TxnRequest::TxnOffsetCommit(r) => {
            let whole_error = if !txn_allowed(Operation::Write, r.transactional_id.0.as_str()) {
                Some(TXN_DENIED)
            } else if !ctx.allow(Operation::Read, ResourceType::Group, r.group_id.0.as_str()) {
                Some(GROUP_DENIED)
            } else {
                None
            };
            let refused = match whole_error {
                Some(_) => std::mem::take(&mut r.topics),
                None => split(&mut r.topics, |t| {
                    let id = txn_offset_commit::topic_id(&t.unknown_tagged_fields);
                    ctx.topic_name(&t.name, id.unwrap_or_default())
                        .is_none_or(|n| ctx.topic(Operation::Read, &n))
                }),
            };
            let error = whole_error.unwrap_or(TOPIC_DENIED);
            let fill = move |resp: &mut m::TxnOffsetCommitResponse| {
                resp.topics.extend(
                    refused
                        .iter()
                        .map(|t| topic_ids::answer_txn_commit_topic(t, error)),
                );
            };
            if whole_error.is_some() {
                let mut response = m::TxnOffsetCommitResponse::default();
                fill(&mut response);
                return Err(answer(api, version, id, &response));
            }
            Ok(Fixup::none().refusing(true).edit(fill))
        }
        TxnRequest::DescribeTransactions(r) => {
            let refused = split(&mut r.transactional_ids, |t| {
                txn_allowed(Operation::Describe, t.0.as_str())
            });
            Ok(Fixup::none().refusing(!refused.is_empty()).edit(
                move |resp: &mut m::DescribeTransactionsResponse| {
                    for txn in refused {
                        let mut state =
                            m::describe_transactions_response::TransactionState::default();
                        state.transactional_id = txn;
                        state.error_code = TXN_DENIED;
                        state.producer_id = m::ProducerId(-1);
                        state.producer_epoch = -1;
                        state.transaction_start_time_ms = -1;
                        resp.transaction_states.push(state);
                    }
                },
            ))
        }
        TxnRequest::ListTransactions(_) => {
            let (b, s) = (Arc::clone(ctx.broker), Arc::clone(ctx.session));
            Ok(
                Fixup::none().edit(move |resp: &mut m::ListTransactionsResponse| {
                    resp.transaction_states.retain(|t| {
                        s.authorize(
                            &b.security,
                            Operation::Describe,
                            ResourceType::TransactionalId,
                            t.transactional_id.0.as_str(),
                        )
                    });
                }),
            )
        }
        TxnRequest::DescribeProducers(r) => {
            use m::describe_producers_response as resp_m;
            let refused = split(&mut r.topics, |t| {
                ctx.topic(Operation::Read, t.name.0.as_str())
            });
            Ok(Fixup::none().refusing(!refused.is_empty()).edit(
                move |resp: &mut m::DescribeProducersResponse| {
                    for t in refused {
                        let mut topic = resp_m::TopicResponse::default();
                        topic.name = t.name;
                        topic.partitions = t
                            .partition_indexes
                            .iter()
                            .map(|p| {
                                let mut pr = resp_m::PartitionResponse::default();
                                pr.partition_index = *p;
                                pr.error_code = TOPIC_DENIED;
                                pr
                            })
                            .collect();
                        resp.topics.push(topic);
                    }
                },
            ))
        }
    }
}
