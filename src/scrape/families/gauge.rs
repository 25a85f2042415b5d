//! One gauge series' whole-window stats in bounded memory: Welford's running mean and M2, and
//! its distinct values with their counts for exact percentiles, coarsened past [`MAX_DISTINCT`].

use std::collections::BTreeMap;

use super::MAX_DISTINCT;

/// Running stats over the window's samples of one gauge series.
#[derive(Clone, Debug, Default)]
pub(crate) struct GaugeStats {
    /// Samples in the window.
    pub(crate) n: u64,
    /// Their mean.
    pub(crate) mean: f64,
    /// Sum of squared deviations from the mean (Welford).
    pub(crate) m2: f64,
    /// Smallest.
    pub(crate) min: f64,
    /// Largest.
    pub(crate) max: f64,
    /// Distinct values (as f64 bits) and how often each was seen.
    pub(crate) values: BTreeMap<OrdF64, u64>,
    /// Significant digits the values are rounded to (`None`: exact).
    pub(crate) rounded_to: Option<i32>,
}

/// An f64 ordered by value (NaN last), so distinct values can key a sorted map.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct OrdF64(pub(crate) f64);

impl Eq for OrdF64 {}
impl PartialOrd for OrdF64 {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for OrdF64 {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0)
    }
}

impl GaugeStats {
    /// Adds one sample in the window.
    pub(super) fn add(&mut self, v: f64) {
        if self.n == 0 {
            (self.min, self.max) = (v, v);
        }
        self.n += 1;
        let d = v - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (v - self.mean);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        let key = OrdF64(match self.rounded_to {
            Some(digits) => round_sig(v, digits),
            None => v,
        });
        *self.values.entry(key).or_insert(0) += 1;
        while self.values.len() > MAX_DISTINCT {
            let digits = self.rounded_to.map_or(4, |d| d - 1).max(1);
            self.rounded_to = Some(digits);
            let old = std::mem::take(&mut self.values);
            for (k, c) in old {
                *self
                    .values
                    .entry(OrdF64(round_sig(k.0, digits)))
                    .or_insert(0) += c;
            }
            if digits == 1 {
                break;
            }
        }
    }

    /// Sample standard deviation (ddof 1; 0 for one sample).
    pub(crate) fn std(&self) -> f64 {
        if self.n > 1 {
            (self.m2 / (self.n - 1) as f64).sqrt()
        } else {
            0.0
        }
    }

    /// numpy's default (linear) percentile over the kept values.
    pub(crate) fn percentile(&self, p: f64) -> Option<f64> {
        if self.n == 0 {
            return None;
        }
        let n: u64 = self.values.values().sum();
        let rank = (n - 1) as f64 * p / 100.0;
        let (lo, frac) = (rank.floor() as u64, rank - rank.floor());
        let at = |i: u64| {
            let mut seen = 0;
            for (v, c) in &self.values {
                seen += c;
                if i < seen {
                    return v.0;
                }
            }
            self.max
        };
        let a = at(lo);
        Some(if frac > 0.0 {
            a + (at(lo + 1) - a) * frac
        } else {
            a
        })
    }
}

fn round_sig(v: f64, digits: i32) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let scale = 10f64.powi(digits - 1 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}
