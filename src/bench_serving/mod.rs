//! `specperf bench-serving`: the drop-in for InferenceX's `benchmark_serving.py` and srt-slurm's
//! sa-bench (shared/spec/bench-serving.md). The callers change one word; the prompts, the load,
//! the result file and the console are upstream's, the timings the server's.
//!
//! ```text
//! argv ─► args (each flavor's flags) ─► tokenizer + template ─► dataset::bench_serving (numpy's
//!   draws, the prompts) ─► bodies ─► load (warmups, arrivals, slots, the client) ─► result (the
//!   file, the console block) ─► exit code
//! ```
//!
//! Nothing is sent but upstream's requests and nothing is written but upstream's file (and
//! sa-bench's measurement window where srtctl asks for it).

mod args;
mod artifacts;
mod load;
pub(crate) mod result;
mod run;
mod side;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Map, Value};
use tokenizer_encoders::{ChatTemplate, Tokenizer};

use crate::client::{
    build_headers, Client, ClientOptions, Clock, ConnectionReuse, HttpVersion, Timeouts,
};
use crate::dataset::bench_serving::{Flavor, PromptTemplate, RandomDataset};
use crate::metrics::numpy;
use crate::stop::{StopReason, Stopper};
use args::{Api, Args, UsageError};
use result::py_float;

/// Why a run ends before its report.
#[derive(Debug, thiserror::Error)]
enum Fail {
    /// Usage or configuration (exit 2).
    #[error("{0}")]
    Usage(String),
    /// Anything else upstream ends with an exception for (exit 1).
    #[error("{0}")]
    Run(String),
}

impl From<UsageError> for Fail {
    fn from(e: UsageError) -> Self {
        Fail::Usage(e.0)
    }
}

/// How `specperf bench-serving` ended; `exit.rs` maps it to the exit code (docs/bench-serving.md).
#[derive(Clone, Debug, PartialEq)]
pub enum BenchServingOutcome {
    /// `--help` was printed.
    Help,
    /// The command line or a file it names cannot be honoured (said on stderr).
    Usage,
    /// Stopped before the report where upstream ends with an exception (said on stderr).
    Failed,
    /// The run reported.
    Finished(Finished),
}

/// What a finished run decides its exit code from.
#[derive(Clone, Debug, PartialEq)]
pub struct Finished {
    pub(crate) flavor: Flavor,
    pub(crate) stopped_by: Option<StopReason>,
    pub(crate) completed: usize,
    pub(crate) num_prompts: usize,
    /// `--save-result` and the file could not be written.
    pub(crate) result_unwritten: bool,
    /// A TPOT statistic of 0 was written (InferenceX's `process_result.py` divides by it).
    pub(crate) zero_tpot: bool,
    /// `--artifact-dir` was given and its files could not all be written.
    pub(crate) artifacts_unwritten: bool,
    /// `--require-gpu-telemetry` and the telemetry task ended without its reads.
    pub(crate) required_telemetry_lost: bool,
}

impl Finished {
    /// `1 - completed / num_prompts`.
    pub(crate) fn failure_rate(&self) -> f64 {
        1.0 - self.completed as f64 / self.num_prompts.max(1) as f64
    }

    /// InferenceX's rule: more than 5 % of the requests failed (sa-bench has none).
    pub(crate) fn over_failure_threshold(&self) -> bool {
        self.flavor == Flavor::InferenceX && self.failure_rate() > 0.05
    }
}

/// Runs `specperf bench-serving ARGV`; `stop` is the run's one cancellation path (signals, the
/// deadline).
pub async fn bench_serving(argv: &[String], stop: Stopper) -> BenchServingOutcome {
    if let Some(flavor) = args::help_asked(argv) {
        print!("{}", args::help(flavor));
        return BenchServingOutcome::Help;
    }
    let args = match Args::parse(argv) {
        Ok(a) => a,
        Err(e) => {
            eprintln!(
                "usage: specperf bench-serving [--flavor inferencex|sa-bench] --model MODEL \
                 [FLAGS] (see --help)\nspecperf bench-serving: error: {e}"
            );
            return BenchServingOutcome::Usage;
        }
    };
    // The run's peak resident size is one of the figures it is compared by.
    crate::heap::return_promptly();
    match run(&args, argv, &stop).await {
        Ok(finished) => BenchServingOutcome::Finished(finished),
        Err(e) => {
            eprintln!("specperf bench-serving: error: {e}");
            match e {
                Fail::Usage(_) => BenchServingOutcome::Usage,
                Fail::Run(_) => BenchServingOutcome::Failed,
            }
        }
    }
}

/// The run, phase by phase (`run.rs`).
async fn run(a: &Args, argv: &[String], stop: &Stopper) -> Result<Finished, Fail> {
    let mut prepared = run::prepare(a).await?;
    run::arm_deadline(a, stop);
    let clock = Clock::new();
    let epoch_ns = crate::telemetry::unix_ns();
    run::before_main(a, &prepared, &clock, stop).await?;
    let gpu = prepared.gpu.take();
    let measured = run::main_phase(a, &prepared, gpu, &clock, stop).await;
    Ok(run::report(a, argv, &prepared, measured, epoch_ns, stop))
}

/// The client: HTTP/1.1, a new connection per request unless sa-bench's pool is asked for,
/// `Authorization: Bearer $OPENAI_API_KEY` when set, every phase of a request bounded.
fn build_client(a: &Args) -> Result<Client, Fail> {
    let key = std::env::var("OPENAI_API_KEY")
        .ok()
        .filter(|k| !k.is_empty());
    let headers = build_headers(&[], key.as_deref())
        .map_err(|e| Fail::Usage(format!("OPENAI_API_KEY: {e}")))?;
    Client::new(ClientOptions {
        http: HttpVersion::Http1,
        reuse: if a.reuse_http_connections {
            ConnectionReuse::Pooled
        } else {
            ConnectionReuse::Never
        },
        rate_limit_retries: 0,
        timeouts: Timeouts {
            connect: Duration::from_secs(30).min(Duration::from_secs_f64(a.request_timeout)),
            first_token: Duration::from_secs_f64(a.ttft_timeout),
            idle: Duration::from_secs_f64(a.idle_timeout),
            total: Duration::from_secs_f64(a.request_timeout),
        },
        headers,
        origin: None,
        insecure: false,
        ca_file: None,
        max_event_bytes: 4 << 20,
        max_body_bytes: 4 << 20,
    })
    .map_err(|e| Fail::Run(e.to_string()))
}

/// The tokenizer of `--tokenizer` (else `--model`): a directory or file as given, else a Hub id
/// in the offline cache; its `tokenizer.json` is required.
fn tokenizer(a: &Args) -> Result<(Tokenizer, PathBuf), Fail> {
    let id = a.tokenizer_id();
    let env = |k: &str| std::env::var(k).ok();
    let path = crate::config::hub::tokenizer(Path::new(id), &env)
        .map_err(|e| Fail::Usage(format!("{e} (bench-serving never downloads)")))?;
    let file = if path.is_dir() {
        path.join("tokenizer.json")
    } else {
        path.clone()
    };
    if !file.is_file() {
        return Err(Fail::Usage(format!(
            "tokenizer {id}: {} is missing; the drop-in reads tokenizer.json only (tokenizers \
             that need remote code are not supported)",
            file.display()
        )));
    }
    // A directory loads as transformers loads it: with the tokens its tokenizer_config.json
    // names.
    let tok = Tokenizer::from_path(&path)
        .map_err(|e| Fail::Usage(format!("tokenizer {}: {e}", file.display())))?;
    let dir = if path.is_dir() {
        path
    } else {
        path.parent().map(Path::to_path_buf).unwrap_or_default()
    };
    Ok((tok, dir))
}

const SA_VLLM_DSV4: &str = "sa_bench_tokenizers.vllm_deepseek_v4.VLLMDeepseekV4Tokenizer";
const SA_SGLANG_DSV4: &str = "sa_bench_tokenizers.sglang_deepseek_v4.SGLangDeepseekV4Tokenizer";

/// The chat template of spec §3.
fn template(a: &Args, dir: &Path) -> Result<PromptTemplate, Fail> {
    let jinja = || {
        ChatTemplate::from_path(dir).map(PromptTemplate::Jinja).map_err(|e| {
            let advice = match a.flavor {
                Flavor::InferenceX => "pass --dsv4 for DeepSeek-V4, or leave out --use-chat-template",
                Flavor::SaBench => "for DeepSeek-V4 pass --custom-tokenizer with one of the sa_bench_tokenizers adapters, or leave out --use-chat-template",
            };
            Fail::Usage(format!(
                "--use-chat-template: the tokenizer in {} has no chat template ({e}); {advice}",
                dir.display()
            ))
        })
    };
    let chat = a.use_chat_template;
    match a.flavor {
        Flavor::InferenceX if !chat => Ok(PromptTemplate::None),
        Flavor::InferenceX if a.dsv4 || a.tokenizer_mode == "deepseek_v4" => {
            Ok(PromptTemplate::Dsv4Thinking)
        }
        Flavor::InferenceX => jinja(),
        Flavor::SaBench => match a.custom_tokenizer.as_deref() {
            None if chat => jinja(),
            Some(SA_VLLM_DSV4) if chat => Ok(PromptTemplate::Dsv4Thinking),
            Some(SA_SGLANG_DSV4) if chat => {
                let var = |names: [&str; 2]| {
                    std::env::var(names[0])
                        .or_else(|_| std::env::var(names[1]))
                        .unwrap_or_default()
                };
                let thinking = var(["SGLANG_DEFAULT_THINKING", "SGLANG_ENABLE_THINKING"]);
                let effort = var(["SGLANG_DSV4_REASONING_EFFORT", "SGLANG_REASONING_EFFORT"]);
                let effort = effort.trim();
                Ok(PromptTemplate::SglangDsv4 {
                    thinking: ["1", "true", "yes", "on"]
                        .contains(&thinking.trim().to_lowercase().as_str()),
                    reasoning_effort: ["max", "high"].contains(&effort).then(|| effort.to_owned()),
                })
            }
            Some("glm_moe_dsa") if chat => Err(Fail::Usage(
                "--custom-tokenizer glm_moe_dsa has no chat template; leave out \
                 --use-chat-template"
                    .into(),
            )),
            None | Some(SA_VLLM_DSV4 | SA_SGLANG_DSV4 | "glm_moe_dsa") => Ok(PromptTemplate::None),
            Some(other) => Err(Fail::Usage(format!(
                "--custom-tokenizer {other}: not one the drop-in knows (no Python is run); use \
                 {SA_VLLM_DSV4}, {SA_SGLANG_DSV4} or glm_moe_dsa"
            ))),
        },
    }
}

/// Python's `os.cpu_count()`: the CPUs online, not limited by affinity or quota.
#[allow(unsafe_code)]
fn cpu_count() -> usize {
    #[cfg(unix)]
    {
        // SAFETY: sysconf has no preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        if n > 0 {
            return n as usize;
        }
    }
    1
}

/// IX's statistics block after the prompts are built.
fn length_statistics(d: &RandomDataset) -> String {
    let ins: Vec<f64> = d.prompts.iter().map(|p| p.prompt_len as f64).collect();
    let outs: Vec<f64> = d.prompts.iter().map(|p| f64::from(p.output_len)).collect();
    let mism: Vec<f64> = d
        .prompts
        .iter()
        .map(|p| p.prompt_len as f64 - p.target_len as f64)
        .collect();
    let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min) as i64;
    let max = |v: &[f64]| v.iter().copied().fold(f64::NEG_INFINITY, f64::max) as i64;
    let header = format!(
        "{}  Input/Output Length Statistics  {}",
        "-".repeat(19),
        "-".repeat(19)
    );
    let mut o = format!("{header}\n");
    o += &format!(
        " input_lens : min={:<4}  max={:<4}  mean={:<7.2}  avg_token_mismatch={:<5.2} \n",
        min(&ins),
        max(&ins),
        numpy::mean(&ins),
        numpy::mean(&mism)
    );
    o += &format!(
        " output_lens: min={:<4}  max={:<4}  mean={:<7.2} \n",
        min(&outs),
        max(&outs),
        numpy::mean(&outs)
    );
    o += &format!("{} \n\n", "-".repeat(header.chars().count()));
    o
}

/// What every request body shares (spec §7).
#[derive(Clone)]
struct BodySpec {
    api: Api,
    flavor: Flavor,
    model: String,
    best_of: u32,
    logprobs: Option<i64>,
    ignore_eos: bool,
    /// These settings' bodies cut around the prompt and `max_tokens`.
    parts: Option<Arc<BodyParts>>,
}

impl BodySpec {
    fn new(a: &Args) -> BodySpec {
        let mut spec = BodySpec {
            api: a.api,
            flavor: a.flavor,
            model: a.body_model().to_owned(),
            best_of: a.best_of,
            logprobs: a.logprobs,
            ignore_eos: a.ignore_eos,
            parts: None,
        };
        spec.parts = BodyParts::of(&spec).map(Arc::new);
        spec
    }

    /// The body of one request, with Python's `json.dumps` bytes (aiohttp's `json=`); `extra`
    /// keys go last (the profiler's).
    fn body(&self, prompt: &str, max_tokens: u32, extra: &[(&str, Value)]) -> Bytes {
        if extra.is_empty() {
            if let Some(parts) = &self.parts {
                return parts.body(prompt, max_tokens);
            }
        }
        self.dumped(prompt, max_tokens, extra)
    }

    /// [`BodySpec::body`] built as a JSON value and dumped.
    fn dumped(&self, prompt: &str, max_tokens: u32, extra: &[(&str, Value)]) -> Bytes {
        let mut m = Map::new();
        m.insert("model".into(), json!(self.model));
        match self.api {
            Api::Completions | Api::Dynamo => {
                m.insert("prompt".into(), json!(prompt));
                m.insert("temperature".into(), json!(0.0));
                m.insert("best_of".into(), json!(self.best_of));
                m.insert("max_tokens".into(), json!(max_tokens));
                m.insert("logprobs".into(), json!(self.logprobs));
            }
            Api::Chat => {
                let content = match self.flavor {
                    Flavor::InferenceX => json!(prompt),
                    Flavor::SaBench => json!([{"type": "text", "text": prompt}]),
                };
                m.insert(
                    "messages".into(),
                    json!([{"role": "user", "content": content}]),
                );
                m.insert("temperature".into(), json!(0.0));
                m.insert("max_completion_tokens".into(), json!(max_tokens));
            }
        }
        m.insert("stream".into(), json!(true));
        m.insert("stream_options".into(), json!({"include_usage": true}));
        if self.ignore_eos {
            m.insert("ignore_eos".into(), json!(true));
        }
        for (k, v) in extra {
            m.insert((*k).to_owned(), v.clone());
        }
        let text = tokenizer_encoders::python_json_dumps(&Value::Object(m), true)
            .expect("strings and numbers only");
        Bytes::from(text)
    }
}

/// A body's bytes around its two per-request values, cut from one dumped with markers in their
/// place: a request's body is the parts joined with its prompt escaped and its `max_tokens`, the
/// same bytes as dumping its own JSON value, without building one (a value, a copy of the prompt
/// and a walk of the tree per request).
#[derive(Clone, Debug)]
struct BodyParts {
    /// Up to the prompt's opening quote (excluded).
    head: String,
    /// From after the prompt's closing quote to the `max_tokens` digits.
    mid: String,
    /// After the digits.
    tail: String,
}

impl BodyParts {
    const PROMPT: &'static str = "specperf-prompt-marker";
    const MAX_TOKENS: u32 = 3_141_592_653;

    /// `None` where the markers do not each appear once, in order (a model name holding one):
    /// then every body is dumped whole.
    fn of(spec: &BodySpec) -> Option<BodyParts> {
        let whole = spec.dumped(Self::PROMPT, Self::MAX_TOKENS, &[]);
        let whole = std::str::from_utf8(&whole).ok()?;
        let quoted = format!("\"{}\"", Self::PROMPT);
        let digits = Self::MAX_TOKENS.to_string();
        let p = whole.find(&quoted)?;
        let d = whole.find(&digits)?;
        let once = whole.matches(&quoted).count() == 1 && whole.matches(&digits).count() == 1;
        (once && p + quoted.len() <= d).then(|| BodyParts {
            head: whole[..p].to_owned(),
            mid: whole[p + quoted.len()..d].to_owned(),
            tail: whole[d + digits.len()..].to_owned(),
        })
    }

    fn body(&self, prompt: &str, max_tokens: u32) -> Bytes {
        let mut out = String::with_capacity(
            self.head.len() + self.mid.len() + self.tail.len() + prompt.len() + 16,
        );
        out.push_str(&self.head);
        tokenizer_encoders::python_json_str_into(&mut out, prompt, true);
        out.push_str(&self.mid);
        // Writing to a String cannot fail.
        let _ = write!(out, "{max_tokens}");
        out.push_str(&self.tail);
        Bytes::from(out)
    }
}

fn uri(url: &str, flag: &str) -> Result<http::Uri, Fail> {
    // `0.0.0.0` as a destination is this machine, as the kernel treats it.
    let url = url.replace("://0.0.0.0", "://127.0.0.1");
    url.parse::<http::Uri>()
        .ok()
        .filter(|u| u.scheme().is_some() && u.authority().is_some())
        .ok_or_else(|| Fail::Usage(format!("{flag}: {url} is not an http(s) URL")))
}

/// `--result-dir/--result-filename`, or upstream's default name.
fn result_path(a: &Args, date: &str) -> PathBuf {
    let name = a.result_filename.clone().unwrap_or_else(|| {
        let base_model = a.model.rsplit('/').next().unwrap_or(&a.model);
        let conc = a
            .max_concurrency
            .map(|c| format!("-concurrency{c}"))
            .unwrap_or_default();
        format!(
            "{}-{}qps{conc}-{base_model}-{date}.json",
            a.backend,
            py_float(a.request_rate)
        )
    });
    match &a.result_dir {
        Some(d) => d.join(name),
        None => PathBuf::from(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body joined from its parts is the dumped body, byte for byte, for every API and flavor,
    /// with prompts that escape (quotes, controls, non-ASCII, astral) and a model name that holds
    /// a marker (no parts then).
    #[test]
    fn bodies_from_parts_are_the_dumped_bodies() {
        let prompts = [
            "",
            "plain",
            "q\"uo\\te\n\t\u{1}",
            "caf\u{e9} \u{4e2d}\u{6587} \u{1f600}",
        ];
        for api in [Api::Completions, Api::Dynamo, Api::Chat] {
            for flavor in [Flavor::InferenceX, Flavor::SaBench] {
                for (model, ignore_eos, logprobs) in [
                    ("deepseek-ai/DeepSeek-V4-Pro", true, None),
                    ("m\u{e9}", false, Some(3)),
                    (BodyParts::PROMPT, true, None),
                ] {
                    let mut spec = BodySpec {
                        api,
                        flavor,
                        model: model.to_owned(),
                        best_of: 1,
                        logprobs,
                        ignore_eos,
                        parts: None,
                    };
                    spec.parts = BodyParts::of(&spec).map(Arc::new);
                    assert_eq!(spec.parts.is_some(), model != BodyParts::PROMPT);
                    for prompt in prompts {
                        for max_tokens in [0, 1, 64, 1024, u32::MAX] {
                            assert_eq!(
                                spec.body(prompt, max_tokens, &[]),
                                spec.dumped(prompt, max_tokens, &[]),
                                "{api:?} {flavor:?} {model:?} {prompt:?} {max_tokens}"
                            );
                        }
                    }
                }
            }
        }
    }

    fn args(s: &str) -> Args {
        let v: Vec<String> = s.split_whitespace().map(str::to_owned).collect();
        Args::parse(&v).unwrap()
    }

    /// Spec §7: each backend's keys in upstream's order, as `json.dumps` writes them.
    #[test]
    fn bodies_are_upstreams_bytes() {
        let a = args("--model m --served-model-name s --dataset-name random --ignore-eos");
        let b = BodySpec::new(&a).body("héllo", 7, &[]);
        assert_eq!(
            std::str::from_utf8(&b).unwrap(),
            r#"{"model": "s", "prompt": "h\u00e9llo", "temperature": 0.0, "best_of": 1, "max_tokens": 7, "logprobs": null, "stream": true, "stream_options": {"include_usage": true}, "ignore_eos": true}"#
        );
        let a = args(
            "--model m --backend openai-chat --endpoint /v1/chat/completions --dataset-name random",
        );
        let b = BodySpec::new(&a).body("hi", 3, &[]);
        assert_eq!(
            std::str::from_utf8(&b).unwrap(),
            r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.0, "max_completion_tokens": 3, "stream": true, "stream_options": {"include_usage": true}}"#
        );
        let a = args("--flavor sa-bench --model m --backend openai-chat --dataset-name random");
        let b = BodySpec::new(&a).body("hi", 3, &[]);
        assert!(std::str::from_utf8(&b)
            .unwrap()
            .contains(r#""content": [{"type": "text", "text": "hi"}]"#));
    }

    #[test]
    fn the_default_result_name_is_upstreams() {
        let a =
            args("--model org/Model-1 --dataset-name random --max-concurrency 8 --request-rate 20");
        assert_eq!(
            result_path(&a, "20261203-120000"),
            PathBuf::from("vllm-20.0qps-concurrency8-Model-1-20261203-120000.json")
        );
        let a = args("--model m --dataset-name random --result-dir d --result-filename f.json");
        assert_eq!(result_path(&a, "x"), PathBuf::from("d/f.json"));
    }

    #[test]
    fn os_cpu_count_is_at_least_one() {
        assert!(cpu_count() >= 1);
    }
}
