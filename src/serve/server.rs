//! One server process group: started by `sh -c` in a group of its own with its output in a log
//! file, waited on until `/health` or `/v1/models` answers 200, watched, and stopped as a whole
//! group (SIGTERM, a grace, SIGKILL). The group is the unit because servers fork: vLLM's API
//! server starts engine cores and workers, a wrapper script backgrounds helpers, and killing only
//! the shell would leave them holding the port and the GPUs.

use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::debug::{self, step};
use crate::process::describe;
use crate::stop::{StopReason, Stopper};

/// Lines of the log a failure carries.
pub const TAIL_LINES: usize = 30;

/// How often readiness, exit and group teardown are polled.
const POLL: Duration = Duration::from_millis(100);

/// After SIGKILL, how long the group is given to vanish; members the kernel has killed but no
/// parent reaps (an init that does not reap orphans) stay as zombies, which are harmless.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// Why a server could not be started or made ready. Every message names the command and the log.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The log could not be created or `sh` could not be run.
    #[error(
        "cannot start the server command `{command}` with its log at {log}: {source} (check that \
         the artifact directory is writable and that `sh` is on PATH)"
    )]
    Spawn {
        /// The command as run.
        command: String,
        /// Its log file.
        log: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The command exited before the server answered.
    #[error(
        "the server command `{command}` exited ({status}) before it was ready; its log is {log} \
         (its last lines are in the report): fix the command, e.g. run it by hand"
    )]
    Exited {
        /// The command as run.
        command: String,
        /// Its log file.
        log: PathBuf,
        /// `exit status: 3`, `signal: 9 (SIGKILL)`.
        status: String,
        /// The log's last lines.
        tail: Vec<String>,
    },
    /// No 200 from `/health` or `/v1/models` within the ready timeout.
    #[error(
        "the server of `{command}` was not ready within {timeout_s} s (GET {url}/health and \
         {url}/v1/models: {last}); its log is {log}: raise --serve-ready-timeout if it is still \
         loading, or check that it listens at {url}"
    )]
    NotReady {
        /// The command as run.
        command: String,
        /// Its log file.
        log: PathBuf,
        /// The base URL probed.
        url: String,
        /// The timeout, seconds.
        timeout_s: f64,
        /// The last probe's answer.
        last: String,
        /// The log's last lines.
        tail: Vec<String>,
    },
    /// SIGINT or SIGTERM (or another stop) came while the server was starting; it was stopped.
    #[error("stopped ({reason}) while the server of `{command}` was starting; it was stopped too")]
    Stopped {
        /// The command as run.
        command: String,
        /// Why.
        reason: StopReason,
    },
    /// The base URL is not one the readiness probe can reach.
    #[error(
        "the server's readiness is probed over plain HTTP, and {url} is not an http://HOST:PORT \
         URL: give --url http://HOST:PORT (or use {{port}} in the template)"
    )]
    Url {
        /// The base URL.
        url: String,
    },
}

impl ServeError {
    /// The stop came from the caller (a signal), not from the server.
    pub fn is_stopped(&self) -> bool {
        matches!(self, ServeError::Stopped { .. })
    }

    /// The last lines of the server's log, when the failure is the server's.
    pub fn tail(&self) -> &[String] {
        match self {
            ServeError::Exited { tail, .. } | ServeError::NotReady { tail, .. } => tail,
            _ => &[],
        }
    }
}

/// How a stop went.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stopped {
    /// SIGTERM did not end the group within the grace: it was killed.
    pub killed: bool,
    /// Seconds from SIGTERM until the group was gone.
    pub seconds: f64,
}

/// A running server: its process group, owned. Dropped without [`Server::stop`], it kills the
/// group (the panic path); stop it properly to give it its grace.
#[derive(Debug)]
pub struct Server {
    child: Child,
    pgid: i32,
    command: String,
    log: PathBuf,
    exit: Option<ExitStatus>,
    stopped: Option<Stopped>,
}

impl Server {
    /// Runs `command` with `sh -c` in its own process group, stdout and stderr appended to `log`
    /// (after a line naming the command), and waits until `GET {base_url}/health` or
    /// `/v1/models` answers 200. Fails early when the command exits, at `ready_timeout`, or
    /// when `stop` fires; in every failure the group is stopped (with `stop_grace`) first.
    pub async fn start(
        command: &str,
        log: &Path,
        base_url: &str,
        ready_timeout: Duration,
        stop_grace: Duration,
        stop: &Stopper,
    ) -> Result<Server, ServeError> {
        let target = Target::parse(base_url).ok_or_else(|| ServeError::Url {
            url: base_url.to_string(),
        })?;
        let mut server = Server::spawn(command, log).map_err(|source| ServeError::Spawn {
            command: command.to_string(),
            log: log.to_path_buf(),
            source,
        })?;
        let t0 = Instant::now();
        step!(
            "server start: pid {} (group), sh -c {command:?}, log {}",
            server.pgid,
            log.display()
        );
        let until = t0 + ready_timeout;
        loop {
            if let Some(status) = server.exited() {
                step!("server exited while starting: {}", describe(status));
                server.stop(stop_grace).await;
                return Err(ServeError::Exited {
                    command: command.to_string(),
                    log: log.to_path_buf(),
                    status: describe(status),
                    tail: log_tail(log, TAIL_LINES),
                });
            }
            if let Some(reason) = stop.reason() {
                server.stop(stop_grace).await;
                return Err(ServeError::Stopped {
                    command: command.to_string(),
                    reason,
                });
            }
            let last = match target.ready(stop).await {
                Ok(()) => {
                    step!("server ready: {base_url} after {}", debug::ms(t0.elapsed()));
                    return Ok(server);
                }
                Err(why) => why,
            };
            step!("server not ready yet: {last}");
            if Instant::now() >= until {
                server.stop(stop_grace).await;
                return Err(ServeError::NotReady {
                    command: command.to_string(),
                    log: log.to_path_buf(),
                    url: base_url.trim_end_matches('/').to_string(),
                    timeout_s: ready_timeout.as_secs_f64(),
                    last,
                    tail: log_tail(log, TAIL_LINES),
                });
            }
            tokio::select! {
                _ = tokio::time::sleep(POLL * 2) => {}
                _ = stop.token().cancelled() => {}
            }
        }
    }

    /// Starts the group without waiting for readiness.
    fn spawn(command: &str, log: &Path) -> std::io::Result<Server> {
        if let Some(dir) = log.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let mut out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?;
        use std::io::Write;
        writeln!(
            out,
            "=== specperf {}: sh -c {command:?} ===",
            crate::timefmt::rfc3339_now()
        )?;
        let errs = out.try_clone()?;
        let child = spawn_in_group(command, out, errs)?;
        let pgid = child.id() as i32;
        Ok(Server {
            child,
            pgid,
            command: command.to_string(),
            log: log.to_path_buf(),
            exit: None,
            stopped: None,
        })
    }

    /// The command as run.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// The log file.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// The process group id (the shell's pid).
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// The shell's exit status, once it has exited (the server died, or was stopped).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().ok().flatten();
        }
        self.exit
    }

    /// Stops the whole group: SIGTERM, up to `grace` for every member to exit, then SIGKILL.
    /// The shell is reaped. Idempotent: a second call returns the first's outcome.
    pub async fn stop(&mut self, grace: Duration) -> Stopped {
        if let Some(s) = self.stopped {
            return s;
        }
        let t0 = Instant::now();
        signal_group(self.pgid, libc::SIGTERM);
        let mut killed = false;
        let mut until = t0 + grace;
        loop {
            self.exited();
            if self.exit.is_some() && !group_alive(self.pgid) {
                break;
            }
            if Instant::now() >= until {
                if killed {
                    break;
                }
                signal_group(self.pgid, libc::SIGKILL);
                killed = true;
                until = Instant::now() + KILL_WAIT;
            }
            tokio::time::sleep(POLL / 2).await;
        }
        let s = Stopped {
            killed,
            seconds: t0.elapsed().as_secs_f64(),
        };
        step!(
            "server stop: group {} ended in {}{}",
            self.pgid,
            debug::ms(t0.elapsed()),
            if killed {
                " (SIGKILL after the grace)"
            } else {
                " (SIGTERM)"
            }
        );
        self.stopped = Some(s);
        s
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.stopped.is_none() {
            // A panic or an early return: nothing may outlive us holding the port and the GPUs.
            signal_group(self.pgid, libc::SIGKILL);
            let _ = self.child.try_wait();
        }
    }
}

/// `sh -c command` as the leader of a new process group, stdin closed.
fn spawn_in_group(command: &str, out: std::fs::File, err: std::fs::File) -> std::io::Result<Child> {
    let mut c = std::process::Command::new("sh");
    c.arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        c.process_group(0);
    }
    c.spawn()
}

/// Sends `sig` to every process of group `pgid` (a group already gone is not an error).
#[allow(unsafe_code)]
fn signal_group(pgid: i32, sig: i32) {
    if pgid <= 1 {
        return;
    }
    // SAFETY: killpg only sends a signal; the group is one this process created.
    unsafe {
        libc::killpg(pgid, sig);
    }
}

/// A member of group `pgid` is still running (zombies do not count: they hold nothing).
fn group_alive(pgid: i32) -> bool {
    #[cfg(target_os = "linux")]
    if let Ok(rd) = std::fs::read_dir("/proc") {
        return rd.flatten().any(|e| {
            let name = e.file_name();
            let Some(_) = name
                .to_str()
                .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
            else {
                return false;
            };
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
                return false;
            };
            // `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses.
            let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                return false;
            };
            let f: Vec<&str> = after.split_whitespace().collect();
            f.len() > 3 && f[0] != "Z" && f[0] != "X" && f[2] == pgid.to_string()
        });
    }
    group_signalable(pgid)
}

/// `killpg(pgid, 0)` succeeds: some member (zombies included) exists.
#[allow(unsafe_code)]
fn group_signalable(pgid: i32) -> bool {
    // SAFETY: signal 0 only checks that the group exists.
    unsafe { libc::killpg(pgid, 0) == 0 }
}

/// The last `n` lines of the file at `path` (read from its last 64 KiB; empty when unreadable).
pub fn log_tail(path: &Path, n: usize) -> Vec<String> {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let len = f.metadata().map_or(0, |m| m.len());
    let from = len.saturating_sub(64 << 10);
    if f.seek(SeekFrom::Start(from)).is_err() {
        return Vec::new();
    }
    let mut bytes = Vec::new();
    if f.read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<&str> = text.lines().collect();
    if from > 0 && !lines.is_empty() {
        // The first line is probably cut.
        lines.remove(0);
    }
    let start = lines.len().saturating_sub(n);
    lines[start..].iter().map(|l| l.to_string()).collect()
}

/// Where the readiness probe goes: `host:port` and the base path.
struct Target {
    authority: String,
    prefix: String,
}

impl Target {
    fn parse(base: &str) -> Option<Target> {
        let rest = base.strip_prefix("http://")?;
        let (authority, prefix) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        if authority.is_empty() || !authority.contains(':') {
            return None;
        }
        Some(Target {
            authority: authority.to_string(),
            prefix: prefix.to_string(),
        })
    }

    /// `/health` or `/v1/models` answers 200; else what they answered.
    async fn ready(&self, stop: &Stopper) -> Result<(), String> {
        let mut said = Vec::new();
        for path in ["/health", "/v1/models"] {
            let got = tokio::select! {
                r = tokio::time::timeout(Duration::from_secs(5), self.status(path)) => r,
                _ = stop.token().cancelled() => return Err("stopped".into()),
            };
            match got {
                Ok(Ok(200)) => return Ok(()),
                Ok(Ok(code)) => said.push(format!("{path} HTTP {code}")),
                Ok(Err(e)) => said.push(format!("{path} {e}")),
                Err(_) => said.push(format!("{path} no answer within 5 s")),
            }
        }
        Err(said.join(", "))
    }

    /// One `GET`, HTTP/1.1, `Connection: close`: the status code.
    async fn status(&self, path: &str) -> std::io::Result<u16> {
        let mut s = tokio::net::TcpStream::connect(&self.authority).await?;
        let req = format!(
            "GET {}{path} HTTP/1.1\r\nHost: {}\r\nAccept: */*\r\nConnection: close\r\n\r\n",
            self.prefix, self.authority
        );
        s.write_all(req.as_bytes()).await?;
        let mut head = Vec::new();
        let mut buf = [0u8; 512];
        while !head.contains(&b'\n') && head.len() < 4096 {
            let n = s.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        let line = String::from_utf8_lossy(&head);
        line.split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .filter(|_| line.starts_with("HTTP/"))
            .ok_or_else(|| std::io::Error::other("answer is not HTTP"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_is_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log");
        let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&p, text).unwrap();
        let t = log_tail(&p, 3);
        assert_eq!(t, ["line 98", "line 99", "line 100"]);
        assert!(log_tail(&dir.path().join("none"), 3).is_empty());
    }

    #[test]
    fn only_plain_http_host_port_is_probed() {
        let t = Target::parse("http://127.0.0.1:8000/").unwrap();
        assert_eq!(
            (t.authority.as_str(), t.prefix.as_str()),
            ("127.0.0.1:8000", "")
        );
        let t = Target::parse("http://localhost:9/base/").unwrap();
        assert_eq!(t.prefix, "/base");
        assert!(Target::parse("https://h:1").is_none());
        assert!(Target::parse("http://h").is_none());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_command_that_exits_fails_with_its_status_and_log_tail() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("cell/server.log");
        let e = Server::start(
            "echo boom >&2; exit 3",
            &log,
            "http://127.0.0.1:9",
            Duration::from_secs(20),
            Duration::from_secs(1),
            &Stopper::new(),
        )
        .await
        .unwrap_err();
        assert!(matches!(&e, ServeError::Exited { status, .. } if status == "exit status 3"));
        assert_eq!(e.tail().last().map(String::as_str), Some("boom"));
        assert!(e.to_string().contains("echo boom"), "{e}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ready_on_a_200_and_not_ready_at_the_timeout_with_the_log_tail() {
        let sim = crate::sim::Simulator::spawn(crate::sim::SimConfig {
            port: 0,
            host: [127, 0, 0, 1].into(),
            ..Default::default()
        })
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        let mut s = Server::start(
            "echo up; exec sleep 1000",
            &log,
            &sim.url(),
            Duration::from_secs(20),
            Duration::from_secs(5),
            &Stopper::new(),
        )
        .await
        .unwrap();
        assert_eq!(s.exited(), None);
        let pgid = s.pgid();
        assert!(group_alive(pgid));
        let st = s.stop(Duration::from_secs(5)).await;
        assert!(!st.killed && !group_alive(pgid), "{st:?}");
        assert!(s.exited().is_some());

        // Nothing listens on port 9: not ready at the timeout, and the group is gone.
        let t0 = Instant::now();
        let e = Server::start(
            "echo loading weights; exec sleep 1000",
            &log,
            "http://127.0.0.1:9",
            Duration::from_millis(600),
            Duration::from_secs(5),
            &Stopper::new(),
        )
        .await
        .unwrap_err();
        assert!(t0.elapsed() < Duration::from_secs(10));
        let msg = e.to_string();
        assert!(
            matches!(e, ServeError::NotReady { .. }) && msg.contains("--serve-ready-timeout"),
            "{msg}"
        );
        assert_eq!(e.tail().last().map(String::as_str), Some("loading weights"));
        assert!(
            log_tail(&log, 100)
                .iter()
                .filter(|l| l.starts_with("=== specperf"))
                .count()
                == 2,
            "each start appends a header line to the log"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropping_a_server_without_stop_kills_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let s = Server::spawn("sleep 1000 & exec sleep 1001", &dir.path().join("log")).unwrap();
        let pgid = s.pgid();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(group_alive(pgid));
        drop(s);
        let until = Instant::now() + Duration::from_secs(5);
        while group_alive(pgid) {
            assert!(Instant::now() < until, "the group outlived its Server");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stop_ends_the_whole_group_and_a_stopper_ends_the_wait() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        let stop = Stopper::new();
        let s2 = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            s2.stop(StopReason::Interrupted);
        });
        let t0 = Instant::now();
        // Never ready (nothing listens on port 9); a background child in the group.
        let e = Server::start(
            "sleep 1000 & exec sleep 1001",
            &log,
            "http://127.0.0.1:9",
            Duration::from_secs(60),
            Duration::from_secs(5),
            &stop,
        )
        .await
        .unwrap_err();
        assert!(e.is_stopped(), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(10));

        // A group that ignores SIGTERM is killed after the grace.
        let mut s = Server::spawn("trap '' TERM; sleep 1000 & sleep 1001; wait", &log).unwrap();
        let pgid = s.pgid();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(group_alive(pgid));
        let st = s.stop(Duration::from_millis(300)).await;
        assert!(st.killed, "{st:?}");
        assert!(!group_alive(pgid));
        assert_eq!(s.stop(Duration::ZERO).await, st, "idempotent");
    }
}
