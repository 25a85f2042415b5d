//! The prompt-length check of SPEED-Bench's Throughput splits: every row of `throughput_8k` was
//! padded or cut to 8,000 tokens by the preparer, so a tier whose median prompt is far from that
//! says the file was mis-prepared and the run measured another input length.

use std::collections::BTreeMap;

use serde::Serialize;

/// Off by more than this fraction of the nominal length, a tier is warned about.
pub(crate) const ISL_TOLERANCE: f64 = 0.10;

/// The check over one run (`summary.json` `speed_bench_isl`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IslCheck {
    /// The split (`throughput_8k`).
    pub split: String,
    /// Its nominal prompt length: tokens of tiktoken `o200k_base`, which the served model's
    /// tokenizer counts a little differently.
    pub nominal_isl: u64,
    /// Per tier (or `--group-by` group): the first turns' prompt tokens.
    pub by_group: BTreeMap<String, GroupIsl>,
}

/// One tier's prompt lengths.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupIsl {
    /// Successful requests counted.
    pub requests: u64,
    /// Median prompt tokens.
    pub median: f64,
    /// Fewest.
    pub min: u64,
    /// Most.
    pub max: u64,
    /// (median − nominal) / nominal.
    pub off_fraction: f64,
    /// Within 10% of the nominal length.
    pub ok: bool,
}

/// Prompt tokens of successful first turns, per group, as the aggregator collects them.
#[derive(Clone, Debug, Default)]
pub(crate) struct IslByGroup(BTreeMap<String, Vec<u64>>);

impl IslByGroup {
    pub(crate) fn add(&mut self, group: &str, tokens: u64) {
        match self.0.get_mut(group) {
            Some(v) => v.push(tokens),
            None => {
                self.0.insert(group.to_owned(), vec![tokens]);
            }
        }
    }

    /// The check against `nominal`, and a warning per tier off by more than the tolerance.
    /// `None` when no first turn had a count.
    pub(crate) fn check(&self, split: &str, nominal: u64) -> Option<(IslCheck, Vec<String>)> {
        let mut by_group = BTreeMap::new();
        let mut warnings = Vec::new();
        for (group, v) in &self.0 {
            let mut v = v.clone();
            v.sort_unstable();
            let (Some(&min), Some(&max)) = (v.first(), v.last()) else {
                continue;
            };
            let n = v.len();
            let median = if n % 2 == 1 {
                v[n / 2] as f64
            } else {
                (v[n / 2 - 1] + v[n / 2]) as f64 / 2.0
            };
            let off = (median - nominal as f64) / nominal as f64;
            let ok = off.abs() <= ISL_TOLERANCE;
            if !ok {
                warnings.push(format!(
                    "SPEED-Bench {split}, {group}: the median prompt is {median:.0} tokens, {:+.0}% \
                     off the split's nominal {nominal} (the preparer pads or cuts every row to \
                     {nominal} o200k_base tokens): the file looks mis-prepared and this run \
                     measured another input length; prepare it again (NeMo-Skills' prepare.py \
                     --config {split})",
                    off * 100.0
                ));
            }
            by_group.insert(
                group.clone(),
                GroupIsl {
                    requests: n as u64,
                    median,
                    min,
                    max,
                    off_fraction: off,
                    ok,
                },
            );
        }
        (!by_group.is_empty()).then(|| {
            (
                IslCheck {
                    split: split.to_owned(),
                    nominal_isl: nominal,
                    by_group,
                },
                warnings,
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tier_whose_median_is_more_than_ten_percent_off_is_warned_about() {
        let mut g = IslByGroup::default();
        for t in [7_900, 8_050, 8_100] {
            g.add("mixed", t);
        }
        for t in [4_000, 4_100, 9_000, 4_050] {
            g.add("low_entropy", t);
        }
        let (check, warnings) = g.check("throughput_8k", 8_000).unwrap();
        assert!(check.by_group["mixed"].ok);
        assert_eq!(check.by_group["mixed"].median, 8_050.0);
        let low = &check.by_group["low_entropy"];
        assert!(!low.ok);
        assert_eq!(low.median, 4_075.0);
        assert_eq!((low.min, low.max, low.requests), (4_000, 9_000, 4));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("low_entropy") && warnings[0].contains("-49%"),
            "{}",
            warnings[0]
        );
        // At the edge: 10% off passes, just over does not.
        let mut g = IslByGroup::default();
        g.add("high_entropy", 1_100);
        assert!(g.check("throughput_1k", 1_000).unwrap().1.is_empty());
        let mut g = IslByGroup::default();
        g.add("high_entropy", 1_101);
        assert_eq!(g.check("throughput_1k", 1_000).unwrap().1.len(), 1);
        assert!(IslByGroup::default()
            .check("throughput_1k", 1_000)
            .is_none());
    }
}
