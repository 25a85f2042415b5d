//! The AgentX lane scheduler (spec §3): `--concurrency N` lanes, each holding one live session
//! tree (a root conversation and every subagent it spawns), replayed against the server with the
//! recorded spawn/join topology and end-to-start delays. It replaces the plan phases of `phase`
//! when the run has `RunConfig::agentx`; every request still ends as one `RequestRecord` (with
//! its `SessionMeta`) on the one aggregator channel, and the one `Stopper` stops it.
//!
//! ```text
//!  Replay::new   lane i: trace i mod n, seeded t*, snapshot (agentx::snapshot)
//!  warmup.rs     primers (turn next-1, max_tokens 1) spread so every lane reaches t* together,
//!                then --warmup-requests-per-lane N more per lane; grace bounds both
//!  profile       (here) per tree: one task per live stream (tokio timers, no thread, no polling);
//!                children spawned when their parent turn returns, joins wait on gates;
//!                a lane recycles with the next root when its whole tree drains
//! ```
//!
//! Decisions where the spec is open (§6):
//! * q2, `--warmup-requests-per-lane N`: every request counts, root or subagent; a lane sends its
//!   N one after another, each the pending turn with the earliest recorded start (a root join
//!   turn only once the branch's children are done), idle delays removed, `max_tokens` 1; a tree
//!   that drains first ends the lane's quota (the lane starts profiling with a recycled tree).
//!   Handoff clock: the recorded timestamps; the lane's earliest pending turn starts profiling
//!   at once, the others keep their recorded offsets from it ([`Shared::per_lane_warmup`]).
//! * q3, the per-tree idle cap also clamps the primer leads and the profiling leading shift (as
//!   upstream's phase offset cap does), besides advancing an idle tree's timers.
//! * q6, warmup grace expiry cancels what is left of the warmup (recorded `cancelled`, phase
//!   warmup, never a root warmup failure) and profiling starts; the run says so in a warning.
//! * Without `--benchmark-duration` every lane replays its first tree once and the phase ends
//!   when they drain (AIPerf's scenario always has a duration).
//!
//! Files: this one holds the lanes, trees and streams; `warmup.rs` the warmup and its hand-off;
//! `clock.rs` the virtual clocks and idle monitors (below both); `wire.rs` the request body.
//!
//! Time (`clock.rs`): every timer is a due instant on its tree's *virtual* clock, `real + system skip + tree
//! skip`. The idle caps move a clock forward (all pending timers of the system, or of one tree,
//! shift by the same amount) and wake the sleepers, which recompute their real deadline; nothing
//! polls. Memory: a tree holds its prompt state per conversation, one correlation id each and a
//! few small maps; a stream is one tokio task (a few hundred bytes) plus its request while one is
//! in flight.

mod clock;
mod warmup;
mod wire;

use clock::{system_idle_monitor, tree_idle_monitor, Idle};

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::Uri;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::agentx::prompt::{ConvRef, Message, PromptSynth, StreamPrompts};
use crate::agentx::snapshot::{self, Snapshot};
use crate::agentx::Trace;
use crate::client::{Client, Clock, Prepared};
use crate::config::AgentxSettings;
use crate::metrics::BranchStats;
use crate::record::{Outcome, Phase, RequestRecord, SessionMeta};
use crate::schedule::DispatchStats;
use crate::stop::{StopReason, Stopper};

pub(crate) use wire::Wire;

/// The messages of each turn and the cache-bust marker. The run uses [`SynthMessages`]
/// (`agentx::prompt`); tests inject simple messages.
pub(crate) trait TurnMessages: Send + Sync {
    /// The prompt state of one conversation, asked turn by turn in increasing order.
    fn conversation(&self, trace: &Arc<Trace>, conv: ConvRef) -> Box<dyn ConvMessages>;
    /// The tree's marker (spec §2.7).
    fn marker(&self, benchmark_id: &str, pass: u64, lane: usize, base_trace_id: &str) -> String;
    /// Puts the marker on the first user message, once.
    fn apply_marker(&self, messages: &mut [Message], marker: &str);
}

/// One conversation's prompts.
pub(crate) trait ConvMessages: Send {
    /// Every message of turn `k` (history included).
    fn turn(&mut self, k: usize) -> Result<Vec<Message>, String>;
}

/// [`TurnMessages`] from the prompt synthesizer.
pub(crate) struct SynthMessages(pub(crate) Arc<PromptSynth>);

impl TurnMessages for SynthMessages {
    fn conversation(&self, trace: &Arc<Trace>, conv: ConvRef) -> Box<dyn ConvMessages> {
        Box::new(self.0.stream(trace.clone(), conv))
    }
    fn marker(&self, benchmark_id: &str, pass: u64, lane: usize, base_trace_id: &str) -> String {
        crate::agentx::prompt::cache_bust_marker(benchmark_id, pass, lane, base_trace_id)
    }
    fn apply_marker(&self, messages: &mut [Message], marker: &str) {
        crate::agentx::prompt::apply_marker(messages, marker);
    }
}

impl ConvMessages for StreamPrompts {
    fn turn(&mut self, k: usize) -> Result<Vec<Message>, String> {
        StreamPrompts::turn(self, k)
            .map(|p| p.messages)
            .map_err(|e| e.to_string())
    }
}

/// Everything a replay needs from the prepared run.
pub(crate) struct ReplayInputs {
    pub(crate) client: Client,
    pub(crate) uri: Uri,
    pub(crate) clock: Clock,
    pub(crate) tx: mpsc::Sender<RequestRecord>,
    pub(crate) traces: Vec<Arc<Trace>>,
    pub(crate) messages: Arc<dyn TurnMessages>,
    pub(crate) wire: Wire,
    pub(crate) settings: AgentxSettings,
    pub(crate) concurrency: usize,
    /// `--benchmark-duration`: no new turn after it. `None`: every lane replays its first tree
    /// once (no recycling) and the phase ends when they drain.
    pub(crate) duration: Option<Duration>,
    /// `--benchmark-grace-period` for in-flight requests after the duration (`None`: unbounded).
    pub(crate) grace: Option<Duration>,
    pub(crate) stop: Stopper,
    /// The live view: profiling requests sent (`sent - done` is what is in flight).
    pub(crate) progress: Option<Arc<watch::Sender<crate::progress::Progress>>>,
    /// The run's benchmark id, which keys the cache-bust markers (`None`: a fresh UUID).
    pub(crate) benchmark_id: Option<String>,
}

/// What the warmup did.
#[derive(Clone, Debug, Default)]
pub(crate) struct WarmupStats {
    /// Primers sent.
    pub(crate) primers: u64,
    /// `--warmup-requests-per-lane` requests sent.
    pub(crate) per_lane: u64,
    /// The grace period ran out and what was left was cancelled.
    pub(crate) grace_expired: bool,
    /// The root warmup request whose failure stopped the run, and why.
    pub(crate) failure: Option<String>,
}

/// A replay: built once, then [`Replay::warmup`] and [`Replay::profile`].
pub(crate) struct Replay {
    shared: Arc<Shared>,
    lanes: Vec<LaneStart>,
}

/// A lane's first tree and where it starts.
struct LaneStart {
    tree: Arc<Tree>,
    snap: Snapshot,
}

/// Shared by every lane and stream.
struct Shared {
    client: Client,
    uri: Uri,
    clock: Clock,
    tx: mpsc::Sender<RequestRecord>,
    traces: Vec<Arc<Trace>>,
    messages: Arc<dyn TurnMessages>,
    wire: Wire,
    settings: AgentxSettings,
    concurrency: usize,
    duration: Option<Duration>,
    grace: Option<Duration>,
    stop: Stopper,
    benchmark_id: String,
    /// Cancels requests: grace expiry after the duration, or a stop (its parent).
    requests: CancellationToken,
    /// No new turn: the duration is over, or a stop.
    no_new_turns: CancellationToken,
    /// The phase's time origin.
    origin: Instant,
    /// The whole-system idle state and clock skip.
    idle: Idle,
    /// Live trees, for the system idle cap's earliest timer.
    trees: Mutex<HashMap<u64, Arc<Tree>>>,
    tree_ids: AtomicU64,
    /// The next root of the sequential sampler (recycling continues after the first draws).
    next_root: AtomicUsize,
    /// Fresh trees per trace (the marker's `pass`).
    passes: Mutex<HashMap<usize, u64>>,
    record_ids: AtomicU64,
    uuids: Mutex<ChaCha8Rng>,
    /// Profiling records counted by the live threshold: (total, failed).
    live: Mutex<(u64, u64)>,
    issued: AtomicU64,
    progress: Option<Arc<watch::Sender<crate::progress::Progress>>>,
    /// Idle-cap jumps, for the report.
    jumps: AtomicU64,
    /// Spawns and joins over profiling (`profile_export_aiperf.json`'s `branch_stats`).
    branch: Mutex<BranchStats>,
    /// The first root warmup failure, which stopped the run ([`Sent::failure`]).
    warmup_failure: Mutex<Option<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A join gate: the live children of one branch.
#[derive(Clone, Copy, Debug, Default)]
struct Gate {
    remaining: usize,
    failed: bool,
}

/// One live tree of a lane.
struct Tree {
    id: u64,
    lane: usize,
    trace_idx: usize,
    trace: Arc<Trace>,
    marker: String,
    root_corr: String,
    /// Correlation id per conversation: 0 the root, `i + 1` child `i`.
    corr: Vec<String>,
    prompts: Vec<Mutex<Option<Box<dyn ConvMessages>>>>,
    /// `nvext.session_control` bind sent, per conversation.
    bound: Vec<AtomicBool>,
    /// Completed-turn count per conversation (the replay gate, `Turn.after`).
    progress: Vec<watch::Sender<usize>>,
    gates: Mutex<HashMap<usize, watch::Sender<Gate>>>,
    spawned: Mutex<HashSet<usize>>,
    idle: Idle,
    /// Pending timers (tree-virtual due ns -> count).
    pending: Mutex<BTreeMap<u64, usize>>,
    tracker: TaskTracker,
}

fn ci(conv: ConvRef) -> usize {
    match conv {
        ConvRef::Root => 0,
        ConvRef::Child(i) => i + 1,
    }
}

/// How a stream's first profiling turn fires.
#[derive(Clone, Copy)]
enum First {
    /// At this tree-virtual instant, ns.
    At(u64),
    /// When its join gates open.
    Join,
}

/// What a sent request came to.
struct Sent {
    ok: bool,
    overflow: bool,
    cancelled: bool,
    /// A failed request: which one and why (`{conversation} turn {k} (lane {l}): {kind}: {error}`).
    failure: Option<String>,
}

impl Replay {
    /// Builds lane `i`'s first tree: trace `i mod n` (a trace with nothing dispatchable at its
    /// t* is skipped for the next one, at most `n` tries), its t* and snapshot.
    pub(crate) fn new(inp: ReplayInputs) -> Replay {
        let mut seed = [0u8; 32];
        // A fresh stream of ids per run; the OS source only seeds it.
        let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut seed);
        let now = Instant::now();
        let shared = Arc::new(Shared {
            client: inp.client,
            uri: inp.uri,
            clock: inp.clock,
            tx: inp.tx,
            traces: inp.traces,
            messages: inp.messages,
            wire: inp.wire,
            settings: inp.settings,
            concurrency: inp.concurrency,
            duration: inp.duration,
            grace: inp.grace,
            requests: inp.stop.token().child_token(),
            no_new_turns: inp.stop.token().child_token(),
            stop: inp.stop,
            progress: inp.progress,
            benchmark_id: inp.benchmark_id.unwrap_or_default(),
            origin: now,
            idle: Idle::new(now),
            trees: Mutex::new(HashMap::new()),
            tree_ids: AtomicU64::new(0),
            next_root: AtomicUsize::new(0),
            passes: Mutex::new(HashMap::new()),
            record_ids: AtomicU64::new(0),
            uuids: Mutex::new(ChaCha8Rng::from_seed(seed)),
            live: Mutex::new((0, 0)),
            issued: AtomicU64::new(0),
            jumps: AtomicU64::new(0),
            branch: Mutex::new(BranchStats::default()),
            warmup_failure: Mutex::new(None),
        });
        let shared = if shared.benchmark_id.is_empty() {
            let bid = shared.uuid();
            let mut s = Arc::try_unwrap(shared).unwrap_or_else(|_| unreachable!("not shared yet"));
            s.benchmark_id = bid;
            Arc::new(s)
        } else {
            shared
        };
        let n = shared.traces.len();
        let mut lanes = Vec::with_capacity(shared.concurrency);
        let mut next = 0usize;
        for lane in 0..shared.concurrency {
            for _ in 0..n.max(1) {
                let idx = next % n.max(1);
                next += 1;
                let trace = &shared.traces[idx];
                let t =
                    snapshot::t_star_ms(trace, lane, shared.settings.seed, shared.settings.ratios);
                if let Some(snap) = snapshot::snapshot(trace, t) {
                    lanes.push(LaneStart {
                        tree: shared.new_tree(lane, idx),
                        snap,
                    });
                    break;
                }
            }
        }
        shared.next_root.store(next, Relaxed);
        Replay { shared, lanes }
    }

    /// The profiling phase: every lane's tree from its snapshot, recycled as trees drain, until
    /// the duration (then `grace` for what is in flight, then cancel) or a stop. Returns what
    /// was dispatched and what became of the spawns and joins.
    pub(crate) async fn profile(self) -> (DispatchStats, BranchStats) {
        let sh = self.shared;
        if sh.stop.token().is_cancelled() {
            return (DispatchStats::default(), BranchStats::default());
        }
        if let Some(d) = sh.duration {
            let (t, end) = (sh.no_new_turns.clone(), Instant::now() + d);
            tokio::spawn(async move {
                tokio::select! {
                    _ = tokio::time::sleep_until(end) => t.cancel(),
                    _ = t.cancelled() => {}
                }
            });
        }
        let done = CancellationToken::new();
        let monitor = tokio::spawn(system_idle_monitor(sh.clone(), done.clone()));
        let lanes = TaskTracker::new();
        for l in self.lanes {
            let sh = sh.clone();
            lanes.spawn(async move { sh.lane(l.tree, Some(l.snap)).await });
        }
        lanes.close();
        tokio::select! {
            _ = lanes.wait() => {}
            _ = async {
                sh.no_new_turns.cancelled().await;
                match sh.grace {
                    Some(g) => tokio::time::sleep(g).await,
                    None => std::future::pending().await,
                }
            } => {
                sh.requests.cancel();
                lanes.wait().await;
            }
        }
        done.cancel();
        let _ = monitor.await;
        let dispatch = DispatchStats {
            issued: sh.issued.load(Relaxed),
            ..DispatchStats::default()
        };
        let branch = *lock(&sh.branch);
        (dispatch, branch)
    }
}

impl Shared {
    fn uuid(&self) -> String {
        let mut b = [0u8; 16];
        lock(&self.uuids).fill_bytes(&mut b);
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
        format!(
            "{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        )
    }

    /// A fresh tree of trace `idx` on `lane`: new correlation ids, the next pass's marker.
    fn new_tree(&self, lane: usize, idx: usize) -> Arc<Tree> {
        let trace = self.traces[idx].clone();
        let pass = {
            let mut p = lock(&self.passes);
            let e = p.entry(idx).or_insert(0);
            *e += 1;
            *e - 1
        };
        let base = trace.id.split("::").next().unwrap_or(&trace.id).to_owned();
        let marker = self.messages.marker(&self.benchmark_id, pass, lane, &base);
        let n = trace.children.len() + 1;
        let convs = std::iter::once(ConvRef::Root).chain((0..n - 1).map(ConvRef::Child));
        let corr: Vec<String> = (0..n).map(|_| self.uuid()).collect();
        Arc::new(Tree {
            id: self.tree_ids.fetch_add(1, Relaxed),
            lane,
            trace_idx: idx,
            root_corr: corr[0].clone(),
            corr,
            prompts: convs
                .map(|c| Mutex::new(Some(self.messages.conversation(&trace, c))))
                .collect(),
            bound: (0..n).map(|_| AtomicBool::new(false)).collect(),
            progress: (0..n).map(|_| watch::channel(0).0).collect(),
            gates: Mutex::new(HashMap::new()),
            spawned: Mutex::new(HashSet::new()),
            idle: Idle::new(Instant::now()),
            pending: Mutex::new(BTreeMap::new()),
            tracker: TaskTracker::new(),
            marker,
            trace,
        })
    }

    /// One lane: its tree, then (with a duration) recycled trees until no new turn may start.
    async fn lane(self: &Arc<Self>, tree: Arc<Tree>, snap: Option<Snapshot>) {
        let lane = tree.lane;
        let mut next = match snap {
            Some(s) => Some((tree, s)),
            None => self.recycle(lane),
        };
        while let Some((tree, snap)) = next.take() {
            self.run_tree(tree, &snap).await;
            if self.duration.is_none() || self.no_new_turns.is_cancelled() {
                break;
            }
            next = self.recycle(lane);
        }
    }

    /// The next root of the sequential sampler, from turn 0 (never t*-sampled).
    fn recycle(&self, lane: usize) -> Option<(Arc<Tree>, Snapshot)> {
        let n = self.traces.len();
        for _ in 0..n {
            let idx = self.next_root.fetch_add(1, Relaxed) % n;
            if let Some(s) = snapshot::from_start(&self.traces[idx]) {
                return Some((self.new_tree(lane, idx), s));
            }
        }
        None
    }

    /// Runs one tree from `snap` until it drains (background children included).
    async fn run_tree(self: &Arc<Self>, tree: Arc<Tree>, snap: &Snapshot) {
        let trace = &tree.trace;
        lock(&self.trees).insert(tree.id, tree.clone());
        // Completed-turn counts: a live stream has completed what precedes its next turn; an
        // omitted child of a spawned branch all of it; an unspawned child nothing yet.
        for (c, child) in trace.children.iter().enumerate() {
            let spawned = snap.spawned_branches.contains(&child.subagent_branch());
            let done = match snap.state(ConvRef::Child(c)) {
                Some(s) => s.next,
                None if spawned => child.turns.len(),
                None => 0,
            };
            tree.progress[c + 1].send_replace(done);
        }
        tree.progress[0].send_replace(snap.root().map_or(trace.root.turns.len(), |s| s.next));
        {
            let mut gates = lock(&tree.gates);
            for &b in &snap.spawned_branches {
                let live = trace.branches[b]
                    .children
                    .iter()
                    .filter(|&&c| snap.state(ConvRef::Child(c)).is_some())
                    .count();
                if trace.branches[b].join_turn.is_some() && live > 0 {
                    gates.insert(
                        b,
                        watch::channel(Gate {
                            remaining: live,
                            failed: false,
                        })
                        .0,
                    );
                }
            }
        }
        lock(&tree.spawned).extend(snap.spawned_branches.iter().copied());
        // Leading shift: the earliest dispatchable state fires within the trace idle cap.
        let shift = match self.settings.trace_idle_cap {
            Some(cap) => {
                let min = snap
                    .states
                    .iter()
                    .filter(|s| !s.waiting_on_children)
                    .map(|s| s.next_dispatch_offset_ms)
                    .fold(f64::INFINITY, f64::min);
                (min - cap.as_secs_f64() * 1e3).max(0.0)
            }
            None => 0.0,
        };
        let now = self.tree_now(&tree);
        for s in &snap.states {
            if s.conv != ConvRef::Root {
                // Live at t*: started here, as AIPerf seeds it.
                self.branched(|b| b.children_spawned += 1);
            }
            let first = if s.waiting_on_children {
                First::Join
            } else {
                First::At(now + ((s.next_dispatch_offset_ms - shift).max(0.0) * 1e6) as u64)
            };
            let (sh, t, conv, k) = (self.clone(), tree.clone(), s.conv, s.next);
            tree.tracker
                .spawn(async move { sh.stream(t, conv, k, first).await });
        }
        tree.tracker.close();
        match self.settings.trace_idle_cap {
            Some(cap) => {
                let done = CancellationToken::new();
                let mon = tree_idle_monitor(self.clone(), tree.clone(), cap, done.clone());
                tokio::pin!(mon);
                tokio::select! {
                    _ = tree.tracker.wait() => {}
                    _ = &mut mon => tree.tracker.wait().await,
                }
            }
            None => tree.tracker.wait().await,
        }
        lock(&self.trees).remove(&tree.id);
    }

    /// One stream of a tree, from turn `k`: wait, send, spawn, advance.
    async fn stream(self: Arc<Self>, tree: Arc<Tree>, conv: ConvRef, mut k: usize, first: First) {
        let trace = tree.trace.clone();
        let turns = &trace.conversation(conv).turns;
        let mut first = Some(first);
        let mut failed = false;
        // A child's end, for the branch counts: its last response, and whether an overflow
        // ended it.
        let (mut last_ok, mut overflowed) = (None, false);
        while k < turns.len() {
            let turn = &turns[k];
            // Decided as the previous turn returns (AIPerf 0.13's `_maybe_suspend_parent`): a
            // join whose children are all done already goes the normal way, after its recorded
            // delay; a parent that must wait is suspended and fires as its last child ends.
            let blocked = conv == ConvRef::Root && self.joins_pending(&tree, &turn.joins);
            let gated = conv == ConvRef::Root
                && turn.joins.iter().any(|b| lock(&tree.gates).contains_key(b));
            // A root turn that waits at its join for children still running (AIPerf's
            // suspended parent), from the t* snapshot or as its previous turn returned.
            let suspended = match &first {
                Some(First::Join) => true,
                Some(First::At(_)) => false,
                None => blocked,
            };
            if suspended {
                self.branched(|b| b.parents_suspended += 1);
            }
            let due = match first.take() {
                Some(First::At(d)) => Some(d),
                Some(First::Join) => None,
                None if blocked => None,
                None => turn
                    .delay_ms
                    .map(|d| self.tree_now(&tree) + (d.max(0.0) * 1e6) as u64),
            };
            if let Some(d) = due {
                if !self.sleep_until(&tree, d).await {
                    break;
                }
            }
            if gated && !self.wait_joins(&tree, &turn.joins).await {
                if !self.no_new_turns.is_cancelled() {
                    self.branched(|b| b.parents_failed_due_to_child_error += 1);
                } else if suspended {
                    self.branched(|b| b.joins_suppressed += 1);
                }
                break;
            }
            if !self.wait_after(&tree, turn).await || self.no_new_turns.is_cancelled() {
                if suspended {
                    self.branched(|b| b.joins_suppressed += 1);
                }
                break;
            }
            if suspended {
                self.branched(|b| b.parents_resumed += 1);
            }
            if conv == ConvRef::Root {
                // A branch that started before its spawning turn's recorded end overlapped it in
                // the capture: it starts as the turn is sent, timed from the turn's start (as
                // AIPerf 0.13 does); the others start when the turn returns.
                let end = turn.timestamp_ms + turn.api_time_ms.unwrap_or(0.0);
                let overlapping: Vec<usize> = turn
                    .spawns
                    .iter()
                    .copied()
                    .filter(|&b| {
                        turn.api_time_ms.is_some_and(|a| a > 0.0)
                            && trace.branches[b].start_ms < end
                    })
                    .collect();
                if !overlapping.is_empty() {
                    self.spawn_branches(&tree, &overlapping, Some(turn.timestamp_ms));
                }
            }
            let r = self
                .send(&tree, conv, k, Phase::Profiling, None, &self.requests)
                .await;
            failed |= !r.ok;
            last_ok = Some(r.ok);
            overflowed = r.overflow;
            tree.progress[ci(conv)].send_replace(k + 1);
            if r.cancelled {
                break;
            }
            if conv == ConvRef::Root {
                self.spawn_branches(&tree, &turn.spawns, None);
            }
            if r.overflow {
                break;
            }
            k += 1;
        }
        tree.progress[ci(conv)].send_replace(turns.len());
        match conv {
            ConvRef::Root => {
                // Branches the root never reached will not spawn: nothing may wait on them.
                let spawned = lock(&tree.spawned);
                for (c, child) in trace.children.iter().enumerate() {
                    if !spawned.contains(&child.subagent_branch()) {
                        tree.progress[c + 1].send_replace(child.turns.len());
                    }
                }
            }
            ConvRef::Child(c) => {
                // AIPerf's child outcomes: its final turn answered (or failed), or it was cut short.
                self.branched(|s| match (k >= turns.len(), last_ok) {
                    (true, Some(false)) => s.children_errored += 1,
                    (true, _) => s.children_completed += 1,
                    (false, _) if overflowed => s.children_errored += 1,
                    (false, _) => s.children_truncated += 1,
                });
                let b = trace.children[c].subagent_branch();
                if let Some(g) = lock(&tree.gates).get(&b) {
                    g.send_modify(|g| {
                        g.remaining = g.remaining.saturating_sub(1);
                        g.failed |= failed;
                    });
                }
            }
        }
    }

    /// Spawns branches of a root turn (each once): child turn 0 after its first-turn offset from
    /// the branch start (`origin_ms` `None`: the turn returned), or after its recorded start less
    /// `origin_ms` (a branch that overlapped the turn, spawned as it is sent).
    fn spawn_branches(
        self: &Arc<Self>,
        tree: &Arc<Tree>,
        branches: &[usize],
        origin_ms: Option<f64>,
    ) {
        let trace = &tree.trace;
        for &b in branches {
            if !lock(&tree.spawned).insert(b) {
                continue;
            }
            let br = &trace.branches[b];
            if br.join_turn.is_some() {
                lock(&tree.gates).insert(
                    b,
                    watch::channel(Gate {
                        remaining: br.children.len(),
                        failed: false,
                    })
                    .0,
                );
            }
            let now = self.tree_now(tree);
            for &c in &br.children {
                let child = &trace.children[c];
                let off = match origin_ms {
                    Some(o) => child.turns[0].timestamp_ms - o,
                    None => child
                        .subagent
                        .as_ref()
                        .map_or(0.0, |s| s.first_turn_offset_ms),
                };
                self.branched(|b| {
                    b.children_spawned += 1;
                    // Its first turn waits for its recorded offset from the spawn.
                    b.children_delayed += u64::from(off > 0.0);
                });
                let (sh, t) = (self.clone(), tree.clone());
                let first = First::At(now + (off.max(0.0) * 1e6) as u64);
                tree.tracker
                    .spawn(async move { sh.stream(t, ConvRef::Child(c), 0, first).await });
            }
        }
    }

    /// Updates the branch counts.
    fn branched(&self, f: impl FnOnce(&mut BranchStats)) {
        f(&mut lock(&self.branch));
    }

    /// Whether a child of any of `joins` is still live (its gate not yet satisfied).
    fn joins_pending(&self, tree: &Tree, joins: &[usize]) -> bool {
        let gates = lock(&tree.gates);
        joins
            .iter()
            .any(|b| gates.get(b).is_some_and(|g| g.borrow().remaining > 0))
    }

    /// Waits for the join gates of `joins`; false when the turn must not be sent (no new
    /// turns, or a failed child under `dag_fail_fast`).
    async fn wait_joins(&self, tree: &Tree, joins: &[usize]) -> bool {
        for b in joins {
            let rx = lock(&tree.gates).get(b).map(|g| g.subscribe());
            let Some(mut rx) = rx else { continue };
            let gate = tokio::select! {
                g = rx.wait_for(|g| g.remaining == 0) => g.map(|g| *g).unwrap_or_default(),
                _ = self.no_new_turns.cancelled() => return false,
            };
            if gate.failed && self.settings.dag_fail_fast {
                return false;
            }
        }
        true
    }

    /// Waits for the turns of other streams this turn depends on (`Turn.after`).
    async fn wait_after(&self, tree: &Tree, turn: &crate::agentx::Turn) -> bool {
        for a in &turn.after {
            let mut rx = tree.progress[ci(a.conv)].subscribe();
            tokio::select! {
                _ = rx.wait_for(|&done| done > a.turn) => {}
                _ = self.no_new_turns.cancelled() => return false,
            }
        }
        true
    }

    /// Sends turn `k` of `conv` (warmup: `max_tokens` overridden) and records it.
    async fn send(
        &self,
        tree: &Tree,
        conv: ConvRef,
        k: usize,
        phase: Phase,
        max_tokens: Option<u64>,
        cancel: &CancellationToken,
    ) -> Sent {
        let trace = &tree.trace;
        let c = trace.conversation(conv);
        let turn = &c.turns[k];
        let id = self.record_ids.fetch_add(1, Relaxed);
        let now = self.clock.now_ns();
        let request_id = self.uuid();
        let corr = &tree.corr[ci(conv)];
        let parent = (conv != ConvRef::Root).then(|| tree.root_corr.clone());
        let mut rec = RequestRecord::started(id, tree.trace_idx, now, now);
        rec.phase = phase;
        rec.turn = k as u32;
        let requested = max_tokens.unwrap_or(turn.max_tokens);
        rec.requested_osl = Some(requested);
        // AIPerf's session_num: the credit's place among its phase's requests. The warmup is
        // all sent before profiling, so its record ids are that; profiling counts its own.
        let mut session_num = id;
        let messages = {
            let mut state = lock(&tree.prompts[ci(conv)]);
            let messages = state
                .as_mut()
                .map(|p| p.turn(k))
                .unwrap_or_else(|| Err("no prompt state".into()));
            if phase == Phase::Profiling && k + 1 == c.turns.len() {
                // Nothing of this conversation is asked again: its context (segments, block
                // offsets) goes now, not when the whole tree drains. A long-lived tree's
                // finished subagents held half the live prompt state of an hour's soak.
                *state = None;
            }
            messages
        };
        let rec = match messages {
            Err(e) => {
                rec.outcome = Outcome::Failed(crate::record::FailureKind::Transport);
                rec.error = Some(format!(
                    "cannot make the prompt of {} turn {k}: {e}",
                    c.session_id
                ));
                rec
            }
            Ok(mut messages) => {
                self.messages.apply_marker(&mut messages, &tree.marker);
                let bind = (self.wire.routing.nvext_session_timeout_s.is_some()
                    && !tree.bound[ci(conv)].swap(true, Relaxed))
                .then(|| wire::session_id(&c.session_id, &tree.marker));
                let req = Prepared {
                    uri: self.uri.clone(),
                    body: self.wire.body(&messages, requested, bind.as_deref()).into(),
                    streaming: self.wire.streaming,
                    lines: None,
                    capture_text: false,
                    headers: self.wire.headers(&request_id, corr, parent.as_deref()),
                };
                // The body holds the prompt now: the messages (as large, ~0.5 MB for a 100k-token
                // context) must not stay alive for the whole response.
                drop(messages);
                if phase == Phase::Profiling {
                    session_num = self.issued.fetch_add(1, Relaxed);
                    if let Some(p) = &self.progress {
                        p.send_modify(|p| p.sent += 1);
                    }
                }
                self.idle.started();
                tree.idle.started();
                let rec = self.client.execute(req, rec, &self.clock, cancel).await;
                tree.idle.returned();
                self.idle.returned();
                rec
            }
        };
        let mut rec = rec;
        let failed = matches!(rec.outcome, Outcome::Failed(_));
        let overflow = failed && k + 1 < c.turns.len() && {
            let e = rec.error.as_deref().unwrap_or("").to_lowercase();
            self.settings
                .context_overflow_substrings
                .iter()
                .any(|s| !s.is_empty() && e.contains(&s.to_lowercase()))
        };
        let child = c.subagent.is_some();
        rec.session = Some(Box::new(SessionMeta {
            conversation_id: c.session_id.clone(),
            x_request_id: request_id,
            x_correlation_id: corr.clone(),
            root_correlation_id: tree.root_corr.clone(),
            parent_correlation_id: parent,
            agent_depth: u32::from(child),
            source_trace_id: trace.id.split("::").next().unwrap_or(&trace.id).to_owned(),
            source_outer_idx: turn.source_outer_idx,
            source_inner_idx: turn.source_inner_idx,
            source_kind: c.kind.source_kind().to_owned(),
            session_num,
            lane: tree.lane,
            cache_hit_blocks: turn.cache_hit_blocks,
            cache_total_blocks: turn.cache_total_blocks,
            context_overflow: overflow,
        }));
        let sent = Sent {
            ok: rec.outcome == Outcome::Success,
            overflow,
            cancelled: rec.outcome == Outcome::Cancelled,
            failure: match rec.outcome {
                Outcome::Failed(kind) => Some(format!(
                    "{} turn {k} (lane {}): {}: {}",
                    c.session_id,
                    tree.lane,
                    kind.as_str(),
                    rec.error.as_deref().unwrap_or("no detail")
                )),
                _ => None,
            },
        };
        if phase == Phase::Profiling && !overflow && rec.outcome != Outcome::Cancelled {
            self.count_live(failed);
        }
        let _ = self.tx.send(rec).await;
        sent
    }

    /// The live `--failed-request-threshold` (spec §3.5): profiling records, armed at
    /// `max(concurrency, 10)`; crossing it stops the run once. Requests cancelled by the end of
    /// the grace or a stop are not counted (they are not errors).
    fn count_live(&self, failed: bool) {
        let Some(r) = self.settings.live_failed_threshold else {
            return;
        };
        let mut l = lock(&self.live);
        l.0 += 1;
        l.1 += u64::from(failed);
        let armed = l.0 >= self.concurrency.max(10) as u64;
        if armed && l.1 as f64 / l.0 as f64 > r {
            self.stop.stop(StopReason::FailedThreshold);
        }
    }
}

impl crate::agentx::Conversation {
    /// The branch of a child conversation (`usize::MAX` for the root, which belongs to none).
    fn subagent_branch(&self) -> usize {
        self.subagent.as_ref().map_or(usize::MAX, |s| s.branch)
    }
}
