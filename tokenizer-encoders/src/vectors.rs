//! Runs a vector file in the shared format (`shared/vectors/encoders/README.md`): JSON Lines, one
//! case per line with `id`, `encoder` (`dsv4`/`dsv41`), `level` (`encoder`/`wrapper`), `input`
//! and `expected` or `expected_error`.
//!
//! The crate's tests run the committed copies; `specperf render --check-vectors FILE` runs any
//! file through [`check_vector_file`] so that new vector sets drop in without code changes.

use std::fmt;
use std::path::Path;

use serde_json::{Map, Value};

use crate::deepseek::{
    encode_messages, render_request, DeepSeekVersion, EncodeOptions, ReasoningEffort,
};
use crate::pyjson::truthy;
use crate::{EncodeError, LoadError};

/// The result of one vector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VectorOutcome {
    /// The vector's `id` (or `line N` when it has none).
    pub id: String,
    /// Whether the port gave the expected prompt, or an error where one was expected.
    pub passed: bool,
    /// For a failure: what differed, readable (first differing position and both sides there).
    pub detail: Option<String>,
}

/// All outcomes of a vector file, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VectorReport {
    /// One per non-empty line.
    pub outcomes: Vec<VectorOutcome>,
}

impl VectorReport {
    /// Number of vectors that passed.
    pub fn passed(&self) -> usize {
        self.outcomes.iter().filter(|o| o.passed).count()
    }

    /// Number of vectors that failed.
    pub fn failed(&self) -> usize {
        self.outcomes.len() - self.passed()
    }

    /// The failures, in file order.
    pub fn failures(&self) -> impl Iterator<Item = &VectorOutcome> {
        self.outcomes.iter().filter(|o| !o.passed)
    }
}

/// Each failure with its diff, then the summary line `N passed, M failed`.
impl fmt::Display for VectorReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for o in self.failures() {
            writeln!(f, "FAIL {}", o.id)?;
            if let Some(d) = &o.detail {
                for line in d.lines() {
                    writeln!(f, "  {line}")?;
                }
            }
        }
        write!(f, "{} passed, {} failed", self.passed(), self.failed())
    }
}

/// Reads and runs every vector in `path`. A malformed line is a failed vector, not an error; only
/// an unreadable file is.
pub fn check_vector_file(path: &Path) -> Result<VectorReport, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Io {
        path: path.to_owned(),
        source,
    })?;
    Ok(check_vector_lines(&text))
}

/// Runs every vector in `text` (the contents of a vector file).
pub(crate) fn check_vector_lines(text: &str) -> VectorReport {
    let outcomes = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, line)| check_line(n + 1, line))
        .collect();
    VectorReport { outcomes }
}

fn check_line(line_no: usize, line: &str) -> VectorOutcome {
    let fail = |id: String, detail: String| VectorOutcome {
        id,
        passed: false,
        detail: Some(detail),
    };
    let v: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => return fail(format!("line {line_no}"), format!("not JSON: {e}")),
    };
    let id = v
        .get("id")
        .and_then(Value::as_str)
        .map_or_else(|| format!("line {line_no}"), str::to_owned);
    let result = match run_vector(&v) {
        Ok(r) => r,
        Err(why) => return fail(id, format!("line {line_no}: malformed vector: {why}")),
    };
    let verdict = match (v.get("expected"), v.get("expected_error"), result) {
        (Some(Value::String(want)), _, Ok(got)) if *want == got => None,
        (Some(Value::String(want)), _, Ok(got)) => Some(diff(want, &got)),
        (Some(Value::String(_)), _, Err(e)) => Some(format!("expected a prompt, got error: {e}")),
        (_, Some(want), Err(_)) if !want.is_null() => None,
        (_, Some(want), Ok(got)) if !want.is_null() => Some(format!(
            "expected error {want}, got a prompt:\n{}",
            snippet(&got, 0, 200)
        )),
        _ => Some(format!(
            "line {line_no}: no `expected` string or `expected_error`"
        )),
    };
    VectorOutcome {
        id,
        passed: verdict.is_none(),
        detail: verdict,
    }
}

/// Runs one vector; the outer error is a malformed vector, the inner one the encoder's verdict.
fn run_vector(v: &Value) -> Result<Result<String, EncodeError>, String> {
    let version = match v.get("encoder").and_then(Value::as_str) {
        Some("dsv4") => DeepSeekVersion::V4,
        Some("dsv41") => DeepSeekVersion::V41,
        other => {
            return Err(format!(
                "unknown encoder {other:?} (expected dsv4 or dsv41)"
            ))
        }
    };
    let input = v
        .get("input")
        .and_then(Value::as_object)
        .ok_or("no `input` object")?;
    let messages = list(input, "messages")?;
    match v.get("level").and_then(Value::as_str) {
        Some("encoder") => {
            let mode = input
                .get("thinking_mode")
                .and_then(Value::as_str)
                .ok_or("encoder level needs a string `thinking_mode`")?;
            let mode = match mode.parse() {
                Ok(m) => m,
                Err(e) => return Ok(Err(e)),
            };
            let mut opts = EncodeOptions::new(mode);
            let flag = |k: &str, default: bool| input.get(k).map_or(default, truthy);
            opts.drop_thinking = flag("drop_thinking", true);
            opts.add_default_bos_token = flag("add_default_bos_token", true);
            opts.add_generation_prompt = flag("add_generation_prompt", true);
            opts.continue_final_message = flag("continue_final_message", false);
            opts.context = list(input, "context")?;
            opts.reasoning_effort = match input.get("reasoning_effort") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(ReasoningEffort::Named(s.clone())),
                Some(Value::Number(n)) if n.is_i64() || n.is_u64() => {
                    Some(ReasoningEffort::Level(n.as_i64().unwrap_or(i64::MAX)))
                }
                // Neither a name nor an integer: no encoder accepts it; keep its text for the error.
                Some(other) => Some(ReasoningEffort::Named(other.to_string())),
            };
            Ok(encode_messages(version, &messages, &opts))
        }
        Some("wrapper") => {
            let empty = Map::new();
            let kwargs = match input.get("chat_template_kwargs") {
                None | Some(Value::Null) => &empty,
                Some(Value::Object(m)) => m,
                Some(_) => return Err("`chat_template_kwargs` must be an object".into()),
            };
            let tools = match input.get("tools") {
                None | Some(Value::Null) => None,
                Some(Value::Array(t)) => Some(t.as_slice()),
                Some(_) => return Err("`tools` must be a list".into()),
            };
            Ok(render_request(version, &messages, kwargs, tools))
        }
        other => Err(format!(
            "unknown level {other:?} (expected encoder or wrapper)"
        )),
    }
}

fn list(input: &Map<String, Value>, key: &str) -> Result<Vec<Value>, String> {
    match input.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => Ok(items.clone()),
        Some(_) => Err(format!("`{key}` must be a list")),
    }
}

/// Where two prompts part, with both sides around that point (escaped, so whitespace shows).
fn diff(want: &str, got: &str) -> String {
    let at = want
        .char_indices()
        .zip(got.chars())
        .find(|((_, a), b)| a != b)
        .map(|((i, _), _)| i)
        .unwrap_or_else(|| want.len().min(got.len()));
    let line = want[..at].matches('\n').count() + 1;
    let column = want[..at]
        .rsplit('\n')
        .next()
        .map_or(0, |l| l.chars().count())
        + 1;
    format!(
        "first difference at byte {at} (line {line}, column {column}); expected {} bytes, got {}\n\
         expected: {}\n\
         actual:   {}",
        want.len(),
        got.len(),
        snippet(want, at, 60),
        snippet(got, at, 60)
    )
}

/// Up to `width` characters either side of byte `at`, Debug-escaped.
fn snippet(s: &str, at: usize, width: usize) -> String {
    let at = (0..=at.min(s.len()))
        .rev()
        .find(|i| s.is_char_boundary(*i))
        .unwrap_or(0);
    let start = s[..at]
        .char_indices()
        .rev()
        .nth(width)
        .map_or(0, |(i, _)| i);
    let end = s[at..]
        .char_indices()
        .nth(width)
        .map_or(s.len(), |(i, _)| at + i);
    format!(
        "{}{:?}{}",
        if start > 0 { "…" } else { "" },
        &s[start..end],
        if end < s.len() { "…" } else { "" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_counts_and_shows_a_readable_diff() {
        let text = concat!(
            r#"{"id":"ok","encoder":"dsv4","level":"encoder","input":{"messages":[{"role":"user","content":"Hi"}],"thinking_mode":"chat"},"expected":"<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜></think>"}"#,
            "\n",
            r#"{"id":"bad","encoder":"dsv4","level":"encoder","input":{"messages":[{"role":"user","content":"Hi"}],"thinking_mode":"chat"},"expected":"<｜begin▁of▁sentence｜><｜User｜>Ho<｜Assistant｜></think>"}"#,
            "\n\n",
            r#"{"id":"err","encoder":"dsv4","level":"encoder","input":{"messages":[],"thinking_mode":"auto"},"expected_error":"AssertionError: Invalid thinking_mode `auto`"}"#,
            "\n",
            "not json\n",
        );
        let r = check_vector_lines(text);
        assert_eq!((r.passed(), r.failed()), (2, 2));
        let shown = r.to_string();
        assert!(shown.ends_with("2 passed, 2 failed"), "{shown}");
        assert!(shown.contains("FAIL bad"), "{shown}");
        assert!(shown.contains("line 1, column 31"), "{shown}");
        assert!(
            shown.contains(r#"expected: "<｜begin▁of▁sentence｜><｜User｜>Ho"#),
            "{shown}"
        );
        assert!(shown.contains("FAIL line 5"), "{shown}");
    }
}
