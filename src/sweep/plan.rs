//! The points of a sweep: the comma lists of `--concurrency`, `--isl`, `--osl`,
//! `--request-count` and `--request-rate` combined as a grid (every combination) or zipped (the
//! i-th values together), each point named as AIPerf names its directories.
//!
//! AIPerf 0.13 orders a grid's parameters alphabetically with the last one changing fastest, and
//! names a point `{parameter}_{value}` joined by `__` (`concurrency_8__osl_128`). The InferenceX
//! raw JSON of a point is `<RESULT_FILENAME>_conc<N>.json`, as InferenceX's own loop names it
//! (`RESULT_FILENAME=${BASE}_conc${CONC}`); the other parameters add `_isl<N>`, `_osl<N>`,
//! `_req<N>` and `_rate<R>` in the same order.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cli::{List, ReplayArgs, SweepType};

/// A parameter a sweep can vary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Param {
    /// `--concurrency`.
    Concurrency,
    /// `--isl` (synthetic prompts).
    Isl,
    /// `--osl`.
    Osl,
    /// `--request-count`.
    RequestCount,
    /// `--request-rate`.
    RequestRate,
}

impl Param {
    /// The name in directory names and in `sweep.json` (AIPerf's leaf name).
    pub fn name(self) -> &'static str {
        match self {
            Param::Concurrency => "concurrency",
            Param::Isl => "isl",
            Param::Osl => "osl",
            Param::RequestCount => "request_count",
            Param::RequestRate => "request_rate",
        }
    }

    /// The flag that gives it.
    pub fn flag(self) -> &'static str {
        match self {
            Param::Concurrency => "--concurrency",
            Param::Isl => "--isl",
            Param::Osl => "--osl",
            Param::RequestCount => "--request-count",
            Param::RequestRate => "--request-rate",
        }
    }

    /// The short tag in the raw JSON's file name (`conc` as InferenceX writes it).
    fn file_tag(self) -> &'static str {
        match self {
            Param::Concurrency => "conc",
            Param::Isl => "isl",
            Param::Osl => "osl",
            Param::RequestCount => "req",
            Param::RequestRate => "rate",
        }
    }

    /// Every parameter, in AIPerf's (alphabetical) order.
    pub const ALL: [Param; 5] = [
        Param::Concurrency,
        Param::Isl,
        Param::Osl,
        Param::RequestCount,
        Param::RequestRate,
    ];
}

/// One point: a value for each swept parameter, in [`Param::ALL`] order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point(pub BTreeMap<Param, f64>);

/// A number as a directory name writes it: integers without a decimal point.
pub(crate) fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

impl Point {
    /// `concurrency_8__osl_128`: the point's directory and name.
    pub fn name(&self) -> String {
        self.0
            .iter()
            .map(|(p, v)| format!("{}_{}", p.name(), num(*v)))
            .collect::<Vec<_>>()
            .join("__")
    }

    /// `_conc8_osl128`: appended to `--result-filename` for this point's raw JSON.
    pub fn file_suffix(&self) -> String {
        self.0
            .iter()
            .map(|(p, v)| format!("_{}{}", p.file_tag(), num(*v)))
            .collect()
    }

    /// The value of `p`, when swept.
    pub fn get(&self, p: Param) -> Option<f64> {
        self.0.get(&p).copied()
    }

    /// A copy of `base` with this point's values as single values.
    pub(crate) fn apply(&self, base: &ReplayArgs) -> ReplayArgs {
        let mut a = base.clone();
        for (&p, &v) in &self.0 {
            match p {
                Param::Concurrency => a.concurrency = Some(List::one(v as usize)),
                Param::Isl => a.isl = List::one(v as u32),
                Param::Osl => a.osl = Some(List::one(v as u32)),
                Param::RequestCount => a.request_count = Some(List::one(v as u64)),
                Param::RequestRate => a.load.request_rate = Some(List::one(v)),
            }
        }
        a
    }
}

/// The values given, in [`Param::ALL`] order (`--isl` only as a list: it always has a value).
fn lists(a: &ReplayArgs) -> Vec<(Param, Vec<f64>)> {
    let mut out = Vec::new();
    if let Some(l) = &a.concurrency {
        out.push((Param::Concurrency, l.0.iter().map(|&v| v as f64).collect()));
    }
    if a.isl.0.len() > 1 {
        out.push((Param::Isl, a.isl.0.iter().map(|&v| f64::from(v)).collect()));
    }
    if let Some(l) = &a.osl {
        out.push((Param::Osl, l.0.iter().map(|&v| f64::from(v)).collect()));
    }
    if let Some(l) = &a.request_count {
        out.push((Param::RequestCount, l.0.iter().map(|&v| v as f64).collect()));
    }
    if let Some(l) = &a.load.request_rate {
        out.push((Param::RequestRate, l.0.clone()));
    }
    out
}

/// True when some flag holds more than one value.
pub(crate) fn has_lists(a: &ReplayArgs) -> bool {
    lists(a).iter().any(|(_, v)| v.len() > 1)
}

/// The points of one list (the AgentX replay's `--concurrency`).
pub(crate) fn one_list(p: Param, vals: &[usize]) -> Result<Vec<Point>, String> {
    let vals: Vec<f64> = vals.iter().map(|&v| v as f64).collect();
    no_repeats(p, &vals)?;
    Ok(vals
        .iter()
        .map(|&v| Point([(p, v)].into_iter().collect()))
        .collect())
}

fn no_repeats(p: Param, vals: &[f64]) -> Result<(), String> {
    for (i, v) in vals.iter().enumerate() {
        if vals[..i].contains(v) {
            return Err(format!(
                "{} lists {} twice: each value is one point, give it once",
                p.flag(),
                num(*v)
            ));
        }
    }
    Ok(())
}

/// AIPerf's `pareto-sweep` concurrencies when `--concurrency` gives none.
pub(crate) const PARETO_CONCURRENCY: [usize; 5] = [1, 4, 16, 64, 256];

/// The points of `--search-recipe pareto-sweep`: each `(isl, osl)` shape at every concurrency,
/// the shapes outside (AIPerf's order). The pairs stay paired (a grid of `--isl` and `--osl`
/// would cross them).
pub(crate) fn pareto_points(a: &ReplayArgs, pairs: &[(u32, u32)]) -> Result<Vec<Point>, String> {
    for (p, n) in [
        (Param::Isl, a.isl.0.len()),
        (Param::Osl, a.osl.as_ref().map_or(0, |l| l.0.len())),
        (
            Param::RequestCount,
            a.request_count.as_ref().map_or(0, |l| l.0.len()),
        ),
        (
            Param::RequestRate,
            a.load.request_rate.as_ref().map_or(0, |l| l.0.len()),
        ),
    ] {
        if n > 1 {
            return Err(format!(
                "--search-recipe pareto-sweep varies the shapes of --isl-osl-pairs and \
                 --concurrency only: give {} one value",
                p.flag()
            ));
        }
    }
    let conc: Vec<f64> = match &a.concurrency {
        Some(l) => l.0.iter().map(|&c| c as f64).collect(),
        None => PARETO_CONCURRENCY.iter().map(|&c| c as f64).collect(),
    };
    no_repeats(Param::Concurrency, &conc)?;
    if pairs.len() * conc.len() < 2 {
        return Err(
            "--search-recipe pareto-sweep of one shape at one concurrency is a single run: give \
             two or more --isl-osl-pairs or --concurrency values"
                .into(),
        );
    }
    Ok(pairs
        .iter()
        .flat_map(|&(isl, osl)| {
            conc.iter().map(move |&c| {
                Point(
                    [
                        (Param::Concurrency, c),
                        (Param::Isl, f64::from(isl)),
                        (Param::Osl, f64::from(osl)),
                    ]
                    .into_iter()
                    .collect(),
                )
            })
        })
        .collect())
}

/// The points of a sweep: only parameters with more than one value vary (and name the points).
pub(crate) fn points(a: &ReplayArgs, how: SweepType) -> Result<Vec<Point>, String> {
    let varied: Vec<(Param, Vec<f64>)> =
        lists(a).into_iter().filter(|(_, v)| v.len() > 1).collect();
    for (p, vals) in &varied {
        no_repeats(*p, vals)?;
    }
    if varied.is_empty() {
        return Ok(vec![Point(BTreeMap::new())]);
    }
    match how {
        SweepType::Zip => {
            let n = varied[0].1.len();
            if let Some((p, v)) = varied.iter().find(|(_, v)| v.len() != n) {
                return Err(format!(
                    "--sweep-type zip pairs the i-th values of every list, but {} has {} values \
                     and {} has {n}: give lists of one length, or use --sweep-type grid",
                    p.flag(),
                    v.len(),
                    varied[0].0.flag(),
                ));
            }
            Ok((0..n)
                .map(|i| Point(varied.iter().map(|(p, v)| (*p, v[i])).collect()))
                .collect())
        }
        SweepType::Grid => {
            let mut out = vec![BTreeMap::new()];
            for (p, vals) in &varied {
                out = out
                    .into_iter()
                    .flat_map(|m: BTreeMap<Param, f64>| {
                        vals.iter().map(move |v| {
                            let mut m = m.clone();
                            m.insert(*p, *v);
                            m
                        })
                    })
                    .collect();
            }
            Ok(out.into_iter().map(Point).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(extra: &[&str]) -> ReplayArgs {
        let mut argv = vec!["specperf", "replay"];
        argv.extend_from_slice(extra);
        let crate::cli::Command::Replay(a) = crate::cli::Cli::try_parse_from(argv).unwrap().command
        else {
            panic!("not replay")
        };
        *a
    }

    #[test]
    fn a_grid_is_every_combination_in_aiperf_order_and_names() {
        let a = args(&["--osl", "64,128", "--concurrency", "2,4,8"]);
        assert!(has_lists(&a));
        let p = points(&a, SweepType::Grid).unwrap();
        let names: Vec<String> = p.iter().map(Point::name).collect();
        assert_eq!(
            names,
            [
                "concurrency_2__osl_64",
                "concurrency_2__osl_128",
                "concurrency_4__osl_64",
                "concurrency_4__osl_128",
                "concurrency_8__osl_64",
                "concurrency_8__osl_128"
            ]
        );
        assert_eq!(p[3].file_suffix(), "_conc4_osl128");
        let one = p[3].apply(&a);
        assert_eq!((one.concurrency(), one.osl()), (Some(4), Some(128)));
        assert!(!has_lists(&one));
    }

    #[test]
    fn zip_pairs_values_and_refuses_unequal_lists() {
        let a = args(&["--isl", "100,200", "--osl", "10,20"]);
        let p = points(&a, SweepType::Zip).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].name(), "isl_200__osl_20");
        let a = args(&["--isl", "100,200,300", "--osl", "10,20"]);
        let e = points(&a, SweepType::Zip).unwrap_err();
        assert!(
            e.contains("--osl has 2 values and --isl has 3") && e.contains("grid"),
            "{e}"
        );
    }

    #[test]
    fn single_values_do_not_name_points_and_duplicates_are_refused() {
        let a = args(&["--concurrency", "4", "--request-rate", "0.5,2.5"]);
        let p = points(&a, SweepType::Grid).unwrap();
        let names: Vec<String> = p.iter().map(Point::name).collect();
        assert_eq!(names, ["request_rate_0.5", "request_rate_2.5"]);
        assert_eq!(p[0].file_suffix(), "_rate0.5");
        assert_eq!(p[0].apply(&a).concurrency(), Some(4));
        let e = points(&args(&["--concurrency", "4,8,4"]), SweepType::Grid).unwrap_err();
        assert!(e.contains("--concurrency lists 4 twice"), "{e}");
        assert!("4,,8".parse::<List<usize>>().is_err());
        assert!("4,x".parse::<List<usize>>().is_err());
    }
}
