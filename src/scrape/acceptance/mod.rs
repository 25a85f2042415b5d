//! Speculative-decoding counters -> acceptance length over a window.
//!
//! Pure functions: a parsed page becomes a [`Snapshot`] of the counters that matter (per engine
//! family, series keyed by name and sorted labels); two snapshots per endpoint become per-series
//! increases with Prometheus `increase()` reset semantics (never extrapolated); increases are
//! summed over every series of every endpoint first, then divided (`speculative-metrics.md` §1,
//! §3, §4). The formulas per engine are those of §2.7; validation is §5.

mod evaluate;
mod formula;
mod names;
mod snapshot;
#[cfg(test)]
mod tests;
mod trtllm_json;

use serde::{Deserialize, Serialize};

pub use evaluate::{evaluate, AcceptanceOptions, EndpointWindow};
pub use names::SpecEngine;
pub use snapshot::Snapshot;
pub use trtllm_json::{IterationTotals, IterationsError};

/// Status of an acceptance measurement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AcceptanceStatus {
    /// AL measured (see `partial`, `approximate` and `resets`).
    Ok,
    /// The counters did not move: no drafts in the window.
    NoData,
    /// The pages carry no speculative-decoding counters.
    NoCounters,
    /// The deltas break an invariant (`reason` says which).
    Invalid,
    /// No endpoint could be read at both ends of the window.
    Unavailable,
}

/// A counter reset seen in the window (treated as `increase()` does).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResetNote {
    /// The endpoint.
    pub endpoint: String,
    /// The series, e.g. `VllmDrafts{engine="1",model_name="m"}`.
    pub series: String,
    /// `decreased`, `created_changed`, `appeared`, `vanished` or `process_restarted`.
    pub kind: ResetKind,
}

/// Why a series' increase was taken as its new value rather than a difference.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResetKind {
    /// The counter went down.
    Decreased,
    /// The counter's `_created` timestamp changed (restarted and already past the old value).
    CreatedChanged,
    /// The series was not on the first page.
    Appeared,
    /// The series was on the first page but not on the last (not counted).
    Vanished,
    /// `process_start_time_seconds` changed: every counter restarted.
    ProcessRestarted,
}

impl ResetKind {
    /// The name as written in `summary.json` and the console warning.
    pub fn as_str(self) -> &'static str {
        match self {
            ResetKind::Decreased => "decreased",
            ResetKind::CreatedChanged => "created_changed",
            ResetKind::Appeared => "appeared",
            ResetKind::Vanished => "vanished",
            ResetKind::ProcessRestarted => "process_restarted",
        }
    }
}

impl std::fmt::Display for ResetKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where the k used for validation came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KSource {
    /// `--num-spec-tokens`.
    Flag,
    /// The number of draft positions the engine exports.
    Positions,
}

/// The numbers for one group of series (everything, one endpoint, or one engine).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Numbers {
    /// `1 + Δaccepted / Δdrafts`, or `None` with no drafts.
    pub acceptance_length: Option<f64>,
    /// `Δaccepted / Δdraft_tokens`, when draft tokens are known.
    pub acceptance_rate: Option<f64>,
    /// Δ verification steps with at least one draft token.
    pub drafts: f64,
    /// Δ accepted draft tokens (bonus token excluded).
    pub accepted_tokens: f64,
    /// Δ draft tokens proposed, when known.
    pub draft_tokens: Option<f64>,
    /// Unconditional acceptance rate per draft position, `Δaccepted_pos[i] / Δdrafts`.
    pub per_position_acceptance: Vec<f64>,
}

/// Acceptance breakdown for one endpoint.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EndpointAcceptance {
    /// The endpoint.
    pub url: String,
    /// Why it is missing from the total, if it is.
    pub error: Option<String>,
    /// Its numbers (absent when `error` is set).
    #[serde(flatten)]
    pub numbers: Option<Numbers>,
}

/// Acceptance breakdown for one data-parallel engine of one endpoint.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EngineAcceptance {
    /// The endpoint.
    pub url: String,
    /// The `engine` (vLLM) or `dp_rank` label.
    pub engine: String,
    /// Its numbers.
    #[serde(flatten)]
    pub numbers: Numbers,
}

/// Acceptance over one window, summed over every endpoint that answered.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Acceptance {
    /// See [`AcceptanceStatus`].
    pub status: AcceptanceStatus,
    /// Why the status is not `ok`.
    pub reason: Option<String>,
    /// The engine whose counters were read.
    pub engine: SpecEngine,
    /// Where the numbers came from, e.g. `vllm-prometheus-counters-endpoints2`.
    pub metric_source: String,
    /// The totals.
    #[serde(flatten)]
    pub numbers: Numbers,
    /// `p_i / p_(i-1)` per position (`c_0 = p_0`).
    pub conditional_acceptance: Vec<f64>,
    /// k used for validation, and where it came from.
    pub num_speculative_tokens: Option<u32>,
    /// `flag`, `positions`, or `null` when unknown.
    pub num_speculative_tokens_from: Option<KSource>,
    /// Some endpoints failed: the numbers cover only the others.
    pub partial: bool,
    /// From a gauge (last-window values), not from counters: display only.
    pub approximate: bool,
    /// Metric names matched only after writing `:` as `_`.
    pub name_normalised: bool,
    /// Counter resets in the window (the deltas used `increase()` semantics).
    pub resets: Vec<ResetNote>,
    /// Checks that failed without invalidating the AL (per-position sums, non-integral counts).
    pub warnings: Vec<String>,
    /// Per-endpoint breakdown.
    pub endpoints: Vec<EndpointAcceptance>,
    /// Per-engine breakdown (data-parallel ranks), where the series carry an engine label.
    pub engines: Vec<EngineAcceptance>,
}
