//! `specperf inject` as a process: every fixture recipe through opt-out, explicit AL, golden
//! lookup, idempotent rerun and each fail-loud case, plus hand-written recipes for the YAML forms
//! the fixtures lack. Each test asserts the exit code and the exact output bytes; a line diff
//! checks that only the intended lines changed.

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_specperf");

/// Environment variables `inject` reads; cleared so the caller's shell cannot leak in.
const VARS: [&str; 6] = [
    "SYNTHETIC_ACCEPTANCE",
    "SYNTHETIC_ACCEPTANCE_LENGTH",
    "MODEL_PREFIX",
    "THINKING_MODE",
    "FRAMEWORK",
    "NUM_SPEC_TOKENS",
];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn golden() -> String {
    fixtures().join("golden").display().to_string()
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn inject(args: &[&str], env: &[(&str, &str)]) -> Out {
    let mut c = Command::new(BIN);
    c.arg("inject").args(args);
    for v in VARS {
        c.env_remove(v);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().expect("specperf runs");
    Out {
        code: o.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// A temporary copy of `text` named `name`.
fn recipe(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    (dir, p)
}

fn fixture_text(name: &str) -> String {
    std::fs::read_to_string(fixtures().join("recipes").join(name)).unwrap()
}

/// One intended change of a recipe.
#[derive(Clone)]
enum Change {
    /// Line `n` (1-based) becomes this text.
    Replace(usize, String),
    /// These lines follow original line `n`.
    Insert(usize, Vec<String>),
}

/// The input with `changes` applied, line terminators kept.
fn expected(input: &str, changes: &[Change]) -> String {
    let mut out = String::new();
    for (i, line) in input.split_inclusive('\n').enumerate() {
        let n = i + 1;
        let replaced = changes.iter().find_map(|c| match c {
            Change::Replace(at, text) if *at == n => Some(text),
            _ => None,
        });
        match replaced {
            Some(text) => {
                out.push_str(text);
                out.push('\n');
            }
            None => out.push_str(line),
        }
        for c in changes {
            if let Change::Insert(at, lines) = c {
                if *at == n {
                    for l in lines {
                        out.push_str(l);
                        out.push('\n');
                    }
                }
            }
        }
    }
    out
}

/// Lines only in `a` and lines only in `b` (longest common subsequence of lines).
fn line_diff(a: &str, b: &str) -> (Vec<String>, Vec<String>) {
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let (mut removed, mut added) = (Vec::new(), Vec::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            added.push(b[j].to_owned());
            j += 1;
        } else {
            removed.push(a[i].to_owned());
            i += 1;
        }
    }
    (removed, added)
}

/// Asserts `after` is `before` with exactly `changes`, byte for byte, and that a line diff
/// shows only those lines.
fn assert_changed(before: &str, after: &str, changes: &[Change]) {
    let want = expected(before, changes);
    assert_eq!(after, want, "output bytes");
    let (removed, added) = line_diff(before, after);
    let mut want_removed = Vec::new();
    let mut want_added = Vec::new();
    for c in changes {
        match c {
            Change::Replace(n, text) => {
                let old = before.lines().nth(n - 1).unwrap();
                if old != text {
                    want_removed.push(old.to_owned());
                    want_added.push(text.clone());
                }
            }
            Change::Insert(_, lines) => want_added.extend(lines.iter().cloned()),
        }
    }
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    assert_eq!(sorted(removed), sorted(want_removed), "removed lines");
    assert_eq!(sorted(added), sorted(want_added), "added lines");
}

/// One fixture recipe and what each path must do to it.
struct Fixture {
    file: &'static str,
    prefix: &'static str,
    framework: &'static str,
    /// A framework of another engine.
    wrong_framework: &'static str,
    /// Lines to delete so no speculative entry is left.
    spec_lines: &'static [usize],
    /// Changes for an explicit AL of 3.0.
    explicit: fn(&str) -> Vec<Change>,
    /// Changes for the golden lookup with thinking_on.
    golden: fn(&str) -> Vec<Change>,
}

fn vllm_json(line: &str, al: &str) -> String {
    line.replace(
        "}'",
        &format!(
            ",\"rejection_sample_method\":\"synthetic\",\"synthetic_acceptance_length\":{al}}}'"
        ),
    )
}

fn line_of(text: &str, n: usize) -> &str {
    text.lines().nth(n - 1).unwrap()
}

fn sglang_lines(al: &str) -> Vec<String> {
    vec![
        format!("    SGLANG_SIMULATE_ACC_LEN: \"{al}\""),
        "    SGLANG_SIMULATE_ACC_METHOD: \"match-expected\"".into(),
        "    SGLANG_SIMULATE_ACC_TOKEN_MODE: \"real-draft-token\"".into(),
    ]
}

const FIXTURES: [Fixture; 4] = [
    Fixture {
        file: "vllm_dsv4_disagg-gb200-low-latency-mtp2.yaml",
        prefix: "dsv4",
        framework: "dynamo-vllm",
        wrong_framework: "sglang",
        spec_lines: &[78, 99],
        explicit: |t| {
            vec![
                Change::Replace(78, vllm_json(line_of(t, 78), "3.0")),
                Change::Replace(99, vllm_json(line_of(t, 99), "3.0")),
            ]
        },
        golden: |t| {
            vec![
                Change::Replace(78, vllm_json(line_of(t, 78), "2.27")),
                Change::Replace(99, vllm_json(line_of(t, 99), "2.27")),
            ]
        },
    },
    Fixture {
        file: "vllm_minimax-m3_1p3d-tp2-tp2-c48-agentic.yaml",
        prefix: "minimaxm3",
        framework: "dynamo-vllm",
        wrong_framework: "dynamo-trt",
        spec_lines: &[94, 117],
        explicit: |t| {
            vec![
                Change::Replace(94, line_of(t, 94).replace("2.78}", "3.0}")),
                Change::Replace(117, line_of(t, 117).replace("2.78}", "3.0}")),
            ]
        },
        golden: |_| Vec::new(),
    },
    Fixture {
        file: "sglang_dsv4_disagg-b300-1p1d-tp4-tp4-mtp.yaml",
        prefix: "dsv4",
        framework: "dynamo-sglang",
        wrong_framework: "vllm",
        spec_lines: &[105, 106, 107, 108],
        explicit: |_| {
            vec![
                Change::Insert(34, sglang_lines("3.0")),
                Change::Insert(49, sglang_lines("3.0")),
            ]
        },
        golden: |_| {
            vec![
                Change::Insert(34, sglang_lines("2.49")),
                Change::Insert(49, sglang_lines("2.49")),
            ]
        },
    },
    Fixture {
        file: "trtllm_dsv4_dynamo-disagg-gb300-1p4d-dep4-tep8-c4-b1-mtp.yaml",
        prefix: "dsv4",
        framework: "dynamo-trt",
        wrong_framework: "dynamo-vllm",
        spec_lines: &[94, 95, 96, 134, 135, 136],
        explicit: |_| {
            vec![
                Change::Replace(
                    37,
                    "    TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS: '2.0'".into(),
                ),
                Change::Replace(
                    50,
                    "    TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS: '2.0'".into(),
                ),
            ]
        },
        golden: |_| Vec::new(),
    },
];

fn opted_in(f: &Fixture) -> Vec<(&'static str, &'static str)> {
    vec![
        ("SYNTHETIC_ACCEPTANCE", "true"),
        ("MODEL_PREFIX", f.prefix),
        ("THINKING_MODE", "thinking_on"),
        ("FRAMEWORK", f.framework),
    ]
}

fn run_on(path: &Path, extra: &[&str], env: &[(&str, &str)]) -> Out {
    let mut args = vec![path.to_str().unwrap()];
    args.extend_from_slice(extra);
    inject(&args, env)
}

#[test]
fn opted_out_leaves_every_fixture_untouched() {
    for f in &FIXTURES {
        let text = fixture_text(f.file);
        for value in [
            None,
            Some("false"),
            Some("FALSE"),
            Some(" False "),
            Some(""),
        ] {
            let (_d, p) = recipe(f.file, &text);
            let mut env = vec![("MODEL_PREFIX", f.prefix), ("FRAMEWORK", f.framework)];
            if let Some(v) = value {
                env.push(("SYNTHETIC_ACCEPTANCE", v));
            }
            let o = run_on(&p, &["--golden", &golden()], &env);
            assert_eq!(o.code, 0, "{} {value:?}: {}", f.file, o.stderr);
            assert!(o.stdout.contains("untouched"), "{}", o.stdout);
            assert_eq!(std::fs::read_to_string(&p).unwrap(), text, "{}", f.file);
        }
        // Anything but true/false is a usage error, even when it means "yes" to a person.
        for bad in ["1", "yes", "on", "truee"] {
            let (_d, p) = recipe(f.file, &text);
            let o = run_on(&p, &[], &[("SYNTHETIC_ACCEPTANCE", bad)]);
            assert_eq!(o.code, 2, "{bad}");
            assert!(
                o.stderr.starts_with("ERROR: SYNTHETIC_ACCEPTANCE="),
                "{}",
                o.stderr
            );
            assert_eq!(o.stderr.lines().count(), 1, "one-line error");
            assert_eq!(std::fs::read_to_string(&p).unwrap(), text);
        }
    }
}

#[test]
fn explicit_al_rewrites_every_fixture_and_a_rerun_changes_nothing() {
    for f in &FIXTURES {
        let text = fixture_text(f.file);
        let (_d, p) = recipe(f.file, &text);
        let env = [
            ("SYNTHETIC_ACCEPTANCE", "True"),
            ("SYNTHETIC_ACCEPTANCE_LENGTH", "3.0"),
            ("FRAMEWORK", f.framework),
        ];
        let o = run_on(&p, &[], &env);
        assert_eq!(o.code, 0, "{}: {}", f.file, o.stderr);
        let after = std::fs::read_to_string(&p).unwrap();
        assert_changed(&text, &after, &(f.explicit)(&text));
        assert!(
            o.stdout.contains("SYNTHETIC_ACCEPTANCE_LENGTH"),
            "{}",
            o.stdout
        );
        let o = run_on(&p, &[], &env);
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            after,
            "{}: rerun is a no-op",
            f.file
        );
        assert!(o.stdout.contains("unchanged"), "{}", o.stdout);
    }
}

#[test]
fn golden_lookup_rewrites_every_fixture_and_a_rerun_changes_nothing() {
    for f in &FIXTURES {
        let text = fixture_text(f.file);
        let (_d, p) = recipe(f.file, &text);
        let env = opted_in(f);
        let o = run_on(&p, &["--golden", &golden()], &env);
        assert_eq!(o.code, 0, "{}: {}", f.file, o.stderr);
        let after = std::fs::read_to_string(&p).unwrap();
        let changes = (f.golden)(&text);
        assert_changed(&text, &after, &changes);
        for c in &changes {
            if let Change::Replace(n, new) = c {
                assert!(
                    o.stdout.contains(&format!("- {}", line_of(&text, *n))),
                    "{}",
                    o.stdout
                );
                assert!(o.stdout.contains(&format!("+ {new}")), "{}", o.stdout);
            }
        }
        let o = run_on(&p, &["--golden", &golden()], &env);
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            after,
            "{}: rerun is a no-op",
            f.file
        );
    }
}

#[test]
fn trtllm_thinking_mode_comes_from_the_environment_not_the_recipe() {
    // Both environments say DYN_DEFAULT_THINKING_MODE: disabled, yet '1.49' is thinking_on.
    let f = &FIXTURES[3];
    let text = fixture_text(f.file);
    let (_d, p) = recipe(f.file, &text);
    let mut env = opted_in(f);
    env[2] = ("THINKING_MODE", "thinking_off");
    let o = run_on(&p, &["--golden", &golden()], &env);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let line = "    TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS: '1.97'".to_owned();
    assert_changed(
        &text,
        &std::fs::read_to_string(&p).unwrap(),
        &[Change::Replace(37, line.clone()), Change::Replace(50, line)],
    );
}

/// Runs a failing case on a fresh copy; asserts the exit code, the one-line error and that the
/// recipe is untouched.
fn fails(f: &Fixture, text: &str, args: &[&str], env: &[(&str, &str)], code: i32, msg: &str) {
    let (_d, p) = recipe(f.file, text);
    let o = run_on(&p, args, env);
    assert_eq!(o.code, code, "{}: {msg}: {}", f.file, o.stderr);
    assert!(o.stderr.starts_with("ERROR: "), "{}", o.stderr);
    assert!(
        o.stderr.contains(msg),
        "{}: want {msg:?} in {}",
        f.file,
        o.stderr
    );
    assert_eq!(o.stderr.lines().count(), 1, "one-line error: {}", o.stderr);
    assert_eq!(
        std::fs::read_to_string(&p).unwrap(),
        text,
        "{}: recipe untouched",
        f.file
    );
    assert!(
        std::fs::read_dir(p.parent().unwrap()).unwrap().count() == 1,
        "no temporary file left behind"
    );
}

#[test]
fn every_fixture_fails_loudly_and_stays_untouched() {
    let g = golden();
    let with_golden = ["--golden", g.as_str()];
    // Curves for every fixture's selection: one with only k = 7, one with a bad value at k 2-3.
    let curves = |body: &str| {
        let dir = tempfile::tempdir().unwrap();
        for name in ["dsv4_mtp", "minimaxm3_eagle3_gqa"] {
            std::fs::write(
                dir.path().join(format!("{name}.yaml")),
                format!("m:\n  thinking_on:\n{body}"),
            )
            .unwrap();
        }
        dir
    };
    let (sparse_dir, invalid_dir) = (
        curves("    7: 3.00\n"),
        curves("    2: 9.99\n    3: 9.99\n"),
    );
    let sparse = sparse_dir.path().display().to_string();
    let invalid = invalid_dir.path().display().to_string();
    for f in &FIXTURES {
        let text = fixture_text(f.file);
        let env = opted_in(f);
        let set = |k: &'static str, v: &'static str| {
            let mut e: Vec<_> = env.iter().copied().filter(|(n, _)| *n != k).collect();
            if !v.is_empty() {
                e.push((k, v));
            }
            e
        };
        fails(
            f,
            &text,
            &with_golden,
            &set("FRAMEWORK", "tilert"),
            1,
            "no synthetic-acceptance backend for framework \"tilert\"",
        );
        fails(
            f,
            &text,
            &with_golden,
            &set("FRAMEWORK", "mlc-llm"),
            1,
            "unknown framework \"mlc-llm\"",
        );
        fails(
            f,
            &text,
            &with_golden,
            &set("FRAMEWORK", f.wrong_framework),
            1,
            "mixed frameworks in",
        );
        fails(
            f,
            &text,
            &with_golden,
            &set("MODEL_PREFIX", "dsr1"),
            1,
            "No committed golden curve for dsr1/",
        );
        fails(
            f,
            &text,
            &["--golden", sparse.as_str()],
            &env,
            1,
            &format!("No golden acceptance for {}_", f.prefix),
        );
        fails(
            f,
            &text,
            &["--golden", invalid.as_str()],
            &env,
            1,
            "Invalid golden acceptance 9.99 in",
        );
        fails(
            f,
            &text,
            &with_golden,
            &set("THINKING_MODE", ""),
            2,
            "THINKING_MODE is not set",
        );
        fails(
            f,
            &text,
            &with_golden,
            &set("THINKING_MODE", "maybe"),
            2,
            "Invalid thinking mode",
        );
        fails(
            f,
            &text,
            &with_golden,
            &set("MODEL_PREFIX", ""),
            2,
            "MODEL_PREFIX is not set",
        );
        fails(f, &text, &[], &env, 2, "--golden is not set");
        let mut e = env.clone();
        e.push(("SYNTHETIC_ACCEPTANCE_LENGTH", "9.5"));
        fails(
            f,
            &text,
            &[],
            &e,
            1,
            "acceptance length 9.5 is outside [1, ",
        );
        let mut e = env.clone();
        e.push(("SYNTHETIC_ACCEPTANCE_LENGTH", "0.5"));
        fails(f, &text, &[], &e, 1, "acceptance length 0.5 is outside");
        let mut e = env.clone();
        e.push(("SYNTHETIC_ACCEPTANCE_LENGTH", "two"));
        fails(
            f,
            &text,
            &[],
            &e,
            2,
            "SYNTHETIC_ACCEPTANCE_LENGTH=\"two\" is not a finite number",
        );
        let mut e = env.clone();
        e.push(("SYNTHETIC_ACCEPTANCE_LENGTH", "2.0"));
        fails(f, &text, &with_golden, &e, 1, "disagrees with golden");
        // Unparseable YAML: an unclosed flow sequence appended.
        let broken = format!("{text}extra: [1, 2\n");
        fails(
            f,
            &broken,
            &with_golden,
            &env,
            1,
            "unparseable YAML at line",
        );
        // No speculative entry: the speculative lines deleted.
        let stripped: String = text
            .split_inclusive('\n')
            .enumerate()
            .filter(|(i, _)| !f.spec_lines.contains(&(i + 1)))
            .map(|(_, l)| l)
            .collect();
        fails(
            f,
            &stripped,
            &with_golden,
            &env,
            1,
            "no speculative entry in",
        );
    }
}

#[test]
fn size_and_depth_are_capped() {
    let f = &FIXTURES[0];
    let env = opted_in(f);
    let big = format!("# {}\n", "x".repeat(9 << 20));
    fails(
        f,
        &big,
        &["--golden", &golden()],
        &env,
        1,
        "larger than the 8388608-byte limit",
    );
    let mut deep = String::new();
    for i in 0..100 {
        deep.push_str(&" ".repeat(i));
        deep.push_str("k:\n");
    }
    fails(
        f,
        &deep,
        &["--golden", &golden()],
        &env,
        1,
        "YAML nested deeper than 64 levels",
    );
}

#[test]
fn check_reports_each_entry_and_writes_nothing() {
    let f = &FIXTURES[0];
    let text = fixture_text(f.file);
    let (_d, p) = recipe(f.file, &text);
    let o = run_on(&p, &["--check"], &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout.contains(":78 vllm prefill: mtp k=2: real"),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout.contains(":99 vllm decode: mtp k=2: real"),
        "{}",
        o.stdout
    );
    assert_eq!(std::fs::read_to_string(&p).unwrap(), text);

    let f = &FIXTURES[1];
    let (_d, p) = recipe(f.file, &fixture_text(f.file));
    let o = run_on(&p, &["--check"], &[("SYNTHETIC_ACCEPTANCE", "false")]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout
            .contains(":117 vllm decode: eagle3 k=3: synthetic AL 2.78"),
        "{}",
        o.stdout
    );

    let f = &FIXTURES[3];
    let (_d, p) = recipe(f.file, &fixture_text(f.file));
    let o = run_on(&p, &["--check"], &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout
            .contains(":134 trtllm decode: MTP k=3: synthetic AL 2.49"),
        "{}",
        o.stdout
    );

    // A synthetic entry without its AL is broken: the lint fails.
    let (_d, p) = recipe(
        "r.yaml",
        "backend:\n  type: vllm\n  vllm_config:\n    decode:\n      speculative-config: '{\"method\":\"mtp\",\"num_speculative_tokens\":2,\"rejection_sample_method\":\"synthetic\"}'\n",
    );
    let o = inject(&["--check", p.to_str().unwrap()], &[]);
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(o.stdout.contains("BROKEN"), "{}", o.stdout);
}

#[test]
fn output_flag_writes_elsewhere_and_keeps_the_recipe() {
    let f = &FIXTURES[0];
    let text = fixture_text(f.file);
    let (d, p) = recipe(f.file, &text);
    let out = d.path().join("out.yaml");
    let o = run_on(
        &p,
        &["--golden", &golden(), "--output", out.to_str().unwrap()],
        &opted_in(f),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(std::fs::read_to_string(&p).unwrap(), text);
    assert_changed(
        &text,
        &std::fs::read_to_string(&out).unwrap(),
        &(f.golden)(&text),
    );
}

#[test]
fn framework_argument_overrides_and_defaults_to_the_recipe() {
    let f = &FIXTURES[2];
    let text = fixture_text(f.file);
    let (_d, p) = recipe(f.file, &text);
    let mut env = opted_in(f);
    env.retain(|(k, _)| *k != "FRAMEWORK");
    // No FRAMEWORK: backend.type decides.
    let o = inject(&[p.to_str().unwrap(), "--golden", &golden()], &env);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout.contains("synthetic acceptance (sglang)"),
        "{}",
        o.stdout
    );
    // The positional argument wins over FRAMEWORK.
    let (_d2, p2) = recipe(f.file, &text);
    env.push(("FRAMEWORK", "vllm"));
    let o = inject(
        &[p2.to_str().unwrap(), "dynamo-sglang", "--golden", &golden()],
        &env,
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
}

// ---- hand-written recipes: the YAML forms the fixtures do not have ----

fn vllm_recipe(role_body: &str) -> String {
    format!(
        "# hand-written\nbackend:\n  type: vllm\n  vllm_config:\n    decode:\n      max-num-seqs: 8  # keep\n{role_body}      block-size: 256\n"
    )
}

/// Injects into `text` (opted in, dsv4, thinking_on): exit 0, exactly `changes`, and a second
/// run changes nothing.
fn rewrites_then_reruns_clean(text: &str, changes: &[Change]) {
    let (o, after) = run_text(text, &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_changed(text, &after, changes);
    let (o, again) = run_text(&after, &[]);
    assert_eq!((o.code, again), (0, after));
}

/// Injects into `text` (opted in, dsv4, thinking_on): exit 1, the recipe untouched, and the
/// error names `cause`.
fn fails_untouched(text: &str, cause: &str) {
    let (o, after) = run_text(text, &[]);
    assert_eq!((o.code, after.as_str()), (1, text));
    assert!(o.stderr.contains(cause), "{}", o.stderr);
}

fn run_text(text: &str, env: &[(&str, &str)]) -> (Out, String) {
    let (_d, p) = recipe("r.yaml", text);
    let mut all = vec![
        ("SYNTHETIC_ACCEPTANCE", "true"),
        ("MODEL_PREFIX", "dsv4"),
        ("THINKING_MODE", "thinking_on"),
    ];
    all.extend_from_slice(env);
    let o = inject(&[p.to_str().unwrap(), "--golden", &golden()], &all);
    let after = std::fs::read_to_string(&p).unwrap();
    (o, after)
}

#[test]
fn vllm_double_quoted_json() {
    let text = vllm_recipe("      speculative-config: \"{\\\"method\\\": \\\"mtp\\\", \\\"num_speculative_tokens\\\": 3}\"  # dq\n");
    rewrites_then_reruns_clean(
        &text,
        &[Change::Replace(
            7,
            "      speculative-config: \"{\\\"method\\\":\\\"mtp\\\",\\\"num_speculative_tokens\\\":3,\\\"rejection_sample_method\\\":\\\"synthetic\\\",\\\"synthetic_acceptance_length\\\":2.49}\"  # dq".into(),
        )],
    );
}

#[test]
fn vllm_flow_mapping() {
    let text = vllm_recipe("      speculative-config: {method: mtp, num_speculative_tokens: 1}\n");
    rewrites_then_reruns_clean(
        &text,
        &[Change::Replace(
            7,
            "      speculative-config: {method: mtp, num_speculative_tokens: 1, rejection_sample_method: synthetic, synthetic_acceptance_length: 1.79}".into(),
        )],
    );
}

#[test]
fn vllm_block_mapping_with_underscore_key() {
    let text = vllm_recipe(
        "      speculative_config:\n        method: mtp   # MTP head\n        num_speculative_tokens: 4\n",
    );
    rewrites_then_reruns_clean(
        &text,
        &[Change::Insert(
            9,
            vec![
                "        rejection_sample_method: synthetic".into(),
                "        synthetic_acceptance_length: 2.54".into(),
            ],
        )],
    );
}

#[test]
fn vllm_already_synthetic_at_another_al_is_updated_in_place() {
    let text = vllm_recipe(
        "      speculative-config: '{\"method\":\"mtp\",\"rejection_sample_method\":\"synthetic\",\"synthetic_acceptance_length\":1.5,\"num_speculative_tokens\":3}'\n",
    );
    rewrites_then_reruns_clean(
        &text,
        &[Change::Replace(
            7,
            "      speculative-config: '{\"method\":\"mtp\",\"rejection_sample_method\":\"synthetic\",\"synthetic_acceptance_length\":2.49,\"num_speculative_tokens\":3}'".into(),
        )],
    );
}

#[test]
fn flat_vllm_config_without_backend_section() {
    let text =
        "model: x\nspeculative-config: '{\"method\":\"mtp\",\"num_speculative_tokens\":2}'\n";
    let (o, after) = run_text(text, &[("FRAMEWORK", "vllm")]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_changed(
        text,
        &after,
        &[Change::Replace(
            2,
            "speculative-config: '{\"method\":\"mtp\",\"num_speculative_tokens\":2,\"rejection_sample_method\":\"synthetic\",\"synthetic_acceptance_length\":2.27}'".into(),
        )],
    );
    // Without a framework anywhere, nothing can be decided.
    fails_untouched(text, "no framework");
}

#[test]
fn mixed_engines_in_one_recipe_fail() {
    let text = "backend:\n  type: vllm\n  vllm_config:\n    decode:\n      speculative-config: '{\"method\":\"mtp\",\"num_speculative_tokens\":2}'\n  sglang_config:\n    decode:\n      speculative-algorithm: EAGLE\n";
    fails_untouched(text, "mixed frameworks");
    fails_untouched(text, "vllm_config and sglang_config");
    let text = "backend:\n  type: sglang\n  vllm_config:\n    decode:\n      speculative-config: '{\"method\":\"mtp\",\"num_speculative_tokens\":2}'\n";
    fails_untouched(text, "backend.type is sglang");
}

#[test]
fn vllm_unparseable_json_and_bad_k_fail() {
    for body in [
        "      speculative-config: '{\"method\":\"mtp\",'\n",
        "      speculative-config: '{\"method\":\"mtp\",\"num_speculative_tokens\":true}'\n",
        "      speculative-config: '{\"method\":\"mtp\"}'\n",
        "      speculative-config: mtp\n",
    ] {
        let text = vllm_recipe(body);
        let (o, after) = run_text(&text, &[]);
        assert_eq!(o.code, 1, "{body}: {}", o.stderr);
        assert_eq!(after, text);
        assert!(o.stderr.contains("r.yaml:7: "), "{}", o.stderr);
    }
}

#[test]
fn sglang_anchor_and_merge_key_survive_and_rerun_is_a_no_op() {
    let text = "backend:\n  type: sglang\n  prefill_environment: &env\n    A: \"1\"\n  decode_environment:\n    <<: *env\n    B: \"2\"\n  sglang_config:\n    decode:\n      speculative-algorithm: EAGLE\n      speculative-num-steps: 2\n      speculative-num-draft-tokens: 3\n";
    let (o, after) = run_text(text, &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let lines = |al: &str| {
        vec![
            format!("    SGLANG_SIMULATE_ACC_LEN: \"{al}\""),
            "    SGLANG_SIMULATE_ACC_METHOD: \"match-expected\"".into(),
            "    SGLANG_SIMULATE_ACC_TOKEN_MODE: \"real-draft-token\"".into(),
        ]
    };
    assert_changed(
        text,
        &after,
        &[
            Change::Insert(3, lines("2.27")),
            Change::Insert(5, lines("2.27")),
        ],
    );
    let (o, again) = run_text(&after, &[]);
    assert_eq!((o.code, again), (0, after.clone()));
    // An existing value at another AL is replaced in place.
    let (o, again) = run_text(
        &after,
        &[("SYNTHETIC_ACCEPTANCE_LENGTH", "2.5"), ("MODEL_PREFIX", "")],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(again, after.replace("\"2.27\"", "\"2.5\""));
}

#[test]
fn sglang_draft_token_shape_is_enforced() {
    let text = "backend:\n  type: sglang\n  decode_environment:\n    A: \"1\"\n  sglang_config:\n    decode:\n      speculative-algorithm: EAGLE\n      speculative-num-steps: 3\n      speculative-num-draft-tokens: 3\n";
    fails_untouched(text, "speculative-num-steps + 1 = 4");
}

#[test]
fn sglang_role_without_environment_block_fails() {
    let text = "backend:\n  type: sglang\n  sglang_config:\n    decode:\n      speculative-algorithm: EAGLE\n      speculative-num-steps: 3\n";
    fails_untouched(text, "no decode_environment block");
}

#[test]
fn trtllm_flow_mapping_and_missing_knob_is_inserted() {
    let text = "backend:\n  type: trtllm\n  decode_environment:\n    TLLM_LOG_LEVEL: INFO\n  trtllm_config:\n    decode:\n      speculative_config: {decoding_type: MTP, max_draft_len: 2}\n";
    let (o, after) = run_text(text, &[("FRAMEWORK", "dynamo-trt")]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_changed(
        text,
        &after,
        &[Change::Insert(
            3,
            vec!["    TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS: '1.27'".into()],
        )],
    );
}

#[test]
fn atom_acceptance_length_flag() {
    let text = "backend:\n  type: atom\n  atom_config:\n    aggregated:\n      method: mtp\n      num-speculative-tokens: 3\n      max-num-seqs: 64\n";
    let (o, after) = run_text(text, &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_changed(
        text,
        &after,
        &[Change::Insert(
            6,
            vec!["      spec-decode-acceptance-length: 2.49".into()],
        )],
    );
    let with_rate = text.replace("max-num-seqs: 64", "spec-decode-acceptance-rate: 0.5");
    let (o, after) = run_text(&with_rate, &[]);
    assert_eq!((o.code, after), (1, with_rate));
    assert!(
        o.stderr.contains("spec-decode-acceptance-rate is set"),
        "{}",
        o.stderr
    );
}

#[test]
fn crlf_line_endings_and_comments_are_kept() {
    let text = "# top\r\nbackend:\r\n  type: vllm  # engine\r\n  vllm_config:\r\n    decode:\r\n      speculative-config:  # block\r\n        method: mtp\r\n        num_speculative_tokens: 2\r\n# tail\r\n";
    let (o, after) = run_text(text, &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        after,
        "# top\r\nbackend:\r\n  type: vllm  # engine\r\n  vllm_config:\r\n    decode:\r\n      speculative-config:  # block\r\n        method: mtp\r\n        num_speculative_tokens: 2\r\n        rejection_sample_method: synthetic\r\n        synthetic_acceptance_length: 2.27\r\n# tail\r\n"
    );
}

#[test]
fn aliased_role_is_injected_once() {
    let text = "backend:\n  type: vllm\n  vllm_config:\n    prefill: &role\n      speculative-config: '{\"method\":\"mtp\",\"num_speculative_tokens\":2}'\n    decode: *role\n";
    let (o, after) = run_text(text, &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_changed(
        text,
        &after,
        &[Change::Replace(
            5,
            "      speculative-config: '{\"method\":\"mtp\",\"num_speculative_tokens\":2,\"rejection_sample_method\":\"synthetic\",\"synthetic_acceptance_length\":2.27}'".into(),
        )],
    );
}

/// Issue 19 item 20: an entry that was partly synthetic before the run (a broken state that
/// `--check` reports with exit 1) is repaired by the rewrite, and the rewrite exits 0: the
/// lint's exit code must not leak into the path the launcher runs as `inject ... || exit 1`.
#[test]
fn partly_synthetic_entry_is_repaired_and_the_rewrite_exits_0() {
    // vLLM: the AL is there, the synthetic method is not.
    let text = vllm_recipe(
        "      speculative-config: '{\"method\":\"mtp\",\"num_speculative_tokens\":3,\"synthetic_acceptance_length\":1.5}'\n",
    );
    let (o, after) = run_text(&text, &[]);
    assert_eq!(o.code, 0, "stdout: {}\nstderr: {}", o.stdout, o.stderr);
    assert!(o.stdout.contains("BROKEN"), "{}", o.stdout);
    assert!(o.stdout.contains("wrote"), "{}", o.stdout);
    assert_ne!(after, text);
    let (o, again) = run_text(&after, &[]);
    assert_eq!((o.code, again), (0, after));

    // SGLang: the simulation variables in the prefill environment only, without the method.
    let text = "backend:\n  type: sglang\n  prefill_environment:\n    SGLANG_SIMULATE_ACC_LEN: \"1.5\"\n  decode_environment:\n    A: \"1\"\n  sglang_config:\n    prefill:\n      speculative-algorithm: EAGLE\n      speculative-num-steps: 2\n      speculative-num-draft-tokens: 3\n    decode:\n      speculative-algorithm: EAGLE\n      speculative-num-steps: 2\n      speculative-num-draft-tokens: 3\n";
    let (o, after) = run_text(text, &[]);
    assert_eq!(o.code, 0, "stdout: {}\nstderr: {}", o.stdout, o.stderr);
    assert!(o.stdout.contains("BROKEN"), "{}", o.stdout);
    assert!(!o.stderr.contains("ERROR"), "{}", o.stderr);
    let (o, again) = run_text(&after, &[]);
    assert_eq!((o.code, again), (0, after));
}

/// Issue 19 item 21: an anchor or a tag before a quoted scalar, anywhere in the recipe or on the
/// speculative config itself, is valid YAML; the recipe is rewritten and the anchor kept.
#[test]
fn quoted_scalar_with_an_anchor_or_tag_is_located() {
    let text = format!(
        "other: &a 'x'\nmore: !!str \"y\"\n{}",
        vllm_recipe(
            "      speculative-config: &spec '{\"method\":\"mtp\",\"num_speculative_tokens\":2}'\n"
        )
    );
    rewrites_then_reruns_clean(
        &text,
        &[Change::Replace(
            9,
            "      speculative-config: &spec '{\"method\":\"mtp\",\"num_speculative_tokens\":2,\"rejection_sample_method\":\"synthetic\",\"synthetic_acceptance_length\":2.27}'".into(),
        )],
    );
}

/// Issue 19 item 23: a `base:` + `zip_override_*` sweep file configures speculative decoding
/// under `base:`; the error says that form is not supported instead of asking whether
/// speculative decoding is configured.
#[test]
fn base_and_zip_override_form_is_refused_as_unsupported() {
    let text = "base:\n  backend:\n    type: vllm\n    vllm_config:\n      decode:\n        speculative-config: '{\"method\":\"mtp\",\"num_speculative_tokens\":2}'\nzip_override_conc:\n  benchmark:\n    concurrency: [1, 2]\n";
    for env in [&[][..], &[("FRAMEWORK", "vllm")][..]] {
        let (o, after) = run_text(text, env);
        assert_eq!((o.code, after.as_str()), (1, text), "{}", o.stderr);
        assert!(o.stderr.contains("not supported"), "{}", o.stderr);
        assert!(o.stderr.contains("base:"), "{}", o.stderr);
        assert!(o.stderr.contains("zip_override_conc"), "{}", o.stderr);
        assert!(
            !o.stderr.contains("is speculative decoding configured"),
            "{}",
            o.stderr
        );
    }
}

/// Issue 19 item 23: one explicit AL for roles with different k (prefill k=1, decode k=3) is
/// refused naming the role it does not fit and pointing at the per-role golden lookup.
#[test]
fn explicit_al_outside_one_roles_range_names_the_role() {
    let text = "backend:\n  type: vllm\n  vllm_config:\n    prefill:\n      speculative-config: '{\"method\":\"mtp\",\"num_speculative_tokens\":1}'\n    decode:\n      speculative-config: '{\"method\":\"mtp\",\"num_speculative_tokens\":3}'\n";
    let (o, after) = run_text(
        text,
        &[("SYNTHETIC_ACCEPTANCE_LENGTH", "3.0"), ("MODEL_PREFIX", "")],
    );
    assert_eq!((o.code, after.as_str()), (1, text), "{}", o.stderr);
    for want in [
        "prefill role",
        "r.yaml:5",
        "[1, 2]",
        "unset SYNTHETIC_ACCEPTANCE_LENGTH",
        "golden",
    ] {
        assert!(o.stderr.contains(want), "{want}: {}", o.stderr);
    }
}

/// Issue 19 item 22: srt-slurm loads recipes with PyYAML, where the last of two equal keys
/// wins, and InferenceX commits such files (an environment variable repeated). A duplicate
/// outside what the rewrite reads or edits is accepted with a warning naming the key and both
/// lines; one that makes the edit ambiguous is refused and the recipe left untouched.
#[test]
fn duplicate_keys_warn_unless_they_make_the_edit_ambiguous() {
    let sglang = |env: &str| {
        format!("backend:\n  type: sglang\n  decode_environment:\n{env}  sglang_config:\n    decode:\n      speculative-algorithm: EAGLE\n      speculative-num-steps: 2\n      speculative-num-draft-tokens: 3\n")
    };
    // An environment variable repeated with the same value in the block being edited.
    let text = sglang("    A: \"1\"\n    B: \"2\"\n    A: \"1\"\n");
    let (o, after) = run_text(&text, &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("warning"), "{}", o.stderr);
    assert!(o.stderr.contains("A"), "{}", o.stderr);
    assert!(
        o.stderr.contains("line 4") && o.stderr.contains(":6"),
        "{}",
        o.stderr
    );
    assert_changed(&text, &after, &[Change::Insert(3, sglang_lines("2.27"))]);
    let (o, again) = run_text(&after, &[]);
    assert_eq!((o.code, again), (0, after));

    // A duplicate elsewhere in a vLLM recipe.
    let text = format!(
        "name: a\nname: b\n{}",
        vllm_recipe(
            "      speculative-config: '{\"method\":\"mtp\",\"num_speculative_tokens\":2}'\n"
        )
    );
    let (o, _) = run_text(&text, &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("name"), "{}", o.stderr);

    // Two speculative configs in one role: which one the engine reads decides the edit.
    let text = vllm_recipe("      speculative-config: '{\"method\":\"mtp\",\"num_speculative_tokens\":2}'\n      speculative-config: '{\"method\":\"mtp\",\"num_speculative_tokens\":3}'\n");
    fails_untouched(&text, "duplicate key");
    fails_untouched(&text, "speculative-config");
    fails_untouched(&text, "ambiguous");

    // Two SIMULATE_ACC keys in one block, even when the last one is already right.
    let text = sglang("    SGLANG_SIMULATE_ACC_LEN: \"1.5\"\n    SGLANG_SIMULATE_ACC_LEN: \"2.27\"\n    SGLANG_SIMULATE_ACC_METHOD: \"match-expected\"\n    SGLANG_SIMULATE_ACC_TOKEN_MODE: \"real-draft-token\"\n");
    fails_untouched(&text, "SGLANG_SIMULATE_ACC_LEN");
    fails_untouched(&text, "ambiguous");

    // An environment block the rewrite writes into, given twice.
    let text = sglang("    A: \"1\"\n").replace(
        "  sglang_config:",
        "  decode_environment:\n    B: \"2\"\n  sglang_config:",
    );
    fails_untouched(&text, "backend.decode_environment");
    fails_untouched(&text, "ambiguous");
}

/// Issue 19 item 21, the plain-scalar side: a value the rewrite replaces that carries an anchor
/// (`SGLANG_SIMULATE_ACC_LEN: &len 1.5`, aliased elsewhere) keeps it, so the alias still resolves.
#[test]
fn anchored_plain_value_is_replaced_and_keeps_its_anchor() {
    let text = "backend:\n  type: sglang\n  decode_environment:\n    SGLANG_SIMULATE_ACC_LEN: &len 1.5\n    SGLANG_SIMULATE_ACC_METHOD: \"match-expected\"\n    SGLANG_SIMULATE_ACC_TOKEN_MODE: \"real-draft-token\"\n  sglang_config:\n    decode:\n      speculative-algorithm: EAGLE\n      speculative-num-steps: 2\n      speculative-num-draft-tokens: 3\nother: *len\n";
    rewrites_then_reruns_clean(
        text,
        &[Change::Replace(
            4,
            "    SGLANG_SIMULATE_ACC_LEN: &len \"2.27\"".into(),
        )],
    );
}
