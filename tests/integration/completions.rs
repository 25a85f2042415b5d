//! `specperf completions SHELL` and `specperf man DIR`: the shell scripts and man pages clap's
//! ecosystem generates from the one flag table, checked the way a shell and `man` use them.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_specperf");

#[test]
fn bash_completes_subcommands_and_flags_from_the_generated_script() {
    let script = Command::new(BIN)
        .args(["completions", "bash"])
        .output()
        .unwrap();
    assert!(script.status.success());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("specperf.bash");
    std::fs::write(&path, &script.stdout).unwrap();
    // What bash does on TAB: the completion function with the words typed so far.
    let complete = |words: &str| {
        let cword = words.split(' ').count() - 1;
        let probe = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD={cword}; \
             _specperf specperf \"${{COMP_WORDS[$COMP_CWORD]}}\" \
             \"${{COMP_WORDS[$((COMP_CWORD-1))]}}\"; echo \"${{COMPREPLY[@]}}\"",
            path.display()
        );
        let o = Command::new("bash").args(["-c", &probe]).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).trim().to_owned()
    };
    let subs = complete("specperf re");
    assert!(
        subs.split(' ').any(|w| w == "replay") && subs.split(' ').any(|w| w == "render"),
        "{subs}"
    );
    let flags = complete("specperf replay --request-t");
    assert!(flags.contains("--request-timeout-seconds"), "{flags}");
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let o = Command::new(BIN)
            .args(["completions", shell])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success() && text.contains("replay"), "{shell}");
    }
    let bad = Command::new(BIN)
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("possible values"));
}

#[test]
fn man_writes_one_page_per_subcommand_that_man_renders() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man1");
    let o = Command::new(BIN).arg("man").arg(&out).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let listed: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    for page in [
        "specperf",
        "specperf-replay",
        "specperf-profile",
        "specperf-gate",
    ] {
        let p = out.join(format!("{page}.1"));
        assert!(listed.contains(&p.display().to_string()), "{listed:?}");
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(
            text.contains(&format!(".TH {} 1", page.to_uppercase())),
            "{page}"
        );
    }
    let replay = std::fs::read_to_string(out.join("specperf-replay.1")).unwrap();
    assert!(replay.contains("\\-\\-request\\-timeout\\-seconds"));
    // Rendered as a reader sees it, where man is installed.
    match Command::new("man")
        .arg("-l")
        .arg(out.join("specperf-replay.1"))
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "100")
        .output()
    {
        Ok(r) if r.status.success() => {
            let text = String::from_utf8_lossy(&r.stdout);
            assert!(
                text.contains("NAME")
                    && text.contains("SYNOPSIS")
                    && text.contains("--request-timeout-seconds"),
                "{text}"
            );
        }
        _ => eprintln!("skipped the rendering check: `man -l` is not available here"),
    }
}
