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

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Deserialize;

use crate::yaml::{self, Doc, Kind, Node, Scalar, YamlError};

/// The reserved key of the collection block (§4).
const COLLECTION_KEY: &str = "collection";

/// Thinking mode of a curve block (`thinking_on` / `thinking_off`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ThinkingMode {
    /// `thinking_on`.
    On,
    /// `thinking_off`.
    Off,
}

impl ThinkingMode {
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
    #[error("Invalid collection block in {}: {msg} (see the README's collection block schema)", file.display())]
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

    /// True when the looked-up value or draft length is invalid (§1.3; the gate's `invalid_golden`).
    pub fn is_invalid_golden(&self) -> bool {
        matches!(
            self,
            GoldenError::InvalidGolden { .. } | GoldenError::InvalidDraftLength { .. }
        )
    }
}

/// Parses a draft length (`NUM_SPEC_TOKENS`, a recipe value): a positive decimal integer.
/// `0`, `true`, `3.0`, `-1` and `"3"` with quotes are rejected.
pub fn parse_draft_len(s: &str) -> Result<u32, GoldenError> {
    let t = s.trim();
    match t.parse::<u32>() {
        Ok(k) if k >= 1 && t.bytes().all(|b| b.is_ascii_digit()) => Ok(k),
        _ => Err(GoldenError::InvalidDraftLength { k: t.to_owned() }),
    }
}

/// One cell as written.
#[derive(Clone, Debug, PartialEq)]
enum Cell {
    /// A number (not yet range-checked).
    Value(f64),
    /// `N/A`, `null`, empty, ...: no value.
    Missing,
    /// Anything else, as written.
    Invalid(String),
}

/// One golden curve file.
#[derive(Clone, Debug, PartialEq)]
pub struct GoldenCurve {
    /// Curve name: the file stem, e.g. `dsv4_mtp`.
    pub name: String,
    /// The file it was read from.
    pub(crate) file: PathBuf,
    /// The model key at the top of the file, e.g. `deepseek-v4-pro`.
    pub model_key: String,
    /// The `collection` block, when the file has one.
    pub collection: Option<Collection>,
    modes: BTreeMap<ThinkingMode, BTreeMap<u32, Cell>>,
}

impl GoldenCurve {
    /// Loads a curve file; its name is the file stem.
    pub fn load(path: &Path) -> Result<Self, GoldenError> {
        let doc = yaml::load(path).map_err(|source| GoldenError::Yaml {
            file: path.to_owned(),
            source,
        })?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Self::from_doc(&name, path, &doc)
    }

    /// Parses curve text (`file` is used in messages only): the entry of the unit tests and the
    /// fuzz target, which have text rather than a file.
    #[cfg(any(test, fuzzing))]
    pub(crate) fn parse(name: &str, file: &Path, text: &str) -> Result<Self, GoldenError> {
        let doc = yaml::parse(text.to_owned()).map_err(|source| GoldenError::Yaml {
            file: file.to_owned(),
            source,
        })?;
        Self::from_doc(name, file, &doc)
    }

    fn from_doc(name: &str, file: &Path, doc: &Doc) -> Result<Self, GoldenError> {
        let malformed = |what: String| GoldenError::Malformed {
            file: file.to_owned(),
            what,
        };
        let Some(top) = doc.root.entries() else {
            return Err(malformed(
                "the top level must be a mapping `<model-key>: {thinking_on: {k: AL}}`".into(),
            ));
        };
        let mut collection_node: Option<&Node> = None;
        let mut models = Vec::new();
        for (k, v) in top {
            match k.as_str() {
                Some(COLLECTION_KEY) => collection_node = Some(v),
                Some(key) => models.push((key, v)),
                None => {
                    return Err(malformed(format!(
                        "non-scalar key at line {}",
                        k.start.line
                    )))
                }
            }
        }
        let [(model_key, model)] = models[..] else {
            return Err(GoldenError::ModelCount {
                file: file.to_owned(),
                found: models.iter().map(|(k, _)| (*k).to_owned()).collect(),
            });
        };
        let model = doc.resolve(model);
        let Some(mode_entries) = model.entries() else {
            return Err(malformed(format!(
                "model {model_key} must map thinking modes to cells (line {})",
                model.start.line
            )));
        };
        let mut modes = BTreeMap::new();
        for (k, v) in mode_entries {
            let key = k.as_str().unwrap_or_default();
            if key == COLLECTION_KEY {
                if collection_node.is_some() {
                    return Err(malformed(
                        "two collection blocks (top level and under the model); keep one".into(),
                    ));
                }
                collection_node = Some(v);
                continue;
            }
            let Some(mode) = ThinkingMode::from_key(key) else {
                return Err(GoldenError::UnknownThinkingMode {
                    file: file.to_owned(),
                    key: key.to_owned(),
                });
            };
            modes.insert(mode, cells(file, doc, doc.resolve(v))?);
        }
        if modes.is_empty() {
            return Err(malformed(format!(
                "model {model_key} has neither thinking_on nor thinking_off"
            )));
        }
        let collection = collection_node
            .map(|n| Collection::from_node(file, doc, n))
            .transpose()?;
        Ok(GoldenCurve {
            name: name.to_owned(),
            file: file.to_owned(),
            model_key: model_key.to_owned(),
            collection,
            modes,
        })
    }

    /// True when the curve has a block for this mode.
    pub fn has_mode(&self, thinking: ThinkingMode) -> bool {
        self.modes.contains_key(&thinking)
    }

    /// Draft lengths with a cell (valid or not) in this mode, ascending.
    pub fn draft_lengths(&self, thinking: ThinkingMode) -> Vec<u32> {
        self.modes
            .get(&thinking)
            .map(|m| {
                m.iter()
                    .filter(|(_, c)| **c != Cell::Missing)
                    .map(|(k, _)| *k)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The golden AL for `thinking` and `k`, validated (§1.3).
    pub(crate) fn lookup(&self, thinking: ThinkingMode, k: u32) -> Result<f64, GoldenError> {
        if k == 0 {
            return Err(GoldenError::InvalidDraftLength { k: k.to_string() });
        }
        let invalid = |value: String| GoldenError::InvalidGolden {
            file: self.file.clone(),
            curve: self.name.clone(),
            thinking,
            k,
            value,
        };
        match self.modes.get(&thinking).and_then(|m| m.get(&k)) {
            Some(Cell::Value(v)) if v.is_finite() && *v >= 1.0 && *v <= f64::from(k) + 1.0 => {
                Ok(*v)
            }
            Some(Cell::Value(v)) => Err(invalid(v.to_string())),
            Some(Cell::Invalid(s)) => Err(invalid(s.clone())),
            Some(Cell::Missing) | None => Err(GoldenError::NoCell {
                curve: self.name.clone(),
                thinking,
                k,
                available: ranges(&self.draft_lengths(thinking)),
            }),
        }
    }
}

/// `[1,2,3,5]` -> `1-3, 5`; empty -> `none`.
fn ranges(ks: &[u32]) -> String {
    if ks.is_empty() {
        return "none".into();
    }
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ks.len() {
        let mut j = i;
        while j + 1 < ks.len() && ks[j + 1] == ks[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            ks[i].to_string()
        } else {
            format!("{}-{}", ks[i], ks[j])
        });
        i = j + 1;
    }
    out.join(", ")
}

fn is_no_value(s: &str) -> bool {
    let t = s.trim().to_ascii_lowercase();
    matches!(t.as_str(), "" | "n/a" | "na" | "null" | "none" | "~")
}

fn cells(file: &Path, doc: &Doc, block: &Node) -> Result<BTreeMap<u32, Cell>, GoldenError> {
    let mut out = BTreeMap::new();
    let entries = match &block.kind {
        Kind::Map { entries, .. } => entries.as_slice(),
        // `thinking_on:` with nothing under it: a mode without cells.
        Kind::Scalar { .. } if block.scalar() == Some(Scalar::Null) => &[],
        _ => {
            return Err(GoldenError::Malformed {
                file: file.to_owned(),
                what: format!(
                    "a thinking mode must map draft lengths to AL values (line {})",
                    block.start.line
                ),
            })
        }
    };
    for (k, v) in entries {
        let key_text = k.as_str().unwrap_or("<non-scalar>").to_owned();
        let kn = match k.scalar() {
            Some(Scalar::Int(i)) if i >= 1 => u32::try_from(i).ok(),
            _ => None,
        };
        let Some(kn) = kn else {
            return Err(GoldenError::InvalidDraftLengthKey {
                file: file.to_owned(),
                key: key_text,
            });
        };
        let v = doc.resolve(v);
        let cell = match v.scalar() {
            Some(Scalar::Int(i)) => Cell::Value(i as f64),
            Some(Scalar::Float(f)) => Cell::Value(f),
            Some(Scalar::Null) => Cell::Missing,
            Some(Scalar::Str(s)) if is_no_value(s) => Cell::Missing,
            Some(Scalar::Str(s)) => Cell::Invalid(s.to_owned()),
            Some(Scalar::Bool(b)) => Cell::Invalid(b.to_string()),
            None => Cell::Invalid(format!("<collection at line {}>", v.start.line)),
        };
        if out.insert(kn, cell).is_some() {
            return Err(GoldenError::Malformed {
                file: file.to_owned(),
                what: format!("draft length {kn} appears twice (line {})", k.start.line),
            });
        }
    }
    Ok(out)
}

/// What identifies a deployment's curve (§2.1). `method` is the speculative method as configured
/// (vLLM `method`, SGLang `speculative-algorithm`, TRT-LLM `decoding_type`), any case.
#[derive(Clone, Copy, Debug, Default)]
pub struct CurveQuery<'a> {
    /// `MODEL_PREFIX`, e.g. `dsv4`.
    pub model_prefix: &'a str,
    /// Speculative method, e.g. `mtp`, `EAGLE`, `dspark`.
    pub method: &'a str,
    /// Draft model name or path, when configured.
    pub draft_model: Option<&'a str>,
    /// vLLM `draft_sample_method`, when configured (Kimi-K3 DSpark only).
    pub draft_sample_method: Option<&'a str>,
}

/// The curve name for a deployment (§2.2 steps 1–4).
pub(crate) fn curve_name(q: &CurveQuery<'_>) -> Result<String, GoldenError> {
    let prefix = q.model_prefix;
    let mut m = q.method.trim().to_lowercase();
    if m == "eagle" || m == "nextn" {
        m = if matches!(prefix, "kimik2.5" | "minimaxm3") {
            "eagle3".into()
        } else {
            "mtp".into()
        };
    }
    let mut curve = format!("{prefix}_{m}");
    if matches!(prefix, "dsv4" | "dsv4dspark" | "dsv4dsparkprob") && m == "dspark" {
        curve = "dsv4-pro-0813-dspark".into();
    }
    if prefix == "minimaxm3"
        && m == "eagle3"
        && q.draft_model
            .is_some_and(|d| d.to_ascii_lowercase().contains("gqa"))
    {
        curve = "minimaxm3_eagle3_gqa".into();
    }
    if prefix == "kimik3" && m == "dspark" {
        curve = match q.draft_sample_method.map(str::trim) {
            Some("probabilistic") => {
                "kimik3_dspark_probabilistic_sample_method_block_rejection_sample_method".into()
            }
            Some("greedy") => "kimik3_dspark".into(),
            other => {
                return Err(GoldenError::KimiSampling {
                    value: other.unwrap_or("<absent>").to_owned(),
                })
            }
        };
    }
    let valid = !curve.is_empty()
        && curve
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_.-".contains(&b));
    if !valid {
        return Err(GoldenError::InvalidCurveName { curve });
    }
    Ok(curve)
}

/// A golden value with where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct GoldenValue {
    /// The curve it was read from.
    pub curve: GoldenCurve,
    /// Thinking mode looked up.
    pub(crate) thinking: ThinkingMode,
    /// Draft length looked up.
    pub(crate) k: u32,
    /// The golden AL.
    pub al: f64,
}

/// Where curves come from: one curve file, or a directory of `<curve>.yaml` files read on demand
/// (a broken unrelated curve in the directory does not stop a lookup).
#[derive(Clone, Debug)]
pub struct GoldenSource {
    path: PathBuf,
    is_dir: bool,
}

impl GoldenSource {
    /// A curve file or a directory of curve files.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, GoldenError> {
        let path = path.into();
        let meta =
            std::fs::metadata(&path).map_err(|_| GoldenError::NotFound { path: path.clone() })?;
        Ok(GoldenSource {
            is_dir: meta.is_dir(),
            path,
        })
    }

    /// The file a curve name maps to.
    pub(crate) fn curve_file(&self, curve: &str) -> PathBuf {
        if self.is_dir {
            self.path.join(format!("{curve}.yaml"))
        } else {
            self.path.clone()
        }
    }

    /// Loads one curve by name. With a single-file source the name must be that file's stem.
    pub(crate) fn load_curve(&self, curve: &str) -> Result<GoldenCurve, GoldenError> {
        let file = self.curve_file(curve);
        if !self.is_dir {
            let held = file
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            if held != curve {
                return Err(GoldenError::FileMismatch {
                    file,
                    held,
                    curve: curve.to_owned(),
                });
            }
        }
        GoldenCurve::load(&file)
    }

    /// Every curve (`*.yaml`, `*.yml`) of the source, sorted by name; any bad file is an error.
    pub fn load_all(&self) -> Result<Vec<GoldenCurve>, GoldenError> {
        if !self.is_dir {
            return Ok(vec![GoldenCurve::load(&self.path)?]);
        }
        let read = std::fs::read_dir(&self.path).map_err(|e| GoldenError::Yaml {
            file: self.path.clone(),
            source: YamlError::Io(e),
        })?;
        let mut files: Vec<PathBuf> = read
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.is_file()
                    && matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"))
            })
            .collect();
        files.sort();
        files.iter().map(|f| GoldenCurve::load(f)).collect()
    }

    /// Selects the curve for `q` and looks up `thinking`/`k` (§2.2 steps 1–7).
    pub fn select(
        &self,
        q: &CurveQuery<'_>,
        thinking: ThinkingMode,
        k: u32,
    ) -> Result<GoldenValue, GoldenError> {
        if k == 0 {
            return Err(GoldenError::InvalidDraftLength { k: "0".into() });
        }
        let name = curve_name(q)?;
        let file = self.curve_file(&name);
        if self.is_dir && !file.is_file() {
            return Err(GoldenError::NoCurve {
                prefix: q.model_prefix.to_owned(),
                method: q.method.to_owned(),
                file,
            });
        }
        let curve = self.load_curve(&name)?;
        let al = curve.lookup(thinking, k)?;
        Ok(GoldenValue {
            curve,
            thinking,
            k,
            al,
        })
    }
}

/// How the golden prompts were collected (§4): the gate replays exactly this.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Collection {
    /// Dataset, e.g. `speed_bench`.
    pub(crate) dataset: String,
    /// Dataset config, e.g. `qualitative`.
    #[serde(default)]
    pub(crate) config: Option<String>,
    /// Category, e.g. `coding`.
    pub(crate) category: String,
    /// Prompts in the category, e.g. 80.
    pub num_prompts: u32,
    /// Which turns of each row were sent.
    #[serde(default)]
    pub(crate) turns: Turns,
    /// Endpoint posted to.
    pub(crate) endpoint: CollectionEndpoint,
    /// Who rendered the prompt.
    pub(crate) renderer: Renderer,
    /// `max_tokens`.
    pub output_len: u32,
    /// Sampling parameters; only the keys present are sent.
    #[serde(default)]
    pub(crate) sampling: Sampling,
    /// `chat_template_kwargs` per thinking mode.
    #[serde(default)]
    pub(crate) chat_template_kwargs: ModeKwargs,
    /// Concurrency used when collecting.
    #[serde(default)]
    pub(crate) concurrency: Option<u32>,
    /// Shuffle seed.
    #[serde(default)]
    pub(crate) seed: Option<u64>,
    /// Free-form provenance.
    #[serde(default)]
    pub(crate) source: Option<serde_json::Value>,
}

/// Which turns of a multi-turn row were sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Turns {
    /// `messages[0]` only.
    #[default]
    First,
    /// Every user turn.
    All,
}

/// Endpoint of the collection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CollectionEndpoint {
    /// `/v1/completions` with a client-rendered prompt.
    Completions,
    /// `/v1/chat/completions`.
    Chat,
}

/// Prompt renderer of the collection.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub(crate) enum Renderer {
    /// The DeepSeek-V4 encoder.
    DeepseekV4,
    /// The DeepSeek-V4.1 encoder.
    DeepseekV41,
    /// The server's chat template.
    ServerTemplate,
    /// A chat template file, `template:<file>`.
    Template(String),
}

impl TryFrom<String> for Renderer {
    type Error = String;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        Ok(match s.as_str() {
            "deepseek_v4" => Renderer::DeepseekV4,
            "deepseek_v41" => Renderer::DeepseekV41,
            "server_template" => Renderer::ServerTemplate,
            _ => match s.strip_prefix("template:") {
                Some(f) if !f.is_empty() => Renderer::Template(f.to_owned()),
                _ => {
                    return Err(format!(
                        "renderer {s:?} is not deepseek_v4, deepseek_v41, server_template or template:<file>"
                    ))
                }
            },
        })
    }
}

/// Sampling parameters of the collection.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Sampling {
    /// `temperature`.
    pub(crate) temperature: Option<f64>,
    /// `top_p`.
    pub(crate) top_p: Option<f64>,
    /// `top_k`.
    pub(crate) top_k: Option<i64>,
    /// `presence_penalty`.
    pub(crate) presence_penalty: Option<f64>,
    /// `repetition_penalty`.
    pub(crate) repetition_penalty: Option<f64>,
    /// `seed`.
    pub(crate) seed: Option<i64>,
    /// Overrides for `thinking_on` (curves collected with per-mode sampling, e.g. qwen3.5).
    pub(crate) thinking_on: Option<Box<Sampling>>,
    /// Overrides for `thinking_off`.
    pub(crate) thinking_off: Option<Box<Sampling>>,
}

impl Sampling {
    /// The sampling of one thinking mode: the shared keys, overridden by the mode's own.
    pub(crate) fn for_mode(&self, thinking: ThinkingMode) -> Sampling {
        let own = match thinking {
            ThinkingMode::On => self.thinking_on.as_deref(),
            ThinkingMode::Off => self.thinking_off.as_deref(),
        };
        let pick = |f: fn(&Sampling) -> Option<f64>| own.and_then(f).or_else(|| f(self));
        Sampling {
            temperature: pick(|s| s.temperature),
            top_p: pick(|s| s.top_p),
            top_k: own.and_then(|s| s.top_k).or(self.top_k),
            presence_penalty: pick(|s| s.presence_penalty),
            repetition_penalty: pick(|s| s.repetition_penalty),
            seed: own.and_then(|s| s.seed).or(self.seed),
            thinking_on: None,
            thinking_off: None,
        }
    }
}

/// `chat_template_kwargs` per thinking mode.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ModeKwargs {
    /// Sent with `thinking_on`.
    pub(crate) thinking_on: Option<serde_json::Map<String, serde_json::Value>>,
    /// Sent with `thinking_off`.
    pub(crate) thinking_off: Option<serde_json::Map<String, serde_json::Value>>,
}

impl ModeKwargs {
    /// The kwargs of a mode, if recorded.
    pub(crate) fn get(
        &self,
        thinking: ThinkingMode,
    ) -> Option<&serde_json::Map<String, serde_json::Value>> {
        match thinking {
            ThinkingMode::On => self.thinking_on.as_ref(),
            ThinkingMode::Off => self.thinking_off.as_ref(),
        }
    }
}

impl Collection {
    /// Loads a collection metadata file (YAML or JSON, the block's fields at the top level), as
    /// given to `--collection-metadata`.
    pub fn load(path: &Path) -> Result<Self, GoldenError> {
        let doc = yaml::load(path).map_err(|source| GoldenError::Yaml {
            file: path.to_owned(),
            source,
        })?;
        Self::from_node(path, &doc, &doc.root)
    }

    fn from_node(file: &Path, doc: &Doc, node: &Node) -> Result<Self, GoldenError> {
        let err = |msg: String| GoldenError::Collection {
            file: file.to_owned(),
            msg,
        };
        let json = doc.to_json(node).map_err(err)?;
        serde_json::from_value(json).map_err(|e| err(e.to_string()))
    }
}

/// The serving framework families of InferenceX's `FRAMEWORK` values (§9.3, §10): the one alias
/// table behind both the gate (which metrics family to read) and `inject` (which recipe backend
/// writes the synthetic knob), so the two cannot disagree on what `dynamo-trt` means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framework {
    /// vLLM and Dynamo vLLM workers.
    Vllm,
    /// SGLang and Dynamo SGLang workers.
    Sglang,
    /// TensorRT-LLM and Dynamo TensorRT-LLM workers.
    Trtllm,
    /// ATOM (ROCm).
    Atom,
    /// TileRT: known, but with neither speculative counters nor a synthetic-acceptance knob.
    Tilert,
}

/// Every lower-case `FRAMEWORK` spelling, grouped by family in the order messages list them.
const FRAMEWORK_ALIASES: &[(&str, Framework)] = &[
    ("vllm", Framework::Vllm),
    ("dynamo-vllm", Framework::Vllm),
    ("sglang", Framework::Sglang),
    ("dynamo-sglang", Framework::Sglang),
    ("trt", Framework::Trtllm),
    ("trtllm", Framework::Trtllm),
    ("tensorrt-llm", Framework::Trtllm),
    ("tensorrt_llm", Framework::Trtllm),
    ("dynamo-trt", Framework::Trtllm),
    ("dynamo-trtllm", Framework::Trtllm),
    ("dynamo-tensorrt-llm", Framework::Trtllm),
    ("dynamo-tensorrt_llm", Framework::Trtllm),
    ("atom", Framework::Atom),
    ("tilert", Framework::Tilert),
];

impl Framework {
    /// The family of an exact lower-case spelling (callers trim and lower-case first: the gate
    /// and `inject` normalise differently, and each keeps its own rule).
    pub(crate) fn from_alias(name: &str) -> Option<Framework> {
        FRAMEWORK_ALIASES
            .iter()
            .find(|(alias, _)| *alias == name)
            .map(|(_, f)| *f)
    }

    /// The spellings of this family, in table order.
    pub(crate) fn aliases(self) -> impl Iterator<Item = &'static str> {
        FRAMEWORK_ALIASES
            .iter()
            .filter(move |(_, f)| *f == self)
            .map(|(alias, _)| *alias)
    }
}

#[cfg(test)]
mod tests {
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
