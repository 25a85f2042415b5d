#!/usr/bin/env python3
"""Compares an AgentX replay by specperf with one by AIPerf 0.13 on the same traces and server.

    scripts/agentx_compare.py AIPERF_ARTIFACT_DIR SPECPERF_ARTIFACT_DIR \
        [--isl-tolerance 0.02] [--wait-tolerance 0.5] [--allow-aiperf-idle-jumps]

Both runs must use the same traces, `--concurrency`, and equal trajectory start ratios
(`--trajectory-start-min-ratio R --trajectory-start-max-ratio R`): t* is then the same point of
each trace in both tools, whatever their random generators, and so are the snapshots. The script
prints every failure (conversation, turn, offsets) and exits 1 if there is any.

Trees are matched by key (base trace, n): n = 0 for the t*-sampled tree of a trace (the one its
warmup primers belong to), 1, 2, ... for its recycled trees in start order.

**When each request was sent.** Server latency is not the scheduler's and drifts by seconds
between two runs on a busy machine, so a send is not compared by its offset from the phase
start but by its *wait*: the time from the return of the request that released it (its cause)
to its send. A send is the scheduler's decision (`credit_issued_ns`; AIPerf's worker can take
another half second to put it on the wire on two busy cores), a return is `request_end_ns`.
The cause, found in the run that sent the request:

* the previous turn of the same conversation;
* for the first turn of a t*-sampled tree's root, and for a snapshot child's first turn
  (turn > 0), the phase start (the run's first profiling send);
* for a subagent's turn 0, the root turn of its tree that returned last before it (the spawn);
* for turn 0 of a recycled tree, the last request of the tree whose drain freed the lane.

A root turn sent within the tolerance after a child conversation's last request returned went
out on that return (a parent blocked at its join): its wait from the previous turn is then the
children's run time, latency and all, so two such sends agree whatever that wait.

What must agree (each a named check):

* warmup: the same (conversation, turn) primers, each with max_tokens 1;
* per conversation, the same turn sequence up to where the shorter run stopped;
* waits: every request both runs sent has the same wait from the same cause, within
  `--wait-tolerance` seconds (plus 2 % of the wait);
* sent by one run only: a request one run sent must be in the other unless the other could not
  send it before it stopped sending: its cause (or the child return it went out on) never
  returned there, or returned so late that the same wait ends after the other run's last
  profiling send (less the tolerance). With the waits, this is what sees a request sent where
  the other tool sent none: the first one fails, those that follow from it are explained by it;
* the same output lengths (max_tokens under ignore_eos); input lengths within
  `--isl-tolerance` (prompts are cut from different corpora: structurally equal, not
  byte-equal);
* spawn order, checked in each run: a child's first turn starts after its spawning turn ended.

One difference is known and kept on purpose (docs/agentx.md): when the whole system goes idle at
a return whose follow-up turn is not yet scheduled, AIPerf 0.13 pulls its far timers in; specperf
does not. `--allow-aiperf-idle-jumps` lists such sends as `aiperf_idle_jumps` instead of failing:
only where AIPerf's log says its profiling phase jumped, only sends AIPerf made earlier than
specperf (or alone) by no more than the seconds it skipped, and at least its cap after a return
that left its run with nothing in flight (the jump moves every pending timer by the same amount,
the earliest to the cap after that return; the returning turn's own follow-ups may be sent in
between, so the pulled send can go out with others in flight). A send specperf makes early always
fails. On a failure, both runs' requests are listed on stderr in send order.
"""
import argparse
import bisect
import functools
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

PHASE_START = "phase start"


def rows(d):
    """The records of one run (errored ones too: they were sent and they released the next turn)."""
    out = []
    for line in (Path(d) / "profile_export.jsonl").open():
        r = json.loads(line)
        m = r["metadata"]
        mt = r.get("metrics", {})
        val = lambda k: (mt.get(k) or {}).get("value") if isinstance(mt.get(k), dict) else mt.get(k)
        out.append({
            "phase": m.get("benchmark_phase", "profiling"),
            "conv": m["conversation_id"], "turn": m["turn_index"],
            "root": m.get("root_correlation_id"),
            "start": m.get("credit_issued_ns") or m["request_start_ns"],
            "end": m.get("request_end_ns") or m["request_start_ns"],
            "isl": val("input_sequence_length"), "osl": val("output_sequence_length"),
            "depth": m.get("agent_depth", 0), "ok": not r.get("error"),
        })
    return out


def base(conv):
    return conv.split("::")[0]


def trees_by_key(rs):
    """Profiling records per tree, keyed (base trace, n): n = 0 for the t*-sampled tree of that
    trace (the one its warmup primers belong to), 1, 2, ... for recycled trees in start order."""
    warm_roots = {r["root"] for r in rs if r["phase"] == "warmup"}
    trees = defaultdict(list)
    for r in rs:
        if r["phase"] == "profiling":
            trees[r["root"]].append(r)
    per_base = defaultdict(list)
    for root, recs in trees.items():
        per_base[base(recs[0]["conv"])].append((root not in warm_roots, min(x["start"] for x in recs), recs))
    out = {}
    for b, items in per_base.items():
        items.sort(key=lambda x: (x[0], x[1]))
        n = 0 if not items[0][0] else 1
        for _, _, recs in items:
            out[(b, n)] = recs
            n += 1
    return out


class Run:
    """One run's profiling requests by id (tree key, conversation, turn), each with its cause
    (the request whose return released it, or the phase start) and, for a root turn that went
    out as a child conversation's last request returned, that request (`join`)."""

    def __init__(self, name, rs, tol):
        self.name = name
        self.trees = trees_by_key(rs)
        prof = [r for recs in self.trees.values() for r in recs]
        self.t0 = min(r["start"] for r in prof)
        self.last_send = max(r["start"] for r in prof)
        self.req = {(key, r["conv"], r["turn"]): r for key, recs in self.trees.items() for r in recs}
        # The last request of each tree: where its lane was freed, if the tree drained.
        finals = ((key, max(recs, key=lambda r: r["end"])) for key, recs in self.trees.items())
        drains = sorted((r["end"], (key, r["conv"], r["turn"])) for key, r in finals)
        self.cause, self.join = {}, {}
        for key, recs in self.trees.items():
            roots = [r for r in recs if r["depth"] == 0]
            last_of = {}  # each child conversation's last request
            for r in recs:
                if r["depth"] > 0 and (r["conv"] not in last_of or r["turn"] > last_of[r["conv"]]["turn"]):
                    last_of[r["conv"]] = r
            prev = {}
            for r in sorted(recs, key=lambda r: r["start"]):
                rid = (key, r["conv"], r["turn"])
                self.cause[rid] = self._cause(key, r, prev.get(r["conv"]), roots, drains)
                prev[r["conv"]] = r
                if r["depth"] == 0:
                    done = [c for c in last_of.values() if 0 <= r["start"] - c["end"] <= tol * 1e9]
                    if done:
                        c = max(done, key=lambda c: c["end"])
                        self.join[rid] = (key, c["conv"], c["turn"])

    @staticmethod
    def _cause(key, r, prev, roots, drains):
        if prev:  # the previous turn of the same conversation
            return (key, prev["conv"], prev["turn"])
        sampled = key[1] == 0
        if r["depth"] == 0:
            if sampled:  # the root's first turn at t*
                return PHASE_START
            # turn 0 of a recycled tree: the last request of the tree that drained just before
            before = [rid for end, rid in drains if end <= r["start"] and rid[0] != key]
            return before[-1] if before else None
        if r["turn"] == 0:  # a spawned subagent: the root turn that returned last before it
            done = [p for p in roots if p["end"] <= r["start"]]
            if done:
                p = max(done, key=lambda p: p["end"])
                return (key, p["conv"], p["turn"])
        return PHASE_START if sampled else None  # a child live in the t* snapshot

    def returned(self, cause):
        """When `cause` returned in this run (None: it never did)."""
        if cause == PHASE_START:
            return self.t0
        r = self.req.get(cause)
        return r["end"] if r else None

    def wait(self, rid, cause):
        """Seconds from `cause`'s return to the send of `rid` (None: no such return)."""
        back = self.returned(cause)
        return None if back is None else (self.req[rid]["start"] - back) / 1e9

    def offset(self, rid):
        return (self.req[rid]["start"] - self.t0) / 1e9

    @functools.cached_property
    def idle_moments(self):
        """The returns after which nothing of this run was in flight: where AIPerf 0.13's system
        idle cap starts counting. In flight at m: sent before m, returned after it (a request of
        no duration never is)."""
        recs = [r for recs in self.trees.values() for r in recs if r["start"] < r["end"]]
        starts, ends = sorted(r["start"] for r in recs), sorted(r["end"] for r in recs)
        moments = {r["end"] for recs in self.trees.values() for r in recs}
        return sorted(m for m in moments
                      if bisect.bisect_left(starts, m) - bisect.bisect_right(ends, m) == 0)

    def sent_after_idle(self, rid, cap, tol):
        """Sent at least `cap` s (less `tol`) after a moment this run had nothing in flight: a
        timer AIPerf 0.13's system idle cap pulled in. The cap moves every pending timer by the
        same amount so that the earliest fires `cap` s after the idle moment began, whatever is
        sent in between (the returning turn's own follow-up often is): the pulled send itself may
        well go out with other requests in flight."""
        t = self.req[rid]["start"]
        return bool(self.idle_moments) and self.idle_moments[0] + (cap - tol) * 1e9 <= t


def label(rid):
    (b, n), conv, turn = rid
    return f"{conv} turn {turn}" + ("" if n == 0 else f" (recycled tree {n})")


def cause_label(cause):
    return cause if cause in (PHASE_START, None) else f"{cause[1]} turn {cause[2]}"


def compare_sends(A, S, tol, jumps=None):
    """Each request both runs sent: the same wait from the same cause. Each request one run sent:
    the other sent it too, unless it could not have before it stopped sending. With `jumps`
    (AIPerf's system idle cap and the seconds its jumps skipped, `--allow-aiperf-idle-jumps`), a
    send AIPerf made earlier than specperf, by no more than it skipped, at least the cap after
    its run was idle, is a note, not a failure. Returns (waits compared, failures, notes)."""
    close = lambda a, b: abs(a - b) <= tol + 0.02 * max(a, b)

    def jumped(rid, early):
        """`early`: seconds AIPerf sent `rid` before specperf did (or at least, for a request
        specperf never sent)."""
        if jumps is None:
            return False
        cap, skipped = jumps
        return early <= skipped + tol and A.sent_after_idle(rid, cap, tol)
    fails, notes = [], []
    waits = 0
    order = lambda rid: (rid[0], A.req.get(rid, S.req.get(rid))["start"])
    for rid in sorted(set(A.req) | set(S.req), key=order):
        if rid in A.req and rid in S.req:
            # AIPerf's cause in both runs; specperf's own where AIPerf's was never sent there
            # (a recycled tree whose lane another tree freed).
            ca = A.cause[rid]
            cs = ca if ca == PHASE_START or ca in S.req else S.cause[rid]
            wa, ws = A.wait(rid, ca), S.wait(rid, cs)
            if wa is None or ws is None:
                continue  # no cause found (counted: not in waits_compared)
            waits += 1
            if close(wa, ws) or (rid in A.join and rid in S.join):
                continue
            msg = (f"{label(rid)}: sent {wa:.3f} s after {cause_label(ca)} returned by aiperf "
                   f"(offset {A.offset(rid):.3f} s), {ws:.3f} s after "
                   f"{'it' if cs == ca else cause_label(cs)} by specperf (offset {S.offset(rid):.3f} s)")
            (notes if wa < ws and jumped(rid, ws - wa) else fails).append(msg)
            continue
        x, y = (A, S) if rid in A.req else (S, A)
        cause = x.join.get(rid, x.cause[rid])
        w, back = x.wait(rid, cause), y.returned(cause)
        if w is None or back is None:
            continue  # its cause never returned in the other run: that one is checked itself
        due = back + w * 1e9
        if due < y.last_send - tol * 1e9:
            msg = (f"{label(rid)}: sent by {x.name} only, at offset {x.offset(rid):.3f} s ({w:.3f} s after "
                   f"{cause_label(cause)} returned); in {y.name} that returned at offset "
                   f"{(back - y.t0) / 1e9:.3f} s, so it was due at {(due - y.t0) / 1e9:.3f} s, before "
                   f"{y.name}'s last send at {(y.last_send - y.t0) / 1e9:.3f} s, and none was sent")
            (notes if x is A and jumped(rid, (y.last_send - due) / 1e9 - tol) else fails).append(msg)
    return waits, fails, notes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("aiperf")
    ap.add_argument("specperf")
    ap.add_argument("--isl-tolerance", type=float, default=0.02)
    ap.add_argument("--wait-tolerance", type=float, default=0.5,
                    help="seconds two waits may differ by (plus 2%% of the wait)")
    ap.add_argument("--allow-aiperf-idle-jumps", action="store_true",
                    help="list as notes, not failures, the sends AIPerf made earlier than specperf "
                         "(or alone) while nothing of its run was in flight, within its system idle "
                         "cap of its last return: AIPerf 0.13 pulls far timers in there when a "
                         "returning turn's follow-up is not yet scheduled; specperf does not "
                         "(docs/agentx.md: different on purpose)")
    a = ap.parse_args()
    ra, rs = rows(a.aiperf), rows(a.specperf)
    fails = []

    wa = sorted((r["conv"], r["turn"]) for r in ra if r["phase"] == "warmup")
    ws = sorted((r["conv"], r["turn"]) for r in rs if r["phase"] == "warmup")
    if wa != ws:
        fails.append(f"warmup primers differ: aiperf {wa} specperf {ws}")
    for name, recs in (("aiperf", ra), ("specperf", rs)):
        bad = [(r["conv"], r["turn"], r["osl"]) for r in recs
               if r["phase"] == "warmup" and r["ok"] and r["osl"] not in (None, 1)]
        if bad:
            fails.append(f"{name}: warmup requests with output != 1: {bad}")

    A, S = Run("aiperf", ra, a.wait_tolerance), Run("specperf", rs, a.wait_tolerance)
    compared = 0
    for key in sorted(set(A.trees) & set(S.trees)):
        qa, qs = sequences(A.trees[key]), sequences(S.trees[key])
        for conv in sorted(set(qa) & set(qs)):
            ta = [r["turn"] for r in qa[conv]]
            ts = [r["turn"] for r in qs[conv]]
            n = min(len(ta), len(ts))
            if ta[:n] != ts[:n]:
                fails.append(f"{conv}: turn order aiperf {ta} specperf {ts}")
                continue
            for x, y in zip(qa[conv][:n], qs[conv][:n]):
                compared += 1
                if x["ok"] and y["ok"] and x["osl"] != y["osl"]:
                    fails.append(f"{conv} turn {x['turn']}: output length aiperf {x['osl']} specperf {y['osl']}")
                if x["isl"] and y["isl"] and abs(x["isl"] - y["isl"]) > a.isl_tolerance * x["isl"]:
                    fails.append(f"{conv} turn {x['turn']}: input length aiperf {x['isl']} specperf {y['isl']}")
    if compared == 0:
        fails.append("no profiling request could be compared")
    jumps = idle_jumps(a.aiperf) if a.allow_aiperf_idle_jumps else None
    waits, send_fails, notes = compare_sends(A, S, a.wait_tolerance, jumps)
    fails += send_fails

    for name, recs in (("aiperf", ra), ("specperf", rs)):
        fails += order_checks(name, recs)

    print(json.dumps({"aiperf_records": len(ra), "specperf_records": len(rs), "compared": compared,
                      "waits_compared": waits, "only_aiperf": len(set(A.req) - set(S.req)),
                      "only_specperf": len(set(S.req) - set(A.req)), "aiperf_idle_jumps": notes,
                      "failures": fails}, indent=2))
    if fails:  # what a failure in CI is read from: the CI's directories are gone afterwards
        for name, recs, run in (("aiperf", ra, A), ("specperf", rs, S)):
            print(timeline(name, recs, run.t0), file=sys.stderr)
    return 1 if fails else 0


def timeline(name, recs, t0):
    """Every request of one run as `start end phase conversation turn`, in seconds from the
    phase start, in send order."""
    lines = [f"{name} (s from its phase start: sent, returned):"]
    for r in sorted(recs, key=lambda r: r["start"]):
        lines.append(f"  {(r['start'] - t0) / 1e9:8.3f} {(r['end'] - t0) / 1e9:8.3f} {r['phase']:9} "
                     f"{r['conv']} turn {r['turn']}{'' if r['ok'] else ' (error)'}")
    return "\n".join(lines)


def idle_jumps(d):
    """(system idle cap, seconds its jumps skipped) of AIPerf's profiling phase, or None where it
    made no jump. The cap is the phase's in input_config (the scenario's 10 s); the seconds are
    the last "Global system-idle cap summary" line of logs/aiperf.log (each phase logs one as it
    ends; profiling is the last). Without that log no bound is known: any amount is admitted."""
    try:
        phases = json.loads((Path(d) / "profile_export_aiperf.json").read_text())["input_config"]["phases"]
        cap = next(p["system_idle_gap_cap_seconds"] for p in phases
                   if p.get("kind") == "profiling" and p.get("system_idle_gap_cap_seconds"))
    except (OSError, KeyError, StopIteration, ValueError):
        cap = 10.0
    try:
        lines = (Path(d) / "logs" / "aiperf.log").read_text(errors="replace").splitlines()
    except OSError:
        return cap, float("inf")
    summaries = [re.search(r"system-idle cap summary:.*jumps=(\d+), skipped=([0-9.]+)s", x) for x in lines]
    summaries = [m for m in summaries if m]
    if not summaries:
        return cap, float("inf")
    jumps, skipped = int(summaries[-1].group(1)), float(summaries[-1].group(2))
    return (cap, skipped) if jumps > 0 else None


def sequences(recs):
    seq = defaultdict(list)
    for r in sorted(recs, key=lambda r: r["start"]):
        seq[r["conv"]].append(r)
    return seq


def order_checks(name, rs):
    """Within each tree: a child's first turn starts after the root turn before it ended."""
    fails = []
    trees = defaultdict(list)
    for r in rs:
        if r["phase"] == "profiling":
            trees[r["root"]].append(r)
    for root, recs in trees.items():
        children = defaultdict(list)
        roots = []
        for r in recs:
            (children[r["conv"]] if r["depth"] > 0 else roots).append(r)
        for conv, cr in children.items():
            first = min(cr, key=lambda r: r["start"])
            # The spawning root turn (if replayed in this tree) ended before the child's first turn.
            before = [r for r in roots if r["start"] < first["start"]]
            if before and max(before, key=lambda r: r["start"])["end"] > first["start"]:
                fails.append(f"{name}: {conv} turn {first['turn']} started before its spawning turn ended")
    return fails


if __name__ == "__main__":
    sys.exit(main())
