use super::*;
use crate::scrape::prom::{parse, Format};
use crate::scrape::ScrapeError;

fn fixture(name: &str) -> String {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/prometheus");
    std::fs::read_to_string(dir.join(name)).unwrap()
}

fn snap_text(text: &str) -> Snapshot {
    let format = if text.contains("# EOF") {
        Format::OpenMetrics
    } else {
        Format::Text
    };
    Snapshot::from_page(&parse(text, format).unwrap())
}

fn snap(name: &str) -> Snapshot {
    snap_text(&fixture(name))
}

fn window(url: &str, before: Snapshot, after: Snapshot) -> EndpointWindow {
    EndpointWindow {
        url: url.into(),
        before: Ok(before),
        after: Ok(after),
        iterations: None,
    }
}

fn eval(windows: &[EndpointWindow], k: Option<u32>) -> Acceptance {
    evaluate(
        windows,
        AcceptanceOptions {
            engine: SpecEngine::Auto,
            num_spec_tokens: k,
        },
    )
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

#[test]
fn vllm_pair_sums_series_then_divides() {
    let a = eval(
        &[window(
            "http://h:8000/metrics",
            snap("vllm_2engines_before.prom"),
            snap("vllm_2engines_after.prom"),
        )],
        None,
    );
    assert_eq!(a.status, AcceptanceStatus::Ok, "{:?}", a.reason);
    assert_eq!(a.engine, SpecEngine::Vllm);
    assert_eq!(a.metric_source, "vllm-prometheus-counters-endpoints1");
    let n = &a.numbers;
    assert_eq!((n.drafts, n.accepted_tokens), (93_600.0, 139_464.0));
    assert_eq!(n.draft_tokens, Some(280_800.0));
    assert!(close(n.acceptance_length.unwrap(), 2.49, 1e-12));
    assert!(close(
        n.acceptance_rate.unwrap(),
        139_464.0 / 280_800.0,
        1e-12
    ));
    let want = [0.735363, 0.481624, 0.273013];
    for (p, w) in n.per_position_acceptance.iter().zip(want) {
        assert!(close(*p, w, 5e-7), "{p} vs {w}");
    }
    assert_eq!(a.num_speculative_tokens, Some(3));
    assert_eq!(a.num_speculative_tokens_from, Some(KSource::Positions));
    assert!(a.resets.is_empty() && a.warnings.is_empty() && !a.partial);
    let per_engine: Vec<f64> = a
        .engines
        .iter()
        .map(|e| e.numbers.acceptance_length.unwrap())
        .collect();
    assert!(close(per_engine[0], 2.492083, 5e-7) && close(per_engine[1], 2.487807, 5e-7));
    assert_eq!(a.endpoints.len(), 1);
    assert!(close(
        a.conditional_acceptance[1],
        0.481624 / 0.735363,
        1e-5
    ));
}

#[test]
fn after_page_alone_is_not_the_window() {
    let a = eval(
        &[window(
            "u",
            Snapshot::default(),
            snap("vllm_2engines_after.prom"),
        )],
        None,
    );
    assert!(close(a.numbers.acceptance_length.unwrap(), 2.488015, 5e-7));
    assert!(a.resets.iter().all(|r| r.kind == ResetKind::Appeared) && !a.resets.is_empty());
}

#[test]
fn openmetrics_pages_and_underscored_names_give_the_same_al() {
    let before = snap("vllm_2engines_before.openmetrics.txt");
    let a = eval(
        &[window(
            "u",
            before.clone(),
            snap("vllm_2engines_after.openmetrics.txt"),
        )],
        None,
    );
    assert!(close(a.numbers.acceptance_length.unwrap(), 2.49, 1e-12));
    assert!(!a.name_normalised);
    let b = eval(
        &[window(
            "u",
            before,
            snap("vllm_2engines_after.openmetrics-underscores.txt"),
        )],
        None,
    );
    assert!(close(b.numbers.acceptance_length.unwrap(), 2.49, 1e-12));
    assert!(b.name_normalised && b.resets.is_empty());
}

#[test]
fn restart_mid_window_uses_increase_semantics_and_is_flagged() {
    let a = eval(
        &[window(
            "u",
            snap("vllm_2engines_before.prom"),
            snap("vllm_2engines_after_restart.prom"),
        )],
        None,
    );
    assert_eq!(a.status, AcceptanceStatus::Ok);
    assert_eq!(a.numbers.drafts, 48_900.0);
    assert_eq!(a.numbers.accepted_tokens, 72_880.0);
    assert!(close(a.numbers.acceptance_length.unwrap(), 2.490389, 5e-7));
    assert!(a.resets.iter().any(|r| r.kind == ResetKind::Decreased));
    assert!(a.resets.iter().all(|r| r.series.contains("engine=\"1\"")));
}

#[test]
fn created_change_alone_is_a_reset() {
    let before = "# TYPE vllm:spec_decode_num_drafts counter\n\
        vllm:spec_decode_num_drafts_total{engine=\"0\"} 10\n\
        vllm:spec_decode_num_drafts_created{engine=\"0\"} 1.0e9\n\
        vllm:spec_decode_num_accepted_tokens_total{engine=\"0\"} 10\n";
    let after = "vllm:spec_decode_num_drafts_total{engine=\"0\"} 30\n\
        vllm:spec_decode_num_drafts_created{engine=\"0\"} 2.0e9\n\
        vllm:spec_decode_num_accepted_tokens_total{engine=\"0\"} 40\n";
    let a = eval(&[window("u", snap_text(before), snap_text(after))], None);
    assert_eq!(a.resets.len(), 1);
    assert_eq!(a.resets[0].kind, ResetKind::CreatedChanged);
    // drafts restart from 0 -> 30; accepted 10 -> 40 is a plain increase of 30.
    assert_eq!((a.numbers.drafts, a.numbers.accepted_tokens), (30.0, 30.0));
}

#[test]
fn sglang_exact_uncorrected_and_gauge_only() {
    let (b, af) = (fixture("sglang_before.prom"), fixture("sglang_after.prom"));
    let a = eval(&[window("u", snap_text(&b), snap_text(&af))], Some(3));
    assert_eq!(a.engine, SpecEngine::Sglang);
    assert!(close(a.numbers.acceptance_length.unwrap(), 2.49, 1e-12));
    assert_eq!(a.numbers.accepted_tokens, 77_480.0);
    assert_eq!(a.numbers.draft_tokens, Some(156_000.0));
    assert!(close(a.numbers.acceptance_rate.unwrap(), 0.496667, 5e-7));
    assert_eq!(
        a.metric_source,
        "sglang-prometheus-generation-counter+verify-counter+requests-counter-endpoints1"
    );
    let drop = |t: &str, name: &str| -> String {
        t.lines()
            .filter(|l| !l.starts_with(name))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    let m1 = eval(
        &[window(
            "u",
            snap_text(&drop(&b, "sglang:num_requests_total")),
            snap_text(&drop(&af, "sglang:num_requests_total")),
        )],
        Some(3),
    );
    assert!(close(m1.numbers.acceptance_length.unwrap(), 2.491538, 5e-7));
    assert!(m1.metric_source.ends_with("-uncorrected"));
    let gauges = eval(
        &[window(
            "u",
            snap_text(&drop(&b, "sglang:spec_verify_calls_total")),
            snap_text(&drop(&af, "sglang:spec_verify_calls_total")),
        )],
        None,
    );
    assert!(gauges.approximate);
    assert!(close(
        gauges.numbers.acceptance_length.unwrap(),
        2.49,
        1e-12
    ));
    // Without speculative counters or gauges, SGLang's generation counter alone is no AL.
    let plain = drop(
        &drop(&af, "sglang:spec_verify_calls_total"),
        "sglang:spec_accept",
    );
    let none = eval(&[window("u", snap_text(&plain), snap_text(&plain))], None);
    assert_eq!(none.status, AcceptanceStatus::NoCounters);
}

#[test]
fn trtllm_prometheus_per_position_then_fixed_k_never_the_gauge() {
    let page = fixture("trtllm_prometheus.prom");
    let a = eval(&[window("u", Snapshot::default(), snap_text(&page))], None);
    assert_eq!(a.engine, SpecEngine::Trtllm);
    assert!(close(a.numbers.acceptance_length.unwrap(), 2.49, 1e-12));
    assert!(close(a.numbers.acceptance_rate.unwrap(), 0.496667, 5e-7));
    assert!(!a.approximate);
    let no_pos: String = page
        .lines()
        .filter(|l| !l.contains("token_position"))
        .map(|l| format!("{l}\n"))
        .collect();
    let fixed = eval(
        &[window("u", Snapshot::default(), snap_text(&no_pos))],
        Some(3),
    );
    assert!(close(fixed.numbers.acceptance_length.unwrap(), 2.49, 1e-12));
    assert!(fixed.metric_source.ends_with("-fixed-k"));
    // Without k the counters cannot give an AL; the last-iteration gauge is shown, flagged.
    let gauge = eval(
        &[window("u", Snapshot::default(), snap_text(&no_pos))],
        None,
    );
    assert!(gauge.approximate);
    assert_eq!(gauge.numbers.acceptance_length, Some(2.25));
}

#[test]
fn trtllm_json_iteration_stats_weight_by_requests() {
    let mut it = IterationTotals::default();
    let n = it
        .add_page(fixture("trtllm_iteration_stats.json").as_bytes())
        .unwrap();
    assert_eq!(n, 6);
    assert_eq!(it.entries, 4);
    assert_eq!(
        (it.accepted, it.requests_with_draft, it.draft_tokens),
        (52.0, 31.0, 93.0)
    );
    let w = EndpointWindow {
        url: "http://t:8000/metrics".into(),
        before: Ok(Snapshot::default()),
        after: Ok(Snapshot::default()),
        iterations: Some(it),
    };
    let a = eval(&[w], Some(3));
    assert_eq!(a.engine, SpecEngine::Trtllm);
    assert!(close(
        a.numbers.acceptance_length.unwrap(),
        83.0 / 31.0,
        1e-12
    ));
    assert!(close(
        a.numbers.acceptance_rate.unwrap(),
        52.0 / 93.0,
        1e-12
    ));
    assert_eq!(a.metric_source, "trtllm-json-iteration-stats-endpoints1");
    // Entries as JSON strings, snake_case and null stats are tolerated.
    let mut s = IterationTotals::default();
    s.add_page(
        br#"["{\"spec_decoding_stats\":{\"num_draft_tokens\":6,\"num_accepted_tokens\":4,\"num_requests_with_draft_tokens\":2}}", {"specDecodingStats": null}]"#,
    )
    .unwrap();
    assert_eq!((s.entries, s.accepted), (1, 4.0));
    assert!(s.add_page(b"{}").is_err());
}

#[test]
fn dynamo_worker_page_mixed_formatting() {
    let a = eval(
        &[window(
            "u",
            Snapshot::default(),
            snap("dynamo_vllm_decode_worker.prom"),
        )],
        None,
    );
    assert!(close(a.numbers.acceptance_length.unwrap(), 2.27, 1e-12));
    assert!(close(a.numbers.acceptance_rate.unwrap(), 0.635, 1e-12));
    assert_eq!(a.num_speculative_tokens, Some(2));
    let p = &a.numbers.per_position_acceptance;
    assert!(close(p[0], 0.74, 1e-12) && close(p[1], 0.53, 1e-12));
}

#[test]
fn atom_steps_histogram() {
    let before = "atom:mtp_accepted_tokens_total 0\natom:mtp_draft_tokens_total 0\n\
        atom:mtp_decode_steps_total{accepted_tokens=\"2\"} 0\n\
        atom:mtp_decode_steps_total{accepted_tokens=\"3\"} 0\n";
    let after = format!(
        "atom:mtp_accepted_tokens_total {}\natom:mtp_draft_tokens_total 600000\n\
         atom:mtp_decode_steps_total{{accepted_tokens=\"2\"}} 46020\n\
         atom:mtp_decode_steps_total{{accepted_tokens=\"3\"}} 153980\n",
        2 * 46020 + 3 * 153980
    );
    let a = eval(&[window("u", snap_text(before), snap_text(&after))], None);
    assert_eq!(a.engine, SpecEngine::Atom);
    assert!(close(a.numbers.acceptance_length.unwrap(), 3.7699, 5e-5));
    let bad = after.replace(&format!("total {}", 2 * 46020 + 3 * 153980), "total 1");
    let e = eval(&[window("u", snap_text(before), snap_text(&bad))], None);
    assert_eq!(e.status, AcceptanceStatus::Invalid);
}

#[test]
fn endpoints_sum_by_url_and_a_failed_one_makes_the_total_partial() {
    let (b, a) = (
        snap("vllm_2engines_before.prom"),
        snap("vllm_2engines_after.prom"),
    );
    let two = eval(
        &[
            window("http://a/metrics", b.clone(), a.clone()),
            window("http://b/metrics", b.clone(), a.clone()),
        ],
        None,
    );
    // Same labels on two servers are two series: the drafts double, the AL does not move.
    assert_eq!(two.numbers.drafts, 2.0 * 93_600.0);
    assert!(close(two.numbers.acceptance_length.unwrap(), 2.49, 1e-12));
    assert_eq!(two.metric_source, "vllm-prometheus-counters-endpoints2");
    assert_eq!(two.engines.len(), 4);
    let down = EndpointWindow {
        url: "http://c/metrics".into(),
        before: Ok(b.clone()),
        after: Err(ScrapeError::Fetch("no answer within 10s".into())),
        iterations: None,
    };
    let p = eval(&[window("http://a/metrics", b, a), down], None);
    assert!(p.partial);
    assert_eq!(p.numbers.drafts, 93_600.0);
    assert_eq!(p.endpoints.iter().filter(|e| e.error.is_some()).count(), 1);
    let none = eval(
        &[EndpointWindow {
            url: "x".into(),
            before: Err(ScrapeError::Fetch("refused".into())),
            after: Err(ScrapeError::Fetch("refused".into())),
            iterations: None,
        }],
        None,
    );
    assert_eq!(none.status, AcceptanceStatus::Unavailable);
}

#[test]
fn validation_rejects_impossible_deltas_and_idle_windows() {
    let page = |d: u64, a: u64, t: u64| {
        snap_text(&format!(
            "vllm:spec_decode_num_drafts_total {d}\n\
             vllm:spec_decode_num_accepted_tokens_total {a}\n\
             vllm:spec_decode_num_draft_tokens_total {t}\n"
        ))
    };
    let zero = page(0, 0, 0);
    let idle = eval(&[window("u", zero.clone(), page(5, 5, 15))], Some(3));
    assert_eq!(idle.status, AcceptanceStatus::Ok);
    let same = eval(&[window("u", page(5, 5, 15), page(5, 5, 15))], Some(3));
    assert_eq!(same.status, AcceptanceStatus::NoData);
    let over_k = eval(&[window("u", zero.clone(), page(10, 40, 30))], Some(3));
    assert_eq!(over_k.status, AcceptanceStatus::Invalid);
    assert!(over_k.reason.unwrap().contains("exceed k"));
    let over_tokens = eval(&[window("u", zero.clone(), page(10, 25, 20))], Some(3));
    assert!(over_tokens.reason.unwrap().contains("exceed draft tokens"));
    let mixed = eval(
        &[window(
            "u",
            zero,
            snap_text("vllm:spec_decode_num_drafts_total 1\nsglang:spec_verify_calls_total 1\n"),
        )],
        None,
    );
    assert!(mixed.reason.unwrap().contains("mix engines"));
}

fn llamacpp_page(drafts: u64, draft_tokens: u64, accepted: u64, per_pos: [u64; 3]) -> String {
    // llama-server's `--metrics` page: vLLM's counter shape under `llamacpp:`, no labels but the
    // position.
    let mut t = format!(
        "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.\n\
         # TYPE llamacpp:prompt_tokens_total counter\n\
         llamacpp:prompt_tokens_total 120\n\
         # TYPE llamacpp:spec_decode_num_drafts_total counter\n\
         llamacpp:spec_decode_num_drafts_total {drafts}\n\
         # TYPE llamacpp:spec_decode_num_draft_tokens_total counter\n\
         llamacpp:spec_decode_num_draft_tokens_total {draft_tokens}\n\
         # TYPE llamacpp:spec_decode_num_accepted_tokens_total counter\n\
         llamacpp:spec_decode_num_accepted_tokens_total {accepted}\n\
         # TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter\n"
    );
    for (i, v) in per_pos.iter().enumerate() {
        t.push_str(&format!(
            "llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position=\"{i}\"}} {v}\n"
        ));
    }
    t
}

#[test]
fn llamacpp_counters_are_read_like_vllms() {
    let before = snap_text(&llamacpp_page(10, 30, 12, [7, 4, 1]));
    let after = snap_text(&llamacpp_page(50, 150, 72, [37, 24, 11]));
    let a = eval(
        &[window("http://127.0.0.1:8080/metrics", before, after)],
        None,
    );
    assert_eq!(a.status, AcceptanceStatus::Ok, "{:?}", a.reason);
    assert_eq!(a.engine, SpecEngine::Llamacpp);
    assert_eq!(a.metric_source, "llamacpp-prometheus-counters-endpoints1");
    let n = &a.numbers;
    assert_eq!(
        (n.drafts, n.accepted_tokens, n.draft_tokens),
        (40.0, 60.0, Some(120.0))
    );
    assert_eq!(n.acceptance_length, Some(2.5));
    assert_eq!(n.acceptance_rate, Some(0.5));
    assert_eq!(n.per_position_acceptance, vec![0.75, 0.5, 0.25]);
    assert_eq!(a.num_speculative_tokens, Some(3));
}

#[test]
fn llamacpp_before_any_finished_request_says_it_is_waiting() {
    // llama-server adds to the counters when a request finishes: an unchanged page is expected.
    let page = llamacpp_page(0, 0, 0, [0, 0, 0]);
    let a = evaluate(
        &[window(
            "http://h/metrics",
            snap_text(&page),
            snap_text(&page),
        )],
        AcceptanceOptions {
            engine: SpecEngine::Llamacpp,
            num_spec_tokens: None,
        },
    );
    assert_eq!(a.status, AcceptanceStatus::NoData);
    assert!(
        a.reason
            .as_deref()
            .unwrap()
            .contains("waiting for the first finished request"),
        "{:?}",
        a.reason
    );
}

#[test]
fn llamacpp_positions_written_on_first_use_are_not_resets() {
    // A fresh llama-server has no per-position lines until a draft was accepted there.
    let fresh: String = llamacpp_page(0, 0, 0, [0, 0, 0])
        .lines()
        .filter(|l| !l.contains("position="))
        .map(|l| format!("{l}\n"))
        .collect();
    let a = eval(
        &[window(
            "http://h/metrics",
            snap_text(&fresh),
            snap_text(&llamacpp_page(40, 120, 60, [30, 20, 10])),
        )],
        None,
    );
    assert_eq!(a.status, AcceptanceStatus::Ok, "{:?}", a.reason);
    assert!(a.resets.is_empty(), "{:?}", a.resets);
    assert_eq!(a.numbers.per_position_acceptance, vec![0.75, 0.5, 0.25]);
    // A total that goes down is still a reset.
    let a = eval(
        &[window(
            "http://h/metrics",
            snap_text(&llamacpp_page(50, 150, 72, [37, 24, 11])),
            snap_text(&llamacpp_page(40, 120, 60, [30, 20, 10])),
        )],
        None,
    );
    assert!(a.resets.iter().any(|r| r.kind == ResetKind::Decreased));
}

fn eval_as(engine: SpecEngine, page: &str, k: Option<u32>) -> Acceptance {
    evaluate(
        &[window("u", Snapshot::default(), snap_text(page))],
        AcceptanceOptions {
            engine,
            num_spec_tokens: k,
        },
    )
}

fn without(page: &str, names: &[&str]) -> String {
    page.lines()
        .filter(|l| !names.iter().any(|n| l.contains(n)))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn vllm_fixed_k_fallback_names_what_is_missing_not_a_given_flag() {
    let page = fixture("vllm_2engines_after.prom");
    let drafts = "vllm:spec_decode_num_drafts_total";
    let tokens = "vllm:spec_decode_num_draft_tokens_total";
    let per_pos = "vllm:spec_decode_num_accepted_tokens_per_pos";
    // k given, both the drafts and the draft-tokens counters absent: the flag is not the fix.
    let bare = without(&page, &[drafts, tokens, per_pos]);
    let a = eval_as(SpecEngine::Vllm, &bare, Some(4));
    let reason = a.reason.unwrap();
    assert_eq!(a.status, AcceptanceStatus::Invalid, "{reason}");
    assert!(
        reason.contains(drafts) && reason.contains(tokens),
        "{reason}"
    );
    assert!(reason.contains("k = 4"), "{reason}");
    assert!(!reason.contains("--num-spec-tokens"), "{reason}");
    // k not given, draft tokens present: k is all that is missing.
    let a = eval_as(SpecEngine::Vllm, &without(&page, &[drafts, per_pos]), None);
    let reason = a.reason.unwrap();
    assert!(
        reason.contains(drafts) && reason.contains("--num-spec-tokens"),
        "{reason}"
    );
    assert!(!reason.contains(tokens), "{reason}");
    // k not given, both counters absent: both are named, and so is the flag.
    let a = eval_as(SpecEngine::Vllm, &bare, None);
    let reason = a.reason.unwrap();
    assert!(
        reason.contains(drafts) && reason.contains(tokens),
        "{reason}"
    );
    assert!(reason.contains("--num-spec-tokens"), "{reason}");
}

#[test]
fn trtllm_fixed_k_fallback_names_what_is_missing_not_a_given_flag() {
    let page = fixture("trtllm_prometheus.prom");
    let gauge = "spec_decode_acceptance_length";
    let positions = "token_position";
    let tokens = "spec_decode_num_draft_tokens_total";
    // k given, no per-position counters and no draft-tokens counter.
    let a = eval_as(
        SpecEngine::Trtllm,
        &without(&page, &[gauge, positions, tokens]),
        Some(3),
    );
    let reason = a.reason.unwrap();
    assert_eq!(a.status, AcceptanceStatus::Invalid, "{reason}");
    assert!(
        reason.contains("trtllm_spec_decode_drafted_tokens_total"),
        "{reason}"
    );
    assert!(
        reason.contains("trtllm_spec_decode_num_draft_tokens_total"),
        "{reason}"
    );
    assert!(reason.contains("k = 3"), "{reason}");
    assert!(!reason.contains("--num-spec-tokens"), "{reason}");
    // k not given, the fallback's counters present: only the flag is missing.
    let a = eval_as(
        SpecEngine::Trtllm,
        &without(&page, &[gauge, positions]),
        None,
    );
    let reason = a.reason.unwrap();
    assert!(reason.contains("--num-spec-tokens"), "{reason}");
    assert!(!reason.contains("num_draft_tokens"), "{reason}");
    assert!(!reason.contains("num_accepted_tokens"), "{reason}");
}

#[test]
fn no_readable_endpoint_names_each_one_and_its_error() {
    let w = |url: &str, e: &str| EndpointWindow {
        url: url.into(),
        before: Err(ScrapeError::Fetch(e.into())),
        after: Err(ScrapeError::NotScraped),
        iterations: None,
    };
    let a = eval(
        &[
            w("http://a:1/metrics", "Connection refused"),
            w("http://b:2/metrics", "no answer within 5 s"),
        ],
        None,
    );
    assert_eq!(a.status, AcceptanceStatus::Unavailable);
    let reason = a.reason.unwrap();
    for want in [
        "http://a:1/metrics: Connection refused",
        "http://b:2/metrics: no answer within 5 s",
        "--server-metrics",
    ] {
        assert!(reason.contains(want), "{want:?} missing from {reason}");
    }
}
