//! Checked raw trace -> [`Trace`]: root and child conversations (split into agent chains by
//! `chains`), the spawn/join topology,
//! delays, `max_tokens`, theoretical prefix-cache counts, peak context and time bounds (spec
//! §2.4–§2.5, §3.2).

use std::collections::HashSet;

use super::chains::{self, Item, Split};
use super::parse::{RawEntry, RawRequest, RawSubagent, RawTrace};
use super::{
    AgentxError, BlockIds, Branch, ConvKind, Conversation, DropReason, Dropped, InputKind,
    LoadOptions, Origin, Subagent, Trace, Turn,
};

/// Slack when comparing recorded times, s (AIPerf's tolerance).
const EPS: f64 = 1e-6;

/// A subagent's recorded end, s: spawn + `duration_ms` (negative counts as 0), else the last
/// inner response end, else the spawn.
fn subagent_end(sa: &RawSubagent) -> f64 {
    match sa.duration_ms {
        Some(d) => sa.t + (d / 1000.0).max(0.0),
        None => sa
            .requests
            .iter()
            .map(|r| inner_t(sa, r) + r.api_time.unwrap_or(0.0).max(0.0))
            .reduce(f64::max)
            .unwrap_or(sa.t),
    }
}

/// An inner request's absolute time: captures record absolute times, but a `t` before the spawn
/// is relative to it.
fn inner_t(sa: &RawSubagent, r: &RawRequest) -> f64 {
    if r.t + EPS < sa.t {
        sa.t + r.t
    } else {
        r.t
    }
}

/// A request placed in its conversation: absolute time (s), the request, its index in the
/// trace's `requests`, and its index inside a subagent entry.
type Placed<'a> = (f64, &'a RawRequest, usize, Option<usize>);

/// `max_tokens` of a request: `max(1, out)`, capped when a cap is given.
fn capped_out(out: u64, cap: Option<u64>) -> u64 {
    cap.map_or(out, |m| out.min(m)).max(1)
}

/// Turns of one conversation from its placed requests.
fn turns(reqs: &[Placed<'_>], max_osl: Option<u64>) -> Vec<Turn> {
    let mut out: Vec<Turn> = Vec::with_capacity(reqs.len());
    let mut ids = BlockIds::conversation(reqs.iter().map(|p| p.1.hash_ids.as_slice())).into_iter();
    for (k, &(t, r, outer, inner)) in reqs.iter().enumerate() {
        let prev = k.checked_sub(1).map(|p| reqs[p]);
        let delay_ms = prev
            .map(|(pt, pr, ..)| ((t - pt) - pr.api_time.unwrap_or(0.0).max(0.0)).max(0.0) * 1000.0);
        let input_kind = if r.input_types.is_empty() {
            match prev {
                Some((_, pr, ..)) if pr.stop == "tool_use" => InputKind::ToolResult,
                _ => InputKind::User,
            }
        } else if r.input_types.iter().any(|s| s == "tool_result") {
            InputKind::ToolResult
        } else {
            InputKind::User
        };

        out.push(Turn {
            timestamp_ms: t * 1000.0,
            delay_ms,
            api_time_ms: r.api_time.map(|a| a * 1000.0),
            input_tokens: r.input,
            output_tokens: r.output,
            max_tokens: capped_out(r.output, max_osl),
            hash_ids: ids.next().expect("one per request"),
            model: r.model.clone(),
            transport: r.transport,
            input_kind,
            stop: r.stop.clone(),
            source_outer_idx: outer,
            source_inner_idx: inner,
            cache_hit_blocks: 0,
            cache_total_blocks: r.hash_ids.len() as u64,
            spawns: Vec::new(),
            joins: Vec::new(),
            after: Vec::new(),
        });
    }
    out
}

/// A request's place in the prefix-cache order: `(t, outer index, chain index, k)`, and the
/// turn it is (conversation: 0 = root, `c + 1` = child `c`; turn).
type CacheKey = (f64, usize, usize, usize, usize, usize);

/// Rebuilds one checked trace.
pub(super) fn trace(
    raw: RawTrace,
    origin: Origin,
    opts: &LoadOptions,
) -> Result<Trace, AgentxError> {
    let split = &opts.split;
    let bs = raw.block_size;
    let normals: Vec<Item<'_>> = raw
        .requests
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match e {
            RawEntry::Request(r) => Some((i, r.t, r)),
            RawEntry::Subagent(_) => None,
        })
        .collect();
    // Top-level chains: the main chain is the root; the rest become flat children.
    let (main, flats) = if split.enabled && normals.len() > 1 {
        let p = chains::partition(&normals, split);
        if p.extra.is_empty() {
            (normals, Vec::new())
        } else {
            let base = first_hashes(&p.detected_main);
            let flats: Vec<(Split<'_>, (u64, u64))> = p
                .extra
                .into_iter()
                .map(|s| {
                    let init = chains::chain_init_tokens(
                        raw.tool_tokens,
                        raw.system_tokens,
                        bs,
                        base,
                        &s.items[0].2.hash_ids,
                    );
                    (s, init)
                })
                .collect();
            (p.main, flats)
        }
    } else {
        (normals, Vec::new())
    };
    let parents: Vec<Placed<'_>> = main.iter().map(|&(i, t, r)| (t, r, i, None)).collect();
    let mut root = Conversation {
        session_id: raw.id.clone(),
        kind: ConvKind::Root,
        subagent: None,
        tool_tokens: raw.tool_tokens,
        system_tokens: raw.system_tokens,
        turns: turns(&parents, opts.synthesis_max_osl),
    };
    // Root turns by list index: the spawn/join rules go by list order, the turns by chain order.
    let mut by_outer: Vec<(usize, usize, f64)> = parents
        .iter()
        .enumerate()
        .map(|(pos, p)| (p.2, pos, p.0))
        .collect();
    by_outer.sort_by_key(|p| p.0);
    let preceding = |i: usize| by_outer.iter().filter(|p| p.0 < i).map(|p| p.1).max();
    let join_after = |i: usize, end: f64| {
        by_outer
            .iter()
            .find(|p| p.0 > i && p.2 + EPS >= end)
            .map(|p| p.1)
    };

    let mut cache_order: Vec<CacheKey> = Vec::new();
    for (k, t) in root.turns.iter().enumerate() {
        cache_order.push((t.timestamp_ms, t.source_outer_idx, 0, 0, 0, k));
    }
    let mut children: Vec<Conversation> = Vec::new();
    let mut sub_keys: Vec<CacheKey> = Vec::new();
    let mut branches: Vec<Branch> = Vec::new();
    let mut dropped = Vec::new();
    for (i, e) in raw.requests.iter().enumerate() {
        let RawEntry::Subagent(sa) = e else { continue };
        let dropped_as = |reason| Dropped {
            agent_id: sa.agent_id.clone(),
            source_outer_idx: i,
            reason,
        };
        // The spawning turn: the last root turn listed before the entry.
        let Some(spawn_turn) = preceding(i) else {
            dropped.push(dropped_as(DropReason::NoPrecedingTurn));
            continue;
        };
        if sa.requests.is_empty() {
            dropped.push(dropped_as(DropReason::NoRequests));
            continue;
        }
        // Child session and branch ids are made of the agent id: a repeat would cross-wire them.
        if let Some(first) = children.iter().find_map(|c: &Conversation| {
            c.subagent
                .as_ref()
                .filter(|s| s.agent_id == sa.agent_id)
                .map(|_| c.turns[0].source_outer_idx)
        }) {
            return Err(AgentxError::Unreplayable {
                origin,
                trace: raw.id.clone(),
                why: format!(
                    "subagents `requests[{first}]` and `requests[{i}]` share the agent_id {:?}; \
                     each replayed subagent needs its own (AIPerf refuses the trace too)",
                    sa.agent_id
                ),
            });
        }
        let end = subagent_end(sa);
        // The join: the first later-listed root turn that starts once the subagent has ended.
        let join_turn = join_after(i, end);
        let branch = match branches
            .iter()
            .position(|b| b.spawn_turn == spawn_turn && b.join_turn == join_turn)
        {
            Some(b) => b,
            None => {
                branches.push(Branch {
                    id: format!("{}:spawn:{}", raw.id, sa.agent_id),
                    spawn_turn,
                    join_turn,
                    children: Vec::new(),
                    start_ms: sa.t * 1000.0,
                });
                branches.len() - 1
            }
        };
        branches[branch].start_ms = branches[branch].start_ms.min(sa.t * 1000.0);
        let sub_session = format!("{}::sa:{}", raw.id, sa.agent_id);
        for (chain, (session_id, kind, tool, system, items)) in
            subagent_chains(sa, &sub_session, bs, split)
                .into_iter()
                .enumerate()
        {
            let placed: Vec<Placed<'_>> =
                items.iter().map(|&(k, t, r)| (t, r, i, Some(k))).collect();
            let child_turns = turns(&placed, None);
            let c = children.len();
            for (k, t) in child_turns.iter().enumerate() {
                sub_keys.push((t.timestamp_ms, i, chain, k, c + 1, k));
            }
            branches[branch].children.push(c);
            children.push(Conversation {
                session_id,
                kind,
                subagent: Some(Subagent {
                    agent_id: sa.agent_id.clone(),
                    subagent_type: sa.subagent_type.clone(),
                    spawn_ms: sa.t * 1000.0,
                    end_ms: end * 1000.0,
                    branch,
                    first_turn_offset_ms: 0.0,
                }),
                tool_tokens: tool,
                system_tokens: system,
                turns: child_turns,
            });
        }
    }

    // Flat chains: spawned off the last root turn listed before their first request (turn 0
    // when none), joined on the first later-listed root turn starting once they have ended;
    // grouped by (spawn, join) like subagents, in branches of their own.
    let first_flat_branch = branches.len();
    for (split_chain, (tool, system)) in flats {
        let first = split_chain.items[0];
        let spawn_turn = preceding(first.0).unwrap_or(0);
        let end = split_chain
            .items
            .iter()
            .map(|it| chains::req_end(it.1, it.2))
            .fold(f64::NEG_INFINITY, f64::max);
        let join_turn = join_after(first.0, end);
        let branch = match branches[first_flat_branch..]
            .iter()
            .position(|b| b.spawn_turn == spawn_turn && b.join_turn == join_turn)
        {
            Some(b) => first_flat_branch + b,
            None => {
                branches.push(Branch {
                    id: format!("{}:flatspawn:{}", raw.id, split_chain.index),
                    spawn_turn,
                    join_turn,
                    children: Vec::new(),
                    start_ms: first.1 * 1000.0,
                });
                branches.len() - 1
            }
        };
        branches[branch].start_ms = branches[branch].start_ms.min(first.1 * 1000.0);
        let placed: Vec<Placed<'_>> = split_chain
            .items
            .iter()
            .map(|&(i, t, r)| (t, r, i, None))
            .collect();
        let flat_turns = turns(&placed, opts.synthesis_max_osl);
        let c = children.len();
        for (k, t) in flat_turns.iter().enumerate() {
            cache_order.push((t.timestamp_ms, t.source_outer_idx, 0, 0, c + 1, k));
        }
        branches[branch].children.push(c);
        children.push(Conversation {
            session_id: format!("{}::{}", raw.id, split_chain.suffix()),
            kind: ConvKind::Flat(split_chain.kind),
            subagent: Some(Subagent {
                agent_id: String::new(),
                subagent_type: String::new(),
                spawn_ms: first.1 * 1000.0,
                end_ms: end * 1000.0,
                branch,
                first_turn_offset_ms: 0.0,
            }),
            tool_tokens: tool,
            system_tokens: system,
            turns: flat_turns,
        });
    }
    for child in &mut children {
        let first = child.turns[0].timestamp_ms;
        if let Some(sa) = child.subagent.as_mut() {
            sa.first_turn_offset_ms = (first - branches[sa.branch].start_ms).max(0.0);
        }
    }
    for (b, branch) in branches.iter().enumerate() {
        // Spawn and join go by list order, turns by chain order: when the main chain is not in
        // list order (rows without hash ids ride it, seams are appended), a join can fall on or
        // before its spawn. Nothing could replay that; AIPerf's loader rejects it too.
        if let Some(j) = branch.join_turn.filter(|&j| j <= branch.spawn_turn) {
            return Err(AgentxError::Unreplayable {
                origin,
                trace: raw.id.clone(),
                why: format!(
                    "branch {} would be spawned by root turn {} but joined by turn {j}, not \
                     after it (the split main chain is out of list order); AIPerf refuses the \
                     trace too: leave it out, or set AIPERF_DATASET_WEKA_SPLIT_FLATTENED_AGENTS=false",
                    branch.id, branch.spawn_turn
                ),
            });
        }
        root.turns[branch.spawn_turn].spawns.push(b);
        if let Some(j) = branch.join_turn {
            root.turns[j].joins.push(b);
        }
    }

    // AIPerf's record order: root, flat chains, then subagent chains (a stable sort keeps it
    // among equal keys).
    cache_order.extend(sub_keys);
    count_cache_hits(&mut root, &mut children, cache_order);
    super::after::fill(&mut root, &mut children);

    let all_turns = || {
        std::iter::once(&root)
            .chain(&children)
            .flat_map(|c| &c.turns)
    };
    // The trace as recorded, split or not, replayed or not (AIPerf's keep/drop test): top-level
    // requests with the `--synthesis-max-osl` cap they are sent with, subagent requests uncapped.
    let peak_context_tokens = raw
        .requests
        .iter()
        .flat_map(|e| match e {
            RawEntry::Request(r) => vec![r.input + capped_out(r.output, opts.synthesis_max_osl)],
            RawEntry::Subagent(sa) => sa
                .requests
                .iter()
                .map(|r| r.input + capped_out(r.output, None))
                .collect(),
        })
        .max()
        .unwrap_or(0);
    let time_bounds_ms = all_turns()
        .map(|t| t.timestamp_ms)
        .fold(None, |acc: Option<(f64, f64)>, t| {
            Some(acc.map_or((t, t), |(lo, hi)| (lo.min(t), hi.max(t))))
        })
        .unwrap_or((0.0, 0.0));
    Ok(Trace {
        id: raw.id,
        origin,
        models: raw.models,
        block_size: raw.block_size,
        root,
        children,
        branches,
        dropped,
        peak_context_tokens,
        time_bounds_ms,
    })
}

/// The first non-empty `hash_ids` of a chain.
fn first_hashes<'a>(items: &[Item<'a>]) -> &'a [u32] {
    items
        .iter()
        .map(|it| it.2.hash_ids.as_slice())
        .find(|h| !h.is_empty())
        .unwrap_or(&[])
}

/// A subagent entry's chains: (session id, kind, tool tokens, system tokens, requests keyed by
/// inner index). Unsplit: one chain, its requests in time order.
type SubChain<'a> = (String, ConvKind, u64, u64, Vec<Item<'a>>);

fn subagent_chains<'a>(
    sa: &'a RawSubagent,
    session: &str,
    block_size: u64,
    split: &chains::SplitOptions,
) -> Vec<SubChain<'a>> {
    let mut inner: Vec<Item<'a>> = sa
        .requests
        .iter()
        .enumerate()
        .map(|(k, r)| (k, inner_t(sa, r), r))
        .collect();
    if !split.enabled {
        inner.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        return vec![(
            session.to_string(),
            ConvKind::Subagent,
            sa.tool_tokens,
            sa.system_tokens,
            inner,
        )];
    }
    let p = chains::partition(&inner, split);
    let base = first_hashes(&p.detected_main);
    let mut out = vec![(
        session.to_string(),
        ConvKind::Subagent,
        sa.tool_tokens,
        sa.system_tokens,
        p.main,
    )];
    for s in p.extra {
        let (tool, system) = chains::chain_init_tokens(
            sa.tool_tokens,
            sa.system_tokens,
            block_size,
            base,
            first_hashes(&s.items),
        );
        out.push((
            format!("{session}:{}", s.suffix()),
            ConvKind::SubagentChain(s.kind),
            tool,
            system,
            s.items,
        ));
    }
    out
}

/// Theoretical prefix-cache hits: one seen-set per trace, requests taken in AIPerf's global
/// order `(t, outer index, chain index, k)` (stable among equal keys); a request's hits are the
/// leading run of its blocks already seen.
fn count_cache_hits(
    root: &mut Conversation,
    children: &mut [Conversation],
    mut order: Vec<CacheKey>,
) {
    order.sort_by(|a, b| {
        a.0.total_cmp(&b.0)
            .then(a.1.cmp(&b.1))
            .then(a.2.cmp(&b.2))
            .then(a.3.cmp(&b.3))
    });
    let top = std::iter::once(&*root)
        .chain(children.iter())
        .flat_map(|c| &c.turns)
        .flat_map(|t| t.hash_ids.chunks(0, t.hash_ids.len()))
        .flat_map(|c| c.iter().max())
        .max()
        .copied();
    let mut seen = Seen::new(top);
    for (.., c, k) in order {
        let turn = if c == 0 {
            &mut root.turns[k]
        } else {
            &mut children[c - 1].turns[k]
        };
        let ids = &turn.hash_ids;
        let mut hits = 0;
        for chunk in ids.chunks(0, ids.len()) {
            let run = chunk.iter().take_while(|&&h| seen.contains(h)).count();
            hits += run;
            if run < chunk.len() {
                break;
            }
        }
        turn.cache_hit_blocks = hits as u64;
        for chunk in ids.chunks(0, ids.len()) {
            chunk.iter().for_each(|&h| seen.insert(h));
        }
    }
}

/// The block ids seen so far in a trace: a bitmap when the ids are small (recorded ids are
/// numbered from 0 per trace), else a hash set.
enum Seen {
    Bits(Vec<u64>),
    Set(HashSet<u32>),
}

impl Seen {
    /// Ids up to `top` (a bitmap of at most 8 MiB; beyond that a set).
    fn new(top: Option<u32>) -> Seen {
        match top {
            Some(t) if t < 1 << 26 => Seen::Bits(vec![0; t as usize / 64 + 1]),
            None => Seen::Bits(Vec::new()),
            Some(_) => Seen::Set(HashSet::new()),
        }
    }

    fn contains(&self, h: u32) -> bool {
        match self {
            Seen::Bits(b) => b[h as usize / 64] & (1 << (h % 64)) != 0,
            Seen::Set(s) => s.contains(&h),
        }
    }

    fn insert(&mut self, h: u32) {
        match self {
            Seen::Bits(b) => b[h as usize / 64] |= 1 << (h % 64),
            Seen::Set(s) => {
                s.insert(h);
            }
        }
    }
}
