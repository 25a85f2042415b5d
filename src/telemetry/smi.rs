//! `nvidia-smi --query-gpu` and `amd-smi metric` as the fallback source: one command per read.

use std::time::Duration;

use super::{GpuId, SourceKind, TelemetryError, Values};

/// A found SMI program.
pub(crate) struct Smi {
    kind: SourceKind,
}

impl Smi {
    /// Finds `nvidia-smi` (or `amd-smi`) on PATH; `kind` asks for one of them.
    pub(crate) fn detect(kind: Option<SourceKind>) -> Result<Smi, TelemetryError> {
        let _ = kind;
        Err(TelemetryError::SmiMissing)
    }

    /// Which program.
    pub(crate) fn kind(&self) -> SourceKind {
        self.kind
    }

    /// The source name (`nvidia-smi://localhost` or `amd-smi://localhost`).
    pub(crate) fn source(&self) -> &'static str {
        match self.kind {
            SourceKind::AmdSmi => "amd-smi://localhost",
            _ => "nvidia-smi://localhost",
        }
    }

    /// Runs one query (at most `timeout`).
    pub(crate) async fn read(
        &self,
        timeout: Duration,
    ) -> Result<Vec<(GpuId, Values)>, TelemetryError> {
        let _ = timeout;
        Err(TelemetryError::SmiMissing)
    }
}
