//! The one way a Krabka crate replaces a small file durably.
//!
//! Checkpoints, registries and snapshots must survive `kill -9` and power
//! loss as either the old or the new contents, never a torn mix and never a
//! rename that the file system forgets: write a temporary file beside the
//! target, fsync it, rename it over the target, then fsync the directory so
//! the rename itself is on disk. It lives here because every crate depends on
//! `krabka-ids`, so no crate needs a copy of its own.

use std::{
    fs::{self, File},
    io::{self, Write},
    path::{Path, PathBuf},
};

/// A durable-write step that failed: which step and on which path.
#[derive(Debug, thiserror::Error)]
#[error("{action} {}: {source}", path.display())]
pub struct DurableWriteError {
    /// What was being done (`"create"`, `"write"`, `"fsync"`, `"rename"`, ...).
    pub action: &'static str,
    /// The file or directory it was done to.
    pub path: PathBuf,
    /// The operating system's error.
    #[source]
    pub source: io::Error,
}

impl DurableWriteError {
    fn at(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> Self {
        let path = path.to_owned();
        move |source| Self {
            action,
            path,
            source,
        }
    }
}

/// The temporary file [`write_atomic`] writes before renaming it over `path`
/// (`<name>.tmp`). A crash can leave it behind; readers ignore it and the
/// next write replaces it.
#[must_use]
pub fn temporary_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Replaces `path` with `contents` atomically and durably: temporary file,
/// fsync, rename, fsync of the parent directory.
///
/// # Errors
///
/// [`DurableWriteError`] naming the step and path that failed; `path` then
/// still holds its old contents (or does not exist if it did not before).
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), DurableWriteError> {
    let tmp = temporary_path(path);
    {
        let mut file = File::create(&tmp).map_err(DurableWriteError::at("create", &tmp))?;
        file.write_all(contents)
            .map_err(DurableWriteError::at("write", &tmp))?;
        file.sync_all()
            .map_err(DurableWriteError::at("fsync", &tmp))?;
    }
    fs::rename(&tmp, path).map_err(DurableWriteError::at("rename", path))?;
    sync_parent(path)
}

/// Fsyncs the directory holding `path`, making a create, rename or unlink of
/// `path` durable.
///
/// # Errors
///
/// [`DurableWriteError`] if the directory cannot be opened or synced.
pub fn sync_parent(path: &Path) -> Result<(), DurableWriteError> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    sync_dir(dir)
}

/// Fsyncs a directory, making the entries created, renamed or removed in it
/// durable.
///
/// # Errors
///
/// [`DurableWriteError`] if the directory cannot be opened or synced.
pub fn sync_dir(dir: &Path) -> Result<(), DurableWriteError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(DurableWriteError::at("fsync directory", dir))
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn replaces_the_file_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("krabka-durable-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("checkpoint");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        check!(fs::read(&path).unwrap() == b"two");
        check!(!temporary_path(&path).exists());
        check!(temporary_path(&path).file_name().unwrap() == "checkpoint.tmp");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_write_names_the_step_and_path() {
        let path = Path::new("/nonexistent-krabka-dir/checkpoint");
        let e = write_atomic(path, b"x").unwrap_err();
        check!(e.action == "create");
        check!(
            e.to_string()
                .contains("/nonexistent-krabka-dir/checkpoint.tmp")
        );
    }
}
