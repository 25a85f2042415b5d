//! A turn's KV block ids, stored once per conversation.
//!
//! A conversation's turn mostly repeats the previous turn's blocks and appends a few: a recorded
//! session's ~100k-token context is ~1,500 ids per request, so the default corpus's 58k requests
//! hold 85 M ids (323 MiB as lists) of which 4 M (15 MiB) are new to their turn. Each
//! conversation keeps one arena of the ids its turns added, and a turn is the ranges of it that
//! spell its ids:
//!
//! ```text
//! turn k-1: [a b c d]        arena: a b c d | e f | x y
//! turn k:   [a b c d e f]    ─► ranges (0..6)            (kept all, appended e f: merged)
//! turn k+1: [a b x y]        ─► ranges (0..2), (6..8)    (kept a b, appended x y)
//! ```

use std::fmt;
use std::sync::Arc;

/// The block ids of one turn.
#[derive(Clone, Default)]
pub struct BlockIds {
    arena: Arc<[u32]>,
    /// Half-open ranges of `arena`, in order; consecutive ranges are never adjacent in it.
    ranges: Vec<(u32, u32)>,
    len: usize,
}

impl BlockIds {
    /// How many ids.
    pub fn len(&self) -> usize {
        self.len
    }

    /// No ids.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The ids in order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.chunks(0, self.len).flatten().copied()
    }

    /// The ids at positions `from..to` (panics past the end, as slicing does).
    pub fn range(&self, from: usize, to: usize) -> impl Iterator<Item = u32> + '_ {
        self.chunks(from, to).flatten().copied()
    }

    /// The ids at positions `from..to` as slices of the arena, in order (loops over them run at
    /// slice speed; the corpus's load walks 85 M ids).
    pub fn chunks(&self, from: usize, to: usize) -> impl Iterator<Item = &[u32]> + '_ {
        assert!(
            from <= to && to <= self.len,
            "block ids {from}..{to} of {}",
            self.len
        );
        let (mut skip, mut take) = (from, to - from);
        self.ranges.iter().map_while(move |&(a, b)| {
            if take == 0 {
                return None;
            }
            let (a, b) = (a as usize, b as usize);
            if skip >= b - a {
                skip -= b - a;
                return Some(&self.arena[a..a]);
            }
            let start = a + skip;
            let end = (start + take).min(b);
            skip = 0;
            take -= end - start;
            Some(&self.arena[start..end])
        })
    }

    /// How many leading ids `self` and `other` share.
    pub fn common_prefix(&self, other: &BlockIds) -> usize {
        let mut mine = self.chunks(0, self.len).filter(|c| !c.is_empty());
        let mut theirs = other.chunks(0, other.len).filter(|c| !c.is_empty());
        let (mut a, mut b): (&[u32], &[u32]) = (&[], &[]);
        let mut same = 0;
        loop {
            if a.is_empty() {
                match mine.next() {
                    Some(c) => a = c,
                    None => return same,
                }
            }
            if b.is_empty() {
                match theirs.next() {
                    Some(c) => b = c,
                    None => return same,
                }
            }
            let n = a.len().min(b.len());
            // Turns of one conversation share ranges of one arena: the same slice is equal.
            let equal = std::ptr::eq(a.as_ptr(), b.as_ptr())
                || a[..n].iter().zip(&b[..n]).all(|(x, y)| x == y);
            if !equal {
                return same
                    + a[..n]
                        .iter()
                        .zip(&b[..n])
                        .take_while(|(x, y)| x == y)
                        .count();
            }
            same += n;
            a = &a[n..];
            b = &b[n..];
        }
    }

    /// The ids as a list.
    pub fn to_vec(&self) -> Vec<u32> {
        self.iter().collect()
    }

    /// The block ids of a conversation's turns, given in order: one arena for all of them.
    pub(crate) fn conversation<'a>(turns: impl IntoIterator<Item = &'a [u32]>) -> Vec<BlockIds> {
        let mut arena: Vec<u32> = Vec::new();
        let mut out: Vec<(Vec<(u32, u32)>, usize)> = Vec::new();
        let mut prev: &[u32] = &[];
        let mut ranges: Vec<(u32, u32)> = Vec::new();
        for ids in turns {
            let keep = prev.iter().zip(ids).take_while(|(a, b)| a == b).count();
            truncate(&mut ranges, keep);
            if keep < ids.len() {
                let start = arena.len() as u32;
                arena.extend_from_slice(&ids[keep..]);
                let end = arena.len() as u32;
                match ranges.last_mut() {
                    Some(last) if last.1 == start => last.1 = end,
                    _ => ranges.push((start, end)),
                }
            }
            out.push((ranges.clone(), ids.len()));
            prev = ids;
        }
        let arena: Arc<[u32]> = arena.into();
        out.into_iter()
            .map(|(ranges, len)| BlockIds {
                arena: arena.clone(),
                ranges,
                len,
            })
            .collect()
    }
}

/// Keeps the first `keep` ids of `ranges`.
fn truncate(ranges: &mut Vec<(u32, u32)>, keep: usize) {
    let mut left = keep as u32;
    let mut n = 0;
    for r in ranges.iter_mut() {
        if left == 0 {
            break;
        }
        let len = r.1 - r.0;
        if len > left {
            r.1 = r.0 + left;
        }
        left -= len.min(left);
        n += 1;
    }
    ranges.truncate(n);
}

impl From<Vec<u32>> for BlockIds {
    fn from(ids: Vec<u32>) -> BlockIds {
        let len = ids.len();
        BlockIds {
            ranges: if len == 0 {
                Vec::new()
            } else {
                vec![(0, len as u32)]
            },
            arena: ids.into(),
            len,
        }
    }
}

impl PartialEq for BlockIds {
    fn eq(&self, other: &BlockIds) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl fmt::Debug for BlockIds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_read_back_as_given_from_one_arena() {
        let turns: Vec<Vec<u32>> = vec![
            vec![1, 2, 3, 4],
            vec![1, 2, 3, 4, 5, 6],
            vec![1, 2, 9, 9],
            vec![],
            vec![1, 2, 9, 9, 7],
            vec![1, 2, 9],
            vec![8],
            vec![8, 8, 8, 1, 2],
        ];
        let ids = BlockIds::conversation(turns.iter().map(Vec::as_slice));
        for (got, want) in ids.iter().zip(&turns) {
            assert_eq!(&got.to_vec(), want);
            assert_eq!(got.len(), want.len());
            assert_eq!(got, &BlockIds::from(want.clone()));
            for from in 0..=want.len() {
                for to in from..=want.len() {
                    let r: Vec<u32> = got.range(from, to).collect();
                    assert_eq!(r, want[from..to], "{want:?} {from}..{to}");
                }
            }
        }
        // Only what each turn added to the one before it is stored: 4 + 2 + 2 + 0 + 5 (after
        // the empty turn) + 0 + 1 + 4.
        assert_eq!(ids[0].arena.len(), 18);
        assert!(Arc::ptr_eq(&ids[0].arena, &ids[7].arena));
        // Appending to the whole previous turn extends its range.
        assert_eq!(ids[1].ranges, [(0, 6)]);
        assert_eq!(ids[2].ranges, [(0, 2), (6, 8)]);
        assert_eq!(ids[4].ranges, [(8, 13)]);
        assert_eq!(ids[5].ranges, [(8, 11)]);
        for (i, x) in ids.iter().enumerate() {
            for (j, y) in ids.iter().enumerate() {
                let want = turns[i]
                    .iter()
                    .zip(&turns[j])
                    .take_while(|(a, b)| a == b)
                    .count();
                assert_eq!(x.common_prefix(y), want, "turns {i} and {j}");
                assert_eq!(x.common_prefix(&BlockIds::from(turns[j].clone())), want);
            }
        }
        assert_eq!(ids[1].common_prefix(&ids[2]), 2);
        assert_eq!(ids[2].common_prefix(&ids[4]), 4);
        assert_ne!(ids[2], ids[4]);
    }

    #[test]
    #[should_panic(expected = "block ids 2..5 of 4")]
    fn a_range_past_the_end_panics() {
        let ids = BlockIds::from(vec![1, 2, 3, 4]);
        let _ = ids.range(2, 5).count();
    }
}
