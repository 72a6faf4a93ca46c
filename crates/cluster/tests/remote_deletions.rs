//! Pending remote deletions against a real PostgreSQL: recorded with the
//! topic's deletion in one transaction, claimed by one live broker at a
//! time, taken over from a dead or expired claim, released, removed.

mod support;

use {
    assert2::check,
    krabka_cluster::{
        BrokerLease, Cluster, ClusterError, remote_deletions::PendingRemoteDeletion,
        topics::TopicRecord,
    },
    krabka_ids::BrokerId,
    std::{
        collections::{BTreeMap, BTreeSet},
        time::Duration,
    },
    support::{cluster, eventually, expire_broker, register},
    uuid::Uuid,
};

/// Long enough that no claim expires during a test unless the test says so.
const CLAIM: Duration = Duration::from_secs(600);

async fn create(cluster: &Cluster, name: &str, partitions: usize) -> Uuid {
    let topic = TopicRecord {
        name: name.to_owned(),
        id: Uuid::new_v4(),
        partitions: vec![BrokerId(1); partitions],
        configs: BTreeMap::from([("diskless.enable".to_owned(), "true".to_owned())]),
    };
    cluster.create_topic(&topic).await.expect("create");
    topic.id
}

fn keys(entries: &[PendingRemoteDeletion]) -> Vec<(String, i32)> {
    entries
        .iter()
        .map(|e| (e.topic.clone(), e.partition))
        .collect()
}

async fn pending(cluster: &Cluster) -> Vec<PendingRemoteDeletion> {
    cluster.pending_remote_deletions().await.expect("pending")
}

async fn claim(cluster: &Cluster, broker: &BrokerLease, limit: i64) -> Vec<(String, i32)> {
    keys(
        &cluster
            .claim_remote_deletions(broker, limit, CLAIM)
            .await
            .expect("claim"),
    )
}

#[tokio::test]
async fn a_topic_deletion_records_its_partitions_in_the_same_transaction() {
    let Some((_db, cluster)) = cluster().await else {
        return;
    };
    let id = create(&cluster, "tiered", 3).await;
    create(&cluster, "plain", 2).await;
    let before = cluster.metadata_version().await.expect("version");

    let (deleted, version) = cluster
        .delete_topic_and_remote_data("tiered")
        .await
        .expect("delete");
    check!(deleted == id);
    check!(version > before);
    check!(
        !cluster
            .load_metadata()
            .await
            .unwrap()
            .topics
            .contains_key("tiered")
    );
    let entries = pending(&cluster).await;
    check!(
        keys(&entries)
            == vec![
                ("tiered".to_owned(), 0),
                ("tiered".to_owned(), 1),
                ("tiered".to_owned(), 2)
            ]
    );
    check!(
        entries
            .iter()
            .all(|e| e.topic_id == id && e.claimed_by.is_none() && e.claim_remaining_ms == 0)
    );
    check!(entries.iter().all(|e| e.added_ms > 0));

    // A deletion without remote data records nothing; an unknown topic
    // neither deletes nor records anything.
    cluster.delete_topic("plain").await.expect("delete");
    check!(pending(&cluster).await.len() == 3);
    assert2::assert!(let Err(ClusterError::UnknownTopic(_)) = cluster.delete_topic_and_remote_data("tiered").await);
    assert2::assert!(let Err(ClusterError::UnknownTopic(_)) = cluster.delete_topic_and_remote_data("never").await);
    check!(pending(&cluster).await.len() == 3);

    // A topic of the same name created since is another topic: its own
    // deletion adds its own entries beside the first one's.
    let again = create(&cluster, "tiered", 1).await;
    cluster
        .delete_topic_and_remote_data("tiered")
        .await
        .expect("delete");
    let entries = pending(&cluster).await;
    check!(entries.len() == 4);
    check!(entries.last().map(|e| (e.topic_id, e.partition)) == Some((again, 0)));
}

#[tokio::test]
async fn a_live_brokers_claim_holds_and_a_dead_or_expired_one_passes_on() {
    let Some((_db, cluster)) = cluster().await else {
        return;
    };
    let (one, two) = (register(&cluster, 1).await, register(&cluster, 2).await);
    create(&cluster, "first", 2).await;
    create(&cluster, "second", 2).await;
    cluster.delete_topic_and_remote_data("first").await.unwrap();
    cluster
        .delete_topic_and_remote_data("second")
        .await
        .unwrap();
    let first = |p: i32| ("first".to_owned(), p);
    let second = |p: i32| ("second".to_owned(), p);

    // Oldest first, at most the limit.
    check!(claim(&cluster, &one, 3).await == vec![first(0), first(1), second(0)]);
    // Broker 2 gets only what broker 1 does not hold.
    check!(claim(&cluster, &two, 10).await == vec![second(1)]);
    check!(
        claim(&cluster, &two, 10).await == vec![second(1)],
        "its own claim it renews"
    );
    let entries = pending(&cluster).await;
    let holders: Vec<Option<BrokerId>> = entries.iter().map(|e| e.claimed_by).collect();
    check!(
        holders
            == vec![
                Some(BrokerId(1)),
                Some(BrokerId(1)),
                Some(BrokerId(1)),
                Some(BrokerId(2))
            ]
    );
    check!(entries.iter().all(|e| e.claim_remaining_ms > 0));

    // A failure gives the claim up: the next broker to ask takes it.
    check!(
        cluster
            .release_remote_deletion(BrokerId(1), entries[0].topic_id, 0)
            .await
            .unwrap()
    );
    check!(
        !cluster
            .release_remote_deletion(BrokerId(2), entries[1].topic_id, 1)
            .await
            .unwrap(),
        "not its claim"
    );
    check!(claim(&cluster, &two, 10).await == vec![first(0), second(1)]);

    // Done: the entry goes, whoever holds it now.
    check!(
        cluster
            .remove_remote_deletion(entries[0].topic_id, 0)
            .await
            .unwrap()
    );
    check!(
        !cluster
            .remove_remote_deletion(entries[0].topic_id, 0)
            .await
            .unwrap()
    );
    check!(keys(&pending(&cluster).await) == vec![first(1), second(0), second(1)]);

    // Broker 1 dies: its claims pass to broker 2 although unexpired, and
    // broker 1 may no longer claim anything.
    expire_broker(&cluster, &one).await;
    check!(
        pending(&cluster)
            .await
            .iter()
            .all(|e| e.claimed_by != Some(BrokerId(1)))
    );
    check!(claim(&cluster, &two, 10).await == vec![first(1), second(0), second(1)]);
    assert2::assert!(let Err(ClusterError::Fenced(_)) = cluster.claim_remote_deletions(&one, 10, CLAIM).await);

    // A claim that expired passes on although its broker is live.
    let three = register(&cluster, 3).await;
    check!(claim(&cluster, &three, 10).await.is_empty());
    cluster
        .claim_remote_deletions(&two, 10, Duration::from_millis(50))
        .await
        .unwrap();
    eventually("broker 2's short claims to expire", async || {
        pending(&cluster)
            .await
            .iter()
            .all(|e| e.claimed_by.is_none())
    })
    .await;
    check!(claim(&cluster, &three, 10).await == vec![first(1), second(0), second(1)]);
    assert2::assert!(let Err(ClusterError::Invalid(_)) = cluster.claim_remote_deletions(&three, 0, CLAIM).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brokers_claiming_at_once_never_share_an_entry() {
    let Some((_db, cluster)) = cluster().await else {
        return;
    };
    create(&cluster, "wide", 64).await;
    cluster.delete_topic_and_remote_data("wide").await.unwrap();
    let mut brokers = Vec::new();
    for node in 1..=4 {
        brokers.push(register(&cluster, node).await);
    }
    let start = std::sync::Arc::new(tokio::sync::Barrier::new(brokers.len()));
    let mut tasks = Vec::new();
    for broker in brokers.clone() {
        let (cluster, start) = (cluster.clone(), std::sync::Arc::clone(&start));
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            cluster
                .claim_remote_deletions(&broker, 20, CLAIM)
                .await
                .expect("claim")
        }));
    }
    let mut sets = Vec::new();
    for task in tasks {
        let got = task.await.expect("task");
        sets.push(got.iter().map(|e| e.partition).collect::<BTreeSet<i32>>());
    }
    let union: BTreeSet<i32> = sets.iter().flatten().copied().collect();
    check!(
        sets.iter().map(BTreeSet::len).sum::<usize>() == union.len(),
        "no entry claimed twice: {sets:?}"
    );
    check!(!union.is_empty());
    // Whatever the race left unclaimed, one more round takes; the rest
    // stays with its claimants.
    let rest = claim(&cluster, &brokers[0], 64).await;
    let taken: BTreeSet<i32> = rest.iter().map(|(_, p)| *p).collect();
    check!(
        taken
            .iter()
            .all(|p| !union.contains(p) || sets[0].contains(p))
    );
    check!(taken.union(&union).count() == 64);
}
