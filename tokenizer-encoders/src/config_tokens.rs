//! The tokens a model directory's `tokenizer_config.json` adds to its `tokenizer.json`, as
//! `transformers` (5) adds them when it loads the directory: every token the config names
//! (`added_tokens_decoder`, `bos_token` … `mask_token`, any other `*_token`, the extra and
//! additional special tokens) that the file's `added_tokens` lack becomes an added token, so
//! text holding it encodes it whole. A config naming `<|im_end|>` beside a tokenizer without it
//! (a chat template borrowed from another model) otherwise counts the token as six pieces where
//! `transformers` counts one, and every prompt built to a length comes out shorter.

use std::path::Path;

use serde_json::{json, Map, Value};

use crate::bytelevel::AddedToken;
use crate::LoadError;

/// The special tokens `transformers` names, in the order it keeps them.
const NAMED: [&str; 7] = [
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
];

/// `tokenizer` (a `tokenizer.json`'s bytes) with the tokens `config` (its directory's
/// `tokenizer_config.json`) adds; `None` when it adds none.
pub(crate) fn with_config_tokens(
    tokenizer: &[u8],
    config: &Path,
) -> Result<Option<Vec<u8>>, LoadError> {
    let text = match std::fs::read(config) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(LoadError::Io {
                path: config.to_owned(),
                source,
            })
        }
    };
    let invalid = |what: String| LoadError::Invalid {
        path: config.to_owned(),
        what,
    };
    let cfg: Value = serde_json::from_slice(&text)
        .map_err(|e| invalid(format!("not JSON ({e}); fix or remove it")))?;
    let wanted = named_tokens(&cfg);
    if wanted.is_empty() {
        return Ok(None);
    }
    let mut file: Value = serde_json::from_slice(tokenizer).map_err(|e| LoadError::Invalid {
        path: config.with_file_name("tokenizer.json"),
        what: format!("not a tokenizer.json: {e}"),
    })?;
    let added = file
        .get("added_tokens")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut have: Vec<String> = added
        .iter()
        .filter_map(|t| t.get("content")?.as_str().map(str::to_owned))
        .collect();
    let vocab = file.pointer("/model/vocab").unwrap_or(&Value::Null);
    let vocab_len = match vocab {
        Value::Object(m) => m.len() as u64,
        Value::Array(a) => a.len() as u64,
        _ => 0,
    };
    // New ids follow the vocabulary and every added id, as `tokenizers` assigns them.
    let mut next = added
        .iter()
        .filter_map(|t| t.get("id")?.as_u64())
        .map(|id| id + 1)
        .chain([vocab_len])
        .max()
        .unwrap_or(0);
    let mut extra = Vec::new();
    for t in wanted {
        if have.contains(&t.content) {
            continue;
        }
        let id = match vocab_id(vocab, &t.content) {
            Some(id) => id,
            None => {
                next += 1;
                next - 1
            }
        };
        let mut entry = serde_json::to_value(&t).map_err(|e| invalid(e.to_string()))?;
        entry["id"] = json!(id);
        extra.push(entry);
        have.push(t.content);
    }
    if extra.is_empty() {
        return Ok(None);
    }
    let mut all = added;
    all.extend(extra);
    file["added_tokens"] = Value::Array(all);
    Ok(Some(
        serde_json::to_vec(&file).map_err(|e| invalid(e.to_string()))?,
    ))
}

/// Every token `cfg` names, in the order `transformers` adds them: `added_tokens_decoder` by
/// id, the named special tokens (a bare string is special and not normalized), the other
/// `*_token` keys, then the extra (or, before them, additional) special tokens.
fn named_tokens(cfg: &Value) -> Vec<AddedToken> {
    let Some(cfg) = cfg.as_object() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(Value::Object(decoder)) = cfg.get("added_tokens_decoder") {
        let mut by_id: Vec<(u64, &Value)> = decoder
            .iter()
            .filter_map(|(k, v)| Some((k.parse().ok()?, v)))
            .collect();
        by_id.sort_by_key(|(id, _)| *id);
        out.extend(by_id.into_iter().filter_map(|(_, v)| token(v, false)));
    }
    let model_specific = cfg
        .iter()
        .filter(|(k, _)| k.ends_with("_token") && !NAMED.contains(&k.as_str()))
        .map(|(_, v)| v);
    let extra_named = match cfg.get("extra_special_tokens") {
        Some(Value::Object(m)) => m.values().collect(),
        _ => Vec::new(),
    };
    out.extend(
        NAMED
            .iter()
            .filter_map(|k| cfg.get(*k))
            .chain(extra_named)
            .chain(model_specific)
            .filter_map(|v| token(v, true)),
    );
    let listed = match (
        cfg.get("extra_special_tokens"),
        cfg.get("additional_special_tokens"),
    ) {
        (Some(Value::Array(l)), _) | (_, Some(Value::Array(l))) => l.as_slice(),
        _ => &[],
    };
    out.extend(listed.iter().filter_map(|v| token(v, true)));
    out
}

/// A token as the config gives it: a string (special when `named`), or an `AddedToken` object
/// with its flags (a named one is made special).
fn token(v: &Value, named: bool) -> Option<AddedToken> {
    match v {
        Value::String(s) => Some(AddedToken {
            content: s.clone(),
            single_word: false,
            lstrip: false,
            rstrip: false,
            normalized: !named,
            special: named,
        }),
        Value::Object(o) => added_token(o, named),
        _ => None,
    }
}

fn added_token(o: &Map<String, Value>, named: bool) -> Option<AddedToken> {
    // `added_tokens_decoder` entries carry no type tag; elsewhere only a tagged object is an
    // AddedToken (any other object stays a dict, which transformers does not add).
    if named && o.get("__type").and_then(Value::as_str) != Some("AddedToken") {
        return None;
    }
    let flag = |k: &str, default: bool| o.get(k).and_then(Value::as_bool).unwrap_or(default);
    let special = flag("special", named) || named;
    Some(AddedToken {
        content: o.get("content")?.as_str()?.to_owned(),
        single_word: flag("single_word", false),
        lstrip: flag("lstrip", false),
        rstrip: flag("rstrip", false),
        normalized: flag("normalized", !special),
        special,
    })
}

/// The id of `piece` in a model's vocabulary: a map of pieces to ids, or Unigram's list of
/// `[piece, score]`.
fn vocab_id(vocab: &Value, piece: &str) -> Option<u64> {
    match vocab {
        Value::Object(m) => m.get(piece)?.as_u64(),
        Value::Array(a) => a
            .iter()
            .position(|e| e.get(0).and_then(Value::as_str) == Some(piece))
            .map(|i| i as u64),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_names_tokens_in_transformers_order_with_their_flags() {
        let cfg = json!({
            "tokenizer_class": "PreTrainedTokenizerFast",
            "add_bos_token": false,
            "eos_token": "<|im_end|>",
            "unk_token": null,
            "pad_token": {"__type": "AddedToken", "content": "<|pad|>", "lstrip": true,
                          "normalized": false, "rstrip": false, "single_word": false},
            "image_token": "<|image|>",
            "not_a_token": {"content": "<|dict|>"},
            "additional_special_tokens": ["<|a|>"],
            "added_tokens_decoder": {
                "9": {"content": "<|c|>", "lstrip": false, "normalized": true,
                      "rstrip": false, "single_word": false, "special": false},
                "3": {"content": "<|b|>", "special": true}
            }
        });
        let got: Vec<(String, bool, bool, bool)> = named_tokens(&cfg)
            .into_iter()
            .map(|t| (t.content, t.special, t.normalized, t.lstrip))
            .collect();
        let want = [
            ("<|b|>", true, false, false),
            ("<|c|>", false, true, false),
            ("<|im_end|>", true, false, false),
            ("<|pad|>", true, false, true),
            ("<|image|>", true, false, false),
            ("<|a|>", true, false, false),
        ];
        let want: Vec<(String, bool, bool, bool)> = want
            .iter()
            .map(|&(c, s, n, l)| (c.to_owned(), s, n, l))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn only_missing_tokens_are_added_with_the_ids_tokenizers_gives_them() {
        let file = json!({
            "added_tokens": [{"id": 5, "content": "<s>", "single_word": false, "lstrip": false,
                              "rstrip": false, "normalized": false, "special": true}],
            "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "hello": 2}}
        });
        let dir = std::env::temp_dir().join(format!(
            "specperf-config-tokens-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = dir.join("tokenizer_config.json");
        let _ = std::fs::remove_file(&cfg);
        let bytes = serde_json::to_vec(&file).unwrap();
        assert_eq!(with_config_tokens(&bytes, &cfg).unwrap(), None, "no config");
        std::fs::write(&cfg, r#"{"bos_token": "<s>"}"#).unwrap();
        assert_eq!(
            with_config_tokens(&bytes, &cfg).unwrap(),
            None,
            "nothing missing"
        );
        std::fs::write(
            &cfg,
            r#"{"bos_token": "<s>", "eos_token": "</s>", "additional_special_tokens": ["hello", "<x>"]}"#,
        )
        .unwrap();
        let out: Value =
            serde_json::from_slice(&with_config_tokens(&bytes, &cfg).unwrap().unwrap()).unwrap();
        let ids: Vec<(u64, &str)> = out["added_tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t["id"].as_u64().unwrap(), t["content"].as_str().unwrap()))
            .collect();
        assert_eq!(ids, [(5, "<s>"), (6, "</s>"), (2, "hello"), (7, "<x>")]);
        std::fs::write(&cfg, "{not json").unwrap();
        let e = with_config_tokens(&bytes, &cfg).unwrap_err().to_string();
        assert!(
            e.contains("tokenizer_config.json") && e.contains("not JSON"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
