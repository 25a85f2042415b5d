//! Acceptance per request and per category against the simulator, where the truth is known:
//! three prompt groups with their own acceptance probability, vLLM's per-request payload, the
//! stream estimate, and the counters of the same window.

use specperf::sim::{
    expected_al, AcceptanceGroup, MetricsFlavor, PerRequestSpec, SimConfig, SimHandle,
};

use crate::common::{fast, sim, Replay, Replayed};

/// (prompt marker, `category`, per-position acceptance probability), k = 3.
const GROUPS: [(&str, &str, f64); 3] = [
    ("[grp-easy]", "easy", 0.9),
    ("[grp-mid]", "mid", 0.6),
    ("[grp-hard]", "hard", 0.2),
];
const PER_GROUP: usize = 16;

/// A replay against `s`, with `flags`, of a single_turn collection: `PER_GROUP` rows per group,
/// the marker in the text and the group's name in a `category` field.
async fn replay_groups(s: &SimHandle, flags: &str) -> Replayed {
    let mut text = String::new();
    for i in 0..PER_GROUP {
        for (marker, name, _) in GROUPS {
            let row = serde_json::json!({
                "text": format!("{marker} question {i}: explain speculative decoding step {i}"),
                "category": name,
            });
            text.push_str(&row.to_string());
            text.push('\n');
        }
    }
    Replay::at(&s.url())
        .input_file("rows.jsonl", &text)
        .args("--custom-dataset-type single_turn")
        .args(flags)
        .run()
        .await
}

fn grouped_sim(extra: SimConfig) -> SimHandle {
    sim(SimConfig {
        k: 3,
        acceptance_groups: GROUPS
            .iter()
            .map(|(marker, _, p)| AcceptanceGroup {
                text: (*marker).to_owned(),
                probability: *p,
            })
            .collect(),
        ..extra
    })
}

/// Standard error of the mean acceptance length from a pooled histogram (index j = steps that
/// accepted exactly j drafts): sqrt(Var(a) / steps).
fn standard_error(hist: &[u64]) -> f64 {
    let steps: u64 = hist.iter().sum();
    let n = steps as f64;
    let mean = hist
        .iter()
        .enumerate()
        .map(|(j, h)| j as f64 * *h as f64)
        .sum::<f64>()
        / n;
    let sq = hist
        .iter()
        .enumerate()
        .map(|(j, h)| (j * j) as f64 * *h as f64)
        .sum::<f64>()
        / n;
    ((sq - mean * mean).max(0.0) / n).sqrt()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_category_acceptance_from_the_payload_is_the_simulators_truth() {
    let s = grouped_sim(SimConfig {
        per_request_spec: PerRequestSpec::Summary,
        ..fast()
    });
    let n = GROUPS.len() * PER_GROUP;
    let flags = format!(
        "--group-by category --request-count {n} --osl 96 --concurrency 6 --per-chunk-usage"
    );
    let Replayed { out, dir } = replay_groups(&s, &flags).await;
    let sum = &out.summary;
    assert_eq!(sum.counts.success, n as u64);
    let spec = sum.spec_decode.as_ref().expect("spec_decode section");
    assert_eq!(spec.group_field.as_deref(), Some("category"));
    assert_eq!(spec.malformed, 0);
    let truth = s.group_totals();
    for (marker, name, p) in GROUPS {
        let t = truth
            .iter()
            .find(|t| t.group == marker)
            .unwrap_or_else(|| panic!("truth for {marker}: {truth:?}"));
        let g = &spec.by_group[name];
        assert_eq!(g.requests, PER_GROUP as u64, "{name}");
        let r = g.reported.as_ref().expect("payload figures");
        // From the payload: exactly the simulator's own counts for the group.
        assert_eq!(
            (r.steps, r.accepted_tokens, r.draft_tokens),
            (t.drafts, t.accepted, t.draft_tokens),
            "{name}"
        );
        assert_eq!(
            r.token_weighted_acceptance_length,
            t.acceptance_length(),
            "{name}"
        );
        let al = t.acceptance_length().unwrap();
        let se = standard_error(&r.histogram);
        // The group's truth is its configured probability's expectation, within sampling error.
        assert!(
            (al - expected_al(p, 3)).abs() <= 4.0 * se + 1e-9,
            "{name}: AL {al} vs expected {} (SE {se})",
            expected_al(p, 3)
        );
        // The stream estimate (decode tokens / decode events) is within sampling error too.
        let est = g
            .stream_estimate
            .as_ref()
            .and_then(|e| e.token_weighted_acceptance_length)
            .expect("stream estimate");
        assert!(
            (est - al).abs() <= 3.0 * se + 1e-9,
            "{name}: estimate {est} vs truth {al} (SE {se})"
        );
        // Per-position rates from the pooled histogram fall with the position.
        let pos = &r.per_position_acceptance_rates;
        assert_eq!(pos.len(), 3, "{name}");
        assert!(pos.windows(2).all(|w| w[0] >= w[1]), "{name}: {pos:?}");
    }
    // The groups order as their probabilities do.
    let al = |name: &str| {
        spec.by_group[name]
            .reported
            .as_ref()
            .unwrap()
            .token_weighted_acceptance_length
            .unwrap()
    };
    assert!(al("easy") > al("mid") && al("mid") > al("hard"));
    // The run's token-weighted AL from the payloads is the counters' AL of the same window.
    let counters = sum
        .acceptance
        .as_ref()
        .and_then(|a| a.acceptance.numbers.acceptance_length)
        .expect("counter AL");
    let r = spec.reported.as_ref().unwrap();
    assert_eq!(r.token_weighted_acceptance_length, Some(counters));
    let vs = r.vs_counters.as_ref().unwrap();
    assert!(vs.reliable && vs.difference_pct == 0.0, "{vs:?}");
    let e = spec
        .stream_estimate
        .as_ref()
        .unwrap()
        .vs_counters
        .as_ref()
        .unwrap();
    assert!(e.reliable, "{e:?}");
    // Per request: the six AIPerf tags and the acceptance record in profile_export.jsonl.
    for line in dir.profile_export() {
        let m = &line["metrics"];
        for tag in [
            "spec_decode_acceptance_length",
            "spec_decode_draft_acceptance_rate",
            "spec_decode_accepted_per_verified",
            "spec_decode_steps",
            "spec_decode_accepted_draft_tokens",
            "spec_decode_draft_tokens",
        ] {
            assert!(m[tag]["value"].is_number(), "{tag} in {m}");
        }
        let acc = &line["spec_decode_acceptance"];
        assert_eq!(acc["engine"], "vllm", "{line}");
        assert_eq!(
            m["spec_decode_steps"]["value"], acc["num_spec_steps"],
            "{line}"
        );
    }
    // summary.json keeps to its schema with the new section.
    let summary = dir.summary();
    assert!(summary["spec_decode"]["by_group"]["easy"].is_object());
    let errors = crate::common::schema_errors("summary.v1.json", &summary);
    assert!(errors.is_empty(), "{errors:#?}");
    // And in records.jsonl, with the group.
    let recs = dir.records();
    assert!(recs
        .iter()
        .all(|r| r["spec"]["source"] == "vllm" && r["group"].is_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_splits_steps_is_marked_unreliable_against_the_counters() {
    // One event per token, as a proxy re-chunking the stream would send: decode tokens over
    // decode events is 1, far from the counters' AL, and the run says so.
    let s = grouped_sim(SimConfig {
        split_steps: true,
        ..fast()
    });
    let flags = "--request-count 12 --osl 48 --concurrency 4 --per-chunk-usage";
    let out = replay_groups(&s, flags).await.out;
    let spec = out
        .summary
        .spec_decode
        .as_ref()
        .expect("section kept: the counters drafted");
    assert!(spec.reported.is_none(), "no payload without the flag");
    let e = spec.stream_estimate.as_ref().unwrap();
    assert_eq!(e.token_weighted_acceptance_length, Some(1.0));
    let vs = e.vs_counters.as_ref().unwrap();
    assert!(!vs.reliable && vs.difference_pct < -2.0, "{vs:?}");
    assert!(
        out.summary
            .warnings
            .iter()
            .any(|w| w.contains("stream estimate") && w.contains("unreliable")),
        "{:?}",
        out.summary.warnings
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llama_cpp_timings_sum_to_its_counters_without_a_made_up_al() {
    let s = grouped_sim(SimConfig {
        metrics_flavor: MetricsFlavor::Llamacpp,
        ..fast()
    });
    for streaming in [true, false] {
        let flags = format!("--request-count 9 --osl 40 --concurrency 3 --streaming {streaming}");
        let out = replay_groups(&s, &flags).await.out;
        assert_eq!(out.summary.counts.success, 9);
        let a = &out.summary.acceptance.as_ref().unwrap().acceptance.numbers;
        let spec = out.summary.spec_decode.as_ref().unwrap();
        let r = spec.reported.as_ref().expect("timings");
        assert_eq!(r.requests, 9);
        assert_eq!(
            Some(r.draft_tokens as f64),
            a.draft_tokens,
            "streaming {streaming}"
        );
        assert_eq!(
            r.accepted_tokens as f64, a.accepted_tokens,
            "streaming {streaming}"
        );
        assert_eq!(
            r.acceptance_rate, a.acceptance_rate,
            "streaming {streaming}"
        );
        assert_eq!((r.steps, r.token_weighted_acceptance_length), (0, None));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sglang_spec_tokens_details_are_read_when_the_request_asks_for_them() {
    // SGLang answers `return_spec_tokens_details` with `sglext.spec_tokens_details`; its steps
    // and correct drafts add up to the counters, and its own accept length (completion tokens
    // over verify steps, the prefill token included) is kept apart as the server's figure.
    let s = grouped_sim(fast());
    for streaming in [true, false] {
        let flags = format!(
            "--group-by category --request-count 9 --osl 40 --concurrency 3 \
             --streaming {streaming} --extra-inputs return_spec_tokens_details:true"
        );
        let out = replay_groups(&s, &flags).await.out;
        assert_eq!(out.summary.counts.success, 9);
        let a = &out.summary.acceptance.as_ref().unwrap().acceptance.numbers;
        let spec = out.summary.spec_decode.as_ref().unwrap();
        assert_eq!(
            spec.requests_by_source.len(),
            1,
            "{:?}",
            spec.requests_by_source
        );
        let r = spec.reported.as_ref().expect("sglext figures");
        assert_eq!(r.requests, 9);
        assert_eq!(
            (r.steps as f64, r.accepted_tokens as f64),
            (a.drafts, a.accepted_tokens),
            "streaming {streaming}"
        );
        assert_eq!(r.token_weighted_acceptance_length, a.acceptance_length);
        let server = r.server_reported_acceptance_length.as_ref().unwrap();
        let ours = r.acceptance_length.as_ref().unwrap();
        assert!(
            server.avg > ours.avg,
            "the prefill token makes SGLang's figure larger"
        );
        assert_eq!(spec.by_group.len(), 3);
    }
}
