"""The rank analysis as a readable table (what ``kernelscope ranks`` prints)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.analysis.ranks.model import RanksResult


def _ms(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:.2f}"


def format_ranks(res: RanksResult) -> str:
    """A table per rank (per-step medians in ms), the straggler with its evidence, the clock."""
    head = ["rank", "device", "host", "report", "steps", "step ms", "compute ms", "nccl ms", "wait ms",
            "idle ms", "host ms"]
    rows = []
    for r in res.ranks:
        n = max(1, len(r.counted_steps))
        rows.append([str(r.rank), "-" if r.device is None else str(r.device), r.host or "-",
                     Path(r.report).name, str(r.steps), _ms(r.step_median_ns),
                     _ms(r.compute_ns / n), _ms(r.nccl_ns / n), _ms(r.nccl_wait_ns / n),
                     _ms(r.idle_ns / n), _ms(r.host_ns / n)])
    widths = [max(len(h), *(len(x[i]) for x in rows)) for i, h in enumerate(head)]
    lines = ["  ".join(h.rjust(w) if i not in (2, 3) else h.ljust(w) for i, (h, w) in
                       enumerate(zip(head, widths, strict=True))).rstrip()]
    for x in rows:
        lines.append("  ".join(v.rjust(w) if i not in (2, 3) else v.ljust(w) for i, (v, w) in
                               enumerate(zip(x, widths, strict=True))).rstrip())
    step = next((r.step_range for r in res.ranks if r.step_range), None)
    lines.append(f"(per step, mean over steady steps; step range: {step or 'none found'}; "
                 f"{len(res.collectives)} NCCL collectives matched)")
    lines.append("")
    if res.straggler is not None:
        s = res.straggler
        moves = moving_sentence(s)
        if moves:
            lines.append(f"Straggler: {moves}; the most often slow is rank {s.rank}, "
                         f"costing about {s.wait_per_step_ns / 1e6:.2f} ms in the steps where it is slow.")
        else:
            lines.append(f"Straggler: rank {s.rank}" + (f" (GPU {s.device})" if s.device is not None else "")
                         + f", costing the others {s.wait_per_step_ns / 1e6:.2f} ms per step.")
        lines += [f"  - {e}" for e in s.evidence]
    else:
        lines.append("Straggler: none.")
    lines.append("Clock: " + res.clock.sentence)
    lines += [f"Note: {n}" for n in res.notes]
    return "\n".join(lines)


def moving_sentence(s: Any) -> str:
    """A sentence saying the slow rank moves, when no rank is slow in most steps; else "".

    "the slow rank moves between steps (rank 0 in 18, rank 1 in 19 of 39 steady steps)"; "" for a
    steady straggler.
    """
    per = getattr(s, "per_step", ()) or ()
    if not per or getattr(s, "slow_step_share", 1.0) >= 0.6:
        return ""
    counts: dict[int, int] = {}
    for _k, r, _c in per:
        if r >= 0:
            counts[r] = counts.get(r, 0) + 1
    if len(counts) < 2:
        return ""
    parts = ", ".join(f"rank {r} in {n}" for r, n in sorted(counts.items()))
    return f"the slow rank moves between steps ({parts} of {len(per)} steady steps)"
