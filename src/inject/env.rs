//! `backend.<role>_environment` blocks: where SGLang and TensorRT-LLM take their synthetic
//! acceptance knobs (environment variables of the worker processes).
//!
//! The block of a role with a speculative entry gets that entry's AL; a block of a role without
//! one (SGLang prefill) gets the common AL when all entries agree, as InferenceX does. Variables
//! already set to the wanted value, own or inherited through a `<<` merge, are left alone; wrong
//! values are replaced in place; missing ones are inserted right after the block's header line.
//! A block that is an alias of another (`decode_environment: *env`) is covered by the anchored
//! block and must want the same AL.

use super::backend::{bad, number, same_num, Bad, Entry, EntryState};
use super::edit::Edit;
use crate::yaml::{Doc, Kind, Node, Pos};

/// One variable to set.
pub(crate) struct Var {
    pub(crate) name: &'static str,
    pub(crate) value: String,
    /// Compare as numbers (`"2.49"` equals `2.490`), else as strings.
    pub(crate) numeric: bool,
}

/// One `<role>_environment` entry of `backend`.
pub(crate) struct Block<'a> {
    pub(crate) role: String,
    pub(crate) key: &'a Node,
    pub(crate) value: &'a Node,
}

/// Every `*_environment` block under `backend`, in file order.
pub(crate) fn blocks(doc: &Doc) -> Vec<Block<'_>> {
    let Some(entries) = doc.root.get("backend").and_then(Node::entries) else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|(k, v)| {
            let role = k.as_str()?.strip_suffix("_environment")?;
            Some(Block {
                role: role.to_owned(),
                key: k,
                value: v,
            })
        })
        .collect()
}

/// The value of `var` in the role's block (through merges and aliases).
pub(crate) fn get<'a>(doc: &'a Doc, role: &str, var: &str) -> Option<&'a Node> {
    let blocks = blocks(doc);
    let b = blocks.iter().find(|b| b.role == role)?;
    doc.lookup(b.value, var)
}

/// The state of a role from one numeric variable; `to_al` maps its value to the AL.
pub(crate) fn state(doc: &Doc, role: &str, var: &str, to_al: impl Fn(f64) -> f64) -> EntryState {
    match get(doc, role, var) {
        None => EntryState::Real,
        Some(n) => match number(n) {
            Some(v) => EntryState::Synthetic { al: to_al(v) },
            None => EntryState::Broken {
                why: format!(
                    "{var}={:?} in {role}_environment is not a number",
                    n.as_str().unwrap_or("<collection>")
                ),
            },
        },
    }
}

fn equal(n: &Node, var: &Var) -> bool {
    if var.numeric {
        match (number(n), var.value.parse::<f64>()) {
            (Some(a), Ok(b)) => same_num(a, b),
            _ => false,
        }
    } else {
        n.as_str() == Some(var.value.as_str())
    }
}

/// Edits that set `vars(al)` in every environment block that needs them.
pub(crate) fn edits(
    doc: &Doc,
    plan: &[(&Entry<'_>, f64)],
    vars: impl Fn(f64) -> Vec<Var>,
    quote: char,
) -> Result<Vec<Edit>, Bad> {
    let blocks = blocks(doc);
    let first_var = vars(1.0).first().map_or("", |v| v.name);
    for (e, _) in plan {
        if !blocks.iter().any(|b| b.role == e.role) {
            return bad(
                e.line,
                format!(
                    "role {} has no {}_environment block under backend to carry {first_var}; add `{}_environment:` with at least one variable",
                    e.role, e.role, e.role
                ),
            );
        }
    }
    let common = match plan.split_first() {
        Some(((_, a), rest)) if rest.iter().all(|(_, b)| same_num(*a, *b)) => Some(*a),
        _ => None,
    };
    let mut planned: Vec<((Pos, Pos), f64)> = Vec::new();
    let mut aliases = Vec::new();
    let mut out = Vec::new();
    for b in &blocks {
        let Some(al) = plan
            .iter()
            .find(|(e, _)| e.role == b.role)
            .map(|(_, al)| *al)
            .or(common)
        else {
            continue;
        };
        let line = b.key.start.line;
        let name = b.key.as_str().unwrap_or_default();
        let entries = match &b.value.kind {
            Kind::Alias(id) => {
                aliases.push((line, name, *id, al));
                continue;
            }
            Kind::Map { flow: true, .. } => {
                return bad(
                    line,
                    format!("{name} is a flow mapping; write it as a block mapping so variables can be added"),
                )
            }
            Kind::Map { entries, .. } if !entries.is_empty() => entries,
            _ => {
                return bad(
                    line,
                    format!("{name} must be a block mapping with at least one variable"),
                )
            }
        };
        planned.push(((b.value.start, b.value.end), al));
        let indent = " ".repeat(entries[0].0.start.col);
        let mut missing = Vec::new();
        for var in vars(al) {
            let quoted = format!("{quote}{}{quote}", var.value);
            match b.value.get(var.name) {
                Some(v) if equal(v, &var) => {}
                Some(v) if matches!(v.kind, Kind::Scalar { .. }) => out.push(Edit::Replace {
                    start: v.start,
                    end: v.end,
                    text: quoted,
                }),
                Some(v) => {
                    return bad(
                        v.start.line,
                        format!("{} in {name} must be a scalar", var.name),
                    )
                }
                None if doc
                    .lookup(b.value, var.name)
                    .is_some_and(|v| equal(v, &var)) => {}
                None => missing.push(format!("{indent}{}: {quoted}", var.name)),
            }
        }
        if !missing.is_empty() {
            out.push(Edit::Insert {
                after: line,
                lines: missing,
            });
        }
    }
    for (line, name, id, al) in aliases {
        let target = doc.anchored(id).map(|n| (n.start, n.end));
        let ok = planned
            .iter()
            .any(|(span, a)| Some(*span) == target && same_num(*a, al));
        if !ok {
            return bad(
                line,
                format!("{name} is an alias of a block that does not get AL {al}; write it as its own mapping"),
            );
        }
    }
    Ok(out)
}
