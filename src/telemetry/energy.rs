//! Energy over the benchmark window, two ways: the energy counters' delta (each GPU's counter at
//! the window's edges, from the reads nearest each edge and the power they carry), and InferenceX's
//! `aggregate_power.py` integration of the power samples (per GPU, trapezoidal, linear
//! interpolation at the edges, a 3 s maximum gap, the expected GPU count), with its validity
//! reasons. The per-token figures use the counters when every GPU has one, else the integration.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Event, Field, GpuId, SourceKind, TelemetryRun};

/// InferenceX's largest gap between two power samples inside the window, s.
pub const MAX_SAMPLE_GAP_S: f64 = 3.0;

/// Counter and integration disagreeing by more than this fraction is a warning.
pub const DISAGREEMENT_WARNING: f64 = 0.02;

/// What the energy figures are divided by.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EnergyInputs {
    /// Window start, Unix s (the first request sent).
    pub start_unix_s: f64,
    /// Window end, Unix s (the last response).
    pub end_unix_s: f64,
    /// Successful requests in the window.
    pub successful_requests: u64,
    /// Their prompt tokens.
    pub input_tokens: u64,
    /// Their output tokens.
    pub output_tokens: u64,
    /// GPUs the deployment should show (`--gpus`).
    pub expected_gpus: Option<u32>,
}

/// Which measurement the per-token figures use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnergyMethod {
    /// The energy counters' delta over the window.
    Counter,
    /// The power samples integrated over the window (InferenceX's method).
    Integrated,
}

/// Average, least and most of one field over the window.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct FieldStat {
    /// Mean of the reads in the window.
    pub avg: f64,
    /// Least.
    pub min: f64,
    /// Most.
    pub max: f64,
}

/// One GPU over the window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuEnergy {
    /// The GPU.
    pub id: GpuId,
    /// Energy counter at the window's end minus at its start, J.
    pub counter_energy_j: Option<f64>,
    /// Power integrated over the window, J.
    pub integrated_energy_j: Option<f64>,
    /// Energy (counter, else integrated) over the window's duration, W.
    pub avg_power_w: Option<f64>,
    /// Power samples from one gap before the window to one gap after (InferenceX's count).
    pub power_samples: u64,
    /// Largest gap between power samples around the window, s.
    pub max_sample_gap_s: Option<f64>,
    /// Utilisation, memory, clocks, temperatures over the window, by [`Field::as_str`].
    pub fields: BTreeMap<Field, FieldStat>,
    /// Why its integration is not valid (InferenceX's reason codes).
    pub issues: Vec<String>,
}

/// InferenceX's verdict on the power samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IntegrationCheck {
    /// Every GPU's power brackets the window with no gap over the limit, and the GPU count is
    /// the expected one (`aggregate_power.py`'s `power_valid`).
    pub power_valid: bool,
    /// Its reason codes when not valid, in discovery order.
    pub reasons: Vec<String>,
    /// The method, as InferenceX names it.
    pub method: String,
    /// Largest gap allowed, s.
    pub max_sample_gap_s: f64,
}

/// Energy and power over the benchmark window (`summary.json` `energy`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Energy {
    /// Which kind of source.
    pub source: SourceKind,
    /// The sources read.
    pub sources: Vec<String>,
    /// Window start, Unix s.
    pub start_unix_s: f64,
    /// Window end, Unix s.
    pub end_unix_s: f64,
    /// GPUs expected (`--gpus`).
    pub expected_gpus: Option<u32>,
    /// GPUs seen.
    pub observed_gpus: u32,
    /// What the per-token figures use.
    pub method: Option<EnergyMethod>,
    /// All GPUs' energy over the window, J.
    pub total_energy_j: Option<f64>,
    /// Mean power per GPU, W.
    pub avg_power_w: Option<f64>,
    /// Mean power of all GPUs together, W.
    pub avg_total_power_w: Option<f64>,
    /// J per successful request.
    pub joules_per_request: Option<f64>,
    /// J per prompt token.
    pub joules_per_input_token: Option<f64>,
    /// J per output token.
    pub joules_per_output_token: Option<f64>,
    /// J per prompt and output token.
    pub joules_per_total_token: Option<f64>,
    /// Output tokens per second per kW of GPU power.
    pub output_tokens_per_s_per_kw: Option<f64>,
    /// The counters' total, J (every GPU with a counter at both edges).
    pub counter_energy_j: Option<f64>,
    /// The integration's total, J (every GPU whose power brackets the window).
    pub integrated_energy_j: Option<f64>,
    /// |counter − integrated| / counter.
    pub counter_integrated_difference: Option<f64>,
    /// InferenceX's validity check of the integration.
    pub integration: IntegrationCheck,
    /// Per GPU, in the order first seen.
    pub gpus: Vec<GpuEnergy>,
    /// What came and went during the run (fields, GPUs, failed reads).
    pub events: Vec<Event>,
    /// Warnings (also in the run's warnings).
    pub warnings: Vec<String>,
}

/// InferenceX's name for the integration method.
const INTEGRATION_METHOD: &str = "per_device_trapezoidal_with_linear_boundary_interpolation";

/// Computes the window's energy from what the task recorded.
pub fn energy(run: &TelemetryRun, inputs: &EnergyInputs) -> Energy {
    let (a, b) = (inputs.start_unix_s, inputs.end_unix_s);
    let duration = b - a;
    let mut reasons: Vec<String> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    let window_ok = a.is_finite() && b.is_finite() && duration > 0.0;
    if !window_ok {
        push_once(&mut reasons, "invalid_benchmark_window");
    }
    let in_reach = |t: f64| t >= a - MAX_SAMPLE_GAP_S && t <= b + MAX_SAMPLE_GAP_S;
    let mut gpus = Vec::new();
    for s in &run.series {
        let pts: Vec<(f64, &super::Values)> = s
            .readings
            .iter()
            .map(|r| (secs(r.t_ns), &r.values))
            .collect();
        if !pts.iter().any(|(t, _)| in_reach(*t)) {
            continue;
        }
        let power = power_samples(&pts, &in_reach);
        let mut g = GpuEnergy {
            id: s.id.clone(),
            counter_energy_j: None,
            integrated_energy_j: None,
            avg_power_w: None,
            power_samples: power.len() as u64,
            max_sample_gap_s: None,
            fields: field_stats(&pts, a, b),
            issues: Vec::new(),
        };
        if window_ok {
            g.counter_energy_j = counter_delta(&pts, a, b);
            match integrate(&power, a, b) {
                Ok((e, gap)) => {
                    g.max_sample_gap_s = Some(gap);
                    if gap > MAX_SAMPLE_GAP_S {
                        g.issues.push("sampling_gap_exceeded".into());
                    }
                    g.integrated_energy_j = Some(e);
                }
                Err(issue) => g.issues.push(issue.into()),
            }
            for i in &g.issues {
                push_once(&mut reasons, i);
            }
            g.avg_power_w = g
                .counter_energy_j
                .or(g.integrated_energy_j)
                .map(|e| e / duration);
        }
        gpus.push(g);
    }
    let observed = gpus.len() as u32;
    if observed == 0 && window_ok {
        push_once(&mut reasons, "no_usable_power_samples");
    }
    if let Some(n) = inputs.expected_gpus {
        if n == 0 {
            push_once(&mut reasons, "invalid_expected_gpu_count");
        } else if n != observed {
            push_once(&mut reasons, "expected_gpu_count_mismatch");
            warnings.push(format!(
                "GPU telemetry saw {observed} GPU(s) over the window, --gpus says {n}: the energy covers the GPUs seen; check the telemetry endpoints (one per node) or --gpus"
            ));
        }
    }
    let all = |f: fn(&GpuEnergy) -> Option<f64>| -> Option<f64> {
        (observed > 0)
            .then(|| gpus.iter().map(f).sum::<Option<f64>>())
            .flatten()
    };
    let counter = all(|g| g.counter_energy_j);
    let integrated = all(|g| g.integrated_energy_j);
    let difference = match (counter, integrated) {
        (Some(c), Some(i)) if c > 0.0 => Some((c - i).abs() / c),
        _ => None,
    };
    if let (Some(d), Some(c), Some(i)) = (difference, counter, integrated) {
        if d > DISAGREEMENT_WARNING {
            warnings.push(format!(
                "GPU energy: the counters give {c:.1} J over the window, integrating the power samples gives {i:.1} J ({:.1}% apart, more than {:.0}%): the power samples are too sparse for the load's changes; read more often (--gpu-telemetry-interval) or trust the counters",
                d * 100.0,
                DISAGREEMENT_WARNING * 100.0
            ));
        }
    }
    let (method, total) = match (counter, integrated) {
        (Some(c), _) => (Some(EnergyMethod::Counter), Some(c)),
        (None, Some(i)) => (Some(EnergyMethod::Integrated), Some(i)),
        _ => (None, None),
    };
    if total.is_none() && observed > 0 && window_ok {
        let missing: Vec<String> = gpus
            .iter()
            .filter(|g| g.counter_energy_j.is_none() && g.integrated_energy_j.is_none())
            .map(|g| format!("{}:{}", g.id.hostname, g.id.index))
            .collect();
        warnings.push(format!(
            "GPU energy over the window is unknown: neither an energy counter nor power samples around both edges of the window for GPU(s) {}; see summary.json energy.gpus[].issues and energy.events",
            missing.join(", ")
        ));
    }
    let vanished = run
        .events
        .iter()
        .filter(|e| matches!(e.kind, super::EventKind::GpuVanished))
        .count();
    if vanished > 0 {
        warnings.push(format!(
            "{vanished} GPU(s) stopped appearing in the telemetry during the run (summary.json energy.events)"
        ));
    }
    let failed_reads = run
        .events
        .iter()
        .filter(|e| matches!(e.kind, super::EventKind::SourceFailed { .. }))
        .count();
    if failed_reads > 0 {
        warnings.push(format!(
            "{failed_reads} GPU telemetry read(s) failed, leaving gaps (summary.json energy.events)"
        ));
    }
    let per = |n: u64| total.filter(|_| n > 0).map(|e| e / n as f64);
    let avg_total = total.filter(|_| window_ok).map(|e| e / duration);
    Energy {
        source: run.source,
        sources: run.sources.clone(),
        start_unix_s: a,
        end_unix_s: b,
        expected_gpus: inputs.expected_gpus,
        observed_gpus: observed,
        method,
        total_energy_j: total,
        avg_power_w: avg_total
            .filter(|_| observed > 0)
            .map(|p| p / f64::from(observed)),
        avg_total_power_w: avg_total,
        joules_per_request: per(inputs.successful_requests),
        joules_per_input_token: per(inputs.input_tokens),
        joules_per_output_token: per(inputs.output_tokens),
        joules_per_total_token: per(inputs.input_tokens + inputs.output_tokens),
        output_tokens_per_s_per_kw: avg_total
            .filter(|p| *p > 0.0)
            .map(|p| inputs.output_tokens as f64 / duration / (p / 1000.0)),
        counter_energy_j: counter,
        integrated_energy_j: integrated,
        counter_integrated_difference: difference,
        integration: IntegrationCheck {
            power_valid: reasons.is_empty(),
            reasons,
            method: INTEGRATION_METHOD.into(),
            max_sample_gap_s: MAX_SAMPLE_GAP_S,
        },
        gpus,
        events: run.events.clone(),
        warnings,
    }
}

fn secs(t_ns: u64) -> f64 {
    t_ns as f64 / 1e9
}

fn push_once(v: &mut Vec<String>, s: &str) {
    if !v.iter().any(|x| x == s) {
        v.push(s.to_owned());
    }
}

/// Power samples one gap around the window, time-sorted, duplicate stamps averaged (as
/// `aggregate_power.py` reads its CSV).
fn power_samples(pts: &[(f64, &super::Values)], in_reach: &dyn Fn(f64) -> bool) -> Vec<(f64, f64)> {
    let mut by_t: BTreeMap<u64, (f64, f64, u32)> = BTreeMap::new();
    for (t, v) in pts {
        if let Some(&p) = v.get(&Field::Power) {
            if in_reach(*t) && p.is_finite() && p >= 0.0 {
                let e = by_t.entry(t.to_bits()).or_insert((*t, 0.0, 0));
                e.1 += p;
                e.2 += 1;
            }
        }
    }
    let mut out: Vec<(f64, f64)> = by_t
        .into_values()
        .map(|(t, s, n)| (t, s / f64::from(n)))
        .collect();
    out.sort_by(|x, y| x.0.total_cmp(&y.0));
    out
}

/// Power at `t` between the samples that bracket it.
fn interpolate(samples: &[(f64, f64)], t: f64) -> f64 {
    let right = samples.partition_point(|s| s.0 < t);
    if right < samples.len() && samples[right].0 == t {
        return samples[right].1;
    }
    let (l, r) = (samples[right - 1], samples[right]);
    l.1 + (t - l.0) / (r.0 - l.0) * (r.1 - l.1)
}

/// InferenceX's per-device integration: `(energy J, largest gap s)`, or its issue code.
fn integrate(samples: &[(f64, f64)], a: f64, b: f64) -> Result<(f64, f64), &'static str> {
    if samples.len() < 2 {
        return Err("insufficient_power_samples");
    }
    if samples[0].0 > a || samples[samples.len() - 1].0 < b {
        return Err("benchmark_window_not_bracketed");
    }
    let left = samples.partition_point(|s| s.0 <= a) - 1;
    let right = samples.partition_point(|s| s.0 < b);
    let gap = samples[left..=right]
        .windows(2)
        .map(|w| w[1].0 - w[0].0)
        .fold(0.0, f64::max);
    let mut clipped = vec![(a, interpolate(samples, a))];
    clipped.extend(samples.iter().copied().filter(|s| s.0 > a && s.0 < b));
    clipped.push((b, interpolate(samples, b)));
    let e = clipped
        .windows(2)
        .map(|w| (w[1].0 - w[0].0) * (w[0].1 + w[1].1) / 2.0)
        .sum();
    Ok((e, gap))
}

/// The energy counter at `t`: from the read nearest `t` with a counter, carried to `t` with that
/// read's power (the reads at the window's edges are taken the moment the window opens and
/// closes, so this is a few milliseconds at most); without power there, linear between the reads
/// around `t`. `None` when no counter read is within one gap of `t`.
fn counter_at(energy: &[(f64, f64, Option<f64>)], t: f64) -> Option<f64> {
    let nearest = energy
        .iter()
        .min_by(|x, y| (x.0 - t).abs().total_cmp(&(y.0 - t).abs()))?;
    if (nearest.0 - t).abs() > MAX_SAMPLE_GAP_S {
        return None;
    }
    if let Some(p) = nearest.2 {
        return Some(nearest.1 + p * (t - nearest.0));
    }
    let right = energy.partition_point(|e| e.0 < t);
    if right == 0 || right == energy.len() {
        return Some(nearest.1);
    }
    let (l, r) = (energy[right - 1], energy[right]);
    if r.1 < l.1 {
        return Some(nearest.1);
    }
    Some(l.1 + (t - l.0) / (r.0 - l.0) * (r.1 - l.1))
}

/// Counter delta over `[a, b]`, reset-safe: a counter that goes down restarted, and counts from
/// its new value.
fn counter_delta(pts: &[(f64, &super::Values)], a: f64, b: f64) -> Option<f64> {
    let energy: Vec<(f64, f64, Option<f64>)> = pts
        .iter()
        .filter_map(|(t, v)| {
            v.get(&Field::Energy)
                .map(|&e| (*t, e, v.get(&Field::Power).copied()))
        })
        .collect();
    let start = counter_at(&energy, a)?;
    let end = counter_at(&energy, b)?;
    let inside: Vec<f64> = energy
        .iter()
        .filter(|e| e.0 > a && e.0 < b)
        .map(|e| e.1)
        .collect();
    let (Some(&first), Some(&last)) = (inside.first(), inside.last()) else {
        return Some((end - start).max(0.0));
    };
    // Only two reads can tell a reset; the edges are estimates carried with a read's power, and
    // one that overshoots the next read is not the counter restarting (read as one, it added the
    // whole counter since the GPU's start).
    let reads: f64 = inside
        .windows(2)
        .map(|w| if w[1] >= w[0] { w[1] - w[0] } else { w[1] })
        .sum();
    Some((first - start).max(0.0) + reads + (end - last).max(0.0))
}

/// Mean, least and most of every gauge field over the reads inside `[a, b]`.
fn field_stats(pts: &[(f64, &super::Values)], a: f64, b: f64) -> BTreeMap<Field, FieldStat> {
    let mut acc: BTreeMap<Field, (f64, f64, f64, u32)> = BTreeMap::new();
    for (t, v) in pts.iter().filter(|(t, _)| *t >= a && *t <= b) {
        let _ = t;
        for (&f, &x) in v.iter() {
            if f.is_counter() || !x.is_finite() {
                continue;
            }
            let e = acc
                .entry(f)
                .or_insert((0.0, f64::INFINITY, f64::NEG_INFINITY, 0));
            e.0 += x;
            e.1 = e.1.min(x);
            e.2 = e.2.max(x);
            e.3 += 1;
        }
    }
    acc.into_iter()
        .map(|(f, (s, lo, hi, n))| {
            (
                f,
                FieldStat {
                    avg: s / f64::from(n),
                    min: lo,
                    max: hi,
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::{GpuId, GpuSeries, Reading, Values};
    use super::*;

    fn gpu(i: u32) -> GpuId {
        GpuId {
            source: "http://n/metrics".into(),
            hostname: "n".into(),
            index: i,
            uuid: format!("GPU-{i}"),
            model: "H200".into(),
        }
    }

    /// A GPU at `p(t)` W sampled every `dt` s from `t0` to `t1`, its counter the exact integral.
    fn series(i: u32, t0: f64, t1: f64, dt: f64, p: impl Fn(f64) -> f64) -> GpuSeries {
        let mut readings = Vec::new();
        let (mut t, mut e, fine) = (t0, 1000.0, 1e-4);
        let mut x = t0;
        while t <= t1 + 1e-9 {
            while x < t {
                e += p(x + fine / 2.0) * fine;
                x += fine;
            }
            let mut values = Values::new();
            values.insert(Field::Power, p(t));
            values.insert(Field::Energy, e);
            values.insert(Field::GpuUtil, 50.0);
            readings.push(Reading {
                t_ns: (t * 1e9) as u64,
                values,
            });
            t += dt;
        }
        GpuSeries {
            id: gpu(i),
            readings,
        }
    }

    fn run(series: Vec<GpuSeries>) -> TelemetryRun {
        TelemetryRun {
            source: SourceKind::Dcgm,
            sources: vec!["http://n/metrics".into()],
            interval_s: 0.1,
            series,
            events: Vec::new(),
        }
    }

    fn inputs(a: f64, b: f64, gpus: Option<u32>) -> EnergyInputs {
        EnergyInputs {
            start_unix_s: a,
            end_unix_s: b,
            successful_requests: 10,
            input_tokens: 1000,
            output_tokens: 500,
            expected_gpus: gpus,
        }
    }

    #[test]
    fn constant_power_gives_power_times_duration_both_ways() {
        let r = run(vec![
            series(0, 100.0, 110.0, 0.25, |_| 200.0),
            series(1, 100.0, 110.0, 0.25, |_| 100.0),
        ]);
        let e = energy(&r, &inputs(101.1, 105.1, Some(2)));
        let c = e.counter_energy_j.unwrap();
        assert!((c - 1200.0).abs() < 0.01, "{c}");
        assert!((e.integrated_energy_j.unwrap() - 1200.0).abs() < 1e-6);
        assert_eq!(e.method, Some(EnergyMethod::Counter));
        assert!(e.integration.power_valid, "{:?}", e.integration.reasons);
        assert!((e.avg_power_w.unwrap() - 150.0).abs() < 0.01);
        assert!((e.joules_per_output_token.unwrap() - 2.4).abs() < 1e-4);
        assert!((e.output_tokens_per_s_per_kw.unwrap() - 125.0 / 0.3).abs() < 0.01);
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
    }

    #[test]
    fn a_reset_counter_still_gives_the_window_energy() {
        let mut s = series(0, 100.0, 110.0, 0.5, |_| 100.0);
        for r in s.readings.iter_mut().filter(|r| r.t_ns >= 104_000_000_000) {
            *r.values.get_mut(&Field::Energy).unwrap() -= 1400.0;
        }
        let e = energy(&run(vec![s]), &inputs(102.0, 106.0, None));
        let c = e.counter_energy_j.unwrap();
        // The half-second across the reset is counted from zero: at most one interval's energy lost.
        assert!((350.0 - 1e-6..=400.0 + 1e-6).contains(&c), "{c}");
    }

    #[test]
    fn an_edge_carried_past_the_next_read_is_not_a_reset() {
        // 300 W until 102.05, then 50 W: the read at 102.0 carries 300 W to the window's start
        // at 102.2 and overshoots the read at 102.5.
        let s = series(
            0,
            100.0,
            110.0,
            0.5,
            |t| if t < 102.05 { 300.0 } else { 50.0 },
        );
        let e = energy(&run(vec![s]), &inputs(102.2, 104.2, None));
        let c = e.counter_energy_j.unwrap();
        // 100 J in the window; at most the overshoot (22.5 J) short of it.
        assert!((77.0..=100.5).contains(&c), "{c}");
    }

    #[test]
    fn sparse_samples_are_flagged_as_inferencex_does_and_the_counters_still_count() {
        let r = run(vec![series(0, 100.0, 120.0, 4.0, |t| {
            if t < 110.0 {
                100.0
            } else {
                300.0
            }
        })]);
        let e = energy(&r, &inputs(101.0, 117.0, Some(2)));
        assert!(!e.integration.power_valid);
        assert_eq!(
            e.integration.reasons,
            ["sampling_gap_exceeded", "expected_gpu_count_mismatch"]
        );
        assert_eq!(e.method, Some(EnergyMethod::Counter));
        assert!(
            e.warnings.iter().any(|w| w.contains("--gpus says 2")),
            "{:?}",
            e.warnings
        );
    }

    #[test]
    fn a_step_between_sparse_samples_is_a_disagreement_warning() {
        let r = run(vec![series(0, 100.0, 110.0, 1.0, |t| {
            if t < 102.2 {
                100.0
            } else {
                600.0
            }
        })]);
        let e = energy(&r, &inputs(102.0, 104.0, None));
        assert!(e.counter_integrated_difference.unwrap() > 0.02);
        assert!(
            e.warnings.iter().any(|w| w.contains("apart")),
            "{:?}",
            e.warnings
        );
    }

    #[test]
    fn a_gpu_without_samples_around_an_edge_is_named() {
        let mut s = series(0, 100.0, 110.0, 0.5, |_| 100.0);
        s.readings.retain(|r| r.t_ns < 103_000_000_000);
        let e = energy(
            &run(vec![s, series(1, 100.0, 110.0, 0.5, |_| 100.0)]),
            &inputs(101.0, 109.0, None),
        );
        assert_eq!(e.total_energy_j, None);
        assert_eq!(e.gpus[0].issues, ["benchmark_window_not_bracketed"]);
        assert!(
            e.warnings.iter().any(|w| w.contains("n:0")),
            "{:?}",
            e.warnings
        );
    }
}
