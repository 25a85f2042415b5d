//! CPython's `random.seed(n)` + `random.shuffle(x)`, bit for bit, so SPEED-Bench prompts are sent
//! in the same order as the golden collection (vLLM shuffles with seed 0).

/// MT19937 as CPython seeds it (`init_by_array` with the 32-bit words of |seed|).
struct Mt {
    state: [u32; 624],
    index: usize,
}

impl Mt {
    fn from_seed(seed: u64) -> Self {
        let mut key: Vec<u32> = Vec::new();
        let mut s = seed;
        while s > 0 {
            key.push(s as u32);
            s >>= 32;
        }
        if key.is_empty() {
            key.push(0);
        }
        let mut mt = Mt::init_genrand(19_650_218);
        let n = 624usize;
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..n.max(key.len()) {
            let prev = mt.state[i - 1] ^ (mt.state[i - 1] >> 30);
            mt.state[i] = (mt.state[i] ^ prev.wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= n {
                mt.state[0] = mt.state[n - 1];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..n - 1 {
            let prev = mt.state[i - 1] ^ (mt.state[i - 1] >> 30);
            mt.state[i] = (mt.state[i] ^ prev.wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= n {
                mt.state[0] = mt.state[n - 1];
                i = 1;
            }
        }
        mt.state[0] = 0x8000_0000;
        mt.index = n;
        mt
    }

    fn init_genrand(s: u32) -> Self {
        let mut state = [0u32; 624];
        state[0] = s;
        for i in 1..624 {
            state[i] = 1_812_433_253u32
                .wrapping_mul(state[i - 1] ^ (state[i - 1] >> 30))
                .wrapping_add(i as u32);
        }
        Mt { state, index: 624 }
    }

    fn next_u32(&mut self) -> u32 {
        if self.index >= 624 {
            for k in 0..624 {
                let y = (self.state[k] & 0x8000_0000) | (self.state[(k + 1) % 624] & 0x7fff_ffff);
                let mut v = self.state[(k + 397) % 624] ^ (y >> 1);
                if y & 1 != 0 {
                    v ^= 0x9908_b0df;
                }
                self.state[k] = v;
            }
            self.index = 0;
        }
        let mut y = self.state[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `getrandbits(k)` for k ≤ 32: the top k bits of one output.
    fn getrandbits(&mut self, k: u32) -> u32 {
        self.next_u32() >> (32 - k)
    }

    /// `_randbelow_with_getrandbits(n)`.
    fn randbelow(&mut self, n: u32) -> u32 {
        let k = 32 - n.leading_zeros();
        loop {
            let r = self.getrandbits(k);
            if r < n {
                return r;
            }
        }
    }
}

/// Shuffles `items` exactly as `random.seed(seed); random.shuffle(items)` does in CPython 3.
pub(crate) fn python_shuffle<T>(items: &mut [T], seed: u64) {
    let mut mt = Mt::from_seed(seed);
    for i in (1..items.len()).rev() {
        let j = mt.randbelow(i as u32 + 1) as usize;
        items.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_outputs_match_cpython_seed_0() {
        let mut mt = Mt::from_seed(0);
        assert_eq!(
            [mt.next_u32(), mt.next_u32(), mt.next_u32()],
            [3_626_764_237, 1_654_615_998, 3_255_389_356]
        );
    }

    #[test]
    fn shuffle_matches_cpython_vectors() {
        let mut v: Vec<u32> = (0..10).collect();
        python_shuffle(&mut v, 0);
        assert_eq!(v, [7, 8, 1, 5, 3, 4, 2, 0, 9, 6]);
        let mut v: Vec<u32> = (0..80).collect();
        python_shuffle(&mut v, 0);
        let want = [
            56, 44, 42, 50, 24, 31, 68, 11, 66, 41, 75, 8, 37, 29, 1, 14, 52, 59, 63, 18, 47, 2,
            78, 74, 23, 7, 10, 60, 26, 15, 55, 71, 25, 77, 0, 3, 16, 76, 28, 79, 48, 13, 40, 39,
            20, 69, 22, 54, 35, 30, 21, 43, 4, 46, 6, 19, 9, 57, 72, 73, 70, 34, 58, 32, 12, 67,
            36, 17, 64, 27, 45, 61, 38, 51, 62, 65, 33, 5, 53, 49,
        ];
        assert_eq!(v, want);
    }
}
