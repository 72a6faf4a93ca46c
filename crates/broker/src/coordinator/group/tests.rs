//! State-machine tests: the coordinator driven by a manual clock over an
//! in-memory `__consumer_offsets`.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::delete_groups_request::DeleteGroupsRequest;
use kafka_protocol::messages::describe_groups_request::DescribeGroupsRequest;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::heartbeat_request::HeartbeatRequest;
use kafka_protocol::messages::join_group_request::{JoinGroupRequest, JoinGroupRequestProtocol};
use kafka_protocol::messages::join_group_response::JoinGroupResponse;
use kafka_protocol::messages::leave_group_request::{LeaveGroupRequest, MemberIdentity};
use kafka_protocol::messages::list_groups_request::ListGroupsRequest;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequest, OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::{SyncGroupRequest, SyncGroupRequestAssignment};
use kafka_protocol::messages::sync_group_response::SyncGroupResponse;
use kafka_protocol::messages::{ConsumerProtocolSubscription, GroupId, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};
use tokio::task::JoinHandle;

use super::records::{GroupMetadataValue, RecordKey};
use super::*;

const T0: i64 = 1_700_000_000_000;

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn code(e: ResponseError) -> i16 {
    e.code()
}

struct Harness {
    clock: Arc<ManualClock>,
    log: Arc<InMemoryGroupLog>,
    coord: Arc<GroupCoordinator>,
}

fn node() -> CoordinatorNode {
    CoordinatorNode {
        node_id: 1,
        host: "127.0.0.1".into(),
        port: 9092,
    }
}

async fn harness_with(config: GroupConfig) -> Harness {
    let clock = Arc::new(ManualClock::new(T0));
    let log = Arc::new(InMemoryGroupLog::new());
    let coord = GroupCoordinator::load(config, node(), clock.clone(), log.clone())
        .await
        .unwrap();
    Harness { clock, log, coord }
}

async fn harness() -> Harness {
    harness_with(GroupConfig::default()).await
}

impl Harness {
    /// A fresh coordinator over the same log, as after a broker restart.
    async fn restart(&self) -> Arc<GroupCoordinator> {
        GroupCoordinator::load(
            GroupConfig::default(),
            node(),
            self.clock.clone(),
            self.log.clone(),
        )
        .await
        .unwrap()
    }

    async fn advance(&self, ms: i64) {
        self.clock.advance(ms);
        self.coord.tick().await;
        settle().await;
    }

    fn group_records(&self, group: &str) -> Vec<GroupMetadataValue> {
        let p = self.coord.partition_for(group);
        self.log
            .records(p)
            .into_iter()
            .filter(|r| matches!(RecordKey::decode(&r.key), Ok(RecordKey::Group(k)) if k.group == group))
            .filter_map(|r| r.value.map(|v| GroupMetadataValue::decode(&v).unwrap()))
            .collect()
    }
}

/// Lets spawned request tasks run until they wait.
async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

fn ctx(version: i16) -> RequestContext {
    RequestContext::new(version, "client", "/127.0.0.1")
}

fn subscription(topics: &[&str]) -> Bytes {
    let sub =
        ConsumerProtocolSubscription::default().with_topics(topics.iter().map(|t| sb(t)).collect());
    let mut buf = BytesMut::new();
    bytes::BufMut::put_i16(&mut buf, 1);
    sub.encode(&mut buf, 1).unwrap();
    buf.freeze()
}

fn join_req(group: &str, member: &str, protocols: &[&str]) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_member_id(sb(member))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(30_000)
        .with_protocol_type(sb("consumer"))
        .with_protocols(
            protocols
                .iter()
                .map(|p| {
                    JoinGroupRequestProtocol::default()
                        .with_name(sb(p))
                        .with_metadata(subscription(&["t"]))
                })
                .collect(),
        )
}

fn spawn_join(h: &Harness, version: i16, req: JoinGroupRequest) -> JoinHandle<JoinGroupResponse> {
    let coord = h.coord.clone();
    tokio::spawn(async move { coord.join_group(&ctx(version), req).await })
}

fn spawn_sync(h: &Harness, req: SyncGroupRequest) -> JoinHandle<SyncGroupResponse> {
    let coord = h.coord.clone();
    tokio::spawn(async move { coord.sync_group(&ctx(5), req).await })
}

fn sync_req(
    group: &str,
    member: &str,
    generation: i32,
    assignments: &[(&str, &[u8])],
) -> SyncGroupRequest {
    SyncGroupRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_member_id(sb(member))
        .with_generation_id(generation)
        .with_assignments(
            assignments
                .iter()
                .map(|(m, a)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(sb(m))
                        .with_assignment(Bytes::copy_from_slice(a))
                })
                .collect(),
        )
}

async fn heartbeat(h: &Harness, group: &str, member: &str, generation: i32) -> i16 {
    h.coord
        .heartbeat(
            &ctx(4),
            HeartbeatRequest::default()
                .with_group_id(GroupId(sb(group)))
                .with_member_id(sb(member))
                .with_generation_id(generation),
        )
        .await
        .error_code
}

/// Advances the clock a second at a time until every join is answered
/// (the initial delay extends while members keep arriving).
async fn advance_until_joined(h: &Harness, joins: &[JoinHandle<JoinGroupResponse>]) {
    for _ in 0..60 {
        if joins.iter().all(|j| j.is_finished()) {
            return;
        }
        h.advance(1000).await;
    }
    panic!("joins still waiting after 60 s");
}

/// Gets a member id through the MEMBER_ID_REQUIRED round trip.
async fn member_id(h: &Harness, group: &str) -> String {
    let resp = h
        .coord
        .join_group(&ctx(5), join_req(group, "", &["range"]))
        .await;
    assert_eq!(resp.error_code, code(ResponseError::MemberIdRequired));
    assert!(!resp.member_id.is_empty());
    resp.member_id.as_str().to_owned()
}

/// Brings `n` members into a Stable group; returns their ids (leader first)
/// and the generation.
async fn stable_group(h: &Harness, group: &str, n: usize) -> (Vec<String>, i32) {
    let mut ids = Vec::new();
    let mut joins = Vec::new();
    for _ in 0..n {
        let id = member_id(h, group).await;
        joins.push(spawn_join(h, 5, join_req(group, &id, &["range"])));
        ids.push(id);
        settle().await;
    }
    advance_until_joined(h, &joins).await;
    let mut responses = Vec::new();
    for j in joins {
        responses.push(j.await.unwrap());
    }
    let generation = responses[0].generation_id;
    let leader = responses[0].leader.as_str().to_owned();
    ids.sort_by_key(|id| id != &leader);
    let assignments: Vec<(String, Vec<u8>)> = ids
        .iter()
        .map(|id| (id.clone(), id.as_bytes().to_vec()))
        .collect();
    let assignment_refs: Vec<(&str, &[u8])> = assignments
        .iter()
        .map(|(m, a)| (m.as_str(), a.as_slice()))
        .collect();
    let mut syncs = Vec::new();
    for id in ids.iter().skip(1) {
        syncs.push(spawn_sync(h, sync_req(group, id, generation, &[])));
    }
    settle().await;
    let leader_sync = h
        .coord
        .sync_group(
            &ctx(5),
            sync_req(group, &ids[0], generation, &assignment_refs),
        )
        .await;
    assert_eq!(leader_sync.error_code, 0);
    for s in syncs {
        assert_eq!(s.await.unwrap().error_code, 0);
    }
    (ids, generation)
}

fn state_of(h: &Harness, group: &str) -> Option<(GroupState, i32, usize)> {
    let state = h.coord.lock();
    state
        .groups
        .get(group)
        .map(|g| (g.state, g.generation, g.members.len()))
}

#[tokio::test]
async fn member_id_required_then_initial_delay_then_join() {
    let h = harness().await;
    let id = member_id(&h, "g").await;
    let join = spawn_join(&h, 5, join_req("g", &id, &["range"]));
    settle().await;
    assert!(!join.is_finished(), "the initial delay holds the join");
    h.advance(2999).await;
    assert!(!join.is_finished());
    h.advance(1).await;
    let resp = join.await.unwrap();
    assert_eq!(resp.error_code, 0);
    assert_eq!(resp.generation_id, 1);
    assert_eq!(resp.leader, resp.member_id);
    assert_eq!(
        resp.protocol_name.as_ref().map(|p| p.as_str()),
        Some("range")
    );
    assert_eq!(resp.members.len(), 1);
    assert_eq!(
        state_of(&h, "g"),
        Some((GroupState::CompletingRebalance, 1, 1))
    );
}

#[tokio::test]
async fn v3_join_skips_member_id_round_trip() {
    let h = harness().await;
    let join = spawn_join(&h, 3, join_req("g", "", &["range"]));
    settle().await;
    h.advance(3000).await;
    let resp = join.await.unwrap();
    assert_eq!(resp.error_code, 0);
    assert!(resp.member_id.as_str().starts_with("client-"));
}

#[tokio::test]
async fn initial_delay_extends_while_members_arrive() {
    let h = harness().await;
    let a = member_id(&h, "g").await;
    let ja = spawn_join(&h, 5, join_req("g", &a, &["range"]));
    settle().await;
    h.advance(2000).await;
    let b = member_id(&h, "g").await;
    let jb = spawn_join(&h, 5, join_req("g", &b, &["range"]));
    settle().await;
    h.advance(1000).await;
    assert!(
        !ja.is_finished(),
        "a member arrived during the delay: extended"
    );
    h.advance(3000).await;
    let (ra, rb) = (ja.await.unwrap(), jb.await.unwrap());
    assert_eq!((ra.generation_id, rb.generation_id), (1, 1));
    assert_eq!(ra.leader.as_str(), a);
    assert_eq!(ra.members.len(), 2);
    assert!(rb.members.is_empty(), "followers get no member list");
}

#[tokio::test]
async fn sync_hands_out_the_leaders_assignment_after_the_write() {
    let h = harness().await;
    let (ids, generation) = stable_group(&h, "g", 3).await;
    assert_eq!(state_of(&h, "g"), Some((GroupState::Stable, generation, 3)));
    let records = h.group_records("g");
    let last = records.last().unwrap();
    assert_eq!(last.generation, generation);
    assert_eq!(last.protocol.as_deref(), Some("range"));
    assert_eq!(last.leader.as_deref(), Some(ids[0].as_str()));
    assert_eq!(last.members.len(), 3);
    for m in &last.members {
        assert_eq!(m.assignment.as_ref(), m.member_id.as_bytes());
        assert_eq!(m.client_host, "/127.0.0.1");
    }
    // A sync in Stable returns the member's own assignment at once.
    let again = h
        .coord
        .sync_group(&ctx(5), sync_req("g", &ids[1], generation, &[]))
        .await;
    assert_eq!(again.assignment.as_ref(), ids[1].as_bytes());
    assert_eq!(
        again.protocol_name.as_ref().map(|p| p.as_str()),
        Some("range")
    );
}

#[tokio::test]
async fn sync_errors() {
    let h = harness().await;
    let (ids, generation) = stable_group(&h, "g", 1).await;
    let c = |r: SyncGroupResponse| r.error_code;
    assert_eq!(
        c(h.coord
            .sync_group(&ctx(5), sync_req("nope", &ids[0], generation, &[]))
            .await),
        code(ResponseError::UnknownMemberId)
    );
    assert_eq!(
        c(h.coord
            .sync_group(&ctx(5), sync_req("g", "stranger", generation, &[]))
            .await),
        code(ResponseError::UnknownMemberId)
    );
    assert_eq!(
        c(h.coord
            .sync_group(&ctx(5), sync_req("g", &ids[0], generation + 1, &[]))
            .await),
        code(ResponseError::IllegalGeneration)
    );
    let wrong_protocol =
        sync_req("g", &ids[0], generation, &[]).with_protocol_name(Some(sb("roundrobin")));
    assert_eq!(
        c(h.coord.sync_group(&ctx(5), wrong_protocol).await),
        code(ResponseError::InconsistentGroupProtocol)
    );
}

#[tokio::test]
async fn heartbeat_answers() {
    let h = harness().await;
    let (ids, generation) = stable_group(&h, "g", 2).await;
    assert_eq!(heartbeat(&h, "g", &ids[0], generation).await, 0);
    assert_eq!(
        heartbeat(&h, "nope", &ids[0], generation).await,
        code(ResponseError::UnknownMemberId)
    );
    assert_eq!(
        heartbeat(&h, "g", "stranger", generation).await,
        code(ResponseError::UnknownMemberId)
    );
    assert_eq!(
        heartbeat(&h, "g", &ids[0], generation - 1).await,
        code(ResponseError::IllegalGeneration)
    );
    // A newcomer starts a rebalance; existing members learn it by heartbeat.
    let c = member_id(&h, "g").await;
    let jc = spawn_join(&h, 5, join_req("g", &c, &["range"]));
    settle().await;
    assert_eq!(
        heartbeat(&h, "g", &ids[1], generation).await,
        code(ResponseError::RebalanceInProgress)
    );
    // Once everyone rejoined the rebalance completes without waiting.
    let j0 = spawn_join(&h, 5, join_req("g", &ids[0], &["range"]));
    let j1 = spawn_join(&h, 5, join_req("g", &ids[1], &["range"]));
    settle().await;
    let (r0, r1, rc) = (j0.await.unwrap(), j1.await.unwrap(), jc.await.unwrap());
    assert_eq!(r0.generation_id, generation + 1);
    assert_eq!(r1.generation_id, generation + 1);
    assert_eq!(rc.generation_id, generation + 1);
    assert_eq!(r0.members.len(), 3, "leader sees all three");
}

#[tokio::test]
async fn session_expiry_removes_the_member_and_rebalances() {
    let h = harness().await;
    let (ids, generation) = stable_group(&h, "g", 2).await;
    h.clock.advance(6000);
    assert_eq!(heartbeat(&h, "g", &ids[0], generation).await, 0);
    h.advance(4000).await; // ids[1] is now 10 s silent: expired
    assert_eq!(state_of(&h, "g").unwrap().0, GroupState::PreparingRebalance);
    assert_eq!(state_of(&h, "g").unwrap().2, 1);
    let resp = h
        .coord
        .join_group(&ctx(5), join_req("g", &ids[0], &["range"]))
        .await;
    assert_eq!(resp.generation_id, generation + 1);
    assert_eq!(resp.members.len(), 1);
}

#[tokio::test]
async fn rebalance_timeout_drops_members_that_do_not_rejoin() {
    let h = harness().await;
    let (ids, generation) = stable_group(&h, "g", 2).await;
    let j0 = spawn_join(&h, 5, join_req("g", &ids[0], &["roundrobin", "range"]));
    settle().await;
    assert!(!j0.is_finished());
    // ids[1] keeps heartbeating but never rejoins.
    for _ in 0..5 {
        assert_eq!(
            heartbeat(&h, "g", &ids[1], generation).await,
            code(ResponseError::RebalanceInProgress)
        );
        h.advance(5000).await;
    }
    h.advance(5000).await;
    let r0 = j0.await.unwrap();
    assert_eq!(r0.generation_id, generation + 1);
    assert_eq!(r0.members.len(), 1);
    assert_eq!(
        heartbeat(&h, "g", &ids[1], generation).await,
        code(ResponseError::UnknownMemberId)
    );
}

#[tokio::test]
async fn a_member_that_never_syncs_is_removed() {
    let h = harness().await;
    let a = member_id(&h, "g").await;
    let b = member_id(&h, "g").await;
    let ja = spawn_join(&h, 5, join_req("g", &a, &["range"]));
    let jb = spawn_join(&h, 5, join_req("g", &b, &["range"]));
    settle().await;
    h.advance(3000).await;
    h.advance(3000).await; // b arrived during the initial delay: extended once
    let generation = ja.await.unwrap().generation_id;
    jb.await.unwrap();
    let sa = h
        .coord
        .sync_group(
            &ctx(5),
            sync_req("g", &a, generation, &[(&a, b"x"), (&b, b"y")]),
        )
        .await;
    assert_eq!(sa.assignment.as_ref(), b"x");
    // b heartbeats but never syncs; the sync timeout (rebalance timeout) removes it.
    h.advance(9000).await;
    assert_eq!(heartbeat(&h, "g", &b, generation).await, 0);
    assert_eq!(heartbeat(&h, "g", &a, generation).await, 0);
    h.advance(9000).await;
    assert_eq!(heartbeat(&h, "g", &a, generation).await, 0);
    assert_eq!(heartbeat(&h, "g", &b, generation).await, 0);
    h.advance(9000).await;
    assert_eq!(heartbeat(&h, "g", &a, generation).await, 0);
    assert_eq!(heartbeat(&h, "g", &b, generation).await, 0);
    h.advance(3000).await;
    assert_eq!(
        heartbeat(&h, "g", &b, generation).await,
        code(ResponseError::UnknownMemberId)
    );
    assert_eq!(state_of(&h, "g").unwrap().0, GroupState::PreparingRebalance);
}

#[tokio::test]
async fn pending_member_ids_expire() {
    let h = harness().await;
    let (ids, _) = stable_group(&h, "g", 1).await;
    let _pending = member_id(&h, "g").await;
    assert_eq!(h.coord.lock().groups["g"].pending_members.len(), 1);
    h.clock.advance(5000);
    let _ = heartbeat(&h, "g", &ids[0], 1).await;
    h.advance(5000).await;
    assert!(h.coord.lock().groups["g"].pending_members.is_empty());
}

#[tokio::test]
async fn leave_group_batched_and_single() {
    let h = harness().await;
    let (ids, _) = stable_group(&h, "g", 3).await;
    let req = LeaveGroupRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_members(vec![
            MemberIdentity::default().with_member_id(sb(&ids[1])),
            MemberIdentity::default().with_member_id(sb("stranger")),
        ]);
    let resp = h.coord.leave_group(&ctx(5), req).await;
    assert_eq!(resp.error_code, 0);
    let errors: Vec<i16> = resp.members.iter().map(|m| m.error_code).collect();
    assert_eq!(errors, vec![0, code(ResponseError::UnknownMemberId)]);
    assert_eq!(state_of(&h, "g").unwrap().0, GroupState::PreparingRebalance);
    // v0 single-member leave.
    let single = LeaveGroupRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_member_id(sb(&ids[2]));
    assert_eq!(h.coord.leave_group(&ctx(0), single).await.error_code, 0);
    let last = LeaveGroupRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_members(vec![MemberIdentity::default().with_member_id(sb(&ids[0]))]);
    assert_eq!(h.coord.leave_group(&ctx(3), last).await.error_code, 0);
    // Everyone left: the rebalance completes into Empty, and that is written.
    let (state, generation, members) = state_of(&h, "g").unwrap();
    assert_eq!((state, members), (GroupState::Empty, 0));
    let record = h.group_records("g").pop().unwrap();
    assert_eq!(record.generation, generation);
    assert!(record.members.is_empty());
    assert_eq!(record.protocol, None);
    let unknown = LeaveGroupRequest::default().with_group_id(GroupId(sb("nope")));
    assert_eq!(
        h.coord.leave_group(&ctx(1), unknown).await.error_code,
        code(ResponseError::UnknownMemberId)
    );
}

#[tokio::test]
async fn protocol_selection_and_compatibility() {
    let h = harness().await;
    let a = member_id(&h, "g").await;
    let b = member_id(&h, "g").await;
    let ja = spawn_join(&h, 5, join_req("g", &a, &["roundrobin", "range"]));
    settle().await;
    let jb = spawn_join(&h, 5, join_req("g", &b, &["range", "sticky"]));
    settle().await;
    // A third member without any protocol the others all support is refused.
    let c = member_id(&h, "g").await;
    let rc = h
        .coord
        .join_group(&ctx(5), join_req("g", &c, &["sticky"]))
        .await;
    assert_eq!(
        rc.error_code,
        code(ResponseError::InconsistentGroupProtocol)
    );
    let wrong_type = join_req("g", "", &["range"]).with_protocol_type(sb("connect"));
    assert_eq!(
        h.coord.join_group(&ctx(5), wrong_type).await.error_code,
        code(ResponseError::InconsistentGroupProtocol)
    );
    let no_protocols = join_req("other", "", &[]);
    assert_eq!(
        h.coord.join_group(&ctx(5), no_protocols).await.error_code,
        code(ResponseError::InconsistentGroupProtocol)
    );
    assert!(state_of(&h, "other").is_none() || state_of(&h, "other").unwrap().2 == 0);
    // c's id stays pending until its session expires; the join still completes.
    let joins = [ja, jb];
    advance_until_joined(&h, &joins).await;
    let [ja, jb] = joins;
    let ra = ja.await.unwrap();
    let rb = jb.await.unwrap();
    assert_eq!(ra.protocol_name.as_ref().map(|p| p.as_str()), Some("range"));
    assert_eq!(rb.protocol_name.as_ref().map(|p| p.as_str()), Some("range"));
}

#[tokio::test]
async fn join_validation_errors() {
    let h = harness_with(GroupConfig {
        max_size: 1,
        ..GroupConfig::default()
    })
    .await;
    let bad_timeout = join_req("g", "", &["range"]).with_session_timeout_ms(1000);
    assert_eq!(
        h.coord.join_group(&ctx(5), bad_timeout).await.error_code,
        code(ResponseError::InvalidSessionTimeout)
    );
    assert_eq!(
        h.coord
            .join_group(&ctx(5), join_req("", "", &["range"]))
            .await
            .error_code,
        code(ResponseError::InvalidGroupId)
    );
    assert_eq!(
        h.coord
            .join_group(&ctx(5), join_req("g", "made-up", &["range"]))
            .await
            .error_code,
        code(ResponseError::UnknownMemberId)
    );
    let _first = member_id(&h, "g").await;
    assert_eq!(
        h.coord
            .join_group(&ctx(5), join_req("g", "", &["range"]))
            .await
            .error_code,
        code(ResponseError::GroupMaxSizeReached)
    );
}

fn static_join(group: &str, member: &str, instance: &str) -> JoinGroupRequest {
    join_req(group, member, &["range"]).with_group_instance_id(Some(sb(instance)))
}

#[tokio::test]
async fn static_member_restart_keeps_generation_and_fences_the_old_id() {
    let h = harness().await;
    let ja = spawn_join(&h, 5, static_join("g", "", "inst-a"));
    let jb = spawn_join(&h, 5, static_join("g", "", "inst-b"));
    settle().await;
    let joins = [ja, jb];
    advance_until_joined(&h, &joins).await;
    let [ja, jb] = joins;
    let (ra, rb) = (ja.await.unwrap(), jb.await.unwrap());
    let generation = ra.generation_id;
    let (leader, follower) = if ra.leader == ra.member_id {
        (
            ra.member_id.as_str().to_owned(),
            rb.member_id.as_str().to_owned(),
        )
    } else {
        (
            rb.member_id.as_str().to_owned(),
            ra.member_id.as_str().to_owned(),
        )
    };
    let follower_instance = if follower.starts_with("inst-a") {
        "inst-a"
    } else {
        "inst-b"
    };
    let fs = spawn_sync(&h, sync_req("g", &follower, generation, &[]));
    settle().await;
    h.coord
        .sync_group(
            &ctx(5),
            sync_req(
                "g",
                &leader,
                generation,
                &[(&leader, b"L"), (&follower, b"F")],
            ),
        )
        .await;
    assert_eq!(fs.await.unwrap().assignment.as_ref(), b"F");
    // The follower restarts with the same instance id and no member id.
    let rejoin = h
        .coord
        .join_group(&ctx(5), static_join("g", "", follower_instance))
        .await;
    assert_eq!(rejoin.error_code, 0);
    assert_eq!(rejoin.generation_id, generation, "no rebalance");
    assert_ne!(rejoin.member_id.as_str(), follower);
    assert_eq!(state_of(&h, "g"), Some((GroupState::Stable, generation, 2)));
    let new_id = rejoin.member_id.as_str().to_owned();
    let sync = h
        .coord
        .sync_group(&ctx(5), sync_req("g", &new_id, generation, &[]))
        .await;
    assert_eq!(
        sync.assignment.as_ref(),
        b"F",
        "the assignment survives the restart"
    );
    // The old incarnation is fenced.
    let old_hb = h
        .coord
        .heartbeat(
            &ctx(4),
            HeartbeatRequest::default()
                .with_group_id(GroupId(sb("g")))
                .with_member_id(sb(&follower))
                .with_group_instance_id(Some(sb(follower_instance)))
                .with_generation_id(generation),
        )
        .await;
    assert_eq!(old_hb.error_code, code(ResponseError::FencedInstanceId));
    // The new member id is durable.
    let record = h.group_records("g").pop().unwrap();
    assert!(record.members.iter().any(|m| m.member_id == new_id));
    // A static member leaving by instance id alone.
    let leave = LeaveGroupRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_members(vec![
            MemberIdentity::default().with_group_instance_id(Some(sb(follower_instance))),
            MemberIdentity::default()
                .with_member_id(sb("wrong"))
                .with_group_instance_id(Some(sb(if follower_instance == "inst-a" {
                    "inst-b"
                } else {
                    "inst-a"
                }))),
        ]);
    let resp = h.coord.leave_group(&ctx(4), leave).await;
    let errors: Vec<i16> = resp.members.iter().map(|m| m.error_code).collect();
    assert_eq!(errors, vec![0, code(ResponseError::FencedInstanceId)]);
}

fn commit_req(
    group: &str,
    generation: i32,
    member: &str,
    offsets: &[(&str, i32, i64)],
) -> OffsetCommitRequest {
    let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
    for (topic, partition, offset) in offsets {
        let p = OffsetCommitRequestPartition::default()
            .with_partition_index(*partition)
            .with_committed_offset(*offset)
            .with_committed_metadata(Some(sb("meta")));
        match topics.iter_mut().find(|t| t.name.0.as_str() == *topic) {
            Some(t) => t.partitions.push(p),
            None => topics.push(
                OffsetCommitRequestTopic::default()
                    .with_name(TopicName(sb(topic)))
                    .with_partitions(vec![p]),
            ),
        }
    }
    OffsetCommitRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(sb(member))
        .with_topics(topics)
}

fn commit_errors(resp: &kafka_protocol::messages::OffsetCommitResponse) -> Vec<i16> {
    resp.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

async fn fetch(coord: &GroupCoordinator, group: &str, topic: &str, partitions: &[i32]) -> Vec<i64> {
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_topics(Some(vec![
            OffsetFetchRequestTopic::default()
                .with_name(TopicName(sb(topic)))
                .with_partition_indexes(partitions.to_vec()),
        ]));
    let resp = coord.offset_fetch(&ctx(7), req).await;
    resp.topics[0]
        .partitions
        .iter()
        .map(|p| p.committed_offset)
        .collect()
}

#[tokio::test]
async fn simple_consumer_commits_without_joining() {
    let h = harness().await;
    let resp = h
        .coord
        .offset_commit(
            &ctx(8),
            commit_req("simple", -1, "", &[("t", 0, 10), ("t", 1, 20)]),
        )
        .await;
    assert_eq!(commit_errors(&resp), vec![0, 0]);
    assert_eq!(
        fetch(&h.coord, "simple", "t", &[0, 1, 2]).await,
        vec![10, 20, -1]
    );
    let (state, _, _) = state_of(&h, "simple").unwrap();
    assert_eq!(state, GroupState::Empty);
    // Unknown group with a real generation: ILLEGAL_GENERATION before v9,
    // GROUP_ID_NOT_FOUND from v9.
    let stale = h
        .coord
        .offset_commit(&ctx(8), commit_req("nope", 3, "m", &[("t", 0, 1)]))
        .await;
    assert_eq!(
        commit_errors(&stale),
        vec![code(ResponseError::IllegalGeneration)]
    );
    let v9 = h
        .coord
        .offset_commit(&ctx(9), commit_req("nope", 3, "m", &[("t", 0, 1)]))
        .await;
    assert_eq!(
        commit_errors(&v9),
        vec![code(ResponseError::GroupIdNotFound)]
    );
    assert!(state_of(&h, "nope").is_none());
    let empty_id = h
        .coord
        .offset_commit(&ctx(8), commit_req("", -1, "", &[("t", 0, 1)]))
        .await;
    assert_eq!(
        commit_errors(&empty_id),
        vec![code(ResponseError::InvalidGroupId)]
    );
}

#[tokio::test]
async fn member_commits_are_validated_against_the_generation() {
    let h = harness().await;
    let (ids, generation) = stable_group(&h, "g", 2).await;
    let ok = h
        .coord
        .offset_commit(
            &ctx(8),
            commit_req("g", generation, &ids[0], &[("t", 0, 5)]),
        )
        .await;
    assert_eq!(commit_errors(&ok), vec![0]);
    let stale = h
        .coord
        .offset_commit(
            &ctx(8),
            commit_req("g", generation - 1, &ids[0], &[("t", 0, 6)]),
        )
        .await;
    assert_eq!(
        commit_errors(&stale),
        vec![code(ResponseError::IllegalGeneration)]
    );
    let stranger = h
        .coord
        .offset_commit(&ctx(8), commit_req("g", generation, "x", &[("t", 0, 7)]))
        .await;
    assert_eq!(
        commit_errors(&stranger),
        vec![code(ResponseError::UnknownMemberId)]
    );
    let simple_into_live = h
        .coord
        .offset_commit(&ctx(8), commit_req("g", -1, "", &[("t", 0, 8)]))
        .await;
    assert_eq!(
        commit_errors(&simple_into_live),
        vec![code(ResponseError::UnknownMemberId)]
    );
    assert_eq!(
        fetch(&h.coord, "g", "t", &[0]).await,
        vec![5],
        "nothing lost, nothing overwritten"
    );
    // Another group is not disturbed by any of this.
    assert_eq!(fetch(&h.coord, "other", "t", &[0]).await, vec![-1]);
}

#[tokio::test]
async fn oversized_metadata_fails_only_its_partition() {
    let h = harness().await;
    let mut req = commit_req("g", -1, "", &[("t", 0, 1), ("t", 1, 2)]);
    req.topics[0].partitions[1].committed_metadata = Some(sb(&"x".repeat(5000)));
    let resp = h.coord.offset_commit(&ctx(8), req).await;
    assert_eq!(
        commit_errors(&resp),
        vec![0, code(ResponseError::OffsetMetadataTooLarge)]
    );
    assert_eq!(fetch(&h.coord, "g", "t", &[0, 1]).await, vec![1, -1]);
}

#[tokio::test]
async fn failed_writes_are_reported_and_not_visible() {
    let h = harness().await;
    h.log.set_fail_appends(true);
    let resp = h
        .coord
        .offset_commit(&ctx(8), commit_req("g", -1, "", &[("t", 0, 1)]))
        .await;
    assert_eq!(
        commit_errors(&resp),
        vec![code(ResponseError::CoordinatorNotAvailable)]
    );
    assert_eq!(fetch(&h.coord, "g", "t", &[0]).await, vec![-1]);
    h.log.set_fail_appends(false);
    let resp = h
        .coord
        .offset_commit(&ctx(8), commit_req("g", -1, "", &[("t", 0, 1)]))
        .await;
    assert_eq!(commit_errors(&resp), vec![0]);
}

#[tokio::test]
async fn failed_assignment_write_sends_everyone_back_to_rejoin() {
    let h = harness().await;
    let id = member_id(&h, "g").await;
    let j = spawn_join(&h, 5, join_req("g", &id, &["range"]));
    settle().await;
    h.advance(3000).await;
    let generation = j.await.unwrap().generation_id;
    h.log.set_fail_appends(true);
    let s = h
        .coord
        .sync_group(&ctx(5), sync_req("g", &id, generation, &[(&id, b"a")]))
        .await;
    assert_eq!(s.error_code, code(ResponseError::CoordinatorNotAvailable));
    assert_eq!(state_of(&h, "g").unwrap().0, GroupState::PreparingRebalance);
}

#[tokio::test]
async fn offset_fetch_all_topics_and_multi_group() {
    let h = harness().await;
    h.coord
        .offset_commit(
            &ctx(8),
            commit_req("a", -1, "", &[("t", 0, 1), ("u", 2, 3)]),
        )
        .await;
    h.coord
        .offset_commit(&ctx(8), commit_req("b", -1, "", &[("t", 0, 9)]))
        .await;
    // v2+: null topics = everything the group committed.
    let all = h
        .coord
        .offset_fetch(
            &ctx(7),
            OffsetFetchRequest::default()
                .with_group_id(GroupId(sb("a")))
                .with_topics(None),
        )
        .await;
    let got: Vec<(String, i32, i64)> = all
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                (
                    t.name.0.as_str().to_owned(),
                    p.partition_index,
                    p.committed_offset,
                )
            })
        })
        .collect();
    assert_eq!(got, vec![("t".into(), 0, 1), ("u".into(), 2, 3)]);
    assert_eq!(
        all.topics[0].partitions[0]
            .metadata
            .as_ref()
            .map(|m| m.as_str()),
        Some("meta")
    );
    // v8: several groups in one request.
    let req = OffsetFetchRequest::default().with_groups(vec![
        OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(sb("a")))
            .with_topics(None),
        OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(sb("b")))
            .with_topics(Some(vec![
                OffsetFetchRequestTopics::default()
                    .with_name(TopicName(sb("t")))
                    .with_partition_indexes(vec![0, 1]),
            ])),
        OffsetFetchRequestGroup::default().with_group_id(GroupId(sb("missing"))),
    ]);
    let resp = h.coord.offset_fetch(&ctx(8), req).await;
    assert_eq!(resp.groups.len(), 3);
    assert_eq!(resp.groups[0].topics.len(), 2);
    let b: Vec<i64> = resp.groups[1].topics[0]
        .partitions
        .iter()
        .map(|p| p.committed_offset)
        .collect();
    assert_eq!(b, vec![9, -1]);
    assert!(resp.groups[2].topics.is_empty());
    assert_eq!(resp.groups[2].error_code, 0);
}

#[tokio::test]
async fn state_is_rebuilt_from_the_log() {
    let h = harness().await;
    let (ids, generation) = stable_group(&h, "g", 2).await;
    h.coord
        .offset_commit(
            &ctx(8),
            commit_req("g", generation, &ids[0], &[("t", 0, 42), ("t", 1, 43)]),
        )
        .await;
    h.coord
        .offset_commit(&ctx(8), commit_req("s", -1, "", &[("t", 0, 7)]))
        .await;
    h.coord
        .offset_commit(&ctx(8), commit_req("gone", -1, "", &[("t", 0, 1)]))
        .await;
    let del = h
        .coord
        .delete_groups(
            &ctx(2),
            DeleteGroupsRequest::default().with_groups_names(vec![GroupId(sb("gone"))]),
        )
        .await;
    assert_eq!(del.results[0].error_code, 0);
    let restarted = h.restart().await;
    assert_eq!(fetch(&restarted, "g", "t", &[0, 1]).await, vec![42, 43]);
    assert_eq!(fetch(&restarted, "s", "t", &[0]).await, vec![7]);
    assert_eq!(fetch(&restarted, "gone", "t", &[0]).await, vec![-1]);
    let state = restarted.lock();
    let g = &state.groups["g"];
    assert_eq!(g.state, GroupState::Stable);
    assert_eq!(g.generation, generation);
    assert_eq!(g.members.len(), 2);
    assert_eq!(g.leader.as_deref(), Some(ids[0].as_str()));
    assert_eq!(g.members[&ids[1]].assignment.as_ref(), ids[1].as_bytes());
    assert!(!state.groups.contains_key("gone"));
}

#[tokio::test]
async fn reloaded_members_resume_or_expire() {
    let h = harness().await;
    let (ids, generation) = stable_group(&h, "g", 2).await;
    let restarted = h.restart().await;
    h.clock.advance(6000);
    // A member that comes back within its session keeps heartbeating.
    let hb = restarted
        .heartbeat(
            &ctx(4),
            HeartbeatRequest::default()
                .with_group_id(GroupId(sb("g")))
                .with_member_id(sb(&ids[0]))
                .with_generation_id(generation),
        )
        .await;
    assert_eq!(hb.error_code, 0);
    // The other never returns and expires.
    h.clock.advance(5000);
    restarted.tick().await;
    let state = restarted.lock();
    assert_eq!(state.groups["g"].members.len(), 1);
    assert_eq!(state.groups["g"].state, GroupState::PreparingRebalance);
}

#[tokio::test]
async fn delete_groups_rules() {
    let h = harness().await;
    stable_group(&h, "live", 1).await;
    h.coord
        .offset_commit(
            &ctx(8),
            commit_req("idle", -1, "", &[("t", 0, 1), ("t", 1, 2)]),
        )
        .await;
    let resp = h
        .coord
        .delete_groups(
            &ctx(2),
            DeleteGroupsRequest::default().with_groups_names(vec![
                GroupId(sb("live")),
                GroupId(sb("idle")),
                GroupId(sb("nope")),
            ]),
        )
        .await;
    let errors: Vec<i16> = resp.results.iter().map(|r| r.error_code).collect();
    assert_eq!(
        errors,
        vec![
            code(ResponseError::NonEmptyGroup),
            0,
            code(ResponseError::GroupIdNotFound)
        ]
    );
    // Offsets and metadata are tombstoned.
    let p = h.coord.partition_for("idle");
    let tombstones = h
        .log
        .records(p)
        .into_iter()
        .filter(|r| r.value.is_none())
        .count();
    assert_eq!(tombstones, 3);
}

#[tokio::test]
async fn offset_delete_rules() {
    let h = harness().await;
    let (ids, generation) = stable_group(&h, "g", 1).await;
    h.coord
        .offset_commit(
            &ctx(8),
            commit_req("g", generation, &ids[0], &[("t", 0, 1), ("old", 0, 2)]),
        )
        .await;
    let del = |group: &str, topic: &str| {
        OffsetDeleteRequest::default()
            .with_group_id(GroupId(sb(group)))
            .with_topics(vec![
                OffsetDeleteRequestTopic::default()
                    .with_name(TopicName(sb(topic)))
                    .with_partitions(vec![
                        OffsetDeleteRequestPartition::default().with_partition_index(0),
                    ]),
            ])
    };
    let resp = h.coord.offset_delete(&ctx(0), del("g", "t")).await;
    assert_eq!(
        resp.topics[0].partitions[0].error_code,
        code(ResponseError::GroupSubscribedToTopic)
    );
    let resp = h.coord.offset_delete(&ctx(0), del("g", "old")).await;
    assert_eq!(
        (resp.error_code, resp.topics[0].partitions[0].error_code),
        (0, 0)
    );
    assert_eq!(fetch(&h.coord, "g", "old", &[0]).await, vec![-1]);
    assert_eq!(fetch(&h.coord, "g", "t", &[0]).await, vec![1]);
    let resp = h.coord.offset_delete(&ctx(0), del("nope", "t")).await;
    assert_eq!(resp.error_code, code(ResponseError::GroupIdNotFound));
}

#[tokio::test]
async fn offsets_expire_after_retention() {
    let config = GroupConfig {
        offsets_retention_ms: 60_000,
        offsets_retention_check_interval_ms: 10_000,
        ..GroupConfig::default()
    };
    let h = harness_with(config.clone()).await;
    h.coord
        .offset_commit(&ctx(8), commit_req("simple", -1, "", &[("t", 0, 1)]))
        .await;
    h.clock.advance(30_000);
    h.coord
        .offset_commit(&ctx(8), commit_req("simple", -1, "", &[("t", 1, 2)]))
        .await;
    h.advance(35_000).await; // t-0 is 65 s old, t-1 35 s
    assert_eq!(fetch(&h.coord, "simple", "t", &[0, 1]).await, vec![-1, 2]);
    h.advance(30_000).await;
    assert!(
        state_of(&h, "simple").is_none(),
        "an empty group without offsets is deleted"
    );
    let p = h.coord.partition_for("simple");
    let last = h.log.records(p).pop().unwrap();
    assert!(matches!(
        RecordKey::decode(&last.key),
        Ok(RecordKey::Group(_))
    ));
    assert!(last.value.is_none());
    // After a restart the group stays gone.
    let restarted = GroupCoordinator::load(config, node(), h.clock.clone(), h.log.clone())
        .await
        .unwrap();
    assert!(!restarted.lock().groups.contains_key("simple"));
}

#[tokio::test]
async fn stable_group_keeps_subscribed_offsets() {
    let config = GroupConfig {
        offsets_retention_ms: 60_000,
        offsets_retention_check_interval_ms: 10_000,
        ..GroupConfig::default()
    };
    let h = harness_with(config).await;
    let (ids, generation) = stable_group(&h, "g", 1).await;
    h.coord
        .offset_commit(
            &ctx(8),
            commit_req("g", generation, &ids[0], &[("t", 0, 1), ("old", 0, 2)]),
        )
        .await;
    for _ in 0..8 {
        assert_eq!(heartbeat(&h, "g", &ids[0], generation).await, 0);
        h.advance(9_000).await;
    }
    assert_eq!(
        fetch(&h.coord, "g", "t", &[0]).await,
        vec![1],
        "subscribed: kept"
    );
    assert_eq!(
        fetch(&h.coord, "g", "old", &[0]).await,
        vec![-1],
        "unsubscribed: expired"
    );
}

#[tokio::test]
async fn list_and_describe_groups() {
    let h = harness().await;
    let (ids, _) = stable_group(&h, "live", 2).await;
    h.coord
        .offset_commit(&ctx(8), commit_req("simple", -1, "", &[("t", 0, 1)]))
        .await;
    let all = h
        .coord
        .list_groups(&ctx(5), ListGroupsRequest::default())
        .await;
    let listed: Vec<(String, String, String, String)> = all
        .groups
        .iter()
        .map(|g| {
            (
                g.group_id.0.as_str().to_owned(),
                g.protocol_type.as_str().to_owned(),
                g.group_state.as_str().to_owned(),
                g.group_type.as_str().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        vec![
            (
                "live".into(),
                "consumer".into(),
                "Stable".into(),
                "classic".into()
            ),
            ("simple".into(), "".into(), "Empty".into(), "classic".into()),
        ]
    );
    let stable_only = h
        .coord
        .list_groups(
            &ctx(4),
            ListGroupsRequest::default().with_states_filter(vec![sb("stable")]),
        )
        .await;
    assert_eq!(stable_only.groups.len(), 1);
    let consumer_type = h
        .coord
        .list_groups(
            &ctx(5),
            ListGroupsRequest::default().with_types_filter(vec![sb("consumer")]),
        )
        .await;
    assert!(consumer_type.groups.is_empty(), "no KIP-848 groups here");

    let described = h
        .coord
        .describe_groups(
            &ctx(5),
            DescribeGroupsRequest::default()
                .with_groups(vec![GroupId(sb("live")), GroupId(sb("missing"))])
                .with_include_authorized_operations(true),
        )
        .await;
    let live = &described.groups[0];
    assert_eq!(live.group_state.as_str(), "Stable");
    assert_eq!(live.protocol_data.as_str(), "range");
    assert_eq!(live.members.len(), 2);
    let leader = live
        .members
        .iter()
        .find(|m| m.member_id.as_str() == ids[0])
        .unwrap();
    assert_eq!(leader.member_assignment.as_ref(), ids[0].as_bytes());
    assert_eq!(leader.member_metadata, subscription(&["t"]));
    assert_ne!(live.authorized_operations, i32::MIN);
    assert_eq!(described.groups[1].group_state.as_str(), "Dead");
    assert_eq!(described.groups[1].error_code, 0);
    let v6 = h
        .coord
        .describe_groups(
            &ctx(6),
            DescribeGroupsRequest::default().with_groups(vec![GroupId(sb("missing"))]),
        )
        .await;
    assert_eq!(
        v6.groups[0].error_code,
        code(ResponseError::GroupIdNotFound)
    );
}

#[tokio::test]
async fn find_coordinator_all_versions() {
    let h = harness().await;
    for version in 0..=3 {
        let resp = h
            .coord
            .find_coordinator(
                &ctx(version),
                FindCoordinatorRequest::default().with_key(sb("g")),
            )
            .await;
        assert_eq!((resp.error_code, resp.node_id.0, resp.port), (0, 1, 9092));
        assert_eq!(resp.host.as_str(), "127.0.0.1");
    }
    let txn = h
        .coord
        .find_coordinator(
            &ctx(3),
            FindCoordinatorRequest::default()
                .with_key(sb("tx"))
                .with_key_type(KEY_TYPE_TRANSACTION),
        )
        .await;
    assert_eq!(txn.error_code, 0);
    let bad = h
        .coord
        .find_coordinator(
            &ctx(2),
            FindCoordinatorRequest::default()
                .with_key(sb("x"))
                .with_key_type(7),
        )
        .await;
    assert_eq!(bad.error_code, code(ResponseError::InvalidRequest));
    let batched = h
        .coord
        .find_coordinator(
            &ctx(4),
            FindCoordinatorRequest::default().with_coordinator_keys(vec![sb("a"), sb("b")]),
        )
        .await;
    assert_eq!(batched.coordinators.len(), 2);
    assert!(
        batched
            .coordinators
            .iter()
            .all(|c| c.error_code == 0 && c.node_id.0 == 1 && c.port == 9092)
    );
    assert_eq!(batched.coordinators[1].key.as_str(), "b");
    let empty_txn = h
        .coord
        .find_coordinator(
            &ctx(6),
            FindCoordinatorRequest::default()
                .with_key_type(KEY_TYPE_TRANSACTION)
                .with_coordinator_keys(vec![sb("")]),
        )
        .await;
    assert_eq!(
        empty_txn.coordinators[0].error_code,
        code(ResponseError::InvalidRequest)
    );
}

fn encodes<T: Encodable>(msg: &T, version: i16) {
    let mut buf = BytesMut::new();
    msg.encode(&mut buf, version)
        .unwrap_or_else(|e| panic!("version {version}: {e}"));
}

/// Every response the coordinator builds must encode at the version it was
/// built for (kafka-protocol refuses fields a version lacks).
#[tokio::test]
async fn responses_encode_at_every_version() {
    let h = harness_with(GroupConfig {
        initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    })
    .await;
    let (ids, generation) = stable_group(&h, "g", 1).await;
    h.coord
        .offset_commit(&ctx(8), commit_req("s", -1, "", &[("t", 0, 1)]))
        .await;
    for v in 0..=9 {
        let r = h
            .coord
            .join_group(&ctx(v), join_req("g", &ids[0], &["range"]))
            .await;
        encodes(&r, v);
        let r = h
            .coord
            .join_group(&ctx(v), join_req(&format!("fresh{v}"), "", &["range"]))
            .await;
        encodes(&r, v);
        let r = h
            .coord
            .join_group(&ctx(v), join_req("g", "stranger", &["range"]))
            .await;
        encodes(&r, v);
    }
    for v in 0..=5 {
        let r = h
            .coord
            .sync_group(&ctx(v), sync_req("g", &ids[0], generation, &[]))
            .await;
        encodes(&r, v);
        let r = h
            .coord
            .sync_group(&ctx(v), sync_req("g", "x", generation, &[]))
            .await;
        encodes(&r, v);
    }
    for v in 0..=4 {
        let r = h
            .coord
            .heartbeat(
                &ctx(v),
                HeartbeatRequest::default().with_group_id(GroupId(sb("g"))),
            )
            .await;
        encodes(&r, v);
    }
    for v in 0..=5 {
        let mut req = LeaveGroupRequest::default().with_group_id(GroupId(sb("g")));
        if v >= 3 {
            req = req.with_members(vec![MemberIdentity::default().with_member_id(sb("x"))]);
        } else {
            req = req.with_member_id(sb("x"));
        }
        encodes(&h.coord.leave_group(&ctx(v), req).await, v);
    }
    for v in 2..=9 {
        let r = h
            .coord
            .offset_commit(&ctx(v), commit_req("s", -1, "", &[("t", 0, 2)]))
            .await;
        encodes(&r, v);
    }
    for v in 1..=9 {
        let req = if v >= 8 {
            OffsetFetchRequest::default().with_groups(vec![
                OffsetFetchRequestGroup::default().with_group_id(GroupId(sb("s"))),
            ])
        } else {
            OffsetFetchRequest::default()
                .with_group_id(GroupId(sb("s")))
                .with_topics(Some(vec![
                    OffsetFetchRequestTopic::default()
                        .with_name(TopicName(sb("t")))
                        .with_partition_indexes(vec![0]),
                ]))
        };
        encodes(&h.coord.offset_fetch(&ctx(v), req).await, v);
    }
    for v in 0..=5 {
        encodes(
            &h.coord
                .list_groups(&ctx(v), ListGroupsRequest::default())
                .await,
            v,
        );
    }
    for v in 0..=6 {
        let req = DescribeGroupsRequest::default()
            .with_groups(vec![GroupId(sb("g")), GroupId(sb("missing"))]);
        encodes(&h.coord.describe_groups(&ctx(v), req).await, v);
    }
    for v in 0..=2 {
        let req = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(sb("missing"))]);
        encodes(&h.coord.delete_groups(&ctx(v), req).await, v);
    }
    for v in 0..=6 {
        let req = if v >= 4 {
            FindCoordinatorRequest::default().with_coordinator_keys(vec![sb("g")])
        } else {
            FindCoordinatorRequest::default().with_key(sb("g"))
        };
        encodes(&h.coord.find_coordinator(&ctx(v), req).await, v);
    }
    let req = OffsetDeleteRequest::default().with_group_id(GroupId(sb("s")));
    encodes(&h.coord.offset_delete(&ctx(0), req).await, 0);
}

#[tokio::test]
async fn static_leader_restart_gets_members_but_no_rebalance() {
    let h = harness().await;
    let ja = spawn_join(&h, 5, static_join("g", "", "inst-a"));
    settle().await;
    let jb = spawn_join(&h, 5, static_join("g", "", "inst-b"));
    settle().await;
    let joins = [ja, jb];
    advance_until_joined(&h, &joins).await;
    let [ja, jb] = joins;
    let (ra, rb) = (ja.await.unwrap(), jb.await.unwrap());
    let generation = ra.generation_id;
    let leader = ra.leader.as_str().to_owned();
    let (leader_instance, follower) = if leader == ra.member_id.as_str() {
        ("inst-a", rb.member_id.as_str().to_owned())
    } else {
        ("inst-b", ra.member_id.as_str().to_owned())
    };
    let fs = spawn_sync(&h, sync_req("g", &follower, generation, &[]));
    settle().await;
    h.coord
        .sync_group(
            &ctx(5),
            sync_req(
                "g",
                &leader,
                generation,
                &[(&leader, b"L"), (&follower, b"F")],
            ),
        )
        .await;
    fs.await.unwrap();
    for version in [5, 9] {
        let rejoin = h
            .coord
            .join_group(&ctx(version), static_join("g", "", leader_instance))
            .await;
        assert_eq!(rejoin.error_code, 0);
        assert_eq!(rejoin.generation_id, generation);
        assert_eq!(rejoin.leader, rejoin.member_id, "still the leader");
        assert_eq!(rejoin.members.len(), 2);
        assert_eq!(rejoin.skip_assignment, version >= 9);
        // Its SyncGroup in Stable returns the assignment it already had.
        let new_id = rejoin.member_id.as_str().to_owned();
        let sync = h
            .coord
            .sync_group(
                &ctx(5),
                sync_req("g", &new_id, generation, &[(&new_id, b"other")]),
            )
            .await;
        assert_eq!(sync.assignment.as_ref(), b"L");
        assert_eq!(state_of(&h, "g"), Some((GroupState::Stable, generation, 2)));
    }
}

mod consumer_protocol {
    use super::*;
    use kafka_protocol::messages::consumer_group_describe_request::ConsumerGroupDescribeRequest;
    use kafka_protocol::messages::consumer_group_heartbeat_request::{
        ConsumerGroupHeartbeatRequest, TopicPartitions,
    };
    use kafka_protocol::messages::consumer_group_heartbeat_response::ConsumerGroupHeartbeatResponse;
    use std::collections::BTreeSet;
    use uuid::Uuid;

    const TOPIC: Uuid = Uuid::from_u128(7);

    struct Topics;
    impl TopicLookup for Topics {
        fn by_name(&self, name: &str) -> Option<(Uuid, i32)> {
            (name == "t").then_some((TOPIC, 4))
        }
        fn name_of(&self, id: Uuid) -> Option<String> {
            (id == TOPIC).then(|| "t".to_owned())
        }
        fn names(&self) -> Vec<String> {
            vec!["t".to_owned()]
        }
    }

    async fn consumer_harness() -> Harness {
        let h = harness().await;
        h.coord.set_topic_lookup(Arc::new(Topics));
        h
    }

    fn hb(member: &str, epoch: i32, owned: Option<&[i32]>) -> ConsumerGroupHeartbeatRequest {
        let mut req = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(sb("cg")))
            .with_member_id(sb(member))
            .with_member_epoch(epoch)
            .with_topic_partitions(owned.map(|ps| {
                vec![
                    TopicPartitions::default()
                        .with_topic_id(TOPIC)
                        .with_partitions(ps.to_vec()),
                ]
            }));
        if epoch == 0 {
            // A (re)join owns nothing.
            req = req
                .with_rebalance_timeout_ms(30_000)
                .with_subscribed_topic_names(Some(vec![TopicName(sb("t"))]))
                .with_topic_partitions(Some(vec![]));
        }
        req
    }

    fn partitions(resp: &ConsumerGroupHeartbeatResponse) -> Option<BTreeSet<i32>> {
        resp.assignment.as_ref().map(|a| {
            a.topic_partitions
                .iter()
                .flat_map(|t| t.partitions.iter().copied())
                .collect()
        })
    }

    #[tokio::test]
    async fn members_converge_with_revocation_before_reassignment() {
        let h = consumer_harness().await;
        let c = &h.coord;
        let a = c
            .consumer_group_heartbeat(&ctx(1), hb("a", 0, Some(&[])))
            .await;
        assert_eq!(a.error_code, 0);
        assert_eq!(a.member_epoch, 1);
        assert_eq!(partitions(&a), Some(BTreeSet::from([0, 1, 2, 3])));
        let b = c
            .consumer_group_heartbeat(&ctx(1), hb("b", 0, Some(&[])))
            .await;
        assert_eq!(b.member_epoch, 2);
        assert_eq!(
            partitions(&b),
            Some(BTreeSet::new()),
            "a still holds everything"
        );
        // a is told to give two partitions up, keeping its epoch until it does.
        let a = c
            .consumer_group_heartbeat(&ctx(1), hb("a", 1, Some(&[0, 1, 2, 3])))
            .await;
        assert_eq!(a.member_epoch, 1);
        let kept = partitions(&a).unwrap();
        assert_eq!(kept.len(), 2);
        let b = c
            .consumer_group_heartbeat(&ctx(1), hb("b", 2, Some(&[])))
            .await;
        assert_eq!(
            partitions(&b).unwrap_or_default(),
            BTreeSet::new(),
            "not released yet"
        );
        let kept_vec: Vec<i32> = kept.iter().copied().collect();
        let a = c
            .consumer_group_heartbeat(&ctx(1), hb("a", 1, Some(&kept_vec)))
            .await;
        assert_eq!(a.member_epoch, 2, "revocation acknowledged");
        let b = c
            .consumer_group_heartbeat(&ctx(1), hb("b", 2, Some(&[])))
            .await;
        let got = partitions(&b).unwrap();
        assert_eq!(got.len(), 2);
        assert!(got.is_disjoint(&kept));
        // Errors.
        let fenced = c.consumer_group_heartbeat(&ctx(1), hb("a", 7, None)).await;
        assert_eq!(fenced.error_code, code(ResponseError::FencedMemberEpoch));
        let unknown = c.consumer_group_heartbeat(&ctx(1), hb("zz", 3, None)).await;
        assert_eq!(unknown.error_code, code(ResponseError::UnknownMemberId));
        let bad_assignor = c
            .consumer_group_heartbeat(
                &ctx(1),
                hb("x", 0, None).with_server_assignor(Some(sb("sticky"))),
            )
            .await;
        assert_eq!(
            bad_assignor.error_code,
            code(ResponseError::UnsupportedAssignor)
        );
        // Commits carry the member epoch.
        let ok = c
            .offset_commit(&ctx(9), commit_req("cg", 2, "b", &[("t", 0, 3)]))
            .await;
        assert_eq!(commit_errors(&ok), vec![0]);
        let stale = c
            .offset_commit(&ctx(9), commit_req("cg", 1, "b", &[("t", 0, 4)]))
            .await;
        assert_eq!(
            commit_errors(&stale),
            vec![code(ResponseError::StaleMemberEpoch)]
        );
        // Listing and describing.
        let listed = c
            .list_groups(
                &ctx(5),
                ListGroupsRequest::default().with_types_filter(vec![sb("consumer")]),
            )
            .await;
        assert_eq!(listed.groups.len(), 1);
        assert_eq!(listed.groups[0].group_type.as_str(), "consumer");
        let described = c
            .consumer_group_describe(
                &ctx(1),
                ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(sb("cg"))]),
            )
            .await;
        let g = &described.groups[0];
        assert_eq!(g.error_code, 0);
        assert_eq!(g.members.len(), 2);
        assert_eq!(g.assignor_name.as_str(), "uniform");
        assert_eq!(g.group_state.as_str(), "Stable");
        // a leaves: b ends up with everything.
        let left = c.consumer_group_heartbeat(&ctx(1), hb("a", -1, None)).await;
        assert_eq!(left.member_epoch, -1);
        let b = c
            .consumer_group_heartbeat(&ctx(1), hb("b", 2, Some(&[])))
            .await;
        assert_eq!(b.member_epoch, 3);
        assert_eq!(partitions(&b), Some(BTreeSet::from([0, 1, 2, 3])));
        // A classic join into a live consumer group is refused.
        let join = c.join_group(&ctx(5), join_req("cg", "", &["range"])).await;
        assert_eq!(
            join.error_code,
            code(ResponseError::InconsistentGroupProtocol)
        );
        // b goes silent: its session expires and the group empties.
        h.advance(GroupConfig::default().consumer_session_timeout_ms)
            .await;
        let state = c.lock();
        assert!(
            state.groups["cg"]
                .consumer
                .as_ref()
                .unwrap()
                .members
                .is_empty()
        );
    }

    /// franz-go's `TestGroupETL` churn, step by step: a member told to
    /// revoke keeps heartbeating without a rebalance timeout (-1 means
    /// "unchanged"), commits what it gives up with its current epoch while
    /// still revoking, and an in-flight commit with that epoch still lands
    /// after the revocation moved it on (KIP-1251); nothing it did not hold
    /// at that epoch can be committed.
    #[tokio::test(start_paused = true)]
    async fn a_revoking_member_commits_under_churn() {
        let h = consumer_harness().await;
        let c = &h.coord;
        let a = c
            .consumer_group_heartbeat(&ctx(1), hb("a", 0, Some(&[])))
            .await;
        assert_eq!((a.error_code, a.member_epoch), (0, 1));
        // Keepalives carry RebalanceTimeoutMs -1: the 30 s from the join stay.
        for _ in 0..3 {
            let keep = c.consumer_group_heartbeat(&ctx(1), hb("a", 1, None)).await;
            assert_eq!(keep.error_code, 0);
            h.advance(1_000).await;
        }
        let b = c
            .consumer_group_heartbeat(&ctx(1), hb("b", 0, Some(&[])))
            .await;
        assert_eq!(b.member_epoch, 2);
        let a = c
            .consumer_group_heartbeat(&ctx(1), hb("a", 1, Some(&[0, 1, 2, 3])))
            .await;
        assert_eq!(a.member_epoch, 1, "a keeps its epoch while it revokes");
        let kept = partitions(&a).unwrap();
        let revoked: Vec<i32> = (0..4).filter(|p| !kept.contains(p)).collect();
        let kept: Vec<i32> = kept.into_iter().collect();
        // The revocation callback runs for a while, heartbeats going on.
        for _ in 0..5 {
            h.advance(1_000).await;
            let keep = c.consumer_group_heartbeat(&ctx(1), hb("a", 1, None)).await;
            assert_eq!((keep.error_code, keep.member_epoch), (0, 1));
        }
        let offsets: Vec<(&str, i32, i64)> = revoked.iter().map(|p| ("t", *p, 100)).collect();
        let commit = c
            .offset_commit(&ctx(9), commit_req("cg", 1, "a", &offsets))
            .await;
        assert_eq!(
            commit_errors(&commit),
            vec![0; revoked.len()],
            "commit while revoking"
        );
        // The acknowledgement moves a to epoch 2.
        let a = c
            .consumer_group_heartbeat(&ctx(1), hb("a", 1, Some(&kept)))
            .await;
        assert_eq!(a.member_epoch, 2);
        // An autocommit sent with epoch 1 before a learnt of epoch 2: its
        // partitions were a's since epoch 1, so it is accepted.
        let late: Vec<(&str, i32, i64)> = kept.iter().map(|p| ("t", *p, 50)).collect();
        let commit = c
            .offset_commit(&ctx(9), commit_req("cg", 1, "a", &late))
            .await;
        assert_eq!(
            commit_errors(&commit),
            vec![0; kept.len()],
            "lagging epoch, owned partitions"
        );
        // But a partition a no longer holds cannot be committed with it.
        let zombie = c
            .offset_commit(&ctx(9), commit_req("cg", 1, "a", &[("t", revoked[0], 7)]))
            .await;
        assert_eq!(
            commit_errors(&zombie),
            vec![code(ResponseError::StaleMemberEpoch)]
        );
        let ahead = c
            .offset_commit(&ctx(9), commit_req("cg", 3, "a", &[("t", kept[0], 7)]))
            .await;
        assert_eq!(
            commit_errors(&ahead),
            vec![code(ResponseError::StaleMemberEpoch)]
        );
        // b takes over the revoked partitions from a's commit.
        let b = c
            .consumer_group_heartbeat(&ctx(1), hb("b", 2, Some(&[])))
            .await;
        assert_eq!(
            partitions(&b).unwrap().into_iter().collect::<Vec<_>>(),
            revoked
        );
        assert_eq!(
            fetch(c, "cg", "t", &revoked).await,
            vec![100; revoked.len()]
        );
    }

    /// The rebalance timeout from the join still fences a member that never
    /// acknowledges a revocation, keepalives (timeout -1) or not.
    #[tokio::test(start_paused = true)]
    async fn an_unacknowledged_revocation_fences_after_the_rebalance_timeout() {
        let h = consumer_harness().await;
        let c = &h.coord;
        let a = c.consumer_group_heartbeat(&ctx(1), hb("a", 0, None)).await;
        assert_eq!(a.member_epoch, 1);
        c.consumer_group_heartbeat(&ctx(1), hb("b", 0, None)).await;
        let a = c
            .consumer_group_heartbeat(&ctx(1), hb("a", 1, Some(&[0, 1, 2, 3])))
            .await;
        assert_eq!(
            partitions(&a).map(|p| p.len()),
            Some(2),
            "told to revoke two"
        );
        for _ in 0..29 {
            h.advance(1_000).await;
            let keep = c.consumer_group_heartbeat(&ctx(1), hb("a", 1, None)).await;
            assert_eq!(keep.error_code, 0);
        }
        h.advance(1_000).await;
        let members = || {
            c.lock().groups["cg"]
                .consumer
                .as_ref()
                .unwrap()
                .members
                .keys()
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(
            members(),
            vec!["b".to_owned()],
            "a fenced 30 s after the revocation"
        );
    }

    /// Topics that tests create and delete while a group runs.
    #[derive(Default)]
    struct LiveTopics(std::sync::Mutex<std::collections::BTreeMap<String, (Uuid, i32)>>);
    impl LiveTopics {
        fn create(&self, name: &str, id: u128, partitions: i32) {
            self.0
                .lock()
                .unwrap()
                .insert(name.to_owned(), (Uuid::from_u128(id), partitions));
        }
        fn delete(&self, name: &str) {
            self.0.lock().unwrap().remove(name);
        }
    }
    impl TopicLookup for Arc<LiveTopics> {
        fn by_name(&self, name: &str) -> Option<(Uuid, i32)> {
            self.0.lock().unwrap().get(name).copied()
        }
        fn name_of(&self, id: Uuid) -> Option<String> {
            let topics = self.0.lock().unwrap();
            topics
                .iter()
                .find(|(_, (i, _))| *i == id)
                .map(|(n, _)| n.clone())
        }
        fn names(&self) -> Vec<String> {
            self.0.lock().unwrap().keys().cloned().collect()
        }
    }

    fn join(member: &str) -> ConsumerGroupHeartbeatRequest {
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(sb("rg")))
            .with_member_id(sb(member))
            .with_rebalance_timeout_ms(30_000)
            .with_topic_partitions(Some(vec![]))
    }

    fn keepalive(member: &str, epoch: i32) -> ConsumerGroupHeartbeatRequest {
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(sb("rg")))
            .with_member_id(sb(member))
            .with_member_epoch(epoch)
    }

    /// (topic id, partitions) of an answer's assignment, by topic id.
    fn assigned(resp: &ConsumerGroupHeartbeatResponse) -> Vec<(u128, Vec<i32>)> {
        let mut out: Vec<(u128, Vec<i32>)> = resp
            .assignment
            .as_ref()
            .expect("an assignment")
            .topic_partitions
            .iter()
            .map(|t| (t.topic_id.as_u128(), t.partitions.clone()))
            .collect();
        out.sort();
        out
    }

    /// KIP-848 regex subscriptions as Kafka's `GroupMetadataManager` runs
    /// them: RE2 over whole topic names (internal ones included), names and
    /// regex unioned, new topics picked up by the next resolution (at most
    /// every 10 s), deleted ones dropped at once, a bad pattern refused
    /// before anything changes, and ConsumerGroupDescribe showing both.
    #[tokio::test(start_paused = true)]
    async fn regex_subscriptions_are_resolved_by_the_coordinator() {
        let h = harness().await;
        let live = Arc::new(LiveTopics::default());
        live.create("orders", 1, 2);
        live.create("orders-v2", 2, 1);
        live.create("xorders", 3, 1);
        live.create("payments", 4, 1);
        live.create("__consumer_offsets", 5, 1);
        h.coord.set_topic_lookup(Arc::new(live.clone()));
        let c = &h.coord;
        let describe = || async {
            c.consumer_group_describe(
                &ctx(1),
                ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(sb("rg"))]),
            )
            .await
            .groups
            .remove(0)
        };

        // A pattern RE2 cannot compile: nothing is created.
        let bad = c
            .consumer_group_heartbeat(
                &ctx(1),
                join("r").with_subscribed_topic_regex(Some(sb("orders(["))),
            )
            .await;
        assert_eq!(
            bad.error_code,
            code(ResponseError::InvalidRegularExpression)
        );
        let message = bad.error_message.as_ref().unwrap().as_str().to_owned();
        assert!(
            message
                .starts_with("SubscribedTopicRegex `orders([` is not a valid regular expression: "),
            "{message}"
        );
        assert_eq!(
            describe().await.error_code,
            code(ResponseError::GroupIdNotFound)
        );
        // Neither names nor regex, or owned partitions, on a join.
        let neither = c.consumer_group_heartbeat(&ctx(1), join("r")).await;
        assert_eq!(neither.error_code, code(ResponseError::InvalidRequest));
        let owning = c
            .consumer_group_heartbeat(
                &ctx(1),
                join("r")
                    .with_subscribed_topic_regex(Some(sb("orders.*")))
                    .with_topic_partitions(Some(vec![
                        TopicPartitions::default().with_topic_id(TOPIC),
                    ])),
            )
            .await;
        assert_eq!(owning.error_code, code(ResponseError::InvalidRequest));

        // The regex matches whole names: orders and orders-v2, not xorders.
        let r = c
            .consumer_group_heartbeat(
                &ctx(1),
                join("r").with_subscribed_topic_regex(Some(sb("orders.*"))),
            )
            .await;
        assert_eq!((r.error_code, r.member_epoch), (0, 1));
        assert_eq!(assigned(&r), vec![(1, vec![0, 1]), (2, vec![0])]);
        // An empty name list joins with no topics; internal topics match too.
        let n = c
            .consumer_group_heartbeat(
                &ctx(1),
                join("n")
                    .with_subscribed_topic_names(Some(vec![TopicName(sb("payments"))]))
                    .with_subscribed_topic_regex(Some(sb("__consumer.*"))),
            )
            .await;
        assert_eq!(n.error_code, 0);
        assert_eq!(
            assigned(&n),
            vec![(4, vec![0]), (5, vec![0])],
            "names and regex unioned"
        );
        let e = c
            .consumer_group_heartbeat(&ctx(1), join("e").with_subscribed_topic_names(Some(vec![])))
            .await;
        assert_eq!((e.error_code, assigned(&e)), (0, vec![]));
        let g = describe().await;
        let member = |id: &str| {
            g.members
                .iter()
                .find(|m| m.member_id.as_str() == id)
                .unwrap()
                .clone()
        };
        assert_eq!(
            member("r")
                .subscribed_topic_regex
                .as_ref()
                .map(|s| s.as_str()),
            Some("orders.*")
        );
        assert!(member("r").subscribed_topic_names.is_empty());
        assert_eq!(
            member("n").subscribed_topic_names,
            vec![TopicName(sb("payments"))]
        );
        assert_eq!(member("e").subscribed_topic_regex, None);
        assert_eq!(member("r").target_assignment.topic_partitions.len(), 2);

        // A new matching topic is picked up by the next resolution.
        live.create("orders-eu", 6, 1);
        h.advance(5_000).await;
        let r = c.consumer_group_heartbeat(&ctx(1), keepalive("r", 1)).await;
        assert_eq!(
            (r.error_code, r.assignment.is_none()),
            (0, true),
            "not resolved again yet"
        );
        let epoch = r.member_epoch;
        h.advance(5_000).await;
        let r = c
            .consumer_group_heartbeat(&ctx(1), keepalive("r", epoch))
            .await;
        assert_eq!(
            assigned(&r),
            vec![(1, vec![0, 1]), (2, vec![0]), (6, vec![0])]
        );
        assert!(r.member_epoch > epoch, "a rebalance");
        let epoch = r.member_epoch;
        // A deleted topic leaves the assignment at once.
        live.delete("orders-v2");
        let r = c
            .consumer_group_heartbeat(&ctx(1), keepalive("r", epoch))
            .await;
        assert_eq!(r.error_code, 0);
        assert_eq!(assigned(&r), vec![(1, vec![0, 1]), (6, vec![0])]);
        // Clearing the regex with an empty one leaves the names alone.
        let n = c
            .consumer_group_heartbeat(
                &ctx(1),
                keepalive("n", n.member_epoch).with_subscribed_topic_regex(Some(sb(""))),
            )
            .await;
        assert_eq!(n.error_code, 0);
        let g = describe().await;
        let n = g
            .members
            .iter()
            .find(|m| m.member_id.as_str() == "n")
            .unwrap();
        assert_eq!(
            n.subscribed_topic_regex.as_ref().map(|s| s.as_str()),
            Some("")
        );
        assert_eq!(
            n.target_assignment
                .topic_partitions
                .iter()
                .map(|t| t.topic_name.0.as_str())
                .collect::<Vec<_>>(),
            vec!["payments"]
        );
        // Regexes nobody uses any more are forgotten.
        let cg = c.lock().groups["rg"].consumer.clone().unwrap();
        assert_eq!(
            cg.regexes.keys().cloned().collect::<Vec<_>>(),
            vec!["orders.*".to_owned()]
        );
    }

    #[tokio::test]
    async fn consumer_settings_come_from_the_config() {
        let h = harness_with(GroupConfig {
            consumer_session_timeout_ms: 10_000,
            consumer_heartbeat_interval_ms: 1_000,
            consumer_assignors: vec!["range".into()],
            ..GroupConfig::default()
        })
        .await;
        h.coord.set_topic_lookup(Arc::new(Topics));
        let c = &h.coord;
        let refused = c
            .consumer_group_heartbeat(
                &ctx(1),
                hb("a", 0, None).with_server_assignor(Some(sb("uniform"))),
            )
            .await;
        assert_eq!(refused.error_code, code(ResponseError::UnsupportedAssignor));
        let a = c.consumer_group_heartbeat(&ctx(1), hb("a", 0, None)).await;
        assert_eq!(a.error_code, 0);
        assert_eq!(a.heartbeat_interval_ms, 1_000);
        let described = c
            .consumer_group_describe(
                &ctx(1),
                ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(sb("cg"))]),
            )
            .await;
        assert_eq!(described.groups[0].assignor_name.as_str(), "range");
        h.advance(10_000).await;
        assert!(
            c.lock().groups["cg"]
                .consumer
                .as_ref()
                .unwrap()
                .members
                .is_empty(),
            "expired after group.consumer.session.timeout.ms"
        );
    }

    #[tokio::test]
    async fn consumer_responses_encode() {
        let h = consumer_harness().await;
        for v in 0..=1 {
            let r = h
                .coord
                .consumer_group_heartbeat(&ctx(v), hb(&format!("m{v}"), 0, None))
                .await;
            encodes(&r, v);
            let r = h
                .coord
                .consumer_group_describe(
                    &ctx(v),
                    ConsumerGroupDescribeRequest::default()
                        .with_group_ids(vec![GroupId(sb("cg")), GroupId(sb("no"))]),
                )
                .await;
            encodes(&r, v);
        }
    }

    /// Every KIP-848 record type written to `cg`'s partition so far: (key
    /// type, tombstone).
    fn consumer_records(h: &Harness) -> Vec<(i16, bool)> {
        use super::consumer_records::ConsumerKey;
        h.log
            .records(h.coord.partition_for("cg"))
            .into_iter()
            .filter_map(|r| match RecordKey::decode(&r.key) {
                Ok(RecordKey::Consumer(k)) => {
                    let kind = match k {
                        ConsumerKey::GroupEpoch { .. } => 3,
                        ConsumerKey::Member { .. } => 5,
                        ConsumerKey::TargetEpoch { .. } => 6,
                        ConsumerKey::Target { .. } => 7,
                        ConsumerKey::Current { .. } => 8,
                    };
                    Some((kind, r.value.is_none()))
                }
                _ => None,
            })
            .collect()
    }

    /// Members a and b joined and reconciled: each holds two partitions at
    /// epoch 2. Returns their partitions.
    async fn two_stable_members(c: &GroupCoordinator) -> (Vec<i32>, Vec<i32>) {
        c.consumer_group_heartbeat(&ctx(1), hb("a", 0, Some(&[])))
            .await;
        c.consumer_group_heartbeat(&ctx(1), hb("b", 0, Some(&[])))
            .await;
        let a = c
            .consumer_group_heartbeat(&ctx(1), hb("a", 1, Some(&[0, 1, 2, 3])))
            .await;
        let kept: Vec<i32> = partitions(&a).unwrap().into_iter().collect();
        let a = c
            .consumer_group_heartbeat(&ctx(1), hb("a", 1, Some(&kept)))
            .await;
        assert_eq!(a.member_epoch, 2);
        let b = c
            .consumer_group_heartbeat(&ctx(1), hb("b", 2, Some(&[])))
            .await;
        let b_parts: Vec<i32> = partitions(&b).unwrap().into_iter().collect();
        assert_eq!(b_parts.len(), 2);
        (kept, b_parts)
    }

    fn describe_epochs(c: &GroupCoordinator) -> (i32, i32, Vec<(String, i32)>) {
        let state = c.lock();
        let cg = state.groups["cg"].consumer.as_ref().unwrap();
        (
            cg.group_epoch,
            cg.assignment_epoch,
            cg.members
                .values()
                .map(|m| (m.id.clone(), m.member_epoch))
                .collect(),
        )
    }

    #[tokio::test]
    async fn consumer_members_keep_epochs_and_assignments_across_a_restart() {
        let h = consumer_harness().await;
        let (a_parts, b_parts) = two_stable_members(&h.coord).await;
        let epochs = describe_epochs(&h.coord);
        assert_eq!(epochs, (2, 2, vec![("a".into(), 2), ("b".into(), 2)]));
        // A heartbeat that changes nothing writes nothing.
        let written = consumer_records(&h).len();
        let a = h
            .coord
            .consumer_group_heartbeat(&ctx(1), hb("a", 2, Some(&a_parts)))
            .await;
        assert_eq!((a.error_code, a.member_epoch), (0, 2));
        assert_eq!(consumer_records(&h).len(), written, "an idle heartbeat");

        let c = h.restart().await;
        c.set_topic_lookup(Arc::new(Topics));
        assert_eq!(describe_epochs(&c), epochs, "epochs survive the restart");
        for (member, parts) in [("a", &a_parts), ("b", &b_parts)] {
            let resp = c
                .consumer_group_heartbeat(&ctx(1), hb(member, 2, Some(parts)))
                .await;
            assert_eq!(resp.error_code, 0, "{member} is not fenced");
            assert_eq!(resp.member_epoch, 2, "{member} keeps its epoch");
            // The first answer after a load repeats the assignment.
            let got: Vec<i32> = partitions(&resp).unwrap().into_iter().collect();
            assert_eq!(&got, parts, "{member} keeps its partitions");
        }
        assert_eq!(describe_epochs(&c), epochs, "no rebalance");
        // The sessions start over at load time: a silent member expires.
        h.clock
            .advance(GroupConfig::default().consumer_session_timeout_ms - 1);
        c.tick().await;
        assert_eq!(describe_epochs(&c).2.len(), 2);
        let b = c
            .consumer_group_heartbeat(&ctx(1), hb("b", 2, Some(&b_parts)))
            .await;
        assert_eq!(b.error_code, 0);
        h.clock.advance(1);
        c.tick().await;
        let (group_epoch, _, members) = describe_epochs(&c);
        assert_eq!(members, vec![("b".to_owned(), 2)], "a expired");
        assert_eq!(group_epoch, 3);
        // b moves to epoch 3 and gets a's partitions back once it asks.
        let b = c
            .consumer_group_heartbeat(&ctx(1), hb("b", 2, Some(&b_parts)))
            .await;
        assert_eq!(b.member_epoch, 3);
        assert_eq!(partitions(&b), Some(BTreeSet::from([0, 1, 2, 3])));
    }

    #[tokio::test]
    async fn a_member_still_revoking_resumes_its_revocation_after_a_restart() {
        let h = consumer_harness().await;
        let c = &h.coord;
        c.consumer_group_heartbeat(&ctx(1), hb("a", 0, Some(&[])))
            .await;
        c.consumer_group_heartbeat(&ctx(1), hb("b", 0, Some(&[])))
            .await;
        let a = c
            .consumer_group_heartbeat(&ctx(1), hb("a", 1, Some(&[0, 1, 2, 3])))
            .await;
        let kept: Vec<i32> = partitions(&a).unwrap().into_iter().collect();
        assert_eq!((a.member_epoch, kept.len()), (1, 2), "a must revoke two");

        let c = h.restart().await;
        c.set_topic_lookup(Arc::new(Topics));
        {
            // Its revocation deadline restarts at load time, as in Kafka.
            let state = c.lock();
            let a = &state.groups["cg"].consumer.as_ref().unwrap().members["a"];
            assert_eq!(a.revoke_deadline_ms, Some(T0 + 30_000));
            assert_eq!(a.revoking.values().map(BTreeSet::len).sum::<usize>(), 2);
        }
        let b = c
            .consumer_group_heartbeat(&ctx(1), hb("b", 2, Some(&[])))
            .await;
        assert_eq!((b.error_code, b.member_epoch), (0, 2));
        assert_eq!(
            partitions(&b).unwrap_or_default(),
            BTreeSet::new(),
            "a has not revoked yet"
        );
        let a = c
            .consumer_group_heartbeat(&ctx(1), hb("a", 1, Some(&kept)))
            .await;
        assert_eq!(
            (a.error_code, a.member_epoch),
            (0, 2),
            "revocation acknowledged"
        );
        let b = c
            .consumer_group_heartbeat(&ctx(1), hb("b", 2, Some(&[])))
            .await;
        let got = partitions(&b).unwrap();
        assert_eq!(got.len(), 2);
        assert!(got.iter().all(|p| !kept.contains(p)));
    }

    #[tokio::test]
    async fn a_member_that_left_is_gone_after_a_restart() {
        let h = consumer_harness().await;
        let (_, b_parts) = two_stable_members(&h.coord).await;
        let left = h
            .coord
            .consumer_group_heartbeat(&ctx(1), hb("a", -1, None))
            .await;
        assert_eq!(left.error_code, 0);
        // Its current assignment and metadata are tombstoned.
        let tail: Vec<(i16, bool)> = consumer_records(&h)
            .into_iter()
            .filter(|(_, tombstone)| *tombstone)
            .collect();
        assert_eq!(tail, vec![(7, true), (8, true), (5, true)]);

        let c = h.restart().await;
        c.set_topic_lookup(Arc::new(Topics));
        let (group_epoch, _, members) = describe_epochs(&c);
        assert_eq!((group_epoch, members), (3, vec![("b".to_owned(), 2)]));
        let a = c
            .consumer_group_heartbeat(&ctx(1), hb("a", 2, Some(&[])))
            .await;
        assert_eq!(a.error_code, code(ResponseError::UnknownMemberId));
        let b = c
            .consumer_group_heartbeat(&ctx(1), hb("b", 2, Some(&b_parts)))
            .await;
        assert_eq!(b.member_epoch, 3);
        assert_eq!(partitions(&b), Some(BTreeSet::from([0, 1, 2, 3])));
    }

    #[tokio::test]
    async fn a_deleted_consumer_group_is_tombstoned() {
        let h = consumer_harness().await;
        let c = &h.coord;
        c.consumer_group_heartbeat(&ctx(1), hb("a", 0, Some(&[])))
            .await;
        c.offset_commit(&ctx(9), commit_req("cg", 1, "a", &[("t", 0, 3)]))
            .await;
        c.consumer_group_heartbeat(&ctx(1), hb("a", -1, None)).await;
        let deleted = c
            .delete_groups(
                &ctx(2),
                DeleteGroupsRequest::default().with_groups_names(vec![GroupId(sb("cg"))]),
            )
            .await;
        assert_eq!(deleted.results[0].error_code, 0);
        let records = consumer_records(&h);
        assert_eq!(
            records[records.len() - 2..],
            [(6, true), (3, true)],
            "target epoch and group epoch tombstoned"
        );
        let c = h.restart().await;
        assert!(!c.lock().groups.contains_key("cg"), "nothing comes back");
        let described = c
            .consumer_group_describe(
                &ctx(1),
                ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(sb("cg"))]),
            )
            .await;
        assert_eq!(
            described.groups[0].error_code,
            code(ResponseError::GroupIdNotFound)
        );
    }

    #[tokio::test]
    async fn consumer_members_move_with_a_leased_shard() {
        let h = consumer_harness().await;
        let (a_parts, _) = two_stable_members(&h.coord).await;
        let moved = GroupCoordinator::by_lease(
            GroupConfig::default(),
            node(),
            h.clock.clone(),
            h.log.clone(),
        );
        moved.set_topic_lookup(Arc::new(Topics));
        moved
            .ownership()
            .valid_until(std::time::Instant::now() + std::time::Duration::from_secs(60));
        moved
            .take_partition(h.coord.partition_for("cg"))
            .await
            .unwrap();
        let a = moved
            .consumer_group_heartbeat(&ctx(1), hb("a", 2, Some(&a_parts)))
            .await;
        assert_eq!((a.error_code, a.member_epoch), (0, 2));
        let got: Vec<i32> = partitions(&a).unwrap().into_iter().collect();
        assert_eq!(got, a_parts);
        assert_eq!(describe_epochs(&moved), describe_epochs(&h.coord));
    }

    #[tokio::test]
    async fn a_failed_write_is_answered_and_rewritten_with_the_next_change() {
        let h = consumer_harness().await;
        let c = &h.coord;
        c.consumer_group_heartbeat(&ctx(1), hb("a", 0, Some(&[])))
            .await;
        h.log.set_fail_appends(true);
        let b = c
            .consumer_group_heartbeat(&ctx(1), hb("b", 0, Some(&[])))
            .await;
        assert_ne!(b.error_code, 0, "the join was not durable");
        h.log.set_fail_appends(false);
        // a's next heartbeat writes b's join along with its own change.
        let a = c
            .consumer_group_heartbeat(&ctx(1), hb("a", 1, Some(&[0, 1, 2, 3])))
            .await;
        assert_eq!(a.error_code, 0);
        let restarted = h.restart().await;
        let (epoch, _, members) = describe_epochs(&restarted);
        assert_eq!(epoch, 2);
        assert_eq!(members.len(), 2, "b's join reached the log: {members:?}");
    }
}

fn txn_commit_req(
    group: &str,
    producer: (i64, i16),
    offsets: &[(&str, i32, i64)],
) -> kafka_protocol::messages::TxnOffsetCommitRequest {
    use kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    let mut topics: Vec<TxnOffsetCommitRequestTopic> = Vec::new();
    for (topic, partition, offset) in offsets {
        let p = TxnOffsetCommitRequestPartition::default()
            .with_partition_index(*partition)
            .with_committed_offset(*offset)
            .with_committed_metadata(Some(sb("txn")));
        match topics.iter_mut().find(|t| t.name.0.as_str() == *topic) {
            Some(t) => t.partitions.push(p),
            None => topics.push(
                TxnOffsetCommitRequestTopic::default()
                    .with_name(TopicName(sb(topic)))
                    .with_partitions(vec![p]),
            ),
        }
    }
    kafka_protocol::messages::TxnOffsetCommitRequest::default()
        .with_transactional_id(kafka_protocol::messages::TransactionalId(sb("tx")))
        .with_group_id(GroupId(sb(group)))
        .with_producer_id(kafka_protocol::messages::ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_generation_id(-1)
        .with_topics(topics)
}

fn marker(producer: (i64, i16), commit: bool) -> krabka_log::ControlMarker {
    krabka_log::ControlMarker {
        producer_id: krabka_ids::ProducerId(producer.0),
        producer_epoch: krabka_ids::ProducerEpoch(producer.1),
        commit,
        coordinator_epoch: 0,
        transaction_version: krabka_ids::TransactionVersion::V0,
    }
}

/// OffsetFetch v7 with `require_stable`: (offset, error) per partition.
async fn fetch_stable(
    coord: &GroupCoordinator,
    group: &str,
    topic: &str,
    partitions: &[i32],
) -> Vec<(i64, i16)> {
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_require_stable(true)
        .with_topics(Some(vec![
            OffsetFetchRequestTopic::default()
                .with_name(TopicName(sb(topic)))
                .with_partition_indexes(partitions.to_vec()),
        ]));
    let resp = coord.offset_fetch(&ctx(7), req).await;
    resp.topics[0]
        .partitions
        .iter()
        .map(|p| (p.committed_offset, p.error_code))
        .collect()
}

#[tokio::test]
async fn transactional_offsets_become_visible_on_the_commit_marker_only() {
    let h = harness().await;
    let p = h.coord.partition_for("g");
    h.coord
        .offset_commit(&ctx(8), commit_req("g", -1, "", &[("in", 0, 3)]))
        .await;
    let resp = h
        .coord
        .txn_offset_commit(
            &ctx(3),
            txn_commit_req("g", (77, 1), &[("in", 0, 9), ("in", 1, 4)]),
        )
        .await;
    let errors: Vec<i16> = resp
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect();
    assert_eq!(errors, vec![0, 0]);
    // Written as a transactional batch of producer 77 after the plain commit.
    let entries = h.log.entries(p);
    assert!(matches!(
        entries.as_slice(),
        [
            GroupLogEntry::Record { producer_id: None, .. },
            GroupLogEntry::Record { producer_id: Some(a), .. },
            GroupLogEntry::Record { producer_id: Some(b), .. },
        ] if a.0 == 77 && b.0 == 77
    ));
    // Pending: invisible to a plain fetch, unstable for require_stable.
    assert_eq!(fetch(&h.coord, "g", "in", &[0, 1]).await, vec![3, -1]);
    let unstable = code(ResponseError::UnstableOffsetCommit);
    assert_eq!(
        fetch_stable(&h.coord, "g", "in", &[0, 1, 2]).await,
        vec![(-1, unstable), (-1, unstable), (-1, 0)]
    );
    h.coord
        .write_txn_marker(p, marker((77, 1), true))
        .await
        .unwrap();
    assert_eq!(fetch(&h.coord, "g", "in", &[0, 1]).await, vec![9, 4]);
    assert_eq!(
        fetch_stable(&h.coord, "g", "in", &[0, 1]).await,
        vec![(9, 0), (4, 0)]
    );

    // An aborted transaction's offsets never show.
    h.coord
        .txn_offset_commit(&ctx(3), txn_commit_req("g", (77, 2), &[("in", 0, 50)]))
        .await;
    h.coord
        .write_txn_marker(p, marker((77, 2), false))
        .await
        .unwrap();
    assert_eq!(fetch_stable(&h.coord, "g", "in", &[0]).await, vec![(9, 0)]);

    // The log replays to the same offsets, markers and all.
    let restarted = h.restart().await;
    assert_eq!(fetch(&restarted, "g", "in", &[0, 1]).await, vec![9, 4]);
    assert_eq!(
        fetch_stable(&restarted, "g", "in", &[0]).await,
        vec![(9, 0)]
    );
}

#[tokio::test]
async fn pending_transactional_offsets_survive_a_restart_until_their_marker() {
    let h = harness().await;
    let p = h.coord.partition_for("g");
    h.coord
        .txn_offset_commit(&ctx(3), txn_commit_req("g", (5, 0), &[("in", 0, 42)]))
        .await;
    // The broker dies between the offsets and the marker: the offsets are
    // still pending after the restart, and the commit marker written then
    // makes them visible.
    let restarted = h.restart().await;
    assert_eq!(
        fetch_stable(&restarted, "g", "in", &[0]).await,
        vec![(-1, code(ResponseError::UnstableOffsetCommit))]
    );
    restarted
        .write_txn_marker(p, marker((5, 0), true))
        .await
        .unwrap();
    assert_eq!(fetch(&restarted, "g", "in", &[0]).await, vec![42]);
    let again = h.restart().await;
    assert_eq!(fetch_stable(&again, "g", "in", &[0]).await, vec![(42, 0)]);
}

#[tokio::test]
async fn a_regular_commit_written_after_the_transactional_one_wins() {
    let h = harness().await;
    let p = h.coord.partition_for("g");
    h.coord
        .txn_offset_commit(&ctx(3), txn_commit_req("g", (8, 0), &[("in", 0, 10)]))
        .await;
    h.coord
        .offset_commit(&ctx(8), commit_req("g", -1, "", &[("in", 0, 20)]))
        .await;
    h.coord
        .write_txn_marker(p, marker((8, 0), true))
        .await
        .unwrap();
    assert_eq!(fetch(&h.coord, "g", "in", &[0]).await, vec![20]);
    assert_eq!(fetch(&*h.restart().await, "g", "in", &[0]).await, vec![20]);
}

#[tokio::test]
async fn transactional_commits_are_validated_like_offset_commits() {
    let h = harness().await;
    // A group with members refuses a named member it does not know...
    let (ids, generation) = stable_group(&h, "g", 1).await;
    let member = ids[0].clone();
    let unknown = h
        .coord
        .txn_offset_commit(
            &ctx(3),
            txn_commit_req("g", (1, 0), &[("in", 0, 1)])
                .with_member_id(sb("stranger"))
                .with_generation_id(generation),
        )
        .await;
    assert_eq!(
        unknown.topics[0].partitions[0].error_code,
        code(ResponseError::UnknownMemberId)
    );
    // ...a stale generation...
    let stale = h
        .coord
        .txn_offset_commit(
            &ctx(3),
            txn_commit_req("g", (1, 0), &[("in", 0, 1)])
                .with_member_id(sb(&member))
                .with_generation_id(generation + 7),
        )
        .await;
    assert_eq!(
        stale.topics[0].partitions[0].error_code,
        code(ResponseError::IllegalGeneration)
    );
    // ...but a pre-v3 request naming nobody is not checked against members.
    let anonymous = h
        .coord
        .txn_offset_commit(&ctx(2), txn_commit_req("g", (1, 0), &[("in", 0, 1)]))
        .await;
    assert_eq!(anonymous.topics[0].partitions[0].error_code, 0);
    // An oversized metadata string fails its partition only.
    let big = "x".repeat(5000);
    let mut req = txn_commit_req("g", (1, 0), &[("in", 0, 1), ("in", 1, 2)]);
    req.topics[0].partitions[0].committed_metadata = Some(sb(&big));
    let resp = h.coord.txn_offset_commit(&ctx(3), req).await;
    let errors: Vec<i16> = resp.topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect();
    assert_eq!(errors, vec![code(ResponseError::OffsetMetadataTooLarge), 0]);
}

#[tokio::test]
async fn a_group_with_pending_transactional_offsets_is_not_expired() {
    let h = harness_with(GroupConfig {
        offsets_retention_ms: 1_000,
        offsets_retention_check_interval_ms: 100,
        ..GroupConfig::default()
    })
    .await;
    h.coord
        .txn_offset_commit(&ctx(3), txn_commit_req("g", (3, 0), &[("in", 0, 7)]))
        .await;
    h.advance(5_000).await;
    assert!(state_of(&h, "g").is_some(), "the group was deleted");
    let p = h.coord.partition_for("g");
    h.coord
        .write_txn_marker(p, marker((3, 0), true))
        .await
        .unwrap();
    assert_eq!(fetch(&h.coord, "g", "in", &[0]).await, vec![7]);
}

/// A `__consumer_offsets` whose partition `broken` cannot be read (a batch
/// failing its checks, or the partition offline).
struct BrokenPartition {
    inner: Arc<InMemoryGroupLog>,
    broken: i32,
}

#[async_trait::async_trait]
impl GroupLog for BrokenPartition {
    async fn append(
        &self,
        partition: i32,
        records: Vec<GroupLogRecord>,
        producer: Option<(krabka_ids::ProducerId, krabka_ids::ProducerEpoch)>,
    ) -> Result<i64, GroupError> {
        self.inner.append(partition, records, producer).await
    }

    async fn append_marker(
        &self,
        partition: i32,
        marker: krabka_log::ControlMarker,
    ) -> Result<i64, GroupError> {
        self.inner.append_marker(partition, marker).await
    }

    async fn read_all(&self, partition: i32) -> Result<Vec<GroupLogEntry>, GroupError> {
        if partition == self.broken {
            return Err(GroupError::Log {
                partition,
                reason: "CRC-32C mismatch at offset 1".into(),
            });
        }
        self.inner.read_all(partition).await
    }
}

#[tokio::test]
async fn a_partition_that_cannot_be_read_is_refused_and_the_others_load() {
    let h = harness().await;
    let broken = h.coord.partition_for("lost");
    let kept = (0..100)
        .map(|i| format!("kept-{i}"))
        .find(|g| h.coord.partition_for(g) != broken)
        .unwrap();
    for group in ["lost", kept.as_str()] {
        let mut p = OffsetCommitRequestPartition::default();
        p.partition_index = 0;
        p.committed_offset = 42;
        let mut t = OffsetCommitRequestTopic::default();
        t.name = TopicName(sb("t"));
        t.partitions = vec![p];
        let mut req = OffsetCommitRequest::default();
        req.group_id = GroupId(sb(group));
        req.generation_id_or_member_epoch = -1;
        req.topics = vec![t];
        let resp = h.coord.offset_commit(&ctx(8), req).await;
        assert!(resp.topics[0].partitions[0].error_code == 0);
    }
    let log = Arc::new(BrokenPartition {
        inner: h.log.clone(),
        broken,
    });
    let reloaded = GroupCoordinator::load(GroupConfig::default(), node(), h.clock.clone(), log)
        .await
        .unwrap();
    assert!(reloaded.refusal("lost").is_some_and(|r| r.code()
        == ResponseError::CoordinatorNotAvailable.code()
        && r.reason().contains("CRC")));
    assert!(reloaded.refusal(&kept).is_none());
    // The readable partition's state is whole.
    assert!(reloaded.lock().groups.contains_key(&kept));
    assert!(!reloaded.lock().groups.contains_key("lost"));
}

#[tokio::test]
async fn a_leased_coordinator_serves_a_partition_only_between_take_and_release() {
    let h = harness().await;
    let resp = h
        .coord
        .offset_commit(&ctx(8), commit_req("g", -1, "", &[("t", 0, 42)]))
        .await;
    assert_eq!(resp.topics[0].partitions[0].error_code, 0);
    let partition = h.coord.partition_for("g");

    // Another broker's coordinator over the same stored state.
    let moved = GroupCoordinator::by_lease(
        GroupConfig::default(),
        node(),
        h.clock.clone(),
        h.log.clone(),
    );
    let not_coordinator = ResponseError::NotCoordinator.code();
    assert_eq!(moved.refusal("g").map(|r| r.code()), Some(not_coordinator));
    moved
        .ownership()
        .valid_until(std::time::Instant::now() + std::time::Duration::from_secs(60));
    moved.take_partition(partition).await.unwrap();
    assert_eq!(moved.refusal("g"), None);
    assert_eq!(moved.ownership().held(), vec![partition]);
    let fetched = moved
        .offset_fetch(
            &ctx(7),
            OffsetFetchRequest::default()
                .with_group_id(GroupId(sb("g")))
                .with_topics(None),
        )
        .await;
    let committed: Vec<i64> = fetched
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.committed_offset))
        .collect();
    assert_eq!(
        committed,
        vec![42],
        "the committed offset moved with the shard"
    );

    moved.release_partition(partition);
    assert_eq!(moved.refusal("g").map(|r| r.code()), Some(not_coordinator));
    assert!(moved.lock().groups.is_empty(), "its groups are forgotten");
    // A lapsed lease stops service without a release.
    moved.take_partition(partition).await.unwrap();
    moved
        .ownership()
        .valid_until(std::time::Instant::now() - std::time::Duration::from_millis(1));
    assert_eq!(moved.refusal("g").map(|r| r.code()), Some(not_coordinator));
}
