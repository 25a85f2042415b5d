//! AIPerf's time-weighted metrics (`effective_*`, `active_*`, `tokens_in_flight`): sweep lines
//! over the profiling requests' send, first-token and end times, computed once at the end.
//!
//! AIPerf 0.13 (`aiperf/analysis/sweepline*.py`) turns each request into intervals that carry a
//! rate, sums them into step functions with a sweep line (events sorted by time, an end before a
//! start at the same instant, a running sum), and reports each step function's time-weighted
//! statistics over the run window:
//!
//! * concurrency: 1 over `[sent, end)` of every request, failed ones too; decode concurrency over
//!   `[first token, end)` and prefill concurrency over `[sent, first token)` of the successes;
//! * decode throughput: `(osl - 1) / (end - first token)` tokens/s over `[first token, end)` (the
//!   first token arrives at once and carries no rate);
//! * prefill throughput: `isl / (first token - sent)` over `[sent, first token)`;
//! * total throughput: the two summed; per-user throughput: a phase's throughput divided by the
//!   same phase's concurrency (0 where none is in flight);
//! * tokens in flight: `isl` held over `[sent, end)` plus `osl` over `[first token, end)`.
//!
//! For a step function `v(t)` over the window `[t0, t1]` (first send to last end, AIPerf's window
//! when the concurrency curve spans the run): `avg = ∫v dt / (t1 - t0)`, `std = sqrt(∫(v - avg)²
//! dt / (t1 - t0))`, `min` and `max` over the segments of positive length, and `pXX` the smallest
//! value whose segments cover at least XX% of the time (a duration-weighted CDF). The `active_*`
//! variants weigh only the time when the phase has a request in flight (its concurrency > 0).
//!
//! AIPerf spreads decode throughput over each request's chunk gaps when it keeps every gap (its
//! default list backend). We keep memory O(requests) and use the request-level rate, which is what
//! AIPerf itself reports with `AIPERF_METRICS_LIST_BACKEND=tdigest`. Cost: O(n log n) for n
//! requests.

/// One profiling request's times on the run clock.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span {
    pub(crate) sent_ns: u64,
    pub(crate) end_ns: u64,
    /// What a successful request adds; `None` for failed and cancelled ones (AIPerf has no token
    /// counts or TTFT for them, so they count only in the concurrency).
    pub(crate) done: Option<Done>,
}

/// The parts of a successful request the throughput curves need.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Done {
    /// AIPerf's generation start (request start + TTFT); `None` when no token arrived.
    pub(crate) first_token_ns: Option<u64>,
    /// Input tokens, when known.
    pub(crate) isl: Option<u64>,
    /// Output tokens (reasoning included).
    pub(crate) osl: u64,
}

/// Time-weighted statistics of one step function, in the metric's unit.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct TimeWeighted {
    pub(crate) avg: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
    pub(crate) p50: f64,
    pub(crate) p90: f64,
    pub(crate) p95: f64,
    pub(crate) p99: f64,
    pub(crate) std: f64,
}

impl TimeWeighted {
    fn scaled(self, k: f64) -> TimeWeighted {
        TimeWeighted {
            avg: self.avg * k,
            min: self.min * k,
            max: self.max * k,
            p50: self.p50 * k,
            p90: self.p90 * k,
            p95: self.p95 * k,
            p99: self.p99 * k,
            std: self.std * k,
        }
    }
}

/// One of AIPerf's time-weighted metrics: its tag, CSV header and unit, and the statistics.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SweepMetric {
    pub(crate) tag: &'static str,
    pub(crate) header: &'static str,
    pub(crate) unit: &'static str,
    pub(crate) stat: TimeWeighted,
}

/// A step function: `pts[i].1` holds from `pts[i].0` to `pts[i + 1].0`, 0 before the first
/// time. Times may repeat (several events at one instant); the last value at a time is the one
/// that holds. One vector of pairs, sorted by time and summed in place: a sweep of `n` intervals
/// holds `32 n` bytes and a sort's scratch, nothing else.
#[derive(Debug, Default)]
struct Step {
    pts: Vec<(f64, f64)>,
}

/// Reads a [`Step`]'s value at times that never decrease, in O(1) amortized each.
struct Cursor<'a> {
    pts: &'a [(f64, f64)],
    /// Points at or before the last time asked.
    at: usize,
}

impl Cursor<'_> {
    /// The value at `t` (the last point at or before it; 0 before the first), `t` at or after
    /// the previous call's.
    fn at(&mut self, t: f64) -> f64 {
        while self.at < self.pts.len() && self.pts[self.at].0 <= t {
            self.at += 1;
        }
        value_after(self.pts, self.at)
    }
}

/// The value once the first `n` points have passed (0 before any).
fn value_after(pts: &[(f64, f64)], n: usize) -> f64 {
    n.checked_sub(1).map_or(0.0, |i| pts[i].1)
}

/// The sorted, deduplicated union of two steps' times.
fn union_times<'a>(a: &'a [(f64, f64)], b: &'a [(f64, f64)]) -> impl Iterator<Item = f64> + 'a {
    let (mut i, mut j) = (0, 0);
    let mut last: Option<f64> = None;
    std::iter::from_fn(move || loop {
        let t = match (a.get(i), b.get(j)) {
            (None, None) => return None,
            (Some(x), None) => {
                i += 1;
                x.0
            }
            (None, Some(y)) => {
                j += 1;
                y.0
            }
            (Some(x), Some(y)) => {
                if x.0.total_cmp(&y.0).is_le() {
                    i += 1;
                    x.0
                } else {
                    j += 1;
                    y.0
                }
            }
        };
        if last != Some(t) {
            last = Some(t);
            return Some(t);
        }
    })
}

impl Step {
    /// The sum of the intervals `intervals()` yields (called twice: once for the starts, once
    /// for the ends, each in the same order): each `(from, to, rate)` adds `rate` over
    /// `[from, to)`.
    fn sweep<I: Iterator<Item = (f64, f64, f64)>>(intervals: impl Fn() -> I) -> Step {
        let n = intervals().count();
        let mut pts: Vec<(f64, f64)> = Vec::with_capacity(2 * n);
        pts.extend(intervals().map(|(from, _, r)| (from, r)));
        pts.extend(intervals().map(|(_, to, r)| (to, -r)));
        // By time, then ends (non-positive deltas) before starts; stable, as AIPerf's lexsort.
        pts.sort_by(|a, b| a.0.total_cmp(&b.0).then((a.1 > 0.0).cmp(&(b.1 > 0.0))));
        let mut sum = 0.0;
        for p in &mut pts {
            sum += p.1;
            p.1 = sum;
        }
        // Adding and taking away large rates leaves residues of ~1e-12 of the peak where the
        // true value is 0; AIPerf snaps them to 0, so do we.
        let peak = pts.iter().fold(0.0f64, |m, p| m.max(p.1.abs()));
        if peak > 0.0 {
            for p in &mut pts {
                if p.1.abs() < 1e-9 * peak {
                    p.1 = 0.0;
                }
            }
        }
        Step { pts }
    }

    /// The value at `t` (the last point at or before it; 0 before the first).
    fn at(&self, t: f64) -> f64 {
        value_after(&self.pts, self.pts.partition_point(|p| p.0 <= t))
    }

    fn cursor(&self) -> Cursor<'_> {
        Cursor {
            pts: &self.pts,
            at: 0,
        }
    }

    /// `self / den` on the union of both functions' times; 0 where `den` is 0.
    fn divide(&self, den: &Step) -> Step {
        if self.pts.is_empty() || den.pts.is_empty() {
            return Step::default();
        }
        let (mut num, mut by) = (self.cursor(), den.cursor());
        let pts = union_times(&self.pts, &den.pts)
            .map(|t| {
                let d = by.at(t);
                (t, if d > 0.0 { num.at(t) / d } else { 0.0 })
            })
            .collect();
        Step { pts }
    }

    /// Time-weighted statistics over `[w0, w1]`.
    fn time_weighted(&self, w0: f64, w1: f64) -> TimeWeighted {
        let total = w1 - w0;
        if self.pts.is_empty() || total <= 0.0 {
            return TimeWeighted::default();
        }
        let mut segs = Vec::new();
        let (mut t, mut v) = (w0, self.at(w0));
        let lo = self.pts.partition_point(|p| p.0 <= w0);
        for &(ti, vi) in &self.pts[lo..] {
            if ti >= w1 {
                break;
            }
            segs.push((v, ti - t));
            (t, v) = (ti, vi);
        }
        segs.push((v, w1 - t));
        segs.retain(|&(_, d)| d > 0.0);
        stats(segs, total)
    }

    /// Time-weighted statistics of `self` over the parts of `[w0, w1]` where `mask` > 0: the
    /// segments between consecutive times of either function (and the window's ends), walked
    /// in order rather than collected and sorted.
    fn active(&self, mask: &Step, w0: f64, w1: f64) -> TimeWeighted {
        if w1 <= w0 || self.pts.is_empty() || mask.pts.is_empty() {
            return TimeWeighted::default();
        }
        let inner = union_times(&self.pts, &mask.pts).filter(|&t| t > w0 && t < w1);
        let mut grid = std::iter::once(w0).chain(inner).chain(std::iter::once(w1));
        let (mut val, mut on) = (self.cursor(), mask.cursor());
        let mut segs: Vec<(f64, f64)> = Vec::new();
        let mut from = grid.next().expect("the window's start");
        for to in grid {
            let d = to - from;
            if d > 0.0 && on.at(from) > 0.0 {
                segs.push((val.at(from), d));
            }
            from = to;
        }
        let active: f64 = segs.iter().map(|s| s.1).sum();
        if active <= 0.0 {
            return TimeWeighted::default();
        }
        stats(segs, active)
    }
}

/// Statistics of `(value, duration)` segments over `total` time.
fn stats(mut segs: Vec<(f64, f64)>, total: f64) -> TimeWeighted {
    if segs.is_empty() {
        return TimeWeighted::default();
    }
    let avg = segs.iter().map(|&(v, d)| v * d).sum::<f64>() / total;
    let min = segs.iter().fold(f64::INFINITY, |m, s| m.min(s.0));
    let max = segs.iter().fold(f64::NEG_INFINITY, |m, s| m.max(s.0));
    let std = (segs
        .iter()
        .map(|&(v, d)| d * (v - avg).powi(2))
        .sum::<f64>()
        / total)
        .sqrt();
    segs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let all: f64 = segs.iter().map(|s| s.1).sum();
    // The first segment whose cumulative share reaches q (numpy `searchsorted`, side left),
    // for each q in increasing order, in one pass.
    let qs = [0.50, 0.90, 0.95, 0.99];
    let mut ps = [segs[segs.len() - 1].0; 4];
    let (mut acc, mut k) = (0.0, 0);
    for s in &segs {
        acc += s.1;
        while k < qs.len() && acc / all >= qs[k] {
            ps[k] = s.0;
            k += 1;
        }
        if k == qs.len() {
            break;
        }
    }
    TimeWeighted {
        avg,
        min,
        max,
        p50: ps[0],
        p90: ps[1],
        p95: ps[2],
        p99: ps[3],
        std,
    }
}

const PER_SEC: f64 = 1e9;

/// AIPerf's time-weighted metrics of `spans`, in its order (empty when there are none). Without
/// a first token (a non-streaming run) only `effective_concurrency` was measured: AIPerf writes the
/// others as zeros; we leave them out, as every other metric that needs token timing.
///
/// Each family's step functions (decode, prefill, concurrency and total, tokens in flight) are
/// built, read and dropped in turn: a step holds two `f64`s per request edge, and holding all
/// nine of them with their intervals at once cost ~700 bytes a request at the end of the run
/// (some 700 MB after an hour of AgentX).
pub(crate) fn sweep_metrics(spans: &[Span]) -> Vec<SweepMetric> {
    let (Some(w0), Some(w1)) = (
        spans.iter().map(|s| s.sent_ns).min(),
        spans.iter().map(|s| s.end_ns.max(s.sent_ns)).max(),
    ) else {
        return Vec::new();
    };
    let (w0, w1) = (w0 as f64, w1 as f64);
    let f = |ns: u64| ns as f64;
    // (sent, first token, end, done) of the successes that had a first token, read off the spans
    // each time they are needed rather than copied.
    let firsts = || {
        spans.iter().filter_map(|s| {
            let d = s.done?;
            Some((f(s.sent_ns), f(d.first_token_ns?), f(s.end_ns), d))
        })
    };
    let decode_intervals = || {
        firsts()
            .filter(|&(_, g, e, d)| e > g && d.osl >= 1)
            .map(|(_, g, e, d)| (g, e, (d.osl as f64 - 1.0) / (e - g)))
    };
    let prefill_intervals = || {
        firsts().filter_map(|(s, g, _, d)| {
            let isl = d.isl? as f64;
            (g > s).then(|| (s, g, isl / (g - s)))
        })
    };
    let tw = |s: &Step, k: f64| s.time_weighted(w0, w1).scaled(k);
    let act = |s: &Step, mask: &Step| s.active(mask, w0, w1).scaled(PER_SEC);

    // Concurrency, and the total throughput whose active form it masks.
    let conc = Step::sweep(|| spans.iter().map(|s| (f(s.sent_ns), f(s.end_ns), 1.0)));
    let concurrency = tw(&conc, 1.0);
    if firsts().next().is_none() {
        return vec![SweepMetric {
            tag: "effective_concurrency",
            header: "Effective Concurrency",
            unit: "requests",
            stat: concurrency,
        }];
    }
    let total = Step::sweep(|| prefill_intervals().chain(decode_intervals()));
    let (total_tw, total_act) = (tw(&total, PER_SEC), act(&total, &conc));
    drop((conc, total));

    // Decode, then prefill: the rate, its concurrency, and the rate per user.
    let family = |rate: Step, conc: Step| {
        let per_user = rate.divide(&conc);
        [
            tw(&rate, PER_SEC),
            tw(&conc, 1.0),
            tw(&per_user, PER_SEC),
            act(&rate, &conc),
            act(&per_user, &conc),
        ]
    };
    let [decode, decode_conc, decode_user, decode_act, decode_user_act] = family(
        Step::sweep(decode_intervals),
        Step::sweep(|| firsts().map(|(_, g, e, _)| (g, e, 1.0))),
    );
    let [prefill, prefill_conc, prefill_user, prefill_act, prefill_user_act] = family(
        Step::sweep(prefill_intervals),
        Step::sweep(|| firsts().map(|(s, g, _, _)| (s, g, 1.0))),
    );
    let in_flight = tw(
        &Step::sweep(|| {
            firsts()
                .filter_map(|(s, g, e, d)| d.isl.filter(|_| g > s).map(|isl| (s, e, isl as f64)))
                .chain(
                    firsts()
                        .filter(|&(_, g, e, _)| e > g)
                        .map(|(_, g, e, d)| (g, e, d.osl as f64)),
                )
        }),
        1.0,
    );

    let (tps, tpsu, req) = ("tokens/sec", "tokens/sec/user", "requests");
    [
        (
            "effective_concurrency",
            "Effective Concurrency",
            req,
            concurrency,
        ),
        (
            "effective_decode_throughput",
            "Effective Decode Throughput",
            tps,
            decode,
        ),
        (
            "effective_prefill_throughput",
            "Effective Prefill Throughput",
            tps,
            prefill,
        ),
        (
            "effective_decode_concurrency",
            "Effective Decode Concurrency",
            req,
            decode_conc,
        ),
        (
            "effective_prefill_concurrency",
            "Effective Prefill Concurrency",
            req,
            prefill_conc,
        ),
        (
            "effective_total_throughput",
            "Effective Total Throughput",
            tps,
            total_tw,
        ),
        (
            "effective_decode_throughput_per_user",
            "Effective Decode Throughput Per User",
            tpsu,
            decode_user,
        ),
        (
            "effective_prefill_throughput_per_user",
            "Effective Prefill Throughput Per User",
            tpsu,
            prefill_user,
        ),
        ("tokens_in_flight", "Tokens In Flight", "tokens", in_flight),
        (
            "active_decode_throughput",
            "Active Decode Throughput",
            tps,
            decode_act,
        ),
        (
            "active_prefill_throughput",
            "Active Prefill Throughput",
            tps,
            prefill_act,
        ),
        (
            "active_decode_throughput_per_user",
            "Active Decode Throughput Per User",
            tpsu,
            decode_user_act,
        ),
        (
            "active_prefill_throughput_per_user",
            "Active Prefill Throughput Per User",
            tpsu,
            prefill_user_act,
        ),
        (
            "active_total_throughput",
            "Active Total Throughput",
            tps,
            total_act,
        ),
    ]
    .into_iter()
    .map(|(tag, header, unit, stat)| SweepMetric {
        tag,
        header,
        unit,
        stat,
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Four requests with known overlap; the expected numbers are what AIPerf 0.13's own
    /// `aiperf.analysis.sweepline` functions (request-level variants) give for the same times,
    /// token counts and window.
    #[test]
    fn sweep_metrics_match_aiperf_on_hand_made_overlap() {
        let ok = |sent_ns, first, end_ns, isl, osl| Span {
            sent_ns,
            end_ns,
            done: Some(Done {
                first_token_ns: Some(first),
                isl: Some(isl),
                osl,
            }),
        };
        let spans = [
            ok(0, 100, 400, 10, 4),
            ok(50, 200, 300, 20, 2),
            ok(500, 600, 1000, 5, 9),
            // A failure: in the concurrency only.
            Span {
                sent_ns: 250,
                end_ns: 450,
                done: None,
            },
        ];
        // tag -> [avg, min, max, p50, p90, p95, p99, std]
        #[rustfmt::skip]
        let want: [(&str, [f64; 8]); 14] = [
            ("effective_concurrency", [1.35, 0.0, 3.0, 1.0, 2.0, 2.0, 3.0, 0.653834841531101]),
            ("effective_decode_throughput", [12e6, 0.0, 20e6, 10e6, 20e6, 20e6, 20e6, 8717797.887081347]),
            ("effective_prefill_throughput", [35e6, 0.0, 233333333.33333334, 0.0, 133333333.33333333, 133333333.33333333, 233333333.33333334, 63442887.7022476]),
            ("effective_decode_concurrency", [0.8, 0.0, 2.0, 1.0, 1.0, 2.0, 2.0, 0.6]),
            ("effective_prefill_concurrency", [0.35, 0.0, 2.0, 0.0, 1.0, 1.0, 2.0, 0.5722761571129799]),
            ("effective_total_throughput", [47000000.00000001, 0.0, 233333333.33333334, 20000000.000000015, 143333333.33333334, 143333333.33333334, 233333333.33333334, 59394163.57409763]),
            ("effective_decode_throughput_per_user", [11e6, 0.0, 20e6, 10e6, 20e6, 20e6, 20e6, 8306623.862918074]),
            ("effective_prefill_throughput_per_user", [29166666.666666664, 0.0, 133333333.33333333, 0.0, 116666666.66666667, 133333333.33333333, 133333333.33333333, 48555523.77319072]),
            ("tokens_in_flight", [16.5, 0.0, 36.0, 14.0, 34.0, 36.0, 36.0, 11.110805551354051]),
            ("active_decode_throughput", [17142857.142857146, 10e6, 20e6, 20e6, 20e6, 20e6, 20e6, 4517539.514526256]),
            ("active_prefill_throughput", [116666666.66666667, 50e6, 233333333.33333334, 100e6, 233333333.33333334, 233333333.33333334, 233333333.33333334, 62360956.44623235]),
            ("active_decode_throughput_per_user", [15714285.714285715, 10e6, 20e6, 20e6, 20e6, 20e6, 20e6, 4948716.593053935]),
            ("active_prefill_throughput_per_user", [97222222.22222221, 50e6, 133333333.33333333, 100e6, 133333333.33333333, 133333333.33333333, 133333333.33333333, 35246048.72347089]),
            ("active_total_throughput", [49473684.210526325, 0.0, 233333333.33333334, 20000000.000000015, 143333333.33333334, 233333333.33333334, 233333333.33333334, 59924544.7364032]),
        ];
        let got = sweep_metrics(&spans);
        assert_eq!(
            got.iter().map(|m| m.tag).collect::<Vec<_>>(),
            want.iter().map(|w| w.0).collect::<Vec<_>>()
        );
        for (m, (tag, w)) in got.iter().zip(want) {
            let s = m.stat;
            let g = [s.avg, s.min, s.max, s.p50, s.p90, s.p95, s.p99, s.std];
            for (i, (g, w)) in g.iter().zip(w).enumerate() {
                // Summation order differs from numpy's pairwise sums: equal to 1e-9 relative.
                assert!(
                    (g - w).abs() <= 1e-9 * w.abs().max(1.0),
                    "{tag}[{i}]: got {g}, AIPerf says {w}"
                );
            }
        }
    }

    /// Without a first token (non-streaming) only the concurrency was measured: 1 request in
    /// flight over [0, 100), 2 over [100, 200), 1 over [200, 400) of a 400 ns window.
    #[test]
    fn sweep_metrics_without_token_timing_are_the_concurrency_only() {
        let span = |sent_ns, end_ns| Span {
            sent_ns,
            end_ns,
            done: Some(Done {
                first_token_ns: None,
                isl: Some(10),
                osl: 5,
            }),
        };
        let got = sweep_metrics(&[span(0, 200), span(100, 400)]);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].tag, "effective_concurrency");
        let s = got[0].stat;
        assert_eq!(
            (s.avg, s.min, s.max, s.p50, s.p99),
            (1.25, 1.0, 2.0, 1.0, 2.0)
        );
    }

    #[test]
    fn sweep_metrics_of_no_requests_are_none() {
        assert!(sweep_metrics(&[]).is_empty());
    }

    #[test]
    fn union_times_merge_in_order_once_each_and_cursors_read_as_lookups() {
        let a = Step {
            pts: vec![(1.0, 1.0), (3.0, 2.0), (3.0, 4.0), (7.0, 0.0)],
        };
        let b = Step {
            pts: vec![(0.0, 5.0), (3.0, 1.0), (8.0, 0.0)],
        };
        let got: Vec<f64> = union_times(&a.pts, &b.pts).collect();
        assert_eq!(got, [0.0, 1.0, 3.0, 7.0, 8.0]);
        let mut c = a.cursor();
        for t in [-1.0, 0.5, 1.0, 2.9, 3.0, 6.0, 7.0, 9.0] {
            assert_eq!(c.at(t), a.at(t), "at {t}");
        }
        // The last value at a repeated time holds; the quotient is taken on the union.
        let q = a.divide(&b);
        assert_eq!(
            q.pts,
            [(0.0, 0.0), (1.0, 0.2), (3.0, 4.0), (7.0, 0.0), (8.0, 0.0)]
        );
    }
}
