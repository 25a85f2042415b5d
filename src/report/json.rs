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
