//! Merge unit tests on hand-made shard directories.
use super::*;
use crate::metrics::{LoadMeta, RunMeta, TimeoutKind};
use crate::record::{ChunkGap, Outcome, RequestRecord, TokenSource};
use crate::schedule::{DispatchStats, Shard};
use crate::ExitStatus;
use std::collections::BTreeMap;

fn meta(index: u32, count: u32, start_unix_s: f64) -> RunMeta {
    RunMeta {
        url: "http://127.0.0.1:8000".into(),
        model: "m".into(),
        endpoint: "/v1/chat/completions".into(),
        endpoint_type: crate::render::EndpointType::Chat,
        osl: Some(8),
        cli_command: None,
        streaming: true,
        concurrency: Some(4),
        request_count: 2,
        samples: 10,
        dataset_reused: false,
        input: "bundled".into(),
        dataset_format: None,
        start_unix_s,
        stopped_by: None,
        load: LoadMeta {
            grace_period_s: Some(30.0),
            shard: Shard { index, count },
            dispatch: DispatchStats {
                issued: 1,
                ..DispatchStats::default()
            },
            ..LoadMeta::default()
        },
        timeouts_s: BTreeMap::from([(TimeoutKind::Connect, 30.0), (TimeoutKind::Request, 600.0)]),
    }
}

/// A successful 100 ms request with three 10 ms gaps of 2 tokens each.
fn record(id: u64, sent_ns: u64) -> RequestRecord {
    let mut r = RequestRecord::started(id, id as usize, sent_ns, sent_ns);
    r.outcome = Outcome::Success;
    r.first_token_ns = Some(sent_ns + 70_000_000);
    r.second_token_ns = Some(sent_ns + 80_000_000);
    r.last_token_ns = Some(sent_ns + 100_000_000);
    r.end_ns = sent_ns + 100_000_000;
    r.prompt_tokens = Some(5);
    r.completion_tokens = Some(7);
    r.token_source = TokenSource::UsageFinal;
    r.chunk_gaps = vec![
        ChunkGap {
            gap_ns: 10_000_000 + id,
            tokens: 2
        };
        3
    ];
    r
}

/// What a shard run leaves behind: records, histograms, summary.
fn write_shard(dir: &Path, meta: RunMeta, records: &[RequestRecord]) {
    std::fs::create_dir_all(dir).unwrap();
    let mut agg = Aggregate::new();
    let mut lines = String::new();
    for r in records {
        agg.add(r);
        lines += &serde_json::to_string(r).unwrap();
        lines.push('\n');
    }
    std::fs::write(dir.join("records.jsonl"), lines).unwrap();
    crate::report::write_histograms(dir, &agg.histograms()).unwrap();
    crate::report::write_artifacts(dir, &agg.summary(meta)).unwrap();
}

#[test]
fn merge_moves_records_onto_the_earliest_start_and_adds_histograms() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("s0"), t.path().join("s1"));
    // Shard 1 started 0.5 s after shard 0; its request 1 was sent 10 ms into its own run.
    write_shard(&a, meta(0, 2, 1000.0), &[record(0, 0), record(2, 0)]);
    write_shard(&b, meta(1, 2, 1000.5), &[record(1, 10_000_000)]);
    let m = merge(&[b.clone(), a.clone()], None).unwrap();
    assert_eq!(m.output, t.path().join("merged"));
    let s = &m.summary;
    assert_eq!((s.counts.total, s.counts.success), (3, 3));
    assert_eq!((s.total_prompt_tokens, s.total_completion_tokens), (15, 21));
    // Union window: 0 to 0.51 + 0.1 s.
    assert!((s.duration_s - 0.61).abs() < 1e-9, "{}", s.duration_s);
    assert_eq!(s.metrics["time_to_first_token_ms"].count, 3);
    assert_eq!(s.metrics["inter_chunk_latency_ms"].count, 9);
    assert_eq!(s.metrics["inter_token_latency_token_weighted_ms"].count, 18);
    assert_eq!(s.meta.load.shard, Shard::SINGLE);
    assert_eq!(s.meta.load.shards_merged, Some(2));
    assert_eq!((s.meta.request_count, s.meta.load.dispatch.issued), (4, 2));
    assert_eq!(s.meta.start_unix_s, 1000.0);
    let lines = std::fs::read_to_string(m.output.join("records.jsonl")).unwrap();
    let sent: Vec<(u64, u64)> = lines
        .lines()
        .map(|l| serde_json::from_str::<RequestRecord>(l).unwrap())
        .map(|r| (r.id, r.sent_ns))
        .collect();
    assert_eq!(sent, [(0, 0), (2, 0), (1, 510_000_000)]);
    assert!(m.output.join("summary.json").is_file() && m.output.join("console.txt").is_file());

    // The merged histograms are the union of the shards', bucket for bucket.
    let mut union = Aggregate::new();
    for r in [record(0, 0), record(2, 0), record(1, 0)] {
        union.add(&r);
    }
    let merged: Histograms =
        serde_json::from_slice(&std::fs::read(m.output.join("histograms.json")).unwrap()).unwrap();
    assert_eq!(merged, union.histograms());

    // A merged report is not a shard.
    let e = merge(
        std::slice::from_ref(&m.output),
        Some(&t.path().join("again")),
    )
    .unwrap_err();
    assert!(
        matches!(e, MergeError::AlreadyMerged { shards: 2, .. }),
        "{e}"
    );
    let e = merge(&[a.clone(), b.clone()], Some(&a)).unwrap_err();
    assert!(matches!(e, MergeError::OutputIsInput { .. }), "{e}");
}

#[test]
fn merge_rejects_a_missing_shard_or_mixed_runs() {
    let t = tempfile::tempdir().unwrap();
    let dir = |n: &str| t.path().join(n);
    write_shard(&dir("a0"), meta(0, 3, 1.0), &[record(0, 0)]);
    write_shard(&dir("a2"), meta(2, 3, 1.0), &[record(2, 0)]);
    let e = merge(&[dir("a0"), dir("a2")], None).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, MergeError::MissingShards { .. }), "{msg}");
    assert!(
        msg.contains("shard 1/3 of the run is missing") && msg.contains("a2"),
        "{msg}"
    );
    assert_eq!(e.exit_code(), crate::exit::USAGE);

    write_shard(&dir("b1"), meta(1, 2, 1.0), &[record(1, 0)]);
    let e = merge(&[dir("a0"), dir("b1")], None).unwrap_err();
    assert!(matches!(e, MergeError::MixedCounts { .. }), "{e}");
    assert!(e.to_string().contains("is shard 1/2 but"), "{e}");

    let e = merge(&[dir("a0"), dir("a0"), dir("a2")], None).unwrap_err();
    assert!(
        matches!(e, MergeError::DuplicateShard { index: 0, .. }),
        "{e}"
    );

    let mut other = meta(1, 3, 1.0);
    other.load.random_seed = 7;
    write_shard(&dir("c1"), other, &[record(1, 0)]);
    let e = merge(&[dir("a0"), dir("c1"), dir("a2")], None).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, MergeError::MixedRun { .. }), "{msg}");
    assert!(
        msg.contains("c1") && msg.contains("load.random_seed is 7 there and 0"),
        "{msg}"
    );

    // Right settings, but records another shard dispatched.
    write_shard(&dir("d1"), meta(1, 3, 1.0), &[record(2, 0)]);
    let e = merge(&[dir("a0"), dir("d1"), dir("a2")], None).unwrap_err();
    assert!(
        e.to_string().contains("request id 2 is not one shard 1/3"),
        "{e}"
    );

    // A shard that never finished has no summary.json.
    std::fs::create_dir_all(dir("e1")).unwrap();
    let e = merge(&[dir("a0"), dir("e1"), dir("a2")], None).unwrap_err();
    assert!(matches!(e, MergeError::Read { .. }), "{e}");
    assert!(e.to_string().contains("summary.json"), "{e}");
}

/// Probe: `merge` of two whole runs said "m2 and m1 are both shard 0/1 ... a rerun shard
/// replaces its first attempt", as if they were shards of one run.
#[test]
fn merge_of_whole_runs_says_they_are_not_shards() {
    let t = tempfile::tempdir().unwrap();
    let dir = |n: &str| t.path().join(n);
    write_shard(&dir("m1"), meta(0, 1, 1.0), &[record(0, 0)]);
    write_shard(&dir("m2"), meta(0, 1, 2.0), &[record(0, 0)]);
    let e = merge(&[dir("m1"), dir("m2")], None).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("not shards") && msg.contains("--shard i/N") && msg.contains("m2"),
        "{msg}"
    );
    assert_eq!(e.exit_code(), crate::exit::USAGE);
}
