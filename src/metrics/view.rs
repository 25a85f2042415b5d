//! `summary.json` read back: the fields specperf's own readers of a finished run use (`plot`'s
//! charts and page, the GPU power chart, `speed-bench-report`, golden-curve collection), typed.
//!
//! [`Summary`](super::Summary) writes the file and cannot be read (its names are `&'static
//! str`, some of its parts are written only); this view names each field a reader needs, with
//! the writer's own names, so a renamed field fails the round-trip test below rather than
//! leaving a chart silently empty. Every field is optional: a file from an older specperf (or a
//! run that had no such figure) reads as far as it has them.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

/// The parts of `summary.json` its readers use.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct SummaryView {
    pub(crate) schema_version: Option<String>,
    pub(crate) specperf_version: Option<String>,
    pub(crate) percentile_method: Option<String>,
    pub(crate) meta: MetaView,
    pub(crate) counts: CountsView,
    pub(crate) duration_s: Option<f64>,
    pub(crate) request_throughput_rps: Option<f64>,
    pub(crate) output_token_throughput_tps: Option<f64>,
    /// Each metric's statistics, by the metric's key (`time_to_first_token_ms`, ...).
    pub(crate) metrics: BTreeMap<String, StatView>,
    pub(crate) acceptance: Option<AcceptanceView>,
    pub(crate) spec_decode: Option<SpecView>,
    pub(crate) goodput: Option<GoodputView>,
    pub(crate) energy: Option<EnergyView>,
}

/// `meta`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct MetaView {
    pub(crate) url: Option<String>,
    pub(crate) model: Option<String>,
    /// Older summaries without it streamed.
    pub(crate) streaming: Option<bool>,
    pub(crate) concurrency: Option<f64>,
}

/// `counts`.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct CountsView {
    pub(crate) success: u64,
    pub(crate) failed: u64,
    pub(crate) cancelled: u64,
}

/// One metric's statistics.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct StatView {
    pub(crate) p50: Option<f64>,
    pub(crate) p99: Option<f64>,
}

/// `acceptance`: the counters' figures over the window.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct AcceptanceView {
    pub(crate) acceptance: Option<CountersView>,
    /// The window's length, s.
    pub(crate) window_s: Option<f64>,
    /// The cumulative AL at each live scrape.
    pub(crate) timeline: Vec<TimelineView>,
}

/// `acceptance.acceptance`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct CountersView {
    /// `ok` when the counters gave an AL.
    pub(crate) status: Option<String>,
    /// Why not, otherwise.
    pub(crate) reason: Option<String>,
    pub(crate) acceptance_length: Option<f64>,
    pub(crate) drafts: Option<f64>,
}

/// One point of `acceptance.timeline`.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct TimelineView {
    pub(crate) t_s: Option<f64>,
    pub(crate) acceptance_length: Option<f64>,
    pub(crate) drafts: Option<f64>,
}

/// `spec_decode`: the per-request speculative figures.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct SpecView {
    pub(crate) reported: Option<SpecTotalsView>,
    pub(crate) stream_estimate: Option<SpecTotalsView>,
    pub(crate) group_field: Option<String>,
    /// By group name, in the file's (sorted) order.
    pub(crate) by_group: BTreeMap<String, GroupView>,
    pub(crate) al_histogram: Vec<AlBinView>,
}

/// The token-weighted figures of `reported` or `stream_estimate`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct SpecTotalsView {
    pub(crate) token_weighted_acceptance_length: Option<f64>,
    pub(crate) token_weighted_standard_error: Option<f64>,
    pub(crate) mean_acceptance_length: Option<f64>,
    pub(crate) acceptance_rate: Option<f64>,
    /// The per-request AL's statistics, as written (copied into `collect.json`).
    pub(crate) acceptance_length: Option<serde_json::Value>,
}

/// One group of `spec_decode.by_group`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct GroupView {
    pub(crate) reported: Option<SpecTotalsView>,
    pub(crate) stream_estimate: Option<SpecTotalsView>,
}

/// One bin of `spec_decode.al_histogram`.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct AlBinView {
    pub(crate) lo: Option<f64>,
    pub(crate) requests: Option<f64>,
}

/// `goodput`.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct GoodputView {
    pub(crate) goodput_rps: Option<f64>,
    pub(crate) good_request_fraction: Option<f64>,
}

/// `energy`: the measured window's edges and energy per token.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct EnergyView {
    pub(crate) start_unix_s: Option<f64>,
    pub(crate) end_unix_s: Option<f64>,
    pub(crate) joules_per_output_token: Option<f64>,
}

/// Why `summary.json` could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ViewError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// It is not a summary.
    #[error("{path}: not a specperf summary: {reason}")]
    Malformed {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

impl SummaryView {
    /// Reads `path` (a `summary.json`).
    pub(crate) fn read(path: &Path) -> Result<SummaryView, ViewError> {
        let text = std::fs::read_to_string(path).map_err(|source| ViewError::Io {
            path: path.display().to_string(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|e| ViewError::Malformed {
            path: path.display().to_string(),
            reason: e.to_string(),
        })
    }

    /// Whether the run streamed (older summaries without `meta.streaming` did).
    pub(crate) fn streaming(&self) -> bool {
        self.meta.streaming.unwrap_or(true)
    }

    /// The counters' AL over the window, when they gave one.
    pub(crate) fn counters_al(&self) -> Option<f64> {
        self.acceptance
            .as_ref()?
            .acceptance
            .as_ref()?
            .acceptance_length
    }
}
