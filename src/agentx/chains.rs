//! Flattened-agent chain detection (spec §2.5): a capture sometimes records several agents as
//! one interleaved request list (untagged fan-outs at the top level, overflow threads inside a
//! subagent entry). This partitions such a list back into per-agent chains by hash-id prefix
//! evidence, as AIPerf 0.13 does by default (`AIPERF_DATASET_WEKA_SPLIT_FLATTENED_AGENTS`),
//! and classifies each extra chain as an agent (`fa`), a parallel worker-group member (`wg`)
//! or an auxiliary one-shot sidecar (`aux`).
//!
//! The rule, in short: a request extends the chain whose last context it starts with in full
//! (same model, that request already over); otherwise it forks a new chain off the chain
//! sharing the deepest prefix. A fork off a tail that nothing else ever extended is the same
//! agent after a context edit (a compaction): the deepest such fork is spliced back on (a
//! "seam"), unless it starts long after the tail and keeps little of it.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashSet};

use super::parse::RawRequest;
use super::{AgentxError, ChainKind};

/// Slack when comparing recorded times, s.
const EPS: f64 = 1e-6;
/// A leading request with at most this output is a title-generation style preamble.
const PREAMBLE_MAX_OUTPUT: u64 = 64;

/// The thresholds of the chain splitting, AIPerf's `AIPERF_DATASET_WEKA_*` settings; `Default`
/// is AIPerf 0.13's defaults.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SplitOptions {
    /// `AIPERF_DATASET_WEKA_SPLIT_FLATTENED_AGENTS`: split at all (false: one root conversation
    /// from every top-level request, one child per subagent entry).
    pub enabled: bool,
    /// `..._WEKA_AUX_MAX_REQUESTS`: a chain of at most this many requests may be a sidecar
    /// (0: never).
    pub aux_max_requests: usize,
    /// `..._WEKA_AUX_ISL_RATIO`: a sidecar's first input is below this share of the main
    /// chain's largest input (or below the floor).
    pub aux_isl_ratio: f64,
    /// `..._WEKA_AUX_ISL_FLOOR`: the absolute input floor of that test, tokens.
    pub aux_isl_floor: u64,
    /// `..._WEKA_AUX_CROSS_MODEL`: a short chain on another model than the main chain is a
    /// sidecar whatever its size.
    pub aux_cross_model: bool,
    /// `..._WEKA_AUX_REDUCTION_OSL_MAX`: a one-request chain with output in `(0, this)` may be
    /// a reduction sidecar (0: never).
    pub aux_reduction_osl_max: u64,
    /// `..._WEKA_AUX_REDUCTION_RATIO`: ... when its input/output ratio exceeds this.
    pub aux_reduction_ratio: f64,
    /// `..._WEKA_WORKER_GROUP_MIN`: concurrent forks off one request, at least this many, are a
    /// worker group (0: never).
    pub worker_group_min: usize,
    /// `..._WEKA_SEAM_MAX_GAP_SECONDS`: a continuation starting later than this after the
    /// tail ...
    pub seam_max_gap_s: f64,
    /// `..._WEKA_SEAM_MIN_OVERLAP_RATIO`: ... and keeping less than this share of its blocks is
    /// a new chain, not a seam.
    pub seam_min_overlap_ratio: f64,
}

impl Default for SplitOptions {
    fn default() -> Self {
        SplitOptions {
            enabled: true,
            aux_max_requests: 1,
            aux_isl_ratio: 0.10,
            aux_isl_floor: 16384,
            aux_cross_model: true,
            aux_reduction_osl_max: 4000,
            aux_reduction_ratio: 20.0,
            worker_group_min: 3,
            seam_max_gap_s: 3600.0,
            seam_min_overlap_ratio: 0.5,
        }
    }
}

/// Environment variable prefix of AIPerf's dataset settings.
const ENV: &str = "AIPERF_DATASET_WEKA_";

impl SplitOptions {
    /// Reads the `AIPERF_DATASET_WEKA_*` variables AIPerf reads (unset: the default) through
    /// `get`; a value AIPerf would reject is an error naming the variable.
    pub fn from_env(get: &dyn Fn(&str) -> Option<String>) -> Result<Self, AgentxError> {
        let d = SplitOptions::default();
        let read = |name: &str| {
            let var = format!("{ENV}{name}");
            get(&var).map(|v| (var, v.trim().to_string()))
        };
        let bad = |var: String, value: String, expected: &str| AgentxError::Env {
            var,
            value,
            expected: expected.to_string(),
        };
        let boolean = |name: &str, default: bool| match read(name) {
            None => Ok(default),
            Some((var, v)) => super::pydantic_bool(&v)
                .ok_or_else(|| bad(var, v, "true or false (also 1/0, yes/no, on/off)")),
        };
        let count = |name: &str, default: u64| match read(name) {
            None => Ok(default),
            Some((var, v)) => v
                .parse::<u64>()
                .map_err(|_| bad(var, v, "a whole number >= 0")),
        };
        let real = |name: &str, default: f64, max: f64| match read(name) {
            None => Ok(default),
            Some((var, v)) => match v.parse::<f64>() {
                Ok(x) if (0.0..=max).contains(&x) => Ok(x),
                _ if max.is_finite() => Err(bad(var, v, &format!("a number from 0 to {max}"))),
                _ => Err(bad(var, v, "a number >= 0 (inf allowed)")),
            },
        };
        let usize_of = |x: u64| usize::try_from(x).unwrap_or(usize::MAX);
        Ok(SplitOptions {
            enabled: boolean("SPLIT_FLATTENED_AGENTS", d.enabled)?,
            aux_max_requests: usize_of(count("AUX_MAX_REQUESTS", d.aux_max_requests as u64)?),
            aux_isl_ratio: real("AUX_ISL_RATIO", d.aux_isl_ratio, f64::INFINITY)?,
            aux_isl_floor: count("AUX_ISL_FLOOR", d.aux_isl_floor)?,
            aux_cross_model: boolean("AUX_CROSS_MODEL", d.aux_cross_model)?,
            aux_reduction_osl_max: count("AUX_REDUCTION_OSL_MAX", d.aux_reduction_osl_max)?,
            aux_reduction_ratio: real("AUX_REDUCTION_RATIO", d.aux_reduction_ratio, f64::INFINITY)?,
            worker_group_min: usize_of(count("WORKER_GROUP_MIN", d.worker_group_min as u64)?),
            seam_max_gap_s: real("SEAM_MAX_GAP_SECONDS", d.seam_max_gap_s, f64::INFINITY)?,
            seam_min_overlap_ratio: real("SEAM_MIN_OVERLAP_RATIO", d.seam_min_overlap_ratio, 1.0)?,
        })
    }
}

/// A request to partition: its key (outer index at the top level, inner index inside a
/// subagent), its absolute start, s, and the request.
pub(super) type Item<'a> = (usize, f64, &'a RawRequest);

/// A request's recorded end, s (no `api_time`: zero width).
pub(super) fn req_end(t: f64, r: &RawRequest) -> f64 {
    t + r.api_time.unwrap_or(0.0).max(0.0)
}

fn lcp(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Where a chain forked off another.
#[derive(Clone, Copy, Debug)]
struct Fork {
    /// The chain forked from (`None`: no shared context).
    parent: Option<usize>,
    /// Key of that chain's tail request at the fork.
    tail_key: Option<usize>,
    /// Blocks shared with it.
    depth: usize,
    /// Start of this chain's first request, s.
    time: f64,
}

struct Chain<'a> {
    items: Vec<Item<'a>>,
    fork: Option<Fork>,
    spliced_into: Option<usize>,
    /// Last hash-bearing request (phase 1 only): key, hash ids, end, model.
    tail: Option<(usize, &'a [u32], f64, &'a str)>,
}

impl<'a> Chain<'a> {
    fn new(fork: Option<Fork>) -> Self {
        Chain {
            items: Vec::new(),
            fork,
            spliced_into: None,
            tail: None,
        }
    }

    fn push(&mut self, it: Item<'a>) {
        if !it.2.hash_ids.is_empty() {
            self.tail = Some((it.0, &it.2.hash_ids, req_end(it.1, it.2), &it.2.model));
        }
        self.items.push(it);
    }

    fn last_hash_key(&self) -> Option<usize> {
        self.items
            .iter()
            .rev()
            .find(|it| !it.2.hash_ids.is_empty())
            .map(|it| it.0)
    }
}

/// The partition of one request list.
pub(super) struct Detection<'a> {
    /// Each chain's requests; the first is the main chain, the rest in order of first request
    /// `(t, key)`.
    pub(super) chains: Vec<Vec<Item<'a>>>,
    /// Worker-group coordinates `(group, member)` of the extra chains (index into `chains`).
    wg: BTreeMap<usize, (usize, usize)>,
}

/// Partitions `items` into chains (detection proper: no preamble handling, no
/// classification). The result's chain 0 is the main chain.
pub(super) fn detect<'a>(items: &[Item<'a>], opts: &SplitOptions) -> Detection<'a> {
    let mut ordered = items.to_vec();
    ordered.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    if ordered.is_empty() {
        return Detection {
            chains: Vec::new(),
            wg: BTreeMap::new(),
        };
    }

    // Phase 1: greedy, forking on every request that does not extend a chain.
    let mut chains: Vec<Chain<'a>> = Vec::new();
    let mut chain_of: BTreeMap<usize, usize> = BTreeMap::new();
    let mut forks_by_tail: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut by_key: BTreeMap<usize, Item<'a>> = BTreeMap::new();
    for &it in &ordered {
        by_key.insert(it.0, it);
        let (key, t, r) = it;
        if chains.is_empty() {
            chains.push(Chain::new(None));
        }
        // No hash evidence: ride the main chain, never a tail.
        if r.hash_ids.is_empty() {
            chains[0].items.push(it);
            chain_of.insert(key, 0);
            continue;
        }
        let h = r.hash_ids.as_slice();
        // Extension: the deepest same-model tail that is a full prefix and has ended.
        let mut target: Option<usize> = None;
        let mut best = 0;
        for (ci, c) in chains.iter().enumerate() {
            let Some((_, tail, end, model)) = c.tail else {
                continue;
            };
            if tail.len() > h.len() || tail.len() <= best {
                continue;
            }
            // The last block first: it rules out most chains at once.
            if model != r.model
                || end > t + EPS
                || h[tail.len() - 1] != tail[tail.len() - 1]
                || h[..tail.len()] != *tail
            {
                continue;
            }
            target = Some(ci);
            best = tail.len();
        }
        if let Some(ci) = target {
            chains[ci].push(it);
            chain_of.insert(key, ci);
            continue;
        }
        // Fork off the deepest shared prefix (ties: longer tail, then lower index).
        let mut parent: Option<usize> = None;
        let mut best_key = (0, 0);
        for (ci, c) in chains.iter().enumerate() {
            let Some((_, tail, ..)) = c.tail else {
                continue;
            };
            let d = lcp(tail, h);
            if d > 0 && (d, tail.len()) > best_key {
                parent = Some(ci);
                best_key = (d, tail.len());
            }
        }
        if parent.is_none() && chains.iter().all(|c| c.tail.is_none()) {
            // The first hash-bearing request is the main agent.
            chains[0].push(it);
            chain_of.insert(key, 0);
            continue;
        }
        let tail_key = parent.and_then(|p| chains[p].tail.map(|t| t.0));
        let depth = best_key.0;
        let new = chains.len();
        chains.push(Chain::new(Some(Fork {
            parent,
            tail_key,
            depth,
            time: t,
        })));
        chains[new].push(it);
        chain_of.insert(key, new);
        if let (Some(tk), true) = (tail_key, depth > 0) {
            forks_by_tail.entry(tk).or_default().push(new);
        }
    }

    resolve_seams(
        &mut chains,
        &mut forks_by_tail,
        &mut chain_of,
        &by_key,
        opts,
    );

    let resolve = |mut i: usize, chains: &[Chain<'_>]| {
        while let Some(j) = chains[i].spliced_into {
            i = j;
        }
        i
    };
    for ci in 0..chains.len() {
        if chains[ci].spliced_into.is_some() {
            continue;
        }
        if let Some(p) = chains[ci].fork.and_then(|f| f.parent) {
            let live = resolve(p, &chains);
            if let Some(f) = chains[ci].fork.as_mut() {
                f.parent = Some(live);
            }
        }
    }
    let main = resolve(chain_of[&ordered[0].0], &chains);
    let mut workers: Vec<usize> = (0..chains.len())
        .filter(|&i| chains[i].spliced_into.is_none() && i != main)
        .collect();
    workers.sort_by(|&a, &b| {
        let (x, y) = (chains[a].items[0], chains[b].items[0]);
        x.1.total_cmp(&y.1).then(x.0.cmp(&y.0))
    });
    let coords = worker_groups(&chains, &workers, opts.worker_group_min);
    let mut out = Detection {
        chains: vec![std::mem::take(&mut chains[main].items)],
        wg: BTreeMap::new(),
    };
    for (n, &ci) in workers.iter().enumerate() {
        if let Some(&c) = coords.get(&ci) {
            out.wg.insert(n + 1, c);
        }
        out.chains.push(std::mem::take(&mut chains[ci].items));
    }
    out
}

/// Phase 2: splice same-agent continuations back onto tails nothing else extended.
fn resolve_seams<'a>(
    chains: &mut [Chain<'a>],
    forks_by_tail: &mut BTreeMap<usize, Vec<usize>>,
    chain_of: &mut BTreeMap<usize, usize>,
    by_key: &BTreeMap<usize, Item<'a>>,
    opts: &SplitOptions,
) {
    let mut keys: BinaryHeap<Reverse<usize>> = forks_by_tail.keys().map(|&k| Reverse(k)).collect();
    let mut processed: HashSet<usize> = HashSet::new();
    let resolve = |mut i: usize, chains: &[Chain<'_>]| {
        while let Some(j) = chains[i].spliced_into {
            i = j;
        }
        i
    };
    while let Some(Reverse(tail_key)) = keys.pop() {
        if !processed.insert(tail_key) {
            continue;
        }
        let owner = resolve(chain_of[&tail_key], chains);
        if chains[owner].last_hash_key() != Some(tail_key) {
            continue; // the longer state was extended: every fork is a spawn
        }
        let registered: Vec<usize> = forks_by_tail[&tail_key]
            .iter()
            .copied()
            .filter(|&ci| chains[ci].spliced_into.is_none())
            .collect();
        let (_, tt, tr) = by_key[&tail_key];
        let t_end = req_end(tt, tr);
        let tail_blocks = tr.hash_ids.len();
        let elected = registered
            .iter()
            .copied()
            .filter(|&ci| {
                let c = &chains[ci];
                let Some(f) = c.fork else { return false };
                let first = c.items[0];
                let blocked = tail_blocks > 0
                    && first.1 - t_end > opts.seam_max_gap_s
                    && (f.depth as f64 / tail_blocks as f64) < opts.seam_min_overlap_ratio;
                f.depth > 0 && t_end <= first.1 + EPS && first.2.model == tr.model && !blocked
            })
            // Deepest, then earliest fork, then lowest index.
            .min_by(|&a, &b| {
                let (fa, fb) = (chains[a].fork.unwrap(), chains[b].fork.unwrap());
                fb.depth
                    .cmp(&fa.depth)
                    .then(fa.time.total_cmp(&fb.time))
                    .then(a.cmp(&b))
            });
        let Some(elected) = elected else { continue };
        let moved = std::mem::take(&mut chains[elected].items);
        for it in &moved {
            chain_of.insert(it.0, owner);
        }
        chains[owner].items.extend(moved);
        chains[elected].spliced_into = Some(owner);

        let Some(new_tail) = chains[owner].last_hash_key() else {
            continue;
        };
        // Re-key the other forks of the consumed tail against the merged chain's new tail.
        let new_hash = by_key[&new_tail].2.hash_ids.as_slice();
        let mut rekeyed = false;
        for &ci in &registered {
            if ci == elected || chains[ci].spliced_into.is_some() || chains[ci].fork.is_none() {
                continue;
            }
            let d = lcp(new_hash, &chains[ci].items[0].2.hash_ids);
            if d == 0 {
                continue;
            }
            if let Some(f) = chains[ci].fork.as_mut() {
                f.tail_key = Some(new_tail);
                f.depth = d;
                f.parent = Some(owner);
            }
            forks_by_tail.entry(new_tail).or_default().push(ci);
            rekeyed = true;
        }
        if rekeyed {
            processed.remove(&new_tail);
            keys.push(Reverse(new_tail));
        }
    }
}

/// Worker-group coordinates: forks off the same request (with shared context) whose active
/// intervals overlap, at least `group_min` of them; groups by earliest start, members by start.
fn worker_groups(
    chains: &[Chain<'_>],
    workers: &[usize],
    group_min: usize,
) -> BTreeMap<usize, (usize, usize)> {
    let mut out = BTreeMap::new();
    if group_min == 0 {
        return out;
    }
    // (t0, t1, first key, chain)
    type Cand = (f64, f64, usize, usize);
    let mut buckets: BTreeMap<(usize, usize), Vec<Cand>> = BTreeMap::new();
    for &ci in workers {
        let c = &chains[ci];
        let Some(Fork {
            parent: Some(p),
            tail_key: Some(tk),
            depth,
            ..
        }) = c.fork
        else {
            continue;
        };
        if depth == 0 || c.items.is_empty() {
            continue;
        }
        let t0 = c.items[0].1;
        let t1 = c
            .items
            .iter()
            .map(|it| req_end(it.1, it.2))
            .fold(f64::NEG_INFINITY, f64::max);
        buckets
            .entry((p, tk))
            .or_default()
            .push((t0, t1, c.items[0].0, ci));
    }
    let mut groups: Vec<Vec<Cand>> = Vec::new();
    for cands in buckets.into_values() {
        // Connected components of [t0, t1) overlap: sweep in start order; every interval still
        // active overlaps the current one (touching ends do not).
        let mut order: Vec<usize> = (0..cands.len()).collect();
        order.sort_by(|&a, &b| {
            cands[a]
                .0
                .total_cmp(&cands[b].0)
                .then(cands[a].2.cmp(&cands[b].2))
        });
        let mut comp: Vec<usize> = (0..cands.len()).collect();
        let mut active: Vec<usize> = Vec::new();
        for &i in &order {
            active.retain(|&j| cands[j].1 > cands[i].0);
            if let Some(&j) = active.first() {
                let root = comp[j];
                let mine = comp[i];
                for c in comp.iter_mut() {
                    if *c == mine {
                        *c = root;
                    }
                }
            }
            active.push(i);
        }
        let mut by_root: BTreeMap<usize, Vec<Cand>> = BTreeMap::new();
        for (i, c) in cands.iter().enumerate() {
            by_root.entry(comp[i]).or_default().push(*c);
        }
        groups.extend(by_root.into_values().filter(|g| g.len() >= group_min));
    }
    for g in &mut groups {
        g.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.2.cmp(&b.2)));
    }
    groups.sort_by(|a, b| a[0].0.total_cmp(&b[0].0).then(a[0].2.cmp(&b[0].2)));
    for (group, g) in groups.iter().enumerate() {
        for (member, c) in g.iter().enumerate() {
            out.insert(c.3, (group, member));
        }
    }
    out
}

/// Sets aside a leading throwaway request (a title-generation call) so it cannot found the
/// main chain: only the earliest request, only when its blocks share no prefix with any other
/// request, and, when its output is over 64 tokens, no block at all. Returns (preamble, rest).
pub(super) fn split_off_preamble<'a>(items: &[Item<'a>]) -> (Option<Item<'a>>, Vec<Item<'a>>) {
    if items.len() < 2 {
        return (None, items.to_vec());
    }
    let mut ordered = items.to_vec();
    ordered.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    let first = ordered[0];
    if first.2.hash_ids.is_empty() {
        return (None, items.to_vec());
    }
    let rest = &ordered[1..];
    if rest
        .iter()
        .any(|o| !o.2.hash_ids.is_empty() && lcp(&first.2.hash_ids, &o.2.hash_ids) > 0)
    {
        return (None, items.to_vec());
    }
    if first.2.output > PREAMBLE_MAX_OUTPUT {
        let others: HashSet<u32> = rest
            .iter()
            .flat_map(|o| o.2.hash_ids.iter().copied())
            .collect();
        if first.2.hash_ids.iter().any(|h| others.contains(h)) {
            return (None, items.to_vec());
        }
    }
    let mut rest = rest.to_vec();
    rest.sort_by_key(|it| it.0);
    (Some(first), rest)
}

/// One extra chain, classified.
pub(super) struct Split<'a> {
    /// Its requests, in chain order.
    pub(super) items: Vec<Item<'a>>,
    /// `fa`, `wg` or `aux`.
    pub(super) kind: ChainKind,
    /// Its dense index among the extra chains (the `NNN` of `fa:NNN` / `aux:NNN`).
    pub(super) index: usize,
}

impl Split<'_> {
    /// `fa:000`, `wg:000_001`, `aux:002`.
    pub(super) fn suffix(&self) -> String {
        match self.kind {
            ChainKind::Agent => format!("fa:{:03}", self.index),
            ChainKind::WorkerGroup { group, member } => format!("wg:{group:03}_{member:03}"),
            ChainKind::Aux => format!("aux:{:03}", self.index),
        }
    }
}

/// One request list, split: the main chain (the preamble put back in time order) and the
/// extra chains. `None` when detection finds a single chain.
pub(super) struct Partition<'a> {
    pub(super) main: Vec<Item<'a>>,
    pub(super) extra: Vec<Split<'a>>,
    /// The main chain as detected (without the preamble): the yardstick of the declared
    /// prefix test.
    pub(super) detected_main: Vec<Item<'a>>,
}

/// Splits one request list and classifies the extra chains against the detected main chain.
pub(super) fn partition<'a>(items: &[Item<'a>], opts: &SplitOptions) -> Partition<'a> {
    let (preamble, rest) = split_off_preamble(items);
    let mut det = detect(&rest, opts);
    let detected_main = if det.chains.is_empty() {
        Vec::new()
    } else {
        det.chains.remove(0)
    };
    let mut main = detected_main.clone();
    if let Some(p) = preamble {
        main.push(p);
        main.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    }
    let peak_isl = detected_main.iter().map(|it| it.2.input).max().unwrap_or(0);
    let main_model = detected_main.first().map(|it| it.2.model.as_str());
    let extra = det
        .chains
        .into_iter()
        .enumerate()
        .map(|(n, items)| {
            let reqs: Vec<&RawRequest> = items.iter().map(|it| it.2).collect();
            let kind = if is_aux(&reqs, peak_isl, main_model, opts) || is_reduction(&reqs, opts) {
                ChainKind::Aux
            } else if let Some(&(group, member)) = det.wg.get(&(n + 1)) {
                ChainKind::WorkerGroup { group, member }
            } else {
                ChainKind::Agent
            };
            Split {
                items,
                kind,
                index: n,
            }
        })
        .collect();
    Partition {
        main,
        extra,
        detected_main,
    }
}

/// A short chain that is cross-model or starts from a small fresh context.
fn is_aux(
    reqs: &[&RawRequest],
    main_peak_isl: u64,
    main_model: Option<&str>,
    o: &SplitOptions,
) -> bool {
    let Some(first) = reqs.first() else {
        return false;
    };
    if reqs.len() > o.aux_max_requests {
        return false;
    }
    if o.aux_cross_model && main_model.is_some_and(|m| m != first.model) {
        return true;
    }
    // AIPerf truncates the ratio term to whole tokens.
    let threshold = o
        .aux_isl_floor
        .max((o.aux_isl_ratio * main_peak_isl as f64) as u64);
    first.input < threshold
}

/// A one-request, large-input, short-output chain (a compaction or a summary).
fn is_reduction(reqs: &[&RawRequest], o: &SplitOptions) -> bool {
    let [first] = reqs else { return false };
    if o.aux_reduction_osl_max == 0 || first.output == 0 || first.output >= o.aux_reduction_osl_max
    {
        return false;
    }
    first.input >= o.aux_isl_floor
        && first.input as f64 > o.aux_reduction_ratio * first.output as f64
}

/// Turn-0 `(tool_tokens, system_tokens)` of an extra chain: the declared counts only when its
/// first hash-bearing request starts with the same declared-prefix blocks as the main chain's.
pub(super) fn chain_init_tokens(
    tool: u64,
    system: u64,
    block_size: u64,
    base_first_hash: &[u32],
    chain_first_hash: &[u32],
) -> (u64, u64) {
    let blocks = (tool + system).div_ceil(block_size) as usize;
    let covered = blocks > 0
        && chain_first_hash.len() >= blocks
        && base_first_hash.len() >= blocks
        && chain_first_hash[..blocks] == base_first_hash[..blocks];
    if covered {
        (tool, system)
    } else {
        (0, 0)
    }
}
