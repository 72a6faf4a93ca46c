//! The non-transactional half of `BrokerTransport` against the real `krabka`
//! binary: topic creation, registrations as plain appends, read_committed
//! reads of one role's records.
//!
//! The lease half (InitProducerId, AddPartitionsToTxn, EndTxn) waits for the
//! broker's transaction coordinator, so it is not exercised here.
//!
//! Each test starts its own broker on a free 127.0.0.1 port with a temporary
//! data directory. The binary comes from `KRABKA_BIN` (set by the test
//! command) or `target/release/krabka`; when neither exists the test says so
//! on stderr and returns.

use assert2::{assert, check};
use krabka_client::{Client, ClientConfig};
use krabka_client_coordination::{
    CoordinationError, CoordinationRecord, CoordinationTransport, FencingToken, MemberId, Role,
    broker::{BrokerTransport, BrokerTransportConfig},
    succession,
};
use krabka_test_support::KrabkaProcess;

/// The broker under test, with this file's conveniences on top.
struct Broker(KrabkaProcess);

impl Broker {
    async fn start() -> Option<Self> {
        KrabkaProcess::start().await.map(Self)
    }

    async fn transport(&self, partitions: i32) -> BrokerTransport {
        let client = Client::connect(&[self.0.addr()], ClientConfig::default())
            .await
            .unwrap();
        BrokerTransport::new(
            client,
            BrokerTransportConfig {
                partitions,
                replication_factor: 1,
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
