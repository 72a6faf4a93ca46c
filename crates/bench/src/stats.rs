//! Counters shared by the load tasks, the latency histogram, and the report.

use {
    hdrhistogram::Histogram,
    std::{
        fmt,
        sync::{
            Mutex,
            atomic::{AtomicU64, Ordering},
        },
        time::Duration,
    },
};

/// Running totals; cheap to update from many tasks.
pub struct Counters {
    /// Records acknowledged (produce) or received (consume).
    pub records: AtomicU64,
    /// Payload bytes of those records.
    pub bytes: AtomicU64,
    /// Latencies in microseconds (produce only).
    latency: Mutex<Histogram<u64>>,
    record_size: AtomicU64,
}

impl Counters {
    /// Empty counters.
    pub fn new() -> Self {
        let histogram = Histogram::new_with_bounds(1, 60_000_000, 3)
            .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| unreachable_histogram()));
        Self {
            records: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            latency: Mutex::new(histogram),
            record_size: AtomicU64::new(0),
        }
    }

    /// `records` were acknowledged `latency` after they were due; each
    /// latency sample stands for `weight` records.
    pub fn acked(&self, records: u64, latency: Duration, weight: u64) {
        self.records.fetch_add(records, Ordering::Relaxed);
        let size = self.record_size.load(Ordering::Relaxed);
        self.bytes.fetch_add(records * size, Ordering::Relaxed);
        let micros = u64::try_from(latency.as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        if let Ok(mut h) = self.latency.lock() {
            h.saturating_record_n(micros, weight);
        }
    }

    /// Sets the payload size counted per acknowledged record.
    pub fn set_record_size(&self, size: usize) {
        self.record_size.store(size as u64, Ordering::Relaxed);
    }

    /// The summary of a run.
    pub fn report(&self, what: &'static str, elapsed: Duration, record_size: usize) -> Report {
        let records = self.records.load(Ordering::Relaxed);
        let bytes = match self.bytes.load(Ordering::Relaxed) {
            0 => records * record_size as u64,
            b => b,
        };
        let latency = self
            .latency
            .lock()
            .ok()
            .filter(|h| !h.is_empty())
            .map(|h| Latency {
                p50: h.value_at_quantile(0.50),
                p99: h.value_at_quantile(0.99),
                p999: h.value_at_quantile(0.999),
                max: h.max(),
            });
        Report {
            what,
            records,
            bytes,
            elapsed,
            latency,
        }
    }
}

fn unreachable_histogram() -> Histogram<u64> {
    // `Histogram::new(3)` only fails for sigfig > 5; keep a total fallback anyway.
    Histogram::new_with_max(u64::MAX >> 2, 2).unwrap_or_else(|_| std::process::abort())
}

/// Produce latency percentiles in microseconds.
pub struct Latency {
    p50: u64,
    p99: u64,
    p999: u64,
    max: u64,
}

/// A run's figures.
pub struct Report {
    what: &'static str,
    records: u64,
    bytes: u64,
    elapsed: Duration,
    latency: Option<Latency>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        write!(
            f,
            "{}: {} records in {:.2} s: {:.0} records/s, {:.1} MB/s ({:.1} MiB/s)",
            self.what,
            self.records,
            secs,
            self.records as f64 / secs,
            self.bytes as f64 / secs / 1e6,
            self.bytes as f64 / secs / (1024.0 * 1024.0),
        )?;
        if let Some(l) = &self.latency {
            let ms = |us: u64| us as f64 / 1000.0;
            write!(
                f,
                "; latency ms p50 {:.2} p99 {:.2} p99.9 {:.2} max {:.2}",
                ms(l.p50),
                ms(l.p99),
                ms(l.p999),
                ms(l.max)
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn report_figures() {
        let c = Counters::new();
        c.set_record_size(1000);
        for i in 1..=1000u64 {
            c.acked(1, Duration::from_micros(i * 10), 1);
        }
        let r = c.report("produce", Duration::from_secs(2), 1000);
        check!(r.records == 1000);
        check!(r.bytes == 1_000_000);
        let l = r.latency.as_ref().unwrap();
        check!((4990..=5010).contains(&l.p50));
        check!(l.max >= 9990);
        let text = r.to_string();
        check!(text.starts_with("produce: 1000 records in 2.00 s: 500 records/s, 0.5 MB/s"));
    }
}
