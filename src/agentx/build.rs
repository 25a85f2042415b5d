//! Checked raw trace -> [`Trace`]: root and child conversations, the spawn/join topology,
//! delays, `max_tokens`, theoretical prefix-cache counts, peak context and time bounds (spec
//! §2.4–§2.5, §3.2).

use std::collections::HashSet;

use super::parse::{RawEntry, RawRequest, RawSubagent, RawTrace};
use super::{
    Branch, Conversation, DropReason, Dropped, InputKind, LoadOptions, Origin, Subagent, Trace,
    Turn,
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

/// Turns of one conversation from its placed requests.
fn turns(reqs: &[Placed<'_>], max_osl: Option<u64>) -> Vec<Turn> {
    let mut out: Vec<Turn> = Vec::with_capacity(reqs.len());
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
        let out_capped = max_osl.map_or(r.output, |m| r.output.min(m));
        out.push(Turn {
            timestamp_ms: t * 1000.0,
            delay_ms,
            api_time_ms: r.api_time.map(|a| a * 1000.0),
            input_tokens: r.input,
            output_tokens: r.output,
            max_tokens: out_capped.max(1),
            hash_ids: r.hash_ids.clone(),
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

/// Rebuilds one checked trace.
pub(super) fn trace(raw: RawTrace, origin: Origin, opts: &LoadOptions) -> Trace {
    let parents: Vec<Placed<'_>> = raw
        .requests
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match e {
            RawEntry::Request(r) => Some((r.t, r, i, None)),
            RawEntry::Subagent(_) => None,
        })
        .collect();
    let mut root = Conversation {
        session_id: raw.id.clone(),
        subagent: None,
        tool_tokens: raw.tool_tokens,
        system_tokens: raw.system_tokens,
        turns: turns(&parents, opts.synthesis_max_osl),
    };

    let mut children: Vec<Conversation> = Vec::new();
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
        let Some(spawn_turn) = parents.iter().rposition(|p| p.2 < i) else {
            dropped.push(dropped_as(DropReason::NoPrecedingTurn));
            continue;
        };
        if sa.requests.is_empty() {
            dropped.push(dropped_as(DropReason::NoRequests));
            continue;
        }
        let end = subagent_end(sa);
        // The join: the first later-listed root turn that starts once the subagent has ended.
        let join_turn = parents.iter().position(|p| p.2 > i && p.0 + EPS >= end);
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
        let b = &mut branches[branch];
        b.children.push(children.len());
        b.start_ms = b.start_ms.min(sa.t * 1000.0);
        let inner: Vec<Placed<'_>> = sa
            .requests
            .iter()
            .enumerate()
            .map(|(k, r)| (inner_t(sa, r), r, i, Some(k)))
            .collect();
        let child_turns = turns(&inner, None);
        children.push(Conversation {
            session_id: format!("{}::sa:{}", raw.id, sa.agent_id),
            subagent: Some(Subagent {
                agent_id: sa.agent_id.clone(),
                subagent_type: sa.subagent_type.clone(),
                spawn_ms: sa.t * 1000.0,
                end_ms: end * 1000.0,
                branch,
                first_turn_offset_ms: (child_turns[0].timestamp_ms - sa.t * 1000.0).max(0.0),
            }),
            tool_tokens: sa.tool_tokens,
            system_tokens: sa.system_tokens,
            turns: child_turns,
        });
    }
    for (b, branch) in branches.iter().enumerate() {
        root.turns[branch.spawn_turn].spawns.push(b);
        if let Some(j) = branch.join_turn {
            root.turns[j].joins.push(b);
        }
    }

    count_cache_hits(&mut root, &mut children);

    let all_turns = || {
        std::iter::once(&root)
            .chain(&children)
            .flat_map(|c| &c.turns)
    };
    let peak_context_tokens = all_turns()
        .map(|t| t.input_tokens + t.max_tokens)
        .max()
        .unwrap_or(0);
    let time_bounds_ms = all_turns()
        .map(|t| t.timestamp_ms)
        .fold(None, |acc: Option<(f64, f64)>, t| {
            Some(acc.map_or((t, t), |(lo, hi)| (lo.min(t), hi.max(t))))
        })
        .unwrap_or((0.0, 0.0));
    Trace {
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
    }
}

/// Theoretical prefix-cache hits: one seen-set per trace, requests taken in global order of
/// (start, list index, turn); a request's hits are the leading run of its blocks already seen.
fn count_cache_hits(root: &mut Conversation, children: &mut [Conversation]) {
    let mut order: Vec<(f64, usize, usize, usize, usize)> = Vec::new();
    for (c, conv) in std::iter::once(&*root).chain(children.iter()).enumerate() {
        for (k, t) in conv.turns.iter().enumerate() {
            order.push((t.timestamp_ms, t.source_outer_idx, k, c, k));
        }
    }
    order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut seen: HashSet<u64> = HashSet::new();
    for (.., c, k) in order {
        let turn = if c == 0 {
            &mut root.turns[k]
        } else {
            &mut children[c - 1].turns[k]
        };
        turn.cache_hit_blocks = turn
            .hash_ids
            .iter()
            .take_while(|h| seen.contains(h))
            .count() as u64;
        seen.extend(turn.hash_ids.iter().copied());
    }
}
