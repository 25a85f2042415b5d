//! Mooncake-style trace JSONL -> samples replayed at their timestamps. Rows give lengths and
//! block hashes instead of text, so prompts are synthesized: the same block hash gives the same
//! words, keeping the trace's prefix sharing; caps bound how much text a trace may ask for.

use serde_json::Value;

use super::{lines, ms, object, Invalid, Sample, MAX_TRACE_ROW_TOKENS, MAX_TRACE_TOTAL_TOKENS};

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
pub(super) enum TraceError {
    /// A row does not fit the format.
    Invalid(Invalid),
    /// The prompts to synthesize exceed a cap.
    TooLarge {
        what: String,
        cap_name: &'static str,
        cap: String,
    },
}

impl From<String> for TraceError {
    fn from(m: String) -> Self {
        TraceError::Invalid(Invalid(m))
    }
}

impl From<Invalid> for TraceError {
    fn from(e: Invalid) -> Self {
        TraceError::Invalid(e)
    }
}

/// The trace caps, as parameters so tests can lower them.
#[derive(Clone, Copy)]
pub(super) struct TraceCaps {
    /// Most tokens one row may ask for.
    pub(super) row_tokens: u64,
    /// Most tokens the whole trace may ask for.
    pub(super) total_tokens: u64,
}

pub(super) const TRACE_CAPS: TraceCaps = TraceCaps {
    row_tokens: MAX_TRACE_ROW_TOKENS,
    total_tokens: MAX_TRACE_TOTAL_TOKENS,
};

pub(super) fn mooncake_trace(text: &str, caps: TraceCaps) -> Result<Vec<Sample>, TraceError> {
    let mut out = Vec::new();
    let mut last = f64::NEG_INFINITY;
    // Synthesized prompts grow from a few bytes of JSON each: bounded per row and in total.
    let mut synthesized: u64 = 0;
    for (n, line) in lines(text) {
        let v = object(n, line)?;
        let obj = &v;
        let uint = |key: &str| -> Result<Option<u64>, Invalid> {
            match obj.get(key) {
                None => Ok(None),
                Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                    Invalid(format!("line {n}: `{key}` must be a non-negative integer"))
                }),
            }
        };
        let ts = match obj.get("timestamp") {
            Some(v) => ms(v, &format!("line {n}"), "timestamp")?,
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
            group: None,
        });
    }
    Ok(out)
}
