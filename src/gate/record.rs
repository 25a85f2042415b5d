//! The gate's output contract: the verdict, the reason codes of `schemas/al_gate.v1.json` and the
//! result file `al_gate_<RESULT_FILENAME>.json` as one typed record.
//!
//! ```text
//!  settings / plan / run fill a GateRecord as they learn things ─> finish (defaults, verdict,
//!  timestamps) ─> JSON (keys sorted, 2-space indent, trailing newline) ─> fsutil::write_atomic
//! ```
//!
//! The file's keys are sorted because the M1 evaluator's files are (`json.dump(sort_keys=True)`):
//! the struct declares its fields in byte order of their names, and a test holds it to that, so
//! serde writes them sorted without a sorting pass. Keys the contract marks optional
//! (`artifact_dir`, `error`, `timeout_s`) are absent when unknown; every other unknown is `null`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Serialize, Serializer};

use crate::cli::GateArgs;
use crate::render::EndpointType;
use crate::timefmt::rfc3339_now;

/// Version of the gate's extension fields.
const GATE_VERSION: u32 = 1;

/// The outcome class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Within ±5 % of the golden AL (inclusive).
    Pass,
    /// Below the band.
    Below,
    /// Above the band.
    Above,
    /// Not measured, for a reason that is not a failure of the server.
    Skipped,
    /// Could not measure (also a record not yet finished).
    #[default]
    Error,
}

impl Verdict {
    /// The file's `verdict` string.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Below => "below",
            Verdict::Above => "above",
            Verdict::Skipped => "skipped",
            Verdict::Error => "error",
        }
    }
}

/// Why a gate was skipped or failed: the `reason` codes of the schema, each with its verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reason {
    /// `SPEC_DECODING` is empty or `none`.
    SpecDecodingDisabled,
    /// No SPEED-Bench prompts file.
    NoPrompts,
    /// The curve has no collection block for this thinking mode.
    CurveWithoutCollectionMetadata,
    /// TileRT exposes no speculative counters.
    Tilert,
    /// Dynamo vLLM data-parallel metrics cover the leader ranks only.
    LeaderOnlyDpMetrics,
    /// The metrics pages carry no speculative counters.
    NoCounters,
    /// No golden curve or cell for this deployment.
    NoGoldenCurve,
    /// The golden file or collection metadata is malformed.
    InvalidGolden,
    /// `FRAMEWORK` names no known metrics family.
    UnsupportedFramework,
    /// The prompts do not make the collection the curve was measured on.
    DatasetInvalid,
    /// Requests failed, the server was not ready, or the replay stalled.
    ClientFailed,
    /// A metrics endpoint did not answer or parse.
    MetricsUnreachable,
    /// A counter went backwards during the window.
    CounterReset,
    /// The counter deltas give no valid AL.
    InvalidDeltas,
    /// Counters still moved after the settle wait.
    CountersNotSettled,
    /// `AL_GATE_TIMEOUT_S` expired.
    Timeout,
    /// SIGINT or SIGTERM.
    Terminated,
    /// A setting is missing or malformed.
    ConfigInvalid,
    /// A bug: a state the gate should not reach.
    Internal,
}

impl Reason {
    /// Every code, in the schema's order (for the schema test).
    #[cfg(test)]
    const ALL: [Reason; 19] = [
        Reason::SpecDecodingDisabled,
        Reason::NoPrompts,
        Reason::CurveWithoutCollectionMetadata,
        Reason::Tilert,
        Reason::LeaderOnlyDpMetrics,
        Reason::NoCounters,
        Reason::NoGoldenCurve,
        Reason::InvalidGolden,
        Reason::UnsupportedFramework,
        Reason::DatasetInvalid,
        Reason::ClientFailed,
        Reason::MetricsUnreachable,
        Reason::CounterReset,
        Reason::InvalidDeltas,
        Reason::CountersNotSettled,
        Reason::Timeout,
        Reason::Terminated,
        Reason::ConfigInvalid,
        Reason::Internal,
    ];

    /// The file's `reason` string (also on the console line).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Reason::SpecDecodingDisabled => "spec_decoding_disabled",
            Reason::NoPrompts => "no_prompts",
            Reason::CurveWithoutCollectionMetadata => "curve_without_collection_metadata",
            Reason::Tilert => "tilert",
            Reason::LeaderOnlyDpMetrics => "leader_only_dp_metrics",
            Reason::NoCounters => "no_counters",
            Reason::NoGoldenCurve => "no_golden_curve",
            Reason::InvalidGolden => "invalid_golden",
            Reason::UnsupportedFramework => "unsupported_framework",
            Reason::DatasetInvalid => "dataset_invalid",
            Reason::ClientFailed => "client_failed",
            Reason::MetricsUnreachable => "metrics_unreachable",
            Reason::CounterReset => "counter_reset",
            Reason::InvalidDeltas => "invalid_deltas",
            Reason::CountersNotSettled => "counters_not_settled",
            Reason::Timeout => "timeout",
            Reason::Terminated => "terminated",
            Reason::ConfigInvalid => "config_invalid",
            Reason::Internal => "internal",
        }
    }

    /// Skips are conditions of the deployment, not failures of the server (§5.4): the gate has
    /// nothing to measure. Every other reason is an error.
    fn verdict(self) -> Verdict {
        match self {
            Reason::SpecDecodingDisabled
            | Reason::NoPrompts
            | Reason::CurveWithoutCollectionMetadata
            | Reason::Tilert
            | Reason::LeaderOnlyDpMetrics
            | Reason::NoCounters => Verdict::Skipped,
            _ => Verdict::Error,
        }
    }
}

impl Serialize for Reason {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A non-pass outcome found on the way: the gate's error type. Its verdict follows from the
/// reason; the message becomes the file's `error`.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct Stop {
    pub(crate) reason: Reason,
    pub(crate) message: String,
}

impl Stop {
    /// A stop for `reason`, explained by `message`.
    pub(crate) fn new(reason: Reason, message: impl Into<String>) -> Stop {
        Stop {
            reason,
            message: message.into(),
        }
    }
}

/// Why the result file could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The result directory could not be created.
    #[error("cannot create {}: {source}", dir.display())]
    CreateDir {
        /// The directory.
        dir: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The record did not encode (not expected: every field is plain data).
    #[error("{0}")]
    Encode(#[from] serde_json::Error),
    /// The atomic write failed.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// Every field of the result file; the order of the fields is the sorted order of the keys.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct GateRecord {
    pub(crate) acceptance_length: Option<f64>,
    pub(crate) acceptance_rate: Option<f64>,
    pub(crate) accepted_tokens: Option<u64>,
    pub(crate) al_gate_version: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) artifact_dir: Option<String>,
    pub(crate) category: Option<String>,
    pub(crate) collection_concurrency: Option<u32>,
    pub(crate) concurrency: Option<u32>,
    pub(crate) curve: Option<String>,
    pub(crate) draft_tokens: Option<u64>,
    pub(crate) duration_s: f64,
    pub(crate) endpoint_kind: Option<EndpointType>,
    pub(crate) endpoints: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    pub(crate) finished_at: String,
    pub(crate) framework: Option<String>,
    pub(crate) golden_file: Option<String>,
    pub(crate) max_acceptance_length: Option<f64>,
    pub(crate) max_threshold_ratio: f64,
    pub(crate) metric_source: Option<String>,
    pub(crate) min_acceptance_length: Option<f64>,
    pub(crate) model: Option<String>,
    pub(crate) model_key: Option<String>,
    pub(crate) model_prefix: Option<String>,
    pub(crate) num_speculative_tokens: Option<u32>,
    pub(crate) output_len: Option<u32>,
    pub(crate) passed: bool,
    pub(crate) per_position_acceptance: Option<Vec<f64>>,
    pub(crate) prompt_render: Option<PromptRender>,
    pub(crate) prompts_completed: Option<u64>,
    pub(crate) prompts_expected: Option<u32>,
    pub(crate) prompts_failed: Option<u64>,
    pub(crate) proposed_draft_tokens: Option<u64>,
    pub(crate) reason: Option<Reason>,
    pub(crate) reference_acceptance_length: Option<f64>,
    pub(crate) result_filename: Option<String>,
    pub(crate) settle_s: Option<f64>,
    pub(crate) specperf_version: &'static str,
    pub(crate) speedbench_al_eval_version: u32,
    pub(crate) started_at: String,
    pub(crate) task: &'static str,
    pub(crate) temperature: Option<f64>,
    pub(crate) thinking_mode: Option<String>,
    pub(crate) threshold_ratio: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) timeout_s: Option<f64>,
    pub(crate) verdict: Verdict,
    pub(crate) verify_steps: Option<u64>,
}

/// Who renders the prompt: `client` (an encoder or template here) or `server` (its chat
/// template).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum PromptRender {
    /// Rendered here, sent to `/v1/completions`.
    Client,
    /// The server's chat template.
    Server,
}

/// A finished gate: the result file's content and where it went.
#[derive(Debug)]
pub struct GateResult {
    /// The verdict.
    pub verdict: Verdict,
    /// Every field of the result file.
    pub(crate) record: GateRecord,
    /// Where the file was written, or why it could not be.
    pub written: Result<PathBuf, WriteError>,
}

impl GateResult {
    /// The console line: the verdict by name (`PASS`, `BELOW`, `ABOVE`, `SKIPPED`, `ERROR`), the
    /// measured AL, the band and golden value, the cell, and for a skip or an error the reason
    /// code with its text. What is unknown is left out, never printed as `None`. (It replaces
    /// M1's `PASS|FAIL: ... [error: <code>]`, which hid the reason's text and the direction.)
    pub fn console_line(&self) -> String {
        let r = &self.record;
        let status = self.verdict.as_str().to_ascii_uppercase();
        let mut line = format!("{status}: SpeedBench AL ");
        match r.acceptance_length {
            Some(al) => line.push_str(&format!("{al:.4}")),
            None => line.push_str("not measured"),
        }
        if let (Some(lo), Some(hi)) = (r.min_acceptance_length, r.max_acceptance_length) {
            let relation = match self.verdict {
                Verdict::Pass => " within",
                Verdict::Below => " below",
                Verdict::Above => " above",
                Verdict::Skipped | Verdict::Error => "; band",
            };
            line.push_str(&format!("{relation} [{lo:.4}, {hi:.4}]"));
            if let Some(g) = r.reference_acceptance_length {
                line.push_str(&format!(" (golden {g:.4} +/- 5%)"));
            }
        }
        let cell: Vec<String> = [
            r.thinking_mode.as_ref().map(|m| format!("mode {m}")),
            r.num_speculative_tokens.map(|k| format!("mtp {k}")),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !cell.is_empty() {
            line.push_str(&format!(", {}", cell.join(", ")));
        }
        if let (Some(code), Verdict::Skipped | Verdict::Error) = (r.reason, self.verdict) {
            let text = r.error.as_deref().unwrap_or("").replace('\n', " ");
            line.push_str(&format!("; {}: {text}", code.as_str()));
        }
        line
    }
}

/// The model name sent: `--model`/`MODEL_NAME`, else `MODEL`.
pub(crate) fn model(a: &GateArgs) -> Option<String> {
    a.model
        .clone()
        .or_else(|| std::env::var("MODEL").ok().filter(|v| !v.trim().is_empty()))
}

/// The directory of the result file.
pub(crate) fn result_dir(a: &GateArgs) -> PathBuf {
    a.result_dir.clone().unwrap_or_else(|| PathBuf::from("."))
}

/// `RESULT_FILENAME` (flag or environment, one value through clap), checked by the replay's own
/// rule: a plain file name, so the result and the artifacts land inside `RESULT_DIR`. The gate
/// checks it before anything runs and names its files from it.
pub(crate) fn result_name(a: &GateArgs) -> Result<&str, Stop> {
    let name = a.result_filename.as_deref().ok_or_else(|| {
        Stop::new(
            Reason::ConfigInvalid,
            "RESULT_FILENAME is required (--result-filename NAME)",
        )
    })?;
    crate::config::result_file_name(name)
        .map_err(|e| Stop::new(Reason::ConfigInvalid, e.to_string()))?;
    Ok(name)
}

/// Rounds to `digits` decimals the way `printf "%.Nf"` does (from the exact binary value).
pub(crate) fn round_to(x: f64, digits: usize) -> f64 {
    format!("{x:.digits$}").parse().unwrap_or(x)
}

impl GateRecord {
    /// Completes the record for `outcome` (the M1 defaults, verdict, timestamps), picks the file
    /// name and writes it.
    pub(crate) fn finish(
        mut self,
        a: &GateArgs,
        outcome: Result<Verdict, Stop>,
        started: Instant,
        started_at: String,
    ) -> GateResult {
        let (verdict, reason, message) = match outcome {
            Ok(v) => (v, None, None),
            Err(s) => (s.reason.verdict(), Some(s.reason), Some(s.message)),
        };
        // Which file: al_gate_<RESULT_FILENAME>.json, or al_gate.json with config_invalid.
        let (name, verdict, reason, message) = match result_name(a) {
            Ok(n) => (format!("al_gate_{n}.json"), verdict, reason, message),
            Err(e) => (
                "al_gate.json".to_owned(),
                Verdict::Error,
                Some(e.reason),
                Some(e.message),
            ),
        };
        if verdict == Verdict::Skipped {
            // Skipped carries no number (§5.4); an error may keep one it measured.
            self.acceptance_length = None;
        }
        // What the settings did not get to normalise is written as given.
        self.model = model(a);
        self.model_prefix = self.model_prefix.or_else(|| a.model_prefix.clone());
        self.thinking_mode = self.thinking_mode.or_else(|| a.thinking_mode.clone());
        self.framework = self
            .framework
            .or_else(|| Some(a.framework.clone().unwrap_or_else(|| "vllm".into())));
        self.speedbench_al_eval_version = 1;
        self.task = "speedbench_al";
        self.threshold_ratio = 0.95;
        self.max_threshold_ratio = 1.05;
        self.passed = verdict == Verdict::Pass;
        self.verdict = verdict;
        self.reason = reason;
        self.error = message;
        self.al_gate_version = GATE_VERSION;
        self.result_filename = a.result_filename.clone();
        self.specperf_version = env!("CARGO_PKG_VERSION");
        self.started_at = started_at;
        self.finished_at = rfc3339_now();
        self.duration_s = round_to(started.elapsed().as_secs_f64(), 3);
        let path = result_dir(a).join(&name);
        let written = self.write(&path).map(|()| path);
        GateResult {
            verdict,
            record: self,
            written,
        }
    }

    /// The file's text: keys sorted (field order), 2-space indent, trailing newline.
    fn to_json(&self) -> Result<String, serde_json::Error> {
        let mut text = serde_json::to_string_pretty(self)?;
        text.push('\n');
        Ok(text)
    }

    /// Writes the file atomically, creating its directory.
    fn write(&self, path: &Path) -> Result<(), WriteError> {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|source| WriteError::CreateDir {
            dir: dir.to_owned(),
            source,
        })?;
        let text = self.to_json()?;
        crate::fsutil::write_atomic(path, text.as_bytes()).map_err(|source| WriteError::Write {
            path: path.to_owned(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The field order is the key order the contract wants, and every key is declared by the
    /// schema (which also lists every reason code).
    #[test]
    fn record_keys_are_sorted_and_declared() {
        let r = GateRecord {
            artifact_dir: Some("a".into()),
            error: Some("e".into()),
            timeout_s: Some(1.0),
            ..GateRecord::default()
        };
        let text = r.to_json().unwrap();
        assert!(text.ends_with("}\n"));
        let keys: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("  \""))
            .filter_map(|l| l.split_once("\":").map(|(k, _)| k))
            .collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(keys, sorted);
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../schemas/al_gate.v1.json")).unwrap();
        let props = schema["properties"].as_object().unwrap();
        assert_eq!(keys.len(), props.len());
        for k in &keys {
            assert!(props.contains_key(*k), "{k}");
        }
        let codes: Vec<&str> = schema["properties"]["reason"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(serde_json::Value::as_str)
            .collect();
        let ours: Vec<&str> = Reason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(codes, ours);
    }

    #[test]
    fn unknowns_are_null_and_optional_keys_absent() {
        let text = GateRecord::default().to_json().unwrap();
        assert!(text.contains("\n  \"acceptance_length\": null,\n"));
        for k in ["artifact_dir", "error", "timeout_s"] {
            assert!(!text.contains(&format!("\"{k}\":")), "{k}");
        }
    }
}
