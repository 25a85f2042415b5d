//! SGLang and Dynamo-SGLang: the simulate-acceptance environment variables
//! `SGLANG_SIMULATE_ACC_LEN: "<AL>"`, `SGLANG_SIMULATE_ACC_METHOD: "match-expected"` and
//! `SGLANG_SIMULATE_ACC_TOKEN_MODE: "real-draft-token"` in each `*_environment` block.
//!
//! An entry is a role of `sglang_config` with `speculative-algorithm` (or the short
//! `speculative-algo`); k is `speculative-num-steps`, and the simulation needs
//! `speculative-num-draft-tokens == speculative-num-steps + 1` when the latter is set.
//! Unlike InferenceX's injector (which refuses a recipe that already has the variables), values
//! are updated in place so a second run changes nothing.

use super::backend::{
    bad, fmt_num, get_any, positive_int, Backend, Bad, Entry, EntryState, Meta, Role,
};
use super::edit::Edit;
use super::env::{self, Var};
use crate::golden::Framework;
use crate::yaml::{Doc, Scalar};

pub(crate) struct Sglang;

const LEN: &str = "SGLANG_SIMULATE_ACC_LEN";
const METHOD: &str = "SGLANG_SIMULATE_ACC_METHOD";
const TOKEN_MODE: &str = "SGLANG_SIMULATE_ACC_TOKEN_MODE";
const METHOD_VALUE: &str = "match-expected";
const TOKEN_MODE_VALUE: &str = "real-draft-token";

const ALGO: [&str; 4] = [
    "speculative-algorithm",
    "speculative_algorithm",
    "speculative-algo",
    "speculative_algo",
];
const STEPS: [&str; 2] = ["speculative-num-steps", "speculative_num_steps"];
const DRAFT_TOKENS: [&str; 2] = [
    "speculative-num-draft-tokens",
    "speculative_num_draft_tokens",
];
const DRAFT_MODEL: [&str; 2] = [
    "speculative-draft-model-path",
    "speculative_draft_model_path",
];

fn state(doc: &Doc, role: &str) -> EntryState {
    let len = env::state(doc, role, LEN, |v| v);
    let text = |var| env::get(doc, role, var).and_then(|n| n.as_str().map(str::to_owned));
    let (method, mode) = (text(METHOD), text(TOKEN_MODE));
    match len {
        EntryState::Synthetic { .. }
            if method.as_deref() != Some(METHOD_VALUE)
                || mode.as_deref() != Some(TOKEN_MODE_VALUE) =>
        {
            EntryState::Broken {
                why: format!("{LEN} is set but {METHOD}={method:?} and {TOKEN_MODE}={mode:?} (want {METHOD_VALUE:?}, {TOKEN_MODE_VALUE:?})"),
            }
        }
        EntryState::Real if method.is_some() || mode.is_some() => EntryState::Broken {
            why: format!("{METHOD} or {TOKEN_MODE} is set without {LEN}"),
        },
        other => other,
    }
}

impl Backend for Sglang {
    fn meta(&self) -> &'static Meta {
        &Meta {
            name: "sglang",
            family: Framework::Sglang,
            recipe_types: &["sglang"],
            section: "sglang_config",
            keys: "speculative-algorithm / speculative-algo",
            knobs: &[
                ALGO[0],
                ALGO[1],
                ALGO[2],
                ALGO[3],
                STEPS[0],
                STEPS[1],
                DRAFT_TOKENS[0],
                DRAFT_TOKENS[1],
                DRAFT_MODEL[0],
                DRAFT_MODEL[1],
                LEN,
                METHOD,
                TOKEN_MODE,
            ],
            env: true,
        }
    }

    fn entry<'a>(&self, doc: &'a Doc, role: &Role<'a>) -> Result<Option<Entry<'a>>, Bad> {
        let Some((key, algo)) = get_any(role.map, &ALGO) else {
            return Ok(None);
        };
        let line = key.start.line;
        let method = match algo.scalar() {
            Some(Scalar::Str(s)) if !s.trim().is_empty() && !s.eq_ignore_ascii_case("none") => {
                s.trim().to_owned()
            }
            _ => return Ok(None),
        };
        let Some(steps) = get_any(role.map, &STEPS).and_then(|(_, v)| positive_int(v)) else {
            return bad(
                line,
                format!("role {} sets {} but no positive integer speculative-num-steps (k); set it explicitly", role.name, key.as_str().unwrap_or_default()),
            );
        };
        if let Some((dk, dv)) = get_any(role.map, &DRAFT_TOKENS) {
            if positive_int(dv) != Some(steps + 1) {
                return bad(
                    dk.start.line,
                    format!("speculative-num-draft-tokens is {} but simulated acceptance needs speculative-num-steps + 1 = {}", dv.as_str().unwrap_or("?"), steps + 1),
                );
            }
        }
        Ok(Some(Entry {
            role: role.name.clone(),
            line,
            k: steps,
            method: Some(method),
            draft_model: get_any(role.map, &DRAFT_MODEL)
                .and_then(|(_, v)| v.as_str().map(str::to_owned)),
            draft_sample_method: None,
            state: state(doc, &role.name),
            node: role.map,
        }))
    }

    fn edits(&self, doc: &Doc, plan: &[(&Entry<'_>, f64)]) -> Result<Vec<Edit>, Bad> {
        env::edits(
            doc,
            plan,
            |al| {
                vec![
                    Var {
                        name: LEN,
                        value: fmt_num(al),
                        numeric: true,
                    },
                    Var {
                        name: METHOD,
                        value: METHOD_VALUE.into(),
                        numeric: false,
                    },
                    Var {
                        name: TOKEN_MODE,
                        value: TOKEN_MODE_VALUE.into(),
                        numeric: false,
                    },
                ]
            },
            '"',
        )
    }
}
