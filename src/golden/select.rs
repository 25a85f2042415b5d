//! Curve selection (§2.1–2.2): which curve file a deployment's model prefix, speculative method,
//! draft model and draft sampling name, and where curves are read from (one file, or a
//! directory read on demand).

use std::path::PathBuf;

use super::{GoldenCurve, GoldenError, ThinkingMode};
use crate::yaml::YamlError;

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
