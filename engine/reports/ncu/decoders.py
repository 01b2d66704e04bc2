"""Read ``.ncu-rep`` files: with our own reader (:mod:`engine.reports.ncu.own_reader`), else NVIDIA's ``ncu_report``.

Our reader decodes the values from the file and needs ``ncu_report`` only for units (a child, once
per kind of report); the ``ncu_report`` path below stays for what it does not decode and for the
SASS of ``--source``.

``ncu_report`` is imported only when it is needed. Through it, a report is first read for the summary
(:class:`LazyNcuReport`: the details page, rules, source counters and the metrics the summary
needs); the raw page and every other metric are decoded on first use. Tables are cached on disk
(:mod:`engine.reports.ncu.cache`). Input files are only ever opened for reading.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.reports.ncu import children as ncu_split
from engine.reports.base import read_head
from engine.reports.ncu.cache import cache_load, cache_store
from engine.reports.ncu.decode import ActionDecoder, hot_sources, is_range, settle_units
from engine.reports.ncu.lazy_report import LazyNcuReport, NcuRows, Partial, sample_pairs
from engine.reports.ncu.model import (
    NcuReport,
)
from engine.reports.ncu.kernel_names import simplify_names
from engine.reports.ncu.nvidia_reader import (  # noqa: F401 - forget_open_reports: re-exported
    OPEN_LOCK,
    forget_open_reports,
    import_ncu_report,
    open_action,
    open_report,
)
from engine.reports.ncu.section_defs import read_report_layout, version_tuple
from engine.reports.ncu.children import resolve_in_children, use_children
from engine.system.errors import ReportError

if TYPE_CHECKING:
    pass


class NoResultsError(ReportError):
    """A complete report that holds no profiling result (ncu wrote it, but nothing was profiled)."""


#: What ``ncu --import R --page details|raw`` (2025.3.1) prints, on stdout, for a report of no result.
NO_RESULTS_LINE = "==WARNING== No results are found in this report.\n"


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


def resolve_sources(report: NcuReport, kernel_id: int) -> None:
    """Fill in the SASS text and file:line of one kernel's hottest instructions (``report.sources``).

    Reopens the ``.ncu-rep`` (kept open for later kernels); does nothing for CSV exports, for
    kernels already resolved, or when the file is gone (the rows keep their PCs and counts).
    """
    if not isinstance(report, LazyNcuReport) or kernel_id not in report.sources_to_resolve():
        return
    pcs = [int(r["pc"]) for r in report.source_records(kernel_id) if r["sass"] is None]
    try:
        with OPEN_LOCK:
            i, j = report.action_refs[kernel_id]
            action = open_action(open_report(report.path), (i, j))
    except Exception:  # noqa: BLE001 - the SASS text is decoration; the counts are already there
        return
    got = hot_sources(action, kernel_id, pcs, sample_pairs(report, kernel_id))
    if got is not None:
        report.fill_sources(kernel_id, got[0], got[1])


def resolve_all_sources(report: NcuReport) -> bool:
    """:func:`resolve_sources` for every kernel, decoded in child processes (what the sections page shows).

    Kernels already resolved are skipped; when the children cannot run, each kernel is resolved
    in-process. Returns whether any kernel was resolved now.
    """
    if not isinstance(report, LazyNcuReport):
        return False
    todo = report.sources_to_resolve()
    if not todo:
        return False
    found = None
    if len(todo) >= ncu_split.SPLIT_MIN and use_children():
        wanted = {k: ([int(r["pc"]) for r in report.source_records(k) if r["sass"] is None],
                      sample_pairs(report, k)) for k in todo}
        found = resolve_in_children(report.path, report.action_refs, wanted)
    if found is None:
        for k in todo:
            resolve_sources(report, k)
        return True
    for k, got in found.items():
        if got is not None:
            report.fill_sources(k, got[0], got[1])
    return True


def read_ncu_rep(path: str | Path, *, use_cache: bool = True, sources: bool = False) -> NcuReport:
    """Read a ``.ncu-rep`` file into tables.

    Decoding a kernel in ``ncu_report`` costs about 0.1 s, so the tables are cached (pickled under
    the user cache directory, keyed by the file's identity and the engine's code); ``use_cache=False``
    neither reads nor writes the cache.

    Only the metrics the summary needs are decoded now (a :class:`LazyNcuReport`): the raw page,
    ``values``/``units`` and any other metric are decoded on first use, and the cache entry is then
    rewritten with the full tables.

    A report of :data:`~engine.reports.ncu.children.SPLIT_MIN` kernels or more is decoded in child
    processes (:mod:`engine.reports.ncu.children`), complete at once: ~130 MB of ``ncu_report`` memory
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


def _read_own(p: Path, fmt: int | None, use_cache: bool) -> NcuReport | None:
    """The report decoded by our own reader (:mod:`engine.reports.ncu.own_reader`); None where it does not apply."""
    from engine.reports.ncu import own_reader as ncu_own

    if not ncu_own.enabled():
        return None
    layout = read_report_layout(p)
    got = ncu_own.decode_own(p, layout, _process_info(p))
    if got is None:
        return None
    dec, refs, printed_names, stored_names = got
    notes: list[str] = []
    if _newer_than_reader(fmt, layout.ncu_version):
        notes.append(_newer_message(p, fmt, layout.ncu_version, partly=True))
    return _report(p, dec, refs, notes, layout, printed_names, stored_names, None, use_cache)


def _read_ncu_rep(p: Path, use_cache: bool = False, sources: bool = False) -> NcuReport:
    fmt = report_format_version(p)
    if not sources:  # the SASS of every kernel's hottest instructions needs ncu_report's disassembler
        own = _read_own(p, fmt, use_cache)
        if own is not None:
            return own
    ncu = import_ncu_report()
    try:
        ctx = open_report(p, ncu.load_report(str(p)))
        refs = [(i, j) for i in range(ctx.num_ranges()) for j in range(ctx.range_by_idx(i).num_actions())]
    except Exception as exc:  # noqa: BLE001 - the native reader's errors are not for people
        wrote = read_report_layout(p).ncu_version
        raise _unreadable(p, fmt, wrote, _newer_than_reader(fmt, wrote), exc) from exc
    if len(refs) >= ncu_split.SPLIT_MIN and use_children():
        ncu_split.prespawn(p, refs, sources=sources)  # they decode while the layout is read
    layout = read_report_layout(p)
    newer = _newer_than_reader(fmt, layout.ncu_version)
    if not refs:
        if newer:
            raise ReportError(_newer_message(p, fmt, layout.ncu_version))
        raise NoResultsError(
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
        from engine.reports.ncu.children import read_in_children

        split = read_in_children(p, refs, processes, stored_sections, section_defs, sources=sources)
        if split is not None:
            dec, printed_names, stored_names, resolved = split
            return _report(p, dec, refs, notes, layout, printed_names, stored_names, resolved, use_cache)
    try:
        actions = [open_action(ctx, ref) for ref in refs]
    except Exception as exc:  # noqa: BLE001 - the native reader's errors are not for people
        raise _unreadable(p, fmt, layout.ncu_version, newer, exc) from exc
    dec = ActionDecoder(section_defs)
    dec.settled = settle_units(actions)
    stored_names = [str(a.name(a.NameBase_DEMANGLED)) for a in actions]
    printed_names = simplify_names(stored_names)  # as ncu prints them: depends on the whole report
    dec.ranges = [is_range(a) for a in actions]
    for idx, a in enumerate(actions):
        dec.add(idx, a, processes[idx], stored_sections[idx], printed_names[idx], dec.ranges[idx])
    return _report(p, dec, refs, notes, layout, printed_names, stored_names, None, use_cache)


def _report(p: Path, dec: ActionDecoder, refs: list[tuple[int, int]], notes: list[str], layout: Any,
            printed_names: list[str], stored_names: list[str], resolved: dict[int, Any] | None,
            use_cache: bool) -> NcuReport:
    """The report from the decoded rows; complete (not lazy) when ``dec`` has every metric."""
    rows = NcuRows(dec.kernels, dec.details, dec.rule_table, dec.source_table, dec.all_samples, dec.idents)
    report = LazyNcuReport(
        rows, path=p, source="ncu-rep", notes=notes, labels=dec.labels, sections=dec.sections,
        action_refs=refs, stored_names=stored_names,
        rule_columns=any(r.has_rule_results for r in layout.results), nvtx=dec.nvtx,
        launch_columns=not all(dec.ranges),
    )
    if dec.full_rows:
        rows.full_rows, rows.full_units = dec.full_rows, dec.full_units
        for kid, found in (resolved or {}).items():
            if found is not None:
                report.fill_sources(kid, found[0], found[1])
        return report
    st = p.stat()
    report.__dict__["_partial"] = Partial(
        dec.name_sets, dec.partial_nums, dec.raw_units, dec.idents, use_cache, (st.st_size, st.st_mtime_ns)
    )
    return report
