//! The backend seam of `inject`: what a framework backend finds (an [`Entry`] per speculative
//! role) and edits, the registry of the four backends, the shared walk over a recipe's roles, and
//! the choice of backend from `FRAMEWORK`, `backend.type` and the engine section.
//!
//! ```text
//!  FRAMEWORK / backend.type / <engine>_config ──resolve_backend──> &dyn Backend
//!  backend.<section> ──roles──> Role ──Backend::entry──> Entry { role, k, method, state }
//! ```

use std::path::Path;

use super::edit::Edit;
use super::{atom, sglang, trtllm, vllm, InjectConfig, InjectError};
use crate::golden::Framework;
use crate::yaml::{Doc, Node, Scalar};

/// A backend's complaint about one entry, before the file name is attached.
#[derive(Debug)]
pub(crate) struct Bad {
    pub(crate) line: usize,
    pub(crate) what: String,
}

pub(crate) fn bad<T>(line: usize, what: impl Into<String>) -> Result<T, Bad> {
    Err(Bad {
        line,
        what: what.into(),
    })
}

/// Whether an entry drafts for real or fakes acceptance.
#[derive(Clone, Debug, PartialEq)]
pub enum EntryState {
    /// Real verification.
    Real,
    /// Synthetic acceptance at this AL.
    Synthetic {
        /// The AL the engine is told to fake.
        al: f64,
    },
    /// Synthetic knobs present but inconsistent or invalid.
    Broken {
        /// What is wrong.
        why: String,
    },
}

/// One speculative entry of the recipe as found by a backend.
pub(crate) struct Entry<'a> {
    pub(crate) role: String,
    /// Line of the entry's key (e.g. `speculative-config:`), 1-based.
    pub(crate) line: usize,
    pub(crate) k: u32,
    pub(crate) method: Option<String>,
    pub(crate) draft_model: Option<String>,
    pub(crate) draft_sample_method: Option<String>,
    pub(crate) state: EntryState,
    /// The node the backend edits (the spec value, or the role mapping).
    pub(crate) node: &'a Node,
}

/// A role mapping of the engine section (`prefill`, `decode`, `aggregated`, ...).
pub(crate) struct Role<'a> {
    pub(crate) name: String,
    pub(crate) map: &'a Node,
}

/// What a backend is, as data: its names and where it looks.
pub(crate) struct Meta {
    /// Short name, e.g. `vllm`.
    pub(crate) name: &'static str,
    /// The framework family it serves: its `FRAMEWORK` values are the family's aliases.
    pub(crate) family: Framework,
    /// `backend.type` values of its recipes.
    pub(crate) recipe_types: &'static [&'static str],
    /// Its role section under `backend`, e.g. `vllm_config`.
    pub(crate) section: &'static str,
    /// What it looks for, for messages.
    pub(crate) keys: &'static str,
    /// Every key it reads or writes: a duplicate of one of these makes the edit ambiguous.
    pub(crate) knobs: &'static [&'static str],
    /// Whether it writes into `backend.<role>_environment` blocks (so a block given twice makes
    /// the edit ambiguous).
    pub(crate) env: bool,
}

/// One framework backend: finds speculative entries and writes the synthetic knobs. A backend
/// says what one role's entry is; the walk over the roles is shared.
pub(crate) trait Backend: Sync {
    /// Its names and places.
    fn meta(&self) -> &'static Meta;
    /// The speculative entry of one role, or `None` when the role does not draft.
    fn entry<'a>(&self, doc: &'a Doc, role: &Role<'a>) -> Result<Option<Entry<'a>>, Bad>;
    /// The entries of the recipe, in role order; the first bad role fails the recipe.
    fn entries<'a>(&self, doc: &'a Doc, roles: &[Role<'a>]) -> Result<Vec<Entry<'a>>, Bad> {
        roles
            .iter()
            .filter_map(|role| self.entry(doc, role).transpose())
            .collect()
    }
    /// The edits that make every planned entry synthetic at its AL.
    fn edits(&self, doc: &Doc, plan: &[(&Entry<'_>, f64)]) -> Result<Vec<Edit>, Bad>;
}

/// The registry: one backend per engine family.
static BACKENDS: [&dyn Backend; 4] = [&vllm::Vllm, &sglang::Sglang, &trtllm::Trtllm, &atom::Atom];

pub(super) fn known_frameworks() -> String {
    BACKENDS
        .iter()
        .flat_map(|b| b.meta().family.aliases())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Formats a number like Python's `repr(float)` for the values written here: shortest
/// round-trip text with at least one decimal (`3.0`, `2.49`), after rounding away float noise
/// (`2.49 - 1` is written `1.49`, not `1.4900000000000002`).
pub(crate) fn fmt_num(x: f64) -> String {
    let r = (x * 1e10).round() / 1e10;
    format!("{r:?}")
}

/// Numbers equal as written (to 10 decimals).
pub(crate) fn same_num(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// The first of `keys` present in mapping `map` (spellings of one flag), with its key node.
pub(crate) fn get_any<'a>(map: &'a Node, keys: &[&str]) -> Option<&'a (Node, Node)> {
    keys.iter().find_map(|k| map.get_entry(k))
}

/// A positive integer written plainly (`3`) or as a digit string (`"3"`, recipe values are CLI
/// arguments); bools, floats and zero are refused.
pub(crate) fn positive_int(n: &Node) -> Option<u32> {
    match n.scalar()? {
        Scalar::Int(i) if i >= 1 => u32::try_from(i).ok(),
        Scalar::Str(s) => crate::golden::parse_draft_len(s).ok(),
        _ => None,
    }
}

/// A number written plainly or as a string (environment values are strings).
pub(crate) fn number(n: &Node) -> Option<f64> {
    match n.scalar()? {
        Scalar::Int(i) => Some(i as f64),
        Scalar::Float(f) => Some(f),
        Scalar::Str(s) => s.trim().parse().ok(),
        _ => None,
    }
}

pub(super) fn find_entries<'a>(
    backend: &dyn Backend,
    doc: &'a Doc,
    file: &Path,
) -> Result<Vec<Entry<'a>>, InjectError> {
    let roles = roles(doc, backend.meta().section);
    let mut entries = backend
        .entries(doc, &roles)
        .map_err(|b| InjectError::BadEntry {
            file: file.to_owned(),
            line: b.line,
            what: b.what,
        })?;
    // A role that aliases another shares its node: one entry, edited once.
    let mut seen = Vec::new();
    entries.retain(|e| {
        let key = (e.node.start, e.node.end);
        if seen.contains(&key) {
            false
        } else {
            seen.push(key);
            true
        }
    });
    for e in &mut entries {
        if let EntryState::Synthetic { al } = e.state {
            if !(al.is_finite() && al >= 1.0 && al <= f64::from(e.k) + 1.0) {
                e.state = EntryState::Broken {
                    why: format!(
                        "synthetic AL {al} is outside [1, {}] for {} speculative tokens",
                        e.k + 1,
                        e.k
                    ),
                };
            }
        }
    }
    Ok(entries)
}

/// The role mappings of `backend.<section>`; a recipe without `backend` is one flat role.
pub(super) fn roles<'a>(doc: &'a Doc, section: &str) -> Vec<Role<'a>> {
    let root = &doc.root;
    let Some(backend) = root.get("backend") else {
        return vec![Role {
            name: "top-level".into(),
            map: root,
        }];
    };
    let Some(entries) = backend
        .get(section)
        .map(|s| doc.resolve(s))
        .and_then(Node::entries)
    else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|(k, v)| {
            let v = doc.resolve(v);
            Some(Role {
                name: k.as_str()?.to_owned(),
                map: v.is_map().then_some(v)?,
            })
        })
        .collect()
}

pub(super) fn backend_for_framework(
    name: &str,
    from: &'static str,
) -> Result<&'static dyn Backend, InjectError> {
    let family = Framework::from_alias(name);
    if let Some(b) = BACKENDS.iter().find(|b| Some(b.meta().family) == family) {
        return Ok(*b);
    }
    if family.is_some() {
        // A known family without a recipe backend (TileRT has no synthetic-acceptance knob;
        // llama.cpp's `--spec-synth-len` is a server flag, not a recipe entry).
        return Err(InjectError::NoBackend {
            name: name.to_owned(),
        });
    }
    Err(InjectError::UnknownFramework {
        name: name.to_owned(),
        from,
    })
}

/// Picks the backend from the argument/`FRAMEWORK`, `backend.type` and the engine section,
/// which must all agree.
pub(super) fn resolve_backend(
    cfg: &InjectConfig,
    doc: &Doc,
    file: &Path,
) -> Result<(&'static dyn Backend, String), InjectError> {
    let mixed = |detail: String| InjectError::MixedFrameworks {
        file: file.to_owned(),
        detail,
    };
    let backend_node = doc.root.get("backend");
    let sections: Vec<&'static dyn Backend> = BACKENDS
        .iter()
        .copied()
        .filter(|b| backend_node.and_then(|n| n.get(b.meta().section)).is_some())
        .collect();
    if sections.len() > 1 {
        let names: Vec<_> = sections.iter().map(|b| b.meta().section).collect();
        return Err(mixed(format!(
            "the backend has {}; keep one engine per recipe",
            names.join(" and ")
        )));
    }
    let by_section = sections.first().copied();
    let recipe_type = backend_node
        .and_then(|n| n.get("type"))
        .and_then(Node::as_str)
        .map(|t| t.trim().to_ascii_lowercase());
    let by_type = match &recipe_type {
        Some(t) => match BACKENDS
            .iter()
            .find(|b| b.meta().recipe_types.contains(&t.as_str()))
        {
            Some(b) => Some(*b),
            None if cfg.framework.is_none() => {
                return Err(InjectError::UnknownFramework {
                    name: t.clone(),
                    from: "the recipe's backend.type",
                })
            }
            None => {
                return Err(mixed(format!(
                    "{} is {} but the recipe's backend.type is {t}",
                    cfg.framework.as_ref().map_or("", |f| f.1),
                    cfg.framework.as_ref().map_or("", |f| f.0.as_str()),
                )))
            }
        },
        None => None,
    };
    let by_arg = match &cfg.framework {
        Some((name, from)) => Some((backend_for_framework(name, from)?, name.clone(), *from)),
        None => None,
    };
    if let (Some(t), Some(s)) = (by_type, by_section) {
        if t.meta().name != s.meta().name {
            return Err(mixed(format!(
                "backend.type is {} but the recipe configures {}",
                recipe_type.unwrap_or_default(),
                s.meta().section
            )));
        }
    }
    let recipe_backend = by_type.or(by_section);
    match (by_arg, recipe_backend) {
        (Some((a, name, from)), Some(r)) if a.meta().name != r.meta().name => Err(mixed(format!(
            "{from} is {name} ({} backend) but the recipe is {} (backend.type / {})",
            a.meta().name,
            r.meta().name,
            r.meta().section
        ))),
        (Some((a, name, _)), _) => Ok((a, name)),
        (None, Some(r)) => Ok((r, recipe_type.unwrap_or_else(|| r.meta().name.to_owned()))),
        (None, None) => Err(InjectError::NoFramework {
            file: file.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_like_python_floats() {
        assert_eq!(fmt_num(2.49), "2.49");
        assert_eq!(fmt_num(2.49 - 1.0), "1.49");
        assert_eq!(fmt_num(3.0), "3.0");
        assert_eq!(fmt_num(3.51 - 1.0), "2.51");
    }

    #[test]
    fn framework_names_map_to_backends() {
        for (fw, b) in [
            ("vllm", "vllm"),
            ("dynamo-vllm", "vllm"),
            ("sglang", "sglang"),
            ("dynamo-sglang", "sglang"),
            ("trt", "trtllm"),
            ("dynamo-trt", "trtllm"),
            ("tensorrt-llm", "trtllm"),
            ("atom", "atom"),
        ] {
            assert_eq!(
                backend_for_framework(fw, "FRAMEWORK").unwrap().meta().name,
                b
            );
        }
        assert!(matches!(
            backend_for_framework("tilert", "FRAMEWORK"),
            Err(InjectError::NoBackend { .. })
        ));
        assert!(matches!(
            backend_for_framework("mlc", "FRAMEWORK"),
            Err(InjectError::UnknownFramework { .. })
        ));
    }
}
