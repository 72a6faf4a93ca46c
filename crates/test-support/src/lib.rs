//! The real `krabka` broker as a child process, for integration tests of the
//! crates that sit beside the broker (the client, the metadata event log, the
//! coordination transport).
//!
//! Those crates cannot depend on `krabka-broker` (dependencies point one way),
//! so they cannot use Cargo's `CARGO_BIN_EXE_krabka`; they take the binary the
//! test command built instead. Each [`KrabkaProcess`] listens on its own free
//! 127.0.0.1 port with its own temporary data directory, and is killed when
//! dropped. [`postgres`] does the same for PostgreSQL, the cluster mode's
//! database.

pub mod postgres;

pub use postgres::{PostgresProcess, TestDatabase};

use {
    std::{
        path::PathBuf,
        process::Stdio,
        time::{Duration, Instant},
    },
    tokio::process::{Child, Command},
};

/// How long a starting broker may take to accept connections.
const STARTUP_DEADLINE: Duration = Duration::from_secs(60);

/// A running `krabka serve` on a free loopback port.
pub struct KrabkaProcess {
    bin: PathBuf,
    child: Child,
    addr: String,
    dir: tempfile::TempDir,
}

/// The broker binary: `KRABKA_BIN` (set by `scripts/test`), else the
/// workspace's `target/release/krabka` if it exists.
#[must_use]
pub fn broker_binary() -> Option<PathBuf> {
    std::env::var_os("KRABKA_BIN")
        .map(PathBuf::from)
        .or_else(|| {
            let path =
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/release/krabka");
            path.exists().then_some(path)
        })
}

impl KrabkaProcess {
    /// Starts a broker and waits until it accepts connections.
    ///
    /// Returns `None` (after saying so on stderr) when no binary exists and
    /// the run is not under CI, so `cargo nextest` works on a machine that
    /// never built the broker. Under CI (`CI` set) a missing binary is a
    /// broken setup and panics instead of letting the test pass unchecked.
    ///
    /// # Panics
    ///
    /// When the binary is missing under CI, cannot be spawned, or does not
    /// listen within a minute.
    pub async fn start() -> Option<Self> {
        let Some(bin) = broker_binary() else {
            assert!(
                std::env::var_os("CI").is_none(),
                "no krabka binary: set KRABKA_BIN or build target/release/krabka"
            );
            eprintln!("no krabka binary (set KRABKA_BIN or build target/release/krabka); skipping");
            return None;
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free loopback port")
            .port();
        let dir = tempfile::tempdir().expect("a temporary data directory");
        let addr = format!("127.0.0.1:{port}");
        let child = spawn(&bin, &addr, &dir).await;
        Some(Self {
            bin,
            child,
            addr,
            dir,
        })
    }

    /// The `host:port` the broker listens on.
    #[must_use]
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// `kill -9`, then starts the broker again on the same port and data.
    ///
    /// # Panics
    ///
    /// When the restarted broker does not listen within a minute.
    pub async fn crash_and_restart(&mut self) {
        let _ = self.child.kill().await;
        self.child = spawn(&self.bin, &self.addr, &self.dir).await;
    }

    /// Kills the broker and removes its data.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

async fn spawn(bin: &PathBuf, addr: &str, dir: &tempfile::TempDir) -> Child {
    let child = Command::new(bin)
        .arg("serve")
        .arg("--override")
        .arg(format!("listeners=PLAINTEXT://{addr}"))
        .arg("--override")
        .arg(format!("log.dirs={}", dir.path().join("data").display()))
        .arg("--override")
        .arg("num.partitions=1")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("the krabka binary starts");
    let deadline = Instant::now() + STARTUP_DEADLINE;
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        assert!(Instant::now() < deadline, "krabka did not listen on {addr}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child
}
