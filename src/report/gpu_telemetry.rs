//! GPU telemetry in InferenceX's shapes and on the report page: `gpu_metrics.csv` as
//! `nvidia-smi --query-gpu=… --format=csv` writes it (what InferenceX's `aggregate_power.py`
//! reads), the power fields of the raw result (`power_metric_schema_version` 2, `power_valid`),
//! and the power-over-time chart of `report.html`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Deserialize;

use super::json::{Obj, J};
use super::svg::{Chart, Series, PALETTE};
use crate::metrics::{Summary, SummaryView};
use crate::telemetry::{Field, TelemetryRun};

/// InferenceX's `NVIDIA_GPU_MONITOR_QUERY`, as nvidia-smi's CSV header names its columns.
const CSV_HEADER: &str = "timestamp, index, power.draw [W], temperature.gpu, clocks.current.sm [MHz], clocks.current.memory [MHz], utilization.gpu [%], utilization.memory [%]";

/// InferenceX's schema of the power fields.
const POWER_METRIC_SCHEMA_VERSION: u64 = 2;

/// `gpu_metrics.csv`: one row per GPU per read with power, in time order; nvidia-smi's local-time
/// stamps (`YYYY/MM/DD HH:MM:SS.mmm`, as InferenceX's monitor writes them on the same machine),
/// its units and `[N/A]` for what the read lacked. GPUs on several hosts get indexes 0..n in the
/// order first seen (one host's nvidia-smi numbering would collide).
pub(crate) fn gpu_metrics_csv(run: &TelemetryRun) -> String {
    let one_host = run
        .series
        .iter()
        .all(|s| s.id.hostname == run.series[0].id.hostname);
    let mut rows: Vec<(u64, u32, String)> = Vec::new();
    for (i, s) in run.series.iter().enumerate() {
        let index = if one_host { s.id.index } else { i as u32 };
        for r in &s.readings {
            let Some(&power) = r.values.get(&Field::Power) else {
                continue;
            };
            let v = |f: Field, unit: &str| {
                r.values
                    .get(&f)
                    .map_or_else(|| "[N/A]".to_owned(), |x| format!("{x:.0}{unit}"))
            };
            rows.push((
                r.t_ns,
                index,
                format!(
                    "{}, {index}, {power:.2} W, {}, {}, {}, {}, {}",
                    crate::timefmt::nvidia_smi_local(r.t_ns),
                    v(Field::Temperature, ""),
                    v(Field::SmClock, " MHz"),
                    v(Field::MemClock, " MHz"),
                    v(Field::GpuUtil, " %"),
                    v(Field::MemUtil, " %"),
                ),
            ));
        }
    }
    rows.sort_by_key(|r| (r.0, r.1));
    let mut o = String::with_capacity(rows.len() * 80 + 200);
    o.push_str(CSV_HEADER);
    o.push('\n');
    for (_, _, line) in rows {
        o.push_str(&line);
        o.push('\n');
    }
    o
}

/// InferenceX's power fields (`aggregate_power.py`'s `_patch_power_result`): the schema version,
/// `power_valid` 1/0 and, when valid, its figures from the same integration, rounded as it
/// rounds them; the reasons when not valid. Written only with GPU telemetry.
pub(super) fn power_fields(o: &mut Obj, s: &Summary) {
    let Some(e) = &s.energy else {
        return;
    };
    let valid = e.integration.power_valid && e.integrated_energy_j.is_some();
    o.put("power_metric_schema_version", POWER_METRIC_SCHEMA_VERSION)
        .put("power_valid", u64::from(valid));
    if !valid {
        o.put(
            "power_invalid_reasons",
            J::A(
                e.integration
                    .reasons
                    .iter()
                    .map(|r| J::from(r.as_str()))
                    .collect(),
            ),
        );
        return;
    }
    let energy = e.integrated_energy_j.unwrap_or(0.0);
    let duration = e.end_unix_s - e.start_unix_s;
    let total_w = energy / duration;
    let round = |v: f64, d: i32| (v * 10f64.powi(d)).round() / 10f64.powi(d);
    let per = |n: u64| (n > 0).then(|| round(energy / n as f64, 6));
    o.put(
        "avg_power_w",
        round(total_w / f64::from(e.observed_gpus.max(1)), 3),
    )
    .put("avg_total_gpu_power_w", round(total_w, 3))
    .put("total_gpu_energy_j", round(energy, 3))
    .put("joules_per_successful_query", per(s.counts.success))
    .put("joules_per_input_token", per(s.total_prompt_tokens))
    .put("joules_per_output_token", per(s.total_completion_tokens))
    .put(
        "joules_per_total_token",
        per(s.total_prompt_tokens + s.total_completion_tokens),
    );
}

/// The fields of a `gpu_telemetry_export.jsonl` line the power chart reads.
#[derive(Deserialize)]
struct TelemetryLine {
    gpu_index: u64,
    #[serde(default)]
    hostname: String,
    timestamp_ns: u64,
    telemetry_data: PowerData,
}

/// A read's power, under the platform's field name.
#[derive(Deserialize)]
struct PowerData {
    nvidia_power_usage: Option<f64>,
    amd_power: Option<f64>,
}

impl PowerData {
    fn power(&self) -> Option<f64> {
        self.nvidia_power_usage.or(self.amd_power)
    }
}

/// The `gpu_power` chart: each GPU's power against time since the window opened (the total
/// when more GPUs than colours), from `gpu_telemetry_export.jsonl`. `None` without telemetry.
pub(super) fn power_chart(dir: &Path, summary: &SummaryView) -> Option<Chart> {
    let energy = summary.energy?;
    let (start, end) = (energy.start_unix_s?, energy.end_unix_s?);
    let text = std::fs::read_to_string(dir.join("gpu_telemetry_export.jsonl")).ok()?;
    let mut per_gpu: BTreeMap<(String, u64), Vec<(f64, f64)>> = BTreeMap::new();
    for line in text.lines() {
        let Ok(r) = serde_json::from_str::<TelemetryLine>(line) else {
            continue;
        };
        let t = r.timestamp_ns as f64 / 1e9 - start;
        if let Some(p) = r.telemetry_data.power() {
            per_gpu
                .entry((r.hostname, r.gpu_index))
                .or_default()
                .push((t, p));
        }
    }
    let one_host = per_gpu.keys().all(|k| {
        k.0 == per_gpu
            .keys()
            .next()
            .map(|k| k.0.clone())
            .unwrap_or_default()
    });
    let series: Vec<Series> = if per_gpu.len() <= PALETTE.len() {
        per_gpu
            .into_iter()
            .zip(PALETTE)
            .map(|((k, points), color)| Series {
                name: if one_host {
                    format!("GPU {}", k.1)
                } else {
                    format!("{} GPU {}", k.0, k.1)
                },
                points,
                color,
                step: false,
            })
            .collect()
    } else {
        // The sum at each read time (all GPUs of a DCGM page are read at once).
        let n = per_gpu.len();
        let mut total: BTreeMap<u64, f64> = BTreeMap::new();
        for points in per_gpu.values() {
            for &(t, p) in points {
                *total.entry((t * 1e3).round() as u64).or_default() += p;
            }
        }
        vec![Series {
            name: format!("all {n} GPUs"),
            points: total
                .into_iter()
                .map(|(t, p)| (t as f64 / 1e3, p))
                .collect(),
            color: PALETTE[0],
            step: false,
        }]
    };
    let mut title = "GPU power over time".to_owned();
    if let Some(j) = energy.joules_per_output_token {
        let _ = write!(title, " ({j:.3} J per output token over the window)");
    }
    let x_label = format!(
        "time since the window opened (s; it closed at {:.1})",
        end - start
    );
    let mut c = Chart::lines("gpu_power", &title, &x_label, "power (W)", series);
    // Reads from before the window (the warmup) are drawn at negative times.
    c.x_from_zero = false;
    c.empty_note = "no power readings".into();
    Some(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::{GpuId, GpuSeries, Reading, SourceKind};

    #[test]
    fn the_csv_has_nvidia_smis_header_units_and_na_cells_in_time_order() {
        let id = |i| GpuId {
            source: "s".into(),
            hostname: "h".into(),
            index: i,
            uuid: String::new(),
            model: String::new(),
        };
        let reading = |t: u64, p: Option<f64>| Reading {
            t_ns: t,
            values: p
                .map(|p| {
                    [(Field::Power, p), (Field::GpuUtil, 87.4)]
                        .into_iter()
                        .collect()
                })
                .unwrap_or_default(),
        };
        let run = TelemetryRun {
            source: SourceKind::Dcgm,
            sources: vec!["s".into()],
            interval_s: 1.0,
            series: vec![
                GpuSeries {
                    id: id(1),
                    readings: vec![
                        reading(2_000_000_000, Some(100.0)),
                        reading(3_000_000_000, None),
                    ],
                },
                GpuSeries {
                    id: id(0),
                    readings: vec![reading(2_000_000_000, Some(412.345))],
                },
            ],
            events: Vec::new(),
        };
        let csv = gpu_metrics_csv(&run);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], CSV_HEADER);
        assert_eq!(lines.len(), 3, "the read without power is left out: {csv}");
        assert!(
            lines[1].ends_with(", 0, 412.35 W, [N/A], [N/A], [N/A], 87 %, [N/A]"),
            "{}",
            lines[1]
        );
        assert!(lines[2].contains(", 1, 100.00 W,"), "{}", lines[2]);
        assert_eq!(
            lines[1].split(", ").next().map(str::len),
            Some(23),
            "{}",
            lines[1]
        );
    }
}
