//! A trace line's JSON as a tree whose lists of block ids stay numbers: `serde_json::Value`
//! spent a 32-byte value and its drop on each of the corpus's ~85 M ids, over half of the load's
//! CPU (`perf` of a 1,536-lane load). Anything else reads as `Value` would; an error shows a
//! value as `Value` prints it.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserialize, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Number;

/// One JSON value.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Json {
    Null,
    Bool(bool),
    Num(Number),
    Str(String),
    /// A non-empty list of integers from 0 to `u32::MAX` (block ids), as numbers.
    Ids(Vec<u32>),
    List(Vec<Json>),
    /// The keys in their order, each once (a repeated key keeps its last value, as `Value`'s
    /// map does).
    Obj(Vec<(String, Json)>),
}

impl Json {
    pub(super) fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }

    pub(super) fn as_u64(&self) -> Option<u64> {
        match self {
            Json::Num(n) => n.as_u64(),
            _ => None,
        }
    }

    pub(super) fn as_f64(&self) -> Option<f64> {
        match self {
            Json::Num(n) => n.as_f64(),
            _ => None,
        }
    }

    /// The items of a list, block ids as numbers; `None` for anything else.
    pub(super) fn items(&self) -> Option<Cow<'_, [Json]>> {
        match self {
            Json::List(l) => Some(Cow::Borrowed(l)),
            Json::Ids(ids) => Some(Cow::Owned(
                ids.iter().map(|&i| Json::Num(i.into())).collect(),
            )),
            _ => None,
        }
    }

    fn to_value(&self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Num(n) => Value::Number(n.clone()),
            Json::Str(s) => Value::String(s.clone()),
            Json::Ids(ids) => Value::Array(ids.iter().map(|&i| Value::from(i)).collect()),
            Json::List(l) => Value::Array(l.iter().map(Json::to_value).collect()),
            Json::Obj(o) => {
                Value::Object(o.iter().map(|(k, v)| (k.clone(), v.to_value())).collect())
            }
        }
    }
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Only errors print values: the same text as `Value`'s.
        self.to_value().fmt(f)
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Json, E> {
        Ok(Json::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Json, E> {
        Ok(Json::Num(n.into()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Json, E> {
        Ok(Json::Num(n.into()))
    }

    fn visit_f64<E>(self, x: f64) -> Result<Json, E> {
        // serde_json never hands out a non-finite number.
        Ok(Number::from_f64(x).map_or(Json::Null, Json::Num))
    }

    fn visit_str<E>(self, s: &str) -> Result<Json, E> {
        Ok(Json::Str(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<Json, E> {
        Ok(Json::Str(s))
    }

    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_none<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Json, D::Error> {
        Json::deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        // Ids while every item is one; a list of values from the first that is not.
        let mut ids: Vec<u32> = Vec::new();
        let mut list: Option<Vec<Json>> = None;
        while let Some(v) = seq.next_element::<Json>()? {
            if let Some(l) = list.as_mut() {
                l.push(v);
                continue;
            }
            match v.as_u64().and_then(|n| u32::try_from(n).ok()) {
                Some(id) => ids.push(id),
                None => {
                    let mut l: Vec<Json> = ids.drain(..).map(|i| Json::Num(i.into())).collect();
                    l.push(v);
                    list = Some(l);
                }
            }
        }
        Ok(match list {
            Some(l) => Json::List(l),
            None if ids.is_empty() => Json::List(Vec::new()),
            None => Json::Ids(ids),
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut obj: Vec<(String, Json)> = Vec::new();
        while let Some(k) = map.next_key::<String>()? {
            let v = if k == "hash_ids" {
                // The text of the value, already checked as JSON, read by `ids` where it is a
                // plain list of ids (every trace's lists are): serde's visitor per number was
                // still most of the load after the ids stopped being `Value`s.
                let raw: &RawValue = map.next_value()?;
                match ids(raw.get()) {
                    Some(ids) => ids,
                    None => serde_json::from_str(raw.get()).map_err(A::Error::custom)?,
                }
            } else {
                map.next_value::<Json>()?
            };
            match obj.iter_mut().find(|(have, _)| *have == k) {
                Some(slot) => slot.1 = v,
                None => obj.push((k, v)),
            }
        }
        Ok(Json::Obj(obj))
    }
}

/// A JSON list of integers from 0 to `u32::MAX`, as ids; `None` for any other value (whose
/// text is valid JSON: a list with anything else in it, a number out of range, not a list).
fn ids(text: &str) -> Option<Json> {
    let inner = text.trim().strip_prefix('[')?.strip_suffix(']')?;
    let mut out = Vec::with_capacity(inner.len() / 4);
    let (mut n, mut digits) = (0u64, 0u32);
    for &c in inner.as_bytes() {
        match c {
            b'0'..=b'9' => {
                n = n * 10 + u64::from(c - b'0');
                digits += 1;
                if digits > 10 {
                    return None;
                }
            }
            b',' => {
                out.push(u32::try_from(n).ok().filter(|_| digits > 0)?);
                (n, digits) = (0, 0);
            }
            b' ' | b'\n' | b'\r' | b'\t' => {}
            _ => return None,
        }
    }
    if digits == 0 {
        // `[]` (valid JSON has no trailing comma, so nothing else ends without a digit).
        return out.is_empty().then_some(Json::List(Vec::new()));
    }
    out.push(u32::try_from(n).ok()?);
    Some(Json::Ids(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Json {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn block_id_lists_stay_numbers_and_everything_prints_as_value_does() {
        assert_eq!(parse("[0, 7, 4294967295]"), Json::Ids(vec![0, 7, u32::MAX]));
        for text in [
            r#"[0, 4294967296]"#,
            r#"[1, -1, 2]"#,
            r#"[1, 2.5]"#,
            r#"[3, "x", null]"#,
            r#"{"b":[1,2],"a":{"c":[true,false]},"t":1.0,"e":[]}"#,
            r#"[]"#,
            r#"-0.0"#,
            r#"1e300"#,
        ] {
            let v: serde_json::Value = serde_json::from_str(text).unwrap();
            assert_eq!(parse(text).to_string(), v.to_string(), "{text}");
        }
        assert!(matches!(parse("[1, -1]"), Json::List(l) if l.len() == 2));
        assert_eq!(
            parse("[5, 6]").items().unwrap().into_owned(),
            vec![Json::Num(5.into()), Json::Num(6.into())]
        );
    }

    #[test]
    fn block_ids_read_from_their_text_equal_the_visitor_s_and_the_rest_falls_back() {
        for list in [
            "[0,7,4294967295]",
            "[ 1 , 2 ,\n3 ]",
            "[]",
            "[5]",
            "[4294967296]",
            "[1,-1]",
            "[1,2.0]",
            "[1,2e3]",
            "[1,\"2\"]",
            "[[1],2]",
            "null",
            "7",
            "[12345678901,1]",
        ] {
            let text = format!(r#"{{"hash_ids":{list},"other":{list}}}"#);
            let Json::Obj(o) = parse(&text) else {
                panic!("an object")
            };
            assert_eq!(o[0].1, o[1].1, "{list}");
            assert_eq!(o[0].1.to_string(), parse(list).to_string(), "{list}");
        }
        assert_eq!(ids("[0, 4294967295]"), Some(Json::Ids(vec![0, u32::MAX])));
        assert_eq!(ids("[4294967296]"), None);
    }

    #[test]
    fn a_repeated_key_keeps_its_last_value_in_its_first_place() {
        let Json::Obj(o) = parse(r#"{"a":1,"b":2,"a":3}"#) else {
            panic!("an object")
        };
        assert_eq!(
            o,
            vec![
                ("a".to_owned(), Json::Num(3.into())),
                ("b".to_owned(), Json::Num(2.into()))
            ]
        );
    }
}
