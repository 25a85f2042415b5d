//! Stats and timeslices of one collected series, as AIPerf's server-metrics export defines them
//! (`agentx-replay.md` §5): gauges over the window's samples, counters and histograms as
//! increases from the last reading before the window, slices `[start + i·d, start + (i+1)·d)`
//! with the last one clipped to the window end and marked incomplete.

use crate::report::json::Obj;
use crate::scrape::families::{GaugeSlice, GaugeStats, HistPoint, SeriesData};

/// The window: start, end and slice length, ns.
#[derive(Clone, Copy, Debug)]
pub(super) struct Window {
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) slice: u64,
}

impl Window {
    /// Slices `(start, end, complete)`.
    fn slices(self) -> impl Iterator<Item = (u64, u64, bool)> {
        let Window { start, end, slice } = self;
        (0..)
            .map(move |i: u64| start + i * slice)
            .take_while(move |&s| s < end)
            .map(move |s| (s, (s + slice).min(end), s + slice <= end))
    }
}

/// The export's numbers for one series.
pub(super) struct SeriesOut {
    pub(super) stats: Obj,
    pub(super) buckets: Option<Obj>,
    pub(super) timeslices: Option<Vec<Obj>>,
}

const PCTS: [(&str, f64); 9] = [
    ("p1", 1.0),
    ("p5", 5.0),
    ("p10", 10.0),
    ("p25", 25.0),
    ("p50", 50.0),
    ("p75", 75.0),
    ("p90", 90.0),
    ("p95", 95.0),
    ("p99", 99.0),
];

/// The series' stats and slices; `None` when it has no reading in the window (AIPerf leaves such
/// series out).
pub(super) fn series(data: &SeriesData, w: Window) -> Option<SeriesOut> {
    match data {
        SeriesData::Gauge { stats, slices } => gauge(stats, slices, w),
        SeriesData::Counter {
            reference,
            first,
            last,
            marks,
        } => {
            let (first, last) = ((*first)?, (*last)?);
            let base = reference.unwrap_or(first);
            Some(counter(base, last, marks, w))
        }
        SeriesData::Histogram {
            les,
            reference,
            first,
            last,
            marks,
        } => {
            let (first, last) = (first.as_ref()?, last.as_ref()?);
            let base = reference.as_ref().unwrap_or(first);
            Some(histogram(les, base, last, marks, w))
        }
    }
}

fn slice_obj(start: u64, end: u64, complete: bool) -> Obj {
    let o = Obj::new().with("start_ns", start).with("end_ns", end);
    if complete {
        o
    } else {
        o.with("is_complete", false)
    }
}

fn gauge(stats: &GaugeStats, slices: &[GaugeSlice], w: Window) -> Option<SeriesOut> {
    if stats.n == 0 {
        return None;
    }
    let mut o = Obj::new()
        .with("avg", stats.mean)
        .with("min", stats.min)
        .with("max", stats.max)
        .with("std", stats.std());
    for (name, p) in PCTS {
        o.put(name, stats.percentile(p));
    }
    let ts: Vec<Obj> = w
        .slices()
        .zip(slices)
        .filter(|(_, s)| s.n > 0)
        .map(|((a, b, complete), s)| {
            slice_obj(a, b, complete)
                .with("avg", s.sum / f64::from(s.n))
                .with("min", s.min)
                .with("max", s.max)
        })
        .collect();
    Some(SeriesOut {
        stats: o,
        buckets: None,
        // AIPerf writes no gauge slices from fewer than two samples.
        timeslices: (stats.n >= 2 && !ts.is_empty()).then_some(ts),
    })
}

/// The reading at each boundary `j` (`start + j·d`, the last one the window end): the last
/// reading at or before it, else the first reading at all (numpy's clipped search in AIPerf).
fn at_boundaries<T: Clone>(base: &T, marks: &[Option<T>], n: usize) -> Vec<T> {
    let mut cur = base.clone();
    (0..=n)
        .map(|j| {
            if let Some(Some(v)) = marks.get(j) {
                cur = v.clone();
            }
            cur.clone()
        })
        .collect()
}

fn mean_std(xs: &[f64]) -> Option<(f64, f64, f64, f64)> {
    if xs.is_empty() {
        return None;
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let std = if xs.len() > 1 {
        (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((mean, min, max, std))
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

fn counter(base: (u64, f64), last: (u64, f64), marks: &[Option<f64>], w: Window) -> SeriesOut {
    let total = (last.1 - base.1).max(0.0);
    let span = secs(last.0.saturating_sub(base.0));
    let rate = if span > 0.0 { total / span } else { 0.0 };
    let bounds: Vec<(u64, u64, bool)> = w.slices().collect();
    let values = at_boundaries(&base.1, marks, bounds.len());
    let mut complete_rates = Vec::new();
    let ts: Vec<Obj> = bounds
        .iter()
        .enumerate()
        .map(|(i, &(a, b, complete))| {
            let d = (values[i + 1] - values[i]).max(0.0);
            let dur = secs(b - a);
            let r = if dur > 0.0 { d / dur } else { 0.0 };
            if complete {
                complete_rates.push(r);
            }
            slice_obj(a, b, complete).with("total", d).with("rate", r)
        })
        .collect();
    let mut stats = Obj::new().with("total", total).with("rate", rate);
    if let Some((avg, min, max, std)) = mean_std(&complete_rates) {
        stats = stats
            .with("rate_avg", avg)
            .with("rate_min", min)
            .with("rate_max", max)
            .with("rate_std", std);
    }
    SeriesOut {
        stats,
        buckets: None,
        timeslices: Some(ts),
    }
}

/// Bucket increases by `le` (integers, as AIPerf writes them); `None` on a reset.
fn bucket_deltas(les: &[String], from: &HistPoint, to: &HistPoint) -> Option<Obj> {
    let mut o = Obj::new();
    for (i, le) in les.iter().enumerate() {
        let d = to.buckets.get(i)? - from.buckets.get(i).copied().unwrap_or(0.0);
        if d < 0.0 {
            return None;
        }
        o.put(le.as_str(), d.round() as u64);
    }
    Some(o)
}

/// A percentile from cumulative bucket increases, interpolating linearly inside the bucket
/// (Prometheus' `histogram_quantile`; the `+Inf` bucket answers its lower bound).
fn bucket_percentile(les: &[String], from: &HistPoint, to: &HistPoint, p: f64) -> Option<f64> {
    let total = to.count - from.count;
    if total <= 0.0 {
        return None;
    }
    let rank = total * p / 100.0;
    let mut lower = 0.0;
    let mut below = 0.0;
    for (i, le) in les.iter().enumerate() {
        let upper = crate::scrape::prom::parse_value(le)?;
        let cum = to.buckets.get(i)? - from.buckets.get(i)?;
        if cum >= rank {
            if upper.is_infinite() {
                return Some(lower);
            }
            let inside = cum - below;
            let frac = if inside > 0.0 {
                (rank - below) / inside
            } else {
                1.0
            };
            return Some(lower + (upper - lower) * frac);
        }
        lower = upper;
        below = cum;
    }
    Some(lower)
}

fn histogram(
    les: &[String],
    base: &(u64, HistPoint),
    last: &(u64, HistPoint),
    marks: &[Option<HistPoint>],
    w: Window,
) -> SeriesOut {
    let (b, l) = (&base.1, &last.1);
    let count = (l.count - b.count).round();
    let sum = l.sum - b.sum;
    let span = secs(last.0.saturating_sub(base.0));
    let buckets = bucket_deltas(les, b, l);
    let mut stats = Obj::new().with("count", count.max(0.0) as u64);
    if count > 0.0 {
        stats = stats.with("sum", sum).with("avg", sum / count);
        if span > 0.0 {
            stats = stats
                .with("count_rate", count / span)
                .with("sum_rate", sum / span);
        }
        if buckets.is_some() {
            for (name, p) in PCTS {
                if let Some(v) = bucket_percentile(les, b, l, p) {
                    stats.put(format!("{name}_estimate"), v);
                }
            }
        }
    }
    let bounds: Vec<(u64, u64, bool)> = w.slices().collect();
    let values = at_boundaries(b, marks, bounds.len());
    let ts: Vec<Obj> = bounds
        .iter()
        .enumerate()
        .filter_map(|(i, &(a, e, complete))| {
            let (from, to) = (&values[i], &values[i + 1]);
            let (dc, ds) = (to.count - from.count, to.sum - from.sum);
            if dc < 0.0 || ds < 0.0 {
                return None;
            }
            let mut o = slice_obj(a, e, complete)
                .with("count", dc.round() as u64)
                .with("sum", ds)
                .with("avg", if dc > 0.0 { ds / dc } else { 0.0 });
            if let Some(bk) = bucket_deltas(les, from, to) {
                o.put("buckets", bk);
            }
            Some(o)
        })
        .collect();
    SeriesOut {
        stats,
        buckets,
        timeslices: (!ts.is_empty()).then_some(ts),
    }
}
