//! Collections -> [`Sample`]s: the first stage of the pipeline.
//!
//! Loaders read a whole file, check it, and hand back samples in dispatch order. Bad input is an
//! error naming the file, the line and the fix; nothing is skipped silently.
//!
//! This file holds the shared types, the caps and the file reading; each collection format has
//! its own file (`speed_bench`, `aiperf` for single- and multi-turn, `sharegpt`, `trace`), and
//! `synthetic` makes prompts of exact token lengths.

mod aiperf;
pub(crate) mod bench_serving;
mod mt19937;
pub(crate) mod numpy_random;
mod pyrandom;
mod sharegpt;
mod speed_bench;
pub(crate) mod synthetic;
mod trace;

use std::path::Path;

use serde_json::{Map, Value};

use aiperf::{multi_turn, single_turn};
use sharegpt::sharegpt;
use speed_bench::speed_bench;
use trace::{mooncake_trace, TraceError, TRACE_CAPS};

pub(crate) use pyrandom::python_shuffle;
pub use speed_bench::{AiperfName, Split};
pub(crate) use speed_bench::{QUALITATIVE_CATEGORIES, THROUGHPUT_TIERS};

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
    /// The row's group for the per-group acceptance breakdown: the field named by
    /// `--group-by` (SPEED-Bench's `category` by default).
    pub group: Option<String>,
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

/// `--custom-dataset-type`: a format, or one of AIPerf 0.13's SPEED-Bench names
/// (`speed_bench_coding`, `speed_bench_throughput_8k_mixed`, ...), which is the SPEED-Bench format
/// plus AIPerf's selection: its split, its category or tier, file order and every turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatasetType {
    /// The file format.
    pub kind: DatasetKind,
    /// The AIPerf name it was given as, if it was.
    pub aiperf: Option<AiperfName>,
}

impl From<DatasetKind> for DatasetType {
    fn from(kind: DatasetKind) -> Self {
        DatasetType { kind, aiperf: None }
    }
}

/// Parses `--custom-dataset-type`: the formats by their names (shown in `--help` and
/// completions) and AIPerf's SPEED-Bench names (accepted, listed in the flag's help as patterns).
#[derive(Clone, Copy, Debug)]
pub(crate) struct DatasetTypeParser;

impl clap::builder::TypedValueParser for DatasetTypeParser {
    type Value = DatasetType;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<DatasetType, clap::Error> {
        let text = value.to_str().unwrap_or_default();
        if let Ok(kind) = <DatasetKind as clap::ValueEnum>::from_str(text, false) {
            return Ok(kind.into());
        }
        if let Some(name) = AiperfName::parse(text) {
            return Ok(DatasetType {
                kind: DatasetKind::SpeedBench,
                aiperf: Some(name),
            });
        }
        let mut e = clap::Error::new(clap::error::ErrorKind::InvalidValue).with_cmd(cmd);
        use clap::error::{ContextKind, ContextValue};
        e.insert(
            ContextKind::InvalidArg,
            ContextValue::String(arg.map_or_else(String::new, ToString::to_string)),
        );
        e.insert(
            ContextKind::InvalidValue,
            ContextValue::String(text.to_owned()),
        );
        e.insert(
            ContextKind::ValidValue,
            ContextValue::Strings(
                <DatasetKind as clap::ValueEnum>::value_variants()
                    .iter()
                    .filter_map(clap::ValueEnum::to_possible_value)
                    .map(|v| v.get_name().to_owned())
                    .chain([
                        "speed_bench_<category>".to_owned(),
                        "speed_bench_qualitative".to_owned(),
                        "speed_bench_throughput_<1k|2k|8k|16k|32k>[_<low_entropy|mixed|high_entropy>]"
                            .to_owned(),
                    ])
                    .collect(),
            ),
        );
        Err(e)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        static AIPERF: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
        let aiperf = AIPERF.get_or_init(|| {
            AiperfName::all()
                .into_iter()
                .map(|n| &*Box::leak(n.into_boxed_str()))
                .collect()
        });
        Some(Box::new(
            <DatasetKind as clap::ValueEnum>::value_variants()
                .iter()
                .filter_map(clap::ValueEnum::to_possible_value)
                .chain(
                    aiperf
                        .iter()
                        .map(|n| clap::builder::PossibleValue::new(*n).hide(true)),
                ),
        ))
    }
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
        /// The cap's name, as docs/replaying.md lists it.
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

/// How to select and order SPEED-Bench rows.
#[derive(Clone, Debug, Default)]
pub(crate) struct SpeedBenchSelect {
    /// Keep rows of this category only (exact, case-sensitive); `None` keeps all.
    pub(crate) category: Option<String>,
    /// Shuffle seed (CPython `random.seed` + `random.shuffle`, as the golden collection); `None` keeps file order.
    pub(crate) shuffle_seed: Option<u64>,
    /// Send every user turn of a row as a session (default: the first only, as vLLM does).
    pub(crate) all_turns: bool,
    /// Group rows by this field (`--group-by`) instead of SPEED-Bench's `category`; read from
    /// SPEED-Bench, `single_turn` and `multi_turn` rows.
    pub(crate) group_by: Option<String>,
    /// The SPEED-Bench split read (from AIPerf's name, else the file's name): its nominal prompt
    /// length for the ISL check, and AIPerf's name for the run.
    pub(crate) split: Option<Split>,
}

/// Loads `path` as `kind`.
pub(crate) fn load_file(
    path: &Path,
    kind: DatasetKind,
    select: &SpeedBenchSelect,
) -> Result<Loaded, DatasetError> {
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

/// A loaded collection: its samples in replay order, and what the file says that does not stop
/// the run but must not pass in silence (rows left unprepared outside the selection, say).
#[derive(Debug)]
pub(crate) struct Loaded {
    pub(crate) samples: Vec<Sample>,
    pub(crate) warnings: Vec<String>,
}

impl std::ops::Deref for Loaded {
    type Target = [Sample];
    fn deref(&self) -> &[Sample] {
        &self.samples
    }
}

/// Parses `text` (named `name` in errors) as `kind`.
pub(crate) fn load_str(
    text: &str,
    name: &str,
    kind: DatasetKind,
    select: &SpeedBenchSelect,
) -> Result<Loaded, DatasetError> {
    let invalid = |Invalid(message)| DatasetError::Invalid {
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
    let mut warnings = Vec::new();
    let samples = match kind {
        DatasetKind::SpeedBench => speed_bench(text, select, &mut warnings).map_err(invalid)?,
        DatasetKind::SingleTurn => {
            single_turn(text, select.group_by.as_deref()).map_err(invalid)?
        }
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
        DatasetKind::MultiTurn => multi_turn(text, select.group_by.as_deref()).map_err(invalid)?,
        DatasetKind::Sharegpt => sharegpt(text).map_err(invalid)?,
    };
    if samples.is_empty() {
        return Err(invalid(Invalid(
            "no samples selected (empty file or category matched nothing)".into(),
        )));
    }
    let warnings = warnings
        .into_iter()
        .map(|w| format!("{name}: {w}"))
        .collect();
    Ok(Loaded { samples, warnings })
}

/// A collection's text does not fit its format: the message names the line (or entry) and the
/// fix; [`load_str`] adds the file name.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Invalid(String);

impl From<String> for Invalid {
    fn from(m: String) -> Self {
        Invalid(m)
    }
}

fn invalid<T>(m: String) -> Result<T, Invalid> {
    Err(Invalid(m))
}

/// One JSONL line that must be a JSON object.
fn object(n: usize, line: &str) -> Result<Map<String, Value>, Invalid> {
    match serde_json::from_str(line).map_err(|e| format!("line {n}: {e}"))? {
        Value::Object(m) => Ok(m),
        _ => invalid(format!("line {n}: expected a JSON object")),
    }
}

/// The value of a row's `field` as a group name: a string as is, a number or boolean as JSON
/// writes it, `None` when the row lacks it (or it is null); anything else is an error.
fn group_of(obj: &Map<String, Value>, field: &str, n: usize) -> Result<Option<String>, Invalid> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v @ (Value::Number(_) | Value::Bool(_))) => Ok(Some(v.to_string())),
        Some(_) => invalid(format!(
            "line {n}: --group-by field `{field}` must be a string, number or boolean, not an \
             array or object"
        )),
    }
}

/// A time in ms (a timestamp, a delay): finite and not negative.
fn ms(v: &Value, at: &str, key: &str) -> Result<f64, Invalid> {
    v.as_f64()
        .filter(|t| t.is_finite() && *t >= 0.0)
        .ok_or_else(|| Invalid(format!("{at}: `{key}` must be a non-negative number of ms")))
}

fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .filter(|(_, l)| !l.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::speed_bench::PLACEHOLDER;
    use super::trace::TraceCaps;
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
            group_by: None,
            split: None,
        };
        let s = load_str(&text, "t", DatasetKind::SpeedBench, &sel).unwrap();
        let order: Vec<&str> = s.iter().map(|x| x.prompt.as_str()).collect();
        assert_eq!(
            order,
            ["p7", "p8", "p1", "p5", "p3", "p4", "p2", "p0", "p9", "p6"]
        );
    }

    #[test]
    fn every_aiperf_speed_bench_name_reads_back_to_itself() {
        let names = AiperfName::all();
        // AIPerf 0.13's plugins: 1 + 11 Qualitative, 5 x (1 + 3) Throughput.
        assert_eq!(names.len(), 32);
        for n in &names {
            let a = AiperfName::parse(n).unwrap_or_else(|| panic!("{n}"));
            assert_eq!(
                AiperfName::format(a.split, a.category.as_deref()).as_deref(),
                Some(n.as_str())
            );
        }
        let tier = AiperfName::parse("speed_bench_throughput_16k_high_entropy").unwrap();
        assert_eq!(tier.split, Split::Throughput16k);
        assert_eq!(tier.category.as_deref(), Some("high_entropy"));
        assert_eq!(tier.split.nominal_isl(), Some(16_000));
        for not in [
            "speed_bench",
            "speed_bench_Coding",
            "speed_bench_qualitative_coding",
            "speed_bench_throughput_4k",
            "speed_bench_throughput_8k_mixed_entropy",
            "spec_al_gsm8k",
        ] {
            assert_eq!(AiperfName::parse(not), None, "{not}");
        }
        // A tier with the Qualitative split, or a category AIPerf has no name for: none.
        assert_eq!(AiperfName::format(Split::Qualitative, Some("mixed")), None);
        assert_eq!(
            AiperfName::format(Split::Throughput2k, Some("coding")),
            None
        );
        assert_eq!(
            Split::of_file(Path::new("/data/sb/throughput_32k.jsonl")),
            Some(Split::Throughput32k)
        );
        assert_eq!(Split::of_file(Path::new("throughput_32k.json")), None);
    }

    #[test]
    fn groups_come_from_the_category_or_the_group_by_field() {
        let plain = SpeedBenchSelect::default();
        let s = load_str(
            &row("a", "coding", "x"),
            "f",
            DatasetKind::SpeedBench,
            &plain,
        )
        .unwrap();
        assert_eq!(s[0].group.as_deref(), Some("coding"));
        let by = |f: &str| SpeedBenchSelect {
            group_by: Some(f.into()),
            ..SpeedBenchSelect::default()
        };
        let text = "{\"text\": \"a\", \"level\": 3}\n{\"text\": \"b\", \"level\": \"hard\"}\n{\"text\": \"c\"}\n";
        let s = load_str(text, "f", DatasetKind::SingleTurn, &by("level")).unwrap();
        let groups: Vec<Option<&str>> = s.iter().map(|x| x.group.as_deref()).collect();
        assert_eq!(groups, [Some("3"), Some("hard"), None]);
        let s = load_str(
            &row("a", "coding", "x"),
            "f",
            DatasetKind::SpeedBench,
            &by("question_id"),
        )
        .unwrap();
        assert_eq!(s[0].group.as_deref(), Some("a"));
        let e = load_str(
            "{\"text\": \"a\", \"level\": [1]}",
            "f.jsonl",
            DatasetKind::SingleTurn,
            &by("level"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("f.jsonl") && e.contains("line 1") && e.contains("`level`"),
            "{e}"
        );
    }

    #[test]
    fn unprepared_rows_outside_the_selected_category_are_counted_in_a_warning() {
        // The coding run loads; the three placeholder rows of other categories used to pass
        // without a word (the file was never fully prepared).
        let p = |id: &str, c: &str| row(id, c, &format!("{PLACEHOLDER}\n\n{{question}}"));
        let text = [
            row("a", "coding", "x"),
            p("b", "math"),
            p("c", "math"),
            p("d", "rag"),
            row("e", "rag", "y"),
        ]
        .join("\n");
        let sel = SpeedBenchSelect {
            category: Some("coding".into()),
            ..SpeedBenchSelect::default()
        };
        let l = load_str(&text, "q.jsonl", DatasetKind::SpeedBench, &sel).unwrap();
        assert_eq!(l.len(), 1);
        assert_eq!(l.warnings.len(), 1, "{:?}", l.warnings);
        let w = &l.warnings[0];
        assert!(
            w.starts_with("q.jsonl: 3 rows") && w.contains("math 2, rag 1"),
            "{w}"
        );
        let clean = [row("a", "coding", "x"), row("e", "rag", "y")].join("\n");
        let l = load_str(&clean, "q.jsonl", DatasetKind::SpeedBench, &sel).unwrap();
        assert!(l.warnings.is_empty());
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
            group_by: None,
            split: None,
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
                group: None,
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
