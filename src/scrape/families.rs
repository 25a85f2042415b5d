//! Every family of every endpoint, collected at the scrape cadence for
//! `server_metrics_export.{json,csv}` (AIPerf's shape, `agentx-replay.md` §5), in bounded memory.
//!
//! The acceptance arithmetic never reads this: it stays on the exact counters of the baseline and
//! final scrapes ([`super::acceptance`]). What is kept here is what the export's stats and 1-second
//! timeslices need and no more, so a long run at 3 scrapes a second does not grow with its pages:
//!
//! * a gauge: running count, mean, M2 (Welford), min and max; its distinct values with their counts
//!   for the percentiles (coarsened when there are more than [`MAX_DISTINCT`]); per slice
//!   count, sum, min and max;
//! * a counter: the reference (last value before the window), the last value, and per slice the
//!   last value seen before the slice's end;
//! * a histogram: the same for its count, sum and buckets.
//!
//! Slices are indexed from the window start, so they are bounded by the run's length over the
//! slice duration (and by [`MAX_SLICES`]), never by the number of scrapes.

use std::collections::{BTreeMap, HashMap};

use super::prom::{self, Page};

mod gauge;
pub(crate) use gauge::GaugeStats;

/// Upper bound on slices kept per series (a day of 1-second slices); samples past it still count
/// in the whole-window stats.
pub(crate) const MAX_SLICES: usize = 86_400;

/// Distinct gauge values kept per series for exact percentiles; past it the values are rounded to
/// fewer significant digits and merged (percentiles then carry that rounding, about 1e-4 relative
/// at the first step).
pub(crate) const MAX_DISTINCT: usize = 4096;

/// The Prometheus type of a family, as the export names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Instantaneous value.
    Gauge,
    /// Monotonic total.
    Counter,
    /// Cumulative buckets, count and sum.
    Histogram,
    /// Untyped: exported with gauge stats, as AIPerf does.
    Unknown,
}

impl Kind {
    /// The name in the export's `type` field.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
            Kind::Histogram => "histogram",
            Kind::Unknown => "unknown",
        }
    }
}

/// One gauge slice: samples in `[start, end)`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct GaugeSlice {
    /// Samples in the slice (0: none, the slice is skipped).
    pub(crate) n: u32,
    /// Their sum.
    pub(crate) sum: f64,
    /// Smallest.
    pub(crate) min: f64,
    /// Largest.
    pub(crate) max: f64,
}

/// A histogram reading: cumulative count, sum, and bucket counts in `les` order.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct HistPoint {
    /// `_count`.
    pub(crate) count: f64,
    /// `_sum`.
    pub(crate) sum: f64,
    /// `_bucket` values, in the series' `les` order.
    pub(crate) buckets: Vec<f64>,
}

/// What one series keeps.
#[derive(Clone, Debug)]
pub(crate) enum SeriesData {
    /// Gauge or untyped.
    Gauge {
        /// Whole-window stats.
        stats: GaugeStats,
        /// Per slice, indexed from the window start.
        slices: Vec<GaugeSlice>,
    },
    /// Counter.
    Counter {
        /// Last reading before the window `(t_ns, value)`.
        reference: Option<(u64, f64)>,
        /// First reading in the window.
        first: Option<(u64, f64)>,
        /// Last reading in the window.
        last: Option<(u64, f64)>,
        /// `marks[j]`: last reading in `(boundary j-1, boundary j]` (boundary 0 = window start).
        marks: Vec<Option<f64>>,
    },
    /// Histogram.
    Histogram {
        /// Bucket bounds as written (`le`), in page order.
        les: Vec<String>,
        /// Last reading before the window.
        reference: Option<(u64, HistPoint)>,
        /// First reading in the window.
        first: Option<(u64, HistPoint)>,
        /// Last reading in the window.
        last: Option<(u64, HistPoint)>,
        /// As for counters.
        marks: Vec<Option<HistPoint>>,
    },
}

/// One family: type, help, and its series keyed by (endpoint index, labels).
#[derive(Clone, Debug)]
pub(crate) struct Family {
    /// Its type.
    pub(crate) kind: Kind,
    /// `# HELP` text.
    pub(crate) help: String,
    /// Series by endpoint and sorted labels (`le` removed for histograms).
    pub(crate) series: BTreeMap<(usize, Vec<(String, String)>), SeriesData>,
}

/// A family and a label set.
type SeriesKey = (String, Vec<(String, String)>);

/// Fetch bookkeeping of one endpoint (AIPerf's `endpoint_info`).
#[derive(Clone, Debug, Default)]
pub(crate) struct EndpointFetches {
    /// The endpoint URL.
    pub(crate) url: String,
    /// Fetches that returned a page.
    pub(crate) total_fetches: u64,
    /// Fetches that failed.
    pub(crate) failed_fetches: u64,
    /// Wall clock of the first and last successful fetch, ns.
    pub(crate) first_fetch_ns: Option<u64>,
    /// See `first_fetch_ns`.
    pub(crate) last_fetch_ns: Option<u64>,
    /// Sum of fetch latencies, ns.
    pub(crate) latency_sum_ns: u64,
    /// Fetches whose page differed from the previous one.
    pub(crate) unique_updates: u64,
    /// First and last of those, ns.
    pub(crate) first_update_ns: Option<u64>,
    /// See `first_update_ns`.
    pub(crate) last_update_ns: Option<u64>,
    last_hash: Option<u64>,
}

/// The collection: every family of every endpoint, window-relative.
#[derive(Clone, Debug)]
pub(crate) struct Collected {
    /// Slice length, ns.
    pub(crate) slice_ns: u64,
    /// Window start (wall clock ns); samples before it are only references.
    pub(crate) start_ns: Option<u64>,
    /// Window end, set when the collection finishes.
    pub(crate) end_ns: Option<u64>,
    /// Per endpoint, in configuration order.
    pub(crate) endpoints: Vec<EndpointFetches>,
    /// Families by exported name (counters without `_total`).
    pub(crate) families: BTreeMap<String, Family>,
}

impl Collected {
    /// An empty collection for `urls`, `slice` long slices.
    pub(crate) fn new(urls: &[String], slice_ns: u64) -> Collected {
        Collected {
            slice_ns: slice_ns.max(1),
            start_ns: None,
            end_ns: None,
            endpoints: urls
                .iter()
                .map(|u| EndpointFetches {
                    url: u.clone(),
                    ..EndpointFetches::default()
                })
                .collect(),
            families: BTreeMap::new(),
        }
    }

    /// Opens the window at `t_ns` (the baseline scrape's time: its readings are the references).
    pub(crate) fn start(&mut self, t_ns: u64) {
        self.start_ns = Some(t_ns);
    }

    /// Closes the window at `t_ns`.
    pub(crate) fn end(&mut self, t_ns: u64) {
        self.end_ns = Some(t_ns);
    }

    /// A failed fetch of endpoint `ep`.
    pub(crate) fn failed(&mut self, ep: usize) {
        if let Some(e) = self.endpoints.get_mut(ep) {
            e.failed_fetches += 1;
        }
    }

    /// A page from endpoint `ep`, fetched at `t_ns` in `latency_ns`.
    pub(crate) fn page(&mut self, ep: usize, t_ns: u64, latency_ns: u64, text: &str, page: &Page) {
        let Some(e) = self.endpoints.get_mut(ep) else {
            return;
        };
        e.total_fetches += 1;
        e.first_fetch_ns.get_or_insert(t_ns);
        e.last_fetch_ns = Some(t_ns);
        e.latency_sum_ns += latency_ns;
        let h = hash(text);
        if e.last_hash != Some(h) {
            e.last_hash = Some(h);
            e.unique_updates += 1;
            e.first_update_ns.get_or_insert(t_ns);
            e.last_update_ns = Some(t_ns);
        }
        let (start, slice) = (self.start_ns, self.slice_ns);
        let metas = prom::families(text);
        let types = family_types(&metas);
        // Histogram readings are assembled across their `_bucket`, `_sum` and `_count` lines.
        let mut hists: BTreeMap<SeriesKey, (Vec<String>, HistPoint)> = BTreeMap::new();
        for s in &page.samples {
            let Some((family, kind, part)) = assign(&s.name, &types) else {
                continue;
            };
            match kind {
                Kind::Histogram => {
                    let mut labels = s.labels.clone();
                    let le = labels
                        .iter()
                        .position(|(k, _)| k == "le")
                        .map(|i| labels.remove(i).1);
                    let (les, p) = hists.entry((family.to_owned(), labels)).or_default();
                    match (part, le) {
                        (Part::Bucket, Some(le)) => {
                            les.push(le);
                            p.buckets.push(s.value);
                        }
                        (Part::Sum, _) => p.sum = s.value,
                        (Part::Count, _) => p.count = s.value,
                        _ => {}
                    }
                }
                _ => {
                    let fam = self.family(family, kind, &metas);
                    fam.record_scalar(ep, &s.labels, t_ns, s.value, start, slice);
                }
            }
        }
        for ((family, labels), (les, point)) in hists {
            let fam = self.family(&family, Kind::Histogram, &metas);
            fam.record_hist(ep, labels, les, t_ns, point, start, slice);
        }
    }

    fn family(
        &mut self,
        name: &str,
        kind: Kind,
        metas: &HashMap<String, prom::FamilyMeta>,
    ) -> &mut Family {
        self.families
            .entry(name.to_owned())
            .or_insert_with(|| Family {
                kind,
                help: [name.to_owned(), format!("{name}_total")]
                    .iter()
                    .find_map(|n| metas.get(n).filter(|m| !m.help.is_empty()))
                    .map(|m| m.help.clone())
                    .unwrap_or_default(),
                series: BTreeMap::new(),
            })
    }

    #[cfg(test)]
    /// Points and slices held across every series: what the memory bound is about (it grows
    /// with series and slices, never with scrapes).
    pub(crate) fn retained(&self) -> usize {
        self.families
            .values()
            .flat_map(|f| f.series.values())
            .map(|s| match s {
                SeriesData::Gauge { stats, slices } => stats.values.len() + slices.len(),
                SeriesData::Counter { marks, .. } => 3 + marks.len(),
                SeriesData::Histogram { marks, .. } => 3 + marks.len(),
            })
            .sum()
    }
}

fn hash(text: &str) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h =
        std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
            .build_hasher();
    h.write(text.as_bytes());
    h.finish()
}

/// Family types by exported name: a counter declared `x_total` (the text format's way) is `x`.
/// `None`: declared with a type the export has no stats for (summary, info, stateset): AIPerf
/// leaves those out.
fn family_types(metas: &HashMap<String, prom::FamilyMeta>) -> HashMap<String, Option<Kind>> {
    let mut out = HashMap::new();
    for (name, m) in metas {
        let kind = match m.kind.as_deref() {
            Some("counter") => Some(Kind::Counter),
            Some("gauge") => Some(Kind::Gauge),
            Some("histogram") => Some(Kind::Histogram),
            Some("untyped") | Some("unknown") | None => Some(Kind::Unknown),
            Some(_) => None,
        };
        let name = match kind {
            Some(Kind::Counter) => name.strip_suffix("_total").unwrap_or(name),
            _ => name,
        };
        out.insert(name.to_owned(), kind);
    }
    out
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Value,
    Bucket,
    Sum,
    Count,
}

/// Which family a sample belongs to, its kind and which part of it the sample is. `_created`
/// samples are dropped (AIPerf drops them), and so are the samples of families the export has no
/// stats for (a summary's quantiles, `_sum` and `_count`).
fn assign<'a>(
    name: &'a str,
    types: &HashMap<String, Option<Kind>>,
) -> Option<(&'a str, Kind, Part)> {
    if name.ends_with("_created") {
        return None;
    }
    for (suffix, part) in [
        ("_bucket", Part::Bucket),
        ("_sum", Part::Sum),
        ("_count", Part::Count),
    ] {
        if let Some(base) = name.strip_suffix(suffix) {
            match types.get(base) {
                Some(Some(Kind::Histogram)) => return Some((base, Kind::Histogram, part)),
                Some(None) => return None,
                _ => {}
            }
        }
    }
    if let Some(base) = name.strip_suffix("_total") {
        if types.get(base) == Some(&Some(Kind::Counter)) {
            return Some((base, Kind::Counter, Part::Value));
        }
    }
    match types.get(name) {
        Some(Some(Kind::Histogram)) | Some(None) => None,
        Some(Some(k)) => Some((name, *k, Part::Value)),
        None => Some((name, Kind::Unknown, Part::Value)),
    }
}

/// The slice a time falls in (`[start + i·d, start + (i+1)·d)`).
fn slice_of(t_ns: u64, start: u64, slice_ns: u64) -> usize {
    ((t_ns - start) / slice_ns) as usize
}

/// The boundary mark a reading sets: the smallest boundary `j` with `start + j·d >= t`.
fn mark_of(t_ns: u64, start: u64, slice_ns: u64) -> usize {
    (t_ns - start).div_ceil(slice_ns) as usize
}

fn set_mark<T>(marks: &mut Vec<Option<T>>, j: usize, v: T) {
    if j > MAX_SLICES {
        return;
    }
    if marks.len() <= j {
        marks.resize_with(j + 1, || None);
    }
    marks[j] = Some(v);
}

impl Family {
    fn record_scalar(
        &mut self,
        ep: usize,
        labels: &[(String, String)],
        t_ns: u64,
        v: f64,
        start: Option<u64>,
        slice_ns: u64,
    ) {
        let kind = self.kind;
        let key = (ep, labels.to_vec());
        let series = self.series.entry(key).or_insert_with(|| match kind {
            Kind::Counter => SeriesData::Counter {
                reference: None,
                first: None,
                last: None,
                marks: Vec::new(),
            },
            _ => SeriesData::Gauge {
                stats: GaugeStats::default(),
                slices: Vec::new(),
            },
        });
        let in_window = start.filter(|&s| t_ns >= s);
        match series {
            SeriesData::Counter {
                reference,
                first,
                last,
                marks,
            } => match in_window {
                None => *reference = Some((t_ns, v)),
                Some(s) => {
                    first.get_or_insert((t_ns, v));
                    *last = Some((t_ns, v));
                    set_mark(marks, mark_of(t_ns, s, slice_ns), v);
                }
            },
            SeriesData::Gauge { stats, slices } => {
                let Some(s) = in_window else { return };
                stats.add(v);
                let i = slice_of(t_ns, s, slice_ns);
                if i < MAX_SLICES {
                    if slices.len() <= i {
                        slices.resize(i + 1, GaugeSlice::default());
                    }
                    let sl = &mut slices[i];
                    if sl.n == 0 {
                        (sl.min, sl.max) = (v, v);
                    }
                    sl.n += 1;
                    sl.sum += v;
                    sl.min = sl.min.min(v);
                    sl.max = sl.max.max(v);
                }
            }
            SeriesData::Histogram { .. } => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn record_hist(
        &mut self,
        ep: usize,
        labels: Vec<(String, String)>,
        page_les: Vec<String>,
        t_ns: u64,
        p: HistPoint,
        start: Option<u64>,
        slice_ns: u64,
    ) {
        let series = self
            .series
            .entry((ep, labels))
            .or_insert_with(|| SeriesData::Histogram {
                les: page_les.clone(),
                reference: None,
                first: None,
                last: None,
                marks: Vec::new(),
            });
        let SeriesData::Histogram {
            les,
            reference,
            first,
            last,
            marks,
        } = series
        else {
            return;
        };
        // A histogram whose buckets changed between pages is not comparable: keep the first
        // layout and skip readings in another.
        if *les != page_les {
            return;
        }
        match start.filter(|&s| t_ns >= s) {
            None => *reference = Some((t_ns, p)),
            Some(s) => {
                if first.is_none() {
                    *first = Some((t_ns, p.clone()));
                }
                set_mark(marks, mark_of(t_ns, s, slice_ns), p.clone());
                *last = Some((t_ns, p));
            }
        }
    }
}

#[cfg(test)]
mod tests;
