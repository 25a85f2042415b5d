//! The simulated GPUs as NVIDIA dcgm-exporter's page (`GET /dcgm/metrics`), written through the
//! one exposition writer ([`crate::scrape::prom::Writer`]). `http` serves it on every server (one
//! node's exporter: every server shows every GPU); it reads `state`'s fleet (`gpu`).
//!
//! How it relates to the real exporter:
//! - **Same shape.** Text format 0.0.4, `# HELP`/`# TYPE` per family, the families of the
//!   exporter's `default-counters.csv` in its order, one sample per GPU with its labels (`gpu`,
//!   `UUID`, `pci_bus_id`, `device`, `modelName`, `Hostname`, `DCGM_FI_DRIVER_VERSION`), integer
//!   fields written as integers and the energy counter in mJ.
//! - **Fresher values.** The exporter serves what DCGM sampled on its collect interval (30 s by
//!   default), and H100/H200 report `POWER_USAGE` as a one-second average; here every scrape is
//!   computed at its instant: power is the value held since the last tick (10 ms by default) and
//!   the energy counter is exact to that instant. A client's integration error is then its own.
//! - **Counter origin.** DCGM's energy counts since the driver loaded; here since the simulator
//!   started (a counter all the same: only differences mean anything).
//! - **Left out.** `FB_RESERVED` (used + free is the whole frame buffer here), the profiling
//!   (`DCGM_FI_PROF_*`) and PCIe/NVLink families, `MEMORY_TEMP`, encoder and decoder.
//! - **One addition.** The response carries `x-specperf-sim-at-ns` (`DCGM_AT_HEADER`), the
//!   instant the page was computed at, so tests can check a sample against the truth exactly.
//! - **Events.** `add_field_at` adds `XID_ERRORS` and `POWER_VIOLATION` mid-run, `drop_gpu`
//!   removes a GPU from every family at once, as a GPU falling off the bus does.

use super::gpu_fleet::{FleetReading, GpuReading, MEM_CLOCK_MHZ};
use super::model::splitmix;
use super::state::Shared;
use crate::scrape::prom::{Format, Writer};

/// The `modelName` label.
pub(super) const MODEL_NAME: &str = "NVIDIA H200";
/// The `DCGM_FI_DRIVER_VERSION` label.
pub(super) const DRIVER_VERSION: &str = "570.133.20";

/// What one family writes of one GPU.
type Value = fn(&GpuReading) -> String;

/// The page and the instant it was computed at (Unix ns, sent as `DCGM_AT_HEADER`), or `None` when the simulator has no
/// GPUs.
pub(super) fn dcgm_page(shared: &Shared) -> Option<(String, u64)> {
    let fleet = shared.gpus.as_ref()?;
    let reading = fleet.read();
    Some((write_page(&reading, &fleet.cfg.hostname), reading.at_ns))
}

fn write_page(r: &FleetReading, hostname: &str) -> String {
    let mut w = Writer::with_capacity(1024 + r.gpus.len() * 4096);
    let labels: Vec<[(&str, String); 7]> = r
        .gpus
        .iter()
        .map(|g| {
            [
                ("gpu", g.index.to_string()),
                ("UUID", uuid(hostname, g.index)),
                ("pci_bus_id", pci_bus_id(g.index)),
                ("device", format!("nvidia{}", g.index)),
                ("modelName", MODEL_NAME.to_owned()),
                ("Hostname", hostname.to_owned()),
                ("DCGM_FI_DRIVER_VERSION", DRIVER_VERSION.to_owned()),
            ]
        })
        .collect();
    let families: [(&str, &str, &str, Value); 9] = [
        (
            "DCGM_FI_DEV_SM_CLOCK",
            "gauge",
            "SM frequency (in MHz).",
            |g| g.sm_clock_mhz().to_string(),
        ),
        (
            "DCGM_FI_DEV_MEM_CLOCK",
            "gauge",
            "Memory frequency (in MHz).",
            |_| MEM_CLOCK_MHZ.to_string(),
        ),
        (
            "DCGM_FI_DEV_GPU_TEMP",
            "gauge",
            "GPU temperature (in C).",
            |g| g.temp_c().to_string(),
        ),
        (
            "DCGM_FI_DEV_POWER_USAGE",
            "gauge",
            "Power draw (in W).",
            |g| format!("{:.3}", g.power_w),
        ),
        (
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            "counter",
            "Total energy consumption since boot (in mJ).",
            // Whole mJ, rounded down, so the counter never runs ahead of the truth.
            |g| ((g.energy_j * 1e3).floor() as u64).to_string(),
        ),
        (
            "DCGM_FI_DEV_GPU_UTIL",
            "gauge",
            "GPU utilization (in %).",
            |g| g.gpu_util_pct().to_string(),
        ),
        (
            "DCGM_FI_DEV_MEM_COPY_UTIL",
            "gauge",
            "Memory utilization (in %).",
            |g| g.mem_copy_util_pct().to_string(),
        ),
        (
            "DCGM_FI_DEV_FB_FREE",
            "gauge",
            "Framebuffer memory free (in MiB).",
            |g| g.fb_free_mib().to_string(),
        ),
        (
            "DCGM_FI_DEV_FB_USED",
            "gauge",
            "Framebuffer memory used (in MiB).",
            |g| g.fb_used_mib().to_string(),
        ),
    ];
    let extra: [(&str, &str, &str, Value); 2] = [
        (
            "DCGM_FI_DEV_XID_ERRORS",
            "gauge",
            "Value of the last XID error encountered.",
            |_| "0".to_owned(),
        ),
        (
            "DCGM_FI_DEV_POWER_VIOLATION",
            "counter",
            "Throttling duration due to power constraints (in us).",
            |g| g.violation_us.to_string(),
        ),
    ];
    let shown = if r.extra_fields { &extra[..] } else { &[] };
    for (name, kind, help, value) in families.iter().chain(shown) {
        w.family(name, kind, help);
        for (g, labels) in r.gpus.iter().zip(&labels) {
            w.sample(name, labels, value(g));
        }
    }
    w.finish(Format::Text)
}

/// FNV-1a of the host name: the GPUs of one simulated host keep their UUIDs from run to run.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, from the host name and the index only (a board's
/// UUID does not change with the simulator's seed).
pub(super) fn uuid(hostname: &str, index: u32) -> String {
    let a = splitmix(fnv1a(hostname) ^ u64::from(index));
    let b = splitmix(a);
    format!(
        "GPU-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

/// An HGX H200 board's bus ids for GPUs 0–7; further GPUs go on further PCI domains.
pub(super) fn pci_bus_id(index: u32) -> String {
    const BUS: [u8; 8] = [0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb];
    format!("{:08X}:{:02X}:00.0", index / 8, BUS[(index % 8) as usize])
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::scrape::prom::{families, parse};
    use crate::sim::gpu_fleet::GpuFleet;
    use crate::sim::GpuSim;

    fn page(extra: bool) -> String {
        let fleet = GpuFleet::new(
            GpuSim {
                count: 2,
                add_field_at: extra.then_some(Duration::ZERO),
                hostname: "node \"7\"".into(),
                ..GpuSim::default()
            },
            1,
            0,
            super::super::gpu_fleet::now_ns(),
        );
        write_page(&fleet.read(), &fleet.cfg.hostname)
    }

    #[test]
    fn the_page_parses_with_every_family_per_gpu_and_dcgms_labels() {
        let text = page(false);
        let parsed = parse(&text, Format::Text).expect("the repo's parser takes it");
        let meta = families(&text);
        assert_eq!(parsed.samples.len(), 9 * 2, "{text}");
        for s in &parsed.samples {
            assert_eq!(s.label("modelName"), Some(MODEL_NAME));
            assert_eq!(s.label("Hostname"), Some("node \"7\""), "escaped and back");
            assert_eq!(s.label("DCGM_FI_DRIVER_VERSION"), Some(DRIVER_VERSION));
            let i: u32 = s.label("gpu").unwrap().parse().unwrap();
            assert_eq!(s.label("device"), Some(format!("nvidia{i}").as_str()));
            assert_eq!(s.label("UUID"), Some(uuid("node \"7\"", i).as_str()));
            assert_eq!(s.label("pci_bus_id"), Some(pci_bus_id(i).as_str()));
            assert!(meta[&s.name].kind.is_some(), "{} has a # TYPE", s.name);
        }
        let kind = |n: &str| meta[n].kind.clone().unwrap();
        assert_eq!(kind("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"), "counter");
        assert_eq!(kind("DCGM_FI_DEV_POWER_USAGE"), "gauge");
        let power = parsed
            .samples
            .iter()
            .find(|s| s.name == "DCGM_FI_DEV_POWER_USAGE")
            .unwrap();
        assert!((89.0..=91.0).contains(&power.value), "idle ±1 %: {power:?}");
        assert!(!text.contains("XID"), "no extra field before add_field_at");

        let text = page(true);
        let parsed = parse(&text, Format::Text).expect("parses");
        assert_eq!(parsed.samples.len(), 11 * 2);
        assert_eq!(
            families(&text)["DCGM_FI_DEV_POWER_VIOLATION"]
                .kind
                .as_deref(),
            Some("counter")
        );
    }

    #[test]
    fn uuids_and_bus_ids_are_distinct_and_stable() {
        let ids: std::collections::HashSet<String> = (0..16).map(|i| uuid("h", i)).collect();
        assert_eq!(ids.len(), 16);
        assert_eq!(uuid("h", 3), uuid("h", 3));
        assert_ne!(uuid("h", 3), uuid("g", 3));
        assert_eq!(uuid("h", 0).len(), "GPU-".len() + 36);
        assert_eq!(pci_bus_id(0), "00000000:18:00.0");
        assert_eq!(pci_bus_id(9), "00000001:2A:00.0");
    }
}
