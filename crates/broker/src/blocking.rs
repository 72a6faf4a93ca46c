//! The one door to tokio's blocking pool: every disk call, fsync and
//! synchronous SPI call the broker makes from async code goes through
//! [`run`] (or [`spawn`] when nobody waits for the answer). The one
//! exception is a small produce append that the log takes as a plain write
//! to the page cache (see `partition::append_queue`).
//!
//! Async workers must never wait on the disk: a worker stuck in an fsync
//! stalls every connection it serves. Keeping the hop in one place makes
//! that rule checkable (a test below fails if any other file of the
//! broker's sources calls `spawn_blocking`) and gives one place to count,
//! name or bound the work later. The library crates the broker builds on
//! (`krabka-log`, `krabka-remote-storage`, ...) are synchronous by design
//! and leave the hop to their caller.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let answer = krabka_broker::blocking::run(|| 6 * 7).await.unwrap();
//! assert_eq!(answer, 42);
//! # }
//! ```

/// A blocking task that panicked (or was cancelled by a runtime shutdown).
#[derive(Debug, thiserror::Error)]
#[error("blocking task failed: {0}")]
pub struct TaskFailed(String);

/// Runs `work` on the blocking pool and waits for its answer. Must be
/// called within a tokio runtime.
///
/// # Errors
///
/// [`TaskFailed`] if `work` panicked.
pub async fn run<T, F>(work: F) -> Result<T, TaskFailed>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| TaskFailed(e.to_string()))
}

/// Starts `work` on the blocking pool without waiting for it (its answer
/// goes back through a channel of the caller's). Must be called within a
/// tokio runtime.
pub fn spawn<F>(work: F)
where
    F: FnOnce() + Send + 'static,
{
    drop(tokio::task::spawn_blocking(work));
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[tokio::test]
    async fn answers_and_reports_a_panic() {
        check!(run(|| 7).await.unwrap() == 7);
        let failed = run(|| -> i32 { panic!("boom") }).await.unwrap_err();
        check!(failed.to_string().contains("blocking task failed"));
        let (tx, rx) = tokio::sync::oneshot::channel();
        spawn(move || {
            let _ = tx.send(5);
        });
        check!(rx.await.unwrap() == 5);
    }

    #[test]
    fn no_other_source_file_of_the_broker_enters_the_blocking_pool() {
        fn visit(dir: &std::path::Path, found: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    visit(&path, found);
                } else if path.extension().is_some_and(|e| e == "rs")
                    && !path.ends_with("src/blocking.rs")
                    && std::fs::read_to_string(&path)
                        .unwrap()
                        .contains(concat!("spawn", "_blocking"))
                {
                    found.push(path.display().to_string());
                }
            }
        }
        let mut found = Vec::new();
        visit(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut found,
        );
        check!(
            found.is_empty(),
            "use crate::blocking::run instead in {found:?}"
        );
    }
}
