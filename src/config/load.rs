//! The load's shape: closed or open loop, arrival pattern, warmup, ramps, duration and grace,
//! trace replay and the shard this process runs. Feeds `schedule`.

use std::time::Duration;

use super::{err, seconds, ConfigError};
use crate::cli::{LoadArgs, ReplayArgs};
use crate::schedule::{ArrivalPattern, Shard};

/// Validated load shape.
#[derive(Clone, Debug)]
pub(crate) struct LoadConfig {
    /// Open loop: (rate, pattern, gamma shape).
    pub(crate) rate: Option<(f64, ArrivalPattern, f64)>,
    /// Open loop: in-flight cap (only when --concurrency was given).
    pub(crate) cap: Option<usize>,
    pub(crate) seed: u64,
    pub(crate) duration: Option<Duration>,
    /// `None`: wait for every request after the duration.
    pub(crate) grace: Option<Duration>,
    pub(crate) warmup: Option<WarmupConfig>,
    /// Concurrency ramp (closed loop) or rate ramp (open loop).
    pub(crate) ramp: Option<Duration>,
    pub(crate) lag_tolerance: Duration,
    pub(crate) shard: Shard,
    pub(crate) metrics_shard: u32,
    pub(crate) trace: TraceConfig,
}

/// Validated trace-replay settings.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TraceConfig {
    /// `--fixed-schedule` given (else automatic when every row has a timestamp).
    pub(crate) forced: bool,
    pub(crate) auto_offset: bool,
    pub(crate) start_ms: Option<f64>,
    pub(crate) end_ms: Option<f64>,
    pub(crate) speedup: f64,
}

/// Validated warmup phase.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WarmupConfig {
    pub(crate) count: Option<u64>,
    pub(crate) duration: Option<Duration>,
    pub(crate) concurrency: usize,
}

/// The shard this process runs: `--shard i/N`, else Slurm (`SLURM_PROCID`/`SLURM_NTASKS`), else a
/// Kubernetes Indexed Job (`JOB_COMPLETION_INDEX` with `--shard-count`), else the whole run.
pub(crate) fn resolve_shard(
    flag: Option<&str>,
    count: Option<u32>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Shard, ConfigError> {
    let make = |index: u32, count: u32, from: &str| {
        if count == 0 || index >= count {
            return err(format!(
                "{from}: shard {index} of {count} is out of range (want 0 <= i < N)"
            ));
        }
        Ok(Shard { index, count })
    };
    let num = |v: &str, what: &str| -> Result<u32, ConfigError> {
        v.trim()
            .parse()
            .map_err(|_| ConfigError(format!("{what} {v:?} is not a non-negative integer")))
    };
    if let Some(f) = flag {
        let (i, n) = f
            .split_once('/')
            .ok_or_else(|| ConfigError(format!("--shard {f:?}: expected i/N, e.g. 0/4")))?;
        return make(
            num(i, "--shard index")?,
            num(n, "--shard count")?,
            "--shard",
        );
    }
    if let (Some(i), Some(n)) = (env("SLURM_PROCID"), env("SLURM_NTASKS")) {
        return make(
            num(&i, "SLURM_PROCID")?,
            num(&n, "SLURM_NTASKS")?,
            "SLURM_PROCID/SLURM_NTASKS",
        );
    }
    if let Some(i) = env("JOB_COMPLETION_INDEX") {
        let Some(n) = count else {
            return err(
                "JOB_COMPLETION_INDEX is set but the total is unknown: pass --shard-count N \
                 (or SPECPERF_SHARD_COUNT) with the Job's completions",
            );
        };
        return make(num(&i, "JOB_COMPLETION_INDEX")?, n, "JOB_COMPLETION_INDEX");
    }
    Ok(Shard::SINGLE)
}

/// Open loop: (rate, pattern, gamma shape).
type Rate = (f64, ArrivalPattern, f64);

impl LoadConfig {
    /// Validates the load flags (`env` gives the scheduler's environment, for the shard).
    pub(super) fn from_args(
        a: &ReplayArgs,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<LoadConfig, ConfigError> {
        let l = &a.load;
        let rate = rate(l)?;
        check_schedule_flags(l, rate.is_some())?;
        let grace = grace(l)?;
        let warmup = warmup(l, a.concurrency())?;
        let shard = resolve_shard(l.shard.as_deref(), l.shard_count, env)?;
        check_shard_split(l, a.concurrency(), shard, rate.is_some())?;
        let tol = l.schedule_lag_tolerance_ms;
        Ok(LoadConfig {
            rate,
            // Open loops and traces: --concurrency is a cap on requests in flight.
            cap: a.concurrency(),
            seed: l.random_seed,
            duration: opt_secs("benchmark-duration", l.benchmark_duration)?,
            grace,
            warmup,
            ramp: opt_secs(
                "concurrency-ramp-duration",
                l.concurrency_ramp_duration.or(l.request_rate_ramp_duration),
            )?,
            lag_tolerance: Duration::try_from_secs_f64(tol / 1e3).map_err(|_| {
                ConfigError(format!(
                    "--schedule-lag-tolerance-ms {tol} must be a non-negative number"
                ))
            })?,
            shard,
            metrics_shard: l.metrics_shard,
            trace: trace(l)?,
        })
    }
}

fn opt_secs(flag: &str, v: Option<f64>) -> Result<Option<Duration>, ConfigError> {
    v.map(|v| seconds(flag, v)).transpose()
}

/// `--request-rate` with its arrival pattern; a smoothness other than 1 turns Poisson into gamma.
fn rate(l: &LoadArgs) -> Result<Option<Rate>, ConfigError> {
    match l.request_rate() {
        None => Ok(None),
        // `inf` (vLLM's default): every request at once, capped by --concurrency when given.
        Some(r) if r == f64::INFINITY && l.benchmark_duration.is_some() => err(
            "--request-rate inf sends every request at once, so it needs a count, not \
             --benchmark-duration: give --request-count (or a finite --request-rate)",
        ),
        Some(r) if r.is_nan() || r <= 0.0 => err(format!(
            "--request-rate {r} must be a positive number of requests per second, or inf"
        )),
        Some(r) => {
            if !(l.arrival_smoothness.is_finite() && l.arrival_smoothness > 0.0) {
                return err(format!(
                    "--arrival-smoothness {} must be positive (1 = Poisson)",
                    l.arrival_smoothness
                ));
            }
            let pattern =
                if l.arrival_smoothness != 1.0 && l.arrival_pattern == ArrivalPattern::Poisson {
                    ArrivalPattern::Gamma
                } else {
                    l.arrival_pattern
                };
            Ok(Some((r, pattern, l.arrival_smoothness)))
        }
    }
}

/// Flags that only make sense for one load shape.
fn check_schedule_flags(l: &LoadArgs, open_loop: bool) -> Result<(), ConfigError> {
    if l.fixed_schedule && open_loop {
        return err("--fixed-schedule replays the trace's timestamps; drop --request-rate");
    }
    if let (Some(a), Some(b)) = (l.fixed_schedule_start_offset, l.fixed_schedule_end_offset) {
        if a > b {
            return err(format!(
                "--fixed-schedule-start-offset {a} is after --fixed-schedule-end-offset {b}"
            ));
        }
    }
    if !open_loop && l.request_rate_ramp_duration.is_some() {
        return err("--request-rate-ramp-duration needs --request-rate");
    }
    if open_loop && l.concurrency_ramp_duration.is_some() {
        return err("--concurrency-ramp-duration is for closed loop; with --request-rate use --request-rate-ramp-duration");
    }
    Ok(())
}

/// `--benchmark-grace-period`: `None` (inf) waits for every request after the duration.
fn grace(l: &LoadArgs) -> Result<Option<Duration>, ConfigError> {
    if l.benchmark_grace_period.is_infinite() && l.benchmark_grace_period > 0.0 {
        return Ok(None);
    }
    Duration::try_from_secs_f64(l.benchmark_grace_period)
        .map(Some)
        .map_err(|_| {
            ConfigError(format!(
                "--benchmark-grace-period {} must be zero, positive or inf",
                l.benchmark_grace_period
            ))
        })
}

/// The warmup phase, when a count or a duration asks for one; its concurrency defaults to the
/// run's.
fn warmup(l: &LoadArgs, concurrency: Option<usize>) -> Result<Option<WarmupConfig>, ConfigError> {
    if l.warmup_request_count.is_none() && l.warmup_duration.is_none() {
        return Ok(None);
    }
    if l.warmup_request_count == Some(0) {
        return err("--warmup-request-count must be at least 1");
    }
    Ok(Some(WarmupConfig {
        count: l.warmup_request_count,
        duration: opt_secs("warmup-duration", l.warmup_duration)?,
        concurrency: match l.warmup_concurrency {
            Some(0) => return err("--warmup-concurrency must be at least 1"),
            Some(c) => c,
            None => concurrency.unwrap_or(64),
        },
    }))
}

/// The metrics shard must be one of the run's, and a closed loop's concurrency must give every
/// shard at least one slot.
fn check_shard_split(
    l: &LoadArgs,
    concurrency: Option<usize>,
    shard: Shard,
    open_loop: bool,
) -> Result<(), ConfigError> {
    if l.metrics_shard >= shard.count {
        return err(format!(
            "--metrics-shard {} is not a shard of this run ({} shards)",
            l.metrics_shard, shard.count
        ));
    }
    if let Some(c) = concurrency {
        if (c as u64) < u64::from(shard.count) && !open_loop {
            return err(format!(
                "--concurrency {c} cannot be split over {} shards (each needs at least 1)",
                shard.count
            ));
        }
    }
    Ok(())
}

/// Trace-replay settings.
fn trace(l: &LoadArgs) -> Result<TraceConfig, ConfigError> {
    if !(l.trace_speedup.is_finite() && l.trace_speedup > 0.0) {
        return err(format!(
            "--trace-speedup {} must be a positive number",
            l.trace_speedup
        ));
    }
    Ok(TraceConfig {
        forced: l.fixed_schedule,
        auto_offset: l.fixed_schedule_auto_offset,
        start_ms: l.fixed_schedule_start_offset,
        end_ms: l.fixed_schedule_end_offset,
        speedup: l.trace_speedup,
    })
}
