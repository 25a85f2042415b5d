//! DCGM exporter pages as a telemetry source: the Prometheus text the engines' pages use, read
//! with the same client and parser (`scrape::prom`), one sample per GPU per `DCGM_FI_*` family.
//!
//! A GPU is its `(Hostname, gpu)` labels (`UUID` and `modelName` describe it); families the
//! exporter serves that specperf does not keep are ignored, a family that is missing for a GPU is
//! a field the GPU does not give at that read. MIG and per-process series (a `GPU_I_ID` label)
//! are not whole-GPU readings and are skipped.

use std::collections::BTreeMap;
use std::time::Duration;

use http::Uri;

use super::{unix_ns, Field, Frame, GpuId, TelemetryError, Values};
use crate::client::{BodyCap, Client, Fetched};
use crate::scrape::prom::{self, Format};

/// AIPerf's default DCGM exporter endpoints, read when `--gpu-telemetry` names none.
pub(crate) const DEFAULT_ENDPOINTS: [&str; 2] = [
    "http://localhost:9400/metrics",
    "http://localhost:9401/metrics",
];

const PAGE_CAP: BodyCap = BodyCap {
    bytes: 16 << 20,
    name: "DCGM page size cap",
};

/// Turns `host:port`, `host:port/path` or a URL into the page URL (`/metrics` when no path).
pub(crate) fn normalize(endpoint: &str) -> Result<String, String> {
    let e = endpoint.trim();
    let with_scheme = if e.contains("://") {
        e.to_owned()
    } else {
        format!("http://{e}")
    };
    let uri: Uri = with_scheme
        .parse()
        .map_err(|err| format!("{endpoint:?} is not a URL or host:port ({err})"))?;
    if uri.host().is_none() {
        return Err(format!("{endpoint:?} names no host"));
    }
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err(format!(
            "{endpoint:?}: only http and https pages can be read"
        ));
    }
    Ok(match uri.path() {
        "" | "/" => format!("{}/metrics", with_scheme.trim_end_matches('/')),
        _ => with_scheme,
    })
}

/// The GPUs of one page and their values.
pub(crate) fn parse_page(source: &str, text: &str) -> Result<Vec<(GpuId, Values)>, TelemetryError> {
    let page =
        prom::parse(text, Format::Text).map_err(|e| TelemetryError::Malformed(e.to_string()))?;
    let mut gpus: BTreeMap<(String, u32), (GpuId, Values)> = BTreeMap::new();
    for s in &page.samples {
        let Some((field, factor)) = Field::of_dcgm(&s.name) else {
            continue;
        };
        if s.label("GPU_I_ID").is_some_and(|v| !v.is_empty()) || !s.value.is_finite() {
            continue;
        }
        let Some(index) = s.label("gpu").and_then(|g| g.parse::<u32>().ok()) else {
            continue;
        };
        let hostname = s.label("Hostname").unwrap_or_default().to_owned();
        let entry = gpus.entry((hostname.clone(), index)).or_insert_with(|| {
            (
                GpuId {
                    source: source.to_owned(),
                    hostname,
                    index,
                    uuid: s.label("UUID").unwrap_or_default().to_owned(),
                    model: s.label("modelName").unwrap_or_default().to_owned(),
                },
                Values::new(),
            )
        });
        entry.1.insert(field, s.value * factor);
    }
    if gpus.is_empty() {
        return Err(TelemetryError::NoGpus);
    }
    Ok(gpus.into_values().collect())
}

/// Reads every endpoint at once; one frame each.
pub(crate) async fn read(client: &Client, urls: &[String], timeout: Duration) -> Vec<Frame> {
    let mut set = tokio::task::JoinSet::new();
    for (i, url) in urls.iter().enumerate() {
        let (client, url) = (client.clone(), url.clone());
        set.spawn(async move {
            let t0 = unix_ns();
            let r = fetch(&client, &url, timeout).await;
            let t1 = unix_ns();
            let gpus = r.and_then(|text| parse_page(&url, &text));
            (
                i,
                Frame {
                    source: url,
                    t_ns: t0 + (t1.saturating_sub(t0)) / 2,
                    gpus,
                },
            )
        });
    }
    let mut out: Vec<Option<Frame>> = vec![None; urls.len()];
    while let Some(j) = set.join_next().await {
        if let Ok((i, f)) = j {
            out[i] = Some(f);
        }
    }
    out.into_iter()
        .zip(urls)
        .map(|(f, u)| {
            f.unwrap_or_else(|| Frame {
                source: u.clone(),
                t_ns: unix_ns(),
                gpus: Err(TelemetryError::Fetch("the read task failed".into())),
            })
        })
        .collect()
}

async fn fetch(client: &Client, url: &str, timeout: Duration) -> Result<String, TelemetryError> {
    let uri: Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| TelemetryError::Fetch(e.to_string()))?;
    let Fetched { status, body, .. } = client
        .get(uri, timeout, crate::scrape::ACCEPT, PAGE_CAP)
        .await
        .map_err(|e| TelemetryError::Fetch(e.to_string()))?;
    if status != 200 {
        return Err(TelemetryError::Status(status));
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "\
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-a\",device=\"nvidia0\",modelName=\"NVIDIA H200\",Hostname=\"n1\"} 301.5
DCGM_FI_DEV_POWER_USAGE{gpu=\"1\",UUID=\"GPU-b\",device=\"nvidia1\",modelName=\"NVIDIA H200\",Hostname=\"n1\"} 120
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"n1\"} 123456789
# TYPE DCGM_FI_PROF_SM_ACTIVE gauge
DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"n1\"} 0.25
DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"n1\",GPU_I_ID=\"1\"} 0.9
# TYPE DCGM_FI_DEV_VGPU_LICENSE_STATUS gauge
DCGM_FI_DEV_VGPU_LICENSE_STATUS{gpu=\"0\",Hostname=\"n1\"} 0
";

    #[test]
    fn a_page_gives_one_gpu_per_index_in_canonical_units() {
        let gpus = parse_page("http://n1:9400/metrics", PAGE).expect("parses");
        assert_eq!(gpus.len(), 2);
        let (id, v) = &gpus[0];
        assert_eq!(
            (id.index, id.uuid.as_str(), id.model.as_str()),
            (0, "GPU-a", "NVIDIA H200")
        );
        assert_eq!(id.hostname, "n1");
        assert_eq!(v[&Field::Power], 301.5);
        assert!((v[&Field::Energy] - 123_456.789).abs() < 1e-6, "mJ to J");
        assert_eq!(
            v[&Field::SmActive],
            25.0,
            "ratio to %, the MIG series skipped"
        );
        assert_eq!(gpus[1].1.len(), 1, "GPU 1 gives power only");
    }

    #[test]
    fn a_page_without_gpus_or_broken_is_an_error_not_an_empty_read() {
        assert_eq!(parse_page("u", "# nothing\n"), Err(TelemetryError::NoGpus));
        assert!(matches!(
            parse_page("u", "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\" 1\n"),
            Err(TelemetryError::Malformed(_))
        ));
    }

    #[test]
    fn endpoints_normalize_as_aiperf_accepts_them() {
        assert_eq!(
            normalize("node1:9400").unwrap(),
            "http://node1:9400/metrics"
        );
        assert_eq!(
            normalize("http://node1:9401/metrics").unwrap(),
            "http://node1:9401/metrics"
        );
        assert_eq!(normalize("http://h:1/").unwrap(), "http://h:1/metrics");
        assert!(normalize("ftp://h/x").is_err());
    }
}
