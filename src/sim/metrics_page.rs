//! The simulator's vLLM-style `/metrics` page: per-engine counters exactly consistent with what
//! was streamed, plus the emission-lateness histogram, written through the one exposition
//! writer ([`crate::scrape::prom::Writer`]).

use std::sync::atomic::Ordering::Relaxed;

use super::model::EngineCounters;
use super::server::{lateness_stats, ServerCtx};
use crate::scrape::prom::{Format, Writer};

/// Lateness histogram buckets, seconds.
const LATENESS_BUCKETS: [f64; 11] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
];

/// The page for one server: its own engines only, as each vLLM server shows its own.
pub(super) fn metrics_page(ctx: &ServerCtx) -> String {
    let shared = &ctx.shared;
    let engines = &shared.engines[ctx.engines.clone()];
    let model = shared.cfg.model.as_str();
    let mut w = Writer::with_capacity(8192);
    let ranks: Vec<String> = engines.iter().map(|e| e.rank.to_string()).collect();
    let labels = |i: usize| [("engine", ranks[i].as_str()), ("model_name", model)];
    type Get = fn(&EngineCounters) -> u64;
    let families: [(&str, &str, &str, Get); 5] = [
        (
            "vllm:prompt_tokens",
            "counter",
            "Number of prefill tokens processed.",
            |e| e.prompt_tokens.load(Relaxed),
        ),
        (
            "vllm:generation_tokens",
            "counter",
            "Number of generation tokens processed.",
            |e| e.generation_tokens.load(Relaxed),
        ),
        (
            "vllm:spec_decode_num_drafts",
            "counter",
            "Number of spec decoding drafts.",
            |e| e.drafts.load(Relaxed),
        ),
        (
            "vllm:spec_decode_num_draft_tokens",
            "counter",
            "Number of draft tokens.",
            |e| e.draft_tokens.load(Relaxed),
        ),
        (
            "vllm:spec_decode_num_accepted_tokens",
            "counter",
            "Number of accepted tokens.",
            |e| e.accepted.load(Relaxed),
        ),
    ];
    // vLLM writes integral counters and gauges as floats (`3.0`); the page copies that.
    let running = "vllm:num_requests_running";
    w.family(
        running,
        "gauge",
        "Number of requests in model execution batches.",
    );
    for (i, e) in engines.iter().enumerate() {
        w.sample(
            running,
            &labels(i),
            format_args!("{}.0", e.running.load(Relaxed)),
        );
    }
    for (name, kind, help, get) in families {
        let total = format!("{name}_total");
        w.family(&total, kind, help);
        for (i, e) in engines.iter().enumerate() {
            w.sample(&total, &labels(i), format_args!("{}.0", get(e)));
        }
        let created = format!("{name}_created");
        w.family(&created, "gauge", help);
        for i in 0..engines.len() {
            w.sample(&created, &labels(i), format_args!("{:e}", shared.created));
        }
    }
    let per_pos = "vllm:spec_decode_num_accepted_tokens_per_pos_total";
    w.family(per_pos, "counter", "Accepted tokens per draft position.");
    for (i, e) in engines.iter().enumerate() {
        let [engine, model_name] = labels(i);
        for (p, c) in e.per_pos.iter().enumerate() {
            let position = p.to_string();
            w.sample(
                per_pos,
                &[engine, model_name, ("position", position.as_str())],
                format_args!("{}.0", c.load(Relaxed)),
            );
        }
    }
    let success = "vllm:request_success_total";
    w.family(
        success,
        "counter",
        "Count of successfully processed requests.",
    );
    for (i, e) in engines.iter().enumerate() {
        let [engine, model_name] = labels(i);
        w.sample(
            success,
            &[engine, model_name, ("finished_reason", "length")],
            format_args!("{}.0", e.requests_success.load(Relaxed)),
        );
    }
    let (buckets, count, sum_ns) = {
        let g = shared.lateness.lock().unwrap_or_else(|e| e.into_inner());
        let b: Vec<u64> = LATENESS_BUCKETS
            .iter()
            .map(|s| g.0.count_between(0, (s * 1e9) as u64))
            .collect();
        (b, g.0.len(), g.1)
    };
    let h = "specperf_sim_emission_lateness_seconds";
    w.family(
        h,
        "histogram",
        "Actual minus scheduled emission time of streamed chunks.",
    );
    let bucket = format!("{h}_bucket");
    for (le, c) in LATENESS_BUCKETS.iter().zip(&buckets) {
        w.sample(&bucket, &[("le", le.to_string())], c);
    }
    w.sample(&bucket, &[("le", "+Inf")], count);
    w.sample::<&str, &str>(&format!("{h}_sum"), &[], sum_ns as f64 / 1e9);
    w.sample::<&str, &str>(&format!("{h}_count"), &[], count);
    let stats = lateness_stats(shared);
    let q = "specperf_sim_emission_lateness_quantile_seconds";
    w.family(q, "gauge", "Emission lateness quantiles since start.");
    for (k, v) in [
        ("0.5", stats.p50_ms),
        ("0.99", stats.p99_ms),
        ("1", stats.max_ms),
    ] {
        w.sample(q, &[("quantile", k)], v / 1e3);
    }
    w.finish(Format::Text)
}
