//! One parsed page reduced to the spec series that matter: the [`Snapshot`] two of which, per
//! endpoint, make a window.

use std::collections::{BTreeMap, BTreeSet};

use super::names::{tables, Metric, Role, SpecEngine};
use crate::scrape::prom::{Page, Sample};

/// One series: which metric, and its labels (sorted).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct SeriesKey {
    pub(crate) metric: Metric,
    pub(crate) labels: Vec<(String, String)>,
}

impl SeriesKey {
    fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn position(&self) -> Option<u32> {
        self.metric
            .position_label()
            .and_then(|l| self.label(l))
            .and_then(|v| v.parse().ok())
    }

    /// The data-parallel engine a series belongs to, for the per-engine breakdown.
    pub(crate) fn engine_label(&self) -> Option<&str> {
        self.label("engine").or_else(|| self.label("dp_rank"))
    }

    pub(crate) fn describe(&self) -> String {
        let labels: Vec<String> = self
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v:?}"))
            .collect();
        format!("{:?}{{{}}}", self.metric, labels.join(","))
    }
}

/// The acceptance-relevant content of one page.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub(crate) values: BTreeMap<SeriesKey, f64>,
    pub(crate) created: BTreeMap<SeriesKey, f64>,
    pub(crate) process_start: Option<f64>,
    /// Names matched only after writing `:` as `_`.
    pub(crate) name_normalised: bool,
}

impl Snapshot {
    /// Keeps the spec-decoding series of a parsed page.
    pub fn from_page(page: &Page) -> Snapshot {
        let t = tables();
        let mut snap = Snapshot::default();
        let mut any_exact = false;
        for s in &page.samples {
            if s.name == "process_start_time_seconds" {
                snap.process_start = Some(s.value);
            } else if let Some(&role) = t.exact.get(s.name.as_str()) {
                any_exact = true;
                snap.insert(role, s);
            }
        }
        if !any_exact {
            // Only when no colon name is present at all: a page never mixes the two spellings.
            for s in &page.samples {
                if let Some(&role) = t.normalised.get(s.name.as_str()) {
                    snap.name_normalised = true;
                    snap.insert(role, s);
                }
            }
        }
        snap
    }

    fn insert(&mut self, role: Role, s: &Sample) {
        let (map, metric) = match role {
            Role::Value(m) => (&mut self.values, m),
            Role::Created(m) => (&mut self.created, m),
        };
        map.insert(
            SeriesKey {
                metric,
                labels: s.labels.clone(),
            },
            s.value,
        );
    }

    /// Engine families with speculative counters on this page.
    pub(crate) fn engines(&self) -> BTreeSet<SpecEngine> {
        self.values
            .keys()
            .filter(|k| k.metric.marks_spec())
            .map(|k| k.metric.engine())
            .collect()
    }

    /// Spec counters only (no gauges), for "have the counters settled" comparisons.
    pub(crate) fn counters_equal(&self, other: &Snapshot) -> bool {
        let c = |s: &Snapshot| -> Vec<(SeriesKey, u64)> {
            s.values
                .iter()
                .filter(|(k, _)| !k.metric.is_gauge())
                .map(|(k, v)| (k.clone(), v.to_bits()))
                .collect()
        };
        c(self) == c(other)
    }
}
