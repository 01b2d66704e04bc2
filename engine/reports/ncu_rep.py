"""Read ``.ncu-rep`` files through NVIDIA's ``ncu_report`` module (PyPI ``ncu-report``).

``ncu_report`` is imported only when such a file is opened. A report is first read for the summary
(:class:`LazyNcuReport`: the details page, rules, source counters and the metrics the summary
needs); the raw page and every other metric are decoded on first use. Tables are cached on disk
(:mod:`engine.reports.ncu_cache`). Input files are only ever opened for reading.
"""

from __future__ import annotations

import math
import re
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.reports import ncu_split
from engine.reports.base import read_head
from engine.reports.ncu_actions import all_metrics, hottest_lines, metric_frames, sass_and_lines
from engine.reports.ncu_cache import cache_load, cache_store
from engine.reports.ncu_decode import ActionDecoder, is_range, settle_units
from engine.reports.ncu_model import (
    DETAILS_COLUMNS,
    KERNEL_COLUMNS,
    LINE_COLUMNS,
    RULE_TABLE_COLUMNS,
    SOURCE_COLUMNS,
    NcuReport,
)
from engine.reports.ncu_names import simplify_names
from engine.reports.ncu_section_defs import read_report_layout, version_tuple
from engine.reports.ncu_split import resolve_in_children, use_children
from engine.system.errors import ReportError

if TYPE_CHECKING:
    import pandas as pd

@dataclass
class _Partial:
    """What a summary read of a ``.ncu-rep`` decoded: a few metrics per kernel, every metric's name."""

    names: list[frozenset[str]]  # per kernel ID: every metric it has (no breakdown:/group: names)
    nums: list[dict[str, float]]  # per kernel ID: the summary metrics as floats (NaN: no value)
    units: dict[str, str]  # the summary metrics' raw-page units
    idents: list[list[str]]  # per kernel ID: the ID_COLUMNS cells
    use_cache: bool
    identity: tuple[int, int] = (0, 0)  # the file's (size, mtime_ns) when it was read
    all_names: list[str] = field(default_factory=list)  # sorted union of names, filled on first use
    matching: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # metric_names_matching


class LazyNcuReport(NcuReport):
    """A ``.ncu-rep`` read for the summary; the raw page and the full ``values`` come on first use.

    Decoding every one of a kernel's ~2,300 metrics (and asking each its unit) costs more than the
    rest of the summary together, and only the details/raw pages, rules and gates need them.
    :meth:`value`, :meth:`unit` and :meth:`metric_names_matching` answer from the metrics the
    summary reads (``engine.analysis.ncu.sections.summary_metrics``); reading ``raw``,
    ``raw_units``, ``values`` or ``units``, or asking :meth:`value` for another metric a kernel has,
    decodes the rest (from the report still open in ``ncu_report``, or by opening the file again)
    and rewrites the cache entry with the full tables. The results are the same as a full read.
    """

    def _full(self, key: str) -> Any:
        if self.__dict__.get("_partial") is not None:
            self._materialize()
        return self.__dict__[key]

    @property  # type: ignore[override]
    def raw(self) -> pd.DataFrame:
        """The ``--page raw`` table (decoded on first use)."""
        return self._full("_raw")  # type: ignore[no-any-return]

    @raw.setter
    def raw(self, table: pd.DataFrame) -> None:
        self.__dict__["_raw"] = table

    @property  # type: ignore[override]
    def raw_units(self) -> dict[str, str]:
        """The raw page's units (decoded on first use)."""
        return self._full("_raw_units")  # type: ignore[no-any-return]

    @raw_units.setter
    def raw_units(self, units: dict[str, str]) -> None:
        self.__dict__["_raw_units"] = units

    @property  # type: ignore[override]
    def values(self) -> pd.DataFrame | None:
        """Every metric as a float (decoded on first use)."""
        return self._full("_values")  # type: ignore[no-any-return]

    @values.setter
    def values(self, table: pd.DataFrame | None) -> None:
        self.__dict__["_values"] = table

    @property  # type: ignore[override]
    def units(self) -> dict[str, str]:
        """Every metric's base unit (decoded on first use)."""
        return self._full("_units")  # type: ignore[no-any-return]

    @units.setter
    def units(self, units: dict[str, str]) -> None:
        self.__dict__["_units"] = units

    def value(self, kernel_id: int, metric: str) -> float | None:
        """One metric of one kernel as a float in base units, or None when it was not collected."""
        part: _Partial | None = self.__dict__.get("_partial")
        if part is None:
            return super().value(kernel_id, metric)
        if not 0 <= kernel_id < len(part.nums):
            return None
        x = part.nums[kernel_id].get(metric)
        if x is None:
            if metric not in part.names[kernel_id]:
                return None
            self._materialize()
            return super().value(kernel_id, metric)
        return None if math.isnan(x) else x

    def unit(self, metric: str) -> str:
        """A metric's base unit ("" when unknown)."""
        part: _Partial | None = self.__dict__.get("_partial")
        if part is not None:
            u = part.units.get(metric)
            if u is not None:
                return u
            if not any(metric in names for names in part.names):
                return ""
        return super().unit(metric)

    def metric_names_matching(self, prefix: str, suffix: str = "") -> list[str]:
        """The report's metric names with that prefix and suffix, sorted."""
        part: _Partial | None = self.__dict__.get("_partial")
        if part is None:
            return super().metric_names_matching(prefix, suffix)
        found = part.matching.get((prefix, suffix))
        if found is None:
            if not part.all_names:
                part.all_names = sorted(frozenset().union(*part.names))
            found = [n for n in part.all_names if n.startswith(prefix) and n.endswith(suffix)]
            part.matching[(prefix, suffix)] = found
        return list(found)

    def _materialize(self) -> None:
        """Decode every metric of every kernel: the raw page, ``values`` and ``units``."""
        with _OPEN_LOCK:
            part: _Partial | None = self.__dict__.get("_partial")
            if part is None:
                return
            try:
                st = self.path.stat()
                if part.identity != (0, 0) and (st.st_size, st.st_mtime_ns) != part.identity:
                    raise ReportError(
                        f"{self.path} changed since it was opened, so its remaining metrics cannot be "
                        "read from it; open it again."
                    )
                ctx = _open_report(self.path)
                actions = [_action(ctx, ref) for ref in self.action_refs]
            except ReportError:
                raise
            except Exception as exc:  # noqa: BLE001 - the native reader's errors are not for people
                raise ReportError(
                    f"{self.path} could not be read again for its remaining metrics ({exc}); "
                    "check that the file is still there and open it again."
                ) from exc
            raw, raw_units, values = all_metrics(actions, part.idents)
            self.__dict__.update(_raw=raw, _raw_units=raw_units, _values=values, _units=dict(raw_units))
            self.__dict__["_partial"] = None
            if part.use_cache:
                cache_store(self.path, self)


def _check_file(path: Path) -> None:
    """Raise ReportError unless ``path`` is a complete Nsight Compute report (cheap, reads headers)."""
    head = read_head(path, 4, folder_sentence="is a folder, not a report; give the path of a .ncu-rep file.",
                     unreadable_hint="; check the file and try again")
    size = path.stat().st_size
    if size == 0:
        raise ReportError(f"{path} is empty (0 bytes); profile again or copy the report again.")
    with path.open("rb") as f:
        if head != b"NVR\x00":
            raise ReportError(
                f"{path} is not an Nsight Compute report (.ncu-rep); open a file written by `ncu -o`."
            )
        # The report is a chain of length-prefixed blocks that must end exactly at the end of file.
        pos = 4
        while pos + 4 <= size:
            f.seek(pos)
            (length,) = struct.unpack("<I", f.read(4))
            pos += 4 + length
        if pos != size:
            raise ReportError(
                f"{path} is truncated or damaged ({size:,} bytes, its blocks end at {pos:,}); "
                "copy or record the report again."
            )


#: The newest report file format this code was checked with (Nsight Compute 2025.3 writes 7).
KNOWN_FORMAT = 7


def report_format_version(path: Path) -> int | None:
    """The format version in a report's first block (protobuf field 1), or None if unreadable."""
    with path.open("rb") as f:
        head = f.read(24)
    if len(head) < 10 or head[:4] != b"NVR\x00" or head[8] != 0x08:
        return None
    value, shift = 0, 0
    for b in head[9:19]:
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value
    return None


def _newer_than_reader(fmt: int | None, ncu_version: str | None) -> bool:
    """Whether the report comes from a newer Nsight Compute than the installed ``ncu_report``.

    By the version in the report's own log (``Nsight Compute Target 2026.3.0.0``: its year and
    release against the wheel's), else by the file format number.
    """
    wrote = version_tuple(ncu_version)[:2]
    try:
        reader = version_tuple(_wheel_version())[:2]
    except Exception:  # noqa: BLE001 - no metadata: only the format number can tell
        reader = ()
    if wrote and reader:
        return wrote > reader
    return fmt is not None and fmt > KNOWN_FORMAT


def _newer_message(p: Path, fmt: int | None, ncu_version: str | None = None, *, partly: bool = False) -> str:
    try:
        version = _wheel_version()
    except Exception:  # noqa: BLE001 - only decoration for the message
        version = "(installed)"
    verb = "may not read all of it" if partly else "cannot read it"
    wrote = version_tuple(ncu_version)
    if len(wrote) >= 2:
        need = f"{wrote[0]}.{wrote[1]}"
        return (
            f"{p} was written by Nsight Compute {ncu_version}, newer than the installed ncu-report "
            f"{version}, which {verb}; install ncu-report {need} or newer (`pip install -U "
            f"'ncu-report>={need}'`), or export it with that ncu (`ncu --import R --csv --page raw`) "
            "and open the CSV."
        )
    return (
        f"{p} was written by a newer Nsight Compute (report format {fmt}) and ncu-report {version} "
        f"{verb}; run `pip install -U ncu-report`, or export it with that ncu "
        "(`ncu --import R --csv --page raw`) and open the CSV."
    )


def _wheel_version() -> str:
    from importlib.metadata import version

    return version("ncu-report")


def _import_ncu_report() -> Any:
    try:
        import ncu_report  # noqa: PLC0415 - heavy native module, loaded only for .ncu-rep files
    except ImportError as exc:
        raise ReportError(
            "Reading .ncu-rep files needs NVIDIA's Python package `ncu-report`; "
            "install it with `pip install ncu-report`."
        ) from exc
    return ncu_report


_PROCESS_RE = re.compile(rb"2([\x05-\x7f])\x08([\x80-\xff]{0,4}[\x00-\x7f])\x12([\x00-\x7f])", re.S)


def _process_info(path: Path) -> tuple[str, str, str]:
    """(process id, process name, host name) from the report's header block.

    ``ncu_report`` does not expose them; the header holds a small protobuf message
    {1: pid, 2: host, 3: executable path}. Reports of several processes get the first one.
    """
    with path.open("rb") as f:
        head = f.read(1 << 16)
    for m in _PROCESS_RE.finditer(head):
        total = m.group(1)[0]
        host_len = m.group(3)[0]
        p = m.end() + host_len
        if p + 2 > len(head) or head[p] != 0x1A:
            continue
        path_len = head[p + 1]
        if p + 2 + path_len - (m.start() + 2) != total:
            continue
        pid = 0
        for i, b in enumerate(m.group(2)):
            pid |= (b & 0x7F) << (7 * i)
        host = head[m.end():p].decode("utf-8", "replace")
        exe = head[p + 2:p + 2 + path_len].decode("utf-8", "replace")
        return str(pid), exe.rsplit("/", 1)[-1], host
    return "", "", ""


_OPEN_REPORTS: dict[tuple[Path, int, int], Any] = {}
_OPEN_ACTIONS: dict[tuple[int, int, int], Any] = {}  # (id(ctx), range, action) -> decoded action


def forget_open_reports() -> None:
    """Close the report kept open by :func:`_open_report` (as a new process would start)."""
    with _OPEN_LOCK:
        _OPEN_REPORTS.clear()
        _OPEN_ACTIONS.clear()

_OPEN_LOCK = threading.RLock()


def _open_report(path: Path, ctx: Any = None) -> Any:
    """The ``ncu_report`` context of a report file, kept open (one file at a time).

    The context keeps the kernels it has decoded (decoding one costs 30-150 ms; asking again, a
    few ms), so the summary read, the raw page and the SASS of the hottest instructions share one
    decode. Keyed by the file's size and modification time: a rewritten file is opened again.
    ``ctx`` registers a context the caller just opened.
    """
    st = path.stat()
    key = (path, st.st_size, st.st_mtime_ns)
    with _OPEN_LOCK:
        if ctx is None:
            ctx = _OPEN_REPORTS.get(key)
            if ctx is not None:
                return ctx
            ctx = _import_ncu_report().load_report(str(path))
        _OPEN_REPORTS.clear()  # keep one report open at a time
        _OPEN_ACTIONS.clear()
        _OPEN_REPORTS[key] = ctx
        return ctx


def _action(ctx: Any, ref: tuple[int, int]) -> Any:
    """The decoded action ``ref`` = (range, action) of the open report ``ctx``.

    ``ncu_report`` decodes an action again on every ``action_by_idx`` (10-15 ms and ~10 MB each
    for a ``--set full`` kernel), so the open report's actions are kept with it.
    """
    with _OPEN_LOCK:
        key = (id(ctx), *ref)
        a = _OPEN_ACTIONS.get(key)
        if a is None:
            a = _OPEN_ACTIONS[key] = ctx.range_by_idx(ref[0]).action_by_idx(ref[1])
        return a


def resolve_sources(report: NcuReport, kernel_id: int) -> None:
    """Fill in the SASS text and file:line of one kernel's hottest instructions (``report.sources``).

    Reopens the ``.ncu-rep`` (kept open for later kernels); does nothing for CSV exports, for
    kernels already resolved, or when the file is gone (the rows keep their PCs and counts).
    """
    src = report.sources
    if report.source != "ncu-rep" or src is None or not len(src):
        return
    mine = src.index[(src["ID"] == kernel_id) & src["sass"].isna()]
    if not len(mine) or kernel_id in report.source_lines:
        return
    try:
        with _OPEN_LOCK:
            i, j = report.action_refs[kernel_id]
            action = _action(_open_report(report.path), (i, j))
        files = action.source_files()
        found = sass_and_lines(action, [int(pc) for pc in src.loc[mine, "pc"]], files)
        lines = hottest_lines(action, report, kernel_id, files=files)
    except Exception:  # noqa: BLE001 - the SASS text is decoration; the counts are already there
        return
    fill_sources(report, kernel_id, found, lines)


def fill_sources(report: NcuReport, kernel_id: int, found: dict[int, tuple[str, str, int | None]],
                 lines: pd.DataFrame) -> None:
    """Set one kernel's SASS text, file and line per hottest PC, and its hottest source lines."""
    src = report.sources
    assert src is not None
    mine = src.index[(src["ID"] == kernel_id) & src["sass"].isna()]
    report.source_lines[kernel_id] = lines
    src = src.astype({"sass": "object", "file": "object", "line": "object"})
    for idx in mine:
        pc: Any = src.at[idx, "pc"]
        sass, file, line = found[int(pc)]
        src.at[idx, "sass"], src.at[idx, "file"], src.at[idx, "line"] = sass, file, line
    report.sources = src


def resolve_all_sources(report: NcuReport) -> bool:
    """:func:`resolve_sources` for every kernel, decoded in child processes (what the sections page shows).

    Kernels already resolved are skipped; when the children cannot run, each kernel is resolved
    in-process. Returns whether any kernel was resolved now.
    """
    src = report.sources
    if report.source != "ncu-rep" or src is None or not len(src):
        return False
    todo = sorted({int(k) for k in src.loc[src["sass"].isna(), "ID"]} - set(report.source_lines))
    if not todo:
        return False
    found = None
    if len(todo) >= ncu_split.SPLIT_MIN and use_children() and report.pc_samples is not None:
        ps = report.pc_samples
        wanted = {}
        for k in todo:
            mine = ps[ps["ID"] == k]
            wanted[k] = ([int(pc) for pc in src.loc[(src["ID"] == k) & src["sass"].isna(), "pc"]],
                         [(int(pc), int(n)) for pc, n in zip(mine["pc"], mine["samples"], strict=True)])
        found = resolve_in_children(report.path, report.action_refs, wanted)
    if found is None:
        for k in todo:
            resolve_sources(report, k)
        return True
    import pandas as pd

    for k, got in found.items():
        if got is not None:
            fill_sources(report, k, got[0], pd.DataFrame(got[1], columns=LINE_COLUMNS))
    return True


def read_ncu_rep(path: str | Path, *, use_cache: bool = True, sources: bool = False) -> NcuReport:
    """Read a ``.ncu-rep`` file into tables.

    Decoding a kernel in ``ncu_report`` costs about 0.1 s, so the tables are cached (pickled under
    the user cache directory, keyed by the file's identity and the engine's code); ``use_cache=False``
    neither reads nor writes the cache.

    Only the metrics the summary needs are decoded now (a :class:`LazyNcuReport`): the raw page,
    ``values``/``units`` and any other metric are decoded on first use, and the cache entry is then
    rewritten with the full tables.

    A report of :data:`~engine.reports.ncu_split.SPLIT_MIN` kernels or more is decoded in child
    processes (:mod:`engine.reports.ncu_split`), complete at once: ~130 MB of ``ncu_report`` memory
    per child instead of ~10 MB per kernel kept in this process.

    Args:
        path: The report file.
        use_cache: Read and write the on-disk cache.
        sources: Also disassemble every kernel's hottest instructions (:func:`resolve_all_sources`).

    Returns:
        The report's kernels, details-page metrics, raw-page metrics, numeric values, rules and
        hottest source lines.

    Raises:
        ReportError: The file is missing, a folder, empty, truncated or not an Nsight Compute report.
    """
    p = Path(path)
    _check_file(p)
    if use_cache:
        cached = cache_load(p)
        if cached is not None:
            if sources and resolve_all_sources(cached):
                cache_store(p, cached)
            return cached
    report = _read_ncu_rep(p, use_cache, sources)
    if sources:
        resolve_all_sources(report)
    if use_cache:
        cache_store(p, report)
    return report


def _unreadable(p: Path, fmt: int | None, ncu_version: str | None, newer: bool,
                exc: Exception) -> ReportError:
    if newer:
        return ReportError(_newer_message(p, fmt, ncu_version))
    return ReportError(f"{p} could not be read by ncu_report ({exc}); record the report again.")


def _read_ncu_rep(p: Path, use_cache: bool = False, sources: bool = False) -> NcuReport:
    ncu = _import_ncu_report()
    fmt = report_format_version(p)
    layout = read_report_layout(p)
    newer = _newer_than_reader(fmt, layout.ncu_version)
    try:
        ctx = _open_report(p, ncu.load_report(str(p)))
        refs = [(i, j) for i in range(ctx.num_ranges()) for j in range(ctx.range_by_idx(i).num_actions())]
    except Exception as exc:  # noqa: BLE001 - the native reader's errors are not for people
        raise _unreadable(p, fmt, layout.ncu_version, newer, exc) from exc
    if not refs:
        if newer:
            raise ReportError(_newer_message(p, fmt, layout.ncu_version))
        raise ReportError(
            f"{p} has no kernel that ncu_report can read: it is damaged or holds no profiled kernel; "
            "copy it again, or profile again and check the ncu filters."
        )
    notes: list[str] = []
    if newer:
        notes.append(_newer_message(p, fmt, layout.ncu_version, partly=True))
    first_process = _process_info(p)
    section_defs = layout.sections
    processes = [first_process] * len(refs)
    stored_sections: list[tuple[str, ...]] = [()] * len(refs)
    if len(layout.results) == len(refs):  # the file's results are ncu_report's actions, in order
        stored_sections = [r.sections for r in layout.results]
        pids = [r.pid for r in layout.results]
        processes = [
            (str(q), *layout.processes.get(q, first_process[1:])) if q is not None else first_process
            for q in pids
        ]
        if len(set(pids)) > 1:  # ncu numbers the kernels process by process (by process id)
            order = sorted(range(len(refs)), key=lambda i: (pids[i] or 0, i))
            refs = [refs[i] for i in order]
            processes = [processes[i] for i in order]
            stored_sections = [stored_sections[i] for i in order]

    if len(refs) >= ncu_split.SPLIT_MIN and use_children():
        from engine.reports.ncu_split import read_in_children

        split = read_in_children(p, refs, processes, stored_sections, section_defs, sources=sources)
        if split is not None:
            dec, printed_names, stored_names, resolved = split
            return _report(p, dec, refs, notes, layout, printed_names, stored_names, resolved, use_cache)
    try:
        actions = [_action(ctx, ref) for ref in refs]
    except Exception as exc:  # noqa: BLE001 - the native reader's errors are not for people
        raise _unreadable(p, fmt, layout.ncu_version, newer, exc) from exc
    dec = ActionDecoder(section_defs)
    settle_units(actions)
    stored_names = [str(a.name(a.NameBase_DEMANGLED)) for a in actions]
    printed_names = simplify_names(stored_names)  # as ncu prints them: depends on the whole report
    dec.ranges = [is_range(a) for a in actions]
    for idx, a in enumerate(actions):
        dec.add(idx, a, processes[idx], stored_sections[idx], printed_names[idx], dec.ranges[idx])
    return _report(p, dec, refs, notes, layout, printed_names, stored_names, None, use_cache)


def _report(p: Path, dec: ActionDecoder, refs: list[tuple[int, int]], notes: list[str], layout: Any,
            printed_names: list[str], stored_names: list[str], resolved: dict[int, Any] | None,
            use_cache: bool) -> NcuReport:
    """The report's tables from the decoded rows; complete (not lazy) when ``dec`` has every metric."""
    import pandas as pd

    metrics = pd.DataFrame(dec.details, columns=[*DETAILS_COLUMNS, "value", "metric"])
    report = LazyNcuReport(
        p, "ncu-rep", pd.DataFrame(dec.kernels, columns=KERNEL_COLUMNS), metrics, pd.DataFrame(), {},
        notes=notes, values=None, units={}, labels=dec.labels,
        rules=pd.DataFrame(dec.rule_table, columns=RULE_TABLE_COLUMNS),
        sources=pd.DataFrame(dec.source_table, columns=SOURCE_COLUMNS), sections=dec.sections,
        action_refs=refs, pc_samples=pd.DataFrame(dec.all_samples, columns=["ID", "pc", "samples"]),
        stored_names=stored_names, rule_columns=any(r.has_rule_results for r in layout.results),
        nvtx=dec.nvtx, launch_columns=not all(dec.ranges),
    )
    if dec.full_rows:
        raw, values = metric_frames(dec.full_rows, dec.idents, dec.full_units)
        units = dec.full_units
        report.__dict__.update(_raw=raw, _raw_units=units, _values=values, _units=dict(units))
        report.__dict__["_partial"] = None
        for kid, found in (resolved or {}).items():
            if found is not None:
                fill_sources(report, kid, found[0], pd.DataFrame(found[1], columns=LINE_COLUMNS))
        return report
    st = p.stat()
    report.__dict__["_partial"] = _Partial(
        dec.name_sets, dec.partial_nums, dec.raw_units, dec.idents, use_cache, (st.st_size, st.st_mtime_ns)
    )
    return report
