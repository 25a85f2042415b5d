"""numpy's np.mean, np.std, np.median and np.percentile on seeded arrays, for
src/metrics/numpy.rs's cross-check test.

One line per array: its length k, the k values, then mean, std, median and the percentiles of
PERCENTILES, every float as the decimal of its IEEE-754 bit pattern. Lengths cross numpy's
pairwise-summation block (128) and its recursion; values are small latencies, heavy-tailed ones
and large offsets (where a left-to-right sum loses digits).
"""

import numpy as np

PERCENTILES = [50.0, 90.0, 99.0, 99.9, 1.0, 25.0, 75.0, 33.3]


def bits(x):
    return str(int(np.float64(x).view(np.uint64)))


def main():
    rng = np.random.default_rng(7)
    sizes = list(range(1, 40)) + [63, 64, 65, 127, 128, 129, 130, 255, 256, 257, 1000, 1023, 5000]
    for k in sizes:
        for kind in range(3):
            if kind == 0:
                v = rng.random(k) * 0.05
            elif kind == 1:
                v = rng.lognormal(-5, 2, k)
            else:
                v = rng.normal(0, 1e3, k) + 1e6
            out = [np.mean(v), np.std(v), np.median(v)] + [np.percentile(v, p) for p in PERCENTILES]
            print(k, " ".join(bits(x) for x in v), " ".join(bits(x) for x in out))


if __name__ == "__main__":
    main()
