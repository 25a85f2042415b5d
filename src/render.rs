//! Samples -> request bodies: the second stage. Bodies are built once, before the clock starts,
//! so the hot loop only clones a reference-counted buffer.

use bytes::Bytes;
use serde_json::{json, Map, Value};

use std::sync::Arc;

use tokenizer_encoders::{EncodeError, Encoder};

use crate::dataset::Sample;

/// Which OpenAI-compatible endpoint to call.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
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

    /// The name used on the command line and in the summary.
    pub fn as_str(self) -> &'static str {
        match self {
            EndpointType::Chat => "chat",
            EndpointType::Completions => "completions",
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
    /// Renders completions prompts (`Encoder::None`: the text as written).
    pub(crate) encoder: Arc<Encoder>,
    pub(crate) chat_template_kwargs: Map<String, Value>,
    /// Sampling fields the user gave, and only those.
    pub(crate) sampling: Map<String, Value>,
}

/// The first request's messages of a sample: its first user turn.
pub(crate) fn first_messages(sample: &Sample) -> Vec<Value> {
    vec![json!({"role": "user", "content": sample.prompt})]
}

/// The prompt string a completions request carries for `messages` (also what client-side token
/// counts measure for chat, when an encoder is given).
pub(crate) fn prompt(messages: &[Value], o: &RenderOptions) -> Result<String, EncodeError> {
    o.encoder.render(messages, &o.chat_template_kwargs, None)
}

/// The output length a body asks for: the sample's own `max_tokens`, else `--osl`.
pub(crate) fn requested_osl(max_tokens: Option<u32>, o: &RenderOptions) -> Option<u32> {
    max_tokens.or(o.osl)
}

/// Builds the JSON body for one request: chat requests carry the messages and the
/// `chat_template_kwargs` (the server renders); completions requests carry the prompt the
/// encoder rendered client-side.
pub(crate) fn body(
    messages: &[Value],
    max_tokens: Option<u32>,
    o: &RenderOptions,
) -> Result<Bytes, EncodeError> {
    let mut b = Map::new();
    b.insert("model".into(), Value::String(o.model.clone()));
    match o.endpoint {
        EndpointType::Chat => {
            b.insert("messages".into(), Value::Array(messages.to_vec()));
            if !o.chat_template_kwargs.is_empty() {
                b.insert(
                    "chat_template_kwargs".into(),
                    Value::Object(o.chat_template_kwargs.clone()),
                );
            }
        }
        EndpointType::Completions => {
            b.insert("prompt".into(), Value::String(prompt(messages, o)?));
        }
    }
    if let Some(n) = requested_osl(max_tokens, o) {
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
    for (k, v) in &o.sampling {
        b.insert(k.clone(), v.clone());
    }
    for (k, v) in &o.extra_inputs {
        b.insert(k.clone(), v.clone());
    }
    Ok(Bytes::from(Value::Object(b).to_string()))
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
            encoder: Arc::new(Encoder::None),
            chat_template_kwargs: Map::new(),
            sampling: Map::new(),
        }
    }

    fn sample(prompt: &str) -> Sample {
        Sample {
            id: "a".into(),
            prompt: prompt.into(),
            max_tokens: None,
            timestamp_ms: None,
            turns: Vec::new(),
            group: None,
        }
    }

    fn json_of(b: Bytes) -> Value {
        serde_json::from_slice(&b).unwrap()
    }

    #[test]
    fn chat_body_has_messages_kwargs_usage_and_max_completion_tokens() {
        let mut o = opts(EndpointType::Chat);
        o.chat_template_kwargs
            .insert("thinking".into(), json!(true));
        let v = json_of(body(&first_messages(&sample("hi \"there\"")), None, &o).unwrap());
        assert_eq!(v["messages"][0]["content"], "hi \"there\"");
        assert_eq!(v["chat_template_kwargs"]["thinking"], true);
        assert_eq!(v["max_completion_tokens"], 256);
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert!(v.get("ignore_eos").is_none() && v.get("temperature").is_none());
    }

    #[test]
    fn completions_body_renders_the_prompt_and_sends_only_given_sampling() {
        let mut o = opts(EndpointType::Completions);
        o.encoder = Arc::new(Encoder::Dsv4);
        o.chat_template_kwargs
            .insert("thinking".into(), json!(true));
        o.sampling.insert("temperature".into(), json!(1.0));
        o.extra_inputs.insert("stream".into(), json!(true));
        o.per_chunk_usage = true;
        let v = json_of(
            body(
                &first_messages(&sample("Hello! What can you do?")),
                Some(9),
                &o,
            )
            .unwrap(),
        );
        // The DeepSeek-V4 serving wrapper's output for this input (a shared vector).
        assert_eq!(
            v["prompt"],
            "<｜begin▁of▁sentence｜><｜User｜>Hello! What can you do?<｜Assistant｜><think>"
        );
        assert!(v.get("chat_template_kwargs").is_none());
        assert_eq!(v["max_tokens"], 9);
        assert_eq!(v["temperature"], 1.0);
        assert!(v.get("top_p").is_none() && v.get("repetition_penalty").is_none());
        assert_eq!(v["stream_options"]["continuous_usage_stats"], true);
        o.encoder = Arc::new(Encoder::None);
        let raw = json_of(body(&first_messages(&sample("x")), None, &o).unwrap());
        assert_eq!(raw["prompt"], "x");
    }
}
