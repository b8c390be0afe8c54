//! Statistics (percentiles, medians) and `Results`, every figure of the run.

use std::collections::HashMap;

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64
}

pub(crate) fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// `(p50, p99)` in µs of latencies in ns.
pub(crate) fn p50_p99_us(mut ns: Vec<u64>) -> (f64, f64) {
    ns.sort_unstable();
    (percentile(&ns, 50.0) / 1e3, percentile(&ns, 99.0) / 1e3)
}

/// Every figure of the run: metric → implementation → one value per repetition.
#[derive(Default)]
pub(crate) struct Results {
    pub(crate) values: HashMap<String, HashMap<String, Vec<f64>>>,
    pub(crate) notes: HashMap<(String, String), String>,
    /// P3 counting runs: (waiters, implementation, client commands per acquisition by name).
    pub(crate) breakdown: Vec<(usize, String, String)>,
}

impl Results {
    pub(crate) fn add(&mut self, metric: &str, imp: &str, value: f64) {
        eprintln!("  {metric:<28} {imp:<16} {value:.3}");
        self.values_of(metric, imp).push(value);
    }

    /// Adds many values of `metric` at once (printing how many, not each).
    pub(crate) fn add_all(&mut self, metric: &str, imp: &str, values: &[f64]) {
        eprintln!("  {metric:<28} {imp:<16} {} values", values.len());
        self.values_of(metric, imp).extend_from_slice(values);
    }

    fn values_of(&mut self, metric: &str, imp: &str) -> &mut Vec<f64> {
        (self.values.entry(metric.to_string()).or_default())
            .entry(imp.to_string())
            .or_default()
    }

    pub(crate) fn note(&mut self, metric: &str, imp: &str, note: impl Into<String>) {
        let note = note.into();
        eprintln!("  {metric:<28} {imp:<16} note: {note}");
        self.notes
            .insert((metric.to_string(), imp.to_string()), note);
    }

    pub(crate) fn median(&self, metric: &str, imp: &str) -> Option<f64> {
        let v = self.values.get(metric)?.get(imp)?;
        let m = median(v);
        m.is_finite().then_some(m)
    }

    pub(crate) fn reps(&self, metric: &str, imp: &str) -> usize {
        self.values
            .get(metric)
            .and_then(|m| m.get(imp))
            .map_or(0, |v| v.len())
    }

    pub(crate) fn get_note(&self, metric: &str, imp: &str) -> Option<&str> {
        self.notes
            .get(&(metric.to_string(), imp.to_string()))
            .map(|s| s.as_str())
    }
}
