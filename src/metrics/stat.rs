//! Exact statistics of one metric: numpy-compatible linear percentiles over every value, and the
//! same shape read off an HDR histogram for per-chunk values.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Statistics of one metric. Percentiles use numpy's default linear interpolation over all
/// values; `std` is the population standard deviation.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Stat {
    /// Number of values.
    pub count: u64,
    /// Mean.
    pub avg: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// Sum.
    pub sum: f64,
    /// Population standard deviation.
    pub std: f64,
    /// Percentiles keyed `p1`…`p99`, `p99.9`.
    #[serde(flatten)]
    pub percentiles: BTreeMap<String, f64>,
}

/// The percentiles every stat reports.
pub(crate) const PERCENTILES: [f64; 11] = [
    1.0, 5.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 100.0,
];

fn pct_key(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("p{p:.0}")
    } else {
        format!("p{p}")
    }
}

/// numpy `percentile(x, p)` (linear) on sorted values.
pub(crate) fn percentile_sorted(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let h = (sorted.len() - 1) as f64 * p / 100.0;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

impl Stat {
    /// Exact statistics of `values` (NaN values are dropped).
    pub fn of(values: &[f64]) -> Option<Stat> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len() as f64;
        let sum: f64 = v.iter().sum();
        let avg = sum / n;
        let var = v.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / n;
        let percentiles = PERCENTILES
            .iter()
            .filter(|&&p| p < 100.0)
            .map(|&p| (pct_key(p), percentile_sorted(&v, p)))
            .collect();
        Some(Stat {
            count: v.len() as u64,
            avg,
            min: v[0],
            max: v[v.len() - 1],
            sum,
            std: var.sqrt(),
            percentiles,
        })
    }

    pub(super) fn of_hist(h: &Histogram<u64>, scale: f64) -> Option<Stat> {
        if h.is_empty() {
            return None;
        }
        let percentiles = PERCENTILES
            .iter()
            .filter(|&&p| p < 100.0)
            .map(|&p| (pct_key(p), h.value_at_quantile(p / 100.0) as f64 / scale))
            .collect();
        Some(Stat {
            count: h.len(),
            avg: h.mean() / scale,
            min: h.min() as f64 / scale,
            max: h.max() as f64 / scale,
            sum: h.mean() * h.len() as f64 / scale,
            std: h.stdev() / scale,
            percentiles,
        })
    }

    /// A percentile by its key (`"p99"`).
    pub fn p(&self, key: &str) -> f64 {
        self.percentiles.get(key).copied().unwrap_or(f64::NAN)
    }
}
