//! The simulator's `/metrics` page, vLLM's (per-engine counters moving every step) or llama.cpp's
//! (`llamacpp:` counters moving when a request ends), exactly consistent with what was streamed,
//! plus the emission-lateness histogram, written through the one exposition
//! writer ([`crate::scrape::prom::Writer`]). `http` serves it; it only reads `state` and `model`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::model::{EngineCounters, GroupCounters, LatencyHistogram, LatencyHistograms};
use super::state::{lateness_stats, ServerCtx};
use super::MetricsFlavor;
use crate::scrape::prom::{Format, Writer};

/// Lateness histogram buckets, seconds.
const LATENESS_BUCKETS: [f64; 11] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
];

/// The page for one server: its own engines only, as each server shows its own, in the flavor
/// asked for, then the simulator's own lateness series.
pub(super) fn metrics_page(ctx: &ServerCtx) -> String {
    let mut w = Writer::with_capacity(8192);
    match ctx.shared.cfg.metrics_flavor {
        MetricsFlavor::Vllm => {
            vllm_families(&mut w, ctx);
            group_families(&mut w, ctx);
        }
        MetricsFlavor::Llamacpp => llamacpp_families(&mut w, ctx),
    }
    lateness_families(&mut w, ctx);
    let received = "specperf_sim_requests_received_total";
    w.family(
        received,
        "counter",
        "Completion requests received, whatever became of them (faults and refusals included).",
    );
    w.sample::<&str, &str>(received, &[], ctx.shared.received.load(Relaxed));
    w.finish(Format::Text)
}

/// llama-server's families (`--metrics`): one unlabelled series each, integers, the server's
/// engines summed. Tokens predicted and the speculative counters are the end-of-request ones:
/// llama.cpp adds a request's counts as it finishes, so a live scrape lags the stream.
fn llamacpp_families(w: &mut Writer, ctx: &ServerCtx) {
    let engines = &ctx.shared.engines[ctx.engines.clone()];
    let sum = |get: fn(&EngineCounters) -> u64| engines.iter().map(get).sum::<u64>();
    type Get = fn(&EngineCounters) -> u64;
    let families: [(&str, &str, &str, Get); 6] = [
        (
            "llamacpp:prompt_tokens_total",
            "counter",
            "Number of prompt tokens processed.",
            |e| e.prompt_tokens.load(Relaxed),
        ),
        (
            "llamacpp:tokens_predicted_total",
            "counter",
            "Number of generation tokens processed.",
            |e| e.at_finish.generation_tokens.load(Relaxed),
        ),
        (
            "llamacpp:requests_processing",
            "gauge",
            "Number of requests processing.",
            |e| e.running.load(Relaxed),
        ),
        (
            "llamacpp:spec_decode_num_drafts_total",
            "counter",
            "Number of speculative decoding drafts.",
            |e| e.at_finish.drafts.load(Relaxed),
        ),
        (
            "llamacpp:spec_decode_num_draft_tokens_total",
            "counter",
            "Number of draft tokens.",
            |e| e.at_finish.draft_tokens.load(Relaxed),
        ),
        (
            "llamacpp:spec_decode_num_accepted_tokens_total",
            "counter",
            "Number of accepted draft tokens.",
            |e| e.at_finish.accepted.load(Relaxed),
        ),
    ];
    for (name, kind, help, get) in families {
        w.family(name, kind, help);
        w.sample::<&str, &str>(name, &[], sum(get));
    }
    let per_pos = "llamacpp:spec_decode_num_accepted_tokens_per_pos_total";
    w.family(
        per_pos,
        "counter",
        "Accepted draft tokens per draft position.",
    );
    let k = ctx.shared.cfg.k as usize;
    for p in 0..k {
        let n: u64 = engines
            .iter()
            .map(|e| e.at_finish.per_pos[p].load(Relaxed))
            .sum();
        w.sample(per_pos, &[("position", p.to_string())], n);
    }
}

/// vLLM's families: per-engine series (`engine`, `model_name`), floats, moving every step.
fn vllm_families(w: &mut Writer, ctx: &ServerCtx) {
    let shared = &ctx.shared;
    let engines = &shared.engines[ctx.engines.clone()];
    let model = shared.cfg.model.as_str();
    let ranks: Vec<String> = engines.iter().map(|e| e.rank.to_string()).collect();
    let labels = |i: usize| [("engine", ranks[i].as_str()), ("model_name", model)];
    type Get = fn(&EngineCounters) -> u64;
    let families: [(&str, &str, &str, Get); 7] = [
        (
            "vllm:prefix_cache_queries",
            "counter",
            "Prefix cache queries, in terms of number of queried tokens.",
            |e| e.prefix_cache_queries.load(Relaxed),
        ),
        (
            "vllm:prefix_cache_hits",
            "counter",
            "Prefix cache hits, in terms of number of cached tokens.",
            |e| e.prefix_cache_hits.load(Relaxed),
        ),
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
    let sched = &shared.sched[ctx.engines.clone()];
    let waiting = "vllm:num_requests_waiting";
    w.family(
        waiting,
        "gauge",
        "Number of requests waiting to be processed.",
    );
    for (i, s) in sched.iter().enumerate() {
        w.sample(waiting, &labels(i), format_args!("{}.0", s.waiting()));
    }
    let usage = "vllm:kv_cache_usage_perc";
    w.family(usage, "gauge", "KV-cache usage. 1 means 100 percent usage.");
    for (i, s) in sched.iter().enumerate() {
        w.sample(usage, &labels(i), format_args!("{:?}", s.usage()));
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
    // Where each prompt token's KV came from: computed, or the prefix cache (the simulator has
    // no KV connector, so never transferred).
    let by_source = "vllm:prompt_tokens_by_source_total";
    w.family(by_source, "counter", "Number of prompt tokens by source.");
    for (i, e) in engines.iter().enumerate() {
        let [engine, model_name] = labels(i);
        let hits = e.prefix_cache_hits.load(Relaxed);
        let computed = e.prompt_tokens.load(Relaxed).saturating_sub(hits);
        for (source, n) in [
            ("local_compute", computed),
            ("local_cache_hit", hits),
            ("external_kv_transfer", 0),
        ] {
            w.sample(
                by_source,
                &[engine, model_name, ("source", source)],
                format_args!("{n}.0"),
            );
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
    type Hist = fn(&LatencyHistograms) -> &LatencyHistogram;
    let histograms: [(&str, &str, Hist); 4] = [
        (
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            |h| &h.ttft,
        ),
        (
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            |h| &h.itl,
        ),
        (
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            |h| &h.request_tpot,
        ),
        (
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            |h| &h.e2e,
        ),
    ];
    for (name, help, get) in histograms {
        w.family(name, "histogram", help);
        let (bucket, sum, count) = (
            format!("{name}_bucket"),
            format!("{name}_sum"),
            format!("{name}_count"),
        );
        for (i, e) in engines.iter().enumerate() {
            let [engine, model_name] = labels(i);
            let hist = get(&e.latency);
            let r = hist.read();
            let les = hist.bounds.iter().map(|b| format!("{b:?}"));
            for (le, c) in les.chain(["+Inf".to_string()]).zip(&r.cumulative) {
                w.sample(
                    &bucket,
                    &[engine, model_name, ("le", le.as_str())],
                    format_args!("{c}.0"),
                );
            }
            let n = r.cumulative.last().copied().unwrap_or(0);
            w.sample(&count, &labels(i), format_args!("{n}.0"));
            w.sample(&sum, &labels(i), format_args!("{:?}", r.sum_secs));
        }
        let created = format!("{name}_created");
        w.family(&created, "gauge", help);
        for i in 0..engines.len() {
            w.sample(&created, &labels(i), format_args!("{:e}", shared.created));
        }
    }
}

/// The truth per `--acceptance-group` rule (only with rules): the speculative counters again,
/// split by the rule that set the request's acceptance, `group` = the rule's text, and `""` for
/// the requests matching none; summed over this server's engines, so the groups add up to the
/// `vllm:spec_decode_*` series of the page.
fn group_families(w: &mut Writer, ctx: &ServerCtx) {
    let shared = &ctx.shared;
    let engines = &shared.engines[ctx.engines.clone()];
    let rules = &shared.cfg.acceptance_groups;
    if rules.is_empty() {
        return;
    }
    let names: Vec<&str> = rules.iter().map(|g| g.text.as_str()).chain([""]).collect();
    type Get = fn(&GroupCounters) -> &AtomicU64;
    let families: [(&str, &str, Get); 3] = [
        (
            "specperf_sim:group_spec_decode_num_drafts_total",
            "Verify steps of the requests in each acceptance group (simulator truth).",
            |g| &g.drafts,
        ),
        (
            "specperf_sim:group_spec_decode_num_draft_tokens_total",
            "Draft tokens proposed for the requests in each acceptance group (simulator truth).",
            |g| &g.draft_tokens,
        ),
        (
            "specperf_sim:group_spec_decode_num_accepted_tokens_total",
            "Draft tokens accepted for the requests in each acceptance group (simulator truth).",
            |g| &g.accepted,
        ),
    ];
    for (name, help, get) in families {
        w.family(name, "counter", help);
        for (i, group) in names.iter().enumerate() {
            let n: u64 = engines
                .iter()
                .filter_map(|e| e.groups.get(i))
                .map(|g| get(g).load(Relaxed))
                .sum();
            w.sample(name, &[("group", *group)], n);
        }
    }
}

/// The simulator's own series: emission lateness against the schedule.
fn lateness_families(w: &mut Writer, ctx: &ServerCtx) {
    let shared = &ctx.shared;
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
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::sim::model::Emission;
    use crate::sim::{MetricsFlavor, SimConfig, Simulator};

    fn step(tokens: u32, accepted: Option<u32>) -> Emission {
        Emission {
            at: Duration::ZERO,
            tokens,
            accepted,
        }
    }

    /// The page's `llamacpp:` sample lines, in order.
    fn llamacpp_samples(ctx: &ServerCtx) -> Vec<String> {
        metrics_page(ctx)
            .lines()
            .filter(|l| l.starts_with("llamacpp:"))
            .map(str::to_owned)
            .collect()
    }

    #[tokio::test]
    async fn llamacpp_page_has_its_counters_unlabelled_and_moving_only_when_a_request_ends() {
        let sim = Simulator::bind(SimConfig {
            metrics_flavor: MetricsFlavor::Llamacpp,
            engines: 2,
            k: 3,
            ..SimConfig::default()
        })
        .await
        .unwrap();
        let ctx = sim.server_ctx(0);
        let engines = &ctx.shared.engines;
        let page = metrics_page(&ctx);
        crate::scrape::prom::parse(&page, Format::Text).expect("a valid exposition page");
        assert!(!page.contains("vllm:"), "{page}");
        assert!(
            page.contains(
                "# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.\n\
                 # TYPE llamacpp:tokens_predicted_total counter\n\
                 llamacpp:tokens_predicted_total 0\n"
            ),
            "{page}"
        );

        // One request on each engine, mid-stream: a first token, then two verified drafts.
        let first = [step(1, None), step(3, Some(2)), step(1, Some(0))];
        let second = [step(1, None), step(4, Some(3))];
        engines[0].prompt_tokens.fetch_add(10, Relaxed);
        engines[1].prompt_tokens.fetch_add(7, Relaxed);
        for (e, plan) in [(&engines[0], &first[..]), (&engines[1], &second[..])] {
            e.running.fetch_add(1, Relaxed);
            for s in plan {
                e.on_emission(s, 3, 0);
            }
        }
        let running = llamacpp_samples(&ctx);
        // Streaming moved nothing but the prompt tokens and the requests in progress.
        assert_eq!(
            running,
            [
                "llamacpp:prompt_tokens_total 17",
                "llamacpp:tokens_predicted_total 0",
                "llamacpp:requests_processing 2",
                "llamacpp:spec_decode_num_drafts_total 0",
                "llamacpp:spec_decode_num_draft_tokens_total 0",
                "llamacpp:spec_decode_num_accepted_tokens_total 0",
                "llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"} 0",
                "llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position=\"1\"} 0",
                "llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position=\"2\"} 0",
            ]
        );

        // Both end: everything they did lands at once, summed over the server's engines.
        for (e, plan) in [(&engines[0], &first[..]), (&engines[1], &second[..])] {
            e.on_finished(plan, 3);
            e.running.fetch_sub(1, Relaxed);
        }
        let done = llamacpp_samples(&ctx);
        assert_eq!(
            done,
            [
                "llamacpp:prompt_tokens_total 17",
                "llamacpp:tokens_predicted_total 10",
                "llamacpp:requests_processing 0",
                "llamacpp:spec_decode_num_drafts_total 3",
                "llamacpp:spec_decode_num_draft_tokens_total 9",
                "llamacpp:spec_decode_num_accepted_tokens_total 5",
                "llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"} 2",
                "llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position=\"1\"} 2",
                "llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position=\"2\"} 1",
            ]
        );
        // The vLLM-timed counters moved per step all along: the two pages agree once requests end.
        let vllm_accepted: u64 = engines.iter().map(|e| e.accepted.load(Relaxed)).sum();
        assert_eq!(vllm_accepted, 5);
    }
}
