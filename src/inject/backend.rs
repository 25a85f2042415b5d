//! The backend seam of `inject`: what a framework backend finds (an [`Entry`] per speculative
//! role) and edits, and the number helpers the backends share. The registry of the backends and
//! the choice among them are in `registry.rs`, above every backend.

use super::edit::Edit;
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
}
