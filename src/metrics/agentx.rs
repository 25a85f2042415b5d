//! What an AgentX replay adds to the summary: the theoretical prefix-cache block counts, the
//! context-overflow and grace-cancelled records (counted apart from the statistics), and the
//! run's provenance and submission validity for `profile_export_aiperf.json`'s `metadata`.

use serde::Serialize;

use crate::record::{Outcome, Phase, RequestRecord, SessionMeta};

/// Counts from the records' `SessionMeta`, over profiling
/// records (present in the summary only when a record carried session metadata).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AgentxCounts {
    /// Σ leading `hash_ids` already seen earlier in the trace, over successful profiling
    /// requests (AIPerf's `theoretical_prefix_cache_hit.sum`).
    pub theoretical_cache_hit_blocks: u64,
    /// Σ `hash_ids`, over the same requests (`theoretical_prefix_cache_hit.count`).
    pub theoretical_cache_total_blocks: u64,
    /// Answered "prompt over the context": the session ended there; left out of every
    /// statistic and of `profile_export.jsonl`, counted here.
    pub context_overflow: u64,
    /// Still in flight when the benchmark grace period ran out: cancelled (also in
    /// `counts.cancelled`), not errors in the AIPerf export.
    pub cancelled_at_grace: u64,
    /// Profiling responses, context overflows included (the overflow rate's denominator).
    pub responses: u64,
}

impl AgentxCounts {
    /// Folds in one record with session metadata. Returns true when the record is a context
    /// overflow, which nothing else may count.
    pub(crate) fn add(&mut self, r: &RequestRecord) -> bool {
        let Some(s) = r.session.as_deref() else {
            return false;
        };
        if r.phase == Phase::Warmup {
            return s.context_overflow;
        }
        self.count(r, s)
    }

    /// [`Self::add`] whatever the record's phase (the warmup aggregator counts its own).
    pub(crate) fn count(&mut self, r: &RequestRecord, s: &SessionMeta) -> bool {
        self.responses += 1;
        if s.context_overflow {
            self.context_overflow += 1;
            return true;
        }
        match r.outcome {
            Outcome::Cancelled => self.cancelled_at_grace += 1,
            // AIPerf counts only valid records, a hit count clamped to the turn's blocks.
            Outcome::Success if s.cache_total_blocks > 0 => {
                self.theoretical_cache_hit_blocks += s.cache_hit_blocks.min(s.cache_total_blocks);
                self.theoretical_cache_total_blocks += s.cache_total_blocks;
            }
            _ => {}
        }
        false
    }

    /// Share of profiling responses that were context overflows.
    pub fn context_overflow_rate(&self) -> f64 {
        if self.responses == 0 {
            0.0
        } else {
            self.context_overflow as f64 / self.responses as f64
        }
    }
}

/// `metadata.dataset` of `profile_export_aiperf.json` (AIPerf's dataset provenance).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub(crate) struct Provenance {
    /// `public_dataset` or `file`.
    pub(crate) source_type: String,
    /// The `--public-dataset` alias.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) loader: Option<String>,
    /// The Hugging Face dataset repo (`semianalysisai/cc-traces-weka-062126`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) hf_dataset_name: Option<String>,
    /// `train`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) hf_split: Option<String>,
    /// `--num-dataset-entries`, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) num_dataset_entries: Option<usize>,
}

/// What the configuration says about an AgentX run, for the AIPerf summary's `metadata`.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct AgentxRunMeta {
    /// Where the traces came from.
    pub(crate) dataset: Provenance,
    /// `inferencex-agentx-mvp` under AIPerf's scenario.
    pub(crate) scenario: Option<String>,
    /// Reasons known before the run (`unsafe_override`).
    pub(crate) invalid_reasons: Vec<String>,
    /// Above this context-overflow rate the submission is invalid.
    pub(crate) overflow_rate_limit: f64,
    /// The replay's settings as AIPerf records them in `input_config`.
    pub(crate) settings: AgentxInputs,
}

/// What an AgentX run was asked to do, in the terms of AIPerf's `input_config` (its
/// `BenchmarkConfig`): written beside the common fields so a reader sees the replay's knobs.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct AgentxInputs {
    /// The traces file or directory read (the hub cache's `traces.jsonl` for a public dataset).
    pub(crate) traces: String,
    /// The tokenizer prompts were cut with.
    pub(crate) tokenizer: String,
    /// `--unsafe-override` was given.
    pub(crate) unsafe_override: bool,
    /// `--trace-idle-gap-cap-seconds`, when given.
    pub(crate) trace_idle_gap_cap_s: Option<f64>,
    /// The whole-system idle cap in force, seconds.
    pub(crate) system_idle_gap_cap_s: f64,
    /// `--trajectory-start-min-ratio` / `--trajectory-start-max-ratio` in force.
    pub(crate) trajectory_start_ratios: (f64, f64),
}

impl AgentxRunMeta {
    /// Every reason the run is not a valid submission: the configuration's, then
    /// `run_cancelled` (a signal or the live failed-request threshold stopped it), then
    /// `context_overflow_rate_exceeded`.
    pub(crate) fn invalid_reasons(&self, counts: &AgentxCounts, cancelled: bool) -> Vec<String> {
        let mut reasons = self.invalid_reasons.clone();
        if cancelled {
            reasons.push("run_cancelled".to_owned());
        }
        if counts.context_overflow_rate() > self.overflow_rate_limit {
            reasons.push("context_overflow_rate_exceeded".to_owned());
        }
        reasons
    }
}

/// The AgentX replay's subagent bookkeeping over the profiling phase, AIPerf 0.13's
/// `BranchStats` (its names): what the engine did with the traces' spawns and joins, for
/// `profile_export_aiperf.json`'s `branch_stats`. Counted by the lane scheduler as it goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct BranchStats {
    /// Child streams started (spawned by a root turn, or live in the t* snapshot).
    pub(crate) children_spawned: u64,
    /// Children that sent their last turn.
    pub(crate) children_completed: u64,
    /// Children ended by a failed request that stopped them (a context overflow).
    pub(crate) children_errored: u64,
    /// Children cut short by the end of the run (no new turn after the duration, or a stop).
    pub(crate) children_truncated: u64,
    /// Children whose first turn waited for its recorded offset from the spawn (not sent at
    /// once).
    pub(crate) children_delayed: u64,
    /// Root turns that had to wait at a join for children still running.
    pub(crate) parents_suspended: u64,
    /// Of those, the ones sent once the last child ended.
    pub(crate) parents_resumed: u64,
    /// Joins not sent because a child failed (`AIPERF_DAG_FAIL_FAST`).
    pub(crate) parents_failed_due_to_child_error: u64,
    /// Joins a suspended root never sent because the run ended first.
    pub(crate) joins_suppressed: u64,
    /// AIPerf's request-free orchestrator graphs: none in a trace replay (always 0).
    pub(crate) graphs_admitted: u64,
    /// As `graphs_admitted` (always 0).
    pub(crate) graphs_completed_to_end: u64,
}
