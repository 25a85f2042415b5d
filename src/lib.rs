//! specperf: a load generator for OpenAI-compatible LLM inference servers that measures
//! speculative decoding.
//!
//! The replay pipeline, one stage per module; every arrow points one way (a test,
//! `tests/integration/layout.rs`, keeps it so):
//!
//! ```text
//!  dataset ──> render ──> schedule ──> client (N workers) ──> metrics (one aggregator) ──> report
//!  Sample      body       Ticket       RequestRecord           Summary; JSONL sinks       console, artifacts, plots
//!                                            │                      ▲
//!  scrape (side task): /metrics pages ──> prom::parse ──> acceptance ──> ScrapeReport, live AL in progress
//!                                                    └──> collect (every family, bounded) ──> server_metrics_export
//!  telemetry (side task): DCGM pages | NVML | nvidia-smi / amd-smi ──> series per GPU, events ──>
//!          energy over the window (counter delta, InferenceX's trapezoid) ──> Summary.energy; the
//!          series to gpu_telemetry_export.jsonl, gpu_metrics.csv and the power chart
//!
//!  agentx (beside dataset): Weka traces ──> session trees (root, subagents, split flat chains,
//!          spawn/join, delays, replay dependencies, theoretical cache) ──> t* snapshots; prompts
//!          cut per turn from our corpus (prompt)
//!  engine::agentx (instead of schedule, AgentX runs): lanes of trees ──> wire body + headers ──>
//!          client ──> the same aggregator and report (profile_export with session metadata)
//!
//!  engine: prepare ──> run ──> finish, wiring the stages; one Stopper (deadline, stall, SIGINT, SIGTERM)
//! ```
//!
//! Below every stage: `record` (RequestRecord, Outcome, FailureKind), `progress` (the live view the
//! aggregator and the scrape task write), `stop` (the one cancellation path), `fsutil` (atomic
//! writes), `timefmt`, `fdlimit`, `yaml`.
//!
//! `main.rs` parses flags (`cli`), validates them (`config`), runs `engine::replay` and maps the
//! outcome to an exit code (`exit`, the one mapping). The library never prints and never exits.
//!
//! Commands beside the pipeline, each above what it uses: `gate` (golden curve + engine + scrape ->
//! verdict), `inject` (golden curve + yaml -> recipe rewrite), `merge` (shard directories ->
//! metrics -> report), `sim` (the built-in server with speculative-decoding counters; it needs
//! only `stop`, `fdlimit` and the exposition writer in `scrape::prom`), `sweep` (points, repeated
//! runs or an SLA search -> one `engine::replay` each, the drain wait between -> `sweep.json`, the
//! table and the Pareto page; with `--serve-cmd`, once per server cell -> `cells.json`). `serve`
//! (below `sweep`, above `stop`) owns a server's process group: the `--serve-cmd` template and its
//! cells, start and readiness, stop, the GPU memory wait. `golden` holds the golden
//! AL curves, curve selection and the framework table that gate and inject share. `matrix`
//! (finished runs' artifacts on disk -> the SPEED-Bench matrix and speedups, AIPerf's
//! `speed-bench-report`) sits above `report` and `sweep`; nothing imports it. `collect` (a
//! golden curve from a grid of server cells) sits above `gate`, `sweep` and `golden`.

pub mod agentx;
mod bench_serving;
mod cli;
mod client;
pub mod collect;
mod config;
mod csv;
mod dataset;
pub mod debug;
mod engine;
pub mod exit;
mod fdlimit;
mod fsutil;
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod fuzzing;
pub mod gate;
pub mod golden;
mod heap;
mod inject;
mod merge;
mod metrics;
mod process;
mod progress;
mod record;
mod render;
mod report;
mod schedule;
pub mod scrape;
pub mod serve;
pub mod side_task;
pub mod sim;
mod speed_bench_report;
mod stop;
pub mod sweep;
pub mod telemetry;
/// The test suite's tools (tokenizer, venvs, llama-server): one table with the integration tests.
#[cfg(test)]
#[path = "../tests/tools.rs"]
mod test_tools;
mod timefmt;
mod yaml;

pub use bench_serving::{bench_serving, BenchServingOutcome, Finished as BenchServingFinished};
pub use cli::{
    completions, render_ignored, write_man_pages, AgentxArgs, BenchServingArgs, Cli, CollectArgs,
    CollectMode, Command, CompletionsArgs, DrainArgs, EmbeddedSimArgs, GateArgs, GateSummaryArgs,
    InjectArgs, LoadArgs, ManArgs, MergeArgs, PlotArgs, ProfileArgs, ProfileDatasetType,
    RenderArgs, ReplayArgs, Scenario, ScrapeArgs, ServeArgs, SimArgs, SpeedBenchFormat,
    SpeedBenchMetric, SpeedBenchReportArgs, Ui,
};
pub use client::sse;
pub use client::{HttpVersion, Timeouts};
pub use config::{drain_config, sim_config, ConfigError, DrainConfig, RunConfig};
pub use dataset::{AiperfName, DatasetError, DatasetKind, DatasetType, Sample, Split};
pub use engine::{render_requests, replay, EngineError, RunOutcome};
pub use exit::{exit_code, ExitStatus};
pub use fdlimit::FdLimitError;
pub use inject::{
    inject, EntryReport, EntryState, InjectConfig, InjectError, InjectOutcome, InjectReport,
    LineChange,
};
pub use merge::{merge, MergeError, MergeOutcome};
pub use metrics::{
    AgentxCounts, Aggregate, Counts, Goodput, GroupIsl, IslCheck, LoadMeta, RunMeta, Slo,
    SloMetric, Stat, Summary, TimeoutKind, SUMMARY_SCHEMA,
};
pub use progress::{Progress, StartStep, Starting};
pub use record::{ChunkGap, FailureKind, Outcome, Phase, RequestRecord, TokenSource};
pub use render::EndpointType;
pub use report::plot::{plot, PlotOutput};
pub use report::{console_table, failure_report, progress_line, stats_block, ReportError};
pub use schedule::{arrivals, ArrivalPattern, DispatchStats, LoadMode, Shard};
pub use speed_bench_report::{speed_bench_report, MatrixError, Note, ReportOutcome, Written};
pub use stop::{StopReason, Stopper};
pub use yaml::YamlError;
