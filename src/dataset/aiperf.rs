//! AIPerf's custom dataset formats -> samples: `single_turn` (one prompt per line, optional
//! timestamp and output length) and `multi_turn` (sessions of turns with delays).

use serde_json::{Map, Value};

use super::{group_of, invalid, lines, ms, object, Invalid, Sample, Turn};

pub(super) fn single_turn(text: &str, group_by: Option<&str>) -> Result<Vec<Sample>, Invalid> {
    let mut out = Vec::new();
    for (n, line) in lines(text) {
        let v = object(n, line)?;
        let obj = &v;
        if obj.contains_key("delay") {
            return invalid(format!(
                "line {n}: `delay` belongs to multi-turn sessions; use --custom-dataset-type multi_turn"
            ));
        }
        let timestamp_ms = match obj.get("timestamp") {
            None => None,
            Some(v) => Some(ms(v, &format!("line {n}"), "timestamp")?),
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
            group: group_by.map(|f| group_of(obj, f, n)).transpose()?.flatten(),
        });
    }
    Ok(out)
}

/// `text` or `texts` (joined by newlines) of one JSON object.
fn text_of(obj: &Map<String, Value>, at: &str) -> Result<String, Invalid> {
    match (obj.get("text"), obj.get("texts")) {
        (Some(Value::String(s)), None) => Ok(s.clone()),
        (None, Some(Value::Array(a))) if !a.is_empty() => {
            let parts: Option<Vec<&str>> = a.iter().map(Value::as_str).collect();
            Ok(parts
                .ok_or_else(|| format!("{at}: `texts` must hold strings"))?
                .join("\n"))
        }
        _ => invalid(format!(
            "{at}: expected a string `text` or a non-empty `texts` array"
        )),
    }
}

fn positive_u32(v: Option<&Value>, at: &str, key: &str) -> Result<Option<u32>, Invalid> {
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

pub(super) fn multi_turn(text: &str, group_by: Option<&str>) -> Result<Vec<Sample>, Invalid> {
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
            return invalid(format!("line {n}: expected a non-empty `turns` array"));
        };
        let mut parsed = Vec::with_capacity(turns.len());
        for (i, t) in turns.iter().enumerate() {
            let at = format!("line {n}, turn {i}");
            let t = t
                .as_object()
                .ok_or_else(|| format!("{at}: expected a JSON object"))?;
            let delay_ms = match t.get("delay") {
                None | Some(Value::Null) => None,
                Some(d) => Some(ms(d, &at, "delay")?),
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
            group: group_by.map(|f| group_of(obj, f, n)).transpose()?.flatten(),
        });
    }
    Ok(out)
}
