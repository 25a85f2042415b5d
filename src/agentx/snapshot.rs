//! Trajectories (spec §3.2): which trace each lane replays and where in it the replay starts.
//!
//! Pure: no clock, no I/O. The lane scheduler (`engine::agentx`) asks [`lane_trace`] for the
//! trace of lane `i`, [`t_star_ms`] for the lane's seeded start instant t*, and [`snapshot`] for
//! the state of every stream of the tree at t*: the root's next turn (or none: a rootless lane),
//! the children already spawned by then with their next turns, which root turn waits on them,
//! and how long after t* each next turn was recorded. Warmup primers send turn `next − 1` of
//! every state ([`StreamState::primer`]).

use super::default_rng::DefaultRng;
use super::prompt::ConvRef;
use super::{StartRatios, Trace};

/// Lane `lane` replays trace `lane mod n_traces` first: the sequential sampler over roots in
/// dataset order, wrapping (spec §3.2 step 1). Later trees of the lane come from the shared
/// recycle counter, which continues after the first `concurrency` draws.
pub fn lane_trace(lane: usize, n_traces: usize) -> usize {
    lane % n_traces.max(1)
}

/// The seed of a lane's t* draw: the first 8 bytes, big-endian, of
/// `SHA-256("{random_seed}:{trace_id}:{lane}")` (AIPerf's `_seed_for_trace_lane`).
pub fn t_star_seed(random_seed: u64, trace_id: &str, lane: usize) -> u64 {
    super::hash64(&format!("{random_seed}:{trace_id}:{lane}"))
}

/// t*, ms: uniform in the trace's window ([`Trace::t_star_window_ms`]), drawn as AIPerf draws it:
/// `np.random.default_rng(t_star_seed(..)).uniform(lo, hi)`, the same f64 bit for bit; `lo` when
/// the window is empty.
pub fn t_star_ms(trace: &Trace, lane: usize, random_seed: u64, ratios: StartRatios) -> f64 {
    let (lo, hi) = trace.t_star_window_ms(ratios);
    draw_in_window(t_star_seed(random_seed, &trace.id, lane), lo, hi)
}

fn draw_in_window(seed: u64, lo: f64, hi: f64) -> f64 {
    if hi <= lo {
        return lo;
    }
    DefaultRng::new(seed).uniform(lo, hi)
}

/// One stream of a tree at t*.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamState {
    /// The root or a child conversation.
    pub conv: ConvRef,
    /// Its next turn: the first one recorded at or after t*.
    pub next: usize,
    /// `max(0, ts(next) − t*)`, ms: when the next turn fires after profiling starts (before the
    /// leading shift).
    pub next_dispatch_offset_ms: f64,
    /// Root only: its next turn is the join of a branch with a live child; it fires when they
    /// finish, not at its offset.
    pub waiting_on_children: bool,
}

impl StreamState {
    /// The warmup primer: turn `next − 1`, sent with the full prefix and `max_tokens` 1.
    pub fn primer(&self) -> Option<usize> {
        self.next.checked_sub(1)
    }
}

/// Every stream of one tree at t*.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    /// The instant, ms on the trace's clock.
    pub t_star_ms: f64,
    /// The root's state first (absent for a rootless lane), then the live children in branch
    /// order.
    pub states: Vec<StreamState>,
    /// Branches already spawned at t* (their spawning turn is behind t*): the replay does not
    /// spawn them again; a join on one waits only for its children listed in `states`.
    pub spawned_branches: Vec<usize>,
}

impl Snapshot {
    /// The root's state, when the root has a turn at or after t*.
    pub fn root(&self) -> Option<&StreamState> {
        self.states.iter().find(|s| s.conv == ConvRef::Root)
    }

    /// No root turn is left: the lane holds only children (a lane credit keeps it counted).
    pub fn is_rootless(&self) -> bool {
        self.root().is_none()
    }

    /// The state of `conv`, if it is live.
    pub fn state(&self, conv: ConvRef) -> Option<&StreamState> {
        self.states.iter().find(|s| s.conv == conv)
    }
}

/// The first turn of `turns` recorded at or after `t`.
fn next_at_or_after(turns: &[super::Turn], t: f64) -> Option<usize> {
    turns.iter().position(|x| x.timestamp_ms >= t)
}

/// The tree's state at `t_star_ms` (spec §3.2 step 4). `None` when nothing is dispatchable (no
/// state, or only a waiting root): the lane then takes another root.
///
/// A branch is considered only when t* is at or after its start, or when its spawning root turn
/// is already behind t* (before the root's next turn, or every root turn is behind t*). A child
/// is live when it has a turn at or after t*; a child with none is omitted. The root waits on
/// its children when its next turn is the join of a branch with a live child.
pub fn snapshot(trace: &Trace, t_star_ms: f64) -> Option<Snapshot> {
    let root_next = next_at_or_after(&trace.root.turns, t_star_ms);
    let mut children = Vec::new();
    let mut spawned = Vec::new();
    let mut pending_joins = Vec::new();
    for (b, branch) in trace.branches.iter().enumerate() {
        let spawn_behind = trace
            .root
            .turns
            .get(branch.spawn_turn)
            .is_some_and(|t| t.timestamp_ms <= t_star_ms)
            && root_next.is_none_or(|n| n > branch.spawn_turn);
        if t_star_ms < branch.start_ms && !spawn_behind {
            continue;
        }
        spawned.push(b);
        let mut live = false;
        for &c in &branch.children {
            let turns = &trace.children[c].turns;
            if let Some(next) = next_at_or_after(turns, t_star_ms) {
                live = true;
                children.push(StreamState {
                    conv: ConvRef::Child(c),
                    next,
                    next_dispatch_offset_ms: (turns[next].timestamp_ms - t_star_ms).max(0.0),
                    waiting_on_children: false,
                });
            }
        }
        if live {
            if let Some(j) = branch.join_turn {
                pending_joins.push(j);
            }
        }
    }
    let mut states = Vec::with_capacity(children.len() + 1);
    if let Some(next) = root_next {
        states.push(StreamState {
            conv: ConvRef::Root,
            next,
            next_dispatch_offset_ms: (trace.root.turns[next].timestamp_ms - t_star_ms).max(0.0),
            waiting_on_children: pending_joins.contains(&next),
        });
    }
    states.extend(children);
    if states.iter().all(|s| s.waiting_on_children) {
        return None;
    }
    Some(Snapshot {
        t_star_ms,
        states,
        spawned_branches: spawned,
    })
}

/// A fresh tree from turn 0 (a recycled lane, never t*-sampled): the root at turn 0, nothing
/// spawned. `None` for a trace without root turns.
pub fn from_start(trace: &Trace) -> Option<Snapshot> {
    let first = trace.root.turns.first()?;
    Some(Snapshot {
        t_star_ms: first.timestamp_ms,
        states: vec![StreamState {
            conv: ConvRef::Root,
            next: 0,
            next_dispatch_offset_ms: 0.0,
            waiting_on_children: false,
        }],
        spawned_branches: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::{load, Corpus, LoadOptions};
    use super::*;

    fn corpus() -> Corpus {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agentx/traces.jsonl");
        load(&p, &LoadOptions::default()).unwrap()
    }

    fn trace<'a>(c: &'a Corpus, id: &str) -> &'a Trace {
        c.traces.iter().find(|t| t.id == id).unwrap()
    }

    fn child(t: &Trace, agent: &str) -> ConvRef {
        t.subagent(agent).unwrap()
    }

    /// (conv, next, primer, waiting) of every state.
    fn states(s: &Snapshot) -> Vec<(ConvRef, usize, Option<usize>, bool)> {
        s.states
            .iter()
            .map(|x| (x.conv, x.next, x.primer(), x.waiting_on_children))
            .collect()
    }

    fn ratios() -> StartRatios {
        StartRatios::new(0.25, 0.75).unwrap()
    }

    #[test]
    fn lanes_take_roots_in_order_and_wrap() {
        let got: Vec<usize> = (0..7).map(|l| lane_trace(l, 3)).collect();
        assert_eq!(got, [0, 1, 2, 0, 1, 2, 0]);
    }

    #[test]
    fn t_star_is_seeded_per_trace_and_lane_and_inside_the_window() {
        let c = corpus();
        let t = trace(&c, "fx-simple-001");
        let (lo, hi) = t.t_star_window_ms(ratios());
        assert_eq!((lo, hi), (103_750.0, 311_250.0));
        let draws: Vec<f64> = (0..32).map(|l| t_star_ms(t, l, 42, ratios())).collect();
        assert!(draws.iter().all(|d| (lo..=hi).contains(d)), "{draws:?}");
        assert_eq!(draws[3], t_star_ms(t, 3, 42, ratios()), "deterministic");
        assert_ne!(draws[3], draws[4], "per lane");
        assert_ne!(draws[3], t_star_ms(t, 3, 43, ratios()), "per seed");
        // The seed is the first 8 bytes of SHA-256("42:fx-simple-001:0"), big-endian.
        let d = ring::digest::digest(&ring::digest::SHA256, b"42:fx-simple-001:0");
        let want = u64::from_be_bytes(d.as_ref()[..8].try_into().unwrap());
        assert_eq!(t_star_seed(42, "fx-simple-001", 0), want);
    }

    /// t* against numpy and AIPerf themselves: `scripts/numpy_default_rng.py` prints numpy's
    /// `default_rng` outputs over 411 seeds (one- and two-word seeds, the edges) and 400 t*
    /// draws made the way AIPerf 0.13 makes them (its own seed function, then
    /// `default_rng(seed).uniform(lo, hi)`), over seeds, trace ids, lanes, ratios and empty
    /// windows; every value must match bit for bit.
    #[test]
    fn t_star_matches_aiperf_and_numpy_bit_for_bit() {
        use super::DefaultRng;
        let text = crate::test_tools::venv_script_stdout("numpy_default_rng.py");
        let (mut raw, mut rnd, mut tstar) = (0, 0, 0);
        for line in text.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let u = |i: usize| -> u64 { f[i].parse().unwrap() };
            match f[0] {
                "RAW" => {
                    let mut g = DefaultRng::new(u(1));
                    for i in 0..u(2) as usize {
                        assert_eq!(g.next_u64(), u(3 + i), "{line}");
                    }
                    raw += 1;
                }
                "RND" => {
                    assert_eq!(DefaultRng::new(u(1)).random().to_bits(), u(2), "{line}");
                    rnd += 1;
                }
                "TSTAR" => {
                    let bytes: Vec<u8> = (0..f[2].len())
                        .step_by(2)
                        .map(|i| u8::from_str_radix(&f[2][i..i + 2], 16).unwrap())
                        .collect();
                    let id = String::from_utf8(bytes).unwrap();
                    let seed = t_star_seed(u(1), &id, u(3) as usize);
                    let (lo, hi) = (f64::from_bits(u(4)), f64::from_bits(u(5)));
                    assert_eq!(draw_in_window(seed, lo, hi).to_bits(), u(6), "{line}");
                    tstar += 1;
                }
                _ => {}
            }
        }
        assert_eq!(
            (raw, rnd, tstar),
            (411, 411, 400),
            "the script's output is short"
        );
    }

    #[test]
    fn simple_trace_every_t_star_resumes_at_turn_2() {
        let c = corpus();
        let t = trace(&c, "fx-simple-001");
        for ts in [103_750.0, 200_000.0, 311_250.0] {
            let s = snapshot(t, ts).unwrap();
            assert_eq!(states(&s), [(ConvRef::Root, 2, Some(1), false)]);
            let off = s.states[0].next_dispatch_offset_ms;
            assert!((off - (406_500.0 - ts)).abs() < 1e-6, "{off}");
        }
        assert!(
            (snapshot(t, 103_750.0).unwrap().states[0].next_dispatch_offset_ms - 302_750.0).abs()
                < 1e-6
        );
    }

    #[test]
    fn subagent_trace_six_t_star_ranges() {
        let c = corpus();
        let t = trace(&c, "fx-subagent-002");
        let (lo, hi) = t.t_star_window_ms(ratios());
        assert_eq!((lo, hi), (8_750.0, 26_250.0));
        let (ex, ge) = (child(t, "explore_001"), child(t, "general_001"));
        let root = ConvRef::Root;
        // t* <= 10.5: root next k2 gated on explore (next #1, primer #0).
        for ts in [8_750.0, 10_500.0] {
            let s = snapshot(t, ts).unwrap();
            assert_eq!(
                states(&s),
                [(root, 2, Some(1), true), (ex, 1, Some(0), false)],
                "{ts}"
            );
        }
        // 10.5 < t* <= 13.0: explore next #2.
        for ts in [10_501.0, 13_000.0] {
            let s = snapshot(t, ts).unwrap();
            assert_eq!(
                states(&s),
                [(root, 2, Some(1), true), (ex, 2, Some(1), false)],
                "{ts}"
            );
        }
        // 13.0 < t* <= 18.0: explore omitted, k2 not gated.
        for ts in [13_001.0, 18_000.0] {
            let s = snapshot(t, ts).unwrap();
            assert_eq!(states(&s), [(root, 2, Some(1), false)], "{ts}");
        }
        // 18.0 < t* <= 22.6: root next k3; general (spawned by k2, behind t*) next #0.
        for ts in [18_001.0, 22_000.0, 22_600.0] {
            let s = snapshot(t, ts).unwrap();
            assert_eq!(
                states(&s),
                [(root, 3, Some(2), false), (ge, 0, None, false)],
                "{ts}"
            );
            let g = s.state(ge).unwrap().next_dispatch_offset_ms;
            assert!((g - (22_600.0 - ts)).abs() < 1e-6);
        }
        // 22.6 < t* <= 24.0: general next #1 (primer #0).
        for ts in [22_601.0, 24_000.0] {
            let s = snapshot(t, ts).unwrap();
            assert_eq!(
                states(&s),
                [(root, 3, Some(2), false), (ge, 1, Some(0), false)],
                "{ts}"
            );
        }
        // t* > 24.0: rootless lane, only general#1 at 35 − t*.
        for ts in [24_001.0, 26_250.0] {
            let s = snapshot(t, ts).unwrap();
            assert!(s.is_rootless());
            assert_eq!(states(&s), [(ge, 1, Some(0), false)], "{ts}");
            let g = s.states[0].next_dispatch_offset_ms;
            assert!((g - (35_000.0 - ts)).abs() < 1e-6);
        }
    }

    #[test]
    fn tiered_trace_three_t_star_ranges() {
        let c = corpus();
        let t = trace(&c, "fx-tiered-003");
        assert_eq!(t.t_star_window_ms(ratios()), (4_000.0, 10_000.0));
        let wb = child(t, "worker_b");
        let root = ConvRef::Root;
        // t* <= 7: root next k1 not gated (worker_a omitted), worker_b next #1 joining k2.
        for ts in [4_000.0, 7_000.0] {
            let s = snapshot(t, ts).unwrap();
            assert_eq!(
                states(&s),
                [(root, 1, Some(0), false), (wb, 1, Some(0), false)],
                "{ts}"
            );
        }
        // 7 < t* <= 8: root next k2 gated on worker_b.
        for ts in [7_001.0, 8_000.0] {
            let s = snapshot(t, ts).unwrap();
            assert_eq!(
                states(&s),
                [(root, 2, Some(1), true), (wb, 1, Some(0), false)],
                "{ts}"
            );
        }
        // t* > 8: worker_b omitted, k2 ungated.
        for ts in [8_001.0, 10_000.0] {
            let s = snapshot(t, ts).unwrap();
            assert_eq!(states(&s), [(root, 2, Some(1), false)], "{ts}");
        }
    }

    #[test]
    fn a_recycled_tree_starts_at_turn_0_with_nothing_spawned() {
        let c = corpus();
        let s = from_start(trace(&c, "fx-subagent-002")).unwrap();
        assert_eq!(states(&s), [(ConvRef::Root, 0, None, false)]);
        assert!(s.spawned_branches.is_empty());
    }
}
