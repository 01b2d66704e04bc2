"""Decode the kernels (``ncu_report`` actions) of a ``.ncu-rep`` into plain rows, in or out of process.

:class:`ActionDecoder` turns actions into the rows of the reader's tables (details page, kernels,
rules, source counters, summary metrics, and on request every metric and the SASS of the hottest
instructions). :func:`decode_chunk` runs it over a slice of a report's kernels; ``python -m
engine.reports.ncu.decode`` runs :func:`decode_chunk` in a short-lived child process (the engine's
child runner, :mod:`engine.system.child`: job and result pickled in its files), so the memory
``ncu_report`` never frees (~130 MB for the first decoded kernel, ~10 MB for each one after, ~20 MB
more for its SASS) goes away with the child.
:mod:`engine.reports.ncu.children` starts the children and merges their rows.

Rows that depend on the whole report (the kernel names as ncu prints them) carry
:data:`NAME_PLACEHOLDER` in the child; the merge fills them in. Nothing here imports pandas.
"""

from __future__ import annotations

import math
import pickle
import sys
from collections.abc import Callable
from typing import Any

from engine.reports.ncu.actions import (
    NOT_METRICS,
    int_text,
    launch_dim,
    metric_row,
    metric_text,
    metric_value,
    nvtx_cells,
    nvtx_range,
    raw_unit,
    rule_records,
    rule_rows,
    sass_and_lines,
    section_labels,
    section_table,
    source_records,
)
from engine.reports.ncu.section_defs import SectionDef

NAME_PLACEHOLDER = "\x00kernel-name\x00"


def settle_units(actions: list[Any]) -> dict[str, str]:
    """Ask ``ncu_report`` for every metric's unit, in its own order, before anything else.

    ``ncu_report`` (2025.3 and 2026.3) works a derived metric's unit out on the first ``unit()``
    call, from what it was asked before, and keeps it for the process: asked in other orders,
    ``derived__memory_l2_theoretical_sectors_global_excessive`` comes out "sector" or "byte" and
    ``sass__inst_executed_register_spilling_mem_local`` "inst" or "byte". Asked first, in the
    order of ``metric_names()``, they come out as ncu prints them (on a ``--set detailed`` report
    "byte", on a ``--set full`` one "sector" and "inst"). Kernels with the same metric list share
    the answers, so each distinct list is asked once (a child process that decodes later kernels
    asks the lists of the kernels before them first).

    Returns the units asked (name -> ``unit()``), which later calls in this process give again
    (~35 us a call: the decoder takes them from here).
    """
    done: set[tuple[str, ...]] = set()
    units: dict[str, str] = {}
    for a in actions:
        names = tuple(map(str, a.metric_names()))
        if names in done:
            continue
        done.add(names)
        for name in names:
            m = a.metric_by_name(name)
            if m is not None:
                unit = str(m.unit())
                units.setdefault(name, unit)
    return units


def list_key(action: Any) -> str:
    """A digest of an action's metric list (the same in every process, unlike ``hash``)."""
    import hashlib

    return hashlib.blake2b("\n".join(map(str, action.metric_names())).encode(), digest_size=16).hexdigest()


def is_range(action: Any) -> bool:
    """Whether the result is a range (``--replay-mode range``), not a kernel launch."""
    try:
        return bool(action.workload_type() == action.WorkloadType_RANGE)
    except AttributeError:  # an ncu_report without workload types: kernels only
        return False


class ActionDecoder:
    """Accumulates the rows of a report's kernels, decoded one action at a time, in kernel order."""

    def __init__(self, section_defs: dict[str, SectionDef]) -> None:
        from engine.reports.ncu.metrics import summary_metrics

        self.section_defs = section_defs
        self.wanted, self.patterns = summary_metrics()
        self.kernels: list[dict[str, Any]] = []
        self.details: list[list[Any]] = []
        self.raw_units: dict[str, str] = {}
        self.labels: dict[str, str] = {}
        self.rule_table: list[list[Any]] = []
        self.source_table: list[list[Any]] = []
        self.all_samples: list[tuple[int, int, int]] = []
        self.sections: dict[int, list[str]] = {}
        self.detail_units: dict[str, str] = {}
        self.name_sets: list[frozenset[str]] = []
        self.partial_nums: list[dict[str, float]] = []
        self.idents: list[list[str]] = []
        self.nvtx: dict[int, tuple[str, str]] = {}
        self.canonical: dict[str, str] = {}  # one str object per metric name: the cache pickles each once
        self.name_lists: dict[tuple[str, ...], tuple[list[str], frozenset[str], frozenset[str]]] = {}
        self.ranges: list[bool] = []
        self.stored_names: list[str] = []
        # with every metric (decode_chunk(full=True)): per kernel {name: (text, value)}, first units
        self.full_rows: list[dict[str, tuple[str, float]]] = []
        self.full_units: dict[str, str] = {}
        self.settled: dict[str, str] = {}  # units settle_units() asked in this process

    def add(self, idx: int, a: Any, process: tuple[str, str, str], stored_sections: tuple[str, ...],
            printed_name: str, ranged: bool) -> None:
        """Decode kernel ``idx`` (action ``a``) into the tables' rows."""
        details, raw_units = self.details, self.raw_units
        pid, pname, host = process
        block, grid = launch_dim(a, "launch__block_dim"), launch_dim(a, "launch__grid_dim")
        major = metric_value(a, "device__attribute_compute_capability_major")
        minor = metric_value(a, "device__attribute_compute_capability_minor")
        cc = f"{int(major)}.{int(minor or 0)}" if major is not None else ""
        ident = [
            str(idx), pid, pname, host, printed_name, int_text(a, "launch__context_id"),
            "n/a" if ranged else int_text(a, "launch__stream_id"), "({}, {}, {})".format(*block),
            "({}, {}, {})".format(*grid), int_text(a, "launch__device_id") or "0", cc,
        ]
        dur = metric_value(a, "gpu__time_duration.sum")
        self.kernels.append({
            "ID": idx, "Kernel Name": printed_name, "Base Name": str(a.name(a.NameBase_FUNCTION)),
            "Mangled Name": str(a.name(a.NameBase_MANGLED)), "Process ID": pid, "Process Name": pname,
            "Context": ident[5], "Stream": ident[6], "Grid Size": ident[8], "Block Size": ident[7],
            "grid_x": grid[0], "grid_y": grid[1], "grid_z": grid[2],
            "block_x": block[0], "block_y": block[1], "block_z": block[2],
            "Registers Per Thread": metric_value(a, "launch__registers_per_thread"),
            "Static Shared Memory Per Block": metric_value(a, "launch__shared_mem_per_block_static"),
            "Dynamic Shared Memory Per Block": metric_value(a, "launch__shared_mem_per_block_dynamic"),
            "Device": ident[9], "Device Name": metric_value(a, "device__attribute_display_name") or "",
            "CC": cc, "duration_ns": float(dur) if dur is not None else math.nan,
            "NVTX Range": nvtx_range(a),
        })
        rules = rule_rows(a)
        nums: dict[str, float] = {}
        arch = int(major) * 10 + int(minor or 0) if major is not None else None
        for sid, sname, _order, header in section_table(a, self.section_defs, arch, stored_sections):
            for metric_name, label in header:
                m = a.metric_by_name(metric_name)
                if m is None:  # a header metric the report lacks: ncu prints "n/a" without a unit
                    details.append([*ident, sname, label, "", "n/a", *[""] * 5, math.nan, metric_name])
                    continue
                text, num = metric_text(m)
                nums[metric_name] = num
                unit = self.detail_units.get(metric_name)
                if unit is None:  # unit() costs ~35 us a call; a metric's unit is the same in every kernel
                    settled = self.settled.get(metric_name)
                    unit = self.detail_units[metric_name] = str(m.unit()) if settled is None else settled
                details.append([*ident, sname, label, unit, text, "", "", "", "", "", num, metric_name])
            for rule in rules.get(sid, []):
                details.append([*ident, sid, "", "", "", *rule, math.nan, ""])
        listed = tuple(map(str, a.metric_names()))
        known = self.name_lists.get(listed)  # kernels of one report mostly have the same metric names
        if known is None:
            names = [self.canonical.setdefault(n, n) for n in listed]
            have = frozenset(n for n in names if not n.startswith(NOT_METRICS))
            summary = self.wanted.intersection(have).union(
                n for n in have for pre, suf in self.patterns if n.startswith(pre) and n.endswith(suf))
            known = self.name_lists[listed] = (names, have, summary)
        names, have, summary = known
        # Only the summary's metrics now (the rest when the raw page or another metric is asked for).
        nums = {n: x for n, x in nums.items() if n in have}  # the details header metrics
        for name in summary.union(nums):
            if name not in nums or name not in raw_units:
                m = a.metric_by_name(name)
                if name not in nums:
                    nums[name] = metric_text(m)[1]
                if name not in raw_units:
                    raw_units[name] = raw_unit(name, m, self.settled.get(name))
        cells = None if ranged else nvtx_cells(a, pid)  # a range result has no NVTX columns
        if cells is not None:
            self.nvtx[idx] = cells
        self.idents.append(ident)
        self.name_sets.append(have)
        self.partial_nums.append(nums)
        self.rule_table.extend(rule_records(idx, a))
        self.source_table.extend(source_records(idx, a, names, self.all_samples))
        self.sections[idx] = section_labels(a, self.labels)

    def add_full(self, a: Any) -> None:
        """Every metric of action ``a`` (text as the raw page prints it, value) and first-seen units."""
        self.full_rows.append(metric_row(a, self.full_units, self.settled))


def hot_sources(a: Any, kid: int, pcs: list[int], samples: list[tuple[int, int]],
                top: int = 10) -> tuple[dict[int, tuple[str, str, int | None]], list[list[Any]]] | None:
    """SASS, file and line of a kernel's hottest PCs, and its hottest source lines (``LINE_COLUMNS`` rows).

    ``samples``: (pc, samples) of every sampled instruction of the kernel. The same work as
    :func:`engine.reports.ncu.sources.resolve_sources`, without pandas; None when it fails (the rows
    then keep their PCs and counts, as there).
    """
    try:
        files = a.source_files()
        found = sass_and_lines(a, pcs, files)
        if files is None or not len(files):
            return found, []
        totals: dict[tuple[str, int], int] = {}
        for pc, n in samples:
            info = a.source_info(int(pc))
            if info is not None:
                key = (str(info.file_name()), int(info.line()))
                totals[key] = totals.get(key, 0) + int(n)
        all_samples = sum(int(n) for _, n in samples) or 1
        rows = sorted(totals.items(), key=lambda kv: -kv[1])[:top]
        return found, [[f, ln, n, 100.0 * n / all_samples] for (f, ln), n in rows]
    except Exception:  # noqa: BLE001 - the SASS text is decoration; the counts are already there
        return None


def decode_chunk(job: dict[str, Any], ctx: Any = None,
                 ready: dict[tuple[int, int], Any] | None = None) -> dict[str, Any]:
    """Decode the kernels ``job["ids"]`` of a report (what a child process of the reader does).

    ``job``: path; refs (every kernel's (range, action), in kernel order); ids (the kernel IDs to
    decode, consecutive); settle (kernel IDs whose metric lists to ask units for first: the first
    kernel of every distinct list before ``ids``); processes, stored_sections (per kernel ID);
    section_defs; tables (decode the rows and every metric); sources ({kernel ID: ([pc], [(pc,
    samples)])} to disassemble, or None: every decoded kernel's hottest instructions). ``ctx``: the
    report already open, ``ready``: actions already decoded from it, by (range, action).
    """
    import ncu_report  # noqa: PLC0415 - native module, imported by main() before the job comes

    if ctx is None:
        ctx = ncu_report.load_report(str(job["path"]))
    ready = ready or {}
    refs: list[tuple[int, int]] = job["refs"]
    ids: list[int] = job["ids"]
    out: dict[str, Any] = {"ids": ids}
    actions = {}
    for k in [*job["settle"], *ids]:
        ref = tuple(refs[k])
        actions[k] = ready.get(ref) or ctx.range_by_idx(ref[0]).action_by_idx(ref[1])
    dec: ActionDecoder | None = None
    if job["tables"]:
        order = [*job["settle"], *ids]
        settled = settle_units([actions[k] for k in order])
        out["lists"] = [list_key(actions[k]) for k in ids]
        dec = ActionDecoder(job["section_defs"])
        dec.settled = settled
        for k in ids:
            a = actions[k]
            out.setdefault("stored_names", []).append(str(a.name(a.NameBase_DEMANGLED)))
            ranged = is_range(a)
            dec.ranges.append(ranged)
            dec.add(k, a, job["processes"][k], job["stored_sections"][k], NAME_PLACEHOLDER, ranged)
            dec.add_full(a)
        out["decoder"] = dec.__dict__ | {"section_defs": None, "canonical": None, "name_lists": None,
                                         "wanted": None, "patterns": None, "settled": None}
    wanted = job.get("sources")
    if wanted is None and dec is not None:
        wanted = {}
        for r in dec.source_table:
            wanted.setdefault(r[0], ([], []))[0].append(int(r[1]))
        for kid, pc, n in dec.all_samples:
            if kid in wanted:
                wanted[kid][1].append((pc, n))
    resolved: dict[int, Any] = {}
    ready.clear()
    for kid in [k for k in actions if k not in (wanted or {})]:
        del actions[kid]
    for kid, (pcs, samples) in (wanted or {}).items():
        resolved[kid] = hot_sources(actions[kid], kid, pcs, samples)
        del actions[kid]  # its SASS goes with it: handed back to the system before the next kernel's
        _trim()
    out["sources"] = resolved
    return out


def _trim() -> None:
    """Hand freed heap memory back to the system (glibc's ``malloc_trim``; nothing elsewhere)."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def _open_ahead(argv: list[str]) -> tuple[Any, dict[tuple[int, int], Any]]:
    """Report ``argv[0]`` opened, its kernels ``argv[1:]`` (``RANGE:ACTION``) decoded; or ``(None, {})``."""
    import ncu_report  # noqa: PLC0415 - native module, only in the child

    if len(argv) < 2:
        return None, {}
    ready = {}
    try:
        ctx = ncu_report.load_report(argv[0])
        for arg in argv[1:]:
            r, a = map(int, arg.split(":"))
            ready[(r, a)] = ctx.range_by_idx(r).action_by_idx(a)
    except Exception:  # noqa: BLE001 - decode_chunk opens it again and reports what fails
        return None, {}
    return ctx, ready


def main() -> int:
    """Child process: decode a pickled job; the exit status (:mod:`engine.system.child`'s protocol).

    The job comes pickled beside the request, the :func:`decode_chunk` result goes pickled in the
    result file. The imports come first, then (with arguments ``PATH RANGE:ACTION ...``) the report is opened
    and those kernels decoded, before the request is read: the parent starts children while it
    still reads the report's layout, and the next child while the previous one decodes.
    """
    import engine.reports.ncu.metrics  # noqa: F401, PLC0415 - what ActionDecoder imports
    from engine.system.child import request_data, serve

    ctx, ready = _open_ahead(sys.argv[1:])

    def handle(request: dict[str, Any], _progress: Callable[[str], None]) -> bytes:
        job = pickle.loads(request_data(request))  # noqa: S301 - written by our own parent process
        opened, decoded = (ctx, ready) if ctx is not None and job["path"] == sys.argv[1] else (None, {})
        result = decode_chunk(job, opened, decoded)
        return pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)

    return serve(handle, out_of_memory="Decoding the report's kernels with ncu_report ran out of memory.")


if __name__ == "__main__":
    sys.exit(main())
