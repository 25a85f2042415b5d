//! The simulator's KV cache, one pool per engine, as vLLM's block manager keeps it: prompt tokens
//! in fixed-size blocks, each full block named by a hash chained with its predecessor's (so a block
//! hits only when the whole prefix before it matches too), an LRU of freed blocks kept for reuse,
//! and a fixed capacity.
//!
//! A request is admitted with a [`Lease`] on its blocks: the leading cached blocks it shares, new
//! blocks for the rest of its prompt, and a reservation for its whole output, so a running request
//! never has to be preempted (vLLM would preempt instead; a simulator that never does keeps runs
//! reproducible). Usage counts the blocks actually filled (prompt, then output as it streams), not
//! the reservation. Output blocks are never cached: the simulator's output is not something a
//! client sends back token for token.
//!
//! Hits are counted as vLLM counts `prefix_cache_hits`: the tokens of the leading run of cached
//! full blocks, at most `prompt - 1` (the last prompt token is always computed again for its
//! logits), so a fully cached prompt whose length is a multiple of the block size still computes
//! its last block.

use std::collections::{BTreeMap, HashMap};

use super::model::splitmix;

/// A prompt as the KV cache sees it: its token count and the chained hashes of its full blocks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PromptBlocks {
    /// Prompt tokens (at least 1).
    pub(crate) tokens: u64,
    /// Hash of each full block, in order; block `i` covers tokens `i*B .. (i+1)*B`.
    pub(crate) hashes: Vec<u64>,
}

/// Cuts a token stream into blocks of `block_tokens` and hashes each full block, chained.
#[derive(Debug)]
pub(crate) struct BlockHasher {
    block_tokens: u32,
    parent: u64,
    cur: u64,
    in_block: u32,
    out: PromptBlocks,
}

/// The chain's start: the parent of the first block.
const ROOT: u64 = 0x5eed_b10c_0000_0001;

impl BlockHasher {
    pub(crate) fn new(block_tokens: u32) -> Self {
        BlockHasher {
            block_tokens: block_tokens.max(1),
            parent: ROOT,
            cur: splitmix(ROOT),
            in_block: 0,
            out: PromptBlocks::default(),
        }
    }

    /// Appends one token id.
    pub(crate) fn push(&mut self, id: u64) {
        self.cur = splitmix(self.cur ^ id);
        self.in_block += 1;
        self.out.tokens += 1;
        if self.in_block == self.block_tokens {
            self.out.hashes.push(self.cur);
            self.parent = self.cur;
            self.cur = splitmix(self.parent);
            self.in_block = 0;
        }
    }

    /// The blocks; an empty prompt counts as one token (every request computes at least one).
    pub(crate) fn finish(mut self) -> PromptBlocks {
        if self.out.tokens == 0 {
            self.push(0);
        }
        self.out
    }
}

/// The stand-in tokenizer when the simulator has no `tokenizer.json`: every 4 characters make a
/// token (the last one may be shorter), so the count is `ceil(chars / 4)` and blocks still cover
/// real prefixes of the text.
#[derive(Debug)]
pub(crate) struct StandIn {
    hasher: BlockHasher,
    acc: u64,
    n: u8,
}

impl StandIn {
    pub(crate) fn new(block_tokens: u32) -> Self {
        StandIn {
            hasher: BlockHasher::new(block_tokens),
            acc: 0,
            n: 0,
        }
    }

    pub(crate) fn push_char(&mut self, c: char) {
        self.acc = self.acc.rotate_left(21) ^ u64::from(u32::from(c));
        self.n += 1;
        if self.n == 4 {
            self.hasher.push(self.acc);
            self.acc = 0;
            self.n = 0;
        }
    }

    pub(crate) fn finish(mut self) -> PromptBlocks {
        if self.n > 0 {
            self.hasher.push(self.acc);
        }
        self.hasher.finish()
    }
}

/// A block in the pool that holds a prompt block's hash.
#[derive(Clone, Copy, Debug)]
struct Cached {
    /// Running requests using it; 0 = free but kept for reuse (in the LRU).
    refs: u32,
    /// Its place in the LRU while `refs == 0`.
    tick: u64,
}

/// What a running request holds in the pool.
#[derive(Debug)]
pub(crate) struct Lease {
    /// Its full prompt blocks (each referenced once).
    hashes: Vec<u64>,
    /// Prompt tokens.
    prompt_tokens: u64,
    /// Blocks past the full prompt blocks: the prompt's partial tail and the output.
    private_total: u64,
    /// Of those, the ones filled so far.
    private_filled: u64,
    /// Prompt tokens found cached.
    pub(crate) hit_tokens: u64,
    /// The pool's block size.
    block_tokens: u32,
}

impl Lease {
    /// Whether [`KvPool::grow`] would fill a new block at `emitted` output tokens (so callers
    /// take the pool's lock only then, once a block).
    pub(crate) fn grows_at(&self, emitted: u64) -> bool {
        let full = self.hashes.len() as u64;
        let blocks = (self.prompt_tokens + emitted).div_ceil(u64::from(self.block_tokens));
        (blocks - full).min(self.private_total) > self.private_filled
    }
}

/// One engine's KV blocks.
#[derive(Debug)]
pub(crate) struct KvPool {
    capacity: u64,
    block_tokens: u32,
    cached: HashMap<u64, Cached>,
    /// Free cached blocks, least recently freed first (evicted from the front).
    lru: BTreeMap<u64, u64>,
    tick: u64,
    /// Hashed blocks with `refs > 0`.
    referenced: u64,
    /// Unhashed blocks filled by running requests.
    private_filled: u64,
    /// Unhashed blocks reserved by running requests, not yet filled.
    private_reserved: u64,
}

impl KvPool {
    pub(crate) fn new(capacity: u64, block_tokens: u32) -> Self {
        KvPool {
            capacity: capacity.max(1),
            block_tokens: block_tokens.max(1),
            cached: HashMap::new(),
            lru: BTreeMap::new(),
            tick: 0,
            referenced: 0,
            private_filled: 0,
            private_reserved: 0,
        }
    }

    fn blocks_for(&self, tokens: u64) -> u64 {
        // `SimConfig::context_limit` keeps every request within the pool: it always fits once
        // the pool drains.
        tokens.div_ceil(u64::from(self.block_tokens))
    }

    /// Fraction of blocks in use by running requests (vLLM's `kv_cache_usage_perc`, 0..1).
    pub(crate) fn usage(&self) -> f64 {
        (self.referenced + self.private_filled) as f64 / self.capacity as f64
    }

    /// Blocks the pool can hand out now: never used, or free and cached (evictable).
    fn available(&self) -> u64 {
        self.capacity - self.referenced - self.private_filled - self.private_reserved
    }

    /// Tokens of the leading run of cached full blocks, capped at `prompt - 1` (vLLM recomputes
    /// the last prompt token, so a hit never covers it).
    pub(crate) fn lookup(&self, p: &PromptBlocks) -> u64 {
        let b = u64::from(self.block_tokens);
        let max_blocks = (p.tokens.saturating_sub(1) / b) as usize;
        let run = p
            .hashes
            .iter()
            .take(max_blocks)
            .take_while(|h| self.cached.contains_key(h))
            .count();
        run as u64 * b
    }

    /// Admits a request of prompt `p` and `max_tokens` output if its blocks fit now: references
    /// the cached blocks it shares, fills new blocks for the rest of its prompt (evicting the
    /// least recently freed cached blocks as needed) and reserves its output.
    pub(crate) fn try_admit(&mut self, p: &PromptBlocks, max_tokens: u64) -> Option<Lease> {
        let full = p.hashes.len() as u64;
        let private_total = self.blocks_for(p.tokens + max_tokens) - full;
        // Blocks already cached are shared; the free ones among them stop being evictable.
        let (mut shared, mut shared_free) = (0u64, 0u64);
        for h in &p.hashes {
            if let Some(c) = self.cached.get(h) {
                shared += 1;
                shared_free += u64::from(c.refs == 0);
            }
        }
        let need = (full - shared) + private_total;
        if need + shared_free > self.available() {
            return None;
        }
        let hit_tokens = self.lookup(p);
        // Pin the shared blocks first, so making room for the new ones cannot evict them.
        let mut missing = Vec::new();
        for h in &p.hashes {
            match self.cached.get_mut(h) {
                Some(c) => {
                    if c.refs == 0 {
                        self.lru.remove(&c.tick);
                        self.referenced += 1;
                    }
                    c.refs += 1;
                }
                None => missing.push(*h),
            }
        }
        for h in missing {
            self.make_room();
            self.cached.insert(h, Cached { refs: 1, tick: 0 });
            self.referenced += 1;
        }
        for _ in 0..private_total {
            self.make_room();
            self.private_reserved += 1;
        }
        let filled = self.blocks_for(p.tokens) - full;
        self.private_reserved -= filled;
        self.private_filled += filled;
        Some(Lease {
            hashes: p.hashes.clone(),
            prompt_tokens: p.tokens,
            private_total,
            private_filled: filled,
            hit_tokens,
            block_tokens: self.block_tokens,
        })
    }

    /// Evicts the least recently freed cached block if the pool has no never-used block left for
    /// one more block.
    fn make_room(&mut self) {
        let in_pool = self.cached.len() as u64 + self.private_filled + self.private_reserved;
        if in_pool < self.capacity {
            return;
        }
        if let Some((_, h)) = self.lru.pop_first() {
            self.cached.remove(&h);
        }
    }

    /// The request has `emitted` output tokens: fills the reserved blocks they reach.
    pub(crate) fn grow(&mut self, lease: &mut Lease, emitted: u64) {
        let full = lease.hashes.len() as u64;
        let want = (self.blocks_for(lease.prompt_tokens + emitted) - full).min(lease.private_total);
        if want > lease.private_filled {
            let more = want - lease.private_filled;
            lease.private_filled = want;
            self.private_filled += more;
            self.private_reserved -= more;
        }
    }

    /// The request ended: its output blocks are freed, its prompt blocks stay cached (free) and
    /// join the LRU, the last block first so a prefix's tail is evicted before its head.
    pub(crate) fn release(&mut self, lease: Lease) {
        self.private_filled -= lease.private_filled;
        self.private_reserved -= lease.private_total - lease.private_filled;
        for h in lease.hashes.iter().rev() {
            if let Some(c) = self.cached.get_mut(h) {
                c.refs -= 1;
                if c.refs == 0 {
                    self.tick += 1;
                    c.tick = self.tick;
                    self.lru.insert(self.tick, *h);
                    self.referenced -= 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A prompt of `n` tokens whose ids are `base..base+n`, blocks of 4.
    fn prompt(ids: impl IntoIterator<Item = u64>) -> PromptBlocks {
        let mut h = BlockHasher::new(4);
        for id in ids {
            h.push(id);
        }
        h.finish()
    }

    #[test]
    fn blocks_chain_so_a_block_hits_only_after_the_same_prefix() {
        let a = prompt(0..8);
        let b = prompt([9, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(a.hashes.len(), 2);
        // The second blocks hold the same tokens, but their prefixes differ.
        assert_ne!(a.hashes[1], b.hashes[1]);
        assert_eq!(prompt(0..10).hashes, a.hashes);
        assert_eq!(prompt(0..3).tokens, 3);
        assert!(prompt(0..3).hashes.is_empty());
        assert_eq!(prompt([]).tokens, 1);
    }

    #[test]
    fn stand_in_counts_four_chars_a_token() {
        let mut s = StandIn::new(16);
        "abcdefghi".chars().for_each(|c| s.push_char(c));
        assert_eq!(s.finish().tokens, 3);
    }

    #[test]
    fn hits_count_the_leading_cached_run_capped_below_the_last_token() {
        let mut pool = KvPool::new(100, 4);
        let first = pool.try_admit(&prompt(0..10), 2).unwrap();
        assert_eq!(first.hit_tokens, 0);
        pool.release(first);
        // Same 8-token prefix, then a different tail: two blocks hit.
        let second = pool
            .try_admit(&prompt((0..8).chain([50, 51, 52])), 2)
            .unwrap();
        assert_eq!(second.hit_tokens, 8);
        pool.release(second);
        // A diverging first block: nothing hits, even though block 2 holds the same tokens.
        let third = pool
            .try_admit(&prompt([99, 1, 2, 3, 4, 5, 6, 7, 8, 9]), 2)
            .unwrap();
        assert_eq!(third.hit_tokens, 0);
        pool.release(third);
        // A fully cached 8-token prompt recomputes its last block: 4 tokens hit, not 8.
        let fourth = pool.try_admit(&prompt(0..8), 2).unwrap();
        assert_eq!(fourth.hit_tokens, 4);
        pool.release(fourth);
    }

    #[test]
    fn usage_counts_filled_blocks_and_admission_counts_reservations() {
        let mut pool = KvPool::new(4, 4);
        // 6 prompt tokens, 6 output: 3 blocks in all, 2 filled at once (a full one, a tail).
        let mut lease = pool.try_admit(&prompt(0..6), 6).unwrap();
        assert_eq!(pool.usage(), 0.5);
        // Only one block is left unreserved: a 2-block request waits.
        assert!(pool.try_admit(&prompt(100..105), 2).is_none());
        pool.grow(&mut lease, 2);
        assert_eq!(pool.usage(), 0.5);
        assert!(!lease.grows_at(2) && lease.grows_at(3));
        pool.grow(&mut lease, 3);
        assert_eq!(pool.usage(), 0.75);
        pool.release(lease);
        assert_eq!(pool.usage(), 0.0);
    }

    #[test]
    fn eviction_at_capacity_drops_the_least_recently_freed_tail_first() {
        // Room for 3 blocks: each request is 2 prompt blocks and 1 output block.
        let mut pool = KvPool::new(3, 4);
        let a = pool.try_admit(&prompt(0..8), 4).unwrap();
        pool.release(a);
        // B needs all 3 blocks: both of A's cached blocks are evicted, tail first.
        let b = pool.try_admit(&prompt(100..108), 4).unwrap();
        assert_eq!(b.hit_tokens, 0);
        pool.release(b);
        assert_eq!(pool.lookup(&prompt(0..9)), 0);
        assert_eq!(pool.lookup(&prompt(100..109)), 8);
        // A 1-block prompt plus output needs 2 blocks: only B's tail (freed first) goes.
        let c = pool.try_admit(&prompt(200..203), 4).unwrap();
        pool.release(c);
        assert_eq!(pool.lookup(&prompt(100..109)), 4);
    }
}
