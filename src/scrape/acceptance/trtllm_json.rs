//! TensorRT-LLM's `/metrics` JSON iteration stats: a draining queue of per-iteration entries,
//! summed over the polls of a window instead of differenced like counters.

use serde::Serialize;

/// A `/metrics` JSON answer that is not the iteration-stats array TensorRT-LLM serves.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IterationsError {
    /// The body does not parse as JSON.
    #[error("iteration stats are not JSON: {0}")]
    NotJson(String),
    /// The body is JSON but not an array of entries.
    #[error("iteration stats must be a JSON array")]
    NotArray,
    /// An entry given as a string does not hold JSON.
    #[error("iteration entry string is not JSON: {0}")]
    EntryNotJson(String),
    /// A count is negative, infinite or not a number.
    #[error("{field} is not a non-negative number: {value}")]
    BadNumber {
        /// The camelCase field name.
        field: &'static str,
        /// The value as JSON.
        value: String,
    },
}

/// TensorRT-LLM JSON iteration stats summed over the polls of a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct IterationTotals {
    /// Entries with draft tokens that were summed.
    pub entries: u64,
    /// Σ `numAcceptedTokens`.
    pub accepted: f64,
    /// Σ `numRequestsWithDraftTokens` (verification steps).
    pub requests_with_draft: f64,
    /// Σ `numDraftTokens`.
    pub draft_tokens: f64,
}

impl IterationTotals {
    /// Adds one `/metrics` JSON answer (an array of iteration entries). Entries may be objects
    /// or JSON-encoded strings; `specDecodingStats` may be null, absent or snake_case.
    pub fn add_page(&mut self, body: &[u8]) -> Result<usize, IterationsError> {
        let v: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| IterationsError::NotJson(e.to_string()))?;
        let serde_json::Value::Array(entries) = v else {
            return Err(IterationsError::NotArray);
        };
        let n = entries.len();
        for e in entries {
            let e = match e {
                serde_json::Value::String(s) => serde_json::from_str(&s)
                    .map_err(|err| IterationsError::EntryNotJson(err.to_string()))?,
                other => other,
            };
            let stats = e
                .get("specDecodingStats")
                .or_else(|| e.get("spec_decoding_stats"));
            let Some(stats) = stats.filter(|s| s.is_object()) else {
                continue;
            };
            let num = |camel: &'static str, snake: &str| -> Result<f64, IterationsError> {
                match stats.get(camel).or_else(|| stats.get(snake)) {
                    None | Some(serde_json::Value::Null) => Ok(0.0),
                    Some(v) => v
                        .as_f64()
                        .filter(|x| x.is_finite() && *x >= 0.0)
                        .ok_or_else(|| IterationsError::BadNumber {
                            field: camel,
                            value: v.to_string(),
                        }),
                }
            };
            let draft = num("numDraftTokens", "num_draft_tokens")?;
            if draft <= 0.0 {
                continue;
            }
            self.entries += 1;
            self.draft_tokens += draft;
            self.accepted += num("numAcceptedTokens", "num_accepted_tokens")?;
            self.requests_with_draft += num(
                "numRequestsWithDraftTokens",
                "num_requests_with_draft_tokens",
            )?;
        }
        Ok(n)
    }

    pub(crate) fn add(&mut self, o: &IterationTotals) {
        self.entries += o.entries;
        self.accepted += o.accepted;
        self.requests_with_draft += o.requests_with_draft;
        self.draft_tokens += o.draft_tokens;
    }
}
