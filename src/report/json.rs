//! JSON whose key order is part of the format. serde_json's `Map` keeps insertion order in this
//! workspace (`tokenizer-encoders` turns `preserve_order` on, because prompts must keep the keys in
//! the order received, and cargo unifies the feature for every crate), so no artifact may rely on
//! a `Map` sorting its keys. The AIPerf and InferenceX files are built from this small ordered
//! tree, whose order is the one written, whatever serde_json's features are.

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

/// A JSON value with ordered objects.
#[derive(Clone, Debug)]
pub(crate) enum J {
    /// A leaf (any serde_json value; its own maps keep the order serde_json gives them).
    V(Value),
    /// An object, keys in insertion order.
    O(Obj),
    /// An array.
    A(Vec<J>),
}

/// An object with keys in insertion order.
#[derive(Clone, Debug, Default)]
pub(crate) struct Obj(pub(crate) Vec<(String, J)>);

impl Obj {
    pub(crate) fn new() -> Obj {
        Obj::default()
    }

    /// Appends `key: value` (a later duplicate would be written twice; callers do not repeat).
    pub(crate) fn put(&mut self, key: impl Into<String>, value: impl Into<J>) -> &mut Obj {
        self.0.push((key.into(), value.into()));
        self
    }

    /// [`Obj::put`] by value, for building literals.
    pub(crate) fn with(mut self, key: impl Into<String>, value: impl Into<J>) -> Obj {
        self.put(key, value);
        self
    }
}

impl From<Obj> for J {
    fn from(o: Obj) -> J {
        J::O(o)
    }
}

impl From<Vec<J>> for J {
    fn from(a: Vec<J>) -> J {
        J::A(a)
    }
}

impl From<Value> for J {
    fn from(v: Value) -> J {
        J::V(v)
    }
}

macro_rules! leaf {
    ($($t:ty),*) => {$(
        impl From<$t> for J {
            fn from(v: $t) -> J {
                J::V(Value::from(v))
            }
        }
    )*};
}
leaf!(f64, u64, u32, i64, bool, &str, String);

impl<T: Into<J>> From<Option<T>> for J {
    fn from(v: Option<T>) -> J {
        v.map_or(J::V(Value::Null), Into::into)
    }
}

impl Serialize for J {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            J::V(v) => v.serialize(s),
            J::O(o) => o.serialize(s),
            J::A(a) => {
                let mut seq = s.serialize_seq(Some(a.len()))?;
                for x in a {
                    seq.serialize_element(x)?;
                }
                seq.end()
            }
        }
    }
}

impl Serialize for Obj {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// Two-space indented JSON with a trailing newline.
pub(crate) fn pretty(v: &impl Serialize) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(v).expect("in-memory JSON serializes");
    out.push(b'\n');
    out
}

/// One line as Python's `json.dump` writes it without `indent`: `", "` between items and `": "`
/// after keys (what benchmark_serving's result files look like).
pub(crate) fn python_compact(v: &impl Serialize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PyFormatter);
    v.serialize(&mut ser).expect("in-memory JSON serializes");
    out
}

struct PyFormatter;

impl serde_json::ser::Formatter for PyFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}

/// One line as orjson writes it (AIPerf's JSONL writers: `orjson.dumps(model.model_dump(...))`):
/// no spaces, and floats in orjson's notation, which differs from serde_json's only in its
/// exponents (`1e+16`, where serde_json writes `1e16`).
pub(crate) fn orjson_compact(v: &impl Serialize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, OrjsonFormatter);
    v.serialize(&mut ser).expect("in-memory JSON serializes");
    out
}

struct OrjsonFormatter;

impl serde_json::ser::Formatter for OrjsonFormatter {
    fn write_f64<W: ?Sized + std::io::Write>(&mut self, w: &mut W, v: f64) -> std::io::Result<()> {
        w.write_all(orjson_f64(v).as_bytes())
    }

    fn write_f32<W: ?Sized + std::io::Write>(&mut self, w: &mut W, v: f32) -> std::io::Result<()> {
        w.write_all(orjson_f64(f64::from(v)).as_bytes())
    }
}

/// orjson's float: the shortest digits that read back as `v` (Rust's `{:e}` gives the same
/// ones), written positionally when the decimal exponent is in -5..=15 (always with a fraction,
/// `100.0`), else as `d.ddde+N` / `d.ddde-N`; `null` for a non-finite value.
fn orjson_f64(v: f64) -> String {
    if !v.is_finite() {
        return "null".into();
    }
    let sci = format!("{:e}", v.abs());
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e}'s exponent is an integer");
    let sign = if v.is_sign_negative() { "-" } else { "" };
    if !(-5..16).contains(&exp) {
        let plus = if exp > 0 { "+" } else { "" };
        return format!("{sign}{mantissa}e{plus}{exp}");
    }
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if exp < 0 {
        let zeros = "0".repeat((-exp - 1) as usize);
        return format!("{sign}0.{zeros}{digits}");
    }
    let int_len = exp as usize + 1;
    if digits.len() <= int_len {
        format!("{sign}{digits:0<int_len$}.0")
    } else {
        format!("{sign}{}.{}", &digits[..int_len], &digits[int_len..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values are orjson 3.11's own output (`orjson.dumps(v)`), at each edge of its notation.
    #[test]
    fn floats_are_written_as_orjson_writes_them() {
        let cases = [
            (1e15, "1000000000000000.0"),
            (1.5e15, "1500000000000000.0"),
            (1e16, "1e+16"),
            (1.2345e16, "1.2345e+16"),
            (1.2345678901234568e17, "1.2345678901234568e+17"),
            (1e21, "1e+21"),
            (1e-5, "0.00001"),
            (1.5e-5, "0.000015"),
            (1.5e-6, "1.5e-6"),
            (1e-7, "1e-7"),
            (0.0001, "0.0001"),
            (0.001234, "0.001234"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (100.0, "100.0"),
            (0.1 + 0.2, "0.30000000000000004"),
            (123_456_789.0, "123456789.0"),
            (-85.520_809_984_000_01, "-85.52080998400001"),
        ];
        for (v, want) in cases {
            assert_eq!(orjson_f64(v), want, "{v:e}");
        }
        let line = orjson_compact(&Obj::new().with("a", 1e16).with("b", vec![J::from(2u64)]));
        assert_eq!(String::from_utf8(line).unwrap(), r#"{"a":1e+16,"b":[2]}"#);
    }
}
