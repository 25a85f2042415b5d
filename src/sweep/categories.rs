//! `--category coding,math` or `--category all`: one SPEED-Bench run per category (or tier), one
//! after another in one process, each in `<artifact-dir>/category_<name>/` with the drain wait
//! between. Each run takes the counters' acceptance length over its own window, so a server
//! without per-request figures still gives the whole category matrix (AIPerf needs one process
//! per category and a YAML sweep for it); `specperf speed-bench-report <artifact-dir>` and
//! AIPerf's own `speed-bench-report` read the directories as per-category runs.

use std::path::{Path, PathBuf};

use tokio::sync::watch;

use crate::cli::ReplayArgs;
use crate::config::{ConfigError, RunConfig};
use crate::dataset::{DatasetKind, QUALITATIVE_CATEGORIES, THROUGHPUT_TIERS};
use crate::engine::{EngineError, RunOutcome};
use crate::progress::Progress;
use crate::scrape::{wait_for_drain, DrainOutcome, DrainPoll, DrainSettings};
use crate::stop::{StopReason, Stopper};

/// `--category` asks for several runs: a comma list or `all`.
pub fn categories_wanted(a: &ReplayArgs) -> bool {
    a.category
        .as_deref()
        .is_some_and(|c| c == "all" || c.contains(','))
}

/// The runs, validated before the first starts.
#[derive(Debug)]
pub struct CategoryPlan {
    /// The categories, in run order (AIPerf's column order for `all`).
    pub categories: Vec<String>,
    /// `--artifact-dir`: each run in `category_<name>/` under it.
    pub dir: PathBuf,
    configs: Vec<RunConfig>,
    drain: Option<DrainSettings>,
    /// Said once before the runs.
    pub warnings: Vec<String>,
}

impl CategoryPlan {
    /// One validated configuration per category. `all` reads the categories present in the
    /// collection; a listed category the file lacks is refused here, naming what it holds.
    pub fn from_replay(a: &ReplayArgs) -> Result<CategoryPlan, ConfigError> {
        let raw = a.category.as_deref().unwrap_or_default();
        if super::wanted(a) {
            return Err(ConfigError::msg(format!(
                "--category {raw:?} runs one category after another; a sweep (comma lists, \
                 --num-profile-runs, a search) runs many points: run one sweep per category \
                 (e.g. --custom-dataset-type speed_bench_throughput_8k_mixed)"
            )));
        }
        if a.custom_dataset_type
            .as_ref()
            .is_some_and(|t| t.kind != DatasetKind::SpeedBench)
        {
            return Err(ConfigError::msg(format!(
                "--category {raw:?} selects SPEED-Bench categories; --custom-dataset-type is \
                 another format (use --group-by FIELD for a per-group breakdown in one run)"
            )));
        }
        if a.custom_dataset_type
            .as_ref()
            .is_some_and(|t| t.aiperf.as_ref().is_some_and(|n| n.category.is_some()))
        {
            return Err(ConfigError::msg(format!(
                "--category {raw:?} and an AIPerf dataset name of one category: give the \
                 split's name (speed_bench_qualitative, speed_bench_throughput_8k) with the list"
            )));
        }
        let present = categories_present(a)?;
        let categories: Vec<String> = if raw == "all" {
            column_order(present.iter().cloned().collect())
        } else {
            let listed: Vec<String> = raw
                .split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
                .collect();
            let missing: Vec<&str> = listed
                .iter()
                .filter(|c| !present.contains(*c))
                .map(String::as_str)
                .collect();
            if !missing.is_empty() {
                return Err(ConfigError::msg(format!(
                    "--category: {} not in the collection (exact, case-sensitive); it holds: {}",
                    missing.join(", "),
                    column_order(present.iter().cloned().collect()).join(", ")
                )));
            }
            let mut seen = std::collections::HashSet::new();
            listed
                .into_iter()
                .filter(|c| seen.insert(c.clone()))
                .collect()
        };
        let dir = a
            .artifact_dir
            .clone()
            .unwrap_or_else(|| Path::new("artifacts").join("specperf-categories"));
        let mut configs = Vec::new();
        let mut warnings = Vec::new();
        for c in &categories {
            let mut ac = a.clone();
            ac.category = Some(c.clone());
            ac.artifact_dir = Some(dir.join(dir_name(c)));
            ac.result_filename = a.result_filename.as_ref().map(|r| format!("{r}_{c}"));
            let cfg = RunConfig::from_args(&ac)?;
            // Said once for all, not once per category.
            for w in &cfg.warnings {
                if !warnings.contains(w) {
                    warnings.push(w.clone());
                }
            }
            configs.push(cfg);
        }
        let drain = super::config::drain(
            &a.sweep,
            a.url.as_deref(),
            a.url_bound_later,
            &a.scrape.server_metrics,
        )?;
        Ok(CategoryPlan {
            categories,
            dir,
            configs,
            drain,
            warnings,
        })
    }

    /// Points every category's run and the drain wait at `url`: a `--serve-cmd` cell's
    /// server, once it is up (the plan was validated without one).
    pub fn bind(&mut self, url: &str) -> Result<(), ConfigError> {
        for c in &mut self.configs {
            c.bind(url)?;
        }
        super::config::bind_drain(&mut self.drain, url)
    }

    /// `--failed-request-threshold`, the same for every run.
    pub fn failed_request_threshold(&self) -> f64 {
        self.configs
            .first()
            .map_or(0.0, |c| c.failed_request_threshold)
    }

    /// The console's progress style and interval (the same for every run).
    pub fn progress(&self) -> (crate::cli::Ui, Option<std::time::Duration>) {
        self.configs
            .first()
            .map_or((crate::cli::Ui::Simple, None), |c| {
                (c.ui, c.progress_interval)
            })
    }

    /// Records `command` (the command line) in every run's artifacts.
    pub fn set_cli_command(&mut self, command: String) {
        for c in &mut self.configs {
            c.set_cli_command(command.clone());
        }
    }
}

/// The directory of one category's run.
fn dir_name(category: &str) -> String {
    format!("category_{}", crate::fsutil::safe_name(category))
}

/// The categories of the collection, read once with no filter.
fn categories_present(a: &ReplayArgs) -> Result<std::collections::BTreeSet<String>, ConfigError> {
    let mut probe = a.clone();
    probe.category = None;
    probe.group_by = None;
    let cfg = RunConfig::from_args(&probe)?;
    let samples = crate::engine::collection_samples(&cfg)
        .map_err(|e| ConfigError::msg(format!("--category: {e}")))?;
    Ok(samples.into_iter().filter_map(|s| s.group).collect())
}

/// AIPerf's column order: the Qualitative categories, else the tiers, each in their fixed
/// order; anything else sorted after them.
fn column_order(mut present: Vec<String>) -> Vec<String> {
    let rank = |c: &str| {
        QUALITATIVE_CATEGORIES
            .iter()
            .chain(THROUGHPUT_TIERS.iter())
            .position(|k| *k == c)
            .unwrap_or(usize::MAX)
    };
    present.sort_by(|x, y| rank(x).cmp(&rank(y)).then_with(|| x.cmp(y)));
    present
}

/// What the runs tell the caller as they go.
pub enum CategoryEvent<'a> {
    /// A category's run starts.
    Start {
        /// The category.
        category: &'a str,
        /// 1-based.
        index: usize,
        /// Categories in all.
        total: usize,
    },
    /// A poll of the drain wait before a run.
    DrainPoll(&'a DrainPoll),
    /// The drain wait ended.
    Drained(&'a DrainOutcome),
    /// A run ended.
    Done(&'a RunOutcome),
    /// A run could not start; the next category still runs.
    Failed {
        /// The category.
        category: &'a str,
        /// Why.
        error: &'a EngineError,
    },
    /// Worth a warning.
    Warning(String),
}

/// One category's result.
pub struct CategoryResult {
    /// The category.
    pub category: String,
    /// Its run, or why it could not start.
    pub outcome: Result<RunOutcome, EngineError>,
}

/// Every category's result, in run order.
pub struct CategoriesOutcome {
    /// The results (a signal leaves the rest out).
    pub results: Vec<CategoryResult>,
    /// Where they are.
    pub dir: PathBuf,
    /// Set when a signal stopped the runs.
    pub stopped_by: Option<StopReason>,
}

/// Runs each category in turn, the drain wait before every run but the first; a signal ends
/// the run in flight (its artifacts are written) and the rest are not started.
pub async fn run_categories(
    plan: CategoryPlan,
    stop: Stopper,
    progress: watch::Sender<Progress>,
    mut on_event: impl FnMut(CategoryEvent<'_>),
) -> CategoriesOutcome {
    let total = plan.categories.len();
    let mut results = Vec::new();
    for (i, (category, cfg)) in plan.categories.iter().zip(plan.configs).enumerate() {
        if stop.reason().is_some() {
            break;
        }
        if i > 0 {
            if let Some(settings) = &plan.drain {
                match wait_for_drain(settings, &stop, |p| on_event(CategoryEvent::DrainPoll(p)))
                    .await
                {
                    Ok(o) => on_event(CategoryEvent::Drained(&o)),
                    Err(e) => on_event(CategoryEvent::Warning(format!(
                        "drain wait before {category}: {e}"
                    ))),
                }
            }
        }
        on_event(CategoryEvent::Start {
            category,
            index: i + 1,
            total,
        });
        progress.send_replace(Progress::default());
        let outcome = crate::engine::replay(cfg, stop.child(), progress.clone()).await;
        match &outcome {
            Ok(o) => on_event(CategoryEvent::Done(o)),
            Err(error) => on_event(CategoryEvent::Failed { category, error }),
        }
        results.push(CategoryResult {
            category: category.clone(),
            outcome,
        });
    }
    CategoriesOutcome {
        results,
        dir: plan.dir,
        stopped_by: stop.reason(),
    }
}

impl CategoriesOutcome {
    /// The exit code: a signal's, else the worst run's (1 for a run that could not start).
    pub fn exit_code(&self, failed_threshold: f64) -> i32 {
        let worst = self
            .results
            .iter()
            .map(|r| match &r.outcome {
                Ok(o) => crate::exit::exit_code(o, failed_threshold),
                Err(_) => crate::exit::FAILED,
            })
            .max()
            .unwrap_or(crate::exit::OK);
        crate::exit::of_many(self.stopped_by, worst)
    }

    /// The console's matrix: a row per category with its requests, the counters' acceptance
    /// length and rate over its window, the mean of per-request AL where responses reported
    /// one, and output throughput.
    pub fn table(&self) -> String {
        let mut rows = vec![[
            "category".to_owned(),
            "requests".to_owned(),
            "AL (counters)".to_owned(),
            "accept rate".to_owned(),
            "AL (per request)".to_owned(),
            "output tok/s".to_owned(),
        ]];
        let f2 = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.2}"));
        for r in &self.results {
            let row = match &r.outcome {
                Ok(o) => {
                    let s = &o.summary;
                    let n = s.acceptance.as_ref().map(|a| &a.acceptance.numbers);
                    let per_request = s
                        .spec_decode
                        .as_ref()
                        .and_then(|d| d.reported.as_ref()?.mean_acceptance_length);
                    [
                        r.category.clone(),
                        format!("{}/{}", s.counts.success, s.counts.total),
                        f2(n.and_then(|n| n.acceptance_length)),
                        f2(n.and_then(|n| n.acceptance_rate)),
                        f2(per_request),
                        format!("{:.1}", s.output_token_throughput_tps),
                    ]
                }
                Err(_) => [
                    r.category.clone(),
                    "not run".to_owned(),
                    "-".to_owned(),
                    "-".to_owned(),
                    "-".to_owned(),
                    "-".to_owned(),
                ],
            };
            rows.push(row);
        }
        let widths: Vec<usize> = (0..6)
            .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
            .collect();
        let mut out = String::new();
        for r in &rows {
            let cells: Vec<String> = r
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    if i == 0 {
                        format!("{c:<w$}", w = widths[i])
                    } else {
                        format!("{c:>w$}", w = widths[i])
                    }
                })
                .collect();
            out.push_str(cells.join("  ").trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_runs_the_categories_in_aiperf_column_order_then_the_rest_sorted() {
        let got = column_order(
            [
                "writing",
                "zeta",
                "coding",
                "mixed",
                "alpha",
                "low_entropy",
                "math",
            ]
            .map(String::from)
            .to_vec(),
        );
        assert_eq!(
            got,
            [
                "coding",
                "math",
                "writing",
                "low_entropy",
                "mixed",
                "alpha",
                "zeta"
            ]
        );
        assert_eq!(dir_name("coding"), "category_coding");
    }
}
