//! numpy's own arithmetic for the statistics benchmark_serving.py reports: `np.mean`, `np.std`,
//! `np.median` and `np.percentile` (linear), bit for bit on the same values.
//!
//! numpy sums float64 arrays pairwise (blocks of up to 128 values, 8 accumulators inside a block),
//! not left to right, and interpolates percentiles with its own two-sided lerp; a plain Rust sum or
//! `a + (b - a) * t` differs in the last bits, which shows as a different digit in the
//! `json.dumps` of the result file. Empty input is the caller's to handle (upstream passes `[0]`).

/// numpy's `pairwise_sum` over `n` values taken from `next` in order (what `np.add.reduce`
/// runs on a contiguous float64 array): each value is read once, front to back, so a derived
/// array (`std`'s squared deviations) or a list spread over many requests need not be built.
fn pairwise_sum(n: usize, next: &mut impl FnMut() -> f64) -> f64 {
    const BLOCK: usize = 128;
    if n < 8 {
        let mut res = 0.0;
        for _ in 0..n {
            res += next();
        }
        res
    } else if n <= BLOCK {
        let mut r = [0.0f64; 8];
        for acc in r.iter_mut() {
            *acc = next();
        }
        let mut i = 8;
        while i < n - n % 8 {
            for acc in r.iter_mut() {
                *acc += next();
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for _ in i..n {
            res += next();
        }
        res
    } else {
        // Halve, keeping the first half a multiple of the unroll.
        let mut n2 = n / 2;
        n2 -= n2 % 8;
        pairwise_sum(n2, next) + pairwise_sum(n - n2, next)
    }
}

/// `np.sum` of the `n` values of `values` (the reduction starts from add's identity, 0.0).
fn sum_of(n: usize, mut values: impl Iterator<Item = f64>) -> f64 {
    0.0 + pairwise_sum(n, &mut || values.next().expect("n values"))
}

/// `np.sum(v)`.
#[cfg(test)]
pub(crate) fn sum(v: &[f64]) -> f64 {
    sum_of(v.len(), v.iter().copied())
}

/// `np.mean(v)`.
pub(crate) fn mean(v: &[f64]) -> f64 {
    mean_of(v.len(), v.iter().copied())
}

/// `np.mean` of the `n` values `values` yields.
pub(crate) fn mean_of(n: usize, values: impl Iterator<Item = f64>) -> f64 {
    sum_of(n, values) / n as f64
}

/// `np.std(v)` (population): the mean, the squared deviations, their mean, the square root.
pub(crate) fn std(v: &[f64]) -> f64 {
    std_of(v.len(), || v.iter().copied())
}

/// `np.std` of the `n` values each call of `values` yields (two passes: the mean, then the
/// squared deviations).
pub(crate) fn std_of<I: Iterator<Item = f64>>(n: usize, values: impl Fn() -> I) -> f64 {
    let m = mean_of(n, values());
    let squares = sum_of(
        n,
        values().map(|x| {
            let d = x - m;
            d * d
        }),
    );
    (squares / n as f64).sqrt()
}

/// `np.median(v)`: the middle value, or the mean of the two middle values.
#[cfg(test)]
pub(crate) fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    median_sorted(&s)
}

/// `np.median(v)` of values already sorted (`f64::total_cmp`).
pub(crate) fn median_sorted(s: &[f64]) -> f64 {
    median_by(s.len(), |i| s[i])
}

/// `np.median` of `n` values, `at(i)` the `i`-th smallest.
pub(crate) fn median_by(n: usize, at: impl Fn(usize) -> f64) -> f64 {
    if n % 2 == 1 {
        at(n / 2)
    } else {
        mean(&[at(n / 2 - 1), at(n / 2)])
    }
}

/// `np.percentile(v, p)` with the default linear method on sorted values: the virtual index
/// `(n - 1) * (p / 100)`, then numpy's lerp, which interpolates from the nearer end.
pub(crate) fn percentile_sorted(s: &[f64], p: f64) -> f64 {
    percentile_by(s.len(), p, |i| s[i])
}

/// [`percentile_sorted`] of `n` values, `at(i)` the `i`-th smallest.
pub(crate) fn percentile_by(n: usize, p: f64, at: impl Fn(usize) -> f64) -> f64 {
    let q = p / 100.0;
    let virtual_index = (n - 1) as f64 * q;
    let prev = virtual_index.floor().clamp(0.0, (n - 1) as f64);
    let lo = prev as usize;
    let hi = (lo + 1).min(n - 1);
    let t = virtual_index - prev;
    let (a, b) = (at(lo), at(hi));
    let diff = b - a;
    if t >= 0.5 {
        b - diff * (1.0 - t)
    } else {
        a + diff * t
    }
}

/// `np.percentile(v, p)`.
#[cfg(test)]
pub(crate) fn percentile(v: &[f64], p: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    percentile_sorted(&s, p)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERCENTILES: [f64; 8] = [50.0, 90.0, 99.0, 99.9, 1.0, 25.0, 75.0, 33.3];

    /// Against numpy itself (`scripts/numpy_stats.py` in the AIPerf venv): 158 arrays of 1 to
    /// 5,000 values, every statistic bit for bit.
    #[test]
    fn matches_numpy_itself_bit_for_bit() {
        let python = crate::test_tools::Tool::Aiperf.path().join("bin/python");
        let script = crate::test_tools::workspace_root().join("scripts/numpy_stats.py");
        let out = std::process::Command::new(&python)
            .arg(&script)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let mut compared = 0;
        for line in text.lines() {
            let f: Vec<u64> = line
                .split_whitespace()
                .map(|x| x.parse().unwrap())
                .collect();
            let k = f[0] as usize;
            let v: Vec<f64> = f[1..=k].iter().map(|b| f64::from_bits(*b)).collect();
            let mut got = vec![mean(&v), std(&v), median(&v)];
            got.extend(PERCENTILES.iter().map(|&p| percentile(&v, p)));
            for (i, (g, want)) in got.iter().zip(&f[k + 1..]).enumerate() {
                assert_eq!(
                    g.to_bits(),
                    *want,
                    "k {k}, statistic {i}: {g:e} vs numpy's {:e}",
                    f64::from_bits(*want)
                );
                compared += 1;
            }
        }
        assert!(
            compared > 1500,
            "only {compared} values from {}",
            script.display()
        );
    }

    /// A left-to-right sum would print another last digit here; numpy's pairwise one does not.
    #[test]
    fn the_sum_is_pairwise_and_the_lerp_two_sided() {
        let v: Vec<f64> = (0..200).map(|i| 0.1 + f64::from(i) * 1e-3).collect();
        let naive: f64 = v.iter().sum();
        assert_ne!(sum(&v), naive);
        assert_eq!(percentile(&[1.0, 2.0], 100.0), 2.0);
        assert_eq!(percentile(&[1.0, 2.0], 0.0), 1.0);
        assert_eq!(median(&[3.0, 1.0, 2.0, 10.0]), 2.5);
    }
}
