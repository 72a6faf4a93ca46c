//! The PostgreSQL batch coordinator against a real server: every
//! conformance body the in-memory coordinator passes, and brokers (one
//! connection pool each) committing to the same partitions at once.

mod support;

use {
    assert2::check,
    krabka_cluster::{Cluster, DatabaseConfig},
    krabka_ids::BrokerId,
    krabka_remote_storage::diskless::{
        BatchCoordinator, DeleteRecords, DisklessPartition, FindBatches, FoundBatch, LogInfo,
        ObjectCommit, ObjectKey, ProducerBatch, RetentionPolicy,
        conformance::{commit_of, run_all},
    },
    krabka_test_support::TestDatabase,
    std::{
        collections::{BTreeMap, BTreeSet},
        sync::{Arc, Mutex},
    },
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_the_conformance_suite() {
    if support::cluster().await.is_none() {
        return; // no PostgreSQL here (outside CI)
    }
    // A database per case: dead objects are global to a coordinator, and a
    // case asserts the exact list.
    let databases = Arc::new(Mutex::new(Vec::new()));
    run_all(|| {
        let databases = Arc::clone(&databases);
        async move {
            let (db, cluster) = support::cluster().await.expect("a database");
            databases.lock().unwrap().push(db);
            Arc::new(cluster.batch_coordinator()) as Arc<dyn BatchCoordinator>
        }
    })
    .await;
    check!(databases.lock().unwrap().len() == 14);
}

/// Another broker: its own pool on the same database.
async fn broker(db: &TestDatabase) -> Arc<dyn BatchCoordinator> {
    let cluster = Cluster::connect(&DatabaseConfig::new(db.url()))
        .await
        .expect("connect");
    Arc::new(cluster.batch_coordinator())
}

/// Two brokers' coordinators on one fresh database (keep it alive) and
/// four partitions of a new topic.
async fn two_brokers_on_four_partitions() -> Option<(
    TestDatabase,
    [Arc<dyn BatchCoordinator>; 2],
    Vec<DisklessPartition>,
)> {
    let (db, cluster) = support::cluster().await?;
    let brokers = [
        Arc::new(cluster.batch_coordinator()) as Arc<dyn BatchCoordinator>,
        broker(&db).await,
    ];
    let topic = uuid::Uuid::new_v4();
    let partitions: Vec<_> = (0..4).map(|i| DisklessPartition::new(topic, i)).collect();
    brokers[0].create_partitions(&partitions).await.unwrap();
    Some((db, brokers, partitions))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_brokers_committing_to_the_same_partitions_get_dense_unique_offsets() {
    let Some((_db, brokers, partitions)) = two_brokers_on_four_partitions().await else {
        return;
    };

    // Each broker runs 4 writers of 20 objects; each object holds batches
    // for the partitions in an order of its own (forward, backward,
    // rotated), so a coordinator that locked in request order would
    // deadlock.
    const WRITERS: usize = 4;
    const OBJECTS: usize = 20;
    let mut tasks = Vec::new();
    for (b, coordinator) in brokers.iter().enumerate() {
        for w in 0..WRITERS {
            let coordinator = Arc::clone(coordinator);
            let partitions = partitions.clone();
            tasks.push(tokio::spawn(async move {
                let mut placed = Vec::new();
                for o in 0..OBJECTS {
                    let mut order = partitions.clone();
                    order.rotate_left((b + w + o) % partitions.len());
                    if (w + o) % 2 == 1 {
                        order.reverse();
                    }
                    let batches: Vec<(DisklessPartition, u32)> =
                        order.iter().zip(1u32..).map(|(p, n)| (*p, n)).collect();
                    let commit = commit_of(&format!("b{b}-w{w}-o{o}"), &batches);
                    let answers = coordinator.commit_object(&commit).await.expect("commit");
                    for ((p, n), answer) in batches.iter().zip(answers) {
                        let committed = answer.expect("accepted");
                        check!(!committed.duplicate);
                        placed.push((*p, committed.base_offset, i64::from(*n)));
                    }
                }
                placed
            }));
        }
    }
    let mut by_partition: BTreeMap<DisklessPartition, Vec<(i64, i64)>> = BTreeMap::new();
    for task in tasks {
        for (p, base, n) in task.await.expect("writer") {
            by_partition.entry(p).or_default().push((base, n));
        }
    }
    let infos = brokers[1].log_info(&partitions).await.unwrap();
    for (p, info) in partitions.iter().zip(infos) {
        let mut ranges = by_partition.remove(p).unwrap_or_default();
        ranges.sort_unstable();
        check!(ranges.len() == 2 * WRITERS * OBJECTS);
        // Dense and unique: each batch starts where the previous ended.
        let mut next = 0;
        for (base, n) in &ranges {
            assert_eq!(*base, next, "partition {p}: offsets dense and unique");
            next += n;
        }
        check!(info.unwrap().high_watermark == next);
        // And the batch table says the same, read through the other broker.
        let mut found = Vec::new();
        let mut offset = 0;
        while offset < next {
            let answer = brokers[0]
                .find_batches(&[FindBatches {
                    partition: *p,
                    offset,
                    max_bytes: u32::MAX,
                }])
                .await
                .unwrap()
                .remove(0)
                .unwrap();
            let last = answer.batches.last().expect("batches up to the watermark");
            offset = last.last_offset + 1;
            found.extend(
                answer
                    .batches
                    .iter()
                    .map(|b| (b.base_offset, b.last_offset - b.base_offset + 1)),
            );
        }
        check!(found == ranges);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_through_another_broker_at_the_same_time_is_committed_once() {
    let Some((db, cluster)) = support::cluster().await else {
        return;
    };
    let brokers = [
        Arc::new(cluster.batch_coordinator()) as Arc<dyn BatchCoordinator>,
        broker(&db).await,
    ];
    let p = DisklessPartition::new(uuid::Uuid::new_v4(), 0);
    brokers[0].create_partitions(&[p]).await.unwrap();
    let with_producer = |key: &str, sequence: i32| {
        let mut commit: ObjectCommit = commit_of(key, &[(p, 3)]);
        commit.batches[0].producer = Some(ProducerBatch {
            producer_id: 1000,
            producer_epoch: 0,
            base_sequence: sequence,
            last_sequence: sequence + 2,
        });
        commit
    };
    // Rounds of: the producer's batch sent to one broker and, its answer
    // presumed lost, retried to the other while the first commits.
    let mut expected_base = 0;
    for round in 0..20 {
        let sequence = round * 3;
        let sends = brokers.iter().enumerate().map(|(b, c)| {
            let c = Arc::clone(c);
            let commit = with_producer(&format!("r{round}-b{b}"), sequence);
            tokio::spawn(async move { c.commit_object(&commit).await.expect("commit").remove(0) })
        });
        let mut answers = Vec::new();
        for send in sends.collect::<Vec<_>>() {
            answers.push(send.await.expect("send").expect("accepted"));
        }
        check!(
            answers.iter().filter(|a| !a.duplicate).count() == 1,
            "round {round}: exactly one commit appends: {answers:?}"
        );
        check!(answers.iter().all(|a| a.base_offset == expected_base));
        expected_base += 3;
    }
    let info = brokers[1].log_info(&[p]).await.unwrap().remove(0).unwrap();
    check!(info.high_watermark == expected_base);
    // Each round left one object holding only a duplicate: dead at once.
    check!(brokers[0].objects_to_delete(i64::MAX).await.unwrap().len() == 20);
}

/// Every batch from the log start of `p`, read through `c`.
async fn live_batches(
    c: &Arc<dyn BatchCoordinator>,
    p: DisklessPartition,
) -> (LogInfo, Vec<FoundBatch>) {
    let info = c.log_info(&[p]).await.unwrap().remove(0).unwrap();
    let mut found = Vec::new();
    let mut offset = info.log_start_offset;
    while offset < info.high_watermark {
        let answer = c
            .find_batches(&[FindBatches {
                partition: p,
                offset,
                max_bytes: u32::MAX,
            }])
            .await
            .unwrap()
            .remove(0)
            .unwrap();
        let last = answer.batches.last().expect("batches up to the watermark");
        offset = last.last_offset + 1;
        found.extend(answer.batches);
    }
    (info, found)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_deletions_and_retention_through_two_brokers_at_once_stay_consistent() {
    let Some((db, cluster)) = support::cluster().await else {
        return;
    };
    let brokers = [
        Arc::new(cluster.batch_coordinator()) as Arc<dyn BatchCoordinator>,
        broker(&db).await,
    ];
    let topic = uuid::Uuid::new_v4();
    let partitions: Vec<_> = (0..4).map(|i| DisklessPartition::new(topic, i)).collect();
    brokers[1].create_partitions(&partitions).await.unwrap();

    // Writers commit objects spanning every partition while each broker
    // also deletes records and applies retention over the partitions in
    // an order of its own: objects shared by partitions lose batches to
    // both brokers at once, which must neither deadlock nor miscount.
    let mut tasks = Vec::new();
    for (b, c) in brokers.iter().enumerate() {
        for w in 0..3 {
            let (c, mut order) = (Arc::clone(c), partitions.clone());
            tasks.push(tokio::spawn(async move {
                let mut keys = Vec::new();
                for o in 0..15 {
                    order.rotate_left(1 + (b + w + o) % 3);
                    let batches: Vec<_> = order.iter().map(|p| (*p, 1)).collect();
                    let commit = commit_of(&format!("b{b}-w{w}-o{o}"), &batches);
                    let answers = c.commit_object(&commit).await.expect("commit");
                    check!(answers.iter().all(Result::is_ok));
                    keys.push(commit.key);
                }
                keys
            }));
        }
        let (c, mut order) = (Arc::clone(c), partitions.clone());
        if b == 1 {
            order.reverse();
        }
        tasks.push(tokio::spawn(async move {
            for round in 0..15 {
                let infos = c.log_info(&order).await.expect("log info");
                let deletes: Vec<_> = order
                    .iter()
                    .zip(infos)
                    .map(|(p, info)| DeleteRecords {
                        partition: *p,
                        offset: info.unwrap().high_watermark / 2,
                    })
                    .collect();
                c.delete_records(&deletes).await.expect("delete records");
                let policies: Vec<_> = order
                    .iter()
                    .map(|p| RetentionPolicy {
                        partition: *p,
                        retention_ms: -1,
                        retention_bytes: 100 * (10 + round),
                    })
                    .collect();
                c.enforce_retention(&policies, 0).await.expect("retention");
            }
            Vec::new()
        }));
    }
    let mut committed = BTreeSet::new();
    for task in tasks {
        committed.extend(task.await.expect("task"));
    }
    check!(committed.len() == 2 * 3 * 15);

    // Sizes agree with the batches left, and an object is offered for
    // deletion exactly when none of its batches is left.
    let mut live = BTreeSet::new();
    for p in &partitions {
        let (info, batches) = live_batches(&brokers[0], *p).await;
        let bytes: u64 = batches.iter().map(|b| u64::from(b.size)).sum();
        check!(info.byte_size == bytes, "partition {p}");
        check!(info.high_watermark == 90);
        live.extend(batches.into_iter().map(|b| b.object));
    }
    let dead: BTreeSet<ObjectKey> = brokers[1]
        .objects_to_delete(i64::MAX)
        .await
        .unwrap()
        .into_iter()
        .collect();
    let expected: BTreeSet<ObjectKey> = committed.difference(&live).cloned().collect();
    check!(!dead.is_empty() && !live.is_empty());
    check!(dead == expected);
}

#[tokio::test]
async fn an_unreachable_database_is_an_error_not_a_panic() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut config = DatabaseConfig::new(format!("postgresql://postgres@127.0.0.1:{port}/none"));
    config.connect_timeout = std::time::Duration::from_millis(500);
    let coordinator =
        krabka_cluster::PgBatchCoordinator::new(krabka_cluster::Database::new(&config).unwrap());
    let p = DisklessPartition::new(uuid::Uuid::new_v4(), 0);
    let commit = commit_of("down", &[(p, 1)]);
    let e = coordinator.commit_object(&commit).await.unwrap_err();
    check!(matches!(
        e,
        krabka_remote_storage::RemoteStorageError::Backend { .. }
    ));
    check!(e.to_string().contains("cannot reach the cluster database"));
    check!(coordinator.log_info(&[p]).await.is_err());
}

/// A broker abandons an object whose commit failed on its side while the
/// database may still be finishing it: the abandon waits for that commit
/// (the key is unique) and then leaves a committed object alone, or
/// records a rolled-back one as dead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoning_an_object_waits_for_its_commit_in_flight() {
    let Some((_db, cluster)) = support::cluster().await else {
        return;
    };
    let coordinator = Arc::new(cluster.batch_coordinator());
    for commits in [true, false] {
        let key = ObjectKey(format!("in-flight-{}", uuid::Uuid::new_v4()));
        let mut conn = cluster.database().connection().await.expect("connection");
        let tx = conn.transaction().await.expect("transaction");
        tx.execute(
            "INSERT INTO diskless_objects (object_key, uploader, size, committed_ms, live_batches)
             VALUES ($1, 1, 10, 0, 1)",
            &[&key.0],
        )
        .await
        .expect("the commit in flight");
        let abandon = tokio::spawn({
            let coordinator = Arc::clone(&coordinator);
            let key = key.clone();
            async move { coordinator.abandon_object(&key, BrokerId(1), 10).await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        check!(
            !abandon.is_finished(),
            "the abandon waits for the commit in flight"
        );
        if commits {
            tx.commit().await.expect("commit");
        } else {
            tx.rollback().await.expect("rollback");
        }
        let recorded = abandon.await.expect("task").expect("abandon");
        check!(recorded == !commits);
        let dead = coordinator.objects_to_delete(i64::MAX).await.expect("dead");
        check!(dead.contains(&key) == !commits);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_through_one_broker_while_another_commits_forgets_only_idle_producers() {
    let Some((_db, brokers, partitions)) = two_brokers_on_four_partitions().await else {
        return;
    };
    const HORIZON: i64 = 1_000_000;
    let send = |p: DisklessPartition, producer_id: i64, sequence: i32, timestamp: i64| {
        let mut commit: ObjectCommit = commit_of("x", &[(p, 1)]);
        commit.batches[0].producer = Some(ProducerBatch {
            producer_id,
            producer_epoch: 0,
            base_sequence: sequence,
            last_sequence: sequence,
        });
        commit.batches[0].max_timestamp = timestamp;
        commit
    };
    // Broker 0 commits, on every partition, batches of one producer that
    // stays fresh (above the horizon) and each time a batch of a new
    // producer that is idle at once (below it), while broker 1 expires at
    // the horizon over and over: both lock the same partitions.
    let writer = {
        let c = Arc::clone(&brokers[0]);
        let partitions = partitions.clone();
        tokio::spawn(async move {
            for sequence in 0..30 {
                for p in &partitions {
                    let fresh = send(*p, 600, sequence, HORIZON + i64::from(sequence));
                    let idle = send(*p, 1000 + i64::from(sequence), 0, HORIZON - 1);
                    for commit in [fresh, idle] {
                        let answer = c.commit_object(&commit).await.expect("commit").remove(0);
                        check!(answer.is_ok_and(|a| !a.duplicate));
                    }
                }
            }
        })
    };
    let expirer = {
        let c = Arc::clone(&brokers[1]);
        tokio::spawn(async move {
            let mut forgotten = 0;
            for _ in 0..30 {
                forgotten += c.expire_producers(HORIZON).await.expect("expire");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            forgotten
        })
    };
    writer.await.unwrap();
    let forgotten = expirer.await.unwrap() + brokers[1].expire_producers(HORIZON).await.unwrap();
    check!(forgotten == 30 * 4, "every idle producer, each once");
    for described in brokers[1].describe_producers(&partitions).await.unwrap() {
        let described = described.unwrap();
        check!(described.len() == 1);
        check!(described[0].producer_id.0 == 600);
        check!(described[0].last_sequence == 29);
        check!(described[0].last_timestamp == HORIZON + 29);
    }
    // Its last batches are still recognised as retries, through either broker.
    let retry = brokers[1]
        .commit_object(&send(partitions[2], 600, 27, HORIZON + 27))
        .await
        .unwrap()
        .remove(0)
        .unwrap();
    check!(retry.duplicate);
}
