//! The window arithmetic: two snapshots per endpoint become per-series increases with Prometheus
//! `increase()` reset semantics, summed over every endpoint, put through the engine's formula and
//! validated (`speculative-metrics.md` §1, §3, §4, §5).

use std::collections::{BTreeMap, BTreeSet};

use super::formula::{gauge_numbers, numbers, source, Formula, Sums};
use super::names::{Metric, SpecEngine};
use super::snapshot::{SeriesKey, Snapshot};
use super::trtllm_json::IterationTotals;
use super::{
    Acceptance, AcceptanceStatus, EndpointAcceptance, EngineAcceptance, KSource, Numbers,
    ResetKind, ResetNote,
};
use crate::scrape::ScrapeError;

/// One endpoint's view of a window.
#[derive(Clone, Debug)]
pub struct EndpointWindow {
    /// Normalised endpoint URL (part of every series key: two servers both have `engine="0"`).
    pub url: String,
    /// The page at the window's start, or why it could not be had.
    pub before: Result<Snapshot, ScrapeError>,
    /// The page at the window's end, or why it could not be had.
    pub after: Result<Snapshot, ScrapeError>,
    /// TensorRT-LLM JSON iteration stats polled during the window (JSON endpoints only).
    pub iterations: Option<IterationTotals>,
}

/// How to read the counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct AcceptanceOptions {
    /// Engine to read, or auto-detect.
    pub engine: SpecEngine,
    /// Speculative tokens per draft (k), when known.
    pub num_spec_tokens: Option<u32>,
}

/// Per-series increases of one endpoint.
struct EndpointDeltas {
    deltas: BTreeMap<SeriesKey, f64>,
    gauges: Vec<f64>,
}

fn increases(
    url: &str,
    before: &Snapshot,
    after: &Snapshot,
    resets: &mut Vec<ResetNote>,
) -> EndpointDeltas {
    let restarted = matches!((before.process_start, after.process_start),
        (Some(a), Some(b)) if a != b);
    let mut deltas = BTreeMap::new();
    let mut gauges = Vec::new();
    let mut note = |key: &SeriesKey, kind: ResetKind| {
        resets.push(ResetNote {
            endpoint: url.to_owned(),
            series: key.describe(),
            kind,
        })
    };
    for (key, &new) in &after.values {
        if key.metric.is_gauge() {
            if !new.is_nan() {
                gauges.push(new);
            }
            continue;
        }
        if new.is_nan() {
            continue;
        }
        let delta = match before.values.get(key) {
            None if lazily_created(key) => new,
            None => {
                note(key, ResetKind::Appeared);
                new
            }
            Some(old) if old.is_nan() => continue,
            Some(&old) => {
                if restarted {
                    note(key, ResetKind::ProcessRestarted);
                    new
                } else if new < old {
                    note(key, ResetKind::Decreased);
                    new
                } else if before.created.get(key) != after.created.get(key)
                    && before.created.contains_key(key)
                    && after.created.contains_key(key)
                {
                    note(key, ResetKind::CreatedChanged);
                    new
                } else {
                    new - old
                }
            }
        };
        deltas.insert(key.clone(), delta);
    }
    for key in before.values.keys() {
        if !key.metric.is_gauge() && !after.values.contains_key(key) {
            note(key, ResetKind::Vanished);
        }
    }
    EndpointDeltas { deltas, gauges }
}

/// llama-server writes a per-position series only once a draft at that position was accepted:
/// absent means 0, not a reset. Counted from 0 without a reset note; a restart still shows on the
/// totals, which are on the page from the start.
fn lazily_created(key: &SeriesKey) -> bool {
    key.metric == Metric::LlamaAcceptedPerPos
}

/// Computes acceptance over a window from every endpoint's two snapshots.
pub fn evaluate(windows: &[EndpointWindow], opts: AcceptanceOptions) -> Acceptance {
    let mut resets = Vec::new();
    let mut endpoints = Vec::new();
    let mut usable: Vec<(usize, EndpointDeltas)> = Vec::new();
    let mut name_normalised = false;
    let mut present = BTreeSet::new();
    let mut iterations: Option<IterationTotals> = None;
    for (i, w) in windows.iter().enumerate() {
        match (&w.before, &w.after) {
            (Ok(b), Ok(a)) => {
                name_normalised |= a.name_normalised || b.name_normalised;
                present.extend(a.engines());
                if let Some(it) = &w.iterations {
                    iterations
                        .get_or_insert_with(IterationTotals::default)
                        .add(it);
                    if it.entries > 0 {
                        present.insert(SpecEngine::Trtllm);
                    }
                }
                usable.push((i, increases(&w.url, b, a, &mut resets)));
            }
            (Err(e), _) | (_, Err(e)) => endpoints.push(EndpointAcceptance {
                url: w.url.clone(),
                error: Some(e.to_string()),
                numbers: None,
            }),
        }
    }
    let partial = !endpoints.is_empty() && !usable.is_empty();
    let mut out = Acceptance {
        status: AcceptanceStatus::Ok,
        reason: None,
        engine: opts.engine,
        metric_source: String::new(),
        numbers: Numbers::default(),
        conditional_acceptance: Vec::new(),
        num_speculative_tokens: opts.num_spec_tokens,
        num_speculative_tokens_from: opts.num_spec_tokens.map(|_| KSource::Flag),
        partial,
        approximate: false,
        name_normalised,
        resets,
        warnings: Vec::new(),
        endpoints,
        engines: Vec::new(),
    };
    if usable.is_empty() {
        out.status = AcceptanceStatus::Unavailable;
        out.reason = Some(if windows.is_empty() {
            "no metrics endpoints configured".into()
        } else {
            unreadable(&out.endpoints)
        });
        return out;
    }
    let engine = match opts.engine {
        SpecEngine::Auto => match present.len() {
            1 => *present.iter().next().unwrap_or(&SpecEngine::Vllm),
            0 => {
                out.status = AcceptanceStatus::NoCounters;
                out.reason = Some(
                    "no speculative-decoding counters on the metrics pages (is speculative \
                         decoding on, and are these the decode workers' endpoints?)"
                        .into(),
                );
                out.endpoints
                    .extend(usable.iter().map(|(i, _)| EndpointAcceptance {
                        url: windows[*i].url.clone(),
                        error: None,
                        numbers: None,
                    }));
                return out;
            }
            _ => {
                let names: Vec<&str> = present.iter().map(|e| e.name()).collect();
                out.status = AcceptanceStatus::Invalid;
                out.reason = Some(format!(
                    "metrics pages mix engines ({}); pass --spec-engine to choose one",
                    names.join(", ")
                ));
                return out;
            }
        },
        e => e,
    };
    out.engine = engine;

    // k: the flag, else the number of draft positions the engine exports.
    let mut total = Sums::default();
    let mut gauges = Vec::new();
    for (_, d) in &usable {
        for (k, v) in &d.deltas {
            if k.metric.engine() == engine {
                total.add(k, *v);
            }
        }
        gauges.extend(d.gauges.iter().copied());
    }
    if out.num_speculative_tokens.is_none() {
        let inferred = match engine {
            SpecEngine::Vllm => total.positions(Metric::VllmAcceptedPerPos).len(),
            SpecEngine::Llamacpp => total.positions(Metric::LlamaAcceptedPerPos).len(),
            SpecEngine::Trtllm => total.positions(Metric::TrtDraftedPerPos).len(),
            SpecEngine::Atom => total.positions(Metric::AtomSteps).len().saturating_sub(1),
            _ => 0,
        };
        if inferred > 0 {
            out.num_speculative_tokens = Some(inferred as u32);
            out.num_speculative_tokens_from = Some(KSource::Positions);
        }
    }
    let k = out.num_speculative_tokens;

    let (nums, formula) = match numbers(engine, &total, iterations.as_ref(), k) {
        Ok(x) => x,
        Err(reason) => {
            if let Some(g) = gauge_numbers(&gauges) {
                // Gauges are last-window values: shown, flagged, never validated as counters.
                out.approximate = true;
                out.numbers = g;
                out.metric_source = source(engine, Formula::Gauge, usable.len());
                out.warnings
                    .push(format!("counters unusable ({reason}); AL from a gauge"));
                return out;
            }
            out.status = if total.by_metric.is_empty() {
                AcceptanceStatus::NoCounters
            } else {
                AcceptanceStatus::Invalid
            };
            out.reason = Some(reason.to_string());
            return out;
        }
    };
    out.metric_source = source(engine, formula, usable.len());
    out.conditional_acceptance = conditional(&nums.per_position_acceptance);
    out.numbers = nums;

    // Breakdown per endpoint and per engine label.
    for (i, d) in &usable {
        let mut sums = Sums::default();
        let mut by_engine: BTreeMap<String, Sums> = BTreeMap::new();
        for (key, v) in &d.deltas {
            if key.metric.engine() != engine {
                continue;
            }
            sums.add(key, *v);
            if let Some(e) = key.engine_label() {
                by_engine.entry(e.to_owned()).or_default().add(key, *v);
            }
        }
        let url = &windows[*i].url;
        let own_iterations = windows[*i].iterations.as_ref();
        let numbers_or_err = numbers(engine, &sums, own_iterations, k);
        out.endpoints.push(match numbers_or_err {
            Ok((n, _)) => EndpointAcceptance {
                url: url.clone(),
                error: None,
                numbers: Some(n),
            },
            Err(e) => EndpointAcceptance {
                url: url.clone(),
                error: Some(e.to_string()),
                numbers: None,
            },
        });
        for (label, s) in by_engine {
            if let Ok((n, _)) = numbers(engine, &s, None, k) {
                out.engines.push(EngineAcceptance {
                    url: url.clone(),
                    engine: label,
                    numbers: n,
                });
            }
        }
    }
    validate(&mut out);
    out
}

/// Why no endpoint gave a window: each one's first error (three at most), and where to look.
fn unreadable(endpoints: &[EndpointAcceptance]) -> String {
    const SHOWN: usize = 3;
    let mut each: Vec<String> = endpoints
        .iter()
        .take(SHOWN)
        .map(|e| {
            format!(
                "{}: {}",
                e.url,
                e.error.as_deref().unwrap_or("unknown error")
            )
        })
        .collect();
    if endpoints.len() > SHOWN {
        each.push(format!("and {} more", endpoints.len() - SHOWN));
    }
    format!(
        "no metrics endpoint could be read at both ends of the window ({}); check that each \
         --server-metrics endpoint (default: the target's own /metrics) is reachable and serves \
         Prometheus text",
        each.join("; ")
    )
}

fn conditional(p: &[f64]) -> Vec<f64> {
    p.iter()
        .enumerate()
        .map(|(i, &pi)| {
            if i == 0 {
                pi
            } else if p[i - 1] > 0.0 {
                pi / p[i - 1]
            } else {
                0.0
            }
        })
        .collect()
}

/// `speculative-metrics.md` §5: invariants that make a window invalid, and softer warnings.
fn validate(out: &mut Acceptance) {
    let n = &out.numbers;
    let mut values = vec![n.drafts, n.accepted_tokens];
    values.extend(n.draft_tokens);
    if values.iter().any(|v| !v.is_finite() || *v < 0.0) {
        return invalid(
            out,
            format!(
                "counter increases must be finite and non-negative (drafts {}, accepted {}, draft \
             tokens {:?})",
                n.drafts, n.accepted_tokens, n.draft_tokens
            ),
        );
    }
    if n.drafts <= 0.0 {
        out.status = AcceptanceStatus::NoData;
        out.reason = Some(if out.engine == SpecEngine::Llamacpp {
            // llama-server adds to its speculative counters when a request finishes.
            "no drafts in the window yet: llama.cpp counts drafts when a request finishes \
             (waiting for the first finished request)"
                .into()
        } else {
            "no drafts in the window: speculative decoding inactive".into()
        });
        return;
    }
    if let Some(k) = out.num_speculative_tokens.map(f64::from) {
        if n.accepted_tokens > k * n.drafts {
            return invalid(
                out,
                format!(
                    "accepted tokens {} exceed k × drafts = {k} × {}",
                    n.accepted_tokens, n.drafts
                ),
            );
        }
        if let Some(t) = n.draft_tokens {
            if t > k * n.drafts + 0.5 {
                return invalid(
                    out,
                    format!("draft tokens {t} exceed k × drafts = {k} × {}", n.drafts),
                );
            }
        }
    }
    if let Some(t) = n.draft_tokens {
        if n.accepted_tokens > t {
            return invalid(
                out,
                format!(
                    "accepted tokens {} exceed draft tokens {t}",
                    n.accepted_tokens
                ),
            );
        }
    }
    if let (Some(al), Some(k)) = (n.acceptance_length, out.num_speculative_tokens) {
        if !(1.0..=f64::from(k) + 1.0).contains(&al) {
            return invalid(out, format!("AL {al} outside 1..={}", k + 1));
        }
    }
    let p = &n.per_position_acceptance;
    if !p.is_empty() {
        let sum: f64 = p.iter().sum::<f64>() * n.drafts;
        if (sum - n.accepted_tokens).abs() > 0.5 {
            out.warnings.push(format!(
                "per-position accepted tokens sum to {sum}, not Δaccepted {}",
                n.accepted_tokens
            ));
        }
        if p.windows(2).any(|w| w[1] > w[0] + 1e-12) {
            out.warnings
                .push("per-position acceptance increases with position".into());
        }
    }
    if [n.drafts, n.accepted_tokens]
        .iter()
        .chain(n.draft_tokens.iter())
        .any(|v| v.fract() != 0.0)
    {
        out.warnings
            .push("counter increases are not integers".into());
    }
}

fn invalid(out: &mut Acceptance, reason: String) {
    out.status = AcceptanceStatus::Invalid;
    out.reason = Some(format!("invalid deltas: {reason}"));
}
