//! A message's text as the content of a JSON string, escaped once and held as shared slices.
//!
//! AgentX prompts are cut from one corpus pool (spaces and ASCII letters: nothing to escape),
//! so a 100k-token message is a few hundred slices of the pool's buffer plus, on the first user
//! message, the escaped cache-bust marker. The wire writes the slices as they are; nothing
//! joins them into one string per request.

use std::fmt;
use std::ops::Range;

use bytes::Bytes;

/// Escaped JSON string content (without the quotes), as slices in order.
///
/// A slice of the corpus pool is a range into it (12 bytes, no reference count touched), so
/// building, sending and dropping a 100k-token prompt of ~1,500 blocks costs no atomic
/// operation per block on the pool's one shared count.
#[derive(Clone, Default)]
pub struct Text {
    /// The buffer [`Piece::Base`] ranges index (the corpus pool), when any.
    base: Option<Bytes>,
    /// Escaped bytes of its own ([`Piece::Own`]): the cache-bust marker, a text made from a
    /// string.
    own: Vec<Bytes>,
    pieces: Vec<Piece>,
}

/// One slice of a [`Text`].
#[derive(Clone, Copy, Debug, PartialEq)]
enum Piece {
    /// `base[start..end]`.
    Base { start: u32, end: u32 },
    /// `own[i]`.
    Own(u32),
}

/// A slice of a [`Text`], as a body writer takes it.
pub(crate) enum Chunk<'a> {
    /// `range` of the text's [`Text::base`].
    Base(Range<usize>),
    /// Bytes of the text's own.
    Own(&'a Bytes),
}

/// Whether `bytes` need no JSON escaping (what `serde_json` leaves as it is).
fn plain_json(bytes: &[u8]) -> bool {
    bytes.iter().all(|&b| b >= 0x20 && b != b'"' && b != b'\\')
}

/// `s` escaped as `serde_json` writes a string, without the quotes.
fn escape(s: &str) -> Vec<u8> {
    let mut quoted = serde_json::to_vec(s).expect("a str always serializes");
    quoted.pop();
    quoted.remove(0);
    quoted
}

impl Text {
    /// An empty text whose slices will be ranges of `base`, which needs no escaping (checked
    /// in debug builds): the corpus pool.
    pub(crate) fn of_base(base: &Bytes, capacity: usize) -> Text {
        debug_assert!(plain_json(base));
        debug_assert!(base.len() <= u32::MAX as usize);
        Text {
            base: Some(base.clone()),
            own: Vec::new(),
            pieces: Vec::with_capacity(capacity),
        }
    }

    /// Appends `base[start..end]` (an empty range is nothing).
    pub(crate) fn push_base(&mut self, start: usize, end: usize) {
        debug_assert!(self.base.as_ref().is_some_and(|b| end <= b.len()) && start <= end);
        if start < end {
            self.pieces.push(Piece::Base {
                start: start as u32,
                end: end as u32,
            });
        }
    }

    /// The buffer its ranges index, when it has any.
    pub(crate) fn base(&self) -> Option<&Bytes> {
        self.base.as_ref()
    }

    /// Its slices in order, ranges of [`Self::base`] as ranges.
    pub(crate) fn chunks(&self) -> impl Iterator<Item = Chunk<'_>> {
        self.pieces.iter().map(|p| match *p {
            Piece::Base { start, end } => Chunk::Base(start as usize..end as usize),
            Piece::Own(i) => Chunk::Own(&self.own[i as usize]),
        })
    }

    /// The escaped slices, in order.
    pub fn parts(&self) -> impl Iterator<Item = &[u8]> {
        self.chunks().map(|c| match c {
            Chunk::Base(r) => &self.base.as_ref().expect("a range has its base")[r],
            Chunk::Own(b) => &b[..],
        })
    }

    /// The escaped length in bytes.
    pub fn escaped_len(&self) -> usize {
        self.parts().map(<[u8]>::len).sum()
    }

    /// `other` in front of this text.
    pub fn prepend(&mut self, other: Text) {
        let same_base = match (&self.base, &other.base) {
            (Some(a), Some(b)) => a.as_ptr() == b.as_ptr() && a.len() == b.len(),
            _ => true,
        };
        if self.base.is_none() {
            self.base = other.base.clone();
        }
        let mut front = Vec::with_capacity(other.pieces.len() + self.pieces.len());
        let mut own = Vec::with_capacity(other.own.len() + self.own.len());
        for p in &other.pieces {
            front.push(match *p {
                Piece::Own(i) => {
                    own.push(other.own[i as usize].clone());
                    Piece::Own(own.len() as u32 - 1)
                }
                Piece::Base { start, end } if !same_base => {
                    let b = other.base.as_ref().expect("a range has its base");
                    own.push(b.slice(start as usize..end as usize));
                    Piece::Own(own.len() as u32 - 1)
                }
                base @ Piece::Base { .. } => base,
            });
        }
        let added = own.len() as u32;
        for p in &mut self.pieces {
            if let Piece::Own(i) = p {
                *i += added;
            }
        }
        own.append(&mut self.own);
        self.own = own;
        front.append(&mut self.pieces);
        self.pieces = front;
    }

    /// Whether the text starts with `s`.
    pub fn starts_with(&self, s: &str) -> bool {
        self.starts_with_escaped(&escape(s))
    }

    /// The text itself, unescaped (a copy: for checks and tests, not the request path).
    pub fn to_plain(&self) -> String {
        let mut quoted = Vec::with_capacity(self.escaped_len() + 2);
        quoted.push(b'"');
        self.parts().for_each(|p| quoted.extend_from_slice(p));
        quoted.push(b'"');
        serde_json::from_slice(&quoted).expect("a Text holds escaped JSON string content")
    }

    fn escaped_eq(&self, other: &[u8]) -> bool {
        self.escaped_len() == other.len() && self.starts_with_escaped(other)
    }

    fn starts_with_escaped(&self, mut rest: &[u8]) -> bool {
        for p in self.parts() {
            let n = p.len().min(rest.len());
            if p[..n] != rest[..n] {
                return false;
            }
            rest = &rest[n..];
        }
        rest.is_empty()
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Text {
        let own = Bytes::from(escape(s));
        let (own, pieces) = match own.is_empty() {
            true => (Vec::new(), Vec::new()),
            false => (vec![own], vec![Piece::Own(0)]),
        };
        Text {
            own,
            pieces,
            base: None,
        }
    }
}

impl From<String> for Text {
    fn from(s: String) -> Text {
        Text::from(s.as_str())
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Text) -> bool {
        let joined: Vec<u8> = other.parts().flatten().copied().collect();
        self.escaped_eq(&joined)
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.escaped_eq(&escape(other))
    }
}

impl PartialEq<String> for Text {
    fn eq(&self, other: &String) -> bool {
        self.escaped_eq(&escape(other))
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_plain(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_once_and_reads_back() {
        let odd = "a \"q\" \\ tab\t nl\n ü 🍕 \u{1}";
        let t = Text::from(odd);
        assert_eq!(t.to_plain(), odd);
        assert_eq!(t, odd);
        assert_eq!(
            &t.parts().flatten().copied().collect::<Vec<u8>>()[..],
            &serde_json::to_vec(odd).unwrap()[1..serde_json::to_vec(odd).unwrap().len() - 1]
        );
        assert!(t.starts_with("a \"q\""));
        assert!(!t.starts_with("a \"x"));
        assert!(!t.starts_with(&format!("{odd}!")), "longer than the text");
    }

    #[test]
    fn slices_compare_and_prepend_as_one_text() {
        let pool = Bytes::from_static(b" one two");
        let mut t = Text::of_base(&pool, 2);
        t.push_base(0, 4);
        t.push_base(4, 8);
        t.push_base(8, 8);
        assert_eq!(t, " one two");
        assert!(t.starts_with(" one t"), "across slices");
        t.prepend(Text::from("[rid:x]\n\n"));
        assert_eq!(t.to_plain(), "[rid:x]\n\n one two");
        assert_eq!(t.escaped_len(), "[rid:x]\\n\\n one two".len());
        assert!(t.starts_with("[rid:x]\n\n"));
        assert_eq!(
            t,
            Text::from("[rid:x]\n\n one two"),
            "slicing does not matter"
        );
        assert_ne!(t, Text::from("[rid:x]\n\n one tw"));
    }
}
