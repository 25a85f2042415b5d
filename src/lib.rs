//! specperf: a load generator for OpenAI-compatible LLM inference servers that measures
//! speculative decoding.
//!
//! The replay pipeline, one stage per module:
//!
//! ```text
//!  dataset ──> render ──> schedule ──> client (N workers) ──> metrics (one aggregator) ──> report
//!  Sample      body       Ticket       RequestRecord           Summary, records.jsonl     table, summary.json
//!                                            │
//!                             engine: one Stopper (deadline, stall, SIGINT, SIGTERM)
//!                                            │
//!  scrape (side task, same Stopper): /metrics pages ──> prom::parse ──> acceptance::evaluate ──> AL
//!
//!  sim: the built-in OpenAI-compatible server with speculative-decoding counters (embedded default)
//! ```
//!
//! `main.rs` parses flags (`cli`), validates them (`config`), runs `engine::replay` and maps the
//! outcome to an exit code. The library never prints and never exits.
//!
//! Beside the pipeline: `golden` (golden AL curves and curve selection, shared with the AL gate),
//! `inject` (`specperf inject`: recipe rewriting for synthetic acceptance) and `merge`
//! (`specperf merge`: the artifacts of a sharded run, read back through the same aggregator, into
//! one report).

mod cli;
mod client;
mod config;
mod dataset;
mod engine;
pub mod exit;
mod fdlimit;
mod fsutil;
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod fuzzing;
pub mod gate;
pub mod golden;
mod inject;
mod merge;
mod metrics;
mod progress;
mod record;
mod render;
mod report;
mod schedule;
pub mod scrape;
pub mod sim;
mod stop;
mod timefmt;
mod yaml;

pub use cli::{
    Cli, Command, EmbeddedSimArgs, GateArgs, GateSummaryArgs, InjectArgs, LoadArgs, MergeArgs,
    PlotArgs, RenderArgs, ReplayArgs, ScrapeArgs, SimArgs, Ui,
};
pub use client::sse;
pub use client::{HttpVersion, Timeouts};
pub use config::{sim_config, ConfigError, RunConfig};
pub use dataset::{DatasetError, DatasetKind, Sample};
pub use engine::{render_requests, replay, EngineError, RunOutcome};
pub use exit::{exit_code, ExitStatus};
pub use fdlimit::FdLimitError;
pub use inject::{
    inject, EntryReport, EntryState, InjectConfig, InjectError, InjectOutcome, InjectReport,
    LineChange,
};
pub use merge::{merge, MergeError, MergeOutcome};
pub use metrics::{
    Aggregate, Counts, Goodput, LoadMeta, RunMeta, Slo, SloMetric, Stat, Summary, TimeoutKind,
    SUMMARY_SCHEMA,
};
pub use progress::Progress;
pub use record::{ChunkGap, FailureKind, Outcome, Phase, RequestRecord, TokenSource};
pub use render::EndpointType;
pub use report::plot::{plot, PlotOutput};
pub use report::{console_table, progress_line, ReportError};
pub use schedule::{arrivals, ArrivalPattern, DispatchStats, LoadMode, Shard};
pub use stop::{StopReason, Stopper};
pub use yaml::YamlError;
