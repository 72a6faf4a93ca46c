//! The request versions Kafka 3.9 served and Kafka 4 removed (KIP-896),
//! served with `krabka.legacy.protocol.enable`.
//!
//! Kafka 4 refuses these versions (closing the connection), and so does
//! Krabka by default; clients still in the field use them (sarama's default
//! configuration speaks Kafka 0.8.2: Produce v0, Fetch v0, OffsetCommit v1;
//! segmentio/kafka-go 0.2 Produce v2 and Fetch v1; librdkafka with an old
//! `broker.version.fallback`; admin tools before Kafka 2.0 manage ACLs
//! with the v0 ACL APIs; the transaction coordinators of brokers before
//! Kafka 2.8 write markers with WriteTxnMarkers v0). `kafka-protocol` cannot read them (its
//! decoders start at Kafka 4's minimum), so each API has a child module
//! that decodes an old request onto the modern request struct the handler
//! already takes, and writes the modern response at the old version: the
//! handlers are not duplicated, only the wire forms are.
//!
//! Records are converted next to this edge: a Produce v0–v2 carries
//! message formats v0/v1, which become one v2 batch per partition once the
//! request is authorized ([`produce::convert`], within the broker's bound
//! on inflating them); a Fetch v0–v3 reads v2 batches,
//! which become messages of magic 0 (v0–v1) or 1 (v2–v3) in the fetch path
//! ([`crate::fetch::convert`]), never from a segment file.
//!
//! Which versions each API has here is one column of the API table
//! ([`crate::api_versions::APIS`], `with_legacy`), which decodes with the
//! `decode` of these modules and answers through [`encode_body`].

pub mod acls;
pub mod create_topics;
pub mod delete_topics;
pub mod describe_configs;
pub mod describe_log_dirs;
pub mod fetch;
pub mod list_offsets;
pub mod offset_commit;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod write_txn_markers;

pub use super::wire::EncodeError;

use {
    super::wire::{self, encode_as, reason},
    bytes::BytesMut,
    kafka_protocol::messages::{
        ApiKey, CreateAclsResponse, CreateTopicsResponse, DeleteAclsResponse, DeleteTopicsResponse,
        DescribeAclsResponse, DescribeConfigsResponse, DescribeLogDirsResponse, FetchResponse,
        ListOffsetsResponse, OffsetCommitResponse, OffsetFetchResponse,
        OffsetForLeaderEpochResponse, ProduceResponse, WriteTxnMarkersResponse,
    },
    std::any::Any,
};

/// Writes `body`, the modern response of `api`, at legacy `version`.
///
/// # Errors
///
/// [`EncodeError`] when `api` at `version` has no legacy encoder for
/// `body`'s type.
pub fn encode_body<R: Any>(
    api: ApiKey,
    version: i16,
    body: &R,
    buf: &mut BytesMut,
) -> Result<(), EncodeError> {
    let body: &dyn Any = body;
    let missing = EncodeError::NoEncoder { api, version };
    match api {
        ApiKey::Produce => body
            .downcast_ref::<ProduceResponse>()
            .map(|r| produce::encode(r, version, buf)),
        ApiKey::Fetch => body
            .downcast_ref::<FetchResponse>()
            .map(|r| fetch::encode(r, version, buf)),
        ApiKey::ListOffsets => body
            .downcast_ref::<ListOffsetsResponse>()
            .map(|r| list_offsets::encode(r, buf)),
        ApiKey::OffsetCommit => {
            return body
                .downcast_ref::<OffsetCommitResponse>()
                .ok_or(missing)
                .and_then(|r| offset_commit::encode(r, buf));
        }
        ApiKey::OffsetFetch => {
            return body
                .downcast_ref::<OffsetFetchResponse>()
                .ok_or(missing)
                .and_then(|r| offset_fetch::encode(r, buf));
        }
        ApiKey::CreateTopics => body
            .downcast_ref::<CreateTopicsResponse>()
            .map(|r| create_topics::encode(r, version, buf)),
        ApiKey::DeleteTopics => body
            .downcast_ref::<DeleteTopicsResponse>()
            .map(|r| delete_topics::encode(r, buf)),
        ApiKey::DescribeConfigs => body
            .downcast_ref::<DescribeConfigsResponse>()
            .map(|r| describe_configs::encode(r, buf)),
        ApiKey::OffsetForLeaderEpoch => body
            .downcast_ref::<OffsetForLeaderEpochResponse>()
            .map(|r| offset_for_leader_epoch::encode(r, version, buf)),
        ApiKey::DescribeLogDirs => {
            return body
                .downcast_ref::<DescribeLogDirsResponse>()
                .ok_or(missing)
                .and_then(|r| describe_log_dirs::encode(r, buf));
        }
        ApiKey::DescribeAcls => body
            .downcast_ref::<DescribeAclsResponse>()
            .map(|r| acls::encode_describe(r, buf)),
        ApiKey::CreateAcls => {
            return body
                .downcast_ref::<CreateAclsResponse>()
                .ok_or(missing)
                .and_then(|r| encode_as(r, acls::CREATE_RESPONSE_AS, buf));
        }
        ApiKey::DeleteAcls => body
            .downcast_ref::<DeleteAclsResponse>()
            .map(|r| acls::encode_delete(r, buf)),
        ApiKey::WriteTxnMarkers => body
            .downcast_ref::<WriteTxnMarkersResponse>()
            .map(|r| write_txn_markers::encode(r, buf)),
        _ => None,
    }
    .ok_or(missing)
}

#[cfg(test)]
mod tests;
