//! The broker's own `metrics` recorder and its Prometheus text rendering.
//!
//! `metrics-exporter-prometheus` cannot forget a series, and a broker must:
//! a deleted topic's per-topic series, a vanished group's lag, would
//! otherwise be scraped forever (and a topic recreated under the same name
//! would inherit its predecessor's counters). So the series live in a
//! `metrics-util` [`Registry`], which can drop keys, with plain atomic
//! counters and gauges and fixed-bucket histograms (Prometheus histograms,
//! from which `histogram_quantile` gives the percentiles).
//!
//! Rendering follows the Prometheus text exposition format 0.0.4: one
//! `# HELP` and `# TYPE` line per family, families sorted by name, series
//! sorted by labels, label values escaped.

use {
    metrics::{
        Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString,
        Unit,
    },
    metrics_util::registry::{Registry, Storage},
    std::{
        collections::BTreeMap,
        fmt::Write as _,
        sync::{
            Arc, PoisonError, RwLock,
            atomic::{AtomicU64, Ordering},
        },
    },
};

/// Bucket upper bounds (seconds) of latency histograms: 0.5 ms to 10 s.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A histogram with fixed bucket bounds: a count per bucket, the sum and
/// the count of every observation.
#[derive(Debug)]
pub struct BucketHistogram {
    bounds: &'static [f64],
    /// One more than `bounds`: the last is `+Inf`.
    buckets: Box<[AtomicU64]>,
    /// The sum, as `f64` bits.
    sum: AtomicU64,
    count: AtomicU64,
}

impl BucketHistogram {
    fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0f64.to_bits()),
            count: AtomicU64::new(0),
        }
    }

    /// `(upper bound, cumulative count)` per bucket, `+Inf` last; the sum
    /// and the count.
    fn snapshot(&self) -> (Vec<(f64, u64)>, f64, u64) {
        let mut cumulative = 0u64;
        let mut out = Vec::with_capacity(self.buckets.len());
        for (i, bucket) in self.buckets.iter().enumerate() {
            cumulative = cumulative.saturating_add(bucket.load(Ordering::Relaxed));
            out.push((
                self.bounds.get(i).copied().unwrap_or(f64::INFINITY),
                cumulative,
            ));
        }
        (
            out,
            f64::from_bits(self.sum.load(Ordering::Relaxed)),
            cumulative,
        )
    }
}

impl HistogramFn for BucketHistogram {
    fn record(&self, value: f64) {
        let i = self
            .bounds
            .iter()
            .position(|&b| value <= b)
            .unwrap_or(self.bounds.len());
        if let Some(bucket) = self.buckets.get(i) {
            bucket.fetch_add(1, Ordering::Relaxed);
        }
        let _ = self
            .sum
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + value).to_bits())
            });
        self.count.fetch_add(1, Ordering::Relaxed);
    }
}

/// Atomic counters and gauges, and histograms with the buckets of their family.
#[derive(Debug)]
pub struct KrabkaStorage;

impl Storage<Key> for KrabkaStorage {
    type Counter = Arc<AtomicU64>;
    type Gauge = Arc<AtomicU64>;
    type Histogram = Arc<BucketHistogram>;

    fn counter(&self, _: &Key) -> Self::Counter {
        Arc::new(AtomicU64::new(0))
    }

    fn gauge(&self, _: &Key) -> Self::Gauge {
        Arc::new(AtomicU64::new(0))
    }

    fn histogram(&self, _: &Key) -> Self::Histogram {
        Arc::new(BucketHistogram::new(LATENCY_BUCKETS))
    }
}

/// The recorder: every series, and the help text of each family.
pub struct KrabkaRecorder {
    registry: Registry<Key, KrabkaStorage>,
    help: RwLock<BTreeMap<String, String>>,
}

impl std::fmt::Debug for KrabkaRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KrabkaRecorder").finish_non_exhaustive()
    }
}

impl Default for KrabkaRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl KrabkaRecorder {
    /// An empty recorder.
    #[must_use]
    pub fn new() -> Self {
        Self {
            registry: Registry::new(KrabkaStorage),
            help: RwLock::new(BTreeMap::new()),
        }
    }

    /// Sets the `# HELP` text of a family.
    pub fn set_help(&self, name: &str, help: &str) {
        self.help
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_owned(), help.to_owned());
    }

    /// Drops every series for which `keep(name, labels)` is false.
    pub fn retain(&self, mut keep: impl FnMut(&str, &[(&str, &str)]) -> bool) {
        let mut test = |key: &Key| {
            let labels: Vec<(&str, &str)> = key.labels().map(|l| (l.key(), l.value())).collect();
            keep(key.name(), &labels)
        };
        self.registry.retain_counters(|k, _| test(k));
        self.registry.retain_gauges(|k, _| test(k));
        self.registry.retain_histograms(|k, _| test(k));
    }

    /// Drops every series with label `label` equal to `value`.
    pub fn remove_labelled(&self, label: &str, value: &str) {
        self.retain(|_, labels| !labels.iter().any(|&(k, v)| k == label && v == value));
    }

    /// Every family name that has at least one series.
    #[must_use]
    pub fn family_names(&self) -> Vec<String> {
        let mut names = std::collections::BTreeSet::new();
        self.registry.visit_counters(|k, _| {
            names.insert(k.name().to_owned());
        });
        self.registry.visit_gauges(|k, _| {
            names.insert(k.name().to_owned());
        });
        self.registry.visit_histograms(|k, _| {
            names.insert(k.name().to_owned());
        });
        names.into_iter().collect()
    }

    /// The Prometheus text exposition of every series.
    #[must_use]
    pub fn render(&self) -> String {
        // family name → (type, series lines sorted by their label text)
        let mut families: BTreeMap<String, (&'static str, BTreeMap<String, Vec<String>>)> =
            BTreeMap::new();
        self.registry.visit_counters(|key, value| {
            let labels = label_text(key, None);
            families
                .entry(key.name().to_owned())
                .or_insert(("counter", BTreeMap::new()))
                .1
                .insert(
                    labels.clone(),
                    vec![format!(
                        "{}{labels} {}",
                        key.name(),
                        value.load(Ordering::Relaxed)
                    )],
                );
        });
        self.registry.visit_gauges(|key, value| {
            let labels = label_text(key, None);
            let v = f64::from_bits(value.load(Ordering::Relaxed));
            families
                .entry(key.name().to_owned())
                .or_insert(("gauge", BTreeMap::new()))
                .1
                .insert(
                    labels.clone(),
                    vec![format!("{}{labels} {}", key.name(), number(v))],
                );
        });
        self.registry.visit_histograms(|key, histogram| {
            let (buckets, sum, count) = histogram.snapshot();
            let name = key.name();
            let mut lines = Vec::with_capacity(buckets.len() + 2);
            for (bound, cumulative) in buckets {
                let le = if bound.is_infinite() {
                    "+Inf".to_owned()
                } else {
                    number(bound)
                };
                lines.push(format!(
                    "{name}_bucket{} {cumulative}",
                    label_text(key, Some(&le))
                ));
            }
            let labels = label_text(key, None);
            lines.push(format!("{name}_sum{labels} {}", number(sum)));
            lines.push(format!("{name}_count{labels} {count}"));
            families
                .entry(name.to_owned())
                .or_insert(("histogram", BTreeMap::new()))
                .1
                .insert(labels, lines);
        });
        let help = self.help.read().unwrap_or_else(PoisonError::into_inner);
        let mut out = String::new();
        for (name, (kind, series)) in families {
            if let Some(text) = help.get(&name) {
                let _ = writeln!(out, "# HELP {name} {}", escape_help(text));
            }
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for line in series.values().flatten() {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }
}

/// `{a="x",b="y"}` (empty when there are no labels), with `le` last when given.
fn label_text(key: &Key, le: Option<&str>) -> String {
    let mut parts: Vec<String> = key
        .labels()
        .map(|l| format!("{}=\"{}\"", l.key(), escape_label(l.value())))
        .collect();
    if let Some(le) = le {
        parts.push(format!("le=\"{le}\""));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", parts.join(","))
    }
}

fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A sample value as Prometheus reads it (`+Inf`, `NaN`, integers without `.0`).
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else {
        format!("{v}")
    }
}

impl Recorder for KrabkaRecorder {
    fn describe_counter(&self, key: KeyName, _: Option<Unit>, description: SharedString) {
        self.set_help(key.as_str(), &description);
    }

    fn describe_gauge(&self, key: KeyName, _: Option<Unit>, description: SharedString) {
        self.set_help(key.as_str(), &description);
    }

    fn describe_histogram(&self, key: KeyName, _: Option<Unit>, description: SharedString) {
        self.set_help(key.as_str(), &description);
    }

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        self.registry
            .get_or_create_counter(key, |c| Counter::from_arc(Arc::clone(c)))
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        self.registry
            .get_or_create_gauge(key, |g| Gauge::from_arc(Arc::clone(g)))
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        self.registry
            .get_or_create_histogram(key, |h| Histogram::from_arc(Arc::clone(h)))
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check, metrics::with_local_recorder};

    #[test]
    fn renders_prometheus_text_and_forgets_series() {
        let recorder = KrabkaRecorder::new();
        recorder.set_help("t_total", "Things.");
        with_local_recorder(&recorder, || {
            metrics::counter!("t_total", "topic" => "a").increment(3);
            metrics::counter!("t_total", "topic" => "b\"q").increment(1);
            metrics::gauge!("g").set(2.5);
            metrics::histogram!("h_seconds", "api" => "Fetch").record(0.003);
            metrics::histogram!("h_seconds", "api" => "Fetch").record(20.0);
        });
        let text = recorder.render();
        check!(text.contains("# HELP t_total Things.\n# TYPE t_total counter\n"));
        check!(text.contains("t_total{topic=\"a\"} 3\n"));
        check!(text.contains("t_total{topic=\"b\\\"q\"} 1\n"));
        check!(text.contains("# TYPE g gauge\ng 2.5\n"));
        check!(text.contains("h_seconds_bucket{api=\"Fetch\",le=\"0.0025\"} 0\n"));
        check!(text.contains("h_seconds_bucket{api=\"Fetch\",le=\"0.005\"} 1\n"));
        check!(text.contains("h_seconds_bucket{api=\"Fetch\",le=\"10\"} 1\n"));
        check!(text.contains("h_seconds_bucket{api=\"Fetch\",le=\"+Inf\"} 2\n"));
        check!(text.contains("h_seconds_count{api=\"Fetch\"} 2\n"));
        check!(text.contains("h_seconds_sum{api=\"Fetch\"} 20.003\n"));

        recorder.remove_labelled("topic", "a");
        let text = recorder.render();
        check!(!text.contains("topic=\"a\""));
        check!(text.contains("topic=\"b\\\"q\""));
        // A series created again after removal starts from zero.
        with_local_recorder(&recorder, || {
            metrics::counter!("t_total", "topic" => "a").increment(1);
        });
        check!(recorder.render().contains("t_total{topic=\"a\"} 1\n"));
        check!(recorder.family_names() == vec!["g", "h_seconds", "t_total"]);
    }
}
