//! A small YAML tree with source positions, built from `saphyr-parser` events.
//!
//! Used by `golden` (curve files) and `inject` (recipes). The injector never re-emits YAML: it
//! reads this tree only to validate a file and to locate the lines it must edit, then edits the
//! text itself, so comments, quoting and key order survive byte for byte. Input is bounded in
//! size ([`MAX_BYTES`]) and nesting ([`MAX_DEPTH`]); aliases are kept as references, never
//! expanded, so a hostile file cannot blow up memory.
//!
//! One file on purpose, although past 600 lines: the tree types, the event-to-tree builder with
//! its position bookkeeping, the core-schema scalar rules and the queries change together, and
//! the module keeps one `pub` item ([`YamlError`]).

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

/// Largest YAML input read, bytes.
pub(crate) const MAX_BYTES: u64 = 8 << 20;
/// Deepest nesting of mappings and sequences accepted.
pub(crate) const MAX_DEPTH: usize = 64;

/// Why a YAML input was rejected.
#[derive(Debug, thiserror::Error)]
pub enum YamlError {
    /// Reading the file failed.
    #[error("cannot read: {0}")]
    Io(#[from] std::io::Error),
    /// The file is larger than the input limit (8 MiB).
    #[error("larger than the {limit}-byte limit for YAML input (the YAML size cap)")]
    TooLarge {
        /// The limit, bytes.
        limit: u64,
    },
    /// The file is not UTF-8.
    #[error("not UTF-8 text")]
    NotUtf8,
    /// The scanner or parser rejected the text.
    #[error("unparseable YAML at line {line} column {col}: {msg}")]
    Syntax {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        col: usize,
        /// The parser's description.
        msg: String,
    },
    /// Mappings and sequences nest deeper than the limit (64 levels).
    #[error("YAML nested deeper than {limit} levels at line {line} (the YAML depth cap)")]
    TooDeep {
        /// The limit.
        limit: usize,
        /// 1-based line where the limit was crossed.
        line: usize,
    },
    /// Zero or several documents in one file.
    #[error("expected exactly one YAML document, found {0}")]
    Documents(usize),
    /// The same key twice in one mapping.
    #[error("duplicate key {key:?} at line {line} (first at line {first})")]
    DuplicateKey {
        /// The key.
        key: String,
        /// 1-based line of the second occurrence.
        line: usize,
        /// 1-based line of the first.
        first: usize,
    },
}

/// A position in the source: 1-based line, 0-based column counted in characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Pos {
    pub(crate) line: usize,
    pub(crate) col: usize,
}

/// How a scalar was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Style {
    Plain,
    SingleQuoted,
    DoubleQuoted,
    /// `|` or `>` block scalar.
    Block,
}

/// One node. `start`/`end` cover the node's text (quotes included; for a flow collection the
/// brackets; for a block collection `end` is where the next token starts).
#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub(crate) start: Pos,
    pub(crate) end: Pos,
    pub(crate) kind: Kind,
}

/// What a node is.
#[derive(Clone, Debug)]
pub(crate) enum Kind {
    Scalar {
        value: String,
        style: Style,
        /// Suffix of a core-schema tag (`!!str` -> `str`); `Some("")` for any other tag.
        tag: Option<String>,
    },
    Map {
        entries: Vec<(Node, Node)>,
        flow: bool,
    },
    Seq {
        items: Vec<Node>,
        flow: bool,
    },
    /// `*name`: the anchor id, resolved with [`Doc::anchored`].
    Alias(usize),
}

/// A scalar resolved with the YAML 1.2 core schema.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Scalar<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'a str),
}

impl Node {
    /// The scalar's text, if this is a scalar.
    pub(crate) fn as_str(&self) -> Option<&str> {
        match &self.kind {
            Kind::Scalar { value, .. } => Some(value),
            _ => None,
        }
    }

    /// Mapping entries, if this is a mapping.
    pub(crate) fn entries(&self) -> Option<&[(Node, Node)]> {
        match &self.kind {
            Kind::Map { entries, .. } => Some(entries),
            _ => None,
        }
    }

    /// The value under `key` in a mapping, with its key node; the last one of a duplicated key
    /// (see [`Duplicate`]).
    pub(crate) fn get_entry(&self, key: &str) -> Option<&(Node, Node)> {
        self.entries()?
            .iter()
            .rfind(|(k, _)| k.as_str() == Some(key))
    }

    /// The value under `key` in a mapping.
    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        self.get_entry(key).map(|(_, v)| v)
    }

    /// True for a mapping written in flow style (`{...}`).
    pub(crate) fn is_flow_map(&self) -> bool {
        matches!(self.kind, Kind::Map { flow: true, .. })
    }

    /// True for a mapping.
    pub(crate) fn is_map(&self) -> bool {
        matches!(self.kind, Kind::Map { .. })
    }

    /// The scalar typed by the YAML 1.2 core schema (quoted scalars are strings).
    pub(crate) fn scalar(&self) -> Option<Scalar<'_>> {
        let Kind::Scalar { value, style, tag } = &self.kind else {
            return None;
        };
        let v = value.as_str();
        Some(match tag.as_deref() {
            Some("str") | Some("") => Scalar::Str(v),
            Some("int") => parse_int(v).map_or(Scalar::Str(v), Scalar::Int),
            Some("float") => parse_float(v).map_or(Scalar::Str(v), Scalar::Float),
            Some("bool") => parse_bool(v).map_or(Scalar::Str(v), Scalar::Bool),
            Some("null") => Scalar::Null,
            _ if *style != Style::Plain => Scalar::Str(v),
            _ => resolve_plain(v),
        })
    }

    /// The last source line holding this node's text (for block collections, the last line of
    /// their last child; a block scalar ends on its last non-blank line).
    pub(crate) fn last_line(&self, src: &Source) -> usize {
        match &self.kind {
            Kind::Map { entries, flow } => match entries.last() {
                Some((_, v)) if !flow => v.last_line(src),
                _ => self.end.line,
            },
            Kind::Seq { items, flow } => match items.last() {
                Some(v) if !flow => v.last_line(src),
                _ => self.end.line,
            },
            Kind::Scalar {
                style: Style::Block,
                ..
            } => {
                // A block scalar "ends" where the next token starts; its text is the lines before
                // that, less trailing blank lines.
                let mut line = self.end.line.min(src.lines());
                let before_end = |l: usize| {
                    let text = src.line(l);
                    if l == self.end.line {
                        text.chars().take(self.end.col).collect::<String>()
                    } else {
                        text.to_owned()
                    }
                };
                while line > self.start.line && before_end(line).trim().is_empty() {
                    line -= 1;
                }
                line
            }
            _ => self.end.line,
        }
    }
}

fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "true" | "True" | "TRUE" => Some(true),
        "false" | "False" | "FALSE" => Some(false),
        _ => None,
    }
}

fn parse_int(v: &str) -> Option<i64> {
    let b = v.as_bytes();
    if let Some(h) = v.strip_prefix("0x") {
        return i64::from_str_radix(h, 16).ok();
    }
    if let Some(o) = v.strip_prefix("0o") {
        return i64::from_str_radix(o, 8).ok();
    }
    let digits = match b.first() {
        Some(b'-' | b'+') => &b[1..],
        _ => b,
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    v.parse().ok()
}

fn parse_float(v: &str) -> Option<f64> {
    match v {
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => return Some(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => return Some(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Some(f64::NAN),
        _ => {}
    }
    // Core schema: [-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?
    let b = v.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'-' | b'+')));
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let mut digits = i - int_start;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let f = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if digits == 0 && i == f {
            return None;
        }
        digits += i - f;
    }
    if digits == 0 {
        return None;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
            i += 1;
        }
        let e = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == e {
            return None;
        }
    }
    if i != b.len() {
        return None;
    }
    v.parse().ok()
}

fn resolve_plain(v: &str) -> Scalar<'_> {
    if matches!(v, "" | "~" | "null" | "Null" | "NULL") {
        return Scalar::Null;
    }
    if let Some(b) = parse_bool(v) {
        return Scalar::Bool(b);
    }
    if let Some(i) = parse_int(v) {
        return Scalar::Int(i);
    }
    if let Some(f) = parse_float(v) {
        return Scalar::Float(f);
    }
    Scalar::Str(v)
}

/// The source text split into lines, for position -> byte offset conversion.
#[derive(Debug)]
pub(crate) struct Source {
    text: String,
    /// Byte offset of each line's first byte.
    starts: Vec<usize>,
}

impl Source {
    pub(crate) fn new(text: String) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        if starts.last() == Some(&text.len()) && starts.len() > 1 {
            starts.pop();
        }
        Source { text, starts }
    }

    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// Number of lines.
    pub(crate) fn lines(&self) -> usize {
        self.starts.len()
    }

    /// Line `n` (1-based) with its terminator.
    pub(crate) fn line_with_end(&self, n: usize) -> &str {
        let s = self.starts[n - 1];
        let e = self.starts.get(n).copied().unwrap_or(self.text.len());
        &self.text[s..e]
    }

    /// Line `n` (1-based) without its terminator.
    pub(crate) fn line(&self, n: usize) -> &str {
        let l = self.line_with_end(n);
        l.strip_suffix('\n')
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
            .unwrap_or(l)
    }

    /// Byte offset of the line's first byte.
    pub(crate) fn line_start(&self, n: usize) -> usize {
        self.starts[n - 1]
    }

    /// Byte offset of a position.
    pub(crate) fn offset(&self, p: Pos) -> usize {
        if p.line > self.starts.len() {
            return self.text.len();
        }
        let line = self.line_with_end(p.line);
        let within = line
            .char_indices()
            .nth(p.col)
            .map_or(line.len(), |(i, _)| i);
        self.starts[p.line - 1] + within
    }

    /// The position of a byte offset.
    fn pos_of(&self, byte: usize) -> Pos {
        let line = self.starts.partition_point(|s| *s <= byte);
        let start = self.starts[line - 1];
        Pos {
            line,
            col: self.text[start..byte].chars().count(),
        }
    }

    /// The opening quote of the quoted scalar whose node starts at `start`: the parser starts
    /// the node at its properties (`&anchor`, `!tag`, in either order, then blanks, line breaks
    /// or a comment), so these are skipped. `None` when no quote follows (the parser and this
    /// source disagree on positions, which must fail the parse rather than point an edit at the
    /// wrong bytes).
    fn quoted_start(&self, start: Pos) -> Option<Pos> {
        let bytes = self.text.as_bytes();
        let mut i = self.offset(start);
        let mut after_blank = false;
        loop {
            match *bytes.get(i)? {
                b'"' | b'\'' => return Some(self.pos_of(i)),
                b'&' | b'!' => {
                    // A property runs to the next blank or line break (a verbatim tag
                    // `!<...>` holds none).
                    while bytes.get(i).is_some_and(|b| !b" \t\r\n".contains(b)) {
                        i += 1;
                    }
                    after_blank = false;
                }
                b' ' | b'\t' | b'\r' | b'\n' => {
                    i += 1;
                    after_blank = true;
                }
                b'#' if after_blank => {
                    while bytes.get(i).is_some_and(|b| *b != b'\n') {
                        i += 1;
                    }
                }
                _ => return None,
            }
        }
    }

    /// Where a plain or block scalar's own text starts: after its properties (`&anchor`,
    /// `!tag`) and the blanks that follow them, which the parser counts as part of the node.
    /// Never past `end` (an anchored empty scalar is empty at its end).
    fn after_properties(&self, start: Pos, end: Pos) -> Pos {
        let bytes = self.text.as_bytes();
        let (mut i, limit) = (self.offset(start), self.offset(end));
        while i < limit {
            match bytes[i] {
                b'&' | b'!' => {
                    while i < limit && !b" \t\r\n".contains(&bytes[i]) {
                        i += 1;
                    }
                }
                b' ' | b'\t' | b'\r' | b'\n' => i += 1,
                _ => break,
            }
        }
        self.pos_of(i.min(limit))
    }

    /// The position just after the closing quote of the quoted scalar whose opening quote is at
    /// `start`.
    fn quoted_end(&self, start: Pos) -> Option<Pos> {
        let from = self.offset(start);
        let bytes = self.text.as_bytes();
        let quote = *bytes.get(from).filter(|b| matches!(b, b'"' | b'\''))?;
        let mut i = from + 1;
        while i < bytes.len() {
            match bytes[i] {
                b'\\' if quote == b'"' => i += 2,
                b'\'' if quote == b'\'' && bytes.get(i + 1) == Some(&b'\'') => i += 2,
                // An ASCII quote: the byte after it starts a character.
                b if b == quote => return Some(self.pos_of(i + 1)),
                _ => i += 1,
            }
        }
        Some(self.pos_of(bytes.len()))
    }

    /// The file's line terminator (`\r\n` when its first line ends so).
    pub(crate) fn newline(&self) -> &'static str {
        if self.line_with_end(1).ends_with("\r\n") {
            "\r\n"
        } else {
            "\n"
        }
    }
}

/// A parsed single-document YAML file.
#[derive(Debug)]
pub(crate) struct Doc {
    pub(crate) root: Node,
    pub(crate) src: Source,
    /// Anchor id -> path of child indices from the root (mapping values / sequence items).
    anchors: HashMap<usize, Vec<usize>>,
    /// Keys given twice in one mapping ([`parse_recipe`] only; [`parse`] refuses them).
    pub(crate) duplicates: Vec<Duplicate>,
}

/// A key given twice in one mapping. Both pairs stay in the tree, in order; lookups return the
/// later one, as PyYAML (which srt-slurm loads recipes with) keeps the last.
#[derive(Clone, Debug)]
pub(crate) struct Duplicate {
    /// Where: the keys from the root down to it, dotted (`backend.decode_environment.A`).
    pub(crate) path: String,
    /// The key.
    pub(crate) key: String,
    /// The earlier pair: its key's start and its value's end.
    pub(crate) first: (Pos, Pos),
    /// The later pair, likewise.
    pub(crate) later: (Pos, Pos),
}

impl Doc {
    /// The node an alias refers to.
    pub(crate) fn anchored(&self, id: usize) -> Option<&Node> {
        let mut n = &self.root;
        for &i in self.anchors.get(&id)? {
            n = match &n.kind {
                Kind::Map { entries, .. } => &entries.get(i)?.1,
                Kind::Seq { items, .. } => items.get(i)?,
                _ => return None,
            };
        }
        Some(n)
    }

    /// Follows an alias (once); other nodes are returned as they are.
    pub(crate) fn resolve<'a>(&'a self, n: &'a Node) -> &'a Node {
        match n.kind {
            Kind::Alias(id) => self.anchored(id).unwrap_or(n),
            _ => n,
        }
    }

    /// `key` in mapping `map`, looking through `<<` merge keys (own keys win).
    pub(crate) fn lookup<'a>(&'a self, map: &'a Node, key: &str) -> Option<&'a Node> {
        let map = self.resolve(map);
        if let Some(v) = map.get(key) {
            return Some(v);
        }
        let merged = map.get("<<")?;
        match &merged.kind {
            Kind::Alias(_) => self.resolve(merged).get(key),
            Kind::Seq { items, .. } => items.iter().find_map(|m| self.resolve(m).get(key)),
            _ => None,
        }
    }

    /// The node as JSON (aliases followed, at most `budget` nodes, for small blocks only).
    pub(crate) fn to_json(&self, n: &Node) -> Result<serde_json::Value, ToJsonError> {
        let mut budget = 10_000usize;
        self.to_json_inner(n, &mut budget, 0)
    }

    fn to_json_inner(
        &self,
        n: &Node,
        budget: &mut usize,
        depth: usize,
    ) -> Result<serde_json::Value, ToJsonError> {
        use serde_json::Value;
        if *budget == 0 || depth > MAX_DEPTH {
            return Err(ToJsonError::TooLarge);
        }
        *budget -= 1;
        Ok(match &n.kind {
            Kind::Scalar { .. } => match n.scalar() {
                Some(Scalar::Null) | None => Value::Null,
                Some(Scalar::Bool(b)) => Value::Bool(b),
                Some(Scalar::Int(i)) => Value::from(i),
                Some(Scalar::Float(f)) => serde_json::Number::from_f64(f)
                    .map(Value::Number)
                    .ok_or(ToJsonError::NonFinite(n.start.line))?,
                Some(Scalar::Str(s)) => Value::String(s.to_owned()),
            },
            Kind::Seq { items, .. } => Value::Array(
                items
                    .iter()
                    .map(|i| self.to_json_inner(i, budget, depth + 1))
                    .collect::<Result<_, _>>()?,
            ),
            Kind::Map { entries, .. } => {
                let mut m = serde_json::Map::new();
                for (k, v) in entries {
                    let key = k.as_str().ok_or(ToJsonError::NonScalarKey(k.start.line))?;
                    m.insert(key.to_owned(), self.to_json_inner(v, budget, depth + 1)?);
                }
                Value::Object(m)
            }
            Kind::Alias(id) => {
                let target = self
                    .anchored(*id)
                    .ok_or(ToJsonError::UnknownAlias(n.start.line))?;
                self.to_json_inner(target, budget, depth + 1)?
            }
        })
    }
}

/// Why a block has no JSON form; the callers add the file and the key.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ToJsonError {
    /// More nodes than the budget, or aliases nested past [`MAX_DEPTH`].
    #[error("block too large or aliases nested too deeply")]
    TooLarge,
    /// A float JSON cannot hold (`.inf`, `.nan`), at this line.
    #[error("non-finite number at line {0}")]
    NonFinite(usize),
    /// A mapping key that is itself a mapping or a sequence, at this line.
    #[error("non-scalar key at line {0}")]
    NonScalarKey(usize),
    /// An alias to no anchor, at this line.
    #[error("unknown alias at line {0}")]
    UnknownAlias(usize),
}

/// Reads a file of at most [`MAX_BYTES`] as UTF-8.
pub(crate) fn read_capped(path: &Path) -> Result<String, YamlError> {
    let f = std::fs::File::open(path)?;
    let mut buf = Vec::new();
    f.take(MAX_BYTES + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > MAX_BYTES {
        return Err(YamlError::TooLarge { limit: MAX_BYTES });
    }
    String::from_utf8(buf).map_err(|_| YamlError::NotUtf8)
}

fn pos(m: saphyr_parser::Marker) -> Pos {
    Pos {
        line: m.line(),
        col: m.col(),
    }
}

enum Frame {
    Map {
        start: Pos,
        anchor: usize,
        entries: Vec<(Node, Node)>,
        key: Option<Node>,
    },
    Seq {
        start: Pos,
        anchor: usize,
        items: Vec<Node>,
    },
}

/// Parses one YAML document. Rejects several documents, duplicate keys and deep nesting.
pub(crate) fn parse(text: String) -> Result<Doc, YamlError> {
    parse_with(text, false)
}

/// Parses a recipe like [`parse`], but accepts duplicate keys as PyYAML does (the last wins)
/// and lists them in [`Doc::duplicates`] for the caller to judge.
pub(crate) fn parse_recipe(text: String) -> Result<Doc, YamlError> {
    parse_with(text, true)
}

fn parse_with(text: String, allow_duplicates: bool) -> Result<Doc, YamlError> {
    if text.len() as u64 > MAX_BYTES {
        return Err(YamlError::TooLarge { limit: MAX_BYTES });
    }
    // The parser breaks lines at a lone CR too; the positions here count LF only, so such a file
    // would put every later position on the wrong line.
    if let Some(at) = text
        .match_indices('\r')
        .map(|(i, _)| i)
        .find(|&i| text.as_bytes().get(i + 1) != Some(&b'\n'))
    {
        return Err(YamlError::Syntax {
            line: text[..at].matches('\n').count() + 1,
            col: text[..at]
                .rsplit('\n')
                .next()
                .map_or(0, |l| l.chars().count())
                + 1,
            msg: "carriage return without a line feed (use LF or CRLF line ends)".into(),
        });
    }
    let src = Source::new(text);
    // The parser skips a leading byte-order mark without counting it as a column.
    let bom = usize::from(src.text().starts_with('\u{feff}'));
    let pos = |m: saphyr_parser::Marker| {
        let p = pos(m);
        Pos {
            col: p.col + if p.line == 1 { bom } else { 0 },
            ..p
        }
    };
    let mut stack: Vec<Frame> = Vec::new();
    let mut docs: Vec<Node> = Vec::new();
    let mut anchors: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut duplicates = Vec::new();
    {
        for ev in Parser::new_from_str(src.text()) {
            let (ev, span): (Event<'_>, Span) = ev.map_err(|e| YamlError::Syntax {
                line: e.marker().line(),
                col: e.marker().col() + 1,
                msg: e.info().to_owned(),
            })?;
            let node = match ev {
                Event::MappingStart(anchor, _) | Event::SequenceStart(anchor, _) => {
                    if stack.len() >= MAX_DEPTH {
                        return Err(YamlError::TooDeep {
                            limit: MAX_DEPTH,
                            line: span.start.line(),
                        });
                    }
                    let is_map = matches!(ev, Event::MappingStart(..));
                    // Flow collections start at their bracket, block ones at their first key
                    // (or anchor); whether it is flow is known at the end event.
                    let start = pos(span.start);
                    stack.push(if is_map {
                        Frame::Map {
                            start,
                            anchor,
                            entries: Vec::new(),
                            key: None,
                        }
                    } else {
                        Frame::Seq {
                            start,
                            anchor,
                            items: Vec::new(),
                        }
                    });
                    continue;
                }
                Event::MappingEnd | Event::SequenceEnd => {
                    let flow = !span.is_empty();
                    let end = if flow { pos(span.end) } else { pos(span.start) };
                    let (node, anchor) = match stack.pop() {
                        Some(Frame::Map {
                            start,
                            anchor,
                            entries,
                            ..
                        }) => (
                            Node {
                                start,
                                end,
                                kind: Kind::Map { entries, flow },
                            },
                            anchor,
                        ),
                        Some(Frame::Seq {
                            start,
                            anchor,
                            items,
                            ..
                        }) => (
                            Node {
                                start,
                                end,
                                kind: Kind::Seq { items, flow },
                            },
                            anchor,
                        ),
                        None => continue,
                    };
                    if anchor > 0 {
                        record_anchor(&stack, &mut anchors, anchor);
                    }
                    node
                }
                Event::Scalar(value, style, anchor, tag) => {
                    let style = match style {
                        ScalarStyle::Plain => Style::Plain,
                        ScalarStyle::SingleQuoted => Style::SingleQuoted,
                        ScalarStyle::DoubleQuoted => Style::DoubleQuoted,
                        ScalarStyle::Literal | ScalarStyle::Folded => Style::Block,
                    };
                    let start = pos(span.start);
                    // The parser's span of a quoted scalar starts at its anchor or tag and runs
                    // on over trailing blanks and a comment; find both quotes in the source.
                    let (start, end) = match style {
                        Style::SingleQuoted | Style::DoubleQuoted => src
                            .quoted_start(start)
                            .and_then(|s| Some((s, src.quoted_end(s)?)))
                            .ok_or_else(|| YamlError::Syntax {
                                line: start.line,
                                col: start.col + 1,
                                msg: "cannot locate this quoted scalar in the text".into(),
                            })?,
                        // A plain scalar with an anchor or a tag: the edit must keep them.
                        _ if anchor > 0 || tag.is_some() => {
                            let end = pos(span.end);
                            (src.after_properties(start, end), end)
                        }
                        _ => (start, pos(span.end)),
                    };
                    let tag = tag.map(|t| {
                        if t.is_yaml_core_schema() {
                            t.suffix.clone()
                        } else {
                            String::new()
                        }
                    });
                    if anchor > 0 {
                        record_anchor(&stack, &mut anchors, anchor);
                    }
                    Node {
                        start,
                        end,
                        kind: Kind::Scalar {
                            value: value.into_owned(),
                            style,
                            tag,
                        },
                    }
                }
                Event::Alias(id) => Node {
                    start: pos(span.start),
                    end: pos(span.end),
                    kind: Kind::Alias(id),
                },
                Event::StreamStart
                | Event::StreamEnd
                | Event::DocumentStart(_)
                | Event::DocumentEnd
                | Event::Nothing => continue,
            };
            match stack.split_last_mut() {
                None => docs.push(node),
                Some((Frame::Seq { items, .. }, _)) => items.push(node),
                Some((Frame::Map { entries, key, .. }, above)) => match key.take() {
                    None => *key = Some(node),
                    Some(k) => {
                        if let Some(name) = k.as_str() {
                            if let Some((first, first_value)) =
                                entries.iter().rfind(|(e, _)| e.as_str() == Some(name))
                            {
                                if !allow_duplicates {
                                    return Err(YamlError::DuplicateKey {
                                        key: name.to_owned(),
                                        line: k.start.line,
                                        first: first.start.line,
                                    });
                                }
                                let path = frame_path(above);
                                duplicates.push(Duplicate {
                                    path: if path.is_empty() {
                                        name.to_owned()
                                    } else {
                                        format!("{path}.{name}")
                                    },
                                    key: name.to_owned(),
                                    first: (first.start, first_value.end),
                                    later: (k.start, node.end),
                                });
                            }
                        }
                        entries.push((k, node));
                    }
                },
            }
        }
    }
    if docs.len() != 1 {
        return Err(YamlError::Documents(docs.len()));
    }
    let root = docs.pop().expect("one document");
    Ok(Doc {
        root,
        src,
        anchors,
        duplicates,
    })
}

/// The keys (and sequence indices) of the open collections `above` the innermost one, dotted:
/// where a key of the innermost mapping sits.
fn frame_path(above: &[Frame]) -> String {
    let parts: Vec<String> = above
        .iter()
        .map(|f| match f {
            Frame::Map { key, .. } => key
                .as_ref()
                .and_then(Node::as_str)
                .unwrap_or("?")
                .to_owned(),
            Frame::Seq { items, .. } => items.len().to_string(),
        })
        .collect();
    parts.join(".")
}

/// Records where the node being completed sits: the current child index in every open frame.
/// Anchors on mapping keys are not recorded (nothing here looks them up).
fn record_anchor(stack: &[Frame], anchors: &mut HashMap<usize, Vec<usize>>, id: usize) {
    let mut path = Vec::with_capacity(stack.len());
    for f in stack {
        match f {
            Frame::Map { entries, key, .. } => {
                if key.is_none() && std::ptr::eq(f, stack.last().expect("non-empty")) {
                    return;
                }
                path.push(entries.len());
            }
            Frame::Seq { items, .. } => path.push(items.len()),
        }
    }
    anchors.insert(id, path);
}

/// Reads and parses a YAML file (size-capped).
pub(crate) fn load(path: &Path) -> Result<Doc, YamlError> {
    parse(read_capped(path)?)
}

/// Reads and parses a recipe (size-capped), accepting duplicate keys ([`parse_recipe`]).
pub(crate) fn load_recipe(path: &Path) -> Result<Doc, YamlError> {
    parse_recipe(read_capped(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(s: &str) -> Doc {
        parse(s.to_owned()).expect("parses")
    }

    #[test]
    fn core_schema_resolution() {
        let d =
            doc("a: 3\nb: '3'\nc: 3.0\nd: true\ne: ~\nf: N/A\ng: 0x1f\nh: .inf\ni: -2.5e3\nj:\n");
        let r = &d.root;
        assert_eq!(r.get("a").unwrap().scalar(), Some(Scalar::Int(3)));
        assert_eq!(r.get("b").unwrap().scalar(), Some(Scalar::Str("3")));
        assert_eq!(r.get("c").unwrap().scalar(), Some(Scalar::Float(3.0)));
        assert_eq!(r.get("d").unwrap().scalar(), Some(Scalar::Bool(true)));
        assert_eq!(r.get("e").unwrap().scalar(), Some(Scalar::Null));
        assert_eq!(r.get("f").unwrap().scalar(), Some(Scalar::Str("N/A")));
        assert_eq!(r.get("g").unwrap().scalar(), Some(Scalar::Int(31)));
        assert_eq!(
            r.get("h").unwrap().scalar(),
            Some(Scalar::Float(f64::INFINITY))
        );
        assert_eq!(r.get("i").unwrap().scalar(), Some(Scalar::Float(-2500.0)));
        assert_eq!(r.get("j").unwrap().scalar(), Some(Scalar::Null));
    }

    #[test]
    fn positions_cover_quotes_and_flow_brackets() {
        let d = doc("k:\n  sq: '{\"a\":1}'  # c\n  fm: {a: 1, b: 2}\n  dq: \"x\\\"y\"  # d\n  sq2: 'it''s' # e\n");
        let dq = d.root.get("k").unwrap().get("dq").unwrap();
        assert_eq!((dq.start.col, dq.end.col), (6, 12));
        let sq2 = d.root.get("k").unwrap().get("sq2").unwrap();
        assert_eq!((sq2.start.col, sq2.end.col), (7, 14));
        let k = d.root.get("k").unwrap();
        let sq = k.get("sq").unwrap();
        assert_eq!(
            (sq.start, sq.end),
            (Pos { line: 2, col: 6 }, Pos { line: 2, col: 15 })
        );
        let fm = k.get("fm").unwrap();
        assert!(fm.is_flow_map());
        assert_eq!(
            d.src.text()[d.src.offset(fm.start)..d.src.offset(fm.end)].to_owned(),
            "{a: 1, b: 2}"
        );
    }

    #[test]
    fn aliases_and_merge_keys_resolve_without_expansion() {
        let d = doc("a: &w\n  X: 1\nb:\n  <<: *w\n  Y: 2\nc: *w\n");
        let b = d.root.get("b").unwrap();
        assert_eq!(d.lookup(b, "X").unwrap().scalar(), Some(Scalar::Int(1)));
        assert_eq!(d.lookup(b, "Y").unwrap().scalar(), Some(Scalar::Int(2)));
        let c = d.root.get("c").unwrap();
        assert_eq!(d.lookup(c, "X").unwrap().scalar(), Some(Scalar::Int(1)));
    }

    /// Regression (fuzz target `inject`, fuzz/corpus/inject/regression-inject-lone-cr): a lone CR
    /// is a line break to the parser but not to `Source`, so the start of a later quoted scalar
    /// pointed into other text, and the closing-quote search sliced a string inside a character.
    #[test]
    fn lone_carriage_return_is_refused_not_a_panic() {
        let text = "# c\rx: y\nk: '\u{fffd}'\nj: '\u{fffd}\u{fffd}'\n";
        match parse(text.into()) {
            Err(YamlError::Syntax {
                line: 1,
                col: 4,
                msg,
            }) => {
                assert!(msg.contains("carriage return"), "{msg}")
            }
            other => panic!("{other:?}"),
        }
        assert!(
            parse("k: 'v'\r\nj: \"w\"\r\n".into()).is_ok(),
            "CRLF is fine"
        );
    }

    /// A leading byte-order mark is not a column to the parser; positions still land on the
    /// scalar's own text, so an edit there replaces exactly the value.
    #[test]
    fn byte_order_mark_keeps_positions_on_the_text() {
        let d = parse("\u{feff}k: 'v'\nj: \"w\"\n".into()).unwrap();
        let v = d.root.get("k").unwrap();
        let (a, b) = (d.src.offset(v.start), d.src.offset(v.end));
        assert_eq!(&d.src.text()[a..b], "'v'");
        let w = d.root.get("j").unwrap();
        let (a, b) = (d.src.offset(w.start), d.src.offset(w.end));
        assert_eq!(&d.src.text()[a..b], "\"w\"");
    }

    #[test]
    fn rejects_duplicates_depth_and_multiple_documents() {
        assert!(matches!(
            parse("a: 1\nb: 2\na: 3\n".into()),
            Err(YamlError::DuplicateKey {
                line: 3,
                first: 1,
                ..
            })
        ));
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert!(matches!(
            parse(deep),
            Err(YamlError::TooDeep { .. }) | Err(YamlError::Syntax { .. })
        ));
        let mut block = String::new();
        for i in 0..=MAX_DEPTH {
            block.push_str(&" ".repeat(i));
            block.push_str("k:\n");
        }
        assert!(matches!(parse(block), Err(YamlError::TooDeep { .. })));
        assert!(matches!(
            parse("a: 1\n---\nb: 2\n".into()),
            Err(YamlError::Documents(2))
        ));
        assert!(matches!(
            parse("a: [1\n".into()),
            Err(YamlError::Syntax { .. })
        ));
    }

    /// Issue 19 item 21: an anchor or a tag before a quoted scalar (`&a 'x'`, `!!str "x"`) is
    /// valid YAML (PyYAML reads it); the scalar's position is its opening quote, not the
    /// property before it, so the closing-quote search and any edit start at the quote.
    #[test]
    fn anchor_or_tag_before_a_quoted_scalar_parses_and_spans_the_quotes() {
        for (text, want) in [
            ("other: &a 'x'\n", "'x'"),
            ("other: &a \"x\"\n", "\"x\""),
            ("other: !!str 'x'\n", "'x'"),
            ("other: &a !!str \"x\"  # c\n", "\"x\""),
            ("other: !!str &a 'it''s'\n", "'it''s'"),
            ("other: !<tag:yaml.org,2002:str> 'x'\n", "'x'"),
            ("other: &a\n  'x'\n", "'x'"),
            (
                "s: &spec '{\"method\":\"mtp\"}'\nt: *spec\n",
                "'{\"method\":\"mtp\"}'",
            ),
            ("- &a 'x'\n", "'x'"),
            ("other: &a 1.5\nb: *a\n", "1.5"),
            ("other: !!float &a 1.5  # c\n", "1.5"),
        ] {
            let d = parse(text.to_owned()).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            let v = match d.root.entries() {
                Some(e) => &e[0].1,
                None => match &d.root.kind {
                    Kind::Seq { items, .. } => &items[0],
                    _ => unreachable!(),
                },
            };
            let (a, b) = (d.src.offset(v.start), d.src.offset(v.end));
            assert_eq!(&d.src.text()[a..b], want, "{text:?}");
        }
    }

    /// Issue 19 item 22: a recipe may repeat a key (PyYAML keeps the last); both pairs are
    /// listed with their path and lines, and lookups return the last value.
    #[test]
    fn recipe_parse_accepts_duplicates_last_wins() {
        let d = parse_recipe("a: 1\nm:\n  x: 1\n  y: 2\n  x: 3\na: 4\n".into()).unwrap();
        assert_eq!(d.root.get("a").unwrap().scalar(), Some(Scalar::Int(4)));
        let m = d.root.get("m").unwrap();
        assert_eq!(m.get("x").unwrap().scalar(), Some(Scalar::Int(3)));
        let got: Vec<_> = d
            .duplicates
            .iter()
            .map(|x| (x.path.as_str(), x.first.0.line, x.later.0.line))
            .collect();
        assert_eq!(got, [("m.x", 3, 5), ("a", 1, 6)]);
        assert!(matches!(
            parse("a: 1\na: 2\n".into()),
            Err(YamlError::DuplicateKey { .. })
        ));
    }

    #[test]
    fn last_line_of_block_collections_and_block_scalars() {
        let d = doc("m:\n  a: 1\n  b:\n    c: |\n      x\n      y\n\n  d: 2\n");
        let m = d.root.get("m").unwrap();
        assert_eq!(m.get("b").unwrap().last_line(&d.src), 6);
        assert_eq!(m.last_line(&d.src), 8);
    }
}
