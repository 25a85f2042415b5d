//! The serving wrappers (spec §8): how vLLM's `deepseek_v4` / `deepseek_v41` tokenizer modes turn
//! a chat request (messages, `chat_template_kwargs`, request-level `tools`) into encoder
//! arguments. Golden AL curves were rendered through this layer, so it is reproduced, not only
//! the encoder.

use serde_json::{Map, Value};

use super::{encode_messages, DeepSeekVersion, EncodeOptions, ReasoningEffort, ThinkingMode};
use crate::pyjson::{dumps, truthy};
use crate::EncodeError;

const IMAGE_V41: &str = "<｜deepseek_image｜>";

/// Renders a chat request as the server would: `chat_template_kwargs` supplies `thinking` /
/// `enable_thinking`, `reasoning_effort` and `drop_thinking` (other keys are ignored), `tools` are
/// the request-level tools. The input is not modified.
pub fn render_request(
    version: DeepSeekVersion,
    messages: &[Value],
    kwargs: &Map<String, Value>,
    tools: Option<&[Value]>,
) -> Result<String, EncodeError> {
    // Thinking is on unless a thinking switch is present and none of them is truthy.
    let mut thinking = if kwargs.contains_key("thinking") || kwargs.contains_key("enable_thinking")
    {
        kwargs.get("thinking").is_some_and(truthy)
            || kwargs.get("enable_thinking").is_some_and(truthy)
    } else {
        true
    };
    let high = || Some(ReasoningEffort::Named("high".to_owned()));
    let effort = match version {
        DeepSeekVersion::V4 => match kwargs.get("reasoning_effort") {
            Some(Value::String(s)) => match s.as_str() {
                "none" => {
                    thinking = false;
                    None
                }
                "max" => Some(ReasoningEffort::Named("max".to_owned())),
                // The wrapper maps these to `low`, which the pinned V4 encoder rejects.
                "low" | "minimal" | "medium" => Some(ReasoningEffort::Named("low".to_owned())),
                _ => high(),
            },
            _ if thinking => high(),
            _ => None,
        },
        DeepSeekVersion::V41 => match kwargs.get("reasoning_effort") {
            None | Some(Value::Null) => high(),
            Some(Value::String(s)) => match s.as_str() {
                "none" => {
                    thinking = false;
                    high()
                }
                "low" | "high" | "xhigh" | "max" => Some(ReasoningEffort::Named(s.clone())),
                _ => {
                    return Err(EncodeError::InvalidReasoningEffortKwarg(dumps(
                        &Value::String(s.clone()),
                    )?))
                }
            },
            // JSON integers only: `50.0` and `true` are refused like `"50"`.
            Some(Value::Number(n)) if n.as_i64().is_some_and(|n| (1..=100).contains(&n)) => {
                Some(ReasoningEffort::Level(n.as_i64().unwrap_or_default()))
            }
            Some(other) => return Err(EncodeError::InvalidReasoningEffortKwarg(dumps(other)?)),
        },
    };
    let drop_thinking = kwargs.get("drop_thinking").is_none_or(truthy);

    let mut msgs: Vec<Value> = match version {
        DeepSeekVersion::V4 => messages.to_vec(),
        DeepSeekVersion::V41 => messages
            .iter()
            .map(normalize_v41)
            .collect::<Result<_, _>>()?,
    };
    if let Some(tools) = tools.filter(|t| !t.is_empty()) {
        attach_tools(version, &mut msgs, tools);
    }

    let mut opts = EncodeOptions::new(if thinking {
        ThinkingMode::Thinking
    } else {
        ThinkingMode::Chat
    });
    opts.drop_thinking = drop_thinking;
    opts.reasoning_effort = effort;
    encode_messages(version, &msgs, &opts)
}

/// V4: onto message 0 when it is system/developer (replacing its tools), else a new system
/// message first. V4.1: onto the first system message anywhere, else a new empty system first.
fn attach_tools(version: DeepSeekVersion, msgs: &mut Vec<Value>, tools: &[Value]) {
    let tools = Value::Array(tools.to_vec());
    let role = |m: &Value| m.get("role").and_then(Value::as_str).map(str::to_owned);
    let target = match version {
        DeepSeekVersion::V4 => msgs
            .first()
            .filter(|m| matches!(role(m).as_deref(), Some("system" | "developer")))
            .map(|_| 0),
        DeepSeekVersion::V41 => msgs
            .iter()
            .position(|m| role(m).as_deref() == Some("system")),
    };
    match target.and_then(|i| msgs[i].as_object_mut()) {
        Some(m) => {
            m.insert("tools".to_owned(), tools);
        }
        None => {
            let mut m = Map::new();
            m.insert("role".to_owned(), Value::String("system".to_owned()));
            if version == DeepSeekVersion::V41 {
                m.insert("content".to_owned(), Value::String(String::new()));
            }
            m.insert("tools".to_owned(), tools);
            msgs.insert(0, Value::Object(m));
        }
    }
}

/// V4.1 message normalisation: known roles only, `reasoning` wins over `reasoning_content`, list
/// content flattened to text with image placeholders.
fn normalize_v41(m: &Value) -> Result<Value, EncodeError> {
    let role = m.get("role");
    match role.and_then(Value::as_str) {
        Some("system" | "developer" | "user" | "assistant" | "tool") => {}
        Some(other) => return Err(EncodeError::InvalidRole(other.to_owned())),
        None => {
            let shown = match role {
                None | Some(Value::Null) => "None".to_owned(),
                Some(v) => dumps(v)?,
            };
            return Err(EncodeError::InvalidRole(shown));
        }
    }
    let mut out = m.as_object().cloned().unwrap_or_default();
    if let Some(r) = out.get("reasoning").cloned() {
        out.insert("reasoning_content".to_owned(), r);
    }
    if let Some(Value::Array(parts)) = out.get("content") {
        let mut pieces = Vec::with_capacity(parts.len());
        for p in parts {
            match p.get("type").and_then(Value::as_str) {
                Some("text") => pieces.push(
                    p.get("text")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                ),
                Some("image_url" | "input_image" | "image_pil") => {
                    pieces.push(IMAGE_V41.to_owned())
                }
                Some(other) => return Err(EncodeError::UnsupportedContentPart(other.to_owned())),
                None => return Err(EncodeError::UnsupportedContentPart("None".to_owned())),
            }
        }
        out.insert("content".to_owned(), Value::String(pieces.join("\n\n")));
    }
    Ok(Value::Object(out))
}
