//! numpy's legacy `RandomState` (MT19937 plus the legacy distributions), bit for bit.
//!
//! InferenceX's `benchmark_serving.py` and srt-slurm's sa-bench draw the random dataset (lengths,
//! token offsets, prefix, padding) and the request arrival gaps from `np.random`'s legacy global
//! generator. Reproducing their prompts and their arrival schedule exactly needs the same stream,
//! so this is a port of exactly the pieces they touch: int and sequence seeding, `get_state()[1]`,
//! `random_sample`, `randint` (masked rejection) and `gamma` / `standard_gamma` (legacy paths,
//! with the polar Gaussian and its cached second value). Nothing here is `np.random.Generator`.

use super::mt19937::{Mt19937, N};

/// A numpy legacy `RandomState`: MT19937 and the legacy Gaussian cache (the polar method makes two
/// normals at a time and keeps the second for the next call; seeding clears it).
pub(crate) struct RandomState {
    mt: Mt19937,
    has_gauss: bool,
    gauss: f64,
}

impl RandomState {
    fn with(mt: Mt19937) -> Self {
        RandomState {
            mt,
            has_gauss: false,
            gauss: 0.0,
        }
    }

    /// `np.random.seed(seed)` / `RandomState(seed)` with an int: numpy seeds ints with the
    /// reference `init_genrand`, unlike CPython's `random.seed`, which goes through
    /// `init_by_array`. numpy rejects seeds ≥ 2^32, so the type carries that validation.
    pub(crate) fn from_u32_seed(seed: u32) -> Self {
        RandomState::with(Mt19937::init_genrand(seed))
    }

    /// `RandomState([k0, k1, ...])`: the reference `init_by_array`. IX seeds its padding generator
    /// this way with the first four global state words.
    pub(crate) fn from_key(key: &[u32]) -> Self {
        RandomState::with(Mt19937::init_by_array(key))
    }

    /// `get_state()[1]`: the 624 words as they stand. Drawing only moves `pos`; the words change at
    /// the next regeneration, so IX's `key4` depends on how many values were drawn, not just the seed.
    pub(crate) fn state_words(&self) -> &[u32; N] {
        self.mt.words()
    }

    /// `get_state()[2]`: how many words of the current block were consumed (624 = regenerate next).
    #[cfg(test)]
    pub(crate) fn pos(&self) -> usize {
        self.mt.pos()
    }

    /// One raw 32-bit output (`next_uint32`).
    pub(crate) fn next_u32(&mut self) -> u32 {
        self.mt.next_u32()
    }

    /// `next_uint64`: two outputs, the first one is the HIGH word (numpy's
    /// `next32 << 32 | next32` evaluates left to right with the compilers numpy ships with).
    pub(crate) fn next_u64(&mut self) -> u64 {
        let hi = u64::from(self.next_u32());
        let lo = u64::from(self.next_u32());
        (hi << 32) | lo
    }

    /// `random_sample()`: 53 random bits in [0, 1), built from 27 + 26 bits of two outputs
    /// (the first output supplies the high 27 bits).
    pub(crate) fn next_f64(&mut self) -> f64 {
        let a = self.next_u32() >> 5;
        let b = self.next_u32() >> 6;
        (f64::from(a) * 67_108_864.0 + f64::from(b)) / 9_007_199_254_740_992.0
    }

    /// A uniform value in `0..=rng` by masked rejection, numpy's legacy choice (never Lemire):
    /// `rng == 0` draws nothing, a range that fits 32 bits draws 32-bit outputs, and the exact
    /// 2^32 − 1 and 2^64 − 1 ranges take the raw output without masking.
    fn bounded(&mut self, rng: u64) -> u64 {
        if rng == 0 {
            0
        } else if rng < 0xffff_ffff {
            // Fits u32 (checked just above); the mask is too, being < 2 * rng.
            let rng32 = rng as u32;
            let mask = u32::MAX >> rng32.leading_zeros();
            loop {
                let v = self.next_u32() & mask;
                if v <= rng32 {
                    return u64::from(v);
                }
            }
        } else if rng == 0xffff_ffff {
            u64::from(self.next_u32())
        } else if rng == u64::MAX {
            self.next_u64()
        } else {
            let mask = u64::MAX >> rng.leading_zeros();
            loop {
                let v = self.next_u64() & mask;
                if v <= rng {
                    return v;
                }
            }
        }
    }

    /// `randint(low, high)` with numpy's default `int` (int64) dtype: one value in `low..high`.
    /// numpy raises on `low >= high`; callers validate first (here it would draw as if the range
    /// wrapped around). `randint(0, 2**63)` style upper bounds beyond i64 are `randint_closed`.
    pub(crate) fn randint(&mut self, low: i64, high: i64) -> i64 {
        debug_assert!(low < high, "randint needs low < high");
        self.randint_closed(low, high.wrapping_sub(1))
    }

    /// `randint(low, high + 1)`: one value in `low..=high`, the form numpy works in internally. It
    /// also covers the full int64 range (`randint(-2**63, 2**63)`), which an exclusive i64 `high`
    /// cannot express. Needs `low <= high`.
    pub(crate) fn randint_closed(&mut self, low: i64, high: i64) -> i64 {
        debug_assert!(low <= high, "randint_closed needs low <= high");
        // numpy computes the range and the result in uint64 two's complement; so do we.
        let rng = high.wrapping_sub(low) as u64;
        (low as u64).wrapping_add(self.bounded(rng)) as i64
    }

    /// `randint(low, high, size=n)`: the same as `n` single draws, in order (numpy fills the array
    /// element by element from the one stream); `n == 0` draws nothing.
    pub(crate) fn randint_n(&mut self, low: i64, high: i64, n: usize) -> Vec<i64> {
        (0..n).map(|_| self.randint(low, high)).collect()
    }

    /// `legacy_standard_exponential`: `-ln(1 - U)` (the legacy path, not the ziggurat).
    fn standard_exponential(&mut self) -> f64 {
        -(1.0 - self.next_f64()).ln()
    }

    /// `legacy_gauss`: a standard normal by the polar method. Each accepted pair yields two values;
    /// the second is cached and returned by the next call, and seeding clears it, so the cache is
    /// part of the stream position.
    fn gauss(&mut self) -> f64 {
        if self.has_gauss {
            self.has_gauss = false;
            let cached = self.gauss;
            self.gauss = 0.0;
            return cached;
        }
        loop {
            let x1 = 2.0 * self.next_f64() - 1.0;
            let x2 = 2.0 * self.next_f64() - 1.0;
            let r2 = x1 * x1 + x2 * x2;
            if r2 < 1.0 && r2 != 0.0 {
                let f = (-2.0 * r2.ln() / r2).sqrt();
                self.gauss = f * x1;
                self.has_gauss = true;
                return f * x2;
            }
        }
    }

    /// `standard_gamma(shape)` by numpy's legacy algorithm: exponential for shape 1, 0 for shape 0,
    /// Johnk-style rejection below 1 and Marsaglia–Tsang (on the cached polar Gaussian) above.
    /// Every expression keeps the reference's operation order, since reordering changes the last
    /// bit. numpy raises on a negative shape; callers validate (NaN or negative loops or returns NaN
    /// here).
    pub(crate) fn standard_gamma(&mut self, shape: f64) -> f64 {
        if shape == 1.0 {
            self.standard_exponential()
        } else if shape == 0.0 {
            0.0
        } else if shape < 1.0 {
            loop {
                let u = self.next_f64();
                let v = self.standard_exponential();
                if u <= 1.0 - shape {
                    let x = u.powf(1.0 / shape);
                    if x <= v {
                        return x;
                    }
                } else {
                    let y = -((1.0 - u) / shape).ln();
                    let x = (1.0 - shape + shape * y).powf(1.0 / shape);
                    if x <= v + y {
                        return x;
                    }
                }
            }
        } else {
            let b = shape - 1.0 / 3.0;
            let c = 1.0 / (9.0 * b).sqrt();
            loop {
                let (x, mut v) = loop {
                    let x = self.gauss();
                    let v = 1.0 + c * x;
                    if v > 0.0 {
                        break (x, v);
                    }
                };
                v = v * v * v;
                let u = self.next_f64();
                if u < 1.0 - 0.0331 * (x * x) * (x * x) {
                    return b * v;
                }
                if u.ln() < 0.5 * x * x + b * (1.0 - v + v.ln()) {
                    return b * v;
                }
            }
        }
    }

    /// `gamma(shape, scale)` = `scale * standard_gamma(shape)` (`legacy_gamma`). The arrival gap of
    /// rate R and burstiness b is `gamma(b, 1.0 / (R * b))`.
    pub(crate) fn gamma(&mut self, shape: f64, scale: f64) -> f64 {
        scale * self.standard_gamma(shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `int(x * r)` as Python computes it: the f64 product truncated toward zero.
    fn int_times(x: i64, r: f64) -> i64 {
        (x as f64 * r) as i64
    }

    /// IX's draws (spec §4.1): prefix, in_lens, out_lens, offsets.
    fn ix_draws(
        rs: &mut RandomState,
        v: i64,
        isl: i64,
        osl: i64,
        r: f64,
        n: usize,
        p: usize,
    ) -> [Vec<i64>; 4] {
        let prefix = rs.randint_n(0, v, p);
        let in_lens = rs.randint_n(int_times(isl, r), isl + 1, n);
        let out_lens = rs.randint_n(int_times(osl, r), osl + 1, n);
        let offsets = rs.randint_n(0, v, n);
        [prefix, in_lens, out_lens, offsets]
    }

    /// F3's global state: seed 0, V 128000, ISL 1024, OSL 128, r 0.8, N 8, P 0.
    fn f3_state() -> (RandomState, [Vec<i64>; 4]) {
        let mut rs = RandomState::from_u32_seed(0);
        let draws = ix_draws(&mut rs, 128_000, 1024, 128, 0.8, 8, 0);
        (rs, draws)
    }

    #[test]
    fn f1_seed0_raw_uniform_and_wide_randint() {
        let mut rs = RandomState::from_u32_seed(0);
        // randint(0, 2**32) is the rng == 2^32 - 1 path: raw outputs.
        let raw: Vec<i64> = rs.randint_n(0, 1 << 32, 5);
        assert_eq!(
            raw,
            [
                2_357_136_044,
                2_546_248_239,
                3_071_714_933,
                3_626_093_760,
                2_588_848_963
            ]
        );
        let mut rs = RandomState::from_u32_seed(0);
        let raw: Vec<u32> = (0..5).map(|_| rs.next_u32()).collect();
        assert_eq!(
            raw,
            [
                2_357_136_044,
                2_546_248_239,
                3_071_714_933,
                3_626_093_760,
                2_588_848_963
            ]
        );

        let mut rs = RandomState::from_u32_seed(0);
        let u = [rs.next_f64(), rs.next_f64(), rs.next_f64()];
        let want = [
            0.548_813_503_927_324_8,
            0.715_189_366_372_419_5,
            0.602_763_376_071_643_9,
        ];
        assert_eq!(u.map(f64::to_bits), want.map(f64::to_bits));

        let mut rs = RandomState::from_u32_seed(0);
        assert_eq!(
            rs.randint_n(0, (1 << 40) + 3, 3),
            [741_280_623_151, 506_137_267_392, 841_157_541_223]
        );
    }

    #[test]
    fn f1_next_u64_is_high_word_first() {
        let mut a = RandomState::from_u32_seed(0);
        let mut b = RandomState::from_u32_seed(0);
        let (hi, lo) = (b.next_u32(), b.next_u32());
        assert_eq!(a.next_u64(), (u64::from(hi) << 32) | u64::from(lo));
    }

    #[test]
    fn f2_int_seed_key_seed_and_empty_range() {
        assert_eq!(
            RandomState::from_u32_seed(5).randint(0, 1 << 31),
            953_453_411
        );
        assert_eq!(
            RandomState::from_key(&[1, 2, 3, 4]).randint_n(0, 1 << 31, 3),
            [768_222_586, 1_022_996_879, 334_638_762]
        );
        let mut rs = RandomState::from_u32_seed(0);
        assert_eq!(rs.randint_n(5, 6, 3), [5, 5, 5]);
        assert_eq!(rs.pos(), 624, "rng == 0 must not draw");
    }

    #[test]
    fn f3_ix_draws_state_and_local_generator() {
        let (rs, [prefix, in_lens, out_lens, offsets]) = f3_state();
        assert!(prefix.is_empty());
        assert_eq!(in_lens, [991, 866, 936, 1011, 886, 1014, 922, 828]);
        assert_eq!(out_lens, [121, 123, 120, 106, 125, 108, 126, 126]);
        assert_eq!(
            offsets,
            [52_620, 80_186, 17_089, 32_230, 18_983, 108_631, 116_910, 89_688]
        );
        assert_eq!(rs.pos(), 25, "24 values and one rejection");
        let key4 = &rs.state_words()[..4];
        assert_eq!(
            key4,
            [2_443_250_962, 1_093_594_115, 1_878_467_924, 2_709_361_018]
        );

        let mut local = RandomState::from_key(key4);
        let seeds: Vec<i64> = (0..4).map(|_| local.randint(0, 1 << 31)).collect();
        assert_eq!(
            seeds,
            [2_130_544_807, 1_101_783_030, 526_670_929, 1_238_939_835]
        );
        let mut local = RandomState::from_key(key4);
        assert_eq!(
            local.randint_n(0, 128_000, 5),
            [100_519, 122_870, 23_633, 47_291, 24_285]
        );
        // Building the local generator reads the global words without drawing.
        assert_eq!(rs.pos(), 25);
    }

    #[test]
    fn f4_constant_lengths_draw_nothing() {
        let mut rs = RandomState::from_u32_seed(42);
        let [prefix, in_lens, out_lens, offsets] =
            ix_draws(&mut rs, 151_665, 8192, 1024, 1.0, 4, 0);
        assert!(prefix.is_empty());
        assert_eq!(in_lens, [8192; 4]);
        assert_eq!(out_lens, [1024; 4]);
        assert_eq!(offsets, [121_958, 146_867, 131_932, 103_694]);
        assert_eq!(rs.pos(), 4);
        assert_eq!(
            rs.state_words()[..4],
            [723_970_371, 1_229_153_189, 4_170_412_009, 2_042_542_564]
        );
    }

    #[test]
    fn f5_prefix_first() {
        let mut rs = RandomState::from_u32_seed(1);
        let [prefix, in_lens, out_lens, offsets] = ix_draws(&mut rs, 50_257, 100, 10, 0.5, 4, 4);
        assert_eq!(prefix, [33_003, 12_172, 5_192, 32_511]);
        assert_eq!(in_lens, [59, 61, 55, 65]);
        assert_eq!(out_lens, [5, 5, 6, 9]);
        assert_eq!(offsets, [7_751, 43_757, 31_228, 36_230]);
    }

    #[test]
    fn f6_sa_order_prefix_after_offsets() {
        let mut rs = RandomState::from_u32_seed(0);
        // SA: lengths and offsets as IX with P 0, then the prefix.
        let [_, in_lens, out_lens, offsets] = ix_draws(&mut rs, 128_000, 1024, 128, 0.8, 8, 0);
        assert_eq!(in_lens, [991, 866, 936, 1011, 886, 1014, 922, 828]);
        assert_eq!(out_lens, [121, 123, 120, 106, 125, 108, 126, 126]);
        assert_eq!(
            offsets,
            [52_620, 80_186, 17_089, 32_230, 18_983, 108_631, 116_910, 89_688]
        );
        assert_eq!(rs.randint_n(0, 128_000, 3), [101_201, 124_581, 82_457]);
    }

    #[test]
    fn f7_gamma_gaps_after_f3_draws() {
        let rate = 20.0;
        let cases: [(f64, [f64; 4]); 3] = [
            (
                1.0,
                [
                    0.024_943_600_692_728_08,
                    0.090_418_461_599_707_66,
                    0.020_578_899_720_561_497,
                    0.052_230_624_775_038_786,
                ],
            ),
            (
                0.5,
                [
                    0.015_427_989_604_797_038,
                    0.011_383_616_906_431_512,
                    0.013_560_183_166_413_789,
                    0.001_969_834_156_243_854,
                ],
            ),
            (
                2.0,
                [
                    0.089_560_840_845_352_79,
                    0.031_120_933_517_178_186,
                    0.057_077_934_832_924_11,
                    0.037_807_587_123_763_975,
                ],
            ),
        ];
        for (burstiness, want) in cases {
            let (mut rs, _) = f3_state();
            // Spec §6.2: g_k = gamma(shape = b, scale = 1 / (R * b)).
            let theta = 1.0 / (rate * burstiness);
            let got: Vec<u64> = (0..4)
                .map(|_| rs.gamma(burstiness, theta).to_bits())
                .collect();
            assert_eq!(got, want.map(f64::to_bits), "burstiness {burstiness}");
        }
    }

    #[test]
    fn gamma_zero_shape_draws_nothing() {
        let mut rs = RandomState::from_u32_seed(0);
        assert_eq!(rs.gamma(0.0, 3.0), 0.0);
        assert_eq!(rs.pos(), 624);
    }

    #[test]
    fn full_int64_range_takes_raw_64_bits() {
        let mut a = RandomState::from_u32_seed(7);
        let mut b = RandomState::from_u32_seed(7);
        let v = a.randint_closed(i64::MIN, i64::MAX);
        assert_eq!(v as u64, (i64::MIN as u64).wrapping_add(b.next_u64()));
        // Just under the full range: the masked 64-bit path, still in bounds.
        let mut c = RandomState::from_u32_seed(7);
        for _ in 0..100 {
            let w = c.randint(i64::MIN, i64::MAX);
            assert!(w < i64::MAX);
        }
    }

    #[test]
    fn empty_key_does_not_panic() {
        let mut a = RandomState::from_key(&[]);
        let mut b = RandomState::from_key(&[0]);
        assert_eq!(a.next_u32(), b.next_u32());
    }

    /// The port against numpy itself: `scripts/numpy_draws.py` draws with numpy's legacy
    /// `RandomState` (260 generators, ~250,000 values: every randint path and mask edge, uniform
    /// doubles, gamma over the legacy shapes, the state words between) and this replays the same
    /// operations. Integers and uniform doubles must match bit for bit everywhere; gamma goes
    /// through libm's `ln`/`pow`, which match numpy's bit for bit on the same x86-64 machine (the
    /// same glibc functions) but may differ in the last bit under another libm (the aarch64 leg
    /// runs this under qemu against an x86-64 numpy), so there it may be 4 ulps apart.
    #[test]
    fn matches_numpy_itself_over_many_seeds_ranges_and_shapes() {
        let text = crate::test_tools::venv_script_stdout("numpy_draws.py");
        let exact_libm = cfg!(target_arch = "x86_64");
        let (mut rs, mut compared, mut cases) = (None, 0usize, 0usize);
        let mut version = "";
        for (n, line) in text.lines().enumerate() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let u = |i: usize| -> u64 { f[i].parse().unwrap() };
            let s = |i: usize| -> i64 { f[i].parse().unwrap() };
            let at = || format!("line {}: {}", n + 1, &line[..line.len().min(80)]);
            let mut same = |got: u64, want: u64| {
                compared += 1;
                assert_eq!(got, want, "{}", at());
            };
            if f[0] == "NUMPY" {
                version = f[1];
                continue;
            }
            if f[0] == "CASE" {
                cases += 1;
                rs = Some(match f[1] {
                    "seed" => RandomState::from_u32_seed(u32::try_from(u(2)).unwrap()),
                    _ => {
                        let key: Vec<u32> =
                            (2..f.len()).map(|i| u32::try_from(u(i)).unwrap()).collect();
                        RandomState::from_key(&key)
                    }
                });
                continue;
            }
            let r = rs.as_mut().unwrap();
            match f[0] {
                "ST" => {
                    same(r.pos() as u64, u(1));
                    assert_eq!(f.len(), 2 + 624, "{}", at());
                    for (i, w) in r.state_words().iter().enumerate() {
                        same(u64::from(*w), u(2 + i));
                    }
                }
                "R1" => same(r.randint(s(1), s(2)) as u64, s(3) as u64),
                "RI" | "RC" => {
                    let (low, high, k) = (s(1), s(2), u(3) as usize);
                    assert_eq!(f.len(), 4 + k, "{}", at());
                    for i in 0..k {
                        let v = if f[0] == "RI" {
                            r.randint(low, high)
                        } else {
                            r.randint_closed(low, high)
                        };
                        same(v as u64, s(4 + i) as u64);
                    }
                }
                "RS" => {
                    for i in 0..u(1) as usize {
                        same(r.next_f64().to_bits(), u(2 + i));
                    }
                }
                "GA" | "SG" => {
                    let shape = f64::from_bits(u(1));
                    let (scale, first) = if f[0] == "GA" {
                        (Some(f64::from_bits(u(2))), 4)
                    } else {
                        (None, 3)
                    };
                    for i in 0..u(first - 1) as usize {
                        let got = match scale {
                            Some(scale) => r.gamma(shape, scale),
                            None => r.standard_gamma(shape),
                        };
                        let want = u(first + i);
                        let ulps = (got.to_bits() as i64 - want as i64).unsigned_abs();
                        same(u64::from(ulps > if exact_libm { 0 } else { 4 }), 0);
                    }
                }
                other => panic!("{}: unknown operation {other}", at()),
            }
        }
        assert!(
            cases >= 250 && compared > 200_000 && !version.is_empty(),
            "{cases} generators, {compared} values, numpy {version:?}: the script's output is \
             not what this test was written for"
        );
    }
}
