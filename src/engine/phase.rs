//! The measured part of a run: the warmup phase, the AL baseline, the profiling phase with its
//! request tasks and session chains, the guards (deadline, stall watchdog), the one aggregator and
//! the end of the scrape side task.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Uri;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::prepare::{Files, Ready};
use crate::client::{Client, Clock, Prepared};
use crate::config::RunConfig;
use crate::dataset::Sample;
use crate::metrics::{self, Aggregate, RecordSink};
use crate::progress::{Progress, StartStep};
use crate::record::{FailureKind, Outcome, Phase, RequestRecord};
use crate::render::{self, RenderOptions};
use crate::schedule::{self, DispatchStats, Issued, Plan, Tickets};
use crate::scrape::{ScrapeReport, Scraper};
use crate::side_task::{self, SideTask, SideTaskFailed};
use crate::stop::{StopReason, Stopper};

/// What the measured part hands to `finish`.
pub(super) struct Measured {
    pub(super) agg: Aggregate,
    pub(super) acceptance: Option<ScrapeReport>,
    pub(super) dispatch: DispatchStats,
    pub(super) warmup: Option<DispatchStats>,
    /// Run start, Unix seconds.
    pub(super) start_unix_s: f64,
    /// What the run itself learnt that the reader should know (AgentX: warmup grace expiry).
    pub(super) warnings: Vec<String>,
    /// AgentX: what became of the traces' spawns and joins over profiling.
    pub(super) branch_stats: Option<crate::metrics::BranchStats>,
    /// Every GPU read from before the warmup to the window's close (`--gpu-telemetry`).
    pub(super) telemetry: Option<crate::telemetry::TelemetryRun>,
    /// The side tasks that ended without their figures (the aggregator, the scrape, telemetry).
    pub(super) side_failures: Vec<SideTaskFailed>,
}

/// Runs the warmup and profiling phases of a prepared run, feeding every record to the one
/// aggregator (which writes `files`), with the scrape side task around the profiling phase.
pub(super) async fn run(
    ready: &Ready,
    files: Files,
    gpu: Option<(crate::telemetry::task::Source, Vec<crate::telemetry::Frame>)>,
    stop: &Stopper,
    progress: watch::Sender<Progress>,
) -> Measured {
    let cfg = &ready.cfg;
    let shard = cfg.load.shard;
    // From before the warmup: the series shows it, and brackets the window's opening.
    let gpu = gpu.map(|(source, first)| {
        let timeout = cfg
            .scrape
            .timeout
            .min(cfg.telemetry.interval.max(Duration::from_secs(1)));
        crate::telemetry::task::TelemetryTask::spawn(source, first, cfg.telemetry.interval, timeout)
    });
    let progress = Arc::new(progress);
    let start_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let clock = Clock::new();
    let (tx, rx) = mpsc::channel::<RequestRecord>(1024);
    let progress_rx = progress.subscribe();
    let aggregator = spawn_aggregator(ready, files, rx, &progress, start_unix.as_nanos() as u64);
    let issued = Arc::new(Issued::default());
    let guards = spawn_guards(cfg, stop, progress_rx, issued.clone());
    let ctx = Arc::new(Launch {
        client: ready.client.clone(),
        bodies: ready.bodies.clone().into(),
        samples: ready.samples.clone(),
        render: ready.render.clone(),
        uri: ready.uri.clone(),
        streaming: cfg.streaming,
        clock,
        tx,
        unreachable: Unreachable::default(),
    });

    // AgentX: the lane scheduler replaces the plan phases (its warmup, then its profiling).
    let mut agentx = ready
        .agentx
        .as_ref()
        .zip(cfg.agentx.as_deref())
        .map(|(a, s)| {
            super::agentx::Replay::new(super::agentx::ReplayInputs {
                client: ready.client.clone(),
                uri: ready.uri.clone(),
                clock,
                tx: ctx.tx.clone(),
                traces: a.traces.clone(),
                messages: a.messages.clone(),
                wire: super::agentx::Wire::of_run(cfg, &s.routing, ready.model.clone()),
                settings: s.clone(),
                concurrency: cfg.concurrency,
                duration: cfg.load.duration,
                grace: cfg.load.grace,
                stop: stop.clone(),
                progress: Some(progress.clone()),
                benchmark_id: Some(crate::report::aiperf::benchmark_id_at(
                    start_unix.as_secs_f64(),
                )),
            })
        });

    if agentx.is_some() {
        // The trace set was parsed on every core: glibc keeps the freed parse buffers in those
        // threads' arenas (about 120 MB of a 530 MB trace set) unless told to give them back.
        crate::heap::trim();
    }

    // Warmup: its own closed-loop phase, finished before the AL baseline and the profiling clock.
    let mut warmup = None;
    let mut warnings = Vec::new();
    // A warmup phase goes on warmed connections; without one the baseline scrape overlaps the
    // connection warm-up, and the clock waits for both.
    if agentx.is_some() || cfg.load.warmup.is_some() {
        ready.pool_warm.cancelled().await;
    }
    if let Some(replay) = agentx.as_mut() {
        progress.send_modify(|p| p.start_step(StartStep::Warmup));
        let w = replay.warmup().await;
        if w.grace_expired {
            warnings.push(format!(
                "AgentX warmup did not drain within --warmup-grace-period ({} s): what was left \
                 of it was cancelled and profiling started",
                cfg.agentx
                    .as_deref()
                    .map_or(0, |s| s.warmup_grace.as_secs())
            ));
        }
        if let Some(why) = &w.failure {
            warnings.push(format!(
                "AgentX warmup failed, so the run stopped (AIPerf's rule: the trees cannot reach \
                 their t*): the root request of {why}. Its record is in the artifacts \
                 (benchmark_phase warmup); fix the server or the argv and run again"
            ));
        }
        warmup = Some(DispatchStats {
            issued: w.primers + w.per_lane,
            ..DispatchStats::default()
        });
    } else if let Some(w) = cfg.load.warmup {
        let plan = Plan {
            tickets: Tickets::Closed {
                count: w.count.unwrap_or(u64::MAX),
            },
            samples: ready.samples.len(),
            slots: Some(shard.part(w.concurrency as u64).max(1) as usize),
            ramp: None,
            duration: w.duration,
            shard,
        };
        progress.send_modify(|p| p.start_step(StartStep::Warmup));
        warmup = Some(run_phase(&ctx, &plan, Phase::Warmup, cfg, stop, &issued, None).await);
    }

    let scraper = match ready
        .scrape_settings
        .clone()
        .filter(|_| shard.index == cfg.load.metrics_shard)
    {
        Some(mut settings) => {
            settings.save_dir = Some(ready.dir.clone());
            progress.send_modify(|p| p.start_step(StartStep::Baseline));
            let s = Scraper::baseline(ready.client.clone(), settings, stop.token()).await;
            Some(s.spawn(stop.token().clone(), Some(progress.clone())))
        }
        None => None,
    };
    ready.pool_warm.cancelled().await;
    if let Some(g) = &gpu {
        g.mark().await;
    }
    progress.send_modify(|p| {
        p.planned = ready.plan.len();
        p.duration_s = cfg.load.duration.map(|d| d.as_secs_f64());
        p.profiling_started = Some(Instant::now());
        p.starting = None;
    });
    let mut branch_stats = None;
    let dispatch = match agentx {
        Some(replay) => {
            let (dispatch, branch) = replay.profile().await;
            branch_stats = Some(branch);
            dispatch
        }
        None => {
            run_phase(
                &ctx,
                &ready.plan,
                Phase::Profiling,
                cfg,
                stop,
                &issued,
                cfg.load.grace,
            )
            .await
        }
    };
    // A side task that ended without its figures is said, never dropped.
    let mut side_failures = Vec::new();
    // The last response is in: the window's closing read, before anything else waits.
    let telemetry = match gpu {
        Some(g) => side_task::keep(g.finish().await, &mut side_failures),
        None => None,
    };
    drop(ctx);
    for g in guards {
        g.abort();
    }
    let agg = side_task::join(SideTask::Aggregator, aggregator).await;
    let agg = side_task::keep(agg, &mut side_failures)
        .unwrap_or_else(|| Aggregate::with_goodput(cfg.goodput.clone()));
    let acceptance = match scraper {
        Some(task) => {
            let settle = ready.scrape_settings.as_ref().map(|s| s.settle);
            if let Some(settle) = settle.filter(|s| !s.is_zero() && !stop.token().is_cancelled()) {
                progress.send_modify(|p| p.settling_until = Some(Instant::now() + settle));
            }
            side_task::keep(task.finish(Instant::now()).await, &mut side_failures)
        }
        None => None,
    };
    Measured {
        agg,
        acceptance,
        dispatch,
        warmup,
        start_unix_s: start_unix.as_secs_f64(),
        warnings,
        branch_stats,
        telemetry,
        side_failures,
    }
}

/// The one aggregator: every record of the run goes to it, and it writes `records.jsonl` and
/// `profile_export.jsonl` (`files`) as they come; `epoch_ns` is the run clock's zero, Unix ns.
fn spawn_aggregator(
    ready: &Ready,
    files: Files,
    rx: mpsc::Receiver<RequestRecord>,
    progress: &Arc<watch::Sender<Progress>>,
    epoch_ns: u64,
) -> tokio::task::JoinHandle<Aggregate> {
    let cfg = &ready.cfg;
    let warmup_phase = cfg.load.warmup.is_some();
    let sinks = vec![
        RecordSink::new(
            files.records,
            Box::new(|l: &mut Vec<u8>, r: &RequestRecord| serde_json::to_writer(l, r)),
        ),
        RecordSink::new(
            files.profile_export,
            Box::new(move |l: &mut Vec<u8>, r: &RequestRecord| {
                crate::report::aiperf::write_record(l, r, epoch_ns, warmup_phase)
            }),
        ),
    ];
    let records = metrics::aggregate(
        rx,
        sinks,
        progress.clone(),
        cfg.goodput.clone(),
        ready.client_isl.clone().map(Into::into),
        cfg.speed_bench_nominal_isl().is_some(),
    );
    tokio::spawn(async move {
        side_task::panic_if_asked(SideTask::Aggregator);
        records.await
    })
}

/// What every request task of a run shares.
struct Launch {
    client: Client,
    bodies: Arc<[Bytes]>,
    samples: Arc<[Sample]>,
    render: Arc<RenderOptions>,
    uri: Uri,
    streaming: bool,
    clock: Clock,
    tx: mpsc::Sender<RequestRecord>,
    unreachable: Unreachable,
}

/// Backoff while the server cannot be reached. A closed loop reissues a failed request at once,
/// and a connect failure takes microseconds: a server that dies mid-run turned a 64-slot loop
/// into some 17,000 failure records a second (a gigabyte of JSONL in under two minutes). A
/// request that never reached the server (`connect`, `connect_timeout`) now holds its slot for
/// 10 ms, doubling per consecutive such failure up to 250 ms; any request that reaches the
/// server resets it. Requests that did reach the server are never delayed.
#[derive(Default)]
pub(super) struct Unreachable {
    streak: std::sync::atomic::AtomicU32,
}

impl Unreachable {
    const FIRST: Duration = Duration::from_millis(10);
    const MAX: Duration = Duration::from_millis(250);

    /// How long the slot of a request that ended with `outcome` waits before it is reused.
    pub(super) fn backoff(&self, outcome: Outcome) -> Option<Duration> {
        use std::sync::atomic::Ordering::Relaxed;
        match outcome {
            Outcome::Failed(FailureKind::Connect | FailureKind::ConnectTimeout) => {
                let n = self.streak.fetch_add(1, Relaxed).min(5);
                Some((Self::FIRST * (1 << n)).min(Self::MAX))
            }
            Outcome::Cancelled => None,
            _ => {
                self.streak.store(0, Relaxed);
                None
            }
        }
    }
}

/// Dispatches one phase's plan and waits for its requests. After a duration limit, requests still
/// in flight get `grace` (`None`: unbounded), then are cancelled and recorded as failed.
async fn run_phase(
    ctx: &Arc<Launch>,
    plan: &Plan,
    phase: Phase,
    cfg: &RunConfig,
    stop: &Stopper,
    issued: &Issued,
    grace: Option<Duration>,
) -> DispatchStats {
    let tracker = tokio_util::task::TaskTracker::new();
    // Grace expiry cancels only the requests; a stop cancels them through the parent.
    let requests = stop.token().child_token();
    let start = tokio::time::Instant::now();
    let start_ns = ctx.clock.now_ns();
    let stats = schedule::dispatch(
        plan,
        start,
        stop.token(),
        cfg.load.lag_tolerance,
        issued,
        |r| {
            let (ctx, requests, stopped) = (ctx.clone(), requests.clone(), stop.token().clone());
            tracker.spawn(async move {
                run_session(
                    &ctx,
                    r.ticket.id,
                    r.ticket.sample,
                    start_ns + r.intended.as_nanos() as u64,
                    phase,
                    &requests,
                    &stopped,
                )
                .await;
                drop(r.permit);
            });
        },
    )
    .await;
    tracker.close();
    match (plan.duration, grace) {
        (Some(_), Some(g)) => {
            if tokio::time::timeout(g, tracker.wait()).await.is_err() {
                requests.cancel();
                tracker.wait().await;
            }
        }
        _ => tracker.wait().await,
    }
    stats
}

/// Sends one ticket: a single request, or every turn of a multi-turn session in order (each
/// later turn carries the conversation so far, the server's replies included, after its delay).
/// A failed or cancelled turn ends the session.
async fn run_session(
    ctx: &Launch,
    id: u64,
    sample_index: usize,
    intended_ns: u64,
    phase: Phase,
    requests: &CancellationToken,
    stopped: &CancellationToken,
) {
    let sample = &ctx.samples[sample_index];
    let session = !sample.turns.is_empty();
    let mut history = if session {
        render::first_messages(sample)
    } else {
        Vec::new()
    };
    let mut body = ctx.bodies[sample_index].clone();
    let mut intended = intended_ns;
    for turn in 0..=sample.turns.len() {
        if turn > 0 {
            let next = &sample.turns[turn - 1];
            if let Some(ms) = next.delay_ms {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs_f64(ms / 1e3)) => {}
                    _ = requests.cancelled() => return,
                }
            }
            history.push(serde_json::json!({"role": "user", "content": next.text}));
            intended = ctx.clock.now_ns();
            match render::body(&history, next.max_tokens, &ctx.render) {
                Ok(b) => body = b,
                Err(e) => {
                    let mut rec = RequestRecord::started(id, sample_index, intended, intended);
                    rec.phase = phase;
                    rec.turn = turn as u32;
                    rec.outcome = Outcome::Failed(FailureKind::Transport);
                    rec.error = Some(format!("cannot render turn {turn}: {e}"));
                    let _ = ctx.tx.send(rec).await;
                    return;
                }
            }
        }
        let req = Prepared {
            uri: ctx.uri.clone(),
            body: body.clone().into(),
            streaming: ctx.streaming,
            lines: None,
            capture_text: turn < sample.turns.len(),
            headers: http::HeaderMap::new(),
        };
        let mut rec = RequestRecord::started(id, sample_index, intended, ctx.clock.now_ns());
        rec.phase = phase;
        rec.turn = turn as u32;
        let asked = match turn {
            0 => sample.max_tokens,
            t => sample.turns[t - 1].max_tokens,
        };
        rec.requested_osl = render::requested_osl(asked, &ctx.render).map(u64::from);
        rec.group.clone_from(&sample.group);
        let mut rec = ctx.client.execute(req, rec, &ctx.clock, requests).await;
        if rec.outcome == Outcome::Cancelled && !stopped.is_cancelled() {
            rec.outcome = Outcome::Failed(FailureKind::GracePeriodExpired);
            rec.error = Some("still in flight when --benchmark-grace-period ran out".to_owned());
        }
        let ok = rec.outcome == Outcome::Success;
        if session {
            let reply = rec.response_text.take().unwrap_or_default();
            history.push(serde_json::json!({"role": "assistant", "content": reply}));
        }
        let backoff = ctx.unreachable.backoff(rec.outcome);
        let sent = ctx.tx.send(rec).await.is_ok();
        // A server that cannot be reached must not turn the loop into a flood of records: the
        // slot waits a little (the permit is held by the caller until this returns).
        if let Some(wait) = backoff {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = requests.cancelled() => {}
            }
        }
        if !sent || !ok {
            return;
        }
    }
}

/// Deadline and stall watchdog, both feeding the one stopper.
fn spawn_guards(
    cfg: &RunConfig,
    stop: &Stopper,
    mut progress: watch::Receiver<Progress>,
    issued: Arc<Issued>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let deadline = {
        let (stop, limit) = (stop.clone(), cfg.run_timeout);
        tokio::spawn(async move {
            tokio::time::sleep(limit).await;
            stop.stop(StopReason::Deadline);
        })
    };
    let stall = {
        let (stop, limit) = (stop.clone(), cfg.stall_timeout);
        tokio::spawn(async move {
            loop {
                match tokio::time::timeout(limit, progress.changed()).await {
                    Ok(Ok(())) => continue,
                    Ok(Err(_)) => return,
                    Err(_) if issued.get() > 0 => {
                        stop.stop(StopReason::Stalled);
                        return;
                    }
                    Err(_) => continue,
                }
            }
        })
    };
    vec![deadline, stall]
}
