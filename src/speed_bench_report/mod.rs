//! `specperf speed-bench-report`: finished runs -> the SPEED-Bench matrix (model × category) of
//! acceptance length, acceptance rate or throughput, with AIPerf 0.13's `aiperf
//! speed-bench-report` behaviour (same runs found, same columns, byte-identical CSV), and with
//! `--baseline`, the speedup of each cell over runs without speculative decoding.
//!
//! Its place: after the pipeline, beside `merge` and `plot`. It reads only what runs left on
//! disk (`profile_export_aiperf.json`, `server_metrics_export.json`, specperf's `summary.json`,
//! a sweep's `sweep.json`), draws with `report`'s SVG helpers, and nothing imports it.
//!
//! Decisions where AIPerf has nothing to copy:
//! * a specperf run over several categories at once (dataset format `speed_bench_qualitative`,
//!   which AIPerf files as one `qualitative` column) gives one column per group of its
//!   `summary.json` instead: the group's token-weighted AL (the counters' definition, so it
//!   matches a per-category run), its acceptance rate as a fraction; its throughput per group is
//!   not defined (the groups' requests shared the server) and stays empty, with a note;
//! * warnings and progress go to the caller as [`Note`]s; the library prints nothing.
//!
//! Files: `runs` (one run directory's figures), `table` (columns, cells, CSV, the plain table),
//! `speedup` (spec × baseline cells, their tables, CSV and chart).

mod runs;
mod speedup;
mod table;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::cli::{SpeedBenchFormat, SpeedBenchMetric, SpeedBenchReportArgs};
use table::Matrix;

/// Something to tell the user while the report is assembled, in the order it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Note {
    /// How many run directories were found (AIPerf's first line).
    Found(usize),
    /// A run or path left out or partly read, and why (stderr).
    Warning(String),
}

/// A file the report wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// What it is: `CSV` (the matrix, AIPerf's word), `Speedup CSV`, `Speedup plot`.
    pub what: &'static str,
    /// Where.
    pub path: PathBuf,
}

/// What the report produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportOutcome {
    /// The tables to print (empty with `--format csv`).
    pub tables: String,
    /// The files written, matrix CSV first.
    pub written: Vec<Written>,
}

/// Why no report could be made.
#[derive(Debug, thiserror::Error)]
pub enum MatrixError {
    /// No path held a run directory.
    #[error(
        "no aiperf run directories found in {paths}: pass run directories (each holds \
         profile_export_aiperf.json, as `replay --artifact-dir` writes) or the directories \
         above them"
    )]
    NoRunDirs {
        /// The paths given, comma-separated.
        paths: String,
    },
    /// Runs were found but none gave a value of the metric.
    #[error(
        "no SPEED-Bench results extracted for --metric {metric} from {runs} run directories: \
         each needs a SPEED-Bench dataset format (speed_bench_<category> or spec_al_<name>) in \
         its input_config{needs} (the warnings above name each run's problem)"
    )]
    NoResults {
        /// The metric asked for.
        metric: &'static str,
        /// Run directories read.
        runs: usize,
        /// What else the metric needs.
        needs: &'static str,
    },
    /// A report file could not be written.
    #[error("cannot write {path}: {source} (pass --output in a writable directory)")]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// `--baseline` held no run directory.
    #[error(
        "--baseline {path} holds no run directory (profile_export_aiperf.json) and no sweep \
         (sweep.json): pass the baseline's run directory, the directory above its runs, or its \
         sweep directory"
    )]
    NoBaseline {
        /// The baseline path.
        path: PathBuf,
    },
}

impl SpeedBenchMetric {
    /// Its flag value (`accept_length`).
    fn name(self) -> &'static str {
        match self {
            SpeedBenchMetric::AcceptLength => "accept_length",
            SpeedBenchMetric::AcceptRate => "accept_rate",
            SpeedBenchMetric::Throughput => "throughput",
        }
    }

    /// The title line of its table.
    fn title(self) -> &'static str {
        match self {
            SpeedBenchMetric::AcceptLength => "Acceptance Length Report",
            SpeedBenchMetric::AcceptRate => "Acceptance Rate Report",
            SpeedBenchMetric::Throughput => "Throughput Report (tokens/sec)",
        }
    }
}

/// Builds the report for `args`: finds the runs, reads the metric per run, writes the CSV (and,
/// with `--baseline`, the speedup CSV and chart beside it), returns the tables to print.
/// Warnings and the run count go to `note` as they happen.
pub fn speed_bench_report(
    args: &SpeedBenchReportArgs,
    note: &mut dyn FnMut(Note),
) -> Result<ReportOutcome, MatrixError> {
    let mut warn = |w: String| note(Note::Warning(w));
    let paths: Vec<PathBuf> = args.paths.iter().map(|p| runs::pathlib(p)).collect();
    let output = runs::pathlib(&args.output);
    let dirs = runs::find_run_dirs(&paths, &mut warn);
    if dirs.is_empty() {
        return Err(MatrixError::NoRunDirs {
            paths: paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    note(Note::Found(dirs.len()));
    let mut warn = |w: String| note(Note::Warning(w));
    let mut m = matrix(&dirs, args.metric, &mut warn);
    drop_nan(&mut m);
    if !m.values().flat_map(|r| r.values()).any(Option::is_some) {
        return Err(MatrixError::NoResults {
            metric: args.metric.name(),
            runs: dirs.len(),
            needs: match args.metric {
                SpeedBenchMetric::Throughput => {
                    " and output_token_throughput in its profile; a run over several \
                     categories has none per category"
                }
                _ => {
                    " and speculative-decoding counters in server_metrics_export.json (or, for \
                     a specperf run over several categories, per-request figures in \
                     summary.json)"
                }
            },
        });
    }
    // The baseline is read before anything is written, so a bad --baseline leaves no files.
    let speedups = match args.baseline.as_deref().map(runs::pathlib) {
        Some(base) => {
            let spec = speedup::cells(&paths, &mut warn);
            let base_cells = speedup::cells(std::slice::from_ref(&base), &mut warn);
            if base_cells.is_empty() {
                return Err(MatrixError::NoBaseline { path: base });
            }
            let cells = speedup::matched(spec, base_cells, &mut warn);
            if cells.is_empty() {
                warn(format!(
                    "no speculative run matches a run of --baseline {} (model, category and \
                     concurrency must agree): no speedup written",
                    base.display()
                ));
            }
            cells
        }
        None => Vec::new(),
    };
    let columns = table::columns(&m);
    let (show, save) = match args.format {
        SpeedBenchFormat::Csv => (false, true),
        SpeedBenchFormat::Table => (true, false),
        SpeedBenchFormat::Both => (true, true),
    };
    let mut out = ReportOutcome {
        tables: String::new(),
        written: Vec::new(),
    };
    if show {
        out.tables = table::matrix_table(&m, &columns, args.metric.title());
    }
    if save {
        write(&output, &table::matrix_csv(&m, &columns))?;
        out.written.push(Written {
            what: "CSV",
            path: output.clone(),
        });
    }
    if speedups.is_empty() {
        return Ok(out);
    }
    if show {
        out.tables.push('\n');
        out.tables.push_str(&speedup::tables(&speedups));
    }
    if save {
        let path = output.with_file_name("speed_bench_speedup.csv");
        write(&path, &speedup::csv(&speedups))?;
        out.written.push(Written {
            what: "Speedup CSV",
            path,
        });
    }
    let path = output.with_file_name("speed_bench_speedup.svg");
    write(&path, &speedup::chart(&speedups))?;
    out.written.push(Written {
        what: "Speedup plot",
        path,
    });
    Ok(out)
}

/// Model -> category -> value of `metric` over the run directories; a run that cannot be
/// placed is warned about and left out, a later run of the same cell replaces an earlier one
/// (named in a warning).
fn matrix(dirs: &[PathBuf], metric: SpeedBenchMetric, warn: &mut dyn FnMut(String)) -> Matrix {
    let mut m = Matrix::new();
    let mut throughput_noted = false;
    // Which run filled each cell, to name a run that replaces another.
    let mut origin: BTreeMap<(String, String), &Path> = BTreeMap::new();
    for dir in dirs {
        let Some(profile) = runs::profile(dir, warn).filter(|p| !is_empty(p)) else {
            warn(format!(
                "no {} in {}, skipping",
                runs::PROFILE_JSON,
                dir.display()
            ));
            continue;
        };
        let Some(category) = runs::category(&profile).filter(|c| !c.is_empty()) else {
            warn(format!(
                "cannot determine category from {}, skipping",
                dir.display()
            ));
            continue;
        };
        let model = runs::model(&profile);
        let mut groups = if category == runs::MIXED_CATEGORY {
            runs::groups(dir).unwrap_or_default()
        } else {
            Default::default()
        };
        if !groups.is_empty() && groups.values().all(|g| g.accept_length.is_none()) {
            warn(format!(
                "{} ran several categories at once, but its responses reported no acceptance per \
                 request (vLLM: --per-request-spec-decode-metrics summary), so it is read as one \
                 `{}` column from the server's counters",
                dir.display(),
                runs::MIXED_CATEGORY
            ));
            groups.clear();
        }
        let mut cells: Vec<(String, Option<f64>)> = Vec::new();
        if !groups.is_empty() {
            if metric == SpeedBenchMetric::Throughput && !throughput_noted {
                throughput_noted = true;
                warn(format!(
                    "{} ran several categories at once: their requests shared the server, so \
                     no output throughput belongs to one category and its columns stay empty \
                     (one replay per category, --category C, gives a throughput matrix)",
                    dir.display()
                ));
            }
            for (g, a) in groups {
                let v = match metric {
                    SpeedBenchMetric::AcceptLength => a.accept_length,
                    SpeedBenchMetric::AcceptRate => a.accept_rate,
                    SpeedBenchMetric::Throughput => None,
                };
                cells.push((g, v));
            }
        } else {
            let v = match metric {
                SpeedBenchMetric::Throughput => runs::throughput(&profile),
                acceptance => match runs::ServerMetrics::read(dir, warn) {
                    Some(sm) if acceptance == SpeedBenchMetric::AcceptLength => sm.accept_length(),
                    Some(sm) => sm.accept_rate(),
                    None => {
                        warn(format!(
                            "no {} in {}",
                            runs::SERVER_METRICS_JSON,
                            dir.display()
                        ));
                        None
                    }
                },
            };
            cells.push((category, v));
        }
        let row = m.entry(model.clone()).or_default();
        for (category, v) in cells {
            if let Some(earlier) = origin.insert((model.clone(), category.clone()), dir) {
                warn(format!(
                    "{} and {} are both model {model}, category {category}: the later one is \
                     kept, as in AIPerf (pass one run per cell, e.g. one sweep point)",
                    earlier.display(),
                    dir.display()
                ));
            }
            row.insert(category, v);
        }
    }
    m
}

/// A NaN cell is a missing value (no `nan` in a cell, no NaN in an `Overall` mean).
fn drop_nan(m: &mut Matrix) {
    for v in m.values_mut().flat_map(|r| r.values_mut()) {
        if v.is_some_and(f64::is_nan) {
            *v = None;
        }
    }
}

/// An empty profile (`{}`, `null`) counts as none, as in AIPerf.
fn is_empty(v: &serde_json::Value) -> bool {
    v.is_null() || v.as_object().is_some_and(|o| o.is_empty())
}

fn write(path: &Path, text: &str) -> Result<(), MatrixError> {
    std::fs::write(path, text).map_err(|source| MatrixError::Write {
        path: path.to_path_buf(),
        source,
    })
}
