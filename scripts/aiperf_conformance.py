#!/usr/bin/env python3
"""Checks specperf's AIPerf-named artifacts with AIPerf 0.13's own readers.

    aiperf_conformance.py DIR... [--speed-bench DIR=CATEGORY]... [--sweep DIR]...

Run it with the Python of the venv that scripts/aiperf-conformance.sh installs (aiperf==0.13.0).
For every artifact directory:

* `profile_export_aiperf.json` is validated with AIPerf's `JsonExportData` (each metric that model
  does not name, such as `effective_concurrency`, with `JsonMetricResult`), and its
  `telemetry_data` must be the object AIPerf writes, never null (`aiperf plot` warns on null);
* every line of `profile_export.jsonl` with `MetricRecordInfo`, and each non-null
  `spec_decode_acceptance` with `SpecDecodeAcceptanceRecord` (its validators tie the histogram to
  the steps and accepted tokens); a request whose `records.jsonl` line carries `spec` must have
  AIPerf's per-request spec-decode tags its figures define (all six for vLLM / SGLang; the rate
  and token counts for llama.cpp) with AIPerf's units, and vLLM / SGLang ones the acceptance
  object;
* `server_metrics_export.json` with `ServerMetricsExportData`;
* `inputs.json` with `InputsFile` (the model AIPerf writes it from), and every record's
  `conversation_id` / `turn_index` must name a session and payload in it (AIPerf's record model
  says a record's request is looked up there by them);
* `aiperf plot`, with AIPerf's default plot config switched to every single-run plot it defines,
  must draw each of them except the GPU ones, written as HTML (the figures are AIPerf's; only
  Plotly's image writer is swapped, see PLOT_AS_HTML).

A `--sweep DIR` directory (a specperf sweep: `sweep.json` at its top) is checked as AIPerf reads a
sweep: AIPerf's `ModeDetector` must find exactly the runs `sweep.json` names, in AIPerf's layout,
plus each repeated point's `aggregate/` (and nothing else); every `profile_export_aiperf_aggregate.json`
must validate with `JsonExportData`, load with `aiperf plot`'s `DataLoader`, and carry the same
mean request throughput as `sweep.json`; each run directory is checked as above, without the
single-run plots; then `aiperf plot` over the whole sweep (multi-run mode) must draw its
figures, leaving out only those that need GPU telemetry (`output_token_throughput_per_gpu`).

An `--agentx DIR=AIPERF_DIR` pair is an AgentX replay by specperf (DIR) and by AIPerf 0.13 itself
(AIPERF_DIR), same argv, traces and server. DIR is checked like the others but for `inputs.json`
(neither tool writes one for this replay), then against what AIPerf wrote for the same run: every
per-record metric tag and metadata key AIPerf wrote in a phase, every metric object of its
summary and of its `warmup_metrics`, and its `branch_stats` keys must be in DIR too, with
AIPerf's units, except the `http_req_*` timings specperf's client does not measure
(`HTTP_NOT_MEASURED`); the labels must be AIPerf's (each phase's `phase_name` / `phase_index` /
`profiling_index` / `phase_kind`, `session_num` counting each phase's requests from 0, the
`source_kind` of each kind of conversation); and the `input_config` fields AIPerf sets for the
replay must be there with AIPerf's values (paths and the tokenizer's name aside).

A `--speed-bench DIR=CATEGORY` directory is checked like the others and then given to
`aiperf speed-bench-report`, which must print CATEGORY and an acceptance length equal to the one in
specperf's `summary.json` (exactly, in AIPerf's own extraction; to its two printed decimals on the
command's output).

Every failure is printed as `FILE: field.path: message` (pydantic's error locations); the exit status
is 1 when anything failed, 2 on usage errors.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

PROFILE_JSON = "profile_export_aiperf.json"
RECORDS_JSONL = "profile_export.jsonl"
SERVER_METRICS_JSON = "server_metrics_export.json"
INPUTS_JSON = "inputs.json"
OUR_RECORDS = "records.jsonl"

# AIPerf's http_req_* metrics that need its aiohttp trace hooks (pool wait, DNS, TCP/TLS connect,
# the time the last request byte was written) and the ones built from them: specperf's client
# (hyper) reports none of those times, so it writes none of these rather than estimate them.
HTTP_NOT_MEASURED = {
    "http_req_blocked",
    "http_req_dns_lookup",
    "http_req_connecting",
    "http_req_connection_overhead",
    "http_req_sending",
    "http_req_waiting",
    "http_req_duration",
    "http_req_total",
}

# input_config fields AIPerf sets for an AgentX replay that must carry its values (JSON paths).
AGENTX_INPUT_CONFIG = [
    ("scenario",),
    ("unsafe_override",),
    ("endpoint", "use_server_token_count"),
    ("endpoint", "streaming"),
    ("datasets", 0, "type"),
    ("datasets", 0, "format"),
    ("datasets", 0, "random_seed"),
    ("datasets", 0, "trace_idle_gap_cap_seconds"),
    ("phases", -1, "name"),
    ("phases", -1, "type"),
    ("phases", -1, "timing_mode"),
    ("phases", -1, "concurrency"),
    ("phases", -1, "duration"),
    ("phases", -1, "trajectory_start_min_ratio"),
    ("phases", -1, "trajectory_start_max_ratio"),
    ("phases", -1, "system_idle_gap_cap_seconds"),
]

# AIPerf 0.13's per-request spec-decode tags and units (aiperf/metrics/types/spec_decode_metrics.py).
SPEC_UNITS = {
    "spec_decode_acceptance_length": "ratio",
    "spec_decode_draft_acceptance_rate": "%",
    "spec_decode_accepted_per_verified": "ratio",
    "spec_decode_steps": "count",
    "spec_decode_accepted_draft_tokens": "tokens",
    "spec_decode_draft_tokens": "tokens",
}


class Failures:
    """Collects `file: location: message` lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, path: Path | str, loc: str, msg: str) -> None:
        self.lines.append(f"{path}: {loc}: {msg}")

    def pydantic(self, path: Path | str, err, prefix: str = "") -> None:
        for e in err.errors():
            loc = ".".join(str(p) for p in e.get("loc", ())) or "(root)"
            got = e.get("input")
            shown = json.dumps(got, default=str)
            if len(shown) > 120:
                shown = shown[:117] + "..."
            self.add(path, prefix + loc, f"{e.get('msg')} (got {shown})")


def load_json(path: Path, fails: Failures):
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        fails.add(path, "(file)", "missing")
    except (OSError, ValueError) as e:
        fails.add(path, "(file)", f"not JSON: {e}")
    return None


def check_profile(d: Path, fails: Failures) -> None:
    from pydantic import ValidationError

    from aiperf.common.models.export_models import JsonExportData, JsonMetricResult

    path = d / PROFILE_JSON
    data = load_json(path, fails)
    if data is None:
        return
    try:
        JsonExportData.model_validate(data)
    except ValidationError as e:
        fails.pydantic(path, e)
    except Exception as e:  # AIPerf's own validators can raise on shapes they do not expect
        fails.add(path, "(model)", f"{type(e).__name__}: {e}")
    # AIPerf's model takes metrics it does not name (`extra="allow"`) unchecked: each one (the
    # time-weighted effective_* / active_* among them) must still be a JsonMetricResult.
    for key, value in data.items():
        if isinstance(value, dict) and "unit" in value:
            try:
                JsonMetricResult.model_validate(value)
            except ValidationError as e:
                fails.pydantic(path, e, prefix=f"{key}.")
    if not isinstance(data.get("telemetry_data"), dict):
        fails.add(
            path,
            "telemetry_data",
            "must be the object AIPerf writes ({summary, endpoints, error_summary}), "
            f"got {json.dumps(data.get('telemetry_data'))}",
        )


def check_records(d: Path, fails: Failures) -> int:
    from pydantic import ValidationError

    from aiperf.common.models.record_models import MetricRecordInfo

    path = d / RECORDS_JSONL
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        fails.add(path, "(file)", f"unreadable: {e}")
        return 0
    if not lines:
        fails.add(path, "(file)", "no records")
    for n, line in enumerate(lines, 1):
        try:
            MetricRecordInfo.model_validate_json(line)
        except ValidationError as e:
            fails.pydantic(path, e, prefix=f"line {n}: ")
        except Exception as e:
            fails.add(path, f"line {n}", f"{type(e).__name__}: {e}")
    check_spec_records(d, lines, fails)
    return len(lines)


def spec_tags_defined(spec: dict) -> set[str]:
    """The per-request tags a `records.jsonl` `spec` object defines (AIPerf's formulas: AL and
    accepted-per-verified need steps, the rate needs drafts)."""
    steps, acc, drafts = (spec.get(k) for k in ("steps", "accepted_tokens", "draft_tokens"))
    tags = set()
    if steps is not None:
        tags.add("spec_decode_steps")
    if acc is not None:
        tags.add("spec_decode_accepted_draft_tokens")
    if drafts is not None:
        tags.add("spec_decode_draft_tokens")
    if steps and acc is not None:
        tags.add("spec_decode_acceptance_length")
    if drafts and acc is not None:
        tags.add("spec_decode_draft_acceptance_rate")
    if None not in (steps, acc, drafts) and drafts + steps > 0:
        tags.add("spec_decode_accepted_per_verified")
    return tags


def check_spec_records(d: Path, lines: list[str], fails: Failures) -> None:
    """Each non-null `spec_decode_acceptance` with AIPerf's own model, and the records whose
    request reported spec-decode figures (`records.jsonl` `spec`) carry AIPerf's tags for them."""
    from pydantic import ValidationError

    from aiperf.common.models.spec_decode_models import SpecDecodeAcceptanceRecord

    path = d / RECORDS_JSONL
    # Our own records, by request id, for the ones whose response reported figures.
    specs: dict[str, dict] = {}
    seen: set[str] = set()
    try:
        ours = (d / OUR_RECORDS).read_text().splitlines()
    except OSError:
        ours = []
    for line in ours:
        try:
            r = json.loads(line)
        except ValueError:
            continue
        # profile_export.jsonl's x_request_id: the session's for AgentX, else specperf-<id>.
        session = r.get("session") if isinstance(r.get("session"), dict) else {}
        rid = session.get("x_request_id") or f"specperf-{r.get('id')}"
        if rid in seen:  # merged shards reuse ids: ambiguous, left out
            specs.pop(rid, None)
            continue
        seen.add(rid)
        if r.get("outcome", {}).get("status") == "success" and isinstance(r.get("spec"), dict):
            specs[rid] = r["spec"]
    checked = 0
    for n, line in enumerate(lines, 1):
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # reported above
        acc = rec.get("spec_decode_acceptance")
        if acc is not None:
            try:
                SpecDecodeAcceptanceRecord.model_validate(acc)
            except ValidationError as e:
                fails.pydantic(path, e, prefix=f"line {n}: spec_decode_acceptance.")
        rid = (rec.get("metadata") or {}).get("x_request_id")
        spec = specs.get(rid)
        if spec is None:
            continue
        checked += 1
        metrics = rec.get("metrics") or {}
        for tag in sorted(spec_tags_defined(spec)):
            got = metrics.get(tag)
            if not isinstance(got, dict):
                fails.add(path, f"line {n}: metrics.{tag}", f"missing for {rid}, whose response reported {spec}")
            elif got.get("unit") != SPEC_UNITS[tag]:
                fails.add(path, f"line {n}: metrics.{tag}.unit", f"{got.get('unit')!r}, AIPerf writes {SPEC_UNITS[tag]!r}")
        engine = spec.get("source")
        if engine in ("vllm", "sglang") and spec.get("histogram") and spec.get("steps") is not None:
            if acc is None:
                fails.add(path, f"line {n}: spec_decode_acceptance", f"null for {rid}, whose {engine} response reported a histogram")
            elif acc.get("engine") != engine:
                fails.add(path, f"line {n}: spec_decode_acceptance.engine", f"{acc.get('engine')!r}, not {engine!r}")
    if specs:
        print(f"  spec decode: {checked} of {len(specs)} requests with reported figures found in {RECORDS_JSONL}")
        if checked < len(specs):
            fails.add(path, "(file)", f"{len(specs) - checked} requests with spec-decode figures in {OUR_RECORDS} have no line")


def check_inputs(d: Path, fails: Failures) -> None:
    from pydantic import ValidationError

    from aiperf.common.models.dataset_models import InputsFile

    path = d / INPUTS_JSON
    data = load_json(path, fails)
    if data is None:
        return
    try:
        inputs = InputsFile.model_validate(data)
    except ValidationError as e:
        fails.pydantic(path, e)
        return
    if not inputs.data:
        fails.add(path, "data", "no sessions")
    turns = {}
    for i, s in enumerate(inputs.data):
        if not s.session_id:
            fails.add(path, f"data.{i}.session_id", "missing (records name their session by it)")
        if not s.payloads:
            fails.add(path, f"data.{i}.payloads", "empty")
        turns[s.session_id] = len(s.payloads)
    try:
        lines = (d / RECORDS_JSONL).read_text().splitlines()
    except OSError:
        return  # check_records reports it
    for n, line in enumerate(lines, 1):
        try:
            meta = json.loads(line)["metadata"]
            conv, turn = meta["conversation_id"], meta["turn_index"]
        except (ValueError, KeyError, TypeError):
            continue  # check_records reports it
        if conv not in turns:
            fails.add(path, "data", f"no session {conv!r} (line {n} of {RECORDS_JSONL})")
        elif not 0 <= turn < turns[conv]:
            fails.add(
                path,
                "data",
                f"session {conv!r} has {turns[conv]} payloads, line {n} of {RECORDS_JSONL} "
                f"is turn {turn}",
            )


def check_server_metrics(d: Path, fails: Failures) -> None:
    from pydantic import ValidationError

    from aiperf.common.models.server_metrics_models import ServerMetricsExportData

    path = d / SERVER_METRICS_JSON
    data = load_json(path, fails)
    if data is None:
        return
    try:
        ServerMetricsExportData.model_validate(data)
    except ValidationError as e:
        fails.pydantic(path, e)
    except Exception as e:  # AIPerf's own validators can raise on shapes they do not expect
        fails.add(path, "(model)", f"{type(e).__name__}: {e}")


def aiperf_cli() -> list[str]:
    exe = Path(sys.executable).with_name("aiperf")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "aiperf"]


def run(cmd: list[str], cwd: Path | None = None, timeout: int = 300, env=None):
    return subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )


# Runs `aiperf plot` in-process with Plotly's image writer swapped for its HTML writer. PNG needs
# kaleido to start a Chrome per figure: on a loaded 2-core CI machine that took minutes for one
# directory and ran into the subprocess timeout, a failure of the renderer, not of our files. The
# figures (what AIPerf reads from the artifacts and draws) are the same either way.
PLOT_AS_HTML = r"""
import sys
import plotly.basedatatypes as bdt

def write_html_instead(self, file, *args, **kwargs):
    file = str(file)
    stem = file.rsplit(".", 1)[0] if "." in file.rsplit("/", 1)[-1] else file
    self.write_html(stem + ".html", include_plotlyjs="cdn")

bdt.BaseFigure.write_image = write_html_instead
from aiperf.cli import app
sys.argv = ["aiperf", "plot", *sys.argv[1:]]
app()
"""


def every_single_run_plot(tmp: Path) -> Path:
    """AIPerf's own default plot config with every single-run plot it defines switched on (its
    default list leaves some out), so each figure AIPerf can draw for one run is checked."""
    import yaml
    from importlib.resources import files

    cfg = yaml.safe_load((files("aiperf.plot") / "default_plot_config.yaml").read_text())
    vis = cfg["visualization"]
    vis["single_run_defaults"] = list(vis["single_run_plots"])
    path = tmp / "every_single_run_plot.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def aiperf_plot(d: Path, fails: Failures, *, every_single_run: bool, allowed_skip: str, label: str):
    """Runs `aiperf plot` on d; returns its output when it drew, after failing every skipped plot
    other than those naming `allowed_skip` (data AIPerf itself lacks without GPU telemetry) and
    every warning (a file it misread)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "plots"
        config = ["--config", str(every_single_run_plot(Path(tmp)))] if every_single_run else []
        # AIPerf's log lines wrap at the terminal's width, and one line per message is what is
        # checked below.
        env = dict(os.environ, HOME=tmp, COLUMNS="250")
        args = [str(d), "--output", str(out), *config]
        p = run([sys.executable, "-c", PLOT_AS_HTML, *args], env=env)
        kind = "html"
        drawn = sorted(f.name for f in out.rglob(f"*.{kind}")) if out.exists() else []
        text = (p.stdout + p.stderr).strip()
        if p.returncode != 0 or not drawn:
            tail = "\n    ".join(text.splitlines()[-15:])
            fails.add(d, "aiperf plot", f"exit {p.returncode}, {len(drawn)} {kind} plots\n    {tail}")
            return None
        for line in text.splitlines():
            low = line.lower()
            if "skipping plot" in low and allowed_skip in low:
                print("  aiperf plot: " + line.split("WARNING", 1)[-1].strip())
            elif "skipping plot" in low or "warning" in low or "error" in low:
                fails.add(d, "aiperf plot", line.strip())
        print(f"  {label}: {len(drawn)} {kind} plots ({', '.join(drawn)})")
        return text


def check_plot(d: Path, fails: Failures) -> None:
    # AIPerf skips the GPU plots on its own GPU-less directories too: those are listed.
    aiperf_plot(d, fails, every_single_run=True, allowed_skip="['gpu_telemetry']", label="aiperf plot")


def check_sweep(d: Path, fails: Failures) -> None:
    from aiperf.common.models.export_models import JsonExportData
    from aiperf.plot.core.data_loader import DataLoader
    from aiperf.plot.core.mode_detector import ModeDetector

    index = load_json(d / "sweep.json", fails)
    if index is None:
        return
    repeated = index["num_profile_runs"] > 1
    runs = {(d / r["dir"]).resolve() for p in index["points"] for r in p["runs"]}
    found = {r.resolve() for r in ModeDetector().find_run_directories([d])}
    if repeated:
        # AIPerf's own reading of a repeated sweep: one cell per point, its aggregate/ (the
        # trials under profile_runs/ are found when that directory itself is given).
        want = {(d / p["name"] / "aggregate").resolve() for p in index["points"]}
        for p in index["points"]:
            trials = d / p["name"] / "profile_runs"
            got = {r.resolve() for r in ModeDetector().find_run_directories([trials])}
            mine = {(d / r["dir"]).resolve() for r in p["runs"]}
            if got != mine:
                fails.add(trials, "ModeDetector", f"finds {len(got)} runs, sweep.json names {len(mine)}")
    else:
        want = runs
    for m in sorted(want - found):
        fails.add(m, "ModeDetector", "not found by AIPerf")
    for m in sorted(found - want):
        fails.add(m, "ModeDetector", "found by AIPerf, but sweep.json names no such run")
    aggregates = found & want if repeated else set()
    by_point = {}
    for p in index["points"]:
        agg = d / p["name"] / "aggregate" if p["name"] else d / "aggregate"
        by_point[agg.resolve()] = p
    for a in sorted(aggregates):
        p = by_point.get(a)
        path = a / "profile_export_aiperf_aggregate.json"
        doc = load_json(path, fails)
        if doc is None or p is None:
            if p is None:
                fails.add(a, "aggregate", "belongs to no point of sweep.json")
            continue
        try:
            JsonExportData.model_validate(doc)
        except Exception as e:  # pydantic's ValidationError, or a validator's own error
            fails.pydantic(path, e)
        try:
            loaded = DataLoader().load_run(a)
        except Exception as e:
            fails.add(path, "DataLoader.load_run", f"{type(e).__name__}: {e}")
            continue
        got = (doc.get("metrics") or {}).get("request_throughput_avg", {}).get("mean")
        want = (p.get("aggregate") or {}).get("request_throughput", {}).get("mean")
        if got is None or want is None or not math.isclose(got, want, rel_tol=1e-9):
            fails.add(path, "metrics.request_throughput_avg.mean", f"{got!r}, sweep.json {want!r}")
        meta = doc.get("metadata") or {}
        n = sum(1 for r in p["runs"] if r.get("stopped_by") not in ("interrupted", "terminated"))
        if meta.get("num_successful_runs") != n:
            fails.add(path, "metadata.num_successful_runs", f"{meta.get('num_successful_runs')!r}, expected {n}")
        print(f"  {a.relative_to(d.resolve())}: {len(doc.get('metrics') or {})} aggregated values, "
              f"read by DataLoader ({type(loaded).__name__})")
    for r in sorted(runs):
        check_profile(r, fails)
        check_records(r, fails)
        check_server_metrics(r, fails)
        check_inputs(r, fails)
    print(f"  ModeDetector: {len(found)} cells ({len(runs)} runs, {len(aggregates)} aggregates)")

    if len(found) < 2:
        # One cell (a repeated single run): AIPerf plots nothing multi-run of its own such output.
        return
    # The per-GPU figures need GPU telemetry, which AIPerf itself lacks without DCGM.
    text = aiperf_plot(d, fails, every_single_run=False,
                       allowed_skip="output_token_throughput_per_gpu", label="aiperf plot (multi-run)")
    if text is not None and "multi_run" not in text.lower():
        fails.add(d, "aiperf plot", "did not read the sweep as several runs")


def _records_by_phase(d: Path) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for line in (d / RECORDS_JSONL).read_text().splitlines():
        r = json.loads(line)
        if r.get("error"):
            continue
        out.setdefault(r["metadata"].get("benchmark_phase", "profiling"), []).append(r)
    return out


def _conversation_kind(conv: str) -> str:
    """root, subagent (`::sa:`, its chains included) or flat (a chain split off the root)."""
    if "::" not in conv:
        return "root"
    return "subagent" if conv.split("::", 1)[1].startswith("sa:") else "flat"


def _at(doc, path):
    for k in path:
        try:
            doc = doc[k]
        except (KeyError, IndexError, TypeError):
            return None
    return doc


def check_agentx_against_aiperf(d: Path, a: Path, fails: Failures) -> None:
    """What AIPerf 0.13 wrote for the same AgentX replay, specperf must write too."""
    ours, theirs = _records_by_phase(d), _records_by_phase(a)
    path = d / RECORDS_JSONL
    for phase, recs in sorted(theirs.items()):
        mine = ours.get(phase, [])
        if not mine:
            fails.add(path, phase, f"no successful {phase} records (AIPerf wrote {len(recs)})")
            continue
        units = lambda rs: {t: m.get("unit") for r in rs for t, m in r["metrics"].items() if isinstance(m, dict)}
        want, got = units(recs), units(mine)
        for tag in sorted(set(want) - set(got) - HTTP_NOT_MEASURED):
            fails.add(path, f"{phase}: metrics.{tag}", "AIPerf writes it for this run, specperf does not")
        for tag in sorted(set(want) & set(got)):
            if want[tag] != got[tag]:
                fails.add(path, f"{phase}: metrics.{tag}.unit", f"{got[tag]!r}, AIPerf writes {want[tag]!r}")
        keys = lambda rs: {k for r in rs for k, v in r["metadata"].items() if v is not None}
        for k in sorted(keys(recs) - keys(mine)):
            fails.add(path, f"{phase}: metadata.{k}", "AIPerf writes it for this run, specperf does not")
        for k in ("phase_name", "phase_index", "profiling_index", "phase_kind"):
            w = {json.dumps(r["metadata"].get(k)) for r in recs}
            g = {json.dumps(r["metadata"].get(k)) for r in mine}
            if w != g:
                fails.add(path, f"{phase}: metadata.{k}", f"{sorted(g)}, AIPerf writes {sorted(w)}")
        nums = sorted(r["metadata"]["session_num"] for r in mine)
        if nums[0] != 0 or len(set(nums)) != len(nums):
            fails.add(path, f"{phase}: metadata.session_num",
                      f"from {nums[0]}, {len(nums) - len(set(nums))} repeated; AIPerf counts each phase's requests from 0")
        kinds = lambda rs: {(_conversation_kind(r["metadata"]["conversation_id"]), r["metadata"]["source_kind"]) for r in rs}
        w = dict(kinds(recs))
        for kind, sk in sorted(kinds(mine)):
            if kind in w and w[kind] != sk:
                fails.add(path, f"{phase}: metadata.source_kind", f"{sk!r} for a {kind} conversation, AIPerf writes {w[kind]!r}")

    ps, pa = load_json(d / PROFILE_JSON, fails), load_json(a / PROFILE_JSON, fails)
    if ps is None or pa is None:
        return
    path = d / PROFILE_JSON
    def objects(doc):
        return {k: v.get("unit") for k, v in (doc or {}).items() if isinstance(v, dict) and "unit" in v}
    for where, w, g in (("", objects(pa), objects(ps)),
                        ("warmup_metrics.", objects(pa.get("warmup_metrics")), objects(ps.get("warmup_metrics")))):
        for tag in sorted(set(w) - set(g) - HTTP_NOT_MEASURED):
            fails.add(path, where + tag, "AIPerf writes it for this run, specperf does not")
        for tag in sorted(set(w) & set(g)):
            if w[tag] != g[tag]:
                fails.add(path, f"{where}{tag}.unit", f"{g[tag]!r}, AIPerf writes {w[tag]!r}")
    if isinstance(pa.get("branch_stats"), dict):
        missing = set(pa["branch_stats"]) - set(ps.get("branch_stats") or {})
        if missing:
            fails.add(path, "branch_stats", f"missing {sorted(missing)}")
    for field in AGENTX_INPUT_CONFIG:
        w, g = _at(pa.get("input_config"), field), _at(ps.get("input_config"), field)
        if w is not None and g != w:
            loc = "input_config." + ".".join(str(f) for f in field)
            fails.add(path, loc, f"{g!r}, AIPerf writes {w!r}")
    if _at(pa, ("input_config", "tokenizer", "name")) and not _at(ps, ("input_config", "tokenizer", "name")):
        fails.add(path, "input_config.tokenizer.name", "missing")
    n = sum(len(v) for v in ours.values())
    print(f"  against AIPerf's own run ({a}): {n} records, {len(objects(ps))} metrics, "
          f"{len(objects(ps.get('warmup_metrics')))} warmup metrics")


def specperf_al(d: Path, fails: Failures) -> float | None:
    summary = load_json(d / "summary.json", fails)
    if summary is None:
        return None
    try:
        al = summary["acceptance"]["acceptance"]["acceptance_length"]
    except (KeyError, TypeError):
        al = None
    if not isinstance(al, (int, float)):
        fails.add(d / "summary.json", "acceptance.acceptance.acceptance_length", f"no AL ({al!r})")
        return None
    return float(al)


def check_speed_bench(d: Path, category: str, fails: Failures) -> None:
    from aiperf.analysis.speed_bench_report import build_report

    al = specperf_al(d, fails)
    # AIPerf's own extraction, exact.
    report = build_report([d], "accept_length")
    values = [v for model in report.values() for c, v in model.items() if c == category]
    if not values:
        fails.add(d, "aiperf speed-bench-report", f"no category {category!r} in {report!r}")
    elif values[0] is None:
        fails.add(d, "aiperf speed-bench-report", f"no acceptance length for {category!r}")
    elif al is not None and not math.isclose(values[0], al, rel_tol=1e-9, abs_tol=1e-12):
        fails.add(d, "aiperf speed-bench-report", f"AL {values[0]!r} but specperf says {al!r}")
    # And the command itself, as a user runs it.
    with tempfile.TemporaryDirectory() as tmp:
        csv_out = Path(tmp) / "report.csv"
        p = run([*aiperf_cli(), "speed-bench-report", str(d), "--output", str(csv_out)])
        text = p.stdout + p.stderr
        if p.returncode != 0:
            fails.add(d, "aiperf speed-bench-report", f"exit {p.returncode}: {text.strip()}")
            return
        for bad in ("cannot determine category", "no SPEED-Bench results", "Warning"):
            if bad in text:
                fails.add(d, "aiperf speed-bench-report", text.strip())
                return
        if category not in text:
            fails.add(d, "aiperf speed-bench-report", f"category {category!r} not printed:\n{text}")
        if al is not None and f"{al:.2f}" not in text:
            fails.add(d, "aiperf speed-bench-report", f"AL {al:.2f} not printed:\n{text}")
        print("  aiperf speed-bench-report:\n    " + "\n    ".join(text.strip().splitlines()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="*", type=Path, help="specperf artifact directories")
    ap.add_argument(
        "--speed-bench",
        action="append",
        default=[],
        metavar="DIR=CATEGORY",
        help="a SPEED-Bench run's directory and its category",
    )
    ap.add_argument(
        "--agentx",
        action="append",
        default=[],
        metavar="DIR=AIPERF_DIR",
        help="an AgentX replay's directory and AIPerf 0.13's own for the same run",
    )
    ap.add_argument(
        "--sweep",
        action="append",
        default=[],
        type=Path,
        metavar="DIR",
        help="a specperf sweep directory (sweep.json at its top)",
    )
    args = ap.parse_args()
    speed = []
    for s in args.speed_bench:
        if "=" not in s:
            ap.error(f"--speed-bench {s!r}: expected DIR=CATEGORY, e.g. run-coding=coding")
        d, c = s.rsplit("=", 1)
        speed.append((Path(d), c))
    agentx = []
    for s in args.agentx:
        if "=" not in s:
            ap.error(f"--agentx {s!r}: expected DIR=AIPERF_DIR")
        d, a = s.split("=", 1)
        agentx.append((Path(d), Path(a)))
    dirs = list(args.dirs) + [d for d, _ in speed] + [d for d, _ in agentx]
    if not dirs and not args.sweep:
        ap.error("no artifact directory given")
    for d in dirs + args.sweep + [a for _, a in agentx]:
        if not d.is_dir():
            ap.error(f"{d} is not a directory (give specperf's --artifact-dir)")

    fails = Failures()
    for d in dirs:
        before = len(fails.lines)
        print(f"{d}:")
        check_profile(d, fails)
        n = check_records(d, fails)
        check_server_metrics(d, fails)
        replay = [a for ad, a in agentx if ad == d]
        if not replay:
            check_inputs(d, fails)
        check_plot(d, fails)
        for a in replay:
            check_agentx_against_aiperf(d, a, fails)
        for sd, cat in speed:
            if sd == d:
                check_speed_bench(d, cat, fails)
        print(f"  {n} records; {len(fails.lines) - before} failures")
    for d in args.sweep:
        before = len(fails.lines)
        print(f"{d} (sweep):")
        check_sweep(d, fails)
        print(f"  {len(fails.lines) - before} failures")
    if fails.lines:
        print(f"\nAIPerf 0.13 conformance: {len(fails.lines)} failures", file=sys.stderr)
        for line in fails.lines:
            print(line, file=sys.stderr)
        return 1
    print("AIPerf 0.13 conformance: every artifact accepted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
