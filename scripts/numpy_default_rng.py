"""numpy's own default_rng draws, and AIPerf 0.13's t* seeds, for src/agentx/snapshot.rs's test.

AIPerf draws each AgentX lane's start instant as
`np.random.default_rng(_seed_for_trace_lane(random_seed, trace_id, lane)).uniform(lo, hi)`
(`aiperf/timing/trajectory_source.py`). This prints, with numpy and AIPerf's own seed function:

  RAW seed n r1 .. rn             default_rng(seed).bit_generator.random_raw(n)
  RND seed bits                   default_rng(seed).random(), the f64's bit pattern
  TSTAR rs trace lane lo hi t     AIPerf's seed for (rs, trace, lane), then uniform(lo, hi) as
                                  AIPerf calls it (lo, hi, t as f64 bit patterns)

Run with the AIPerf venv's Python (it has numpy and aiperf).
"""

import random
import sys

import numpy as np
from aiperf.timing.trajectory_source import _seed_for_trace_lane


def fbits(x):
    return int(np.asarray(x, dtype=np.float64).view(np.uint64))


def main():
    plan = random.Random(20261205)
    w = sys.stdout.write
    w(f"NUMPY {np.__version__}\n")
    seeds = [0, 1, 2, 42, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**32 + 1, 2**63, 2**64 - 1]
    seeds += [plan.randrange(2**32) for _ in range(100)]
    seeds += [plan.randrange(2**64) for _ in range(300)]
    for s in seeds:
        g = np.random.default_rng(s)
        n = plan.choice([1, 2, 5, 17])
        w(f"RAW {s} {n} " + " ".join(str(int(x)) for x in g.bit_generator.random_raw(n)) + "\n")
        w(f"RND {s} {fbits(np.random.default_rng(s).random())}\n")
    ids = ["fx-simple-001", "fx-subagent-002", "synth-0000", "synth-0392", "a b:c", "ü-trace"]
    for _ in range(400):
        rs = plan.choice([0, 1, 42, 7, plan.randrange(2**32)])
        tid = plan.choice(ids)
        lane = plan.randrange(1600)
        start = plan.uniform(0, 5e6)
        dur = plan.choice([0.0, 1.0, plan.uniform(0, 1e7)])
        lo_r, hi_r = plan.choice([(0.25, 0.75), (0.5, 0.5), (0.0, 1.0), (0.1, 0.9)])
        lo = start + lo_r * dur
        hi = start + hi_r * dur
        if hi < lo:
            hi = lo
        rng = np.random.default_rng(_seed_for_trace_lane(rs, tid, lane))
        t = float(lo if hi == lo else rng.uniform(lo, hi))
        w(f"TSTAR {rs} {tid.encode().hex()} {lane} {fbits(lo)} {fbits(hi)} {fbits(t)}\n")


if __name__ == "__main__":
    main()
