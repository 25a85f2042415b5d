//! One AgentX request on the wire (spec §2.7): the chat body and the per-request headers.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{json, Map, Value};

use crate::agentx::prompt::{Chunk, Message};
use crate::client::Body;
use crate::config::{RunConfig, SessionRouting};

/// What every request body and header set of a run shares.
#[derive(Clone, Debug)]
pub(crate) struct Wire {
    /// `--model`.
    pub(crate) model: String,
    /// `--streaming`.
    pub(crate) streaming: bool,
    /// `--use-legacy-max-tokens`: `max_tokens` instead of `max_completion_tokens`.
    pub(crate) legacy_max_tokens: bool,
    /// `--extra-inputs`, merged last (they may override anything above them).
    pub(crate) extra_inputs: Map<String, Value>,
    /// Routing headers and `nvext.session_control`.
    pub(crate) routing: SessionRouting,
}

impl Wire {
    /// The run's wire settings: its model, streaming mode, token-limit key and extra inputs,
    /// and the AgentX routing asked for.
    pub(crate) fn of_run(cfg: &RunConfig, routing: &SessionRouting, model: String) -> Wire {
        Wire {
            model,
            streaming: cfg.streaming,
            legacy_max_tokens: cfg.legacy_max_tokens,
            extra_inputs: cfg.extra_inputs.clone(),
            routing: routing.clone(),
        }
    }

    /// Every key of a body in order, `messages` holding `messages` (the body writes the prompt
    /// itself at that key, as slices).
    fn fields(
        &self,
        messages: Value,
        max_tokens: u64,
        bind_session: Option<&str>,
    ) -> Map<String, Value> {
        let mut b = Map::new();
        b.insert("messages".into(), messages);
        b.insert("model".into(), Value::String(self.model.clone()));
        b.insert("stream".into(), Value::Bool(self.streaming));
        let key = if self.legacy_max_tokens {
            "max_tokens"
        } else {
            "max_completion_tokens"
        };
        b.insert(key.into(), Value::from(max_tokens));
        b.insert("ignore_eos".into(), Value::Bool(true));
        for (k, v) in &self.extra_inputs {
            b.insert(k.clone(), v.clone());
        }
        if self.streaming {
            b.insert("stream_options".into(), json!({"include_usage": true}));
        }
        if let (Some(session), Some(timeout)) = (bind_session, self.routing.nvext_session_timeout_s)
        {
            b.insert(
                "nvext".into(),
                json!({"session_control": {"session_id": session, "timeout": timeout, "action": "bind"}}),
            );
        }
        b
    }

    /// The body: `messages`, `model`, `stream`, `max_completion_tokens` (or `max_tokens`),
    /// `ignore_eos: true`, the extra inputs, `stream_options.include_usage` when streaming (the
    /// server's usage gives ISL/OSL, AIPerf's `--use-server-token-count`), and
    /// `nvext.session_control` (bind) when `bind_session` names the session to bind.
    pub(crate) fn body(
        &self,
        messages: &[Message],
        max_tokens: u64,
        bind_session: Option<&str>,
    ) -> Body {
        let b = self.fields(Value::Null, max_tokens, bind_session);
        // `--extra-inputs messages:…` replaced the prompt: the body is that map as it is.
        let ours = !self.extra_inputs.contains_key("messages");
        let mut out = Parts::default();
        out.glue.push(b'{');
        for (i, (k, v)) in b.iter().enumerate() {
            if i > 0 {
                out.glue.push(b',');
            }
            write_json(&mut out.glue, k.as_str());
            out.glue.push(b':');
            if k == "messages" && ours {
                out.messages(messages);
            } else {
                write_json(&mut out.glue, v);
            }
        }
        out.glue.push(b'}');
        out.finish()
    }

    /// `X-Request-ID`, `X-Correlation-ID` and the routing headers asked for.
    pub(crate) fn headers(
        &self,
        request_id: &str,
        correlation_id: &str,
        parent_correlation_id: Option<&str>,
    ) -> HeaderMap {
        let mut h = HeaderMap::new();
        let mut put = |name: &'static str, v: &str| {
            if let Ok(v) = HeaderValue::from_str(v) {
                h.insert(HeaderName::from_static(name), v);
            }
        };
        put("x-request-id", request_id);
        put("x-correlation-id", correlation_id);
        let r = &self.routing;
        if r.session_id_header {
            put("x-session-id", correlation_id);
        }
        if r.session_affinity_header {
            put("x-session-affinity", correlation_id);
        }
        if r.smg_routing_key {
            put("x-smg-routing-key", correlation_id);
        }
        if r.dynamo_headers {
            put("x-dynamo-session-id", correlation_id);
            if let Some(p) = parent_correlation_id {
                put("x-dynamo-parent-session-id", p);
            }
        }
        h
    }
}

/// A body being written: its own bytes (`glue`) between the messages' slices. `cuts` marks, in
/// order, where each slice goes in the glue.
#[derive(Default)]
struct Parts {
    glue: Vec<u8>,
    cuts: Vec<(usize, Cut)>,
    /// The buffers the messages' ranges index (the corpus pool).
    bases: Vec<Bytes>,
}

/// A slice of a message, cut into the glue.
enum Cut {
    /// `range` of `Parts::bases[i]`.
    Base(usize, std::ops::Range<usize>),
    /// Bytes of the message's own (the cache-bust marker).
    Own(Bytes),
}

impl Parts {
    /// `[{"role":…,"content":"…"},…]`, keys in `serde_json::Map`'s order as `json!` makes them.
    fn messages(&mut self, messages: &[Message]) {
        self.glue.push(b'[');
        for (i, m) in messages.iter().enumerate() {
            if i > 0 {
                self.glue.push(b',');
            }
            let role = |g: &mut Vec<u8>| {
                g.extend_from_slice(b"\"role\":");
                write_json(g, m.role.as_str());
            };
            self.glue.push(b'{');
            if role_first() {
                role(&mut self.glue);
                self.glue.push(b',');
            }
            self.glue.extend_from_slice(b"\"content\":\"");
            let base = m.content.base().map(|b| {
                match self.bases.iter().position(|k| k.as_ptr() == b.as_ptr()) {
                    Some(i) => i,
                    None => {
                        self.bases.push(b.clone());
                        self.bases.len() - 1
                    }
                }
            });
            for c in m.content.chunks() {
                let cut = match c {
                    Chunk::Base(r) => Cut::Base(base.expect("a range has its base"), r),
                    Chunk::Own(b) => Cut::Own(b.clone()),
                };
                self.cuts.push((self.glue.len(), cut));
            }
            self.glue.push(b'"');
            if !role_first() {
                self.glue.push(b',');
                role(&mut self.glue);
            }
            self.glue.push(b'}');
        }
        self.glue.push(b']');
    }

    /// The glue frozen once and cut around the slices: no byte is copied twice, and each slice
    /// is an offset into the glue or the pool.
    fn finish(self) -> Body {
        let glue = Bytes::from(self.glue);
        let mut body = Body::builder();
        let own = body.base(&glue).expect("nothing pushed yet");
        let bases: Vec<Option<u32>> = self.bases.iter().map(|b| body.base(b)).collect();
        let mut at = 0;
        for (cut, slice) in self.cuts {
            body.push_range(own, at..cut);
            match slice {
                Cut::Base(i, r) => match bases[i] {
                    Some(b) => body.push_range(b, r),
                    None => body.push(self.bases[i].slice(r)),
                },
                Cut::Own(b) => body.push(b),
            }
            at = cut;
        }
        body.push_range(own, at..glue.len());
        body.finish()
    }
}

/// `v` as `serde_json` writes it compactly.
fn write_json(out: &mut Vec<u8>, v: &(impl serde::Serialize + ?Sized)) {
    serde_json::to_writer(out, v).expect("JSON values and strings always serialize");
}

/// Whether `json!({"role": …, "content": …})` keeps `role` first (serde_json's
/// `preserve_order`) or sorts the keys (`content` first).
fn role_first() -> bool {
    static FIRST: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FIRST.get_or_init(|| {
        json!({"role": 0, "content": 0})
            .as_object()
            .and_then(|o| o.keys().next())
            .is_some_and(|k| k == "role")
    })
}

/// `nvext.session_control.session_id`: `<conversation_id>:<marker trimmed>` (AIPerf's fork).
pub(crate) fn session_id(conversation_id: &str, marker: &str) -> String {
    format!("{conversation_id}:{}", marker.trim())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agentx::prompt::Role;

    fn wire() -> Wire {
        Wire {
            model: "m".into(),
            streaming: true,
            legacy_max_tokens: false,
            extra_inputs: [("thinking".to_string(), Value::Bool(true))]
                .into_iter()
                .collect(),
            routing: SessionRouting::default(),
        }
    }

    #[test]
    fn body_carries_the_agentx_fields_and_binds_only_when_asked() {
        let m = [Message {
            role: Role::User,
            content: "[rid:abc]\n\nhi".into(),
        }];
        let mut w = wire();
        let v: Value =
            serde_json::from_slice(&w.body(&m, 7, Some("c:[rid:abc]")).to_bytes()).unwrap();
        assert_eq!(v["messages"][0]["role"], "user");
        assert_eq!(v["model"], "m");
        assert_eq!(v["stream"], true);
        assert_eq!(v["max_completion_tokens"], 7);
        assert!(v.get("max_tokens").is_none());
        assert_eq!(v["ignore_eos"], true);
        assert_eq!(v["thinking"], true);
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert!(v.get("nvext").is_none(), "no session control unless asked");

        w.routing.nvext_session_timeout_s = Some(3600);
        w.legacy_max_tokens = true;
        let v: Value =
            serde_json::from_slice(&w.body(&m, 1, Some("c:[rid:abc]")).to_bytes()).unwrap();
        assert_eq!(v["max_tokens"], 1);
        assert_eq!(
            v["nvext"]["session_control"],
            json!({"session_id": "c:[rid:abc]", "timeout": 3600, "action": "bind"})
        );
        let v: Value = serde_json::from_slice(&w.body(&m, 1, None).to_bytes()).unwrap();
        assert!(v.get("nvext").is_none(), "later requests do not bind again");
        assert_eq!(
            session_id("conv-a", "[rid:stable]\n\n"),
            "conv-a:[rid:stable]"
        );
    }

    #[test]
    fn headers_name_the_request_the_conversation_and_the_router_keys() {
        let mut w = wire();
        let h = w.headers("r1", "c1", Some("p1"));
        assert_eq!(h["x-request-id"], "r1");
        assert_eq!(h["x-correlation-id"], "c1");
        assert!(h.get("x-dynamo-session-id").is_none());
        w.routing = SessionRouting {
            dynamo_headers: true,
            session_id_header: true,
            smg_routing_key: true,
            session_affinity_header: true,
            nvext_session_timeout_s: None,
        };
        let h = w.headers("r1", "c1", Some("p1"));
        assert_eq!(h["x-dynamo-session-id"], "c1");
        assert_eq!(h["x-dynamo-parent-session-id"], "p1");
        assert_eq!(h["x-session-id"], "c1");
        assert_eq!(h["x-smg-routing-key"], "c1");
        assert_eq!(h["x-session-affinity"], "c1");
        let h = w.headers("r2", "c0", None);
        assert!(h.get("x-dynamo-parent-session-id").is_none(), "root");
    }

    /// The body as it was built before it became slices: the messages as values in the same
    /// keys, serialized by `serde_json` whole.
    fn body_via_value(
        w: &Wire,
        messages: &[Message],
        max_tokens: u64,
        bind: Option<&str>,
    ) -> Vec<u8> {
        let msgs: Vec<Value> = messages
            .iter()
            .map(|m| json!({"role": m.role.as_str(), "content": m.content.to_plain()}))
            .collect();
        let b = w.fields(Value::Array(msgs), max_tokens, bind);
        serde_json::to_vec(&Value::Object(b)).unwrap()
    }

    #[test]
    fn bodies_of_odd_text_and_overriding_extras_are_the_serialized_value() {
        let m = [
            Message {
                role: Role::System,
                content: "tools: {\"a\": \"\\d+\"}\t\u{1} ü 🍕".into(),
            },
            Message {
                role: Role::User,
                content: "".into(),
            },
            Message {
                role: Role::Assistant,
                content: "</think>\r\n".into(),
            },
        ];
        let mut w = wire();
        for extra in [
            json!({}),
            json!({"max_completion_tokens": 5, "ignore_eos": false, "stream": "x"}),
            json!({"messages": [{"role": "user", "content": "theirs"}], "zzz": [1, 2.5, null]}),
            json!({"aaa": {"nested": "\"q\""}, "stream_options": {"continuous_usage_stats": true}}),
        ] {
            w.extra_inputs = extra.as_object().unwrap().clone();
            for (streaming, bind) in [(true, Some("s:[rid:1]")), (false, None)] {
                w.streaming = streaming;
                w.routing.nvext_session_timeout_s = Some(30);
                let got = w.body(&m, 9, bind).to_bytes();
                assert_eq!(
                    String::from_utf8_lossy(&got),
                    String::from_utf8_lossy(&body_via_value(&w, &m, 9, bind)),
                    "extra inputs {extra}"
                );
            }
        }
        assert_eq!(
            w.body(&[], 1, None).to_bytes(),
            body_via_value(&w, &[], 1, None)
        );
    }

    /// Every body of the fixture traces' turns (every conversation, the cache-bust marker on,
    /// the wire settings varied turn by turn): each equals the serialized value, and together
    /// they hash to what the implementation before the slices sent (recorded at `2e2bd89`).
    #[test]
    fn every_fixture_body_is_byte_identical_to_the_recorded_one() {
        use std::sync::Arc;

        use crate::agentx::prompt::{apply_marker, cache_bust_marker, ConvRef, PromptSynth};
        use crate::agentx::{load, LoadOptions};

        let path = crate::test_tools::Tool::Dsv4Tokenizer.path();
        let tok = Arc::new(tokenizer_encoders::Tokenizer::from_path(&path).unwrap());
        let synth = Arc::new(PromptSynth::new(tok, 7).unwrap());
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let corpus = load(
            &dir.join("tests/fixtures/agentx/traces.jsonl"),
            &LoadOptions::default(),
        )
        .unwrap();
        let mut w = wire();
        let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
        let mut n = 0;
        for (lane, t) in corpus.traces.into_iter().enumerate() {
            let t = Arc::new(t);
            let marker = cache_bust_marker("bench", 0, lane, &t.id);
            let convs =
                std::iter::once(ConvRef::Root).chain((0..t.children.len()).map(ConvRef::Child));
            for conv in convs {
                let mut p = synth.stream(t.clone(), conv);
                let c = t.conversation(conv);
                for k in 0..c.turns.len() {
                    let mut m = p.turn(k).unwrap().messages;
                    apply_marker(&mut m, &marker);
                    w.legacy_max_tokens = k % 2 == 1;
                    w.streaming = k % 4 != 3;
                    w.routing.nvext_session_timeout_s = (k % 3 == 0).then_some(600);
                    let bind = (k == 0).then(|| session_id(&c.session_id, &marker));
                    let body = w.body(&m, 100 + k as u64, bind.as_deref());
                    assert!(
                        body.parts_count() > 2 * m.len(),
                        "the prompt is sent as slices"
                    );
                    let body = body.to_bytes();
                    assert!(
                        body[..] == body_via_value(&w, &m, 100 + k as u64, bind.as_deref())[..],
                        "{} turn {k}",
                        c.session_id
                    );
                    digest.update(&(body.len() as u64).to_le_bytes());
                    digest.update(&body);
                    n += 1;
                }
            }
        }
        let hex: String = digest
            .finish()
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(n, 20);
        assert_eq!(
            hex,
            "cd6e87880efcffb616f044e42f3d19b8ab6c3703a054df8ac41737578e0b0f53"
        );
    }
}
