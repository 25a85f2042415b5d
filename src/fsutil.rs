//! File-system chores shared by every writer of results: one atomic write with the strongest
//! guarantees any caller needs, so a report, a gate result and a rewritten recipe are all safe
//! against a kill at any instant.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Creates `dir` (and its parents) and checks a file can be created in it, so a run finds an
/// unusable output location before its first request, not after hours of load.
pub(crate) fn ensure_writable_dir(dir: &Path) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    let probe = dir.join(format!(".specperf-write-check.{}", std::process::id()));
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&probe)?;
    fs::remove_file(&probe)
}

/// Writes `bytes` to `target` through a temporary file in the same directory, synced to disk,
/// then renamed over the target: a reader (or a run killed mid-write) sees the old file or the
/// new one, never part of one. An existing target keeps its permissions; the temporary file is
/// removed on any error. The temporary name is unique per process and instant, so two writers
/// never share one.
pub(crate) fn write_atomic(target: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "specperf".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = dir.join(format!(".{name}.{}.{nanos}.tmp", std::process::id()));
    let result = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        if let Ok(meta) = fs::metadata(target) {
            fs::set_permissions(&tmp, meta.permissions())?;
        }
        fs::rename(&tmp, target)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// `s` as one path component: at most 100 characters, every character but ASCII letters,
/// digits and `-_.` written as `_` (a model name in a default artifact directory).
pub(crate) fn safe_name(s: &str) -> String {
    s.chars()
        .take(100)
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A directory that holds an earlier run (its `records.jsonl` or `summary.json`) is renamed to
/// `<dir>.prev-<unix seconds>` so the new run starts clean and no stale file (raw JSON,
/// `server_metrics/`, plots) sits beside the new ones; returns the sentence saying so. The
/// current directory (or a root) is never renamed: that is an error saying why.
pub(crate) fn move_earlier_run_aside(dir: &Path) -> std::io::Result<Option<String>> {
    let earlier = ["records.jsonl", "summary.json"]
        .iter()
        .any(|f| dir.join(f).exists());
    if !earlier {
        return Ok(None);
    }
    let refuse = |reason: String| std::io::Error::other(reason);
    let real = dir
        .canonicalize()
        .map_err(|e| refuse(format!("cannot resolve it: {e}")))?;
    let cwd = std::env::current_dir()
        .ok()
        .and_then(|c| c.canonicalize().ok());
    let (Some(parent), Some(name)) = (real.parent(), real.file_name()) else {
        return Err(refuse(
            "it holds an earlier run; pass a new directory".into(),
        ));
    };
    if cwd.as_deref() == Some(real.as_path()) {
        return Err(refuse(
            "it is the current directory and holds an earlier run (records.jsonl or \
             summary.json); pass a new --artifact-dir"
                .into(),
        ));
    }
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let base = format!("{}.prev-{stamp}", name.to_string_lossy());
    let mut aside = parent.join(&base);
    let mut n = 1;
    while aside.exists() {
        aside = parent.join(format!("{base}-{n}"));
        n += 1;
    }
    fs::rename(&real, &aside)
        .map_err(|e| refuse(format!("cannot move the earlier run aside: {e}")))?;
    Ok(Some(format!(
        "the artifact directory {} held an earlier run; it was moved to {}",
        dir.display(),
        aside.display()
    )))
}

/// Calls `each` with every line of `path` (1-based number, text without its line end), one at
/// a time through one reused buffer: an hour's `records.jsonl` or `profile_export.jsonl` is read
/// in constant memory, never held whole. Stops at the first error `each` returns; a read error
/// (a line that is not UTF-8 among them) goes through `io`.
pub(crate) fn for_each_line<E>(
    path: &Path,
    io: impl Fn(std::io::Error) -> E,
    mut each: impl FnMut(usize, &str) -> Result<(), E>,
) -> Result<(), E> {
    use std::io::BufRead;
    let mut r = std::io::BufReader::with_capacity(1 << 16, fs::File::open(path).map_err(&io)?);
    let mut line = String::new();
    let mut n = 0;
    loop {
        line.clear();
        if r.read_line(&mut line).map_err(&io)? == 0 {
            return Ok(());
        }
        n += 1;
        let text = line.strip_suffix('\n').unwrap_or(&line);
        each(n, text.strip_suffix('\r').unwrap_or(text))?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_come_one_at_a_time_numbered_without_their_ends() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.jsonl");
        fs::write(&p, "one\n\ntwo\r\nthree").unwrap();
        let mut seen = Vec::new();
        let io = |e: std::io::Error| e.to_string();
        for_each_line(&p, io, |n, l| {
            seen.push((n, l.to_owned()));
            Ok(())
        })
        .unwrap();
        let want = [(1, "one"), (2, ""), (3, "two"), (4, "three")];
        assert_eq!(seen, want.map(|(n, l)| (n, l.to_owned())));
        let stop = for_each_line(
            &p,
            io,
            |n, _| if n == 2 { Err("stop".into()) } else { Ok(()) },
        );
        assert_eq!(stop.unwrap_err(), "stop");
        assert!(for_each_line(&dir.path().join("absent"), io, |_, _| Ok(())).is_err());
    }

    #[test]
    fn replaces_whole_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "only the target is left");
    }

    #[test]
    fn a_failed_write_leaves_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        // The target is a directory: the rename fails, the temporary file must go.
        let p = dir.path().join("d");
        fs::create_dir(&p).unwrap();
        fs::write(p.join("keep"), b"x").unwrap();
        assert!(write_atomic(&p, b"new").is_err());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
