"""The section definitions a ``.ncu-rep`` carries, with their architecture filters, as ncu reads them.

``ncu --import R --page details`` prints, for each section an action was profiled with, the header
metrics of the section *definition stored in the report* (custom sections included), not those of
the ncu doing the import. Each header metric may carry a filter on the GPU architecture (minimum
and maximum compute capability, or a list of such ranges) and options (another metric name that
replaces it on other architectures). ``ncu_report`` gives the metric names and labels but neither
the filters nor the options, so they are read here from the report itself.

A report stores, in each profiled action's result message (one length-prefixed protobuf block per
action), the definitions of the sections it was profiled with as repeated field 17: identifier (1),
name (2), order (3), header (4) with repeated metrics (2) of name (1), label (2), filter (6) and
options (7: name 1, filter 3). A filter holds a minimum (1) and a maximum (2) architecture, or
ranges (3) that each hold both; an architecture is a compute capability written as 10 x major +
minor (75, 86, 90, ...).

How Nsight Compute 2025.3.1 evaluates them, as its output on reports of other versions shows: a
metric whose filter rejects the action's architecture is not printed, unless an option's filter
accepts it (the option's metric is printed under the same label; where both pass, the one the
report holds, options first: on an H200 "L2 Compression Ratio" is ``lrc__...`` although the
``lts__...`` metric's filter, "8.0 and newer", passes too); a metric that passes but is not in the
report prints as ``n/a``. The architecture fields are protobuf enums: a value that ncu
2025.3.1 does not know (70, which CUDA 13 dropped, or 101, which became 110) reads as unset, so that
bound does not constrain. This is why a report written by an older ncu for an RTX 3050 prints "Average
MC Channel Active Cycles: n/a" (its filter lists 87 and 101) where ncu 2025.3.1's own definition
(87 and 110) hides it.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

#: The architecture values Nsight Compute 2025.3.1 knows (those its own section files use).
KNOWN_ARCHS = frozenset({75, 80, 86, 87, 89, 90, 100, 103, 110, 120, 121})


@dataclass(frozen=True)
class HeaderMetric:
    """One header metric of a stored section definition."""

    name: str
    label: str
    ranges: tuple[tuple[int | None, int | None], ...]  # accepted (min, max) ranges; () = any
    options: tuple[tuple[str, tuple[tuple[int | None, int | None], ...]], ...] = ()

    def resolve(self, arch: int | None, has: Callable[[str], bool]) -> str | None:
        """The metric printed for a GPU of architecture ``arch`` (10 x major + minor), or None.

        The options whose filters accept ``arch`` come before the metric itself (an option is the
        metric's name on those architectures); the first of these the action has wins, else the
        first of them (printed as ``n/a``); None when no filter accepts ``arch``.
        """
        candidates = [n for n, r in self.options if _accepts(r, arch)]
        if _accepts(self.ranges, arch):
            candidates.append(self.name)
        for name in candidates:
            if has(name):
                return name
        return candidates[0] if candidates else None


@dataclass(frozen=True)
class SectionDef:
    """A section definition as a report stores it."""

    identifier: str
    name: str
    order: int
    header: tuple[HeaderMetric, ...]

    def header_rows(self, arch: int | None, has: Callable[[str], bool]) -> list[tuple[str, str]]:
        """(metric, label) of the header metrics printed for ``arch``, sorted by metric name.

        ``has(name)`` says whether the action holds that metric.
        """
        rows = []
        for m in self.header:
            name = m.resolve(arch, has)
            if name:
                rows.append((name, m.label or name))
        return sorted(rows, key=lambda r: r[0])


def _accepts(ranges: tuple[tuple[int | None, int | None], ...], arch: int | None) -> bool:
    if not ranges or arch is None:
        return True
    return any((lo is None or arch >= lo) and (hi is None or arch <= hi) for lo, hi in ranges)


def _varint(b: bytes | memoryview, i: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def _fields(b: bytes | memoryview) -> list[tuple[int, int | bytes]]:
    """The top-level fields of a protobuf message: (field number, int or bytes)."""
    out: list[tuple[int, int | bytes]] = []
    i, n = 0, len(b)
    while i < n:
        key, i = _varint(b, i)
        f, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(b, i)
            out.append((f, v))
        elif wire == 2:
            ln, i = _varint(b, i)
            if i + ln > n:
                raise ValueError("truncated field")
            out.append((f, bytes(b[i:i + ln])))
            i += ln
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"wire type {wire}")
    return out


def _arch(v: int) -> int | None:
    return v if v in KNOWN_ARCHS else None  # an enum value ncu does not know reads as unset


def _ranges(filter_msg: bytes) -> tuple[tuple[int | None, int | None], ...]:
    lo = hi = None
    items: list[tuple[int | None, int | None]] = []
    for f, v in _fields(filter_msg):
        if f == 1 and isinstance(v, int):
            lo = _arch(v)
        elif f == 2 and isinstance(v, int):
            hi = _arch(v)
        elif f == 3 and isinstance(v, bytes):
            ilo = ihi = None
            for g, w in _fields(v):
                if g == 1 and isinstance(w, int):
                    ilo = _arch(w)
                elif g == 2 and isinstance(w, int):
                    ihi = _arch(w)
            items.append((ilo, ihi))
    if items:
        return tuple(items)
    return () if lo is None and hi is None else ((lo, hi),)


def _text(v: int | bytes) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else ""


def _section(msg: bytes) -> SectionDef | None:
    ident = name = ""
    order = 0
    header: list[HeaderMetric] = []
    for f, v in _fields(msg):
        if f == 1:
            ident = _text(v)
        elif f == 2:
            name = _text(v)
        elif f == 3 and isinstance(v, int):
            order = v
        elif f == 4 and isinstance(v, bytes):
            for g, mv in _fields(v):
                if g != 2 or not isinstance(mv, bytes):
                    continue
                mname = label = ""
                ranges: tuple[tuple[int | None, int | None], ...] = ()
                options = []
                for h, w in _fields(mv):
                    if h == 1:
                        mname = _text(w)
                    elif h == 2:
                        label = _text(w)
                    elif h == 6 and isinstance(w, bytes):
                        ranges = _ranges(w)
                    elif h == 7 and isinstance(w, bytes):
                        oname = ""
                        oranges: tuple[tuple[int | None, int | None], ...] = ()
                        for k, x in _fields(w):
                            if k == 1:
                                oname = _text(x)
                            elif k == 3 and isinstance(x, bytes):
                                oranges = _ranges(x)
                        if oname:
                            options.append((oname, oranges))
                if mname:
                    header.append(HeaderMetric(mname, label, ranges, tuple(options)))
    if not ident or not ident.replace("_", "").isalnum():
        return None
    return SectionDef(ident, name, order, tuple(header))


def read_section_defs(path: Path) -> dict[str, SectionDef]:
    """Every section definition stored in a report, by identifier (the first one found wins).

    Walks the report's blocks and the top-level fields of each (large fields are skipped, not
    read), so it costs little even for reports of hundreds of MB. A block that does not parse as
    a result message is skipped; a report whose definitions cannot be found gives ``{}``.

    Args:
        path: A ``.ncu-rep`` file (already checked to be one).

    Returns:
        Section identifier -> its stored definition.
    """
    found: dict[str, SectionDef] = {}
    try:
        with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            view = memoryview(mm)
            try:
                _walk(view, found)
            finally:
                view.release()
    except (OSError, ValueError):
        return found
    return found


def _walk(view: memoryview, found: dict[str, SectionDef]) -> None:
    size = len(view)
    pos = 4
    while pos + 4 <= size:
        (length,) = struct.unpack_from("<I", view, pos)
        start, end = pos + 4, pos + 4 + length
        pos = end
        if end > size:
            return
        i = start
        try:
            while i < end:
                key, i = _varint(view, i)
                f, wire = key >> 3, key & 7
                if wire == 0:
                    _, i = _varint(view, i)
                elif wire == 2:
                    ln, i = _varint(view, i)
                    if f == 17 and i + ln <= end:
                        sec = _section(bytes(view[i:i + ln]))
                        if sec is not None and sec.identifier not in found:
                            found[sec.identifier] = sec
                    i += ln
                elif wire == 1:
                    i += 8
                elif wire == 5:
                    i += 4
                else:
                    break
        except (ValueError, IndexError):
            continue
