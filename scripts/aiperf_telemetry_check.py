#!/usr/bin/env python3
"""Checks specperf's GPU telemetry artifacts with AIPerf 0.13's own code.

    aiperf_telemetry_check.py ARTIFACT_DIR [--no-plot]

Run it with the Python of the venv that scripts/aiperf-conformance.sh installs (aiperf==0.13.0),
on a specperf artifact directory of a run with GPU telemetry. Each check prints one line, `ok` or
`FAIL`; the exit status is 1 when any failed, 2 on usage errors.

* `gpu_telemetry_export.jsonl`: every line validates as AIPerf's `TelemetryRecord`
  (`model_validate_json`) and is byte for byte what AIPerf's JSONL writer writes for that record
  (`orjson.dumps(scrub_non_finite(record.model_dump(exclude_none=True, mode="json")))`); lines
  come in time order.
* `profile_export_aiperf.json` `telemetry_data`: validates as AIPerf's `TelemetryExportData` (the
  model its JSON exporter dumps) and dumps back to itself (`exclude_unset`, `exclude_none`; times
  compared as instants); its endpoints, GPUs and every statistic are what AIPerf's
  `TelemetryHierarchy` computes from the JSONL over the section's window (`start_time`,
  `end_time`), to 1e-9 relative; an energy delta may instead be `summary.json`'s
  `energy.gpus[].counter_energy_j` (specperf's own, in MJ).
* The energy-efficiency metrics of `profile_export_aiperf.json`: exactly the ones AIPerf's
  `EnergyEfficiencyAnalyzer` emits from the JSONL and the summary's own metrics, with its units
  and values (to 1e-6), total energy being `summary.json`'s `energy.total_energy_j` when it has
  one; each is in `profile_export_aiperf.csv` as AIPerf labels and rounds it.
* The GPU table of `profile_export_aiperf.csv` is the one AIPerf's CSV exporter writes for the
  validated section.
* `aiperf plot` on a copy of the directory, with AIPerf's single-run plots that read GPU telemetry
  switched on, draws each of them (`gpu_utilization_and_throughput_over_time`, written as HTML: see
  PLOT_AS_HTML in aiperf_conformance.py), with no warning about the telemetry.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
import math
import os
import shutil
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

JSONL = "gpu_telemetry_export.jsonl"
PROFILE_JSON = "profile_export_aiperf.json"
PROFILE_CSV = "profile_export_aiperf.csv"
SUMMARY_JSON = "summary.json"
# AIPerf's Environment.GPU.FINAL_SCRAPE_GRACE_NS.
GRACE_NS = 666_000_000


class Checks:
    def __init__(self) -> None:
        self.failed = 0

    def report(self, name: str, problems: list[str], ok: str) -> None:
        if problems:
            self.failed += 1
            print(f"FAIL {name}: {problems[0]}")
            for p in problems[1:10]:
                print(f"     {name}: {p}")
            if len(problems) > 10:
                print(f"     {name}: ... {len(problems) - 10} more")
        else:
            print(f"ok   {name}: {ok}")


def close(a, b, rel: float) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=1e-12)


def instant(v) -> datetime:
    d = v if isinstance(v, datetime) else datetime.fromisoformat(str(v).replace("Z", "+00:00"))
    # AIPerf itself writes naive local time.
    return d if d.tzinfo else d.astimezone()


def to_ns(d: datetime) -> int:
    d = instant(d)
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    delta = d - epoch
    return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def check_jsonl(d: Path, checks: Checks):
    """Returns the validated records (None when the file is missing)."""
    import orjson
    from aiperf.common.finite import scrub_non_finite
    from aiperf.common.models.telemetry_models import TelemetryRecord
    from pydantic import ValidationError

    path = d / JSONL
    if not path.exists():
        checks.report("jsonl", [f"{path} missing"], "")
        return None
    records, problems = [], []
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):
        problems.append("the last line has no newline (AIPerf ends every line with one)")
    for n, line in enumerate(raw.splitlines(), 1):
        try:
            rec = TelemetryRecord.model_validate_json(line)
        except ValidationError as e:
            problems.append(f"line {n}: {e}")
            continue
        back = orjson.dumps(scrub_non_finite(rec.model_dump(exclude_none=True, mode="json")))
        if back != line:
            problems.append(f"line {n} is not AIPerf's dump of its record:\n       ours  {line!r}\n       AIPerf {back!r}")
        records.append(rec)
    ts = [r.timestamp_ns for r in records]
    if ts != sorted(ts):
        problems.append("lines are not in time order")
    if not records:
        problems.append("no line")
    checks.report(
        "jsonl",
        problems,
        f"{len(records)} lines are AIPerf TelemetryRecords, byte for byte as its writer dumps them",
    )
    return records


def check_section(d: Path, records, profile: dict, summary: dict, checks: Checks):
    """Returns the validated TelemetryExportData (None when it does not validate)."""
    from aiperf.common.models.export_models import TelemetryExportData
    from aiperf.common.models.telemetry_models import TelemetryHierarchy
    from aiperf.common.models.server_metrics_models import TimeRangeFilter
    from aiperf.exporters.utils import normalize_endpoint_display
    from aiperf.gpu_telemetry.constants import (
        GPU_TELEMETRY_COUNTER_METRICS,
        get_gpu_telemetry_metrics_config,
    )
    from pydantic import ValidationError

    section = profile.get("telemetry_data")
    problems: list[str] = []
    try:
        data = TelemetryExportData.model_validate(section)
    except ValidationError as e:
        checks.report("section model", [str(e)], "")
        return None
    back = data.model_dump(mode="json", exclude_unset=True, exclude_none=True)
    for k in ("start_time", "end_time"):
        if instant(back["summary"][k]) != instant(section["summary"][k]):
            problems.append(f"summary.{k}: {section['summary'][k]} reads back as {back['summary'][k]}")
        back["summary"][k] = section["summary"][k]
    if back != section:
        problems.append("does not dump back to itself:\n       " + json.dumps(back)[:2000])
    checks.report(
        "section model",
        problems,
        f"telemetry_data validates as TelemetryExportData and dumps back to itself "
        f"({sum(len(e.gpus) for e in data.endpoints.values())} GPUs)",
    )
    if records is None:
        return data

    # AIPerf's own statistics from the JSONL, over the section's window.
    problems = []
    hierarchy = TelemetryHierarchy()
    for r in records:
        hierarchy.add_record(r)
    window = TimeRangeFilter(
        start_ns=to_ns(data.summary.start_time), end_ns=to_ns(data.summary.end_time)
    )
    ours_energy = {
        (g["id"]["source"], g["id"]["uuid"]): g.get("counter_energy_j")
        for g in ((summary.get("energy") or {}).get("gpus") or [])
    }
    # As AIPerf's export_results keys them (a later endpoint or GPU of the same name replaces
    # the earlier one).
    want_endpoints: dict[str, dict[str, tuple[str, object]]] = {}
    for url, gpus in hierarchy.telemetry_source_endpoints.items():
        want_endpoints[normalize_endpoint_display(url)] = {
            f"gpu_{g.metadata.gpu_index}": (url, g) for g in gpus.values()
        }
    if list(want_endpoints) != list(data.endpoints):
        problems.append(f"endpoints {list(data.endpoints)}, AIPerf's {list(want_endpoints)}")
    n_values = 0
    for ep, gpus in want_endpoints.items():
        got_gpus = data.endpoints.get(ep)
        if got_gpus is None:
            continue
        if list(gpus) != list(got_gpus.gpus):
            problems.append(f"{ep}: GPUs {list(got_gpus.gpus)}, AIPerf's {list(gpus)}")
        for key, (url, g) in gpus.items():
            got = got_gpus.gpus.get(key)
            if got is None:
                continue
            md = g.metadata
            for field, want in [
                ("gpu_index", md.gpu_index),
                ("gpu_name", md.gpu_model_name),
                ("gpu_uuid", md.gpu_uuid),
                ("platform", md.platform),
                ("hostname", md.hostname),
            ]:
                if getattr(got, field) != want:
                    problems.append(f"{ep}.{key}.{field}: {getattr(got, field)!r}, AIPerf's {want!r}")
            want_metrics = {}
            for display, name, unit in get_gpu_telemetry_metrics_config():
                try:
                    r = g.get_metric_result(
                        name, name, display, unit,
                        time_filter=window, is_counter=name in GPU_TELEMETRY_COUNTER_METRICS,
                    )
                except Exception:  # AIPerf's NoMetricValue: no value in the window
                    continue
                want_metrics[name] = r.to_json_result()
            if list(want_metrics) != list(got.metrics):
                problems.append(f"{ep}.{key}: metrics {list(got.metrics)}, AIPerf's {list(want_metrics)}")
            for name, want in want_metrics.items():
                have = got.metrics.get(name)
                if have is None:
                    continue
                w = want.model_dump(mode="json", exclude_none=True)
                h = have.model_dump(mode="json", exclude_none=True)
                if set(w) != set(h):
                    problems.append(f"{ep}.{key}.{name}: fields {sorted(h)}, AIPerf's {sorted(w)}")
                for stat, wv in w.items():
                    hv = h.get(stat)
                    n_values += 1
                    if stat == "unit":
                        ok = hv == wv
                    else:
                        ok = close(hv, wv, 1e-9)
                        mine = ours_energy.get((url, md.gpu_uuid))
                        if not ok and name.endswith("_energy_consumption") and mine is not None:
                            # specperf's own counter delta, at the window's exact edges.
                            ok = stat == "avg" and close(hv, mine * 1e-6, 1e-9)
                    if not ok:
                        problems.append(f"{ep}.{key}.{name}.{stat}: {hv}, AIPerf's {wv}")
    checks.report(
        "section statistics",
        problems,
        f"{n_values} figures equal AIPerf's own over [{data.summary.start_time}, {data.summary.end_time}]",
    )
    return data


def check_efficiency(d: Path, records, profile: dict, summary: dict, checks: Checks):
    """AIPerf's EnergyEfficiencyAnalyzer on the JSONL and the summary's metrics."""
    from aiperf.common.models.telemetry_models import TelemetryHierarchy
    from aiperf.gpu_telemetry.accumulator import GPUTelemetryAccumulator
    from aiperf.metrics.energy_efficiency_analyzer import EnergyEfficiencyAnalyzer

    # The accumulator's query methods on AIPerf's hierarchy of the JSONL (its constructor wants
    # a whole benchmark run; these methods read the hierarchy only).
    gpu = GPUTelemetryAccumulator.__new__(GPUTelemetryAccumulator)
    gpu._hierarchy = TelemetryHierarchy()
    for r in records:
        gpu._hierarchy.add_record(r)
    gpu.debug = lambda *a, **k: None
    ts = [r.timestamp_ns for r in records]
    gpu.scrape_span_ns = lambda: (min(ts), max(ts)) if ts else None
    energy = summary.get("energy") or {}
    ours_j = energy.get("total_energy_j")
    if ours_j:
        # specperf's total (same counters, the window's exact edges), as the analyzer's input.
        n = len(energy.get("gpus") or []) or 1
        gpu.total_energy_joules = lambda *a, **k: (ours_j, n)
    start_ns = round(summary["benchmark_start_unix_s"] * 1e9)
    end_ns = round(summary["benchmark_end_unix_s"] * 1e9)
    results = {
        tag: SimpleNamespace(avg=v.get("avg"))
        for tag, v in profile.items()
        if isinstance(v, dict) and "unit" in v and "avg" in v
    }
    phases = (profile.get("input_config") or {}).get("phases") or []
    profiling = [p for p in phases if p.get("kind") == "profiling"] or [{}]
    run = SimpleNamespace(
        cfg=SimpleNamespace(
            get_profiling_phases=lambda: [SimpleNamespace(concurrency=profiling[0].get("concurrency"))],
            gpu_telemetry=SimpleNamespace(urls=["x"], collector="dcgm"),
        )
    )
    ctx = SimpleNamespace(
        get_accumulator=lambda _t: gpu,
        get_output=lambda _t: SimpleNamespace(results=results),
        start_ns=start_ns,
        end_ns=end_ns,
    )
    want = asyncio.run(EnergyEfficiencyAnalyzer(run=run).analyze(ctx))
    problems: list[str] = []
    want_tags = [m.tag for m in want]
    got_tags = [t for t in profile if t in efficiency_tags()]
    if got_tags != want_tags:
        problems.append(f"metrics {got_tags}, AIPerf's analyzer {want_tags}")
    if ours_j and energy.get("avg_total_power_w") is not None and (end_ns > start_ns):
        avg = energy["avg_total_power_w"]
        if not close(avg, ours_j / ((end_ns - start_ns) / 1e9), 1e-6):
            problems.append(f"summary.json energy.avg_total_power_w {avg} is not total / window")
    rows = csv_scalars(d)
    for m in want:
        got = profile.get(m.tag)
        if got is None:
            continue
        if got.get("unit") != m.unit or set(got) != {"unit", "avg"}:
            problems.append(f"{m.tag}: {got}, AIPerf's unit {m.unit!r} and avg only")
        if not close(got.get("avg"), m.avg, 1e-6):
            problems.append(f"{m.tag}: {got.get('avg')}, AIPerf's analyzer {m.avg}")
        label = f"{m.header} ({m.unit})"
        if rows.get(label) != f"{got.get('avg', 0):.2f}":
            problems.append(f"CSV row {label!r}: {rows.get(label)!r}, want {got.get('avg', 0):.2f}")
    checks.report(
        "efficiency metrics",
        problems,
        f"{len(want)} metrics are AIPerf's analyzer's"
        + (" (total energy specperf's)" if ours_j else "")
        + ", in the JSON and the CSV",
    )


def efficiency_tags() -> set[str]:
    """Every energy-efficiency tag AIPerf registers (both vendors)."""
    from aiperf.metrics.types import power_efficiency_metrics as pem

    return {
        c.tag
        for c in vars(pem).values()
        if isinstance(c, type) and c.__dict__.get("__is_abstract__") is False
    }


def csv_scalars(d: Path) -> dict[str, str]:
    """The `Metric,Value` rows of the CSV (its second section, up to the next blank line)."""
    rows: dict[str, str] = {}
    inside = False
    for row in csv.reader(io.StringIO((d / PROFILE_CSV).read_text())):
        if row == ["Metric", "Value"]:
            inside = True
        elif inside and not row:
            break
        elif inside:
            rows[row[0]] = row[1] if len(row) > 1 else ""
    return rows


def check_csv(d: Path, data, checks: Checks) -> None:
    from aiperf.exporters.metrics_csv_exporter import MetricsCsvExporter

    exporter = MetricsCsvExporter.__new__(MetricsCsvExporter)
    exporter._telemetry_results = data
    exporter.warning = lambda *a, **k: None
    buf = io.StringIO()
    exporter._write_telemetry_section(csv.writer(buf))
    # AIPerf's csv.writer ends lines with \r\n; specperf's CSV with \n throughout.
    want = buf.getvalue().replace("\r\n", "\n")
    text = (d / PROFILE_CSV).read_text()
    problems = []
    if not text.endswith(want):
        at = text.find("\n\n\nEndpoint,")
        got = text[at + 1 :] if at >= 0 else "(no GPU table)"
        problems.append(f"the CSV's GPU table differs from AIPerf's:\n--- ours\n{got}\n--- AIPerf\n{want}")
    checks.report("csv", problems, f"the GPU table is AIPerf's ({want.count(chr(10)) - 3} rows)")


def check_plot(d: Path, checks: Checks) -> None:
    import yaml
    from importlib.resources import files

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from aiperf_conformance import PLOT_AS_HTML, run

    cfg = yaml.safe_load((files("aiperf.plot") / "default_plot_config.yaml").read_text())
    vis = cfg["visualization"]
    gpu_plots = [
        name for name, spec in vis["single_run_plots"].items()
        if any(
            str(spec.get(axis, "")).startswith(("nvidia_", "amd_", "gpu_"))
            for axis in ("x", "y", "y2")
        )
    ]
    problems: list[str] = []
    if not gpu_plots:
        problems.append("AIPerf's plot config names no GPU telemetry plot")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        copy = tmp / "run"
        shutil.copytree(d, copy)
        shutil.rmtree(copy / "plots", ignore_errors=True)
        vis["single_run_defaults"] = gpu_plots
        config = tmp / "gpu_plots.yaml"
        config.write_text(yaml.safe_dump(cfg, sort_keys=False))
        out = tmp / "plots"
        env = dict(os.environ, HOME=str(tmp), COLUMNS="250")
        args = [str(copy), "--output", str(out), "--config", str(config)]
        # AIPerf's own plot code, its figures written as HTML (see PLOT_AS_HTML).
        p = run([sys.executable, "-c", PLOT_AS_HTML, *args], env=env)
        kind = "html"
        text = (p.stdout + p.stderr).strip()
        drawn = sorted(f.name for f in out.rglob(f"*.{kind}")) if out.exists() else []
        if p.returncode != 0:
            problems.append(f"exit {p.returncode}: " + "\n     ".join(text.splitlines()[-15:]))
        for name in gpu_plots:
            if f"{name}.{kind}" not in drawn:
                problems.append(f"{name}.{kind} not drawn (drawn: {drawn})")
        for line in text.splitlines():
            low = line.lower()
            if ("warning" in low or "error" in low or "skipping" in low) and (
                "gpu" in low or "telemetry" in low
            ):
                problems.append(line.strip())
    checks.report("aiperf plot", problems, f"draws {', '.join(f'{n}.{kind}' for n in gpu_plots)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path, help="a specperf artifact directory of a run with GPU telemetry")
    ap.add_argument("--no-plot", action="store_true", help="skip `aiperf plot` (the slow check)")
    args = ap.parse_args()
    d: Path = args.dir
    for name in (PROFILE_JSON, PROFILE_CSV, SUMMARY_JSON):
        if not (d / name).exists():
            ap.error(f"{d / name} missing (give specperf's --artifact-dir of a finished run)")
    profile = json.loads((d / PROFILE_JSON).read_text())
    summary = json.loads((d / SUMMARY_JSON).read_text())
    checks = Checks()
    records = check_jsonl(d, checks)
    data = check_section(d, records, profile, summary, checks)
    if records is not None:
        check_efficiency(d, records, profile, summary, checks)
    if data is not None:
        check_csv(d, data, checks)
    if not args.no_plot:
        check_plot(d, checks)
    if checks.failed:
        print(f"AIPerf 0.13 telemetry conformance: {checks.failed} checks failed", file=sys.stderr)
        return 1
    print("AIPerf 0.13 telemetry conformance: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
