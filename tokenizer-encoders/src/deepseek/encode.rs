//! The encoder proper (spec §3-§7): merge tool results into user turns, order them, drop old
//! reasoning, then render each message and the header that follows it.
//!
//! One file on purpose, although past 600 lines: it follows the reference encoder step by step, in
//! its order, so that the two can be read side by side when a vector fails; the steps share the
//! token constants and message helpers above and change together when the reference does.

use serde_json::{Map, Value};

use super::{DeepSeekVersion, EncodeOptions, ReasoningEffort, ThinkingMode};
use crate::pyjson::{dumps, py_str, truthy, type_name};
use crate::EncodeError;

const BOS: &str = "<｜begin▁of▁sentence｜>";
const EOS: &str = "<｜end▁of▁sentence｜>";
const USER: &str = "<｜User｜>";
const ASSISTANT: &str = "<｜Assistant｜>";
const SYSTEM_V41: &str = "<｜System｜>";
const LATEST_REMINDER: &str = "<｜latest_reminder｜>";
const THINK_START: &str = "<think>";
const THINK_END: &str = "</think>";
const TASKS: [&str; 6] = [
    "action",
    "query",
    "authority",
    "domain",
    "title",
    "read_url",
];

const MAX_EFFORT_V4: &str = "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n\
You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve \
the root cause, rigorously stress-testing your logic against all potential paths, edge cases, and \
adversarial scenarios.\n\
Explicitly write out your entire deliberation process, documenting every intermediate step, \
considered alternative, and rejected hypothesis to ensure absolutely no assumption is left \
unchecked.\n\n";

/// The tools block; `{calls}`, `{invoke}` and `{parameter}` are the version's DSML tag names.
const TOOLS_TEMPLATE: &str = "## Tools\n\n\
You have access to a set of tools to help answer the user's question. You can invoke tools by \
writing a \"<｜DSML｜{calls}>\" block like the following:\n\n\
<｜DSML｜{calls}>\n\
<｜DSML｜{invoke} name=\"$TOOL_NAME\">\n\
<｜DSML｜{parameter} name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜{parameter}>\n\
...\n\
</｜DSML｜{invoke}>\n\
<｜DSML｜{invoke} name=\"$TOOL_NAME2\">\n\
...\n\
</｜DSML｜{invoke}>\n\
</｜DSML｜{calls}>\n\n\
String parameters should be specified as is and set `string=\"true\"`. For all other types \
(numbers, booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n\
If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning \
inside <think>...</think> BEFORE any tool calls or final response.\n\n\
Otherwise, output directly after </think> with tool calls or final response.\n\n\
### Available Tool Schemas\n\n\
{tool_schemas}\n\n\
You MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";

const RESPONSE_FORMAT: &str =
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

/// DSML tag names per version: V4.1 puts a space after the marker and calls the block `calls`.
struct Dsml {
    calls: &'static str,
    invoke: &'static str,
    parameter: &'static str,
}

impl DeepSeekVersion {
    fn dsml(self) -> Dsml {
        match self {
            DeepSeekVersion::V4 => Dsml {
                calls: "tool_calls",
                invoke: "invoke",
                parameter: "parameter",
            },
            DeepSeekVersion::V41 => Dsml {
                calls: " calls",
                invoke: " invoke",
                parameter: " parameter",
            },
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role<'a> {
    System,
    Developer,
    User,
    Assistant,
    LatestReminder,
    Other(&'a str),
}

impl<'a> Role<'a> {
    fn of(m: &'a Map<String, Value>) -> Self {
        match m.get("role").and_then(Value::as_str) {
            Some("system") => Role::System,
            Some("developer") => Role::Developer,
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            Some("latest_reminder") => Role::LatestReminder,
            Some(other) => Role::Other(other),
            None => Role::Other("None"),
        }
    }
}

/// One piece of a merged user turn.
#[derive(Clone, Debug)]
enum Block<'a> {
    /// User text (`None` = the key is missing, which the reference reads as empty through
    /// `get("content", "")`; a present null or any non-string is refused when rendered).
    Text(Option<&'a Value>),
    /// A tool message's result.
    ToolResult {
        id: Option<&'a Value>,
        content: Option<&'a Value>,
    },
    /// A content block of another type, rendered as `[Unsupported <type>]`.
    Unsupported(String),
}

/// A message after the merge step, borrowing the caller's JSON.
#[derive(Clone, Debug)]
struct Msg<'a> {
    /// Position in the caller's list (context first), for error messages.
    index: usize,
    role: Role<'a>,
    src: Option<&'a Map<String, Value>>,
    /// V4 keeps only `task`, `wo_eos` and `mask` of a merged user message; V4.1 keeps all.
    user_fields_only: bool,
    blocks: Vec<Block<'a>>,
    from_context: bool,
}

impl<'a> Msg<'a> {
    fn get(&self, key: &str) -> Option<&'a Value> {
        if self.user_fields_only && !matches!(key, "task" | "wo_eos" | "mask") {
            return None;
        }
        self.src.and_then(|m| m.get(key))
    }

    fn flag(&self, key: &str) -> bool {
        self.get(key).is_some_and(truthy)
    }

    /// A field printed verbatim: missing or null reads as empty, anything but a string is refused.
    fn text(&self, key: &'static str) -> Result<&'a str, EncodeError> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(""),
            Some(Value::String(s)) => Ok(s),
            Some(_) => Err(EncodeError::Malformed {
                index: self.index,
                field: key,
                expected: "a string or null",
            }),
        }
    }
}

/// Encodes `messages` (OpenAI-shaped JSON objects plus DeepSeek's extra fields) into a prompt.
///
/// This is the reference encoder's `encode_messages(messages, thinking_mode, ...)`; use
/// [`render_request`](super::render_request) for what a server renders from a chat request.
pub fn encode_messages(
    version: DeepSeekVersion,
    messages: &[Value],
    opts: &EncodeOptions,
) -> Result<String, EncodeError> {
    let thinking = opts.thinking_mode == ThinkingMode::Thinking;
    let v41 = version == DeepSeekVersion::V41;

    // Context and messages merge separately so that only `messages` is printed.
    let mut full = merge(version, &opts.context, 0, true)?;
    full.extend(merge(version, messages, opts.context.len(), false)?);
    sort_tool_results(&mut full);

    let drop_thinking = opts.drop_thinking && !full.iter().any(|m| m.flag("tools"));
    if thinking && drop_thinking {
        let last_user = last_user_index(version, &full);
        full = full
            .into_iter()
            .enumerate()
            .filter(|(i, m)| {
                matches!(m.role, Role::User | Role::System | Role::LatestReminder)
                    || matches!(m.role, Role::Other("tool" | "direct_search_results"))
                    || matches!(m.role, Role::Assistant)
                    || *i as isize >= last_user
            })
            .map(|(_, m)| m)
            .collect();
    }

    let add_generation_prompt = opts.add_generation_prompt && !opts.continue_final_message;
    if v41 && opts.continue_final_message {
        let last = full.iter().rev().find(|m| !m.from_context);
        if !last.is_some_and(|m| m.role == Role::Assistant) {
            return Err(EncodeError::ContinueWithoutAssistant);
        }
    }

    let r = Renderer {
        version,
        thinking,
        drop_thinking,
        effort: &opts.reasoning_effort,
        last_user: last_user_index(version, &full),
        add_generation_prompt: !v41 || add_generation_prompt,
        continue_final_message: v41 && opts.continue_final_message,
        msgs: &full,
    };
    let mut prompt = String::new();
    if opts.add_default_bos_token && opts.context.is_empty() {
        prompt.push_str(BOS);
    }
    for (i, m) in full.iter().enumerate() {
        if !m.from_context {
            r.render(i, &mut prompt)?;
        }
    }
    Ok(prompt)
}

/// Step 1: tool messages become `tool_result` blocks of a user turn; consecutive user turns join.
fn merge<'a>(
    version: DeepSeekVersion,
    messages: &'a [Value],
    offset: usize,
    from_context: bool,
) -> Result<Vec<Msg<'a>>, EncodeError> {
    let mut out: Vec<Msg<'a>> = Vec::with_capacity(messages.len());
    for (i, v) in messages.iter().enumerate() {
        let index = offset + i;
        let m = v.as_object().ok_or(EncodeError::Malformed {
            index,
            field: "(message)",
            expected: "a JSON object",
        })?;
        match m.get("role").and_then(Value::as_str) {
            Some("tool") => {
                let block = Block::ToolResult {
                    id: m.get("tool_call_id"),
                    content: m.get("content"),
                };
                match out.last_mut() {
                    Some(last) if last.role == Role::User => last.blocks.push(block),
                    _ => out.push(Msg {
                        index,
                        role: Role::User,
                        src: None,
                        user_fields_only: false,
                        blocks: vec![block],
                        from_context,
                    }),
                }
            }
            Some("user") => {
                let blocks = user_blocks(version, m);
                match out.last_mut() {
                    Some(last) if last.role == Role::User && !last.flag("task") => {
                        last.blocks.extend(blocks)
                    }
                    _ => out.push(Msg {
                        index,
                        role: Role::User,
                        src: Some(m),
                        user_fields_only: version == DeepSeekVersion::V4,
                        blocks,
                        from_context,
                    }),
                }
            }
            _ => out.push(Msg {
                index,
                role: Role::of(m),
                src: Some(m),
                user_fields_only: false,
                blocks: Vec::new(),
                from_context,
            }),
        }
    }
    Ok(out)
}

/// A user message's blocks: its text, or (V4.1) its own non-empty `content_blocks`.
fn user_blocks(version: DeepSeekVersion, m: &Map<String, Value>) -> Vec<Block<'_>> {
    if version == DeepSeekVersion::V41 {
        if let Some(Value::Array(blocks)) = m.get("content_blocks") {
            if !blocks.is_empty() {
                return blocks.iter().map(content_block).collect();
            }
        }
    }
    vec![Block::Text(m.get("content"))]
}

fn content_block(b: &Value) -> Block<'_> {
    match b.get("type").and_then(Value::as_str) {
        Some("text") => Block::Text(b.get("text")),
        Some("tool_result") => Block::ToolResult {
            id: b.get("tool_use_id"),
            content: b.get("content"),
        },
        Some(other) => Block::Unsupported(other.to_owned()),
        None => Block::Unsupported(
            b.get("type")
                .map_or_else(|| "None".to_owned(), |t| py_str(t).unwrap_or_default()),
        ),
    }
}

/// Step 2: inside a user turn, tool results follow the order of the calls of the assistant
/// before it (stable; unknown ids sort first), so parallel calls answered out of order render
/// in call order. Text blocks keep their slots.
fn sort_tool_results(msgs: &mut [Msg<'_>]) {
    for k in 0..msgs.len() {
        if msgs[k].role != Role::User {
            continue;
        }
        let slots: Vec<usize> = (msgs[k].blocks.iter().enumerate())
            .filter(|(_, b)| matches!(b, Block::ToolResult { .. }))
            .map(|(i, _)| i)
            .collect();
        if slots.len() < 2 {
            continue;
        }
        let call_ids: Vec<&Value> = msgs[..k]
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .and_then(|a| a.get("tool_calls"))
            .and_then(Value::as_array)
            .map(|calls| calls.iter().filter_map(|c| c.get("id")).collect())
            .unwrap_or_default();
        let rank = |b: &Block<'_>| match b {
            Block::ToolResult { id: Some(id), .. } => {
                call_ids.iter().position(|c| *c == *id).unwrap_or(0)
            }
            _ => 0,
        };
        let mut results: Vec<Block<'_>> =
            slots.iter().map(|&i| msgs[k].blocks[i].clone()).collect();
        results.sort_by_key(|b| rank(b));
        for (slot, b) in slots.into_iter().zip(results) {
            msgs[k].blocks[slot] = b;
        }
    }
}

/// The last user-like turn (V4: user, developer; V4.1 also a system message after the first),
/// or -1.
fn last_user_index(version: DeepSeekVersion, msgs: &[Msg<'_>]) -> isize {
    msgs.iter()
        .enumerate()
        .rev()
        .find(|(i, m)| match m.role {
            Role::User | Role::Developer => true,
            Role::System => version == DeepSeekVersion::V41 && *i > 0,
            _ => false,
        })
        .map_or(-1, |(i, _)| i as isize)
}

struct Renderer<'r, 'a> {
    version: DeepSeekVersion,
    thinking: bool,
    drop_thinking: bool,
    effort: &'r Option<ReasoningEffort>,
    last_user: isize,
    add_generation_prompt: bool,
    continue_final_message: bool,
    msgs: &'r [Msg<'a>],
}

impl Renderer<'_, '_> {
    fn render(&self, i: usize, out: &mut String) -> Result<(), EncodeError> {
        let m = &self.msgs[i];
        let v41 = self.version == DeepSeekVersion::V41;
        let effort_text = self.effort_text()?;
        if i == 0 {
            if v41 && (!effort_text.is_empty() || m.role == Role::System) {
                out.push_str(SYSTEM_V41);
            }
            out.push_str(&effort_text);
        }
        match m.role {
            Role::System => {
                if v41 && i > 0 {
                    out.push_str(SYSTEM_V41);
                }
                out.push_str(m.text("content")?);
                self.tools_and_format(m, out)?;
            }
            Role::Developer => {
                let content = m.text("content")?;
                if content.is_empty() {
                    return Err(EncodeError::EmptyDeveloper);
                }
                out.push_str(USER);
                out.push_str(content);
                self.tools_and_format(m, out)?;
            }
            Role::User => {
                out.push_str(USER);
                self.user_blocks(m, out)?;
            }
            Role::LatestReminder => {
                let content = match m.get("content") {
                    Some(Value::String(s)) => s,
                    _ => {
                        return Err(EncodeError::Malformed {
                            index: m.index,
                            field: "content",
                            expected: "a string (latest_reminder)",
                        })
                    }
                };
                out.push_str(LATEST_REMINDER);
                out.push_str(content);
            }
            Role::Assistant => self.assistant(i, out)?,
            Role::Other(r) => return Err(EncodeError::UnknownRole(r.to_owned())),
        }
        self.transition(i, out)
    }

    /// The effort prefix of message 0 in thinking mode; validated for every rendered message,
    /// as the reference does, so a bad effort fails even in chat mode.
    fn effort_text(&self) -> Result<String, EncodeError> {
        match self.version {
            DeepSeekVersion::V4 => match self.effort {
                None => Ok(String::new()),
                Some(ReasoningEffort::Named(s)) if s == "high" => Ok(String::new()),
                Some(ReasoningEffort::Named(s)) if s == "max" => Ok(if self.thinking {
                    MAX_EFFORT_V4.to_owned()
                } else {
                    String::new()
                }),
                Some(other) => Err(EncodeError::InvalidReasoningEffortV4(other.to_string())),
            },
            DeepSeekVersion::V41 => {
                let level = match self.effort {
                    None => 50,
                    Some(ReasoningEffort::Named(s)) => match s.as_str() {
                        "low" => 25,
                        "high" => 50,
                        "xhigh" => 75,
                        "max" => 100,
                        _ => return Err(EncodeError::InvalidReasoningEffortV41(s.clone())),
                    },
                    Some(ReasoningEffort::Level(n)) if (1..=100).contains(n) => *n,
                    Some(other) => {
                        return Err(EncodeError::InvalidReasoningEffortV41(other.to_string()))
                    }
                };
                Ok(if self.thinking {
                    format!(
                        "Reasoning Effort: {level} (range 1-100, the higher the value, the more \
                         thorough the reasoning)\n\n"
                    )
                } else {
                    String::new()
                })
            }
        }
    }

    fn tools_and_format(&self, m: &Msg<'_>, out: &mut String) -> Result<(), EncodeError> {
        if let Some(tools) = m.get("tools").filter(|t| truthy(t)) {
            out.push_str("\n\n");
            out.push_str(&self.tools_block(m, tools)?);
        }
        if let Some(rf) = m.get("response_format").filter(|t| truthy(t)) {
            out.push_str("\n\n");
            out.push_str(RESPONSE_FORMAT);
            out.push_str(&dumps(rf)?);
        }
        Ok(())
    }

    fn tools_block(&self, m: &Msg<'_>, tools: &Value) -> Result<String, EncodeError> {
        let bad = EncodeError::Malformed {
            index: m.index,
            field: "tools",
            expected: "a list of {\"type\": \"function\", \"function\": {...}} objects",
        };
        let tools = tools.as_array().ok_or(bad)?;
        let mut schemas = Vec::with_capacity(tools.len());
        for t in tools {
            let f = t.get("function").ok_or(EncodeError::Malformed {
                index: m.index,
                field: "tools[].function",
                expected: "present in every tool",
            })?;
            schemas.push(dumps(f)?);
        }
        let d = self.version.dsml();
        Ok(TOOLS_TEMPLATE
            .replace("{calls}", d.calls)
            .replace("{invoke}", d.invoke)
            .replace("{parameter}", d.parameter)
            .replace("{tool_schemas}", &schemas.join("\n")))
    }

    fn user_blocks(&self, m: &Msg<'_>, out: &mut String) -> Result<(), EncodeError> {
        for (n, b) in m.blocks.iter().enumerate() {
            if n > 0 {
                out.push_str("\n\n");
            }
            match b {
                Block::Text(Some(Value::String(s))) => out.push_str(s),
                Block::Text(None) => {}
                Block::Text(Some(other)) => {
                    return Err(EncodeError::UserContentNotString(type_name(other)))
                }
                Block::ToolResult { content, .. } => {
                    out.push_str("<tool_result>");
                    match content {
                        None => {}
                        Some(Value::Array(parts)) => {
                            for (k, p) in parts.iter().enumerate() {
                                if k > 0 {
                                    out.push_str("\n\n");
                                }
                                match p.get("type").and_then(Value::as_str) {
                                    // `b.get("text", "")`: missing is empty, null is refused
                                    // (the reference's join fails on it).
                                    Some("text") => match p.get("text") {
                                        None => {}
                                        Some(Value::String(t)) => out.push_str(t),
                                        Some(other) => {
                                            return Err(EncodeError::UserContentNotString(
                                                type_name(other),
                                            ))
                                        }
                                    },
                                    t => {
                                        out.push_str("[Unsupported ");
                                        out.push_str(t.unwrap_or("None"));
                                        out.push(']');
                                    }
                                }
                            }
                        }
                        Some(v) => out.push_str(&py_str(v)?),
                    }
                    out.push_str("</tool_result>");
                }
                Block::Unsupported(t) => {
                    out.push_str("[Unsupported ");
                    out.push_str(t);
                    out.push(']');
                }
            }
        }
        Ok(())
    }

    fn assistant(&self, i: usize, out: &mut String) -> Result<(), EncodeError> {
        let m = &self.msgs[i];
        let prev_task = i > 0 && self.msgs[i - 1].flag("task");
        let show_thinking =
            self.thinking && !prev_task && (!self.drop_thinking || i as isize > self.last_user);
        let reasoning = m.text("reasoning_content")?;
        let content = m.text("content")?;
        let calls = self.tool_calls(m)?;
        let continuing = self.continue_final_message && i + 1 == self.msgs.len();
        if show_thinking {
            out.push_str(reasoning);
            // Continuing a turn that has only reasoning so far leaves the think block open.
            if !(continuing && content.is_empty() && calls.is_empty()) {
                out.push_str(THINK_END);
            }
        }
        out.push_str(content);
        out.push_str(&calls);
        if !m.flag("wo_eos") && !continuing {
            out.push_str(EOS);
        }
        Ok(())
    }

    fn tool_calls(&self, m: &Msg<'_>) -> Result<String, EncodeError> {
        let calls = match m.get("tool_calls") {
            None | Some(Value::Null) => return Ok(String::new()),
            Some(Value::Array(calls)) if calls.is_empty() => return Ok(String::new()),
            Some(Value::Array(calls)) => calls,
            Some(_) => {
                return Err(EncodeError::Malformed {
                    index: m.index,
                    field: "tool_calls",
                    expected: "a list",
                })
            }
        };
        let d = self.version.dsml();
        let mut invokes = Vec::with_capacity(calls.len());
        for call in calls {
            let function = call.get("function");
            // `tool_call["function"]["name"]`: a missing name fails, a present one is printed
            // through `str.format` (null as `None`).
            let name = function
                .and_then(|f| f.get("name"))
                .ok_or(EncodeError::Malformed {
                    index: m.index,
                    field: "tool_calls[].function.name",
                    expected: "present",
                })
                .and_then(py_str)?;
            let arguments =
                function
                    .and_then(|f| f.get("arguments"))
                    .ok_or(EncodeError::Malformed {
                        index: m.index,
                        field: "tool_calls[].function.arguments",
                        expected: "present",
                    })?;
            let mut params = Vec::new();
            for (key, value) in self.parameters(arguments)? {
                let (flag, text) = match &value {
                    Value::String(s) => ("true", s.clone()),
                    other => ("false", dumps(other)?),
                };
                params.push(format!(
                    "<｜DSML｜{p} name=\"{key}\" string=\"{flag}\">{text}</｜DSML｜{p}>",
                    p = d.parameter
                ));
            }
            invokes.push(format!(
                "<｜DSML｜{i} name=\"{name}\">\n{}\n</｜DSML｜{i}>",
                params.join("\n"),
                i = d.invoke
            ));
        }
        Ok(format!(
            "\n\n<｜DSML｜{c}>\n{}\n</｜DSML｜{c}>",
            invokes.join("\n"),
            c = d.calls
        ))
    }

    /// A call's parameters. V4 JSON-decodes the `arguments` string once (an undecodable value
    /// becomes one parameter `arguments`; decoded JSON other than an object is an error). V4.1 also takes an object,
    /// decodes a string up to twice, and falls back to one parameter `arguments` holding the
    /// original value.
    fn parameters(&self, arguments: &Value) -> Result<Vec<(String, Value)>, EncodeError> {
        let entries = |map: Map<String, Value>| map.into_iter().collect::<Vec<_>>();
        let fallback = || vec![("arguments".to_owned(), arguments.clone())];
        match self.version {
            DeepSeekVersion::V4 => {
                // Anything that does not decode (a non-string included) is passed through whole.
                let Some(raw) = arguments.as_str() else {
                    return Ok(fallback());
                };
                match serde_json::from_str::<Value>(raw) {
                    Err(_) => Ok(fallback()),
                    Ok(Value::Object(map)) => Ok(entries(map)),
                    Ok(other) => Err(EncodeError::ArgumentsNotObject(type_name(&other))),
                }
            }
            DeepSeekVersion::V41 => {
                let mut v = arguments.clone();
                for _ in 0..2 {
                    match v {
                        Value::String(s) => match serde_json::from_str::<Value>(&s) {
                            Ok(decoded) => v = decoded,
                            Err(_) => return Ok(fallback()),
                        },
                        _ => break,
                    }
                }
                match v {
                    Value::Object(map) => Ok(entries(map)),
                    _ => Ok(fallback()),
                }
            }
        }
    }

    /// What follows message `i`: nothing before a non-assistant turn, a task token, or the
    /// assistant header with the think token.
    fn transition(&self, i: usize, out: &mut String) -> Result<(), EncodeError> {
        let m = &self.msgs[i];
        let next = self.msgs.get(i + 1);
        if let Some(n) = next {
            if !matches!(n.role, Role::Assistant | Role::LatestReminder) {
                return Ok(());
            }
        } else if !self.add_generation_prompt {
            return Ok(());
        }
        let v41 = self.version == DeepSeekVersion::V41;
        if let Some(task) = m.get("task").filter(|t| truthy(t)) {
            let task = task
                .as_str()
                .filter(|t| TASKS.contains(t))
                .ok_or_else(|| EncodeError::InvalidTask(py_str(task).unwrap_or_default()))?;
            if task == "action" {
                out.push_str(ASSISTANT);
                out.push_str(if self.thinking {
                    THINK_START
                } else {
                    THINK_END
                });
                out.push_str("<｜action｜>");
            } else {
                out.push_str("<｜");
                out.push_str(task);
                out.push_str("｜>");
            }
            return Ok(());
        }
        let header = match m.role {
            Role::User | Role::Developer => true,
            // V4.1: a later system turn acts as a user turn; a trailing system or assistant turn
            // still gets the generation header.
            Role::System => v41 && (i > 0 || next.is_none()),
            Role::Assistant => v41 && next.is_none(),
            _ => false,
        };
        if header {
            out.push_str(ASSISTANT);
            let open = self.thinking && (!self.drop_thinking || i as isize >= self.last_user);
            out.push_str(if open { THINK_START } else { THINK_END });
        }
        Ok(())
    }
}
