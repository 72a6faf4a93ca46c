//! Versioned schema migrations, applied when a broker connects.
//!
//! Each migration is one SQL file run in one transaction together with the
//! row that records it, under a transaction-scoped advisory lock: brokers
//! starting at once queue on the lock, and the second finds the work done.
//! PostgreSQL's DDL is transactional, so a failed migration leaves nothing
//! behind. A database whose schema is newer than the binary's is refused
//! rather than used with assumptions that may no longer hold.

use crate::{
    db::{Database, OpError},
    error::ClusterError,
};

/// One schema change.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Its version, one more than the previous one's.
    pub version: i32,
    /// What it does, for the record.
    pub name: &'static str,
    /// The statements.
    pub sql: &'static str,
}

/// Every migration this binary knows, in order.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "initial",
        sql: include_str!("migrations/0001_initial.sql"),
    },
    Migration {
        version: 2,
        name: "coordinator producers",
        sql: include_str!("migrations/0002_coordinator_producers.sql"),
    },
    Migration {
        version: 3,
        name: "diskless batches",
        sql: include_str!("migrations/0003_diskless_batches.sql"),
    },
    Migration {
        version: 4,
        name: "ACLs and SCRAM credentials",
        sql: include_str!("migrations/0004_security.sql"),
    },
    Migration {
        version: 5,
        name: "event log partition counts",
        sql: include_str!("migrations/0005_event_log_partitions.sql"),
    },
    Migration {
        version: 6,
        name: "diskless producer timestamps",
        sql: include_str!("migrations/0006_diskless_producer_timestamps.sql"),
    },
    Migration {
        version: 7,
        name: "diskless consolidation",
        sql: include_str!("migrations/0007_diskless_consolidation.sql"),
    },
    Migration {
        version: 8,
        name: "pending remote deletions",
        sql: include_str!("migrations/0008_remote_deletions.sql"),
    },
];

/// The schema version this binary brings a database to.
#[must_use]
pub fn latest_version() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// The advisory lock key that serializes migrations ("krabka" in ASCII).
const MIGRATION_LOCK: i64 = 0x0000_6b72_6162_6b61;

/// Brings the schema up to [`latest_version`], returning the version it was
/// at before (0 for an empty database).
///
/// # Errors
///
/// [`ClusterError::SchemaTooNew`] when the database is ahead of this binary;
/// [`ClusterError::Database`] / [`ClusterError::Unavailable`] when a
/// statement fails or the database cannot be reached.
pub async fn migrate(db: &Database) -> Result<i32, ClusterError> {
    migrate_with(db, MIGRATIONS).await
}

/// [`migrate`] with an explicit list, so tests can play a newer binary.
///
/// # Errors
///
/// As [`migrate`].
pub async fn migrate_with(db: &Database, migrations: &[Migration]) -> Result<i32, ClusterError> {
    let supported = migrations.last().map_or(0, |m| m.version);
    let found = db
        .run("migrate", async |conn| {
            let tx = conn.transaction().await?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
                .await?;
            tx.batch_execute(
                "CREATE TABLE IF NOT EXISTS krabka_schema_migrations (
                     version    integer PRIMARY KEY,
                     name       text NOT NULL,
                     applied_at timestamptz NOT NULL DEFAULT clock_timestamp())",
            )
            .await?;
            let found: i32 = tx
                .query_one(
                    "SELECT coalesce(max(version), 0) FROM krabka_schema_migrations",
                    &[],
                )
                .await?
                .get(0);
            if found > supported {
                return Ok(found);
            }
            for migration in migrations.iter().filter(|m| m.version > found) {
                tracing::info!(
                    version = migration.version,
                    name = migration.name,
                    "applying cluster schema migration"
                );
                tx.batch_execute(migration.sql).await?;
                tx.execute(
                    "INSERT INTO krabka_schema_migrations (version, name) VALUES ($1, $2)",
                    &[&migration.version, &migration.name],
                )
                .await?;
            }
            tx.commit().await?;
            Ok::<_, OpError>(found)
        })
        .await?;
    if found > supported {
        return Err(ClusterError::SchemaTooNew { found, supported });
    }
    Ok(found)
}
