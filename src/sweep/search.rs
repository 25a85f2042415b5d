//! The SLA search: the largest load that meets the objectives, found by doubling from the
//! smallest load until a point fails (or the largest is reached), then bisecting between the
//! last pass and the first failure. AIPerf 0.13's `--search-style monotonic`: it assumes a load
//! that fails would fail at any larger load, so each probe halves the bracket.
//!
//! Concurrency is an integer: the bisection ends when the bracket is one apart, so the answer is
//! exact. A request rate is bisected until the bracket is within `tolerance` of its top.

use serde::{Deserialize, Serialize};

/// One probed load and whether it met the objectives.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// The load.
    pub value: f64,
    /// Met every objective.
    pub pass: bool,
    /// `doubling` or `bisection`.
    pub step: String,
}

/// The search's state: what was probed and what comes next.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Search {
    /// Smallest load tried.
    pub min: f64,
    /// Largest load tried.
    pub max: f64,
    /// Loads are integers (concurrency).
    pub integer: bool,
    /// Rate search: stop when `hi - lo <= tolerance * hi`.
    pub tolerance: f64,
    /// Every probe, in order.
    pub history: Vec<Probe>,
}

impl Search {
    /// A search over `[min, max]`.
    pub fn new(min: f64, max: f64, integer: bool, tolerance: f64) -> Self {
        Search {
            min,
            max,
            integer,
            tolerance,
            history: Vec::new(),
        }
    }

    /// The largest load that passed.
    pub fn best(&self) -> Option<f64> {
        self.history
            .iter()
            .filter(|p| p.pass)
            .map(|p| p.value)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
    }

    /// The smallest load that failed.
    pub fn first_failure(&self) -> Option<f64> {
        self.history
            .iter()
            .filter(|p| !p.pass)
            .map(|p| p.value)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.min(v))))
    }

    /// Still doubling: no failure seen yet.
    fn doubling(&self) -> bool {
        self.first_failure().is_none()
    }

    /// The next load to probe, or `None` when the search is over.
    pub fn next(&self) -> Option<(f64, &'static str)> {
        let Some(last) = self.history.last() else {
            return Some((self.min, "doubling"));
        };
        if self.doubling() {
            if last.value >= self.max {
                return None;
            }
            let next = (last.value * 2.0).min(self.max);
            return Some((if self.integer { next.floor() } else { next }, "doubling"));
        }
        let hi = self.first_failure()?;
        let lo = self.best()?;
        if lo >= hi {
            // A failure below a pass: the load is not monotonic here; the largest pass stands.
            return None;
        }
        if self.integer {
            if hi - lo <= 1.0 {
                return None;
            }
            Some((((lo + hi) / 2.0).floor(), "bisection"))
        } else {
            if hi - lo <= self.tolerance * hi {
                return None;
            }
            Some(((lo + hi) / 2.0, "bisection"))
        }
    }

    /// Records the outcome of probing `value`.
    pub fn record(&mut self, value: f64, pass: bool, step: &str) {
        self.history.push(Probe {
            value,
            pass,
            step: step.to_string(),
        });
    }

    /// The bracket `(largest pass, smallest failure)` when the search ended between two loads.
    pub fn bracket(&self) -> (Option<f64>, Option<f64>) {
        (self.best(), self.first_failure())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(mut s: Search, saturation: f64) -> Search {
        let mut n = 0;
        while let Some((v, step)) = s.next() {
            s.record(v, v <= saturation, step);
            n += 1;
            assert!(n < 64, "the search ends");
        }
        s
    }

    #[test]
    fn doubling_then_bisection_finds_the_integer_saturation_exactly() {
        for sat in [1.0, 2.0, 3.0, 6.0, 7.0, 8.0, 100.0, 999.0] {
            let s = run(Search::new(1.0, 1000.0, true, 0.05), sat);
            assert_eq!(s.best(), Some(sat), "{sat}: {:?}", s.history);
        }
        let s = run(Search::new(1.0, 1000.0, true, 0.05), 6.0);
        let values: Vec<f64> = s.history.iter().map(|p| p.value).collect();
        assert_eq!(values, [1.0, 2.0, 4.0, 8.0, 6.0, 7.0]);
    }

    #[test]
    fn the_ends_of_the_range_stop_the_search() {
        let s = run(Search::new(1.0, 50.0, true, 0.05), 1e9);
        assert_eq!(s.best(), Some(50.0));
        assert_eq!(s.history.last().unwrap().value, 50.0);
        let s = run(Search::new(4.0, 50.0, true, 0.05), 2.0);
        assert_eq!((s.best(), s.history.len()), (None, 1));
    }

    #[test]
    fn a_rate_search_stops_within_its_tolerance() {
        let s = run(Search::new(0.5, 64.0, false, 0.05), 5.3);
        let (lo, hi) = s.bracket();
        let (lo, hi) = (lo.unwrap(), hi.unwrap());
        assert!(lo <= 5.3 && 5.3 < hi && hi - lo <= 0.05 * hi, "{lo} {hi}");
    }
}
