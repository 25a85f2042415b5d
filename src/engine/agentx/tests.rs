//! The lane scheduler against the embedded simulator on loopback (port 0), on the fixture traces,
//! with small idle caps so the recorded gaps (up to 400 s) collapse to fractions of a second.
//! Prompts come from a plain double ([`Plain`]): these tests check the schedule, not the text.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

use super::*;
use crate::agentx::prompt::Role;
use crate::agentx::{load, LoadOptions, StartRatios};
use crate::config::{Provenance, RunConfig, SessionRouting};
use crate::sim::{Fault, SimConfig, SimHandle, Simulator};

/// Messages `"<session> turn <k>"`; marker `"[rid:<pass>:<lane>:<base>]\n\n"`.
struct Plain;

struct PlainConv(String);

impl ConvMessages for PlainConv {
    fn turn(&mut self, k: usize) -> Result<Vec<Message>, String> {
        Ok(vec![Message {
            role: Role::User,
            content: format!("{} turn {k}", self.0).into(),
        }])
    }
}

impl TurnMessages for Plain {
    fn conversation(&self, trace: &Arc<Trace>, conv: ConvRef) -> Box<dyn ConvMessages> {
        Box::new(PlainConv(trace.conversation(conv).session_id.clone()))
    }
    fn marker(&self, _bid: &str, pass: u64, lane: usize, base: &str) -> String {
        format!("[rid:{pass}:{lane}:{base}]\n\n")
    }
    fn apply_marker(&self, messages: &mut [Message], marker: &str) {
        if let Some(m) = messages.iter_mut().find(|m| m.role == Role::User) {
            if !m.content.starts_with(marker) {
                m.content.prepend(marker.into());
            }
        }
    }
}

fn settings(ratios: (f64, f64)) -> AgentxSettings {
    AgentxSettings {
        input: Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agentx/traces.jsonl"),
        provenance: Provenance::default(),
        load: LoadOptions::default(),
        ratios: StartRatios::new(ratios.0, ratios.1).unwrap(),
        seed: 42,
        tokenizer: "unused".into(),
        warmup_requests_per_lane: 0,
        warmup_grace: Duration::from_secs(30),
        trace_idle_cap: Some(Duration::from_millis(200)),
        system_idle_cap: Duration::from_millis(100),
        stats_interval: None,
        live_failed_threshold: None,
        routing: SessionRouting::default(),
        context_overflow_substrings: vec!["context length".into()],
        context_overflow_rate_limit: 0.01,
        dag_fail_fast: false,
        scenario: None,
        submission_invalid_reasons: Vec::new(),
    }
}

fn sim(faults: Vec<(Fault, f64)>, itl_ms: u64) -> SimHandle {
    Simulator::spawn(SimConfig {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(itl_ms),
        fault_rates: faults,
        stall_limit: Duration::from_secs(20),
        record_requests: 100_000,
        ..SimConfig::default()
    })
    .unwrap()
}

struct Run {
    records: Vec<RequestRecord>,
    bodies: Vec<Value>,
    stop: Stopper,
    warmup: WarmupStats,
    /// What profiling did with the spawns and joins.
    branch: BranchStats,
}

async fn run(
    sim: &SimHandle,
    s: AgentxSettings,
    concurrency: usize,
    duration: Option<Duration>,
    grace: Option<Duration>,
) -> Run {
    run_only(sim, s, concurrency, duration, grace, None, Arc::new(Plain)).await
}

/// fx-simple-001 alone on one lane, to its end.
async fn simple_001(sim: &SimHandle, s: AgentxSettings) -> Run {
    run_only(
        sim,
        s,
        1,
        None,
        None,
        Some("fx-simple-001"),
        Arc::new(Plain),
    )
    .await
}

/// [`run`] on one trace of the fixtures only, when `only` names it, with the prompts from
/// `messages`.
async fn run_only(
    sim: &SimHandle,
    s: AgentxSettings,
    concurrency: usize,
    duration: Option<Duration>,
    grace: Option<Duration>,
    only: Option<&str>,
    messages: Arc<dyn TurnMessages>,
) -> Run {
    use clap::Parser;
    let cli = crate::cli::Cli::try_parse_from(["specperf", "replay"]).unwrap();
    let crate::cli::Command::Replay(a) = cli.command else {
        panic!("not replay")
    };
    let cfg = RunConfig::from_args(&a).unwrap();
    let mut traces = load(&s.input, &s.load).unwrap().traces;
    traces.retain(|t| only.is_none_or(|id| t.id == id));
    let (tx, mut rx) = mpsc::channel(1024);
    let collect = tokio::spawn(async move {
        let mut v = Vec::new();
        while let Some(r) = rx.recv().await {
            v.push(r);
        }
        v
    });
    let stop = Stopper::new();
    let mut replay = Replay::new(ReplayInputs {
        client: Client::new(cfg.client.clone()).unwrap(),
        uri: format!("{}/v1/chat/completions", sim.url())
            .parse()
            .unwrap(),
        clock: Clock::new(),
        tx,
        traces: traces.into_iter().map(Arc::new).collect(),
        messages,
        wire: Wire {
            model: "specperf-sim".into(),
            streaming: true,
            legacy_max_tokens: false,
            extra_inputs: Default::default(),
            routing: s.routing.clone(),
        },
        settings: s,
        concurrency,
        duration,
        grace,
        stop: stop.clone(),
        progress: None,
        benchmark_id: None,
    });
    let bounded = async {
        let warmup = replay.warmup().await;
        let (_, branch) = replay.profile().await;
        (warmup, branch)
    };
    let (warmup, branch) = tokio::time::timeout(Duration::from_secs(60), bounded)
        .await
        .expect("the replay ends");
    let records = collect.await.unwrap();
    Run {
        records,
        bodies: sim.requests(),
        stop,
        warmup,
        branch,
    }
}

fn meta(r: &RequestRecord) -> &SessionMeta {
    r.session.as_deref().expect("every record has its session")
}

/// Records of one tree, in send order.
fn trees(records: &[RequestRecord]) -> BTreeMap<String, Vec<&RequestRecord>> {
    let mut m: BTreeMap<String, Vec<&RequestRecord>> = BTreeMap::new();
    for r in records {
        m.entry(meta(r).root_correlation_id.clone())
            .or_default()
            .push(r);
    }
    for v in m.values_mut() {
        v.sort_by_key(|r| r.sent_ns);
    }
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warmup_then_profiling_spawns_joins_recycles_and_keeps_one_marker_per_tree() {
    let sim = sim(Vec::new(), 1);
    let r = run(
        &sim,
        settings((0.25, 0.75)),
        3,
        Some(Duration::from_secs(6)),
        None,
    )
    .await;
    assert_eq!(r.stop.reason(), None);
    // Warmup primers (max_tokens 1) come first, then profiling.
    let warm: Vec<_> = r
        .records
        .iter()
        .filter(|x| x.phase == Phase::Warmup)
        .collect();
    assert!(r.warmup.primers >= 3 && warm.len() as u64 == r.warmup.primers);
    let first_prof = r
        .records
        .iter()
        .filter(|x| x.phase == Phase::Profiling)
        .map(|x| x.sent_ns)
        .min()
        .unwrap();
    assert!(
        warm.iter().all(|w| w.end_ns <= first_prof),
        "warmup drains first"
    );
    let one_token = r
        .bodies
        .iter()
        .filter(|b| b["max_completion_tokens"] == 1)
        .count();
    assert!(one_token >= warm.len());
    for b in &r.bodies {
        assert_eq!(b["ignore_eos"], true);
        assert_eq!(b["stream_options"]["include_usage"], true);
    }
    assert!(r.records.iter().all(|x| x.outcome == Outcome::Success));

    let by_tree = trees(&r.records);
    let mut joined = 0;
    let mut background = 0;
    for recs in by_tree.values() {
        let m0 = meta(recs[0]);
        if m0.source_trace_id != "fx-subagent-002" {
            continue;
        }
        let of = |conv: &str| -> Vec<&&RequestRecord> {
            recs.iter()
                .filter(|x| meta(x).conversation_id == conv)
                .collect()
        };
        let root = of("fx-subagent-002");
        let explore = of("fx-subagent-002::sa:explore_001");
        let general = of("fx-subagent-002::sa:general_001");
        // A tree from turn 0 (recycled): k1 spawns explore, k2 joins it, k2 spawns general.
        if root.first().is_some_and(|x| x.turn == 0) && root.iter().any(|x| x.turn == 2) {
            let k1 = root.iter().find(|x| x.turn == 1).unwrap();
            let k2 = root.iter().find(|x| x.turn == 2).unwrap();
            assert_eq!(explore.len(), 3, "every explore turn");
            assert!(
                explore.iter().all(|e| e.sent_ns >= k1.end_ns),
                "spawned on k1"
            );
            let last_explore = explore.iter().map(|e| e.end_ns).max().unwrap();
            assert!(k2.sent_ns >= last_explore, "k2 waits for explore to finish");
            assert!(
                general.iter().all(|g| g.sent_ns >= k2.end_ns),
                "spawned on k2"
            );
            joined += 1;
            if general.len() == 2 {
                background += 1;
            }
        }
        // Subagents carry the tree's ids.
        for x in explore.iter().chain(&general) {
            let m = meta(x);
            assert_eq!(m.agent_depth, 1);
            assert_eq!(m.source_kind, "weka_subagent");
            assert_eq!(
                m.parent_correlation_id.as_deref(),
                Some(m0.root_correlation_id.as_str())
            );
            assert_ne!(m.x_correlation_id, m.root_correlation_id);
        }
    }
    assert!(joined >= 1, "a recycled subagent tree ran through its join");
    assert!(background >= 1, "the background subagent ran to its end");

    // A lane's next tree starts only after its previous tree drained, children included.
    let mut lanes: BTreeMap<usize, Vec<(u64, u64)>> = BTreeMap::new();
    for recs in by_tree.values() {
        let first = recs.iter().map(|x| x.sent_ns).min().unwrap();
        let last = recs.iter().map(|x| x.end_ns).max().unwrap();
        lanes
            .entry(meta(recs[0]).lane)
            .or_default()
            .push((first, last));
    }
    for (lane, mut t) in lanes {
        t.sort();
        for w in t.windows(2) {
            assert!(
                w[1].0 >= w[0].1,
                "lane {lane}: tree started before the last drained"
            );
        }
    }

    // One marker per tree: as many distinct markers as trees, each naming the body's own trace;
    // recycling a trace gives it the next pass.
    let mut markers: BTreeSet<String> = BTreeSet::new();
    let mut passes: HashMap<String, BTreeSet<u64>> = HashMap::new();
    for b in &r.bodies {
        let content = b["messages"][0]["content"].as_str().unwrap();
        let marker = content.split("\n\n").next().unwrap();
        let inner = marker.trim_start_matches("[rid:").trim_end_matches(']');
        let mut parts = inner.splitn(3, ':');
        let pass: u64 = parts.next().unwrap().parse().unwrap();
        let _lane = parts.next().unwrap();
        let base = parts.next().unwrap();
        let body_trace = content.split("\n\n").nth(1).unwrap();
        assert!(body_trace.starts_with(base), "{marker} on {body_trace}");
        markers.insert(marker.to_owned());
        passes.entry(base.to_owned()).or_default().insert(pass);
    }
    assert_eq!(markers.len(), by_tree.len(), "one marker per tree");
    for (base, p) in passes {
        let want: BTreeSet<u64> = (0..p.len() as u64).collect();
        assert_eq!(p, want, "{base}: passes count up from 0");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_end_of_the_duration_cancels_what_is_in_flight_as_cancelled() {
    // Every request stalls: the warmup grace cancels the primers (not a failure), profiling
    // starts, and the duration's end plus grace cancels the in-flight profiling requests.
    let sim = sim(vec![(Fault::Stall, 1.0)], 1);
    let mut s = settings((0.25, 0.75));
    s.warmup_grace = Duration::from_millis(300);
    let r = run(
        &sim,
        s,
        3,
        Some(Duration::from_millis(500)),
        Some(Duration::from_millis(200)),
    )
    .await;
    assert!(r.warmup.grace_expired);
    assert_eq!(
        r.stop.reason(),
        None,
        "grace expiry is not a warmup failure"
    );
    let prof: Vec<_> = r
        .records
        .iter()
        .filter(|x| x.phase == Phase::Profiling)
        .collect();
    assert!(!prof.is_empty());
    assert!(
        prof.iter().all(|x| x.outcome == Outcome::Cancelled),
        "{:?}",
        prof.iter().map(|x| x.outcome).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_failed_threshold_stops_the_run() {
    // t* at the first turn: no primer. Every request fails; errors are not terminal, so the
    // sessions go on until the threshold (armed at max(3, 10) records) stops the run.
    let sim = sim(vec![(Fault::Http500, 1.0)], 1);
    let mut s = settings((0.0, 0.0));
    s.live_failed_threshold = Some(0.5);
    let r = run(&sim, s, 3, Some(Duration::from_secs(60)), None).await;
    assert_eq!(r.stop.reason(), Some(StopReason::FailedThreshold));
    let failed = r
        .records
        .iter()
        .filter(|x| matches!(x.outcome, Outcome::Failed(_)))
        .count();
    assert!(failed >= 10, "{failed}");
    assert!(r.records.iter().all(|x| x.phase == Phase::Profiling));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_root_primer_aborts_the_run() {
    let sim = sim(vec![(Fault::Http500, 1.0)], 1);
    let r = run(
        &sim,
        settings((0.5, 0.5)),
        3,
        Some(Duration::from_secs(60)),
        None,
    )
    .await;
    assert_eq!(r.stop.reason(), Some(StopReason::WarmupFailed));
    assert!(r.records.iter().all(|x| x.phase == Phase::Warmup));
    // The console names the request that failed and why, not only `warmup_failed`.
    let why = r.warmup.failure.as_deref().expect("the failure is kept");
    assert!(
        why.contains(" turn ") && why.contains("(lane ") && why.contains("http_status: HTTP 500"),
        "{why}"
    );
    let first = r
        .records
        .iter()
        .find(|x| why.starts_with(&x.session.as_ref().unwrap().conversation_id))
        .expect("the named conversation has a record");
    assert!(matches!(first.outcome, Outcome::Failed(_)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warmup_requests_per_lane_continue_the_tree_then_hand_off() {
    let sim = sim(Vec::new(), 1);
    let mut s = settings((0.0, 0.0));
    s.warmup_requests_per_lane = 2;
    // No duration: each lane replays its (advanced) tree once.
    let r = run(&sim, s, 3, None, None).await;
    assert_eq!(r.stop.reason(), None);
    assert_eq!(r.warmup.primers, 0);
    assert_eq!(r.warmup.per_lane, 6);
    for recs in trees(&r.records).values() {
        let root: Vec<_> = recs.iter().filter(|x| meta(x).agent_depth == 0).collect();
        let turns: Vec<(Phase, u32)> = root.iter().map(|x| (x.phase, x.turn)).collect();
        // Root turns 0 and 1 (the earliest recorded) warm up, profiling continues at turn 2.
        assert_eq!(turns[0], (Phase::Warmup, 0), "{turns:?}");
        assert!(
            turns.iter().all(|(p, t)| (*p == Phase::Warmup) == (*t < 2)
                || meta(recs[0]).source_trace_id == "fx-tiered-003"),
            "{turns:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lane_whose_tree_drains_in_warmup_profiles_a_recycled_tree() {
    // InferenceX's default --warmup-requests-per-lane 10 is more than any fixture tree holds
    // (5 to 9 requests): every lane's tree drained in warmup, the lanes were dropped, and
    // profiling sent nothing. Each lane now starts profiling with the next root.
    let sim = sim(Vec::new(), 1);
    let mut s = settings((0.0, 0.0));
    s.warmup_requests_per_lane = 10;
    let r = run(
        &sim,
        s,
        3,
        Some(Duration::from_secs(2)),
        Some(Duration::from_secs(5)),
    )
    .await;
    assert_eq!(r.stop.reason(), None);
    let lanes: BTreeSet<usize> = r
        .records
        .iter()
        .filter(|x| x.phase == Phase::Profiling)
        .map(|x| meta(x).lane)
        .collect();
    assert_eq!(lanes, BTreeSet::from([0, 1, 2]), "every lane profiles");
}

/// One lane of fx-subagent-002 from turn 0 for 9 s, decoding slowly (10 ms a step) so
/// general_001 (500 + 300 tokens) outlives the root's last turn; the lane recycles once the tree
/// drains.
async fn background_subagent_run(messages: Arc<dyn TurnMessages>) -> Run {
    let sim = sim(Vec::new(), 10);
    run_only(
        &sim,
        settings((0.0, 0.0)),
        1,
        Some(Duration::from_secs(9)),
        Some(Duration::from_secs(10)),
        Some("fx-subagent-002"),
        messages,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_subagent_keeps_the_lane_until_it_drains() {
    let r = background_subagent_run(Arc::new(Plain)).await;
    let mut trees: Vec<Vec<&RequestRecord>> = trees(&r.records).into_values().collect();
    trees.sort_by_key(|t| t[0].sent_ns);
    assert!(trees.len() >= 2, "the lane recycled");
    let first = &trees[0];
    let end_of = |conv: &str| {
        first
            .iter()
            .filter(|x| meta(x).conversation_id == conv)
            .map(|x| x.end_ns)
            .max()
            .unwrap()
    };
    let root_end = end_of("fx-subagent-002");
    let general_end = end_of("fx-subagent-002::sa:general_001");
    assert!(
        general_end > root_end,
        "the background child outlives the root here"
    );
    assert!(
        trees[1][0].sent_ns >= general_end,
        "the next tree waits for the background child"
    );
    assert_eq!(meta(trees[1][0]).conversation_id, "fx-subagent-002");
    assert_eq!(trees[1][0].turn, 0, "a recycled tree starts at turn 0");
}

/// [`Plain`]'s prompts, with each conversation's creation, turns asked and drop logged in order.
struct Logged(Arc<Mutex<Vec<String>>>);

struct LoggedConv(PlainConv, Arc<Mutex<Vec<String>>>);

impl ConvMessages for LoggedConv {
    fn turn(&mut self, k: usize) -> Result<Vec<Message>, String> {
        lock(&self.1).push(format!("turn {} {k}", self.0 .0));
        self.0.turn(k)
    }
}

impl Drop for LoggedConv {
    fn drop(&mut self) {
        lock(&self.1).push(format!("drop {}", self.0 .0));
    }
}

impl TurnMessages for Logged {
    fn conversation(&self, trace: &Arc<Trace>, conv: ConvRef) -> Box<dyn ConvMessages> {
        let session = trace.conversation(conv).session_id.clone();
        lock(&self.0).push(format!("new {session}"));
        Box::new(LoggedConv(PlainConv(session), self.0.clone()))
    }
    fn marker(&self, bid: &str, pass: u64, lane: usize, base: &str) -> String {
        Plain.marker(bid, pass, lane, base)
    }
    fn apply_marker(&self, messages: &mut [Message], marker: &str) {
        Plain.apply_marker(messages, marker)
    }
}

/// A conversation's prompt state (its context's segments and block offsets) goes as its last
/// turn is made, not when its whole tree drains: here the root's, while its background
/// subagent still has turns to make.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_s_prompt_state_goes_with_its_last_turn() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let r = background_subagent_run(Arc::new(Logged(log.clone()))).await;
    assert!(trees(&r.records).len() >= 2, "the first tree drained");
    let log = lock(&log).clone();
    let root = "fx-subagent-002";
    let child = "fx-subagent-002::sa:general_001";
    // The first tree's events: up to the second tree's root.
    let second = log
        .iter()
        .enumerate()
        .filter(|(_, e)| *e == &format!("new {root}"))
        .nth(1)
        .map(|(i, _)| i)
        .expect("a second tree");
    let first = &log[..second];
    let at = |e: &str| first.iter().position(|x| x == e);
    let last_turn = |conv: &str| {
        first
            .iter()
            .rposition(|x| x.starts_with(&format!("turn {conv} ")))
            .unwrap()
    };
    let dropped = |conv: &str| at(&format!("drop {conv}")).expect("its state dropped");
    let explore = "fx-subagent-002::sa:explore_001";
    for conv in [root, explore] {
        assert!(
            last_turn(conv) < dropped(conv) && dropped(conv) < last_turn(child),
            "{conv}'s state went after its last turn, before the background child's: {first:#?}"
        );
    }
    assert!(dropped(child) > last_turn(child), "{first:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_overflow_ends_its_session_and_other_errors_do_not() {
    // Every answer is an error; with its text among the overflow substrings each session ends
    // after its first turn (flagged), without it every session moves on (spec §3.4).
    let sim = sim(vec![(Fault::Http500, 1.0)], 1);
    let mut s = settings((0.0, 0.0));
    s.context_overflow_substrings = vec!["SIMULATED Server".into()];
    let r = simple_001(&sim, s).await;
    assert_eq!(r.records.len(), 1, "the root ended at its first turn");
    assert!(meta(&r.records[0]).context_overflow);

    let mut s = settings((0.0, 0.0));
    s.context_overflow_substrings = vec!["context length".into()];
    let r = simple_001(&sim, s).await;
    let turns: Vec<u32> = r.records.iter().map(|x| x.turn).collect();
    assert_eq!(turns, [0, 1, 2, 3, 4], "errors are not terminal");
    assert!(r.records.iter().all(|x| !meta(x).context_overflow));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_system_idle_cap_collapses_a_400_s_gap() {
    // fx-simple-001 waits 400 s before turn 2. No per-tree cap: only the 100 ms system cap can
    // bring it within the test's bound.
    let sim = sim(Vec::new(), 1);
    let mut s = settings((0.0, 0.0));
    s.trace_idle_cap = None;
    let r = simple_001(&sim, s).await;
    let turns: Vec<u32> = r.records.iter().map(|x| x.turn).collect();
    assert_eq!(turns, [0, 1, 2, 3, 4]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tree_idle_cap_collapses_a_400_s_gap() {
    // The same gap with the system cap out of reach: the per-tree cap advances the tree's timers.
    let sim = sim(Vec::new(), 1);
    let mut s = settings((0.0, 0.0));
    s.system_idle_cap = Duration::from_secs(3600);
    let r = simple_001(&sim, s).await;
    let turns: Vec<u32> = r.records.iter().map(|x| x.turn).collect();
    assert_eq!(turns, [0, 1, 2, 3, 4]);
}

/// Peak resident memory and CPU seconds of this process so far (Linux; zeros elsewhere).
fn usage() -> (u64, f64) {
    let hwm_kb = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0);
    let cpu = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let f: Vec<&str> = s.rsplit_once(')')?.1.split_whitespace().collect();
            let t: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
            Some(t / 100.0)
        })
        .unwrap_or(0.0);
    (hwm_kb, cpu)
}

/// 1,536 lanes on the fixture traces for 8 s against the in-process simulator: prints requests,
/// peak memory and CPU (client and simulator together). A measurement, not a check: run with
/// `cargo test --lib agentx_at_1536_lanes -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement; see its doc"]
async fn agentx_at_1536_lanes() {
    let sim = sim(Vec::new(), 10);
    let (_, cpu0) = usage();
    let t0 = std::time::Instant::now();
    let r = run(
        &sim,
        settings((0.25, 0.75)),
        1536,
        Some(Duration::from_secs(8)),
        Some(Duration::from_secs(30)),
    )
    .await;
    let (hwm_kb, cpu1) = usage();
    let n = r.records.len();
    let trees = trees(&r.records).len();
    let ok = r.records.iter().filter(|x| x.outcome.is_success()).count();
    println!(
        "1536 lanes: {n} requests ({ok} ok, {} warmup) over {trees} trees in {:.1} s; peak RSS {} MiB; \
         CPU {:.1} s ({:.2} s per 1,000 requests)",
        r.warmup.primers + r.warmup.per_lane,
        t0.elapsed().as_secs_f64(),
        hwm_kb / 1024,
        cpu1 - cpu0,
        (cpu1 - cpu0) / n.max(1) as f64 * 1000.0
    );
    assert!(n > 1536);
}

/// The engine with `RunConfig::agentx`: prepare loads the traces (and the tokenizer), the run
/// goes through the lane scheduler, the aggregator writes every record with its session. The
/// prompt double stands in for the synthesizer (its bodies land with the prompt slice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_runs_the_lane_scheduler_when_the_run_is_agentx() {
    use clap::Parser;
    let tok = crate::test_tools::Tool::Dsv4Tokenizer.path();
    let dir = tempfile::tempdir().unwrap();
    let art = dir.path().join("a");
    let cli = crate::cli::Cli::try_parse_from([
        "specperf",
        "replay",
        "--concurrency",
        "3",
        "--benchmark-duration",
        "3",
        "--artifact-dir",
        art.to_str().unwrap(),
        "--no-server-metrics",
    ])
    .unwrap();
    let crate::cli::Command::Replay(a) = cli.command else {
        panic!("not replay")
    };
    let mut cfg = RunConfig::from_args(&a).unwrap();
    let mut s = settings((0.25, 0.75));
    s.tokenizer = tok;
    cfg.agentx = Some(Box::new(s));
    let stop = Stopper::new();
    let (progress, _) = tokio::sync::watch::channel(crate::progress::Progress::default());
    let (mut ready, files) = super::super::prepare::prepare(cfg, &stop, &progress)
        .await
        .unwrap();
    ready.agentx.as_mut().unwrap().messages = Arc::new(Plain);
    let measured = tokio::time::timeout(
        Duration::from_secs(60),
        super::super::phase::run(&ready, files, None, &stop, progress),
    )
    .await
    .unwrap();
    let out = super::super::finish::finish(ready, measured, &stop);
    assert_eq!(out.stopped_by, None);
    let text = std::fs::read_to_string(art.join("records.jsonl")).unwrap();
    let recs: Vec<RequestRecord> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(recs.iter().any(|r| r.phase == Phase::Warmup));
    assert!(recs.iter().any(|r| r.phase == Phase::Profiling));
    assert!(recs.iter().all(|r| r.session.is_some()));
    assert!(recs
        .iter()
        .any(|r| meta(r).conversation_id.contains("::sa:")));
    assert_eq!(
        out.summary.counts.success,
        recs.iter().filter(|r| r.phase == Phase::Profiling).count() as u64
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_that_overlapped_its_spawning_turn_starts_as_the_turn_is_sent() {
    // Root turn 0 took 5 s in the capture; the subagent started 1 s in, its first request 1.1 s
    // in. Replayed, the child's turn 0 goes out 1.1 s after the root turn is sent, while that
    // turn (150 tokens at 20 ms) is still streaming; the join turn still waits for the child.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("traces.jsonl");
    let req = |t: f64, inn: u64, out: u64, ids: &[u32], api: f64| {
        serde_json::json!({"t": t, "type": "n", "model": "m", "in": inn, "out": out,
            "hash_ids": ids, "input_types": ["text"], "output_types": ["text"], "stop": "",
            "api_time": api, "think_time": 0.0})
    };
    let trace = serde_json::json!({
        "id": "overlap-001", "models": ["m"], "block_size": 64, "hash_id_scope": "local",
        "requests": [
            req(0.0, 128, 150, &[1, 2], 5.0),
            {"t": 1.0, "type": "subagent", "agent_id": "early_001", "subagent_type": "Explore",
             "duration_ms": 2000, "total_tokens": null, "tool_use_count": null,
             "status": "completed", "models": ["m"],
             "requests": [req(1.1, 128, 5, &[7, 8], 0.3)]},
            req(6.0, 256, 5, &[1, 2, 3, 4], 0.5),
        ],
    });
    std::fs::write(&path, format!("{trace}\n")).unwrap();
    let sim = sim(Vec::new(), 20);
    let mut s = settings((0.0, 0.0));
    s.input = path;
    let r = run(&sim, s, 1, None, None).await;
    let find = |conv: &str, k: u32| {
        r.records
            .iter()
            .find(|x| meta(x).conversation_id == conv && x.turn == k)
            .unwrap_or_else(|| panic!("{conv} turn {k} replayed"))
    };
    let (root0, child, root1) = (
        find("overlap-001", 0),
        find("overlap-001::sa:early_001", 0),
        find("overlap-001", 1),
    );
    let after_send = child.sent_ns - root0.sent_ns;
    assert!(
        child.sent_ns < root0.end_ns,
        "the child starts while its spawning turn streams"
    );
    assert!(
        after_send >= 1_000_000_000,
        "1.1 s after the spawning turn was sent: {after_send} ns"
    );
    assert!(root1.sent_ns >= child.end_ns, "the join still waits");
}

/// One root with a subagent spawned by turn 0 (`sa_api` s of work, 5 tokens) and joined by the
/// last root turn; `mid` adds a root turn of `mid_out` tokens between the spawn and the join
/// (recorded 0.5 s after the spawn, taking 2 s). The join turn is recorded 1.5 s after its
/// previous turn's end.
fn join_trace(dir: &Path, mid: bool, mid_out: u64) -> std::path::PathBuf {
    let req = |t: f64, inn: u64, out: u64, ids: &[u32], api: f64| {
        serde_json::json!({"t": t, "type": "n", "model": "m", "in": inn, "out": out,
            "hash_ids": ids, "input_types": ["text"], "output_types": ["text"], "stop": "",
            "api_time": api, "think_time": 0.0})
    };
    let mut requests = vec![
        req(0.0, 128, 2, &[1, 2], 0.2),
        serde_json::json!({"t": 0.3, "type": "subagent", "agent_id": "quick_001",
            "subagent_type": "Explore", "duration_ms": 400, "total_tokens": null,
            "tool_use_count": null, "status": "completed", "models": ["m"],
            "requests": [req(0.3, 128, 5, &[7, 8], 0.3)]}),
    ];
    let last_end = if mid {
        requests.push(req(0.5, 192, mid_out, &[1, 2, 3], 2.0));
        2.5
    } else {
        0.2
    };
    requests.push(req(last_end + 1.5, 256, 2, &[1, 2, 3, 4], 0.2));
    let trace = serde_json::json!({
        "id": "join-001", "models": ["m"], "block_size": 64, "hash_id_scope": "local",
        "requests": requests,
    });
    let path = dir.join("traces.jsonl");
    std::fs::write(&path, format!("{trace}\n")).unwrap();
    path
}

/// The replay of [`join_trace`] with no idle cap that could shorten the recorded delay.
async fn join_run(path: std::path::PathBuf) -> Vec<RequestRecord> {
    let sim = sim(Vec::new(), 20);
    let mut s = settings((0.0, 0.0));
    s.input = path;
    s.trace_idle_cap = None;
    s.system_idle_cap = Duration::from_secs(30);
    let mut r = run(&sim, s, 1, None, None).await;
    r.records.retain(|x| x.phase == Phase::Profiling);
    r.records.sort_by_key(|x| x.sent_ns);
    r.records
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_whose_children_finished_first_keeps_its_recorded_delay() {
    // The child (5 tokens, ~0.1 s) ends while root turn 1 (100 tokens at 20 ms, ~2 s) streams:
    // when turn 1 returns the gate is already satisfied, so the join turn goes the normal way,
    // 1.5 s after turn 1's end, as AIPerf 0.13 sends it (not at once).
    let dir = tempfile::tempdir().unwrap();
    let recs = join_run(join_trace(dir.path(), true, 100)).await;
    let find = |conv: &str, k: u32| {
        recs.iter()
            .find(|x| meta(x).conversation_id == conv && x.turn == k)
            .unwrap_or_else(|| panic!("{conv} turn {k} replayed"))
    };
    let (child, root1, root2) = (
        find("join-001::sa:quick_001", 0),
        find("join-001", 1),
        find("join-001", 2),
    );
    assert!(child.end_ns < root1.end_ns, "the child ends first");
    let gap = root2.sent_ns - root1.end_ns;
    assert!(
        gap >= 1_400_000_000,
        "the join turn keeps its 1.5 s delay: sent {gap} ns after turn 1 returned"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_blocked_at_its_join_fires_as_the_last_child_ends() {
    // Turn 0 returns before its child has even started: the parent waits at the gate and the
    // join turn goes out as soon as the child ends, without its recorded 1.5 s delay.
    let dir = tempfile::tempdir().unwrap();
    let recs = join_run(join_trace(dir.path(), false, 0)).await;
    let find = |conv: &str, k: u32| {
        recs.iter()
            .find(|x| meta(x).conversation_id == conv && x.turn == k)
            .unwrap_or_else(|| panic!("{conv} turn {k} replayed"))
    };
    let (root0, child, root1) = (
        find("join-001", 0),
        find("join-001::sa:quick_001", 0),
        find("join-001", 1),
    );
    assert!(child.sent_ns >= root0.end_ns, "spawned as turn 0 returned");
    assert!(
        root1.sent_ns >= child.end_ns,
        "the join waits for the child"
    );
    let gap = root1.sent_ns - child.end_ns;
    assert!(
        gap < 500_000_000,
        "fired at once when the child ended, not after the delay: {gap} ns"
    );
}

/// Issue 27 §3.2: AIPerf 0.13's labels. Chains split off the top-level requests (`<trace>::fa:`,
/// `::aux:`, `::wg:`) are `weka_flat`, a subagent's own chains `weka_subagent`; `session_num`
/// counts each phase's requests from 0 (AIPerf's credit number, restarted for profiling); and
/// every record carries the output length its body asked for (AIPerf's requested OSL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_carry_aiperf_source_kinds_phase_session_numbers_and_requested_lengths() {
    let sim = sim(Vec::new(), 1);
    // t* mid-trace, so there are primers (a warmup phase) as well as profiling requests.
    let mut s = settings((0.5, 0.5));
    s.input = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agentx/split");
    let r = run(&sim, s, 3, Some(Duration::from_secs(4)), None).await;
    let mut kinds = BTreeSet::new();
    for x in &r.records {
        let m = meta(x);
        let want = match m.conversation_id.split_once("::") {
            None => "weka_main",
            Some((_, rest)) if rest.starts_with("sa:") => "weka_subagent",
            Some(_) => "weka_flat",
        };
        assert_eq!(m.source_kind, want, "{}", m.conversation_id);
        kinds.insert(want);
    }
    assert!(
        kinds.contains("weka_flat"),
        "no flat chain replayed: {kinds:?}"
    );
    for phase in [Phase::Warmup, Phase::Profiling] {
        let mut nums: Vec<u64> = r
            .records
            .iter()
            .filter(|x| x.phase == phase)
            .map(|x| meta(x).session_num)
            .collect();
        assert!(!nums.is_empty(), "{phase:?} sent requests");
        nums.sort_unstable();
        let want: Vec<u64> = (0..nums.len() as u64).collect();
        assert_eq!(nums, want, "{phase:?}: one number per request, from 0");
    }
    let mut asked: Vec<u64> = r
        .bodies
        .iter()
        .map(|b| b["max_completion_tokens"].as_u64().unwrap())
        .collect();
    let mut recorded: Vec<u64> = r.records.iter().map(|x| x.requested_osl.unwrap()).collect();
    asked.sort_unstable();
    recorded.sort_unstable();
    assert_eq!(recorded, asked, "each record's requested OSL is its body's");
    assert!(r
        .records
        .iter()
        .filter(|x| x.phase == Phase::Warmup)
        .all(|x| x.requested_osl == Some(1)));
}

/// Issue 27 §3.3: the branch counts agree with the records. Every spawned child ends one way
/// (completed, errored or cut short by the end of the run); every suspended parent resumes or
/// has its join suppressed; a child counts as completed exactly when its last turn answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn branch_stats_account_for_every_child_and_suspended_parent() {
    let sim = sim(Vec::new(), 1);
    let s = settings((0.25, 0.75));
    let traces = load(&s.input, &s.load).unwrap().traces;
    let r = run(&sim, s, 3, Some(Duration::from_secs(6)), None).await;
    let b = r.branch;
    assert!(b.children_spawned > 0 && b.parents_suspended > 0, "{b:?}");
    assert_eq!(
        b.children_spawned,
        b.children_completed + b.children_errored + b.children_truncated,
        "{b:?}"
    );
    assert_eq!(
        b.parents_suspended,
        b.parents_resumed + b.joins_suppressed + b.parents_failed_due_to_child_error,
        "{b:?}"
    );
    assert!(b.children_delayed <= b.children_spawned);
    assert_eq!((b.graphs_admitted, b.graphs_completed_to_end), (0, 0));
    // Completed children, from the records: a profiling success of a child's last turn.
    let last_turn: HashMap<&str, usize> = traces
        .iter()
        .flat_map(|t| t.children.iter())
        .map(|c| (c.session_id.as_str(), c.turns.len() - 1))
        .collect();
    let completed = r
        .records
        .iter()
        .filter(|x| x.phase == Phase::Profiling && x.outcome == Outcome::Success)
        .filter(|x| {
            let m = meta(x);
            last_turn.get(m.conversation_id.as_str()) == Some(&(x.turn as usize))
        })
        .count() as u64;
    assert_eq!(b.children_completed, completed, "{b:?}");
}
