#!/usr/bin/env python3
"""Prints the AIPerf reference table of src/agentx/prompt/tests.rs (`AIPERF_SEGMENTS`).

Runs AIPerf 0.13.0's own AgentX reconstructor (`ConversationReconstructor` and
`compute_asst_block_caps` from `aiperf.dataset.loader.weka_synth_buf`) over the fixture traces
with blocks stood in by their hash ids and tails by their seeds, and prints, per session and
turn, `reset_context` and the segments (role, hash ids, tail tokens, tail turn) as a Rust
literal. Needs AIPerf 0.13.0 installed (its venv's python):

    ~/.cache/specperf/aiperf-0.13.0-py3.11/bin/python scripts/agentx-aiperf-segments.py
"""
import json
import sys
from pathlib import Path

from aiperf.dataset.loader.weka_synth_buf import ConversationReconstructor, compute_asst_block_caps

TRACES = Path(__file__).resolve().parent.parent / "tests/fixtures/agentx/traces.jsonl"
ROLE = {"system": "S", "user": "U", "assistant": "A"}


def conversations(t):
    """Root, then one child per subagent entry that has a preceding parent request."""
    yield t["id"], [r for r in t["requests"] if r["type"] != "subagent"], t.get("tool_tokens", 0), t.get("system_tokens", 0)
    seen_parent = False
    for r in t["requests"]:
        if r["type"] != "subagent":
            seen_parent = True
        elif seen_parent:
            yield f"{t['id']}::sa:{r['agent_id']}", r["requests"], r.get("tool_tokens", 0), r.get("system_tokens", 0)


def main():
    out = sys.stdout
    out.write("#[rustfmt::skip]\nconst AIPERF_SEGMENTS: &[(&str, &[RecordedTurn])] = &[\n")
    for line in TRACES.read_text().splitlines():
        t = json.loads(line)
        bs = t["block_size"]
        for sid, reqs, tool, system in conversations(t):
            rec = ConversationReconstructor(
                block_size=bs,
                decode_block_tokens=lambda hs: [("b", h) for h in hs for _ in range(bs)],
                sample_partial_tail_tokens=lambda n, seed: [("t", seed)] * n,
                decode_tokens_to_text=lambda toks: "",
            )
            caps = compute_asst_block_caps([(r["hash_ids"], r["in"]) for r in reqs], bs)
            out.write(f'    ("{sid}", &[\n')
            for k, r in enumerate(reqs):
                seed = f"{sid}:turn_{k}:partial_tail"
                if k == 0:
                    rec.init_turn_0(r["hash_ids"], r["in"], tool, system, seed)
                else:
                    p = reqs[k - 1]
                    rec.advance_turn(p["hash_ids"], p["in"], p["out"], r["hash_ids"], r["in"], seed,
                                     max_asst_blocks=caps[k])
                delta = rec.turn_delta()
                parts = []
                for s in rec._segments:
                    blocks = [x[1] for x in s.tokens[::bs] if x[0] == "b"]
                    tails = [x for x in s.tokens if x[0] == "t"]
                    tail = "None"
                    if tails:
                        turn = int(tails[0][1].split(":turn_")[1].split(":")[0])
                        tail = f"Some(({len(tails)}, {turn}))"
                    parts.append(f"({ROLE[s.role]}, &[{', '.join(map(str, blocks))}], {tail})")
                out.write(f"        ({'true' if delta.reset_context else 'false'}, &[{', '.join(parts)}]),\n")
            out.write("    ]),\n")
    out.write("];\n")


if __name__ == "__main__":
    main()
