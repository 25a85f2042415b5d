//! Summary -> what people and scripts read: the console table and the artifact files
//! (`summary.json`, `console.txt`; `records.jsonl` is written live by the aggregator).

use std::fmt::Write as _;
use std::path::Path;

use crate::metrics::Summary;
use crate::scrape::acceptance::AcceptanceStatus;
use crate::scrape::ScrapeReport;

/// Rows of the console table: (metric key, label).
const ROWS: [(&str, &str); 12] = [
    ("time_to_first_token_ms", "Time to first token (ms)"),
    ("time_to_second_token_ms", "Time to second token (ms)"),
    ("request_latency_ms", "Request latency (ms)"),
    ("inter_token_latency_ms", "Inter-token latency (ms)"),
    (
        "inter_token_latency_token_weighted_ms",
        "ITL per token, weighted (ms)",
    ),
    ("inter_chunk_latency_ms", "Inter-chunk latency (ms)"),
    (
        "output_token_throughput_per_user_tps",
        "Output tokens/s per user",
    ),
    (
        "e2e_output_token_throughput_tps",
        "E2E output tokens/s per request",
    ),
    ("input_sequence_length", "Input sequence length (tokens)"),
    ("output_sequence_length", "Output sequence length (tokens)"),
    ("dispatch_lag_ms", "Dispatch lag (ms)"),
    (
        "time_to_first_output_token_ms",
        "Time to first output token (ms)",
    ),
];

/// The final console table.
pub fn console_table(s: &Summary) -> String {
    let mut o = String::new();
    let m = &s.meta;
    let _ = writeln!(
        o,
        "specperf {} | {} | model {} | {} | concurrency {} | streaming {}",
        s.specperf_version, m.url, m.model, m.endpoint, m.concurrency, m.streaming
    );
    let _ = writeln!(
        o,
        "{:<34} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "Metric", "avg", "min", "p50", "p90", "p99", "max", "std"
    );
    for (key, label) in ROWS {
        if let Some(st) = s.metrics.get(key) {
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
    let _ = writeln!(
        o,
        "Requests: {} ok, {} failed, {} cancelled, {} total (planned {})",
        c.success, c.failed, c.cancelled, c.total, m.request_count
    );
    if !c.failed_by_kind.is_empty() {
        let kinds: Vec<String> = c
            .failed_by_kind
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(o, "Failures: {}", kinds.join(", "));
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
    if let Some(r) = &s.acceptance {
        acceptance_line(&mut o, r);
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

/// Writes `summary.json` and `console.txt` into `dir`, each through a temporary file and a
/// rename: a run killed while writing leaves the previous file or none, never half a summary.
pub fn write_artifacts(dir: &Path, s: &Summary) -> std::io::Result<()> {
    let json = serde_json::to_vec_pretty(s).map_err(std::io::Error::from)?;
    write_whole(dir, "summary.json", &json)?;
    write_whole(dir, "console.txt", console_table(s).as_bytes())
}

fn write_whole(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, dir.join(name)))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
}
