//! Request handlers, one module per API family, and the dispatcher that
//! routes a decoded request to its handler and encodes the answer.

pub mod admin;
pub mod configs;
pub mod disk;
pub mod elect;
pub mod metadata;
pub mod offsets;
pub mod placement;
pub mod produce;
pub mod producer;
pub mod topic_partitions;
pub mod txn_markers;

use {
    crate::{
        api_versions,
        broker::Broker,
        fetch,
        network::codec::{DecodedRequest, Request, encode_response},
        security::authorize::{self, Fixup},
    },
    bytes::Bytes,
    kafka_protocol::{error::ResponseError, messages::ApiKey},
    std::sync::Arc,
};

/// What to do after handling a request.
#[derive(Debug)]
pub enum Reply {
    /// Send this frame.
    Frame(Bytes),
    /// Send this frame made of bytes and file slices (a Fetch answer on a
    /// plain connection, see [`crate::network::writer`]).
    Parts(crate::network::writer::Parts),
    /// Send nothing (acks=0 produce).
    Nothing,
    /// Close the connection, logging this reason.
    Close(String),
}

/// Whether a request changes state and so must be handled before the next
/// request of the same connection is read (keeps a producer's pipelined
/// batches in order). Everything else may run concurrently. The API table
/// ([`api_versions::APIS`]) says which is which.
#[must_use]
pub fn must_run_in_order(request: &DecodedRequest) -> bool {
    api_versions::must_run_in_order(request.api_key)
}

/// What [`queue_produce`] made of a request.
#[derive(Debug)]
pub enum Queued<F> {
    /// A produce, queued: the future waits for its appends and answers;
    /// [`produce::Accepted`] tells when its partitions have taken the
    /// batches (the connection's read-ahead is held until then).
    Produce(F, produce::Accepted),
    /// Anything else, for [`handle`] (boxed: a decoded request is large).
    Other(Box<DecodedRequest>),
}

/// A Produce request is queued at its partitions' logs at once, which fixes
/// the order of its batches. Any other request is handed back for
/// [`handle`], and so is an acks=0 Produce: its failure closes the
/// connection, so nothing read after it may be appended first.
///
/// A transactional Produce v12+ first adds its partitions to the open
/// transaction (transactions v2), which is the one wait before the queueing.
pub async fn queue_produce(
    broker: &Arc<Broker>,
    mut request: DecodedRequest,
) -> Queued<impl Future<Output = Reply> + Send + 'static + use<>> {
    if !matches!(&request.body, Request::Produce(r) if r.acks != 0) {
        return Queued::Other(Box::new(request));
    }
    let (version, correlation_id) = (request.version, request.header.correlation_id);
    let checked = authorize::check(broker, &mut request);
    let r = match request.body {
        Request::Produce(r) => r,
        body => return Queued::Other(Box::new(DecodedRequest { body, ..request })),
    };
    let acks = r.acks;
    let (queued, answered, accepted) = match checked {
        Ok(fixup) => {
            let refused =
                crate::coordinator::txn::wire::add_produced_partitions(broker, version, &r).await;
            let mut queued = produce::queue_produce(
                broker,
                version,
                client_id(&request.header),
                r,
                refused.as_ref(),
            );
            let accepted = queued.take_accepted();
            (Some((queued, fixup)), None, accepted)
        }
        Err(reply) => (None, Some(reply), produce::Accepted::default()),
    };
    let answer = async move {
        match (queued, answered) {
            (Some((queued, fixup)), _) => {
                produce_reply(version, correlation_id, acks, fixup, queued.answer().await)
            }
            (None, Some(reply)) => reply,
            (None, None) => Reply::Close("produce neither queued nor answered".into()),
        }
    };
    Queued::Produce(answer, accepted)
}

/// The request's `client.id` ("" when absent).
fn client_id(header: &kafka_protocol::messages::RequestHeader) -> &str {
    header.client_id.as_ref().map_or("", |c| c.as_str())
}

fn produce_reply(
    version: i16,
    correlation_id: i32,
    acks: i16,
    fixup: Fixup,
    mut outcome: produce::ProduceOutcome,
) -> Reply {
    if acks == 0 {
        if fixup.refused_any() {
            return Reply::Close("acks=0 produce refused: not authorized".into());
        }
        return match outcome.failure {
            Some(reason) => Reply::Close(format!("acks=0 produce failed: {reason}")),
            None => Reply::Nothing,
        };
    }
    outcome.response = fixup.fill(outcome.response);
    match encode_response(ApiKey::Produce, version, correlation_id, &outcome.response) {
        Ok(frame) => Reply::Frame(frame),
        Err(reason) => Reply::Close(format!(
            "cannot encode Produce v{version} response: {reason}"
        )),
    }
}

/// Handles one request; returns the encoded answer.
pub async fn handle(broker: &Arc<Broker>, mut request: DecodedRequest) -> Reply {
    let fixup = match authorize::check(broker, &mut request) {
        Ok(fixup) => fixup,
        Err(answer) => return answer,
    };
    let DecodedRequest {
        api_key,
        version,
        header,
        body,
        peer,
        session: _,
        zero_copy,
    } = request;
    let correlation_id = header.correlation_id;
    tracing::trace!(api = ?api_key, version, correlation_id, "request");
    let encoded = match body {
        Request::ApiVersions(_) => encode_response(
            api_key,
            version,
            correlation_id,
            &api_versions::response(0, broker.served(), broker.features()),
        ),
        Request::ApiVersionsChecked(checked) => {
            let response = if checked.mismatches(&broker.cluster_id(), broker.config.node_id) {
                let mut refused = kafka_protocol::messages::ApiVersionsResponse::default();
                refused.error_code = crate::network::newer::api_versions::REBOOTSTRAP_REQUIRED;
                refused
            } else {
                api_versions::response(0, broker.served(), broker.features())
            };
            encode_response(api_key, version, correlation_id, &response)
        }
        Request::ApiVersionsUnsupported => encode_response(
            ApiKey::ApiVersions,
            0,
            correlation_id,
            &api_versions::response(
                ResponseError::UnsupportedVersion.code(),
                broker.served(),
                broker.features(),
            ),
        ),
        Request::Metadata(r) => encode_response(
            api_key,
            version,
            correlation_id,
            &fixup.fill(metadata::handle_metadata(broker, version, r).await),
        ),
        Request::Produce(r) => {
            let acks = r.acks;
            let refused =
                crate::coordinator::txn::wire::add_produced_partitions(broker, version, &r).await;
            let queued =
                produce::queue_produce(broker, version, client_id(&header), r, refused.as_ref());
            return produce_reply(version, correlation_id, acks, fixup, queued.answer().await);
        }
        Request::Fetch(r) => {
            return fetch::answer(broker, version, correlation_id, r, fixup, zero_copy).await;
        }
        Request::ListOffsets(r) => encode_response(
            api_key,
            version,
            correlation_id,
            &fixup.fill(offsets::handle_list_offsets(broker, version, r).await),
        ),
        Request::OffsetForLeaderEpoch(r) => encode_response(
            api_key,
            version,
            correlation_id,
            &fixup.fill(offsets::handle_offset_for_leader_epoch(broker, &r)),
        ),
        Request::CreateTopics(r) => encode_response(
            api_key,
            version,
            correlation_id,
            &fixup.fill(admin::handle_create_topics(broker, version, r).await),
        ),
        Request::DeleteTopics(r) => encode_response(
            api_key,
            version,
            correlation_id,
            &fixup.fill(admin::handle_delete_topics(broker, version, r).await),
        ),
        Request::CreatePartitions(r) => encode_response(
            api_key,
            version,
            correlation_id,
            &fixup.fill(admin::handle_create_partitions(broker, r).await),
        ),
        Request::DeleteRecords(r) => encode_response(
            api_key,
            version,
            correlation_id,
            &fixup.fill(admin::handle_delete_records(broker, r).await),
        ),
        Request::DescribeLogDirs(r) => encode_response(
            api_key,
            version,
            correlation_id,
            &fixup.fill(admin::handle_describe_log_dirs(broker, &r).await),
        ),
        Request::DescribeCluster(r) => encode_response(
            api_key,
            version,
            correlation_id,
            &fixup.fill(metadata::handle_describe_cluster(broker, &r)),
        ),
        Request::DescribeTopicPartitions(r) => encode_response(
            api_key,
            version,
            correlation_id,
            &fixup.fill(topic_partitions::handle_describe_topic_partitions(
                broker, &r,
            )),
        ),
        Request::DescribeConfigs(r) => encode_response(
            api_key,
            version,
            correlation_id,
            &fixup.fill(configs::handle_describe_configs(broker, &r)),
        ),
        Request::AlterConfigs(r) => encode_response(
            api_key,
            version,
            correlation_id,
            &fixup.fill(configs::handle_alter_configs(broker, r).await),
        ),
        Request::ElectLeaders(r) => encode_response(
            api_key,
            version,
            correlation_id,
            &fixup.fill(elect::handle_elect_leaders(broker, version, &r)),
        ),
        Request::WriteTxnMarkers(r) => encode_response(
            api_key,
            version,
            correlation_id,
            &fixup.fill(txn_markers::handle_write_txn_markers(broker, r).await),
        ),
        Request::IncrementalAlterConfigs(r) => encode_response(
            api_key,
            version,
            correlation_id,
            &fixup.fill(configs::handle_incremental_alter_configs(broker, r).await),
        ),
        Request::Group(r) => {
            crate::coordinator::group::wire::handle(
                broker, api_key, version, &header, peer, r, fixup,
            )
            .await
        }
        Request::Txn(r) => {
            crate::coordinator::txn::wire::handle(
                broker,
                api_key,
                version,
                correlation_id,
                r,
                fixup,
            )
            .await
        }
        Request::Security(r) => {
            crate::security::admin::handle(broker, api_key, version, correlation_id, r).await
        }
        Request::InitProducerId(r)
            if r.transactional_id.as_ref().is_some_and(|t| !t.0.is_empty()) =>
        {
            encode_response(
                api_key,
                version,
                correlation_id,
                &fixup.fill(
                    crate::coordinator::txn::wire::init_producer_id(broker, version, r).await,
                ),
            )
        }
        Request::InitProducerId(r) => encode_response(
            api_key,
            version,
            correlation_id,
            &fixup.fill(producer::handle_init_producer_id(broker, r).await),
        ),
    };
    match encoded {
        Ok(frame) => Reply::Frame(frame),
        Err(reason) => Reply::Close(format!(
            "cannot encode {api_key:?} v{version} response: {reason}"
        )),
    }
}

#[cfg(test)]
pub(crate) mod test_call;
#[cfg(test)]
mod tests;
