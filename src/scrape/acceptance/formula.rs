//! The per-engine formulas (`speculative-metrics.md` §2.7): summed counter increases become
//! [`Numbers`], and the formula used names the `metric_source`.

use std::collections::{BTreeMap, BTreeSet};

use super::names::{vllm_shape, vllm_shape_names, Metric, SpecEngine};
use super::snapshot::SeriesKey;
use super::trtllm_json::IterationTotals;
use super::Numbers;

/// Sums per metric (and per position) over a set of series.
#[derive(Default)]
pub(crate) struct Sums {
    pub(crate) by_metric: BTreeMap<Metric, f64>,
    by_position: BTreeMap<(Metric, u32), f64>,
    present: BTreeSet<Metric>,
}

impl Sums {
    pub(crate) fn add(&mut self, key: &SeriesKey, v: f64) {
        *self.by_metric.entry(key.metric).or_default() += v;
        self.present.insert(key.metric);
        if let Some(p) = key.position() {
            *self.by_position.entry((key.metric, p)).or_default() += v;
        }
    }

    fn get(&self, m: Metric) -> f64 {
        self.by_metric.get(&m).copied().unwrap_or(0.0)
    }

    fn has(&self, m: Metric) -> bool {
        self.present.contains(&m)
    }

    pub(crate) fn positions(&self, m: Metric) -> Vec<f64> {
        let max = self
            .by_position
            .keys()
            .filter(|(mm, _)| *mm == m)
            .map(|(_, p)| *p)
            .max();
        match max {
            None => Vec::new(),
            Some(max) => (0..=max)
                .map(|p| self.by_position.get(&(m, p)).copied().unwrap_or(0.0))
                .collect(),
        }
    }
}

/// Which formula produced the numbers (becomes the `metric_source` suffix).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Formula {
    Counters,
    FixedK,
    SglExact,
    SglUncorrected,
    TrtPerPosition,
    TrtJson,
    Gauge,
}

fn ratio(num: f64, den: f64) -> Option<f64> {
    (den > 0.0).then(|| num / den)
}

/// Why an engine's formula could not turn the counters into numbers; the text becomes the
/// acceptance `reason` (or an endpoint's `error`).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub(crate) enum FormulaError {
    /// vLLM's counter shape (early vLLM v1, or llama.cpp) without its drafts counter, and the
    /// fixed-k fallback lacks its draft-tokens counter or k.
    #[error("{engine} page lacks {fallback}")]
    NoDrafts {
        /// `vLLM` or `llama.cpp`.
        engine: &'static str,
        /// What is missing.
        fallback: Fallback,
    },
    /// SGLang without its verify or generation counter.
    #[error("SGLang page lacks sglang:spec_verify_calls_total or sglang:generation_tokens_total")]
    SglangMissing,
    /// TensorRT-LLM JSON polled, but no entry carried draft tokens.
    #[error(
        "TensorRT-LLM iteration stats had no entries with draft tokens (is \
         enable_iter_perf_stats on, and is specperf the only poller?)"
    )]
    TrtllmNoIterations,
    /// TensorRT-LLM counters without positions, and the fixed-k fallback lacks a counter or k.
    #[error("TensorRT-LLM page lacks {0}")]
    TrtllmNoPositions(Fallback),
    /// ATOM's steps histogram disagrees with its accepted counter.
    #[error(
        "invalid deltas: Σ n·Δsteps{{accepted_tokens=n}} = {weighted} but Δaccepted = {accepted}"
    )]
    AtomSteps {
        /// Σ n·Δsteps.
        weighted: f64,
        /// Δaccepted.
        accepted: f64,
    },
    /// `auto` reached the formula (a bug: the engine is resolved first).
    #[error("engine not resolved")]
    Unresolved,
}

/// Why the fixed-k fallback (drafts = draft tokens / k) could not stand in for a missing
/// counter: the counters the page lacks, and k if it was known. Only an unknown k asks for
/// `--num-spec-tokens`; a given k with a missing counter is the server's gap, not the user's.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Fallback {
    /// The counters whose absence sent us to the fallback.
    lacks: Vec<&'static str>,
    /// The fallback's own counters that are absent too.
    fallback_lacks: Vec<&'static str>,
    /// k from the flag or the per-position counters.
    k: Option<u32>,
}

impl std::fmt::Display for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}; the fixed-k fallback (drafts = draft tokens / k",
            self.lacks.join(" and ")
        )?;
        if let Some(k) = self.k {
            write!(f, ", k = {k}")?;
        }
        f.write_str(") cannot stand in: ")?;
        let mut why = Vec::new();
        if !self.fallback_lacks.is_empty() {
            why.push(format!(
                "the page lacks {} too (does this build export speculative-decoding counters, \
                 and is this the decode worker's endpoint?)",
                self.fallback_lacks.join(" and ")
            ));
        }
        if self.k.is_none() {
            why.push("k is unknown (pass --num-spec-tokens)".to_owned());
        }
        f.write_str(&why.join("; and "))
    }
}

/// Applies the engine's formula to summed increases.
pub(crate) fn numbers(
    engine: SpecEngine,
    s: &Sums,
    iterations: Option<&IterationTotals>,
    k: Option<u32>,
) -> Result<(Numbers, Formula), FormulaError> {
    let kf = k.map(f64::from);
    let with = |drafts: f64, accepted: f64, draft_tokens: Option<f64>, per_pos: Vec<f64>| Numbers {
        acceptance_length: ratio(accepted, drafts).map(|r| 1.0 + r),
        acceptance_rate: draft_tokens.and_then(|d| ratio(accepted, d)),
        drafts,
        accepted_tokens: accepted,
        draft_tokens,
        per_position_acceptance: per_pos.iter().filter_map(|p| ratio(*p, drafts)).collect(),
    };
    match engine {
        SpecEngine::Vllm | SpecEngine::Llamacpp => {
            let [drafts, draft_tokens, accepted, per_pos] =
                vllm_shape(engine).ok_or(FormulaError::Unresolved)?;
            let accepted = s.get(accepted);
            let tokens = s.has(draft_tokens).then(|| s.get(draft_tokens));
            if s.has(drafts) {
                let per_pos = s.positions(per_pos);
                Ok((
                    with(s.get(drafts), accepted, tokens, per_pos),
                    Formula::Counters,
                ))
            } else {
                // Early v1 builds have no drafts counter: with a fixed k, drafts = tokens / k.
                let (Some(k), Some(t)) = (kf, tokens) else {
                    let (label, [drafts_name, tokens_name]) = vllm_shape_names(engine);
                    return Err(FormulaError::NoDrafts {
                        engine: label,
                        fallback: Fallback {
                            lacks: vec![drafts_name],
                            fallback_lacks: missing(s, &[(draft_tokens, tokens_name)]),
                            k,
                        },
                    });
                };
                Ok((with(t / k, accepted, tokens, Vec::new()), Formula::FixedK))
            }
        }
        SpecEngine::Sglang => {
            if !s.has(Metric::SglVerify) || !s.has(Metric::SglGeneration) {
                return Err(FormulaError::SglangMissing);
            }
            let gen = s.get(Metric::SglGeneration);
            let verify = s.get(Metric::SglVerify);
            // Each request's first token comes from prefill, not from a verify step.
            let (first_tokens, formula) = if s.has(Metric::SglRequests) {
                (s.get(Metric::SglRequests), Formula::SglExact)
            } else {
                (0.0, Formula::SglUncorrected)
            };
            let accepted = gen - first_tokens - verify;
            Ok((
                with(verify, accepted, kf.map(|k| k * verify), Vec::new()),
                formula,
            ))
        }
        SpecEngine::Trtllm => {
            let tokens = s
                .has(Metric::TrtDraftTokens)
                .then(|| s.get(Metric::TrtDraftTokens));
            if s.has(Metric::TrtAcceptedPerPos) && s.has(Metric::TrtDraftedPerPos) {
                let drafted = s.positions(Metric::TrtDraftedPerPos);
                let drafts = drafted.first().copied().unwrap_or(0.0);
                let per_pos = s.positions(Metric::TrtAcceptedPerPos);
                let accepted = per_pos.iter().sum();
                let mut n = with(drafts, accepted, tokens, per_pos);
                n.acceptance_rate = tokens.and_then(|t| ratio(s.get(Metric::TrtAccepted), t));
                return Ok((n, Formula::TrtPerPosition));
            }
            if let Some(it) = iterations.filter(|it| it.entries > 0) {
                let drafts = it.requests_with_draft;
                return Ok((
                    with(drafts, it.accepted, Some(it.draft_tokens), Vec::new()),
                    Formula::TrtJson,
                ));
            }
            match (kf, tokens) {
                (Some(k), Some(t)) if s.has(Metric::TrtAccepted) => Ok((
                    with(t / k, s.get(Metric::TrtAccepted), tokens, Vec::new()),
                    Formula::FixedK,
                )),
                _ if iterations.is_some() => Err(FormulaError::TrtllmNoIterations),
                _ => Err(FormulaError::TrtllmNoPositions(Fallback {
                    lacks: missing(
                        s,
                        &[
                            (
                                Metric::TrtDraftedPerPos,
                                "trtllm_spec_decode_drafted_tokens_total{token_position}",
                            ),
                            (
                                Metric::TrtAcceptedPerPos,
                                "trtllm_spec_decode_accepted_tokens_total{token_position}",
                            ),
                        ],
                    ),
                    fallback_lacks: missing(
                        s,
                        &[
                            (
                                Metric::TrtDraftTokens,
                                "trtllm_spec_decode_num_draft_tokens_total",
                            ),
                            (
                                Metric::TrtAccepted,
                                "trtllm_spec_decode_num_accepted_tokens_total",
                            ),
                        ],
                    ),
                    k,
                })),
            }
        }
        SpecEngine::Atom => {
            let buckets = s.positions(Metric::AtomSteps);
            let steps: f64 = buckets.iter().sum();
            let accepted = s.get(Metric::AtomAccepted);
            let weighted: f64 = buckets.iter().enumerate().map(|(n, c)| n as f64 * c).sum();
            if (weighted - accepted).abs() > 0.5 {
                return Err(FormulaError::AtomSteps { weighted, accepted });
            }
            // p_i = share of steps that accepted more than i tokens.
            let kk = buckets.len().saturating_sub(1);
            let per_pos = (0..kk).map(|i| buckets[i + 1..].iter().sum()).collect();
            let tokens = s
                .has(Metric::AtomDraftTokens)
                .then(|| s.get(Metric::AtomDraftTokens));
            Ok((with(steps, accepted, tokens, per_pos), Formula::Counters))
        }
        SpecEngine::Auto => Err(FormulaError::Unresolved),
    }
}

/// The names of the metrics in `wanted` that the sums never saw. TensorRT-LLM's names are given
/// with the `trtllm_` prefix; its other spellings (`trtllm:`, none) mean the same counters.
fn missing(s: &Sums, wanted: &[(Metric, &'static str)]) -> Vec<&'static str> {
    wanted
        .iter()
        .filter(|(m, _)| !s.has(*m))
        .map(|(_, name)| *name)
        .collect()
}

pub(crate) fn gauge_numbers(gauges: &[f64]) -> Option<Numbers> {
    if gauges.is_empty() {
        return None;
    }
    Some(Numbers {
        acceptance_length: Some(gauges.iter().sum::<f64>() / gauges.len() as f64),
        ..Numbers::default()
    })
}

pub(crate) fn source(engine: SpecEngine, formula: Formula, endpoints: usize) -> String {
    let e = engine.name();
    match formula {
        Formula::Counters | Formula::TrtPerPosition => {
            format!("{e}-prometheus-counters-endpoints{endpoints}")
        }
        Formula::FixedK => format!("{e}-prometheus-counters-endpoints{endpoints}-fixed-k"),
        Formula::SglExact => format!(
            "sglang-prometheus-generation-counter+verify-counter+requests-counter-endpoints{endpoints}"
        ),
        Formula::SglUncorrected => format!(
            "sglang-prometheus-generation-counter+verify-counter-endpoints{endpoints}-uncorrected"
        ),
        Formula::TrtJson => format!("trtllm-json-iteration-stats-endpoints{endpoints}"),
        Formula::Gauge => format!("{e}-prometheus-gauge-endpoints{endpoints}-approximate"),
    }
}
