//! ATOM (ROCm): `spec-decode-acceptance-length: AL` beside the role's
//! `num-speculative-tokens` (the server flags `--method mtp --num-speculative-tokens k
//! --spec-decode-acceptance-length AL`). `spec-decode-acceptance-rate` excludes it: a recipe
//! with the rate is refused rather than given both.

use super::backend::{
    bad, fmt_num, get_any, number, positive_int, same_num, Backend, Bad, Entry, EntryState, Meta,
    Role,
};
use super::edit::Edit;
use crate::golden::Framework;
use crate::yaml::{Doc, Kind};

pub(crate) struct Atom;

const K: [&str; 2] = ["num-speculative-tokens", "num_speculative_tokens"];
const LENGTH: [&str; 2] = [
    "spec-decode-acceptance-length",
    "spec_decode_acceptance_length",
];
const RATE: [&str; 2] = ["spec-decode-acceptance-rate", "spec_decode_acceptance_rate"];

impl Backend for Atom {
    fn meta(&self) -> &'static Meta {
        &Meta {
            name: "atom",
            family: Framework::Atom,
            recipe_types: &["atom"],
            section: "atom_config",
            keys: "num-speculative-tokens",
            knobs: &[K[0], K[1], LENGTH[0], LENGTH[1], RATE[0], RATE[1]],
            env: false,
        }
    }

    fn entry<'a>(&self, _doc: &'a Doc, role: &Role<'a>) -> Result<Option<Entry<'a>>, Bad> {
        let Some((key, kv)) = get_any(role.map, &K) else {
            return Ok(None);
        };
        let line = key.start.line;
        let Some(k) = positive_int(kv) else {
            return bad(
                line,
                format!(
                    "num-speculative-tokens of role {} must be a positive integer",
                    role.name
                ),
            );
        };
        let length = get_any(role.map, &LENGTH).map(|(_, v)| v);
        let rate = get_any(role.map, &RATE).map(|(_, v)| v);
        let state = match (length.map(number), rate.map(number)) {
            (Some(_), Some(_)) => EntryState::Broken {
                why: "spec-decode-acceptance-length and -rate are mutually exclusive".into(),
            },
            (Some(Some(al)), None) => EntryState::Synthetic { al },
            (None, Some(Some(r))) => EntryState::Synthetic {
                al: 1.0 + r * f64::from(k),
            },
            (None, None) => EntryState::Real,
            _ => EntryState::Broken {
                why: "spec-decode-acceptance value is not a number".into(),
            },
        };
        Ok(Some(Entry {
            role: role.name.clone(),
            line,
            k,
            method: get_any(role.map, &["method"]).and_then(|(_, v)| v.as_str().map(str::to_owned)),
            draft_model: None,
            draft_sample_method: None,
            state,
            node: role.map,
        }))
    }

    fn edits(&self, doc: &Doc, plan: &[(&Entry<'_>, f64)]) -> Result<Vec<Edit>, Bad> {
        let mut out = Vec::new();
        for (e, al) in plan {
            let map = e.node;
            if let Some((rk, _)) = get_any(map, &RATE) {
                return bad(
                    rk.start.line,
                    "spec-decode-acceptance-rate is set; remove it so spec-decode-acceptance-length can be injected",
                );
            }
            match get_any(map, &LENGTH) {
                Some((_, v)) if number(v).is_some_and(|x| same_num(x, *al)) => {}
                Some((_, v)) if matches!(v.kind, Kind::Scalar { .. }) => out.push(Edit::Replace {
                    start: v.start,
                    end: v.end,
                    text: fmt_num(*al),
                }),
                Some((k, _)) => {
                    return bad(
                        k.start.line,
                        "spec-decode-acceptance-length must be a number",
                    )
                }
                None => {
                    if map.is_flow_map() {
                        return bad(
                            e.line,
                            "the role is a flow mapping; write it as a block mapping",
                        );
                    }
                    let (kk, kv) = get_any(map, &K).expect("entries found the key");
                    out.push(Edit::Insert {
                        after: kv.last_line(&doc.src),
                        lines: vec![format!(
                            "{}spec-decode-acceptance-length: {}",
                            " ".repeat(kk.start.col),
                            fmt_num(*al)
                        )],
                    });
                }
            }
        }
        Ok(out)
    }
}
