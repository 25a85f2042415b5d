//! The registry of `inject`'s backends (one per engine family), the shared walk over a recipe's
//! roles, and the choice of backend from `FRAMEWORK`, `backend.type` and the engine section. It
//! sits above every backend: they import the seam (`backend.rs`), never this file.
//!
//! ```text
//!  FRAMEWORK / backend.type / <engine>_config ──resolve_backend──> &dyn Backend
//!  backend.<section> ──roles──> Role ──Backend::entry──> Entry { role, k, method, state }
//! ```

use std::path::Path;

use super::backend::{Backend, Entry, EntryState, Role};
use super::error::InjectError;
use super::{atom, sglang, trtllm, vllm, InjectConfig};
use crate::golden::Framework;
use crate::yaml::{Doc, Node};

/// The registry: one backend per engine family.
static BACKENDS: [&dyn Backend; 4] = [&vllm::Vllm, &sglang::Sglang, &trtllm::Trtllm, &atom::Atom];

fn known_frameworks() -> String {
    BACKENDS
        .iter()
        .flat_map(|b| b.meta().family.aliases())
        .collect::<Vec<_>>()
        .join(", ")
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
            known: known_frameworks(),
        });
    }
    Err(InjectError::UnknownFramework {
        name: name.to_owned(),
        from,
        known: known_frameworks(),
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
                    known: known_frameworks(),
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
