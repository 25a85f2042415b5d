//! Simulated GPUs: the power each draws from its engine's load, the energy counter that is the
//! exact integral of that power, and the history that gives the truth over any window, so a test
//! can hold the telemetry side's energy figures against what the simulator really drew.
//!
//! Decisions where the brief was open, written down:
//! - **GPUs per engine.** GPUs are laid out as data-parallel ranks with tensor parallelism lay
//!   them out: engine `e` of `E` (global rank, over every server) owns the contiguous GPUs `g`
//!   with `g * E / N == e` (8 GPUs, 2 engines: 0–3 and 4–7). An engine's active requests are
//!   split evenly over its GPUs, so each draws for `active / gpus_of_engine` requests (its
//!   `share`). With fewer GPUs than engines, some engines own none and their load draws nothing.
//! - **Power.** Held constant between ticks: at each tick,
//!   `P = min(max_w, idle_w + per_active_w * share) * (1 + u)`, `u` uniform in
//!   `[-noise, noise]` from a generator seeded by `SimConfig::seed` and the GPU's index (the
//!   sequence of draws repeats; which tick gets which draw follows the wall clock).
//! - **Energy.** At each tick `E += P_prev * (t_tick - t_prev)`; a reading at `t` adds
//!   `P_last * (t - t_last)`. So the counter is the integral of the piecewise-constant power,
//!   continuous in time, and [`GpuFleet::energy_at`] computes the same from the history. Stamps
//!   are the wall clock (Unix ns), the clock the client stamps its requests with; every stamp is
//!   taken under the fleet's lock, so they never go backwards in lock order.
//! - **History.** One [`Tick`] per tick per GPU, the last [`HISTORY`] of them kept (an hour:
//!   24 bytes a tick, 8.6 MB per GPU at the default 10 ms). A window reaching before the oldest
//!   kept tick has no truth (`None`), except before the start, where the counter was 0.
//! - **Dropped GPU.** From `start + at` on it is gone: its history ends with a tick at exactly
//!   that instant (power 0 after it), so its energy stays at what it drew until then.
//! - **Power violation.** Time spent with the demand (`idle_w + per_active_w * share`) at or above
//!   `max_w`, integrated like the energy; the SM clock drops in proportion then.
//!
//! Below `state`, which holds the fleet; `dcgm_page` writes its readings out and `server` ticks
//! it. It imports only `model` (the seed mixer).

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::model::splitmix;

/// Simulated GPUs behind the simulator's engines (`SimConfig::gpus`), served as a DCGM exporter's
/// page at `/dcgm/metrics`. `Default` is an 8-GPU H200 node at 90 W idle.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuSim {
    /// GPUs, indices `0..count`, spread over every engine of every server.
    pub count: u32,
    /// Power with no active request, W.
    pub idle_w: f64,
    /// Power added per active request on the GPU (its share of its engine's), W.
    pub per_active_w: f64,
    /// Power limit, W: the demand is capped here (and the time at the cap counted as a power
    /// violation).
    pub max_w: f64,
    /// Noise on each tick's power, a fraction (0.01 = ±1 %), seeded from `SimConfig::seed`.
    pub noise: f64,
    /// How often power is redrawn from the load.
    pub tick: Duration,
    /// From this long after the start, the page adds `DCGM_FI_DEV_XID_ERRORS` and
    /// `DCGM_FI_DEV_POWER_VIOLATION` (a field appearing mid-run, as when an exporter's counter
    /// list is reloaded).
    pub add_field_at: Option<Duration>,
    /// GPU `.0` disappears from the page `.1` after the start (it fell off the bus), for good.
    pub drop_gpu: Option<(u32, Duration)>,
    /// The page's `Hostname` label (and the seed of the GPUs' UUIDs).
    pub hostname: String,
}

impl Default for GpuSim {
    fn default() -> Self {
        GpuSim {
            count: 8,
            idle_w: 90.0,
            per_active_w: 25.0,
            max_w: 700.0,
            noise: 0.01,
            tick: Duration::from_millis(10),
            add_field_at: None,
            drop_gpu: None,
            hostname: "specperf-sim".into(),
        }
    }
}

/// Checks `SimConfig::gpus`; the message names the flag and the fix.
pub(super) fn validate(g: &GpuSim) -> Result<(), String> {
    let watts = |v: f64| v.is_finite() && v >= 0.0;
    if g.count == 0 {
        return Err("--gpus (--sim-gpus) must be at least 1; leave it out for no GPUs".into());
    }
    if !watts(g.idle_w) || !watts(g.per_active_w) {
        return Err(format!(
            "--gpu-idle-w {} and --gpu-per-active-w {} must be non-negative watts",
            g.idle_w, g.per_active_w
        ));
    }
    if !(g.max_w.is_finite() && g.max_w > 0.0 && g.max_w >= g.idle_w) {
        return Err(format!(
            "the GPU power limit {} W must be positive and at least the idle power {} W",
            g.max_w, g.idle_w
        ));
    }
    if !(0.0..1.0).contains(&g.noise) {
        return Err(format!("GPU power noise {} must be within [0, 1)", g.noise));
    }
    if g.tick < Duration::from_millis(1) {
        return Err(format!(
            "GPU tick {:?} must be at least 1 ms (tokio's timer resolution)",
            g.tick
        ));
    }
    if let Some((gpu, _)) = g.drop_gpu {
        if gpu >= g.count {
            return Err(format!(
                "--gpu-drop {gpu}@…: there are only GPUs 0..{} (--gpus {})",
                g.count - 1,
                g.count
            ));
        }
    }
    Ok(())
}

/// How much history each GPU keeps, as a duration (the tick count follows from the tick).
pub(super) const HISTORY: Duration = Duration::from_secs(3600);

/// Frame buffer of an H200, MiB (`FB_USED + FB_FREE`; the simulator reserves none).
pub(super) const FB_TOTAL_MIB: u64 = 143_771;
/// Frame buffer used with no request: the weights and the CUDA context, MiB.
const FB_BASE_MIB: u64 = 60_000;
/// Frame buffer each active request's KV adds, MiB.
const FB_PER_REQUEST_MIB: f64 = 2048.0;
/// SM clock idle and under load, MHz (H200 SXM).
const SM_CLOCK_IDLE_MHZ: f64 = 345.0;
const SM_CLOCK_MAX_MHZ: f64 = 1980.0;
/// Memory clock, MHz (H200's HBM3e; it does not scale with load).
pub(super) const MEM_CLOCK_MHZ: u64 = 3201;

/// The wall clock, Unix ns.
pub(super) fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos().min(u128::from(u64::MAX)) as u64)
}

/// Unix seconds -> Unix ns (negative and NaN -> 0).
pub(super) fn unix_s_to_ns(s: f64) -> u64 {
    (s * 1e9).round() as u64
}

/// One point of a GPU's history: the counter at `at_ns`, and the power held from then until the
/// next tick.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Tick {
    pub(super) at_ns: u64,
    pub(super) joules: f64,
    pub(super) power_w: f64,
}

impl Tick {
    /// The counter at `t >= at_ns`, before the next tick.
    fn joules_at(&self, t: u64) -> f64 {
        self.joules + self.power_w * t.saturating_sub(self.at_ns) as f64 / 1e9
    }
}

struct Gpu {
    /// Engine (global rank) whose load it draws for.
    engine: usize,
    /// Active requests per GPU of its engine at the last tick.
    share: f64,
    /// Power asked for by the load at the last tick, before the cap and the noise.
    demand_w: f64,
    /// Time with the demand at or above the cap, up to the last tick, ns.
    violation_ns: u64,
    rng: SmallRng,
    history: VecDeque<Tick>,
    /// Gone from the page: its history ended at the drop instant.
    dropped: bool,
}

/// One GPU at a reading's instant, what the page shows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct GpuReading {
    pub(super) index: u32,
    /// Power now (held since the last tick), W.
    pub(super) power_w: f64,
    /// Energy since the start, J.
    pub(super) energy_j: f64,
    /// Active requests per GPU of its engine.
    pub(super) share: f64,
    /// Power asked for by the load, W (above `max_w` when throttled).
    pub(super) demand_w: f64,
    /// Time throttled by the power limit since the start, µs.
    pub(super) violation_us: u64,
    max_w: f64,
}

impl GpuReading {
    /// `DCGM_FI_DEV_GPU_UTIL`: the share of time a kernel runs, saturating with the requests in
    /// the batch (63 % for one, 86 % for two, 0 idle).
    pub(super) fn gpu_util_pct(&self) -> u64 {
        (100.0 * (1.0 - (-self.share).exp()))
            .round()
            .clamp(0.0, 100.0) as u64
    }

    /// `DCGM_FI_DEV_MEM_COPY_UTIL`: decode is bound by memory, about half the kernel time.
    pub(super) fn mem_copy_util_pct(&self) -> u64 {
        (self.gpu_util_pct() as f64 * 0.5).round() as u64
    }

    /// `DCGM_FI_DEV_FB_USED`, MiB: weights plus KV per active request, at most the total.
    pub(super) fn fb_used_mib(&self) -> u64 {
        (FB_BASE_MIB + (self.share * FB_PER_REQUEST_MIB).round() as u64).min(FB_TOTAL_MIB)
    }

    /// `DCGM_FI_DEV_FB_FREE`, MiB.
    pub(super) fn fb_free_mib(&self) -> u64 {
        FB_TOTAL_MIB - self.fb_used_mib()
    }

    /// `DCGM_FI_DEV_SM_CLOCK`, MHz: idle clock with no request, boost under load, lowered in
    /// proportion when the power limit holds the demand back.
    pub(super) fn sm_clock_mhz(&self) -> u64 {
        if self.share <= 0.0 {
            return SM_CLOCK_IDLE_MHZ as u64;
        }
        let throttle = if self.demand_w > self.max_w {
            self.max_w / self.demand_w
        } else {
            1.0
        };
        (SM_CLOCK_MAX_MHZ * throttle).max(SM_CLOCK_IDLE_MHZ).round() as u64
    }

    /// `DCGM_FI_DEV_GPU_TEMP`, °C: rises with power (33 °C at 90 W, 76 °C at 700 W).
    pub(super) fn temp_c(&self) -> u64 {
        (27.0 + 0.07 * self.power_w).round().max(0.0) as u64
    }
}

/// Every GPU at one instant.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct FleetReading {
    /// The GPUs still present, by index.
    pub(super) gpus: Vec<GpuReading>,
    /// Whether `add_field_at` has passed.
    pub(super) extra_fields: bool,
    /// The instant read, Unix ns.
    pub(super) at_ns: u64,
}

/// The simulated GPUs of one simulator.
pub(super) struct GpuFleet {
    pub(super) cfg: GpuSim,
    start_ns: u64,
    /// GPUs per engine: the divisor of each engine's active requests.
    per_engine: Vec<u32>,
    gpus: Mutex<Vec<Gpu>>,
    /// Ticks kept per GPU.
    keep: usize,
}

impl GpuFleet {
    /// `count` GPUs over `engines` engines, starting at `start_ns` (Unix) idle.
    pub(super) fn new(cfg: GpuSim, engines: usize, seed: u64, start_ns: u64) -> GpuFleet {
        let n = cfg.count as usize;
        let engines = engines.max(1);
        let engine_of = |g: usize| g * engines / n;
        let mut per_engine = vec![0u32; engines];
        (0..n).for_each(|g| per_engine[engine_of(g)] += 1);
        let gpus = (0..n)
            .map(|g| {
                // Its own stream, apart from the requests' (`request_rng` mixes the same way).
                let tag = 0x4750_5553_494D_0000 ^ splitmix(g as u64);
                let mut gpu = Gpu {
                    engine: engine_of(g),
                    share: 0.0,
                    demand_w: cfg.idle_w,
                    violation_ns: 0,
                    rng: SmallRng::seed_from_u64(splitmix(seed ^ tag)),
                    history: VecDeque::new(),
                    dropped: false,
                };
                let power_w = draw(&cfg, &mut gpu);
                gpu.history.push_back(Tick {
                    at_ns: start_ns,
                    joules: 0.0,
                    power_w,
                });
                gpu
            })
            .collect();
        let keep = (HISTORY.as_nanos() / cfg.tick.as_nanos().max(1)).max(2) as usize;
        GpuFleet {
            cfg,
            start_ns,
            per_engine,
            gpus: Mutex::new(gpus),
            keep,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Gpu>> {
        self.gpus.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The drop instant, Unix ns, of GPU `i` if it is the one dropped.
    fn drop_ns(&self, i: usize) -> Option<u64> {
        let (gpu, at) = self.cfg.drop_gpu?;
        (gpu as usize == i).then(|| self.start_ns + at.as_nanos() as u64)
    }

    /// Ends GPU `i`'s history at its drop instant once `now` has reached it.
    fn settle(&self, i: usize, g: &mut Gpu, now: u64) {
        let Some(at) = self.drop_ns(i) else { return };
        if g.dropped || now < at {
            return;
        }
        let last = *g
            .history
            .back()
            .expect("a GPU's history starts with a tick");
        let at = at.max(last.at_ns);
        if g.demand_w >= self.cfg.max_w {
            g.violation_ns += at - last.at_ns;
        }
        g.history.push_back(Tick {
            at_ns: at,
            joules: last.joules_at(at),
            power_w: 0.0,
        });
        g.dropped = true;
    }

    /// A tick now, with `running[e]` requests active on engine `e`.
    pub(super) fn tick(&self, running: &[u64]) {
        let mut gpus = self.lock();
        self.tick_at(&mut gpus, now_ns(), running);
    }

    /// Settles GPU `i` at `now`; unless it dropped, its last tick and `now` (never before that
    /// tick).
    fn live(&self, i: usize, g: &mut Gpu, now: u64) -> Option<(Tick, u64)> {
        self.settle(i, g, now);
        if g.dropped {
            return None;
        }
        let last = *g
            .history
            .back()
            .expect("a GPU's history starts with a tick");
        Some((last, now.max(last.at_ns)))
    }

    /// A tick at `now`: integrates each GPU's power since its last tick, then redraws it.
    fn tick_at(&self, gpus: &mut [Gpu], now: u64, running: &[u64]) {
        for (i, g) in gpus.iter_mut().enumerate() {
            let Some((last, now)) = self.live(i, g, now) else {
                continue;
            };
            if g.demand_w >= self.cfg.max_w {
                g.violation_ns += now - last.at_ns;
            }
            let active = running.get(g.engine).copied().unwrap_or(0);
            g.share = active as f64 / f64::from(self.per_engine[g.engine].max(1));
            let power_w = draw(&self.cfg, g);
            g.history.push_back(Tick {
                at_ns: now,
                joules: last.joules_at(now),
                power_w,
            });
            while g.history.len() > self.keep {
                g.history.pop_front();
            }
        }
    }

    /// Every GPU still present, now.
    pub(super) fn read(&self) -> FleetReading {
        let mut gpus = self.lock();
        self.read_at(&mut gpus, now_ns())
    }

    fn read_at(&self, gpus: &mut [Gpu], now: u64) -> FleetReading {
        let mut out = Vec::with_capacity(gpus.len());
        for (i, g) in gpus.iter_mut().enumerate() {
            let Some((last, now)) = self.live(i, g, now) else {
                continue;
            };
            let throttled = if g.demand_w >= self.cfg.max_w {
                now - last.at_ns
            } else {
                0
            };
            out.push(GpuReading {
                index: i as u32,
                power_w: last.power_w,
                energy_j: last.joules_at(now),
                share: g.share,
                demand_w: g.demand_w,
                violation_us: (g.violation_ns + throttled) / 1000,
                max_w: self.cfg.max_w,
            });
        }
        let extra_fields = self
            .cfg
            .add_field_at
            .is_some_and(|d| now >= self.start_ns + d.as_nanos() as u64);
        FleetReading {
            gpus: out,
            extra_fields,
            at_ns: now,
        }
    }

    /// GPU `gpu`'s energy counter at `t` (Unix ns), J: `None` for no such GPU, a `t` after now
    /// (the future is not known yet; a dropped GPU's is: it stays), or before the oldest tick
    /// kept (0 before the start while the history reaches back to it).
    pub(super) fn energy_at(&self, gpu: u32, t: u64) -> Option<f64> {
        let mut gpus = self.lock();
        self.energy_at_locked(&mut gpus, gpu, t, now_ns())
    }

    fn energy_at_locked(&self, gpus: &mut [Gpu], gpu: u32, t: u64, now: u64) -> Option<f64> {
        let i = gpu as usize;
        let g = gpus.get_mut(i)?;
        self.settle(i, g, now);
        let k = self.tick_before(g, t, now)?;
        Some(k.map_or(0.0, |k| k.joules_at(t)))
    }

    /// GPU `gpu`'s power at `t` (Unix ns), W: `None` for no such GPU, a `t` after now, before the
    /// start or the oldest tick kept, or from its drop on.
    pub(super) fn power_at(&self, gpu: u32, t: u64) -> Option<f64> {
        let mut gpus = self.lock();
        let i = gpu as usize;
        let g = gpus.get_mut(i)?;
        let now = now_ns();
        self.settle(i, g, now);
        let k = self.tick_before(g, t, now)??;
        let gone = g.dropped && g.history.back().is_some_and(|last| t >= last.at_ns);
        (!gone).then_some(k.power_w)
    }

    /// The last tick at or before `t`: `Some(None)` before the start (nothing drawn yet),
    /// `None` when the history cannot say.
    fn tick_before(&self, g: &Gpu, t: u64, now: u64) -> Option<Option<Tick>> {
        if !g.dropped && t > now {
            return None;
        }
        let first = g.history.front()?;
        if t < first.at_ns {
            return (first.at_ns == self.start_ns).then_some(None);
        }
        let after = g.history.partition_point(|k| k.at_ns <= t);
        Some(Some(g.history[after - 1]))
    }
}

/// The power for `g`'s load now (its `share`), with the tick's noise draw; sets its demand.
fn draw(cfg: &GpuSim, g: &mut Gpu) -> f64 {
    g.demand_w = cfg.idle_w + cfg.per_active_w * g.share;
    let u: f64 = g.rng.random_range(-1.0..=1.0);
    g.demand_w.min(cfg.max_w) * (1.0 + cfg.noise * u)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn quiet(count: u32) -> GpuSim {
        GpuSim {
            count,
            idle_w: 100.0,
            per_active_w: 50.0,
            max_w: 300.0,
            noise: 0.0,
            ..GpuSim::default()
        }
    }

    /// A fleet started at `t0`, ticked by hand (the clock is a parameter of the `_at` methods).
    struct Hand {
        fleet: GpuFleet,
        t0: u64,
    }

    impl Hand {
        fn new(cfg: GpuSim, engines: usize) -> Hand {
            let t0 = 1_700_000_000 * S;
            Hand {
                fleet: GpuFleet::new(cfg, engines, 7, t0),
                t0,
            }
        }
        fn tick(&self, at_s: f64, running: &[u64]) {
            let mut g = self.fleet.lock();
            self.fleet.tick_at(&mut g, self.at(at_s), running);
        }
        fn read(&self, at_s: f64) -> FleetReading {
            let mut g = self.fleet.lock();
            self.fleet.read_at(&mut g, self.at(at_s))
        }
        fn energy(&self, gpu: u32, at_s: f64, now_s: f64) -> Option<f64> {
            let mut g = self.fleet.lock();
            self.fleet
                .energy_at_locked(&mut g, gpu, self.at(at_s), self.at(now_s))
        }
        fn at(&self, s: f64) -> u64 {
            self.t0 + (s * 1e9) as u64
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn energy_is_the_integral_of_the_held_power_at_ticks_and_between() {
        let h = Hand::new(quiet(1), 1);
        // 100 W for 1 s, then 2 active (200 W) for 2 s, then 5 active: 350 W capped at 300.
        h.tick(1.0, &[2]);
        h.tick(3.0, &[5]);
        let r = h.read(3.5);
        assert_eq!(r.gpus.len(), 1);
        let g = r.gpus[0];
        assert_eq!(g.power_w, 300.0);
        assert!(close(g.energy_j, 100.0 + 400.0 + 150.0), "{g:?}");
        // Half a second at the cap: a power violation of 0.5 s, the clock held back.
        assert_eq!(g.violation_us, 500_000);
        assert_eq!(
            g.sm_clock_mhz(),
            (1980.0_f64 * 300.0 / 350.0).round() as u64
        );
        // The truth at any instant, interpolated within ticks; the reading is the same function.
        assert_eq!(h.energy(0, -1.0, 3.5), Some(0.0), "0 before the start");
        assert!(close(h.energy(0, 0.5, 3.5).unwrap(), 50.0));
        assert!(close(h.energy(0, 2.0, 3.5).unwrap(), 300.0));
        assert!(close(h.energy(0, 3.5, 3.5).unwrap(), g.energy_j));
        assert_eq!(h.energy(0, 3.6, 3.5), None, "the future is not known");
        assert_eq!(h.energy(1, 1.0, 3.5), None, "no such GPU");
    }

    #[test]
    fn an_engines_requests_are_split_over_its_contiguous_gpus() {
        // 4 GPUs, 2 engines: GPUs 0, 1 on engine 0 and 2, 3 on engine 1.
        let h = Hand::new(quiet(4), 2);
        h.tick(1.0, &[4, 1]);
        let r = h.read(1.0);
        let shares: Vec<f64> = r.gpus.iter().map(|g| g.share).collect();
        assert_eq!(shares, [2.0, 2.0, 0.5, 0.5]);
        let powers: Vec<f64> = r.gpus.iter().map(|g| g.power_w).collect();
        assert_eq!(powers, [200.0, 200.0, 125.0, 125.0]);
        assert!(r
            .gpus
            .iter()
            .all(|g| g.fb_used_mib() + g.fb_free_mib() == FB_TOTAL_MIB));
        assert!(r.gpus[0].gpu_util_pct() > r.gpus[2].gpu_util_pct());
        assert!(r.gpus[0].temp_c() > r.gpus[2].temp_c());
        // Fewer GPUs than engines: engine 1 owns none, and its load draws nothing.
        let h = Hand::new(quiet(1), 2);
        h.tick(1.0, &[0, 9]);
        assert_eq!(h.read(1.0).gpus[0].power_w, 100.0);
    }

    #[test]
    fn noise_stays_within_its_fraction_and_repeats_with_the_seed() {
        let cfg = GpuSim {
            noise: 0.05,
            ..quiet(2)
        };
        let trace = || {
            let h = Hand::new(cfg.clone(), 1);
            (1..200)
                .map(|i| {
                    h.tick(i as f64 * 0.01, &[0]);
                    h.read(i as f64 * 0.01).gpus[1].power_w
                })
                .collect::<Vec<_>>()
        };
        let a = trace();
        assert_eq!(a, trace());
        assert!(a.iter().all(|p| (95.0..=105.0).contains(p)), "{a:?}");
        assert!(a.iter().any(|p| *p != 100.0), "noise draws something");
    }

    #[test]
    fn a_dropped_gpu_ends_at_its_drop_instant_and_keeps_its_energy() {
        let h = Hand::new(
            GpuSim {
                drop_gpu: Some((1, Duration::from_millis(1500))),
                add_field_at: Some(Duration::from_secs(2)),
                ..quiet(2)
            },
            1,
        );
        h.tick(1.0, &[0]);
        let r = h.read(1.2);
        assert_eq!(r.gpus.len(), 2);
        assert!(!r.extra_fields);
        // No tick between 1.0 and 3.0: the drop still lands at 1.5 s exactly.
        h.tick(3.0, &[0]);
        let r = h.read(3.0);
        assert_eq!(r.gpus.iter().map(|g| g.index).collect::<Vec<_>>(), [0]);
        assert!(r.extra_fields);
        assert!(close(h.energy(1, 10.0, 3.0).unwrap(), 150.0));
        assert!(close(h.energy(0, 3.0, 3.0).unwrap(), 300.0));
    }

    #[test]
    fn the_history_is_bounded_and_a_window_before_it_has_no_truth() {
        let h = Hand::new(
            GpuSim {
                tick: Duration::from_secs(1200),
                ..quiet(1)
            },
            1,
        );
        assert_eq!(h.fleet.keep, 3);
        for i in 1..=5 {
            h.tick(i as f64 * 1200.0, &[0]);
        }
        assert_eq!(h.energy(0, 100.0, 6000.0), None, "pruned");
        assert!(close(h.energy(0, 4000.0, 6000.0).unwrap(), 400_000.0));
    }

    #[test]
    fn validation_names_the_flag() {
        let bad = |g: GpuSim| validate(&g).unwrap_err();
        assert!(bad(quiet(0)).contains("--gpus"));
        assert!(bad(GpuSim {
            drop_gpu: Some((2, Duration::ZERO)),
            ..quiet(2)
        })
        .contains("--gpu-drop 2@"));
        assert!(bad(GpuSim {
            idle_w: -1.0,
            ..quiet(1)
        })
        .contains("--gpu-idle-w"));
        assert!(validate(&GpuSim::default()).is_ok());
    }
}
