//! The AgentX warmup (spec §3.3): primers spread so every lane reaches its t* together, then
//! `--warmup-requests-per-lane`, bounded by the warmup grace, and the hand-off of each lane to
//! profiling (a lane whose tree drained starts with the next root).

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::clock::{idle_loop, Idle, Unregister};
use super::{lock, LaneStart, Replay, Sent, Shared, WarmupStats};
use crate::agentx::prompt::ConvRef;
use crate::agentx::snapshot::{Snapshot, StreamState};
use crate::record::Phase;
use crate::stop::StopReason;

impl Replay {
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
            failure: lock(&sh.warmup_failure).clone(),
        }
    }
}

impl Shared {
    /// A root warmup failure stops the run; the grace's own cancel does not.
    pub(super) fn warmup_result(&self, conv: ConvRef, r: &Sent, expired: &CancellationToken) {
        if conv == ConvRef::Root && !r.ok && !expired.is_cancelled() {
            if let Some(why) = &r.failure {
                lock(&self.warmup_failure).get_or_insert_with(|| why.clone());
            }
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
    pub(super) async fn per_lane_warmup(
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
}
