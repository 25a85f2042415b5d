//! Python-compatible text for JSON values: what the reference renderers (Python) print.
//!
//! Prompts embed JSON (tool schemas, non-string tool arguments, response formats) through Python's
//! `json.dumps(value, ensure_ascii=False)` and a few values through `str()`. A byte of difference
//! changes the token stream, so both are reproduced here rather than borrowed from `serde_json`,
//! whose separators, float format and escapes differ.
//!
//! Known limits, from parsing with `serde_json` (without `arbitrary_precision`, which would turn
//! numbers into maps for every other serde consumer such as minijinja): an integer literal
//! outside the 64-bit range, or `-0`, parses as a float and prints as one (`1e+20`, `-0.0`) where
//! Python keeps an int. Neither occurs in the vectors.

use serde_json::{Number, Value};

use crate::EncodeError;

/// `json.dumps(value, ensure_ascii=False)`: separators `", "` / `": "`, keys in received order,
/// non-ASCII raw, floats as Python `repr`. Non-finite numbers cannot come out of `serde_json`, but
/// the check stays so the error is the documented one if that ever changes.
pub(crate) fn dumps(v: &Value) -> Result<String, EncodeError> {
    dumps_with(v, &Dump::default())
}

/// The `json.dumps` keyword arguments that chat templates pass through `tojson`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Dump {
    pub(crate) indent: Option<usize>,
    /// `(item_separator, key_separator)`; `None` is Python's default for the `indent` given.
    pub(crate) separators: Option<(String, String)>,
    pub(crate) ensure_ascii: bool,
    pub(crate) sort_keys: bool,
}

/// `json.dumps(value, indent=..., separators=..., ensure_ascii=..., sort_keys=...)`.
pub(crate) fn dumps_with(v: &Value, opts: &Dump) -> Result<String, EncodeError> {
    let (item, key) = match &opts.separators {
        Some((i, k)) => (i.as_str(), k.as_str()),
        // Python drops the space after `,` when indenting (it would trail each line).
        None if opts.indent.is_some() => (",", ": "),
        None => (", ", ": "),
    };
    let w = Writer { opts, item, key };
    let mut out = String::new();
    w.value(&mut out, v, 0)?;
    Ok(out)
}

struct Writer<'a> {
    opts: &'a Dump,
    item: &'a str,
    key: &'a str,
}

impl Writer<'_> {
    fn value(&self, out: &mut String, v: &Value, level: usize) -> Result<(), EncodeError> {
        match v {
            Value::Null => out.push_str("null"),
            Value::Bool(true) => out.push_str("true"),
            Value::Bool(false) => out.push_str("false"),
            Value::Number(n) => out.push_str(&number(n)?),
            Value::String(s) => write_str(out, s, self.opts.ensure_ascii),
            Value::Array(items) => {
                if items.is_empty() {
                    out.push_str("[]");
                    return Ok(());
                }
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    self.separator(out, i, level + 1);
                    self.value(out, item, level + 1)?;
                }
                self.newline(out, level);
                out.push(']');
            }
            Value::Object(map) => {
                if map.is_empty() {
                    out.push_str("{}");
                    return Ok(());
                }
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                if self.opts.sort_keys {
                    entries.sort_by(|a, b| a.0.cmp(b.0));
                }
                out.push('{');
                for (i, (k, item)) in entries.into_iter().enumerate() {
                    self.separator(out, i, level + 1);
                    write_str(out, k, self.opts.ensure_ascii);
                    out.push_str(self.key);
                    self.value(out, item, level + 1)?;
                }
                self.newline(out, level);
                out.push('}');
            }
        }
        Ok(())
    }

    fn separator(&self, out: &mut String, i: usize, level: usize) {
        if i > 0 {
            out.push_str(self.item);
        }
        self.newline(out, level);
    }

    fn newline(&self, out: &mut String, level: usize) {
        if let Some(n) = self.opts.indent {
            out.push('\n');
            out.extend(std::iter::repeat_n(' ', n * level));
        }
    }
}

/// Python's `json` string escaping: `"`, `\\` and C0 controls; with `ensure_ascii` also every
/// non-ASCII character as `\\uXXXX` (UTF-16 surrogate pairs above the BMP).
///
/// Runs of characters that need no escape are copied whole, and an escape is written without
/// formatting machinery: request bodies of random multilingual prompts are mostly escapes.
pub(crate) fn write_str(out: &mut String, s: &str, ensure_ascii: bool) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(s.len() + 2);
    out.push('"');
    let mut plain = 0;
    for (at, c) in s.char_indices() {
        let short = match c {
            '"' => "\\\"",
            '\\' => "\\\\",
            '\n' => "\\n",
            '\r' => "\\r",
            '\t' => "\\t",
            '\u{8}' => "\\b",
            '\u{c}' => "\\f",
            c if (c as u32) < 0x20 || (ensure_ascii && !(' '..='~').contains(&c)) => "",
            _ => continue,
        };
        out.push_str(&s[plain..at]);
        plain = at + c.len_utf8();
        if !short.is_empty() {
            out.push_str(short);
            continue;
        }
        let mut units = [0u16; 2];
        for u in c.encode_utf16(&mut units) {
            let u = *u as usize;
            out.push_str("\\u");
            for shift in [12, 8, 4, 0] {
                out.push(HEX[(u >> shift) & 0xf] as char);
            }
        }
    }
    out.push_str(&s[plain..]);
    out.push('"');
}

fn number(n: &Number) -> Result<String, EncodeError> {
    if let Some(i) = n.as_i64() {
        return Ok(i.to_string());
    }
    if let Some(u) = n.as_u64() {
        return Ok(u.to_string());
    }
    let f = n.as_f64().ok_or(EncodeError::NonFiniteNumber)?;
    float_repr(f)
}

/// Python's `repr(float)`: the shortest digits that round-trip, positional between 1e-4 and 1e16
/// (always with a fractional part, `100.0`), scientific outside it with a signed two-digit
/// exponent (`1e-05`, `1e+16`, `2.5e-07`).
pub(crate) fn float_repr(f: f64) -> Result<String, EncodeError> {
    if !f.is_finite() {
        return Err(EncodeError::NonFiniteNumber);
    }
    let sign = if f.is_sign_negative() { "-" } else { "" };
    let f = f.abs();
    if f == 0.0 {
        return Ok(format!("{sign}0.0"));
    }
    // Rust's `{:e}` prints the same shortest round-trip digits Python picks, as `d.ddde±x`.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci
        .split_once('e')
        .expect("LowerExp always has an exponent");
    let exp: i32 = exp.parse().expect("LowerExp exponent is an integer");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let ndigits = digits.len() as i32;
    let body = if (-4..16).contains(&exp) {
        if exp < 0 {
            format!("0.{}{digits}", "0".repeat((-exp - 1) as usize))
        } else if exp + 1 >= ndigits {
            format!("{digits}{}.0", "0".repeat((exp + 1 - ndigits) as usize))
        } else {
            let (int, frac) = digits.split_at((exp + 1) as usize);
            format!("{int}.{frac}")
        }
    } else {
        let (first, rest) = digits.split_at(1);
        let exp_sign = if exp < 0 { '-' } else { '+' };
        if rest.is_empty() {
            format!("{first}e{exp_sign}{:02}", exp.abs())
        } else {
            format!("{first}.{rest}e{exp_sign}{:02}", exp.abs())
        }
    };
    Ok(format!("{sign}{body}"))
}

/// Python's `str(value)` for a value interpolated into an f-string (tool-result content that is
/// neither a string nor a list): `None`, `True`, `42`, `1.5`, `{'a': 1}`.
pub(crate) fn py_str(v: &Value) -> Result<String, EncodeError> {
    match v {
        Value::String(s) => Ok(s.clone()),
        other => py_repr(other),
    }
}

fn py_repr(v: &Value) -> Result<String, EncodeError> {
    Ok(match v {
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Number(n) => number(n)?,
        Value::String(s) => str_repr(s),
        Value::Array(items) => {
            let parts: Result<Vec<_>, _> = items.iter().map(py_repr).collect();
            format!("[{}]", parts?.join(", "))
        }
        Value::Object(map) => {
            let parts: Result<Vec<String>, EncodeError> = map
                .iter()
                .map(|(k, v)| Ok(format!("{}: {}", str_repr(k), py_repr(v)?)))
                .collect();
            format!("{{{}}}", parts?.join(", "))
        }
    })
}

/// Python's `repr(str)`: single quotes unless the text holds `'` and no `"`.
fn str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Python truthiness of a JSON value (`bool(x)`): `null`, `false`, `0`, `0.0`, `""`, `[]`, `{}`
/// are false. The serving wrappers read their flags this way.
pub(crate) fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// Python's type name for a JSON value, as the reference's error messages name it.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_print_as_python_repr() {
        let cases = [
            (1.0, "1.0"),
            (100.0, "100.0"),
            (0.1, "0.1"),
            (-0.0, "-0.0"),
            (1e-5, "1e-05"),
            (2.5e-5, "2.5e-05"),
            (1e-7, "1e-07"),
            (1e16, "1e+16"),
            (1e20, "1e+20"),
            (9999999999999998.0, "9999999999999998.0"),
            (0.0001, "0.0001"),
            (123.456, "123.456"),
            (-2.5, "-2.5"),
            (1.2345678901234568e-300, "1.2345678901234568e-300"),
            (1e22, "1e+22"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (5e-324, "5e-324"),
        ];
        for (f, want) in cases {
            assert_eq!(float_repr(f).unwrap(), want, "{f:e}");
        }
        assert!(float_repr(f64::NAN).is_err());
    }

    #[test]
    fn dumps_matches_python_separators_and_escapes() {
        let v: Value = serde_json::from_str(
            r#"{"b": 1, "a": [true, null, 1.50, 1E2, "q\"\\/\n\u0001é"], "c": {}, "d": []}"#,
        )
        .unwrap();
        assert_eq!(
            dumps(&v).unwrap(),
            r#"{"b": 1, "a": [true, null, 1.5, 100.0, "q\"\\/\n\u0001é"], "c": {}, "d": []}"#
        );
    }

    #[test]
    fn strings_escape_as_python_json_dumps_does_with_and_without_ensure_ascii() {
        // Every escape class, between plain runs, at both ends: Python 3.11's own output.
        let s = "a\"b\\c\nd\re\tf\u{8}g\u{c}h\u{1}i\u{1f}~\u{7f}\u{e9}\u{4e2d}\u{1f600} end";
        let dump = |ascii| {
            let mut out = String::new();
            write_str(&mut out, s, ascii);
            out
        };
        assert_eq!(
            dump(true),
            r#""a\"b\\c\nd\re\tf\bg\fh\u0001i\u001f~\u007f\u00e9\u4e2d\ud83d\ude00 end""#
        );
        assert_eq!(
            dump(false),
            "\"a\\\"b\\\\c\\nd\\re\\tf\\bg\\fh\\u0001i\\u001f~\u{7f}\u{e9}\u{4e2d}\u{1f600} end\""
        );
        for edge in ["", "\u{e9}", "plain", "\""] {
            let mut out = String::new();
            write_str(&mut out, edge, true);
            let want = serde_json::to_string(edge)
                .unwrap()
                .replace('\u{e9}', "\\u00e9");
            assert_eq!(out, want, "{edge:?}");
        }
    }

    #[test]
    fn parsed_numbers_keep_pythons_int_float_split() {
        // As Python's json.loads: `3.0` stays a float, 64-bit integers stay exact.
        let v: Value =
            serde_json::from_str(r#"[-0.0, 12345678901234567890, -9223372036854775808, 3.0, 1E2]"#)
                .unwrap();
        assert_eq!(
            dumps(&v).unwrap(),
            "[-0.0, 12345678901234567890, -9223372036854775808, 3.0, 100.0]"
        );
    }

    #[test]
    fn dumps_with_takes_tojson_keywords() {
        let v = json!({"b": [1, 2], "a": {}, "é": "😀"});
        let dump = |opts: Dump| dumps_with(&v, &opts).unwrap();
        assert_eq!(
            dump(Dump {
                indent: Some(2),
                ..Dump::default()
            }),
            "{\n  \"b\": [\n    1,\n    2\n  ],\n  \"a\": {},\n  \"é\": \"😀\"\n}"
        );
        assert_eq!(
            dump(Dump {
                separators: Some((",".into(), ":".into())),
                sort_keys: true,
                ensure_ascii: true,
                ..Dump::default()
            }),
            r#"{"a":{},"b":[1,2],"\u00e9":"\ud83d\ude00"}"#
        );
    }

    #[test]
    fn str_of_non_strings_is_python_str() {
        assert_eq!(py_str(&Value::Null).unwrap(), "None");
        assert_eq!(py_str(&json!(true)).unwrap(), "True");
        assert_eq!(
            py_str(&json!({"a": "it's", "b": [1, "x"]})).unwrap(),
            r#"{'a': "it's", 'b': [1, 'x']}"#
        );
    }
}
