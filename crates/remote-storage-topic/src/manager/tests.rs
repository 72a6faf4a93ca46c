//! Tests of [`TopicBasedRemoteLogMetadataManager`] over the in-process log:
//! read-your-writes, refusals, readiness, bad events, convergence of several
//! managers under concurrent writers, and restart from the snapshot cache.
//!
//! The SPI calls run on the test thread (a plain thread, as the broker's
//! `spawn_blocking` threads are) against a multi-threaded runtime.

use {
    super::*,
    crate::log::InProcessMetadataEventLog,
    assert2::{assert, check},
    async_trait::async_trait,
    bytes::Bytes,
    krabka_remote_storage::{
        CustomMetadata, RemoteLogSegmentDetails, RemoteLogSegmentId, RemotePartitionDeleteState,
    },
    std::{collections::BTreeMap, thread},
    tokio::runtime::Runtime,
    uuid::Uuid,
};

const PARTITIONS: i32 = 4;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn tp(topic: u128, partition: i32) -> TopicIdPartition {
    TopicIdPartition::new(Uuid::from_u128(topic), format!("topic-{topic}"), partition)
}

fn segment_id(partition: &TopicIdPartition, id: u128) -> RemoteLogSegmentId {
    RemoteLogSegmentId::new(partition.clone(), Uuid::from_u128(id))
}

/// A `COPY_SEGMENT_STARTED` segment with one epoch per 50 offsets.
fn segment(
    partition: &TopicIdPartition,
    id: u128,
    start: i64,
    end: i64,
) -> RemoteLogSegmentMetadata {
    let epochs: BTreeMap<LeaderEpoch, i64> = (start..=end)
        .step_by(50)
        .map(|offset| (LeaderEpoch(i32::try_from(offset / 50).unwrap()), offset))
        .collect();
    let details =
        RemoteLogSegmentDetails::new(1000, RemoteLogSegmentState::CopySegmentStarted, epochs)
            .with_custom_metadata(Some(CustomMetadata::new(id.to_be_bytes().to_vec())));
    RemoteLogSegmentMetadata::new(
        segment_id(partition, id),
        start,
        end,
        end * 10,
        1,
        7,
        details,
    )
    .unwrap()
}

fn update(
    partition: &TopicIdPartition,
    id: u128,
    state: RemoteLogSegmentState,
) -> RemoteLogSegmentMetadataUpdate {
    RemoteLogSegmentMetadataUpdate::new(segment_id(partition, id), 8, None, state, 2)
}

fn manager(
    log: &Arc<dyn MetadataEventLog>,
    runtime: &Runtime,
    config: TopicBasedRlmmConfig,
) -> TopicBasedRemoteLogMetadataManager {
    TopicBasedRemoteLogMetadataManager::new(Arc::clone(log), runtime.handle().clone(), config)
}

fn in_process() -> (InProcessMetadataEventLog, Arc<dyn MetadataEventLog>) {
    let log = InProcessMetadataEventLog::new(PARTITIONS);
    let shared: Arc<dyn MetadataEventLog> = Arc::new(log.clone());
    (log, shared)
}

/// Waits (with a generous bound, not a timing assertion) for `condition`.
fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !condition() {
        assert!(Instant::now() < deadline, "gave up waiting until {what}");
        thread::sleep(Duration::from_millis(2));
    }
}

/// Waits until `manager` has consumed each of its metadata partitions to the
/// log's current end.
fn wait_caught_up(
    manager: &TopicBasedRemoteLogMetadataManager,
    log: &Arc<dyn MetadataEventLog>,
    runtime: &Runtime,
) {
    let ends = runtime.block_on(log.high_water_marks()).unwrap();
    wait_until("the manager has caught up", || {
        manager
            .consumed_positions()
            .iter()
            .all(|(&partition, &position)| position >= ends[usize::try_from(partition).unwrap()])
    });
}

/// Everything a manager serves about `partition`.
fn observed(
    manager: &TopicBasedRemoteLogMetadataManager,
    partition: &TopicIdPartition,
) -> (
    Vec<RemoteLogSegmentMetadata>,
    Vec<Option<i64>>,
    Option<RemotePartitionDeleteMetadata>,
) {
    let highest = (0..10)
        .map(|epoch| {
            manager
                .highest_offset_for_epoch(partition, LeaderEpoch(epoch))
                .unwrap()
        })
        .collect();
    (
        manager.list_remote_log_segments(partition).unwrap(),
        highest,
        manager.remote_partition_delete_metadata(partition).unwrap(),
    )
}

fn publish_raw(
    runtime: &Runtime,
    log: &Arc<dyn MetadataEventLog>,
    partition: i32,
    value: Bytes,
) -> i64 {
    runtime.block_on(log.publish(partition, value)).unwrap()
}

#[test]
fn writes_are_served_as_soon_as_the_call_returns() {
    let runtime = runtime();
    let (_, log) = in_process();
    let rlmm = manager(&log, &runtime, TopicBasedRlmmConfig::default());
    let orders = tp(1, 0);
    rlmm.on_partition_leadership_changes(std::slice::from_ref(&orders), &[])
        .unwrap();
    wait_until("ready", || rlmm.is_ready(&orders));
    check!(rlmm.list_remote_log_segments(&orders).unwrap().is_empty());

    rlmm.add_remote_log_segment_metadata(segment(&orders, 10, 0, 99))
        .unwrap();
    let listed = rlmm.list_remote_log_segments(&orders).unwrap();
    check!(listed == vec![segment(&orders, 10, 0, 99)]);
    // Not copied yet, so not served.
    check!(
        rlmm.remote_log_segment_metadata(&orders, LeaderEpoch(0), 10)
            .unwrap()
            .is_none()
    );

    rlmm.update_remote_log_segment_metadata(update(
        &orders,
        10,
        RemoteLogSegmentState::CopySegmentFinished,
    ))
    .unwrap();
    let found = rlmm
        .remote_log_segment_metadata(&orders, LeaderEpoch(1), 60)
        .unwrap()
        .unwrap();
    check!(found.state() == RemoteLogSegmentState::CopySegmentFinished);
    check!(found.broker_id().0 == 2);
    check!(
        rlmm.highest_offset_for_epoch(&orders, LeaderEpoch(1))
            .unwrap()
            == Some(99)
    );
    check!(rlmm.remote_log_size(&orders, LeaderEpoch(0)).unwrap() == 1000);
    check!(
        rlmm.list_remote_log_segments_for_epoch(&orders, LeaderEpoch(1))
            .unwrap()
            .len()
            == 1
    );
    check!(
        rlmm.list_remote_log_segments_for_epoch(&orders, LeaderEpoch(5))
            .unwrap()
            .is_empty()
    );

    for state in [
        RemotePartitionDeleteState::DeletePartitionMarked,
        RemotePartitionDeleteState::DeletePartitionStarted,
        RemotePartitionDeleteState::DeletePartitionFinished,
    ] {
        rlmm.put_remote_partition_delete_metadata(RemotePartitionDeleteMetadata::new(
            orders.clone(),
            state,
            9,
            3,
        ))
        .unwrap();
    }
    check!(rlmm.list_remote_log_segments(&orders).unwrap().is_empty());
    check!(
        rlmm.remote_partition_delete_metadata(&orders)
            .unwrap()
            .unwrap()
            .state()
            == RemotePartitionDeleteState::DeletePartitionFinished
    );
    check!(
        rlmm.stats()
            == ConsumerStats {
                applied: 5,
                rejected: 0,
                undecodable: 0
            }
    );
    // Every event went to the partition's metadata partition.
    let ends = runtime.block_on(log.high_water_marks()).unwrap();
    let home = usize::try_from(rlmm.metadata_partition(&orders)).unwrap();
    check!(ends[home] == 5);
    check!(ends.iter().sum::<i64>() == 5);
    rlmm.close().unwrap();
}

#[test]
fn refusals_known_locally_do_not_reach_the_topic() {
    let runtime = runtime();
    let (_, log) = in_process();
    let rlmm = manager(&log, &runtime, TopicBasedRlmmConfig::default());
    let orders = tp(1, 0);
    let elsewhere = tp(2, 0);

    // Not assigned: neither reads nor writes are served.
    let error = rlmm.list_remote_log_segments(&orders).unwrap_err();
    check!(error.to_string().contains("not assigned"));
    check!(!rlmm.is_ready(&orders));
    check!(
        rlmm.add_remote_log_segment_metadata(segment(&orders, 1, 0, 9))
            .is_err()
    );

    rlmm.on_partition_leadership_changes(&[], std::slice::from_ref(&orders))
        .unwrap();
    wait_until("ready", || rlmm.is_ready(&orders));
    rlmm.add_remote_log_segment_metadata(segment(&orders, 1, 0, 9))
        .unwrap();
    assert!(let Err(RemoteStorageError::DuplicateSegment { .. }) = rlmm.add_remote_log_segment_metadata(segment(&orders, 1, 0, 9)));
    assert!(
        let Err(RemoteStorageError::UnknownSegment { .. })
            = rlmm.update_remote_log_segment_metadata(update(&orders, 2, RemoteLogSegmentState::CopySegmentFinished))
    );
    assert!(
        let Err(RemoteStorageError::IllegalStateTransition { .. })
            = rlmm.update_remote_log_segment_metadata(update(&orders, 1, RemoteLogSegmentState::DeleteSegmentFinished))
    );
    assert!(
        let Err(RemoteStorageError::IllegalStateTransition { from: None, .. })
            = rlmm.update_remote_log_segment_metadata(update(&orders, 1, RemoteLogSegmentState::CopySegmentStarted))
    );
    assert!(
        let Err(RemoteStorageError::IllegalPartitionDeleteTransition { .. })
            = rlmm.put_remote_partition_delete_metadata(RemotePartitionDeleteMetadata::new(
                orders.clone(),
                RemotePartitionDeleteState::DeletePartitionFinished,
                1,
                1,
            ))
    );
    check!(rlmm.list_remote_log_segments(&elsewhere).is_err());
    let ends = runtime.block_on(log.high_water_marks()).unwrap();
    check!(ends.iter().sum::<i64>() == 1);
    rlmm.close().unwrap();
}

#[test]
fn bad_events_are_counted_and_skipped_and_the_consumer_goes_on() {
    let runtime = runtime();
    let (_, log) = in_process();
    let rlmm = manager(&log, &runtime, TopicBasedRlmmConfig::default());
    let orders = tp(1, 0);
    let home = rlmm.metadata_partition(&orders);
    // A partition whose events belong in another metadata partition.
    let stranger = (0..)
        .map(|topic| tp(100 + topic, 0))
        .find(|candidate| rlmm.metadata_partition(candidate) != home)
        .unwrap();
    rlmm.on_partition_leadership_changes(std::slice::from_ref(&orders), &[])
        .unwrap();
    wait_until("ready", || rlmm.is_ready(&orders));

    let encode = RemoteLogMetadataSerde::serialize;
    publish_raw(
        &runtime,
        &log,
        home,
        Bytes::from_static(b"\x01\x00\x00garbage"),
    );
    publish_raw(
        &runtime,
        &log,
        home,
        encode(&RemoteLogMetadata::SegmentUpdate(update(
            &orders,
            5,
            RemoteLogSegmentState::CopySegmentFinished,
        ))),
    );
    publish_raw(
        &runtime,
        &log,
        home,
        encode(&RemoteLogMetadata::Segment(segment(&orders, 6, 0, 9))),
    );
    // COPY_SEGMENT_STARTED -> DELETE_SEGMENT_FINISHED skips a step.
    publish_raw(
        &runtime,
        &log,
        home,
        encode(&RemoteLogMetadata::SegmentUpdate(update(
            &orders,
            6,
            RemoteLogSegmentState::DeleteSegmentFinished,
        ))),
    );
    publish_raw(
        &runtime,
        &log,
        home,
        encode(&RemoteLogMetadata::Segment(segment(&stranger, 7, 0, 9))),
    );
    runtime
        .block_on(log.publish_keyed(home, Bytes::from_static(b"k"), None))
        .ok();
    // A WORM chain head the broker published beside the events is no event
    // at all: stepped over, not counted.
    runtime
        .block_on(log.publish_keyed(
            home,
            Bytes::from_static(b"worm-chain/topic-1-0-AAAAAAAAAAAAAAAAAAAAAQ"),
            Some(Bytes::from_static(b"{\"version\":1}")),
        ))
        .unwrap();

    // A good event after the bad ones is applied (its check waits for the
    // consumer to reach the end before it refuses anything).
    rlmm.update_remote_log_segment_metadata(update(
        &orders,
        6,
        RemoteLogSegmentState::CopySegmentFinished,
    ))
    .unwrap();
    let listed = rlmm.list_remote_log_segments(&orders).unwrap();
    check!(listed.len() == 1);
    check!(listed[0].state() == RemoteLogSegmentState::CopySegmentFinished);
    check!(
        rlmm.stats()
            == ConsumerStats {
                applied: 2,
                rejected: 3,
                undecodable: 2
            }
    );
    rlmm.close().unwrap();
}

/// An in-process log whose subscribers receive nothing until the gate opens.
struct GatedLog {
    inner: InProcessMetadataEventLog,
    open: tokio::sync::watch::Receiver<bool>,
}

#[async_trait]
impl MetadataEventLog for GatedLog {
    fn partition_count(&self) -> i32 {
        self.inner.partition_count()
    }

    async fn publish(&self, partition: i32, event: Bytes) -> Result<i64, MetadataLogError> {
        self.inner.publish(partition, event).await
    }

    fn subscribe(
        &self,
        assignment: Vec<PartitionStart>,
    ) -> (MetadataEventStream, Arc<dyn AssignmentHandle>) {
        let (stream, handle) = self.inner.subscribe(assignment);
        let open = self.open.clone();
        let gated = stream.then(move |record| {
            let mut open = open.clone();
            async move {
                let _ = open.wait_for(|open| *open).await;
                record
            }
        });
        (Box::pin(gated), handle)
    }

    async fn high_water_marks(&self) -> Result<Vec<i64>, MetadataLogError> {
        self.inner.high_water_marks().await
    }
}

#[test]
fn reads_answer_not_ready_until_the_metadata_partition_is_caught_up() {
    let runtime = runtime();
    let inner = InProcessMetadataEventLog::new(PARTITIONS);
    let (gate, open) = tokio::sync::watch::channel(false);
    let log: Arc<dyn MetadataEventLog> = Arc::new(GatedLog { inner, open });
    let orders = tp(1, 0);
    let home =
        RemoteLogMetadataTopicPartitioner::new(PARTITIONS).metadata_partition(orders.topic_id(), 0);
    publish_raw(
        &runtime,
        &log,
        home,
        RemoteLogMetadataSerde::serialize(&RemoteLogMetadata::Segment(segment(&orders, 1, 0, 9))),
    );

    let rlmm = manager(&log, &runtime, TopicBasedRlmmConfig::default());
    rlmm.on_partition_leadership_changes(&[], std::slice::from_ref(&orders))
        .unwrap();
    check!(!rlmm.is_ready(&orders));
    let error = rlmm.list_remote_log_segments(&orders).unwrap_err();
    check!(error.to_string().contains("not ready"), "{error}");

    gate.send(true).unwrap();
    wait_until("ready", || rlmm.is_ready(&orders));
    check!(rlmm.list_remote_log_segments(&orders).unwrap() == vec![segment(&orders, 1, 0, 9)]);
    rlmm.close().unwrap();
}

#[test]
fn three_managers_converge_under_concurrent_writers() {
    let runtime = runtime();
    let (_, log) = in_process();
    let partitions: Vec<TopicIdPartition> = (0..6).map(|p| tp(9, p)).collect();
    let managers: Vec<_> = (0..3)
        .map(|_| manager(&log, &runtime, TopicBasedRlmmConfig::default()))
        .collect();
    for (index, rlmm) in managers.iter().enumerate() {
        let (leaders, followers): (Vec<_>, Vec<_>) = partitions
            .iter()
            .cloned()
            .enumerate()
            .partition(|(p, _)| p % 3 == index);
        let leaders: Vec<_> = leaders.into_iter().map(|(_, p)| p).collect();
        let followers: Vec<_> = followers.into_iter().map(|(_, p)| p).collect();
        rlmm.on_partition_leadership_changes(&leaders, &followers)
            .unwrap();
    }

    thread::scope(|scope| {
        for (index, rlmm) in managers.iter().enumerate() {
            let partitions = &partitions;
            scope.spawn(move || {
                for partition in partitions.iter().skip(index).step_by(3) {
                    wait_until("ready", || rlmm.is_ready(partition));
                    for n in 0..8_i64 {
                        let id = u128::try_from(n).unwrap() + 1;
                        rlmm.add_remote_log_segment_metadata(segment(
                            partition,
                            id,
                            n * 100,
                            n * 100 + 99,
                        ))
                        .unwrap();
                        rlmm.update_remote_log_segment_metadata(update(
                            partition,
                            id,
                            RemoteLogSegmentState::CopySegmentFinished,
                        ))
                        .unwrap();
                    }
                    for id in 1..=3 {
                        rlmm.update_remote_log_segment_metadata(update(
                            partition,
                            id,
                            RemoteLogSegmentState::DeleteSegmentStarted,
                        ))
                        .unwrap();
                        rlmm.update_remote_log_segment_metadata(update(
                            partition,
                            id,
                            RemoteLogSegmentState::DeleteSegmentFinished,
                        ))
                        .unwrap();
                    }
                    if partition.partition() == 5 {
                        rlmm.put_remote_partition_delete_metadata(
                            RemotePartitionDeleteMetadata::new(
                                partition.clone(),
                                RemotePartitionDeleteState::DeletePartitionMarked,
                                1,
                                1,
                            ),
                        )
                        .unwrap();
                    }
                }
            });
        }
    });

    for rlmm in &managers {
        wait_caught_up(rlmm, &log, &runtime);
    }
    for partition in &partitions {
        let first = observed(&managers[0], partition);
        check!(first.0.len() == 5, "{partition}");
        check!(first.1[1] == Some(99), "{partition}");
        for other in &managers[1..] {
            check!(observed(other, partition) == first, "{partition}");
        }
    }
    check!(managers.iter().all(|rlmm| rlmm.stats().rejected == 0));
    for rlmm in &managers {
        rlmm.close().unwrap();
    }
}

#[test]
fn concurrent_duplicate_adds_admit_exactly_one() {
    let runtime = runtime();
    let (_, log) = in_process();
    let orders = tp(1, 0);
    let managers: Vec<_> = (0..2)
        .map(|_| manager(&log, &runtime, TopicBasedRlmmConfig::default()))
        .collect();
    for rlmm in &managers {
        rlmm.on_partition_leadership_changes(std::slice::from_ref(&orders), &[])
            .unwrap();
        wait_until("ready", || rlmm.is_ready(&orders));
    }
    for round in 0..20_u128 {
        let results: Vec<_> = thread::scope(|scope| {
            let handles: Vec<_> = managers
                .iter()
                .map(|rlmm| {
                    let orders = &orders;
                    scope.spawn(move || {
                        rlmm.add_remote_log_segment_metadata(segment(orders, round, 0, 9))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().unwrap())
                .collect()
        });
        check!(results.iter().filter(|result| result.is_ok()).count() == 1);
        check!(
            results
                .iter()
                .any(|result| matches!(result, Err(RemoteStorageError::DuplicateSegment { .. })))
        );
    }
    for rlmm in &managers {
        rlmm.close().unwrap();
    }
}

#[test]
fn restart_from_the_snapshot_cache_equals_a_full_replay() {
    let runtime = runtime();
    let (_, log) = in_process();
    let dir = tempfile::tempdir().unwrap();
    let cached = || TopicBasedRlmmConfig {
        snapshot_dir: Some(dir.path().to_owned()),
        snapshot_interval_events: 7,
        ..TopicBasedRlmmConfig::default()
    };
    let partitions: Vec<TopicIdPartition> = (0..5).map(|p| tp(3, p)).collect();
    let write = |rlmm: &TopicBasedRemoteLogMetadataManager, ids: std::ops::Range<u128>| {
        for partition in &partitions {
            for id in ids.clone() {
                let start = i64::try_from(id).unwrap() * 100;
                rlmm.add_remote_log_segment_metadata(segment(partition, id, start, start + 99))
                    .unwrap();
                rlmm.update_remote_log_segment_metadata(update(
                    partition,
                    id,
                    RemoteLogSegmentState::CopySegmentFinished,
                ))
                .unwrap();
            }
            rlmm.update_remote_log_segment_metadata(update(
                partition,
                ids.start,
                RemoteLogSegmentState::DeleteSegmentStarted,
            ))
            .unwrap();
        }
    };

    let first = manager(&log, &runtime, cached());
    first
        .on_partition_leadership_changes(&partitions, &[])
        .unwrap();
    write(&first, 0..6);
    first.close().unwrap();
    let covered: i64 = first.consumed_positions().values().sum();
    check!(covered == 5 * 13);

    // More history arrives while the first manager is down.
    let other = manager(&log, &runtime, TopicBasedRlmmConfig::default());
    other
        .on_partition_leadership_changes(&partitions, &[])
        .unwrap();
    wait_caught_up(&other, &log, &runtime);
    write(&other, 10..13);

    let restarted = manager(&log, &runtime, cached());
    restarted
        .on_partition_leadership_changes(&[], &partitions)
        .unwrap();
    wait_caught_up(&restarted, &log, &runtime);
    let replayed = manager(&log, &runtime, TopicBasedRlmmConfig::default());
    replayed
        .on_partition_leadership_changes(&[], &partitions)
        .unwrap();
    wait_caught_up(&replayed, &log, &runtime);

    for partition in &partitions {
        check!(
            observed(&restarted, partition) == observed(&replayed, partition),
            "{partition}"
        );
        check!(restarted.list_remote_log_segments(partition).unwrap().len() == 9);
    }
    // The restarted manager resumed where its cache ended: it applied only
    // the events written since.
    check!(replayed.stats().applied == 5 * (13 + 7));
    check!(restarted.stats().applied == 5 * 7);
    for rlmm in [other, restarted, replayed] {
        rlmm.close().unwrap();
    }
}

#[test]
fn a_corrupt_cache_file_is_ignored_and_the_partition_replayed() {
    let runtime = runtime();
    let (_, log) = in_process();
    let dir = tempfile::tempdir().unwrap();
    let config = TopicBasedRlmmConfig {
        snapshot_dir: Some(dir.path().to_owned()),
        ..TopicBasedRlmmConfig::default()
    };
    let orders = tp(1, 0);
    let first = manager(&log, &runtime, config.clone());
    first
        .on_partition_leadership_changes(std::slice::from_ref(&orders), &[])
        .unwrap();
    wait_until("ready", || first.is_ready(&orders));
    first
        .add_remote_log_segment_metadata(segment(&orders, 1, 0, 9))
        .unwrap();
    first.close().unwrap();
    let path = snapshot_cache::file_path(dir.path(), first.metadata_partition(&orders));
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();

    let second = manager(&log, &runtime, config);
    second
        .on_partition_leadership_changes(std::slice::from_ref(&orders), &[])
        .unwrap();
    wait_until("ready", || second.is_ready(&orders));
    check!(second.list_remote_log_segments(&orders).unwrap() == vec![segment(&orders, 1, 0, 9)]);
    check!(second.stats().applied == 1);
    second.close().unwrap();
}

#[test]
fn stopping_the_last_partition_of_a_metadata_partition_unassigns_it() {
    let runtime = runtime();
    let (_, log) = in_process();
    let dir = tempfile::tempdir().unwrap();
    let rlmm = manager(
        &log,
        &runtime,
        TopicBasedRlmmConfig {
            snapshot_dir: Some(dir.path().to_owned()),
            ..TopicBasedRlmmConfig::default()
        },
    );
    let orders = tp(1, 0);
    let home = rlmm.metadata_partition(&orders);
    rlmm.on_partition_leadership_changes(std::slice::from_ref(&orders), &[])
        .unwrap();
    wait_until("ready", || rlmm.is_ready(&orders));
    rlmm.add_remote_log_segment_metadata(segment(&orders, 1, 0, 9))
        .unwrap();

    rlmm.on_stopped_partitions(std::slice::from_ref(&orders))
        .unwrap();
    check!(rlmm.consumed_positions().is_empty());
    check!(!rlmm.is_ready(&orders));
    check!(snapshot_cache::file_path(dir.path(), home).exists());

    // Taking it back resumes from the snapshot written on the way out.
    rlmm.on_partition_leadership_changes(std::slice::from_ref(&orders), &[])
        .unwrap();
    wait_until("ready", || rlmm.is_ready(&orders));
    check!(rlmm.list_remote_log_segments(&orders).unwrap().len() == 1);
    check!(rlmm.stats().applied == 1);
    rlmm.close().unwrap();
}

#[test]
fn a_closed_manager_refuses_every_call() {
    let runtime = runtime();
    let (_, log) = in_process();
    let rlmm = manager(&log, &runtime, TopicBasedRlmmConfig::default());
    let orders = tp(1, 0);
    rlmm.on_partition_leadership_changes(std::slice::from_ref(&orders), &[])
        .unwrap();
    rlmm.close().unwrap();
    rlmm.close().unwrap();
    assert!(let Err(RemoteStorageError::Closed) = rlmm.list_remote_log_segments(&orders));
    assert!(let Err(RemoteStorageError::Closed) = rlmm.add_remote_log_segment_metadata(segment(&orders, 1, 0, 9)));
    assert!(let Err(RemoteStorageError::Closed) = rlmm.on_partition_leadership_changes(&[], std::slice::from_ref(&orders)));
    check!(!rlmm.is_ready(&orders));
}

#[test]
fn a_closed_log_fails_writes_at_once() {
    let runtime = runtime();
    let (fixture, log) = in_process();
    let rlmm = manager(&log, &runtime, TopicBasedRlmmConfig::default());
    let orders = tp(1, 0);
    rlmm.on_partition_leadership_changes(std::slice::from_ref(&orders), &[])
        .unwrap();
    wait_until("ready", || rlmm.is_ready(&orders));
    fixture.close();
    assert!(let Err(RemoteStorageError::Closed) = rlmm.add_remote_log_segment_metadata(segment(&orders, 1, 0, 9)));
    rlmm.close().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_from_a_runtime_worker_block_in_place() {
    let (_, log) = in_process();
    let rlmm = TopicBasedRemoteLogMetadataManager::new(
        Arc::clone(&log),
        Handle::current(),
        TopicBasedRlmmConfig::default(),
    );
    let orders = tp(1, 0);
    rlmm.on_partition_leadership_changes(std::slice::from_ref(&orders), &[])
        .unwrap();
    while !rlmm.is_ready(&orders) {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    rlmm.add_remote_log_segment_metadata(segment(&orders, 1, 0, 9))
        .unwrap();
    check!(rlmm.list_remote_log_segments(&orders).unwrap().len() == 1);
    rlmm.close().unwrap();
}
