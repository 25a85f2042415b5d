"""numpy's own legacy RandomState draws, for src/dataset/numpy_random.rs's cross-check test.

Many int seeds and init_by_array keys (the global generator too), each followed by a seeded mix of
randint over every path and mask edge (32- and 64-bit, the full int64 range), random_sample,
gamma and standard_gamma over the legacy shapes (gamma's cached Gaussian carries across calls),
with the state words between. The Rust test replays the same operations and compares bit for bit.
Run with any Python that has numpy (the test uses the AIPerf venv's); the legacy stream is frozen
across numpy versions by numpy's compatibility policy.

Lines (all numbers decimal; floats as the u64 bit pattern of the f64):
  CASE seed S                 RandomState(S)
  CASE key k0 k1 ...          RandomState([k0, k1, ...])
  ST pos w0 .. w623           get_state()[2], get_state()[1]
  R1 low high v               randint(low, high)                  (size=None)
  RI low high n v..           randint(low, high, size=n)          (high <= 2**63 - 1)
  RC low hi_incl n v..        randint(low, hi_incl + 1, size=n)   (reaches 2**63, full int64)
  RS n bits..                 random_sample(n)
  GA shape scale n bits..     gamma(shape, scale, size=n)
  SG shape n bits..           standard_gamma(shape, size=n)
"""

import random
import sys

import numpy as np

I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def fbits(x):
    return int(np.asarray(x, dtype=np.float64).view(np.uint64))


def closed_ranges():
    """(low, high_inclusive) pairs covering every randint path and mask edge."""
    out = [(0, 0), (5, 5), (-3, -3), (I64_MAX, I64_MAX), (I64_MIN, I64_MIN)]
    # rng == 2^32 - 1 (raw next32), around it, and in the negative half.
    out += [(0, 2**32 - 1), (-(2**31), 2**31 - 1), (0, 2**32 - 2), (0, 2**32), (7, 7 + 2**32)]
    # rng just below, at and above 2^k - 1 for the mask boundaries, 32- and 64-bit paths.
    for k in [1, 2, 3, 7, 8, 15, 16, 17, 30, 31, 32, 33, 40, 52, 53, 62, 63]:
        for rng in (2**k - 2, 2**k - 1, 2**k, 2**k + 1):
            if 0 <= rng <= 2**64 - 1:
                low = 0 if rng <= I64_MAX else I64_MIN
                out.append((low, low + rng))
    # Spec usages and wide ranges.
    out += [(0, 127999), (819, 1024), (102, 128), (0, 2**31 - 1), (0, 151664), (0, 2**40 + 2)]
    out += [(I64_MIN, I64_MAX), (I64_MIN, I64_MAX - 1), (0, I64_MAX), (I64_MIN, 0),
            (-(2**62), 2**62), (-(2**62), 2**62 - 1), (I64_MIN + 1, I64_MAX)]
    return out


SHAPES = [0.0, 0.1, 0.5, 0.9, 1.0, 1.5, 2.0, 10.0, 3.7]
SIZES = [0, 1, 2, 3, 5, 37, 700]


def emit_ops(rs, plan, w):
    rngs = closed_ranges()
    for _ in range(plan.randint(8, 16)):
        kind = plan.choice(["R1", "RI", "RI", "RC", "RS", "GA", "GA", "SG", "ST"])
        n = plan.choice(SIZES)
        if kind in ("R1", "RI", "RC"):
            if plan.random() < 0.2:
                a, b = sorted(plan.randint(I64_MIN, I64_MAX) for _ in range(2))
                low, hi = a, b
            else:
                low, hi = plan.choice(rngs)
            if kind != "RC" and hi == I64_MAX:
                kind = "RC"  # an exclusive i64 high cannot reach it
            if kind == "R1":
                v = rs.randint(low, hi + 1)
                w(f"R1 {low} {hi + 1} {int(v)}")
            elif kind == "RI":
                v = rs.randint(low, hi + 1, size=n)
                w(f"RI {low} {hi + 1} {n} " + " ".join(str(int(x)) for x in v))
            else:
                v = rs.randint(low, hi + 1, size=n, dtype=np.int64)
                w(f"RC {low} {hi} {n} " + " ".join(str(int(x)) for x in v))
        elif kind == "RS":
            v = rs.random_sample(n)
            w(f"RS {n} " + " ".join(str(fbits(x)) for x in v))
        elif kind == "GA":
            shape = plan.choice(SHAPES)
            scale = plan.choice([1.0, 0.05, 1.0 / (20.0 * shape) if shape else 2.5,
                                 plan.uniform(0.0, 10.0)])
            v = rs.gamma(shape, scale, size=n)
            w(f"GA {fbits(shape)} {fbits(scale)} {n} " + " ".join(str(fbits(x)) for x in v))
        elif kind == "SG":
            shape = plan.choice(SHAPES)
            v = rs.standard_gamma(shape, size=n)
            w(f"SG {fbits(shape)} {n} " + " ".join(str(fbits(x)) for x in v))
        else:
            emit_state(rs, w)
    emit_state(rs, w)


def emit_state(rs, w):
    _, words, pos, _, _ = rs.get_state()
    w(f"ST {pos} " + " ".join(str(int(x)) for x in words))


def main():
    plan = random.Random(20240607)
    out = sys.stdout
    w = lambda s: out.write(s + "\n")  # noqa: E731
    seeds = [0, 1, 2**32 - 1, 5, 42] + [plan.randrange(2**32) for _ in range(195)]
    for s in seeds:
        rs = np.random.RandomState(s)
        w(f"CASE seed {s}")
        emit_state(rs, w)
        emit_ops(rs, plan, w)
    keys = [[plan.randrange(2**32) for _ in range(4)] for _ in range(50)]
    keys += [[1, 2, 3, 4], [0], [2**32 - 1], [7, 8],
             [plan.randrange(2**32) for _ in range(700)]]  # longer than the state
    for k in keys:
        rs = np.random.RandomState(k)
        w("CASE key " + " ".join(map(str, k)))
        emit_state(rs, w)
        emit_ops(rs, plan, w)
    # The global generator too, seeded as the benchmarks do.
    for s in [0, 1, 3, 22, 42]:
        np.random.seed(s)
        w(f"CASE seed {s}")
        emit_ops(np.random.mtrand._rand, plan, w)
    w(f"NUMPY {np.__version__}")


if __name__ == "__main__":
    main()
