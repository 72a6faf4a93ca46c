//! Which version of each API this client speaks, and the negotiation with a
//! broker's `ApiVersions` answer.
//!
//! The client's range for an API is the `kafka-protocol` crate's range,
//! capped where a newer version changes semantics this client does not
//! implement: Produce v12+ and EndTxn v5+ are KIP-890's "transactions v2"
//! (implicit partition registration, an epoch bump per transaction) and
//! AddPartitionsToTxn v4+ is broker-to-broker only, so a client stays below
//! them just as the Java client does when transactions v2 is off.

use {
    crate::ClientError,
    kafka_protocol::{
        messages::{
            AddPartitionsToTxnRequest, AlterUserScramCredentialsRequest, ApiKey,
            ApiVersionsResponse, ConsumerGroupDescribeRequest, CreateAclsRequest,
            CreatePartitionsRequest, CreateTopicsRequest, DeleteAclsRequest, DeleteGroupsRequest,
            DeleteTopicsRequest, DescribeAclsRequest, DescribeClusterRequest,
            DescribeConfigsRequest, DescribeGroupsRequest, DescribeLogDirsRequest,
            DescribeProducersRequest, DescribeTransactionsRequest,
            DescribeUserScramCredentialsRequest, EndTxnRequest, FetchRequest,
            FindCoordinatorRequest, HeartbeatRequest, IncrementalAlterConfigsRequest,
            InitProducerIdRequest, JoinGroupRequest, LeaveGroupRequest, ListGroupsRequest,
            ListOffsetsRequest, ListTransactionsRequest, MetadataRequest, OffsetCommitRequest,
            OffsetDeleteRequest, OffsetFetchRequest, ProduceRequest, SaslAuthenticateRequest,
            SaslHandshakeRequest, SyncGroupRequest,
        },
        protocol::{Message, VersionRange},
    },
    std::collections::HashMap,
};

/// The versions of one API this client speaks.
#[must_use]
pub fn client_range(api: ApiKey) -> Option<VersionRange> {
    let capped = |range: VersionRange, max: i16| VersionRange {
        min: range.min,
        max: range.max.min(max),
    };
    Some(match api {
        ApiKey::ApiVersions => VersionRange { min: 0, max: 3 },
        ApiKey::Metadata => capped(MetadataRequest::VERSIONS, 12),
        ApiKey::Produce => capped(ProduceRequest::VERSIONS, 11),
        ApiKey::Fetch => capped(FetchRequest::VERSIONS, 16),
        ApiKey::ListOffsets => capped(ListOffsetsRequest::VERSIONS, 9),
        ApiKey::CreateTopics => CreateTopicsRequest::VERSIONS,
        ApiKey::DeleteTopics => DeleteTopicsRequest::VERSIONS,
        ApiKey::InitProducerId => capped(InitProducerIdRequest::VERSIONS, 5),
        ApiKey::FindCoordinator => FindCoordinatorRequest::VERSIONS,
        ApiKey::AddPartitionsToTxn => capped(AddPartitionsToTxnRequest::VERSIONS, 3),
        ApiKey::EndTxn => capped(EndTxnRequest::VERSIONS, 4),
        ApiKey::DescribeTransactions => DescribeTransactionsRequest::VERSIONS,
        // Admin and group calls. OffsetCommit / OffsetFetch v10 name topics
        // by id only; this client names them.
        ApiKey::DescribeConfigs => DescribeConfigsRequest::VERSIONS,
        ApiKey::IncrementalAlterConfigs => IncrementalAlterConfigsRequest::VERSIONS,
        ApiKey::CreatePartitions => CreatePartitionsRequest::VERSIONS,
        ApiKey::DescribeCluster => DescribeClusterRequest::VERSIONS,
        ApiKey::DescribeLogDirs => DescribeLogDirsRequest::VERSIONS,
        ApiKey::ListGroups => ListGroupsRequest::VERSIONS,
        ApiKey::DescribeGroups => DescribeGroupsRequest::VERSIONS,
        ApiKey::ConsumerGroupDescribe => ConsumerGroupDescribeRequest::VERSIONS,
        ApiKey::DeleteGroups => DeleteGroupsRequest::VERSIONS,
        ApiKey::OffsetFetch => capped(OffsetFetchRequest::VERSIONS, 9),
        ApiKey::OffsetCommit => capped(OffsetCommitRequest::VERSIONS, 9),
        ApiKey::OffsetDelete => OffsetDeleteRequest::VERSIONS,
        ApiKey::ListTransactions => ListTransactionsRequest::VERSIONS,
        ApiKey::DescribeProducers => DescribeProducersRequest::VERSIONS,
        ApiKey::JoinGroup => JoinGroupRequest::VERSIONS,
        ApiKey::SyncGroup => SyncGroupRequest::VERSIONS,
        ApiKey::Heartbeat => HeartbeatRequest::VERSIONS,
        ApiKey::LeaveGroup => LeaveGroupRequest::VERSIONS,
        // Authentication (KIP-152 framing) and security administration.
        ApiKey::SaslHandshake => SaslHandshakeRequest::VERSIONS,
        ApiKey::SaslAuthenticate => SaslAuthenticateRequest::VERSIONS,
        ApiKey::DescribeAcls => DescribeAclsRequest::VERSIONS,
        ApiKey::CreateAcls => CreateAclsRequest::VERSIONS,
        ApiKey::DeleteAcls => DeleteAclsRequest::VERSIONS,
        ApiKey::DescribeUserScramCredentials => DescribeUserScramCredentialsRequest::VERSIONS,
        ApiKey::AlterUserScramCredentials => AlterUserScramCredentialsRequest::VERSIONS,
        _ => return None,
    })
}

/// The version chosen for each API on one connection: the highest version
/// both the client and the broker speak.
#[derive(Debug, Clone, Default)]
pub struct ApiVersionTable {
    chosen: HashMap<i16, i16>,
    broker: HashMap<i16, VersionRange>,
}

impl ApiVersionTable {
    /// Builds the table from a broker's `ApiVersions` answer.
    #[must_use]
    pub fn negotiate(response: &ApiVersionsResponse) -> Self {
        let mut table = Self::default();
        for api in &response.api_keys {
            let broker = VersionRange {
                min: api.min_version,
                max: api.max_version,
            };
            table.broker.insert(api.api_key, broker);
            let Ok(key) = ApiKey::try_from(api.api_key) else {
                continue;
            };
            let Some(client) = client_range(key) else {
                continue;
            };
            let both = client.intersect(&broker);
            if !both.is_empty() {
                table.chosen.insert(api.api_key, both.max);
            }
        }
        table
    }

    /// The version to use for `api`.
    ///
    /// # Errors
    ///
    /// Returns [`ClientError::UnsupportedApi`] when the broker and the client
    /// share no version of it.
    pub fn version(&self, api: ApiKey) -> Result<i16, ClientError> {
        self.chosen.get(&(api as i16)).copied().ok_or_else(|| {
            let client = client_range(api).unwrap_or(VersionRange { min: 0, max: -1 });
            ClientError::UnsupportedApi {
                api: format!("{api:?}"),
                client_min: client.min,
                client_max: client.max,
            }
        })
    }

    /// The range the broker advertised for `api`, if any.
    #[must_use]
    pub fn broker_range(&self, api: ApiKey) -> Option<VersionRange> {
        self.broker.get(&(api as i16)).copied()
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check, kafka_protocol::messages::api_versions_response::ApiVersion};

    fn api(key: ApiKey, min: i16, max: i16) -> ApiVersion {
        let mut v = ApiVersion::default();
        v.api_key = key as i16;
        v.min_version = min;
        v.max_version = max;
        v
    }

    #[test]
    fn highest_common_version_wins() {
        let mut response = ApiVersionsResponse::default();
        response.api_keys = vec![
            api(ApiKey::Produce, 3, 13),
            api(ApiKey::Fetch, 4, 12),
            api(ApiKey::Metadata, 0, 4),
            api(ApiKey::EndTxn, 0, 5),
            // A broker-only API the client never uses.
            api(ApiKey::AlterPartition, 0, 7),
            // Disjoint: the broker only speaks versions the client does not.
            api(ApiKey::AddPartitionsToTxn, 4, 5),
        ];
        let table = ApiVersionTable::negotiate(&response);
        check!(table.version(ApiKey::Produce).unwrap() == 11);
        check!(table.version(ApiKey::Fetch).unwrap() == 12);
        check!(table.version(ApiKey::Metadata).unwrap() == 4);
        check!(table.version(ApiKey::EndTxn).unwrap() == 4);
        check!(table.version(ApiKey::AddPartitionsToTxn).is_err());
        check!(table.version(ApiKey::CreateTopics).is_err());
        check!(table.broker_range(ApiKey::AlterPartition).is_some());
    }
}
