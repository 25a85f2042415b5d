//! Child processes in words, for the server lifecycle (`serve`) and the SMI telemetry readers
//! (`telemetry`) alike.

use std::process::ExitStatus;

/// An exit status in words: `exit status 3`, `killed by signal 9`.
pub fn describe(s: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = s.signal() {
            return format!("killed by signal {sig}");
        }
    }
    match s.code() {
        Some(c) => format!("exit status {c}"),
        None => s.to_string(),
    }
}
