#!/usr/bin/env python3
"""What AIPerf 0.13 sends from a SPEED-Bench file under one of its dataset names.

Usage: speed_bench_aiperf_select.py FILE NAME [FILE NAME ...]  (NAME e.g. speed_bench_coding,
speed_bench_throughput_8k_mixed). For each pair, builds the loader the way AIPerf's
custom-dataset composer does (the plugin's class, its `category` metadata, `multi_turn` only
when the metadata sets it), loads FILE, and prints one JSON line: {"file", "name",
"conversations": [{"id", "turns": [text, ...]}, ...]} in AIPerf's order (its loader's insertion
order, which its sequential sampling keeps).
tests/integration/speed_bench.rs compares it with what specperf sends for the same name.
"""

import json
import sys

from aiperf.plugin import plugins
from aiperf.plugin.enums import CustomDatasetType, PluginType


def select(path: str, name: str) -> list:
    kind = CustomDatasetType(name)
    meta = plugins.get_dataset_loader_metadata(kind)
    kwargs = {}
    if meta.category is not None:
        kwargs["category"] = meta.category
    if meta.multi_turn:
        kwargs["multi_turn"] = meta.multi_turn
    loader = plugins.get_class(PluginType.CUSTOM_DATASET_LOADER, kind)(
        filename=path, **kwargs
    )
    return [
        {"id": session_id, "turns": [t.text for t in c.turns]}
        for session_id, conversations in loader.load_dataset().items()
        for c in conversations
    ]


def main() -> int:
    args = sys.argv[1:]
    if not args or len(args) % 2:
        print(__doc__, file=sys.stderr)
        return 2
    for path, name in zip(args[::2], args[1::2]):
        out = {"file": path, "name": name, "conversations": select(path, name)}
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
