//! File descriptors: the broker's open-file limit, and a reserve that keeps
//! running out of descriptors from stopping `accept` for good.
//!
//! Every connection, segment and index holds a descriptor. At start the
//! soft `RLIMIT_NOFILE` is raised to the hard limit ([`raise_limit`]), as
//! Kafka's packaging does. Should descriptors still run out, `accept`
//! fails with `EMFILE` while the client waits in the listen backlog, and
//! the listener stays readable: the accept loop would spin, and the client
//! would hang. The [`Reserve`] holds one spare descriptor; on `EMFILE` the
//! loop frees it, accepts the waiting client, closes it at once (a clear
//! refusal), takes the reserve back and backs off. Once descriptors free
//! up, accepting resumes by itself.

use std::{fs::File, io};

/// The soft and hard open-file limits before and after [`raise_limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoFileLimit {
    /// The soft limit the process started with.
    pub before: u64,
    /// The soft limit now.
    pub now: u64,
    /// The hard limit.
    pub hard: u64,
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (an unlimited hard
/// limit is taken as 1,048,576, Linux's default `fs.nr_open`).
///
/// # Errors
///
/// The OS error when the limits cannot be read or set.
#[cfg(unix)]
pub fn raise_limit() -> io::Result<NoFileLimit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit through a valid pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let before = limit.rlim_cur;
    let hard = limit.rlim_max;
    let target = if hard == libc::RLIM_INFINITY {
        1 << 20
    } else {
        hard
    };
    if before != libc::RLIM_INFINITY && before < target {
        let raised = libc::rlimit {
            rlim_cur: target,
            rlim_max: hard,
        };
        // SAFETY: setrlimit reads one rlimit through a valid pointer.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raw const raised) } != 0 {
            return Err(io::Error::last_os_error());
        }
        limit.rlim_cur = target;
    }
    #[allow(clippy::useless_conversion)] // rlim_t is u64 on Linux, not everywhere
    Ok(NoFileLimit {
        before: u64::from(before),
        now: u64::from(limit.rlim_cur),
        hard: u64::from(hard),
    })
}

/// Not a Unix: nothing to raise.
///
/// # Errors
///
/// Never.
#[cfg(not(unix))]
pub fn raise_limit() -> io::Result<NoFileLimit> {
    Ok(NoFileLimit {
        before: 0,
        now: 0,
        hard: 0,
    })
}

/// Whether `e` means the process or the system is out of descriptors.
#[must_use]
pub fn is_exhaustion(e: &io::Error) -> bool {
    #[cfg(unix)]
    {
        matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
    }
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

/// One spare descriptor, released to accept-and-close a client when the
/// process runs out.
#[derive(Debug)]
pub struct Reserve(Option<File>);

impl Default for Reserve {
    fn default() -> Self {
        Self::new()
    }
}

impl Reserve {
    /// Takes the spare descriptor (`/dev/null`; none where that cannot be
    /// opened).
    #[must_use]
    pub fn new() -> Self {
        Self(File::open("/dev/null").ok())
    }

    /// Frees the spare descriptor.
    pub fn release(&mut self) {
        self.0 = None;
    }

    /// Takes the spare descriptor back if it is not held (it may fail again
    /// while descriptors are still exhausted; the next call retries).
    pub fn restore(&mut self) {
        if self.0.is_none() {
            self.0 = File::open("/dev/null").ok();
        }
    }

    /// Whether the spare descriptor is held.
    #[must_use]
    pub fn is_held(&self) -> bool {
        self.0.is_some()
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        let limit = raise_limit().unwrap();
        check!(limit.now >= limit.before);
        check!(limit.now <= limit.hard);
        // Idempotent.
        check!(raise_limit().unwrap().now == limit.now);
    }

    #[test]
    fn the_reserve_is_released_and_restored() {
        let mut reserve = Reserve::new();
        check!(reserve.is_held());
        reserve.release();
        check!(!reserve.is_held());
        reserve.restore();
        check!(reserve.is_held());
        check!(is_exhaustion(&io::Error::from_raw_os_error(libc::EMFILE)));
        check!(!is_exhaustion(&io::Error::from_raw_os_error(
            libc::ECONNRESET
        )));
    }
}
