//! The end of a run: the run description ([`RunMeta`]) beside the aggregator's numbers, and the
//! artifacts written from them. Artifact failures are recorded in the outcome, never lost.

use std::collections::BTreeMap;
use std::time::Duration;

use super::phase::Measured;
use super::prepare::Ready;
use super::RunOutcome;
use crate::config::RunConfig;
use crate::debug::{self, step};
use crate::metrics::{LoadMeta, RunMeta, TimeoutKind};
use crate::schedule::{DispatchStats, Plan};
use crate::side_task::SideTask;
use crate::stop::Stopper;

/// Builds the summary of a measured run and writes its artifacts.
pub(super) fn finish(ready: Ready, m: Measured, stop: &Stopper) -> RunOutcome {
    let Ready {
        cfg,
        samples,
        plan,
        sim,
        base_url,
        model,
        dir,
        notes,
        ..
    } = ready;
    drop(sim);
    let stopped_by = stop.reason();
    let t = cfg.client.timeouts;
    let timeouts_s: BTreeMap<TimeoutKind, f64> = [
        (TimeoutKind::Connect, t.connect.as_secs_f64()),
        (TimeoutKind::FirstToken, t.first_token.as_secs_f64()),
        (TimeoutKind::Idle, t.idle.as_secs_f64()),
        (TimeoutKind::Request, t.total.as_secs_f64()),
        (TimeoutKind::Run, cfg.run_timeout.as_secs_f64()),
    ]
    .into_iter()
    .collect();
    let meta = RunMeta {
        url: if cfg.target.is_embedded() {
            format!("embedded-simulator ({base_url})")
        } else {
            base_url
        },
        model,
        endpoint: cfg.endpoint_path.clone(),
        endpoint_type: cfg.endpoint_type,
        osl: cfg.osl,
        cli_command: cfg.cli_command.clone(),
        streaming: cfg.streaming,
        // What was used: an open loop or trace is capped only by --concurrency.
        concurrency: match plan.tickets.mode() {
            crate::schedule::LoadMode::Closed => Some(cfg.concurrency),
            _ => cfg.load.cap,
        },
        request_count: plan.len().unwrap_or(0),
        samples: samples.len(),
        // An AgentX replay has no collection; its trees recycle by design.
        dataset_reused: cfg.agentx.is_none() && m.dispatch.issued > samples.len() as u64,
        load: load_meta(&cfg, &plan, m.dispatch, m.warmup),
        input: cfg.dataset.describe(),
        // An AgentX replay reads weka traces (AIPerf's `weka_trace` loader), not the collection.
        dataset_format: match cfg.agentx {
            Some(_) => Some("weka_trace".to_owned()),
            None => cfg.dataset.aiperf_format(&cfg.select),
        },
        start_unix_s: m.start_unix_s,
        stopped_by,
        timeouts_s,
    };
    let mut summary = timed("summary", || m.agg.summary(meta));
    summary.acceptance = m.acceptance;
    // Groups come from the --group-by field, else SPEED-Bench's category.
    summary.settle_spec(Some(
        cfg.select
            .group_by
            .clone()
            .unwrap_or_else(|| "category".to_owned()),
    ));
    summary.agentx_run = cfg.agentx.as_deref().map(|x| x.run_meta());
    summary.branch_stats = m.branch_stats;
    summary
        .warnings
        .splice(0..0, cfg.warnings.iter().cloned().chain(notes));
    let isl_warnings = isl_check(&cfg, &m.agg, &mut summary);
    let energy_warnings = energy(&cfg, m.telemetry, &mut summary);
    let run_warnings: Vec<String> = per_chunk_usage_ignored(&cfg, &summary)
        .into_iter()
        .chain(isl_warnings)
        .chain(energy_warnings)
        .chain(m.warnings)
        .chain(m.side_failures.iter().map(ToString::to_string))
        .collect();
    summary.warnings.extend(run_warnings.iter().cloned());
    let mut artifact_error = m.agg.write_error.clone();
    let err = &mut artifact_error;
    // Before summary.json, whose presence tells `specperf merge` the shard finished.
    artifact_step("histograms.json", err, || {
        crate::report::write_histograms(&dir, &m.agg.histograms()).map_err(|e| e.to_string())
    });
    artifact_step("summary and AIPerf exports", err, || {
        crate::report::write_artifacts(&dir, &summary).map_err(|e| e.to_string())
    });
    let slice_ns = u64::try_from(cfg.scrape.slice.as_nanos()).unwrap_or(u64::MAX);
    artifact_step("timeslices", err, || {
        crate::report::write_timeslices(&dir, &summary, slice_ns).map_err(|e| e.to_string())
    });
    if let Some((result_dir, name)) = &cfg.result_file {
        let result_dir = result_dir.as_deref().unwrap_or(&dir);
        artifact_step("InferenceX result", err, || {
            crate::report::inferencex::write_raw_result(result_dir, name, &summary)
                .map(drop)
                .map_err(|e| e.to_string())
        });
    }
    let failed_requirement = m.side_failures.iter().find_map(|f| match f.task {
        SideTask::Aggregator => Some(f.to_string()),
        SideTask::Telemetry if cfg.telemetry.require => {
            Some(format!("--require-gpu-telemetry: {f}"))
        }
        SideTask::Telemetry | SideTask::Scrape => None,
    });
    RunOutcome {
        summary,
        artifact_dir: dir,
        artifact_error,
        stopped_by,
        run_warnings,
        side_failures: m.side_failures,
        failed_requirement,
    }
}

/// One end-of-run step, its time and the process's memory after it on the debug channel (the
/// end of a long run reads its records back: where its peak memory would come from).
fn timed<T>(what: &str, work: impl FnOnce() -> T) -> T {
    let t = std::time::Instant::now();
    let out = work();
    step!(
        "finish: {what} in {} ({})",
        debug::ms(t.elapsed()),
        debug::memory()
    );
    out
}

/// One end-of-run artifact, [`timed`], its first error kept in `error`.
fn artifact_step(
    what: &str,
    error: &mut Option<String>,
    work: impl FnOnce() -> Result<(), String>,
) {
    if let Err(e) = timed(what, work) {
        error.get_or_insert(e);
    }
}

/// The GPUs' energy over the benchmark window (the first request sent to the last response),
/// divided by the window's successful requests and their tokens; returns its warnings.
fn energy(
    cfg: &RunConfig,
    run: Option<crate::telemetry::TelemetryRun>,
    summary: &mut crate::metrics::Summary,
) -> Vec<String> {
    let Some(run) = run else {
        return Vec::new();
    };
    let e = crate::telemetry::energy::energy(
        &run,
        &crate::telemetry::EnergyInputs {
            start_unix_s: summary.benchmark_start_unix_s,
            end_unix_s: summary.benchmark_end_unix_s,
            successful_requests: summary.counts.success,
            input_tokens: summary.total_prompt_tokens,
            output_tokens: summary.total_completion_tokens,
            expected_gpus: cfg.telemetry.expected_gpus,
        },
    );
    let warnings = e.warnings.clone();
    summary.energy = Some(e);
    summary.telemetry = Some(run);
    warnings
}

/// SPEED-Bench Throughput splits: each tier's median prompt against the split's nominal length
/// (in the summary), and a warning for each tier off by more than 10%.
fn isl_check(
    cfg: &RunConfig,
    agg: &crate::metrics::Aggregate,
    summary: &mut crate::metrics::Summary,
) -> Vec<String> {
    let (Some((split, nominal)), Some(isl)) = (cfg.speed_bench_nominal_isl(), &agg.isl_by_group)
    else {
        return Vec::new();
    };
    match isl.check(split.name(), nominal) {
        Some((check, warnings)) => {
            summary.speed_bench_isl = Some(check);
            warnings
        }
        None => Vec::new(),
    }
}

/// `--per-chunk-usage` asks for usage on every chunk; a server that ignores
/// `continuous_usage_stats` (llama.cpp) sends it only at the end, and the client quietly counts
/// from that. Said once per run, with what was lost.
fn per_chunk_usage_ignored(cfg: &RunConfig, s: &crate::metrics::Summary) -> Option<String> {
    use crate::record::TokenSource;
    if !(cfg.per_chunk_usage && cfg.streaming) {
        return None;
    }
    let count = |t| s.tokens_counted_by.get(&t).copied().unwrap_or(0);
    let final_only = count(TokenSource::UsageFinal);
    let with_usage = final_only + count(TokenSource::UsagePerChunk);
    (final_only > 0).then(|| {
        format!(
            "--per-chunk-usage: the server ignored stream_options.continuous_usage_stats on \
             {final_only} of {with_usage} streamed responses with usage (usage came on the final \
             chunk only); their token counts come from that final usage, and their per-chunk \
             token weights (inter_token_latency_token_weighted_ms, first-chunk tokens) are \
             unavailable"
        )
    })
}

fn load_meta(
    cfg: &RunConfig,
    plan: &Plan,
    dispatch: DispatchStats,
    warmup: Option<DispatchStats>,
) -> LoadMeta {
    let l = &cfg.load;
    let secs = |d: Duration| d.as_secs_f64();
    LoadMeta {
        mode: plan.tickets.mode(),
        request_rate: l.rate.map(|r| r.0),
        arrival_pattern: l.rate.map(|r| r.1),
        arrival_smoothness: l.rate.map(|r| r.2),
        concurrency_cap: l.cap,
        random_seed: l.seed,
        ramp_s: l.ramp.map(secs),
        benchmark_duration_s: l.duration.map(secs),
        grace_period_s: l.grace.map(secs),
        schedule_lag_tolerance_ms: l.lag_tolerance.as_secs_f64() * 1e3,
        shard: l.shard,
        shards_merged: None,
        dispatch,
        warmup,
    }
}
