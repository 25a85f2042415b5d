#!/usr/bin/env python3
"""Writes a synthetic AgentX (Weka-format) trace set shaped like InferenceX's default corpus.

Invented numbers only: no real session, prompt or timing is used. The default shape follows the
sizes AIPerf states for `semianalysis_cc_traces_weka_062126` (393 traces, ~56.8k main turns,
~1.7k subagent groups, ~42k inner requests, ~99k requests, block size 64): coding-agent
sessions whose context grows turn by turn (new tool results appended, hash ids extending the
previous turn's), compacts when it passes a threshold (a pull-back to a short prefix), and
spawns subagents that mostly join a later parent turn and sometimes run in the background.

    scripts/gen-agentx-traces.py --out target/agentx-bench/traces.jsonl            # full size
    scripts/gen-agentx-traces.py --out /tmp/t.jsonl --traces 20 --scale 0.1       # small

Same arguments, same file (seeded).
"""
import argparse
import json
import random

BS = 64


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="traces.jsonl to write")
    ap.add_argument("--traces", type=int, default=393)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies turns per trace")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--max-context", type=int, default=200_000,
                    help="context (tokens) at which a session compacts")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    n_req = n_main = n_groups = n_inner = 0
    with open(a.out, "w") as f:
        for i in range(a.traces):
            tr, counts = trace(rng, i, a.scale, a.max_context)
            n_main += counts[0]; n_groups += counts[1]; n_inner += counts[2]
            f.write(json.dumps(tr, separators=(",", ":")))
            f.write("\n")
    n_req = n_main + n_inner
    print(f"gen-agentx-traces: {a.traces} traces, {n_main} main turns, {n_groups} subagent groups, "
          f"{n_inner} inner requests, {n_req} requests -> {a.out}")


def req(t, model, inn, out, hids, api, think, stop, itype):
    return {"t": round(t, 3), "type": "s", "model": model, "in": inn, "out": out,
            "hash_ids": hids, "input_types": [itype], "output_types": ["text"], "stop": stop,
            "api_time": round(api, 3), "think_time": round(think, 3), "ttft": round(min(api, 0.2 + inn / 40000), 3)}


def grow(rng, hids, inn, next_id, lo, hi):
    """Appends new content: returns (hash ids, in, next id)."""
    add = rng.randint(lo, hi)
    inn2 = inn + add
    full = inn2 // BS
    new = list(hids[: min(len(hids), inn // BS)])
    while len(new) < full:
        new.append(next_id)
        next_id += 1
    return new, inn2, next_id


def trace(rng, i, scale, max_ctx):
    tid = f"synth-{i:04d}"
    opus, haiku = "synthetic-large", "synthetic-small"
    system = rng.randint(8_000, 20_000)
    turns = max(4, int(rng.gauss(145, 60) * scale))
    groups = max(0, round(rng.gauss(4.3, 3)))
    spawn_at = sorted(rng.sample(range(1, turns - 1), min(groups, turns - 2))) if turns > 2 else []
    # Turn 0: the declared tools + system prefix, then the first user message.
    inn = system + rng.randint(200, 2_000)
    hids = list(range(inn // BS)); next_id = len(hids)
    t = 0.0
    reqs = []
    counts = [0, 0, 0]
    for k in range(turns):
        if k > 0:
            if inn > max_ctx:  # compaction: keep the system prefix and a summary
                keep = -(-system // BS)
                hids = hids[:keep]
                inn = keep * BS
            hids, inn, next_id = grow(rng, hids, inn, next_id, 200, 3_000)
        out = max(0, int(rng.expovariate(1 / 400)))
        api = 1.0 + out / 60 + inn / 50_000
        think = rng.expovariate(1 / 3.0) if rng.random() > 0.02 else rng.uniform(60, 600)
        stop = "tool_use" if rng.random() < 0.85 else "end_turn"
        reqs.append(req(t, opus, inn, out, list(hids), api, think if k else 0.0, stop,
                        "tool_result" if k and rng.random() < 0.8 else "text"))
        counts[0] += 1
        if k in spawn_at:
            sa, next_id, n_in, end, background = subagent(rng, tid, k, t + api + 0.05, next_id, haiku, scale)
            reqs.append(sa)
            counts[1] += 1; counts[2] += n_in
            if not background:  # the parent waits for the Task result: its next turn joins
                t = max(t + api + think, end + 0.5 + think)
                continue
        t += api + think
    tr = {"id": tid, "models": [opus, haiku], "block_size": BS, "hash_id_scope": "local",
          "tool_tokens": system // 2, "system_tokens": system - system // 2, "requests": reqs, "totals": None}
    return tr, counts


def subagent(rng, tid, k, t0, next_id, model, scale):
    n = max(1, int(rng.gauss(24.7, 12) * max(scale, 0.2)))
    system = rng.randint(3_000, 8_000)
    inn = system + rng.randint(200, 1_500)
    hids = list(range(next_id, next_id + inn // BS)); next_id += len(hids)
    t = t0 + 0.1
    inner = []
    for j in range(n):
        if j:
            hids, inn, next_id = grow(rng, hids, inn, next_id, 300, 4_000)
        out = max(1, int(rng.expovariate(1 / 250)))
        api = 0.8 + out / 90 + inn / 60_000
        think = rng.expovariate(1 / 1.0)
        inner.append(req(t, model, inn, out, list(hids), api, think if j else 0.0, "tool_use", "tool_result" if j else "text"))
        t += api + think
    background = rng.random() < 0.15
    dur = (t - t0) * (3.0 if background else 1.0)
    sa = {"t": round(t0, 3), "type": "subagent", "agent_id": f"explore_{k:03d}", "subagent_type": "Explore",
          "duration_ms": int(dur * 1000), "total_tokens": None, "tool_use_count": None, "status": "completed",
          "requests": inner, "models": [model], "tool_tokens": system // 2, "system_tokens": system - system // 2}
    return sa, next_id, n, t0 + dur, background


if __name__ == "__main__":
    main()
