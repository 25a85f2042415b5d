//! The sweep report, made from `sweep.json` alone: one table (console, `sweep.csv`), the Pareto
//! frontier of throughput per GPU against interactivity (InferenceX's plot: y is total token
//! throughput per GPU, x is 1000 / median TPOT, a point is on the frontier when no other point
//! has both more throughput and more interactivity; one frontier and one series per input/output
//! shape when the sweep varies them, as InferenceX draws a curve per ISL/OSL), and `sweep.html`
//! with the chart. With repeated runs every cell is the mean over the runs with its confidence
//! half-width.
//!
//! `specperf plot` over several sweep directories draws their frontiers on one chart
//! ([`overlay`]), e.g. before and after a drafter change.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::index::{PointEntry, PointStatus, SweepIndex};
use super::plan::{num, Param};
use super::values::{LATENCIES, SCALARS, STATS};
use crate::report::pareto::{
    frontier, pareto_svg, pareto_svg_toward, sweep_html, ParetoPoint, ParetoSeries, YGoal,
};

/// A column of the table: header, [`super::values::Values`] key, decimals.
struct Col {
    head: &'static str,
    key: &'static str,
    digits: usize,
}

const fn col(head: &'static str, key: &'static str, digits: usize) -> Col {
    Col { head, key, digits }
}

/// The measured columns (the per-GPU one replaces total throughput with `--gpus`; energy per
/// output token with GPU telemetry).
fn columns(gpus: bool, energy: bool) -> Vec<Col> {
    let mut c = vec![
        col("req/s", "request_throughput", 2),
        col("out tok/s", "output_token_throughput", 1),
    ];
    c.push(if gpus {
        col("tok/s/GPU", "total_token_throughput_per_gpu", 1)
    } else {
        col("tok/s", "total_token_throughput", 1)
    });
    c.extend([
        col("TTFT p50", "time_to_first_token_p50", 1),
        col("TTFT p99", "time_to_first_token_p99", 1),
        col("ITL p50", "inter_token_latency_p50", 2),
        col("ITL p99", "inter_token_latency_p99", 2),
        col("E2E p50", "request_latency_p50", 0),
        col("E2E p99", "request_latency_p99", 0),
        col("tok/s/user", "interactivity", 1),
        col("AL", "acceptance_length", 3),
    ]);
    if energy {
        c.push(col("J/out tok", ENERGY_KEY, 4));
    }
    c.push(col("errors", "error_request_count", 0));
    c
}

/// The energy chart's y and the table's energy column.
const ENERGY_KEY: &str = "joules_per_output_token";

/// Whether any point measured GPU energy.
fn has_energy(idx: &SweepIndex) -> bool {
    idx.points
        .iter()
        .any(|p| p.aggregate.contains_key(ENERGY_KEY))
}

/// The y value of a point on the Pareto chart (per GPU when known).
fn y_key(idx: &SweepIndex) -> &'static str {
    if idx.gpus.is_some() {
        "total_token_throughput_per_gpu"
    } else {
        "total_token_throughput"
    }
}

/// The finished points with both Pareto coordinates.
fn plotted<'a>(idx: &'a SweepIndex, y: &str) -> Vec<(&'a PointEntry, f64, f64)> {
    idx.points
        .iter()
        .filter(|p| p.status == PointStatus::Done)
        .filter_map(|p| Some((p, p.mean("interactivity")?, p.mean(y)?)))
        .collect()
}

/// A point's workload shape: its swept input and output lengths. Points of different shapes are
/// different workloads (InferenceX draws one curve per ISL/OSL), so each shape has its own
/// frontier and its own series on the chart; a sweep that varies neither has one shape.
fn shape(p: &PointEntry) -> (Option<u64>, Option<u64>) {
    let get = |k: Param| p.params.get(&k).map(|&v| v as u64);
    (get(Param::Isl), get(Param::Osl))
}

/// The shapes of the plotted points, in the order they first appear.
fn shapes(idx: &SweepIndex) -> Vec<(Option<u64>, Option<u64>)> {
    let mut out = Vec::new();
    for (p, ..) in plotted(idx, y_key(idx)) {
        if !out.contains(&shape(p)) {
            out.push(shape(p));
        }
    }
    out
}

/// Sets `pareto_optimal` to the names of the points on their shape's frontier.
pub(crate) fn mark_pareto(idx: &mut SweepIndex) {
    let mut names = Vec::new();
    for sh in shapes(idx) {
        let pts: Vec<_> = plotted(idx, y_key(idx))
            .into_iter()
            .filter(|(p, ..)| shape(p) == sh)
            .collect();
        let xy: Vec<(f64, f64)> = pts.iter().map(|(_, x, y)| (*x, *y)).collect();
        names.extend(frontier(&xy).into_iter().map(|i| pts[i].0.name.clone()));
    }
    // In the sweep's order, whatever the shapes' order.
    idx.pareto_optimal = idx
        .points
        .iter()
        .filter(|p| names.contains(&p.name))
        .map(|p| p.name.clone())
        .collect();
}

/// One cell: the mean, with ± the confidence half-width when the point ran more than once.
fn cell(p: &PointEntry, key: &str, digits: usize) -> String {
    match p.aggregate.get(key) {
        None => "-".into(),
        Some(i) if i.n > 1 => format!("{:.digits$} ±{:.digits$}", i.mean, i.half_width()),
        Some(i) => format!("{:.digits$}", i.mean),
    }
}

/// The drain column: seconds waited, and whether the point started undrained.
fn drain_cell(p: &PointEntry) -> String {
    match &p.drain_before {
        None => "-".into(),
        Some(d) if p.started_undrained => format!("{:.0} s UNDRAINED", d.waited_s),
        Some(d) => format!("{:.0} s", d.waited_s),
    }
}

/// Header and rows of the table (strings), and which rows are on the frontier.
fn table(idx: &SweepIndex) -> (Vec<String>, Vec<Vec<String>>, Vec<bool>) {
    let cols = columns(idx.gpus.is_some(), has_energy(idx));
    let mut head: Vec<String> = vec!["point".into()];
    head.extend(idx.parameters.iter().map(|p| p.name().to_string()));
    head.extend(["status".into(), "runs".into()]);
    head.extend(cols.iter().map(|c| c.head.to_string()));
    head.push("drain".into());
    let search = idx.search.is_some();
    if search {
        head.push("SLA".into());
    }
    let mut rows = Vec::new();
    let mut front = Vec::new();
    for p in &idx.points {
        let mut r = vec![if p.name.is_empty() {
            "(one point)".into()
        } else {
            p.name.clone()
        }];
        r.extend(
            idx.parameters
                .iter()
                .map(|k| p.params.get(k).map_or("-".into(), |v| num(*v))),
        );
        r.push(
            match p.status {
                PointStatus::Done => "done",
                PointStatus::Failed => "FAILED",
                PointStatus::Stopped => "stopped",
            }
            .into(),
        );
        r.push(p.runs.len().to_string());
        r.extend(cols.iter().map(|c| cell(p, c.key, c.digits)));
        r.push(drain_cell(p));
        if search {
            r.push(match &p.sla {
                Some(v) if v.pass => "pass".into(),
                Some(_) => "FAIL".into(),
                None => "-".into(),
            });
        }
        rows.push(r);
        front.push(idx.pareto_optimal.contains(&p.name));
    }
    (head, rows, front)
}

/// The units under the table's headers.
const UNITS: &str = "Latencies in ms (ITL per request, as AIPerf); tok/s/user = 1000 / median \
                     TPOT; * = on the Pareto frontier (throughput against tok/s/user)";

/// The table and the search's answer as the console shows them.
pub fn console(idx: &SweepIndex) -> String {
    let (head, rows, front) = table(idx);
    let mut widths: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let runs = if idx.num_profile_runs > 1 {
        format!(
            ", up to {} runs each (mean ±{:.0}% CI half-width)",
            idx.num_profile_runs,
            idx.confidence_level * 100.0
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "Sweep ({}): {} points{runs}, {}",
        idx.sweep_type,
        idx.points.len(),
        idx.status
    );
    let line = |cells: &[String], mark: &str| {
        let mut l = String::from(mark);
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i > 0 {
                l.push_str("  ");
            }
            if i == 0 {
                let _ = write!(l, "{c:<w$}");
            } else {
                let _ = write!(l, "{c:>w$}");
            }
        }
        l.trim_end().to_string()
    };
    let _ = writeln!(out, "{}", line(&head, "  "));
    for (r, f) in rows.iter().zip(&front) {
        let _ = writeln!(out, "{}", line(r, if *f { "* " } else { "  " }));
    }
    let _ = writeln!(out, "{UNITS}");
    if let Some(s) = &idx.search {
        let probes: Vec<String> = s
            .state
            .history
            .iter()
            .map(|p| format!("{} {}", num(p.value), if p.pass { "pass" } else { "fail" }))
            .collect();
        let _ = writeln!(
            out,
            "Search {} over {}: {} (probes: {})",
            s.recipe,
            s.parameter.name(),
            match (s.best, s.first_failure) {
                (Some(b), Some(f)) => format!("best {} (fails at {})", num(b), num(f)),
                (Some(b), None) => format!("best {} (the largest tried)", num(b)),
                (None, Some(f)) => format!("no load met the objectives (fails at {})", num(f)),
                (None, None) => "no probe finished".into(),
            },
            probes.join(", ")
        );
    }
    out
}

/// Every key any point reports, in a stable order: scalars, then latencies by stat.
fn all_keys(idx: &SweepIndex) -> Vec<String> {
    let mut keys: Vec<String> = SCALARS.iter().map(|s| s.to_string()).collect();
    for (tag, _) in LATENCIES {
        for s in STATS {
            keys.push(format!("{tag}_{s}"));
        }
    }
    keys.retain(|k| idx.points.iter().any(|p| p.aggregate.contains_key(k)));
    keys
}

/// `sweep.csv`: one row per point; every value's mean, with `_ci_low`/`_ci_high` columns when
/// the points ran more than once.
fn csv(idx: &SweepIndex) -> String {
    let keys = all_keys(idx);
    let repeated = idx.num_profile_runs > 1;
    let mut head: Vec<String> = vec!["point".into()];
    head.extend(idx.parameters.iter().map(|p| p.name().to_string()));
    head.extend(["status".into(), "runs".into()]);
    for k in &keys {
        head.push(k.clone());
        if repeated {
            head.push(format!("{k}_ci_low"));
            head.push(format!("{k}_ci_high"));
        }
    }
    head.extend(
        [
            "drain_reason",
            "drain_waited_s",
            "started_undrained",
            "sla_pass",
            "pareto_optimal",
        ]
        .map(String::from),
    );
    let mut out = head.join(",") + "\n";
    let f = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v}"));
    for p in &idx.points {
        let mut r: Vec<String> = vec![crate::csv::field(&p.name)];
        r.extend(idx.parameters.iter().map(|k| f(p.params.get(k).copied())));
        r.push(format!("{:?}", p.status).to_lowercase());
        r.push(p.runs.len().to_string());
        for k in &keys {
            let i = p.aggregate.get(k);
            r.push(f(i.map(|i| i.mean)));
            if repeated {
                r.push(f(i.map(|i| i.ci_low)));
                r.push(f(i.map(|i| i.ci_high)));
            }
        }
        let d = p.drain_before.as_ref();
        r.push(d.map_or(String::new(), |d| {
            serde_json::to_value(d.reason)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default()
        }));
        r.push(f(d.map(|d| d.waited_s)));
        r.push(p.started_undrained.to_string());
        r.push(p.sla.as_ref().map_or(String::new(), |v| v.pass.to_string()));
        r.push(idx.pareto_optimal.contains(&p.name).to_string());
        out.push_str(&r.join(","));
        out.push('\n');
    }
    out
}

/// A point's label on the chart: its parameters, short.
fn point_label(p: &PointEntry) -> String {
    if p.params.is_empty() {
        return "run".into();
    }
    p.params
        .iter()
        .map(|(k, v)| {
            let k = match k {
                Param::Concurrency => "conc",
                Param::Isl => "isl",
                Param::Osl => "osl",
                Param::RequestCount => "n",
                Param::RequestRate => "rate",
            };
            format!("{k} {}", num(*v))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The Pareto series of one sweep: one, or one per shape (`<name> isl 1024 / osl 8192`) when the
/// sweep varies the input or output length. `y` is the chart's y key.
fn series(name: &str, idx: &SweepIndex, y: &str) -> Vec<ParetoSeries> {
    let half = |p: &PointEntry, k: &str| {
        p.aggregate
            .get(k)
            .filter(|i| i.n > 1)
            .map(|i| i.half_width())
    };
    let shapes = shapes(idx);
    shapes
        .iter()
        .map(|&sh| {
            let name = match sh {
                _ if shapes.len() < 2 => name.to_string(),
                (Some(i), Some(o)) => format!("{name} isl {i} / osl {o}"),
                (Some(i), None) => format!("{name} isl {i}"),
                (None, Some(o)) => format!("{name} osl {o}"),
                (None, None) => name.to_string(),
            };
            ParetoSeries {
                name,
                points: plotted(idx, y)
                    .into_iter()
                    .filter(|(p, ..)| shape(p) == sh)
                    .map(|(p, x, yv)| ParetoPoint {
                        label: point_label(p),
                        x,
                        y: yv,
                        x_err: half(p, "interactivity"),
                        y_err: half(p, y),
                    })
                    .collect(),
            }
        })
        .collect()
}

fn y_label(idx: &SweepIndex) -> String {
    match idx.gpus {
        Some(g) => format!("Total token throughput per GPU (tok/s/GPU, {g} GPUs)"),
        None => "Total token throughput (tok/s; pass --gpus N for per GPU)".into(),
    }
}

const X_LABEL: &str = "Interactivity (tok/s/user = 1000 / median TPOT)";

/// Writes `sweep.csv`, `pareto.svg`, `sweep.html` and, after a search, `search_history.json`.
pub(crate) fn write(dir: &Path, idx: &SweepIndex) -> std::io::Result<()> {
    let put =
        |name: &str, text: &str| crate::fsutil::write_atomic(&dir.join(name), text.as_bytes());
    put("sweep.csv", &csv(idx))?;
    let name = dir
        .file_name()
        .map_or("sweep".into(), |n| n.to_string_lossy().into_owned());
    let svg = pareto_svg(
        "pareto",
        &format!("Throughput against interactivity: {name}"),
        X_LABEL,
        &y_label(idx),
        &series(&name, idx, y_key(idx)),
    );
    put("pareto.svg", &svg)?;
    let (head, rows, front) = table(idx);
    let mut notes = vec![
        format!("Status: {}; command: {}", idx.status, idx.command),
        UNITS.to_string(),
    ];
    if let Some(s) = &idx.search {
        notes.push(console(idx).lines().last().unwrap_or_default().to_string());
        let text = serde_json::to_string_pretty(s).map_err(std::io::Error::other)? + "\n";
        put("search_history.json", &text)?;
    }
    let mut charts = vec![("pareto".to_string(), svg)];
    if has_energy(idx) {
        // Beside the Pareto chart: what each point costs in GPU energy, lower is better.
        let svg = pareto_svg_toward(
            "energy",
            &format!("Energy per output token against interactivity: {name}"),
            X_LABEL,
            "GPU energy per output token (J, over each run's window)",
            &series(&name, idx, ENERGY_KEY),
            YGoal::Lower,
        );
        put("energy.svg", &svg)?;
        charts.push(("energy".to_string(), svg));
    }
    let html = sweep_html(
        &format!("specperf sweep: {name}"),
        &notes,
        &head,
        &rows,
        &front,
        &charts,
    );
    put("sweep.html", &html)
}

/// Why an overlay could not be made.
#[derive(Debug, thiserror::Error)]
pub enum OverlayError {
    /// A directory holds no readable sweep.
    #[error(transparent)]
    Index(#[from] super::journal::IndexError),
    /// The output could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
}

/// `specperf plot DIR...` over sweep directories: every sweep's points and frontier on one
/// Pareto chart (`<out>/pareto.svg`) and `<out>/sweeps.html` with each sweep's table. Returns
/// the page's path.
pub fn overlay(dirs: &[PathBuf], out: &Path) -> Result<PathBuf, OverlayError> {
    let mut all = Vec::new();
    for d in dirs {
        let idx = SweepIndex::read(d)?;
        let name = d
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| d.display().to_string());
        all.push((name, idx));
    }
    let per_gpu = all.iter().all(|(_, i)| i.gpus.is_some());
    let y = if per_gpu {
        "Total token throughput per GPU (tok/s/GPU)".to_string()
    } else {
        "Total token throughput (tok/s)".to_string()
    };
    let series: Vec<ParetoSeries> = all
        .iter()
        .flat_map(|(n, i)| {
            let mut i = i.clone();
            if !per_gpu {
                i.gpus = None;
            }
            let y = y_key(&i);
            series(n, &i, y)
        })
        .collect();
    let svg = pareto_svg(
        "pareto_overlay",
        "Throughput against interactivity",
        X_LABEL,
        &y,
        &series,
    );
    let write = |name: &str, text: &str| {
        let path = out.join(name);
        crate::fsutil::ensure_writable_dir(out)
            .and_then(|_| crate::fsutil::write_atomic(&path, text.as_bytes()))
            .map_err(|source| OverlayError::Write {
                path: path.display().to_string(),
                source,
            })
    };
    write("pareto.svg", &svg)?;
    let mut head = vec!["sweep".to_string()];
    let mut rows = Vec::new();
    let mut front = Vec::new();
    for (n, i) in &all {
        let (h, r, f) = table(i);
        if head.len() == 1 {
            head.extend(h);
        }
        for (row, on) in r.into_iter().zip(f) {
            let mut cells = vec![n.clone()];
            cells.extend(row);
            cells.truncate(head.len());
            rows.push(cells);
            front.push(on);
        }
    }
    let notes = vec![
        format!(
            "{} sweeps: {}",
            all.len(),
            all.iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        UNITS.to_string(),
    ];
    let html = sweep_html(
        "specperf sweeps compared",
        &notes,
        &head,
        &rows,
        &front,
        &[("pareto".to_string(), svg)],
    );
    write("sweeps.html", &html)?;
    Ok(out.join("sweeps.html"))
}
