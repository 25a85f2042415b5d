//! MT19937, the generator under both CPython's `random` and numpy's legacy `RandomState`: the
//! two reference seedings (`init_genrand` for one word, `init_by_array` for a key) and tempered
//! 32-bit outputs. `pyrandom` (CPython's shuffle) and `numpy_random` (benchmark_serving.py's
//! dataset and arrivals) build their draws on this one copy.

/// State length in 32-bit words.
pub(crate) const N: usize = 624;
/// The middle word offset of the recurrence.
const M: usize = 397;

/// The 624 state words and the read position (`N` = regenerate before the next output).
#[derive(Clone)]
pub(crate) struct Mt19937 {
    key: [u32; N],
    pos: usize,
}

impl Mt19937 {
    /// The reference `init_genrand(seed)`: numpy's int seeding, and the first step of
    /// `init_by_array`.
    pub(crate) fn init_genrand(seed: u32) -> Self {
        let mut key = [0u32; N];
        key[0] = seed;
        for i in 1..N {
            let prev = key[i - 1];
            key[i] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(i as u32);
        }
        // pos = N: the first output regenerates the whole block, as the reference does.
        Mt19937 { key, pos: N }
    }

    /// The reference `init_by_array(key)`: CPython's `random.seed(int)` (the int's 32-bit words)
    /// and numpy's `RandomState([k0, k1, ...])`. An empty key is mixed in as `[0]`, as CPython
    /// seeds 0 (numpy refuses one; its callers here pass four words).
    pub(crate) fn init_by_array(init_key: &[u32]) -> Self {
        let words: &[u32] = if init_key.is_empty() { &[0] } else { init_key };
        let mut mt = Mt19937::init_genrand(19_650_218);
        let s = &mut mt.key;
        let (mut i, mut j) = (1usize, 0usize);
        // First mixing pass: at least N steps; a longer key gets every word in.
        for _ in 0..N.max(words.len()) {
            let prev = s[i - 1] ^ (s[i - 1] >> 30);
            // The reference adds j as an unsigned long; mod 2^32 here, as keys are short.
            s[i] = (s[i] ^ prev.wrapping_mul(1_664_525))
                .wrapping_add(words[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= N {
                s[0] = s[N - 1];
                i = 1;
            }
            if j >= words.len() {
                j = 0;
            }
        }
        // Second pass: N - 1 steps that no longer read the key.
        for _ in 0..N - 1 {
            let prev = s[i - 1] ^ (s[i - 1] >> 30);
            s[i] = (s[i] ^ prev.wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                s[0] = s[N - 1];
                i = 1;
            }
        }
        // A non-zero state whatever the key.
        s[0] = 0x8000_0000;
        mt.pos = N;
        mt
    }

    /// The words as they stand (numpy's `get_state()[1]`): drawing moves only `pos`; the words
    /// change at the next regeneration.
    pub(crate) fn words(&self) -> &[u32; N] {
        &self.key
    }

    /// How many words of the current block were consumed (`N`: regenerate next).
    #[cfg(test)]
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Regenerates all 624 words at once; the modular indexing walks the same three segments the
    /// reference unrolls.
    fn regenerate(&mut self) {
        for k in 0..N {
            let y = (self.key[k] & 0x8000_0000) | (self.key[(k + 1) % N] & 0x7fff_ffff);
            // "xor MATRIX_A if y is odd", without a branch.
            let twist = (y & 1).wrapping_neg() & 0x9908_b0df;
            self.key[k] = self.key[(k + M) % N] ^ (y >> 1) ^ twist;
        }
        self.pos = 0;
    }

    /// One tempered 32-bit output.
    pub(crate) fn next_u32(&mut self) -> u32 {
        if self.pos >= N {
            self.regenerate();
        }
        let mut y = self.key[self.pos];
        self.pos += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }
}
