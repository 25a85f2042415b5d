//! Prompt encoders for specperf: pure functions from chat messages and options to the exact
//! prompt string a server would build, plus token counting from a local `tokenizer.json`.
//!
//! Golden acceptance-length curves were collected by rendering chat prompts client-side and
//! posting them to `/v1/completions`; an AL is only comparable when our prompt is byte-identical
//! to the reference renderer's. This crate is that renderer; `specperf::render` calls it while
//! building request bodies, before the clock starts.
//!
//! ```text
//! messages (OpenAI JSON) ─┐
//! chat_template_kwargs ───┼─> Encoder::render ─> prompt ─> Tokenizer::count (ISL)
//! request-level tools ────┘     ├─ Dsv4 / Dsv41   deepseek::render_request (serving wrapper)
//!                               │                   └─ deepseek::encode_messages (encoder)
//!                               ├─ Template        ChatTemplate (Hugging Face Jinja, minijinja)
//!                               └─ None            the text as written
//! ```
//!
//! # API
//!
//! - [`Encoder`]`::{Dsv4, Dsv41, Template(`[`ChatTemplate`]`), None}` and
//!   [`Encoder::render`]`(messages, kwargs, tools) -> Result<String, EncodeError>`: one call for
//!   every renderer, taking what a chat request carries.
//! - [`deepseek::encode_messages`] with [`deepseek::EncodeOptions`]: the DeepSeek encoder level
//!   (thinking mode, `drop_thinking`, `context`, `continue_final_message`, ...).
//! - [`ChatTemplate::from_path`] (model directory, `tokenizer_config.json` or `.jinja` file) and
//!   [`ChatTemplate::from_source`].
//! - [`Tokenizer::from_path`] (file or model directory) and [`Tokenizer::count`].
//! - [`check_vector_file`]: runs a vector file in the shared format; its [`VectorReport`]
//!   displays each failure's diff and ends with `N passed, M failed`.
//!
//! Errors are typed: [`EncodeError`] has one variant per input the reference renderers reject;
//! [`LoadError`] covers files that cannot be read or used.
//!
//! JSON key order matters in prompts (Python dicts keep insertion order), so this crate enables
//! `serde_json`'s `preserve_order` (and `float_roundtrip`, so floats parse exactly as in Python);
//! cargo's feature unification turns both on for the whole workspace.

mod bytelevel;
mod config_tokens;
pub mod deepseek;
mod error;
mod pyjson;
mod template;
mod tokenizer;
mod vectors;

use serde_json::{Map, Value};

pub use error::{EncodeError, LoadError};
pub use template::ChatTemplate;
pub use tokenizer::{Decoder, Encoding, TokenizeError, Tokenizer};
pub use vectors::{check_vector_file, VectorOutcome, VectorReport};

/// Python's `json.dumps(value)` (separators `", "` and `": "`, keys in order, floats as Python's
/// `repr`), with `ensure_ascii` as given: the prompts' JSON uses `False`, benchmark_serving.py's
/// result file Python's default `True`.
pub fn python_json_dumps(value: &Value, ensure_ascii: bool) -> Result<String, EncodeError> {
    pyjson::dumps_with(
        value,
        &pyjson::Dump {
            ensure_ascii,
            ..pyjson::Dump::default()
        },
    )
}

/// Appends Python's `json.dumps(s)` (the string, quoted and escaped) to `out`: what
/// [`python_json_dumps`] writes for a string value, without building one.
pub fn python_json_str_into(out: &mut String, s: &str, ensure_ascii: bool) {
    pyjson::write_str(out, s, ensure_ascii);
}

/// Fuzz entry point (specperf's `fuzz/`): runs one line of the shared vector format through the
/// DeepSeek encoders, ignoring the verdict. Only a panic is a finding.
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub fn fuzz_vector_line(line: &str) {
    let _ = vectors::check_vector_lines(line);
    // The same messages through the plain-text renderer.
    if let Ok(v) = serde_json::from_str::<Value>(line) {
        if let Some(Value::Array(messages)) = v.pointer("/input/messages") {
            let _ = Encoder::None.render(messages, &Map::new(), None);
        }
    }
}

/// Which client-side renderer turns a chat request into the wire prompt.
#[derive(Clone, Debug)]
pub enum Encoder {
    /// DeepSeek-V4 serving wrapper + encoder (`--tokenizer-mode deepseek_v4`).
    Dsv4,
    /// DeepSeek-V4.1 serving wrapper + encoder.
    Dsv41,
    /// A Hugging Face chat template.
    Template(ChatTemplate),
    /// No template: the messages' text as written (see [`Encoder::render`]).
    None,
}

impl Encoder {
    /// Renders a chat request: `messages` as sent to `/v1/chat/completions`, `kwargs` its
    /// `chat_template_kwargs`, `tools` its request-level tools.
    ///
    /// For [`Encoder::None`] the prompt is the text of each message (string content, or the text
    /// parts of list content) joined by a blank line; kwargs and tools are ignored.
    pub fn render(
        &self,
        messages: &[Value],
        kwargs: &Map<String, Value>,
        tools: Option<&[Value]>,
    ) -> Result<String, EncodeError> {
        match self {
            Encoder::Dsv4 => {
                deepseek::render_request(deepseek::DeepSeekVersion::V4, messages, kwargs, tools)
            }
            Encoder::Dsv41 => {
                deepseek::render_request(deepseek::DeepSeekVersion::V41, messages, kwargs, tools)
            }
            Encoder::Template(t) => t.render(messages, kwargs, tools),
            Encoder::None => plain_text(messages),
        }
    }
}

fn plain_text(messages: &[Value]) -> Result<String, EncodeError> {
    let mut parts = Vec::with_capacity(messages.len());
    for (index, m) in messages.iter().enumerate() {
        match m.get("content") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => parts.push(s.clone()),
            Some(Value::Array(items)) => {
                for p in items {
                    match p.get("type").and_then(Value::as_str) {
                        Some("text") => parts.push(
                            p.get("text")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_owned(),
                        ),
                        other => {
                            return Err(EncodeError::UnsupportedContentPart(
                                other.unwrap_or("None").to_owned(),
                            ))
                        }
                    }
                }
            }
            Some(_) => {
                return Err(EncodeError::Malformed {
                    index,
                    field: "content",
                    expected: "a string, a list of content parts, or null",
                })
            }
        }
    }
    Ok(parts.join("\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// specperf's `fuzz/corpus/encoders` (seeds and regression inputs) replays without a panic.
    #[test]
    fn fuzz_corpus_replays_clean() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/encoders");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            fuzz_vector_line(&String::from_utf8_lossy(&bytes));
            n += 1;
        }
        assert!(n > 0, "{} is empty", dir.display());
    }

    #[test]
    fn none_encoder_keeps_text_byte_exact() {
        let text = "héllo\n<｜User｜> x ";
        let msgs = [json!({"role": "user", "content": text})];
        assert_eq!(
            Encoder::None.render(&msgs, &Map::new(), None).unwrap(),
            text
        );
    }

    #[test]
    fn dsv4_encoder_renders_a_user_turn_in_thinking_mode_by_default() {
        let msgs = [json!({"role": "user", "content": "Write a function."})];
        assert_eq!(
            Encoder::Dsv4.render(&msgs, &Map::new(), None).unwrap(),
            "<｜begin▁of▁sentence｜><｜User｜>Write a function.<｜Assistant｜><think>"
        );
    }
}
