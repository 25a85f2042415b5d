//! Upstream's argv, read as argparse reads it (shared/spec/bench-serving.md §2): each flavor
//! accepts exactly its script's flags and choices, `--flag value` and `--flag=value`, no prefix
//! abbreviations; the last of a repeated flag wins, `--metadata`/`--goodput` take the words up to
//! the next flag. Anything else is a [`UsageError`] (exit 2) naming the flag and the fix.
//!
//! ```text
//! argv ─► --flavor ─► the flavor's flag table ─► Parsed (name → words) ─► Args (typed)
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::config::TelemetryConfig;
use crate::dataset::bench_serving::Flavor;

/// How many words a flag takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Takes {
    /// `store_true`.
    Switch,
    /// One value; the last one given wins.
    One,
    /// One value, every occurrence kept (`action="append"`).
    Append,
    /// `nargs="*"`: the words up to the next flag.
    Star,
    /// `nargs="+"`: at least one word.
    Plus,
}

/// Which script has the flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    Both,
    /// InferenceX's `benchmark_serving.py` only.
    Ix,
    /// sa-bench's only.
    Sa,
    /// specperf's own (never passed by the callers).
    Ours,
}

struct Flag {
    name: &'static str,
    takes: Takes,
    who: Who,
    help: &'static str,
}

const fn flag(name: &'static str, takes: Takes, who: Who, help: &'static str) -> Flag {
    Flag {
        name,
        takes,
        who,
        help,
    }
}

use Takes::{Append, One, Plus, Star, Switch};
use Who::{Both, Ix, Ours, Sa};

/// Both scripts' flags in their `--help` order, then specperf's own.
const FLAGS: &[Flag] = &[
    flag("--backend", One, Both, "vllm, openai, sglang, lmdeploy, scalellm (completions), openai-chat; sa-bench also dynamo [vllm]"),
    flag("--base-url", One, Both, "server base URL (else http://HOST:PORT)"),
    flag("--host", One, Both, "[127.0.0.1]"),
    flag("--port", One, Both, "[8000]"),
    flag("--endpoint", One, Both, "API path [/v1/completions]"),
    flag("--dataset", One, Sa, "sa-bench's deprecated ShareGPT path: refused (random only)"),
    flag("--dataset-name", One, Both, "random (the only dataset the drop-in builds)"),
    flag("--dataset-path", One, Both, "accepted, no effect"),
    flag("--max-concurrency", One, Both, "requests in flight at most [no cap]"),
    flag("--reuse-http-connections", Switch, Sa, "one connection pool for the run (dynamo backend)"),
    flag("--slow-down-server", Append, Sa, "SGLang worker URL to POST /slow_down to (repeatable)"),
    flag("--slow-down-sleep-time", One, Sa, "forward_sleep_time sent [1.0]"),
    flag("--slow-down-wait-time", One, Sa, "seconds before slow-down is lifted [60.0]"),
    flag("--model", One, Both, "model name sent in the body; the tokenizer unless --tokenizer (required)"),
    flag("--tokenizer", One, Both, "tokenizer directory, or a Hub id in the offline HF cache [--model]"),
    flag("--best-of", One, Both, "[1]"),
    flag("--use-beam-search", Switch, Both, "accepted, no effect"),
    flag("--num-prompts", One, Both, "requests in the main run [1000]"),
    flag("--logprobs", One, Both, "body logprobs [none]"),
    flag("--request-rate", One, Both, "requests per second, inf = all at once [inf]"),
    flag("--burstiness", One, Both, "gamma shape of the arrival gaps, 1 = Poisson [1.0]"),
    flag("--seed", One, Both, "numpy seed of the prompts and arrivals [0]"),
    flag("--trust-remote-code", Switch, Both, "accepted; no code is ever run"),
    flag("--disable-tqdm", Switch, Both, "no progress on stderr"),
    flag("--profile", Switch, Both, "POST /start_profile and /stop_profile around the run"),
    flag("--save-result", Switch, Both, "write the result JSON"),
    flag("--save-detailed", Switch, Ix, "keep ttfts, itls, generated_texts, errors in the result"),
    flag("--metadata", Star, Both, "KEY=VALUE items added to the result"),
    flag("--result-dir", One, Both, "directory of the result file [.]"),
    flag("--result-filename", One, Both, "result file name [{backend}-{rate}qps[-concurrency{C}]-{model}-{date}.json]"),
    flag("--ignore-eos", Switch, Both, "send ignore_eos: true"),
    flag("--percentile-metrics", One, Both, "ttft,tpot,itl,e2el [IX: all four; sa-bench: ttft,tpot,itl]"),
    flag("--metric-percentiles", One, Both, "comma-separated [IX: 90,99,99.9; sa-bench: 99]"),
    flag("--goodput", Plus, Both, "SLOs KEY:MS with KEY in ttft, tpot, e2el"),
    flag("--sonnet-input-len", One, Both, "accepted, no effect"),
    flag("--sonnet-output-len", One, Both, "accepted, no effect"),
    flag("--sonnet-prefix-len", One, Both, "accepted, no effect"),
    flag("--sharegpt-output-len", One, Both, "accepted, no effect"),
    flag("--random-input-len", One, Both, "[1024]"),
    flag("--random-output-len", One, Both, "[128]"),
    flag("--random-range-ratio", One, Both, "lengths drawn from [len*r, len] [1.0]"),
    flag("--random-prefix-len", One, Both, "shared prefix tokens [0]"),
    flag("--use-chat-template", Switch, Both, "wrap each prompt in the chat template"),
    flag("--random-num-workers", One, Both, "IX: prompt workers (which padding streams), 0 = min(CPUs, 8) [0]"),
    flag("--dsv4", Switch, Ix, "DeepSeek-V4 encoder as the chat template (with --use-chat-template)"),
    flag("--hf-subset", One, Both, "accepted, no effect"),
    flag("--hf-split", One, Both, "accepted, no effect"),
    flag("--hf-output-len", One, Both, "accepted, no effect"),
    flag("--tokenizer-mode", One, Both, "auto; IX also deepseek_v4 [auto]"),
    flag("--custom-tokenizer", One, Sa, "sa_bench_tokenizers.{vllm,sglang}_deepseek_v4 adapters, glm_moe_dsa"),
    flag("--served-model-name", One, Both, "model name in the body [--model]"),
    flag("--lora-modules", Plus, Both, "not supported (exit 2)"),
    flag("--num-warmups", One, Ix, "copies of request 0 sent before the run [0]"),
    flag("--flavor", One, Ours, "specperf: inferencex (benchmark_serving.py) or sa-bench [inferencex]"),
    flag("--ttft-timeout-seconds", One, Ours, "specperf: a request without a first token by then fails [600]"),
    flag("--idle-timeout-seconds", One, Ours, "specperf: a stream silent this long fails [120]"),
    flag("--request-timeout-seconds", One, Ours, "specperf: a request still running after this fails [21600]"),
    flag("--timeout-seconds", One, Ours, "specperf: the whole run's deadline; the result is still written [none]"),
    flag("--server-metrics", Plus, Ours, "specperf: Prometheus endpoints (URL or host:port): acceptance length over the window, spec_decode_* keys appended"),
    flag("--server-metrics-settle-seconds", One, Ours, "specperf: wait after the last response before the final scrape (counters lag) [10]"),
    flag("--artifact-dir", One, Ours, "specperf: also write specperf's artifacts of the measured requests here (records, summary.json, AIPerf's files; `specperf plot` reads them) [none]"),
    flag("--gpu-telemetry", Star, Ours, "specperf: GPU energy over the measured window from DCGM URLs, nvml, nvidia-smi or amd-smi [auto]; a line after the result block, and summary.json with --artifact-dir"),
    flag("--require-gpu-telemetry", Switch, Ours, "specperf: with --gpu-telemetry, no source answering is an error before any request"),
    flag("--gpu-telemetry-interval", One, Ours, "specperf: seconds between GPU reads [0.333]"),
    flag("--gpus", One, Ours, "specperf: GPUs serving the model (TP x PP x DP); fewer seen is a warning [none]"),
];

/// A command line the drop-in cannot honour (exit 2).
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{0}")]
pub(crate) struct UsageError(pub(crate) String);

fn usage(msg: impl Into<String>) -> UsageError {
    UsageError(msg.into())
}

/// `--backend`: how requests are made and their bodies read.
pub(crate) use crate::client::lines::Api;

/// Everything the scripts' argv says, typed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Args {
    pub(crate) flavor: Flavor,
    pub(crate) backend: String,
    pub(crate) api: Api,
    pub(crate) base_url: Option<String>,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) endpoint: String,
    pub(crate) max_concurrency: Option<usize>,
    pub(crate) reuse_http_connections: bool,
    pub(crate) slow_down_servers: Vec<String>,
    pub(crate) slow_down_sleep_time: f64,
    pub(crate) slow_down_wait_time: f64,
    pub(crate) model: String,
    pub(crate) tokenizer: Option<String>,
    pub(crate) best_of: u32,
    pub(crate) num_prompts: usize,
    pub(crate) logprobs: Option<i64>,
    pub(crate) request_rate: f64,
    pub(crate) burstiness: f64,
    pub(crate) seed: u32,
    pub(crate) disable_tqdm: bool,
    pub(crate) profile: bool,
    pub(crate) save_result: bool,
    pub(crate) save_detailed: bool,
    pub(crate) metadata: Vec<String>,
    pub(crate) result_dir: Option<PathBuf>,
    pub(crate) result_filename: Option<String>,
    pub(crate) ignore_eos: bool,
    pub(crate) percentile_metrics: String,
    pub(crate) metric_percentiles: Vec<f64>,
    /// `(name, ms)` pairs as given.
    pub(crate) goodput: Vec<(String, f64)>,
    pub(crate) random_input_len: u32,
    pub(crate) random_output_len: u32,
    pub(crate) random_range_ratio: f64,
    pub(crate) random_prefix_len: u32,
    pub(crate) use_chat_template: bool,
    pub(crate) random_num_workers: usize,
    pub(crate) dsv4: bool,
    pub(crate) tokenizer_mode: String,
    pub(crate) custom_tokenizer: Option<String>,
    pub(crate) served_model_name: Option<String>,
    pub(crate) num_warmups: usize,
    pub(crate) ttft_timeout: f64,
    pub(crate) idle_timeout: f64,
    pub(crate) request_timeout: f64,
    pub(crate) deadline: Option<f64>,
    /// `--server-metrics`, normalised to `/metrics` URLs.
    pub(crate) server_metrics: Vec<String>,
    pub(crate) server_metrics_settle: f64,
    /// `--artifact-dir`.
    pub(crate) artifact_dir: Option<PathBuf>,
    /// `--gpu-telemetry` and its settings.
    pub(crate) telemetry: TelemetryConfig,
}

/// Whether argparse would read `word` as a flag rather than a value (negative numbers are
/// values: neither script has a flag that looks like one).
fn looks_like_flag(word: &str) -> bool {
    word.starts_with('-') && word.len() > 1 && word.parse::<f64>().is_err()
}

/// `--flavor`, looked for before the flags are read (it decides which flags exist).
fn flavor_of(argv: &[String]) -> Result<Flavor, UsageError> {
    let mut value = None;
    let mut i = 0;
    while i < argv.len() {
        if let Some(v) = argv[i].strip_prefix("--flavor=") {
            value = Some(v.to_owned());
        } else if argv[i] == "--flavor" {
            value = Some(argv.get(i + 1).cloned().ok_or_else(|| {
                usage("argument --flavor: expected one argument (inferencex or sa-bench)")
            })?);
            i += 1;
        }
        i += 1;
    }
    match value.as_deref() {
        None | Some("inferencex") => Ok(Flavor::InferenceX),
        Some("sa-bench") => Ok(Flavor::SaBench),
        Some(other) => Err(usage(format!(
            "argument --flavor: invalid choice: '{other}' (choose from 'inferencex', 'sa-bench')"
        ))),
    }
}

fn has(flavor: Flavor, who: Who) -> bool {
    match who {
        Both | Ours => true,
        Ix => flavor == Flavor::InferenceX,
        Sa => flavor == Flavor::SaBench,
    }
}

/// The flag's words, by name.
type Parsed = BTreeMap<&'static str, Vec<String>>;

fn parse_words(flavor: Flavor, argv: &[String]) -> Result<Parsed, UsageError> {
    let mut parsed = Parsed::new();
    let mut i = 0;
    while i < argv.len() {
        let word = &argv[i];
        i += 1;
        if word == "-h" || word == "--help" {
            continue;
        }
        if !looks_like_flag(word) {
            return Err(usage(format!(
                "unrecognized arguments: {word} (every value follows its flag; see \
                 `specperf bench-serving --help`)"
            )));
        }
        let (name, inline) = match word.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_owned())),
            _ => (word.as_str(), None),
        };
        let Some(f) = FLAGS.iter().find(|f| f.name == name && has(flavor, f.who)) else {
            let other = FLAGS.iter().any(|f| f.name == name);
            let hint = match (other, flavor) {
                (true, Flavor::InferenceX) => " (an sa-bench flag: add --flavor sa-bench)",
                (true, Flavor::SaBench) => " (an InferenceX flag, not sa-bench's)",
                _ => "",
            };
            return Err(usage(format!("unrecognized arguments: {word}{hint}")));
        };
        let slot = parsed.entry(f.name).or_default();
        match (f.takes, inline) {
            (Switch, Some(_)) => {
                return Err(usage(format!(
                    "argument {}: ignored explicit argument in {word}",
                    f.name
                )))
            }
            (Switch, None) => slot.push(String::new()),
            (One | Append | Star | Plus, Some(v)) => {
                if f.takes == One {
                    slot.clear();
                }
                slot.push(v);
            }
            (One | Append, None) => {
                let v = argv
                    .get(i)
                    .filter(|v| !looks_like_flag(v))
                    .ok_or_else(|| usage(format!("argument {}: expected one argument", f.name)))?;
                i += 1;
                if f.takes == One {
                    slot.clear();
                }
                slot.push(v.clone());
            }
            (Star | Plus, None) => {
                // A repeated nargs flag replaces the earlier words, as argparse's store does.
                slot.clear();
                while let Some(v) = argv.get(i).filter(|v| !looks_like_flag(v)) {
                    slot.push(v.clone());
                    i += 1;
                }
                if f.takes == Plus && slot.is_empty() {
                    return Err(usage(format!(
                        "argument {}: expected at least one argument",
                        f.name
                    )));
                }
            }
        }
    }
    Ok(parsed)
}

/// `-h`/`--help` anywhere: the flavor whose flags to list (argparse prints help before it
/// checks anything else).
pub(crate) fn help_asked(argv: &[String]) -> Option<Flavor> {
    argv.iter()
        .any(|w| w == "-h" || w == "--help")
        .then(|| flavor_of(argv).unwrap_or(Flavor::InferenceX))
}

/// One flag's last value, if given.
fn one<'a>(p: &'a Parsed, name: &str) -> Option<&'a str> {
    p.get(name).and_then(|v| v.last()).map(String::as_str)
}

fn switch(p: &Parsed, name: &str) -> bool {
    p.contains_key(name)
}

/// Python's `int(word)` (surrounding spaces and `_` between digits allowed).
fn int_of(name: &str, word: &str) -> Result<i64, UsageError> {
    let w = word.trim().replace('_', "");
    w.parse::<i64>()
        .map_err(|_| usage(format!("argument {name}: invalid int value: '{word}'")))
}

/// Python's `float(word)`.
fn float_of(name: &str, word: &str) -> Result<f64, UsageError> {
    word.trim()
        .replace('_', "")
        .parse::<f64>()
        .map_err(|_| usage(format!("argument {name}: invalid float value: '{word}'")))
}

fn int_or(p: &Parsed, name: &str, default: i64) -> Result<i64, UsageError> {
    one(p, name).map_or(Ok(default), |w| int_of(name, w))
}

fn float_or(p: &Parsed, name: &str, default: f64) -> Result<f64, UsageError> {
    one(p, name).map_or(Ok(default), |w| float_of(name, w))
}

/// A count that must not be negative.
fn count(p: &Parsed, name: &str, default: i64) -> Result<usize, UsageError> {
    let v = int_or(p, name, default)?;
    usize::try_from(v)
        .map_err(|_| usage(format!("argument {name}: {v} is negative; give 0 or more")))
}

fn u32_of(p: &Parsed, name: &str, default: i64) -> Result<u32, UsageError> {
    let v = int_or(p, name, default)?;
    u32::try_from(v).map_err(|_| {
        usage(format!(
            "argument {name}: {v} is out of range (0 to 4294967295)"
        ))
    })
}

/// A flag with `choices`; as argparse, the default is not checked against them.
fn choice<'a>(
    p: &'a Parsed,
    name: &str,
    default: &'a str,
    choices: &[&str],
) -> Result<&'a str, UsageError> {
    let Some(v) = one(p, name) else {
        return Ok(default);
    };
    if choices.contains(&v) {
        Ok(v)
    } else {
        let list: Vec<String> = choices.iter().map(|c| format!("'{c}'")).collect();
        Err(usage(format!(
            "argument {name}: invalid choice: '{v}' (choose from {})",
            list.join(", ")
        )))
    }
}

/// `--goodput KEY:VALUE ...` as upstream checks it.
fn goodput(words: &[String]) -> Result<Vec<(String, f64)>, UsageError> {
    let mut out: Vec<(String, f64)> = Vec::new();
    for w in words {
        let parts: Vec<&str> = w.split(':').collect();
        let parsed = match parts[..] {
            [k, v] => float_of("--goodput", v).ok().map(|v| (k.to_owned(), v)),
            _ => None,
        };
        let Some((k, v)) = parsed else {
            return Err(usage(format!(
                "--goodput {w}: specify service level objectives as KEY:VALUE pairs, the key a \
                 metric name (ttft, tpot, e2el) and the value a number of milliseconds"
            )));
        };
        if !["ttft", "tpot", "e2el"].contains(&k.as_str()) {
            return Err(usage(format!(
                "--goodput {w}: invalid metric name {k}; use one of ttft, tpot, e2el"
            )));
        }
        if v < 0.0 || v.is_nan() {
            return Err(usage(format!(
                "--goodput {w}: the objective must be a non-negative number of milliseconds"
            )));
        }
        // A dict: a repeated key keeps its first place and its last value.
        match out.iter_mut().find(|(name, _)| *name == k) {
            Some(slot) => slot.1 = v,
            None => out.push((k, v)),
        }
    }
    Ok(out)
}

/// `--server-metrics` words (each may hold several, comma-separated) as `/metrics` URLs.
fn metrics_urls(words: Option<&Vec<String>>) -> Result<Vec<String>, UsageError> {
    let mut out: Vec<String> = Vec::new();
    for w in words.into_iter().flatten().flat_map(|w| w.split(',')) {
        let url = crate::config::scrape::metrics_url(w)
            .map_err(|e| usage(format!("--server-metrics: {e}")))?;
        if let Some(u) = url {
            if out.contains(&u) {
                return Err(usage(format!(
                    "--server-metrics: {u} is given twice (it would be counted twice)"
                )));
            }
            out.push(u);
        }
    }
    Ok(out)
}

/// `--gpu-telemetry [SOURCE...]`, `--require-gpu-telemetry`, `--gpu-telemetry-interval`,
/// `--gpus`, read as `replay` reads them.
fn telemetry(p: &Parsed) -> Result<TelemetryConfig, UsageError> {
    let sources = p.get("--gpu-telemetry").cloned();
    if sources.is_none() {
        for f in ["--require-gpu-telemetry", "--gpu-telemetry-interval"] {
            if p.contains_key(f) {
                return Err(usage(format!("{f} needs --gpu-telemetry")));
            }
        }
    }
    let gpus = one(p, "--gpus")
        .map(|w| {
            w.parse::<u32>()
                .map_err(|_| usage(format!("--gpus {w}: give a whole number of GPUs")))
        })
        .transpose()?;
    let args = crate::cli::TelemetryArgs {
        gpu_telemetry: sources,
        require_gpu_telemetry: switch(p, "--require-gpu-telemetry"),
        gpu_telemetry_interval: float_or(p, "--gpu-telemetry-interval", 0.333)?,
    };
    TelemetryConfig::from_args(&args, gpus).map_err(|e| usage(e.to_string()))
}

fn seconds(p: &Parsed, name: &str, default: f64) -> Result<f64, UsageError> {
    let v = float_or(p, name, default)?;
    if v > 0.0 && v.is_finite() {
        Ok(v)
    } else {
        Err(usage(format!(
            "{name} {v}: give a positive number of seconds"
        )))
    }
}

impl Args {
    /// Reads the words after `specperf bench-serving`.
    pub(crate) fn parse(argv: &[String]) -> Result<Args, UsageError> {
        let flavor = flavor_of(argv)?;
        let p = parse_words(flavor, argv)?;
        let ix = flavor == Flavor::InferenceX;
        let mut backends = vec![
            "tgi",
            "vllm",
            "lmdeploy",
            "deepspeed-mii",
            "openai",
            "openai-chat",
        ];
        if !ix {
            backends.insert(2, "dynamo");
        }
        backends.extend(["tensorrt-llm", "scalellm", "sglang"]);
        let backend = choice(&p, "--backend", "vllm", &backends)?.to_owned();
        let api = match backend.as_str() {
            "openai-chat" => Api::Chat,
            "dynamo" => Api::Dynamo,
            "tgi" | "deepspeed-mii" | "tensorrt-llm" => {
                return Err(usage(format!(
                    "--backend {backend}: not an OpenAI-compatible streaming API and not \
                     supported by the drop-in; use vllm, openai, sglang (completions) or \
                     openai-chat"
                )))
            }
            _ => Api::Completions,
        };
        let datasets: &[&str] = if ix {
            &["random"]
        } else {
            &["sharegpt", "burstgpt", "sonnet", "random", "hf", "custom"]
        };
        let dataset = choice(&p, "--dataset-name", "sharegpt", datasets)?;
        if dataset != "random" {
            return Err(usage(format!(
                "Unknown dataset: {dataset} (the drop-in builds --dataset-name random only)"
            )));
        }
        // sa-bench reads `--dataset` as a ShareGPT file that replaces `--dataset-name`'s
        // prompts; accepting it would send other prompts than the caller's script would.
        if let Some(path) = one(&p, "--dataset") {
            return Err(usage(format!(
                "--dataset {path}: sa-bench reads it as a ShareGPT file in place of                  --dataset-name random, and the drop-in builds the random dataset only;                  drop --dataset"
            )));
        }
        let modes: &[&str] = if ix {
            &["auto", "slow", "mistral", "custom", "deepseek_v4"]
        } else {
            &["auto", "slow", "mistral", "custom"]
        };
        let tokenizer_mode = choice(&p, "--tokenizer-mode", "auto", modes)?.to_owned();
        if !["auto", "deepseek_v4"].contains(&tokenizer_mode.as_str()) {
            return Err(usage(format!(
                "--tokenizer-mode {tokenizer_mode}: not supported (the drop-in reads \
                 tokenizer.json); use auto"
            )));
        }
        let model = one(&p, "--model")
            .ok_or_else(|| usage("the following arguments are required: --model"))?
            .to_owned();
        let seed = int_or(&p, "--seed", 0)?;
        let seed = u32::try_from(seed).map_err(|_| {
            usage(format!(
                "--seed {seed}: numpy seeds must be between 0 and 2**32 - 1"
            ))
        })?;
        let burstiness = float_or(&p, "--burstiness", 1.0)?;
        if burstiness.is_nan() || burstiness <= 0.0 {
            return Err(usage(format!(
                "--burstiness {burstiness}: must be greater than 0 (1.0 is a Poisson process)"
            )));
        }
        let request_rate = float_or(&p, "--request-rate", f64::INFINITY)?;
        if request_rate.is_nan() || request_rate <= 0.0 {
            return Err(usage(format!(
                "--request-rate {request_rate}: give a positive rate, or inf to send every \
                 request at once"
            )));
        }
        let max_concurrency = match one(&p, "--max-concurrency") {
            None => None,
            Some(w) => match int_of("--max-concurrency", w)? {
                // asyncio.Semaphore(0) would never admit a request; None caps nothing.
                c if c > 0 => Some(c as usize),
                c => {
                    return Err(usage(format!(
                        "--max-concurrency {c}: give at least 1, or leave it out for no cap"
                    )))
                }
            },
        };
        let metric_percentiles = one(&p, "--metric-percentiles")
            .unwrap_or(if ix { "90,99,99.9" } else { "99" })
            .split(',')
            .map(|w| {
                let v = float_of("--metric-percentiles", w)?;
                if (0.0..=100.0).contains(&v) {
                    Ok(v)
                } else {
                    Err(usage(format!(
                        "--metric-percentiles {w}: percentiles must be between 0 and 100"
                    )))
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        let metadata = p.get("--metadata").cloned().unwrap_or_default();
        if let Some(bad) = metadata.iter().find(|m| !m.contains('=')) {
            return Err(usage(format!(
                "--metadata {bad}: Invalid metadata format. Please use KEY=VALUE format."
            )));
        }
        let reuse_http_connections = switch(&p, "--reuse-http-connections");
        if reuse_http_connections && api != Api::Dynamo {
            return Err(usage(
                "--reuse-http-connections is currently supported only by the Dynamo backend \
                 (add --backend dynamo)",
            ));
        }
        if p.contains_key("--lora-modules") {
            return Err(usage(
                "--lora-modules: LoRA requests are not supported by the drop-in (neither caller \
                 passes it); leave it out",
            ));
        }
        let dsv4 = switch(&p, "--dsv4");
        let use_chat_template = switch(&p, "--use-chat-template");
        if dsv4 && !use_chat_template {
            return Err(usage(
                "--dsv4 requires --use-chat-template (it renders the prompt with the \
                 DeepSeek-V4 encoder instead of the jinja template)",
            ));
        }
        Ok(Args {
            flavor,
            backend,
            api,
            base_url: one(&p, "--base-url").map(str::to_owned),
            host: one(&p, "--host").unwrap_or("127.0.0.1").to_owned(),
            port: {
                let v = int_or(&p, "--port", 8000)?;
                u16::try_from(v).map_err(|_| usage(format!("--port {v}: not a TCP port")))?
            },
            endpoint: one(&p, "--endpoint")
                .unwrap_or("/v1/completions")
                .to_owned(),
            max_concurrency,
            reuse_http_connections,
            slow_down_servers: p.get("--slow-down-server").cloned().unwrap_or_default(),
            slow_down_sleep_time: float_or(&p, "--slow-down-sleep-time", 1.0)?,
            slow_down_wait_time: float_or(&p, "--slow-down-wait-time", 60.0)?,
            model,
            tokenizer: one(&p, "--tokenizer").map(str::to_owned),
            best_of: u32_of(&p, "--best-of", 1)?,
            num_prompts: count(&p, "--num-prompts", 1000)?,
            logprobs: one(&p, "--logprobs")
                .map(|w| int_of("--logprobs", w))
                .transpose()?,
            request_rate,
            burstiness,
            seed,
            disable_tqdm: switch(&p, "--disable-tqdm"),
            profile: switch(&p, "--profile"),
            save_result: switch(&p, "--save-result"),
            save_detailed: switch(&p, "--save-detailed"),
            metadata,
            result_dir: one(&p, "--result-dir").map(PathBuf::from),
            result_filename: one(&p, "--result-filename").map(str::to_owned),
            ignore_eos: switch(&p, "--ignore-eos"),
            percentile_metrics: one(&p, "--percentile-metrics")
                .unwrap_or(if ix {
                    "ttft,tpot,itl,e2el"
                } else {
                    "ttft,tpot,itl"
                })
                .to_owned(),
            metric_percentiles,
            goodput: goodput(p.get("--goodput").map(Vec::as_slice).unwrap_or_default())?,
            random_input_len: u32_of(&p, "--random-input-len", 1024)?,
            random_output_len: u32_of(&p, "--random-output-len", 128)?,
            random_range_ratio: float_or(&p, "--random-range-ratio", 1.0)?,
            random_prefix_len: u32_of(&p, "--random-prefix-len", 0)?,
            use_chat_template,
            random_num_workers: count(&p, "--random-num-workers", 0)?,
            dsv4,
            tokenizer_mode,
            custom_tokenizer: one(&p, "--custom-tokenizer").map(str::to_owned),
            served_model_name: one(&p, "--served-model-name").map(str::to_owned),
            num_warmups: count(&p, "--num-warmups", 0)?,
            ttft_timeout: seconds(&p, "--ttft-timeout-seconds", 600.0)?,
            idle_timeout: seconds(&p, "--idle-timeout-seconds", 120.0)?,
            request_timeout: seconds(&p, "--request-timeout-seconds", 6.0 * 3600.0)?,
            deadline: one(&p, "--timeout-seconds")
                .map(|_| seconds(&p, "--timeout-seconds", 0.0))
                .transpose()?,
            server_metrics: metrics_urls(p.get("--server-metrics"))?,
            server_metrics_settle: {
                let v = float_or(&p, "--server-metrics-settle-seconds", 10.0)?;
                if !(0.0..=3600.0).contains(&v) {
                    return Err(usage(format!(
                        "--server-metrics-settle-seconds {v}: give 0 to 3600 seconds"
                    )));
                }
                v
            },
            artifact_dir: one(&p, "--artifact-dir").map(PathBuf::from),
            telemetry: telemetry(&p)?,
        })
    }

    /// `http://host:port` or `--base-url`, without the endpoint.
    pub(crate) fn base(&self) -> String {
        match &self.base_url {
            Some(b) => b.clone(),
            None => format!("http://{}:{}", self.host, self.port),
        }
    }

    /// The model name in request bodies.
    pub(crate) fn body_model(&self) -> &str {
        self.served_model_name.as_deref().unwrap_or(&self.model)
    }

    /// `--tokenizer`, else `--model` (the result's `tokenizer_id`).
    pub(crate) fn tokenizer_id(&self) -> &str {
        self.tokenizer.as_deref().unwrap_or(&self.model)
    }
}

/// `specperf bench-serving --help` for one flavor.
pub(crate) fn help(flavor: Flavor) -> String {
    let (name, script) = match flavor {
        Flavor::InferenceX => (
            "inferencex",
            "InferenceX's utils/bench_serving/benchmark_serving.py",
        ),
        Flavor::SaBench => ("sa-bench", "srt-slurm's sa-bench benchmark_serving.py"),
    };
    let mut o = format!(
        "Drop-in for {script}: the same argv, prompts, load, result file, console lines and exit \
         codes.\n\nUsage: specperf bench-serving [--flavor {name}] --model MODEL [FLAGS]\n\n\
         Flags of the {name} flavor (each as --flag VALUE or --flag=VALUE):\n"
    );
    for f in FLAGS.iter().filter(|f| has(flavor, f.who)) {
        let value = match f.takes {
            Switch => "",
            One | Append => " V",
            Star => " [V ...]",
            Plus => " V [V ...]",
        };
        o += &format!("  {:<34} {}\n", format!("{}{value}", f.name), f.help);
    }
    o += "\nThe other flavor: --flavor inferencex | sa-bench. Reference: docs/bench-serving.md\n";
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    fn err(s: &str) -> String {
        Args::parse(&argv(s)).unwrap_err().0
    }

    #[test]
    fn inferencexs_call_parses_with_upstreams_defaults() {
        let a = Args::parse(&argv(
            "--model m --backend vllm --base-url http://0.0.0.0:8000 --dataset-name random \
             --random-input-len 1024 --random-output-len 128 --random-range-ratio 0.8 \
             --num-prompts 80 --max-concurrency 8 --request-rate inf --ignore-eos --save-result \
             --num-warmups 16 --percentile-metrics ttft,tpot,itl,e2el --result-dir /tmp/r \
             --result-filename r.json --use-chat-template --dsv4 --trust-remote-code",
        ))
        .unwrap();
        assert_eq!(a.flavor, Flavor::InferenceX);
        assert_eq!(a.api, Api::Completions);
        assert_eq!(a.max_concurrency, Some(8));
        assert!(a.request_rate.is_infinite());
        assert_eq!(a.metric_percentiles, vec![90.0, 99.0, 99.9]);
        assert_eq!(a.num_warmups, 16);
        assert_eq!(a.base(), "http://0.0.0.0:8000");
        assert_eq!(a.tokenizer_id(), "m");
        assert!(a.dsv4 && a.use_chat_template && a.ignore_eos && a.save_result);
    }

    #[test]
    fn sa_benchs_call_parses_and_its_defaults_differ() {
        let a = Args::parse(&argv(
            "--flavor sa-bench --model m --tokenizer /model --host h --port 9 --backend dynamo \
             --endpoint /v1/completions --disable-tqdm --dataset-name random --num-prompts 10 \
             --random-input-len 8 --random-output-len 4 --random-range-ratio 0.8 \
             --random-num-workers 0 --ignore-eos --request-rate 250 --max-concurrency 1 \
             --trust-remote-code --reuse-http-connections --slow-down-server http://a \
             --slow-down-server http://b",
        ))
        .unwrap();
        assert_eq!(a.flavor, Flavor::SaBench);
        assert_eq!(a.api, Api::Dynamo);
        assert_eq!(a.percentile_metrics, "ttft,tpot,itl");
        assert_eq!(a.metric_percentiles, vec![99.0]);
        assert_eq!(a.slow_down_servers, vec!["http://a", "http://b"]);
        assert_eq!(a.base(), "http://h:9");
        assert_eq!(a.request_rate, 250.0);
    }

    #[test]
    fn equals_form_last_wins_and_nargs_stop_at_the_next_flag() {
        let a = Args::parse(&argv(
            "--model=m --seed 1 --seed=7 --metadata a=1 b=2=3 --goodput ttft:100 tpot:5 \
             --dataset-name=random --metric-percentiles=50,99.9",
        ))
        .unwrap();
        assert_eq!(a.seed, 7);
        assert_eq!(a.metadata, vec!["a=1", "b=2=3"]);
        assert_eq!(
            a.goodput,
            vec![("ttft".to_owned(), 100.0), ("tpot".to_owned(), 5.0)]
        );
        assert_eq!(a.metric_percentiles, vec![50.0, 99.9]);
    }

    #[test]
    fn what_upstream_refuses_is_refused_naming_the_flag() {
        let ds = "--dataset-name random";
        for (argv_s, needle) in [
            (ds.to_owned(), "--model"),
            ("--model m".to_owned(), "Unknown dataset: sharegpt"),
            (
                format!("--model m {ds} --backend dynamo"),
                "invalid choice: 'dynamo'",
            ),
            (format!("--model m {ds} --backend tgi"), "--backend tgi"),
            (
                format!("--model m {ds} --custom-tokenizer x"),
                "add --flavor sa-bench",
            ),
            (
                format!("--flavor sa-bench --model m {ds} --dsv4"),
                "unrecognized arguments: --dsv4",
            ),
            (
                format!("--model m {ds} --num-prom 5"),
                "unrecognized arguments: --num-prom",
            ),
            (
                format!("--flavor sa-bench --model m {ds} --dataset s.json"),
                "--dataset s.json: sa-bench reads it as a ShareGPT file",
            ),
            (format!("--model m {ds} --seed -1"), "--seed -1"),
            (format!("--model m {ds} --seed 4294967296"), "2**32"),
            (format!("--model m {ds} --burstiness 0"), "greater than 0"),
            (
                format!("--model m {ds} --dsv4"),
                "requires --use-chat-template",
            ),
            (format!("--model m {ds} --goodput ttft=5"), "KEY:VALUE"),
            (
                format!("--model m {ds} --goodput itl:5"),
                "invalid metric name itl",
            ),
            (format!("--model m {ds} --goodput ttft:-1"), "non-negative"),
            (format!("--model m {ds} --metadata novalue"), "KEY=VALUE"),
            (
                format!("--model m {ds} --tokenizer-mode slow"),
                "--tokenizer-mode slow",
            ),
            (
                format!("--model m {ds} --max-concurrency x"),
                "invalid int value: 'x'",
            ),
            (
                format!("--model m {ds} --ignore-eos=1"),
                "ignored explicit argument",
            ),
            (format!("--model m {ds} --port"), "expected one argument"),
            (
                format!("--model m {ds} extra"),
                "unrecognized arguments: extra",
            ),
            (format!("--model m {ds} --lora-modules a"), "--lora-modules"),
            (
                format!("--flavor sa-bench --model m {ds} --reuse-http-connections"),
                "Dynamo backend",
            ),
            (format!("--flavor x --model m {ds}"), "invalid choice: 'x'"),
        ] {
            let e = err(&argv_s);
            assert!(e.contains(needle), "{argv_s}: {e}");
        }
    }

    #[test]
    fn help_lists_only_the_flavors_flags() {
        let ix = help(Flavor::InferenceX);
        let sa = help(Flavor::SaBench);
        assert!(ix.contains("--dsv4") && !ix.contains("--custom-tokenizer"));
        assert!(sa.contains("--custom-tokenizer") && !sa.contains("--num-warmups"));
        assert_eq!(
            help_asked(&argv("--flavor sa-bench -h")),
            Some(Flavor::SaBench)
        );
        assert_eq!(help_asked(&argv("--model m")), None);
    }
}
