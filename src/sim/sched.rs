//! Admission to an engine, as vLLM's scheduler does it: a request runs when the engine has a
//! running slot (`max_running`, vLLM's `max_num_seqs`) and KV blocks for it ([`KvPool`]);
//! otherwise it waits in arrival order, and the head of the queue blocks the rest (first come,
//! first served). A waiting request is really delayed: its time to first token starts counting
//! from its admission. Finished requests free their blocks and admit the waiting ones.
//!
//! The counters that vLLM moves when a request is scheduled move here: prompt tokens and the
//! prefix-cache queries and hits.
//!
//! Below `state`, which holds one [`EngineSched`] per engine beside its counters: this file
//! imports only `kv` and `model`, and its callers hand it the engine's scheduler and counters.

use std::collections::VecDeque;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::kv::{KvPool, Lease, PromptBlocks};
use super::model::EngineCounters;

/// A request waiting for an engine.
struct Waiter {
    id: u64,
    prompt: PromptBlocks,
    max_tokens: u64,
    tx: oneshot::Sender<Lease>,
}

/// One engine's running slots, KV pool and waiting queue.
pub(crate) struct EngineState {
    pub(crate) pool: KvPool,
    running: u64,
    waiting: VecDeque<Waiter>,
    next_id: u64,
}

/// One engine's scheduler.
pub(crate) struct EngineSched {
    state: Mutex<EngineState>,
    max_running: u64,
}

/// What the admission gives a request: its blocks, and how long it waited for them.
pub(crate) struct Admitted {
    pub(crate) lease: Lease,
    pub(crate) waited: Duration,
}

impl EngineSched {
    pub(crate) fn new(pool: KvPool, max_running: Option<u32>) -> Self {
        EngineSched {
            state: Mutex::new(EngineState {
                pool,
                running: 0,
                waiting: VecDeque::new(),
                next_id: 0,
            }),
            max_running: max_running.map_or(u64::MAX, u64::from),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, EngineState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Requests waiting for this engine (`vllm:num_requests_waiting`).
    pub(crate) fn waiting(&self) -> usize {
        self.lock().waiting.len()
    }

    /// KV usage, 0..1 (`vllm:kv_cache_usage_perc`).
    pub(crate) fn usage(&self) -> f64 {
        self.lock().pool.usage()
    }

    /// Tries to run `prompt` now; counts it when it runs.
    fn try_run(
        &self,
        pool: &mut KvPool,
        running: &mut u64,
        c: &EngineCounters,
        prompt: &PromptBlocks,
        max_tokens: u64,
    ) -> Option<Lease> {
        if *running >= self.max_running {
            return None;
        }
        let lease = pool.try_admit(prompt, max_tokens)?;
        *running += 1;
        c.running.fetch_add(1, Relaxed);
        c.prompt_tokens.fetch_add(prompt.tokens, Relaxed);
        c.prefix_cache_queries.fetch_add(prompt.tokens, Relaxed);
        c.prefix_cache_hits.fetch_add(lease.hit_tokens, Relaxed);
        Some(lease)
    }

    /// Admits waiting requests from the head of the queue while they fit.
    fn drain(&self, st: &mut EngineState, c: &EngineCounters) {
        let EngineState {
            pool,
            running,
            waiting,
            ..
        } = st;
        while let Some(w) = waiting.front() {
            let Some(lease) = self.try_run(pool, running, c, &w.prompt, w.max_tokens) else {
                break;
            };
            let Some(w) = waiting.pop_front() else {
                break;
            };
            // The receiver is gone only if its request was dropped without its guard running,
            // which the guard prevents; give the blocks back all the same.
            if let Err(lease) = w.tx.send(lease) {
                pool.release(lease);
                *running -= 1;
                c.running.fetch_sub(1, Relaxed);
            }
        }
    }

    fn finish(&self, st: &mut EngineState, c: &EngineCounters, lease: Lease) {
        st.pool.release(lease);
        st.running -= 1;
        c.running.fetch_sub(1, Relaxed);
    }
}

/// Runs the request on the engine of `sched` and `counters` now, or waits its turn. Dropping the
/// future (the client went away) leaves the queue.
pub(crate) async fn admit(
    sched: &EngineSched,
    counters: &EngineCounters,
    prompt: PromptBlocks,
    max_tokens: u64,
) -> Admitted {
    let start = Instant::now();
    let (tx, rx) = oneshot::channel();
    let id = {
        let mut st = sched.lock();
        if st.waiting.is_empty() {
            let EngineState { pool, running, .. } = &mut *st;
            if let Some(lease) = sched.try_run(pool, running, counters, &prompt, max_tokens) {
                return Admitted {
                    lease,
                    waited: Duration::ZERO,
                };
            }
        }
        st.next_id += 1;
        let id = st.next_id;
        st.waiting.push_back(Waiter {
            id,
            prompt,
            max_tokens,
            tx,
        });
        id
    };
    let mut guard = WaitGuard {
        sched,
        counters,
        id,
        rx: Some(rx),
    };
    let lease = match guard.rx.as_mut() {
        Some(rx) => rx.await.ok(),
        None => None,
    };
    guard.rx = None;
    match lease {
        Some(lease) => Admitted {
            lease,
            waited: start.elapsed(),
        },
        // The sender is only dropped unsent when the simulator shuts down.
        None => std::future::pending().await,
    }
}

/// Takes a waiting request out of the queue if its future is dropped before it runs, or gives
/// back the blocks it was granted just before.
struct WaitGuard<'a> {
    sched: &'a EngineSched,
    counters: &'a EngineCounters,
    id: u64,
    rx: Option<oneshot::Receiver<Lease>>,
}

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        let Some(mut rx) = self.rx.take() else {
            return;
        };
        let mut st = self.sched.lock();
        if let Some(i) = st.waiting.iter().position(|w| w.id == self.id) {
            st.waiting.remove(i);
            // It may have been the head holding the others back.
            self.sched.drain(&mut st, self.counters);
        } else if let Ok(lease) = rx.try_recv() {
            self.sched.finish(&mut st, self.counters, lease);
            self.sched.drain(&mut st, self.counters);
        }
    }
}

/// The output has reached `emitted` tokens: fills the blocks it needs.
pub(crate) fn grow(sched: &EngineSched, lease: &mut Lease, emitted: u64) {
    if lease.grows_at(emitted) {
        sched.lock().pool.grow(lease, emitted);
    }
}

/// The request ended: frees its blocks and its slot, and admits whoever fits now.
pub(crate) fn release(sched: &EngineSched, counters: &EngineCounters, lease: Lease) {
    let mut st = sched.lock();
    sched.finish(&mut st, counters, lease);
    sched.drain(&mut st, counters);
}
