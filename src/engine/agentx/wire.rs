//! One AgentX request on the wire (spec §2.7): the chat body and the per-request headers.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{json, Map, Value};

use crate::agentx::prompt::Message;
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

    /// The body: `messages`, `model`, `stream`, `max_completion_tokens` (or `max_tokens`),
    /// `ignore_eos: true`, the extra inputs, `stream_options.include_usage` when streaming (the
    /// server's usage gives ISL/OSL, AIPerf's `--use-server-token-count`), and
    /// `nvext.session_control` (bind) when `bind_session` names the session to bind.
    pub(crate) fn body(
        &self,
        messages: &[Message],
        max_tokens: u64,
        bind_session: Option<&str>,
    ) -> Bytes {
        let mut b = Map::new();
        let msgs: Vec<Value> = messages
            .iter()
            .map(|m| json!({"role": m.role.as_str(), "content": m.content}))
            .collect();
        b.insert("messages".into(), Value::Array(msgs));
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
        Bytes::from(serde_json::to_vec(&Value::Object(b)).unwrap_or_default())
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
        let v: Value = serde_json::from_slice(&w.body(&m, 7, Some("c:[rid:abc]"))).unwrap();
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
        let v: Value = serde_json::from_slice(&w.body(&m, 1, Some("c:[rid:abc]"))).unwrap();
        assert_eq!(v["max_tokens"], 1);
        assert_eq!(
            v["nvext"]["session_control"],
            json!({"session_id": "c:[rid:abc]", "timeout": 3600, "action": "bind"})
        );
        let v: Value = serde_json::from_slice(&w.body(&m, 1, None)).unwrap();
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
}
