//! `server_metrics_export.json` in AIPerf's shape (`aiperf-compat.md` §5), from what the scrape
//! side task keeps: the speculative-decoding counters' increases over the profiling window, per
//! endpoint (or per data-parallel engine where the series carry one), as counter `total` and
//! `rate` over the exact window. Other series on the pages are not kept by the scraper (the raw
//! pages are in `server_metrics/`), so they are not invented here.

use super::json::{Obj, J};
use crate::metrics::Summary;
use crate::scrape::acceptance::Numbers;
use crate::scrape::ScrapeReport;

/// One counter of the export: (name, description, unit, value from a group's numbers).
type Counter = (
    &'static str,
    &'static str,
    &'static str,
    fn(&Numbers) -> Option<f64>,
);

const COUNTERS: [Counter; 3] = [
    (
        "specperf:spec_decode_num_drafts",
        "Verification steps with at least one draft token (increase over the window)",
        "drafts",
        |n| Some(n.drafts),
    ),
    (
        "specperf:spec_decode_num_accepted_tokens",
        "Accepted draft tokens, bonus token excluded (increase over the window)",
        "tokens",
        |n| Some(n.accepted_tokens),
    ),
    (
        "specperf:spec_decode_num_draft_tokens",
        "Draft tokens proposed (increase over the window)",
        "tokens",
        |n| n.draft_tokens,
    ),
];

fn counter_stats(total: f64, window_s: f64) -> Obj {
    Obj::new().with("total", total).with(
        "rate",
        if window_s > 0.0 {
            Some(total / window_s)
        } else {
            None
        },
    )
}

/// The export for one run.
pub(crate) fn export(s: &Summary, r: &ScrapeReport) -> J {
    let a = &r.acceptance;
    let window = r.window_s;
    let configured: Vec<J> = r
        .endpoints
        .iter()
        .map(|e| J::from(e.url.as_str()))
        .collect();
    let successful: Vec<J> = r
        .endpoints
        .iter()
        .filter(|e| e.before.is_ok() && e.after.is_ok())
        .map(|e| J::from(e.url.as_str()))
        .collect();
    let mut info = Obj::new();
    for e in &r.endpoints {
        // The baseline, one scrape per live tick, and the final scrape.
        let fetches = 2 + r.timeline.len() as u64;
        let failed =
            e.failed_live_scrapes + u64::from(!e.before.is_ok()) + u64::from(!e.after.is_ok());
        info.put(
            e.url.as_str(),
            Obj::new()
                .with("total_fetches", fetches)
                .with("failed_fetches", failed)
                .with("format", e.format.map(|f| f.as_str()))
                .with("before", e.before.as_str())
                .with("after", e.after.as_str())
                .with("avg_fetch_latency_ms", None::<f64>)
                .with("unique_updates", None::<u64>)
                .with("avg_update_interval_ms", None::<f64>),
        );
    }
    let start = crate::timefmt::iso8601(s.benchmark_start_unix_s);
    let end = crate::timefmt::iso8601(s.benchmark_start_unix_s + window);
    let summary = Obj::new()
        .with("endpoints_configured", configured.clone())
        .with("endpoints_successful", successful)
        .with("start_time", start.as_str())
        .with("end_time", end.as_str())
        .with("endpoint_info", info)
        .with(
            "phase_time_ranges",
            Obj::new().with(
                "profiling",
                Obj::new()
                    .with("start_time", start.as_str())
                    .with("end_time", end.as_str()),
            ),
        );

    // Per-engine series where the counters carry an engine label, else one per endpoint, so
    // summing every series of a metric gives the run's total exactly once.
    let mut groups: Vec<(String, Obj, &Numbers)> = Vec::new();
    for ep in &a.endpoints {
        let engines: Vec<_> = a.engines.iter().filter(|e| e.url == ep.url).collect();
        if engines.is_empty() {
            if let Some(n) = &ep.numbers {
                groups.push((ep.url.clone(), Obj::new(), n));
            }
        } else {
            for e in engines {
                groups.push((
                    e.url.clone(),
                    Obj::new().with("engine", e.engine.as_str()),
                    &e.numbers,
                ));
            }
        }
    }
    let mut metrics = Obj::new();
    for (name, description, unit, get) in COUNTERS {
        let series: Vec<J> = groups
            .iter()
            .filter_map(|(url, labels, n)| {
                get(n).map(|total| {
                    J::O(
                        Obj::new()
                            .with("endpoint_url", url.as_str())
                            .with("labels", labels.clone())
                            .with("stats", counter_stats(total, window)),
                    )
                })
            })
            .collect();
        if series.is_empty() {
            continue;
        }
        metrics.put(
            name,
            Obj::new()
                .with("type", "counter")
                .with("description", description)
                .with("unit", unit)
                .with("series", series),
        );
    }
    let k = groups
        .iter()
        .map(|(_, _, n)| n.per_position_acceptance.len())
        .max()
        .unwrap_or(0);
    if k > 0 {
        let mut series = Vec::new();
        for (url, labels, n) in &groups {
            for (i, rate) in n.per_position_acceptance.iter().enumerate() {
                let mut l = labels.clone();
                l.put("position", i.to_string());
                series.push(J::O(
                    Obj::new()
                        .with("endpoint_url", url.as_str())
                        .with("labels", l)
                        .with("stats", counter_stats(rate * n.drafts, window)),
                ));
            }
        }
        metrics.put(
            "specperf:spec_decode_num_accepted_tokens_per_pos",
            Obj::new()
                .with("type", "counter")
                .with(
                    "description",
                    "Accepted draft tokens at each draft position (increase over the window)",
                )
                .with("unit", "tokens")
                .with("series", series),
        );
    }
    J::O(
        Obj::new()
            .with("schema_version", super::aiperf::SCHEMA_VERSION)
            .with("aiperf_version", super::aiperf::tool_version())
            .with("benchmark_id", super::aiperf::benchmark_id(s))
            .with("summary", summary)
            .with("metrics_phase", "profiling")
            .with("metrics", metrics)
            .with(
                "input_config",
                Obj::new().with("server_metrics", configured),
            )
            .with(
                "specperf",
                Obj::new()
                    .with(
                        "acceptance_status",
                        serde_json::to_value(a.status).unwrap_or_default(),
                    )
                    .with("acceptance_length", a.numbers.acceptance_length)
                    .with("metric_source", a.metric_source.as_str())
                    .with("window_s", window)
                    .with("settle_s", r.settle_s)
                    .with("counters_settled", r.counters_settled)
                    .with("resets", a.resets.len() as u64),
            ),
    )
}
