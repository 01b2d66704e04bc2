"""Our PyTorch views of a Kineto trace against what the profiler itself said about the same run.

The oracle is not our code: ``torch.profiler``'s ``key_averages()`` of the run (written beside the trace by
``benchmarks/device/torch_workbench.py``: ``TAG_key_averages.json``) and the program's own
``torch.cuda.max_memory_allocated()`` / ``max_memory_reserved()`` (``TAG_truth.json``). For every ``aten::``
operator key_averages lists (by name), the row of ``kernelscope ops --json`` must have the same call count,
and host total / host self / GPU self / GPU total time within ``--rel`` (5 %; 1 us absolute for a self time).
key_averages counts an operator nested in an operator of its own name twice in its totals, we count it
once: a GPU or host total of ours *below* theirs is reported as "nested" and not counted as a mismatch;
above theirs it is. The memory peaks of ``kernelscope memory --json`` must equal the truth's exactly.

    python benchmarks/check_kineto_oracle.py OPS.json KEY_AVERAGES.json [--truth TRUTH.json --memory MEM.json]

Prints a table of what was compared and every mismatch; exit status 1 when any.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

#: (our field, key_averages' field, scale from ours to theirs, absolute slack in their unit, a total)
FIELDS = (
    ("host_total_ns", "cpu_time_total_us", 1e-3, 0.0, True),
    ("host_self_ns", "self_cpu_time_total_us", 1e-3, 1.0, False),
    ("gpu_self_ns", "self_device_time_total_us", 1e-3, 1.0, False),
    ("gpu_total_ns", "device_time_total_us", 1e-3, 1.0, True),
)


def compare_ops(ours: dict[str, Any], theirs: list[dict[str, Any]],
                rel: float) -> tuple[list[str], dict[str, int]]:
    """Mismatch sentences and counts of what was compared (operators, fields equal within ``rel``)."""
    rows = {r["name"]: r for r in ours["operators"]}
    ka = [r for r in theirs if not r["by_shapes"] and r["key"].startswith("aten::")]
    bad: list[str] = []
    n = {"operators": 0, "calls equal": 0, "fields within": 0, "nested (ours below)": 0, "missing": 0}
    for k in ka:
        r = rows.get(k["key"])
        if r is None:
            n["missing"] += 1
            bad.append(f"{k['key']}: in key_averages ({k['count']} calls), not in ours")
            continue
        n["operators"] += 1
        if r["calls"] == k["count"]:
            n["calls equal"] += 1
        else:
            bad.append(f"{k['key']}: calls {r['calls']} vs {k['count']}")
        for mine, their, scale, slack, total in FIELDS:
            a, b = r[mine] * scale, float(k[their])
            if abs(a - b) <= max(rel * abs(b), slack):
                n["fields within"] += 1
            elif total and a < b:
                n["nested (ours below)"] += 1
            else:
                bad.append(f"{k['key']}: {mine} {a:,.1f} us vs {their} {b:,.1f} us")
    return bad, n


def compare_memory(mem: dict[str, Any], truth: dict[str, Any]) -> list[str]:
    """Mismatch sentences of the memory peaks against the program's own counters."""
    devices = mem.get("devices") or []
    if not devices:
        return ["no memory curve in ours"]
    d = max(devices, key=lambda c: c.get("peak_allocated_bytes") or 0)
    bad = []
    for mine, their in (("peak_allocated_bytes", "max_memory_allocated"), ("peak_reserved_bytes",
                                                                           "max_memory_reserved")):
        if d.get(mine) != truth.get(their):
            bad.append(f"{mine} {d.get(mine)} vs {their} {truth.get(their)}")
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ops", type=Path, help="kernelscope ops --json output")
    ap.add_argument("key_averages", type=Path, help="TAG_key_averages.json")
    ap.add_argument("--truth", type=Path, help="TAG_truth.json")
    ap.add_argument("--memory", type=Path, help="kernelscope memory --json output")
    ap.add_argument("--rel", type=float, default=0.05, help="relative tolerance of a time (default 0.05)")
    a = ap.parse_args()
    bad, n = compare_ops(json.loads(a.ops.read_text()), json.loads(a.key_averages.read_text()), a.rel)
    print("| compared | count |\n|---|---:|")
    for k, v in n.items():
        print(f"| {k} | {v} |")
    if a.truth and a.memory:
        mbad = compare_memory(json.loads(a.memory.read_text()), json.loads(a.truth.read_text()))
        print(f"| memory peaks equal to the program's counters | {'yes' if not mbad else 'no'} |")
        bad += mbad
    for line in bad:
        print("MISMATCH", line)
    print(f"{len(bad)} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
