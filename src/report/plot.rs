//! `specperf plot DIR`: charts from a finished replay's artifacts (`records.jsonl`,
//! `summary.json`, and the chunk times of `profile_export.jsonl` when present), as SVG, PNG
//! (the same SVG rasterised by resvg, pure Rust) and one self-contained `report.html` with
//! every chart inline.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use super::page::{html, png};
use super::svg::{self, Band, Bars, Chart, HLine, Series, COLORS};
use super::{ReportError, Tag};
use crate::metrics::{SpecTotalsView, SummaryView, ViewError, AL_BIN_WIDTH};
use crate::record::SpecDecode;

/// The fields of a `records.jsonl` line the charts need.
#[derive(Deserialize)]
struct Rec {
    id: u64,
    phase: Tag,
    outcome: RecOutcome,
    sent_ns: u64,
    first_token_ns: Option<u64>,
    last_token_ns: Option<u64>,
    end_ns: u64,
    completion_tokens: Option<u64>,
    first_chunk_tokens: Option<u64>,
    #[serde(default)]
    content_events: Option<u32>,
    /// The speculative decoding the response reported.
    #[serde(default)]
    spec: Option<Box<SpecDecode>>,
}

/// The fields of a `profile_export.jsonl` line the throughput chart needs.
#[derive(Deserialize)]
struct ProfileLine {
    metadata: ProfileMeta,
    #[serde(default)]
    metrics: ProfileMetrics,
}

#[derive(Deserialize)]
struct ProfileMeta {
    x_request_id: String,
}

#[derive(Default, Deserialize)]
struct ProfileMetrics {
    inter_chunk_latency: Option<ProfileGaps>,
}

#[derive(Deserialize)]
struct ProfileGaps {
    value: Vec<f64>,
}

/// Calls `each(record id, gaps in ms)` for every line of `profile_export.jsonl` with per-chunk
/// gaps (`inter_chunk_latency`), streaming: the records carry only the first and last token
/// times. The file is an optional refinement (the chart falls back to spreading tokens evenly),
/// so an absent or unreadable file or line is skipped.
fn for_each_chunk_gaps(path: &Path, mut each: impl FnMut(u64, &[f64])) {
    let _ = crate::fsutil::for_each_line(
        path,
        |_| (),
        |_, line| {
            let Ok(p) = serde_json::from_str::<ProfileLine>(line) else {
                return Ok(());
            };
            let id = p.metadata.x_request_id.strip_prefix("specperf-");
            if let (Some(id), Some(g)) = (
                id.and_then(|i| i.parse::<u64>().ok()),
                p.metrics.inter_chunk_latency,
            ) {
                each(id, &g.value);
            }
            Ok(())
        },
    );
}

/// When a successful request's output tokens arrived, as `(ns, tokens)`: the first chunk's
/// tokens (per-chunk usage) at the first token, the rest evenly over the later chunks, at
/// their arrival times from `gaps` (ms between chunks) when those match the record's chunk
/// count, else evenly spaced up to the last token. A non-streaming response is one chunk: all
/// at once.
fn token_arrivals(r: &Rec, gaps: Option<&[f64]>) -> Vec<(u64, f64)> {
    let total = r.completion_tokens.unwrap_or(0) as f64;
    let (Some(first), Some(last)) = (r.first_token_ns, r.last_token_ns) else {
        return vec![(r.end_ns, total)];
    };
    let chunks = r.content_events.unwrap_or(1).max(1) as usize;
    let at: Vec<u64> = match gaps {
        Some(g) if g.len() + 1 == chunks => std::iter::once(first)
            .chain(g.iter().scan(first as f64, |t, ms| {
                *t += ms * 1e6;
                Some(t.round() as u64)
            }))
            .collect(),
        _ if chunks == 1 => vec![first],
        _ => {
            let span = last.saturating_sub(first) as f64;
            (0..chunks)
                .map(|i| first + (span * i as f64 / (chunks - 1) as f64).round() as u64)
                .collect()
        }
    };
    if at.len() == 1 {
        return vec![(first, total)];
    }
    let head = r
        .first_chunk_tokens
        .map_or(total / at.len() as f64, |k| (k as f64).min(total));
    let rest = (total - head) / (at.len() - 1) as f64;
    at.iter()
        .enumerate()
        .map(|(i, &t)| (t, if i == 0 { head } else { rest }))
        .collect()
}

/// What the chunk times said of one successful record.
#[derive(Clone, Copy, PartialEq)]
enum Placed {
    /// No line with gaps named it: its tokens spread evenly.
    Not,
    /// Its one line's gaps placed its tokens.
    ByGaps,
    /// Its one line's gaps did not match its chunk count: spread evenly.
    Unusable,
    /// Two lines named it (merged shards): ambiguous, spread evenly; the first line's tokens,
    /// already binned, are taken back out.
    Twice { binned: bool },
}

/// Output tokens per time bin: each successful record's tokens where they arrived, from
/// `profile_export.jsonl`'s per-chunk gaps (`profile`) in one streaming pass, evenly spread
/// where the file has no unique line for it. A second pass runs only when ids repeat.
fn token_bins(
    recs: &[Rec],
    profile: Option<&Path>,
    bin: impl Fn(u64) -> usize,
    n: usize,
) -> Vec<f64> {
    let mut tok = vec![0.0; n];
    let mut add = |a: Vec<(u64, f64)>, sign: f64| {
        for (at, k) in a {
            tok[bin(at)] += sign * k;
        }
    };
    let ok: HashMap<u64, usize> = recs
        .iter()
        .enumerate()
        .filter(|(_, r)| r.outcome.status == Tag::Success)
        .map(|(i, r)| (r.id, i))
        .collect();
    let mut placed = vec![Placed::Not; recs.len()];
    if let Some(path) = profile {
        for_each_chunk_gaps(path, |id, g| {
            let Some(&i) = ok.get(&id) else { return };
            placed[i] = match placed[i] {
                Placed::Not
                    if g.len() + 1 == recs[i].content_events.unwrap_or(1).max(1) as usize =>
                {
                    add(token_arrivals(&recs[i], Some(g)), 1.0);
                    Placed::ByGaps
                }
                Placed::Not => Placed::Unusable,
                Placed::ByGaps => Placed::Twice { binned: true },
                Placed::Unusable => Placed::Twice { binned: false },
                twice => twice,
            };
        });
        if placed.contains(&Placed::Twice { binned: true }) {
            for_each_chunk_gaps(path, |id, g| {
                let Some(&i) = ok.get(&id) else { return };
                if placed[i] == (Placed::Twice { binned: true }) {
                    add(token_arrivals(&recs[i], Some(g)), -1.0);
                    placed[i] = Placed::Twice { binned: false };
                }
            });
        }
    }
    for (r, p) in recs.iter().zip(&placed) {
        if r.outcome.status == Tag::Success && *p != Placed::ByGaps {
            add(token_arrivals(r, None), 1.0);
        }
    }
    tok
}

#[derive(Deserialize)]
struct RecOutcome {
    status: Tag,
}

/// What `plot` wrote.
#[derive(Debug)]
pub struct PlotOutput {
    /// Every file written (SVG, PNG, `report.html`).
    pub files: Vec<PathBuf>,
}

/// Up to `max` points of the empirical CDF of `v` (sorted in place).
fn cdf(v: &mut [f64], max: usize) -> Vec<(f64, f64)> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return Vec::new();
    }
    let step = n.div_ceil(max).max(1);
    let mut pts: Vec<(f64, f64)> = (0..n)
        .step_by(step)
        .map(|i| (v[i], (i + 1) as f64 / n as f64))
        .collect();
    if pts.last().map(|p| p.1) != Some(1.0) {
        pts.push((v[n - 1], 1.0));
    }
    pts
}

/// A round bin width giving at most about 60 bins over `span_s` (never under 1 ms).
fn bin_width(span_s: f64) -> f64 {
    let raw = (span_s / 60.0).max(1e-3);
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|b| *b >= raw)
        .unwrap_or(10.0 * mag)
}

struct TimeSeries {
    /// The window (bin width) in seconds.
    window_s: f64,
    /// Bin centres, seconds since the first send.
    t: Vec<f64>,
    requests_per_s: Vec<f64>,
    tokens_per_s: Vec<f64>,
    in_flight: Vec<f64>,
}

fn time_series(recs: &[Rec], profile: Option<&Path>) -> Option<TimeSeries> {
    let t0 = recs.iter().map(|r| r.sent_ns).min()?;
    let end = recs.iter().map(|r| r.end_ns).max()?;
    let span = (end - t0) as f64 / 1e9;
    let w = bin_width(span);
    let n = ((span / w).ceil() as usize).max(1);
    let mut req = vec![0.0; n];
    let tok = token_bins(
        recs,
        profile,
        |at| ((at.saturating_sub(t0) as f64 / 1e9 / w) as usize).min(n - 1),
        n,
    );
    let mut busy = vec![0.0; n];
    for r in recs {
        let s = (r.sent_ns - t0) as f64 / 1e9;
        let e = (r.end_ns.max(r.sent_ns) - t0) as f64 / 1e9;
        let bin = ((e / w) as usize).min(n - 1);
        if r.outcome.status == Tag::Success {
            req[bin] += 1.0;
        }
        // Time-weighted requests in flight: each request adds its overlap with every bin.
        let (first, last) = ((s / w) as usize, ((e / w) as usize).min(n - 1));
        for (b, slot) in busy.iter_mut().enumerate().take(last + 1).skip(first) {
            let (lo, hi) = (b as f64 * w, (b + 1) as f64 * w);
            *slot += (e.min(hi) - s.max(lo)).max(0.0);
        }
    }
    // The last bin may be partial.
    let width = |b: usize| (span - b as f64 * w).clamp(1e-9, w);
    Some(TimeSeries {
        window_s: w,
        t: (0..n).map(|b| b as f64 * w + width(b) / 2.0).collect(),
        requests_per_s: (0..n).map(|b| req[b] / width(b)).collect(),
        tokens_per_s: (0..n).map(|b| tok[b] / width(b)).collect(),
        in_flight: (0..n).map(|b| busy[b] / width(b)).collect(),
    })
}

fn line(name: &str, t: &[f64], v: &[f64], color: &'static str) -> Series {
    Series {
        name: name.into(),
        points: t.iter().copied().zip(v.iter().copied()).collect(),
        color,
        step: false,
    }
}

fn chart(id: &'static str, title: &str, x: &str, y: &str, series: Vec<Series>) -> Chart {
    let mut c = Chart::lines(id, title, x, y, series);
    c.x_from_zero = !id.ends_with("_cdf");
    c
}

/// The charts of one artifact directory, by file stem.
fn charts(
    recs: &[Rec],
    summary: &SummaryView,
    profile: Option<&Path>,
    golden_al: Option<f64>,
) -> Vec<Chart> {
    let ok: Vec<&Rec> = recs
        .iter()
        .filter(|r| r.outcome.status == Tag::Success)
        .collect();
    let mut ttft: Vec<f64> = ok
        .iter()
        .filter_map(|r| {
            r.first_token_ns
                .map(|t| t.saturating_sub(r.sent_ns) as f64 / 1e6)
        })
        .collect();
    // AIPerf's ITL per request, as in summary.json: (latency − TTFT) / (OSL − first chunk's tokens).
    let mut itl: Vec<f64> = ok
        .iter()
        .filter_map(|r| {
            let (first, last) = (r.first_token_ns?, r.last_token_ns?);
            let osl = r.completion_tokens?;
            let k = r.first_chunk_tokens.unwrap_or(1).max(1);
            (osl > k).then(|| last.saturating_sub(first) as f64 / (osl - k) as f64 / 1e6)
        })
        .collect();
    let mut out = Vec::new();
    // A non-streaming response arrives in one piece: TTFT is the whole latency and the ITL is 0,
    // so neither was measured and neither is drawn.
    if summary.streaming() {
        let mut c = chart(
            "ttft_cdf",
            "Time to first token (CDF)",
            "TTFT (ms)",
            "fraction of requests",
            vec![Series {
                name: format!("{} requests", ttft.len()),
                points: cdf(&mut ttft, 2000),
                color: COLORS[0],
                step: true,
            }],
        );
        c.y_range = Some((0.0, 1.0));
        out.push(c);
        let mut c = chart(
            "itl_cdf",
            "Inter-token latency per request (CDF)",
            "ITL (ms)",
            "fraction of requests",
            vec![Series {
                name: format!("{} requests", itl.len()),
                points: cdf(&mut itl, 2000),
                color: COLORS[1],
                step: true,
            }],
        );
        c.y_range = Some((0.0, 1.0));
        out.push(c);
    }
    let ts = time_series(recs, profile);
    let (t, rps, tps, inflight) = match &ts {
        Some(s) => (
            &s.t[..],
            &s.requests_per_s[..],
            &s.tokens_per_s[..],
            &s.in_flight[..],
        ),
        None => (&[][..], &[][..], &[][..], &[][..]),
    };
    let window = ts
        .as_ref()
        .map_or("no".to_owned(), |s| format!("{} s", svg::label(s.window_s)));
    out.push(chart(
        "throughput",
        "Output token throughput over time (tokens at their arrival)",
        "time since first request (s)",
        &format!("output tokens/s ({window} windows)"),
        vec![line("output tokens/s", t, tps, COLORS[2])],
    ));
    out.push(chart(
        "requests",
        "Completed requests over time",
        "time since first request (s)",
        &format!("requests/s ({window} windows)"),
        vec![line("successful requests/s", t, rps, COLORS[0])],
    ));
    let mut c = chart(
        "in_flight",
        "Requests in flight over time",
        "time since first request (s)",
        &format!("requests in flight (time-weighted mean per {window} window)"),
        vec![line("in flight", t, inflight, COLORS[3])],
    );
    if let Some(n) = summary.meta.concurrency {
        c.hlines.push(HLine {
            y: n,
            label: format!("--concurrency {n}"),
            color: "#888888",
            dashed: true,
        });
    }
    out.push(c);

    out.push(al_chart(summary, golden_al));
    out.extend(al_per_request_chart(&ok, summary));
    out.extend(al_by_group_chart(summary));
    out
}

/// A request's AL as its response reported it: `1 + accepted / steps`, else the server's own
/// per-request figure (TensorRT-LLM's tokens per iteration).
fn reported_al(d: &SpecDecode) -> Option<f64> {
    d.acceptance_length()
        .or(d.reported_acceptance_length)
        .filter(|v| v.is_finite())
}

/// The distribution of the per-request AL, in bins [`AL_BIN_WIDTH`] wide from 1.0: from
/// `summary.json`'s `spec_decode.al_histogram` (reported AL where the response had it, else the
/// stream estimate), else from the records' reported figures. `None` when the run has neither.
fn al_per_request_chart(ok: &[&Rec], summary: &SummaryView) -> Option<Chart> {
    let from_summary: Vec<(f64, f64)> = summary
        .spec_decode
        .iter()
        .flat_map(|s| &s.al_histogram)
        .filter_map(|b| Some((b.lo?, b.requests?)))
        .collect();
    let (bins, what) = if from_summary.is_empty() {
        let mut counts: Vec<f64> = Vec::new();
        for al in ok
            .iter()
            .filter_map(|r| r.spec.as_deref().and_then(reported_al))
        {
            let i = ((al - 1.0).max(0.0) / AL_BIN_WIDTH) as usize;
            if counts.len() <= i {
                counts.resize(i + 1, 0.0);
            }
            counts[i] += 1.0;
        }
        let bins: Vec<(f64, f64)> = counts
            .into_iter()
            .enumerate()
            .map(|(i, n)| (1.0 + i as f64 * AL_BIN_WIDTH, n))
            .collect();
        (bins, "reported by the responses")
    } else {
        (from_summary, "reported, else the stream estimate")
    };
    if bins.iter().all(|b| b.1 == 0.0) {
        return None;
    }
    let n: f64 = bins.iter().map(|b| b.1).sum();
    let mut c = chart(
        "al_per_request",
        "Acceptance length per request",
        "acceptance length (tokens per step)",
        "requests",
        Vec::new(),
    );
    c.x_from_zero = false;
    c.bars.push(Bars {
        name: format!("{n:.0} requests, AL {what}"),
        points: bins
            .iter()
            .map(|&(lo, k)| (lo + AL_BIN_WIDTH / 2.0, k))
            .collect(),
        width: AL_BIN_WIDTH,
        color: COLORS[0],
    });
    Some(c)
}

/// The token-weighted AL of each group (`spec_decode.by_group`): reported, and the stream
/// estimate beside it where there is one, with the counters' AL of the whole run as a line.
/// `None` without groups.
fn al_by_group_chart(summary: &SummaryView) -> Option<Chart> {
    let spec = summary.spec_decode.as_ref()?;
    let groups = Some(&spec.by_group).filter(|g| !g.is_empty())?;
    let field = spec.group_field.as_deref().unwrap_or("group");
    let al = |t: &Option<SpecTotalsView>| t.as_ref()?.token_weighted_acceptance_length;
    let reported: Vec<Option<f64>> = groups.values().map(|g| al(&g.reported)).collect();
    let stream: Vec<Option<f64>> = groups.values().map(|g| al(&g.stream_estimate)).collect();
    // Two bars side by side when both figures exist somewhere, else one wide bar.
    let both = reported.iter().any(Option::is_some) && stream.iter().any(Option::is_some);
    let width = if both { 0.38 } else { 0.7 };
    let bars = |name: &str, v: &[Option<f64>], shift: f64, color| Bars {
        name: name.into(),
        points: v
            .iter()
            .enumerate()
            .filter_map(|(i, a)| a.map(|a| (i as f64 + shift, a)))
            .collect(),
        width,
        color,
    };
    let shift = if both { width / 2.0 } else { 0.0 };
    let mut c = chart(
        "al_by_group",
        &format!("Acceptance length per {field} (token-weighted)"),
        field,
        "acceptance length (tokens per step)",
        Vec::new(),
    );
    c.x_categories = groups.keys().cloned().collect();
    if reported.iter().any(Option::is_some) {
        c.bars.push(bars(
            "reported by the responses",
            &reported,
            -shift,
            COLORS[0],
        ));
    }
    if stream.iter().any(Option::is_some) {
        c.bars
            .push(bars("stream estimate", &stream, shift, COLORS[3]));
    }
    if let Some(al) = summary.counters_al() {
        c.hlines.push(HLine {
            y: al,
            label: format!("counters' AL over the run {al:.3}"),
            color: COLORS[2],
            dashed: true,
        });
    }
    c.empty_note = "no group reported an acceptance length".into();
    Some(c)
}

/// The gate's pass band around the golden AL (`gate::run::verdict`: ±5%).
const GATE_BAND: f64 = 0.05;

/// AL over time: the cumulative AL (baseline to each scrape, as the gate measures it), the
/// interval AL between consecutive scrapes (what the server did in that stretch), the final AL,
/// and with a golden value its ±5% gate band; the y axis is chosen to show the band and the
/// data, not from 0 (which flattens the band into one line).
fn al_chart(summary: &SummaryView, golden_al: Option<f64>) -> Chart {
    let acceptance = summary.acceptance.as_ref();
    // (t_s, AL, drafts) at each live scrape, cumulative since the baseline.
    let mut cum: Vec<(f64, f64, Option<f64>)> = acceptance
        .iter()
        .flat_map(|a| &a.timeline)
        .filter_map(|p| Some((p.t_s?, p.acceptance_length?, p.drafts)))
        .collect();
    // The final scrape closes the window: its AL is the run's, at the window's end.
    let final_al = summary.counters_al();
    if let (Some(al), Some(w)) = (final_al, acceptance.and_then(|a| a.window_s)) {
        let drafts = acceptance
            .and_then(|a| a.acceptance.as_ref())
            .and_then(|c| c.drafts);
        cum.push((w, al, drafts));
    }
    // AL is tokens per draft step, so AL × drafts counts tokens: the interval AL is
    // Δtokens / Δdrafts between two scrapes. A counter that went back (a reset) restarts it.
    let mut interval = Vec::new();
    let (mut prev_tokens, mut prev_drafts) = (0.0, 0.0);
    for &(t, al, drafts) in &cum {
        let Some(d) = drafts else { continue };
        let tokens = al * d;
        if d > prev_drafts {
            interval.push((t, (tokens - prev_tokens) / (d - prev_drafts)));
        }
        (prev_tokens, prev_drafts) = (tokens, d);
    }
    let mut c = chart(
        "acceptance_length",
        "Acceptance length over time",
        "time since the baseline scrape (s)",
        "acceptance length (tokens per step)",
        vec![
            Series {
                name: "cumulative AL (baseline to scrape)".into(),
                points: cum.iter().map(|&(t, al, _)| (t, al)).collect(),
                color: COLORS[0],
                step: false,
            },
            Series {
                name: "interval AL (between scrapes)".into(),
                points: interval,
                color: COLORS[3],
                step: false,
            },
        ],
    );
    if let Some(al) = final_al {
        c.hlines.push(HLine {
            y: al,
            label: format!("final AL {al:.3}"),
            color: COLORS[2],
            dashed: true,
        });
    }
    if let Some(g) = golden_al {
        c.hlines.push(HLine {
            y: g,
            label: format!("golden AL {g:.2}"),
            color: COLORS[1],
            dashed: false,
        });
        let (lo, hi) = (g * (1.0 - GATE_BAND), g * (1.0 + GATE_BAND));
        c.band = Some(Band {
            lo,
            hi,
            label: format!("gate band ±5% [{lo:.3}, {hi:.3}]"),
            color: COLORS[1],
        });
    }
    let ys = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .chain(c.hlines.iter().map(|l| l.y))
        .chain(c.band.iter().flat_map(|b| [b.lo, b.hi]))
        .filter(|v| v.is_finite());
    if let Some((lo, hi)) = ys.fold(None, |acc: Option<(f64, f64)>, v| {
        Some(acc.map_or((v, v), |(a, b)| (a.min(v), b.max(v))))
    }) {
        let pad = ((hi - lo) * 0.15).max(0.05);
        c.y_range = Some((lo - pad, hi + pad));
    }
    c.empty_note = "no acceptance length measured (no metrics endpoint, or no drafts)".into();
    c
}

/// Draws the charts of the replay artifacts in `dir` into `out` (created): one SVG per chart
/// (`ttft_cdf` and `itl_cdf` for streaming runs only, `throughput`, `requests`, `in_flight`,
/// `acceptance_length`, and with per-request speculative decoding `al_per_request` and, when the
/// samples had groups, `al_by_group`), their PNG versions when `with_png`, and `report.html` embedding every
/// SVG. `golden_al` adds the golden line and the gate's ±5% band to the AL chart.
pub fn plot(
    dir: &Path,
    out: &Path,
    golden_al: Option<f64>,
    with_png: bool,
) -> Result<PlotOutput, ReportError> {
    let recs = super::read_records(&dir.join("records.jsonl"), |r: &Rec| {
        r.phase == Tag::Profiling
    })?;
    let summary_path = dir.join("summary.json");
    let summary = SummaryView::read(&summary_path).map_err(|e| match e {
        ViewError::Io { source, .. } => ReportError::io(&summary_path)(source),
        ViewError::Malformed { reason, .. } => ReportError::Input {
            path: summary_path.clone(),
            reason: format!("not JSON: {reason}"),
        },
    })?;
    if summary.schema_version.as_deref() != Some(crate::metrics::SUMMARY_SCHEMA) {
        return Err(ReportError::Input {
            path: summary_path,
            reason: format!(
                "schema_version {} is not {}",
                summary
                    .schema_version
                    .as_deref()
                    .map_or("null".to_owned(), |v| format!("{v:?}")),
                crate::metrics::SUMMARY_SCHEMA
            ),
        });
    }
    std::fs::create_dir_all(out).map_err(ReportError::io(out))?;
    let fontdb = with_png.then(|| {
        let mut db = resvg::usvg::fontdb::Database::new();
        db.load_system_fonts();
        Arc::new(db)
    });
    let mut files = Vec::new();
    let mut svgs = Vec::new();
    let profile = dir.join("profile_export.jsonl");
    let mut all = charts(&recs, &summary, Some(&profile), golden_al);
    all.extend(super::gpu_telemetry::power_chart(dir, &summary));
    for c in all {
        let text = svg::render(&c);
        let path = out.join(format!("{}.svg", c.id));
        std::fs::write(&path, &text).map_err(ReportError::io(&path))?;
        files.push(path);
        if let Some(db) = &fontdb {
            let path = out.join(format!("{}.png", c.id));
            let bytes = png(&text, db).map_err(|reason| ReportError::Input {
                path: path.clone(),
                reason: format!("cannot rasterise the chart: {reason}"),
            })?;
            std::fs::write(&path, bytes).map_err(ReportError::io(&path))?;
            files.push(path);
        }
        svgs.push((c.id.to_owned(), text));
    }
    let path = out.join("report.html");
    std::fs::write(&path, html(&summary, &svgs)).map_err(ReportError::io(&path))?;
    files.push(path);
    Ok(PlotOutput { files })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_ends_at_one_and_bins_are_round() {
        let mut v = vec![3.0, 1.0, 2.0, 4.0];
        assert_eq!(
            cdf(&mut v, 10),
            vec![(1.0, 0.25), (2.0, 0.5), (3.0, 0.75), (4.0, 1.0)]
        );
        let mut big: Vec<f64> = (0..10_000).map(f64::from).collect();
        let pts = cdf(&mut big, 100);
        assert!(pts.len() <= 101 && pts.last() == Some(&(9999.0, 1.0)));
        assert_eq!(bin_width(60.0), 1.0);
        assert_eq!(bin_width(90.0), 2.0);
        assert_eq!(bin_width(0.01), 0.001);
    }

    const S: u64 = 1_000_000_000;

    /// A streamed success sent at 0, first token at `first_s`, then one chunk every 10 ms
    /// carrying 10 tokens until `last_s`.
    fn streamed(id: u64, first_s: f64, last_s: f64) -> Rec {
        let first = (first_s * S as f64) as u64;
        let last = (last_s * S as f64) as u64;
        let chunks = (last - first) / 10_000_000 + 1;
        Rec {
            id,
            phase: Tag::Profiling,
            outcome: RecOutcome {
                status: Tag::Success,
            },
            sent_ns: 0,
            first_token_ns: Some(first),
            last_token_ns: Some(last),
            end_ns: last + 1_000_000,
            completion_tokens: Some(chunks * 10),
            first_chunk_tokens: Some(10),
            content_events: Some(chunks as u32),
            spec: None,
        }
    }

    fn summary(streaming: bool) -> SummaryView {
        serde_json::from_value(serde_json::json!({
            "meta": { "streaming": streaming, "concurrency": 4 }
        }))
        .unwrap()
    }

    fn find<'a>(charts: &'a [Chart], id: &str) -> &'a Chart {
        charts
            .iter()
            .find(|c| c.id == id)
            .unwrap_or_else(|| panic!("no {id} chart"))
    }

    /// Issue 19 item 16: a steady stream of tokens that completes at the end of the run used to
    /// show 0 tok/s until the completions, then one spike; tokens count when they arrive.
    #[test]
    fn throughput_counts_tokens_at_their_arrival_in_stated_windows() {
        // Four requests stream steadily from 0.1 s to 9.9 s and all complete at the end.
        let recs: Vec<Rec> = (0..4).map(|i| streamed(i, 0.1, 9.9)).collect();
        let charts = charts(&recs, &summary(true), None, None);
        let c = find(&charts, "throughput");
        let pts = &c.series[0].points;
        // Windows of 0.2 s over ~10 s; every full window after the first token carries about
        // 4 × 1000 tok/s.
        let inner: Vec<f64> = pts
            .iter()
            .filter(|p| p.0 > 0.3 && p.0 < 9.7)
            .map(|p| p.1)
            .collect();
        assert!(!inner.is_empty());
        for v in &inner {
            assert!(
                (*v - 4000.0).abs() < 400.0,
                "steady 4000 tok/s, got {v}: {pts:?}"
            );
        }
        assert!(
            c.y_label.contains("0.2 s window") || c.title.contains("0.2 s window"),
            "the window is said: {} / {}",
            c.title,
            c.y_label
        );
    }

    /// Per-chunk times from `profile_export.jsonl` place the tokens where they arrived.
    #[test]
    fn chunk_times_from_profile_export_place_the_tokens() {
        // One request: first chunk at 1 s, the rest (90 tokens) in one chunk at 5 s.
        let mut r = streamed(7, 1.0, 5.0);
        r.completion_tokens = Some(100);
        r.content_events = Some(2);
        r.end_ns = 10 * S;
        let a = token_arrivals(&r, Some(&[4000.0]));
        assert_eq!(a, vec![(S, 10.0), (5 * S, 90.0)]);
        // Without them, the rest spreads evenly from the first token to the last.
        let a = token_arrivals(&r, None);
        assert_eq!(a, vec![(S, 10.0), (5 * S, 90.0)]);
        r.content_events = Some(3);
        let a = token_arrivals(&r, None);
        assert_eq!(a, vec![(S, 10.0), (3 * S, 45.0), (5 * S, 45.0)]);
        // The golden profile export: request 0's gaps, keyed by its record id.
        let golden =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/reports/profile_export.jsonl");
        let mut ids = Vec::new();
        for_each_chunk_gaps(&golden, |id, g| ids.push((id, g.len())));
        assert!(ids.iter().any(|&(id, n)| id == 0 && n > 0), "{ids:?}");
        for_each_chunk_gaps(&golden.with_extension("absent"), |_, _| {
            panic!("no file, no line")
        });
    }

    /// The throughput chart streams `profile_export.jsonl`: a record's one line places its
    /// tokens; an id on two lines (merged shards) or gaps that do not match the chunk count
    /// fall back to the even spread, and the totals are every token exactly once.
    #[test]
    fn chunk_times_stream_and_an_ambiguous_id_spreads_evenly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("profile_export.jsonl");
        let line = |id: u64, gaps: &[f64]| {
            serde_json::json!({
                "metadata": { "x_request_id": format!("specperf-{id}") },
                "metrics": { "inter_chunk_latency": { "value": gaps, "unit": "ms" } },
            })
            .to_string()
        };
        // Three requests, first token at 1 s, last at 5 s, 100 tokens in two chunks.
        let recs: Vec<Rec> = (0..3)
            .map(|i| {
                let mut r = streamed(i, 1.0, 5.0);
                r.completion_tokens = Some(100);
                r.content_events = Some(2);
                r.first_chunk_tokens = Some(10);
                r.end_ns = 10 * S;
                r
            })
            .collect();
        // 0: one line, its second chunk 1 s after the first. 1: two lines (its tokens must
        // not count twice, nor at the gaps of either line). 2: gaps of the wrong length.
        let text = [
            line(0, &[1000.0]),
            line(1, &[2000.0]),
            line(9, &[1.0]),
            line(1, &[2000.0]),
            line(2, &[1.0, 1.0]),
        ]
        .join("\n");
        std::fs::write(&path, text).unwrap();
        let bin = |at: u64| (at / S) as usize;
        let tok = token_bins(&recs, Some(&path), bin, 10);
        // Bin 1: every first chunk (3 × 10); bin 2: request 0's rest (90); bin 5: the rest of
        // requests 1 and 2, spread evenly to their last token at 5 s.
        let want = [0.0, 30.0, 90.0, 0.0, 0.0, 180.0, 0.0, 0.0, 0.0, 0.0];
        assert_eq!(tok, want);
        assert_eq!(tok.iter().sum::<f64>(), 300.0);
        // Without the file, all spread evenly.
        let tok = token_bins(&recs, None, bin, 10);
        assert_eq!(tok, [0.0, 30.0, 0.0, 0.0, 0.0, 270.0, 0.0, 0.0, 0.0, 0.0]);
    }

    /// Issue 19 item 17: the AL axis shows the gate's ±5% band around the golden value, and
    /// the interval AL between scrapes beside the cumulative one.
    #[test]
    fn al_chart_shows_the_golden_band_and_the_interval_al() {
        let summary: SummaryView = serde_json::from_value(serde_json::json!({
            "meta": { "streaming": true },
            "acceptance": {
                "acceptance": { "acceptance_length": 2.5, "drafts": 300.0 },
                "window_s": 3.0,
                "timeline": [
                    { "t_s": 1.0, "acceptance_length": 2.4, "drafts": 100.0 },
                    { "t_s": 2.0, "acceptance_length": 2.45, "drafts": 200.0 }
                ]
            }
        }))
        .unwrap();
        let charts = charts(&[], &summary, None, Some(2.5));
        let c = find(&charts, "acceptance_length");
        let (lo, hi) = c.y_range.expect("the AL axis is chosen, not from 0");
        assert!(
            lo > 1.0 && lo <= 2.375 && (2.625..4.0).contains(&hi),
            "{lo}..{hi}"
        );
        let band = c.band.as_ref().expect("the gate band");
        assert!((band.lo - 2.375).abs() < 1e-9 && (band.hi - 2.625).abs() < 1e-9);
        assert!(band.label.contains("±5%"), "{}", band.label);
        let cum = c
            .series
            .iter()
            .find(|s| s.name.contains("cumulative"))
            .unwrap();
        assert_eq!(cum.points, vec![(1.0, 2.4), (2.0, 2.45), (3.0, 2.5)]);
        let int = c
            .series
            .iter()
            .find(|s| s.name.contains("interval"))
            .unwrap();
        let want = [(1.0, 2.4), (2.0, 2.5), (3.0, 2.6)];
        assert_eq!(int.points.len(), 3);
        for (got, want) in int.points.iter().zip(want) {
            assert!(
                (got.0 - want.0).abs() < 1e-9 && (got.1 - want.1).abs() < 1e-9,
                "{got:?}"
            );
        }
        let svg = svg::render(c);
        assert!(svg.contains("±5%"), "the band is in the legend");
    }

    /// Issue 19 item 18: a non-streaming run has no per-token times: no ITL or TTFT chart.
    #[test]
    fn non_streaming_runs_draw_no_per_token_charts() {
        let mut r = streamed(1, 2.0, 2.0);
        r.content_events = Some(1);
        r.first_chunk_tokens = None;
        let charts_ns = charts(&[r], &summary(false), None, None);
        let ids: Vec<&str> = charts_ns.iter().map(|c| c.id).collect();
        assert!(
            !ids.contains(&"itl_cdf") && !ids.contains(&"ttft_cdf"),
            "{ids:?}"
        );
        assert!(ids.contains(&"throughput") && ids.contains(&"acceptance_length"));
        let streaming = charts(&[streamed(1, 0.5, 2.0)], &summary(true), None, None);
        assert!(streaming.iter().any(|c| c.id == "itl_cdf"));
    }
}
