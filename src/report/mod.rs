//! Summary -> what people and scripts read: the console table, the live progress line and the
//! artifact files. `records.jsonl` and `profile_export.jsonl` are written live by the aggregator
//! (one line per request, via [`aiperf::write_record`]); everything else is written here at the
//! end of a run: `summary.json` (ours, schema `specperf.summary.v1`), `console.txt`, AIPerf's
//! `profile_export_aiperf.{json,csv}`, `gpu_telemetry_export.jsonl` and `server_metrics_export.json`, and on request the
//! InferenceX raw throughput JSON ([`inferencex`]). [`plot`] draws charts from a finished
//! artifact directory.

pub(crate) mod aiperf;
mod diagnose;
mod gpu_telemetry;
pub(crate) mod inferencex;
mod json;
mod page;
pub(crate) mod pareto;
pub(crate) mod plot;
mod server_metrics;
pub(crate) mod svg;
#[cfg(test)]
mod tests;
mod timeslices;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::metrics::{
    Histograms, MetricKey, SpecSummary, Summary, VsCounters, RELIABLE_WITHIN_PCT,
};
use crate::progress::{Progress, StartStep, Starting};
use crate::scrape::acceptance::AcceptanceStatus;
use crate::scrape::ScrapeReport;

pub use diagnose::failure_report;
pub(crate) use diagnose::v1_suffix_hint;

/// Rows of the console table, in order (labels from [`MetricKey::console_label`]).
const ROWS: [MetricKey; 12] = [
    MetricKey::TimeToFirstToken,
    MetricKey::TimeToSecondToken,
    MetricKey::RequestLatency,
    MetricKey::InterTokenLatency,
    MetricKey::InterTokenLatencyTokenWeighted,
    MetricKey::InterChunkLatency,
    MetricKey::OutputTokenThroughputPerUser,
    MetricKey::E2eOutputTokenThroughput,
    MetricKey::InputSequenceLength,
    MetricKey::OutputSequenceLength,
    MetricKey::DispatchLag,
    MetricKey::TimeToFirstOutputToken,
];

/// The final console table.
pub fn console_table(s: &Summary) -> String {
    let mut o = String::new();
    let m = &s.meta;
    let _ = writeln!(
        o,
        "specperf {} | {} | model {} | {} | concurrency {} | streaming {}",
        s.specperf_version,
        m.url,
        m.model,
        m.endpoint,
        m.concurrency
            .map_or_else(|| "uncapped".to_owned(), |c| c.to_string()),
        m.streaming
    );
    let _ = writeln!(
        o,
        "{:<34} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "Metric", "avg", "min", "p50", "p90", "p99", "max", "std"
    );
    for key in ROWS {
        let label = key.console_label().unwrap_or(key.as_str());
        if let Some(st) = s.metric(key) {
            let _ = writeln!(
                o,
                "{:<34} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2}",
                label,
                st.avg,
                st.min,
                st.p("p50"),
                st.p("p90"),
                st.p("p99"),
                st.max,
                st.std
            );
        }
    }
    let c = &s.counts;
    // A run bounded by --benchmark-duration has no planned count.
    let planned = match m.load.benchmark_duration_s {
        Some(d) if m.request_count == 0 => format!("for {d} s"),
        _ => format!("planned {}", m.request_count),
    };
    let _ = writeln!(
        o,
        "Requests: {} ok, {} failed, {} cancelled, {} total ({planned})",
        c.success, c.failed, c.cancelled, c.total
    );
    if !c.failed_by_kind.is_empty() {
        let kinds: Vec<String> = c
            .failed_by_kind
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(o, "Failures: {}", kinds.join(", "));
    }
    if c.empty_output > 0 {
        let _ = writeln!(
            o,
            "Empty answers: {} of the ok requests had usage but no text (counted as successes)",
            c.empty_output
        );
    }
    if let Some(a) = &s.agentx {
        let cache = if a.theoretical_cache_total_blocks > 0 {
            format!(
                "{:.2}% ({} of {} blocks)",
                100.0 * a.theoretical_cache_hit_blocks as f64
                    / a.theoretical_cache_total_blocks as f64,
                a.theoretical_cache_hit_blocks,
                a.theoretical_cache_total_blocks
            )
        } else {
            "n/a".to_owned()
        };
        let _ = writeln!(
            o,
            "AgentX: {} cancelled at the end of the grace period (counted among the cancelled, \
             not as errors), {} context overflows (left out of every statistic), theoretical \
             prefix-cache hit {cache}",
            a.cancelled_at_grace, a.context_overflow
        );
    }
    if c.retried > 0 {
        let _ = writeln!(
            o,
            "Retried: {} requests were sent again (a reused connection closed before any \
             response byte, or a 429 with --rate-limit-retries)",
            c.retried
        );
    }
    let _ = writeln!(
        o,
        "Throughput: {:.2} req/s, {:.2} output tok/s, {:.2} total tok/s over {:.3} s",
        s.request_throughput_rps,
        s.output_token_throughput_tps,
        s.total_token_throughput_tps,
        s.duration_s
    );
    let _ = writeln!(
        o,
        "Tokens: {} prompt, {} completion ({} reasoning), counted from usage",
        s.total_prompt_tokens, s.total_completion_tokens, s.total_reasoning_tokens
    );
    if let Some(g) = &s.goodput {
        let slos: Vec<String> = g
            .slos
            .iter()
            .map(|x| {
                let op = if x.metric.larger_is_better() {
                    ">="
                } else {
                    "<="
                };
                format!(
                    "{} {op} {} {}",
                    x.metric.tag(),
                    x.threshold,
                    x.metric.unit()
                )
            })
            .collect();
        let _ = writeln!(
            o,
            "Goodput: {:.2} req/s, {} of {} requests good ({:.1}%; SLOs {})",
            g.goodput_rps,
            g.good_request_count,
            c.total,
            g.good_request_fraction * 100.0,
            slos.join(", ")
        );
    }
    if let Some(r) = &s.acceptance {
        acceptance_line(&mut o, r);
    }
    if let Some(d) = &s.spec_decode {
        spec_section(&mut o, d);
    }
    if let Some(e) = &s.energy {
        energy_line(&mut o, e);
    }
    if let Some(r) = &m.stopped_by {
        let _ = writeln!(o, "Stopped early: {r}");
    }
    for w in &s.warnings {
        let _ = writeln!(o, "Warning: {w}");
    }
    o
}

/// The acceptance line(s) of the console table.
fn acceptance_line(o: &mut String, r: &ScrapeReport) {
    let a = &r.acceptance;
    let n = &a.numbers;
    match (a.status, n.acceptance_length) {
        (AcceptanceStatus::Ok, Some(al)) => {
            let mut line = format!("Acceptance length: {al:.4}");
            if let Some(ar) = n.acceptance_rate {
                let _ = write!(line, ", acceptance rate {ar:.4}");
            }
            if let Some(k) = a.num_speculative_tokens {
                let _ = write!(line, ", k {k}");
            }
            if !n.per_position_acceptance.is_empty() {
                let p: Vec<String> = n
                    .per_position_acceptance
                    .iter()
                    .map(|p| format!("{p:.3}"))
                    .collect();
                let _ = write!(line, ", per position {}", p.join(" "));
            }
            let _ = write!(
                line,
                " ({} drafts, {} accepted; {})",
                n.drafts, n.accepted_tokens, a.metric_source
            );
            let _ = writeln!(o, "{line}");
        }
        (status, _) => {
            let _ = writeln!(
                o,
                "Acceptance length: not measured ({}: {})",
                serde_json::to_value(status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                a.reason.as_deref().unwrap_or("")
            );
        }
    }
    if a.approximate {
        let _ = writeln!(
            o,
            "Warning: acceptance length from a gauge (last-window value), not from counters"
        );
    }
    if a.partial {
        let failed: Vec<&str> = a
            .endpoints
            .iter()
            .filter(|e| e.error.is_some())
            .map(|e| e.url.as_str())
            .collect();
        let _ = writeln!(
            o,
            "Warning: acceptance is partial: {} of {} metrics endpoints failed ({})",
            failed.len(),
            a.endpoints.len(),
            failed.join(", ")
        );
    }
    if !a.resets.is_empty() {
        let _ = writeln!(
            o,
            "Warning: {} counter reset(s) during the window (counted as Prometheus increase() \
             does; first: {} {} on {})",
            a.resets.len(),
            a.resets[0].kind,
            a.resets[0].series,
            a.resets[0].endpoint
        );
    }
    for w in &a.warnings {
        let _ = writeln!(o, "Warning: acceptance: {w}");
    }
}

/// The energy line, as the console prints it after a run's table.
pub(crate) fn energy_text(e: &crate::telemetry::Energy) -> String {
    let mut o = String::new();
    energy_line(&mut o, e);
    o
}

/// The energy line: the window's GPU energy, power and energy per token, and how the two
/// measurements agree.
fn energy_line(o: &mut String, e: &crate::telemetry::Energy) {
    use crate::telemetry::energy::EnergyMethod;
    let Some(total) = e.total_energy_j else {
        let _ = writeln!(
            o,
            "GPU energy: not measured ({} GPU(s) seen from {}; see summary.json energy)",
            e.observed_gpus,
            e.source.as_str()
        );
        return;
    };
    let how = match (e.method, e.counter_integrated_difference) {
        (Some(EnergyMethod::Counter), Some(d)) => {
            format!("energy counters; power integration {:.2}% apart", d * 100.0)
        }
        (Some(EnergyMethod::Counter), None) => "energy counters".to_owned(),
        _ => "power integration".to_owned(),
    };
    let _ = writeln!(
        o,
        "GPU energy: {:.1} kJ over {} GPU(s), {} W per GPU; {} J/output token, {} J/token, {} output tok/s/kW ({how}, {})",
        total / 1000.0,
        e.observed_gpus,
        num(e.avg_power_w, 1),
        num(e.joules_per_output_token, 4),
        num(e.joules_per_total_token, 4),
        num(e.output_tokens_per_s_per_kw, 1),
        e.source.as_str()
    );
}

/// `2.4512`, or `n/a`.
fn num(v: Option<f64>, digits: usize) -> String {
    v.filter(|v| v.is_finite())
        .map_or_else(|| "n/a".to_owned(), |v| format!("{v:.digits$}"))
}

/// `(+0.81% vs the counters' 2.4500: reliable)`: a token-weighted AL beside the counters'.
fn vs_counters(v: &VsCounters) -> String {
    let verdict = if v.reliable {
        "reliable".to_owned()
    } else {
        format!("UNRELIABLE (>{RELIABLE_WITHIN_PCT}% from the counters)")
    };
    format!(
        "{:+.2}% vs the counters' {:.4}: {verdict}",
        v.difference_pct, v.counter_acceptance_length
    )
}

/// The per-request speculative-decoding lines: what the responses reported (per-request AL
/// p50 and mean, token-weighted AL, acceptance rate), the stream estimate against the
/// counters, malformed payloads, and a table per group when the samples had groups.
fn spec_section(o: &mut String, d: &SpecSummary) {
    let sources: Vec<String> = d
        .requests_by_source
        .iter()
        .map(|(k, n)| format!("{} {n}", k.as_str()))
        .collect();
    let mut head = if sources.is_empty() {
        "Spec decode per request: no response reported figures".to_owned()
    } else {
        format!(
            "Spec decode per request: figures from {}",
            sources.join(", ")
        )
    };
    if d.malformed > 0 {
        let _ = write!(head, "; {} malformed, left out", d.malformed);
    }
    let _ = writeln!(o, "{head}");
    if let Some(t) = &d.reported {
        let al = t.acceptance_length.as_ref();
        let mut line = format!(
            "  reported: AL p50 {}, mean {} per request; token-weighted AL {}; acceptance rate {}",
            num(al.map(|a| a.p("p50")), 4),
            num(t.mean_acceptance_length, 4),
            num(t.token_weighted_acceptance_length, 4),
            num(t.acceptance_rate, 4)
        );
        if let Some(v) = &t.vs_counters {
            let _ = write!(line, " ({})", vs_counters(v));
        }
        let _ = writeln!(o, "{line}");
    }
    if let Some(e) = &d.stream_estimate {
        let mut line = format!(
            "  stream estimate: token-weighted AL {} over {} requests ({} decode tokens in {} events)",
            num(e.token_weighted_acceptance_length, 4),
            e.requests,
            e.decode_tokens,
            e.decode_events
        );
        match &e.vs_counters {
            Some(v) => {
                let _ = write!(line, ", {}", vs_counters(v));
            }
            None => line.push_str(", no counters to check it against"),
        }
        let _ = writeln!(o, "{line}");
    }
    if d.by_group.is_empty() {
        return;
    }
    let field = d.group_field.as_deref().unwrap_or("group");
    let width = d
        .by_group
        .keys()
        .map(|g| g.chars().count())
        .chain([field.len()])
        .max()
        .unwrap_or(0)
        .clamp(8, 34);
    // A column no group has a value for is left out (a server without per-request figures would
    // fill three columns with n/a on every row); the line above the table says why.
    type Column = (&'static str, fn(&crate::metrics::GroupSpec) -> Option<f64>);
    let columns: [Column; 4] = [
        ("AL tok-w", |x| {
            x.reported
                .as_ref()
                .and_then(|r| r.token_weighted_acceptance_length)
        }),
        ("AL mean", |x| {
            x.reported.as_ref().and_then(|r| r.mean_acceptance_length)
        }),
        ("acc rate", |x| {
            x.reported.as_ref().and_then(|r| r.acceptance_rate)
        }),
        ("stream AL", |x| {
            x.stream_estimate
                .as_ref()
                .and_then(|e| e.token_weighted_acceptance_length)
        }),
    ];
    let shown: Vec<&Column> = columns
        .iter()
        .filter(|(_, value)| {
            d.by_group
                .values()
                .any(|x| value(x).is_some_and(f64::is_finite))
        })
        .collect();
    if shown.len() < columns.len() {
        let absent: Vec<&str> = columns
            .iter()
            .filter(|c| !shown.iter().any(|s| s.0 == c.0))
            .map(|c| c.0)
            .collect();
        let _ = writeln!(
            o,
            "  per {field}: {} left out: no response carried per-request speculative figures \
             (vLLM's, SGLang's or llama.cpp's; docs/acceptance.md)",
            absent.join(", ")
        );
    }
    let mut head = format!("  {field:<width$} {:>8}", "requests");
    for (name, _) in &shown {
        let _ = write!(head, " {name:>10}");
    }
    let _ = writeln!(o, "{head}");
    for (g, x) in &d.by_group {
        let mut row = format!("  {g:<width$} {:>8}", x.requests);
        for (_, value) in &shown {
            let _ = write!(row, " {:>10}", num(value(x), 4));
        }
        let _ = writeln!(o, "{row}");
    }
}

/// An artifact that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// An input file is not what a replay writes.
    #[error("{path}: {reason}")]
    Input {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// InferenceX divides by every TPOT statistic; a zero would crash its aggregation later, so
    /// the raw result is refused now (`inferencex-contract.md` §8.3).
    #[error(
        "not writing {path}: {key} is {value} and InferenceX computes 1000/TPOT for every TPOT \
         statistic; the run produced no usable per-token timing (no streamed multi-token answers, \
         or a zero-latency server)"
    )]
    ZeroTpot {
        /// The raw result file.
        path: PathBuf,
        /// The offending key.
        key: String,
        /// Its value.
        value: f64,
    },
}

impl ReportError {
    pub(crate) fn io(path: &Path) -> impl Fn(std::io::Error) -> ReportError + '_ {
        move |source| ReportError::Io {
            path: path.to_owned(),
            source,
        }
    }
}

/// Writes one artifact atomically (a killed run leaves the previous file or none).
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    crate::fsutil::write_atomic(path, bytes).map_err(ReportError::io(path))
}

/// Writes `profile_export_aiperf_timeslices.{csv,json}` into `dir` from its `records.jsonl`,
/// windows `slice_ns` long.
/// The lines of a `records.jsonl` as `R` (each view reads the fields it needs), keeping those
/// `keep` accepts; a line that does not parse names the file and the line.
/// A record's phase or status as the readers below keep them: the one phase and the one status
/// they filter on, any other `Other` (no `String` held per record).
#[derive(serde::Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Tag {
    Profiling,
    Success,
    #[serde(other)]
    Other,
}

fn read_records<R: serde::de::DeserializeOwned>(
    path: &Path,
    keep: impl Fn(&R) -> bool,
) -> Result<Vec<R>, ReportError> {
    let mut out = Vec::new();
    crate::fsutil::for_each_line(path, ReportError::io(path), |n, line| {
        if line.trim().is_empty() {
            return Ok(());
        }
        let r: R = serde_json::from_str(line).map_err(|e| ReportError::Input {
            path: path.to_owned(),
            reason: format!("line {n}: not a specperf record: {e}"),
        })?;
        if keep(&r) {
            out.push(r);
        }
        Ok(())
    })?;
    Ok(out)
}

pub(crate) fn write_timeslices(dir: &Path, s: &Summary, slice_ns: u64) -> Result<(), ReportError> {
    timeslices::write(dir, s, slice_ns)
}

/// Writes `histograms.json` (the per-chunk histograms `specperf merge` adds up) into `dir`.
pub(crate) fn write_histograms(dir: &Path, h: &Histograms) -> std::io::Result<()> {
    let json = serde_json::to_vec(h).map_err(std::io::Error::from)?;
    crate::fsutil::write_atomic(&dir.join("histograms.json"), &json)
}

/// Writes the end-of-run artifacts into `dir`: `summary.json`, `console.txt`,
/// `profile_export_aiperf.json`, `profile_export_aiperf.csv`, `gpu_telemetry_export.jsonl` when
/// GPU telemetry was read, and `server_metrics_export.json` + `.csv` when metrics endpoints were
/// scraped.
pub(crate) fn write_artifacts(dir: &Path, s: &Summary) -> Result<(), ReportError> {
    let mut json = serde_json::to_vec_pretty(s).expect("the summary serializes");
    json.push(b'\n');
    write_file(&dir.join("summary.json"), &json)?;
    write_file(&dir.join("console.txt"), console_table(s).as_bytes())?;
    write_file(
        &dir.join("profile_export_aiperf.json"),
        &json::pretty(&aiperf::summary_json(s)),
    )?;
    write_file(
        &dir.join("profile_export_aiperf.csv"),
        aiperf::summary_csv(s).as_bytes(),
    )?;
    if let Some(run) = &s.telemetry {
        write_file(
            &dir.join(aiperf::GPU_TELEMETRY_JSONL),
            &aiperf::gpu_telemetry_jsonl(run),
        )?;
    }
    if let Some(r) = &s.acceptance {
        write_file(
            &dir.join("server_metrics_export.json"),
            &json::pretty(&server_metrics::export(s, r)),
        )?;
        write_file(
            &dir.join("server_metrics_export.csv"),
            server_metrics::export_csv(s, r).as_bytes(),
        )?;
    }
    if let Some(t) = &s.telemetry {
        write_file(
            &dir.join("gpu_metrics.csv"),
            gpu_telemetry::gpu_metrics_csv(t).as_bytes(),
        )?;
    }
    Ok(())
}

/// Writes `inputs.json` (AIPerf's shape): one session per sample, its exact request body as the
/// only payload. Session ids match `conversation_id` in `profile_export.jsonl`.
pub(crate) fn write_inputs<B: AsRef<[u8]>>(
    dir: &Path,
    bodies: impl IntoIterator<Item = B>,
) -> std::io::Result<()> {
    use std::io::Write;
    let file = std::fs::File::create(dir.join("inputs.json"))?;
    let mut w = std::io::BufWriter::new(file);
    w.write_all(b"{\"data\": [")?;
    for (i, body) in bodies.into_iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        // Bodies are the JSON we send, byte for byte.
        write!(
            w,
            "\n  {{\"session_id\": \"{}\", \"payloads\": [",
            aiperf::session_id(i)
        )?;
        w.write_all(body.as_ref())?;
        w.write_all(b"]}")?;
    }
    w.write_all(b"\n]}\n")?;
    w.flush()
}

/// The realtime stats block (`--stats-interval`, AIPerf's periodic log block): requests done,
/// in flight and failed, request and token throughput over the last interval (`prev` is the
/// snapshot of the previous block, `secs` the time between them), the run's TTFT and ITL
/// medians and the live acceptance length.
pub fn stats_block(p: &Progress, prev: &Progress, secs: f64, now: Instant) -> String {
    let t = p
        .profiling_started
        .map_or(0.0, |s| now.saturating_duration_since(s).as_secs_f64());
    let rate = |now: u64, before: u64| {
        if secs > 0.0 {
            now.saturating_sub(before) as f64 / secs
        } else {
            0.0
        }
    };
    let errors = p.failed + p.cancelled;
    let error_pct = if p.done > 0 {
        100.0 * errors as f64 / p.done as f64
    } else {
        0.0
    };
    let in_flight = if p.sent > 0 {
        format!(", {} in flight", p.sent.saturating_sub(p.done))
    } else {
        String::new()
    };
    let ms = |v: Option<f64>| v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.1} ms"));
    let mut o = format!(
        "--- realtime stats at {} of profiling (every {secs:.0} s) ---\n\
         requests: {} done (+{}){in_flight}, {} ok, {} failed, {} cancelled ({error_pct:.2}% not ok), {} warmup\n\
         throughput (last {secs:.0} s): {:.2} req/s, {:.1} output tok/s, {:.1} input tok/s\n\
         latency (run median): TTFT {}, ITL {}\n",
        clock(t),
        p.done,
        p.done.saturating_sub(prev.done),
        p.ok,
        p.failed,
        p.cancelled,
        p.warmup,
        rate(p.ok, prev.ok),
        rate(p.output_tokens, prev.output_tokens),
        rate(p.input_tokens, prev.input_tokens),
        ms(p.ttft_p50_ms),
        ms(p.itl_p50_ms),
    );
    if let Some(al) = p.acceptance_length {
        let _ = writeln!(o, "acceptance length (live): {al:.3}");
    }
    o
}

/// One progress line: requests done (of the plan), rates, errors, live AL and ETA. With `bar`,
/// a terminal progress bar that fits `width` columns (redrawn in place by the caller). Before
/// the first measured request, what the run is waiting for instead.
pub fn progress_line(p: &Progress, now: Instant, bar: bool, width: usize) -> String {
    if let Some(s) = p.starting.filter(|_| p.profiling_started.is_none()) {
        return starting_line(p, &s, now);
    }
    let t = p
        .profiling_started
        .map_or(0.0, |s| now.saturating_duration_since(s).as_secs_f64());
    let rps = if t > 0.0 { p.ok as f64 / t } else { 0.0 };
    let tps = if t > 0.0 {
        p.output_tokens as f64 / t
    } else {
        0.0
    };
    let errors = p.failed + p.cancelled;
    let al = match p.acceptance_length {
        Some(a) => format!(" | AL {a:.3}"),
        None if p.acceptance_waiting => " | AL waiting for the first finished request".into(),
        None => String::new(),
    };
    let fraction = match (p.planned, p.duration_s) {
        (Some(n), _) if n > 0 => Some((p.done as f64 / n as f64).min(1.0)),
        (_, Some(d)) if d > 0.0 => Some((t / d).min(1.0)),
        _ => None,
    };
    let eta = match (p.planned, p.duration_s) {
        (Some(n), _) if rps > 0.0 => Some(n.saturating_sub(p.done) as f64 / (p.done as f64 / t)),
        (_, Some(d)) => Some((d - t).max(0.0)),
        _ => None,
    }
    .map(|e| format!(" | ETA {}", clock(e)))
    .unwrap_or_default();
    let done = match p.planned {
        Some(n) => format!("{}/{}", p.done, n),
        None => p.done.to_string(),
    };
    if let Some(until) = p.settling_until {
        // Every request is done; a bar frozen at 100% would look like a hang.
        let left = until.saturating_duration_since(now).as_secs_f64().ceil();
        return format!(
            "[{t:7.1}s] done {done} (ok {}, failed {}, cancelled {}) | waiting {left:.0} s for \
             the metrics to settle before the final scrape{al}",
            p.ok, p.failed, p.cancelled
        );
    }
    let text = format!(
        "{done} req | {rps:.1} req/s | {tps:.0} tok/s | {errors} err{al}{eta} | {}",
        clock(t)
    );
    if !bar {
        return format!(
            "[{t:7.1}s] done {done} (ok {}, failed {}, cancelled {}) | {rps:.1} req/s | \
             {tps:.0} output tok/s{al}{eta}",
            p.ok, p.failed, p.cancelled
        );
    }
    let Some(f) = fraction else {
        return text;
    };
    // Bar width: what is left of the line, between 10 and 40 cells.
    let cells = width.saturating_sub(text.chars().count() + 8).clamp(10, 40);
    let full = (f * cells as f64).round() as usize;
    format!(
        "[{}{}] {:>3.0}% {text}",
        "#".repeat(full),
        "-".repeat(cells - full),
        f * 100.0
    )
}

/// The start-up step and how long it has waited, e.g. `[starting] connecting to 10.0.0.5:8000:
/// waiting for the model list (GET /v1/models) … 2 s`.
fn starting_line(p: &Progress, s: &Starting, now: Instant) -> String {
    let waited = now.saturating_duration_since(s.since).as_secs_f64().floor();
    let at = s
        .addr
        .map(|a| format!("connecting to {a}: "))
        .unwrap_or_default();
    let what = match s.step {
        StartStep::Resolving => "resolving the target's host name".to_owned(),
        StartStep::ModelList => format!("{at}waiting for the model list (GET /v1/models)"),
        StartStep::Warming { done, of } => {
            format!("{at}warming {of} connections, {done}/{of} answered")
        }
        StartStep::Warmup => format!("warmup: {} requests done", p.warmup),
        StartStep::Baseline => "reading the metrics baseline before the first request".to_owned(),
    };
    format!("[starting] {what} … {waited:.0} s")
}

/// `h:mm:ss` (or `m:ss` under an hour).
fn clock(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}
