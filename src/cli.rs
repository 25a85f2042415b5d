//! Raw command-line flags (clap derive). Validation into typed configs happens in `config`.
//! Flag names follow AIPerf's where the meaning is the same, so command lines carry over.
//!
//! Long on purpose (about 150 flags): it is declarations only, each flag with the `--help` text
//! clap builds from its doc comment, one struct per subcommand, no logic beyond two value
//! parsers. Read `--help` and this file side by side.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::client::{ConnectionReuse, HttpVersion};
use crate::render::EndpointType;
use crate::schedule::ArrivalPattern;
use crate::scrape::acceptance::SpecEngine;
use crate::sim::{Fault, MetricsFlavor, ReasoningField};

/// specperf: a load generator for OpenAI-compatible LLM servers that measures speculative decoding.
#[derive(Debug, Parser)]
#[command(name = "specperf", version, about, long_about = None, after_help = EXIT_CODES)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,

    /// Print each lifecycle step on stderr with its timing: connections opened, /metrics
    /// scrapes, GPU telemetry reads, server start, ready and stop, drain polls (what AIPerf's
    /// -v shows). Before the subcommand's own flags with `bench-serving`.
    #[arg(short = 'v', long, global = true, action = clap::ArgAction::Count, help_heading = H_CONSOLE)]
    pub verbose: u8,

    /// AIPerf's log levels: `debug` and `trace` are -v; the others print what a run without
    /// -v prints (warnings and errors are always shown).
    #[arg(long, global = true, value_enum, ignore_case = true, value_name = "LEVEL", help_heading = H_CONSOLE)]
    pub log_level: Option<LogLevel>,
}

impl Cli {
    /// Whether the debug channel (`-v`) was asked for.
    pub fn debug(&self) -> bool {
        self.verbose > 0 || matches!(self.log_level, Some(LogLevel::Debug | LogLevel::Trace))
    }
}

/// `--log-level`: AIPerf's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogLevel {
    /// Every lifecycle step and more (as -v here).
    Trace,
    /// Every lifecycle step (-v).
    Debug,
    /// The default.
    Info,
    /// As info.
    Notice,
    /// As info (warnings are always shown).
    Warning,
    /// As info.
    Success,
    /// As info (errors are always shown).
    Error,
    /// As info.
    Critical,
}

const EXIT_CODES: &str =
    "Exit codes: 0 run complete (failed fraction within --failed-request-threshold); \
1 run failed (threshold exceeded, no successful request, stalled, artifacts not written); \
2 usage or configuration error; 3 server not ready (or the --url host does not resolve); 124 --timeout-seconds expired; \
130/143 interrupted by SIGINT/SIGTERM (partial artifacts written).";

// Help headings, shared by every subcommand, so `replay`, `profile`, `collect` and `gate` group
// the same flags under the same names. clap prints a command's headings in the order of their
// first flag (hence the field order of ReplayArgs, ProfileArgs, CollectArgs and GateArgs: the
// pipeline's, target to output), and a heading's flags in field order; `-h` and `-V` stay
// under `Options:`. No heading holds more than 25 flags (tests/integration/docs.rs).
const H_CURVE: &str = "Golden curve";
const H_TARGET: &str = "Target";
const H_CONSOLE: &str = "Console";
const H_INPUT: &str = "Input";
const H_BODY: &str = "Sampling and request body";
const H_LOAD: &str = "Load";
const H_AGENTX: &str = "AgentX replay (--scenario)";
const H_LIMITS: &str = "Timeouts and limits";
const H_METRICS: &str = "Server metrics and acceptance";
const H_TELEMETRY: &str = "GPU telemetry and energy";
const H_OUTPUT: &str = "Output";
const H_SWEEPS: &str = "Sweeps and repeated runs";
const H_SEARCH: &str = "SLA search";
const H_SERVE: &str = "Server cells (--serve-cmd)";
const H_SIM: &str = "Embedded simulator (no URL given)";
const H_RENDER: &str = "Render";
const H_INJECT: &str = "Injection";
const H_DRAIN: &str = "Drain wait";
const H_CHARTS: &str = "Charts";
const H_REPORT: &str = "Report";
// `specperf sim`'s own.
const H_SIM_SERVER: &str = "Listeners";
const H_SIM_TIMING: &str = "Timing, KV cache and scheduling";
const H_SIM_SPEC: &str = "Speculative decoding";
const H_SIM_RESPONSES: &str = "Responses and /metrics";
const H_SIM_FAULTS: &str = "Faults and rate limit";
const H_SIM_GPUS: &str = "Simulated GPUs (DCGM page)";

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Replay a prompt collection against a server (or, with no --url, against the built-in simulator).
    #[command(mut_args(negative_ok))]
    Replay(Box<ReplayArgs>),
    /// AIPerf's `aiperf profile` command line for InferenceX's AgentX benchmark
    /// (`--scenario inferencex-agentx-mvp` with a `--public-dataset` trace corpus or
    /// `--input-file DIR --custom-dataset-type weka_trace`): the same argv with `aiperf` replaced
    /// by `specperf`. Only the AgentX replay; `specperf replay` runs every other workload.
    #[command(mut_args(negative_ok), after_help = PROFILE_HELP)]
    Profile(Box<ProfileArgs>),
    /// Run the built-in OpenAI-compatible simulator with speculative-decoding counters.
    #[command(mut_args(negative_ok))]
    Sim(Box<SimArgs>),
    /// Make a recipe's speculative entries fake the golden acceptance length (synthetic acceptance).
    #[command(mut_args(negative_ok))]
    Inject(Box<InjectArgs>),
    /// The AL gate: replay the golden curve's SPEED-Bench collection on this server and compare
    /// the measured acceptance length with the golden value (always exits 0; see --strict).
    #[command(mut_args(negative_ok))]
    Gate(Box<GateArgs>),
    /// Roll many al_gate_*.json results up into a markdown table and a JSON summary.
    #[command(mut_args(negative_ok))]
    GateSummary(Box<GateSummaryArgs>),
    /// Collect a golden acceptance-length curve: start the server once per cell of thinking
    /// modes x draft lengths, replay a SPEED-Bench category on it, and write the golden YAML
    /// (with the collection block `gate` and `inject` read).
    #[command(mut_args(negative_ok), after_help = COLLECT_HELP)]
    Collect(Box<CollectArgs>),
    /// Combine the artifact directories of a sharded run (`replay --shard i/N`) into the report one
    /// process would have written.
    #[command(mut_args(negative_ok))]
    Merge(Box<MergeArgs>),
    /// Draw charts (SVG, PNG) and one self-contained HTML page from a replay's artifact directory,
    /// or compare sweeps: their Pareto frontiers on one chart.
    #[command(mut_args(negative_ok))]
    Plot(Box<PlotArgs>),
    /// Assemble finished SPEED-Bench runs (one per category) into a model × category matrix of
    /// acceptance length, acceptance rate or throughput, as `aiperf speed-bench-report` does;
    /// with --baseline, the speedup over the same runs without speculative decoding.
    #[command(mut_args(negative_ok))]
    SpeedBenchReport(Box<SpeedBenchReportArgs>),
    /// The drop-in for InferenceX's benchmark_serving.py and srt-slurm's sa-bench: their argv
    /// (`--flavor inferencex`, the default, or `--flavor sa-bench`), the same prompts, load,
    /// result file, console lines and exit codes. `specperf bench-serving --help` lists each
    /// flavor's flags.
    #[command(disable_help_flag = true, after_help = BENCH_SERVING_HELP)]
    BenchServing(BenchServingArgs),
    /// Wait until the servers are drained: poll the frontend's and every worker's /metrics until
    /// no request is running or waiting for several polls in a row (between benchmark points).
    #[command(mut_args(negative_ok))]
    Drain(Box<DrainArgs>),
    /// Print the request bodies a replay would send (to diff against a server's own template), or
    /// check an encoder vector file.
    #[command(mut_args(negative_ok), mut_args(render_arg))]
    Render(Box<RenderArgs>),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to stdout.
    Completions(CompletionsArgs),
    /// Write man pages (`specperf.1` and one per subcommand, `specperf-COMMAND.1`) into a
    /// directory.
    Man(ManArgs),
}

const BENCH_SERVING_HELP: &str = "Example (InferenceX's run_benchmark_serving, one word changed):
  specperf bench-serving --model deepseek-ai/DeepSeek-V4 --backend vllm \\
    --base-url http://0.0.0.0:8000 --dataset-name random --random-input-len 1024 \\
    --random-output-len 128 --random-range-ratio 0.8 --num-prompts 640 --max-concurrency 64 \\
    --request-rate inf --ignore-eos --num-warmups 128 --save-result --result-dir out \\
    --result-filename result.json
Reference: docs/bench-serving.md";

/// `specperf bench-serving`: upstream's argv, read by the drop-in's own argparse-style table
/// (each flavor has its own flags, so clap only hands them over).
#[derive(Debug, Args)]
pub struct BenchServingArgs {
    /// benchmark_serving.py's flags (`--help` lists them per flavor).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0.., value_name = "ARGV")]
    pub argv: Vec<String>,
}

const COLLECT_HELP: &str =
    "Example (DeepSeek-V4 MTP, vLLM; InferenceX's collector script as one command):
  specperf collect --model-key deepseek-v4-pro --output dsv4_mtp.yaml \\
    --serve-cmd 'vllm serve /models/dsv4 --port {port} --speculative-config \
{\"method\":\"mtp\",\"num_speculative_tokens\":{k}}' \\
    --serve-param k=1,2,3,4 --thinking-modes off,on \\
    --input-file qualitative.jsonl --category coding --osl 4096 \\
    --endpoint-type completions --encoder dsv4 \\
    --chat-template-kwargs-on '{\"thinking\": true, \"reasoning_effort\": \"high\"}'

Each (mode, k) cell restarts the server as InferenceX's collector does, under \
<artifact-dir>/thinking_<mode>/k_<k>/ with its server.log and run artifacts; the AL is the \
counters' over the cell's window. A failed cell is N/A in the YAML (exit 1); --resume re-runs \
only the cells not done.";

/// `specperf collect`: a golden curve from a grid of server cells.
#[derive(Debug, Args, Clone)]
pub struct CollectArgs {
    /// The curve's top-level key in the YAML (e.g. deepseek-v4-pro).
    #[arg(long, help_heading = H_CURVE)]
    pub model_key: String,

    /// The golden YAML to write (InferenceX's `golden_al_distribution/<curve>.yaml` shape plus
    /// the `collection:` block).
    #[arg(short = 'o', long, help_heading = H_CURVE)]
    pub output: PathBuf,

    /// The --serve-param that is the number of speculative tokens, the curve's key.
    #[arg(long, default_value = "k", value_name = "NAME", help_heading = H_CURVE)]
    pub draft_param: String,

    /// Thinking modes to collect, in order (`off`, `on`).
    #[arg(long, value_delimiter = ',', default_value = "off,on", help_heading = H_CURVE)]
    pub thinking_modes: Vec<CollectMode>,

    /// `chat_template_kwargs` of thinking_on, a JSON object.
    #[arg(long, default_value = "{\"thinking\": true}", value_name = "JSON", help_heading = H_CURVE)]
    pub chat_template_kwargs_on: String,

    /// `chat_template_kwargs` of thinking_off, a JSON object. Default: none sent (InferenceX's
    /// collector sends none), recorded as `{}` so the gate replays exactly that.
    #[arg(long, value_name = "JSON", help_heading = H_CURVE)]
    pub chat_template_kwargs_off: Option<String>,

    /// The hardware and engine, for the header comment (`Measured on KEY (NOTE)`), e.g.
    /// "B300, vLLM MTP".
    #[arg(long, help_heading = H_CURVE)]
    pub note: Option<String>,

    /// Server base URL when the --serve-cmd template fixes the port (no `{port}`).
    #[arg(short = 'u', long, help_heading = H_TARGET)]
    pub url: Option<String>,

    /// Model name sent in every request. Default: the first model listed by GET /v1/models.
    #[arg(short = 'm', long, help_heading = H_TARGET)]
    pub model: Option<String>,

    /// Endpoint type.
    #[arg(long, value_enum, default_value_t = EndpointType::Chat, help_heading = H_TARGET)]
    pub endpoint_type: EndpointType,

    /// The prepared SPEED-Bench file (e.g. qualitative.jsonl from NeMo-Skills' prepare.py).
    #[arg(long, help_heading = H_INPUT)]
    pub input_file: PathBuf,

    /// The category replayed in every cell.
    #[arg(long, default_value = "coding", help_heading = H_INPUT)]
    pub category: String,

    /// Shuffle seed of the prompts (CPython's, as vLLM's benchmark).
    #[arg(long, default_value_t = 0, help_heading = H_INPUT)]
    pub seed: u64,

    /// Output tokens per request.
    #[arg(long, visible_alias = "output-len", default_value_t = 4096, help_heading = H_INPUT)]
    pub osl: u32,

    /// Client-side renderer for `--endpoint-type completions`: dsv4, dsv41 or template:PATH
    /// (chat requests are rendered by the server).
    #[arg(long, default_value = "none", help_heading = H_INPUT)]
    pub encoder: String,

    /// Sampling temperature.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true, help_heading = H_BODY)]
    pub temperature: f64,

    /// Sampling top_p (unset: not sent).
    #[arg(long, allow_negative_numbers = true, help_heading = H_BODY)]
    pub top_p: Option<f64>,

    /// Sampling top_k (unset: not sent).
    #[arg(long, allow_negative_numbers = true, help_heading = H_BODY)]
    pub top_k: Option<i64>,

    /// Requests in flight in each cell (InferenceX's collector: 1).
    #[arg(long, default_value_t = 1, help_heading = H_LOAD)]
    pub concurrency: u32,

    /// Prompts of the category (default: all of them). The gate replays every prompt of the
    /// category, so a number other than the category's size is refused.
    #[arg(long, visible_alias = "request-count", help_heading = H_LOAD)]
    pub num_prompts: Option<u32>,

    /// A worker's Prometheus endpoint (repeatable) when the server's own /metrics is not the
    /// one with the speculative counters.
    #[arg(long, visible_alias = "metrics-url", num_args = 1.., action = clap::ArgAction::Append, help_heading = H_METRICS)]
    pub server_metrics: Vec<String>,

    /// Seconds to wait after each cell's last response for the counters to settle before the
    /// final scrape (default: replay's; 0 for a server whose counters are exact at once).
    #[arg(long, value_name = "SECONDS", help_heading = H_METRICS)]
    pub metrics_settle_seconds: Option<f64>,

    /// Where each cell's server log and run go, and `collect.json`. Default:
    /// `artifacts/collect-<output's name without .yaml>`.
    #[arg(long, help_heading = H_OUTPUT)]
    pub artifact_dir: Option<PathBuf>,

    /// Keep the cells done in --artifact-dir; run only the others.
    #[arg(long, help_heading = H_OUTPUT)]
    pub resume: bool,

    /// The server: `--serve-cmd` and `--serve-param` (one of them the draft length, see
    /// --draft-param), started and stopped once per cell.
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// A thinking mode of `collect`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CollectMode {
    /// `thinking_off`.
    Off,
    /// `thinking_on`.
    On,
}

/// `specperf completions`.
#[derive(Debug, Args)]
#[command(after_help = "Install, e.g.: specperf completions bash > \
~/.local/share/bash-completion/completions/specperf; \
specperf completions zsh > \"${fpath[1]}/_specperf\"; \
specperf completions fish > ~/.config/fish/completions/specperf.fish")]
pub struct CompletionsArgs {
    /// The shell.
    pub shell: clap_complete::Shell,
}

/// `specperf man`.
#[derive(Debug, Args)]
#[command(
    after_help = "Read one with `man -l DIR/specperf-replay.1`, or put DIR on MANPATH \
(e.g. specperf man ~/.local/share/man/man1)."
)]
pub struct ManArgs {
    /// Where to write the pages (created if missing).
    pub dir: PathBuf,
}

/// The completion script for `shell` (made in memory: clap_complete panics on a failed write,
/// and a closed pipe, `specperf completions bash | head`, must not).
pub fn completions(shell: clap_complete::Shell) -> Vec<u8> {
    use clap::CommandFactory;
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "specperf", &mut out);
    out
}

/// Writes `specperf.1` and `specperf-<command>.1` for every subcommand into `dir`; returns the
/// paths written.
pub fn write_man_pages(dir: &std::path::Path) -> std::io::Result<Vec<PathBuf>> {
    use clap::CommandFactory;
    std::fs::create_dir_all(dir)?;
    let mut cmd = Cli::command();
    cmd.build();
    let mut written = Vec::new();
    let mut page = |c: clap::Command, name: String| -> std::io::Result<()> {
        let mut buf = Vec::new();
        clap_mangen::Man::new(c)
            .title(name.to_uppercase())
            .render(&mut buf)?;
        let path = dir.join(format!("{name}.1"));
        std::fs::write(&path, buf)?;
        written.push(path);
        Ok(())
    };
    for sub in cmd.get_subcommands() {
        let name = format!("specperf-{}", sub.get_name());
        page(sub.clone().display_name(name.clone()), name)?;
    }
    page(cmd, "specperf".into())?;
    Ok(written)
}

/// `specperf gate`. Numeric settings are read as text so a bad value becomes an `error` result
/// (`config_invalid`), never a usage failure: the gate always writes its file.
#[derive(Debug, Args)]
pub struct GateArgs {
    /// Golden curves: a directory of `<curve>.yaml` files, or one curve file.
    #[arg(long, env = "AL_GATE_GOLDEN", help_heading = H_CURVE)]
    pub golden: Option<PathBuf>,
    /// Collection metadata for curves without a `collection:` block: a file, or a directory of
    /// `<curve>.yaml` files (the repository's `collections/`).
    #[arg(long, env = "AL_GATE_COLLECTION_METADATA", help_heading = H_CURVE)]
    pub collection_metadata: Option<PathBuf>,
    /// Model prefix of the curve, e.g. dsv4.
    #[arg(long, env = "MODEL_PREFIX", help_heading = H_CURVE)]
    pub model_prefix: Option<String>,
    /// Speculative method (mtp, eagle, dspark, ...; `none` skips the gate).
    #[arg(long, env = "SPEC_DECODING", help_heading = H_CURVE)]
    pub spec_method: Option<String>,
    /// Draft model name or path (selects the GQA MiniMax curve).
    #[arg(long, env = "DRAFT_MODEL", help_heading = H_CURVE)]
    pub draft_model: Option<String>,
    /// vLLM draft_sample_method (Kimi-K3 DSpark curves).
    #[arg(long, env = "DRAFT_SAMPLE_METHOD", help_heading = H_CURVE)]
    pub draft_sample_method: Option<String>,
    /// thinking_on or thinking_off (required).
    #[arg(long, env = "THINKING_MODE", help_heading = H_CURVE)]
    pub thinking_mode: Option<String>,
    /// Draft tokens per step, k (required).
    #[arg(long, env = "NUM_SPEC_TOKENS", help_heading = H_CURVE)]
    pub num_spec_tokens: Option<String>,
    /// Serving framework (vllm, sglang, trtllm, atom, tilert, dynamo-vllm, dynamo-sglang, dynamo-trtllm).
    #[arg(long, env = "FRAMEWORK", help_heading = H_CURVE)]
    pub framework: Option<String>,
    /// Dynamo's backend framework when --framework is `dynamo`.
    #[arg(long, env = "DYNAMO_BACKEND_FRAMEWORK", help_heading = H_CURVE)]
    pub dynamo_backend: Option<String>,
    /// Server base URL. Default: http://localhost:$PORT.
    #[arg(short = 'u', long, help_heading = H_TARGET)]
    pub url: Option<String>,
    /// Model name sent (MODEL_NAME, else MODEL; default: discovered from /v1/models).
    #[arg(short = 'm', long, env = "MODEL_NAME", help_heading = H_TARGET)]
    pub model: Option<String>,
    /// Server port for the default URL and metrics endpoint.
    #[arg(long, env = "PORT", help_heading = H_TARGET)]
    pub port: Option<String>,
    /// Prompts file (prepared SPEED-Bench `qualitative.jsonl`).
    #[arg(long, help_heading = H_INPUT)]
    pub input_file: Option<PathBuf>,
    /// Directory holding `qualitative.jsonl` (the prompts cache).
    #[arg(long, env = "SPEEDBENCH_DIR", help_heading = H_INPUT)]
    pub speedbench_dir: Option<PathBuf>,
    /// Requests in flight (default 64).
    #[arg(long, env = "AL_GATE_CONCURRENCY", help_heading = H_LOAD)]
    pub concurrency: Option<String>,
    /// Whole-gate budget, seconds (default 1800).
    #[arg(long, env = "AL_GATE_TIMEOUT_S", help_heading = H_LIMITS)]
    pub timeout_seconds: Option<String>,
    /// Worker metrics endpoint (repeatable); else the InferenceX env chain
    /// (SPEEDBENCH_DECODE_METRICS_URLS, ...), else http://0.0.0.0:$PORT/metrics.
    #[arg(long, visible_alias = "metrics-url", num_args = 1.., action = clap::ArgAction::Append, help_heading = H_METRICS)]
    pub server_metrics: Vec<String>,
    /// Wait after the last response before the after-scrape, seconds (default 10).
    #[arg(long, env = "AL_GATE_SETTLE_S", help_heading = H_METRICS)]
    pub settle_seconds: Option<String>,
    /// Decode engines (DP ranks × workers) the metrics must cover (Dynamo vLLM leader-only check).
    #[arg(long, env = "AL_GATE_EXPECTED_ENGINES", help_heading = H_METRICS)]
    pub expected_engines: Option<String>,
    /// Names the result: al_gate_<RESULT_FILENAME>.json and al_gate_<RESULT_FILENAME>_artifacts/
    /// (required; a plain file name, no path, checked before anything runs).
    #[arg(long, env = "RESULT_FILENAME", help_heading = H_OUTPUT)]
    pub result_filename: Option<String>,
    /// Directory of the result file (default: the current directory).
    #[arg(long, env = "RESULT_DIR", help_heading = H_OUTPUT)]
    pub result_dir: Option<PathBuf>,
    /// Exit 1 unless the verdict is pass (default: always 0, the gate is report-only).
    #[arg(long, help_heading = H_OUTPUT)]
    pub strict: bool,
}

/// `specperf gate-summary`.
#[derive(Debug, Args)]
pub struct GateSummaryArgs {
    /// Directories (searched recursively for al_gate_*.json) or result files (read whatever their
    /// name).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Also write the JSON roll-up here.
    #[arg(long, help_heading = H_OUTPUT)]
    pub json: Option<PathBuf>,
    /// Exit 1 when a file is unreadable (default: it is listed after the table and the rest is
    /// still summarised, exit 0).
    #[arg(long, help_heading = H_OUTPUT)]
    pub strict: bool,
}

/// Replay flags that change nothing `render` prints (load shape, timeouts, transport, metrics,
/// outputs, the simulator): accepted, so a replay command line can be reused, but hidden from
/// `render --help`.
const NOT_FOR_RENDER: &[&str] = &[
    "url",
    "api_key",
    "headers",
    "ca_file",
    "insecure",
    "http",
    "connection_reuse_strategy",
    "rate_limit_retries",
    "connect_timeout_seconds",
    "ttft_timeout_seconds",
    "idle_timeout_seconds",
    "request_timeout_seconds",
    "timeout_seconds",
    "stall_timeout_seconds",
    "wait_for_model_timeout",
    "failed_request_threshold",
    "max_event_bytes",
    "concurrency",
    "request_rate",
    "arrival_pattern",
    "arrival_smoothness",
    "benchmark_duration",
    "benchmark_grace_period",
    "warmup_request_count",
    "warmup_duration",
    "warmup_concurrency",
    "concurrency_ramp_duration",
    "request_rate_ramp_duration",
    "schedule_lag_tolerance_ms",
    "shard",
    "shard_count",
    "metrics_shard",
    "server_metrics",
    "no_server_metrics",
    "metrics_interval_seconds",
    "slice_duration",
    "metrics_timeout_seconds",
    "metrics_settle_seconds",
    "spec_engine",
    "num_spec_tokens",
    "artifact_dir",
    "goodput",
    "result_filename",
    "result_dir",
    "ui",
    "progress_interval",
    "ttft_ms",
    "itl_ms",
    "k",
    "acceptance_prob",
    "ignore_continuous_usage",
    "sim_gpus",
    "fixed_schedule",
    "fixed_schedule_auto_offset",
    "fixed_schedule_start_offset",
    "fixed_schedule_end_offset",
    "trace_speedup",
    "scenario",
    "public_dataset",
    "trajectory_start_min_ratio",
    "trajectory_start_max_ratio",
    "warmup_requests_per_lane",
    "warmup_grace_period",
    "agentic_warmup_grace_period",
    "trace_idle_gap_cap_seconds",
    "system_idle_gap_cap_seconds",
    "stats_interval",
    "max_context_length",
    "synthesis_max_osl",
    "allow_dataset_wrap",
    "use_dynamo_conv_aware_routing",
    "dynamo_session_timeout_seconds",
    "unsafe_override",
    "sweep_type",
    "num_profile_runs",
    "parameter_sweep_mode",
    "confidence_level",
    "convergence_metric",
    "convergence_stat",
    "convergence_mode",
    "convergence_threshold",
    "profile_run_cooldown_seconds",
    "parameter_sweep_cooldown_seconds",
    "no_drain",
    "drain_poll_interval_seconds",
    "drain_idle_polls",
    "drain_max_wait_seconds",
    "search_recipe",
    "search_parameter",
    "search_style",
    "isl_osl_pairs",
    "search_min",
    "search_max",
    "search_tolerance",
    "ttft_sla_ms",
    "itl_sla_ms",
    "tpot_sla_ms",
    "e2e_sla_ms",
    "error_rate_sla",
    "slo_attainment_fraction",
    "gpus",
    "resume",
    "serve_cmd",
    "serve_params",
    "serve_ready_timeout",
    "serve_stop_grace",
    "serve_gpu_release_timeout",
];

/// Every value may look like a negative number: `--sim-itl-ms -1` is that flag's bad value (an
/// error naming the flag), not clap's "unexpected argument '-1'".
fn negative_ok(a: clap::Arg) -> clap::Arg {
    let takes_value = a.get_action().takes_values();
    a.allow_negative_numbers(takes_value)
}

fn render_arg(a: clap::Arg) -> clap::Arg {
    match a.get_id().as_str() {
        id if NOT_FOR_RENDER.contains(&id) => a.hide(true),
        // render asks no server: the name is written as given.
        "model" => a.help("Model name written into the bodies (default: \"<model>\")"),
        _ => a,
    }
}

/// `specperf render`.
#[derive(Debug, Args)]
pub struct RenderArgs {
    /// Requests to print (the first N of the collection, in replay order); `--request-count`
    /// means the same. Default 3.
    #[arg(long, help_heading = H_RENDER)]
    pub count: Option<usize>,

    /// Run an encoder vector file in the shared format instead (JSONL with id, encoder, level,
    /// input, expected); prints a diff per failure and `N passed, M failed`; exit 1 on any failure.
    #[arg(long, help_heading = H_RENDER)]
    pub check_vectors: Option<PathBuf>,

    /// The collection and rendering flags, as for `replay`.
    #[command(flatten)]
    pub replay: ReplayArgs,
}

impl RenderArgs {
    /// How many bodies to print: `--count` or the replay's `--request-count` (the same
    /// meaning), 3 when neither is given; two different numbers are refused.
    pub fn count(&self) -> Result<usize, String> {
        let rc = self.replay.request_count().map(|n| n as usize);
        match (self.count, rc) {
            (Some(a), Some(b)) if a != b => Err(format!(
                "--count {a} and --request-count {b} both say how many bodies to print; give one"
            )),
            (c, rc) => Ok(c.or(rc).unwrap_or(3)),
        }
    }
}

/// The replay flags given on `render`'s command line that it does not use (they only matter
/// to a run against a server), as `--name`s, for one warning line.
pub fn render_ignored(matches: &clap::ArgMatches) -> Vec<String> {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let Some(render) = cmd.find_subcommand("render") else {
        return Vec::new();
    };
    render
        .get_arguments()
        .filter(|a| NOT_FOR_RENDER.contains(&a.get_id().as_str()))
        .filter(|a| {
            matches!(
                matches.value_source(a.get_id().as_str()),
                Some(clap::parser::ValueSource::CommandLine)
            )
        })
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .collect()
}

const MERGE_EXIT_CODES: &str = "Exit codes: 0 merged report written; 1 it could not be written; \
2 the directories are not every shard of one finished run (missing, duplicate or foreign shard, \
unreadable file).";

/// `specperf merge`.
#[derive(Debug, Args)]
#[command(after_help = MERGE_EXIT_CODES)]
pub struct MergeArgs {
    /// Artifact directories of the shards (`--artifact-dir` of each `replay --shard i/N`), every
    /// shard of the run once, in any order.
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,

    /// Where to write the merged records.jsonl, summary.json and console.txt. Default: `merged/`
    /// beside the first directory.
    #[arg(short = 'o', long, help_heading = H_OUTPUT)]
    pub output: Option<PathBuf>,
}

const PLOT_EXIT_CODES: &str = "Exit codes: 0 charts and report.html written; 1 the directory \
lacks a readable records.jsonl or specperf summary.json, or a file could not be written; \
2 bad flag.";

/// `specperf plot`.
#[derive(Debug, Args)]
#[command(after_help = PLOT_EXIT_CODES)]
pub struct PlotArgs {
    /// Artifact directory of a replay (reads records.jsonl, summary.json and, for the chunk times
    /// of the throughput chart, profile_export.jsonl when present); or one or more sweep
    /// directories (with sweep.json): their Pareto frontiers on one chart, `sweeps.html`.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,

    /// Where to write the charts and report.html (default: `<DIR>/plots`; for sweeps compared,
    /// `<first DIR>/compare`).
    #[arg(long, help_heading = H_CHARTS)]
    pub output: Option<PathBuf>,

    /// Golden acceptance length, drawn on the AL-over-time chart with the gate's ±5% band.
    #[arg(long, help_heading = H_CHARTS)]
    pub golden_al: Option<f64>,

    /// Also write PNG versions of the charts (on by default; `--png false` for SVG only).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", help_heading = H_CHARTS)]
    pub png: bool,
}

const SPEED_BENCH_REPORT_HELP: &str = "\
Examples:
  # one replay per category, then the matrix (acceptance length by default)
  for c in coding math writing; do
    specperf replay --url http://localhost:8000 --category $c --artifact-dir runs/$c
  done
  specperf speed-bench-report runs/
  specperf speed-bench-report runs/ --metric accept_rate --format csv --output rate.csv

  # one replay over every category (vLLM with --per-request-spec-decode-metrics summary):
  # one column per category from its summary.json
  specperf replay --url http://localhost:8000 --artifact-dir runs/all
  specperf speed-bench-report runs/all

  # speedup over the same prompts on a server without speculative decoding (a sweep each)
  specperf replay --url http://spec:8000 --category coding --concurrency 1,4,16 --artifact-dir spec/coding
  specperf replay --url http://base:8000 --category coding --concurrency 1,4,16 --artifact-dir base/coding
  specperf speed-bench-report spec/coding --baseline base/ --metric throughput

The CSV is the one AIPerf 0.13 writes for the same directories, byte for byte. A run directory \
holds profile_export_aiperf.json (the --artifact-dir of a replay, or an AIPerf run); its category \
comes from the dataset format (speed_bench_<category>, spec_al_<name>), its acceptance from \
server_metrics_export.json. Warnings (a run left out, a cell without a baseline) go to stderr.

Exit codes: 0 report written; 1 no run directory, no value of the metric, an unreadable \
--baseline or a file that could not be written; 2 bad flag.";

/// `specperf speed-bench-report`.
#[derive(Debug, Args)]
#[command(after_long_help = SPEED_BENCH_REPORT_HELP)]
pub struct SpeedBenchReportArgs {
    /// Run directories (each holding profile_export_aiperf.json, e.g. a replay's
    /// --artifact-dir), or directories whose subdirectories are run directories.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,

    /// Where to write the matrix CSV. With --baseline, speed_bench_speedup.csv and
    /// speed_bench_speedup.svg go in the same directory.
    #[arg(long, value_name = "FILE", default_value = "speed_bench_report.csv", help_heading = H_REPORT)]
    pub output: PathBuf,

    /// Print the table, write the CSV, or both (with --baseline: the speedup tables and
    /// speed_bench_speedup.csv alike; the chart is written in every case).
    #[arg(long, value_enum, default_value_t = SpeedBenchFormat::Both, help_heading = H_REPORT)]
    pub format: SpeedBenchFormat,

    /// What each cell holds.
    #[arg(long, value_enum, default_value_t = SpeedBenchMetric::AcceptLength, help_heading = H_REPORT)]
    pub metric: SpeedBenchMetric,

    /// Runs of the same prompts without speculative decoding (a run, a directory of runs, or a
    /// sweep directory): adds the output-throughput and TPOT speedup of each cell (model ×
    /// category × concurrency) as tables, speed_bench_speedup.csv and a chart against
    /// concurrency, speed_bench_speedup.svg.
    #[arg(long, value_name = "PATH", help_heading = H_REPORT)]
    pub baseline: Option<PathBuf>,
}

/// `speed-bench-report --format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SpeedBenchFormat {
    /// Only the CSV file.
    Csv,
    /// Only the table on stdout.
    Table,
    /// The table and the CSV.
    Both,
}

/// `speed-bench-report --metric`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SpeedBenchMetric {
    /// Acceptance length: tokens per verify step, drafts accepted + 1 (from the server's
    /// counters).
    #[value(name = "accept_length")]
    AcceptLength,
    /// Accepted draft tokens over proposed ones, a fraction.
    #[value(name = "accept_rate")]
    AcceptRate,
    /// Output tokens/s of the run (the profile's output_token_throughput).
    #[value(name = "throughput")]
    Throughput,
}

const DRAIN_EXIT_CODES: &str = "Exit codes: 0 drained; 124 not drained within \
--max-wait-seconds; 4 an endpoint's page carries none of the known queue gauges (it cannot be seen \
to be idle); 1 the --output file could not be written; 2 bad flag; 130/143 interrupted by \
SIGINT/SIGTERM (the outcome is still written).";

/// `specperf drain`. Queue gauges read: vLLM `vllm:num_requests_running`/`_waiting`, SGLang
/// `sglang:num_running_reqs`/`num_queue_reqs`, TensorRT-LLM `trtllm_num_requests_running`/
/// `_waiting`, Dynamo frontend `dynamo_frontend_active_requests` (else `_inflight_requests`) and
/// `_queued_requests`, llama.cpp `llamacpp:requests_processing`/`_deferred`; each summed over
/// every label set.
#[derive(Debug, Args)]
#[command(after_help = DRAIN_EXIT_CODES)]
pub struct DrainArgs {
    /// Frontend base URL (a Dynamo frontend, a router, or a single engine): its /metrics is
    /// polled too (`http://` added when no scheme).
    #[arg(short = 'u', long, help_heading = H_DRAIN)]
    pub url: Option<String>,

    /// Prometheus endpoint of a worker (repeatable; every worker of the deployment).
    /// `host:port`, a bare port, or a URL; `/metrics` is appended when the URL has no metrics
    /// path. Without it: the same environment as replay's --server-metrics
    /// (AIPERF_SERVER_METRICS_URLS, ...).
    #[arg(long, visible_alias = "metrics-url", num_args = 1.., action = clap::ArgAction::Append, help_heading = H_DRAIN)]
    pub server_metrics: Vec<String>,

    /// Seconds between polls.
    #[arg(long, env = "AIPERF_DRAIN_POLL_SECONDS", default_value_t = 10.0, help_heading = H_DRAIN)]
    pub poll_interval_seconds: f64,

    /// Consecutive polls with nothing running or waiting anywhere that count as drained. A failed
    /// poll of any endpoint starts the count again.
    #[arg(long, default_value_t = 3, help_heading = H_DRAIN)]
    pub idle_polls: u32,

    /// Longest wait, seconds; exit 124 when the servers are still busy then.
    #[arg(long, env = "AIPERF_DRAIN_TIMEOUT_SECONDS", default_value_t = 1800.0, help_heading = H_DRAIN)]
    pub max_wait_seconds: f64,

    /// Write the outcome (reason, polls, seconds waited, the largest queue seen, each endpoint's
    /// last reading) to this JSON file.
    #[arg(short = 'o', long, help_heading = H_DRAIN)]
    pub output: Option<PathBuf>,
}

/// `specperf replay`.
#[derive(Debug, Args, Clone)]
pub struct ReplayArgs {
    /// Server base URL (`http://` added when no scheme). Without it, the built-in simulator is
    /// started on loopback and the bundled collection is replayed against it.
    #[arg(short = 'u', long, help_heading = H_TARGET)]
    pub url: Option<String>,

    /// Never a flag: set for a `--serve-cmd` cell whose server's URL (its free port) is known
    /// only once the server is started. The flags are validated without a URL, and the URL is
    /// bound then (`RunConfig::bind`, `SweepConfig::bind`, `CategoryPlan::bind`).
    #[arg(skip)]
    pub url_bound_later: bool,

    /// Model name sent in every request. Default: the first model listed by GET /v1/models.
    #[arg(short = 'm', long, help_heading = H_TARGET)]
    pub model: Option<String>,

    /// Endpoint type.
    #[arg(long, value_enum, default_value_t = EndpointType::Chat, help_heading = H_TARGET)]
    pub endpoint_type: EndpointType,

    /// Custom endpoint path (default: /v1/chat/completions or /v1/completions).
    #[arg(long, visible_alias = "custom-endpoint", help_heading = H_TARGET)]
    pub endpoint: Option<String>,

    /// Stream responses (SSE). On by default; `--streaming false` for non-streaming requests
    /// (no token timing then: TTFT, ITL, TPOT and the other per-token metrics are left out of
    /// every report; latency and throughputs remain).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", help_heading = H_TARGET)]
    pub streaming: bool,

    /// Extra HTTP header `Name:Value` (repeatable).
    #[arg(short = 'H', long = "header", num_args = 1.., action = clap::ArgAction::Append, help_heading = H_TARGET)]
    pub headers: Vec<String>,

    /// Bearer token for `Authorization`. Prefer the environment variable so it stays out of shell history.
    #[arg(long, env = "OPENAI_API_KEY", hide_env_values = true, help_heading = H_TARGET)]
    pub api_key: Option<String>,

    /// Extra CA certificates (PEM) to trust for https URLs, besides the built-in web roots.
    #[arg(long, help_heading = H_TARGET)]
    pub ca_file: Option<PathBuf>,

    /// Do not verify the server's TLS certificate (a test server with a self-signed certificate).
    /// Anyone on the path can then read and alter the traffic, API key included; a warning goes
    /// to stderr and into summary.json. Prefer --ca-file.
    #[arg(long, help_heading = H_TARGET)]
    pub insecure: bool,

    /// HTTP version: auto (HTTP/1.1, ALPN on TLS), http1, http2 (h2c prior knowledge on http://).
    #[arg(long, value_enum, default_value_t = HttpVersion::Auto, help_heading = H_TARGET)]
    pub http: HttpVersion,

    /// Connection reuse (AIPerf's flag): pooled keeps connections open across requests; never
    /// opens a fresh one per request. Either way, a request whose reused connection closes before
    /// any response byte (llama-server closes after a stream while advertising keep-alive) is
    /// sent once more on a fresh connection, and counted as retried.
    #[arg(long, value_enum, default_value_t = ConnectionReuse::Pooled, help_heading = H_TARGET)]
    pub connection_reuse_strategy: ConnectionReuse,

    /// Prompt collection file. Default: the bundled SPEED-Bench-format collection.
    #[arg(long, help_heading = H_INPUT)]
    pub input_file: Option<PathBuf>,

    /// Format of --input-file (default speed_bench; needs --input-file). AIPerf's SPEED-Bench
    /// names are accepted too and select as AIPerf 0.13 does (file order, every turn of a row):
    /// `speed_bench_qualitative`, `speed_bench_<category>` (e.g. `speed_bench_coding`),
    /// `speed_bench_throughput_<N>k` and `speed_bench_throughput_<N>k_<tier>` (N 1, 2, 8, 16, 32;
    /// tier low_entropy, mixed, high_entropy).
    #[arg(long, value_parser = crate::dataset::DatasetTypeParser, help_heading = H_INPUT)]
    pub custom_dataset_type: Option<crate::dataset::DatasetType>,

    /// SPEED-Bench: keep only rows of this category or tier (exact, case-sensitive), e.g.
    /// `coding` or `mixed`. A comma list, or `all` (every one in the file), runs them one after
    /// another, each in its own directory under --artifact-dir with the drain wait between, so
    /// each gets the counters' acceptance length (servers without per-request figures).
    #[arg(long, help_heading = H_INPUT)]
    pub category: Option<String>,

    /// SPEED-Bench: shuffle seed (CPython random.seed + shuffle, as vLLM and the golden curves).
    #[arg(long, default_value_t = 0, help_heading = H_INPUT)]
    pub seed: u64,

    /// SPEED-Bench: keep file order instead of shuffling.
    #[arg(long, help_heading = H_INPUT)]
    pub no_shuffle: bool,

    /// Output tokens per request (`max_completion_tokens` for chat, `max_tokens` for completions).
    /// Default: unset (server decides), except against the embedded simulator (256). A comma list
    /// is a sweep.
    #[arg(
        long,
        visible_alias = "output-tokens-mean",
        allow_negative_numbers = true,
        help_heading = H_INPUT
    )]
    pub osl: Option<List<u32>>,

    /// Client-side renderer for `/v1/completions` prompts: `dsv4`, `dsv41` (DeepSeek-V4/V4.1
    /// serving wrappers, byte-exact with vLLM's), `template:PATH` (a Hugging Face chat template:
    /// model directory, tokenizer_config.json or .jinja file), or `none` (the text as written).
    /// Chat requests always carry the messages and the server renders them.
    #[arg(long, default_value = "none", help_heading = H_INPUT)]
    pub encoder: String,

    /// `chat_template_kwargs` as a JSON object: sent with chat requests, passed to the encoder for
    /// completions (e.g. '{"thinking": true, "reasoning_effort": "high"}').
    #[arg(long, help_heading = H_INPUT)]
    pub chat_template_kwargs: Option<String>,

    /// Send every user turn of a SPEED-Bench row as a session (each turn after the previous
    /// response). Default: the first user turn only, as `vllm bench serve` does.
    #[arg(long, help_heading = H_INPUT)]
    pub all_turns: bool,

    /// Break acceptance down by this field of each row (SPEED-Bench, single_turn and multi_turn
    /// collections). Default: SPEED-Bench's `category`. Rows without the field are in no group.
    #[arg(long, value_name = "FIELD", help_heading = H_INPUT)]
    pub group_by: Option<String>,

    /// Local tokenizer (`tokenizer.json` or a model directory) for client-side input token counts
    /// and synthetic prompts. Never downloaded.
    #[arg(long, help_heading = H_INPUT)]
    pub tokenizer: Option<PathBuf>,

    /// Generate prompts instead of reading a file: --isl tokens each (needs --tokenizer).
    #[arg(long, conflicts_with = "input_file", help_heading = H_INPUT)]
    pub synthetic: bool,

    /// Synthetic: mean input length, tokens. A comma list is a sweep.
    #[arg(
        long,
        visible_alias = "synthetic-input-tokens-mean",
        default_value_t = List(vec![550]),
        help_heading = H_INPUT
    )]
    pub isl: List<u32>,

    /// Synthetic: standard deviation of the input length, tokens.
    #[arg(
        long,
        visible_alias = "synthetic-input-tokens-stddev",
        default_value_t = 0.0,
        help_heading = H_INPUT
    )]
    pub isl_stddev: f64,

    /// Synthetic: standard deviation of the output length around --osl, tokens.
    #[arg(long, visible_alias = "output-tokens-stddev", default_value_t = 0.0, help_heading = H_INPUT)]
    pub osl_stddev: f64,

    /// Synthetic: number of distinct prompts (default 100). AgentX: keep the first N traces
    /// that fit --max-context-length (default: all).
    #[arg(long, help_heading = H_INPUT)]
    pub num_dataset_entries: Option<usize>,

    /// Sampling: `temperature` (sent only when given).
    #[arg(long, help_heading = H_BODY)]
    pub temperature: Option<f64>,
    /// Sampling: `top_p` (sent only when given).
    #[arg(long, help_heading = H_BODY)]
    pub top_p: Option<f64>,
    /// Sampling: `top_k` (sent only when given).
    #[arg(long, allow_negative_numbers = true, help_heading = H_BODY)]
    pub top_k: Option<i64>,
    /// Sampling: `min_p` (sent only when given).
    #[arg(long, help_heading = H_BODY)]
    pub min_p: Option<f64>,
    /// Sampling: `presence_penalty` (sent only when given).
    #[arg(long, allow_negative_numbers = true, help_heading = H_BODY)]
    pub presence_penalty: Option<f64>,
    /// Sampling: `frequency_penalty` (sent only when given).
    #[arg(long, allow_negative_numbers = true, help_heading = H_BODY)]
    pub frequency_penalty: Option<f64>,
    /// Sampling: `repetition_penalty` (sent only when given).
    #[arg(long, help_heading = H_BODY)]
    pub repetition_penalty: Option<f64>,

    /// Send `max_tokens` instead of `max_completion_tokens` on chat.
    #[arg(long, help_heading = H_BODY)]
    pub use_legacy_max_tokens: bool,

    /// Ask for cumulative usage on every chunk (`stream_options.continuous_usage_stats`), for exact
    /// per-chunk token counts and token-weighted ITL. A server that ignores it (llama.cpp) is
    /// warned about once; its tokens are then counted from the final usage.
    #[arg(long, help_heading = H_BODY)]
    pub per_chunk_usage: bool,

    /// Extra body fields, `key:value` (value parsed as JSON when it parses, else a string), or one
    /// JSON object. Repeatable; merged into every request body, overriding. Fields specperf owns
    /// are refused: `stream` (--streaming), `stream_options` (--per-chunk-usage), `model`
    /// (--model), `messages` and `prompt` (--input-file).
    #[arg(long, num_args = 1.., action = clap::ArgAction::Append, help_heading = H_BODY)]
    pub extra_inputs: Vec<String>,

    /// Requests kept in flight (closed loop; default 64). With --request-rate: a cap on requests
    /// in flight (arrivals wait for a free slot, which shows as schedule lag).
    /// A comma list (`8,16,32`) is a sweep: one run per value, see "Sweeps" below.
    #[arg(long, visible_alias = "max-concurrency", allow_negative_numbers = true, help_heading = H_LOAD)]
    pub concurrency: Option<List<usize>>,

    /// Requests to send. Default: each sample of the collection once. More than the collection
    /// cycles through it again (reported as dataset reuse).
    /// A comma list is a sweep.
    #[arg(long, visible_aliases = ["num-requests", "num-prompts"], allow_negative_numbers = true, help_heading = H_LOAD)]
    pub request_count: Option<List<u64>>,

    /// Load shape: open loop, duration, warmup, ramp-up, shards.
    #[command(flatten)]
    pub load: LoadArgs,

    /// The AgentX replay (`--scenario agentx`).
    #[command(flatten)]
    pub agentx: AgentxArgs,

    /// Limit on TCP connect plus TLS handshake, seconds.
    #[arg(long, default_value_t = 30.0, allow_negative_numbers = true, help_heading = H_LIMITS)]
    pub connect_timeout_seconds: f64,

    /// Limit from sending a request to its first content or reasoning token, seconds.
    #[arg(long, default_value_t = 600.0, allow_negative_numbers = true, help_heading = H_LIMITS)]
    pub ttft_timeout_seconds: f64,

    /// Limit on silence between SSE events once tokens flow, seconds.
    #[arg(long, default_value_t = 120.0, allow_negative_numbers = true, help_heading = H_LIMITS)]
    pub idle_timeout_seconds: f64,

    /// Limit on one whole request, seconds (AIPerf's default).
    #[arg(long, default_value_t = 21600.0, allow_negative_numbers = true, help_heading = H_LIMITS)]
    pub request_timeout_seconds: f64,

    /// Deadline for the whole run, seconds; in-flight requests are then cancelled, artifacts are
    /// written and the exit code is 124.
    #[arg(long, default_value_t = 86400.0, allow_negative_numbers = true, help_heading = H_LIMITS)]
    pub timeout_seconds: f64,

    /// Stop the run (exit 1) when no request finishes for this long, seconds.
    #[arg(long, default_value_t = 300.0, allow_negative_numbers = true, help_heading = H_LIMITS)]
    pub stall_timeout_seconds: f64,

    /// Wait up to this long for the server to answer GET /v1/models before starting, seconds
    /// (0: one attempt).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true, help_heading = H_LIMITS)]
    pub wait_for_model_timeout: f64,

    /// Exit 1 when more than this fraction of requests fail.
    #[arg(long, default_value_t = 0.05, allow_negative_numbers = true, help_heading = H_LIMITS)]
    pub failed_request_threshold: f64,

    /// Largest SSE event (or non-streaming body) accepted, bytes.
    #[arg(long, default_value_t = 4 << 20, help_heading = H_LIMITS)]
    pub max_event_bytes: usize,

    /// Send a request answered 429 (rate limited) again, up to N times, after the server's
    /// Retry-After (1 s without one, at most 60 s), while its first-token deadline allows; each
    /// is counted as retried and the wait is part of its latency. Default 0: a 429 is recorded as
    /// an http_status failure.
    #[arg(long, default_value_t = 0, value_name = "N", help_heading = H_LIMITS)]
    pub rate_limit_retries: u32,

    /// Metrics scraping and acceptance length.
    #[command(flatten)]
    pub scrape: ScrapeArgs,

    /// GPU telemetry and energy per token.
    #[command(flatten)]
    pub telemetry: TelemetryArgs,

    /// Artifact directory: records.jsonl, summary.json, console.txt, AIPerf's profile_export.jsonl,
    /// profile_export_aiperf.{json,csv}, server_metrics_export.json and inputs.json. Default:
    /// `artifacts/<model>-<endpoint>-concurrency<N>` (open loop: `-rate<R>[-concurrency<N>]`).
    /// An earlier run found there is moved aside to
    /// `<dir>.prev-<unix seconds>` (said in the warnings).
    #[arg(long, visible_alias = "output-artifact-dir", help_heading = H_OUTPUT)]
    pub artifact_dir: Option<PathBuf>,

    /// Goodput objectives, `TAG:VALUE` separated by spaces or repeated: a request is good when it
    /// succeeded and met every one. Tags: `ttft` / `time_to_first_token` (ms), `tpot` /
    /// `inter_token_latency` (ms), `e2el` / `request_latency` (ms), at most the value;
    /// `output_token_throughput_per_user` (tokens/s), at least the value. A request without the
    /// metric (ITL of a one-token answer) is not good.
    #[arg(long, num_args = 1.., action = clap::ArgAction::Append, value_name = "TAG:VALUE", help_heading = H_OUTPUT)]
    pub goodput: Vec<String>,

    /// InferenceX: also write the benchmark_serving-style raw throughput JSON `<NAME>.json`
    /// (a file name, not a path; a trailing `.json` is not doubled).
    #[arg(long, env = "RESULT_FILENAME", value_name = "NAME", help_heading = H_OUTPUT)]
    pub result_filename: Option<String>,

    /// Directory for `<RESULT_FILENAME>.json` (default: the artifact directory). Created and
    /// checked writable before the first request, as --artifact-dir is (exit 2 if not).
    #[arg(long, env = "RESULT_DIR", help_heading = H_OUTPUT)]
    pub result_dir: Option<PathBuf>,

    /// Live display on stderr: `simple` is a progress bar when stderr is a terminal, else a plain
    /// line every --progress-interval seconds; `none` prints nothing until the final table.
    /// AIPerf's `dashboard` means `simple`.
    #[arg(long, value_enum, default_value_t = Ui::Simple, help_heading = H_OUTPUT)]
    pub ui: Ui,

    /// Seconds between plain progress lines when stderr is not a terminal (0: none).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true, help_heading = H_OUTPUT)]
    pub progress_interval: f64,

    /// Sweeps, repeated runs and SLA search.
    #[command(flatten)]
    pub sweep: SweepArgs,

    /// Sweeps that start and stop the server themselves (`--serve-cmd`).
    #[command(flatten)]
    pub serve: ServeArgs,

    /// Settings of the embedded simulator (used only without --url).
    #[command(flatten)]
    pub sim: EmbeddedSimArgs,
}

/// GPU telemetry and energy per token over the profiling window.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = H_TELEMETRY)]
pub struct TelemetryArgs {
    /// Read GPU power, energy counters, utilisation, memory and clocks during the run, and report
    /// energy per token over exactly the profiling window (AIPerf's flag). SOURCE: DCGM exporter
    /// pages (URL or host:port, one per node), `nvml` (alias `pynvml`), `nvidia-smi`, `amd-smi`
    /// (alias `amdsmi`); `dashboard` is accepted and changes nothing. Without a SOURCE: AIPerf's
    /// DCGM pages (localhost:9400 and :9401), else NVML, else nvidia-smi / amd-smi; with
    /// --sim-gpus, the embedded simulator's own DCGM page.
    #[arg(long, num_args = 0.., value_name = "SOURCE", action = clap::ArgAction::Append)]
    pub gpu_telemetry: Option<Vec<String>>,

    /// With --gpu-telemetry: no source answering is an error before the run (exit 2) instead of
    /// a warning and a run without GPU telemetry.
    #[arg(long, requires = "gpu_telemetry")]
    pub require_gpu_telemetry: bool,

    /// Seconds between GPU telemetry reads (AIPerf's AIPERF_GPU_COLLECTION_INTERVAL). Reads are
    /// also taken the moment the profiling window opens and closes.
    #[arg(
        long,
        env = "AIPERF_GPU_COLLECTION_INTERVAL",
        default_value_t = 0.333,
        allow_negative_numbers = true
    )]
    pub gpu_telemetry_interval: f64,
}

/// `--scenario`: which replay the traces drive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// The AgentX replay (InferenceX's agentic coding-agent traces: session trees of a root
    /// conversation and its subagents, one tree per --concurrency lane), without AIPerf's
    /// submission locks.
    Agentx,
    /// AIPerf's `inferencex-agentx-mvp`: the AgentX replay with the scenario's locks (streaming,
    /// `ignore_eos`, --benchmark-duration of at least 900 s, default 1800, a pinned
    /// --public-dataset corpus). A conflicting value is an error unless --unsafe-override, which
    /// runs it and marks the result `submission_valid: false`.
    InferencexAgentxMvp,
}

/// The AgentX replay's flags (AIPerf's names), shared by `replay --scenario agentx` and
/// `profile`.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = H_AGENTX)]
pub struct AgentxArgs {
    /// Replay AgentX traces (see `specperf profile --help`); --input-file or --public-dataset
    /// gives the traces, --tokenizer cuts the prompts.
    #[arg(long, value_enum)]
    pub scenario: Option<Scenario>,

    /// AgentX trace corpus by AIPerf alias (e.g. semianalysis_cc_traces_weka_062126), read
    /// offline from the Hugging Face hub cache: $HF_HUB_CACHE (else $HF_HOME/hub, else
    /// ~/.cache/huggingface/hub)/`datasets--ORG--NAME/snapshots/REV/traces.jsonl`. Fetch it
    /// first with `hf download --repo-type dataset <repo>`.
    #[arg(long, conflicts_with = "input_file")]
    pub public_dataset: Option<String>,

    /// AgentX: earliest point of a trace's recorded time span where a lane joins it (t* is
    /// drawn between the two ratios; default 0.0).
    #[arg(long, allow_negative_numbers = true)]
    pub trajectory_start_min_ratio: Option<f64>,

    /// AgentX: latest such point (default 1.0; InferenceX uses 0.25 / 0.75).
    #[arg(long, allow_negative_numbers = true)]
    pub trajectory_start_max_ratio: Option<f64>,

    /// AgentX: after the primers, each lane sends this many more requests of its tree
    /// (`max_tokens` 1, recorded idle removed) to fill the prefix cache before profiling.
    #[arg(long, default_value_t = 0)]
    pub warmup_requests_per_lane: u32,

    /// AgentX: the longest the warmup may take to drain, seconds; then what is left of it is
    /// cancelled and profiling starts (default 1800).
    #[arg(long, allow_negative_numbers = true)]
    pub warmup_grace_period: Option<f64>,

    /// AgentX: AIPerf's name for --warmup-grace-period; wins when both are given.
    #[arg(long, allow_negative_numbers = true)]
    pub agentic_warmup_grace_period: Option<f64>,

    /// AgentX: a session tree idle this long (seconds) has its pending timers advanced
    /// (InferenceX: 300). Default: no per-tree cap (the whole-system 10 s cap always applies).
    #[arg(long, allow_negative_numbers = true)]
    pub trace_idle_gap_cap_seconds: Option<f64>,

    /// AgentX: with nothing in flight for this long (seconds), every pending timer moves
    /// earlier so the next request goes out (the scenario locks it at 10; another value needs
    /// --unsafe-override under --scenario inferencex-agentx-mvp).
    #[arg(long, allow_negative_numbers = true)]
    pub system_idle_gap_cap_seconds: Option<f64>,

    /// AgentX: print a realtime stats block on stderr every this many seconds (requests done,
    /// in flight, errors, throughputs, TTFT/ITL p50, live AL). Default: off.
    #[arg(long, allow_negative_numbers = true)]
    pub stats_interval: Option<f64>,

    /// AgentX: drop traces whose peak context (input + output of any turn) exceeds this.
    #[arg(long)]
    pub max_context_length: Option<u64>,

    /// AgentX: cap on a root turn's `max_tokens` (subagent turns are never capped).
    #[arg(long)]
    pub synthesis_max_osl: Option<u64>,

    /// AgentX: let more lanes than traces reuse traces. Accepted for AIPerf's command line; the
    /// replay always wraps (each reuse gets its own cache-bust marker, as InferenceX relies on).
    #[arg(long)]
    pub allow_dataset_wrap: bool,

    /// AgentX: send Dynamo's `nvext.session_control` (session id, timeout, `bind` on a session's
    /// first request) in every body.
    #[arg(long)]
    pub use_dynamo_conv_aware_routing: bool,

    /// AgentX: the `nvext.session_control` timeout, seconds.
    #[arg(long, default_value_t = 3600)]
    pub dynamo_session_timeout_seconds: u64,

    /// Run even where --scenario inferencex-agentx-mvp forbids a value; the result is marked
    /// `submission_valid: false` (reason `unsafe_override`).
    #[arg(long)]
    pub unsafe_override: bool,
}

/// `--custom-dataset-type` of `specperf profile`: the only file format it replays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProfileDatasetType {
    /// A directory of `*.json` Weka traces (one per file) or a `traces.jsonl`.
    #[value(name = "weka_trace")]
    WekaTrace,
}

const PROFILE_HELP: &str = "InferenceX runs `aiperf profile --scenario inferencex-agentx-mvp \
--url ... --endpoint /v1/chat/completions --endpoint-type chat --streaming --model M --tokenizer M \
--concurrency N --benchmark-duration S ... --public-dataset semianalysis_cc_traces_weka_062126`; \
replace `aiperf` by `specperf`. Flags specperf does not need (--no-gpu-telemetry, \
--tokenizer-trust-remote-code, --use-server-token-count) are accepted and named in a warning. \
Environment: AIPERF_HTTP_X_DYNAMO_SESSION_ID_FROM_CORRELATION_ID, \
AIPERF_HTTP_X_SESSION_ID_FROM_CORRELATION_ID, AIPERF_HTTP_X_SESSION_AFFINITY_FROM_CORRELATION_ID, \
AIPERF_HTTP_X_SMG_ROUTING_KEY_FROM_CORRELATION_ID (session routing headers), \
AIPERF_AGENTX_CONTEXT_OVERFLOW_SUBSTRINGS (JSON list), AIPERF_AGENTX_CONTEXT_OVERFLOW_RATE_LIMIT, \
AIPERF_DAG_FAIL_FAST, AIPERF_SERVER_METRICS_COLLECTION_INTERVAL; \
AIPERF_DATASET_WEKA_LIVE_ASSISTANT_RESPONSES=1 is not supported. Exit codes as for replay.";

/// `specperf profile`: AIPerf's flags for the AgentX benchmark (spec: InferenceX
/// `build_replay_cmd`). Each maps onto the `replay` setting of the same meaning.
#[derive(Debug, Args, Clone)]
pub struct ProfileArgs {
    /// Server base URL.
    #[arg(short = 'u', long, help_heading = H_TARGET)]
    pub url: Option<String>,

    /// Model name sent in every request (default: the first model of GET /v1/models).
    #[arg(short = 'm', long, visible_alias = "model-names", help_heading = H_TARGET)]
    pub model: Option<String>,

    /// Endpoint path (default /v1/chat/completions).
    #[arg(long, visible_alias = "custom-endpoint", help_heading = H_TARGET)]
    pub endpoint: Option<String>,

    /// Endpoint type (AgentX sends chat requests).
    #[arg(long, value_enum, default_value_t = EndpointType::Chat, help_heading = H_TARGET)]
    pub endpoint_type: EndpointType,

    /// Stream responses (required by the scenario; on by default).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", help_heading = H_TARGET)]
    pub streaming: bool,

    /// Extra HTTP header `Name:Value` (repeatable).
    #[arg(short = 'H', long = "header", num_args = 1.., action = clap::ArgAction::Append, help_heading = H_TARGET)]
    pub headers: Vec<String>,

    /// Bearer token for `Authorization`.
    #[arg(long, env = "OPENAI_API_KEY", hide_env_values = true, help_heading = H_TARGET)]
    pub api_key: Option<String>,

    /// A `traces.jsonl` or a directory of `*.json` traces (with --custom-dataset-type
    /// weka_trace). The scenario cannot pin a local corpus: needs --unsafe-override there.
    #[arg(long, help_heading = H_INPUT)]
    pub input_file: Option<PathBuf>,

    /// Format of --input-file.
    #[arg(long, value_enum, help_heading = H_INPUT)]
    pub custom_dataset_type: Option<ProfileDatasetType>,

    /// Tokenizer the prompts are cut with: a `tokenizer.json`, a model directory, or a Hugging
    /// Face model id whose snapshot is in the hub cache (never downloaded).
    #[arg(long, help_heading = H_INPUT)]
    pub tokenizer: Option<PathBuf>,

    /// Keep the first N traces that fit --max-context-length (default: all).
    #[arg(long, help_heading = H_INPUT)]
    pub num_dataset_entries: Option<usize>,

    /// Seed of the t* draws and prompt blocks (default 0).
    #[arg(long, help_heading = H_INPUT)]
    pub random_seed: Option<u64>,

    /// Extra body fields, `key:value` or a JSON object (as for replay).
    #[arg(long, num_args = 1.., action = clap::ArgAction::Append, help_heading = H_INPUT)]
    pub extra_inputs: Vec<String>,

    /// Accepted, noted: token counts always come from the server's `usage`.
    #[arg(long, help_heading = H_INPUT)]
    pub use_server_token_count: bool,

    /// Accepted, noted: tokenizers are read from `tokenizer.json`, no code is run.
    #[arg(long, help_heading = H_INPUT)]
    pub tokenizer_trust_remote_code: bool,

    /// Session trees replayed at once (one per lane; subagents add requests in flight). A comma
    /// list is a sweep (one AgentX run per value).
    #[arg(long, allow_negative_numbers = true, help_heading = H_LOAD)]
    pub concurrency: Option<List<usize>>,

    /// Profiling length, seconds (scenario: at least 900, default 1800).
    #[arg(long, allow_negative_numbers = true, help_heading = H_LOAD)]
    pub benchmark_duration: Option<f64>,

    /// After --benchmark-duration, wait this long for requests in flight, then cancel them.
    #[arg(long, default_value_t = 30.0, allow_negative_numbers = true, help_heading = H_LOAD)]
    pub benchmark_grace_period: f64,

    /// Forbidden by the scenario (it would replay every turn back to back); not supported.
    #[arg(long, help_heading = H_LOAD)]
    pub ignore_trace_delays: bool,

    /// The AgentX flags.
    #[command(flatten)]
    pub agentx: AgentxArgs,

    /// Limit on one whole request, seconds.
    #[arg(long, default_value_t = 21600.0, allow_negative_numbers = true, help_heading = H_LIMITS)]
    pub request_timeout_seconds: f64,

    /// Live threshold: when more than this fraction of profiling requests fail (checked once
    /// max(concurrency, 10) have finished), the run stops and exits 1. Default: none.
    #[arg(long, allow_negative_numbers = true, help_heading = H_LIMITS)]
    pub failed_request_threshold: Option<f64>,

    /// More Prometheus endpoints to scrape, besides the --url's own /metrics.
    #[arg(long, num_args = 1.., action = clap::ArgAction::Append, help_heading = H_METRICS)]
    pub server_metrics: Vec<String>,

    /// Timeslice length of the server-metrics export, seconds.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true, help_heading = H_METRICS)]
    pub slice_duration: f64,

    /// GPU telemetry and energy per token.
    #[command(flatten)]
    pub telemetry: TelemetryArgs,

    /// No GPU telemetry (specperf's default; AIPerf's flag, accepted).
    #[arg(long, conflicts_with = "gpu_telemetry", help_heading = H_TELEMETRY)]
    pub no_gpu_telemetry: bool,

    /// Where every artifact is written.
    #[arg(long, visible_alias = "artifact-dir", help_heading = H_OUTPUT)]
    pub output_artifact_dir: Option<PathBuf>,

    /// Sweeps, repeated runs and SLA search.
    #[command(flatten)]
    pub sweep: SweepArgs,
}

/// The live display (`--ui`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Ui {
    /// Progress bar on a terminal, periodic plain lines otherwise.
    #[value(alias = "dashboard")]
    Simple,
    /// Nothing until the final table.
    None,
}

/// Load shape beyond a fixed concurrency.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = H_LOAD)]
pub struct LoadArgs {
    /// Open loop: requests per second, released at precomputed arrival times whatever the server
    /// does (latency is also reported from the intended time). `inf`: every request at once
    /// (vLLM's default), capped by --concurrency when given. A comma list is a sweep.
    #[arg(long, allow_negative_numbers = true)]
    pub request_rate: Option<List<f64>>,

    /// Open loop: inter-arrival distribution.
    #[arg(long, visible_alias = "request-rate-mode", value_enum, default_value_t = ArrivalPattern::Poisson)]
    pub arrival_pattern: ArrivalPattern,

    /// Open loop, gamma: shape of the gamma gaps (1 = Poisson, < 1 burstier, > 1 smoother).
    /// Implies --arrival-pattern gamma when not 1.
    #[arg(long, visible_alias = "vllm-burstiness", default_value_t = 1.0)]
    pub arrival_smoothness: f64,

    /// Seed of the arrival schedule (ChaCha8; identical on every platform and shard).
    #[arg(long, default_value_t = 0)]
    pub random_seed: u64,

    /// Stop issuing requests after this many seconds (then --benchmark-grace-period).
    #[arg(long, allow_negative_numbers = true)]
    pub benchmark_duration: Option<f64>,

    /// After --benchmark-duration, wait this long for requests in flight, then cancel them and
    /// count them as failed (`grace_period_expired`). `inf` waits for every request.
    #[arg(long, default_value_t = 30.0, allow_negative_numbers = true)]
    pub benchmark_grace_period: f64,

    /// Warmup requests before profiling (excluded from every statistic and from the AL window).
    #[arg(long, allow_negative_numbers = true)]
    pub warmup_request_count: Option<u64>,

    /// Warmup for this many seconds before profiling.
    #[arg(long, allow_negative_numbers = true)]
    pub warmup_duration: Option<f64>,

    /// Concurrency of the warmup phase (default: --concurrency).
    #[arg(long, allow_negative_numbers = true)]
    pub warmup_concurrency: Option<usize>,

    /// Closed loop: grow the requests in flight linearly from 1 to --concurrency over this many
    /// seconds.
    #[arg(long, allow_negative_numbers = true)]
    pub concurrency_ramp_duration: Option<f64>,

    /// Open loop: grow the arrival rate linearly from 0 to --request-rate over this many seconds.
    #[arg(long, allow_negative_numbers = true)]
    pub request_rate_ramp_duration: Option<f64>,

    /// Open loop: an arrival released more than this many ms after its intended time counts as
    /// late.
    #[arg(long, default_value_t = 5.0, allow_negative_numbers = true)]
    pub schedule_lag_tolerance_ms: f64,

    /// Replay the input file's `timestamp`s (ms). On by default when every row has one and no
    /// --request-rate is given.
    #[arg(long)]
    pub fixed_schedule: bool,

    /// Trace replay: shift timestamps so the first replayed row starts at 0.
    #[arg(long)]
    pub fixed_schedule_auto_offset: bool,

    /// Trace replay: skip rows before this timestamp (ms).
    #[arg(long)]
    pub fixed_schedule_start_offset: Option<f64>,

    /// Trace replay: skip rows after this timestamp (ms).
    #[arg(long)]
    pub fixed_schedule_end_offset: Option<f64>,

    /// Trace replay: play the trace this many times faster (2 = half the gaps).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub trace_speedup: f64,

    /// Run shard `i/N` of a sharded run (0-based). Default: from SLURM_PROCID/SLURM_NTASKS, or
    /// JOB_COMPLETION_INDEX with --shard-count; else a single process.
    #[arg(long)]
    pub shard: Option<String>,

    /// Total shards of a Kubernetes Indexed Job (with JOB_COMPLETION_INDEX).
    #[arg(long, env = "SPECPERF_SHARD_COUNT")]
    pub shard_count: Option<u32>,

    /// The shard that scrapes the metrics endpoints (the others do not, so counters are read
    /// once).
    #[arg(long, default_value_t = 0)]
    pub metrics_shard: u32,
}

/// Where and how the servers' Prometheus counters are scraped for acceptance length.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = H_METRICS)]
pub struct ScrapeArgs {
    /// Prometheus endpoint of a worker to scrape (repeatable; every decode worker of a
    /// deployment). `host:port`, a bare port, or a URL; `/metrics` is appended when the URL has no
    /// metrics path. Without it: SPEEDBENCH_DECODE_METRICS_URLS, SPEEDBENCH_METRICS_URLS,
    /// AIPERF_SERVER_METRICS_URLS, SPEEDBENCH_METRICS_PORTS (first set wins), else the target's own
    /// /metrics. SPEEDBENCH_TRTLLM_JSON_METRICS_URLS adds TensorRT-LLM JSON iteration-stats URLs.
    #[arg(long, visible_alias = "metrics-url", num_args = 1.., action = clap::ArgAction::Append)]
    pub server_metrics: Vec<String>,

    /// Do not scrape any metrics endpoint.
    #[arg(long, conflicts_with = "server_metrics")]
    pub no_server_metrics: bool,

    /// Seconds between scrapes during the run: AIPerf's server-metrics collection cadence (every
    /// family of every endpoint, for server_metrics_export.{json,csv}), the live AL, and the
    /// TensorRT-LLM JSON poll period.
    #[arg(
        long,
        env = "AIPERF_SERVER_METRICS_COLLECTION_INTERVAL",
        default_value_t = 0.333,
        allow_negative_numbers = true
    )]
    pub metrics_interval_seconds: f64,

    /// Timeslice length, seconds (AIPerf's --slice-duration): the timeslices of
    /// server_metrics_export.{json,csv} and the windows of profile_export_aiperf_timeslices.{csv,json}.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub slice_duration: f64,

    /// Per-scrape timeout, seconds. The baseline, before the first request, waits at most 3 s;
    /// an endpoint whose baseline failed is reported and not scraped again.
    #[arg(long, env = "SPEEDBENCH_METRICS_CURL_TIMEOUT", default_value_t = 10.0)]
    pub metrics_timeout_seconds: f64,

    /// Wait after the last response before the final scrape (engines export counters
    /// asynchronously). Default 10 s against a server, 0 against the embedded simulator.
    #[arg(long, allow_negative_numbers = true)]
    pub metrics_settle_seconds: Option<f64>,

    /// Engine whose speculative-decoding counters to read (auto: detect from the page).
    #[arg(long, value_enum, default_value_t = SpecEngine::Auto)]
    pub spec_engine: SpecEngine,

    /// Draft tokens per step (k), for validation and the fixed-k fallbacks. Default: inferred
    /// from the per-position counters where the engine has them.
    #[arg(long, allow_negative_numbers = true)]
    pub num_spec_tokens: Option<u32>,
}

/// Timing and acceptance of the simulator.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = H_SIM)]
pub struct EmbeddedSimArgs {
    /// Simulator: time to first token, ms.
    #[arg(long = "sim-ttft-ms", default_value_t = 50.0)]
    pub ttft_ms: f64,
    /// Simulator: time per decode step, ms.
    #[arg(long = "sim-itl-ms", default_value_t = 10.0)]
    pub itl_ms: f64,
    /// Simulator: draft tokens per step.
    #[arg(long = "sim-k", default_value_t = 3)]
    pub k: u32,
    /// Simulator: per-position acceptance probability.
    #[arg(long = "sim-acceptance-prob", default_value_t = 0.7)]
    pub acceptance_prob: f64,
    /// Simulator: ignore `continuous_usage_stats` (usage on the final chunk only), as llama.cpp
    /// does.
    #[arg(long = "sim-ignore-continuous-usage")]
    pub ignore_continuous_usage: bool,
    /// Simulator: tokens per KV block (prefix-cache granularity, vLLM's --block-size).
    #[arg(long = "sim-kv-block-tokens", default_value_t = 16)]
    pub kv_block_tokens: u32,
    /// Simulator: KV blocks per engine (default 131072: 2,097,152 tokens of 16-token blocks).
    /// Running requests hold blocks for prompt and output; freed prompt blocks stay cached
    /// (LRU) for later prompts with the same prefix.
    #[arg(long = "sim-kv-blocks", default_value_t = crate::sim::SimConfig::DEFAULT_KV_BLOCKS)]
    pub kv_blocks: u64,
    /// Simulator: requests running at once per engine (vLLM's --max-num-seqs); more wait in
    /// arrival order (`vllm:num_requests_waiting`). Default: no limit but the KV blocks.
    #[arg(long = "sim-max-running")]
    pub max_running: Option<u32>,
    /// Simulator: prefill speed, tokens/s; TTFT = --sim-ttft-ms + uncached prompt tokens at this
    /// rate, so prefix-cache hits show in TTFT. 0 = instant prefill.
    #[arg(long = "sim-prefill-tokens-per-s", default_value_t = crate::sim::SimConfig::DEFAULT_PREFILL_TOKENS_PER_S)]
    pub prefill_tokens_per_s: f64,
    /// Simulator: longest prompt + max tokens; longer requests get HTTP 400 with vLLM's "maximum
    /// context length" message. Default: what one engine's KV blocks hold.
    #[arg(long = "sim-max-model-len")]
    pub max_model_len: Option<u32>,
    /// Simulator: count prompt tokens with this tokenizer.json (or model directory): the sum over
    /// messages of each content's tokens, WITHOUT a chat template. Default: a stand-in of 4
    /// characters a token (plus 4 per chat message).
    #[arg(long = "sim-tokenizer", value_name = "PATH")]
    pub sim_tokenizer: Option<PathBuf>,
    /// Simulator: vLLM's --per-request-spec-decode-metrics: `summary` adds
    /// `metrics.speculative_decoding` to each non-streamed body and to the final usage chunk of
    /// streams that ask `stream_options.include_usage`; `detailed` adds the per-step arrays.
    #[arg(
        long = "sim-per-request-spec-decode-metrics",
        value_enum,
        value_name = "MODE",
        default_value_t = crate::sim::PerRequestSpec::None
    )]
    pub per_request_spec: crate::sim::PerRequestSpec,
    /// Simulator: `TEXT=P` (repeatable): requests whose prompt contains TEXT accept each draft
    /// position with probability P; the first matching rule wins, others use
    /// --sim-acceptance-prob. See `specperf sim --help` (--acceptance-group).
    #[arg(long = "sim-acceptance-group", value_name = "TEXT=P")]
    pub acceptance_groups: Vec<crate::sim::AcceptanceGroup>,
    /// Simulator: N simulated H200 GPUs behind its engines, served as a DCGM exporter's page at
    /// the simulator's /dcgm/metrics (90 W idle, +25 W per active request), which
    /// --gpu-telemetry without a source reads. See `specperf sim --help` (--gpus).
    #[arg(long = "sim-gpus", value_name = "N")]
    pub sim_gpus: Option<u32>,
}

/// `specperf sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// Address to bind. Loopback by default; anything else exposes the simulator to the network.
    #[arg(long, default_value = "127.0.0.1", help_heading = H_SIM_SERVER)]
    pub host: std::net::IpAddr,
    /// First port (0 picks a free one). With --servers N, ports port..port+N-1.
    #[arg(long, default_value_t = 8000, help_heading = H_SIM_SERVER)]
    pub port: u16,
    /// API servers (one listener and /metrics each).
    #[arg(long, default_value_t = 1, help_heading = H_SIM_SERVER)]
    pub servers: u32,
    /// Data-parallel engines per server (`engine` label).
    #[arg(long, default_value_t = 1, help_heading = H_SIM_SERVER)]
    pub engines: u32,
    /// Served model name (empty accepts any).
    #[arg(long, default_value = "specperf-sim", help_heading = H_SIM_SERVER)]
    pub model: String,
    /// Time to first token, ms.
    #[arg(long, default_value_t = 50.0, help_heading = H_SIM_TIMING)]
    pub ttft_ms: f64,
    /// Time per decode step, ms.
    #[arg(long, default_value_t = 10.0, help_heading = H_SIM_TIMING)]
    pub itl_ms: f64,
    /// Uniform jitter on every delay, as a fraction (0.1 = ±10 %).
    #[arg(long, default_value_t = 0.0, help_heading = H_SIM_TIMING)]
    pub jitter: f64,
    /// Seed of all random draws.
    #[arg(long, default_value_t = 0, help_heading = H_SIM_TIMING)]
    pub seed: u64,
    /// Draft tokens per step (num_speculative_tokens).
    #[arg(long, default_value_t = 3, help_heading = H_SIM_SPEC)]
    pub k: u32,
    /// Per-position acceptance probability (until the first rejection).
    #[arg(long, default_value_t = 0.7, conflicts_with = "target_al", help_heading = H_SIM_SPEC)]
    pub acceptance_prob: f64,
    /// Target mean acceptance length instead of a probability (1 ≤ AL ≤ k+1).
    #[arg(long, help_heading = H_SIM_SPEC)]
    pub target_al: Option<f64>,
    /// Output tokens when a request sets no max_tokens.
    #[arg(long, default_value_t = 256, help_heading = H_SIM_RESPONSES)]
    pub default_max_tokens: u32,
    /// Chance per token of stopping early with finish_reason "stop" (ignored with ignore_eos).
    #[arg(long, default_value_t = 0.0, help_heading = H_SIM_RESPONSES)]
    pub eos_prob: f64,
    /// Send every token of a step as its own chunk (default: one chunk per step).
    #[arg(long, help_heading = H_SIM_RESPONSES)]
    pub split_steps: bool,
    /// Ignore `stream_options.continuous_usage_stats`: usage on the final chunk only, as
    /// llama.cpp's server does.
    #[arg(long, help_heading = H_SIM_RESPONSES)]
    pub ignore_continuous_usage: bool,
    /// First N output tokens are reasoning.
    #[arg(long, default_value_t = 0, help_heading = H_SIM_RESPONSES)]
    pub reasoning_tokens: u32,
    /// Delta field for reasoning text.
    #[arg(long, value_enum, default_value_t = ReasoningField::ReasoningContent, help_heading = H_SIM_RESPONSES)]
    pub reasoning_field: ReasoningField,
    /// Inject a fault at random: `NAME=RATE` (repeatable), e.g. `http500=0.01`. Per request, send
    /// header `x-specperf-fault: NAME`. Names: http429 http500 http503 close-mid-stream stall
    /// stall-mid-stream slow-headers malformed-chunk error-mid-stream oversized-chunk
    /// close-after-done (the response completes, then its kept-alive connection is closed when
    /// the next request arrives on it, as llama-server does).
    #[arg(long = "fault", value_parser = parse_fault_rate, help_heading = H_SIM_FAULTS)]
    pub faults: Vec<(Fault, f64)>,
    /// Faults by arrival order instead of at random: completion request n gets entry n mod len of
    /// this comma-separated list (`none` = healthy), e.g. `none,http500,none,stall`. Exact and
    /// repeatable mixes for tests; excludes --fault.
    #[arg(long, value_delimiter = ',', value_parser = parse_fault_or_none, help_heading = H_SIM_FAULTS)]
    pub fault_sequence: Vec<Option<Fault>>,
    /// --fault applies only to requests arriving this many seconds after the simulator started
    /// (e.g. past an AgentX warmup, which stops the run on a failed request).
    #[arg(long, default_value_t = 0.0, value_name = "SECONDS", help_heading = H_SIM_FAULTS)]
    pub fault_after_seconds: f64,
    /// Which server's /metrics page to imitate: vllm (`vllm:` counters per engine, moving every
    /// step) or llamacpp (llama-server's `llamacpp:` counters, moving when a request ends; each
    /// response then also carries llama-server's root `timings` on its final body or chunk, with
    /// draft_n and draft_n_accepted when drafts were proposed).
    #[arg(long, value_enum, default_value_t = MetricsFlavor::Vllm, help_heading = H_SIM_RESPONSES)]
    pub metrics_flavor: MetricsFlavor,
    /// Admission limit, as a rate-limited gateway: a token bucket of BURST requests (default: one
    /// second's worth) refilled at RPS requests per second, over all servers. Completion requests
    /// finding it empty get HTTP 429 with Retry-After (seconds) and an OpenAI error body.
    #[arg(long, value_name = "RPS[,BURST]", allow_hyphen_values = true, help_heading = H_SIM_FAULTS)]
    pub rate_limit: Option<String>,
    /// Delay of the slow-headers fault, ms.
    #[arg(long, default_value_t = 2000.0, help_heading = H_SIM_FAULTS)]
    pub slow_headers_ms: f64,
    /// Size of the oversized-chunk event, bytes.
    #[arg(long, default_value_t = 8 << 20, help_heading = H_SIM_FAULTS)]
    pub oversized_bytes: usize,
    /// Serve HTTPS with this certificate chain (PEM); needs --tls-key.
    #[arg(long, requires = "tls_key", help_heading = H_SIM_SERVER)]
    pub tls_cert: Option<PathBuf>,
    /// Private key (PEM) for --tls-cert.
    #[arg(long, requires = "tls_cert", help_heading = H_SIM_SERVER)]
    pub tls_key: Option<PathBuf>,
    /// Tokens per KV block (prefix-cache granularity, vLLM's --block-size).
    #[arg(long, default_value_t = 16, help_heading = H_SIM_TIMING)]
    pub kv_block_tokens: u32,
    /// KV blocks per engine (default 131072: 2,097,152 tokens of 16-token blocks). Running
    /// requests hold blocks for prompt and output (admission reserves the whole output, so
    /// nothing is preempted); freed prompt blocks stay cached (LRU) for later prompts with the
    /// same prefix. `vllm:prefix_cache_queries`/`hits` count prompt tokens looked up and found
    /// (the leading run of cached full blocks, at most the prompt minus one token), and
    /// `vllm:kv_cache_usage_perc` the blocks filled.
    #[arg(long, default_value_t = crate::sim::SimConfig::DEFAULT_KV_BLOCKS, help_heading = H_SIM_TIMING)]
    pub kv_blocks: u64,
    /// Requests running at once per engine (vLLM's --max-num-seqs); more wait in arrival order
    /// (`vllm:num_requests_waiting`) and their TTFT includes the wait. Default: no limit but the
    /// KV blocks.
    #[arg(long, help_heading = H_SIM_TIMING)]
    pub max_running: Option<u32>,
    /// Prefill speed, tokens/s: TTFT = --ttft-ms + uncached prompt tokens at this rate, so
    /// prefix-cache hits show in TTFT. 0 = instant prefill.
    #[arg(long, default_value_t = crate::sim::SimConfig::DEFAULT_PREFILL_TOKENS_PER_S, help_heading = H_SIM_TIMING)]
    pub prefill_tokens_per_s: f64,
    /// Longest prompt + max tokens (vLLM's --max-model-len); longer requests get HTTP 400 with
    /// vLLM's "maximum context length" message. Default: what one engine's KV blocks hold.
    #[arg(long, help_heading = H_SIM_TIMING)]
    pub max_model_len: Option<u32>,
    /// Count prompt tokens with this tokenizer.json (or model directory): the sum over messages
    /// of each content's tokens (a completions prompt's, token-id arrays as they are), WITHOUT a
    /// chat template. Default: a stand-in of 4 characters a token (plus 4 per chat message).
    #[arg(long, value_name = "PATH", help_heading = H_SIM_TIMING)]
    pub tokenizer: Option<PathBuf>,
    /// vLLM's per-request acceptance report (its flag and values): `summary` adds
    /// `"metrics":{"speculative_decoding":{…}}` at the root of each non-streamed body and of the
    /// final usage chunk (`choices: []`) of streams that ask `stream_options.include_usage` (no
    /// usage chunk, no report, as vLLM): mean_acceptance_length (1 + accepted/steps, 1.0 without
    /// steps), draft_acceptance_rate (a fraction), acceptance_histogram (k+1 counts),
    /// num_spec_steps, num_accepted_draft_tokens, num_draft_tokens, num_spec_tokens; `detailed`
    /// adds per_step_accepted and per_step_drafted. Steps are the decode steps actually emitted
    /// (the first token is prefill, not a step), so the reports add up to the
    /// vllm:spec_decode_* counters exactly. Independently of this flag, a request setting
    /// `"return_spec_tokens_details": true` gets SGLang's `sglext.spec_tokens_details` (its own
    /// `choices: []` chunk before the usage chunk when streaming), and --metrics-flavor llamacpp
    /// adds llama.cpp's root `timings` (prompt_n, predicted_n, draft_n, draft_n_accepted, …) to
    /// the final body or chunk.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = crate::sim::PerRequestSpec::None, help_heading = H_SIM_SPEC)]
    pub per_request_spec_decode_metrics: crate::sim::PerRequestSpec,
    /// Acceptance per prompt group, `TEXT=P` (repeatable): a request whose message contents (or
    /// completions prompt) contain TEXT (case-sensitive) accepts each draft position with
    /// probability P in [0, 1]; the first matching rule wins, requests matching none use
    /// --acceptance-prob/--target-al. The vLLM /metrics page then adds the truth per group:
    /// specperf_sim:group_spec_decode_num_drafts_total, ..._num_draft_tokens_total and
    /// ..._num_accepted_tokens_total with label group="TEXT", and group="" for the requests
    /// matching no rule (the groups add up to the vllm:spec_decode_* counters).
    #[arg(long = "acceptance-group", value_name = "TEXT=P", help_heading = H_SIM_SPEC)]
    pub acceptance_groups: Vec<crate::sim::AcceptanceGroup>,
    /// Simulate N H200 GPUs and serve them as NVIDIA dcgm-exporter's page at /dcgm/metrics on
    /// every server (one node: every GPU on each). The engines (servers x engines, by global
    /// rank) own contiguous GPUs (8 GPUs, 2 engines: 0-3 and 4-7), and each engine's running
    /// requests are split evenly over its GPUs. Every 10 ms each GPU's power is redrawn as
    /// min(700, idle + per-active x its share of requests) W with ±1 % noise seeded by --seed;
    /// DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ) is the exact integral of that power at the
    /// scrape's instant. Also GPU_UTIL, MEM_COPY_UTIL, FB_USED/FB_FREE, SM/MEM_CLOCK and GPU_TEMP,
    /// derived from the load.
    #[arg(long, value_name = "N", help_heading = H_SIM_GPUS)]
    pub gpus: Option<u32>,
    /// Each simulated GPU's power with no active request, W.
    #[arg(
        long,
        default_value_t = 90.0,
        requires = "gpus",
        allow_negative_numbers = true,
        help_heading = H_SIM_GPUS
    )]
    pub gpu_idle_w: f64,
    /// Power each active request adds to a simulated GPU (its share of its engine's), W.
    #[arg(
        long,
        default_value_t = 25.0,
        requires = "gpus",
        allow_negative_numbers = true,
        help_heading = H_SIM_GPUS
    )]
    pub gpu_per_active_w: f64,
    /// From SECS after the start, the DCGM page adds DCGM_FI_DEV_XID_ERRORS (0) and
    /// DCGM_FI_DEV_POWER_VIOLATION (µs at the power limit): a field appearing mid-run.
    #[arg(
        long,
        value_name = "SECS",
        requires = "gpus",
        allow_negative_numbers = true,
        help_heading = H_SIM_GPUS
    )]
    pub gpu_add_field_after: Option<f64>,
    /// GPU@SECS: that GPU disappears from the DCGM page SECS after the start, for good (it fell
    /// off the bus), e.g. `--gpu-drop 3@30`.
    #[arg(long, value_name = "GPU@SECS", requires = "gpus", help_heading = H_SIM_GPUS)]
    pub gpu_drop: Option<String>,
}

const INJECT_EXIT_CODES: &str = "Exit codes: 0 rewritten (broken entries repaired), already synthetic, opted out \
(SYNTHETIC_ACCEPTANCE unset or false: recipe untouched), or --check found no broken entry; \
1 injection failed (unparseable recipe, no backend or speculative entry, no golden value, AL out of \
range for a role, mixed or unknown frameworks, a duplicate key that makes the edit ambiguous, the \
base: + zip_override_* sweep form; recipe untouched; other duplicate keys only warn) or --check found a broken entry; \
2 bad flag or environment value. Launchers must stop on failure: `specperf inject recipe.yaml || exit 1`.";

/// `specperf inject`.
#[derive(Debug, Args)]
#[command(after_help = INJECT_EXIT_CODES)]
pub struct InjectArgs {
    /// Recipe YAML (srt-slurm), rewritten in place unless --output is given.
    pub recipe: PathBuf,

    /// Framework: vllm, dynamo-vllm, sglang, dynamo-sglang, trt, trtllm, dynamo-trt, atom.
    /// Default: the recipe's backend.type. Must agree with the recipe.
    #[arg(env = "FRAMEWORK")]
    pub framework: Option<String>,

    /// Golden curve directory (golden_al_distribution/) or one curve file.
    #[arg(long, help_heading = H_INJECT)]
    pub golden: Option<PathBuf>,

    /// Write the result here (atomically) instead of rewriting the recipe.
    #[arg(long, help_heading = H_INJECT)]
    pub output: Option<PathBuf>,

    /// Report each speculative entry as real or synthetic (and at what AL); write nothing.
    #[arg(long, help_heading = H_INJECT)]
    pub check: bool,

    /// Opt in: `true` or `false` (any case). Unset or empty: off, the recipe is left untouched.
    #[arg(long, env = "SYNTHETIC_ACCEPTANCE", help_heading = H_INJECT)]
    pub synthetic_acceptance: Option<String>,

    /// Explicit AL instead of the golden lookup (refused when it contradicts the committed curve).
    #[arg(long, env = "SYNTHETIC_ACCEPTANCE_LENGTH", help_heading = H_INJECT)]
    pub synthetic_acceptance_length: Option<String>,

    /// Model prefix selecting the golden curve, e.g. dsv4, kimik2.5, minimaxm3.
    #[arg(long, env = "MODEL_PREFIX", help_heading = H_INJECT)]
    pub model_prefix: Option<String>,

    /// thinking_on or thinking_off; required for the golden lookup, never inferred.
    #[arg(long, env = "THINKING_MODE", help_heading = H_INJECT)]
    pub thinking_mode: Option<String>,
}

/// A `--fault` or `--fault-sequence` item clap could not take; clap prints it after the flag.
#[derive(Debug, thiserror::Error)]
enum FaultArgError {
    /// Not one of the simulator's fault names (`none` allowed where a healthy request is meant).
    #[error("unknown fault {name:?}{hint}")]
    UnknownFault {
        /// The name given.
        name: String,
        /// What else the flag takes, when it takes more than fault names.
        hint: &'static str,
    },
    /// A `--fault` item without `=`.
    #[error("expected NAME=RATE, got {0:?}")]
    NoRate(String),
    /// The rate after `=` is not a number.
    #[error("rate {0:?} is not a number")]
    BadRate(String),
}

fn parse_fault_or_none(s: &str) -> Result<Option<Fault>, FaultArgError> {
    if s.trim().eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    Fault::from_name(s)
        .map(Some)
        .ok_or_else(|| FaultArgError::UnknownFault {
            name: s.to_owned(),
            hint: " (or `none` for a healthy request)",
        })
}

fn parse_fault_rate(s: &str) -> Result<(Fault, f64), FaultArgError> {
    let (name, rate) = s
        .split_once('=')
        .ok_or_else(|| FaultArgError::NoRate(s.to_owned()))?;
    let fault = Fault::from_name(name).ok_or_else(|| FaultArgError::UnknownFault {
        name: name.to_owned(),
        hint: "",
    })?;
    let rate: f64 = rate
        .parse()
        .map_err(|_| FaultArgError::BadRate(rate.to_owned()))?;
    Ok((fault, rate))
}

/// A flag value that may be a comma list (`8,16,32`): one value is a plain run, more are a sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct List<T>(pub Vec<T>);

impl<T: Copy> List<T> {
    /// A one-value list.
    pub fn one(v: T) -> Self {
        List(vec![v])
    }

    /// The first value (the only one once a sweep has split its points).
    pub fn first(&self) -> T {
        self.0[0]
    }
}

impl<T: std::str::FromStr> std::str::FromStr for List<T>
where
    T::Err: std::fmt::Display,
{
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut out = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            if part.is_empty() {
                return Err(format!(
                    "{s:?}: an empty entry; write one value or a comma list such as 8,16,32"
                ));
            }
            out.push(part.parse().map_err(|e| format!("{part:?}: {e}"))?);
        }
        Ok(List(out))
    }
}

impl<T: std::fmt::Display> std::fmt::Display for List<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, v) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{v}")?;
        }
        Ok(())
    }
}

impl ReplayArgs {
    /// `--concurrency`'s value once a sweep has split its points (the first of a list).
    pub(crate) fn concurrency(&self) -> Option<usize> {
        self.concurrency.as_ref().map(List::first)
    }

    /// `--request-count`'s value (the first of a list).
    pub(crate) fn request_count(&self) -> Option<u64> {
        self.request_count.as_ref().map(List::first)
    }

    /// `--osl`'s value (the first of a list).
    pub(crate) fn osl(&self) -> Option<u32> {
        self.osl.as_ref().map(List::first)
    }

    /// `--isl`'s value (the first of a list).
    pub(crate) fn isl(&self) -> u32 {
        self.isl.first()
    }
}

impl LoadArgs {
    /// `--request-rate`'s value (the first of a list).
    pub(crate) fn request_rate(&self) -> Option<f64> {
        self.request_rate.as_ref().map(List::first)
    }
}

/// `--sweep-type`: how several comma lists combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SweepType {
    /// Every combination (the Cartesian product; parameters in alphabetical order, the last one
    /// changing fastest), as AIPerf.
    Grid,
    /// The i-th value of every list together (the lists must be equally long).
    Zip,
}

/// `--parameter-sweep-mode`: the order of a sweep's repeated runs (AIPerf's flag).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ParameterSweepMode {
    /// Every run of a point, then the next point (the layout `<point>/profile_runs/trial_NNNN`).
    Independent,
    /// Trials outside, points inside (AIPerf's default). Refused: the drain wait, convergence
    /// and the search judge a point on its runs together.
    Repeated,
}

/// `--convergence-mode`: when repeated runs have measured enough.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ConvergenceMode {
    /// The confidence interval of the run means, as a fraction of their mean, is at most the
    /// threshold (default 0.10).
    CiWidth,
    /// The coefficient of variation of the run values (sample std / mean) is at most the
    /// threshold (default 0.05).
    Cv,
    /// The newest run's per-request values are drawn from the same distribution as the earlier
    /// runs' (two-sample Kolmogorov-Smirnov p-value above the threshold, default 0.05).
    Distribution,
}

/// `--search-recipe`: what an SLA search looks for, or the shapes to map (AIPerf's recipe names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SearchRecipe {
    /// The largest load whose run meets every `--*-sla-*` objective (percentiles of the run).
    MaxConcurrencyUnderSla,
    /// The load with the most goodput: the largest one at which at least
    /// --slo-attainment-fraction of the requests meet every objective (per request).
    MaxGoodputUnderSlo,
    /// No search: every --isl-osl-pairs shape at every --concurrency (default 1,4,16,64,256),
    /// with the Pareto frontier of p95 TTFT against output token throughput written to
    /// `sweep_aggregate/pareto_sweep.json`, as AIPerf's recipe of that name.
    ParetoSweep,
}

/// `--search-style`: how the SLA search moves (AIPerf's names). specperf runs `monotonic`; the
/// others are AIPerf's model-based searches, refused by name rather than run as something else.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SearchStyle {
    /// Doubling until a load fails, then bisection (exact for concurrency).
    Monotonic,
    /// AIPerf's isotonic-regression search (not run here).
    #[value(name = "smooth_isotonic", alias = "smooth-isotonic")]
    SmoothIsotonic,
    /// AIPerf's Bayesian optimisation (not run here).
    Bo,
    /// AIPerf's Optuna search (not run here).
    Optuna,
    /// AIPerf's log-spaced 8-point grid (not run here).
    Grid,
}

/// `--isl-osl-pairs 128/128,1024/8192`: input/output lengths that go together (AIPerf's format).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IslOslPairs(pub Vec<(u32, u32)>);

impl std::str::FromStr for IslOslPairs {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut out: Vec<(u32, u32)> = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let bad = || {
                format!("{part:?}: write <isl>/<osl> with two positive integers, e.g. 1024/8192")
            };
            let (i, o) = part.split_once('/').ok_or_else(bad)?;
            let (i, o): (u32, u32) = match (i.trim().parse(), o.trim().parse()) {
                (Ok(i), Ok(o)) if i > 0 && o > 0 => (i, o),
                _ => return Err(bad()),
            };
            if out.contains(&(i, o)) {
                return Err(format!(
                    "{part:?} is given twice: each shape is one set of points"
                ));
            }
            out.push((i, o));
        }
        if out.is_empty() {
            return Err(format!("{s:?}: no pair; write e.g. 128/128,1024/1024"));
        }
        Ok(IslOslPairs(out))
    }
}

/// `--search-parameter`: the load an SLA search moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SearchParameter {
    /// Closed-loop concurrency (integers; bisection down to a step of 1).
    Concurrency,
    /// Open-loop request rate (bisection down to --search-tolerance of the rate).
    RequestRate,
}

/// Sweeps that own the server: `--serve-cmd` started once per cell of the `--serve-param` grid.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = H_SERVE)]
pub struct ServeArgs {
    /// Start the server with this shell command once per cell of the --serve-param grid, run
    /// the replay (or the whole sweep the other flags ask for) against it into
    /// `<artifact-dir>/<cell>/`, and stop it. `{NAME}` is the cell's value of --serve-param NAME,
    /// `{port}` a free loopback port specperf picks and targets (http://127.0.0.1:PORT; without
    /// `{port}`, give --url). Other braces (JSON) and `${VAR}` stay as written; `{{NAME}}` is a
    /// literal `{NAME}`. The server runs in its own process group, its output in
    /// `<cell>/server.log`; `cells.json` in the artifact directory records every cell.
    #[arg(long, value_name = "TEMPLATE")]
    pub serve_cmd: Option<String>,

    /// A server setting to sweep, `NAME=v1,v2,...` (repeatable): cells are the product of the
    /// lists in the order given, the last changing fastest, named `NAME_v1__OTHER_v2`.
    #[arg(long = "serve-param", value_name = "NAME=V1,V2", value_parser = parse_serve_param)]
    pub serve_params: Vec<crate::serve::ServeParam>,

    /// Longest wait for a started server to answer 200 on /health or /v1/models, seconds
    /// (default 1200: a large model's load); the cell then fails and the sweep goes on.
    #[arg(long, value_name = "SECONDS")]
    pub serve_ready_timeout: Option<f64>,

    /// After SIGTERM to the server's process group, seconds before SIGKILL (default 30).
    #[arg(long, value_name = "SECONDS")]
    pub serve_stop_grace: Option<f64>,

    /// With nvidia-smi or amd-smi on PATH: longest wait after a stop for every GPU's memory to
    /// be back (within 1 GiB) to what it used before the first server, seconds (default 300;
    /// then a warning, and the next server starts; a read that fails ends the wait, named).
    #[arg(long, value_name = "SECONDS")]
    pub serve_gpu_release_timeout: Option<f64>,
}

fn parse_serve_param(s: &str) -> Result<crate::serve::ServeParam, String> {
    crate::serve::parse_param(s).map_err(|e| e.to_string())
}

/// Sweeps over load and lengths, repeated runs with confidence intervals, SLA search, the drain
/// wait between points and the sweep report.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = H_SWEEPS)]
pub struct SweepArgs {
    /// How several comma lists combine.
    #[arg(long, value_enum, default_value_t = SweepType::Grid)]
    pub sweep_type: SweepType,

    /// Runs per point (the maximum with --convergence-mode); with 2 or more, every metric is
    /// reported as the mean of the runs with a Student-t confidence interval.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub num_profile_runs: u32,

    /// Order of repeated runs in a sweep: all runs of a point before the next (`independent`,
    /// the only order specperf runs; AIPerf's default `repeated` is refused, not silently
    /// changed).
    #[arg(long, value_enum, default_value_t = ParameterSweepMode::Independent)]
    pub parameter_sweep_mode: ParameterSweepMode,

    /// Confidence level of the intervals over repeated runs.
    #[arg(long, default_value_t = 0.95, allow_negative_numbers = true)]
    pub confidence_level: f64,

    /// Stop repeating a point once this metric has converged: an AIPerf tag (`time_to_first_token`,
    /// `inter_token_latency`, `request_latency`, `request_throughput`,
    /// `output_token_throughput`, ...), judged by --convergence-mode. Needs --num-profile-runs 3
    /// or more (at least 2 runs are always made).
    #[arg(long, value_name = "TAG")]
    pub convergence_metric: Option<String>,

    /// Statistic of --convergence-metric compared across runs (`avg`, `p50`, `p90`, `p99`, ...;
    /// ignored for throughputs, which have one value per run).
    #[arg(long, default_value = "avg")]
    pub convergence_stat: String,

    /// How convergence is judged.
    #[arg(long, value_enum, default_value_t = ConvergenceMode::CiWidth)]
    pub convergence_mode: ConvergenceMode,

    /// Convergence threshold (default: 0.10 for ci-width, 0.05 for cv, a p-value of 0.05 for
    /// distribution).
    #[arg(long, allow_negative_numbers = true)]
    pub convergence_threshold: Option<f64>,

    /// Pause between repeated runs of a point, seconds.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub profile_run_cooldown_seconds: f64,

    /// Pause between sweep points, seconds (after the drain wait).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub parameter_sweep_cooldown_seconds: f64,

    /// Between points, do not wait for the servers' queues to drain.
    #[arg(long)]
    pub no_drain: bool,

    /// Drain wait: seconds between polls of the queue gauges (InferenceX: 10).
    #[arg(
        long,
        env = "AIPERF_DRAIN_POLL_SECONDS",
        default_value_t = 10.0,
        allow_negative_numbers = true
    )]
    pub drain_poll_interval_seconds: f64,

    /// Drain wait: consecutive idle polls that count as drained.
    #[arg(long, default_value_t = 3, allow_negative_numbers = true)]
    pub drain_idle_polls: u32,

    /// Drain wait: longest wait, seconds; the next point then starts on a busy server and says so.
    #[arg(
        long,
        env = "AIPERF_DRAIN_TIMEOUT_SECONDS",
        default_value_t = 1800.0,
        allow_negative_numbers = true
    )]
    pub drain_max_wait_seconds: f64,

    /// AIPerf's recipes: search for the best load under the SLA objectives (doubling from
    /// --search-min until a point fails, then bisection), or map input/output shapes against
    /// concurrency (pareto-sweep).
    #[arg(long, value_enum, help_heading = H_SEARCH)]
    pub search_recipe: Option<SearchRecipe>,

    /// --search-recipe pareto-sweep: the input/output length shapes, `<isl>/<osl>` pairs
    /// (`128/128,1024/8192`), each run at every --concurrency (synthetic prompts: needs
    /// --synthetic --tokenizer PATH).
    #[arg(long, value_name = "PAIRS", help_heading = H_SEARCH)]
    pub isl_osl_pairs: Option<IslOslPairs>,

    /// How the search moves: `monotonic` (doubling, then bisection), the only style run here;
    /// AIPerf's other styles are refused by name.
    #[arg(long, value_enum, help_heading = H_SEARCH)]
    pub search_style: Option<SearchStyle>,

    /// The load the search moves.
    #[arg(long, value_enum, default_value_t = SearchParameter::Concurrency, help_heading = H_SEARCH)]
    pub search_parameter: SearchParameter,

    /// Smallest load the search tries (default 1).
    #[arg(long, visible_aliases = ["concurrency-min", "request-rate-min"], allow_negative_numbers = true, help_heading = H_SEARCH)]
    pub search_min: Option<f64>,

    /// Largest load the search tries (default 1000).
    #[arg(long, visible_aliases = ["concurrency-max", "request-rate-max"], allow_negative_numbers = true, help_heading = H_SEARCH)]
    pub search_max: Option<f64>,

    /// Request-rate search: stop bisecting when the bracket is within this fraction of its top.
    #[arg(long, default_value_t = 0.05, allow_negative_numbers = true, help_heading = H_SEARCH)]
    pub search_tolerance: f64,

    /// SLA: p95 time to first token at most this many ms.
    #[arg(long, allow_negative_numbers = true, help_heading = H_SEARCH)]
    pub ttft_sla_ms: Option<f64>,

    /// SLA: p95 inter-token latency at most this many ms.
    #[arg(long, allow_negative_numbers = true, help_heading = H_SEARCH)]
    pub itl_sla_ms: Option<f64>,

    /// SLA: p95 time per output token at most this many ms.
    #[arg(long, allow_negative_numbers = true, help_heading = H_SEARCH)]
    pub tpot_sla_ms: Option<f64>,

    /// SLA: p99 end-to-end request latency at most this many ms.
    #[arg(long, allow_negative_numbers = true, help_heading = H_SEARCH)]
    pub e2e_sla_ms: Option<f64>,

    /// SLA: failed fraction of the requests at most this (0..1).
    #[arg(long, allow_negative_numbers = true, help_heading = H_SEARCH)]
    pub error_rate_sla: Option<f64>,

    /// max-goodput-under-slo: fraction of requests that must meet every objective.
    #[arg(long, default_value_t = 0.95, allow_negative_numbers = true, help_heading = H_SEARCH)]
    pub slo_attainment_fraction: f64,

    /// GPUs serving the model (TP x PP x DP of the deployment): the sweep report's throughput
    /// per GPU, InferenceX's y axis, and the count --gpu-telemetry must see (InferenceX's
    /// --expected-num-gpus; a different count makes power_valid 0 and a warning).
    #[arg(long, allow_negative_numbers = true)]
    pub gpus: Option<u32>,

    /// Continue the sweep in --artifact-dir: points whose runs finished are kept, not rerun.
    #[arg(long)]
    pub resume: bool,
}
