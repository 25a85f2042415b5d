//! `sweep.json`: the sweep's index, rewritten atomically after every run, so that whatever stops
//! the sweep (a signal, a crash, a failed point) leaves every finished point on record, and
//! `--resume` knows which points to skip. The table, the CSV, the Pareto page and `specperf plot`
//! over several sweeps are all made from it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::journal::{IndexError, IndexStatus, ItemStatus};
use super::plan::{Param, Point};
use super::search::Search;
use super::stats::{Check as Convergence, Interval};
use super::values::{Objective, Values, Verdict};
use crate::scrape::DrainOutcome;
use crate::stop::StopReason;

/// `schema` of `sweep.json`.
pub const SWEEP_SCHEMA: &str = "specperf.sweep.v1";

/// A point's state.
pub type PointStatus = ItemStatus;

/// One run of a point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunEntry {
    /// 1-based.
    pub run: u32,
    /// Its artifact directory, relative to the sweep directory.
    pub dir: PathBuf,
    /// What `replay` would have exited with.
    pub exit_code: i32,
    /// Why it stopped early, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<StopReason>,
    /// Its numbers.
    pub values: Values,
    /// The InferenceX raw JSON written for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_file: Option<PathBuf>,
}

/// One point of the sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointEntry {
    /// `concurrency_8`.
    pub name: String,
    /// Its parameter values.
    pub params: BTreeMap<Param, f64>,
    /// Where it stands.
    pub status: PointStatus,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The wait for the servers to drain before it (absent for the first point and with
    /// `--no-drain`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_before: Option<DrainOutcome>,
    /// It started while the servers still had requests queued or running (the drain wait timed
    /// out), so its numbers include the previous point's backlog.
    #[serde(default)]
    pub started_undrained: bool,
    /// Its runs.
    pub runs: Vec<RunEntry>,
    /// Mean and confidence interval of every value over the runs.
    pub aggregate: BTreeMap<String, Interval>,
    /// The convergence test after the last run (with `--convergence-metric`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub convergence: Option<Convergence>,
    /// The SLA objectives judged on the point (with a search).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sla: Option<Verdict>,
}

impl PointEntry {
    /// The entry of point `p` as it starts: `stopped` until it ends otherwise (a crash leaves
    /// it so, and `--resume` runs it again).
    pub(crate) fn starting(p: &Point) -> PointEntry {
        PointEntry {
            name: p.name(),
            params: p.0.clone(),
            status: PointStatus::Stopped,
            error: None,
            drain_before: None,
            started_undrained: false,
            runs: Vec::new(),
            aggregate: BTreeMap::new(),
            convergence: None,
            sla: None,
        }
    }

    /// The point's parameters as a [`Point`].
    pub fn point(&self) -> Point {
        Point(self.params.clone())
    }

    /// The mean over the runs of `key`.
    pub fn mean(&self, key: &str) -> Option<f64> {
        self.aggregate.get(key).map(|i| i.mean)
    }
}

/// The search, as `sweep.json` records it (also written alone as `search_history.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchEntry {
    /// AIPerf's recipe name.
    pub recipe: String,
    /// `concurrency` or `request_rate`.
    pub parameter: Param,
    /// The objectives.
    pub objectives: Vec<Objective>,
    /// Probes and bracket.
    pub state: Search,
    /// The answer: the largest load that met the objectives.
    pub best: Option<f64>,
    /// The smallest load that failed them.
    pub first_failure: Option<f64>,
}

/// `sweep.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepIndex {
    /// [`SWEEP_SCHEMA`].
    pub schema: String,
    /// The binary that wrote it.
    pub specperf_version: String,
    /// The command line.
    pub command: String,
    /// `grid`, `zip`, `search` or `pareto-sweep`.
    pub sweep_type: String,
    /// The parameters varied.
    pub parameters: Vec<Param>,
    /// Runs per point (the maximum with convergence).
    pub num_profile_runs: u32,
    /// Confidence level of the intervals.
    pub confidence_level: f64,
    /// `TAG[_stat]` and mode, when repeated runs stop on convergence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub convergence_metric: Option<String>,
    /// GPUs behind the server (`--gpus`), for the per-GPU throughput.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u32>,
    /// `running` while the sweep goes on, then `complete`, `stopped` (a signal) or
    /// `partial` (a point failed).
    pub status: IndexStatus,
    /// Why it stopped, when a signal stopped it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<StopReason>,
    /// The points, in the order they ran.
    pub points: Vec<PointEntry>,
    /// The search, when one ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchEntry>,
    /// Names of the points on the Pareto frontier (throughput per GPU against interactivity).
    #[serde(default)]
    pub pareto_optimal: Vec<String>,
}

super::journal::journal_index!(
    SweepIndex,
    "sweep.json",
    SWEEP_SCHEMA,
    "an earlier sweep",
    points: PointEntry
);

impl SweepIndex {
    /// Reads `<dir>/sweep.json`.
    pub fn read(dir: &Path) -> Result<SweepIndex, IndexError> {
        super::journal::read(dir)
    }
}
