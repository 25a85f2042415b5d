//! AIPerf 0.13's GPU telemetry artifacts, from the reads the telemetry task kept
//! ([`TelemetryRun`]): `gpu_telemetry_export.jsonl` (one line per GPU per read: AIPerf's
//! `TelemetryRecord` as its JSONL writer dumps it), the `telemetry_data` section of
//! `profile_export_aiperf.json` (AIPerf's `TelemetryExportData`: per endpoint and GPU, each
//! field's statistics over the profiling window, counters as deltas), the GPU table AIPerf
//! appends to `profile_export_aiperf.csv`, and the energy-efficiency metrics AIPerf's
//! `EnergyEfficiencyAnalyzer` adds to the summary.
//!
//! Our fields are in canonical units (W, J, MiB, %, µs); AIPerf's in its own (W, MJ, GB, %, µs)
//! under vendor names: `nvidia_*` for DCGM, NVML and nvidia-smi, `amd_*` for amd-smi. Fields
//! AIPerf does not collect without a custom metrics file (clocks, free memory, memory
//! temperature) are left out, as AIPerf leaves them out. `nvidia_power_violation` is written in
//! µs as AIPerf's field says; AIPerf's DCGM collector divides the exporter's value by 1000
//! (it takes it for ns), so AIPerf's own DCGM figure is 1000 times smaller than the field's
//! unit and ours.
//!
//! Window rules are AIPerf's (`records_manager._process_telemetry_results`,
//! `GpuMetricTimeSeries.to_metric_result_filtered`): a GPU's statistics are over its reads in
//! [first send, last response + `FINAL_SCRAPE_GRACE_NS`], both ends included, a field missing
//! from a read counting in `count` but in no other figure (AIPerf's NaN); a counter is the last
//! value in that window minus the last one before it (the first in it when none came before),
//! clamped at 0. Where AIPerf writes an energy figure that `summary.json`'s `energy` also
//! measures, the figure is ours ([`gpu_metrics`], [`efficiency`] say which).

mod tables;

use super::super::json::{self, Obj, J};
use super::PCTS;
use crate::metrics::{percentile_sorted, Summary};
use crate::telemetry::{EventKind, Field, GpuEnergy, GpuId, SourceKind, TelemetryRun};
pub(super) use tables::{csv, efficiency, EfficiencyInputs, Scalar};

/// The JSONL file's name (AIPerf's `profile_export_gpu_telemetry_jsonl_file`).
pub(crate) const JSONL: &str = "gpu_telemetry_export.jsonl";

/// AIPerf's `Environment.GPU.FINAL_SCRAPE_GRACE_NS`: the window's end is widened by this so the
/// read that closes it (on AIPerf's 333 ms cadence, often just after the last response) counts.
const FINAL_SCRAPE_GRACE_NS: u64 = 666_000_000;

/// [`PCTS`] as numbers.
const PCT_VALUES: [f64; 9] = [1.0, 5.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0];

/// AIPerf's DCGM factor from MiB to GB (`1.048576e-3`, decimal GB).
const MIB_TO_GB: f64 = 1.048_576e-3;

/// J to AIPerf's MJ.
const J_TO_MJ: f64 = 1e-6;

/// The GPU vendor, as AIPerf's `platform` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Platform {
    Nvidia,
    Amd,
}

impl Platform {
    fn of(kind: SourceKind) -> Platform {
        match kind {
            SourceKind::AmdSmi => Platform::Amd,
            SourceKind::Dcgm | SourceKind::Nvml | SourceKind::NvidiaSmi => Platform::Nvidia,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Platform::Nvidia => "nvidia",
            Platform::Amd => "amd",
        }
    }

    /// AIPerf's fields for this vendor, in `TelemetryMetrics`' order (which is also
    /// `GPU_TELEMETRY_METRICS_CONFIG`'s, the order of the section and of the CSV rows).
    fn fields(self) -> &'static [AiperfField] {
        match self {
            Platform::Nvidia => &NVIDIA_FIELDS,
            Platform::Amd => &AMD_FIELDS,
        }
    }

    /// Where our field goes in [`Platform::fields`] (the row that names it as its source), and
    /// the factor to AIPerf's unit.
    fn slot(self, f: Field) -> Option<(usize, f64)> {
        self.fields()
            .iter()
            .enumerate()
            .find_map(|(i, a)| a.from.filter(|&(ours, _)| ours == f).map(|(_, k)| (i, k)))
    }

    /// AIPerf's `device` label: its NVML and amdsmi collectors name the device by index; the DCGM
    /// exporter's own label is not kept, so a DCGM GPU has none.
    fn device(self, kind: SourceKind, index: u32) -> Option<String> {
        match (kind, self) {
            (SourceKind::Dcgm, _) => None,
            (_, Platform::Nvidia) => Some(format!("nvidia{index}")),
            (_, Platform::Amd) => Some(format!("amd{index}")),
        }
    }
}

/// AIPerf's host name for a GPU: DCGM's `Hostname` label, `localhost` for its local collectors.
fn hostname(kind: SourceKind, id: &GpuId) -> Option<&str> {
    match kind {
        SourceKind::Dcgm => (!id.hostname.is_empty()).then_some(id.hostname.as_str()),
        SourceKind::Nvml | SourceKind::NvidiaSmi | SourceKind::AmdSmi => Some("localhost"),
    }
}

/// One of AIPerf's telemetry fields: its name, display name, unit, whether it is a counter
/// (`GPU_TELEMETRY_COUNTER_METRICS`: written as a delta over the window), and which of our
/// fields feeds it with the factor to its unit (`None`: AIPerf's field, none of ours).
#[derive(Debug)]
struct AiperfField {
    name: &'static str,
    display: &'static str,
    unit: &'static str,
    counter: bool,
    from: Option<(Field, f64)>,
}

/// A gauge of AIPerf's fed by our `from` (times the factor).
const fn field(
    name: &'static str,
    display: &'static str,
    unit: &'static str,
    from: Option<(Field, f64)>,
) -> AiperfField {
    AiperfField {
        name,
        display,
        unit,
        counter: false,
        from,
    }
}

/// A counter of AIPerf's fed by our `from` (times the factor).
const fn counter(
    name: &'static str,
    display: &'static str,
    unit: &'static str,
    from: Option<(Field, f64)>,
) -> AiperfField {
    AiperfField {
        name,
        display,
        unit,
        counter: true,
        from,
    }
}

/// Power and energy sit first for both vendors (a test holds the tables to it).
const POWER: usize = 0;
const ENERGY: usize = 1;

const NVIDIA_FIELDS: [AiperfField; 12] = [
    field(
        "nvidia_power_usage",
        "NVIDIA GPU Power Usage",
        "W",
        Some((Field::Power, 1.0)),
    ),
    counter(
        "nvidia_energy_consumption",
        "NVIDIA Energy Consumption",
        "MJ",
        Some((Field::Energy, J_TO_MJ)),
    ),
    field(
        "nvidia_gpu_utilization",
        "NVIDIA GPU Utilization",
        "%",
        Some((Field::GpuUtil, 1.0)),
    ),
    field(
        "nvidia_memory_utilization",
        "NVIDIA Memory Utilization",
        "%",
        Some((Field::MemUtil, 1.0)),
    ),
    field(
        "nvidia_memory_used",
        "NVIDIA GPU Memory Used",
        "GB",
        Some((Field::MemUsed, MIB_TO_GB)),
    ),
    field(
        "nvidia_temperature",
        "NVIDIA GPU Temperature",
        "°C",
        Some((Field::Temperature, 1.0)),
    ),
    field(
        "nvidia_sm_utilization",
        "NVIDIA SM Utilization",
        "%",
        Some((Field::SmActive, 1.0)),
    ),
    field(
        "nvidia_decoder_utilization",
        "NVIDIA Decoder Utilization",
        "%",
        Some((Field::DecoderUtil, 1.0)),
    ),
    field(
        "nvidia_encoder_utilization",
        "NVIDIA Encoder Utilization",
        "%",
        Some((Field::EncoderUtil, 1.0)),
    ),
    field(
        "nvidia_jpg_utilization",
        "NVIDIA JPEG Utilization",
        "%",
        None,
    ),
    // XID is the last error's code, but AIPerf counts it among the counters.
    counter(
        "nvidia_xid_errors",
        "NVIDIA XID Errors",
        "count",
        Some((Field::XidErrors, 1.0)),
    ),
    counter(
        "nvidia_power_violation",
        "NVIDIA Power Violation",
        "us",
        Some((Field::PowerViolation, 1.0)),
    ),
];

const AMD_FIELDS: [AiperfField; 9] = [
    field("amd_power", "AMD GPU Power", "W", Some((Field::Power, 1.0))),
    counter(
        "amd_energy_consumption",
        "AMD Energy Consumption",
        "MJ",
        Some((Field::Energy, J_TO_MJ)),
    ),
    // amd-smi's graphics and memory-controller activity.
    field(
        "amd_gfx_activity",
        "AMD GFX Activity",
        "%",
        Some((Field::GpuUtil, 1.0)),
    ),
    field(
        "amd_umc_activity",
        "AMD UMC Activity",
        "%",
        Some((Field::MemUtil, 1.0)),
    ),
    field("amd_mm_activity", "AMD MM Activity", "%", None),
    field(
        "amd_memory_used",
        "AMD GPU Memory Used",
        "GB",
        Some((Field::MemUsed, MIB_TO_GB)),
    ),
    field(
        "amd_temperature",
        "AMD GPU Temperature",
        "°C",
        Some((Field::Temperature, 1.0)),
    ),
    counter(
        "amd_ecc_uncorrectable",
        "AMD ECC Uncorrectable",
        "count",
        None,
    ),
    field("amd_throttle_status", "AMD Throttle Status", "count", None),
];

/// One read of one GPU in AIPerf's terms: its vendor's fields in AIPerf's units, `None` where
/// the read lacked one.
struct Snapshot {
    t_ns: u64,
    values: Vec<Option<f64>>,
}

/// One GPU as AIPerf keeps it: the reads that gave at least one of its fields (AIPerf writes and
/// keeps no record for a read that gave none).
struct Gpu<'a> {
    id: &'a GpuId,
    /// Its UUID, or AIPerf's NVML stand-in when the source gave none.
    uuid: String,
    /// Its model, or AIPerf's NVML stand-in.
    model: String,
    snapshots: Vec<Snapshot>,
}

/// Every GPU of the run, in the order first seen.
fn gpus(run: &TelemetryRun, p: Platform) -> Vec<Gpu<'_>> {
    run.series
        .iter()
        .map(|series| {
            let snapshots = series
                .readings
                .iter()
                .filter_map(|r| {
                    let mut values = vec![None; p.fields().len()];
                    for (&f, &v) in &r.values {
                        // AIPerf's DCGM collector drops non-finite samples.
                        if let Some((slot, k)) = p.slot(f).filter(|_| v.is_finite()) {
                            values[slot] = Some(v * k);
                        }
                    }
                    values.iter().any(Option::is_some).then_some(Snapshot {
                        t_ns: r.t_ns,
                        values,
                    })
                })
                .collect();
            let id = &series.id;
            Gpu {
                id,
                uuid: if id.uuid.is_empty() {
                    format!("GPU-unknown-{}", id.index)
                } else {
                    id.uuid.clone()
                },
                model: if id.model.is_empty() {
                    "Unknown GPU".into()
                } else {
                    id.model.clone()
                },
                snapshots,
            }
        })
        .collect()
}

/// (GPU, snapshot) in the order AIPerf's writer receives them: by time, then by source (as
/// configured), then by GPU index (the order its collectors list a read's GPUs).
fn arrival(run: &TelemetryRun, gpus: &[Gpu]) -> Vec<(usize, usize)> {
    let source_pos = |s: &str| {
        run.sources
            .iter()
            .position(|x| x == s)
            .unwrap_or(usize::MAX)
    };
    let mut order: Vec<(usize, usize)> = gpus
        .iter()
        .enumerate()
        .flat_map(|(g, gpu)| (0..gpu.snapshots.len()).map(move |i| (g, i)))
        .collect();
    order.sort_by_key(|&(g, i)| {
        let gpu = &gpus[g];
        (
            gpu.snapshots[i].t_ns,
            source_pos(&gpu.id.source),
            gpu.id.index,
            g,
        )
    });
    order
}

/// `gpu_telemetry_export.jsonl`: one line per GPU per read, as AIPerf's
/// `GPUTelemetryJSONLWriter` writes a `TelemetryRecord` (`orjson.dumps(record.model_dump(
/// exclude_none=True, mode="json"))`: the model's field order, unknown fields left out).
pub(crate) fn jsonl(run: &TelemetryRun) -> Vec<u8> {
    let p = Platform::of(run.source);
    let gpus = gpus(run, p);
    let mut out = Vec::new();
    for (g, i) in arrival(run, &gpus) {
        let gpu = &gpus[g];
        let snap = &gpu.snapshots[i];
        let mut o = Obj::new();
        o.put("gpu_index", gpu.id.index)
            .put("gpu_uuid", gpu.uuid.as_str())
            .put("gpu_model_name", gpu.model.as_str());
        if let Some(d) = p.device(run.source, gpu.id.index) {
            o.put("device", d);
        }
        if let Some(h) = hostname(run.source, gpu.id) {
            o.put("hostname", h);
        }
        let mut data = Obj::new();
        for (f, v) in p.fields().iter().zip(&snap.values) {
            if let Some(v) = *v {
                data.put(f.name, v);
            }
        }
        o.put("platform", p.as_str())
            .put("timestamp_ns", snap.t_ns)
            .put("telemetry_source_url", gpu.id.source.as_str())
            .put("telemetry_data", data);
        out.extend(json::orjson_compact(&o));
        out.push(b'\n');
    }
    out
}

/// Unix seconds to ns (f64 keeps 256 ns steps at today's dates).
fn ns(unix_s: f64) -> u64 {
    (unix_s.max(0.0) * 1e9).round() as u64
}

/// The profiling window, Unix ns: first send, last response.
fn window(s: &Summary) -> (u64, u64) {
    (ns(s.benchmark_start_unix_s), ns(s.benchmark_end_unix_s))
}

/// A gauge's statistics as AIPerf computes them (numpy, NaN-aware).
#[derive(Debug)]
struct Gauge {
    avg: f64,
    min: f64,
    max: f64,
    sum: f64,
    /// Sample standard deviation (ddof 1), 0 under two values.
    std: f64,
    /// Reads of the GPU in the window, those lacking the field included (AIPerf's `len`).
    count: usize,
    pcts: [f64; 9],
}

/// One field of one GPU over the window.
#[derive(Debug)]
enum Value {
    Gauge(Gauge),
    /// A counter's delta.
    Counter(f64),
}

/// The snapshots in [lo, hi], both ends included (AIPerf's `searchsorted` left and right), and
/// how many came before lo.
fn in_window(snaps: &[Snapshot], lo: u64, hi: u64) -> (usize, &[Snapshot]) {
    let first = snaps.partition_point(|s| s.t_ns < lo);
    let last = snaps.partition_point(|s| s.t_ns <= hi).max(first);
    (first, &snaps[first..last])
}

/// `to_metric_result_filtered` for a gauge: `None` when no read in the window had the field.
fn gauge(snaps: &[Snapshot], slot: usize, lo: u64, hi: u64) -> Option<Gauge> {
    let (_, win) = in_window(snaps, lo, hi);
    let mut v: Vec<f64> = win.iter().filter_map(|s| s.values[slot]).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    let sum: f64 = v.iter().sum();
    let avg = sum / n;
    let std = if v.len() > 1 {
        (v.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    Some(Gauge {
        avg,
        min: v[0],
        max: v[v.len() - 1],
        sum,
        std,
        count: win.len(),
        pcts: PCT_VALUES.map(|p| percentile_sorted(&v, p)),
    })
}

/// `to_metric_result_filtered` for a counter: the last value in the window minus the last one
/// before it (the first in it when none came before), clamped at 0 (a reset); `None` when no read
/// in the window had the field.
fn counter_delta(snaps: &[Snapshot], slot: usize, lo: u64, hi: u64) -> Option<f64> {
    let (before, win) = in_window(snaps, lo, hi);
    let last = win.iter().rev().find_map(|s| s.values[slot])?;
    let reference = snaps[..before]
        .iter()
        .rev()
        .find_map(|s| s.values[slot])
        .or_else(|| win.iter().find_map(|s| s.values[slot]))?;
    Some((last - reference).max(0.0))
}

/// One GPU's fields over the window, in AIPerf's order, those it has nothing for left out.
/// The energy delta is ours when `summary.json`'s `energy` has this GPU's counter delta: the same
/// counter over the same window, but read at the window's exact edges where AIPerf takes the
/// reads around them.
fn gpu_metrics(
    gpu: &Gpu,
    p: Platform,
    (lo, hi): (u64, u64),
    ours: Option<&GpuEnergy>,
) -> Vec<(&'static AiperfField, Value)> {
    let ours_j = ours.and_then(|e| e.counter_energy_j);
    p.fields()
        .iter()
        .enumerate()
        .filter_map(|(slot, f)| {
            let v = if f.counter {
                let delta = counter_delta(&gpu.snapshots, slot, lo, hi)?;
                match ours_j {
                    Some(j) if slot == ENERGY => Value::Counter(j * J_TO_MJ),
                    _ => Value::Counter(delta),
                }
            } else {
                Value::Gauge(gauge(&gpu.snapshots, slot, lo, hi)?)
            };
            Some((f, v))
        })
        .collect()
}

/// One GPU of the section (AIPerf's `GpuSummary`).
struct GpuSummary<'a> {
    gpu: &'a Gpu<'a>,
    hostname: Option<&'a str>,
    metrics: Vec<(&'static AiperfField, Value)>,
}

/// One endpoint of the section: its display name and its GPUs by AIPerf's key (`gpu_<index>`).
struct Endpoint<'a> {
    display: String,
    gpus: Vec<(String, GpuSummary<'a>)>,
}

/// Inserts `(key, value)`, or replaces the value of an existing key where it stands (a Python
/// dict's assignment: AIPerf keys GPUs by index and endpoints by display name, so two can
/// collide and the later one wins).
fn dict_set<V>(d: &mut Vec<(String, V)>, key: String, value: V) {
    match d.iter_mut().find(|(k, _)| *k == key) {
        Some(slot) => slot.1 = value,
        None => d.push((key, value)),
    }
}

/// AIPerf's `normalize_endpoint_display`: the URL without its scheme, query and a trailing
/// `/metrics` (`http://node:9400/metrics` is `node:9400`, `nvml://localhost` is `localhost`).
fn endpoint_display(url: &str) -> String {
    let Some((_, rest)) = url.split_once("://") else {
        return url.strip_suffix("/metrics").unwrap_or(url).to_owned();
    };
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let (netloc, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let path = path.split(';').next().unwrap_or_default();
    format!("{netloc}{}", path.strip_suffix("/metrics").unwrap_or(path))
}

/// The section's endpoints: AIPerf's hierarchy (source, then GPU by UUID, in the order its
/// records arrived), each GPU's fields over the window with the grace.
fn endpoints<'a>(s: &'a Summary, run: &'a TelemetryRun, gpus: &'a [Gpu<'a>]) -> Vec<Endpoint<'a>> {
    let p = Platform::of(run.source);
    let (lo, hi) = window(s);
    let hi = hi + FINAL_SCRAPE_GRACE_NS;
    // (source, GPU UUIDs) in arrival order.
    let mut hierarchy: Vec<(&str, Vec<usize>)> = Vec::new();
    for (g, _) in arrival(run, gpus) {
        let gpu = &gpus[g];
        let source = gpu.id.source.as_str();
        let at = match hierarchy.iter().position(|(src, _)| *src == source) {
            Some(at) => at,
            None => {
                hierarchy.push((source, Vec::new()));
                hierarchy.len() - 1
            }
        };
        let known = &mut hierarchy[at].1;
        if !known.iter().any(|&k| gpus[k].uuid == gpu.uuid) {
            known.push(g);
        }
    }
    let ours = |id: &GpuId| {
        s.energy
            .as_ref()
            .and_then(|e| e.gpus.iter().find(|g| g.id == *id))
    };
    let mut out: Vec<(String, Endpoint)> = Vec::new();
    for (source, members) in hierarchy {
        let mut by_key = Vec::new();
        for g in members {
            let gpu = &gpus[g];
            let summary = GpuSummary {
                gpu,
                hostname: hostname(run.source, gpu.id),
                metrics: gpu_metrics(gpu, p, (lo, hi), ours(gpu.id)),
            };
            dict_set(&mut by_key, format!("gpu_{}", gpu.id.index), summary);
        }
        let display = endpoint_display(source);
        let endpoint = Endpoint {
            display: display.clone(),
            gpus: by_key,
        };
        dict_set(&mut out, display, endpoint);
    }
    out.into_iter().map(|(_, e)| e).collect()
}

/// A field's statistics as AIPerf's `JsonMetricResult` (`to_json_result`, unset and `None`
/// fields left out: a counter has its unit and `avg` only).
fn metric_obj(f: &AiperfField, v: &Value) -> Obj {
    let mut o = Obj::new().with("unit", f.unit);
    match v {
        Value::Counter(d) => {
            o.put("avg", *d);
        }
        Value::Gauge(g) => {
            o.put("avg", g.avg);
            for (k, v) in PCTS.iter().zip(g.pcts) {
                o.put(*k, v);
            }
            o.put("min", g.min)
                .put("max", g.max)
                .put("std", g.std)
                .put("count", g.count as u64)
                .put("sum", g.sum);
        }
    }
    o
}

/// `telemetry_data` of `profile_export_aiperf.json`: AIPerf's `TelemetryExportData` as its JSON
/// exporter dumps it (`exclude_unset`, `exclude_none`).
pub(super) fn section(s: &Summary) -> Obj {
    let Some(run) = &s.telemetry else {
        return empty_section(s);
    };
    let p = Platform::of(run.source);
    let gpus = gpus(run, p);
    let answered: Vec<J> = run
        .sources
        .iter()
        .filter(|src| {
            run.series
                .iter()
                .any(|g| g.id.source == **src && !g.readings.is_empty())
        })
        .map(|src| J::from(src.as_str()))
        .collect();
    let mut by_endpoint = Obj::new();
    for e in endpoints(s, run, &gpus) {
        let mut by_key = Obj::new();
        for (key, g) in e.gpus {
            let mut metrics = Obj::new();
            for (f, v) in &g.metrics {
                metrics.put(f.name, metric_obj(f, v));
            }
            let mut o = Obj::new()
                .with("gpu_index", g.gpu.id.index)
                .with("gpu_name", g.gpu.model.as_str())
                .with("gpu_uuid", g.gpu.uuid.as_str())
                .with("platform", p.as_str());
            if let Some(h) = g.hostname {
                o.put("hostname", h);
            }
            o.put("metrics", metrics);
            by_key.put(key, o);
        }
        by_endpoint.put(e.display, Obj::new().with("gpus", by_key));
    }
    Obj::new()
        .with(
            "summary",
            Obj::new()
                // AIPerf's system controller writes the endpoints it was given and those that
                // answered its reachability check; ours are the sources read and those that gave
                // a read.
                .with(
                    "endpoints_configured",
                    run.sources
                        .iter()
                        .map(|x| J::from(x.as_str()))
                        .collect::<Vec<J>>(),
                )
                .with("endpoints_successful", answered)
                .with(
                    "start_time",
                    crate::timefmt::iso8601(s.benchmark_start_unix_s),
                )
                // The end of the window the statistics are over: the last response and the grace.
                .with(
                    "end_time",
                    crate::timefmt::iso8601(
                        s.benchmark_end_unix_s + FINAL_SCRAPE_GRACE_NS as f64 / 1e9,
                    ),
                ),
        )
        .with("endpoints", by_endpoint)
        .with("error_summary", error_summary(run))
}

/// `telemetry_data` as AIPerf writes it when no GPU telemetry endpoint answered: the object with
/// no endpoints (`null` makes `aiperf plot` warn that the data has an unexpected structure).
/// Its end is the run's (nothing was read, so no read's grace).
fn empty_section(s: &Summary) -> Obj {
    let empty = || J::A(Vec::new());
    Obj::new()
        .with(
            "summary",
            Obj::new()
                .with("endpoints_configured", empty())
                .with("endpoints_successful", empty())
                .with(
                    "start_time",
                    crate::timefmt::iso8601(s.benchmark_start_unix_s),
                )
                .with("end_time", crate::timefmt::iso8601(s.benchmark_end_unix_s)),
        )
        .with("endpoints", Obj::new())
        .with("error_summary", empty())
}

/// The failed reads, one entry per message with its count (AIPerf counts its collectors' errors
/// by type and message; ours carry the message, the type is our error's).
fn error_summary(run: &TelemetryRun) -> Vec<J> {
    let mut counts: Vec<(&str, u64)> = Vec::new();
    for e in &run.events {
        if let EventKind::SourceFailed { error } = &e.kind {
            match counts.iter_mut().find(|(m, _)| *m == error) {
                Some((_, n)) => *n += 1,
                None => counts.push((error, 1)),
            }
        }
    }
    counts
        .into_iter()
        .map(|(message, n)| {
            J::O(
                Obj::new()
                    .with(
                        "error_details",
                        Obj::new()
                            .with("type", "TelemetryError")
                            .with("message", message),
                    )
                    .with("count", n),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::process::Command;

    use serde_json::Value as V;

    use super::*;
    use crate::report::tests::{export_line, records, summary, EPOCH_NS};
    use crate::telemetry::{
        Energy, Event, GpuSeries, IntegrationCheck, Reading, SourceKind, Values,
    };

    const DCGM: &str = "http://gpu-node:9400/metrics";

    /// Read times, ms from the run's start (the fixture's window is 30.05 ms to 700 ms, 1366 ms
    /// with the grace): one before the window, two in it, one in the grace, one after.
    const READS_MS: [i64; 5] = [-170, 130, 380, 880, 1500];

    fn t(ms: i64) -> u64 {
        (EPOCH_NS as i64 + ms * 1_000_000) as u64
    }

    fn gpu(index: u32) -> GpuId {
        GpuId {
            source: DCGM.into(),
            hostname: "gpu-node".into(),
            index,
            uuid: format!("GPU-0a1b2c3d-000{index}"),
            model: "NVIDIA H200".into(),
        }
    }

    fn values(pairs: &[(Field, f64)]) -> Values {
        pairs.iter().copied().collect()
    }

    /// Two GPUs read five times: GPU 0 every time, its SM activity appearing at the third read;
    /// GPU 1 three times, then once with only a field AIPerf has no name for (its SM clock),
    /// then gone. Two failed reads late in the run.
    fn run() -> TelemetryRun {
        use Field as F;
        let power0 = [280.0, 300.0, 350.0, 400.0, 150.0];
        let util0 = [0.0, 90.0, 95.0, 97.0, 0.0];
        let temp0 = [40.0, 45.0, 50.0, 55.0, 45.0];
        let sm0 = [None, None, Some(40.0), Some(60.0), Some(10.0)];
        let gpu0 = (0..5)
            .map(|i| {
                let mut v = values(&[
                    (F::Power, power0[i]),
                    (F::Energy, 1000.0 + 100.0 * i as f64),
                    (F::GpuUtil, util0[i]),
                    (F::MemUsed, 81559.0),
                    (F::Temperature, temp0[i]),
                    (F::SmClock, 1980.0),
                ]);
                if let Some(sm) = sm0[i] {
                    v.insert(F::SmActive, sm);
                }
                Reading {
                    t_ns: t(READS_MS[i]),
                    values: v,
                }
            })
            .collect();
        let power1 = [90.0, 100.0, 120.0];
        let mut gpu1: Vec<Reading> = (0..3)
            .map(|i| Reading {
                t_ns: t(READS_MS[i]),
                values: values(&[
                    (F::Power, power1[i]),
                    (F::Energy, 500.0 + 50.0 * i as f64),
                    (F::GpuUtil, 10.0 * i as f64),
                    (F::MemUsed, 1024.0),
                ]),
            })
            .collect();
        gpu1.push(Reading {
            t_ns: t(READS_MS[3]),
            values: values(&[(F::SmClock, 1410.0)]),
        });
        let event = |ms: i64, gpu: Option<GpuId>, kind: EventKind| Event {
            t_ns: t(ms),
            source: DCGM.into(),
            gpu,
            kind,
        };
        let failed = || EventKind::SourceFailed {
            error: "HTTP 503".into(),
        };
        TelemetryRun {
            source: SourceKind::Dcgm,
            sources: vec![DCGM.into()],
            interval_s: 0.25,
            series: vec![
                GpuSeries {
                    id: gpu(0),
                    readings: gpu0,
                },
                GpuSeries {
                    id: gpu(1),
                    readings: gpu1,
                },
            ],
            events: vec![
                event(
                    380,
                    Some(gpu(0)),
                    EventKind::FieldAppeared { field: F::SmActive },
                ),
                event(1200, None, failed()),
                event(1300, None, failed()),
                event(1500, Some(gpu(1)), EventKind::GpuVanished),
            ],
        }
    }

    fn with_run(run: TelemetryRun) -> Summary {
        let mut s = summary();
        s.telemetry = Some(run);
        s
    }

    /// `summary.json`'s energy as the telemetry side would give it: the counters' deltas per GPU
    /// and in all, the window's mean power from them.
    fn energy(s: &Summary, per_gpu_j: [f64; 2]) -> Energy {
        let total: f64 = per_gpu_j.iter().sum();
        let duration = s.benchmark_end_unix_s - s.benchmark_start_unix_s;
        Energy {
            source: SourceKind::Dcgm,
            sources: vec![DCGM.into()],
            start_unix_s: s.benchmark_start_unix_s,
            end_unix_s: s.benchmark_end_unix_s,
            expected_gpus: None,
            observed_gpus: 2,
            method: Some(crate::telemetry::energy::EnergyMethod::Counter),
            total_energy_j: Some(total),
            avg_power_w: Some(total / duration / 2.0),
            avg_total_power_w: Some(total / duration),
            joules_per_request: None,
            joules_per_input_token: None,
            joules_per_output_token: None,
            joules_per_total_token: None,
            output_tokens_per_s_per_kw: None,
            counter_energy_j: Some(total),
            integrated_energy_j: None,
            counter_integrated_difference: None,
            integration: IntegrationCheck {
                power_valid: true,
                reasons: Vec::new(),
                method: "trapezoid".into(),
                max_sample_gap_s: crate::telemetry::energy::MAX_SAMPLE_GAP_S,
            },
            gpus: [0, 1]
                .into_iter()
                .zip(per_gpu_j)
                .map(|(i, j)| GpuEnergy {
                    id: gpu(i),
                    counter_energy_j: Some(j),
                    integrated_energy_j: None,
                    avg_power_w: Some(j / duration),
                    power_samples: 3,
                    max_sample_gap_s: Some(0.5),
                    fields: Default::default(),
                    issues: Vec::new(),
                })
                .collect(),
            events: Vec::new(),
            warnings: Vec::new(),
        }
    }

    fn section_json(s: &Summary) -> V {
        serde_json::to_value(section(s)).unwrap()
    }

    fn close(v: &V, want: f64) -> bool {
        v.as_f64()
            .is_some_and(|x| (x - want).abs() <= 1e-9 * want.abs().max(1e-12))
    }

    #[test]
    fn jsonl_writes_one_aiperf_record_per_gpu_per_read_in_arrival_order() {
        let text = String::from_utf8(jsonl(&run())).unwrap();
        let lines: Vec<V> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        // GPU 1's read with only its SM clock gives no line (AIPerf keeps no empty record), and
        // it is gone from the last read.
        let order: Vec<(u64, u64)> = lines
            .iter()
            .map(|l| {
                (
                    l["timestamp_ns"].as_u64().unwrap(),
                    l["gpu_index"].as_u64().unwrap(),
                )
            })
            .collect();
        let want: Vec<(u64, u64)> = [
            (0, 0),
            (0, 1),
            (1, 0),
            (1, 1),
            (2, 0),
            (2, 1),
            (3, 0),
            (4, 0),
        ]
        .into_iter()
        .map(|(r, g)| (t(READS_MS[r]), g))
        .collect();
        assert_eq!(order, want);
        // Byte for byte what AIPerf 0.13 writes for this read (its TelemetryRecord, dumped by its
        // JSONL writer): no pci_bus_id or device (DCGM's labels are not kept), MJ and GB.
        assert_eq!(
            text.lines().next().unwrap(),
            r#"{"gpu_index":0,"gpu_uuid":"GPU-0a1b2c3d-0000","gpu_model_name":"NVIDIA H200","hostname":"gpu-node","platform":"nvidia","timestamp_ns":1795999999830000000,"telemetry_source_url":"http://gpu-node:9400/metrics","telemetry_data":{"nvidia_power_usage":280.0,"nvidia_energy_consumption":0.001,"nvidia_gpu_utilization":0.0,"nvidia_memory_used":85.52080998400001,"nvidia_temperature":40.0}}"#
        );
        // The SM activity appears with the read that first had it, in AIPerf's %, after the
        // temperature (the model's field order); the SM clock never (AIPerf has no such field).
        let keys = |l: &V| -> Vec<String> {
            l["telemetry_data"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect()
        };
        assert!(!keys(&lines[2]).contains(&"nvidia_sm_utilization".to_owned()));
        assert_eq!(
            keys(&lines[4]).last().map(String::as_str),
            Some("nvidia_sm_utilization")
        );
        assert_eq!(lines[4]["telemetry_data"]["nvidia_sm_utilization"], 40.0);
        assert!(!text.contains("clock"));
    }

    #[test]
    fn section_has_aiperfs_statistics_over_the_window_and_its_grace() {
        let s = with_run(run());
        let v = section_json(&s);
        let sum = &v["summary"];
        assert_eq!(sum["endpoints_configured"], serde_json::json!([DCGM]));
        assert_eq!(sum["endpoints_successful"], serde_json::json!([DCGM]));
        assert_eq!(
            sum["end_time"],
            crate::timefmt::iso8601(s.benchmark_end_unix_s + 0.666)
        );
        let gpus = v["endpoints"]["gpu-node:9400"]["gpus"].as_object().unwrap();
        assert_eq!(gpus.keys().collect::<Vec<_>>(), ["gpu_0", "gpu_1"]);
        let g0 = &gpus["gpu_0"];
        assert_eq!(g0["gpu_name"], "NVIDIA H200");
        assert_eq!(g0["gpu_uuid"], "GPU-0a1b2c3d-0000");
        assert_eq!(g0["platform"], "nvidia");
        assert_eq!(g0["hostname"], "gpu-node");
        let m = &g0["metrics"];
        assert_eq!(
            m.as_object().unwrap().keys().collect::<Vec<_>>(),
            [
                "nvidia_power_usage",
                "nvidia_energy_consumption",
                "nvidia_gpu_utilization",
                "nvidia_memory_used",
                "nvidia_temperature",
                "nvidia_sm_utilization"
            ]
        );
        // Reads 2 to 4 (130, 380, 880 ms): the one before the window and the one after the
        // grace are out; numpy's linear percentiles, sample std.
        let p = &m["nvidia_power_usage"];
        assert_eq!(
            p.as_object().unwrap().keys().collect::<Vec<_>>(),
            [
                "unit", "avg", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "min",
                "max", "std", "count", "sum"
            ]
        );
        for (k, want) in [
            ("avg", 350.0),
            ("p1", 301.0),
            ("p25", 325.0),
            ("p99", 399.0),
            ("min", 300.0),
            ("max", 400.0),
            ("std", 50.0),
            ("sum", 1050.0),
        ] {
            assert!(close(&p[k], want), "{k}: {}", p[k]);
        }
        assert_eq!(p["count"], 3);
        assert_eq!(p["unit"], "W");
        // The SM activity appeared at the third read: the window's first read counts in `count`
        // (AIPerf's NaN), in nothing else.
        let sm = &m["nvidia_sm_utilization"];
        assert_eq!(sm["count"], 3);
        assert!(close(&sm["avg"], 50.0) && close(&sm["sum"], 100.0));
        assert!(close(&sm["std"], 200f64.sqrt()));
        assert!(close(&m["nvidia_memory_used"]["avg"], 85.520_809_984));
        assert_eq!(m["nvidia_memory_used"]["unit"], "GB");
        // The counter: its last value in the window (880 ms) minus the last before it (-170 ms),
        // in MJ, and nothing but its unit and that delta.
        let e = &m["nvidia_energy_consumption"];
        assert_eq!(e.as_object().unwrap().len(), 2);
        assert_eq!(e["unit"], "MJ");
        assert!(close(&e["avg"], 300e-6), "{e}");
        // GPU 1: two reads in the window (its SM-clock-only read is not one).
        let g1 = &gpus["gpu_1"]["metrics"];
        assert_eq!(g1["nvidia_power_usage"]["count"], 2);
        assert!(close(&g1["nvidia_power_usage"]["avg"], 110.0));
        assert!(close(&g1["nvidia_energy_consumption"]["avg"], 100e-6));
        assert!(g1.get("nvidia_sm_utilization").is_none());
        // Both failed reads, counted under one message.
        assert_eq!(
            v["error_summary"],
            serde_json::json!([{
                "error_details": {"type": "TelemetryError", "message": "HTTP 503"},
                "count": 2
            }])
        );
    }

    #[test]
    fn without_telemetry_the_section_keeps_aiperfs_empty_shape() {
        let v = section_json(&summary());
        assert_eq!(v["endpoints"], serde_json::json!({}));
        assert_eq!(v["summary"]["endpoints_configured"], serde_json::json!([]));
        let s = summary();
        let all_one = EfficiencyInputs {
            total_osl: Some(1.0),
            total_isl: Some(1.0),
            request_count: Some(1.0),
            request_latency_ms: Some(1.0),
            request_throughput: Some(1.0),
            output_token_throughput: Some(1.0),
            goodput: Some(1.0),
        };
        assert!(efficiency(&s, &all_one).is_empty());
        assert!(csv(&s).is_empty());
    }

    /// AIPerf's analyzer: total power from the mean power read per GPU over the window (no
    /// grace), energy from the counters' deltas with the grace, the rest from the two.
    #[test]
    fn efficiency_metrics_follow_aiperfs_analyzer() {
        let s = with_run(run());
        let got = efficiency(
            &s,
            &EfficiencyInputs {
                total_osl: Some(200.0),
                total_isl: Some(600.0),
                request_count: Some(4.0),
                request_latency_ms: Some(500.0),
                request_throughput: Some(6.0),
                output_token_throughput: Some(300.0),
                goodput: None,
            },
        );
        let (lo, hi) = window(&s);
        let duration = (hi - lo) as f64 / 1e9;
        let energy = 400.0;
        let avg = energy / duration;
        let want = [
            ("nvidia_total_gpu_power", "W", 325.0 + 110.0),
            ("nvidia_average_gpu_power", "W", avg),
            ("nvidia_total_gpu_energy", "J", energy),
            ("nvidia_output_tokens_per_joule", "tokens/J", 200.0 / energy),
            (
                "nvidia_energy_per_output_token",
                "mJ/token",
                energy * 1000.0 / 200.0,
            ),
            (
                "nvidia_energy_per_total_token",
                "mJ/token",
                energy * 1000.0 / 800.0,
            ),
            ("nvidia_energy_per_request", "joules/request", energy / 4.0),
            ("nvidia_energy_per_user", "joules/user", energy / 4.0),
            ("nvidia_energy_delay_product", "J*s", energy / 4.0 * 0.5),
            ("nvidia_performance_per_watt", "requests/sec/W", 6.0 / avg),
            ("nvidia_output_tps_per_watt", "tokens/sec/W", 300.0 / avg),
        ];
        assert_eq!(got.len(), want.len(), "{got:?}");
        for ((tag, _, unit, v), (wtag, wunit, wv)) in got.iter().zip(want) {
            assert_eq!((*tag, *unit), (wtag, wunit));
            assert!((v - wv).abs() <= 1e-9 * wv, "{tag}: {v} != {wv}");
        }
        // In the summary JSON (unit and avg only) and its CSV's scalar rows.
        let j = serde_json::to_value(super::super::summary_json(&s)).unwrap();
        assert_eq!(
            j["nvidia_total_gpu_energy"]
                .as_object()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            ["unit", "avg"]
        );
        assert!(j["warmup_metrics"].get("nvidia_total_gpu_energy").is_none());
        let c = super::super::summary_csv(&s);
        assert!(c.contains("\nTotal GPU Energy (J),400.00\n"), "{c}");
        assert!(
            c.contains("\nEnergy per User (joules/user),100.00\n"),
            "{c}"
        );
    }

    /// Where `summary.json` has the energy, AIPerf's energy figures are ours; total power (which
    /// it does not have) stays AIPerf's.
    #[test]
    fn energy_figures_are_the_summarys_when_it_has_them() {
        let mut s = with_run(run());
        s.energy = Some(energy(&s, [290.0, 100.0]));
        let v = section_json(&s);
        let m = |g: &str| v["endpoints"]["gpu-node:9400"]["gpus"][g]["metrics"].clone();
        assert!(close(
            &m("gpu_0")["nvidia_energy_consumption"]["avg"],
            290e-6
        ));
        assert!(close(
            &m("gpu_1")["nvidia_energy_consumption"]["avg"],
            100e-6
        ));
        let got = efficiency(&s, &EfficiencyInputs::default());
        let find = |tag: &str| got.iter().find(|x| x.0 == tag).map(|x| x.3);
        let duration = s.benchmark_end_unix_s - s.benchmark_start_unix_s;
        assert_eq!(find("nvidia_total_gpu_energy"), Some(390.0));
        assert_eq!(find("nvidia_average_gpu_power"), Some(390.0 / duration));
        assert_eq!(find("nvidia_total_gpu_power"), Some(435.0));
    }

    #[test]
    fn csv_appends_aiperfs_gpu_table() {
        let s = with_run(run());
        let c = csv(&s);
        let lines: Vec<&str> = c.lines().collect();
        assert_eq!(&lines[..2], ["", ""]);
        assert_eq!(
            lines[2],
            "Endpoint,GPU_Index,GPU_Name,GPU_UUID,Platform,Metric,avg,min,max,sum,p1,p5,p10,p25,\
             p50,p75,p90,p95,p99,std,Hostname"
        );
        assert_eq!(
            lines[3],
            "gpu-node:9400,0,NVIDIA H200,GPU-0a1b2c3d-0000,nvidia,NVIDIA GPU Power Usage (W),\
             350.00,300.00,400.00,1050.00,301.00,305.00,310.00,325.00,350.00,375.00,390.00,\
             395.00,399.00,50.00,gpu-node"
        );
        assert_eq!(
            lines[4],
            "gpu-node:9400,0,NVIDIA H200,GPU-0a1b2c3d-0000,nvidia,NVIDIA Energy Consumption (MJ),\
             0.00,,,,,,,,,,,,,,gpu-node"
        );
        // Six fields for GPU 0, four for GPU 1.
        assert_eq!(lines.len(), 3 + 6 + 4);
        assert!(super::super::summary_csv(&s).ends_with(&c));
    }

    #[test]
    fn amd_smi_reads_are_written_under_aiperfs_amd_fields() {
        let mut r = run();
        r.source = SourceKind::AmdSmi;
        r.sources = vec!["amd-smi://localhost".into()];
        for g in &mut r.series {
            g.id.source = "amd-smi://localhost".into();
        }
        let text = String::from_utf8(jsonl(&r)).unwrap();
        let first: V = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(first["platform"], "amd");
        assert_eq!(first["device"], "amd0");
        assert_eq!(first["hostname"], "localhost");
        assert_eq!(
            first["telemetry_data"]
                .as_object()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            [
                "amd_power",
                "amd_energy_consumption",
                "amd_gfx_activity",
                "amd_memory_used",
                "amd_temperature"
            ]
        );
        let s = with_run(r);
        let v = section_json(&s);
        assert_eq!(
            v["endpoints"]["localhost"]["gpus"]["gpu_0"]["metrics"]["amd_power"]["count"],
            3
        );
        assert!(efficiency(&s, &EfficiencyInputs::default())
            .iter()
            .all(|x| x.0.starts_with("amd_")));
    }

    /// The slots are positions in AIPerf's field tables: each of our fields must land on its
    /// AIPerf name, in AIPerf's unit.
    #[test]
    fn our_fields_land_on_aiperfs_names() {
        use Field as F;
        use Platform::{Amd, Nvidia};
        let want = [
            (Nvidia, F::Power, "nvidia_power_usage", "W"),
            (Nvidia, F::Energy, "nvidia_energy_consumption", "MJ"),
            (Nvidia, F::GpuUtil, "nvidia_gpu_utilization", "%"),
            (Nvidia, F::MemUtil, "nvidia_memory_utilization", "%"),
            (Nvidia, F::MemUsed, "nvidia_memory_used", "GB"),
            (Nvidia, F::Temperature, "nvidia_temperature", "°C"),
            (Nvidia, F::SmActive, "nvidia_sm_utilization", "%"),
            (Nvidia, F::DecoderUtil, "nvidia_decoder_utilization", "%"),
            (Nvidia, F::EncoderUtil, "nvidia_encoder_utilization", "%"),
            (Nvidia, F::XidErrors, "nvidia_xid_errors", "count"),
            (Nvidia, F::PowerViolation, "nvidia_power_violation", "us"),
            (Amd, F::Power, "amd_power", "W"),
            (Amd, F::Energy, "amd_energy_consumption", "MJ"),
            (Amd, F::GpuUtil, "amd_gfx_activity", "%"),
            (Amd, F::MemUtil, "amd_umc_activity", "%"),
            (Amd, F::MemUsed, "amd_memory_used", "GB"),
            (Amd, F::Temperature, "amd_temperature", "°C"),
        ];
        for p in [Nvidia, Amd] {
            for f in Field::ALL {
                let got = p
                    .slot(f)
                    .map(|(i, _)| (p.fields()[i].name, p.fields()[i].unit));
                let expected = want
                    .iter()
                    .find(|w| w.0 == p && w.1 == f)
                    .map(|w| (w.2, w.3));
                assert_eq!(got, expected, "{p:?} {f:?}");
            }
        }
        assert_eq!(Nvidia.fields()[POWER].name, "nvidia_power_usage");
        assert_eq!(Amd.fields()[ENERGY].name, "amd_energy_consumption");
    }

    #[test]
    fn endpoint_names_are_aiperfs() {
        for (url, want) in [
            ("http://gpu-node:9400/metrics", "gpu-node:9400"),
            ("https://h:9401/api/metrics?x=1", "h:9401/api"),
            ("nvml://localhost", "localhost"),
            ("http://h/dcgm", "h/dcgm"),
        ] {
            assert_eq!(endpoint_display(url), want);
        }
    }

    /// The artifacts of the synthetic run (a field appearing, a GPU vanishing), read by AIPerf
    /// 0.13's own models, statistics, analyzer and CSV writer (`scripts/aiperf_telemetry_check.py`).
    #[test]
    fn aiperf_0_13_reads_the_telemetry_artifacts() {
        let python = crate::test_tools::Tool::Aiperf.path().join("bin/python");
        let dir = tempfile::tempdir().unwrap();
        for energy_from_summary in [false, true] {
            let d = dir.path().join(if energy_from_summary {
                "with-energy"
            } else {
                "aiperf-energy"
            });
            std::fs::create_dir_all(&d).unwrap();
            let mut s = with_run(run());
            if energy_from_summary {
                s.energy = Some(energy(&s, [290.0, 100.0]));
            }
            crate::report::write_artifacts(&d, &s).unwrap();
            let lines: Vec<u8> = records()
                .iter()
                .flat_map(|r| [export_line(r), b"\n".to_vec()].concat())
                .collect();
            std::fs::write(d.join("profile_export.jsonl"), lines).unwrap();
            let mut cmd = Command::new(&python);
            cmd.arg(
                Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/aiperf_telemetry_check.py"),
            )
            .arg(&d)
            .env("COLUMNS", "250");
            // The plot is the slow part (a minute on two loaded cores): the integration test
            // `conformance::gpu_telemetry_of_a_real_run_is_read_and_drawn_by_aiperf` draws it.
            cmd.arg("--no-plot");
            let out = cmd.output().unwrap();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            eprintln!("{}:\n{text}", d.display());
            assert!(out.status.success(), "AIPerf 0.13 rejects:\n{text}");
            assert!(text.contains("every check passed"), "{text}");
        }
    }
}
