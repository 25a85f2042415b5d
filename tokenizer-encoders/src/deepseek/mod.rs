//! DeepSeek-V4 and V4.1 prompt encoders: the ports behind `Encoder::Dsv4` / `Encoder::Dsv41`.
//!
//! DeepSeek ships no Jinja template for these models; servers render prompts with Python encoders
//! (`encoding_dsv4.py`, vLLM's `deepseek_v41_encoding.py`) behind a serving wrapper that maps
//! `chat_template_kwargs` onto encoder options. Both levels are reproduced byte for byte from the
//! spec (`shared/spec/encoders.md`) and checked against the shared vectors:
//!
//! - [`encode_messages`]: the encoder (messages + thinking mode + options -> prompt);
//! - [`render_request`]: the serving wrapper (messages + `chat_template_kwargs` + request-level
//!   tools -> prompt), which is what a golden AL was measured with.

mod encode;
mod wrapper;

use std::str::FromStr;

use serde_json::Value;

pub use encode::encode_messages;
pub use wrapper::render_request;

use crate::EncodeError;

/// Which DeepSeek encoder generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeepSeekVersion {
    /// DeepSeek-V4 (V4-Pro, V4-Flash): the reference `encoding_dsv4.py`.
    V4,
    /// DeepSeek-V4.1: `<｜System｜>` token, numeric reasoning effort, `<｜DSML｜ calls>` blocks.
    V41,
}

/// Whether the assistant turn opens with `<think>` (thinking) or closes it at once (chat).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ThinkingMode {
    /// No reasoning: every assistant header ends in `</think>`.
    Chat,
    /// Reasoning: the generation header ends in `<think>`.
    Thinking,
}

impl FromStr for ThinkingMode {
    type Err = EncodeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "chat" => Ok(ThinkingMode::Chat),
            "thinking" => Ok(ThinkingMode::Thinking),
            other => Err(EncodeError::InvalidThinkingMode(other.to_owned())),
        }
    }
}

/// A reasoning effort as given to the encoder. Kept unvalidated until a message is rendered,
/// because that is when the reference checks it (an empty conversation renders with any effort).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ReasoningEffort {
    /// A named level: V4 takes `max`/`high`; V4.1 takes `low`, `high`, `xhigh`, `max`.
    Named(String),
    /// A numeric level (V4.1 only): 1..=100.
    Level(i64),
}

impl std::fmt::Display for ReasoningEffort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReasoningEffort::Named(s) => f.write_str(s),
            ReasoningEffort::Level(n) => write!(f, "{n}"),
        }
    }
}

/// Encoder options, named as the reference's keyword arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct EncodeOptions {
    /// Chat or thinking.
    pub thinking_mode: ThinkingMode,
    /// Drop reasoning of turns before the last user turn (default true; forced off when any
    /// message carries tools).
    pub drop_thinking: bool,
    /// Start with `<｜begin▁of▁sentence｜>` (default true; never when `context` is non-empty).
    pub add_default_bos_token: bool,
    /// Reasoning effort (default none; V4.1 treats none as `high`).
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Messages already encoded before `messages`: they shape the rendering but are not printed.
    pub context: Vec<Value>,
    /// V4.1: end with the assistant header when the last message asks for it (default true).
    pub add_generation_prompt: bool,
    /// V4.1: leave the final assistant message open (default false).
    pub continue_final_message: bool,
}

impl EncodeOptions {
    /// The reference defaults for `thinking_mode`.
    pub fn new(thinking_mode: ThinkingMode) -> Self {
        EncodeOptions {
            thinking_mode,
            drop_thinking: true,
            add_default_bos_token: true,
            reasoning_effort: None,
            context: Vec::new(),
            add_generation_prompt: true,
            continue_final_message: false,
        }
    }
}
