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

// Flattened-agent chain splitting (spec §2.5). The traces of `split/` are invented; every
// number below was derived by hand in `tests/fixtures/README.md` and matched against AIPerf
// 0.13's loader (`split/aiperf_check.py`).

fn split_corpus(opts: &LoadOptions) -> Corpus {
    load(&fixtures().join("split"), opts).unwrap()
}

/// (session id, kind) of every child, in order.
fn kinds(t: &Trace) -> Vec<(&str, ConvKind)> {
    t.children
        .iter()
        .map(|c| (c.session_id.as_str(), c.kind))
        .collect()
}

/// (outer index, inner index) of each turn.
fn sources(c: &Conversation) -> Vec<(usize, Option<usize>)> {
    c.turns
        .iter()
        .map(|t| (t.source_outer_idx, t.source_inner_idx))
        .collect()
}

fn max_tokens(c: &Conversation) -> Vec<u64> {
    c.turns.iter().map(|t| t.max_tokens).collect()
}

fn offset_s(c: &Conversation) -> f64 {
    c.subagent.as_ref().unwrap().first_turn_offset_ms / 1000.0
}

#[test]
fn top_level_flat_chains_split_into_a_worker_group_a_solo_agent_and_sidecars() {
    let c = split_corpus(&LoadOptions::default());
    let t = by_id(&c, "fx-split-flat-004");
    use ChainKind::{Agent, Aux, WorkerGroup};
    let wg = |member| ConvKind::Flat(WorkerGroup { group: 0, member });
    assert_eq!(
        kinds(t),
        [
            ("fx-split-flat-004::wg:000_000", wg(0)),
            ("fx-split-flat-004::wg:000_001", wg(1)),
            ("fx-split-flat-004::wg:000_002", wg(2)),
            ("fx-split-flat-004::aux:003", ConvKind::Flat(Aux)),
            ("fx-split-flat-004::fa:004", ConvKind::Flat(Agent)),
            ("fx-split-flat-004::aux:005", ConvKind::Flat(Aux)),
        ]
    );
    assert_eq!(t.root.kind, ConvKind::Root);
    let outer = |c: &Conversation| -> Vec<usize> { sources(c).iter().map(|s| s.0).collect() };
    assert_eq!(outer(&t.root), [0, 1, 10, 13]);
    let chains: Vec<Vec<usize>> = t.children.iter().map(outer).collect();
    assert_eq!(
        chains,
        [
            vec![2, 6],
            vec![3, 7],
            vec![4, 8],
            vec![5],
            vec![9, 11],
            vec![12]
        ]
    );
    assert_shape(
        &t.root,
        &[
            (0.0, 512, 60, None),
            (2.0, 640, 80, Some(1.0)),
            (7.0, 768, 50, Some(4.0)),
            (12.0, 896, 40, Some(4.0)),
        ],
    );
    assert_shape(
        &t.children[0],
        &[(3.5, 320, 100, None), (5.5, 448, 90, Some(0.5))],
    );
    assert_shape(
        &t.children[4],
        &[(6.0, 256, 70, None), (8.0, 320, 60, Some(1.0))],
    );
    assert_shape(&t.children[5], &[(9.0, 20000, 200, None)]);

    // Branches: (spawn, join) groups of their own, ids after the first chain's index.
    let b: Vec<(&str, usize, Option<usize>, &[usize])> = t
        .branches
        .iter()
        .map(|b| {
            (
                b.id.as_str(),
                b.spawn_turn,
                b.join_turn,
                b.children.as_slice(),
            )
        })
        .collect();
    assert_eq!(
        b,
        [
            (
                "fx-split-flat-004:flatspawn:0",
                1,
                Some(2),
                &[0, 1, 2, 3][..]
            ),
            ("fx-split-flat-004:flatspawn:4", 1, Some(3), &[4][..]),
            ("fx-split-flat-004:flatspawn:5", 2, Some(3), &[5][..]),
        ]
    );
    let starts: Vec<f64> = t.branches.iter().map(|b| b.start_ms).collect();
    assert_eq!(starts, [3500.0, 6000.0, 9000.0]);
    assert_eq!(t.root.turns[1].spawns, [0, 1]);
    assert_eq!(t.root.turns[2].spawns, [2]);
    assert_eq!(t.root.turns[2].joins, [0]);
    assert_eq!(t.root.turns[3].joins, [1, 2]);
    // First turns go at their recorded offset from the branch start.
    let offsets: Vec<f64> = t.children.iter().map(offset_s).collect();
    for (g, w) in offsets.iter().zip([0.0, 0.1, 0.2, 0.5, 0.0, 0.0]) {
        assert!(close(*g, w), "{offsets:?}");
    }
    let sa = t.children[4].subagent.as_ref().unwrap();
    assert_eq!(
        (sa.agent_id.as_str(), sa.spawn_ms, sa.end_ms),
        ("", 6000.0, 9000.0)
    );
    for c in &t.children {
        assert_eq!(
            (c.kind.source_kind(), c.kind.agent_depth()),
            ("weka_flat", 1)
        );
        assert_eq!((c.tool_tokens, c.system_tokens), (0, 0));
    }

    // One seen-set over root and chains, in time order.
    assert_eq!(hits(&t.root), [(0, 8), (8, 10), (10, 12), (12, 14)]);
    assert_eq!(hits(&t.children[0]), [(4, 5), (5, 7)]);
    assert_eq!(hits(&t.children[3]), [(0, 2)]);
    assert_eq!(hits(&t.children[4]), [(0, 4), (4, 5)]);
    assert_eq!(t.cache_blocks(), (61, 94));
    assert_eq!(t.peak_context_tokens, 20_200);
    assert_eq!(t.time_bounds_ms, (0.0, 12_000.0));
}

#[test]
fn subagent_chains_split_into_siblings_in_the_subagent_branch() {
    let c = split_corpus(&LoadOptions::default());
    let t = by_id(&c, "fx-split-sub-005");
    // The title-generation preamble stays the root's first turn instead of founding the main
    // chain (which would push the real root out as `::fa:000`).
    assert_eq!(sources(&t.root), [(0, None), (1, None), (3, None)]);
    use ChainKind::{Agent, Aux, WorkerGroup};
    let wg = |member| ConvKind::SubagentChain(WorkerGroup { group: 0, member });
    let sa = "fx-split-sub-005::sa:coder_001";
    let ids: Vec<String> = [
        "",
        ":wg:000_000",
        ":aux:001",
        ":wg:000_002",
        ":wg:000_003",
        ":aux:004",
        ":fa:005",
    ]
    .iter()
    .map(|s| format!("{sa}{s}"))
    .collect();
    let want_kinds = [
        ConvKind::Subagent,
        wg(0),
        // A reduction (20000 in, 300 out) among the fan-out takes member 1, then is an aux.
        ConvKind::SubagentChain(Aux),
        wg(2),
        wg(3),
        ConvKind::SubagentChain(Aux),
        ConvKind::SubagentChain(Agent),
    ];
    let want: Vec<(&str, ConvKind)> = ids.iter().map(String::as_str).zip(want_kinds).collect();
    assert_eq!(kinds(t), want);
    let inner: Vec<Vec<usize>> = t
        .children
        .iter()
        .map(|c| sources(c).iter().map(|s| s.1.unwrap()).collect())
        .collect();
    assert_eq!(
        inner,
        [
            vec![0, 1, 10],
            vec![2, 7],
            vec![3],
            vec![4, 8],
            vec![5, 9],
            vec![6],
            vec![11, 12]
        ]
    );
    assert!(t
        .children
        .iter()
        .all(|c| c.turns.iter().all(|t| t.source_outer_idx == 2)));
    // The declared 64 + 64 prefix (2 blocks) goes with the chains that start with the main
    // chain's first 2 blocks.
    let prefix: Vec<(u64, u64)> = t
        .children
        .iter()
        .map(|c| (c.tool_tokens, c.system_tokens))
        .collect();
    assert_eq!(
        prefix,
        [
            (64, 64),
            (64, 64),
            (64, 64),
            (64, 64),
            (64, 64),
            (0, 0),
            (0, 0)
        ]
    );
    // One branch holds every chain; each starts at its offset from the entry's spawn.
    assert_eq!(t.branches.len(), 1);
    let b = &t.branches[0];
    assert_eq!(
        (b.id.as_str(), b.spawn_turn, b.join_turn, b.start_ms),
        ("fx-split-sub-005:spawn:coder_001", 1, Some(2), 1000.0)
    );
    assert_eq!(b.children, [0, 1, 2, 3, 4, 5, 6]);
    let offsets: Vec<f64> = t.children.iter().map(offset_s).collect();
    for (g, w) in offsets.iter().zip([0.1, 2.6, 2.65, 2.7, 2.8, 3.0, 10.0]) {
        assert!(close(*g, w), "{offsets:?}");
    }
    for c in &t.children {
        let s = c.subagent.as_ref().unwrap();
        assert_eq!((s.agent_id.as_str(), s.end_ms), ("coder_001", 21_000.0));
        assert_eq!(c.kind.source_kind(), "weka_subagent");
    }
    assert_shape(
        &t.children[0],
        &[
            (1.1, 256, 100, None),
            (2.5, 384, 100, Some(0.4)),
            (10.0, 512, 80, Some(6.5)),
        ],
    );
    assert_eq!(hits(&t.children[0]), [(0, 4), (4, 6), (6, 8)]);
    assert_eq!(hits(&t.children[2]), [(5, 6)]);
    assert_eq!(hits(&t.children[6]), [(0, 2), (2, 3)]);
    assert_eq!(hits(&t.root), [(0, 1), (0, 4), (4, 6)]);
    assert_eq!(t.cache_blocks(), (36, 62));
    assert_eq!(t.peak_context_tokens, 20_300);
}

#[test]
fn synthesis_max_osl_caps_flat_chains_like_the_root_but_not_subagent_chains() {
    let c = split_corpus(&LoadOptions {
        synthesis_max_osl: Some(100),
        ..LoadOptions::default()
    });
    let flat = by_id(&c, "fx-split-flat-004");
    assert_eq!(max_tokens(&flat.children[5]), [100]);
    assert_eq!(flat.peak_context_tokens, 20_100);
    let sub = by_id(&c, "fx-split-sub-005");
    assert_eq!(max_tokens(&sub.children[2]), [300]);
    assert_eq!(sub.peak_context_tokens, 20_300);
}

#[test]
fn split_disabled_keeps_one_root_and_one_child_per_subagent() {
    let c = split_corpus(&LoadOptions {
        split: SplitOptions {
            enabled: false,
            ..SplitOptions::default()
        },
        ..LoadOptions::default()
    });
    let flat = by_id(&c, "fx-split-flat-004");
    assert!(flat.children.is_empty() && flat.branches.is_empty());
    assert_eq!(flat.root.turns.len(), 14);
    assert_eq!(flat.cache_blocks(), (61, 94));
    let sub = by_id(&c, "fx-split-sub-005");
    assert_eq!(
        kinds(sub),
        [("fx-split-sub-005::sa:coder_001", ConvKind::Subagent)]
    );
    assert_eq!(sub.children[0].turns.len(), 13);
    assert_eq!(sub.cache_blocks(), (36, 62));
}

#[test]
fn the_shared_fixtures_do_not_split_under_the_default_thresholds() {
    // AIPerf 0.13 with its defaults builds them unsplit too (`split/aiperf_check.py ../traces`).
    let c = corpus();
    for t in &c.traces {
        assert_eq!(t.root.kind, ConvKind::Root);
        assert!(
            t.children.iter().all(|c| c.kind == ConvKind::Subagent),
            "{}",
            t.id
        );
    }
    let totals: Vec<(u64, u64)> = c.traces.iter().map(Trace::cache_blocks).collect();
    assert_eq!(totals, [(14, 25), (43, 70), (17, 32)]);
}

#[test]
fn split_options_come_from_aiperfs_environment_variables() {
    let none = |_: &str| None;
    assert_eq!(
        SplitOptions::from_env(&none).unwrap(),
        SplitOptions::default()
    );
    let d = SplitOptions::default();
    assert!(d.enabled && d.aux_cross_model);
    assert_eq!(
        (d.aux_max_requests, d.aux_isl_floor, d.worker_group_min),
        (1, 16384, 3)
    );
    assert_eq!((d.aux_isl_ratio, d.aux_reduction_ratio), (0.10, 20.0));
    assert_eq!(
        (
            d.aux_reduction_osl_max,
            d.seam_max_gap_s,
            d.seam_min_overlap_ratio
        ),
        (4000, 3600.0, 0.5)
    );

    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    };
    let o = SplitOptions::from_env(&env(&[
        ("AIPERF_DATASET_WEKA_SPLIT_FLATTENED_AGENTS", "false"),
        ("AIPERF_DATASET_WEKA_AUX_MAX_REQUESTS", "2"),
        ("AIPERF_DATASET_WEKA_AUX_CROSS_MODEL", "0"),
        ("AIPERF_DATASET_WEKA_SEAM_MAX_GAP_SECONDS", "inf"),
        ("AIPERF_DATASET_WEKA_SEAM_MIN_OVERLAP_RATIO", "0.9"),
        ("AIPERF_DATASET_WEKA_WORKER_GROUP_MIN", "0"),
    ]))
    .unwrap();
    assert!(!o.enabled && !o.aux_cross_model);
    assert_eq!((o.aux_max_requests, o.worker_group_min), (2, 0));
    assert_eq!(
        (o.seam_max_gap_s, o.seam_min_overlap_ratio),
        (f64::INFINITY, 0.9)
    );

    for (var, value, says) in [
        (
            "AIPERF_DATASET_WEKA_SPLIT_FLATTENED_AGENTS",
            "maybe",
            "true or false",
        ),
        ("AIPERF_DATASET_WEKA_AUX_MAX_REQUESTS", "-1", "whole number"),
        (
            "AIPERF_DATASET_WEKA_SEAM_MIN_OVERLAP_RATIO",
            "1.5",
            "from 0 to 1",
        ),
        ("AIPERF_DATASET_WEKA_AUX_ISL_RATIO", "x", ">= 0"),
    ] {
        let get = move |k: &str| (k == var).then(|| value.to_string());
        let e = SplitOptions::from_env(&get).unwrap_err().to_string();
        assert!(
            e.contains(var) && e.contains(value) && e.contains(says),
            "{e}"
        );
    }
}

// Cross-stream replay dependencies (spec §2.5): derived by hand for `fx-split-after-006` in
// `tests/fixtures/README.md`; the others as AIPerf 0.13 builds them (`split/aiperf_check.py`).

/// `after` of every turn, as (session id, turn) pairs.
fn afters<'a>(t: &'a Trace, c: &Conversation) -> Vec<Vec<(&'a str, usize)>> {
    c.turns
        .iter()
        .map(|turn| {
            turn.after
                .iter()
                .map(|a| (t.conversation(a.conv).session_id.as_str(), a.turn))
                .collect()
        })
        .collect()
}

#[test]
fn after_waits_for_the_latest_request_each_other_stream_finished_by_the_recorded_start() {
    let c = split_corpus(&LoadOptions::default());
    let t = by_id(&c, "fx-split-after-006");
    let (root, fa, aux) = (
        "fx-split-after-006",
        "fx-split-after-006::fa:000",
        "fx-split-after-006::aux:001",
    );
    assert_eq!(kinds(t).iter().map(|k| k.0).collect::<Vec<_>>(), [fa, aux]);
    assert_eq!(
        afters(t, &t.root),
        [vec![], vec![], vec![(aux, 0)], vec![(fa, 2)]]
    );
    assert_eq!(
        afters(t, &t.children[0]),
        [vec![], vec![(root, 1)], vec![(root, 2)]]
    );
    assert_eq!(afters(t, &t.children[1]), [vec![(root, 1), (fa, 0)]]);
    assert_eq!(
        t.root.turns[2].after[0],
        After {
            conv: ConvRef::Child(1),
            turn: 0
        }
    );
    let b: Vec<(usize, Option<usize>)> = t
        .branches
        .iter()
        .map(|b| (b.spawn_turn, b.join_turn))
        .collect();
    assert_eq!(b, [(0, Some(3)), (1, Some(2))]);
    assert_eq!(t.cache_blocks(), (23, 39));
}

#[test]
fn after_stays_inside_a_replay_scope() {
    let c = split_corpus(&LoadOptions::default());
    // Root and flat chains share the trace's scope.
    let t = by_id(&c, "fx-split-flat-004");
    let p = "fx-split-flat-004";
    let (w0, w1, w2) = (
        "fx-split-flat-004::wg:000_000",
        "fx-split-flat-004::wg:000_001",
        "fx-split-flat-004::wg:000_002",
    );
    let (a3, f4, a5) = (
        "fx-split-flat-004::aux:003",
        "fx-split-flat-004::fa:004",
        "fx-split-flat-004::aux:005",
    );
    assert_eq!(
        afters(t, &t.root),
        [
            vec![],
            vec![],
            vec![(f4, 0), (w0, 1), (w1, 1), (w2, 1)],
            vec![(a5, 0)]
        ]
    );
    assert_eq!(
        afters(t, &t.children[0]),
        [vec![(p, 1)], vec![(a3, 0), (w1, 0), (w2, 0)]]
    );
    assert_eq!(afters(t, &t.children[3]), [vec![(p, 1)]]);
    assert_eq!(
        afters(t, &t.children[4]),
        [vec![(a3, 0), (w0, 0), (w1, 0), (w2, 0)], vec![(p, 2)]]
    );
    assert_eq!(afters(t, &t.children[5]), [vec![(f4, 1)]]);

    // Each subagent family is a scope of its own: nothing crosses to the root.
    let t = by_id(&c, "fx-split-sub-005");
    assert!(t.root.turns.iter().all(|turn| turn.after.is_empty()));
    let sa = "fx-split-sub-005::sa:coder_001";
    let s = |suffix: &str| format!("{sa}{suffix}");
    let (w0, a1, w2, w3, a4) = (
        s(":wg:000_000"),
        s(":aux:001"),
        s(":wg:000_002"),
        s(":wg:000_003"),
        s(":aux:004"),
    );
    let owned = |v: Vec<Vec<(&str, usize)>>| -> Vec<Vec<(String, usize)>> {
        v.into_iter()
            .map(|x| x.into_iter().map(|(a, b)| (a.to_string(), b)).collect())
            .collect()
    };
    assert_eq!(
        owned(afters(t, &t.children[0])),
        [
            vec![],
            vec![],
            vec![(w0.clone(), 1), (w2.clone(), 1), (w3.clone(), 1)]
        ]
    );
    assert_eq!(
        owned(afters(t, &t.children[1])),
        [
            vec![(sa.to_string(), 1)],
            vec![(a1, 0), (a4, 0), (w2, 0), (w3, 0)]
        ]
    );
    assert_eq!(
        owned(afters(t, &t.children[6])),
        [vec![(sa.to_string(), 2)], vec![(sa.to_string(), 2)]]
    );

    // Unsplit traces have one stream per scope: no dependencies.
    for t in &corpus().traces {
        let all = std::iter::once(&t.root).chain(&t.children);
        assert!(
            all.flat_map(|c| &c.turns).all(|turn| turn.after.is_empty()),
            "{}",
            t.id
        );
    }
}

/// The rule of spec §2.5 written the plain way, for comparing with the loader's.
fn naive_after(t: &Trace, scope: &[ConvRef]) -> Vec<(ConvRef, usize, Vec<After>)> {
    let iv = |c: ConvRef, k: usize| {
        let turn = &t.conversation(c).turns[k];
        let s = turn.timestamp_ms;
        (s, s + turn.api_time_ms.unwrap_or(0.0))
    };
    let name = |a: &After| (t.conversation(a.conv).session_id.clone(), a.turn);
    let mut out = Vec::new();
    for &c in scope {
        for k in 0..t.conversation(c).turns.len() {
            let (start, _) = iv(c, k);
            let mut frontier: Vec<After> = Vec::new();
            for &o in scope.iter().filter(|&&o| o != c) {
                let best = (0..t.conversation(o).turns.len())
                    .filter(|&j| iv(o, j).0 < start && iv(o, j).1 <= start)
                    .max_by(|&a, &b| {
                        let (x, y) = (iv(o, a), iv(o, b));
                        x.1.total_cmp(&y.1)
                            .then(x.0.total_cmp(&y.0))
                            .then(a.cmp(&b))
                    });
                frontier.extend(best.map(|turn| After { conv: o, turn }));
            }
            let mut keep: Vec<After> = frontier
                .iter()
                .filter(|p| {
                    !frontier.iter().any(|l| {
                        let (ps, pe) = iv(p.conv, p.turn);
                        l != *p && ps < iv(l.conv, l.turn).0 && pe <= iv(l.conv, l.turn).0
                    })
                })
                .copied()
                .collect();
            keep.sort_by_key(name);
            out.push((c, k, keep));
        }
    }
    out
}

#[test]
fn after_matches_the_plain_rule_on_many_interleaved_streams() {
    // Eight agents interleaved at the top level (fresh contexts, so each is its own chain),
    // with tied starts, zero and missing server times: seeded, so the same trace every run.
    let mut seed: u64 = 0x5eed;
    let mut next = |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let mut hashes: Vec<Vec<u64>> = (0..8).map(|a| vec![1000 * (a + 1)]).collect();
    let mut requests = Vec::new();
    let mut t = 0.0;
    for _ in 0..120 {
        let a = next(8) as usize;
        let h = &mut hashes[a];
        h.push(h[0] + h.len() as u64);
        t += [0.0, 0.25, 0.5, 1.0][next(4) as usize];
        let mut r = json!({"t": t, "type": "n", "model": "m", "in": 64 * h.len(),
            "out": 100, "hash_ids": h.clone()});
        match next(3) {
            0 => {}
            1 => r["api_time"] = json!(0.0),
            _ => r["api_time"] = json!([0.25, 0.75, 1.5, 3.0][next(4) as usize]),
        }
        requests.push(r);
    }
    let trace = json!({"id": "fx-many", "models": ["m"], "block_size": 64,
        "hash_id_scope": "local", "requests": requests});
    let c = load_values(&[trace]).unwrap();
    let t = &c.traces[0];
    assert!(t.children.len() >= 4, "{:?}", kinds(t));
    let scope: Vec<ConvRef> = std::iter::once(ConvRef::Root)
        .chain((0..t.children.len()).map(ConvRef::Child))
        .collect();
    let want = naive_after(t, &scope);
    let mut edges = 0;
    for (conv, k, after) in want {
        assert_eq!(
            t.conversation(conv).turns[k].after,
            after,
            "{conv:?} turn {k}"
        );
        edges += after.len();
    }
    assert!(edges > 50, "too few dependencies to mean anything: {edges}");
}

#[test]
fn traces_aiperf_cannot_replay_either_are_errors_naming_them() {
    // Rows without hash ids ride the main chain as they come; the compaction seam (request 1)
    // is appended after them, so the root's turns are out of list order and the sidecar at
    // request 2 would be joined by turn 1 but spawned by turn 2. AIPerf 0.13's loader fails on
    // this trace too ("v1 requires the spawn turn to precede the join turn").
    let q = |t: f64, h: &[u64], api: f64| {
        json!({"t": t, "type": "n", "model": "m", "in": 64 * h.len().max(1), "out": 50,
            "hash_ids": h, "api_time": api})
    };
    let trace = json!({"id": "fx-out-of-order", "models": ["m"], "block_size": 64,
        "requests": [q(0.0, &[1, 2, 3], 1.0), q(1.5, &[1, 2, 9], 1.0), q(2.0, &[50, 51], 0.5),
            q(5.0, &[], 1.0), q(20.0, &[1, 2, 9, 10], 1.0)]});
    let e = load_values(std::slice::from_ref(&trace))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("trace fx-out-of-order")
            && e.contains("fx-out-of-order:flatspawn:0")
            && e.contains("spawned by root turn 2 but joined by turn 1")
            && e.contains("AIPERF_DATASET_WEKA_SPLIT_FLATTENED_AGENTS=false"),
        "{e}"
    );
    // Unsplit, it is an ordinary trace.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("traces.jsonl");
    std::fs::write(&path, trace.to_string()).unwrap();
    let unsplit = LoadOptions {
        split: SplitOptions {
            enabled: false,
            ..SplitOptions::default()
        },
        ..LoadOptions::default()
    };
    assert_eq!(load(&path, &unsplit).unwrap().traces[0].root.turns.len(), 5);

    // Two replayed subagents with one agent_id would share a session id.
    let mut v = values();
    v[1]["requests"][4]["agent_id"] = json!("explore_001");
    let e = load_values(&v).unwrap_err().to_string();
    assert!(
        e.contains("trace fx-subagent-002")
            && e.contains("`requests[2]` and `requests[4]` share the agent_id \"explore_001\""),
        "{e}"
    );
}

#[test]
fn peak_context_counts_every_recorded_request_as_aiperfs_filter_does() {
    // AIPerf's keep/drop test reads the trace as recorded: a subagent that is never replayed
    // (listed before any root request) still counts, uncapped like every subagent request.
    let mut v = values();
    v[2]["requests"][0]["requests"][0]["in"] = json!(5000);
    let c = load_values(&v).unwrap();
    let t = by_id(&c, "fx-tiered-003");
    assert_eq!(t.dropped.len(), 1);
    assert_eq!(t.peak_context_tokens, 5010);
}

#[test]
fn cache_hits_are_the_same_for_ids_too_large_for_the_bitmap() {
    let mut vals = values();
    let shift = |v: &mut Value| {
        for r in v["requests"].as_array_mut().unwrap() {
            for h in r["hash_ids"].as_array_mut().into_iter().flatten() {
                *h = json!(h.as_u64().unwrap() + (1 << 31));
            }
        }
    };
    vals.iter_mut().for_each(shift);
    let shifted = load_values(&vals).unwrap();
    let t = by_id(&shifted, "fx-simple-001");
    assert_eq!(hits(&t.root), [(0, 3), (3, 5), (5, 7), (2, 4), (4, 6)]);
    assert_eq!(t.cache_blocks(), (14, 25));
}
