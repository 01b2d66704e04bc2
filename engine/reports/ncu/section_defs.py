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
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from engine.reports.ncu.wire import blocks, fields, text, top_fields

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
        candidates = [n for n, r in self.options if accepts(r, arch)]
        if accepts(self.ranges, arch):
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


def accepts(ranges: tuple[tuple[int | None, int | None], ...], arch: int | None) -> bool:
    """Whether a filter of (min, max) architecture ``ranges`` accepts ``arch`` (no filter or arch: yes)."""
    if not ranges or arch is None:
        return True
    return any((lo is None or arch >= lo) and (hi is None or arch <= hi) for lo, hi in ranges)


def _arch(v: int) -> int | None:
    return v if v in KNOWN_ARCHS else None  # an enum value ncu does not know reads as unset


def arch_ranges(filter_msg: bytes) -> tuple[tuple[int | None, int | None], ...]:
    """The (min, max) architecture ranges of a stored filter message; () = any architecture."""
    lo = hi = None
    items: list[tuple[int | None, int | None]] = []
    for f, v in fields(filter_msg):
        if f == 1 and isinstance(v, int):
            lo = _arch(v)
        elif f == 2 and isinstance(v, int):
            hi = _arch(v)
        elif f == 3 and isinstance(v, bytes):
            ilo = ihi = None
            for g, w in fields(v):
                if g == 1 and isinstance(w, int):
                    ilo = _arch(w)
                elif g == 2 and isinstance(w, int):
                    ihi = _arch(w)
            items.append((ilo, ihi))
    if items:
        return tuple(items)
    return () if lo is None and hi is None else ((lo, hi),)


def _section(msg: bytes) -> SectionDef | None:
    ident = name = ""
    order = 0
    header: list[HeaderMetric] = []
    for f, v in fields(msg):
        if f == 1:
            ident = text(v)
        elif f == 2:
            name = text(v)
        elif f == 3 and isinstance(v, int):
            order = v
        elif f == 4 and isinstance(v, bytes):
            for g, mv in fields(v):
                if g != 2 or not isinstance(mv, bytes):
                    continue
                mname = label = ""
                ranges: tuple[tuple[int | None, int | None], ...] = ()
                options = []
                for h, w in fields(mv):
                    if h == 1:
                        mname = text(w)
                    elif h == 2:
                        label = text(w)
                    elif h == 6 and isinstance(w, bytes):
                        ranges = arch_ranges(w)
                    elif h == 7 and isinstance(w, bytes):
                        oname = ""
                        oranges: tuple[tuple[int | None, int | None], ...] = ()
                        for k, x in fields(w):
                            if k == 1:
                                oname = text(x)
                            elif k == 3 and isinstance(x, bytes):
                                oranges = arch_ranges(x)
                        if oname:
                            options.append((oname, oranges))
                if mname:
                    header.append(HeaderMetric(mname, label, ranges, tuple(options)))
    if not ident or not ident.replace("_", "").isalnum():
        return None
    return SectionDef(ident, name, order, tuple(header))


@dataclass(frozen=True)
class ResultInfo:
    """One profiling result as the report file stores it, in file order."""

    pid: int | None  # the profiled process: the process record in the result's header block
    has_rule_results: bool  # the result holds rule results (possibly none with a message)
    sections: tuple[str, ...] = ()  # identifiers of the sections it was profiled with, as stored
    tid: int | None = None  # the launching thread (the result's field 1; the pid for the main thread)


@dataclass
class ReportLayout:
    """What the report's blocks say beyond ``ncu_report``'s API."""

    sections: dict[str, SectionDef] = field(default_factory=dict)  # stored section definitions
    results: list[ResultInfo] = field(default_factory=list)  # kernel results, in file order
    processes: dict[int, tuple[str, str]] = field(default_factory=dict)  # pid -> (executable, host)
    ncu_version: str | None = None  # the Nsight Compute that wrote it ("2025.3.1.0"), from its log

    def kernel_order(self, n: int, first_process: tuple[str, str, str]
                     ) -> tuple[list[int], list[tuple[str, str, str]], list[tuple[str, ...]]]:
        """(file positions in kernel order, processes, stored section lists) of ``n`` results.

        The file's results are ``ncu_report``'s actions, in order, when there are as many of them.
        ncu numbers the kernels process by process (by process id) where a report holds several.
        ``first_process`` (the header's process) stands in where a result's process is not known.
        """
        processes = [first_process] * n
        stored: list[tuple[str, ...]] = [()] * n
        order = list(range(n))
        if len(self.results) == n:
            stored = [r.sections for r in self.results]
            pids = [r.pid for r in self.results]
            processes = [
                (str(q), *self.processes.get(q, first_process[1:])) if q is not None else first_process
                for q in pids
            ]
            if len(set(pids)) > 1:
                order = sorted(range(n), key=lambda i: (pids[i] or 0, i))
                processes = [processes[i] for i in order]
                stored = [stored[i] for i in order]
        return order, processes, stored


def read_section_defs(path: Path) -> dict[str, SectionDef]:
    """Every section definition stored in a report, by identifier (see :func:`read_report_layout`)."""
    return read_report_layout(path).sections


def read_report_layout(path: Path) -> ReportLayout:
    """The section definitions, the results (process, rule results) and the processes of a report.

    A report is a chain of length-prefixed blocks; a result is a small header block (field 1 = 0,
    field 5 = the next block's length with its prefix) followed by the result message (field 1 the
    process id, 17 the section definitions, 19 the rule results; 7 and 20 for a range result).
    Walks the blocks and the top-level fields of each (large fields are skipped, not read), so it
    costs little even for reports of hundreds of MB. A block that does not parse is skipped; an
    unreadable report gives an empty layout.

    Args:
        path: A ``.ncu-rep`` file (already checked to be one).

    Returns:
        The layout; ``sections`` keyed by identifier (the first definition found wins).
    """
    layout = ReportLayout()
    try:
        with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            view = memoryview(mm)
            try:
                _walk(view, layout)
            finally:
                view.release()
    except (OSError, ValueError):
        return layout
    return layout


_PROCESS_RE = re.compile(rb"2([\x05-\x7f])\x08([\x80-\xff]{0,4}[\x00-\x7f])\x12([\x00-\x7f])", re.S)


def processes_in(buf: bytes, found: dict[int, tuple[str, str]]) -> None:
    """Process records {1: pid, 2: host, 3: executable path} in a block: pid -> (executable, host)."""
    for m in _PROCESS_RE.finditer(buf):
        total, host_len = m.group(1)[0], m.group(3)[0]
        p = m.end() + host_len
        if p + 2 > len(buf) or buf[p] != 0x1A:
            continue
        path_len = buf[p + 1]
        if p + 2 + path_len - (m.start() + 2) != total:
            continue
        pid = 0
        for i, b in enumerate(m.group(2)):
            pid |= (b & 0x7F) << (7 * i)
        exe = buf[p + 2:p + 2 + path_len].decode("utf-8", "replace")
        found.setdefault(pid, (exe.rsplit("/", 1)[-1], buf[m.end():p].decode("utf-8", "replace")))


_HEADER_MAX = 1 << 24  # a result's header block: ~50 bytes, the first one with its 100 kB string table


def _walk(view: memoryview, layout: ReportLayout) -> None:
    found = blocks(view)
    for k, (start, length) in enumerate(found[:-1]):
        if length > _HEADER_MAX:
            continue
        try:
            head = top_fields(view, start, start + length, frozenset(), last=7)
        except (ValueError, IndexError):
            continue
        nxt_start, nxt_len = found[k + 1]
        if head.get(1) != [0] or head.get(5) != [nxt_len + 4]:
            continue
        # A result header: the next block is the result. A kernel result (header field 2 = 1) has
        # the process id in field 1, section definitions in 17, rule results in 19; a range result
        # (--replay-mode range, field 2 = 0) has them in 7 and 20.
        sec_field, rule_field = (17, 19) if head.get(2) == [1] else (7, 20)
        try:
            res = top_fields(view, nxt_start, nxt_start + nxt_len, frozenset({sec_field}), last=rule_field)
        except (ValueError, IndexError):
            continue
        idents: list[str] = []
        for msg in res.get(sec_field, []):
            if isinstance(msg, bytes):
                try:
                    sec = _section(msg)
                except (ValueError, IndexError):
                    continue
                if sec is None:
                    continue
                idents.append(sec.identifier)
                layout.sections.setdefault(sec.identifier, sec)
        tid = res.get(1, [None])[0]
        tid_value = tid if isinstance(tid, int) else None
        # The header block holds the owning process's record {1: pid, 2: host, 3: executable}. Field 1
        # of the result is the launching thread: the pid only for the main thread (a PyTorch backward
        # pass launches from its autograd thread, and ncu still prints the process id).
        owner: dict[int, tuple[str, str]] = {}
        processes_in(bytes(view[start:start + length]), owner)
        pid_value = next(iter(owner), tid_value)
        layout.results.append(ResultInfo(pid_value, rule_field in res, tuple(idents), tid_value))
    # Process records and the writer's version, in file order, until both are known.
    wanted = {r.pid for r in layout.results if r.pid is not None}
    for start, length in found:
        if wanted and wanted <= layout.processes.keys() and layout.ncu_version is not None:
            break
        if length < (1 << 20):
            buf = bytes(view[start:start + length])
            processes_in(buf, layout.processes)
            if layout.ncu_version is None:
                m = _TARGET_VERSION.search(buf)
                if m:
                    layout.ncu_version = m.group(1).decode()


# The profiler's log in the report: "Nsight Compute Target" "2025.3.1.0 (build 36398880) ..."
_TARGET_VERSION = re.compile(rb"Nsight Compute Target\x12.{1,2}?(20\d\d\.\d+\.\d+(?:\.\d+)?)", re.S)


def version_tuple(version: str | None) -> tuple[int, ...]:
    """``"2025.3.1.0"`` -> ``(2025, 3, 1, 0)``; () when there is none."""
    if not version:
        return ()
    return tuple(int(x) for x in re.findall(r"\d+", version.split(" ")[0]))
