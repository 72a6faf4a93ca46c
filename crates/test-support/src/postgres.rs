//! A real PostgreSQL server for tests, and a fresh database per test.
//!
//! `scripts/test` starts one server for the whole run and exports its URL as
//! `KRABKA_TEST_DATABASE_URL`; [`TestDatabase::create`] then makes a new
//! database on it, so tests do not see each other's tables. Without that
//! variable (a plain `cargo nextest` run) each test starts its own server.
//! A test that kills PostgreSQL itself starts its own [`PostgresProcess`].
//! Both go through `scripts/postgres-server`, which runs the postmaster in
//! the foreground (as the `postgres` user when the tests run as root), so
//! the child process here is the postmaster.

use {
    std::{
        path::PathBuf,
        process::Stdio,
        sync::atomic::{AtomicU32, Ordering},
        time::{Duration, Instant},
    },
    tokio::process::{Child, Command},
};

/// How long a starting server may take to accept connections.
const STARTUP_DEADLINE: Duration = Duration::from_secs(60);

/// The environment variable holding the shared test server's URL.
pub const DATABASE_URL_ENV: &str = "KRABKA_TEST_DATABASE_URL";

/// A PostgreSQL server on a free loopback port with its data in a temporary
/// directory; shut down (immediately) when dropped.
pub struct PostgresProcess {
    child: Option<Child>,
    dir: tempfile::TempDir,
    port: u16,
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/postgres-server")
}

/// Whether a PostgreSQL server can be started here.
#[must_use]
pub fn server_available() -> bool {
    std::fs::read_dir("/usr/lib/postgresql")
        .map(|dir| {
            dir.flatten()
                .any(|v| v.path().join("bin/postgres").exists())
        })
        .unwrap_or(false)
}

impl PostgresProcess {
    /// Starts a server and waits until it accepts connections.
    ///
    /// Returns `None` (after saying so on stderr) when PostgreSQL is not
    /// installed and the run is not under CI; under CI that is a broken
    /// setup and panics.
    ///
    /// # Panics
    ///
    /// When the server cannot be started or does not accept connections
    /// within a minute.
    pub async fn start() -> Option<Self> {
        if !server_available() {
            assert!(
                std::env::var_os("CI").is_none(),
                "no PostgreSQL server installed (scripts/test installs it)"
            );
            eprintln!("no PostgreSQL server under /usr/lib/postgresql; skipping");
            return None;
        }
        let dir = tempfile::tempdir().expect("a temporary directory");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let mut server = Self {
            child: None,
            dir,
            port,
        };
        server.spawn().await;
        Some(server)
    }

    async fn spawn(&mut self) {
        let child = Command::new(script())
            .arg(self.dir.path())
            .arg(self.port.to_string())
            .stdout(Stdio::null())
            .stderr(
                std::fs::File::create(self.dir.path().join("server.log"))
                    .map(Stdio::from)
                    .unwrap_or_else(|_| Stdio::null()),
            )
            .spawn()
            .expect("scripts/postgres-server starts");
        self.child = Some(child);
        let deadline = Instant::now() + STARTUP_DEADLINE;
        loop {
            if connect(&self.url("postgres")).await.is_ok() {
                return;
            }
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!(
                        "PostgreSQL exited with {status}: {}",
                        std::fs::read_to_string(self.dir.path().join("server.log"))
                            .unwrap_or_default()
                    );
                }
            }
            assert!(
                Instant::now() < deadline,
                "PostgreSQL did not accept connections on port {} within {STARTUP_DEADLINE:?}",
                self.port
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The URL of `database` on this server (superuser, no password).
    #[must_use]
    pub fn url(&self, database: &str) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// The postmaster's process id.
    #[must_use]
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// `kill -9` of the postmaster, waiting until it is gone (its backends
    /// follow on their own).
    pub async fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
    }

    /// Starts the server again on the same port and data (after
    /// [`kill9`](Self::kill9), PostgreSQL runs crash recovery).
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start).
    pub async fn restart(&mut self) {
        self.kill9().await;
        // Orphaned backends of a killed postmaster hold its shared memory
        // until they notice; the new postmaster waits for them itself.
        self.spawn().await;
    }
}

impl Drop for PostgresProcess {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
            // SIGQUIT: immediate shutdown, which also ends the backends.
            // SAFETY: `kill` has no memory-safety preconditions, and `pid`
            // is our own child, not yet reaped.
            unsafe {
                libc::kill(pid, libc::SIGQUIT);
            }
        }
        // Wait (bounded) so the data directory is removed after the server
        // stopped writing to it.
        let deadline = Instant::now() + Duration::from_secs(10);
        while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

async fn connect(url: &str) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

/// A database of its own for one test, on the shared server or on a server
/// started for it.
pub struct TestDatabase {
    url: String,
    _server: Option<PostgresProcess>,
}

static DATABASES: AtomicU32 = AtomicU32::new(0);

impl TestDatabase {
    /// Creates a fresh database on the server named by
    /// `KRABKA_TEST_DATABASE_URL`, or on a server started for this test.
    ///
    /// Returns `None` when there is no server and none can be started
    /// outside CI (see [`PostgresProcess::start`]).
    ///
    /// # Panics
    ///
    /// When the server refuses to create the database.
    pub async fn create() -> Option<Self> {
        let (admin_url, server) = match std::env::var(DATABASE_URL_ENV) {
            Ok(url) if !url.is_empty() => (url, None),
            _ => {
                let server = PostgresProcess::start().await?;
                (server.url("postgres"), Some(server))
            }
        };
        let name = format!(
            "krabka_test_{}_{}_{}",
            std::process::id(),
            DATABASES.fetch_add(1, Ordering::Relaxed),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos())
        );
        let client = connect(&admin_url)
            .await
            .unwrap_or_else(|e| panic!("connect to the test database server {admin_url}: {e}"));
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap_or_else(|e| panic!("create database {name}: {e}"));
        let url = with_database(&admin_url, &name);
        Some(Self {
            url,
            _server: server,
        })
    }

    /// The database's URL.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// `url` with its database name replaced by `database`.
fn with_database(url: &str, database: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let path_start = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    let mut out = format!("{}/{database}", &base[..path_start]);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn the_database_name_is_replaced() {
        assert_eq!(
            with_database("postgresql://postgres@127.0.0.1:5/postgres", "t1"),
            "postgresql://postgres@127.0.0.1:5/t1"
        );
        assert_eq!(
            with_database("postgresql://u@h:5?sslmode=disable", "t1"),
            "postgresql://u@h:5/t1?sslmode=disable"
        );
    }
}
