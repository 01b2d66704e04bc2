"""What one profiled kernel (an ``ncu_report`` action) holds, decoded into rows and values.

Pure functions over ``ncu_report.IAction`` / ``IMetric`` objects; the reader
(:mod:`engine.reports.ncu.decoders`) calls them for every action of a report.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from engine.reports.ncu.model import ID_COLUMNS, SECTIONS
from engine.reports.ncu.section_defs import SectionDef
from engine.reports.ncu.units import format_number, format_speedup

if TYPE_CHECKING:
    import pandas as pd

#: Units that Nsight Compute 2025.3 prints differently from what newer ``ncu_report`` wheels say.
_RAW_UNIT_OVERRIDES = {"idc__requests.sum": ""}
_THREAD_INST_DERIVED = re.compile(r"derived__(sm|smsp)__sass_thread_inst_executed_op_\w+_pred_on_x\d")
# Rule messages carry links as markup: @section:ID:Name@ and @url:Text:URL@ (ncu prints Name, Text (URL)).
_SECTION_LINK = re.compile(r"@section:[^:@]*:([^@]*)@")
_URL_LINK = re.compile(r"@url:([^:@]*):([^@]*)@")
# Names in an action's metric list that ncu does not print as metrics: breakdown and group
# entries, and the "regex:" patterns of section definitions (a custom section's body may list one).
NOT_METRICS = ("breakdown:", "group:", "regex:")
_RULE_TYPES = {0: "", 1: "INF", 2: "OPT", 3: "WRN", 4: "ERR"}
_SPEEDUP_TYPES = {0: "", 1: "local", 2: "global"}

# Value kinds of ncu_report.IMetric (stable numbers of its enum).
_KIND_UNKNOWN, _KIND_ANY, _KIND_STRING, _KIND_FLOAT, _KIND_DOUBLE, _KIND_UINT32, _KIND_UINT64 = range(7)


def metric_text(metric: Any) -> tuple[str, float]:
    """The printed text of an ``ncu_report.IMetric`` and its numeric value (NaN if none)."""
    kind = metric.kind()
    if kind not in (_KIND_STRING, _KIND_FLOAT, _KIND_DOUBLE, _KIND_UINT32, _KIND_UINT64):
        return "no data", math.nan
    if not metric.has_value():
        return "", math.nan  # collected without a value (e.g. NUMA ids of a GPU without them): ncu prints ""
    if kind == _KIND_STRING:
        return str(metric.as_string()), math.nan
    if kind in (_KIND_UINT32, _KIND_UINT64):
        v = int(metric.as_uint64())
        return f"{v:,}", float(v)
    if kind in (_KIND_FLOAT, _KIND_DOUBLE):
        d = float(metric.as_double())
        return format_number(d), d
    return "no data", math.nan


def metric_value(action: Any, name: str) -> Any:
    """A metric's value as ``ncu_report`` gives it (int, float or str), or None when absent."""
    m = action.metric_by_name(name)
    if m is None or not m.has_value():
        return None
    return m.value()


def int_text(action: Any, name: str) -> str:
    """An identity metric (context, stream, device) as ncu prints it: an integer, whatever its kind.

    Reports of older ncu versions store these as doubles (1.0); ncu prints 1.
    """
    v = metric_value(action, name)
    return "" if v is None else str(int(v))


def section_table(
    action: Any, defs: dict[str, SectionDef], arch: int | None, stored: tuple[str, ...] = ()
) -> list[tuple[str, str, int, tuple[tuple[str, str], ...]]]:
    """The sections the action was profiled with, in print order, with the header rows ncu prints.

    ncu prints the sections a report holds with the definitions stored in the report (a report of
    an older ncu prints its own sections, custom ones included), each header metric filtered by
    the GPU's architecture (:mod:`engine.reports.ncu.section_defs`): ordered by (order, name),
    sections without an order (0) last, each section's header metrics sorted by metric name. A
    section without header metrics prints its rule results only.

    ``stored`` are the result's section identifiers as the report file lists them; when they are
    all defined there, they are used as they are (so ``ncu_report`` wheels without
    ``IAction.sections()``, like 2025.3.1, print the same); otherwise ``action.sections()``.
    """
    def has(name: str) -> bool:
        return action.metric_by_name(name) is not None

    table = []
    if stored and all(i in defs for i in stored):
        for ident in dict.fromkeys(stored):
            stored_def = defs[ident]
            table.append((ident, stored_def.name, stored_def.order, tuple(stored_def.header_rows(arch, has))))
    else:
        try:
            present = list(action.sections())
        except AttributeError:  # a wheel without sections() and no definitions found: every known one
            return sorted(SECTIONS, key=lambda s: (s[2], s[1]))
        for s in present:
            ident = str(s.identifier())
            d = defs.get(ident)
            if d is not None:
                header = d.header_rows(arch, has)
            else:  # no stored definition found: the names and labels ncu_report gives
                header = sorted(((str(m.name()), str(m.label()) or str(m.name()))
                                 for m in s.header_metrics()), key=lambda h: h[0])
            table.append((ident, str(s.name()), int(s.order()), tuple(header)))
    # A section without an order (0: custom sections) comes after the ordered ones.
    return sorted(table, key=lambda s: (s[2] <= 0, s[2], s[1]))


def _plain_message(text: str) -> str:
    """A rule message with its link markup replaced by the words ncu prints."""
    return _URL_LINK.sub(r"\1 (\2)", _SECTION_LINK.sub(r"\1", text))


def raw_unit(name: str, metric: Any, unit: str | None = None) -> str:
    """The unit ncu 2025.3 prints for a metric on the raw page (``unit``: ``metric.unit()`` if known)."""
    unit = _RAW_UNIT_OVERRIDES.get(name, str(metric.unit()) if unit is None else unit)
    if unit == "inst" and _THREAD_INST_DERIVED.fullmatch(name):
        return "thread"
    return unit


def rule_rows(action: Any) -> dict[str, list[list[str]]]:
    """Rule results of an action, by section identifier, as the five rule columns."""
    out: dict[str, list[list[str]]] = {}
    for r in action.rule_results_as_dicts():
        msg = r.get("rule_message") or {}
        if not msg.get("message"):
            continue  # a rule's second, empty result (e.g. UncoalescedSharedAccess): ncu prints none
        rtype = _RULE_TYPES.get(int(msg.get("type", 0) or 0), "")
        sp_type = sp = ""
        est = r.get("speedup_estimation")
        if est:
            sp_type = _SPEEDUP_TYPES.get(int(est.get("type", 0)), "")
            sp = format_speedup(float(est.get("speedup", math.nan)))
        out.setdefault(str(r.get("section_identifier", "")), []).append(
            [str(r.get("rule_identifier", "")), rtype, _plain_message(str(msg.get("message", ""))),
             sp_type, sp]
        )
    return out


def rule_records(kid: int, action: Any) -> list[list[Any]]:
    """Rule results of an action as :data:`RULE_TABLE_COLUMNS` rows (speedup as a float)."""
    out: list[list[Any]] = []
    for r in action.rule_results_as_dicts():
        msg = r.get("rule_message") or {}
        est = r.get("speedup_estimation") or {}
        sp = float(est["speedup"]) if "speedup" in est else math.nan
        out.append([
            kid, str(r.get("rule_identifier", "")), str(r.get("name", "")),
            str(r.get("section_identifier", "")), _RULE_TYPES.get(int(msg.get("type", 0) or 0), ""),
            str(msg.get("title", "")), _plain_message(str(msg.get("message", ""))),
            _SPEEDUP_TYPES.get(int(est.get("type", 0) or 0), "") if est else "", sp,
        ])
    return out


_SOURCE_TOP = 10


def source_records(
    kid: int, action: Any, names: list[str], all_samples: list[tuple[int, int, int]]
) -> list[list[Any]]:
    """The most sampled SASS instructions of an action (Source Counters), hottest first.

    ``smsp__pcsamp_sample_count`` is instanced by program counter; each PC gets its SASS text,
    its dominant stall reason and, when the kernel was built with ``-lineinfo``, its file:line.
    """
    samples = action.metric_by_name("smsp__pcsamp_sample_count")
    if samples is None or samples.num_instances() == 0 or not samples.has_correlation_ids():
        return []
    ids = samples.correlation_ids()
    n = samples.num_instances()
    counts = [(int(samples.as_uint64(i)), i) for i in range(n)]
    all_samples.extend((kid, int(ids.as_uint64(i)), c) for c, i in counts if c > 0)
    counts.sort(reverse=True)
    top = [(c, i) for c, i in counts[:_SOURCE_TOP] if c > 0]
    if not top:
        return []
    pcs = {i: int(ids.as_uint64(i)) for _, i in top}
    stalls: dict[int, tuple[str, int]] = {}
    for name in names:
        if not name.startswith("smsp__pcsamp_warps_issue_stalled_") or name.endswith("_not_issued"):
            continue
        m = action.metric_by_name(name)
        if m is None or m.num_instances() != n:
            continue
        reason = name[len("smsp__pcsamp_warps_issue_stalled_"):]
        for _, i in top:
            c = int(m.as_uint64(i))
            if c > stalls.get(i, ("", -1))[1]:
                stalls[i] = (reason, c)
    executed: dict[int, int] = {}
    inst = action.metric_by_name("inst_executed")
    if inst is not None and inst.has_correlation_ids():
        inst_ids = inst.correlation_ids()
        wanted = set(pcs.values())
        for j in range(inst.num_instances()):
            pc = int(inst_ids.as_uint64(j))
            if pc in wanted:
                executed[pc] = int(inst.as_uint64(j))
    out: list[list[Any]] = []
    for c, i in top:
        pc = pcs[i]
        reason, rc = stalls.get(i, ("", 0))
        # SASS text and file:line are filled in by resolve_sources(), when a kernel is looked at
        out.append([kid, pc, c, reason, rc, executed.get(pc), None, "", None])
    return out


def sass_and_lines(action: Any, pcs: list[int], files: Any = None) -> dict[int, tuple[str, str, int | None]]:
    """SASS text, file and line per PC.

    The first source call decodes the kernel's SASS and line table (50-100 ms per kernel on a
    2-core machine), so this runs only for kernels someone looks at.
    """
    if files is None:
        files = action.source_files()  # 20-40 ms a call on a large module: callers pass it along
    has_lines = files is not None and len(files) > 0
    out: dict[int, tuple[str, str, int | None]] = {}
    for pc in pcs:
        info = action.source_info(pc) if has_lines else None
        file, line = (str(info.file_name()), int(info.line())) if info is not None else ("", None)
        out[pc] = (str(action.sass_by_pc(pc) or "").strip(), file, line)
    return out


def launch_dim(action: Any, prefix: str) -> tuple[int, int, int]:
    """The (x, y, z) of ``launch__grid_dim`` / ``launch__block_dim`` (0 where absent)."""
    return tuple(int(metric_value(action, f"{prefix}_{a}") or 0) for a in "xyz")  # type: ignore[return-value]


def nvtx_range(action: Any) -> str:
    """The NVTX push/pop ranges the kernel ran in, joined by "/" ("" when none)."""
    state = action.nvtx_state()
    if state is None:
        return ""
    names: list[str] = []
    try:
        for domain_id in state.domains():
            dom = state.domain_by_id(domain_id)
            names.extend(str(n) for n in dom.push_pop_ranges())
    except Exception:  # noqa: BLE001 - NVTX is optional decoration, never a reason to fail
        return ""
    return "/".join(names)


def nvtx_cells(action: Any, thread: str) -> tuple[str, str] | None:
    """The kernel's two NVTX cells as ncu prints them, or None when it ran in no NVTX range.

    ncu prints the NVTX columns for a report where a kernel ran in an NVTX range (collected with
    ``--nvtx``); every report has an NVTX state, most with an empty default domain.

    A push/pop cell is the thread (``thread``: the process id, i.e. its main thread) and each
    range as ``"<domain>:<name>:none:none:none:none:none:none"`` (payload, color and message
    types and values: "none" when unset); ``2809  "<default domain>:phase_copy:none:...:none" ``.
    """
    state = action.nvtx_state()
    if state is None:
        return None
    push: list[str] = []
    start: list[str] = []
    try:
        for domain_id in state.domains():
            dom = state.domain_by_id(domain_id)
            name = str(dom.name())
            push.extend(f"{name}:{r}:none:none:none:none:none:none" for r in dom.push_pop_ranges())
            start.extend(f"{name}:{r}:none:none:none:none:none:none" for r in dom.start_end_ranges())
    except Exception:  # noqa: BLE001 - NVTX is optional decoration, never a reason to fail
        return None
    if not push and not start:  # an empty default domain: reports without --nvtx have one too
        return None
    push_cell = thread + " " + "".join(f' "{r}" ' for r in push) if push else ""
    start_cell = "".join(f' "{r}" ' for r in start).strip(" ") if start else ""
    return push_cell, start_cell


def metric_row(a: Any, units: dict[str, str], settled: dict[str, str] | None = None
               ) -> dict[str, tuple[str, float]]:
    """Every metric of action ``a`` as (text as the raw page prints it, value); adds first-seen units.

    ``settled``: units already asked in this process (:func:`engine.reports.ncu.decode.settle_units`).
    """
    row: dict[str, tuple[str, float]] = {}
    known = settled or {}
    for name in map(str, a.metric_names()):
        if name.startswith(NOT_METRICS):
            continue
        m = a.metric_by_name(name)
        row[name] = metric_text(m)
        if name not in units:
            units[name] = raw_unit(name, m, known.get(name))
    return row


def metric_frames(
    rows: list[dict[str, tuple[str, float]]], idents: list[list[str]], raw_units: dict[str, str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The raw page and ``values`` from each kernel's {metric: (text, value)} (:func:`metric_row`)."""
    import numpy as np
    import pandas as pd

    cols = ID_COLUMNS + sorted(raw_units)
    # Built as one 2-D block each: per-column construction of ~2,000 columns costs ~0.5 s.
    cells = np.empty((len(rows), len(cols)), dtype=object)
    for r, (row, ident) in enumerate(zip(rows, idents, strict=True)):
        cells[r] = [*ident, *[row[c][0] if c in row else "" for c in cols[len(ID_COLUMNS):]]]
    raw = pd.DataFrame(cells, columns=cols, dtype=object)
    names = sorted({n for row in rows for n in row})
    pos = {n: i for i, n in enumerate(names)}
    table = np.full((len(rows), len(names)), np.nan)
    for r, row in enumerate(rows):
        table[r, [pos[n] for n in row]] = [x for _, x in row.values()]
    values = pd.DataFrame(table, index=pd.Index(range(len(rows)), name="ID"), columns=names)
    return raw, values


def section_labels(action: Any, labels: dict[str, str]) -> list[str]:
    """Record the labels ncu's sections give their metrics; return the action's section identifiers."""
    idents: list[str] = []
    try:
        secs = list(action.sections())
    except AttributeError:  # older wheels have no sections()
        return idents
    for s in secs:
        idents.append(str(s.identifier()))
        for m in (*s.header_metrics(), *s.body_metrics()):
            name = str(m.name())
            if name not in labels:
                label = str(m.label())
                if label:
                    labels[name] = label
    return idents
