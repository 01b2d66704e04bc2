"""The rank analysis as a readable table (what ``kernelscope ranks`` prints).

The numbers are the result's own (:meth:`RankRow.means`, the straggler's fields), so the table, the
straggler line, the GUI and ``--json`` show one value per quantity; :func:`straggler_line` is shared
with the Ranks view.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.analysis.ranks.model import RanksResult
from engine.analysis.ranks.straggler import duration_text, others_wait_text

#: the per-step columns: (heading, key of RankRow.means() or "median")
COLUMNS = (("step ms", "step_ns"), ("median ms", "median"), ("compute ms", "compute_ns"),
           ("nccl ms", "nccl_ns"), ("wait ms", "wait_ns"), ("exposed ms", "exposed_wait_ns"),
           ("idle ms", "idle_ns"), ("host ms", "host_ns"))
#: what the columns mean, under the table (and in the Ranks view)
LEGEND = ("ms per step, mean over each rank's steady steps (median ms: the median step): step = compute + "
          "nccl + idle; wait: its NCCL kernels wait for the last rank to join (part of nccl); exposed: of "
          "that, the time no other GPU work runs; host: of idle, the time its CPU thread is outside CUDA "
          "calls")
#: at most this many note details are printed (``--json`` has them all)
MAX_DETAILS = 5


def ms_cell(ns: float | None) -> str:
    """A table cell in ms: two decimals, as every page prints a duration in ms."""
    return "-" if ns is None else f"{ns / 1e6:,.2f}"


def row_cells(r: Any) -> dict[str, str]:
    """One rank's per-step cells, by heading (the CLI table and the Ranks view's table)."""
    means = r.means()
    return {head: ms_cell(r.step_median_ns if key == "median" else means[key]) for head, key in COLUMNS}


def format_ranks(res: RanksResult) -> str:
    """A table per rank (per-step means in ms), the straggler with its evidence, the clock."""
    head = ["rank", "device", "host", "report", "steps", *(h for h, _ in COLUMNS)]
    rows = []
    for r in res.ranks:
        cells = row_cells(r)
        rows.append([str(r.rank), "-" if r.device is None else str(r.device), r.host or "-",
                     Path(r.report).name, str(r.steps), *(cells[h] for h, _ in COLUMNS)])
    widths = [max(len(h), *(len(x[i]) for x in rows)) for i, h in enumerate(head)]
    lines = ["  ".join(h.rjust(w) if i not in (2, 3) else h.ljust(w) for i, (h, w) in
                       enumerate(zip(head, widths, strict=True))).rstrip()]
    for x in rows:
        lines.append("  ".join(v.rjust(w) if i not in (2, 3) else v.ljust(w) for i, (v, w) in
                               enumerate(zip(x, widths, strict=True))).rstrip())
    step = next((r.step_range for r in res.ranks if r.step_range), None)
    lines.append(f"({LEGEND}; step range: {step or 'none found'}; {len(res.collectives)} NCCL collectives "
                 "matched)")
    lines.append("")
    lines.append(straggler_line(res))
    if res.straggler is not None:
        lines += [f"  - {e}" for e in res.straggler.evidence]
    lines.append("Clock: " + res.clock.sentence)
    lines += [f"Note: {n}" for n in res.notes]
    lines += [f"  - {d}" for d in res.details[:MAX_DETAILS]]
    if len(res.details) > MAX_DETAILS:
        lines.append(f"  - … {len(res.details) - MAX_DETAILS} more (--json: note_details)")
    return "\n".join(lines)


def straggler_parts(res: RanksResult) -> tuple[str, str]:
    """The straggler line in two parts: who (``Straggler: rank 1 (GPU 1)``) and what it costs.

    The others' waits are their rows' exposed waits (mean per step); the what-if is labelled as a
    median over the steps where the straggler is slow. ("Straggler: none.", "") without one.
    """
    s = res.straggler
    if s is None:
        return "Straggler: none.", ""
    k = sum(1 for _, r, _ in s.per_step if r == s.rank)
    what_if = (f"a step would be about {duration_text(s.cost_per_step_ns)} shorter without its extra time "
               f"(what-if, median over the {k} step{'s' if k != 1 else ''} where it is slow)")
    moves = moving_sentence(s)
    if moves:
        return f"Straggler: {moves}", f"the most often slow is rank {s.rank}: {what_if}."
    waits = others_wait_text(s.others_wait_ns)
    gpu = f" (GPU {s.device})" if s.device is not None else ""
    return (f"Straggler: rank {s.rank}{gpu}",
            f"the others wait for it with nothing else to run ({waits} per step, mean over their steady "
            f"steps: the 'exposed' column); {what_if}.")


def straggler_line(res: RanksResult) -> str:
    """The straggler in one line (see :func:`straggler_parts`)."""
    who, what = straggler_parts(res)
    return f"{who}; {what}" if what else who


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
