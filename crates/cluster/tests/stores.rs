//! The cluster stores against a real PostgreSQL: migrations, membership,
//! shard leases, fenced coordinator state, topics and configs, producer-id
//! blocks and event logs.

mod support;

use {
    assert2::check,
    krabka_cluster::{
        ClusterError, Fence, LeaseTiming, ShardId, ShardKind,
        events::NewEvent,
        migrate::{self, Migration},
        state::{PendingMarker, StateRecord, StoredEntry},
        topics::TopicRecord,
    },
    krabka_ids::{BrokerId, ProducerEpoch, ProducerId},
    std::{collections::BTreeMap, time::Duration},
    support::{LONG, cluster, eventually, expire_broker, expire_shard, register, registration},
};

fn rec(key: &str, value: Option<&str>) -> StateRecord {
    StateRecord {
        key: key.as_bytes().to_vec(),
        value: value.map(|v| v.as_bytes().to_vec()),
    }
}

fn committed(entries: &[StoredEntry]) -> Vec<(String, String)> {
    entries
        .iter()
        .filter_map(|e| match e {
            StoredEntry::Committed { key, value, .. } => Some((
                String::from_utf8_lossy(key).into_owned(),
                String::from_utf8_lossy(value).into_owned(),
            )),
            StoredEntry::Pending { .. } => None,
        })
        .collect()
}

#[tokio::test]
async fn migrations_run_once_even_when_brokers_start_together() {
    let Some(db) = krabka_test_support::TestDatabase::create().await else {
        return;
    };
    let config = krabka_cluster::DatabaseConfig::new(db.url());
    let starts = (0..4).map(|_| {
        let config = config.clone();
        async move { krabka_cluster::Cluster::connect(&config).await }
    });
    let clusters: Vec<_> = join_all(starts).await;
    let ids: Vec<String> = clusters
        .into_iter()
        .map(|c| c.expect("connect").cluster_id().to_owned())
        .collect();
    check!(
        ids.iter().all(|id| id == &ids[0]),
        "one shared cluster id: {ids:?}"
    );
    check!(ids[0].len() == 22);

    let conn = tokio_postgres::connect(db.url(), tokio_postgres::NoTls)
        .await
        .map(|(client, connection)| {
            tokio::spawn(connection);
            client
        })
        .expect("connect");
    let rows = conn
        .query(
            "SELECT version FROM krabka_schema_migrations ORDER BY version",
            &[],
        )
        .await
        .expect("migrations table");
    let versions: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    let all: Vec<i32> = migrate::MIGRATIONS.iter().map(|m| m.version).collect();
    check!(versions == all, "each migration applied once, in order");
}

async fn join_all<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.expect("task"));
    }
    out
}

#[tokio::test]
async fn a_schema_newer_than_the_binary_is_refused() {
    let Some((_db, cluster)) = cluster().await else {
        return;
    };
    let mut newer = migrate::MIGRATIONS.to_vec();
    newer.push(Migration {
        version: migrate::latest_version() + 1,
        name: "from the future",
        sql: "CREATE TABLE future_things (id integer)",
    });
    let before = migrate::migrate_with(cluster.database(), &newer)
        .await
        .expect("the newer binary migrates");
    check!(before == migrate::latest_version());
    assert2::assert!(let Err(ClusterError::SchemaTooNew { found, supported }) =
            migrate::migrate(cluster.database()).await
    );
    check!(found == migrate::latest_version() + 1);
    check!(supported == migrate::latest_version());
}

#[tokio::test]
async fn an_unreachable_database_is_reported_as_such() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let mut config =
        krabka_cluster::DatabaseConfig::new(format!("postgresql://postgres@127.0.0.1:{port}/x"));
    config.connect_timeout = Duration::from_secs(2);
    assert2::assert!(let Err(e) = krabka_cluster::Cluster::connect(&config).await);
    check!(e.is_unavailable(), "{e}");
}

/// A broker frozen inside a transaction (a stopped process, a paused VM)
/// keeps its session open; the server ends it after the idle timeout, so
/// the rows it locked — a shard lease another broker must take — are free
/// again, and the frozen broker's transaction is gone when it wakes.
#[tokio::test]
async fn a_transaction_left_idle_loses_its_locks() {
    let Some(db) = krabka_test_support::TestDatabase::create().await else {
        return;
    };
    let mut config = krabka_cluster::DatabaseConfig::new(db.url());
    config.idle_in_transaction_timeout = Some(Duration::from_secs(2));
    let database = krabka_cluster::Database::new(&config).expect("pool");
    let (mut frozen, other) = (
        database.connection().await.expect("connection"),
        database.connection().await.expect("connection"),
    );
    other
        .batch_execute(
            "CREATE TABLE lease_row (id int PRIMARY KEY); INSERT INTO lease_row VALUES (1)",
        )
        .await
        .expect("table");
    let tx = frozen.transaction().await.expect("begin");
    tx.execute("SELECT id FROM lease_row WHERE id = 1 FOR UPDATE", &[])
        .await
        .expect("lock");
    check!(
        other
            .execute(
                "SELECT id FROM lease_row WHERE id = 1 FOR UPDATE NOWAIT",
                &[]
            )
            .await
            .is_err(),
        "held while the transaction is young"
    );
    // Frozen: nothing more is sent on it; the server ends it (within the
    // helper's 30 s deadline).
    eventually("the lock to go with the idle session", async || {
        other
            .execute(
                "SELECT id FROM lease_row WHERE id = 1 FOR UPDATE NOWAIT",
                &[],
            )
            .await
            .is_ok()
    })
    .await;
    check!(
        tx.execute("SELECT 1", &[]).await.is_err(),
        "the frozen transaction is over"
    );
}

#[tokio::test]
async fn a_node_id_held_by_a_live_broker_is_refused() {
    let Some((_db, cluster)) = cluster().await else {
        return;
    };
    let first = register(&cluster, 1).await;
    assert2::assert!(let Err(ClusterError::NodeIdTaken { node, listeners, remaining_ms }) =
            cluster.register_broker(&registration(1), &LONG).await
    );
    check!(node == BrokerId(1));
    check!(listeners == "PLAINTEXT://127.0.0.1:9001");
    check!(remaining_ms > 0);

    // Once the holder's lease lapsed, the id is free again, with a new epoch.
    expire_broker(&cluster, &first).await;
    let second = cluster
        .register_broker(&registration(1), &LONG)
        .await
        .expect("the lapsed id is free");
    check!(second.epoch > first.epoch);
    // The first registration is dead: it can neither renew nor write.
    let renewal = cluster.renew(&first, &[], &LONG).await.expect("renew");
    check!(!renewal.registered);
    assert2::assert!(let Err(ClusterError::Fenced(_)) = cluster.allocate_producer_ids(&first, 10).await);
}

#[tokio::test]
async fn the_same_incarnation_re_registers_with_a_new_epoch() {
    let Some((_db, cluster)) = cluster().await else {
        return;
    };
    let reg = registration(7);
    let first = cluster
        .register_broker(&reg, &LONG)
        .await
        .expect("register");
    let again = cluster
        .register_broker(&reg, &LONG)
        .await
        .expect("re-register");
    check!(again.epoch > first.epoch);
    let brokers = cluster.brokers().await.expect("brokers");
    check!(brokers.len() == 1);
    check!(brokers[0].live);
    check!(brokers[0].epoch == again.epoch);
}

#[tokio::test]
async fn a_lease_lapses_by_the_database_clock() {
    let Some((_db, cluster)) = cluster().await else {
        return;
    };
    let short = LeaseTiming {
        duration: Duration::from_millis(300),
        renew_interval: Duration::from_millis(100),
        safety_margin: Duration::from_millis(50),
    };
    let broker = cluster
        .register_broker(&registration(3), &short)
        .await
        .expect("register");
    let shard = ShardId::new(ShardKind::ConsumerOffsets, 0);
    let lease = cluster
        .acquire_shard(&broker, shard, &short)
        .await
        .expect("acquire")
        .expect("free");
    let renewal = cluster
        .renew(&broker, &[lease], &short)
        .await
        .expect("renew");
    check!(renewal.registered);
    check!(renewal.shards == vec![lease]);
    eventually("the broker's lease to lapse", async || {
        !cluster.brokers().await.expect("brokers")[0].live
    })
    .await;
    eventually("the shard's lease to lapse", async || {
        !cluster.shard_owners().await.expect("owners")[0].live
    })
    .await;
    let renewal = cluster
        .renew(&broker, &[lease], &short)
        .await
        .expect("renew");
    check!(!renewal.registered);
    check!(renewal.shards.is_empty());
    // A lapsed broker cannot acquire either.
    check!(
        cluster
            .acquire_shard(&broker, ShardId::new(ShardKind::ConsumerOffsets, 1), &short)
            .await
            .expect("acquire")
            .is_none()
    );
}

#[tokio::test]
async fn shard_leases_pass_between_brokers_with_growing_epochs() {
    let Some((_db, cluster)) = cluster().await else {
        return;
    };
    let one = register(&cluster, 1).await;
    let two = register(&cluster, 2).await;
    let shard = ShardId::new(ShardKind::TransactionState, 4);

    let first = cluster
        .acquire_shard(&one, shard, &LONG)
        .await
        .unwrap()
        .unwrap();
    check!(first.owner == BrokerId(1));
    check!(
        cluster
            .acquire_shard(&two, shard, &LONG)
            .await
            .unwrap()
            .is_none()
    );
    check!(
        cluster
            .acquire_shard(&one, shard, &LONG)
            .await
            .unwrap()
            .is_none()
    );

    // Renewal only renews what is still held.
    let other = ShardId::new(ShardKind::TransactionState, 5);
    let renewal = cluster.renew(&one, &[first], &LONG).await.unwrap();
    check!(renewal.shards == vec![first]);

    expire_shard(&cluster, &first).await;
    let second = cluster
        .acquire_shard(&two, shard, &LONG)
        .await
        .unwrap()
        .unwrap();
    check!(second.epoch > first.epoch);
    check!(
        cluster
            .renew(&one, &[first], &LONG)
            .await
            .unwrap()
            .shards
            .is_empty()
    );

    check!(cluster.release_shard(&second).await.unwrap());
    check!(!cluster.release_shard(&second).await.unwrap());
    let third = cluster
        .acquire_shard(&one, shard, &LONG)
        .await
        .unwrap()
        .unwrap();
    check!(third.epoch > second.epoch);

    let owners = cluster.shard_owners().await.unwrap();
    assert2::assert!(let Some(row) = owners.iter().find(|o| o.shard == shard));
    check!(row.owner == Some(BrokerId(1)));
    check!(row.epoch == third.epoch);
    check!(row.live);
    check!(owners.iter().all(|o| o.shard != other));

    // A clean shutdown releases everything at once.
    cluster.deregister_broker(&one).await.unwrap();
    let third_again = cluster
        .acquire_shard(&two, shard, &LONG)
        .await
        .unwrap()
        .unwrap();
    check!(third_again.epoch > third.epoch);
    check!(
        cluster
            .brokers()
            .await
            .unwrap()
            .iter()
            .any(|b| b.node == BrokerId(1) && !b.live)
    );
}

#[tokio::test]
async fn a_deposed_owner_cannot_write_state() {
    let Some((_db, cluster)) = cluster().await else {
        return;
    };
    let one = register(&cluster, 1).await;
    let two = register(&cluster, 2).await;
    let shard = ShardId::new(ShardKind::ConsumerOffsets, 7);
    let old = cluster
        .acquire_shard(&one, shard, &LONG)
        .await
        .unwrap()
        .unwrap();
    cluster
        .write_state(&old, &[rec("g1", Some("gen1")), rec("o1", Some("10"))])
        .await
        .expect("the owner writes");

    expire_shard(&cluster, &old).await;
    // Lapsed, not yet taken: still refused (the database's clock decides).
    assert2::assert!(let Err(ClusterError::Fenced(_)) = cluster.write_state(&old, &[rec("o1", Some("11"))]).await);
    let new = cluster
        .acquire_shard(&two, shard, &LONG)
        .await
        .unwrap()
        .unwrap();
    assert2::assert!(let Err(ClusterError::Fenced(_)) = cluster.write_state(&old, &[rec("o1", Some("12"))]).await);
    assert2::assert!(let Err(ClusterError::Fenced(_)) =
            cluster.write_pending(&old, (ProducerId(5), ProducerEpoch(0)), &[rec("o2", Some("1"))]).await
    );
    assert2::assert!(let Err(ClusterError::Fenced(_)) = cluster.complete_pending(&old, &marker(5, 0, true)).await);

    // The new owner loads what the old one wrote, and nothing after its fall.
    let loaded = cluster.read_state(shard).await.unwrap();
    check!(committed(&loaded) == vec![("g1".into(), "gen1".into()), ("o1".into(), "10".into())]);
    cluster
        .write_state(&new, &[rec("o1", Some("13"))])
        .await
        .unwrap();
    let loaded = cluster.read_state(shard).await.unwrap();
    check!(committed(&loaded) == vec![("g1".into(), "gen1".into()), ("o1".into(), "13".into())]);
}

#[tokio::test]
async fn state_is_compacted_by_key_and_replayed_in_write_order() {
    let Some((_db, cluster)) = cluster().await else {
        return;
    };
    let one = register(&cluster, 1).await;
    let shard = ShardId::new(ShardKind::ConsumerOffsets, 0);
    let lease = cluster
        .acquire_shard(&one, shard, &LONG)
        .await
        .unwrap()
        .unwrap();
    cluster
        .write_state(
            &lease,
            &[
                rec("a", Some("1")),
                rec("b", Some("1")),
                rec("c", Some("1")),
            ],
        )
        .await
        .unwrap();
    cluster
        .write_state(
            &lease,
            &[rec("a", Some("2")), rec("b", None), rec("a", Some("3"))],
        )
        .await
        .unwrap();
    let loaded = cluster.read_state(shard).await.unwrap();
    check!(committed(&loaded) == vec![("c".into(), "1".into()), ("a".into(), "3".into())]);
    // Other shards and kinds are separate.
    check!(
        cluster
            .read_state(ShardId::new(ShardKind::ConsumerOffsets, 1))
            .await
            .unwrap()
            .is_empty()
    );
    check!(
        cluster
            .read_state(ShardId::new(ShardKind::TransactionState, 0))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn transactional_records_wait_for_their_marker() {
    let Some((_db, cluster)) = cluster().await else {
        return;
    };
    let one = register(&cluster, 1).await;
    let shard = ShardId::new(ShardKind::ConsumerOffsets, 3);
    let lease = cluster
        .acquire_shard(&one, shard, &LONG)
        .await
        .unwrap()
        .unwrap();
    cluster
        .write_state(&lease, &[rec("o1", Some("5")), rec("o2", Some("5"))])
        .await
        .unwrap();
    let committer = (ProducerId(100), ProducerEpoch(2));
    let aborter = (ProducerId(200), ProducerEpoch(0));
    cluster
        .write_pending(&lease, committer, &[rec("o1", Some("9")), rec("o2", None)])
        .await
        .unwrap();
    cluster
        .write_pending(&lease, aborter, &[rec("o3", Some("1"))])
        .await
        .unwrap();

    let loaded = cluster.read_state(shard).await.unwrap();
    check!(committed(&loaded) == vec![("o1".into(), "5".into()), ("o2".into(), "5".into())]);
    let pending: Vec<_> = loaded
        .iter()
        .filter_map(|e| match e {
            StoredEntry::Pending {
                producer,
                epoch,
                key,
                value,
                ..
            } => Some((producer.0, epoch.0, key.clone(), value.clone())),
            StoredEntry::Committed { .. } => None,
        })
        .collect();
    check!(
        pending
            == vec![
                (100, 2, b"o1".to_vec(), Some(b"9".to_vec())),
                (100, 2, b"o2".to_vec(), None),
                (200, 0, b"o3".to_vec(), Some(b"1".to_vec())),
            ]
    );

    check!(
        cluster
            .complete_pending(&lease, &marker(100, 2, true))
            .await
            .unwrap()
            == 2
    );
    check!(
        cluster
            .complete_pending(&lease, &marker(200, 0, false))
            .await
            .unwrap()
            == 1
    );
    let loaded = cluster.read_state(shard).await.unwrap();
    check!(committed(&loaded) == vec![("o1".into(), "9".into())]);
}

fn marker(producer: i64, epoch: i16, commit: bool) -> PendingMarker {
    PendingMarker {
        producer: ProducerId(producer),
        epoch: ProducerEpoch(epoch),
        coordinator_epoch: 0,
        commit,
    }
}

#[tokio::test]
async fn write_order_numbers_follow_the_batch_and_a_later_write_beats_a_committed_transaction() {
    let Some((_db, cluster)) = cluster().await else {
        return;
    };
    let one = register(&cluster, 1).await;
    let shard = ShardId::new(ShardKind::ConsumerOffsets, 4);
    let lease = cluster
        .acquire_shard(&one, shard, &LONG)
        .await
        .unwrap()
        .unwrap();
    let producer = (ProducerId(7), ProducerEpoch(1));
    let txn = cluster
        .write_pending(
            &lease,
            producer,
            &[rec("a", Some("txn")), rec("b", Some("txn"))],
        )
        .await
        .unwrap();
    // A regular commit of `a` after the transactional one: it wins when the
    // transaction commits, as the later record of the log would.
    let first = cluster
        .write_state(
            &lease,
            &[
                rec("x", Some("1")),
                rec("a", Some("plain")),
                rec("x", Some("2")),
            ],
        )
        .await
        .unwrap();
    check!(first > txn);
    cluster
        .complete_pending(&lease, &marker(7, 1, true))
        .await
        .unwrap();
    let loaded = cluster.read_state(shard).await.unwrap();
    let seqs: Vec<(String, i64)> = loaded
        .iter()
        .filter_map(|e| match e {
            StoredEntry::Committed { seq, key, .. } => {
                Some((String::from_utf8_lossy(key).into_owned(), *seq))
            }
            StoredEntry::Pending { .. } => None,
        })
        .collect();
    check!(
        seqs == vec![
            ("b".into(), txn + 1),
            ("a".into(), first + 1),
            ("x".into(), first + 2)
        ]
    );
    check!(
        committed(&loaded)
            == vec![
                ("b".into(), "txn".into()),
                ("a".into(), "plain".into()),
                ("x".into(), "2".into())
            ]
    );
}

#[tokio::test]
async fn zombie_producers_and_old_coordinators_are_fenced() {
    let Some((_db, cluster)) = cluster().await else {
        return;
    };
    let one = register(&cluster, 1).await;
    let shard = ShardId::new(ShardKind::ConsumerOffsets, 5);
    let lease = cluster
        .acquire_shard(&one, shard, &LONG)
        .await
        .unwrap()
        .unwrap();
    cluster
        .write_pending(
            &lease,
            (ProducerId(9), ProducerEpoch(3)),
            &[rec("a", Some("3"))],
        )
        .await
        .unwrap();
    // The producer's older epoch is a zombie.
    assert2::assert!(let Err(ClusterError::ProducerFenced { .. }) = cluster
        .write_pending(&lease, (ProducerId(9), ProducerEpoch(2)), &[rec("a", Some("2"))])
        .await);
    // An abort at a bumped epoch, by coordinator epoch 5, ends it.
    let abort = PendingMarker {
        producer: ProducerId(9),
        epoch: ProducerEpoch(4),
        coordinator_epoch: 5,
        commit: false,
    };
    check!(cluster.complete_pending(&lease, &abort).await.unwrap() == 1);
    // A marker of the old coordinator, or of the fenced epoch, changes nothing.
    let stale_coordinator = PendingMarker {
        coordinator_epoch: 4,
        epoch: ProducerEpoch(4),
        ..abort
    };
    assert2::assert!(let Err(ClusterError::CoordinatorFenced { .. }) =
        cluster.complete_pending(&lease, &stale_coordinator).await);
    assert2::assert!(let Err(ClusterError::ProducerFenced { .. }) =
        cluster.complete_pending(&lease, &marker(9, 3, true)).await);
    assert2::assert!(let Err(ClusterError::ProducerFenced { .. }) = cluster
        .write_pending(&lease, (ProducerId(9), ProducerEpoch(3)), &[rec("a", Some("3"))])
        .await);
    check!(cluster.read_state(shard).await.unwrap().is_empty());
}

#[tokio::test]
async fn shards_are_acquired_in_one_round_trip_when_free() {
    let Some((_db, cluster)) = cluster().await else {
        return;
    };
    let one = register(&cluster, 1).await;
    let two = register(&cluster, 2).await;
    let shards: Vec<ShardId> = (0..4)
        .map(|p| ShardId::new(ShardKind::TransactionState, p))
        .collect();
    let taken = cluster
        .acquire_shard(&two, shards[2], &LONG)
        .await
        .unwrap()
        .unwrap();
    let got = cluster.acquire_shards(&one, &shards, &LONG).await.unwrap();
    let got_shards: Vec<ShardId> = got.iter().map(|l| l.shard).collect();
    check!(got_shards == vec![shards[0], shards[1], shards[3]]);
    check!(got.iter().all(|l| l.owner == BrokerId(1) && l.epoch.0 == 1));
    expire_shard(&cluster, &taken).await;
    let again = cluster.acquire_shards(&one, &shards, &LONG).await.unwrap();
    check!(again.len() == 1);
    check!(again[0].shard == shards[2]);
    check!(again[0].epoch.0 == 2);
}

#[tokio::test]
async fn topics_and_configs_are_shared_with_a_version() {
    let Some((_db, cluster)) = cluster().await else {
        return;
    };
    let v0 = cluster.metadata_version().await.unwrap();
    let topic = TopicRecord {
        name: "orders".into(),
        id: uuid::Uuid::new_v4(),
        partitions: vec![BrokerId(1), BrokerId(2), BrokerId(3)],
        configs: BTreeMap::from([("retention.ms".to_owned(), "1000".to_owned())]),
    };
    let v1 = cluster.create_topic(&topic).await.unwrap();
    check!(v1 > v0);
    assert2::assert!(let Err(ClusterError::TopicExists(name)) = cluster.create_topic(&topic).await);
    check!(name == "orders");

    let snapshot = cluster.load_metadata().await.unwrap();
    check!(snapshot.version == v1);
    check!(snapshot.topics.get("orders") == Some(&topic));

    let v2 = cluster
        .add_partitions("orders", 3, &[BrokerId(2)])
        .await
        .unwrap();
    check!(v2 > v1);
    assert2::assert!(let Err(ClusterError::Invalid(_)) = cluster.add_partitions("orders", 3, &[BrokerId(2)]).await);
    let configs = BTreeMap::from([("cleanup.policy".to_owned(), "compact".to_owned())]);
    let v3 = cluster.set_topic_configs("orders", &configs).await.unwrap();
    let v4 = cluster
        .set_broker_configs(
            "",
            &BTreeMap::from([("log.retention.ms".to_owned(), "5".to_owned())]),
        )
        .await
        .unwrap();
    check!(v4 > v3 && v3 > v2);
    let snapshot = cluster.load_metadata().await.unwrap();
    assert2::assert!(let Some(orders) = snapshot.topics.get("orders"));
    check!(orders.partitions == vec![BrokerId(1), BrokerId(2), BrokerId(3), BrokerId(2)]);
    check!(orders.configs == configs);
    check!(snapshot.broker_configs[""]["log.retention.ms"] == "5");

    let (id, v5) = cluster.delete_topic("orders").await.unwrap();
    check!(id == topic.id);
    check!(v5 > v4);
    check!(cluster.load_metadata().await.unwrap().topics.is_empty());
    assert2::assert!(let Err(ClusterError::UnknownTopic(_)) = cluster.delete_topic("orders").await);
    assert2::assert!(let Err(ClusterError::UnknownTopic(_)) = cluster.set_topic_configs("orders", &configs).await);
}

#[tokio::test]
async fn producer_id_blocks_never_overlap() {
    let Some((_db, cluster)) = cluster().await else {
        return;
    };
    let brokers = [
        register(&cluster, 1).await,
        register(&cluster, 2).await,
        register(&cluster, 3).await,
    ];
    let mut tasks = Vec::new();
    for broker in brokers {
        for _ in 0..10 {
            let cluster = cluster.clone();
            tasks.push(tokio::spawn(async move {
                cluster
                    .allocate_producer_ids(&broker, 1000)
                    .await
                    .expect("allocate")
            }));
        }
    }
    let mut blocks = Vec::new();
    for task in tasks {
        blocks.push(task.await.unwrap());
    }
    blocks.sort_by_key(|b| b.start);
    check!(blocks.first().map(|b| b.start) == Some(0));
    for pair in blocks.windows(2) {
        check!(
            pair[0].end == pair[1].start,
            "blocks {pair:?} are dense and disjoint"
        );
    }
    assert2::assert!(let Err(ClusterError::Invalid(_)) = cluster.allocate_producer_ids(&brokers[0], 0).await);
}

#[tokio::test]
async fn event_logs_hand_out_dense_offsets_under_a_fence() {
    let Some((_db, cluster)) = cluster().await else {
        return;
    };
    let one = register(&cluster, 1).await;
    let fence = Fence::Broker(one);
    let mut tasks = Vec::new();
    for i in 0..8u8 {
        let cluster = cluster.clone();
        tasks.push(tokio::spawn(async move {
            cluster
                .append_events(
                    &fence,
                    2,
                    &[
                        NewEvent {
                            key: None,
                            value: Some(vec![i]),
                        },
                        NewEvent {
                            key: Some(vec![i]),
                            value: None,
                        },
                    ],
                )
                .await
                .expect("append")
        }));
    }
    let mut offsets = Vec::new();
    for task in tasks {
        let got = task.await.unwrap();
        check!(got.len() == 2);
        check!(got[1] == got[0] + 1);
        offsets.extend(got);
    }
    offsets.sort_unstable();
    check!(offsets == (0..16).collect::<Vec<i64>>());
    let events = cluster.read_events(2, 5, 100).await.unwrap();
    check!(events.iter().map(|e| e.offset).collect::<Vec<_>>() == (5..16).collect::<Vec<i64>>());
    check!(cluster.read_events(3, 0, 100).await.unwrap().is_empty());

    expire_broker(&cluster, &one).await;
    assert2::assert!(let Err(ClusterError::Fenced(_)) = cluster.append_events(&fence, 2, &[NewEvent::default()]).await);
    check!(cluster.read_events(2, 16, 10).await.unwrap().is_empty());
}

#[tokio::test]
async fn event_groups_span_shards_in_one_transaction_and_announce_themselves() {
    let Some((_db, cluster)) = cluster().await else {
        return;
    };
    let one = register(&cluster, 1).await;
    let fence = Fence::Broker(one);
    let heard = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Option<Vec<i32>>>::new()));
    let hearing = std::sync::Arc::clone(&heard);
    let watcher = cluster.watch_event_appends(std::sync::Arc::new(move |shards| {
        hearing.lock().unwrap().push(shards);
    }));
    eventually("the watcher listens", async || {
        heard.lock().unwrap().contains(&None)
    })
    .await;

    let event = |value: &[u8]| NewEvent {
        key: Some(b"k".to_vec()),
        value: Some(value.to_vec()),
    };
    let group = [
        (3, event(b"a")),
        (1, event(b"b")),
        (
            3,
            NewEvent {
                key: Some(b"k".to_vec()),
                value: None,
            },
        ),
    ];
    check!(cluster.append_event_group(&fence, &group).await.unwrap() == vec![0, 0, 1]);
    check!(
        cluster
            .append_event_group(&fence, &[(1, event(b"c"))])
            .await
            .unwrap()
            == vec![1]
    );
    check!(
        cluster
            .append_event_group(&fence, &[])
            .await
            .unwrap()
            .is_empty()
    );
    check!(cluster.event_log_heads(4).await.unwrap() == vec![0, 2, 0, 2]);
    check!(cluster.event_log_heads(2).await.unwrap() == vec![0, 2]);
    eventually("both appends announced", async || {
        let heard = heard.lock().unwrap();
        heard.contains(&Some(vec![1, 3])) && heard.contains(&Some(vec![1]))
    })
    .await;

    // The first opener fixes the shard count.
    check!(cluster.event_log_partitions("log", 3).await.unwrap() == 3);
    check!(cluster.event_log_partitions("log", 50).await.unwrap() == 3);
    check!(cluster.event_log_partitions("other", 50).await.unwrap() == 50);
    assert2::assert!(let Err(ClusterError::Invalid(_)) = cluster.event_log_partitions("none", 0).await);

    // A page per shard, each bounded, in offset order.
    let page = cluster
        .read_event_pages(&[(3, 0), (1, 1), (0, 0)], 1)
        .await
        .unwrap();
    let seen: Vec<(i32, i64, Option<Vec<u8>>)> = page
        .into_iter()
        .map(|(s, e)| (s, e.offset, e.value))
        .collect();
    check!(seen == vec![(1, 1, Some(b"c".to_vec())), (3, 0, Some(b"a".to_vec()))]);
    let page = cluster.read_event_pages(&[(3, 1)], 100).await.unwrap();
    check!(page.len() == 1);
    check!(page[0].1.value.is_none() && page[0].1.key.as_deref() == Some(&b"k"[..]));
    assert2::assert!(let Err(ClusterError::Invalid(_)) = cluster.read_event_pages(&[(3, 0)], 0).await);

    // Concurrent groups over the same shards in opposite orders neither
    // deadlock nor share an offset.
    let mut tasks = Vec::new();
    for i in 0..8u8 {
        let cluster = cluster.clone();
        let order = if i % 2 == 0 { [5, 6] } else { [6, 5] };
        tasks.push(tokio::spawn(async move {
            let group: Vec<_> = order.iter().map(|&s| (s, event(&[i]))).collect();
            cluster
                .append_event_group(&fence, &group)
                .await
                .expect("append")
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    for shard in [5, 6] {
        let events = cluster.read_event_pages(&[(shard, 0)], 100).await.unwrap();
        check!(
            events.iter().map(|(_, e)| e.offset).collect::<Vec<_>>()
                == (0..8).collect::<Vec<i64>>()
        );
    }

    // A lapsed registration appends nothing, in any shard.
    expire_broker(&cluster, &one).await;
    assert2::assert!(let Err(ClusterError::Fenced(_)) = cluster.append_event_group(&fence, &[(0, event(b"x")), (1, event(b"y"))]).await);
    check!(cluster.event_log_heads(4).await.unwrap() == vec![0, 2, 0, 2]);
    watcher.abort();
}

#[tokio::test]
async fn acls_and_scram_credentials_are_shared_and_bump_the_metadata_version() {
    use krabka_cluster::security::ScramRow;
    let Some((_db, cluster)) = cluster().await else {
        return;
    };
    let start = cluster.metadata_version().await.unwrap();
    let a = "{\"binding\":\"a\"}".to_owned();
    let b = "{\"binding\":\"b\"}".to_owned();
    let v1 = cluster.add_acls(&[a.clone(), b.clone()]).await.unwrap();
    check!(v1 > start);
    // Adding one already stored changes nothing but the version.
    let v2 = cluster.add_acls(std::slice::from_ref(&a)).await.unwrap();
    check!(v2 > v1);
    let mut stored = cluster.acls().await.unwrap();
    stored.sort();
    check!(stored == vec![a.clone(), b.clone()]);
    cluster.remove_acls(std::slice::from_ref(&a)).await.unwrap();
    check!(cluster.acls().await.unwrap() == vec![b.clone()]);

    let row = |user: &str, mechanism: &str, credential: &str| ScramRow {
        user: user.to_owned(),
        mechanism: mechanism.to_owned(),
        credential: credential.to_owned(),
    };
    cluster
        .apply_scram(
            &[
                row("alice", "SCRAM-SHA-256", "c1"),
                row("alice", "SCRAM-SHA-512", "c2"),
            ],
            &[],
        )
        .await
        .unwrap();
    // An upsert replaces, a deletion removes one mechanism, in one change.
    let v3 = cluster
        .apply_scram(
            &[row("alice", "SCRAM-SHA-256", "c3")],
            &[("alice".to_owned(), "SCRAM-SHA-512".to_owned())],
        )
        .await
        .unwrap();
    check!(cluster.scram_credentials().await.unwrap() == vec![row("alice", "SCRAM-SHA-256", "c3")]);
    let snapshot = cluster.load_metadata().await.unwrap();
    check!(snapshot.version == v3);
    check!(snapshot.acls.into_iter().collect::<Vec<_>>() == vec![b]);
    check!(
        snapshot.scram.into_iter().collect::<Vec<_>>()
            == vec![(
                ("alice".to_owned(), "SCRAM-SHA-256".to_owned()),
                "c3".to_owned()
            )]
    );
}
