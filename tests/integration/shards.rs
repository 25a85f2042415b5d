//! Sharded runs: three `--shard i/3` replays, merged, against one process replaying the same plan.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use specperf::Stat;

use crate::common::{fast, read_json, records, replay_at, sim};

fn ms(r: &Value, to: &str, from: &str) -> f64 {
    (r[to].as_u64().unwrap() - r[from].as_u64().unwrap()) as f64 / 1e6
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_shards_merged_equal_one_process_in_counts_tokens_and_percentiles() {
    // One fresh simulator per run: its per-request draws (accepted drafts per step) depend only on
    // the order requests reach it, so the same 60 requests make the same steps on each.
    let sharded = sim(fast());
    let single = sim(fast());
    let t = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = (0..3).map(|i| t.path().join(format!("shard{i}"))).collect();
    let at = |p: &Path| p.to_str().unwrap().to_owned();
    let flags = "--concurrency 6 --request-count 60 --osl 32";
    let arg = |i: usize| format!("{flags} --shard {i}/3");
    let (d0, d1, d2) = (at(&dirs[0]), at(&dirs[1]), at(&dirs[2]));
    let (a0, a1, a2) = (arg(0), arg(1), arg(2));
    let url = sharded.url();
    let (s0, s1, s2) = tokio::join!(
        replay_at(&url, &d0, &a0),
        replay_at(&url, &d1, &a1),
        replay_at(&url, &d2, &a2),
    );
    let one = replay_at(&single.url(), &at(&t.path().join("single")), flags).await;
    let shard_counts: Vec<u64> = [&s0, &s1, &s2]
        .iter()
        .map(|o| o.summary.counts.success)
        .collect();
    assert_eq!(shard_counts, [20, 20, 20], "ids ≡ i (mod 3) of 60");

    let merged = specperf::merge(&dirs, None).expect("shards merge");
    assert_eq!(merged.output, t.path().join("merged"));
    let (m, o) = (&merged.summary, &one.summary);

    // Counts and tokens: exactly the single process's.
    let counts = |s: &specperf::Summary| {
        let c = &s.counts;
        (c.total, c.success, c.failed, c.cancelled, c.warmup)
    };
    assert_eq!(counts(m), (60, 60, 0, 0, 0));
    assert_eq!(counts(m), counts(o));
    assert_eq!(m.total_completion_tokens, 60 * 32);
    assert_eq!(
        (
            m.total_prompt_tokens,
            m.total_completion_tokens,
            m.total_reasoning_tokens
        ),
        (
            o.total_prompt_tokens,
            o.total_completion_tokens,
            o.total_reasoning_tokens
        )
    );
    assert_eq!(m.tokens_counted_by, o.tokens_counted_by);
    assert_eq!(m.meta.request_count, o.meta.request_count);
    assert_eq!(m.meta.load.dispatch.issued, 60);
    assert_eq!(
        m.metrics.keys().collect::<Vec<_>>(),
        o.metrics.keys().collect::<Vec<_>>()
    );
    // Per-request values that do not depend on timing are identical, percentiles and all.
    for k in ["input_sequence_length", "output_sequence_length"] {
        assert_eq!(m.metrics[k], o.metrics[k], "{k}");
    }
    // Both simulators made the same steps, so both runs saw the same number of chunk gaps.
    assert_eq!(sharded.totals().drafts, single.totals().drafts);
    assert_eq!(
        m.metrics["inter_chunk_latency_ms"].count,
        o.metrics["inter_chunk_latency_ms"].count
    );

    // Latencies differ between runs, so the merged ones are checked against the shards' own
    // records: the union, recomputed here, gives exactly the merged statistics.
    let shard_records: Vec<Vec<Value>> = dirs.iter().map(|d| records(d)).collect();
    let union: Vec<&Value> = shard_records.iter().flatten().collect();
    assert_eq!(union.len(), 60);
    let ok: Vec<&&Value> = union
        .iter()
        .filter(|r| r["outcome"]["status"] == "success")
        .collect();
    let stat = |f: &dyn Fn(&Value) -> f64, rs: &[&&Value]| {
        Stat::of(&rs.iter().map(|r| f(r)).collect::<Vec<_>>()).unwrap()
    };
    let all: Vec<&&Value> = union.iter().collect();
    let want = [
        (
            "time_to_first_token_ms",
            stat(&|r| ms(r, "first_token_ns", "sent_ns"), &ok),
        ),
        (
            "request_latency_ms",
            stat(&|r| ms(r, "last_token_ns", "sent_ns"), &ok),
        ),
        (
            "time_to_second_token_ms",
            stat(&|r| ms(r, "second_token_ns", "first_token_ns"), &ok),
        ),
        (
            "dispatch_lag_ms",
            stat(&|r| ms(r, "sent_ns", "intended_ns"), &all),
        ),
    ];
    for (k, s) in want {
        assert_eq!(m.metrics[k], s, "{k}");
    }

    // Per-chunk gaps: the union of the shards' HDR buckets, at histogram precision.
    let mut gaps =
        hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
    for d in &dirs {
        let h = read_json(&d.join("histograms.json"));
        for b in h["inter_chunk_gap_ns"].as_array().unwrap() {
            gaps.record_n(b[0].as_u64().unwrap(), b[1].as_u64().unwrap())
                .unwrap();
        }
    }
    let chunk = &m.metrics["inter_chunk_latency_ms"];
    let shard_gap_counts: u64 = [&s0, &s1, &s2]
        .iter()
        .map(|o| o.summary.metrics["inter_chunk_latency_ms"].count)
        .sum();
    assert_eq!(
        (chunk.count, gaps.len()),
        (shard_gap_counts, shard_gap_counts)
    );
    for (k, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)] {
        assert_eq!(chunk.p(k), gaps.value_at_quantile(q) as f64 / 1e6, "{k}");
    }
    assert_eq!(chunk.max, gaps.max() as f64 / 1e6);

    // Throughput over the union window, the shards placed by their wall-clock starts.
    let starts: Vec<f64> = [&s0, &s1, &s2]
        .iter()
        .map(|o| o.summary.meta.start_unix_s)
        .collect();
    let base = starts.iter().copied().fold(f64::INFINITY, f64::min);
    let (mut first, mut last) = (f64::INFINITY, 0.0f64);
    for (recs, start) in shard_records.iter().zip(&starts) {
        for r in recs {
            let off = (start - base) * 1e9;
            first = first.min(r["sent_ns"].as_u64().unwrap() as f64 + off);
            last = last.max(r["end_ns"].as_u64().unwrap() as f64 + off);
        }
    }
    assert!((m.duration_s - (last - first) / 1e9).abs() < 1e-6);
    assert!((m.request_throughput_rps - 60.0 / m.duration_s).abs() < 1e-9);

    // Acceptance: the metrics shard's, as it wrote it; the others did not scrape.
    let shard_json: Vec<Value> = dirs
        .iter()
        .map(|d| read_json(&d.join("summary.json")))
        .collect();
    assert!(shard_json[0]["acceptance"].is_object());
    assert!(shard_json[1]["acceptance"].is_null() && shard_json[2]["acceptance"].is_null());
    let out = read_json(&merged.output.join("summary.json"));
    assert_eq!(out["acceptance"], shard_json[0]["acceptance"]);
    assert_eq!(out["meta"]["load"]["shard"]["count"], 1);
    assert_eq!(out["meta"]["load"]["shards_merged"], 3);
    assert!(merged
        .output
        .join("server_metrics/endpoint0_after.txt")
        .is_file());
    // The server-metrics export is the scraping shard's collection (a summary does not carry
    // it), not an export without families.
    let sm = read_json(&merged.output.join("server_metrics_export.json"));
    assert_eq!(sm, read_json(&dirs[0].join("server_metrics_export.json")));
    assert!(sm["metrics"]["vllm:spec_decode_num_drafts"].is_object());
    assert!(merged.output.join("server_metrics_export.csv").is_file());

    // The merged records: every request once, on the common clock.
    let mut ids: Vec<u64> = records(&merged.output)
        .iter()
        .map(|r| r["id"].as_u64().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..60).collect::<Vec<_>>());
    let console = std::fs::read_to_string(merged.output.join("console.txt")).unwrap();
    assert!(console.contains("60 ok"), "{console}");

    // The command line: the same merge, then a run with a shard missing (exit 2).
    let bin = env!("CARGO_BIN_EXE_specperf");
    let cli = Command::new(bin)
        .arg("merge")
        .args(&dirs)
        .arg("--output")
        .arg(t.path().join("cli"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&cli.stdout);
    assert_eq!(cli.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("60 ok") && stdout.contains("Artifacts:"),
        "{stdout}"
    );
    assert_eq!(
        read_json(&t.path().join("cli/summary.json"))["counts"],
        out["counts"]
    );
    let cli = Command::new(bin)
        .arg("merge")
        .args(&dirs[..2])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&cli.stderr);
    assert_eq!(cli.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("shard 2/3 of the run is missing"),
        "{stderr}"
    );
}
