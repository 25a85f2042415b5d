//! The gate's measurement: preflight the metrics endpoints, replay the collection with stable
//! before/after scrapes, and turn the acceptance counters into a verdict (§5.3 steps 4–9, §5.5).
//!
//! ```text
//!  Plan ─> result dir writable, prompt count ─> scrape::probe (every endpoint answers; some
//!       page has the configured framework's counters)
//!       ─> engine::replay (require_stable, settle) ─> counts ─> ScrapeReport ─> analyse ─> Verdict
//! ```
//!
//! The whole gate runs under one budget (`AL_GATE_TIMEOUT_S`) and one `Stopper`: a deadline or a
//! signal ends it as an `error` result at once, never a hang.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::cli::GateArgs;
use crate::client::Client;
use crate::config::DatasetSource;
use crate::dataset;
use crate::engine::{replay, EngineError};
use crate::progress::Progress;
use crate::scrape::acceptance::{AcceptanceStatus, SpecEngine};
use crate::scrape::{self, EndpointStatus, ScrapeReport};
use crate::side_task::SideTask;
use crate::stop::{StopReason, Stopper};
use crate::timefmt::rfc3339_now;

use super::plan::Plan;
use super::record::{
    result_dir, result_name, round_to, GateRecord, GateResult, Reason, Stop, Verdict,
};
use super::settings::budget;

fn error(reason: Reason, message: impl Into<String>) -> Stop {
    Stop::new(reason, message)
}

/// The band and verdict for a measured AL against the golden AL (§5.3 steps 8–9): the comparison
/// uses the 4-decimal value written to the file.
pub(crate) fn verdict(al: f64, golden: f64) -> (f64, f64, f64, Verdict) {
    let al4 = round_to(al, 4);
    let min = round_to(golden * 0.95, 10);
    let max = round_to(golden * 1.05, 10);
    let v = if al4 < min {
        Verdict::Below
    } else if al4 > max {
        Verdict::Above
    } else {
        Verdict::Pass
    };
    (al4, min, max, v)
}

/// Runs the gate. Never fails: every outcome is a result (and its file). The replay's live
/// counters go to `progress` (the caller prints them).
pub async fn run_gate(
    a: &GateArgs,
    stop: Stopper,
    progress: watch::Sender<Progress>,
) -> GateResult {
    let started = Instant::now();
    let started_at = rfc3339_now();
    let mut rec = GateRecord::default();
    let outcome = match budget(a) {
        Err(e) => Err(e),
        Ok(budget) => {
            rec.timeout_s = Some(budget.as_secs_f64());
            let deadline = tokio::time::sleep(budget);
            tokio::select! {
                r = gate_inner(a, &stop, budget, &mut rec, progress) => r,
                _ = deadline => {
                    stop.stop(StopReason::Deadline);
                    Err(timed_out(budget))
                }
                _ = stop.token().cancelled() => Err(terminated(&stop)),
            }
        }
    };
    // A signal that arrived while the replay was finishing still makes this an error.
    let outcome = match outcome {
        Ok(_)
            if matches!(
                stop.reason(),
                Some(StopReason::Terminated | StopReason::Interrupted)
            ) =>
        {
            Err(terminated(&stop))
        }
        other => other,
    };
    rec.finish(a, outcome, started, started_at)
}

fn timed_out(budget: Duration) -> Stop {
    error(
        Reason::Timeout,
        format!(
            "AL gate exceeded AL_GATE_TIMEOUT_S={}",
            budget.as_secs_f64()
        ),
    )
}

fn terminated(stop: &Stopper) -> Stop {
    let sig = match stop.reason() {
        Some(StopReason::Interrupted) => "SIGINT",
        _ => "SIGTERM",
    };
    error(Reason::Terminated, format!("AL gate terminated by {sig}"))
}

async fn gate_inner(
    a: &GateArgs,
    stop: &Stopper,
    budget: Duration,
    rec: &mut GateRecord,
    progress: watch::Sender<Progress>,
) -> Result<Verdict, Stop> {
    let started = Instant::now();
    // Where the result and the artifacts go, before anything reads or runs.
    let name = result_name(a)?;
    writable(&result_dir(a), name)?;
    let plan = Plan::resolve(a, rec)?;
    // The replay's own deadline: whatever budget is left.
    let cfg = plan.run_config(a, budget.saturating_sub(started.elapsed()))?;
    // The collection as the replay will select it: too few prompts is known before any request.
    if let DatasetSource::File { path, kind } = &cfg.dataset {
        let samples = dataset::load_file(path, *kind, &cfg.select)
            .map_err(|e| error(Reason::DatasetInvalid, e.to_string()))?;
        check_prompt_count(samples.len(), plan.prompts_expected)?;
    }

    // Preflight: every endpoint must answer and parse; a page set without counters is a skip.
    let client =
        Client::new(cfg.client.clone()).map_err(|e| error(Reason::Internal, e.to_string()))?;
    let probes = scrape::probe(&client, &plan.endpoints, cfg.scrape.timeout).await;
    for (u, p) in plan.endpoints.iter().zip(&probes) {
        if let Err(e) = p {
            return Err(error(
                Reason::MetricsUnreachable,
                format!("metrics endpoint {u}: {e}"),
            ));
        }
    }
    let found: BTreeSet<SpecEngine> = probes.iter().flatten().flatten().copied().collect();
    if found.is_empty() {
        let mut msg = "Could not collect speculative acceptance metrics from server".to_owned();
        if plan.dynamo_default_endpoints {
            msg.push_str("; for Dynamo/disagg set SPEEDBENCH_DECODE_METRICS_URLS or SPEEDBENCH_METRICS_PORTS to decode-worker /metrics endpoints");
        }
        return Err(Stop::new(Reason::NoCounters, msg));
    }
    // Counters of another family: the configured framework's cannot appear, whatever the replay.
    let engine = plan.settings.engine;
    if !found.contains(&engine) {
        let names: Vec<&str> = found.iter().map(|e| e.name()).collect();
        return Err(error(
            Reason::ConfigInvalid,
            format!(
                "FRAMEWORK={} reads {} speculative counters, but the metrics pages carry {} \
                 counters only; set FRAMEWORK (--framework) to the serving framework",
                rec.framework.as_deref().unwrap_or(""),
                engine.name(),
                names.join(", ")
            ),
        ));
    }

    let outcome = replay(cfg, stop.clone(), progress)
        .await
        .map_err(|e| match e {
            // The replay's hint names its own --wait-for-model-timeout; the gate has no such flag.
            EngineError::NotReady { url, reason } => error(
                Reason::ClientFailed,
                format!(
                    "server at {url} not ready: {reason} (is it running, and is --url / PORT its \
                     address? the gate waits for nothing: start it after the server is ready)"
                ),
            ),
            EngineError::Dataset(d) => error(Reason::DatasetInvalid, d.to_string()),
            other => error(Reason::Internal, other.to_string()),
        })?;
    if let Some(r) = outcome.stopped_by {
        return Err(match r {
            StopReason::Deadline => timed_out(budget),
            StopReason::Terminated | StopReason::Interrupted => terminated(stop),
            StopReason::Stalled => error(
                Reason::ClientFailed,
                "the replay stalled (no request finished)",
            ),
            StopReason::WarmupFailed | StopReason::FailedThreshold => error(
                Reason::ClientFailed,
                "the AgentX replay stopped early (root warmup failure or live failed-request threshold)",
            ),
        });
    }
    if let Some(e) = &outcome.failed_requirement {
        return Err(error(Reason::Internal, e.clone()));
    }
    let c = &outcome.summary.counts;
    rec.prompts_completed = Some(c.success);
    rec.prompts_failed = Some(c.failed + c.cancelled);
    rec.settle_s = Some(plan.settings.settle.as_secs_f64());
    rec.artifact_dir = Some(outcome.artifact_dir.display().to_string());
    check_prompt_count(outcome.summary.meta.samples, plan.prompts_expected)?;
    if c.failed + c.cancelled > 0 || c.success < u64::from(plan.prompts_expected) {
        return Err(error(
            Reason::ClientFailed,
            format!(
                "{} of {} SPEED-Bench requests failed",
                c.failed + c.cancelled,
                c.total
            ),
        ));
    }
    let Some(report) = outcome.summary.acceptance else {
        // The counters are the gate's point: a scrape task that panicked fails it, named.
        let why = outcome
            .side_failures
            .iter()
            .find(|f| f.task == SideTask::Scrape)
            .map_or_else(|| "no scrape report".to_owned(), ToString::to_string);
        return Err(error(Reason::Internal, why));
    };
    analyse(&report, &plan, rec)
}

/// The collection must select exactly the prompts the curve was collected on.
fn check_prompt_count(selected: usize, expected: u32) -> Result<(), Stop> {
    if selected as u64 == u64::from(expected) {
        return Ok(());
    }
    Err(error(
        Reason::DatasetInvalid,
        format!(
            "the collection selects {selected} prompts, the curve was collected on {expected} \
             (check the prompts file and the collection's category and num_prompts)"
        ),
    ))
}

/// The result directory can take the result file: created if missing, and a probe file written
/// and removed, so an unwritable directory stops the gate before the replay, not after it.
fn writable(dir: &Path, name: &str) -> Result<(), Stop> {
    let unwritable = |e: std::io::Error| {
        error(
            Reason::ConfigInvalid,
            format!(
                "RESULT_DIR {} is not writable: {e} (set --result-dir / RESULT_DIR to a writable \
                 directory)",
                dir.display()
            ),
        )
    };
    std::fs::create_dir_all(dir).map_err(unwritable)?;
    let probe = dir.join(format!(".al_gate_{name}.json.probe"));
    std::fs::write(&probe, b"").map_err(unwritable)?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// The first failed scrape of an endpoint: `(when, what)`. The one place the gate reads an
/// endpoint's scrape status.
fn scrape_failure(e: &EndpointStatus) -> Option<(&'static str, &str)> {
    [("before", &e.before), ("after", &e.after)]
        .into_iter()
        .find(|(_, st)| !st.is_ok())
        .map(|(when, st)| (when, st.as_str()))
}

/// Turns the scrape report into the verdict (§5.3 steps 6–9, §5.5).
fn analyse(r: &ScrapeReport, plan: &Plan, rec: &mut GateRecord) -> Result<Verdict, Stop> {
    let a = &r.acceptance;
    rec.metric_source = Some({
        let s = a.metric_source.clone();
        if plan.settings.dynamo && !s.is_empty() {
            format!("dynamo-{s}")
        } else {
            s
        }
    });
    for e in &r.endpoints {
        if let Some((when, st)) = scrape_failure(e) {
            return Err(error(
                Reason::MetricsUnreachable,
                format!("metrics endpoint {} ({when}): {st}", e.url),
            ));
        }
    }
    if !r.counters_settled {
        return Err(error(
            Reason::CountersNotSettled,
            "spec counters still moving after settle",
        ));
    }
    if let Some(first) = a.resets.first() {
        return Err(error(
            Reason::CounterReset,
            format!("counter reset on {} {}", first.endpoint, first.series),
        ));
    }
    match a.status {
        AcceptanceStatus::NoCounters => {
            return Err(Stop::new(
                Reason::NoCounters,
                "Could not collect speculative acceptance metrics from server",
            ))
        }
        AcceptanceStatus::Unavailable => {
            return Err(error(
                Reason::MetricsUnreachable,
                a.reason.clone().unwrap_or_default(),
            ))
        }
        AcceptanceStatus::Invalid | AcceptanceStatus::NoData => {
            return Err(error(
                Reason::InvalidDeltas,
                format!(
                    "Invalid acceptance deltas or counter reset ({})",
                    a.reason.as_deref().unwrap_or("")
                ),
            ))
        }
        AcceptanceStatus::Ok => {}
    }
    if a.approximate {
        return Err(error(
            Reason::InvalidDeltas,
            "only a gauge was available (approximate); the gate needs counters",
        ));
    }
    // Leader-only Dynamo vLLM data-parallel metrics (§5.5).
    if plan.settings.is_dynamo_vllm() {
        if let Some(want) = plan.settings.expected_engines.filter(|w| *w > 1) {
            let seen = a.engines.len().max(a.endpoints.len());
            if seen < want {
                return Err(Stop::new(
                    Reason::LeaderOnlyDpMetrics,
                    format!(
                        "Dynamo vLLM DP metrics cover leader ranks only ({seen}/{want} engines)"
                    ),
                ));
            }
        }
    }
    let n = &a.numbers;
    let Some(al) = n.acceptance_length else {
        return Err(error(
            Reason::InvalidDeltas,
            "Invalid acceptance deltas or counter reset",
        ));
    };
    let k = plan.settings.k;
    if !(1.0..=f64::from(k) + 1.0).contains(&al) {
        return Err(error(
            Reason::InvalidDeltas,
            format!("AL {al} outside 1..={}", k + 1),
        ));
    }
    let (al4, _, _, v) = verdict(al, plan.golden_al);
    rec.acceptance_length = Some(al4);
    rec.accepted_tokens = Some(n.accepted_tokens as u64);
    rec.verify_steps = Some(n.drafts as u64);
    rec.draft_tokens = Some(n.drafts as u64);
    rec.proposed_draft_tokens = n.draft_tokens.map(|t| t as u64);
    rec.acceptance_rate = n.acceptance_rate;
    rec.per_position_acceptance =
        (!n.per_position_acceptance.is_empty()).then(|| n.per_position_acceptance.clone());
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn band_and_verdict_follow_the_contract() {
        assert_eq!(verdict(2.49, 2.49).3, Verdict::Pass);
        let (_, min, max, _) = verdict(2.49, 2.49);
        assert_eq!((min, max), (2.3655, 2.6145));
        assert_eq!(verdict(2.3655, 2.49).3, Verdict::Pass);
        assert_eq!(verdict(2.3654, 2.49).3, Verdict::Below);
        assert_eq!(
            verdict(2.61454, 2.49).3,
            Verdict::Pass,
            "compared at 4 decimals"
        );
        assert_eq!(verdict(2.6146, 2.49).3, Verdict::Above);
        for (g, lo, hi) in [
            (2.27, 2.1565, 2.3835),
            (3.77, 3.5815, 3.9585),
            (1.79, 1.7005, 1.8795),
        ] {
            let (_, min, max, _) = verdict(g, g);
            assert_eq!((min, max), (lo, hi));
        }
    }

    #[test]
    fn rfc3339_has_the_shape() {
        let t = rfc3339_now();
        assert_eq!(t.len(), 20);
        assert!(t.ends_with('Z') && t.as_bytes()[10] == b'T');
    }
}
