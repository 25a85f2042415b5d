//! The simulator's own timer: one OS thread that wakes tasks at exact instants.
//!
//! tokio's timer rounds to whole milliseconds and fires late under load, which would smear the very
//! latencies the client is measuring. This thread keeps deadlines in a heap, sleeps with a 1 ns
//! timer slack (so the kernel does not batch its wake-up by the default 50 µs), and spins through
//! the last stretch before a deadline, at most a fifth of the time. The simulator exports how late
//! each emission really was.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Condvar, Mutex};
use std::task::Waker;
use std::time::{Duration, Instant};

/// How close to a deadline the thread stops sleeping and spins. Kept small: on a 2-core machine a
/// spinning thread competes with the client being measured.
const SPIN: Duration = Duration::from_micros(60);

/// After a spin the thread sleeps, however near the next deadline, until this long has passed:
/// the spin then takes at most a fifth of its CPU. Dense deadlines (64 streams at a token a
/// millisecond: one every 16 µs) would otherwise chain spins into a real-time thread that never
/// yields, starving whatever shares its CPU: the simulator's own workers (emissions batched a
/// millisecond late) or the client (a stream sent on time read as one burst).
const SPIN_GAP: Duration = Duration::from_micros(4 * 60);

struct Entry {
    at: Instant,
    seq: u64,
    waker: Waker,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

#[derive(Default)]
struct State {
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
    shutdown: bool,
}

struct Inner {
    state: Mutex<State>,
    cv: Condvar,
}

/// Handle to the timer thread; the thread stops when the last handle is dropped.
#[derive(Clone)]
pub(crate) struct PreciseTimer {
    inner: Arc<Inner>,
    _guard: Arc<Guard>,
}

struct Guard(Arc<Inner>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .shutdown = true;
        self.0.cv.notify_one();
    }
}

impl PreciseTimer {
    pub(crate) fn start() -> std::io::Result<Self> {
        let inner = Arc::new(Inner {
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
        });
        let thread_inner = inner.clone();
        std::thread::Builder::new()
            .name("specperf-sim-timer".into())
            .spawn(move || run(&thread_inner))?;
        Ok(PreciseTimer {
            _guard: Arc::new(Guard(inner.clone())),
            inner,
        })
    }

    /// Wakes `waker` at `at` (or at once if `at` has passed).
    pub(crate) fn wake_at(&self, at: Instant, waker: Waker) {
        let mut st = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        let earliest = st.heap.peek().map(|Reverse(e)| e.at);
        st.seq += 1;
        let seq = st.seq;
        st.heap.push(Reverse(Entry { at, seq, waker }));
        drop(st);
        if earliest.is_none_or(|e| at < e) {
            self.inner.cv.notify_one();
        }
    }
}

fn run(inner: &Inner) {
    set_timer_slack_ns(1);
    raise_priority();
    let mut due: Vec<Waker> = Vec::new();
    let mut spun: Option<Instant> = None;
    let mut st = inner.state.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if st.shutdown {
            return;
        }
        let now = Instant::now();
        while let Some(Reverse(e)) = st.heap.peek() {
            if e.at > now {
                break;
            }
            let Some(Reverse(e)) = st.heap.pop() else {
                break;
            };
            due.push(e.waker);
        }
        if !due.is_empty() {
            drop(st);
            for w in due.drain(..) {
                w.wake();
            }
            st = inner.state.lock().unwrap_or_else(|e| e.into_inner());
            continue;
        }
        match st.heap.peek().map(|Reverse(e)| e.at) {
            None => st = inner.cv.wait(st).unwrap_or_else(|e| e.into_inner()),
            Some(at) => {
                let since_spin = spun.map(|end| now.saturating_duration_since(end));
                match wait(at.saturating_duration_since(now), since_spin) {
                    Wait::Sleep(d) => {
                        st = inner
                            .cv
                            .wait_timeout(st, d)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                    }
                    Wait::Spin => {
                        // Without the lock so registrations are not blocked.
                        drop(st);
                        while Instant::now() < at {
                            std::hint::spin_loop();
                        }
                        spun = Some(Instant::now());
                        st = inner.state.lock().unwrap_or_else(|e| e.into_inner());
                    }
                }
            }
        }
    }
}

/// How the thread waits for a deadline `left` away.
#[derive(Debug, PartialEq)]
enum Wait {
    /// Sleep this long (on the condition variable, so an earlier registration ends it).
    Sleep(Duration),
    /// Spin until the deadline.
    Spin,
}

/// Sleeps until `SPIN` before the deadline and spins the rest, unless the last spin ended
/// (`since_spin` ago) within `SPIN_GAP`: then it sleeps the rest too.
fn wait(left: Duration, since_spin: Option<Duration>) -> Wait {
    if left > SPIN {
        Wait::Sleep(left - SPIN)
    } else if since_spin.is_some_and(|d| d < SPIN_GAP) {
        Wait::Sleep(left)
    } else {
        Wait::Spin
    }
}

/// Linux batches timer wake-ups of a thread by its timer slack (50 µs by default); 1 ns makes the
/// sleep end when asked. Elsewhere this is a no-op and the spin window absorbs the difference.
#[allow(unsafe_code)]
fn set_timer_slack_ns(ns: u64) {
    #[cfg(target_os = "linux")]
    {
        // prctl is variadic and the C library reads its four trailing arguments as `unsigned
        // long`. A bare `0` is a 32-bit int whose upper register half neither x86-64's nor
        // aarch64's ABI defines; harmless here (PR_SET_TIMERSLACK ignores them), but passing the
        // width the callee reads keeps the call right for any option.
        let zero: libc::c_ulong = 0;
        // SAFETY: PR_SET_TIMERSLACK takes one integer argument and only changes this thread's slack.
        unsafe {
            libc::prctl(
                libc::PR_SET_TIMERSLACK,
                ns as libc::c_ulong,
                zero,
                zero,
                zero,
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = ns;
}

/// Best effort: a real-time priority lets this thread preempt the busy client threads the moment a
/// deadline comes (it only ever runs briefly). Without the privilege it stays a normal thread.
///
/// `pthread_setschedparam` rather than `sched_setscheduler(0, ..)`: the two do the same on glibc
/// (Linux applies either to the calling thread only), but musl's `sched_setscheduler` always fails
/// with `ENOSYS`, so a static musl build would silently lose the priority.
#[allow(unsafe_code)]
fn raise_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: `sched_param` is plain data, so all-zero is a valid value (musl's has reserved
    // fields besides the priority, hence no struct literal); the call only reads it, and
    // `pthread_self` is always a valid handle for the calling thread.
    unsafe {
        let mut param: libc::sched_param = std::mem::zeroed();
        param.sched_priority = 1;
        libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A future that completes at `at` on the precise timer.
    struct SleepUntil {
        timer: PreciseTimer,
        at: Instant,
    }

    impl SleepUntil {
        fn new(timer: &PreciseTimer, at: Instant) -> Self {
            SleepUntil {
                timer: timer.clone(),
                at,
            }
        }
    }

    impl std::future::Future for SleepUntil {
        type Output = ();
        fn poll(
            self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<()> {
            if Instant::now() >= self.at {
                return std::task::Poll::Ready(());
            }
            // Registered again on a spurious poll: the waker may have changed; extra wake-ups are harmless.
            self.timer.wake_at(self.at, cx.waker().clone());
            std::task::Poll::Pending
        }
    }

    #[test]
    fn spins_before_a_deadline_at_most_a_fifth_of_the_time() {
        let us = Duration::from_micros;
        // Far deadlines: sleep until the spin window, then spin.
        assert_eq!(wait(us(1000), None), Wait::Sleep(us(940)));
        assert_eq!(wait(us(1000), Some(us(5000))), Wait::Sleep(us(940)));
        assert_eq!(wait(us(60), None), Wait::Spin);
        assert_eq!(wait(us(10), Some(SPIN_GAP)), Wait::Spin);
        // Right after a spin: a deadline within the window is slept to, until the gap has
        // passed; a farther one is slept towards as ever (the gap may have passed by then).
        assert_eq!(wait(us(10), Some(us(0))), Wait::Sleep(us(10)));
        assert_eq!(wait(us(60), Some(us(239))), Wait::Sleep(us(60)));
        assert_eq!(wait(us(1000), Some(us(0))), Wait::Sleep(us(940)));
        // A spin lasts at most SPIN and is followed by at least SPIN_GAP without one.
        assert!(SPIN * 5 <= SPIN + SPIN_GAP);
    }

    #[tokio::test]
    async fn wakes_at_the_deadline_not_before() {
        let timer = PreciseTimer::start().unwrap();
        let mut late = Vec::new();
        for _ in 0..20 {
            // Each deadline counts from the last wake-up, not from one start: a single slow wake
            // (the thread's first run takes tens of ms under qemu) would otherwise leave every
            // later deadline already past, and late by all the time lost before it.
            let at = Instant::now() + Duration::from_micros(1500);
            SleepUntil::new(&timer, at).await;
            let now = Instant::now();
            assert!(now >= at);
            late.push(now - at);
        }
        // Not a timing assertion on a shared machine: only that it never fires early and that
        // it does not fall back to whole-millisecond ticks every time.
        assert!(
            late.iter().any(|l| *l < Duration::from_millis(1)),
            "{late:?}"
        );
    }
}
