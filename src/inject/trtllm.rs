//! TensorRT-LLM and Dynamo-TRT: `TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS` in each role's
//! `*_environment` block. The knob counts accepted *draft* tokens, so it is AL − 1 (fractional
//! allowed): golden 2.49 is written `'1.49'`.
//!
//! An entry is a role of `trtllm_config` with a `speculative_config` mapping; the method is its
//! `decoding_type`, k its `max_draft_len` (else `num_nextn_predict_layers`).

use super::backend::{bad, fmt_num, get_any, positive_int, Backend, Bad, Entry, Meta, Role};
use super::edit::Edit;
use super::env::{self, Var};
use crate::golden::Framework;
use crate::yaml::Doc;

pub(crate) struct Trtllm;

const FORCE: &str = "TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS";
const KEYS: [&str; 2] = ["speculative_config", "speculative-config"];

impl Backend for Trtllm {
    fn meta(&self) -> &'static Meta {
        &Meta {
            name: "trtllm",
            family: Framework::Trtllm,
            recipe_types: &["trtllm", "trt", "tensorrt-llm", "tensorrt_llm"],
            section: "trtllm_config",
            keys: "speculative_config",
            knobs: &[KEYS[0], KEYS[1], FORCE, "max_draft_len", "decoding_type"],
            env: true,
        }
    }

    fn entry<'a>(&self, doc: &'a Doc, role: &Role<'a>) -> Result<Option<Entry<'a>>, Bad> {
        let Some((key, spec)) = get_any(role.map, &KEYS) else {
            return Ok(None);
        };
        let line = key.start.line;
        let spec = doc.resolve(spec);
        if !spec.is_map() {
            return bad(line, format!("speculative_config of role {} must be a mapping with decoding_type and max_draft_len", role.name));
        }
        let Some(k) = get_any(spec, &["max_draft_len", "num_nextn_predict_layers"])
            .and_then(|(_, v)| positive_int(v))
        else {
            return bad(
                line,
                format!(
                    "speculative_config of role {} has no positive integer max_draft_len",
                    role.name
                ),
            );
        };
        let text =
            |keys: &[&str]| get_any(spec, keys).and_then(|(_, v)| v.as_str().map(str::to_owned));
        Ok(Some(Entry {
            role: role.name.clone(),
            line,
            k,
            method: text(&["decoding_type"]),
            draft_model: text(&["speculative_model_dir", "speculative_model"]),
            draft_sample_method: None,
            state: env::state(doc, &role.name, FORCE, |v| v + 1.0),
            node: spec,
        }))
    }

    fn edits(&self, doc: &Doc, plan: &[(&Entry<'_>, f64)]) -> Result<Vec<Edit>, Bad> {
        env::edits(
            doc,
            plan,
            |al| {
                vec![Var {
                    name: FORCE,
                    value: fmt_num(al - 1.0),
                    numeric: true,
                }]
            },
            '\'',
        )
    }
}
