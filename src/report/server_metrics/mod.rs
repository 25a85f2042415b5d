//! `server_metrics_export.json` and `server_metrics_export.csv` in AIPerf 0.13's shape
//! (`agentx-replay.md` §5, schema_version "1.1"), from what the scrape side task collected:
//! every family of every endpoint under the server's own names (counters without `_total`), all
//! labels, per-series stats and timeslices over the window from the baseline scrape to the final
//! one. AIPerf's `ServerMetricsExportData` reads the JSON; InferenceX's agentic aggregator and
//! plot script read the `vllm:` families and `summary.endpoint_info.*.first_update_ns`.
//!
//! Deliberately different: histogram percentiles interpolate linearly inside buckets (AIPerf fits
//! a polynomial); gauge percentiles are exact until a series shows more than
//! `families::MAX_DISTINCT` distinct values, then rounded (bounded memory); `start_time` and
//! `end_time` carry their UTC offset. A `specperf` object adds the acceptance numbers.

mod stats;

use std::collections::BTreeMap;

use super::json::{Obj, J};
use crate::csv;
use crate::metrics::Summary;
use crate::scrape::families::{Collected, Family, Kind};
use crate::scrape::ScrapeReport;
use stats::{SeriesOut, Window};

/// The export's schema version (AIPerf's `ServerMetricsExportData.SCHEMA_VERSION`).
const SCHEMA_VERSION: &str = "1.1";

type Labels = [(String, String)];

/// One exported series.
struct Row<'a> {
    url: &'a str,
    labels: &'a [(String, String)],
    out: SeriesOut,
}

/// One exported family.
struct FamilyOut<'a> {
    name: &'a str,
    family: &'a Family,
    unit: Option<&'static str>,
    rows: Vec<Row<'a>>,
}

/// Python's `str(dict)` of the labels, AIPerf's series sort key.
fn py_labels(labels: &[(String, String)]) -> String {
    let items: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("'{k}': '{v}'"))
        .collect();
    format!("{{{}}}", items.join(", "))
}

/// The unit AIPerf infers from a family name's suffix (its `units.py` table, by name only).
fn unit(name: &str) -> Option<&'static str> {
    const SUFFIXES: [(&str, &str); 22] = [
        ("_seconds", "seconds"),
        ("_milliseconds", "milliseconds"),
        ("_ms", "milliseconds"),
        ("_nanoseconds", "nanoseconds"),
        ("_ns", "nanoseconds"),
        ("_bytes", "bytes"),
        ("_kilobytes", "kilobytes"),
        ("_megabytes", "megabytes"),
        ("_gigabytes", "gigabytes"),
        ("_tokens", "tokens"),
        ("_requests", "requests"),
        ("request_success", "requests"),
        ("_reqs", "requests"),
        ("_errors", "errors"),
        ("_error_count", "errors"),
        ("_blocks", "blocks"),
        ("_block_count", "blocks"),
        ("_ratio", "ratio"),
        ("_percent", "percent"),
        ("_perc", "percent"),
        ("_total", "count"),
        ("_count", "count"),
    ];
    let by_suffix = SUFFIXES
        .iter()
        .filter(|(s, _)| name.ends_with(s))
        .max_by_key(|(s, _)| s.len())
        .map(|(_, u)| *u);
    by_suffix.or_else(|| name.contains("num_requests_").then_some("requests"))
}

fn families(c: &Collected, w: Window) -> Vec<FamilyOut<'_>> {
    c.families
        .iter()
        .filter_map(|(name, family)| {
            let mut rows: Vec<Row<'_>> = family
                .series
                .iter()
                .filter_map(|((ep, labels), data)| {
                    Some(Row {
                        url: c.endpoints.get(*ep)?.url.as_str(),
                        labels,
                        out: stats::series(data, w)?,
                    })
                })
                .collect();
            rows.sort_by_cached_key(|r| (r.url.to_owned(), py_labels(r.labels)));
            (!rows.is_empty()).then(|| FamilyOut {
                name,
                family,
                unit: unit(name),
                rows,
            })
        })
        .collect()
}

fn window(c: &Collected) -> Option<Window> {
    let start = c.start_ns?;
    Some(Window {
        start,
        end: c.end_ns.unwrap_or(start).max(start),
        slice: c.slice_ns,
    })
}

fn endpoint_info(c: &Collected, r: &ScrapeReport) -> Obj {
    let mut info = Obj::new();
    for e in c.endpoints.iter().filter(|e| e.total_fetches > 0) {
        let (first_u, last_u) = (
            e.first_update_ns.unwrap_or(0),
            e.last_update_ns.unwrap_or(0),
        );
        let duration_s = last_u.saturating_sub(first_u) as f64 / 1e9;
        let status = r.endpoints.iter().find(|s| s.url == e.url);
        info.put(
            e.url.as_str(),
            Obj::new()
                .with("total_fetches", e.total_fetches)
                .with("first_fetch_ns", e.first_fetch_ns.unwrap_or(0))
                .with("last_fetch_ns", e.last_fetch_ns.unwrap_or(0))
                .with(
                    "avg_fetch_latency_ms",
                    e.latency_sum_ns as f64 / e.total_fetches as f64 / 1e6,
                )
                .with("unique_updates", e.unique_updates)
                .with("first_update_ns", first_u)
                .with("last_update_ns", last_u)
                .with("duration_seconds", duration_s)
                .with(
                    "avg_update_interval_ms",
                    if e.unique_updates > 1 {
                        duration_s * 1e3 / (e.unique_updates - 1) as f64
                    } else {
                        0.0
                    },
                )
                .with("failed_fetches", e.failed_fetches)
                .with("format", status.and_then(|s| s.format).map(|f| f.as_str()))
                .with("before", status.map(|s| s.before.as_str()))
                .with("after", status.map(|s| s.after.as_str())),
        );
    }
    info
}

/// The JSON export for one run.
pub(crate) fn export(s: &Summary, r: &ScrapeReport) -> J {
    let a = &r.acceptance;
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
    let c = r.collected.as_ref();
    let w = c.and_then(window);
    // Without a collection (a merged run) the window is the benchmark's.
    let (start_ns, end_ns) = w.map_or_else(
        || {
            let start = (s.benchmark_start_unix_s * 1e9) as u64;
            (start, start + (r.window_s * 1e9) as u64)
        },
        |w| (w.start, w.end),
    );
    let mut summary = Obj::new()
        .with("endpoints_configured", configured.clone())
        .with("endpoints_successful", successful)
        .with("start_time", crate::timefmt::iso8601(start_ns as f64 / 1e9))
        .with("end_time", crate::timefmt::iso8601(end_ns as f64 / 1e9));
    if let Some(c) = c {
        summary.put("endpoint_info", endpoint_info(c, r));
    }
    summary.put(
        "phase_time_ranges",
        Obj::new().with(
            "profiling",
            Obj::new().with("start_ns", start_ns).with("end_ns", end_ns),
        ),
    );
    let mut metrics = Obj::new();
    if let (Some(c), Some(w)) = (c, w) {
        for f in families(c, w) {
            let series: Vec<J> = f
                .rows
                .into_iter()
                .map(|row| {
                    let mut o = Obj::new().with("endpoint_url", row.url);
                    if !row.labels.is_empty() {
                        let mut l = Obj::new();
                        for (k, v) in row.labels {
                            l.put(k.as_str(), v.as_str());
                        }
                        o.put("labels", l);
                    }
                    o.put("stats", row.out.stats);
                    if let Some(b) = row.out.buckets {
                        o.put("buckets", b);
                    }
                    if let Some(ts) = row.out.timeslices {
                        o.put("timeslices", ts.into_iter().map(J::O).collect::<Vec<J>>());
                    }
                    J::O(o)
                })
                .collect();
            let mut m = Obj::new()
                .with("type", f.family.kind.as_str())
                .with("description", f.family.help.as_str());
            if let Some(u) = f.unit {
                m.put("unit", u);
            }
            metrics.put(f.name, m.with("series", series));
        }
    }
    J::O(
        Obj::new()
            .with("schema_version", SCHEMA_VERSION)
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
                    .with("window_s", r.window_s)
                    .with("settle_s", r.settle_s)
                    .with("counters_settled", r.counters_settled)
                    .with("resets", a.resets.len() as u64),
            ),
    )
}

/// AIPerf's CSV number format: integers bare, reals with 4 decimals, absent empty.
fn csv_number(v: Option<&J>) -> String {
    match v {
        Some(J::V(serde_json::Value::Number(n))) if n.is_u64() || n.is_i64() => n.to_string(),
        Some(J::V(serde_json::Value::Number(n))) => format!("{:.4}", n.as_f64().unwrap_or(0.0)),
        _ => String::new(),
    }
}

/// The value under `key` of an ordered object.
fn get<'a>(o: &'a Obj, key: &str) -> Option<&'a J> {
    o.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// The endpoint as AIPerf's CSV shows it: no scheme, no trailing `/metrics`.
fn display_endpoint(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.strip_suffix("/metrics").unwrap_or(rest)
}

/// The CSV companion: one section per type (gauge, counter, histogram, unknown), header
/// `Endpoint,Type,Metric,Unit,<stats>,<label columns>,Description` (+ `buckets`), and `_info`
/// gauges transposed into `Endpoint,Metric,Key,Value,Description` at the end.
pub(crate) fn export_csv(s: &Summary, r: &ScrapeReport) -> String {
    const GAUGE: [&str; 13] = [
        "avg", "min", "max", "std", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99",
    ];
    const COUNTER: [&str; 6] = [
        "total", "rate", "rate_avg", "rate_min", "rate_max", "rate_std",
    ];
    const HISTOGRAM: [&str; 14] = [
        "count",
        "count_rate",
        "sum",
        "sum_rate",
        "avg",
        "p1_estimate",
        "p5_estimate",
        "p10_estimate",
        "p25_estimate",
        "p50_estimate",
        "p75_estimate",
        "p90_estimate",
        "p95_estimate",
        "p99_estimate",
    ];
    let mut out = format!(
        "# AIPerf Server Metrics Export (CSV)\n# aiperf_version: {}\n# schema_version: 1.0\n\
         # benchmark_id: {}\n# Note: Same benchmark_id and version appear in JSON and Parquet \
         exports\n#\n",
        super::aiperf::tool_version(),
        super::aiperf::benchmark_id(s)
    );
    let Some((c, w)) = r.collected.as_ref().and_then(|c| Some((c, window(c)?))) else {
        return out;
    };
    let fams = families(c, w);
    let mut first = true;
    // `_info` gauges: (endpoint, family, labels, help).
    let mut info: Vec<(String, &str, &Labels, &str)> = Vec::new();
    for (kind, keys) in [
        (Kind::Gauge, &GAUGE[..]),
        (Kind::Counter, &COUNTER[..]),
        (Kind::Histogram, &HISTOGRAM[..]),
        (Kind::Unknown, &GAUGE[..]),
    ] {
        let mut rows: Vec<(&FamilyOut<'_>, &Row<'_>)> = Vec::new();
        for f in fams.iter().filter(|f| f.family.kind == kind) {
            for row in &f.rows {
                if kind == Kind::Gauge && f.name.ends_with("_info") {
                    info.push((
                        display_endpoint(row.url).to_owned(),
                        f.name,
                        row.labels,
                        f.family.help.as_str(),
                    ));
                } else {
                    rows.push((f, row));
                }
            }
        }
        if rows.is_empty() {
            continue;
        }
        // Label columns, the most used first (fewest gaps), then by name.
        let mut uses: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, row) in &rows {
            for (k, _) in row.labels {
                *uses.entry(k.as_str()).or_default() += 1;
            }
        }
        let mut label_cols: Vec<&str> = uses.keys().copied().collect();
        label_cols.sort_by_key(|k| std::cmp::Reverse(uses[k]));
        rows.sort_by_cached_key(|(f, row)| {
            (f.name, display_endpoint(row.url), py_labels(row.labels))
        });
        if !first {
            out.push('\n');
        }
        first = false;
        let mut header: Vec<&str> = vec!["Endpoint", "Type", "Metric", "Unit"];
        header.extend(keys);
        header.extend(&label_cols);
        header.push("Description");
        if kind == Kind::Histogram {
            header.push("buckets");
        }
        out.push_str(&csv::row(&header));
        out.push('\n');
        for (f, row) in rows {
            let mut cells = vec![
                csv::field(display_endpoint(row.url)),
                kind.as_str().to_owned(),
                csv::field(f.name),
                f.unit.unwrap_or("").to_owned(),
            ];
            cells.extend(keys.iter().map(|k| csv_number(get(&row.out.stats, k))));
            for col in &label_cols {
                let v = row.labels.iter().find(|(k, _)| k == col).map(|(_, v)| v);
                cells.push(csv::field(v.map_or("", String::as_str)));
            }
            cells.push(csv::field(&f.family.help));
            if kind == Kind::Histogram {
                let text = row
                    .out
                    .buckets
                    .as_ref()
                    .map(|b| {
                        b.0.iter()
                            .map(|(k, v)| format!("{k}={}", csv_number(Some(v))))
                            .collect::<Vec<_>>()
                            .join(";")
                    })
                    .unwrap_or_default();
                cells.push(csv::field(&text));
            }
            out.push_str(&cells.join(","));
            out.push('\n');
        }
    }
    if !info.is_empty() {
        if !first {
            out.push('\n');
        }
        out.push_str("Endpoint,Metric,Key,Value,Description\n");
        info.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
        for (ep, name, labels, help) in info {
            for (k, v) in labels {
                out.push_str(
                    &[
                        csv::field(&ep),
                        csv::field(name),
                        csv::field(k),
                        csv::field(v),
                        csv::field(help),
                    ]
                    .join(","),
                );
                out.push('\n');
            }
        }
    }
    out
}
