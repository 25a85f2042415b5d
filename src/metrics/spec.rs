//! Speculative decoding per request: what each response reported (vLLM's payload, SGLang's
//! details, llama.cpp's timings), the stream estimate where nothing was reported, and both
//! broken down by the samples' group (SPEED-Bench `category`, or the `--group-by` field).
//!
//! The per-request figures are [`SpecDecode`] on each record, checked by the client. Here they
//! are folded into totals ([`SpecTotals`]): Σ steps, drafts and accepted tokens, the pooled
//! histogram and the per-position rates it implies. Two averages of acceptance length are kept
//! apart on purpose:
//! * the **token-weighted** AL, `1 + Σ accepted / Σ steps`, which is what the Prometheus
//!   counters give over the same requests (and AIPerf's `spec_decode_token_weighted_acceptance_length`);
//! * the **mean of per-request AL** (SPEED-Bench's per-category figure), which weights a short
//!   answer as much as a long one.
//!
//! The **stream estimate**: a decode step that accepted `a` drafts delivers `a + 1` tokens in one
//! event, so a request's decode tokens over its decode events estimates its AL. A server or proxy
//! that coalesces steps into one event inflates it, so the run's token-weighted estimate is
//! compared with the counters' AL of the same window ([`VsCounters`]) and the per-request
//! estimates are marked unreliable beyond [`RELIABLE_WITHIN_PCT`].

use std::collections::BTreeMap;

use serde::Serialize;

use super::Stat;
use crate::record::SpecSource;

/// Largest difference, in percent, between an estimate and the counters' AL for which the
/// per-request figures are called reliable.
pub const RELIABLE_WITHIN_PCT: f64 = 2.0;

/// Per-request speculative decoding over the run (`summary.json` `spec_decode`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct SpecSummary {
    /// Successful requests whose response carried figures, by source.
    pub requests_by_source: BTreeMap<SpecSource, u64>,
    /// Responses whose figures were malformed and left out (each named in `records.jsonl`'s
    /// `spec_warning`; the first in the summary's warnings).
    pub malformed: u64,
    /// Totals of what the responses reported (absent when none reported anything).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reported: Option<SpecTotals>,
    /// The stream estimate over the requests that had per-event token counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_estimate: Option<StreamEstimate>,
    /// The collection field the groups come from (`category` for SPEED-Bench).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_field: Option<String>,
    /// The same figures per group, keyed by the group's value.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub by_group: BTreeMap<String, GroupSpec>,
    /// Per-request acceptance length (reported where available, else the stream estimate),
    /// in bins [`AL_BIN_WIDTH`] wide starting at 1.0.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub al_histogram: Vec<AlBin>,
}

/// Width of the per-request AL histogram's bins.
pub const AL_BIN_WIDTH: f64 = 0.25;

/// One bin of the per-request AL histogram: `[lo, lo + AL_BIN_WIDTH)`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AlBin {
    /// Lower edge.
    pub lo: f64,
    /// Requests in the bin.
    pub requests: u64,
}

/// Sums of what the responses reported, and what they imply.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SpecTotals {
    /// Requests with figures.
    pub requests: u64,
    /// Σ verify steps, over the requests that reported steps.
    pub steps: u64,
    /// Requests that reported steps (llama.cpp and TensorRT-LLM do not).
    pub requests_with_steps: u64,
    /// Σ draft tokens proposed.
    pub draft_tokens: u64,
    /// Σ draft tokens accepted.
    pub accepted_tokens: u64,
    /// `1 + Σ accepted / Σ steps` over the requests with steps (the counters' definition).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_weighted_acceptance_length: Option<f64>,
    /// Mean of the per-request AL (SPEED-Bench's per-category figure).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_acceptance_length: Option<f64>,
    /// Distribution of the per-request AL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acceptance_length: Option<Stat>,
    /// `Σ accepted / Σ draft tokens`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acceptance_rate: Option<f64>,
    /// Pooled histogram: index j = steps that accepted exactly j drafts.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub histogram: Vec<u64>,
    /// Position i (0-based): steps that accepted at least i + 1 drafts over the steps of the
    /// pooled histogram (the counters' per-position rates).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_position_acceptance_rates: Vec<f64>,
    /// The token-weighted AL against the counters of the same window (run level only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_counters: Option<VsCounters>,
}

/// The stream estimate: decode tokens over decode events.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StreamEstimate {
    /// Requests with at least one decode event and per-event token counts.
    pub requests: u64,
    /// Σ completion tokens after the first content event.
    pub decode_tokens: u64,
    /// Σ content events after the first.
    pub decode_events: u64,
    /// `Σ decode tokens / Σ decode events`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_weighted_acceptance_length: Option<f64>,
    /// Mean of the per-request estimates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_acceptance_length: Option<f64>,
    /// Distribution of the per-request estimates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acceptance_length: Option<Stat>,
    /// The token-weighted estimate against the counters of the same window (run level only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_counters: Option<VsCounters>,
}

/// A token-weighted AL set beside the Prometheus counters' AL over the same window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VsCounters {
    /// The counters' AL (`acceptance.acceptance_length`).
    pub counter_acceptance_length: f64,
    /// `(figure − counters) / counters`, percent.
    pub difference_pct: f64,
    /// `|difference_pct| ≤ RELIABLE_WITHIN_PCT`: the per-request figures can be trusted.
    pub reliable: bool,
}

/// One group's figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GroupSpec {
    /// Successful requests of the group.
    pub requests: u64,
    /// What the group's responses reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reported: Option<SpecTotals>,
    /// The group's stream estimate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_estimate: Option<StreamEstimate>,
}
