//! The APIs this broker implements, with the version range of each.
//!
//! This table is the single source of truth: the request decoder refuses
//! anything outside it and `ApiVersions` advertises exactly it. Ranges are as
//! wide as `kafka-protocol` 0.18 decodes and the handlers implement, so
//! librdkafka 2.x, kafka-python and the Java client 3.x/4.x all find a
//! common version.

use kafka_protocol::messages::{
    ApiKey,
    api_versions_response::{ApiVersion, ApiVersionsResponse},
};

/// `(api, min version, max version)` for every implemented API.
pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 13),
    (ApiKey::Fetch, 4, 17),
    (ApiKey::ListOffsets, 1, 10),
    (ApiKey::Metadata, 0, 13),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::DescribeLogDirs, 1, 4),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DescribeCluster, 0, 1),
    // The group coordinator (crate::coordinator::group::SUPPORTED_APIS).
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DescribeGroups, 0, 6),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
    // The transaction coordinator (crate::coordinator::txn::SUPPORTED_APIS).
    (ApiKey::AddPartitionsToTxn, 0, 5),
    (ApiKey::AddOffsetsToTxn, 0, 4),
    (ApiKey::EndTxn, 0, 4),
    (ApiKey::TxnOffsetCommit, 0, 4),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::ListTransactions, 0, 2),
    (ApiKey::DescribeProducers, 0, 0),
    // Security (crate::security::admin::SUPPORTED_APIS).
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
];

/// The supported version range of `api`, if it is implemented.
#[must_use]
pub fn supported_range(api: ApiKey) -> Option<(i16, i16)> {
    SUPPORTED
        .iter()
        .find(|(key, _, _)| *key == api)
        .map(|&(_, min, max)| (min, max))
}

/// Whether `version` of `api` is implemented.
#[must_use]
pub fn is_supported(api: ApiKey, version: i16) -> bool {
    supported_range(api).is_some_and(|(min, max)| (min..=max).contains(&version))
}

/// The `ApiVersions` answer with `error_code` (0, or 35 UNSUPPORTED_VERSION).
#[must_use]
pub fn response(error_code: i16) -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::default();
    response.error_code = error_code;
    response.api_keys = SUPPORTED
        .iter()
        .map(|&(key, min, max)| {
            let mut v = ApiVersion::default();
            v.api_key = key as i16;
            v.min_version = min;
            v.max_version = max;
            v
        })
        .collect();
    response
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn ranges_are_within_what_kafka_protocol_decodes() {
        for &(key, min, max) in SUPPORTED {
            let valid = key.valid_versions();
            check!(min >= valid.min, "{key:?}");
            check!(max <= valid.max, "{key:?}");
            check!(min <= max, "{key:?}");
        }
    }

    #[test]
    fn advertises_exactly_the_table() {
        let r = response(0);
        check!(r.api_keys.len() == SUPPORTED.len());
        check!(is_supported(ApiKey::Fetch, 12));
        check!(!is_supported(ApiKey::Fetch, 3));
        check!(!is_supported(ApiKey::DescribeAcls, 0));
        check!(is_supported(ApiKey::DescribeAcls, 1));
        for &(key, min, max) in crate::security::admin::SUPPORTED_APIS {
            check!(supported_range(key) == Some((min, max)), "{key:?}");
        }
    }
}
