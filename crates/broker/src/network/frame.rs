//! Reading one size-prefixed request frame, within the connection's timers
//! and the broker's request byte budget.
//!
//! A frame's buffer grows as its bytes arrive — doubling, up to the size the
//! prefix announced — and each growth first takes its bytes from the
//! [`RequestBudget`] (`queued.max.request.bytes`), so a client that
//! announces 100 MB and sends ten bytes holds a few KiB, and all clients
//! together never hold more than the budget.
//!
//! Two timers bound what a connection may hold for how long:
//!
//! * between frames, a connection with no request in flight and no bytes
//!   received for `connections.max.idle.ms` is idle and closed
//!   ([`Activity::idle`]);
//! * once a frame's first byte has arrived, its bytes must keep up with
//!   `krabka.request.read.min.bytes.per.sec` after a grace of
//!   `krabka.request.read.timeout.ms`: by time `t` after the first byte, at
//!   least `(t - grace) * rate` bytes must be in, and no wait for the next
//!   bytes may last longer than the grace. A client that trickles
//!   (slowloris) or stalls is dropped and its buffer freed; a client that
//!   sends at any reasonable speed never meets the bound. Waiting for
//!   budget counts too, which also ends the rare standoff of several large
//!   half-read requests that together hold the whole budget.

use {
    super::limits::{BudgetHold, RequestBudget},
    crate::config::ConnectionSettings,
    bytes::Bytes,
    std::{
        sync::atomic::{AtomicU64, AtomicUsize, Ordering},
        time::Duration,
    },
    tokio::{
        io::{AsyncRead, AsyncReadExt},
        time::Instant,
    },
};

/// The smallest step a frame's buffer grows by (frames smaller than this
/// are allocated at their exact size).
const FIRST_STEP: usize = 16 * 1024;

/// The bounds a frame is read within.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameRules {
    /// `socket.request.max.bytes`, or the tighter bound named by
    /// `max_bytes_setting`.
    pub max_bytes: usize,
    /// The setting `max_bytes` comes from, for the close reason.
    pub max_bytes_setting: &'static str,
    /// `connections.max.idle.ms`.
    pub max_idle: Duration,
    /// `krabka.request.read.timeout.ms`: the grace before the rate applies.
    pub read_timeout: Duration,
    /// `krabka.request.read.min.bytes.per.sec`.
    pub min_bytes_per_sec: u64,
}

impl FrameRules {
    /// The rules of the broker's settings.
    #[must_use]
    pub fn new(max_bytes: usize, settings: &ConnectionSettings) -> Self {
        Self {
            max_bytes,
            max_bytes_setting: "socket.request.max.bytes",
            max_idle: settings.connections_max_idle,
            read_timeout: settings.request_read_timeout,
            min_bytes_per_sec: settings.request_read_min_bytes_per_sec.max(1),
        }
    }

    /// The same rules with frames bounded by `max_bytes` of `setting` as
    /// well (the tighter bound wins).
    #[must_use]
    pub fn bounded(self, max_bytes: usize, setting: &'static str) -> Self {
        if max_bytes >= self.max_bytes {
            return self;
        }
        Self {
            max_bytes,
            max_bytes_setting: setting,
            ..self
        }
    }

    /// By when the next bytes of a frame begun at `started`, of which
    /// `received` bytes are in, must arrive: the rate bound, and no wait
    /// (for bytes or for budget) longer than the grace.
    fn deadline(&self, started: Instant, received: usize) -> Instant {
        let allowance = Duration::from_secs_f64(received as f64 / self.min_bytes_per_sec as f64);
        let by_rate = started + self.read_timeout.saturating_add(allowance);
        by_rate.min(Instant::now() + self.read_timeout)
    }
}

/// One request frame (without its size prefix) and the budget it holds
/// until it is answered.
#[derive(Debug)]
pub struct Frame {
    /// The frame's bytes.
    pub bytes: Bytes,
    /// Its share of `queued.max.request.bytes`; drop it once answered.
    pub hold: BudgetHold,
}

/// Why no frame was read.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadEnd {
    /// The peer closed the connection between frames.
    Eof,
    /// The connection was idle for `connections.max.idle.ms`.
    Idle(Duration),
    /// The connection must be closed for this reason.
    Close(String),
}

/// What a connection is doing, for its idle timer: when it last received a
/// request or sent an answer, and how many requests await their answer.
#[derive(Debug)]
pub struct Activity {
    epoch: Instant,
    last_ms: AtomicU64,
    in_flight: AtomicUsize,
}

impl Default for Activity {
    fn default() -> Self {
        Self::new()
    }
}

impl Activity {
    /// A connection that just opened.
    #[must_use]
    pub fn new() -> Self {
        Self {
            epoch: Instant::now(),
            last_ms: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.fetch_max(ms, Ordering::Relaxed);
    }

    /// A request was read.
    pub fn request_read(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.touch();
    }

    /// A request's answer was sent (or dropped).
    pub fn request_answered(&self) {
        let _ = self
            .in_flight
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        self.touch();
    }

    /// Requests read and not yet answered.
    #[must_use]
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Resolves once the connection has had no request in flight and no
    /// activity for `max_idle`.
    pub async fn idle(&self, max_idle: Duration) {
        loop {
            let now = Instant::now();
            let deadline = if self.in_flight() > 0 {
                now + max_idle
            } else {
                self.epoch + Duration::from_millis(self.last_ms.load(Ordering::Relaxed)) + max_idle
            };
            if deadline <= now {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }
}

/// Reads the next frame: waits (up to the idle bound) for its first byte,
/// then reads the rest within the rate bound, growing its buffer from
/// `budget` as bytes arrive.
///
/// # Errors
///
/// [`ReadEnd::Eof`] when the peer closed between frames, [`ReadEnd::Idle`]
/// when it sent nothing for the idle bound; otherwise [`ReadEnd::Close`]
/// with the reason: too slow, a size prefix that
/// is negative or over `socket.request.max.bytes`, a truncated frame or a
/// read error.
pub async fn next_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    rules: &FrameRules,
    budget: &RequestBudget,
    activity: &Activity,
) -> Result<Frame, ReadEnd> {
    let mut prefix = [0u8; 4];
    let first = tokio::select! {
        read = reader.read(&mut prefix) => read,
        () = activity.idle(rules.max_idle) => return Err(ReadEnd::Idle(rules.max_idle)),
    };
    let mut have = match first {
        Ok(0) => return Err(ReadEnd::Eof),
        Ok(n) => n,
        Err(e) => return Err(ReadEnd::Close(format!("read failed: {e}"))),
    };
    let started = Instant::now();
    let too_slow = |size: Option<usize>, received: usize| {
        ReadEnd::Close(format!(
            "request arrived too slowly: {received} of {} bytes after {} ms \
             (krabka.request.read.min.bytes.per.sec {}, krabka.request.read.timeout.ms {})",
            size.map_or_else(|| "?".to_owned(), |s| s.to_string()),
            started.elapsed().as_millis(),
            rules.min_bytes_per_sec,
            rules.read_timeout.as_millis()
        ))
    };
    while have < prefix.len() {
        let read = tokio::time::timeout_at(
            rules.deadline(started, have),
            reader.read(&mut prefix[have..]),
        )
        .await
        .map_err(|_| too_slow(None, have))?;
        match read {
            Ok(0) => {
                return Err(ReadEnd::Close(format!(
                    "truncated size prefix: connection closed after {have} bytes"
                )));
            }
            Ok(n) => have += n,
            Err(e) => return Err(ReadEnd::Close(format!("read failed: {e}"))),
        }
    }
    let size = i32::from_be_bytes(prefix);
    let Ok(size) = usize::try_from(size) else {
        return Err(ReadEnd::Close(format!("negative frame size {size}")));
    };
    if size > rules.max_bytes {
        return Err(ReadEnd::Close(format!(
            "request of {size} bytes exceeds {} ({})",
            rules.max_bytes_setting, rules.max_bytes
        )));
    }
    let mut buf: Vec<u8> = Vec::new();
    let mut hold = BudgetHold::default();
    while buf.len() < size {
        let deadline = rules.deadline(started, prefix.len() + buf.len());
        if buf.len() == buf.capacity() {
            let target = buf.capacity().saturating_mul(2).max(FIRST_STEP).min(size);
            let step = target - buf.capacity();
            tokio::time::timeout_at(deadline, budget.grow(&mut hold, step))
                .await
                .map_err(|_| too_slow(Some(size), buf.len()))?;
            buf.reserve_exact(target - buf.len());
        }
        let want = (size - buf.len()).min(buf.capacity() - buf.len());
        let mut limited = (&mut *reader).take(u64::try_from(want).unwrap_or(u64::MAX));
        let read = tokio::time::timeout_at(deadline, limited.read_buf(&mut buf))
            .await
            .map_err(|_| too_slow(Some(size), buf.len()))?;
        match read {
            Ok(0) => {
                return Err(ReadEnd::Close(format!(
                    "truncated frame: connection closed after {} of {size} bytes",
                    buf.len()
                )));
            }
            Ok(_) => {}
            Err(e) => return Err(ReadEnd::Close(format!("read failed: {e}"))),
        }
    }
    Ok(Frame {
        bytes: Bytes::from(buf),
        hold,
    })
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        assert2::check,
        tokio::io::{AsyncWriteExt, DuplexStream, duplex},
    };

    fn rules() -> FrameRules {
        FrameRules {
            max_bytes: 200 << 20,
            max_bytes_setting: "socket.request.max.bytes",
            max_idle: Duration::from_secs(600),
            read_timeout: Duration::from_secs(30),
            min_bytes_per_sec: 1000,
        }
    }

    fn framed(body: &[u8]) -> Vec<u8> {
        let mut v = i32::try_from(body.len()).unwrap().to_be_bytes().to_vec();
        v.extend_from_slice(body);
        v
    }

    async fn read(
        server: &mut DuplexStream,
        rules: &FrameRules,
        budget: &RequestBudget,
    ) -> Result<Frame, ReadEnd> {
        next_frame(server, rules, budget, &Activity::new()).await
    }

    fn closed_because(end: Result<Frame, ReadEnd>, words: &str) -> bool {
        matches!(end, Err(ReadEnd::Close(reason)) if reason.contains(words))
    }

    #[tokio::test(start_paused = true)]
    async fn frames_arriving_in_pieces_are_read_whole() {
        let (mut client, mut server) = duplex(1 << 20);
        let budget = RequestBudget::new(Some(1 << 20));
        let body: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let bytes = framed(&body);
        let writer = tokio::spawn(async move {
            for piece in bytes.chunks(7_777) {
                client.write_all(piece).await.unwrap();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            client.write_all(&framed(b"next")).await.unwrap();
            client
        });
        let frame = read(&mut server, &rules(), &budget).await.unwrap();
        check!(frame.bytes[..] == body[..]);
        // The buffer doubled up to the size: the budget holds no more than it.
        check!(frame.hold.bytes() == body.len());
        check!(budget.in_use() == body.len());
        drop(frame);
        check!(budget.in_use() == 0);
        let next = read(&mut server, &rules(), &budget).await.unwrap();
        check!(&next.bytes[..] == b"next");
        drop(writer.await.unwrap());
        check!(read(&mut server, &rules(), &budget).await.unwrap_err() == ReadEnd::Eof);
    }

    #[tokio::test(start_paused = true)]
    async fn a_trickled_large_request_is_dropped_holding_little() {
        let (mut client, mut server) = duplex(1 << 16);
        let budget = RequestBudget::new(Some(150 << 20));
        let writer = tokio::spawn(async move {
            client
                .write_all(&(100_000_000i32).to_be_bytes())
                .await
                .unwrap();
            // One byte a second, for as long as the broker listens.
            while client.write_all(b"x").await.is_ok() {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        let started = Instant::now();
        let budget_seen = budget.clone();
        let watcher = tokio::spawn(async move {
            let mut most = 0;
            for _ in 0..60 {
                most = most.max(budget_seen.in_use());
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            most
        });
        let end = read(&mut server, &rules(), &budget).await;
        let elapsed = started.elapsed();
        check!(closed_because(end, "too slowly"));
        // The grace (30 s) plus what the few bytes received earned.
        check!(elapsed >= Duration::from_secs(30));
        check!(elapsed < Duration::from_secs(32));
        check!(budget.in_use() == 0);
        check!(watcher.await.unwrap() <= FIRST_STEP);
        drop(server);
        writer.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_request_is_dropped_after_the_grace() {
        // Stalled in the size prefix, in the body, and after a fast start
        // that earned a long allowance by rate: each waits the grace, no more.
        let fast_start = framed(&[1; 90_000]);
        for sent in [
            &[0u8, 0][..],
            &framed(&[1; 5000])[..3000],
            &fast_start[..80_000],
        ] {
            let (mut client, mut server) = duplex(1 << 17);
            client.write_all(sent).await.unwrap();
            let budget = RequestBudget::new(None);
            let started = Instant::now();
            let end = read(&mut server, &rules(), &budget).await;
            check!(closed_because(end, "too slowly"));
            let elapsed = started.elapsed();
            check!(elapsed >= Duration::from_secs(30));
            check!(elapsed < Duration::from_secs(31));
            drop(client);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_connection_is_closed_unless_a_request_is_in_flight() {
        let rules = FrameRules {
            max_idle: Duration::from_secs(10),
            ..rules()
        };
        let (client, mut server) = duplex(64);
        let budget = RequestBudget::new(None);
        let activity = Activity::new();
        activity.request_read();
        let started = Instant::now();
        let answer = tokio::time::sleep(Duration::from_secs(25));
        let end = tokio::select! {
            end = next_frame(&mut server, &rules, &budget, &activity) => end,
            () = answer => {
                activity.request_answered();
                next_frame(&mut server, &rules, &budget, &activity).await
            }
        };
        check!(end.unwrap_err() == ReadEnd::Idle(Duration::from_secs(10)));
        // Not idle while the request waited (25 s), then idle 10 s later.
        check!(started.elapsed() >= Duration::from_secs(35));
        check!(started.elapsed() < Duration::from_secs(36));
        drop(client);
    }

    #[tokio::test(start_paused = true)]
    async fn bad_size_prefixes_close_the_connection() {
        let rules = FrameRules {
            max_bytes: 1000,
            max_bytes_setting: "socket.request.max.bytes",
            ..rules()
        };
        let budget = RequestBudget::new(None);
        for (bytes, words) in [
            (framed(&[0; 1001]), "exceeds socket.request.max.bytes"),
            ((-5i32).to_be_bytes().to_vec(), "negative frame size"),
            (framed(&[0; 10])[..8].to_vec(), "truncated frame"),
            (vec![0, 0], "truncated size prefix"),
        ] {
            let (mut client, mut server) = duplex(4096);
            client.write_all(&bytes).await.unwrap();
            drop(client);
            let end = read(&mut server, &rules, &budget).await;
            check!(closed_because(end, words), "{words}");
        }
        check!(budget.in_use() == 0);
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_large_requests_share_the_budget() {
        let budget = RequestBudget::new(Some(3 << 20));
        let rules = FrameRules {
            min_bytes_per_sec: 1 << 20,
            ..rules()
        };
        let body = vec![7u8; 2 << 20];
        let mut readers = Vec::new();
        let mut writers = Vec::new();
        for _ in 0..4 {
            let (mut client, mut server) = duplex(1 << 16);
            let bytes = framed(&body);
            writers.push(tokio::spawn(async move {
                let _ = client.write_all(&bytes).await;
                client
            }));
            let budget = budget.clone();
            readers.push(tokio::spawn(async move {
                let frame = read(&mut server, &rules, &budget).await;
                // Answer it: give the budget back a moment later.
                tokio::time::sleep(Duration::from_millis(10)).await;
                frame.map(|f| f.bytes.len())
            }));
        }
        let most = {
            let budget = budget.clone();
            tokio::spawn(async move {
                let mut most = 0;
                for _ in 0..10_000 {
                    most = most.max(budget.in_use());
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                most
            })
        };
        let mut read_whole = 0;
        for reader in readers {
            if let Ok(Ok(len)) = reader.await {
                check!(len == body.len());
                read_whole += 1;
            }
        }
        // None waits forever: each is read whole or dropped as too slow.
        check!(read_whole >= 1);
        check!(most.await.unwrap() <= 3 << 20);
        check!(budget.in_use() == 0);
        for w in writers {
            drop(w.await.unwrap());
        }
    }
}
