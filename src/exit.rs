//! Process exit codes, and the one place where outcomes and errors map to them (documented in
//! `--help` and docs/replaying.md). The library never exits: `main` asks [`ExitStatus::exit_code`] (or
//! [`exit_code`] for a finished run) and returns the number.

use crate::bench_serving::BenchServingOutcome;
use crate::engine::{EngineError, RunOutcome};
use crate::inject::{EntryState, InjectError, InjectOutcome, InjectReport};
use crate::merge::MergeError;
use crate::scrape::{DrainError, DrainOutcome, DrainReason};
use crate::stop::StopReason;

/// Run complete, failures within the threshold.
pub const OK: i32 = 0;
/// Run failed (threshold exceeded, no success, stalled, artifacts not written, an AgentX root
/// warmup request failed, the live AgentX failed-request threshold was crossed).
pub const FAILED: i32 = 1;
/// Usage or configuration error.
pub const USAGE: i32 = 2;
/// Server not ready.
pub const NOT_READY: i32 = 3;
/// Whole-run deadline expired (`drain`: still busy at --max-wait-seconds).
pub const DEADLINE: i32 = 124;
/// `drain`: an endpoint's page carries none of the known queue gauges, so it cannot be seen to be
/// idle.
pub const NO_QUEUE_GAUGES: i32 = 4;
/// Interrupted by SIGINT.
pub const SIGINT: i32 = 130;
/// Terminated by SIGTERM.
pub const SIGTERM: i32 = 143;

/// An outcome or error that decides the process's exit code.
pub trait ExitStatus {
    /// The exit code `main` returns for it.
    fn exit_code(&self) -> i32;
}

impl ExitStatus for StopReason {
    /// 130, 143, 124 for SIGINT, SIGTERM and the deadline; 1 for the stall watchdog and
    /// AgentX's own stops (InferenceX's post-run pipeline fails the job on a non-zero replay
    /// exit).
    fn exit_code(&self) -> i32 {
        match self {
            StopReason::Interrupted => SIGINT,
            StopReason::Terminated => SIGTERM,
            StopReason::Deadline => DEADLINE,
            StopReason::Stalled | StopReason::WarmupFailed | StopReason::FailedThreshold => FAILED,
        }
    }
}

/// The exit code of a command that runs many (a sweep, categories, server cells, golden-curve
/// collection): a signal's (130, 143) first, else `worst`, the worst of its runs' codes.
pub fn of_many(stopped: Option<StopReason>, worst: i32) -> i32 {
    match stopped {
        Some(reason @ (StopReason::Interrupted | StopReason::Terminated)) => reason.exit_code(),
        _ => worst,
    }
}

/// The exit code for a finished run: the stop reason first, then missing artifacts, missing
/// required figures (a side task's panic) or no success, then the failed fraction against `failed_threshold`.
pub fn exit_code(outcome: &RunOutcome, failed_threshold: f64) -> i32 {
    if let Some(reason) = outcome.stopped_by {
        return reason.exit_code();
    }
    let c = &outcome.summary.counts;
    if outcome.artifact_error.is_some() || outcome.failed_requirement.is_some() || c.success == 0 {
        return FAILED;
    }
    let done = c.success + c.failed;
    if done > 0 && c.failed as f64 / done as f64 > failed_threshold {
        return FAILED;
    }
    OK
}

impl ExitStatus for EngineError {
    /// 3 when the server never answered or its host does not resolve; 2 when the inputs are wrong (collection, load, model,
    /// open-file limit, URL, an unwritable output directory, a routing the server refuses); 1
    /// otherwise.
    fn exit_code(&self) -> i32 {
        match self {
            EngineError::NotReady { .. } | EngineError::Resolve { .. } => NOT_READY,
            EngineError::Dataset(_)
            | EngineError::Agentx(_)
            | EngineError::Load(_)
            | EngineError::NoModel(_)
            | EngineError::OpenFiles(_)
            | EngineError::OutputDir { .. }
            | EngineError::SessionControl { .. }
            | EngineError::Url { .. } => USAGE,
            _ => FAILED,
        }
    }
}

impl ExitStatus for BenchServingOutcome {
    /// bench-serving (docs/bench-serving.md): 0 for help; 2 for what the command line or its
    /// files cannot give; 1 where upstream ends with an exception (sa-bench's failed initial
    /// test); for a finished run the stop reason first, then 1 when the result (or the asked-for
    /// `--artifact-dir`) could not be written or holds a TPOT of 0, or the required GPU
    /// telemetry was lost, or (InferenceX's flavor) more
    /// than 5 % failed.
    fn exit_code(&self) -> i32 {
        let f = match self {
            BenchServingOutcome::Help => return OK,
            BenchServingOutcome::Usage => return USAGE,
            BenchServingOutcome::Failed => return FAILED,
            BenchServingOutcome::Finished(f) => f,
        };
        if let Some(reason) = f.stopped_by {
            return reason.exit_code();
        }
        if f.result_unwritten
            || f.zero_tpot
            || f.artifacts_unwritten
            || f.required_telemetry_lost
            || f.over_failure_threshold()
        {
            return FAILED;
        }
        OK
    }
}

impl ExitStatus for MergeError {
    /// 1 when the merged report could not be written; 2 when the inputs do not make one run.
    fn exit_code(&self) -> i32 {
        match self {
            MergeError::Write { .. } | MergeError::Report(_) => FAILED,
            _ => USAGE,
        }
    }
}

impl ExitStatus for InjectError {
    /// 2 for bad flags or environment values, 1 for recipe and curve failures (see
    /// `specperf inject --help`).
    fn exit_code(&self) -> i32 {
        if self.is_usage() {
            USAGE
        } else {
            FAILED
        }
    }
}

impl ExitStatus for InjectReport {
    /// 0, except `--check` finding an entry broken (1). A rewrite that ran repaired every broken
    /// entry (it is verified before the write), so the lint's code must not leak into it: the
    /// launcher runs `inject ... || exit 1`.
    fn exit_code(&self) -> i32 {
        let broken = self.outcome == InjectOutcome::Checked
            && self
                .entries
                .iter()
                .any(|e| matches!(e.state, EntryState::Broken { .. }));
        if broken {
            FAILED
        } else {
            OK
        }
    }
}

impl ExitStatus for DrainOutcome {
    /// 0 drained, 124 timed out, 4 no queue gauges, 130/143 stopped by SIGINT/SIGTERM (1 for any
    /// other stop).
    fn exit_code(&self) -> i32 {
        match self.reason {
            DrainReason::Drained => OK,
            DrainReason::Timeout => DEADLINE,
            DrainReason::NoQueueGauges => NO_QUEUE_GAUGES,
            DrainReason::Cancelled => match self.stopped_by {
                Some(StopReason::Interrupted) => SIGINT,
                Some(StopReason::Terminated) => SIGTERM,
                _ => FAILED,
            },
        }
    }
}

impl ExitStatus for DrainError {
    /// 2 for settings that can never work, 1 otherwise (the client, the outcome file).
    fn exit_code(&self) -> i32 {
        if self.is_usage() {
            USAGE
        } else {
            FAILED
        }
    }
}
