//! Errors of the rendering path. One variant per input the reference renderers reject (the spec's
//! §9 table), so callers match on kinds, never on message text.

use std::path::PathBuf;

/// A prompt that cannot be rendered. Messages name the thing, the bad value and, where there is
/// one, the fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// `thinking_mode` is neither `chat` nor `thinking`.
    #[error("invalid thinking_mode `{0}` (expected `chat` or `thinking`)")]
    InvalidThinkingMode(String),
    /// DeepSeek-V4 accepts reasoning effort `max`, `high` or none.
    #[error("invalid reasoning effort for DeepSeek-V4: {0} (expected max, high or none)")]
    InvalidReasoningEffortV4(String),
    /// DeepSeek-V4.1 accepts an integer 1..=100 or `low`, `high`, `xhigh`, `max`.
    #[error(
        "invalid reasoning effort for DeepSeek-V4.1: {0} (expected an integer within [1, 100] \
         or low, high, xhigh, max)"
    )]
    InvalidReasoningEffortV41(String),
    /// The V4.1 serving wrapper's check of `chat_template_kwargs.reasoning_effort`.
    #[error(
        "DeepSeek V4.1 reasoning_effort must be low, high, xhigh, max, or an integer within \
         [1, 100] in chat_template_kwargs; got {0}"
    )]
    InvalidReasoningEffortKwarg(String),
    /// A `developer` message must have non-empty string content.
    #[error("invalid message for role `developer`: content must be a non-empty string")]
    EmptyDeveloper,
    /// A role the encoder does not render (after tool messages were merged into user turns).
    #[error("unknown role: {0}")]
    UnknownRole(String),
    /// A role the V4.1 serving wrapper does not accept (`system`, `developer`, `user`, `assistant`,
    /// `tool` only); a missing role reads as `None`.
    #[error("invalid role: {0} (expected system, developer, user, assistant or tool)")]
    InvalidRole(String),
    /// `task` is not one of the task tokens.
    #[error(
        "invalid task: '{0}' (valid tasks: action, query, authority, domain, title, read_url)"
    )]
    InvalidTask(String),
    /// `continue_final_message` needs an assistant message last.
    #[error("continue_final_message requires a final assistant message")]
    ContinueWithoutAssistant,
    /// A tool call's `arguments` decoded to JSON that is not an object (V4 renders each key as a
    /// parameter, so a number, list or double-encoded string has nothing to render).
    #[error("tool call arguments decode to a JSON {0}, not an object")]
    ArgumentsNotObject(&'static str),
    /// A user turn's text is not a string (null, or a list of parts the encoder level does not
    /// flatten; the serving wrapper flattens lists first).
    #[error("user message content must be a string, found {0}")]
    UserContentNotString(&'static str),
    /// A field the encoder prints verbatim has the wrong JSON type (e.g. `latest_reminder` content
    /// that is not a string, a tool call without a function name).
    #[error("message {index}: `{field}` must be {expected}")]
    Malformed {
        /// Position of the message in the list given.
        index: usize,
        /// The offending field, as a JSON path below the message.
        field: &'static str,
        /// What the field should hold.
        expected: &'static str,
    },
    /// A content part the V4.1 serving wrapper cannot flatten (only text and images).
    #[error("DeepSeek V4.1 supports text and image content only; got '{0}'")]
    UnsupportedContentPart(String),
    /// NaN or an infinity would have to be printed as JSON.
    #[error("non-finite number in JSON (NaN and infinities have no JSON form)")]
    NonFiniteNumber,
    /// A Hugging Face chat template failed to parse or render (including `raise_exception`).
    #[error("chat template: {0:#}")]
    Template(#[from] minijinja::Error),
}

/// A file this crate was asked to load (chat template, tokenizer, vector file) could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file was read but its contents are not what was expected.
    #[error("{}: {what}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the line where there is one.
        what: String,
    },
}
