//! AIPerf 0.13's confidence aggregate of one point's repeated runs:
//! `profile_export_aiperf_aggregate.json` and `.csv` in the point's `aggregate/` directory, where
//! AIPerf's orchestrator writes them and where `aiperf plot` and AIPerf's dashboards look.
//!
//! Built from the runs' own `profile_export_aiperf.json` files, read back from disk, so it holds
//! exactly what each run exported: for every metric and every statistic AIPerf aggregates
//! (`avg`, `min`, `max`, `sum`, `p1` ... `p99`, `std`), one entry `<metric>_<stat>` with the
//! mean over the runs, the sample standard deviation, min, max, `cv = std / mean`,
//! `se = std / sqrt(n)` and the Student-t interval, as AIPerf's `ConfidenceAggregation` computes
//! them. A value AIPerf cannot state (the t quantile of a single run, the cv of a zero mean) is
//! `null`, as AIPerf writes it.
//!
//! And `--search-recipe pareto-sweep`'s frontier, `sweep_aggregate/pareto_sweep.json`, in the
//! shape AIPerf's `pareto_sweep_export` step writes it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::index::{PointStatus, SweepIndex};
use super::plan::Param;
use super::stats::interval;
use crate::csv::field as quote;

/// AIPerf's `STAT_KEYS`, in its order: the statistics of a metric that are aggregated.
const STAT_KEYS: [&str; 14] = [
    "avg", "min", "max", "sum", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "std",
];

/// The file names AIPerf gives the aggregate.
pub(crate) const AGGREGATE_JSON: &str = "profile_export_aiperf_aggregate.json";
const AGGREGATE_CSV: &str = "profile_export_aiperf_aggregate.csv";

/// What the aggregate says about the point besides its numbers.
pub(crate) struct PointMeta<'a> {
    /// `concurrency=8,osl=128` (AIPerf's label), empty for a repeated single run.
    pub(crate) label: String,
    /// The swept values, by AIPerf's leaf names (integers as integers, as AIPerf writes them).
    pub(crate) values: Map<String, Value>,
    /// Runs made of the point.
    pub(crate) runs: usize,
    /// Run directories, relative to the sweep's, of the runs to aggregate.
    pub(crate) run_dirs: Vec<PathBuf>,
    /// Runs left out (cut by a signal, or without an export), with why.
    pub(crate) failed: Vec<(String, String)>,
    pub(crate) confidence: f64,
    pub(crate) cooldown_s: f64,
    pub(crate) model: Option<&'a str>,
}

/// Writes the point's aggregate into `sweep_dir/rel`; returns the JSON file's path.
pub(crate) fn write(
    sweep_dir: &Path,
    rel: &Path,
    meta: &PointMeta<'_>,
) -> std::io::Result<PathBuf> {
    let mut runs = Vec::new();
    let mut failed: Vec<(String, String)> = meta.failed.clone();
    for d in &meta.run_dirs {
        let path = sweep_dir.join(d).join("profile_export_aiperf.json");
        match std::fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<Value>(&b).map_err(|e| e.to_string()))
        {
            Ok(v) => runs.push((label(d), v)),
            Err(e) => failed.push((label(d), format!("{}: {e}", path.display()))),
        }
    }
    let metrics = aggregate(runs.iter().map(|(_, v)| v), meta.confidence);
    let mut metadata = Map::new();
    metadata.insert("aggregation_type".into(), json!("confidence"));
    metadata.insert("num_profile_runs".into(), json!(meta.runs));
    metadata.insert("num_successful_runs".into(), json!(runs.len()));
    metadata.insert(
        "failed_runs".into(),
        Value::Array(
            failed
                .iter()
                .map(|(l, e)| json!({"label": l, "error": e}))
                .collect(),
        ),
    );
    metadata.insert("confidence_level".into(), json!(meta.confidence));
    metadata.insert(
        "run_labels".into(),
        json!(runs.iter().map(|(l, _)| l).collect::<Vec<_>>()),
    );
    if runs.len() == 1 {
        metadata.insert("single_run".into(), json!(true));
    }
    metadata.insert("cooldown_seconds".into(), json!(meta.cooldown_s));
    if !meta.label.is_empty() {
        metadata.insert("variation_label".into(), json!(meta.label));
        metadata.insert(
            "variation_values".into(),
            Value::Object(meta.values.clone()),
        );
        metadata.insert("sweep_mode".into(), json!("independent"));
    }
    if let Some(m) = meta.model {
        metadata.insert("model".into(), json!(m));
    }
    let doc = json!({
        "schema_version": "1.0",
        "aiperf_version": concat!("specperf-", env!("CARGO_PKG_VERSION")),
        "metadata": Value::Object(metadata.clone()),
        "metrics": metrics,
    });
    let dir = sweep_dir.join(rel);
    std::fs::create_dir_all(&dir)?;
    let json_path = dir.join(AGGREGATE_JSON);
    let mut text = serde_json::to_string_pretty(&doc).map_err(std::io::Error::other)?;
    text.push('\n');
    crate::fsutil::write_atomic(&json_path, text.as_bytes())?;
    crate::fsutil::write_atomic(
        &dir.join(AGGREGATE_CSV),
        csv(&metrics, &metadata, meta.runs, runs.len()).as_bytes(),
    )?;
    Ok(json_path)
}

/// A run's label: the last component of its directory (`run_0001`, `trial_0002`).
pub(crate) fn label(d: &Path) -> String {
    d.file_name()
        .map_or_else(|| d.display().to_string(), |n| n.to_string_lossy().into())
}

/// `<metric>_<stat>` -> AIPerf's `ConfidenceMetric`, over the runs that have the value.
fn aggregate<'a>(runs: impl Iterator<Item = &'a Value>, confidence: f64) -> Value {
    let mut pairs: BTreeMap<(String, &'static str), (Vec<f64>, String)> = BTreeMap::new();
    for run in runs {
        let Some(obj) = run.as_object() else { continue };
        for (tag, m) in obj {
            // A metric is an object with a unit (the run's other fields are not).
            let Some(unit) = m.get("unit").and_then(Value::as_str) else {
                continue;
            };
            for stat in STAT_KEYS {
                if let Some(v) = m
                    .get(stat)
                    .and_then(Value::as_f64)
                    .filter(|v| v.is_finite())
                {
                    let e = pairs
                        .entry((tag.clone(), stat))
                        .or_insert_with(|| (Vec::new(), unit.to_string()));
                    e.0.push(v);
                }
            }
        }
    }
    let mut out = Map::new();
    for ((tag, stat), (values, unit)) in pairs {
        let Some(i) = interval(&values, confidence) else {
            continue;
        };
        // AIPerf's own definitions where they differ from the sweep table's: cv = std / mean
        // (no value for a zero mean), and no t quantile for a single run.
        let single = i.n == 1;
        out.insert(
            format!("{tag}_{stat}"),
            json!({
                "mean": i.mean,
                "std": i.std,
                "min": i.min,
                "max": i.max,
                "cv": if single { json!(0.0) } else { finite(i.std / i.mean) },
                "se": i.se,
                "ci_low": i.ci_low,
                "ci_high": i.ci_high,
                "t_critical": if single { Value::Null } else { finite(i.t_critical) },
                "unit": unit,
            }),
        );
    }
    Value::Object(out)
}

/// A number AIPerf writes, or `null` where it has none.
fn finite(v: f64) -> Value {
    if v.is_finite() {
        json!(v)
    } else {
        Value::Null
    }
}

fn csv(metrics: &Value, metadata: &Map<String, Value>, runs: usize, ok: usize) -> String {
    let mut out = String::from("metric,mean,std,min,max,cv,se,ci_low,ci_high,t_critical,unit\n");
    let fmt = |v: &Value, decimals: usize| match v.as_f64() {
        Some(x) => format!("{x:.decimals$}"),
        None => String::new(),
    };
    for (name, m) in metrics.as_object().into_iter().flatten() {
        let row = [
            quote(name),
            fmt(&m["mean"], 2),
            fmt(&m["std"], 2),
            fmt(&m["min"], 2),
            fmt(&m["max"], 2),
            fmt(&m["cv"], 4),
            fmt(&m["se"], 4),
            fmt(&m["ci_low"], 2),
            fmt(&m["ci_high"], 2),
            fmt(&m["t_critical"], 4),
            quote(m["unit"].as_str().unwrap_or("")),
        ];
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out.push('\n');
    out.push_str(&format!(
        "Aggregation Type,confidence\nTotal Runs,{runs}\nSuccessful Runs,{ok}\n"
    ));
    for (k, v) in metadata {
        if matches!(
            k.as_str(),
            "aggregation_type" | "num_profile_runs" | "num_successful_runs"
        ) {
            continue;
        }
        let title: Vec<String> = k
            .split('_')
            .map(|w| {
                let mut c = w.chars();
                c.next()
                    .map(|f| f.to_uppercase().chain(c).collect())
                    .unwrap_or_default()
            })
            .collect();
        let v = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        out.push_str(&format!("{},{}\n", quote(&title.join(" ")), quote(&v)));
    }
    out
}

/// Where AIPerf's `pareto-sweep` recipe writes its frontier, relative to the sweep's directory.
pub(crate) const PARETO_SWEEP_JSON: &str = "sweep_aggregate/pareto_sweep.json";

/// AIPerf's `pareto_sweep.json`: every finished point as a cell (its shape, concurrency, p95 TTFT
/// as x and output token throughput as y, means over its runs), each marked `pareto_optimal`
/// when no other cell has x <= and y >= with one strictly better (AIPerf's dominance: equal cells
/// are both optimal). A point without both values is listed with `null` and is never optimal.
pub(crate) fn pareto_sweep(idx: &SweepIndex) -> Value {
    // Each cell's fields, and its (x, y) when both are known.
    type Cell = (Map<String, Value>, Option<(f64, f64)>);
    let cells: Vec<Cell> = idx
        .points
        .iter()
        .filter(|p| p.status == PointStatus::Done)
        .filter_map(|p| {
            let get = |k: Param| p.params.get(&k).map(|&v| v as u64);
            let (isl, osl, conc) = (get(Param::Isl)?, get(Param::Osl)?, get(Param::Concurrency)?);
            let xy = p
                .mean("time_to_first_token_p95")
                .zip(p.mean("output_token_throughput"))
                .filter(|(x, y)| x.is_finite() && y.is_finite());
            let mut c = Map::new();
            c.insert("isl".into(), json!(isl));
            c.insert("osl".into(), json!(osl));
            c.insert("concurrency".into(), json!(conc));
            c.insert("x".into(), xy.map_or(Value::Null, |v| json!(v.0)));
            c.insert("y".into(), xy.map_or(Value::Null, |v| json!(v.1)));
            Some((c, xy))
        })
        .collect();
    let dominated = |a: (f64, f64)| {
        cells
            .iter()
            .filter_map(|c| c.1)
            .any(|b| b.0 <= a.0 && b.1 >= a.1 && (b.0 < a.0 || b.1 > a.1))
    };
    let out: Vec<Value> = cells
        .iter()
        .map(|(c, xy)| {
            let mut c = c.clone();
            let optimal = xy.is_some_and(|xy| !dominated(xy));
            c.insert("pareto_optimal".into(), json!(optimal));
            Value::Object(c)
        })
        .collect();
    json!({
        "x_metric": "time_to_first_token",
        "x_stat": "p95",
        "y_metric": "output_token_throughput",
        "y_stat": "avg",
        "cells": out,
    })
}

/// Writes [`pareto_sweep`] under the sweep's directory.
pub(crate) fn write_pareto_sweep(sweep_dir: &Path, idx: &SweepIndex) -> std::io::Result<()> {
    let path = sweep_dir.join(PARETO_SWEEP_JSON);
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    let mut text =
        serde_json::to_string_pretty(&pareto_sweep(idx)).map_err(std::io::Error::other)?;
    text.push('\n');
    crate::fsutil::write_atomic(&path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stat_of_every_metric_is_aggregated_as_aiperf_does() {
        let runs = [
            json!({"schema_version": "1.4", "request_throughput": {"unit": "requests/sec", "avg": 10.0},
                   "time_to_first_token": {"unit": "ms", "avg": 50.0, "p99": 80.0},
                   "error_request_count": {"unit": "requests", "avg": 0.0}}),
            json!({"request_throughput": {"unit": "requests/sec", "avg": 12.0},
                   "time_to_first_token": {"unit": "ms", "avg": 54.0, "p99": 90.0},
                   "error_request_count": {"unit": "requests", "avg": 0.0}}),
        ];
        let m = aggregate(runs.iter(), 0.95);
        let keys: Vec<&String> = m.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "error_request_count_avg",
                "request_throughput_avg",
                "time_to_first_token_avg",
                "time_to_first_token_p99"
            ]
        );
        let r = &m["request_throughput_avg"];
        assert_eq!(
            (r["mean"].as_f64(), r["min"].as_f64()),
            (Some(11.0), Some(10.0))
        );
        let std = 2f64.sqrt();
        assert!((r["std"].as_f64().unwrap() - std).abs() < 1e-12);
        assert!((r["cv"].as_f64().unwrap() - std / 11.0).abs() < 1e-12);
        // t(0.975, 1) = 12.7062...; the interval is mean ± t · std / sqrt(2).
        let t = r["t_critical"].as_f64().unwrap();
        assert!((t - 12.706_204_736).abs() < 1e-6, "{t}");
        assert!((r["ci_high"].as_f64().unwrap() - (11.0 + t * std / 2f64.sqrt())).abs() < 1e-9);
        // A zero mean has no cv, as AIPerf writes it (inf scrubbed to null).
        let e = &m["error_request_count_avg"];
        assert_eq!((e["mean"].as_f64(), &e["cv"]), (Some(0.0), &Value::Null));
        // One run: no t quantile, the interval collapsed to the value.
        let one = aggregate(runs[..1].iter(), 0.95);
        let t = &one["time_to_first_token_p99"];
        assert_eq!(
            (&t["t_critical"], t["ci_low"].as_f64()),
            (&Value::Null, Some(80.0))
        );
    }

    #[test]
    fn equal_cells_are_both_on_aiperfs_frontier_and_dominated_ones_are_not() {
        use super::super::index::PointEntry;
        let point = |c: f64, x: f64, y: f64| {
            let mut p: PointEntry = serde_json::from_value(json!({
                "name": format!("c{c}"), "params": {"concurrency": c, "isl": 8.0, "osl": 8.0},
                "status": "done", "runs": [], "aggregate": {}
            }))
            .unwrap();
            for (k, v) in [
                ("time_to_first_token_p95", x),
                ("output_token_throughput", y),
            ] {
                p.aggregate
                    .insert(k.into(), super::super::stats::interval(&[v], 0.95).unwrap());
            }
            p
        };
        let mut idx: SweepIndex = serde_json::from_value(json!({
            "schema": "specperf.sweep.v1", "specperf_version": "0", "command": "", "sweep_type":
            "pareto-sweep", "parameters": [], "num_profile_runs": 1, "confidence_level": 0.95,
            "status": "complete", "points": [], "pareto_optimal": []
        }))
        .unwrap();
        idx.points = vec![
            point(1.0, 10.0, 100.0),
            point(2.0, 10.0, 100.0), // equal to the first: neither dominates
            point(3.0, 12.0, 100.0), // more TTFT, same throughput: dominated
            point(4.0, 30.0, 400.0),
        ];
        let v = pareto_sweep(&idx);
        let optimal: Vec<bool> = v["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["pareto_optimal"].as_bool().unwrap())
            .collect();
        assert_eq!(optimal, [true, true, false, true]);
        assert_eq!(v["cells"][0]["concurrency"], json!(1));
    }
}
