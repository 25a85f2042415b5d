//! When each request should start: a [`Plan`] of tickets, and the one dispatcher that releases
//! them.
//!
//! - Closed loop: `concurrency` slots; a ticket goes the moment a slot frees, so its intended
//!   start is "now" (optionally ramping the slots from 1 to N).
//! - Open loop: arrival offsets computed up front from a seed (constant, Poisson, gamma), or a
//!   trace's timestamps; a ticket is due at its offset whatever the server is doing. With a cap on
//!   in-flight requests it also waits for a slot. Each request records its intended time, so a slow
//!   server turns into schedule lag and late arrivals, never a silently lower rate.
//!
//! Sharding (`--shard i/N`) takes ticket ids `≡ i (mod N)` of the one global plan, so the union of
//! the shards is exactly the single-process plan.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Inter-arrival distribution of an open-loop schedule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArrivalPattern {
    /// Every `1/rate`.
    Constant,
    /// Exponential gaps with mean `1/rate`.
    #[default]
    Poisson,
    /// Gamma gaps, shape = `--arrival-smoothness` (1 = Poisson; < 1 burstier), scale `1/(rate·shape)`.
    Gamma,
}

/// One request (or session) to start.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Ticket {
    /// Global dispatch number (unique across shards).
    pub(crate) id: u64,
    /// Which sample it sends.
    pub(crate) sample: usize,
    /// Intended start, offset from the phase start; `None` in closed loop (as soon as a slot is free).
    pub(crate) at: Option<Duration>,
}

/// A shard of a run: this process is `index` of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// 0-based index.
    pub index: u32,
    /// Number of shards.
    pub count: u32,
}

impl Shard {
    /// The whole run in one process.
    pub const SINGLE: Shard = Shard { index: 0, count: 1 };

    fn owns(self, id: u64) -> bool {
        id % u64::from(self.count) == u64::from(self.index)
    }

    /// This shard's part of `total` (the first `total % count` shards take one more).
    pub fn part(self, total: u64) -> u64 {
        let (c, i) = (u64::from(self.count), u64::from(self.index));
        total / c + u64::from(i < total % c)
    }
}

/// The load shape of a run (`meta.load.mode`): the three kinds of tickets the dispatcher releases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadMode {
    /// A fixed number of requests in flight.
    Closed,
    /// Arrivals at a request rate.
    Open,
    /// Arrivals at a trace's timestamps.
    Trace,
}

impl LoadMode {
    /// The name written in the summary.
    pub fn as_str(self) -> &'static str {
        match self {
            LoadMode::Closed => "closed",
            LoadMode::Open => "open",
            LoadMode::Trace => "trace",
        }
    }
}

/// The tickets of one phase.
#[derive(Clone, Debug)]
pub(crate) enum Tickets {
    /// `count` tickets (u64::MAX: until the duration limit), samples in order, cycling.
    Closed { count: u64 },
    /// One ticket per arrival offset.
    Open { arrivals: Vec<Duration> },
    /// One ticket per trace row, each with its own sample and offset.
    Trace { rows: Vec<(usize, Duration)> },
}

/// Everything the dispatcher needs for one phase.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub(crate) tickets: Tickets,
    pub(crate) samples: usize,
    /// In-flight limit: closed-loop concurrency, or the cap of an open loop (`None`: unbounded).
    pub(crate) slots: Option<usize>,
    /// Closed loop: grow the slots linearly from 1 to `slots` over this time.
    pub(crate) ramp: Option<Duration>,
    /// Stop issuing after this long.
    pub(crate) duration: Option<Duration>,
    pub(crate) shard: Shard,
}

impl Tickets {
    /// Which load shape these tickets make.
    pub(crate) fn mode(&self) -> LoadMode {
        match self {
            Tickets::Closed { .. } => LoadMode::Closed,
            Tickets::Open { .. } => LoadMode::Open,
            Tickets::Trace { .. } => LoadMode::Trace,
        }
    }
}

impl Plan {
    /// The global ticket `id`, whatever the shard.
    fn ticket(&self, id: u64) -> Option<Ticket> {
        match &self.tickets {
            Tickets::Closed { count } => (id < *count).then(|| Ticket {
                id,
                sample: (id % self.samples as u64) as usize,
                at: None,
            }),
            Tickets::Open { arrivals } => arrivals.get(id as usize).map(|&at| Ticket {
                id,
                sample: (id % self.samples as u64) as usize,
                at: Some(at),
            }),
            Tickets::Trace { rows } => rows.get(id as usize).map(|&(sample, at)| Ticket {
                id,
                sample,
                at: Some(at),
            }),
        }
    }

    /// The sample of this shard's `n`-th ticket (for printing what a run would send).
    pub(crate) fn ticket_for(&self, n: u64) -> Option<usize> {
        let id = u64::from(self.shard.index) + n * u64::from(self.shard.count);
        self.ticket(id).map(|t| t.sample)
    }

    /// Tickets this shard will issue without a duration limit (`None`: unbounded).
    pub(crate) fn len(&self) -> Option<u64> {
        let total = match &self.tickets {
            Tickets::Closed { count } if *count == u64::MAX => return None,
            Tickets::Closed { count } => *count,
            Tickets::Open { arrivals } => arrivals.len() as u64,
            Tickets::Trace { rows } => rows.len() as u64,
        };
        Some(self.shard.part(total))
    }
}

/// Arrival offsets for `count` requests at `rate` per second: the first at 0, then gaps drawn
/// from `pattern` with a ChaCha8 generator seeded by `seed` (identical on every platform). With
/// `ramp`, the rate grows linearly from 0 to `rate` over that time (time-rescaling of the same
/// unit-rate process), so the same seed gives the same arrivals in "operational time".
pub fn arrivals(
    rate: f64,
    pattern: ArrivalPattern,
    smoothness: f64,
    count: usize,
    seed: u64,
    ramp: Option<Duration>,
) -> Vec<Duration> {
    assert!(rate > 0.0 && rate.is_finite(), "rate must be positive");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let gamma = rand_distr::Gamma::new(smoothness, 1.0 / smoothness)
        .unwrap_or_else(|_| rand_distr::Gamma::new(1.0, 1.0).expect("valid gamma"));
    let ramp_s = ramp.map(|r| r.as_secs_f64()).filter(|r| *r > 0.0);
    let mut a = 0.0f64; // cumulative unit-rate time
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        if i > 0 {
            a += match pattern {
                ArrivalPattern::Constant => 1.0,
                ArrivalPattern::Poisson => {
                    // Inverse transform on (0, 1]: never ln(0).
                    let u: f64 = 1.0 - rng.random::<f64>();
                    -u.ln()
                }
                ArrivalPattern::Gamma => rng.sample(gamma),
            };
        }
        // Λ(t) = ∫ r: R·t²/(2S) during the ramp, then linear. Invert at Λ = a.
        let t = match ramp_s {
            Some(s) if a <= rate * s / 2.0 => (2.0 * s * a / rate).sqrt(),
            Some(s) => s + (a - rate * s / 2.0) / rate,
            None => a / rate,
        };
        out.push(Duration::from_secs_f64(t));
    }
    out
}

/// What the dispatcher did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DispatchStats {
    /// Tickets issued by this process.
    pub issued: u64,
    /// Open loop: tickets sent more than the lateness tolerance after their intended time.
    pub late: u64,
    /// Open loop: largest lag between intended and actual release, ms.
    pub max_lag_ms: f64,
    /// Tickets not issued because the duration limit or a stop came first.
    pub not_issued: u64,
}

/// Shared view of the dispatcher's progress (for the stall watchdog).
#[derive(Debug, Default)]
pub(crate) struct Issued(AtomicU64);

impl Issued {
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// A released ticket: launch it; hold `permit` until the request ends.
pub(crate) struct Release {
    pub(crate) ticket: Ticket,
    /// Intended start, offset from the phase start (closed loop: the moment the slot was free).
    pub(crate) intended: Duration,
    pub(crate) permit: Option<OwnedSemaphorePermit>,
}

/// Releases the plan's tickets for this shard at their times into `launch`, until the plan ends,
/// the duration passes, or `stop` fires. `tolerance`: lag above which an arrival counts as late.
pub(crate) async fn dispatch(
    plan: &Plan,
    start: Instant,
    stop: &CancellationToken,
    tolerance: Duration,
    issued: &Issued,
    mut launch: impl FnMut(Release),
) -> DispatchStats {
    let mut stats = DispatchStats::default();
    let slots = plan.slots.map(|n| {
        let initial = if plan.ramp.is_some() { 1 } else { n };
        (Arc::new(Semaphore::new(initial)), n)
    });
    // Ramp: add one slot at each step of ramp / (n - 1) until there are n.
    let ramp_task = match (&slots, plan.ramp) {
        (Some((sem, n)), Some(ramp)) if *n > 1 => {
            let (sem, n) = (sem.clone(), *n);
            let stop = stop.clone();
            Some(tokio::spawn(async move {
                for k in 1..n {
                    let at = start + ramp.mul_f64(k as f64 / (n - 1) as f64);
                    tokio::select! {
                        _ = tokio::time::sleep_until(at) => sem.add_permits(1),
                        _ = stop.cancelled() => return,
                    }
                }
            }))
        }
        _ => None,
    };
    let end = plan.duration.map(|d| start + d);
    let mut id = u64::from(plan.shard.index);
    let step = u64::from(plan.shard.count);
    while let Some(ticket) = plan.ticket(id) {
        id += step;
        debug_assert!(plan.shard.owns(ticket.id));
        if let Some(at) = ticket.at {
            let due = start + at;
            if end.is_some_and(|e| due >= e) {
                stats.not_issued += 1;
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep_until(due) => {}
                _ = stop.cancelled() => { stats.not_issued += 1; break }
            }
        }
        let permit = match &slots {
            None => None,
            Some((sem, _)) => {
                let acquire = sem.clone().acquire_owned();
                let until_end = async {
                    match end {
                        Some(e) => tokio::time::sleep_until(e).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    biased;
                    _ = stop.cancelled() => { stats.not_issued += 1; break }
                    p = acquire => p.ok(),
                    _ = until_end => { stats.not_issued += 1; break }
                }
            }
        };
        let now = Instant::now();
        // A slot freed by a cancelled request must not start a new one.
        if stop.is_cancelled() || end.is_some_and(|e| now >= e) {
            stats.not_issued += 1;
            break;
        }
        let intended = match ticket.at {
            Some(at) => {
                let lag = now.saturating_duration_since(start + at);
                if lag > tolerance {
                    stats.late += 1;
                }
                stats.max_lag_ms = stats.max_lag_ms.max(lag.as_secs_f64() * 1e3);
                at
            }
            None => now - start,
        };
        stats.issued += 1;
        issued.0.fetch_add(1, Relaxed);
        launch(Release {
            ticket,
            intended,
            permit,
        });
    }
    if let Some(t) = ramp_task {
        t.abort();
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn arrivals_are_exact_per_pattern_and_seed() {
        let c = arrivals(4.0, ArrivalPattern::Constant, 1.0, 5, 0, None);
        let ms: Vec<u128> = c.iter().map(|d| d.as_millis()).collect();
        assert_eq!(ms, [0, 250, 500, 750, 1000]);
        // Same seed, same schedule; another seed, another one.
        let p1 = arrivals(10.0, ArrivalPattern::Poisson, 1.0, 1000, 42, None);
        assert_eq!(
            p1,
            arrivals(10.0, ArrivalPattern::Poisson, 1.0, 1000, 42, None)
        );
        assert_ne!(
            p1,
            arrivals(10.0, ArrivalPattern::Poisson, 1.0, 1000, 43, None)
        );
        // Mean rate within 5 standard errors of 10/s (gaps have sd = mean for Poisson).
        let mean_gap = p1[999].as_secs_f64() / 999.0;
        assert!(
            (mean_gap - 0.1).abs() < 5.0 * 0.1 / 999f64.sqrt(),
            "{mean_gap}"
        );
        let g = arrivals(10.0, ArrivalPattern::Gamma, 0.25, 4000, 7, None);
        let gaps: Vec<f64> = g.windows(2).map(|w| (w[1] - w[0]).as_secs_f64()).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        // Gamma(shape s, scale 1/(R s)): mean 1/R, coefficient of variation 1/sqrt(s) = 2.
        assert!((mean - 0.1).abs() < 0.01, "{mean}");
        let cv = var.sqrt() / mean;
        assert!((cv - 2.0).abs() < 0.2, "cv {cv}");
        // Monotone.
        assert!(g.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn arrival_offsets_are_pinned_for_each_pattern() {
        // Regression pins: changing the generator or the inversion changes these.
        let us = |p: ArrivalPattern, s: f64| -> Vec<u128> {
            arrivals(100.0, p, s, 4, 2026, None)
                .iter()
                .map(|d| d.as_micros())
                .collect()
        };
        assert_eq!(
            us(ArrivalPattern::Constant, 1.0),
            [0, 10_000, 20_000, 30_000]
        );
        let poisson = us(ArrivalPattern::Poisson, 1.0);
        let gamma = us(ArrivalPattern::Gamma, 0.5);
        assert_eq!(poisson, PINNED_POISSON);
        assert_eq!(gamma, PINNED_GAMMA);
    }

    const PINNED_POISSON: [u128; 4] = [0, 9154, 12084, 12515];
    const PINNED_GAMMA: [u128; 4] = [0, 6924, 7108, 32047];

    #[test]
    fn ramp_starts_slow_and_reaches_the_rate() {
        let a = arrivals(
            10.0,
            ArrivalPattern::Constant,
            1.0,
            200,
            0,
            Some(Duration::from_secs(10)),
        );
        // Λ(10 s) = 10·10/2 = 50 arrivals during the ramp; then 10/s.
        let during = a.iter().filter(|d| **d < Duration::from_secs(10)).count();
        assert!((49..=51).contains(&during), "{during}");
        let gap_after = (a[199] - a[198]).as_secs_f64();
        assert!((gap_after - 0.1).abs() < 1e-9);
        assert!((a[1] - a[0]) > (a[60] - a[59]));
    }

    fn plan(tickets: Tickets, slots: Option<usize>) -> Plan {
        Plan {
            tickets,
            samples: 3,
            slots,
            ramp: None,
            duration: None,
            shard: Shard::SINGLE,
        }
    }

    /// Runs a plan on the paused clock against a fake server that takes `service` per request;
    /// returns (id, intended, sent) per ticket and the stats.
    async fn run(plan: Plan, service: Duration) -> (Vec<(u64, Duration, Duration)>, DispatchStats) {
        let start = Instant::now();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = CancellationToken::new();
        let tracker = tokio_util::task::TaskTracker::new();
        let stats = dispatch(
            &plan,
            start,
            &stop,
            Duration::from_millis(1),
            &Issued::default(),
            |r| {
                let log = log.clone();
                log.lock()
                    .unwrap()
                    .push((r.ticket.id, r.intended, Instant::now() - start));
                tracker.spawn(async move {
                    tokio::time::sleep(service).await;
                    drop(r.permit);
                });
            },
        )
        .await;
        tracker.close();
        tracker.wait().await;
        let v = log.lock().unwrap().clone();
        (v, stats)
    }

    #[tokio::test(start_paused = true)]
    async fn open_loop_sends_at_the_intended_times_whatever_the_server_does() {
        let arr = arrivals(5.0, ArrivalPattern::Poisson, 1.0, 50, 9, None);
        let (log, stats) = run(
            plan(
                Tickets::Open {
                    arrivals: arr.clone(),
                },
                None,
            ),
            Duration::from_secs(3),
        )
        .await;
        assert_eq!(log.len(), 50);
        for ((_, intended, sent), want) in log.iter().zip(&arr) {
            assert_eq!(intended, want);
            // The paused clock wakes timers at exactly their deadline (to the ms tick).
            assert!(
                sent.saturating_sub(*want) <= Duration::from_millis(1),
                "{sent:?} vs {want:?}"
            );
        }
        assert_eq!(stats.late, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_server_under_a_cap_becomes_schedule_lag_not_a_lower_rate() {
        // 10/s constant, at most 2 in flight, each takes 1 s: the server can do 2/s.
        let arr = arrivals(10.0, ArrivalPattern::Constant, 1.0, 20, 0, None);
        let (log, stats) = run(
            plan(Tickets::Open { arrivals: arr }, Some(2)),
            Duration::from_secs(1),
        )
        .await;
        assert_eq!(log.len(), 20, "every arrival is still sent");
        // Intended times stay on the 100 ms grid; actual sends fall behind by up to ~9 s.
        for (id, intended, _) in &log {
            assert_eq!(*intended, Duration::from_millis(100 * id));
        }
        let last = log.last().unwrap();
        assert!(last.2 - last.1 > Duration::from_secs(7), "{last:?}");
        assert_eq!(stats.late, 18, "all but the first two waited for a slot");
        assert!(stats.max_lag_ms > 7000.0);
    }

    #[tokio::test(start_paused = true)]
    async fn closed_loop_keeps_n_in_flight_and_ramps() {
        let (log, _) = run(
            plan(Tickets::Closed { count: 9 }, Some(3)),
            Duration::from_secs(1),
        )
        .await;
        let sends: Vec<u64> = log.iter().map(|l| l.2.as_millis() as u64).collect();
        assert_eq!(sends, [0, 0, 0, 1000, 1000, 1000, 2000, 2000, 2000]);
        let mut p = plan(Tickets::Closed { count: 6 }, Some(3));
        p.ramp = Some(Duration::from_secs(10));
        let (log, _) = run(p, Duration::from_secs(100)).await;
        let sends: Vec<u64> = log.iter().map(|l| l.2.as_secs()).collect();
        // 1 slot at 0 s, 2 at 5 s, 3 at 10 s; then slots free at 100 s, 105 s, 110 s.
        assert_eq!(sends, [0, 5, 10, 100, 105, 110]);
    }

    #[tokio::test(start_paused = true)]
    async fn duration_limit_stops_issuing_and_shards_partition_the_plan() {
        let mut p = plan(Tickets::Closed { count: u64::MAX }, Some(2));
        p.duration = Some(Duration::from_millis(2500));
        let (log, stats) = run(p, Duration::from_secs(1)).await;
        assert_eq!(log.len(), 6, "two at 0, 1 and 2 s");
        assert_eq!(stats.not_issued, 1);
        let arr = arrivals(10.0, ArrivalPattern::Poisson, 1.0, 10, 1, None);
        let mut union = Vec::new();
        for index in 0..3 {
            let mut p = plan(
                Tickets::Open {
                    arrivals: arr.clone(),
                },
                None,
            );
            p.shard = Shard { index, count: 3 };
            assert_eq!(p.len(), Some([4, 3, 3][index as usize]));
            let (log, _) = run(p, Duration::from_millis(10)).await;
            union.extend(log.into_iter().map(|(id, at, _)| (id, at)));
        }
        union.sort_by_key(|x| x.0);
        let want: Vec<(u64, Duration)> = arr
            .iter()
            .enumerate()
            .map(|(i, a)| (i as u64, *a))
            .collect();
        assert_eq!(union, want);
    }
}
