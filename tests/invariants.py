"""What must hold in every number Kernelscope prints, whatever the report (issue 25).

``check_summary``, ``check_findings``, ``check_ranks`` and ``check_text`` return the violations
(sentences naming the field and the values) of one command's output; an empty list is a pass. The
rules are the ones a user relies on without thinking: a share of a whole is in [0, 100 %], a union
is no longer than the wall, a part no more than its whole, a per-step figure no more than the step,
no None, NaN or negative time, and the same quantity the same in every place it is shown.
"""

from __future__ import annotations

import math
import re
from typing import Any

#: a time that may be negative: a difference between two runs or two ranks, a clock offset
SIGNED = re.compile(r"delta|diff|change|offset|skew|shift|drift|slope|vs_|_vs|speedup|minus|saved_vs")
#: printed words that leak internals
LEAKS = re.compile(r"\bNone\b|\bnan\b|\bNaN\b|\binf\b|\(x0\.0*1\)|\d\.\de-\d\d")
SLACK = 1.005  # rounding of printed percentages and medians


def _walk(doc: Any, path: str = "") -> Any:
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _walk(v, f"{path}.{k}" if path else str(k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _walk(v, f"{path}[{i}]")
    else:
        yield path, doc


def check_numbers(doc: Any) -> list[str]:
    """Times (``*_ns``) are numbers ≥ 0 (unless signed by name); shares (``pct*``) within [0, 100]."""
    out = []
    for path, v in _walk(doc):
        key = path.rsplit(".", 1)[-1].split("[", 1)[0]
        if isinstance(v, float) and not math.isfinite(v):
            out.append(f"{path} = {v}")
        if key.endswith("_ns") and isinstance(v, (int, float)) and v < 0 and not SIGNED.search(path):
            out.append(f"{path} = {v} < 0 (a time)")
        if (key.startswith("pct") or "_pct" in key) and isinstance(v, (int, float)) \
                and not SIGNED.search(path) and not 0 <= v <= 100 * SLACK:
            out.append(f"{path} = {v} (a share outside 0..100 %)")
    return out


def check_summary(doc: dict[str, Any]) -> list[str]:
    """``summary --json``: unions within the wall, parts within their whole, per-step figures ≤ the step."""
    out = check_numbers(doc)
    span = doc["wall"]["span_ns"]
    if doc["wall"]["start_ns"] < 0:
        out.append(f"wall.start_ns = {doc['wall']['start_ns']} < 0")
    host, gpu = doc["host"], doc["gpu"]
    if host["union_ns"] > span:
        out.append(f"host.union_ns {host['union_ns']} > wall {span}")
    if gpu["busy_ns"] > span:
        out.append(f"gpu.busy_ns {gpu['busy_ns']} > wall {span}")
    attributed = sum(c.get("attributed_ns", 0) for c in host["categories"])
    if attributed > host["union_ns"] * SLACK + 1:
        out.append(f"host categories' attributed time {attributed} > host union {host['union_ns']}")
    for c in host["categories"]:
        if c["union_ns"] > min(c["total_ns"], span) + 1:
            out.append(f"host category {c['category']}: union {c['union_ns']} > its sum or the wall")
    parts = sum(p.get("attributed_ns", 0) for p in gpu["parts"])
    if parts > gpu["busy_ns"] * SLACK + 1:
        out.append(f"GPU parts' attributed time {parts} > GPU busy {gpu['busy_ns']}")
    for p in gpu["parts"]:
        if p["union_ns"] > min(p["total_ns"], span) + 1:
            out.append(f"GPU part {p['part']}: union {p['union_ns']} > its sum or the wall")
    # parts overlap (a copy under a kernel), so their union shares may add up to more than 100 %;
    # the shares of the time each is attributed (the stacked bar) may not, on the whole and per GPU
    for where, parts in [("GPU", gpu["parts"])] + [(f"GPU {d['device']}", d["parts"])
                                                   for d in gpu.get("devices", [])]:
        shares = sum(p.get("attributed_pct_of_busy") or 0 for p in parts)
        if shares > 100 * SLACK + 0.5:
            out.append(f"{where} parts' attributed shares of busy add up to {shares:.2f} %")
        if any(p.get("attributed_pct_of_busy") is None for p in parts) and gpu["busy_ns"]:
            out.append(f"{where} parts without an attributed share of busy")
    for d in gpu.get("devices", []):
        if d["busy_ns"] > span:
            out.append(f"GPU {d['device']} busy {d['busy_ns']} > wall {span}")
    for r in doc["report"].get("gpus", []):
        if r.get("smCount") is None and "name" in r:
            pass  # a trace without the count: the text must not print "None SMs" (check_text)
    it = doc.get("iterations")
    if it:
        step = it.get("steady_median_ns") or 0
        busy = it.get("gpu_busy_per_step_ns")
        if busy is not None and step and busy > step * SLACK + 1000:
            out.append(f"iterations: GPU busy per step {busy:.0f} ns > the steady step {step:.0f} ns")
        for ph in it.get("phases", []):
            per = ph.get("per_iteration_ns")
            if per is not None and step and per > step * SLACK + 1000 and it.get("source") != "library":
                out.append(f"iterations: phase {ph['range']} takes {per} ns per step > the step "
                           f"{step:.0f} ns")
    return out


def check_findings(doc: dict[str, Any], span_ns: int) -> list[str]:
    """``findings --json``: gains within the window they are measured in, severities from the gain."""
    out = check_numbers(doc)
    findings = doc.get("findings", [])
    for f in findings:
        g = f.get("gain") or {}
        if g.get("seconds") is not None and g["seconds"] * 1e9 > span_ns * SLACK + 1000:
            out.append(f"{f['id']}: gain {g['seconds']} s > the capture {span_ns / 1e9} s")
        if g.get("per_step_ns") is not None and g.get("window_ns") and g.get("window") == "steady steps" \
                and g["per_step_ns"] > g["window_ns"] * SLACK + 1000:
            out.append(f"{f['id']}: gain {g['per_step_ns']} ns per step > the step {g['window_ns']} ns")
        if g and g.get("capture_seconds", g.get("seconds")) != g.get("seconds"):
            out.append(f"{f['id']}: gain capture_seconds {g.get('capture_seconds')} != seconds "
                       f"{g.get('seconds')}")
        for e in f.get("evidence", []):
            if e.get("unit") == "ns" and isinstance(e.get("value"), (int, float)) and "union" in e["label"] \
                    and e["value"] > span_ns * SLACK + 1000:
                out.append(f"{f['id']}: evidence '{e['label']}' {e['value']} ns > the capture {span_ns} ns")
    return out


def check_ranks(doc: dict[str, Any]) -> list[str]:
    """``ranks --json``: each rank's wait within its step; the headline's step is the rows'."""
    out = check_numbers(doc)
    for r in doc.get("ranks", []):
        step = r.get("step_ns") or r.get("step_median_ns")
        wait = r.get("wait_ns") or r.get("nccl_wait_ns")
        if step and wait and wait > step * SLACK + 1000:
            out.append(f"rank {r.get('rank')}: wait {wait} ns > its step {step} ns")
    return out


#: a verdict line of ``compare``'s text: ``p=0.0286 < 0.05 -> faster``
VERDICT = re.compile(r"p=(\d+\.\d+) (<|>=) (\d*\.?\d+) -> ([a-z ]+)")


def check_compare(doc: dict[str, Any], text: str) -> list[str]:
    """``compare --json`` and its text: the verdict follows the test; no speedup between different steps.

    The verdict follows the Mann-Whitney test at the stated alpha, in the JSON and in the text; steps
    of different ranges give a warning and no speedup.
    """
    out = check_numbers(doc)
    it = doc.get("iterations")
    if not it:
        return out
    p, alpha = it["p_value"], it.get("alpha", 0.05)
    if p is not None and (p < alpha) != bool(it["significant"]):
        out.append(f"compare: p = {p} vs alpha {alpha} but significant = {it['significant']}")
    if p is not None and p < alpha and "no significant" in it["verdict"]:
        out.append(f"compare: p = {p} < {alpha} -> {it['verdict']!r}")
    if p is not None and p >= alpha and it["verdict"] in ("faster", "slower"):
        out.append(f"compare: p = {p} >= {alpha} -> {it['verdict']!r}")
    if it.get("steps_comparable") is False and it.get("speedup") is not None:
        out.append(f"compare: a speedup {it['speedup']} between different ranges {it['range_a']!r}, "
                   f"{it['range_b']!r}")
    if it.get("steps_comparable") is False and not any("different ranges" in w for w in doc["warnings"]):
        out.append("compare: steps of different ranges without a warning")
    for m in VERDICT.finditer(text):
        pv, rel, a, said = float(m.group(1)), m.group(2), float(m.group(3)), m.group(4).strip()
        if (rel == "<") != (pv < a) or (rel == "<") == said.startswith("no significant"):
            out.append(f"compare text: {m.group(0)!r}")
    if it.get("steps_comparable") is False and re.search(r"speedup \d", text):
        out.append("compare text: a speedup between different ranges")
    return out + check_text(text)


def check_text(text: str) -> list[str]:
    """Printed text: no None/NaN/inf, no axis-scale leaks, no scientific notation for a size."""
    return [f"text leaks {m.group(0)!r}: …{text[max(0, m.start() - 40):m.end() + 20]!r}…"
            for m in LEAKS.finditer(text)]
