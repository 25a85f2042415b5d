//! Statistics over repeated runs of one point, as AIPerf 0.13 aggregates `--num-profile-runs`:
//! every value is summarised over the runs by its mean, the sample standard deviation (ddof 1),
//! the coefficient of variation, the standard error and a two-sided Student-t confidence
//! interval `mean ± t(1 - (1 - c) / 2, n - 1) · se`. One run gives a degenerate interval (the
//! mean at both ends, t, std, se and CV all 0) rather than NaNs, so that it serialises to JSON.
//!
//! Convergence stops the runs early: the interval's half-width relative to the mean (`ci-width`),
//! the coefficient of variation (`cv`), or a two-sample Kolmogorov-Smirnov test of the newest
//! run's per-request values against the earlier runs' pooled (`distribution`, asymptotic p-value
//! as in Numerical Recipes' `probks`, with the `sqrt(ne) + 0.12 + 0.11 / sqrt(ne)` correction).
//! None of them converges before two runs.
//!
//! The t quantile inverts the t CDF, written through the regularised incomplete beta function
//! (continued fraction by Lentz's method, ln Γ by Lanczos), by bisection to 1e-12 relative.
//!
//! Non-finite inputs are ignored; where nothing is left, the functions return `None` (or NaN for
//! [`t_critical`] outside its domain) instead of panicking.

use serde::{Deserialize, Serialize};

/// Mean and confidence interval of one value over the runs. Public (not `pub(crate)`): `sweep`
/// re-exports it and `sweep.json` stores it per point.
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

/// P(T <= t) for Student's t with `df` degrees of freedom: the tail is
/// `I_(df / (df + t²))(df / 2, 1/2) / 2`, written as `(1 - I_(t² / (df + t²))(1/2, df / 2)) / 2`
/// for |t| < sqrt(df), where `df / (df + t²)` would round to 1 and flatten the CDF near 0.
fn t_cdf(t: f64, df: f64) -> f64 {
    let t2 = t * t;
    let tail = if t2 < df {
        0.5 * (1.0 - inc_beta(0.5, df / 2.0, t2 / (df + t2)))
    } else {
        0.5 * inc_beta(df / 2.0, 0.5, df / (df + t2))
    };
    if t >= 0.0 {
        1.0 - tail
    } else {
        tail
    }
}

/// The two-sided Student-t critical value: the quantile at `1 - (1 - confidence) / 2` with `df`
/// degrees of freedom (NaN outside finite df > 0, 0 < confidence < 1; infinite when the quantile
/// passes 1e12). Accurate to about 1e-9 relative up to df = 1e6 (tested); beyond that the
/// rounding of ln Γ at df / 2 grows with df. Repeated runs use df = runs - 1.
pub(crate) fn t_critical(df: f64, confidence: f64) -> f64 {
    if !(df > 0.0 && df.is_finite() && confidence > 0.0 && confidence < 1.0) {
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
        if hi - lo <= 1e-12 * hi {
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

/// Q_KS(λ) = 2 Σ (-1)^(j-1) exp(-2 j² λ²), clamped to [0, 1]; 1 for tiny λ, where the series
/// does not converge in 100 terms (and the true value is 1 to many digits).
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

/// A convergence verdict. Public (not `pub(crate)`): `sweep` re-exports it as
/// `ConvergenceCheck` and `sweep.json` stores it per point.
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
            // Unlike `Interval::cv` (0 for display), spread around a zero mean never converges.
            let cv = if i.mean == 0.0 && i.std > 0.0 {
                f64::INFINITY
            } else {
                i.cv
            };
            let ok = i.n >= 2 && cv <= threshold;
            (
                cv,
                ok,
                format!(
                    "coefficient of variation {:.1}% after {runs} runs (threshold {:.1}%){}",
                    cv * 100.0,
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
    fn ln_gamma_matches_known_values() {
        assert!(ln_gamma(1.0).abs() < 1e-14 && ln_gamma(2.0).abs() < 1e-14);
        assert!(close(ln_gamma(5.0), 24f64.ln(), 1e-13));
        assert!(close(
            ln_gamma(0.5),
            std::f64::consts::PI.sqrt().ln(),
            1e-13
        ));
        // The reflection branch (x < 0.5) and large arguments (mpmath values).
        assert!(close(ln_gamma(0.3), 1.095_797_994_818_075_5, 1e-13));
        assert!(close(ln_gamma(10.0), 12.801_827_480_081_469, 1e-13));
        assert!(close(ln_gamma(100.5), 361.435_540_467_777_6, 1e-13));
    }

    #[test]
    fn the_incomplete_beta_matches_closed_forms() {
        for x in [0.01, 0.2, 0.5, 0.77, 0.999] {
            // I_x(1, 1) = x, I_x(a, 1) = x^a, I_x(1, b) = 1 - (1 - x)^b.
            assert!(close(inc_beta(1.0, 1.0, x), x, 1e-12), "{x}");
            assert!(close(inc_beta(3.5, 1.0, x), x.powf(3.5), 1e-11), "{x}");
            assert!(
                close(inc_beta(1.0, 2.5, x), 1.0 - (1.0 - x).powf(2.5), 1e-11),
                "{x}"
            );
            // Symmetry: I_x(a, b) = 1 - I_(1-x)(b, a).
            let (a, b) = (2.3, 7.1);
            assert!((inc_beta(a, b, x) + inc_beta(b, a, 1.0 - x) - 1.0).abs() < 1e-12);
        }
        assert!(close(inc_beta(2.0, 3.0, 0.4), 0.5248, 1e-12));
        assert_eq!(
            (inc_beta(2.0, 3.0, 0.0), inc_beta(2.0, 3.0, 1.0)),
            (0.0, 1.0)
        );
        assert_eq!(
            (inc_beta(2.0, 3.0, -1.0), inc_beta(2.0, 3.0, 2.0)),
            (0.0, 1.0)
        );
    }

    #[test]
    fn the_t_cdf_matches_closed_forms_and_tables() {
        for t in [-30.0, -2.5, -1.0, -0.1, 0.0, 0.3, 1.0, 4.0, 100.0] {
            // df = 1 is Cauchy: 1/2 + atan(t)/π; df = 2: 1/2 + t / (2 sqrt(2 + t²)).
            let cauchy = 0.5 + f64::atan(t) / std::f64::consts::PI;
            assert!((t_cdf(t, 1.0) - cauchy).abs() < 1e-12, "{t}");
            let two = 0.5 + t / (2.0 * (2.0 + t * t).sqrt());
            assert!((t_cdf(t, 2.0) - two).abs() < 1e-12, "{t}");
            // Symmetric about 0.
            assert!((t_cdf(t, 7.0) + t_cdf(-t, 7.0) - 1.0).abs() < 1e-12, "{t}");
        }
        assert_eq!(t_cdf(0.0, 5.0), 0.5);
        assert!(close(t_cdf(2.0, 5.0), 0.949_030_260_585_070_8, 1e-12));
        assert!(close(t_cdf(-1.5, 3.0), 0.115_291_932_622_411_53, 1e-11));
    }

    #[test]
    fn t_critical_matches_the_tables() {
        // (confidence, df, t) with t = the quantile at 1 - (1 - confidence) / 2.
        for (c, df, want) in [
            (0.95, 1.0, 12.706_204_736),
            (0.95, 2.0, 4.302_652_730),
            (0.95, 3.0, 3.182_446_305),
            (0.95, 4.0, 2.776_445_105),
            (0.95, 9.0, 2.262_157_163),
            (0.95, 30.0, 2.042_272_456),
            (0.95, 100.0, 1.983_971_519),
            (0.90, 4.0, 2.131_846_786),
            (0.99, 2.0, 9.924_843_200),
            (0.95, 0.5, 164.557_673_480),
            // mpmath: 1.959966357, the normal quantile (1.959963985) plus (z³ + z) / (4 df).
            (0.95, 1e6, 1.959_966_357),
        ] {
            let t = t_critical(df, c);
            assert!(close(t, want, 1e-9), "t({c}, {df}) = {t}, want {want}");
        }
        assert!((t_critical(1e6, 0.95) - 1.959_964).abs() < 3e-6);
    }

    #[test]
    fn t_critical_is_monotone() {
        let dfs = [1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0, 50.0, 1000.0];
        for w in dfs.windows(2) {
            assert!(t_critical(w[0], 0.95) > t_critical(w[1], 0.95), "{w:?}");
        }
        let cs = [0.01, 0.5, 0.8, 0.9, 0.95, 0.99, 0.999];
        for w in cs.windows(2) {
            assert!(t_critical(4.0, w[0]) < t_critical(4.0, w[1]), "{w:?}");
        }
        // Confidence near 0: the quantile near the median, p - 1/2 over the density at 0
        // (Γ(5/2) / (sqrt(4π) Γ(2)) = 3/8 for df = 4).
        let tiny = t_critical(4.0, 1e-9);
        assert!(close(tiny, 0.5e-9 / 0.375, 1e-4), "{tiny}");
    }

    #[test]
    fn t_critical_outside_its_domain_is_nan_not_a_panic() {
        for (df, c) in [
            (0.0, 0.95),
            (-1.0, 0.95),
            (f64::NAN, 0.95),
            (f64::INFINITY, 0.95),
            (3.0, 0.0),
            (3.0, 1.0),
            (3.0, -0.5),
            (3.0, 1.5),
            (3.0, f64::NAN),
        ] {
            assert!(t_critical(df, c).is_nan(), "t({c}, {df})");
        }
        // A tiny df: the quantile is past 1e12.
        assert_eq!(t_critical(1e-3, 0.95), f64::INFINITY);
    }

    #[test]
    fn the_interval_is_the_t_interval_over_run_means() {
        let i = interval(&[10.0, 12.0, 14.0], 0.95).unwrap();
        assert_eq!(
            (i.n, i.mean, i.std, i.min, i.max),
            (3, 12.0, 2.0, 10.0, 14.0)
        );
        assert!(close(i.se, 1.154_700_5, 1e-7));
        assert!(close(i.t_critical, 4.302_652_7, 1e-7));
        assert!(close(i.half_width(), 4.968_275, 1e-6), "{}", i.half_width());
        assert!(close(i.ci_low, 12.0 - 4.968_275, 1e-6));
        assert!(close(i.ci_high, 12.0 + 4.968_275, 1e-6));
        assert!(close(i.cv, 1.0 / 6.0, 1e-12));
        assert!(close(i.relative_half_width(), 4.968_275 / 12.0, 1e-6));
        assert_eq!(i.confidence, 0.95);
        // Order does not matter.
        assert_eq!(interval(&[14.0, 10.0, 12.0], 0.95), Some(i));
    }

    #[test]
    fn the_interval_at_another_confidence_uses_its_own_quantile() {
        // [1..5] at 90%: mean 3, std sqrt(2.5), se sqrt(0.5), t(0.95, 4) = 2.131846786.
        let i = interval(&[5.0, 1.0, 4.0, 2.0, 3.0], 0.90).unwrap();
        assert_eq!((i.n, i.mean, i.min, i.max), (5, 3.0, 1.0, 5.0));
        assert!(close(i.std, 2.5f64.sqrt(), 1e-12));
        assert!(close(i.se, 0.5f64.sqrt(), 1e-12));
        assert!(close(i.t_critical, 2.131_846_786, 1e-9));
        assert!(close(i.half_width(), 2.131_846_786 * 0.5f64.sqrt(), 1e-9));
        assert!(close(i.cv, 2.5f64.sqrt() / 3.0, 1e-12));
    }

    #[test]
    fn one_run_gives_a_degenerate_interval_that_serialises() {
        let one = interval(&[5.0, f64::NAN, f64::INFINITY], 0.95).unwrap();
        let want = Interval {
            n: 1,
            mean: 5.0,
            std: 0.0,
            min: 5.0,
            max: 5.0,
            cv: 0.0,
            se: 0.0,
            t_critical: 0.0,
            ci_low: 5.0,
            ci_high: 5.0,
            confidence: 0.95,
        };
        assert_eq!(one, want);
        assert_eq!((one.half_width(), one.relative_half_width()), (0.0, 0.0));
        let json = serde_json::to_string(&one).unwrap();
        assert!(!json.contains("null"), "{json}");
        assert_eq!(serde_json::from_str::<Interval>(&json).unwrap(), one);
    }

    #[test]
    fn the_interval_round_trips_through_json() {
        let i = interval(&[1.5, 2.25, 3.125, 9.0], 0.99).unwrap();
        let json = serde_json::to_string(&i).unwrap();
        for key in [
            "\"n\":4",
            "\"t_critical\"",
            "\"ci_low\"",
            "\"confidence\":0.99",
        ] {
            assert!(json.contains(key), "{key} in {json}");
        }
        assert_eq!(serde_json::from_str::<Interval>(&json).unwrap(), i);
    }

    #[test]
    fn the_interval_ignores_non_finite_values_and_is_none_without_any() {
        let clean = interval(&[10.0, 12.0, 14.0], 0.95).unwrap();
        let dirty = interval(
            &[f64::NAN, 10.0, f64::INFINITY, 12.0, f64::NEG_INFINITY, 14.0],
            0.95,
        );
        assert_eq!(dirty, Some(clean));
        assert!(interval(&[], 0.95).is_none());
        assert!(interval(&[f64::NAN], 0.95).is_none());
        assert!(interval(&[f64::INFINITY, f64::NEG_INFINITY], 0.95).is_none());
    }

    #[test]
    fn the_interval_handles_zero_negative_and_constant_means() {
        // Constant runs: no spread, no width.
        let flat = interval(&[7.0, 7.0, 7.0, 7.0], 0.95).unwrap();
        assert_eq!(
            (flat.std, flat.se, flat.cv, flat.half_width()),
            (0.0, 0.0, 0.0, 0.0)
        );
        assert_eq!((flat.ci_low, flat.ci_high), (7.0, 7.0));
        assert_eq!(flat.relative_half_width(), 0.0);
        // A zero mean with spread: CV 0 by convention, relative width infinite.
        let zero = interval(&[-1.0, 1.0], 0.95).unwrap();
        assert_eq!((zero.mean, zero.cv), (0.0, 0.0));
        assert!(zero.half_width() > 0.0);
        assert_eq!(zero.relative_half_width(), f64::INFINITY);
        // All zero: 0, not NaN.
        let nil = interval(&[0.0, 0.0], 0.95).unwrap();
        assert_eq!((nil.cv, nil.relative_half_width()), (0.0, 0.0));
        // A negative mean: CV and relative width over |mean|, positive.
        let neg = interval(&[-10.0, -12.0, -14.0], 0.95).unwrap();
        assert_eq!(neg.mean, -12.0);
        assert!(close(neg.cv, 1.0 / 6.0, 1e-12));
        assert!(close(neg.relative_half_width(), 4.968_275 / 12.0, 1e-6));
        assert!(neg.ci_low < -12.0 && neg.ci_high > -12.0);
    }

    #[test]
    fn q_ks_matches_the_series() {
        // mpmath values of 2 Σ (-1)^(j-1) exp(-2 j² λ²).
        for (lambda, want) in [
            (0.5, 0.963_945_243_664_875_1),
            (1.0, 0.269_999_671_677_354_5),
            (1.36, 0.049_485_876_755_377_88),
            (2.0, 6.709_252_557_796_953e-4),
        ] {
            let q = q_ks(lambda);
            assert!(close(q, want, 1e-9), "Q({lambda}) = {q}, want {want}");
        }
        assert_eq!((q_ks(0.0), q_ks(1e-4), q_ks(0.01)), (1.0, 1.0, 1.0));
        assert_eq!(q_ks(50.0), 0.0);
        let mut last = 1.0;
        for k in 1..400 {
            let q = q_ks(f64::from(k) * 0.01);
            assert!((0.0..=1.0).contains(&q) && q <= last + 1e-12, "λ {k}: {q}");
            last = q;
        }
    }

    #[test]
    fn ks_of_identical_samples_is_zero_with_p_one() {
        let a: Vec<f64> = (0..50).map(f64::from).collect();
        let same = ks_two_sample(&a, &a).unwrap();
        assert_eq!((same.d, same.p_value), (0.0, 1.0));
        // Shuffled, it is the same sample.
        let mut r = a.clone();
        r.reverse();
        assert_eq!(ks_two_sample(&a, &r), Some(same));
        // All equal values (ties across both samples) step together.
        assert_eq!(ks_two_sample(&[3.0; 5], &[3.0; 8]).unwrap().d, 0.0);
    }

    #[test]
    fn ks_of_disjoint_samples_is_one_with_a_tiny_p() {
        let a: Vec<f64> = (0..50).map(f64::from).collect();
        let b: Vec<f64> = (100..150).map(f64::from).collect();
        let apart = ks_two_sample(&a, &b).unwrap();
        assert_eq!(apart.d, 1.0);
        assert!(apart.p_value < 1e-10, "{}", apart.p_value);
        // Interleaved-free but touching: the last of a equals the first of b.
        let c: Vec<f64> = (49..99).map(f64::from).collect();
        assert!(close(ks_two_sample(&a, &c).unwrap().d, 49.0 / 50.0, 1e-12));
    }

    #[test]
    fn ks_of_a_shifted_copy_matches_the_hand_value() {
        // 0..50 against 10..60: at x = 9, F_a = 10/50 and F_b = 0; it never differs by more.
        let a: Vec<f64> = (0..50).map(f64::from).collect();
        let c: Vec<f64> = (10..60).map(f64::from).collect();
        let s = ks_two_sample(&a, &c).unwrap();
        assert!(close(s.d, 0.2, 1e-12), "{}", s.d);
        // ne = 25, λ = (5 + 0.12 + 0.022) · 0.2 = 1.0284, Q_KS(1.0284) from mpmath.
        assert!(
            close(s.p_value, 0.240_791_993_418_918_15, 1e-9),
            "{}",
            s.p_value
        );
    }

    #[test]
    fn ks_steps_ties_together() {
        // At x = 1: F_a = 2/3, F_b = 1/3; at x = 2 both reach 1. Stepping one sample at a time
        // past the tie would see 2/3 - 0 on the way.
        let k = ks_two_sample(&[1.0, 1.0, 2.0], &[1.0, 2.0, 2.0]).unwrap();
        assert!(close(k.d, 1.0 / 3.0, 1e-12), "{}", k.d);
        // Unequal sizes: a = [1, 2, 3, 4], b = [2.5, 5]; the largest gap is 1/2 (at 2 and at 4).
        let u = ks_two_sample(&[4.0, 1.0, 3.0, 2.0], &[5.0, 2.5]).unwrap();
        assert!(close(u.d, 0.5, 1e-12), "{}", u.d);
        // Ties inside one sample only.
        let w = ks_two_sample(&[1.0, 1.0, 1.0, 2.0], &[1.0, 2.0, 2.0, 2.0]).unwrap();
        assert!(close(w.d, 0.5, 1e-12), "{}", w.d);
    }

    #[test]
    fn ks_does_not_depend_on_the_order_of_its_inputs() {
        let a = [0.3, 1.7, 2.2, 2.2, 5.0, 8.1, 9.9];
        let b = [1.0, 2.2, 3.3, 4.4, 4.4, 6.0, 7.5, 8.0, 12.0, 0.1, -3.0];
        let ab = ks_two_sample(&a, &b).unwrap();
        assert_eq!(ks_two_sample(&b, &a), Some(ab));
        let mut ra = a;
        ra.reverse();
        assert_eq!(ks_two_sample(&b, &ra), Some(ab));
        assert!(ab.d > 0.0 && ab.d < 1.0 && (0.0..=1.0).contains(&ab.p_value));
    }

    #[test]
    fn ks_ignores_non_finite_values_and_is_none_without_any() {
        let a: Vec<f64> = (0..20).map(f64::from).collect();
        let mut dirty = a.clone();
        dirty.extend([f64::NAN, f64::INFINITY, f64::NEG_INFINITY]);
        assert_eq!(ks_two_sample(&a, &dirty).unwrap().d, 0.0);
        assert!(ks_two_sample(&a, &[]).is_none());
        assert!(ks_two_sample(&[], &a).is_none());
        assert!(ks_two_sample(&[f64::NAN], &a).is_none());
        assert!(ks_two_sample(&a, &[f64::INFINITY]).is_none());
        // One value each.
        let one = ks_two_sample(&[1.0], &[2.0]).unwrap();
        assert_eq!(one.d, 1.0);
        assert!((0.0..=1.0).contains(&one.p_value));
    }

    #[test]
    fn ks_results_round_trip_through_json() {
        let k = ks_two_sample(&[1.0, 2.0, 3.0], &[2.0, 3.0, 4.0, 5.0]).unwrap();
        let json = serde_json::to_string(&k).unwrap();
        assert_eq!(serde_json::from_str::<KsTest>(&json).unwrap(), k);
    }

    #[test]
    fn modes_mirror_the_cli_and_have_their_defaults() {
        use crate::cli::ConvergenceMode as C;
        assert_eq!(Mode::from(C::CiWidth), Mode::CiWidth);
        assert_eq!(Mode::from(C::Cv), Mode::Cv);
        assert_eq!(Mode::from(C::Distribution), Mode::Distribution);
        assert_eq!(default_threshold(Mode::CiWidth), 0.10);
        assert_eq!(default_threshold(Mode::Cv), 0.05);
        assert_eq!(default_threshold(Mode::Distribution), 0.05);
    }

    #[test]
    fn ci_width_compares_the_relative_half_width() {
        let runs = [10.0, 12.0, 14.0];
        let c = check(Mode::CiWidth, 0.10, 0.95, &runs, &[], &[]).unwrap();
        let want = interval(&runs, 0.95).unwrap().relative_half_width();
        assert_eq!((c.value, c.threshold, c.runs), (want, 0.10, 3));
        assert!(!c.converged, "{}", c.explain);
        assert!(
            c.explain
                .starts_with("95% CI half-width is 41.4% of the mean"),
            "{}",
            c.explain
        );
        assert!(c.explain.contains("threshold 10.0%"), "{}", c.explain);
        let wide = check(Mode::CiWidth, 0.5, 0.95, &runs, &[], &[]).unwrap();
        assert!(wide.converged && wide.explain.ends_with(": converged"));
        // At the threshold exactly: converged (<=).
        let at = check(Mode::CiWidth, want, 0.95, &runs, &[], &[]).unwrap();
        assert!(at.converged);
        let tight = check(Mode::CiWidth, 0.1, 0.95, &[10.0, 10.1, 9.9], &[], &[]).unwrap();
        assert!(tight.converged, "{}", tight.explain);
    }

    #[test]
    fn cv_compares_the_coefficient_of_variation() {
        let loose = check(Mode::Cv, 0.05, 0.95, &[10.0, 20.0], &[], &[]).unwrap();
        assert!(!loose.converged && loose.explain.contains("coefficient of variation"));
        // std of [10, 20] is sqrt(50), mean 15.
        assert!(close(loose.value, 50f64.sqrt() / 15.0, 1e-12));
        let steady = check(Mode::Cv, 0.05, 0.95, &[100.0, 101.0, 99.0], &[], &[]).unwrap();
        assert!(
            steady.converged && close(steady.value, 0.01, 1e-12),
            "{steady:?}"
        );
        // Spread around a zero mean never converges; no spread at all does.
        let zero = check(Mode::Cv, 0.05, 0.95, &[-1.0, 1.0], &[], &[]).unwrap();
        assert!(!zero.converged && zero.value == f64::INFINITY);
        let nil = check(Mode::Cv, 0.05, 0.95, &[0.0, 0.0], &[], &[]).unwrap();
        assert!(nil.converged && nil.value == 0.0);
    }

    #[test]
    fn no_mode_converges_before_two_runs() {
        for mode in [Mode::CiWidth, Mode::Cv] {
            let one = check(mode, 1e9, 0.95, &[10.0], &[], &[]).unwrap();
            assert!(!one.converged && one.runs == 1, "{mode:?}");
            // Two runs but one finite value: still one run's worth.
            let half = check(mode, 1e9, 0.95, &[10.0, f64::NAN], &[], &[]).unwrap();
            assert!(!half.converged && half.runs == 2, "{mode:?}");
        }
        let a: Vec<f64> = (0..40).map(f64::from).collect();
        let one = check(Mode::Distribution, 0.05, 0.95, &[1.0], &a, &a).unwrap();
        assert!(!one.converged && one.value == 1.0);
        let none = check(Mode::Distribution, 0.05, 0.95, &[], &a, &a).unwrap();
        assert!(!none.converged && none.runs == 0);
    }

    #[test]
    fn distribution_compares_the_ks_p_value() {
        let a: Vec<f64> = (0..40).map(f64::from).collect();
        let same = check(Mode::Distribution, 0.05, 0.95, &[1.0, 1.0], &a, &a).unwrap();
        assert!(same.converged && same.value == 1.0, "{}", same.explain);
        assert!(
            same.explain.contains("KS test of run 2"),
            "{}",
            same.explain
        );
        let b: Vec<f64> = (100..140).map(f64::from).collect();
        let apart = check(Mode::Distribution, 0.05, 0.95, &[1.0, 9.0], &b, &a).unwrap();
        assert!(!apart.converged && apart.value < 1e-10, "{}", apart.explain);
        // The value is the KS p-value of newest against earlier.
        let c: Vec<f64> = (10..50).map(f64::from).collect();
        let shifted = check(Mode::Distribution, 0.05, 0.95, &[1.0, 2.0, 3.0], &c, &a).unwrap();
        assert_eq!(shifted.value, ks_two_sample(&c, &a).unwrap().p_value);
        assert_eq!(shifted.converged, shifted.value >= 0.05);
    }

    #[test]
    fn check_is_none_without_the_values_it_needs() {
        let a: Vec<f64> = (0..10).map(f64::from).collect();
        assert!(check(Mode::CiWidth, 0.1, 0.95, &[], &a, &a).is_none());
        assert!(check(Mode::Cv, 0.05, 0.95, &[f64::NAN, f64::NAN], &a, &a).is_none());
        assert!(check(Mode::Distribution, 0.05, 0.95, &[1.0, 2.0], &[], &a).is_none());
        assert!(check(Mode::Distribution, 0.05, 0.95, &[1.0, 2.0], &a, &[]).is_none());
        // The run values do not matter to the distribution mode beyond their count.
        assert!(check(Mode::Distribution, 0.05, 0.95, &[f64::NAN; 2], &a, &a).is_some());
    }

    #[test]
    fn nan_thresholds_never_converge_and_do_not_panic() {
        let runs = [10.0, 10.0, 10.0];
        for mode in [Mode::CiWidth, Mode::Cv] {
            let c = check(mode, f64::NAN, 0.95, &runs, &[], &[]).unwrap();
            assert!(!c.converged, "{mode:?}");
        }
        let a = [1.0, 2.0];
        let d = check(Mode::Distribution, f64::NAN, 0.95, &runs, &a, &a).unwrap();
        assert!(!d.converged);
    }

    #[test]
    fn checks_round_trip_through_json() {
        let c = check(Mode::CiWidth, 0.10, 0.95, &[10.0, 11.0, 12.0], &[], &[]).unwrap();
        let json = serde_json::to_string(&c).unwrap();
        assert!(json.contains("\"converged\"") && json.contains("\"explain\""));
        assert_eq!(serde_json::from_str::<Check>(&json).unwrap(), c);
    }
}
