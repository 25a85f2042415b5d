//! DCGM exporter pages as a telemetry source.
