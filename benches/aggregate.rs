//! Criterion bench of the one aggregator's hot path: `Aggregate::add` (every record passes
//! through it once, on the aggregator task) and `Aggregate::summary` (once per run: sorts each
//! metric's exact values for the percentiles).
//!
//! Records look like a 256-token streamed chat answer under speculative decoding: 100 content
//! chunks of ~2.5 tokens (per-chunk usage), so each `add` also folds 100 gaps into the HDR
//! histograms. Throughput is in elements = records.
//!
//! `SUMMARY_MEMORY=N cargo bench --bench aggregate` instead adds `N` such records (one in 40
//! failed) and prints what `summary` adds to the process's peak resident memory (the end of a
//! long run reads its per-request values and spans back: an hour of AgentX at 1,536 lanes is
//! ~910,000 records).
#![allow(missing_docs)]

use std::time::Duration;

use criterion::{criterion_group, BatchSize, Criterion, Throughput};
use specperf::{
    Aggregate, ChunkGap, FailureKind, LoadMeta, Outcome, Phase, RequestRecord, RunMeta, Slo,
    SloMetric, TokenSource,
};

const MS: u64 = 1_000_000;

fn record(i: u64) -> RequestRecord {
    let sent = i * 3 * MS;
    let first = sent + 50 * MS + (i % 7) * 100_000;
    let gaps: Vec<ChunkGap> = (0..100u64)
        .map(|k| ChunkGap {
            gap_ns: 10 * MS + (i * 31 + k * 17) % 500_000,
            tokens: if k % 2 == 0 { 2 } else { 3 },
        })
        .collect();
    let last = first + gaps.iter().map(|g| g.gap_ns).sum::<u64>();
    let mut r = RequestRecord {
        id: i,
        phase: Phase::Profiling,
        turn: 0,
        sample_index: (i % 88) as usize,
        outcome: Outcome::Success,
        http_status: Some(200),
        error: None,
        intended_ns: sent,
        sent_ns: sent + 20_000,
        headers_ns: Some(sent + MS),
        first_token_ns: Some(first),
        second_token_ns: Some(first + gaps[0].gap_ns),
        last_token_ns: Some(last),
        first_output_token_ns: Some(first),
        end_ns: last + 100_000,
        prompt_tokens: Some(400 + i % 300),
        completion_tokens: Some(256),
        reasoning_tokens: None,
        total_tokens: Some(656 + i % 300),
        requested_osl: Some(256),
        token_source: TokenSource::UsagePerChunk,
        content_events: 101,
        reads: 101,
        events: 104,
        first_chunk_tokens: Some(6),
        finish_reason: Some("length".into()),
        empty_output: false,
        retries: 0,
        chunk_gaps: gaps,
        response_text: None,
        chunk_text_ends: Vec::new(),
        session: None,
        spec: None,
        spec_warning: None,
        group: None,
        http: Some(Default::default()),
    };
    // The HTTP exchange a kept-alive connection measures: ~2 KB out, 101 frames back.
    if let Some(h) = r.http.as_mut() {
        h.connection_reused = true;
        h.bytes_sent = 2048 + i % 512;
        h.bytes_received = 101 * 180;
        h.frames_received = 101;
        h.first_frame_ns = Some(first);
        h.last_frame_ns = Some(last);
    }
    r
}

fn meta() -> RunMeta {
    RunMeta {
        url: "http://127.0.0.1:8000".into(),
        model: "m".into(),
        endpoint: "/v1/chat/completions".into(),
        endpoint_type: specperf::EndpointType::Chat,
        osl: Some(256),
        cli_command: None,
        streaming: true,
        concurrency: Some(64),
        request_count: 0,
        samples: 88,
        dataset_reused: true,
        input: "bench".into(),
        dataset_format: None,
        start_unix_s: 0.0,
        stopped_by: None,
        load: LoadMeta::default(),
        timeouts_s: Default::default(),
    }
}

fn slos() -> Vec<Slo> {
    vec![
        Slo {
            metric: SloMetric::TimeToFirstToken,
            threshold: 60.0,
        },
        Slo {
            metric: SloMetric::InterTokenLatency,
            threshold: 5.0,
        },
    ]
}

fn bench(c: &mut Criterion) {
    const BATCH: u64 = 1_000;
    const RUN: u64 = 20_000;
    let batch: Vec<RequestRecord> = (0..BATCH).map(record).collect();
    let run: Vec<RequestRecord> = (0..RUN).map(record).collect();

    let mut g = c.benchmark_group("aggregate");
    g.measurement_time(Duration::from_secs(4));
    g.throughput(Throughput::Elements(BATCH));
    g.bench_function("add_256tok_100chunks_x1000", |b| {
        // A fresh aggregator per batch, so value vectors grow as in a run's first 1000 records.
        b.iter_batched_ref(
            || Aggregate::with_goodput(slos()),
            |agg| {
                for r in &batch {
                    agg.add(r);
                }
            },
            BatchSize::LargeInput,
        )
    });
    let mut full = Aggregate::with_goodput(slos());
    for r in &run {
        full.add(r);
    }
    g.throughput(Throughput::Elements(RUN));
    g.sample_size(20);
    g.bench_function("summary_20000_records", |b| b.iter(|| full.summary(meta())));
    g.finish();
}

/// `VmRSS` and `VmHWM` of this process, in KiB.
fn rss_and_peak_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn summary_memory(n: u64) {
    let mut agg = Aggregate::new();
    for i in 0..n {
        let mut r = record(i);
        if i % 40 == 39 {
            r.outcome = Outcome::Failed(FailureKind::ConnectionClosed);
            r.error = Some("connection closed".into());
            r.first_token_ns = None;
            r.completion_tokens = None;
        }
        agg.add(&r);
    }
    // Peak RSS from here on (Linux: `5` resets VmHWM to the current RSS).
    std::fs::write("/proc/self/clear_refs", "5").expect("reset the peak RSS");
    let (before, _) = rss_and_peak_kib();
    let t = std::time::Instant::now();
    let summary = agg.summary(meta());
    let took = t.elapsed();
    let (after, peak) = rss_and_peak_kib();
    println!(
        "summary of {n} records: {:.0} ms; RSS before {} MiB, after {} MiB; peak {} MiB (+{} MiB); {} requests counted",
        took.as_secs_f64() * 1e3,
        before / 1024,
        after / 1024,
        peak / 1024,
        peak.saturating_sub(before) / 1024,
        summary.counts.total,
    );
}

criterion_group!(benches, bench);

fn main() {
    if let Ok(n) = std::env::var("SUMMARY_MEMORY") {
        let n = n
            .parse()
            .unwrap_or_else(|_| panic!("SUMMARY_MEMORY={n:?}: a number of records, e.g. 910000"));
        return summary_memory(n);
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
