//! The collection: family naming, references, slices, and the memory bound.

use super::*;
use crate::scrape::prom::{parse, Format};

const START: u64 = 1_000_000_000_000;
const SEC: u64 = 1_000_000_000;

fn page(running: u64, tokens: u64, lat_count: u64) -> String {
    format!(
        "# HELP vllm:num_requests_running Number of requests in model execution batches.\n\
         # TYPE vllm:num_requests_running gauge\n\
         vllm:num_requests_running{{engine=\"0\",model_name=\"m\"}} {running}.0\n\
         # HELP vllm:generation_tokens_total Number of generation tokens processed.\n\
         # TYPE vllm:generation_tokens_total counter\n\
         vllm:generation_tokens_total{{engine=\"0\",model_name=\"m\"}} {tokens}.0\n\
         # HELP vllm:generation_tokens_created Number of generation tokens processed.\n\
         # TYPE vllm:generation_tokens_created gauge\n\
         vllm:generation_tokens_created{{engine=\"0\",model_name=\"m\"}} 1.7e9\n\
         # HELP vllm:e2e_request_latency_seconds Latency.\n\
         # TYPE vllm:e2e_request_latency_seconds histogram\n\
         vllm:e2e_request_latency_seconds_bucket{{le=\"1.0\",model_name=\"m\"}} {lat_count}.0\n\
         vllm:e2e_request_latency_seconds_bucket{{le=\"+Inf\",model_name=\"m\"}} {lat_count}.0\n\
         vllm:e2e_request_latency_seconds_count{{model_name=\"m\"}} {lat_count}.0\n\
         vllm:e2e_request_latency_seconds_sum{{model_name=\"m\"}} {lat_count}.5\n\
         # HELP rpc_seconds A summary.\n\
         # TYPE rpc_seconds summary\n\
         rpc_seconds{{quantile=\"0.5\"}} 1.0\n\
         rpc_seconds_sum 3.0\n\
         rpc_seconds_count 2.0\n\
         untyped_thing 7\n"
    )
}

fn feed(c: &mut Collected, t: u64, running: u64, tokens: u64, lat: u64) {
    let text = page(running, tokens, lat);
    let p = parse(&text, Format::Text).unwrap();
    c.page(0, t, 1_000_000, &text, &p);
}

#[test]
fn families_take_the_servers_names_and_keep_every_label() {
    let mut c = Collected::new(&["http://x/metrics".into()], SEC);
    feed(&mut c, START - SEC / 2, 0, 100, 0);
    c.start(START);
    feed(&mut c, START, 0, 100, 0);
    feed(&mut c, START + SEC / 3, 2, 130, 1);
    feed(&mut c, START + SEC + 1, 4, 160, 3);
    c.end(START + 2 * SEC);
    let names: Vec<&str> = c.families.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "untyped_thing",
            "vllm:e2e_request_latency_seconds",
            "vllm:generation_tokens",
            "vllm:num_requests_running"
        ],
        "counters lose _total, _created and summaries are dropped"
    );
    let f = &c.families["vllm:generation_tokens"];
    assert_eq!(f.kind, Kind::Counter);
    assert_eq!(f.help, "Number of generation tokens processed.");
    let labels = vec![
        ("engine".to_owned(), "0".to_owned()),
        ("model_name".to_owned(), "m".to_owned()),
    ];
    let SeriesData::Counter {
        reference,
        last,
        marks,
        ..
    } = &f.series[&(0, labels.clone())]
    else {
        panic!("a counter")
    };
    assert_eq!(reference.map(|r| r.1), Some(100.0));
    assert_eq!(last.map(|r| r.1), Some(160.0));
    // Boundary 0 (the start) saw 100, boundary 1 130, boundary 2 160.
    assert_eq!(marks, &[Some(100.0), Some(130.0), Some(160.0)]);
    let SeriesData::Gauge { stats, slices } =
        &c.families["vllm:num_requests_running"].series[&(0, labels)]
    else {
        panic!("a gauge")
    };
    assert_eq!((stats.n, stats.min, stats.max), (3, 0.0, 4.0));
    assert_eq!(stats.percentile(50.0), Some(2.0));
    assert_eq!(slices.len(), 2);
    assert_eq!((slices[0].n, slices[0].sum), (2, 2.0));
    let h = &c.families["vllm:e2e_request_latency_seconds"];
    let SeriesData::Histogram { les, last, .. } =
        &h.series[&(0, vec![("model_name".to_owned(), "m".to_owned())])]
    else {
        panic!("a histogram")
    };
    assert_eq!(les, &["1.0", "+Inf"]);
    assert_eq!(
        last.as_ref().map(|l| (l.1.count, l.1.sum)),
        Some((3.0, 3.5))
    );
    let e = &c.endpoints[0];
    assert_eq!((e.total_fetches, e.unique_updates), (4, 3));
    assert_eq!(e.first_fetch_ns, Some(START - SEC / 2));
}

/// Regression guard for the memory bound: ten thousand scrapes over 100 s keep what 100 slices
/// need, the same as a thousand scrapes would.
#[test]
fn many_scrapes_keep_per_slice_aggregates_not_pages() {
    let run = |scrapes: u64| {
        let mut c = Collected::new(&["http://x/metrics".into()], SEC);
        c.start(START);
        for i in 0..scrapes {
            let t = START + i * (100 * SEC / scrapes);
            feed(&mut c, t, i % 7, i * 3, i);
        }
        c.end(START + 100 * SEC);
        c.retained()
    };
    let few = run(1_000);
    let many = run(10_000);
    assert_eq!(many, few, "retained points grow with scrapes");
    // 4 scalar/histogram series at ~100 slices each, plus 7 distinct gauge values.
    assert!(many <= 4 * (3 + 101) + 7 + 100, "{many} points retained");
}

#[test]
fn distinct_gauge_values_are_capped() {
    let mut s = GaugeStats::default();
    for i in 0..100_000u32 {
        s.add(f64::from(i) * 1.000_1);
    }
    assert!(s.values.len() <= MAX_DISTINCT, "{}", s.values.len());
    assert_eq!(s.n, 100_000);
    let p50 = s.percentile(50.0).unwrap();
    assert!((p50 - 50_000.0).abs() / 50_000.0 < 0.01, "{p50}");
}
