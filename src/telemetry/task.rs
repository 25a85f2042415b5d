//! The telemetry side task.
