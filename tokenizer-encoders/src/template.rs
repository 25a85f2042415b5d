//! Hugging Face chat templates (`chat_template` in `tokenizer_config.json`, or
//! `chat_template.jinja`) rendered with minijinja: the `Encoder::Template` path.
//!
//! The environment mirrors what `transformers` sets up for `apply_chat_template`: `trim_blocks`
//! and `lstrip_blocks`, loop controls, Python string/dict methods (minijinja-contrib `pycompat`),
//! `raise_exception`, `strftime_now`, and a `tojson` that prints like Python's `json.dumps`
//! (minijinja's own escapes HTML characters and drops the spaces after `,` and `:`).
//! Loading reads files; rendering is pure apart from `strftime_now` reading the clock.
//!
//! Known difference from Python Jinja2: a list or dict printed directly (`{{ [1, 'a'] }}`, not
//! through `tojson`) shows its strings in double quotes (`[1, "a"]`) where Python's `repr` uses
//! single quotes; `None`, `True` and floats print as in Python.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use minijinja::value::{Kwargs, Rest};
use minijinja::{Environment, ErrorKind, Value as JValue};
use serde_json::{Map, Value};

use crate::pyjson::{dumps_with, Dump};
use crate::{EncodeError, LoadError};

/// A loaded chat template with the special tokens of its tokenizer config.
#[derive(Clone, Debug)]
pub struct ChatTemplate {
    env: Arc<Environment<'static>>,
    /// Template names in `env`: `default` plus any named templates of a list-valued config.
    names: Vec<String>,
    bos_token: Option<String>,
    eos_token: Option<String>,
}

impl ChatTemplate {
    /// Compiles a template from source, with the tokens the template sees as `bos_token` and
    /// `eos_token`.
    pub fn from_source(
        source: &str,
        bos_token: Option<String>,
        eos_token: Option<String>,
    ) -> Result<Self, EncodeError> {
        Self::build(
            vec![("default".to_owned(), source.to_owned())],
            bos_token,
            eos_token,
        )
    }

    /// Loads from a model directory (its `chat_template.jinja`, else the `chat_template` of its
    /// `tokenizer_config.json`), a `tokenizer_config.json`, or a template file (special tokens
    /// then come from a `tokenizer_config.json` beside it, if any).
    pub fn from_path(path: &Path) -> Result<Self, LoadError> {
        let (template_file, config_file) = if path.is_dir() {
            let jinja = path.join("chat_template.jinja");
            (
                jinja.is_file().then_some(jinja),
                path.join("tokenizer_config.json"),
            )
        } else if path.extension().is_some_and(|e| e == "json") {
            (None, path.to_owned())
        } else {
            let beside = path.with_file_name("tokenizer_config.json");
            (Some(path.to_owned()), beside)
        };
        let config = if config_file.is_file() || template_file.is_none() {
            let text = read(&config_file)?;
            let v: Value = serde_json::from_str(&text).map_err(|e| invalid(&config_file, e))?;
            Some(v)
        } else {
            None
        };
        let token = |key: &str| -> Option<String> {
            match config.as_ref()?.get(key)? {
                Value::String(s) => Some(s.clone()),
                // An AddedToken object: {"content": "<s>", "lstrip": false, ...}
                Value::Object(o) => o.get("content")?.as_str().map(str::to_owned),
                _ => None,
            }
        };
        let (bos, eos) = (token("bos_token"), token("eos_token"));
        let sources = match template_file {
            Some(f) => vec![("default".to_owned(), read(&f)?)],
            None => {
                let v = config.as_ref().and_then(|c| c.get("chat_template"));
                templates_of(v).ok_or_else(|| LoadError::Invalid {
                    path: config_file.clone(),
                    what: "no `chat_template` (a string or a list of {name, template}); pass a \
                           chat_template.jinja instead"
                        .to_owned(),
                })?
            }
        };
        let origin = if path.is_dir() {
            config_file
        } else {
            path.to_owned()
        };
        Self::build(sources, bos, eos).map_err(|e| invalid(&origin, e))
    }

    fn build(
        sources: Vec<(String, String)>,
        bos_token: Option<String>,
        eos_token: Option<String>,
    ) -> Result<Self, EncodeError> {
        let mut env = Environment::new();
        // As transformers' environment: trim_blocks and lstrip_blocks on, and (Jinja's default)
        // a single trailing newline of the template dropped.
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_filter("tojson", tojson);
        let mut names = Vec::with_capacity(sources.len());
        for (name, source) in sources {
            env.add_template_owned(name.clone(), source)?;
            names.push(name);
        }
        Ok(ChatTemplate {
            env: Arc::new(env),
            names,
            bos_token,
            eos_token,
        })
    }

    /// Renders `messages` like `apply_chat_template(messages, tools=tools, tokenize=False,
    /// **kwargs)`. `add_generation_prompt` defaults to true, as a server's chat endpoint does;
    /// every kwarg (including `add_generation_prompt`) reaches the template as a variable. With a
    /// list of named templates, `tool_use` is picked when tools are given, else `default`.
    pub fn render(
        &self,
        messages: &[Value],
        kwargs: &Map<String, Value>,
        tools: Option<&[Value]>,
    ) -> Result<String, EncodeError> {
        let name = self.pick(tools.is_some_and(|t| !t.is_empty()))?;
        let tmpl = self.env.get_template(name)?;
        let mut ctx = Map::new();
        ctx.insert("add_generation_prompt".to_owned(), Value::Bool(true));
        if let Some(b) = &self.bos_token {
            ctx.insert("bos_token".to_owned(), Value::String(b.clone()));
        }
        if let Some(e) = &self.eos_token {
            ctx.insert("eos_token".to_owned(), Value::String(e.clone()));
        }
        for (k, v) in kwargs {
            ctx.insert(k.clone(), v.clone());
        }
        ctx.insert("messages".to_owned(), Value::Array(messages.to_vec()));
        if let Some(t) = tools {
            ctx.insert("tools".to_owned(), Value::Array(t.to_vec()));
        }
        Ok(tmpl.render(JValue::from_serialize(&ctx))?)
    }

    fn pick(&self, with_tools: bool) -> Result<&str, EncodeError> {
        let has = |n: &str| self.names.iter().any(|x| x == n);
        if with_tools && has("tool_use") {
            return Ok("tool_use");
        }
        if has("default") {
            return Ok("default");
        }
        match self.names.as_slice() {
            [only] => Ok(only),
            _ => Err(EncodeError::Template(minijinja::Error::new(
                ErrorKind::TemplateNotFound,
                format!(
                    "no `default` among the named chat templates {:?}",
                    self.names
                ),
            ))),
        }
    }
}

/// The templates of a `chat_template` config value: a string, or `[{name, template}, ...]`.
fn templates_of(v: Option<&Value>) -> Option<Vec<(String, String)>> {
    match v? {
        Value::String(s) => Some(vec![("default".to_owned(), s.clone())]),
        Value::Array(items) => items
            .iter()
            .map(|t| {
                Some((
                    t.get("name")?.as_str()?.to_owned(),
                    t.get("template")?.as_str()?.to_owned(),
                ))
            })
            .collect(),
        _ => None,
    }
}

fn read(path: &Path) -> Result<String, LoadError> {
    std::fs::read_to_string(path).map_err(|source| LoadError::Io {
        path: PathBuf::from(path),
        source,
    })
}

fn invalid(path: &Path, e: impl std::fmt::Display) -> LoadError {
    LoadError::Invalid {
        path: path.to_owned(),
        what: format!("{e:#}"),
    }
}

/// `raise_exception(message)`: templates reject inputs with it (e.g. roles out of order).
fn raise_exception(message: String) -> Result<JValue, minijinja::Error> {
    Err(minijinja::Error::new(ErrorKind::InvalidOperation, message))
}

/// `strftime_now(format)`: the local time formatted as Python's `datetime.now().strftime`.
fn strftime_now(format: String) -> Result<String, minijinja::Error> {
    use std::fmt::Write;
    let mut out = String::new();
    write!(out, "{}", chrono::Local::now().format(&format)).map_err(|_| {
        minijinja::Error::new(
            ErrorKind::InvalidOperation,
            format!("strftime_now: unsupported format {format:?}"),
        )
    })?;
    Ok(out)
}

/// `tojson` as transformers defines it: `json.dumps(x, ensure_ascii=False, indent=None,
/// separators=None, sort_keys=False)`, each keyword settable from the template.
fn tojson(value: JValue, args: Rest<JValue>, kwargs: Kwargs) -> Result<String, minijinja::Error> {
    let bad = |what: String| minijinja::Error::new(ErrorKind::InvalidOperation, what);
    let indent: Option<usize> = match args.first() {
        Some(v) if !v.is_none() => Some(usize::try_from(v.clone())?),
        _ => kwargs.get::<Option<usize>>("indent")?,
    };
    let separators = match kwargs.get::<Option<JValue>>("separators")? {
        Some(v) if !v.is_none() => {
            let parts: Vec<String> = v
                .try_iter()?
                .map(|p| p.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or_else(|| bad("tojson: separators must be two strings".to_owned()))?;
            match <[String; 2]>::try_from(parts) {
                Ok([item, key]) => Some((item, key)),
                Err(_) => return Err(bad("tojson: separators must be two strings".to_owned())),
            }
        }
        _ => None,
    };
    let opts = Dump {
        indent,
        separators,
        ensure_ascii: kwargs.get::<Option<bool>>("ensure_ascii")?.unwrap_or(false),
        sort_keys: kwargs.get::<Option<bool>>("sort_keys")?.unwrap_or(false),
    };
    kwargs.assert_all_used()?;
    let json = serde_json::to_value(&value).map_err(|e| bad(format!("tojson: {e}")))?;
    dumps_with(&json, &opts).map_err(|e| bad(format!("tojson: {e}")))
}
