//! Prompt synthesis for AgentX turns (spec §2.6–§2.7): deterministic block content per
//! (seed, trace, hash id), the segment algorithm with pre-canned assistant turns, and the
//! per-tree cache-bust marker. (API fixed for the replay; the body is being written.)

use std::sync::Arc;

use tokenizer_encoders::Tokenizer;

use super::Trace;

/// A chat role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The declared tools + system prefix of turn 0.
    System,
    /// User (or tool-result) input.
    User,
    /// A pre-canned assistant reply.
    Assistant,
}

impl Role {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One chat message.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// Its role.
    pub role: Role,
    /// Its text.
    pub content: String,
}

/// Which conversation of a trace: the root, or `Trace::children[i]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConvRef {
    /// The root conversation.
    Root,
    /// A child conversation (index into `Trace::children`).
    Child(usize),
}

/// Why a prompt could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    /// The tokenizer failed.
    #[error("AgentX prompts: the tokenizer failed: {0}")]
    Tokenizer(#[from] tokenizer_encoders::TokenizeError),
}

/// Cuts prompt text for every trace; shared by every lane.
pub struct PromptSynth {
    _tokenizer: Arc<Tokenizer>,
    _seed: u64,
}

impl PromptSynth {
    /// Tokenizes the bundled corpus once with `tokenizer`; `seed` is `--random-seed`.
    pub fn new(tokenizer: Arc<Tokenizer>, seed: u64) -> Result<PromptSynth, PromptError> {
        Ok(PromptSynth {
            _tokenizer: tokenizer,
            _seed: seed,
        })
    }

    /// The prompts of one conversation, turn by turn.
    pub fn stream(self: &Arc<Self>, trace: Arc<Trace>, conv: ConvRef) -> StreamPrompts {
        StreamPrompts {
            _synth: self.clone(),
            _trace: trace,
            _conv: conv,
        }
    }
}

/// The segment state of one conversation, advanced turn by turn.
pub struct StreamPrompts {
    _synth: Arc<PromptSynth>,
    _trace: Arc<Trace>,
    _conv: ConvRef,
}

/// The wire messages of one turn.
#[derive(Clone, Debug, PartialEq)]
pub struct TurnPrompt {
    /// Every message sent for this turn (history included), in order.
    pub messages: Vec<Message>,
    /// Tokens of the message contents (equals the turn's `in`).
    pub content_tokens: u64,
    /// The history was rewritten (a pull-back or a stripped tail), not only appended to.
    pub reset_context: bool,
}

impl StreamPrompts {
    /// The full `messages` for turn `k`. Turns must be asked in increasing order; turns skipped
    /// are advanced through (a t* snapshot starts mid-conversation).
    pub fn turn(&mut self, _k: usize) -> Result<TurnPrompt, PromptError> {
        todo!("prompt synthesis")
    }
}

/// The per-tree cache-bust marker: `"[rid:" + sha256("{benchmark_id}:{pass}:{lane}:{base}")[:12] + "]\n\n"`.
pub fn cache_bust_marker(
    _benchmark_id: &str,
    _pass: u64,
    _lane: usize,
    _base_trace_id: &str,
) -> String {
    todo!("marker")
}

/// Prepends `marker` to the first user message, once (idempotent).
pub fn apply_marker(_messages: &mut [Message], _marker: &str) {
    todo!("marker")
}
