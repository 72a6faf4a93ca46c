//! The request versions of Kafka 4.1 and later that `kafka-protocol` 0.18
//! does not know, served because they add nothing Krabka lacks.
//!
//! Each API has a child module that decodes the newer request onto the
//! request struct the handler already takes and writes the handler's
//! response at the newer version, as [`super::legacy`] does for the old
//! versions: the handlers are not duplicated, only the wire forms are.
//! Most of these versions change one field or only a meaning
//! (ListOffsets v11's new special timestamp), so a module is a few lines
//! over the form `kafka-protocol` reads. OffsetCommit and OffsetFetch v10
//! name topics by id, and so does TxnOffsetCommit v6: their requests are
//! read here with the ids set, and the handlers name the topics
//! ([`crate::coordinator::group::topic_ids`]).
//!
//! Which versions each API has here is one column of the API table
//! ([`crate::api_versions::APIS`], `with_newer`), which decodes with the
//! `decode` of these modules and answers through [`encode_body`].

pub mod api_versions;
pub mod delete_groups;
pub mod describe_log_dirs;
pub mod list_offsets;
pub mod offset_commit;
pub mod offset_fetch;
pub mod slot;
pub mod txn_offset_commit;
pub mod write_txn_markers;

pub use super::wire::EncodeError;

use {
    super::wire::{encode_as, reason},
    bytes::BytesMut,
    kafka_protocol::messages::{
        ApiKey, ApiVersionsResponse, DeleteGroupsResponse, DescribeLogDirsResponse,
        ListOffsetsResponse, OffsetCommitResponse, OffsetFetchResponse, TxnOffsetCommitResponse,
        WriteTxnMarkersResponse,
    },
    std::any::Any,
};

/// Writes `body`, the response of `api`, at newer `version`.
///
/// # Errors
///
/// [`EncodeError`] when `api` at `version` has no newer encoder for
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
        ApiKey::ApiVersions => body
            .downcast_ref::<ApiVersionsResponse>()
            .ok_or(missing)
            .and_then(|r| encode_as(r, api_versions::RESPONSE_AS, buf)),
        ApiKey::ListOffsets => body
            .downcast_ref::<ListOffsetsResponse>()
            .ok_or(missing)
            .and_then(|r| encode_as(r, list_offsets::WIRE_AS, buf)),
        // kafka-protocol writes these responses at v10 (it reads only the
        // requests up to v9).
        ApiKey::OffsetCommit => body
            .downcast_ref::<OffsetCommitResponse>()
            .ok_or(missing)
            .and_then(|r| encode_as(r, version, buf)),
        ApiKey::OffsetFetch => body
            .downcast_ref::<OffsetFetchResponse>()
            .ok_or(missing)
            .and_then(|r| encode_as(r, version, buf)),
        ApiKey::DeleteGroups => body
            .downcast_ref::<DeleteGroupsResponse>()
            .ok_or(missing)
            .map(|r| delete_groups::encode(r, buf)),
        ApiKey::DescribeLogDirs => body
            .downcast_ref::<DescribeLogDirsResponse>()
            .ok_or(missing)
            .map(|r| describe_log_dirs::encode(r, buf)),
        ApiKey::TxnOffsetCommit => body
            .downcast_ref::<TxnOffsetCommitResponse>()
            .ok_or(missing)
            .map(|r| txn_offset_commit::encode(r, buf)),
        ApiKey::WriteTxnMarkers => body
            .downcast_ref::<WriteTxnMarkersResponse>()
            .ok_or(missing)
            .and_then(|r| encode_as(r, write_txn_markers::RESPONSE_AS, buf)),
        _ => Err(missing),
    }
}

#[cfg(test)]
mod tests;
