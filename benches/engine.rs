//! Criterion bench of the whole replay engine on loopback.
//!
//! An in-process simulator (its own thread and one-worker runtime, as in tests) serves zero-delay
//! 256-token streams; each iteration replays 2000 requests at concurrency 64 against it through
//! the public API exactly as `specperf replay --url …` would (readiness probe, model discovery,
//! rendering, scheduling, the HTTP client, SSE parsing, metrics, `records.jsonl`, `summary.json`).
//! Throughput is reported in elements = requests, so criterion prints requests/s. Client and
//! simulator share the machine, so this measures the pair, not the client alone.
#![allow(missing_docs)]

use std::time::Duration;

use clap::Parser;
use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use specperf::sim::{SimConfig, Simulator};
use specperf::{Cli, Command, Progress, RunConfig, Stopper};
use tokio::sync::watch;

const REQUESTS: u64 = 2000;

fn run_config(url: &str, artifact_dir: &str) -> RunConfig {
    let requests = REQUESTS.to_string();
    let cli = Cli::try_parse_from([
        "specperf",
        "replay",
        "--url",
        url,
        "--concurrency",
        "64",
        "--request-count",
        &requests,
        "--osl",
        "256",
        "--artifact-dir",
        artifact_dir,
        "--progress-interval",
        "0",
        // The simulator's counters are exact at once; no settle wait inside the measurement.
        "--metrics-settle-seconds",
        "0",
    ])
    .expect("flags parse");
    let Command::Replay(args) = cli.command else {
        panic!("expected the replay subcommand");
    };
    RunConfig::from_args(&args).expect("valid config")
}

fn bench(c: &mut Criterion) {
    let sim = Simulator::spawn(SimConfig {
        ttft: Duration::ZERO,
        itl: Duration::ZERO,
        default_max_tokens: 256,
        ..Default::default()
    })
    .expect("simulator starts");
    let url = sim.url();
    let tmp = tempfile::tempdir().expect("tempdir");
    let cfg = run_config(&url, tmp.path().to_str().expect("utf-8 temp path"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");

    let run = || {
        let outcome = rt
            .block_on(specperf::replay(
                cfg.clone(),
                Stopper::new(),
                watch::channel(Progress::default()).0,
            ))
            .expect("replay runs");
        let counts = &outcome.summary.counts;
        assert_eq!(
            counts.success, REQUESTS,
            "not every request succeeded: {counts:?}"
        );
        assert!(
            outcome.artifact_error.is_none(),
            "{:?}",
            outcome.artifact_error
        );
        assert_eq!(outcome.summary.total_completion_tokens, REQUESTS * 256);
        outcome
    };

    let mut g = c.benchmark_group("engine");
    // One replay is a second or more: flat sampling keeps it to ~10 replays plus warm-up.
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(5));
    g.throughput(Throughput::Elements(REQUESTS));
    g.bench_function("replay_2000x256_c64_loopback", |b| b.iter(run));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
