//! Samples -> request bodies: the second stage. Bodies are built once, before the clock starts,
//! so the hot loop only clones a reference-counted buffer.

use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::dataset::Sample;

/// Which OpenAI-compatible endpoint to call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EndpointType {
    /// `/v1/chat/completions` with `messages`.
    Chat,
    /// `/v1/completions` with `prompt`.
    Completions,
}

impl EndpointType {
    /// The default path.
    pub fn path(self) -> &'static str {
        match self {
            EndpointType::Chat => "/v1/chat/completions",
            EndpointType::Completions => "/v1/completions",
        }
    }
}

/// Body-building options (validated by `config`).
#[derive(Clone, Debug)]
pub(crate) struct RenderOptions {
    pub(crate) endpoint: EndpointType,
    pub(crate) model: String,
    pub(crate) streaming: bool,
    pub(crate) per_chunk_usage: bool,
    pub(crate) osl: Option<u32>,
    pub(crate) legacy_max_tokens: bool,
    pub(crate) extra_inputs: Map<String, Value>,
}

/// Builds the JSON body for one sample.
pub(crate) fn body(sample: &Sample, o: &RenderOptions) -> Bytes {
    let mut b = Map::new();
    b.insert("model".into(), Value::String(o.model.clone()));
    // The text as written; client-side encoders (`tokenizer_encoders::Encoder`) plug in here.
    let prompt = sample.prompt.clone();
    match o.endpoint {
        EndpointType::Chat => {
            b.insert(
                "messages".into(),
                json!([{"role": "user", "content": prompt}]),
            );
        }
        EndpointType::Completions => {
            b.insert("prompt".into(), Value::String(prompt));
        }
    }
    if let Some(n) = sample.max_tokens.or(o.osl) {
        let key = if o.endpoint == EndpointType::Chat && !o.legacy_max_tokens {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        b.insert(key.into(), json!(n));
    }
    b.insert("stream".into(), Value::Bool(o.streaming));
    if o.streaming {
        let mut so = json!({"include_usage": true});
        if o.per_chunk_usage {
            so["continuous_usage_stats"] = Value::Bool(true);
        }
        b.insert("stream_options".into(), so);
    }
    for (k, v) in &o.extra_inputs {
        b.insert(k.clone(), v.clone());
    }
    Bytes::from(Value::Object(b).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(endpoint: EndpointType) -> RenderOptions {
        RenderOptions {
            endpoint,
            model: "m".into(),
            streaming: true,
            per_chunk_usage: false,
            osl: Some(256),
            legacy_max_tokens: false,
            extra_inputs: Map::new(),
        }
    }

    #[test]
    fn chat_body_has_messages_usage_and_max_completion_tokens() {
        let s = Sample {
            id: "a".into(),
            prompt: "hi \"there\"".into(),
            max_tokens: None,
            timestamp_ms: None,
        };
        let v: Value = serde_json::from_slice(&body(&s, &opts(EndpointType::Chat))).unwrap();
        assert_eq!(v["messages"][0]["content"], "hi \"there\"");
        assert_eq!(v["max_completion_tokens"], 256);
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert!(v.get("ignore_eos").is_none());
    }

    #[test]
    fn completions_body_uses_prompt_and_extra_inputs_win() {
        let s = Sample {
            id: "a".into(),
            prompt: "x".into(),
            timestamp_ms: None,
            max_tokens: Some(9),
        };
        let mut o = opts(EndpointType::Completions);
        o.extra_inputs.insert("temperature".into(), json!(0.6));
        o.extra_inputs.insert("stream".into(), json!(true));
        o.per_chunk_usage = true;
        let v: Value = serde_json::from_slice(&body(&s, &o)).unwrap();
        assert_eq!(v["prompt"], "x");
        assert_eq!(v["max_tokens"], 9);
        assert_eq!(v["temperature"], 0.6);
        assert_eq!(v["stream_options"]["continuous_usage_stats"], true);
    }
}
