//! numpy's `default_rng(seed)` for one non-negative integer seed: `SeedSequence` (pool of four
//! 32-bit words) feeding a `PCG64` (XSL-RR 128/64), and the two draws AgentX needs, `random()`
//! and `uniform(lo, hi)`. AIPerf draws each lane's t* with
//! `np.random.default_rng(seed).uniform(lo, hi)` (spec §3.2 step 3); the same seed gives the same
//! f64 here, bit for bit (`scripts/numpy_default_rng.py` draws with numpy itself for the test).
//!
//! Only what that draw needs: no spawning, no other distributions, no `integers`.

/// numpy's `SeedSequence` constants (`numpy/random/bit_generator.pyx`).
const INIT_A: u32 = 0x43b0_d7e5;
const MULT_A: u32 = 0x931e_8875;
const INIT_B: u32 = 0x8b51_f9dd;
const MULT_B: u32 = 0x58f3_8ded;
const MIX_MULT_L: u32 = 0xca01_f9dd;
const MIX_MULT_R: u32 = 0x4973_f715;
const XSHIFT: u32 = 16;
const POOL: usize = 4;

/// PCG64's 128-bit LCG multiplier.
const PCG_MULT: u128 = (2_549_297_995_355_413_924 << 64) | 4_865_540_595_714_422_341;

/// numpy's `Generator(PCG64(seed))`, as far as `random()` goes.
pub(crate) struct DefaultRng {
    state: u128,
    inc: u128,
}

impl DefaultRng {
    /// `np.random.default_rng(seed)` for an integer seed.
    pub(crate) fn new(seed: u64) -> Self {
        let pool = seed_sequence_pool(seed);
        let words = generate_state(&pool);
        // `generate_state(4, uint64)`: little-endian pairs of 32-bit words.
        let w64 = |i: usize| u64::from(words[2 * i]) | (u64::from(words[2 * i + 1]) << 32);
        let initstate = (u128::from(w64(0)) << 64) | u128::from(w64(1));
        let initseq = (u128::from(w64(2)) << 64) | u128::from(w64(3));
        // `pcg_setseq_128_srandom_r`.
        let mut rng = DefaultRng {
            state: 0,
            inc: (initseq << 1) | 1,
        };
        rng.step();
        rng.state = rng.state.wrapping_add(initstate);
        rng.step();
        rng
    }

    fn step(&mut self) {
        self.state = self.state.wrapping_mul(PCG_MULT).wrapping_add(self.inc);
    }

    /// The next 64-bit output: step, then XSL-RR of the new state.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.step();
        let s = self.state;
        let xored = ((s >> 64) as u64) ^ (s as u64);
        xored.rotate_right((s >> 122) as u32)
    }

    /// `Generator.random()`: 53 bits in [0, 1).
    pub(crate) fn random(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `Generator.uniform(lo, hi)`: `lo + (hi − lo)·random()`.
    pub(crate) fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.random()
    }
}

fn hashmix(value: u32, hash_const: &mut u32) -> u32 {
    let mut v = value ^ *hash_const;
    *hash_const = hash_const.wrapping_mul(MULT_A);
    v = v.wrapping_mul(*hash_const);
    v ^ (v >> XSHIFT)
}

fn mix(x: u32, y: u32) -> u32 {
    let r = MIX_MULT_L
        .wrapping_mul(x)
        .wrapping_sub(MIX_MULT_R.wrapping_mul(y));
    r ^ (r >> XSHIFT)
}

/// `SeedSequence(seed).pool`: the seed as little-endian 32-bit words (one word for seeds below
/// 2^32, zero included), hashed into four words and mixed.
fn seed_sequence_pool(seed: u64) -> [u32; POOL] {
    let entropy: Vec<u32> = if seed >> 32 == 0 {
        vec![seed as u32]
    } else {
        vec![seed as u32, (seed >> 32) as u32]
    };
    let mut hash_const = INIT_A;
    let mut pool = [0u32; POOL];
    for (i, slot) in pool.iter_mut().enumerate() {
        *slot = hashmix(entropy.get(i).copied().unwrap_or(0), &mut hash_const);
    }
    for src in 0..POOL {
        for dst in 0..POOL {
            if src != dst {
                let h = hashmix(pool[src], &mut hash_const);
                pool[dst] = mix(pool[dst], h);
            }
        }
    }
    // The entropy never exceeds the pool (two words at most): nothing left to mix in.
    pool
}

/// `SeedSequence.generate_state(4, uint64)` as its eight 32-bit words.
fn generate_state(pool: &[u32; POOL]) -> [u32; 8] {
    let mut hash_const = INIT_B;
    let mut out = [0u32; 8];
    for (i, slot) in out.iter_mut().enumerate() {
        let mut v = pool[i % POOL] ^ hash_const;
        hash_const = hash_const.wrapping_mul(MULT_B);
        v = v.wrapping_mul(hash_const);
        *slot = v ^ (v >> XSHIFT);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// numpy 2.4's `np.random.default_rng(s).bit_generator.random_raw(2)` at the seed sizes'
    /// edges (one word, two words), and `random()`/`uniform()` as numpy printed them. The
    /// cross-check over many seeds against numpy itself is in `agentx::snapshot`'s tests.
    #[test]
    fn raw_outputs_and_draws_match_numpy() {
        let cases: [(u64, [u64; 2]); 5] = [
            (0, [0xa30f_ebcf_d9c2_825f, 0x4510_bdf8_82d9_d721]),
            (42, [0xc621_fbcd_16d9_2688, 0x705a_5661_a791_ffc1]),
            (
                u64::from(u32::MAX),
                [0x407f_5fa9_30d8_fd9f, 0x3814_b22e_b968_4802],
            ),
            (1 << 32, [0xe3c5_ebe2_85ac_1625, 0x8ea0_9968_fe31_dbcc]),
            (u64::MAX, [0xae16_3a7a_8c47_568f, 0xd866_59f5_f338_2359]),
        ];
        for (seed, raw) in cases {
            let mut g = DefaultRng::new(seed);
            assert_eq!([g.next_u64(), g.next_u64()], raw, "seed {seed}");
        }
        assert_eq!(DefaultRng::new(0).random(), 0.6369616873214543);
        assert_eq!(DefaultRng::new(42).random(), 0.7739560485559633);
        assert_eq!(DefaultRng::new(7).uniform(10.0, 20.0), 16.25095466604667);
    }
}
