//! A message's text as the content of a JSON string, escaped once and held as shared slices.
//!
//! AgentX prompts are cut from one corpus pool (spaces and ASCII letters: nothing to escape),
//! so a 100k-token message is a few hundred slices of the pool's buffer plus, on the first user
//! message, the escaped cache-bust marker. The wire writes the slices as they are; nothing
//! joins them into one string per request.

use std::fmt;

use bytes::Bytes;

/// Escaped JSON string content (without the quotes), as slices in order.
#[derive(Clone, Default)]
pub struct Text {
    parts: Vec<Bytes>,
    /// The buffer the slices are cut from, when they are the corpus pool's: a body keeps them
    /// as offsets into it.
    base: Option<Bytes>,
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
    /// Slices that need no escaping (checked in debug builds): the corpus pool's.
    pub(crate) fn verbatim(parts: Vec<Bytes>) -> Text {
        debug_assert!(parts.iter().all(|p| plain_json(p)));
        Text { parts, base: None }
    }

    /// [`Self::verbatim`] slices, all cut from `base`.
    pub(crate) fn slices_of(base: &Bytes, parts: Vec<Bytes>) -> Text {
        Text {
            base: Some(base.clone()),
            ..Text::verbatim(parts)
        }
    }

    /// The buffer its slices are cut from, when known.
    pub(crate) fn base(&self) -> Option<&Bytes> {
        self.base.as_ref()
    }

    /// The escaped slices, in order.
    pub fn parts(&self) -> &[Bytes] {
        &self.parts
    }

    /// The escaped length in bytes.
    pub fn escaped_len(&self) -> usize {
        self.parts.iter().map(Bytes::len).sum()
    }

    /// `other` in front of this text.
    pub fn prepend(&mut self, other: Text) {
        self.parts.splice(0..0, other.parts);
    }

    /// Whether the text starts with `s`.
    pub fn starts_with(&self, s: &str) -> bool {
        self.starts_with_escaped(&escape(s))
    }

    /// The text itself, unescaped (a copy: for checks and tests, not the request path).
    pub fn to_plain(&self) -> String {
        let mut quoted = Vec::with_capacity(self.escaped_len() + 2);
        quoted.push(b'"');
        self.parts.iter().for_each(|p| quoted.extend_from_slice(p));
        quoted.push(b'"');
        serde_json::from_slice(&quoted).expect("a Text holds escaped JSON string content")
    }

    fn escaped_eq(&self, other: &[u8]) -> bool {
        self.escaped_len() == other.len() && self.starts_with_escaped(other)
    }

    fn starts_with_escaped(&self, mut rest: &[u8]) -> bool {
        for p in &self.parts {
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
        Text {
            parts: vec![Bytes::from(escape(s))],
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
        let joined: Vec<u8> = other.parts.concat();
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
            &t.parts().concat()[..],
            &serde_json::to_vec(odd).unwrap()[1..serde_json::to_vec(odd).unwrap().len() - 1]
        );
        assert!(t.starts_with("a \"q\""));
        assert!(!t.starts_with("a \"x"));
        assert!(!t.starts_with(&format!("{odd}!")), "longer than the text");
    }

    #[test]
    fn slices_compare_and_prepend_as_one_text() {
        let mut t = Text::verbatim(vec![
            Bytes::from_static(b" one"),
            Bytes::from_static(b" two"),
        ]);
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
