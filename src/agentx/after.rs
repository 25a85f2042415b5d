//! Cross-stream replay dependencies (spec §2.5; AIPerf's `timing/replay_dependencies.py`):
//! when one recorded agent is split into several streams, their recorded order must survive
//! the replay. Within a replay scope (the root with its flat chains; each subagent entry's
//! chains), a request waits, on every other stream, for the latest request whose recorded
//! interval `[t, t + api_time]` had ended by its own recorded start. Overlapping requests add
//! no edge, and a candidate that had ended before another candidate started is left out (the
//! later one stands for it). The order inside a stream is the stream's own business.

use super::{After, ConvKind, ConvRef, Conversation};

/// One recorded request: stream (conversation), turn, start and end (ms).
#[derive(Clone, Copy)]
struct Interval {
    conv: usize,
    turn: usize,
    start: f64,
    end: f64,
}

/// Fills `Turn::after` of every turn of `root` and `children` (conversation 0 is the root,
/// `c + 1` is `children[c]`).
pub(super) fn fill(root: &mut Conversation, children: &mut [Conversation]) {
    // Scope: None for the root's family, Some(entry index) for a subagent's chains.
    let scope = |c: &Conversation| match c.kind {
        ConvKind::Root | ConvKind::Flat(_) => None,
        ConvKind::Subagent | ConvKind::SubagentChain(_) => {
            c.turns.first().map(|t| t.source_outer_idx)
        }
    };
    let convs: Vec<&Conversation> = std::iter::once(&*root).chain(children.iter()).collect();
    let mut scopes: Vec<(Option<usize>, Vec<usize>)> = Vec::new();
    for (i, c) in convs.iter().enumerate() {
        let s = scope(c);
        match scopes.iter_mut().find(|x| x.0 == s) {
            Some(x) => x.1.push(i),
            None => scopes.push((s, vec![i])),
        }
    }
    let key = |iv: &Interval| (convs[iv.conv].session_id.as_str(), iv.turn);
    let order = |a: &Interval, b: &Interval| {
        a.end
            .total_cmp(&b.end)
            .then(a.start.total_cmp(&b.start))
            .then(key(a).cmp(&key(b)))
    };
    let mut found: Vec<(usize, usize, Vec<After>)> = Vec::new();
    for (_, members) in scopes.iter().filter(|s| s.1.len() > 1) {
        // Each stream's requests sorted by (end, start, key): the latest request a target can
        // wait for is the last one ending by its start that also started before it.
        let streams: Vec<Vec<Interval>> = members
            .iter()
            .map(|&c| {
                let mut v: Vec<Interval> = convs[c]
                    .turns
                    .iter()
                    .enumerate()
                    .map(|(k, t)| Interval {
                        conv: c,
                        turn: k,
                        start: t.timestamp_ms,
                        // No recorded server time: a zero-width interval.
                        end: t.timestamp_ms + t.api_time_ms.unwrap_or(0.0).max(0.0),
                    })
                    .collect();
                v.sort_by(|a, b| order(a, b));
                v
            })
            .collect();
        for target in streams.iter().flatten() {
            let mut frontier: Vec<Interval> = Vec::new();
            // (An empty stream, a subagent-only trace's root, has nothing to wait for.)
            for stream in streams
                .iter()
                .filter(|s| s.first().is_some_and(|f| f.conv != target.conv))
            {
                let ended = stream.partition_point(|iv| iv.end <= target.start);
                // Only a zero-width request at exactly the target's start is skipped here.
                let latest = stream[..ended]
                    .iter()
                    .rev()
                    .find(|iv| iv.start < target.start);
                frontier.extend(latest);
            }
            // A candidate that had ended before another candidate started is implied by it.
            // Both tests only get easier as the other's start grows, so the latest start
            // decides.
            let last_start = frontier
                .iter()
                .map(|l| l.start)
                .fold(f64::NEG_INFINITY, f64::max);
            let mut preds: Vec<Interval> = frontier
                .into_iter()
                .filter(|c| !(c.start < last_start && c.end <= last_start))
                .collect();
            preds.sort_by(|a, b| key(a).cmp(&key(b)));
            if !preds.is_empty() {
                let after = preds
                    .iter()
                    .map(|p| After {
                        conv: if p.conv == 0 {
                            ConvRef::Root
                        } else {
                            ConvRef::Child(p.conv - 1)
                        },
                        turn: p.turn,
                    })
                    .collect();
                found.push((target.conv, target.turn, after));
            }
        }
    }
    for (c, k, after) in found {
        let conv = if c == 0 {
            &mut *root
        } else {
            &mut children[c - 1]
        };
        conv.turns[k].after = after;
    }
}
