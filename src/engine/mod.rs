//! The replay engine: wires the pipeline stages together for one run, in three steps.
//!
//! ```text
//!  prepare: collection, plan, simulator, client, model, bodies, artifact files   (no request yet)
//!  run:     warmup phase ─> AL baseline ─> profiling phase ─> the one aggregator ─> scrape ends
//!  finish:  RunMeta + Summary ─> histograms.json, summary.json and the other artifacts
//! ```
//!
//! dataset -> render -> schedule -> client workers -> (bounded channel) -> the one aggregator ->
//! summary and artifacts. A single [`Stopper`] (deadline, stall watchdog, Ctrl-C, SIGTERM) cancels
//! everything; in-flight requests then end as `cancelled` records and the summary is still written.

mod agentx;
mod contact;
mod finish;
mod phase;
mod prepare;
#[cfg(test)]
mod tests;

use std::path::PathBuf;

use tokenizer_encoders::EncodeError;
use tokio::sync::watch;

use crate::client::ClientError;
use crate::config::RunConfig;
use crate::dataset::DatasetError;
use crate::metrics::Summary;
use crate::progress::Progress;
use crate::side_task::SideTaskFailed;
use crate::sim::SimError;
use crate::stop::{StopReason, Stopper};

pub(crate) use prepare::collection_samples;
pub use prepare::render_requests;

/// The collection bundled into the binary (`datasets/qualitative.jsonl`).
pub(crate) const BUNDLED_COLLECTION: &str = include_str!("../../datasets/qualitative.jsonl");

/// Errors that prevent a run from starting. Anything after the first request is a record instead.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The collection could not be loaded.
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    /// The AgentX traces could not be loaded.
    #[error(transparent)]
    Agentx(#[from] crate::agentx::AgentxError),
    /// The embedded simulator did not start.
    #[error(transparent)]
    Sim(#[from] SimError),
    /// The HTTP client could not be built.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// `--require-gpu-telemetry` and no GPU telemetry source answered.
    #[error("--require-gpu-telemetry: {0}")]
    Telemetry(String),
    /// The server did not answer the readiness probe in time.
    #[error("server at {url} not ready: {reason} (is it running? raise --wait-for-model-timeout to wait for start-up)")]
    NotReady {
        /// The base URL.
        url: String,
        /// Last probe error.
        reason: String,
    },
    /// The host of `--url` does not resolve (checked once, before any request).
    #[error(
        "cannot resolve host {host} of --url {url}: {reason} (check the host name, or the \
             DNS of this machine)"
    )]
    Resolve {
        /// The URL.
        url: String,
        /// Its host.
        host: String,
        /// The resolver's answer.
        reason: String,
    },
    /// No `--model` and none could be discovered.
    #[error("no model name: {0}; pass --model")]
    NoModel(String),
    /// A `--serve-cmd` cell's run was started before its server's URL was bound (a bug of
    /// ours, refused rather than sent anywhere).
    #[error("the run has no server URL yet: a --serve-cmd cell binds it once its server is up")]
    Unbound,
    /// The URL does not parse.
    #[error("invalid URL {url}: {reason}")]
    Url {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// A sample could not be rendered by the encoder.
    #[error("cannot render sample {sample}: {source}")]
    Render {
        /// The sample's id.
        sample: String,
        /// What the encoder rejected.
        source: EncodeError,
    },
    /// The tokenizer or chat template could not be loaded or used.
    #[error("{0}")]
    Tokenizer(String),
    /// The load settings do not fit the collection.
    #[error("{0}")]
    Load(String),
    /// The open-file limit is too low for the requests in flight.
    #[error(transparent)]
    OpenFiles(#[from] crate::fdlimit::FdLimitError),
    /// An output directory given on the command line is not usable (checked before the run).
    #[error("cannot write in {path} (given as {flag}): {source}; pass a writable directory")]
    OutputDir {
        /// The flag (and variable) that named it.
        flag: &'static str,
        /// The path.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The server refuses `nvext.session_control`, which `--use-dynamo-conv-aware-routing`
    /// puts in every request (checked with one request before the run).
    #[error(
        "the server at {url} refuses nvext.session_control, which \
         --use-dynamo-conv-aware-routing (AIPERF_USE_DYNAMO_CONV_AWARE_ROUTING) puts in every \
         request: HTTP {status}: {answer}; nothing was benchmarked. This Dynamo routes sessions \
         by header: set AIPERF_HTTP_X_DYNAMO_SESSION_ID_FROM_CORRELATION_ID=true and \
         AIPERF_USE_DYNAMO_CONV_AWARE_ROUTING=0 (InferenceX's newer recipes do), i.e. drop \
         --use-dynamo-conv-aware-routing"
    )]
    SessionControl {
        /// The endpoint.
        url: String,
        /// Its status.
        status: u16,
        /// The start of its answer.
        answer: String,
    },
    /// The artifact directory or a file in it could not be created.
    #[error("cannot write artifacts in {path}: {source} (pass a writable --artifact-dir)")]
    Artifacts {
        /// The path.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
}

impl EngineError {
    /// True when the server was unreachable (exit code 3).
    pub fn is_not_ready(&self) -> bool {
        matches!(self, EngineError::NotReady { .. })
    }
}

/// What a finished run hands back.
pub struct RunOutcome {
    /// The summary (also in `summary.json`).
    pub summary: Summary,
    /// Where artifacts were written.
    pub artifact_dir: PathBuf,
    /// Set when the records file could not be written completely.
    pub artifact_error: Option<String>,
    /// Set when the run was stopped early.
    pub stopped_by: Option<StopReason>,
    /// Warnings learnt from the run itself (also in the summary's warnings), for the binary to
    /// say on stderr; the settings' warnings ([`RunConfig::warnings`]) were said before the run.
    pub run_warnings: Vec<String>,
    /// The side tasks that ended without their figures (each also a run warning).
    pub side_failures: Vec<SideTaskFailed>,
    /// Set when figures this run cannot do without are missing (the aggregator's, or GPU
    /// telemetry's with `--require-gpu-telemetry`): the run failed, its artifacts written.
    pub failed_requirement: Option<String>,
}

/// Replays the configured collection and returns its summary.
pub async fn replay(
    cfg: RunConfig,
    stop: Stopper,
    progress: watch::Sender<Progress>,
) -> Result<RunOutcome, EngineError> {
    let (mut ready, files) = prepare::prepare(cfg, &stop, &progress).await?;
    let gpu = ready.telemetry.take();
    let measured = phase::run(&ready, files, gpu, &stop, progress).await;
    Ok(finish::finish(ready, measured, &stop))
}
