//! Criterion bench of the metrics path: parsing a Prometheus page and extracting the
//! speculative-decoding series from it.
//!
//! The page has 2,000 series, shaped like a vLLM API server with data parallelism 16: per
//! engine, the request gauges, token counters with their `_created` gauges, the four
//! spec-decode families (k = 3, per-position included) and latency histograms with 12 buckets.
//!
//! - `prom/parse_2000_series`: `prom::parse`, reported as bytes/s.
//! - `prom/parse_and_snapshot_2000_series`: parse plus `Snapshot::from_page`, per page.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use specperf::scrape::acceptance::Snapshot;
use specperf::scrape::prom::{parse, Format};

/// A 0.0.4 page with exactly `series` sample lines.
fn page(series: usize) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut engine = 0;
    let model = "deepseek-ai/DeepSeek-V4-Pro";
    let line = |lines: &mut Vec<String>, text: String| lines.push(text);
    while lines.len() < series {
        let l = format!("engine=\"{engine}\",model_name=\"{model}\"");
        for g in [
            "num_requests_running",
            "num_requests_waiting",
            "kv_cache_usage_perc",
        ] {
            line(&mut lines, format!("vllm:{g}{{{l}}} 0.0"));
        }
        for c in [
            "prompt_tokens",
            "generation_tokens",
            "spec_decode_num_drafts",
            "spec_decode_num_draft_tokens",
            "spec_decode_num_accepted_tokens",
        ] {
            line(&mut lines, format!("vllm:{c}_total{{{l}}} 123456.0"));
            line(
                &mut lines,
                format!("vllm:{c}_created{{{l}}} 1.7640192001234567e+09"),
            );
        }
        for p in 0..3 {
            line(
                &mut lines,
                format!("vllm:spec_decode_num_accepted_tokens_per_pos_total{{{l},position=\"{p}\"}} 4567.0"),
            );
        }
        for h in [
            "time_to_first_token_seconds",
            "e2e_request_latency_seconds",
            "inter_token_latency_seconds",
        ] {
            for le in [
                "0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5",
                "1.0", "+Inf",
            ] {
                line(
                    &mut lines,
                    format!("vllm:{h}_bucket{{{l},le=\"{le}\"}} 42.0"),
                );
            }
            line(&mut lines, format!("vllm:{h}_sum{{{l}}} 12.5"));
            line(&mut lines, format!("vllm:{h}_count{{{l}}} 42.0"));
        }
        engine += 1;
    }
    lines.truncate(series);
    lines.join("\n") + "\n"
}

fn bench(c: &mut Criterion) {
    let text = page(2000);
    assert_eq!(parse(&text, Format::Text).unwrap().samples.len(), 2000);
    let mut g = c.benchmark_group("prom");
    g.measurement_time(Duration::from_secs(5));
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("parse_2000_series", |b| {
        b.iter(|| parse(black_box(&text), Format::Text).unwrap())
    });
    g.throughput(Throughput::Elements(1));
    g.bench_function("parse_and_snapshot_2000_series", |b| {
        b.iter(|| Snapshot::from_page(&parse(black_box(&text), Format::Text).unwrap()))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
