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

use super::{MetricKey, Stat};
use crate::record::{RequestRecord, SpecDecode, SpecSource};

/// Largest difference, in percent, between an estimate and the counters' AL for which the
/// per-request figures are called reliable.
pub(crate) const RELIABLE_WITHIN_PCT: f64 = 2.0;

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
pub(crate) const AL_BIN_WIDTH: f64 = 0.25;

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
    /// Standard error of the token-weighted AL over the requests (a ratio of sums, by the delta
    /// method; at least two requests with steps): how far another draw of the same prompts may
    /// move the figure a golden curve records.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_weighted_standard_error: Option<f64>,
    /// Mean of the per-request AL (SPEED-Bench's per-category figure).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_acceptance_length: Option<f64>,
    /// Distribution of the per-request AL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acceptance_length: Option<Stat>,
    /// `Σ accepted / Σ draft tokens`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acceptance_rate: Option<f64>,
    /// Distribution of the servers' own per-request figure as sent (vLLM's
    /// `mean_acceptance_length`, SGLang's `spec_accept_length`, which counts the prefill token,
    /// TensorRT-LLM's `avg_decoded_tokens_per_iter`, its only one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_reported_acceptance_length: Option<Stat>,
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
    /// Its standard error over the requests (as the reported figures').
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_weighted_standard_error: Option<f64>,
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

/// One value of a per-request spec-decode metric: a ratio, or a count (written as an integer,
/// as AIPerf writes it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum SpecValue {
    /// A ratio or a percentage.
    Ratio(f64),
    /// A number of steps or tokens.
    Count(u64),
}

impl SpecValue {
    /// The value as a float, for the statistics.
    pub(crate) fn as_f64(self) -> f64 {
        match self {
            SpecValue::Ratio(x) => x,
            SpecValue::Count(n) => n as f64,
        }
    }
}

impl Serialize for SpecValue {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            SpecValue::Ratio(x) => s.serialize_f64(x),
            SpecValue::Count(n) => s.serialize_u64(n),
        }
    }
}

/// AIPerf's six per-request spec-decode metrics of one response, in AIPerf's order, each only
/// where the response's figures define it (llama.cpp reports no steps: its rate and token counts
/// only). The aggregator's statistics and the per-request export both read them from here.
pub(crate) fn spec_metrics(s: &SpecDecode) -> impl Iterator<Item = (MetricKey, SpecValue)> {
    use SpecValue::{Count, Ratio};
    [
        (
            MetricKey::SpecDecodeAcceptanceLength,
            s.acceptance_length().map(Ratio),
        ),
        (
            MetricKey::SpecDecodeDraftAcceptanceRate,
            s.acceptance_rate().map(|x| Ratio(x * 100.0)),
        ),
        (
            MetricKey::SpecDecodeAcceptedPerVerified,
            s.accepted_per_verified().map(Ratio),
        ),
        (MetricKey::SpecDecodeSteps, s.steps.map(Count)),
        (
            MetricKey::SpecDecodeAcceptedDraftTokens,
            s.accepted_tokens.map(Count),
        ),
        (MetricKey::SpecDecodeDraftTokens, s.draft_tokens.map(Count)),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k, v?)))
}

/// Sums for the standard error of a ratio of sums `Σx / Σy` over requests (delta method):
/// `SE² = Σ (x_i − R y_i)² / (n (n − 1) ȳ²)`.
#[derive(Clone, Debug, Default)]
struct RatioAcc {
    n: u64,
    x: f64,
    y: f64,
    xx: f64,
    yy: f64,
    xy: f64,
}

impl RatioAcc {
    fn add(&mut self, x: f64, y: f64) {
        self.n += 1;
        self.x += x;
        self.y += y;
        self.xx += x * x;
        self.yy += y * y;
        self.xy += x * y;
    }

    /// The standard error of `Σx / Σy`; `None` below two requests or without any `y`.
    fn standard_error(&self) -> Option<f64> {
        if self.n < 2 || self.y <= 0.0 {
            return None;
        }
        let n = self.n as f64;
        let r = self.x / self.y;
        let resid = (self.xx - 2.0 * r * self.xy + r * r * self.yy).max(0.0);
        let mean_y = self.y / n;
        Some((resid / (n * (n - 1.0))).sqrt() / mean_y)
    }
}

/// Running sums of reported figures (one per run and one per group).
#[derive(Clone, Debug, Default)]
struct ReportedAcc {
    requests: u64,
    requests_with_steps: u64,
    steps: u64,
    /// Σ accepted over the requests that reported steps (the AL's numerator).
    accepted_with_steps: u64,
    draft_tokens: u64,
    accepted_tokens: u64,
    histogram: Vec<u64>,
    /// The servers' own per-request figures, as sent.
    server_al: Vec<f64>,
    /// (accepted, steps) per request with steps, for the token-weighted AL's standard error.
    ratio: RatioAcc,
}

impl ReportedAcc {
    fn add(&mut self, s: &SpecDecode) {
        self.requests += 1;
        self.draft_tokens += s.draft_tokens.unwrap_or(0);
        self.accepted_tokens += s.accepted_tokens.unwrap_or(0);
        if let (Some(steps), Some(a)) = (s.steps, s.accepted_tokens) {
            self.steps += steps;
            self.accepted_with_steps += a;
            self.requests_with_steps += 1;
            self.ratio.add(a as f64, steps as f64);
        }
        if let Some(al) = s.reported_acceptance_length {
            self.server_al.push(al);
        }
        if self.histogram.len() < s.histogram.len() {
            self.histogram.resize(s.histogram.len(), 0);
        }
        for (sum, n) in self.histogram.iter_mut().zip(&s.histogram) {
            *sum += n;
        }
    }

    /// The totals, with `al` the per-request AL of the requests that reported steps.
    fn totals(&self, al: &[f64]) -> Option<SpecTotals> {
        if self.requests == 0 {
            return None;
        }
        let hist_steps: u64 = self.histogram.iter().sum();
        // Position i (0-based) was accepted in every step that accepted more than i drafts.
        let per_position_acceptance_rates = if hist_steps > 0 {
            (1..self.histogram.len())
                .map(|i| self.histogram[i..].iter().sum::<u64>() as f64 / hist_steps as f64)
                .collect()
        } else {
            Vec::new()
        };
        Some(SpecTotals {
            requests: self.requests,
            steps: self.steps,
            requests_with_steps: self.requests_with_steps,
            draft_tokens: self.draft_tokens,
            accepted_tokens: self.accepted_tokens,
            token_weighted_acceptance_length: (self.steps > 0)
                .then(|| 1.0 + self.accepted_with_steps as f64 / self.steps as f64),
            token_weighted_standard_error: self.ratio.standard_error(),
            mean_acceptance_length: mean(al),
            acceptance_length: Stat::of(al),
            acceptance_rate: (self.draft_tokens > 0)
                .then(|| self.accepted_tokens as f64 / self.draft_tokens as f64),
            server_reported_acceptance_length: Stat::of(&self.server_al),
            histogram: self.histogram.clone(),
            per_position_acceptance_rates,
            vs_counters: None,
        })
    }
}

/// Running sums of the stream estimate (one per run and one per group).
#[derive(Clone, Debug, Default)]
struct StreamAcc {
    requests: u64,
    decode_tokens: u64,
    decode_events: u64,
    ratio: RatioAcc,
}

impl StreamAcc {
    fn add(&mut self, tokens: u64, events: u64) {
        self.requests += 1;
        self.decode_tokens += tokens;
        self.decode_events += events;
        self.ratio.add(tokens as f64, events as f64);
    }

    /// The estimate, with `al` the per-request estimates (tokens / events of each request).
    fn estimate(&self, al: &[f64]) -> Option<StreamEstimate> {
        (self.decode_events > 0).then(|| StreamEstimate {
            requests: self.requests,
            decode_tokens: self.decode_tokens,
            decode_events: self.decode_events,
            token_weighted_acceptance_length: Some(
                self.decode_tokens as f64 / self.decode_events as f64,
            ),
            token_weighted_standard_error: self.ratio.standard_error(),
            mean_acceptance_length: mean(al),
            acceptance_length: Stat::of(al),
            vs_counters: None,
        })
    }
}

#[derive(Clone, Debug, Default)]
struct GroupAcc {
    requests: u64,
    reported: ReportedAcc,
    stream: StreamAcc,
    /// The group's per-request AL, reported and estimated (the run's are the aggregator's
    /// store columns, see [`SpecAgg::summary`]).
    reported_al: Vec<f64>,
    stream_al: Vec<f64>,
}

/// The aggregator's part for speculative decoding: fed every successful record once.
#[derive(Clone, Debug, Default)]
pub(crate) struct SpecAgg {
    by_source: BTreeMap<SpecSource, u64>,
    malformed: u64,
    first_malformed: Option<String>,
    reported: ReportedAcc,
    stream: StreamAcc,
    groups: BTreeMap<String, GroupAcc>,
    /// Per-request AL for the histogram: reported where there is one, else the estimate.
    al_bins: BTreeMap<u64, u64>,
}

impl SpecAgg {
    /// Folds in one successful request: its reported figures (`spec`), its warning, and its
    /// stream estimate's inputs (`decode`: tokens and events after the first content event).
    pub(crate) fn add(&mut self, r: &RequestRecord, decode: Option<(u64, u64)>) {
        if let Some(w) = &r.spec_warning {
            self.malformed += 1;
            self.first_malformed.get_or_insert_with(|| w.clone());
        }
        let mut group = r
            .group
            .as_ref()
            .map(|g| self.groups.entry(g.clone()).or_default());
        if let Some(g) = group.as_mut() {
            g.requests += 1;
        }
        let mut al = None;
        if let Some(s) = &r.spec {
            *self.by_source.entry(s.source).or_default() += 1;
            self.reported.add(s);
            al = s.acceptance_length();
            if let Some(g) = group.as_mut() {
                g.reported.add(s);
                g.reported_al.extend(al);
            }
        }
        if let Some((tokens, events)) = decode.filter(|&(_, e)| e > 0) {
            self.stream.add(tokens, events);
            let estimate = tokens as f64 / events as f64;
            if let Some(g) = group.as_mut() {
                g.stream.add(tokens, events);
                g.stream_al.push(estimate);
            }
            al = al.or(Some(estimate));
        }
        if let Some(al) = al {
            let bin = ((al - 1.0).max(0.0) / AL_BIN_WIDTH).floor() as u64;
            *self.al_bins.entry(bin).or_default() += 1;
        }
    }

    /// The first malformed payload's warning, with the count, for the summary's warnings.
    pub(crate) fn warning(&self) -> Option<String> {
        self.first_malformed.as_ref().map(|w| {
            format!(
                "{} response(s) carried malformed speculative-decoding figures, left out of the \
                 per-request acceptance (each named in records.jsonl's spec_warning); the first: {w}",
                self.malformed
            )
        })
    }

    /// The summary part, or `None` when no request reported or streamed anything. The run's
    /// per-request values are not kept here, but once, in the aggregator's store (bounded
    /// memory however long the run): `reported_al` is its `spec_decode_acceptance_length`
    /// column, `stream_al` its stream-estimate column, both fed from the same records as
    /// [`Self::add`].
    pub(crate) fn summary(&self, reported_al: &[f64], stream_al: &[f64]) -> Option<SpecSummary> {
        if self.reported.requests == 0 && self.stream.decode_events == 0 && self.malformed == 0 {
            return None;
        }
        let top = self.al_bins.keys().next_back().copied().unwrap_or(0);
        let al_histogram = if self.al_bins.is_empty() {
            Vec::new()
        } else {
            (0..=top)
                .map(|b| AlBin {
                    lo: 1.0 + b as f64 * AL_BIN_WIDTH,
                    requests: self.al_bins.get(&b).copied().unwrap_or(0),
                })
                .collect()
        };
        Some(SpecSummary {
            requests_by_source: self.by_source.clone(),
            malformed: self.malformed,
            reported: self.reported.totals(reported_al),
            stream_estimate: self.stream.estimate(stream_al),
            group_field: None,
            by_group: self
                .groups
                .iter()
                .map(|(name, g)| {
                    (
                        name.clone(),
                        GroupSpec {
                            requests: g.requests,
                            reported: g.reported.totals(&g.reported_al),
                            stream_estimate: g.stream.estimate(&g.stream_al),
                        },
                    )
                })
                .collect(),
            al_histogram,
        })
    }
}

impl SpecSummary {
    /// Sets each run-level figure beside the counters' AL of the same window (`None`: the
    /// counters were not read or saw no drafts), and drops the section when nothing was
    /// reported and the counters saw no drafting (a stream estimate of a server that does not
    /// speculate says nothing). Returns the warnings to add to the summary.
    pub(crate) fn against_counters(
        mut self,
        counter_al: Option<f64>,
    ) -> (Option<Self>, Vec<String>) {
        let mut warnings = Vec::new();
        if self.reported.is_none() && self.malformed == 0 && counter_al.is_none() {
            return (None, warnings);
        }
        let Some(c) = counter_al.filter(|c| *c > 0.0) else {
            return (Some(self), warnings);
        };
        let vs = |al: f64| {
            let difference_pct = (al - c) / c * 100.0;
            VsCounters {
                counter_acceptance_length: c,
                difference_pct,
                reliable: difference_pct.abs() <= RELIABLE_WITHIN_PCT,
            }
        };
        if let Some(r) = self.reported.as_mut() {
            if let Some(al) = r.token_weighted_acceptance_length {
                let v = vs(al);
                if !v.reliable {
                    warnings.push(format!(
                        "the responses' own speculative-decoding figures give a token-weighted AL of \
                         {al:.4}, {:+.2}% from the counters' {c:.4}: did other traffic reach the \
                         server, or were requests cut short?",
                        v.difference_pct
                    ));
                }
                r.vs_counters = Some(v);
            }
        }
        if let Some(e) = self.stream_estimate.as_mut() {
            if let Some(al) = e.token_weighted_acceptance_length {
                let v = vs(al);
                if !v.reliable {
                    warnings.push(format!(
                        "the stream estimate of AL (decode tokens / decode events) is {al:.3}, \
                         {:+.1}% from the counters' {c:.3}: the server or a proxy coalesces or \
                         splits decode steps, so per-request stream estimates are unreliable",
                        v.difference_pct
                    ));
                }
                e.vs_counters = Some(v);
            }
        }
        (Some(self), warnings)
    }
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::RatioAcc;

    #[test]
    fn the_standard_error_of_a_ratio_of_sums_is_the_delta_methods() {
        // Requests (accepted, steps): R = 12 / 12 = 1; residuals x − R y = -1, 1, -2, 2;
        // Σ r² = 10; SE = sqrt(10 / (4 · 3)) / (12 / 4).
        let mut r = RatioAcc::default();
        for (x, y) in [(2.0, 3.0), (4.0, 3.0), (1.0, 3.0), (5.0, 3.0)] {
            r.add(x, y);
        }
        let want = (10.0f64 / 12.0).sqrt() / 3.0;
        assert!((r.standard_error().unwrap() - want).abs() < 1e-12);
        // Every request at the same ratio: no spread, no error.
        let mut same = RatioAcc::default();
        same.add(2.0, 4.0);
        same.add(3.0, 6.0);
        assert!(same.standard_error().unwrap() < 1e-12);
        let mut one = RatioAcc::default();
        one.add(2.0, 4.0);
        assert_eq!(one.standard_error(), None);
    }
}
