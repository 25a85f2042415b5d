//! Line-level surgery on the recipe text: span replacements and whole-line insertions, applied to
//! the original bytes. Lines no edit touches are copied verbatim, so the rest of the file stays
//! byte-identical; every touched line is reported before and after.

use crate::yaml::{Pos, Source};

/// One edit, in positions of the original text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Edit {
    /// Replace the characters `[start, end)` with `text` (no line breaks in `text`).
    Replace { start: Pos, end: Pos, text: String },
    /// Insert whole lines (without terminators) after original line `after` (1-based).
    Insert { after: usize, lines: Vec<String> },
}

/// One changed place of the recipe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineChange {
    /// 1-based line of the original: the first replaced line, or the line the new lines follow.
    pub line: usize,
    /// True when lines were inserted (then `before` is empty).
    pub inserted: bool,
    /// The original lines (without terminators).
    pub before: Vec<String>,
    /// The new lines (without terminators).
    pub after: Vec<String>,
}

struct Rep {
    start: usize,
    end: usize,
    first_line: usize,
    last_line: usize,
    text: String,
}

fn split_lines(s: &str) -> Vec<String> {
    s.split_inclusive('\n')
        .map(|l| {
            l.strip_suffix('\n')
                .map(|l| l.strip_suffix('\r').unwrap_or(l))
                .unwrap_or(l)
                .to_owned()
        })
        .collect()
}

/// Edits that cannot be applied together: always a backend bug, never user input.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EditError {
    /// A replacement's text holds a newline (replacements stay within their lines).
    #[error("a replacement spans lines")]
    SpansLines,
    /// Two replacements cover the same bytes.
    #[error("overlapping replacements")]
    Overlap,
    /// An insertion point lies after the last line.
    #[error("insertion after the end of the file")]
    PastEnd,
    /// An insertion point lies inside a replaced range.
    #[error("insertion after line {after} falls inside a replaced range")]
    InsertInsideReplacement {
        /// The line the insertion follows.
        after: usize,
    },
}

/// Applies `edits` to `src`. Fails on overlapping replacements or an insertion inside a
/// replaced range.
pub(crate) fn apply(
    src: &Source,
    edits: Vec<Edit>,
) -> Result<(String, Vec<LineChange>), EditError> {
    let mut reps: Vec<Rep> = Vec::new();
    let mut inserts: Vec<(usize, Vec<String>)> = Vec::new();
    for e in edits {
        match e {
            Edit::Replace { start, end, text } => {
                if text.contains('\n') {
                    return Err(EditError::SpansLines);
                }
                reps.push(Rep {
                    start: src.offset(start),
                    end: src.offset(end),
                    first_line: start.line,
                    last_line: end.line.max(start.line),
                    text,
                });
            }
            Edit::Insert { after, lines } => inserts.push((after, lines)),
        }
    }
    reps.sort_by_key(|r| (r.start, r.end));
    for w in reps.windows(2) {
        if w[1].start < w[0].end {
            return Err(EditError::Overlap);
        }
    }
    // Group replacements whose lines touch into one changed block each.
    let mut groups: Vec<(usize, usize, Vec<&Rep>)> = Vec::new();
    for r in &reps {
        match groups.last_mut() {
            Some((_, last, members)) if r.first_line <= *last => {
                *last = (*last).max(r.last_line);
                members.push(r);
            }
            _ => groups.push((r.first_line, r.last_line, vec![r])),
        }
    }
    for (after, _) in &inserts {
        if groups.iter().any(|(a, b, _)| *a <= *after && *after < *b) {
            return Err(EditError::InsertInsideReplacement { after: *after });
        }
    }
    inserts.sort_by_key(|(after, _)| *after);
    let nl = src.newline();
    let text = src.text();
    let mut out = String::with_capacity(text.len() + 256);
    let mut changes = Vec::new();
    let mut g = groups.iter().peekable();
    let mut ins = inserts.iter().peekable();
    let push_inserts =
        |n: usize,
         out: &mut String,
         changes: &mut Vec<LineChange>,
         ins: &mut std::iter::Peekable<std::slice::Iter<'_, (usize, Vec<String>)>>| {
            while let Some((after, lines)) = ins.next_if(|(a, _)| *a == n) {
                if !out.is_empty() && !out.ends_with('\n') {
                    out.push_str(nl);
                }
                for l in lines {
                    out.push_str(l);
                    out.push_str(nl);
                }
                changes.push(LineChange {
                    line: *after,
                    inserted: true,
                    before: Vec::new(),
                    after: lines.clone(),
                });
            }
        };
    push_inserts(0, &mut out, &mut changes, &mut ins);
    let mut n = 1;
    while n <= src.lines() {
        match g.next_if(|(a, _, _)| *a == n) {
            Some((a, b, members)) => {
                let s = src.line_start(*a);
                let e = if *b < src.lines() {
                    src.line_start(*b + 1)
                } else {
                    text.len()
                };
                let old = &text[s..e];
                let mut new = String::with_capacity(old.len() + 64);
                let mut at = s;
                for r in members {
                    new.push_str(&text[at..r.start]);
                    new.push_str(&r.text);
                    at = r.end;
                }
                new.push_str(&text[at..e]);
                if new != old {
                    changes.push(LineChange {
                        line: *a,
                        inserted: false,
                        before: split_lines(old),
                        after: split_lines(&new),
                    });
                }
                out.push_str(&new);
                n = *b;
            }
            None => out.push_str(src.line_with_end(n)),
        }
        push_inserts(n, &mut out, &mut changes, &mut ins);
        n += 1;
    }
    if ins.peek().is_some() {
        return Err(EditError::PastEnd);
    }
    Ok((out, changes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(line: usize, col: usize) -> Pos {
        Pos { line, col }
    }

    #[test]
    fn untouched_lines_stay_byte_identical() {
        let src = Source::new("a: 1 # c\r\nb: 'x'\r\nc: 3\r\n".to_owned());
        let (out, ch) = apply(
            &src,
            vec![
                Edit::Replace {
                    start: p(2, 3),
                    end: p(2, 6),
                    text: "'yy'".into(),
                },
                Edit::Insert {
                    after: 1,
                    lines: vec!["n: 0".into()],
                },
            ],
        )
        .unwrap();
        assert_eq!(out, "a: 1 # c\r\nn: 0\r\nb: 'yy'\r\nc: 3\r\n");
        assert_eq!(ch.len(), 2);
        assert_eq!(ch[0].after, vec!["n: 0"]);
        assert_eq!(ch[1].before, vec!["b: 'x'"]);
        assert_eq!(ch[1].after, vec!["b: 'yy'"]);
    }

    #[test]
    fn multi_line_replacement_and_insert_at_end_without_newline() {
        let src = Source::new("k: 'a\n  b'\nz: 1".to_owned());
        let (out, ch) = apply(
            &src,
            vec![
                Edit::Replace {
                    start: p(1, 3),
                    end: p(2, 4),
                    text: "'c'".into(),
                },
                Edit::Insert {
                    after: 3,
                    lines: vec!["y: 2".into()],
                },
            ],
        )
        .unwrap();
        assert_eq!(out, "k: 'c'\nz: 1\ny: 2\n");
        assert_eq!(ch[0].before, vec!["k: 'a", "  b'"]);
    }

    #[test]
    fn overlapping_edits_are_refused() {
        let src = Source::new("abcdef\n".to_owned());
        let r = |a, b| Edit::Replace {
            start: p(1, a),
            end: p(1, b),
            text: String::new(),
        };
        assert!(apply(&src, vec![r(0, 3), r(2, 4)]).is_err());
    }
}
