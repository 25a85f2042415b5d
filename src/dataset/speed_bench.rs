//! Prepared SPEED-Bench JSONL (`question_id`, `category`, `messages`) -> samples: the first user
//! turn (or every one, `--all-turns`), filtered by category and shuffled as the reference
//! harness does.

use serde::Deserialize;
use serde_json::Value;

use super::{
    group_of, invalid, lines, object, python_shuffle, Invalid, Sample, SpeedBenchSelect, Turn,
};

/// The text that marks a SPEED-Bench turn the preparer failed to rebuild.
pub(super) const PLACEHOLDER: &str =
    "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE USING SPECDEC_BENCH";

#[derive(Deserialize)]
struct SpeedRow {
    question_id: Option<Value>,
    category: Option<String>,
    messages: Option<Vec<Value>>,
}

/// Whether any message of the row still holds [`PLACEHOLDER`].
fn unprepared(messages: Option<&Vec<Value>>) -> bool {
    messages.is_some_and(|ms| {
        ms.iter().any(|m| {
            m.get("content")
                .and_then(Value::as_str)
                .is_some_and(|c| c.contains(PLACEHOLDER))
        })
    })
}

/// The rows in replay order. A row still holding the placeholder is refused when selected; left
/// out by `--category`, it is counted per category in `warnings` (the file was not fully
/// prepared, and another category's run would be refused).
pub(super) fn speed_bench(
    text: &str,
    select: &SpeedBenchSelect,
    warnings: &mut Vec<String>,
) -> Result<Vec<Sample>, Invalid> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    // Categories of the rows --category left out, to list when it matched nothing.
    let mut categories = std::collections::BTreeSet::new();
    // Unprepared rows --category left out, per category.
    let mut left_unprepared = std::collections::BTreeMap::<String, usize>::new();
    for (n, line) in lines(text) {
        let row: SpeedRow = serde_json::from_str(line).map_err(|e| format!("line {n}: {e}"))?;
        let id = match row.question_id {
            Some(Value::String(s)) => s,
            Some(Value::Number(x)) => x.to_string(),
            _ => {
                return invalid(format!(
                    "line {n}: missing `question_id` (is this a prepared SPEED-Bench file? For \
                     an AIPerf file pass --custom-dataset-type single_turn, multi_turn or \
                     mooncake_trace; for ShareGPT, sharegpt)"
                ))
            }
        };
        let category = row
            .category
            .ok_or_else(|| format!("line {n}: row {id} has no `category`"))?;
        if select.category.as_deref().is_some_and(|c| c != category) {
            if unprepared(row.messages.as_ref()) {
                *left_unprepared.entry(category.clone()).or_default() += 1;
            }
            categories.insert(category);
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
            return invalid(format!("line {n}: row {id}: the first message must be {{\"role\": \"user\", \"content\": <string>}}"));
        };
        if content.is_empty() {
            return invalid(format!("line {n}: row {id}: the first user turn is empty"));
        }
        if unprepared(Some(&messages)) {
            return invalid(format!(
                "SPEED-Bench row {id} still holds the unresolved placeholder (re-run the preparer with access to its sources)"
            ));
        }
        if !seen.insert(id.clone()) {
            return invalid(format!("line {n}: duplicate question_id {id}"));
        }
        // The category, or the --group-by field (parsed again only when one is asked for).
        let group = match select.group_by.as_deref() {
            None => Some(category),
            Some(field) => group_of(&object(n, line)?, field, n)?,
        };
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
            group,
        });
    }
    if !left_unprepared.is_empty() {
        let total: usize = left_unprepared.values().sum();
        let per: Vec<String> = left_unprepared
            .iter()
            .map(|(c, k)| format!("{c} {k}"))
            .collect();
        warnings.push(format!(
            "{total} rows outside the selected category still hold the unresolved placeholder \
             ({}): the file was not fully prepared (re-run the preparer with access to its \
             sources before running those categories)",
            per.join(", ")
        ));
    }
    if let Some(seed) = select.shuffle_seed {
        python_shuffle(&mut out, seed);
    }
    if let (true, Some(c)) = (out.is_empty(), select.category.as_deref()) {
        let listed: Vec<&str> = categories.iter().map(String::as_str).collect();
        return invalid(format!(
            "--category {c:?} matched no row (exact, case-sensitive); categories in this file: {}",
            if listed.is_empty() {
                "none".to_owned()
            } else {
                listed.join(", ")
            }
        ));
    }
    Ok(out)
}
