#!/usr/bin/env python3
"""Tests of scripts/agentx_compare.py on synthetic record sets (no AIPerf, no server).

    python3 scripts/test_agentx_compare.py        (run by tests/integration/agentx.rs)

One tree, laid out from its causes (the request whose return releases each one, and the wait
after it) as a scheduler would send it, cut where the run stops sending:

    t1 turn 2 (first turn at t*)  -> spawns t1::sa:a (2 turns)
    t1 turn 3
    t1 turn 4: joins t1::sa:a, whose turns ended before turn 3 returned: keeps its 2 s delay
               -> spawns t1::sa:b (3 turns)
    t1 turn 5: joins t1::sa:b, the parent waits at the gate: goes out as b's last turn returns
    t1 turn 6 ... 8

The reference is compared with a run that differs by timing jitter only (each response 25 %
slower, every wait off by up to 80 ms: it must pass), with one that sends the join turn 4 at
once as turn 3 returns (specperf before 96baadd: it must fail on that turn), and with one that
starts a subagent the reference never started (it must fail on that request).
"""
import json
import random
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

COMPARE = Path(__file__).resolve().parent / "agentx_compare.py"
R, A, B = "t1", "t1::sa:a", "t1::sa:b"

# (conversation, turn, cause, wait s, latency s); cause None: the phase start; ("join", c):
# the parent waits at the gate, it goes out as c returns (after its previous turn returned).
TREE = [
    (R, 2, None, 0.0, 1.0),
    (A, 0, (R, 2), 0.1, 0.5),
    (A, 1, (A, 0), 0.3, 0.5),
    (R, 3, (R, 2), 1.0, 1.0),
    (R, 4, (R, 3), 2.0, 1.0),
    (B, 0, (R, 4), 0.1, 1.0),
    (B, 1, (B, 0), 0.5, 1.0),
    (B, 2, (B, 1), 0.5, 1.0),
    (R, 5, ("join", (B, 2)), 0.0, 1.0),
    (R, 6, (R, 5), 1.0, 1.0),
    (R, 7, (R, 6), 1.0, 1.0),
    (R, 8, (R, 7), 1.0, 1.0),
]
STOP = 15.0  # no request is sent after this (the benchmark duration)


def layout(tree, slower=1.0, jitter=0.0, seed=0):
    """(conv, turn, start s, end s) of each request sent before STOP."""
    rng = random.Random(seed)
    end, out = {}, []
    for conv, turn, cause, wait, latency in tree:
        if cause is None:
            back = 0.0
        elif cause[0] == "join":
            if cause[1] not in end or (conv, turn - 1) not in end:
                continue
            back = max(end[cause[1]], end[(conv, turn - 1)])
        elif cause in end:
            back = end[cause]
        else:
            continue
        start = back + max(0.0, wait + rng.uniform(-jitter, jitter))
        if start > STOP:
            continue
        end[(conv, turn)] = start + latency * slower
        out.append((conv, turn, start, end[(conv, turn)]))
    return out


def write_run(d, sent, t0_ns, roots=(R,), idle=None):
    """profile_export.jsonl as both tools write it: a warmup primer per root, then the profiling
    records. `idle`: (cap, jumps, seconds skipped) of AIPerf's system idle cap, written where
    AIPerf writes them (its input_config and the summary line of logs/aiperf.log)."""
    d.mkdir()
    s = lambda x: t0_ns + int(x * 1e9)
    recs = [(r, 1, -1.0, -0.5, "warmup") for r in roots] + [(c, k, a, b, "profiling") for c, k, a, b in sent]
    if idle:
        cap, jumps, skipped = idle
        phases = [{"kind": "profiling", "system_idle_gap_cap_seconds": cap}]
        (d / "profile_export_aiperf.json").write_text(json.dumps({"input_config": {"phases": phases}}))
        (d / "logs").mkdir()
        (d / "logs" / "aiperf.log").write_text(
            "... - AgenticReplayTiming - INFO - Global system-idle cap summary: "
            f"limit={cap:g}s, jumps={jumps}, skipped={skipped:.3f}s\n")
    with open(d / "profile_export.jsonl", "w") as f:
        for conv, turn, start, end, phase in recs:
            root = conv.split("::")[0]
            meta = {"conversation_id": conv, "turn_index": turn, "benchmark_phase": phase,
                    "x_correlation_id": f"{conv}-id", "root_correlation_id": f"{root}-id",
                    "agent_depth": 0 if conv == root else 1,
                    "credit_issued_ns": s(start), "request_start_ns": s(start) + 1_000_000,
                    "request_end_ns": s(end)}
            osl = 1 if phase == "warmup" else 10 + turn
            metrics = {"input_sequence_length": {"value": 1000 + 100 * turn, "unit": "tokens"},
                       "output_sequence_length": {"value": osl, "unit": "tokens"}}
            f.write(json.dumps({"metadata": meta, "metrics": metrics}) + "\n")


def compare(reference, other, *flags, roots=(R,), idle=None):
    """Runs agentx_compare.py on the two layouts (the first as AIPerf's run): (exit code, its
    output)."""
    with tempfile.TemporaryDirectory() as tmp:
        write_run(Path(tmp) / "aiperf", reference, 1_000_000_000_000, roots, idle)
        write_run(Path(tmp) / "specperf", other, 7_000_000_000_000, roots)
        p = subprocess.run([sys.executable, str(COMPARE), f"{tmp}/aiperf", f"{tmp}/specperf", *flags],
                           capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr


class AgentxCompare(unittest.TestCase):
    def setUp(self):
        self.reference = layout(TREE)

    def test_the_layouts_have_what_the_cases_need(self):
        sent = {(c, k) for c, k, _, _ in self.reference}
        self.assertIn((R, 7), sent)
        self.assertNotIn((R, 8), sent, "the duration cuts the reference before turn 8")

    def test_timing_jitter_and_slower_responses_pass(self):
        other = layout(TREE, slower=1.25, jitter=0.08, seed=1)
        self.assertLess(len(other), len(self.reference), "the slower run sends fewer requests")
        code, out = compare(self.reference, other)
        self.assertEqual(code, 0, out)
        code, out = compare(other, self.reference)
        self.assertEqual(code, 0, out)

    def test_a_join_sent_at_once_though_its_children_had_finished_fails(self):
        early = [(c, k, cause, 0.0 if (c, k) == (R, 4) else w, lat) for c, k, cause, w, lat in TREE]
        other = layout(early)
        self.assertIn((R, 8, 14.1, 15.1), [(c, k, round(a, 3), round(b, 3)) for c, k, a, b in other],
                      "turn 8 is sent where the reference sent none")
        code, out = compare(self.reference, other)
        self.assertEqual(code, 1, out)
        self.assertIn("t1 turn 4: sent 2.000 s after t1 turn 3 returned by aiperf", out)
        self.assertIn("0.000 s after it by specperf", out)
        # The allowance for AIPerf's idle-cap jumps only ever excuses AIPerf being early.
        code, out = compare(self.reference, other, "--allow-aiperf-idle-jumps")
        self.assertEqual(code, 1, out)

    def test_a_request_only_one_run_sent_inside_the_window_fails(self):
        extra = TREE + [("t1::sa:x", 0, (R, 3), 0.2, 0.5)]
        code, out = compare(self.reference, layout(extra))
        self.assertEqual(code, 1, out)
        self.assertIn("t1::sa:x turn 0: sent by specperf only, at offset 3.200 s", out)
        code, out = compare(layout(extra), self.reference)
        self.assertEqual(code, 1, out)
        self.assertIn("t1::sa:x turn 0: sent by aiperf only", out)

    def test_a_far_turn_aiperf_pulled_in_after_its_run_went_idle_is_excused_only_so(self):
        # Nothing is in flight from t1 turn 3's return (3.0 s) to turn 4's send (5.0 s). AIPerf
        # 0.13's idle cap (3 s) then pulls every pending timer in, the earliest to 6.0 s: t2's
        # first turn at t*, due 40 s after the phase start in the trace, goes out at 6.5 s while
        # t1::sa:b's first turn is in flight. specperf keeps it at 40 s, past the window.
        sent = lambda at: sorted(self.reference + [("t2", 1, at, at + 0.5)], key=lambda r: r[2])
        pulled = sent(6.5)
        self.assertTrue(any(a < 6.5 < b for c, k, a, b in self.reference), "sent with one in flight")
        roots = (R, "t2")
        flag = "--allow-aiperf-idle-jumps"
        code, out = compare(pulled, self.reference, roots=roots, idle=(3, 1, 34.0))
        self.assertEqual(code, 1, out)
        self.assertIn("t2 turn 1: sent by aiperf only, at offset 6.500 s", out)
        code, out = compare(pulled, self.reference, flag, roots=roots, idle=(3, 1, 34.0))
        self.assertEqual(code, 0, out)
        self.assertIn("t2 turn 1: sent by aiperf only", json.loads(out[:out.rindex("}") + 1])["aiperf_idle_jumps"][0])
        # Not excused: AIPerf logged no jump; it skipped less than the send is early by (at least
        # specperf's last send, 14.1 s, less 6.5 s); or the send came sooner than the cap after
        # the first idle moment (1.0 s: t1 turn 2 returned, t1::sa:a not yet sent).
        for layout_, idle in ((pulled, (3, 0, 0.0)), (pulled, (3, 1, 2.0)), (sent(3.2), (3, 1, 34.0))):
            code, out = compare(layout_, self.reference, flag, roots=roots, idle=idle)
            self.assertEqual(code, 1, f"{idle}: {out}")
            self.assertIn("t2 turn 1: sent by aiperf only", out)
        # And never the other way round: specperf sending it early fails whatever AIPerf logged.
        code, out = compare(self.reference, pulled, flag, roots=roots, idle=(3, 1, 34.0))
        self.assertEqual(code, 1, out)
        self.assertIn("t2 turn 1: sent by specperf only", out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
