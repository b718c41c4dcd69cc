//! Typed metric families: each declared once, with its name, HELP text and
//! label names, in the `metrics.rs` of the crate that emits it.
//!
//! A scraper shows HELP next to each family; without it a reader of a
//! dashboard has to find the line of code that counts, and a name such as
//! `crawler_frontier_in_flight` does not say whether it is URLs or batches.
//! Declaring the family as a value, and emitting it only through that
//! value, means a family cannot be emitted without its HELP, nor with the
//! wrong kind or labels: the compiler checks what a test used to grep for.
//!
//! The state of a process once a second goes to `/metrics` and to the
//! timing log's gauge line; [`GaugeLine`] writes both from one call.

use metrics::{describe_counter, describe_gauge, describe_histogram, Label, SharedString};

use crate::timing::TimingLog;

/// What a family counts or measures, and how it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// The declaration every family shares.
#[derive(Debug)]
pub struct Family<const N: usize> {
    name: &'static str,
    help: &'static str,
    labels: [&'static str; N],
    /// The key in the timing log's gauge line (see [`GaugeLine`]), when it
    /// is not the name without `crawler_` and `_total`.
    log_key: Option<&'static str>,
}

impl<const N: usize> Family<N> {
    const fn new(name: &'static str, help: &'static str, labels: [&'static str; N]) -> Self {
        Family {
            name,
            help,
            labels,
            log_key: None,
        }
    }

    fn key(&self, values: [SharedString; N]) -> Vec<Label> {
        self.labels
            .iter()
            .zip(values)
            .map(|(k, v)| Label::new(*k, v))
            .collect()
    }

    /// The family's key in the timing log's gauge line.
    fn log_key(&self) -> &'static str {
        self.log_key.unwrap_or_else(|| {
            let short = self.name.strip_prefix("crawler_").unwrap_or(self.name);
            short.strip_suffix("_total").unwrap_or(short)
        })
    }
}

/// A counter family with `N` labels.
#[derive(Debug)]
pub struct Counter<const N: usize = 0>(Family<N>);

/// A gauge family with `N` labels.
#[derive(Debug)]
pub struct Gauge<const N: usize = 0>(Family<N>);

/// A histogram family with `N` labels.
#[derive(Debug)]
pub struct Histogram<const N: usize = 0>(Family<N>);

impl<const N: usize> Counter<N> {
    pub const fn new(name: &'static str, help: &'static str, labels: [&'static str; N]) -> Self {
        Counter(Family::new(name, help, labels))
    }

    /// The counter of these label values (in the declared labels' order).
    pub fn at<V: Into<SharedString>>(&self, values: [V; N]) -> metrics::Counter {
        metrics::counter!(self.0.name, self.0.key(values.map(Into::into)))
    }
}

impl Counter<0> {
    /// The family's one counter.
    pub fn get(&self) -> metrics::Counter {
        metrics::counter!(self.0.name)
    }
}

impl<const N: usize> Gauge<N> {
    pub const fn new(name: &'static str, help: &'static str, labels: [&'static str; N]) -> Self {
        Gauge(Family::new(name, help, labels))
    }

    /// The same family, under `key` in the timing log's gauge line.
    pub const fn logged_as(mut self, key: &'static str) -> Self {
        self.0.log_key = Some(key);
        self
    }

    /// The gauge of these label values (in the declared labels' order).
    pub fn at<V: Into<SharedString>>(&self, values: [V; N]) -> metrics::Gauge {
        metrics::gauge!(self.0.name, self.0.key(values.map(Into::into)))
    }
}

impl Gauge<0> {
    /// The family's one gauge.
    pub fn get(&self) -> metrics::Gauge {
        metrics::gauge!(self.0.name)
    }
}

impl<const N: usize> Histogram<N> {
    pub const fn new(name: &'static str, help: &'static str, labels: [&'static str; N]) -> Self {
        Histogram(Family::new(name, help, labels))
    }

    /// The histogram of these label values (in the declared labels' order).
    pub fn at<V: Into<SharedString>>(&self, values: [V; N]) -> metrics::Histogram {
        metrics::histogram!(self.0.name, self.0.key(values.map(Into::into)))
    }
}

/// Any family, to describe and check a crate's list of them.
pub trait Described: Sync {
    fn name(&self) -> &'static str;
    fn kind(&self) -> Kind;
    fn help(&self) -> &'static str;
}

macro_rules! described {
    ($t:ident, $kind:expr) => {
        impl<const N: usize> Described for $t<N> {
            fn name(&self) -> &'static str {
                self.0.name
            }
            fn kind(&self) -> Kind {
                $kind
            }
            fn help(&self) -> &'static str {
                self.0.help
            }
        }
    };
}
described!(Counter, Kind::Counter);
described!(Gauge, Kind::Gauge);
described!(Histogram, Kind::Histogram);

/// Gives each family its `# HELP` line in `/metrics`. Call once at
/// start-up, after the Prometheus recorder is installed (descriptions given
/// to no recorder are lost).
pub fn describe(families: &[&dyn Described]) {
    for f in families {
        let (name, help) = (f.name(), f.help());
        match f.kind() {
            Kind::Counter => describe_counter!(name, help),
            Kind::Gauge => describe_gauge!(name, help),
            Kind::Histogram => describe_histogram!(name, help),
        }
    }
}

/// Why a list of families is not fit for `/metrics`, if it is not: a name
/// twice, a name outside `crawler_[a-z_]*`, a counter not ending in
/// `_total` (or another family that does), or a HELP that is not one
/// sentence. Each crate's `metrics.rs` tests its list with it.
pub fn check(families: &[&dyn Described]) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for f in families {
        let (name, help) = (f.name(), f.help());
        if !seen.insert(name) {
            return Err(format!("{name} twice"));
        }
        if !(name.starts_with("crawler_") && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')) {
            return Err(format!("{name}: not crawler_[a-z_]*"));
        }
        if (f.kind() == Kind::Counter) != name.ends_with("_total") {
            return Err(format!("{name}: counters, and only they, end in _total"));
        }
        if !help.ends_with('.') || help.contains('\n') {
            return Err(format!("{name}: HELP is not one sentence: {help}"));
        }
    }
    Ok(())
}

/// One second of a process's state: each value goes to its gauge in
/// `/metrics` and, under the family's log key, to the timing log's gauge
/// line, which the bottleneck report reads.
#[derive(Debug, Default)]
pub struct GaugeLine {
    values: Vec<(String, f64)>,
}

impl GaugeLine {
    pub fn new() -> GaugeLine {
        GaugeLine::default()
    }

    /// Sets `gauge` to `value`.
    pub fn set(&mut self, gauge: &Gauge, value: f64) {
        gauge.get().set(value);
        self.values.push((gauge.0.log_key().to_string(), value));
    }

    /// Sets the gauge of `label` in a family with one label; its log key
    /// is `<family's key>.<label>`.
    pub fn set_at(&mut self, gauge: &Gauge<1>, label: &str, value: f64) {
        gauge.at([label.to_string()]).set(value);
        self.values
            .push((format!("{}.{label}", gauge.0.log_key()), value));
    }

    /// Sets `counter` to the running total `total` (kept elsewhere).
    pub fn total(&mut self, counter: &Counter, total: u64) {
        counter.get().absolute(total);
        self.values.push((counter.0.log_key().to_string(), total as f64));
    }

    /// Values that are only logged (process CPU and memory, the store's
    /// work), which their own code exports to `/metrics`.
    pub fn log_only<K: Into<String>>(&mut self, values: impl IntoIterator<Item = (K, f64)>) {
        self.values.extend(values.into_iter().map(|(k, v)| (k.into(), v)));
    }

    /// Writes the gauge line to the timing log.
    pub fn write(self, timing: &TimingLog) {
        timing.gauges(&self.values);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: Gauge = Gauge::new("crawler_frontier_queued", "URLs queued.", []);
    const KEYED: Gauge<1> = Gauge::new("crawler_supervisor_credits_held", "Credits held.", ["supervisor"])
        .logged_as("credits_held");
    const TOTAL: Counter = Counter::new(
        "crawler_frontier_domains_forgotten_total",
        "Domains forgotten.",
        [],
    );

    #[test]
    fn a_gauge_line_names_each_value_by_its_log_key() {
        let mut line = GaugeLine::new();
        line.set(&PLAIN, 3.0);
        line.set_at(&KEYED, "n1", 2.0);
        line.total(&TOTAL, 7);
        line.log_only([("cpu_seconds", 1.5)]);
        let keys: Vec<(&str, f64)> = line.values.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(
            keys,
            [
                ("frontier_queued", 3.0),
                ("credits_held.n1", 2.0),
                ("frontier_domains_forgotten", 7.0),
                ("cpu_seconds", 1.5)
            ]
        );
    }

    #[test]
    fn check_refuses_what_a_scraper_would_misread() {
        assert!(check(&[&PLAIN, &KEYED, &TOTAL]).is_ok());
        assert!(check(&[&PLAIN, &PLAIN]).unwrap_err().contains("twice"));
        let bad = Counter::new("crawler_pages", "Pages.", []);
        assert!(check(&[&bad]).unwrap_err().contains("_total"));
        let bad = Gauge::new("crawler_x", "two\nlines.", []);
        assert!(check(&[&bad]).unwrap_err().contains("sentence"));
    }
}
