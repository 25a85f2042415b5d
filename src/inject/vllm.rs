//! vLLM and Dynamo-vLLM: `speculative-config` (or `speculative_config`) of each role gains
//! `"rejection_sample_method":"synthetic"` and `"synthetic_acceptance_length":AL`.
//!
//! Forms: a JSON object in a single- or double-quoted string (existing key order kept, new keys
//! appended, compact JSON re-emitted in the same quoting), a flow mapping (`{method: mtp, ...}`,
//! keys added before the closing brace) or a block mapping (keys added as lines after the
//! last entry). An entry already synthetic at the wanted AL is not touched at all.

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;

use super::backend::{bad, fmt_num, same_num, Backend, Bad, Entry, EntryState, Meta, Role};
use super::edit::Edit;
use crate::golden::Framework;
use crate::yaml::{Doc, Kind, Node, Pos, Scalar, Style};

pub(crate) struct Vllm;

const KEYS: [&str; 2] = ["speculative-config", "speculative_config"];
const METHOD_KEY: &str = "rejection_sample_method";
const AL_KEY: &str = "synthetic_acceptance_length";

/// A JSON object's members in file order, values as written.
struct Ordered(Vec<(String, Box<RawValue>)>);

impl<'de> serde::Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Ordered, A::Error> {
                let mut out: Vec<(String, Box<RawValue>)> = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, Box<RawValue>>()? {
                    if out.iter().any(|(e, _)| *e == k) {
                        return Err(serde::de::Error::custom(format!("duplicate key {k:?}")));
                    }
                    out.push((k, v));
                }
                Ok(Ordered(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// JSON text without insignificant whitespace.
fn minify(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let (mut in_str, mut esc) = (false, false);
    for c in json.chars() {
        if in_str {
            out.push(c);
            if esc {
                esc = false;
            } else if c == '\\' {
                esc = true;
            } else if c == '"' {
                in_str = false;
            }
        } else if !c.is_whitespace() {
            if c == '"' {
                in_str = true;
            }
            out.push(c);
        }
    }
    out
}

/// How the entry is written.
enum Form {
    Json {
        members: Vec<(String, Box<RawValue>)>,
        double_quoted: bool,
    },
    Map,
}

fn read(doc: &Doc, key: &str, v: &Node) -> Result<(Vec<(String, Value)>, Form), Bad> {
    let line = v.start.line;
    match &v.kind {
        Kind::Scalar {
            value,
            style: style @ (Style::SingleQuoted | Style::DoubleQuoted),
            ..
        } => {
            let Ordered(members) = serde_json::from_str(value).map_err(|e| Bad {
                line,
                what: format!("{key} is not a JSON object ({e}); write it as '{{\"method\":...,\"num_speculative_tokens\":k}}'"),
            })?;
            let fields = members
                .iter()
                .map(|(k, raw)| {
                    let v: Value = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
                    (k.clone(), v)
                })
                .collect();
            Ok((
                fields,
                Form::Json {
                    members,
                    double_quoted: *style == Style::DoubleQuoted,
                },
            ))
        }
        Kind::Map { entries, .. } => {
            let mut fields = Vec::with_capacity(entries.len());
            for (k, val) in entries {
                let Some(name) = k.as_str() else {
                    return bad(k.start.line, format!("{key} has a non-scalar key"));
                };
                let json = doc.to_json(val).map_err(|what| Bad {
                    line: val.start.line,
                    what: what.to_string(),
                })?;
                fields.push((name.to_owned(), json));
            }
            Ok((fields, Form::Map))
        }
        Kind::Scalar {
            style: Style::Block,
            ..
        } => bad(
            line,
            format!("{key} as a block scalar is not supported; write it as a single-quoted JSON string or a mapping"),
        ),
        _ => bad(
            line,
            format!("{key} must be a JSON object string or a mapping, e.g. '{{\"method\":\"mtp\",\"num_speculative_tokens\":3}}'"),
        ),
    }
}

fn field<'a>(fields: &'a [(String, Value)], key: &str) -> Option<&'a Value> {
    fields.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

fn state(fields: &[(String, Value)]) -> EntryState {
    let synthetic = field(fields, METHOD_KEY).and_then(Value::as_str) == Some("synthetic");
    match (synthetic, field(fields, AL_KEY)) {
        (true, Some(Value::Number(n))) => EntryState::Synthetic {
            al: n.as_f64().unwrap_or(f64::NAN),
        },
        (true, Some(other)) => EntryState::Broken {
            why: format!("{AL_KEY} {other} is not a number"),
        },
        (true, None) => EntryState::Broken {
            why: format!("{METHOD_KEY} is synthetic but {AL_KEY} is missing"),
        },
        (false, Some(_)) => EntryState::Broken {
            why: format!("{AL_KEY} is set but {METHOD_KEY} is not synthetic"),
        },
        (false, None) => EntryState::Real,
    }
}

impl Backend for Vllm {
    fn meta(&self) -> &'static Meta {
        &Meta {
            name: "vllm",
            family: Framework::Vllm,
            recipe_types: &["vllm"],
            section: "vllm_config",
            keys: "speculative-config / speculative_config",
            knobs: &[
                KEYS[0],
                KEYS[1],
                METHOD_KEY,
                AL_KEY,
                "num_speculative_tokens",
            ],
            env: false,
        }
    }

    fn entry<'a>(&self, doc: &'a Doc, role: &Role<'a>) -> Result<Option<Entry<'a>>, Bad> {
        let found: Vec<&(Node, Node)> = KEYS.iter().filter_map(|k| role.map.get_entry(k)).collect();
        let Some((key, value)) = found.first() else {
            return Ok(None);
        };
        let line = key.start.line;
        if found.len() > 1 {
            return bad(
                line,
                format!(
                    "role {} has both speculative-config and speculative_config; keep one",
                    role.name
                ),
            );
        }
        let key_name = key.as_str().unwrap_or_default();
        let node = doc.resolve(value);
        let (fields, _) = read(doc, key_name, node)?;
        let k = match field(&fields, "num_speculative_tokens") {
            Some(Value::Number(n)) => n
                .as_u64()
                .filter(|k| *k >= 1)
                .and_then(|k| u32::try_from(k).ok()),
            _ => None,
        };
        let Some(k) = k else {
            return bad(
                line,
                format!("{key_name} of role {} has no positive integer num_speculative_tokens (found {}); the AL range and the golden lookup need it", role.name, field(&fields, "num_speculative_tokens").map_or("nothing".into(), Value::to_string)),
            );
        };
        let text = |k: &str| field(&fields, k).and_then(Value::as_str).map(str::to_owned);
        Ok(Some(Entry {
            role: role.name.clone(),
            line,
            k,
            method: text("method"),
            draft_model: text("model"),
            draft_sample_method: text("draft_sample_method"),
            state: state(&fields),
            node,
        }))
    }

    fn edits(&self, doc: &Doc, plan: &[(&Entry<'_>, f64)]) -> Result<Vec<Edit>, Bad> {
        let mut out = Vec::new();
        for (e, al) in plan {
            if matches!(e.state, EntryState::Synthetic { al: got } if same_num(got, *al)) {
                // Leave the entry byte-identical, even if its JSON is not compact.
                continue;
            }
            let (_, form) = read(doc, "speculative-config", e.node)?;
            match form {
                Form::Json {
                    members,
                    double_quoted,
                } => out.push(json_edit(e.node, members, double_quoted, *al)),
                Form::Map => out.extend(map_edits(doc, e.node, *al)?),
            }
        }
        Ok(out)
    }
}

fn json_edit(
    node: &Node,
    mut members: Vec<(String, Box<RawValue>)>,
    double_quoted: bool,
    al: f64,
) -> Edit {
    let mut parts: Vec<(String, String)> = members
        .drain(..)
        .map(|(k, raw)| {
            let v = minify(raw.get());
            (k, v)
        })
        .collect();
    for (key, value) in [
        (METHOD_KEY, "\"synthetic\"".to_owned()),
        (AL_KEY, fmt_num(al)),
    ] {
        match parts.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = value,
            None => parts.push((key.to_owned(), value)),
        }
    }
    let body: Vec<String> = parts
        .iter()
        .map(|(k, v)| {
            format!(
                "{}:{v}",
                serde_json::to_string(k).expect("a string serializes")
            )
        })
        .collect();
    let json = format!("{{{}}}", body.join(","));
    let text = if double_quoted {
        format!("\"{}\"", json.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        format!("'{}'", json.replace('\'', "''"))
    };
    Edit::Replace {
        start: node.start,
        end: node.end,
        text,
    }
}

fn map_edits(doc: &Doc, node: &Node, al: f64) -> Result<Vec<Edit>, Bad> {
    let Kind::Map { entries, flow } = &node.kind else {
        return bad(node.start.line, "speculative-config must be a mapping");
    };
    // Follow the mapping's own quoting: JSON-style flow mappings get quoted keys and strings.
    let quoted = *flow
        && entries.first().is_some_and(|(k, _)| {
            matches!(
                k.kind,
                Kind::Scalar {
                    style: Style::DoubleQuoted,
                    ..
                }
            )
        });
    let q = |s: &str| {
        if quoted {
            format!("\"{s}\"")
        } else {
            s.to_owned()
        }
    };
    let mut out = Vec::new();
    let mut missing = Vec::new();
    for (key, text, ok) in [
        (
            METHOD_KEY,
            q("synthetic"),
            Box::new(|n: &Node| n.scalar() == Some(Scalar::Str("synthetic")))
                as Box<dyn Fn(&Node) -> bool>,
        ),
        (
            AL_KEY,
            fmt_num(al),
            Box::new(move |n: &Node| match n.scalar() {
                Some(Scalar::Int(i)) => same_num(i as f64, al),
                Some(Scalar::Float(f)) => same_num(f, al),
                _ => false,
            }),
        ),
    ] {
        match node.get(key) {
            Some(v) if ok(v) => {}
            Some(v) if matches!(v.kind, Kind::Scalar { .. }) => out.push(Edit::Replace {
                start: v.start,
                end: v.end,
                text,
            }),
            Some(v) => return bad(v.start.line, format!("{key} must be a scalar")),
            None => missing.push(format!("{}: {text}", q(key))),
        }
    }
    if missing.is_empty() {
        return Ok(out);
    }
    if *flow {
        // Before the closing brace; a comma unless the mapping is empty or ends with one.
        let close = Pos {
            line: node.end.line,
            col: node.end.col.saturating_sub(1),
        };
        let inner = &doc.src.text()[doc.src.offset(node.start)..doc.src.offset(close)];
        let inner = inner.trim_end();
        let sep = if entries.is_empty() || inner.ends_with(',') {
            ""
        } else {
            ", "
        };
        out.push(Edit::Replace {
            start: close,
            end: close,
            text: format!("{sep}{}", missing.join(", ")),
        });
    } else {
        let indent = " ".repeat(entries.first().map_or(0, |(k, _)| k.start.col));
        out.push(Edit::Insert {
            after: node.last_line(&doc.src),
            lines: missing.iter().map(|m| format!("{indent}{m}")).collect(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inject::edit;
    use crate::yaml;

    /// Runs the backend on `text` with AL 2.5 for every entry; returns the new text.
    fn inject(text: &str) -> String {
        let doc = yaml::parse(text.to_owned()).unwrap();
        let roles = vec![Role {
            name: "top-level".into(),
            map: &doc.root,
        }];
        let entries = Vllm.entries(&doc, &roles).map_err(|b| b.what).unwrap();
        let plan: Vec<_> = entries.iter().map(|e| (e, 2.5)).collect();
        let edits = Vllm.edits(&doc, &plan).map_err(|b| b.what).unwrap();
        edit::apply(&doc.src, edits).unwrap().0
    }

    #[test]
    fn single_quoted_json_keeps_order_and_compacts() {
        assert_eq!(
            inject("speculative-config: '{\"method\": \"mtp\", \"num_speculative_tokens\": 2}'  # c\n"),
            "speculative-config: '{\"method\":\"mtp\",\"num_speculative_tokens\":2,\"rejection_sample_method\":\"synthetic\",\"synthetic_acceptance_length\":2.5}'  # c\n"
        );
    }

    #[test]
    fn double_quoted_json_is_reescaped() {
        assert_eq!(
            inject("speculative_config: \"{\\\"method\\\":\\\"mtp\\\",\\\"num_speculative_tokens\\\":3,\\\"rejection_sample_method\\\":\\\"block\\\"}\"\n"),
            "speculative_config: \"{\\\"method\\\":\\\"mtp\\\",\\\"num_speculative_tokens\\\":3,\\\"rejection_sample_method\\\":\\\"synthetic\\\",\\\"synthetic_acceptance_length\\\":2.5}\"\n"
        );
    }

    #[test]
    fn flow_and_block_mappings() {
        assert_eq!(
            inject("speculative-config: {method: mtp, num_speculative_tokens: 2}\n"),
            "speculative-config: {method: mtp, num_speculative_tokens: 2, rejection_sample_method: synthetic, synthetic_acceptance_length: 2.5}\n"
        );
        assert_eq!(
            inject("speculative-config: {\"method\": \"mtp\", \"num_speculative_tokens\": 2, \"synthetic_acceptance_length\": 1.5}\n"),
            "speculative-config: {\"method\": \"mtp\", \"num_speculative_tokens\": 2, \"synthetic_acceptance_length\": 2.5, \"rejection_sample_method\": \"synthetic\"}\n"
        );
        assert_eq!(
            inject("speculative-config:\n  method: mtp   # why\n  num_speculative_tokens: 2\nnext: 1\n"),
            "speculative-config:\n  method: mtp   # why\n  num_speculative_tokens: 2\n  rejection_sample_method: synthetic\n  synthetic_acceptance_length: 2.5\nnext: 1\n"
        );
    }

    #[test]
    fn already_synthetic_is_untouched_even_when_not_compact() {
        let t = "speculative-config: '{\"method\": \"mtp\", \"num_speculative_tokens\": 2, \"rejection_sample_method\": \"synthetic\", \"synthetic_acceptance_length\": 2.50}'\n";
        assert_eq!(inject(t), t);
    }

    #[test]
    fn bad_k_is_refused() {
        for v in ["2.0", "true", "\"2\"", "0"] {
            let t = format!(
                "speculative-config: '{{\"method\":\"mtp\",\"num_speculative_tokens\":{v}}}'\n"
            );
            let doc = yaml::parse(t).unwrap();
            let roles = vec![Role {
                name: "r".into(),
                map: &doc.root,
            }];
            assert!(Vllm.entries(&doc, &roles).is_err(), "{v}");
        }
    }
}
