//! What an AgentX replay adds to the summary: the theoretical prefix-cache block counts, the
//! context-overflow and grace-cancelled records (counted apart from the statistics), and the
//! run's provenance and submission validity for `profile_export_aiperf.json`'s `metadata`.

use serde::Serialize;

use crate::record::{Outcome, Phase, RequestRecord};

/// Counts from the records' [`SessionMeta`](crate::record::SessionMeta), over profiling
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
