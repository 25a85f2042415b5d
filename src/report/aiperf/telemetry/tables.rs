//! AIPerf's energy-efficiency metrics (its `EnergyEfficiencyAnalyzer`) and the GPU table it
//! appends to `profile_export_aiperf.csv`, from the same per-GPU reads as the section.

use super::*;
use std::fmt::Write as _;

/// AIPerf's energy-efficiency metrics (`power_efficiency_metrics.py`), in the order its
/// analyzer emits them: (NVIDIA tag, AMD tag, header, unit).
#[derive(Clone, Copy)]
enum Efficiency {
    TotalPower,
    AveragePower,
    TotalEnergy,
    OutputTokensPerJoule,
    EnergyPerOutputToken,
    EnergyPerTotalToken,
    EnergyPerRequest,
    EnergyPerUser,
    EnergyDelayProduct,
    PerformancePerWatt,
    OutputTpsPerWatt,
    GoodputPerWatt,
}

impl Efficiency {
    fn names(self) -> (&'static str, &'static str, &'static str, &'static str) {
        use Efficiency as E;
        match self {
            E::TotalPower => (
                "nvidia_total_gpu_power",
                "amd_total_gpu_power",
                "Total GPU Power",
                "W",
            ),
            E::AveragePower => (
                "nvidia_average_gpu_power",
                "amd_average_gpu_power",
                "Average GPU Power",
                "W",
            ),
            E::TotalEnergy => (
                "nvidia_total_gpu_energy",
                "amd_total_gpu_energy",
                "Total GPU Energy",
                "J",
            ),
            E::OutputTokensPerJoule => (
                "nvidia_output_tokens_per_joule",
                "amd_output_tokens_per_joule",
                "Output Tokens per Joule",
                "tokens/J",
            ),
            E::EnergyPerOutputToken => (
                "nvidia_energy_per_output_token",
                "amd_energy_per_output_token",
                "Energy per Output Token",
                "mJ/token",
            ),
            E::EnergyPerTotalToken => (
                "nvidia_energy_per_total_token",
                "amd_energy_per_total_token",
                "Energy per Total Token",
                "mJ/token",
            ),
            E::EnergyPerRequest => (
                "nvidia_energy_per_request",
                "amd_energy_per_request",
                "Energy per Request",
                "joules/request",
            ),
            E::EnergyPerUser => (
                "nvidia_energy_per_user",
                "amd_energy_per_user",
                "Energy per User",
                "joules/user",
            ),
            E::EnergyDelayProduct => (
                "nvidia_energy_delay_product",
                "amd_energy_delay_product",
                "Energy Delay Product",
                "J*s",
            ),
            E::PerformancePerWatt => (
                "nvidia_performance_per_watt",
                "amd_performance_per_watt",
                "Performance per Watt",
                "requests/sec/W",
            ),
            E::OutputTpsPerWatt => (
                "nvidia_output_tps_per_watt",
                "amd_output_tps_per_watt",
                "Output Tokens per Second per Watt",
                "tokens/sec/W",
            ),
            E::GoodputPerWatt => (
                "nvidia_goodput_per_watt",
                "amd_goodput_per_watt",
                "Goodput per Watt",
                "good-req/s/W",
            ),
        }
    }
}

/// One scalar metric: (tag, CSV header, unit, value).
pub(in crate::report::aiperf) type Scalar = (&'static str, &'static str, &'static str, f64);

/// The AIPerf metrics its `EnergyEfficiencyAnalyzer` reads (AIPerf's tags in the names), from
/// the summary's own figures; `None` where the run has none.
#[derive(Clone, Copy, Debug, Default)]
pub(in crate::report::aiperf) struct EfficiencyInputs {
    /// `total_osl`: output tokens.
    pub(in crate::report::aiperf) total_osl: Option<f64>,
    /// `total_isl`: input tokens.
    pub(in crate::report::aiperf) total_isl: Option<f64>,
    /// `request_count`.
    pub(in crate::report::aiperf) request_count: Option<f64>,
    /// `request_latency`'s mean, ms.
    pub(in crate::report::aiperf) request_latency_ms: Option<f64>,
    /// `request_throughput`, requests/s.
    pub(in crate::report::aiperf) request_throughput: Option<f64>,
    /// `output_token_throughput`, tokens/s.
    pub(in crate::report::aiperf) output_token_throughput: Option<f64>,
    /// `goodput`, requests/s.
    pub(in crate::report::aiperf) goodput: Option<f64>,
}

/// AIPerf's `EnergyEfficiencyAnalyzer` over the run: `metric(tag)` is the summary's value of one
/// of AIPerf's metrics (`total_osl`, `request_count`, `request_latency` in ms, ...). Empty without
/// telemetry, or without power and energy.
///
/// Total energy and average power are ours when `summary.json`'s `energy` has a total: the
/// counters' delta at the window's exact edges (else InferenceX's power integration), where
/// AIPerf sums each GPU's delta between the reads around the window with the grace; and the
/// window's mean power from it. Every ratio then follows AIPerf's formula from those, so they
/// equal `energy`'s `joules_per_*` (in mJ where AIPerf's unit is). Total power (the sum of each
/// GPU's mean power read) is AIPerf's, as `energy` has no such figure.
pub(in crate::report::aiperf) fn efficiency(s: &Summary, m: &EfficiencyInputs) -> Vec<Scalar> {
    let Some(run) = &s.telemetry else {
        return Vec::new();
    };
    let p = Platform::of(run.source);
    let gpus = gpus(run, p);
    let (lo, hi) = window(s);
    let mut duration_s = if hi > lo { (hi - lo) as f64 / 1e9 } else { 0.0 };
    if duration_s <= 0.0 {
        // AIPerf's fallback: the span of every read.
        let ts = gpus.iter().flat_map(|g| g.snapshots.iter().map(|s| s.t_ns));
        if let (Some(a), Some(b)) = (ts.clone().min(), ts.max()) {
            duration_s = b.saturating_sub(a) as f64 / 1e9;
        }
    }
    let powers: Vec<f64> = gpus
        .iter()
        .filter_map(|g| gauge(&g.snapshots, POWER, lo, hi).map(|st| st.avg))
        .collect();
    let total_power_w: f64 = powers.iter().sum();
    let energies: Vec<f64> = gpus
        .iter()
        .filter_map(|g| {
            counter_delta(&g.snapshots, ENERGY, lo, hi + FINAL_SCRAPE_GRACE_NS).map(|mj| mj * 1e6)
        })
        .collect();
    let aiperf_energy_j: f64 = energies.iter().sum();
    let per_duration = |j: f64| {
        if duration_s > 0.0 {
            j / duration_s
        } else {
            0.0
        }
    };
    let ours = s
        .energy
        .as_ref()
        .and_then(|e| Some((e.total_energy_j.filter(|&j| j > 0.0)?, e.avg_total_power_w)));
    let resolved = if let Some((j, avg)) = ours {
        Some((j, avg.unwrap_or_else(|| per_duration(j))))
    } else if !energies.is_empty() && aiperf_energy_j > 0.0 {
        Some((aiperf_energy_j, per_duration(aiperf_energy_j)))
    } else if !powers.is_empty() && total_power_w > 0.0 && duration_s > 0.0 {
        Some((total_power_w * duration_s, total_power_w))
    } else {
        None
    };
    let mut out: Vec<(Efficiency, f64)> = Vec::new();
    if !powers.is_empty() {
        out.push((Efficiency::TotalPower, total_power_w));
    }
    let Some((energy_j, avg_w)) = resolved.filter(|&(j, _)| j > 0.0) else {
        return named(p, out);
    };
    if avg_w > 0.0 {
        out.push((Efficiency::AveragePower, avg_w));
    }
    out.push((Efficiency::TotalEnergy, energy_j));
    // Python's truthiness: a missing or zero figure skips the metric.
    let nonzero = |v: Option<f64>| v.filter(|&v| v != 0.0);
    let osl = nonzero(m.total_osl);
    if let Some(osl) = osl {
        out.push((Efficiency::OutputTokensPerJoule, osl / energy_j));
        out.push((Efficiency::EnergyPerOutputToken, energy_j * 1000.0 / osl));
    }
    let total_tokens = m.total_isl.unwrap_or(0.0) + osl.unwrap_or(0.0);
    if total_tokens > 0.0 {
        out.push((
            Efficiency::EnergyPerTotalToken,
            energy_j * 1000.0 / total_tokens,
        ));
    }
    let per_request = nonzero(m.request_count).map(|n| energy_j / n);
    if let Some(j) = per_request {
        out.push((Efficiency::EnergyPerRequest, j));
    }
    if let Some(c) = s.meta.concurrency.filter(|&c| c > 0) {
        out.push((Efficiency::EnergyPerUser, energy_j / c as f64));
    }
    if let (Some(j), Some(ms)) = (per_request, nonzero(m.request_latency_ms)) {
        out.push((Efficiency::EnergyDelayProduct, j * (ms / 1000.0)));
    }
    if avg_w > 0.0 {
        for (e, v) in [
            (Efficiency::PerformancePerWatt, m.request_throughput),
            (Efficiency::OutputTpsPerWatt, m.output_token_throughput),
            (Efficiency::GoodputPerWatt, m.goodput),
        ] {
            if let Some(v) = v {
                out.push((e, v / avg_w));
            }
        }
    }
    named(p, out)
}

fn named(p: Platform, metrics: Vec<(Efficiency, f64)>) -> Vec<Scalar> {
    metrics
        .into_iter()
        .map(|(e, v)| {
            let (nvidia, amd, header, unit) = e.names();
            let tag = match p {
                Platform::Nvidia => nvidia,
                Platform::Amd => amd,
            };
            (tag, header, unit, v)
        })
        .collect()
}

/// The GPU table AIPerf's CSV exporter appends to `profile_export_aiperf.csv` when it has
/// telemetry (`_write_telemetry_section`): two blank lines, a header, one row per GPU and field
/// with AIPerf's statistics columns (two decimals, empty where unset), and a `Hostname` column
/// when any GPU has one (`None` for those without). Empty without telemetry.
pub(in crate::report::aiperf) fn csv(s: &Summary) -> String {
    let Some(run) = &s.telemetry else {
        return String::new();
    };
    let p = Platform::of(run.source);
    let gpus = gpus(run, p);
    let endpoints = endpoints(s, run, &gpus);
    let with_host = endpoints
        .iter()
        .any(|e| e.gpus.iter().any(|(_, g)| g.hostname.is_some()));
    let mut o = String::from("\n\nEndpoint,GPU_Index,GPU_Name,GPU_UUID,Platform,Metric,");
    o.push_str("avg,min,max,sum,p1,p5,p10,p25,p50,p75,p90,p95,p99,std");
    o.push_str(if with_host { ",Hostname\n" } else { "\n" });
    let num = |v: f64| format!("{v:.2}");
    for e in &endpoints {
        for (_, g) in &e.gpus {
            for (f, v) in &g.metrics {
                let _ = write!(
                    o,
                    "{},{},{},{},{},{}",
                    crate::csv::field(&e.display),
                    g.gpu.id.index,
                    crate::csv::field(&g.gpu.model),
                    crate::csv::field(&g.gpu.uuid),
                    p.as_str(),
                    crate::csv::field(&format!("{} ({})", f.display, f.unit)),
                );
                // avg, min, max, sum, p1..p99, std
                let cells: Vec<String> = match v {
                    Value::Counter(d) => std::iter::once(num(*d))
                        .chain(std::iter::repeat_n(String::new(), 13))
                        .collect(),
                    Value::Gauge(st) => [st.avg, st.min, st.max, st.sum]
                        .into_iter()
                        .chain(st.pcts)
                        .chain([st.std])
                        .map(num)
                        .collect(),
                };
                for c in cells {
                    o.push(',');
                    o.push_str(&c);
                }
                if with_host {
                    o.push(',');
                    o.push_str(&crate::csv::field(g.hostname.unwrap_or("None")));
                }
                o.push('\n');
            }
        }
    }
    o
}
