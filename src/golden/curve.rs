//! One golden curve file: its schema (one model key, thinking-mode blocks of draft length ->
//! AL, an optional `collection` block), validated on load, and the lookup of one cell, validated
//! when it is read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{Collection, GoldenError, ThinkingMode, COLLECTION_KEY};
use crate::yaml::{self, Doc, Kind, Node, Scalar};

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
pub(super) fn ranges(ks: &[u32]) -> String {
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
