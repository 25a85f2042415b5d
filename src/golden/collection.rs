//! The `collection` block (§4): how the golden prompts were collected, which the AL gate replays
//! exactly; in a curve file or in a separate collection metadata file.

use std::path::Path;

use serde::Deserialize;

use super::{GoldenError, ThinkingMode};
use crate::yaml::{self, Doc, Node};

/// How the golden prompts were collected (§4): the gate replays exactly this.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Collection {
    /// Dataset, e.g. `speed_bench`.
    pub(crate) dataset: String,
    /// Dataset config, e.g. `qualitative`.
    #[serde(default)]
    pub(crate) config: Option<String>,
    /// Category, e.g. `coding`.
    pub(crate) category: String,
    /// Prompts in the category, e.g. 80.
    pub num_prompts: u32,
    /// Which turns of each row were sent.
    #[serde(default)]
    pub(crate) turns: Turns,
    /// Endpoint posted to.
    pub(crate) endpoint: CollectionEndpoint,
    /// Who rendered the prompt.
    pub(crate) renderer: Renderer,
    /// `max_tokens`.
    pub output_len: u32,
    /// Sampling parameters; only the keys present are sent.
    #[serde(default)]
    pub(crate) sampling: Sampling,
    /// `chat_template_kwargs` per thinking mode.
    #[serde(default)]
    pub(crate) chat_template_kwargs: ModeKwargs,
    /// Concurrency used when collecting.
    #[serde(default)]
    pub(crate) concurrency: Option<u32>,
    /// Shuffle seed.
    #[serde(default)]
    pub(crate) seed: Option<u64>,
    /// Free-form provenance.
    #[serde(default)]
    pub(crate) source: Option<serde_json::Value>,
}

/// Which turns of a multi-turn row were sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Turns {
    /// `messages[0]` only.
    #[default]
    First,
    /// Every user turn.
    All,
}

/// Endpoint of the collection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CollectionEndpoint {
    /// `/v1/completions` with a client-rendered prompt.
    Completions,
    /// `/v1/chat/completions`.
    Chat,
}

/// Prompt renderer of the collection.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub(crate) enum Renderer {
    /// The DeepSeek-V4 encoder.
    DeepseekV4,
    /// The DeepSeek-V4.1 encoder.
    DeepseekV41,
    /// The server's chat template.
    ServerTemplate,
    /// A chat template file, `template:<file>`.
    Template(String),
}

/// A `renderer` value that names no renderer.
#[derive(Debug, thiserror::Error)]
#[error("renderer {0:?} is not deepseek_v4, deepseek_v41, server_template or template:<file>")]
pub(crate) struct UnknownRenderer(String);

impl TryFrom<String> for Renderer {
    type Error = UnknownRenderer;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        Ok(match s.as_str() {
            "deepseek_v4" => Renderer::DeepseekV4,
            "deepseek_v41" => Renderer::DeepseekV41,
            "server_template" => Renderer::ServerTemplate,
            _ => match s.strip_prefix("template:") {
                Some(f) if !f.is_empty() => Renderer::Template(f.to_owned()),
                _ => return Err(UnknownRenderer(s)),
            },
        })
    }
}

/// Sampling parameters of the collection.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Sampling {
    /// `temperature`.
    pub(crate) temperature: Option<f64>,
    /// `top_p`.
    pub(crate) top_p: Option<f64>,
    /// `top_k`.
    pub(crate) top_k: Option<i64>,
    /// `presence_penalty`.
    pub(crate) presence_penalty: Option<f64>,
    /// `repetition_penalty`.
    pub(crate) repetition_penalty: Option<f64>,
    /// `seed`.
    pub(crate) seed: Option<i64>,
    /// Overrides for `thinking_on` (curves collected with per-mode sampling, e.g. qwen3.5).
    pub(crate) thinking_on: Option<Box<Sampling>>,
    /// Overrides for `thinking_off`.
    pub(crate) thinking_off: Option<Box<Sampling>>,
}

impl Sampling {
    /// The sampling of one thinking mode: the shared keys, overridden by the mode's own.
    pub(crate) fn for_mode(&self, thinking: ThinkingMode) -> Sampling {
        let own = match thinking {
            ThinkingMode::On => self.thinking_on.as_deref(),
            ThinkingMode::Off => self.thinking_off.as_deref(),
        };
        let pick = |f: fn(&Sampling) -> Option<f64>| own.and_then(f).or_else(|| f(self));
        Sampling {
            temperature: pick(|s| s.temperature),
            top_p: pick(|s| s.top_p),
            top_k: own.and_then(|s| s.top_k).or(self.top_k),
            presence_penalty: pick(|s| s.presence_penalty),
            repetition_penalty: pick(|s| s.repetition_penalty),
            seed: own.and_then(|s| s.seed).or(self.seed),
            thinking_on: None,
            thinking_off: None,
        }
    }
}

/// `chat_template_kwargs` per thinking mode.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ModeKwargs {
    /// Sent with `thinking_on`.
    pub(crate) thinking_on: Option<serde_json::Map<String, serde_json::Value>>,
    /// Sent with `thinking_off`.
    pub(crate) thinking_off: Option<serde_json::Map<String, serde_json::Value>>,
}

impl ModeKwargs {
    /// The kwargs of a mode, if recorded.
    pub(crate) fn get(
        &self,
        thinking: ThinkingMode,
    ) -> Option<&serde_json::Map<String, serde_json::Value>> {
        match thinking {
            ThinkingMode::On => self.thinking_on.as_ref(),
            ThinkingMode::Off => self.thinking_off.as_ref(),
        }
    }
}

impl Collection {
    /// Loads a collection metadata file (YAML or JSON, the block's fields at the top level), as
    /// given to `--collection-metadata`.
    pub fn load(path: &Path) -> Result<Self, GoldenError> {
        let doc = yaml::load(path).map_err(|source| GoldenError::CollectionYaml {
            file: path.to_owned(),
            source,
        })?;
        Self::from_node(path, &doc, &doc.root)
    }

    /// Reads a collection from `node` of `doc` (a whole file, or a curve file's block).
    pub(super) fn from_node(file: &Path, doc: &Doc, node: &Node) -> Result<Self, GoldenError> {
        let err = |msg: String| GoldenError::Collection {
            file: file.to_owned(),
            msg,
        };
        let json = doc.to_json(node).map_err(|e| err(e.to_string()))?;
        serde_json::from_value(json).map_err(|e| err(e.to_string()))
    }
}
