//! What a newcomer trips over in `replay` (issue 19, items 7 to 14): what the reports say about
//! the load, failures explained, flags the tool owns, output locations checked up front.

use crate::common::{fast, read_json, replay_at, sim};

/// Item 7: an open loop without --concurrency has no cap; every report says so instead of 64.
#[tokio::test]
async fn an_uncapped_open_loop_reports_no_concurrency_cap() {
    let s = sim(fast());
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let out = replay_at(
        &s.url(),
        d,
        "--request-rate 200 --request-count 8 --osl 4 --result-filename raw",
    )
    .await;
    let header = specperf::console_table(&out.summary);
    let first = header.lines().next().unwrap();
    assert!(first.contains("concurrency uncapped"), "{first}");
    let summary = read_json(&dir.path().join("summary.json"));
    assert!(
        summary["meta"]["concurrency"].is_null(),
        "{}",
        summary["meta"]
    );
    let aiperf = read_json(&dir.path().join("profile_export_aiperf.json"));
    assert!(
        aiperf["input_config"]["loadgen"]["concurrency"].is_null(),
        "{}",
        aiperf["input_config"]
    );
    let raw = read_json(&dir.path().join("raw.json"));
    assert!(raw["max_concurrency"].is_null(), "{raw}");
}

/// Item 7: a capped open loop and a closed loop still report their number.
#[tokio::test]
async fn a_capped_open_loop_reports_its_cap() {
    let s = sim(fast());
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    replay_at(
        &s.url(),
        d,
        "--request-rate 200 --concurrency 3 --request-count 6 --osl 4 --result-filename raw",
    )
    .await;
    let summary = read_json(&dir.path().join("summary.json"));
    assert_eq!(summary["meta"]["concurrency"], 3);
    let raw = read_json(&dir.path().join("raw.json"));
    assert_eq!(raw["max_concurrency"], 3);
}
