//! What benchmark_serving.py reports from its requests (shared/spec/bench-serving.md §8.2, §8.3,
//! §9): the aggregates, the result file as Python's `json.dump` writes it, and the console result
//! block, for both flavors.
//!
//! ```text
//! Outcome per request (dataset order) ─► calculate ─► Metrics ─┬─► result_json (the file)
//!                                                              └─► console_block (stdout)
//! ```
//!
//! The statistics are numpy's own arithmetic (`metrics::numpy`), so the same request timings give
//! the same digits in the file; the file's keys, their order and the formatting are upstream's
//! (`"request_goodput:"` with its colon in the InferenceX flavor, sa-bench's window timestamps
//! right after `duration`).

use serde_json::{json, Map, Value};

use crate::dataset::bench_serving::Flavor;
use crate::metrics::numpy;

/// One request as upstream's `RequestFuncOutput` holds it (seconds).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Outcome {
    /// Counted as completed.
    pub(crate) success: bool,
    /// `input_lens[i]`, for failures too.
    pub(crate) prompt_len: usize,
    /// Output tokens as upstream counts them (the server's `usage`, else the flavor's fallback).
    pub(crate) output_len: u64,
    /// From taking the slot to the first token chunk; 0.0 when failed.
    pub(crate) ttft: f64,
    /// Gaps between token chunks.
    pub(crate) itl: Itl,
    /// From taking the slot to the last chunk.
    pub(crate) latency: f64,
    /// The text received.
    pub(crate) generated_text: String,
    /// `""` on success.
    pub(crate) error: String,
}

/// A request's gaps between token chunks, held as nanoseconds in LEB128 varints: a 1 ms gap
/// takes 3 bytes where an `f64` takes 8, and a run holds every request's gaps until its report
/// (20,480 requests of 64 tokens at concurrency 2,048). Read back as upstream's seconds, `ns / 1e9`
/// as the records compute them, so nothing is rounded away.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Itl(Box<[u8]>);

impl Itl {
    /// The gaps `ns`, in order.
    pub(crate) fn from_ns(ns: impl IntoIterator<Item = u64>) -> Itl {
        let mut b = Vec::new();
        for mut v in ns {
            while v >= 0x80 {
                b.push((v as u8) | 0x80);
                v >>= 7;
            }
            b.push(v as u8);
        }
        Itl(b.into_boxed_slice())
    }

    /// The gaps in nanoseconds.
    pub(crate) fn ns(&self) -> impl Iterator<Item = u64> + '_ {
        let mut bytes = self.0.iter();
        std::iter::from_fn(move || {
            let (mut v, mut shift) = (0u64, 0u32);
            loop {
                let b = *bytes.next()?;
                v |= u64::from(b & 0x7f) << shift;
                if b < 0x80 {
                    return Some(v);
                }
                shift += 7;
            }
        })
    }

    /// The gaps in seconds, as upstream lists them.
    pub(crate) fn secs(&self) -> impl Iterator<Item = f64> + '_ {
        self.ns().map(|g| g as f64 / 1e9)
    }

    /// How many gaps.
    pub(crate) fn len(&self) -> usize {
        self.0.iter().filter(|&&b| b < 0x80).count()
    }
}

/// The metrics `--percentile-metrics` can name, in the order upstream reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Metric {
    /// Time to first token.
    Ttft,
    /// Time per output token after the first.
    Tpot,
    /// Inter-token latency (every gap, pooled).
    Itl,
    /// End-to-end latency.
    E2el,
}

impl Metric {
    const ALL: [Metric; 4] = [Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el];

    /// The name in `--percentile-metrics` and in the result's keys.
    fn key(self) -> &'static str {
        match self {
            Metric::Ttft => "ttft",
            Metric::Tpot => "tpot",
            Metric::Itl => "itl",
            Metric::E2el => "e2el",
        }
    }

    /// The console's short name and section header.
    fn label(self) -> (&'static str, &'static str) {
        match self {
            Metric::Ttft => ("TTFT", "Time to First Token"),
            Metric::Tpot => ("TPOT", "Time per Output Token (excl. 1st token)"),
            Metric::Itl => ("ITL", "Inter-token Latency"),
            Metric::E2el => ("E2EL", "End-to-end Latency"),
        }
    }
}

/// `--percentile-metrics` and `--metric-percentiles`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Selection {
    /// The metrics named, matched verbatim (upstream splits on `,` and compares; `" tpot"` names
    /// nothing).
    pub(crate) metrics: Vec<Metric>,
    /// The percentiles, in the order given.
    pub(crate) percentiles: Vec<f64>,
}

impl Selection {
    /// From the two flags' values as given on the command line.
    pub(crate) fn parse(metrics: &str, percentiles: &[f64]) -> Selection {
        let names: Vec<&str> = metrics.split(',').collect();
        Selection {
            metrics: Metric::ALL
                .into_iter()
                .filter(|m| names.contains(&m.key()))
                .collect(),
            percentiles: percentiles.to_vec(),
        }
    }
}

/// `--goodput` objectives, milliseconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Goodput {
    /// TTFT at most this.
    pub(crate) ttft_ms: Option<f64>,
    /// TPOT at most this (a one-token answer's TPOT is 0).
    pub(crate) tpot_ms: Option<f64>,
    /// End-to-end latency at most this.
    pub(crate) e2el_ms: Option<f64>,
}

/// One metric's statistics, milliseconds.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct MetricStats {
    pub(crate) mean: f64,
    pub(crate) median: f64,
    pub(crate) std: f64,
    /// `(p, value)` in the selection's order.
    pub(crate) percentiles: Vec<(f64, f64)>,
}

/// The aggregates of one run.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Metrics {
    pub(crate) completed: usize,
    pub(crate) total_input: u64,
    pub(crate) total_output: u64,
    pub(crate) request_throughput: f64,
    /// With `--goodput` only.
    pub(crate) request_goodput: Option<f64>,
    pub(crate) output_throughput: f64,
    pub(crate) total_token_throughput: f64,
    /// sa-bench's peak output token rate (10 s moving average), filled in by the run.
    pub(crate) peak_output_tokens_per_s: Option<f64>,
    /// Per request, 0 for failures.
    pub(crate) output_lens: Vec<u64>,
    /// The selected metrics, in upstream's order.
    pub(crate) stats: Vec<(Metric, MetricStats)>,
}

/// numpy's statistics of `values` in ms, as upstream computes them: an empty list counts as `[0]`.
/// The sums read `values` in their order; then they are sorted in place for the order statistics
/// (the ITL list is every gap of the run: one copy of it, not three).
fn stats_ms(mut values: Vec<f64>, percentiles: &[f64]) -> MetricStats {
    if values.is_empty() {
        values.push(0.0);
    }
    let (mean, std) = (numpy::mean(&values), numpy::std(&values));
    values.sort_unstable_by(f64::total_cmp);
    MetricStats {
        mean: mean * 1000.0,
        median: numpy::median_sorted(&values) * 1000.0,
        std: std * 1000.0,
        percentiles: percentiles
            .iter()
            .map(|&p| (p, numpy::percentile_sorted(&values, p) * 1000.0))
            .collect(),
    }
}

/// [`stats_ms`] of every successful request's gaps in dataset order (upstream's `itls`), read
/// from the requests each time rather than gathered: the list is the run's largest (1.3 million
/// values at concurrency 2,048, 10 MB as floats), and a copy of it sorted made the run's peak
/// memory at its very end.
fn itl_stats_ms(outcomes: &[Outcome], percentiles: &[f64]) -> MetricStats {
    let ok = || outcomes.iter().filter(|o| o.success);
    let n: usize = ok().map(|o| o.itl.len()).sum();
    if n == 0 {
        return stats_ms(Vec::new(), percentiles);
    }
    let secs = || ok().flat_map(|o| o.itl.secs());
    let mean = numpy::mean_of(n, secs());
    let std = numpy::std_of(n, secs);
    // The ranks the order statistics read, then those values from a few counting passes.
    let asked = std::cell::RefCell::new(Vec::new());
    let ask = |i: usize| {
        asked.borrow_mut().push(i);
        0.0
    };
    numpy::median_by(n, ask);
    for &p in percentiles {
        numpy::percentile_by(n, p, ask);
    }
    let mut ranks = asked.into_inner();
    ranks.sort_unstable();
    ranks.dedup();
    let values = ranked(&|| ok().flat_map(|o| o.itl.ns()), &ranks);
    let at = |i: usize| {
        let k = ranks.binary_search(&i).expect("a rank asked for above");
        values[k] as f64 / 1e9
    };
    MetricStats {
        mean: mean * 1000.0,
        median: numpy::median_by(n, at) * 1000.0,
        std: std * 1000.0,
        percentiles: percentiles
            .iter()
            .map(|&p| (p, numpy::percentile_by(n, p, at) * 1000.0))
            .collect(),
    }
}

/// The values at `ranks` (ascending, 0-based, within the sorted order) of the sequence each call
/// of `values` yields, without holding the sequence: each rank's candidates are narrowed by
/// counting them into 4,096 buckets per pass until few enough remain to sort. Neighbouring ranks
/// (a median's pair, a percentile's two sides) are served by the same final candidates.
fn ranked<I: Iterator<Item = u64>>(values: &dyn Fn() -> I, ranks: &[usize]) -> Vec<u64> {
    const BUCKETS: usize = 4096;
    const SORTED: usize = 1 << 14;
    let (min, max, n) = values().fold((u64::MAX, 0, 0usize), |(lo, hi, n), v| {
        (lo.min(v), hi.max(v), n + 1)
    });
    // Final candidates found so far: the values below them and themselves, sorted (all equal
    // where none are held).
    struct Found {
        below: usize,
        inside: usize,
        value: u64,
        sorted: Vec<u64>,
    }
    let mut found: Vec<Found> = Vec::new();
    ranks
        .iter()
        .map(|&r| {
            let known = found
                .iter()
                .find(|f| (f.below..f.below + f.inside).contains(&r));
            let f = match known {
                Some(f) => f,
                None => {
                    let (mut lo, mut hi, mut below, mut inside) = (min, max, 0usize, n);
                    while lo < hi && inside > SORTED {
                        let bits = 64 - (hi - lo).leading_zeros();
                        let shift = bits.saturating_sub(BUCKETS.trailing_zeros());
                        let mut counts = vec![0usize; BUCKETS];
                        for v in values().filter(|v| (lo..=hi).contains(v)) {
                            counts[((v - lo) >> shift) as usize] += 1;
                        }
                        let mut b = 0;
                        while below + counts[b] <= r {
                            below += counts[b];
                            b += 1;
                        }
                        inside = counts[b];
                        let start = lo + ((b as u64) << shift);
                        hi = hi.min(start.saturating_add((1u64 << shift) - 1));
                        lo = start;
                    }
                    let sorted = if lo == hi {
                        Vec::new()
                    } else {
                        let mut v: Vec<u64> = values().filter(|v| (lo..=hi).contains(v)).collect();
                        v.sort_unstable();
                        v
                    };
                    found.push(Found {
                        below,
                        inside,
                        value: lo,
                        sorted,
                    });
                    found.last().expect("just pushed")
                }
            };
            if f.sorted.is_empty() {
                f.value
            } else {
                f.sorted[r - f.below]
            }
        })
        .collect()
}

/// Upstream's `calculate_metrics` over `outcomes` (dataset order) and the run's `duration`.
pub(crate) fn calculate(
    outcomes: &[Outcome],
    duration: f64,
    selection: &Selection,
    goodput: Option<&Goodput>,
) -> Metrics {
    let (mut ttfts, mut tpots, mut all_tpots, mut e2els) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut completed, mut total_input) = (0usize, 0u64);
    let mut output_lens = Vec::with_capacity(outcomes.len());
    for o in outcomes.iter() {
        if !o.success {
            output_lens.push(0);
            continue;
        }
        output_lens.push(o.output_len);
        total_input += o.prompt_len as u64;
        let mut tpot = 0.0;
        if o.output_len > 1 {
            tpot = (o.latency - o.ttft) / (o.output_len - 1) as f64;
            tpots.push(tpot);
        }
        all_tpots.push(tpot);
        ttfts.push(o.ttft);
        e2els.push(o.latency);
        completed += 1;
    }
    let request_goodput = goodput.map(|g| {
        let objectives: Vec<(&[f64], f64)> = [
            (&ttfts[..], g.ttft_ms),
            (&all_tpots[..], g.tpot_ms),
            (&e2els[..], g.e2el_ms),
        ]
        .into_iter()
        .filter_map(|(v, slo)| slo.map(|ms| (v, ms / 1000.0)))
        .collect();
        // zip(*valid_metrics): no objective, no good request.
        let good = if objectives.is_empty() {
            0
        } else {
            (0..completed)
                .filter(|&i| objectives.iter().all(|(v, slo)| *slo >= v[i]))
                .count()
        };
        good as f64 / duration
    });
    let total_output: u64 = output_lens.iter().sum();
    let stats = selection
        .metrics
        .iter()
        .map(|&m| {
            // Each metric is selected at most once (`Selection::parse`).
            let values = match m {
                Metric::Ttft => std::mem::take(&mut ttfts),
                Metric::Tpot => std::mem::take(&mut tpots),
                Metric::Itl => return (m, itl_stats_ms(outcomes, &selection.percentiles)),
                Metric::E2el => std::mem::take(&mut e2els),
            };
            (m, stats_ms(values, &selection.percentiles))
        })
        .collect();
    Metrics {
        completed,
        total_input,
        total_output,
        request_throughput: completed as f64 / duration,
        request_goodput,
        output_throughput: total_output as f64 / duration,
        total_token_throughput: (total_input + total_output) as f64 / duration,
        peak_output_tokens_per_s: None,
        output_lens,
        stats,
    }
}

/// The run's settings that head the result file.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Header {
    /// Local time after the run, `%Y%m%d-%H%M%S`.
    pub(crate) date: String,
    pub(crate) backend: String,
    pub(crate) model_id: String,
    pub(crate) tokenizer_id: String,
    pub(crate) best_of: u32,
    pub(crate) num_prompts: usize,
    /// `--metadata KEY=VALUE` items as given (upstream splits on every `=`, keeps the first two).
    pub(crate) metadata: Vec<String>,
    /// Requests per second; infinite is written as the string `"inf"`.
    pub(crate) request_rate: f64,
    pub(crate) burstiness: f64,
    pub(crate) max_concurrency: Option<usize>,
    /// sa-bench's last key.
    pub(crate) reuse_http_connections: bool,
}

/// The measured window: monotonic duration and the wall clock at both ends (Unix seconds).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Window {
    pub(crate) duration: f64,
    pub(crate) start_unix: f64,
    pub(crate) end_unix: f64,
}

/// The `p{P}` word: an integral percentile as an int, else Python's `str(float)`.
fn p_word(p: f64) -> String {
    if p.fract() == 0.0 && p.abs() < 1e15 {
        format!("{}", p as i64)
    } else {
        tokenizer_encoders::python_json_dumps(&json!(p), true).unwrap_or_else(|_| p.to_string())
    }
}

/// Python's `str(float)`: `inf`, `20.0`, `1e-07`.
pub(crate) fn py_float(v: f64) -> String {
    if v.is_nan() {
        "nan".to_owned()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.to_owned()
    } else {
        tokenizer_encoders::python_json_dumps(&json!(v), true).unwrap_or_else(|_| v.to_string())
    }
}

/// A float for the file (non-finite values cannot occur: every division is by a positive duration
/// or count).
fn float(v: f64) -> Value {
    json!(v)
}

/// The result file's text: upstream's keys in upstream's order, Python's `json.dump` formatting,
/// one line, no newline. `save_detailed` keeps the per-request lists (always for sa-bench).
/// `extras` are appended after the last upstream key (specperf's opt-in `spec_decode_*`).
pub(crate) fn result_json(
    flavor: Flavor,
    header: &Header,
    window: &Window,
    metrics: &Metrics,
    outcomes: &[Outcome],
    save_detailed: bool,
    extras: &[(String, Value)],
) -> String {
    let mut r = Map::new();
    r.insert("date".into(), json!(header.date));
    r.insert("backend".into(), json!(header.backend));
    r.insert("model_id".into(), json!(header.model_id));
    r.insert("tokenizer_id".into(), json!(header.tokenizer_id));
    r.insert("best_of".into(), json!(header.best_of));
    r.insert("num_prompts".into(), json!(header.num_prompts));
    for item in &header.metadata {
        let mut parts = item.split('=');
        if let (Some(k), Some(v)) = (parts.next(), parts.next()) {
            // A dict assignment: an existing key keeps its place.
            r.insert(k.trim().to_owned(), json!(v.trim()));
        }
    }
    let rate = if header.request_rate.is_finite() {
        float(header.request_rate)
    } else {
        json!("inf")
    };
    r.insert("request_rate".into(), rate);
    r.insert("burstiness".into(), float(header.burstiness));
    r.insert("max_concurrency".into(), json!(header.max_concurrency));

    let detailed = save_detailed || flavor == Flavor::SaBench;
    let mut b: Vec<(&str, Value)> = vec![
        ("duration", float(window.duration)),
        ("benchmark_start_time_unix", float(window.start_unix)),
        ("benchmark_end_time_unix", float(window.end_unix)),
        ("completed", json!(metrics.completed)),
        ("total_input_tokens", json!(metrics.total_input)),
        ("total_output_tokens", json!(metrics.total_output)),
        ("request_throughput", float(metrics.request_throughput)),
    ];
    let goodput_key = match flavor {
        Flavor::InferenceX => "request_goodput:",
        Flavor::SaBench => "request_goodput",
    };
    b.push((goodput_key, json!(metrics.request_goodput)));
    b.push(("output_throughput", float(metrics.output_throughput)));
    if flavor == Flavor::SaBench {
        let peak = metrics.peak_output_tokens_per_s.unwrap_or(0.0);
        b.push(("peak_output_tokens_per_s", float(peak)));
    }
    b.push((
        "total_token_throughput",
        float(metrics.total_token_throughput),
    ));
    let input_lens: Vec<usize> = outcomes.iter().map(|o| o.prompt_len).collect();
    b.push(("input_lens", json!(input_lens)));
    b.push(("output_lens", json!(metrics.output_lens)));
    if detailed {
        b.push((
            "ttfts",
            Value::Array(outcomes.iter().map(|o| float(o.ttft)).collect()),
        ));
        b.push((
            "itls",
            Value::Array(
                outcomes
                    .iter()
                    .map(|o| Value::Array(o.itl.secs().map(float).collect()))
                    .collect(),
            ),
        ));
        b.push((
            "generated_texts",
            json!(outcomes
                .iter()
                .map(|o| o.generated_text.as_str())
                .collect::<Vec<_>>()),
        ));
        b.push((
            "errors",
            json!(outcomes
                .iter()
                .map(|o| o.error.as_str())
                .collect::<Vec<_>>()),
        ));
    }
    for (k, v) in b {
        r.insert(k.to_owned(), v);
    }
    for (m, s) in &metrics.stats {
        let k = m.key();
        r.insert(format!("mean_{k}_ms"), float(s.mean));
        r.insert(format!("median_{k}_ms"), float(s.median));
        r.insert(format!("std_{k}_ms"), float(s.std));
        for &(p, v) in &s.percentiles {
            r.insert(format!("p{}_{k}_ms", p_word(p)), float(v));
        }
    }
    if flavor == Flavor::SaBench {
        r.insert(
            "reuse_http_connections".into(),
            json!(header.reuse_http_connections),
        );
    }
    for (k, v) in extras {
        r.insert(k.clone(), v.clone());
    }
    tokenizer_encoders::python_json_dumps(&Value::Object(r), true)
        .expect("finite numbers and strings only")
}

/// `"{:<40} {:<10.2f}"`, with Python's spelling of NaN.
fn row_f(label: &str, v: f64) -> String {
    let text = if v.is_nan() {
        "nan".to_owned()
    } else {
        format!("{v:.2}")
    };
    format!("{label:<40} {text:<10}\n")
}

/// The console's result block, from the `=` header line to the closing `=` line.
pub(crate) fn console_block(flavor: Flavor, duration: f64, metrics: &Metrics) -> String {
    let mut o = format!("{:=^50}\n", " Serving Benchmark Result ");
    o += &format!("{:<40} {:<10}\n", "Successful requests:", metrics.completed);
    o += &row_f("Benchmark duration (s):", duration);
    o += &format!(
        "{:<40} {:<10}\n",
        "Total input tokens:", metrics.total_input
    );
    o += &format!(
        "{:<40} {:<10}\n",
        "Total generated tokens:", metrics.total_output
    );
    o += &row_f("Request throughput (req/s):", metrics.request_throughput);
    if let Some(g) = metrics.request_goodput {
        o += &row_f("Request goodput (req/s):", g);
    }
    o += &row_f(
        "Output token throughput (tok/s):",
        metrics.output_throughput,
    );
    if flavor == Flavor::SaBench {
        o += &row_f(
            "Peak output token throughput (tok/s):",
            metrics.peak_output_tokens_per_s.unwrap_or(0.0),
        );
    }
    o += &row_f(
        "Total Token throughput (tok/s):",
        metrics.total_token_throughput,
    );
    for (m, s) in &metrics.stats {
        let (name, header) = m.label();
        o += &format!("{header:-^50}\n");
        o += &row_f(&format!("Mean {name} (ms):"), s.mean);
        o += &row_f(&format!("Median {name} (ms):"), s.median);
        for &(p, v) in &s.percentiles {
            o += &row_f(&format!("P{} {name} (ms):", p_word(p)), v);
        }
    }
    o += &"=".repeat(50);
    o.push('\n');
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(prompt_len: usize, output_len: u64, ttft: f64, itl: &[f64]) -> Outcome {
        Outcome {
            success: true,
            prompt_len,
            output_len,
            ttft,
            itl: Itl::from_ns(itl.iter().map(|&s| (s * 1e9).round() as u64)),
            latency: ttft + itl.iter().sum::<f64>(),
            generated_text: "ok".into(),
            error: String::new(),
        }
    }

    fn failed(prompt_len: usize) -> Outcome {
        Outcome {
            prompt_len,
            error: "Bad Gateway".into(),
            ..Outcome::default()
        }
    }

    fn header() -> Header {
        Header {
            date: "20261203-101500".into(),
            backend: "vllm".into(),
            model_id: "deepseek-ai/DeepSeek-V4-Pro".into(),
            tokenizer_id: "deepseek-ai/DeepSeek-V4-Pro".into(),
            best_of: 1,
            num_prompts: 3,
            metadata: vec![],
            request_rate: f64::INFINITY,
            burstiness: 1.0,
            max_concurrency: Some(8),
            reuse_http_connections: false,
        }
    }

    const WINDOW: Window = Window {
        duration: 2.0,
        start_unix: 1_796_000_000.25,
        end_unix: 1_796_000_002.25,
    };

    fn run() -> Vec<Outcome> {
        vec![
            ok(100, 3, 0.05, &[0.01, 0.02]),
            failed(90),
            ok(110, 1, 0.07, &[]),
        ]
    }

    fn keys(text: &str) -> Vec<String> {
        let v: Value = serde_json::from_str(text).unwrap();
        v.as_object().unwrap().keys().cloned().collect()
    }

    /// The gaps' statistics read from the requests equal numpy's over the gathered list, bit
    /// for bit: ties, one outlier far above the rest (the counting passes narrow several times),
    /// a single gap, all gaps equal, failures skipped, many percentiles.
    #[test]
    fn the_gap_statistics_without_the_list_are_the_lists() {
        let percentiles = [0.0, 1.0, 25.0, 33.3, 50.0, 90.0, 99.0, 99.9, 100.0];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut cases: Vec<Vec<Vec<u64>>> = vec![
            vec![vec![1_000_000]],
            vec![vec![7; 40_000]],
            vec![vec![5, 5, 3], vec![], vec![9]],
        ];
        for requests in [3usize, 50, 700] {
            let case = (0..requests)
                .map(|_| {
                    let len = (next() % 70) as usize;
                    (0..len)
                        .map(|_| match next() % 100 {
                            // Mostly ~1 ms with ties, some wide, a rare outlier of minutes.
                            0 => 180_000_000_000 + next() % 1000,
                            1..=9 => next() % 50_000_000,
                            _ => 1_000_000 + next() % 2_000,
                        })
                        .collect()
                })
                .collect();
            cases.push(case);
        }
        for case in cases {
            let outcomes: Vec<Outcome> = case
                .iter()
                .enumerate()
                .map(|(i, gaps)| Outcome {
                    // Every fifth request failed: its gaps are not upstream's.
                    success: i % 5 != 4,
                    itl: Itl::from_ns(gaps.iter().copied()),
                    ..Outcome::default()
                })
                .collect();
            let list: Vec<f64> = outcomes
                .iter()
                .filter(|o| o.success)
                .flat_map(|o| o.itl.secs())
                .collect();
            let want = stats_ms(list, &percentiles);
            let got = itl_stats_ms(&outcomes, &percentiles);
            assert_eq!(got, want, "{} requests", case.len());
        }
    }

    #[test]
    fn gaps_read_back_as_written() {
        let ns = [0, 1, 127, 128, 1_000_000, u64::from(u32::MAX) + 9, u64::MAX];
        let itl = Itl::from_ns(ns);
        assert_eq!(itl.ns().collect::<Vec<_>>(), ns);
        assert_eq!(itl.len(), ns.len());
    }

    fn ix_selection() -> Selection {
        Selection::parse("ttft,tpot,itl,e2el", &[90.0, 99.0, 99.9])
    }

    #[test]
    fn the_aggregates_follow_upstreams_rules() {
        let goodput = Goodput {
            ttft_ms: Some(60.0),
            ..Goodput::default()
        };
        let m = calculate(&run(), WINDOW.duration, &ix_selection(), Some(&goodput));
        assert_eq!((m.completed, m.total_input, m.total_output), (2, 210, 4));
        assert_eq!(m.output_lens, [3, 0, 1]);
        // Only the first request meets TTFT <= 60 ms.
        assert_eq!(m.request_goodput, Some(0.5));
        assert_eq!(m.request_throughput, 1.0);
        let tpot = &m.stats[1].1;
        // One TPOT (the one-token answer has none): (0.08 - 0.05) / 2 s.
        assert!((tpot.mean - 15.0).abs() < 1e-9, "{tpot:?}");
        let itl = &m.stats[2].1;
        assert!((itl.median - 15.0).abs() < 1e-9, "{itl:?}");
    }

    #[test]
    fn inferencex_keys_in_upstreams_order() {
        let m = calculate(&run(), WINDOW.duration, &ix_selection(), None);
        let text = result_json(
            Flavor::InferenceX,
            &header(),
            &WINDOW,
            &m,
            &run(),
            false,
            &[],
        );
        let mut want: Vec<&str> = vec![
            "date",
            "backend",
            "model_id",
            "tokenizer_id",
            "best_of",
            "num_prompts",
            "request_rate",
            "burstiness",
            "max_concurrency",
            "duration",
            "benchmark_start_time_unix",
            "benchmark_end_time_unix",
            "completed",
            "total_input_tokens",
            "total_output_tokens",
            "request_throughput",
            "request_goodput:",
            "output_throughput",
            "total_token_throughput",
            "input_lens",
            "output_lens",
        ];
        for k in ["ttft", "tpot", "itl", "e2el"] {
            for s in ["mean", "median", "std", "p90", "p99", "p99.9"] {
                want.push(Box::leak(format!("{s}_{k}_ms").into_boxed_str()));
            }
        }
        assert_eq!(keys(&text), want);
        assert!(text.contains(r#""request_rate": "inf", "burstiness": 1.0, "max_concurrency": 8"#));
        assert!(text.contains(r#""request_goodput:": null"#));
        assert!(text.contains(r#""input_lens": [100, 90, 110], "output_lens": [3, 0, 1]"#));
        assert!(!text.ends_with('\n'));
    }

    #[test]
    fn detailed_fields_metadata_and_python_formatting() {
        let mut outcomes = run();
        outcomes[0].generated_text = "é😀".into();
        outcomes[2].itl = Itl::from_ns([100]);
        let h = Header {
            metadata: vec!["a=b=c".into(), " backend = other ".into(), "tp=8".into()],
            request_rate: 20.0,
            max_concurrency: None,
            ..header()
        };
        let m = calculate(
            &outcomes,
            WINDOW.duration,
            &Selection::parse("ttft", &[99.0]),
            None,
        );
        let text = result_json(Flavor::InferenceX, &h, &WINDOW, &m, &outcomes, true, &[]);
        let k = keys(&text);
        // An existing key keeps its place; `a=b=c` keeps the first two parts.
        assert_eq!(
            &k[..9],
            [
                "date",
                "backend",
                "model_id",
                "tokenizer_id",
                "best_of",
                "num_prompts",
                "a",
                "tp",
                "request_rate"
            ]
        );
        assert!(text.contains(r#""backend": "other""#) && text.contains(r#""a": "b""#));
        assert!(
            text.contains(r#""request_rate": 20.0"#) && text.contains(r#""max_concurrency": null"#)
        );
        let at = k.iter().position(|x| x == "output_lens").unwrap();
        assert_eq!(
            &k[at + 1..at + 5],
            ["ttfts", "itls", "generated_texts", "errors"]
        );
        assert!(
            text.contains(r#""generated_texts": ["\u00e9\ud83d\ude00", "", "ok"]"#),
            "{text}"
        );
        assert!(text.contains(r#"[[0.01, 0.02], [], [1e-07]]"#), "{text}");
        assert!(text.contains(r#""errors": ["", "Bad Gateway", ""]"#));
        assert!(text.contains(r#""ttfts": [0.05, 0.0, 0.07]"#));
    }

    #[test]
    fn sa_bench_keys_in_its_order() {
        let sel = Selection::parse("ttft,tpot,itl", &[99.0]);
        let mut m = calculate(&run(), WINDOW.duration, &sel, None);
        m.peak_output_tokens_per_s = Some(2.5);
        let extras = [("spec_decode_acceptance_length".to_owned(), json!(2.5))];
        let text = result_json(
            Flavor::SaBench,
            &header(),
            &WINDOW,
            &m,
            &run(),
            false,
            &extras,
        );
        let k = keys(&text);
        let at = k.iter().position(|x| x == "duration").unwrap();
        assert_eq!(
            &k[at..at + 17],
            [
                "duration",
                "benchmark_start_time_unix",
                "benchmark_end_time_unix",
                "completed",
                "total_input_tokens",
                "total_output_tokens",
                "request_throughput",
                "request_goodput",
                "output_throughput",
                "peak_output_tokens_per_s",
                "total_token_throughput",
                "input_lens",
                "output_lens",
                "ttfts",
                "itls",
                "generated_texts",
                "errors"
            ]
        );
        assert_eq!(
            k[k.len() - 2..],
            ["reuse_http_connections", "spec_decode_acceptance_length"]
        );
        assert_eq!(k[at + 17], "mean_ttft_ms");
        assert!(!k.iter().any(|x| x.contains("e2el")));
    }

    #[test]
    fn the_console_block_is_upstreams() {
        let goodput = Goodput {
            e2el_ms: Some(1000.0),
            ..Goodput::default()
        };
        let sel = Selection::parse("ttft, tpot,e2el", &[99.0, 99.9]);
        let m = calculate(&run(), WINDOW.duration, &sel, Some(&goodput));
        let want = "\
============ Serving Benchmark Result ============
Successful requests:                     2         
Benchmark duration (s):                  2.00      
Total input tokens:                      210       
Total generated tokens:                  4         
Request throughput (req/s):              1.00      
Request goodput (req/s):                 1.00      
Output token throughput (tok/s):         2.00      
Total Token throughput (tok/s):          107.00    
---------------Time to First Token----------------
Mean TTFT (ms):                          60.00     
Median TTFT (ms):                        60.00     
P99 TTFT (ms):                           69.80     
P99.9 TTFT (ms):                         69.98     
----------------End-to-end Latency----------------
Mean E2EL (ms):                          75.00     
Median E2EL (ms):                        75.00     
P99 E2EL (ms):                           79.90     
P99.9 E2EL (ms):                         79.99     
==================================================
";
        // " tpot" names nothing (upstream splits on "," and compares verbatim). The rules are
        // Python's own `format` output for these labels.
        assert_eq!(console_block(Flavor::InferenceX, 2.0, &m), want);
    }
}
