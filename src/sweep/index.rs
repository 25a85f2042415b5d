//! `sweep.json`: the sweep's index, rewritten atomically after every run, so that whatever stops
//! the sweep (a signal, a crash, a failed point) leaves every finished point on record, and
//! `--resume` knows which points to skip. The table, the CSV, the Pareto page and `specperf plot`
//! over several sweeps are all made from it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::plan::{Param, Point};
use super::search::Search;
use super::stats::{Check as Convergence, Interval};
use super::values::{Objective, Values, Verdict};
use crate::scrape::DrainOutcome;
use crate::stop::StopReason;

/// `schema` of `sweep.json`.
pub const SWEEP_SCHEMA: &str = "specperf.sweep.v1";

/// The state of one item of a multi-run index: a point of `sweep.json`, a cell of `cells.json`
/// (the schemas' `status` enums).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemStatus {
    /// Every run made (or convergence reached; a cell: with its server up to the end);
    /// skipped by `--resume`.
    Done,
    /// A run could not start, or a cell's server failed to start or died (the error says why);
    /// the others went on.
    Failed,
    /// Stopped by a signal before its runs were made (or still running: a crash leaves it so);
    /// `--resume` runs it again.
    Stopped,
}

/// A point's state.
pub type PointStatus = ItemStatus;

/// The state of a multi-run index as a whole (`status` of `sweep.json` and `cells.json`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IndexStatus {
    /// Still going (or the process died: a crash leaves it so).
    Running,
    /// Every item done.
    Complete,
    /// Ended, with an item failed.
    Partial,
    /// Stopped by a signal.
    Stopped,
}

impl IndexStatus {
    /// The name in the index file.
    pub fn as_str(self) -> &'static str {
        match self {
            IndexStatus::Running => "running",
            IndexStatus::Complete => "complete",
            IndexStatus::Partial => "partial",
            IndexStatus::Stopped => "stopped",
        }
    }

    /// How an index ended: `stopped` by a signal, else `partial` when `all_done` is false.
    pub(crate) fn ended(stopped: bool, all_done: bool) -> IndexStatus {
        match (stopped, all_done) {
            (true, _) => IndexStatus::Stopped,
            (false, false) => IndexStatus::Partial,
            (false, true) => IndexStatus::Complete,
        }
    }
}

impl std::fmt::Display for IndexStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for IndexStatus {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

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

/// Why `sweep.json` could not be read.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// Missing or unreadable.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// Not a sweep index this binary reads.
    #[error("{path} is not a specperf sweep index ({reason})")]
    Parse {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

impl SweepIndex {
    /// Reads `<dir>/sweep.json`.
    pub fn read(dir: &Path) -> Result<SweepIndex, IndexError> {
        let path = dir.join("sweep.json");
        let text = std::fs::read_to_string(&path).map_err(|source| IndexError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let idx: SweepIndex = serde_json::from_str(&text).map_err(|e| IndexError::Parse {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        if idx.schema != SWEEP_SCHEMA {
            return Err(IndexError::Parse {
                path: path.display().to_string(),
                reason: format!("schema {:?}, expected {SWEEP_SCHEMA:?}", idx.schema),
            });
        }
        Ok(idx)
    }

    /// Writes `<dir>/sweep.json` atomically.
    pub(crate) fn write(&self, dir: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)? + "\n";
        crate::fsutil::write_atomic(&dir.join("sweep.json"), text.as_bytes())
    }

    /// The finished entry of the point named `name`, if any.
    pub fn done(&self, name: &str) -> Option<&PointEntry> {
        self.points
            .iter()
            .find(|p| p.name == name && p.status == PointStatus::Done)
    }

    /// Replaces the entry named like `p`, or appends it.
    pub(crate) fn upsert(&mut self, p: PointEntry) {
        match self.points.iter_mut().find(|e| e.name == p.name) {
            Some(e) => *e = p,
            None => self.points.push(p),
        }
    }
}
