"""Decode a ``.ncu-rep`` with our own reader (:mod:`engine.reports.ncu.pb_results`), in this process.

Metric values, names, rules and NVTX come from the file; the units, which the file does not hold,
from :mod:`engine.reports.ncu.unit_lookup` (the user cache, else one small ``ncu_report`` child
that runs while this process decodes). Every kernel's rows and every metric are decoded at once, so
the cached tables are complete. :func:`decode_own` raises :class:`NotDecoded`, saying why, where
this reader does not apply (another file format, content it does not decode, no units to be had, a
disagreement with the layout); the next decoder of :mod:`engine.reports.ncu.decoders` then reads the
report with ``ncu_report``. ``KERNELSCOPE_NCU_OWN=0`` turns it off.
"""

from __future__ import annotations

import os
from pathlib import Path

from engine.reports.ncu.actions import raw_unit
from engine.reports.ncu.decode import ActionDecoder, is_range
from engine.reports.ncu.kernel_names import simplify_names
from engine.reports.ncu.pb_results import PbAction, PbUnsupported, read_results
from engine.reports.ncu.section_defs import ReportLayout
from engine.reports.ncu.unit_lookup import UnitLookup, cached_units, units_key
from engine.system.errors import KernelscopeError

#: Device attributes the metric database (units) depends on, in the units' cache key.
_GPU_KEYS = ("device__attribute_architecture", "device__attribute_chip")


class NotDecoded(Exception):  # noqa: N818 - a reason, not an error: the next decoder is tried
    """This reader does not apply to the report; the message says why."""


def enabled() -> bool:
    """Whether reports are decoded with our own reader (``KERNELSCOPE_NCU_OWN=0``: ``ncu_report`` only)."""
    return os.environ.get("KERNELSCOPE_NCU_OWN", "1") != "0"


def _units_for(p: Path, actions: list[PbAction]) -> tuple[str, list[int]] | None:
    """(cache key, file positions of the first kernel of each distinct metric list, in order)."""
    lists: list[tuple[str, ...]] = []
    firsts: list[int] = []
    seen: set[tuple[str, ...]] = set()
    for pos, a in enumerate(actions):
        names = tuple(a.metric_names())
        if names not in seen:
            seen.add(names)
            lists.append(names)
            firsts.append(pos)
    extra: list[bytes] = []
    for pos in firsts:
        a = actions[pos]
        extra.extend(a.section_msgs)
        for k in _GPU_KEYS:
            m = a.metric_by_name(k)
            extra.append(repr(m.value() if m is not None else None).encode())
    key = units_key(lists, extra)
    return None if key is None else (key, firsts)


def _apply_units(dec: ActionDecoder, units: dict[str, str], present: list[frozenset[str]]) -> None:
    """Give the rows decoded without units (``unit()`` answered "") the units that came later.

    The same units :meth:`ActionDecoder.add` writes when it has them (``settled``): a details row
    takes its metric's unit unless the kernel lacks the metric ("n/a", no unit); the raw page's
    units go through :func:`~engine.reports.ncu.actions.raw_unit`.
    """
    dec.settled = units
    for name in dec.detail_units:
        dec.detail_units[name] = units.get(name, "")
    for row in dec.details:
        m = row[-1]
        if m and m in present[int(row[0])]:
            row[13] = units.get(m, "")
    for table in (dec.raw_units, dec.full_units):
        for name in table:
            table[name] = raw_unit(name, None, units.get(name, ""))


def decode_own(p: Path, layout: ReportLayout, first_process: tuple[str, str, str]
               ) -> tuple[ActionDecoder, list[tuple[int, int]], list[str], list[str]]:
    """(decoder with every row and metric, refs, printed names, stored names).

    Raises:
        NotDecoded: This reader does not apply (see above); the message says why.
    """
    units: dict[str, str] = {}
    try:
        file_actions = read_results(p, units)
    except (PbUnsupported, OSError) as exc:
        raise NotDecoded(f"the file's results are not decoded here ({exc})") from exc
    n = len(file_actions)
    if not n or len(layout.results) != n:
        raise NotDecoded(f"{n} results decoded, the layout lists {len(layout.results)}")
    order, processes, stored_sections = layout.kernel_order(n, first_process)
    actions = [file_actions[i] for i in order]
    # ncu_report holds a report's results as one range, in file order (the units child checks it)
    refs = [(0, i) for i in order]
    found = _units_for(p, actions)
    if found is None:
        raise NotDecoded("no units: NVIDIA's ncu-report is not installed")
    key, firsts = found
    got = cached_units(key)
    child = None
    if got is None:  # it asks for units while this process decodes the rows without them
        child = UnitLookup(p, [refs[k] for k in firsts], n, key)
    else:
        units.update(got)
    dec = ActionDecoder(layout.sections)
    dec.settled = dict(units)
    stored_names = [a.name(a.NameBase_DEMANGLED) for a in actions]
    printed = simplify_names(stored_names)  # as ncu prints them: depends on the whole report
    dec.ranges = [is_range(a) for a in actions]
    present: list[frozenset[str]] = []
    todo: list[PbAction | None] = list(actions)
    del actions, file_actions
    try:
        for idx in range(n):
            a = todo[idx]
            assert a is not None
            dec.add(idx, a, processes[idx], stored_sections[idx], printed[idx], dec.ranges[idx])
            dec.add_full(a)
            present.append(frozenset(a.metrics))
            todo[idx] = a = None  # its bytes go now
    except PbUnsupported as exc:
        if child is not None:
            child.cancel()
        raise NotDecoded(f"a kernel's content is not decoded here ({exc})") from exc
    if child is not None:
        try:
            got = child.result()
        except KernelscopeError as exc:
            raise NotDecoded(str(exc)) from exc
        _apply_units(dec, got, present)
    return dec, refs, printed, stored_names

