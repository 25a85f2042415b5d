//! One trace's JSON -> checked raw fields. Every value is read by hand so an error can name the
//! trace, the request index and the field; keys the format does not define are collected, not
//! fatal (Hugging Face `datasets` may add keys, and a `null` for the other request variant's keys
//! is what its merged row schema produces).

use std::borrow::Cow;

use super::json::Json;

use super::{AgentxError, Origin, Transport, UnknownKey, UnknownMap};

/// Keys of a trace object.
const TRACE_KEYS: [&str; 8] = [
    "id",
    "models",
    "block_size",
    "hash_id_scope",
    "tool_tokens",
    "system_tokens",
    "requests",
    "totals",
];
/// Keys of an `n`/`s` request.
const REQUEST_KEYS: [&str; 14] = [
    "t",
    "type",
    "model",
    "in",
    "input_length",
    "out",
    "output_length",
    "hash_ids",
    "input_types",
    "output_types",
    "stop",
    "api_time",
    "think_time",
    "ttft",
];
/// Keys of a `subagent` entry.
const SUBAGENT_KEYS: [&str; 12] = [
    "t",
    "type",
    "agent_id",
    "subagent_type",
    "duration_ms",
    "total_tokens",
    "tool_use_count",
    "status",
    "requests",
    "models",
    "tool_tokens",
    "system_tokens",
];

/// A checked `n`/`s` request.
pub(super) struct RawRequest {
    pub(super) t: f64,
    pub(super) transport: Transport,
    pub(super) model: String,
    pub(super) input: u64,
    pub(super) output: u64,
    pub(super) hash_ids: Vec<u32>,
    pub(super) input_types: Vec<String>,
    pub(super) stop: String,
    pub(super) api_time: Option<f64>,
}

/// A checked `subagent` entry.
pub(super) struct RawSubagent {
    pub(super) t: f64,
    pub(super) agent_id: String,
    pub(super) subagent_type: String,
    pub(super) duration_ms: Option<f64>,
    pub(super) requests: Vec<RawRequest>,
    pub(super) tool_tokens: u64,
    pub(super) system_tokens: u64,
}

/// One entry of a trace's `requests`.
pub(super) enum RawEntry {
    Request(RawRequest),
    Subagent(RawSubagent),
}

/// A checked trace.
pub(super) struct RawTrace {
    pub(super) id: String,
    pub(super) models: Vec<String>,
    pub(super) block_size: u64,
    pub(super) tool_tokens: u64,
    pub(super) system_tokens: u64,
    pub(super) requests: Vec<RawEntry>,
}

/// Unknown keys seen so far.
#[derive(Default)]
pub(super) struct Unknown(UnknownMap);

impl Unknown {
    fn note(&mut self, level: &'static str, key: &str, trace: &str) {
        self.0
            .entry((level, key.to_string()))
            .or_insert_with(|| (trace.to_string(), 0))
            .1 += 1;
    }

    /// Adds the keys of a later trace (merged in input order, the first trace seen stays).
    pub(super) fn absorb(&mut self, later: Unknown) {
        for (k, (trace, n)) in later.0 {
            self.0.entry(k).or_insert_with(|| (trace, 0)).1 += n;
        }
    }

    pub(super) fn into_keys(self) -> Vec<UnknownKey> {
        self.0
            .into_iter()
            .map(|((level, key), (first_trace, count))| UnknownKey {
                level,
                key,
                first_trace,
                count,
            })
            .collect()
    }
}

/// Reads fields of one object, naming them in errors.
struct Fields<'a> {
    obj: &'a [(String, Json)],
    /// `requests[2].` style prefix for field names.
    at: String,
    origin: &'a Origin,
    trace: Option<&'a str>,
}

impl<'a> Fields<'a> {
    fn bad(&self, key: &str, problem: impl Into<String>) -> AgentxError {
        AgentxError::Invalid {
            origin: self.origin.clone(),
            trace: self.trace.map(str::to_string),
            field: format!("{}{key}", self.at),
            problem: problem.into(),
        }
    }

    /// The value, treating `null` as absent.
    fn get(&self, key: &str) -> Option<&'a Json> {
        self.obj
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
            .filter(|v| !v.is_null())
    }

    fn required(&self, key: &str) -> Result<&'a Json, AgentxError> {
        self.get(key).ok_or_else(|| self.bad(key, "is missing"))
    }

    fn str(&self, key: &str) -> Result<Option<String>, AgentxError> {
        match self.get(key) {
            None => Ok(None),
            Some(Json::Str(s)) => Ok(Some(s.clone())),
            Some(v) => Err(self.bad(key, format!("is {v}; expected a string"))),
        }
    }

    fn uint(&self, key: &str) -> Result<Option<u64>, AgentxError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.bad(key, format!("is {v}; expected a non-negative integer"))),
        }
    }

    /// A finite number of seconds (or milliseconds for `duration_ms`).
    fn num(&self, key: &str) -> Result<Option<f64>, AgentxError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.as_f64() {
                Some(x) if x.is_finite() => Ok(Some(x)),
                _ => Err(self.bad(key, format!("is {v}; expected a finite number"))),
            },
        }
    }

    fn strings(&self, key: &str) -> Result<Vec<String>, AgentxError> {
        let Some(v) = self.get(key) else {
            return Ok(Vec::new());
        };
        let items = v
            .items()
            .ok_or_else(|| self.bad(key, format!("is {v}; expected a list of strings")))?;
        let string = |(i, v): (usize, &Json)| match v {
            Json::Str(s) => Ok(s.clone()),
            _ => Err(self.bad(&format!("{key}[{i}]"), format!("is {v}; expected a string"))),
        };
        items.iter().enumerate().map(string).collect()
    }

    fn array(&self, key: &str) -> Result<Cow<'a, [Json]>, AgentxError> {
        let v = self.required(key)?;
        v.items()
            .ok_or_else(|| self.bad(key, format!("is {v}; expected a list")))
    }

    /// `in`/`input_length` style pairs: exactly one of the two names.
    fn aliased(&self, name: &str, alias: &str) -> Result<u64, AgentxError> {
        match (self.uint(name)?, self.uint(alias)?) {
            (Some(_), Some(_)) => Err(self.bad(
                name,
                format!("is given twice, as `{name}` and `{alias}`; keep one"),
            )),
            (Some(x), None) | (None, Some(x)) => Ok(x),
            (None, None) => Err(self.bad(name, format!("is missing (also accepted as `{alias}`)"))),
        }
    }

    /// Notes keys outside `known`; a `null` under a key of `tolerated` (the other variant's
    /// keys) is the merged row schema, not an unknown key.
    fn unknown(&self, known: &[&str], tolerated: &[&str], level: &'static str, u: &mut Unknown) {
        for (k, v) in self.obj.iter() {
            let k = k.as_str();
            let defined = known.contains(&k) || (v.is_null() && tolerated.contains(&k));
            if !defined {
                u.note(level, k, self.trace.unwrap_or("(no id)"));
            }
        }
    }
}

fn object<'a>(
    v: &'a Json,
    at: String,
    origin: &'a Origin,
    trace: Option<&'a str>,
) -> Result<Fields<'a>, AgentxError> {
    match v {
        Json::Obj(obj) => Ok(Fields {
            obj,
            at,
            origin,
            trace,
        }),
        _ => Err(AgentxError::Invalid {
            origin: origin.clone(),
            trace: trace.map(str::to_string),
            field: at.trim_end_matches('.').to_string(),
            problem: format!("is {v}; expected an object"),
        }),
    }
}

/// Checks one trace object.
pub(super) fn trace(v: &Json, origin: &Origin, u: &mut Unknown) -> Result<RawTrace, AgentxError> {
    let head = object(v, String::new(), origin, None)?;
    let id = match head.str("id")? {
        Some(id) if !id.trim().is_empty() => id,
        Some(_) => return Err(head.bad("id", "is empty; every trace needs a unique id")),
        None => return Err(head.bad("id", "is missing")),
    };
    let f = Fields {
        obj: head.obj,
        at: String::new(),
        origin,
        trace: Some(&id),
    };
    f.unknown(&TRACE_KEYS, &[], "trace", u);
    let block_size = f
        .uint("block_size")?
        .ok_or_else(|| f.bad("block_size", "is missing"))?;
    if block_size == 0 {
        return Err(f.bad(
            "block_size",
            "is 0; expected tokens per hash block (64 in the corpora)",
        ));
    }
    if let Some(scope) = f.str("hash_id_scope")? {
        if scope != "local" {
            return Err(f.bad(
                "hash_id_scope",
                format!("is {scope:?}; only \"local\" (hash ids namespaced per trace) is defined"),
            ));
        }
    }
    let list = f.array("requests")?;
    if list.is_empty() {
        return Err(f.bad("requests", "is empty; a trace needs at least one request"));
    }
    let mut requests = Vec::new();
    for (i, r) in list.iter().enumerate() {
        let rf = object(r, format!("requests[{i}]."), origin, Some(&id))?;
        let kind = rf
            .str("type")?
            .ok_or_else(|| rf.bad("type", "is missing"))?;
        requests.push(match kind.as_str() {
            "subagent" => RawEntry::Subagent(subagent(&rf, u)?),
            "n" | "s" => RawEntry::Request(request(&rf, u, "request")?),
            other => {
                return Err(rf.bad(
                    "type",
                    format!("is {other:?}; expected \"n\", \"s\" or \"subagent\""),
                ))
            }
        });
    }
    Ok(RawTrace {
        models: f.strings("models")?,
        tool_tokens: f.uint("tool_tokens")?.unwrap_or(0),
        system_tokens: f.uint("system_tokens")?.unwrap_or(0),
        block_size,
        requests,
        id: id.clone(),
    })
}

fn request(
    f: &Fields<'_>,
    u: &mut Unknown,
    level: &'static str,
) -> Result<RawRequest, AgentxError> {
    f.unknown(&REQUEST_KEYS, &SUBAGENT_KEYS, level, u);
    let transport = match f.str("type")?.as_deref() {
        Some("n") => Transport::Normal,
        Some("s") => Transport::Streaming,
        Some(other) => return Err(f.bad("type", format!("is {other:?}; expected \"n\" or \"s\""))),
        None => return Err(f.bad("type", "is missing")),
    };
    let t = f.num("t")?.ok_or_else(|| f.bad("t", "is missing"))?;
    if t < 0.0 {
        return Err(f.bad("t", format!("is {t}; expected seconds >= 0")));
    }
    let api_time = f.num("api_time")?;
    for key in ["api_time", "think_time", "ttft"] {
        if let Some(x) = f.num(key)? {
            if x < 0.0 {
                return Err(f.bad(key, format!("is {x}; expected seconds >= 0")));
            }
        }
    }
    let hash_ids = match f.get("hash_ids") {
        None => Vec::new(),
        Some(Json::Ids(ids)) => ids.clone(),
        Some(v) => {
            let items = v.items().ok_or_else(|| {
                f.bad("hash_ids", format!("is {v}; expected a list of block ids"))
            })?;
            // Block ids are local to a trace and numbered from 0 as first seen: 32 bits hold
            // them and halve the memory of a ~100k-request corpus. A list of such ids arrives
            // as `Json::Ids`; this is any other list, an empty one or one with a bad item.
            let id = |(i, v): (usize, &Json)| {
                v.as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| {
                        f.bad(
                            &format!("hash_ids[{i}]"),
                            format!(
                                "is {v}; expected a block id from 0 to {} (ids are local to \
                                 the trace, numbered as first seen)",
                                u32::MAX
                            ),
                        )
                    })
            };
            items.iter().enumerate().map(id).collect::<Result<_, _>>()?
        }
    };
    f.strings("output_types")?;
    Ok(RawRequest {
        t,
        transport,
        model: f.str("model")?.unwrap_or_default(),
        input: f.aliased("in", "input_length")?,
        output: f.aliased("out", "output_length")?,
        hash_ids,
        input_types: f.strings("input_types")?,
        stop: f.str("stop")?.unwrap_or_default(),
        api_time,
    })
}

fn subagent(f: &Fields<'_>, u: &mut Unknown) -> Result<RawSubagent, AgentxError> {
    f.unknown(&SUBAGENT_KEYS, &REQUEST_KEYS, "subagent", u);
    let t = f.num("t")?.ok_or_else(|| f.bad("t", "is missing"))?;
    if t < 0.0 {
        return Err(f.bad("t", format!("is {t}; expected seconds >= 0")));
    }
    let agent_id = match f.str("agent_id")? {
        Some(a) if !a.is_empty() => a,
        _ => {
            return Err(f.bad(
                "agent_id",
                "is missing or empty; it names the child session",
            ))
        }
    };
    for key in ["total_tokens", "tool_use_count"] {
        f.uint(key)?;
    }
    f.str("status")?;
    f.strings("models")?;
    let mut requests = Vec::new();
    for (i, r) in f.array("requests")?.iter().enumerate() {
        let rf = object(r, format!("{}requests[{i}].", f.at), f.origin, f.trace)?;
        match rf.str("type")?.as_deref() {
            Some("n" | "s") => requests.push(request(&rf, u, "subagent request")?),
            Some(other) => {
                return Err(rf.bad(
                    "type",
                    format!("is {other:?}; a subagent's requests are \"n\" or \"s\" (no nesting)"),
                ))
            }
            None => return Err(rf.bad("type", "is missing")),
        }
    }
    Ok(RawSubagent {
        t,
        subagent_type: f.str("subagent_type")?.unwrap_or_default(),
        duration_ms: f.num("duration_ms")?,
        tool_tokens: f.uint("tool_tokens")?.unwrap_or(0),
        system_tokens: f.uint("system_tokens")?.unwrap_or(0),
        requests,
        agent_id,
    })
}
