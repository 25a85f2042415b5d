//! What is sent: the collection (bundled, a file, or synthetic prompts), its selection, the
//! prompt encoder and tokenizer, and the fields added to every request body (sampling, extra
//! inputs, chat-template arguments). Feeds `dataset` and `render`.

use std::path::PathBuf;

use serde_json::{Map, Value};

use super::{err, ConfigError};
use crate::cli::ReplayArgs;
use crate::dataset::synthetic::SyntheticSpec;
use crate::dataset::{AiperfName, DatasetKind, SpeedBenchSelect, Split};

/// Where samples come from.
#[derive(Clone, Debug)]
pub(crate) enum DatasetSource {
    /// The collection bundled into the binary.
    Bundled,
    /// A file of the given format.
    File {
        /// The file.
        path: PathBuf,
        /// Its format.
        kind: DatasetKind,
    },
    /// Generated prompts of exact token lengths.
    Synthetic(SyntheticSpec),
}

impl DatasetSource {
    /// Where the samples come from, in words, for the console and `summary.json`.
    pub(crate) fn describe(&self) -> String {
        match self {
            DatasetSource::Bundled => "bundled datasets/qualitative.jsonl".into(),
            DatasetSource::File { path, .. } => path.display().to_string(),
            DatasetSource::Synthetic(s) => format!(
                "synthetic: {} prompts of {} ± {} tokens",
                s.entries, s.isl, s.isl_stddev
            ),
        }
    }

    /// AIPerf 0.13's name for this collection's format (`input_config.datasets[].format`, the
    /// value of its `--custom-dataset-type`): for SPEED-Bench the split's and category's name
    /// (`speed_bench_coding`, `speed_bench_throughput_8k_mixed`: what `aiperf speed-bench-report`
    /// reads the category from), else `speed_bench_qualitative`; `None` where AIPerf has no file
    /// format (ShareGPT, synthetic).
    pub(crate) fn aiperf_format(&self, select: &SpeedBenchSelect) -> Option<String> {
        let kind = match self {
            DatasetSource::Bundled => DatasetKind::SpeedBench,
            DatasetSource::File { kind, .. } => *kind,
            DatasetSource::Synthetic(_) => return None,
        };
        Some(match kind {
            DatasetKind::SpeedBench => AiperfName::format(
                select.split.unwrap_or(Split::Qualitative),
                select.category.as_deref(),
            )
            .unwrap_or_else(|| "speed_bench_qualitative".to_owned()),
            DatasetKind::SingleTurn => "single_turn".to_owned(),
            DatasetKind::MultiTurn => "multi_turn".to_owned(),
            DatasetKind::MooncakeTrace => "mooncake_trace".to_owned(),
            DatasetKind::Sharegpt => return None,
        })
    }

    /// `--input-file`, else `--synthetic` (which needs a tokenizer to count exactly), else the
    /// bundled collection.
    pub(super) fn from_args(a: &ReplayArgs) -> Result<DatasetSource, ConfigError> {
        if let Some(p) = &a.input_file {
            return Ok(DatasetSource::File {
                path: p.clone(),
                kind: a
                    .custom_dataset_type
                    .as_ref()
                    .map_or(DatasetKind::SpeedBench, |t| t.kind),
            });
        }
        if let Some(t) = &a.custom_dataset_type {
            return err(format!(
                "--custom-dataset-type {} says the format of --input-file, which is not given: \
                 add --input-file PATH (or drop --custom-dataset-type for the bundled collection)",
                t.aiperf
                    .as_ref()
                    .and_then(|n| AiperfName::format(n.split, n.category.as_deref()))
                    .or_else(|| clap::ValueEnum::to_possible_value(&t.kind)
                        .map(|v| v.get_name().to_owned()))
                    .unwrap_or_default()
            ));
        }
        if !a.synthetic {
            return Ok(DatasetSource::Bundled);
        }
        if a.tokenizer.is_none() {
            return err(
                "--synthetic needs --tokenizer PATH to make prompts of exact token lengths",
            );
        }
        let entries = a.num_dataset_entries.unwrap_or(100);
        if a.isl() == 0 || entries == 0 {
            return err("--isl and --num-dataset-entries must be at least 1");
        }
        for (flag, v) in [("isl-stddev", a.isl_stddev), ("osl-stddev", a.osl_stddev)] {
            if !(v.is_finite() && v >= 0.0) {
                return err(format!("--{flag} {v} must be a non-negative number"));
            }
        }
        Ok(DatasetSource::Synthetic(SyntheticSpec {
            isl: a.isl(),
            isl_stddev: a.isl_stddev,
            osl: a.osl(),
            osl_stddev: a.osl_stddev,
            entries,
            seed: a.load.random_seed,
        }))
    }
}

/// The SPEED-Bench selection: `--category`, the order and the turns, or what AIPerf's dataset
/// name selects (its split's category or tier, file order as AIPerf's sequential sampling, every
/// turn of a row as AIPerf's loader sends them). The split comes from that name, else from the
/// file's name, for the prompt-length check and the run's AIPerf name.
pub(super) fn select(
    a: &ReplayArgs,
    dataset: &DatasetSource,
    warnings: &mut Vec<String>,
) -> Result<SpeedBenchSelect, ConfigError> {
    let aiperf = a
        .custom_dataset_type
        .as_ref()
        .and_then(|t| t.aiperf.clone());
    let file_split = match dataset {
        DatasetSource::Bundled => Some(Split::Qualitative),
        DatasetSource::File {
            path,
            kind: DatasetKind::SpeedBench,
        } => Split::of_file(path),
        _ => None,
    };
    let mut category = a.category.clone();
    if let Some(c) = &category {
        if c == "all" || c.contains(',') {
            return err(format!(
                "--category {c:?} runs one category after another; this command runs one \
                 (give a single category, or use `specperf replay`)"
            ));
        }
    }
    if let Some(n) = &aiperf {
        let name = AiperfName::format(n.split, n.category.as_deref()).unwrap_or_default();
        match (&category, &n.category) {
            (Some(c), Some(nc)) if c != nc => {
                return err(format!(
                    "--category {c} and --custom-dataset-type {name} select different rows: \
                     give one of them"
                ))
            }
            (None, Some(nc)) => category = Some(nc.clone()),
            _ => {}
        }
        if let Some(fs) = file_split.filter(|s| *s != n.split) {
            warnings.push(format!(
                "--custom-dataset-type {name} names the {} split but --input-file is a {} \
                 file: the prompt-length check and the run's dataset name follow the flag",
                n.split.name(),
                fs.name()
            ));
        }
    }
    Ok(SpeedBenchSelect {
        category,
        shuffle_seed: match (&aiperf, a.no_shuffle) {
            (Some(_), _) | (None, true) => None,
            (None, false) => Some(a.seed),
        },
        all_turns: a.all_turns || aiperf.is_some(),
        group_by: a.group_by.clone(),
        split: aiperf.map(|n| n.split).or(file_split),
    })
}

/// `--encoder`, validated (the template itself is loaded with the collection).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum EncoderSpec {
    None,
    Dsv4,
    Dsv41,
    Template(PathBuf),
}

impl EncoderSpec {
    pub(crate) fn parse(s: &str) -> Result<EncoderSpec, ConfigError> {
        Ok(match s {
            "none" | "" => EncoderSpec::None,
            "dsv4" | "deepseek_v4" => EncoderSpec::Dsv4,
            "dsv41" | "deepseek_v41" => EncoderSpec::Dsv41,
            t => match t.strip_prefix("template:") {
                Some(p) if !p.is_empty() => {
                    let path = PathBuf::from(p);
                    if !path.exists() {
                        return err(format!(
                            "--encoder {t}: {p} does not exist (give a model directory, a tokenizer_config.json or a .jinja file)"
                        ));
                    }
                    EncoderSpec::Template(path)
                }
                _ => {
                    return err(format!(
                        "--encoder {t:?}: expected dsv4, dsv41, template:PATH or none"
                    ))
                }
            },
        })
    }
}

/// Sampling fields, only those given.
pub(super) fn sampling(a: &ReplayArgs) -> Result<Map<String, Value>, ConfigError> {
    let mut m = Map::new();
    let floats = [
        ("temperature", a.temperature),
        ("top_p", a.top_p),
        ("min_p", a.min_p),
        ("presence_penalty", a.presence_penalty),
        ("frequency_penalty", a.frequency_penalty),
        ("repetition_penalty", a.repetition_penalty),
    ];
    for (k, v) in floats {
        if let Some(v) = v {
            if !v.is_finite() {
                return err(format!(
                    "--{} {v} must be a finite number",
                    k.replace('_', "-")
                ));
            }
            m.insert(k.into(), serde_json::json!(v));
        }
    }
    if let Some(k) = a.top_k {
        m.insert("top_k".into(), serde_json::json!(k));
    }
    Ok(m)
}

/// `--chat-template-kwargs`: a JSON object (empty when not given).
pub(super) fn chat_template_kwargs(raw: Option<&str>) -> Result<Map<String, Value>, ConfigError> {
    match raw {
        None => Ok(Map::new()),
        Some(t) => match serde_json::from_str::<Value>(t) {
            Ok(Value::Object(m)) => Ok(m),
            _ => err(format!(
                "--chat-template-kwargs {t:?} must be a JSON object, e.g. '{{\"thinking\": true}}'"
            )),
        },
    }
}

/// `--tokenizer`: a local file or directory; nothing is downloaded.
pub(super) fn tokenizer(path: Option<&PathBuf>) -> Result<Option<PathBuf>, ConfigError> {
    match path {
        Some(p) if !p.exists() => err(format!(
            "--tokenizer {}: no such file or directory (pass a local tokenizer.json or a model directory; nothing is downloaded)",
            p.display()
        )),
        other => Ok(other.cloned()),
    }
}

/// Parses `--extra-inputs`: `key:value` pairs (JSON value when it parses) or JSON objects.
pub(crate) fn parse_extra_inputs(items: &[String]) -> Result<Map<String, Value>, ConfigError> {
    let map = parse_extra_input_items(items)?;
    for key in map.keys() {
        if let Some((_, instead)) = OWNED_FIELDS.iter().find(|(k, _)| k == key) {
            return err(format!(
                "--extra-inputs cannot set {key:?}: specperf sets it on every request and reads \
                 the answer accordingly; {instead}"
            ));
        }
    }
    Ok(map)
}

/// Body fields the tool sets and depends on (overriding them made every request fail), with
/// the flag that controls each.
const OWNED_FIELDS: [(&str, &str); 5] = [
    ("stream", "use --streaming true|false"),
    (
        "stream_options",
        "usage is always asked for; use --per-chunk-usage for continuous_usage_stats",
    ),
    ("model", "use --model"),
    ("messages", "the prompts come from --input-file"),
    (
        "prompt",
        "the prompts come from --input-file (and --encoder)",
    ),
];

fn parse_extra_input_items(items: &[String]) -> Result<Map<String, Value>, ConfigError> {
    let mut map = Map::new();
    for item in items {
        let t = item.trim();
        if t.starts_with('{') {
            match serde_json::from_str::<Value>(t) {
                Ok(Value::Object(o)) => map.extend(o),
                _ => return err(format!("--extra-inputs {t:?} is not a JSON object")),
            }
            continue;
        }
        let Some((k, v)) = t.split_once(':') else {
            return err(format!(
                "--extra-inputs {t:?}: expected key:value or a JSON object"
            ));
        };
        if k.is_empty() {
            return err(format!("--extra-inputs {t:?}: empty key"));
        }
        let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_owned()));
        map.insert(k.to_owned(), value);
    }
    Ok(map)
}
