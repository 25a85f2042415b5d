//! The fast path of [`classify`](super::classify): one strict pass over the shape nearly every
//! streamed chunk has (an object of plain keys, `choices` with text or a delta, no usage, no
//! error), without serde's per-field machinery.
//!
//! It answers only where the full parser would give the same [`Event`], and `None` everywhere
//! else, so the full parser decides every other input, errors included:
//! - it is stricter than JSON itself: any key with an escape, any known key given twice, nesting
//!   past [`DEEPEST`], or input that is not UTF-8 gives `None`;
//! - a chunk with `usage`, `error`, `message`, a speculative-decoding field or an `error` object
//!   gives `None` (one chunk per response, at most: the full parser reads it);
//! - strings, numbers and literals are checked as strictly as serde_json checks them (escapes,
//!   control characters, number syntax), so what serde would reject is never answered here.
//!
//! `sse`'s own tests and the `sse` fuzz entry point check that every answer equals the full
//! parser's.

use super::{non_empty_raw, ChunkInfo, Event};

/// Deepest nesting answered (serde_json's own limit is 128).
const DEEPEST: u32 = 64;

/// The event of `data` (already trimmed, not `[DONE]`), where it has the common shape.
pub(super) fn common(data: &[u8]) -> Option<Event> {
    // serde_json checks UTF-8 only in what it borrows; valid input leaves nothing to differ on.
    let text = std::str::from_utf8(data).ok()?;
    let mut s = Scan {
        text,
        b: data,
        at: 0,
    };
    let mut info = ChunkInfo::default();
    let mut seen = Seen::default();
    s.ws();
    s.object(1, |s, key| {
        match key {
            b"choices" => {
                seen.once(0)?;
                if !s.null() {
                    s.choices(&mut info)?;
                }
            }
            b"usage" => {
                seen.once(1)?;
                if !s.null() {
                    return None;
                }
            }
            b"object" => {
                seen.once(2)?;
                if !s.null() && s.plain_str()? == "error" {
                    return None;
                }
            }
            b"error" | b"message" | b"metrics" | b"sglext" | b"timings" => return None,
            _ => s.skip(1)?,
        }
        Some(())
    })?;
    s.ws();
    (s.at == s.b.len()).then_some(Event::Chunk(info))
}

/// The known keys of one object read so far, a bit each.
#[derive(Default)]
struct Seen(u8);

impl Seen {
    /// `None` on a known key's second appearance (serde: "duplicate field").
    fn once(&mut self, bit: u8) -> Option<()> {
        let m = 1 << bit;
        if self.0 & m != 0 {
            return None;
        }
        self.0 |= m;
        Some(())
    }
}

struct Scan<'a> {
    /// The input, checked UTF-8 once; `b` is its bytes.
    text: &'a str,
    b: &'a [u8],
    at: usize,
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.at).copied()
    }

    fn bump(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.at += 1;
        Some(c)
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.bump()? == c).then_some(())
    }

    /// JSON's whitespace (serde_json's set exactly).
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    /// Consumes a `null` here, if there is one.
    fn null(&mut self) -> bool {
        let yes = self.b[self.at..].starts_with(b"null");
        if yes {
            self.at += 4;
        }
        yes
    }

    /// `{ "key": value, ... }`, calling `field` with each key once the colon is read; `field`
    /// reads the value.
    fn object(
        &mut self,
        depth: u32,
        mut field: impl FnMut(&mut Self, &'a [u8]) -> Option<()>,
    ) -> Option<()> {
        self.list(depth, b'{', b'}', |s| {
            let key = s.plain_str()?.as_bytes();
            s.ws();
            s.eat(b':')?;
            s.ws();
            field(s, key)
        })
    }

    /// `[ value, ... ]`, calling `item` to read each value.
    fn array(&mut self, depth: u32, item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.list(depth, b'[', b']', item)
    }

    /// `open item, ... close`, with JSON's whitespace around each item.
    fn list(
        &mut self,
        depth: u32,
        open: u8,
        close: u8,
        mut item: impl FnMut(&mut Self) -> Option<()>,
    ) -> Option<()> {
        if depth > DEEPEST {
            return None;
        }
        self.eat(open)?;
        self.ws();
        if self.peek()? == close {
            self.at += 1;
            return Some(());
        }
        loop {
            item(self)?;
            self.ws();
            match self.bump()? {
                b',' => self.ws(),
                c if c == close => return Some(()),
                _ => return None,
            }
        }
    }

    /// A string without escapes (what serde can borrow), its quotes consumed.
    fn plain_str(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.at;
        loop {
            match self.bump()? {
                b'"' => break,
                b'\\' => return None,
                c if c < 0x20 => return None,
                _ => {}
            }
        }
        // A quote is never inside a character, so these are character boundaries.
        self.text.get(start..self.at - 1)
    }

    /// Any string, checked as serde_json checks one it skips.
    fn string(&mut self) -> Option<()> {
        self.eat(b'"')?;
        loop {
            match self.bump()? {
                b'"' => return Some(()),
                b'\\' => match self.bump()? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                    b'u' => {
                        for _ in 0..4 {
                            if !self.bump()?.is_ascii_hexdigit() {
                                return None;
                            }
                        }
                    }
                    _ => return None,
                },
                c if c < 0x20 => return None,
                _ => {}
            }
        }
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    fn number(&mut self) -> Option<()> {
        if self.peek()? == b'-' {
            self.at += 1;
        }
        match self.bump()? {
            b'0' => {}
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            self.some_digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            self.some_digits()?;
        }
        // serde rejects a digit right after a leading zero; so does the caller's delimiter check.
        Some(())
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
    }

    fn some_digits(&mut self) -> Option<()> {
        let start = self.at;
        self.digits();
        (self.at > start).then_some(())
    }

    /// Any value, checked and passed over.
    fn skip(&mut self, depth: u32) -> Option<()> {
        match self.peek()? {
            b'"' => self.string(),
            b'{' => self.object(depth + 1, |s, _| s.skip(depth + 1)),
            b'[' => self.array(depth + 1, |s| s.skip(depth + 1)),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number(),
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.b[self.at..]
            .starts_with(word)
            .then(|| self.at += word.len())
    }

    /// A value passed over, as its raw text (`None` for `null`, as serde reads an
    /// `Option<&RawValue>`).
    fn raw(&mut self, depth: u32) -> Option<Option<&'a [u8]>> {
        if self.null() {
            return Some(None);
        }
        let start = self.at;
        self.skip(depth)?;
        Some(Some(&self.b[start..self.at]))
    }

    /// `choices`: each choice folded into `info` as the full parser folds it.
    fn choices(&mut self, info: &mut ChunkInfo) -> Option<()> {
        self.array(2, |s| {
            let mut seen = Seen::default();
            let mut finish = None;
            let mut delta = false;
            s.object(3, |s, key| {
                match key {
                    b"delta" | b"message" => {
                        seen.once(if key == b"delta" { 0 } else { 1 })?;
                        if !s.null() {
                            delta |= key == b"delta";
                            s.message(info)?;
                        }
                    }
                    b"text" => {
                        seen.once(2)?;
                        info.content |= non_empty_raw(s.raw(3)?);
                    }
                    b"finish_reason" => {
                        seen.once(3)?;
                        if !s.null() {
                            finish = Some(s.plain_str()?);
                        }
                    }
                    b"index" => {
                        seen.once(4)?;
                        s.skip(3)?;
                    }
                    b"avg_decoded_tokens_per_iter" => return None,
                    _ => s.skip(3)?,
                }
                Some(())
            })?;
            if let Some(f) = finish {
                info.finish_reason = Some(f.to_owned());
            }
            if !info.choice {
                info.first_delta = delta;
            }
            info.choice = true;
            Some(())
        })
    }

    /// A choice's `delta` or `message`.
    fn message(&mut self, info: &mut ChunkInfo) -> Option<()> {
        let mut seen = Seen::default();
        self.object(4, |s, key| {
            match key {
                b"content" => {
                    seen.once(0)?;
                    info.content |= non_empty_raw(s.raw(4)?);
                }
                b"reasoning_content" | b"reasoning" => {
                    seen.once(if key == b"reasoning" { 1 } else { 2 })?;
                    info.reasoning |= non_empty_raw(s.raw(4)?);
                }
                _ => s.skip(4)?,
            }
            Some(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::assert_fast_path_agrees;
    use super::*;

    /// The chunks servers stream, each of which the fast path must answer.
    const COMMON: &[&str] = &[
        // specperf sim, vLLM, SGLang, Dynamo, llama.cpp, TensorRT-LLM without its ratio.
        r#"{"id":"cmpl-86016","object":"text_completion","created":1796589790,"model":"specperf-sim","choices":[{"index":0,"text":" fast","logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" code","logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":null}"#,
        r#"{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"a\n\"b\"\\ \u00e9\ud83d\ude00 é"},"finish_reason":null}],"usage":null}"#,
        r#"{"choices":[{"delta":{"reasoning_content":"hmm","content":null}}]}"#,
        r#"{"choices":[{"delta":{"reasoning":"hmm"}}],"system_fingerprint":"fp","created":-1.5e-3}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        r#"{"choices":[{"index":0,"text":"","finish_reason":null},{"index":1,"text":"x","finish_reason":"stop"}]}"#,
        r#"{"choices":[{"index":0,"text":"x","logprobs":{"tokens":["x"],"token_logprobs":[-0.25],"top_logprobs":[{"x":-0.25,"y":-2E+3}],"text_offset":[0]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"x","tool_calls":[{"id":"t","function":{"arguments":"{}"}}]},"matched_stop":true}]}"#,
        " { \"choices\" : [ { \"text\" : \"x\" , \"finish_reason\" : null } ] , \"usage\" : null }",
        r#"{"choices":null,"object":null,"created":0,"nested":{"a":[[],{},[{"b":false}],true]}}"#,
        r#"{"choices":[]}"#,
        r#"{}"#,
        r#"{"choices":[{"message":{"role":"assistant","content":[{"type":"text","text":"x"}]}}]}"#,
    ];

    /// Inputs the fast path must leave to the full parser (some valid, some not).
    const LEFT: &[&str] = &[
        r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":12}}"#,
        r#"{"error":{"message":"boom"}}"#,
        r#"{"object":"error","message":"bad"}"#,
        r#"{"choices":[{"text":"x","avg_decoded_tokens_per_iter":2.5}]}"#,
        r#"{"choices":[],"metrics":{"speculative_decoding":{}}}"#,
        r#"{"choices":[],"sglext":{}}"#,
        r#"{"choices":[],"timings":{}}"#,
        r#"{"ch\u006fices":[]}"#,
        r#"{"choices":[],"choices":[]}"#,
        r#"{"choices":[{"text":"a","text":"b"}]}"#,
        r#"{"choices":[{"finish_reason":"le\ngth"}]}"#,
        r#"{"choices":[{"finish_reason":1}]}"#,
        r#"{"choices":[{"text":"x"}]} x"#,
        r#"{"choices":[{"text":"x"},]}"#,
        r#"{"choices":[{"text":"\x"}]}"#,
        r#"{"choices":[{"text":"\u12"}]}"#,
        "{\"choices\":[{\"text\":\"a\u{1}b\"}]}",
        r#"{"created":01}"#,
        r#"{"created":1.}"#,
        r#"{"created":-}"#,
        r#"{"created":nul}"#,
        r#"[{"choices":[]}]"#,
        r#"{"choices":{"text":"x"}}"#,
        r#"{"object":"text_\u0063ompletion"}"#,
        "",
    ];

    #[test]
    fn the_common_chunks_take_the_fast_path_and_match_the_full_parser() {
        for c in COMMON {
            assert!(common(c.as_bytes()).is_some(), "not answered: {c}");
            assert_fast_path_agrees(c.as_bytes());
        }
        let deep = format!("{{\"x\":{}{}}}", "[".repeat(70), "]".repeat(70));
        assert!(common(deep.as_bytes()).is_none());
        assert!(common(b"{\"choices\":[{\"text\":\"\xff\"}]}").is_none());
    }

    #[test]
    fn the_rest_is_left_to_the_full_parser() {
        for c in LEFT {
            assert!(common(c.as_bytes()).is_none(), "answered: {c}");
        }
    }

    /// Every answer on tens of thousands of mutations of real chunks (bytes deleted, inserted,
    /// replaced, spans doubled) equals the full parser's.
    #[test]
    fn mutated_chunks_get_the_full_parsers_answer_or_none() {
        const BYTES: &[u8] = b"{}[]\",:\\ 0123456789.eE+-nultrfasx\n\x01\xc3";
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        let (mut answered, mut total) = (0, 0);
        for base in COMMON.iter().chain(LEFT) {
            for _ in 0..1500 {
                let mut m = base.as_bytes().to_vec();
                for _ in 0..1 + next(3) {
                    if m.is_empty() {
                        break;
                    }
                    let i = next(m.len());
                    match next(4) {
                        0 => {
                            m.remove(i);
                        }
                        1 => m.insert(i, BYTES[next(BYTES.len())]),
                        2 => m[i] = BYTES[next(BYTES.len())],
                        _ => {
                            let j = (i + 1 + next(8)).min(m.len());
                            let span = m[i..j].to_vec();
                            m.splice(j..j, span);
                        }
                    }
                }
                total += 1;
                answered += usize::from(common(&m).is_some());
                assert_fast_path_agrees(&m);
            }
        }
        // The check means something only if the fast path answers a fair share.
        assert!(answered * 20 > total, "{answered} of {total} answered");
    }
}
