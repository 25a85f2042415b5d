//! What speculative decoding bought: the speculative runs beside baseline runs of the same
//! prompts without it, cell by cell (model × category × concurrency), as output-throughput and
//! TPOT speedups: two tables, `speed_bench_speedup.csv` and a chart of speedup against
//! concurrency with one line per ISL split.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::runs;
use super::table;
use crate::report::svg::{self, Bars, Chart, HLine, Series};
use crate::sweep::{Param, SweepIndex};

/// One cell's key: model, category (AIPerf's, so a run over several categories is one
/// `qualitative` cell), concurrency.
type Key = (String, String, Option<u64>);

/// What the runs of one cell measured, averaged over its runs (a sweep's repeated runs).
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Cell {
    /// The run directories averaged.
    pub(super) dirs: Vec<PathBuf>,
    /// Output tokens/s.
    pub(super) throughput: Option<f64>,
    /// Mean time per output token, ms.
    pub(super) tpot_ms: Option<f64>,
}

/// One matched cell.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Speedup {
    pub(super) model: String,
    pub(super) category: String,
    pub(super) concurrency: Option<u64>,
    pub(super) spec: Cell,
    pub(super) base: Cell,
}

impl Speedup {
    /// Speculative output throughput over the baseline's.
    pub(super) fn throughput(&self) -> Option<f64> {
        ratio(self.spec.throughput, self.base.throughput)
    }
    /// Baseline TPOT over the speculative TPOT (above 1: tokens come faster).
    pub(super) fn tpot(&self) -> Option<f64> {
        ratio(self.base.tpot_ms, self.spec.tpot_ms)
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    let r = a? / b?;
    r.is_finite().then_some(r)
}

/// The ISL split a category belongs to: `throughput_8k` for `throughput_8k_mixed` (the
/// throughput split's categories are an ISL bucket and an entropy tier), else the category.
pub(super) fn split(category: &str) -> &str {
    if category.starts_with("throughput_") {
        for tier in ["_low_entropy", "_high_entropy", "_mixed"] {
            if let Some(s) = category.strip_suffix(tier) {
                return s;
            }
        }
    }
    category
}

/// The run directories under `path` with the concurrency their sweep gave them, if any: a
/// sweep directory (`sweep.json`) gives every run of every point, a run directory itself, any
/// other directory its subdirectories that are sweeps or runs (one sweep per category).
fn runs_under(path: &Path, warn: &mut dyn FnMut(String)) -> Vec<(PathBuf, Option<u64>)> {
    if let Some(runs) = sweep_runs(path, warn) {
        return runs;
    }
    if !path.is_dir() || path.join(runs::PROFILE_JSON).exists() {
        return runs::find_run_dirs(&[path.to_path_buf()], warn)
            .into_iter()
            .map(|d| (d, None))
            .collect();
    }
    let mut children: Vec<PathBuf> = std::fs::read_dir(path)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    children.sort();
    let mut out = Vec::new();
    for c in children.iter().filter(|c| c.is_dir()) {
        match sweep_runs(c, warn) {
            Some(runs) => out.extend(runs),
            None if c.join(runs::PROFILE_JSON).exists() => out.push((c.clone(), None)),
            None => {}
        }
    }
    out
}

/// Every run of the sweep in `dir` with its point's concurrency; `None` when `dir` holds no
/// readable `sweep.json` (an unreadable one is warned about).
fn sweep_runs(dir: &Path, warn: &mut dyn FnMut(String)) -> Option<Vec<(PathBuf, Option<u64>)>> {
    if !dir.join("sweep.json").is_file() {
        return None;
    }
    let idx = SweepIndex::read(dir)
        .map_err(|e| warn(format!("{e}; reading {} as run directories", dir.display())))
        .ok()?;
    Some(
        idx.points
            .iter()
            .flat_map(|p| {
                let c = p.params.get(&Param::Concurrency).map(|c| c.round() as u64);
                p.runs.iter().map(move |r| (dir.join(&r.dir), c))
            })
            .filter(|(d, _)| d.join(runs::PROFILE_JSON).is_file())
            .collect(),
    )
}

/// Every cell the runs under `paths` measure; a run without a category is warned about and
/// left out.
pub(super) fn cells(paths: &[PathBuf], warn: &mut dyn FnMut(String)) -> BTreeMap<Key, Cell> {
    let mut sums: BTreeMap<Key, (Cell, Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for path in paths {
        for (dir, sweep_c) in runs_under(path, warn) {
            let Some(p) = runs::profile(&dir, warn) else {
                continue;
            };
            let Some(category) = runs::category(&p).filter(|c| !c.is_empty()) else {
                warn(format!(
                    "cannot determine category from {}, left out of the speedup",
                    dir.display()
                ));
                continue;
            };
            let key = (runs::model(&p), category, runs::concurrency(&p).or(sweep_c));
            let e = sums.entry(key).or_default();
            e.0.dirs.push(dir);
            e.1.extend(runs::throughput(&p));
            e.2.extend(runs::tpot_ms(&p));
        }
    }
    sums.into_iter()
        .map(|(k, (mut c, t, p))| {
            c.throughput = table::mean(&t);
            c.tpot_ms = table::mean(&p);
            (k, c)
        })
        .collect()
}

/// The speculative cells beside the baseline's; every cell on one side only is named in a
/// warning.
pub(super) fn matched(
    spec: BTreeMap<Key, Cell>,
    mut base: BTreeMap<Key, Cell>,
    warn: &mut dyn FnMut(String),
) -> Vec<Speedup> {
    let name = |(m, c, n): &Key| match n {
        Some(n) => format!("model {m}, category {c}, concurrency {n}"),
        None => format!("model {m}, category {c}"),
    };
    let mut out = Vec::new();
    for (key, s) in spec {
        match base.remove(&key) {
            Some(b) => out.push(Speedup {
                model: key.0,
                category: key.1,
                concurrency: key.2,
                spec: s,
                base: b,
            }),
            None => warn(format!(
                "no baseline run for {} ({}): left out of the speedup; run the baseline with the \
                 same model, category and concurrency",
                name(&key),
                dirs(&s.dirs)
            )),
        }
    }
    for (key, b) in base {
        warn(format!(
            "baseline run for {} ({}) matches no speculative run: left out of the speedup",
            name(&key),
            dirs(&b.dirs)
        ));
    }
    out
}

fn dirs(d: &[PathBuf]) -> String {
    d.iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// One table row's cells by category.
type CategoryCells<'a> = BTreeMap<&'a str, Option<f64>>;

fn concurrency_text(c: Option<u64>) -> String {
    c.map_or_else(String::new, |c| c.to_string())
}

/// `speed_bench_speedup.csv`: one line per matched cell with both sides' figures and the two
/// speedups (empty where a side lacks the figure).
pub(super) fn csv(cells: &[Speedup]) -> String {
    let f = |v: Option<f64>, d: usize| v.map_or_else(String::new, |v| format!("{v:.d$}"));
    let mut rows = vec![[
        "model",
        "category",
        "split",
        "concurrency",
        "spec_output_token_throughput",
        "baseline_output_token_throughput",
        "output_throughput_speedup",
        "spec_tpot_ms",
        "baseline_tpot_ms",
        "tpot_speedup",
    ]
    .map(str::to_owned)
    .to_vec()];
    for s in cells {
        rows.push(vec![
            s.model.clone(),
            s.category.clone(),
            split(&s.category).to_owned(),
            concurrency_text(s.concurrency),
            f(s.spec.throughput, 2),
            f(s.base.throughput, 2),
            f(s.throughput(), 3),
            f(s.spec.tpot_ms, 4),
            f(s.base.tpot_ms, 4),
            f(s.tpot(), 3),
        ]);
    }
    table::csv(&rows)
}

/// One table per speedup: a row per model and concurrency, a column per category.
pub(super) fn tables(cells: &[Speedup]) -> String {
    let mut categories: Vec<&str> = cells.iter().map(|c| c.category.as_str()).collect();
    categories.sort_unstable();
    categories.dedup();
    let mut header = vec!["Model".to_owned(), "Concurrency".to_owned()];
    header.extend(categories.iter().map(|c| (*c).to_owned()));
    let mut out = String::new();
    for (title, get) in [
        (
            "Output-throughput speedup (speculative / baseline)",
            Speedup::throughput as fn(&Speedup) -> Option<f64>,
        ),
        ("TPOT speedup (baseline / speculative)", Speedup::tpot),
    ] {
        let mut rows: BTreeMap<(&str, Option<u64>), CategoryCells<'_>> = BTreeMap::new();
        for c in cells {
            rows.entry((&c.model, c.concurrency))
                .or_default()
                .insert(&c.category, get(c));
        }
        let rows: Vec<Vec<String>> = rows
            .into_iter()
            .map(|((m, n), vals)| {
                let mut r = vec![m.to_owned(), concurrency_text(n)];
                r.extend(
                    categories
                        .iter()
                        .map(|c| table::cell(vals.get(c).copied().flatten(), "-")),
                );
                r
            })
            .collect();
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&table::plain_table(title, &header, &rows));
    }
    out
}

/// The chart: output-throughput speedup against concurrency, one line per ISL split (the mean
/// over the split's categories at each concurrency; per model when there are several), with
/// the no-gain line at 1. Runs at a single concurrency (or none known) have no line to draw:
/// then one bar per split.
pub(super) fn chart(cells: &[Speedup]) -> String {
    let models: BTreeSet<&str> = cells.iter().map(|c| c.model.as_str()).collect();
    let concurrencies: BTreeSet<Option<u64>> = cells.iter().map(|c| c.concurrency).collect();
    let mut c = Chart {
        id: "speed_bench_speedup",
        title: "Output-throughput speedup of speculative decoding over the baseline".into(),
        x_label: "concurrency".into(),
        y_label: "speedup (speculative / baseline)".into(),
        series: Vec::new(),
        bars: Vec::new(),
        x_categories: Vec::new(),
        hlines: vec![HLine {
            y: 1.0,
            label: "no speedup".into(),
            color: "#888888",
            dashed: true,
        }],
        band: None,
        y_range: None,
        x_from_zero: false,
        empty_note: "no matched cell has both throughputs: see speed_bench_speedup.csv".into(),
    };
    if concurrencies.len() <= 1 {
        let splits: BTreeSet<&str> = cells.iter().map(|c| split(&c.category)).collect();
        let width = 0.7 / models.len().max(1) as f64;
        for (j, m) in models.iter().enumerate() {
            let shift = (j as f64 + 0.5) * width - 0.35;
            let points = splits
                .iter()
                .enumerate()
                .filter_map(|(i, s)| {
                    let v: Vec<f64> = cells
                        .iter()
                        .filter(|c| c.model == *m && split(&c.category) == *s)
                        .filter_map(Speedup::throughput)
                        .collect();
                    table::mean(&v).map(|v| (i as f64 + shift, v))
                })
                .collect();
            c.bars.push(Bars {
                name: (*m).to_owned(),
                points,
                width,
                color: svg::PALETTE[j % svg::PALETTE.len()],
            });
        }
        c.x_categories = splits.into_iter().map(str::to_owned).collect();
        c.x_label = match concurrencies.into_iter().next().flatten() {
            Some(n) => format!("ISL split (concurrency {n})"),
            None => "ISL split".into(),
        };
        return svg::render(&c);
    }
    let mut lines: BTreeMap<String, BTreeMap<u64, Vec<f64>>> = BTreeMap::new();
    for cell in cells {
        let (Some(n), Some(s)) = (cell.concurrency, cell.throughput()) else {
            continue;
        };
        let name = if models.len() > 1 {
            format!("{} {}", cell.model, split(&cell.category))
        } else {
            split(&cell.category).to_owned()
        };
        lines.entry(name).or_default().entry(n).or_default().push(s);
    }
    c.series = lines
        .into_iter()
        .enumerate()
        .map(|(i, (name, pts))| Series {
            name,
            points: pts
                .into_iter()
                .filter_map(|(n, v)| table::mean(&v).map(|m| (n as f64, m)))
                .collect(),
            color: svg::PALETTE[i % svg::PALETTE.len()],
            step: false,
        })
        .collect();
    svg::render(&c)
}
