//! Golden AL curves: the committed reference acceptance lengths, one YAML file per curve
//! (`golden_al_distribution/<curve>.yaml`), and the rules that pick the curve and cell for a
//! deployment (InferenceX contract §1, §2, §4).
//!
//! ```text
//!  MODEL_PREFIX, spec method, draft model, draft sampling ──curve_name──> "dsv4_mtp"
//!  GoldenSource (file or directory) ──load_curve──> GoldenCurve ──lookup(thinking, k)──> AL
//! ```
//!
//! Used by `inject` (the AL a synthetic run must fake) and by the AL gate (the AL a real run must
//! reach). A curve file is validated when loaded (one model key, known thinking modes, integer
//! draft lengths); a cell's value is validated when it is looked up (finite, `1 ≤ AL ≤ k + 1`),
//! so one bad cell does not make the rest of the curve unusable. The optional `collection` block
//! (§4) is parsed into [`Collection`]; curves without one load with `collection: None`.
//!
//! Here: the thinking modes and the error type. `curve` reads one curve file and looks up a cell,
//! `select` picks the curve for a deployment, `collection` reads the collection block, and
//! `framework` holds the `FRAMEWORK` alias table the gate and `inject` share (it lives here, the
//! lowest module both already use, so neither imports the other).

mod collection;
mod curve;
mod framework;
mod select;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

pub use collection::Collection;
pub(crate) use collection::{CollectionEndpoint, ModeKwargs, Renderer, Sampling, Turns};
pub use curve::{parse_draft_len, GoldenCurve};
pub(crate) use framework::Framework;
pub use select::{CurveQuery, GoldenSource, GoldenValue};

use crate::yaml::YamlError;

/// The reserved key of the collection block (§4).
const COLLECTION_KEY: &str = "collection";

/// Thinking mode of a curve block (`thinking_on` / `thinking_off`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum ThinkingMode {
    /// `thinking_on`.
    #[serde(rename = "thinking_on")]
    On,
    /// `thinking_off`.
    #[serde(rename = "thinking_off")]
    Off,
}

impl ThinkingMode {
    /// Both, in a curve file's order.
    pub(crate) const ALL: [ThinkingMode; 2] = [ThinkingMode::On, ThinkingMode::Off];

    /// The key used in curve files and in `THINKING_MODE`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ThinkingMode::On => "thinking_on",
            ThinkingMode::Off => "thinking_off",
        }
    }

    fn from_key(key: &str) -> Option<Self> {
        match key {
            "thinking_on" => Some(ThinkingMode::On),
            "thinking_off" => Some(ThinkingMode::Off),
            _ => None,
        }
    }
}

impl fmt::Display for ThinkingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ThinkingMode {
    type Err = GoldenError;

    /// Accepts `thinking_on` / `thinking_off` (the `THINKING_MODE` values) and `on` / `off`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "thinking_on" | "on" => Ok(ThinkingMode::On),
            "thinking_off" | "off" => Ok(ThinkingMode::Off),
            other => Err(GoldenError::InvalidThinkingMode {
                value: other.to_owned(),
            }),
        }
    }
}

/// Why a curve could not be loaded, selected or looked up. Messages start with the contract's
/// wording and end with the fix.
#[derive(Debug, thiserror::Error)]
pub enum GoldenError {
    /// `--golden` names nothing.
    #[error("golden path {} does not exist (pass --golden with a curve file or the golden_al_distribution directory)", path.display())]
    NotFound {
        /// The path given.
        path: PathBuf,
    },
    /// The file could not be read or is not valid YAML.
    #[error("golden curve {}: {source}", file.display())]
    Yaml {
        /// The curve file.
        file: PathBuf,
        /// What went wrong.
        source: YamlError,
    },
    /// A collection metadata file (`--collection-metadata`) could not be read or is not valid
    /// YAML.
    #[error("collection metadata {}: {source} (--collection-metadata / AL_GATE_COLLECTION_METADATA)", file.display())]
    CollectionYaml {
        /// The collection metadata file.
        file: PathBuf,
        /// What went wrong.
        source: YamlError,
    },
    /// Not exactly one model key (besides `collection`).
    #[error("Expected one model in golden curve {} (found {}: {}); keep exactly one model key, plus optionally `collection`", file.display(), found.len(), found.join(", "))]
    ModelCount {
        /// The curve file.
        file: PathBuf,
        /// The model keys found.
        found: Vec<String>,
    },
    /// A structural problem not covered by the other variants.
    #[error("Malformed golden curve {}: {what}", file.display())]
    Malformed {
        /// The curve file.
        file: PathBuf,
        /// What is wrong and how to fix it.
        what: String,
    },
    /// A mode key other than `thinking_on` / `thinking_off`.
    #[error("Unknown thinking mode {key} in {} (expected thinking_on or thinking_off)", file.display())]
    UnknownThinkingMode {
        /// The curve file.
        file: PathBuf,
        /// The key found.
        key: String,
    },
    /// A cell key that is not an unquoted integer ≥ 1.
    #[error("Invalid draft length {key} in {} (cell keys are unquoted integers >= 1)", file.display())]
    InvalidDraftLengthKey {
        /// The curve file.
        file: PathBuf,
        /// The key as written.
        key: String,
    },
    /// The looked-up cell is not a finite AL within `1 ≤ AL ≤ k + 1`.
    #[error("Invalid golden acceptance {value} in {} ({curve}/{thinking}/{k}: must be a finite number with 1 <= AL <= {}); fix the curve file", file.display(), k + 1)]
    InvalidGolden {
        /// The curve file.
        file: PathBuf,
        /// Curve name.
        curve: String,
        /// Thinking mode looked up.
        thinking: ThinkingMode,
        /// Draft length looked up.
        k: u32,
        /// The value as written.
        value: String,
    },
    /// A requested draft length that is not a positive integer.
    #[error("Invalid draft length {k} (num_speculative_tokens must be a positive integer)")]
    InvalidDraftLength {
        /// The value given.
        k: String,
    },
    /// `THINKING_MODE` is neither `thinking_on` nor `thinking_off`.
    #[error("Invalid thinking mode {value:?} (THINKING_MODE must be thinking_on or thinking_off)")]
    InvalidThinkingMode {
        /// The value given.
        value: String,
    },
    /// Kimi-K3 DSpark needs `draft_sample_method` probabilistic or greedy.
    #[error("No Kimi DSpark golden curve for draft sampling {value} (set speculative-config draft_sample_method to probabilistic or greedy)")]
    KimiSampling {
        /// The value found, or `<absent>`.
        value: String,
    },
    /// The composed curve name has characters outside `[a-z0-9_.-]`.
    #[error("Invalid golden curve name {curve} (MODEL_PREFIX and the method must be lower-case letters, digits, '.', '_' or '-')")]
    InvalidCurveName {
        /// The composed name.
        curve: String,
    },
    /// No `<curve>.yaml` in the golden directory.
    #[error("No committed golden curve for {prefix}/{method}: {} (check MODEL_PREFIX and the speculative method, or commit the curve)", file.display())]
    NoCurve {
        /// `MODEL_PREFIX`.
        prefix: String,
        /// The speculative method as configured.
        method: String,
        /// The file looked for.
        file: PathBuf,
    },
    /// `--golden` is one file, but the selection wants another curve.
    #[error("Golden file {} holds curve {held}, but the deployment selects {curve} (pass the golden directory, or the file {curve}.yaml)", file.display())]
    FileMismatch {
        /// The file given.
        file: PathBuf,
        /// Its curve name (file stem).
        held: String,
        /// The curve selected.
        curve: String,
    },
    /// The curve has no value for this thinking mode and draft length.
    #[error("No golden acceptance for {curve}/{thinking}/{k} draft tokens (the curve has k = {available} for {thinking}; use a measured draft length)")]
    NoCell {
        /// Curve name.
        curve: String,
        /// Thinking mode.
        thinking: ThinkingMode,
        /// Draft length.
        k: u32,
        /// The draft lengths that do have values, e.g. `1-8` or `none`.
        available: String,
    },
    /// The `collection` block does not match the schema.
    #[error("Invalid collection block in {}: {msg} (see schemas/collection.v1.json and docs/gate.md)", file.display())]
    Collection {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        msg: String,
    },
}

impl GoldenError {
    /// True when no golden value exists for the deployment (contract §2 steps 3–6; the gate's
    /// `no_golden_curve`).
    pub fn is_no_golden(&self) -> bool {
        matches!(
            self,
            GoldenError::KimiSampling { .. }
                | GoldenError::InvalidCurveName { .. }
                | GoldenError::NoCurve { .. }
                | GoldenError::FileMismatch { .. }
                | GoldenError::NoCell { .. }
        )
    }

    /// True when the curve or cell is simply absent (no file, no cell), as opposed to broken.
    pub fn is_missing(&self) -> bool {
        matches!(
            self,
            GoldenError::NoCurve { .. } | GoldenError::NoCell { .. }
        )
    }

    /// True when a file that exists is broken (an unreadable or malformed curve or collection)
    /// or the looked-up value or draft length is invalid (§1.3; the gate's `invalid_golden`), as
    /// opposed to a curve or cell that is absent.
    pub fn is_invalid_golden(&self) -> bool {
        matches!(
            self,
            GoldenError::InvalidGolden { .. }
                | GoldenError::InvalidDraftLength { .. }
                | GoldenError::Yaml { .. }
                | GoldenError::CollectionYaml { .. }
                | GoldenError::ModelCount { .. }
                | GoldenError::Malformed { .. }
                | GoldenError::UnknownThinkingMode { .. }
                | GoldenError::InvalidDraftLengthKey { .. }
                | GoldenError::Collection { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::curve::ranges;
    use super::select::curve_name;
    use super::*;

    fn parse(text: &str) -> Result<GoldenCurve, GoldenError> {
        GoldenCurve::parse("t", Path::new("t.yaml"), text)
    }

    #[test]
    fn draft_length_strings() {
        assert_eq!(parse_draft_len("3").unwrap(), 3);
        for bad in ["0", "true", "3.0", "-1", "", "\"3\"", "+3"] {
            let e = parse_draft_len(bad).unwrap_err();
            assert!(
                e.to_string().starts_with("Invalid draft length"),
                "{bad}: {e}"
            );
            assert!(e.is_invalid_golden());
        }
    }

    #[test]
    fn schema_rules() {
        let ok =
            parse("m:\n  thinking_on:\n    1: 1.5\n    2: N/A\n    3:\n    4: '2.0'\n    5: 9.9\n")
                .unwrap();
        assert_eq!(ok.model_key, "m");
        assert_eq!(ok.lookup(ThinkingMode::On, 1).unwrap(), 1.5);
        assert!(ok.lookup(ThinkingMode::On, 2).unwrap_err().is_missing());
        assert!(ok.lookup(ThinkingMode::On, 3).unwrap_err().is_missing());
        let e = ok.lookup(ThinkingMode::On, 4).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("Invalid golden acceptance 2.0 in t.yaml"),
            "{e}"
        );
        let e = ok.lookup(ThinkingMode::On, 5).unwrap_err();
        assert!(
            e.to_string().starts_with("Invalid golden acceptance 9.9"),
            "{e}"
        );
        assert!(ok.lookup(ThinkingMode::Off, 1).unwrap_err().is_missing());
        assert_eq!(ok.draft_lengths(ThinkingMode::On), vec![1, 4, 5]);

        let e = parse("a:\n  thinking_on: {1: 1.5}\nb:\n  thinking_on: {1: 1.5}\n").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("Expected one model in golden curve t.yaml"),
            "{e}"
        );
        let e = parse("a:\n  thinking_maybe: {1: 1.5}\n").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("Unknown thinking mode thinking_maybe in t.yaml"),
            "{e}"
        );
        for key in ["true", "\"3\"", "3.0", "0", "x"] {
            let e = parse(&format!("a:\n  thinking_on:\n    {key}: 1.5\n")).unwrap_err();
            assert!(
                e.to_string()
                    .starts_with(&format!("Invalid draft length {}", key.trim_matches('"'))),
                "{key}: {e}"
            );
        }
        assert!(parse("a: {}\n").is_err());
        assert!(parse("a:\n  thinking_on:\n    1: 1.5\n    0x1: 1.6\n").is_err());
    }

    #[test]
    fn collection_block_is_optional_and_reserved() {
        let block = "collection:\n  dataset: speed_bench\n  config: qualitative\n  category: coding\n  num_prompts: 80\n  endpoint: completions\n  renderer: deepseek_v4\n  output_len: 4096\n  sampling: {temperature: 1.0}\n  chat_template_kwargs:\n    thinking_on: {thinking: true, reasoning_effort: high}\n  concurrency: 1\n";
        let top = parse(&format!("{block}m:\n  thinking_on:\n    3: 2.49\n")).unwrap();
        let c = top.collection.as_ref().unwrap();
        assert_eq!(c.num_prompts, 80);
        assert_eq!(c.renderer, Renderer::DeepseekV4);
        assert_eq!(c.turns, Turns::First);
        assert_eq!(c.sampling.temperature, Some(1.0));
        assert_eq!(
            c.chat_template_kwargs.get(ThinkingMode::On).unwrap()["thinking"],
            true
        );
        let indented: String = block.lines().map(|l| format!("  {l}\n")).collect();
        let inner = parse(&format!("m:\n{indented}  thinking_on:\n    3: 2.49\n")).unwrap();
        assert_eq!(inner.collection, top.collection);
        let both = parse(&format!(
            "{block}m:\n{indented}  thinking_on:\n    3: 2.49\n"
        ));
        assert!(both.is_err());
        let bad =
            parse("collection:\n  dataset: x\nm:\n  thinking_on:\n    3: 2.49\n").unwrap_err();
        assert!(
            bad.to_string()
                .starts_with("Invalid collection block in t.yaml"),
            "{bad}"
        );
        assert!(parse("m:\n  thinking_on:\n    3: 2.49\n")
            .unwrap()
            .collection
            .is_none());
    }

    #[test]
    fn curve_names() {
        let q = |p, m, d, s| CurveQuery {
            model_prefix: p,
            method: m,
            draft_model: d,
            draft_sample_method: s,
        };
        assert_eq!(
            curve_name(&q("dsv4", "EAGLE", None, None)).unwrap(),
            "dsv4_mtp"
        );
        assert_eq!(
            curve_name(&q("kimik2.5", "eagle", None, None)).unwrap(),
            "kimik2.5_eagle3"
        );
        assert_eq!(
            curve_name(&q("qwen3.5", "NEXTN", None, None)).unwrap(),
            "qwen3.5_mtp"
        );
        assert_eq!(
            curve_name(&q("dsv4dsparkprob", "dspark", None, None)).unwrap(),
            "dsv4-pro-0813-dspark"
        );
        assert_eq!(
            curve_name(&q("minimaxm3", "eagle3", Some("x/M3-EAGLE3-GQA"), None)).unwrap(),
            "minimaxm3_eagle3_gqa"
        );
        assert_eq!(
            curve_name(&q("minimaxm3", "eagle3", Some("x/M3-EAGLE3"), None)).unwrap(),
            "minimaxm3_eagle3"
        );
        let e = curve_name(&q("kimik3", "dspark", None, Some("nucleus"))).unwrap_err();
        assert!(e
            .to_string()
            .starts_with("No Kimi DSpark golden curve for draft sampling nucleus"));
        let e = curve_name(&q("DSV4", "mtp", None, None)).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("Invalid golden curve name DSV4_mtp"),
            "{e}"
        );
        assert!(curve_name(&q("../x", "mtp", None, None)).is_err());
    }

    #[test]
    fn ranges_compact() {
        assert_eq!(ranges(&[1, 2, 3, 5, 7, 8]), "1-3, 5, 7-8");
        assert_eq!(ranges(&[]), "none");
    }
}
