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
mod load;
pub(crate) mod result;

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Map, Value};
use tokenizer_encoders::{ChatTemplate, Tokenizer};

use http::HeaderMap;

use crate::client::{
    build_headers, Client, ClientOptions, Clock, ConnectionReuse, HttpVersion, Prepared, Timeouts,
};
use crate::dataset::bench_serving::{
    random_dataset, Flavor, PromptTemplate, RandomDataset, RandomSettings,
};
use crate::exit;
use crate::metrics::numpy;
use crate::record::RequestRecord;
use crate::scrape::{ScrapeReport, ScrapeSettings, Scraper};
use crate::stop::{StopReason, Stopper};
use args::{Api, Args, UsageError};
use load::Load;
use result::{py_float, Goodput, Header, Outcome, Selection};

/// Why a run ends early, and its exit code.
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

/// Runs `specperf bench-serving ARGV` and returns its exit code; `stop` is the run's one
/// cancellation path (signals, the deadline).
pub async fn bench_serving(argv: &[String], stop: Stopper) -> i32 {
    if let Some(flavor) = args::help_asked(argv) {
        print!("{}", args::help(flavor));
        return exit::OK;
    }
    let args = match Args::parse(argv) {
        Ok(a) => a,
        Err(e) => {
            eprintln!(
                "usage: specperf bench-serving [--flavor inferencex|sa-bench] --model MODEL \
                 [FLAGS] (see --help)\nspecperf bench-serving: error: {e}"
            );
            return exit::USAGE;
        }
    };
    match run(&args, &stop).await {
        Ok(code) => code,
        Err(Fail::Usage(m)) => {
            eprintln!("specperf bench-serving: error: {m}");
            exit::USAGE
        }
        Err(Fail::Run(m)) => {
            eprintln!("specperf bench-serving: error: {m}");
            exit::FAILED
        }
    }
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
    let tok = Tokenizer::from_path(&file)
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
}

impl BodySpec {
    fn new(a: &Args) -> BodySpec {
        BodySpec {
            api: a.api,
            flavor: a.flavor,
            model: a.body_model().to_owned(),
            best_of: a.best_of,
            logprobs: a.logprobs,
            ignore_eos: a.ignore_eos,
        }
    }

    /// The body of one request, with Python's `json.dumps` bytes (aiohttp's `json=`); `extra`
    /// keys go last (the profiler's).
    fn body(&self, prompt: &str, max_tokens: u32, extra: &[(&str, Value)]) -> Bytes {
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

fn uri(url: &str, flag: &str) -> Result<http::Uri, Fail> {
    // `0.0.0.0` as a destination is this machine, as the kernel treats it.
    let url = url.replace("://0.0.0.0", "://127.0.0.1");
    url.parse::<http::Uri>()
        .ok()
        .filter(|u| u.scheme().is_some() && u.authority().is_some())
        .ok_or_else(|| Fail::Usage(format!("{flag}: {url} is not an http(s) URL")))
}

/// The run, from the parsed argv to the exit code.
async fn run(a: &Args, stop: &Stopper) -> Result<i32, Fail> {
    let api_url = format!("{}{}", a.base(), a.endpoint);
    let ok_endpoint = match a.api {
        Api::Chat => api_url.ends_with("chat/completions"),
        _ => api_url.ends_with("completions") || api_url.ends_with("profile"),
    };
    if !ok_endpoint {
        let need = if a.api == Api::Chat {
            "'chat/completions'"
        } else {
            "'completions' or 'profile'"
        };
        return Err(Fail::Usage(format!(
            "--endpoint {}: the {} backend's URL must end with {need} (got {api_url})",
            a.endpoint, a.backend
        )));
    }
    let url = uri(&api_url, "--base-url/--endpoint")?;
    let (tok, dir) = tokenizer(a)?;
    let template = template(a, &dir)?;
    if std::env::var_os("SAVE_TO_PYTORCH_BENCHMARK_FORMAT").is_some() {
        eprintln!(
            "WARNING: SAVE_TO_PYTORCH_BENCHMARK_FORMAT is set; the drop-in writes no .pytorch.json"
        );
    }

    let workers = match (a.flavor, a.random_num_workers) {
        (Flavor::InferenceX, 0) => cpu_count().min(8),
        (_, w) => w,
    };
    let settings = RandomSettings {
        seed: a.seed,
        input_len: a.random_input_len,
        output_len: a.random_output_len,
        range_ratio: a.random_range_ratio,
        prefix_len: a.random_prefix_len,
        num_prompts: a.num_prompts,
        workers,
    };
    if a.num_prompts == 0 {
        return Err(Fail::Usage(
            "--num-prompts 0: give at least one prompt".into(),
        ));
    }
    let started = std::time::Instant::now();
    let mut dataset = {
        let (flavor, template, settings) = (a.flavor, template.clone(), settings.clone());
        let tok2 = tok.clone();
        tokio::task::spawn_blocking(move || random_dataset(flavor, &tok2, &template, &settings))
            .await
            .map_err(|e| Fail::Run(format!("prompt generation: {e}")))?
            .map_err(|e| Fail::Usage(e.to_string()))?
    };
    if a.flavor == Flavor::InferenceX {
        if dataset.chunks > 0 {
            println!(
                "Generating {} prompts using {} worker processes...",
                a.num_prompts, dataset.chunks
            );
            println!(
                "Prompt generation completed in {:.1}s",
                started.elapsed().as_secs_f64()
            );
        }
        print!("{}", length_statistics(&dataset));
    }

    let spec = BodySpec::new(a);
    let prompts = std::sync::Arc::new(std::mem::take(&mut dataset.prompts));
    let prompt_lens: Vec<usize> = prompts.iter().map(|p| p.prompt_len).collect();
    let body_of: load::BodyOf = {
        let (spec, prompts) = (spec.clone(), prompts.clone());
        std::sync::Arc::new(move |i| spec.body(&prompts[i].text, prompts[i].output_len, &[]))
    };
    let gaps = load::gaps(
        &mut dataset.global,
        a.num_prompts,
        a.request_rate,
        a.burstiness,
    );

    let in_flight = a.max_concurrency.unwrap_or(a.num_prompts) as u64;
    crate::fdlimit::ensure(Some(in_flight), 1).map_err(|e| Fail::Run(e.to_string()))?;
    let key = std::env::var("OPENAI_API_KEY")
        .ok()
        .filter(|k| !k.is_empty());
    let headers = build_headers(&[], key.as_deref())
        .map_err(|e| Fail::Usage(format!("OPENAI_API_KEY: {e}")))?;
    let client = Client::new(ClientOptions {
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
    .map_err(|e| Fail::Run(e.to_string()))?;
    let load = Load {
        client,
        url,
        n: prompts.len(),
        body_of,
        gaps,
        max_concurrency: a.max_concurrency,
        capture_text: a.save_detailed || a.flavor == Flavor::SaBench,
        progress: !a.disable_tqdm,
    };
    if let Some(secs) = a.deadline {
        let s = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs_f64(secs)).await;
            s.stop(StopReason::Deadline);
        });
    }
    let clock = Clock::new();

    println!("Starting initial single prompt test run...");
    let first = (load.body_of)(0);
    match a.flavor {
        Flavor::InferenceX if a.num_warmups > 0 => {
            println!("Warming up with {} requests...", a.num_warmups);
            load.warmup(a.num_warmups, &clock, stop).await;
            println!("Warmup completed.");
        }
        Flavor::InferenceX => {}
        Flavor::SaBench => {
            let rec = load.once(&first, &clock, stop).await;
            let o = load::outcome(
                a.api,
                0,
                Some(&load::Sent {
                    start_ns: rec.sent_ns,
                    record: rec,
                }),
                None,
            );
            if !o.success {
                return Err(Fail::Run(format!(
                    "Initial test run failed - Please make sure benchmark arguments are \
                     correctly specified. Error: {}",
                    o.error
                )));
            }
            println!("Initial test run completed. Starting main benchmark run...");
        }
    }
    let base = a.base().replace("://0.0.0.0", "://127.0.0.1");
    let p0 = &prompts[0];
    if a.profile {
        println!("Starting profiler...");
        let extra: Vec<(&str, Value)> = match a.flavor {
            Flavor::InferenceX => vec![
                ("num_steps", json!(1)),
                ("merge_profiles", json!(true)),
                ("profile_by_stage", json!(true)),
            ],
            Flavor::SaBench => Vec::new(),
        };
        let b = spec.body(&p0.text, p0.output_len, &extra);
        if profiler(&load, &base, "/start_profile", b, &clock, stop).await {
            println!("Profiler started");
        }
    }
    let distribution = if a.burstiness == 1.0 {
        "Poisson process"
    } else {
        "Gamma distribution"
    };
    println!("Traffic request rate: {}", py_float(a.request_rate));
    println!(
        "Burstiness factor: {} ({distribution})",
        py_float(a.burstiness)
    );
    match a.max_concurrency {
        Some(c) => println!("Maximum request concurrency: {c}"),
        None => println!("Maximum request concurrency: None"),
    }
    let slow = SlowDown::new(a);
    if let Some(sd) = &slow {
        let listed: Vec<String> = sd
            .servers
            .iter()
            .map(|b| format!("{b}/slow_down"))
            .collect();
        println!(
            "Enabling slow_down (forward_sleep_time={}s) on {}; will auto-disable after {}s.",
            py_float(a.slow_down_sleep_time),
            listed.join(", "),
            py_float(a.slow_down_wait_time)
        );
        sd.post(&load, Some(a.slow_down_sleep_time), &clock, stop)
            .await;
    }
    if a.flavor == Flavor::InferenceX {
        println!("Starting main benchmark run...");
    }
    let scraper = match a.server_metrics.is_empty() {
        true => None,
        false => {
            let settings = ScrapeSettings {
                endpoints: a.server_metrics.clone(),
                interval: Duration::from_secs(1),
                timeout: Duration::from_secs(5),
                settle: Duration::from_secs_f64(a.server_metrics_settle),
                require_stable: false,
                stable_max: Duration::from_secs(30),
                acceptance: Default::default(),
                save_dir: None,
                slice: Duration::from_secs(1),
            };
            let s = Scraper::baseline(load.client.clone(), settings, stop.token()).await;
            Some(s.spawn(stop.token().clone(), None))
        }
    };
    let window_file = MeasurementWindow::create(a);
    let lift = async {
        let wait = Duration::from_secs_f64(a.slow_down_wait_time.max(0.0));
        if let Some(sd) = &slow {
            tokio::time::sleep(wait).await;
            println!(
                "slow_down auto-disabled after {}s ({} server(s)).",
                py_float(a.slow_down_wait_time),
                sd.servers.len()
            );
            sd.post(&load, None, &clock, stop).await;
        }
    };
    let on_open = |start: f64| {
        if let Some(w) = &window_file {
            w.write("running", start, None, None, None);
        }
    };
    let main = load.run(&clock, stop, &on_open);
    tokio::pin!(main);
    tokio::pin!(lift);
    let mut lifted = false;
    let phase = loop {
        tokio::select! {
            p = &mut main => break p,
            () = &mut lift, if !lifted => lifted = true,
        }
    };
    // Still slowed down at the end: lift it now (upstream cancels its timer and posts null).
    if let Some(sd) = &slow {
        if phase.window.duration < a.slow_down_wait_time {
            sd.post(&load, None, &clock, stop).await;
        }
    }
    if a.profile {
        println!("Stopping profiler...");
        // Upstream's stop request: `model` is --model, and no ignore_eos.
        let stop_spec = BodySpec {
            model: a.model.clone(),
            ignore_eos: false,
            ..spec.clone()
        };
        let b = stop_spec.body(&p0.text, p0.output_len, &[]);
        if profiler(&load, &base, "/stop_profile", b, &clock, stop).await {
            println!("Profiler stopped");
        }
    }

    let extras = match scraper {
        Some(task) => {
            let last = phase.last_response.unwrap_or_else(std::time::Instant::now);
            spec_decode_keys(task.finish(last).await)
        }
        None => Vec::new(),
    };
    let sa_count = |text: &str| tok.ids(text).map_or(0, |ids| ids.len() as u64);
    let count: Option<&dyn Fn(&str) -> u64> = match a.flavor {
        Flavor::SaBench => Some(&sa_count),
        Flavor::InferenceX => None,
    };
    let outcomes: Vec<Outcome> = phase
        .sent
        .iter()
        .zip(&prompt_lens)
        .map(|(s, &len)| load::outcome(a.api, len, s.as_ref(), count))
        .collect();
    let selection = Selection::parse(&a.percentile_metrics, &a.metric_percentiles);
    let goodput = (!a.goodput.is_empty()).then(|| {
        let get = |k: &str| a.goodput.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
        Goodput {
            ttft_ms: get("ttft"),
            tpot_ms: get("tpot"),
            e2el_ms: get("e2el"),
        }
    });
    let duration = phase.window.duration;
    let mut metrics = result::calculate(&outcomes, duration, &selection, goodput.as_ref());
    if a.flavor == Flavor::SaBench {
        metrics.peak_output_tokens_per_s = Some(load::peak_output_tokens_per_s(
            &outcomes,
            &phase.sent,
            &sa_count,
        ));
    }
    print!("{}", result::console_block(a.flavor, duration, &metrics));
    if !a.server_metrics.is_empty() {
        let al = extras
            .iter()
            .find(|(k, _)| k == "spec_decode_acceptance_length")
            .and_then(|(_, v)| v.as_f64());
        match al {
            Some(al) => println!("Acceptance length (server counters): {al:.4}"),
            None => println!(
                "Acceptance length (server counters): n/a (no speculative counters moved in the \
                 window)"
            ),
        }
    }

    let mut code = exit::OK;
    if a.save_result {
        let header = Header {
            date: crate::timefmt::local_compact_now(),
            backend: a.backend.clone(),
            model_id: a.model.clone(),
            tokenizer_id: a.tokenizer_id().to_owned(),
            best_of: a.best_of,
            num_prompts: a.num_prompts,
            metadata: a.metadata.clone(),
            request_rate: a.request_rate,
            burstiness: a.burstiness,
            max_concurrency: a.max_concurrency,
            reuse_http_connections: a.reuse_http_connections,
        };
        let text = result::result_json(
            a.flavor,
            &header,
            &phase.window,
            &metrics,
            &outcomes,
            a.save_detailed,
            &extras,
        );
        let path = result_path(a, &header.date);
        let written = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| crate::fsutil::write_atomic(&path, text.as_bytes()));
        let w = &phase.window;
        match written {
            Ok(()) => {
                if let Some(f) = &window_file {
                    f.write(
                        "completed",
                        w.start_unix,
                        Some(w.end_unix),
                        Some(w.duration),
                        None,
                    );
                }
            }
            Err(e) => {
                let reason = format!("cannot write the result {}: {e}", path.display());
                if let Some(f) = &window_file {
                    f.write(
                        "failed",
                        w.start_unix,
                        Some(w.end_unix),
                        Some(w.duration),
                        Some(&reason),
                    );
                }
                eprintln!("specperf bench-serving: error: {reason}");
                code = exit::FAILED;
            }
        }
        if code == exit::OK && metrics.completed > 0 {
            if let Some((_, s)) = metrics
                .stats
                .iter()
                .find(|(m, _)| *m == result::Metric::Tpot)
            {
                let zero = s.mean == 0.0
                    || s.median == 0.0
                    || s.percentiles.iter().any(|&(_, v)| v == 0.0);
                if zero {
                    eprintln!(
                        "specperf bench-serving: error: a TPOT statistic of 0 was written to {} \
                         (no request produced more than one token); InferenceX's \
                         process_result.py divides by it",
                        path.display()
                    );
                    code = exit::FAILED;
                }
            }
        }
    }
    if let Some(reason) = stop.reason() {
        eprintln!(
            "specperf bench-serving: stopped ({}); the result covers the requests that ended",
            reason.as_str()
        );
        return Ok(match reason {
            StopReason::Deadline => exit::DEADLINE,
            StopReason::Interrupted => exit::SIGINT,
            StopReason::Terminated => exit::SIGTERM,
            _ => exit::FAILED,
        });
    }
    if a.flavor == Flavor::InferenceX && code == exit::OK {
        let rate = 1.0 - metrics.completed as f64 / a.num_prompts as f64;
        if rate > 0.05 {
            eprintln!(
                "FAIL: request failure rate {:.1}% exceeds 5% threshold ({}/{} completed)",
                rate * 100.0,
                metrics.completed,
                a.num_prompts
            );
            code = exit::FAILED;
        }
    }
    Ok(code)
}

/// `--server-metrics`: the window's acceptance under `vllm bench serve`'s keys (rate in percent,
/// per-position rates as fractions), appended after upstream's keys; none when the counters did
/// not move.
fn spec_decode_keys(report: Option<ScrapeReport>) -> Vec<(String, Value)> {
    let Some(r) = report else {
        eprintln!("WARNING: --server-metrics: the scrape task ended without a report");
        return Vec::new();
    };
    for e in &r.endpoints {
        for status in [&e.before, &e.after] {
            if !status.is_ok() {
                eprintln!("WARNING: --server-metrics {}: {}", e.url, status.as_str());
            }
        }
    }
    let n = &r.acceptance.numbers;
    let Some(al) = n.acceptance_length else {
        if let Some(why) = &r.acceptance.reason {
            eprintln!("WARNING: --server-metrics: no acceptance length: {why}");
        }
        return Vec::new();
    };
    let mut v = vec![
        (
            "spec_decode_acceptance_rate".to_owned(),
            json!(n.acceptance_rate.map(|r| r * 100.0)),
        ),
        ("spec_decode_acceptance_length".to_owned(), json!(al)),
        (
            "spec_decode_num_drafts".to_owned(),
            json!(n.drafts.round() as u64),
        ),
    ];
    if let Some(d) = n.draft_tokens {
        v.push((
            "spec_decode_draft_tokens".to_owned(),
            json!(d.round() as u64),
        ));
    }
    v.push((
        "spec_decode_accepted_tokens".to_owned(),
        json!(n.accepted_tokens.round() as u64),
    ));
    if !n.per_position_acceptance.is_empty() {
        v.push((
            "spec_decode_per_position_acceptance_rates".to_owned(),
            json!(n.per_position_acceptance),
        ));
    }
    v
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

/// POSTs `body` to `{base}{path}` with the run's client, outside the measured phase.
async fn side_post(
    load: &Load,
    url: http::Uri,
    body: Bytes,
    streaming: bool,
    extra: HeaderMap,
    clock: &Clock,
    stop: &Stopper,
) -> RequestRecord {
    let req = Prepared {
        uri: url,
        body,
        streaming,
        capture_text: false,
        headers: extra,
    };
    let rec = RequestRecord::started(0, 0, 0, 0);
    load.client.execute(&req, rec, clock, stop.token()).await
}

/// A profiler request (`/start_profile`, `/stop_profile`), sent as a completion is; true when it
/// answered with a token chunk (upstream prints "started" then).
async fn profiler(
    load: &Load,
    base: &str,
    path: &str,
    body: Bytes,
    clock: &Clock,
    stop: &Stopper,
) -> bool {
    let Ok(url) = uri(
        &format!("{}{path}", base.trim_end_matches('/')),
        "--base-url",
    ) else {
        return false;
    };
    side_post(load, url, body, true, HeaderMap::new(), clock, stop)
        .await
        .first_token_ns
        .is_some()
}

/// sa-bench's `--slow-down-server`: POST `forward_sleep_time` to every server (SGLang frontends
/// only), lifted after `--slow-down-wait-time` or at the end.
struct SlowDown {
    servers: Vec<String>,
    /// `Authorization` when `OPENAI_API_KEY` is unset: the raw `$API_KEY`.
    raw_key: Option<String>,
}

impl SlowDown {
    fn new(a: &Args) -> Option<SlowDown> {
        let servers: Vec<String> = a
            .slow_down_servers
            .iter()
            .map(|s| s.trim().trim_end_matches('/').to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        if servers.is_empty() {
            return None;
        }
        if std::env::var("SRTCTL_FRONTEND_TYPE").as_deref() != Ok("sglang") {
            println!(
                "Warning: --slow-down-server ignored (SRTCTL_FRONTEND_TYPE is not sglang; \
                 slow_down applies to SGLang worker HTTP /slow_down only)."
            );
            return None;
        }
        let bearer = std::env::var("OPENAI_API_KEY").is_ok_and(|k| !k.is_empty());
        let raw_key = (!bearer)
            .then(|| std::env::var("API_KEY").ok().filter(|k| !k.is_empty()))
            .flatten();
        Some(SlowDown { servers, raw_key })
    }

    /// One POST to every server; failures are warnings.
    async fn post(&self, load: &Load, sleep: Option<f64>, clock: &Clock, stop: &Stopper) {
        let body =
            tokenizer_encoders::python_json_dumps(&json!({"forward_sleep_time": sleep}), true)
                .unwrap_or_default();
        let mut extra = HeaderMap::new();
        if let Some(v) = self
            .raw_key
            .as_deref()
            .and_then(|k| http::HeaderValue::from_str(k).ok())
        {
            extra.insert(http::header::AUTHORIZATION, v);
        }
        for s in &self.servers {
            let target = format!("{s}/slow_down");
            let Ok(url) = uri(&target, "--slow-down-server") else {
                println!("Warning: --slow-down-server {s}: not an http(s) URL");
                continue;
            };
            let sent = side_post(
                load,
                url,
                Bytes::from(body.clone()),
                false,
                extra.clone(),
                clock,
                stop,
            );
            match tokio::time::timeout(Duration::from_secs(60), sent).await {
                Ok(r) if r.http_status == Some(200) => {}
                Ok(r) => println!(
                    "Warning: slow_down POST to {target} failed: {}",
                    r.http_status
                        .map_or_else(|| r.error.unwrap_or_default(), |c| format!("HTTP {c}"))
                ),
                Err(_) => println!("Warning: slow_down POST to {target} timed out after 60 s"),
            }
        }
    }
}

/// sa-bench's measurement window (srt-slurm's `measurement_window.py`): where srtctl set
/// `SRT_MEASUREMENT_WINDOW_DIR` and the result goes under `/logs`, the window's boundaries are
/// published beside the result for the power join.
struct MeasurementWindow {
    path: PathBuf,
    result_path: String,
    concurrency: Option<usize>,
}

impl MeasurementWindow {
    const LOG_ROOT: &'static str = "/logs";

    fn create(a: &Args) -> Option<MeasurementWindow> {
        if a.flavor != Flavor::SaBench || !a.save_result {
            return None;
        }
        let name = a.result_filename.as_deref()?;
        let dir = PathBuf::from(std::env::var_os("SRT_MEASUREMENT_WINDOW_DIR")?);
        if !dir.is_dir() {
            return None;
        }
        let full = a.result_dir.clone().unwrap_or_default().join(name);
        let full = std::path::absolute(&full).ok()?;
        let rel = full.strip_prefix(Self::LOG_ROOT).ok()?;
        let stem = Path::new(name).file_stem()?.to_string_lossy().into_owned();
        Some(MeasurementWindow {
            path: dir.join(format!("{stem}.json")),
            result_path: rel.to_string_lossy().into_owned(),
            concurrency: a.max_concurrency,
        })
    }

    fn write(
        &self,
        status: &str,
        start: f64,
        end: Option<f64>,
        duration: Option<f64>,
        reason: Option<&str>,
    ) {
        let dump = |v: Value| tokenizer_encoders::python_json_dumps(&v, true).unwrap_or_default();
        let fields = [
            ("schema_version", json!(1)),
            ("benchmark_type", json!("sa-bench")),
            ("result_path", json!(self.result_path)),
            ("concurrency", json!(self.concurrency)),
            ("benchmark_start_time_unix", json!(start)),
            ("benchmark_end_time_unix", json!(end)),
            ("duration", json!(duration)),
            ("clock_source", json!("head_node_unix_clock")),
            ("status", json!(status)),
            ("reason", json!(reason)),
        ];
        // json.dump(indent=2) then a newline.
        let body: Vec<String> = fields
            .iter()
            .map(|(k, v)| format!("  {}: {}", dump(json!(k)), dump(v.clone())))
            .collect();
        let text = format!("{{\n{}\n}}\n", body.join(",\n"));
        if let Err(e) = crate::fsutil::write_atomic(&self.path, text.as_bytes()) {
            eprintln!(
                "WARNING: cannot write the measurement window {}: {e}",
                self.path.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// srt-slurm's window file: `json.dump(indent=2)` and a newline, the times as given.
    #[test]
    fn the_measurement_window_is_srt_slurms_format() {
        let tmp = tempfile::tempdir().unwrap();
        let w = MeasurementWindow {
            path: tmp.path().join("w.json"),
            result_path: "sa-bench_isl_8_osl_4/results_concurrency_2_gpus_8.json".into(),
            concurrency: Some(2),
        };
        w.write("completed", 1.5, Some(2.25), Some(0.75), None);
        let text = std::fs::read_to_string(tmp.path().join("w.json")).unwrap();
        assert_eq!(
            text,
            "{\n  \"schema_version\": 1,\n  \"benchmark_type\": \"sa-bench\",\n  \"result_path\": \
             \"sa-bench_isl_8_osl_4/results_concurrency_2_gpus_8.json\",\n  \"concurrency\": 2,\n  \
             \"benchmark_start_time_unix\": 1.5,\n  \"benchmark_end_time_unix\": 2.25,\n  \
             \"duration\": 0.75,\n  \"clock_source\": \"head_node_unix_clock\",\n  \"status\": \
             \"completed\",\n  \"reason\": null\n}\n"
        );
    }

    #[test]
    fn os_cpu_count_is_at_least_one() {
        assert!(cpu_count() >= 1);
    }
}
