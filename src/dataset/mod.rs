//! Collections -> [`Sample`]s: the first stage of the pipeline.
//!
//! Loaders read a whole file, check it, and hand back samples in dispatch order. Bad input is an
//! error naming the file, the line and the fix; nothing is skipped silently.

mod pyrandom;
pub(crate) mod synthetic;

use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value};

pub(crate) use pyrandom::python_shuffle;

/// One prompt to send.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Stable identifier (`question_id` for SPEED-Bench, `line-<n>` otherwise).
    pub id: String,
    /// The user turn sent as the prompt.
    pub prompt: String,
    /// Output tokens the row asks for, if it does.
    pub max_tokens: Option<u32>,
    /// Trace rows: when the request was sent in the original trace, ms.
    pub timestamp_ms: Option<f64>,
    /// Multi-turn sessions: the user turns after the first, each sent after the previous
    /// response (which joins the history).
    pub turns: Vec<Turn>,
}

/// A later user turn of a multi-turn session.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Turn {
    /// The user message.
    pub text: String,
    /// Wait this long after the previous response before sending, ms.
    pub delay_ms: Option<f64>,
    /// Output tokens for this turn, if the row says.
    pub max_tokens: Option<u32>,
}

/// Input formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum DatasetKind {
    /// Prepared SPEED-Bench JSONL (`question_id`, `category`, `messages`); first user turn only.
    SpeedBench,
    /// AIPerf `single_turn` JSONL: `{"text": ...}` or `{"texts": [...]}`, optional `max_tokens`.
    SingleTurn,
    /// AIPerf `multi_turn` JSONL: `{"session_id": ..., "turns": [{"text"|"texts", "delay" (ms),
    /// "max_tokens"}, ...]}`; each later turn carries the conversation so far.
    MultiTurn,
    /// ShareGPT JSON: `[{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", ...}]}]`;
    /// the first human turn is the prompt (as `vllm bench serve` does).
    Sharegpt,
    /// Mooncake-style trace JSONL: `timestamp` (ms), `input_length`, `output_length`, `hash_ids`
    /// (or `text_input`); replayed at its timestamps.
    MooncakeTrace,
}

/// Loading failures.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// The file could not be read.
    #[error("cannot read input file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A line or the selection is invalid.
    #[error("dataset_invalid: {path}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong and where.
        message: String,
    },
    /// The file, one of its lines, or the prompts it asks to synthesize exceed a cap.
    #[error("dataset_too_large: {path}: {what} is over the {cap_name} ({cap}); split the collection or shorten its rows")]
    TooLarge {
        /// The file.
        path: String,
        /// What is too large, and where.
        what: String,
        /// The cap's name, as the README lists it.
        cap_name: &'static str,
        /// The cap, with its unit.
        cap: String,
    },
}

/// Largest input file read, bytes: collections are read whole, so a wrong path (a disk image, a
/// log) must fail at once instead of filling memory.
pub(crate) const MAX_INPUT_BYTES: u64 = 1 << 30;
/// Longest line of a collection, bytes: one row holds one prompt, and a million-token prompt is
/// about 4 MiB of text (8 MiB JSON-escaped).
pub(crate) const MAX_LINE_BYTES: usize = 32 << 20;
/// Most prompt tokens one trace row may ask to synthesize (`input_length`).
pub(crate) const MAX_TRACE_ROW_TOKENS: u64 = 1 << 21;
/// Most prompt tokens a whole trace may ask to synthesize: above the largest public traces
/// (Mooncake: about 0.2 G), below what would exhaust a node's memory.
pub(crate) const MAX_TRACE_TOTAL_TOKENS: u64 = 1 << 28;

/// The text that marks a SPEED-Bench turn the preparer failed to rebuild.
const PLACEHOLDER: &str =
    "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE USING SPECDEC_BENCH";

/// How to select and order SPEED-Bench rows.
#[derive(Clone, Debug, Default)]
pub(crate) struct SpeedBenchSelect {
    /// Keep rows of this category only (exact, case-sensitive); `None` keeps all.
    pub(crate) category: Option<String>,
    /// Shuffle seed (CPython `random.seed` + `random.shuffle`, as the golden collection); `None` keeps file order.
    pub(crate) shuffle_seed: Option<u64>,
    /// Send every user turn of a row as a session (default: the first only, as vLLM does).
    pub(crate) all_turns: bool,
}

/// Loads `path` as `kind`.
pub(crate) fn load_file(
    path: &Path,
    kind: DatasetKind,
    select: &SpeedBenchSelect,
) -> Result<Vec<Sample>, DatasetError> {
    use std::io::Read;
    let name = path.display().to_string();
    let read_err = |source| DatasetError::Read {
        path: name.clone(),
        source,
    };
    let too_large = |size: u64| DatasetError::TooLarge {
        path: name.clone(),
        what: format!("the file ({size} bytes)"),
        cap_name: "input file size cap",
        cap: format!("{MAX_INPUT_BYTES} bytes"),
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    // The size first, so a huge file costs nothing; the capped read still guards files whose
    // size says nothing (pipes, /proc, a file still growing).
    let size = file.metadata().map_err(read_err)?.len();
    if size > MAX_INPUT_BYTES {
        return Err(too_large(size));
    }
    let mut bytes = Vec::new();
    file.take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        read_err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "not UTF-8 text (first bad byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        ))
    })?;
    load_str(&text, &name, kind, select)
}

/// Parses `text` (named `name` in errors) as `kind`.
pub(crate) fn load_str(
    text: &str,
    name: &str,
    kind: DatasetKind,
    select: &SpeedBenchSelect,
) -> Result<Vec<Sample>, DatasetError> {
    let invalid = |message: String| DatasetError::Invalid {
        path: name.to_owned(),
        message,
    };
    if let Some((n, line)) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.len() > MAX_LINE_BYTES)
    {
        return Err(DatasetError::TooLarge {
            path: name.to_owned(),
            what: format!("line {} ({} bytes)", n + 1, line.len()),
            cap_name: "dataset line length cap",
            cap: format!("{MAX_LINE_BYTES} bytes"),
        });
    }
    let samples = match kind {
        DatasetKind::SpeedBench => speed_bench(text, select).map_err(invalid)?,
        DatasetKind::SingleTurn => single_turn(text).map_err(invalid)?,
        DatasetKind::MooncakeTrace => mooncake_trace(text, TRACE_CAPS).map_err(|e| match e {
            TraceError::Invalid(message) => invalid(message),
            TraceError::TooLarge {
                what,
                cap_name,
                cap,
            } => DatasetError::TooLarge {
                path: name.to_owned(),
                what,
                cap_name,
                cap,
            },
        })?,
        DatasetKind::MultiTurn => multi_turn(text).map_err(invalid)?,
        DatasetKind::Sharegpt => sharegpt(text).map_err(invalid)?,
    };
    if samples.is_empty() {
        return Err(invalid(
            "no samples selected (empty file or category matched nothing)".into(),
        ));
    }
    Ok(samples)
}

/// One JSONL line that must be a JSON object.
fn object(n: usize, line: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str(line).map_err(|e| format!("line {n}: {e}"))? {
        Value::Object(m) => Ok(m),
        _ => Err(format!("line {n}: expected a JSON object")),
    }
}

fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .filter(|(_, l)| !l.trim().is_empty())
}

#[derive(Deserialize)]
struct SpeedRow {
    question_id: Option<Value>,
    category: Option<String>,
    messages: Option<Vec<Value>>,
}

fn speed_bench(text: &str, select: &SpeedBenchSelect) -> Result<Vec<Sample>, String> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (n, line) in lines(text) {
        let row: SpeedRow = serde_json::from_str(line).map_err(|e| format!("line {n}: {e}"))?;
        let id = match row.question_id {
            Some(Value::String(s)) => s,
            Some(Value::Number(x)) => x.to_string(),
            _ => {
                return Err(format!(
                    "line {n}: missing `question_id` (is this a prepared SPEED-Bench file?)"
                ))
            }
        };
        let category = row
            .category
            .ok_or_else(|| format!("line {n}: row {id} has no `category`"))?;
        if select.category.as_deref().is_some_and(|c| c != category) {
            continue;
        }
        let messages = row
            .messages
            .ok_or_else(|| format!("line {n}: row {id} has no `messages`"))?;
        let first = messages
            .first()
            .ok_or_else(|| format!("line {n}: row {id} has empty `messages`"))?;
        let role = first.get("role").and_then(Value::as_str);
        let content = first.get("content").and_then(Value::as_str);
        let (Some("user"), Some(content)) = (role, content) else {
            return Err(format!("line {n}: row {id}: the first message must be {{\"role\": \"user\", \"content\": <string>}}"));
        };
        if content.is_empty() {
            return Err(format!("line {n}: row {id}: the first user turn is empty"));
        }
        for m in &messages {
            if m.get("content")
                .and_then(Value::as_str)
                .is_some_and(|c| c.contains(PLACEHOLDER))
            {
                return Err(format!(
                    "SPEED-Bench row {id} still holds the unresolved placeholder (re-run the preparer with access to its sources)"
                ));
            }
        }
        if !seen.insert(id.clone()) {
            return Err(format!("line {n}: duplicate question_id {id}"));
        }
        let mut turns = Vec::new();
        if select.all_turns {
            for (i, m) in messages.iter().enumerate().skip(1) {
                if m.get("role").and_then(Value::as_str) != Some("user") {
                    continue;
                }
                let text = m.get("content").and_then(Value::as_str).ok_or_else(|| {
                    format!("line {n}: row {id}: message {i} has no string `content`")
                })?;
                turns.push(Turn {
                    text: text.to_owned(),
                    ..Turn::default()
                });
            }
        }
        out.push(Sample {
            id,
            prompt: content.to_owned(),
            max_tokens: None,
            timestamp_ms: None,
            turns,
        });
    }
    if let Some(seed) = select.shuffle_seed {
        python_shuffle(&mut out, seed);
    }
    Ok(out)
}

/// Tokens per `hash_ids` block in Mooncake traces.
const TRACE_BLOCK: usize = 512;

/// Common English words that most BPE vocabularies hold as one token with a leading space, so a
/// synthesized prompt of n words is close to n tokens (exact lengths need a tokenizer).
const FILLER: [&str; 32] = [
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by",
    "on", "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an",
    "had", "they", "you", "were", "their",
];

/// The words of one trace block: the same `hash_id` gives the same text, so requests that share
/// a prefix of blocks share a prompt prefix (what prefix caching sees in the original trace).
fn trace_block(hash_id: u64, words: usize, out: &mut String) {
    let mut x = hash_id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    for _ in 0..words {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push(' ');
        out.push_str(FILLER[(x % FILLER.len() as u64) as usize]);
    }
}

/// Why a trace does not load: a bad row, or more prompt text than the caps allow.
enum TraceError {
    Invalid(String),
    TooLarge {
        what: String,
        cap_name: &'static str,
        cap: String,
    },
}

impl From<String> for TraceError {
    fn from(m: String) -> Self {
        TraceError::Invalid(m)
    }
}

/// The trace caps, as parameters so tests can lower them.
#[derive(Clone, Copy)]
struct TraceCaps {
    row_tokens: u64,
    total_tokens: u64,
}

const TRACE_CAPS: TraceCaps = TraceCaps {
    row_tokens: MAX_TRACE_ROW_TOKENS,
    total_tokens: MAX_TRACE_TOTAL_TOKENS,
};

fn mooncake_trace(text: &str, caps: TraceCaps) -> Result<Vec<Sample>, TraceError> {
    let mut out = Vec::new();
    let mut last = f64::NEG_INFINITY;
    // Synthesized prompts grow from a few bytes of JSON each: bounded per row and in total.
    let mut synthesized: u64 = 0;
    for (n, line) in lines(text) {
        let v = object(n, line)?;
        let obj = &v;
        let uint = |key: &str| -> Result<Option<u64>, String> {
            match obj.get(key) {
                None => Ok(None),
                Some(v) => v
                    .as_u64()
                    .map(Some)
                    .ok_or_else(|| format!("line {n}: `{key}` must be a non-negative integer")),
            }
        };
        let ts = match obj.get("timestamp") {
            Some(v) => v
                .as_f64()
                .filter(|t| t.is_finite() && *t >= 0.0)
                .ok_or_else(|| {
                    format!("line {n}: `timestamp` must be a non-negative number of ms")
                })?,
            None => return Err(format!("line {n}: missing `timestamp` (ms) of a trace row").into()),
        };
        if ts < last {
            return Err(format!(
                "line {n}: timestamp {ts} is earlier than the previous row's {last}; sort the trace by timestamp"
            )
            .into());
        }
        last = ts;
        let prompt = if let Some(t) = obj.get("text_input") {
            t.as_str()
                .ok_or_else(|| format!("line {n}: `text_input` must be a string"))?
                .to_owned()
        } else {
            let len = uint("input_length")?.ok_or_else(|| {
                format!("line {n}: needs `input_length` (with `hash_ids`) or `text_input`")
            })?;
            if len > caps.row_tokens {
                return Err(TraceError::TooLarge {
                    what: format!("line {n}: input_length {len}"),
                    cap_name: "trace row prompt cap",
                    cap: format!("{} tokens", caps.row_tokens),
                });
            }
            synthesized += len;
            if synthesized > caps.total_tokens {
                return Err(TraceError::TooLarge {
                    what: format!("the input_length sum at line {n} ({synthesized})"),
                    cap_name: "trace prompt total cap",
                    cap: format!("{} tokens", caps.total_tokens),
                });
            }
            let len = len as usize;
            let ids: Vec<u64> = match obj.get("hash_ids") {
                None => Vec::new(),
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|h| {
                        h.as_u64()
                            .ok_or_else(|| format!("line {n}: `hash_ids` must hold integers"))
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(format!("line {n}: `hash_ids` must be an array").into()),
            };
            let mut p = String::with_capacity(len * 5);
            let mut left = len;
            for (i, id) in ids.iter().enumerate() {
                let words = if i + 1 == ids.len() {
                    left
                } else {
                    TRACE_BLOCK.min(left)
                };
                trace_block(*id, words, &mut p);
                left -= words;
            }
            if left > 0 {
                // No (or too few) blocks: fill from the row number, unshared.
                trace_block(u64::MAX - n as u64, left, &mut p);
            }
            p.trim_start().to_owned()
        };
        let max_tokens = uint("output_length")?
            .map(|x| {
                u32::try_from(x)
                    .ok()
                    .filter(|x| *x > 0)
                    .ok_or_else(|| format!("line {n}: `output_length` must be a positive integer"))
            })
            .transpose()?;
        out.push(Sample {
            id: format!("line-{n}"),
            prompt,
            max_tokens,
            timestamp_ms: Some(ts),
            turns: Vec::new(),
        });
    }
    Ok(out)
}

/// `text` or `texts` (joined by newlines) of one JSON object.
fn text_of(obj: &Map<String, Value>, at: &str) -> Result<String, String> {
    match (obj.get("text"), obj.get("texts")) {
        (Some(Value::String(s)), None) => Ok(s.clone()),
        (None, Some(Value::Array(a))) if !a.is_empty() => {
            let parts: Option<Vec<&str>> = a.iter().map(Value::as_str).collect();
            Ok(parts
                .ok_or_else(|| format!("{at}: `texts` must hold strings"))?
                .join("\n"))
        }
        _ => Err(format!(
            "{at}: expected a string `text` or a non-empty `texts` array"
        )),
    }
}

fn positive_u32(v: Option<&Value>, at: &str, key: &str) -> Result<Option<u32>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(v) => Ok(Some(
            v.as_u64()
                .filter(|&x| x > 0 && x <= u64::from(u32::MAX))
                .ok_or_else(|| format!("{at}: `{key}` must be a positive integer"))?
                as u32,
        )),
    }
}

fn multi_turn(text: &str) -> Result<Vec<Sample>, String> {
    let mut out = Vec::new();
    for (n, line) in lines(text) {
        let v = object(n, line)?;
        let obj = &v;
        let id = match obj.get("session_id") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(x)) => x.to_string(),
            _ => format!("line-{n}"),
        };
        let Some(Value::Array(turns)) = obj.get("turns") else {
            return Err(format!("line {n}: expected a non-empty `turns` array"));
        };
        let mut parsed = Vec::with_capacity(turns.len());
        for (i, t) in turns.iter().enumerate() {
            let at = format!("line {n}, turn {i}");
            let t = t
                .as_object()
                .ok_or_else(|| format!("{at}: expected a JSON object"))?;
            let delay_ms = match t.get("delay") {
                None | Some(Value::Null) => None,
                Some(d) => Some(
                    d.as_f64()
                        .filter(|d| d.is_finite() && *d >= 0.0)
                        .ok_or_else(|| {
                            format!("{at}: `delay` must be a non-negative number of ms")
                        })?,
                ),
            };
            parsed.push(Turn {
                text: text_of(t, &at)?,
                delay_ms,
                max_tokens: positive_u32(t.get("max_tokens"), &at, "max_tokens")?,
            });
        }
        let mut rest = parsed.into_iter();
        let first = rest
            .next()
            .ok_or_else(|| format!("line {n}: expected a non-empty `turns` array"))?;
        out.push(Sample {
            id,
            prompt: first.text,
            max_tokens: first.max_tokens,
            timestamp_ms: None,
            turns: rest.collect(),
        });
    }
    Ok(out)
}

fn sharegpt(text: &str) -> Result<Vec<Sample>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let rows = v
        .as_array()
        .ok_or("expected a JSON array of conversations")?;
    let mut out = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let conv = row
            .get("conversations")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("entry {i}: expected a `conversations` array"))?;
        // vLLM's ShareGPT loader skips conversations without a reply.
        if conv.len() < 2 {
            continue;
        }
        let from = conv[0].get("from").and_then(Value::as_str);
        let value = conv[0].get("value").and_then(Value::as_str);
        let (Some("human" | "user"), Some(prompt)) = (from, value) else {
            return Err(format!(
                "entry {i}: the first turn must be {{\"from\": \"human\", \"value\": <string>}}"
            ));
        };
        let id = match row.get("id") {
            Some(Value::String(s)) => s.clone(),
            _ => format!("entry-{i}"),
        };
        out.push(Sample {
            id,
            prompt: prompt.to_owned(),
            max_tokens: None,
            timestamp_ms: None,
            turns: Vec::new(),
        });
    }
    Ok(out)
}

fn single_turn(text: &str) -> Result<Vec<Sample>, String> {
    let mut out = Vec::new();
    for (n, line) in lines(text) {
        let v = object(n, line)?;
        let obj = &v;
        if obj.contains_key("delay") {
            return Err(format!(
                "line {n}: `delay` belongs to multi-turn sessions; use --custom-dataset-type multi_turn"
            ));
        }
        let timestamp_ms = match obj.get("timestamp") {
            None => None,
            Some(v) => Some(
                v.as_f64()
                    .filter(|t| t.is_finite() && *t >= 0.0)
                    .ok_or_else(|| {
                        format!("line {n}: `timestamp` must be a non-negative number of ms")
                    })?,
            ),
        };
        let prompt = text_of(obj, &format!("line {n}"))?;
        let max_tokens = match obj.get("max_tokens").or_else(|| obj.get("output_length")) {
            None => None,
            Some(v) => Some(
                v.as_u64()
                    .filter(|&x| x > 0 && x <= u64::from(u32::MAX))
                    .ok_or_else(|| format!("line {n}: max_tokens must be a positive integer"))?
                    as u32,
            ),
        };
        out.push(Sample {
            id: format!("line-{n}"),
            prompt,
            max_tokens,
            timestamp_ms,
            turns: Vec::new(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, cat: &str, content: &str) -> String {
        serde_json::json!({"question_id": id, "category": cat, "messages": [{"role": "user", "content": content}, {"role": "user", "content": "second turn"}]}).to_string()
    }

    #[test]
    fn speed_bench_takes_first_turn_filters_category_and_shuffles_like_python() {
        let text: String = (0..10)
            .map(|i| row(&format!("q{i}"), "coding", &format!("p{i}")) + "\n")
            .collect::<String>()
            + &row("x", "math", "m")
            + "\n\n";
        let sel = SpeedBenchSelect {
            category: Some("coding".into()),
            shuffle_seed: Some(0),
            all_turns: false,
        };
        let s = load_str(&text, "t", DatasetKind::SpeedBench, &sel).unwrap();
        let order: Vec<&str> = s.iter().map(|x| x.prompt.as_str()).collect();
        assert_eq!(
            order,
            ["p7", "p8", "p1", "p5", "p3", "p4", "p2", "p0", "p9", "p6"]
        );
    }

    #[test]
    fn speed_bench_rejects_bad_rows_with_line_and_id() {
        let sel = SpeedBenchSelect::default();
        let placeholder = row("qp", "coding", &format!("{PLACEHOLDER}\n\n{{question}}"));
        let e = load_str(&placeholder, "f.jsonl", DatasetKind::SpeedBench, &sel)
            .unwrap_err()
            .to_string();
        assert!(e.contains("qp") && e.contains("placeholder"), "{e}");
        let empty = r#"{"question_id":"a","category":"coding","messages":[]}"#;
        let e = load_str(empty, "f.jsonl", DatasetKind::SpeedBench, &sel)
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1") && e.contains("empty"), "{e}");
        let dup = format!("{}\n{}", row("a", "c", "x"), row("a", "c", "y"));
        assert!(load_str(&dup, "f", DatasetKind::SpeedBench, &sel)
            .unwrap_err()
            .to_string()
            .contains("duplicate"));
        let sel = SpeedBenchSelect {
            category: Some("Coding".into()),
            shuffle_seed: None,
            all_turns: false,
        };
        assert!(load_str(&row("a", "coding", "x"), "f", DatasetKind::SpeedBench, &sel).is_err());
    }

    #[test]
    fn single_turn_reads_text_and_texts() {
        let text = "{\"text\": \"hello\"}\n{\"texts\": [\"a\", \"b\"], \"max_tokens\": 7}\n";
        let s = load_str(
            text,
            "f",
            DatasetKind::SingleTurn,
            &SpeedBenchSelect::default(),
        )
        .unwrap();
        assert_eq!(s[0].prompt, "hello");
        assert_eq!(
            s[1],
            Sample {
                id: "line-2".into(),
                prompt: "a\nb".into(),
                max_tokens: Some(7),
                timestamp_ms: None,
                turns: Vec::new(),
            }
        );
        assert!(load_str(
            "{\"text\": 3}",
            "f",
            DatasetKind::SingleTurn,
            &SpeedBenchSelect::default()
        )
        .is_err());
    }

    #[test]
    fn every_dataset_cap_names_itself() {
        let sel = SpeedBenchSelect::default();
        // A file past the input size cap is refused from its size (sparse: no disk, no read).
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.jsonl");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_INPUT_BYTES + 1)
            .unwrap();
        let e = load_file(&big, DatasetKind::SingleTurn, &sel)
            .unwrap_err()
            .to_string();
        assert!(e.contains("input file size cap"), "{e}");

        let long = format!(
            "{{\"text\": \"a\"}}\n{{\"text\": \"{}\"}}\n",
            "x".repeat(MAX_LINE_BYTES)
        );
        let e = load_str(&long, "f", DatasetKind::SingleTurn, &sel)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 2") && e.contains("dataset line length cap"),
            "{e}"
        );

        let row = |len: u64| format!("{{\"timestamp\": 0, \"input_length\": {len}}}\n");
        let e = load_str(
            &row(MAX_TRACE_ROW_TOKENS + 1),
            "t",
            DatasetKind::MooncakeTrace,
            &sel,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("trace row prompt cap"), "{e}");
        let small = TraceCaps {
            row_tokens: 100,
            total_tokens: 250,
        };
        let three = row(100).repeat(3);
        assert!(mooncake_trace(&row(100).repeat(2), small).is_ok());
        match mooncake_trace(&three, small) {
            Err(TraceError::TooLarge { cap_name, what, .. }) => {
                assert_eq!(cap_name, "trace prompt total cap");
                assert!(what.contains("line 3"), "{what}");
            }
            _ => panic!("the third row crosses the total cap"),
        }
    }

    /// Regression: `input_length` near `u64::MAX` reached `String::with_capacity(len * 5)`, an
    /// arithmetic-overflow panic in debug builds and a capacity-overflow abort in release ones.
    #[test]
    fn mooncake_input_length_u64_max_is_a_cap_error_not_an_overflow() {
        let row = format!("{{\"timestamp\": 0, \"input_length\": {}}}", u64::MAX);
        let e = load_str(
            &row,
            "t",
            DatasetKind::MooncakeTrace,
            &SpeedBenchSelect::default(),
        )
        .unwrap_err();
        assert!(matches!(e, DatasetError::TooLarge { .. }), "{e}");
    }

    #[test]
    fn mooncake_rows_share_prompt_prefixes_by_hash_id_and_must_be_sorted() {
        let text = "{\"timestamp\": 0, \"input_length\": 700, \"output_length\": 9, \"hash_ids\": [7, 8]}\n\
                    {\"timestamp\": 5.5, \"input_length\": 600, \"output_length\": 3, \"hash_ids\": [7, 9]}\n\
                    {\"timestamp\": 6, \"text_input\": \"hi\", \"output_length\": 1}\n";
        let s = load_str(
            text,
            "t",
            DatasetKind::MooncakeTrace,
            &SpeedBenchSelect::default(),
        )
        .unwrap();
        let words = |p: &str| p.split(' ').count();
        assert_eq!((words(&s[0].prompt), words(&s[1].prompt)), (700, 600));
        // Block 7 (512 words) is the same text in both rows; the next block differs.
        let w0: Vec<&str> = s[0].prompt.split(' ').collect();
        let w1: Vec<&str> = s[1].prompt.split(' ').collect();
        assert_eq!(w0[..512], w1[..512]);
        assert_ne!(w0[512..600], w1[512..600]);
        assert_eq!((s[1].timestamp_ms, s[1].max_tokens), (Some(5.5), Some(3)));
        assert_eq!(s[2].prompt, "hi");
        let unsorted = "{\"timestamp\": 5, \"text_input\": \"a\"}\n{\"timestamp\": 1, \"text_input\": \"b\"}\n";
        let e = load_str(
            unsorted,
            "t",
            DatasetKind::MooncakeTrace,
            &SpeedBenchSelect::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("line 2") && e.contains("sort"), "{e}");
    }
}
