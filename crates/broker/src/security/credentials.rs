//! SCRAM users: salted, hashed credentials kept durably behind a narrow
//! trait ([`ScramStore`]) so that cluster mode can keep them in PostgreSQL,
//! managed with AlterUserScramCredentials / DescribeUserScramCredentials as
//! Kafka's `ScramControlManager` does, and bootstrapped at startup from a
//! file in the syntax of Kafka's `kafka-storage format --add-scram`
//! (`SCRAM-SHA-256=[name=admin,password=admin-secret]`), so the first
//! administrator can log in before anyone could create users.

use {
    super::sasl::scram::{MAX_ITERATIONS, MIN_ITERATIONS, ScramCredential, ScramMechanism},
    kafka_protocol::error::ResponseError,
    std::{
        collections::{BTreeMap, HashMap},
        num::NonZeroU32,
        path::{Path, PathBuf},
        sync::{Arc, Mutex, PoisonError, RwLock},
    },
};

/// The file name of the single-node store in the log directory.
pub const SCRAM_FILE: &str = "krabka-scram-credentials.json";

/// One stored credential.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoredCredential {
    /// The user name.
    pub user: String,
    /// The mechanism.
    pub mechanism: ScramMechanism,
    /// Salt, keys and iterations.
    #[serde(flatten)]
    pub credential: ScramCredential,
}

/// Why the store could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("SCRAM credential store {path}: {reason}")]
pub struct CredentialStoreError {
    /// The file or table.
    pub path: String,
    /// What went wrong.
    pub reason: String,
}

/// Durable storage of SCRAM credentials. Every method is blocking.
pub trait ScramStore: Send + Sync + std::fmt::Debug {
    /// Every credential stored.
    ///
    /// # Errors
    ///
    /// [`CredentialStoreError`] when the store cannot be read.
    fn list(&self) -> Result<Vec<StoredCredential>, CredentialStoreError>;

    /// Stores `upserts` (replacing a user's credential of the same
    /// mechanism) and removes `deletions`, all or nothing, durably.
    ///
    /// # Errors
    ///
    /// [`CredentialStoreError`] when the store cannot be written; nothing changed.
    fn apply(
        &self,
        upserts: &[StoredCredential],
        deletions: &[(String, ScramMechanism)],
    ) -> Result<(), CredentialStoreError>;
}

/// The single-node store: one JSON file written with
/// [`krabka_ids::durable::write_atomic`].
#[derive(Debug)]
pub struct FileScramStore {
    path: PathBuf,
    credentials: Mutex<BTreeMap<(String, ScramMechanism), ScramCredential>>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct FileContents {
    version: u32,
    credentials: Vec<StoredCredential>,
}

impl FileScramStore {
    /// Opens (or starts empty) the store in `log_dir`.
    ///
    /// # Errors
    ///
    /// [`CredentialStoreError`] when the file exists but cannot be read.
    pub fn open(log_dir: &Path) -> Result<Self, CredentialStoreError> {
        let path = log_dir.join(SCRAM_FILE);
        let error = |reason: String| CredentialStoreError {
            path: path.display().to_string(),
            reason,
        };
        let credentials = match std::fs::read(&path) {
            Ok(bytes) => {
                let contents: FileContents =
                    serde_json::from_slice(&bytes).map_err(|e| error(e.to_string()))?;
                if contents.version != 1 {
                    return Err(error(format!("unknown version {}", contents.version)));
                }
                contents
                    .credentials
                    .into_iter()
                    .map(|c| ((c.user, c.mechanism), c.credential))
                    .collect()
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(error(e.to_string())),
        };
        Ok(Self {
            path,
            credentials: Mutex::new(credentials),
        })
    }
}

impl ScramStore for FileScramStore {
    fn list(&self) -> Result<Vec<StoredCredential>, CredentialStoreError> {
        let credentials = self
            .credentials
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Ok(credentials
            .iter()
            .map(|((user, mechanism), credential)| StoredCredential {
                user: user.clone(),
                mechanism: *mechanism,
                credential: credential.clone(),
            })
            .collect())
    }

    fn apply(
        &self,
        upserts: &[StoredCredential],
        deletions: &[(String, ScramMechanism)],
    ) -> Result<(), CredentialStoreError> {
        let mut credentials = self
            .credentials
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut next = credentials.clone();
        for key in deletions {
            next.remove(key);
        }
        for c in upserts {
            next.insert((c.user.clone(), c.mechanism), c.credential.clone());
        }
        let contents = FileContents {
            version: 1,
            credentials: next
                .iter()
                .map(|((user, mechanism), credential)| StoredCredential {
                    user: user.clone(),
                    mechanism: *mechanism,
                    credential: credential.clone(),
                })
                .collect(),
        };
        let error = |reason: String| CredentialStoreError {
            path: self.path.display().to_string(),
            reason,
        };
        let text = serde_json::to_vec_pretty(&contents).map_err(|e| error(e.to_string()))?;
        krabka_ids::durable::write_atomic(&self.path, &text).map_err(|e| error(e.to_string()))?;
        *credentials = next;
        Ok(())
    }
}

/// A per-user outcome of AlterUserScramCredentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserResult {
    /// The user.
    pub user: String,
    /// Kafka's error code (0 on success).
    pub code: i16,
    /// Kafka's message.
    pub message: Option<String>,
}

/// One upsertion of AlterUserScramCredentials.
#[derive(Debug, Clone)]
pub struct Upsertion {
    /// The user.
    pub user: String,
    /// Kafka's mechanism code.
    pub mechanism: i8,
    /// Iterations.
    pub iterations: i32,
    /// The salt.
    pub salt: Vec<u8>,
    /// `Hi(password, salt, iterations)`, computed by the client.
    pub salted_password: Vec<u8>,
}

/// The SCRAM users the broker knows: a snapshot for authentication, and
/// the store behind it.
#[derive(Debug)]
pub struct ScramUsers {
    /// Replaced once when a broker joins a cluster (its users then live in
    /// the cluster's database).
    store: RwLock<Arc<dyn ScramStore>>,
    /// The bootstrap file's users, added to any store that lacks them.
    bootstrap: Vec<StoredCredential>,
    snapshot: RwLock<HashMap<(String, ScramMechanism), ScramCredential>>,
    writes: Mutex<()>,
}

impl ScramUsers {
    /// Loads `store`, then adds the users of `bootstrap` (if given) that it
    /// does not hold yet (blocking).
    ///
    /// # Errors
    ///
    /// A reason when the store cannot be read or written, or the bootstrap
    /// file cannot be read or parsed.
    pub fn open(store: Arc<dyn ScramStore>, bootstrap: Option<&Path>) -> Result<Self, String> {
        let bootstrap = match bootstrap {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("SCRAM bootstrap file {}: {e}", path.display()))?;
                parse_bootstrap(&text)
                    .map_err(|e| format!("SCRAM bootstrap file {}: {e}", path.display()))?
            }
            None => Vec::new(),
        };
        let users = Self {
            snapshot: RwLock::new(HashMap::new()),
            store: RwLock::new(store),
            bootstrap,
            writes: Mutex::new(()),
        };
        users.reload().map_err(|e| e.to_string())?;
        users.add_bootstrap_users()?;
        Ok(users)
    }

    /// Keeps the users in `store` from now on, adds the bootstrap file's
    /// users it lacks, and serves what it holds (blocking).
    ///
    /// # Errors
    ///
    /// A reason when `store` cannot be read or written; the users served
    /// are then `store`'s as far as it could be read.
    pub fn use_store(&self, store: Arc<dyn ScramStore>) -> Result<(), String> {
        {
            let _writing = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
            *self.store.write().unwrap_or_else(PoisonError::into_inner) = store;
            self.reload().map_err(|e| e.to_string())?;
        }
        self.add_bootstrap_users()
    }

    /// Serves `all`, as the store now holds them (changes another broker of
    /// the cluster made).
    pub fn install(&self, all: Vec<StoredCredential>) {
        let _writing = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
        let next: HashMap<_, _> = all
            .into_iter()
            .map(|c| ((c.user, c.mechanism), c.credential))
            .collect();
        let mut snapshot = self
            .snapshot
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if *snapshot != next {
            tracing::info!(
                credentials = next.len(),
                "SCRAM users changed in the cluster"
            );
            *snapshot = next;
        }
    }

    fn store(&self) -> Arc<dyn ScramStore> {
        Arc::clone(&self.store.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Adds the bootstrap file's users the store does not hold yet.
    fn add_bootstrap_users(&self) -> Result<(), String> {
        let _writing = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
        let missing: Vec<StoredCredential> = self
            .bootstrap
            .iter()
            .filter(|c| self.get(&c.user, c.mechanism).is_none())
            .cloned()
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        self.store()
            .apply(&missing, &[])
            .map_err(|e| e.to_string())?;
        self.reload().map_err(|e| e.to_string())?;
        for c in &missing {
            tracing::info!(user = %c.user, mechanism = c.mechanism.name(), "SCRAM user created from the bootstrap file");
        }
        Ok(())
    }

    fn reload(&self) -> Result<(), CredentialStoreError> {
        let all = self.store().list()?;
        *self
            .snapshot
            .write()
            .unwrap_or_else(PoisonError::into_inner) = all
            .into_iter()
            .map(|c| ((c.user, c.mechanism), c.credential))
            .collect();
        Ok(())
    }

    /// The credential of `user` for `mechanism`.
    #[must_use]
    pub fn get(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        self.snapshot
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(user.to_owned(), mechanism))
            .cloned()
    }

    /// The mechanisms and iterations of each user's credentials: every
    /// user's when `users` is `None`.
    #[must_use]
    pub fn describe(&self) -> BTreeMap<String, Vec<(ScramMechanism, u32)>> {
        let snapshot = self.snapshot.read().unwrap_or_else(PoisonError::into_inner);
        let mut out: BTreeMap<String, Vec<(ScramMechanism, u32)>> = BTreeMap::new();
        for ((user, mechanism), c) in snapshot.iter() {
            out.entry(user.clone())
                .or_default()
                .push((*mechanism, c.iterations));
        }
        for list in out.values_mut() {
            list.sort();
        }
        out
    }

    /// AlterUserScramCredentials, validated as Kafka's controller does and
    /// stored all at once (blocking).
    pub fn alter(&self, deletions: &[(String, i8)], upsertions: &[Upsertion]) -> Vec<UserResult> {
        let _writing = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
        let mut errors: BTreeMap<String, (ResponseError, &'static str)> = BTreeMap::new();
        let mut to_delete: BTreeMap<String, ScramMechanism> = BTreeMap::new();
        let mut to_upsert: BTreeMap<String, StoredCredential> = BTreeMap::new();
        let twice = (
            ResponseError::DuplicateResource,
            "A user credential cannot be altered twice in the same request",
        );
        let check_name =
            |user: &str, mechanism: i8| -> Result<ScramMechanism, (ResponseError, &'static str)> {
                if user.is_empty() {
                    return Err((
                        ResponseError::UnacceptableCredential,
                        "Username must not be empty",
                    ));
                }
                ScramMechanism::from_code(mechanism).ok_or((
                    ResponseError::UnsupportedSaslMechanism,
                    "Unknown SCRAM mechanism",
                ))
            };
        for (user, mechanism) in deletions {
            if errors.contains_key(user) {
                continue;
            }
            if to_delete.remove(user).is_some() {
                errors.insert(user.clone(), twice);
                continue;
            }
            match check_name(user, *mechanism) {
                Err(e) => {
                    errors.insert(user.clone(), e);
                }
                Ok(m) if self.get(user, m).is_none() => {
                    errors.insert(
                        user.clone(),
                        (
                            ResponseError::ResourceNotFound,
                            "Attempt to delete a user credential that does not exist",
                        ),
                    );
                }
                Ok(m) => {
                    to_delete.insert(user.clone(), m);
                }
            }
        }
        for u in upsertions {
            if errors.contains_key(&u.user) {
                continue;
            }
            if to_delete.remove(&u.user).is_some() || to_upsert.remove(&u.user).is_some() {
                errors.insert(u.user.clone(), twice);
                continue;
            }
            let checked = check_name(&u.user, u.mechanism).and_then(|m| {
                if u.iterations < MIN_ITERATIONS as i32 {
                    Err((ResponseError::UnacceptableCredential, "Too few iterations"))
                } else if u.iterations > MAX_ITERATIONS as i32 {
                    Err((ResponseError::UnacceptableCredential, "Too many iterations"))
                } else if u.salt.is_empty() || u.salted_password.is_empty() {
                    Err((
                        ResponseError::UnacceptableCredential,
                        "Salt and salted password must not be empty",
                    ))
                } else {
                    Ok(m)
                }
            });
            match checked {
                Err(e) => {
                    errors.insert(u.user.clone(), e);
                }
                Ok(m) => {
                    to_upsert.insert(
                        u.user.clone(),
                        StoredCredential {
                            user: u.user.clone(),
                            mechanism: m,
                            credential: ScramCredential::from_salted_password(
                                m,
                                &u.salted_password,
                                u.salt.clone(),
                                u.iterations.unsigned_abs(),
                            ),
                        },
                    );
                }
            }
        }
        let deletions: Vec<(String, ScramMechanism)> = to_delete.into_iter().collect();
        let upserts: Vec<StoredCredential> = to_upsert.into_values().collect();
        let mut results = Vec::new();
        let stored = if deletions.is_empty() && upserts.is_empty() {
            Ok(())
        } else {
            self.store()
                .apply(&upserts, &deletions)
                .and_then(|()| self.reload())
        };
        let ok_users = deletions
            .iter()
            .map(|(u, _)| u.clone())
            .chain(upserts.iter().map(|c| c.user.clone()));
        match stored {
            Ok(()) => {
                for user in ok_users {
                    tracing::info!(%user, "SCRAM credential altered");
                    results.push(UserResult {
                        user,
                        code: 0,
                        message: None,
                    });
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot store SCRAM credentials");
                for user in ok_users {
                    results.push(UserResult {
                        user,
                        code: ResponseError::UnknownServerError.code(),
                        message: Some("The credential could not be stored".into()),
                    });
                }
            }
        }
        for (user, (error, message)) in errors {
            results.push(UserResult {
                user,
                code: error.code(),
                message: Some(message.into()),
            });
        }
        results
    }
}

/// Parses bootstrap lines `SCRAM-SHA-256=[name=alice,password=secret]`
/// (optionally `iterations=8192`); `#` starts a comment.
///
/// # Errors
///
/// A reason naming the line (never the password).
pub fn parse_bootstrap(text: &str) -> Result<Vec<StoredCredential>, String> {
    let mut out = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |what: &str| format!("line {}: {what}", number + 1);
        let (mechanism, rest) = line
            .split_once('=')
            .ok_or_else(|| bad("expected MECHANISM=[...]"))?;
        let mechanism = ScramMechanism::parse(mechanism.trim())
            .ok_or_else(|| bad("the mechanism must be SCRAM-SHA-256 or SCRAM-SHA-512"))?;
        let fields = rest
            .trim()
            .strip_prefix('[')
            .and_then(|r| r.strip_suffix(']'))
            .ok_or_else(|| bad("expected [name=...,password=...]"))?;
        let mut name = None;
        let mut password = None;
        let mut iterations = MIN_ITERATIONS;
        for field in fields.split(',') {
            let (key, value) = field
                .split_once('=')
                .ok_or_else(|| bad("expected key=value"))?;
            let value = value.trim().trim_matches('"');
            match key.trim() {
                "name" => name = Some(value.to_owned()),
                "password" => password = Some(value.to_owned()),
                "iterations" => {
                    iterations = value
                        .parse()
                        .ok()
                        .filter(|i| (MIN_ITERATIONS..=MAX_ITERATIONS).contains(i))
                        .ok_or_else(|| bad("iterations must be 4096-16384"))?;
                }
                _ => return Err(bad("unknown key (expected name, password, iterations)")),
            }
        }
        let (Some(user), Some(password)) = (name, password) else {
            return Err(bad("name and password are required"));
        };
        if user.is_empty() {
            return Err(bad("the name must not be empty"));
        }
        let iterations = NonZeroU32::new(iterations).ok_or_else(|| bad("iterations"))?;
        out.push(StoredCredential {
            user,
            mechanism,
            credential: ScramCredential::from_password(mechanism, &password, iterations),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    fn users(dir: &Path, bootstrap: Option<&Path>) -> ScramUsers {
        ScramUsers::open(
            std::sync::Arc::new(FileScramStore::open(dir).unwrap()),
            bootstrap,
        )
        .unwrap()
    }

    fn upsert(user: &str, mechanism: i8, iterations: i32) -> Upsertion {
        Upsertion {
            user: user.into(),
            mechanism,
            iterations,
            salt: b"salt".to_vec(),
            salted_password: b"salted".to_vec(),
        }
    }

    #[test]
    fn alter_validates_like_kafka_and_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let u = users(dir.path(), None);
        let results = u.alter(
            &[("ghost".into(), 1)],
            &[
                upsert("alice", 1, 4096),
                upsert("bob", 2, 100),
                upsert("carol", 9, 4096),
                upsert("", 1, 4096),
                upsert("dave", 1, 99999),
            ],
        );
        let code = |user: &str| results.iter().find(|r| r.user == user).unwrap().code;
        check!(code("alice") == 0);
        check!(code("ghost") == ResponseError::ResourceNotFound.code());
        check!(code("bob") == ResponseError::UnacceptableCredential.code());
        check!(code("carol") == ResponseError::UnsupportedSaslMechanism.code());
        check!(code("") == ResponseError::UnacceptableCredential.code());
        check!(code("dave") == ResponseError::UnacceptableCredential.code());
        let twice = u.alter(&[], &[upsert("erin", 1, 4096), upsert("erin", 2, 4096)]);
        check!(twice[0].code == ResponseError::DuplicateResource.code());
        let reopened = users(dir.path(), None);
        check!(reopened.get("alice", ScramMechanism::Sha256).is_some());
        check!(reopened.get("alice", ScramMechanism::Sha512).is_none());
        check!(reopened.describe()["alice"] == vec![(ScramMechanism::Sha256, 4096)]);
        let deleted = reopened.alter(&[("alice".into(), 1)], &[]);
        check!(deleted[0].code == 0);
        check!(users(dir.path(), None).describe().is_empty());
        let text = std::fs::read_to_string(dir.path().join(SCRAM_FILE)).unwrap();
        check!(!text.contains("salted"));
    }

    #[test]
    fn bootstrap_adds_missing_users_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("scram.txt");
        std::fs::write(
            &file,
            "# admins\nSCRAM-SHA-256=[name=admin,password=admin-secret]\nSCRAM-SHA-512=[name=admin,password=admin-secret,iterations=8192]\n",
        )
        .unwrap();
        let u = users(dir.path(), Some(&file));
        let first = u.get("admin", ScramMechanism::Sha256).unwrap();
        check!(u.get("admin", ScramMechanism::Sha512).unwrap().iterations == 8192);
        // A second start keeps the stored credential (a changed password sticks).
        let again = users(dir.path(), Some(&file));
        check!(again.get("admin", ScramMechanism::Sha256).unwrap() == first);
        for bad in [
            "SCRAM-SHA-1=[name=a,password=b]",
            "SCRAM-SHA-256=[name=a]",
            "SCRAM-SHA-256=name=a,password=b",
            "SCRAM-SHA-256=[name=a,password=b,iterations=10]",
        ] {
            let err = parse_bootstrap(bad).unwrap_err();
            check!(!err.contains("password=b"), "{err}");
        }
    }
}
