//! The expectations of `tests/fixtures/agentx/` (README of the shared fixtures): every number
//! below was derived by hand there and cross-checked by an independent script.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::*;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agentx")
}

fn corpus() -> Corpus {
    load(&fixtures().join("traces.jsonl"), &LoadOptions::default()).unwrap()
}

fn by_id<'a>(c: &'a Corpus, id: &str) -> &'a Trace {
    c.traces.iter().find(|t| t.id == id).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

/// (t s, in, max_tokens, delay s) of each turn.
fn shape(c: &Conversation) -> Vec<(f64, u64, u64, Option<f64>)> {
    c.turns
        .iter()
        .map(|t| {
            (
                t.timestamp_ms / 1000.0,
                t.input_tokens,
                t.max_tokens,
                t.delay_ms.map(|d| d / 1000.0),
            )
        })
        .collect()
}

fn assert_shape(c: &Conversation, want: &[(f64, u64, u64, Option<f64>)]) {
    let got = shape(c);
    assert_eq!(got.len(), want.len(), "{}: {got:?}", c.session_id);
    for (g, w) in got.iter().zip(want) {
        let delay_ok = match (g.3, w.3) {
            (Some(a), Some(b)) => close(a, b),
            (None, None) => true,
            _ => false,
        };
        assert!(
            close(g.0, w.0) && g.1 == w.1 && g.2 == w.2 && delay_ok,
            "{}: got {got:?}, want {want:?}",
            c.session_id
        );
    }
}

fn hits(c: &Conversation) -> Vec<(u64, u64)> {
    c.turns
        .iter()
        .map(|t| (t.cache_hit_blocks, t.cache_total_blocks))
        .collect()
}

fn window(t: &Trace) -> (f64, f64) {
    let (lo, hi) = t.t_star_window_ms(StartRatios::new(0.25, 0.75).unwrap());
    (lo / 1000.0, hi / 1000.0)
}

fn child<'a>(t: &'a Trace, session: &str) -> &'a Conversation {
    t.children
        .iter()
        .find(|c| c.session_id == session)
        .unwrap_or_else(|| panic!("no child {session} in {:?}", t.children))
}

#[test]
fn simple_trace_turns_delays_cache_and_window() {
    let c = corpus();
    let t = by_id(&c, "fx-simple-001");
    assert_shape(
        &t.root,
        &[
            (0.0, 200, 40, None),
            (5.0, 330, 1, Some(3.0)),
            (406.5, 456, 120, Some(400.0)),
            (412.0, 256, 60, Some(1.5)),
            (415.0, 400, 30, Some(2.0)),
        ],
    );
    assert_eq!(hits(&t.root), [(0, 3), (3, 5), (5, 7), (2, 4), (4, 6)]);
    assert_eq!(t.cache_blocks(), (14, 25));
    assert_eq!(t.peak_context_tokens, 576);
    assert!(t.children.is_empty() && t.branches.is_empty() && t.dropped.is_empty());
    assert_eq!(t.time_bounds_ms, (0.0, 415_000.0));
    let (lo, hi) = window(t);
    assert!(close(lo, 103.75) && close(hi, 311.25), "{lo} {hi}");
    assert_eq!(t.root.turns[4].transport, Transport::Streaming);
    assert_eq!(t.root.turns[1].input_kind, InputKind::ToolResult);
    assert_eq!(t.root.turns[2].input_kind, InputKind::User);
    assert_eq!(t.root.session_id, "fx-simple-001");
}

#[test]
fn subagent_trace_joined_and_background_children() {
    let c = corpus();
    let t = by_id(&c, "fx-subagent-002");
    assert_shape(
        &t.root,
        &[
            (0.0, 400, 50, None),
            (5.0, 520, 80, Some(2.0)),
            (18.0, 700, 150, Some(11.0)),
            (24.0, 760, 40, Some(2.0)),
        ],
    );
    assert_eq!((t.root.tool_tokens, t.root.system_tokens), (100, 60));

    let explore = child(t, "fx-subagent-002::sa:explore_001");
    assert_shape(
        explore,
        &[
            (7.6, 300, 90, None),
            (10.5, 420, 70, Some(0.5)),
            (13.0, 560, 200, Some(0.5)),
        ],
    );
    let sa = explore.subagent.as_ref().unwrap();
    assert!(
        close(sa.spawn_ms, 7500.0) && close(sa.end_ms, 16_500.0),
        "{sa:?}"
    );
    assert!(close(sa.first_turn_offset_ms, 100.0), "{sa:?}");
    assert_eq!((explore.tool_tokens, explore.system_tokens), (100, 60));
    let b = &t.branches[sa.branch];
    assert_eq!((b.spawn_turn, b.join_turn), (1, Some(2)));
    assert_eq!(b.id, "fx-subagent-002:spawn:explore_001");

    let general = child(t, "fx-subagent-002::sa:general_001");
    assert_shape(
        general,
        &[(22.6, 200, 500, None), (35.0, 900, 300, Some(0.4))],
    );
    let sa = general.subagent.as_ref().unwrap();
    assert!(
        close(sa.spawn_ms, 22_500.0) && close(sa.end_ms, 52_500.0),
        "{sa:?}"
    );
    assert!(close(sa.first_turn_offset_ms, 100.0), "{sa:?}");
    let b = &t.branches[sa.branch];
    assert_eq!(b.spawn_turn, 2);
    assert!(b.is_background(), "{b:?}");

    assert_eq!(t.branches.len(), 2);
    assert_eq!(t.root.turns[1].spawns, [0]);
    assert_eq!(t.root.turns[2].joins, [0]);
    assert_eq!(t.root.turns[2].spawns, [1]);
    assert!(t.root.turns[3].joins.is_empty());

    // Global time order: k0, k1, explore#0..2, k2, general#0, k3, general#1.
    assert_eq!(hits(&t.root), [(0, 6), (6, 8), (8, 10), (10, 11)]);
    assert_eq!(hits(explore), [(3, 4), (4, 6), (6, 8)]);
    assert_eq!(hits(general), [(3, 3), (3, 14)]);
    assert_eq!(t.cache_blocks(), (43, 70));
    // general#1: 900 + 300; a child's `out` is never capped.
    assert_eq!(t.peak_context_tokens, 1200);
    assert_eq!(t.time_bounds_ms.0, 0.0);
    assert!(close(t.time_bounds_ms.1, 35_000.0));
    let (lo, hi) = window(t);
    assert!(close(lo, 8.75) && close(hi, 26.25), "{lo} {hi}");
}

#[test]
fn tiered_trace_joins_in_tiers_and_drops_the_orphan() {
    let c = corpus();
    let t = by_id(&c, "fx-tiered-003");
    assert_eq!(
        t.dropped,
        [Dropped {
            agent_id: "orphan_001".into(),
            source_outer_idx: 0,
            reason: DropReason::NoPrecedingTurn,
        }]
    );
    assert!(t.children.iter().all(|c| !c.session_id.contains("orphan")));
    assert_shape(
        &t.root,
        &[
            (1.0, 256, 64, None),
            (7.0, 384, 64, Some(5.0)),
            (13.0, 512, 128, Some(4.0)),
        ],
    );
    let a = child(t, "fx-tiered-003::sa:worker_a");
    let b = child(t, "fx-tiered-003::sa:worker_b");
    assert_shape(b, &[(2.6, 192, 300, None), (8.0, 512, 200, Some(0.4))]);
    for c in [a, b] {
        let sa = c.subagent.as_ref().unwrap();
        assert!(close(sa.first_turn_offset_ms, 100.0), "{sa:?}");
    }
    let ba = &t.branches[a.subagent.as_ref().unwrap().branch];
    let bb = &t.branches[b.subagent.as_ref().unwrap().branch];
    assert_eq!((ba.spawn_turn, ba.join_turn), (0, Some(1)));
    assert_eq!((bb.spawn_turn, bb.join_turn), (0, Some(2)));
    assert_eq!(t.branches.len(), 2);
    assert_eq!(t.root.turns[0].spawns, [0, 1]);

    assert_eq!(hits(&t.root), [(0, 4), (4, 6), (6, 8)]);
    assert_eq!(hits(a), [(2, 3)]);
    assert_eq!(hits(b), [(2, 3), (3, 8)]);
    assert_eq!(t.cache_blocks(), (17, 32));
    assert_eq!(t.peak_context_tokens, 712);
    assert_eq!(t.time_bounds_ms, (1000.0, 13_000.0));
    let (lo, hi) = window(t);
    assert!(close(lo, 4.0) && close(hi, 10.0), "{lo} {hi}");
}

#[test]
fn a_directory_of_traces_loads_like_the_jsonl() {
    let dir = load(&fixtures().join("traces"), &LoadOptions::default()).unwrap();
    let jsonl = corpus();
    let strip = |c: &Corpus| -> Vec<Trace> {
        c.traces
            .iter()
            .cloned()
            .map(|mut t| {
                t.origin.path = PathBuf::new();
                t.origin.line = None;
                t
            })
            .collect()
    };
    assert_eq!(strip(&dir), strip(&jsonl));
    let ids: Vec<&str> = dir.traces.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["fx-simple-001", "fx-subagent-002", "fx-tiered-003"]);
    assert_eq!(jsonl.traces[1].origin.line, Some(2));
    assert!(dir.warning().is_none());
}

#[test]
fn filter_then_cap_drops_over_context_then_keeps_the_first_n() {
    let path = fixtures().join("traces.jsonl");
    // Peaks: simple 576, subagent 1200, tiered 712.
    let c = load(
        &path,
        &LoadOptions {
            max_context_length: Some(1000),
            num_dataset_entries: Some(1),
            ..LoadOptions::default()
        },
    )
    .unwrap();
    let ids: Vec<&str> = c.traces.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["fx-simple-001"]);
    assert_eq!(c.over_context, ["fx-subagent-002"]);
    assert_eq!(c.beyond_cap, 1);

    let c = load(
        &path,
        &LoadOptions {
            max_context_length: Some(1000),
            num_dataset_entries: Some(2),
            ..LoadOptions::default()
        },
    )
    .unwrap();
    let ids: Vec<&str> = c.traces.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(
        ids,
        ["fx-simple-001", "fx-tiered-003"],
        "the cap counts eligible traces only"
    );
    assert_eq!(c.beyond_cap, 0);

    let err = load(
        &path,
        &LoadOptions {
            max_context_length: Some(100),
            ..LoadOptions::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("--max-context-length 100"), "{err}");
}

#[test]
fn synthesis_max_osl_caps_root_turns_only() {
    let c = load(
        &fixtures().join("traces.jsonl"),
        &LoadOptions {
            synthesis_max_osl: Some(60),
            ..LoadOptions::default()
        },
    )
    .unwrap();
    let t = by_id(&c, "fx-subagent-002");
    let root: Vec<u64> = t.root.turns.iter().map(|t| t.max_tokens).collect();
    assert_eq!(root, [50, 60, 60, 40]);
    let general = child(t, "fx-subagent-002::sa:general_001");
    let kids: Vec<u64> = general.turns.iter().map(|t| t.max_tokens).collect();
    assert_eq!(kids, [500, 300]);
    assert_eq!(t.peak_context_tokens, 1200);
    // fx-simple-001's out 0 stays 1.
    assert_eq!(by_id(&c, "fx-simple-001").root.turns[1].max_tokens, 1);
}

/// The fixture traces as JSON values, to edit for the error cases.
fn values() -> Vec<Value> {
    std::fs::read_to_string(fixtures().join("traces.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn load_values(vals: &[Value]) -> Result<Corpus, AgentxError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("traces.jsonl");
    let text: Vec<String> = vals.iter().map(Value::to_string).collect();
    std::fs::write(&path, text.join("\n")).unwrap();
    load(&path, &LoadOptions::default())
}

#[test]
fn unknown_keys_load_with_one_warning_naming_them() {
    let mut v = values();
    v[0]["source_repo"] = json!("x");
    v[1]["requests"][0]["cache_hint"] = json!(1);
    v[1]["requests"][1]["cache_hint"] = json!(2);
    v[1]["requests"][2]["requests"][0]["note"] = json!("y");
    // Hugging Face's merged row schema: the other variant's keys as null are not unknown.
    v[2]["requests"][1]["agent_id"] = Value::Null;
    v[2]["requests"][0]["hash_ids"] = Value::Null;
    let c = load_values(&v).unwrap();
    assert_eq!(c.traces.len(), 3);
    let w = c.warning().unwrap();
    assert!(
        w.contains("trace `source_repo` (1x, first in trace fx-simple-001)")
            && w.contains("request `cache_hint` (2x, first in trace fx-subagent-002)")
            && w.contains("subagent request `note`"),
        "{w}"
    );
    assert!(!w.contains("agent_id") && !w.contains("hash_ids"), "{w}");
    assert_eq!(c.unknown_keys.len(), 3);
}

fn load_err(edit: impl FnOnce(&mut Vec<Value>)) -> String {
    let mut v = values();
    edit(&mut v);
    load_values(&v).unwrap_err().to_string()
}

#[test]
fn bad_values_name_the_trace_the_request_and_the_field() {
    let e = load_err(|v| v[0]["requests"][1]["out"] = json!(-1));
    assert!(
        e.contains("line 1")
            && e.contains("trace fx-simple-001")
            && e.contains("`requests[1].out`")
            && e.contains("non-negative integer"),
        "{e}"
    );
    let e = load_err(|v| {
        v[1]["requests"][2]["requests"][0]
            .as_object_mut()
            .unwrap()
            .remove("t");
    });
    assert!(
        e.contains("trace fx-subagent-002") && e.contains("`requests[2].requests[0].t` is missing"),
        "{e}"
    );
    let e = load_err(|v| v[0]["requests"][0]["type"] = json!("x"));
    assert!(
        e.contains("`requests[0].type`") && e.contains("\"subagent\""),
        "{e}"
    );
    let e = load_err(|v| v[1]["requests"][2]["requests"][0]["type"] = json!("subagent"));
    assert!(e.contains("no nesting"), "{e}");
    let e = load_err(|v| v[0]["block_size"] = json!(0));
    assert!(e.contains("`block_size` is 0"), "{e}");
    let e = load_err(|v| v[0]["hash_id_scope"] = json!("global"));
    assert!(
        e.contains("`hash_id_scope`") && e.contains("\"local\""),
        "{e}"
    );
    let e = load_err(|v| v[2]["requests"][1]["input_length"] = json!(256));
    assert!(e.contains("given twice"), "{e}");
    let e = load_err(|v| v[0]["requests"][0]["hash_ids"][1] = json!("a"));
    assert!(e.contains("`requests[0].hash_ids[1]`"), "{e}");
    let e = load_err(|v| v[0]["requests"][0]["api_time"] = json!(-2.0));
    assert!(e.contains("`requests[0].api_time`"), "{e}");
    let e = load_err(|v| v[2]["id"] = json!("fx-simple-001"));
    assert!(
        e.contains("line 3")
            && e.contains("`fx-simple-001` was already used by")
            && e.contains("line 1"),
        "{e}"
    );
    let e = load_err(|v| v[0]["requests"] = json!([]));
    assert!(e.contains("`requests` is empty"), "{e}");
    let e = load_err(|v| {
        v[0].as_object_mut().unwrap().remove("id");
    });
    assert!(e.contains("trace (no id): `id` is missing"), "{e}");
}

#[test]
fn aliases_and_relative_inner_times_are_read() {
    let mut v = values();
    // `input_length`/`output_length` are the long names of `in`/`out`.
    let r = v[0]["requests"][0].as_object_mut().unwrap();
    let input = r.remove("in").unwrap();
    let output = r.remove("out").unwrap();
    r.insert("input_length".into(), input);
    r.insert("output_length".into(), output);
    // An inner `t` before the spawn is relative to it: 0.1 s after 7.5 s.
    v[1]["requests"][2]["requests"][0]["t"] = json!(0.1);
    let c = load_values(&v).unwrap();
    assert_eq!(by_id(&c, "fx-simple-001").root.turns[0].input_tokens, 200);
    assert_eq!(by_id(&c, "fx-simple-001").root.turns[0].max_tokens, 40);
    let t = by_id(&c, "fx-subagent-002");
    let e = child(t, "fx-subagent-002::sa:explore_001");
    assert!(close(e.turns[0].timestamp_ms, 7600.0), "{:?}", e.turns[0]);
}

#[test]
fn empty_inputs_and_bad_ratios_are_errors_that_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let e = load(dir.path(), &LoadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("no traces"), "{e}");
    let e = load(&dir.path().join("missing.jsonl"), &LoadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("missing.jsonl") && e.contains("traces.jsonl"),
        "{e}"
    );
    std::fs::write(dir.path().join("bad.jsonl"), "{not json\n").unwrap();
    let e = load(&dir.path().join("bad.jsonl"), &LoadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("bad.jsonl line 1") && e.contains("not a JSON"),
        "{e}"
    );
    for (lo, hi) in [(0.8, 0.2), (-0.1, 0.5), (0.5, 1.5)] {
        let e = StartRatios::new(lo, hi).unwrap_err().to_string();
        assert!(e.contains("0 <= min <= max <= 1"), "{e}");
    }
}
