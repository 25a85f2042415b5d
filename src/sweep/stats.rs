//! Statistics over repeated runs of one point, as AIPerf 0.13 aggregates `--num-profile-runs`:
//! every value is summarised over the runs by its mean, the sample standard deviation (ddof 1),
//! the coefficient of variation, the standard error and a two-sided Student-t confidence
//! interval `mean ± t(1 - (1 - c) / 2, n - 1) · se`.
//!
//! Convergence stops the runs early: the interval's half-width relative to the mean (`ci-width`),
//! the coefficient of variation (`cv`), or a two-sample Kolmogorov-Smirnov test of the newest
//! run's per-request values against the earlier runs' (`distribution`, asymptotic p-value as in
//! Numerical Recipes' `probks`).
//!
//! The t quantile inverts the t CDF, written through the regularised incomplete beta function
//! (continued fraction by Lentz's method, ln Γ by Lanczos), by bisection.

use serde::{Deserialize, Serialize};

/// Mean and confidence interval of one value over the runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Runs with a value.
    pub n: usize,
    /// Mean over the runs.
    pub mean: f64,
    /// Sample standard deviation (ddof 1; 0 for one run).
    pub std: f64,
    /// Smallest run value.
    pub min: f64,
    /// Largest run value.
    pub max: f64,
    /// `std / |mean|` (0 when the mean is 0).
    pub cv: f64,
    /// Standard error, `std / sqrt(n)`.
    pub se: f64,
    /// The t quantile used (0 for one run: no interval).
    pub t_critical: f64,
    /// Lower end of the interval.
    pub ci_low: f64,
    /// Upper end of the interval.
    pub ci_high: f64,
    /// Confidence level.
    pub confidence: f64,
}

impl Interval {
    /// Half the interval's width.
    pub fn half_width(&self) -> f64 {
        (self.ci_high - self.ci_low) / 2.0
    }

    /// Half-width over `|mean|` (infinite when the mean is 0 and the width is not).
    pub fn relative_half_width(&self) -> f64 {
        let h = self.half_width();
        if self.mean == 0.0 {
            if h == 0.0 {
                0.0
            } else {
                f64::INFINITY
            }
        } else {
            h / self.mean.abs()
        }
    }
}

/// The interval over `values` (non-finite ones ignored); `None` when none is left.
pub(crate) fn interval(values: &[f64], confidence: f64) -> Option<Interval> {
    let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    let n = v.len();
    let mean = v.iter().sum::<f64>() / n as f64;
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if n == 1 {
        return Some(Interval {
            n,
            mean,
            std: 0.0,
            min,
            max,
            cv: 0.0,
            se: 0.0,
            t_critical: 0.0,
            ci_low: mean,
            ci_high: mean,
            confidence,
        });
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let std = var.sqrt();
    let se = std / (n as f64).sqrt();
    let t = t_critical((n - 1) as f64, confidence);
    Some(Interval {
        n,
        mean,
        std,
        min,
        max,
        cv: if mean == 0.0 { 0.0 } else { std / mean.abs() },
        se,
        t_critical: t,
        ci_low: mean - t * se,
        ci_high: mean + t * se,
        confidence,
    })
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The continued fraction of the incomplete beta function (Lentz).
fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    // One Lentz step with coefficient `aa`: updates (c, d) and returns the factor for h.
    let step = |aa: f64, c: &mut f64, d: &mut f64| {
        *d = 1.0 + aa * *d;
        if d.abs() < TINY {
            *d = TINY;
        }
        *c = 1.0 + aa / *c;
        if c.abs() < TINY {
            *c = TINY;
        }
        *d = 1.0 / *d;
        *d * *c
    };
    for m in 1..500 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        h *= step(m * (b - m) * x / ((qam + m2) * (a + m2)), &mut c, &mut d);
        let del = step(
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
            &mut c,
            &mut d,
        );
        h *= del;
        if (del - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// The regularised incomplete beta function I_x(a, b).
fn inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let front = ln_front.exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_cf(a, b, x) / a
    } else {
        1.0 - front * beta_cf(b, a, 1.0 - x) / b
    }
}

/// P(T <= t) for Student's t with `df` degrees of freedom.
fn t_cdf(t: f64, df: f64) -> f64 {
    let x = df / (df + t * t);
    let tail = 0.5 * inc_beta(df / 2.0, 0.5, x);
    if t >= 0.0 {
        1.0 - tail
    } else {
        tail
    }
}

/// The two-sided Student-t critical value: the quantile at `1 - (1 - confidence) / 2` with `df`
/// degrees of freedom (NaN outside df > 0, 0 < confidence < 1).
pub(crate) fn t_critical(df: f64, confidence: f64) -> f64 {
    if !(df > 0.0 && confidence > 0.0 && confidence < 1.0) {
        return f64::NAN;
    }
    let p = 1.0 - (1.0 - confidence) / 2.0;
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    while t_cdf(hi, df) < p {
        hi *= 2.0;
        if hi > 1e12 {
            return f64::INFINITY;
        }
    }
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-12 * hi.max(1.0) {
            break;
        }
    }
    (lo + hi) / 2.0
}

/// A two-sample Kolmogorov-Smirnov test.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct KsTest {
    /// The largest distance between the two empirical CDFs.
    pub(crate) d: f64,
    /// Asymptotic p-value of D under "same distribution".
    pub(crate) p_value: f64,
}

/// The two-sample KS test of `a` against `b` (non-finite values ignored); `None` when either has
/// no value.
pub(crate) fn ks_two_sample(a: &[f64], b: &[f64]) -> Option<KsTest> {
    let sorted = |v: &[f64]| {
        let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let (a, b) = (sorted(a), sorted(b));
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let (n, m) = (a.len() as f64, b.len() as f64);
    let (mut i, mut j, mut d) = (0usize, 0usize, 0.0f64);
    while i < a.len() && j < b.len() {
        // Step both CDFs past the smaller value, ties together.
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while j < b.len() && b[j] <= x {
            j += 1;
        }
        d = d.max((i as f64 / n - j as f64 / m).abs());
    }
    let ne = n * m / (n + m);
    let lambda = (ne.sqrt() + 0.12 + 0.11 / ne.sqrt()) * d;
    Some(KsTest {
        d,
        p_value: q_ks(lambda),
    })
}

/// Q_KS(λ) = 2 Σ (-1)^(j-1) exp(-2 j² λ²), in [0, 1].
fn q_ks(lambda: f64) -> f64 {
    if lambda < 1e-3 {
        return 1.0;
    }
    let a2 = -2.0 * lambda * lambda;
    let (mut sum, mut sign, mut prev) = (0.0, 2.0, 0.0f64);
    for j in 1..=100 {
        let term = sign * (a2 * f64::from(j * j)).exp();
        sum += term;
        if term.abs() <= 1e-10 * prev || term.abs() <= 1e-12 * sum.abs() {
            return sum.clamp(0.0, 1.0);
        }
        sign = -sign;
        prev = term.abs();
    }
    1.0
}

/// How convergence is judged (the CLI's `--convergence-mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Relative half-width of the confidence interval.
    CiWidth,
    /// Coefficient of variation of the run values.
    Cv,
    /// KS p-value of the newest run against the earlier ones.
    Distribution,
}

impl From<crate::cli::ConvergenceMode> for Mode {
    fn from(m: crate::cli::ConvergenceMode) -> Self {
        match m {
            crate::cli::ConvergenceMode::CiWidth => Mode::CiWidth,
            crate::cli::ConvergenceMode::Cv => Mode::Cv,
            crate::cli::ConvergenceMode::Distribution => Mode::Distribution,
        }
    }
}

/// The default threshold of each mode: 10% relative half-width, 5% CV, p-value 0.05.
pub(crate) fn default_threshold(mode: Mode) -> f64 {
    match mode {
        Mode::CiWidth => 0.10,
        Mode::Cv | Mode::Distribution => 0.05,
    }
}

/// A convergence verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// Enough runs: stop repeating.
    pub converged: bool,
    /// The quantity compared with the threshold.
    pub value: f64,
    /// The threshold.
    pub threshold: f64,
    /// Runs so far.
    pub runs: usize,
    /// The verdict in a sentence.
    pub explain: String,
}

/// Judges convergence after the runs whose values are `run_values` (`newest_requests` and
/// `earlier_requests`: per-request values, for the distribution mode). Never converged before 2
/// runs; `None` when the needed values are missing.
pub(crate) fn check(
    mode: Mode,
    threshold: f64,
    confidence: f64,
    run_values: &[f64],
    newest_requests: &[f64],
    earlier_requests: &[f64],
) -> Option<Check> {
    let runs = run_values.len();
    let (value, converged, explain) = match mode {
        Mode::CiWidth => {
            let i = interval(run_values, confidence)?;
            let v = i.relative_half_width();
            let ok = i.n >= 2 && v <= threshold;
            (
                v,
                ok,
                format!(
                    "{:.0}% CI half-width is {:.1}% of the mean after {runs} runs (threshold \
                     {:.1}%){}",
                    confidence * 100.0,
                    v * 100.0,
                    threshold * 100.0,
                    if ok { ": converged" } else { "" }
                ),
            )
        }
        Mode::Cv => {
            let i = interval(run_values, confidence)?;
            let ok = i.n >= 2 && i.cv <= threshold;
            (
                i.cv,
                ok,
                format!(
                    "coefficient of variation {:.1}% after {runs} runs (threshold {:.1}%){}",
                    i.cv * 100.0,
                    threshold * 100.0,
                    if ok { ": converged" } else { "" }
                ),
            )
        }
        Mode::Distribution => {
            let ks = ks_two_sample(newest_requests, earlier_requests)?;
            let ok = runs >= 2 && ks.p_value >= threshold;
            (
                ks.p_value,
                ok,
                format!(
                    "KS test of run {runs} against the earlier runs: D = {:.3}, p = {:.3} \
                     (converged at p >= {threshold}){}",
                    ks.d,
                    ks.p_value,
                    if ok { ": converged" } else { "" }
                ),
            )
        }
    };
    Some(Check {
        converged,
        value,
        threshold,
        runs,
        explain,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    #[test]
    fn t_critical_matches_the_tables() {
        for (c, df, want) in [
            (0.95, 1.0, 12.706204736),
            (0.95, 2.0, 4.302652730),
            (0.95, 4.0, 2.776445105),
            (0.95, 9.0, 2.262157163),
            (0.95, 30.0, 2.042272456),
            (0.90, 4.0, 2.131846786),
            (0.99, 2.0, 9.924843200),
            (0.95, 1e6, 1.959966),
        ] {
            let t = t_critical(df, c);
            assert!(close(t, want, 1e-6), "t({c}, {df}) = {t}, want {want}");
        }
        assert!(t_critical(0.0, 0.95).is_nan() && t_critical(3.0, 1.0).is_nan());
    }

    #[test]
    fn the_interval_is_the_t_interval_over_run_means() {
        let i = interval(&[10.0, 12.0, 14.0], 0.95).unwrap();
        assert_eq!((i.n, i.mean, i.std), (3, 12.0, 2.0));
        assert!(close(i.se, 1.154_700_5, 1e-7));
        assert!(close(i.t_critical, 4.302_652_7, 1e-7));
        assert!(close(i.half_width(), 4.968_275, 1e-6), "{}", i.half_width());
        assert!(close(i.cv, 1.0 / 6.0, 1e-12));
        let one = interval(&[5.0, f64::NAN], 0.95).unwrap();
        assert_eq!(
            (one.n, one.ci_low, one.ci_high, one.t_critical),
            (1, 5.0, 5.0, 0.0)
        );
        assert!(serde_json::to_string(&one).is_ok());
        assert!(interval(&[], 0.95).is_none() && interval(&[f64::NAN], 0.95).is_none());
    }

    #[test]
    fn ks_sees_equal_disjoint_and_shifted_samples() {
        let a: Vec<f64> = (0..50).map(f64::from).collect();
        let same = ks_two_sample(&a, &a).unwrap();
        assert_eq!((same.d, same.p_value), (0.0, 1.0));
        let b: Vec<f64> = (100..150).map(f64::from).collect();
        let apart = ks_two_sample(&a, &b).unwrap();
        assert_eq!(apart.d, 1.0);
        assert!(apart.p_value < 1e-10, "{}", apart.p_value);
        // Shift by 10 of 50: the CDFs differ by 10/50 at most.
        let c: Vec<f64> = (10..60).map(f64::from).collect();
        let s = ks_two_sample(&a, &c).unwrap();
        assert!(close(s.d, 0.2, 1e-12), "{}", s.d);
        assert_eq!(ks_two_sample(&c, &a), Some(s));
        assert!(ks_two_sample(&a, &[]).is_none());
    }

    #[test]
    fn convergence_needs_two_runs_and_a_value_under_the_threshold() {
        let one = check(Mode::CiWidth, 0.1, 0.95, &[10.0], &[], &[]).unwrap();
        assert!(!one.converged);
        let tight = check(Mode::CiWidth, 0.1, 0.95, &[10.0, 10.1, 9.9], &[], &[]).unwrap();
        assert!(tight.converged, "{}", tight.explain);
        let loose = check(Mode::Cv, 0.05, 0.95, &[10.0, 20.0], &[], &[]).unwrap();
        assert!(!loose.converged && loose.explain.contains("coefficient of variation"));
        let a: Vec<f64> = (0..40).map(f64::from).collect();
        let same = check(Mode::Distribution, 0.05, 0.95, &[1.0, 1.0], &a, &a).unwrap();
        assert!(same.converged);
        assert!(check(Mode::Distribution, 0.05, 0.95, &[1.0, 1.0], &[], &a).is_none());
    }
}
