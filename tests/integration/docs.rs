//! The docs cannot rot: every `specperf` command in a fenced shell block of README.md and
//! docs/*.md is parsed by the binary's own flag table (in process, `specperf::Cli`), and the
//! blocks marked `<!-- doc-test: run -->` (the line before the fence) run offline, against the
//! embedded simulator, in a temporary directory, and must exit 0. A page that links a missing
//! `docs/` page fails too.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use clap::Parser;

/// One command as written in a page.
#[derive(Debug)]
struct DocCommand {
    /// `README.md:12`.
    at: String,
    /// `specperf` and its arguments, shell-split.
    argv: Vec<String>,
    /// From a block marked `<!-- doc-test: run -->`.
    run: bool,
    /// The fenced block it is in (the commands of one block run in one directory, in order).
    block: usize,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn pages() -> Vec<PathBuf> {
    let mut v = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    v.extend(docs);
    v
}

/// Splits one shell line into words as `sh` would for these pages: single and double quotes,
/// backslash escapes; `#` starts a comment outside quotes at a word's start.
fn shell_words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    cur.push(q);
                }
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => cur.extend(chars.next()),
                        _ => cur.push(q),
                    }
                }
            }
            '\\' => {
                in_word = true;
                cur.extend(chars.next());
            }
            '#' if !in_word => break,
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    out
}

/// The `specperf` invocations of one logical line: after optional `VAR=value` words, up to a
/// shell operator (`|`, `>`, `&&`, `;`, ...). `cargo run --release --` counts as `specperf`.
fn invocations(words: &[String]) -> Vec<Vec<String>> {
    let is_op = |w: &str| {
        matches!(
            w,
            "|" | "||" | "&&" | ";" | "&" | ">" | ">>" | "<" | "2>" | "2>&1"
        ) || w.starts_with('>')
            || w.starts_with("2>")
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let start = i;
        while i < words.len() && !is_op(&words[i]) {
            i += 1;
        }
        let seg = &words[start..i];
        // Skip the redirect target after an operator like `>`.
        if i < words.len() && words[i].starts_with('>') && words[i].len() == 1 {
            i += 1;
        }
        i += 1;
        let mut s = seg
            .iter()
            .skip_while(|w| w.contains('=') && !w.starts_with('-'))
            .cloned()
            .collect::<Vec<_>>();
        if s.len() >= 4 && s[..4] == ["cargo", "run", "--release", "--"] {
            s.splice(..4, ["specperf".to_string()]);
        }
        if s.first().is_some_and(|w| w == "specperf") {
            out.push(s);
        }
    }
    out
}

fn commands() -> Vec<DocCommand> {
    let mut out = Vec::new();
    let mut block = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.strip_prefix(root()).unwrap().display().to_string();
        let lines: Vec<&str> = text.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            let fence = lines[i].trim_start();
            let Some(info) = fence.strip_prefix("```") else {
                i += 1;
                continue;
            };
            let shell = matches!(info.trim(), "bash" | "sh" | "console" | "shell");
            let run = i > 0 && lines[i - 1].trim() == "<!-- doc-test: run -->";
            block += 1;
            i += 1;
            let mut logical = String::new();
            let mut first = i;
            while i < lines.len() && !lines[i].trim_start().starts_with("```") {
                let l = lines[i].trim_start().strip_prefix("$ ").unwrap_or(lines[i]);
                if logical.is_empty() {
                    first = i;
                }
                if let Some(cont) = l.trim_end().strip_suffix('\\') {
                    logical.push_str(cont);
                    logical.push(' ');
                } else {
                    logical.push_str(l);
                    if shell {
                        for argv in invocations(&shell_words(&logical)) {
                            out.push(DocCommand {
                                at: format!("{name}:{}", first + 1),
                                argv,
                                run,
                                block,
                            });
                        }
                    }
                    logical.clear();
                }
                i += 1;
            }
            i += 1;
        }
    }
    out
}

#[test]
fn the_shell_splitter_reads_the_pages_quoting() {
    assert_eq!(
        shell_words(r#"A=1 specperf x --j '{"a": 1}' --k "b c" d\ e # note"#),
        [
            "A=1",
            "specperf",
            "x",
            "--j",
            r#"{"a": 1}"#,
            "--k",
            "b c",
            "d e"
        ]
    );
    let w = shell_words("specperf completions zsh > \"${fpath[1]}/_specperf\"");
    assert_eq!(invocations(&w), [["specperf", "completions", "zsh"]]);
    let w = shell_words("cargo build --release && cargo run --release -- replay --ui plain");
    assert_eq!(invocations(&w), [["specperf", "replay", "--ui", "plain"]]);
}

#[test]
fn every_documented_command_parses_with_the_binarys_flags() {
    let cmds = commands();
    assert!(
        cmds.len() >= 30,
        "only {} specperf commands found in the pages: is the extraction broken?",
        cmds.len()
    );
    let bad: Vec<String> = cmds
        .iter()
        .filter_map(|c| {
            specperf::Cli::try_parse_from(&c.argv)
                .err()
                .map(|e| format!("{}: {}\n  {}", c.at, c.argv.join(" "), e.render()))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "documented commands that do not parse:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_commands_marked_to_run_offline_run_against_the_simulator() {
    let bin = env!("CARGO_BIN_EXE_specperf");
    let runs: Vec<DocCommand> = commands().into_iter().filter(|c| c.run).collect();
    assert!(
        runs.len() >= 3,
        "blocks marked <!-- doc-test: run -->: {runs:?}"
    );
    let mut dir = tempfile::tempdir().unwrap();
    let mut block = 0;
    for c in runs {
        if c.block != block {
            dir = tempfile::tempdir().unwrap();
            block = c.block;
        }
        let (out, err) = (dir.path().join(".stdout"), dir.path().join(".stderr"));
        let mut child = Command::new(bin)
            .args(&c.argv[1..])
            .current_dir(dir.path())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        let status = crate::common::wait_exit(&mut child, Duration::from_secs(180));
        assert!(
            status.success(),
            "{}: `{}` exited {status}:\n{}\n{}",
            c.at,
            c.argv.join(" "),
            std::fs::read_to_string(&out).unwrap_or_default(),
            std::fs::read_to_string(&err).unwrap_or_default()
        );
    }
}

#[test]
fn links_between_pages_point_at_files_that_exist() {
    let mut missing = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let base = page.parent().unwrap();
        for (i, _) in text.match_indices("](") {
            let rest = &text[i + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = rest[..end].split('#').next().unwrap_or_default();
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            if !Path::new(base).join(target).exists() {
                missing.push(format!("{}: {target}", page.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "links to missing files:\n{}",
        missing.join("\n")
    );
}

/// Issue 39 item 5: `replay -h` listed about 150 flags under one `Options:` heading. Every
/// command's flags sit under headings now (clap's table, which `-h`, `--help` and the man pages
/// print): none holds more than 25 shown flags, `Options:` keeps only `-h`/`-V`, and the groups
/// come in the pipeline's order, target to simulator.
#[test]
fn every_commands_help_groups_its_flags_under_headings() {
    use clap::CommandFactory;
    const MOST: usize = 25;
    // Flags of each group, the groups in the order their headings must come wherever a command
    // has them.
    const PIPELINE: &[&[&str]] = &[
        &["url", "model"],
        &["input-file", "tokenizer"],
        &["concurrency", "request-count"],
        &["request-timeout-seconds", "timeout-seconds"],
        &["server-metrics"],
        &["gpu-telemetry"],
        &["artifact-dir", "output-artifact-dir", "result-filename"],
        &["sweep-type"],
        &["serve-cmd"],
        &["sim-ttft-ms"],
    ];
    let mut cli = specperf::Cli::command();
    cli.build();
    let mut wrong = Vec::new();
    let mut commands = 0;
    for sub in cli.get_subcommands() {
        commands += 1;
        let name = sub.get_name();
        // Headings in clap's order (each one's first flag, shown or not), with their shown flags.
        let mut headings: Vec<(&str, usize)> = Vec::new();
        for arg in sub.get_arguments().filter(|a| !a.is_positional()) {
            let heading = arg.get_help_heading().unwrap_or("Options");
            let shown = usize::from(!arg.is_hide_set());
            match headings.iter_mut().find(|(h, _)| *h == heading) {
                Some((_, n)) => *n += shown,
                None => headings.push((heading, shown)),
            }
        }
        for (heading, n) in &headings {
            if *n > MOST {
                wrong.push(format!(
                    "{name}: {n} flags under {heading:?} (at most {MOST})"
                ));
            }
            if *heading == "Options" && *n > 3 {
                wrong.push(format!(
                    "{name}: {n} flags under \"Options\" (only -h/--help and -V/--version belong there)"
                ));
            }
        }
        let position = |long: &str| {
            let arg = sub.get_arguments().find(|a| a.get_long() == Some(long))?;
            let heading = arg.get_help_heading().unwrap_or("Options");
            let i = headings.iter().position(|(h, _)| *h == heading)?;
            Some((i, heading))
        };
        let mut before: Option<(usize, &str, &str)> = None;
        for group in PIPELINE {
            for long in *group {
                let Some((i, heading)) = position(long) else {
                    continue;
                };
                if let Some((j, earlier, flag)) = before {
                    if i < j {
                        wrong.push(format!(
                            "{name}: --{long}'s heading {heading:?} is shown before {earlier:?} \
                             (--{flag}), though its group comes later in the pipeline"
                        ));
                    }
                }
                if before.is_none_or(|(j, _, _)| i > j) {
                    before = Some((i, heading, long));
                }
            }
        }
    }
    assert!(commands >= 14, "only {commands} commands");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
