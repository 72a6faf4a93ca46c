//! ApiVersions v5 (Kafka 4.4, KIP-1242): v4 plus the cluster id and node id
//! the client believes it is talking to.
//!
//! A client that re-resolves a broker's address may reach another cluster
//! or another node behind it. When the request names a cluster id, the
//! broker checks both against its own and answers a mismatch
//! `REBOOTSTRAP_REQUIRED` (no API list), so the client starts over from its
//! bootstrap servers, as Kafka does. Without a cluster id (a bootstrap
//! connection) nothing is checked.
//!
//! Request v5: `client_software_name compact_string,
//! client_software_version compact_string, cluster_id
//! compact_nullable_string, node_id i32, tags`. The response is v4's.

use {
    super::reason,
    crate::network::{
        codec::Request,
        wire::{Reader, WireError},
    },
    bytes::Bytes,
    kafka_protocol::{messages::ApiVersionsRequest, protocol::StrBytes},
};

/// The version whose response form v5 shares.
pub const RESPONSE_AS: i16 = 4;

/// Kafka's `REBOOTSTRAP_REQUIRED` (129): the client's metadata is stale.
pub const REBOOTSTRAP_REQUIRED: i16 = 129;

/// An ApiVersions v5 request with the identity it expects.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The v4 fields.
    pub request: ApiVersionsRequest,
    /// The cluster the client believes this broker is in, if it knows.
    pub cluster_id: Option<StrBytes>,
    /// The node id it believes this broker has (-1 when unknown).
    pub node_id: i32,
}

impl Checked {
    /// Whether the client expects another cluster or node than this one
    /// (Kafka's rule: only checked when a cluster id is given).
    #[must_use]
    pub fn mismatches(&self, cluster_id: &str, node_id: i32) -> bool {
        self.cluster_id
            .as_ref()
            .is_some_and(|expected| expected.as_str() != cluster_id || self.node_id != node_id)
    }
}

/// Decodes an ApiVersions v5 body.
///
/// # Errors
///
/// The reason the body does not parse.
pub fn decode(buf: &mut Bytes, _version: i16) -> Result<Request, String> {
    read(&mut Reader::new(buf))
        .map(|checked| Request::ApiVersionsChecked(Box::new(checked)))
        .map_err(reason)
}

fn read(r: &mut Reader<'_>) -> Result<Checked, WireError> {
    let mut request = ApiVersionsRequest::default();
    request.client_software_name = r.compact_string()?;
    request.client_software_version = r.compact_string()?;
    let cluster_id = r.compact_nullable_string()?;
    let node_id = r.i32()?;
    r.skip_tagged_fields()?;
    Ok(Checked {
        request,
        cluster_id,
        node_id,
    })
}
