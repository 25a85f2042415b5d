//! `profile_export_aiperf_timeslices.{csv,json}`: per-request metrics per time window, the files
//! `aiperf plot` draws its "across time slices" charts from (`aiperf-compat.md` §5).
//!
//! As AIPerf buckets them: windows of `--slice-duration` from the first request's start, each
//! request in the window its start falls in, empty windows skipped, the last window clipped to
//! the last request's end and marked incomplete. Read back from `records.jsonl` after the run,
//! so nothing is kept in memory while it goes.

use std::path::Path;

use serde::Deserialize;

use super::json::{Obj, J};
use super::ReportError;
use super::Tag;
use crate::metrics::{Stat, Summary};

/// The fields of a `records.jsonl` line the slices need: held for every successful request of
/// the run until the files are written, so nothing in it owns heap memory it does not need (an
/// hour at 1,536 AgentX lanes is ~800k of them).
#[derive(Deserialize)]
struct Rec {
    phase: Tag,
    outcome: Outcome,
    sent_ns: u64,
    first_token_ns: Option<u64>,
    last_token_ns: Option<u64>,
    end_ns: u64,
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    /// The response's speculative-decoding figures, when it reported any.
    #[serde(default)]
    spec: Option<Box<crate::record::SpecDecode>>,
}

#[derive(Deserialize)]
struct Outcome {
    status: Tag,
}

/// A per-request metric: tag, header as AIPerf writes it, unit, value of one record.
type Metric = (
    &'static str,
    &'static str,
    &'static str,
    fn(&Rec) -> Option<f64>,
);

fn ms(a: u64, b: u64) -> f64 {
    b.saturating_sub(a) as f64 / 1e6
}

const METRICS: [Metric; 7] = [
    ("time_to_first_token", "Time to First Token", "ms", |r| {
        r.first_token_ns.map(|t| ms(r.sent_ns, t))
    }),
    ("inter_token_latency", "Inter Token Latency", "ms", |r| {
        let (a, b, n) = (r.first_token_ns?, r.last_token_ns?, r.completion_tokens?);
        (n > 1).then(|| ms(a, b) / (n - 1) as f64)
    }),
    ("request_latency", "Request Latency", "ms", |r| {
        Some(ms(r.sent_ns, r.end_ns))
    }),
    (
        "input_sequence_length",
        "Input Sequence Length",
        "tokens",
        |r| r.prompt_tokens.map(|n| n as f64),
    ),
    (
        "output_sequence_length",
        "Output Sequence Length",
        "tokens",
        |r| r.completion_tokens.map(|n| n as f64),
    ),
    // Per-request acceptance over time, where responses reported it (AIPerf's record metrics).
    (
        "spec_decode_acceptance_length",
        "Acceptance Length",
        "ratio",
        |r| r.spec.as_ref()?.acceptance_length(),
    ),
    (
        "spec_decode_draft_acceptance_rate",
        "Draft Acceptance Rate",
        "%",
        |r| r.spec.as_ref()?.acceptance_rate().map(|x| x * 100.0),
    ),
];

const PCTS: [&str; 9] = ["p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99"];

/// One window: bounds (epoch ns), completeness, its records.
struct Slice<'a> {
    start_ns: u64,
    end_ns: u64,
    complete: bool,
    recs: Vec<&'a Rec>,
}

fn slices(recs: &[Rec], epoch_ns: u64, slice_ns: u64) -> Vec<Slice<'_>> {
    let Some(first) = recs.iter().map(|r| r.sent_ns).min() else {
        return Vec::new();
    };
    let last = recs
        .iter()
        .map(|r| r.end_ns.max(r.sent_ns))
        .max()
        .unwrap_or(first);
    let n = ((last - first) / slice_ns + 1) as usize;
    let mut bins: Vec<Vec<&Rec>> = (0..n).map(|_| Vec::new()).collect();
    for r in recs {
        bins[((r.sent_ns - first) / slice_ns) as usize].push(r);
    }
    bins.into_iter()
        .enumerate()
        .filter(|(_, b)| !b.is_empty())
        .map(|(i, recs)| {
            let start = first + i as u64 * slice_ns;
            let complete = start + slice_ns <= last;
            let end = if complete { start + slice_ns } else { last };
            Slice {
                start_ns: epoch_ns + start,
                end_ns: epoch_ns + end,
                complete,
                recs,
            }
        })
        .collect()
}

/// The stats of one metric in one window, in AIPerf's `STAT_KEYS` order.
fn stat_pairs(st: &Stat) -> Vec<(&'static str, f64)> {
    let mut v = vec![
        ("avg", st.avg),
        ("min", st.min),
        ("max", st.max),
        ("sum", st.sum),
    ];
    for p in PCTS {
        v.push((p, st.percentiles.get(p).copied().unwrap_or(f64::NAN)));
    }
    v.push(("std", st.std));
    v
}

/// Per window: (tag, header, unit, stats).
type Rows = Vec<(
    &'static str,
    &'static str,
    &'static str,
    Vec<(&'static str, f64)>,
)>;

fn rows(s: &Slice<'_>, slice_s: f64) -> Rows {
    let mut out: Rows = Vec::new();
    for (tag, header, unit, get) in METRICS {
        let values: Vec<f64> = s.recs.iter().filter_map(|r| get(r)).collect();
        if let Some(st) = Stat::of(&values) {
            out.push((tag, header, unit, stat_pairs(&st)));
        }
    }
    let dur = if s.complete {
        slice_s
    } else {
        (s.end_ns - s.start_ns) as f64 / 1e9
    };
    let n = s.recs.len() as f64;
    out.push((
        "request_throughput",
        "Request Throughput",
        "requests/sec",
        vec![("avg", if dur > 0.0 { n / dur } else { 0.0 })],
    ));
    out.push((
        "request_count",
        "Request Count",
        "requests",
        vec![("avg", n)],
    ));
    out
}

/// AIPerf's timeslice CSV number: 2 decimals.
fn num(v: f64) -> String {
    format!("{v:.2}")
}

/// Writes both files into `dir` from its `records.jsonl`; nothing when there is none (a merged
/// shard directory keeps its records per shard).
pub(crate) fn write(dir: &Path, s: &Summary, slice_ns: u64) -> Result<(), ReportError> {
    let path = dir.join("records.jsonl");
    if !path.exists() {
        return Ok(());
    }
    let recs = super::read_records(&path, |r: &Rec| {
        r.phase == Tag::Profiling && r.outcome.status == Tag::Success
    })?;
    let epoch_ns = (s.meta.start_unix_s * 1e9) as u64;
    let slice_ns = slice_ns.max(1);
    let slice_s = slice_ns as f64 / 1e9;
    let mut csv = String::from("Timeslice,Start_NS,End_NS,Metric,Unit,Stat,Value\n");
    let mut json = Vec::new();
    for (i, sl) in slices(&recs, epoch_ns, slice_ns).iter().enumerate() {
        let mut o = Obj::new()
            .with("start_ns", sl.start_ns)
            .with("end_ns", sl.end_ns);
        if !sl.complete {
            o.put("is_complete", false);
        }
        let mut rows = rows(sl, slice_s);
        for (tag, _, unit, stats) in &rows {
            let mut m = Obj::new().with("unit", *unit);
            for (k, v) in stats {
                m.put(*k, *v);
            }
            o.put(*tag, m);
        }
        json.push(J::O(o));
        // The CSV lists metrics by tag, as AIPerf sorts them.
        rows.sort_by_key(|r| r.0);
        for (_, header, unit, stats) in rows {
            for (k, v) in stats {
                csv.push_str(&format!(
                    "{i},{},{},{header},{unit},{k},{}\n",
                    sl.start_ns,
                    sl.end_ns,
                    num(v)
                ));
            }
        }
    }
    // No `input_config`: AIPerf's model takes it as optional, and a present one must be its whole
    // BenchmarkConfig (profile_export_aiperf.json carries that, with the slice duration).
    let doc = Obj::new().with("timeslices", json);
    let csv_path = dir.join("profile_export_aiperf_timeslices.csv");
    crate::fsutil::write_atomic(&csv_path, csv.as_bytes()).map_err(ReportError::io(&csv_path))?;
    let json_path = dir.join("profile_export_aiperf_timeslices.json");
    crate::fsutil::write_atomic(&json_path, &super::json::pretty(&J::O(doc)))
        .map_err(ReportError::io(&json_path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(sent_ms: u64, ttft_ms: u64, end_ms: u64) -> Rec {
        Rec {
            phase: Tag::Profiling,
            outcome: Outcome {
                status: Tag::Success,
            },
            sent_ns: sent_ms * 1_000_000,
            first_token_ns: Some((sent_ms + ttft_ms) * 1_000_000),
            last_token_ns: Some(end_ms * 1_000_000),
            end_ns: end_ms * 1_000_000,
            prompt_tokens: Some(10),
            completion_tokens: Some(11),
            spec: None,
        }
    }

    #[test]
    fn requests_fall_in_the_window_their_start_is_in_and_the_last_is_clipped() {
        let recs = [rec(0, 10, 500), rec(900, 20, 1500), rec(2100, 30, 2600)];
        let s = slices(&recs, 1_000, 1_000_000_000);
        // Window 1 (1 s..2 s) has no request start: skipped.
        assert_eq!(s.len(), 2);
        assert_eq!(
            (s[0].start_ns, s[0].end_ns, s[0].complete),
            (1_000, 1_000_001_000, true)
        );
        assert_eq!(s[0].recs.len(), 2);
        assert_eq!(s[1].start_ns, 2_000_001_000);
        assert_eq!((s[1].end_ns, s[1].complete), (2_600_001_000, false));
        let r = rows(&s[0], 1.0);
        let ttft = r.iter().find(|x| x.0 == "time_to_first_token").unwrap();
        assert_eq!(ttft.3[0], ("avg", 15.0));
        let itl = r.iter().find(|x| x.0 == "inter_token_latency").unwrap();
        assert_eq!(itl.3[1], ("min", 49.0));
        let tput = r.iter().find(|x| x.0 == "request_throughput").unwrap();
        assert_eq!(tput.3, [("avg", 2.0)]);
        // No response reported acceptance: no acceptance rows.
        assert!(!r.iter().any(|x| x.0.starts_with("spec_decode")));
    }

    #[test]
    fn reported_acceptance_is_a_per_window_metric() {
        let mut a = rec(0, 10, 500);
        a.spec = serde_json::from_str(
            r#"{"source":"vllm","steps":4,"draft_tokens":12,"accepted_tokens":6}"#,
        )
        .unwrap();
        let mut b = rec(100, 10, 600);
        b.spec =
            serde_json::from_str(r#"{"source":"llamacpp","draft_tokens":10,"accepted_tokens":5}"#)
                .unwrap();
        let recs = [a, b];
        let s = slices(&recs, 0, 1_000_000_000);
        let r = rows(&s[0], 1.0);
        // llama.cpp reports no steps: only the vLLM request has an AL (1 + 6/4).
        let al = r
            .iter()
            .find(|x| x.0 == "spec_decode_acceptance_length")
            .unwrap();
        assert_eq!((al.2, al.3[0]), ("ratio", ("avg", 2.5)));
        let rate = r
            .iter()
            .find(|x| x.0 == "spec_decode_draft_acceptance_rate")
            .unwrap();
        assert_eq!((rate.2, rate.3[0]), ("%", ("avg", 50.0)));
    }
}
