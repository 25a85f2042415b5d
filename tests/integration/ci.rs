//! CI runs what a newcomer runs: `.ci/run` calls the README's test command and adds only what is
//! CI's own (the toolchain, formatting, lints, the aarch64 leg), and that command sets up every
//! tool the tests need. Each check reads the files as they are, so a set-up step that moves into
//! `.ci/run` alone, or a test command that drifts from the README's, fails here.

use crate::tools::{workspace_root, Tool};

/// The scripts `.ci/run` may run besides the README's test command: its own leg and the shared
/// stage helpers.
const CI_OWN_SCRIPTS: [&str; 2] = ["scripts/ci-aarch64.sh", "scripts/lib/jobs.sh"];

/// Cargo subcommands `.ci/run` may run itself (the tests run only through the README's command).
const CI_OWN_CARGO: [&str; 2] = ["fmt", "clippy"];

fn read(rel: &str) -> String {
    std::fs::read_to_string(workspace_root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The README's test command: the second command of its first shell block (the first is the
/// main job), without its comment.
fn readme_test_command() -> String {
    let readme = read("README.md");
    let block: Vec<&str> = readme
        .split("```bash\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("README.md has a ```bash block with the two commands")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(
        block.len(),
        2,
        "README.md's first block should hold the main job and the test command: {block:?}"
    );
    without_comment(block[1]).to_owned()
}

/// A shell line without its trailing comment (`#` at a word's start) and surrounding blanks.
fn without_comment(line: &str) -> &str {
    let cut = line
        .char_indices()
        .find(|&(i, c)| c == '#' && (i == 0 || line[..i].ends_with(char::is_whitespace)))
        .map_or(line.len(), |(i, _)| i);
    line[..cut].trim()
}

/// The script's command lines: comments dropped, continuation lines joined.
fn command_lines(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in script.lines() {
        let code = without_comment(line);
        if let Some(head) = code.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(code);
        if !pending.trim().is_empty() {
            out.push(pending.trim().to_owned());
        }
        pending.clear();
    }
    out
}

/// Every `scripts/...` path a line runs or sources, with the rest of the line after it.
fn script_calls(line: &str) -> Vec<(&str, &str)> {
    let mut calls = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("scripts/") {
        let from = &rest[at..];
        let end = from
            .find(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | ')' | '"' | '\''))
            .unwrap_or(from.len());
        calls.push((&from[..end], from[end..].trim()));
        rest = &from[end..];
    }
    calls
}

/// What `.ci/run` (its text `ci`) does that the README's test command `cmd` does not: one line
/// per problem, naming the fix.
fn ci_problems(ci: &str, cmd: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let lines = command_lines(ci);
    let runs_it = lines
        .iter()
        .filter(|l| l.ends_with(&format!(" {cmd}")) || **l == cmd)
        .count();
    if runs_it != 1 {
        problems.push(format!(
            ".ci/run must run the README's test command `{cmd}` exactly once, as its own line \
             (`stage NAME {cmd}`); it does {runs_it} times"
        ));
    }
    let script = cmd.split_whitespace().next().unwrap_or_default();
    for line in &lines {
        for (path, _) in script_calls(line) {
            if path != script && !CI_OWN_SCRIPTS.contains(&path) {
                problems.push(format!(
                    ".ci/run runs `{path}` (line `{line}`), which the README's test command \
                     `{cmd}` does not: a set-up step only CI has leaves a newcomer's run red. \
                     Move it into {script}, or if it really is CI's own, into CI_OWN_SCRIPTS \
                     with the reason"
                ));
            }
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        // `cargo SUBCOMMAND` (not `command -v cargo >/dev/null`).
        let subcommand = |w: &&[&str]| w[0] == "cargo" && w[1].starts_with(char::is_alphabetic);
        for w in words.windows(2).filter(subcommand) {
            if !CI_OWN_CARGO.contains(&w[1]) {
                problems.push(format!(
                    ".ci/run runs `cargo {}` (line `{line}`): tests run only through the \
                     README's test command `{cmd}`, so that CI and a newcomer run the same ones",
                    w[1]
                ));
            }
        }
    }
    problems
}

/// The tools whose set-up command the test script (its text) never runs.
fn tools_not_set_up(script: &str) -> Vec<Tool> {
    let lines = command_lines(script);
    Tool::ALL
        .into_iter()
        .filter(|tool| {
            let setup = tool.setup();
            let (path, args) = setup.split_once(' ').unwrap_or((setup, ""));
            !lines
                .iter()
                .flat_map(|l| script_calls(l))
                .any(|(p, rest)| p == path && rest.starts_with(args))
        })
        .collect()
}

#[test]
fn ci_runs_the_readme_test_command_and_no_set_up_of_its_own() {
    let problems = ci_problems(&read(".ci/run"), &readme_test_command());
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_test_command_sets_up_every_tool_the_tests_use() {
    let cmd = readme_test_command();
    let script = cmd.split_whitespace().next().unwrap_or_default();
    let missing = tools_not_set_up(&read(script));
    assert!(
        missing.is_empty(),
        "{script} (the README's test command) never sets up {missing:?} (see Tool::setup): the \
         tests that need them fail on a fresh clone"
    );
}

/// The tests find their tools only through `tests/tools.rs`, so its table (and what
/// `scripts/test.sh` sets up, checked above) covers every one: a test with its own lookup could
/// need a tool no set-up step provides.
#[test]
fn every_test_finds_its_tools_through_the_one_table() {
    let root = workspace_root();
    let mut offenders = Vec::new();
    let mut stack = vec![
        root.join("src"),
        root.join("tests"),
        root.join("benches"),
        root.join("tokenizer-encoders"),
    ];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "target") {
                    stack.push(p);
                }
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") || p.ends_with("tests/tools.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            for tool in Tool::ALL {
                let var = format!("\"{}\"", tool.env());
                if text.contains(&var) {
                    offenders.push(format!("{} reads {}", p.display(), tool.env()));
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "tools looked up outside tests/tools.rs (use `Tool::...path()`, whose failure names the \
         set-up command): {offenders:#?}"
    );
}

/// The checks above are only worth what they can fail on: a set-up step moved into CI, a test
/// run of CI's own, a changed test command and a dropped set-up step are each caught.
#[test]
fn a_divergence_between_ci_and_the_readme_is_caught() {
    let ok = ". scripts/lib/jobs.sh\nbg a 19 scripts/ci-aarch64.sh --build\n\
              stage fmt cargo fmt --all --check\nstage t scripts/test.sh # the README's\n\
              stage clippy cargo \\\n  clippy -- -D warnings\n";
    assert_eq!(ci_problems(ok, "scripts/test.sh"), Vec::<String>::new());
    let setup = format!("{ok}stage venv scripts/dynamo.sh --setup\n");
    let p = ci_problems(&setup, "scripts/test.sh");
    assert!(p.len() == 1 && p[0].contains("scripts/dynamo.sh"), "{p:?}");
    let own_tests = format!("{ok}cargo test --workspace\n");
    let p = ci_problems(&own_tests, "scripts/test.sh");
    assert!(p.len() == 1 && p[0].contains("cargo test"), "{p:?}");
    let p = ci_problems(ok, "scripts/test.sh --all");
    assert!(p.iter().any(|p| p.contains("0 times")), "{p:?}");
    let commented = ok.replace("stage t scripts/test.sh", "# stage t scripts/test.sh");
    assert!(!ci_problems(&commented, "scripts/test.sh").is_empty());

    let all: String = Tool::ALL
        .iter()
        .map(|t| format!("run {}\n", t.setup()))
        .collect();
    assert_eq!(tools_not_set_up(&all), Vec::<Tool>::new());
    let without_dynamo = all.replace("scripts/dynamo.sh --setup", "# scripts/dynamo.sh --setup");
    assert_eq!(tools_not_set_up(&without_dynamo), [Tool::Dynamo]);
    let no_flag = all.replace("scripts/dynamo.sh --setup", "scripts/dynamo.sh up");
    assert_eq!(tools_not_set_up(&no_flag), [Tool::Dynamo]);
}
