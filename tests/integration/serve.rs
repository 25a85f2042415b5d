//! Sweeps that own the server (`replay --serve-cmd`), with the specperf binary's own simulator as
//! the served command: one server per cell with the cell's settings, a server that fails to
//! start, never becomes ready or dies mid-cell, teardown of the whole process group (after a
//! normal sweep, and on SIGTERM and SIGINT of specperf), `--resume`, the GPU memory wait with a
//! stand-in `nvidia-smi`, and the flags refused together.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{read_json, scaled, schema_errors, wait_exit};

const BIN: &str = env!("CARGO_BIN_EXE_specperf");

/// Flags every replay here shares: quiet, no settle wait, a small fast load.
const QUIET: [&str; 8] = [
    "--progress-interval",
    "0",
    "--metrics-settle-seconds",
    "0",
    "--ui",
    "none",
    "--osl",
    "32",
];

/// `specperf sim` on `{port}` with `{k}`, and `extra` flags, as a template.
fn sim_cmd(extra: &str) -> String {
    format!("{BIN} sim --port {{port}} --k {{k}} --ttft-ms 1 --itl-ms 1 {extra}")
}

/// A `specperf replay` process with stdout and stderr in files of `dir` (no pipe to fill).
struct Run {
    child: Child,
    out: PathBuf,
    err: PathBuf,
}

impl Run {
    fn spawn(dir: &Path, args: &[&str], env_path: Option<&str>) -> Run {
        let n = std::fs::read_dir(dir).map_or(0, |d| d.count());
        let out = dir.join(format!("stdout.{n}"));
        let err = dir.join(format!("stderr.{n}"));
        let mut c = Command::new(BIN);
        c.arg("replay")
            .args(QUIET)
            .args(args)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap());
        if let Some(p) = env_path {
            c.env("PATH", p);
        }
        Run {
            child: c.spawn().unwrap(),
            out,
            err,
        }
    }

    /// Waits (bounded) for the exit: code, stdout, stderr.
    fn finish(mut self) -> (Option<i32>, String, String) {
        let st = wait_exit(&mut self.child, scaled(Duration::from_secs(90)));
        self.read(st.code())
    }

    fn read(&self, code: Option<i32>) -> (Option<i32>, String, String) {
        (
            code,
            std::fs::read_to_string(&self.out).unwrap(),
            std::fs::read_to_string(&self.err).unwrap(),
        )
    }
}

/// Runs `specperf replay` to its end.
fn replay(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    Run::spawn(dir, args, None).finish()
}

/// PIDs of live processes (zombies have no command line) whose command line holds `marker`.
fn alive_with(marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&cmd).contains(marker) {
            out.push(pid);
        }
    }
    out
}

/// Waits up to 3 s for every process holding `marker` to be gone; returns those left.
fn gone(marker: &str) -> Vec<u32> {
    let until = Instant::now() + scaled(Duration::from_secs(3));
    loop {
        let left = alive_with(marker);
        if left.is_empty() || Instant::now() > until {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `<dir>/cells.json`, checked against `schemas/cells.v1.json`.
fn cells_json(dir: &Path) -> Value {
    let v = read_json(&dir.join("cells.json"));
    let errors = schema_errors("cells.v1.json", &v);
    assert!(errors.is_empty(), "{errors:?}");
    v
}

fn cell<'a>(idx: &'a Value, name: &str) -> &'a Value {
    idx["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no cell {name} in {idx:#}"))
}

#[test]
fn each_cell_restarts_the_server_with_its_k_and_nothing_outlives_the_sweep() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cells");
    // The seed is a marker: every process of the servers' groups carries it.
    let marker = "771001";
    let template = format!(
        "sleep {marker} & exec {}",
        sim_cmd(&format!("--seed {marker}"))
    );
    let (code, stdout, stderr) = replay(
        tmp.path(),
        &[
            "--serve-cmd",
            &template,
            "--serve-param",
            "k=1,3",
            "--request-count",
            "8",
            "--artifact-dir",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        gone(marker).is_empty(),
        "server processes left: {:?}",
        alive_with(marker)
    );
    let idx = cells_json(&out);
    assert_eq!(idx["schema"], "specperf.cells.v1");
    assert_eq!(idx["status"], "complete");
    assert_eq!(idx["serve_cmd"], template.as_str());
    let names: Vec<&str> = idx["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["k_1", "k_3"]);
    let mut ports = Vec::new();
    for k in [1u64, 3] {
        let c = cell(&idx, &format!("k_{k}"));
        assert_eq!(c["status"], "done", "{c:#}");
        assert!(c["ready_at"].is_string() && c["stopped_at"].is_string());
        let cmd = c["command"].as_str().unwrap();
        assert!(cmd.contains(&format!("--k {k} ")), "{cmd}");
        ports.push(c["url"].as_str().unwrap().to_string());
        let dir = out.join(format!("k_{k}"));
        let log = std::fs::read_to_string(dir.join("server.log")).unwrap();
        assert!(log.contains("specperf sim listening on"), "{log}");
        // The run measured the cell's server: its k, and an acceptance length it allows.
        let acc = &read_json(&dir.join("summary.json"))["acceptance"]["acceptance"];
        assert_eq!(acc["num_speculative_tokens"], k, "{acc:#}");
        let al = acc["acceptance_length"].as_f64().unwrap();
        assert!(
            al > 1.0 && al <= (k + 1) as f64,
            "k {k}: acceptance length {al}"
        );
        if k == 3 {
            assert!(al > 2.0, "k 3 at p 0.7 accepts more than one token: {al}");
        }
    }
    assert!(stderr.contains("cell k_1: server ready at"), "{stderr}");
    assert!(stderr.contains("cell k_3: server stopped"), "{stderr}");
    assert!(
        stdout.contains("k_1   done") && stdout.contains("k_3   done"),
        "{stdout}"
    );
}

#[test]
fn a_server_that_fails_to_start_or_is_never_ready_fails_its_cell_and_the_sweep_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cells");
    let template = format!(
        "if [ {{k}} = 1 ]; then echo boom >&2; exit 3; fi; exec {}",
        sim_cmd("")
    );
    let (code, stdout, stderr) = replay(
        tmp.path(),
        &[
            "--serve-cmd",
            &template,
            "--serve-param",
            "k=1,2",
            "--request-count",
            "4",
            "--artifact-dir",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(1), "a failed cell exits 1: {stderr}");
    let idx = cells_json(&out);
    assert_eq!(idx["status"], "partial");
    let failed = cell(&idx, "k_1");
    assert_eq!(failed["status"], "failed");
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("exited (exit status 3) before it was ready"),
        "{failed:#}"
    );
    assert_eq!(
        failed["log_tail"].as_array().unwrap().last().unwrap(),
        "boom"
    );
    assert!(
        stderr.contains("  | boom"),
        "the console shows the tail: {stderr}"
    );
    assert_eq!(cell(&idx, "k_2")["status"], "done");
    assert!(out.join("k_2/summary.json").is_file());
    assert!(stdout.contains("k_1   failed"), "{stdout}");

    // Never ready (it listens nowhere): failed at --serve-ready-timeout, its group gone.
    let marker = "771002";
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let t0 = Instant::now();
    let (code, _, stderr) = replay(
        tmp.path(),
        &[
            "--serve-cmd",
            &format!("echo loading {{k}}; exec sleep {marker}"),
            "--serve-param",
            "k=7",
            "--url",
            &url,
            "--serve-ready-timeout",
            "1",
            "--artifact-dir",
            tmp.path().join("never").to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(t0.elapsed() < scaled(Duration::from_secs(20)));
    let c = cell(&cells_json(&tmp.path().join("never")), "k_7").clone();
    assert_eq!(c["status"], "failed");
    assert!(
        c["error"]
            .as_str()
            .unwrap()
            .contains("not ready within 1 s"),
        "{c:#}"
    );
    assert_eq!(
        c["log_tail"].as_array().unwrap().last().unwrap(),
        "loading 7"
    );
    assert!(
        gone(marker).is_empty(),
        "the never-ready server was left running"
    );
}

#[test]
fn a_server_that_dies_mid_cell_fails_the_cell() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cells");
    // Killed about a second into a run that would take half a minute.
    let template = format!(
        "{BIN} sim --port {{port}} --k {{k}} --ttft-ms 1 --itl-ms 20 & sleep 1; kill $!; wait"
    );
    let (code, _, stderr) = replay(
        tmp.path(),
        &[
            "--serve-cmd",
            &template,
            "--serve-param",
            "k=2",
            "--request-count",
            "400",
            "--concurrency",
            "2",
            "--artifact-dir",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(1), "{stderr}");
    let c = cell(&cells_json(&out), "k_2").clone();
    assert_eq!(c["status"], "failed", "{c:#}");
    assert!(
        c["error"]
            .as_str()
            .unwrap()
            .contains("the server exited during the cell"),
        "{c:#}"
    );
    assert!(c["ready_at"].is_string(), "it was ready first: {c:#}");
    assert!(stderr.contains("error: cell k_2 failed"), "{stderr}");
}

/// Sends `sig` to specperf while its first cell's run is under way; it must exit with the
/// signal's code, with the server group (the simulator and a child it spawned) gone.
fn signal_mid_cell(sig: &str, marker: &str, expect: i32) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cells");
    let template = format!(
        "sleep {marker} & exec {BIN} sim --port {{port}} --k {{k}} --ttft-ms 1 --itl-ms 20 --seed {marker}"
    );
    let mut run = Run::spawn(
        tmp.path(),
        &[
            "--serve-cmd",
            &template,
            "--serve-param",
            "k=1,2",
            "--request-count",
            "400",
            "--concurrency",
            "2",
            "--artifact-dir",
            out.to_str().unwrap(),
        ],
        None,
    );
    let until = Instant::now() + scaled(Duration::from_secs(30));
    while !out.join("k_1/records.jsonl").is_file() {
        assert!(Instant::now() < until, "the first cell's run never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        alive_with(marker).len() >= 2,
        "the server and its child run during the cell"
    );
    let st = Command::new("kill")
        .args([sig, &run.child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let st = wait_exit(&mut run.child, scaled(Duration::from_secs(60)));
    let (code, _, stderr) = run.read(st.code());
    assert_eq!(code, Some(expect), "{stderr}");
    assert!(
        alive_with(marker).is_empty(),
        "the server group outlived specperf: {:?}",
        alive_with(marker)
    );
    let idx = cells_json(&out);
    assert_eq!(idx["status"], "stopped");
    assert_eq!(cell(&idx, "k_1")["status"], "stopped");
    assert_eq!(
        idx["cells"].as_array().unwrap().len(),
        1,
        "k_2 never started"
    );
}

#[test]
fn sigterm_mid_cell_stops_the_whole_server_group_before_exiting() {
    signal_mid_cell("-TERM", "771003", 143);
}

#[test]
fn sigint_mid_cell_stops_the_whole_server_group_before_exiting() {
    signal_mid_cell("-INT", "771004", 130);
}

#[test]
fn resume_skips_done_cells_and_runs_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cells");
    let flag = tmp.path().join("fixed");
    // k=3 fails until the flag file exists.
    let template = format!(
        "if [ {{k}} = 3 ] && [ ! -e {} ]; then echo not yet >&2; exit 3; fi; exec {}",
        flag.display(),
        sim_cmd("")
    );
    let args = |resume: bool| {
        let mut a = vec![
            "--serve-cmd".to_string(),
            template.clone(),
            "--serve-param".into(),
            "k=1,3".into(),
            "--request-count".into(),
            "4".into(),
            "--artifact-dir".into(),
            out.display().to_string(),
        ];
        if resume {
            a.push("--resume".into());
        }
        a
    };
    let argv = args(false);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let (code, _, stderr) = replay(tmp.path(), &argv);
    assert_eq!(code, Some(1), "{stderr}");
    let first = std::fs::metadata(out.join("k_1/summary.json"))
        .unwrap()
        .modified()
        .unwrap();
    std::fs::write(&flag, "").unwrap();
    let argv = args(true);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let (code, _, stderr) = replay(tmp.path(), &argv);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("cell k_1: finished in the earlier sweep, kept (--resume)"),
        "{stderr}"
    );
    let idx = cells_json(&out);
    assert_eq!(idx["status"], "complete");
    assert_eq!(cell(&idx, "k_3")["status"], "done");
    let again = std::fs::metadata(out.join("k_1/summary.json"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(first, again, "the done cell was not run again");
    assert!(out.join("k_3/summary.json").is_file());
}

#[test]
fn with_nvidia_smi_the_next_server_waits_for_gpu_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let bin = d.join("bin");
    std::fs::create_dir(&bin).unwrap();
    // A stand-in nvidia-smi: 40 GB used while the server whose pid is in `pid` runs, and for
    // the first two reads after it is gone (the driver releasing memory), then 500 MiB.
    let smi = bin.join("nvidia-smi");
    std::fs::write(
        &smi,
        format!(
            "#!/bin/sh\nD={d}\necho x >> $D/calls\n\
             if [ -f $D/pid ] && kill -0 \"$(cat $D/pid)\" 2>/dev/null; then echo '0, 40000'; exit 0; fi\n\
             if [ -f $D/pid ]; then echo y >> $D/dead; fi\n\
             if [ -f $D/pid ] && [ \"$(wc -l < $D/dead)\" -le 2 ]; then echo '0, 40000'; else echo '0, 500'; fi\n",
            d = d.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let out = d.join("cells");
    let template = format!(
        "rm -f {d}/dead; echo $$ > {d}/pid; exec {}",
        sim_cmd(""),
        d = d.display()
    );
    let (code, _, stderr) = Run::spawn(
        d,
        &[
            "--serve-cmd",
            &template,
            "--serve-param",
            "k=1,3",
            "--request-count",
            "4",
            "--artifact-dir",
            out.to_str().unwrap(),
        ],
        Some(&path),
    )
    .finish();
    assert_eq!(code, Some(0), "{stderr}");
    let idx = cells_json(&out);
    assert!(cell(&idx, "k_1").get("gpu_wait_before").is_none());
    let w = &cell(&idx, "k_3")["gpu_wait_before"];
    assert_eq!(w["released"], true, "{w:#}");
    assert_eq!(
        w["polls"], 3,
        "two reads still held, the third released: {w:#}"
    );
    assert_eq!(w["baseline_mib"]["0"], 500);
    assert!(stderr.contains("GPU memory released after"), "{stderr}");

    // Memory that never comes back: a warning at --serve-gpu-release-timeout, then the next
    // server starts anyway.
    std::fs::write(
        &smi,
        format!(
            "#!/bin/sh\necho x >> {d}/calls2\n\
             if [ \"$(wc -l < {d}/calls2)\" -le 1 ]; then echo '0, 500'; else echo '0, 40000'; fi\n",
            d = d.display()
        ),
    )
    .unwrap();
    let out = d.join("held");
    let t0 = Instant::now();
    let (code, _, stderr) = Run::spawn(
        d,
        &[
            "--serve-cmd",
            &sim_cmd(""),
            "--serve-param",
            "k=1,3",
            "--request-count",
            "4",
            "--serve-gpu-release-timeout",
            "1",
            "--artifact-dir",
            out.to_str().unwrap(),
        ],
        Some(&path),
    )
    .finish();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(t0.elapsed() < scaled(Duration::from_secs(30)));
    assert!(
        stderr.contains("GPU memory still held after") && stderr.contains("GPU 0 40000 MiB"),
        "{stderr}"
    );
    let idx = cells_json(&out);
    assert_eq!(cell(&idx, "k_3")["gpu_wait_before"]["released"], false);
    assert_eq!(cell(&idx, "k_3")["status"], "done");
}

#[test]
fn each_cell_runs_the_whole_sweep_of_points_the_other_flags_ask_for() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cells");
    let (code, _, stderr) = replay(
        tmp.path(),
        &[
            "--serve-cmd",
            &sim_cmd(""),
            "--serve-param",
            "k=1,2",
            "--concurrency",
            "1,2",
            "--request-count",
            "4",
            "--drain-poll-interval-seconds",
            "0.05",
            "--drain-idle-polls",
            "2",
            "--artifact-dir",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let idx = cells_json(&out);
    assert_eq!(idx["runs"], "sweep");
    for k in [1, 2] {
        assert_eq!(cell(&idx, &format!("k_{k}"))["status"], "done");
        let sweep = read_json(&out.join(format!("k_{k}/sweep.json")));
        let points: Vec<&str> = sweep["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(points, ["concurrency_1", "concurrency_2"], "k_{k}");
        let acc = &read_json(&out.join(format!("k_{k}/concurrency_2/summary.json")))["acceptance"]
            ["acceptance"];
        assert_eq!(acc["num_speculative_tokens"], k);
    }
}

#[test]
fn serve_flags_that_do_not_fit_are_usage_errors_naming_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("x");
    let dir = dir.to_str().unwrap();
    for (args, says) in [
        (
            vec!["--serve-param", "k=1,2", "--artifact-dir", dir],
            "add --serve-cmd",
        ),
        (
            vec![
                "--serve-cmd",
                "serve --port {port}",
                "--url",
                "http://127.0.0.1:8000",
            ],
            "Drop --url",
        ),
        (vec!["--serve-cmd", "serve --port 8000"], "give --url"),
        (
            vec![
                "--serve-cmd",
                "serve --port {port} --k {kk}",
                "--serve-param",
                "k=1",
            ],
            "{kk}, which is neither a --serve-param nor {port}",
        ),
        (
            vec!["--serve-cmd", "serve --port {port}", "--serve-param", "k=1"],
            "--serve-param k is not used",
        ),
        (vec!["--serve-param", "k"], "NAME=v1,v2"),
        (
            vec![
                "--serve-cmd",
                "serve --port {port}",
                "--resume",
                "--artifact-dir",
                dir,
            ],
            "holds no cells.json",
        ),
    ] {
        let (code, _, stderr) = replay(tmp.path(), &args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
