//! The API table: every API this broker implements, its version range, how
//! it is scheduled on its connection, and how its body is decoded.
//!
//! This table is the single source of truth. `ApiVersions` advertises
//! exactly its rows ([`response`]); the request decoder refuses any (API,
//! version) outside them and decodes a body only through its row's decoder
//! ([`Api::decode`]); the connection asks the row whether a request must run
//! before the next one is read ([`must_run_in_order`]); and each row's
//! decoder builds the [`Request`] variant named like the API key (the
//! [`api!`] macro makes that one identifier), which the dispatcher matches
//! exhaustively — so an API cannot be advertised without being decoded and
//! handled, nor handled without being advertised.
//!
//! Ranges are as wide as `kafka-protocol` 0.18 decodes and the handlers
//! implement, so librdkafka 2.x, kafka-python and the Java client 3.x/4.x all
//! find a common version. Below them, some rows name the older versions
//! Kafka 3.9 served and Kafka 4 removed (KIP-896) with their own decoder
//! ([`Legacy`], [`crate::network::legacy`]); those are served and advertised
//! only with `krabka.legacy.protocol.enable` ([`Served::WithLegacy`]).
//! Above them, some rows name the versions of Kafka 4.1+ that
//! `kafka-protocol` 0.18 does not know, also decoded and written by hand
//! ([`Newer`], [`crate::network::newer`]) onto the same request types.

use {
    crate::{
        coordinator::{group::wire::GroupRequest, txn::wire::TxnRequest},
        network::{codec::Request, legacy, newer},
        security::admin::SecurityRequest,
    },
    bytes::Bytes,
    kafka_protocol::{
        messages::{
            ApiKey,
            api_versions_response::{ApiVersion, ApiVersionsResponse},
        },
        protocol::Decodable,
    },
};

/// How a request is scheduled relative to the later requests of its
/// connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Changes state: handled before the next request of the connection is
    /// read (keeps a client's pipelined changes in the order sent).
    InOrder,
    /// Read-only: may run concurrently with the connection's later requests
    /// (answers still go out in request order).
    Concurrent,
}

/// Which request versions the broker serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Served {
    /// What Kafka 4 serves (the default).
    #[default]
    Kafka4,
    /// Also the versions Kafka 3.9 served and Kafka 4 removed
    /// (`krabka.legacy.protocol.enable`).
    WithLegacy,
}

impl Served {
    /// The versions `krabka.legacy.protocol.enable` = `enabled` serves.
    #[must_use]
    pub fn from_setting(enabled: bool) -> Self {
        if enabled {
            Self::WithLegacy
        } else {
            Self::Kafka4
        }
    }
}

/// Decodes a body of one API at one version into the request the
/// dispatcher handles; the error is the decoder's message.
pub type Decoder = fn(&mut Bytes, i16) -> Result<Request, String>;

/// The versions of an API below what Kafka 4 serves that Kafka 3.9 served,
/// decoded by hand onto the same request type (see
/// [`crate::network::legacy`]).
#[derive(Debug, Clone, Copy)]
pub struct Legacy {
    /// The oldest legacy version (the newest is the row's `min` - 1).
    pub min: i16,
    /// Decodes a body at a version within `min..row.min`.
    pub decode: Decoder,
}

/// The newest versions of an API, which `kafka-protocol` 0.18 cannot read,
/// decoded by hand (see [`crate::network::newer`]).
#[derive(Debug, Clone, Copy)]
pub struct Newer {
    /// The oldest of them (the row's `max` is the newest).
    pub min: i16,
    /// Decodes a body at a version within `min..=row.max`.
    pub decode: Decoder,
}

/// One implemented API.
#[derive(Debug, Clone, Copy)]
pub struct Api {
    /// The API.
    pub key: ApiKey,
    /// The oldest version served.
    pub min: i16,
    /// The newest version served.
    pub max: i16,
    /// How it is scheduled on its connection.
    pub order: Order,
    /// Decodes a body of this API at a version within `min..=max` into the
    /// request the dispatcher handles; the error is the decoder's message.
    pub decode: Decoder,
    /// The older versions served with `krabka.legacy.protocol.enable`.
    pub legacy: Option<Legacy>,
    /// The newest versions, decoded by hand.
    pub newer: Option<Newer>,
}

impl Api {
    /// This row with legacy versions from `min`, decoded by `decode`.
    const fn with_legacy(mut self, min: i16, decode: Decoder) -> Self {
        self.legacy = Some(Legacy { min, decode });
        self
    }

    /// This row served up to `max`, the versions from `min` decoded by
    /// `decode`.
    const fn with_newer(mut self, min: i16, max: i16, decode: Decoder) -> Self {
        self.max = max;
        self.newer = Some(Newer { min, decode });
        self
    }

    /// Whether `version` is within this API's range (what Kafka 4 serves).
    #[must_use]
    pub fn serves(&self, version: i16) -> bool {
        (self.min..=self.max).contains(&version)
    }

    /// The oldest version served.
    #[must_use]
    pub fn min_served(&self, served: Served) -> i16 {
        match (served, self.legacy) {
            (Served::WithLegacy, Some(legacy)) => legacy.min,
            _ => self.min,
        }
    }

    /// The decoder of `version`, if it is served.
    #[must_use]
    pub fn decoder(&self, version: i16, served: Served) -> Option<Decoder> {
        if let Some(newer) = self.newer.filter(|n| (n.min..=self.max).contains(&version)) {
            return Some(newer.decode);
        }
        if self.serves(version) {
            return Some(self.decode);
        }
        match (served, self.legacy) {
            (Served::WithLegacy, Some(legacy)) if (legacy.min..self.min).contains(&version) => {
                Some(legacy.decode)
            }
            _ => None,
        }
    }

    /// Whether `version` is one of the legacy versions (served or not).
    #[must_use]
    pub fn is_legacy(&self, version: i16) -> bool {
        self.legacy
            .is_some_and(|legacy| (legacy.min..self.min).contains(&version))
    }

    /// Whether `version` is one of the newer versions decoded by hand.
    #[must_use]
    pub fn is_newer(&self, version: i16) -> bool {
        self.newer
            .is_some_and(|newer| (newer.min..=self.max).contains(&version))
    }
}

/// Decodes one `kafka-protocol` body, keeping only the error's message.
fn body<T: Decodable>(buf: &mut Bytes, version: i16) -> Result<T, String> {
    T::decode(buf, version).map_err(|e| e.to_string())
}

/// One row of [`APIS`]: the API key and the request variant share one name.
macro_rules! api {
    ($key:ident, $min:literal ..= $max:literal, $order:ident) => {
        Api {
            key: ApiKey::$key,
            min: $min,
            max: $max,
            order: Order::$order,
            legacy: None,
            newer: None,
            decode: |buf, version| Ok(Request::$key(body(buf, version)?)),
        }
    };
    (group $key:ident, $min:literal ..= $max:literal, $order:ident) => {
        Api {
            key: ApiKey::$key,
            min: $min,
            max: $max,
            order: Order::$order,
            legacy: None,
            newer: None,
            decode: |buf, version| Ok(Request::Group(GroupRequest::$key(body(buf, version)?))),
        }
    };
    (txn $key:ident, $min:literal ..= $max:literal, $order:ident) => {
        Api {
            key: ApiKey::$key,
            min: $min,
            max: $max,
            order: Order::$order,
            legacy: None,
            newer: None,
            decode: |buf, version| Ok(Request::Txn(TxnRequest::$key(body(buf, version)?))),
        }
    };
    (security $key:ident, $min:literal ..= $max:literal, $order:ident) => {
        Api {
            key: ApiKey::$key,
            min: $min,
            max: $max,
            order: Order::$order,
            legacy: None,
            newer: None,
            decode: |buf, version| {
                Ok(Request::Security(SecurityRequest::$key(body(
                    buf, version,
                )?)))
            },
        }
    };
}

/// Every implemented API.
pub const APIS: &[Api] = &[
    api!(Produce, 3..=13, InOrder).with_legacy(0, legacy::produce::decode),
    api!(Fetch, 4..=18, Concurrent).with_legacy(0, legacy::fetch::decode),
    api!(ListOffsets, 1..=10, Concurrent)
        .with_legacy(0, legacy::list_offsets::decode)
        .with_newer(11, 11, newer::list_offsets::decode),
    api!(Metadata, 0..=13, Concurrent),
    api!(ApiVersions, 0..=4, Concurrent).with_newer(5, 5, newer::api_versions::decode),
    api!(CreateTopics, 2..=7, InOrder).with_legacy(0, legacy::create_topics::decode),
    api!(DeleteTopics, 1..=6, InOrder).with_legacy(0, legacy::delete_topics::decode),
    api!(DeleteRecords, 0..=2, InOrder),
    api!(InitProducerId, 0..=5, InOrder),
    api!(OffsetForLeaderEpoch, 2..=4, Concurrent)
        .with_legacy(0, legacy::offset_for_leader_epoch::decode),
    api!(DescribeConfigs, 1..=4, Concurrent).with_legacy(0, legacy::describe_configs::decode),
    api!(AlterConfigs, 0..=2, InOrder),
    api!(DescribeLogDirs, 1..=4, Concurrent)
        .with_legacy(0, legacy::describe_log_dirs::decode)
        .with_newer(5, 5, newer::describe_log_dirs::decode),
    api!(CreatePartitions, 0..=3, InOrder),
    api!(IncrementalAlterConfigs, 0..=1, InOrder),
    api!(DescribeCluster, 0..=2, Concurrent),
    api!(ElectLeaders, 0..=2, InOrder),
    api!(DescribeTopicPartitions, 0..=0, Concurrent),
    // Broker to broker: another broker's transaction coordinator (v0 was
    // removed in Kafka 4.0; v2 adds the transaction version, KIP-1228).
    api!(WriteTxnMarkers, 1..=1, InOrder)
        .with_legacy(0, legacy::write_txn_markers::decode)
        .with_newer(2, 2, newer::write_txn_markers::decode),
    // The group coordinator (crate::coordinator::group::wire).
    api!(group FindCoordinator, 0..=6, InOrder),
    api!(group JoinGroup, 0..=9, InOrder),
    api!(group SyncGroup, 0..=5, InOrder),
    api!(group Heartbeat, 0..=4, InOrder),
    api!(group LeaveGroup, 0..=5, InOrder),
    api!(group OffsetCommit, 2..=9, InOrder)
        .with_legacy(0, legacy::offset_commit::decode)
        .with_newer(10, 10, newer::offset_commit::decode),
    api!(group OffsetFetch, 1..=9, InOrder)
        .with_legacy(0, legacy::offset_fetch::decode)
        .with_newer(10, 10, newer::offset_fetch::decode),
    api!(group OffsetDelete, 0..=0, InOrder),
    api!(group ListGroups, 0..=5, InOrder),
    api!(group DescribeGroups, 0..=6, InOrder),
    api!(group DeleteGroups, 0..=2, InOrder).with_newer(3, 3, newer::delete_groups::decode),
    api!(group ConsumerGroupHeartbeat, 0..=1, InOrder),
    api!(group ConsumerGroupDescribe, 0..=1, InOrder),
    // The transaction coordinator (crate::coordinator::txn::wire).
    // AddPartitionsToTxn v0–3 is the client form, v4–5 the batched form with
    // verify-only; EndTxn v5 and TxnOffsetCommit v5 are KIP-890's
    // transactions v2; TxnOffsetCommit v6 names topics by id.
    api!(txn AddPartitionsToTxn, 0..=5, InOrder),
    api!(txn AddOffsetsToTxn, 0..=4, InOrder),
    api!(txn EndTxn, 0..=5, InOrder),
    api!(txn TxnOffsetCommit, 0..=5, InOrder).with_newer(6, 6, newer::txn_offset_commit::decode),
    api!(txn DescribeTransactions, 0..=0, InOrder),
    api!(txn ListTransactions, 0..=2, InOrder),
    api!(txn DescribeProducers, 0..=0, InOrder),
    // Security (crate::security::admin). SaslHandshake and SaslAuthenticate
    // are answered by the connection's authenticator, in order.
    api!(security SaslHandshake, 0..=1, InOrder),
    api!(security SaslAuthenticate, 0..=2, InOrder),
    api!(security DescribeAcls, 1..=3, InOrder).with_legacy(0, legacy::acls::decode_describe),
    api!(security CreateAcls, 1..=3, InOrder).with_legacy(0, legacy::acls::decode_create),
    api!(security DeleteAcls, 1..=3, InOrder).with_legacy(0, legacy::acls::decode_delete),
    api!(security DescribeUserScramCredentials, 0..=0, InOrder),
    api!(security AlterUserScramCredentials, 0..=0, InOrder),
];

/// The lowest Produce version advertised in `ApiVersions`, below the lowest
/// one served (3): librdkafka before 2.11.1 enables gzip, snappy and lz4
/// only if the advertised Produce range contains version 0, so Apache Kafka
/// 4.0 advertises 0 while still closing the connection on a v0-v2 request
/// (KAFKA-18659), and so does Krabka.
pub const PRODUCE_ADVERTISED_MIN: i16 = 0;

/// The row of `api`, if it is implemented.
#[must_use]
pub fn lookup(api: ApiKey) -> Option<&'static Api> {
    APIS.iter().find(|row| row.key == api)
}

/// The supported version range of `api`, if it is implemented.
#[must_use]
pub fn supported_range(api: ApiKey) -> Option<(i16, i16)> {
    lookup(api).map(|row| (row.min, row.max))
}

/// Whether `version` of `api` is implemented.
#[must_use]
pub fn is_supported(api: ApiKey, version: i16) -> bool {
    lookup(api).is_some_and(|row| row.serves(version))
}

/// Whether a request of `api` must be handled before the next request of
/// its connection is read (anything not in the table counts as in order).
#[must_use]
pub fn must_run_in_order(api: ApiKey) -> bool {
    lookup(api).is_none_or(|row| row.order == Order::InOrder)
}

/// The features (KIP-584) this broker announces in ApiVersions v3+: the
/// range of each it implements and the level it has finalized. Only the
/// features a client acts on are announced: `transaction.version`
/// (transactions v2, [`crate::coordinator::txn::version`]) and
/// `group.version` (level 1: the consumer group protocol of KIP-848).
/// Kafka's others describe its KRaft metadata log or what Krabka lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// The finalized `transaction.version` level
    /// (`krabka.transaction.version`).
    pub transaction_version: i16,
}

/// The epoch of the finalized features. Kafka counts metadata changes
/// here; a client only compares it across brokers, and the levels change
/// only with a restart.
pub const FINALIZED_FEATURES_EPOCH: i64 = 1;

/// The consumer group protocol's feature (level 1: KIP-848 groups).
pub const GROUP_VERSION_FEATURE: &str = "group.version";

impl Features {
    fn describe(self, response: &mut ApiVersionsResponse) {
        use {
            crate::coordinator::txn::version,
            kafka_protocol::messages::api_versions_response::{
                FinalizedFeatureKey, SupportedFeatureKey,
            },
        };
        let features = [
            (GROUP_VERSION_FEATURE, 1, 1),
            (
                version::FEATURE,
                version::MAX_LEVEL,
                self.transaction_version,
            ),
        ];
        for (name, max, level) in features {
            let mut supported = SupportedFeatureKey::default();
            supported.name = name.into();
            supported.min_version = 0;
            supported.max_version = max;
            response.supported_features.push(supported);
            // Kafka lists a feature once it is finalized above level 0.
            if level > 0 {
                let mut finalized = FinalizedFeatureKey::default();
                finalized.name = name.into();
                finalized.min_version_level = level;
                finalized.max_version_level = level;
                response.finalized_features.push(finalized);
            }
        }
        response.finalized_features_epoch = FINALIZED_FEATURES_EPOCH;
    }
}

/// The `ApiVersions` answer with `error_code` (0, or 35 UNSUPPORTED_VERSION)
/// for a broker serving `served`.
#[must_use]
pub fn response(error_code: i16, served: Served, features: Features) -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::default();
    response.error_code = error_code;
    features.describe(&mut response);
    response.api_keys = APIS
        .iter()
        .map(|row| {
            let mut v = ApiVersion::default();
            v.api_key = row.key as i16;
            v.min_version = if row.key == ApiKey::Produce {
                PRODUCE_ADVERTISED_MIN.min(row.min_served(served))
            } else {
                row.min_served(served)
            };
            v.max_version = row.max;
            v
        })
        .collect();
    response
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check, std::collections::BTreeSet};

    const FEATURES: Features = Features {
        transaction_version: 2,
    };

    #[test]
    fn transaction_version_is_announced_as_finalized() {
        let r = response(0, Served::Kafka4, FEATURES);
        let supported: Vec<_> = r
            .supported_features
            .iter()
            .map(|f| (f.name.as_str(), f.min_version, f.max_version))
            .collect();
        check!(supported == vec![("group.version", 0, 1), ("transaction.version", 0, 2)]);
        let finalized: Vec<_> = r
            .finalized_features
            .iter()
            .map(|f| (f.name.as_str(), f.min_version_level, f.max_version_level))
            .collect();
        check!(finalized == vec![("group.version", 1, 1), ("transaction.version", 2, 2)]);
        check!(r.finalized_features_epoch >= 0);
        // Level 0 is not listed as finalized, as on Kafka.
        let off = response(
            0,
            Served::Kafka4,
            Features {
                transaction_version: 0,
            },
        );
        check!(off.finalized_features.len() == 1);
        check!(off.supported_features.len() == 2);
    }

    #[test]
    fn ranges_are_within_what_kafka_protocol_decodes() {
        for row in APIS {
            let valid = row.key.valid_versions();
            check!(row.min >= valid.min, "{:?}", row.key);
            // Above what kafka-protocol decodes, only hand-decoded versions.
            let decoded_max = row.newer.map_or(row.max, |newer| newer.min - 1);
            check!(decoded_max <= valid.max, "{:?}", row.key);
            check!(row.min <= row.max, "{:?}", row.key);
        }
    }

    #[test]
    fn each_api_appears_once() {
        let keys: BTreeSet<i16> = APIS.iter().map(|row| row.key as i16).collect();
        check!(keys.len() == APIS.len());
    }

    #[test]
    fn advertises_exactly_the_table() {
        let r = response(0, Served::Kafka4, FEATURES);
        check!(r.api_keys.len() == APIS.len());
        for (advertised, row) in r.api_keys.iter().zip(APIS) {
            check!(advertised.api_key == row.key as i16);
            // Produce alone is advertised below what it serves (see
            // PRODUCE_ADVERTISED_MIN).
            let min = if row.key == ApiKey::Produce {
                PRODUCE_ADVERTISED_MIN
            } else {
                row.min
            };
            check!((advertised.min_version, advertised.max_version) == (min, row.max));
        }
        check!(is_supported(ApiKey::Fetch, 12));
        check!(!is_supported(ApiKey::Fetch, 3));
        check!(!is_supported(ApiKey::DescribeAcls, 0));
        check!(is_supported(ApiKey::DescribeAcls, 1));
    }

    #[test]
    fn produce_is_advertised_from_v0_but_served_from_v3() {
        let r = response(0, Served::Kafka4, FEATURES);
        let produce = r
            .api_keys
            .iter()
            .find(|k| k.api_key == ApiKey::Produce as i16)
            .unwrap();
        check!(produce.min_version == 0);
        check!(!is_supported(ApiKey::Produce, 0));
        check!(!is_supported(ApiKey::Produce, 2));
        check!(is_supported(ApiKey::Produce, 3));
    }

    /// The ranges served before the table was derived in one place; a change
    /// here is a change of what clients see, so it is made on purpose.
    #[test]
    fn served_ranges_are_unchanged() {
        let served: Vec<(ApiKey, i16, i16)> =
            APIS.iter().map(|row| (row.key, row.min, row.max)).collect();
        check!(
            served
                == vec![
                    (ApiKey::Produce, 3, 13),
                    (ApiKey::Fetch, 4, 18),
                    (ApiKey::ListOffsets, 1, 11),
                    (ApiKey::Metadata, 0, 13),
                    (ApiKey::ApiVersions, 0, 5),
                    (ApiKey::CreateTopics, 2, 7),
                    (ApiKey::DeleteTopics, 1, 6),
                    (ApiKey::DeleteRecords, 0, 2),
                    (ApiKey::InitProducerId, 0, 5),
                    (ApiKey::OffsetForLeaderEpoch, 2, 4),
                    (ApiKey::DescribeConfigs, 1, 4),
                    (ApiKey::AlterConfigs, 0, 2),
                    (ApiKey::DescribeLogDirs, 1, 5),
                    (ApiKey::CreatePartitions, 0, 3),
                    (ApiKey::IncrementalAlterConfigs, 0, 1),
                    (ApiKey::DescribeCluster, 0, 2),
                    (ApiKey::ElectLeaders, 0, 2),
                    (ApiKey::DescribeTopicPartitions, 0, 0),
                    (ApiKey::WriteTxnMarkers, 1, 2),
                    (ApiKey::FindCoordinator, 0, 6),
                    (ApiKey::JoinGroup, 0, 9),
                    (ApiKey::SyncGroup, 0, 5),
                    (ApiKey::Heartbeat, 0, 4),
                    (ApiKey::LeaveGroup, 0, 5),
                    (ApiKey::OffsetCommit, 2, 10),
                    (ApiKey::OffsetFetch, 1, 10),
                    (ApiKey::OffsetDelete, 0, 0),
                    (ApiKey::ListGroups, 0, 5),
                    (ApiKey::DescribeGroups, 0, 6),
                    (ApiKey::DeleteGroups, 0, 3),
                    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
                    (ApiKey::ConsumerGroupDescribe, 0, 1),
                    (ApiKey::AddPartitionsToTxn, 0, 5),
                    (ApiKey::AddOffsetsToTxn, 0, 4),
                    (ApiKey::EndTxn, 0, 5),
                    (ApiKey::TxnOffsetCommit, 0, 6),
                    (ApiKey::DescribeTransactions, 0, 0),
                    (ApiKey::ListTransactions, 0, 2),
                    (ApiKey::DescribeProducers, 0, 0),
                    (ApiKey::SaslHandshake, 0, 1),
                    (ApiKey::SaslAuthenticate, 0, 2),
                    (ApiKey::DescribeAcls, 1, 3),
                    (ApiKey::CreateAcls, 1, 3),
                    (ApiKey::DeleteAcls, 1, 3),
                    (ApiKey::DescribeUserScramCredentials, 0, 0),
                    (ApiKey::AlterUserScramCredentials, 0, 0),
                ]
        );
    }

    /// The versions Kafka 3.9 served and Kafka 4 removed (KIP-896) that
    /// `krabka.legacy.protocol.enable` serves: the oldest of each API.
    #[test]
    fn legacy_ranges_are_kafka_3_9s() {
        let legacy: Vec<(ApiKey, i16)> = APIS
            .iter()
            .filter_map(|row| row.legacy.map(|l| (row.key, l.min)))
            .collect();
        check!(
            legacy
                == vec![
                    (ApiKey::Produce, 0),
                    (ApiKey::Fetch, 0),
                    (ApiKey::ListOffsets, 0),
                    (ApiKey::CreateTopics, 0),
                    (ApiKey::DeleteTopics, 0),
                    (ApiKey::OffsetForLeaderEpoch, 0),
                    (ApiKey::DescribeConfigs, 0),
                    (ApiKey::DescribeLogDirs, 0),
                    (ApiKey::WriteTxnMarkers, 0),
                    (ApiKey::OffsetCommit, 0),
                    (ApiKey::OffsetFetch, 0),
                    (ApiKey::DescribeAcls, 0),
                    (ApiKey::CreateAcls, 0),
                    (ApiKey::DeleteAcls, 0),
                ]
        );
        for row in APIS {
            if let Some(l) = row.legacy {
                check!(l.min < row.min, "{:?}", row.key);
                // Below what kafka-protocol decodes: that is why they are here.
                check!(row.min == row.key.valid_versions().min, "{:?}", row.key);
            }
        }
    }

    #[test]
    fn legacy_versions_are_served_and_advertised_only_when_enabled() {
        let fetch = lookup(ApiKey::Fetch).unwrap();
        check!(fetch.decoder(0, Served::Kafka4).is_none());
        check!(fetch.decoder(3, Served::WithLegacy).is_some());
        check!(fetch.decoder(4, Served::Kafka4).is_some());
        check!(fetch.decoder(-1, Served::WithLegacy).is_none());
        check!(fetch.is_legacy(3));
        check!(!fetch.is_legacy(4));
        let metadata = lookup(ApiKey::Metadata).unwrap();
        check!(metadata.min_served(Served::WithLegacy) == 0);
        let advertised = |served| -> Vec<(i16, i16, i16)> {
            response(0, served, FEATURES)
                .api_keys
                .iter()
                .map(|k| (k.api_key, k.min_version, k.max_version))
                .collect()
        };
        let off = advertised(Served::Kafka4);
        let on = advertised(Served::WithLegacy);
        for (row, (off, on)) in APIS.iter().zip(off.iter().zip(&on)) {
            let min = if row.key == ApiKey::Produce {
                PRODUCE_ADVERTISED_MIN
            } else {
                row.min
            };
            check!(*off == (row.key as i16, min, row.max));
            check!(*on == (row.key as i16, row.min_served(Served::WithLegacy), row.max));
        }
        let min_of = |list: &[(i16, i16, i16)], key: ApiKey| {
            list.iter().find(|k| k.0 == key as i16).unwrap().1
        };
        check!(min_of(&off, ApiKey::Fetch) == 4);
        check!(min_of(&on, ApiKey::Fetch) == 0);
        check!(min_of(&off, ApiKey::OffsetCommit) == 2);
        check!(min_of(&on, ApiKey::OffsetCommit) == 0);
    }

    #[test]
    fn read_only_apis_run_concurrently() {
        let concurrent: BTreeSet<i16> = APIS
            .iter()
            .filter(|row| !must_run_in_order(row.key))
            .map(|row| row.key as i16)
            .collect();
        let expected: BTreeSet<i16> = [
            ApiKey::Fetch,
            ApiKey::Metadata,
            ApiKey::ApiVersions,
            ApiKey::ListOffsets,
            ApiKey::DescribeConfigs,
            ApiKey::DescribeCluster,
            ApiKey::DescribeLogDirs,
            ApiKey::OffsetForLeaderEpoch,
            ApiKey::DescribeTopicPartitions,
        ]
        .into_iter()
        .map(|k| k as i16)
        .collect();
        check!(concurrent == expected);
        check!(must_run_in_order(ApiKey::DescribeAcls));
    }
}
