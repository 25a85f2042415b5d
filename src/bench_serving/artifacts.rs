//! What upstream cannot write, each only where a specperf-only flag asks:
//!
//! - `--artifact-dir DIR`: specperf's own artifacts of the measured requests, the files `replay`
//!   writes (`records.jsonl`, `summary.json`, `console.txt`, AIPerf's `profile_export*` and
//!   `inputs.json`, the timeslices, and `server_metrics_export.*` with `--server-metrics`), so
//!   `specperf plot`, `aiperf plot` and InferenceX's readers of AIPerf's files work on a
//!   bench-serving run too;
//! - `--gpu-telemetry [SOURCE...]`: GPU power and energy over exactly the measured window, one
//!   line after upstream's result block and the `energy` section of `summary.json`.
//!
//! ```text
//! open (before any request: the directory, the telemetry source) ─► the measured phase ─►
//!   write (records ─► Aggregate ─► Summary ─► report's writers)
//! ```
//!
//! `--result-dir` keeps upstream's one file: these go elsewhere.

use std::collections::BTreeMap;
use std::path::PathBuf;

use bytes::Bytes;

use super::args::{Api, Args};
use super::load::{BodyOf, Phase};
use crate::client::Client;
use crate::dataset::bench_serving::Flavor;
use crate::metrics::{Aggregate, Histograms, LoadMeta, RunMeta, Summary, TimeoutKind};
use crate::render::EndpointType;
use crate::schedule::{ArrivalPattern, DispatchStats, LoadMode};
use crate::scrape::ScrapeReport;
use crate::stop::StopReason;
use crate::telemetry::task::{Source, TelemetryTask};
use crate::telemetry::{EnergyInputs, Frame, TelemetryRun};

/// The `--artifact-dir` directory, ready before the first request (an earlier run in it moved
/// aside), and the note saying so.
pub(super) struct ArtifactDir {
    dir: PathBuf,
    note: Option<String>,
}

impl ArtifactDir {
    pub(super) fn path(&self) -> &std::path::Path {
        &self.dir
    }

    /// Creates `--artifact-dir` (moving an earlier run aside); `None` without the flag.
    pub(super) fn open(a: &Args) -> Result<Option<ArtifactDir>, String> {
        let Some(dir) = &a.artifact_dir else {
            return Ok(None);
        };
        let fail = |e: std::io::Error| format!("--artifact-dir {}: {e}", dir.display());
        let note = crate::fsutil::move_earlier_run_aside(dir).map_err(fail)?;
        crate::fsutil::ensure_writable_dir(dir).map_err(fail)?;
        Ok(Some(ArtifactDir {
            dir: dir.clone(),
            note,
        }))
    }
}

/// `--gpu-telemetry`'s source, opened (first read taken) before any request.
pub(super) struct Gpu {
    source: Source,
    first: Vec<Frame>,
}

impl Gpu {
    /// Opens the source `--gpu-telemetry` names. None answering is a warning and a run without
    /// GPU telemetry, or with `--require-gpu-telemetry` an error (nothing has been sent yet).
    pub(super) async fn open(a: &Args, client: &Client) -> Result<Option<Gpu>, String> {
        let Some(ask) = &a.telemetry.ask else {
            return Ok(None);
        };
        match crate::telemetry::task::open(ask, client, crate::scrape::BASELINE_TIMEOUT).await {
            Ok((source, first)) => Ok(Some(Gpu { source, first })),
            Err(e) if a.telemetry.require => Err(format!("--require-gpu-telemetry: {e}")),
            Err(e) => {
                eprintln!("WARNING: --gpu-telemetry: {e}; the run goes on without GPU telemetry");
                Ok(None)
            }
        }
    }

    /// Starts reading every `--gpu-telemetry-interval`.
    pub(super) fn spawn(self, a: &Args) -> TelemetryTask {
        let interval = a.telemetry.interval;
        let timeout =
            crate::scrape::BASELINE_TIMEOUT.min(interval.max(std::time::Duration::from_secs(1)));
        TelemetryTask::spawn(self.source, self.first, interval, timeout)
    }
}

/// What the measured phase leaves for the artifacts.
pub(super) struct Inputs<'a> {
    pub(super) argv: &'a [String],
    pub(super) phase: &'a Phase,
    pub(super) body_of: &'a BodyOf,
    /// Unix ns of the run clock's zero (the records' times are on that clock).
    pub(super) epoch_ns: u64,
    pub(super) scrape: Option<ScrapeReport>,
    pub(super) telemetry: Option<TelemetryRun>,
    pub(super) stopped_by: Option<StopReason>,
    /// Side tasks that ended without their figures: warnings in `summary.json`.
    pub(super) side_failures: &'a [crate::side_task::SideTaskFailed],
}

/// The measured requests summarised (energy included with `--gpu-telemetry`): what
/// `summary.json` holds and the energy line prints from, and the histograms `specperf merge`
/// adds up.
pub(super) struct Report {
    pub(super) summary: Summary,
    histograms: Histograms,
}

/// The report of the measured requests.
pub(super) fn summarize(a: &Args, i: &Inputs<'_>) -> Report {
    let mut agg = Aggregate::new();
    let mut sent = 0u64;
    for s in i.phase.sent.iter().flatten() {
        agg.add(&s.record);
        sent += 1;
    }
    let n = i.phase.sent.len() as u64;
    let open = a.request_rate.is_finite();
    let load = LoadMeta {
        mode: if open {
            LoadMode::Open
        } else {
            LoadMode::Closed
        },
        request_rate: open.then_some(a.request_rate),
        arrival_pattern: open.then_some(if a.burstiness == 1.0 {
            ArrivalPattern::Poisson
        } else {
            ArrivalPattern::Gamma
        }),
        arrival_smoothness: open.then_some(a.burstiness),
        concurrency_cap: a.max_concurrency,
        random_seed: u64::from(a.seed),
        dispatch: DispatchStats {
            issued: sent,
            not_issued: n - sent,
            ..DispatchStats::default()
        },
        ..LoadMeta::default()
    };
    let timeouts_s: BTreeMap<TimeoutKind, f64> = [
        (TimeoutKind::FirstToken, a.ttft_timeout),
        (TimeoutKind::Idle, a.idle_timeout),
        (TimeoutKind::Request, a.request_timeout),
    ]
    .into_iter()
    .chain(a.deadline.map(|d| (TimeoutKind::Run, d)))
    .collect();
    let meta = RunMeta {
        url: a.base(),
        model: a.body_model().to_owned(),
        endpoint: a.endpoint.clone(),
        endpoint_type: match a.api {
            Api::Chat => EndpointType::Chat,
            _ => EndpointType::Completions,
        },
        osl: None,
        cli_command: Some(
            std::iter::once("specperf bench-serving".to_owned())
                .chain(i.argv.iter().cloned())
                .collect::<Vec<_>>()
                .join(" "),
        ),
        streaming: true,
        concurrency: a.max_concurrency,
        request_count: n,
        samples: n as usize,
        dataset_reused: false,
        input: format!(
            "bench-serving random dataset ({}, seed {}, ISL {}, OSL {}, range ratio {})",
            match a.flavor {
                Flavor::InferenceX => "inferencex",
                Flavor::SaBench => "sa-bench",
            },
            a.seed,
            a.random_input_len,
            a.random_output_len,
            a.random_range_ratio
        ),
        dataset_format: None,
        start_unix_s: i.phase.window.start_unix,
        stopped_by: i.stopped_by,
        load,
        timeouts_s,
    };
    let mut s = agg.summary(meta);
    s.warnings
        .extend(i.side_failures.iter().map(ToString::to_string));
    s.acceptance = i.scrape.clone();
    s.settle_spec(None);
    if let Some(run) = &i.telemetry {
        let e = crate::telemetry::energy::energy(
            run,
            &EnergyInputs {
                start_unix_s: s.benchmark_start_unix_s,
                end_unix_s: s.benchmark_end_unix_s,
                successful_requests: s.counts.success,
                input_tokens: s.total_prompt_tokens,
                output_tokens: s.total_completion_tokens,
                expected_gpus: a.telemetry.expected_gpus,
            },
        );
        s.warnings.extend(e.warnings.iter().cloned());
        s.energy = Some(e);
        s.telemetry = Some(run.clone());
    }
    Report {
        summary: s,
        histograms: agg.histograms(),
    }
}

/// Writes the artifacts of the measured requests into `dir`; the first failure is returned
/// (the result file and the console are upstream's and written regardless).
pub(super) fn write(dir: &ArtifactDir, i: &Inputs<'_>, report: Report) -> Result<(), String> {
    let Report {
        summary: mut s,
        histograms,
    } = report;
    use std::io::Write;
    let d = &dir.dir;
    let fail = |what: &str, e: &dyn std::fmt::Display| format!("{}: {what}: {e}", d.display());
    s.warnings.splice(0..0, dir.note.iter().cloned());
    let records =
        std::fs::File::create(d.join("records.jsonl")).map_err(|e| fail("records.jsonl", &e))?;
    let export = std::fs::File::create(d.join("profile_export.jsonl"))
        .map_err(|e| fail("profile_export.jsonl", &e))?;
    let (mut records, mut export) = (
        std::io::BufWriter::new(records),
        std::io::BufWriter::new(export),
    );
    let mut line = Vec::with_capacity(1024);
    for sent in i.phase.sent.iter().flatten() {
        let r = &sent.record;
        line.clear();
        serde_json::to_writer(&mut line, r).map_err(|e| fail("records.jsonl", &e))?;
        line.push(b'\n');
        records
            .write_all(&line)
            .map_err(|e| fail("records.jsonl", &e))?;
        line.clear();
        crate::report::aiperf::write_record(&mut line, r, i.epoch_ns, false)
            .map_err(|e| fail("profile_export.jsonl", &e))?;
        if !line.is_empty() {
            line.push(b'\n');
            export
                .write_all(&line)
                .map_err(|e| fail("profile_export.jsonl", &e))?;
        }
    }
    records.flush().map_err(|e| fail("records.jsonl", &e))?;
    export
        .flush()
        .map_err(|e| fail("profile_export.jsonl", &e))?;
    let bodies = (0..i.phase.sent.len()).map(|k| -> Bytes { (i.body_of)(k) });
    crate::report::write_inputs(d, bodies).map_err(|e| fail("inputs.json", &e))?;
    crate::report::write_histograms(d, &histograms).map_err(|e| fail("histograms.json", &e))?;
    crate::report::write_artifacts(d, &s).map_err(|e| fail("summary", &e))?;
    crate::report::write_timeslices(d, &s, 1_000_000_000).map_err(|e| fail("timeslices", &e))?;
    Ok(())
}
