//! End to end: three processes of the `member` example campaign for one
//! role against the real `krabka` binary, each writing through the
//! producer bound to its epoch while it leads.
//!
//! The scenario is the issue's: one member is elected and the others see it;
//! `SIGSTOP` the leader past its lease and a standby takes over; `SIGCONT` it
//! and its next write is refused as fenced, so it steps down and joins the
//! tail of the line; `kill -9` the new leader and the head of the line takes
//! over within lease plus stagger. Last, the data topic and the role's
//! partition of `__coordination_state` are read with read_committed, and the
//! logs themselves must show that no two members ever completed a fenced
//! write in the same epoch window, that no holder took the role before the
//! lease it replaced ran out, and that every write a member saw acknowledged
//! is there.
//!
//! The members are separate processes so that `SIGSTOP` and `kill -9` are
//! real; the test reads their stdout (one line per event, see the example's
//! docs). Every wait is bounded by a generous ceiling, so a loaded machine
//! slows the test down instead of failing it, and a broken member fails it
//! with every member's transcript in the message.
//!
//! The example binary is built by Cargo with the crate's tests
//! (`target/<profile>/examples/member`); `KRABKA_COORD_MEMBER_BIN` overrides
//! the path. The broker comes from `krabka-test-support` as in the other
//! broker tests.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::Stdio,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use assert2::{assert, check};
use bytes::Bytes;
use krabka_client::{
    ApiKey, Client, ClientConfig, ConsumerConfig, IsolationLevel, NewTopic, OffsetSpec,
    PartitionFetch, TransactionalProducer,
};
use krabka_client_coordination::{
    Authority, CoordinationKey, CoordinationRecord, Coordinator, FencingToken, Role, Timing,
    broker::{BrokerTransport, BrokerTransportConfig, COORDINATION_TOPIC},
    record::decode_record,
};
use krabka_test_support::KrabkaProcess;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

const ROLE: &str = "controller";
const TOPIC: &str = "fenced-writes";
const LEASE: Duration = Duration::from_millis(2_000);
const STAGGER: Duration = Duration::from_millis(1_500);
const RENEW: Duration = Duration::from_millis(500);
const WRITE_INTERVAL: Duration = Duration::from_millis(200);
/// The longest one step may take before the test gives up; generous, because
/// the machine may be loaded, and never part of an assertion on speed.
const CEILING: Duration = Duration::from_secs(60);
/// What the takeover after `kill -9` may take beyond lease + stagger: the
/// standby's poll interval (500 ms), the challenge's requests, and
/// scheduling delays on a loaded two-core machine.
const TAKEOVER_SLACK: Duration = Duration::from_secs(3);
/// How many acknowledged writes each leader makes before the test moves on.
const WRITES_PER_LEADER: usize = 3;

fn timing() -> Timing {
    Timing {
        lease: LEASE,
        stagger: STAGGER,
        renew_after: RENEW,
    }
}

/// The `member` example binary.
fn member_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("KRABKA_COORD_MEMBER_BIN") {
        return PathBuf::from(path);
    }
    // This test runs from target/<profile>/deps; Cargo puts the crate's
    // examples in target/<profile>/examples when it builds the tests.
    let exe = std::env::current_exe().expect("the test binary's path");
    let path = exe.parent().and_then(Path::parent).map(|profile| {
        profile
            .join("examples")
            .join(format!("member{}", std::env::consts::EXE_SUFFIX))
    });
    match path {
        Some(path) if path.exists() => path,
        _ => panic!(
            "the member example is not built next to {}: run `cargo build --release --example member` \
             or set KRABKA_COORD_MEMBER_BIN",
            exe.display()
        ),
    }
}

/// One line of a member's output, as the test understands it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    Registered,
    Elected(FencingToken),
    Deposed(FencingToken),
    Expired(FencingToken),
    LeaderIs(String, FencingToken),
    Wrote(FencingToken, i64),
    Refused(FencingToken, String),
    Other,
}

fn token(text: &str) -> Option<FencingToken> {
    text.parse().ok()
}

/// Parses `<member>: <event>` as the example prints it.
fn parse(member: &str, line: &str) -> Event {
    let Some(rest) = line
        .strip_prefix(member)
        .and_then(|rest| rest.strip_prefix(": "))
    else {
        return Event::Other;
    };
    let words: Vec<&str> = rest.split_whitespace().collect();
    let parsed = match words.as_slice() {
        ["registered"] => Some(Event::Registered),
        ["ELECTED", "with", "token", t, ..] => token(t).map(Event::Elected),
        ["DEPOSED,", "token", t, "is", "fenced"] => token(t).map(Event::Deposed),
        ["lease", "of", t, "expired,", ..] => token(t).map(Event::Expired),
        ["leader", "is", leader, "with", "token", t] => {
            token(t).map(|t| Event::LeaderIs((*leader).to_owned(), t))
        }
        ["wrote", "under", t, "at", "offset", o] => token(t)
            .zip(o.parse().ok())
            .map(|(t, o)| Event::Wrote(t, o)),
        ["write", "under", t, "refused:", ..] => {
            let reason = rest.split_once("refused: ").map_or("", |(_, r)| r);
            token(t).map(|t| Event::Refused(t, reason.to_owned()))
        }
        _ => None,
    };
    parsed.unwrap_or(Event::Other)
}

/// A `member` process and what it has printed so far.
struct Member {
    name: String,
    child: Child,
    pid: u32,
    events: Arc<Mutex<Vec<(Instant, Event, String)>>>,
}

impl Member {
    fn spawn(bin: &Path, bootstrap: &str, name: &str) -> Self {
        let ms = |d: Duration| d.as_millis().to_string();
        let mut child = Command::new(bin)
            .args(["--role", ROLE, "--member", name, "--bootstrap", bootstrap])
            .args(["--lease-ms", &ms(LEASE), "--stagger-ms", &ms(STAGGER)])
            .args(["--renew-ms", &ms(RENEW), "--write-topic", TOPIC])
            .args(["--write-interval-ms", &ms(WRITE_INTERVAL)])
            .env("RUST_LOG", "krabka_client_coordination=info,warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("the member example starts");
        let pid = child.id().expect("a running member has a pid");
        let stdout = child.stdout.take().expect("the member's stdout is piped");
        let events: Arc<Mutex<Vec<(Instant, Event, String)>>> = Arc::default();
        let sink = Arc::clone(&events);
        let member = name.to_owned();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let event = parse(&member, &line);
                sink.lock()
                    .expect("the event list")
                    .push((Instant::now(), event, line));
            }
        });
        Self {
            name: name.to_owned(),
            child,
            pid,
            events,
        }
    }

    /// How many lines the member has printed.
    fn mark(&self) -> usize {
        self.events.lock().expect("the event list").len()
    }

    /// The events printed since `mark`, with the time the test read them.
    fn since(&self, mark: usize) -> Vec<(Instant, Event)> {
        self.events.lock().expect("the event list")[mark..]
            .iter()
            .map(|(at, event, _)| (*at, event.clone()))
            .collect()
    }

    fn all(&self) -> Vec<Event> {
        self.since(0).into_iter().map(|(_, event)| event).collect()
    }

    fn transcript(&self) -> String {
        self.events
            .lock()
            .expect("the event list")
            .iter()
            .map(|(_, _, line)| format!("    {line}\n"))
            .collect()
    }

    /// `kill -STOP` / `kill -CONT`.
    fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.pid).expect("a pid fits in pid_t");
        // SAFETY: kill(2) only takes integers and touches no memory of ours.
        let rc = unsafe { libc::kill(pid, signal) };
        assert!(
            rc == 0,
            "kill({pid}, {signal}): {}",
            std::io::Error::last_os_error()
        );
    }

    /// `kill -9`, and reap it.
    async fn kill9(&mut self) {
        self.child.kill().await.expect("SIGKILL reaches the member");
    }

    /// The first token the member was elected with since `mark`, and when.
    fn elected_since(&self, mark: usize) -> Option<(Instant, FencingToken)> {
        self.since(mark)
            .into_iter()
            .find_map(|(at, event)| match event {
                Event::Elected(token) => Some((at, token)),
                _ => None,
            })
    }

    /// Acknowledged writes under `token` since `mark`.
    fn writes_since(&self, mark: usize, token: FencingToken) -> usize {
        self.since(mark)
            .iter()
            .filter(|(_, event)| matches!(event, Event::Wrote(t, _) if *t == token))
            .count()
    }
}

fn transcripts(members: &[Member]) -> String {
    members
        .iter()
        .map(|m| format!("  {}:\n{}", m.name, m.transcript()))
        .collect()
}

/// Polls `check` until it answers, or fails with `what` and the transcripts.
async fn wait_until<T>(members: &[Member], what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + CEILING;
    loop {
        if let Some(answer) = check() {
            return answer;
        }
        assert!(
            Instant::now() < deadline,
            "gave up after {CEILING:?} waiting until {what}; the members printed:\n{}",
            transcripts(members)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A client once the broker answers (it listens before it serves).
async fn connect(addr: &str) -> Client {
    let deadline = Instant::now() + CEILING;
    loop {
        match Client::connect(&[addr], ClientConfig::default()).await {
            Ok(client) => return client,
            Err(error) => assert!(Instant::now() < deadline, "no broker at {addr}: {error}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every committed record of `topic`/`partition`: (offset, key, value).
async fn read_committed(client: &Client, topic: &str, partition: i32) -> Vec<(i64, Bytes, Bytes)> {
    let end = client
        .list_offset(
            topic,
            partition,
            OffsetSpec::Latest,
            IsolationLevel::ReadCommitted,
        )
        .await
        .expect("the last stable offset")
        .offset;
    let config = ConsumerConfig {
        isolation: IsolationLevel::ReadCommitted,
        max_wait: Duration::from_millis(100),
        min_bytes: 0,
        ..ConsumerConfig::default()
    };
    let mut records = Vec::new();
    let mut offset = 0;
    while offset < end {
        let fetch = [PartitionFetch {
            topic: topic.to_owned(),
            partition,
            offset,
        }];
        let fetched = client
            .fetch(&fetch, &config)
            .await
            .expect("a fetch")
            .pop()
            .expect("one partition")
            .expect("the partition's records");
        for record in fetched.records {
            records.push((
                record.offset,
                record.key.unwrap_or_default(),
                record.value.unwrap_or_default(),
            ));
        }
        assert!(
            fetched.next_offset > offset,
            "the read is stuck at {offset}"
        );
        offset = fetched.next_offset;
    }
    records
}

/// Checks a sequence of (offset, member, token) writes in offset order:
/// tokens never go back and each token is one member's. Returns the epoch
/// windows: each holder's member and token, in order.
fn epoch_windows(
    what: &str,
    writes: &[(i64, String, FencingToken)],
) -> Vec<(String, FencingToken)> {
    for pair in writes.windows(2) {
        check!(
            pair[0].2 <= pair[1].2,
            "{what}: a write under {} committed after one under {}",
            pair[0].2,
            pair[1].2
        );
    }
    let mut owners: HashMap<FencingToken, &str> = HashMap::new();
    for (offset, member, token) in writes {
        let owner = *owners.entry(*token).or_insert(member.as_str());
        check!(
            owner == member,
            "{what} at {offset}: {member} wrote under {owner}'s {token}"
        );
    }
    let mut windows: Vec<(String, FencingToken)> = Vec::new();
    for (_, member, token) in writes {
        if windows.last().map(|(_, t)| t) != Some(token) {
            windows.push((member.clone(), *token));
        }
    }
    windows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_elect_fail_over_and_fence_the_deposed_leader() {
    let Some(broker) = KrabkaProcess::start().await else {
        return;
    };
    let client = connect(broker.addr()).await;
    client
        .create_topic(
            &NewTopic::new(TOPIC, 1).replication_factor(1),
            Duration::from_secs(30),
        )
        .await
        .expect("the data topic");
    let bin = member_binary();
    let mut members: Vec<Member> = ["node-1", "node-2", "node-3"]
        .iter()
        .map(|name| Member::spawn(&bin, broker.addr(), name))
        .collect();

    // One member is elected; the other two see it and stay standbys.
    let (first, t1) = wait_until(&members, "a member is elected", || {
        members
            .iter()
            .enumerate()
            .find_map(|(i, m)| m.elected_since(0).map(|(_, token)| (i, token)))
    })
    .await;
    let leader = members[first].name.clone();
    wait_until(&members, "the standbys see the leader", || {
        members
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != first)
            .all(|(_, m)| m.all().contains(&Event::LeaderIs(leader.clone(), t1)))
            .then_some(())
    })
    .await;
    for (i, member) in members.iter().enumerate() {
        check!(
            (i == first) == member.elected_since(0).is_some(),
            "only {leader} is elected:\n{}",
            transcripts(&members)
        );
    }
    wait_until(&members, "the first leader writes", || {
        (members[first].writes_since(0, t1) >= WRITES_PER_LEADER).then_some(())
    })
    .await;

    // SIGSTOP the leader past its lease: a standby takes over.
    let marks: Vec<usize> = members.iter().map(Member::mark).collect();
    let stopped_at = Instant::now();
    members[first].signal(libc::SIGSTOP);
    let (second, (taken_at, t2)) = wait_until(&members, "a standby takes over", || {
        members
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != first)
            .find_map(|(i, m)| m.elected_since(marks[i]).map(|elected| (i, elected)))
    })
    .await;
    check!(t2 > t1);
    // (That it waited for the frozen leader's lease to run out is checked
    // from the committed leases at the end, on the members' own clocks.)
    let waited = taken_at.duration_since(stopped_at);
    wait_until(&members, "the second leader writes", || {
        (members[second].writes_since(marks[second], t2) >= WRITES_PER_LEADER).then_some(())
    })
    .await;

    // SIGCONT: the old leader's next write meets the broker's fence and it
    // steps down (deposed, not expired), then registers again at the tail.
    let resumed = members[first].mark();
    members[first].signal(libc::SIGCONT);
    wait_until(&members, "the resumed leader is deposed", || {
        members[first]
            .since(resumed)
            .iter()
            .any(|(_, event)| *event == Event::Deposed(t1))
            .then_some(())
    })
    .await;
    wait_until(&members, "the deposed leader registers again", || {
        members[first]
            .since(resumed)
            .iter()
            .any(|(_, event)| *event == Event::Registered)
            .then_some(())
    })
    .await;
    let after_resume: Vec<Event> = members[first]
        .since(resumed)
        .into_iter()
        .map(|(_, event)| event)
        .collect();
    check!(
        !after_resume.iter().any(|e| matches!(e, Event::Expired(_))),
        "{after_resume:?}"
    );
    for event in &after_resume {
        if let Event::Refused(token, reason) = event {
            check!(*token == t1);
            check!(reason.starts_with("fenced: "), "{reason}");
        }
    }

    // kill -9 the second leader: the head of the line (the member that
    // waited, not the one that came back) takes over within lease + stagger.
    let third = 3 - first - second;
    let marks: Vec<usize> = members.iter().map(Member::mark).collect();
    let killed_at = Instant::now();
    members[second].kill9().await;
    let (successor, (taken_at, t3)) =
        wait_until(&members, "a standby replaces the killed leader", || {
            [first, third].into_iter().find_map(|i| {
                members[i]
                    .elected_since(marks[i])
                    .map(|elected| (i, elected))
            })
        })
        .await;
    check!(
        successor == third,
        "the recovered member must not fail back:\n{}",
        transcripts(&members)
    );
    check!(t3 > t2);
    let took = taken_at.duration_since(killed_at);
    check!(
        took <= LEASE + STAGGER + TAKEOVER_SLACK,
        "took over {took:?} after the kill"
    );
    wait_until(&members, "the third leader writes", || {
        (members[third].writes_since(marks[third], t3) >= WRITES_PER_LEADER).then_some(())
    })
    .await;
    check!(members[first].elected_since(marks[first]).is_none());
    eprintln!("a standby took over {waited:?} after SIGSTOP and {took:?} after kill -9");

    // A third party checks the writers' tokens with one request each, and
    // joins nothing.
    let observer = Coordinator::new(
        Arc::new(BrokerTransport::new(
            connect(broker.addr()).await,
            BrokerTransportConfig {
                lease: LEASE,
                ..BrokerTransportConfig::default()
            },
        )),
        timing(),
    )
    .expect("a valid timing");
    let role = Role::new(ROLE).expect("a valid role");
    check!(observer.authority(&role, t3).await.unwrap() == Authority::Current);
    check!(observer.authority(&role, t1).await.unwrap() == Authority::Superseded { current: t3 });
    let counts = observer.transport().client().request_counts();
    check!(counts.sent(ApiKey::DescribeTransactions) == 2);
    check!(counts.sent(ApiKey::FindCoordinator) == 0);

    // Stop everyone, then take the role once more from here: that aborts
    // whatever transaction a killed member left open, so the last stable
    // offset covers every write.
    for member in &mut members {
        member.kill9().await;
    }
    TransactionalProducer::init(client.clone(), ROLE, LEASE)
        .await
        .expect("the test takes the role");
    let expected: Vec<(String, FencingToken)> = [(first, t1), (second, t2), (third, t3)]
        .into_iter()
        .map(|(i, token)| (members[i].name.clone(), token))
        .collect();

    // The leases: the same three windows, and each new holder's first grant
    // comes no earlier than the deadline of the lease it replaced (50 ms for
    // the members' clocks, which all read this machine's clock).
    let partition = observer
        .transport()
        .partition_of(&role)
        .await
        .expect("the role's partition");
    let mut leases = Vec::new();
    for (offset, key, value) in read_committed(&client, COORDINATION_TOPIC, partition).await {
        let (key, record) = decode_record(&key, &value).expect("a coordination record");
        if let (CoordinationKey::Lease { role: of }, CoordinationRecord::Lease(lease)) =
            (key, record)
            && of == role
        {
            leases.push((offset, lease));
        }
    }
    let lease_writes: Vec<(i64, String, FencingToken)> = leases
        .iter()
        .map(|(offset, lease)| (*offset, lease.member.to_string(), lease.token))
        .collect();
    check!(epoch_windows("the leases", &lease_writes) == expected);
    for pair in leases.windows(2) {
        let ((_, before), (offset, after)) = (&pair[0], &pair[1]);
        if before.token != after.token {
            check!(
                after.granted_at + 50 >= before.deadline,
                "offset {offset}: {} took the role at {} from {} whose lease ran until {}",
                after.member,
                after.granted_at,
                before.member,
                before.deadline
            );
        }
    }

    // The application's writes: each committed write names its member and
    // token, and the epoch windows are exactly the three leaderships.
    let log = read_committed(&client, TOPIC, 0).await;
    let mut written = Vec::new();
    for (offset, key, value) in &log {
        let value = String::from_utf8_lossy(value);
        let fields: Vec<&str> = value.split(' ').collect();
        let [member, token, _sequence] = fields.as_slice() else {
            panic!("offset {offset}: unexpected value {value:?}");
        };
        check!(key.as_ref() == member.as_bytes());
        let token: FencingToken = token.parse().expect("a token");
        written.push((*offset, (*member).to_owned(), token));
    }
    check!(epoch_windows("the data topic", &written) == expected);

    // Every write a member saw acknowledged is in the log as it was written.
    let by_offset: HashMap<i64, (&str, FencingToken)> = written
        .iter()
        .map(|(offset, member, token)| (*offset, (member.as_str(), *token)))
        .collect();
    for member in &members {
        for event in member.all() {
            if let Event::Wrote(token, offset) = event {
                check!(
                    by_offset.get(&offset) == Some(&(member.name.as_str(), token)),
                    "{} saw offset {offset} acknowledged under {token}",
                    member.name
                );
            }
        }
    }
    broker.stop().await;
}
