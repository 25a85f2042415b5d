//! ShareGPT JSON -> samples: the first human turn of each conversation with a reply, as
//! `vllm bench serve` takes it.

use serde_json::Value;

use super::{invalid, Invalid, Sample};

pub(super) fn sharegpt(text: &str) -> Result<Vec<Sample>, Invalid> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let rows = v
        .as_array()
        .ok_or_else(|| Invalid("expected a JSON array of conversations".into()))?;
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
            return invalid(format!(
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
            group: None,
        });
    }
    Ok(out)
}
