//! `nvidia-smi --query-gpu` and `amd-smi metric` as the fallback source: one command per read.
//!
//! Both print CSV. nvidia-smi's columns are the ones asked for, in that order; amd-smi's depend on
//! its version and the GPU, so its output is read by header name and unknown columns are ignored.
//! A cell the tool marks unavailable (`N/A`, `[N/A]`, `[Not Supported]`, any `[...]`) leaves the
//! field out of that GPU's values; any other cell that is not a number fails the read, since a
//! misread column would put wrong numbers in the record.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use super::{local_hostname, Field, GpuId, SourceKind, TelemetryError, Values};
use crate::debug::step;
use crate::process::describe;
use crate::serve::GpuMemory;

/// nvidia-smi's columns after `timestamp,index,uuid,name`, with the field each gives (all in
/// canonical units under `nounits`). The first six with timestamp and index are InferenceX's
/// `NVIDIA_GPU_MONITOR_QUERY`; nvidia-smi has no energy counter in this query, so an nvidia-smi
/// run's energy is the power integral only.
const NVIDIA_VALUES: [(&str, Field); 8] = [
    ("power.draw", Field::Power),
    ("temperature.gpu", Field::Temperature),
    ("clocks.current.sm", Field::SmClock),
    ("clocks.current.memory", Field::MemClock),
    ("utilization.gpu", Field::GpuUtil),
    ("utilization.memory", Field::MemUtil),
    ("memory.used", Field::MemUsed),
    ("memory.free", Field::MemFree),
];

/// `amd-smi metric` with power, clocks, temperatures, usage, memory and the energy counter, one
/// shot (InferenceX runs the same flags with `-w` as a stream and `-E` as snapshots).
const AMD_ARGS: [&str; 8] = ["metric", "-p", "-c", "-t", "-u", "-m", "-E", "--csv"];

/// A found SMI program.
pub(crate) struct Smi {
    kind: SourceKind,
    /// The program run.
    program: PathBuf,
    /// Its arguments.
    args: Vec<String>,
    /// This machine's name, read once.
    hostname: String,
}

impl Smi {
    /// Finds `nvidia-smi` (or `amd-smi`) on PATH; `kind` asks for one of them (`Dcgm` and `Nvml`
    /// ask for neither, as `None`).
    pub(crate) fn detect(kind: Option<SourceKind>) -> Result<Smi, TelemetryError> {
        let candidates: &[SourceKind] = match kind {
            Some(k @ (SourceKind::NvidiaSmi | SourceKind::AmdSmi)) => &[k],
            _ => &[SourceKind::NvidiaSmi, SourceKind::AmdSmi],
        };
        let path = std::env::var_os("PATH").unwrap_or_default();
        candidates
            .iter()
            .find_map(|&k| {
                let name = if k == SourceKind::AmdSmi {
                    "amd-smi"
                } else {
                    "nvidia-smi"
                };
                on_path(&path, name).map(|p| Smi::at(k, p))
            })
            .ok_or(TelemetryError::SmiMissing(match kind {
                Some(SourceKind::NvidiaSmi) => "nvidia-smi",
                Some(SourceKind::AmdSmi) => "amd-smi",
                _ => "neither nvidia-smi nor amd-smi",
            }))
    }

    /// The program at `program`, run as `kind` (`AmdSmi` as amd-smi, anything else as
    /// nvidia-smi): what [`Smi::detect`] builds once it found one, and a test's stand-in.
    pub(crate) fn at(kind: SourceKind, program: PathBuf) -> Smi {
        let (kind, args) = match kind {
            SourceKind::AmdSmi => (kind, AMD_ARGS.map(String::from).to_vec()),
            _ => {
                let columns: Vec<&str> = ["timestamp", "index", "uuid", "name"]
                    .into_iter()
                    .chain(NVIDIA_VALUES.iter().map(|(c, _)| *c))
                    .collect();
                (
                    SourceKind::NvidiaSmi,
                    vec![
                        format!("--query-gpu={}", columns.join(",")),
                        "--format=csv,noheader,nounits".into(),
                    ],
                )
            }
        };
        Smi {
            kind,
            program,
            args,
            hostname: local_hostname(),
        }
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

    /// The command line with `args`, as errors show it.
    fn command_with(&self, args: &[String]) -> String {
        std::iter::once(self.program.display().to_string())
            .chain(args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The telemetry query's command line, as errors show it.
    fn command(&self) -> String {
        self.command_with(&self.args)
    }

    /// Runs one telemetry query (at most `timeout`; a program still running then is killed).
    pub(crate) async fn read(
        &self,
        timeout: Duration,
    ) -> Result<Vec<(GpuId, Values)>, TelemetryError> {
        let stdout = self.output(&self.args, timeout).await?;
        let source = Gpus {
            source: self.source(),
            hostname: &self.hostname,
        };
        let gpus = match self.kind {
            SourceKind::AmdSmi => parse_amd_smi(&stdout, &source),
            _ => parse_nvidia_smi(&stdout, &source),
        }
        .map_err(|(line, reason)| TelemetryError::SmiParse {
            command: self.command(),
            line,
            reason,
        })?;
        if gpus.is_empty() {
            return Err(TelemetryError::NoGpus);
        }
        Ok(gpus)
    }

    /// Runs the program with `args` (at most `timeout`; a program still running then is
    /// killed) and returns its standard output, or why it gave none.
    async fn output(&self, args: &[String], timeout: Duration) -> Result<String, TelemetryError> {
        let failed = |reason: String| TelemetryError::SmiFailed {
            command: self.command_with(args),
            reason,
        };
        step!("{}", self.command_with(args));
        let run = tokio::process::Command::new(&self.program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(timeout, run)
            .await
            .map_err(|_| failed(format!("timed out after {}s", timeout.as_secs_f64())))?
            .map_err(|e| failed(e.to_string()))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            // nvidia-smi says why on stdout ("NVIDIA-SMI has failed because it couldn't
            // communicate with the NVIDIA driver"), amd-smi on stderr.
            let stderr = String::from_utf8_lossy(&out.stderr);
            let why = last_line(&stderr).or_else(|| last_line(&stdout));
            return Err(failed(match why {
                Some(line) => format!("{}: {line}", describe(out.status)),
                None => describe(out.status),
            }));
        }
        Ok(stdout.into_owned())
    }
}

/// nvidia-smi's query of memory used per GPU alone.
const MEMORY_QUERY: [&str; 2] = [
    "--query-gpu=index,memory.used",
    "--format=csv,noheader,nounits",
];

/// `index, memory.used` lines (blank lines skipped); the 1-based line and what is wrong otherwise.
fn parse_memory(text: &str) -> Result<BTreeMap<u32, u64>, ParseError> {
    let mut m = BTreeMap::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let bad = || {
            (
                i + 1,
                format!("expected `index, memory.used` (MiB), got {line:?}"),
            )
        };
        let (index, used) = line.split_once(',').ok_or_else(bad)?;
        let index = index.trim().parse().map_err(|_| bad())?;
        let used = used.trim().parse().map_err(|_| bad())?;
        m.insert(index, used);
    }
    Ok(m)
}

/// Memory used per GPU (MiB) from nvidia-smi or amd-smi, whichever is on PATH: the reads of the
/// wait for GPU memory between servers. [`TelemetryError::SmiMissing`] when neither is there.
pub(crate) async fn memory_used(timeout: Duration) -> Result<GpuMemory, TelemetryError> {
    Smi::detect(None)?.memory_used(timeout).await
}

impl Smi {
    /// Memory used per GPU (MiB) from one query (at most `timeout`): nvidia-smi's
    /// `index,memory.used` alone, amd-smi's whole metric table.
    pub(crate) async fn memory_used(&self, timeout: Duration) -> Result<GpuMemory, TelemetryError> {
        let used: BTreeMap<u32, u64> = match self.kind {
            SourceKind::AmdSmi => self
                .read(timeout)
                .await?
                .iter()
                .filter_map(|(id, v)| Some((id.index, v.get(&Field::MemUsed)?.round() as u64)))
                .collect(),
            _ => {
                let args = MEMORY_QUERY.map(str::to_owned);
                let text = self.output(&args, timeout).await?;
                parse_memory(&text).map_err(|(line, reason)| TelemetryError::SmiParse {
                    command: self.command_with(&args),
                    line,
                    reason,
                })?
            }
        };
        if used.is_empty() {
            return Err(TelemetryError::SmiFailed {
                command: self.command(),
                reason: "no GPU reported its memory used".to_owned(),
            });
        }
        Ok(GpuMemory(used))
    }
}

/// The executable `name` in the first directory of `path` (a PATH value) that has one.
fn on_path(path: &std::ffi::OsStr, name: &str) -> Option<PathBuf> {
    std::env::split_paths(path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(p) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.is_file() && meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    meta.is_file()
}

/// The last non-empty line of `text`, trimmed.
fn last_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).rfind(|l| !l.is_empty())
}

/// What the parsers stamp on every GPU they read.
struct Gpus<'a> {
    source: &'a str,
    hostname: &'a str,
}

impl Gpus<'_> {
    fn id(&self, index: u32, uuid: &str, model: &str) -> GpuId {
        GpuId {
            source: self.source.into(),
            hostname: self.hostname.into(),
            index,
            uuid: uuid.into(),
            model: model.into(),
        }
    }
}

/// A parse failure: the 1-based line and what was wrong.
type ParseError = (usize, String);

/// Parses `nvidia-smi --query-gpu=timestamp,index,uuid,name,<NVIDIA_VALUES>
/// --format=csv,noheader,nounits`: one line per GPU.
fn parse_nvidia_smi(text: &str, gpus: &Gpus<'_>) -> Result<Vec<(GpuId, Values)>, ParseError> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate().map(|(i, l)| (i + 1, l)) {
        if line.trim().is_empty() {
            continue;
        }
        let cells = split_csv(line);
        if cells.len() != 4 + NVIDIA_VALUES.len() {
            return Err((
                n,
                format!(
                    "{} columns where the query asks for {}",
                    cells.len(),
                    4 + NVIDIA_VALUES.len()
                ),
            ));
        }
        let index = parse_index(cells[1]).map_err(|e| (n, e))?;
        let text_cell = |c: &str| if unavailable(c) { "" } else { c }.to_string();
        let mut values = Values::new();
        for ((column, field), cell) in NVIDIA_VALUES.iter().zip(&cells[4..]) {
            if let Some(x) = value(*field, cell).map_err(|e| (n, format!("{column}: {e}")))? {
                values.insert(*field, x);
            }
        }
        out.push((
            gpus.id(index, &text_cell(cells[2]), &text_cell(cells[3])),
            values,
        ));
    }
    Ok(out)
}

/// Parses `amd-smi metric ... --csv`: a header (after any lines the tool prints first), then one
/// row per GPU; a repeated header is skipped.
fn parse_amd_smi(text: &str, gpus: &Gpus<'_>) -> Result<Vec<(GpuId, Values)>, ParseError> {
    let mut header: Option<Vec<&str>> = None;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate().map(|(i, l)| (i + 1, l)) {
        if line.trim().is_empty() {
            continue;
        }
        let cells = split_csv(line);
        if cells.contains(&"gpu") {
            header = Some(cells);
            continue;
        }
        let Some(header) = &header else {
            continue; // before the header: the tool's own notices
        };
        if cells.len() != header.len() {
            return Err((
                n,
                format!(
                    "{} cells under a header of {} columns",
                    cells.len(),
                    header.len()
                ),
            ));
        }
        let row: Vec<(&str, &str)> = header.iter().copied().zip(cells).collect();
        let cell = |name: &str| row.iter().find(|(c, _)| *c == name).map(|(_, v)| *v);
        let index = parse_index(cell("gpu").unwrap_or_default()).map_err(|e| (n, e))?;
        let mut values = Values::new();
        for (column, field) in AMD_VALUES {
            if values.contains_key(&field) {
                continue; // an earlier column gave it
            }
            let Some(c) = cell(column) else { continue };
            if let Some(x) = value(field, c).map_err(|e| (n, format!("{column}: {e}")))? {
                values.insert(field, x);
            }
        }
        // One SM clock per GFX die (XCD): their mean, as one value per GPU.
        let mut clocks = Vec::new();
        for (column, c) in &row {
            if is_gfx_clock(column) {
                if let Some(x) =
                    value(Field::SmClock, c).map_err(|e| (n, format!("{column}: {e}")))?
                {
                    clocks.push(x);
                }
            }
        }
        if !clocks.is_empty() {
            values.insert(
                Field::SmClock,
                clocks.iter().sum::<f64>() / clocks.len() as f64,
            );
        }
        out.push((gpus.id(index, "", ""), values));
    }
    Ok(out)
}

/// amd-smi's columns and their fields, earlier columns first where two give one field (socket
/// power under its names across versions; the hotspot over the edge sensor, which MI300 lacks).
/// Memory is in MB of 2^20 bytes, energy in J, power in W.
const AMD_VALUES: [(&str, Field); 13] = [
    ("socket_power", Field::Power),
    ("current_socket_power", Field::Power),
    ("average_socket_power", Field::Power),
    ("power_usage", Field::Power),
    ("total_energy_consumption", Field::Energy),
    ("gfx_activity", Field::GpuUtil),
    ("umc_activity", Field::MemUtil),
    ("used_vram", Field::MemUsed),
    ("free_vram", Field::MemFree),
    ("mem_0_clk", Field::MemClock),
    ("hotspot", Field::Temperature),
    ("edge", Field::Temperature),
    ("mem", Field::MemTemperature),
];

/// `gfx_<n>_clk`, one GFX die's current clock (not `gfx_0_min_clk` and the like).
fn is_gfx_clock(column: &str) -> bool {
    column
        .strip_prefix("gfx_")
        .and_then(|r| r.strip_suffix("_clk"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// A GPU index cell.
fn parse_index(cell: &str) -> Result<u32, String> {
    cell.parse()
        .map_err(|_| format!("GPU index {cell:?} is not a number"))
}

/// A cell the tool marks unavailable: `N/A`, `[N/A]`, `[Not Supported]`, `[Unknown Error]`, ...
fn unavailable(cell: &str) -> bool {
    cell.is_empty() || cell.eq_ignore_ascii_case("N/A") || cell.starts_with('[')
}

/// A cell's value in `field`'s canonical unit; `None` when unavailable. A unit after the number
/// (`238 W`, `1.5 kJ`, `512 MB`) is converted; one this field cannot be in is an error.
fn value(field: Field, cell: &str) -> Result<Option<f64>, String> {
    if unavailable(cell) {
        return Ok(None);
    }
    let split = cell
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E')))
        .unwrap_or(cell.len());
    let (number, unit) = cell.split_at(split);
    let x: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{cell:?} is not a number"))?;
    let unit = unit.trim();
    // Divisors for the smaller units, so that `238000 mW` is exactly 238 W.
    let (mul, div) = match (field.unit(), unit) {
        (_, "") | ("MiB", "MB") | ("C", "°C") => (1.0, 1.0),
        (want, got) if want == got => (1.0, 1.0),
        ("J", "mJ") | ("W", "mW") => (1.0, 1e3),
        ("J", "uJ" | "µJ") | ("W", "uW" | "µW") => (1.0, 1e6),
        ("J", "kJ") | ("MHz", "GHz") => (1e3, 1.0),
        ("MiB", "GB" | "GiB") => (1024.0, 1.0),
        ("MiB", "KB" | "KiB") => (1.0, 1024.0),
        (want, got) => return Err(format!("{cell:?}: unit {got} is not one of {want}")),
    };
    if !x.is_finite() {
        return Err(format!("{cell:?} is not a finite number"));
    }
    Ok(Some(x * mul / div))
}

/// One CSV line's cells, trimmed; a double-quoted cell may hold commas (amd-smi quotes lists).
fn split_csv(line: &str) -> Vec<&str> {
    let mut cells = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                cells.push(unquote(&line[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    cells.push(unquote(&line[start..]));
    cells
}

fn unquote(cell: &str) -> &str {
    let t = cell.trim();
    t.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .map_or(t, str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: Gpus<'static> = Gpus {
        source: "nvidia-smi://localhost",
        hostname: "node7",
    };

    /// Two H200s and a GPU without power readings, as `nvidia-smi` prints them.
    const NVIDIA: &str = "\
2025/01/15 12:34:56.789, 0, GPU-5a1c2d3e-aaaa-bbbb-cccc-000000000000, NVIDIA H200, 412.34, 61, 1980, 3201, 97, 45, 120034, 23054
2025/01/15 12:34:56.790, 1, GPU-5a1c2d3e-aaaa-bbbb-cccc-000000000001, NVIDIA H200, 98.12, 34, 345, 3201, 0, 0, 4, 143767
2025/01/15 12:34:56.791, 2, GPU-77, NVIDIA A10G, [Not Supported], 40, 210, [N/A], N/A, [N/A], 500, [Unknown Error]
";

    fn values(pairs: &[(Field, f64)]) -> Values {
        pairs.iter().copied().collect()
    }

    #[test]
    fn nvidia_smi_lines_become_gpus_in_canonical_units() {
        let gpus = parse_nvidia_smi(NVIDIA, &HOST).unwrap();
        assert_eq!(gpus.len(), 3);
        let (id, v) = &gpus[0];
        assert_eq!(
            *id,
            GpuId {
                source: "nvidia-smi://localhost".into(),
                hostname: "node7".into(),
                index: 0,
                uuid: "GPU-5a1c2d3e-aaaa-bbbb-cccc-000000000000".into(),
                model: "NVIDIA H200".into(),
            }
        );
        assert_eq!(
            *v,
            values(&[
                (Field::Power, 412.34),
                (Field::Temperature, 61.0),
                (Field::SmClock, 1980.0),
                (Field::MemClock, 3201.0),
                (Field::GpuUtil, 97.0),
                (Field::MemUtil, 45.0),
                (Field::MemUsed, 120034.0),
                (Field::MemFree, 23054.0),
            ])
        );
        assert_eq!(gpus[1].0.index, 1);
        assert!(!gpus[1].1.contains_key(&Field::Energy), "no energy column");
    }

    #[test]
    fn unavailable_nvidia_smi_cells_leave_the_field_out() {
        let gpus = parse_nvidia_smi(NVIDIA, &HOST).unwrap();
        let (id, v) = &gpus[2];
        assert_eq!((id.index, id.model.as_str()), (2, "NVIDIA A10G"));
        assert_eq!(
            *v,
            values(&[
                (Field::Temperature, 40.0),
                (Field::SmClock, 210.0),
                (Field::MemUsed, 500.0),
            ])
        );
    }

    #[test]
    fn a_malformed_nvidia_smi_line_names_its_line() {
        let short = "2025/01/15 12:34:56.789, 0, GPU-1, NVIDIA H200, 412.34\n";
        let (line, why) = parse_nvidia_smi(&format!("{}{short}", NVIDIA), &HOST).unwrap_err();
        assert_eq!(line, 4);
        assert!(why.contains("5 columns"), "{why}");

        let bad = NVIDIA.replace("412.34", "lots");
        let (line, why) = parse_nvidia_smi(&bad, &HOST).unwrap_err();
        assert_eq!(line, 1);
        assert!(
            why.starts_with("power.draw: ") && why.contains("lots"),
            "{why}"
        );

        let bad = NVIDIA.replace(", 1, GPU", ", one, GPU");
        assert_eq!(parse_nvidia_smi(&bad, &HOST).unwrap_err().0, 2);
    }

    /// `amd-smi metric -p -c -t -u -m -E --csv` on two MI300X-like GPUs (a subset of the columns,
    /// in amd-smi's order, a quoted list included), after a notice line; the second GPU lacks
    /// its hotspot, edge and energy readings.
    const AMD: &str = "\
WARNING: User is missing the following required groups: render, video
gpu,gfx_activity,umc_activity,mm_activity,vcn_activity,gfx_busy_inst,socket_power,gfx_voltage,soc_voltage,mem_voltage,throttle_status,power_management,gfx_0_clk,gfx_0_min_clk,gfx_0_max_clk,gfx_0_clk_locked,gfx_1_clk,gfx_1_min_clk,gfx_1_max_clk,gfx_1_clk_locked,mem_0_clk,mem_0_min_clk,mem_0_max_clk,vclk_0_clk,edge,hotspot,mem,total_energy_consumption,total_vram,used_vram,free_vram
0,87,34,0,N/A,\"[88, 86]\",612,N/A,N/A,N/A,UNTHROTTLED,ENABLED,2100,500,2100,DISABLED,2080,500,2100,DISABLED,1300,900,1300,29,N/A,71,58,178319501.7,196592,180000,16592
1,0,0,0,N/A,N/A,141,N/A,N/A,N/A,UNTHROTTLED,ENABLED,132,500,2100,DISABLED,N/A,500,2100,DISABLED,900,900,1300,29,N/A,N/A,40,N/A,196592,283,196309
";

    #[test]
    fn amd_smi_columns_are_read_by_name() {
        let host = Gpus {
            source: "amd-smi://localhost",
            hostname: "mi300",
        };
        let gpus = parse_amd_smi(AMD, &host).unwrap();
        assert_eq!(gpus.len(), 2);
        let (id, v) = &gpus[0];
        assert_eq!(
            (id.source.as_str(), id.hostname.as_str()),
            ("amd-smi://localhost", "mi300")
        );
        assert_eq!((id.index, id.uuid.as_str()), (0, ""));
        assert_eq!(
            *v,
            values(&[
                (Field::Power, 612.0),
                (Field::Energy, 178319501.7),
                (Field::GpuUtil, 87.0),
                (Field::MemUtil, 34.0),
                (Field::MemUsed, 180000.0),
                (Field::MemFree, 16592.0),
                (Field::SmClock, 2090.0),
                (Field::MemClock, 1300.0),
                (Field::Temperature, 71.0),
                (Field::MemTemperature, 58.0),
            ])
        );
        let (id, v) = &gpus[1];
        assert_eq!(id.index, 1);
        assert_eq!(
            v.get(&Field::SmClock),
            Some(&132.0),
            "the one GFX clock read"
        );
        for f in [Field::Temperature, Field::Energy] {
            assert!(!v.contains_key(&f), "{f:?}: {v:?}");
        }
    }

    #[test]
    fn amd_smi_units_and_repeated_headers() {
        let text = "\
gpu,socket_power,edge,total_energy_consumption,used_vram
0,238 W,45 °C,1.5 kJ,2 GB
gpu,socket_power,edge,total_energy_consumption,used_vram
1,238000 mW,46,1500000000 uJ,512 MB
";
        let gpus = parse_amd_smi(text, &HOST).unwrap();
        assert_eq!(gpus.len(), 2);
        for (_, v) in &gpus {
            assert_eq!(v[&Field::Power], 238.0);
            assert_eq!(v[&Field::Energy], 1500.0);
        }
        assert_eq!(gpus[0].1[&Field::MemUsed], 2048.0);
        assert_eq!(gpus[1].1[&Field::Temperature], 46.0);

        let (line, why) = parse_amd_smi("gpu,socket_power\n0,238 V\n", &HOST).unwrap_err();
        assert_eq!(line, 2);
        assert!(why.contains("unit V"), "{why}");
        let (line, why) = parse_amd_smi("gpu,socket_power\n0,238,1\n", &HOST).unwrap_err();
        assert_eq!(line, 2);
        assert!(why.contains("3 cells"), "{why}");
        assert!(parse_amd_smi("no header here\n", &HOST).unwrap().is_empty());
    }

    #[test]
    fn gfx_clock_columns_are_the_current_clocks_only() {
        assert!(is_gfx_clock("gfx_0_clk") && is_gfx_clock("gfx_11_clk"));
        for c in [
            "gfx_0_min_clk",
            "gfx_clk",
            "gfx__clk",
            "mem_0_clk",
            "gfx_0_clk_locked",
        ] {
            assert!(!is_gfx_clock(c), "{c}");
        }
    }

    #[test]
    fn detect_finds_the_asked_program_on_path_only() {
        let dir = tempfile::tempdir().unwrap();
        assert!(on_path(dir.path().as_os_str(), "nvidia-smi").is_none());
        let f = dir.path().join("nvidia-smi");
        std::fs::write(&f, "#!/bin/sh\n").unwrap();
        assert!(
            on_path(dir.path().as_os_str(), "nvidia-smi").is_none(),
            "not executable"
        );
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = std::env::join_paths(["/nonexistent".as_ref(), dir.path()]).unwrap();
        assert_eq!(on_path(&path, "nvidia-smi"), Some(f));
    }

    /// A stand-in program: `body` after a shebang, executable. Spawning a file another thread
    /// still had open for writing at a fork fails with ETXTBSY, so it is run once until that
    /// passes before a test relies on it.
    fn fake(dir: &Path, name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join(name);
        std::fs::write(
            &p,
            format!("#!/bin/sh\n[ \"$1\" = probe ] && exit 0\n{body}"),
        )
        .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        for _ in 0..100 {
            match std::process::Command::new(&p).arg("probe").status() {
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                r => {
                    assert!(r.unwrap().success());
                    break;
                }
            }
        }
        p
    }

    #[tokio::test]
    async fn read_runs_the_query_and_parses_its_output() {
        let dir = tempfile::tempdir().unwrap();
        let smi = Smi::at(SourceKind::NvidiaSmi, PathBuf::new());
        // The stand-in answers only the exact query, so a changed argument fails here.
        let body = format!(
            "[ \"$1\" = '{}' ] && [ \"$2\" = '{}' ] || {{ echo \"bad arguments: $*\" >&2; exit 2; }}\ncat <<'EOF'\n{NVIDIA}EOF\n",
            smi.args[0], smi.args[1]
        );
        let smi = Smi::at(SourceKind::NvidiaSmi, fake(dir.path(), "nvidia-smi", &body));
        assert_eq!(smi.kind(), SourceKind::NvidiaSmi);
        assert_eq!(
            smi.args[0],
            "--query-gpu=timestamp,index,uuid,name,power.draw,temperature.gpu,clocks.current.sm,\
             clocks.current.memory,utilization.gpu,utilization.memory,memory.used,memory.free"
        );
        let gpus = smi.read(Duration::from_secs(10)).await.unwrap();
        assert_eq!(gpus.len(), 3);
        assert_eq!(gpus[0].0.source, "nvidia-smi://localhost");
        assert_eq!(gpus[0].0.hostname, local_hostname());
        assert_eq!(gpus[0].1[&Field::Power], 412.34);
    }

    #[tokio::test]
    async fn memory_used_is_each_gpus_memory_used_in_mib() {
        let dir = tempfile::tempdir().unwrap();
        // The stand-in answers only the memory query.
        let body = "[ \"$1\" = --query-gpu=index,memory.used ] || exit 2\nprintf '0, 120034\\n\\n1, 4\\n'\n";
        let smi = Smi::at(SourceKind::NvidiaSmi, fake(dir.path(), "nvidia-smi", body));
        let m = smi.memory_used(Duration::from_secs(10)).await.unwrap();
        assert_eq!(m.0, BTreeMap::from([(0, 120034), (1, 4)]));
        let odd = Smi::at(
            SourceKind::NvidiaSmi,
            fake(dir.path(), "odd-smi", "echo 'No devices were found'\n"),
        );
        let e = odd.memory_used(Duration::from_secs(10)).await.unwrap_err();
        assert!(
            e.to_string()
                .contains("line 1: expected `index, memory.used`"),
            "{e}"
        );
        // A hung program is killed at the timeout and the wait learns why.
        let hung = Smi::at(
            SourceKind::NvidiaSmi,
            fake(dir.path(), "hung-smi", "exec sleep 30\n"),
        );
        let e = hung
            .memory_used(Duration::from_millis(200))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("timed out after 0.2s"), "{e}");
    }

    #[tokio::test]
    async fn a_failing_program_reports_its_status_and_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = fake(
            dir.path(),
            "nvidia-smi",
            "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'\nexit 9\n",
        );
        let smi = Smi::at(SourceKind::NvidiaSmi, p.clone());
        match smi.read(Duration::from_secs(10)).await {
            Err(TelemetryError::SmiFailed { command, reason }) => {
                assert!(
                    command.starts_with(&format!("{} --query-gpu=", p.display())),
                    "{command}"
                );
                assert_eq!(
                    reason,
                    "exit status 9: NVIDIA-SMI has failed because it could not communicate \
                     with the NVIDIA driver."
                );
            }
            other => panic!("{other:?}"),
        }

        let p = fake(
            dir.path(),
            "amd-smi",
            "echo 'notice' >&2\necho 'ERROR: no GPU found' >&2\nexit 1\n",
        );
        match Smi::at(SourceKind::AmdSmi, p)
            .read(Duration::from_secs(10))
            .await
        {
            Err(TelemetryError::SmiFailed { command, reason }) => {
                assert!(
                    command.ends_with("amd-smi metric -p -c -t -u -m -E --csv"),
                    "{command}"
                );
                assert_eq!(reason, "exit status 1: ERROR: no GPU found");
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_hung_program_is_killed_at_the_timeout() {
        let dir = tempfile::tempdir().unwrap();
        // `exec`: the shell becomes the sleep, so the kill reaches the process holding the pipe.
        let smi = Smi::at(
            SourceKind::NvidiaSmi,
            fake(dir.path(), "nvidia-smi", "exec sleep 30\n"),
        );
        let t0 = std::time::Instant::now();
        match smi.read(Duration::from_millis(300)).await {
            Err(TelemetryError::SmiFailed { reason, .. }) => {
                assert_eq!(reason, "timed out after 0.3s")
            }
            other => panic!("{other:?}"),
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    }

    #[tokio::test]
    async fn unparseable_output_and_no_gpus_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let smi = Smi::at(
            SourceKind::NvidiaSmi,
            fake(
                dir.path(),
                "nvidia-smi",
                "echo 'No devices were found, apparently'\n",
            ),
        );
        match smi.read(Duration::from_secs(10)).await {
            Err(TelemetryError::SmiParse {
                line: 1, reason, ..
            }) => {
                assert!(reason.contains("2 columns"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        let smi = Smi::at(SourceKind::NvidiaSmi, fake(dir.path(), "empty", "true\n"));
        assert_eq!(
            smi.read(Duration::from_secs(10)).await.unwrap_err(),
            TelemetryError::NoGpus
        );
    }
}
