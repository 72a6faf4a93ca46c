//! The size and free space of the volume holding the log dir, for
//! DescribeLogDirs v4+ (`total_bytes`, `usable_bytes`), from `statvfs(3)` as
//! Java's `FileStore.getTotalSpace` / `getUsableSpace` give Kafka.

use std::path::Path;

/// `(total bytes, bytes usable by this unprivileged process)` of the volume
/// holding `dir`, or `None` if it cannot be asked.
#[must_use]
pub fn volume_bytes(dir: &Path) -> Option<(i64, i64)> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: `statvfs` only writes into the zeroed struct we own and reads
    // the NUL-terminated path, which outlives the call.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::statvfs(path.as_ptr(), &raw mut stat) } != 0 {
        return None;
    }
    let block = u128::from(stat.f_frsize);
    let clamp = |blocks: u64| i64::try_from(u128::from(blocks) * block).unwrap_or(i64::MAX);
    Some((clamp(stat.f_blocks), clamp(stat.f_bavail)))
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn a_real_directory_has_a_size_and_free_space() {
        let dir = tempfile::tempdir().unwrap();
        let (total, usable) = volume_bytes(dir.path()).unwrap();
        check!(total > 0);
        check!((0..=total).contains(&usable));
        check!(volume_bytes(Path::new("/no/such/dir/here")).is_none());
    }
}
