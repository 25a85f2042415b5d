//! The replay's virtual clocks (spec §3.4's idle caps): every timer is a due instant on its
//! tree's clock, `real + system skip + tree skip`; the whole-system and per-tree idle monitors
//! move a clock forward when nothing is in flight, and the sleepers recompute. Below the lane
//! scheduler (`mod.rs`) and the warmup, which both sleep on these clocks.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{lock, Shared, Tree};

/// Idle bookkeeping of the system or of one tree, and its clock skip.
pub(super) struct Idle {
    pub(super) in_flight: AtomicUsize,
    pub(super) last_return: Mutex<Instant>,
    /// Any request start or return.
    pub(super) activity: Notify,
    /// Virtual-clock skip, ns.
    pub(super) skip_ns: AtomicU64,
    /// The skip moved: sleepers recompute.
    pub(super) moved: Notify,
}

impl Idle {
    pub(super) fn new(now: Instant) -> Idle {
        Idle {
            in_flight: AtomicUsize::new(0),
            last_return: Mutex::new(now),
            activity: Notify::new(),
            skip_ns: AtomicU64::new(0),
            moved: Notify::new(),
        }
    }

    pub(super) fn started(&self) {
        self.in_flight.fetch_add(1, Relaxed);
        self.activity.notify_waiters();
    }

    pub(super) fn returned(&self) {
        *lock(&self.last_return) = Instant::now();
        self.in_flight.fetch_sub(1, Relaxed);
        self.activity.notify_waiters();
    }

    pub(super) fn skip(&self, by: Duration) {
        self.skip_ns.fetch_add(by.as_nanos() as u64, Relaxed);
        self.moved.notify_waiters();
    }
}

/// Removes a timer from its tree's pending set when its sleep ends (fired or abandoned).
pub(super) struct Unregister<'a>(pub(super) &'a Mutex<BTreeMap<u64, usize>>, pub(super) u64);

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

impl Shared {
    /// The tree's virtual now, ns.
    pub(super) fn tree_now(&self, tree: &Tree) -> u64 {
        self.origin.elapsed().as_nanos() as u64
            + self.idle.skip_ns.load(Relaxed)
            + tree.idle.skip_ns.load(Relaxed)
    }

    /// The real instant of tree-virtual `due`.
    pub(super) fn real_at(&self, tree: &Tree, due: u64) -> Instant {
        let skip = self.idle.skip_ns.load(Relaxed) + tree.idle.skip_ns.load(Relaxed);
        self.origin + Duration::from_nanos(due.saturating_sub(skip))
    }

    /// Sleeps until tree-virtual `due` (moved earlier by the idle caps). False when no new turn
    /// may start.
    pub(super) async fn sleep_until(&self, tree: &Tree, due: u64) -> bool {
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

    /// The earliest pending timer of any live tree, as a real instant.
    pub(super) fn earliest_timer(&self) -> Option<Instant> {
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

/// The whole-system idle cap (spec §3.4): when no request is in flight, the earliest pending
/// timer fires at most `cap` after the last return; every pending timer moves by the same
/// amount (the system clock skips).
pub(super) async fn system_idle_monitor(sh: Arc<Shared>, done: CancellationToken) {
    let cap = sh.settings.system_idle_cap;
    let earliest = || sh.earliest_timer();
    idle_loop(&sh.idle, &sh.idle, cap, &done, earliest, &sh.jumps).await;
}

/// The per-tree idle cap (fork semantics): a tree with nothing in flight for `cap` has its own
/// pending timers advanced so the earliest fires now.
pub(super) async fn tree_idle_monitor(
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
pub(super) async fn idle_loop(
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
