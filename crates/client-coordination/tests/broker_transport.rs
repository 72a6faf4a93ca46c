//! `BrokerTransport` against the real `krabka` binary: topic creation,
//! registrations as plain appends, read_committed reads of one role's
//! records, the guarded pair (InitProducerId mints the epoch and fences the
//! holder before it; lease writes are transactions under it), the
//! application's `FencedProducer`, and `describe` in one request.
//!
//! Each test starts its own broker on a free 127.0.0.1 port with a temporary
//! data directory (`krabka-test-support`). The binary comes from
//! `KRABKA_BIN` (set by the test command) or `target/release/krabka`; when
//! neither exists the test says so on stderr and returns, except under CI,
//! where it fails.

use std::time::Duration;

use assert2::{assert, check};
use krabka_client::{
    ApiKey, Client, ClientConfig, ConsumerConfig, IsolationLevel, NewTopic, PartitionFetch,
    ProducerRecord,
};
use krabka_client_coordination::{
    CoordinationError, CoordinationRecord, CoordinationTransport, FencingToken, MemberId, Role,
    Timing,
    broker::{BrokerTransport, BrokerTransportConfig},
    succession,
};
use krabka_test_support::KrabkaProcess;

/// The lease of these tests; long, so no timeout interferes.
const LEASE: Duration = Duration::from_secs(10);

/// The broker under test, with this file's conveniences on top.
struct Broker(KrabkaProcess);

impl Broker {
    async fn start() -> Option<Self> {
        KrabkaProcess::start().await.map(Self)
    }

    async fn client(&self) -> Client {
        Client::connect(&[self.0.addr()], ClientConfig::default())
            .await
            .unwrap()
    }

    /// `kill -9` and a start on the same port and data.
    async fn crash_and_restart(&mut self) {
        self.0.crash_and_restart().await;
    }

    /// A transport on its own client, as another process would have.
    async fn transport(&self, partitions: i32) -> BrokerTransport {
        BrokerTransport::new(
            self.client().await,
            BrokerTransportConfig {
                partitions,
                replication_factor: 1,
                lease: LEASE,
                ..BrokerTransportConfig::default()
            },
        )
    }
}

fn members(records: &krabka_client_coordination::RoleRecords) -> Vec<String> {
    records
        .iter()
        .map(|(_, _, record)| match record {
            CoordinationRecord::Registration(r) => r.member.to_string(),
            CoordinationRecord::Lease(l) => format!("lease:{}", l.member),
        })
        .collect()
}

#[tokio::test]
async fn registrations_are_appended_and_read_back_per_role() {
    let Some(broker) = Broker::start().await else {
        return;
    };
    // One partition, so both roles share it and the reader must filter.
    let transport = broker.transport(1).await;
    let controller = Role::new("controller").unwrap();
    let compactor = Role::new("compactor").unwrap();
    check!(
        transport
            .read_role_records(&controller)
            .await
            .unwrap()
            .is_empty()
    );

    for (role, member) in [
        (&controller, "node-1"),
        (&compactor, "node-9"),
        (&controller, "node-2"),
        (&controller, "node-3"),
        (&controller, "node-1"),
    ] {
        transport
            .register(role, &MemberId::new(member).unwrap())
            .await
            .unwrap();
    }

    // node-1's first registration is superseded by its second, as compaction
    // would do; the transport keeps only the latest one.
    let records = transport.read_role_records(&controller).await.unwrap();
    check!(members(&records) == ["node-2", "node-3", "node-1"]);
    let offsets: Vec<i64> = records.iter().map(|(offset, _, _)| *offset).collect();
    check!(offsets == [2, 3, 4]);
    check!(records.iter().all(|(_, key, _)| *key.role() == controller));
    // node-1 registered again, so it stands at the tail.
    let line: Vec<String> = succession::line(&records)
        .into_iter()
        .map(|c| c.member.to_string())
        .collect();
    check!(line == ["node-2", "node-3", "node-1"]);

    let other = transport.read_role_records(&compactor).await.unwrap();
    check!(members(&other) == ["node-9"]);
    check!(other[0].0 == 1);

    // A second transport (another process) finds the topic and the same records.
    let again = broker.transport(1).await;
    check!(again.read_role_records(&controller).await.unwrap() == records);

    // A later read continues where the last one stopped and sees new records.
    transport
        .register(&controller, &MemberId::new("node-2").unwrap())
        .await
        .unwrap();
    let later = transport.read_role_records(&controller).await.unwrap();
    check!(members(&later) == ["node-3", "node-1", "node-2"]);
    check!(again.read_role_records(&controller).await.unwrap() == later);
}

#[tokio::test]
async fn a_transport_hands_out_no_producer_for_an_epoch_it_never_minted() {
    let Some(broker) = Broker::start().await else {
        return;
    };
    let transport = broker.transport(3).await;
    let role = Role::new("controller").unwrap();
    let outcome = transport.producer(&role, FencingToken::new(1, 0).unwrap());
    assert!(let Err(CoordinationError::NotHeld { .. }) = outcome);
    let partition = transport.partition_of(&role).await.unwrap();
    check!((0..3).contains(&partition));
}

fn lease_for(member: &str, token: FencingToken) -> krabka_client_coordination::Lease {
    let timing = Timing {
        lease: LEASE,
        ..Timing::default()
    };
    succession::grant(
        &MemberId::new(member).unwrap(),
        token,
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
            .try_into()
            .unwrap(),
        &timing,
    )
}

/// The values of partition 0 of `topic` a read_committed consumer sees.
async fn committed_values(admin: &Client, topic: &str) -> Vec<bytes::Bytes> {
    let fetched = admin
        .fetch(
            &[PartitionFetch {
                topic: topic.into(),
                partition: 0,
                offset: 0,
            }],
            &ConsumerConfig {
                isolation: IsolationLevel::ReadCommitted,
                max_wait: Duration::from_millis(100),
                min_bytes: 0,
                ..ConsumerConfig::default()
            },
        )
        .await
        .unwrap()
        .pop()
        .unwrap()
        .unwrap();
    fetched
        .records
        .iter()
        .filter_map(|r| r.value.clone())
        .collect()
}

fn leases(records: &krabka_client_coordination::RoleRecords) -> Vec<(String, FencingToken)> {
    records
        .iter()
        .filter_map(|(_, _, record)| match record {
            CoordinationRecord::Lease(lease) => Some((lease.member.to_string(), lease.token)),
            CoordinationRecord::Registration(_) => None,
        })
        .collect()
}

/// The guarded pair against the broker's transaction coordinator: the
/// second member's InitProducerId mints a later token, and from then on the
/// first member's lease writes and application writes are refused as fenced,
/// while the second member's go through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_epoch_fences_the_earlier_holder_at_the_broker() {
    let Some(broker) = Broker::start().await else {
        return;
    };
    let role = Role::new("controller").unwrap();
    let first = broker.transport(1).await;
    let second = broker.transport(1).await;
    let observer = broker.transport(1).await;
    let admin = broker.client().await;
    admin
        .create_topic(&NewTopic::new("events", 1), Duration::from_secs(10))
        .await
        .unwrap();
    check!(observer.describe(&role).await.unwrap() == None);

    let a = first.acquire_epoch(&role).await.unwrap();
    first
        .write_lease(&role, a, &lease_for("node-1", a))
        .await
        .unwrap();
    check!(observer.describe(&role).await.unwrap() == Some(a));
    // The lease travels as the transaction timeout.
    let described = admin.describe_transactions(&[role.as_str()]).await.unwrap();
    check!(described[0].timeout_ms == 10_000);
    let a_writes = first.producer(&role, a).unwrap();
    a_writes
        .send_transaction(vec![("events", 0, vec![ProducerRecord::value("a-1")])])
        .await
        .unwrap();

    let b = second.acquire_epoch(&role).await.unwrap();
    check!(b > a);
    check!(observer.describe(&role).await.unwrap() == Some(b));

    let refused = first
        .write_lease(&role, a, &lease_for("node-1", a))
        .await
        .unwrap_err();
    check!(refused.is_fenced(), "{refused}");
    let refused = a_writes
        .send_transaction(vec![("events", 0, vec![ProducerRecord::value("a-2")])])
        .await
        .unwrap_err();
    check!(refused.is_fenced(), "{refused}");
    // A token this transport never minted is not a fence but a misuse.
    let foreign = first
        .write_lease(&role, b, &lease_for("node-1", b))
        .await
        .unwrap_err();
    assert!(let CoordinationError::NotHeld { .. } = foreign);

    second
        .write_lease(&role, b, &lease_for("node-2", b))
        .await
        .unwrap();
    second
        .producer(&role, b)
        .unwrap()
        .send_transaction(vec![("events", 0, vec![ProducerRecord::value("b-1")])])
        .await
        .unwrap();

    // Only the committed leases are read back: node-1's, then node-2's.
    let records = observer.read_role_records(&role).await.unwrap();
    check!(leases(&records) == [("node-1".to_owned(), a), ("node-2".to_owned(), b)]);
    // And of the application's writes, a-2 never became visible.
    let values = committed_values(&admin, "events").await;
    check!(values == ["a-1", "b-1"]);
}

/// What the broker enforces survives a `kill -9`: the holder keeps writing
/// under its epoch after a restart, a later holder still gets a higher
/// epoch, and the deposed one stays fenced across the next restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_survives_broker_crashes() {
    let Some(mut broker) = Broker::start().await else {
        return;
    };
    let role = Role::new("scheduler").unwrap();
    let first = broker.transport(1).await;
    let second = broker.transport(1).await;
    let admin = broker.client().await;
    admin
        .create_topic(&NewTopic::new("jobs", 1), Duration::from_secs(10))
        .await
        .unwrap();
    let a = first.acquire_epoch(&role).await.unwrap();
    first
        .write_lease(&role, a, &lease_for("node-1", a))
        .await
        .unwrap();
    let a_writes = first.producer(&role, a).unwrap();
    a_writes
        .send_transaction(vec![("jobs", 0, vec![ProducerRecord::value("a-1")])])
        .await
        .unwrap();

    broker.crash_and_restart().await;
    // The holder carries on under the same token.
    first
        .write_lease(&role, a, &lease_for("node-1", a))
        .await
        .unwrap();
    a_writes
        .send_transaction(vec![("jobs", 0, vec![ProducerRecord::value("a-2")])])
        .await
        .unwrap();
    let observer = broker.transport(1).await;
    check!(observer.describe(&role).await.unwrap() == Some(a));

    let b = second.acquire_epoch(&role).await.unwrap();
    check!(b > a);
    second
        .write_lease(&role, b, &lease_for("node-2", b))
        .await
        .unwrap();

    broker.crash_and_restart().await;
    check!(observer.describe(&role).await.unwrap() == Some(b));
    let refused = a_writes
        .send_transaction(vec![("jobs", 0, vec![ProducerRecord::value("a-3")])])
        .await
        .unwrap_err();
    check!(refused.is_fenced(), "{refused}");
    let refused = first
        .write_lease(&role, a, &lease_for("node-1", a))
        .await
        .unwrap_err();
    check!(refused.is_fenced(), "{refused}");
    second
        .producer(&role, b)
        .unwrap()
        .send_transaction(vec![("jobs", 0, vec![ProducerRecord::value("b-1")])])
        .await
        .unwrap();

    let records = observer.read_role_records(&role).await.unwrap();
    // One lease record per member: node-1's latest (written after the
    // first restart), and node-2's.
    check!(leases(&records) == [("node-1".to_owned(), a), ("node-2".to_owned(), b)]);
    let values = committed_values(&admin, "jobs").await;
    check!(values == ["a-1", "a-2", "b-1"]);
}

/// A third party checks a writer's token with one request: no
/// FindCoordinator, no membership, one DescribeTransactions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_costs_one_request() {
    let Some(broker) = Broker::start().await else {
        return;
    };
    let role = Role::new("controller").unwrap();
    let holder = broker.transport(1).await;
    let token = holder.acquire_epoch(&role).await.unwrap();

    let third_party = broker.transport(1).await;
    let counts = third_party.client().request_counts();
    let before = counts.total();
    check!(third_party.describe(&role).await.unwrap() == Some(token));
    check!(counts.total() - before == 1);
    check!(counts.sent(ApiKey::DescribeTransactions) == 1);
    check!(counts.sent(ApiKey::FindCoordinator) == 0);

    // An unknown role is one request too, and no holder.
    let unknown = Role::new("nobody-holds-this").unwrap();
    check!(third_party.describe(&unknown).await.unwrap() == None);
    check!(counts.total() - before == 2);
    check!(counts.sent(ApiKey::FindCoordinator) == 0);
}
