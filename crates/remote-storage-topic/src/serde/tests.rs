//! Golden vectors from Kafka 4.0's JVM `RemoteLogMetadataSerde`
//! (`testdata/rlmm_golden.json`, described in the shared fixtures README),
//! checked in both directions, plus property tests: any event round-trips,
//! and no input — garbage or a truncated record — panics.

use {
    super::*,
    assert2::{assert, check},
    proptest::prelude::*,
    std::collections::HashMap,
};

const GOLDEN: &str = include_str!("../../testdata/rlmm_golden.json");

fn golden(case: &str) -> Vec<u8> {
    let cases: HashMap<String, String> = serde_json::from_str(GOLDEN).unwrap();
    hex::decode(&cases[case]).unwrap()
}

fn orders_7() -> TopicIdPartition {
    TopicIdPartition::new(Uuid::from_u128(0xCA), "orders", 7)
}

fn segment_id() -> RemoteLogSegmentId {
    RemoteLogSegmentId::new(orders_7(), Uuid::from_u128(0xFE))
}

fn add_segment(custom: Option<&'static [u8]>, txn_empty: bool) -> RemoteLogMetadata {
    let epochs = BTreeMap::from([(LeaderEpoch(0), 0), (LeaderEpoch(1), 50)]);
    let details =
        RemoteLogSegmentDetails::new(4096, RemoteLogSegmentState::CopySegmentStarted, epochs)
            .with_custom_metadata(
                custom.map(|bytes| CustomMetadata::new(Bytes::from_static(bytes))),
            )
            .with_txn_idx_empty(txn_empty);
    RemoteLogMetadata::Segment(
        RemoteLogSegmentMetadata::new(segment_id(), 0, 99, 100, 42, 123, details).unwrap(),
    )
}

fn golden_events() -> Vec<(&'static str, RemoteLogMetadata)> {
    vec![
        ("add_no_custom", add_segment(None, false)),
        ("add_with_custom", add_segment(Some(&[1, 2, 3, 4]), false)),
        ("add_txn_empty", add_segment(None, true)),
        (
            "update_finish",
            RemoteLogMetadata::SegmentUpdate(RemoteLogSegmentMetadataUpdate::new(
                segment_id(),
                456,
                None,
                RemoteLogSegmentState::CopySegmentFinished,
                42,
            )),
        ),
        (
            "partition_delete_marked",
            RemoteLogMetadata::PartitionDelete(RemotePartitionDeleteMetadata::new(
                orders_7(),
                RemotePartitionDeleteState::DeletePartitionMarked,
                789,
                42,
            )),
        ),
    ]
}

#[test]
fn encodes_exactly_kafkas_bytes() {
    for (case, event) in golden_events() {
        check!(
            hex::encode(RemoteLogMetadataSerde::serialize(&event)) == hex::encode(golden(case)),
            "{case}"
        );
    }
}

#[test]
fn decodes_kafkas_bytes_to_the_same_event() {
    for (case, event) in golden_events() {
        check!(
            RemoteLogMetadataSerde::deserialize(&golden(case)).unwrap() == event,
            "{case}"
        );
    }
}

#[test]
fn the_golden_framing_is_frame_version_api_key_version() {
    // Hand-decoded: frame version 1, then each record's api key, version 0.
    check!(golden("add_no_custom")[..3] == [1, 0, 0]);
    check!(golden("update_finish")[..3] == [1, 1, 0]);
    check!(golden("partition_delete_marked")[..3] == [1, 2, 0]);
}

#[test]
fn snapshot_records_round_trip_and_carry_the_shared_layout() {
    let RemoteLogMetadata::Segment(metadata) = add_segment(Some(&[9]), true) else {
        unreachable!()
    };
    let snapshot = RemoteLogSegmentMetadataSnapshot::from_metadata(&metadata);
    let bytes =
        RemoteLogMetadataSerde::serialize(&RemoteLogMetadata::SegmentSnapshot(snapshot.clone()));
    check!(bytes[..3] == [1, 3, 0]);
    // After the frame: the segment uuid, then the same fields (from the
    // start offset on) as the segment record after its segment id.
    check!(bytes[3..19] == *Uuid::from_u128(0xFE).as_bytes());
    let full = RemoteLogMetadataSerde::serialize(&RemoteLogMetadata::Segment(metadata.clone()));
    let segment_id_len = 1 + 6 + 16 + 4 + 1 + 16 + 1;
    check!(bytes[19..] == full[3 + segment_id_len..]);

    let decoded = RemoteLogMetadataSerde::deserialize(&bytes).unwrap();
    check!(decoded == RemoteLogMetadata::SegmentSnapshot(snapshot.clone()));
    check!(decoded.topic_id_partition().is_none());
    check!(snapshot.to_metadata(orders_7()).unwrap() == metadata);
}

#[test]
fn version_one_records_are_read_and_their_new_tags_skipped() {
    // update_finish as version 1 with BrokerLeaderEpoch (tag 0) = 3 and
    // EndOffset (tag 1) = 99 in its tagged fields.
    let mut bytes = golden("update_finish");
    bytes[2] = 1;
    bytes.pop();
    bytes.extend([2, 0, 4, 0, 0, 0, 3, 1, 8, 0, 0, 0, 0, 0, 0, 0, 99]);
    let (_, expected) = golden_events().remove(3);
    check!(RemoteLogMetadataSerde::deserialize(&bytes).unwrap() == expected);
}

#[test]
fn malformed_framing_is_refused() {
    let good = golden("update_finish");
    let mut frame_zero = good.clone();
    frame_zero[0] = 0;
    assert!(let Err(MetadataLogError::Decode(_)) = RemoteLogMetadataSerde::deserialize(&frame_zero));
    let mut unknown_key = good.clone();
    unknown_key[1] = 9;
    assert!(let Err(MetadataLogError::Decode(_)) = RemoteLogMetadataSerde::deserialize(&unknown_key));
    let mut future_version = good.clone();
    future_version[2] = 2;
    assert!(let Err(MetadataLogError::Decode(_)) = RemoteLogMetadataSerde::deserialize(&future_version));
    let mut trailing = good.clone();
    trailing.push(0);
    assert!(let Err(MetadataLogError::Decode(_)) = RemoteLogMetadataSerde::deserialize(&trailing));
    assert!(let Err(MetadataLogError::Decode(_)) = RemoteLogMetadataSerde::deserialize(&[]));
}

#[test]
fn values_the_data_model_refuses_are_invalid_not_decoded() {
    // State id 7 in update_finish (second to last byte).
    let mut bad_state = golden("update_finish");
    let at = bad_state.len() - 2;
    bad_state[at] = 7;
    assert!(let Err(MetadataLogError::Invalid(_)) = RemoteLogMetadataSerde::deserialize(&bad_state));

    // An empty leader-epoch list: Kafka refuses such a segment.
    let RemoteLogMetadata::Segment(metadata) = add_segment(None, false) else {
        unreachable!()
    };
    let mut bytes =
        RemoteLogMetadataSerde::serialize(&RemoteLogMetadata::Segment(metadata)).to_vec();
    let epochs_at = 3 + (1 + 6 + 16 + 4 + 1 + 16 + 1) + 8 + 8 + 4 + 8 + 8;
    check!(bytes[epochs_at] == 3);
    bytes.splice(epochs_at..epochs_at + 1 + 2 * MIN_EPOCH_ENTRY_SIZE, [1]);
    assert!(let Err(MetadataLogError::Invalid(_)) = RemoteLogMetadataSerde::deserialize(&bytes));
}

#[test]
fn every_truncation_of_every_golden_record_is_an_error() {
    for (case, _) in golden_events() {
        let bytes = golden(case);
        for len in 0..bytes.len() {
            check!(
                RemoteLogMetadataSerde::deserialize(&bytes[..len]).is_err(),
                "{case} at {len}"
            );
        }
    }
}

fn arb_partition() -> impl Strategy<Value = TopicIdPartition> {
    (any::<u128>(), "[a-zA-Z0-9._-]{1,40}", any::<i32>()).prop_map(|(id, topic, partition)| {
        TopicIdPartition::new(Uuid::from_u128(id), topic, partition)
    })
}

fn arb_custom() -> impl Strategy<Value = Option<CustomMetadata>> {
    proptest::option::of(
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(CustomMetadata::new),
    )
}

fn arb_segment_state() -> impl Strategy<Value = RemoteLogSegmentState> {
    proptest::sample::select(RemoteLogSegmentState::ALL.to_vec())
}

fn arb_segment() -> impl Strategy<Value = RemoteLogSegmentMetadata> {
    (
        arb_partition(),
        any::<u128>(),
        0..1_000_000_i64,
        0..1_000_000_i64,
        proptest::collection::btree_map(0..1000_i32, 0..1_000_000_i64, 1..6),
        (any::<i64>(), any::<i32>(), any::<i64>(), 0..i32::MAX),
        arb_segment_state(),
        arb_custom(),
        any::<bool>(),
    )
        .prop_map(
            |(
                tp,
                id,
                start,
                len,
                raw_epochs,
                (max_ts, broker, event_ts, size),
                state,
                custom,
                txn,
            )| {
                // Spread the epochs' start offsets over the segment, ascending.
                let mut starts: Vec<i64> =
                    raw_epochs.values().map(|o| start + o % (len + 1)).collect();
                starts.sort_unstable();
                let epochs = raw_epochs
                    .keys()
                    .map(|&e| LeaderEpoch(e))
                    .zip(starts)
                    .collect();
                let details = RemoteLogSegmentDetails::new(size, state, epochs)
                    .with_custom_metadata(custom)
                    .with_txn_idx_empty(txn);
                RemoteLogSegmentMetadata::new(
                    RemoteLogSegmentId::new(tp, Uuid::from_u128(id)),
                    start,
                    start + len,
                    max_ts,
                    broker,
                    event_ts,
                    details,
                )
                .unwrap()
            },
        )
}

fn arb_event() -> impl Strategy<Value = RemoteLogMetadata> {
    prop_oneof![
        arb_segment().prop_map(RemoteLogMetadata::Segment),
        arb_segment().prop_map(|m| RemoteLogMetadata::SegmentSnapshot(
            RemoteLogSegmentMetadataSnapshot::from_metadata(&m)
        )),
        (
            arb_partition(),
            any::<u128>(),
            any::<i64>(),
            arb_custom(),
            arb_segment_state(),
            any::<i32>()
        )
            .prop_map(|(tp, id, ts, custom, state, broker)| {
                RemoteLogMetadata::SegmentUpdate(RemoteLogSegmentMetadataUpdate::new(
                    RemoteLogSegmentId::new(tp, Uuid::from_u128(id)),
                    ts,
                    custom,
                    state,
                    broker,
                ))
            }),
        (
            arb_partition(),
            proptest::sample::select(RemotePartitionDeleteState::ALL.to_vec()),
            any::<i64>(),
            any::<i32>()
        )
            .prop_map(
                |(tp, state, ts, broker)| RemoteLogMetadata::PartitionDelete(
                    RemotePartitionDeleteMetadata::new(tp, state, ts, broker)
                )
            ),
    ]
}

proptest! {
    #[test]
    fn every_event_round_trips(event in arb_event()) {
        let bytes = RemoteLogMetadataSerde::serialize(&event);
        prop_assert_eq!(RemoteLogMetadataSerde::deserialize(&bytes).unwrap(), event);
    }

    #[test]
    fn truncated_records_are_refused(event in arb_event(), cut in any::<prop::sample::Index>()) {
        let bytes = RemoteLogMetadataSerde::serialize(&event);
        let len = cut.index(bytes.len());
        prop_assert!(RemoteLogMetadataSerde::deserialize(&bytes[..len]).is_err());
    }

    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = RemoteLogMetadataSerde::deserialize(&bytes);
    }

    #[test]
    fn corrupted_records_never_panic(
        event in arb_event(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut bytes = RemoteLogMetadataSerde::serialize(&event).to_vec();
        for (at, value) in flips {
            let at = at.index(bytes.len());
            bytes[at] = value;
        }
        let _ = RemoteLogMetadataSerde::deserialize(&bytes);
    }

    #[test]
    fn plausible_framings_with_garbage_bodies_never_panic(
        api_key in 0..4_u8,
        version in 0..2_u8,
        body in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        let mut bytes = vec![1, api_key, version];
        bytes.extend(body);
        let _ = RemoteLogMetadataSerde::deserialize(&bytes);
    }
}
