//! Prepared SPEED-Bench JSONL (`question_id`, `category`, `messages`) -> samples: the first user
//! turn (or every one, `--all-turns`), filtered by category and shuffled as the reference
//! harness does. Also the six splits (`qualitative.jsonl`, `throughput_{1k..32k}.jsonl`) and
//! AIPerf 0.13's dataset names for them (`speed_bench_coding`, `speed_bench_throughput_8k_mixed`).

use serde::Deserialize;
use serde_json::Value;

use super::{
    group_of, invalid, lines, object, python_shuffle, Invalid, Sample, SpeedBenchSelect, Turn,
};

/// The text that marks a SPEED-Bench turn the preparer failed to rebuild.
pub(super) const PLACEHOLDER: &str =
    "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE USING SPECDEC_BENCH";

/// The eleven Qualitative categories, in the order AIPerf's `speed-bench-report` gives its
/// columns.
pub(crate) const QUALITATIVE_CATEGORIES: [&str; 11] = [
    "coding",
    "humanities",
    "math",
    "multilingual",
    "qa",
    "rag",
    "reasoning",
    "roleplay",
    "stem",
    "summarization",
    "writing",
];

/// The three entropy tiers of every Throughput split, in AIPerf's column order.
pub(crate) const THROUGHPUT_TIERS: [&str; 3] = ["low_entropy", "mixed", "high_entropy"];

/// One of SPEED-Bench's six configs, as the preparer names its output files
/// (`<split>.jsonl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Split {
    /// `qualitative`: 11 categories x 80 rows, the golden curves' source.
    Qualitative,
    /// `throughput_1k`: 3 entropy tiers x 512 rows of about 1,000 prompt tokens.
    Throughput1k,
    /// `throughput_2k`.
    Throughput2k,
    /// `throughput_8k`.
    Throughput8k,
    /// `throughput_16k`.
    Throughput16k,
    /// `throughput_32k`.
    Throughput32k,
}

impl Split {
    /// Every split, shortest prompts first.
    pub const ALL: [Split; 6] = [
        Split::Qualitative,
        Split::Throughput1k,
        Split::Throughput2k,
        Split::Throughput8k,
        Split::Throughput16k,
        Split::Throughput32k,
    ];

    /// The config's name (`throughput_8k`), also its file's stem.
    pub fn name(self) -> &'static str {
        match self {
            Split::Qualitative => "qualitative",
            Split::Throughput1k => "throughput_1k",
            Split::Throughput2k => "throughput_2k",
            Split::Throughput8k => "throughput_8k",
            Split::Throughput16k => "throughput_16k",
            Split::Throughput32k => "throughput_32k",
        }
    }

    /// The prompt length the preparer pads or cuts every row to (N x 1000 tokens of tiktoken
    /// `o200k_base`, not the served model's tokenizer); `None` for Qualitative.
    pub fn nominal_isl(self) -> Option<u64> {
        match self {
            Split::Qualitative => None,
            Split::Throughput1k => Some(1_000),
            Split::Throughput2k => Some(2_000),
            Split::Throughput8k => Some(8_000),
            Split::Throughput16k => Some(16_000),
            Split::Throughput32k => Some(32_000),
        }
    }

    /// The categories (Qualitative) or tiers (Throughput) its rows carry.
    pub fn groups(self) -> &'static [&'static str] {
        match self {
            Split::Qualitative => &QUALITATIVE_CATEGORIES,
            _ => &THROUGHPUT_TIERS,
        }
    }

    /// The split a prepared file is, by its name (`.../throughput_8k.jsonl`).
    pub fn of_file(path: &std::path::Path) -> Option<Split> {
        let name = path.file_name()?.to_str()?;
        Split::ALL
            .into_iter()
            .find(|s| name.strip_suffix(".jsonl") == Some(s.name()))
    }
}

/// AIPerf 0.13's SPEED-Bench dataset names (its `--custom-dataset-type` values and
/// `datasets[].format`): `speed_bench_qualitative`, `speed_bench_<category>`,
/// `speed_bench_throughput_<N>k` and `speed_bench_throughput_<N>k_<tier>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AiperfName {
    /// The split the name names (`speed_bench_<category>` names Qualitative).
    pub split: Split,
    /// The category or tier it keeps, if it filters.
    pub category: Option<String>,
}

impl AiperfName {
    /// Reads an AIPerf name; `None` when `name` is not one.
    pub fn parse(name: &str) -> Option<AiperfName> {
        let rest = name.strip_prefix("speed_bench_")?;
        if QUALITATIVE_CATEGORIES.contains(&rest) {
            return Some(AiperfName {
                split: Split::Qualitative,
                category: Some(rest.to_owned()),
            });
        }
        for split in Split::ALL {
            if rest == split.name() {
                return Some(AiperfName {
                    split,
                    category: None,
                });
            }
            let tier = rest
                .strip_prefix(split.name())
                .and_then(|t| t.strip_prefix('_'));
            if let Some(t) =
                tier.filter(|t| split != Split::Qualitative && THROUGHPUT_TIERS.contains(t))
            {
                return Some(AiperfName {
                    split,
                    category: Some(t.to_owned()),
                });
            }
        }
        None
    }

    /// The name AIPerf gives this selection, or `None` when it has none (a category that is
    /// not one of the split's, or a Qualitative category without the split's file).
    pub fn format(split: Split, category: Option<&str>) -> Option<String> {
        match (split, category) {
            (_, None) => Some(format!("speed_bench_{}", split.name())),
            (Split::Qualitative, Some(c)) if QUALITATIVE_CATEGORIES.contains(&c) => {
                Some(format!("speed_bench_{c}"))
            }
            (_, Some(t)) if split != Split::Qualitative && THROUGHPUT_TIERS.contains(&t) => {
                Some(format!("speed_bench_{}_{t}", split.name()))
            }
            _ => None,
        }
    }

    /// Every AIPerf SPEED-Bench name, for the flag's accepted values.
    pub fn all() -> Vec<String> {
        let mut v = Vec::new();
        for split in Split::ALL {
            v.push(format!("speed_bench_{}", split.name()));
            if split == Split::Qualitative {
                v.extend(
                    QUALITATIVE_CATEGORIES
                        .iter()
                        .map(|c| format!("speed_bench_{c}")),
                );
            } else {
                v.extend(
                    THROUGHPUT_TIERS
                        .iter()
                        .map(|t| format!("speed_bench_{}_{t}", split.name())),
                );
            }
        }
        v
    }
}

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
