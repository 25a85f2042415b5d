//! The AgentX lane scheduler (spec §3): `--concurrency N` lanes, each holding one live session
//! tree (a root conversation and every subagent it spawns), replayed against the server with the
//! recorded spawn/join topology and end-to-start delays. It replaces the plan phases of `phase`
//! when the run has `RunConfig::agentx`; every request still ends as one `RequestRecord` (with
//! its `SessionMeta`) on the one aggregator channel, and the one `Stopper` stops it.
//!
//! ```text
//!  Replay::new   lane i: trace i mod n, seeded t*, snapshot (agentx::snapshot)
//!  warmup        primers (turn next-1, max_tokens 1) spread so every lane reaches t* together,
//!                then --warmup-requests-per-lane N more per lane; grace bounds both
//!  profile       per tree: one task per live stream (tokio timers, no thread, no polling);
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
//! Time: every timer is a due instant on its tree's *virtual* clock, `real + system skip + tree
//! skip`. The idle caps move a clock forward (all pending timers of the system, or of one tree,
//! shift by the same amount) and wake the sleepers, which recompute their real deadline; nothing
//! polls. Memory: a tree holds its prompt state per conversation, one correlation id each and a
//! few small maps; a stream is one tokio task (a few hundred bytes) plus its request while one is
//! in flight.

mod wire;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::Uri;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::sync::{mpsc, watch, Notify};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::agentx::prompt::{ConvRef, Message, PromptSynth, StreamPrompts};
use crate::agentx::snapshot::{self, Snapshot, StreamState};
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
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct WarmupStats {
    /// Primers sent.
    pub(crate) primers: u64,
    /// `--warmup-requests-per-lane` requests sent.
    pub(crate) per_lane: u64,
    /// The grace period ran out and what was left was cancelled.
    pub(crate) grace_expired: bool,
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
}

/// Idle bookkeeping of the system or of one tree, and its clock skip.
struct Idle {
    in_flight: AtomicUsize,
    last_return: Mutex<Instant>,
    /// Any request start or return.
    activity: Notify,
    /// Virtual-clock skip, ns.
    skip_ns: AtomicU64,
    /// The skip moved: sleepers recompute.
    moved: Notify,
}

impl Idle {
    fn new(now: Instant) -> Idle {
        Idle {
            in_flight: AtomicUsize::new(0),
            last_return: Mutex::new(now),
            activity: Notify::new(),
            skip_ns: AtomicU64::new(0),
            moved: Notify::new(),
        }
    }

    fn started(&self) {
        self.in_flight.fetch_add(1, Relaxed);
        self.activity.notify_waiters();
    }

    fn returned(&self) {
        *lock(&self.last_return) = Instant::now();
        self.in_flight.fetch_sub(1, Relaxed);
        self.activity.notify_waiters();
    }

    fn skip(&self, by: Duration) {
        self.skip_ns.fetch_add(by.as_nanos() as u64, Relaxed);
        self.moved.notify_waiters();
    }
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

    /// Primers, then `--warmup-requests-per-lane`, bounded by the warmup grace. A root warmup
    /// request that fails (or is cancelled other than by the grace) stops the run
    /// ([`StopReason::WarmupFailed`]).
    pub(crate) async fn warmup(&mut self) -> WarmupStats {
        let sh = &self.shared;
        let expired = sh.requests.child_token();
        let cap_ms = sh.settings.trace_idle_cap.map(|d| d.as_secs_f64() * 1e3);
        let lead = |l: &LaneStart, s: &StreamState| -> Option<f64> {
            let p = s.primer()?;
            let ts = l.tree.trace.conversation(s.conv).turns[p].timestamp_ms;
            let lead = (l.snap.t_star_ms - ts).max(0.0);
            Some(cap_ms.map_or(lead, |c| lead.min(c)))
        };
        let max_lead = self
            .lanes
            .iter()
            .flat_map(|l| l.snap.states.iter().filter_map(|s| lead(l, s)))
            .fold(0.0f64, f64::max);
        let start = Instant::now();
        let tasks = TaskTracker::new();
        let primers = Arc::new(AtomicU64::new(0));
        // The spread is long when one lane's t* is far past its primer (a 400 s recorded gap):
        // the whole-system idle cap applies to the primer timers as to every other timer (AIPerf
        // sends the next primer at most 10 s after the last return when nothing is in flight).
        let clock = Arc::new(Idle::new(start));
        let pending: Arc<Mutex<BTreeMap<u64, usize>>> = Arc::default();
        let done = CancellationToken::new();
        let monitor = {
            let (sh, clock, pending, done) =
                (sh.clone(), clock.clone(), pending.clone(), done.clone());
            tokio::spawn(async move {
                let earliest = || {
                    let due = lock(&pending).keys().next().copied()?;
                    let skip = clock.skip_ns.load(Relaxed);
                    Some(start + Duration::from_nanos(due.saturating_sub(skip)))
                };
                let cap = sh.settings.system_idle_cap;
                idle_loop(&sh.idle, &clock, cap, &done, earliest, &sh.jumps).await;
            })
        };
        for l in &self.lanes {
            for s in &l.snap.states {
                let (Some(p), Some(ld)) = (s.primer(), lead(l, s)) else {
                    continue;
                };
                let due = ((max_lead - ld) * 1e6) as u64;
                *lock(&pending).entry(due).or_default() += 1;
                let (sh, tree, conv, expired, primers, clock, pending) = (
                    sh.clone(),
                    l.tree.clone(),
                    s.conv,
                    expired.clone(),
                    primers.clone(),
                    clock.clone(),
                    pending.clone(),
                );
                tasks.spawn(async move {
                    let fired = {
                        let _timer = Unregister(&pending, due);
                        loop {
                            let moved = clock.moved.notified();
                            let skip = clock.skip_ns.load(Relaxed);
                            let at = start + Duration::from_nanos(due.saturating_sub(skip));
                            tokio::select! {
                                _ = tokio::time::sleep_until(at) => break true,
                                _ = moved => continue,
                                _ = expired.cancelled() => break false,
                            }
                        }
                    };
                    if !fired {
                        return;
                    }
                    primers.fetch_add(1, Relaxed);
                    let r = sh
                        .send(&tree, conv, p, Phase::Warmup, Some(1), &expired)
                        .await;
                    sh.warmup_result(conv, &r, &expired);
                });
            }
        }
        tasks.close();
        let per_lane = Arc::new(AtomicU64::new(0));
        let quota = sh.settings.warmup_requests_per_lane;
        let grace = sh.settings.warmup_grace;
        let lanes = std::mem::take(&mut self.lanes);
        let work = async {
            tasks.wait().await;
            if quota == 0 || sh.stop.token().is_cancelled() {
                return lanes;
            }
            let mut handles = Vec::with_capacity(lanes.len());
            for l in lanes {
                let (sh, expired, per_lane) = (sh.clone(), expired.clone(), per_lane.clone());
                let lane = l.tree.lane;
                handles.push((
                    lane,
                    tokio::spawn(
                        async move { sh.per_lane_warmup(l, quota, &expired, &per_lane).await },
                    ),
                ));
            }
            let mut out = Vec::with_capacity(handles.len());
            for (lane, h) in handles {
                match h.await {
                    Ok(Some(l)) => out.push(l),
                    // The warmup drained the lane's tree: the lane starts profiling with the
                    // next root, from turn 0, as a drained tree recycles during profiling (it
                    // was dropped, and with every lane drained profiling sent nothing).
                    _ => {
                        if let Some((tree, snap)) = sh.recycle(lane) {
                            out.push(LaneStart { tree, snap });
                        }
                    }
                }
            }
            out
        };
        tokio::pin!(work);
        let mut grace_expired = false;
        let lanes = tokio::select! {
            l = &mut work => l,
            _ = tokio::time::sleep(grace) => {
                grace_expired = true;
                expired.cancel();
                work.await
            }
        };
        done.cancel();
        let _ = monitor.await;
        self.lanes = lanes;
        WarmupStats {
            primers: primers.load(Relaxed),
            per_lane: per_lane.load(Relaxed),
            grace_expired,
        }
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

    /// A root warmup failure stops the run; the grace's own cancel does not.
    fn warmup_result(&self, conv: ConvRef, r: &Sent, expired: &CancellationToken) {
        if conv == ConvRef::Root && !r.ok && !expired.is_cancelled() {
            self.stop.stop(StopReason::WarmupFailed);
        }
    }

    /// `--warmup-requests-per-lane` for one lane (spec §3.3; the rule for open question 2):
    /// the lane sends `quota` requests one after another, each the pending turn with the
    /// earliest recorded start among its live streams (a root join turn only once the branch's
    /// children have no turn left), idle delays removed, `max_tokens` 1. Every request counts,
    /// root or subagent; a root turn that spawns adds its children at turn 0. A tree that drains
    /// first ends the lane's quota early. Handoff: the lane's snapshot is taken at the earliest
    /// pending turn, which then starts profiling at once; the others keep their recorded spacing
    /// from it. `None` when the tree drained (the lane starts profiling with a recycled tree).
    async fn per_lane_warmup(
        self: &Arc<Self>,
        mut l: LaneStart,
        quota: u32,
        expired: &CancellationToken,
        sent: &AtomicU64,
    ) -> Option<LaneStart> {
        let trace = l.tree.trace.clone();
        let mut states: Vec<StreamState> = l.snap.states.clone();
        let mut spawned: HashSet<usize> = l.snap.spawned_branches.iter().copied().collect();
        let ts = |s: &StreamState| trace.conversation(s.conv).turns[s.next].timestamp_ms;
        for _ in 0..quota {
            if expired.is_cancelled() || self.stop.token().is_cancelled() {
                break;
            }
            let blocked = |s: &StreamState| {
                s.conv == ConvRef::Root
                    && trace.root.turns[s.next].joins.iter().any(|&b| {
                        states.iter().any(|o| {
                            matches!(o.conv, ConvRef::Child(c) if trace.branches[b].children.contains(&c))
                        })
                    })
            };
            let Some(pick) = (0..states.len())
                .filter(|&i| !blocked(&states[i]))
                .min_by(|&a, &b| ts(&states[a]).total_cmp(&ts(&states[b])))
            else {
                break;
            };
            let (conv, k) = (states[pick].conv, states[pick].next);
            sent.fetch_add(1, Relaxed);
            let r = self
                .send(&l.tree, conv, k, Phase::Warmup, Some(1), expired)
                .await;
            self.warmup_result(conv, &r, expired);
            let turns = &trace.conversation(conv).turns;
            if conv == ConvRef::Root {
                for &b in &turns[k].spawns {
                    if spawned.insert(b) {
                        for &c in &trace.branches[b].children {
                            states.push(StreamState {
                                conv: ConvRef::Child(c),
                                next: 0,
                                next_dispatch_offset_ms: 0.0,
                                waiting_on_children: false,
                            });
                        }
                    }
                }
            }
            states[pick].next += 1;
            if states[pick].next >= turns.len() {
                states.remove(pick);
            }
        }
        if states.is_empty() {
            return None;
        }
        let t0 = states.iter().map(ts).fold(f64::INFINITY, f64::min);
        let live_children: Vec<usize> = states
            .iter()
            .filter_map(|s| match s.conv {
                ConvRef::Child(c) => Some(c),
                ConvRef::Root => None,
            })
            .collect();
        for s in &mut states {
            s.next_dispatch_offset_ms = ts(s) - t0;
            s.waiting_on_children = s.conv == ConvRef::Root
                && trace.root.turns[s.next].joins.iter().any(|&b| {
                    trace.branches[b]
                        .children
                        .iter()
                        .any(|c| live_children.contains(c))
                });
        }
        l.snap = Snapshot {
            t_star_ms: t0,
            states,
            spawned_branches: spawned.into_iter().collect(),
        };
        Some(l)
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

    /// The tree's virtual now, ns.
    fn tree_now(&self, tree: &Tree) -> u64 {
        self.origin.elapsed().as_nanos() as u64
            + self.idle.skip_ns.load(Relaxed)
            + tree.idle.skip_ns.load(Relaxed)
    }

    /// The real instant of tree-virtual `due`.
    fn real_at(&self, tree: &Tree, due: u64) -> Instant {
        let skip = self.idle.skip_ns.load(Relaxed) + tree.idle.skip_ns.load(Relaxed);
        self.origin + Duration::from_nanos(due.saturating_sub(skip))
    }

    /// Sleeps until tree-virtual `due` (moved earlier by the idle caps). False when no new turn
    /// may start.
    async fn sleep_until(&self, tree: &Tree, due: u64) -> bool {
        *lock(&tree.pending).entry(due).or_insert(0) += 1;
        let _unregister = Unregister(&tree.pending, due);
        loop {
            let g = self.idle.moved.notified();
            let t = tree.idle.moved.notified();
            tokio::pin!(g, t);
            g.as_mut().enable();
            t.as_mut().enable();
            let at = self.real_at(tree, due);
            if Instant::now() >= at {
                return !self.no_new_turns.is_cancelled();
            }
            tokio::select! {
                _ = tokio::time::sleep_until(at) => {}
                _ = g => {}
                _ = t => {}
                _ = self.no_new_turns.cancelled() => return false,
            }
        }
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
        let messages = lock(&tree.prompts[ci(conv)])
            .as_mut()
            .map(|p| p.turn(k))
            .unwrap_or_else(|| Err("no prompt state".into()));
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
                    body: self.wire.body(&messages, requested, bind.as_deref()),
                    streaming: self.wire.streaming,
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
                let rec = self.client.execute(&req, rec, &self.clock, cancel).await;
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

    /// The earliest pending timer of any live tree, as a real instant.
    fn earliest_timer(&self) -> Option<Instant> {
        let trees: Vec<Arc<Tree>> = lock(&self.trees).values().cloned().collect();
        trees
            .iter()
            .filter_map(|t| {
                let due = lock(&t.pending).keys().next().copied()?;
                Some(self.real_at(t, due))
            })
            .min()
    }
}

/// Removes a timer from its tree's pending set when its sleep ends (fired or abandoned).
struct Unregister<'a>(&'a Mutex<BTreeMap<u64, usize>>, u64);

impl Drop for Unregister<'_> {
    fn drop(&mut self) {
        let mut p = lock(self.0);
        if let Some(n) = p.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                p.remove(&self.1);
            }
        }
    }
}

impl crate::agentx::Conversation {
    /// The branch of a child conversation (`usize::MAX` for the root, which belongs to none).
    fn subagent_branch(&self) -> usize {
        self.subagent.as_ref().map_or(usize::MAX, |s| s.branch)
    }
}

/// The whole-system idle cap (spec §3.4): when no request is in flight, the earliest pending
/// timer fires at most `cap` after the last return; every pending timer moves by the same
/// amount (the system clock skips).
async fn system_idle_monitor(sh: Arc<Shared>, done: CancellationToken) {
    let cap = sh.settings.system_idle_cap;
    let earliest = || sh.earliest_timer();
    idle_loop(&sh.idle, &sh.idle, cap, &done, earliest, &sh.jumps).await;
}

/// The per-tree idle cap (fork semantics): a tree with nothing in flight for `cap` has its own
/// pending timers advanced so the earliest fires now.
async fn tree_idle_monitor(
    sh: Arc<Shared>,
    tree: Arc<Tree>,
    cap: Duration,
    done: CancellationToken,
) {
    let earliest = || {
        let due = lock(&tree.pending).keys().next().copied()?;
        Some(sh.real_at(&tree, due))
    };
    idle_loop(&tree.idle, &tree.idle, cap, &done, earliest, &sh.jumps).await;
}

/// Waits for idleness (nothing in flight in `idle`), then, `cap` after the last return, skips
/// `clock` so the earliest pending timer fires now. Event driven: it sleeps on activity or on the
/// cap's deadline. `clock` is `idle` itself except in the warmup, whose primer timers have their
/// own clock (the profiling clock starts unskipped).
async fn idle_loop(
    idle: &Idle,
    clock: &Idle,
    cap: Duration,
    done: &CancellationToken,
    earliest: impl Fn() -> Option<Instant>,
    jumps: &AtomicU64,
) {
    loop {
        let act = idle.activity.notified();
        tokio::pin!(act);
        act.as_mut().enable();
        if idle.in_flight.load(Relaxed) > 0 {
            tokio::select! {
                _ = act => continue,
                _ = done.cancelled() => return,
            }
        }
        let fire_by = *lock(&idle.last_return) + cap;
        if Instant::now() < fire_by {
            tokio::select! {
                _ = tokio::time::sleep_until(fire_by) => {}
                _ = &mut act => continue,
                _ = done.cancelled() => return,
            }
        }
        if idle.in_flight.load(Relaxed) > 0 {
            continue;
        }
        let now = Instant::now();
        match earliest() {
            Some(at) if at > now + Duration::from_millis(1) => {
                clock.skip(at - now);
                jumps.fetch_add(1, Relaxed);
                // Let the woken timers start their requests before looking again.
                tokio::select! {
                    _ = act => {}
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                    _ = done.cancelled() => return,
                }
            }
            // Nothing pending (streams wait on gates or dependencies) or a timer about to fire:
            // wait for the next request to start or return.
            _ => tokio::select! {
                _ = act => {}
                _ = tokio::time::sleep(cap.max(Duration::from_millis(50))) => {}
                _ = done.cancelled() => return,
            },
        }
    }
}
