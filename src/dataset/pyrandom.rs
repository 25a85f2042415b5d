//! CPython's `random.seed(n)` + `random.shuffle(x)`, bit for bit, so SPEED-Bench prompts are sent
//! in the same order as the golden collection (vLLM shuffles with seed 0).

use super::mt19937::Mt19937;

/// MT19937 as CPython seeds it (`init_by_array` with the 32-bit words of |seed|).
struct Mt(Mt19937);

impl Mt {
    fn from_seed(seed: u64) -> Self {
        let mut key: Vec<u32> = Vec::new();
        let mut s = seed;
        while s > 0 {
            key.push(s as u32);
            s >>= 32;
        }
        Mt(Mt19937::init_by_array(&key))
    }

    fn next_u32(&mut self) -> u32 {
        self.0.next_u32()
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
